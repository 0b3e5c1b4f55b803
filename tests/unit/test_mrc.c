/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_mrc.c - online miss-ratio curves (src/cache/mrc.h) against exact simulations of the same
 * policy code (policy.c, as tests/perf/cachesim.c runs it) on the three generated traces of
 * cachesim (Zipf 0.9, Zipf with full scans, shuffled epochs; 4 MiB blocks):
 *   - at a 1 % base sample (every miniature cache at least 256 blocks, so sizes under 25,600
 *     blocks sample more), the mean absolute error of the hit ratio over 12 sizes (1 % to 100 %
 *     of the distinct blocks) is <= 0.02 for S3-FIFO and LRU;
 *   - memory is fixed: a stream of 2,000,000 distinct blocks keeps the tracked blocks within
 *     max_keys + nsizes * min_blocks, cutting the rate, and the curve stays a miss everywhere;
 *   - a bad config is -EINVAL; mrc_reset forgets the counters;
 *   - the cache's curves, fed through its queue of sampled accesses and simulated on the curves'
 *     thread, are exactly the curves of the same accesses fed straight to mrc_access; a full
 *     queue drops accesses and leaves them out of the counts (else they would read as hits);
 *     with a half-life the curves' counters halve.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cache/cache_debug.h"
#include "cache/mrc.h"
#include "cache/policy.h"
#include "fakebe.h"
#include "testutil.h"

#define BLK ((uint64_t)4 << 20)
#define MB_ ((uint64_t)1 << 20)
#define NSIZES 12

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The block's hash, as uniform as the cache's keyed identity hash. */
static uint64_t hash_of(uint64_t id)
{
    uint64_t s = id * 0x2545f4914f6cdd1dULL + 1;
    return rng_next(&s);
}

struct trace {
    uint32_t *id;
    size_t n, cap;
    uint32_t nobj;
};

static void push(struct trace *t, uint32_t id)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1 << 16;
        t->id = realloc(t->id, t->cap * sizeof(*t->id));
        assert_non_null(t->id);
    }
    t->id[t->n++] = id;
}

/* cachesim's traces: zipf (100,000 blocks, 1,000,000 requests, alpha 0.9), zipfscan (the same
 * with a full sequential scan every 200,000 requests), epoch (20,000 blocks, 10 shuffles). */
static void gen(const char *kind, struct trace *t)
{
    uint64_t rng = 7;
    memset(t, 0, sizeof(*t));
    if (!strcmp(kind, "epoch")) {
        uint32_t n = 20000;
        uint32_t *perm = malloc(n * sizeof(*perm));
        assert_non_null(perm);
        for (uint32_t i = 0; i < n; i++)
            perm[i] = i;
        for (int e = 0; e < 10; e++) {
            for (uint32_t i = n - 1; i > 0; i--) {
                uint32_t j = (uint32_t)(rng_next(&rng) % (i + 1));
                uint32_t x = perm[i];
                perm[i] = perm[j];
                perm[j] = x;
            }
            for (uint32_t i = 0; i < n; i++)
                push(t, perm[i]);
        }
        free(perm);
        t->nobj = n;
        return;
    }
    bool scans = !strcmp(kind, "zipfscan");
    uint32_t n = 100000;
    double *cdf = malloc(n * sizeof(double)), sum = 0;
    assert_non_null(cdf);
    for (uint32_t i = 0; i < n; i++)
        cdf[i] = (sum += 1.0 / pow(i + 1.0, 0.9));
    for (uint32_t i = 0; i < n; i++)
        cdf[i] /= sum;
    for (size_t r = 0; r < 1000000; r++) {
        if (scans && r % 200000 == 100000)
            for (uint32_t k = 0; k < n; k++)
                push(t, k);
        double u = (double)(rng_next(&rng) >> 11) / 9007199254740992.0;
        uint32_t lo = 0, hi = n - 1;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        push(t, (uint32_t)(((uint64_t)lo * 2654435761u) % n));
    }
    free(cdf);
    t->nobj = n;
}

