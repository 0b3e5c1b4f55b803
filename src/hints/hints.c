/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hints.c - epoch-order hints (hints.h): per hint set, a hintwin over the set's order, workers
 * that fetch what enters the window, and Belady release of what the budget cannot keep.
 *
 * STATE (all under h->mu):
 *   set->w        the hintwin: items are the set's distinct files (set->files[item])
 *   set->done[p]  entry p consumed: the reader read the file (its last block) at that entry, or
 *                 passed it (skipped)
 *   set->occ[x]   the first entry of file x not yet consumed (HINTWIN_NONE: none known)
 *   set->cursor   the first entry not consumed; hintwin_seek(cursor) after every advance
 *   file->state   NEW -> QUEUED (entered the window) -> FETCHING (a worker has it) -> HELD
 *                 (every block fetched and hinted in the cache) or FAILED; HELD -> NEW when it is
 *                 released (a Belady victim, or the set is dropped)
 *
 * FILE STATES (struct hfile.state, under h->mu):
 *
 *     NEW --enters the window--> QUEUED --a worker takes it--> FETCHING --all blocks--> HELD
 *      ^                           |                              |  \--stat/fetch error--> FAILED
 *      |                           +--set dropped--> (freed)      |
 *      +---------------------- victim: released, evicted <--------+-- HELD
 *
 * TRANSITION -> FUNCTION
 *   enter the window: queue it (or count a hit if still HELD)   win_enter()
 *   a worker takes the next queued file                         worker_main() -> queue_pop()
 *   stat, fetch every block hinted, mark held                   fetch_file()
 *   over budget: release the farthest-used held file            trim_locked() -> release_all()
 *   the reader read it: consume its entry, move the window      hints_observe() -> consume()
 *   the reader passed entries without reading them              consume() (skip)
 *   set replaced or dropped: release everything                 set_free()
 *
 * INVARIANTS
 *   H1  A file is in the work queue iff it is QUEUED; a worker holds a FETCHING file's set
 *       (set->busy) so the set is not freed under it.
 *   H2  hintwin_held(x) is true iff file x is HELD (its blocks are hinted in the cache).
 *   H3  No lock is held across a stat, a fetch or a release (cache calls do I/O).
 *   H4  After every fetch completion and every seek, held bytes <= budget once trim_locked()
 *       ran, unless every held file is in the window (the window itself is bounded).
 */
#include "hints/hints.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "hints/hintwin.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "common/vec.h"
#include "datasets/dataset.h"
#include "datasets/manifest.h"
#include "tenant/tenant.h"
#include "tiers/backend.h"

enum hstate { F_NEW = 0, F_QUEUED, F_FETCHING, F_HELD, F_FAILED };

struct hfile {
    struct tierd_ns *ns;
    char *key;
    uint64_t hash;
    char etag[BACKEND_ETAG_MAX];
    uint64_t size; /* from its stat; 0 until then (a version's file: from its manifest) */
    /* a dataset version's file (its view path was hinted): etag and size are the manifest's,
     * never a stat's, and every block is fetched pinned to them (and to version_id, owned, in a
     * versioned bucket) */
    bool pinned;
    char *version_id;
    enum hstate state;
    uint32_t item;       /* its id in the set; immutable */
    struct hset *qset;   /* queued: its set */
    struct hfile *qnext; /* work queue link */
};

struct hset {
    struct hset *next;
    char name[HINTS_NAME_MAX];
    uint32_t tenant;
    struct tier_ioctx io; /* the tenant, in its own class */
    struct hintwin *w;
    struct hfile **files; /* by item id; each allocated alone: workers and the queue hold
                           * struct hfile pointers while an append grows this array */
    uint32_t nfiles, capfiles;
    uint32_t *map; /* open addressing over files: item + 1, 0 empty */
    uint32_t mapcap;
    uint64_t *occ; /* by item: first entry not consumed */
    uint8_t *done; /* by entry */
    size_t donecap;
    uint64_t cursor;
    int busy;         /* workers inside fetch_file, readers inside hints_observe */
    uint64_t last_ns; /* last append or consumed read (HINTS_IDLE_NS) */
    bool dropped;
    struct hints_set_stats st;
};

struct hints {
    struct hints_ctx c; /* immutable */
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    struct hset *sets;
    _Atomic int nsets; /* hints_observe's fast path */
    struct hfile *qhead, *qtail;
    bool stop;
    pthread_t *threads;
    int nthreads;
    uint64_t window_files, window_bytes, cache_bytes;
    _Atomic uint64_t manifest_reads; /* hints_manifest_reads */
    /* decoded manifests held by the submissions in flight (estimated: hints_manifest_mem), at most
     * HINTS_MANIFEST_BYTES_ALL */
    _Atomic uint64_t manifest_bytes;
    /* held around one manifest's read, decode and count (vcache_get): a manifest is counted in
     * manifest_bytes only once decoded, so reads in flight together would each pass the budget's
     * check; one at a time, at most one text and its decoding are uncounted. A leaf lock, taken
     * without h->mu. */
    pthread_mutex_t read_mu;
    /* what hint state may cost (hints_ctx; 0: no bound), immutable */
    uint64_t tenant_sets, tenant_entries, tenant_bytes, state_bytes;
    /* hints_set_meta: read-locked around each call of meta */
    pthread_rwlock_t meta_lock;
    hints_meta_fn meta;
    void *meta_ud;
};

void hints_set_meta(struct hints *h, hints_meta_fn fn, void *ud)
{
    if (!h)
        return;
    pthread_rwlock_wrlock(&h->meta_lock);
    h->meta = fn;
    h->meta_ud = ud;
    pthread_rwlock_unlock(&h->meta_lock);
}

/* f's size and etag: from the mount's listing when it has them, else one backend stat. */
static int file_stat(struct hints *h, struct hset *s, struct hfile *f, struct backend_stat *st)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&h->meta_lock);
    if (h->meta)
        rc = h->meta(h->meta_ud, f->ns, f->key, st);
    pthread_rwlock_unlock(&h->meta_lock);
    bool known = rc == 0 && !st->is_dir;
    pthread_mutex_lock(&h->mu);
    if (known)
        s->st.attrs_listed++;
    else
        s->st.attrs_stat++;
    pthread_mutex_unlock(&h->mu);
    if (known)
        return 0;
    memset(st, 0, sizeof(*st));
    return backend_stat(f->ns->be, &s->io, f->key, st);
}

/* ---- sets ---------------------------------------------------------------------------------- */

/* A file's identity in a set: (ns, key), and for a version's file the manifest's ETag too
 * (pin_etag; NULL: the current object), so that two versions of one key are two files. */
