/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_quota.c - per-tenant space quotas of the hot tier (cache.h, cache_quota_set; issue
 * 11, "space"): a tenant over its quota evicts its own blocks, never another's.
 *
 *   - scan: tenant B reads a working set once; tenant A, quota 8 blocks, scans 20x the RAM
 *     level. A never holds more than its quota after a read returns, every block of B is still
 *     cached, and A's quota evicted the rest. Without the quota the same scan evicts B's blocks
 *     (checked in the same test, on a second cache with no quota: the test would pass vacuously
 *     if the policy alone kept B's blocks).
 *   - the same over RAM + disk levels (a block counted once, in whichever levels it is).
 *   - CLOCK: a block hit since it was charged survives the next quota eviction; the oldest
 *     unhit one goes.
 *   - live change: lowering a quota evicts down to it before cache_quota_set returns; NONE
 *     lifts it; DEFAULT goes back to cfg.default_quota.
 *   - pinned blocks are charged to nobody (they have the pin budget).
 *   - blocks found on disk at open are charged to nobody until a tenant reads them, then to it.
 *   - a tenant id beyond max_tenants: -EINVAL from the setter; its reads are charged to nobody.
 * Every step ends with cache_debug_check() (I9: charges match the blocks' states and lists).
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
#define TA 5u /* tenant ids as the registry hands them out */
#define TB 6u

static struct tier_ioctx io_of(uint32_t t)
{
    return (struct tier_ioctx){.tenant = t, .cls = TIER_IO_TRAINING};
}

static void check(struct cache *c)
{
    char msg[256] = "";
    int r = cache_debug_check(c, msg, sizeof(msg));
    if (r)
        fail_msg("cache_debug_check: %s", msg);
}

static struct cache_tenant_stats tstats(struct cache *c, uint32_t t)
{
    struct cache_tenant_stats st;
    assert_int_equal(cache_tenant_stats_get(c, t, &st), 0);
    return st;
}

/* Read block i of key (one block per object keeps the arithmetic plain) as tenant t. */
static void read_block(struct cache *c, struct backend *be, const char *key, uint32_t t)
{
    static char buf[BS];
    struct tier_ioctx io = io_of(t);
    struct cache_obj o = {.be = be, .key = key, .etag = "e1", .size_bytes = BS};
    assert_int_equal(cache_read(c, &io, &o, 0, buf, BS), (ssize_t)BS);
}

static bool cached(struct cache *c, struct backend *be, const char *key)
{
    struct cache_obj o = {.be = be, .key = key, .etag = "e1", .size_bytes = BS};
    return cache_cached_bytes(c, &o) == BS;
}

static struct backend *make_be(int nobj)
{
    struct backend *be = fakebe_mem_new("be");
    char key[32];
    for (int i = 0; i < nobj; i++) {
        snprintf(key, sizeof(key), "k%04d", i);
        fakebe_add(be, key, BS, "e1");
    }
    return be;
}

#define NB 12   /* B's working set, blocks */
#define QA 8    /* A's quota, blocks */
#define RAMB 32 /* RAM level, blocks */
#define SCAN 640

/* B reads k0000..k0011 once; A scans k1000.. ; returns how many of B's blocks are left. */
static int scan_run(struct cache *c, struct backend *be, bool check_quota)
{
    char key[32];
    for (int i = 0; i < NB; i++) {
        snprintf(key, sizeof(key), "k%04d", i);
        read_block(c, be, key, TB);
    }
    for (int i = 0; i < SCAN; i++) {
        snprintf(key, sizeof(key), "k%04d", 1000 + i);
        read_block(c, be, key, TA);
        if (check_quota)
            assert_true(tstats(c, TA).bytes <= (uint64_t)QA * BS);
    }
    check(c);
    int left = 0;
    for (int i = 0; i < NB; i++) {
        snprintf(key, sizeof(key), "k%04d", i);
        left += cached(c, be, key);
    }
    return left;
}

static void test_scan_keeps_others(void **state)
{
    (void)state;
    struct backend *be = make_be(1000 + SCAN);
    struct cache_config cfg = {.block_size = BS, .ram_bytes = RAMB * BS, .prefetch_threads = 1};

    /* without a quota the scan evicts B's blocks: the assertion below can fail */
    struct cache *c0 = NULL;
    assert_int_equal(cache_open(&cfg, &c0), 0);
    assert_true(scan_run(c0, be, false) < NB);
    assert_int_equal(tstats(c0, TA).quota_evictions, 0);
    cache_close(c0);

    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cache_quota_set(c, TA, (uint64_t)QA * BS), 0);
    assert_int_equal(scan_run(c, be, true), NB);
    struct cache_tenant_stats a = tstats(c, TA), b = tstats(c, TB);
    assert_int_equal(a.quota, (uint64_t)QA * BS);
    assert_int_equal(a.bytes, (uint64_t)QA * BS);
    assert_int_equal(a.blocks, QA);
    assert_int_equal(a.quota_evictions, SCAN - QA);
    assert_int_equal(a.quota_evicted_bytes, (uint64_t)(SCAN - QA) * BS);
    assert_int_equal(b.quota, 0);
    assert_int_equal(b.bytes, (uint64_t)NB * BS);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.quota_evictions, SCAN - QA);
    assert_int_equal(st.charged_bytes, (uint64_t)(QA + NB) * BS);
    cache_close(c);
    backend_free(be);
}

