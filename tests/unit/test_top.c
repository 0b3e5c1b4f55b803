/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_top.c - the model of `tierctl top` (src/cli/top.c) on recorded GET /v1/telemetry answers:
 * rates and hit shares over the interval between two answers, percentiles from the bucket
 * differences (midpoints of the documented scheme), series new in the interval, a restart of
 * tierd, sorting by ops or bytes, the table and the JSON, and answers of the wrong shape.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/top.h"

/* The scheme tierd exports (telemetry.h): 512 ns .. 2^36 ns, 32 sub-buckets per octave. */
#define HIST                                                                                       \
    "\"hist\":{\"min_ns\":512,\"max_ns\":68719476736,\"sub_buckets\":32,"                          \
    "\"overflow_upper_ns\":137438953472}"

static void parse(const char *text, struct top_snap *s)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        fail_msg("test JSON does not parse: %s: %s", je.text, text);
    char err[256];
    int rc = top_snap_parse(j, s, err, sizeof(err));
    json_decref(j); /* the snapshot keeps its own reference */
    if (rc)
        fail_msg("top_snap_parse: %d %s", rc, err);
}

/* An ops entry with all its ops in one bucket. */
static char *op_entry(const char *tenant, const char *cls, const char *op, const char *tier,
                      uint64_t ops, uint64_t bytes, uint64_t upper_ns)
{
    char *s = NULL;
    if (asprintf(&s,
                 "{\"tenant_id\":0,\"tenant\":\"%s\",\"class\":\"%s\",\"op\":\"%s\",\"tier\":"
                 "\"%s\",\"ops\":%llu,\"bytes\":%llu,\"errors\":0,\"sum_ns\":%llu,\"min_ns\":1,"
                 "\"max_ns\":1,\"buckets\":[[%llu,%llu]]}",
                 tenant, cls, op, tier, (unsigned long long)ops, (unsigned long long)bytes,
                 (unsigned long long)(ops * upper_ns), (unsigned long long)upper_ns,
                 (unsigned long long)ops) < 0)
        abort();
    return s;
}

/* Not inlined: gcc 12 -O2 then takes asprintf's result for a pointer to the local s
 * (-Wdangling-pointer) in a caller that searches the text. */
__attribute__((noinline)) static char *snap_text(uint64_t now_s, uint64_t started, const char *ops,
                                                 const char *sched)
{
    char *s = NULL;
    if (asprintf(&s,
                 "{\"version\":1,\"now_ns\":%llu,\"started_ns\":%llu,\"max_tenants\":64," HIST
                 ",\"ops\":[%s],\"sched\":[%s],\"gauges\":{\"tiers\":{\"ram\":{\"used_bytes\":"
                 "100,\"capacity_bytes\":1000},\"disk\":{\"used_bytes\":5,\"capacity_bytes\":50}}},"
                 "\"health\":{\"status\":\"ready\",\"reasons\":[]}}",
                 (unsigned long long)(now_s * 1000000000ULL), (unsigned long long)started, ops,
                 sched) < 0)
        abort();
    return s;
}

/* Join entries with commas; frees them. */
static char *join(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    char *out = strdup("");
    for (int i = 0; i < n; i++) {
        char *e = va_arg(ap, char *);
        char *t = NULL;
        if (asprintf(&t, "%s%s%s", out, i ? "," : "", e) < 0)
            abort();
        free(out);
        free(e);
        out = t;
    }
    va_end(ap);
    return out;
}

static const struct top_tenant_row *row(const struct top_view *v, const char *name)
{
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->t[i].tenant, name) == 0)
            return &v->t[i];
    fail_msg("no row for tenant %s", name);
    return NULL;
}

/* Sorts uint64_t values, and tele_buckets by their first member. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Bucket [1024, 1056) has upper bound 1056 and midpoint 1040; [2^20, 2^20 + 2^15) midpoint
 * 2^20 + 2^14; the underflow bucket reports min_ns, the overflow bucket max_ns. */
