/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_quota.c - the cache's space quotas per tenant (I9): charge lists, claiming an unowned
 * block, quota eviction of a tenant's own blocks, and the quota and tenant-stats calls of cache.h.
 *
 * SPACE QUOTAS (cache.h, cache_quota_set): each block has an owner, the tenant whose request
 * created it (a block adopted from disk at open has none until a tenant reads it: owner_touch()).
 * A tenant's charged blocks form its charge list, oldest charge first. When a read leaves its
 * tenant over quota, quota_enforce() walks that list CLOCK-wise (a block hit since it was last
 * passed gets one more round) and evicts the tenant's own blocks from both levels until it fits;
 * nothing of another tenant is evicted. The eviction runs in the reader's call, with no lock
 * held across its unlinks (I8), as the levels' own evictions do.
 *
 * Invariants, lock order and block states of the cache: the top of cache.c.
 */
#include "cache/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cache/cache_debug.h"
#include "cache/cache_int.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"

/* ---- space quotas (I9) -------------------------------------------------------------------- */

static bool owned_cached(const struct cache *c, const struct cblock *b)
{
    return b->owner < c->cfg.max_tenants && (b->ram || (b->flags & B_ON_DISK)) &&
           !(b->flags & B_PINNED);
}

bool charge_due(const struct cache *c, const struct cblock *b)
{
    return owned_cached(c, b) && !(b->flags & B_HINTED);
}

bool hcharge_due(const struct cache *c, const struct cblock *b)
{
    return owned_cached(c, b) && (b->flags & B_HINTED);
}

/* own_mu held. */
static void qlist_unlink(struct qtenant *q, struct cblock *b)
{
    if (b->qprev)
        b->qprev->qnext = b->qnext;
    else
        q->head = b->qnext;
    if (b->qnext)
        b->qnext->qprev = b->qprev;
    else
        q->tail = b->qprev;
    b->qprev = b->qnext = NULL;
}

/* own_mu held. */
static void qlist_append(struct qtenant *q, struct cblock *b)
{
    b->qnext = NULL;
    b->qprev = q->tail;
    if (q->tail)
        q->tail->qnext = b;
    else
        q->head = b;
    q->tail = b;
}

/* Shard lock held: make b's charge match charge_due() and hcharge_due() (I9, I10). A block
 * that left its last level also stops being hinted here. */
void charge_sync(struct cache *c, struct cblock *b)
{
    if ((b->flags & B_HINTED) && !b->ram && !(b->flags & B_ON_DISK)) {
        b->flags &= ~(unsigned)B_HINTED;
        b->nhints = 0;
        atomic_fetch_sub(&c->hinted_bytes, b->len);
    }
    bool hdue = hcharge_due(c, b);
    if (hdue != b->hcharged) {
        pthread_mutex_lock(&c->own_mu);
        struct qtenant *hq = &c->qt[b->owner];
        atomic_store_explicit(&hq->hinted,
                              hdue ? atomic_load(&hq->hinted) + b->len
                                   : atomic_load(&hq->hinted) - b->len,
                              memory_order_relaxed);
        b->hcharged = hdue;
        pthread_mutex_unlock(&c->own_mu);
    }
    bool due = charge_due(c, b);
    if (due == b->charged)
        return;
    struct qtenant *q = &c->qt[b->owner];
    pthread_mutex_lock(&c->own_mu);
    if (due) {
        qlist_append(q, b);
        atomic_store_explicit(&q->held, atomic_load(&q->held) + b->len, memory_order_relaxed);
        q->blocks++;
    } else {
        qlist_unlink(q, b);
        atomic_store_explicit(&q->held, atomic_load(&q->held) - b->len, memory_order_relaxed);
        q->blocks--;
    }
    atomic_store_explicit(&b->qhit, false, memory_order_relaxed);
    b->charged = due;
    pthread_mutex_unlock(&c->own_mu);
}

