/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_store.c - write-through off the reader's path (cache_config.store_async): the
 * cache's writer thread stores fetched blocks while the read that fetched them has returned.
 * A fake disk admission hook holds the first write-through (try admission) at a gate, so the
 * writer is provably busy, then:
 *
 *   - the read that fetched the block returns with its bytes while its disk write is held
 *     (with store_async off the same read would wait at the gate: the control case runs that
 *     read in a thread and sees it still blocked);
 *   - a block whose RAM copy is evicted while its write is pending is read again from the
 *     published buffer, not fetched a second time (one load per block, I6);
 *   - the queue is bounded: with the writer held, 16 more write-throughs queue, the next one is
 *     done by its fetching thread (disk_store_inline);
 *   - cache_close stores what is queued: a reopened cache serves every block from disk;
 *   - cache_evict waits for the queue, so an evicted block does not come back on disk;
 *   - space quotas hold with the writer: a tenant's blocks that reach the disk later are trimmed
 *     by the writer (I9), and a block its quota evicted while its write waited is not stored;
 *   - a pin of a block whose write is queued (another reader's load) waits for the write and
 *     succeeds, also with no RAM level (it found nothing cached before);
 *   - a block pinned after the busy disk lane refused its write-through is written then (a pinned
 *     block leaves RAM only from disk: else it would stay in RAM for good);
 *   - read-ahead a reader queued is taken back when it goes (cache_prefetch_cancel): with one
 *     prefetch worker held in its first fetch, the rest of that owner's blocks are never fetched,
 *     while another owner's block queued after them is;
 *   - the writer runs at cache_config.store_nice (its thread's nice value in /proc);
 *   - the read-ahead window from the bandwidth-delay product (cache_bdp_blocks): rate x fetch
 *     time x 2 in blocks, rounded up, within its bounds; cache_readahead_window has nothing to
 *     say before a full block of the backend was fetched, then sizes from the measured fetch
 *     time and shows it in cache_stats; prefetches in flight are counted (peak >= 2 with two
 *     workers held in their fetches).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>

#include <cmocka.h>

#include "cache/cache.h"
#include "common/diskadm.h"
#include "fakebe.h"
#include "testutil.h"
#include "tiers/backend.h"

#define BS (64u << 10)
#define NBLK 24
#define SIZE ((uint64_t)NBLK * BS)
#define DEADLINE_S 20

/* The first write-through waits at the gate until it opens; later ones pass (refuse: -EAGAIN). */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open, refuse_later;
    bool refuse_all; /* every try refused at once (a busy disk lane); blocking ones pass */
    int held, tries;
};

static int gate_enter(void *ud, const struct tier_ioctx *io, size_t bytes, bool try)
{
    (void)io;
    (void)bytes;
    struct gate *g = ud;
    if (!try)
        return 0; /* disk reads, and writes that must be made */
    if (g->refuse_all)
        return -EAGAIN;
    pthread_mutex_lock(&g->mu);
    int n = g->tries++;
    if (n == 0) {
        g->held = 1;
        pthread_cond_broadcast(&g->cv);
        while (!g->open)
            pthread_cond_wait(&g->cv, &g->mu);
        g->held = 0;
    } else if (g->refuse_later) {
        pthread_mutex_unlock(&g->mu);
        return -EAGAIN;
    }
    pthread_mutex_unlock(&g->mu);
    return 0;
}

static void gate_leave(void *ud, const struct tier_ioctx *io, size_t bytes, long result)
{
    (void)ud;
    (void)io;
    (void)bytes;
    (void)result;
}

static void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Wait (with a deadline) until the first write-through is held at the gate. */
static void gate_wait_held(struct gate *g)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += DEADLINE_S;
    pthread_mutex_lock(&g->mu);
    int r = 0;
    while (!g->held && r == 0)
        r = pthread_cond_timedwait(&g->cv, &g->mu, &dl);
    bool held = g->held;
    pthread_mutex_unlock(&g->mu);
    assert_true(held);
}

