/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_hit.c - hit-path throughput of the cache. (1) RAM-level hits: 1 MiB cache_read()s of a
 * cached object with 1 and 2 threads, next to memcpy of the same sizes measured in the same run.
 * (2) Disk-level hits (RAM level off: ram_bytes = 0): 1 MiB cache_read()s served from block files
 * (page-cache warm), next to pread() of the same bytes from one plain file, with
 * disk_verify_every_read (every chunk read hashed) and with the default (chunks verified less
 * than 1 s earlier served by a plain pread): two caches of the same data, measured in
 * alternating 1 s rounds (pread, every-read, default) so that load from elsewhere on the machine
 * falls on all three; each round's ratios are to that round's pread. The rounds start 4 s after
 * the block files were written (steady state: a file changed less than 3 s ago is hashed at
 * every read).
 *
 *   cache_hit [DIR] [SECONDS] [curves]   DIR: scratch directory for the disk level (default /tmp)
 *
 * (3) With a third argument `curves`, only this: the read-path cost of the miss-ratio curves
 * ([cache] curves, cfg.mrc): two caches of the same data, curves off and on, RAM-level and
 * disk-level hits, and RAM hits in a cache of a 64 GiB budget (whose curves sample 1 access in 8
 * instead of every one), and an A/A control (RAM hits, curves off in both caches: the difference
 * two caches of the same data show anyway), random 1 MiB and 4 KiB reads by a tenant (each read a
 * new access to its block, so each feeds the node's curve and the tenant's), in alternating 1 s
 * rounds (which cache goes first alternates too); throughput per second of the reading thread's CPU
 * time (a loaded machine stretches wall time, not that); the median over SECONDS rounds (at least
 * 3) of on / off, and what curves add per read in ns; and the CPU time the process's other
 * threads spent per read (the curves' own thread, which runs the simulations off the read path;
 * each round ends by draining its queue), on minus off.
 *
 *   cache_hit DIR SECONDS curves
 *
 * The backend is an in-process memory object, so only the cache's own cost is measured.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/mrc.h"
#include "common/ioctx.h"
#include "common/strutil.h"
#include "common/timeutil.h"

#define MIB (1ull << 20)
#define OBJ_BYTES (256 * MIB)
#define READ_BYTES MIB

static unsigned char *g_obj;
/* Called through a volatile pointer so the compiler cannot inline a 1 MiB constant-size copy as
 * `rep movs`: the baseline must be glibc's memcpy, the one cache_read() uses. */
static void *(*volatile memcpy_fn)(void *, const void *, size_t) = memcpy;
/* The same bytes in 4 MiB mallocs, laid out like the cache's RAM blocks: the memcpy baseline
 * copies from here so both sides read memory allocated the same way. */
static unsigned char *g_chunks[OBJ_BYTES / (4 * MIB)];

static ssize_t mb_read(struct backend *be, const char *key, uint64_t off, void *buf, size_t len,
                       const char *if_match, struct backend_stat *st)
{
    (void)be;
    (void)key;
    (void)if_match;
    (void)st;
    if (off >= OBJ_BYTES)
        return 0;
    if (len > OBJ_BYTES - off)
        len = (size_t)(OBJ_BYTES - off);
    memcpy(buf, g_obj + off, len);
    return (ssize_t)len;
}

static const struct backend_ops mb_ops = {.type = "mem", .read = mb_read};

struct worker {
    int mode; /* 0 memcpy, 1 cache_read, 2 pread */
    struct cache *c;
    struct cache_obj *obj;
    const struct tier_ioctx *io; /* the reader's tenant (NULL: none) */
    size_t rsz;                  /* bytes per read, a divisor of OBJ_BYTES */
    int fd;
    double seconds;
    uint64_t seed;
    uint64_t bytes;
    uint64_t cpu_ns; /* the thread's CPU time in the loop (CLOCK_THREAD_CPUTIME_ID) */
    int err;
};

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t proc_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* the last measure_io()'s reading threads: bytes read, CPU time */
static uint64_t last_bytes, last_cpu_ns;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    return z ^ (z >> 31);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned char *buf = aligned_alloc(4096, READ_BYTES);
    if (!buf) {
        w->err = -ENOMEM;
        return NULL;
    }
    memset(buf, 0, READ_BYTES);
    uint64_t end = tier_now_mono_ns() + (uint64_t)(w->seconds * 1e9);
    uint64_t rng = w->seed;
    uint64_t cpu0 = thread_cpu_ns();
    while (tier_now_mono_ns() < end) {
        for (int k = 0; k < 16; k++) {
            uint64_t off = (rng_next(&rng) % (OBJ_BYTES / w->rsz)) * w->rsz;
            ssize_t n;
            if (w->mode == 0) {
                memcpy_fn(buf, g_chunks[off / (4 * MIB)] + off % (4 * MIB), w->rsz);
                n = (ssize_t)w->rsz;
            } else if (w->mode == 1) {
                n = cache_read(w->c, w->io, w->obj, off, buf, w->rsz);
            } else {
                n = pread(w->fd, buf, w->rsz, (off_t)off);
            }
            if (n != (ssize_t)w->rsz) {
                w->err = n < 0 ? (int)n : -EIO;
                free(buf);
                return NULL;
            }
            w->bytes += w->rsz;
        }
    }
    w->cpu_ns = thread_cpu_ns() - cpu0;
    free(buf);
    return NULL;
}

