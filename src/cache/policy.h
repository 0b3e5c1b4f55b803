/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.h - eviction policies for one cache level, behind one small interface: S3-FIFO (small
 * FIFO + main FIFO with 2-bit frequency + ghost FIFO of hashes) and plain LRU.
 *
 * Callers: the cache engine (one policy per level, RAM and disk) and tests/perf/cachesim.c, which
 * replays traces through exactly this code. A policy orders nodes that the caller embeds in its
 * own structures; it never allocates or frees them. It tracks bytes per queue so S3-FIFO can keep
 * the small queue near 10 % of the capacity.
 *
 * Locking: none inside. The caller serialises every call on one policy with its own lock (the
 * cache's level lock), with one exception: when policy_hit_lockfree() is true (S3-FIFO),
 * policy_hit() only bumps an atomic counter in the node and may run under any lock that keeps the
 * node alive (the cache uses the block's shard lock). That is what keeps the hit path down to one
 * shard lock.
 */
#ifndef TIER_CACHE_POLICY_H
#define TIER_CACHE_POLICY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"

enum pol_queue {
    POL_NONE = 0, /* not in the policy */
    POL_SMALL = 1,
    POL_MAIN = 2,
    POL_LRU = 3,
};

/* Embedded in the caller's object. hash and size are set by the caller before insert and not
 * changed while the node is in the policy. Other fields belong to the policy. */
struct pol_node {
    struct pol_node *prev, *next;
    uint64_t hash;
    uint64_t size;
    _Atomic uint8_t freq;
    uint8_t queue; /* enum pol_queue */
};

struct policy;

/* capacity_bytes: the level budget (S3-FIFO sizes its small queue and ghost from it). */
int policy_new(enum cache_policy_kind kind, uint64_t capacity_bytes, struct policy **out);
/* A new capacity (the caller evicts down to it): the small queue's target and the ghost's
 * bound follow it at once. */
void policy_set_capacity(struct policy *p, uint64_t capacity_bytes);
void policy_free(struct policy *p);
const char *policy_name(const struct policy *p);

/* Add n (not in any policy). S3-FIFO: into main if its hash is in the ghost, else small. */
void policy_insert(struct policy *p, struct pol_node *n);
/* n was accessed. See the locking note at the top. */
void policy_hit(struct policy *p, struct pol_node *n);
bool policy_hit_lockfree(const struct policy *p);
/* Choose the next node to evict; it stays in the policy until policy_remove(). Nodes for which
 * evictable() returns false (pinned) are kept and rotated. May reorder queues. Returns NULL when
 * nothing is evictable. */
struct pol_node *policy_evict_candidate(struct policy *p,
                                        bool (*evictable)(struct pol_node *n, void *ud), void *ud);
/* Take n out. evicted: it was chosen by policy_evict_candidate() (S3-FIFO remembers its hash in
 * the ghost); false for explicit drops (invalidation, corruption). */
void policy_remove(struct policy *p, struct pol_node *n, bool evicted);

uint64_t policy_bytes(const struct policy *p);
size_t policy_count(const struct policy *p);
static inline bool policy_contains(const struct pol_node *n)
{
    return n->queue != POL_NONE;
}

#endif
