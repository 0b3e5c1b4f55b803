/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_bench.c - throughput of the S3 backend against a real S3 endpoint (issue 2,
 * Performance). Run by bench/backend.sh, which starts a private RGW; results go to
 * docs/bench/backend.md.
 *
 *   1. one 256 MiB object: single-stream GET (one backend_read of the whole range) vs ranged
 *      parallel GET (backend_read_parallel, 8 MiB chunks, 8 threads), alternated, median MB/s.
 *   2. 1,000 x 100 KiB objects: fetched one at a time vs by N threads in flight, objects/s.
 *
 * Usage: backend_bench --env FILE [--ceph-dir DIR] [--big-mib 256] [--chunk-mib 8] [--threads 8]
 *                      [--small-count 1000] [--small-kib 100] [--small-threads 16] [--rounds 3]
 * FILE is the env file written by scripts/ceph.sh (S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY,
 * S3_SECRET_KEY); with --ceph-dir the CPU time of radosgw + ceph-osd is reported too (from their
 * pid files), since on a small machine the server competes for the same cores. A fresh bucket is
 * created for each run. Single-threaded except for the measured worker threads, which share only an
 * atomic index.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "s3env.h"
#include "tiers/backend.h"

static double secs(uint64_t t0)
{
    return (double)(tier_now_mono_ns() - t0) / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* CPU seconds (user + system) used so far by this process and, when the ceph state directory is
 * known, by its radosgw and ceph-osd daemons: on a small machine the server shares the cores. */
static double proc_cpu_s(const char *pidfile)
{
    FILE *f = fopen(pidfile, "r");
    if (!f)
        return 0;
    char line[64] = "";
    if (!fgets(line, sizeof(line), f))
        line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    char path[96];
    snprintf(path, sizeof(path), "/proc/%s/stat", line);
    f = fopen(path, "r");
    if (!f)
        return 0;
    char stat[1024] = "";
    if (!fgets(stat, sizeof(stat), f))
        stat[0] = '\0';
    fclose(f);
    const char *p = strrchr(stat, ')');
    if (!p)
        return 0;
    unsigned long long ut = 0, st = 0;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
     */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static const char *g_ceph_dir;

static void cpu_now(double *client, double *server)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *client = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
              ru.ru_stime.tv_usec / 1e6;
    *server = 0;
    if (g_ceph_dir) {
        char path[512];
        snprintf(path, sizeof(path), "%s/client.rgw.tierd.pid", g_ceph_dir);
        *server += proc_cpu_s(path);
        snprintf(path, sizeof(path), "%s/osd.0.pid", g_ceph_dir);
        *server += proc_cpu_s(path);
    }
}

/* ---- small objects --------------------------------------------------------------------------- */

struct small_job {
    struct backend *be;
    int count;
    size_t size;
    atomic_int next;
    atomic_int err;
    int put; /* 1: upload, 0: fetch */
};

static void *small_worker(void *arg)
{
    struct small_job *j = arg;
    char *buf = malloc(j->size);
    if (!buf) {
        atomic_store(&j->err, -ENOMEM);
        return NULL;
    }
    for (;;) {
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->count || atomic_load(&j->err))
            break;
        char key[64];
        snprintf(key, sizeof(key), "small/o%05d", i);
        ssize_t rc;
        if (j->put) {
            memset(buf, i & 0xff, j->size);
            rc = backend_put(j->be, NULL, key, buf, j->size, NULL);
        } else {
            rc = backend_read(j->be, NULL, key, 0, buf, j->size, NULL, NULL);
            if (rc >= 0 && (size_t)rc != j->size)
                rc = -EIO;
            if (rc >= 0 && (unsigned char)buf[j->size - 1] != (unsigned char)(i & 0xff))
                rc = -EIO;
        }
        if (rc < 0) {
            fprintf(stderr, "%s %s: %zd %s\n", j->put ? "put" : "get", key, rc, tier_err_msg());
            atomic_store(&j->err, (int)rc);
        }
    }
    free(buf);
    return NULL;
}

