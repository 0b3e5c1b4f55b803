/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sched.c - unit tests for the QoS scheduling point (src/qos/sched.c) with real threads:
 * strict class priority and FIFO within a class when requests queue behind max_inflight, the
 * in-flight bound under contention, and that the per-class counters add up.
 *
 * Ordering is made deterministic without sleeps: waiters are started one at a time and the test
 * waits (polling sched_stats_get with a deadline) until each has taken its ticket before starting
 * the next, so ticket order equals start order.
 *
 * Per-backend lanes: the admission deadline, the circuit
 * breaker's transitions, and end to end with real backends: concurrent calls to a black-hole S3
 * endpoint (tests/lib/blackhole.c) each end within a bound and open the breaker, which closes
 * again once the endpoint answers; and a POSIX backend read through the cache keeps its latency
 * while every S3 fetch hangs.
 *
 * QoS (dmClock on the backend lanes, qos/dmclock.h): the parameters a lane resolves (built-in
 * class defaults, per-tenant values); two tenants with limits (one over its two classes, one
 * on its class) reading through a wrapped fake backend each stay within their limit over the run
 * (the bound dmclock.h promises: limit x (elapsed + 20 ms) + one request) and get most of it; and
 * with equal weights and no limits over a backend with latency, the two split the lane, and one
 * alone keeps every slot busy. The strict-priority tests above use the default lane (sched_admit),
 * which keeps that order; with sched_config.qos_off a backend lane grants in that order too,
 * and with QoS on by dmClock's weights (test_lane_qos_off_strict). Inference first on the link
 * (yield_inflight): with an inference call in flight a second training read waits with slots
 * free, a later inference read passes it, and only a read's leave frees it; off and with QoS
 * off it goes at once (test_lane_yield_inflight, by counts only). Reads in parts while inference
 * has demand: counted ranged reads, the same bytes, dmClock charged the whole read's cost
 * (test_lane_split_reads).
 *
 * The disk lane (idle_fast, no deadline, no breaker): an idle lane grants unlimited clients
 * without dmClock; sched_lane_try_enter refuses a full lane and a tenant at its limit and queues
 * nothing; and with a real RAM-less cache admitting its disk hits through sched_lane_disk_adm,
 * a tenant's disk limit holds over the run (dmclock.h's bound) and is delivered, while another
 * tenant's disk hits proceed with a mean admission wait under 2 ms.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "blackhole.h"
#include "fakebe.h"
#include "cache/cache.h"
#include "common/err.h"
#include "common/timeutil.h"
#include "qos/sched.h"
#include "testutil.h"
#include "tiers/backend.h"

#define DEADLINE_NS (20 * TIER_NS_PER_SEC)
/* Wall-clock upper bounds here only catch a call that waits for a deadline of seconds or hangs;
 * a loaded machine delays wake-ups by tens of milliseconds, never this much. Whether a call
 * failed at once or after a wait is read off the lane's counters (fast_fails, admit_timeouts,
 * connections the endpoint accepted), which no load changes. */
#define LOAD_SLACK_MS 5000

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
        TIER_IO_BACKGROUND, TIER_IO_TRAINING,   TIER_IO_INFERENCE, TIER_IO_CHECKPOINT,
        TIER_IO_TRAINING,   TIER_IO_BACKGROUND, TIER_IO_INFERENCE, TIER_IO_TRAINING};
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
    assert_int_equal(st.cls[TIER_IO_TRAINING].inflight_now, 32);
    assert_int_equal(st.cls[TIER_IO_TRAINING].admitted, 32);
    assert_int_equal(st.cls[TIER_IO_TRAINING].queued_now, 0);
    for (int i = 0; i < 32; i++)
        sched_done(s, NULL, 10, 10, 0);
    sched_stats_get(s, &st);
    assert_int_equal(st.cls[TIER_IO_TRAINING].inflight_now, 0);
    assert_int_equal(st.cls[TIER_IO_TRAINING].bytes, 320);

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
    struct tier_ioctx blocker = {.tenant = 0, .cls = TIER_IO_INFERENCE};
    sched_admit(s, &blocker, 1);
    for (int i = 0; i < N; i++) {
        w[i].rec = &rec;
        w[i].idx = i;
        w[i].io.tenant = 0;
        w[i].io.cls = i == 0 ? TIER_IO_BACKGROUND : TIER_IO_INFERENCE;
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

/* ---- per-backend lanes: deadline and breaker ------------------------------------------- */

static struct sched_backend_stats lane_stats(struct sched *s, size_t i)
{
    struct sched_backend_stats b[8];
    size_t n = sched_backend_stats_get(s, b, 8);
    assert_true(i < n);
    return b[i];
}

/* A scheduler with one lane: the setup of the lane tests. */
static struct sched *one_lane(const struct sched_backend_config *bc, const char *name,
                              struct sched_lane **l)
{
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    assert_int_equal(sched_lane_new(s, name, bc, l), 0);
    return s;
}

struct enter_arg {
    struct sched *s;
    struct sched_lane *l;
    int rc;
    uint64_t ms;
    char msg[256];
};

static void *enter_main(void *arg)
{
    struct enter_arg *a = arg;
    uint64_t t0 = tier_now_mono_ns();
    a->rc = sched_lane_enter(a->s, a->l, NULL, 0);
    a->ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    snprintf(a->msg, sizeof(a->msg), "%s", tier_err_msg());
    if (a->rc == 0)
        sched_lane_leave(a->s, a->l, NULL, 0, 0, 1);
    return NULL;
}

/* An admission that cannot get a slot within admit_timeout_ms fails with -ETIMEDOUT, at the
 * deadline, and leaves the queue intact for the next waiter. */
static void test_lane_admission_deadline(void **state)
{
    (void)state;
    struct sched *s = NULL;
    struct sched_lane *l = NULL;
    struct sched_backend_config bc = {
        .max_inflight = 1, .admit_timeout_ms = 150, .breaker_failures = -1};
    s = one_lane(&bc, "cold", &l);
    assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0); /* takes the only slot */
    struct enter_arg a = {.s = s, .l = l};
    enter_main(&a);
    assert_int_equal(a.rc, -ETIMEDOUT);
    assert_true(a.ms >= 140 && a.ms < 1500);
    assert_non_null(strstr(a.msg, "backend 'cold': no free slot within 150 ms"));
    struct sched_backend_stats b = lane_stats(s, 0);
    assert_int_equal(b.admit_timeouts, 1);
    assert_int_equal(b.queued_now, 0);
    assert_int_equal(b.inflight_now, 1);
    /* A waiter that gets the slot before its deadline goes. */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, enter_main, &a), 0);
    uint64_t deadline = tier_now_mono_ns() + DEADLINE_NS;
    while (lane_stats(s, 0).queued_now != 1) {
        assert_true(tier_now_mono_ns() < deadline);
        sched_yield();
    }
    sched_lane_leave(s, l, NULL, 0, 0, 1);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    b = lane_stats(s, 0);
    assert_int_equal(b.admitted, 2);
    assert_int_equal(b.completed, 2);
    assert_int_equal(b.inflight_now, 0);
    sched_free(s);
}

/* Calls that never return (a hung POSIX mount) report no failure, so the breaker opened only
 * when they did: every later call waited its whole admission timeout (second review). A full
 * lane's admission timeouts count towards OPEN, and then calls fail at once. */
static void test_breaker_full_lane_timeouts(void **state)
{
    (void)state;
    struct sched *s = NULL;
    struct sched_lane *l = NULL;
    struct sched_backend_config bc = {.max_inflight = 1,
                                      .admit_timeout_ms = 50,
                                      .breaker_failures = 2,
                                      .breaker_cooldown_ms = 10000};
    s = one_lane(&bc, "nfs", &l);
    assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0); /* hangs: never leaves */
    struct enter_arg a = {.s = s, .l = l};
    for (int i = 0; i < 2; i++) {
        enter_main(&a);
        assert_int_equal(a.rc, -ETIMEDOUT);
        assert_non_null(strstr(a.msg, "no free slot"));
    }
    assert_int_equal(lane_stats(s, 0).breaker, SCHED_BREAKER_OPEN);
    enter_main(&a);
    assert_int_equal(a.rc, -ETIMEDOUT);
    assert_non_null(strstr(a.msg, "circuit breaker open"));
    /* at once, not after the 50 ms admission timeout */
    assert_int_equal(lane_stats(s, 0).admit_timeouts, 2);
    assert_int_equal(lane_stats(s, 0).fast_fails, 1);
    assert_true(a.ms < LOAD_SLACK_MS);
    sched_lane_leave(s, l, NULL, 0, 0, 1);
    sched_free(s);
}

/* A probe that never returns left the breaker HALF_OPEN for good: every call failed at once,
 * even after the backend recovered (second review). Past its deadline (the longer of the
 * admission timeout and the cool-down) the probe counts as failed: OPEN again, and a new probe
 * goes after the cool-down. */
static void test_breaker_stuck_probe(void **state)
{
    (void)state;
    struct sched *s = NULL;
    struct sched_lane *l = NULL;
    struct sched_backend_config bc = {.max_inflight = 4,
                                      .admit_timeout_ms = 100,
                                      .breaker_failures = 1,
                                      .breaker_cooldown_ms = 50};
    s = one_lane(&bc, "nfs", &l);
    assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0);
    sched_lane_leave(s, l, NULL, 0, -ETIMEDOUT, 1);
    assert_int_equal(lane_stats(s, 0).breaker, SCHED_BREAKER_OPEN);
    uint64_t deadline = tier_now_mono_ns() + DEADLINE_NS;
    while (sched_lane_enter(s, l, NULL, 0) != 0) /* until the cool-down lets the probe go */
        assert_true(tier_now_mono_ns() < deadline);
    /* the probe is out and never comes back */
    assert_int_equal(lane_stats(s, 0).breaker, SCHED_BREAKER_HALF_OPEN);
    assert_int_equal(sched_lane_enter(s, l, NULL, 0), -ETIMEDOUT); /* refused while it is out */
    uint64_t opens = lane_stats(s, 0).breaker_opens;
    while (lane_stats(s, 0).breaker_opens == opens) { /* its deadline passes: OPEN again */
        assert_true(tier_now_mono_ns() < deadline);
        assert_int_equal(sched_lane_enter(s, l, NULL, 0), -ETIMEDOUT);
        tier_sleep_ms(5);
    }
    int rc;
    while ((rc = sched_lane_enter(s, l, NULL, 0)) != 0) /* the next probe after the cool-down */
        assert_true(tier_now_mono_ns() < deadline);
    sched_lane_leave(s, l, NULL, 0, 0, 1); /* it answers: CLOSED */
    assert_int_equal(lane_stats(s, 0).breaker, SCHED_BREAKER_CLOSED);
    sched_lane_leave(s, l, NULL, 0, 0, 1); /* the stuck one, finally */
    sched_free(s);
}

