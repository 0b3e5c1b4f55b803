/* SPDX-License-Identifier: Apache-2.0 */
/*
 * telemetry_bench.c - what telemetry costs: ns per tele_op_record on one thread, on two threads
 * recording into different series (two tenants, the common case) and into the same series (the
 * worst case: both threads add to the same cache lines), and the time to render the Prometheus
 * exposition and the /v1/telemetry JSON with 64 tenants x 4 classes, every op and tier
 * populated (4,608 op series and 256 scheduler series). Median of RUNS runs each.
 *
 *   telemetry_bench [RECORDS] [RUNS]     RECORDS per thread per run (default 20,000,000),
 *                                         RUNS (default 5)
 *
 * Results: docs/BENCHMARKS.md.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/timeutil.h"
#include "telemetry/telemetry.h"

#define NLAT 4096

static struct telemetry *g_t;
static uint64_t g_lat[NLAT];
static unsigned long long g_records = 20000000ULL;
static pthread_barrier_t g_go;

struct arg {
    uint32_t tenant;
    double ns_per_op;
};

static void *recorder(void *p)
{
    struct arg *a = p;
    struct tier_ioctx io = {.tenant = a->tenant, .cls = TIER_IO_INFERENCE};
    pthread_barrier_wait(&g_go);
    uint64_t t0 = tier_now_mono_ns();
    for (unsigned long long i = 0; i < g_records; i++)
        tele_op_record(g_t, &io, TELE_OP_READ, TELE_TIER_RAM, g_lat[i & (NLAT - 1)], 4096, 0);
    a->ns_per_op = (double)(tier_now_mono_ns() - t0) / (double)g_records;
    return NULL;
}

/* ns per record, the mean over nthreads threads recording at once */
static double record_run(int nthreads, bool same_series)
{
    pthread_t th[2];
    struct arg a[2];
    pthread_barrier_init(&g_go, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++) {
        a[i].tenant = same_series ? 2 : 2 + (uint32_t)i;
        if (i > 0)
            pthread_create(&th[i], NULL, recorder, &a[i]);
    }
    recorder(&a[0]);
    double sum = a[0].ns_per_op;
    for (int i = 1; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        sum += a[i].ns_per_op;
    }
    pthread_barrier_destroy(&g_go);
    return sum / nthreads;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    int runs = 5;
    if (argc > 1)
        g_records = strtoull(argv[1], NULL, 10);
    if (argc > 2)
        runs = atoi(argv[2]) > 0 ? atoi(argv[2]) : 5;
    uint64_t st = 12345;
    for (int i = 0; i < NLAT; i++) { /* log-uniform 1 us .. 100 ms */
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(st >> 11) / 9007199254740992.0;
        g_lat[i] = (uint64_t)(1000.0 * pow(1e5, u));
    }
    if (telemetry_new(NULL, &g_t) != 0)
        return 1;
    double v[64];
    static const struct {
        const char *what;
        int threads;
        bool same;
    } cases[] = {{"1 thread", 1, false},
                 {"2 threads, different series", 2, false},
                 {"2 threads, same series", 2, true}};
    for (size_t c = 0; c < 3; c++) {
        for (int r = 0; r < runs && r < 64; r++)
            v[r] = record_run(cases[c].threads, cases[c].same);
        double lo = v[0], hi = v[0];
        for (int r = 0; r < runs && r < 64; r++)
            lo = v[r] < lo ? v[r] : lo, hi = v[r] > hi ? v[r] : hi;
        printf("record, %-28s median %6.1f ns/op (min %.1f, max %.1f; %d runs x %llu)\n",
               cases[c].what, median(v, runs), lo, hi, runs, g_records);
    }
    telemetry_free(g_t);

    /* render: 64 tenants x 4 classes x 6 ops x 3 tiers, 16 values each */
    if (telemetry_new(&(struct telemetry_config){.max_tenants = 64}, &g_t) != 0)
        return 1;
    for (uint32_t tn = 0; tn < 64; tn++)
        for (int cl = 0; cl < TIER_IO_NCLASSES; cl++) {
            struct tier_ioctx io = {.tenant = tn, .cls = (enum tier_io_class)cl};
            for (int op = 0; op < TELE_NOPS; op++)
                for (int tr = 0; tr < TELE_NTIERS; tr++)
                    for (int k = 0; k < 16; k++)
                        tele_op_record(g_t, &io, (enum tele_op)op, (enum tele_tier)tr,
                                       g_lat[(tn * 131 + (unsigned)k * 17) & (NLAT - 1)], 4096, 0);
            for (int k = 0; k < 16; k++)
                tele_sched_record(g_t, &io, g_lat[k], g_lat[k + 100], 4096, 0);
        }
    struct tele_gauges g = {.nbackends = 2};
    g.backends[0].name = "s3";
    g.backends[1].name = "warm";
    for (int which = 0; which < 2; which++) {
        size_t len = 0;
        for (int r = 0; r < runs && r < 64; r++) {
            struct dynbuf b;
            dynbuf_init(&b, 1u << 30);
            uint64_t t0 = tier_now_mono_ns();
            int rc =
                which == 0 ? tele_render_prometheus(g_t, &g, &b) : tele_render_json(g_t, &g, &b);
            v[r] = (double)(tier_now_mono_ns() - t0) / 1e6;
            len = b.len;
            dynbuf_fini(&b);
            if (rc)
                return 1;
        }
        printf("render %-10s 64 tenants x 4 classes (4608 op series): median %.1f ms, %zu bytes\n",
               which == 0 ? "/metrics" : "/v1/telemetry", median(v, runs), len);
    }
    telemetry_free(g_t);
    return 0;
}