struct fx {
    char *dir;
    struct backend *be;
    struct gate g;
    struct tier_disk_adm hook;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp("cachestore");
    f->be = fakebe_mem_new("mem");
    fakebe_add(f->be, "a", SIZE, "\"1\"");
    pthread_mutex_init(&f->g.mu, NULL);
    pthread_cond_init(&f->g.cv, NULL);
    f->hook = (struct tier_disk_adm){.enter = gate_enter, .leave = gate_leave, .ud = &f->g};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    backend_free(f->be);
    pthread_mutex_destroy(&f->g.mu);
    pthread_cond_destroy(&f->g.cv);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static struct cache *open_cache_q(struct fx *f, uint64_t ram_bytes, bool async, uint64_t quota)
{
    struct cache_config cfg = {.block_size = BS,
                               .ram_bytes = ram_bytes,
                               .policy = CACHE_POLICY_LRU,
                               .disk_dir = f->dir,
                               .disk_bytes = 4 * SIZE,
                               .disk_adm = &f->hook,
                               .store_async = async,
                               .pin_bytes = SIZE,
                               .default_quota = quota,
                               .store_queue_bytes = 16 * (uint64_t)BS};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    return c;
}

static struct cache *open_cache(struct fx *f, uint64_t ram_bytes, bool async)
{
    return open_cache_q(f, ram_bytes, async, 0);
}

static struct cache_obj obj_a(struct fx *f)
{
    return (struct cache_obj){.be = f->be, .key = "a", .etag = "\"1\"", .size_bytes = SIZE};
}

static const struct tier_ioctx TEN3 = {.tenant = 3, .cls = TIER_IO_TRAINING};

/* Read block i whole as io (NULL: the default tenant); assert its bytes. */
static void read_block_as(struct cache *c, struct fx *f, const struct tier_ioctx *io, unsigned i)
{
    struct cache_obj o = obj_a(f);
    char *buf = malloc(BS), *exp = malloc(BS);
    assert_int_equal(cache_read(c, io, &o, (uint64_t)i * BS, buf, BS), (ssize_t)BS);
    fakebe_expected("a", "\"1\"", (uint64_t)i * BS, exp, BS);
    assert_memory_equal(buf, exp, BS);
    free(buf);
    free(exp);
}

static void read_block(struct cache *c, struct fx *f, unsigned i)
{
    read_block_as(c, f, NULL, i);
}

struct reader {
    struct cache *c;
    struct fx *f;
    unsigned block;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    read_block(r->c, r->f, r->block);
    pthread_mutex_lock(&r->mu);
    r->done = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Start a read of block i in a thread; true when it returned within wait_s seconds. */
static bool read_returns(struct reader *r, pthread_t *t, int wait_s)
{
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    assert_int_equal(pthread_create(t, NULL, reader_main, r), 0);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += wait_s;
    pthread_mutex_lock(&r->mu);
    int e = 0;
    while (!r->done && e == 0)
        e = pthread_cond_timedwait(&r->cv, &r->mu, &dl);
    bool done = r->done;
    pthread_mutex_unlock(&r->mu);
    return done;
}

static void reader_join(struct reader *r, pthread_t t)
{
    pthread_join(t, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static void test_read_does_not_wait_for_the_write(void **state)
{
    struct fx *f = *state;
    struct cache *c = open_cache(f, SIZE, true);
    struct reader r = {.c = c, .f = f, .block = 0};
    pthread_t t;
    assert_true(read_returns(&r, &t, DEADLINE_S)); /* while its write is held at the gate */
    gate_wait_held(&f->g);
    reader_join(&r, t);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.disk_store_async, 1);
    assert_int_equal(st.disk.bytes_used, 0); /* not on disk yet */
    gate_open(&f->g);
    cache_close(c); /* stores what is queued */
    c = open_cache(f, SIZE, true);
    cache_stats_get(c, &st);
    assert_true(st.disk.bytes_used >= BS); /* it reached the disk */
    read_block(c, f, 0);
    assert_int_equal(fakebe_calls(f->be, FAKEBE_READ), 1);
    cache_close(c);
}

static void test_control_sync_read_waits(void **state)
{
    struct fx *f = *state;
    struct cache *c = open_cache(f, SIZE, false);
    struct reader r = {.c = c, .f = f, .block = 0};
    pthread_t t;
    /* without store_async the read holds at the gate with its write: it cannot return */
    bool returned = read_returns(&r, &t, 1);
    gate_wait_held(&f->g);
    assert_false(returned);
    gate_open(&f->g);
    reader_join(&r, t);
    assert_true(r.done);
    cache_close(c);
}

static void test_pending_block_not_fetched_twice(void **state)
{
    struct fx *f = *state;
    struct cache *c = open_cache(f, 2 * BS, true); /* RAM holds two blocks */
    read_block(c, f, 0);
    gate_wait_held(&f->g); /* block 0's write is held */
    read_block(c, f, 1);
    read_block(c, f, 2); /* evicts block 0 from RAM: its only copy is the published buffer */
    struct cache_obj o = obj_a(f);
    char buf[100];
    enum cache_served got;
    assert_int_equal(cache_read_served(c, NULL, &o, 10, buf, sizeof(buf), &got), sizeof(buf));
    assert_int_equal(got, CACHE_SERVED_BACKEND); /* not a RAM hit: the load's buffer */
    assert_int_equal(fakebe_calls(f->be, FAKEBE_READ), 3);
    gate_open(&f->g);
    cache_close(c);
}

static void test_queue_bounded(void **state)
{
    struct fx *f = *state;
    f->g.refuse_later = true; /* writes after the held one are skipped: nothing else waits */
    struct cache *c = open_cache(f, SIZE, true);
    read_block(c, f, 0);
    gate_wait_held(&f->g); /* the writer holds block 0 */
    for (unsigned i = 1; i <= 17; i++)
        read_block(c, f, i);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.disk_store_async, 17); /* block 0 and 16 queued behind it */
    assert_int_equal(st.disk_store_inline, 1); /* block 17: the queue was full */
    gate_open(&f->g);
    cache_close(c);
}

static void test_evict_waits_for_the_queue(void **state)
{
    struct fx *f = *state;
    struct cache *c = open_cache(f, SIZE, true);
    read_block(c, f, 0);
    read_block(c, f, 1);
    gate_wait_held(&f->g);
    gate_open(&f->g);
    assert_true(cache_evict(c, "mem", "") >= 1);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.disk.bytes_used, 0); /* no write landed after the eviction */
    assert_int_equal(st.ram.bytes_used, 0);
    read_block(c, f, 0);
    assert_int_equal(fakebe_calls(f->be, FAKEBE_READ), 3);
    cache_close(c);
}

static uint64_t tenant_bytes(struct cache *c, uint32_t t)
{
    struct cache_tenant_stats ts;
    assert_int_equal(cache_tenant_stats_get(c, t, &ts), 0);
    return ts.bytes;
}

static void test_quota_holds_with_the_writer(void **state)
{
    struct fx *f = *state;
    f->g.open = true; /* no gate: the writer stores as fast as it can */
    struct cache *c = open_cache_q(f, 0, true, BS); /* disk only: blocks count once stored */
    for (unsigned i = 0; i < 4; i++)
        read_block_as(c, f, &TEN3, i);
    assert_true(cache_evict(c, "mem", "zzz") == 0); /* returns once the queue is stored */
    assert_true(tenant_bytes(c, 3) <= BS);
    cache_close(c);
}

static void test_quota_victim_not_stored(void **state)
{
    struct fx *f = *state;
    struct cache *c = open_cache_q(f, SIZE, true, BS); /* quota: one block */
    read_block_as(c, f, &TEN3, 0);
    gate_wait_held(&f->g);         /* block 0's write is held */
    read_block_as(c, f, &TEN3, 1); /* over quota: block 0 is trimmed while its write waits */
    assert_true(tenant_bytes(c, 3) <= BS);
    gate_open(&f->g);
    assert_true(cache_evict(c, "mem", "zzz") == 0); /* the queue is stored */
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.disk.blocks, 1); /* block 1 only: block 0 did not come back */
    assert_true(tenant_bytes(c, 3) <= BS);
    cache_close(c);
}