/* CLOSED -> OPEN after K failures (queued calls refused at once), fast fails while OPEN, the
 * probe after the cool-down (others refused while it is out), probe failure -> OPEN, probe
 * answer -> CLOSED. Answers that are errors (-ENOENT) reset the count. */
static void test_breaker_transitions(void **state)
{
    (void)state;
    struct sched *s = NULL;
    struct sched_lane *l = NULL;
    struct sched_backend_config bc = {.max_inflight = 1,
                                      .admit_timeout_ms = 20000,
                                      .breaker_failures = 3,
                                      .breaker_cooldown_ms = 200};
    s = one_lane(&bc, "cold", &l);

    for (int i = 0; i < 2; i++) {
        assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0);
        sched_lane_leave(s, l, NULL, 0, -ETIMEDOUT, 1);
    }
    assert_int_equal(lane_stats(s, 0).consecutive_failures, 2);
    assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0);
    sched_lane_leave(s, l, NULL, 0, -ENOENT, 1); /* an answer */
    assert_int_equal(lane_stats(s, 0).consecutive_failures, 0);
    assert_int_equal(lane_stats(s, 0).breaker, SCHED_BREAKER_CLOSED);

    /* Attempts the server answered, even with a 5xx (-EIO), are answers; the call's own -EIO
     * after them is not counted again. */
    assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0);
    for (int i = 0; i < 5; i++)
        assert_true(sched_lane_attempt_failed(s, l, -EIO, true));
    sched_lane_leave(s, l, NULL, 0, -EIO, 1);
    assert_int_equal(lane_stats(s, 0).consecutive_failures, 0);
    assert_int_equal(lane_stats(s, 0).failures, 2);

    for (int i = 0; i < 2; i++) { /* a dead mount, a reset connection */
        assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0);
        sched_lane_leave(s, l, NULL, 0, i ? -ECONNRESET : -ENOTCONN, 1);
    }
    /* The third failure opens the breaker while another call is queued: that call is refused
     * at once, long before its 20 s admission deadline. */
    assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0);
    struct enter_arg a = {.s = s, .l = l};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, enter_main, &a), 0);
    uint64_t deadline = tier_now_mono_ns() + DEADLINE_NS;
    while (lane_stats(s, 0).queued_now != 1) {
        assert_true(tier_now_mono_ns() < deadline);
        sched_yield();
    }
    sched_lane_leave(s, l, NULL, 0, -ETIMEDOUT, 1);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, -ETIMEDOUT);
    assert_true(a.ms < 5000);
    assert_non_null(strstr(a.msg, "backend 'cold' is not answering: circuit breaker open"));
    struct sched_backend_stats b = lane_stats(s, 0);
    assert_int_equal(b.breaker, SCHED_BREAKER_OPEN);
    assert_int_equal(b.breaker_opens, 1);
    assert_int_equal(b.fast_fails, 1);
    assert_int_equal(b.failures, 5);
    assert_string_equal(sched_breaker_state_name(b.breaker), "open");

    /* OPEN: fail fast. */
    uint64_t t0 = tier_now_mono_ns();
    assert_int_equal(sched_lane_enter(s, l, NULL, 0), -ETIMEDOUT);
    assert_int_equal(lane_stats(s, 0).fast_fails, 2); /* refused at once, not at its deadline */
    assert_true(tier_now_mono_ns() - t0 < LOAD_SLACK_MS * TIER_NS_PER_MS); /* 20 s if waited */

    /* After the cool-down one probe goes; a second call while it is out is refused. */
    for (int round = 0; round < 2; round++) {
        deadline = tier_now_mono_ns() + DEADLINE_NS;
        while (lane_stats(s, 0).open_ms_left != 0) {
            assert_true(tier_now_mono_ns() < deadline);
            sched_yield();
        }
        assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0);
        assert_int_equal(lane_stats(s, 0).breaker, SCHED_BREAKER_HALF_OPEN);
        assert_int_equal(sched_lane_enter(s, l, NULL, 0), -ETIMEDOUT);
        if (round == 0) {
            sched_lane_leave(s, l, NULL, 0, -ETIMEDOUT, 1); /* probe failed: open again */
            assert_int_equal(lane_stats(s, 0).breaker, SCHED_BREAKER_OPEN);
            assert_int_equal(lane_stats(s, 0).breaker_opens, 2);
        } else {
            sched_lane_leave(s, l, NULL, 0, 0, 1); /* probe answered: closed */
        }
    }
    b = lane_stats(s, 0);
    assert_int_equal(b.breaker, SCHED_BREAKER_CLOSED);
    assert_int_equal(b.consecutive_failures, 0);
    assert_int_equal(b.inflight_now, 0);
    assert_int_equal(sched_lane_enter(s, l, NULL, 0), 0);
    sched_lane_leave(s, l, NULL, 0, 0, 1);
    sched_free(s);
}

struct read_arg {
    struct backend *be;
    const char *key;
    ssize_t rc;
};

static void *read_main(void *arg)
{
    struct read_arg *a = arg;
    char buf[16];
    a->rc = backend_read(a->be, NULL, a->key, 0, buf, sizeof(buf), NULL, NULL);
    return NULL;
}

/* An -EIO counted as a backend failure, so a few files whose reads fail with EIO (bad sectors on
 * a POSIX backend) opened the breaker, and every call to the healthy backend failed at once
 * (third review). Through a wrapped fake backend: ten EIO reads of one key (breaker_failures 3)
 * leave it CLOSED and the other key readable; a dead mount's ENOTCONN opens it; and calls that
 * hang (a gate) still open it through the full lane's admission timeouts. */
static void test_breaker_eio_is_an_answer(void **state)
{
    (void)state;
    struct backend *mem = fakebe_mem_new("warm");
    fakebe_add(mem, "good", 64, "e1");
    fakebe_add(mem, "bad", 64, "e1");
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct sched_backend_config bc = {.max_inflight = 1,
                                      .admit_timeout_ms = 50,
                                      .breaker_failures = 3,
                                      .breaker_cooldown_ms = 60000};
    struct backend *be = NULL;
    assert_int_equal(sched_backend_wrap(s, mem, &bc, &be), 0);
    struct fakebe_fault f = {.err = -EIO, .count = FAKEBE_ALWAYS, .key_part = "bad"};
    fakebe_fail(mem, FAKEBE_READ, &f);
    char buf[16];
    for (int i = 0; i < 10; i++)
        assert_int_equal(backend_read(be, NULL, "bad", 0, buf, sizeof(buf), NULL, NULL), -EIO);
    struct sched_backend_stats b = lane_stats(s, 0);
    assert_int_equal(b.breaker, SCHED_BREAKER_CLOSED);
    assert_int_equal(b.failures, 0);
    assert_int_equal(b.consecutive_failures, 0);
    assert_int_equal(backend_read(be, NULL, "good", 0, buf, sizeof(buf), NULL, NULL),
                     (ssize_t)sizeof(buf));
    char want[16];
    fakebe_expected("good", "e1", 0, want, sizeof(want));
    assert_memory_equal(buf, want, sizeof(want));

    /* The mount is gone (a FUSE file system whose daemon died): three calls open the breaker. */
    fakebe_fail(mem, FAKEBE_READ, NULL);
    fakebe_fail_next(mem, FAKEBE_STAT, -ENOTCONN, 3);
    struct backend_stat st;
    for (int i = 0; i < 3; i++)
        assert_int_equal(backend_stat(be, NULL, "good", &st), -ENOTCONN);
    assert_int_equal(lane_stats(s, 0).breaker, SCHED_BREAKER_OPEN);
    backend_free(be);
    sched_free(s);

    /* Calls that never return: the full lane's admission timeouts open it, as before. */
    mem = fakebe_mem_new("warm");
    fakebe_add(mem, "good", 64, "e1");
    assert_int_equal(sched_new(NULL, &s), 0);
    assert_int_equal(sched_backend_wrap(s, mem, &bc, &be), 0);
    fakebe_gate_close(mem, FAKEBE_READ, NULL);
    struct read_arg ra = {.be = be, .key = "good"};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_main, &ra), 0);
    uint64_t deadline = tier_now_mono_ns() + DEADLINE_NS;
    while (fakebe_gate_arrived(mem) != 1)
        assert_true(tier_now_mono_ns() < deadline);
    for (int i = 0; i < 3; i++)
        assert_int_equal(backend_read(be, NULL, "good", 0, buf, sizeof(buf), NULL, NULL),
                         -ETIMEDOUT);
    assert_int_equal(lane_stats(s, 0).breaker, SCHED_BREAKER_OPEN);
    fakebe_gate_open(mem);
    pthread_join(th, NULL);
    assert_int_equal(ra.rc, (ssize_t)sizeof(buf));
    backend_free(be);
    sched_free(s);
}

/* ---- real backends: a black-hole S3 endpoint beside a POSIX backend ---------------------- */

static struct backend *s3_on(const struct blackhole *bh, const char *name, uint64_t timeout_ms)
{
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", bh->port);
    struct s3_backend_config c = {.name = name,
                                  .endpoint = ep,
                                  .bucket = "bkt",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = -1, /* no retry: one attempt per call */
                                  .connect_timeout_ms = timeout_ms,
                                  .request_timeout_ms = timeout_ms,
                                  .max_connections = 64};
    struct backend *be = NULL;
    assert_int_equal(backend_s3_open(&c, &be), 0);
    return be;
}

#define NCALLS 24

