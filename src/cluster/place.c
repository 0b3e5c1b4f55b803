/* SPDX-License-Identifier: Apache-2.0 */
/* place.c - weighted rendezvous hashing with bounded load (place.h).
 *
 * DESIGN. The mix of a (node, block) pair is XXH3 of the block id's 8 little-endian bytes seeded
 * with the node hash: a full-avalanche hash per pair, so the scores of one block over different
 * nodes are independent, which is what makes each node's share w / W and a change move only
 * the changed node's blocks. u keeps the top 52 bits plus one half, so it is never 0 nor 1 and
 * ln(u) is finite and negative. Ranking keeps the top k in a sorted array (k is small: an owner
 * and a few fallbacks); for k above RANK_INLINE it sorts every node's score instead. */
#include "cluster/place.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Up to this many ranks, place_rank() keeps its top list on the stack by insertion. */
#define RANK_INLINE 32

uint64_t place_node_hash(const char *id)
{
    return XXH3_64bits(id, strlen(id));
}

static void le64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

uint64_t place_block_id(const char *name, size_t len, uint64_t index)
{
    unsigned char b[8];
    le64(b, index);
    /* The name's hash seeds the index's: two objects' blocks never share ids by construction of
     * a common prefix, and a block id is one XXH3 of 8 bytes once the name's hash is known. */
    return XXH3_64bits_withSeed(b, sizeof(b), XXH3_64bits(name, len));
}

double place_score(uint64_t node_hash, uint64_t block_id, double weight)
{
    unsigned char b[8];
    le64(b, block_id);
    uint64_t h = XXH3_64bits_withSeed(b, sizeof(b), node_hash);
    double u = ((double)(h >> 12) + 0.5) * 0x1p-52; /* in (0, 1): 2^-53 .. 1 - 2^-53 */
    return -weight / log(u);
}

struct scored {
    double score;
    uint64_t hash;
    size_t idx;
};

static int cmp_scored_desc(const void *a, const void *b)
{
    const struct scored *x = a, *y = b;
    if (place_better(x->score, x->hash, y->score, y->hash))
        return -1;
    if (place_better(y->score, y->hash, x->score, x->hash))
        return 1;
    return 0;
}

/* k > RANK_INLINE: score every node, sort, copy the first k. */
static ssize_t rank_sorted(const struct place_node *nodes, size_t n, uint64_t block, size_t k,
                           size_t *out_order)
{
    struct scored *s = malloc(n * sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        s[i].score = place_score(nodes[i].hash, block, nodes[i].weight);
        s[i].hash = nodes[i].hash;
        s[i].idx = i;
    }
    qsort(s, n, sizeof(*s), cmp_scored_desc);
    for (size_t i = 0; i < k; i++)
        out_order[i] = s[i].idx;
    free(s);
    return (ssize_t)k;
}

ssize_t place_rank(const struct place_node *nodes, size_t n, uint64_t block, size_t k,
                   size_t *out_order)
{
    if (k > n)
        k = n;
    if (k == 0)
        return 0;
    if (k > RANK_INLINE)
        return rank_sorted(nodes, n, block, k, out_order);
    double top[RANK_INLINE];
    size_t have = 0;
    for (size_t i = 0; i < n; i++) {
        double s = place_score(nodes[i].hash, block, nodes[i].weight);
        uint64_t h = nodes[i].hash;
        if (have == k && !place_better(s, h, top[k - 1], nodes[out_order[k - 1]].hash))
            continue;
        size_t j = have < k ? have++ : k - 1;
        while (j > 0 && place_better(s, h, top[j - 1], nodes[out_order[j - 1]].hash)) {
            top[j] = top[j - 1];
            out_order[j] = out_order[j - 1];
            j--;
        }
        top[j] = s;
        out_order[j] = i;
    }
    return (ssize_t)k;
}

ssize_t place_owner(const struct place_node *nodes, size_t n, uint64_t block)
{
    if (n == 0)
        return -ENOENT;
    size_t best = 0;
    double bs = place_score(nodes[0].hash, block, nodes[0].weight);
    for (size_t i = 1; i < n; i++) {
        double s = place_score(nodes[i].hash, block, nodes[i].weight);
        if (place_better(s, nodes[i].hash, bs, nodes[best].hash)) {
            best = i;
            bs = s;
        }
    }
    return (ssize_t)best;
}

static double weight_sum(const struct place_node *nodes, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++)
        w += nodes[i].weight;
    return w;
}

double place_bound(const struct place_node *nodes, size_t n, size_t i, uint64_t total, double c)
{
    return c * ((double)total + 1) * nodes[i].weight / weight_sum(nodes, n);
}

ssize_t place_pick_ranked(const struct place_node *nodes, size_t n, const size_t *order, size_t k,
                          const uint64_t *load, uint64_t total, double c)
{
    double per_w = c * ((double)total + 1) / weight_sum(nodes, n);
    for (size_t r = 0; r < k; r++) {
        size_t i = order[r];
        if ((double)load[i] < per_w * nodes[i].weight)
            return (ssize_t)i;
    }
    return -ENOENT;
}

/* place_pick_ranked() over every node's order: -ENOENT when all are at their bound; -ENOMEM. */
static ssize_t pick_full(const struct place_node *nodes, size_t n, uint64_t block,
                         const uint64_t *load, uint64_t total, double c)
{
    size_t *order = malloc(n * sizeof(*order));
    if (order == NULL)
        return -ENOMEM;
    ssize_t k = place_rank(nodes, n, block, n, order);
    if (k >= 0)
        k = place_pick_ranked(nodes, n, order, (size_t)k, load, total, c);
    free(order);
    return k;
}

ssize_t place_pick_bounded(const struct place_node *nodes, size_t n, uint64_t block,
                           const uint64_t *load, uint64_t total, double c)
{
    if (n == 0)
        return -ENOENT;
    /* Most picks take the first or second choice: try a short order before sorting them all. */
    size_t few[4];
    ssize_t k = place_rank(nodes, n, block, 4, few);
    ssize_t got = place_pick_ranked(nodes, n, few, (size_t)k, load, total, c);
    if (got == -ENOENT && (size_t)k < n)
        got = pick_full(nodes, n, block, load, total, c);
    if (got != -ENOENT)
        return got;
    /* Every node at its bound: only when c <= 1 or load[] does not add up to total. The least
     * loaded for its weight takes it, so a pick never fails. */
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if ((double)load[i] / nodes[i].weight < (double)load[best] / nodes[best].weight)
            best = i;
    return (ssize_t)best;
}