static uint64_t key_hash(const struct tierd_ns *ns, const char *key, const char *pin_etag)
{
    uint64_t hsh = 1469598103934665603ULL ^ (uint64_t)(uintptr_t)ns;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        hsh = (hsh ^ *p) * 1099511628211ULL;
    if (pin_etag) {
        hsh = (hsh ^ 0xffu) * 1099511628211ULL; /* no key byte: keys hold no 0xff (UTF-8) */
        for (const unsigned char *p = (const unsigned char *)pin_etag; *p; p++)
            hsh = (hsh ^ *p) * 1099511628211ULL;
    }
    return hsh ? hsh : 1;
}

static int64_t map_find(const struct hset *s, const struct tierd_ns *ns, const char *key,
                        const char *pin_etag)
{
    if (!s->mapcap)
        return -1;
    uint64_t hsh = key_hash(ns, key, pin_etag);
    for (uint32_t i = (uint32_t)hsh & (s->mapcap - 1);; i = (i + 1) & (s->mapcap - 1)) {
        uint32_t v = s->map[i];
        if (!v)
            return -1;
        const struct hfile *f = s->files[v - 1];
        if (f->hash == hsh && f->ns == ns && !strcmp(f->key, key) &&
            (pin_etag ? f->pinned && !strcmp(f->etag, pin_etag) : !f->pinned))
            return v - 1;
    }
}

/* Twice the slots, every file hashed in again: a table rebuilt, not an array grown in place, so
 * not tier_vec_grow's (the old slots' positions mean nothing in the new table). */
static int map_grow(struct hset *s)
{
    uint32_t ncap = s->mapcap ? s->mapcap * 2 : 1024;
    uint32_t *nm = calloc(ncap, sizeof(*nm));
    if (!nm)
        return -ENOMEM;
    for (uint32_t x = 0; x < s->nfiles; x++) {
        uint32_t i = (uint32_t)s->files[x]->hash & (ncap - 1);
        while (nm[i])
            i = (i + 1) & (ncap - 1);
        nm[i] = x + 1;
    }
    free(s->map);
    s->map = nm;
    s->mapcap = ncap;
    return 0;
}

/* A file's pin to a dataset version (resolve_version), or none. */
struct hpin {
    bool on;
    char etag[BACKEND_ETAG_MAX];
    uint64_t size;
    char *version_id; /* owned */
};

/* The item of (ns, key[, pin's ETag]), added if new (key and pin->version_id are taken over,
 * or freed when known). -1: no memory. */
static int64_t file_item(struct hset *s, struct tierd_ns *ns, char *key, struct hpin *pin)
{
    const char *pe = pin->on ? pin->etag : NULL;
    uint64_t hsh = key_hash(ns, key, pe);
    int64_t x = map_find(s, ns, key, pe);
    if (x >= 0) {
        free(key);
        free(pin->version_id);
        pin->version_id = NULL;
        return x;
    }
    if ((uint64_t)(s->nfiles + 1) * 2 > s->mapcap && map_grow(s) < 0)
        goto nomem;
    if (s->nfiles == s->capfiles) {
        uint32_t ncap = s->capfiles ? s->capfiles * 2 : 1024;
        struct hfile **nf = realloc(s->files, ncap * sizeof(*nf));
        if (!nf)
            goto nomem;
        s->files = nf;
        uint64_t *no = realloc(s->occ, ncap * sizeof(*no));
        if (!no)
            goto nomem;
        s->occ = no;
        s->capfiles = ncap;
    }
    struct hfile *nfp = calloc(1, sizeof(*nfp));
    if (!nfp)
        goto nomem;
    x = s->nfiles++;
    *nfp = (struct hfile){.ns = ns, .key = key, .hash = hsh, .item = (uint32_t)x};
    if (pin->on) {
        nfp->pinned = true;
        tier_strlcpy(nfp->etag, pin->etag, sizeof(nfp->etag));
        nfp->size = pin->size;
        nfp->version_id = pin->version_id;
        pin->version_id = NULL;
    }
    s->files[x] = nfp;
    s->occ[x] = HINTWIN_NONE;
    uint32_t i = (uint32_t)hsh & (s->mapcap - 1);
    while (s->map[i])
        i = (i + 1) & (s->mapcap - 1);
    s->map[i] = (uint32_t)x + 1;
    return x;
nomem:
    free(key);
    free(pin->version_id);
    pin->version_id = NULL;
    return -1;
}

/* Names are per tenant: one tenant's set never shadows another's. */
static struct hset *set_find(struct hints *h, uint32_t tenant, const char *name)
{
    for (struct hset *s = h->sets; s; s = s->next)
        if (s->tenant == tenant && !strcmp(s->name, name))
            return s;
    return NULL;
}

/* h->mu held: the bytes tenant's sets hold together (the budget is the tenant's). */
static uint64_t tenant_held(const struct hints *h, uint32_t tenant)
{
    uint64_t sum = 0;
    for (const struct hset *s = h->sets; s; s = s->next)
        if (s->tenant == tenant)
            sum += hintwin_held_bytes(s->w);
    return sum;
}

static struct cache_obj file_obj(const struct hfile *f)
{
    return (struct cache_obj){
        .be = f->ns->be, .key = f->key, .etag = f->etag, .size_bytes = f->size};
}

/* ---- the window ------------------------------------------------------------------------------ */

struct cb {
    struct hints *h;
    struct hset *s;
};

/* hintwin enter callback (h->mu held): queue the file for a worker, unless it is still held. */
static void win_enter(void *ud, uint32_t item, uint64_t pos)
{
    (void)pos;
    struct cb *cb = ud;
    struct hfile *f = cb->s->files[item];
    if (f->state == F_HELD) {
        cb->s->st.already_held++;
        return;
    }
    if (f->state != F_NEW && f->state != F_FAILED)
        return; /* queued or being fetched already */
    f->state = F_QUEUED;
    f->qset = cb->s;
    f->qnext = NULL;
    if (cb->h->qtail)
        cb->h->qtail->qnext = f;
    else
        cb->h->qhead = f;
    cb->h->qtail = f;
    pthread_cond_signal(&cb->h->work);
}

/* One file to release once h->mu is dropped: its own copy of the identity (the set may be
 * freed meanwhile). */
struct rel {
    const struct backend *be;
    char *key;
    char etag[BACKEND_ETAG_MAX];
    uint64_t size;
};

/* h->mu held: while the set's tenant holds more than its budget over all its sets (or, once the
 * reader has consumed the whole known order, anything: nothing held has a known next use), take
 * this set's farthest-used held file out of the hold (state NEW, hintwin not held) and put it in
 * out[] for the caller to release after unlocking. Returns how many. */
static size_t trim_locked(struct hints *h, struct hset *s, uint64_t need, struct rel *out,
                          size_t max)
{
    size_t n = 0;
    uint32_t v;
    bool all = s->cursor >= hintwin_len(s->w);
    uint64_t held = tenant_held(h, s->tenant);
    while (n < max && (all ? hintwin_held_bytes(s->w) > 0 : held + need > s->st.budget) &&
           hintwin_victim(s->w, &v)) {
        held -= s->files[v]->size;
        struct hfile *f = s->files[v];
        char *k = strdup(f->key);
        if (!k)
            break; /* released at the next trim */
        hintwin_held(s->w, v, false);
        f->state = F_NEW;
        out[n].be = f->ns->be;
        out[n].key = k;
        tier_strlcpy(out[n].etag, f->etag, sizeof(out[n].etag));
        out[n].size = f->size;
        n++;
        s->st.released++;
    }
    return n;
}