struct call_arg {
    struct backend *be;
    int rc;
    uint64_t ms;
};

static void *stat_main(void *arg)
{
    struct call_arg *a = arg;
    struct backend_stat st;
    uint64_t t0 = tier_now_mono_ns();
    a->rc = backend_stat(a->be, NULL, "obj", &st);
    a->ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    return NULL;
}

/* The review's probe: many concurrent calls to an endpoint that accepts and never answers, with
 * a lane of 4, a 400 ms timeout and a breaker of 4. Every call ends within two timeouts (not in
 * waves of 4 until the admission deadline), later calls fail in microseconds without reaching
 * the endpoint, and once it answers again the probe after the cool-down closes the breaker. */
static void test_blackhole_s3_breaker(void **state)
{
    (void)state;
    struct blackhole bh;
    assert_int_equal(bh_start(&bh), 0);
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct backend *be = NULL;
    struct sched_backend_config bc = {.max_inflight = 4,
                                      .admit_timeout_ms = 3000,
                                      .breaker_failures = 4,
                                      .breaker_cooldown_ms = 1500};
    assert_int_equal(sched_backend_wrap(s, s3_on(&bh, "cold", 400), &bc, &be), 0);
    assert_string_equal(be->name, "cold");
    assert_string_equal(be->ops->type, "s3");
    assert_ptr_not_equal(sched_backend_lane(s, be), NULL);

    struct call_arg a[NCALLS];
    pthread_t th[NCALLS];
    for (int i = 0; i < NCALLS; i++) {
        a[i].be = be;
        assert_int_equal(pthread_create(&th[i], NULL, stat_main, &a[i]), 0);
    }
    uint64_t worst = 0;
    for (int i = 0; i < NCALLS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, -ETIMEDOUT);
        worst = a[i].ms > worst ? a[i].ms : worst;
    }
    /* The first three timeouts each hand their slot to a queued call (the breaker is still
     * closed), the fourth opens it and refuses the other 17 at once. So no call waits more than
     * one timeout for admission and runs at most one: nothing near the 3 s admission deadline,
     * and no third wave. Without the breaker the queue drains in waves of 4 until that deadline. */
    /* On an idle machine exactly 3 calls form the second wave (7 reach the endpoint); under
     * load a timeout can be reported after the breaker already opened on the others', so the
     * second wave may be smaller (seen: 2 at load 10). Never larger, and never a third: counted
     * by the connections the endpoint accepted, not by the calls' times (a loaded machine can
     * stretch a first-wave call past 600 ms). No call waits for the 3 s admission deadline. */
    assert_true(worst < 3000);
    struct sched_backend_stats b = lane_stats(s, 0);
    int reached = atomic_load(&bh.accepted);
    assert_true(reached >= 4 && reached <= 7);
    assert_int_equal(b.breaker, SCHED_BREAKER_OPEN);
    assert_int_equal(b.failures, (uint64_t)reached);
    assert_int_equal(b.breaker_opens, 1);
    assert_int_equal(b.fast_fails, NCALLS - reached); /* nothing more reached the endpoint */

    /* Open: fail fast without touching the endpoint. */
    struct call_arg one = {.be = be};
    stat_main(&one);
    assert_int_equal(one.rc, -ETIMEDOUT);
    assert_true(one.ms < LOAD_SLACK_MS);
    assert_non_null(strstr(tier_err_msg(), "backend 'cold' is not answering"));
    assert_int_equal(atomic_load(&bh.accepted), reached);
    assert_int_equal(lane_stats(s, 0).fast_fails, NCALLS - reached + 1); /* refused at once */

    /* The endpoint answers again (404: an answer, not a failure): the probe closes it. */
    bh_answer(&bh, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    uint64_t deadline = tier_now_mono_ns() + DEADLINE_NS;
    while (lane_stats(s, 0).open_ms_left != 0) {
        assert_true(tier_now_mono_ns() < deadline);
        sched_yield();
    }
    stat_main(&one);
    assert_int_equal(one.rc, -ENOENT);
    b = lane_stats(s, 0);
    assert_int_equal(b.breaker, SCHED_BREAKER_CLOSED);
    assert_int_equal(b.consecutive_failures, 0);
    stat_main(&one);
    assert_int_equal(one.rc, -ENOENT);
    backend_free(be);
    sched_free(s);
    bh_stop(&bh);
}

/* The breaker also sees the attempts S3 retries inside one call, and once open it stops the
 * retries of the calls in flight: 8 calls of up to 4 attempts of 300 ms each end after one or two
 * attempts (the fourth failed attempt opens the breaker), instead of after 4 x 300 ms. */
static void test_breaker_stops_retries(void **state)
{
    (void)state;
    enum { N = 8 };
    struct blackhole bh;
    assert_int_equal(bh_start(&bh), 0);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", bh.port);
    struct s3_backend_config c = {.name = "cold",
                                  .endpoint = ep,
                                  .bucket = "bkt",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = 3,
                                  .retry_base_ms = 10,
                                  .retry_max_ms = 20,
                                  .connect_timeout_ms = 300,
                                  .request_timeout_ms = 300,
                                  .max_connections = N};
    struct backend *raw = NULL, *be = NULL;
    assert_int_equal(backend_s3_open(&c, &raw), 0);
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct sched_backend_config bc = {.max_inflight = N,
                                      .admit_timeout_ms = 3000,
                                      .breaker_failures = 4,
                                      .breaker_cooldown_ms = 60000};
    assert_int_equal(sched_backend_wrap(s, raw, &bc, &be), 0);
    struct call_arg a[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        a[i].be = be;
        assert_int_equal(pthread_create(&th[i], NULL, stat_main, &a[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, -ETIMEDOUT);
        assert_true(a[i].ms < 4 * 300 + LOAD_SLACK_MS); /* hangs nowhere */
    }
    /* The first three failed attempts retry (the breaker is still closed), the fourth opens it:
     * every other call stops after its first attempt, the three retries after their second.
     * Counted by the connections the endpoint saw (each attempt opens one), not by the calls'
     * times: N + 3 attempts, where four attempts each would be 4 N. */
    assert_int_equal(atomic_load(&bh.accepted), N + 3);
    struct sched_backend_stats b = lane_stats(s, 0);
    assert_int_equal(b.breaker, SCHED_BREAKER_OPEN);
    assert_int_equal(b.failures, N + 3); /* each failed attempt once, the calls not again */
    backend_free(be);
    sched_free(s);
    bh_stop(&bh);
}

struct fetch_arg {
    struct cache *c;
    struct cache_obj obj;
    char key[32];
    ssize_t rc;
};

static void *fetch_main(void *arg)
{
    struct fetch_arg *f = arg;
    char buf[64];
    struct tier_ioctx io = TIER_IOCTX_DEFAULT;
    f->rc = cache_read(f->c, &io, &f->obj, 0, buf, sizeof(buf));
    return NULL;
}

/* One cache and scheduler for an S3 backend that hangs and a POSIX one: with 12 S3 fetches stuck
 * (4 in flight, 8 queued), a POSIX read through the same cache still answers at once, because
 * each backend has its own lane; a shared in-flight bound (8 here, 32 in tierd before) would make
 * it wait for the S3 timeouts. */
static void test_posix_latency_while_s3_hangs(void **state)
{
    (void)state;
    enum { NFETCH = 12 };
    struct blackhole bh;
    assert_int_equal(bh_start(&bh), 0);
    char *root = tu_mkdtemp("sched-posix");
    char path[4096];
    snprintf(path, sizeof(path), "%s/warm.bin", root);
    tu_write_file(path, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 64);

    struct sched *s = NULL;
    struct sched_config sc = {.max_inflight = 8};
    assert_int_equal(sched_new(&sc, &s), 0);
    struct backend *cold = NULL, *warm = NULL, *pb = NULL;
    struct sched_backend_config hang = {
        .max_inflight = 4, .admit_timeout_ms = 20000, .breaker_failures = -1};
    assert_int_equal(sched_backend_wrap(s, s3_on(&bh, "cold", 20000), &hang, &cold), 0);
    struct posix_backend_config pc = {.name = "warm", .root = root};
    assert_int_equal(backend_posix_open(&pc, &pb), 0);
    struct sched_backend_config fast = {.max_inflight = 4, .admit_timeout_ms = 20000};
    assert_int_equal(sched_backend_wrap(s, pb, &fast, &warm), 0);

    struct cache_config cc = {.block_size = 64 * 1024, .ram_bytes = 16u << 20};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cc, &c), 0);

    static struct fetch_arg f[NFETCH];
    pthread_t th[NFETCH];
    for (int i = 0; i < NFETCH; i++) {
        f[i].c = c;
        snprintf(f[i].key, sizeof(f[i].key), "obj%d", i);
        f[i].obj =
            (struct cache_obj){.be = cold, .key = f[i].key, .etag = "\"v1\"", .size_bytes = 64};
        assert_int_equal(pthread_create(&th[i], NULL, fetch_main, &f[i]), 0);
    }
    /* Wait until every S3 fetch is stuck: 4 in the S3 lane's flight, the rest queued. */
    uint64_t deadline = tier_now_mono_ns() + DEADLINE_NS;
    while (lane_stats(s, 0).inflight_now != 4 || total_queued(s) != NFETCH - 4 ||
           atomic_load(&bh.accepted) != 4) {
        assert_true(tier_now_mono_ns() < deadline);
        sched_yield();
    }

    struct backend_stat st;
    uint64_t t0 = tier_now_mono_ns();
    assert_int_equal(backend_stat(warm, NULL, "warm.bin", &st), 0);
    struct cache_obj wobj = {.be = warm, .key = "warm.bin", .etag = st.etag, .size_bytes = 64};
    char buf[64];
    struct tier_ioctx io = TIER_IOCTX_DEFAULT;
    assert_int_equal(cache_read(c, &io, &wobj, 0, buf, sizeof(buf)), 64);
    uint64_t ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    assert_memory_equal(buf, "0123456789abcdef", 16);
    assert_true(ms < LOAD_SLACK_MS); /* the S3 fetches would hold it for 20 s */
    struct sched_backend_stats b = lane_stats(s, 1);
    assert_string_equal(b.name, "warm");
    assert_int_equal(b.admitted, 2);

    /* Release the S3 fetches: the endpoint drops its connections, each fails with an error. */
    bh_stop(&bh);
    for (int i = 0; i < NFETCH; i++) {
        pthread_join(th[i], NULL);
        assert_true(f[i].rc < 0);
    }
    cache_close(c);
    backend_free(cold);
    backend_free(warm);
    sched_free(s);
    tu_rmtree(root);
    free(root);
}

