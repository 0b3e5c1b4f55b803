/* SPDX-License-Identifier: Apache-2.0 */
/*
 * advisor.h - the hot-tier advice loop (docs/ADVICE.md): every interval it measures each
 * tenant's demand, stall and curve through its context, computes the advice (advice.h) and keeps
 * the latest for GET /v1/advice; with auto_quota it moves the tenants' hot-tier quotas toward the
 * advised split.
 *
 * THE LOOP (advisor_tick, one per interval; a thread calls it, tests call it with their clock):
 *   1. for each tenant id with a curve: its demand (bytes its reads asked for) and its stall
 *      report's wait and compute, as the differences of the cumulative counters since the last
 *      tick; its share now (its quota, or what it holds without one); its weight and minimum;
 *   2. advice_compute over the tenants active in this interval (demand > 0), the hot tier being
 *      ctx.hot_bytes less what the other tenants hold (they keep it, and their quotas);
 *   3. auto_quota (off by default): when the split's predicted cost is below the cost at the
 *      shares now by more than `hysteresis` (default 5 %), each tenant's quota moves `step`
 *      (default half) of the way to its split share, rounded to a block; a change smaller than
 *      1/64 of the hot tier is not made. Quotas never go below a tenant's minimum. So quotas
 *      settle where the model sees no gain worth moving for, and a noisy curve does not make
 *      them swing back and forth. Every change is logged and counted.
 *
 * Thread-safety: every function may be called from any thread. Rounds (advisor_tick) run one at a
 * time; advisor_get and advisor_quota_changes never wait for a round in progress (they see the
 * last one finished). The context's callbacks are called from the round, with the round's lock
 * held: they must not call advisor_tick.
 */
#ifndef TIER_ADVICE_ADVISOR_H
#define TIER_ADVICE_ADVISOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "advice/advice.h"

#define ADVISOR_NAME_MAX 64

/* What the context reports of one tenant id at a tick. */
struct advisor_tenant {
    char name[ADVISOR_NAME_MAX];
    uint64_t held_bytes;          /* it holds in the hot tier now */
    uint64_t quota_bytes;         /* its quota now; UINT64_MAX: none */
    uint64_t demand_bytes;        /* cumulative bytes its reads asked the cache for */
    uint64_t wait_ns, compute_ns; /* cumulative, from its stall reports (0, 0: none) */
    double weight;                /* QoS weight, 1 when none */
    uint64_t min_bytes;           /* never below this */
    struct advice_point curve[ADVICE_POINTS_MAX];
    size_t npoints;
};

struct advisor_ctx {
    unsigned max_tenants;
    uint64_t hot_bytes;  /* the hot tier the split shares out */
    uint64_t block_size; /* quotas are whole blocks */
    double target_stall; /* 0: 0.15 */
    double link_bps;     /* the backend link, 0: unknown (advice.h's default) */
    void *ud;
    /* Tenant id t now: 0, or -ENOENT (no such tenant, or it has no curve). */
    int (*tenant)(void *ud, uint32_t t, struct advisor_tenant *out);
    /* Set tenant t's quota (auto_quota): 0 or -errno. NULL: auto_quota cannot run. */
    int (*set_quota)(void *ud, uint32_t t, uint64_t bytes);
};

struct advisor_config {
    bool auto_quota;
    double step;       /* of the way to the split per tick; 0: 0.5 */
    double hysteresis; /* relative predicted gain needed to move; 0: 0.05 */
};

/* The latest advice for one tenant. */
struct advisor_result {
    uint32_t tenant;
    char name[ADVISOR_NAME_MAX];
    struct advice_in in; /* what it was computed from (curve, share, rates) */
    struct advice_out out;
    uint64_t quota_changes; /* auto_quota's changes of its quota so far */
};

struct advisor_view {
    uint64_t ticks;
    uint64_t at_ns;    /* the tick's time (0: none yet) */
    double interval_s; /* the last tick's interval */
    double cost_now, cost_split;
    bool moved; /* the last tick changed quotas */
    size_t n;
    struct advisor_result *r; /* n results, the caller's copy (advisor_view_free) */
};

struct advisor;

/* 0, -EINVAL (auto_quota without set_quota, or max_tenants 0), -ENOMEM. */
int advisor_new(const struct advisor_ctx *ctx, const struct advisor_config *cfg,
                struct advisor **out);
void advisor_free(struct advisor *a);
/* One round at now_ns (monotonic). The first round only takes the counters (no interval yet). */
void advisor_tick(struct advisor *a, uint64_t now_ns);
/* A thread that ticks every interval_ns (the first tick at once) until advisor_stop. 0 or -errno
 * (-EALREADY: running). */
int advisor_start(struct advisor *a, uint64_t interval_ns);
/* Stop the thread (a tick in progress finishes). No-op when not running, or a NULL. */
void advisor_stop(struct advisor *a);
/* Tenant t's quota changes by auto_quota so far (0 for an id out of range): a counter that stays
 * when t reads in no round. */
uint64_t advisor_quota_changes(struct advisor *a, uint32_t t);
/* A copy of the latest round: 0 or -ENOMEM. */
int advisor_get(struct advisor *a, struct advisor_view *v);
void advisor_view_free(struct advisor_view *v);

#endif
