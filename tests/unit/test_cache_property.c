/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_property.c - thousands of seeded random operations (read, fetch+pin, pin, unpin,
 * evict by prefix, demote out of a level, object rewrite, restart) on a cache with small RAM and
 * disk budgets, checking after every one: data read == backend data, bytes used <= budget per
 * level, pinned bytes <= pin budget, and index <-> disk consistency (cache_debug_check: block files
 * on disk == blocks the index says are on disk). Run for both policies.
 */
#include <errno.h>
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
#include "fakebe.h"
#include "testutil.h"

#define BS (64u << 10)
#define NOBJ 24
#define NOPS 2000

static const char *prefixes[] = {"a/", "b/", "a/1", "c/", ""};

static void check(struct cache *c, int op)
{
    char msg[256] = "";
    int r = cache_debug_check(c, msg, sizeof(msg));
    if (r)
        print_message("op %d: %s\n", op, msg);
    assert_int_equal(r, 0);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_true(st.ram.bytes_used <= st.ram.bytes_budget);
    assert_true(st.disk.bytes_used <= st.disk.bytes_budget);
    assert_true(st.pinned_bytes <= st.pin_budget);
}

static void run(enum cache_policy_kind kind, uint64_t seed)
{
    struct backend *be = fakebe_mem_new("mem");
    char keys[NOBJ][16], etags[NOBJ][16];
    uint64_t sizes[NOBJ];
    uint64_t rng = seed;
    const char dirs[] = "abc";
    for (int i = 0; i < NOBJ; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%c/%d", dirs[i % 3], i);
        snprintf(etags[i], sizeof(etags[i]), "v0");
        sizes[i] = 1 + tu_rand_next(&rng) % (5 * BS);
        fakebe_add(be, keys[i], sizes[i], etags[i]);
    }
    char *dir = tu_mkdtemp("cache_prop");
    struct cache_config cfg = {.block_size = BS,
                               .ram_bytes = 6 * BS,
                               .disk_dir = dir,
                               .disk_bytes = 20 * BS,
                               .pin_bytes = 8 * BS,
                               .policy = kind};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    /* three tenants read: two with space quotas (I9 is checked after every op) */
    static const uint64_t quota[3] = {3 * BS, 5 * BS, CACHE_QUOTA_NONE};
    for (uint32_t t = 0; t < 3; t++)
        assert_int_equal(cache_quota_set(c, 2 + t, quota[t]), 0);
    char *buf = malloc(3 * BS), *want = malloc(3 * BS);
    int nospc = 0, pins = 0, evicts = 0, restarts = 0;
    for (int op = 0; op < NOPS; op++) {
        int i = (int)(tu_rand_next(&rng) % NOBJ);
        struct cache_obj o = {.be = be, .key = keys[i], .etag = etags[i], .size_bytes = sizes[i]};
        unsigned what = (unsigned)(tu_rand_next(&rng) % 100);
        if (what < 70) {
            uint64_t off = tu_rand_next(&rng) % sizes[i];
            size_t len = 1 + (size_t)(tu_rand_next(&rng) % (2 * BS));
            uint32_t t = (uint32_t)(tu_rand_next(&rng) % 3);
            struct tier_ioctx io = {.tenant = 2 + t, .cls = TIER_IO_TRAINING};
            ssize_t n = cache_read(c, &io, &o, off, buf, len);
            size_t expect = len < sizes[i] - off ? len : (size_t)(sizes[i] - off);
            assert_int_equal(n, (ssize_t)expect);
            struct cache_tenant_stats ts;
            assert_int_equal(cache_tenant_stats_get(c, 2 + t, &ts), 0);
            assert_true(quota[t] == CACHE_QUOTA_NONE || ts.bytes <= quota[t]);
            fakebe_expected(keys[i], etags[i], off, want, expect);
            assert_memory_equal(buf, want, expect);
        } else if (what < 78) {
            uint64_t idx = tu_rand_next(&rng) % ((sizes[i] + BS - 1) / BS);
            struct cache_stats before, after;
            cache_stats_get(c, &before);
            int r = cache_fetch_block(c, NULL, &o, idx, true);
            cache_stats_get(c, &after);
            assert_true(r == 0 || r == -ENOSPC);
            if (r == -ENOSPC) {
                nospc++;
            } else {
                assert_true(after.pinned_bytes <= after.pin_budget);
            }
        } else if (what < 84) {
            const char *p = prefixes[tu_rand_next(&rng) % 5];
            struct cache_stats before, after;
            cache_stats_get(c, &before);
            int r = cache_pin(c, "mem", p);
            cache_stats_get(c, &after);
            if (r == -ENOSPC) {
                nospc++;
                assert_int_equal(after.pinned_bytes, before.pinned_bytes); /* nothing changed */
            } else {
                assert_int_equal(r, 0);
                pins++;
            }
        } else if (what < 92) {
            int r = cache_unpin(c, "mem", prefixes[tu_rand_next(&rng) % 5]);
            assert_true(r == 0 || r == -ENOENT);
        } else if (what < 95) {
            long n = cache_evict(c, "mem", prefixes[tu_rand_next(&rng) % 5]);
            assert_true(n >= 0);
            evicts++;
        } else if (what < 97) {
            long n = cache_demote(c, "mem", prefixes[tu_rand_next(&rng) % 5],
                                  tu_rand_next(&rng) % 2 ? CACHE_LEVEL_RAM : CACHE_LEVEL_DISK);
            assert_true(n >= 0);
        } else if (what < 99) {
            /* the object changes: its old blocks must never be served for the new version */
            snprintf(etags[i], sizeof(etags[i]), "v%d", op);
            sizes[i] = 1 + tu_rand_next(&rng) % (5 * BS);
            fakebe_add(be, keys[i], sizes[i], etags[i]);
        } else {
            cache_close(c);
            c = NULL;
            assert_int_equal(cache_open(&cfg, &c), 0);
            for (uint32_t t = 0; t < 3; t++)
                assert_int_equal(cache_quota_set(c, 2 + t, quota[t]), 0);
            restarts++;
        }
        check(c, op);
    }
    struct cache_stats st;
    cache_stats_get(c, &st);
    print_message("%s seed %llu: %d ops, %d pins, %d ENOSPC, %d evicts, %d restarts, "
                  "ram hits %llu, disk hits %llu, fetches %llu, evictions ram %llu disk %llu\n",
                  kind == CACHE_POLICY_LRU ? "lru" : "s3fifo", (unsigned long long)seed, NOPS, pins,
                  nospc, evicts, restarts, (unsigned long long)st.ram.hits,
                  (unsigned long long)st.disk.hits, (unsigned long long)st.fetches,
                  (unsigned long long)st.ram.evictions, (unsigned long long)st.disk.evictions);
    free(buf);
    free(want);
    cache_close(c);
    tu_rmtree(dir);
    free(dir);
    backend_free(be);
}

static void test_random_ops_s3fifo(void **state)
{
    (void)state;
    run(CACHE_POLICY_S3FIFO, 1);
}

static void test_random_ops_lru(void **state)
{
    (void)state;
    run(CACHE_POLICY_LRU, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_ops_s3fifo),
        cmocka_unit_test(test_random_ops_lru),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