/* ---- QoS on a backend lane -------------------------------------------------------------- */

static void test_lane_qos_params(void **state)
{
    (void)state;
    struct sched_config sc = {0};
    sc.cls[TIER_IO_TRAINING].weight = 20;
    sc.cls[TIER_IO_BACKGROUND].limit_bps = 50u << 20;
    sc.cls[TIER_IO_INFERENCE].reservation_bps = SCHED_RATE_NONE;
    struct sched *s = NULL;
    assert_int_equal(sched_new(&sc, &s), 0);
    struct sched_lane *known = NULL, *unknown = NULL;
    struct sched_backend_config bc = {.link_capacity_bps = 1000000000};
    assert_int_equal(sched_lane_new(s, "a", &bc, &known), 0);
    assert_int_equal(sched_lane_new(s, "b", NULL, &unknown), 0);
    struct sched_qos q;
    /* inference: its reservation was configured away; the built-in weight stays */
    sched_lane_qos_get(s, known, 5, TIER_IO_INFERENCE, &q, NULL);
    assert_int_equal(q.reservation_bps, 0);
    assert_int_equal(q.weight, 64);
    sched_lane_qos_get(s, known, 5, TIER_IO_TRAINING, &q, NULL);
    assert_int_equal(q.weight, 20);
    assert_int_equal(q.limit_bps, 0);
    sched_lane_qos_get(s, unknown, 5, TIER_IO_BACKGROUND, &q, NULL);
    assert_int_equal(q.weight, 1);
    assert_int_equal(q.limit_bps, 50u << 20);
    sched_lane_qos_get(s, unknown, 5, TIER_IO_CHECKPOINT, &q, NULL);
    assert_int_equal(q.weight, 4);
    /* a tenant's values over the class's; unset fields keep the class's */
    struct sched_qos tq = {.reservation_bps = 10u << 20, .limit_bps = 0, .weight = 7};
    assert_int_equal(sched_qos_set(s, 5, TIER_IO_BACKGROUND, &tq), 0);
    sched_lane_qos_get(s, known, 5, TIER_IO_BACKGROUND, &q, NULL);
    assert_int_equal(q.reservation_bps, 10u << 20);
    assert_int_equal(q.limit_bps, 50u << 20);
    assert_int_equal(q.weight, 7);
    tq.limit_bps = SCHED_RATE_NONE;
    assert_int_equal(sched_qos_set(s, 5, TIER_IO_BACKGROUND, &tq), 0);
    sched_lane_qos_get(s, known, 5, TIER_IO_BACKGROUND, &q, NULL);
    assert_int_equal(q.limit_bps, 0);
    sched_lane_qos_get(s, known, 6, TIER_IO_BACKGROUND, &q, NULL); /* another tenant: the class's */
    assert_int_equal(q.limit_bps, 50u << 20);
    assert_int_equal(sched_qos_set(s, 5, TIER_IO_BACKGROUND, NULL), 0);
    sched_lane_qos_get(s, known, 5, TIER_IO_BACKGROUND, &q, NULL);
    assert_int_equal(q.weight, 1);
    tq.weight = SCHED_WEIGHT_MAX + 1;
    assert_int_equal(sched_qos_set(s, 5, TIER_IO_BACKGROUND, &tq), -EINVAL);
    assert_int_equal(sched_qos_set(s, 70000, TIER_IO_BACKGROUND, NULL), -EINVAL);
    sched_free(s);

    /* with a link capacity and nothing configured, inference reserves a tenth of it */
    assert_int_equal(sched_new(NULL, &s), 0);
    assert_int_equal(sched_lane_new(s, "a", &bc, &known), 0);
    sched_lane_qos_get(s, known, 0, TIER_IO_INFERENCE, &q, NULL);
    assert_int_equal(q.reservation_bps, 100000000);
    sched_free(s);
    sc.cls[TIER_IO_INFERENCE].weight = SCHED_WEIGHT_MAX + 1;
    assert_int_equal(sched_new(&sc, &s), -EINVAL);
}

#define QOS_BLOCK (256u << 10)
#define QOS_COST (QOS_BLOCK + (64u << 10)) /* sched's default op cost */

struct qos_reader {
    struct backend *be;
    struct tier_ioctx io;
    uint64_t until_ns;
    uint64_t calls;
    int errors;
};

static void *qos_reader_main(void *arg)
{
    struct qos_reader *r = arg;
    char *b = malloc(QOS_BLOCK); /* content is not checked here */
    assert_non_null(b);
    while (tier_now_mono_ns() < r->until_ns) {
        struct backend_stat st;
        ssize_t n = backend_read(r->be, &r->io, "obj", 0, b, QOS_BLOCK, NULL, &st);
        if (n != (ssize_t)QOS_BLOCK)
            r->errors++;
        else
            r->calls++;
    }
    free(b);
    return NULL;
}

/* Run nthreads readers for each io[] for run_ns; calls per reader in r[]. Returns the elapsed
 * ns from before the first call to after the last returned. With watch, *max_inflight is the
 * most calls seen in flight at once on watch's first lane while the readers ran (sampled every
 * millisecond). */
static uint64_t qos_run(struct backend *be, const struct tier_ioctx *io, int nio, int nthreads,
                        uint64_t run_ns, struct qos_reader *r, struct sched *watch,
                        uint64_t *max_inflight)
{
    pthread_t th[16];
    assert_true(nio * nthreads <= 16);
    uint64_t t0 = tier_now_mono_ns();
    for (int i = 0; i < nio * nthreads; i++) {
        r[i] = (struct qos_reader){.be = be, .io = io[i / nthreads], .until_ns = t0 + run_ns};
        assert_int_equal(pthread_create(&th[i], NULL, qos_reader_main, &r[i]), 0);
    }
    if (watch) {
        *max_inflight = 0;
        while (tier_now_mono_ns() < t0 + run_ns) {
            uint64_t n = lane_stats(watch, 0).inflight_now;
            *max_inflight = n > *max_inflight ? n : *max_inflight;
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        }
    }
    for (int i = 0; i < nio * nthreads; i++)
        pthread_join(th[i], NULL);
    uint64_t t1 = tier_now_mono_ns();
    for (int i = 0; i < nio * nthreads; i++)
        assert_int_equal(r[i].errors, 0);
    return t1 - t0;
}

static uint64_t qos_calls(const struct qos_reader *r, int which, int nthreads)
{
    uint64_t n = 0;
    for (int i = which * nthreads; i < (which + 1) * nthreads; i++)
        n += r[i].calls;
    return n;
}

static void test_lane_qos_limits(void **state)
{
    (void)state;
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct backend *mem = fakebe_mem_new("warm"), *be = NULL;
    fakebe_add(mem, "obj", QOS_BLOCK, "e1");
    struct sched_backend_config bc = {.max_inflight = 8, .admit_timeout_ms = 20000};
    assert_int_equal(sched_backend_wrap(s, mem, &bc, &be), 0);
    /* Tenant 2 reads in training and prefetches in background under a tenant limit of 40
     * requests' cost a second, both classes together; tenant 3 reads in training under a limit
     * of 20 on that class. */
    const uint64_t lim[2] = {40ull * QOS_COST, 20ull * QOS_COST};
    const struct tier_ioctx io[4] = {{.tenant = 2, .cls = TIER_IO_TRAINING},
                                     {.tenant = 2, .cls = TIER_IO_BACKGROUND},
                                     {.tenant = 3, .cls = TIER_IO_TRAINING},
                                     {.tenant = 3, .cls = TIER_IO_TRAINING}};
    assert_int_equal(sched_tenant_limit_set(s, 2, lim[0]), 0);
    struct sched_qos q = {.limit_bps = lim[1]};
    assert_int_equal(sched_qos_set(s, 3, TIER_IO_TRAINING, &q), 0);
    struct sched_qos got;
    uint64_t tl = 0;
    sched_lane_qos_get(s, sched_backend_lane(s, be), 2, TIER_IO_BACKGROUND, &got, &tl);
    assert_int_equal(tl, lim[0]);
    assert_int_equal(got.limit_bps, 0);

    struct qos_reader r[8];
    const uint64_t run = 1500 * TIER_NS_PER_MS;
    uint64_t el = qos_run(be, io, 4, 2, run, r, NULL, NULL);
    for (int i = 0; i < 2; i++) {
        uint64_t cost = (qos_calls(r, 2 * i, 2) + qos_calls(r, 2 * i + 1, 2)) * QOS_COST;
        /* dmclock.h's bound: limit x (elapsed + 20 ms) + one request */
        double bound = (double)lim[i] * ((double)el / 1e9 + 0.020) + QOS_COST;
        if ((double)cost > bound)
            fail_msg("tenant %d: %llu bytes of cost in %.3f s, limit %llu/s allows %.0f", 2 + i,
                     (unsigned long long)cost, (double)el / 1e9, (unsigned long long)lim[i], bound);
        print_message("tenant %d: %.1f MiB/s of cost, limit %.1f MiB/s\n", 2 + i,
                      (double)cost / ((double)el / 1e9) / 1048576.0, (double)lim[i] / 1048576.0);
        /* and the limit is delivered: the fake backend is free, nothing else holds them */
        if ((double)cost < 0.7 * (double)lim[i] * ((double)run / 1e9))
            fail_msg("tenant %d got %llu of a %llu/s limit in %.3f s", 2 + i,
                     (unsigned long long)cost, (unsigned long long)lim[i], (double)run / 1e9);
    }
    /* inside tenant 2's limit, training (weight 16) goes before its prefetch (weight 1) */
    uint64_t tr = qos_calls(r, 0, 2), bg = qos_calls(r, 1, 2);
    print_message("tenant 2: %llu training calls, %llu background\n", (unsigned long long)tr,
                  (unsigned long long)bg);
    assert_true(tr > 4 * bg);
    struct sched_backend_stats st = lane_stats(s, 0);
    assert_true(st.limit_waits > 0); /* they waited for their limits, with slots free */
    assert_int_equal(st.queued_now, 0);
    assert_int_equal(st.inflight_now, 0);
    assert_int_equal(sched_tenant_limit_set(s, 70000, 1), -EINVAL);
    backend_free(be);
    sched_free(s);
}

