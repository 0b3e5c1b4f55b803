/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_pin.c - pinning (pin rules, the pinned-bytes and charge accounting of acct_update(),
 * cache_pin, cache_unpin), explicit eviction (cache_evict), demotion (cache_demote) and the
 * cache's byte counts and statistics.
 *
 * Invariants, lock order and block states of the cache: the top of cache.c.
 */
#include "cache/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_debug.h"
#include "cache/cache_int.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"

/* ---- pinning ------------------------------------------------------------------------------ */

bool pin_counted(const struct cblock *b)
{
    return (b->flags & B_PINNED) && (b->ram || (b->flags & B_ON_DISK));
}

/* Shard lock held; before = pin_counted(b) before the change just made. A pinned block that
 * becomes cached while the pin budget is full is kept unpinned (I5). Then b's charge follows
 * what it is now (I9). */
void acct_update(struct cache *c, struct cblock *b, bool before)
{
    bool now = pin_counted(b);
    if (now && !before) {
        uint64_t old = atomic_fetch_add(&c->pinned_bytes, b->len);
        if (old + b->len > c->cfg.pin_bytes) {
            atomic_fetch_sub(&c->pinned_bytes, b->len);
            b->flags &= ~(unsigned)(B_PINNED | B_PIN_EXPLICIT);
            log_debug("cache: pin budget full, block %" PRIu64 " of %s cached unpinned", b->index,
                      b->key);
        }
    } else if (!now && before) {
        atomic_fetch_sub(&c->pinned_bytes, b->len);
    }
    charge_sync(c, b);
}

/* A rule is a directory prefix when it is "" or ends in '/', and one object's key otherwise:
 * pinning or evicting "d/a.bin" must not touch "d/a.bin.bak". */
static bool key_matches(const char *key, const char *rule)
{
    size_t n = strlen(rule);
    if (n == 0 || rule[n - 1] == '/')
        return !strncmp(key, rule, n);
    return !strcmp(key, rule);
}

static bool prefix_match(const struct cblock *b, const char *be_name, const char *prefix)
{
    return !strcmp(b->be_name, be_name) && key_matches(b->key, prefix);
}

/* pin_mu held. */
bool rules_match(struct cache *c, const char *be_name, const char *key)
{
    for (struct pin_rule *r = c->rules; r; r = r->next)
        if (!strcmp(r->be_name, be_name) && key_matches(key, r->prefix))
            return true;
    return false;
}

/* ---- pin / evict / accounting ------------------------------------------------------------ */

bool cache_pin_exists(struct cache *c, const char *backend_name, const char *prefix)
{
    if (!c || !backend_name || !prefix)
        return false;
    bool found = false;
    pthread_mutex_lock(&c->pin_mu);
    for (struct pin_rule *x = c->rules; x && !found; x = x->next)
        found = !strcmp(x->be_name, backend_name) && !strcmp(x->prefix, prefix);
    pthread_mutex_unlock(&c->pin_mu);
    return found;
}

int cache_pin(struct cache *c, const char *backend_name, const char *prefix)
{
    if (!c || !backend_name || !prefix)
        return -EINVAL;
    int r = 0;
    size_t nrules = 0;
    pthread_mutex_lock(&c->pin_mu);
    for (struct pin_rule *x = c->rules; x; x = x->next, nrules++)
        if (!strcmp(x->be_name, backend_name) && !strcmp(x->prefix, prefix))
            goto out;
    /* every cache_read walks the rules under pin_mu: keep the list short */
    if (nrules >= CACHE_PIN_RULES_MAX) {
        tier_err_set("%zu pin rules exist already (at most %d): unpin some, or pin a common "
                     "parent directory instead",
                     nrules, CACHE_PIN_RULES_MAX);
        r = -EDQUOT;
        goto out;
    }
    uint64_t extra = 0;
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets; k++)
            for (struct cblock *b = s->buckets[k]; b; b = b->hnext)
                if (prefix_match(b, backend_name, prefix) && !(b->flags & B_PINNED) &&
                    (b->ram || (b->flags & B_ON_DISK)))
                    extra += b->len;
        pthread_mutex_unlock(&s->mu);
    }
    if (atomic_load(&c->pinned_bytes) + extra > c->cfg.pin_bytes) {
        tier_err_set("pinning %s:%s needs %" PRIu64 " more bytes, over the pin budget of %" PRIu64,
                     backend_name, prefix, extra, c->cfg.pin_bytes);
        r = -ENOSPC;
        goto out;
    }
    struct pin_rule *rule = calloc(1, sizeof(*rule));
    if (!rule || !(rule->be_name = strdup(backend_name)) || !(rule->prefix = strdup(prefix))) {
        if (rule) {
            free(rule->be_name);
            free(rule);
        }
        r = -ENOMEM;
        goto out;
    }
    rule->next = c->rules;
    c->rules = rule;
    atomic_fetch_add(&c->pin_gen, 1); /* before the walk: see pin_settle() in cache.c */
    pthread_mutex_lock(&c->ram.mu);   /* pinning cached blocks: under both level locks */
    pthread_mutex_lock(&c->disk.mu);
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets; k++) {
            for (struct cblock *b = s->buckets[k]; b; b = b->hnext) {
                if (!prefix_match(b, backend_name, prefix) || (b->flags & B_PINNED))
                    continue;
                bool before = pin_counted(b);
                b->flags |= B_PINNED;
                acct_update(c, b, before);
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&c->disk.mu);
    pthread_mutex_unlock(&c->ram.mu);
out:
    pthread_mutex_unlock(&c->pin_mu);
    return r;
}