/* The set's budget: [cache] hint_cache_size, no more than the cache's hint share nor its
 * tenant's quota. */
static uint64_t set_budget(struct hints *h, const struct hset *s)
{
    uint64_t b = h->cache_bytes;
    uint64_t share = h->c.cache ? cache_hint_share(h->c.cache) : 0;
    if (share < b)
        b = share;
    struct cache_tenant_stats ts;
    if (h->c.cache && cache_tenant_stats_get(h->c.cache, s->tenant, &ts) == 0 && ts.quota &&
        ts.quota < b)
        b = ts.quota;
    return b;
}

/* No lock held: release the files of rel[], evicting their blocks (Belady victims). */
static void release_all(struct hints *h, struct rel *rel, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct cache_obj obj = {.be = (struct backend *)(uintptr_t)rel[i].be,
                                .key = rel[i].key,
                                .etag = rel[i].etag,
                                .size_bytes = rel[i].size};
        cache_hint_release(h->c.cache, &obj, true);
        free(rel[i].key);
    }
}

/* ---- workers ------------------------------------------------------------------------------- */

static struct hfile *queue_pop(struct hints *h)
{
    struct hfile *f = h->qhead;
    if (f) {
        h->qhead = f->qnext;
        if (!h->qhead)
            h->qtail = NULL;
        f->qnext = NULL;
    }
    return f;
}

#define TRIM_BATCH 32

/* No lock held; s->busy taken for f. Stat f, fetch and hint every block. */
static void fetch_file(struct hints *h, struct hset *s, struct hfile *f)
{
    struct backend_stat st;
    memset(&st, 0, sizeof(st));
    tier_err_clear();
    int rc = 0;
    if (f->pinned) { /* immutable: set at submission, never changed */
        tier_strlcpy(st.etag, f->etag, sizeof(st.etag));
        st.size_bytes = f->size;
    } else {
        rc = file_stat(h, s, f, &st);
    }
    if (rc == 0 && st.is_dir)
        rc = -EISDIR;
    char err[160] = "";
    if (rc < 0)
        snprintf(err, sizeof(err), "%s: %s", f->key,
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    struct cache_obj obj = {.be = f->ns->be,
                            .key = f->key,
                            .etag = st.etag,
                            .size_bytes = st.size_bytes,
                            .version_id = f->version_id};
    uint64_t bs = cache_block_size(h->c.cache);
    uint64_t held_blocks = 0; /* holds this call took, blocks 0 .. held_blocks - 1 */
    if (rc == 0) {
        /* make room first: the file enters the window, so its next use is nearer than that of
         * any held file outside it (Belady: those go for it) */
        struct rel pre[TRIM_BATCH];
        pthread_mutex_lock(&h->mu);
        s->st.budget = set_budget(h, s);
        size_t npre = trim_locked(h, s, st.size_bytes, pre, TRIM_BATCH);
        pthread_mutex_unlock(&h->mu);
        release_all(h, pre, npre);
    }
    uint64_t nb = rc == 0 ? (st.size_bytes + bs - 1) / bs : 0;
    for (uint64_t i = 0; rc == 0 && i < nb; i++) {
        pthread_mutex_lock(&h->mu);
        bool dropped = s->dropped || h->stop;
        pthread_mutex_unlock(&h->mu);
        if (dropped) {
            rc = -ECANCELED;
            break;
        }
        rc = cache_fetch_block_hinted(h->c.cache, &s->io, &obj, i);
        if (rc == 0)
            held_blocks++;
        /* the share can be full for a moment: another worker has taken its victims out of the
         * set's hold and not yet out of the cache (release_all runs after h->mu is dropped);
         * make room again and retry a few times before calling the share full */
        for (int again = 0; rc == -EDQUOT && again < 4; again++) {
            struct rel more[TRIM_BATCH];
            pthread_mutex_lock(&h->mu);
            size_t nm = trim_locked(h, s, st.size_bytes, more, TRIM_BATCH);
            pthread_mutex_unlock(&h->mu);
            release_all(h, more, nm);
            if (!nm)
                sched_yield(); /* let the other worker finish its release */
            rc = cache_fetch_block_hinted(h->c.cache, &s->io, &obj, i);
            if (rc == 0)
                held_blocks++;
        }
        if (rc == -EDQUOT)
            snprintf(err, sizeof(err),
                     "%s: the hot tier's share for hints is full (other hint sets hold it); "
                     "read without the hint",
                     f->key);
        else if (f->pinned && (rc == -ESTALE || rc == -ENOENT))
            snprintf(err, sizeof(err),
                     "%s: %s in the backend since its dataset version was committed, and %s",
                     f->key, rc == -ESTALE ? "changed" : "deleted",
                     f->version_id ? "its recorded version is gone too"
                                   : "the commit recorded no version id");
        else if (rc < 0)
            snprintf(err, sizeof(err), "%s block %" PRIu64 ": %s", f->key, i, strerror(-rc));
        if (rc < 0)
            break;
    }
    /* -EEXIST: another tenant holds the block for its own hint; this set reads it like any
     * cached block and takes no hold (it tries again when the file next enters its window) */
    if (rc == -EEXIST)
        rc = -ECANCELED;
    struct rel rel[TRIM_BATCH];
    size_t nrel = 0;
    pthread_mutex_lock(&h->mu);
    tier_strlcpy(f->etag, st.etag, sizeof(f->etag));
    f->size = st.size_bytes;
    bool dropped = s->dropped;
    if (rc == 0 && !dropped) {
        f->state = F_HELD;
        uint32_t item = f->item;
        hintwin_set_size(s->w, item, st.size_bytes);
        hintwin_held(s->w, item, true);
        s->st.fetched_files++;
        s->st.fetched_bytes += st.size_bytes;
        s->st.budget = set_budget(h, s);
        nrel = trim_locked(h, s, 0, rel, TRIM_BATCH);
    } else {
        f->state = dropped || rc == -ECANCELED ? F_NEW : F_FAILED;
        if (rc < 0 && rc != -ECANCELED) {
            s->st.errors++;
            if (!s->st.first_error[0])
                tier_strlcpy(s->st.first_error, err, sizeof(s->st.first_error));
        }
    }
    pthread_mutex_unlock(&h->mu);
    if (rc < 0 || dropped) {
        /* exactly the holds this call took: other sets may hold the rest of the file */
        uint64_t held = held_blocks * bs;
        obj.size_bytes = held < obj.size_bytes ? held : obj.size_bytes;
        if (held_blocks)
            cache_hint_release(h->c.cache, &obj, false);
    }
    release_all(h, rel, nrel);
}

static void set_drop_locked(struct hints *h, struct hset *s);

/* h->mu held: drop one set nobody hinted into or read through for HINTS_IDLE_NS (a job that
 * ended without dropping its set must not hold the hot tier). Returns whether it dropped one. */
static bool expire_idle_locked(struct hints *h)
{
    uint64_t now = tier_now_mono_ns();
    for (struct hset *s = h->sets; s; s = s->next)
        if (now - s->last_ns > HINTS_IDLE_NS) {
            log_info("hints: set %s of tenant %u idle for %llu s: dropped", s->name, s->tenant,
                     (unsigned long long)((now - s->last_ns) / TIER_NS_PER_SEC));
            set_drop_locked(h, s);
            return true;
        }
    return false;
}

static void *worker_main(void *arg)
{
    struct hints *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->qhead && !h->stop) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += 1;
            if (pthread_cond_timedwait(&h->work, &h->mu, &ts) == ETIMEDOUT)
                while (expire_idle_locked(h))
                    ;
        }
        if (h->stop)
            break;
        struct hfile *f = queue_pop(h);
        struct hset *s = f->qset;
        f->state = F_FETCHING;
        s->busy++;
        pthread_mutex_unlock(&h->mu);
        fetch_file(h, s, f);
        pthread_mutex_lock(&h->mu);
        s->busy--;
        pthread_cond_broadcast(&h->idle);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- the reader -------------------------------------------------------------------------------
 */

