/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sched.c - unit tests for the QoS scheduling point (src/qos/sched.c) with real threads:
 * strict class priority and FIFO within a class when requests queue behind max_inflight, the
 * in-flight bound under contention, and that the per-class counters add up.
 *
 * Ordering is made deterministic without sleeps: waiters are started one at a time and the test
 * waits (polling sched_stats_get with a deadline) until each has taken its ticket before starting
 * the next, so ticket order equals start order.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/timeutil.h"
#include "qos/sched.h"

#define DEADLINE_NS (20 * TIER_NS_PER_SEC)

static uint64_t total_queued(struct sched *s)
{
    struct sched_stats st;
    uint64_t n = 0;
    sched_stats_get(s, &st);
    for (int c = 0; c < TIER_IO_NCLASSES; c++)
        n += st.cls[c].queued_now;
    return n;
}

/* Poll until n requests are queued; fail the test at the deadline. */
static void wait_queued(struct sched *s, uint64_t n)
{
    uint64_t deadline = tier_now_mono_ns() + DEADLINE_NS;
    while (total_queued(s) != n) {
        assert_true(tier_now_mono_ns() < deadline);
        sched_yield();
    }
}

/* ---- grant order ------------------------------------------------------------------------ */

#define NWAITERS 24

struct order_rec {
    struct sched *s;
    pthread_mutex_t mu;
    int order[NWAITERS];
    int n;
};

struct waiter {
    struct order_rec *rec;
    int idx;
    struct tier_ioctx io;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    sched_admit(w->rec->s, &w->io, 100);
    pthread_mutex_lock(&w->rec->mu);
    w->rec->order[w->rec->n++] = w->idx;
    pthread_mutex_unlock(&w->rec->mu);
    /* Completing releases the only slot to the next grantee, so grants are serialised and the
     * recorded order is the grant order. */
    sched_done(w->rec->s, &w->io, 100, w->idx % 5 == 0 ? -EIO : 100, 1000);
    return NULL;
}

static void test_priority_then_fifo(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_inflight = 1};
    struct sched *s = NULL;
    struct order_rec rec = {.n = 0};
    struct waiter w[NWAITERS];
    pthread_t th[NWAITERS];
    /* Classes in a scrambled arrival order, so that neither arrival nor class alone explains the
     * expected grant order. */
    static const enum tier_io_class pattern[] = {
        TIER_IO_BACKGROUND, TIER_IO_STREAMING,  TIER_IO_INTERACTIVE, TIER_IO_CHECKPOINT,
        TIER_IO_STREAMING,  TIER_IO_BACKGROUND, TIER_IO_INTERACTIVE, TIER_IO_STREAMING};
    uint64_t per_class[TIER_IO_NCLASSES] = {0};

    assert_int_equal(sched_new(&cfg, &s), 0);
    rec.s = s;
    pthread_mutex_init(&rec.mu, NULL);

    /* Take the only slot so every waiter queues. */
    struct tier_ioctx blocker = {.tenant = 0, .cls = TIER_IO_BACKGROUND};
    sched_admit(s, &blocker, 1);

    for (int i = 0; i < NWAITERS; i++) {
        w[i].rec = &rec;
        w[i].idx = i;
        w[i].io.tenant = (uint32_t)i;
        w[i].io.cls = pattern[(size_t)i % (sizeof(pattern) / sizeof(pattern[0]))];
        per_class[w[i].io.cls]++;
        assert_int_equal(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
        wait_queued(s, (uint64_t)i + 1);
    }

    struct sched_stats st;
    sched_stats_get(s, &st);
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        assert_int_equal(st.cls[c].queued_now, per_class[c]);
        assert_int_equal(st.cls[c].admitted, c == TIER_IO_BACKGROUND ? 1 : 0);
    }
    assert_int_equal(st.cls[TIER_IO_BACKGROUND].inflight_now, 1);

    sched_done(s, &blocker, 1, 1, 10);
    for (int i = 0; i < NWAITERS; i++)
        pthread_join(th[i], NULL);

    /* Expected: by class, then by arrival. */
    assert_int_equal(rec.n, NWAITERS);
    int k = 0;
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        for (int i = 0; i < NWAITERS; i++) {
            if ((int)w[i].io.cls != c)
                continue;
            assert_int_equal(rec.order[k], i);
            k++;
        }
    }

    sched_stats_get(s, &st);
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        uint64_t want = per_class[c] + (c == TIER_IO_BACKGROUND ? 1 : 0);
        uint64_t errors = 0, bytes = 0;
        for (int i = 0; i < NWAITERS; i++) {
            if ((int)w[i].io.cls != c)
                continue;
            if (i % 5 == 0)
                errors++;
            else
                bytes += 100;
        }
        if (c == TIER_IO_BACKGROUND)
            bytes += 1;
        assert_int_equal(st.cls[c].admitted, want);
        assert_int_equal(st.cls[c].completed, want);
        assert_int_equal(st.cls[c].errors, errors);
        assert_int_equal(st.cls[c].bytes, bytes);
        assert_int_equal(st.cls[c].queued_now, 0);
        assert_int_equal(st.cls[c].inflight_now, 0);
        assert_int_equal(st.cls[c].service_ns_total,
                         per_class[c] * 1000 + (c == TIER_IO_BACKGROUND ? 10 : 0));
        if (per_class[c] > 0)
            assert_true(st.cls[c].wait_ns_total > 0);
    }
    pthread_mutex_destroy(&rec.mu);
    sched_free(s);
}

