/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_diskadm.c - the local disk's admission hook (common/diskadm.h) as the cache and the burst
 * buffer call it, through a fake hook that counts admissions by (tenant, class), blocking or
 * try, and their bytes, and checks that every enter is followed by one leave on its thread:
 *
 *   - a RAM-less cache: the fetch's write-through is one try admission, background class of the
 *     reader's tenant, of the block's bytes; a disk hit is one blocking admission with the
 *     reader's ioctx and the bytes read;
 *   - a cache with RAM: a RAM hit is never admitted; a block read back from disk after its RAM
 *     copy was evicted is one blocking admission of the whole block;
 *   - a hook refusing every try: write-throughs are skipped (disk_store_skipped), the blocks are
 *     not on disk, the next read fetches them again;
 *   - the burst buffer: every wb_write is one blocking admission, class checkpoint of the file's
 *     tenant (wb_file_set_tenant), with its length, and its leave carries the write's result.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cache/cache.h"
#include "common/diskadm.h"
#include "fakebe.h"
#include "testutil.h"
#include "tiers/backend.h"
#include "writeback/wb.h"

#define BS (64u << 10)
#define NBLK 4
#define SIZE (NBLK * BS)
#define NTEN 16

struct fake_adm {
    pthread_mutex_t mu;
    bool refuse_try;
    /* by tenant, class, [0] blocking / [1] try */
    uint64_t enters[NTEN][TIER_IO_NCLASSES][2], bytes[NTEN][TIER_IO_NCLASSES][2];
    uint64_t refused, leaves, leave_bytes;
    long last_result;
    int inflight; /* enters not yet left */
};

static _Thread_local int t_open; /* this thread's enters not yet left */

static int fake_enter(void *ud, const struct tier_ioctx *io, size_t bytes, bool try)
{
    struct fake_adm *a = ud;
    assert_non_null(io);
    assert_true(io->tenant < NTEN && (unsigned)io->cls < TIER_IO_NCLASSES);
    pthread_mutex_lock(&a->mu);
    if (try && a->refuse_try) {
        a->refused++;
        pthread_mutex_unlock(&a->mu);
        return -EAGAIN;
    }
    a->enters[io->tenant][io->cls][try]++;
    a->bytes[io->tenant][io->cls][try] += bytes;
    a->inflight++;
    pthread_mutex_unlock(&a->mu);
    assert_int_equal(t_open, 0); /* one disk I/O at a time per thread: no nesting */
    t_open++;
    return 0;
}

static void fake_leave(void *ud, const struct tier_ioctx *io, size_t bytes, long result)
{
    struct fake_adm *a = ud;
    assert_non_null(io);
    assert_int_equal(t_open, 1);
    t_open--;
    pthread_mutex_lock(&a->mu);
    a->leaves++;
    a->leave_bytes += bytes;
    a->last_result = result;
    a->inflight--;
    pthread_mutex_unlock(&a->mu);
}

static uint64_t total_enters(struct fake_adm *a)
{
    uint64_t n = 0;
    for (int t = 0; t < NTEN; t++)
        for (int c = 0; c < TIER_IO_NCLASSES; c++)
            n += a->enters[t][c][0] + a->enters[t][c][1];
    return n;
}

