/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched.c - the QoS scheduling point (sched.h): admission of backend requests in lanes, each
 * with a bound on requests in flight, strict class priority and FIFO order within a class, an
 * optional admission deadline and an optional circuit breaker.
 *
 * Callers: the backend wrappers (sched_backend.c) for every backend call, the cache's fetch hook
 * (sched_cache.c), and the write-back uploader through sched_admit(). Admission may block the
 * calling thread; nothing here does I/O.
 *
 * DESIGN. Every mutable field of struct sched and of its lanes is guarded by sched.mu. A lane
 * keeps one FIFO list of waiters per class; each waiter sleeps on its own condition variable
 * (CLOCK_MONOTONIC, for the deadline). Grants are handed over, not raced for: whoever frees a
 * slot or queues behind a free slot calls grant(), which moves heads of the queue that goes next
 * into flight while slots are free, marks them granted and signals each. So a waiter never has to
 * win a wake-up race, and a waiter whose deadline passes simply unlinks itself: no ticket
 * numbers that a departed waiter would leave as a hole.
 *
 * Next class: the highest class with waiters, except that a class passed over starve_limit times
 * (passed[c] counts grants to higher classes while c had waiters) goes first, and its counter
 * restarts. Strict priority alone could starve a lower class for ever, and a streaming reader
 * waiting on a block a background stage worker is fetching would starve with it.
 *
 * Invariants (under mu): waiters exist in a lane only while inflight == cap (grant() is eager);
 * inflight <= cap; queued[c] is the length of class c's list; per class, summed over lanes,
 * admitted - completed == inflight_now.
 *
 * The breaker's state machine is in sched.h with the function performing each transition:
 * breaker_open() is the only way into OPEN (it also refuses every queued waiter of the lane),
 * reached through note_failure() for a failed call or an unanswered attempt the backend reports
 * (sched_lane_attempt_failed); lane_admit() makes the probe (OPEN -> HALF_OPEN); note_answer()
 * closes on any answer.
 */
#include "qos/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "telemetry/telemetry.h"

#define DEFAULT_MAX_INFLIGHT 32 /* the scheduler's historical global bound */
#define DEFAULT_STARVE_LIMIT 64
#define DEFAULT_ADMIT_TIMEOUT_MS 10000 /* [daemon] backend_timeout's default */
#define DEFAULT_BREAKER_FAILURES 5
#define DEFAULT_BREAKER_COOLDOWN_MS 5000

struct waiter {
    struct waiter *prev, *next;
    pthread_cond_t cv;
    int cls;
    uint64_t t0_ns;
    bool granted; /* set by grant(): the waiter is in flight */
    bool refused; /* set by breaker_open(): fail at once */
};

struct sched_lane {
    struct sched_lane *next_lane; /* creation order; immutable once linked */
    /* Immutable after sched_lane_new. */
    char name[64];
    int cap;
    uint64_t admit_timeout_ns; /* 0: wait without a deadline */
    int breaker_failures;      /* <= 0: no breaker */
    uint64_t cooldown_ns;
    /* Under sched.mu. */
    int inflight;
    struct waiter *qhead[TIER_IO_NCLASSES], *qtail[TIER_IO_NCLASSES];
    uint64_t queued[TIER_IO_NCLASSES];
    uint64_t passed[TIER_IO_NCLASSES];
    enum sched_breaker_state br;
    uint64_t open_until_ns;
    bool probe_out;             /* HALF_OPEN: the probe is queued or in flight */
    uint64_t probe_deadline_ns; /* ... and when it counts as failed if it has not returned */
    uint64_t admitted, completed, failures, admit_timeouts, consecutive, opens, fast_fails;
};

struct sched {
    uint64_t starve_limit; /* immutable after sched_new */
    pthread_condattr_t cattr;

    pthread_mutex_t mu;
    struct sched_lane def; /* sched_admit's lane */
    struct sched_lane *lanes, *lanes_tail;
    size_t nlanes;
    struct sched_class_stats st[TIER_IO_NCLASSES];
    struct telemetry *tele; /* set before the first call (sched_set_telemetry); NULL: none */
};

static _Thread_local struct tier_ioctx t_io;
static _Thread_local bool t_io_set;
/* Whether the backend reported an attempt (sched_lane_attempt_failed) during this thread's
 * current lane call: its final failure was then accounted already and is not counted again. */
