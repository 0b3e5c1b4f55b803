/* SPDX-License-Identifier: Apache-2.0 */
/* place.h - where a block lives in a cluster of tierd nodes: weighted rendezvous
 * (highest-random-weight) hashing with bounded load.
 *
 * Every node scores every block; the block's owner is the node with the highest score, and the
 * rest of the order is the fallback list. Scores are -w / ln(u), u a hash of (node, block) mapped
 * into (0, 1): with weights, a node of weight w owns w / W of the blocks in expectation
 * (Schindelhauer and Resch's weighted form of HRW). A change of membership moves only the blocks
 * of the node that changed: a joining node takes the blocks it now outscores, a leaving node's
 * blocks go to their second choice; no other block's order changes.
 *
 * Bounded load (Mirrokni, Thorup, Zadimoghaddam, "Consistent hashing with bounded loads", SODA
 * 2018): place_pick_bounded() walks the rendezvous order and takes the first node whose load is
 * under c * (total + 1) * w / W, so no node serves more than about c times its share however
 * skewed the requests are.
 *
 * Pure functions over the caller's arrays: no state, no locks, no allocation except the scratch
 * of place_rank() for large k and of place_pick_bounded(). The daemon does not place blocks with
 * it yet: peer reads are to come (docs/CLUSTER.md). */
#ifndef TIER_CLUSTER_PLACE_H
#define TIER_CLUSTER_PLACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One member as placement sees it. */
struct place_node {
    uint64_t hash; /* place_node_hash() of the node's id: stable across restarts */
    double weight; /* > 0: its share of the hot tier (capacity); equal weights for equal nodes */
};

/* The hash of a node id (a NUL-terminated string). */
uint64_t place_node_hash(const char *id);

/* The identity of block `index` of the object `name` (the caller builds name from what makes the
 * bytes unique: backend, key, ETag or version). len is name's length in bytes. */
uint64_t place_block_id(const char *name, size_t len, uint64_t index);

/* The rendezvous score of a node for a block: -weight / ln(u), u = the 64-bit mix of
 * (node_hash, block_id) mapped into (0, 1). Higher wins. weight > 0; the result is > 0. */
double place_score(uint64_t node_hash, uint64_t block_id, double weight);

/* Whether score sa of node hash ha beats score sb of node hb: the higher score, and on an exact
 * tie the higher hash, so that every node computes the same order. */
static inline int place_better(double sa, uint64_t ha, double sb, uint64_t hb)
{
    return sa > sb || (sa == sb && ha > hb);
}

/* The top min(k, n) nodes for block, best first, as indices into nodes, in out_order[0..]. Returns
 * how many it wrote, or -ENOMEM (nothing written that counts). */
ssize_t place_rank(const struct place_node *nodes, size_t n, uint64_t block, size_t k,
                   size_t *out_order);

/* The owner of block: the index of the highest-scoring node; -ENOENT when n is 0. */
ssize_t place_owner(const struct place_node *nodes, size_t n, uint64_t block);

/* The load bound of node i: c * (total + 1) * w_i / W, W the sum of the weights. A node may take
 * one more request while its load is below it. */
double place_bound(const struct place_node *nodes, size_t n, size_t i, uint64_t total, double c);

/* The first node of a rendezvous order (order[0..k-1], from place_rank()) whose load is under its
 * bound (place_bound()); load[i] is node i's current load and total the sum of load[]. Returns its
 * index into nodes, or -ENOENT when every node of the order is at its bound. */
ssize_t place_pick_ranked(const struct place_node *nodes, size_t n, const size_t *order, size_t k,
                          const uint64_t *load, uint64_t total, double c);

/* Bounded-load placement of one request for block: the highest-ranked node whose load is under
 * its bound, else (only when c <= 1 or load[] does not add up to total) the least loaded for its
 * weight. c is the balance factor (1.25: no node above 1.25 times its share). Returns the index
 * into nodes; -ENOENT when n is 0; -ENOMEM. */
ssize_t place_pick_bounded(const struct place_node *nodes, size_t n, uint64_t block,
                           const uint64_t *load, uint64_t total, double c);

#endif
