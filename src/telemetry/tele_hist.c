/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tele_hist.c - the bucket scheme of the telemetry histograms (telemetry.h): value -> index,
 * index -> bounds, and the quantile of the difference of two exported bucket lists. Pure
 * functions, no state; tierctl and the dashboard's server side may use them as well.
 */
#include "telemetry/tele_int.h"

#define SUB (1u << TELE_HIST_SUB_BITS)

static unsigned msb64(uint64_t v) /* v > 0 */
{
    return 63u - (unsigned)__builtin_clzll(v);
}

unsigned tele_hist_index(uint64_t ns)
{
    if (ns < (1ULL << TELE_HIST_MIN_SHIFT))
        return 0;
    if (ns >= TELE_HIST_MAX_NS)
        return TELE_HIST_NBUCKETS - 1;
    unsigned m = msb64(ns);
    unsigned sub = (unsigned)(ns >> (m - TELE_HIST_SUB_BITS)) & (SUB - 1);
    return 1 + ((m - TELE_HIST_MIN_SHIFT) << TELE_HIST_SUB_BITS) + sub;
}

uint64_t tele_hist_upper_ns(unsigned idx)
{
    if (idx == 0)
        return 1ULL << TELE_HIST_MIN_SHIFT;
    if (idx >= TELE_HIST_NBUCKETS - 1)
        return TELE_HIST_OVERFLOW_UPPER_NS;
    unsigned o = (idx - 1) >> TELE_HIST_SUB_BITS, sub = (idx - 1) & (SUB - 1);
    unsigned shift = TELE_HIST_MIN_SHIFT + o;
    return (1ULL << shift) + ((uint64_t)(sub + 1) << (shift - TELE_HIST_SUB_BITS));
}

uint64_t tele_hist_lower_ns(uint64_t upper_ns)
{
    if (upper_ns <= (1ULL << TELE_HIST_MIN_SHIFT))
        return 0;
    if (upper_ns > TELE_HIST_MAX_NS)
        return TELE_HIST_MAX_NS;
    /* the bucket lies in the octave holding upper_ns - 1; its width is 1/32 of that octave */
    unsigned m = msb64(upper_ns - 1);
    return upper_ns - (1ULL << (m - TELE_HIST_SUB_BITS));
}

static uint64_t representative(uint64_t upper_ns)
{
    if (upper_ns <= (1ULL << TELE_HIST_MIN_SHIFT))
        return 1ULL << TELE_HIST_MIN_SHIFT;
    if (upper_ns > TELE_HIST_MAX_NS)
        return TELE_HIST_MAX_NS;
    uint64_t lo = tele_hist_lower_ns(upper_ns);
    return lo + (upper_ns - lo) / 2;
}

/* count of cur[i] minus the matching bucket of prev (walked along with *j) */
static uint64_t diff_at(const struct tele_bucket *cur, size_t i, const struct tele_bucket *prev,
                        size_t nprev, size_t *j)
{
    while (*j < nprev && prev[*j].upper_ns < cur[i].upper_ns)
        (*j)++;
    uint64_t before = *j < nprev && prev[*j].upper_ns == cur[i].upper_ns ? prev[*j].count : 0;
    return cur[i].count > before ? cur[i].count - before : 0;
}

uint64_t tele_quantile_diff(const struct tele_bucket *cur, size_t ncur,
                            const struct tele_bucket *prev, size_t nprev, double q, uint64_t *n_out)
{
    if (!prev)
        nprev = 0;
    uint64_t n = 0;
    size_t j = 0;
    for (size_t i = 0; i < ncur; i++)
        n += diff_at(cur, i, prev, nprev, &j);
    if (n_out)
        *n_out = n;
    if (n == 0)
        return 0;
    if (!(q >= 0.0)) /* NaN too */
        q = 0.0;
    if (q > 1.0)
        q = 1.0;
    double r = q * (double)n;
    uint64_t rank = (uint64_t)r;
    if ((double)rank < r)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    uint64_t seen = 0;
    j = 0;
    for (size_t i = 0; i < ncur; i++) {
        seen += diff_at(cur, i, prev, nprev, &j);
        if (seen >= rank)
            return representative(cur[i].upper_ns);
    }
    return representative(cur[ncur - 1].upper_ns); /* not reached */
}
