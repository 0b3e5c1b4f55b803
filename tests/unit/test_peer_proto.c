/* SPDX-License-Identifier: Apache-2.0 */
/* test_peer_proto.c - unit tests for src/cluster/peer_proto.c: block names are injective, the
 * HMACs match values computed with the openssl command line, hex round-trips, and the parsers of
 * a request's query and headers and of an answer's headers refuse what is not the protocol. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/peer_proto.h"

static const char secret[] = "0123456789abcdef0123456789abcdef";

static int name_of(const struct peer_block *b, char *out)
{
    return peer_block_name(b, out, PEER_NAME_MAX + 1);
}

static void test_block_len(void **state)
{
    (void)state;
    struct peer_block b = {"s3", "k", "e", "", 10, 4, 0, false, false, TIER_IO_TRAINING};
    assert_int_equal(peer_block_len(&b), 4);
    b.index = 2;
    assert_int_equal(peer_block_len(&b), 2); /* the short last block */
    b.index = 3;
    assert_int_equal(peer_block_len(&b), 0);
    b.size = 8;
    b.index = 2;
    assert_int_equal(peer_block_len(&b), 0);
    b.index = 1;
    assert_int_equal(peer_block_len(&b), 4);
    b.block_size = 0;
    assert_int_equal(peer_block_len(&b), 0);
    b = (struct peer_block){
        "s3", "k", "e", "", UINT64_MAX, 1u << 20, UINT64_MAX >> 20, false, false, TIER_IO_TRAINING};
    assert_int_equal(peer_block_len(&b), (1u << 20) - 1);
    b.index = UINT64_MAX;
    assert_int_equal(peer_block_len(&b), 0);
}

static void test_name_known(void **state)
{
    (void)state;
    char n[PEER_NAME_MAX + 1];
    struct peer_block b = {"s3",  "data/x.bin", "abc",           "", 10000000, 4194304, 2,
                           false, false,        TIER_IO_TRAINING};
    int len = name_of(&b, n);
    assert_string_equal(n, "2:s310:data/x.bin3:abc0:8:100000007:41943041:2");
    assert_int_equal(len, (int)strlen(n));
}

/* Pairs of blocks whose fields differ only in where a boundary falls: their names differ. */
static void test_name_injective(void **state)
{
    (void)state;
    static const struct peer_block pairs[][2] = {
        {{"ab", "c", "", "", 1, 1, 0, false, false, TIER_IO_TRAINING},
         {"a", "bc", "", "", 1, 1, 0, false, false, TIER_IO_TRAINING}},
        {{"a", "b", "c", "", 1, 1, 0, false, false, TIER_IO_TRAINING},
         {"a", "", "bc", "", 1, 1, 0, false, false, TIER_IO_TRAINING}},
        {{"a", "k", "e", "v1", 1, 1, 0, false, false, TIER_IO_TRAINING},
         {"a", "k", "ev", "1", 1, 1, 0, false, false, TIER_IO_TRAINING}},
        {{"a", "1:b", "", "", 1, 1, 0, false, false, TIER_IO_TRAINING},
         {"a:1", "b", "", "", 1, 1, 0, false, false, TIER_IO_TRAINING}},
        {{"a", "k", "", "", 11, 1, 0, false, false, TIER_IO_TRAINING},
         {"a", "k", "", "", 1, 11, 0, false, false, TIER_IO_TRAINING}},
        {{"a", "k", "", "", 1, 11, 0, false, false, TIER_IO_TRAINING},
         {"a", "k", "", "", 1, 1, 10, false, false, TIER_IO_TRAINING}},
        {{"a", "k", "2:", "", 1, 1, 0, false, false, TIER_IO_TRAINING},
         {"a", "k2:", "", "", 1, 1, 0, false, false, TIER_IO_TRAINING}},
        {{"a", "k", "", "3:abc", 1, 1, 0, false, false, TIER_IO_TRAINING},
         {"a", "k", "3:abc", "", 1, 1, 0, false, false, TIER_IO_TRAINING}},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        char a[PEER_NAME_MAX + 1], b[PEER_NAME_MAX + 1];
        assert_true(name_of(&pairs[i][0], a) > 0);
        assert_true(name_of(&pairs[i][1], b) > 0);
        assert_string_not_equal(a, b);
    }
}

