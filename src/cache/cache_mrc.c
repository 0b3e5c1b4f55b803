/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_mrc.c - the cache's miss-ratio curves (cache.h cache_mrc_curve, docs/ADVICE.md): one for
 * the node and one per tenant, each an online curve of src/cache/mrc.c running the cache's own
 * policy (cfg.policy) over the demand accesses of cache_read (a read's new access to a block, as
 * the level's policy counts one: a read that continues where the last one of the block ended is
 * not), keyed by the block's identity hash (cache_block_id). Prefetch, staging, hinted and peer
 * fetches are not accesses: the curves predict what the readers would hit.
 *
 * A tenant's curve is made at its first access and kept until cache_close (max_tenants of them
 * at most); c->mrc_tenant[t] is set once by compare-and-swap, so a reader never takes a lock to
 * find it.
 *
 * OFF THE READ PATH: a reader only takes the block's identity hash (the one its lookup used) and,
 * when the node's curve or its tenant's samples it (mrc_wants), pushes (hash, bytes, tenant) on a
 * bounded lock-free queue (a ring of MRC_QCAP cells, each with a sequence number: Vyukov's
 * bounded queue, many producers, one consumer); an access neither samples it counts
 * (mrc_count: two relaxed additions per curve). The miniature simulations run on the curves'
 * own thread, kicked every MRC_QCAP / 2 pushes and woken every MRC_DRAIN_MS otherwise, which
 * counts each popped access in its curves as it simulates it; a reader of a curve or of its
 * demand (cache_mrc_curve, cache_mrc_demand) drains it first, so they include every access made
 * before the call.
 *
 * A RATE CHANGE WHILE ACCESSES WAIT: a simulation's rate changes (a cut for memory, the floors
 * following the mean sampled size: mrc.c) inside a drain, while the readers keep counting the
 * accesses no curve samples. The sampled accesses still queued then run under the new
 * thresholds, while the unsampled ones counted beside them were charged at the old rates: a
 * skew of the expected counts bounded by the queue's backlog at that moment (at most
 * MRC_QCAP sampled accesses; usually what 200 ms of reads push), at each change. Changes are
 * rare (a cut when the sample outgrows its memory, a floor change at 256, 1,024, 4,096 ...
 * sampled accesses), and not measured here.
 *
 * A FULL QUEUE: the reader that finds it full sets mrc_overflow, and until the next drain every
 * access is left out, sampled or not (counted in cache_mrc_dropped). Leaving out only the
 * sampled ones would bias the curve: SHARDS_adj adds the accesses a simulation was expected to
 * sample and did not to its hits (mrc.h), so at a rate below 1 each dropped sample would read
 * as a hit. Leaving out a stretch of the stream whole keeps the sample in proportion: the curve
 * is then estimated from the accesses outside those stretches.
 *
 *      reader: overflow? --yes--> mrc_drops++ ---------------------------------> done
 *                 |no
 *              hash, wants? --no--> count in node's and tenant's curve --------> done
 *                 |yes
 *                 push --full--> mrc_drops++, set overflow, kick --------------> done
 *                 |ok
 *                 every MRC_QCAP / 2th push: kick the drain thread ------------> done
 *      drain (thread / curve reader, under mrc_drain_mu): pop up to the tail as it was at the
 *                 start, QBATCH at a time; count and mrc_apply them in the node's curve, then
 *                 in each tenant's curve in runs of one tenant; clear overflow
 *
 * INVARIANTS
 *   Q1  cell i holds a pushed, not yet popped access  <=>  its seq == position + 1 (position
 *       = i mod MRC_QCAP); a free cell's seq == its next position to be pushed.
 *   Q2  mrc_q_head is read and written only under mrc_drain_mu (one consumer at a time).
 *   Q3  an access is counted in a curve iff it is not dropped: by its reader when no curve
 *       samples it, else by the drain that simulates it.
 *   Q4  while mrc_overflow is set no access is counted or pushed (but a reader already past
 *       its test: one access a thread at most); it is cleared only by a drain, under
 *       mrc_drain_mu, after the queue was emptied up to the drain's start. The accesses left
 *       out are counted apart (mrc_left_out), so the demand still has them.
 *
 * TRANSITION -> FUNCTION
 *   a demand access                                 mrc_feed()
 *   push a sampled access                           q_push()
 *   queue found full: leave out until drained       mrc_feed() -> kick()
 *   pop and simulate what is queued                 mrc_drain() -> drain_locked()
 *   a reclaimed tenant id's curve anew              mrc_tenant_reset() -> drain_locked(),
 *                                                   mrc_reset()
 *   the thread's wake-ups                           drain_main()
 *   a half-life passed: halve the counters          drain_main() -> age_all() -> mrc_age()
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache_debug.h"
#include "cache/cache_int.h"
#include "common/err.h"
#include "common/log.h"
#include "common/timeutil.h"

