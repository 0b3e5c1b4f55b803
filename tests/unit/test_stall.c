/* SPDX-License-Identifier: Apache-2.0 */
/* test_stall.c - unit tests for the data-stall store (src/telemetry/stall.c): exact cumulative
 * counts, the decayed recent ratio, the bound on names per tenant, aging of silent reporters,
 * validation of reports, folding a reclaimed tenant, ids beyond max_tenants, and the store's
 * series in the telemetry's Prometheus text and JSON, and exact counts from several threads
 * (labelled tsan). Time is the test's (now_ns arguments). */
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
#include "common/err.h"
#include "common/timeutil.h"
#include "telemetry/stall.h"
#include "telemetry/telemetry.h"

#define S 1000000000ULL
#define T0 (1000 * S) /* a monotonic clock well past 0 */

static struct stall *mk(unsigned names, uint64_t tau_ns, uint64_t idle_ns)
{
    struct stall *s = NULL;
    struct stall_config c = {
        .max_tenants = 8, .names_per_tenant = names, .tau_ns = tau_ns, .idle_ns = idle_ns};
    assert_int_equal(stall_new(&c, &s), 0);
    return s;
}

/* The stats of tenant id (fails when it has none). */
static struct stall_tenant_stats one(struct stall *s, uint32_t id, uint64_t now)
{
    struct stall_tenant_stats v[8];
    size_t n = stall_list(s, now, v, 8);
    for (size_t i = 0; i < n; i++)
        if (v[i].tenant == id)
            return v[i];
    fail_msg("tenant %u has no stall entry", (unsigned)id);
    return v[0];
}