/* h->mu held: entry p of s was read (or passed); advance the cursor over consumed entries,
 * seek and refill the window; victims go into rel[] (caller releases them unlocked). */
static size_t advance(struct hints *h, struct hset *s, struct rel *rel, size_t max)
{
    uint64_t len = hintwin_len(s->w);
    while (s->cursor < len && s->done[s->cursor])
        s->cursor++;
    struct cb cb = {h, s};
    hintwin_seek(s->w, s->cursor, NULL, NULL);
    hintwin_fill(s->w, win_enter, &cb);
    s->st.cursor = s->cursor;
    return trim_locked(h, s, 0, rel, max);
}

/* h->mu held: the reader read file x; consume its first unconsumed entry. An entry far ahead of
 * the cursor means the reader passed entries it will not read: those are marked skipped, so a
 * list the job does not follow exactly cannot stall the window. */
static size_t consume(struct hints *h, struct hset *s, uint32_t x, struct rel *rel, size_t max)
{
    uint64_t p = s->occ[x];
    if (p == HINTWIN_NONE)
        return 0; /* read more often than hinted */
    s->done[p] = 1;
    s->occ[x] = hintwin_next_of(s->w, p);
    /* the reader may run ahead of the cursor by the window's length (parallel loader workers);
     * past that, entries left behind are taken as skipped */
    uint64_t lag = h->window_files ? h->window_files : 256;
    if (p > s->cursor + lag) {
        uint64_t to = p - lag / 2;
        for (uint64_t q = s->cursor; q < to; q++) {
            if (!s->done[q]) {
                s->done[q] = 1;
                s->st.skipped++;
                uint32_t y = hintwin_item_at(s->w, q);
                if (s->occ[y] == q)
                    s->occ[y] = hintwin_next_of(s->w, q);
            }
        }
    }
    return advance(h, s, rel, max);
}

void hints_observe(struct hints *h, uint32_t tenant, const struct backend *be, const char *key,
                   const char *etag, uint64_t off, size_t len, uint64_t size, _Atomic bool *seen)
{
    if (!h || atomic_load_explicit(&h->nsets, memory_order_relaxed) == 0)
        return;
    if (off + len < size)
        return; /* not at the file's end yet */
    if (seen && atomic_exchange(seen, true))
        return; /* one consumption per open, however many reads reach the end */
    struct hset *mine[HINTS_SETS_MAX];
    size_t nm = 0;
    pthread_mutex_lock(&h->mu);
    for (struct hset *s = h->sets; s && nm < HINTS_SETS_MAX; s = s->next)
        if (s->tenant == tenant && !s->dropped) {
            s->busy++; /* not freed while this read moves it on */
            mine[nm++] = s;
        }
    for (size_t k = 0; k < nm; k++) {
        struct hset *s = mine[k];
        struct rel rel[TRIM_BATCH];
        size_t nrel = 0;
        for (size_t i = 0; !s->dropped && i < h->c.nns; i++) {
            struct tierd_ns *ns = &h->c.ns[i];
            if (ns->be != be)
                continue;
            /* the current object's entry, else a version's of the same bytes (the handle's
             * ETag: a version's view handle has the manifest's) */
            int64_t x = map_find(s, ns, key, NULL);
            if (x < 0 && etag && *etag)
                x = map_find(s, ns, key, etag);
            if (x >= 0) {
                s->last_ns = tier_now_mono_ns();
                nrel = consume(h, s, (uint32_t)x, rel, TRIM_BATCH);
                break;
            }
        }
        if (nrel) {
            pthread_mutex_unlock(&h->mu);
            release_all(h, rel, nrel);
            pthread_mutex_lock(&h->mu);
        }
    }
    for (size_t k = 0; k < nm; k++)
        mine[k]->busy--;
    if (nm)
        pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->mu);
}

/* ---- submit / cancel / list ---------------------------------------------------------------- */

/* h->mu held, no worker inside s (busy 0): free s; its held files go into the caller's release
 * list as objects with their own copies... the keys are freed here, so release first. */
static void set_release_held(struct hints *h, struct hset *s)
{
    for (uint32_t x = 0; x < s->nfiles; x++) {
        struct hfile *f = s->files[x];
        if (f->state == F_HELD) {
            struct cache_obj obj = file_obj(f);
            cache_hint_release(h->c.cache, &obj, false); /* to the levels' policies */
            f->state = F_NEW;
        }
    }
}

static void set_free(struct hset *s)
{
    if (!s)
        return;
    for (uint32_t x = 0; x < s->nfiles; x++) {
        free(s->files[x]->key);
        free(s->files[x]->version_id);
        free(s->files[x]);
    }
    free(s->files);
    free(s->map);
    free(s->occ);
    free(s->done);
    hintwin_free(s->w);
    free(s);
}

/* h->mu held: take s out of the list and the queue (h->mu stays held); set_reap_locked then
 * frees it. */
static void set_unlink_locked(struct hints *h, struct hset *s)
{
    s->dropped = true;
    for (struct hset **pp = &h->sets; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            atomic_fetch_sub(&h->nsets, 1);
            break;
        }
    struct hfile **pp = &h->qhead, *prev = NULL;
    while (*pp) {
        if ((*pp)->qset == s) {
            (*pp)->state = F_NEW;
            *pp = (*pp)->qnext;
        } else {
            prev = *pp;
            pp = &(*pp)->qnext;
        }
    }
    h->qtail = prev;
}

