/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_latency.c - what a peer read of a cached block costs (src/cluster/peer.c), next to a
 * local disk hit of the same bytes: pread() of BLOCK bytes from a file whose pages are cached
 * (the disk level's hit as cache_hit measures it), one round trip of the protocol (peer_ping:
 * a request and an empty answer, both authenticated), and peer_fetch() of BLOCK bytes that the
 * endpoint preads from that file (HMACs both ways, XXH3-128 of the bytes on both ends, one copy
 * into the answer). Prints the median and the 90th percentile of each and the goal of issue 25:
 * peer fetch <= 2 x pread + one round trip.
 *
 *   peer_latency FILE [N]                       both ends in this process, on 127.0.0.1
 *   peer_latency serve ADDR FILE [CERT KEY]     an endpoint on ADDR until SIGTERM
 *   peer_latency fetch ADDR FILE [N [CA]]       the client side against such an endpoint (another
 *                                               network namespace: bench/cluster.sh)
 * FILE: at least 64 blocks; BLOCK = env PEER_BLOCK (bytes, default 1 MiB); N samples (200).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/peer.h"
#include "common/timeutil.h"

#define SECRET "peer-latency-bench-secret-0123456789"

static int g_fd = -1;
static size_t g_block = 1u << 20;
static uint64_t g_nblocks;

static ssize_t serve(void *ud, const char *from, const struct peer_block *b, void *buf, size_t len)
{
    (void)ud;
    (void)from;
    if (b->index >= g_nblocks || len != g_block)
        return -ENOENT;
    ssize_t n = pread(g_fd, buf, len, (off_t)(b->index * g_block));
    return n == (ssize_t)len ? n : -EIO;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, int n, double *median_us)
{
    qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
    *median_us = (double)ns[n / 2] / 1000.0;
    printf("%-34s median %9.1f us   p90 %9.1f us\n", what, *median_us,
           (double)ns[n * 9 / 10] / 1000.0);
}

static struct peer_block block(uint64_t i)
{
    return (struct peer_block){.backend = "s3",
                               .key = "bench/peer_latency",
                               .etag = "e",
                               .version = "",
                               .size = g_nblocks * g_block,
                               .block_size = (uint32_t)g_block,
                               .index = i,
                               .cls = TIER_IO_TRAINING};
}

static int measure(const char *addr, const char *ca, int n)
{
    struct peer_client_conf cc = {.node_id = "bench",
                                  .secret = SECRET,
                                  .secret_len = strlen(SECRET),
                                  .tls_ca = ca,
                                  .stall_ms = 10000};
    struct peer_client *pc = NULL;
    if (peer_client_new(&cc, &pc)) {
        fprintf(stderr, "peer_latency: cannot make a client\n");
        return 1;
    }
    char *buf = malloc(g_block);
    uint64_t *pr = calloc((size_t)n, sizeof(*pr)), *pg = calloc((size_t)n, sizeof(*pg)),
             *pf = calloc((size_t)n, sizeof(*pf));
    if (!buf || !pr || !pg || !pf)
        return 1;
    /* warm: the file's pages, the connection */
    for (uint64_t i = 0; i < g_nblocks; i++)
        if (pread(g_fd, buf, g_block, (off_t)(i * g_block)) != (ssize_t)g_block)
            return 1;
    enum peer_fail why;
    struct peer_block w = block(0);
    if (peer_fetch(pc, addr, &w, buf, g_block, &why) != (ssize_t)g_block) {
        fprintf(stderr, "peer_latency: the first fetch from %s failed (%s)\n", addr,
                peer_fail_name(why));
        return 1;
    }
    for (int k = 0; k < n; k++) {
        uint64_t i = (uint64_t)(k * 7) % g_nblocks;
        uint64_t t0 = tier_now_mono_ns();
        if (pread(g_fd, buf, g_block, (off_t)(i * g_block)) != (ssize_t)g_block)
            return 1;
        uint64_t t1 = tier_now_mono_ns();
        if (peer_ping(pc, addr, &why) != 0) {
            fprintf(stderr, "peer_latency: ping failed (%s)\n", peer_fail_name(why));
            return 1;
        }
        uint64_t t2 = tier_now_mono_ns();
        struct peer_block b = block(i);
        if (peer_fetch(pc, addr, &b, buf, g_block, &why) != (ssize_t)g_block) {
            fprintf(stderr, "peer_latency: fetch failed (%s)\n", peer_fail_name(why));
            return 1;
        }
        uint64_t t3 = tier_now_mono_ns();
        pr[k] = t1 - t0;
        pg[k] = t2 - t1;
        pf[k] = t3 - t2;
    }
    double r, g, f;
    printf("block %zu bytes, %d samples, endpoint %s%s\n", g_block, n, addr, ca ? " (TLS)" : "");
    report("local disk hit (pread, page cache)", pr, n, &r);
    report("round trip (peer_ping)", pg, n, &g);
    report("peer fetch of a cached block", pf, n, &f);
    printf("peer fetch / (2 x pread + round trip) = %.2f (goal <= 1: %s)\n", f / (2 * r + g),
           f <= 2 * r + g ? "met" : "missed");
    free(buf);
    free(pr);
    free(pg);
    free(pf);
    peer_client_free(pc);
    return 0;
}

static int open_file(const char *path)
{
    const char *bs = getenv("PEER_BLOCK");
    if (bs)
        g_block = (size_t)strtoull(bs, NULL, 10);
    g_fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (g_fd < 0 || fstat(g_fd, &st) != 0 || !g_block) {
        fprintf(stderr, "peer_latency: cannot open %s\n", path);
        return 1;
    }
    g_nblocks = (uint64_t)st.st_size / g_block;
    if (g_nblocks < 64) {
        fprintf(stderr, "peer_latency: %s holds fewer than 64 blocks of %zu bytes\n", path,
                g_block);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "serve") == 0) {
        if (open_file(argv[3]))
            return 1;
        struct peer_server_conf sc = {.listen = argv[2],
                                      .secret = SECRET,
                                      .secret_len = strlen(SECRET),
                                      .tls_cert = argc >= 6 ? argv[4] : NULL,
                                      .tls_key = argc >= 6 ? argv[5] : NULL,
                                      .serve = serve};
        struct peer_server *s = NULL;
        if (peer_server_start(&sc, &s)) {
            fprintf(stderr, "peer_latency: cannot serve on %s\n", argv[2]);
            return 1;
        }
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigprocmask(SIG_BLOCK, &set, NULL);
        int sig;
        sigwait(&set, &sig);
        peer_server_stop(s);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "fetch") == 0) {
        if (open_file(argv[3]))
            return 1;
        return measure(argv[2], argc >= 6 ? argv[5] : NULL, argc >= 5 ? atoi(argv[4]) : 200);
    }
    if (argc < 2 || argc > 3 || argv[1][0] == '-') {
        fprintf(stderr, "usage: peer_latency FILE [N] | serve ADDR FILE [CERT KEY] | fetch ADDR "
                        "FILE [N [CA]]\n");
        return 2;
    }
    if (open_file(argv[1]))
        return 1;
    struct peer_server_conf sc = {
        .listen = "127.0.0.1:0", .secret = SECRET, .secret_len = strlen(SECRET), .serve = serve};
    struct peer_server *s = NULL;
    if (peer_server_start(&sc, &s)) {
        fprintf(stderr, "peer_latency: cannot start an endpoint\n");
        return 1;
    }
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)peer_server_port(s));
    int rc = measure(addr, NULL, argc == 3 ? atoi(argv[2]) : 200);
    peer_server_stop(s);
    return rc;
}