struct pinner {
    struct cache *c;
    struct fx *f;
    int r;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void *pinner_main(void *arg)
{
    struct pinner *p = arg;
    struct cache_obj o = obj_a(p->f);
    int r = cache_fetch_block(p->c, NULL, &o, 0, true);
    pthread_mutex_lock(&p->mu);
    p->r = r;
    p->done = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void test_pin_waits_for_a_queued_write(void **state)
{
    struct fx *f = *state;
    struct cache *c = open_cache(f, 0, true); /* no RAM level: the write is the only copy */
    read_block(c, f, 0);
    gate_wait_held(&f->g); /* its write is held */
    struct pinner p = {.c = c, .f = f};
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pinner_main, &p), 0);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 1;
    pthread_mutex_lock(&p.mu);
    int e = 0;
    while (!p.done && e == 0)
        e = pthread_cond_timedwait(&p.cv, &p.mu, &dl);
    bool early = p.done;
    pthread_mutex_unlock(&p.mu);
    assert_false(early); /* it waits for the write (before: -ENOSPC at once) */
    gate_open(&f->g);
    pthread_join(t, NULL);
    assert_int_equal(p.r, 0);
    assert_int_equal(fakebe_calls(f->be, FAKEBE_READ), 1);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.pinned_bytes, BS);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    cache_close(c);
}

