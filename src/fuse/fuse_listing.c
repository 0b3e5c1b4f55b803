/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_listing.c - the directory listing cache behind readdir, lookup and revalidation.
 *
 * A directory's listing is built in one go (virtual directories from the namespace table,
 * namespace directories from backend_list with delimiter "/", all pages, plus what the
 * namespace's mode holds itself: tfs_ns_ops.local_children), sorted and de-duplicated (S3 may
 * have both an object "x" and keys under "x/": the directory wins), and kept on the node for
 * entry_ttl. opendir (fuse_ops_dir.c) takes a reference to the current snapshot, so the
 * offsets a handle hands to the kernel stay valid while a newer listing replaces the cached one.
 *
 * DESIGN: a listing holds at most [mount] max_dir_entries entries. A larger directory keeps
 * its first entries (backend order) and is marked truncated: readdir serves them and then
 * fails with EFBIG, so tools see an error instead of a silently short directory, and lookups do
 * not take a name's absence from it as ENOENT. Builds are single-flight per node where the
 * node's mode caches (tfs_ns_ops.cached): the first thread builds without any lock held, later
 * ones wait on the node's list_cv and take its result (listing or error), so N concurrent `ls`
 * of a cold directory cost one backend listing. Write-back namespaces are listed afresh for
 * every open (read-your-writes: a build that started before a process's write must not answer
 * its listing), so there each open builds.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "stage/pinmeta.h"
#include "datasets/dataset.h"
#include "fuse/fuse_int.h"

struct builder {
    struct tfs_dirent *e;
    size_t n, cap;
    size_t max;     /* max_dir_entries */
    bool truncated; /* an entry beyond max was dropped */
    bool from_pins; /* the backend could not list: the pinned children only */
    size_t pages;   /* backend_list calls */
    int rc;
};

static void add(struct builder *b, const char *name, size_t len, bool is_dir, uint64_t size,
                int64_t mtime, const char *etag)
{
    if (b->rc || len == 0 || len > BACKEND_SEGMENT_MAX)
        return;
    if (b->n >= b->max) {
        b->truncated = true;
        return;
    }
    if (b->n == b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 64;
        if (ncap > b->max)
            ncap = b->max;
        struct tfs_dirent *ne = realloc(b->e, ncap * sizeof(*ne));
        if (!ne) {
            b->rc = -ENOMEM;
            return;
        }
        b->e = ne;
        b->cap = ncap;
    }
    struct tfs_dirent *d = &b->e[b->n];
    memset(d, 0, sizeof(*d));
    d->name = strndup(name, len);
    if (!d->name) {
        b->rc = -ENOMEM;
        return;
    }
    d->is_dir = is_dir;
    d->size_bytes = size;
    d->mtime_ns = mtime;
    if (etag)
        memcpy(d->etag, etag, sizeof(d->etag));
    d->etag[sizeof(d->etag) - 1] = '\0';
    b->n++;
}

static void add_virtual(const char *name, size_t len, void *arg)
{
    add(arg, name, len, true, 0, 0, NULL);
}

/* A file or directory the namespace's mode holds itself: the write-back buffer's live ones
 * (read-your-writes). */
static void add_pending(const char *name, size_t len, bool is_dir, uint64_t size, void *arg)
{
    struct builder *b = arg;
    size_t before = b->n;
    add(b, name, len, is_dir, size, 0, NULL);
    if (b->n > before)
        b->e[b->n - 1].pending = true;
}

static int cmp_dirent(const void *a, const void *b)
{
    const struct tfs_dirent *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    if (x->is_dir != y->is_dir)
        return (int)y->is_dir - (int)x->is_dir; /* directory first */
    return (int)y->pending - (int)x->pending;   /* then the write-back buffer's newer file */
}

static struct tfs_listing *listing_ref(struct tfs_listing *l)
{
    atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
    return l;
}

static void add_pinned(const char *name, size_t len, bool is_dir, const struct pinmeta_obj *o,
                       void *arg)
{
    add(arg, name, len, is_dir, o ? o->size_bytes : 0, o ? o->mtime_ns : 0, o ? o->etag : "");
}

/* The pinned objects and directories directly under prefix (pinmeta.h); false: none. */
static bool pinned_children(struct tierd_fuse *fs, struct tierd_ns *ns, const char *prefix,
                            struct builder *b)
{
    size_t before = b->n;
    pinmeta_children(fs->ctx.pinned, ns->be->name, prefix, add_pinned, b);
    return b->n > before;
}

