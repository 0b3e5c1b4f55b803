/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_concurrency.c - 16 threads hammering overlapping blocks: exactly one backend fetch
 * per missing block (counted by the test backend), correct data, waiters of a failed fetch get
 * its error; the miss-ratio curves' queue under 16 readers of 4 tenants: every access is in
 * the curves or counted as dropped, never both, never lost. Also built as the ThreadSanitizer
 * check (CTest label tsan).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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
#include "cache/mrc.h"
#include "fakebe.h"
#include "testutil.h"

#define NTHREADS 16
#define NOBJS 8
#define BS (64u << 10)
#define OBJ_BLOCKS 8
#define OBJ_SIZE (OBJ_BLOCKS * BS - 1000) /* short last block */

struct hammer {
    struct cache *c;
    struct backend *be;
    pthread_barrier_t *bar;
    int tid;
    int passes;
    int bad; /* data mismatches or errors seen */
};

static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    uint64_t rng = 1000 + (uint64_t)h->tid;
    char *buf = malloc(3 * BS), *want = malloc(3 * BS);
    char key[32];
    pthread_barrier_wait(h->bar);
    for (int pass = 0; pass < h->passes; pass++) {
        for (int k = 0; k < NOBJS * OBJ_BLOCKS; k++) {
            int obj = (int)(tu_rand_next(&rng) % NOBJS);
            snprintf(key, sizeof(key), "obj/%d", obj);
            struct cache_obj o = {.be = h->be, .key = key, .etag = "e1", .size_bytes = OBJ_SIZE};
            uint64_t off = tu_rand_next(&rng) % OBJ_SIZE;
            size_t len = 1 + (size_t)(tu_rand_next(&rng) % (2 * BS)); /* spans blocks */
            ssize_t n = cache_read(h->c, NULL, &o, off, buf, len);
            size_t expect = len < OBJ_SIZE - off ? len : (size_t)(OBJ_SIZE - off);
            if (n != (ssize_t)expect) {
                h->bad++;
                continue;
            }
            fakebe_expected(key, "e1", off, want, expect);
            if (memcmp(buf, want, expect))
                h->bad++;
        }
    }
    free(buf);
    free(want);
    return NULL;
}