static void test_accumulates_exactly(void **state)
{
    (void)state;
    struct stall *s = mk(0, 0, 0);
    assert_int_equal(stall_list(s, T0, NULL, 0), 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(stall_report(s, 3, "job7-0", 0.001, 0.004, 2, T0 + (uint64_t)i * S), 0);
    assert_int_equal(stall_report(s, 3, "job7-1", 1.5, 0.5, 7, T0 + 1000 * S), 0);
    struct stall_tenant_stats t = one(s, 3, T0 + 1000 * S);
    assert_int_equal(t.wait_ns, 1000 * 1000000ULL + 1500000000ULL);
    uint64_t w = 1, c = 1; /* the advice loop's view: the same totals */
    assert_int_equal(stall_totals(s, 3, &w, &c), 0);
    assert_int_equal(w, t.wait_ns);
    assert_int_equal(c, t.compute_ns);
    assert_int_equal(stall_totals(s, 4, &w, &c), -ENOENT);
    assert_true(w == 0 && c == 0);
    assert_int_equal(stall_totals(s, 99, &w, &c), -ENOENT);
    assert_int_equal(t.compute_ns, 1000 * 4000000ULL + 500000000ULL);
    assert_int_equal(t.steps, 2007);
    assert_int_equal(t.reports, 1001);
    assert_int_equal(t.reporters, 2);
    assert_int_equal(t.dropped, 0);
    struct stall_reporter_stats r[4];
    assert_int_equal(stall_reporters(s, 3, T0 + 1000 * S, r, 4), 2);
    assert_string_equal(r[0].name, "job7-1"); /* most recently heard first */
    assert_int_equal(r[0].steps, 7);
    assert_int_equal(r[1].steps, 2000);
    assert_int_equal(r[1].wait_ns, 1000000000ULL);
    assert_true(fabs(r[1].idle_s - 1.0) < 1e-9);
    assert_int_equal(stall_reporters(s, 4, T0, r, 4), 0); /* never reported */
    stall_free(s);
}

/* A report's weight decays as exp(-age / tau); the ratio is over the decayed sums. */
static void test_decay(void **state)
{
    (void)state;
    uint64_t tau = 60 * S;
    struct stall *s = mk(0, tau, 3600 * S);
    assert_int_equal(stall_report(s, 2, "a", 10.0, 0.0, 1, T0), 0);
    assert_true(fabs(one(s, 2, T0).ratio - 1.0) < 1e-12);
    /* the same ratio at any later time: both sums decay alike */
    assert_true(fabs(one(s, 2, T0 + 30 * S).ratio - 1.0) < 1e-12);
    assert_int_equal(stall_report(s, 2, "a", 0.0, 10.0, 1, T0 + tau), 0);
    double want = 10.0 * exp(-1.0) / (10.0 * exp(-1.0) + 10.0);
    assert_true(fabs(one(s, 2, T0 + tau).ratio - want) < 1e-9);
    /* a second reporter: its sums add to the first's, each decayed from its own last report */
    assert_int_equal(stall_report(s, 2, "b", 5.0, 5.0, 1, T0 + 2 * tau), 0);
    double wa = 10.0 * exp(-2.0), ca = 10.0 * exp(-1.0);
    want = (wa + 5.0) / (wa + ca + 10.0);
    assert_true(fabs(one(s, 2, T0 + 2 * tau).ratio - want) < 1e-9);
    /* old stalls fade: a loop that stalled hard and then computes for minutes reads low */
    for (int i = 1; i <= 60; i++)
        assert_int_equal(stall_report(s, 2, "b", 0.0, 5.0, 1, T0 + 2 * tau + (uint64_t)i * 5 * S),
                         0);
    assert_true(one(s, 2, T0 + 2 * tau + 300 * S).ratio < 0.02);
    /* the cumulative counters never decay */
    assert_int_equal(one(s, 2, T0 + 2 * tau + 300 * S).wait_ns, 15 * S);
    stall_free(s);
}

/* At most names_per_tenant reporters; a new name replaces the least recently heard one, and
 * the counts stay in the tenant's totals. Another tenant is not affected. */
static void test_names_bounded(void **state)
{
    (void)state;
    struct stall *s = mk(2, 0, 0);
    assert_int_equal(stall_report(s, 5, "r0", 1.0, 1.0, 1, T0), 0);
    assert_int_equal(stall_report(s, 5, "r1", 1.0, 1.0, 1, T0 + S), 0);
    assert_int_equal(stall_report(s, 6, "x", 1.0, 1.0, 1, T0), 0);
    assert_int_equal(stall_report(s, 5, "r0", 1.0, 1.0, 1, T0 + 2 * S), 0); /* r1 now oldest */
    assert_int_equal(stall_report(s, 5, "r2", 1.0, 1.0, 1, T0 + 3 * S), 0);
    struct stall_tenant_stats t = one(s, 5, T0 + 3 * S);
    assert_int_equal(t.reporters, 2);
    assert_int_equal(t.dropped, 1);
    assert_int_equal(t.steps, 4);
    assert_int_equal(t.wait_ns, 4 * S);
    struct stall_reporter_stats r[4];
    assert_int_equal(stall_reporters(s, 5, T0 + 3 * S, r, 4), 2);
    assert_string_equal(r[0].name, "r2");
    assert_string_equal(r[1].name, "r0");
    assert_int_equal(one(s, 6, T0 + 3 * S).reporters, 1);
    assert_int_equal(one(s, 6, T0 + 3 * S).dropped, 0);
    /* a config above the slot's size is refused */
    struct stall *bad = NULL;
    struct stall_config c = {.max_tenants = 8, .names_per_tenant = STALL_NAMES_PER_TENANT + 1};
    assert_int_equal(stall_new(&c, &bad), -EINVAL);
    assert_null(bad);
    c = (struct stall_config){.max_tenants = 1};
    assert_int_equal(stall_new(&c, &bad), -EINVAL);
    stall_free(s);
}

/* A reporter silent for idle_ns ages out; the tenant keeps its totals, its ratio becomes none. */
static void test_aging(void **state)
{
    (void)state;
    uint64_t idle = 300 * S;
    struct stall *s = mk(0, 60 * S, idle);
    assert_int_equal(stall_report(s, 2, "old", 3.0, 1.0, 4, T0), 0);
    assert_int_equal(stall_report(s, 2, "new", 1.0, 3.0, 4, T0 + 200 * S), 0);
    struct stall_tenant_stats t = one(s, 2, T0 + idle); /* "old" exactly idle long: kept */
    assert_int_equal(t.reporters, 2);
    t = one(s, 2, T0 + idle + 1);
    assert_int_equal(t.reporters, 1);
    assert_true(fabs(t.ratio - 0.25) < 1e-9); /* "new"'s alone */
    assert_int_equal(t.wait_ns, 4 * S);
    t = one(s, 2, T0 + 200 * S + idle + 1);
    assert_int_equal(t.reporters, 0);
    assert_true(t.ratio < 0);
    assert_int_equal(t.steps, 8);
    /* an aged name that reports again starts afresh */
    assert_int_equal(stall_report(s, 2, "old", 0.0, 1.0, 1, T0 + 1000 * S), 0);
    t = one(s, 2, T0 + 1000 * S);
    assert_int_equal(t.reporters, 1);
    assert_true(fabs(t.ratio) < 1e-12);
    struct stall_reporter_stats r[2];
    assert_int_equal(stall_reporters(s, 2, T0 + 1000 * S, r, 2), 1);
    assert_int_equal(r[0].steps, 1);
    stall_free(s);
}

static void test_validation(void **state)
{
    (void)state;
    struct stall *s = mk(0, 0, 0);
    static const struct {
        const char *name;
        double w, c, steps;
        const char *msg;
    } bad[] = {
        {"j", -1.0, 0, 1, "wait_s -1 is out of range"},
        {"j", 0, -0.5, 1, "compute_s -0.5 is out of range"},
        {"j", NAN, 0, 1, "wait_s nan"},
        {"j", 0, INFINITY, 1, "compute_s inf"},
        {"j", 86401.0, 0, 1, "0 .. 86400"},
        {"j", 0, 0, -1, "steps -1"},
        {"j", 0, 0, 1.5, "whole number"},
        {"j", 0, 0, 2e9, "steps 2e+09"},
        {"", 1, 1, 1, "progress name ''"},
        {"a b", 1, 1, 1, "progress name 'a b'"},
        {"x/../y", 1, 1, 1, "is not allowed"},
        {NULL, 1, 1, 1, "is not allowed"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tier_err_clear();
        assert_int_equal(stall_report_check(bad[i].name, bad[i].w, bad[i].c, bad[i].steps),
                         -EINVAL);
        if (!strstr(tier_err_msg(), bad[i].msg))
            fail_msg("case %zu: message '%s' lacks '%s'", i, tier_err_msg(), bad[i].msg);
    }
    char longname[STALL_NAME_MAX + 1];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[STALL_NAME_MAX] = 0;
    assert_int_equal(stall_report(s, 2, longname, 1, 1, 1, T0), -EINVAL);
    longname[STALL_NAME_MAX - 1] = 0; /* 63 bytes: allowed */
    assert_int_equal(stall_report_check(longname, 1, 1, 1), 0);
    assert_int_equal(stall_report(s, 2, "j", -1.0, 0, 1, T0), -EINVAL);
    assert_int_equal(stall_report(s, 2, "j", 0, 0, STALL_REPORT_MAX_STEPS + 1, T0), -EINVAL);
    assert_int_equal(stall_list(s, T0, NULL, 0), 0); /* nothing recorded */
    assert_int_equal(stall_report(s, 2, "j", 86400.0, 0, STALL_REPORT_MAX_STEPS, T0), 0);
    assert_int_equal(stall_report(NULL, 2, "j", 0, 0, 0, T0), -EINVAL);
    stall_free(s);
}

/* A reclaimed tenant's counts move to another (retired); ids beyond max_tenants are other's. */
static void test_fold_and_other(void **state)
{
    (void)state;
    struct stall *s = mk(0, 0, 0);
    assert_int_equal(stall_report(s, 4, "a", 2.0, 1.0, 3, T0), 0);
    assert_int_equal(stall_report(s, 2, "b", 1.0, 1.0, 1, T0), 0);
    assert_int_equal(stall_tenant_fold(s, 4, 2), 0);
    struct stall_tenant_stats v[8];
    assert_int_equal(stall_list(s, T0, v, 8), 1);
    assert_int_equal(v[0].tenant, 2);
    assert_int_equal(v[0].wait_ns, 3 * S);
    assert_int_equal(v[0].steps, 4);
    assert_int_equal(v[0].reporters, 1); /* a's reporter went with its tenant */
    assert_int_equal(stall_tenant_fold(s, 4, 4), -EINVAL);
    assert_int_equal(stall_tenant_fold(s, 8, 2), -EINVAL);
    assert_int_equal(stall_tenant_fold(s, 5, 2), 0); /* never reported: nothing to move */
    assert_int_equal(stall_report(s, 100, "far", 1.0, 0.0, 1, T0), 0);
    assert_int_equal(one(s, 1, T0).steps, 1);     /* TIER_TENANT_OTHER */
    assert_int_equal(stall_list(s, T0, v, 1), 2); /* the count, beyond max */
    stall_free(s);
}

static const char *names(void *ud, uint32_t id)
{
    (void)ud;
    return id == 3 ? "u1001" : NULL;
}

/* The telemetry's store in its exports: counters in exact seconds, the ratio, reporters. */
static void test_exports(void **state)
{
    (void)state;
    struct telemetry *t = NULL;
    struct telemetry_config cfg = {.max_tenants = 8, .tenant_name = names};
    assert_int_equal(telemetry_new(&cfg, &t), 0);
    struct stall *s = tele_stall(t);
    assert_non_null(s);
    assert_null(tele_stall(NULL));
    uint64_t now = tier_now_mono_ns();
    assert_int_equal(stall_report(s, 3, "py-7-0", 1.5, 0.5, 12, now), 0);
    struct dynbuf b;
    dynbuf_init(&b, 1 << 20);
    assert_int_equal(tele_render_prometheus(t, NULL, &b), 0);
    assert_int_equal(dynbuf_append(&b, "", 1), 0);
    const char *m = b.data;
    assert_non_null(strstr(m, "# TYPE tierd_tenant_data_wait_seconds_total counter\n"
                              "tierd_tenant_data_wait_seconds_total{tenant=\"u1001\"} "
                              "1.500000000\n"));
    assert_non_null(
        strstr(m, "tierd_tenant_compute_seconds_total{tenant=\"u1001\"} 0.500000000\n"));
    assert_non_null(strstr(m, "tierd_tenant_data_steps_total{tenant=\"u1001\"} 12\n"));
    assert_non_null(strstr(m, "tierd_tenant_data_stall_ratio{tenant=\"u1001\"} 0.75\n"));
    assert_non_null(strstr(m, "tierd_tenant_data_reporters{tenant=\"u1001\"} 1\n"));
    dynbuf_reset(&b);
    assert_int_equal(tele_render_json(t, NULL, &b), 0);
    json_error_t e;
    json_t *j = json_loadb(b.data, b.len, 0, &e);
    assert_non_null(j);
    json_t *st = json_array_get(json_object_get(j, "stalls"), 0);
    assert_non_null(st);
    assert_string_equal(json_string_value(json_object_get(st, "tenant")), "u1001");
    assert_int_equal(json_integer_value(json_object_get(st, "steps")), 12);
    assert_true(fabs(json_number_value(json_object_get(st, "stall_ratio")) - 0.75) < 1e-6);
    json_t *nm = json_array_get(json_object_get(st, "names"), 0);
    assert_string_equal(json_string_value(json_object_get(nm, "name")), "py-7-0");
    assert_true(fabs(json_number_value(json_object_get(nm, "wait_s")) - 1.5) < 1e-6);
    json_decref(j);
    /* a reclaimed tenant's stall counts are folded with its series */
    assert_int_equal(tele_tenant_fold(t, 3, 2), 0);
    dynbuf_reset(&b);
    assert_int_equal(tele_render_prometheus(t, NULL, &b), 0);
    assert_int_equal(dynbuf_append(&b, "", 1), 0);
    assert_non_null(strstr(b.data, "tierd_tenant_data_steps_total{tenant=\"2\"} 12\n"));
    assert_null(strstr(b.data, "tenant=\"u1001\""));
    /* no ratio without a live reporter: the gauge is left out, the counters stay */
    assert_null(strstr(b.data, "tierd_tenant_data_stall_ratio{"));
    dynbuf_fini(&b);
    telemetry_free(t);
}

struct worker {
    struct stall *s;
    char name[16];
};

static void *reporter_thread(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 2000; i++)
        if (stall_report(w->s, 2, w->name, 0.001, 0.002, 1, T0 + (uint64_t)i * 1000) != 0)
            return arg; /* any failure: non-NULL */
    return NULL;
}

static void *reader_thread(void *arg)
{
    struct stall_tenant_stats v[8];
    struct stall_reporter_stats r[STALL_NAMES_PER_TENANT];
    for (int i = 0; i < 500; i++) {
        (void)stall_list(arg, T0, v, 8);
        (void)stall_reporters(arg, 2, T0, r, STALL_NAMES_PER_TENANT);
    }
    return NULL;
}

/* Reports from several threads while others read: every count lands exactly once. */
static void test_concurrent(void **state)
{
    (void)state;
    struct stall *s = mk(0, 0, 0);
    struct worker w[4];
    pthread_t th[5];
    for (int i = 0; i < 4; i++) {
        w[i].s = s;
        snprintf(w[i].name, sizeof(w[i].name), "rank-%d", i);
        assert_int_equal(pthread_create(&th[i], NULL, reporter_thread, &w[i]), 0);
    }
    assert_int_equal(pthread_create(&th[4], NULL, reader_thread, s), 0);
    for (int i = 0; i < 5; i++) {
        void *ret = &ret;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
    struct stall_tenant_stats t = one(s, 2, T0 + 2 * S);
    assert_int_equal(t.steps, 8000);
    assert_int_equal(t.reports, 8000);
    assert_int_equal(t.wait_ns, 8000 * 1000000ULL);
    assert_int_equal(t.compute_ns, 8000 * 2000000ULL);
    assert_int_equal(t.reporters, 4);
    stall_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accumulates_exactly),
        cmocka_unit_test(test_decay),
        cmocka_unit_test(test_names_bounded),
        cmocka_unit_test(test_aging),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_fold_and_other),
        cmocka_unit_test(test_exports),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
