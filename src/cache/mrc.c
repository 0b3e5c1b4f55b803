/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mrc.c - online miss-ratio curves by miniature simulation of the cache's own policy (mrc.h).
 *
 * DATA: a table (open addressing, linear probing, backward-shift deletion) of the sampled blocks
 * some simulation holds now; each entry embeds one struct pol_node per simulation, so a block's
 * presence in simulation k is policy_contains(&e->node[k]). An entry lives while at least one
 * simulation holds it (e->held) and is freed when the last one evicts it; a policy's ghost keeps
 * only hashes, so a block that left every simulation needs no entry.
 *
 * INVARIANTS (under m->mu):
 *   M1  e is in the table  <=>  e->held > 0  <=>  some simulation k has policy_contains(node[k]).
 *   M2  simulation k holds only blocks with hash < thr[k], and its used bytes <= cap[k] after
 *       every access (a block larger than cap[k] is never inserted: a miss every time).
 *   M3  thr[k] >= thr_base >= THR_MIN and cap[k] = sizes[k] * thr[k] / 2^64 (rate_k =
 *       thr[k] / 2^64); a floored simulation's rate is min_blocks mean-sized blocks over its
 *       size (mean_bytes()).
 *   M4  nkeys <= max_keys + nsizes * min_blocks after every access (keys_max()), except while
 *       one access is being handled.
 *   M5  each simulation's counters (acc, hits, bytes, hit_bytes, expect) count samples at its
 *       rate now: a change of rate scales them (rescale()).
 *
 * TRANSITION -> FUNCTION
 *   count an access (lock-free, sharded counters)        mrc_count()
 *   access not sampled by any simulation (no lock)       mrc_wants() false
 *   sampled accesses, a batch under one lock             mrc_apply() -> apply_one()
 *   hit in simulation k                                  sim_access() -> policy_hit()
 *   miss: insert, then evict down to cap[k]              sim_access() -> policy_insert(),
 *                                                        sim_evict_to()
 *   entry left every simulation: free it                 sim_evict_to() -> entry_drop()
 *   too many entries: cut the base rate                  cut_rate() -> set_thresholds() ->
 *                                                        rescale(), purge_above()
 *   the mean sampled size moved the floors               recalibrate() -> set_thresholds() ->
 *                                                        rescale(), purge_above()
 *   halve the counters                                   apply_one() -> decay(), mrc_age()
 *   forget everything                                    mrc_reset()
 */
#include "cache/mrc.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache/policy.h"
#include "common/err.h"

struct mrc_ent {
    uint64_t hash;
    uint32_t held; /* simulations holding it (M1) */
    struct pol_node node[];
};

struct mrc_sim {
    struct policy *pol;
    uint64_t thr; /* samples hash < thr */
    uint64_t cap; /* scaled capacity, bytes */
    uint64_t used;
    double acc, hits, bytes, hit_bytes; /* decayed counters */
    double expect;                      /* decayed: accesses it would sample at its rate */
};

/* Every access, sampled or not (SHARDS_adj: settle()), and their bytes, counted in one of
 * CNT_SHARDS cache lines chosen per thread, so readers on many threads do not bounce one line;
 * the count is their sum. */
#define CNT_SHARDS 8
struct mrc_cnt {
    _Alignas(64) _Atomic uint64_t n;
    _Atomic uint64_t bytes;
};

struct mrc {
    pthread_mutex_t mu;
    struct mrc_config cfg;
    uint64_t sizes[MRC_SIZES_MAX];
    size_t n;
    _Atomic uint64_t thr_any; /* max over thr[k]: the lock-free test */
    struct mrc_cnt cnt[CNT_SHARDS];
    uint64_t all_seen; /* cnt_all() when the expected counts were last brought up to date */
    _Atomic uint64_t out_n, out_bytes; /* accesses left out (mrc_left_out) */
    uint64_t thr_base;
    struct mrc_sim sim[MRC_SIZES_MAX];
    struct mrc_ent **tab; /* open addressing, NULL = empty */
    size_t tab_cap, nkeys;
    uint64_t sampled, since_decay, rate_cuts;
    double bytes_sampled;    /* bytes of the sampled accesses, for mean_bytes() */
    uint64_t nbytes_samples; /* ... and how many */
    uint64_t next_recal;     /* nbytes_samples of the next recalibrate() */
};