/* The exact hit ratio of a cache of cap bytes running policy kind over t (every block BLK). */
static double exact(enum cache_policy_kind kind, const struct trace *t, uint64_t cap)
{
    struct policy *p = NULL;
    struct pol_node *nodes = calloc(t->nobj, sizeof(*nodes));
    assert_non_null(nodes);
    assert_int_equal(policy_new(kind, cap, &p), 0);
    uint64_t used = 0, hits = 0;
    for (size_t i = 0; i < t->n; i++) {
        struct pol_node *nd = &nodes[t->id[i]];
        if (policy_contains(nd)) {
            policy_hit(p, nd);
            hits++;
            continue;
        }
        nd->hash = hash_of(t->id[i]);
        nd->size = BLK;
        policy_insert(p, nd);
        used += BLK;
        while (used > cap) {
            struct pol_node *v = policy_evict_candidate(p, NULL, NULL);
            policy_remove(p, v, true);
            used -= v->size;
        }
    }
    policy_free(p);
    free(nodes);
    return (double)hits / (double)t->n;
}

static void sizes_of(const struct trace *t, uint64_t *sizes)
{
    /* 1 % .. 100 % of the distinct blocks, log-spaced */
    for (int k = 0; k < NSIZES; k++) {
        double f = 0.01 * pow(100.0, (double)k / (NSIZES - 1));
        sizes[k] = (uint64_t)(f * t->nobj + 0.5) * BLK;
    }
}

static double mae_of(const char *kind, enum cache_policy_kind pol)
{
    struct trace t;
    gen(kind, &t);
    uint64_t sizes[NSIZES];
    sizes_of(&t, sizes);
    struct mrc_config cfg = {.sizes = sizes,
                             .nsizes = NSIZES,
                             .rate = 0.01,
                             .max_keys = 4096,
                             .block_size = BLK,
                             .policy = pol};
    struct mrc *m = NULL;
    assert_int_equal(mrc_new(&cfg, &m), 0);
    for (size_t i = 0; i < t.n; i++)
        mrc_access(m, hash_of(t.id[i]), BLK);
    struct mrc_point pt[NSIZES];
    assert_int_equal(mrc_curve(m, pt, NSIZES), NSIZES);
    struct mrc_stats st;
    mrc_stats_get(m, &st);
    double sum = 0;
    printf("# %s, %s: %zu requests, %u blocks; sampled %" PRIu64 " accesses, %zu blocks tracked "
           "(%zu bytes), rate %.4f\n",
           kind, pol == CACHE_POLICY_LRU ? "lru" : "s3fifo", t.n, t.nobj, st.sampled, st.keys,
           st.mem_bytes, st.rate);
    printf("# %12s %8s %8s %8s %8s\n", "size_blocks", "rate", "exact", "mrc", "error");
    for (int k = 0; k < NSIZES; k++) {
        double x = exact(pol, &t, sizes[k]);
        double err = fabs(x - pt[k].hit_ratio);
        printf("# %12" PRIu64 " %8.4f %8.4f %8.4f %8.4f\n", sizes[k] / BLK, pt[k].rate, x,
               pt[k].hit_ratio, err);
        sum += err;
    }
    double mae = sum / NSIZES;
    printf("# mean absolute error %.4f\n", mae);
    mrc_free(m);
    free(t.id);
    return mae;
}

static void test_zipf(void **state)
{
    (void)state;
    assert_true(mae_of("zipf", CACHE_POLICY_S3FIFO) <= 0.02);
    assert_true(mae_of("zipf", CACHE_POLICY_LRU) <= 0.02);
}

static void test_zipfscan(void **state)
{
    (void)state;
    assert_true(mae_of("zipfscan", CACHE_POLICY_S3FIFO) <= 0.02);
}

static void test_epoch(void **state)
{
    (void)state;
    assert_true(mae_of("epoch", CACHE_POLICY_S3FIFO) <= 0.02);
    assert_true(mae_of("epoch", CACHE_POLICY_LRU) <= 0.02);
}

