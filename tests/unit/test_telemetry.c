/* SPDX-License-Identifier: Apache-2.0 */
/* test_telemetry.c - unit tests for src/telemetry: the bucket scheme, quantiles within 2 % of the
 * exact quantiles of random samples (through the JSON and tele_quantile_diff, as tierctl computes
 * them), folding of tenants beyond max_tenants, label escaping, the structure of the Prometheus
 * text, health reasons, and exact counts after concurrent recording. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/dynbuf.h"
#include "telemetry/telemetry.h"
#include "testutil.h"

#define MS 1000000ULL
#define US 1000ULL

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double unif(uint64_t *st)
{
    return ((double)(tu_rand_next(st) >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(uint64_t *st)
{
    return sqrt(-2.0 * log(unif(st))) * cos(2.0 * M_PI * unif(st));
}

static uint64_t clamp_range(double ns)
{
    if (ns < 1000.0)
        return 1000;
    if (ns > 60e9)
        return 60000000000ULL;
    return (uint64_t)ns;
}

enum dist { D_UNIFORM, D_LOGUNIFORM, D_LOGNORMAL, D_BIMODAL, D_NDIST };

static uint64_t sample(enum dist d, uint64_t *st)
{
    switch (d) {
    case D_UNIFORM: /* 1 us .. 60 s, linear */
        return clamp_range(1000.0 + unif(st) * (60e9 - 1000.0));
    case D_LOGUNIFORM: /* every octave of 1 us .. 60 s */
        return clamp_range(1000.0 * pow(6e7, unif(st)));
    case D_LOGNORMAL: /* median 1 ms, sigma 2 (e-folds) */
        return clamp_range(1e6 * exp(2.0 * gauss(st)));
    case D_BIMODAL: /* RAM hits around 20 us and backend reads around 200 ms */
        return clamp_range(unif(st) < 0.7 ? 20e3 + 2e3 * gauss(st) : 200e6 + 20e6 * gauss(st));
    case D_NDIST:
        break;
    }
    return 0;
}

static uint64_t exact_q(const uint64_t *sorted, size_t n, double q)
{
    double r = q * (double)n;
    size_t rank = (size_t)r;
    if ((double)rank < r)
        rank++;
    if (rank == 0)
        rank = 1;
    return sorted[rank - 1];
}

static json_t *render_json(struct telemetry *t, const struct tele_gauges *g)
{
    struct dynbuf b;
    dynbuf_init(&b, 256u << 20);
    assert_int_equal(tele_render_json(t, g, &b), 0);
    json_error_t err;
    json_t *j = json_loadb(b.data, b.len, 0, &err);
    if (!j)
        fail_msg("JSON does not parse: %s at %d: %.80s", err.text, err.position,
                 b.data + (err.position > 20 ? err.position - 20 : 0));
    dynbuf_fini(&b);
    return j;
}

static char *render_prom(struct telemetry *t, const struct tele_gauges *g)
{
    struct dynbuf b;
    dynbuf_init(&b, 256u << 20);
    assert_int_equal(tele_render_prometheus(t, g, &b), 0);
    char *s = dynbuf_take(&b, NULL);
    assert_non_null(s);
    return s;
}

/* the op series of (tenant_id, class, op, tier) in a /v1/telemetry answer, or NULL */
static json_t *find_op(json_t *j, unsigned tenant, const char *cls, const char *op,
                       const char *tier)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(j, "ops"), i, s)
    {
        if (json_integer_value(json_object_get(s, "tenant_id")) == (json_int_t)tenant &&
            strcmp(json_string_value(json_object_get(s, "class")), cls) == 0 &&
            strcmp(json_string_value(json_object_get(s, "op")), op) == 0 &&
            strcmp(json_string_value(json_object_get(s, "tier")), tier) == 0)
            return s;
    }
    return NULL;
}

static size_t buckets_of(json_t *series, struct tele_bucket **out)
{
    json_t *b = json_object_get(series, "buckets");
    assert_true(json_is_array(b));
    size_t n = json_array_size(b);
    *out = calloc(n + 1, sizeof(**out));
    assert_non_null(*out);
    uint64_t last = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(b, i);
        assert_int_equal(json_array_size(p), 2);
        (*out)[i].upper_ns = (uint64_t)json_integer_value(json_array_get(p, 0));
        (*out)[i].count = (uint64_t)json_integer_value(json_array_get(p, 1));
        assert_true((*out)[i].upper_ns > last); /* increasing, non-empty */
        assert_true((*out)[i].count > 0);
        last = (*out)[i].upper_ns;
    }
    return n;
}

/* ---- bucket scheme --------------------------------------------------------------------- */

