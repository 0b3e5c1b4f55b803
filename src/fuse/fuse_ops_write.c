/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ops_write.c - the mutating operations of write-back namespaces (checkpoint burst buffer,
 * src/writeback/wb.h): create, open for writing, write, fsync, flush, release, setattr (size),
 * unlink, rename, mkdir, rmdir. They sit in front of the read operations (fs->wb_inner), which
 * keep every path outside the write-back namespaces: read-cache namespaces keep answering EROFS
 * (fuse_ops_ro.c) and their open/read/release go to fuse_ops_file.c. The read-your-writes side
 * (lookup, getattr, readdir) and the directory markers are fuse_wb_ns.c's, the generations
 * fuse_wb_gen.c's.
 *
 * DESIGN:
 *   generations  the burst buffer writes whole files: wb_file_create_ex(REPLACE_AT_SEAL) starts
 *             a new generation of a key; the previous one stays live (readable, uploading) until
 *             the new one is sealed, and is cancelled in the seal's journal transaction, so a
 *             failed copy, a failed write or a crash before close leaves the old version. Readers
 *             through the mount see the newest generation (read-your-writes). All write
 *             handles of one inode share one generation (struct tfs_wstate on the node); it is
 *             created by create / O_TRUNC, or lazily by the first write or truncate of a handle
 *             opened without O_TRUNC, which first copies the current content (from the
 *             buffer's local copy or the backend) into a temporary file in the spool and then
 *             into the new generation (overwrite in place, append).
 *   close     every flush() (close(2)) seals the open generation (wb_file_close: fsync,
 *             XXH3-128, journal SEALED) and returns its error to close(2), also while other
 *             write handles are open (RELEASE is asynchronous and cannot report an error);
 *             their later writes start a new generation copying the sealed content. With
 *             durability = remote, close then waits (wb_wait) until the object is in the
 *             backend. Release only seals what no flush did.
 *   fail-stop a failed fsync/close makes the inode's writers fail with EIO from then on (the
 *             buffer also marks the file FAILED and never uploads it). ENOSPC from the buffer's
 *             bounds (its disk budget or backlog, checked before writing) is returned as ENOSPC
 *             and the handle stays usable; ENOSPC from the spool's file system itself fails the
 *             file (wb_write: part of the range may have changed), later writes EIO.
 *   reads     a handle reads the shared generation while one is open, else the buffer's local
 *             copy (wb_read), else the backend through the block cache.
 *   unlink    wb_unlink (cancels an upload; the object never appears) and backend_del of any
 *             older object under the key; the node moves to an unreachable path, so a file
 *             created under the name gets a write state of its own, and the unlinked file's
 *             handles never start a generation of the key again.
 *   rename    files only, within one namespace: wb_rename, or, for a file the buffer does not
 *             hold locally, a copy into a new generation under the new key and a delete of the
 *             old one. Directories: EXDEV (mv then copies).
 *   mkdir     S3 has no directories: mkdir records a local marker (this process only) so the
 *             directory lists until a file is created under it, which makes it implicit in the
 *             buffer's rows and then the backend's keys (create drops the markers above it).
 *             A directory a file leaves (unlink, rename away) or whose subdirectory goes
 *             (rmdir) gets a marker too, so it stays until rmdir as on a file system
 *             (marker_keep_parent; at most TFS_MARKERS_MAX markers). A marker below a path
 *             makes the path a directory (lookup and listing). mkdir is EEXIST, and rename of
 *             a directory EXDEV, also for one only S3's keys imply (tfs_implicit_dir: one LIST).
 *   rmdir     ENOTEMPTY while any file (pending, or in the backend: a listing that fails
 *             refuses) or marker is below; a stat ENOENT is a directory S3 dropped with its
 *             last object; then backend_rmdir (the POSIX backend's empty directory) and the
 *             marker goes.
 * Lock order: node mu -> wstate mu. No lock is held across backend I/O except the wstate mutex
 * of the inode being written (writes of one inode are serialised, as the buffer requires).
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cache/cache.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "lifecycle/access.h"
#include "datasets/dataset.h"
#include "fuse/fuse_int.h"
#include "fuse/fuse_wb.h"
#include "writeback/wb.h"

/* Is path in a write-back namespace (with the burst buffer open)? No allocation. */
static bool in_wb(const struct tierd_fuse *fs, const char *path)
{
    return tfs_path_ops(fs, path)->mode == TFS_MODE_WRITE_BACK;
}

/* ---- handles ---- */

static void handle_destroy(struct tierd_fuse *fs, struct tfs_whandle *h)
{
    pthread_mutex_destroy(&h->mu);
    tfs_node_put(fs, h->n);
    free(h->key);
    free(h);
}

static void handle_free(struct tierd_fuse *fs, struct tfs_whandle *h)
{
    if (!h)
        return;
    tfs_handle_untrack(fs, &h->hb);
    handle_destroy(fs, h);
}

void tfs_wb_orphan_free(struct tierd_fuse *fs, struct tfs_hbase *hb)
{
    struct tfs_whandle *h = (struct tfs_whandle *)hb;
    struct tfs_wstate *w = h->w;
    if (w && w->wf) {
        /* written and never closed (the process still holds it, or the daemon was stopped
         * under it): not sealed, as at a crash; only closed files are promised */
        log_warn("fuse: %s was still open for writing at unmount; its unclosed writes are "
                 "discarded (the previous version, if any, stays)",
                 h->n->path);
        wb_file_discard(w->wf);
        w->wf = NULL;
    }
    if (w)
        tfs_wb_wstate_detach(fs, h->n, w, "unmount");
    handle_destroy(fs, h);
}

static int handle_new(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *n,
                      struct tierd_ns *ns, char *key, bool writable, struct tfs_whandle **out)
{
    struct tfs_whandle *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->n = n;
    h->ns = ns;
    h->key = key;
    h->writable = writable;
    h->io = *io;
    pthread_mutex_init(&h->mu, NULL);
    if (writable) {
        h->w = tfs_wb_wstate_attach(n);
        if (!h->w) {
            h->key = NULL;
            h->n = NULL;
            pthread_mutex_destroy(&h->mu);
            free(h);
            return -ENOMEM;
        }
    }
    tfs_handle_track(fs, &h->hb, TFS_H_WB, io->tenant);
    *out = h;
    return 0;
}

static bool is_wb_handle(const struct fuse_file_info *fi)
{
    return fi && fi->fh && *(const uint32_t *)(uintptr_t)fi->fh == TFS_H_WB;
}

static void w_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tfs_node *n = tfs_node_get_or_stale(req, fs, ino);
    if (!n)
        return;
    if (!in_wb(fs, n->path)) {
        tfs_node_put(fs, n);
        fs->wb_inner.open(req, ino, fi);
        return;
    }
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    bool is_root = false;
    struct tfs_whandle *h = NULL;
    struct tfs_attr a;
    struct tfs_opstat os = tfs_op_start();
    struct tier_ioctx io = tfs_req_io(fs, req);
    int rc = tfs_node_attr(fs, &io, n, &a);
    if (rc == 0 && a.is_dir)
        rc = -EISDIR;
    if (rc == 0)
        rc = tfs_resolve(fs, n->path, &ns, &key, &is_root);
    if (rc == 0 && is_root)
        rc = -EISDIR;
    if (rc)
        goto fail;
    bool writable = (fi->flags & O_ACCMODE) != O_RDONLY;
    if (fs->ctx.access) /* the policies' idle trigger and tenant filter (access.h) */
        access_note(fs->ctx.access, ns->be->name, key, (int64_t)tier_now_real_ns(), io.tenant);
    rc = handle_new(fs, &io, n, ns, key, writable, &h);
    if (rc)
        goto fail;
    key = NULL;
    n = NULL; /* the handle holds the reference */
    if (writable && (fi->flags & O_TRUNC)) {
        pthread_mutex_lock(&h->w->mu);
        rc = tfs_wb_truncate_locked(fs, h, 0);
        pthread_mutex_unlock(&h->w->mu);
        if (rc)
            goto fail;
    }
    fi->keep_cache = 0;
    fi->direct_io = 0;
    fi->fh = (uint64_t)(uintptr_t)h;
    tfs_op_done(fs, &io, TELE_OP_OPEN, -1, os, 0, 0);
    if (fuse_reply_open(req, fi) != 0) {
        if (h->w)
            tfs_wb_wstate_detach(fs, h->n, h->w, "open");
        handle_free(fs, h);
    }
    return;
fail:
    if (h) {
        if (h->w)
            tfs_wb_wstate_detach(fs, h->n, h->w, "open");
        handle_free(fs, h);
    }
    free(key);
    tfs_node_put(fs, n);
    tfs_op_done(fs, &io, TELE_OP_OPEN, -1, os, 0, rc);
    fuse_reply_err(req, tfs_errno(rc));
}

