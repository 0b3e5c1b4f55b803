/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_integrity.c - the cache over the real POSIX backend: a block corrupted on disk is
 * detected and refetched (never served); a restart reuses the disk level without fetching; torn
 * and temporary files are discarded at open; a rewritten object (new version tag) is never served
 * from old blocks; fetch hook, prefetch, cached_bytes, evict by prefix, pin budget, and a second
 * cache on the same directory; demotion out of one level (cache_demote); the bound of reads
 * served without hashing (docs/CACHE.md "Verification of disk reads").
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache/cache.h"
#include "cache/cache_debug.h"
#include "common/timeutil.h"
#include "fakebe.h"
#include "testutil.h"
#include "tiers/backend.h"

#define BS (64u << 10)
#define SIZE (4 * BS + 123)

struct fx {
    char *root, *dir;
    struct backend *be;
    char etag[BACKEND_ETAG_MAX];
    char *data;
    struct cache_config cfg;
};

static void fx_obj(struct fx *f, struct cache_obj *o)
{
    *o = (struct cache_obj){.be = f->be, .key = "d/obj.bin", .etag = f->etag, .size_bytes = SIZE};
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->root = tu_mkdtemp("cache_integ_root");
    f->dir = tu_mkdtemp("cache_integ_dir");
    struct posix_backend_config pc = {.name = "warm", .root = f->root};
    assert_int_equal(backend_posix_open(&pc, &f->be), 0);
    f->data = malloc(SIZE);
    tu_fill_random(f->data, SIZE, 7);
    assert_int_equal(backend_put(f->be, NULL, "d/obj.bin", f->data, SIZE, f->etag), 0);
    f->cfg = (struct cache_config){.block_size = BS,
                                   .ram_bytes = 0,
                                   .disk_dir = f->dir,
                                   .disk_bytes = 64 * BS,
                                   .pin_bytes = 2 * BS};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    backend_free(f->be);
    tu_rmtree(f->root);
    tu_rmtree(f->dir);
    free(f->root);
    free(f->dir);
    free(f->data);
    free(f);
    return 0;
}

static void read_all_check(struct cache *c, struct fx *f)
{
    struct cache_obj o;
    fx_obj(f, &o);
    char *buf = malloc(SIZE);
    assert_int_equal(cache_read(c, NULL, &o, 0, buf, SIZE), SIZE);
    assert_memory_equal(buf, f->data, SIZE);
    free(buf);
}

static void flip_byte(const char *path, off_t from_end)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    unsigned char ch;
    assert_int_equal(pread(fd, &ch, 1, st.st_size - from_end), 1);
    ch ^= 0x40;
    assert_int_equal(pwrite(fd, &ch, 1, st.st_size - from_end), 1);
    close(fd);
}

static void test_corrupt_block_refetched(void **state)
{
    struct fx *f = *state;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    read_all_check(c, f); /* 5 blocks fetched and written through */
    char path[4096];
    assert_int_equal(cache_debug_block_path(c, "warm", "d/obj.bin", f->etag, 2, path, sizeof(path)),
                     0);
    flip_byte(path, 1000);
    read_all_check(c, f); /* RAM level off: every block comes from disk, block 2 is bad */
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.checksum_failures, 1);
    assert_int_equal(st.fetches, 6); /* 5 + the refetch of block 2 */
    read_all_check(c, f);            /* the rewritten block is good again */
    cache_stats_get(c, &st);
    assert_int_equal(st.checksum_failures, 1);
    assert_int_equal(st.fetches, 6);
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);
}

