/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_diskfull.c - the disk level on a full file system: the cache directory on an 8 MiB
 * tmpfs with a disk budget far above it. The cache must evict (free-space floor via statvfs) or
 * refuse to cache; every read still returns the backend's bytes; nothing crashes and the index
 * stays consistent with the files. Needs root to mount; skips with a message otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <cmocka.h>

#include "cache/cache.h"
#include "cache/cache_debug.h"
#include "test_cache_membe.h"
#include "testutil.h"

#define BS (1u << 20)
#define NOBJ 6
#define OBJ_SIZE (6 * BS) /* 36 MiB in all: 4.5x the file system */

static char *mnt;

static int setup(void **state)
{
    (void)state;
    mnt = tu_mkdtemp("cache_tmpfs");
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=8m") < 0) {
        print_message("SKIP: cannot mount a tmpfs on %s (%s); disk-full test needs root\n", mnt,
                      strerror(errno));
        tu_rmtree(mnt);
        free(mnt);
        mnt = NULL;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (mnt) {
        umount2(mnt, MNT_DETACH);
        tu_rmtree(mnt);
        free(mnt);
        mnt = NULL;
    }
    return 0;
}

static void read_everything(struct cache *c, struct backend *be, int passes)
{
    char *buf = malloc(BS + 4096), *want = malloc(BS + 4096);
    char key[32];
    for (int p = 0; p < passes; p++) {
        for (int i = 0; i < NOBJ; i++) {
            snprintf(key, sizeof(key), "big/%d", i);
            struct cache_obj o = {.be = be, .key = key, .etag = "e", .size_bytes = OBJ_SIZE};
            for (uint64_t off = 0; off < OBJ_SIZE; off += BS - 4096) {
                size_t len = BS + 4096;
                size_t expect = len < OBJ_SIZE - off ? len : (size_t)(OBJ_SIZE - off);
                assert_int_equal(cache_read(c, NULL, &o, off, buf, len), (ssize_t)expect);
                membe_expected(key, "e", off, want, expect);
                assert_memory_equal(buf, want, expect);
            }
        }
    }
    free(buf);
    free(want);
}

static void run(uint64_t disk_bytes, uint64_t min_free, bool expect_cached)
{
    if (!mnt) {
        skip();
        return;
    }
    struct backend *be = membe_new("mem");
    char key[32];
    for (int i = 0; i < NOBJ; i++) {
        snprintf(key, sizeof(key), "big/%d", i);
        membe_add(be, key, OBJ_SIZE, "e");
    }
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/cache", mnt);
    struct cache_config cfg = {.block_size = BS,
                               .ram_bytes = 2 * BS,
                               .disk_dir = dir,
                               .disk_bytes = disk_bytes,
                               .disk_min_free_bytes = min_free};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    read_everything(c, be, 2);
    struct cache_stats st;
    cache_stats_get(c, &st);
    struct statvfs sv;
    assert_int_equal(statvfs(dir, &sv), 0);
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    print_message("disk budget %llu MiB, floor %llu MiB: disk used %llu KiB in %llu blocks, "
                  "%llu disk evictions, fs free %llu KiB, fetches %llu\n",
                  (unsigned long long)(disk_bytes >> 20), (unsigned long long)(min_free >> 20),
                  (unsigned long long)(st.disk.bytes_used >> 10),
                  (unsigned long long)st.disk.blocks, (unsigned long long)st.disk.evictions,
                  (unsigned long long)(avail >> 10), (unsigned long long)st.fetches);
    assert_true(st.disk.bytes_used <= 8u << 20);
    if (expect_cached) {
        assert_true(st.disk.blocks > 0);
        assert_true(st.disk.evictions > 0);
        assert_true(avail >= min_free);
    } else {
        assert_int_equal(st.disk.blocks, 0);
    }
    char msg[256] = "";
    int r = cache_debug_check(c, msg, sizeof(msg));
    if (r)
        print_message("check: %s\n", msg);
    assert_int_equal(r, 0);
    cache_close(c);
    backend_free(be);
}

/* Budget 64 MiB on an 8 MiB fs, floor 1 MiB: the floor makes it evict. */
static void test_floor_evicts(void **state)
{
    (void)state;
    run(64u << 20, 1u << 20, true);
}

/* Floor 0: the statvfs check still evicts to make room for each block before it is written, so
 * the fs fills to the brim but the cache never writes into ENOSPC blindly. */
static void test_no_floor_fills_fs(void **state)
{
    (void)state;
    run(64u << 20, 0, true);
}

/* Floor above the fs size: nothing can be cached on disk; reads still work. */
static void test_floor_unreachable(void **state)
{
    (void)state;
    run(64u << 20, 16u << 20, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_floor_evicts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_floor_fills_fs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_floor_unreachable, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
