/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_fetchbound.c - the cache's bound on backend fetches holding a block buffer
 * ([cache] max_fetches, per backend): without it each miss allocated its
 * block buffer before its backend call waited for admission, so thousands of misses queued
 * behind a slow backend held thousands of block buffers.
 *
 * With a backend whose reads wait at a gate (tests/lib/fakebe.h) and max_fetches = 4: 12 misses
 * of distinct blocks put exactly 4 reads at the gate and 4 buffers in use (peak 4), the other 8
 * wait for a slot; 3 more readers of a block being fetched wait on its single-flight load
 * without a slot; a read from a second backend is not held behind the first; once the gate
 * opens every read completes with the right bytes and no buffer is left in use.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cache/cache.h"
#include "common/timeutil.h"
#include "fakebe.h"
#include "testutil.h"

#define BS (64u << 10)
#define BOUND 4
#define NMISS 12 /* distinct blocks, > BOUND */
#define NSAME 3  /* readers of block 0 while its fetch is out */

struct reader {
    struct cache *c;
    struct backend *be;
    uint64_t block;
    ssize_t rc;
    int bad;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    char *buf = malloc(BS), *want = malloc(BS);
    struct cache_obj o = {.be = r->be, .key = "big", .etag = "e1", .size_bytes = NMISS * BS};
    r->rc = cache_read(r->c, NULL, &o, r->block * BS, buf, BS);
    fakebe_expected("big", "e1", r->block * BS, want, BS);
    r->bad = r->rc != (ssize_t)BS || memcmp(buf, want, BS) != 0;
    free(buf);
    free(want);
    return NULL;
}

static struct cache_stats cstats(struct cache *c)
{
    struct cache_stats st;
    cache_stats_get(c, &st);
    return st;
}

static void test_fetch_buffers_bounded(void **state)
{
    (void)state;
    struct backend *slow = fakebe_mem_new("slow"), *other = fakebe_mem_new("other");
    fakebe_add(slow, "big", NMISS * BS, "e1");
    fakebe_add(other, "big", NMISS * BS, "e1");
    struct cache_config cfg = {
        .block_size = BS, .ram_bytes = 64u << 20, .prefetch_threads = 1, .max_fetches = BOUND};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cstats(c).max_fetches, BOUND);
    fakebe_gate_close(slow, FAKEBE_READ, NULL);

    struct reader rd[NMISS + NSAME];
    pthread_t th[NMISS + NSAME];
    for (int i = 0; i < NMISS + NSAME; i++)
        rd[i] = (struct reader){.c = c, .be = slow, .block = i < NMISS ? (uint64_t)i : 0};
    /* blocks 0..3 take the slots and reach the gate */
    for (int i = 0; i < BOUND; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    TU_WAIT_UNTIL(fakebe_gate_arrived(slow) == BOUND);
    /* readers of block 0, in flight: single-flight waiters, no slot */
    for (int i = NMISS; i < NMISS + NSAME; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    TU_WAIT_UNTIL(cstats(c).singleflight_waits == NSAME);
    /* blocks 4..11: no slot free, they wait holding no buffer */
    for (int i = BOUND; i < NMISS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    TU_WAIT_UNTIL(cstats(c).fetch_slot_waits == NMISS - BOUND);
    struct cache_stats st = cstats(c);
    assert_int_equal(st.fetch_buffers_now, BOUND);
    assert_int_equal(st.fetch_buffers_peak, BOUND);
    assert_int_equal(fakebe_gate_arrived(slow), BOUND);

    /* another backend's miss goes through meanwhile */
    struct reader o = {.c = c, .be = other, .block = 5};
    reader_main(&o);
    assert_int_equal(o.bad, 0);

    fakebe_gate_open(slow);
    for (int i = 0; i < NMISS + NSAME; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(rd[i].rc, (ssize_t)BS);
        assert_int_equal(rd[i].bad, 0);
    }
    st = cstats(c);
    assert_int_equal(st.fetch_buffers_now, 0);
    assert_int_equal(st.fetch_buffers_peak, BOUND + 1); /* summed over backends: other's too */
    assert_int_equal(st.fetches, NMISS + 1); /* one per block, the single-flight ones none */
    assert_int_equal(fakebe_calls(slow, FAKEBE_READ), NMISS);
    cache_close(c);
    backend_free(slow);
    backend_free(other);
}

static void test_max_fetches_range(void **state)
{
    (void)state;
    struct cache_config cfg = {.block_size = BS, .ram_bytes = 1u << 20, .max_fetches = 5000};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), -EINVAL);
    cfg.max_fetches = 0; /* the default */
    assert_int_equal(cache_open(&cfg, &c), 0);
    assert_int_equal(cstats(c).max_fetches, 64);
    cache_close(c);
}