#define MRC_QCAP CACHE_MRC_QUEUE /* cells; a power of 2 */
#define MRC_DRAIN_MS 200
#define QBATCH 256
_Static_assert((MRC_QCAP & (MRC_QCAP - 1)) == 0 && MRC_QCAP >= 4, "the queue is a power of 2");

struct mrc_qcell {
    _Atomic uint64_t seq;
    uint64_t hash;
    uint32_t bytes;
    uint32_t tenant; /* UINT32_MAX: the node's curve only */
};

static void *drain_main(void *arg);

static int mrc_make(const struct cache *c, struct mrc **out)
{
    struct mrc_config mc = {.sizes = c->mrc_sizes,
                            .nsizes = CACHE_MRC_SIZES,
                            .rate = c->cfg.mrc_rate,
                            .max_keys = c->cfg.mrc_max_keys > 0 ? (size_t)c->cfg.mrc_max_keys : 0,
                            .block_size = c->cfg.block_size,
                            .policy = c->cfg.policy,
                            .decay_every = 0};
    return mrc_new(&mc, out);
}

int mrc_setup(struct cache *c)
{
    if (!c->cfg.mrc)
        return 0;
    uint64_t ram = c->cfg.ram_bytes, disk = c->disk_dir ? c->cfg.disk_bytes : 0;
    uint64_t lo = ram && (!disk || ram < disk) ? ram : disk;
    uint64_t hi = ram > disk ? ram : disk;
    if (!hi)
        return 0; /* no level: nothing to size */
    double a = (double)lo / 8, b = (double)hi * 4;
    if (a < (double)c->cfg.block_size)
        a = (double)c->cfg.block_size;
    for (int k = 0; k < CACHE_MRC_SIZES; k++) {
        double s = a * pow(b / a, (double)k / (CACHE_MRC_SIZES - 1));
        c->mrc_sizes[k] = (uint64_t)s;
        if (k && c->mrc_sizes[k] <= c->mrc_sizes[k - 1])
            c->mrc_sizes[k] = c->mrc_sizes[k - 1] + 1;
    }
    c->mrc_tenant = calloc(c->cfg.max_tenants, sizeof(*c->mrc_tenant));
    c->mrc_q = calloc(MRC_QCAP, sizeof(*c->mrc_q));
    if (!c->mrc_tenant || !c->mrc_q)
        return -ENOMEM;
    for (uint64_t i = 0; i < MRC_QCAP; i++)
        atomic_init(&c->mrc_q[i].seq, i);
    int r = mrc_make(c, &c->mrc_node);
    if (r < 0)
        return r;
    pthread_mutex_init(&c->mrc_drain_mu, NULL);
    pthread_mutex_init(&c->mrc_mu, NULL);
    tier_cond_init_mono(&c->mrc_cv); /* the period is not moved by clock steps */
    if ((r = pthread_create(&c->mrc_thread, NULL, drain_main, c)) != 0) {
        pthread_cond_destroy(&c->mrc_cv);
        pthread_mutex_destroy(&c->mrc_mu);
        pthread_mutex_destroy(&c->mrc_drain_mu);
        tier_err_set("cannot start the miss-ratio curves' thread: %s", strerror(r));
        return -r;
    }
    c->mrc_thread_on = true;
    c->mrc_on = true;
    return 0;
}