/* Fixed memory: a scan of 2,000,000 distinct blocks at a 50 % start rate. */
static void test_memory_fixed(void **state)
{
    (void)state;
    uint64_t sizes[4] = {64 * BLK, 1024 * BLK, 16384 * BLK, 262144 * BLK};
    struct mrc_config cfg = {.sizes = sizes,
                             .nsizes = 4,
                             .rate = 0.5,
                             .max_keys = 1000,
                             .min_blocks = 64,
                             .block_size = BLK};
    struct mrc *m = NULL;
    assert_int_equal(mrc_new(&cfg, &m), 0);
    size_t peak = 0, peak_mem = 0;
    for (uint32_t i = 0; i < 2000000; i++) {
        mrc_access(m, hash_of(i), BLK);
        if (i % 1000 == 0) {
            struct mrc_stats st;
            mrc_stats_get(m, &st);
            if (st.keys > peak)
                peak = st.keys;
            if (st.mem_bytes > peak_mem)
                peak_mem = st.mem_bytes;
        }
    }
    struct mrc_stats st;
    mrc_stats_get(m, &st);
    assert_true(peak <= 1000 + 4 * 64 + 1);
    assert_true(st.rate_cuts > 0);
    assert_true(st.rate < 0.5);
    assert_true(peak_mem < (size_t)1 << 20);
    struct mrc_point pt[4];
    mrc_curve(m, pt, 4);
    for (int k = 0; k < 4; k++)
        assert_true(pt[k].accesses > 0 && pt[k].hit_ratio <= 0.02); /* a scan never hits: what
                                                                     * is left is the
                                                                     * correction's noise */
    mrc_reset(m);
    mrc_curve(m, pt, 4);
    assert_true(isnan(pt[0].hit_ratio));
    mrc_stats_get(m, &st);
    assert_int_equal(st.keys, 0);
    mrc_free(m);
}

/* Fixed memory with accesses much smaller than the block size (100 KB objects, 4 MiB blocks):
 * the floors follow the sampled accesses' mean size, so the entries stay within max_keys + nsizes
 * * min_blocks and the base rate is not cut to nothing. */
static void test_memory_small_objects(void **state)
{
    (void)state;
    uint64_t sizes[4] = {256 * BLK, 2048 * BLK, 8192 * BLK, 25600 * BLK};
    struct mrc_config cfg = {.sizes = sizes,
                             .nsizes = 4,
                             .rate = 0.01,
                             .max_keys = 1000,
                             .min_blocks = 64,
                             .block_size = BLK};
    struct mrc *m = NULL;
    assert_int_equal(mrc_new(&cfg, &m), 0);
    size_t peak = 0;
    uint64_t rng = 3;
    for (uint32_t i = 0; i < 2000000; i++) {
        mrc_access(m, hash_of(rng_next(&rng) % 500000), 100000);
        if (i % 1000 == 0) {
            struct mrc_stats st;
            mrc_stats_get(m, &st);
            if (st.keys > peak)
                peak = st.keys;
        }
    }
    struct mrc_stats st;
    mrc_stats_get(m, &st);
    assert_true(peak <= 1000 + 4 * 64 + 1);
    assert_true(st.rate > 1e-4); /* cut, but not to nothing */
    mrc_free(m);
}

static void test_bad_config(void **state)
{
    (void)state;
    uint64_t up[2] = {2 * BLK, BLK}, ok[1] = {BLK};
    struct mrc *m = NULL;
    struct mrc_config c = {.sizes = up, .nsizes = 2, .block_size = BLK};
    assert_int_equal(mrc_new(&c, &m), -EINVAL);
    c = (struct mrc_config){.sizes = ok, .nsizes = 1, .block_size = 0};
    assert_int_equal(mrc_new(&c, &m), -EINVAL);
    c = (struct mrc_config){.sizes = ok, .nsizes = 1, .block_size = BLK, .rate = 1.5};
    assert_int_equal(mrc_new(&c, &m), -EINVAL);
    c = (struct mrc_config){.sizes = ok, .nsizes = 0, .block_size = BLK};
    assert_int_equal(mrc_new(&c, &m), -EINVAL);
    assert_null(m);
}

/* The cache's own curves (cache_mrc_curve): fed by reads, per tenant and for the node. Tenant A
 * re-reads 64 blocks, tenant B reads 2,048 once each; at every size above A's set A's curve is
 * near its true hit ratio and B's is 0; a tenant that read nothing has no curve; the reads of a
 * block in pieces count once. Off: -ENOENT. */
