/* SPDX-License-Identifier: Apache-2.0 */
/* peer_proto.c - the pure parts of the peer protocol (peer_proto.h): block names, HMACs (OpenSSL),
 * hex, XXH3-128 sums and the strict parsers of a request's query and headers and of an answer's
 * headers. No state; fuzzed by tests/fuzz/fuzz_peer.c. */
#include "cluster/peer_proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <xxhash.h>

#include "common/strutil.h"

uint32_t peer_block_len(const struct peer_block *b)
{
    if (b->block_size == 0)
        return 0;
    uint64_t nblocks = b->size / b->block_size + (b->size % b->block_size != 0);
    if (b->index >= nblocks)
        return 0;
    uint64_t off = b->index * b->block_size; /* < size: no overflow */
    uint64_t left = b->size - off;
    return left < b->block_size ? (uint32_t)left : b->block_size;
}

/* Appends "LEN:" and the n bytes of s at out[*at]; false when cap would be passed. */
static bool put_field(char *out, size_t cap, size_t *at, const char *s, size_t n)
{
    int w = snprintf(out + *at, cap - *at, "%zu:", n);
    if (w < 0 || (size_t)w >= cap - *at || n >= cap - *at - (size_t)w)
        return false;
    *at += (size_t)w;
    memcpy(out + *at, s, n);
    *at += n;
    out[*at] = '\0';
    return true;
}

static bool put_number(char *out, size_t cap, size_t *at, uint64_t v)
{
    char num[24];
    int w = snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
    return w > 0 && put_field(out, cap, at, num, (size_t)w);
}

int peer_block_name(const struct peer_block *b, char *out, size_t cap)
{
    const char *s[4] = {b->backend, b->key, b->etag, b->version};
    const size_t max[4] = {PEER_BACKEND_MAX, PEER_KEY_MAX, PEER_ETAG_MAX, PEER_VERSION_MAX};
    size_t at = 0;
    if (cap == 0)
        return -EINVAL;
    out[0] = '\0';
    for (size_t i = 0; i < 4; i++) {
        if (!s[i])
            return -EINVAL;
        size_t n = strnlen(s[i], max[i] + 1);
        if (n > max[i] || !put_field(out, cap, &at, s[i], n))
            return -EINVAL;
    }
    if (!put_number(out, cap, &at, b->size) || !put_number(out, cap, &at, b->block_size) ||
        !put_number(out, cap, &at, b->index))
        return -EINVAL;
    return (int)at;
}

/* The longest label of a request's HMAC: "tierd-peer-req-c-q0". */
#define LABEL_MAX 24

/* HMAC-SHA256 over prefix (at most LABEL_MAX bytes), nonce, the node as a field ("LEN:" and its
 * bytes; requests only: node NULL leaves it out), name and sum (when not NULL), in one buffer:
 * the one-shot HMAC() is the part of OpenSSL's HMAC API that 3.0 does not deprecate. */
static int mac(const void *secret, size_t secret_len, const char *prefix,
               const uint8_t nonce[PEER_NONCE_LEN], const char *node, size_t node_len,
               const char *name, size_t name_len, const uint8_t *sum, uint8_t out[PEER_MAC_LEN])
{
    uint8_t msg[LABEL_MAX + PEER_NONCE_LEN + 4 + PEER_NODE_MAX + PEER_NAME_MAX + PEER_SUM_LEN];
    size_t plen = strlen(prefix);
    if (name_len > PEER_NAME_MAX || plen > LABEL_MAX || secret_len > INT32_MAX ||
        (node && (node_len == 0 || node_len > PEER_NODE_MAX)))
        return -EINVAL;
    size_t n = 0;
    memcpy(msg + n, prefix, plen);
    n += plen;
    memcpy(msg + n, nonce, PEER_NONCE_LEN);
    n += PEER_NONCE_LEN;
    if (node) {
        n += (size_t)snprintf((char *)msg + n, 5, "%zu:", node_len);
        memcpy(msg + n, node, node_len);
        n += node_len;
    }
    if (name_len)
        memcpy(msg + n, name, name_len);
    n += name_len;
    if (sum) {
        memcpy(msg + n, sum, PEER_SUM_LEN);
        n += PEER_SUM_LEN;
    }
    unsigned int olen = 0;
    if (!HMAC(EVP_sha256(), secret, (int)secret_len, msg, n, out, &olen) || olen != PEER_MAC_LEN)
        return -EIO;
    return 0;
}

