/* SPDX-License-Identifier: Apache-2.0 */
/* test_place.c - unit tests for src/cluster/place: rendezvous placement is deterministic, spreads
 * blocks evenly, moves only the changed node's blocks on a join or a leave, honours weights, and
 * bounded-load picks never exceed their bound. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/place.h"

#define NODES 100
#define BLOCKS 100000

static void make_nodes(struct place_node *nodes, size_t n, size_t first_id)
{
    for (size_t i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "node-%zu", first_id + i);
        nodes[i].hash = place_node_hash(id);
        nodes[i].weight = 1.0;
    }
}

static uint64_t block_of(size_t b)
{
    return place_block_id("s3/bucket/train.tar@etag1", 25, b);
}

/* The owner of every block, by index into nodes. */
static uint32_t *owners(const struct place_node *nodes, size_t n, size_t blocks)
{
    uint32_t *o = malloc(blocks * sizeof(*o));
    assert_non_null(o);
    for (size_t b = 0; b < blocks; b++) {
        ssize_t i = place_owner(nodes, n, block_of(b));
        assert_true(i >= 0 && (size_t)i < n);
        o[b] = (uint32_t)i;
    }
    return o;
}

static void test_deterministic(void **state)
{
    (void)state;
    assert_int_equal(place_node_hash("node-7"), place_node_hash("node-7"));
    assert_true(place_node_hash("node-7") != place_node_hash("node-8"));
    assert_int_equal(block_of(3), block_of(3));
    assert_true(block_of(3) != block_of(4));
    assert_true(place_block_id("a", 1, 0) != place_block_id("b", 1, 0));

    struct place_node nodes[NODES];
    make_nodes(nodes, NODES, 0);
    for (size_t b = 0; b < 1000; b++) {
        uint64_t blk = block_of(b);
        double s = place_score(nodes[5].hash, blk, 1.0);
        assert_true(s > 0 && isfinite(s));
        assert_true(s == place_score(nodes[5].hash, blk, 1.0));
        /* A higher weight scales the score, never reorders a node against itself. */
        assert_true(place_score(nodes[5].hash, blk, 2.0) == 2 * s);

        ssize_t o = place_owner(nodes, NODES, blk);
        size_t order[40];
        assert_int_equal(place_rank(nodes, NODES, blk, 8, order), 8);
        assert_int_equal((size_t)o, order[0]);
        /* The sorted path (k above the inline limit) gives the same order as insertion. */
        size_t order2[40];
        assert_int_equal(place_rank(nodes, NODES, blk, 40, order2), 40);
        assert_memory_equal(order, order2, 8 * sizeof(size_t));
        for (size_t r = 1; r < 40; r++) {
            double hi = place_score(nodes[order2[r - 1]].hash, blk, 1.0);
            double lo = place_score(nodes[order2[r]].hash, blk, 1.0);
            assert_true(place_better(hi, nodes[order2[r - 1]].hash, lo, nodes[order2[r]].hash));
        }
        /* The order does not depend on where a node sits in the array. */
        struct place_node rev[NODES];
        for (size_t i = 0; i < NODES; i++)
            rev[i] = nodes[NODES - 1 - i];
        assert_int_equal(place_owner(rev, NODES, blk), NODES - 1 - (size_t)o);
    }
    assert_int_equal(place_owner(nodes, 0, block_of(0)), -ENOENT);
    size_t one[1];
    assert_int_equal(place_rank(nodes, 0, block_of(0), 1, one), 0);
    /* k above n: n entries. */
    size_t three[10];
    assert_int_equal(place_rank(nodes, 3, block_of(0), 10, three), 3);
    assert_int_equal(three[0], place_owner(nodes, 3, block_of(0)));
}

static void test_distribution(void **state)
{
    (void)state;
    struct place_node nodes[NODES];
    make_nodes(nodes, NODES, 0);
    uint32_t *o = owners(nodes, NODES, BLOCKS);
    size_t cnt[NODES] = {0};
    for (size_t b = 0; b < BLOCKS; b++)
        cnt[o[b]]++;
    size_t mx = 0, mn = BLOCKS;
    for (size_t i = 0; i < NODES; i++) {
        mx = cnt[i] > mx ? cnt[i] : mx;
        mn = cnt[i] < mn ? cnt[i] : mn;
    }
    double mean = (double)BLOCKS / NODES;
    /* Binomial(100000, 1/100): sigma 31.5 around 1000; the extremes of 100 nodes sit within
     * about 3 sigma, so 1.15 / 0.85 fail only on a biased hash. */
    print_message("owned max/mean %.3f min/mean %.3f\n", mx / mean, mn / mean);
    assert_true(mx / mean < 1.15);
    assert_true(mn / mean > 0.85);
    free(o);
}

