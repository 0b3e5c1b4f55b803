/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ctl_hints.c - the control files under <mount>/.tierd: epoch-order hints given by writing a
 * file, so that a job in any language can hint with a shell line (docs/HINTS.md).
 *
 *   /.tierd             a read-only directory holding "hints"
 *   /.tierd/hints       one file per hint set of the caller's tenant (and per file being written)
 *   /.tierd/hints/NAME  write: the set's order, mount paths one a line; read: the set's progress
 *                       ("key: value" lines from hints_list); unlink: drop the set (hints_cancel)
 *   /.tierd/datasets    the dataset version view (fuse_ctl_versions.c), read-only
 *
 * This file holds the control files' operations, their closer threads and the control files'
 * table of struct tfs_ns_ops (stat, listing and permissions of every path under /.tierd, for
 * lookup, getattr and readdir), which tfs_ctl_init registers; the handles, buffers and
 * submissions are fuse_ctl_handle.c's.
 *
 * DESIGN. An open for writing (create, or open with O_WRONLY / O_RDWR) resolves the opener's
 * tenant (the FUSE request's pid, uid and gid, as reads are resolved: tfs_req_io) and refuses
 * tenants default and other to all but root and tierd's own uid (EPERM), the rule of
 * POST /v1/hints: those tenants are every unmatched caller's. The handle keeps a buffer: write
 * stores bytes at their offset (O_APPEND: at the end), at most HINTS_USER_BYTES_MAX per file
 * (POST /v1/hints's body bound for users; CTL_FILE_MAX for root and tierd's uid; beyond: EFBIG),
 * CTL_TENANT_MAX over one tenant's files being written by others than those (beyond: EDQUOT, so
 * that one tenant cannot take the shared pool) and CTL_TOTAL_MAX over all (beyond: ENOSPC), and
 * checks each line it completes (hints_check_path: EINVAL, so that a shell's printf fails;
 * shells ignore close(2)).
 * Such an error sticks to the handle, whose list is then incomplete or wrong and is never
 * submitted: later writes, flushes and fsyncs return it. flush (every close(2)) and
 * fsync parse what was written since the handle's last submission (a last line without newline
 * included) and hand it to hints_submit(): the first submission replaces the set unless the file
 * was opened with O_APPEND or its first line is "#append", later ones of the same handle append
 * (processes sharing the descriptor close it one after the other). A writer's flush, fsync and
 * release are handed to one of CTL_CLOSERS closer threads (job_queue), which does that work
 * (parsing, resolving the paths, reading manifests: hints_submit) and answers the request, so no
 * FUSE worker waits on it; a handle's jobs go to one closer while any is queued, so its
 * submissions keep their order and its release follows them, and a handle with none queued goes
 * to the least busy closer, so one tenant's slow close holds up no other's while a closer is
 * free. A flush, fsync or release with nothing to submit (no write since the last submission, a
 * failed or cancelled handle) and none of its handle's jobs queued is answered on the FUSE
 * worker (job_fast). The submission's result is the reply, so close(2) returns it
 * (EINVAL a bad line, E2BIG, EDQUOT, ENOSPC, EEXIST, ENOMEM as hints_submit says), and the
 * detail goes to the log. A close after no new write submits nothing; a file created or
 * truncated and never written is an empty order, submitted at release (touch of an existing set
 * leaves it alone: neither); release submits what no flush did (errors only logged).
 * Reads are direct_io, so the kernel asks for them although the file's size is 0 (as in /proc):
 * the status text is made afresh at offset 0. unlink drops the set and cancels the open writers
 * of that name of the caller's tenant. Names are per tenant, as in the API: another tenant's sets
 * are neither listed nor reachable.
 *
 * These operations are installed in front of the others (tfs_ops_ctl): a call on a control handle
 * (fi->fh of kind TFS_H_CTL) or a control path is served here, any other goes to the operation
 * that was installed before (ctl->inner), so this file knows nothing of the namespaces.
 * The version view's caches have their own lock (vview->mu, fuse_ctl_versions.c).
 *
 * Locking: ctl->mu guards the list of writer handles (a file being written exists; unlink cancels
 * its writers); a handle's mu guards its buffer and is held across its hints_submit (a flush and
 * the writes of one handle serialise). ctl->mu is never taken with a handle's mu held.
 * ctl->charge_mu (the tenants' buffer charges) is a leaf, taken with a handle's mu held;
 * ctl->qmu guards the closers' queues and loads and the handles' queued and closer, and is held
 * around nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "datasets/dataset.h"
#include "hints/hints.h"
#include "hints/hintlines.h"
#include "fuse/fuse_ctl.h"
#include "tenant/tenant.h"

enum ctl_kind { CTL_NONE, CTL_ROOT, CTL_DIR, CTL_FILE };

/* What a path below the mount is here; *name: a hint file's name. */
static enum ctl_kind classify(const char *path, const char **name)
{
    size_t l = sizeof(TFS_CTL_DIR) - 1, h = sizeof(CTL_HINTS) - 1;
    if (strncmp(path, TFS_CTL_DIR, l) != 0 || (path[l] != '\0' && path[l] != '/'))
        return CTL_NONE;
    if (path[l] == '\0')
        return CTL_ROOT;
    if (strncmp(path, CTL_HINTS, h) != 0 || (path[h] != '\0' && path[h] != '/'))
        return CTL_NONE;
    if (path[h] == '\0')
        return CTL_DIR;
    const char *n = path + h + 1;
    if (*n == '\0' || strchr(n, '/'))
        return CTL_NONE;
    *name = n;
    return CTL_FILE;
}

/* classify, for what fs serves: the no-open session (fuse_noopen.c) has /.tierd and the
 * version view, not the hint files (they need OPEN, and its private mount is not the user's) */
static enum ctl_kind side_classify(const struct tierd_fuse *fs, const char *path, const char **name)
{
    enum ctl_kind k = classify(path, name);
    return fs->no_open && (k == CTL_DIR || k == CTL_FILE) ? CTL_NONE : k;
}

static bool is_ctl_handle(const struct fuse_file_info *fi)
{
    return fi && fi->fh && *(const uint32_t *)(uintptr_t)fi->fh == TFS_H_CTL;
}

/* Whoever may read the mount may write the hint files: each class of the umask that leaves r
 * gets rw (and x for the directory). */
static mode_t readers_rw(const struct tierd_fuse *fs, bool dir)
{
    mode_t r = 0444 & ~fs->perm.umask;
    return r | r >> 1 | (dir ? r >> 2 : 0);
}

/* What a control path is for io's tenant (a hint file exists while that tenant has the set or
 * a writer of it has the file open): 0 with a filled, or -ENOENT. */
static int ctl_stat(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                    struct tfs_attr *a)
{
    const char *name = NULL;
    enum ctl_kind k = side_classify(fs, path, &name);
    if (k == CTL_NONE && tfs_vview_path(path))
        return tfs_vview_stat(fs, path, a);
    if (k == CTL_NONE || (k == CTL_FILE && !tfs_ctl_file_exists(fs, io->tenant, name)))
        return -ENOENT;
    memset(a, 0, sizeof(*a));
    a->is_dir = k != CTL_FILE;
    a->mtime_ns = (int64_t)fs->ctx.start_ns;
    a->mode = k == CTL_ROOT ? 0555 & ~fs->perm.umask : readers_rw(fs, k == CTL_DIR);
    return 0;
}

/* ---- listings ---------------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct tfs_dirent *)a)->name, ((const struct tfs_dirent *)b)->name);
}

static int dirent_add(struct tfs_dirent *e, size_t *n, const char *name, bool is_dir)
{
    memset(&e[*n], 0, sizeof(e[*n]));
    e[*n].name = strdup(name);
    if (!e[*n].name)
        return -ENOMEM;
    e[*n].is_dir = is_dir;
    (*n)++;
    return 0;
}

/* A new listing of the control directory path for io's tenant (never cached: the sets are
 * per tenant and change without the mount). */
static int ctl_listing(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                       struct tfs_listing **out)
{
    const char *name = NULL;
    enum ctl_kind k = side_classify(fs, path, &name);
    if (k == CTL_NONE && tfs_vview_path(path))
        return tfs_vview_listing(fs, path, out);
    if (k != CTL_ROOT && k != CTL_DIR)
        return k == CTL_FILE ? -ENOTDIR : -ENOENT;
    /* at most HINTS_SETS_MAX sets, and as many files being written */
    size_t max = 2 * HINTS_SETS_MAX, n = 0;
    struct tfs_listing *l = calloc(1, sizeof(*l));
    struct tfs_dirent *e = calloc(max, sizeof(*e));
    struct hints_set_stats *st = calloc(HINTS_SETS_MAX, sizeof(*st));
    int rc = l && e && st ? 0 : -ENOMEM;
    if (rc == 0 && k == CTL_ROOT) {
        if (!fs->no_open)
            rc = dirent_add(e, &n, "hints", true);
        if (rc == 0)
            rc = dirent_add(e, &n, "datasets", true);
    } else if (rc == 0) {
        size_t ns = hints_list(fs->ctx.hints, st, HINTS_SETS_MAX);
        for (size_t i = 0; rc == 0 && i < ns && i < HINTS_SETS_MAX; i++)
            if (st[i].tenant == io->tenant)
                rc = dirent_add(e, &n, st[i].name, false);
        pthread_mutex_lock(&fs->ctl->mu);
        for (struct tfs_ctlh *h = fs->ctl->writers; rc == 0 && h && n < max; h = h->next)
            if (h->tenant == io->tenant && !h->cancelled)
                rc = dirent_add(e, &n, h->name, false);
        pthread_mutex_unlock(&fs->ctl->mu);
    }
    free(st);
    if (rc) {
        for (size_t i = 0; i < n; i++)
            free(e[i].name);
        free(e);
        free(l);
        return rc;
    }
    qsort(e, n, sizeof(*e), cmp_name);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w > 0 && strcmp(e[w - 1].name, e[i].name) == 0) {
            free(e[i].name); /* a set and its writer */
            continue;
        }
        e[w++] = e[i];
    }
    l->e = e;
    l->n = w;
    l->refs = 1;
    l->fetched_ns = l->expire_ns = tier_now_mono_ns();
    *out = l;
    return 0;
}