static void test_scan_disk_levels(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("quota");
    struct backend *be = make_be(1000 + SCAN);
    struct cache_config cfg = {.block_size = BS,
                               .ram_bytes = 8 * BS,
                               .disk_dir = dir,
                               .disk_bytes = (RAMB + 8) * (BS + (8u << 10)),
                               .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cache_quota_set(c, TA, (uint64_t)QA * BS), 0);
    assert_int_equal(scan_run(c, be, true), NB);
    assert_int_equal(tstats(c, TA).blocks, QA);
    assert_int_equal(tstats(c, TB).blocks, NB);
    cache_close(c);
    backend_free(be);
    tu_rmtree(dir);
    free(dir);
}

static void test_clock_second_chance(void **state)
{
    (void)state;
    struct backend *be = make_be(8);
    struct cache_config cfg = {.block_size = BS, .ram_bytes = 64 * BS, .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cache_quota_set(c, TA, 4 * BS), 0);
    read_block(c, be, "k0000", TA);
    read_block(c, be, "k0001", TA);
    read_block(c, be, "k0002", TA);
    read_block(c, be, "k0003", TA);
    read_block(c, be, "k0000", TA); /* a hit: k0000 gets a second chance */
    read_block(c, be, "k0004", TA); /* over quota by one: the oldest unhit goes, k0001 */
    assert_true(cached(c, be, "k0000"));
    assert_false(cached(c, be, "k0001"));
    assert_true(cached(c, be, "k0002"));
    assert_true(cached(c, be, "k0004"));
    read_block(c, be, "k0005", TA); /* k0002 next (k0000 was moved behind k0004) */
    assert_false(cached(c, be, "k0002"));
    assert_true(cached(c, be, "k0000"));
    assert_int_equal(tstats(c, TA).quota_evictions, 2);
    check(c);
    cache_close(c);
    backend_free(be);
}

static void test_live_change(void **state)
{
    (void)state;
    struct backend *be = make_be(16);
    struct cache_config cfg = {
        .block_size = BS, .ram_bytes = 64 * BS, .prefetch_threads = 1, .default_quota = 6 * BS};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    char key[32];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%04d", i);
        read_block(c, be, key, TA);
    }
    assert_int_equal(tstats(c, TA).quota, 6 * BS); /* the default */
    assert_int_equal(tstats(c, TA).blocks, 6);
    assert_int_equal(cache_quota_set(c, TA, 2 * BS), 0); /* evicts before it returns */
    assert_int_equal(tstats(c, TA).blocks, 2);
    assert_true(cached(c, be, "k0009"));
    assert_false(cached(c, be, "k0007"));
    check(c);
    assert_int_equal(cache_quota_set(c, TA, CACHE_QUOTA_NONE), 0);
    assert_int_equal(tstats(c, TA).quota, 0);
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%04d", i);
        read_block(c, be, key, TA);
    }
    assert_int_equal(tstats(c, TA).blocks, 10);
    assert_int_equal(cache_quota_set(c, TA, CACHE_QUOTA_DEFAULT), 0);
    assert_int_equal(tstats(c, TA).quota, 6 * BS);
    assert_int_equal(tstats(c, TA).blocks, 6);
    assert_int_equal(cache_quota_set(c, 64, BS), -EINVAL); /* max_tenants 64 by default */
    assert_int_equal(cache_tenant_stats_get(c, 64, &(struct cache_tenant_stats){0}), -EINVAL);
    read_block(c, be, "k0015", 70); /* beyond max_tenants: charged to nobody */
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.charged_bytes, 6 * BS);
    check(c);
    cache_close(c);
    /* at the registry's id limit (max_tenants 65536 and the retired id): the top id has its own
     * account, one more is refused */
    cfg.max_tenants = TIER_TENANT_IDS_MAX + 1;
    assert_int_equal(cache_open(&cfg, &c), -EINVAL);
    cfg.max_tenants = TIER_TENANT_IDS_MAX;
    assert_int_equal(cache_open(&cfg, &c), 0);
    read_block(c, be, "k0001", TIER_TENANT_IDS_MAX - 1);
    assert_int_equal(tstats(c, TIER_TENANT_IDS_MAX - 1).blocks, 1);
    check(c);
    cache_close(c);
    backend_free(be);
}