/* Test builds (TIERD_TEST_FAULT_FILE): while the file FAULT.drop.NAME says "hint drop pause",
 * hold the drop of set NAME (with h->mu not held), FAULT.drop.NAME.paused existing meanwhile; at
 * most 30 s. */
static void test_pause(const char *fault_file, const char *name)
{
    char ff[PATH_MAX];
    snprintf(ff, sizeof(ff), "%s.drop.%s", fault_file, name);
    tier_test_pause(ff, "hint drop pause");
}

/* h->mu held: wait for the workers of s (unlinked), release its held blocks (h->mu dropped
 * meanwhile) and free it. */
static void set_reap_locked(struct hints *h, struct hset *s)
{
    while (s->busy)
        pthread_cond_wait(&h->idle, &h->mu);
    pthread_mutex_unlock(&h->mu);
    if (h->c.test_fault_file) /* test builds: hold a drop here (test_hintlimits_fuse) */
        test_pause(h->c.test_fault_file, s->name);
    set_release_held(h, s); /* nothing else reaches s now */
    set_free(s);
    pthread_mutex_lock(&h->mu);
}

/* h->mu held: take s out, wait for its workers, release its held blocks (h->mu dropped
 * meanwhile) and free it. */
static void set_drop_locked(struct hints *h, struct hset *s)
{
    set_unlink_locked(h, s);
    set_reap_locked(h, s);
}

bool hints_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n < HINTS_NAME_MAX && tier_name_chars(name, n);
}

/* The manifests of the versions a submission names, each read once per submission whatever
 * the order of its paths (train and val of a few versions, shuffled together): all of them are
 * kept decoded until the submission is resolved, within HINTS_REQ_VERSIONS versions and
 * HINTS_REQ_MANIFEST_BYTES of decoded manifests (past either the submission is refused: its
 * work and memory are bounded). Per submission: a version deleted and committed again under its
 * name is read afresh. */
struct vcache {
    struct vent {
        char *tree;
        char name[MANIFEST_NAME_MAX];
        struct manifest m;
    } v[HINTS_REQ_VERSIONS];
    unsigned n, last; /* versions read; the last one found (paths come in runs) */
    uint64_t bytes;   /* decoded manifests (hints_manifest_mem); in h->manifest_bytes */
    char why[320];    /* a message for *why */
};

static void vcache_fini(struct hints *h, struct vcache *vc)
{
    atomic_fetch_sub(&h->manifest_bytes, vc->bytes);
    for (unsigned i = 0; i < vc->n; i++) {
        free(vc->v[i].tree);
        manifest_fini(&vc->v[i].m);
    }
    memset(vc, 0, sizeof(*vc));
}

#define ALLOC_OVERHEAD 16 /* what malloc adds to an allocation, about */

static uint64_t str_mem(const char *p)
{
    return p ? strlen(p) + 1 + ALLOC_OVERHEAD : 0;
}

uint64_t hints_manifest_mem(const struct manifest *m)
{
    uint64_t b = sizeof(*m) + (uint64_t)m->cap * sizeof(*m->files) + ALLOC_OVERHEAD;
    b += str_mem(m->name) + str_mem(m->path) + str_mem(m->ns) + str_mem(m->backend) +
         str_mem(m->prefix) + str_mem(m->commit_id);
    for (size_t i = 0; i < m->n; i++)
        b += str_mem(m->files[i].key) + str_mem(m->files[i].etag) + str_mem(m->files[i].version_id);
    return b;
}

static bool vent_is(const struct vent *e, const char *tree, const char *name)
{
    return !strcmp(e->tree, tree) && !strcmp(e->name, name);
}

static int vcache_read_locked(struct hints *h, struct vcache *vc, char *tree, const char *name,
                              const struct manifest **out);

/* The manifest of tree@name (takes tree), read when vc does not have it (one read at a time in
 * tierd: h->read_mu). 0, or -errno with vc->why. */
static int vcache_get(struct hints *h, struct vcache *vc, char *tree, const char *name,
                      const struct manifest **out)
{
    unsigned hit = vc->n;
    if (vc->n && vent_is(&vc->v[vc->last], tree, name))
        hit = vc->last;
    for (unsigned i = 0; hit == vc->n && i < vc->n; i++)
        if (vent_is(&vc->v[i], tree, name))
            hit = i;
    if (hit < vc->n) {
        free(tree);
        vc->last = hit;
        *out = &vc->v[hit].m;
        return 0;
    }
    if (vc->n == HINTS_REQ_VERSIONS) {
        snprintf(vc->why, sizeof(vc->why),
                 "%s@%s: more than %d dataset versions in one submission; split it by version "
                 "(append the rest)",
                 tree, name, HINTS_REQ_VERSIONS);
        free(tree);
        return -E2BIG;
    }
    pthread_mutex_lock(&h->read_mu);
    int rc = vcache_read_locked(h, vc, tree, name, out);
    pthread_mutex_unlock(&h->read_mu);
    return rc;
}

