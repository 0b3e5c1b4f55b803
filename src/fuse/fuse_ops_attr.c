/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ops_attr.c - lookup, getattr and statfs, and the attribute cache behind them.
 *
 * A path is one of: a virtual directory above the namespaces ("/", "/a" for "/a/b"), a
 * namespace root (always a directory, no backend call), or a key inside a namespace, which is an
 * object (backend_stat) or a directory (POSIX directory, or an S3 common prefix found by a
 * one-key listing). Answers are cached per node for attr_ttl; lookups first consult the parent's
 * cached listing (fuse_listing.c), so `ls -l`, `find` and the opens after a readdirplus cost no
 * backend call. Called from the FUSE worker threads; node fields under the node mutex.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "cache/cache.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "datasets/dataset.h"
#include "stage/pinmeta.h"
#include "fuse/fuse_int.h"

static void dir_attr(const struct tierd_fuse *fs, struct tfs_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->is_dir = true;
    a->mtime_ns = (int64_t)fs->ctx.start_ns;
}

int tfs_implicit_dir(struct tierd_ns *ns, const struct tier_ioctx *io, const char *key)
{
    char *dk = tier_dir_prefix(key);
    if (!dk)
        return -ENOMEM;
    struct backend_list_page page;
    memset(&page, 0, sizeof(page));
    int rc = backend_list(ns->be, io, dk, "/", NULL, 1, &page);
    free(dk);
    if (rc == 0) {
        rc = page.n > 0;
        backend_list_page_fini(&page);
    }
    return rc == -ENOENT ? 0 : rc;
}

int tfs_backend_attr(struct tierd_ns *ns, const struct tier_ioctx *io, const char *key,
                     struct tfs_attr *a)
{
    struct backend_stat st;
    memset(&st, 0, sizeof(st));
    int rc = backend_stat(ns->be, io, key, &st);
    if (rc)
        return rc;
    memset(a, 0, sizeof(*a));
    a->is_dir = st.is_dir;
    a->size_bytes = st.size_bytes;
    a->mtime_ns = st.mtime_ns;
    memcpy(a->etag, st.etag, sizeof(a->etag));
    a->etag[sizeof(a->etag) - 1] = '\0';
    return 0;
}

/* A path whose mode answers for it (ops->stat: the control files) or a virtual directory: the
 * answer in *rc and true; false when the backend is to be asked. */
static bool stat_without_backend(struct tierd_fuse *fs, const struct tier_ioctx *io,
                                 const struct tfs_ns_ops *ops, const char *path, struct tfs_attr *a,
                                 int *rc)
{
    if (ops->stat) {
        *rc = ops->stat(fs, io, path, a);
        return true;
    }
    if (tfs_is_virtual_dir(fs, path)) {
        dir_attr(fs, a);
        *rc = 0;
        return true;
    }
    return false;
}

/* Ask the backend what path is. */
static int stat_path_at(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                        struct tfs_attr *a)
{
    const struct tfs_ns_ops *ops = tfs_path_ops(fs, path);
    int rc;
    if (stat_without_backend(fs, io, ops, path, a, &rc))
        return rc;
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    bool is_root = false;
    rc = tfs_resolve(fs, path, &ns, &key, &is_root);
    if (rc)
        return rc == -EINVAL ? -ENOENT : rc;
    if (is_root) {
        dir_attr(fs, a);
        goto out;
    }
    if (ops->local_stat) {
        /* read-your-writes: the burst buffer knows files not yet (or just) uploaded */
        rc = ops->local_stat(fs, ns, key, path, a);
        if (rc != -ENOENT)
            goto out;
    }
    rc = tfs_backend_attr(ns, io, key, a);
    if (rc == 0)
        goto out;
    if (rc != -ENOENT && fs->ctx.pinned) {
        /* a pinned object (or a directory above one) is shown from what staging noted */
        struct pinmeta_obj po;
        int prc = pinmeta_stat(fs->ctx.pinned, ns->be->name, key, &po);
        if (prc >= 0) {
            memset(a, 0, sizeof(*a));
            if (prc == 1) {
                dir_attr(fs, a);
            } else {
                a->size_bytes = po.size_bytes;
                a->mtime_ns = po.mtime_ns ? po.mtime_ns : (int64_t)fs->ctx.start_ns;
                tier_strlcpy(a->etag, po.etag, sizeof(a->etag));
            }
            rc = 0;
            goto out;
        }
    }
    if (rc != -ENOENT) {
        log_warn("fuse: stat of %s (%s:%s) failed: %s", path, ns->be->name, key, tier_err_msg());
        if (ops->absent_when_down) {
            /* The burst buffer does not know this name and the backend cannot say: answer
             * "absent" so that a checkpoint writer can still create files while the object
             * store is down (the point of a burst buffer). Names tierd wrote are known to the
             * buffer above; a name only in the backend shows up again when it is reachable. */
            rc = -ENOENT;
        }
        goto out;
    }
    /* an implicit directory: some key below "key/" */
    rc = tfs_implicit_dir(ns, io, key);
    if (rc == 1)
        dir_attr(fs, a);
    else if (rc < 0 && rc != -ENOMEM)
        log_warn("fuse: listing %s failed: %s", path, tier_err_msg());
    rc = rc == 1 ? 0 : rc == 0 ? -ENOENT : rc;
out:
    free(key);
    return rc;
}