static void test_bucket_scheme(void **state)
{
    (void)state;
    assert_int_equal(tele_hist_index(0), 0);
    assert_int_equal(tele_hist_index(511), 0);
    assert_int_equal(tele_hist_index(512), 1);
    assert_int_equal(tele_hist_index(TELE_HIST_MAX_NS - 1), TELE_HIST_NBUCKETS - 2);
    assert_int_equal(tele_hist_index(TELE_HIST_MAX_NS), TELE_HIST_NBUCKETS - 1);
    assert_int_equal(tele_hist_index(UINT64_MAX), TELE_HIST_NBUCKETS - 1);
    for (unsigned i = 1; i < TELE_HIST_NBUCKETS - 1; i++) {
        uint64_t up = tele_hist_upper_ns(i), lo = tele_hist_lower_ns(up);
        assert_int_equal(lo, tele_hist_upper_ns(i - 1)); /* contiguous */
        assert_int_equal(tele_hist_index(lo), i);
        assert_int_equal(tele_hist_index(up - 1), i);
        assert_int_equal(tele_hist_index(up), i + 1);
        /* width at most 1/32 of the lower bound: a midpoint is within 1/64 */
        assert_true((up - lo) * 32 <= lo);
    }
    assert_int_equal(tele_hist_lower_ns(512), 0);
    assert_int_equal(tele_hist_upper_ns(TELE_HIST_NBUCKETS - 1), TELE_HIST_OVERFLOW_UPPER_NS);
    assert_int_equal(tele_hist_lower_ns(TELE_HIST_OVERFLOW_UPPER_NS), TELE_HIST_MAX_NS);
}

/* ---- precision ------------------------------------------------------------------------- */

static void check_quantiles(const char *what, const struct tele_bucket *cur, size_t ncur,
                            const struct tele_bucket *prev, size_t nprev, const uint64_t *sorted,
                            size_t n)
{
    static const double qs[] = {0.5, 0.9, 0.99, 0.999};
    for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
        uint64_t got_n = 0;
        uint64_t est = tele_quantile_diff(cur, ncur, prev, nprev, qs[k], &got_n);
        uint64_t ex = exact_q(sorted, n, qs[k]);
        assert_int_equal(got_n, n);
        double rel = fabs((double)est - (double)ex) / (double)ex;
        if (rel > 0.02)
            fail_msg("%s p%g: estimate %llu ns, exact %llu ns: error %.2f %% > 2 %%", what,
                     qs[k] * 100, (unsigned long long)est, (unsigned long long)ex, rel * 100);
    }
}

static void test_quantiles_within_2pct(void **state)
{
    (void)state;
    static const char *const names[] = {"uniform", "log-uniform", "log-normal", "bimodal"};
    const size_t n = 100000;
    struct telemetry *t = NULL;
    assert_int_equal(telemetry_new(&(struct telemetry_config){.max_tenants = 8}, &t), 0);
    uint64_t *first[D_NDIST], *second[D_NDIST];
    uint64_t st = 42;
    /* batch 1 into tenant 2 + d */
    for (int d = 0; d < D_NDIST; d++) {
        first[d] = malloc(n * sizeof(uint64_t));
        assert_non_null(first[d]);
        struct tier_ioctx io = {.tenant = 2 + (uint32_t)d, .cls = TIER_IO_INFERENCE};
        for (size_t i = 0; i < n; i++) {
            first[d][i] = sample((enum dist)d, &st);
            tele_op_record(t, &io, TELE_OP_READ, TELE_TIER_BACKEND, first[d][i], 4096, 0);
        }
        qsort(first[d], n, sizeof(uint64_t), cmp_u64);
    }
    json_t *snap1 = render_json(t, NULL);
    /* batch 2: another distribution into the same series, to check the diff of snapshots */
    for (int d = 0; d < D_NDIST; d++) {
        second[d] = malloc(n * sizeof(uint64_t));
        assert_non_null(second[d]);
        struct tier_ioctx io = {.tenant = 2 + (uint32_t)d, .cls = TIER_IO_INFERENCE};
        for (size_t i = 0; i < n; i++) {
            second[d][i] = sample((enum dist)((d + 1) % D_NDIST), &st);
            tele_op_record(t, &io, TELE_OP_READ, TELE_TIER_BACKEND, second[d][i], 4096, 0);
        }
        qsort(second[d], n, sizeof(uint64_t), cmp_u64);
    }
    json_t *snap2 = render_json(t, NULL);
    for (int d = 0; d < D_NDIST; d++) {
        json_t *s1 = find_op(snap1, 2 + (unsigned)d, "inference", "read", "backend");
        json_t *s2 = find_op(snap2, 2 + (unsigned)d, "inference", "read", "backend");
        assert_non_null(s1);
        assert_non_null(s2);
        assert_int_equal(json_integer_value(json_object_get(s1, "ops")), n);
        assert_int_equal(json_integer_value(json_object_get(s2, "ops")), 2 * n);
        assert_int_equal(json_integer_value(json_object_get(s2, "bytes")), 2 * n * 4096);
        assert_int_equal(json_integer_value(json_object_get(s1, "min_ns")), first[d][0]);
        assert_int_equal(json_integer_value(json_object_get(s1, "max_ns")), first[d][n - 1]);
        struct tele_bucket *b1, *b2;
        size_t n1 = buckets_of(s1, &b1), n2 = buckets_of(s2, &b2);
        char what[64];
        snprintf(what, sizeof(what), "%s (one snapshot)", names[d]);
        check_quantiles(what, b1, n1, NULL, 0, first[d], n);
        snprintf(what, sizeof(what), "%s (diff of two snapshots)", names[(d + 1) % D_NDIST]);
        check_quantiles(what, b2, n2, b1, n1, second[d], n);
        free(b1);
        free(b2);
        free(first[d]);
        free(second[d]);
    }
    json_decref(snap1);
    json_decref(snap2);
    telemetry_free(t);
}

