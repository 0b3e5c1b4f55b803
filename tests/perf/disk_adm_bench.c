/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disk_adm_bench.c - what the local disk's QoS lane (qos/sched.h, common/diskadm.h) costs a
 * disk-level hit. A RAM-less cache (every hit a block-file read, page-cache warm) with 1 MiB
 * blocks; random reads of 4 KiB, 64 KiB and 1 MiB with 1 and 2 threads, in rounds alternating
 *
 *   none    no admission hook (the cache as before the lane)
 *   lane    the daemon's disk lane, nobody limited: the idle fast path (one lock each way)
 *   dmc     the same lane with a limit on the reader's tenant far above what it reads, so that
 *           every hit passes dmClock (tags, a condition variable): a limited tenant's cost
 *
 * and reports for each the best round's hits/s (wall clock) and its lowest CPU time per hit
 * (the thread's own CPU clock: on a shared machine, other processes' load moves the wall-clock
 * rate by tens of percent between rounds, the CPU time per hit much less); then the admission
 * alone (enter + leave, no I/O) in ns per pair, with 1 and 2 threads. The backend is an
 * in-process memory object.
 *
 *   disk_adm_bench [DIR] [SECONDS_PER_MEASUREMENT] [ROUNDS]   (defaults /tmp, 1, 3)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "qos/sched.h"

#define MIB (1ull << 20)
#define OBJ_BYTES (64 * MIB)

enum mode { M_NONE, M_LANE, M_DMC, M_N };
static const char *const mode_name[M_N] = {"none", "lane", "dmc"};

static ssize_t mb_read(struct backend *be, const char *key, uint64_t off, void *buf, size_t len,
                       const char *if_match, struct backend_stat *st)
{
    (void)be, (void)key, (void)if_match, (void)st;
    if (off >= OBJ_BYTES)
        return 0;
    if (len > OBJ_BYTES - off)
        len = (size_t)(OBJ_BYTES - off);
    for (size_t i = 0; i < len; i++)
        ((unsigned char *)buf)[i] = (unsigned char)((off + i) * 131u);
    return (ssize_t)len;
}

static const struct backend_ops mb_ops = {.type = "mem", .read = mb_read};

struct worker {
    struct cache *c;
    struct cache_obj *obj;
    struct tier_disk_adm *adm; /* admission-only mode when set */
    size_t len;
    double seconds;
    uint64_t seed, ops, cpu_ns;
    int err;
};

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    return z ^ (z >> 31);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned char *buf = aligned_alloc(4096, MIB);
    if (!buf) {
        w->err = -ENOMEM;
        return NULL;
    }
    const struct tier_ioctx io = {.tenant = 2, .cls = TIER_IO_TRAINING};
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    uint64_t end = tier_now_mono_ns() + (uint64_t)(w->seconds * 1e9);
    uint64_t rng = w->seed;
    while (tier_now_mono_ns() < end) {
        for (int k = 0; k < 64; k++) {
            if (w->adm) {
                if (w->adm->enter(w->adm->ud, &io, w->len, false) == 0)
                    w->adm->leave(w->adm->ud, &io, w->len, (long)w->len);
            } else {
                uint64_t off = (rng_next(&rng) % (OBJ_BYTES / w->len)) * w->len;
                ssize_t n = cache_read(w->c, &io, w->obj, off, buf, w->len);
                if (n != (ssize_t)w->len) {
                    w->err = n < 0 ? (int)n : -EIO;
                    free(buf);
                    return NULL;
                }
            }
            w->ops++;
        }
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    w->cpu_ns = (uint64_t)((c1.tv_sec - c0.tv_sec) * 1000000000LL + (c1.tv_nsec - c0.tv_nsec));
    free(buf);
    return NULL;
}

/* ops per second of nthreads workers like proto; *cpu_per_op: their CPU ns per op */
static double measure(const struct worker *proto, int nthreads, double *cpu_per_op)
{
    pthread_t th[8];
    struct worker w[8];
    uint64_t t0 = tier_now_mono_ns();
    for (int i = 0; i < nthreads; i++) {
        w[i] = *proto;
        w[i].seed = 77 + (uint64_t)i;
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    uint64_t ops = 0, cpu = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        if (w[i].err) {
            fprintf(stderr, "disk_adm_bench: read failed: %s\n", strerror(-w[i].err));
            exit(1);
        }
        ops += w[i].ops;
        cpu += w[i].cpu_ns;
    }
    *cpu_per_op = (double)cpu / (double)ops;
    return (double)ops / ((double)(tier_now_mono_ns() - t0) / 1e9);
}