static void run_hammer(struct cache *c, struct backend *be, int passes)
{
    pthread_t th[NTHREADS];
    struct hammer h[NTHREADS];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        h[i] = (struct hammer){.c = c, .be = be, .bar = &bar, .tid = i, .passes = passes};
        assert_int_equal(pthread_create(&th[i], NULL, hammer_main, &h[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(h[i].bad, 0);
    }
    pthread_barrier_destroy(&bar);
}

static struct backend *make_be(void)
{
    struct backend *be = fakebe_mem_new("mem");
    char key[32];
    for (int i = 0; i < NOBJS; i++) {
        snprintf(key, sizeof(key), "obj/%d", i);
        fakebe_add(be, key, OBJ_SIZE, "e1");
    }
    fakebe_set_latency_us(be, FAKEBE_READ, 500);
    return be;
}

/* Everything fits in RAM: one fetch per block, ever. */
static void test_one_fetch_per_block_ram(void **state)
{
    (void)state;
    struct backend *be = make_be();
    struct cache_config cfg = {.block_size = BS, .ram_bytes = 2 * NOBJS * OBJ_BLOCKS * BS};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    run_hammer(c, be, 3);
    struct cache_stats st;
    cache_stats_get(c, &st);
    print_message("ram: backend reads %llu for %d blocks, single-flight waits %llu\n",
                  (unsigned long long)fakebe_calls(be, FAKEBE_READ), NOBJS * OBJ_BLOCKS,
                  (unsigned long long)st.singleflight_waits);
    assert_int_equal(fakebe_calls(be, FAKEBE_READ), NOBJS * OBJ_BLOCKS);
    assert_int_equal(st.fetches, NOBJS * OBJ_BLOCKS);
    char msg[256] = "";
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);
    backend_free(be);
}

/* RAM holds 1/8 of the blocks, the disk all: RAM evictions and disk loads race with reads, and
 * still every block is fetched from the backend exactly once. */
static void ram_pressure(bool async)
{
    struct backend *be = make_be();
    char *dir = tu_mkdtemp("cache_conc");
    struct cache_config cfg = {.block_size = BS,
                               .ram_bytes = NOBJS * BS,
                               .disk_dir = dir,
                               .disk_bytes = 4 * NOBJS * OBJ_BLOCKS * BS,
                               .store_async = async};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    run_hammer(c, be, 2);
    struct cache_stats st;
    cache_stats_get(c, &st);
    print_message("ram+disk: backend reads %llu, ram evictions %llu, disk hits %llu\n",
                  (unsigned long long)fakebe_calls(be, FAKEBE_READ),
                  (unsigned long long)st.ram.evictions, (unsigned long long)st.disk.hits);
    assert_int_equal(fakebe_calls(be, FAKEBE_READ), NOBJS * OBJ_BLOCKS);
    assert_true(st.ram.evictions > 0);
    assert_true(st.disk.hits > 0);
    assert_true(st.ram.bytes_used <= st.ram.bytes_budget);
    char msg[256] = "";
    int r = cache_debug_check(c, msg, sizeof(msg));
    if (r)
        print_message("check: %s\n", msg);
    assert_int_equal(r, 0);
    cache_close(c);
    tu_rmtree(dir);
    free(dir);
    backend_free(be);
}

static void test_one_fetch_per_block_ram_pressure(void **state)
{
    (void)state;
    ram_pressure(false);
}

/* The same with the write-through on the writer thread: a block evicted from RAM while its write
 * waits is served from its load's buffer, never fetched twice. */
static void test_one_fetch_per_block_ram_pressure_async(void **state)
{
    (void)state;
    ram_pressure(true);
}

struct errwaiter {
    struct cache *c;
    struct backend *be;
    pthread_barrier_t *bar;
    ssize_t result;
};

static void *err_main(void *arg)
{
    struct errwaiter *w = arg;
    char buf[100];
    struct cache_obj o = {.be = w->be, .key = "obj/0", .etag = "e1", .size_bytes = OBJ_SIZE};
    pthread_barrier_wait(w->bar);
    w->result = cache_read(w->c, NULL, &o, 0, buf, sizeof(buf));
    return NULL;
}

/* One fetch fails: the threads that waited on it get its error; a retry fetches again. */
static void test_waiters_share_error(void **state)
{
    (void)state;
    struct backend *be = make_be();
    fakebe_set_latency_us(be, FAKEBE_READ,
                          50000); /* the first fetch is slow, so the others queue up */
    fakebe_fail_next(be, FAKEBE_READ, -EIO, 1);
    struct cache_config cfg = {.block_size = BS, .ram_bytes = 64 * BS};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    pthread_t th[NTHREADS];
    struct errwaiter w[NTHREADS];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (struct errwaiter){.c = c, .be = be, .bar = &bar};
        assert_int_equal(pthread_create(&th[i], NULL, err_main, &w[i]), 0);
    }
    int eio = 0, ok = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        if (w[i].result == -EIO)
            eio++;
        else if (w[i].result == 100)
            ok++;
    }
    pthread_barrier_destroy(&bar);
    uint64_t reads = fakebe_calls(be, FAKEBE_READ);
    print_message("error fan-out: %d got -EIO, %d got data, %llu backend reads\n", eio, ok,
                  (unsigned long long)reads);
    assert_int_equal(eio + ok, NTHREADS);
    assert_true(eio >= 1);
    /* one failed fetch, plus at most one more if a late thread came after the error was gone */
    assert_int_equal(reads, 1 + (ok > 0));
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.fetch_errors, 1);
    char buf[100], want[100];
    struct cache_obj o = {.be = be, .key = "obj/0", .etag = "e1", .size_bytes = OBJ_SIZE};
    fakebe_set_latency_us(be, FAKEBE_READ, 0);
    assert_int_equal(cache_read(c, NULL, &o, 0, buf, sizeof(buf)), 100);
    fakebe_expected("obj/0", "e1", 0, want, sizeof(want));
    assert_memory_equal(buf, want, sizeof(want));
    cache_close(c);
    backend_free(be);
}