/* ---- in-flight bound under contention -------------------------------------------------- */

#define NTHREADS 8
#define NITER 2000
#define MAX_INFLIGHT 3

struct stress {
    struct sched *s;
    atomic_int cur;
    atomic_int max_seen;
    atomic_int violations;
};

struct stress_arg {
    struct stress *st;
    int id;
    uint64_t admitted[TIER_IO_NCLASSES];
    uint64_t errors[TIER_IO_NCLASSES];
    uint64_t bytes[TIER_IO_NCLASSES];
};

static void *stress_main(void *arg)
{
    struct stress_arg *a = arg;
    uint64_t rnd = (uint64_t)a->id * 7919u + 1;
    for (int i = 0; i < NITER; i++) {
        rnd = rnd * 6364136223846793005ULL + 1442695040888963407ULL;
        struct tier_ioctx io = {.tenant = (uint32_t)a->id,
                                .cls = (enum tier_io_class)((rnd >> 33) % TIER_IO_NCLASSES)};
        size_t bytes = (size_t)((rnd >> 40) % 4096);
        sched_admit(a->st->s, &io, bytes);
        int now = atomic_fetch_add(&a->st->cur, 1) + 1;
        if (now > MAX_INFLIGHT)
            atomic_fetch_add(&a->st->violations, 1);
        int m = atomic_load(&a->st->max_seen);
        while (now > m && !atomic_compare_exchange_weak(&a->st->max_seen, &m, now)) {
        }
        atomic_fetch_sub(&a->st->cur, 1);
        long result = (i % 7 == 0) ? -EIO : (long)bytes;
        a->admitted[io.cls]++;
        if (result < 0)
            a->errors[io.cls]++;
        else
            a->bytes[io.cls] += bytes;
        sched_done(a->st->s, &io, bytes, result, 5);
    }
    return NULL;
}

static void test_bound_and_counters(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_inflight = MAX_INFLIGHT};
    struct stress st = {.s = NULL};
    struct stress_arg args[NTHREADS];
    pthread_t th[NTHREADS];

    assert_int_equal(sched_new(&cfg, &st.s), 0);
    atomic_init(&st.cur, 0);
    atomic_init(&st.max_seen, 0);
    atomic_init(&st.violations, 0);
    memset(args, 0, sizeof(args));
    for (int i = 0; i < NTHREADS; i++) {
        args[i].st = &st;
        args[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, stress_main, &args[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);

    assert_int_equal(atomic_load(&st.violations), 0);
    assert_true(atomic_load(&st.max_seen) >= 1);
    assert_true(atomic_load(&st.max_seen) <= MAX_INFLIGHT);

    struct sched_stats ss;
    sched_stats_get(st.s, &ss);
    uint64_t total = 0;
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        uint64_t adm = 0, err = 0, bytes = 0;
        for (int i = 0; i < NTHREADS; i++) {
            adm += args[i].admitted[c];
            err += args[i].errors[c];
            bytes += args[i].bytes[c];
        }
        assert_int_equal(ss.cls[c].admitted, adm);
        assert_int_equal(ss.cls[c].completed, adm);
        assert_int_equal(ss.cls[c].errors, err);
        assert_int_equal(ss.cls[c].bytes, bytes);
        assert_int_equal(ss.cls[c].service_ns_total, adm * 5);
        assert_int_equal(ss.cls[c].queued_now, 0);
        assert_int_equal(ss.cls[c].inflight_now, 0);
        total += ss.cls[c].admitted;
    }
    assert_int_equal(total, (uint64_t)NTHREADS * NITER);
    sched_free(st.s);
}

