/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_advice.c - the hot-tier advice's model and split (src/advice/advice.h):
 *   - a curve is read linearly in log size between its points, from 0 at size 0 to its first
 *     point, flat beyond its last; unknown (NAN) points are skipped;
 *   - predicted backend rate and stall follow the miss ratio (wait proportional to misses);
 *   - the size that brings a stall under the target, 0 when it is already there, UINT64_MAX
 *     when no size on the curve does;
 *   - the split: a re-reader whose working set fits in a tenth of the hot tier (a cliff: no hit
 *     below it) gets at least its set against a scanner, although one unit alone gains nothing;
 *     the split's cost is below the equal split's; weights move space to the heavier of two
 *     equal tenants; minimums hold, and scale down when they exceed the hot tier; every split
 *     adds up to the hot tier;
 *   - the loop: quotas move only with auto_quota, toward the split, and settle; an idle tenant
 *     keeps what it holds; a reader of the advice does not wait for a round in progress.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "advice/advice.h"
#include "advice/advisor.h"

#define MB ((uint64_t)1 << 20)
#define GB ((uint64_t)1 << 30)

static void near(double a, double b)
{
    if (fabs(a - b) > 1e-6)
        fail_msg("%.9f != %.9f", a, b);
}

static void test_curve_reading(void **state)
{
    (void)state;
    struct advice_in in = {.npoints = 4, .demand_bps = 100 * MB, .share_bytes = 2 * GB};
    in.curve[0] = (struct advice_point){1 * GB, 0.2};
    in.curve[1] = (struct advice_point){2 * GB, NAN};
    in.curve[2] = (struct advice_point){4 * GB, 0.6};
    in.curve[3] = (struct advice_point){16 * GB, 0.9};
    struct advice_pred p;
    advice_predict(&in, 1 * GB, &p);
    near(p.hit_ratio, 0.2);
    advice_predict(&in, 2 * GB, &p); /* half way in log size from 1G to 4G */
    near(p.hit_ratio, 0.4);
    near(p.backend_bps, 0.6 * 100 * MB);
    assert_true(isnan(p.stall)); /* no report */
    advice_predict(&in, 8 * GB, &p);
    near(p.hit_ratio, 0.75);
    advice_predict(&in, 64 * GB, &p); /* flat beyond the last point */
    near(p.hit_ratio, 0.9);
    advice_predict(&in, GB / 2, &p); /* linear from 0 */
    near(p.hit_ratio, 0.1);
    advice_predict(&in, 0, &p);
    near(p.hit_ratio, 0);
    struct advice_in none = {.npoints = 1};
    none.curve[0] = (struct advice_point){GB, NAN};
    advice_predict(&none, GB, &p);
    near(p.hit_ratio, 0);
}

static void test_stall_and_target(void **state)
{
    (void)state;
    /* at its 1 GiB share it hits half and waits as long as it computes: stall 0.5 */
    struct advice_in in = {.npoints = 3,
                           .share_bytes = 1 * GB,
                           .has_stall = true,
                           .wait_s = 30,
                           .compute_s = 30,
                           .demand_bps = 100 * MB};
    in.curve[0] = (struct advice_point){1 * GB, 0.5};
    in.curve[1] = (struct advice_point){4 * GB, 0.95};
    in.curve[2] = (struct advice_point){16 * GB, 0.99};
    struct advice_pred p;
    advice_predict(&in, 1 * GB, &p);
    near(p.stall, 0.5);
    advice_predict(&in, 4 * GB, &p); /* misses / 10: wait 0.05 of the loop, compute 0.5 */
    near(p.stall, 0.05 / 0.55);
    struct advice_params par = {.hot_bytes = 16 * GB, .target_stall = 0.15};
    struct advice_out out;
    advice_compute(&par, &in, 1, &out, NULL);
    near(out.stall_now, 0.5);
    near(out.hit_now, 0.5);
    /* stall 0.15 needs wait <= 0.5 * 0.15 / 0.85 = 0.0882: miss <= 0.0882, hit >= 0.9118 */
    assert_true(out.size_for_target > 2 * GB && out.size_for_target <= 4 * GB);
    advice_predict(&in, out.size_for_target, &p);
    assert_true(p.stall <= 0.15);
    advice_predict(&in, out.size_for_target * 9 / 10, &p);
    assert_true(p.stall > 0.15); /* the smallest such size, to the grid's step */
    /* a target below what the curve reaches: none; already met: 0 */
    par.target_stall = 0.001;
    advice_compute(&par, &in, 1, &out, NULL);
    assert_true(out.size_for_target == UINT64_MAX);
    par.target_stall = 0.6;
    advice_compute(&par, &in, 1, &out, NULL);
    assert_int_equal(out.size_for_target, 0);
}

