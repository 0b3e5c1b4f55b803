/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_mrc.c - the cache's miss-ratio curves (cache.h cache_mrc_curve, docs/ADVICE.md): one for
 * the node and one per tenant, each an online curve of src/cache/mrc.c running the cache's own
 * policy (cfg.policy) over the demand accesses of cache_read (a read's new access to a block, as
 * the level's policy counts one: a read that continues where the last one of the block ended is
 * not), keyed by the block's identity hash. Prefetch, staging, hinted and peer fetches are not
 * accesses: the curves predict what the readers would hit.
 *
 * A tenant's curve is made at its first access and kept until cache_close (max_tenants of them
 * at most); c->mrc_tenant[t] is set once by compare-and-swap, so a reader never takes a lock to
 * find it, and a sampled access takes only its curve's mutex (mrc.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_int.h"
#include "common/err.h"
#include "common/log.h"

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
    if (!c->mrc_tenant)
        return -ENOMEM;
    int r = mrc_make(c, &c->mrc_node);
    if (r < 0)
        return r;
    c->mrc_on = true;
    return 0;
}

void mrc_teardown(struct cache *c)
{
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

void mrc_feed(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
              uint64_t index, uint32_t bytes)
{
    uint8_t id[16];
    if (cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id) < 0)
        return;
    uint64_t h;
    memcpy(&h, id, sizeof(h)); /* keyed and uniform: the sampling needs no other hash */
    mrc_access(c->mrc_node, h, bytes);
    uint32_t t = io ? io->tenant : TIER_TENANT_DEFAULT;
    if (t < c->cfg.max_tenants) {
        struct mrc *m = tenant_curve(c, t, true);
        if (m)
            mrc_access(m, h, bytes);
    }
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
    struct mrc_stats st;
    mrc_stats_get(m, &st);
    *accesses = st.accesses;
    *bytes = st.access_bytes;
    return 0;
}
