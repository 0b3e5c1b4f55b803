/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_node.c - the core the FUSE operation files share, calling none of them: the errno the
 * kernel gets (tfs_errno), the attribute and entry replies (tfs_fill_*), a node's attribute
 * cache (tfs_node_set_attr / _drop_attr), listing references, the namespace and mode of a path
 * (tfs_path_ops: one struct tfs_ns_ops per mode, tfs_path_perm), and who asks (tfs_req_io,
 * the per-request telemetry, the list of open handles).
 *
 * The operation files sit above it (docs/ARCHITECTURE.md, "The FUSE files"): read code asks
 * a node's ops table (n->nsops) what its namespace does, never which mode it is in; the
 * write-back and control modes register their tables at set-up (tfs_wb_init, tfs_ctl_init), so
 * this file and the read code do not call into them. Called from the FUSE worker threads; a node's
 * attribute cache under its mutex, the handle list under fs->handles_mu.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/timeutil.h"
#include "fuse/fuse_int.h"
#include "tenant/tenant.h"

/* Read-cache namespaces and the virtual directories above the namespaces: the backend through
 * the node and listing caches, read-only. */
const struct tfs_ns_ops tfs_ns_read_cache = {
    .mode = TFS_MODE_READ_CACHE,
    .cached = true,
    .revalidate = true,
};

int tfs_errno(int neg)
{
    int e = neg < 0 ? -neg : neg;
    switch (e) {
    case ENOENT:
    case ENOTDIR:
    case EISDIR:
    case ENOMEM:
    case EROFS:
    case ENAMETOOLONG:
    case EACCES:
    case EPERM:
    case EINVAL:
    case ENOSYS:
    case ENOTEMPTY:
    case ENOSPC:
    case EXDEV:
    case EEXIST:
    case EBADF:
    case EFBIG:
    case EDQUOT:
    case E2BIG:
    case ENOTSUP:
        return e;
    default:
        return EIO; /* backend failures, timeouts, replaced objects (ESTALE) */
    }
}

/* Owner and mode are synthesised (objects have none; a POSIX backend's own modes are not
 * mirrored): the namespace's (or [mount]'s) uid, gid and umask over 0444/0555, or 0666/0777 in
 * a write-back namespace. With default_permissions the kernel enforces them, so they decide
 * who of the local users may read (allow_other) and create checkpoints. */
static void fill_stat_perm(struct tierd_fuse *fs, uint64_t ino, const struct tfs_perm *perm,
                           const struct tfs_attr *a, struct stat *st)
{
    const struct tfs_perm p = *perm;
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    if (a->is_dir) {
        st->st_mode = S_IFDIR | (a->mode ? a->mode : ((a->writable ? 0777 : 0555) & ~p.umask));
        st->st_nlink = 2;
        st->st_size = 4096;
    } else {
        st->st_mode = S_IFREG | (a->mode ? a->mode : ((a->writable ? 0666 : 0444) & ~p.umask));
        st->st_nlink = 1;
        st->st_size = (off_t)a->size_bytes;
        st->st_blocks = (blkcnt_t)((a->size_bytes + 511) / 512);
    }
    /* a large preferred I/O size makes cat/cp issue 1 MiB reads */
    st->st_blksize = 1 << 20;
    st->st_uid = p.uid;
    st->st_gid = p.gid;
    int64_t m = a->mtime_ns > 0 ? a->mtime_ns : (int64_t)(fs->ctx.start_ns);
    st->st_mtim.tv_sec = m / 1000000000;
    st->st_mtim.tv_nsec = m % 1000000000;
    st->st_ctim = st->st_mtim;
    st->st_atim = st->st_mtim;
}

void tfs_fill_stat(struct tierd_fuse *fs, const struct tfs_node *n, const struct tfs_attr *a,
                   struct stat *st)
{
    fill_stat_perm(fs, n->ino, n->perm, a, st);
}

void tfs_fill_entry(struct tierd_fuse *fs, const struct tfs_node *n, const struct tfs_attr *a,
                    struct fuse_entry_param *e)
{
    memset(e, 0, sizeof(*e));
    e->ino = n->ino;
    e->generation = 1;
    e->attr_timeout = n->perm->attr_ttl_s;
    e->entry_timeout = n->perm->entry_ttl_s;
    fill_stat_perm(fs, n->ino, n->perm, a, &e->attr); /* the node at hand: no table probe */
}