static void test_pinned_not_charged(void **state)
{
    (void)state;
    struct backend *be = make_be(8);
    struct cache_config cfg = {
        .block_size = BS, .ram_bytes = 64 * BS, .pin_bytes = 8 * BS, .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cache_quota_set(c, TA, 2 * BS), 0);
    read_block(c, be, "k0000", TA);
    read_block(c, be, "k0001", TA);
    assert_int_equal(cache_pin(c, "be", "k0000"), 0); /* leaves A's charge */
    assert_int_equal(tstats(c, TA).blocks, 1);
    read_block(c, be, "k0002", TA);
    read_block(c, be, "k0003", TA); /* over: k0001 goes, the pinned k0000 stays */
    assert_true(cached(c, be, "k0000"));
    assert_false(cached(c, be, "k0001"));
    assert_int_equal(tstats(c, TA).blocks, 2);
    check(c);
    /* charged again (3 > 2) and trimmed before cache_unpin returns */
    assert_int_equal(cache_unpin(c, "be", "k0000"), 0);
    assert_int_equal(tstats(c, TA).blocks, 2);
    check(c);
    cache_close(c);
    backend_free(be);
}

/* Staging with --pin for a tenant at its quota (review of issue 11): the block just fetched is
 * pinned before the quota trims the tenant, so the pin succeeds and nothing else of the tenant
 * is evicted for a block that leaves its charge anyway. */
static void test_pin_fetch_at_quota(void **state)
{
    (void)state;
    struct backend *be = make_be(8);
    struct cache_config cfg = {
        .block_size = BS, .ram_bytes = 64 * BS, .pin_bytes = 8 * BS, .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cache_quota_set(c, TA, 2 * BS), 0);
    read_block(c, be, "k0000", TA);
    read_block(c, be, "k0001", TA);
    read_block(c, be, "k0000", TA); /* both hit: CLOCK would pass over them */
    read_block(c, be, "k0001", TA);
    struct tier_ioctx io = io_of(TA);
    struct cache_obj o = {.be = be, .key = "k0002", .etag = "e1", .size_bytes = BS};
    assert_int_equal(cache_fetch_block(c, &io, &o, 0, true), 0);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.pinned_bytes, BS);
    assert_int_equal(tstats(c, TA).blocks, 2); /* k0000, k0001 kept */
    assert_int_equal(tstats(c, TA).quota_evictions, 0);
    assert_true(cached(c, be, "k0000") && cached(c, be, "k0001"));
    check(c);
    cache_close(c);
    backend_free(be);
}

/* A read that fails part-way still trims its tenant (review of issue 11): the blocks it cached
 * before the failure count. The fetch hook makes the second block's fetch fail. */
static struct backend *fail_be;

static void fail_second(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                        uint64_t index, size_t bytes)
{
    (void)ud, (void)io, (void)bytes;
    if (!strcmp(obj->key, "two") && index == 1)
        fakebe_fail_next(fail_be, FAKEBE_READ, -EIO, 1);
}