static void test_quantile(void **state)
{
    (void)state;
    struct top_scheme sc = {512, 68719476736ULL, 32, 137438953472ULL};
    struct tele_bucket h[] = {
        {512, 1}, {1056, 97}, {(1u << 20) + (1u << 15), 1}, {137438953472ULL, 1}};
    assert_int_equal(top_quantile_ns(&sc, h, 4, 0.0), 512); /* rank 1 */
    assert_int_equal(top_quantile_ns(&sc, h, 4, 0.01), 512);
    assert_int_equal(top_quantile_ns(&sc, h, 4, 0.02), 1040);
    assert_int_equal(top_quantile_ns(&sc, h, 4, 0.50), 1040);
    assert_int_equal(top_quantile_ns(&sc, h, 4, 0.98), 1040);
    assert_int_equal(top_quantile_ns(&sc, h, 4, 0.99), (1u << 20) + (1u << 14));
    assert_int_equal(top_quantile_ns(&sc, h, 4, 1.0), 68719476736ULL);
    struct tele_bucket empty[] = {{1056, 0}};
    assert_int_equal(top_quantile_ns(&sc, empty, 1, 0.5), 0);
    /* a scheme of other bounds (or none): no quantile rather than a wrong midpoint */
    struct top_scheme other = {1024, 68719476736ULL, 16, 137438953472ULL}, none = {0, 0, 0, 0};
    assert_false(top_scheme_known(&other));
    assert_int_equal(top_quantile_ns(&other, h, 4, 0.50), 0);
    assert_int_equal(top_quantile_ns(&none, h, 4, 0.50), 0);
    assert_true(top_scheme_known(&sc));

    /* random values against the exact quantiles: within 1/64 (the bucket's half width) */
    srand(7);
    enum { N = 20000 };
    static uint64_t vals[N];
    static struct tele_bucket hb[N];
    for (int i = 0; i < N; i++) {
        double lg = 10.0 + 20.0 * (double)rand() / RAND_MAX; /* 1 us .. 1 s, log-uniform */
        vals[i] = (uint64_t)exp2(lg);
        unsigned k = 63u - (unsigned)__builtin_clzll(vals[i]);
        uint64_t width = (1ULL << k) / 32;
        hb[i].upper_ns = ((vals[i] - (1ULL << k)) / width + 1) * width + (1ULL << k);
        hb[i].count = 1;
    }
    qsort(vals, N, sizeof(vals[0]), cmp_u64);
    qsort(hb, N, sizeof(hb[0]), cmp_u64);
    const double qs[] = {0.5, 0.9, 0.99, 0.999};
    for (size_t i = 0; i < 4; i++) {
        uint64_t exact = vals[(size_t)ceil(qs[i] * N) - 1];
        uint64_t got = top_quantile_ns(&sc, hb, N, qs[i]);
        double rel = fabs((double)got - (double)exact) / (double)exact;
        if (rel > 1.0 / 64)
            fail_msg("q%.3f: %llu vs exact %llu (%.2f %%)", qs[i], (unsigned long long)got,
                     (unsigned long long)exact, 100 * rel);
    }
}