static void test_restart_reuses_and_discards_torn(void **state)
{
    struct fx *f = *state;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    read_all_check(c, f);
    /* a second cache on the same directory is refused */
    struct cache *c2 = NULL;
    assert_int_equal(cache_open(&f->cfg, &c2), -EBUSY);
    char p1[4096], p3[4096], tmp[4096 + 8];
    cache_debug_block_path(c, "warm", "d/obj.bin", f->etag, 1, p1, sizeof(p1));
    cache_debug_block_path(c, "warm", "d/obj.bin", f->etag, 3, p3, sizeof(p3));
    cache_close(c);

    assert_int_equal(truncate(p1, 5000), 0); /* torn block */
    flip_byte(p3, 10);                       /* corrupt data: found on first read */
    snprintf(tmp, sizeof(tmp), "%s.tmp", p3);
    tu_write_file(tmp, "partial", 7); /* a write cut by a crash */

    assert_int_equal(cache_open(&f->cfg, &c), 0);
    assert_int_equal(access(p1, F_OK), -1); /* torn file deleted at open */
    assert_int_equal(access(tmp, F_OK), -1);
    struct cache_obj o;
    fx_obj(f, &o);
    assert_int_equal(cache_cached_bytes(c, &o), SIZE - BS); /* 4 of 5 blocks adopted */
    read_all_check(c, f);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.fetches, 2); /* the torn block and the corrupt one */
    assert_int_equal(st.checksum_failures, 1);
    assert_int_equal(st.disk.hits, 3);
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);
}

static void test_new_version_not_served_stale(void **state)
{
    struct fx *f = *state;
    f->cfg.ram_bytes = 16 * BS;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    read_all_check(c, f);
    char old[BACKEND_ETAG_MAX];
    memcpy(old, f->etag, sizeof(old));
    tu_fill_random(f->data, SIZE, 8);
    assert_int_equal(backend_put(f->be, NULL, "d/obj.bin", f->data, SIZE, f->etag), 0);
    assert_string_not_equal(old, f->etag);
    /* a reader still holding the old version tag gets -ESTALE for uncached blocks... */
    struct cache_obj o;
    fx_obj(f, &o);
    o.etag = old;
    assert_int_equal(cache_evict(c, "warm", "d/"), 5);
    char buf[16];
    assert_int_equal(cache_read(c, NULL, &o, 0, buf, sizeof(buf)), -ESTALE);
    /* ...and the new version reads the new bytes */
    read_all_check(c, f);
    cache_close(c);
}

struct hookcount {
    int before, after;
    ssize_t last;
};

static void hb(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj, uint64_t index,
               size_t bytes)
{
    (void)obj;
    (void)index;
    struct hookcount *h = ud;
    assert_int_equal(io->tenant, 7);
    assert_true(bytes <= BS);
    __atomic_fetch_add(&h->before, 1, __ATOMIC_SEQ_CST);
}

static void ha(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj, uint64_t index,
               ssize_t result, uint64_t latency_ns)
{
    (void)io;
    (void)obj;
    (void)index;
    (void)latency_ns;
    struct hookcount *h = ud;
    __atomic_store_n(&h->last, result, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&h->after, 1, __ATOMIC_SEQ_CST);
}