/* A lane's own values of a tenant (sched_lane_qos_set, sched_lane_tenant_limit_set): read field
 * by field over the tenant's values of every lane, on that lane only; dropped, the tenant's
 * values apply again. */
static void test_lane_qos_own_params(void **state)
{
    (void)state;
    struct sched *s = NULL, *other = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    assert_int_equal(sched_new(NULL, &other), 0);
    struct sched_lane *a = NULL, *b = NULL, *o = NULL;
    assert_int_equal(sched_lane_new(s, "a", NULL, &a), 0);
    assert_int_equal(sched_lane_new(s, "b", NULL, &b), 0);
    assert_int_equal(sched_lane_new(other, "o", NULL, &o), 0);
    const uint64_t M = 1u << 20;
    struct sched_qos tq = {.limit_bps = 10 * M, .weight = 7};
    assert_int_equal(sched_qos_set(s, 5, TIER_IO_TRAINING, &tq), 0);
    assert_int_equal(sched_tenant_limit_set(s, 5, 30 * M), 0);
    /* lane a's own limit; its weight is the tenant's of every lane */
    struct sched_qos lq = {.limit_bps = 2 * M, .reservation_bps = M};
    assert_int_equal(sched_lane_qos_set(s, a, 5, TIER_IO_TRAINING, &lq), 0);
    assert_int_equal(sched_lane_tenant_limit_set(s, a, 5, 4 * M), 0);
    struct sched_qos q, own;
    uint64_t tl = 0;
    sched_lane_qos_get(s, a, 5, TIER_IO_TRAINING, &q, &tl);
    assert_int_equal(q.limit_bps, 2 * M);
    assert_int_equal(q.reservation_bps, M);
    assert_int_equal(q.weight, 7);
    assert_int_equal(tl, 4 * M);
    sched_lane_qos_get(s, b, 5, TIER_IO_TRAINING, &q, &tl); /* lane b: the tenant's */
    assert_int_equal(q.limit_bps, 10 * M);
    assert_int_equal(q.reservation_bps, 0);
    assert_int_equal(q.weight, 7);
    assert_int_equal(tl, 30 * M);
    sched_lane_qos_get(s, a, 5, TIER_IO_INFERENCE, &q, NULL); /* another class: untouched */
    assert_int_equal(q.limit_bps, 0);
    assert_int_equal(q.weight, 64);
    sched_lane_qos_get(s, a, 6, TIER_IO_TRAINING, &q, &tl); /* another tenant: untouched */
    assert_int_equal(q.limit_bps, 0);
    assert_int_equal(q.weight, 16);
    assert_int_equal(tl, 0);
    assert_true(sched_lane_qos_own_get(s, a, 5, TIER_IO_TRAINING, &own));
    assert_int_equal(own.limit_bps, 2 * M);
    assert_int_equal(own.weight, 0);
    assert_false(sched_lane_qos_own_get(s, b, 5, TIER_IO_TRAINING, &own));
    assert_false(sched_lane_qos_own_get(s, a, 900, TIER_IO_TRAINING, &own)); /* beyond the table */
    assert_int_equal(sched_lane_tenant_limit_own_get(s, a, 5), 4 * M);
    assert_int_equal(sched_lane_tenant_limit_own_get(s, b, 5), 0);
    /* "none" on one lane; the tenant's own values still apply on the other */
    lq = (struct sched_qos){.limit_bps = SCHED_RATE_NONE};
    assert_int_equal(sched_lane_qos_set(s, a, 5, TIER_IO_TRAINING, &lq), 0);
    assert_int_equal(sched_lane_tenant_limit_set(s, a, 5, SCHED_RATE_NONE), 0);
    sched_lane_qos_get(s, a, 5, TIER_IO_TRAINING, &q, &tl);
    assert_int_equal(q.limit_bps, 0);
    assert_int_equal(tl, 0);
    sched_lane_qos_get(s, b, 5, TIER_IO_TRAINING, &q, &tl);
    assert_int_equal(q.limit_bps, 10 * M);
    assert_int_equal(tl, 30 * M);
    /* dropped: the tenant's values of every lane again */
    assert_int_equal(sched_lane_qos_set(s, a, 5, TIER_IO_TRAINING, NULL), 0);
    assert_int_equal(sched_lane_tenant_limit_set(s, a, 5, 0), 0);
    sched_lane_qos_get(s, a, 5, TIER_IO_TRAINING, &q, &tl);
    assert_int_equal(q.limit_bps, 10 * M);
    assert_int_equal(tl, 30 * M);
    assert_false(sched_lane_qos_own_get(s, a, 5, TIER_IO_TRAINING, &own));
    /* refused */
    lq.weight = SCHED_WEIGHT_MAX + 1;
    assert_int_equal(sched_lane_qos_set(s, a, 5, TIER_IO_TRAINING, &lq), -EINVAL);
    assert_int_equal(sched_lane_qos_set(s, a, 70000, TIER_IO_TRAINING, NULL), -EINVAL);
    assert_int_equal(sched_lane_qos_set(s, a, 5, (enum tier_io_class)9, NULL), -EINVAL);
    assert_int_equal(sched_lane_qos_set(s, o, 5, TIER_IO_TRAINING, NULL), -EINVAL);
    assert_int_equal(sched_lane_tenant_limit_set(s, o, 5, M), -EINVAL);
    assert_int_equal(sched_lane_tenant_limit_set(s, a, 70000, M), -EINVAL);
    sched_free(other);
    sched_free(s);
}

/* A lane's own limit holds on that lane while the same tenant's calls to another lane go
 * unlimited; dropping it frees the tenant's calls on that lane too (later grants). */
static void test_lane_qos_own_limit(void **state)
{
    (void)state;
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct backend *be[2];
    struct sched_backend_config bc = {.max_inflight = 8, .admit_timeout_ms = 20000};
    for (int i = 0; i < 2; i++) {
        struct backend *mem = fakebe_mem_new(i ? "b" : "a");
        fakebe_add(mem, "obj", QOS_BLOCK, "e1");
        assert_int_equal(sched_backend_wrap(s, mem, &bc, &be[i]), 0);
    }
    /* 5 requests a second: lane b (and lane a once the limit is dropped) does far more than
     * 5 x the limit's bound even on a loaded machine (20/s was too close: seen failing). */
    const uint64_t lim = 5ull * QOS_COST;
    struct sched_qos q = {.limit_bps = lim};
    assert_int_equal(sched_lane_qos_set(s, sched_backend_lane(s, be[0]), 3, TIER_IO_TRAINING, &q),
                     0);
    const struct tier_ioctx io = {.tenant = 3, .cls = TIER_IO_TRAINING};
    for (int phase = 0; phase < 2; phase++) {
        struct qos_reader r[4];
        pthread_t th[4];
        const uint64_t run = 1000 * TIER_NS_PER_MS;
        uint64_t t0 = tier_now_mono_ns();
        for (int i = 0; i < 4; i++) {
            r[i] = (struct qos_reader){.be = be[i / 2], .io = io, .until_ns = t0 + run};
            assert_int_equal(pthread_create(&th[i], NULL, qos_reader_main, &r[i]), 0);
        }
        for (int i = 0; i < 4; i++)
            pthread_join(th[i], NULL);
        double el = (double)(tier_now_mono_ns() - t0) / 1e9;
        for (int i = 0; i < 4; i++)
            assert_int_equal(r[i].errors, 0);
        uint64_t ca = qos_calls(r, 0, 2), cb = qos_calls(r, 1, 2);
        print_message("phase %d: lane a %llu calls, lane b %llu calls in %.3f s\n", phase,
                      (unsigned long long)ca, (unsigned long long)cb, el);
        double bound = (double)lim * (el + 0.020) + QOS_COST; /* dmclock.h's bound */
        if (phase == 0) {
            if ((double)(ca * QOS_COST) > bound)
                fail_msg("lane a: %llu calls' cost is above its own limit's %.0f bytes",
                         (unsigned long long)ca, bound);
            assert_true(ca > 0);
            /* lane b is not held by a's values: far more than a's limit allows */
            assert_true((double)(cb * QOS_COST) > 5 * bound);
            assert_int_equal(
                sched_lane_qos_set(s, sched_backend_lane(s, be[0]), 3, TIER_IO_TRAINING, NULL), 0);
        } else {
            assert_true((double)(ca * QOS_COST) > 5 * bound); /* the limit is gone */
        }
    }
    for (int i = 0; i < 2; i++)
        backend_free(be[i]);
    sched_free(s);
}

/* The fraction of the lane's slot time spent serving calls during a run of el ns whose
 * training calls went from *before to now (service time as the wrapper measures it). */
static double lane_busy(struct sched *s, struct sched_class_stats *before, uint64_t el, int slots)
{
    struct sched_stats st;
    sched_stats_get(s, &st);
    const struct sched_class_stats *now = &st.cls[TIER_IO_TRAINING];
    double busy = (double)(now->service_ns_total - before->service_ns_total);
    *before = *now;
    return busy / ((double)el * slots);
}