static void w_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     struct fuse_file_info *fi)
{
    (void)mode;
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tfs_opstat os = tfs_op_start();
    struct tier_ioctx io = tfs_req_io(fs, req);
    struct tfs_node *p = tfs_node_get(fs, parent);
    struct tfs_node *n = NULL;
    struct tfs_whandle *h = NULL;
    struct tierd_ns *ns = NULL;
    char *path = NULL, *key = NULL;
    bool is_root = false;
    int rc = p ? tfs_path_join(p->path, name, &path) : -ESTALE;
    if (rc)
        goto fail;
    if (!in_wb(fs, path)) {
        rc = -EROFS;
        goto fail;
    }
    rc = tfs_resolve(fs, path, &ns, &key, &is_root);
    if (rc == 0 && is_root)
        rc = -EEXIST;
    if (rc == 0 && dataset_reserved_key(ns, key))
        rc = -EPERM; /* dataset versions' manifests live there (datasets/dataset.h) */
    if (rc)
        goto fail;
    rc = tfs_node_lookup(fs, path, &n); /* the kernel's lookup reference + our ref */
    if (rc)
        goto fail;
    if (fs->ctx.access) /* a create is a use, by the creator's tenant (access.h) */
        access_note(fs->ctx.access, ns->be->name, key, (int64_t)tier_now_real_ns(), io.tenant);
    rc = handle_new(fs, &io, n, ns, key, true, &h);
    if (rc) {
        tfs_node_forget(fs, n->ino, 1);
        goto fail;
    }
    key = NULL;
    pthread_mutex_lock(&h->w->mu);
    if (h->w->unlinked)
        rc = -EIO; /* never join the write state of a cancelled file (see w_unlink) */
    else if (h->w->wf)
        rc = (fi->flags & O_TRUNC) ? wb_truncate(h->w->wf, 0) : 0;
    else
        rc = tfs_wb_new_gen(fs, &io, ns, h->key, NULL, NULL, &h->w->wf);
    pthread_mutex_unlock(&h->w->mu);
    if (rc) {
        tfs_wb_wstate_detach(fs, n, h->w, "create");
        tfs_node_forget(fs, n->ino, 1);
        handle_free(fs, h);
        n = NULL;
        goto fail;
    }
    struct tfs_attr a;
    memset(&a, 0, sizeof(a));
    a.mtime_ns = (int64_t)tier_now_real_ns();
    a.writable = true;
    struct fuse_entry_param e;
    tfs_fill_entry(fs, n, &a, &e);
    fi->keep_cache = 0;
    fi->direct_io = 0;
    fi->fh = (uint64_t)(uintptr_t)h;
    tfs_op_done(fs, &io, TELE_OP_OPEN, -1, os, 0, 0);
    tfs_wb_marker_drop_above(fs, path);
    if (fuse_reply_create(req, &e, fi) != 0) {
        tfs_wb_wstate_detach(fs, n, h->w, "create");
        tfs_node_forget(fs, n->ino, 1);
        handle_free(fs, h);
    }
    tfs_node_put(fs, p);
    free(path);
    return;
fail:
    tfs_op_done(fs, &io, TELE_OP_OPEN, -1, os, 0, rc);
    fuse_reply_err(req, tfs_errno(rc));
    tfs_node_put(fs, p);
    free(path);
    free(key);
}