int peer_req_mac(const void *secret, size_t secret_len, const uint8_t nonce[PEER_NONCE_LEN],
                 const char *node, size_t node_len, const char *name, size_t name_len,
                 uint8_t out[PEER_MAC_LEN])
{
    if (!node)
        return -EINVAL;
    return mac(secret, secret_len, "tierd-peer-req", nonce, node, node_len, name, name_len, NULL,
               out);
}

char peer_block_mode(const struct peer_block *b)
{
    return !b ? 0 : b->warm ? 'w' : b->cached_only ? 'c' : 0;
}

int peer_req_mac_mode(const void *secret, size_t secret_len, char mode, enum tier_io_class cls,
                      const uint8_t nonce[PEER_NONCE_LEN], const char *node, size_t node_len,
                      const char *name, size_t name_len, uint8_t out[PEER_MAC_LEN])
{
    char label[LABEL_MAX + 1] = "tierd-peer-req";
    size_t n = strlen(label);
    if ((mode && mode != 'c' && mode != 'w') || (unsigned)cls >= TIER_IO_NCLASSES || !node)
        return -EINVAL;
    if (mode) {
        label[n++] = '-';
        label[n++] = mode;
    }
    if (cls != TIER_IO_TRAINING) {
        label[n++] = '-';
        label[n++] = 'q';
        label[n++] = (char)('0' + (int)cls);
    }
    label[n] = '\0';
    return mac(secret, secret_len, label, nonce, node, node_len, name, name_len, NULL, out);
}

int peer_rsp_mac(const void *secret, size_t secret_len, const uint8_t nonce[PEER_NONCE_LEN],
                 const char *name, size_t name_len, const uint8_t sum[PEER_SUM_LEN],
                 uint8_t out[PEER_MAC_LEN])
{
    return mac(secret, secret_len, "tierd-peer-rsp", nonce, NULL, 0, name, name_len, sum, out);
}

bool peer_mem_equal(const void *a, const void *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

void peer_hex_encode(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int peer_hex_decode(const char *s, size_t slen, uint8_t *out, size_t n)
{
    if (!s || slen != 2 * n)
        return -EINVAL;
    for (size_t i = 0; i < slen; i++)
        if (tier_hex_digit(s[i]) < 0)
            return -EINVAL;
    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)(tier_hex_digit(s[2 * i]) << 4 | tier_hex_digit(s[2 * i + 1]));
    return 0;
}

void peer_sum(const void *buf, size_t len, uint8_t sum[PEER_SUM_LEN])
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
    memcpy(sum, c.digest, PEER_SUM_LEN);
}

/* ---- a request ------------------------------------------------------------------------------- */

void peer_query_init(struct peer_query *q)
{
    memset(q, 0, sizeof(*q));
}