static void test_interval(void **state)
{
    (void)state;
    /* t = 10 s: alice has read 100 times from RAM; bob 50 times from the backend */
    char *ops0 = join(2, op_entry("alice", "inference", "read", "ram", 100, 100 << 12, 1056),
                      op_entry("bob", "training", "read", "backend", 50, 50 << 20, 2u << 20));
    char *s0 = snap_text(10, 5, ops0, "");
    /* t = 12 s: alice +200 RAM reads, +50 disk reads (new series), +10 lookups; bob +100 reads
     * from the backend, 4 backend calls waiting 1 ms each at the scheduler; carol new, idle */
    char *ops1 = join(5, op_entry("alice", "inference", "read", "ram", 300, 300 << 12, 1056),
                      op_entry("alice", "inference", "read", "disk", 50, 50 << 12, 65536 + 2048),
                      op_entry("alice", "inference", "lookup", "ram", 10, 0, 1056),
                      op_entry("bob", "training", "read", "backend", 150, 150 << 20, 2u << 20),
                      op_entry("carol", "background", "open", "ram", 0, 0, 1056));
    char *sched1 = NULL;
    assert_true(asprintf(&sched1,
                         "{\"tenant_id\":3,\"tenant\":\"bob\",\"class\":\"training\",\"ops\":4,"
                         "\"bytes\":0,\"errors\":0,\"wait\":{\"sum_ns\":4000000,\"min_ns\":1,"
                         "\"max_ns\":1,\"buckets\":[[%u,4]]},\"service\":{\"sum_ns\":0,"
                         "\"min_ns\":0,\"max_ns\":0,\"buckets\":[]}}",
                         (1u << 20) + (1u << 15)) > 0);
    char *s1 = snap_text(12, 5, ops1, sched1);
    struct top_snap a, b;
    parse(s0, &a);
    parse(s1, &b);
    free(ops0), free(ops1), free(sched1), free(s0), free(s1);

    struct top_view v;
    assert_int_equal(top_view_build(&a, &b, 2.0, TOP_SORT_OPS, &v), 0);
    assert_int_equal(v.n, 3);
    assert_false(v.restarted);
    /* by ops: alice 260 in 2 s, bob 100, carol 0 */
    assert_string_equal(v.t[0].tenant, "alice");
    assert_string_equal(v.t[1].tenant, "bob");
    assert_string_equal(v.t[2].tenant, "carol");
    const struct top_tenant_row *al = row(&v, "alice"), *bo = row(&v, "bob"),
                                *ca = row(&v, "carol");
    assert_true(fabs(al->ops_s - 130.0) < 1e-9);
    assert_int_equal(al->ops_total, 360);
    assert_true(fabs(al->bytes_s - (250.0 * 4096) / 2) < 1e-6);
    assert_true(fabs(al->hit_pct[TOP_RAM] - 80.0) < 1e-9);
    assert_true(fabs(al->hit_pct[TOP_DISK] - 20.0) < 1e-9);
    assert_true(fabs(al->hit_pct[TOP_BACKEND]) < 1e-9);
    /* 200 reads at ~1 us, 50 at ~67 us: p50 in the first bucket, p99 in the second (lookups
     * are not in the latency) */
    assert_true(fabs(al->p50_s - 1040e-9) < 1e-15);
    assert_true(fabs(al->p99_s - (65536 + 1024) * 1e-9) < 1e-15);
    assert_true(al->qwait_avg_s < 0); /* no backend call */
    assert_int_equal(al->ncls, 1);
    assert_string_equal(al->cls[0].cls, "inference");

    assert_true(fabs(bo->ops_s - 50.0) < 1e-9);
    assert_true(fabs(bo->hit_pct[TOP_BACKEND] - 100.0) < 1e-9);
    assert_true(fabs(bo->qwait_avg_s - 1e-3) < 1e-12);
    assert_true(fabs(bo->qwait_p99_s - ((1u << 20) + (1u << 14)) * 1e-9) < 1e-15);
    assert_int_equal(bo->cls[0].sched_n, 4);
    assert_int_equal(bo->cls[0].sched_total, 4);
    assert_int_equal(bo->cls[0].ops_total, 150);

    assert_true(ca->ops_s == 0 && ca->hit_pct[TOP_RAM] < 0 && ca->p99_s < 0);
    top_view_fini(&v);

    /* by bytes: bob (100 MiB) before alice */
    assert_int_equal(top_view_build(&a, &b, 2.0, TOP_SORT_BYTES, &v), 0);
    assert_string_equal(v.t[0].tenant, "bob");

    /* the table names every tenant; the JSON has the same figures */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    top_print_table(f, &v, TOP_SORT_BYTES);
    fclose(f);
    assert_non_null(strstr(buf, "3 tenants, interval 2.0 s, sorted by MB/s"));
    assert_non_null(strstr(buf, "\nalice "));
    assert_non_null(strstr(buf, "\nbob "));
    assert_non_null(strstr(buf, "\ncarol "));
    free(buf);
    json_t *j = top_view_json(&v);
    assert_non_null(j);
    json_t *t0 = json_array_get(json_object_get(j, "tenants"), 0);
    assert_string_equal(json_string_value(json_object_get(t0, "tenant")), "bob");
    assert_true(fabs(json_real_value(json_object_get(t0, "ops_per_s")) - 50.0) < 1e-9);
    assert_true(fabs(json_real_value(json_object_get(json_object_get(t0, "hit_pct"), "backend")) -
                     100.0) < 1e-9);
    json_t *t2 = json_array_get(json_object_get(j, "tenants"), 2);
    assert_true(json_is_null(json_object_get(t2, "hit_pct")));
    assert_true(json_is_null(json_object_get(t2, "p99_s")));
    json_decref(j);
    top_view_fini(&v);

    /* without an older answer: everything since tierd started */
    assert_int_equal(top_view_build(NULL, &b, 7.0, TOP_SORT_OPS, &v), 0);
    assert_true(fabs(row(&v, "alice")->ops_s - 360.0 / 7) < 1e-9);
    top_view_fini(&v);

    /* a restart (other started_ns): the newer answer counts from zero */
    char *ops2 = join(1, op_entry("alice", "inference", "read", "ram", 20, 0, 1056));
    char *s2 = snap_text(13, 6, ops2, "");
    struct top_snap c;
    parse(s2, &c);
    free(ops2), free(s2);
    assert_int_equal(top_view_build(&b, &c, 1.0, TOP_SORT_OPS, &v), 0);
    assert_true(v.restarted);
    assert_int_equal(v.n, 1);
    assert_true(fabs(v.t[0].ops_s - 20.0) < 1e-9);
    top_view_fini(&v);

    top_snap_fini(&a);
    top_snap_fini(&b);
    top_snap_fini(&c);
    top_snap_fini(&c); /* twice is fine */
}