/* The session's notifier thread: sends the queued inode invalidations, one at a time. */
static void *inval_main(void *arg)
{
    struct tierd_fuse *fs = arg;
    pthread_mutex_lock(&fs->inval_mu);
    while (!fs->inval_stop) {
        if (fs->inval_n == 0) {
            pthread_cond_wait(&fs->inval_cv, &fs->inval_mu);
            continue;
        }
        fuse_ino_t ino = fs->inval_q[--fs->inval_n];
        pthread_mutex_unlock(&fs->inval_mu);
        if (fs->se)
            fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
        pthread_mutex_lock(&fs->inval_mu);
    }
    pthread_mutex_unlock(&fs->inval_mu);
    return NULL;
}

/* Queue ino's invalidation (pages and attributes) for the notifier thread, started at the first
 * (best effort: without memory or a thread the kernel keeps the pages until they age out). */
static void inval_queue(struct tierd_fuse *fs, fuse_ino_t ino)
{
    pthread_mutex_lock(&fs->inval_mu);
    bool queued = false;
    for (size_t i = 0; i < fs->inval_n && !queued; i++)
        queued = fs->inval_q[i] == ino;
    if (!queued && !fs->inval_stop && fs->inval_n == fs->inval_cap) {
        size_t cap = fs->inval_cap ? fs->inval_cap * 2 : 16;
        fuse_ino_t *q = realloc(fs->inval_q, cap * sizeof(*q));
        if (q) {
            fs->inval_q = q;
            fs->inval_cap = cap;
        }
    }
    if (!queued && !fs->inval_stop && fs->inval_n < fs->inval_cap) {
        if (!fs->inval_started) {
            sigset_t all, old;
            sigfillset(&all); /* the signals that end the loops stay with them */
            pthread_sigmask(SIG_BLOCK, &all, &old);
            fs->inval_started = pthread_create(&fs->inval_thr, NULL, inval_main, fs) == 0;
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (!fs->inval_started)
                log_warn("fuse: cannot start the invalidation thread; a replaced file's old "
                         "pages stay in the kernel until they age out");
        }
        if (fs->inval_started) {
            fs->inval_q[fs->inval_n++] = ino;
            pthread_cond_signal(&fs->inval_cv);
        }
    }
    pthread_mutex_unlock(&fs->inval_mu);
}

void tfs_inval_stop(struct tierd_fuse *fs)
{
    pthread_mutex_lock(&fs->inval_mu);
    fs->inval_stop = true;
    fs->inval_n = 0;
    pthread_cond_signal(&fs->inval_cv);
    bool started = fs->inval_started;
    fs->inval_started = false;
    pthread_mutex_unlock(&fs->inval_mu);
    if (started)
        pthread_join(fs->inval_thr, NULL);
    free(fs->inval_q);
    fs->inval_q = NULL;
    fs->inval_cap = 0;
}

void tfs_node_set_attr(struct tierd_fuse *fs, struct tfs_node *n, struct tfs_attr *a)
{
    /* the TTL is the node's namespace's (n->perm) */
    if (a->fetched_ns == 0)
        a->fetched_ns = tier_now_mono_ns();
    bool switched = false;
    pthread_mutex_lock(&n->mu);
    if (n->attr_valid && n->attr.fetched_ns > a->fetched_ns) {
        *a = n->attr;
    } else if (a->fetched_ns < n->attr_floor_ns) {
        /* older than what made the node drop its attributes: not kept (a stale listing) */
    } else {
        n->attr = *a;
        n->attr_valid = true;
        n->attr_expire_ns = a->fetched_ns + n->perm->attr_ttl_ns;
        /* no-open connection: the inode's reads move to the new version, and the kernel's pages
         * and attributes of the old one go (below), so no reader mixes the two */
        if (n->rd_set && a->etag[0] && !a->is_dir && strcmp(n->rd_etag, a->etag) != 0) {
            memcpy(n->rd_etag, a->etag, sizeof(n->rd_etag));
            n->rd_size = a->size_bytes;
            n->rd_gen++;
            switched = true;
        }
    }
    pthread_mutex_unlock(&n->mu);
    /* Queued, never sent here: the caller may be a worker answering a READ of this inode (two
     * first reads, the object replaced between their revalidations), and the kernel's
     * invalidation waits for the page that READ holds locked. */
    if (switched)
        inval_queue(fs, n->ino);
}

void tfs_node_drop_attr(struct tfs_node *n)
{
    uint64_t now = tier_now_mono_ns();
    pthread_mutex_lock(&n->mu);
    n->attr_valid = false;
    n->attr_floor_ns = now; /* what was known before now is out of date (the object changed) */
    pthread_mutex_unlock(&n->mu);
}

static void listing_free(struct tfs_listing *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i].name);
    free(l->e);
    free(l);
}