static void test_minimal_movement(void **state)
{
    (void)state;
    struct place_node nodes[NODES + 1];
    make_nodes(nodes, NODES + 1, 0);
    uint32_t *before = owners(nodes, NODES, BLOCKS);

    /* Join: node NODES appears; a block changes owner only to it. */
    uint32_t *joined = owners(nodes, NODES + 1, BLOCKS);
    size_t moved = 0;
    for (size_t b = 0; b < BLOCKS; b++) {
        if (joined[b] != before[b]) {
            assert_int_equal(joined[b], NODES);
            moved++;
        }
    }
    print_message("join moved %zu of %d (B/N %.0f)\n", moved, BLOCKS, (double)BLOCKS / (NODES + 1));
    assert_true(moved > 0.8 * BLOCKS / (NODES + 1) && moved < 1.2 * BLOCKS / (NODES + 1));

    /* Leave: node 37 goes (the last one takes its slot); only its blocks move. */
    const size_t gone = 37;
    struct place_node left[NODES - 1];
    size_t map[NODES - 1];
    for (size_t i = 0, j = 0; i < NODES; i++) {
        if (i == gone)
            continue;
        left[j] = nodes[i];
        map[j++] = i;
    }
    uint32_t *after = owners(left, NODES - 1, BLOCKS);
    moved = 0;
    for (size_t b = 0; b < BLOCKS; b++) {
        if (map[after[b]] != before[b]) {
            assert_int_equal(before[b], gone);
            moved++;
        } else {
            assert_true(before[b] != gone);
        }
    }
    print_message("leave moved %zu of %d\n", moved, BLOCKS);
    assert_true(moved > 0.8 * BLOCKS / NODES && moved < 1.2 * BLOCKS / NODES);
    free(before);
    free(joined);
    free(after);
}

static void test_weights(void **state)
{
    (void)state;
    struct place_node nodes[NODES];
    make_nodes(nodes, NODES, 0);
    for (size_t i = 0; i < NODES; i += 2)
        nodes[i].weight = 2.0;
    uint32_t *o = owners(nodes, NODES, BLOCKS);
    double heavy = 0, light = 0;
    for (size_t b = 0; b < BLOCKS; b++) {
        if (o[b] % 2 == 0)
            heavy++;
        else
            light++;
    }
    /* 50 nodes of weight 2 and 50 of weight 1: the heavy half owns 2/3 of the blocks. */
    print_message("weight 2 vs 1: %.3f x\n", heavy / light);
    assert_true(heavy / light > 1.9 && heavy / light < 2.1);
    assert_true(fabs(heavy / BLOCKS - 2.0 / 3) < 0.01);

    /* One node of weight 2 among equals owns about twice the mean. */
    make_nodes(nodes, NODES, 0);
    nodes[11].weight = 2.0;
    free(o);
    o = owners(nodes, NODES, BLOCKS);
    double mine = 0;
    for (size_t b = 0; b < BLOCKS; b++)
        mine += o[b] == 11;
    double expect = 2.0 * BLOCKS / (NODES + 1);
    print_message("single weight-2 node: %.0f, expected %.0f\n", mine, expect);
    assert_true(mine > 0.85 * expect && mine < 1.15 * expect);
    free(o);
}

/* Requests by the pattern `hot`: 0 spreads them over every block, otherwise 9 in 10 go to one
 * block (a hot spot). Every pick's node is under its bound before it takes the request. */
static void run_bounded(const struct place_node *nodes, size_t n, double c, int hot,
                        size_t requests, size_t *spilled)
{
    uint64_t *load = calloc(n, sizeof(*load));
    assert_non_null(load);
    uint64_t total = 0;
    *spilled = 0;
    for (size_t r = 0; r < requests; r++) {
        uint64_t blk = hot && r % 10 != 0 ? block_of(0) : block_of(r);
        ssize_t i = place_pick_bounded(nodes, n, blk, load, total, c);
        assert_true(i >= 0 && (size_t)i < n);
        assert_true((double)load[i] < place_bound(nodes, n, (size_t)i, total, c));
        *spilled += (size_t)i != (size_t)place_owner(nodes, n, blk);
        load[i]++;
        total++;
    }
    double wsum = 0;
    for (size_t i = 0; i < n; i++)
        wsum += nodes[i].weight;
    for (size_t i = 0; i < n; i++)
        assert_true((double)load[i] <= ceil(c * (double)total * nodes[i].weight / wsum));
    free(load);
}

static void test_bounded(void **state)
{
    (void)state;
    struct place_node nodes[NODES];
    make_nodes(nodes, NODES, 0);
    size_t spilled;
    run_bounded(nodes, NODES, 1.25, 0, 20000, &spilled);
    print_message("uniform: %zu of 20000 spilled\n", spilled);
    assert_true(spilled < 20000 / 2);
    run_bounded(nodes, NODES, 1.25, 1, 20000, &spilled);
    /* A hot block cannot stay on its owner: most of its requests spill down the order. */
    print_message("hot block: %zu of 20000 spilled\n", spilled);
    assert_true(spilled > 20000 / 2);
    for (size_t i = 0; i < NODES; i += 3)
        nodes[i].weight = 3.0;
    run_bounded(nodes, NODES, 1.25, 1, 20000, &spilled);

    /* c <= 1 can leave every node at its bound: the least loaded for its weight takes it. */
    struct place_node two[2];
    make_nodes(two, 2, 0);
    uint64_t load[2] = {5, 3};
    ssize_t i = place_pick_bounded(two, 2, block_of(1), load, 8, 0.5);
    assert_int_equal(i, 1);
    assert_int_equal(place_pick_bounded(two, 0, block_of(1), load, 8, 1.25), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic),    cmocka_unit_test(test_distribution),
        cmocka_unit_test(test_minimal_movement), cmocka_unit_test(test_weights),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