static void test_hook_prefetch_evict_pin(void **state)
{
    struct fx *f = *state;
    f->cfg.ram_bytes = 16 * BS;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    struct hookcount h = {0};
    struct cache_fetch_hook hook = {.before = hb, .after = ha, .ud = &h};
    cache_set_fetch_hook(c, &hook);
    struct cache_obj o;
    fx_obj(f, &o);
    struct tier_ioctx io = {.tenant = 7, .cls = TIER_IO_BACKGROUND};
    cache_prefetch(c, &io, &o, 0, 100);
    uint64_t deadline = tier_now_mono_ns() + 10 * TIER_NS_PER_SEC;
    while (cache_cached_bytes(c, &o) < SIZE && tier_now_mono_ns() < deadline)
        tier_sleep_ms(1); /* polling a condition with a deadline */
    assert_int_equal(cache_cached_bytes(c, &o), SIZE);
    assert_int_equal(__atomic_load_n(&h.before, __ATOMIC_SEQ_CST), 5);
    assert_int_equal(__atomic_load_n(&h.after, __ATOMIC_SEQ_CST), 5);
    read_all_check(c, f);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.fetches, 5);

    /* Wait for the write-through of every block to the disk level: an evict does not stop a
     * block file being written (the block shows on disk after it, docs/CACHE.md), and the
     * counts below are of a settled cache (this raced in about 1 run in 15). */
    deadline = tier_now_mono_ns() + 10 * TIER_NS_PER_SEC;
    do {
        cache_stats_get(c, &st);
        if (st.disk.blocks == 5)
            break;
        tier_sleep_ms(1); /* polling a condition with a deadline */
    } while (tier_now_mono_ns() < deadline);
    assert_int_equal(st.disk.blocks, 5);

    /* pin budget is 2 blocks: pinning the 5-block object fails and changes nothing */
    assert_int_equal(cache_pin(c, "warm", "d/"), -ENOSPC);
    cache_stats_get(c, &st);
    assert_int_equal(st.pinned_bytes, 0);
    assert_int_equal(cache_fetch_block(c, &io, &o, 0, true), 0);
    assert_int_equal(cache_fetch_block(c, &io, &o, 1, true), 0);
    assert_int_equal(cache_fetch_block(c, &io, &o, 2, true), -ENOSPC);
    cache_stats_get(c, &st);
    assert_int_equal(st.pinned_bytes, 2 * BS);
    /* evict skips pinned blocks */
    assert_int_equal(cache_evict(c, "warm", "d/"), 3);
    assert_int_equal(cache_cached_bytes(c, &o), 2 * BS);
    assert_int_equal(cache_evict(c, "warm", "other/"), 0);
    assert_int_equal(cache_unpin(c, "warm", "d/obj.bin"), 0);
    assert_int_equal(cache_evict(c, "warm", ""), 2);
    assert_int_equal(cache_cached_bytes(c, &o), 0);
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_set_fetch_hook(c, NULL);
    cache_close(c);
}

/* RAM level off, 256 KiB blocks of four 64 KiB checksum chunks: unaligned range reads are served
 * straight from the block files, and a corrupt chunk is only noticed by reads that touch it. */
static void test_disk_range_reads(void **state)
{
    struct fx *f = *state;
    f->cfg.block_size = 4 * BS;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    read_all_check(c, f); /* blocks 0 (4 chunks) and 1 (1 chunk + 123 bytes) */
    struct cache_obj o;
    fx_obj(f, &o);
    char *buf = malloc(SIZE);
    uint64_t rng = 99;
    for (int i = 0; i < 300; i++) {
        uint64_t off = tu_rand_next(&rng) % SIZE;
        size_t len = 1 + (size_t)(tu_rand_next(&rng) % (SIZE - off));
        assert_int_equal(cache_read(c, NULL, &o, off, buf, len), (ssize_t)len);
        assert_memory_equal(buf, f->data + off, len);
    }
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.fetches, 2);
    char path[4096];
    cache_debug_block_path(c, "warm", "d/obj.bin", f->etag, 0, path, sizeof(path));
    flip_byte(path, 2 * BS + 5); /* inside chunk 1 of block 0 (chunk 3 ends the file) */
    assert_int_equal(cache_read(c, NULL, &o, 3 * BS + 7, buf, 1000), 1000); /* chunk 3: fine */
    assert_memory_equal(buf, f->data + 3 * BS + 7, 1000);
    cache_stats_get(c, &st);
    assert_int_equal(st.checksum_failures, 0);
    assert_int_equal(cache_read(c, NULL, &o, BS + 17, buf, 3000), 3000); /* chunk 1: refetch */
    assert_memory_equal(buf, f->data + BS + 17, 3000);
    cache_stats_get(c, &st);
    assert_int_equal(st.checksum_failures, 1);
    assert_int_equal(st.fetches, 3);
    read_all_check(c, f);
    free(buf);
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);
}

/* Regression: the block size was not part of a block's identity, so a restart with another
 * block_size adopted the old files as if they were the new blocks: wrong bytes (bigger blocks)
 * or a heap over-read (smaller ones). Old-size blocks must be ignored and refetched. */
static void test_block_size_change(void **state)
{
    struct fx *f = *state;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    read_all_check(c, f); /* 5 blocks of 64 KiB on disk */
    cache_close(c);

    struct cache_config big = f->cfg;
    big.block_size = 2 * BS;
    assert_int_equal(cache_open(&big, &c), 0);
    read_all_check(c, f);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.fetches, 3); /* 3 blocks of 128 KiB, none taken from the old files */
    cache_close(c);

    assert_int_equal(cache_open(&f->cfg, &c), 0); /* and back to 64 KiB */
    read_all_check(c, f);
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);
}