/* GB/s of wall time; *cpu_gbs (if not NULL): GB per second of the threads' CPU time, which
 * other processes' load does not stretch */
static double measure_io(int mode, int nthreads, struct cache *c, struct cache_obj *obj, int fd,
                         double seconds, const struct tier_ioctx *io, size_t rsz, double *cpu_gbs)
{
    pthread_t th[8];
    struct worker w[8];
    uint64_t t0 = tier_now_mono_ns();
    for (int i = 0; i < nthreads; i++) {
        w[i] = (struct worker){.mode = mode,
                               .c = c,
                               .obj = obj,
                               .io = io,
                               .rsz = rsz,
                               .fd = fd,
                               .seconds = seconds,
                               .seed = 77 + (uint64_t)i};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    uint64_t bytes = 0, cpu = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        cpu += w[i].cpu_ns;
        if (w[i].err) {
            fprintf(stderr, "cache_hit: read failed: %s\n", strerror(-w[i].err));
            exit(1);
        }
        bytes += w[i].bytes;
    }
    double dt = (double)(tier_now_mono_ns() - t0) / 1e9;
    last_bytes = bytes;
    last_cpu_ns = cpu;
    if (cpu_gbs)
        *cpu_gbs = cpu ? (double)bytes / (double)cpu : 0;
    return (double)bytes / dt / 1e9;
}

