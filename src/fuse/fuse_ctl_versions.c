/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ctl_versions.c - the dataset version view under <mount>/.tierd/datasets (docs/VERSIONS.md):
 *
 *   /.tierd/datasets/TREE@NAME/...
 *                       read-only: version NAME of the tree at mount path /TREE, its files as
 *                       the manifest lists them, every read pinned to the file's ETag in the
 *                       manifest (tfs_open_pinned: a file changed since the commit fails with
 *                       EIO, logged with why). The first path component holding '@' followed by
 *                       a valid version name is the version's root; the directories above it
 *                       list the namespaces, trees and versions under them (dataset_view_list;
 *                       inside a namespace with its permissions).
 *                       Those listings are kept [mount] version_list_ttl (list_ttl_ns;
 *                       CTL_VLIST of them; a commit or delete through this tierd makes them
 *                       stale at once).
 *                       Manifests are cached (CTL_VCACHE of them, re-read after
 *                       CTL_VCACHE_TTL_NS: a deleted version disappears by then); their
 *                       metadata needs no backend request.
 *
 * The control files' operations and table (fuse_ctl_hints.c) hand the view's paths here
 * (tfs_vview_stat, tfs_vview_listing, tfs_vview_open); the session's inode table asks
 * tfs_ctl_version_perm through that table. Locking: vview->mu guards the two caches; it is a
 * leaf, never held across backend I/O (dataset_show, dataset_view_list).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "datasets/dataset.h"
#include "fuse/fuse_int.h"

#define CTL_VCACHE 8                                /* manifests kept decoded */
#define CTL_VCACHE_TTL_NS (60ull * TIER_NS_PER_SEC) /* then read again (deleted: gone) */
#define CTL_VLIST 8 /* listings kept of the view's directories above the versions */

/* A decoded manifest of the view (vview->mu). */
struct vcache {
    char *tree; /* the tree's mount path; NULL: a free slot */
    char name[MANIFEST_NAME_MAX];
    struct manifest m;
    uint64_t loaded_ns, used;
};

/* A listing of a view directory above the versions (vview->mu). */
struct vlist {
    char *path;            /* NULL: a free slot */
    struct tfs_listing *l; /* one reference held */
    uint64_t loaded_ns, gen, used;
};

/* The view's state (fs->vview): made by tfs_vview_init, freed by tfs_vview_fini. */
struct tfs_vview {
    pthread_mutex_t mu;
    struct vcache vc[CTL_VCACHE]; /* mu */
    uint64_t vclock;              /* mu */
    struct vlist vl[CTL_VLIST];   /* mu */
    /* how long a listing in vl is kept ([mount] version_list_ttl): then listed again (a version
     * committed or deleted on another node shows by then; through this tierd at once:
     * dataset_generation) */
    uint64_t list_ttl_ns;
};