/* List every key of a namespace directory. */
static int list_backend(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                        struct builder *b)
{
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    bool is_root = false;
    int rc = tfs_resolve(fs, path, &ns, &key, &is_root);
    if (rc)
        return rc;
    size_t kl = strlen(key);
    char *prefix = malloc(kl + 2);
    if (!prefix) {
        free(key);
        return -ENOMEM;
    }
    memcpy(prefix, key, kl + 1);
    if (kl > 0 && key[kl - 1] != '/') {
        prefix[kl++] = '/';
        prefix[kl] = '\0';
    }
    free(key);
    char *token = NULL;
    bool token_seen = false; /* a page came: a later failure is an error, not a partial list */
    do {
        struct backend_list_page page;
        memset(&page, 0, sizeof(page));
        rc = backend_list(ns->be, io, prefix, "/", token, 0, &page);
        b->pages++;
        free(token);
        token = NULL;
        if (rc) {
            if (rc == -ENOENT) {
                rc = 0; /* an empty or vanished directory lists as empty */
            } else {
                log_warn("fuse: listing %s (%s:%s) failed: %s", path, ns->be->name, prefix,
                         tier_err_msg());
                if (fs->ctx.pinned && !token_seen && pinned_children(fs, ns, prefix, b)) {
                    rc = 0; /* the backend cannot say: what is pinned below is listed */
                    b->from_pins = true;
                }
            }
            break;
        }
        token_seen = true;
        for (size_t i = 0; i < page.n; i++) {
            const struct backend_entry *e = &page.entries[i];
            if (strncmp(e->name, prefix, kl) != 0)
                continue;
            const char *name = e->name + kl;
            size_t nl = strlen(name);
            bool is_dir = e->is_prefix;
            if (nl > 0 && name[nl - 1] == '/') {
                nl--;
                is_dir = true;
            }
            if (memchr(name, '/', nl))
                continue;
            if (is_root && nl == sizeof(DATASET_RESERVED) - 1 &&
                memcmp(name, DATASET_RESERVED, nl) == 0)
                continue; /* dataset versions' manifests (datasets/dataset.h) */
            add(b, name, nl, is_dir, e->size_bytes, e->mtime_ns, e->etag);
        }
        if (page.next_token) {
            token = page.next_token;
            page.next_token = NULL;
        }
        backend_list_page_fini(&page);
    } while (token && b->rc == 0 && !b->truncated);
    free(token);
    const struct tfs_ns_ops *ops = tfs_path_ops(fs, path);
    if (rc == 0 && ops->local_children)
        ops->local_children(fs, ns, prefix, path, add_pending, b);
    free(prefix);
    return rc ? rc : b->rc;
}

static int listing_build(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                         struct tfs_listing **out)
{
    uint64_t t0 = tier_now_mono_ns();
    struct builder b;
    memset(&b, 0, sizeof(b));
    b.max = fs->max_dir_entries;
    int rc;
    if (tfs_is_virtual_dir(fs, path)) {
        tfs_virtual_children(fs, path, add_virtual, &b);
        if (strcmp(path, "/") == 0 && tfs_ctl_path(fs, TFS_CTL_DIR))
            add_virtual(&TFS_CTL_DIR[1], strlen(TFS_CTL_DIR) - 1, &b); /* fuse_ctl_hints.c */
        rc = b.rc;
    } else {
        rc = list_backend(fs, io, path, &b);
    }
    struct tfs_listing *l = NULL;
    if (rc == 0) {
        l = calloc(1, sizeof(*l));
        if (!l)
            rc = -ENOMEM;
    }
    if (rc) {
        for (size_t i = 0; i < b.n; i++)
            free(b.e[i].name);
        free(b.e);
        return rc;
    }
    if (b.n > 1)
        qsort(b.e, b.n, sizeof(*b.e), cmp_dirent);
    size_t w = 0;
    for (size_t i = 0; i < b.n; i++) {
        if (w > 0 && strcmp(b.e[w - 1].name, b.e[i].name) == 0) {
            free(b.e[i].name);
            continue;
        }
        b.e[w++] = b.e[i];
    }
    l->e = b.e;
    l->n = w;
    l->truncated = b.truncated;
    l->from_pins = b.from_pins;
    l->pages = b.pages;
    l->refs = 1;
    l->fetched_ns = t0;
    l->expire_ns = t0 + tfs_path_perm(fs, path)->entry_ttl_ns;
    uint64_t nbuilt = atomic_fetch_add(&fs->listings_built, 1) + 1;
    log_debug("fuse: listing %s built: %zu entries%s in %llu ms (listing build %llu)", path, w,
              b.truncated ? " (cut at max_dir_entries)" : "",
              (unsigned long long)((tier_now_mono_ns() - t0) / TIER_NS_PER_MS),
              (unsigned long long)nbuilt);
    *out = l;
    return 0;
}