static void test_name_bounds(void **state)
{
    (void)state;
    static char key[PEER_KEY_MAX + 2];
    memset(key, 'k', PEER_KEY_MAX);
    key[PEER_KEY_MAX] = '\0';
    static char big[PEER_VERSION_MAX + 1];
    memset(big, 'v', PEER_VERSION_MAX);
    char backend[PEER_BACKEND_MAX + 1], etag[PEER_ETAG_MAX + 1];
    memset(backend, 'b', PEER_BACKEND_MAX);
    backend[PEER_BACKEND_MAX] = '\0';
    memset(etag, 'e', PEER_ETAG_MAX);
    etag[PEER_ETAG_MAX] = '\0';
    /* every field at its bound, every number at its widest: fits PEER_NAME_MAX */
    struct peer_block b = {backend,    key,        etag,  big,   UINT64_MAX,
                           UINT32_MAX, UINT64_MAX, false, false, TIER_IO_TRAINING};
    char n[PEER_NAME_MAX + 1];
    assert_true(name_of(&b, n) > 0);
    assert_true(peer_block_name(&b, n, 100) == -EINVAL);
    key[PEER_KEY_MAX] = 'k'; /* one over */
    assert_int_equal(name_of(&b, n), -EINVAL);
    key[PEER_KEY_MAX] = '\0';
    b.etag = NULL;
    assert_int_equal(name_of(&b, n), -EINVAL);
}

static void test_mac_known(void **state)
{
    (void)state;
    /* Computed offline with the openssl command line (and checked with Python's hmac):
     *   { printf 'tierd-peer-req'; printf '\x00\x01...\x0f'; printf '6:node-a'; \
     *     printf '2:s310:data/x.bin3:abc0:8:100000007:41943041:2'; } > req.bin
     *   openssl dgst -sha256 -hmac 0123456789abcdef0123456789abcdef req.bin
     * and the same for the answer with 'tierd-peer-rsp' and the sum ff ee dd ... 11 00 after the
     * name. */
    static const char req_hex[] =
        "ef10b291aa0c75b183b8a06ac4f914db874442d35a1a0bdd4cbfaa2b008e420c";
    static const char rsp_hex[] =
        "680766f7ca13054c4318c80a00d95d2b8af261bb06d2ba5887d85c9f784a4852";
    uint8_t nonce[PEER_NONCE_LEN], sum[PEER_SUM_LEN], mac[PEER_MAC_LEN];
    for (int i = 0; i < PEER_NONCE_LEN; i++) {
        nonce[i] = (uint8_t)i;
        sum[i] = (uint8_t)(0xff - 0x11 * i);
    }
    const char *name = "2:s310:data/x.bin3:abc0:8:100000007:41943041:2";
    char hex[2 * PEER_MAC_LEN + 1];
    assert_int_equal(
        peer_req_mac(secret, strlen(secret), nonce, "node-a", 6, name, strlen(name), mac), 0);
    peer_hex_encode(mac, sizeof(mac), hex);
    assert_string_equal(hex, req_hex);
    assert_int_equal(peer_rsp_mac(secret, strlen(secret), nonce, name, strlen(name), sum, mac), 0);
    peer_hex_encode(mac, sizeof(mac), hex);
    assert_string_equal(hex, rsp_hex);
    /* and verify accepts it, over bytes whose sum it is */
    uint8_t s[PEER_SUM_LEN];
    peer_sum("hello", 5, s);
    assert_int_equal(peer_rsp_mac(secret, strlen(secret), nonce, name, strlen(name), s, mac), 0);
    assert_int_equal(
        peer_rsp_verify(secret, strlen(secret), nonce, name, strlen(name), s, mac, "hello", 5), 0);
    assert_int_equal(
        peer_rsp_verify(secret, strlen(secret), nonce, name, strlen(name), s, mac, "hellO", 5),
        -EILSEQ);
    mac[7] ^= 1;
    assert_int_equal(
        peer_rsp_verify(secret, strlen(secret), nonce, name, strlen(name), s, mac, "hello", 5),
        -EACCES);
    mac[7] ^= 1;
    nonce[0] ^= 1; /* another request's nonce */
    assert_int_equal(
        peer_rsp_verify(secret, strlen(secret), nonce, name, strlen(name), s, mac, "hello", 5),
        -EACCES);
}