static void test_bad_shapes(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "[]",
        "{\"ops\":[],\"sched\":[]}",
        "{" HIST ",\"ops\":{},\"sched\":[]}",
        "{" HIST ",\"ops\":[{\"tenant\":\"a\"}],\"sched\":[]}",
        "{" HIST ",\"ops\":[{\"tenant\":\"a\",\"class\":\"training\",\"op\":\"read\",\"tier\":"
        "\"ram\",\"buckets\":[[1,2,3]]}],\"sched\":[]}",
        "{" HIST ",\"ops\":[],\"sched\":[{\"tenant\":\"a\",\"class\":\"training\"}]}",
        "{" HIST ",\"ops\":[{\"tenant\":\"a\",\"class\":\"training\",\"op\":\"read\",\"tier\":"
        "\"ram\",\"buckets\":[[-5,2]]}],\"sched\":[]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = json_loads(bad[i], 0, NULL);
        assert_non_null(j);
        struct top_snap s;
        char err[256] = "";
        assert_int_equal(top_snap_parse(j, &s, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "/v1/telemetry"));
        json_decref(j);
    }
}

/* "stalls": a row for a tenant that only reported stalls, the STALL% column from tierd's ratio
 * ("-" for none), the JSON's "stall" object, and a tierd without "stalls" (older) showing none.
 * "gpu": the GPU% column from a tenant's GPU figure, a row for a tenant that only has one, and
 * "gpu_util" in the JSON; without "gpu" in either snapshot, no GPU% column. */