static void test_quantile_edges(void **state)
{
    (void)state;
    uint64_t n = 99;
    assert_int_equal(tele_quantile_diff(NULL, 0, NULL, 0, 0.5, &n), 0);
    assert_int_equal(n, 0);
    struct tele_bucket cur[] = {{512, 3}, {1056, 2}, {TELE_HIST_OVERFLOW_UPPER_NS, 5}};
    struct tele_bucket prev[] = {{512, 3}, {1056, 1}, {4000, 7}};
    /* diff: 0, 1, 5 (prev's 4000 bucket missing in cur is ignored) */
    assert_int_equal(tele_quantile_diff(cur, 3, prev, 3, 0.1, &n), 1040); /* midpoint */
    assert_int_equal(n, 6);
    assert_int_equal(tele_quantile_diff(cur, 3, prev, 3, 0.99, NULL), TELE_HIST_MAX_NS);
    assert_int_equal(tele_quantile_diff(cur, 3, NULL, 0, 0.0, NULL), 512); /* underflow */
    /* a restart: prev larger than cur counts as 0 */
    struct tele_bucket big[] = {{512, 100}, {1056, 100}, {TELE_HIST_OVERFLOW_UPPER_NS, 100}};
    assert_int_equal(tele_quantile_diff(cur, 3, big, 3, 0.5, &n), 0);
    assert_int_equal(n, 0);
}

/* ---- tenants --------------------------------------------------------------------------- */

static const char *names_cb(void *ud, uint32_t id)
{
    (void)ud;
    static const char *const n[] = {"default", "other", "alice", "b\"o\\b\nx\xff"};
    return id < 4 ? n[id] : NULL;
}

static void test_fold_beyond_max_tenants(void **state)
{
    (void)state;
    struct telemetry *t = NULL;
    assert_int_equal(telemetry_new(&(struct telemetry_config){.max_tenants = 1}, &t), -EINVAL);
    assert_int_equal(telemetry_new(&(struct telemetry_config){.max_tenants = 4}, &t), 0);
    for (uint32_t id = 0; id < 10; id++) {
        struct tier_ioctx io = {.tenant = id, .cls = TIER_IO_TRAINING};
        tele_op_record(t, &io, TELE_OP_WRITE, TELE_TIER_DISK, 5000, 100 + id, 0);
    }
    tele_op_record(t, &(struct tier_ioctx){.tenant = 1000000, .cls = (enum tier_io_class)77},
                   TELE_OP_WRITE, TELE_TIER_DISK, 5000, 1, -EIO);
    tele_op_record(t, NULL, TELE_OP_READ, TELE_TIER_RAM, 1, 1, 0);            /* default io */
    tele_op_record(t, NULL, (enum tele_op)TELE_NOPS, TELE_TIER_RAM, 1, 1, 0); /* dropped */
    tele_op_record(NULL, NULL, TELE_OP_READ, TELE_TIER_RAM, 1, 1, 0);         /* no-op */
    json_t *j = render_json(t, NULL);
    assert_int_equal(json_array_size(json_object_get(j, "ops")), 6);
    for (unsigned id = 0; id < 4; id++) {
        json_t *s = find_op(j, id, "training", "write", "disk");
        assert_non_null(s);
        /* ids 4..9 fold into 1 (other): 7 values there, bytes 101 + 104 + ... + 109 */
        assert_int_equal(json_integer_value(json_object_get(s, "ops")), id == 1 ? 7 : 1);
        assert_int_equal(json_integer_value(json_object_get(s, "bytes")),
                         id == 1 ? 101 + (104 + 109) * 6 / 2 : 100 + id);
        char want[16]; /* no name callback: the id in decimal */
        snprintf(want, sizeof(want), "%u", id);
        assert_string_equal(json_string_value(json_object_get(s, "tenant")), want);
    }
    json_t *bg = find_op(j, 1, "background", "write", "disk");
    assert_non_null(bg);
    assert_int_equal(json_integer_value(json_object_get(bg, "errors")), 1);
    assert_non_null(find_op(j, 0, "training", "read", "ram"));
    json_decref(j);
    telemetry_free(t);
    /* at the registry's id limit (max_tenants 65536 and the retired id): the top id its own */
    assert_int_equal(
        telemetry_new(&(struct telemetry_config){.max_tenants = TIER_TENANT_IDS_MAX + 1}, &t),
        -EINVAL);
    assert_int_equal(
        telemetry_new(&(struct telemetry_config){.max_tenants = TIER_TENANT_IDS_MAX}, &t), 0);
    tele_op_record(t,
                   &(struct tier_ioctx){.tenant = TIER_TENANT_IDS_MAX - 1, .cls = TIER_IO_TRAINING},
                   TELE_OP_READ, TELE_TIER_RAM, 1, 7, 0);
    j = render_json(t, NULL);
    assert_non_null(find_op(j, TIER_TENANT_IDS_MAX - 1, "training", "read", "ram"));
    assert_null(find_op(j, 1, "training", "read", "ram"));
    json_decref(j);
    telemetry_free(t);
}