/* Regression: a read spanning a cached block and a failing one returned the cached part as a
 * short count, which the kernel takes for end of file (a silent truncation). It must fail. */
static void test_partial_failure_is_an_error(void **state)
{
    (void)state;
    struct backend *be = fakebe_mem_new("mem");
    fakebe_add(be, "o", 2 * BS, "\"v1\"");
    struct cache_config cfg = {.block_size = BS, .ram_bytes = 8 * BS};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    struct cache_obj o = {.be = be, .key = "o", .etag = "\"v1\"", .size_bytes = 2 * BS};
    char *buf = malloc(2 * BS), *want = malloc(2 * BS);
    assert_int_equal(cache_read(c, NULL, &o, 0, buf, BS), BS); /* block 0 cached */
    fakebe_fail_next(be, FAKEBE_READ, -EIO, 1);
    assert_int_equal(cache_read(c, NULL, &o, BS / 2, buf, BS), -EIO);
    assert_int_equal(cache_read(c, NULL, &o, 0, buf, 2 * BS), 2 * BS); /* recovers */
    fakebe_expected("o", "\"v1\"", 0, want, 2 * BS);
    assert_memory_equal(buf, want, 2 * BS);
    free(buf);
    free(want);
    cache_close(c);
    backend_free(be);
}

/* Regression: pin and evict of one file took its key as a prefix, so "d/a.bin" also hit
 * "d/a.bin.bak". A key without a trailing '/' names one object; "d/" names the directory. */
static void test_exact_key_vs_directory(void **state)
{
    (void)state;
    struct backend *be = fakebe_mem_new("mem");
    fakebe_add(be, "d/a.bin", BS, "\"1\"");
    fakebe_add(be, "d/a.bin.bak", BS, "\"1\"");
    struct cache_config cfg = {.block_size = BS, .ram_bytes = 8 * BS, .pin_bytes = BS};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    struct cache_obj a = {.be = be, .key = "d/a.bin", .etag = "\"1\"", .size_bytes = BS};
    struct cache_obj b = {.be = be, .key = "d/a.bin.bak", .etag = "\"1\"", .size_bytes = BS};
    assert_int_equal(cache_fetch_block(c, NULL, &a, 0, false), 0);
    assert_int_equal(cache_fetch_block(c, NULL, &b, 0, false), 0);
    assert_int_equal(cache_pin(c, "mem", "d/a.bin"), 0); /* one block fits the budget */
    assert_int_equal(cache_unpin(c, "mem", "d/a.bin"), 0);
    assert_int_equal(cache_evict(c, "mem", "d/a.bin"), 1);
    assert_int_equal(cache_cached_bytes(c, &a), 0);
    assert_int_equal(cache_cached_bytes(c, &b), BS);
    assert_int_equal(cache_evict(c, "mem", "d/"), 1);
    assert_int_equal(cache_cached_bytes(c, &b), 0);
    cache_close(c);
    backend_free(be);
}

/* cache_demote: out of the disk level (RAM copies stay), then out of RAM (each block written to
 * the disk level first, since it has no disk copy left): the data is then read from disk with no
 * fetch; pinned blocks stay where they are; without a disk level a RAM demotion moves nothing. */
