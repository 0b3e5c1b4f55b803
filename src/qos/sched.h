/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched.h - the single scheduling point every backend request passes before it is sent.
 *
 * Today: a bounded number of backend requests in flight (max_inflight), granted in class
 * priority (interactive before streaming before checkpoint before background) with a bound on
 * starvation (starve_limit) and FIFO within a class, with per-class and per-tenant counters.
 * Per-tenant rate limits and reservations (the QoS issue) plug in here without touching callers,
 * because every caller already passes its struct tier_ioctx.
 *
 * Thread-safe: one mutex + one condvar per class; admission may block the caller.
 */
#ifndef TIER_QOS_SCHED_H
#define TIER_QOS_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "common/ioctx.h"

struct cache;
struct sched;

struct sched_config {
    int max_inflight; /* backend requests in flight at once; default 32 */
    /* Grants a waiting class may be passed over by higher classes before its head goes first
     * (a bound on starvation, so a reader waiting on a background fetch of the same block never
     * waits forever); default 64. */
    int starve_limit;
};

struct sched_class_stats {
    uint64_t admitted, completed, errors;
    uint64_t bytes;
    uint64_t wait_ns_total;    /* time spent queued at admission */
    uint64_t service_ns_total; /* time from admission to completion */
    uint64_t queued_now, inflight_now;
};

struct sched_stats {
    struct sched_class_stats cls[TIER_IO_NCLASSES];
};

int sched_new(const struct sched_config *cfg, struct sched **out);
void sched_free(struct sched *s); /* NULL is a no-op */

/* Block until the request may go; returns the queueing time in ns. */
uint64_t sched_admit(struct sched *s, const struct tier_ioctx *io, size_t bytes);
/* Report completion of an admitted request (result < 0 = error). */
void sched_done(struct sched *s, const struct tier_ioctx *io, size_t bytes, long result,
                uint64_t service_ns);

/* Install this scheduler as the cache's fetch hook, so every cache miss is admitted here. */
void sched_attach_cache(struct sched *s, struct cache *c);

void sched_stats_get(struct sched *s, struct sched_stats *st);

#endif