static void test_lane_qos_idle_share(void **state)
{
    (void)state;
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct backend *mem = fakebe_mem_new("warm"), *be = NULL;
    fakebe_add(mem, "obj", QOS_BLOCK, "e1");
    fakebe_set_latency_us(mem, FAKEBE_READ, 10000); /* the link: 2 slots of 10 ms a request */
    struct sched_backend_config bc = {.max_inflight = 2, .admit_timeout_ms = 20000};
    assert_int_equal(sched_backend_wrap(s, mem, &bc, &be), 0);
    const struct tier_ioctx io[2] = {{.tenant = 2, .cls = TIER_IO_TRAINING},
                                     {.tenant = 3, .cls = TIER_IO_TRAINING}};
    struct qos_reader r[8];
    struct sched_class_stats before = {0};
    const uint64_t run = 800 * TIER_NS_PER_MS;
    /* Rates on this shared machine vary with the load, so the test looks at the lane's slots:
     * a scheduler that kept an idle tenant's share back would never give the tenant alone both
     * of them at once. (Its busy time is printed: ~0.9 on a quiet machine; a loaded one leaves
     * slots idle in wake-up latency, 0.58 seen, so it is no test.) */
    uint64_t max2 = 0, max1 = 0;
    uint64_t el = qos_run(be, io, 2, 4, run, r, s, &max2);
    double busy2 = lane_busy(s, &before, el, 2);
    uint64_t a = qos_calls(r, 0, 4), b = qos_calls(r, 1, 4);
    double sa = (double)a / (double)(a + b);
    if (sa < 0.4 || sa > 0.6)
        fail_msg("equal weights: tenant 2 got %.2f of %llu calls", sa, (unsigned long long)(a + b));
    /* tenant 3 idle: tenant 2 alone keeps both slots busy */
    el = qos_run(be, io, 1, 4, run, r, s, &max1);
    double busy1 = lane_busy(s, &before, el, 2);
    print_message("together: tenant 2's share %.2f, lane busy %.2f; tenant 2 alone: lane busy "
                  "%.2f (%llu calls)\n",
                  sa, busy2, busy1, (unsigned long long)qos_calls(r, 0, 4));
    if (max2 != 2 || max1 != 2)
        fail_msg("the lane kept a slot idle: at most %llu of 2 in flight together, %llu with one "
                 "tenant",
                 (unsigned long long)max2, (unsigned long long)max1);
    backend_free(be);
    sched_free(s);
}

/* ---- the disk lane (the local disk's admission hook, common/diskadm.h) ------------------------
 */

static struct sched_lane *disk_lane_new(struct sched *s, int cap)
{
    struct sched_backend_config bc = {.max_inflight = cap,
                                      .admit_timeout_ms = SCHED_TIMEOUT_NONE,
                                      .breaker_failures = -1,
                                      .idle_fast = true};
    struct sched_lane *l = NULL;
    assert_int_equal(sched_lane_new(s, "disk", &bc, &l), 0);
    return l;
}

/* idle_fast grants an unlimited client without dmClock; try_enter refuses with -EAGAIN when the
 * lane is full or the client's tenant is at its limit, and a refusal leaves nothing queued. */
static void test_disk_lane_try_and_fast(void **state)
{
    (void)state;
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct sched_lane *l = disk_lane_new(s, 2);
    const struct tier_ioctx a = {.tenant = 2, .cls = TIER_IO_TRAINING},
                            b = {.tenant = 3, .cls = TIER_IO_INFERENCE},
                            c = {.tenant = 4, .cls = TIER_IO_BACKGROUND},
                            lim = {.tenant = 5, .cls = TIER_IO_BACKGROUND};
    assert_int_equal(sched_lane_enter(s, l, &a, 4096), 0);
    assert_int_equal(sched_lane_try_enter(s, l, &b, 4096), 0);
    assert_int_equal(sched_lane_try_enter(s, l, &c, 4096), -EAGAIN); /* full */
    struct sched_backend_stats st = lane_stats(s, 0);
    assert_int_equal(st.inflight_now, 2);
    assert_int_equal(st.queued_now, 0);
    assert_int_equal(st.grants_weight + st.grants_reservation, 0); /* no dmClock pass */
    sched_lane_leave(s, l, &a, 4096, 4096, 1000);
    sched_lane_leave(s, l, &b, 4096, 4096, 1000);
    assert_int_equal(sched_lane_try_enter(s, l, &c, 4096), 0); /* room again */
    sched_lane_leave(s, l, &c, 4096, 4096, 1000);

    /* a limited tenant goes through dmClock; at its limit a try is refused */
    assert_int_equal(sched_tenant_limit_set(s, 5, 1u << 20), 0);
    assert_int_equal(sched_lane_try_enter(s, l, &lim, 1u << 20), 0);
    sched_lane_leave(s, l, &lim, 1u << 20, 1u << 20, 1000);
    st = lane_stats(s, 0);
    assert_int_equal(st.grants_weight + st.grants_reservation, 1);
    assert_int_equal(sched_lane_try_enter(s, l, &lim, 1u << 20), -EAGAIN); /* ~1 s ahead */
    st = lane_stats(s, 0);
    assert_int_equal(st.queued_now, 0);
    assert_int_equal(st.inflight_now, 0);
    assert_int_equal(st.limit_waits, 0); /* the refusal armed no timer */
    assert_int_equal(st.admitted, 4);
    assert_int_equal(st.completed, 4);
    /* another tenant is not held back by it */
    assert_int_equal(sched_lane_try_enter(s, l, &a, 1u << 20), 0);
    sched_lane_leave(s, l, &a, 1u << 20, 1u << 20, 1000);
    sched_free(s);
}

struct limit_waiter {
    struct sched *s;
    struct sched_lane *l;
    struct tier_ioctx io;
    atomic_int granted;
};

static void *limit_waiter_main(void *arg)
{
    struct limit_waiter *w = arg;
    if (sched_lane_enter(w->s, w->l, &w->io, 1u << 20) == 0) {
        atomic_store(&w->granted, 1);
        sched_lane_leave(w->s, w->l, &w->io, 1u << 20, 1u << 20, 1000);
    }
    return NULL;
}

/* Second review of issue 11: (1) a waiter held at its tenant's limit does not make a try of
 * another tenant fail while slots are free (every write-through was skipped while one tenant
 * was throttled); (2) lifting the limit frees the waiter now, not at the L tag computed at the
 * old rate (~10 s here). */
static void test_disk_lane_limit_waiter(void **state)
{
    (void)state;
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct sched_lane *l = disk_lane_new(s, 4);
    const struct tier_ioctx other = {.tenant = 2, .cls = TIER_IO_TRAINING};
    struct limit_waiter w = {.s = s, .l = l, .io = {.tenant = 5, .cls = TIER_IO_BACKGROUND}};
    atomic_init(&w.granted, 0);
    assert_int_equal(sched_tenant_limit_set(s, 5, 100u << 10), 0); /* 100 KiB/s */
    assert_int_equal(sched_lane_enter(s, l, &w.io, 1u << 20), 0);  /* 1 MiB: ~10 s of limit */
    sched_lane_leave(s, l, &w.io, 1u << 20, 1u << 20, 1000);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, limit_waiter_main, &w), 0);
    uint64_t deadline = tier_now_mono_ns() + DEADLINE_NS;
    while (lane_stats(s, 0).queued_now != 1) {
        assert_true(tier_now_mono_ns() < deadline);
        sched_yield();
    }
    assert_int_equal(sched_lane_try_enter(s, l, &other, 4096), 0); /* (1) */
    sched_lane_leave(s, l, &other, 4096, 4096, 1000);
    assert_int_equal(atomic_load(&w.granted), 0);
    uint64_t t0 = tier_now_mono_ns();
    assert_int_equal(sched_tenant_limit_set(s, 5, 0), 0); /* (2) lifted */
    pthread_join(th, NULL);
    uint64_t ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    assert_int_equal(atomic_load(&w.granted), 1);
    if (ms > 3000)
        fail_msg("the lifted limit freed its waiter after %llu ms (its old L tag: ~10 s)",
                 (unsigned long long)ms);
    sched_free(s);
}

#define DISK_BS (64u << 10)
#define DISK_NBLK 16
#define DISK_OP_COST 4096u

struct disk_reader {
    struct cache *c;
    struct cache_obj obj;
    struct tier_ioctx io;
    uint64_t until_ns, reads;
    int errors;
};

static void *disk_reader_main(void *arg)
{
    struct disk_reader *r = arg;
    char *buf = malloc(DISK_BS);
    assert_non_null(buf);
    unsigned seed = (unsigned)r->io.tenant;
    while (tier_now_mono_ns() < r->until_ns) {
        uint64_t blk = (uint64_t)rand_r(&seed) % DISK_NBLK;
        enum cache_served got;
        ssize_t n = cache_read_served(r->c, &r->io, &r->obj, blk * DISK_BS, buf, DISK_BS, &got);
        if (n != (ssize_t)DISK_BS || got != CACHE_SERVED_DISK)
            r->errors++;
        else
            r->reads++;
    }
    free(buf);
    return NULL;
}

/* A disk limit on one tenant holds over the run, as dmclock.h bounds it (limit x (elapsed +
 * 20 ms) + one request), for disk hits of a real RAM-less cache admitted through the lane's
 * hook, while another tenant's disk hits proceed without waiting for it. */
