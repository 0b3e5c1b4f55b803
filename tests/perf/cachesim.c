/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cachesim.c - trace-driven simulator for the cache's eviction policies. Replays CSV traces
 * (`time,obj_id,size`, one request per line, optional header) through S3-FIFO and LRU - the very
 * policy code the cache links (src/cache/policy.c) - and through Belady's offline optimum
 * (evict the object whose next use is farthest; with uniform sizes this is exactly optimal),
 * and through the hinted policy the daemon runs for epoch-order hints (src/hints/hintwin.c: the
 * cache holds the prefetch window over the known future and evicts what left it first), and
 * prints object and byte miss ratios. Also generates the three standard traces.
 *
 * hinted: the future is revealed as an epoch-order hint would reveal it, one "epoch" of as many
 * entries as the trace has distinct objects at a time, two ahead of the reader (the current and
 * the next: what contrib/python/tierd_hints.py sends); its miss ratio counts every fetch, the
 * prefetches included (the backend traffic), so it compares with the others' demand misses.
 *
 *   cachesim gen zipf|zipfscan|epoch OUT.csv [seed]
 *   cachesim run TRACE.csv CACHE_BYTES
 *   cachesim all [DIR]      generate the three traces into DIR (default .) and run them
 *   cachesim mrc TRACE.csv [RATE]   exact miss-ratio curves against the online ones of
 *                           src/cache/mrc.c at base sampling rate RATE (default 0.01)
 *
 * Single-threaded; memory is O(distinct objects + requests).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hints/hintwin.h"
#include "cache/mrc.h"
#include "cache/policy.h"
#include "common/strutil.h"

#define OBJ_BYTES (4ull << 20) /* every generated object is one 4 MiB block */

struct req {
    uint64_t id;
    uint64_t size;
};

struct trace {
    struct req *r;
    size_t n, cap;
};

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

static int trace_push(struct trace *t, uint64_t id, uint64_t size)
{
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 1 << 16;
        struct req *nr = realloc(t->r, ncap * sizeof(*nr));
        if (!nr)
            return -ENOMEM;
        t->r = nr;
        t->cap = ncap;
    }
    t->r[t->n++] = (struct req){id, size};
    return 0;
}

/* id -> dense index map (open addressing, grows at 50 %) */
struct idmap {
    uint64_t *keys; /* key+1; 0 = empty */
    uint32_t *vals;
    size_t cap, n;
};

static uint64_t mixh(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    return x ^ (x >> 33);
}

static int idmap_get(struct idmap *m, uint64_t id, uint32_t next_val, uint32_t *out)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 1024;
        uint64_t *nk = calloc(ncap, sizeof(*nk));
        uint32_t *nv = calloc(ncap, sizeof(*nv));
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            size_t j = mixh(m->keys[i]) & (ncap - 1);
            while (nk[j])
                j = (j + 1) & (ncap - 1);
            nk[j] = m->keys[i];
            nv[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = ncap;
    }
    uint64_t k = id + 1;
    size_t j = mixh(k) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != k)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) {
        m->keys[j] = k;
        m->vals[j] = next_val;
        m->n++;
    }
    *out = m->vals[j];
    return 0;
}

/* Replace obj ids by dense indexes 0..n-1; returns the number of distinct objects. */
static long densify(const struct trace *t, uint32_t **dense)
{
    struct idmap m = {0};
    uint32_t *d = malloc(t->n * sizeof(*d));
    if (!d)
        return -ENOMEM;
    for (size_t i = 0; i < t->n; i++) {
        if (idmap_get(&m, t->r[i].id, (uint32_t)m.n, &d[i]) < 0) {
            free(d);
            return -ENOMEM;
        }
    }
    long n = (long)m.n;
    free(m.keys);
    free(m.vals);
    *dense = d;
    return n;
}

/* ---- trace I/O ------------------------------------------------------------------------------ */

static int trace_write(const struct trace *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cachesim: cannot write %s: %s\n", path, strerror(errno));
        return -errno;
    }
    fprintf(f, "time,obj_id,size\n");
    for (size_t i = 0; i < t->n; i++)
        fprintf(f, "%zu,%" PRIu64 ",%" PRIu64 "\n", i, t->r[i].id, t->r[i].size);
    if (fclose(f) != 0)
        return -EIO;
    return 0;
}