static void test_demote_levels(void **state)
{
    struct fx *f = *state;
    struct cache_config cfg = f->cfg;
    cfg.ram_bytes = 16 * BS;
    cfg.pin_bytes = 8 * BS;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    struct cache_obj o;
    fx_obj(f, &o);
    char *buf = malloc(SIZE);
    assert_int_equal(cache_read(c, NULL, &o, 0, buf, SIZE), SIZE);
    struct cache_stats st;
    assert_int_equal(cache_level_bytes(c, &o, CACHE_LEVEL_RAM), SIZE);
    assert_int_equal(cache_demote(c, "warm", "d/", CACHE_LEVEL_DISK), 5);
    cache_stats_get(c, &st);
    assert_int_equal(st.ram.blocks, 5);
    assert_int_equal(st.disk.blocks, 0);
    assert_int_equal(cache_level_bytes(c, &o, CACHE_LEVEL_DISK), 0);
    assert_int_equal(cache_cached_bytes(c, &o), SIZE);
    assert_int_equal(cache_demote(c, "warm", "d/", CACHE_LEVEL_DISK), 0); /* nothing left */
    assert_int_equal(cache_demote(c, "warm", "other/", CACHE_LEVEL_RAM), 0);
    assert_int_equal(cache_demote(c, "warm", "d/", CACHE_LEVEL_RAM), 5);
    cache_stats_get(c, &st);
    assert_int_equal(st.ram.blocks, 0);
    assert_int_equal(st.disk.blocks, 5);
    assert_int_equal(cache_level_bytes(c, &o, CACHE_LEVEL_RAM), 0);
    assert_int_equal(cache_level_bytes(c, &o, CACHE_LEVEL_DISK), SIZE);
    uint64_t fetches = st.fetches, disk_hits = st.disk.hits;
    memset(buf, 0, SIZE);
    assert_int_equal(cache_read(c, NULL, &o, 0, buf, SIZE), SIZE);
    assert_memory_equal(buf, f->data, SIZE);
    cache_stats_get(c, &st);
    assert_int_equal(st.fetches, fetches);
    assert_int_equal(st.disk.hits, disk_hits + 5);
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);

    /* a pinned key keeps both copies (the re-read above brought its blocks back to RAM) */
    assert_int_equal(cache_pin(c, "warm", "d/obj.bin"), 0);
    assert_int_equal(cache_level_bytes(c, &o, CACHE_LEVEL_RAM), SIZE);
    assert_int_equal(cache_demote(c, "warm", "d/", CACHE_LEVEL_RAM), 0);
    assert_int_equal(cache_demote(c, "warm", "d/", CACHE_LEVEL_DISK), 0);
    assert_int_equal(cache_level_bytes(c, &o, CACHE_LEVEL_RAM), SIZE);
    assert_int_equal(cache_level_bytes(c, &o, CACHE_LEVEL_DISK), SIZE);
    assert_int_equal(cache_unpin(c, "warm", "d/obj.bin"), 0);
    assert_int_equal(cache_demote(c, "warm", "d/obj.bin", 7), -EINVAL);
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);

    /* RAM only: nowhere to move to, nothing moves */
    cfg.disk_dir = NULL;
    cfg.disk_bytes = 0;
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cache_read(c, NULL, &o, 0, buf, SIZE), SIZE);
    assert_int_equal(cache_demote(c, "warm", "d/", CACHE_LEVEL_RAM), 0);
    cache_stats_get(c, &st);
    assert_int_equal(st.ram.blocks, 5);
    cache_close(c);
    free(buf);
}

#define POLL_DEADLINE_NS (180ull * 1000000000ull)

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Read [off, off+len) of the object until a read is served without hashing (its block file's
 * ctime settled, its chunks verified less than 1 s before): polls, minutes at most. */
static void poll_unhashed(struct cache *c, struct fx *f, uint64_t off, size_t len)
{
    struct cache_obj o;
    fx_obj(f, &o);
    char *buf = malloc(len);
    struct cache_stats st0, st;
    cache_stats_get(c, &st0);
    uint64_t end = tier_now_mono_ns() + POLL_DEADLINE_NS;
    for (;;) {
        assert_int_equal(cache_read(c, NULL, &o, off, buf, len), (ssize_t)len);
        assert_memory_equal(buf, f->data + off, len);
        cache_stats_get(c, &st);
        if (st.disk_reads_unhashed > st0.disk_reads_unhashed)
            break;
        assert_true(tier_now_mono_ns() < end);
        nap_ms(50);
    }
    free(buf);
}

/* A byte flipped with pwrite in a block whose reads are served without hashing: the write's
 * ctime change sends the next read to the checksums; the flipped byte is never served. */