static void test_disk_lane_limit_holds(void **state)
{
    (void)state;
    struct sched *s = NULL;
    struct sched_config sc = {.op_cost_bytes = DISK_OP_COST};
    assert_int_equal(sched_new(&sc, &s), 0);
    struct sched_lane *l = disk_lane_new(s, 64);
    struct tier_disk_adm adm;
    sched_lane_disk_adm(l, &adm);
    char *dir = tu_mkdtemp("sched-disk");
    struct backend *mem = fakebe_mem_new("warm");
    fakebe_add(mem, "d", (uint64_t)DISK_NBLK * DISK_BS, "e1");
    struct cache_config cc = {.block_size = DISK_BS,
                              .disk_dir = dir,
                              .disk_bytes = 4ull * DISK_NBLK * DISK_BS,
                              .disk_adm = &adm};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cc, &c), 0);
    const struct cache_obj obj = {
        .be = mem, .key = "d", .etag = "e1", .size_bytes = (uint64_t)DISK_NBLK * DISK_BS};
    for (uint64_t i = 0; i < DISK_NBLK; i++) /* warm: written through the lane */
        assert_int_equal(cache_fetch_block(c, &(struct tier_ioctx){0}, &obj, i, false), 0);
    struct cache_stats cst;
    cache_stats_get(c, &cst);
    assert_int_equal(cst.disk.blocks, DISK_NBLK);
    assert_int_equal(cst.disk_store_skipped, 0);

    const uint64_t limit = 2u << 20, cost = DISK_BS + DISK_OP_COST;
    assert_int_equal(sched_tenant_limit_set(s, 5, limit), 0);
    struct sched_stats before;
    sched_stats_get(s, &before);
    struct disk_reader r[4];
    pthread_t th[4];
    uint64_t t0 = tier_now_mono_ns();
    for (int i = 0; i < 4; i++) {
        r[i] = (struct disk_reader){
            .c = c,
            .obj = obj,
            .io = {.tenant = i < 2 ? 5 : 6, .cls = i < 2 ? TIER_IO_TRAINING : TIER_IO_INFERENCE},
            .until_ns = t0 + 1000 * TIER_NS_PER_MS};
        assert_int_equal(pthread_create(&th[i], NULL, disk_reader_main, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    double el = (double)(tier_now_mono_ns() - t0) / 1e9;
    for (int i = 0; i < 4; i++)
        assert_int_equal(r[i].errors, 0);
    uint64_t n5 = r[0].reads + r[1].reads, n6 = r[2].reads + r[3].reads;
    double bound = (double)limit * (el + 0.020) + (double)cost;
    print_message("disk lane: tenant 5 (limit %.1f MiB/s): %llu hits, %.2f MiB/s of cost; "
                  "tenant 6: %llu hits in %.3f s\n",
                  (double)limit / 1048576.0, (unsigned long long)n5,
                  (double)(n5 * cost) / el / 1048576.0, (unsigned long long)n6, el);
    if ((double)(n5 * cost) > bound)
        fail_msg("tenant 5: %llu bytes of cost in %.3f s, its limit allows %.0f",
                 (unsigned long long)(n5 * cost), el, bound);
    if ((double)(n5 * cost) < 0.5 * (double)limit) /* and the limit is delivered */
        fail_msg("tenant 5 got %llu bytes of cost in %.3f s under a %llu/s limit",
                 (unsigned long long)(n5 * cost), el, (unsigned long long)limit);
    assert_true(n6 > 4 * n5);
    /* tenant 6 (inference) never waited on tenant 5's limit: its mean wait stays tiny */
    struct sched_stats after;
    sched_stats_get(s, &after);
    const struct sched_class_stats *a = &after.cls[TIER_IO_INFERENCE],
                                   *b = &before.cls[TIER_IO_INFERENCE];
    uint64_t adm6 = a->admitted - b->admitted;
    assert_int_equal(adm6, n6);
    double wait6 = (double)(a->wait_ns_total - b->wait_ns_total) / (double)adm6;
    print_message("tenant 6: mean admission wait %.1f us\n", wait6 / 1000.0);
    assert_true(wait6 < 2e6);
    struct sched_backend_stats st = lane_stats(s, 0);
    assert_true(st.limit_waits > 0);
    assert_int_equal(st.inflight_now, 0);
    assert_int_equal(st.queued_now, 0);
    cache_close(c);
    backend_free(mem);
    tu_rmtree(dir);
    free(dir);
    sched_free(s);
}

/* ---- QoS off: backend lanes in strict class priority ------------------------------------ */

#define NMODE 12

struct mode_rec {
    struct sched *s;
    struct sched_lane *l;
    pthread_mutex_t mu;
    int order[NMODE]; /* the class of each grant, in grant order */
    int n;
};

struct mode_waiter {
    struct mode_rec *rec;
    struct tier_ioctx io;
    int rc;
};

static void *mode_main(void *arg)
{
    struct mode_waiter *w = arg;
    w->rc = sched_lane_enter(w->rec->s, w->rec->l, &w->io, 1000);
    if (w->rc)
        return NULL;
    pthread_mutex_lock(&w->rec->mu);
    w->rec->order[w->rec->n++] = (int)w->io.cls;
    pthread_mutex_unlock(&w->rec->mu);
    /* one slot: leaving grants the next, so the recorded order is the grant order */
    sched_lane_leave(w->rec->s, w->rec->l, &w->io, 1000, 1000, 1000);
    return NULL;
}

/* Six training calls queue on a one-slot backend lane, then six inference calls; inference and
 * training have the same weight. QoS off ([daemon] qos = off): every inference call goes first,
 * by class, whatever the weights. QoS on: dmClock splits the grants by weight, 1:1, so they
 * alternate (equal tags: the lower class first). */
static void run_mode(bool qos_off, int out[NMODE], struct sched_backend_stats *bs)
{
    struct sched_config sc = {.qos_off = qos_off};
    sc.cls[TIER_IO_INFERENCE].weight = 1;
    sc.cls[TIER_IO_TRAINING].weight = 1;
    struct sched_backend_config bc = {
        .max_inflight = 1, .admit_timeout_ms = 20000, .breaker_failures = -1};
    struct mode_rec rec = {.n = 0};
    struct mode_waiter w[NMODE];
    pthread_t th[NMODE];
    assert_int_equal(sched_new(&sc, &rec.s), 0);
    assert_int_equal(sched_lane_new(rec.s, "be", &bc, &rec.l), 0);
    assert_int_equal(sched_qos_enabled(rec.s), !qos_off);
    pthread_mutex_init(&rec.mu, NULL);
    struct tier_ioctx blocker = {.tenant = 0, .cls = TIER_IO_BACKGROUND};
    assert_int_equal(sched_lane_enter(rec.s, rec.l, &blocker, 1), 0);
    for (int i = 0; i < NMODE; i++) {
        w[i].rec = &rec;
        w[i].io.cls = i < NMODE / 2 ? TIER_IO_TRAINING : TIER_IO_INFERENCE;
        w[i].io.tenant = w[i].io.cls == TIER_IO_TRAINING ? 1 : 2; /* one dmClock client each */
        assert_int_equal(pthread_create(&th[i], NULL, mode_main, &w[i]), 0);
        wait_queued(rec.s, (uint64_t)i + 1);
    }
    sched_lane_leave(rec.s, rec.l, &blocker, 1, 1, 10);
    for (int i = 0; i < NMODE; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].rc, 0);
    }
    assert_int_equal(rec.n, NMODE);
    memcpy(out, rec.order, sizeof(rec.order));
    *bs = lane_stats(rec.s, 0);
    pthread_mutex_destroy(&rec.mu);
    sched_free(rec.s);
}

static void test_lane_qos_off_strict(void **state)
{
    (void)state;
    int order[NMODE];
    struct sched_backend_stats bs;
    run_mode(true, order, &bs);
    for (int i = 0; i < NMODE; i++)
        assert_int_equal(order[i], i < NMODE / 2 ? TIER_IO_INFERENCE : TIER_IO_TRAINING);
    assert_int_equal(bs.grants_weight + bs.grants_reservation, 0); /* no dmClock */
    assert_int_equal(bs.completed, NMODE + 1);

    run_mode(false, order, &bs);
    for (int i = 0; i < NMODE; i++)
        assert_int_equal(order[i], i % 2 == 0 ? TIER_IO_INFERENCE : TIER_IO_TRAINING);
    assert_int_equal(bs.grants_weight, NMODE + 1); /* the blocker too */
}

struct dir_call {
    struct sched *s;
    struct sched_lane *l;
    struct tier_ioctx io;
    enum sched_dir dir;
    int rc;
};

static void *dir_enter_main(void *arg)
{
    struct dir_call *a = arg;
    a->rc = sched_lane_enter_dir(a->s, a->l, &a->io, 1000, a->dir);
    if (a->rc == 0)
        sched_lane_leave_dir(a->s, a->l, &a->io, 1000, 1000, 1, a->dir);
    return NULL;
}

/* Inference first on the link (yield_inflight 1): while an inference call is in flight, one
 * training read and one training upload go at once (one per direction), a second training read
 * waits with slots free, a later inference read passes it, and the first training read's leave
 * lets it go. With yield off, or QoS off, the second read goes at once. The hold is an hour, so
 * nothing here depends on time: only counts. */
static void run_yield(bool qos_off, int yield_inflight)
{
    struct sched_config sc = {.qos_off = qos_off};
    struct sched_backend_config bc = {.max_inflight = 4,
                                      .admit_timeout_ms = 20000,
                                      .breaker_failures = -1,
                                      .yield_inflight = yield_inflight,
                                      .yield_hold_ms = 3600000};
    struct sched *s = NULL;
    struct sched_lane *l = NULL;
    assert_int_equal(sched_new(&sc, &s), 0);
    assert_int_equal(sched_lane_new(s, "be", &bc, &l), 0);
    bool yields = !qos_off && yield_inflight >= 0;
    struct tier_ioctx inf = {.tenant = 1, .cls = TIER_IO_INFERENCE};
    struct tier_ioctx trn = {.tenant = 2, .cls = TIER_IO_TRAINING};
    struct tier_ioctx ckp = {.tenant = 3, .cls = TIER_IO_CHECKPOINT};
    assert_int_equal(sched_lane_enter_dir(s, l, &inf, 1000, SCHED_DIR_DOWN), 0);
    assert_int_equal(sched_lane_enter_dir(s, l, &trn, 1000, SCHED_DIR_DOWN), 0);
    assert_int_equal(sched_lane_enter_dir(s, l, &ckp, 1000, SCHED_DIR_UP), 0);
    /* a stat moves little: never held back */
    assert_int_equal(sched_lane_enter_dir(s, l, &trn, 0, SCHED_DIR_NONE), 0);
    sched_lane_leave_dir(s, l, &trn, 0, 0, 1, SCHED_DIR_NONE);

    struct dir_call a = {.s = s, .l = l, .io = trn, .dir = SCHED_DIR_DOWN, .rc = 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, dir_enter_main, &a), 0);
    if (!yields) {
        pthread_join(th, NULL); /* granted at once and done */
        assert_int_equal(a.rc, 0);
        assert_int_equal(lane_stats(s, 0).yield_waits, 0);
    } else {
        wait_queued(s, 1); /* with a slot free */
        struct sched_backend_stats b = lane_stats(s, 0);
        assert_int_equal(b.inflight_now, 3);
        assert_true(b.yield_waits >= 1);
        /* inference is not held back: it passes the waiting training read */
        assert_int_equal(sched_lane_enter_dir(s, l, &inf, 1000, SCHED_DIR_DOWN), 0);
        assert_int_equal(lane_stats(s, 0).queued_now, 1);
        sched_lane_leave_dir(s, l, &inf, 1000, 1000, 1, SCHED_DIR_DOWN);
        /* the other direction's call leaving does not free a read */
        sched_lane_leave_dir(s, l, &ckp, 1000, 1000, 1, SCHED_DIR_UP);
        assert_int_equal(lane_stats(s, 0).queued_now, 1);
        assert_int_equal(a.rc, 1);
    }
    sched_lane_leave_dir(s, l, &trn, 1000, 1000, 1, SCHED_DIR_DOWN); /* the first read */
    if (yields) {
        pthread_join(th, NULL); /* its leave granted the waiting read */
        assert_int_equal(a.rc, 0);
    } else {
        sched_lane_leave_dir(s, l, &ckp, 1000, 1000, 1, SCHED_DIR_UP);
    }
    sched_lane_leave_dir(s, l, &inf, 1000, 1000, 1, SCHED_DIR_DOWN);
    struct sched_backend_stats b = lane_stats(s, 0);
    assert_int_equal(b.inflight_now, 0);
    assert_int_equal(b.queued_now, 0);
    assert_int_equal(b.completed, b.admitted);
    sched_free(s);
}