#define TWO64 18446744073709551616.0
/* The base rate is never cut below 2^-40 (about 1e-12): a threshold of 0 samples nothing, ever. */
#define THR_MIN ((uint64_t)1 << 24)

static void settle(struct mrc *m);

static uint64_t cnt_all(const struct mrc *m, uint64_t *bytes)
{
    uint64_t n = 0, b = 0;
    for (int i = 0; i < CNT_SHARDS; i++) {
        n += atomic_load_explicit(&m->cnt[i].n, memory_order_relaxed);
        b += atomic_load_explicit(&m->cnt[i].bytes, memory_order_relaxed);
    }
    if (bytes)
        *bytes = b;
    return n;
}

static uint64_t thr_of(double rate)
{
    if (rate >= 1.0)
        return UINT64_MAX;
    double t = rate * TWO64;
    return t >= TWO64 ? UINT64_MAX : (uint64_t)t;
}

static double rate_of(uint64_t thr)
{
    return thr == UINT64_MAX ? 1.0 : (double)thr / TWO64;
}

static size_t ent_bytes(const struct mrc *m)
{
    return sizeof(struct mrc_ent) + m->n * sizeof(struct pol_node);
}

static struct mrc_ent *ent_of(struct pol_node *nd, size_t k)
{
    return (struct mrc_ent *)(void *)((char *)(nd - k) - offsetof(struct mrc_ent, node));
}

/* ---- table -------------------------------------------------------------------------------- */

static size_t slot_of(const struct mrc *m, uint64_t h)
{
    /* the high bits decide sampling; mix so the slots use all of them */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)(h & (m->tab_cap - 1));
}

static struct mrc_ent *tab_find(const struct mrc *m, uint64_t h)
{
    for (size_t i = slot_of(m, h);; i = (i + 1) & (m->tab_cap - 1)) {
        struct mrc_ent *e = m->tab[i];
        if (!e || e->hash == h)
            return e;
    }
}

static int tab_grow(struct mrc *m)
{
    size_t ncap = m->tab_cap ? 2 * m->tab_cap : 64;
    struct mrc_ent **nt = calloc(ncap, sizeof(*nt));
    if (!nt)
        return -ENOMEM;
    struct mrc_ent **old = m->tab;
    size_t ocap = m->tab_cap;
    m->tab = nt;
    m->tab_cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i])
            continue;
        size_t j = slot_of(m, old[i]->hash);
        while (m->tab[j])
            j = (j + 1) & (ncap - 1);
        m->tab[j] = old[i];
    }
    free(old);
    return 0;
}

static int tab_put(struct mrc *m, struct mrc_ent *e)
{
    if ((m->nkeys + 1) * 4 > m->tab_cap * 3 && tab_grow(m) < 0)
        return -ENOMEM;
    size_t i = slot_of(m, e->hash);
    while (m->tab[i])
        i = (i + 1) & (m->tab_cap - 1);
    m->tab[i] = e;
    m->nkeys++;
    return 0;
}

/* Backward-shift deletion: no tombstones, so lookups stay short however many come and go. */
static void tab_del(struct mrc *m, uint64_t h)
{
    size_t mask = m->tab_cap - 1, i = slot_of(m, h);
    while (m->tab[i] && m->tab[i]->hash != h)
        i = (i + 1) & mask;
    if (!m->tab[i])
        return;
    m->tab[i] = NULL;
    m->nkeys--;
    for (size_t j = (i + 1) & mask; m->tab[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m, m->tab[j]->hash);
        /* move j back to i when its home is not in the cyclic range (i, j] */
        bool keep = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (keep)
            continue;
        m->tab[i] = m->tab[j];
        m->tab[j] = NULL;
        i = j;
    }
}