int cache_unpin(struct cache *c, const char *backend_name, const char *prefix)
{
    if (!c || !backend_name || !prefix)
        return -EINVAL;
    pthread_mutex_lock(&c->pin_mu);
    struct pin_rule **pp = &c->rules;
    while (*pp && (strcmp((*pp)->be_name, backend_name) || strcmp((*pp)->prefix, prefix)))
        pp = &(*pp)->next;
    struct pin_rule *rule = *pp;
    if (rule) {
        *pp = rule->next;
        free(rule->be_name);
        free(rule->prefix);
        free(rule);
    }
    /* Also clears explicit pins (cache_fetch_block(pin=true)) under the prefix. */
    bool any = rule != NULL;
    atomic_fetch_add(&c->pin_gen, 1); /* before the walk: see pin_settle() in cache.c */
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets; k++) {
            for (struct cblock *b = s->buckets[k]; b; b = b->hnext) {
                if (!(b->flags & B_PINNED) || !prefix_match(b, backend_name, prefix))
                    continue;
                if (rules_match(c, b->be_name, b->key))
                    continue;
                any = true;
                bool before = pin_counted(b);
                b->flags &= ~(unsigned)(B_PINNED | B_PIN_EXPLICIT);
                acct_update(c, b, before);
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&c->pin_mu);
    /* unpinned blocks are charged again: trim every tenant now over its quota */
    for (unsigned t = 0; t < c->cfg.max_tenants; t++) {
        const struct tier_ioctx io = {.tenant = t, .cls = TIER_IO_BACKGROUND};
        quota_check(c, &io);
    }
    return any ? 0 : -ENOENT;
}

long cache_evict(struct cache *c, const char *backend_name, const char *prefix)
{
    if (!c || !backend_name || !prefix)
        return -EINVAL;
    store_drain(c); /* a write-through still queued would bring a block back after this */
    long count = 0;
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        struct cblock *list = NULL, *ram_list = NULL;
        pthread_mutex_lock(&c->ram.mu);
        pthread_mutex_lock(&c->disk.mu);
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets; k++) {
            for (struct cblock *b = s->buckets[k]; b; b = b->hnext) {
                if ((b->flags & B_PINNED) || !prefix_match(b, backend_name, prefix))
                    continue;
                if (!b->ram && !(b->flags & B_ON_DISK))
                    continue;
                /* collect first: the level helpers take the shard lock themselves */
                b->refs++;
                b->enext = ram_list;
                ram_list = b;
                count++;
            }
        }
        pthread_mutex_unlock(&s->mu);
        for (struct cblock *b = ram_list, *nx; b; b = nx) {
            nx = b->enext;
            cdata_unref(drop_held(c, s, b, &list)); /* free() only: no I/O under the locks */
        }
        pthread_mutex_unlock(&c->disk.mu);
        pthread_mutex_unlock(&c->ram.mu);
        finish_unlinks(c, list);
    }
    return count;
}

/* A referenced block and, for a RAM demotion, its RAM buffer (cache_demote). */
struct demote_item {
    struct cblock *b;
    struct cdata *d;
};