/* ---- operations ---------------------------------------------------------------------------- */

static struct tierd_fuse *req_fs(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static void ctl_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                       struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = req_fs(req);
    struct tfs_node *p = tfs_node_get(fs, parent);
    if (!p || !tfs_ctl_path(fs, p->path)) {
        tfs_node_put(fs, p);
        fs->ctl->inner.create(req, parent, name, mode, fi);
        return;
    }
    const char *unused = NULL;
    char *path = NULL;
    struct tfs_ctlh *h = NULL;
    struct tfs_node *n = NULL;
    int rc = classify(p->path, &unused) == CTL_DIR ? 0 : -EROFS; /* .tierd itself takes none */
    if (rc == 0)
        rc = tfs_path_join(p->path, name, &path);
    if (rc == 0)
        rc = tfs_ctl_handle_open(fs, req, name, fi->flags, true, &h);
    if (rc == 0)
        rc = tfs_node_lookup(fs, path, &n);
    if (rc)
        goto fail;
    struct tier_ioctx io = {.tenant = h->tenant};
    struct tfs_attr a;
    rc = ctl_stat(fs, &io, path, &a); /* h is a writer of the name: it exists */
    if (rc) {
        tfs_node_forget(fs, n->ino, 1);
        goto fail;
    }
    tfs_node_set_attr(fs, n, &a);
    struct fuse_entry_param e;
    tfs_fill_entry(fs, n, &a, &e);
    tfs_ctl_handle_fi(fi, h);
    if (fuse_reply_create(req, &e, fi) != 0) {
        tfs_node_forget(fs, n->ino, 1);
        tfs_ctl_handle_free(fs, h);
    }
    goto out;
fail:
    if (h)
        tfs_ctl_handle_free(fs, h);
    fuse_reply_err(req, tfs_errno(rc));
out:
    tfs_node_put(fs, n);
    tfs_node_put(fs, p);
    free(path);
}