/* sum of "ops", "bytes" and "errors" over every op series of a /v1/telemetry answer, and of the
 * sched series' ops and bytes */
static void totals(json_t *j, uint64_t *ops, uint64_t *bytes, uint64_t *errors, uint64_t *sched)
{
    size_t i;
    json_t *s;
    *ops = *bytes = *errors = *sched = 0;
    json_array_foreach(json_object_get(j, "ops"), i, s)
    {
        *ops += (uint64_t)json_integer_value(json_object_get(s, "ops"));
        *bytes += (uint64_t)json_integer_value(json_object_get(s, "bytes"));
        *errors += (uint64_t)json_integer_value(json_object_get(s, "errors"));
    }
    json_array_foreach(json_object_get(j, "sched"), i, s) *sched +=
        (uint64_t)json_integer_value(json_object_get(s, "ops")) +
        (uint64_t)json_integer_value(json_object_get(s, "bytes"));
}

/* A reclaimed tenant's counts move to "retired" (id 2): every total is unchanged, the old id's
 * series disappear from both renderings, and the id's next tenant starts from zero. */
static void test_tenant_fold(void **state)
{
    (void)state;
    struct telemetry *t = NULL;
    assert_int_equal(telemetry_new(&(struct telemetry_config){.max_tenants = 8}, &t), 0);
    for (uint32_t id = 0; id < 6; id++) {
        struct tier_ioctx io = {.tenant = id, .cls = TIER_IO_TRAINING};
        tele_op_record(t, &io, TELE_OP_READ, TELE_TIER_RAM, 1000 * (id + 1), 10 + id, 0);
        tele_op_record(t, &io, TELE_OP_WRITE, TELE_TIER_DISK, 70000, 5, id == 4 ? -EIO : 0);
        tele_sched_record(t, &io, 100, 2000, 4096, 0);
    }
    tele_op_record(t, &(struct tier_ioctx){.tenant = 2, .cls = TIER_IO_TRAINING}, TELE_OP_READ,
                   TELE_TIER_RAM, 9000000, 1, 0); /* retired's own max */
    json_t *j = render_json(t, NULL);
    uint64_t ops0, bytes0, err0, sched0;
    totals(j, &ops0, &bytes0, &err0, &sched0);
    json_decref(j);
    assert_int_equal(tele_tenant_fold(t, 4, 2), 0);
    assert_int_equal(tele_tenant_fold(t, 5, 2), 0);
    assert_int_equal(tele_tenant_fold(t, 5, 5), -EINVAL);
    assert_int_equal(tele_tenant_fold(t, 8, 2), -EINVAL);
    j = render_json(t, NULL);
    uint64_t ops1, bytes1, err1, sched1;
    totals(j, &ops1, &bytes1, &err1, &sched1);
    assert_int_equal(ops1, ops0);
    assert_int_equal(bytes1, bytes0);
    assert_int_equal(err1, err0);
    assert_int_equal(sched1, sched0);
    assert_null(find_op(j, 4, "training", "read", "ram"));
    assert_null(find_op(j, 5, "training", "write", "disk"));
    json_t *r = find_op(j, 2, "training", "read", "ram");
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "ops")), 4);
    assert_int_equal(json_integer_value(json_object_get(r, "bytes")), 12 + 1 + 14 + 15);
    assert_int_equal(json_integer_value(json_object_get(r, "min_ns")), 3000);
    assert_int_equal(json_integer_value(json_object_get(r, "max_ns")), 9000000);
    r = find_op(j, 2, "training", "write", "disk");
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "errors")), 1);
    json_decref(j);
    char *text = render_prom(t, NULL);
    assert_null(strstr(text, "tenant=\"4\""));
    assert_null(strstr(text, "tenant=\"5\""));
    assert_non_null(strstr(text, "tenant=\"2\""));
    free(text);
    /* the id's next tenant counts from zero */
    tele_op_record(t, &(struct tier_ioctx){.tenant = 4, .cls = TIER_IO_TRAINING}, TELE_OP_READ,
                   TELE_TIER_RAM, 2000, 7, 0);
    j = render_json(t, NULL);
    r = find_op(j, 4, "training", "read", "ram");
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "ops")), 1);
    assert_int_equal(json_integer_value(json_object_get(r, "bytes")), 7);
    assert_int_equal(json_integer_value(json_object_get(r, "min_ns")), 2000);
    assert_null(find_op(j, 4, "training", "write", "disk"));
    json_decref(j);
    telemetry_free(t);
}