/* h->read_mu held: read, decode and count the manifest of tree@name into vc (takes tree). */
static int vcache_read_locked(struct hints *h, struct vcache *vc, char *tree, const char *name,
                              const struct manifest **out)
{
    if (atomic_load(&h->manifest_bytes) >= HINTS_MANIFEST_BYTES_ALL) {
        snprintf(vc->why, sizeof(vc->why),
                 "%s@%s: the submissions in flight hold %llu MiB of decoded manifests already; "
                 "try again when they are done",
                 tree, name, (unsigned long long)(HINTS_MANIFEST_BYTES_ALL >> 20));
        free(tree);
        return -EBUSY;
    }
    struct vent *e = &vc->v[vc->n];
    memset(&e->m, 0, sizeof(e->m));
    tier_err_clear();
    atomic_fetch_add(&h->manifest_reads, 1);
    /* a text over what is left of the submission's bound is refused unread (its size first) */
    int rc = h->c.ops.manifest(h->c.ops.ud, tree, name,
                               (size_t)(HINTS_REQ_MANIFEST_BYTES - vc->bytes), &e->m);
    if (rc) {
        if (rc == -ENOENT && !*tier_err_msg())
            snprintf(vc->why, sizeof(vc->why), "%s has no version %s", tree, name);
        else if (rc == -E2BIG)
            snprintf(vc->why, sizeof(vc->why),
                     "%s@%s: its manifest's text alone is over what is left of the %llu MiB of "
                     "manifests one submission may decode; split it by version (append the rest)",
                     tree, name, (unsigned long long)(HINTS_REQ_MANIFEST_BYTES >> 20));
        else
            snprintf(vc->why, sizeof(vc->why), "%s",
                     *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        free(tree);
        return rc;
    }
    e->tree = tree;
    tier_strlcpy(e->name, name, sizeof(e->name));
    vc->last = vc->n++;
    uint64_t mem = hints_manifest_mem(&e->m);
    vc->bytes += mem;
    uint64_t all = atomic_fetch_add(&h->manifest_bytes, mem) + mem;
    if (vc->bytes > HINTS_REQ_MANIFEST_BYTES) {
        snprintf(vc->why, sizeof(vc->why),
                 "%s@%s: the manifests of the versions this submission names take more than "
                 "%llu MiB together; split it by version (append the rest)",
                 tree, name, (unsigned long long)(HINTS_REQ_MANIFEST_BYTES >> 20));
        return -E2BIG;
    }
    if (all > HINTS_MANIFEST_BYTES_ALL) {
        snprintf(vc->why, sizeof(vc->why),
                 "%s@%s: the submissions in flight would hold more than %llu MiB of decoded "
                 "manifests; try again when they are done",
                 tree, name, (unsigned long long)(HINTS_MANIFEST_BYTES_ALL >> 20));
        return -EBUSY;
    }
    *out = &e->m;
    return 0;
}

/* A view path (<mount>/.tierd/datasets/TREE@NAME/FILE): the namespace and object key of FILE,
 * pinned to the manifest's ETag, size and version id. vc NULL: check the form and the namespace
 * only (hints_check_path: a writer's early warning, no manifest read). Takes tree. */
static int resolve_version(struct hints *h, char *tree, const char *name, const char *rest,
                           struct tierd_ns **nsp, char **keyp, struct hpin *pin, struct vcache *vc,
                           const char **why)
{
    struct tierd_ns *ns = NULL;
    char *tkey = NULL;
    bool is_root = false;
    int rc = h->c.ops.resolve(h->c.ops.ud, tree, &ns, &tkey, &is_root);
    free(tkey);
    if (rc || !rest[0] || !rest[1]) {
        free(tree);
        *why = rc == -ENOMEM   ? "out of memory"
               : rc == -ENOENT ? "a version of a tree that is under no namespace of the mount"
               : rc            ? "a version of a tree that is not a valid mount path"
                               : "a version's root, not a file of it (hint its files)";
        return rc == -ENOMEM ? rc : -EINVAL;
    }
    const char *file = rest + 1;
    if (!vc) {
        free(tree);
        *nsp = ns;
        *keyp = strdup(file);
        return *keyp ? 0 : -ENOMEM;
    }
    const struct manifest *m = NULL;
    rc = vcache_get(h, vc, tree, name, &m);
    if (rc) {
        *why = vc->why;
        return rc == -ENOMEM || rc == -E2BIG || rc == -EBUSY ? rc : -EINVAL;
    }
    size_t lo = 0;
    rc = manifest_find(m, file, &lo);
    if (rc) {
        if (rc == -ENOMEM) {
            *why = "out of memory";
            return rc;
        }
        snprintf(vc->why, sizeof(vc->why), "%s in version %s (hint the version's files)",
                 rc == 1 ? "a directory" : "no such file", name);
        *why = vc->why;
        return -EINVAL;
    }
    const struct manifest_file *mf = &m->files[lo];
    *why = "out of memory"; /* the only failure left */
    if (asprintf(keyp, "%s%s", m->prefix, mf->key) < 0)
        return -ENOMEM;
    pin->on = true;
    tier_strlcpy(pin->etag, mf->etag, sizeof(pin->etag));
    pin->size = mf->size;
    pin->version_id = NULL;
    if (mf->version_id && !(pin->version_id = strdup(mf->version_id))) {
        free(*keyp);
        *keyp = NULL;
        return -ENOMEM;
    }
    *nsp = ns;
    return 0;
}

/* Resolve path into (ns, key) as a hinted file (a version's file: with its pin, reading
 * manifests through vc); on error *why says what is wrong with it. */
static int resolve_one(struct hints *h, const char *path, struct tierd_ns **nsp, char **keyp,
                       struct hpin *pin, struct vcache *vc, const char **why)
{
    bool is_root = false;
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    memset(pin, 0, sizeof(*pin));
    char *tree = NULL, name[MANIFEST_NAME_MAX];
    const char *rest = NULL;
    int vr = path ? dataset_view_path(path, &tree, name, &rest) : -ENOENT;
    if (vr == 0)
        return resolve_version(h, tree, name, rest, nsp, keyp, pin, vc, why);
    if (vr == 1) {
        *why = "a directory of the versions' view, not a file of a version";
        return -EINVAL;
    }
    if (vr == -ENOMEM) {
        *why = "out of memory";
        return -ENOMEM;
    }
    int rc = path ? h->c.ops.resolve(h->c.ops.ud, path, &ns, &key, &is_root) : -EINVAL;
    if (rc == 0 && is_root)
        rc = -EISDIR;
    if (rc == 0 && ns->conf->mode != TIERD_NS_READ_CACHE)
        rc = -EROFS;
    if (rc) {
        free(key);
        *why = rc == -ENOENT   ? "not under any namespace of the mount"
               : rc == -EISDIR ? "a namespace root, not a file"
               : rc == -EROFS  ? "not in a read-cache namespace (hints are for datasets)"
                               : "not a valid mount path";
        return rc == -ENOMEM ? rc : -EINVAL;
    }
    *nsp = ns;
    *keyp = key;
    return 0;
}

int hints_check_path(struct hints *h, const char *path)
{
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    const char *why = "";
    struct hpin pin;
    int rc = resolve_one(h, path, &ns, &key, &pin, NULL, &why);
    if (rc)
        tier_err_set("'%.200s': %s", path ? path : "(null)", why);
    free(key);
    return rc;
}

/* Resolve paths into (ns, key, pin) triples, all or nothing. */
static int resolve_all(struct hints *h, const char *const *paths, size_t n, struct tierd_ns **nss,
                       char **keys, struct hpin *pins)
{
    struct vcache vc;
    memset(&vc, 0, sizeof(vc));
    for (size_t i = 0; i < n; i++) {
        const char *why = "";
        int rc = resolve_one(h, paths[i], &nss[i], &keys[i], &pins[i], &vc, &why);
        if (rc) {
            tier_err_set("paths[%zu] '%.200s': %s", i, paths[i] ? paths[i] : "(null)", why);
            for (size_t k = 0; k < i; k++) {
                free(keys[k]);
                keys[k] = NULL;
                free(pins[k].version_id);
                pins[k].version_id = NULL;
            }
            vcache_fini(h, &vc);
            return rc;
        }
    }
    vcache_fini(h, &vc);
    return 0;
}

/* ---- limits -------------------------------------------------------------------------------- */

/* Memory a set's state takes, estimated (hints_set_stats.bytes): per entry its consumed flag and
 * the hintwin's order (seq, nxt); per file its struct, its key (and version id), its map slots,
 * occ and the hintwin's per-item slots and heap entry; per set its struct and first arrays. */
#define ENTRY_BYTES 13u
#define FILE_BYTES (sizeof(struct hfile) + 80u)
#define SET_BYTES (sizeof(struct hset) + 4096u)

static uint64_t file_cost(const char *key, const struct hpin *pin)
{
    return FILE_BYTES + strlen(key) + 1 + (pin->version_id ? strlen(pin->version_id) + 1 : 0);
}

/* isnew[i]: path i is the first of its file in the submission (an earlier path of the same
 * (ns, key, pin) makes it not): what a new set's files will be. 0 or -ENOMEM. */
static int batch_firsts(struct tierd_ns *const *nss, char *const *keys, const struct hpin *pins,
                        size_t n, uint8_t *isnew)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    uint32_t *t = calloc(cap, sizeof(*t)); /* i + 1: n <= HINTS_ENTRIES_MAX */
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *pe = pins[i].on ? pins[i].etag : NULL;
        size_t j = (size_t)key_hash(nss[i], keys[i], pe) & (cap - 1);
        isnew[i] = 1;
        for (; t[j]; j = (j + 1) & (cap - 1)) {
            size_t k = t[j] - 1;
            if (nss[k] == nss[i] && !strcmp(keys[k], keys[i]) && pins[k].on == pins[i].on &&
                (!pe || !strcmp(pins[k].etag, pe))) {
                isnew[i] = 0;
                break;
            }
        }
        if (isnew[i])
            t[j] = (uint32_t)i + 1;
    }
    free(t);
    return 0;
}