static void test_pinned_after_a_skipped_write_is_stored(void **state)
{
    struct fx *f = *state;
    f->g.refuse_all = true; /* the lane refuses every write-through it may skip */
    struct cache *c = open_cache(f, SIZE, true);
    struct cache_obj o = obj_a(f);
    assert_int_equal(cache_fetch_block(c, NULL, &o, 0, true), 0);
    read_block(c, f, 1); /* not pinned: its write is skipped, it stays in RAM only */
    assert_true(cache_evict(c, "mem", "zzz") == 0); /* returns once block 1's write was tried */
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.disk.blocks, 1); /* the pinned block 0, written at its pin */
    assert_true(st.disk_store_skipped >= 2);
    cache_close(c);
}

/* A fetch hook that holds the first fetch until released. */
struct fgate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool held, open;
    int fetches;
};

static void fgate_before(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                         uint64_t index, size_t bytes)
{
    (void)io;
    (void)obj;
    (void)index;
    (void)bytes;
    struct fgate *g = ud;
    pthread_mutex_lock(&g->mu);
    if (g->fetches++ == 0) {
        g->held = true;
        pthread_cond_broadcast(&g->cv);
        while (!g->open)
            pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

static void test_prefetch_cancel(void **state)
{
    struct fx *f = *state;
    f->g.open = true;
    struct cache_config cfg = {.block_size = BS, .ram_bytes = SIZE, .prefetch_threads = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    struct fgate g = {.held = false};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    struct cache_fetch_hook hook = {.before = fgate_before, .ud = &g};
    cache_set_fetch_hook(c, &hook);
    struct cache_obj o = obj_a(f);
    int owner_x, owner_y;
    assert_int_equal(cache_prefetch_owned(c, NULL, &o, 0, 8, &owner_x), 8);
    pthread_mutex_lock(&g.mu);
    while (!g.held)
        pthread_cond_wait(&g.cv, &g.mu); /* the worker holds block 0; 1..7 are queued */
    pthread_mutex_unlock(&g.mu);
    cache_prefetch_cancel(c, &owner_x);
    assert_int_equal(cache_prefetch_owned(c, NULL, &o, 20, 1, &owner_y), 1);
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    /* one worker, first in first out: once y's block is cached, nothing of x is left queued */
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    for (;;) {
        if (cache_cached_bytes(c, &o) >= 2 * (uint64_t)BS)
            break;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        assert_true(now.tv_sec - dl.tv_sec < DEADLINE_S);
        sched_yield();
    }
    cache_close(c); /* joins the worker: every fetch it made is counted */
    assert_int_equal(fakebe_calls(f->be, FAKEBE_READ), 2); /* x's block 0 and y's block 20 */
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&g.cv);
}

/* The nice value of the process's threads: the largest one (the others run at 0). */
static int max_thread_nice(void)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int best = -100;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], line[1024];
        snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
        FILE *fp = fopen(path, "r");
        if (!fp)
            continue; /* the thread ended */
        size_t n = fread(line, 1, sizeof(line) - 1, fp);
        fclose(fp);
        line[n] = 0;
        char *p = strrchr(line, ')');
        /* after the command: state is field 3, nice field 19 */
        for (int field = 3; p && field <= 19; field++)
            p = strchr(p + 1, ' ');
        int nice = p ? atoi(p + 1) : -100;
        if (nice > best)
            best = nice;
    }
    closedir(d);
    return best;
}

static void test_writer_is_nice(void **state)
{
    struct fx *f = *state;
    f->g.open = true;
    struct cache_config cfg = {.block_size = BS,
                               .ram_bytes = SIZE,
                               .disk_dir = f->dir,
                               .disk_bytes = 4 * SIZE,
                               .store_async = true,
                               .store_nice = 7};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    /* the writer sets its nice as it starts: poll until it has */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (max_thread_nice() != 7) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        assert_true(now.tv_sec - t0.tv_sec < DEADLINE_S);
        sched_yield();
    }
    read_block(c, f, 0); /* and it still stores */
    cache_close(c);
}