#define CBS ((uint64_t)64 << 10)
static void read_as(struct cache *c, struct backend *be, uint32_t t, const char *key, size_t piece)
{
    static char buf[CBS];
    struct tier_ioctx io = {.tenant = t, .cls = TIER_IO_TRAINING};
    struct cache_obj o = {.be = be, .key = key, .etag = "e1", .size_bytes = CBS};
    for (size_t off = 0; off < CBS; off += piece)
        assert_int_equal(cache_read(c, &io, &o, off, buf, piece), (ssize_t)piece);
}

static void test_cache_curves(void **state)
{
    (void)state;
    struct backend *be = fakebe_mem_new("be");
    char key[32];
    for (int i = 0; i < 2048 + 64; i++) {
        snprintf(key, sizeof(key), "k%05d", i);
        fakebe_add(be, key, CBS, "e1");
    }
    struct cache_config cfg = {.block_size = CBS,
                               .ram_bytes = 256 * CBS,
                               .prefetch_threads = 1,
                               .mrc = true,
                               .mrc_rate = 1.0};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    struct mrc_point pt[CACHE_MRC_SIZES];
    size_t n = 0;
    assert_int_equal(cache_mrc_curve(c, 5, pt, CACHE_MRC_SIZES, &n), -ENOENT);
    for (int round = 0; round < 10; round++)
        for (int i = 0; i < 64; i++) {
            snprintf(key, sizeof(key), "k%05d", i);
            read_as(c, be, 5, key, round % 2 ? CBS / 4 : CBS); /* in pieces: one access */
        }
    for (int i = 0; i < 2048; i++) {
        snprintf(key, sizeof(key), "k%05d", 64 + i);
        read_as(c, be, 6, key, CBS);
    }
    assert_int_equal(cache_mrc_curve(c, 5, pt, CACHE_MRC_SIZES, &n), 0);
    assert_int_equal(n, CACHE_MRC_SIZES);
    assert_int_equal(pt[0].size_bytes, 32 * CBS); /* an eighth of the RAM level */
    assert_int_equal(pt[CACHE_MRC_SIZES - 1].size_bytes, 1024 * CBS); /* four times it */
    for (size_t k = 0; k < n; k++) {
        assert_true(pt[k].accesses == 640); /* 10 rounds of 64, each read once per block */
        if (pt[k].size_bytes >= 64 * CBS)
            assert_true(fabs(pt[k].hit_ratio - 0.9) < 0.01); /* all but the first round */
    }
    uint64_t acc = 0, bytes = 0;
    assert_int_equal(cache_mrc_demand(c, 5, &acc, &bytes), 0);
    assert_int_equal(acc, 640);
    assert_int_equal(bytes, 640 * CBS);
    assert_int_equal(cache_mrc_demand(c, 7, &acc, &bytes), -ENOENT);
    /* a reclaimed id's curve starts anew for its next tenant (cache_tenant_fold) */
    assert_int_equal(cache_tenant_fold(c, 5, 0), 0);
    assert_int_equal(cache_mrc_demand(c, 5, &acc, &bytes), 0);
    assert_int_equal(acc, 0);
    assert_int_equal(cache_mrc_curve(c, 5, pt, CACHE_MRC_SIZES, &n), 0);
    assert_true(isnan(pt[0].hit_ratio));
    for (int round = 0; round < 10; round++)
        for (int i = 0; i < 64; i++) {
            snprintf(key, sizeof(key), "k%05d", i);
            read_as(c, be, 5, key, CBS);
        }
    assert_int_equal(cache_mrc_curve(c, 6, pt, CACHE_MRC_SIZES, &n), 0);
    for (size_t k = 0; k < n; k++)
        assert_true(pt[k].hit_ratio == 0.0);
    assert_int_equal(cache_mrc_curve(c, -1, pt, CACHE_MRC_SIZES, &n), 0);
    assert_true(pt[0].accesses == 640 + 2048 + 640); /* and the reclaimed id's reads */
    assert_int_equal(cache_mrc_curve(c, 1000, pt, CACHE_MRC_SIZES, &n), -EINVAL);
    cache_close(c);

    cfg.mrc = false;
    assert_int_equal(cache_open(&cfg, &c), 0);
    read_as(c, be, 5, "k00000", CBS);
    assert_int_equal(cache_mrc_curve(c, -1, pt, CACHE_MRC_SIZES, &n), -ENOENT);
    cache_close(c);
    backend_free(be);
}