void tfs_listing_unref(struct tfs_listing *l)
{
    if (l && atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1)
        listing_free(l);
}

void tfs_dirent_attr(const struct tfs_listing *l, const struct tfs_dirent *e, struct tfs_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->is_dir = e->is_dir;
    a->size_bytes = e->size_bytes;
    a->mtime_ns = e->mtime_ns;
    memcpy(a->etag, e->etag, sizeof(a->etag));
    a->fetched_ns = l->fetched_ns;
}

const struct tfs_dirent *tfs_listing_find(const struct tfs_listing *l, const char *name)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(l->e[mid].name, name);
        if (c == 0)
            return &l->e[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The index of the namespace holding path (prefix, then '\0' or '/'), or -1. wb_only: of the
 * write-back namespaces only. */
static long ns_index(const struct tierd_fuse *fs, const char *path, bool wb_only)
{
    const struct tierfs_ctx *cx = &fs->ctx;
    for (size_t i = 0; i < cx->nns; i++) {
        const struct tierd_ns_conf *c = cx->ns[i].conf;
        if (wb_only && c->mode != TIERD_NS_WRITE_BACK)
            continue;
        size_t l = strlen(c->path);
        if (strncmp(path, c->path, l) == 0 && (path[l] == '\0' || path[l] == '/'))
            return (long)i;
    }
    return -1;
}

bool tfs_ctl_path(const struct tierd_fuse *fs, const char *path)
{
    size_t l = sizeof(TFS_CTL_DIR) - 1;
    return fs->ctl && strncmp(path, TFS_CTL_DIR, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

const struct tfs_ns_ops *tfs_path_ops(const struct tierd_fuse *fs, const char *path)
{
    if (fs->ctl_ops && tfs_ctl_path(fs, path))
        return fs->ctl_ops;
    /* a write-back namespace is one only with the burst buffer open */
    if (fs->wb_ops && fs->ctx.wb && ns_index(fs, path, true) >= 0)
        return fs->wb_ops;
    return &tfs_ns_read_cache;
}

const struct tfs_perm *tfs_path_perm(const struct tierd_fuse *fs, const char *path)
{
    if (tfs_ctl_path(fs, path)) {
        /* a dataset version's files are its namespace's (owner, modes, TTLs: immutable) */
        const struct tfs_perm *vp =
            fs->ctl_ops && fs->ctl_ops->perm ? fs->ctl_ops->perm(fs, path) : NULL;
        return vp ? vp : &fs->ctl_perm; /* the control files: no attribute or entry caching */
    }
    long i = ns_index(fs, path, false);
    /* else the root and the virtual directories above the namespaces */
    return i >= 0 ? &fs->ns_perm[i] : &fs->perm;
}

void tfs_handle_track(struct tierd_fuse *fs, struct tfs_hbase *h, uint32_t kind, uint32_t tenant)
{
    h->kind = kind;
    h->tenant = tenant;
    tenant_hold(fs->ctx.tenants, tenant);
    pthread_mutex_lock(&fs->handles_mu);
    h->next = fs->handles.next;
    h->prev = &fs->handles;
    h->next->prev = h;
    fs->handles.next = h;
    pthread_mutex_unlock(&fs->handles_mu);
}

void tfs_handle_untrack(struct tierd_fuse *fs, struct tfs_hbase *h)
{
    pthread_mutex_lock(&fs->handles_mu);
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->prev = h->next = NULL;
    pthread_mutex_unlock(&fs->handles_mu);
    tenant_unhold(fs->ctx.tenants, h->tenant);
}

struct tier_ioctx tfs_req_io(struct tierd_fuse *fs, fuse_req_t req)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    if (!fs->ctx.tenants || !ctx)
        return TIER_IOCTX_DEFAULT;
    return tenant_resolve(fs->ctx.tenants, ctx->pid, ctx->uid, ctx->gid);
}

struct tfs_opstat tfs_op_start(void)
{
    return (struct tfs_opstat){.t0 = tier_now_mono_ns(), .calls0 = tier_backend_calls()};
}

void tfs_op_done(struct tierd_fuse *fs, const struct tier_ioctx *io, enum tele_op op, int tier,
                 struct tfs_opstat st, uint64_t bytes, int err)
{
    if (!fs->ctx.tele)
        return;
    if (tier < 0)
        tier = tier_backend_calls() != st.calls0 ? TELE_TIER_BACKEND : TELE_TIER_RAM;
    tele_op_record(fs->ctx.tele, io, op, (enum tele_tier)tier, tier_now_mono_ns() - st.t0, bytes,
                   err);
}