struct fx {
    char *dir;
    struct backend *be;
    struct fake_adm adm;
    struct tier_disk_adm hook;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp("diskadm");
    f->be = fakebe_mem_new("mem");
    fakebe_add(f->be, "a", SIZE, "\"1\"");
    pthread_mutex_init(&f->adm.mu, NULL);
    f->hook = (struct tier_disk_adm){.enter = fake_enter, .leave = fake_leave, .ud = &f->adm};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    backend_free(f->be);
    pthread_mutex_destroy(&f->adm.mu);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static struct cache_obj obj_a(struct fx *f)
{
    return (struct cache_obj){.be = f->be, .key = "a", .etag = "\"1\"", .size_bytes = SIZE};
}

/* Read [off, off+len) of "a" as io; assert the bytes and the tier that served them. */
static void read_as(struct cache *c, struct fx *f, const struct tier_ioctx *io, uint64_t off,
                    size_t len, enum cache_served want)
{
    struct cache_obj o = obj_a(f);
    char *buf = malloc(len), *exp = malloc(len);
    enum cache_served got;
    assert_int_equal(cache_read_served(c, io, &o, off, buf, len, &got), (ssize_t)len);
    fakebe_expected("a", "\"1\"", off, exp, len);
    assert_memory_equal(buf, exp, len);
    assert_int_equal(got, want);
    free(buf);
    free(exp);
}

static struct cache *open_cache(struct fx *f, uint64_t ram_bytes)
{
    struct cache_config cfg = {.block_size = BS,
                               .ram_bytes = ram_bytes,
                               .policy = CACHE_POLICY_LRU, /* evictions the tests can predict */
                               .disk_dir = f->dir,
                               .disk_bytes = 64 * BS,
                               .disk_adm = &f->hook};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    return c;
}

static void test_ramless_hits_and_write_through(void **state)
{
    struct fx *f = *state;
    struct cache *c = open_cache(f, 0);
    const struct tier_ioctx io = {.tenant = 7, .cls = TIER_IO_INFERENCE};
    read_as(c, f, &io, 0, SIZE, CACHE_SERVED_BACKEND);
    /* a write-through per block, as background of tenant 7, without waiting */
    assert_int_equal(f->adm.enters[7][TIER_IO_BACKGROUND][1], NBLK);
    assert_int_equal(f->adm.bytes[7][TIER_IO_BACKGROUND][1], SIZE);
    assert_int_equal(total_enters(&f->adm), NBLK);

    /* disk hits: blocking, the reader's own ioctx, the bytes read */
    read_as(c, f, &io, 100, 3000, CACHE_SERVED_DISK);
    read_as(c, f, &io, BS - 10, 20, CACHE_SERVED_DISK); /* two blocks: two admissions */
    assert_int_equal(f->adm.enters[7][TIER_IO_INFERENCE][0], 3);
    assert_int_equal(f->adm.bytes[7][TIER_IO_INFERENCE][0], 3020);
    assert_int_equal(total_enters(&f->adm), NBLK + 3);
    assert_int_equal(f->adm.leaves, NBLK + 3);
    assert_int_equal(f->adm.inflight, 0);
    assert_int_equal(f->adm.last_result, 0);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.disk_store_skipped, 0);
    assert_int_equal(st.fetches, NBLK);
    cache_close(c);
}

static void test_ram_hits_not_admitted(void **state)
{
    struct fx *f = *state;
    struct cache *c = open_cache(f, 2 * BS); /* RAM holds two of the four blocks */
    const struct tier_ioctx io = {.tenant = 3, .cls = TIER_IO_TRAINING};
    read_as(c, f, &io, 3 * BS, BS, CACHE_SERVED_BACKEND);
    uint64_t n = total_enters(&f->adm);
    assert_int_equal(n, 1); /* its write-through */
    for (int i = 0; i < 5; i++)
        read_as(c, f, &io, 3 * BS + 1000, 5000, CACHE_SERVED_RAM);
    assert_int_equal(total_enters(&f->adm), n); /* RAM hits never pass the disk */

    /* push block 3 out of RAM, then read it back from disk: one blocking admission of the
     * whole block (the load into RAM), with the reader's ioctx */
    read_as(c, f, &io, 0, 3 * BS, CACHE_SERVED_BACKEND);
    n = total_enters(&f->adm);
    struct cache_stats st;
    cache_stats_get(c, &st);
    uint64_t disk_hits = st.disk.hits;
    const struct tier_ioctx io2 = {.tenant = 4, .cls = TIER_IO_INFERENCE};
    read_as(c, f, &io2, 3 * BS + 7, 100, CACHE_SERVED_DISK);
    cache_stats_get(c, &st);
    assert_int_equal(st.disk.hits, disk_hits + 1);
    assert_int_equal(f->adm.enters[4][TIER_IO_INFERENCE][0], 1);
    assert_int_equal(f->adm.bytes[4][TIER_IO_INFERENCE][0], BS);
    assert_int_equal(total_enters(&f->adm), n + 1);
    read_as(c, f, &io2, 3 * BS + 7, 100, CACHE_SERVED_RAM); /* promoted: RAM again */
    assert_int_equal(total_enters(&f->adm), n + 1);
    assert_int_equal(f->adm.inflight, 0);
    cache_close(c);
}