static long demote_ram(struct cache *c, struct shard *s, struct demote_item *v, size_t n)
{
    static const struct tier_ioctx io = {.tenant = TIER_TENANT_DEFAULT, .cls = TIER_IO_BACKGROUND};
    long moved = 0;
    for (size_t i = 0; i < n; i++) {
        struct cblock *b = v[i].b;
        pthread_mutex_lock(&s->mu);
        bool on = (b->flags & B_ON_DISK) != 0;
        pthread_mutex_unlock(&s->mu);
        if (!on)
            disk_store(c, &io, b, v[i].d); /* a no-op without a disk level or room */
        struct cdata *drop = NULL;
        /* disk.mu too: a disk eviction (disk_reserve holds only disk.mu) must not take the disk
         * copy between this check and the RAM copy's removal */
        pthread_mutex_lock(&c->ram.mu);
        pthread_mutex_lock(&c->disk.mu);
        pthread_mutex_lock(&s->mu);
        on = (b->flags & B_ON_DISK) != 0;
        pthread_mutex_unlock(&s->mu);
        if (on && b->ram) { /* b->ram changes only under ram.mu (I2), held */
            drop = ram_remove(c, b, false);
            moved++;
        }
        pthread_mutex_unlock(&c->disk.mu);
        pthread_mutex_unlock(&c->ram.mu);
        cdata_unref(drop);
        cdata_unref(v[i].d);
    }
    return moved;
}

static long demote_disk(struct cache *c, struct shard *s, struct demote_item *v, size_t n)
{
    long dropped = 0;
    struct cblock *list = NULL;
    pthread_mutex_lock(&c->disk.mu);
    for (size_t i = 0; i < n; i++) {
        struct cblock *b = v[i].b;
        pthread_mutex_lock(&s->mu);
        /* ON_DISK is set and cleared under disk.mu, held: still true at disk_detach */
        bool on = (b->flags & B_ON_DISK) && !(b->flags & (B_PINNED | B_HINTED));
        pthread_mutex_unlock(&s->mu);
        if (on) {
            disk_detach(c, b, false, &list);
            dropped++;
        }
    }
    pthread_mutex_unlock(&c->disk.mu);
    finish_unlinks(c, list);
    return dropped;
}

long cache_demote(struct cache *c, const char *backend_name, const char *prefix,
                  enum cache_level from)
{
    if (!c || !backend_name || !prefix || (from != CACHE_LEVEL_RAM && from != CACHE_LEVEL_DISK))
        return -EINVAL;
    store_drain(c); /* a queued write-through is a disk copy about to exist */
    long count = 0;
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        struct demote_item *v = NULL;
        size_t n = 0, cap = 0;
        int rc = 0;
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets && !rc; k++) {
            for (struct cblock *b = s->buckets[k]; b && !rc; b = b->hnext) {
                if ((b->flags & B_PINNED) || !prefix_match(b, backend_name, prefix))
                    continue;
                if (from == CACHE_LEVEL_RAM ? !b->ram
                                            : !(b->flags & B_ON_DISK) || (b->flags & B_HINTED))
                    continue;
                if (n == cap) {
                    size_t nc = cap ? 2 * cap : 16;
                    struct demote_item *nv = realloc(v, nc * sizeof(*v));
                    if (!nv) {
                        rc = -ENOMEM;
                        break;
                    }
                    v = nv;
                    cap = nc;
                }
                b->refs++;
                v[n++] =
                    (struct demote_item){b, from == CACHE_LEVEL_RAM ? cdata_ref(b->ram) : NULL};
            }
        }
        pthread_mutex_unlock(&s->mu);
        count += from == CACHE_LEVEL_RAM ? demote_ram(c, s, v, n) : demote_disk(c, s, v, n);
        pthread_mutex_lock(&s->mu);
        for (size_t j = 0; j < n; j++) {
            v[j].b->refs--;
            maybe_free(s, v[j].b);
        }
        pthread_mutex_unlock(&s->mu);
        free(v);
        if (rc)
            return rc;
    }
    return count;
}

size_t cache_block_size(const struct cache *c)
{
    return c->cfg.block_size;
}

/* The bytes of obj's blocks [first, end) that have a copy in RAM (want 1), on disk (2), or
 * either (3). */
static uint64_t blocks_bytes(struct cache *c, const struct cache_obj *obj, uint64_t first,
                             uint64_t end, unsigned want)
{
    if (!c || !obj_ok(obj))
        return 0;
    uint64_t total = 0;
    uint64_t nblocks = (obj->size_bytes + c->cfg.block_size - 1) / c->cfg.block_size;
    if (end > nblocks)
        end = nblocks;
    for (uint64_t i = first; i < end; i++) {
        uint8_t id[16];
        if (cache_block_id(c, obj->be->name, obj->key, obj->etag, i, id) < 0)
            return 0;
        struct shard *s = shard_of(c, id);
        pthread_mutex_lock(&s->mu);
        struct cblock *b = obj_lookup(c, s, id, obj, i, NULL);
        if (b && (((want & 1) && b->ram) || ((want & 2) && (b->flags & B_ON_DISK))))
            total += b->len;
        pthread_mutex_unlock(&s->mu);
    }
    return total;
}

uint64_t cache_cached_bytes(struct cache *c, const struct cache_obj *obj)
{
    return blocks_bytes(c, obj, 0, UINT64_MAX, 3);
}