void mrc_teardown(struct cache *c)
{
    if (c->mrc_thread_on) {
        pthread_mutex_lock(&c->mrc_mu);
        c->mrc_stop = true;
        pthread_cond_signal(&c->mrc_cv);
        pthread_mutex_unlock(&c->mrc_mu);
        pthread_join(c->mrc_thread, NULL);
        c->mrc_thread_on = false;
        pthread_cond_destroy(&c->mrc_cv);
        pthread_mutex_destroy(&c->mrc_mu);
        pthread_mutex_destroy(&c->mrc_drain_mu);
    }
    free(c->mrc_q);
    c->mrc_q = NULL;
    if (c->mrc_tenant)
        for (unsigned t = 0; t < c->cfg.max_tenants; t++)
            mrc_free(atomic_load(&c->mrc_tenant[t]));
    free(c->mrc_tenant);
    c->mrc_tenant = NULL;
    mrc_free(c->mrc_node);
    c->mrc_node = NULL;
    c->mrc_on = false;
}

static struct mrc *tenant_curve(struct cache *c, uint32_t t, bool make)
{
    struct mrc *m = atomic_load_explicit(&c->mrc_tenant[t], memory_order_acquire);
    if (m || !make)
        return m;
    struct mrc *n = NULL;
    if (mrc_make(c, &n) < 0)
        return NULL; /* out of memory: this access goes to the node's curve only */
    if (!atomic_compare_exchange_strong_explicit(&c->mrc_tenant[t], &m, n, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        mrc_free(n); /* another reader made it first: m is that one */
        return m;
    }
    return n;
}

static void kick(struct cache *c)
{
    pthread_mutex_lock(&c->mrc_mu);
    c->mrc_kick = true;
    pthread_cond_signal(&c->mrc_cv);
    pthread_mutex_unlock(&c->mrc_mu);
}

/* Q1: claim the cell at the tail by compare-and-swap, fill it, publish it with its seq. false:
 * the queue is full. */
static bool q_push(struct cache *c, uint64_t h, uint32_t bytes, uint32_t tenant)
{
    uint64_t pos = atomic_load_explicit(&c->mrc_q_tail, memory_order_relaxed);
    for (;;) {
        struct mrc_qcell *q = &c->mrc_q[pos & (MRC_QCAP - 1)];
        uint64_t seq = atomic_load_explicit(&q->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - pos);
        if (dif < 0)
            return false; /* the cell a lap behind is not popped yet: full */
        if (dif > 0) {
            pos = atomic_load_explicit(&c->mrc_q_tail, memory_order_relaxed);
            continue; /* another reader took this cell */
        }
        if (!atomic_compare_exchange_weak_explicit(&c->mrc_q_tail, &pos, pos + 1,
                                                   memory_order_relaxed, memory_order_relaxed))
            continue; /* pos is the tail now: try it */
        q->hash = h;
        q->bytes = bytes;
        q->tenant = tenant;
        atomic_store_explicit(&q->seq, pos + 1, memory_order_release);
        if (((pos + 1) & (MRC_QCAP / 2 - 1)) == 0)
            kick(c); /* once per MRC_QCAP / 2 pushes */
        return true;
    }
}

void mrc_feed(struct cache *c, const struct tier_ioctx *io, const uint8_t id[16], uint32_t bytes)
{
    if (bytes == 0)
        return;
    uint64_t h;
    memcpy(&h, id, sizeof(h)); /* keyed and uniform: the sampling needs no other hash */
    uint32_t t = io ? io->tenant : TIER_TENANT_DEFAULT;
    struct mrc *tm = t < c->cfg.max_tenants ? tenant_curve(c, t, true) : NULL;
    bool out = atomic_load_explicit(&c->mrc_overflow, memory_order_relaxed);
    if (!out && (mrc_wants(c->mrc_node, h) || mrc_wants(tm, h))) {
        if (q_push(c, h, bytes, tm ? t : UINT32_MAX))
            return; /* Q3: counted when it is simulated */
        out = true;
        if (!atomic_exchange_explicit(&c->mrc_overflow, true, memory_order_relaxed))
            kick(c); /* the one reader that found it full */
    }
    if (out) { /* Q4: left out, sampled or not; still the tenant's demand */
        atomic_fetch_add_explicit(&c->mrc_drops, 1, memory_order_relaxed);
        mrc_left_out(c->mrc_node, bytes);
        mrc_left_out(tm, bytes);
        return;
    }
    mrc_count(c->mrc_node, bytes);
    mrc_count(tm, bytes);
}

/* Under mrc_drain_mu: pop what was pushed before the call (up to the tail as it is now, so a
 * drain ends however fast readers push; a cell claimed below it and not yet filled is waited
 * for: its reader is between claiming and publishing) and run it through the curves, QBATCH at
 * a time: the node's curve takes a batch under one lock, each tenant's curve a run of its
 * accesses. Then the queue has room: readers may push again (Q4). Returns how many. */
static size_t drain_locked(struct cache *c)
{
    struct mrc_sample b[QBATCH];
    uint32_t bt[QBATCH];
    uint64_t end = atomic_load_explicit(&c->mrc_q_tail, memory_order_acquire);
    size_t total = 0;
    while (c->mrc_q_head != end) {
        size_t n = 0;
        while (n < QBATCH && c->mrc_q_head != end) {
            uint64_t pos = c->mrc_q_head;
            struct mrc_qcell *q = &c->mrc_q[pos & (MRC_QCAP - 1)];
            if (atomic_load_explicit(&q->seq, memory_order_acquire) != pos + 1) {
                sched_yield(); /* claimed, not yet published */
                continue;
            }
            b[n] = (struct mrc_sample){.hash = q->hash, .bytes = q->bytes};
            bt[n++] = q->tenant;
            atomic_store_explicit(&q->seq, pos + MRC_QCAP, memory_order_release);
            c->mrc_q_head = pos + 1;
        }
        total += n;
        mrc_apply(c->mrc_node, b, n); /* counts each as it simulates it (Q3) */
        for (size_t i = 0; i < n;) {
            size_t j = i + 1;
            while (j < n && bt[j] == bt[i])
                j++;
            if (bt[i] != UINT32_MAX)
                mrc_apply(tenant_curve(c, bt[i], false), b + i, j - i);
            i = j;
        }
    }
    atomic_store_explicit(&c->mrc_overflow, false, memory_order_relaxed);
    return total;
}

void mrc_drain(struct cache *c)
{
    if (atomic_load_explicit(&c->mrc_hold, memory_order_acquire))
        return; /* cache_debug_mrc_hold() */
    pthread_mutex_lock(&c->mrc_drain_mu);
    drain_locked(c);
    pthread_mutex_unlock(&c->mrc_drain_mu);
}

void mrc_tenant_reset(struct cache *c, uint32_t t)
{
    if (!c->mrc_on || t >= c->cfg.max_tenants)
        return;
    pthread_mutex_lock(&c->mrc_drain_mu);
    if (!atomic_load_explicit(&c->mrc_hold, memory_order_acquire))
        drain_locked(c);
    mrc_reset(atomic_load(&c->mrc_tenant[t]));
    pthread_mutex_unlock(&c->mrc_drain_mu);
}

/* Every curve's counters halve (cfg.mrc_halflife_ms); under mrc_drain_mu, after a drain, so the
 * accesses queued before are aged with the rest. */
static void age_all(struct cache *c)
{
    mrc_age(c->mrc_node);
    for (unsigned t = 0; t < c->cfg.max_tenants; t++)
        mrc_age(atomic_load_explicit(&c->mrc_tenant[t], memory_order_acquire));
    atomic_fetch_add_explicit(&c->mrc_ages, 1, memory_order_relaxed);
}

static uint64_t mono_ms(void)
{
    return tier_now_mono_ns() / TIER_NS_PER_MS;
}

/* The curves' thread: drain when a reader kicks (every MRC_QCAP / 2 pushes, or the queue found
 * full), every MRC_DRAIN_MS otherwise, and at once again while readers pushed more during a
 * drain; age the curves every half-life. */
static void *drain_main(void *arg)
{
    struct cache *c = arg;
    uint64_t aged_at = mono_ms();
    pthread_mutex_lock(&c->mrc_mu);
    while (!c->mrc_stop) {
        if (!c->mrc_kick) {
            struct timespec ts = tier_mono_deadline(MRC_DRAIN_MS * TIER_NS_PER_MS);
            pthread_cond_timedwait(&c->mrc_cv, &c->mrc_mu, &ts);
        }
        c->mrc_kick = false;
        pthread_mutex_unlock(&c->mrc_mu);
        bool more = false;
        uint64_t now = mono_ms();
        bool age = c->cfg.mrc_halflife_ms && now - aged_at >= c->cfg.mrc_halflife_ms;
        pthread_mutex_lock(&c->mrc_drain_mu);
        if (!atomic_load_explicit(&c->mrc_hold, memory_order_acquire))
            more = drain_locked(c) > 0 &&
                   atomic_load_explicit(&c->mrc_q_tail, memory_order_relaxed) != c->mrc_q_head;
        if (age) { /* after the drain, under its lock: no batch is half counted */
            age_all(c);
            aged_at = now;
        }
        pthread_mutex_unlock(&c->mrc_drain_mu);
        pthread_mutex_lock(&c->mrc_mu);
        if (more)
            c->mrc_kick = true;
    }
    pthread_mutex_unlock(&c->mrc_mu);
    return NULL;
}

void cache_debug_mrc_hold(struct cache *c, bool hold)
{
    atomic_store_explicit(&c->mrc_hold, hold, memory_order_release);
}

uint64_t cache_mrc_ages(struct cache *c)
{
    return c && c->mrc_on ? atomic_load_explicit(&c->mrc_ages, memory_order_relaxed) : 0;
}

uint64_t cache_mrc_dropped(struct cache *c)
{
    return c && c->mrc_on ? atomic_load_explicit(&c->mrc_drops, memory_order_relaxed) : 0;
}

/* The curve of tenant t (t < 0: the node's) into *m: 0, -ENOENT (curves off, or t made no access
 * yet), -EINVAL (t >= max_tenants). */
static int curve_of(struct cache *c, int64_t t, struct mrc **m)
{
    if (!c || !c->mrc_on)
        return -ENOENT;
    if (t >= (int64_t)c->cfg.max_tenants)
        return -EINVAL;
    *m = t < 0 ? c->mrc_node : tenant_curve(c, (uint32_t)t, false);
    return *m ? 0 : -ENOENT;
}

int cache_mrc_curve(struct cache *c, int64_t t, struct mrc_point *out, size_t cap, size_t *n)
{
    struct mrc *m = NULL;
    int r = curve_of(c, t, &m);
    if (r == 0)
        mrc_drain(c); /* every access made before this call */
    *n = r == 0 ? mrc_curve(m, out, cap) : 0;
    return r;
}

int cache_mrc_demand(struct cache *c, int64_t t, uint64_t *accesses, uint64_t *bytes)
{
    *accesses = *bytes = 0;
    struct mrc *m = NULL;
    int r = curve_of(c, t, &m);
    if (r < 0)
        return r;
    mrc_drain(c); /* the queued accesses are counted when they are simulated (Q3) */
    struct mrc_stats st;
    mrc_stats_get(m, &st);
    *accesses = st.accesses + st.left_out; /* the demand, left out of the curve or not (Q4) */
    *bytes = st.access_bytes + st.left_out_bytes;
    return 0;
}