static void test_refused_write_through_skipped(void **state)
{
    struct fx *f = *state;
    f->adm.refuse_try = true;
    struct cache *c = open_cache(f, 0);
    const struct tier_ioctx io = {.tenant = 5, .cls = TIER_IO_TRAINING};
    read_as(c, f, &io, 0, SIZE, CACHE_SERVED_BACKEND);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.disk_store_skipped, NBLK);
    assert_int_equal(f->adm.refused, NBLK);
    assert_int_equal(st.disk.blocks, 0);
    assert_int_equal(total_enters(&f->adm), 0);
    /* not on disk: read again, fetched again */
    read_as(c, f, &io, 0, SIZE, CACHE_SERVED_BACKEND);
    cache_stats_get(c, &st);
    assert_int_equal(st.fetches, 2 * NBLK);
    /* the disk frees up: stored again */
    f->adm.refuse_try = false;
    read_as(c, f, &io, 0, SIZE, CACHE_SERVED_BACKEND);
    read_as(c, f, &io, 0, SIZE, CACHE_SERVED_DISK);
    cache_stats_get(c, &st);
    assert_int_equal(st.disk.blocks, NBLK);
    assert_int_equal(st.disk_store_skipped, 2 * NBLK);
    assert_int_equal(f->adm.enters[5][TIER_IO_BACKGROUND][1], NBLK);
    assert_int_equal(f->adm.enters[5][TIER_IO_TRAINING][0], NBLK);
    cache_close(c);
}

static struct backend *resolve_posix(void *ctx, const char *name)
{
    (void)name;
    return ctx;
}

static void test_spool_writes_admitted(void **state)
{
    struct fx *f = *state;
    char spool[512], root[512];
    snprintf(spool, sizeof(spool), "%s/spool", f->dir);
    snprintf(root, sizeof(root), "%s/root", f->dir);
    assert_int_equal(mkdir(root, 0700), 0);
    struct posix_backend_config pc = {.name = "warm", .root = root};
    struct backend *posix = NULL;
    assert_int_equal(backend_posix_open(&pc, &posix), 0);
    struct wb_config wc = {.spool_dir = spool,
                           .resolve = resolve_posix,
                           .resolve_ctx = posix,
                           .retention_keep = -1,
                           .tenant = 2,
                           .disk_adm = &f->hook};
    struct wb *wb = NULL;
    assert_int_equal(wb_open(&wc, &wb), 0);
    struct wb_file *fh = NULL;
    assert_int_equal(wb_file_create(wb, "warm", "ckpt/a.bin", &fh), 0);
    char buf[10000];
    memset(buf, 'x', sizeof(buf));
    assert_int_equal(wb_write(fh, buf, 4096, 0), 4096); /* the config's tenant */
    assert_int_equal(f->adm.enters[2][TIER_IO_CHECKPOINT][0], 1);
    assert_int_equal(f->adm.last_result, 4096);
    wb_file_set_tenant(fh, 9);
    assert_int_equal(wb_write(fh, buf, sizeof(buf), 4096), (ssize_t)sizeof(buf));
    assert_int_equal(wb_write(fh, buf, 100, 4096 + sizeof(buf)), 100);
    assert_int_equal(f->adm.enters[9][TIER_IO_CHECKPOINT][0], 2);
    assert_int_equal(f->adm.bytes[9][TIER_IO_CHECKPOINT][0], sizeof(buf) + 100);
    assert_int_equal(total_enters(&f->adm), 3);
    assert_int_equal(f->adm.leaves, 3);
    assert_int_equal(f->adm.leave_bytes, 4096 + sizeof(buf) + 100);
    assert_int_equal(f->adm.inflight, 0);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(total_enters(&f->adm), 3); /* the seal writes no spool data */
    wb_close(wb);
    backend_free(posix);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ramless_hits_and_write_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ram_hits_not_admitted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_write_through_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spool_writes_admitted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