bool cache_block_cached(struct cache *c, const struct cache_obj *obj, uint64_t index)
{
    return index < UINT64_MAX && blocks_bytes(c, obj, index, index + 1, 3) > 0;
}

uint64_t cache_level_bytes(struct cache *c, const struct cache_obj *obj, enum cache_level l)
{
    return blocks_bytes(c, obj, 0, UINT64_MAX,
                        l == CACHE_LEVEL_RAM    ? 1
                        : l == CACHE_LEVEL_DISK ? 2
                                                : 0);
}

static void level_stats(struct level *l, struct cache_level_stats *o)
{
    pthread_mutex_lock(&l->mu);
    o->bytes_used = l->used;
    o->blocks = l->pol ? policy_count(l->pol) : 0;
    pthread_mutex_unlock(&l->mu);
    o->bytes_budget = l->budget;
    o->hits = atomic_load(&l->hits);
    o->misses = atomic_load(&l->misses);
    o->evictions = atomic_load(&l->evictions);
    o->bytes_read = atomic_load(&l->bytes_read);
}

void cache_stats_get(struct cache *c, struct cache_stats *st)
{
    memset(st, 0, sizeof(*st));
    level_stats(&c->ram, &st->ram);
    level_stats(&c->disk, &st->disk);
    st->fetches = atomic_load(&c->fetches);
    st->fetch_bytes = atomic_load(&c->fetch_bytes);
    st->fetch_errors = atomic_load(&c->fetch_errors);
    st->peer_fetches = atomic_load(&c->peer_fetches);
    st->peer_bytes = atomic_load(&c->peer_bytes);
    st->fetch_ns_total = atomic_load(&c->fetch_ns);
    st->singleflight_waits = atomic_load(&c->sf_waits);
    pthread_mutex_lock(&c->fetch_mu);
    st->fetch_buffers_now = c->fetch_bufs_now;
    st->fetch_buffers_peak = c->fetch_bufs_peak;
    st->fetch_slot_waits = c->fetch_slot_waits;
    pthread_mutex_unlock(&c->fetch_mu);
    st->max_fetches = (uint64_t)c->cfg.max_fetches;
    st->pinned_bytes = atomic_load(&c->pinned_bytes);
    st->pin_budget = c->cfg.pin_bytes;
    st->checksum_failures = atomic_load(&c->csum_failures);
    st->disk_store_skipped = atomic_load(&c->store_skipped);
    st->disk_store_async = atomic_load(&c->store_async_n);
    st->disk_store_inline = atomic_load(&c->store_inline_n);
    pthread_mutex_lock(&c->pf_mu);
    st->prefetch_inflight = (uint64_t)c->pf_active;
    st->prefetch_inflight_peak = (uint64_t)c->pf_active_peak;
    pthread_mutex_unlock(&c->pf_mu);
    pthread_mutex_lock(&c->est_mu);
    st->readahead_rate_bps = c->ra_last_rate_bps;
    st->readahead_fetch_ns = c->ra_last_fetch_ns;
    st->readahead_window = c->ra_last_window;
    st->readahead_window_peak = c->ra_window_peak;
    pthread_mutex_unlock(&c->est_mu);
    st->quota_evictions = atomic_load(&c->quota_evictions);
    st->hinted_bytes = atomic_load(&c->hinted_bytes);
    struct disk_fdcache_stats fs;
    disk_fdcache_stats_get(c->fds, &fs);
    st->disk_fd_hits = fs.hits;
    st->disk_fd_opens = fs.opens;
    st->disk_reads_unhashed = fs.unhashed;
    pthread_mutex_lock(&c->own_mu);
    for (unsigned t = 0; t < c->cfg.max_tenants; t++)
        st->charged_bytes += atomic_load(&c->qt[t].held) + atomic_load(&c->qt[t].hinted);
    pthread_mutex_unlock(&c->own_mu);
}

void cache_set_fetch_hook(struct cache *c, const struct cache_fetch_hook *hook)
{
    pthread_mutex_lock(&c->hook_mu);
    if (hook)
        c->hook = *hook;
    else
        memset(&c->hook, 0, sizeof(c->hook));
    pthread_mutex_unlock(&c->hook_mu);
}

void cache_set_peer_source(struct cache *c, const struct cache_peer_source *src)
{
    pthread_mutex_lock(&c->hook_mu);
    if (src)
        c->peer = *src;
    else
        memset(&c->peer, 0, sizeof(c->peer));
    while (c->peer_calls) /* the previous source's calls end before it may go */
        pthread_cond_wait(&c->peer_cv, &c->hook_mu);
    pthread_mutex_unlock(&c->hook_mu);
}