static void ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = req_fs(req);
    struct tfs_node *n = tfs_node_get_or_stale(req, fs, ino);
    if (!n)
        return;
    if (!tfs_ctl_path(fs, n->path)) {
        tfs_node_put(fs, n);
        fs->ctl->inner.open(req, ino, fi);
        return;
    }
    if (tfs_vview_path(n->path)) {
        char *p = strdup(n->path);
        tfs_node_put(fs, n);
        if (!p)
            fuse_reply_err(req, ENOMEM);
        else
            tfs_vview_open(fs, req, ino, p, fi);
        free(p);
        return;
    }
    const char *name = NULL;
    struct tfs_ctlh *h = NULL;
    int rc = classify(n->path, &name) == CTL_FILE ? 0 : -EISDIR;
    if (rc == 0)
        rc = tfs_ctl_handle_open(fs, req, name, fi->flags, false, &h);
    tfs_node_put(fs, n);
    if (rc) {
        fuse_reply_err(req, tfs_errno(rc));
        return;
    }
    tfs_ctl_handle_fi(fi, h);
    if (fuse_reply_open(req, fi) != 0)
        tfs_ctl_handle_free(fs, h);
}

static void ctl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = req_fs(req);
    if (!is_ctl_handle(fi)) {
        fs->ctl->inner.read(req, ino, size, off, fi);
        return;
    }
    struct tfs_ctlh *h = (struct tfs_ctlh *)(uintptr_t)fi->fh;
    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    pthread_mutex_lock(&h->mu);
    int rc = off == 0 || !h->text ? tfs_ctl_status_make(fs, h) : 0;
    if (rc) {
        pthread_mutex_unlock(&h->mu);
        fuse_reply_err(req, tfs_errno(rc));
        return;
    }
    size_t from = (uint64_t)off < h->tlen ? (size_t)off : h->tlen;
    size_t len = h->tlen - from < size ? h->tlen - from : size;
    fuse_reply_buf(req, h->text + from, len);
    pthread_mutex_unlock(&h->mu);
}