static void test_flip_by_write_never_served(void **state)
{
    struct fx *f = *state;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    read_all_check(c, f); /* 5 blocks fetched and written through */
    poll_unhashed(c, f, 2 * BS, BS);
    char path[4096];
    assert_int_equal(cache_debug_block_path(c, "warm", "d/obj.bin", f->etag, 2, path, sizeof(path)),
                     0);
    flip_byte(path, 1000);
    read_all_check(c, f);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.checksum_failures, 1);
    assert_int_equal(st.fetches, 6); /* 5 + the refetch of block 2 */
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);
}

/* A byte changed through a shared mapping whose page is already dirty and writable: no ctime
 * change, nothing for the fstat to see (the case the 1 s bound is for). Reads may serve it only
 * while they start less than CACHE_DISK_VERIFY_TTL_NS after the flip; a later read hashes the
 * chunk and drops the block. With disk_verify_every_read the first read after the flip catches
 * it. */
static void flip_in_mapping(struct fx *f, bool every_read)
{
    f->cfg.disk_verify_every_read = every_read;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    read_all_check(c, f); /* fetched and written through; no block file opened for reading yet */
    char path[4096];
    assert_int_equal(cache_debug_block_path(c, "warm", "d/obj.bin", f->etag, 2, path, sizeof(path)),
                     0);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat fst;
    assert_int_equal(fstat(fd, &fst), 0);
    void *mapped = mmap(NULL, (size_t)fst.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(mapped != MAP_FAILED);
    volatile unsigned char *map = mapped;
    size_t at = (size_t)fst.st_size - 1000; /* block 2's data byte BS - 1000 */
    map[at] = map[at]; /* the write fault (and its ctime change) happens now, before the reads */
    if (!every_read)
        poll_unhashed(c, f, 2 * BS, BS);
    else
        read_all_check(c, f);
    map[at] ^= 0x40;
    uint64_t t_flip = tier_now_mono_ns(); /* after the store: later than the flip */
    struct cache_obj o;
    fx_obj(f, &o);
    char *buf = malloc(BS);
    uint64_t end = t_flip + POLL_DEADLINE_NS;
    int served_bad = 0;
    struct cache_stats st;
    for (;;) {
        uint64_t t0 = tier_now_mono_ns();
        assert_int_equal(cache_read(c, NULL, &o, 2 * BS, buf, BS), (ssize_t)BS);
        if (memcmp(buf, f->data + 2 * BS, BS) != 0) {
            served_bad++;
            /* only inside the bound: the chunk's last verification read it before the flip */
            assert_true(t0 < t_flip + CACHE_DISK_VERIFY_TTL_NS);
            assert_false(every_read);
        } else {
            cache_stats_get(c, &st);
            if (st.checksum_failures == 1)
                break; /* detected, dropped, refetched */
        }
        assert_true(tier_now_mono_ns() < end);
        nap_ms(20);
    }
    assert_memory_equal(buf, f->data + 2 * BS, BS);
    assert_int_equal(st.fetches, 6);
    if (every_read)
        assert_int_equal(st.disk_reads_unhashed, 0);
    print_message(
        "flip through a mapping (every_read %d): %d reads served it, all within %llu ms\n",
        every_read, served_bad, (unsigned long long)(CACHE_DISK_VERIFY_TTL_NS / 1000000));
    free(buf);
    munmap(mapped, (size_t)fst.st_size);
    close(fd);
    read_all_check(c, f);
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);
}

static void test_flip_in_mapping_bounded(void **state)
{
    flip_in_mapping(*state, false);
}

static void test_flip_in_mapping_every_read(void **state)
{
    flip_in_mapping(*state, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_corrupt_block_refetched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_reuses_and_discards_torn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_version_not_served_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hook_prefetch_evict_pin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_range_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_size_change, setup, teardown),
        cmocka_unit_test(test_partial_failure_is_an_error),
        cmocka_unit_test(test_exact_key_vs_directory),
        cmocka_unit_test_setup_teardown(test_demote_levels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flip_by_write_never_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flip_in_mapping_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flip_in_mapping_every_read, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
