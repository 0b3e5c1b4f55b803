/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_wb_gen.c - the generations of write-back files: the shared write state of an inode
 * (struct tfs_wstate), a new generation of a key (wb_file_create_ex, REPLACE_AT_SEAL), filled
 * with the current content when a handle opened without O_TRUNC first writes or truncates
 * (from the buffer's local copy or the backend, through a temporary file of the spool), and
 * truncation. See "generations" in fuse_ops_write.c's DESIGN, which calls these.
 *
 * Lock order: node mu -> wstate mu; a wstate's mutex is held across the copy (the writes of one
 * inode are serialised, as the buffer requires).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "fuse/fuse_wb.h"
#include "writeback/wb.h"

#define COPY_CHUNK (1u << 20)
/* Free space kept beyond a rewrite's copy before the old generation is given up. */
#define COPY_MARGIN_BYTES (8ull << 20)

/* ---- generations ---- */

static int pwrite_all(int fd, const char *buf, size_t len, off_t off)
{
    while (len > 0) {
        ssize_t w = pwrite(fd, buf, len, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        buf += w;
        len -= (size_t)w;
        off += w;
    }
    return 0;
}

/* Copy the current content of src_key into a temporary file of the spool; *size its length. */
static int snapshot(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tierd_ns *ns,
                    const char *src_key, const char *path, int *tmp_fd, uint64_t *size)
{
    struct tfs_attr a;
    bool from_wb = false;
    *tmp_fd = -1;
    *size = 0;
    int rc = tfs_wb_stat_key(fs, io, ns, src_key, path, &a, &from_wb);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    if (a.is_dir)
        return -EISDIR;
    if (a.size_bytes == 0)
        return 0;
    int fd = open(fs->ctx.wb_spool_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    char *buf = malloc(COPY_CHUNK);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    uint64_t off = 0;
    /* One version, whole: every backend read demands one version (if_match): the one the stat
     * above saw, so the bytes are the size it reported, or after a restart the first read's.
     * A copy that met another version (-ESTALE), or that began from the local copy and must go
     * on from the backend, starts over from the backend (without that, a replace during
     * the copy mixed two versions in one file). */
    char ver[BACKEND_ETAG_MAX] = "";
    if (!from_wb)
        tier_strlcpy(ver, a.etag, sizeof(ver));
    int restarts = 0;
    while (off < a.size_bytes) {
        size_t want = a.size_bytes - off < COPY_CHUNK ? (size_t)(a.size_bytes - off) : COPY_CHUNK;
        ssize_t n = -ENOENT;
        if (from_wb)
            n = wb_read(fs->ctx.wb, ns->be->name, src_key, buf, want, (off_t)off);
        if (n == -ENOENT && from_wb) {
            /* the local copy went (uploaded, evicted, replaced): all of it from the backend,
             * with the backend's own size and version (a restart re-stats), even at offset 0 */
            n = -ESTALE;
        } else if (n == -ENOENT) {
            from_wb = false;
            struct backend_stat st;
            memset(&st, 0, sizeof(st));
            n = backend_read(ns->be, io, src_key, off, buf, want, ver[0] ? ver : NULL, &st);
            if (n >= 0 && !ver[0])
                tier_strlcpy(ver, st.etag, sizeof(ver));
        }
        if (n == -ESTALE && restarts++ < 3) {
            /* From the backend's current version, whole: its size and version again, so the
             * copy is neither cut at the old size nor padded past the new one. */
            from_wb = false;
            off = 0;
            if (ftruncate(fd, 0) != 0) {
                rc = -errno;
                break;
            }
            struct backend_stat st;
            memset(&st, 0, sizeof(st));
            rc = backend_stat(ns->be, io, src_key, &st);
            if (rc == 0 && st.is_dir)
                rc = -EISDIR;
            if (rc)
                break;
            a.size_bytes = st.size_bytes;
            tier_strlcpy(ver, st.etag, sizeof(ver));
            continue;
        }
        if (n < 0) {
            rc = (int)n;
            break;
        }
        if (n == 0)
            break; /* shrank meanwhile: copy what there is */
        rc = pwrite_all(fd, buf, (size_t)n, (off_t)off);
        if (rc)
            break;
        if (off == 0 && restarts == 0 && fs->ctx.test_fault_file)
            tier_test_pause(fs->ctx.test_fault_file, "snapshot pause");
        off += (uint64_t)n;
    }
    free(buf);
    if (rc) {
        close(fd);
        return rc;
    }
    *tmp_fd = fd;
    *size = off;
    return 0;
}

/* Start a new generation of dst_key; with src_key, holding src_key's current content. It
 * replaces the live generation of dst_key only when sealed. On failure *out is NULL (a
 * generation whose copy failed is discarded; *copy_failed then says so). */
static int new_gen_copy(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tierd_ns *ns,
                        const char *dst_key, const char *src_key, const char *src_path,
                        struct wb_file **out, bool *copy_failed)
{
    *out = NULL;
    if (copy_failed)
        *copy_failed = false;
    int tmp = -1;
    uint64_t size = 0;
    int rc = 0;
    if (src_key) {
        rc = snapshot(fs, io, ns, src_key, src_path, &tmp, &size);
        if (rc) {
            log_warn("fuse: cannot copy %s:%s for rewriting: %s", ns->be->name, src_key,
                     strerror(-rc));
            return rc;
        }
    }
    /* The new generation replaces the old one only when it is sealed, so a copy that fails
     * (ENOSPC, EIO) leaves the old version live. Still refuse up front when the spool cannot
     * hold the copy: the writer learns it before writing anything. */
    struct statvfs sv;
    if (tmp >= 0 && fstatvfs(tmp, &sv) == 0 &&
        (uint64_t)sv.f_bavail * sv.f_frsize < size + COPY_MARGIN_BYTES) {
        log_warn("fuse: not rewriting %s:%s: the spool has no room for a %llu-byte copy",
                 ns->be->name, dst_key, (unsigned long long)size);
        close(tmp);
        return -ENOSPC;
    }
    struct wb_file *wf = NULL;
    rc = wb_file_create_ex(fs->ctx.wb, ns->be->name, dst_key, WB_CREATE_REPLACE_AT_SEAL, &wf);
    if (rc == 0)
        wb_file_set_tenant(wf, io->tenant); /* its upload is the writer's checkpoint I/O */
    if (rc == 0 && tmp >= 0) {
        char *buf = malloc(COPY_CHUNK);
        rc = buf ? 0 : -ENOMEM;
        for (uint64_t off = 0; rc == 0 && off < size;) {
            size_t want = size - off < COPY_CHUNK ? (size_t)(size - off) : COPY_CHUNK;
            ssize_t n = pread(tmp, buf, want, (off_t)off);
            if (n <= 0) {
                rc = n < 0 ? -errno : -EIO;
                break;
            }
            ssize_t w = wb_write(wf, buf, (size_t)n, (off_t)off);
            if (w < 0)
                rc = (int)w;
            off += (uint64_t)n;
        }
        free(buf);
        if (rc) {
            log_err("fuse: copying the old content of %s:%s into its new generation failed "
                    "(%s); the new generation is discarded, the old one stays",
                    ns->be->name, dst_key, strerror(-rc));
            wb_file_discard(wf);
            wf = NULL;
            if (copy_failed)
                *copy_failed = true;
        }
    }
    if (tmp >= 0)
        close(tmp);
    *out = wf;
    return rc;
}

int tfs_wb_new_gen(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tierd_ns *ns,
                   const char *dst_key, const char *src_key, const char *src_path,
                   struct wb_file **out)
{
    return new_gen_copy(fs, io, ns, dst_key, src_key, src_path, out, NULL);
}

struct tfs_wstate *tfs_wb_wstate_attach(struct tfs_node *n)
{
    pthread_mutex_lock(&n->mu);
    struct tfs_wstate *w = n->w;
    if (!w) {
        w = calloc(1, sizeof(*w));
        if (w) {
            pthread_mutex_init(&w->mu, NULL);
            n->w = w;
        }
    }
    if (w) {
        pthread_mutex_lock(&w->mu);
        w->handles++;
        pthread_mutex_unlock(&w->mu);
    }
    pthread_mutex_unlock(&n->mu);
    return w;
}

/* Drop a writer; the last one seals the open generation. Returns the seal's result. */
int tfs_wb_wstate_detach(struct tierd_fuse *fs, struct tfs_node *n, struct tfs_wstate *w,
                         const char *what)
{
    pthread_mutex_lock(&n->mu);
    pthread_mutex_lock(&w->mu);
    bool last = --w->handles == 0;
    if (last)
        n->w = NULL;
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_unlock(&n->mu);
    if (!last)
        return 0;
    int rc = w->err;
    if (w->wf && !w->err) {
        rc = wb_file_close(w->wf);
        if (rc)
            log_err("fuse: sealing %s at %s failed: %s", n->path, what, strerror(-rc));
    } else if (w->wf) {
        wb_file_discard(w->wf); /* failed: never sealed; the previous generation stays */
    }
    (void)fs;
    pthread_mutex_destroy(&w->mu);
    free(w);
    return rc;
}

/* With w->mu held: the generation to write into (copying the current content first). */
int tfs_wb_ensure_gen(struct tierd_fuse *fs, struct tfs_whandle *h)
{
    struct tfs_wstate *w = h->w;
    if (w->err)
        return w->err;
    if (w->wf)
        return 0;
    if (w->unlinked || h->n->path[0] == '\x01')
        return -EIO; /* unlinked or replaced: a new generation would clobber the name's file */
    bool copy_failed = false;
    int rc = new_gen_copy(fs, &h->io, h->ns, h->key, h->key, h->n->path, &w->wf, &copy_failed);
    /* A failed copy discarded its generation (the old one is intact); the writer has seen an
     * error, so its later writes fail too: a file missing a write that returned an error is
     * never sealed. A failure before the generation existed (snapshot, the ENOSPC pre-check)
     * leaves nothing to poison. */
    if (copy_failed)
        w->err = -EIO;
    return rc;
}

/* Truncate through w (held: w->mu) to size. */
int tfs_wb_truncate_locked(struct tierd_fuse *fs, struct tfs_whandle *h, uint64_t size)
{
    struct tfs_wstate *w = h->w;
    if (w->err)
        return w->err;
    if (!w->wf && (w->unlinked || h->n->path[0] == '\x01'))
        return -EIO;
    if (!w->wf && size == 0)
        return tfs_wb_new_gen(fs, &h->io, h->ns, h->key, NULL, NULL, &w->wf);
    int rc = tfs_wb_ensure_gen(fs, h);
    return rc ? rc : wb_truncate(w->wf, (off_t)size);
}