/* ---- escaping -------------------------------------------------------------------------- */

static void expect_escape(const char *in, size_t len, const char *want)
{
    struct dynbuf b;
    dynbuf_init(&b, 4096);
    assert_int_equal(tele_prom_escape(&b, in, len), 0);
    if (strcmp(b.data ? b.data : "", want) != 0)
        fail_msg("escape of '%s': got '%s', want '%s'", in, b.data, want);
    dynbuf_fini(&b);
}

static void test_label_escaping(void **state)
{
    (void)state;
    expect_escape("", 0, "");
    expect_escape("plain-tenant_1", 14, "plain-tenant_1");
    expect_escape("a\"b", 3, "a\\\"b");
    expect_escape("back\\slash", 10, "back\\\\slash");
    expect_escape("two\nlines", 9, "two\\nlines");
    expect_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
                  "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");               /* valid UTF-8 kept */
    expect_escape("caf\xe9", 4, "caf\xef\xbf\xbd");                           /* Latin-1 */
    expect_escape("\xc0\x80", 2, "\xef\xbf\xbd\xef\xbf\xbd");                 /* overlong NUL */
    expect_escape("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* surrogate */
    expect_escape("end\xe2\x82", 5, "end\xef\xbf\xbd\xef\xbf\xbd");           /* cut */
    expect_escape("\"\\\n\xff", 4, "\\\"\\\\\\n\xef\xbf\xbd");
}

/* ---- Prometheus text structure ----------------------------------------------------------- */

struct family {
    char name[128];
    char type[256];
    bool help;
};

/* Parse one label set "{a="x",b="y\"z"}" at *p; fills le when present. Fails the test on a
 * syntax error. */
static void parse_labels(const char **p, char *le, size_t lesz, char *rest, size_t restsz)
{
    const char *s = *p;
    size_t rl = 0;
    le[0] = 0;
    assert_int_equal(*s, '{');
    s++;
    while (*s != '}') {
        const char *n0 = s;
        while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_' ||
               (s > n0 && *s >= '0' && *s <= '9'))
            s++;
        assert_true(s > n0);
        size_t nl = (size_t)(s - n0);
        assert_int_equal(*s++, '=');
        assert_int_equal(*s++, '"');
        char val[512];
        size_t vl = 0;
        while (*s != '"') {
            assert_true(*s != '\n' && *s != 0);
            if (*s == '\\') {
                s++;
                assert_true(*s == '\\' || *s == '"' || *s == 'n');
            }
            assert_true(vl < sizeof(val) - 1);
            val[vl++] = *s++;
        }
        val[vl] = 0;
        s++;
        if (nl == 2 && strncmp(n0, "le", 2) == 0) {
            size_t n = vl < lesz - 1 ? vl : lesz - 1;
            memcpy(le, val, n);
            le[n] = '\0';
        } else {
            int w = snprintf(rest + rl, restsz - rl, "%.*s=%s;", (int)nl, n0, val);
            rl += (size_t)w;
        }
        if (*s == ',')
            s++;
        else
            assert_int_equal(*s, '}');
    }
    rest[rl] = 0;
    *p = s + 1;
}

/* A structural check of the exposition (what promtool's parser requires of it): every line a
 * comment or a sample; # HELP and # TYPE once per family and before its samples; samples of a
 * family together; histogram buckets cumulative, ending in +Inf equal to _count. Returns the
 * number of samples. */