static _Thread_local bool t_attempt_reported;
/* The admission wait of this thread's current lane call (sched_lane_enter), for telemetry. */
static _Thread_local uint64_t t_lane_waited_ns;

void sched_thread_io_set(const struct tier_ioctx *io)
{
    t_io_set = io != NULL;
    if (io)
        t_io = *io;
}

const struct tier_ioctx *sched_thread_io(void)
{
    return t_io_set ? &t_io : NULL;
}

const char *sched_breaker_state_name(enum sched_breaker_state st)
{
    switch (st) {
    case SCHED_BREAKER_CLOSED:
        return "closed";
    case SCHED_BREAKER_OPEN:
        return "open";
    case SCHED_BREAKER_HALF_OPEN:
        return "half-open";
    }
    return "unknown";
}

static int class_of(const struct tier_ioctx *io)
{
    if (!io)
        io = sched_thread_io();
    if (!io)
        return TIER_IO_TRAINING;
    if ((unsigned)io->cls >= TIER_IO_NCLASSES)
        return TIER_IO_BACKGROUND; /* unknown classes get the lowest priority, not a crash */
    return (int)io->cls;
}

static void lane_init(struct sched_lane *l, const char *name, int cap, uint64_t admit_timeout_ms,
                      int breaker_failures, uint64_t cooldown_ms)
{
    memset(l, 0, sizeof(*l));
    tier_strlcpy(l->name, name, sizeof(l->name));
    l->cap = cap;
    l->admit_timeout_ns = admit_timeout_ms * TIER_NS_PER_MS;
    l->breaker_failures = breaker_failures;
    l->cooldown_ns = cooldown_ms * TIER_NS_PER_MS;
}

int sched_new(const struct sched_config *cfg, struct sched **out)
{
    struct sched *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->starve_limit =
        cfg && cfg->starve_limit > 0 ? (uint64_t)cfg->starve_limit : DEFAULT_STARVE_LIMIT;
    lane_init(&s->def, "default",
              cfg && cfg->max_inflight > 0 ? cfg->max_inflight : DEFAULT_MAX_INFLIGHT, 0, 0, 0);
    if (pthread_condattr_init(&s->cattr) != 0)
        goto fail_attr;
    if (pthread_condattr_setclock(&s->cattr, CLOCK_MONOTONIC) != 0)
        goto fail_mutex;
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        goto fail_mutex;
    *out = s;
    return 0;

fail_mutex:
    pthread_condattr_destroy(&s->cattr);
fail_attr:
    free(s);
    return -ENOMEM;
}

void sched_free(struct sched *s)
{
    if (!s)
        return;
    struct sched_lane *l = s->lanes;
    while (l) {
        struct sched_lane *n = l->next_lane;
        free(l);
        l = n;
    }
    pthread_mutex_destroy(&s->mu);
    pthread_condattr_destroy(&s->cattr);
    free(s);
}

int sched_lane_new(struct sched *s, const char *name, const struct sched_backend_config *cfg,
                   struct sched_lane **out)
{
    struct sched_lane *l = malloc(sizeof(*l));
    if (!l)
        return -ENOMEM;
    lane_init(l, name ? name : "backend",
              cfg && cfg->max_inflight > 0 ? cfg->max_inflight : DEFAULT_MAX_INFLIGHT,
              cfg && cfg->admit_timeout_ms ? cfg->admit_timeout_ms : DEFAULT_ADMIT_TIMEOUT_MS,
              cfg && cfg->breaker_failures ? cfg->breaker_failures : DEFAULT_BREAKER_FAILURES,
              cfg && cfg->breaker_cooldown_ms ? cfg->breaker_cooldown_ms
                                              : DEFAULT_BREAKER_COOLDOWN_MS);
    pthread_mutex_lock(&s->mu);
    if (s->lanes_tail)
        s->lanes_tail->next_lane = l;
    else
        s->lanes = l;
    s->lanes_tail = l;
    s->nlanes++;
    pthread_mutex_unlock(&s->mu);
    *out = l;
    return 0;
}

/* ---- queue ---------------------------------------------------------------------------------- */

/* Under mu: the class whose head goes next, or -1 if nobody waits. */
static int next_class(const struct sched *s, const struct sched_lane *l)
{
    int first = -1;
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        if (!l->queued[c])
            continue;
        if (l->passed[c] >= s->starve_limit)
            return c;
        if (first < 0)
            first = c;
    }
    return first;
}