static void entry_drop(struct mrc *m, struct mrc_ent *e)
{
    tab_del(m, e->hash);
    free(e);
}

/* ---- simulations --------------------------------------------------------------------------- */

/* Evict from simulation k until it fits its capacity; entries left in no simulation go (M1). */
static void sim_evict_to(struct mrc *m, size_t k)
{
    struct mrc_sim *s = &m->sim[k];
    while (s->used > s->cap) {
        struct pol_node *v = policy_evict_candidate(s->pol, NULL, NULL);
        if (!v)
            break;
        policy_remove(s->pol, v, true);
        s->used -= v->size;
        struct mrc_ent *e = ent_of(v, k);
        if (--e->held == 0)
            entry_drop(m, e);
    }
}

static void sim_access(struct mrc *m, size_t k, struct mrc_ent **ep, uint64_t h, uint64_t bytes)
{
    struct mrc_sim *s = &m->sim[k];
    s->acc += 1;
    s->bytes += (double)bytes;
    struct mrc_ent *e = *ep;
    if (e && policy_contains(&e->node[k])) {
        policy_hit(s->pol, &e->node[k]);
        s->hits += 1;
        s->hit_bytes += (double)bytes;
        return;
    }
    if (bytes > s->cap)
        return; /* never fits (M2) */
    if (!e) {
        e = calloc(1, ent_bytes(m));
        if (!e)
            return; /* out of memory: this access is counted as a miss, nothing cached */
        e->hash = h;
        if (tab_put(m, e) < 0) {
            free(e);
            return;
        }
        *ep = e;
    }
    struct pol_node *nd = &e->node[k];
    nd->hash = h;
    nd->size = bytes;
    policy_insert(s->pol, nd);
    e->held++;
    s->used += bytes;
    /* the entry may be this simulation's own victim (a block larger than what is left) */
    if (s->used > s->cap) {
        e->held++; /* keep it while evicting, then recheck */
        sim_evict_to(m, k);
        if (--e->held == 0) {
            entry_drop(m, e);
            *ep = NULL;
        }
    }
}

/* The floor of a simulation's rate is in blocks of the mean size of the sampled accesses
 * (block_size until some are sampled), so a floored simulation holds about min_blocks blocks
 * however small the objects are (M4). */
static double mean_bytes(const struct mrc *m)
{
    return m->nbytes_samples ? m->bytes_sampled / (double)m->nbytes_samples
                             : (double)m->cfg.block_size;
}

static uint64_t sim_thr(const struct mrc *m, size_t k, uint64_t base)
{
    double want = (double)m->cfg.min_blocks * mean_bytes(m) / (double)m->sizes[k];
    double r = rate_of(base);
    return want > r ? thr_of(want) : base;
}

/* M5: a simulation's counters are in samples at its rate now, so one whose rate changes scales
 * them by new / old (after settle(): its expected count is up to date at the old rate). Without
 * it the accesses sampled before a fall of the rate would weigh more than those after (a cold
 * start, counted at rate 1, would outweigh the warm epochs counted at 1/4). */
static void rescale(struct mrc_sim *s, double f)
{
    s->acc *= f;
    s->hits *= f;
    s->bytes *= f;
    s->hit_bytes *= f;
    s->expect *= f;
}

static void set_thresholds(struct mrc *m)
{
    uint64_t any = 0;
    for (size_t k = 0; k < m->n; k++) {
        struct mrc_sim *s = &m->sim[k];
        uint64_t old = s->thr;
        s->thr = sim_thr(m, k, m->thr_base);
        if (old && old != s->thr)
            rescale(s, rate_of(s->thr) / rate_of(old));
        double c = (double)m->sizes[k] * rate_of(s->thr);
        s->cap = c < 1.0 ? 1 : (uint64_t)c;
        policy_set_capacity(s->pol, s->cap);
        if (s->thr > any)
            any = s->thr;
    }
    atomic_store(&m->thr_any, any);
}