static size_t check_exposition(const char *text)
{
    struct family fam[64];
    size_t nfam = 0, nsamples = 0;
    struct family *cur = NULL;
    char series[1200] = "";
    double last_bucket = -1;
    bool saw_inf = false;
    double inf_count = -1;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl); /* every line ends in \n */
        char buf[2048];
        size_t len = (size_t)(nl - line);
        assert_true(len < sizeof(buf));
        memcpy(buf, line, len);
        buf[len] = 0;
        line = nl + 1;
        if (strncmp(buf, "# HELP ", 7) == 0 || strncmp(buf, "# TYPE ", 7) == 0) {
            char name[128], arg[256] = "";
            assert_true(sscanf(buf + 7, "%127s %255[^\n]", name, arg) >= 1);
            struct family *f = NULL;
            for (size_t i = 0; i < nfam; i++)
                if (strcmp(fam[i].name, name) == 0)
                    f = &fam[i];
            if (!f) {
                assert_true(nfam < 64);
                f = &fam[nfam++];
                memset(f, 0, sizeof(*f));
                snprintf(f->name, sizeof(f->name), "%s", name);
            } else if (f != cur) {
                fail_msg("family %s declared again after other families", name);
            }
            if (buf[2] == 'H') {
                assert_false(f->help);
                f->help = true;
            } else {
                assert_int_equal(f->type[0], 0); /* TYPE once */
                assert_true(strcmp(arg, "counter") == 0 || strcmp(arg, "gauge") == 0 ||
                            strcmp(arg, "histogram") == 0);
                snprintf(f->type, sizeof(f->type), "%s", arg);
            }
            cur = f;
            continue;
        }
        assert_true(buf[0] != '#' && buf[0] != 0);
        /* a sample: name{labels} value */
        const char *p = buf;
        char name[160];
        size_t n = 0;
        while (*p && *p != '{' && *p != ' ')
            name[n++] = *p++;
        name[n] = 0;
        assert_non_null(cur);
        assert_true(cur->type[0] != 0);
        char le[64] = "", labels[1024] = "";
        if (*p == '{')
            parse_labels(&p, le, sizeof(le), labels, sizeof(labels));
        assert_int_equal(*p++, ' ');
        char *end;
        double v = strtod(p, &end);
        assert_true(end != p && *end == 0);
        assert_true(v >= 0);
        size_t fl = strlen(cur->name);
        char key[1200]; /* the series: family and labels other than le */
        snprintf(key, sizeof(key), "%s|%s", cur->name, labels);
        if (strcmp(cur->type, "histogram") == 0) {
            assert_true(strncmp(name, cur->name, fl) == 0);
            const char *suf = name + fl;
            if (strcmp(suf, "_bucket") == 0) {
                assert_true(le[0] != 0);
                if (strcmp(series, key) != 0) { /* a new series starts with its buckets */
                    snprintf(series, sizeof(series), "%s", key);
                    last_bucket = -1;
                    saw_inf = false;
                }
                assert_false(saw_inf);
                assert_true(v >= last_bucket); /* cumulative */
                last_bucket = v;
                if (strcmp(le, "+Inf") == 0) {
                    saw_inf = true;
                    inf_count = v;
                }
            } else if (strcmp(suf, "_count") == 0) {
                assert_string_equal(key, series);
                assert_true(saw_inf);
                assert_true(v == inf_count);
            } else {
                assert_string_equal(suf, "_sum");
                assert_string_equal(key, series);
            }
        } else {
            assert_string_equal(name, cur->name);
        }
        nsamples++;
    }
    for (size_t i = 0; i < nfam; i++)
        assert_true(fam[i].help && fam[i].type[0]);
    return nsamples;
}

