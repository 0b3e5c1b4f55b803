/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hist.h - a log-linear (HDR-style) histogram of nanosecond values for latency percentiles.
 *
 * Values 0..127 ns are counted exactly; above that, each power of two is split into 128 linear
 * sub-buckets, so a bucket is never wider than 1/128 of its lower bound and a percentile (reported
 * as the bucket midpoint, clamped to the exact min/max) is within 0.4 % of the true sample value.
 * The range covers 1 ns to 2^43 ns (about 2.4 hours); larger values land in the last bucket while
 * max stays exact.
 *
 * DESIGN: no locks and no atomics. Each thread records into its own histogram and the owner
 * merges them with tier_hist_merge() once the threads have been joined; that keeps recording to a
 * couple of instructions on the hot path. A histogram is a plain struct (about 37 KiB), so it can
 * be embedded, zeroed with tier_hist_init() and copied.
 */
#ifndef TIER_COMMON_HIST_H
#define TIER_COMMON_HIST_H

#include <stddef.h>
#include <stdint.h>

#define TIER_HIST_SUB_BITS 7
#define TIER_HIST_SUB (1u << TIER_HIST_SUB_BITS)
#define TIER_HIST_MAX_BIT 43 /* values >= 2^43 ns are clamped into the last bucket */
#define TIER_HIST_BUCKETS (TIER_HIST_SUB + (TIER_HIST_MAX_BIT - TIER_HIST_SUB_BITS) * TIER_HIST_SUB)

/* Owned by one thread while recording; merged by the owner after join. */
struct tier_hist {
    uint64_t count;
    uint64_t min; /* UINT64_MAX while empty */
    uint64_t max;
    double sum; /* double: an hour of ns times millions of samples overflows uint64 */
    uint64_t buckets[TIER_HIST_BUCKETS];
};

void tier_hist_init(struct tier_hist *h);
/* Heap variants for callers that keep many histograms. _free(NULL) is a no-op. */
int tier_hist_new(struct tier_hist **out);
void tier_hist_free(struct tier_hist *h);

void tier_hist_record(struct tier_hist *h, uint64_t value_ns);
void tier_hist_record_n(struct tier_hist *h, uint64_t value_ns, uint64_t n);
/* Add every sample of src to dst. */
void tier_hist_merge(struct tier_hist *dst, const struct tier_hist *src);

/* The value at percentile p (0 < p <= 100): the smallest recorded value v such that at least p % of
 * the samples are <= v, to within the bucket precision. 0 for an empty histogram. */
uint64_t tier_hist_percentile(const struct tier_hist *h, double p);
uint64_t tier_hist_count(const struct tier_hist *h);
uint64_t tier_hist_min(const struct tier_hist *h); /* 0 when empty */
uint64_t tier_hist_max(const struct tier_hist *h);
double tier_hist_mean(const struct tier_hist *h); /* 0 when empty */

/* Bucket geometry, for walking the histogram (e.g. to draw a CDF). */
size_t tier_hist_bucket_of(uint64_t value_ns);
uint64_t tier_hist_bucket_lo(size_t idx);
uint64_t tier_hist_bucket_hi(size_t idx); /* inclusive */

#endif