static void unlink_waiter(struct sched *s, struct sched_lane *l, struct waiter *w)
{
    int c = w->cls;
    if (w->prev)
        w->prev->next = w->next;
    else
        l->qhead[c] = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        l->qtail[c] = w->prev;
    w->prev = w->next = NULL;
    l->queued[c]--;
    s->st[c].queued_now--;
    if (!l->queued[c])
        l->passed[c] = 0;
}

/* Under mu: account one admission of class c that waited waited_ns. */
static void account_admit(struct sched *s, struct sched_lane *l, int c, uint64_t waited_ns)
{
    l->inflight++;
    l->admitted++;
    s->st[c].inflight_now++;
    s->st[c].admitted++;
    s->st[c].wait_ns_total += waited_ns;
}

/* Under mu: hand free slots to the waiters that go next. */
static void grant(struct sched *s, struct sched_lane *l)
{
    while (l->inflight < l->cap) {
        int c = next_class(s, l);
        if (c < 0)
            return;
        struct waiter *w = l->qhead[c];
        unlink_waiter(s, l, w);
        l->passed[c] = 0;
        for (int k = c + 1; k < TIER_IO_NCLASSES; k++) {
            if (l->queued[k])
                l->passed[k]++;
        }
        uint64_t now = tier_now_mono_ns();
        /* the waiting time must be counted even when it rounds to nothing */
        account_admit(s, l, c, now > w->t0_ns ? now - w->t0_ns : 1);
        w->granted = true;
        pthread_cond_signal(&w->cv);
    }
}

/* ---- breaker -------------------------------------------------------------------------------- */

static bool is_failure(long result)
{
    switch (-result) {
    case ETIMEDOUT:
    case EIO:
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENETUNREACH:
        return true;
    default:
        return false;
    }
}

/* Under mu: CLOSED/HALF_OPEN -> OPEN; every queued call of the lane is refused at once. */
static void breaker_open(struct sched *s, struct sched_lane *l, uint64_t now)
{
    l->br = SCHED_BREAKER_OPEN;
    l->open_until_ns = now + l->cooldown_ns;
    l->probe_out = false;
    l->opens++;
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        while (l->qhead[c]) {
            struct waiter *w = l->qhead[c];
            unlink_waiter(s, l, w);
            w->refused = true;
            l->fast_fails++;
            pthread_cond_signal(&w->cv);
        }
    }
}

/* Under mu: a failure moves the breaker towards OPEN. */
static void note_failure(struct sched *s, struct sched_lane *l)
{
    l->failures++;
    l->consecutive++;
    if (l->br == SCHED_BREAKER_HALF_OPEN ||
        (l->br == SCHED_BREAKER_CLOSED && l->consecutive >= (uint64_t)l->breaker_failures))
        breaker_open(s, l, tier_now_mono_ns());
}

/* Under mu: the backend answered: whatever the state, it is reachable again. */
static void note_answer(struct sched_lane *l)
{
    l->consecutive = 0;
    l->br = SCHED_BREAKER_CLOSED;
    l->probe_out = false;
}

/* Under mu: a completed call's result moves the breaker; reported: its attempts were accounted
 * one by one already, so a failure is not counted again. */
static void note_result(struct sched *s, struct sched_lane *l, long result, bool reported)
{
    if (l->breaker_failures <= 0)
        return;
    if (!is_failure(result))
        note_answer(l);
    else if (!reported)
        note_failure(s, l);
}

bool sched_lane_attempt_failed(struct sched *s, struct sched_lane *l, long err, bool answered)
{
    if (l->breaker_failures <= 0)
        return true;
    pthread_mutex_lock(&s->mu);
    t_attempt_reported = true;
    if (answered || !is_failure(err))
        note_answer(l);
    else
        note_failure(s, l);
    bool retry = l->br != SCHED_BREAKER_OPEN;
    pthread_mutex_unlock(&s->mu);
    return retry;
}

static int fast_fail(const struct sched_lane *l, uint64_t consecutive, uint64_t left_ns)
{
    tier_err_set("backend '%s' is not answering: circuit breaker open after %llu consecutive "
                 "failures; calls fail at once for another %llu ms, then one probe goes through",
                 l->name, (unsigned long long)consecutive,
                 (unsigned long long)(left_ns / TIER_NS_PER_MS));
    return -ETIMEDOUT;
}

/* ---- admission ------------------------------------------------------------------------------ */