static struct cache *open_cache(const char *dir, const struct tier_disk_adm *adm,
                                struct cache_obj *obj)
{
    struct cache_config cfg = {
        .block_size = MIB, .disk_dir = dir, .disk_bytes = 2 * OBJ_BYTES, .disk_adm = adm};
    struct cache *c = NULL;
    if (cache_open(&cfg, &c) < 0) {
        fprintf(stderr, "disk_adm_bench: cannot open a cache in %s\n", dir);
        exit(1);
    }
    unsigned char *buf = malloc(MIB);
    for (uint64_t off = 0; off < OBJ_BYTES; off += MIB)
        if (!buf || cache_read(c, NULL, obj, off, buf, MIB) != (ssize_t)MIB) {
            fprintf(stderr, "disk_adm_bench: warm-up read failed\n");
            exit(1);
        }
    free(buf);
    struct cache_stats st;
    cache_stats_get(c, &st);
    if (st.disk.blocks != OBJ_BYTES / MIB) {
        fprintf(stderr, "disk_adm_bench: %llu blocks on disk after warm-up\n",
                (unsigned long long)st.disk.blocks);
        exit(1);
    }
    return c;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    double seconds = 1.0;
    uint64_t rounds = 3;
    if (argc > 2) {
        uint64_t s;
        if (tier_parse_u64(argv[2], &s) < 0 || !s ||
            (argc > 3 && (tier_parse_u64(argv[3], &rounds) < 0 || !rounds))) {
            fprintf(stderr, "usage: disk_adm_bench [DIR] [SECONDS] [ROUNDS]\n");
            return 2;
        }
        seconds = (double)s;
    }
    const int ROUNDS = (int)rounds;
    tier_log_set_level(TIER_LOG_WARN); /* not a line per cache open */
    char cdir[4096];
    snprintf(cdir, sizeof(cdir), "%s/disk_adm_bench", dir);
    char be_name[] = "mem";
    struct backend be = {.ops = &mb_ops, .name = be_name};
    struct cache_obj obj = {.be = &be, .key = "bench/obj", .etag = "v1", .size_bytes = OBJ_BYTES};

    /* the daemon's disk lane (main.c open_disk_lane) */
    struct sched *s = NULL;
    struct sched_config sc = {.op_cost_bytes = 4096};
    struct sched_backend_config bc = {.max_inflight = 64,
                                      .admit_timeout_ms = SCHED_TIMEOUT_NONE,
                                      .breaker_failures = -1,
                                      .idle_fast = true};
    struct sched_lane *lane = NULL;
    if (sched_new(&sc, &s) || sched_lane_new(s, "disk", &bc, &lane))
        return 1;
    struct tier_disk_adm adm;
    sched_lane_disk_adm(lane, &adm);

    struct cache *plain = open_cache(cdir, NULL, &obj);
    cache_close(plain); /* the files stay: both caches below adopt them */
    plain = open_cache(cdir, NULL, &obj);
    printf("# disk-level hits (ram_bytes=0, 1 MiB blocks, page-cache warm), 1 thread, best of %d "
           "rounds of %.0f s\n",
           ROUNDS, seconds);
    printf("%-8s %-5s %10s %8s %12s %8s\n", "read", "mode", "hits/s", "vs none", "cpu ns/hit",
           "vs none");
    static const size_t lens[] = {4096, 64 * 1024, MIB};
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        for (int t = 1; t <= 1; t++) {
            double best[M_N] = {0}, cpu[M_N] = {0};
            for (int r = 0; r < ROUNDS; r++) {
                for (int m = 0; m < M_N; m++) {
                    /* one cache, the hook switched by mode: the same files, the same index */
                    struct cache *c = plain;
                    struct cache *ca = NULL;
                    if (m != M_NONE) {
                        cache_close(plain);
                        plain = NULL;
                        ca = open_cache(cdir, &adm, &obj);
                        c = ca;
                        sched_tenant_limit_set(s, 2, m == M_DMC ? 1ull << 50 : 0);
                    }
                    struct worker w = {.c = c, .obj = &obj, .len = lens[li], .seconds = seconds};
                    double cpo = 0;
                    double v = measure(&w, t, &cpo);
                    if (v > best[m])
                        best[m] = v;
                    if (!cpu[m] || cpo < cpu[m])
                        cpu[m] = cpo;
                    if (ca) {
                        cache_close(ca);
                        plain = open_cache(cdir, NULL, &obj);
                    }
                }
            }
            for (int m = 0; m < M_N; m++)
                printf("%-8zu %-5s %10.0f %+7.1f%% %12.0f %+7.1f%%\n", lens[li], mode_name[m],
                       best[m], 100.0 * (best[m] / best[M_NONE] - 1.0), cpu[m],
                       100.0 * (cpu[m] / cpu[M_NONE] - 1.0));
        }
    }
    cache_close(plain);

    printf("# admission alone (enter + leave, no I/O), best of %d rounds\n", ROUNDS);
    for (int m = M_LANE; m < M_N; m++) {
        sched_tenant_limit_set(s, 2, m == M_DMC ? 1ull << 50 : 0);
        for (int t = 1; t <= 2; t++) {
            double best = 0;
            for (int r = 0; r < ROUNDS; r++) {
                struct worker w = {.adm = &adm, .len = 65536, .seconds = seconds};
                double cpo = 0;
                double v = measure(&w, t, &cpo);
                if (v > best)
                    best = v;
            }
            printf("%-5s threads=%d  %12.0f pairs/s  %6.0f ns per pair per thread\n", mode_name[m],
                   t, best, 1e9 * t / best);
        }
    }
    sched_free(s);
    return 0;
}