/* Canonical decimal: 1..20 digits, no leading zero but "0" itself, at most max. */
static int parse_dec(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (max - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int set_string(char *dst, size_t max, const char *value, size_t n)
{
    if (n > max || memchr(value, '\0', n))
        return -EINVAL;
    memcpy(dst, value, n);
    dst[n] = '\0';
    return 0;
}

int peer_query_add(struct peer_query *q, const char *name, size_t name_len, const char *value,
                   size_t value_len)
{
    static const char names[] = "bkevszimq";
    const char *p = name_len == 1 && name[0] ? strchr(names, name[0]) : NULL;
    int rc = -EINVAL;
    if (!p || !value) {
        q->bad = true;
        return -EINVAL;
    }
    unsigned bit = 1u << (p - names);
    if (q->seen & bit) {
        q->bad = true;
        return -EINVAL;
    }
    q->seen |= bit;
    switch (*p) {
    case 'b':
        rc = set_string(q->backend, PEER_BACKEND_MAX, value, value_len);
        break;
    case 'k':
        rc = set_string(q->key, PEER_KEY_MAX, value, value_len);
        break;
    case 'e':
        rc = set_string(q->etag, PEER_ETAG_MAX, value, value_len);
        break;
    case 'v':
        rc = set_string(q->version, PEER_VERSION_MAX, value, value_len);
        break;
    case 's':
        rc = parse_dec(value, value_len, UINT64_MAX, &q->size);
        break;
    case 'z':
        rc = parse_dec(value, value_len, UINT32_MAX, &q->block_size);
        break;
    case 'i':
        rc = parse_dec(value, value_len, UINT64_MAX, &q->index);
        break;
    case 'm': /* optional: c (cached only) or w (warm) */
        rc = value_len == 1 && (value[0] == 'c' || value[0] == 'w') ? 0 : -EINVAL;
        if (!rc)
            q->mode = value[0];
        break;
    case 'q': /* optional: the asker's class, one digit 0..3 */
        rc = value_len == 1 && value[0] >= '0' && value[0] < '0' + TIER_IO_NCLASSES ? 0 : -EINVAL;
        if (!rc)
            q->cls = (uint8_t)(value[0] - '0');
        break;
    default:
        break;
    }
    if (rc)
        q->bad = true;
    return rc;
}

int peer_query_finish(const struct peer_query *q, struct peer_block *b)
{
    if (q->bad || (q->seen & 0x7f) != 0x7f || !q->backend[0] || !q->key[0] || q->block_size == 0)
        return -EINVAL;
    struct peer_block t = {
        .backend = q->backend,
        .key = q->key,
        .etag = q->etag,
        .version = q->version,
        .size = q->size,
        .block_size = (uint32_t)q->block_size,
        .index = q->index,
        .cached_only = q->mode == 'c',
        .warm = q->mode == 'w',
        .cls = q->seen & 1u << 8 ? (enum tier_io_class)q->cls : TIER_IO_TRAINING,
    };
    if (peer_block_len(&t) == 0)
        return -EINVAL;
    *b = t;
    return 0;
}

int peer_req_headers_parse(const char *node, size_t node_len, const char *nonce_hex,
                           size_t nonce_len, const char *auth_hex, size_t auth_len,
                           uint8_t nonce[PEER_NONCE_LEN], uint8_t out[PEER_MAC_LEN])
{
    if (!node || node_len == 0 || node_len > PEER_NODE_MAX)
        return -EINVAL;
    for (size_t i = 0; i < node_len; i++)
        if (node[i] < 0x21 || node[i] > 0x7e)
            return -EINVAL;
    uint8_t n[PEER_NONCE_LEN], m[PEER_MAC_LEN];
    if (peer_hex_decode(nonce_hex, nonce_len, n, sizeof(n)) ||
        peer_hex_decode(auth_hex, auth_len, m, sizeof(m)))
        return -EINVAL;
    memcpy(nonce, n, sizeof(n));
    memcpy(out, m, sizeof(m));
    return 0;
}

/* ---- an answer ------------------------------------------------------------------------------- */

int peer_rsp_headers_parse(const char *sum_hex, size_t sum_len, const char *auth_hex,
                           size_t auth_len, uint8_t sum[PEER_SUM_LEN], uint8_t out[PEER_MAC_LEN])
{
    uint8_t s[PEER_SUM_LEN], m[PEER_MAC_LEN];
    if (peer_hex_decode(sum_hex, sum_len, s, sizeof(s)) ||
        peer_hex_decode(auth_hex, auth_len, m, sizeof(m)))
        return -EBADMSG;
    memcpy(sum, s, sizeof(s));
    memcpy(out, m, sizeof(m));
    return 0;
}

int peer_rsp_verify(const void *secret, size_t secret_len, const uint8_t nonce[PEER_NONCE_LEN],
                    const char *name, size_t name_len, const uint8_t sum[PEER_SUM_LEN],
                    const uint8_t got[PEER_MAC_LEN], const void *buf, size_t len)
{
    uint8_t want[PEER_MAC_LEN], s[PEER_SUM_LEN];
    int rc = peer_rsp_mac(secret, secret_len, nonce, name, name_len, sum, want);
    if (rc)
        return rc == -EINVAL ? -EIO : rc;
    if (!peer_mem_equal(want, got, PEER_MAC_LEN))
        return -EACCES;
    peer_sum(buf, len, s);
    return peer_mem_equal(s, sum, PEER_SUM_LEN) ? 0 : -EILSEQ;
}