/* ---- no blocking below the bound; defaults ---------------------------------------------- */

static void test_below_bound_and_defaults(void **state)
{
    (void)state;
    struct sched *s = NULL;
    struct sched_stats st;

    /* Default config: 32 in flight; a NULL ioctx counts as streaming. All admits return at once
     * from this one thread (a block here would hang the test until its timeout). */
    assert_int_equal(sched_new(NULL, &s), 0);
    for (int i = 0; i < 32; i++)
        sched_admit(s, NULL, 10);
    sched_stats_get(s, &st);
    assert_int_equal(st.cls[TIER_IO_STREAMING].inflight_now, 32);
    assert_int_equal(st.cls[TIER_IO_STREAMING].admitted, 32);
    assert_int_equal(st.cls[TIER_IO_STREAMING].queued_now, 0);
    for (int i = 0; i < 32; i++)
        sched_done(s, NULL, 10, 10, 0);
    sched_stats_get(s, &st);
    assert_int_equal(st.cls[TIER_IO_STREAMING].inflight_now, 0);
    assert_int_equal(st.cls[TIER_IO_STREAMING].bytes, 320);

    /* An out-of-range class is treated as background rather than indexing past the arrays. */
    struct tier_ioctx bad = {.tenant = 1, .cls = (enum tier_io_class)42};
    sched_admit(s, &bad, 1);
    sched_done(s, &bad, 1, -EIO, 0);
    sched_stats_get(s, &st);
    assert_int_equal(st.cls[TIER_IO_BACKGROUND].admitted, 1);
    assert_int_equal(st.cls[TIER_IO_BACKGROUND].errors, 1);
    sched_free(s);
    sched_free(NULL);
}

/* Strict priority must not starve a lower class for ever: with starve_limit 4, a background
 * request queued behind a stream of interactive ones goes after 4 of them. */
static void test_starvation_bound(void **state)
{
    (void)state;
    enum { N = 11 };
    struct sched_config cfg = {.max_inflight = 1, .starve_limit = 4};
    struct sched *s = NULL;
    struct order_rec rec = {.n = 0};
    struct waiter w[N];
    pthread_t th[N];
    assert_int_equal(sched_new(&cfg, &s), 0);
    rec.s = s;
    pthread_mutex_init(&rec.mu, NULL);
    struct tier_ioctx blocker = {.tenant = 0, .cls = TIER_IO_INTERACTIVE};
    sched_admit(s, &blocker, 1);
    for (int i = 0; i < N; i++) {
        w[i].rec = &rec;
        w[i].idx = i;
        w[i].io.tenant = 0;
        w[i].io.cls = i == 0 ? TIER_IO_BACKGROUND : TIER_IO_INTERACTIVE;
        assert_int_equal(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
        wait_queued(s, (uint64_t)i + 1);
    }
    sched_done(s, &blocker, 1, 1, 10);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    static const int want[N] = {1, 2, 3, 4, 0, 5, 6, 7, 8, 9, 10};
    assert_int_equal(rec.n, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(rec.order[i], want[i]);
    pthread_mutex_destroy(&rec.mu);
    sched_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_then_fifo),
        cmocka_unit_test(test_starvation_bound),
        cmocka_unit_test(test_bound_and_counters),
        cmocka_unit_test(test_below_bound_and_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