/* The entries allowed before a cut: max_keys, plus what the simulations kept at their floor
 * rate (min_blocks each, which no cut shrinks) may hold. */
static size_t keys_max(const struct mrc *m)
{
    return m->cfg.max_keys + m->n * m->cfg.min_blocks;
}

/* M4: cut the base rate to 3/4 until the entries fit; the blocks above a simulation's new
 * threshold leave it (not as evictions: no ghost), then it shrinks to its new capacity. */
/* After thresholds changed: the blocks above a simulation's threshold leave it (not as
 * evictions: no ghost), entries left in none are freed, and each simulation shrinks to its
 * capacity. */
static void purge_above(struct mrc *m)
{
    for (size_t i = 0; i < m->tab_cap;) {
        struct mrc_ent *e = m->tab[i];
        if (!e) {
            i++;
            continue;
        }
        for (size_t k = 0; k < m->n; k++) {
            struct mrc_sim *s = &m->sim[k];
            if (e->hash >= s->thr && policy_contains(&e->node[k])) {
                policy_remove(s->pol, &e->node[k], false);
                s->used -= e->node[k].size;
                e->held--;
            }
        }
        if (e->held == 0)
            entry_drop(m, e); /* slot i now holds another entry (or none): look again */
        else
            i++;
    }
    for (size_t k = 0; k < m->n; k++)
        sim_evict_to(m, k);
}

static void cut_rate(struct mrc *m)
{
    while (m->nkeys > keys_max(m) && m->thr_base > THR_MIN) {
        settle(m);
        m->thr_base = m->thr_base / 4 * 3;
        m->rate_cuts++;
        set_thresholds(m);
        purge_above(m);
    }
}

/* The mean size of the sampled accesses moved the floors: thresholds anew (a floor that rose
 * samples more from now on, one that fell drops the blocks above it). At 256, 1,024, 4,096 ...
 * sampled accesses, so its cost is spread thin. */
static void recalibrate(struct mrc *m)
{
    settle(m);
    set_thresholds(m);
    purge_above(m);
}

/* Bring each simulation's expected count up to date: the accesses since the last settle times
 * its rate (the rate in force since then: settle() runs before every change of a rate). */
static void settle(struct mrc *m)
{
    uint64_t all = cnt_all(m, NULL);
    double d = (double)(all - m->all_seen);
    m->all_seen = all;
    for (size_t k = 0; k < m->n; k++)
        m->sim[k].expect += d * rate_of(m->sim[k].thr);
}

static void decay(struct mrc *m)
{
    settle(m);
    for (size_t k = 0; k < m->n; k++) {
        struct mrc_sim *s = &m->sim[k];
        s->acc /= 2;
        s->hits /= 2;
        s->bytes /= 2;
        s->hit_bytes /= 2;
        s->expect /= 2;
    }
}

/* ---- API ----------------------------------------------------------------------------------- */