static bool in_versions(const char *path)
{
    size_t l = sizeof(TFS_CTL_VERSIONS) - 1;
    return strncmp(path, TFS_CTL_VERSIONS, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

/* A path under TFS_CTL_VERSIONS: dataset_view_path (dataset.h; the stager parses it too). */
static int vpath(const char *path, char **tree, char *name, const char **rest)
{
    return dataset_view_path(path, tree, name, rest);
}

/* The slot of (tree, name), loaded if needed; vview->mu is held on return 0 (the caller unlocks).
 */
static int vget_locked(struct tierd_fuse *fs, const char *tree, const char *name,
                       struct vcache **out)
{
    struct tfs_vview *c = fs->vview;
    uint64_t now = tier_now_mono_ns();
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < CTL_VCACHE; i++) {
        struct vcache *v = &c->vc[i];
        if (v->tree && strcmp(v->tree, tree) == 0 && strcmp(v->name, name) == 0 &&
            now - v->loaded_ns < CTL_VCACHE_TTL_NS) {
            v->used = ++c->vclock;
            *out = v;
            return 0;
        }
    }
    pthread_mutex_unlock(&c->mu);
    struct manifest m;
    tier_err_clear();
    int rc = dataset_show(fs->ctx.datasets, tree, name, &m); /* backend I/O, without the lock */
    if (rc == -EBADMSG)
        log_warn("fuse: %s", tier_err_msg()); /* a malformed manifest: say why, serve none */
    if (rc == -EBADMSG || rc == -ENOENT || rc == -EINVAL || rc == -ENOMEM)
        return rc == -EBADMSG ? -EIO : rc == -ENOMEM ? rc : -ENOENT;
    if (rc) {
        /* the backend cannot say now: a version is immutable, so the expired copy still holds
         * (tried again after another TTL) */
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < CTL_VCACHE; i++) {
            struct vcache *v = &c->vc[i];
            if (v->tree && strcmp(v->tree, tree) == 0 && strcmp(v->name, name) == 0) {
                v->loaded_ns = now;
                v->used = ++c->vclock;
                *out = v;
                return 0;
            }
        }
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    char *t = strdup(tree);
    if (!t) {
        manifest_fini(&m);
        return -ENOMEM;
    }
    pthread_mutex_lock(&c->mu);
    struct vcache *v = &c->vc[0];
    for (size_t i = 0; i < CTL_VCACHE; i++) {
        struct vcache *x = &c->vc[i];
        if (x->tree && strcmp(x->tree, tree) == 0 && strcmp(x->name, name) == 0) {
            v = x; /* loaded meanwhile, or expired: replace it */
            break;
        }
        if (!x->tree || x->used < v->used)
            v = x;
    }
    free(v->tree);
    manifest_fini(&v->m);
    v->tree = t;
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->m = m;
    v->loaded_ns = now;
    v->used = ++c->vclock;
    *out = v;
    return 0;
}

/* What rest ("" or "/key") is in m: 1 a directory, 0 a file (*idx), -ENOENT, -ENOMEM. */
static int vfind(const struct manifest *m, const char *rest, size_t *idx)
{
    return manifest_find(m, *rest ? rest + 1 : "", idx);
}

/* The permissions of the namespace holding tree (its uid, gid, umask and TTLs: a version's
 * files are that namespace's files), or NULL. */
static int tree_ns(const struct tierd_fuse *fs, const char *tree, size_t *nsi)
{
    const struct tierfs_ctx *cx = &fs->ctx;
    for (size_t i = 0; i < cx->nns; i++) {
        const char *np = cx->ns[i].conf->path;
        size_t l = strlen(np);
        if (strncmp(tree, np, l) == 0 && (tree[l] == '\0' || tree[l] == '/' || l == 1)) {
            *nsi = i;
            return 0;
        }
    }
    return -ENOENT;
}

/* The permissions of a view directory above the versions: inside a namespace's mount path
 * ("/.tierd/datasets/priv/t"), the namespace's (it lists that namespace's trees), else the
 * mount's. */
static const struct tfs_perm *above_perm(const struct tierd_fuse *fs, const char *path)
{
    const char *tree = path + sizeof(DATASET_VIEW) - 1;
    size_t i = 0;
    return *tree && tree_ns(fs, tree, &i) == 0 ? &fs->ns_perm[i] : &fs->perm;
}

const struct tfs_perm *tfs_ctl_version_perm(const struct tierd_fuse *fs, const char *path)
{
    /* /.tierd itself and the view's directories never change: the mount's TTLs (a directory
     * inside a namespace's path: the namespace's, as its permissions), so a path walk down to a
     * version's file is not a lookup per component each time (the hint files keep ctl_perm: no
     * caching) */
    if (strcmp(path, TFS_CTL_DIR) == 0)
        return &fs->perm;
    char *tree = NULL, name[MANIFEST_NAME_MAX];
    const char *rest = NULL;
    int rc = in_versions(path) ? vpath(path, &tree, name, &rest) : -ENOENT;
    if (rc == 1)
        return above_perm(fs, path);
    if (rc != 0)
        return NULL;
    size_t i = 0;
    int nrc = tree_ns(fs, tree, &i);
    free(tree);
    return nrc ? NULL : &fs->ns_perm[i];
}

/* The version holding path: 1 for the view's directories above the versions (nothing held), 0
 * with its cache slot *v (vview->mu held: the caller unlocks), the path inside it (*rest) and the
 * index of the namespace holding its tree (*nsi: its permissions and backend), or -errno. */
static int vlocate(struct tierd_fuse *fs, const char *path, struct vcache **v, const char **rest,
                   size_t *nsi)
{
    char *tree = NULL, name[MANIFEST_NAME_MAX];
    int rc = vpath(path, &tree, name, rest);
    if (rc)
        return rc;
    rc = tree_ns(fs, tree, nsi);
    if (rc == 0)
        rc = vget_locked(fs, tree, name, v);
    free(tree);
    return rc;
}

int tfs_vview_stat(struct tierd_fuse *fs, const char *path, struct tfs_attr *a)
{
    struct vcache *v = NULL;
    const char *rest = NULL;
    size_t nsi = 0;
    int rc = vlocate(fs, path, &v, &rest, &nsi);
    memset(a, 0, sizeof(*a));
    a->mtime_ns = (int64_t)fs->ctx.start_ns;
    a->is_dir = true;
    a->mode = 0555 & ~(rc == 1 ? above_perm(fs, path) : &fs->perm)->umask;
    if (rc)
        return rc == 1 ? 0 : rc;
    const struct tfs_perm *tp = &fs->ns_perm[nsi];
    a->mode = 0555 & ~tp->umask;
    size_t i = 0;
    rc = vfind(&v->m, rest, &i);
    a->mtime_ns = v->m.created_at * (int64_t)TIER_NS_PER_SEC;
    if (rc == 0) {
        a->is_dir = false;
        a->mode = 0444 & ~tp->umask;
        a->size_bytes = v->m.files[i].size;
        snprintf(a->etag, sizeof(a->etag), "%s", v->m.files[i].etag);
    }
    pthread_mutex_unlock(&fs->vview->mu);
    return rc < 0 ? rc : 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct tfs_dirent *)a)->name, ((const struct tfs_dirent *)b)->name);
}