static void ctl_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = req_fs(req);
    if (!is_ctl_handle(fi)) {
        fs->ctl->inner.write(req, ino, buf, size, off, fi);
        return;
    }
    struct tfs_ctlh *h = (struct tfs_ctlh *)(uintptr_t)fi->fh;
    if (!h->writer || off < 0) {
        fuse_reply_err(req, h->writer ? EINVAL : EBADF);
        return;
    }
    pthread_mutex_lock(&h->mu);
    uint64_t pos = h->append_flag ? h->len : (uint64_t)off;
    int rc = h->err;
    if (rc == 0 && pos < h->taken)
        rc = -EINVAL; /* handed over already (a close came in between) */
    if (rc == 0)
        rc = tfs_ctl_reserve(fs, h, pos + size);
    bool bad_line = false;
    if (rc == 0) {
        if (pos > h->len)
            memset(h->buf + h->len, 0, pos - h->len); /* a hole: a NUL line, refused */
        if (pos < h->checked)
            h->nocheck = true; /* rewritten: the submission checks it */
        memcpy(h->buf + pos, buf, size);
        if (pos + size > h->len)
            h->len = pos + size;
        h->buf[h->len] = '\0';
        h->dirty = true;
        tier_err_clear();
        rc = tfs_ctl_check_new_lines(fs, h);
        bad_line = rc != 0;
    }
    if (bad_line)
        log_warn("fuse: hint file %s" CTL_HINTS "/%s of tenant %s: %s; the write fails and "
                 "nothing of this file is taken",
                 fs->mountpoint, h->name, tfs_ctl_tenant_name(fs, h->tenant),
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    /* a bound passed or a bad line: the list is incomplete or wrong and must not be taken (a
     * write below what was handed over only fails itself) */
    if (rc && !h->err && (bad_line || rc != -EINVAL))
        h->err = rc;
    pthread_mutex_unlock(&h->mu);
    if (rc)
        fuse_reply_err(req, tfs_errno(rc));
    else
        fuse_reply_write(req, size);
}

