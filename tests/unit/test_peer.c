/* SPDX-License-Identifier: Apache-2.0 */
/* test_peer.c - unit tests for src/cluster/peer.c: a client reads blocks from an in-process
 * endpoint (plain and TLS), each failure of the serve callback, of the secret and of fencing maps
 * to its error, and a client facing bad servers (a raw socket server on a thread answering canned
 * bytes) fails with the right reason, counted, and never crashes. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/peer.h"
#include "cluster/peer_proto.h"
#include "common/err.h"
#include "testutil.h"

static const char secret[] = "a cluster secret of 32 bytes....";
static const char other_secret[] = "another secret, as long as that.";

/* ---- an endpoint serving deterministic bytes ------------------------------------------------- */

static bool g_may_serve = true;    /* atomic */
static int g_last_cls = -1;        /* atomic: the class of the last block served */
static bool g_node_seen_ok = true; /* atomic: every from_node was "node-a" */

static uint8_t byte_at(const char *key, uint64_t index, size_t j)
{
    return (uint8_t)((uint8_t)key[0] + index * 251 + j * 31 + (j >> 9));
}

static void fill(const struct peer_block *b, uint8_t *buf, size_t len)
{
    for (size_t j = 0; j < len; j++)
        buf[j] = byte_at(b->key, b->index, j);
}

static ssize_t serve(void *ud, const char *from_node, const struct peer_block *b, void *buf,
                     size_t len)
{
    (void)ud;
    if (strcmp(from_node, "node-a") != 0)
        __atomic_store_n(&g_node_seen_ok, false, __ATOMIC_RELAXED);
    if (len != peer_block_len(b))
        return -EIO;
    __atomic_store_n(&g_last_cls, (int)b->cls, __ATOMIC_RELAXED);
    static const struct {
        const char *key;
        int err;
    } fails[] = {{"missing", -ENOENT},
                 {"stale", -ESTALE},
                 {"xdev", -EXDEV},
                 {"busy", -EAGAIN},
                 {"broken", -EIO}};
    for (size_t i = 0; i < sizeof(fails) / sizeof(fails[0]); i++)
        if (strcmp(b->key, fails[i].key) == 0)
            return fails[i].err;
    fill(b, buf, len);
    return (ssize_t)len;
}

static bool may_serve(void *ud)
{
    (void)ud;
    return __atomic_load_n(&g_may_serve, __ATOMIC_RELAXED);
}

static struct peer_server *server_start(const char *cert, const char *key)
{
    struct peer_server_conf conf = {
        .listen = "127.0.0.1:0",
        .secret = secret,
        .secret_len = strlen(secret),
        .tls_cert = cert,
        .tls_key = key,
        .serve = serve,
        .may_serve = may_serve,
    };
    struct peer_server *s = NULL;
    int rc = peer_server_start(&conf, &s);
    if (rc)
        fprintf(stderr, "peer_server_start: %s\n", tier_err_msg());
    assert_int_equal(rc, 0);
    assert_non_null(s);
    assert_true(peer_server_port(s) != 0);
    return s;
}

/* Generous deadlines: a loaded machine is slow, never a reason to fail. */
static struct peer_client *client_new(const char *sec, const char *ca, uint32_t stall_ms)
{
    struct peer_client_conf conf = {
        .node_id = "node-a",
        .secret = sec,
        .secret_len = strlen(sec),
        .tls_ca = ca,
        .stall_ms = stall_ms ? stall_ms : 30000,
        .total_ms = 120000,
    };
    struct peer_client *pc = NULL;
    assert_int_equal(peer_client_new(&conf, &pc), 0);
    return pc;
}

static void addr_of(uint16_t port, char *out, size_t cap)
{
    snprintf(out, cap, "127.0.0.1:%u", (unsigned)port);
}

static struct peer_block block(const char *key, uint64_t size, uint32_t bs, uint64_t index)
{
    return (struct peer_block){.backend = "s3",
                               .key = key,
                               .etag = "etag-1",
                               .version = "",
                               .size = size,
                               .block_size = bs,
                               .index = index,
                               .cls = TIER_IO_TRAINING};
}

