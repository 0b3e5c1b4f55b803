/* SPDX-License-Identifier: Apache-2.0 */
/*
 * advice.h - what more (or less) hot tier would buy each tenant, and the split of the hot tier
 * between tenants that minimises their total data stall (docs/ADVICE.md). Pure computation over
 * what the caller measured: each tenant's miss-ratio curve (src/cache/mrc.h, by
 * cache_mrc_curve), its demand rate, its current share, and, where its jobs report it (the
 * stall signal), the time its training loops waited for data and computed.
 *
 * THE MODEL. A tenant's misses cost backend bytes, and its loops' data wait is taken to be
 * proportional to its misses: at a hot-tier share S its backend rate is demand * miss(S) and its
 * wait wait0 * miss(S) / miss(S0), where S0 is the share it had while wait0 was measured and
 * miss(S) = 1 - hit(S) is read from its curve (linear between the curve's points in log size,
 * flat beyond its ends). Its compute time does not depend on S. A tenant without a stall report
 * is costed by its backend bytes alone (as seconds of its link share: bytes / link rate), so
 * that one without jobs in Python still gets a share. The data stall of a tenant is
 * wait / (wait + compute); its GPU utilisation is taken as 1 - stall.
 *
 * THE SPLIT. Total cost = sum over tenants of weight * cost(S), cost being the wait (seconds per
 * second) or the backend seconds above. The split hands out the hot tier in ADVICE_UNITS equal
 * units over each tenant's minimum: at each step the units go where they lower the weighted cost
 * most per unit, looking ahead over all that is left, so that a curve with a cliff (a working set
 * that helps only once it fits whole) is seen as the average gain to the cliff and taken in one
 * step, the way Cliffhanger (Cidon et al., NSDI 2016) climbs its curves. At most ADVICE_UNITS
 * steps of n * ADVICE_UNITS cost evaluations each. Minimums are honoured first; if
 * they add up to more than the hot tier the split is the minimums, scaled down.
 */
#ifndef TIER_ADVICE_ADVICE_H
#define TIER_ADVICE_ADVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ADVICE_POINTS_MAX 32
#define ADVICE_UNITS 256

struct advice_point {
    uint64_t size_bytes;
    double hit_ratio; /* NAN: unknown (skipped) */
};

/* What was measured of one tenant. */
struct advice_in {
    const char *name;
    struct advice_point curve[ADVICE_POINTS_MAX];
    size_t npoints;
    uint64_t share_bytes;     /* its hot-tier share now: its quota, or what it holds without one */
    double demand_bps;        /* bytes/s its reads asked the cache for (hits and misses) */
    bool has_stall;           /* its jobs report the stall signal */
    double wait_s, compute_s; /* over the same recent window as demand_bps */
    double weight;            /* its QoS weight (1 when none) */
    uint64_t min_bytes;       /* its share never goes below this (a reservation, pins) */
};

/* What the model predicts for one tenant at one size. */
struct advice_pred {
    uint64_t size_bytes;
    double hit_ratio;
    double backend_bps;
    double stall; /* NAN without a stall report */
};

struct advice_out {
    double hit_now, stall_now; /* stall_now: NAN without a report */
    /* the smallest size at which the stall falls to the target or below (UINT64_MAX: none on
     * its curve does; 0: it is already there, or it has no stall report) */
    uint64_t size_for_target;
    uint64_t split_bytes; /* its share in the split that minimises the total cost */
    double split_cost;    /* its weighted cost there (seconds per second) */
    double cost_now;      /* ... and at its share now */
};

/* The parameters of one advice. */
struct advice_params {
    uint64_t hot_bytes;  /* the hot tier to split */
    double target_stall; /* e.g. 0.15: utilisation >= 85 % */
    double link_bps;     /* the backend link's rate, to cost bytes as seconds (0: 100 MB/s) */
};

/* The prediction of tenant `in` at `size`. */
void advice_predict(const struct advice_in *in, uint64_t size, struct advice_pred *out);
/* Advice for n tenants: out[i] for in[i]. Returns the total weighted cost of the split (and
 * *cost_now that of the shares now, when not NULL). */
double advice_compute(const struct advice_params *p, const struct advice_in *in, size_t n,
                      struct advice_out *out, double *cost_now);

#endif