static void test_stalls(void **state)
{
    (void)state;
    char *ops = op_entry("alice", "training", "read", "ram", 10, 4096, 1024);
    char *base = snap_text(10, 1, ops, "");
    free(ops);
    /* splice "stalls" in before the gauges */
    const char *gauges = strstr(base, ",\"gauges\"");
    assert_non_null(gauges);
    size_t at = (size_t)(gauges - base);
    char *text = NULL;
    if (asprintf(&text,
                 "%.*s,\"stalls\":[{\"tenant_id\":3,\"tenant\":\"bob\",\"wait_s\":3.0,"
                 "\"compute_s\":1.0,\"steps\":40,\"reports\":2,\"dropped\":0,\"reporters\":1,"
                 "\"stall_ratio\":0.75,\"names\":[]},{\"tenant_id\":2,\"tenant\":\"alice\","
                 "\"wait_s\":1.0,\"compute_s\":0,\"steps\":1,\"reports\":1,\"dropped\":0,"
                 "\"reporters\":0,\"stall_ratio\":null,\"names\":[]}],\"gpu\":{\"devices\":1,"
                 "\"tenants\":[{\"tenant_id\":3,\"tenant\":\"bob\",\"gpu_util\":0.42},"
                 "{\"tenant_id\":4,\"tenant\":\"carol\",\"gpu_util\":0.9}]}%s",
                 (int)at, base, base + at) < 0)
        abort();
    struct top_snap cur, old;
    parse(text, &cur);
    parse(base, &old);
    assert_int_equal(old.nst, 0);
    struct top_view v;
    assert_int_equal(top_view_build(NULL, &cur, 1.0, TOP_SORT_OPS, &v), 0);
    assert_int_equal(v.n, 3);
    const struct top_tenant_row *b = row(&v, "bob"), *a = row(&v, "alice");
    assert_true(b->gpu_util == 0.42);
    assert_true(a->gpu_util < 0);
    assert_null(row(&v, "carol")->stall);
    assert_true(row(&v, "carol")->gpu_util == 0.9);
    assert_non_null(b->stall);
    assert_int_equal(b->stall->steps, 40);
    assert_true(b->stall->ratio == 0.75);
    assert_int_equal(b->ncls, 0);
    assert_non_null(a->stall);
    assert_true(a->stall->ratio < 0);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    top_print_table(f, &v, TOP_SORT_OPS);
    fclose(f);
    assert_non_null(strstr(out, "QWAITms STALL%   GPU%\n"));
    const char *bl = strstr(out, "\nbob ");
    assert_non_null(bl);
    assert_non_null(strstr(bl, " 75.0   42.0\n"));
    const char *cl = strstr(out, "\ncarol ");
    assert_non_null(cl);
    assert_non_null(strstr(cl, "      -   90.0\n"));
    const char *al = strstr(out, "\nalice ");
    assert_non_null(al);
    assert_true(strstr(al, "      -      -\n") == strchr(al + 1, '\n') - 14);
    free(out);
    json_t *j = top_view_json(&v);
    assert_non_null(j);
    json_t *t, *bj = NULL, *aj = NULL;
    size_t i;
    json_array_foreach(json_object_get(j, "tenants"), i, t)
    {
        const char *n = json_string_value(json_object_get(t, "tenant"));
        if (strcmp(n, "bob") == 0)
            bj = t;
        else if (strcmp(n, "alice") == 0)
            aj = t;
    }
    assert_non_null(bj);
    assert_non_null(aj);
    json_t *st = json_object_get(bj, "stall");
    assert_int_equal(json_integer_value(json_object_get(st, "steps")), 40);
    assert_true(json_real_value(json_object_get(st, "ratio")) == 0.75);
    assert_true(json_is_null(json_object_get(json_object_get(aj, "stall"), "ratio")));
    assert_true(json_real_value(json_object_get(bj, "gpu_util")) == 0.42);
    assert_true(json_is_null(json_object_get(aj, "gpu_util")));
    json_decref(j);
    top_view_fini(&v);
    assert_int_equal(top_view_build(NULL, &old, 1.0, TOP_SORT_OPS, &v), 0);
    assert_null(row(&v, "alice")->stall);
    /* no "gpu" (no sampler): no GPU% column, the lines end at STALL% */
    assert_false(v.gpu);
    f = open_memstream(&out, &len);
    top_print_table(f, &v, TOP_SORT_OPS);
    fclose(f);
    assert_null(strstr(out, "GPU%"));
    assert_non_null(strstr(out, "QWAITms STALL%\n"));
    al = strstr(out, "\nalice ");
    assert_non_null(al);
    assert_true(strstr(al, "      -\n") == strchr(al + 1, '\n') - 7);
    free(out);
    top_view_fini(&v);
    /* one snapshot with a sampler is enough */
    assert_int_equal(top_view_build(&cur, &old, 1.0, TOP_SORT_OPS, &v), 0);
    assert_true(v.gpu);
    top_view_fini(&v);
    top_snap_fini(&cur);
    top_snap_fini(&old);
    free(text);
    free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile),
        cmocka_unit_test(test_interval),
        cmocka_unit_test(test_bad_shapes),
        cmocka_unit_test(test_stalls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