static int trace_read(const char *path, struct trace *t)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cachesim: cannot read %s: %s\n", path, strerror(errno));
        return -errno;
    }
    char line[256];
    long lineno = 0;
    int r = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *save = NULL, *tm = strtok_r(line, ",\n", &save);
        char *id = strtok_r(NULL, ",\n", &save), *sz = strtok_r(NULL, ",\r\n", &save);
        uint64_t v_id, v_sz, v_tm;
        if (!tm || !id || !sz || tier_parse_u64(tm, &v_tm) < 0 || tier_parse_u64(id, &v_id) < 0 ||
            tier_parse_u64(sz, &v_sz) < 0) {
            if (lineno == 1)
                continue; /* header */
            fprintf(stderr, "%s:%ld: expected time,obj_id,size\n", path, lineno);
            r = -EINVAL;
            break;
        }
        if ((r = trace_push(t, v_id, v_sz)) < 0)
            break;
    }
    fclose(f);
    return r;
}

/* ---- generators ----------------------------------------------------------------------------- */

struct zipf {
    double *cdf;
    size_t n;
};

static int zipf_init(struct zipf *z, size_t n, double alpha)
{
    z->cdf = malloc(n * sizeof(double));
    if (!z->cdf)
        return -ENOMEM;
    z->n = n;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += 1.0 / pow((double)(i + 1), alpha);
        z->cdf[i] = sum;
    }
    for (size_t i = 0; i < n; i++)
        z->cdf[i] /= sum;
    return 0;
}

static uint64_t zipf_draw(const struct zipf *z, uint64_t *rng)
{
    double u = rng_unit(rng);
    size_t lo = 0, hi = z->n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (z->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* scatter ranks over ids so popularity is not ordered by id */
    return (lo * 2654435761u) % z->n;
}

/* Parameters of the standard traces: objects are 4 MiB blocks; the cache size used for each is
 * printed by `cachesim all`. */
#define ZIPF_OBJS 100000
#define ZIPF_REQS 1000000
#define ZIPF_ALPHA 0.9
#define SCAN_EVERY 200000
#define EPOCH_OBJS 20000
#define EPOCHS 10

static int gen(const char *kind, struct trace *t, uint64_t seed)
{
    uint64_t rng = seed;
    if (!strcmp(kind, "zipf") || !strcmp(kind, "zipfscan")) {
        bool scans = !strcmp(kind, "zipfscan");
        struct zipf z;
        if (zipf_init(&z, ZIPF_OBJS, ZIPF_ALPHA) < 0)
            return -ENOMEM;
        for (size_t i = 0; i < ZIPF_REQS; i++) {
            if (scans && i % SCAN_EVERY == SCAN_EVERY / 2)
                for (uint64_t k = 0; k < ZIPF_OBJS; k++) /* full sequential scan */
                    trace_push(t, k, OBJ_BYTES);
            if (trace_push(t, zipf_draw(&z, &rng), OBJ_BYTES) < 0) {
                free(z.cdf);
                return -ENOMEM;
            }
        }
        free(z.cdf);
        return 0;
    }
    if (!strcmp(kind, "epoch")) {
        uint64_t *perm = malloc(EPOCH_OBJS * sizeof(*perm));
        if (!perm)
            return -ENOMEM;
        for (uint64_t i = 0; i < EPOCH_OBJS; i++)
            perm[i] = i;
        for (int e = 0; e < EPOCHS; e++) {
            for (size_t i = EPOCH_OBJS - 1; i > 0; i--) {
                size_t j = (size_t)(rng_next(&rng) % (i + 1));
                uint64_t x = perm[i];
                perm[i] = perm[j];
                perm[j] = x;
            }
            for (size_t i = 0; i < EPOCH_OBJS; i++)
                trace_push(t, perm[i], OBJ_BYTES);
        }
        free(perm);
        return 0;
    }
    fprintf(stderr, "cachesim: unknown trace kind '%s' (zipf, zipfscan, epoch)\n", kind);
    return -EINVAL;
}

/* ---- simulation ------------------------------------------------------------------------------ */

struct result {
    uint64_t reqs, misses, bytes, miss_bytes;
};

static int sim_policy(enum cache_policy_kind kind, const struct trace *t, const uint32_t *dense,
                      long nobj, uint64_t cap, struct result *res)
{
    struct policy *p = NULL;
    struct pol_node *nodes = calloc((size_t)nobj, sizeof(*nodes));
    int r = policy_new(kind, cap, &p);
    if (r < 0 || !nodes) {
        free(nodes);
        policy_free(p);
        return r < 0 ? r : -ENOMEM;
    }
    uint64_t used = 0;
    memset(res, 0, sizeof(*res));
    for (size_t i = 0; i < t->n; i++) {
        struct pol_node *n = &nodes[dense[i]];
        res->reqs++;
        res->bytes += t->r[i].size;
        if (policy_contains(n)) {
            policy_hit(p, n);
            continue;
        }
        res->misses++;
        res->miss_bytes += t->r[i].size;
        if (t->r[i].size > cap)
            continue;
        n->hash = mixh(t->r[i].id + 1);
        n->size = t->r[i].size;
        policy_insert(p, n);
        used += n->size;
        while (used > cap) {
            struct pol_node *v = policy_evict_candidate(p, NULL, NULL);
            policy_remove(p, v, true);
            used -= v->size;
        }
    }
    policy_free(p);
    free(nodes);
    return 0;
}

/* max-heap of (next_use, obj) with lazy deletion */
struct hent {
    uint64_t next;
    uint32_t obj;
};

static void heap_push(struct hent *h, size_t *n, struct hent e)
{
    size_t i = (*n)++;
    h[i] = e;
    while (i && h[(i - 1) / 2].next < h[i].next) {
        struct hent x = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = x;
        i = (i - 1) / 2;
    }
}

static struct hent heap_pop(struct hent *h, size_t *n)
{
    struct hent top = h[0];
    h[0] = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && h[l].next > h[m].next)
            m = l;
        if (r < *n && h[r].next > h[m].next)
            m = r;
        if (m == i)
            break;
        struct hent x = h[i];
        h[i] = h[m];
        h[m] = x;
        i = m;
    }
    return top;
}