/* A directory above the versions: the namespaces and trees under it, and the versions of the
 * trees just under it (dataset_view_list: backend listings, no lock held). */
static int vlisting_above(struct tierd_fuse *fs, const char *path, struct tfs_dirent **ep,
                          size_t *np, bool *partial)
{
    char **names = NULL;
    size_t n = 0;
    int rc = dataset_view_list(fs->ctx.datasets, path, &names, &n, partial);
    if (rc)
        return rc;
    struct tfs_dirent *e = calloc(n ? n : 1, sizeof(*e));
    if (!e) {
        dataset_names_free(names, n);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        e[i].name = names[i]; /* taken over */
        e[i].is_dir = true;
        e[i].mtime_ns = (int64_t)fs->ctx.start_ns;
    }
    free(names);
    *ep = e;
    *np = n;
    return 0;
}

/* Is path one of the view's directories above the versions? */
static bool vabove(const char *path)
{
    char *tree = NULL, name[MANIFEST_NAME_MAX];
    const char *rest = NULL;
    int rc = vpath(path, &tree, name, &rest);
    free(tree);
    return rc == 1;
}

/* The slot of path in vview->vl (vview->mu held): fresh only (younger than c->list_ttl_ns and
 * listed at generation gen; now may be older than the slot: read before another thread stored
 * it), or any. NULL: none. */
static struct vlist *vlist_find_locked(struct tfs_vview *c, const char *path, bool fresh,
                                       uint64_t now, uint64_t gen)
{
    for (size_t i = 0; i < CTL_VLIST; i++) {
        struct vlist *x = &c->vl[i];
        if (x->path && strcmp(x->path, path) == 0 &&
            (!fresh ||
             (x->gen == gen && (x->loaded_ns > now || now - x->loaded_ns < c->list_ttl_ns))))
            return x;
    }
    return NULL;
}

/* Can a kept listing stand in for one that failed with rc? Only while the backend cannot answer
 * now; a directory or bucket that is gone, or access refused, is said as it is. */
static bool vlist_stale_ok(int rc)
{
    return rc != -ENOMEM && rc != -ENOENT && rc != -EINVAL && rc != -EACCES && rc != -EPERM &&
           rc != -ENOTDIR;
}

/* The listing of a view directory above the versions, from vview->vl (a listing of the last
 * list_ttl_ns made since the last commit or delete through this tierd), else listed afresh
 * (vlisting_above: 1 + the trees' backend listings) and kept, unless it is partial (a
 * namespace's versions could not be listed: answered, never kept). A listing that fails while
 * the backend cannot answer (vlist_stale_ok) is answered with the last one kept of that
 * directory, however old, as readdir answers with a stale listing; else with its error. */