static void test_failed_read_trims(void **state)
{
    (void)state;
    struct backend *be = make_be(2);
    fakebe_add(be, "two", 2 * BS, "e1");
    fail_be = be;
    struct cache_config cfg = {.block_size = BS, .ram_bytes = 64 * BS, .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cache_quota_set(c, TA, BS), 0);
    read_block(c, be, "k0000", TA); /* A holds one block: at its quota */
    struct cache_fetch_hook hook = {.before = fail_second};
    cache_set_fetch_hook(c, &hook);
    static char buf[2 * BS];
    struct tier_ioctx io = io_of(TA);
    struct cache_obj o = {.be = be, .key = "two", .etag = "e1", .size_bytes = 2 * BS};
    assert_int_equal(cache_read(c, &io, &o, 0, buf, 2 * BS), -EIO);
    assert_int_equal(tstats(c, TA).blocks, 1); /* block 0 of two cached, k0000 trimmed */
    assert_false(cached(c, be, "k0000"));
    check(c);
    cache_close(c);
    backend_free(be);
}

/* Hinted blocks (review of issue 12): a hold per hint set (one release keeps the others'), held
 * blocks charged to the hinter whoever cached them, and the hint share bounds them all. */
static void test_hint_holds(void **state)
{
    (void)state;
    struct backend *be = make_be(16);
    struct cache_config cfg = {.block_size = BS, .ram_bytes = 8 * BS, .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cache_hint_share(c), 6 * BS); /* three quarters of the level */
    read_block(c, be, "k0000", TA);                /* A cached it */
    struct tier_ioctx ib = io_of(TB);
    struct cache_obj o = {.be = be, .key = "k0000", .etag = "e1", .size_bytes = BS};
    assert_int_equal(cache_fetch_block_hinted(c, &ib, &o, 0), 0); /* B holds it: B's now */
    assert_int_equal(tstats(c, TA).bytes, 0);
    assert_int_equal(tstats(c, TB).hinted_bytes, BS);
    assert_int_equal(cache_fetch_block_hinted(c, &ib, &o, 0), 0); /* a second set's hold */
    assert_int_equal(cache_hint_release(c, &o, true), 0);         /* one hold left: kept */
    assert_true(cached(c, be, "k0000"));
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.hinted_bytes, BS);
    assert_int_equal(cache_hint_release(c, &o, true), BS); /* the last: evicted */
    assert_false(cached(c, be, "k0000"));
    check(c);
    /* the share: six blocks held, the seventh is cached but not held */
    char key[32];
    for (int i = 1; i <= 7; i++) {
        snprintf(key, sizeof(key), "k%04d", i);
        struct cache_obj oi = {.be = be, .key = key, .etag = "e1", .size_bytes = BS};
        assert_int_equal(cache_fetch_block_hinted(c, &ib, &oi, 0), i <= 6 ? 0 : -EDQUOT);
    }
    cache_stats_get(c, &st);
    assert_int_equal(st.hinted_bytes, 6 * BS);
    /* the level stays usable for others: a scan of A evicts none of the held blocks */
    for (int i = 8; i < 16; i++) {
        snprintf(key, sizeof(key), "k%04d", i);
        read_block(c, be, key, TA);
    }
    for (int i = 1; i <= 6; i++) {
        snprintf(key, sizeof(key), "k%04d", i);
        assert_true(cached(c, be, key));
    }
    check(c);
    cache_close(c);
    backend_free(be);
}

/* Disk hits keep their block file open (issue 12, disk hits at pread speed): repeated RAM-less
 * hits of one block open it once; after the block is evicted and fetched again, the new file is
 * opened, not the old descriptor reused. */