/* h->mu held: may tenant's sets (but except, a set being replaced) grow by a set (fresh), n
 * entries and more bytes? 0, or -EDQUOT (a tenant's cap: admin false only) or -ENOSPC (the
 * bytes of all hint state) with tier_err_set. */
static int limits_check_locked(struct hints *h, uint32_t tenant, const struct hset *except,
                               bool fresh, uint64_t n, uint64_t more, bool admin)
{
    uint64_t sets = 0, entries = 0, bytes = 0, all = 0;
    for (const struct hset *s = h->sets; s; s = s->next) {
        if (s == except)
            continue;
        all += s->st.bytes;
        if (s->tenant == tenant) {
            sets++;
            entries += hintwin_len(s->w);
            bytes += s->st.bytes;
        }
    }
    const char *tn = h->c.tenants ? tenant_name(h->c.tenants, tenant) : "default";
    if (!admin && h->tenant_sets && fresh && sets + 1 > h->tenant_sets) {
        tier_err_set("tenant %s has %" PRIu64 " hint sets: at most %" PRIu64 " per tenant "
                     "([cache] hint_tenant_sets); drop one (DELETE /v1/hints/NAME, or rm "
                     "<mount>/.tierd/hints/NAME) or replace one",
                     tn, sets, h->tenant_sets);
        return -EDQUOT;
    }
    if (!admin && h->tenant_entries && entries + n > h->tenant_entries) {
        tier_err_set("tenant %s's hint sets would have %" PRIu64 " entries: at most %" PRIu64
                     " per tenant ([cache] hint_tenant_entries); drop or replace a set first",
                     tn, entries + n, h->tenant_entries);
        return -EDQUOT;
    }
    if (!admin && h->tenant_bytes && bytes + more > h->tenant_bytes) {
        tier_err_set("tenant %s's hint sets would take %" PRIu64 " KiB of memory: at most %" PRIu64
                     " KiB per tenant ([cache] hint_tenant_size); drop or replace a set first",
                     tn, (bytes + more) >> 10, h->tenant_bytes >> 10);
        return -EDQUOT;
    }
    if (h->state_bytes && all + more > h->state_bytes) {
        tier_err_set("all hint sets would take %" PRIu64 " KiB of memory: at most %" PRIu64
                     " KiB ([cache] hint_state_size); drop a set first",
                     (all + more) >> 10, h->state_bytes >> 10);
        return -ENOSPC;
    }
    return 0;
}

uint64_t hints_manifest_reads(struct hints *h)
{
    return h ? atomic_load(&h->manifest_reads) : 0;
}

static int done_grow(struct hset *s, uint64_t need)
{
    uint8_t *nd = tier_vec_grow(s->done, &s->donecap, need, 1, 4096);
    if (!nd)
        return -ENOMEM;
    s->done = nd;
    return 0;
}