int mrc_new(const struct mrc_config *cfg, struct mrc **out)
{
    if (!cfg || !out || !cfg->sizes || cfg->nsizes == 0 || cfg->nsizes > MRC_SIZES_MAX ||
        cfg->block_size == 0 || !(cfg->rate >= 0 && cfg->rate <= 1)) {
        tier_err_set("a miss-ratio curve needs 1..%d ascending sizes, a block size and a rate in "
                     "(0, 1]",
                     MRC_SIZES_MAX);
        return -EINVAL;
    }
    for (size_t k = 0; k < cfg->nsizes; k++)
        if (cfg->sizes[k] == 0 || (k && cfg->sizes[k] <= cfg->sizes[k - 1])) {
            tier_err_set("the sizes of a miss-ratio curve must be > 0 and ascending");
            return -EINVAL;
        }
    /* its counter shards are cache-line aligned: so must it be (sizeof is a multiple of 64) */
    _Static_assert(sizeof(struct mrc) % _Alignof(struct mrc) == 0, "aligned_alloc's size");
    struct mrc *m = aligned_alloc(_Alignof(struct mrc), sizeof(*m));
    if (!m)
        return -ENOMEM;
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    if (m->cfg.rate == 0)
        m->cfg.rate = 0.01;
    if (!m->cfg.max_keys)
        m->cfg.max_keys = 4096;
    if (!m->cfg.min_blocks)
        m->cfg.min_blocks = 256;
    m->n = cfg->nsizes;
    memcpy(m->sizes, cfg->sizes, m->n * sizeof(uint64_t));
    m->cfg.sizes = m->sizes;
    m->thr_base = thr_of(m->cfg.rate);
    m->next_recal = 256;
    pthread_mutex_init(&m->mu, NULL);
    for (size_t k = 0; k < m->n; k++) {
        if (policy_new(m->cfg.policy, 1, &m->sim[k].pol) < 0) {
            mrc_free(m);
            return -ENOMEM;
        }
    }
    if (tab_grow(m) < 0) {
        mrc_free(m);
        return -ENOMEM;
    }
    set_thresholds(m);
    *out = m;
    return 0;
}

static void drop_all(struct mrc *m)
{
    for (size_t i = 0; i < m->tab_cap; i++) {
        struct mrc_ent *e = m->tab[i];
        if (!e)
            continue;
        for (size_t k = 0; k < m->n; k++)
            if (policy_contains(&e->node[k]))
                policy_remove(m->sim[k].pol, &e->node[k], false);
        free(e);
        m->tab[i] = NULL;
    }
    m->nkeys = 0;
    for (size_t k = 0; k < m->n; k++)
        m->sim[k].used = 0;
}

void mrc_free(struct mrc *m)
{
    if (!m)
        return;
    if (m->tab)
        drop_all(m);
    for (size_t k = 0; k < m->n; k++)
        policy_free(m->sim[k].pol);
    free(m->tab);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

bool mrc_wants(const struct mrc *m, uint64_t hash)
{
    return m && hash < atomic_load_explicit(&m->thr_any, memory_order_relaxed);
}

void mrc_count(struct mrc *m, uint64_t bytes)
{
    static _Thread_local unsigned slot = UINT_MAX;
    static _Atomic unsigned next_slot;
    if (!m || bytes == 0)
        return;
    if (slot == UINT_MAX)
        slot = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed) % CNT_SHARDS;
    atomic_fetch_add_explicit(&m->cnt[slot].n, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->cnt[slot].bytes, bytes, memory_order_relaxed);
}

void mrc_left_out(struct mrc *m, uint64_t bytes)
{
    if (!m || bytes == 0)
        return;
    atomic_fetch_add_explicit(&m->out_n, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->out_bytes, bytes, memory_order_relaxed);
}

/* One sampled access, under m->mu: each simulation whose threshold it is under (a rate cut
 * since the caller's mrc_wants() may have left it under none). */
static void apply_one(struct mrc *m, uint64_t hash, uint64_t bytes)
{
    if (bytes == 0 || hash >= atomic_load_explicit(&m->thr_any, memory_order_relaxed))
        return;
    struct mrc_ent *e = tab_find(m, hash);
    bool any = false;
    for (size_t k = 0; k < m->n; k++) {
        if (hash >= m->sim[k].thr)
            continue;
        any = true;
        sim_access(m, k, &e, hash, bytes);
    }
    if (!any)
        return;
    m->sampled++;
    m->bytes_sampled += (double)bytes;
    if (++m->nbytes_samples == m->next_recal) {
        m->next_recal *= 4;
        recalibrate(m);
    }
    if (m->cfg.decay_every && ++m->since_decay >= m->cfg.decay_every) {
        m->since_decay = 0;
        decay(m);
    }
    if (m->nkeys > keys_max(m))
        cut_rate(m);
}