/* Reads block b from addr and checks its bytes: 0, or the fetch's error. */
static ssize_t read_check(struct peer_client *pc, const char *addr, const struct peer_block *b,
                          enum peer_fail *f)
{
    size_t len = peer_block_len(b);
    uint8_t *buf = malloc(len), *want = malloc(len);
    assert_non_null(buf);
    assert_non_null(want);
    ssize_t n = peer_fetch(pc, addr, b, buf, len, f);
    if (n >= 0) {
        assert_int_equal(n, (ssize_t)len);
        fill(b, want, len);
        assert_memory_equal(buf, want, len);
    }
    free(buf);
    free(want);
    return n;
}

static void test_read_blocks(void **state)
{
    (void)state;
    struct peer_server *s = server_start(NULL, NULL);
    struct peer_client *pc = client_new(secret, NULL, 0);
    char addr[64];
    addr_of(peer_server_port(s), addr, sizeof(addr));
    /* a 1 MiB + 5 object in 256 KiB blocks (the last one 5 bytes), 1-byte blocks, one block of
     * 4 MiB, and keys and versions that need escaping */
    uint64_t total = 0, n = 0;
    for (uint64_t i = 0; i < 5; i++) {
        struct peer_block b = block("obj/one", (1u << 20) + 5, 256u << 10, i);
        assert_int_equal(read_check(pc, addr, &b, NULL), (ssize_t)peer_block_len(&b));
        total += peer_block_len(&b);
        n++;
    }
    struct peer_block tiny = block("t", 3, 1, 2);
    assert_int_equal(read_check(pc, addr, &tiny, NULL), 1);
    struct peer_block big = block("big", 4u << 20, 4u << 20, 0);
    assert_int_equal(read_check(pc, addr, &big, NULL), 4 << 20);
    struct peer_block odd = {"s3 x",    "dir/a b&c=d%e+f?g#h\xc3\xa9",
                             "\"e t\"", "v=1&2",
                             100,       64,
                             1,         false,
                             false,     TIER_IO_TRAINING};
    assert_int_equal(read_check(pc, addr, &odd, NULL), 36);
    total += 1 + (4u << 20) + 36;
    n += 3;
    struct peer_server_stats ss;
    peer_server_stats_get(s, &ss);
    assert_true(ss.served == n);
    assert_true(ss.served_bytes == total);
    assert_true(ss.auth_failures == 0 && ss.bad_requests == 0 && ss.errors == 0);
    struct peer_client_stats cs;
    peer_client_stats_get(pc, &cs);
    assert_true(cs.requests == n && cs.ok == n && cs.bytes == total);
    for (int f = 0; f < PEER_FAIL_N; f++)
        assert_true(cs.fail[f] == 0);
    assert_true(__atomic_load_n(&g_node_seen_ok, __ATOMIC_RELAXED));
    /* a caller's mistake is -EINVAL, not a request */
    uint8_t buf[8];
    struct peer_block b = block("k", 10, 4, 0);
    assert_int_equal(peer_fetch(pc, addr, &b, buf, 3, NULL), -EINVAL);
    assert_int_equal(peer_fetch(pc, "127.0.0.1/x:1", &b, buf, 4, NULL), -EINVAL);
    b.index = 3;
    assert_int_equal(peer_fetch(pc, addr, &b, buf, 0, NULL), -EINVAL);
    peer_client_stats_get(pc, &cs);
    assert_true(cs.requests == n);
    assert_int_equal(peer_ping(pc, addr, NULL), 0);
    peer_client_free(pc);
    peer_server_stop(s);
}

struct reader {
    struct peer_client *pc;
    const char *addr;
    unsigned seed, ok;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    for (unsigned i = 0; i < 25; i++) {
        struct peer_block b = block(r->seed % 2 ? "odd" : "even", 100000, 16384, (i + r->seed) % 7);
        size_t len = peer_block_len(&b);
        uint8_t buf[16384], want[16384];
        fill(&b, want, len);
        if (peer_fetch(r->pc, r->addr, &b, buf, len, NULL) == (ssize_t)len &&
            memcmp(buf, want, len) == 0)
            r->ok++;
    }
    return NULL;
}