static void test_hex(void **state)
{
    (void)state;
    uint8_t in[256], out[256];
    char hex[513];
    for (int i = 0; i < 256; i++)
        in[i] = (uint8_t)i;
    peer_hex_encode(in, sizeof(in), hex);
    assert_int_equal(strlen(hex), 512);
    assert_int_equal(peer_hex_decode(hex, 512, out, sizeof(out)), 0);
    assert_memory_equal(in, out, sizeof(in));
    uint8_t two[2] = {0x55, 0x55};
    assert_int_equal(peer_hex_decode("ABcd", 4, two, 2), 0);
    assert_int_equal(two[0], 0xab);
    assert_int_equal(two[1], 0xcd);
    static const char *bad[] = {"abc", "abcde", "0g12", " 012", "01 2", "+123"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t t[2] = {1, 2};
        assert_int_equal(peer_hex_decode(bad[i], strlen(bad[i]), t, 2), -EINVAL);
        assert_int_equal(t[0], 1);
        assert_int_equal(t[1], 2);
    }
    assert_int_equal(peer_hex_decode(NULL, 0, two, 0), -EINVAL);
}

/* Parses "n=v&n=v..." (no escapes) into q; the result of peer_query_finish. */
static int parse_query(const char *s, struct peer_query *q, struct peer_block *b)
{
    peer_query_init(q);
    const char *p = s;
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (eq)
            peer_query_add(q, p, (size_t)(eq - p), eq + 1, n - (size_t)(eq - p) - 1);
        else
            peer_query_add(q, p, n, "", 0);
        p += n + (amp ? 1 : 0);
    }
    return peer_query_finish(q, b);
}

static void test_query_valid(void **state)
{
    (void)state;
    struct peer_query q;
    struct peer_block b;
    assert_int_equal(parse_query("i=2&z=4194304&s=10000000&v=&e=abc&k=data/x.bin&b=s3", &q, &b), 0);
    assert_string_equal(b.backend, "s3");
    assert_string_equal(b.key, "data/x.bin");
    assert_string_equal(b.etag, "abc");
    assert_string_equal(b.version, "");
    assert_true(b.size == 10000000);
    assert_true(b.block_size == 4194304);
    assert_true(b.index == 2);
    char n[PEER_NAME_MAX + 1];
    name_of(&b, n);
    assert_string_equal(n, "2:s310:data/x.bin3:abc0:8:100000007:41943041:2");
    assert_int_equal(
        parse_query("b=s3&k=k&e=&v=&s=18446744073709551615&z=4294967295&i=4294967296", &q, &b), 0);
    assert_true(b.size == UINT64_MAX);
    assert_true(b.block_size == UINT32_MAX);
    assert_true(peer_block_len(&b) == UINT32_MAX); /* (2^32 - 1)(2^32 + 1) = 2^64 - 1 */
    assert_int_equal(
        parse_query("b=s3&k=k&e=&v=&s=18446744073709551615&z=4294967295&i=4294967297", &q, &b),
        -EINVAL);
}