static void test_bdp_blocks(void **state)
{
    (void)state;
    const uint64_t mib = 1u << 20;
    /* 100 MiB/s x 100 ms x 2 = 20 MiB: 5 blocks of 4 MiB */
    assert_int_equal(cache_bdp_blocks(100 * mib, 100000000, 4 * mib, 1, 32), 5);
    /* rounded up: 21 MiB in flight is 6 blocks */
    assert_int_equal(cache_bdp_blocks(105 * mib, 100000000, 4 * mib, 1, 32), 6);
    /* bounded: never below min, never above max */
    assert_int_equal(cache_bdp_blocks(1 * mib, 1000000, 4 * mib, 4, 32), 4);
    assert_int_equal(cache_bdp_blocks(10000 * mib, 1000000000, 4 * mib, 4, 16), 16);
    /* a huge product does not overflow */
    assert_int_equal(cache_bdp_blocks(UINT64_MAX, UINT64_MAX, 64 << 10, 1, 32), 32);
    /* nothing measured: the minimum; max below min: min */
    assert_int_equal(cache_bdp_blocks(0, 100000000, 4 * mib, 4, 16), 4);
    assert_int_equal(cache_bdp_blocks(100 * mib, 0, 4 * mib, 4, 16), 4);
    assert_int_equal(cache_bdp_blocks(10000 * mib, 1000000000, 4 * mib, 8, 2), 8);
    /* the window follows the rate: twice the rate, twice the blocks */
    uint64_t a = cache_bdp_blocks(50 * mib, 40000000, mib, 1, 1000);
    uint64_t b = cache_bdp_blocks(100 * mib, 40000000, mib, 1, 1000);
    assert_int_equal(a, 4);
    assert_int_equal(b, 8);
}

/* Every fetch waits at the gate until it opens; arrived counts them. */
struct pgate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    int arrived;
};

static void pgate_before(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                         uint64_t index, size_t bytes)
{
    (void)io;
    (void)obj;
    (void)index;
    (void)bytes;
    struct pgate *g = ud;
    pthread_mutex_lock(&g->mu);
    g->arrived++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void test_readahead_window_measured(void **state)
{
    struct fx *f = *state;
    f->g.open = true;
    struct cache_config cfg = {.block_size = BS, .ram_bytes = SIZE, .prefetch_threads = 2};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    /* nothing fetched yet: no estimate, the caller keeps its own rule */
    assert_int_equal(cache_readahead_window(c, f->be, 100u << 20, 2, 16), 0);
    struct pgate g = {.open = false};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    struct cache_fetch_hook hook = {.before = pgate_before, .ud = &g};
    cache_set_fetch_hook(c, &hook);
    struct cache_obj o = obj_a(f);
    assert_int_equal(cache_prefetch_owned(c, NULL, &o, 0, 4, &g), 4);
    /* both workers reach the gate: two prefetches in flight at once, counted */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_mutex_lock(&g.mu);
    while (g.arrived < 2) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += DEADLINE_S;
        assert_int_equal(pthread_cond_timedwait(&g.cv, &g.mu, &dl), 0);
    }
    pthread_mutex_unlock(&g.mu);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.prefetch_inflight, 2);
    assert_int_equal(st.prefetch_inflight_peak, 2);
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    while (cache_cached_bytes(c, &o) < 4 * (uint64_t)BS) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        assert_true(now.tv_sec - t0.tv_sec < DEADLINE_S);
        sched_yield();
    }
    /* full blocks fetched: a window from their time, within the bounds, shown in the stats */
    uint64_t w = cache_readahead_window(c, f->be, 1ull << 40, 2, 16);
    assert_int_equal(w, 16); /* 1 TiB/s over any measured fetch time: the bound */
    assert_int_equal(cache_readahead_window(c, f->be, 1, 2, 16), 2);
    cache_stats_get(c, &st);
    assert_true(st.readahead_fetch_ns > 0);
    assert_int_equal(st.readahead_window, 2);
    assert_int_equal(st.readahead_window_peak, 16);
    assert_int_equal(st.readahead_rate_bps, 1);
    cache_close(c);
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&g.cv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_read_does_not_wait_for_the_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_control_sync_read_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_block_not_fetched_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evict_waits_for_the_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_holds_with_the_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_victim_not_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pin_waits_for_a_queued_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pinned_after_a_skipped_write_is_stored, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_prefetch_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_is_nice, setup, teardown),
        cmocka_unit_test(test_bdp_blocks),
        cmocka_unit_test_setup_teardown(test_readahead_window_measured, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
