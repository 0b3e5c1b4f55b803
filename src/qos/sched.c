/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched.c - the QoS scheduling point (sched.h): admission of backend requests with a bound on
 * requests in flight, strict class priority and FIFO order within a class.
 *
 * Callers: the cache's fetch hook (installed by sched_attach_cache), and any other module that
 * sends backend requests (write-back uploader). sched_admit() may block the calling thread.
 *
 * DESIGN. Every field of struct sched below `mu` is guarded by `mu`. Each class hands out ticket
 * numbers (next_ticket) and grants them strictly in order (head), so a class is a FIFO without a
 * linked list of waiters. A waiter holding ticket t of class c may go when
 *
 *     inflight < max_inflight  &&  t == head[c]  &&  no class k < c has a waiter queued.
 *
 * Waiters of class c sleep on cond[c]. Whenever that condition may have become true for someone
 * (a slot freed, a head advanced, a higher class emptied) wake_next() broadcasts on the class
 * that goes next; within it only the head passes, the others sleep again. The broadcast wakes
 * at most the waiters of one class, which is the set that may contain the next grantee.
 *
 * Starvation bound: strict priority alone can starve a lower class for ever, and a streaming
 * reader that waits on a block a background stage worker is fetching would starve with it.
 * passed[c] counts grants made to higher classes while class c had waiters; once it reaches
 * starve_limit, class c goes next (the highest such class first), and its counter restarts.
 * So "no class k < c has a waiter queued" above reads "c is next_class()".
 *
 * Invariants (under mu): the waiting tickets of class c are exactly head[c]..next_ticket[c]-1, so
 * queued[c] == next_ticket[c] - head[c]; inflight <= max_inflight; admitted - completed of all
 * classes == inflight.
 */
#include "qos/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/timeutil.h"

struct sched {
    int max_inflight;      /* immutable after sched_new */
    uint64_t starve_limit; /* immutable after sched_new */

    pthread_mutex_t mu;
    pthread_cond_t cond[TIER_IO_NCLASSES];
    int inflight;
    uint64_t next_ticket[TIER_IO_NCLASSES]; /* next ticket to hand out */
    uint64_t head[TIER_IO_NCLASSES];        /* next ticket to grant */
    uint64_t passed[TIER_IO_NCLASSES];      /* grants to higher classes while this one waited */
    struct sched_class_stats st[TIER_IO_NCLASSES];
};

static enum tier_io_class class_of(const struct tier_ioctx *io)
{
    if (!io)
        return TIER_IO_STREAMING;
    if ((unsigned)io->cls >= TIER_IO_NCLASSES)
        return TIER_IO_BACKGROUND; /* unknown classes get the lowest priority, not a crash */
    return io->cls;
}

int sched_new(const struct sched_config *cfg, struct sched **out)
{
    struct sched *s = calloc(1, sizeof(*s));
    int i = 0;
    if (!s)
        return -ENOMEM;
    s->max_inflight = cfg && cfg->max_inflight > 0 ? cfg->max_inflight : 32;
    s->starve_limit = cfg && cfg->starve_limit > 0 ? (uint64_t)cfg->starve_limit : 64;
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        goto fail_mutex;
    for (i = 0; i < TIER_IO_NCLASSES; i++) {
        if (pthread_cond_init(&s->cond[i], NULL) != 0)
            goto fail_cond;
    }
    *out = s;
    return 0;

fail_cond:
    while (i-- > 0)
        pthread_cond_destroy(&s->cond[i]);
    pthread_mutex_destroy(&s->mu);
fail_mutex:
    free(s);
    return -ENOMEM;
}

void sched_free(struct sched *s)
{
    if (!s)
        return;
    for (int i = 0; i < TIER_IO_NCLASSES; i++)
        pthread_cond_destroy(&s->cond[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Under mu: the class whose head goes next, or -1 if nobody waits. A class passed over
 * starve_limit times goes before the others; otherwise the highest class with waiters. */
static int next_class(const struct sched *s)
{
    int first = -1;
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        if (s->next_ticket[c] == s->head[c])
            continue;
        if (s->passed[c] >= s->starve_limit)
            return c;
        if (first < 0)
            first = c;
    }
    return first;
}

/* Under mu: wake the class whose head is the next grantee, if a slot is free. */
static void wake_next(struct sched *s)
{
    if (s->inflight >= s->max_inflight)
        return;
    int c = next_class(s);
    if (c >= 0)
        pthread_cond_broadcast(&s->cond[c]);
}

/* Under mu: may ticket t of class c go now? */
static int may_go(const struct sched *s, int c, uint64_t t)
{
    return s->inflight < s->max_inflight && t == s->head[c] && next_class(s) == c;
}

uint64_t sched_admit(struct sched *s, const struct tier_ioctx *io, size_t bytes)
{
    (void)bytes; /* byte-based rate limits (QoS issue) will use it */
    int c = (int)class_of(io);
    uint64_t t0 = tier_now_mono_ns();

    pthread_mutex_lock(&s->mu);
    uint64_t ticket = s->next_ticket[c]++;
    s->st[c].queued_now++;
    while (!may_go(s, c, ticket))
        pthread_cond_wait(&s->cond[c], &s->mu);
    s->head[c]++;
    s->passed[c] = 0;
    for (int k = c + 1; k < TIER_IO_NCLASSES; k++) {
        if (s->next_ticket[k] != s->head[k])
            s->passed[k]++;
    }
    s->st[c].queued_now--;
    s->inflight++;
    s->st[c].inflight_now++;
    s->st[c].admitted++;
    uint64_t waited = tier_now_mono_ns() - t0;
    s->st[c].wait_ns_total += waited;
    /* The next ticket of this class (or of a lower class, if this one emptied) may go too. */
    wake_next(s);
    pthread_mutex_unlock(&s->mu);
    return waited;
}

void sched_done(struct sched *s, const struct tier_ioctx *io, size_t bytes, long result,
                uint64_t service_ns)
{
    int c = (int)class_of(io);

    pthread_mutex_lock(&s->mu);
    s->inflight--;
    s->st[c].inflight_now--;
    s->st[c].completed++;
    if (result < 0)
        s->st[c].errors++;
    else
        s->st[c].bytes += bytes;
    s->st[c].service_ns_total += service_ns;
    wake_next(s);
    pthread_mutex_unlock(&s->mu);
}

void sched_stats_get(struct sched *s, struct sched_stats *st)
{
    pthread_mutex_lock(&s->mu);
    for (int c = 0; c < TIER_IO_NCLASSES; c++)
        st->cls[c] = s->st[c];
    pthread_mutex_unlock(&s->mu);
}