/* The request's mode (m): optional, c or w, once; not in the name, but in the request's HMAC */
static void test_query_mode(void **state)
{
    (void)state;
    struct peer_query q;
    struct peer_block b;
    assert_int_equal(parse_query("b=s3&k=k&e=&v=&s=10&z=4&i=0", &q, &b), 0);
    assert_false(b.cached_only || b.warm);
    assert_int_equal(peer_block_mode(&b), 0);
    assert_int_equal(parse_query("b=s3&k=k&e=&v=&s=10&z=4&i=0&m=c", &q, &b), 0);
    assert_true(b.cached_only && !b.warm);
    assert_int_equal(peer_block_mode(&b), 'c');
    char n1[PEER_NAME_MAX + 1], n2[PEER_NAME_MAX + 1];
    name_of(&b, n1);
    assert_int_equal(parse_query("m=w&b=s3&k=k&e=&v=&s=10&z=4&i=0", &q, &b), 0);
    assert_true(b.warm && !b.cached_only);
    name_of(&b, n2);
    assert_string_equal(n1, n2);
    assert_int_equal(parse_query("b=s3&k=k&e=&v=&s=10&z=4&i=0&m=x", &q, &b), -EINVAL);
    assert_int_equal(parse_query("b=s3&k=k&e=&v=&s=10&z=4&i=0&m=", &q, &b), -EINVAL);
    assert_int_equal(parse_query("b=s3&k=k&e=&v=&s=10&z=4&i=0&m=c&m=c", &q, &b), -EINVAL);
    assert_int_equal(parse_query("b=s3&k=k&e=&v=&s=10&z=4&m=c", &q, &b), -EINVAL);

    uint8_t nonce[PEER_NONCE_LEN] = {1, 2, 3}, m0[PEER_MAC_LEN], mc[PEER_MAC_LEN], mw[PEER_MAC_LEN],
            m0b[PEER_MAC_LEN];
    const char *sec = "0123456789abcdef";
    assert_int_equal(peer_req_mac(sec, 16, nonce, "n", 1, n1, strlen(n1), m0), 0);
    assert_int_equal(
        peer_req_mac_mode(sec, 16, 0, TIER_IO_TRAINING, nonce, "n", 1, n1, strlen(n1), m0b), 0);
    assert_int_equal(
        peer_req_mac_mode(sec, 16, 'c', TIER_IO_TRAINING, nonce, "n", 1, n1, strlen(n1), mc), 0);
    assert_int_equal(
        peer_req_mac_mode(sec, 16, 'w', TIER_IO_TRAINING, nonce, "n", 1, n1, strlen(n1), mw), 0);
    assert_memory_equal(m0, m0b, PEER_MAC_LEN);
    assert_memory_not_equal(m0, mc, PEER_MAC_LEN);
    assert_memory_not_equal(m0, mw, PEER_MAC_LEN);
    assert_memory_not_equal(mc, mw, PEER_MAC_LEN);
    /* the node is in the MAC: another id, or one that is a prefix of it, gives another MAC */
    uint8_t mn[PEER_MAC_LEN];
    assert_int_equal(peer_req_mac(sec, 16, nonce, "m", 1, n1, strlen(n1), mn), 0);
    assert_memory_not_equal(m0, mn, PEER_MAC_LEN);
    assert_int_equal(peer_req_mac(sec, 16, nonce, "nn", 2, n1, strlen(n1), mn), 0);
    assert_memory_not_equal(m0, mn, PEER_MAC_LEN);
    assert_int_equal(peer_req_mac(sec, 16, nonce, NULL, 0, n1, strlen(n1), mn), -EINVAL);
    assert_int_equal(peer_req_mac(sec, 16, nonce, "n", 0, n1, strlen(n1), mn), -EINVAL);
    assert_int_equal(
        peer_req_mac_mode(sec, 16, 'x', TIER_IO_TRAINING, nonce, "n", 1, n1, strlen(n1), mw),
        -EINVAL);
}

/* The asker's class (q): optional, one digit 0..3, once, absent training; not in the name, but in
 * the request's HMAC, so a request whose q was changed fails it */