struct chaos {
    struct cache *c;
    struct backend *be;
    _Atomic int *stop;
    long evicted;
};

/* Control-plane operations racing the readers: pin / unpin / evict by prefix / demote out of a
 * level / prefetch / stats. */
static void *chaos_main(void *arg)
{
    struct chaos *x = arg;
    uint64_t rng = 4242;
    const char *prefixes[] = {"obj/1", "obj/", "obj/3", ""};
    char key[32];
    while (!atomic_load(x->stop)) {
        const char *p = prefixes[tu_rand_next(&rng) % 4];
        switch (tu_rand_next(&rng) % 7) {
        case 5: /* out of RAM into the disk level, or the disk copies dropped */
            (void)cache_demote(x->c, "mem", p,
                               tu_rand_next(&rng) % 2 ? CACHE_LEVEL_RAM : CACHE_LEVEL_DISK);
            break;
        case 4: /* the readers are tenant 0: squeeze and lift its space quota */
            cache_quota_set(x->c, 0, tu_rand_next(&rng) % 2 ? 3 * BS : CACHE_QUOTA_NONE);
            break;
        case 0:
            cache_pin(x->c, "mem", p);
            break;
        case 1:
            cache_unpin(x->c, "mem", p);
            break;
        case 2: {
            long n = cache_evict(x->c, "mem", p);
            if (n > 0)
                x->evicted += n;
            break;
        }
        case 3: {
            snprintf(key, sizeof(key), "obj/%d", (int)(tu_rand_next(&rng) % NOBJS));
            struct cache_obj o = {.be = x->be, .key = key, .etag = "e1", .size_bytes = OBJ_SIZE};
            cache_prefetch(x->c, NULL, &o, 0, OBJ_BLOCKS);
            break;
        }
        default: {
            struct cache_stats st;
            cache_stats_get(x->c, &st);
            break;
        }
        }
    }
    return NULL;
}

/* Readers race pins, unpins, evictions and prefetches on a small RAM + disk cache: data stays
 * correct, budgets hold, and the index matches the disk afterwards. */
static void control_plane(bool async)
{
    struct backend *be = make_be();
    fakebe_set_latency_us(be, FAKEBE_READ, 100);
    char *dir = tu_mkdtemp("cache_chaos");
    struct cache_config cfg = {.block_size = BS,
                               .ram_bytes = 6 * BS,
                               .disk_dir = dir,
                               .disk_bytes = 24 * BS,
                               .pin_bytes = 12 * BS,
                               .store_async = async};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    _Atomic int stop = 0;
    struct chaos x = {.c = c, .be = be, .stop = &stop};
    pthread_t ct;
    assert_int_equal(pthread_create(&ct, NULL, chaos_main, &x), 0);
    run_hammer(c, be, 2);
    atomic_store(&stop, 1);
    pthread_join(ct, NULL);
    struct cache_stats st;
    cache_stats_get(c, &st);
    print_message("chaos: backend reads %llu, evicted by prefix %ld, pinned %llu KiB\n",
                  (unsigned long long)fakebe_calls(be, FAKEBE_READ), x.evicted,
                  (unsigned long long)(st.pinned_bytes >> 10));
    assert_true(st.pinned_bytes <= st.pin_budget);
    /* live (prefetch workers may still be busy: the check allows for I/O in flight), then
     * again after a restart on the same directory */
    char msg[256] = "";
    int r = cache_debug_check(c, msg, sizeof(msg));
    if (r)
        print_message("check: %s\n", msg);
    assert_int_equal(r, 0);
    cache_close(c);
    assert_int_equal(cache_open(&cfg, &c), 0);
    r = cache_debug_check(c, msg, sizeof(msg));
    if (r)
        print_message("check: %s\n", msg);
    assert_int_equal(r, 0);
    cache_close(c);
    tu_rmtree(dir);
    free(dir);
    backend_free(be);
}

static void test_readers_vs_control_plane(void **state)
{
    (void)state;
    control_plane(false);
}

/* The same with the write-through on the writer thread (store_async): drops, pins and evictions
 * race writes still queued (B_STORE_CANCEL, wait_stored, store_held). */
