/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched_cache.c - glue between the scheduling point and the block cache: sched_attach_cache()
 * installs a cache fetch hook that admits every backend block fetch through sched_admit() and
 * reports it with sched_done(). Kept apart from sched.c so that users of the scheduler alone do
 * not drag the cache into their link. No state of its own; thread-safety is sched.c's.
 */
#include "qos/sched.h"

#include <sys/types.h>

#include "cache/cache.h"

static void hook_before(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                        uint64_t index, size_t bytes)
{
    (void)obj;
    (void)index;
    sched_admit(ud, io, bytes);
}

static void hook_after(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                       uint64_t index, ssize_t result, uint64_t latency_ns)
{
    (void)obj;
    (void)index;
    /* A fetch's result is the number of bytes it brought in, or -errno. */
    sched_done(ud, io, result > 0 ? (size_t)result : 0, (long)result, latency_ns);
}

void sched_attach_cache(struct sched *s, struct cache *c)
{
    struct cache_fetch_hook hook = {.before = hook_before, .after = hook_after, .ud = s};
    cache_set_fetch_hook(c, &hook);
}