static void test_lane_yield_inflight(void **state)
{
    (void)state;
    run_yield(false, 0); /* the default: 1 */
    run_yield(false, 1);
    run_yield(false, -1); /* off */
    run_yield(true, 1);   /* QoS off: no yield */
}

/* One read of obj through the wrapper be as io, checked byte for byte against the fake's
 * content; returns how many reads of the fake backend it took. */
static uint64_t split_read(struct backend *mem, struct backend *be, const struct tier_ioctx *io,
                           uint64_t off, size_t len, ssize_t want_n)
{
    static char buf[256 << 10], want[256 << 10];
    assert_true(len <= sizeof(buf));
    uint64_t c0 = fakebe_calls(mem, FAKEBE_READ);
    struct backend_stat st;
    memset(buf, 0x5a, len);
    ssize_t n = backend_read(be, io, "obj", off, buf, len, NULL, &st);
    assert_int_equal(n, want_n);
    if (n > 0) {
        fakebe_expected("obj", "e1", off, want, (size_t)n);
        assert_memory_equal(buf, want, (size_t)n);
        assert_string_equal(st.etag, "e1");
        assert_int_equal(st.size_bytes, (256 << 10) + 1000);
    }
    return fakebe_calls(mem, FAKEBE_READ) - c0;
}

/* Reads in parts (split_bytes): without inference demand a training read of 256 KiB is one
 * backend read; while an inference call is in flight it is four ranged reads of 64 KiB, the same
 * bytes and stat, counted once in split_reads and charged by dmClock what the whole read costs
 * (its bytes plus one op cost); a read at the end of the object stops at its short part;
 * inference's own reads and reads no larger than a part go whole; a failed part fails the read
 * and no later part is sent. With split_bytes auto the part size follows link_capacity; with
 * SCHED_SPLIT_OFF, or QoS off, nothing splits. By counts only: the hold is an hour. */
static void test_lane_split_reads(void **state)
{
    (void)state;
    struct backend *mem = fakebe_mem_new("rgw");
    fakebe_add(mem, "obj", (256 << 10) + 1000, "e1");
    struct sched *s = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct sched_backend_config bc = {.max_inflight = 4,
                                      .admit_timeout_ms = 20000,
                                      .breaker_failures = -1,
                                      .yield_hold_ms = 3600000,
                                      .split_bytes = 64 << 10};
    struct backend *be = NULL;
    assert_int_equal(sched_backend_wrap(s, mem, &bc, &be), 0);
    struct sched_lane *l = sched_backend_lane(s, be);
    assert_non_null(l);
    struct tier_ioctx inf = {.tenant = 1, .cls = TIER_IO_INFERENCE};
    struct tier_ioctx trn = {.tenant = 2, .cls = TIER_IO_TRAINING};
    assert_int_equal(lane_stats(s, 0).split_bytes, 64 << 10);

    /* no inference demand: whole */
    assert_int_equal(split_read(mem, be, &trn, 0, 256 << 10, 256 << 10), 1);
    assert_int_equal(lane_stats(s, 0).split_reads, 0);
    assert_int_equal(sched_lane_read_part(s, l, &trn, 256 << 10), 256 << 10);

    /* an inference call in flight: in parts */
    assert_int_equal(sched_lane_enter_dir(s, l, &inf, 1000, SCHED_DIR_DOWN), 0);
    assert_int_equal(sched_lane_read_part(s, l, &trn, 256 << 10), 64 << 10);
    assert_int_equal(sched_lane_read_part(s, l, &inf, 256 << 10), 256 << 10);
    assert_int_equal(sched_lane_read_part(s, l, &trn, 64 << 10), 64 << 10);
    uint64_t rs0 = lane_stats(s, 0).split_reads; /* the three calls above counted one */
    assert_int_equal(rs0, 1);
    struct sched_client_stats c0, c1;
    sched_lane_client_stats_get(s, l, 2, TIER_IO_TRAINING, &c0);
    assert_int_equal(split_read(mem, be, &trn, 0, 256 << 10, 256 << 10), 4);
    sched_lane_client_stats_get(s, l, 2, TIER_IO_TRAINING, &c1);
    assert_int_equal(c1.grants - c0.grants, 4);
    assert_int_equal(c1.granted_bytes - c0.granted_bytes, 256 << 10);
    assert_int_equal(c1.granted_cost - c0.granted_cost, (256 << 10) + sched_op_cost(s));
    assert_int_equal(lane_stats(s, 0).split_reads, rs0 + 1);
    /* the end of the object: 128 KiB and 1000 bytes are left, the third part is short */
    assert_int_equal(split_read(mem, be, &trn, 128 << 10, 256 << 10, (128 << 10) + 1000), 3);
    /* inference reads whole; so does a read no larger than a part */
    assert_int_equal(split_read(mem, be, &inf, 0, 256 << 10, 256 << 10), 1);
    assert_int_equal(split_read(mem, be, &trn, 0, 64 << 10, 64 << 10), 1);
    /* the second part fails: so does the read, and the rest is not sent */
    struct fakebe_fault f = {.err = -EIO, .count = 1, .skip = 1};
    fakebe_fail(mem, FAKEBE_READ, &f);
    assert_int_equal(split_read(mem, be, &trn, 0, 256 << 10, -EIO), 2);
    fakebe_fail(mem, FAKEBE_READ, NULL);
    sched_lane_leave_dir(s, l, &inf, 1000, 1000, 1, SCHED_DIR_DOWN);
    struct sched_backend_stats b = lane_stats(s, 0);
    assert_int_equal(b.inflight_now, 0);
    assert_int_equal(b.completed, b.admitted);
    backend_free(be);
    sched_free(s);

    /* auto: 2 ms of a 100 MB/s link, 200 KB, rounded up to 256 KiB; no link_capacity: none */
    struct sched_lane *la = NULL, *ln = NULL, *lo = NULL;
    assert_int_equal(sched_new(NULL, &s), 0);
    struct sched_backend_config auto_bc = {.link_capacity_bps = 100000000};
    assert_int_equal(sched_lane_new(s, "auto", &auto_bc, &la), 0);
    assert_int_equal(sched_lane_new(s, "unknown", NULL, &ln), 0);
    struct sched_backend_config off_bc = {.split_bytes = SCHED_SPLIT_OFF};
    assert_int_equal(sched_lane_new(s, "off", &off_bc, &lo), 0);
    assert_int_equal(lane_stats(s, 0).split_bytes, 256 << 10);
    assert_int_equal(lane_stats(s, 1).split_bytes, 0);
    assert_int_equal(lane_stats(s, 2).split_bytes, 0);
    assert_int_equal(sched_lane_enter_dir(s, lo, &inf, 1000, SCHED_DIR_DOWN), 0);
    assert_int_equal(sched_lane_read_part(s, lo, &trn, 4 << 20), 4 << 20);
    sched_lane_leave_dir(s, lo, &inf, 1000, 1000, 1, SCHED_DIR_DOWN);
    sched_free(s);
    /* QoS off: no split size, even one configured */
    struct sched_config off = {.qos_off = true};
    assert_int_equal(sched_new(&off, &s), 0);
    struct sched_backend_config set_bc = {.split_bytes = 64 << 10};
    assert_int_equal(sched_lane_new(s, "be", &set_bc, &la), 0);
    assert_int_equal(lane_stats(s, 0).split_bytes, 0);
    assert_int_equal(sched_lane_enter_dir(s, la, &inf, 1000, SCHED_DIR_DOWN), 0);
    assert_int_equal(sched_lane_read_part(s, la, &trn, 256 << 10), 256 << 10);
    sched_lane_leave_dir(s, la, &inf, 1000, 1000, 1, SCHED_DIR_DOWN);
    sched_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lane_admission_deadline),
        cmocka_unit_test(test_breaker_transitions),
        cmocka_unit_test(test_breaker_full_lane_timeouts),
        cmocka_unit_test(test_breaker_stuck_probe),
        cmocka_unit_test(test_breaker_eio_is_an_answer),
        cmocka_unit_test(test_blackhole_s3_breaker),
        cmocka_unit_test(test_breaker_stops_retries),
        cmocka_unit_test(test_posix_latency_while_s3_hangs),
        cmocka_unit_test(test_priority_then_fifo),
        cmocka_unit_test(test_starvation_bound),
        cmocka_unit_test(test_bound_and_counters),
        cmocka_unit_test(test_below_bound_and_defaults),
        cmocka_unit_test(test_lane_qos_params),
        cmocka_unit_test(test_lane_qos_limits),
        cmocka_unit_test(test_lane_qos_own_params),
        cmocka_unit_test(test_lane_qos_own_limit),
        cmocka_unit_test(test_lane_qos_idle_share),
        cmocka_unit_test(test_disk_lane_try_and_fast),
        cmocka_unit_test(test_disk_lane_limit_waiter),
        cmocka_unit_test(test_disk_lane_limit_holds),
        cmocka_unit_test(test_lane_qos_off_strict),
        cmocka_unit_test(test_lane_yield_inflight),
        cmocka_unit_test(test_lane_split_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