static void w_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    if (!is_wb_handle(fi)) {
        fs->wb_inner.read(req, ino, size, off, fi);
        return;
    }
    struct tfs_whandle *h = (struct tfs_whandle *)(uintptr_t)fi->fh;
    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (fs->ctx.access) { /* the policies' idle trigger (access.h), once a second per handle */
        uint64_t now = tier_now_mono_ns();
        uint64_t last = atomic_load_explicit(&h->access_mono, memory_order_relaxed);
        if (!last || now - last >= 1000000000ULL) {
            atomic_store_explicit(&h->access_mono, now, memory_order_relaxed);
            access_note(fs->ctx.access, h->ns->be->name, h->key, (int64_t)tier_now_real_ns(),
                        h->io.tenant);
        }
    }
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    ssize_t n = -ENOENT;
    struct tfs_opstat os = tfs_op_start();
    int tier = TELE_TIER_DISK; /* the spool, unless the cache serves it below */
    if (h->w) {
        pthread_mutex_lock(&h->w->mu);
        if (h->w->wf)
            n = wb_file_read(h->w->wf, buf, size, off);
        pthread_mutex_unlock(&h->w->mu);
    }
    if (n == -ENOENT)
        n = wb_read(fs->ctx.wb, h->ns->be->name, h->key, buf, size, off);
    if (n == -ENOENT) {
        /* uploaded and dropped locally: the backend, through the cache */
        pthread_mutex_lock(&h->mu);
        int rc = 0;
        if (!h->be_known) {
            struct backend_stat st;
            memset(&st, 0, sizeof(st));
            rc = backend_stat(h->ns->be, &h->io, h->key, &st);
            if (rc == 0) {
                memcpy(h->etag, st.etag, sizeof(h->etag));
                h->etag[sizeof(h->etag) - 1] = '\0';
                h->be_size = st.size_bytes;
                h->be_known = true;
            }
        }
        pthread_mutex_unlock(&h->mu);
        if (rc) {
            n = rc;
        } else if ((uint64_t)off >= h->be_size) {
            n = 0;
        } else {
            size_t len =
                (uint64_t)off + size > h->be_size ? (size_t)(h->be_size - (uint64_t)off) : size;
            struct cache_obj obj = {
                .be = h->ns->be, .key = h->key, .etag = h->etag, .size_bytes = h->be_size};
            enum cache_served served = CACHE_SERVED_BACKEND;
            n = fs->ctx.cache ? cache_read_served(fs->ctx.cache, &h->io, &obj, (uint64_t)off, buf,
                                                  len, &served)
                              : backend_read(h->ns->be, &h->io, h->key, (uint64_t)off, buf, len,
                                             h->etag, NULL);
            tier = (int)served;
        }
        if (tier_backend_calls() != os.calls0)
            tier = TELE_TIER_BACKEND;
    }
    tfs_op_done(fs, &h->io, TELE_OP_READ, tier, os, n > 0 ? (uint64_t)n : 0, n < 0 ? (int)n : 0);
    if (n < 0) {
        log_warn("fuse: read of %s at %lld failed: %s", h->n->path, (long long)off,
                 strerror((int)-n));
        fuse_reply_err(req, tfs_errno((int)n));
    } else {
        fuse_reply_buf(req, buf, (size_t)n);
    }
    free(buf);
}