static int sim_belady(const struct trace *t, const uint32_t *dense, long nobj, uint64_t cap,
                      struct result *res)
{
    const uint64_t never = UINT64_MAX;
    uint64_t *next = malloc(t->n * sizeof(*next));
    uint64_t *last = malloc((size_t)nobj * sizeof(*last));
    uint64_t *cur_next = malloc((size_t)nobj * sizeof(*cur_next));
    bool *in = calloc((size_t)nobj, sizeof(*in));
    uint64_t *osize = calloc((size_t)nobj, sizeof(*osize));
    struct hent *heap = malloc((t->n + 1) * sizeof(*heap));
    int r = 0;
    if (!next || !last || !cur_next || !in || !osize || !heap) {
        r = -ENOMEM;
        goto out;
    }
    for (long i = 0; i < nobj; i++)
        last[i] = never;
    for (size_t i = t->n; i-- > 0;) {
        next[i] = last[dense[i]];
        last[dense[i]] = i;
    }
    size_t hn = 0;
    uint64_t used = 0;
    memset(res, 0, sizeof(*res));
    for (size_t i = 0; i < t->n; i++) {
        uint32_t o = dense[i];
        uint64_t sz = t->r[i].size;
        res->reqs++;
        res->bytes += sz;
        if (in[o]) {
            cur_next[o] = next[i];
            heap_push(heap, &hn, (struct hent){next[i], o});
            continue;
        }
        res->misses++;
        res->miss_bytes += sz;
        if (sz > cap || next[i] == never)
            continue; /* never used again: do not admit */
        in[o] = true;
        osize[o] = sz;
        cur_next[o] = next[i];
        used += sz;
        heap_push(heap, &hn, (struct hent){next[i], o});
        while (used > cap) {
            struct hent e = heap_pop(heap, &hn);
            if (!in[e.obj] || cur_next[e.obj] != e.next)
                continue; /* stale */
            in[e.obj] = false;
            used -= osize[e.obj];
        }
    }
out:
    free(next);
    free(last);
    free(cur_next);
    free(in);
    free(osize);
    free(heap);
    return r;
}

/* The hinted simulation: the cache holds the prefetch window (hintwin) and, in the rest, what
 * left it; an entering item not cached is fetched, evicting hintwin_victim() (the held item
 * outside the window used farthest ahead) while the cache is full. The daemon's hint engine
 * does the same over a tenant's hinted files (src/hints/hints.c). */
struct hsim {
    struct hintwin *w;
    uint64_t *osize;
    uint64_t used, cap;
    struct result *res;
};

static void hsim_enter(void *ud, uint32_t item, uint64_t pos)
{
    (void)pos;
    struct hsim *h = ud;
    uint64_t sz = h->osize[item];
    if (hintwin_is_held(h->w, item))
        return;
    h->res->misses++; /* a fetch: prefetched ahead of the reader */
    h->res->miss_bytes += sz;
    uint32_t v;
    while (h->used + sz > h->cap && hintwin_victim(h->w, &v)) {
        hintwin_held(h->w, v, false);
        h->used -= h->osize[v];
    }
    if (h->used + sz <= h->cap) {
        hintwin_held(h->w, item, true);
        h->used += sz;
    }
}

