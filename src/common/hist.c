/* SPDX-License-Identifier: Apache-2.0 */
/* hist.c - see hist.h for the bucket layout and the threading rule (one writer, merge after). */
#include "common/hist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tier_hist_init(struct tier_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

int tier_hist_new(struct tier_hist **out)
{
    struct tier_hist *h = malloc(sizeof(*h));
    if (!h)
        return -ENOMEM;
    tier_hist_init(h);
    *out = h;
    return 0;
}

void tier_hist_free(struct tier_hist *h)
{
    free(h);
}

size_t tier_hist_bucket_of(uint64_t v)
{
    if (v < TIER_HIST_SUB)
        return (size_t)v;
    if (v >> TIER_HIST_MAX_BIT)
        return TIER_HIST_BUCKETS - 1;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - TIER_HIST_SUB_BITS;
    uint64_t top = v >> shift; /* in [SUB, 2*SUB) */
    return TIER_HIST_SUB + (size_t)shift * TIER_HIST_SUB + (size_t)(top - TIER_HIST_SUB);
}

uint64_t tier_hist_bucket_lo(size_t idx)
{
    if (idx < TIER_HIST_SUB)
        return idx;
    size_t shift = (idx - TIER_HIST_SUB) / TIER_HIST_SUB;
    uint64_t top = TIER_HIST_SUB + (idx - TIER_HIST_SUB) % TIER_HIST_SUB;
    return top << shift;
}

uint64_t tier_hist_bucket_hi(size_t idx)
{
    if (idx < TIER_HIST_SUB)
        return idx;
    size_t shift = (idx - TIER_HIST_SUB) / TIER_HIST_SUB;
    return tier_hist_bucket_lo(idx) + ((uint64_t)1 << shift) - 1;
}

void tier_hist_record_n(struct tier_hist *h, uint64_t v, uint64_t n)
{
    if (n == 0)
        return;
    h->buckets[tier_hist_bucket_of(v)] += n;
    h->count += n;
    h->sum += (double)v * (double)n;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void tier_hist_record(struct tier_hist *h, uint64_t v)
{
    tier_hist_record_n(h, v, 1);
}

void tier_hist_merge(struct tier_hist *dst, const struct tier_hist *src)
{
    if (src->count == 0)
        return;
    for (size_t i = 0; i < TIER_HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t tier_hist_percentile(const struct tier_hist *h, double p)
{
    if (h->count == 0)
        return 0;
    if (p >= 100.0)
        return h->max;
    if (p < 0.0)
        p = 0.0;
    /* rank = ceil(p% of count), at least 1: the same definition as "sorted[rank - 1]". */
    double r = p / 100.0 * (double)h->count;
    uint64_t rank = (uint64_t)r;
    if ((double)rank < r)
        rank++;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < TIER_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t lo = tier_hist_bucket_lo(i), hi = tier_hist_bucket_hi(i);
            uint64_t v = lo + (hi - lo) / 2;
            if (v < h->min)
                v = h->min;
            if (v > h->max)
                v = h->max;
            return v;
        }
    }
    return h->max;
}

uint64_t tier_hist_count(const struct tier_hist *h)
{
    return h->count;
}

uint64_t tier_hist_min(const struct tier_hist *h)
{
    return h->count ? h->min : 0;
}

uint64_t tier_hist_max(const struct tier_hist *h)
{
    return h->max;
}

double tier_hist_mean(const struct tier_hist *h)
{
    return h->count ? h->sum / (double)h->count : 0.0;
}