/* One write into the handle's generation, from memory (buf) or spliced from the pipe src_fd
 * (buf NULL); replies unless the splice cannot be done (-EOPNOTSUPP: nothing written, no reply,
 * the caller copies the bytes and writes them from memory). */
static ssize_t write_gen(fuse_req_t req, struct tfs_whandle *h, const char *buf, int src_fd,
                         size_t size, off_t off)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tfs_opstat os = tfs_op_start();
    pthread_mutex_lock(&h->w->mu);
    ssize_t n = tfs_wb_ensure_gen(fs, h);
    if (n == 0)
        n = buf ? wb_write(h->w->wf, buf, size, off) : wb_write_fd(h->w->wf, src_fd, size, off);
    if (n == -EIO)
        h->w->err = -EIO; /* fail-stop */
    if (n >= 0)
        h->dirty = true;
    pthread_mutex_unlock(&h->w->mu);
    if (n == -EOPNOTSUPP && !buf)
        return n;
    /* into the spool (the node's disk); a first write that copied the old content from the
     * backend counts as served by the backend */
    tfs_op_done(fs, &h->io, TELE_OP_WRITE,
                tier_backend_calls() != os.calls0 ? TELE_TIER_BACKEND : TELE_TIER_DISK, os,
                n > 0 ? (uint64_t)n : 0, n < 0 ? (int)n : 0);
    if (n < 0)
        fuse_reply_err(req, tfs_errno((int)n));
    else
        fuse_reply_write(req, (size_t)n);
    return n;
}

static bool writable_wb_handle(const struct fuse_file_info *fi)
{
    return is_wb_handle(fi) && ((struct tfs_whandle *)(uintptr_t)fi->fh)->writable;
}

static void w_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    if (!writable_wb_handle(fi)) {
        fuse_reply_err(req, is_wb_handle(fi) ? EBADF : EROFS);
        return;
    }
    (void)write_gen(req, (struct tfs_whandle *)(uintptr_t)fi->fh, buf, -1, size, off);
}

/* Every FUSE write, whatever the file: libfuse hands the write's bytes over in its per-thread
 * pipe (splice from /dev/fuse: the kernel passes references to the written pages, no copy) when
 * the request is a page or more, else in memory. A write-back file's bytes are spliced from the
 * pipe into its staging file: one copy (into the spool's page cache) where read(2) from /dev/fuse
 * and pwrite(2) made two. Anything else (control files, read-only paths, the buffer's test
 * hooks) reads the bytes into memory and goes through the write operation in front of all
 * (fs->top_write), as without splice. */