static double measure(int mode, int nthreads, struct cache *c, struct cache_obj *obj, int fd,
                      double seconds)
{
    return measure_io(mode, nthreads, c, obj, fd, seconds, NULL, READ_BYTES, NULL);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void warm(struct cache *c, struct cache_obj *obj)
{
    unsigned char *buf = malloc(4 * MIB);
    for (uint64_t off = 0; off < OBJ_BYTES; off += 4 * MIB)
        if (cache_read(c, NULL, obj, off, buf, 4 * MIB) != (ssize_t)(4 * MIB)) {
            fprintf(stderr, "cache_hit: warm-up read failed\n");
            exit(1);
        }
    free(buf);
}

/* (3): curves off [0] vs on [1], RAM-level then disk-level hits, 1 MiB and 4 KiB reads. */
static int curves_ab(const char *dir, int rounds, struct cache_obj *obj)
{
    const struct tier_ioctx io = {.tenant = 5, .cls = TIER_IO_TRAINING};
    size_t rszs[] = {MIB, 4096};
    if (rounds > 64)
        rounds = 64;
    printf("# curves off vs on: 4 MiB blocks, random reads by tenant 5, 1 thread, %d alternating "
           "rounds of 1 s; GB per CPU second; on / off, median (min-max)\n",
           rounds);
    for (int lv = 0; lv < 4; lv++) {
        char cdir[2][4096];
        struct cache *cc[2];
        for (int e = 0; e < 2; e++) {
            snprintf(cdir[e], sizeof(cdir[e]), "%s/cache_hit_mrc%d.%d", dir, e, (int)getpid());
            struct cache_config cfg = {
                .block_size = 4 * MIB, .mrc = e == 1 && lv != 3, .max_tenants = 64};
            if (lv != 1) {
                /* lv 2: a 64 GiB RAM budget (only the object is cached): the curves' smallest
                 * size is 8 GiB, sampled at 1/8 (src/cache/mrc.h), not at 1 */
                cfg.ram_bytes = lv == 2 ? 64ull << 30 : 2 * OBJ_BYTES;
            } else {
                cfg.disk_dir = cdir[e];
                cfg.disk_bytes = 2 * OBJ_BYTES;
            }
            cc[e] = NULL;
            if (cache_open(&cfg, &cc[e]) < 0) {
                fprintf(stderr, "cache_hit: cannot open a cache (curves %s)\n", e ? "on" : "off");
                return 1;
            }
            warm(cc[e], obj);
        }
        if (lv == 1)
            sleep(4); /* steady state, as in (2) */
        for (int k = 0; k < 2; k++) {
            double ratio[64], gbs[2] = {0, 0}, other_ns[2] = {0, 0};
            for (int r = 0; r < rounds; r++) {
                double v[2];
                for (int j = 0; j < 2; j++) {
                    int e = (r + j) % 2;
                    uint64_t p0 = proc_cpu_ns();
                    measure_io(1, 1, cc[e], obj, -1, 1.0, &io, rszs[k], &v[e]);
                    struct mrc_point pt[CACHE_MRC_SIZES];
                    size_t np;
                    cache_mrc_curve(cc[e], -1, pt, CACHE_MRC_SIZES, &np); /* drains the queue */
                    uint64_t other = proc_cpu_ns() - p0 - last_cpu_ns;
                    if (last_bytes)
                        other_ns[e] +=
                            (double)other * (double)rszs[k] / (double)last_bytes / rounds;
                }
                gbs[0] += v[0] / rounds;
                gbs[1] += v[1] / rounds;
                ratio[r] = v[1] / v[0];
            }
            qsort(ratio, (size_t)rounds, sizeof(double), cmp_double);
            printf("%s hits, %4zu KiB reads: off %6.3f GB/s  on %6.3f GB/s  on/off %.3f "
                   "(%.3f-%.3f)  +%.0f ns per read; other threads +%.0f ns per read\n",
                   lv == 1   ? "disk"
                   : lv == 2 ? "RAM (64 GiB budget)"
                   : lv == 3 ? "RAM, A/A (both off)"
                             : "RAM ",
                   rszs[k] / 1024, gbs[0], gbs[1], ratio[rounds / 2], ratio[0], ratio[rounds - 1],
                   (double)rszs[k] / gbs[1] - (double)rszs[k] / gbs[0], other_ns[1] - other_ns[0]);
        }
        struct cache_stats st;
        cache_stats_get(cc[1], &st);
        printf("  (second cache: %llu fetches in all, the warm-up's %llu; accesses left out of "
               "the curves: %llu)\n",
               (unsigned long long)st.fetches, (unsigned long long)(OBJ_BYTES / (4 * MIB)),
               (unsigned long long)cache_mrc_dropped(cc[1]));
        for (int e = 0; e < 2; e++) {
            cache_evict(cc[e], "mem", "");
            cache_close(cc[e]);
            if (lv == 1) {
                char cmd[8300];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cdir[e]);
                if (system(cmd) != 0)
                    fprintf(stderr, "cache_hit: could not remove %s\n", cdir[e]);
            }
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    double seconds = 2.0;
    if (argc > 2) {
        uint64_t s;
        if (tier_parse_u64(argv[2], &s) < 0 || !s) {
            fprintf(stderr, "usage: cache_hit [DIR] [SECONDS] [curves]\n");
            return 2;
        }
        seconds = (double)s;
    }
    g_obj = malloc(OBJ_BYTES);
    if (!g_obj)
        return 1;
    for (uint64_t i = 0; i < OBJ_BYTES / 8; i++)
        ((uint64_t *)g_obj)[i] = i * 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < OBJ_BYTES / (4 * MIB); i++) {
        g_chunks[i] = malloc(4 * MIB);
        if (!g_chunks[i])
            return 1;
        memcpy(g_chunks[i], g_obj + i * 4 * MIB, 4 * MIB);
    }
    char be_name[] = "mem";
    struct backend be = {.ops = &mb_ops, .name = be_name};
    struct cache_obj obj = {.be = &be, .key = "bench/obj", .etag = "v1", .size_bytes = OBJ_BYTES};
    if (argc > 3 && strcmp(argv[3], "curves") == 0) {
        int r = curves_ab(dir, (int)seconds < 3 ? 3 : (int)seconds, &obj);
        for (size_t i = 0; i < OBJ_BYTES / (4 * MIB); i++)
            free(g_chunks[i]);
        free(g_obj);
        return r;
    }

    printf("# RAM-level hits: %llu MiB object, random 1 MiB reads, 4 MiB blocks\n",
           (unsigned long long)(OBJ_BYTES / MIB));
    struct cache_config cfg = {.block_size = 4 * MIB, .ram_bytes = 2 * OBJ_BYTES};
    struct cache *c = NULL;
    if (cache_open(&cfg, &c) < 0)
        return 1;
    warm(c, &obj);
    for (int t = 1; t <= 2; t++) {
        /* memcpy before and after, best of the two: noise can only flatter the cache less */
        double mc1 = measure(0, t, NULL, NULL, -1, seconds);
        double ch = measure(1, t, c, &obj, -1, seconds);
        double mc2 = measure(0, t, NULL, NULL, -1, seconds);
        double mc = mc1 > mc2 ? mc1 : mc2;
        printf("threads=%d  memcpy %6.2f GB/s  cache_read %6.2f GB/s  ratio %.2f\n", t, mc, ch,
               ch / mc);
    }
    struct cache_stats st;
    cache_stats_get(c, &st);
    printf("  (fetches during measurement: %llu)\n",
           (unsigned long long)(st.fetches - OBJ_BYTES / (4 * MIB)));
    cache_close(c);

    char file[4096], cdir[2][4096];
    snprintf(file, sizeof(file), "%s/cache_hit_plain.%d", dir, (int)getpid());
    for (int e = 0; e < 2; e++)
        snprintf(cdir[e], sizeof(cdir[e]), "%s/cache_hit_dir%d.%d", dir, e, (int)getpid());
    int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || pwrite(fd, g_obj, OBJ_BYTES, 0) != (ssize_t)OBJ_BYTES) {
        fprintf(stderr, "cache_hit: cannot write %s\n", file);
        return 1;
    }
    int rounds = (int)seconds < 3 ? 3 : (int)seconds;
    printf("# disk-level hits (ram_bytes=0), page-cache warm, random 1 MiB reads, 1 thread, %d "
           "rounds of 1 s each: pread, every-read (disk_verify_every_read: every chunk read "
           "hashed), default (chunks verified < 1 s earlier served unhashed); ratios to the "
           "round's pread, median (min-max)\n",
           rounds);
    size_t bss[] = {MIB, 4 * MIB};
    for (int k = 0; k < 2; k++) {
        /* two caches of the same data in two directories, every-read [1] and default [0] */
        struct cache *cc[2];
        for (int e = 0; e < 2; e++) {
            struct cache_config dc = {.block_size = bss[k],
                                      .disk_dir = cdir[e],
                                      .disk_bytes = 2 * OBJ_BYTES,
                                      .disk_verify_every_read = e == 1};
            cc[e] = NULL;
            if (cache_open(&dc, &cc[e]) < 0) {
                fprintf(stderr, "cache_hit: cannot open a cache in %s\n", cdir[e]);
                return 1;
            }
            warm(cc[e], &obj);
        }
        /* Steady state: block files whose ctime is less than 3 s old are hashed on every read
         * (docs/CACHE.md "Verification of disk reads"); a daemon's hot blocks are older. */
        sleep(4);
        double ratio[2][64], gbs[3] = {0, 0, 0};
        int nr = rounds < 64 ? rounds : 64;
        for (int r = 0; r < nr; r++) {
            double pr = measure(2, 1, NULL, NULL, fd, 1.0);
            gbs[2] += pr / nr;
            for (int e = 1; e >= 0; e--) {
                double ch = measure(1, 1, cc[e], &obj, -1, 1.0);
                gbs[e] += ch / nr;
                ratio[e][r] = ch / pr;
            }
        }
        uint64_t unhashed[2], hits[2], fails = 0;
        for (int e = 0; e < 2; e++) {
            cache_stats_get(cc[e], &st);
            unhashed[e] = st.disk_reads_unhashed;
            hits[e] = st.disk.hits;
            fails += st.checksum_failures;
            cache_evict(cc[e], "mem", "");
            cache_close(cc[e]);
            qsort(ratio[e], (size_t)nr, sizeof(double), cmp_double);
        }
        printf("block=%zu MiB  pread %5.2f GB/s  every-read %5.2f GB/s ratio %.2f (%.2f-%.2f)  "
               "default %5.2f GB/s ratio %.2f (%.2f-%.2f)  (disk hits %llu / %llu, unhashed "
               "%llu / %llu, checksum failures %llu)\n",
               (size_t)(bss[k] / MIB), gbs[2], gbs[1], ratio[1][nr / 2], ratio[1][0],
               ratio[1][nr - 1], gbs[0], ratio[0][nr / 2], ratio[0][0], ratio[0][nr - 1],
               (unsigned long long)hits[1], (unsigned long long)hits[0],
               (unsigned long long)unhashed[1], (unsigned long long)unhashed[0],
               (unsigned long long)fails);
    }
    close(fd);
    unlink(file);
    for (int e = 0; e < 2; e++) {
        char cmd[8300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cdir[e]);
        if (system(cmd) != 0)
            fprintf(stderr, "cache_hit: could not remove %s\n", cdir[e]);
    }
    for (size_t i = 0; i < OBJ_BYTES / (4 * MIB); i++)
        free(g_chunks[i]);
    free(g_obj);
    return 0;
}