static void test_readers_vs_control_plane_async(void **state)
{
    (void)state;
    control_plane(true);
}

/* Curves on, every access sampled (rate 1): 16 threads of 4 tenants make whole-block reads (each
 * a new access) while the curves' thread drains the queue. Afterwards (cache_mrc_curve drains
 * what is left) the node's curve holds every access not left out, the tenants' curves together
 * the same, and the demand counts every read (mrc.h: an access counted in a curve but not
 * simulated would read as a hit). */
#define CURVE_READS 2000
struct curve_reader {
    struct cache *c;
    struct backend *be;
    pthread_barrier_t *bar;
    int tid;
    int bad;
};

static void *curve_reader_main(void *arg)
{
    struct curve_reader *r = arg;
    uint64_t rng = 500 + (uint64_t)r->tid;
    char *buf = malloc(BS);
    char key[32];
    struct tier_ioctx io = {.tenant = 1 + (uint32_t)(r->tid % 4), .cls = TIER_IO_TRAINING};
    pthread_barrier_wait(r->bar);
    for (int i = 0; i < CURVE_READS; i++) {
        snprintf(key, sizeof(key), "obj/%d", (int)(tu_rand_next(&rng) % NOBJS));
        struct cache_obj o = {.be = r->be, .key = key, .etag = "e1", .size_bytes = OBJ_SIZE};
        uint64_t blk = tu_rand_next(&rng) % (OBJ_BLOCKS - 1); /* whole blocks, not the last */
        if (cache_read(r->c, &io, &o, blk * BS, buf, BS) != (ssize_t)BS)
            r->bad++;
    }
    free(buf);
    return NULL;
}

static void test_curves_under_readers(void **state)
{
    (void)state;
    struct backend *be = make_be();
    struct cache_config cfg = {.block_size = BS,
                               .ram_bytes = 2 * NOBJS * OBJ_BLOCKS * BS,
                               .mrc = true,
                               .mrc_rate = 1.0,
                               .max_tenants = 8};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    pthread_t th[NTHREADS];
    struct curve_reader r[NTHREADS];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        r[i] = (struct curve_reader){.c = c, .be = be, .bar = &bar, .tid = i};
        assert_int_equal(pthread_create(&th[i], NULL, curve_reader_main, &r[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(r[i].bad, 0);
    }
    pthread_barrier_destroy(&bar);
    uint64_t total = (uint64_t)NTHREADS * CURVE_READS, dropped = cache_mrc_dropped(c);
    struct mrc_point pt[CACHE_MRC_SIZES];
    size_t n = 0;
    assert_int_equal(cache_mrc_curve(c, -1, pt, CACHE_MRC_SIZES, &n), 0);
    print_message("curves: %llu accesses, %llu dropped\n", (unsigned long long)total,
                  (unsigned long long)dropped);
    assert_true(dropped < total);
    for (size_t k = 0; k < n; k++)
        assert_true(pt[k].accesses == (double)(total - dropped));
    uint64_t acc = 0, bytes = 0, sum = 0, sum_curves = 0;
    assert_int_equal(cache_mrc_demand(c, -1, &acc, &bytes), 0);
    assert_int_equal(acc, total); /* the demand: every read, left out of the curves or not */
    for (int t = 1; t <= 4; t++) {
        assert_int_equal(cache_mrc_demand(c, t, &acc, &bytes), 0);
        assert_int_equal(cache_mrc_curve(c, t, pt, CACHE_MRC_SIZES, &n), 0);
        assert_true(pt[0].accesses <= (double)acc);
        sum += acc;
        sum_curves += (uint64_t)pt[0].accesses;
    }
    assert_int_equal(sum, total);
    assert_int_equal(sum_curves, total - dropped);
    cache_close(c);
    backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_fetch_per_block_ram),
        cmocka_unit_test(test_one_fetch_per_block_ram_pressure),
        cmocka_unit_test(test_one_fetch_per_block_ram_pressure_async),
        cmocka_unit_test(test_waiters_share_error),
        cmocka_unit_test(test_readers_vs_control_plane),
        cmocka_unit_test(test_readers_vs_control_plane_async),
        cmocka_unit_test(test_curves_under_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