/* A reader that waits for a block another fetch is loading (single-flight) makes one access of
 * it, and its next piece of the block continues that access: a block prefetched while its
 * reader arrived is one access of the curves, not two. */
struct piece_arg {
    struct cache *c;
    struct backend *be;
};

static void *read_first_piece(void *arg)
{
    struct piece_arg *a = arg;
    static char buf[CBS / 4];
    struct tier_ioctx io = {.tenant = 5, .cls = TIER_IO_TRAINING};
    struct cache_obj o = {.be = a->be, .key = "gate0", .etag = "e1", .size_bytes = CBS};
    assert_int_equal(cache_read(a->c, &io, &o, 0, buf, CBS / 4), (ssize_t)(CBS / 4));
    return NULL;
}

static void test_waiter_counts_once(void **state)
{
    (void)state;
    struct backend *be = fakebe_mem_new("be");
    fakebe_add(be, "gate0", CBS, "e1");
    struct cache_config cfg = {
        .block_size = CBS, .ram_bytes = 64 * CBS, .prefetch_threads = 1, .mrc = true};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    fakebe_gate_close(be, FAKEBE_READ, "gate");
    struct tier_ioctx io = {.tenant = 5, .cls = TIER_IO_TRAINING};
    struct cache_obj o = {.be = be, .key = "gate0", .etag = "e1", .size_bytes = CBS};
    assert_int_equal(cache_prefetch(c, &io, &o, 0, 1), 1);
    TU_WAIT_UNTIL(fakebe_gate_arrived(be) == 1); /* the prefetch is loading the block */
    pthread_t th;
    struct piece_arg a = {c, be};
    assert_int_equal(pthread_create(&th, NULL, read_first_piece, &a), 0);
    struct cache_stats st;
    TU_WAIT_UNTIL((cache_stats_get(c, &st), st.singleflight_waits == 1)); /* it waits on the load */
    fakebe_gate_open(be);
    pthread_join(th, NULL);
    static char buf[CBS];
    for (uint64_t off = CBS / 4; off < CBS; off += CBS / 4) /* the rest, in order */
        assert_int_equal(cache_read(c, &io, &o, off, buf, CBS / 4), (ssize_t)(CBS / 4));
    uint64_t acc = 0, bytes = 0;
    assert_int_equal(cache_mrc_demand(c, 5, &acc, &bytes), 0);
    assert_int_equal(acc, 1);
    cache_close(c);
    backend_free(be);
}

/* A rate change keeps the sample's weights: objects of 256 KiB in 4 MiB blocks (the floors are
 * sized by block_size until 256 accesses were sampled, then by their mean size, so the large
 * sizes go from sampling every access to a quarter of them), a set of 160 read in 6 shuffled
 * epochs: every size that holds the set hits 5 of 6 accesses. Were the accesses sampled before
 * the change counted at the weight of those after it, the cold first epoch would weigh 4 times
 * too much at the sizes whose rate fell (0.63-0.69 instead of 0.83). */