static int stat_path(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                     struct tfs_attr *a)
{
    uint64_t t0 = tier_now_mono_ns();
    int rc = stat_path_at(fs, io, path, a);
    if (rc == 0) {
        a->fetched_ns = t0;
        a->writable = tfs_path_ops(fs, path)->writable;
    }
    return rc;
}

/* The backend cannot be asked (down, timing out): answer with what we knew, if anything. A
 * handle still reads one version, so this serves cached data without mixing versions; only
 * "the object is gone" (-ENOENT) is taken at its word. */
static int stale_attr(struct tfs_node *n, struct tfs_attr *a, int rc)
{
    pthread_mutex_lock(&n->mu);
    bool have = n->attr_valid;
    if (have)
        *a = n->attr;
    pthread_mutex_unlock(&n->mu);
    if (!have)
        return rc;
    log_debug("fuse: %s: backend unavailable (%s), using the last known attributes", n->path,
              strerror(-rc));
    return 0;
}

/* Revalidate the child name of directory node dir from dir's listing (fuse_int.h DESIGN,
 * "revalidate"): 0 with a filled, -ENOENT (absent from a complete listing), -EAGAIN (ask the
 * backend about this name instead), or the rebuild's error. min_fetched_ns: what the child's
 * node already holds (a listing older than that does not answer). */
static int from_listing(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *dir,
                        const char *name, uint64_t min_fetched_ns, struct tfs_attr *a)
{
    struct tfs_listing *l = NULL;
    int rc = tfs_listing_for_child(fs, io, dir, min_fetched_ns, &l);
    if (rc)
        return rc;
    const struct tfs_dirent *e = tfs_listing_find(l, name);
    if (e) {
        tfs_dirent_attr(l, e, a);
        a->writable = false; /* revalidation is for read-cache namespaces only */
    }
    tfs_listing_unref(l);
    return e ? 0 : -ENOENT;
}

/* What a node holds: the fetched_ns of its attributes (0: none), and whether it has any. */
static uint64_t held_fetched_ns(struct tfs_node *n, bool *have)
{
    pthread_mutex_lock(&n->mu);
    *have = n->attr_valid;
    uint64_t t = n->attr_valid ? n->attr.fetched_ns : 0;
    if (t < n->attr_floor_ns)
        t = n->attr_floor_ns; /* dropped: only information newer than the drop will do */
    pthread_mutex_unlock(&n->mu);
    return t;
}

/* tfs_node_attr's cache miss for a node of a read-cache namespace: from the parent's listing
 * when that is the better way, else the stat path. */
