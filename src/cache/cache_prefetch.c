/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_prefetch.c - the cache's prefetch pool: a bounded queue of blocks to load and the
 * worker threads (pf_worker()) that load them as cache_fetch_block does; cache_prefetch,
 * cache_prefetch_cancel, cache_prefetch_owned. pf_mu guards the queue. Also the read-ahead
 * sizing from the bandwidth-delay product (cache_bdp_blocks, cache_readahead_window) over each
 * backend's measured block fetch time (fetch_est_note, from backend_fetch); est_mu guards it.
 *
 * Invariants, lock order and block states of the cache: the top of cache.c.
 */
#include "cache/cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_debug.h"
#include "cache/cache_int.h"
#include "common/log.h"
#include "common/strutil.h"

#define PREFETCH_QUEUE 64

/* ---- prefetch ----------------------------------------------------------------------------- */

void pf_item_free(struct pf_item *it)
{
    if (!it)
        return;
    free(it->key);
    free(it->etag);
    free(it->version_id);
    free(it);
}

void *pf_worker(void *arg)
{
    struct cache *c = arg;
    pthread_mutex_lock(&c->pf_mu);
    for (;;) {
        while (!c->pf_head && !c->pf_stop)
            pthread_cond_wait(&c->pf_cv, &c->pf_mu);
        if (c->pf_stop)
            break;
        struct pf_item *it = c->pf_head;
        c->pf_head = it->next;
        if (!c->pf_head)
            c->pf_tail = NULL;
        c->pf_len--;
        if (++c->pf_active > c->pf_active_peak)
            c->pf_active_peak = c->pf_active;
        pthread_mutex_unlock(&c->pf_mu);
        struct cache_obj obj = {.be = it->be,
                                .key = it->key,
                                .etag = it->etag,
                                .size_bytes = it->size,
                                .version_id = it->version_id};
        int r = fetch_block(c, &it->io, &obj, it->index, false, true);
        if (r < 0)
            log_debug("cache: prefetch of block %" PRIu64 " of %s failed: %s", it->index, it->key,
                      strerror(-r));
        pf_item_free(it);
        pthread_mutex_lock(&c->pf_mu);
        c->pf_active--;
    }
    pthread_mutex_unlock(&c->pf_mu);
    return NULL;
}

static bool block_present(struct cache *c, const struct cache_obj *obj, uint64_t index)
{
    uint8_t id[16];
    if (cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id) < 0)
        return true;
    struct shard *s = shard_of(c, id);
    pthread_mutex_lock(&s->mu);
    struct cblock *b = obj_lookup(c, s, id, obj, index, NULL);
    bool present = b && (b->ram || (b->flags & (B_ON_DISK | B_FETCHING)));
    pthread_mutex_unlock(&s->mu);
    return present;
}

uint64_t cache_prefetch(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                        uint64_t first, uint64_t count)
{
    return cache_prefetch_owned(c, io, obj, first, count, NULL);
}

void cache_prefetch_cancel(struct cache *c, const void *owner)
{
    if (!c || !owner)
        return;
    struct pf_item *gone = NULL;
    pthread_mutex_lock(&c->pf_mu);
    struct pf_item **pp = &c->pf_head, *prev = NULL;
    while (*pp) {
        struct pf_item *it = *pp;
        if (it->owner == owner) {
            *pp = it->next;
            c->pf_len--;
            it->next = gone;
            gone = it;
        } else {
            prev = it;
            pp = &it->next;
        }
    }
    c->pf_tail = prev;
    pthread_mutex_unlock(&c->pf_mu);
    while (gone) {
        struct pf_item *nx = gone->next;
        pf_item_free(gone);
        gone = nx;
    }
}