static void test_rate_change_weights(void **state)
{
    (void)state;
    enum { NSET = 160, EPOCHS = 6 };
    const uint64_t obj = 256 << 10;
    uint64_t sizes[6] = {64 * MB_, 100 * MB_, 136 * MB_, 187 * MB_, 256 * MB_, 512 * MB_};
    struct mrc_config cfg = {.sizes = sizes,
                             .nsizes = 6,
                             .rate = 0.01,
                             .block_size = BLK,
                             .policy = CACHE_POLICY_S3FIFO};
    struct mrc *m = NULL;
    assert_int_equal(mrc_new(&cfg, &m), 0);
    uint64_t rng = 5;
    uint32_t order[NSET];
    for (uint32_t i = 0; i < NSET; i++)
        order[i] = i;
    for (int e = 0; e < EPOCHS; e++) {
        for (uint32_t i = NSET - 1; i > 0; i--) { /* shuffle */
            uint32_t j = (uint32_t)(rng_next(&rng) % (i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (uint32_t i = 0; i < NSET; i++)
            mrc_access(m, hash_of(order[i]), obj);
    }
    struct mrc_point pt[6];
    assert_int_equal(mrc_curve(m, pt, 6), 6);
    for (int k = 0; k < 6; k++) {
        print_message("%4" PRIu64 " MiB: rate %.3f hit ratio %.4f (exact %.4f)\n", sizes[k] / MB_,
                      pt[k].rate, pt[k].hit_ratio, 5.0 / 6);
        assert_true(fabs(pt[k].hit_ratio - 5.0 / 6) < 0.05);
    }
    assert_true(pt[5].rate < 0.5); /* the rate did fall */
    mrc_free(m);
}

/* The queue is exact: one reader's 30,000 whole-block reads (each a new access) over 700 blocks
 * of skewed popularity, with every access sampled (rate 1), give the same curve, point for
 * point, as the same block sequence fed to mrc_access() of a curve of the same sizes and policy
 * (at rate 1 the simulations are exact, so the hash values do not matter, only the order and the
 * count of the accesses: a lost, doubled or reordered access changes them). */
static void test_queue_exact(void **state)
{
    (void)state;
    enum { NB = 700, NREADS = 30000 };
    struct backend *be = fakebe_mem_new("be");
    char key[32];
    for (int i = 0; i < NB; i++) {
        snprintf(key, sizeof(key), "q%05d", i);
        fakebe_add(be, key, CBS, "e1");
    }
    struct cache_config cfg = {.block_size = CBS,
                               .ram_bytes = 128 * CBS,
                               .prefetch_threads = 1,
                               .mrc = true,
                               .mrc_rate = 1.0};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    uint32_t *seq = malloc(NREADS * sizeof(*seq));
    uint64_t rng = 11;
    for (int i = 0; i < NREADS; i++) {
        /* skewed: the square of a uniform draw favours the low ids */
        double u = (double)(rng_next(&rng) >> 11) / 9007199254740992.0;
        seq[i] = (uint32_t)(u * u * NB);
        snprintf(key, sizeof(key), "q%05u", seq[i]);
        read_as(c, be, 5, key, CBS);
    }
    struct mrc_point pt[CACHE_MRC_SIZES];
    size_t n = 0;
    assert_int_equal(cache_mrc_curve(c, 5, pt, CACHE_MRC_SIZES, &n), 0);
    assert_int_equal(cache_mrc_dropped(c), 0);
    uint64_t sizes[CACHE_MRC_SIZES];
    for (size_t k = 0; k < n; k++)
        sizes[k] = pt[k].size_bytes;
    struct mrc_config mc = {
        .sizes = sizes, .nsizes = n, .rate = 1.0, .block_size = CBS, .policy = cfg.policy};
    struct mrc *ref = NULL;
    assert_int_equal(mrc_new(&mc, &ref), 0);
    for (int i = 0; i < NREADS; i++)
        mrc_access(ref, hash_of(seq[i]), CBS);
    struct mrc_point rp[CACHE_MRC_SIZES];
    assert_int_equal(mrc_curve(ref, rp, CACHE_MRC_SIZES), n);
    int between = 0;
    for (size_t k = 0; k < n; k++) {
        print_message("size %4" PRIu64 " blocks: queue %.6f direct %.6f (%.0f / %.0f accesses)\n",
                      sizes[k] / CBS, pt[k].hit_ratio, rp[k].hit_ratio, pt[k].accesses,
                      rp[k].accesses);
        assert_true(pt[k].accesses == NREADS && rp[k].accesses == NREADS);
        assert_true(fabs(pt[k].hit_ratio - rp[k].hit_ratio) < 1e-12);
        between += pt[k].hit_ratio > 0.05 && pt[k].hit_ratio < 0.999;
    }
    assert_true(between >= 3); /* a curve that says something, not all misses or all hits */
    mrc_free(ref);
    free(seq);
    cache_close(c);
    backend_free(be);
}

/* A full queue (its drain held) drops what does not fit, counts the drops, and leaves them out
 * of the curve but not of the demand: CACHE_MRC_QUEUE + 100 sampled reads with the drain held
 * give 100 drops, CACHE_MRC_QUEUE accesses in the curve once released and all of them in the
 * demand. */
static void test_queue_full_drops(void **state)
{
    (void)state;
    struct backend *be = fakebe_mem_new("be");
    fakebe_add(be, "d0", CBS, "e1");
    struct cache_config cfg = {.block_size = CBS,
                               .ram_bytes = 64 * CBS,
                               .prefetch_threads = 1,
                               .mrc = true,
                               .mrc_rate = 1.0};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    cache_debug_mrc_hold(c, true);
    for (unsigned i = 0; i < CACHE_MRC_QUEUE + 100; i++)
        read_as(c, be, 5, "d0", CBS);
    assert_int_equal(cache_mrc_dropped(c), 100);
    uint64_t acc = 0, bytes = 0;
    assert_int_equal(cache_mrc_demand(c, 5, &acc, &bytes), 0);
    assert_int_equal(acc, 100); /* queued ones are counted as they are simulated */
    cache_debug_mrc_hold(c, false);
    /* the demand is every read, left out of the curve or not */
    assert_int_equal(cache_mrc_demand(c, 5, &acc, &bytes), 0);
    assert_int_equal(acc, CACHE_MRC_QUEUE + 100);
    assert_int_equal(bytes, (uint64_t)(CACHE_MRC_QUEUE + 100) * CBS);
    assert_int_equal(cache_mrc_demand(c, -1, &acc, &bytes), 0);
    assert_int_equal(acc, CACHE_MRC_QUEUE + 100);
    struct mrc_point pt[CACHE_MRC_SIZES];
    size_t n = 0;
    assert_int_equal(cache_mrc_curve(c, 5, pt, CACHE_MRC_SIZES, &n), 0);
    for (size_t k = 0; k < n; k++) {
        assert_true(pt[k].accesses == CACHE_MRC_QUEUE);
        /* one block read again and again: every access but the first hits */
        assert_true(fabs(pt[k].hit_ratio - (1.0 - 1.0 / CACHE_MRC_QUEUE)) < 1e-9);
    }
    /* drained: accesses are taken again */
    read_as(c, be, 5, "d0", CBS);
    assert_int_equal(cache_mrc_curve(c, 5, pt, CACHE_MRC_SIZES, &n), 0);
    assert_true(pt[0].accesses == CACHE_MRC_QUEUE + 1);
    assert_int_equal(cache_mrc_dropped(c), 100);
    cache_close(c);
    backend_free(be);
}

/* A full queue at a rate below 1 does not bias the curve: a scan (no block read twice: every
 * size's true hit ratio is 0) of 64 KiB blocks with a 256 MiB RAM level, whose smallest size
 * samples half the accesses, with the drain held while the queue fills and half as many reads
 * again are made. Were only the sampled accesses dropped and the others counted, the curve
 * would expect samples it never got and read them as hits (about a third at the smallest
 * size); with the stretch left out whole every point stays near 0 (within 0.10: the sample's
 * own spread, a fresh random secret each run, is 0.01-0.03). */
static void test_queue_full_no_bias(void **state)
{
    (void)state;
    enum { NREADS = 3 * CACHE_MRC_QUEUE };
    struct backend *be = fakebe_mem_new("be");
    fakebe_add(be, "scan", (uint64_t)NREADS * CBS, "e1");
    struct cache_config cfg = {.block_size = CBS,
                               .ram_bytes = 4096 * CBS,
                               .prefetch_threads = 1,
                               .mrc = true,
                               .mrc_rate = 0.05};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    cache_debug_mrc_hold(c, true);
    static char buf[CBS];
    struct tier_ioctx io = {.tenant = 5, .cls = TIER_IO_TRAINING};
    struct cache_obj o = {
        .be = be, .key = "scan", .etag = "e1", .size_bytes = (uint64_t)NREADS * CBS};
    for (uint64_t i = 0; i < NREADS; i++)
        assert_int_equal(cache_read(c, &io, &o, i * CBS, buf, CBS), (ssize_t)CBS);
    uint64_t dropped = cache_mrc_dropped(c);
    cache_debug_mrc_hold(c, false);
    struct mrc_point pt[CACHE_MRC_SIZES];
    size_t n = 0;
    assert_int_equal(cache_mrc_curve(c, 5, pt, CACHE_MRC_SIZES, &n), 0);
    print_message("scan of %d blocks, %" PRIu64 " left out; rate at the smallest size %.2f\n",
                  NREADS, dropped, pt[0].rate);
    assert_true(pt[0].rate < 0.9);     /* some accesses were not sampled */
    assert_true(dropped > NREADS / 4); /* the queue was full for a good part of the scan */
    for (size_t k = 0; k < n; k++) {
        print_message("  %6" PRIu64 " blocks: rate %.3f hit ratio %.4f\n", pt[k].size_bytes / CBS,
                      pt[k].rate, pt[k].hit_ratio);
        /* a sample of 1,600-8,000 accesses spreads by 0.01-0.03; the bias is 0.2-0.33 */
        assert_true(pt[k].hit_ratio <= 0.10);
    }
    cache_close(c);
    backend_free(be);
}

/* The curves age: with a half-life, the curves' thread halves every curve's counters, so the
 * accesses before weigh half as much (the hit ratios of a steady stream stay as they were). */
static void test_curves_age(void **state)
{
    (void)state;
    struct backend *be = fakebe_mem_new("be");
    fakebe_add(be, "a0", CBS, "e1");
    struct cache_config cfg = {.block_size = CBS,
                               .ram_bytes = 64 * CBS,
                               .prefetch_threads = 1,
                               .mrc = true,
                               .mrc_rate = 1.0,
                               .mrc_halflife_ms = 1};
    struct cache *c = NULL;
    assert_int_equal(cache_open(&cfg, &c), 0);
    for (int i = 0; i < 100; i++)
        read_as(c, be, 5, "a0", CBS);
    uint64_t acc = 0, bytes = 0;
    assert_int_equal(cache_mrc_demand(c, 5, &acc, &bytes), 0); /* drains: all 100 simulated */
    uint64_t ages = cache_mrc_ages(c);
    /* the first halving may have come before, during or after the reads: wait for the next one
     * after them (the thread wakes every 200 ms; a minute is the deadline of a loaded machine) */
    for (int i = 0; i < 6000 && cache_mrc_ages(c) < ages + 1; i++)
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    assert_true(cache_mrc_ages(c) >= ages + 1);
    struct mrc_point pt[CACHE_MRC_SIZES];
    size_t n = 0;
    assert_int_equal(cache_mrc_curve(c, 5, pt, CACHE_MRC_SIZES, &n), 0);
    print_message("after %" PRIu64 " halvings: %.2f accesses, hit ratio %.4f\n", cache_mrc_ages(c),
                  pt[0].accesses, pt[0].hit_ratio);
    assert_true(pt[0].accesses <= 50);
    /* 99 hits of 100, halved alike (0.99; a little more when a halving fell among the reads,
     * which halved the first miss with the hits before it) */
    assert_true(pt[0].hit_ratio >= 0.99 - 1e-9 && pt[0].hit_ratio < 1.0);
    assert_int_equal(cache_mrc_demand(c, 5, &acc, &bytes), 0);
    assert_int_equal(acc, 100); /* the demand is a count of what was read: never aged */
    cache_close(c);
    backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zipf),
        cmocka_unit_test(test_zipfscan),
        cmocka_unit_test(test_epoch),
        cmocka_unit_test(test_memory_fixed),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_cache_curves),
        cmocka_unit_test(test_waiter_counts_once),
        cmocka_unit_test(test_memory_small_objects),
        cmocka_unit_test(test_rate_change_weights),
        cmocka_unit_test(test_queue_exact),
        cmocka_unit_test(test_queue_full_drops),
        cmocka_unit_test(test_queue_full_no_bias),
        cmocka_unit_test(test_curves_age),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