/* Threads sharing one client (its pool of handles) and one endpoint. */
static void test_concurrent(void **state)
{
    (void)state;
    struct peer_server *s = server_start(NULL, NULL);
    struct peer_client *pc = client_new(secret, NULL, 0);
    char addr[64];
    addr_of(peer_server_port(s), addr, sizeof(addr));
    struct reader r[4];
    pthread_t th[4];
    for (unsigned i = 0; i < 4; i++) {
        r[i] = (struct reader){pc, addr, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &r[i]), 0);
    }
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(r[i].ok, 25);
    }
    struct peer_client_stats cs;
    peer_client_stats_get(pc, &cs);
    assert_true(cs.requests == 100 && cs.ok == 100);
    struct peer_server_stats ss;
    peer_server_stats_get(s, &ss);
    assert_true(ss.served == 100);
    peer_client_free(pc);
    peer_server_stop(s);
}

static void test_wrong_secret(void **state)
{
    (void)state;
    struct peer_server *s = server_start(NULL, NULL);
    struct peer_client *pc = client_new(other_secret, NULL, 0);
    char addr[64];
    addr_of(peer_server_port(s), addr, sizeof(addr));
    struct peer_block b = block("k", 100, 64, 0);
    enum peer_fail f = PEER_FAIL_N;
    assert_int_equal(read_check(pc, addr, &b, &f), -EACCES);
    assert_int_equal(f, PEER_FAIL_AUTH);
    f = PEER_FAIL_N;
    assert_int_equal(peer_ping(pc, addr, &f), -EACCES);
    assert_int_equal(f, PEER_FAIL_AUTH);
    struct peer_server_stats ss;
    peer_server_stats_get(s, &ss);
    assert_true(ss.auth_failures == 2 && ss.served == 0);
    struct peer_client_stats cs;
    peer_client_stats_get(pc, &cs);
    assert_true(cs.requests == 1 && cs.ok == 0 && cs.fail[PEER_FAIL_AUTH] == 1);
    peer_client_free(pc);
    peer_server_stop(s);
}

static void test_serve_errors(void **state)
{
    (void)state;
    struct peer_server *s = server_start(NULL, NULL);
    struct peer_client *pc = client_new(secret, NULL, 0);
    char addr[64];
    addr_of(peer_server_port(s), addr, sizeof(addr));
    static const struct {
        const char *key;
        int err;
        enum peer_fail f;
    } cases[] = {
        {"missing", -ENOENT, PEER_FAIL_NOT_FOUND}, {"stale", -ESTALE, PEER_FAIL_STALE},
        {"xdev", -EAGAIN, PEER_FAIL_REFUSED},      {"busy", -EAGAIN, PEER_FAIL_REFUSED},
        {"broken", -EIO, PEER_FAIL_ERROR},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct peer_block b = block(cases[i].key, 100, 64, 1);
        enum peer_fail f = PEER_FAIL_N;
        assert_int_equal(read_check(pc, addr, &b, &f), cases[i].err);
        assert_int_equal(f, cases[i].f);
    }
    /* fenced: may_serve false is a 503 before the callback */
    __atomic_store_n(&g_may_serve, false, __ATOMIC_RELAXED);
    struct peer_block b = block("k", 100, 64, 0);
    enum peer_fail f = PEER_FAIL_N;
    assert_int_equal(read_check(pc, addr, &b, &f), -EAGAIN);
    assert_int_equal(f, PEER_FAIL_REFUSED);
    __atomic_store_n(&g_may_serve, true, __ATOMIC_RELAXED);
    struct peer_server_stats ss;
    peer_server_stats_get(s, &ss);
    assert_true(ss.not_found == 1 && ss.stale == 1 && ss.mismatched == 1 && ss.refused == 2 &&
                ss.errors == 1 && ss.served == 0);
    struct peer_client_stats cs;
    peer_client_stats_get(pc, &cs);
    assert_true(cs.requests == 6 && cs.ok == 0);
    assert_true(cs.fail[PEER_FAIL_NOT_FOUND] == 1 && cs.fail[PEER_FAIL_STALE] == 1 &&
                cs.fail[PEER_FAIL_REFUSED] == 3 && cs.fail[PEER_FAIL_ERROR] == 1);
    /* and it still serves */
    assert_int_equal(read_check(pc, addr, &b, NULL), 64);
    peer_client_free(pc);
    peer_server_stop(s);
}

static void write_all(int fd, const void *p, size_t n);