/* ---- the closers ------------------------------------------------------------------------------
 */

/* Serve j (no lock held) and answer its request. */
static void job_run(struct tierd_fuse *fs, struct ctl_job *j)
{
    int rc = 0;
    switch (j->kind) {
    case JOB_FLUSH:
        if (fs->ctx.test_fault_file) { /* test builds: hold a close here (test_hintlimits_fuse) */
            char ff[PATH_MAX]; /* one fault file (and .paused marker) per hint file's name */
            snprintf(ff, sizeof(ff), "%s.close.%s", fs->ctx.test_fault_file, j->h->name);
            tier_test_pause(ff, "hint close pause");
        }
        rc = tfs_ctl_submit(fs, j->h, "close", false);
        fuse_reply_err(j->req, rc ? tfs_errno(rc) : 0);
        break;
    case JOB_FSYNC:
        rc = tfs_ctl_submit(fs, j->h, "fsync", false);
        fuse_reply_err(j->req, rc ? tfs_errno(rc) : 0);
        break;
    case JOB_RELEASE: {
        fuse_req_t req = j->req;
        (void)tfs_ctl_submit(fs, j->h, "release",
                             true);    /* what no flush took (logged if refused) */
        tfs_ctl_handle_free(fs, j->h); /* j is the handle's: gone now */
        fuse_reply_err(req, 0);
        break;
    }
    }
}

static void *closer_main(void *arg)
{
    struct ctl_closer *cl = arg;
    struct tierd_fuse *fs = cl->fs;
    struct tfs_ctl *c = fs->ctl;
    pthread_mutex_lock(&c->qmu);
    for (;;) {
        while (!cl->head && !c->qstop)
            pthread_cond_wait(&cl->cv, &c->qmu);
        struct ctl_job *j = cl->head;
        if (!j)
            break; /* stopping, and every job served */
        cl->head = j->next;
        if (!cl->head)
            cl->tail = NULL;
        struct tfs_ctlh *h = j->h;
        pthread_mutex_unlock(&c->qmu);
        bool release = j->kind == JOB_RELEASE;
        job_run(fs, j);
        if (!release)
            free(j);
        pthread_mutex_lock(&c->qmu);
        cl->load--;
        if (!release)
            h->queued--; /* the last touch of h: a release may free it once this is 0 */
    }
    pthread_mutex_unlock(&c->qmu);
    return NULL;
}

/* h->mu held: a flush, fsync (last false) or release (true) of h that submits nothing: the
 * handle was cancelled, failed already, or has nothing new (a reader; no write since the last
 * submission). */
static bool nothing_to_submit_locked(const struct tfs_ctlh *h, bool last)
{
    return !h->writer || h->cancelled || h->err ||
           (h->len == h->taken && !(last && h->dirty && !h->submitted));
}

/* Serve the request here when it has nothing to submit and no job of h is queued before it (so
 * that a close after no write, or a release after the last flush, never waits behind another
 * handle's submission); true if it was answered. */
static bool job_fast(struct tierd_fuse *fs, fuse_req_t req, struct tfs_ctlh *h, enum job_kind kind)
{
    struct tfs_ctl *c = fs->ctl;
    pthread_mutex_lock(&c->qmu);
    bool idle = h->queued == 0;
    pthread_mutex_unlock(&c->qmu);
    if (!idle || pthread_mutex_trylock(&h->mu) != 0)
        return false; /* its submission in progress: queued behind it, in order */
    bool last = kind == JOB_RELEASE;
    if (!nothing_to_submit_locked(h, last)) {
        pthread_mutex_unlock(&h->mu);
        return false;
    }
    int rc = last ? 0 : tfs_ctl_submit_locked(fs, h, kind == JOB_FLUSH ? "close" : "fsync", false);
    pthread_mutex_unlock(&h->mu);
    if (last)
        tfs_ctl_handle_free(fs, h);
    fuse_reply_err(req, rc ? tfs_errno(rc) : 0);
    return true;
}