static void w_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
                        struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    size_t size = fuse_buf_size(bufv);
    const struct fuse_buf *b = &bufv->buf[bufv->idx];
    bool one = bufv->count - bufv->idx == 1 && bufv->off == 0;
    if (one && !(b->flags & FUSE_BUF_IS_FD)) {
        fs->top_write(req, ino, b->mem, size, off, fi);
        return;
    }
    if (one && !(b->flags & FUSE_BUF_FD_SEEK) && writable_wb_handle(fi)) {
        ssize_t n = write_gen(req, (struct tfs_whandle *)(uintptr_t)fi->fh, NULL, b->fd, size, off);
        if (n >= 0)
            bufv->idx = bufv->count; /* consumed: libfuse leaves its pipe as it is */
        if (n != -EOPNOTSUPP)
            return; /* replied; after an error libfuse drains what is left in its pipe */
    }
    char *mem = malloc(size ? size : 1);
    struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
    dst.buf[0].mem = mem;
    ssize_t n = mem ? fuse_buf_copy(&dst, bufv, FUSE_BUF_NO_SPLICE) : -ENOMEM;
    if (n >= 0 && (size_t)n != size)
        n = -EIO;
    if (n < 0) {
        log_warn("fuse: a write of %zu bytes at %lld: cannot read its bytes (%s)", size,
                 (long long)off, strerror((int)-n));
        fuse_reply_err(req, (int)-n);
    } else {
        fs->top_write(req, ino, mem, size, off, fi);
    }
    free(mem);
}

static void w_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino, (void)datasync;
    int rc = 0;
    if (is_wb_handle(fi)) {
        struct tfs_whandle *h = (struct tfs_whandle *)(uintptr_t)fi->fh;
        struct tfs_opstat os = tfs_op_start();
        if (h->w) {
            pthread_mutex_lock(&h->w->mu);
            rc = h->w->err;
            if (rc == 0 && h->w->wf) {
                rc = wb_file_fsync(h->w->wf);
                if (rc)
                    h->w->err = -EIO;
            }
            pthread_mutex_unlock(&h->w->mu);
        }
        tfs_op_done(fuse_req_userdata(req), &h->io, TELE_OP_FSYNC, TELE_TIER_DISK, os, 0, rc);
    }
    fuse_reply_err(req, rc ? tfs_errno(rc) : 0);
}

/* A durability = remote close waits this long for the backend when upload_deadline is not set:
 * then close(2) fails (ETIMEDOUT) while the file stays sealed locally and is still uploaded. */
#define REMOTE_CLOSE_TIMEOUT_MS (600ull * 1000)

struct remote_close {
    fuse_req_t req;
    char *path;
};

static void remote_done(void *arg, int rc)
{
    struct remote_close *rcl = arg;
    if (rc)
        log_err("fuse: %s is sealed locally but not in the backend (%s): %s", rcl->path,
                strerror(-rc), tier_err_msg());
    fuse_reply_err(rcl->req, rc ? tfs_errno(rc) : 0);
    free(rcl->path);
    free(rcl);
}

static void w_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct tierd_fuse *fs = fuse_req_userdata(req);
    if (!is_wb_handle(fi) || !((struct tfs_whandle *)(uintptr_t)fi->fh)->w) {
        fuse_reply_err(req, 0);
        return;
    }
    struct tfs_whandle *h = (struct tfs_whandle *)(uintptr_t)fi->fh;
    struct tfs_wstate *w = h->w;
    /* Every close(2) seals the open generation and returns the verdict, whatever other write
     * handles are open: RELEASE comes asynchronously and cannot report an error, so it must not
     * be where durability is decided. Later writes through the other handles start a new
     * generation holding a copy of the sealed content (tfs_wb_ensure_gen), which replaces this one
     * when it is sealed in turn. */
    pthread_mutex_lock(&w->mu);
    int rc = w->err;
    bool wait = h->dirty && !w->unlinked;
    h->dirty = false;
    if (rc == 0 && w->wf) {
        rc = wb_file_close(w->wf);
        w->wf = NULL;
        if (rc) {
            w->err = -EIO;
            log_err("fuse: sealing %s failed: %s", h->n->path, strerror(-rc));
        } else if (!w->unlinked) {
            wait = true;
        }
    }
    pthread_mutex_unlock(&w->mu);
    /* durability = remote: the bytes this handle wrote (sealed now or by another handle's
     * close) are in the backend when close(2) returns 0. The reply comes from the buffer's
     * waiter thread (remote_done), so a backend outage holds no FUSE worker. */
    if (rc == 0 && wait && h->ns->conf->durability == TIERD_DURABILITY_REMOTE) {
        uint64_t dl = fs->ctx.wb_upload_deadline_ms;
        struct remote_close *rcl = malloc(sizeof(*rcl));
        char *path = strdup(h->n->path);
        if (rcl && path) {
            rcl->req = req;
            rcl->path = path;
            rc = wb_wait_async(fs->ctx.wb, h->ns->be->name, h->key, true,
                               (int64_t)(dl ? dl : REMOTE_CLOSE_TIMEOUT_MS), remote_done, rcl);
            if (rc == 0)
                return;
        } else {
            rc = -ENOMEM;
        }
        free(rcl);
        free(path);
        log_err("fuse: %s is sealed locally; cannot wait for the backend (%s)", h->n->path,
                strerror(-rc));
    }
    fuse_reply_err(req, rc ? tfs_errno(rc) : 0);
}