uint64_t cache_prefetch_owned(struct cache *c, const struct tier_ioctx *io,
                              const struct cache_obj *obj, uint64_t first, uint64_t count,
                              const void *owner)
{
    if (!c || !obj_ok(obj) || !c->pf_nthreads)
        return 0;
    uint64_t nblocks = (obj->size_bytes + c->cfg.block_size - 1) / c->cfg.block_size;
    uint64_t i = first;
    for (; i < nblocks && i - first < count; i++) {
        if (block_present(c, obj, i))
            continue;
        pthread_mutex_lock(&c->pf_mu);
        bool full = c->pf_len >= PREFETCH_QUEUE || c->pf_stop;
        pthread_mutex_unlock(&c->pf_mu);
        if (full)
            break; /* advisory: drop the rest */
        struct pf_item *it = calloc(1, sizeof(*it));
        if (!it || !(it->key = strdup(obj->key)) || !(it->etag = strdup(obj->etag)) ||
            (obj->version_id && !(it->version_id = strdup(obj->version_id)))) {
            pf_item_free(it);
            break;
        }
        it->be = obj->be;
        it->size = obj->size_bytes;
        it->index = i;
        it->io = io ? *io : TIER_IOCTX_DEFAULT;
        it->owner = owner;
        pthread_mutex_lock(&c->pf_mu);
        if (c->pf_len >= PREFETCH_QUEUE || c->pf_stop) {
            pthread_mutex_unlock(&c->pf_mu);
            pf_item_free(it);
            break;
        }
        if (c->pf_tail)
            c->pf_tail->next = it;
        else
            c->pf_head = it;
        c->pf_tail = it;
        c->pf_len++;
        pthread_cond_signal(&c->pf_cv);
        pthread_mutex_unlock(&c->pf_mu);
    }
    return i > first ? i - first : 0;
}

/* ---- read-ahead sizing ---------------------------------------------------------------------- */

#define BDP_HEADROOM 2 /* the window is refilled at its mark only: twice the bytes in flight */

uint64_t cache_bdp_blocks(uint64_t rate_bps, uint64_t fetch_ns, uint64_t block_bytes,
                          uint64_t min_blocks, uint64_t max_blocks)
{
    if (max_blocks < min_blocks)
        max_blocks = min_blocks;
    if (!rate_bps || !fetch_ns || !block_bytes)
        return min_blocks;
    /* in double: rate x time overflows 64 bits for a fast reader over a slow link */
    double blocks =
        (double)rate_bps * ((double)fetch_ns / 1e9) * BDP_HEADROOM / (double)block_bytes;
    if (blocks >= (double)max_blocks)
        return max_blocks;
    uint64_t n = (uint64_t)blocks;
    if ((double)n < blocks)
        n++;
    return n < min_blocks ? min_blocks : n;
}

void fetch_est_note(struct cache *c, const struct backend *be, uint64_t ns)
{
    pthread_mutex_lock(&c->est_mu);
    struct fetch_est *e = c->est;
    while (e && e->be != be)
        e = e->next;
    if (!e && (e = calloc(1, sizeof(*e)))) {
        e->be = be;
        e->next = c->est;
        c->est = e;
    }
    if (e) {
        if (!e->samples++)
            e->ns = ns;
        else if (ns >= e->ns)
            e->ns += (ns - e->ns) / 8;
        else
            e->ns -= (e->ns - ns) / 8;
    }
    pthread_mutex_unlock(&c->est_mu);
}

void fetch_est_free(struct cache *c)
{
    while (c->est) {
        struct fetch_est *nx = c->est->next;
        free(c->est);
        c->est = nx;
    }
}

uint64_t cache_readahead_window(struct cache *c, const struct backend *be, uint64_t rate_bps,
                                uint64_t min_blocks, uint64_t max_blocks)
{
    if (!c || !be)
        return 0;
    pthread_mutex_lock(&c->est_mu);
    struct fetch_est *e = c->est;
    while (e && e->be != be)
        e = e->next;
    uint64_t w = 0;
    if (e) {
        w = cache_bdp_blocks(rate_bps, e->ns, c->cfg.block_size, min_blocks, max_blocks);
        c->ra_last_rate_bps = rate_bps;
        c->ra_last_fetch_ns = e->ns;
        c->ra_last_window = w;
        if (w > c->ra_window_peak)
            c->ra_window_peak = w;
    }
    pthread_mutex_unlock(&c->est_mu);
    return w;
}