/* ---- a freed fetch slot goes to the most urgent class (second review of issue 10) --------------
 * One slot; a background fetch holds it at the gate, three more background misses wait for it,
 * then an inference miss: once the gate opens, the inference fetch gets the slot next, before
 * the background ones queued earlier. The fetch hook's `before` runs once a fetch holds its
 * slot, so its call order is the order of the grants. */

#define NBG 3

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static char order[NBG + 2];
static int norder;

static void grant_hook(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                       uint64_t index, size_t bytes)
{
    (void)ud, (void)obj, (void)index, (void)bytes;
    pthread_mutex_lock(&order_mu);
    if (norder < (int)sizeof(order))
        order[norder++] = io->cls == TIER_IO_INFERENCE ? 'I' : 'b';
    pthread_mutex_unlock(&order_mu);
}

struct cls_reader {
    struct cache *c;
    struct backend *be;
    const char *key;
    struct tier_ioctx io;
    ssize_t rc;
};

static void *cls_reader_main(void *arg)
{
    struct cls_reader *r = arg;
    char *buf = malloc(BS);
    struct cache_obj o = {.be = r->be, .key = r->key, .etag = "e1", .size_bytes = BS};
    r->rc = cache_read(r->c, &r->io, &o, 0, buf, BS);
    free(buf);
    return NULL;
}

static void test_slot_goes_to_inference_first(void **state)
{
    (void)state;
    struct backend *be = fakebe_mem_new("be");
    static const char *const keys[NBG + 2] = {"hold", "bg0", "bg1", "bg2", "inf"};
    for (int i = 0; i < NBG + 2; i++)
        fakebe_add(be, keys[i], BS, "e1");
    fakebe_gate_close(be, FAKEBE_READ, "hold");
    struct cache_config cfg = {.block_size = BS, .ram_bytes = 4u << 20, .max_fetches = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    struct cache_fetch_hook hook = {.before = grant_hook};
    cache_set_fetch_hook(c, &hook);
    norder = 0;

    struct cls_reader r[NBG + 2];
    pthread_t th[NBG + 2];
    for (int i = 0; i < NBG + 2; i++) {
        enum tier_io_class cls = i == NBG + 1 ? TIER_IO_INFERENCE : TIER_IO_BACKGROUND;
        r[i] = (struct cls_reader){c, be, keys[i], {.tenant = 0, .cls = cls}, 0};
    }
    assert_int_equal(pthread_create(&th[0], NULL, cls_reader_main, &r[0]), 0);
    TU_WAIT_UNTIL(fakebe_gate_arrived(be) == 1); /* "hold" has the slot */
    for (int i = 1; i <= NBG; i++)
        assert_int_equal(pthread_create(&th[i], NULL, cls_reader_main, &r[i]), 0);
    TU_WAIT_UNTIL(cstats(c).fetch_slot_waits == NBG);
    assert_int_equal(pthread_create(&th[NBG + 1], NULL, cls_reader_main, &r[NBG + 1]), 0);
    TU_WAIT_UNTIL(cstats(c).fetch_slot_waits == NBG + 1);
    fakebe_gate_open(be);
    for (int i = 0; i < NBG + 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(r[i].rc, (ssize_t)BS);
    }
    assert_int_equal(norder, NBG + 2);
    assert_memory_equal(order, "bIbbb", NBG + 2); /* hold, then inference, then the rest */
    cache_close(c);
    backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetch_buffers_bounded),
        cmocka_unit_test(test_max_fetches_range),
        cmocka_unit_test(test_slot_goes_to_inference_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
