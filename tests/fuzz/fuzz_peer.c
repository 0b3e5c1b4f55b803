/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_peer.c - libFuzzer target for what a peer read parses from the network
 * (cluster/peer_proto.h): a request's query values and headers (on the endpoint, from anyone who
 * can connect) and an answer's headers (on the client, from anyone who answers).
 *
 * The first byte picks the parser; the rest is split on '\n' into lines:
 *   0: query values, one "NAME=VALUE" a line (a line without '=' is a name with an empty value).
 *      Either peer_query_finish() fails with -EINVAL, leaving the block untouched, or the block
 *      has a non-empty backend and key, a block of 1..block_size bytes, and a name that
 *      peer_block_name() writes and that the same values, added in reverse order, give again
 *      (with the same mode and class; a class is 0..3).
 *   1: request headers (node, nonce, auth lines): 0 or -EINVAL, outputs untouched on -EINVAL.
 *   2: answer headers (sum, auth lines): 0 or -EBADMSG, outputs untouched on -EBADMSG; on 0 the
 *      hex of what was decoded is the input's, lower-cased.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/peer_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LINES 16

static size_t split(const char *s, size_t n, const char **line, size_t *len)
{
    size_t k = 0;
    const char *p = s, *end = s + n;
    while (k < MAX_LINES && p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        line[k] = p;
        len[k] = nl ? (size_t)(nl - p) : (size_t)(end - p);
        k++;
        if (!nl)
            break;
        p = nl + 1;
    }
    return k;
}

static void add_line(struct peer_query *q, const char *l, size_t n)
{
    const char *eq = memchr(l, '=', n);
    if (eq)
        peer_query_add(q, l, (size_t)(eq - l), eq + 1, n - (size_t)(eq - l) - 1);
    else
        peer_query_add(q, l, n, "", 0);
}

static void fuzz_query(const char **line, const size_t *len, size_t k)
{
    struct peer_query q, r;
    peer_query_init(&q);
    peer_query_init(&r);
    for (size_t i = 0; i < k; i++)
        add_line(&q, line[i], len[i]);
    for (size_t i = k; i-- > 0;)
        add_line(&r, line[i], len[i]);
    struct peer_block b, before, again;
    memset(&b, 0xa5, sizeof(b));
    before = b;
    int rc = peer_query_finish(&q, &b);
    if (rc != 0) {
        if (rc != -EINVAL || memcmp(&b, &before, sizeof(b)) != 0)
            abort();
        return;
    }
    uint32_t bl = peer_block_len(&b);
    if (!b.backend[0] || !b.key[0] || bl == 0 || bl > b.block_size ||
        (unsigned)b.cls >= TIER_IO_NCLASSES)
        abort();
    char n1[PEER_NAME_MAX + 1], n2[PEER_NAME_MAX + 1];
    int l1 = peer_block_name(&b, n1, sizeof(n1));
    if (l1 <= 0 || peer_query_finish(&r, &again) != 0)
        abort();
    int l2 = peer_block_name(&again, n2, sizeof(n2));
    if (l1 != l2 || memcmp(n1, n2, (size_t)l1) != 0 || again.cls != b.cls ||
        peer_block_mode(&again) != peer_block_mode(&b))
        abort();
}

static void fuzz_req_headers(const char **line, const size_t *len, size_t k)
{
    uint8_t nonce[PEER_NONCE_LEN], mac[PEER_MAC_LEN];
    memset(nonce, 0x5a, sizeof(nonce));
    memset(mac, 0x5a, sizeof(mac));
    int rc = peer_req_headers_parse(k > 0 ? line[0] : NULL, k > 0 ? len[0] : 0,
                                    k > 1 ? line[1] : NULL, k > 1 ? len[1] : 0,
                                    k > 2 ? line[2] : NULL, k > 2 ? len[2] : 0, nonce, mac);
    if (rc == 0)
        return;
    if (rc != -EINVAL)
        abort();
    for (size_t i = 0; i < sizeof(mac); i++)
        if (mac[i] != 0x5a || (i < sizeof(nonce) && nonce[i] != 0x5a))
            abort();
}

static void fuzz_rsp_headers(const char **line, const size_t *len, size_t k)
{
    uint8_t sum[PEER_SUM_LEN], mac[PEER_MAC_LEN];
    memset(sum, 0x5a, sizeof(sum));
    memset(mac, 0x5a, sizeof(mac));
    const char *s = k > 0 ? line[0] : NULL, *a = k > 1 ? line[1] : NULL;
    size_t sl = k > 0 ? len[0] : 0, al = k > 1 ? len[1] : 0;
    int rc = peer_rsp_headers_parse(s, sl, a, al, sum, mac);
    if (rc != 0) {
        if (rc != -EBADMSG)
            abort();
        for (size_t i = 0; i < sizeof(mac); i++)
            if (mac[i] != 0x5a || (i < sizeof(sum) && sum[i] != 0x5a))
                abort();
        return;
    }
    char hex[2 * PEER_MAC_LEN + 1];
    peer_hex_encode(sum, sizeof(sum), hex);
    for (size_t i = 0; i < sl; i++)
        if (hex[i] != tolower((unsigned char)s[i]))
            abort();
    peer_hex_encode(mac, sizeof(mac), hex);
    for (size_t i = 0; i < al; i++)
        if (hex[i] != tolower((unsigned char)a[i]))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 16)
        return 0;
    const char *line[MAX_LINES];
    size_t len[MAX_LINES];
    size_t k = split((const char *)data + 1, size - 1, line, len);
    switch (data[0] % 3) {
    case 0:
        fuzz_query(line, len, k);
        break;
    case 1:
        fuzz_req_headers(line, len, k);
        break;
    default:
        fuzz_rsp_headers(line, len, k);
        break;
    }
    return 0;
}