/* Hand a writer's flush, fsync or release to a closer thread, which answers it: a submission
 * (its paths resolved, manifests read) never holds a FUSE worker. The jobs of one handle go to
 * one closer while any of them is queued, so they keep their order and its release comes after
 * them; a handle with none queued goes to the closer with the fewest jobs, so that a slow
 * submission (an administrator's, or one reading many manifests) holds up no other tenant's
 * close while a closer is free. A request with nothing to submit is answered here (job_fast).
 * Without the closers (they could not start, or the mount is going away) the job is served
 * here. */
static void job_queue(struct tierd_fuse *fs, fuse_req_t req, struct tfs_ctlh *h, enum job_kind kind)
{
    if (job_fast(fs, req, h, kind))
        return;
    struct tfs_ctl *c = fs->ctl;
    struct ctl_job *j = kind == JOB_RELEASE ? &h->release_job : calloc(1, sizeof(*j));
    if (!j) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    *j = (struct ctl_job){.req = req, .h = h, .kind = kind};
    pthread_mutex_lock(&c->qmu);
    struct ctl_closer *cl = NULL;
    if (!c->qstop && h->queued)
        cl = &c->closers[h->closer];
    for (unsigned i = 0; !c->qstop && !h->queued && i < CTL_CLOSERS; i++)
        if (c->closers[i].on && (!cl || c->closers[i].load < cl->load)) {
            cl = &c->closers[i];
            h->closer = i;
        }
    if (cl) {
        if (kind != JOB_RELEASE)
            h->queued++;
        cl->load++;
        if (cl->tail)
            cl->tail->next = j;
        else
            cl->head = j;
        cl->tail = j;
        pthread_cond_signal(&cl->cv);
    }
    pthread_mutex_unlock(&c->qmu);
    if (!cl) {
        job_run(fs, j);
        if (kind != JOB_RELEASE)
            free(j);
    }
}

void tfs_ctl_drain(struct tierd_fuse *fs)
{
    if (!fs->ctl)
        return;
    struct tfs_ctl *c = fs->ctl;
    pthread_mutex_lock(&c->qmu);
    c->qstop = true;
    for (unsigned i = 0; i < CTL_CLOSERS; i++)
        pthread_cond_broadcast(&c->closers[i].cv);
    pthread_mutex_unlock(&c->qmu);
    for (unsigned i = 0; i < CTL_CLOSERS; i++)
        if (c->closers[i].on) {
            pthread_join(c->closers[i].th, NULL);
            c->closers[i].on = false;
        }
}

static void ctl_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = req_fs(req);
    if (!is_ctl_handle(fi)) {
        if (fs->ctl->inner.flush)
            fs->ctl->inner.flush(req, ino, fi);
        else
            fuse_reply_err(req, 0);
        return;
    }
    struct tfs_ctlh *h = (struct tfs_ctlh *)(uintptr_t)fi->fh;
    if (h->writer)
        job_queue(fs, req, h, JOB_FLUSH);
    else
        fuse_reply_err(req, 0); /* a reader has nothing to hand over */
}

static void ctl_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = req_fs(req);
    if (!is_ctl_handle(fi)) {
        if (fs->ctl->inner.fsync)
            fs->ctl->inner.fsync(req, ino, datasync, fi);
        else
            fuse_reply_err(req, 0); /* a read-only file has nothing to sync */
        return;
    }
    struct tfs_ctlh *h = (struct tfs_ctlh *)(uintptr_t)fi->fh;
    if (h->writer)
        job_queue(fs, req, h, JOB_FSYNC);
    else
        fuse_reply_err(req, 0);
}