static int revalidate(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *n,
                      struct tfs_attr *a)
{
    const char *path = n->path; /* stays readable during the call (renames: graveyard) */
    const char *slash = strrchr(path, '/');
    int rc = -EAGAIN;
    if (slash && slash[1] != '\0' && !tfs_is_virtual_dir(fs, path) && n->nsops->revalidate) {
        size_t pl = slash == path ? 1 : (size_t)(slash - path);
        char *ppath = strndup(path, pl);
        struct tfs_node *dir = ppath ? tfs_node_get_path(fs, ppath) : NULL;
        free(ppath);
        if (dir) {
            bool have = false;
            uint64_t held = held_fetched_ns(n, &have);
            rc = from_listing(fs, io, dir, slash + 1, held, a);
            tfs_node_put(fs, dir);
            if (rc && rc != -EAGAIN && rc != -ENOENT && have)
                return rc; /* the backend cannot list: the last known attributes, no HEAD */
        }
    }
    if (rc == -EAGAIN || (rc && rc != -ENOENT))
        rc = stat_path(fs, io, path, a);
    return rc;
}

int tfs_node_attr(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *n,
                  struct tfs_attr *a)
{
    /* write-back namespaces change under the mount's own writes: no attribute cache */
    bool cached = n->nsops->cached;
    pthread_mutex_lock(&n->mu);
    if (cached && n->attr_valid && tier_now_mono_ns() < n->attr_expire_ns) {
        *a = n->attr;
        pthread_mutex_unlock(&n->mu);
        return 0;
    }
    pthread_mutex_unlock(&n->mu);
    int rc = cached ? revalidate(fs, io, n, a) : stat_path(fs, io, n->path, a);
    if (rc == 0 && !cached) {
        pthread_mutex_lock(&n->mu);
        n->attr = *a;
        n->attr_valid = true;
        n->attr_expire_ns = a->fetched_ns;
        pthread_mutex_unlock(&n->mu);
        return 0;
    }
    if (rc == 0) {
        tfs_node_set_attr(fs, n, a);
        return 0;
    }
    return rc == -ENOENT ? rc : stale_attr(n, a, rc);
}

int tfs_resolve_child(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *parent,
                      const char *path, const char *name, struct tfs_attr *a)
{
    const struct tfs_ns_ops *ops = tfs_path_ops(fs, path);
    int mrc;
    if (stat_without_backend(fs, io, ops, path, a, &mrc))
        return mrc;
    if (tfs_is_virtual_dir(fs, parent->path)) {
        /* only namespace roots live under a virtual directory */
        struct tierd_ns *ns = NULL;
        char *key = NULL;
        bool is_root = false;
        int rc = tfs_resolve(fs, path, &ns, &key, &is_root);
        free(key);
        if (rc == 0 && is_root) {
            dir_attr(fs, a);
            a->writable = ops->writable;
            return 0;
        }
        return -ENOENT;
    }
    struct tfs_listing *l = tfs_listing_peek(fs, parent);
    if (l) {
        const struct tfs_dirent *e = tfs_listing_find(l, name);
        int rc = -ENOENT;
        if (e) {
            tfs_dirent_attr(l, e, a);
            rc = 0;
        }
        bool cut = l->truncated || l->from_pins;
        tfs_listing_unref(l);
        if (rc == 0 || !cut)
            return rc;
        /* not among the first max_dir_entries (or not pinned): ask the backend */
        return stat_path(fs, io, path, a);
    }
    /* the parent's listing is stale or missing: revalidate from a rebuilt listing when that
     * pays (DESIGN), not older than what a node of this name already holds */
    struct tfs_node *old = tfs_node_get_path(fs, path);
    bool have = false;
    uint64_t held = old ? held_fetched_ns(old, &have) : 0;
    tfs_node_put(fs, old);
    int rc = from_listing(fs, io, parent, name, held, a);
    if (rc == 0 || rc == -ENOENT)
        return rc;
    if (rc != -EAGAIN && have)
        return rc; /* the backend cannot list: lookup answers with the node's last attributes */
    return stat_path(fs, io, path, a);
}

/* The reserved name at a namespace's root (dataset versions' manifests) is not in the mount. */
static bool reserved_child(struct tierd_fuse *fs, const char *path, const char *name)
{
    if (!dataset_reserved_name(name))
        return false;
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    bool is_root = false, r = false;
    if (tfs_resolve(fs, path, &ns, &key, &is_root) == 0)
        r = dataset_reserved_key(ns, key);
    free(key);
    return r;
}

void tfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tfs_opstat os = tfs_op_start();
    struct tier_ioctx io = tfs_req_io(fs, req);
    struct tfs_node *p = tfs_node_get(fs, parent);
    char *path = NULL;
    struct tfs_node *n = NULL;
    struct tfs_attr a;
    int rc;
    if (!p) {
        rc = -ESTALE;
        goto fail;
    }
    rc = tfs_path_join(p->path, name, &path);
    if (rc)
        goto fail;
    rc = reserved_child(fs, path, name) ? -ENOENT : tfs_resolve_child(fs, &io, p, path, name, &a);
    if (rc == -ENOENT) {
        /* negative entry, cached by the kernel for entry_ttl */
        struct fuse_entry_param e;
        memset(&e, 0, sizeof(e));
        e.ino = 0;
        e.entry_timeout = tfs_path_perm(fs, path)->entry_ttl_s;
        tfs_op_done(fs, &io, TELE_OP_LOOKUP, -1, os, 0, 0);
        fuse_reply_entry(req, &e);
        goto out;
    }
    bool stale = false;
    if (rc) {
        /* backend unavailable: a node we already know keeps its last attributes */
        int lrc = tfs_node_lookup(fs, path, &n);
        if (lrc == 0 && stale_attr(n, &a, rc) == 0) {
            stale = true;
            rc = 0;
        } else if (lrc == 0) {
            tfs_node_forget(fs, n->ino, 1);
        }
        if (rc)
            goto fail;
    } else {
        rc = tfs_node_lookup(fs, path, &n);
        if (rc)
            goto fail;
    }
    if (!stale)
        tfs_node_set_attr(fs, n, &a);
    struct fuse_entry_param e;
    tfs_fill_entry(fs, n, &a, &e);
    tfs_op_done(fs, &io, TELE_OP_LOOKUP, -1, os, 0, 0);
    if (fuse_reply_entry(req, &e) != 0)
        tfs_node_forget(fs, n->ino, 1); /* the kernel did not get it */
    goto out;
fail:
    tfs_op_done(fs, &io, TELE_OP_LOOKUP, -1, os, 0, rc);
    fuse_reply_err(req, tfs_errno(rc));
out:
    tfs_node_put(fs, n);
    tfs_node_put(fs, p);
    free(path);
}

void tfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tfs_node *n = tfs_node_get_or_stale(req, fs, ino);
    if (!n)
        return;
    struct tfs_attr a;
    struct tfs_opstat os = tfs_op_start();
    struct tier_ioctx io = tfs_req_io(fs, req);
    int rc = tfs_node_attr(fs, &io, n, &a);
    tfs_op_done(fs, &io, TELE_OP_LOOKUP, -1, os, 0, rc);
    if (rc) {
        fuse_reply_err(req, tfs_errno(rc));
    } else {
        struct stat st;
        tfs_fill_stat(fs, n, &a, &st);
        fuse_reply_attr(req, &st, n->perm->attr_ttl_s);
    }
    tfs_node_put(fs, n);
}

void tfs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct cache_stats cs;
    memset(&cs, 0, sizeof(cs));
    if (fs->ctx.cache)
        cache_stats_get(fs->ctx.cache, &cs);
    uint64_t bsize = fs->ctx.block_size ? fs->ctx.block_size : 4096;
    uint64_t total = cs.ram.bytes_budget + cs.disk.bytes_budget;
    uint64_t used = cs.ram.bytes_used + cs.disk.bytes_used;
    if (used > total)
        used = total;
    struct statvfs sv;
    memset(&sv, 0, sizeof(sv));
    sv.f_bsize = (unsigned long)bsize;
    sv.f_frsize = (unsigned long)bsize;
    sv.f_blocks = (fsblkcnt_t)(total / bsize);
    sv.f_bfree = (fsblkcnt_t)((total - used) / bsize);
    sv.f_bavail = sv.f_bfree;
    sv.f_files = 1000000;
    sv.f_ffree = 0;
    sv.f_namemax = BACKEND_SEGMENT_MAX;
    sv.f_flag = fs->ctx.wb ? 0 : ST_RDONLY;
    fuse_reply_statfs(req, &sv);
}