/* A re-reader with a cliff at 1.6 GiB (a tenth of the hot tier) and a scanner that never hits. */
static void two_tenants(struct advice_in in[2])
{
    memset(in, 0, 2 * sizeof(in[0]));
    in[0].name = "reread";
    in[0].demand_bps = 200 * MB;
    in[0].npoints = 4;
    in[0].curve[0] = (struct advice_point){1 * GB, 0.0};
    in[0].curve[1] = (struct advice_point){GB * 3 / 2, 0.0};
    in[0].curve[2] = (struct advice_point){GB * 8 / 5, 0.95};
    in[0].curve[3] = (struct advice_point){32 * GB, 0.95};
    in[0].share_bytes = 8 * GB;
    in[1].name = "scan";
    in[1].demand_bps = 200 * MB;
    in[1].npoints = 2;
    in[1].curve[0] = (struct advice_point){1 * GB, 0.0};
    in[1].curve[1] = (struct advice_point){32 * GB, 0.0};
    in[1].share_bytes = 8 * GB;
}

static void test_split_cliff(void **state)
{
    (void)state;
    struct advice_in in[2];
    two_tenants(in);
    in[0].share_bytes = 1 * GB; /* the equal split: 8 GiB each */
    struct advice_params par = {.hot_bytes = 16 * GB, .target_stall = 0.15, .link_bps = 100 * MB};
    struct advice_out out[2];
    double now = 0, split = advice_compute(&par, in, 2, out, &now);
    assert_true(out[0].split_bytes >= GB * 8 / 5);
    assert_int_equal(out[0].split_bytes + out[1].split_bytes, 16 * GB);
    assert_true(split < now);
    near(out[0].split_cost, 200.0 * MB * 0.05 / (100.0 * MB));
    near(out[1].split_cost, 2.0);
    /* at equal shares of 8 GiB the re-reader is past its cliff too: nothing to gain */
    in[0].share_bytes = 8 * GB;
    split = advice_compute(&par, in, 2, out, &now);
    near(split, now);
}

static void test_split_weights_and_minimums(void **state)
{
    (void)state;
    /* two equal tenants with concave curves: the heavier (weight 3) gets more */
    struct advice_in in[2];
    memset(in, 0, sizeof(in));
    for (int i = 0; i < 2; i++) {
        in[i].demand_bps = 100 * MB;
        in[i].npoints = 5;
        for (int k = 0; k < 5; k++)
            in[i].curve[k] = (struct advice_point){GB << (2 * k), 1 - pow(0.5, (double)k + 1)};
        in[i].share_bytes = 8 * GB;
    }
    in[0].weight = 3;
    in[1].weight = 1;
    struct advice_params par = {.hot_bytes = 16 * GB, .target_stall = 0.15};
    struct advice_out out[2];
    advice_compute(&par, in, 2, out, NULL);
    assert_true(out[0].split_bytes > out[1].split_bytes);
    assert_int_equal(out[0].split_bytes + out[1].split_bytes, 16 * GB);
    /* a minimum holds */
    in[1].min_bytes = 12 * GB;
    advice_compute(&par, in, 2, out, NULL);
    assert_true(out[1].split_bytes >= 12 * GB);
    assert_int_equal(out[0].split_bytes + out[1].split_bytes, 16 * GB);
    /* minimums over the hot tier: scaled down */
    in[0].min_bytes = 12 * GB;
    advice_compute(&par, in, 2, out, NULL);
    assert_int_equal(out[0].split_bytes, 8 * GB);
    assert_int_equal(out[1].split_bytes, 8 * GB);
}

/* The loop (advisor.h) over a fake node: the re-reader and the scanner of two_tenants() with
 * quotas 1 GiB and 15 GiB. With auto_quota the re-reader's quota passes its cliff within a few
 * ticks and then stays (no change once the model sees nothing worth moving for); without it
 * nothing moves. The first tick only takes the counters; a tenant with no demand in an
 * interval gets no advice. */
struct fake {
    struct advice_in in[2];
    uint64_t quota[2], demand[2];
    unsigned sets;
};

static int fake_tenant(void *ud, uint32_t t, struct advisor_tenant *o)
{
    struct fake *f = ud;
    if (t >= 2)
        return -ENOENT;
    snprintf(o->name, sizeof(o->name), "%s", f->in[t].name);
    o->held_bytes = f->quota[t];
    o->quota_bytes = f->quota[t];
    o->demand_bytes = f->demand[t];
    o->weight = 1;
    o->npoints = f->in[t].npoints;
    memcpy(o->curve, f->in[t].curve, sizeof(o->curve));
    return 0;
}