static void ctl_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = req_fs(req);
    if (!is_ctl_handle(fi)) {
        fs->ctl->inner.release(req, ino, fi);
        return;
    }
    struct tfs_ctlh *h = (struct tfs_ctlh *)(uintptr_t)fi->fh;
    if (h->writer) {
        job_queue(fs, req, h, JOB_RELEASE);
        return;
    }
    tfs_ctl_handle_free(fs, h);
    fuse_reply_err(req, 0);
}

static void ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                        struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = req_fs(req);
    struct tfs_node *n = tfs_node_get_or_stale(req, fs, ino);
    if (!n)
        return;
    /* a hint file's handle is served here even after an unlink (of any tenant's set of the
     * name) moved the node off its path: the handle knows its file */
    struct tfs_ctlh *h = is_ctl_handle(fi) ? (struct tfs_ctlh *)(uintptr_t)fi->fh : NULL;
    if (!tfs_ctl_path(fs, n->path) && !h) {
        tfs_node_put(fs, n);
        fs->ctl->inner.setattr(req, ino, attr, to_set, fi);
        return;
    }
    char hpath[sizeof(CTL_HINTS) + HINTS_NAME_MAX];
    const char *path = n->path;
    if (h && !tfs_ctl_path(fs, n->path)) {
        snprintf(hpath, sizeof(hpath), CTL_HINTS "/%s", h->name);
        path = hpath;
    }
    if (tfs_vview_path(path)) { /* dataset versions are read-only */
        tfs_node_put(fs, n);
        fuse_reply_err(req, EROFS);
        return;
    }
    struct tier_ioctx io = tfs_req_io(fs, req);
    if (h)
        io.tenant = h->tenant;
    int rc = 0;
    if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
        rc = -EPERM; /* modes are synthesised (fuse_ctl_hints.c, readers_rw) */
    if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE)) {
        /* ftruncate(2) of a file being written cuts what it holds; a truncate by path has no
         * buffer to cut: write the file instead */
        rc = -EINVAL;
        if (h && h->writer && attr->st_size >= 0) {
            pthread_mutex_lock(&h->mu);
            if ((uint64_t)attr->st_size >= h->taken && (uint64_t)attr->st_size <= h->len) {
                h->len = (size_t)attr->st_size;
                if (h->buf)
                    h->buf[h->len] = '\0';
                if (h->len < h->checked)
                    h->nocheck = true; /* cut into checked lines: the submission checks */
                h->dirty = true;
                rc = 0;
            }
            pthread_mutex_unlock(&h->mu);
        }
    }
    /* times: accepted and not kept (touch works) */
    struct tfs_attr a;
    if (rc == 0)
        rc = ctl_stat(fs, &io, path, &a);
    if (rc) {
        fuse_reply_err(req, tfs_errno(rc));
    } else {
        struct stat st;
        tfs_fill_stat(fs, n, &a, &st);
        fuse_reply_attr(req, &st, 0);
    }
    tfs_node_put(fs, n);
}

static void ctl_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct tierd_fuse *fs = req_fs(req);
    struct tfs_node *p = tfs_node_get(fs, parent);
    if (!p || !tfs_ctl_path(fs, p->path)) {
        tfs_node_put(fs, p);
        fs->ctl->inner.unlink(req, parent, name);
        return;
    }
    const char *unused = NULL;
    uint32_t tenant = 0;
    int rc = classify(p->path, &unused) == CTL_DIR ? 0 : -EROFS;
    if (rc == 0 && !hints_name_ok(name))
        rc = -ENOENT;
    if (rc == 0)
        rc = tfs_ctl_may_hint(fs, req, name, &tenant, NULL);
    if (rc == 0) {
        bool cancelled = false;
        pthread_mutex_lock(&fs->ctl->mu);
        for (struct tfs_ctlh *h = fs->ctl->writers; h; h = h->next)
            if (h->tenant == tenant && strcmp(h->name, name) == 0 && !h->cancelled) {
                h->cancelled = true; /* an unlinked file's writes go nowhere */
                cancelled = true;
            }
        pthread_mutex_unlock(&fs->ctl->mu);
        rc = hints_cancel(fs->ctx.hints, name, tenant);
        if (rc == -ENOENT && cancelled)
            rc = 0;
        if (rc == 0)
            log_info("fuse: hint set %s of tenant %s dropped (unlink of %s" CTL_HINTS "/%s)", name,
                     tfs_ctl_tenant_name(fs, tenant), fs->mountpoint, name);
    }
    if (rc == 0) {
        /* a file made under the name later is a new file (a new node) */
        char *path = NULL;
        if (tfs_path_join(p->path, name, &path) == 0)
            tfs_node_put(fs, tfs_node_detach(fs, path));
        free(path);
    }
    fuse_reply_err(req, rc ? tfs_errno(rc) : 0);
    tfs_node_put(fs, p);
}