static void test_disk_open_files(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("fdcache");
    struct backend *be = make_be(2);
    struct cache_config cfg = {.block_size = BS,
                               .disk_dir = dir,
                               .disk_bytes = 16 * (BS + (8u << 10)),
                               .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    read_block(c, be, "k0000", TA); /* fetched, written through */
    struct cache_stats st0, st1;
    cache_stats_get(c, &st0);
    for (int i = 0; i < 10; i++)
        read_block(c, be, "k0000", TA); /* RAM-less disk hits */
    cache_stats_get(c, &st1);
    assert_int_equal(st1.disk.hits - st0.disk.hits, 10);
    assert_int_equal(st1.disk_fd_opens - st0.disk_fd_opens, 1);
    assert_int_equal(st1.disk_fd_hits - st0.disk_fd_hits, 9);
    assert_true(cache_evict(c, "be", "k0000") == 1);
    read_block(c, be, "k0000", TA); /* fetched again: a new file */
    read_block(c, be, "k0000", TA);
    struct cache_stats st2;
    cache_stats_get(c, &st2);
    assert_int_equal(st2.disk_fd_opens - st1.disk_fd_opens, 1);
    check(c);
    cache_close(c);
    backend_free(be);
    tu_rmtree(dir);
    free(dir);
}

static void test_adopted_blocks_claimed(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("quota");
    struct backend *be = make_be(8);
    struct cache_config cfg = {.block_size = BS,
                               .disk_dir = dir,
                               .disk_bytes = 64 * (BS + (8u << 10)),
                               .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    for (int i = 0; i < 4; i++) {
        char key[32];
        snprintf(key, sizeof(key), "k%04d", i);
        read_block(c, be, key, TA);
    }
    assert_int_equal(tstats(c, TA).blocks, 4);
    cache_close(c);

    assert_int_equal(cache_open(&cfg, &c), 0);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.charged_bytes, 0);
    assert_int_equal(st.disk.blocks, 4);
    check(c);
    uint64_t reads = fakebe_calls(be, FAKEBE_READ);
    read_block(c, be, "k0000", TB); /* a disk hit (RAM-less: disk_direct) */
    read_block(c, be, "k0001", TB);
    assert_int_equal(fakebe_calls(be, FAKEBE_READ), reads);
    assert_int_equal(tstats(c, TB).blocks, 2);
    assert_int_equal(tstats(c, TA).blocks, 0);
    assert_int_equal(cache_quota_set(c, TB, BS), 0);
    assert_int_equal(tstats(c, TB).blocks, 1);
    check(c);
    cache_close(c);
    backend_free(be);
    tu_rmtree(dir);
    free(dir);
}

/* A pin rule that changes between a read's look at the rules and its creation of the block
 * (cache.c pin_settle): the block ends as the rules say after the read, not as they said
 * before. The hook runs in that gap, once. */
struct pin_gap {
    struct cache *c;
    const char *key;
    bool pin, done;
};

static void pin_gap_hook(void *arg)
{
    struct pin_gap *g = arg;
    if (g->done || !g->key)
        return;
    g->done = true;
    if (g->pin)
        assert_int_equal(cache_pin(g->c, "be", g->key), 0);
    else
        assert_int_equal(cache_unpin(g->c, "be", g->key), 0);
}

static void test_pin_rule_changes_during_load(void **state)
{
    (void)state;
    struct backend *be = make_be(4);
    struct cache_config cfg = {
        .block_size = BS, .ram_bytes = RAMB * BS, .pin_bytes = 4 * BS, .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    struct pin_gap g = {.c = c};
    cache_debug_set_pin_hook(c, pin_gap_hook, &g);
    struct cache_stats st;

    /* pinned in the gap: the block the read creates is pinned */
    g = (struct pin_gap){.c = c, .key = "k0000", .pin = true};
    read_block(c, be, "k0000", TA);
    assert_true(g.done);
    cache_stats_get(c, &st);
    assert_int_equal(st.pinned_bytes, BS);
    assert_int_equal(tstats(c, TA).bytes, 0); /* pinned: charged to nobody */
    check(c);

    /* unpinned in the gap: the block the read creates is not pinned */
    assert_int_equal(cache_pin(c, "be", "k0001"), 0);
    g = (struct pin_gap){.c = c, .key = "k0001", .pin = false};
    read_block(c, be, "k0001", TA);
    assert_true(g.done);
    cache_stats_get(c, &st);
    assert_int_equal(st.pinned_bytes, BS); /* k0000 only */
    assert_int_equal(tstats(c, TA).bytes, BS);
    check(c);

    cache_debug_set_pin_hook(c, NULL, NULL);
    cache_close(c);
    backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_keeps_others),
        cmocka_unit_test(test_pin_rule_changes_during_load),
        cmocka_unit_test(test_scan_disk_levels),
        cmocka_unit_test(test_clock_second_chance),
        cmocka_unit_test(test_live_change),
        cmocka_unit_test(test_pinned_not_charged),
        cmocka_unit_test(test_adopted_blocks_claimed),
        cmocka_unit_test(test_pin_fetch_at_quota),
        cmocka_unit_test(test_failed_read_trims),
        cmocka_unit_test(test_hint_holds),
        cmocka_unit_test(test_disk_open_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