static void w_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    if (!is_wb_handle(fi)) {
        fs->wb_inner.release(req, ino, fi);
        return;
    }
    struct tfs_whandle *h = (struct tfs_whandle *)(uintptr_t)fi->fh;
    if (h->w)
        tfs_wb_wstate_detach(fs, h->n, h->w, "release");
    handle_free(fs, h);
    fuse_reply_err(req, 0);
}

static void w_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                      struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tier_ioctx io = tfs_req_io(fs, req);
    struct tfs_node *n = tfs_node_get_or_stale(req, fs, ino);
    if (!n)
        return;
    int rc = 0;
    if (!in_wb(fs, n->path)) {
        rc = -EROFS;
        goto out;
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
        if (attr->st_size < 0) {
            rc = -EINVAL;
            goto out;
        }
        if (is_wb_handle(fi) && ((struct tfs_whandle *)(uintptr_t)fi->fh)->w) {
            struct tfs_whandle *h = (struct tfs_whandle *)(uintptr_t)fi->fh;
            pthread_mutex_lock(&h->w->mu);
            rc = tfs_wb_truncate_locked(fs, h, (uint64_t)attr->st_size);
            if (rc == 0)
                h->dirty = true;
            pthread_mutex_unlock(&h->w->mu);
        } else {
            /* truncate(2) by path: a writer of its own for the time of the call */
            struct tierd_ns *ns = NULL;
            char *key = NULL;
            bool is_root = false;
            rc = tfs_resolve(fs, n->path, &ns, &key, &is_root);
            if (rc == 0 && is_root)
                rc = -EISDIR;
            if (rc) {
                free(key);
                goto out;
            }
            struct tfs_node *hn = tfs_node_get(fs, ino); /* the handle's reference */
            struct tfs_whandle *h = NULL;
            rc = handle_new(fs, &io, hn, ns, key, true, &h);
            if (rc) {
                free(key);
                tfs_node_put(fs, hn);
                goto out;
            }
            pthread_mutex_lock(&h->w->mu);
            rc = tfs_wb_truncate_locked(fs, h, (uint64_t)attr->st_size);
            pthread_mutex_unlock(&h->w->mu);
            int crc = tfs_wb_wstate_detach(fs, hn, h->w, "truncate");
            if (!rc)
                rc = crc;
            handle_free(fs, h);
        }
        if (rc)
            goto out;
    }
    /* mode, owner and times are not stored (objects have none): accepted and ignored */
    struct tfs_attr a;
    rc = tfs_node_attr(fs, &io, n, &a);
    if (rc == 0) {
        struct stat st;
        tfs_fill_stat(fs, n, &a, &st);
        fuse_reply_attr(req, &st, n->perm->attr_ttl_s);
    }
out:
    if (rc)
        fuse_reply_err(req, tfs_errno(rc));
    tfs_node_put(fs, n);
}

/* Resolve parent/name inside a write-back namespace: 0, -EROFS (read-cache), other -errno. */
static int child_key(struct tierd_fuse *fs, fuse_ino_t parent, const char *name, char **path,
                     struct tierd_ns **ns, char **key)
{
    *path = NULL;
    *key = NULL;
    struct tfs_node *p = tfs_node_get(fs, parent);
    if (!p)
        return -ESTALE;
    int rc = tfs_path_join(p->path, name, path);
    tfs_node_put(fs, p);
    if (rc)
        return rc;
    if (!in_wb(fs, *path))
        return -EROFS;
    bool is_root = false;
    rc = tfs_resolve(fs, *path, ns, key, &is_root);
    if (rc == 0 && is_root)
        rc = -EBUSY; /* a namespace root cannot be removed or renamed */
    if (rc == 0 && dataset_reserved_key(*ns, *key))
        rc = -EPERM; /* dataset versions' manifests live there (datasets/dataset.h) */
    return rc;
}