/* Shard lock held: charge b to tenant t from now on (a hint holds it for t). */
void charge_move(struct cache *c, struct cblock *b, uint32_t t)
{
    pthread_mutex_lock(&c->own_mu);
    if (b->charged) {
        struct qtenant *q = &c->qt[b->owner];
        qlist_unlink(q, b);
        atomic_store_explicit(&q->held, atomic_load(&q->held) - b->len, memory_order_relaxed);
        q->blocks--;
        b->charged = false;
    }
    if (b->hcharged) {
        struct qtenant *q = &c->qt[b->owner];
        atomic_store_explicit(&q->hinted, atomic_load(&q->hinted) - b->len, memory_order_relaxed);
        b->hcharged = false;
    }
    b->owner = t;
    pthread_mutex_unlock(&c->own_mu);
}

/* Shard lock held, b cached and read by io: note the hit for the quota's CLOCK, and charge a
 * block nobody owns (one adopted from disk at open) to the reader. */
void owner_touch(struct cache *c, struct cblock *b, const struct tier_ioctx *io)
{
    if (b->charged)
        atomic_store_explicit(&b->qhit, true, memory_order_relaxed);
    else if (b->owner == CACHE_OWNER_NONE && io && io->tenant < c->cfg.max_tenants) {
        pthread_mutex_lock(&c->own_mu);
        b->owner = io->tenant;
        pthread_mutex_unlock(&c->own_mu);
        charge_sync(c, b);
    }
}

/* ram.mu and disk.mu held, b referenced by the caller (refs++ under its shard lock s): take b
 * out of both levels (an explicit drop: no ghost), then let go of the reference. Returns its RAM
 * buffer to unref and adds its file to *list for finish_unlinks(), both after the level locks
 * are dropped. */
struct cdata *drop_held(struct cache *c, struct shard *s, struct cblock *b, struct cblock **list)
{
    struct cdata *d = NULL;
    if (b->ram) /* b->ram changes only under ram.mu (I2), held */
        d = ram_remove(c, b, false);
    pthread_mutex_lock(&s->mu);
    bool on = (b->flags & B_ON_DISK) != 0;
    /* a write-through may still be queued, or a write outside a load (store_held, cache_demote)
     * in flight: it must not bring b back (load_end or that write clears the mark) */
    if (b->flags & (B_FETCHING | B_DISK_IO))
        b->flags |= B_STORE_CANCEL;
    pthread_mutex_unlock(&s->mu);
    if (on)
        disk_detach(c, b, false, list);
    pthread_mutex_lock(&s->mu);
    b->refs--;
    maybe_free(s, b);
    pthread_mutex_unlock(&s->mu);
    return d;
}

/* No lock held. Evict the block with identity id from both levels if it is still charged to
 * tenant t. Returns its bytes, or 0 when it is no longer t's (a race: the caller looks again). */
static uint32_t quota_evict_one(struct cache *c, const uint8_t id[16], uint32_t t)
{
    struct shard *s = shard_of(c, id);
    struct cblock *list = NULL;
    struct cdata *d = NULL;
    uint32_t len = 0;
    pthread_mutex_lock(&c->ram.mu);
    pthread_mutex_lock(&c->disk.mu);
    pthread_mutex_lock(&s->mu);
    struct cblock *b = shard_lookup(s, id);
    /* charged implies not pinned, and a cached block is pinned only under both level locks
     * (held here): it cannot become pinned before it is out */
    if (b && b->charged && b->owner == t) {
        b->refs++;
        len = b->len;
    }
    pthread_mutex_unlock(&s->mu);
    if (len)
        d = drop_held(c, s, b, &list);
    pthread_mutex_unlock(&c->disk.mu);
    pthread_mutex_unlock(&c->ram.mu);
    finish_unlinks(c, list);
    cdata_unref(d);
    return len;
}

/* Second chances one quota_enforce() call gives at most: a tenant whose whole list is hot pays a
 * bounded walk per over-quota read under own_mu, which every tenant's charge takes too. */
#define QUOTA_CHANCES_MAX 64

/* No lock held. Evict tenant t's own blocks until its held bytes fit its quota: the head of its
 * charge list goes unless it was hit since it was last passed (then it moves to the tail, its
 * bit cleared). The walk is bounded: after QUOTA_CHANCES_MAX second chances the head goes
 * whatever its bit. */