/* The prefetch window of the simulation: as the daemon's default ([hints] window_files), and at
 * most an eighth of the cache; the rest of the cache keeps what left the window, Belady-wise. */
#define HSIM_WINDOW_ITEMS 256

static int sim_hinted(const struct trace *t, const uint32_t *dense, long nobj, uint64_t cap,
                      struct result *res)
{
    struct hsim h = {.cap = cap, .res = res};
    h.osize = calloc((size_t)nobj, sizeof(*h.osize));
    int r = hintwin_new(HSIM_WINDOW_ITEMS, cap / 8, &h.w);
    if (r < 0 || !h.osize) {
        r = r < 0 ? r : -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < t->n; i++)
        h.osize[dense[i]] = t->r[i].size;
    memset(res, 0, sizeof(*res));
    size_t chunk = (size_t)nobj, known = 0;
    for (size_t i = 0; i < t->n; i++) {
        /* keep two epochs known: the reader's and the next */
        while (known < t->n && known < (i / chunk + 2) * chunk) {
            if ((r = hintwin_append(h.w, dense[known], t->r[known].size)) < 0)
                goto out;
            known++;
        }
        hintwin_seek(h.w, i, NULL, NULL);
        hintwin_fill(h.w, hsim_enter, &h);
        res->reqs++;
        res->bytes += t->r[i].size;
        if (!hintwin_is_held(h.w, dense[i])) { /* only an item larger than the cache */
            res->misses++;
            res->miss_bytes += t->r[i].size;
        }
    }
out:
    hintwin_free(h.w);
    free(h.osize);
    return r;
}

static int run(const char *name, const struct trace *t, uint64_t cap)
{
    uint32_t *dense = NULL;
    long nobj = densify(t, &dense);
    if (nobj < 0)
        return (int)nobj;
    struct result s3, lru, opt, hin;
    int r;
    if ((r = sim_policy(CACHE_POLICY_S3FIFO, t, dense, nobj, cap, &s3)) < 0 ||
        (r = sim_policy(CACHE_POLICY_LRU, t, dense, nobj, cap, &lru)) < 0 ||
        (r = sim_belady(t, dense, nobj, cap, &opt)) < 0 ||
        (r = sim_hinted(t, dense, nobj, cap, &hin)) < 0) {
        free(dense);
        return r;
    }
    double ms3 = (double)s3.misses / (double)s3.reqs, mlru = (double)lru.misses / (double)lru.reqs,
           mopt = (double)opt.misses / (double)opt.reqs,
           mhin = (double)hin.misses / (double)hin.reqs;
    printf("%-10s %9zu %8ld %10.1f  %7.4f %7.4f %7.4f %7.4f  %+7.1f%%\n", name, t->n, nobj,
           (double)cap / (double)(1ull << 30), ms3, mlru, mopt, mhin,
           mlru > 0 ? 100.0 * (ms3 - mlru) / mlru : 0.0);
    free(dense);
    return 0;
}

static void header(void)
{
    printf("%-10s %9s %8s %10s  %7s %7s %7s %7s  %8s\n", "trace", "requests", "objects",
           "cache_GiB", "s3fifo", "lru", "belady", "hinted", "s3f/lru");
}

/* Exact curves (sim_policy at each size) against the online ones of src/cache/mrc.c fed the same
 * stream at base rate `rate`: 12 sizes, 1 % to 100 % of the distinct bytes, log-spaced, for
 * S3-FIFO and LRU; prints each point and the mean absolute error of the hit ratio. */