static void w_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tier_ioctx io = tfs_req_io(fs, req);
    char *path = NULL, *key = NULL;
    struct tierd_ns *ns = NULL;
    int rc = child_key(fs, parent, name, &path, &ns, &key);
    if (rc == 0) {
        struct tfs_attr a;
        bool from_wb = false;
        rc = tfs_wb_stat_key(fs, &io, ns, key, path, &a, &from_wb);
        if (rc == 0 && a.is_dir)
            rc = -EISDIR;
    }
    if (rc == 0) {
        int wrc = wb_unlink(fs->ctx.wb, ns->be->name, key);
        /* an older generation may already be an object in the backend */
        int brc = backend_del(ns->be, &io, key);
        if (wrc && wrc != -ENOENT)
            rc = wrc;
        else if (brc && brc != -ENOENT)
            rc = brc;
        else if (wrc == -ENOENT && brc == -ENOENT)
            rc = -ENOENT;
    }
    if (rc == 0) {
        /* The name is free now: its node (still open?) leaves the path, so a file created
         * under it gets a node and a write state of its own, and the old handles never start
         * a generation of the key again (it would replace the new file at its seal). */
        struct tfs_node *n = tfs_node_detach(fs, path);
        if (n) {
            pthread_mutex_lock(&n->mu);
            if (n->w) {
                pthread_mutex_lock(&n->w->mu);
                n->w->unlinked = true;
                pthread_mutex_unlock(&n->w->mu);
            }
            pthread_mutex_unlock(&n->mu);
            tfs_node_put(fs, n);
        }
        tfs_wb_marker_keep_parent(fs, path);
    }
    fuse_reply_err(req, rc ? tfs_errno(rc) : 0);
    free(path);
    free(key);
}

static void w_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                     const char *newname, unsigned int flags)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tier_ioctx io = tfs_req_io(fs, req);
    char *opath = NULL, *okey = NULL, *npath = NULL, *nkey = NULL;
    struct tierd_ns *ons = NULL, *nns = NULL;
    int rc = flags & RENAME_EXCHANGE ? -EINVAL : 0;
    int orc = rc ? rc : child_key(fs, parent, name, &opath, &ons, &okey);
    int nrc = rc ? rc : child_key(fs, newparent, newname, &npath, &nns, &nkey);
    if (rc == 0 && (orc == -EROFS || nrc == -EROFS))
        rc = orc == nrc ? -EROFS : -EXDEV;
    else if (rc == 0)
        rc = orc ? orc : nrc;
    if (rc == 0 && ons != nns)
        rc = -EXDEV;
    struct tfs_attr a;
    bool from_wb = false;
    if (rc == 0) {
        rc = tfs_wb_stat_key(fs, &io, ons, okey, opath, &a, &from_wb);
        if (rc == -ENOENT && tfs_implicit_dir(ons, &io, okey) == 1)
            rc = -EXDEV; /* a directory S3 only implies (it answered ENOENT): mv copies too */
    }
    if (rc == 0 && a.is_dir)
        rc = -EXDEV; /* directories: mv copies */
    if (rc == 0 && (flags & RENAME_NOREPLACE)) {
        struct tfs_attr b;
        bool fw = false;
        int src = tfs_wb_stat_key(fs, &io, nns, nkey, npath, &b, &fw);
        if (src == 0)
            rc = -EEXIST;
    }
    if (rc)
        goto out;
    rc = wb_rename(fs->ctx.wb, ons->be->name, okey, nkey);
    if (rc == -ENOENT || rc == -EXDEV) {
        /* only in the backend: copy into a new generation under the new key */
        struct wb_file *wf = NULL;
        rc = tfs_wb_new_gen(fs, &io, ons, nkey, okey, opath, &wf);
        if (rc == 0)
            rc = wb_file_close(wf);
        else
            log_err("fuse: rename %s -> %s: copy failed (%s)", opath, npath, strerror(-rc));
        if (rc == 0) {
            int u = wb_unlink(fs->ctx.wb, ons->be->name, okey);
            (void)u;
        }
    }
    if (rc == 0) {
        int brc = backend_del(ons->be, &io, okey);
        if (brc && brc != -ENOENT)
            log_warn("fuse: rename %s -> %s: the old object stays: %s", opath, npath,
                     strerror(-brc));
        rc = tfs_node_rename(fs, opath, npath);
        const char *os = strrchr(opath, '/'), *ns_ = strrchr(npath, '/');
        if (rc == 0 && (os - opath != ns_ - npath || strncmp(opath, npath, (size_t)(os - opath))))
            tfs_wb_marker_keep_parent(fs, opath); /* moved out of its directory */
    }
out:
    fuse_reply_err(req, rc ? tfs_errno(rc) : 0);
    free(opath);
    free(okey);
    free(npath);
    free(nkey);
}