struct tfs_listing *tfs_listing_peek(struct tierd_fuse *fs, struct tfs_node *n)
{
    (void)fs; /* the node's mode says */
    /* write-back namespaces change under the mount's own writes: listed afresh each time */
    if (!n->nsops->cached)
        return NULL;
    struct tfs_listing *l = NULL;
    pthread_mutex_lock(&n->mu);
    if (n->listing && tier_now_mono_ns() < n->listing->expire_ns)
        l = listing_ref(n->listing);
    pthread_mutex_unlock(&n->mu);
    return l;
}

/* With n->mu held: the listing to answer with after a build that ended with rc (with
 * stale_ok, an expired listing beats none when the backend is unavailable). */
static int listing_result_locked(struct tfs_node *n, int rc, bool stale_ok,
                                 struct tfs_listing **out)
{
    if (n->listing && rc != -ENOENT && (rc == 0 || stale_ok)) {
        *out = listing_ref(n->listing);
        return 0;
    }
    return rc ? rc : -EIO;
}

/* tfs_listing_get; stale_ok: answer with the last listing when a build fails (readdir), else
 * with the build's error (revalidation must not take an old listing for a new one). */
static int listing_get(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *n,
                       bool stale_ok, struct tfs_listing **out)
{
    bool single = n->nsops->cached;
    if (single) {
        pthread_mutex_lock(&n->mu);
        for (;;) {
            if (n->listing && tier_now_mono_ns() < n->listing->expire_ns) {
                *out = listing_ref(n->listing);
                pthread_mutex_unlock(&n->mu);
                return 0;
            }
            if (!n->list_building)
                break;
            /* another thread lists this directory: take its result, even an already expired
             * one (entry_ttl = 0) or its error (a backend outage costs one timeout, not N) */
            uint64_t gen = n->list_gen;
            while (n->list_gen == gen)
                pthread_cond_wait(&n->list_cv, &n->mu);
            /* served by the other thread's backend listing: telemetry's tier for this request
             * (tfs_op_done) is the backend, as if this thread had listed */
            tier_backend_call_note();
            int rc = listing_result_locked(n, n->list_rc, stale_ok, out);
            pthread_mutex_unlock(&n->mu);
            return rc;
        }
        n->list_building = true;
        pthread_mutex_unlock(&n->mu);
    }
    struct tfs_listing *l = NULL;
    int rc = listing_build(fs, io, n->path, &l);
    struct tfs_listing *old = NULL;
    bool log_cut = false;
    pthread_mutex_lock(&n->mu);
    if (rc == 0) {
        old = n->listing;
        n->listing = l; /* the node's reference; the caller's is taken below */
        n->reval_heads = 0;
        log_cut = l->truncated && !n->list_cap_logged;
        if (log_cut)
            n->list_cap_logged = true;
    }
    int wrc = rc;
    rc = listing_result_locked(n, rc, stale_ok, out);
    if (single) {
        n->list_building = false;
        n->list_rc = wrc;
        n->list_gen++;
        pthread_cond_broadcast(&n->list_cv);
    }
    pthread_mutex_unlock(&n->mu);
    tfs_listing_unref(old);
    if (log_cut)
        log_warn("fuse: %s has more than %zu entries ([mount] max_dir_entries): its listing "
                 "holds the first %zu, then readdir fails with EFBIG (names beyond still open); "
                 "raise max_dir_entries or split the directory",
                 n->path, fs->max_dir_entries, fs->max_dir_entries);
    return rc;
}

int tfs_listing_get(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *n,
                    struct tfs_listing **out)
{
    return listing_get(fs, io, n, true, out);
}

/* A listing a child can be answered from: complete, and not older than what the child has. */
static bool answers(const struct tfs_listing *l, uint64_t min_fetched_ns)
{
    return !l->truncated && !l->from_pins && l->fetched_ns >= min_fetched_ns;
}

