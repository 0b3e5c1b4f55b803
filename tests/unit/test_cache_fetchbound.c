/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_fetchbound.c - the cache's bound on backend fetches holding a block buffer
 * ([cache] max_fetches, per backend; review finding 17, third review): each miss allocated its
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
#define DEADLINE_NS (20 * TIER_NS_PER_SEC)

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

#define POLL(cond)                                                                                 \
    do {                                                                                           \
        uint64_t dl_ = tier_now_mono_ns() + DEADLINE_NS;                                           \
        while (!(cond)) {                                                                          \
            assert_true(tier_now_mono_ns() < dl_);                                                 \
            tier_sleep_ms(1);                                                                      \
        }                                                                                          \
    } while (0)

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
    POLL(fakebe_gate_arrived(slow) == BOUND);
    /* readers of block 0, in flight: single-flight waiters, no slot */
    for (int i = NMISS; i < NMISS + NSAME; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    POLL(cstats(c).singleflight_waits == NSAME);
    /* blocks 4..11: no slot free, they wait holding no buffer */
    for (int i = BOUND; i < NMISS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    POLL(cstats(c).fetch_slot_waits == NMISS - BOUND);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetch_buffers_bounded),
        cmocka_unit_test(test_max_fetches_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