static void w_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    (void)mode;
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tier_ioctx io = tfs_req_io(fs, req);
    char *path = NULL, *key = NULL;
    struct tierd_ns *ns = NULL;
    struct tfs_node *n = NULL;
    int rc = child_key(fs, parent, name, &path, &ns, &key);
    if (rc == -EBUSY)
        rc = -EEXIST;
    struct tfs_attr a;
    if (rc == 0) {
        bool fw = false;
        int src = tfs_wb_stat_key(fs, &io, ns, key, path, &a, &fw);
        if (src == -ENOENT && tfs_implicit_dir(ns, &io, key) == 1)
            src = 0; /* a directory S3 only implies */
        rc = src == 0 ? -EEXIST : 0;
        if (src && src != -ENOENT) /* as create: a checkpoint's directory during an outage */
            log_warn("fuse: mkdir %s: the backend cannot say whether it exists (%s); made locally",
                     path, strerror(-src));
    }
    if (rc == 0)
        rc = tfs_wb_marker_add(fs, path);
    if (rc == 0)
        rc = tfs_node_lookup(fs, path, &n);
    if (rc) {
        fuse_reply_err(req, tfs_errno(rc));
    } else {
        memset(&a, 0, sizeof(a));
        a.is_dir = true;
        a.mtime_ns = (int64_t)tier_now_real_ns();
        a.writable = true;
        struct fuse_entry_param e;
        tfs_fill_entry(fs, n, &a, &e);
        if (fuse_reply_entry(req, &e) != 0)
            tfs_node_forget(fs, n->ino, 1);
        tfs_node_put(fs, n);
    }
    free(path);
    free(key);
}

static void w_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tier_ioctx io = tfs_req_io(fs, req);
    char *path = NULL, *key = NULL;
    struct tierd_ns *ns = NULL;
    int rc = child_key(fs, parent, name, &path, &ns, &key);
    struct tfs_attr a = {0};
    bool fw = false;
    if (rc == 0) {
        rc = tfs_wb_stat_key(fs, &io, ns, key, path, &a, &fw);
        if (rc == -ENOENT) {
            /* the kernel knew it as a directory (it sends RMDIR for a directory dentry only):
             * one of S3's, which is only its objects' prefix and went with the last of them;
             * empty, as checked below */
            rc = 0;
            a.is_dir = true;
        }
    }
    if (rc == 0 && !a.is_dir)
        rc = -ENOTDIR;
    if (rc == 0) {
        /* anything below, pending or in the backend? */
        char *dk = tier_dir_prefix(key);
        if (!dk) {
            rc = -ENOMEM;
        } else {
            struct wb_file_info *v = NULL;
            size_t nv = 0;
            if (wb_list(fs->ctx.wb, ns->be->name, dk, &v, &nv) == 0) {
                for (size_t i = 0; i < nv; i++)
                    if (tfs_wb_live(&v[i]))
                        rc = -ENOTEMPTY;
                wb_list_free(v, nv);
            }
            struct backend_list_page page;
            memset(&page, 0, sizeof(page));
            int lrc = rc ? 0 : backend_list(ns->be, &io, dk, "/", NULL, 1, &page);
            if (rc == 0 && lrc == 0) {
                /* an S3 "folder" object named as the directory itself is not content */
                if (page.n > 1 || (page.n == 1 && strcmp(page.entries[0].name, dk) != 0))
                    rc = -ENOTEMPTY;
                backend_list_page_fini(&page);
            } else if (rc == 0 && lrc != -ENOENT) {
                rc = lrc; /* the backend cannot say it is empty: never removed blind */
            }
            pthread_mutex_lock(&fs->dirs_mu);
            size_t pl = strlen(path);
            for (size_t i = 0; rc == 0 && i < fs->ndirs; i++)
                if (strncmp(fs->dirs[i], path, pl) == 0 && fs->dirs[i][pl] == '/')
                    rc = -ENOTEMPTY;
            pthread_mutex_unlock(&fs->dirs_mu);
            /* and the directory itself where the backend keeps one (POSIX): else it would be
             * listed again */
            if (rc == 0 && (rc = backend_rmdir(ns->be, &io, dk)) != 0)
                log_warn("fuse: rmdir %s: %s", path,
                         *tier_err_msg() ? tier_err_msg() : strerror(-rc));
            free(dk);
        }
    }
    if (rc == 0) {
        tfs_wb_marker_del(fs, path);
        tfs_wb_marker_keep_parent(fs, path); /* its parent stays, as when a file goes */
    }
    fuse_reply_err(req, rc ? tfs_errno(rc) : 0);
    free(path);
    free(key);
}

void tfs_ops_write(struct tierd_fuse *fs, struct fuse_lowlevel_ops *ops)
{
    fs->wb_inner = *ops;
    ops->open = w_open;
    ops->create = w_create;
    ops->read = w_read;
    ops->write = w_write;
    ops->fsync = w_fsync;
    ops->flush = w_flush;
    ops->release = w_release;
    ops->setattr = w_setattr;
    ops->unlink = w_unlink;
    ops->rename = w_rename;
    ops->mkdir = w_mkdir;
    ops->rmdir = w_rmdir;
}

void tfs_ops_write_buf(struct tierd_fuse *fs, struct fuse_lowlevel_ops *ops)
{
    fs->top_write = ops->write;
    ops->write_buf = w_write_buf;
}