static void test_query_class(void **state)
{
    (void)state;
    struct peer_query q;
    struct peer_block b;
    assert_int_equal(parse_query("b=s3&k=k&e=&v=&s=10&z=4&i=0", &q, &b), 0);
    assert_int_equal(b.cls, TIER_IO_TRAINING);
    char n0[PEER_NAME_MAX + 1], n1[PEER_NAME_MAX + 1];
    name_of(&b, n0);
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        char qs[64];
        snprintf(qs, sizeof(qs), "q=%d&b=s3&k=k&e=&v=&s=10&z=4&i=0&m=w", c);
        assert_int_equal(parse_query(qs, &q, &b), 0);
        assert_int_equal(b.cls, c);
        assert_true(b.warm);
        name_of(&b, n1);
        assert_string_equal(n0, n1);
    }
    static const char *bad[] = {"q=4", "q=", "q=00", "q=-1", "q=i", "q=1&q=1", "q=10"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char qs[64];
        snprintf(qs, sizeof(qs), "b=s3&k=k&e=&v=&s=10&z=4&i=0&%s", bad[i]);
        assert_int_equal(parse_query(qs, &q, &b), -EINVAL);
    }

    /* one MAC per (mode, class): training's is the plain label's; any other differs */
    uint8_t nonce[PEER_NONCE_LEN] = {4, 5, 6}, plain[PEER_MAC_LEN];
    uint8_t m[3][TIER_IO_NCLASSES][PEER_MAC_LEN];
    const char *sec = "0123456789abcdef";
    const char modes[3] = {0, 'c', 'w'};
    assert_int_equal(peer_req_mac(sec, 16, nonce, "n", 1, n0, strlen(n0), plain), 0);
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < TIER_IO_NCLASSES; c++)
            assert_int_equal(peer_req_mac_mode(sec, 16, modes[k], (enum tier_io_class)c, nonce, "n",
                                               1, n0, strlen(n0), m[k][c]),
                             0);
    assert_memory_equal(plain, m[0][TIER_IO_TRAINING], PEER_MAC_LEN);
    for (int a = 0; a < 3 * TIER_IO_NCLASSES; a++)
        for (int z = a + 1; z < 3 * TIER_IO_NCLASSES; z++)
            assert_memory_not_equal(m[a / TIER_IO_NCLASSES][a % TIER_IO_NCLASSES],
                                    m[z / TIER_IO_NCLASSES][z % TIER_IO_NCLASSES], PEER_MAC_LEN);
    assert_int_equal(
        peer_req_mac_mode(sec, 16, 0, TIER_IO_NCLASSES, nonce, "n", 1, n0, strlen(n0), plain),
        -EINVAL);
}

static void test_query_refuses(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "b=s3&k=k&e=&v=&s=10&z=4",                        /* no index */
        "b=s3&k=k&e=&v=&s=10&z=4&i=0&i=0",                /* repeated */
        "b=s3&k=k&e=&v=&s=10&z=4&i=0&x=1",                /* unknown */
        "b=s3&k=k&e=&v=&s=10&z=4&i=0&bb=1",               /* unknown */
        "b=&k=k&e=&v=&s=10&z=4&i=0",                      /* empty backend */
        "b=s3&k=&e=&v=&s=10&z=4&i=0",                     /* empty key */
        "b=s3&k=k&e=&v=&s=10&z=0&i=0",                    /* block size 0 */
        "b=s3&k=k&e=&v=&s=10&z=4&i=3",                    /* past the end */
        "b=s3&k=k&e=&v=&s=0&z=4&i=0",                     /* an empty object has no block */
        "b=s3&k=k&e=&v=&s=18446744073709551616&z=4&i=0",  /* overflow */
        "b=s3&k=k&e=&v=&s=99999999999999999999&z=4&i=0",  /* overflow */
        "b=s3&k=k&e=&v=&s=10&z=4294967296&i=0",           /* z over 32 bits */
        "b=s3&k=k&e=&v=&s=10&z=4&i=-1",                   /* sign */
        "b=s3&k=k&e=&v=&s=+10&z=4&i=0",                   /* sign */
        "b=s3&k=k&e=&v=&s=010&z=4&i=0",                   /* leading zero */
        "b=s3&k=k&e=&v=&s=10 &z=4&i=0",                   /* space */
        "b=s3&k=k&e=&v=&s=0x10&z=4&i=0",                  /* hex */
        "b=s3&k=k&e=&v=&s=&z=4&i=0",                      /* empty number */
        "b=s3&k=k&e=&v=&s=123456789012345678901&z=4&i=0", /* 21 digits */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct peer_query q;
        struct peer_block b = {.backend = "untouched"};
        assert_int_equal(parse_query(bad[i], &q, &b), -EINVAL);
        assert_string_equal(b.backend, "untouched");
    }
    /* a NUL inside a value, a string over its bound */
    struct peer_query q;
    peer_query_init(&q);
    assert_int_equal(peer_query_add(&q, "k", 1, "a\0b", 3), -EINVAL);
    static char key[PEER_KEY_MAX + 1];
    memset(key, 'k', sizeof(key));
    peer_query_init(&q);
    assert_int_equal(peer_query_add(&q, "k", 1, key, PEER_KEY_MAX), 0);
    peer_query_init(&q);
    assert_int_equal(peer_query_add(&q, "k", 1, key, PEER_KEY_MAX + 1), -EINVAL);
    assert_int_equal(peer_query_add(&q, "b", 1, key, PEER_BACKEND_MAX + 1), -EINVAL);
    assert_int_equal(peer_query_add(&q, "\0", 1, "x", 1), -EINVAL);
}