int tfs_listing_for_child(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *dir,
                          uint64_t min_fetched_ns, struct tfs_listing **out)
{
    /* virtual directories cost no backend call either way; write-back ones keep no listing */
    if (tfs_is_virtual_dir(fs, dir->path) || !dir->nsops->cached)
        return -EAGAIN;
    pthread_mutex_lock(&dir->mu);
    const struct tfs_listing *c = dir->listing;
    if (!c || c->truncated || c->from_pins) {
        /* never listed (a HEAD of one name beats a LIST of the whole directory), or a listing
         * that cannot say a name is absent */
        pthread_mutex_unlock(&dir->mu);
        return -EAGAIN;
    }
    if (tier_now_mono_ns() < c->expire_ns) {
        /* fresh: it answers unless the child knows better (then a HEAD, see DESIGN) */
        int rc = -EAGAIN;
        if (answers(c, min_fetched_ns)) {
            *out = listing_ref(dir->listing);
            rc = 0;
        }
        pthread_mutex_unlock(&dir->mu);
        return rc;
    }
    /* stale. Rent or buy: a rebuild costs c->pages backend calls, a HEAD one; rebuild at the
     * pages-th revalidation since it went stale. A rebuild under way is joined when it is one
     * page (as long as a HEAD); a longer one is not waited for (a HEAD instead): only the
     * request that started it waits for all its pages. */
    if (dir->list_building ? c->pages > 1 : dir->reval_heads + 1 < c->pages) {
        if (!dir->list_building)
            dir->reval_heads++;
        pthread_mutex_unlock(&dir->mu);
        return -EAGAIN;
    }
    pthread_mutex_unlock(&dir->mu);
    struct tfs_listing *l = NULL;
    int rc = listing_get(fs, io, dir, false, &l);
    if (rc)
        return rc;
    if (!answers(l, min_fetched_ns)) {
        tfs_listing_unref(l);
        return -EAGAIN;
    }
    *out = l;
    return 0;
}

static int meta_peek(struct tierd_fuse *fs, const struct tierd_ns *ns, const char *key,
                     struct backend_stat *st)
{
    const char *prefix = ns->conf->prefix;
    size_t pl = strlen(prefix);
    if (strncmp(key, prefix, pl) != 0)
        return -ENOENT;
    const char *rel = key + pl, *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    /* the directory's mount path: the namespace's path, then rel up to its last '/' */
    char dir[BACKEND_KEY_MAX + 512];
    int n = snprintf(dir, sizeof(dir), "%s%s%.*s", ns->conf->path, slash ? "/" : "",
                     slash ? (int)(slash - rel) : 0, rel);
    if (n < 0 || (size_t)n >= sizeof(dir) || !*name)
        return -ENOENT;
    struct tfs_node *dn = tfs_node_get_path(fs, dir);
    if (!dn)
        return -ENOENT;
    struct tfs_listing *l = tfs_listing_peek(fs, dn);
    const struct tfs_dirent *e = l ? tfs_listing_find(l, name) : NULL;
    int rc = -ENOENT;
    /* no etag (a listing that omits it): the engine asks for one with a stat */
    if (e && !e->pending && e->etag[0]) {
        /* a read found the object changed after this listing was made: ask the backend */
        char fp[sizeof(dir) + BACKEND_SEGMENT_MAX + 2];
        snprintf(fp, sizeof(fp), "%s/%s", dir, name);
        struct tfs_node *fn = tfs_node_get_path(fs, fp);
        if (fn) {
            pthread_mutex_lock(&fn->mu);
            if (fn->attr_floor_ns > l->fetched_ns)
                e = NULL;
            pthread_mutex_unlock(&fn->mu);
            tfs_node_put(fs, fn);
        }
    }
    if (e && !e->pending && e->etag[0]) {
        memset(st, 0, sizeof(*st));
        st->is_dir = e->is_dir;
        st->size_bytes = e->size_bytes;
        st->mtime_ns = e->mtime_ns;
        tier_strlcpy(st->etag, e->etag, sizeof(st->etag));
        rc = 0;
    }
    if (l)
        tfs_listing_unref(l);
    tfs_node_put(fs, dn);
    return rc;
}

int tfs_meta_peek(void *ud, const struct tierd_ns *ns, const char *key, struct backend_stat *st)
{
    struct tierd_fuse *fs = ud;
    /* the no-open session's listings first: the read-cache namespaces are listed through it
     * when it is there (fuse_noopen.c), the write-back ones through the main session */
    if (fs->side && ns->conf->mode == TIERD_NS_READ_CACHE && meta_peek(fs->side, ns, key, st) == 0)
        return 0;
    return meta_peek(fs, ns, key, st);
}