int hints_submit(struct hints *h, const char *name, uint32_t tenant, const char *const *paths,
                 size_t n, bool append, bool admin)
{
    if (!hints_name_ok(name)) {
        tier_err_set("hint name '%.80s' is not allowed (1 to %d letters, digits, '.', '_', '-')",
                     name ? name : "", HINTS_NAME_MAX - 1);
        return -EINVAL;
    }
    if (n > HINTS_ENTRIES_MAX) {
        tier_err_set("%zu entries: at most %d per hint set", n, HINTS_ENTRIES_MAX);
        return -E2BIG;
    }
    /* the bounds known from the count alone first: before the paths cost memory or reads */
    pthread_mutex_lock(&h->mu);
    struct hset *s = set_find(h, tenant, name);
    bool grows = s && append;
    int rc = limits_check_locked(h, tenant, grows ? NULL : s, !grows, n,
                                 (uint64_t)n * ENTRY_BYTES + (grows ? 0 : SET_BYTES), admin);
    pthread_mutex_unlock(&h->mu);
    if (rc)
        return rc;
    struct tierd_ns **nss = calloc(n ? n : 1, sizeof(*nss));
    char **keys = calloc(n ? n : 1, sizeof(*keys));
    struct hpin *pins = calloc(n ? n : 1, sizeof(*pins));
    uint8_t *isnew = calloc(n ? n : 1, 1);
    rc = nss && keys && pins && isnew ? resolve_all(h, paths, n, nss, keys, pins) : -ENOMEM;
    if (rc) {
        free(nss);
        free(keys);
        free(pins);
        free(isnew);
        return rc;
    }
    rc = batch_firsts(nss, keys, pins, n, isnew);
    if (rc)
        goto out;
    /* the exact bounds: what the set's new files cost */
    uint64_t more_files = 0, more_new = 0;
    for (size_t i = 0; i < n; i++)
        if (isnew[i])
            more_new += file_cost(keys[i], &pins[i]);
    pthread_mutex_lock(&h->mu);
    s = set_find(h, tenant, name);
    /* a replacement: the old set is left out of the checks and taken out only with the new one
     * put in, under the same hold of h->mu, so that a refused request changes nothing */
    struct hset *old = NULL;
    if (s && !append) {
        old = s;
        s = NULL;
    }
    if (s && hintwin_len(s->w) + n > HINTS_ENTRIES_MAX) {
        pthread_mutex_unlock(&h->mu);
        tier_err_set("hint set '%s' would have %" PRIu64 " entries: at most %d", name,
                     hintwin_len(s->w) + n, HINTS_ENTRIES_MAX);
        rc = -E2BIG;
        goto out;
    }
    bool fresh = !s;
    for (size_t i = 0; !fresh && i < n; i++)
        if (isnew[i] && map_find(s, nss[i], keys[i], pins[i].on ? pins[i].etag : NULL) < 0)
            more_files += file_cost(keys[i], &pins[i]);
    rc = limits_check_locked(
        h, tenant, old, fresh, n,
        (uint64_t)n * ENTRY_BYTES + (fresh ? SET_BYTES + more_new : more_files), admin);
    if (rc) {
        pthread_mutex_unlock(&h->mu);
        goto out;
    }
    if (fresh) {
        if (atomic_load(&h->nsets) - (old ? 1 : 0) >= HINTS_SETS_MAX) {
            pthread_mutex_unlock(&h->mu);
            tier_err_set("%d hint sets exist already: drop one (DELETE /v1/hints/NAME)",
                         HINTS_SETS_MAX);
            rc = -ENOSPC;
            goto out;
        }
        s = calloc(1, sizeof(*s));
        if (!s || hintwin_new(h->window_files, h->window_bytes, &s->w) < 0) {
            free(s);
            pthread_mutex_unlock(&h->mu);
            rc = -ENOMEM;
            goto out;
        }
        tier_strlcpy(s->name, name, sizeof(s->name));
        s->tenant = tenant;
        s->st.bytes = SET_BYTES;
        s->io = (struct tier_ioctx){.tenant = tenant,
                                    .cls = h->c.tenants ? tenant_class(h->c.tenants, tenant)
                                                        : TIER_IO_TRAINING};
    }
    uint64_t base = hintwin_len(s->w);
    rc = done_grow(s, base + n);
    size_t guess = h->c.cache ? cache_block_size(h->c.cache) : 1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint32_t had = s->nfiles;
        uint64_t cost = file_cost(keys[i], &pins[i]);
        int64_t x = file_item(s, nss[i], keys[i], &pins[i]);
        keys[i] = NULL; /* taken over or freed, and pins[i].version_id with it */
        if (x < 0) {
            rc = -ENOMEM;
            break;
        }
        s->st.bytes += ENTRY_BYTES + (s->nfiles > had ? cost : 0);
        rc = hintwin_append(s->w, (uint32_t)x, s->files[x]->size ? s->files[x]->size : guess);
        if (rc == 0 && s->occ[x] == HINTWIN_NONE)
            s->occ[x] = base + i;
    }
    if (rc) {
        /* out of memory half-way: a fresh set is dropped; an appended one keeps what fit */
        if (fresh) {
            pthread_mutex_unlock(&h->mu);
            set_free(s);
            goto out;
        }
    }
    s->st.entries = hintwin_len(s->w);
    s->st.files = s->nfiles;
    s->st.tenant = tenant;
    tier_strlcpy(s->st.name, s->name, sizeof(s->st.name));
    s->st.budget = set_budget(h, s);
    if (fresh) {
        if (old)
            set_unlink_locked(h, old); /* h->mu stays held: no one sees both or neither */
        s->next = NULL;
        struct hset **pp = &h->sets;
        while (*pp)
            pp = &(*pp)->next;
        *pp = s;
        atomic_fetch_add(&h->nsets, 1);
    }
    s->last_ns = tier_now_mono_ns();
    struct rel rel[TRIM_BATCH];
    size_t nrel = advance(h, s, rel, TRIM_BATCH);
    uint64_t entries = s->st.entries, files = s->st.files; /* s may go once h->mu is dropped */
    if (old)
        set_reap_locked(h, old); /* its held blocks released (h->mu dropped meanwhile) */
    pthread_mutex_unlock(&h->mu);
    release_all(h, rel, nrel);
    log_info("hints: set %s of tenant %u: %zu entries %s (%" PRIu64 " in all, %" PRIu64 " files)",
             name, tenant, n, fresh ? "given" : "appended", entries, files);
out:
    for (size_t i = 0; i < n; i++) {
        free(keys[i]);
        free(pins[i].version_id);
    }
    free(nss);
    free(keys);
    free(pins);
    free(isnew);
    return rc;
}

int hints_cancel(struct hints *h, const char *name, int64_t tenant)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        struct hset *s = h->sets;
        while (s && (strcmp(s->name, name ? name : "") ||
                     (tenant >= 0 && s->tenant != (uint32_t)tenant)))
            s = s->next;
        if (!s)
            break;
        set_drop_locked(h, s); /* h->mu dropped inside: look again from the start */
        rc = 0;
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

size_t hints_list(struct hints *h, struct hints_set_stats *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&h->mu);
    for (struct hset *s = h->sets; s; s = s->next, n++) {
        if (n >= max)
            continue;
        out[n] = s->st;
        out[n].window_files = hintwin_items(s->w);
        out[n].window_bytes = hintwin_bytes(s->w);
        out[n].held_bytes = hintwin_held_bytes(s->w);
    }
    pthread_mutex_unlock(&h->mu);
    return n;
}

size_t hints_tenant_sets(struct hints *h, uint32_t tenant)
{
    size_t n = 0;
    pthread_mutex_lock(&h->mu);
    for (struct hset *s = h->sets; s; s = s->next)
        n += s->st.tenant == tenant;
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* ---- life ------------------------------------------------------------------------------------ */

int hints_new(const struct hints_ctx *ctx, struct hints **out)
{
    struct hints *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->c = *ctx;
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->read_mu, NULL);
    pthread_rwlock_init(&h->meta_lock, NULL);
    pthread_condattr_t ca; /* the workers' idle wake-ups are timed on CLOCK_MONOTONIC */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&h->idle, NULL);
    h->window_files = ctx->window_files;
    h->window_bytes = ctx->window_bytes;
    h->cache_bytes = ctx->cache_bytes ? ctx->cache_bytes : ctx->hot_bytes / 2;
    h->tenant_sets = ctx->tenant_sets > 0 ? (uint64_t)ctx->tenant_sets : 0;
    h->tenant_entries = ctx->tenant_entries;
    h->tenant_bytes = ctx->tenant_bytes;
    h->state_bytes = ctx->state_bytes;
    int nt = ctx->threads > 0 ? ctx->threads : 16;
    h->threads = calloc((size_t)nt, sizeof(*h->threads));
    if (!h->threads) {
        hints_free(h);
        return -ENOMEM;
    }
    for (int i = 0; i < nt; i++) {
        if (pthread_create(&h->threads[i], NULL, worker_main, h) != 0)
            break;
        h->nthreads++;
    }
    if (!h->nthreads) {
        hints_free(h);
        tier_err_set("cannot start the hint workers");
        return -EAGAIN;
    }
    *out = h;
    return 0;
}

void hints_free(struct hints *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_broadcast(&h->work);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < h->nthreads; i++)
        pthread_join(h->threads[i], NULL);
    pthread_mutex_lock(&h->mu);
    while (h->sets)
        set_drop_locked(h, h->sets);
    pthread_mutex_unlock(&h->mu);
    free(h->threads);
    pthread_cond_destroy(&h->work);
    pthread_cond_destroy(&h->idle);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->read_mu);
    pthread_rwlock_destroy(&h->meta_lock);
    free(h);
}