static int run_small(struct backend *be, int count, size_t size, int threads, int put,
                     double *elapsed)
{
    struct small_job j = {.be = be, .count = count, .size = size, .put = put};
    atomic_init(&j.next, 0);
    atomic_init(&j.err, 0);
    pthread_t t[256];
    if (threads > 256)
        threads = 256;
    uint64_t t0 = tier_now_mono_ns();
    int started = 0;
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[started], NULL, small_worker, &j) == 0)
            started++;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    *elapsed = secs(t0);
    return atomic_load(&j.err);
}

static int parse_int_arg(const char *v, int *out)
{
    uint64_t u;
    if (tier_parse_u64(v, &u) || u == 0 || u > 1000000)
        return -EINVAL;
    *out = (int)u;
    return 0;
}

int main(int argc, char **argv)
{
    const char *env_path = NULL;
    int big_mib = 256, chunk_mib = 8, threads = 8, small_count = 1000, small_kib = 100,
        small_threads = 16, rounds = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *dst = NULL;
        if (strcmp(a, "--env") == 0 && v) {
            env_path = v;
            i++;
            continue;
        }
        if (strcmp(a, "--ceph-dir") == 0 && v) {
            g_ceph_dir = v;
            i++;
            continue;
        }
        if (strcmp(a, "--big-mib") == 0)
            dst = &big_mib;
        else if (strcmp(a, "--chunk-mib") == 0)
            dst = &chunk_mib;
        else if (strcmp(a, "--threads") == 0)
            dst = &threads;
        else if (strcmp(a, "--small-count") == 0)
            dst = &small_count;
        else if (strcmp(a, "--small-kib") == 0)
            dst = &small_kib;
        else if (strcmp(a, "--small-threads") == 0)
            dst = &small_threads;
        else if (strcmp(a, "--rounds") == 0)
            dst = &rounds;
        if (!dst || !v || parse_int_arg(v, dst) != 0) {
            fprintf(
                stderr,
                "usage: %s --env FILE [--ceph-dir DIR] [--big-mib N] [--chunk-mib N] [--threads N] "
                "[--small-count N] [--small-kib N] [--small-threads N] "
                "[--rounds N]\n",
                argv[0]);
            return 2;
        }
        i++;
    }
    struct tu_s3_env e;
    if (!env_path || !tu_s3_env_load_file(env_path, &e)) {
        fprintf(stderr,
                "backend_bench: cannot read the S3 env file '%s' (scripts/ceph.sh start "
                "writes DIR/env)\n",
                env_path ? env_path : "(none; pass --env)");
        return 2;
    }
    if (rounds > 64)
        rounds = 64;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char bucket[64];
    snprintf(bucket, sizeof(bucket), "bench-%d-%ld", (int)getpid(), (long)time(NULL));
    if (tu_s3_bucket_create_named(&e, bucket) != 0) {
        fprintf(stderr, "backend_bench: cannot create bucket %s on %s\n", bucket, e.endpoint);
        return 1;
    }
    int nconn = (threads > small_threads ? threads : small_threads) + 1;
    struct s3_backend_config cfg = {.name = "bench",
                                    .endpoint = e.endpoint,
                                    .region = e.region,
                                    .bucket = bucket,
                                    .path_style = true,
                                    .access_key = e.access_key,
                                    .secret_key = e.secret_key,
                                    .max_connections = nconn};
    struct backend *be = NULL;
    if (backend_s3_open(&cfg, &be) != 0) {
        fprintf(stderr, "backend_bench: %s\n", tier_err_msg());
        return 1;
    }
    int rc = 1;
    size_t big = (size_t)big_mib << 20;
    char *buf = malloc(big);
    if (!buf)
        goto out;
    for (size_t i = 0; i < big; i += 4096)
        buf[i] = (char)(i >> 12);

    printf("endpoint %s, bucket %s\n", e.endpoint, bucket);
    uint64_t t0 = tier_now_mono_ns();
    if (backend_put(be, NULL, "big.bin", buf, big, NULL) != 0) {
        fprintf(stderr, "put big.bin: %s\n", tier_err_msg());
        goto out;
    }
    printf("put %d MiB object: %.1f MB/s\n", big_mib, (double)big / 1e6 / secs(t0));

    /* Warm-up read, so the first measured run does not pay for cold caches alone. */
    if (backend_read(be, NULL, "big.bin", 0, buf, big, NULL, NULL) != (ssize_t)big)
        goto out;
    double single[64], par[64];
    double cpu_c[2] = {0, 0}, cpu_s[2] = {0, 0}, c0, s0, c1, s1;
    for (int r = 0; r < rounds; r++) {
        cpu_now(&c0, &s0);
        t0 = tier_now_mono_ns();
        ssize_t n = backend_read(be, NULL, "big.bin", 0, buf, big, NULL, NULL);
        double s = secs(t0);
        cpu_now(&c1, &s1);
        cpu_c[0] += c1 - c0;
        cpu_s[0] += s1 - s0;
        if (n != (ssize_t)big) {
            fprintf(stderr, "single GET: %zd %s\n", n, tier_err_msg());
            goto out;
        }
        single[r] = (double)big / 1e6 / s;
        cpu_now(&c1, &s1);
        t0 = tier_now_mono_ns();
        n = backend_read_parallel(be, NULL, "big.bin", 0, buf, big, (size_t)chunk_mib << 20,
                                  threads, NULL);
        s = secs(t0);
        if (n != (ssize_t)big) {
            fprintf(stderr, "parallel GET: %zd %s\n", n, tier_err_msg());
            goto out;
        }
        par[r] = (double)big / 1e6 / s;
        cpu_now(&c0, &s0);
        cpu_c[1] += c0 - c1;
        cpu_s[1] += s0 - s1;
        printf("round %d: single-stream %.1f MB/s, parallel (%d MiB x %d threads) %.1f MB/s\n",
               r + 1, single[r], chunk_mib, threads, par[r]);
    }
    double ms = median(single, rounds), mp = median(par, rounds);
    printf("RESULT big: single-stream %.1f MB/s, parallel %.1f MB/s, ratio %.2fx (goal >= 1.2x)\n",
           ms, mp, mp / ms);
    double gb = (double)big * rounds / 1e9;
    printf("cpu per GB: single-stream client %.2f s + server %.2f s, parallel client %.2f s + "
           "server %.2f s%s\n",
           cpu_c[0] / gb, cpu_s[0] / gb, cpu_c[1] / gb, cpu_s[1] / gb,
           g_ceph_dir ? "" : " (server not measured: no --ceph-dir)");

    size_t small = (size_t)small_kib << 10;
    double el;
    if (run_small(be, small_count, small, small_threads, 1, &el) != 0)
        goto out;
    printf("put %d x %d KiB with %d threads: %.0f objects/s\n", small_count, small_kib,
           small_threads, small_count / el);
    double one[64], many[64];
    for (int r = 0; r < rounds; r++) {
        if (run_small(be, small_count, small, 1, 0, &el) != 0)
            goto out;
        one[r] = small_count / el;
        if (run_small(be, small_count, small, small_threads, 0, &el) != 0)
            goto out;
        many[r] = small_count / el;
        printf("round %d: one at a time %.0f objects/s, %d in flight %.0f objects/s\n", r + 1,
               one[r], small_threads, many[r]);
    }
    double m1 = median(one, rounds), mn = median(many, rounds);
    printf("RESULT small: one at a time %.0f objects/s, %d in flight %.0f objects/s, ratio %.2fx "
           "(goal >= 4x)\n",
           m1, small_threads, mn, mn / m1);
    rc = 0;
out:
    free(buf);
    backend_free(be);
    curl_global_cleanup();
    return rc;
}
