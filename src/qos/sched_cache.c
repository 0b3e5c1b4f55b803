/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched_cache.c - glue between the scheduling point and the block cache: sched_attach_cache()
 * installs a cache fetch hook that admits every backend block fetch. A fetch from a backend
 * wrapped by this scheduler (sched_backend_wrap) is admitted by the wrapper itself, in the
 * backend's own lane, when the cache calls backend_read(): the hook only declares the fetch's
 * class for that call, so a hung backend never holds slots other backends need. A fetch from any
 * other backend is admitted in the default lane here, as sched_admit() does. Kept apart from
 * sched.c so that users of the scheduler alone do not drag the cache into their link. No state
 * of its own; thread-safety is sched.c's.
 */
#include "qos/sched.h"

#include <sys/types.h>

#include "cache/cache.h"

static void hook_before(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                        uint64_t index, size_t bytes)
{
    (void)index;
    if (sched_backend_lane(ud, obj->be))
        sched_thread_io_set(io ? io : &TIER_IOCTX_DEFAULT);
    else
        sched_admit(ud, io, bytes);
}

static void hook_after(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                       uint64_t index, ssize_t result, uint64_t latency_ns)
{
    (void)index;
    if (sched_backend_lane(ud, obj->be)) {
        sched_thread_io_set(NULL);
        return;
    }
    /* A fetch's result is the number of bytes it brought in, or -errno. */
    sched_done(ud, io, result > 0 ? (size_t)result : 0, (long)result, latency_ns);
}

void sched_attach_cache(struct sched *s, struct cache *c)
{
    struct cache_fetch_hook hook = {.before = hook_before, .after = hook_after, .ud = s};
    cache_set_fetch_hook(c, &hook);
}