static int vlisting_above_cached(struct tierd_fuse *fs, const char *path, struct tfs_listing **out)
{
    struct tfs_vview *c = fs->vview;
    uint64_t now = tier_now_mono_ns();
    uint64_t gen = dataset_generation(fs->ctx.datasets); /* before listing */
    pthread_mutex_lock(&c->mu);
    struct vlist *x = vlist_find_locked(c, path, true, now, gen);
    if (x) {
        x->used = ++c->vclock;
        atomic_fetch_add_explicit(&x->l->refs, 1, memory_order_relaxed);
        *out = x->l;
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    pthread_mutex_unlock(&c->mu);
    struct tfs_listing *l = calloc(1, sizeof(*l));
    char *p = strdup(path);
    bool partial = false;
    int rc = l && p ? vlisting_above(fs, path, &l->e, &l->n, &partial) : -ENOMEM;
    pthread_mutex_lock(&c->mu);
    if (rc) {
        free(l);
        free(p);
        x = vlist_stale_ok(rc) ? vlist_find_locked(c, path, false, now, gen) : NULL;
        if (x) {
            atomic_fetch_add_explicit(&x->l->refs, 1, memory_order_relaxed);
            *out = x->l;
            rc = 0;
        }
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    l->refs = 1;                        /* the caller's */
    l->fetched_ns = l->expire_ns = now; /* the node cache keeps no control listing */
    *out = l;
    x = vlist_find_locked(c, path, false, now, gen); /* replaced, else a free or the LRU slot */
    if (partial || (x && (x->gen > gen || x->loaded_ns > now))) {
        /* partial, or another thread kept a newer one meanwhile: that one stays */
        pthread_mutex_unlock(&c->mu);
        free(p);
        return 0;
    }
    for (size_t i = 0; !x && i < CTL_VLIST; i++)
        if (!c->vl[i].path)
            x = &c->vl[i];
    if (!x) {
        x = &c->vl[0];
        for (size_t i = 1; i < CTL_VLIST; i++)
            if (c->vl[i].used < x->used)
                x = &c->vl[i];
    }
    struct tfs_listing *old = x->l;
    l->refs = 2; /* and the slot's */
    free(x->path);
    x->path = p;
    x->l = l;
    x->loaded_ns = now;
    x->gen = gen;
    x->used = ++c->vclock;
    pthread_mutex_unlock(&c->mu);
    if (old)
        tfs_listing_unref(old);
    return 0;
}

static int vlisting(struct tierd_fuse *fs, const char *path, struct tfs_dirent **ep, size_t *np)
{
    struct vcache *v = NULL;
    const char *rest = NULL;
    size_t nsi = 0;
    int rc = vlocate(fs, path, &v, &rest, &nsi);
    *ep = NULL;
    *np = 0;
    if (rc == 1)
        return vlisting_above(fs, path, ep, np, NULL);
    if (rc)
        return rc;
    size_t i = 0;
    int k = vfind(&v->m, rest, &i);
    if (k != 1) {
        pthread_mutex_unlock(&fs->vview->mu);
        return k == 0 ? -ENOTDIR : k;
    }
    const char *pre = *rest ? rest + 1 : "";
    size_t pl = strlen(pre) + (*rest ? 1 : 0), cap = 0, n = 0;
    char *prefix = malloc(pl + 1);
    struct tfs_dirent *e = NULL;
    rc = prefix ? 0 : -ENOMEM;
    if (prefix)
        snprintf(prefix, pl + 1, "%s%s", pre, *rest ? "/" : "");
    for (i = rc ? v->m.n : manifest_lower_bound(&v->m, prefix);
         rc == 0 && i < v->m.n && strncmp(v->m.files[i].key, prefix, pl) == 0; i++) {
        const char *child = v->m.files[i].key + pl, *sl = strchr(child, '/');
        size_t cl = sl ? (size_t)(sl - child) : strlen(child);
        if (n > 0 && strlen(e[n - 1].name) == cl && strncmp(e[n - 1].name, child, cl) == 0)
            continue; /* the next file of a directory already listed */
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            struct tfs_dirent *ne = realloc(e, cap * sizeof(*ne));
            if (!ne) {
                rc = -ENOMEM;
                break;
            }
            e = ne;
        }
        memset(&e[n], 0, sizeof(e[n]));
        e[n].name = strndup(child, cl);
        e[n].is_dir = sl != NULL;
        if (!e[n].name) {
            rc = -ENOMEM;
            break;
        }
        e[n].mtime_ns = v->m.created_at * (int64_t)TIER_NS_PER_SEC;
        if (!sl) {
            e[n].size_bytes = v->m.files[i].size;
            snprintf(e[n].etag, sizeof(e[n].etag), "%s", v->m.files[i].etag);
        }
        n++;
    }
    pthread_mutex_unlock(&fs->vview->mu);
    free(prefix);
    if (rc) {
        for (size_t j = 0; j < n; j++)
            free(e[j].name);
        free(e);
        return rc;
    }
    /* byte order of keys is not order of names ("a.txt" < "a/b" but "a" < "a.txt"), and S3 may
     * hold both "a" and "a/b": sort, and keep one entry per name */
    if (n > 1) {
        qsort(e, n, sizeof(*e), cmp_name);
        size_t w = 1;
        for (size_t j = 1; j < n; j++) {
            if (strcmp(e[w - 1].name, e[j].name) == 0) {
                /* keep the file, as vfind answers (a name is a file before a directory) */
                if (e[w - 1].is_dir && !e[j].is_dir) {
                    free(e[w - 1].name);
                    e[w - 1] = e[j];
                } else {
                    free(e[j].name);
                }
                continue;
            }
            e[w++] = e[j];
        }
        n = w;
    }
    *ep = e;
    *np = n;
    return 0;
}

/* Open a file of a version: a read handle pinned to the manifest's ETag (and its version id,
 * where the bucket keeps versions). */
int tfs_vview_pin(struct tierd_fuse *fs, const char *path, struct backend **be, char **key,
                  char etag[BACKEND_ETAG_MAX], char **version_id, uint64_t *size)
{
    struct vcache *v = NULL;
    const char *rest = NULL;
    char *k = NULL, *vid = NULL;
    size_t nsi = 0, i = 0;
    int rc = vlocate(fs, path, &v, &rest, &nsi);
    if (rc == 0) {
        int f = vfind(&v->m, rest, &i);
        if (f == 0) {
            *size = v->m.files[i].size;
            snprintf(etag, BACKEND_ETAG_MAX, "%s", v->m.files[i].etag);
            if (asprintf(&k, "%s%s", v->m.prefix, v->m.files[i].key) < 0)
                k = NULL;
            if (v->m.files[i].version_id && !(vid = strdup(v->m.files[i].version_id)))
                rc = -ENOMEM;
            rc = k && rc == 0 ? 0 : -ENOMEM;
        } else {
            rc = f == 1 ? -EISDIR : f;
        }
        pthread_mutex_unlock(&fs->vview->mu);
    } else if (rc == 1) {
        rc = -EISDIR;
    }
    if (rc) {
        free(k);
        free(vid);
        return rc;
    }
    /* the backend of the namespace holding the tree asked for: dataset_show checked the
     * manifest's prefix and backend against it */
    *be = fs->ctx.ns[nsi].be;
    *key = k;
    *version_id = vid;
    return 0;
}

void tfs_vview_open(struct tierd_fuse *fs, fuse_req_t req, fuse_ino_t ino, const char *path,
                    struct fuse_file_info *fi)
{
    struct backend *be = NULL;
    char *key = NULL, *vid = NULL, etag[BACKEND_ETAG_MAX];
    uint64_t size = 0;
    int rc = tfs_vview_pin(fs, path, &be, &key, etag, &vid, &size);
    if (rc == 0 && ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)))
        rc = -EROFS;
    if (rc)
        fuse_reply_err(req, tfs_errno(rc));
    else
        tfs_open_pinned(req, ino, fi, path, be, key, etag, vid, size);
    free(key);
    free(vid);
}

