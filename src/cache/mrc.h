/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mrc.h - online miss-ratio curves of a stream of block accesses, in fixed memory: spatially
 * hashed sampling (SHARDS, Waldspurger et al., FAST 2015) feeding one miniature simulation per
 * cache size (Waldspurger et al., USENIX ATC 2017), each running the cache's own eviction policy
 * (policy.c: S3-FIFO or LRU) at the size scaled by its sampling rate. docs/ADVICE.md explains the
 * method and its error; tests/perf/cachesim.c `mrc` prints it against exact simulations.
 *
 * A block is sampled by the simulation of size S when hash < T_S, with T_S = rate_S * 2^64 and
 * rate_S = max(rate, min_blocks * block_size / S) (at most 1): small sizes sample more, so no
 * miniature cache holds fewer than min_blocks blocks. The simulation of size S is a policy of
 * capacity S * rate_S bytes fed the accesses it samples; its hit ratio estimates the full-size
 * cache's, corrected as SHARDS_adj does: the difference between the accesses a simulation
 * sampled and the accesses it was expected to sample (every access counted, times its rate) is
 * mostly a few popular blocks sampled or missed, so it is added to its hits. Memory is bounded:
 * when the blocks tracked at once pass max_keys + nsizes * min_blocks, the base rate is cut (to
 * 3/4: the blocks above the new threshold leave every simulation, which then shrinks to its new
 * scaled size), so memory stays at that many entries whatever the stream. Counters halve every
 * decay_every sampled accesses so a curve follows the recent stream.
 *
 * An access has two halves: counting it and testing whether it is sampled (mrc_count(),
 * mrc_wants(): lock-free, a few atomics) and running a sampled one through the simulations
 * (mrc_apply(): the curve's mutex, the policies' work). mrc_access() does both on the caller's
 * thread; the cache (cache_mrc.c) does the first on the reader's thread and queues the sampled
 * accesses for a thread of its own, so a read never runs a simulation.
 *
 * Thread-safety: every function may be called from any thread (mrc_free only once nothing else
 * uses the curve).
 */
#ifndef TIER_CACHE_MRC_H
#define TIER_CACHE_MRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"

#define MRC_SIZES_MAX 32

struct mrc_config {
    const uint64_t *sizes; /* cache sizes in bytes, ascending, each > 0; 1..MRC_SIZES_MAX */
    size_t nsizes;
    double rate;         /* base sampling rate, (0, 1]; 0: 0.01 */
    size_t max_keys;     /* blocks tracked at once before the rate is cut; 0: 4096 */
    uint32_t min_blocks; /* smallest miniature cache, in blocks; 0: 256 */
    uint64_t block_size; /* bytes of a block (for min_blocks); > 0 */
    enum cache_policy_kind policy;
    uint64_t decay_every; /* sampled accesses between halvings of the counters; 0: never */
};

/* One point of a curve: the estimated hit ratios (of accesses and of bytes) of a cache of
 * size_bytes, from `accesses` sampled accesses (after decay) at sampling rate `rate`. NAN
 * ratios when nothing was sampled yet. */
struct mrc_point {
    uint64_t size_bytes;
    double hit_ratio, byte_hit_ratio;
    double accesses;
    double rate;
};

struct mrc_stats {
    size_t keys; /* blocks tracked now */
    size_t max_keys;
    double rate;           /* the base rate now */
    uint64_t rate_cuts;    /* times the rate was cut to keep memory bounded */
    uint64_t sampled;      /* sampled accesses (before decay), all sizes' union */
    uint64_t accesses;     /* every access, sampled or not, since mrc_new (not decayed) */
    uint64_t access_bytes; /* ... and their bytes */
    uint64_t left_out, left_out_bytes; /* accesses left out (mrc_left_out), and their bytes */
    size_t mem_bytes; /* memory held now (entries, table, policies' ghosts excluded) */
};

struct mrc;

/* -EINVAL (with a message) for a bad config, -ENOMEM. */
int mrc_new(const struct mrc_config *cfg, struct mrc **out);
void mrc_free(struct mrc *m);

/* One access to the block whose (uniform, e.g. keyed) 64-bit hash is `hash`, of `bytes` bytes:
 * mrc_apply() of it when mrc_wants(), else mrc_count(). */
void mrc_access(struct mrc *m, uint64_t hash, uint64_t bytes);

/* Whether an access to `hash` is sampled by some simulation now (one relaxed atomic load). */
bool mrc_wants(const struct mrc *m, uint64_t hash);
/* Count one access of `bytes` (> 0) that is not sampled: the total the estimates are scaled by.
 * Every access is counted exactly once (a sampled one by mrc_apply()); one that is left out
 * (never applied, e.g. while a queue is full) must be left out of the count too, with the
 * unsampled accesses around it, or the curve reads it as a hit. */
void mrc_count(struct mrc *m, uint64_t bytes);
/* One access left out of the curve (neither counted nor applied), counted apart so the demand
 * behind the curve (mrc_stats left_out) still includes it. */
void mrc_left_out(struct mrc *m, uint64_t bytes);

struct mrc_sample {
    uint64_t hash;
    uint64_t bytes;
};
/* Count and run n accesses that mrc_wants() said are sampled through the simulations, under one
 * lock, each counted just before it runs. An access no simulation samples any more (the rate
 * was cut since) is counted and skipped. */
void mrc_apply(struct mrc *m, const struct mrc_sample *s, size_t n);

/* The curve, one point per configured size, into out (cap points); returns the number of sizes. */
size_t mrc_curve(struct mrc *m, struct mrc_point *out, size_t cap);
/* Halve every counter now (as decay_every does): the accesses before weigh half as much. */
void mrc_age(struct mrc *m);
/* Forget every counter and every simulated cache (the rate stays). */
void mrc_reset(struct mrc *m);
void mrc_stats_get(struct mrc *m, struct mrc_stats *st);

#endif