/* ---- set-up ------------------------------------------------------------------------------ */

/* The control files' table: their own stat and listings (no backend), read-only but for the
 * hint files (whose modes are synthesised: tfs_attr.mode), attributes kept for the paths' TTLs
 * (ctl_perm's 0 for the hint files, the namespace's for a version's: tfs_ctl_version_perm),
 * never revalidated from a listing. */
static const struct tfs_ns_ops ctl_ops = {
    .mode = TFS_MODE_CONTROL,
    .cached = true,
    .revalidate = false,
    .writable = false,
    .stat = ctl_stat,
    .listing = ctl_listing,
    .perm = tfs_ctl_version_perm,
};

int tfs_ctl_init(struct tierd_fuse *fs)
{
    fs->ctl_perm = fs->perm;
    fs->ctl_perm.attr_ttl_ns = fs->ctl_perm.entry_ttl_ns = 0;
    fs->ctl_perm.attr_ttl_s = fs->ctl_perm.entry_ttl_s = 0;
    fs->ctl = NULL;
    if (!fs->ctx.hints)
        return 0; /* no cache, no hints: no control files */
    struct tfs_ctl *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int rc = tfs_vview_init(fs);
    if (rc) {
        free(c);
        return rc;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->charge_mu, NULL);
    pthread_mutex_init(&c->qmu, NULL);
    fs->ctl = c;
    fs->ctl_ops = &ctl_ops;
    unsigned started = 0;
    for (unsigned i = 0; i < CTL_CLOSERS; i++) {
        struct ctl_closer *cl = &c->closers[i];
        cl->fs = fs;
        pthread_cond_init(&cl->cv, NULL);
        cl->on = pthread_create(&cl->th, NULL, closer_main, cl) == 0;
        started += cl->on;
    }
    if (!started) /* served on the FUSE workers then, as they come */
        log_warn("fuse: cannot start the hint files' closer threads: closes are served inline");
    return 0;
}

void tfs_ctl_fini(struct tierd_fuse *fs)
{
    if (!fs->ctl)
        return;
    tfs_ctl_drain(fs); /* before the session goes (tierfs_free): a no-op by now */
    /* the session's handles are freed before (handles_fini): no writer is left */
    tfs_vview_fini(fs);
    fs->ctl_ops = NULL;
    pthread_mutex_destroy(&fs->ctl->mu);
    pthread_mutex_destroy(&fs->ctl->charge_mu);
    pthread_mutex_destroy(&fs->ctl->qmu);
    for (unsigned i = 0; i < CTL_CLOSERS; i++)
        pthread_cond_destroy(&fs->ctl->closers[i].cv);
    free(fs->ctl);
    fs->ctl = NULL;
}

void tfs_ops_ctl(struct tierd_fuse *fs, struct fuse_lowlevel_ops *ops)
{
    if (!fs->ctl)
        return;
    fs->ctl->inner = *ops;
    ops->create = ctl_create;
    ops->open = ctl_open;
    ops->read = ctl_read;
    ops->write = ctl_write;
    ops->flush = ctl_flush;
    ops->fsync = ctl_fsync;
    ops->release = ctl_release;
    ops->setattr = ctl_setattr;
    ops->unlink = ctl_unlink;
}
