/* SPDX-License-Identifier: Apache-2.0 */
/*
 * advice.c - the hot-tier advice's model and split (advice.h; docs/ADVICE.md).
 *
 * Callers: the control API (GET /v1/advice) and the quota loop. No state, no locks, no I/O.
 */
#include "advice/advice.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LINK_DEFAULT_BPS 100e6
/* below this miss ratio the measured wait is not taken to scale with misses (it is not theirs) */
#define MISS_FLOOR 1e-3

/* The hit ratio at size s: linear in log size between the curve's known points, linear from 0 at
 * size 0 to the first point, flat beyond the last. 0 for a curve with no known point. */
static double hit_at(const struct advice_in *in, uint64_t s)
{
    const struct advice_point *prev = NULL;
    for (size_t k = 0; k < in->npoints; k++) {
        const struct advice_point *pt = &in->curve[k];
        if (isnan(pt->hit_ratio) || pt->size_bytes == 0)
            continue;
        if (s <= pt->size_bytes) {
            if (!prev)
                return pt->hit_ratio * (double)s / (double)pt->size_bytes;
            double a = log((double)prev->size_bytes), b = log((double)pt->size_bytes);
            double x = s ? log((double)s) : a;
            double f = b > a ? (x - a) / (b - a) : 1;
            return prev->hit_ratio + f * (pt->hit_ratio - prev->hit_ratio);
        }
        prev = pt;
    }
    return prev ? prev->hit_ratio : 0;
}

static double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

/* Seconds of data wait per second of loop at size s (tenants with a stall report). */
static double wait_at(const struct advice_in *in, uint64_t s)
{
    double loop = in->wait_s + in->compute_s;
    if (loop <= 0)
        return 0;
    double m0 = 1 - clamp01(hit_at(in, in->share_bytes)), m = 1 - clamp01(hit_at(in, s));
    double w = in->wait_s / loop;
    return m0 > MISS_FLOOR ? w * m / m0 : w;
}

static double cost_at(const struct advice_params *p, const struct advice_in *in, uint64_t s)
{
    double weight = in->weight > 0 ? in->weight : 1;
    if (in->has_stall && in->wait_s + in->compute_s > 0)
        return weight * wait_at(in, s);
    double link = p->link_bps > 0 ? p->link_bps : LINK_DEFAULT_BPS;
    return weight * in->demand_bps * (1 - clamp01(hit_at(in, s))) / link;
}

static double stall_at(const struct advice_in *in, uint64_t s)
{
    if (!in->has_stall || in->wait_s + in->compute_s <= 0)
        return NAN;
    double w = wait_at(in, s), c = in->compute_s / (in->wait_s + in->compute_s);
    return w + c > 0 ? w / (w + c) : 0;
}

void advice_predict(const struct advice_in *in, uint64_t size, struct advice_pred *out)
{
    double h = clamp01(hit_at(in, size));
    out->size_bytes = size;
    out->hit_ratio = h;
    out->backend_bps = in->demand_bps * (1 - h);
    out->stall = stall_at(in, size);
}

/* The smallest size, on a grid of 64 steps a decade over the curve's range, whose stall is at
 * most target; 0 when the share now is already there (or there is no report), UINT64_MAX when
 * no size on the curve gets there. */
static uint64_t size_for(const struct advice_in *in, double target)
{
    double now = stall_at(in, in->share_bytes);
    if (isnan(now) || now <= target)
        return 0;
    uint64_t lo = 0, hi = 0;
    for (size_t k = 0; k < in->npoints; k++) {
        if (isnan(in->curve[k].hit_ratio) || !in->curve[k].size_bytes)
            continue;
        if (!lo)
            lo = in->curve[k].size_bytes;
        hi = in->curve[k].size_bytes;
    }
    if (!hi)
        return UINT64_MAX;
    double step = pow(10.0, 1.0 / 64);
    for (double s = (double)lo / 8; s <= (double)hi * 1.0000001; s *= step)
        if (stall_at(in, (uint64_t)s) <= target)
            return (uint64_t)s;
    return UINT64_MAX;
}

double advice_compute(const struct advice_params *p, const struct advice_in *in, size_t n,
                      struct advice_out *out, double *cost_now)
{
    double total_now = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = (struct advice_out){0};
        out[i].hit_now = clamp01(hit_at(&in[i], in[i].share_bytes));
        out[i].stall_now = stall_at(&in[i], in[i].share_bytes);
        out[i].size_for_target = size_for(&in[i], p->target_stall);
        out[i].cost_now = cost_at(p, &in[i], in[i].share_bytes);
        total_now += out[i].cost_now;
    }
    if (cost_now)
        *cost_now = total_now;
    if (!n)
        return 0;
    uint64_t unit = p->hot_bytes / ADVICE_UNITS;
    if (!unit)
        unit = 1;
    /* minimums first */
    uint64_t mins = 0;
    for (size_t i = 0; i < n; i++)
        mins += in[i].min_bytes;
    if (mins >= p->hot_bytes) {
        double f = mins ? (double)p->hot_bytes / (double)mins : 0;
        double total = 0;
        for (size_t i = 0; i < n; i++) {
            out[i].split_bytes = (uint64_t)((double)in[i].min_bytes * f);
            out[i].split_cost = cost_at(p, &in[i], out[i].split_bytes);
            total += out[i].split_cost;
        }
        return total;
    }
    uint64_t left = p->hot_bytes - mins;
    for (size_t i = 0; i < n; i++)
        out[i].split_bytes = in[i].min_bytes;
    while (left >= unit) {
        size_t best = n, best_k = 0;
        double best_gain = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t s = out[i].split_bytes;
            double c0 = cost_at(p, &in[i], s);
            for (size_t k = 1; k * unit <= left; k++) {
                double g = (c0 - cost_at(p, &in[i], s + k * unit)) / (double)k;
                if (g > best_gain * (1 + 1e-9)) {
                    best_gain = g;
                    best = i;
                    best_k = k;
                }
            }
        }
        if (best == n)
            break; /* no tenant gains from more: the rest is spread below */
        out[best].split_bytes += best_k * unit;
        left -= best_k * unit;
    }
    /* what no one gains from (or less than a unit) goes evenly: quotas add up to the hot tier */
    for (size_t i = 0; i < n; i++) {
        uint64_t give = left / (n - i);
        out[i].split_bytes += give;
        left -= give;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        out[i].split_cost = cost_at(p, &in[i], out[i].split_bytes);
        total += out[i].split_cost;
    }
    return total;
}