/* Sends a raw request to 127.0.0.1:port; the answer's status code, or -1. */
static int raw_status(uint16_t port, const char *req)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    write_all(fd, req, strlen(req));
    char buf[256];
    size_t got = 0;
    while (got < 12) {
        ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    int status = -1;
    if (got >= 12 && strncmp(buf, "HTTP/1.", 7) == 0)
        status = (int)strtol(buf + 9, NULL, 10);
    return status;
}

/* The status of GET /v1/block?QEXTRA with the nonce and MAC headers, and X-Tierd-Node: NODE
 * unless node is NULL. */
static int signed_status(uint16_t port, const char *q, const char *extra, const char *node,
                         const char *nonce_hex, const char *mac_hex)
{
    char req[1024], nh[64] = "";
    if (node)
        snprintf(nh, sizeof(nh), "X-Tierd-Node: %s\r\n", node);
    snprintf(req, sizeof(req),
             "GET /v1/block?%s%s HTTP/1.1\r\nHost: x\r\n%sX-Tierd-Nonce: %s\r\n"
             "X-Tierd-Auth: %s\r\n\r\n",
             q, extra, nh, nonce_hex, mac_hex);
    return raw_status(port, req);
}

/* Requests no client of ours sends: each answered with its status and counted. */
static void test_server_bad_requests(void **state)
{
    (void)state;
    struct peer_server *s = server_start(NULL, NULL);
    uint16_t port = peer_server_port(s);
    const char *q = "b=s3&k=k&e=&v=&s=1000000000&z=134217728&i=0";
    char req[1024];
    assert_int_equal(raw_status(port, "GET /v1/other HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    assert_int_equal(
        raw_status(port, "POST /v1/block HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"), 400);
    assert_int_equal(raw_status(port, "GET /v1/block?b=s3&k=k HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    snprintf(req, sizeof(req), "GET /v1/block?%s&z=1 HTTP/1.1\r\nHost: x\r\n\r\n", q);
    assert_int_equal(raw_status(port, req), 400); /* z twice */
    snprintf(req, sizeof(req), "GET /v1/block?%s HTTP/1.1\r\nHost: x\r\n\r\n", q);
    assert_int_equal(raw_status(port, req), 401); /* no headers */
    assert_int_equal(raw_status(port, "GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n"), 401);
    /* authentic, for a block size over PEER_BLOCK_SIZE_MAX: 409, the callback not called */
    struct peer_block b = {"s3",      "k", "",    "",    1000000000,
                           134217728, 0,   false, false, TIER_IO_TRAINING};
    char name[PEER_NAME_MAX + 1], nonce_hex[33], mac_hex[65];
    uint8_t nonce[PEER_NONCE_LEN] = {1, 2, 3}, mac[PEER_MAC_LEN];
    int nl = peer_block_name(&b, name, sizeof(name));
    assert_int_equal(peer_req_mac(secret, strlen(secret), nonce, "n", 1, name, (size_t)nl, mac), 0);
    peer_hex_encode(nonce, sizeof(nonce), nonce_hex);
    peer_hex_encode(mac, sizeof(mac), mac_hex);
    assert_int_equal(signed_status(port, q, "", "n", nonce_hex, mac_hex), 409);
    /* the same with the node missing */
    assert_int_equal(signed_status(port, q, "", NULL, nonce_hex, mac_hex), 401);
    /* ... and with another node's id than the MAC's: the id was changed on the way */
    assert_int_equal(signed_status(port, q, "", "m", nonce_hex, mac_hex), 401);
    /* the asker's class: q=7 is no class (400); q=3 with the MAC of training (no q) is a
     * request whose class was changed on the way (401) */
    assert_int_equal(signed_status(port, q, "&q=7", "n", nonce_hex, mac_hex), 400);
    assert_int_equal(signed_status(port, q, "&q=3", "n", nonce_hex, mac_hex), 401);
    /* q=1 (training, spelled out) has training's MAC: authentic */
    assert_int_equal(signed_status(port, q, "&q=1", "n", nonce_hex, mac_hex), 409);
    struct peer_server_stats ss;
    peer_server_stats_get(s, &ss);
    assert_true(ss.bad_requests == 5 && ss.auth_failures == 5 && ss.mismatched == 2 &&
                ss.served == 0);
    peer_server_stop(s);
}

/* The asker's class travels with the request: the serve callback sees the one the client set,
 * every class, and a warm's too. */
static void test_request_class(void **state)
{
    (void)state;
    struct peer_server *s = server_start(NULL, NULL);
    struct peer_client *pc = client_new(secret, NULL, 0);
    char addr[64];
    addr_of(peer_server_port(s), addr, sizeof(addr));
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        struct peer_block b = block("class", 10000, 4096, 1);
        b.cls = (enum tier_io_class)c;
        __atomic_store_n(&g_last_cls, -1, __ATOMIC_RELAXED);
        assert_int_equal(read_check(pc, addr, &b, NULL), 4096);
        assert_int_equal(__atomic_load_n(&g_last_cls, __ATOMIC_RELAXED), c);
        __atomic_store_n(&g_last_cls, -1, __ATOMIC_RELAXED);
        assert_int_equal(peer_warm(pc, addr, &b, NULL), 0);
        assert_int_equal(__atomic_load_n(&g_last_cls, __ATOMIC_RELAXED), c);
    }
    struct peer_block bad = block("class", 10000, 4096, 1);
    bad.cls = TIER_IO_NCLASSES;
    uint8_t buf[4096];
    assert_int_equal(peer_fetch(pc, addr, &bad, buf, sizeof(buf), NULL), -EINVAL);
    assert_int_equal(peer_warm(pc, addr, &bad, NULL), -EINVAL);
    peer_client_free(pc);
    peer_server_stop(s);
}

static void test_fail_names(void **state)
{
    (void)state;
    assert_string_equal(peer_fail_name(PEER_FAIL_CONNECT), "connect");
    assert_string_equal(peer_fail_name(PEER_FAIL_CHECKSUM), "checksum");
    for (int f = 0; f < PEER_FAIL_N; f++)
        assert_true(strlen(peer_fail_name((enum peer_fail)f)) > 0);
}

static void test_start_refuses(void **state)
{
    (void)state;
    struct peer_server_conf conf = {
        .listen = "127.0.0.1:0", .secret = "short", .secret_len = 5, .serve = serve};
    struct peer_server *s = NULL;
    assert_int_equal(peer_server_start(&conf, &s), -EINVAL);
    conf.secret = secret;
    conf.secret_len = strlen(secret);
    conf.listen = "127.0.0.1";
    assert_int_equal(peer_server_start(&conf, &s), -EINVAL);
    conf.listen = "127.0.0.1:0";
    conf.tls_cert = "/nonexistent/cert.pem";
    assert_true(peer_server_start(&conf, &s) < 0);
    conf.tls_key = "/nonexistent/key.pem";
    assert_int_equal(peer_server_start(&conf, &s), -ENOENT);
    assert_null(s);
    struct peer_client_conf cc = {.node_id = "a b", .secret = secret, .secret_len = 32};
    struct peer_client *pc = NULL;
    assert_int_equal(peer_client_new(&cc, &pc), -EINVAL);
    cc.node_id = "n";
    cc.secret_len = 8;
    assert_int_equal(peer_client_new(&cc, &pc), -EINVAL);
    cc.secret_len = 32;
    cc.tls_ca = "/nonexistent/ca.pem";
    assert_int_equal(peer_client_new(&cc, &pc), -ENOENT);
    assert_null(pc);
}

/* ---- bad servers: a raw socket answering canned bytes ---------------------------------------- */

enum fake_mode {
    FAKE_GARBAGE,   /* not HTTP */
    FAKE_FLIP,      /* the right headers, a byte of the body flipped */
    FAKE_BAD_AUTH,  /* the right sum, a wrong X-Tierd-Auth */
    FAKE_SHORT,     /* the right headers for one byte less */
    FAKE_LONG,      /* one byte more than the block */
    FAKE_NO_HEADER, /* 200 without X-Tierd-Sum */
    FAKE_TEAPOT,    /* a status that is not the protocol's */
    FAKE_SILENT,    /* reads the request, never answers */
    FAKE_TRICKLE,   /* the right headers, then a byte of the body every 100 ms */
    FAKE_GOOD,      /* the right answer, the connection kept open for the next request */
};

struct fake {
    int lfd, stop[2];
    uint16_t port;
    enum fake_mode mode;
    struct peer_block b; /* the block the client asks for */
    unsigned accepts;    /* atomic */
    pthread_t th;
};

/* Reads a request's head into buf; its length, or -1. */
static ssize_t read_head(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    while (got + 1 < cap) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            return (ssize_t)got;
    }
    return -1;
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

static void fake_answer(struct fake *fk, int fd, const char *head)
{
    if (fk->mode == FAKE_GARBAGE) {
        write_all(fd, "SSH-2.0-OpenSSH_9.2 not http at all\r\n\r\n", 39);
        return;
    }
    if (fk->mode == FAKE_TEAPOT) {
        const char *a = "HTTP/1.1 418 I'm a teapot\r\nContent-Length: 0\r\n\r\n";
        write_all(fd, a, strlen(a));
        return;
    }
    uint8_t nonce[PEER_NONCE_LEN] = {0};
    const char *nh = strcasestr(head, "X-Tierd-Nonce: ");
    if (nh)
        peer_hex_decode(nh + 15, 32, nonce, sizeof(nonce));
    size_t len = peer_block_len(&fk->b);
    size_t body_len = len + (fk->mode == FAKE_LONG) - (fk->mode == FAKE_SHORT);
    uint8_t *body = calloc(1, len + 1);
    assert_non_null(body);
    fill(&fk->b, body, len);
    char name[PEER_NAME_MAX + 1];
    int nl = peer_block_name(&fk->b, name, sizeof(name));
    uint8_t sum[PEER_SUM_LEN], mac[PEER_MAC_LEN];
    peer_sum(body, body_len, sum);
    peer_rsp_mac(secret, strlen(secret), nonce, name, (size_t)nl, sum, mac);
    if (fk->mode == FAKE_FLIP)
        body[len / 2] ^= 0x20;
    if (fk->mode == FAKE_BAD_AUTH)
        mac[0] ^= 1;
    char sum_hex[2 * PEER_SUM_LEN + 1], mac_hex[2 * PEER_MAC_LEN + 1], hdr[512];
    peer_hex_encode(sum, sizeof(sum), sum_hex);
    peer_hex_encode(mac, sizeof(mac), mac_hex);
    int hl = snprintf(hdr, sizeof(hdr),
                      "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n%s%s\r\nX-Tierd-Auth: %s\r\n"
                      "%s\r\n",
                      body_len, fk->mode == FAKE_NO_HEADER ? "X-Other: " : "X-Tierd-Sum: ", sum_hex,
                      mac_hex, fk->mode == FAKE_GOOD ? "" : "Connection: close\r\n");
    write_all(fd, hdr, (size_t)hl);
    write_all(fd, body, body_len);
    free(body);
}

/* Headers for a 904-byte body, then a byte every 100 ms until the client goes or the test stops
 * the server (the poll on the stop pipe is the pause). */
static void trickle(struct fake *fk, int fd)
{
    const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 904\r\nX-Tierd-Sum: "
                    "000102030405060708090a0b0c0d0e0f\r\nX-Tierd-Auth: "
                    "000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f\r\n\r\n";
    write_all(fd, h, strlen(h));
    for (int i = 0; i < 904; i++) {
        struct pollfd q = {fk->stop[0], POLLIN, 0};
        if (poll(&q, 1, 100) != 0 || send(fd, "x", 1, MSG_NOSIGNAL) != 1)
            return;
    }
}

static void *fake_main(void *arg)
{
    struct fake *fk = arg;
    for (;;) {
        struct pollfd p[2] = {{fk->lfd, POLLIN, 0}, {fk->stop[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 || p[1].revents)
            break;
        int fd = accept(fk->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        __atomic_fetch_add(&fk->accepts, 1, __ATOMIC_RELAXED);
        char head[16384];
        while (read_head(fd, head, sizeof(head)) > 0) {
            if (fk->mode == FAKE_SILENT) {
                struct pollfd q = {fk->stop[0], POLLIN, 0};
                poll(&q, 1, -1); /* until the test stops the server */
                break;
            }
            if (fk->mode == FAKE_TRICKLE) {
                trickle(fk, fd);
                break;
            }
            fake_answer(fk, fd, head);
            if (fk->mode != FAKE_GOOD)
                break;
        }
        shutdown(fd, SHUT_RDWR);
        close(fd);
    }
    return NULL;
}

static void fake_start(struct fake *fk, enum fake_mode mode, const struct peer_block *b)
{
    memset(fk, 0, sizeof(*fk));
    fk->mode = mode;
    fk->b = *b;
    fk->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fk->lfd >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sin);
    assert_int_equal(bind(fk->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(fk->lfd, 16), 0);
    assert_int_equal(getsockname(fk->lfd, (struct sockaddr *)&sin, &sl), 0);
    fk->port = ntohs(sin.sin_port);
    assert_int_equal(pipe(fk->stop), 0);
    assert_int_equal(pthread_create(&fk->th, NULL, fake_main, fk), 0);
}

static void fake_stop(struct fake *fk)
{
    write_all(fk->stop[1], "x", 1);
    pthread_join(fk->th, NULL);
    close(fk->lfd);
    close(fk->stop[0]);
    close(fk->stop[1]);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_bad_servers(void **state)
{
    (void)state;
    static const struct {
        enum fake_mode mode;
        int err;
        enum peer_fail f;
    } cases[] = {
        {FAKE_GARBAGE, -EBADMSG, PEER_FAIL_GARBAGE}, {FAKE_FLIP, -EILSEQ, PEER_FAIL_CHECKSUM},
        {FAKE_BAD_AUTH, -EACCES, PEER_FAIL_AUTH},    {FAKE_SHORT, -EBADMSG, PEER_FAIL_GARBAGE},
        {FAKE_LONG, -EBADMSG, PEER_FAIL_GARBAGE},    {FAKE_NO_HEADER, -EBADMSG, PEER_FAIL_GARBAGE},
        {FAKE_TEAPOT, -EBADMSG, PEER_FAIL_GARBAGE},
    };
    struct peer_client *pc = client_new(secret, NULL, 0);
    struct peer_block b = block("canned", 5000, 1024, 4); /* the short last block: 904 bytes */
    uint64_t want[PEER_FAIL_N] = {0};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fake fk;
        fake_start(&fk, cases[i].mode, &b);
        char addr[64];
        addr_of(fk.port, addr, sizeof(addr));
        enum peer_fail f = PEER_FAIL_N;
        ssize_t n = read_check(pc, addr, &b, &f);
        if (n != cases[i].err)
            fprintf(stderr, "bad server %zu: %zd (%s)\n", i, n, peer_fail_name(f));
        assert_int_equal(n, cases[i].err);
        assert_int_equal(f, cases[i].f);
        want[f]++;
        fake_stop(&fk);
    }
    /* a closed port */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sin);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
    close(fd);
    char addr[64];
    addr_of(ntohs(sin.sin_port), addr, sizeof(addr));
    enum peer_fail f = PEER_FAIL_N;
    assert_int_equal(read_check(pc, addr, &b, &f), -ECONNREFUSED);
    assert_int_equal(f, PEER_FAIL_CONNECT);
    want[PEER_FAIL_CONNECT]++;
    struct peer_client_stats cs;
    peer_client_stats_get(pc, &cs);
    assert_true(cs.ok == 0 && cs.requests == sizeof(cases) / sizeof(cases[0]) + 1);
    for (int i = 0; i < PEER_FAIL_N; i++)
        assert_true(cs.fail[i] == want[i]);
    peer_client_free(pc);
}

/* A client's handles keep their connections: three reads, one connection. */
static void test_keepalive(void **state)
{
    (void)state;
    struct peer_client *pc = client_new(secret, NULL, 0);
    struct peer_block b = block("canned", 5000, 1024, 4);
    struct fake fk;
    fake_start(&fk, FAKE_GOOD, &b);
    char addr[64];
    addr_of(fk.port, addr, sizeof(addr));
    for (int i = 0; i < 3; i++)
        assert_int_equal(read_check(pc, addr, &b, NULL), 904);
    assert_int_equal(__atomic_load_n(&fk.accepts, __ATOMIC_RELAXED), 1);
    peer_client_free(pc); /* closes the connection: the fake's read ends */
    fake_stop(&fk);
}

static void test_stalled_server(void **state)
{
    (void)state;
    struct peer_client *pc = client_new(secret, NULL, 300);
    struct peer_block b = block("canned", 5000, 1024, 0);
    struct fake fk;
    fake_start(&fk, FAKE_SILENT, &b);
    char addr[64];
    addr_of(fk.port, addr, sizeof(addr));
    enum peer_fail f = PEER_FAIL_N;
    uint64_t t0 = now_ms();
    assert_int_equal(read_check(pc, addr, &b, &f), -ETIMEDOUT);
    uint64_t took = now_ms() - t0;
    assert_int_equal(f, PEER_FAIL_TIMEOUT);
    assert_true(took >= 250);
    assert_true(took < 60000);
    struct peer_client_stats cs;
    peer_client_stats_get(pc, &cs);
    assert_true(cs.fail[PEER_FAIL_TIMEOUT] == 1);
    fake_stop(&fk);
    peer_client_free(pc);
}

/* A peer that sends, but too slowly: total_ms ends the request. */
static void test_slow_server(void **state)
{
    (void)state;
    struct peer_client_conf conf = {
        .node_id = "node-a",
        .secret = secret,
        .secret_len = strlen(secret),
        .stall_ms = 30000,
        .total_ms = 1000,
    };
    struct peer_client *pc = NULL;
    assert_int_equal(peer_client_new(&conf, &pc), 0);
    struct peer_block b = block("canned", 5000, 1024, 4);
    struct fake fk;
    fake_start(&fk, FAKE_TRICKLE, &b);
    char addr[64];
    addr_of(fk.port, addr, sizeof(addr));
    enum peer_fail f = PEER_FAIL_N;
    uint64_t t0 = now_ms();
    assert_int_equal(read_check(pc, addr, &b, &f), -ETIMEDOUT);
    assert_int_equal(f, PEER_FAIL_TIMEOUT);
    assert_true(now_ms() - t0 >= 900);
    peer_client_free(pc);
    fake_stop(&fk);
}

/* ---- TLS ------------------------------------------------------------------------------------- */

static void test_tls(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("peer_tls");
    char cert[512], key[512], cmd[2048];
    snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
    snprintf(key, sizeof(key), "%s/key.pem", dir);
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=tierd-peer -days 1 "
             "-keyout '%s' -out '%s' >/dev/null 2>&1",
             key, cert);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(chmod(key, 0600), 0);
    struct peer_server *s = server_start(cert, key);
    char addr[64];
    addr_of(peer_server_port(s), addr, sizeof(addr));
    struct peer_client *tls = client_new(secret, cert, 0);
    struct peer_block b = block("tls", 300000, 65536, 4);
    assert_int_equal(read_check(tls, addr, &b, NULL), 300000 - 4 * 65536);
    assert_int_equal(read_check(tls, addr, &b, NULL), 300000 - 4 * 65536); /* a reused handle */
    assert_int_equal(peer_ping(tls, addr, NULL), 0);
    /* a plain client against the TLS endpoint fails, and says so */
    struct peer_client *plain = client_new(secret, NULL, 0);
    enum peer_fail f = PEER_FAIL_N;
    ssize_t n = read_check(plain, addr, &b, &f);
    assert_true(n < 0);
    assert_true(f == PEER_FAIL_CONNECT || f == PEER_FAIL_GARBAGE);
    struct peer_server_stats ss;
    peer_server_stats_get(s, &ss);
    assert_true(ss.served == 2);
    peer_server_stop(s);
    /* and a TLS client against a plain endpoint */
    s = server_start(NULL, NULL);
    addr_of(peer_server_port(s), addr, sizeof(addr));
    f = PEER_FAIL_N;
    assert_int_equal(read_check(tls, addr, &b, &f), -ECONNREFUSED);
    assert_int_equal(f, PEER_FAIL_CONNECT);
    /* a world-readable key is refused */
    peer_server_stop(s);
    assert_int_equal(chmod(key, 0644), 0);
    struct peer_server_conf conf = {.listen = "127.0.0.1:0",
                                    .secret = secret,
                                    .secret_len = strlen(secret),
                                    .tls_cert = cert,
                                    .tls_key = key,
                                    .serve = serve};
    s = NULL;
    assert_int_equal(peer_server_start(&conf, &s), -EPERM);
    peer_client_free(plain);
    peer_client_free(tls);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_blocks),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_wrong_secret),
        cmocka_unit_test(test_serve_errors),
        cmocka_unit_test(test_server_bad_requests),
        cmocka_unit_test(test_request_class),
        cmocka_unit_test(test_fail_names),
        cmocka_unit_test(test_start_refuses),
        cmocka_unit_test(test_bad_servers),
        cmocka_unit_test(test_keepalive),
        cmocka_unit_test(test_stalled_server),
        cmocka_unit_test(test_slow_server),
        cmocka_unit_test(test_tls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