bool tfs_vview_path(const char *path)
{
    return in_versions(path);
}

int tfs_vview_listing(struct tierd_fuse *fs, const char *path, struct tfs_listing **out)
{
    if (vabove(path))
        return vlisting_above_cached(fs, path, out);
    struct tfs_listing *vl = calloc(1, sizeof(*vl));
    if (!vl)
        return -ENOMEM;
    int vrc = vlisting(fs, path, &vl->e, &vl->n);
    if (vrc) {
        free(vl);
        return vrc;
    }
    vl->refs = 1;
    vl->fetched_ns = vl->expire_ns = tier_now_mono_ns();
    *out = vl;
    return 0;
}

int tfs_vview_init(struct tierd_fuse *fs)
{
    struct tfs_vview *v = calloc(1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    pthread_mutex_init(&v->mu, NULL);
    v->list_ttl_ns = fs->ctx.version_list_ttl_ms * TIER_NS_PER_MS;
    fs->vview = v;
    fs->vview_pin = tfs_vview_pin;
    return 0;
}

void tfs_vview_fini(struct tierd_fuse *fs)
{
    struct tfs_vview *v = fs->vview;
    if (!v)
        return;
    fs->vview_pin = NULL;
    for (size_t i = 0; i < CTL_VCACHE; i++) {
        free(v->vc[i].tree);
        manifest_fini(&v->vc[i].m);
    }
    for (size_t i = 0; i < CTL_VLIST; i++) {
        free(v->vl[i].path);
        if (v->vl[i].l)
            tfs_listing_unref(v->vl[i].l);
    }
    pthread_mutex_destroy(&v->mu);
    free(v);
    fs->vview = NULL;
}