static void test_headers(void **state)
{
    (void)state;
    uint8_t nonce[PEER_NONCE_LEN], mac[PEER_MAC_LEN], sum[PEER_SUM_LEN];
    const char *n32 = "000102030405060708090a0b0c0d0e0f";
    const char *m64 = "ef10b291aa0c75b183b8a06ac4f914db874442d35a1a0bdd4cbfaa2b008e420c";
    assert_int_equal(peer_req_headers_parse("node-1", 6, n32, 32, m64, 64, nonce, mac), 0);
    assert_int_equal(nonce[15], 15);
    assert_int_equal(mac[0], 0xef);
    assert_int_equal(peer_req_headers_parse(NULL, 0, n32, 32, m64, 64, nonce, mac), -EINVAL);
    assert_int_equal(peer_req_headers_parse("", 0, n32, 32, m64, 64, nonce, mac), -EINVAL);
    assert_int_equal(peer_req_headers_parse("a b", 3, n32, 32, m64, 64, nonce, mac), -EINVAL);
    assert_int_equal(peer_req_headers_parse("n", 1, n32, 31, m64, 64, nonce, mac), -EINVAL);
    assert_int_equal(peer_req_headers_parse("n", 1, n32, 32, m64, 63, nonce, mac), -EINVAL);
    assert_int_equal(peer_req_headers_parse("n", 1, n32, 32, NULL, 0, nonce, mac), -EINVAL);
    assert_int_equal(peer_rsp_headers_parse(n32, 32, m64, 64, sum, mac), 0);
    assert_int_equal(sum[1], 1);
    assert_int_equal(peer_rsp_headers_parse(NULL, 0, m64, 64, sum, mac), -EBADMSG);
    assert_int_equal(peer_rsp_headers_parse(n32, 32, n32, 32, sum, mac), -EBADMSG);
    assert_int_equal(peer_rsp_headers_parse(m64, 64, m64, 64, sum, mac), -EBADMSG);
    assert_int_equal(
        peer_rsp_headers_parse("z00102030405060708090a0b0c0d0e0f", 32, m64, 64, sum, mac),
        -EBADMSG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_len),      cmocka_unit_test(test_name_known),
        cmocka_unit_test(test_name_injective), cmocka_unit_test(test_name_bounds),
        cmocka_unit_test(test_mac_known),      cmocka_unit_test(test_hex),
        cmocka_unit_test(test_query_valid),    cmocka_unit_test(test_query_refuses),
        cmocka_unit_test(test_headers),        cmocka_unit_test(test_query_mode),
        cmocka_unit_test(test_query_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