void mrc_apply(struct mrc *m, const struct mrc_sample *s, size_t n)
{
    if (!m || n == 0)
        return;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        /* counted just before it is simulated: a change of rate it causes settles the counts
         * of every access before it, and none after */
        mrc_count(m, s[i].bytes);
        apply_one(m, s[i].hash, s[i].bytes);
    }
    pthread_mutex_unlock(&m->mu);
}

void mrc_access(struct mrc *m, uint64_t hash, uint64_t bytes)
{
    if (!m || bytes == 0)
        return;
    if (!mrc_wants(m, hash)) {
        mrc_count(m, bytes);
        return;
    }
    struct mrc_sample one = {.hash = hash, .bytes = bytes};
    mrc_apply(m, &one, 1);
}

size_t mrc_curve(struct mrc *m, struct mrc_point *out, size_t cap)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->mu);
    settle(m);
    for (size_t k = 0; k < m->n && k < cap; k++) {
        const struct mrc_sim *s = &m->sim[k];
        /* SHARDS_adj: the sample's count of accesses differs from its expected count mostly by
         * a few popular blocks sampled or not; those are hits, so the difference is added to
         * (or taken from) the hits, over the expected count. */
        double hr = NAN, bhr = NAN;
        if (s->acc > 0 && s->expect > 0) {
            double avg = s->bytes / s->acc;
            hr = (s->hits + (s->expect - s->acc)) / s->expect;
            bhr = (s->hit_bytes + (s->expect - s->acc) * avg) / (s->expect * avg);
            hr = hr < 0 ? 0 : hr > 1 ? 1 : hr;
            bhr = bhr < 0 ? 0 : bhr > 1 ? 1 : bhr;
        }
        out[k] = (struct mrc_point){.size_bytes = m->sizes[k],
                                    .hit_ratio = hr,
                                    .byte_hit_ratio = bhr,
                                    .accesses = s->acc,
                                    .rate = rate_of(s->thr)};
    }
    pthread_mutex_unlock(&m->mu);
    return m->n;
}

void mrc_age(struct mrc *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    decay(m);
    pthread_mutex_unlock(&m->mu);
}

void mrc_reset(struct mrc *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    drop_all(m);
    for (size_t k = 0; k < m->n; k++) {
        struct mrc_sim *s = &m->sim[k];
        struct policy *p = NULL;
        if (policy_new(m->cfg.policy, s->cap, &p) == 0) { /* forget the ghost too */
            policy_free(s->pol);
            s->pol = p;
        }
        s->acc = s->hits = s->bytes = s->hit_bytes = s->expect = 0;
    }
    for (int i = 0; i < CNT_SHARDS; i++) { /* a reclaimed tenant id's next owner starts anew */
        atomic_store(&m->cnt[i].n, 0);
        atomic_store(&m->cnt[i].bytes, 0);
    }
    atomic_store(&m->out_n, 0);
    atomic_store(&m->out_bytes, 0);
    m->all_seen = 0;
    m->sampled = m->since_decay = 0;
    pthread_mutex_unlock(&m->mu);
}

void mrc_stats_get(struct mrc *m, struct mrc_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    st->keys = m->nkeys;
    st->max_keys = m->cfg.max_keys;
    st->rate = rate_of(m->thr_base);
    st->rate_cuts = m->rate_cuts;
    st->sampled = m->sampled;
    st->accesses = cnt_all(m, &st->access_bytes);
    st->left_out = atomic_load_explicit(&m->out_n, memory_order_relaxed);
    st->left_out_bytes = atomic_load_explicit(&m->out_bytes, memory_order_relaxed);
    st->mem_bytes = sizeof(*m) + m->tab_cap * sizeof(*m->tab) + m->nkeys * ent_bytes(m);
    pthread_mutex_unlock(&m->mu);
}