static void quota_enforce(struct cache *c, uint32_t t)
{
    struct qtenant *q = &c->qt[t];
    uint64_t chances = 0;
    for (;;) {
        uint8_t id[16];
        pthread_mutex_lock(&c->own_mu);
        uint64_t limit = atomic_load(&q->limit);
        struct cblock *b = q->head;
        uint64_t used = tier_sum_sat(atomic_load(&q->held), atomic_load(&q->hinted));
        if (used <= limit || !b) {
            pthread_mutex_unlock(&c->own_mu);
            return;
        }
        if (atomic_load_explicit(&b->qhit, memory_order_relaxed) && q->head != q->tail &&
            chances < QUOTA_CHANCES_MAX) {
            atomic_store_explicit(&b->qhit, false, memory_order_relaxed);
            qlist_unlink(q, b);
            qlist_append(q, b);
            chances++;
            pthread_mutex_unlock(&c->own_mu);
            continue;
        }
        memcpy(id, b->id, sizeof(id));
        pthread_mutex_unlock(&c->own_mu);
        uint32_t n = quota_evict_one(c, id, t);
        if (n) {
            pthread_mutex_lock(&c->own_mu);
            q->evictions++;
            q->evicted += n;
            pthread_mutex_unlock(&c->own_mu);
            atomic_fetch_add_explicit(&c->quota_evictions, 1, memory_order_relaxed);
        }
    }
}

/* No lock held: after a request of io's tenant, evict its own blocks if it is over quota. One
 * relaxed load each when it is not (the common case). */
void quota_check(struct cache *c, const struct tier_ioctx *io)
{
    uint32_t t = io ? io->tenant : TIER_TENANT_DEFAULT;
    if (t >= c->cfg.max_tenants)
        return;
    struct qtenant *q = &c->qt[t];
    if (tier_sum_sat(atomic_load_explicit(&q->held, memory_order_relaxed),
                     atomic_load_explicit(&q->hinted, memory_order_relaxed)) >
        atomic_load_explicit(&q->limit, memory_order_relaxed))
        quota_enforce(c, t);
}

int cache_quota_set(struct cache *c, uint32_t tenant, uint64_t bytes)
{
    if (!c || tenant >= c->cfg.max_tenants) {
        tier_err_set("tenant id %" PRIu32 " out of range (the cache keeps %u tenants apart)",
                     tenant, c ? c->cfg.max_tenants : 0);
        return -EINVAL;
    }
    struct qtenant *q = &c->qt[tenant];
    uint64_t limit = bytes == CACHE_QUOTA_DEFAULT
                         ? (c->cfg.default_quota ? c->cfg.default_quota : UINT64_MAX)
                         : bytes;
    atomic_store(&q->limit, limit);
    const struct tier_ioctx io = {.tenant = tenant, .cls = TIER_IO_BACKGROUND};
    quota_check(c, &io);
    return 0;
}

int cache_tenant_stats_get(struct cache *c, uint32_t tenant, struct cache_tenant_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!c || tenant >= c->cfg.max_tenants)
        return -EINVAL;
    struct qtenant *q = &c->qt[tenant];
    pthread_mutex_lock(&c->own_mu);
    uint64_t limit = atomic_load(&q->limit);
    out->quota = limit == UINT64_MAX ? 0 : limit;
    out->hinted_bytes = atomic_load(&q->hinted);
    out->bytes = atomic_load(&q->held) + out->hinted_bytes;
    out->blocks = q->blocks;
    out->quota_evictions = q->evictions;
    out->quota_evicted_bytes = q->evicted;
    pthread_mutex_unlock(&c->own_mu);
    return 0;
}

int cache_tenant_fold(struct cache *c, uint32_t tenant, uint32_t into)
{
    if (!c || tenant >= c->cfg.max_tenants || into >= c->cfg.max_tenants || tenant == into)
        return -EINVAL;
    pthread_mutex_lock(&c->own_mu);
    struct qtenant *q = &c->qt[tenant], *to = &c->qt[into];
    to->evictions += q->evictions;
    to->evicted += q->evicted;
    q->evictions = q->evicted = 0;
    pthread_mutex_unlock(&c->own_mu);
    /* the id's next tenant starts a curve of its own (its demand too: the advice loop takes
     * differences of it; what the old one left queued is simulated first) */
    mrc_tenant_reset(c, tenant);
    return 0;
}

unsigned cache_max_tenants(const struct cache *c)
{
    return c ? c->cfg.max_tenants : 0;
}

uint64_t cache_hint_share(const struct cache *c)
{
    return c ? c->hinted_max : 0;
}