static int fake_set_quota(void *ud, uint32_t t, uint64_t bytes)
{
    struct fake *f = ud;
    f->quota[t] = bytes;
    f->sets++;
    return 0;
}

static void run_loop(bool auto_quota, struct fake *f, unsigned ticks)
{
    two_tenants(f->in);
    f->quota[0] = 1 * GB;
    f->quota[1] = 15 * GB;
    struct advisor_ctx ctx = {.max_tenants = 4,
                              .hot_bytes = 16 * GB,
                              .block_size = 4 * MB,
                              .link_bps = 100 * MB,
                              .ud = f,
                              .tenant = fake_tenant,
                              .set_quota = fake_set_quota};
    struct advisor_config cfg = {.auto_quota = auto_quota};
    struct advisor *a = NULL;
    assert_int_equal(advisor_new(&ctx, &cfg, &a), 0);
    struct advisor_view v;
    advisor_tick(a, 1000000000ull);
    assert_int_equal(advisor_get(a, &v), 0);
    assert_int_equal(v.ticks, 0); /* counters only */
    advisor_view_free(&v);
    for (unsigned k = 1; k <= ticks; k++) {
        f->demand[0] += 2 * GB;
        f->demand[1] += 2 * GB;
        advisor_tick(a, (1 + 10 * (uint64_t)k) * 1000000000ull);
    }
    assert_int_equal(advisor_get(a, &v), 0);
    assert_int_equal(v.ticks, ticks);
    assert_int_equal(v.n, 2);
    assert_string_equal(v.r[0].name, "reread");
    assert_string_equal(v.r[0].in.name, "reread");
    near(v.r[0].in.demand_bps, 2.0 * GB / 10);
    assert_true(v.r[0].out.split_bytes >= GB * 8 / 5);
    advisor_view_free(&v);
    /* the changes counted per tenant are the quota sets made */
    assert_int_equal(advisor_quota_changes(a, 0) + advisor_quota_changes(a, 1), f->sets);
    assert_int_equal(advisor_quota_changes(a, 99), 0);
    /* an interval without demand: no advice for anyone */
    advisor_tick(a, (2 + 10 * (uint64_t)ticks) * 1000000000ull);
    assert_int_equal(advisor_get(a, &v), 0);
    assert_int_equal(v.n, 0);
    advisor_view_free(&v);
    advisor_free(a);
}

static void test_advisor_loop(void **state)
{
    (void)state;
    struct fake f;
    memset(&f, 0, sizeof(f));
    run_loop(false, &f, 6);
    assert_int_equal(f.sets, 0); /* without auto_quota nothing moves */
    assert_int_equal(f.quota[0], 1 * GB);

    memset(&f, 0, sizeof(f));
    run_loop(true, &f, 3);
    assert_true(f.quota[0] >= GB * 8 / 5); /* past the cliff within 3 ticks */
    assert_int_equal(f.quota[0] % (4 * MB), 0);
    unsigned sets = f.sets;
    assert_true(sets >= 1);
    memset(&f, 0, sizeof(f));
    run_loop(true, &f, 12);
    assert_true(f.quota[0] >= GB * 8 / 5);
    assert_true(f.sets <= sets + 2); /* settled: later ticks move little or nothing */

    /* the thread: its first tick is at once (counters only), stop joins it */
    struct advisor *a = NULL;
    struct advisor_ctx ok = {.max_tenants = 4, .tenant = fake_tenant, .ud = &f};
    assert_int_equal(advisor_new(&ok, NULL, &a), 0);
    assert_int_equal(advisor_start(a, 3600 * 1000000000ull), 0);
    assert_int_equal(advisor_start(a, 1000000000ull), -EALREADY);
    advisor_stop(a);
    advisor_stop(a);
    advisor_stop(NULL); /* tierd without curves stops none */
    advisor_free(a);
    a = NULL;
    struct advisor_ctx bad = {.max_tenants = 4, .tenant = fake_tenant};
    struct advisor_config ac = {.auto_quota = true};
    assert_int_equal(advisor_new(&bad, &ac, &a), -EINVAL); /* auto_quota needs set_quota */
}

/* A tenant that did not read in an interval keeps what it holds: the split of the others adds up
 * to the hot tier less that, so quotas never add up past the hot tier. */
