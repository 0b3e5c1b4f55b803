/* SPDX-License-Identifier: Apache-2.0 */
/* test_hist.c - unit tests for src/common/hist: percentiles against exact sorted values, bucket
 * geometry, merging per-thread histograms. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hist.h"
#include "testutil.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Log-uniform values from 1 us to 10 s: every octave of the latency range gets samples. */
static uint64_t *random_values(size_t n, uint64_t seed)
{
    uint64_t *v = malloc(n * sizeof(*v));
    assert_non_null(v);
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(tu_rand_next(&st) >> 11) / 9007199254740992.0;
        v[i] = (uint64_t)(1000.0 * pow(1e7, u));
    }
    return v;
}

static uint64_t exact_pct(const uint64_t *sorted, size_t n, double p)
{
    double r = p / 100.0 * (double)n;
    size_t rank = (size_t)r;
    if ((double)rank < r)
        rank++;
    if (rank == 0)
        rank = 1;
    return sorted[rank - 1];
}

static void test_percentiles_within_1pct(void **state)
{
    (void)state;
    const size_t n = 200000;
    static const double ps[] = {0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100};
    struct tier_hist *h = NULL;
    assert_int_equal(tier_hist_new(&h), 0);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        tier_hist_init(h);
        uint64_t *v = random_values(n, seed);
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            tier_hist_record(h, v[i]);
            sum += (double)v[i];
        }
        qsort(v, n, sizeof(*v), cmp_u64);
        assert_int_equal(tier_hist_count(h), n);
        assert_int_equal(tier_hist_min(h), v[0]);
        assert_int_equal(tier_hist_max(h), v[n - 1]);
        assert_true(fabs(tier_hist_mean(h) - sum / (double)n) <= 1e-9 * sum);
        for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
            double exact = (double)exact_pct(v, n, ps[k]);
            double got = (double)tier_hist_percentile(h, ps[k]);
            double rel = fabs(got - exact) / exact;
            if (rel > 0.01)
                fail_msg("p%g: hist %.0f exact %.0f (%.3f%%)", ps[k], got, exact, rel * 100);
        }
        free(v);
    }
    tier_hist_free(h);
}

static void test_small_values_exact(void **state)
{
    (void)state;
    struct tier_hist h;
    tier_hist_init(&h);
    assert_int_equal(tier_hist_percentile(&h, 50), 0); /* empty */
    assert_int_equal(tier_hist_min(&h), 0);
    assert_true(tier_hist_mean(&h) == 0.0);
    for (uint64_t v = 1; v <= 100; v++)
        tier_hist_record(&h, v);
    assert_int_equal(tier_hist_percentile(&h, 50), 50);
    assert_int_equal(tier_hist_percentile(&h, 99), 99);
    assert_int_equal(tier_hist_percentile(&h, 1), 1);
    assert_int_equal(tier_hist_percentile(&h, 100), 100);
}

static void test_bucket_geometry(void **state)
{
    (void)state;
    uint64_t st = 7;
    for (int i = 0; i < 100000; i++) {
        uint64_t v = tu_rand_next(&st) >> (tu_rand_next(&st) % 64);
        if (v >> TIER_HIST_MAX_BIT)
            continue;
        size_t b = tier_hist_bucket_of(v);
        uint64_t lo = tier_hist_bucket_lo(b), hi = tier_hist_bucket_hi(b);
        assert_true(b < TIER_HIST_BUCKETS);
        assert_true(lo <= v && v <= hi);
        assert_true((double)(hi - lo + 1) <= (double)lo / 128.0 + 1.0);
        if (b + 1 < TIER_HIST_BUCKETS)
            assert_int_equal(tier_hist_bucket_lo(b + 1), hi + 1); /* contiguous */
    }
    /* One hour in nanoseconds is inside the range; larger values clamp but max stays exact. */
    uint64_t hour = 3600ULL * 1000000000ULL;
    assert_true(tier_hist_bucket_of(hour) < TIER_HIST_BUCKETS - 1);
    struct tier_hist h;
    tier_hist_init(&h);
    tier_hist_record(&h, hour);
    uint64_t p = tier_hist_percentile(&h, 50);
    assert_int_equal(p, hour); /* clamped to the exact min/max */
    tier_hist_record(&h, UINT64_MAX / 2);
    assert_int_equal(tier_hist_bucket_of(UINT64_MAX / 2), TIER_HIST_BUCKETS - 1);
    assert_int_equal(tier_hist_max(&h), UINT64_MAX / 2);
}

struct part {
    const uint64_t *v;
    size_t n;
    struct tier_hist *h;
};

static void *record_part(void *arg)
{
    struct part *p = arg;
    for (size_t i = 0; i < p->n; i++)
        tier_hist_record(p->h, p->v[i]);
    return NULL;
}

static void test_merge_per_thread(void **state)
{
    (void)state;
    enum { T = 4 };
    const size_t n = 100000;
    uint64_t *v = random_values(n, 99);
    struct tier_hist *all = NULL, *merged = NULL;
    struct part parts[T];
    pthread_t th[T];
    assert_int_equal(tier_hist_new(&all), 0);
    assert_int_equal(tier_hist_new(&merged), 0);
    for (size_t i = 0; i < n; i++)
        tier_hist_record(all, v[i]);
    for (int t = 0; t < T; t++) {
        parts[t].v = v + (n / T) * (size_t)t;
        parts[t].n = n / T;
        assert_int_equal(tier_hist_new(&parts[t].h), 0);
        assert_int_equal(pthread_create(&th[t], NULL, record_part, &parts[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        tier_hist_merge(merged, parts[t].h);
        tier_hist_free(parts[t].h);
    }
    assert_int_equal(tier_hist_count(merged), n);
    assert_int_equal(tier_hist_min(merged), tier_hist_min(all));
    assert_int_equal(tier_hist_max(merged), tier_hist_max(all));
    assert_memory_equal(merged->buckets, all->buckets, sizeof(all->buckets));
    assert_true(fabs(tier_hist_mean(merged) - tier_hist_mean(all)) < 1e-6 * tier_hist_mean(all));
    for (double p = 1; p <= 100; p += 7.3)
        assert_int_equal(tier_hist_percentile(merged, p), tier_hist_percentile(all, p));
    /* Merging an empty histogram changes nothing. */
    struct tier_hist *empty = NULL;
    assert_int_equal(tier_hist_new(&empty), 0);
    tier_hist_merge(merged, empty);
    assert_int_equal(tier_hist_count(merged), n);
    assert_int_equal(tier_hist_min(merged), tier_hist_min(all));
    tier_hist_free(empty);
    tier_hist_free(all);
    tier_hist_free(merged);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentiles_within_1pct),
        cmocka_unit_test(test_small_values_exact),
        cmocka_unit_test(test_bucket_geometry),
        cmocka_unit_test(test_merge_per_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