static void test_prometheus_text(void **state)
{
    (void)state;
    struct telemetry *t = NULL;
    assert_int_equal(
        telemetry_new(&(struct telemetry_config){.max_tenants = 8, .tenant_name = names_cb}, &t),
        0);
    struct tier_ioctx alice = {.tenant = 2, .cls = TIER_IO_INFERENCE};
    struct tier_ioctx odd = {.tenant = 3, .cls = TIER_IO_CHECKPOINT};
    tele_op_record(t, &alice, TELE_OP_READ, TELE_TIER_RAM, 1500, 4096, 0);
    tele_op_record(t, &alice, TELE_OP_READ, TELE_TIER_RAM, 3 * MS, 4096, 0);
    tele_op_record(t, &alice, TELE_OP_READ, TELE_TIER_BACKEND, 90ULL * 1000 * MS, 4096, -EIO);
    tele_op_record(t, &odd, TELE_OP_WRITE, TELE_TIER_DISK, 100, 1 << 20, 0);
    tele_sched_record(t, &alice, 20 * US, 5 * MS, 4096, 0);
    struct tele_gauges g = {.ram_used_bytes = 10,
                            .ram_capacity_bytes = 100,
                            .writeback = true,
                            .wb_failed_files = 2,
                            .nbackends = 2};
    g.backends[0].name = "s3";
    g.backends[0].breaker = 1;
    g.backends[1].name = "po\"six";
    char *text = render_prom(t, &g);
    size_t n = check_exposition(text);
    assert_true(n > 100);
    /* the values, exactly */
    assert_non_null(strstr(text,
                           "tierd_op_latency_seconds_bucket{tenant=\"alice\",class=\"inference"
                           "\",op=\"read\",tier=\"ram\",le=\"1.024e-06\"} 0\n"));
    assert_non_null(strstr(text,
                           "tierd_op_latency_seconds_bucket{tenant=\"alice\",class=\"inference"
                           "\",op=\"read\",tier=\"ram\",le=\"2.048e-06\"} 1\n"));
    assert_non_null(strstr(text,
                           "tierd_op_latency_seconds_bucket{tenant=\"alice\",class=\"inference"
                           "\",op=\"read\",tier=\"ram\",le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(text,
                           "tierd_op_latency_seconds_sum{tenant=\"alice\",class=\"inference\","
                           "op=\"read\",tier=\"ram\"} 0.003001500\n"));
    /* 90 s is beyond the top bound: only in +Inf */
    assert_non_null(strstr(text,
                           "tierd_op_latency_seconds_bucket{tenant=\"alice\",class=\"inference"
                           "\",op=\"read\",tier=\"backend\",le=\"68.719476736\"} 0\n"));
    assert_non_null(strstr(text, "tierd_op_errors_total{tenant=\"alice\",class=\"inference\",op="
                                 "\"read\",tier=\"backend\"} 1\n"));
    /* the escaped tenant name: quote, backslash, newline, invalid byte */
    assert_non_null(strstr(text, "tierd_op_bytes_total{tenant=\"b\\\"o\\\\b\\nx\xef\xbf\xbd\","
                                 "class=\"checkpoint\",op=\"write\",tier=\"disk\"} 1048576\n"));
    assert_non_null(strstr(text, "tierd_sched_queue_wait_seconds_count{tenant=\"alice\",class="
                                 "\"inference\"} 1\n"));
    assert_non_null(strstr(text, "tierd_backend_breaker_open{backend=\"s3\"} 1\n"));
    assert_non_null(strstr(text, "tierd_backend_breaker_open{backend=\"po\\\"six\"} 0\n"));
    assert_non_null(strstr(text, "tierd_health_ok 0\n"));
    assert_non_null(strstr(text, "tierd_health_degraded_reasons 2\n"));
    assert_non_null(strstr(text, "tierd_health_reason{reason=\"writeback_failed_files\"} 1\n"));
    assert_non_null(strstr(text, "tierd_health_reason{reason=\"writeback_backlog_age\"} 0\n"));
    /* empty series are absent */
    assert_null(strstr(text, "op=\"lookup\""));
    assert_null(strstr(text, "tenant=\"default\""));
    free(text);
    /* an empty telemetry still renders a valid exposition */
    struct telemetry *e = NULL;
    assert_int_equal(telemetry_new(NULL, &e), 0);
    text = render_prom(e, NULL);
    check_exposition(text);
    assert_non_null(strstr(text, "tierd_health_ok 1\n"));
    free(text);
    /* and the JSON of both parses (jansson refuses invalid UTF-8) */
    json_t *j = render_json(t, &g);
    json_t *h = json_object_get(j, "health");
    assert_string_equal(json_string_value(json_object_get(h, "status")), "degraded");
    assert_int_equal(json_array_size(json_object_get(h, "reasons")), 2);
    json_t *s = find_op(j, 3, "checkpoint", "write", "disk");
    assert_non_null(s);
    assert_string_equal(json_string_value(json_object_get(s, "tenant")), "b\"o\\b\nx\xef\xbf\xbd");
    json_decref(j);
    j = render_json(e, NULL);
    assert_int_equal(json_array_size(json_object_get(j, "ops")), 0);
    json_decref(j);
    telemetry_free(e);
    telemetry_free(t);
}

/* ---- health ----------------------------------------------------------------------------- */