static struct timespec mono_ts(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / TIER_NS_PER_SEC),
                          .tv_nsec = (long)(ns % TIER_NS_PER_SEC)};
    return ts;
}

/* Admit one call of class c in l: 0 with *waited_ns, or -ETIMEDOUT (message set). */
static int lane_admit(struct sched *s, struct sched_lane *l, int c, uint64_t *waited_ns)
{
    uint64_t t0 = tier_now_mono_ns();
    bool probe = false;
    pthread_mutex_lock(&s->mu);
    if (l->breaker_failures > 0 && l->br != SCHED_BREAKER_CLOSED) {
        if (l->br == SCHED_BREAKER_OPEN && t0 >= l->open_until_ns) {
            l->br = SCHED_BREAKER_HALF_OPEN; /* this call is the probe */
            l->probe_out = true;
            probe = true;
        } else if (l->br == SCHED_BREAKER_HALF_OPEN && !l->probe_out) {
            l->probe_out = true;
            probe = true;
        } else if (l->br == SCHED_BREAKER_HALF_OPEN && t0 >= l->probe_deadline_ns) {
            /* the probe never came back (a POSIX call stuck in the kernel): it failed; OPEN
             * again, so another probe goes after the cool-down, instead of HALF_OPEN for ever */
            breaker_open(s, l, t0);
            l->fast_fails++;
            uint64_t cons = l->consecutive;
            pthread_mutex_unlock(&s->mu);
            return fast_fail(l, cons, l->cooldown_ns);
        } else {
            uint64_t left = l->br == SCHED_BREAKER_OPEN ? l->open_until_ns - t0 : 0;
            uint64_t cons = l->consecutive;
            l->fast_fails++;
            pthread_mutex_unlock(&s->mu);
            return fast_fail(l, cons, left);
        }
    }
    if (probe) {
        uint64_t wait = l->admit_timeout_ns > l->cooldown_ns ? l->admit_timeout_ns : l->cooldown_ns;
        l->probe_deadline_ns = t0 + (wait ? wait : TIER_NS_PER_SEC);
    }
    bool queued_any = false;
    for (int k = 0; k < TIER_IO_NCLASSES; k++)
        queued_any = queued_any || l->queued[k];
    if (l->inflight < l->cap && !queued_any) {
        account_admit(s, l, c, 0);
        pthread_mutex_unlock(&s->mu);
        *waited_ns = 0;
        return 0;
    }

    struct waiter w = {.cls = c, .t0_ns = t0};
    pthread_cond_init(&w.cv, &s->cattr);
    w.prev = l->qtail[c];
    if (l->qtail[c])
        l->qtail[c]->next = &w;
    else
        l->qhead[c] = &w;
    l->qtail[c] = &w;
    l->queued[c]++;
    s->st[c].queued_now++;
    grant(s, l); /* a slot may be free while only lower classes waited */
    uint64_t deadline = l->admit_timeout_ns ? t0 + l->admit_timeout_ns : 0;
    struct timespec dl = mono_ts(deadline);
    while (!w.granted && !w.refused) {
        if (!deadline) {
            pthread_cond_wait(&w.cv, &s->mu);
            continue;
        }
        if (pthread_cond_timedwait(&w.cv, &s->mu, &dl) == ETIMEDOUT && !w.granted && !w.refused) {
            unlink_waiter(s, l, &w);
            l->admit_timeouts++;
            if (probe && l->br == SCHED_BREAKER_HALF_OPEN)
                breaker_open(s, l, tier_now_mono_ns());
            else if (l->breaker_failures > 0 && l->br == SCHED_BREAKER_CLOSED &&
                     l->inflight >= l->cap)
                /* every slot is held by calls that do not return (a hung POSIX mount reports
                 * no failure until they do): a full lane's timeout counts towards OPEN */
                note_failure(s, l);
            int inflight = l->inflight;
            uint64_t queued = 0;
            for (int k = 0; k < TIER_IO_NCLASSES; k++)
                queued += l->queued[k];
            pthread_mutex_unlock(&s->mu);
            pthread_cond_destroy(&w.cv);
            tier_err_set("backend '%s': no free slot within %llu ms (%d calls in flight, %llu "
                         "more queued): the backend is slow or not answering",
                         l->name, (unsigned long long)(l->admit_timeout_ns / TIER_NS_PER_MS),
                         inflight, (unsigned long long)queued);
            return -ETIMEDOUT;
        }
    }
    int rc = 0;
    if (w.refused) {
        uint64_t now = tier_now_mono_ns();
        uint64_t left = l->open_until_ns > now ? l->open_until_ns - now : 0;
        rc = fast_fail(l, l->consecutive, left);
    } else {
        *waited_ns = tier_now_mono_ns() - t0;
    }
    pthread_mutex_unlock(&s->mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

static void lane_done(struct sched *s, struct sched_lane *l, int c, size_t bytes, long result,
                      uint64_t service_ns, bool counted)
{
    pthread_mutex_lock(&s->mu);
    l->inflight--;
    l->completed++;
    s->st[c].inflight_now--;
    s->st[c].completed++;
    if (result < 0)
        s->st[c].errors++;
    else
        s->st[c].bytes += bytes;
    s->st[c].service_ns_total += service_ns;
    note_result(s, l, result, counted);
    grant(s, l);
    pthread_mutex_unlock(&s->mu);
}

uint64_t sched_admit(struct sched *s, const struct tier_ioctx *io, size_t bytes)
{
    (void)bytes; /* byte-based rate limits (QoS issue) will use it */
    int c = class_of(io);
    uint64_t waited = 0;
    (void)lane_admit(s, &s->def, c, &waited); /* no deadline, no breaker: never fails */
    struct tier_ioctx mine = {.tenant = io ? io->tenant : 0, .cls = (enum tier_io_class)c};
    sched_thread_io_set(&mine);
    return waited;
}

void sched_done(struct sched *s, const struct tier_ioctx *io, size_t bytes, long result,
                uint64_t service_ns)
{
    int c = class_of(io);
    sched_thread_io_set(NULL);
    lane_done(s, &s->def, c, bytes, result, service_ns, false);
}

int sched_lane_enter(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                     size_t bytes)
{
    (void)bytes;
    uint64_t waited = 0;
    t_attempt_reported = false;
    int rc = lane_admit(s, l, class_of(io), &waited);
    t_lane_waited_ns = waited;
    return rc;
}

void sched_lane_leave(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                      size_t bytes, long result, uint64_t service_ns)
{
    lane_done(s, l, class_of(io), bytes, result, service_ns, t_attempt_reported);
    t_attempt_reported = false;
    if (s->tele) {
        /* whose call: the argument, else this thread's declared class (as class_of()), else
         * the ioctx the backend dispatcher made current (common/ioctx.h) */
        const struct tier_ioctx *cio = io ? io : sched_thread_io();
        if (!cio)
            cio = tier_ioctx_current();
        tele_sched_record(s->tele, cio, t_lane_waited_ns, service_ns, result < 0 ? 0 : bytes,
                          result < 0 ? (int)result : 0);
    }
}

void sched_set_telemetry(struct sched *s, struct telemetry *t)
{
    s->tele = t;
}

void sched_stats_get(struct sched *s, struct sched_stats *st)
{
    pthread_mutex_lock(&s->mu);
    for (int c = 0; c < TIER_IO_NCLASSES; c++)
        st->cls[c] = s->st[c];
    pthread_mutex_unlock(&s->mu);
}

size_t sched_backend_stats_get(struct sched *s, struct sched_backend_stats *out, size_t max)
{
    pthread_mutex_lock(&s->mu);
    uint64_t now = tier_now_mono_ns();
    size_t i = 0;
    for (struct sched_lane *l = s->lanes; l && i < max; l = l->next_lane, i++) {
        struct sched_backend_stats *b = &out[i];
        memset(b, 0, sizeof(*b));
        tier_strlcpy(b->name, l->name, sizeof(b->name));
        b->max_inflight = l->cap;
        b->inflight_now = (uint64_t)l->inflight;
        for (int c = 0; c < TIER_IO_NCLASSES; c++)
            b->queued_now += l->queued[c];
        b->admitted = l->admitted;
        b->completed = l->completed;
        b->failures = l->failures;
        b->admit_timeouts = l->admit_timeouts;
        b->breaker = l->br;
        b->consecutive_failures = l->consecutive;
        b->breaker_opens = l->opens;
        b->fast_fails = l->fast_fails;
        if (l->br == SCHED_BREAKER_OPEN && l->open_until_ns > now)
            b->open_ms_left = (l->open_until_ns - now + TIER_NS_PER_MS - 1) / TIER_NS_PER_MS;
    }
    size_t n = s->nlanes;
    pthread_mutex_unlock(&s->mu);
    return n;
}
