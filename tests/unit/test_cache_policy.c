/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_policy.c - eviction policies (src/cache/policy.c), alone and inside the cache:
 * a one-pass scan over 10x the cache keeps a hot working set under S3-FIFO but flushes it under
 * LRU on the same trace; pinned entries survive any workload; ghost hits re-admit to main.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cache/cache.h"
#include "cache/cache_debug.h"
#include "cache/policy.h"
#include "fakebe.h"
#include "testutil.h"

#define NIDS 4096

struct sim {
    struct policy *p;
    struct pol_node nodes[NIDS];
    bool pinned[NIDS];
    uint64_t cap;
    uint64_t used;
    uint64_t misses;
};

static bool sim_evictable(struct pol_node *n, void *ud)
{
    struct sim *s = ud;
    return !s->pinned[n - s->nodes];
}

static void sim_access(struct sim *s, size_t id)
{
    struct pol_node *n = &s->nodes[id];
    if (policy_contains(n)) {
        policy_hit(s->p, n);
        return;
    }
    s->misses++;
    n->hash = id * 0x9e3779b97f4a7c15ULL + 1;
    n->size = 1;
    policy_insert(s->p, n);
    s->used += 1;
    while (s->used > s->cap) {
        struct pol_node *v = policy_evict_candidate(s->p, sim_evictable, s);
        assert_non_null(v);
        assert_false(s->pinned[v - s->nodes]);
        policy_remove(s->p, v, true);
        s->used -= v->size;
    }
    assert_int_equal(policy_bytes(s->p), s->used);
}

static struct sim *sim_new(enum cache_policy_kind kind, uint64_t cap)
{
    struct sim *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->cap = cap;
    assert_int_equal(policy_new(kind, cap, &s->p), 0);
    return s;
}

static void sim_free(struct sim *s)
{
    policy_free(s->p);
    free(s);
}

/* Hot set of 50 in a cache of 100, touched 3 times, then a scan of 1000 cold ids, then count
 * how many hot ids are still cached. */
static size_t hot_after_scan(enum cache_policy_kind kind)
{
    struct sim *s = sim_new(kind, 100);
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < 50; i++)
            sim_access(s, i);
    for (size_t i = 1000; i < 2000; i++)
        sim_access(s, i);
    size_t hot = 0;
    for (size_t i = 0; i < 50; i++)
        hot += policy_contains(&s->nodes[i]);
    sim_free(s);
    return hot;
}

static void test_scan_resistance(void **state)
{
    (void)state;
    size_t s3 = hot_after_scan(CACHE_POLICY_S3FIFO);
    size_t lru = hot_after_scan(CACHE_POLICY_LRU);
    print_message("hot set kept after a 10x scan: s3fifo %zu/50, lru %zu/50\n", s3, lru);
    assert_int_equal(s3, 50);
    assert_int_equal(lru, 0);
}

static void test_pinned_survive(void **state)
{
    (void)state;
    enum cache_policy_kind kinds[] = {CACHE_POLICY_S3FIFO, CACHE_POLICY_LRU};
    for (int k = 0; k < 2; k++) {
        struct sim *s = sim_new(kinds[k], 64);
        for (size_t i = 0; i < 20; i++) {
            s->pinned[i] = true;
            sim_access(s, i);
        }
        uint64_t rng = 42;
        for (int op = 0; op < 20000; op++) {
            size_t id = 20 + (size_t)(tu_rand_next(&rng) % (NIDS - 20));
            if (op % 3 == 0)
                id = 20 + (size_t)(tu_rand_next(&rng) % 40); /* some reuse */
            sim_access(s, id);
            if (op % 997 == 0)
                for (size_t i = 0; i < 20; i++)
                    assert_true(policy_contains(&s->nodes[i]));
        }
        for (size_t i = 0; i < 20; i++)
            assert_true(policy_contains(&s->nodes[i]));
        /* all pinned: nothing evictable */
        for (size_t i = 0; i < NIDS; i++)
            s->pinned[i] = true;
        assert_null(policy_evict_candidate(s->p, sim_evictable, s));
        sim_free(s);
    }
}

static void test_ghost_readmits_to_main(void **state)
{
    (void)state;
    struct sim *s = sim_new(CACHE_POLICY_S3FIFO, 10);
    sim_access(s, 1);
    for (size_t i = 100; i < 111; i++)
        sim_access(s, i); /* 1 falls out of small into the ghost (which holds 10) */
    assert_false(policy_contains(&s->nodes[1]));
    sim_access(s, 1);
    assert_int_equal(s->nodes[1].queue, POL_MAIN);
    sim_free(s);
}

/* The same scan through the whole cache (RAM level), counting backend fetches. */
static uint64_t cache_scan_refetches(enum cache_policy_kind kind, bool pin_hot)
{
    struct backend *be = fakebe_mem_new("mem");
    const size_t bs = 64 << 10;
    char key[64];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "hot/%d", i);
        fakebe_add(be, key, bs, "v1");
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "scan/%d", i);
        fakebe_add(be, key, bs, "v1");
    }
    struct cache_config cfg = {
        .block_size = bs, .ram_bytes = 100 * bs, .pin_bytes = 60 * bs, .policy = kind};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    if (pin_hot)
        assert_int_equal(cache_pin(c, "mem", "hot/"), 0);
    char *buf = malloc(bs);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 50; i++) {
            snprintf(key, sizeof(key), "hot/%d", i);
            struct cache_obj o = {.be = be, .key = key, .etag = "v1", .size_bytes = bs};
            assert_int_equal(cache_read(c, NULL, &o, 0, buf, bs), (ssize_t)bs);
        }
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "scan/%d", i);
        struct cache_obj o = {.be = be, .key = key, .etag = "v1", .size_bytes = bs};
        /* read in 4 pieces: a sequential reader must not look hot */
        for (size_t off = 0; off < bs; off += bs / 4)
            assert_int_equal(cache_read(c, NULL, &o, off, buf + off, bs / 4), (ssize_t)bs / 4);
    }
    uint64_t before = fakebe_calls(be, FAKEBE_READ);
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "hot/%d", i);
        struct cache_obj o = {.be = be, .key = key, .etag = "v1", .size_bytes = bs};
        assert_int_equal(cache_read(c, NULL, &o, 0, buf, bs), (ssize_t)bs);
        char *want = malloc(bs);
        fakebe_expected(key, "v1", 0, want, bs);
        assert_memory_equal(buf, want, bs);
        free(want);
    }
    uint64_t refetch = fakebe_calls(be, FAKEBE_READ) - before;
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    free(buf);
    cache_close(c);
    backend_free(be);
    return refetch;
}

static void test_cache_scan(void **state)
{
    (void)state;
    uint64_t s3 = cache_scan_refetches(CACHE_POLICY_S3FIFO, false);
    uint64_t lru = cache_scan_refetches(CACHE_POLICY_LRU, false);
    uint64_t lru_pinned = cache_scan_refetches(CACHE_POLICY_LRU, true);
    print_message("hot blocks refetched after a 10x scan: s3fifo %llu, lru %llu, lru+pin %llu\n",
                  (unsigned long long)s3, (unsigned long long)lru, (unsigned long long)lru_pinned);
    assert_int_equal(s3, 0);
    assert_int_equal(lru, 50);
    assert_int_equal(lru_pinned, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_resistance),
        cmocka_unit_test(test_pinned_survive),
        cmocka_unit_test(test_ghost_readmits_to_main),
        cmocka_unit_test(test_cache_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