static int idle_tenant(void *ud, uint32_t t, struct advisor_tenant *o)
{
    struct fake *f = ud;
    if (t == 2) {
        snprintf(o->name, sizeof(o->name), "idle");
        o->held_bytes = o->quota_bytes = 6 * GB;
        o->demand_bytes = 1 * GB; /* read before, not since */
        o->npoints = f->in[0].npoints;
        memcpy(o->curve, f->in[0].curve, sizeof(o->curve));
        return 0;
    }
    return fake_tenant(ud, t, o);
}

static void test_advisor_idle_keeps(void **state)
{
    (void)state;
    struct fake f;
    memset(&f, 0, sizeof(f));
    two_tenants(f.in);
    f.quota[0] = f.quota[1] = 5 * GB;
    struct advisor_ctx ctx = {.max_tenants = 4,
                              .hot_bytes = 16 * GB,
                              .block_size = 4 * MB,
                              .ud = &f,
                              .tenant = idle_tenant,
                              .set_quota = fake_set_quota};
    struct advisor_config cfg = {.auto_quota = true};
    struct advisor *a = NULL;
    assert_int_equal(advisor_new(&ctx, &cfg, &a), 0);
    advisor_tick(a, 1000000000ull);
    f.demand[0] += GB;
    f.demand[1] += GB;
    advisor_tick(a, 11000000000ull);
    struct advisor_view v;
    assert_int_equal(advisor_get(a, &v), 0);
    assert_int_equal(v.n, 2); /* the idle one gets no advice */
    assert_int_equal(v.r[0].out.split_bytes + v.r[1].out.split_bytes, 10 * GB);
    assert_true(f.quota[0] + f.quota[1] <= 10 * GB);
    advisor_view_free(&v);
    advisor_free(a);
}

/* A round asks the cache for each tenant's curve and sets quotas, which takes time (the curves
 * drain their queue first); advisor_get during it returns the previous round at once. Here the
 * round's callback waits until advisor_get has returned: were the reader made to wait for the
 * round, both would wait for ever (the test's timeout). */
struct slow {
    struct fake f;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool in_round, got, measuring;
};

static int slow_tenant(void *ud, uint32_t t, struct advisor_tenant *o)
{
    struct slow *s = ud;
    if (t == 0 && s->measuring) {
        pthread_mutex_lock(&s->mu);
        s->in_round = true;
        pthread_cond_broadcast(&s->cv);
        while (!s->got)
            pthread_cond_wait(&s->cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
    }
    return fake_tenant(&s->f, t, o);
}

static struct advisor *slow_a;
static void *slow_tick(void *arg)
{
    (void)arg;
    advisor_tick(slow_a, 21000000000ull);
    return NULL;
}

static void test_advisor_get_during_round(void **state)
{
    (void)state;
    struct slow s;
    memset(&s, 0, sizeof(s));
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    two_tenants(s.f.in);
    s.f.quota[0] = s.f.quota[1] = 8 * GB;
    struct advisor_ctx ctx = {.max_tenants = 4,
                              .hot_bytes = 16 * GB,
                              .block_size = 4 * MB,
                              .ud = &s,
                              .tenant = slow_tenant};
    assert_int_equal(advisor_new(&ctx, NULL, &slow_a), 0);
    advisor_tick(slow_a, 1000000000ull);
    s.f.demand[0] = s.f.demand[1] = GB;
    advisor_tick(slow_a, 11000000000ull); /* round 1 */
    s.f.demand[0] = s.f.demand[1] = 2 * GB;
    s.measuring = true;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, slow_tick, NULL), 0); /* round 2 */
    pthread_mutex_lock(&s.mu);
    while (!s.in_round)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    struct advisor_view v;
    assert_int_equal(advisor_get(slow_a, &v), 0); /* while round 2 is under way */
    assert_int_equal(v.ticks, 1);
    assert_int_equal(v.n, 2);
    advisor_view_free(&v);
    assert_int_equal(advisor_quota_changes(slow_a, 0), 0);
    pthread_mutex_lock(&s.mu);
    s.got = true;
    pthread_cond_broadcast(&s.cv);
    pthread_mutex_unlock(&s.mu);
    pthread_join(th, NULL);
    assert_int_equal(advisor_get(slow_a, &v), 0);
    assert_int_equal(v.ticks, 2);
    advisor_view_free(&v);
    advisor_free(slow_a);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_curve_reading),
        cmocka_unit_test(test_stall_and_target),
        cmocka_unit_test(test_split_cliff),
        cmocka_unit_test(test_split_weights_and_minimums),
        cmocka_unit_test(test_advisor_loop),
        cmocka_unit_test(test_advisor_idle_keeps),
        cmocka_unit_test(test_advisor_get_during_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