#define MRC_NSIZES 12
static int mrc_table(const char *name, const struct trace *t, double rate)
{
    uint32_t *dense = NULL;
    long nobj = densify(t, &dense);
    if (nobj < 0)
        return (int)nobj;
    uint64_t bytes = 0, maxsz = 1;
    for (size_t i = 0; i < t->n; i++) {
        bytes += t->r[i].size;
        if (t->r[i].size > maxsz)
            maxsz = t->r[i].size;
    }
    double avg = t->n ? (double)bytes / (double)t->n : 1;
    uint64_t sizes[MRC_NSIZES];
    for (int k = 0; k < MRC_NSIZES; k++) {
        double f = 0.01 * pow(100.0, (double)k / (MRC_NSIZES - 1));
        sizes[k] = (uint64_t)(f * (double)nobj * avg) + (uint64_t)k + 1; /* ascending */
    }
    static const enum cache_policy_kind kinds[2] = {CACHE_POLICY_S3FIFO, CACHE_POLICY_LRU};
    int r = 0;
    for (int pk = 0; pk < 2 && r == 0; pk++) {
        struct mrc_config cfg = {.sizes = sizes,
                                 .nsizes = MRC_NSIZES,
                                 .rate = rate,
                                 .block_size = (uint64_t)avg,
                                 .policy = kinds[pk]};
        struct mrc *m = NULL;
        if ((r = mrc_new(&cfg, &m)) < 0)
            break;
        for (size_t i = 0; i < t->n; i++)
            mrc_access(m, mixh(t->r[i].id + 1), t->r[i].size);
        struct mrc_point pt[MRC_NSIZES];
        mrc_curve(m, pt, MRC_NSIZES);
        struct mrc_stats st;
        mrc_stats_get(m, &st);
        printf("%s, %s: %zu requests, %ld objects; base rate %.4f, %zu blocks tracked, %zu bytes\n",
               name, kinds[pk] == CACHE_POLICY_LRU ? "lru" : "s3fifo", t->n, nobj, st.rate, st.keys,
               st.mem_bytes);
        printf("| size (objects) | rate | exact hit ratio | online | error "
               "|\n|---|---|---|---|---|\n");
        double sum = 0;
        for (int k = 0; k < MRC_NSIZES && r == 0; k++) {
            struct result res;
            if ((r = sim_policy(kinds[pk], t, dense, nobj, sizes[k], &res)) < 0)
                break;
            double exact = res.reqs ? 1.0 - (double)res.misses / (double)res.reqs : 0;
            double err = fabs(exact - pt[k].hit_ratio);
            sum += err;
            printf("| %.0f | %.4f | %.4f | %.4f | %.4f |\n", (double)sizes[k] / avg, pt[k].rate,
                   exact, pt[k].hit_ratio, err);
        }
        printf("mean absolute error %.4f\n\n", sum / MRC_NSIZES);
        mrc_free(m);
    }
    free(dense);
    return r;
}

int main(int argc, char **argv)
{
    struct trace t = {0};
    int r = 0;
    if (argc >= 4 && !strcmp(argv[1], "gen")) {
        uint64_t seed = 1;
        if (argc > 4 && tier_parse_u64(argv[4], &seed) < 0)
            return 2;
        r = gen(argv[2], &t, seed);
        if (r == 0)
            r = trace_write(&t, argv[3]);
    } else if (argc == 4 && !strcmp(argv[1], "run")) {
        uint64_t cap;
        if (tier_parse_size(argv[3], &cap) < 0) {
            fprintf(stderr, "cachesim: bad cache size '%s' (e.g. 40G)\n", argv[3]);
            return 2;
        }
        r = trace_read(argv[2], &t);
        if (r == 0) {
            header();
            r = run(argv[2], &t, cap);
        }
    } else if ((argc == 3 || argc == 4) && !strcmp(argv[1], "mrc")) {
        double rate = argc == 4 ? atof(argv[3]) : 0.01;
        if (!(rate > 0 && rate <= 1)) {
            fprintf(stderr, "cachesim: bad rate '%s' (0 < rate <= 1)\n", argv[3]);
            return 2;
        }
        r = trace_read(argv[2], &t);
        if (r == 0)
            r = mrc_table(argv[2], &t, rate);
    } else if (argc >= 2 && !strcmp(argv[1], "all")) {
        const char *dir = argc > 2 ? argv[2] : ".";
        struct {
            const char *kind;
            uint64_t cap_objs;
        } std[] = {{"zipf", ZIPF_OBJS / 10},
                   {"zipf", ZIPF_OBJS / 100},
                   {"zipfscan", ZIPF_OBJS / 10},
                   {"epoch", EPOCH_OBJS / 2}};
        header();
        for (size_t k = 0; k < sizeof(std) / sizeof(std[0]) && r == 0; k++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s.csv", dir, std[k].kind);
            t.n = 0;
            if ((r = gen(std[k].kind, &t, 1)) < 0 || (r = trace_write(&t, path)) < 0)
                break;
            /* replay from the CSV, exactly as another simulator would see it */
            t.n = 0;
            if ((r = trace_read(path, &t)) < 0)
                break;
            r = run(std[k].kind, &t, std[k].cap_objs * OBJ_BYTES);
        }
    } else {
        fprintf(stderr, "usage: cachesim gen zipf|zipfscan|epoch OUT.csv [seed]\n"
                        "       cachesim run TRACE.csv CACHE_BYTES\n"
                        "       cachesim all [DIR]\n"
                        "       cachesim mrc TRACE.csv [RATE]\n");
        return 2;
    }
    free(t.r);
    if (r < 0) {
        fprintf(stderr, "cachesim: %s\n", strerror(-r));
        return 1;
    }
    return 0;
}