static void test_health_rules(void **state)
{
    (void)state;
    struct tele_health h;
    struct tele_gauges g = {.nbackends = 3};
    g.backends[0].name = "a";
    g.backends[1].name = "b";
    g.backends[1].breaker = 2; /* half-open: a probe is out, not a reason */
    g.backends[2].name = "c";
    tele_health_eval(&g, &h);
    assert_int_equal(h.nreasons, 0);
    g.backends[2].breaker = 1;
    tele_health_eval(&g, &h);
    assert_int_equal(h.nreasons, 1);
    assert_true(h.kind[TELE_HEALTH_BREAKER_OPEN]);
    assert_non_null(strstr(h.reasons[0], "'c'"));
    g.backends[2].breaker = 0;
    /* backlog age: only beyond the limit, only with a burst buffer */
    g.wb_oldest_backlog_age_s = 301;
    g.wb_backlog_age_limit_s = 300;
    tele_health_eval(&g, &h);
    assert_int_equal(h.nreasons, 0);
    g.writeback = true;
    tele_health_eval(&g, &h);
    assert_int_equal(h.nreasons, 1);
    assert_true(h.kind[TELE_HEALTH_BACKLOG_AGE]);
    g.wb_oldest_backlog_age_s = 299;
    g.wb_failed_files = 1;
    tele_health_eval(&g, &h);
    assert_int_equal(h.nreasons, 1);
    assert_true(h.kind[TELE_HEALTH_FAILED_FILES]);
    assert_false(h.kind[TELE_HEALTH_BACKLOG_AGE]);
    tele_health_eval(NULL, &h);
    assert_int_equal(h.nreasons, 0);
}

/* ---- concurrency ------------------------------------------------------------------------- */

#define NTHREADS 4
#define PER_THREAD 200000

struct worker {
    struct telemetry *t;
    unsigned id;
    pthread_barrier_t *go;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t st = 1000 + w->id;
    pthread_barrier_wait(w->go);
    for (unsigned i = 0; i < PER_THREAD; i++) {
        /* every thread walks the same 8 tenants x 2 ops x 3 tiers, so series are created by
         * racing threads and then shared */
        struct tier_ioctx io = {.tenant = i % 8, .cls = TIER_IO_TRAINING};
        uint64_t lat = 1000 + (tu_rand_next(&st) % 10000000);
        tele_op_record(w->t, &io, (enum tele_op)(i % 2), (enum tele_tier)(i % 3), lat, 7,
                       i % 5 == 0 ? -EIO : 0);
        if (i % 4 == 0)
            tele_sched_record(w->t, &io, lat / 2, lat, 3, 0);
    }
    return NULL;
}

static void test_concurrent_counts_exact(void **state)
{
    (void)state;
    struct telemetry *t = NULL;
    assert_int_equal(telemetry_new(&(struct telemetry_config){.max_tenants = 8}, &t), 0);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, NTHREADS + 1);
    pthread_t th[NTHREADS];
    struct worker w[NTHREADS];
    for (unsigned i = 0; i < NTHREADS; i++) {
        w[i] = (struct worker){t, i, &go};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    pthread_barrier_wait(&go);
    /* render while they record: must not crash or produce invalid text */
    for (int r = 0; r < 3; r++) {
        char *text = render_prom(t, NULL);
        check_exposition(text);
        free(text);
    }
    for (unsigned i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    json_t *j = render_json(t, NULL);
    uint64_t ops = 0, bytes = 0, errors = 0, sched_ops = 0, sched_bytes = 0;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(j, "ops"), i, s)
    {
        uint64_t n = (uint64_t)json_integer_value(json_object_get(s, "ops")), sum = 0;
        struct tele_bucket *b;
        size_t nb = buckets_of(s, &b);
        for (size_t k = 0; k < nb; k++)
            sum += b[k].count;
        free(b);
        assert_int_equal(sum, n);
        ops += n;
        bytes += (uint64_t)json_integer_value(json_object_get(s, "bytes"));
        errors += (uint64_t)json_integer_value(json_object_get(s, "errors"));
    }
    json_array_foreach(json_object_get(j, "sched"), i, s)
    {
        sched_ops += (uint64_t)json_integer_value(json_object_get(s, "ops"));
        sched_bytes += (uint64_t)json_integer_value(json_object_get(s, "bytes"));
    }
    /* 8 tenants x (i%2, i%3) = 8 x 6 combinations appear (i%8 and i%6 cycle together: lcm 24) */
    assert_int_equal(json_array_size(json_object_get(j, "ops")), 8 * 3);
    assert_int_equal(ops, (uint64_t)NTHREADS * PER_THREAD);
    assert_int_equal(bytes, 7ULL * NTHREADS * PER_THREAD);
    assert_int_equal(errors, (uint64_t)NTHREADS * (PER_THREAD / 5));
    assert_int_equal(sched_ops, (uint64_t)NTHREADS * (PER_THREAD / 4));
    assert_int_equal(sched_bytes, 3ULL * NTHREADS * (PER_THREAD / 4));
    json_decref(j);
    telemetry_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_scheme),
        cmocka_unit_test(test_quantiles_within_2pct),
        cmocka_unit_test(test_quantile_edges),
        cmocka_unit_test(test_fold_beyond_max_tenants),
        cmocka_unit_test(test_tenant_fold),
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_prometheus_text),
        cmocka_unit_test(test_health_rules),
        cmocka_unit_test(test_concurrent_counts_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
