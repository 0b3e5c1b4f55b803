/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ops_file.c - open, read and release: the data path from the kernel to the block cache.
 *
 * A file handle pins one version of the object: the (key, etag, size) seen at open. Every read
 * asks the cache for exactly that version, so a handle never returns blocks of two versions; if
 * the object was replaced and the cache has to fetch, the backend refuses the old etag
 * (-ESTALE), the read fails with EIO (logged), and the node's attributes are dropped so the next
 * open sees the new version. The kernel page cache is kept across opens (keep_cache) only while
 * the etag is the one the previous open saw; otherwise the kernel drops the inode's pages.
 *
 * On the no-open connection (fuse_noopen.c) reads come without a handle (fh 0): the inode
 * keeps what a handle held (noopen_read below), its version switched only by revalidation.
 *
 * Sequential reads (a read starting where the handle's previous one ended, give or take the
 * kernel's reordering of async readahead) queue cache_prefetch() of the blocks ahead, a window
 * that grows with the stream (maybe_prefetch). Handle fields are guarded by the handle's mutex;
 * concurrent reads on one handle are fine (the cache is thread-safe).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "lifecycle/access.h"
#include "hints/hints.h"
#include "fuse/fuse_int.h"

/* A read's cache_served is its telemetry tier. */
_Static_assert((int)CACHE_SERVED_RAM == (int)TELE_TIER_RAM &&
                   (int)CACHE_SERVED_DISK == (int)TELE_TIER_DISK &&
                   (int)CACHE_SERVED_BACKEND == (int)TELE_TIER_BACKEND,
               "cache_served and tele_tier must name the tiers in the same order");

struct tfs_file {
    struct tfs_hbase hb; /* TFS_H_READ (fuse_int.h) */
    struct backend *be;
    char *key;
    char *path;
    char etag[BACKEND_ETAG_MAX];
    uint64_t size_bytes;
    uint64_t ino;
    struct tier_ioctx io; /* the opener's, bound at open: readahead arrives without its pid */
    pthread_mutex_t mu;
    uint64_t last_end;        /* mu: end of the previous read */
    uint64_t prefetched_upto; /* mu: first block index not yet queued for prefetch */
    uint64_t ra_window;       /* mu: read-ahead window, blocks (0: not started) */
    uint64_t ra_mark;         /* mu: first block queued since the window last grew (or MAX) */
    uint64_t ra_mark_ns, ra_mark_end; /* mu: when ra_mark was set, and last_end then */
    bool stale_logged;                /* mu */
    _Atomic bool hint_seen;       /* the hint engine counted this open's read of the file's end */
    _Atomic uint64_t access_mono; /* when this handle last noted a read (access.h), mono ns */
    char *version_id; /* a dataset version's file in a versioned bucket: the version to read */
    /* the no-open connection's per-inode state (node->rstate): the cache its read-ahead is
     * queued in, whether the version is a dataset version's (pinned: fixed) or the node's
     * (rd_gen: the version etag and size_bytes hold, under mu), and whether a read of it came */
    struct cache *cache;
    bool pinned;
    uint64_t gen; /* mu */
    bool opened;  /* mu */
};

/* Note a read of h's object by the reader's tenant (io) for the policies' idle trigger and
 * tenant filter (d->access; none: no rule has either), at most once a second per handle. */
static void note_access(struct tierd_fuse *fs, struct tfs_file *h, const struct tier_ioctx *io)
{
    if (!fs->ctx.access)
        return;
    uint64_t now = tier_now_mono_ns(),
             last = atomic_load_explicit(&h->access_mono, memory_order_relaxed);
    if (last && now - last < 1000000000ULL)
        return;
    atomic_store_explicit(&h->access_mono, now, memory_order_relaxed);
    access_note(fs->ctx.access, h->be->name, h->key, (int64_t)tier_now_real_ns(), io->tenant);
}

static void file_destroy(struct tfs_file *h)
{
    pthread_mutex_destroy(&h->mu);
    free(h->key);
    free(h->path);
    free(h->version_id);
    free(h);
}

/* A tracked handle: off the session's list, then freed. */
static void file_free(struct tierd_fuse *fs, struct tfs_file *h)
{
    tfs_handle_untrack(fs, &h->hb);
    file_destroy(h);
}

/*
 * Listing-order prefetch: a process that opens the files of a directory one after another in
 * the order of its listing (cat *, a loader walking a sorted directory) gets the files after
 * them fetched ahead: on the second open in a row that follows the cached listing (the open
 * file is the entry after the one opened before), the next 4 files' first windows
 * (readahead_blocks blocks each) are queued, then twice as many on each further open in order,
 * up to 32 files ahead, each open's batch at most readahead_max bytes. An open off the order starts
 * again. Only with a fresh listing (no backend call is made for it) and never in write-back
 * namespaces (no listing is kept there); blocks already cached or queued are skipped
 * (cache_prefetch).
 */
#define LO_FILES_FIRST 4
#define LO_FILES_MAX 32

/* The bytes of e's first read-ahead window (0: a directory or an empty file: nothing to fetch) */
static uint64_t window_bytes(const struct tfs_dirent *e, uint64_t ra, uint64_t bs)
{
    if (e->is_dir || e->size_bytes == 0)
        return 0;
    return ra * bs < e->size_bytes ? ra * bs : e->size_bytes;
}

static void listing_prefetch(struct tierd_fuse *fs, struct tfs_node *n, struct backend *be,
                             const char *key, const struct tier_ioctx *oio)
{
    uint64_t ra = fs->ctx.readahead_blocks, bs = fs->ctx.block_size;
    const char *slash = strrchr(n->path, '/');
    if (!ra || !bs || !fs->ctx.cache || !slash || slash == n->path)
        return;
    char parent[BACKEND_KEY_MAX + 256];
    size_t plen = (size_t)(slash - n->path);
    if (plen >= sizeof(parent))
        return;
    memcpy(parent, n->path, plen);
    parent[plen] = '\0';
    struct tfs_node *dir = tfs_node_get_path(fs, parent);
    if (!dir)
        return;
    struct tfs_listing *l = tfs_listing_peek(fs, dir);
    const struct tfs_dirent *e = l ? tfs_listing_find(l, slash + 1) : NULL;
    size_t first = 0, stop = 0;
    if (e) {
        size_t i = (size_t)(e - l->e);
        pthread_mutex_lock(&dir->mu);
        if (dir->lo_gen == l->fetched_ns && i == dir->lo_next && i > 0) {
            if (dir->lo_run < 16)
                dir->lo_run++;
        } else {
            dir->lo_run = 0;
            dir->lo_upto = 0;
        }
        dir->lo_gen = l->fetched_ns;
        dir->lo_next = i + 1;
        if (dir->lo_run > 0) {
            size_t want = (size_t)LO_FILES_FIRST << (dir->lo_run - 1);
            if (want > LO_FILES_MAX)
                want = LO_FILES_MAX;
            first = dir->lo_upto > i + 1 ? dir->lo_upto : i + 1;
            size_t end = i + 1 + want < l->n ? i + 1 + want : l->n;
            /* the batch ends where its first windows would pass readahead_max bytes */
            uint64_t budget = fs->ctx.readahead_max_bytes;
            for (stop = first; stop < end; stop++) {
                uint64_t bytes = window_bytes(&l->e[stop], ra, bs);
                if (bytes > budget && stop > first)
                    break;
                budget = bytes < budget ? budget - bytes : 0;
            }
            if (stop > first)
                dir->lo_upto = stop;
        }
        pthread_mutex_unlock(&dir->mu);
    }
    const char *kslash = strrchr(key, '/');
    size_t kdir = kslash ? (size_t)(kslash - key) + 1 : 0;
    char *ck = NULL;
    for (size_t j = first; j < stop; j++) {
        const struct tfs_dirent *c = &l->e[j];
        if (!window_bytes(c, ra, bs) || !c->etag[0])
            continue; /* nothing to fetch, or no version to fetch it by (a listing without etags) */
        size_t nl = strlen(c->name);
        char *nk = realloc(ck, kdir + nl + 1);
        if (!nk)
            break;
        ck = nk;
        memcpy(ck, key, kdir);
        memcpy(ck + kdir, c->name, nl + 1);
        uint64_t blocks = (c->size_bytes + bs - 1) / bs;
        if (blocks > ra)
            blocks = ra;
        struct cache_obj obj = {.be = be, .key = ck, .etag = c->etag, .size_bytes = c->size_bytes};
        /* charged to the opener's tenant, at background priority, as read-ahead is */
        struct tier_ioctx io = {.tenant = oio->tenant, .cls = TIER_IO_BACKGROUND};
        if (cache_prefetch(fs->ctx.cache, &io, &obj, 0, blocks) < blocks) {
            /* the queue is full: the next open in order asks for this file again */
            pthread_mutex_lock(&dir->mu);
            if (dir->lo_gen == l->fetched_ns && dir->lo_upto == stop)
                dir->lo_upto = j;
            pthread_mutex_unlock(&dir->mu);
            break;
        }
    }
    free(ck);
    if (l)
        tfs_listing_unref(l);
    tfs_node_put(fs, dir);
}

void tfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    struct tfs_node *n = tfs_node_get_or_stale(req, fs, ino);
    if (!n)
        return;
    struct tfs_file *h = NULL;
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    bool is_root = false;
    struct tfs_attr a;
    struct tfs_opstat os = tfs_op_start();
    struct tier_ioctx io = tfs_req_io(fs, req);
    int rc = tfs_node_attr(fs, &io, n, &a);
    if (rc)
        goto fail;
    if (a.is_dir) {
        rc = -EISDIR;
        goto fail;
    }
    rc = tfs_resolve(fs, n->path, &ns, &key, &is_root);
    if (rc)
        goto fail;
    h = calloc(1, sizeof(*h));
    if (!h || !(h->path = strdup(n->path))) {
        rc = -ENOMEM;
        goto fail;
    }
    h->be = ns->be;
    h->key = key;
    key = NULL;
    memcpy(h->etag, a.etag, sizeof(h->etag));
    h->size_bytes = a.size_bytes;
    h->ino = ino;
    h->io = io;
    pthread_mutex_init(&h->mu, NULL);

    pthread_mutex_lock(&n->mu);
    bool had_version = n->last_open_etag[0] != '\0';
    bool same = had_version && strcmp(n->last_open_etag, a.etag) == 0;
    memcpy(n->last_open_etag, a.etag, sizeof(n->last_open_etag));
    pthread_mutex_unlock(&n->mu);
    /* A new version: the kernel may still hold the old size (its attributes are valid for
     * attr_ttl from an earlier reply) and would cut or pad the reads of this handle at it.
     * Invalidate its attributes (not its pages; keep_cache = 0 drops those) so that the read
     * path asks getattr first, which answers from the attributes this open just saw. */
    if (!same && had_version)
        fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
    fi->keep_cache = same ? 1 : 0;
    fi->direct_io = 0;
    /* nothing to flush: close(2) of a read handle costs no request (the flush operation is
     * there for the control files, fuse_ctl_hints.c) */
    fi->noflush = 1;
    fi->fh = (uint64_t)(uintptr_t)h;
    tfs_handle_track(fs, &h->hb, TFS_H_READ, io.tenant);
    note_access(fs, h, &io);
    listing_prefetch(fs, n, h->be, h->key, &io);
    tfs_op_done(fs, &io, TELE_OP_OPEN, -1, os, 0, 0);
    if (fuse_reply_open(req, fi) != 0)
        file_free(fs, h);
    tfs_node_put(fs, n);
    return;
fail:
    if (h) {
        free(h->path);
        free(h);
    }
    free(key);
    tfs_op_done(fs, &io, TELE_OP_OPEN, -1, os, 0, rc);
    fuse_reply_err(req, tfs_errno(rc));
    tfs_node_put(fs, n);
}

void tfs_open_pinned(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, const char *path,
                     struct backend *be, const char *key, const char *etag, const char *version_id,
                     uint64_t size)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tfs_opstat os = tfs_op_start();
    struct tier_ioctx io = tfs_req_io(fs, req);
    int rc = 0;
    struct tfs_file *h = calloc(1, sizeof(*h));
    if (!h || !(h->path = strdup(path)) || !(h->key = strdup(key)) ||
        (version_id && !(h->version_id = strdup(version_id)))) {
        rc = -ENOMEM;
        goto fail;
    }
    h->be = be;
    snprintf(h->etag, sizeof(h->etag), "%s", etag);
    h->size_bytes = size;
    h->ino = ino;
    h->io = io;
    pthread_mutex_init(&h->mu, NULL);
    bool same = false;
    struct tfs_node *n = tfs_node_get(fs, ino);
    if (n) { /* as tfs_op_open: keep the pages only for the version the last open saw */
        pthread_mutex_lock(&n->mu);
        same = n->last_open_etag[0] && strcmp(n->last_open_etag, etag) == 0;
        snprintf(n->last_open_etag, sizeof(n->last_open_etag), "%s", etag);
        pthread_mutex_unlock(&n->mu);
        tfs_node_put(fs, n);
    }
    fi->keep_cache = same ? 1 : 0;
    fi->direct_io = 0;
    fi->noflush = 1;
    fi->fh = (uint64_t)(uintptr_t)h;
    tfs_handle_track(fs, &h->hb, TFS_H_READ, io.tenant);
    tfs_op_done(fs, &io, TELE_OP_OPEN, -1, os, 0, 0);
    if (fuse_reply_open(req, fi) != 0)
        file_free(fs, h);
    return;
fail:
    if (h) {
        free(h->path);
        free(h->key);
        free(h->version_id);
        free(h);
    }
    tfs_op_done(fs, &io, TELE_OP_OPEN, -1, os, 0, rc);
    fuse_reply_err(req, tfs_errno(rc));
}

/*
 * Sequential read-ahead: the window starts at readahead_blocks blocks and is sized again each
 * time the reader reaches the first block queued since it was last sized (what was queued before
 * it has been consumed): from the bandwidth-delay product (cache_readahead_window), the bytes
 * the reader consumed per second since then times the backend's measured block fetch time, twice
 * over; doubled while the backend has no measured fetch. Within readahead_blocks and
 * readahead_max bytes (and 32 blocks: the cache's prefetch queue holds 64, for every reader), so
 * a reader waiting on the link grows its window and one slower than the link shrinks it; a read
 * off the stream (beyond the slack the
 * kernel's async readahead reorders within) starts it again from readahead_blocks. Each queued
 * block is one ranged GET that a prefetch worker ([cache] prefetch_threads) makes, so a stream
 * that has grown its window keeps that many GETs in flight. What is still queued when the handle
 * is released is taken back (cache_prefetch_cancel).
 */
#define RA_BLOCKS_MAX 32 /* a stream's window, at most: half the cache's prefetch queue */

static void maybe_prefetch(struct tierd_fuse *fs, struct tfs_file *h, const struct tier_ioctx *rio,
                           uint64_t off, size_t len)
{
    uint64_t ra = fs->ctx.readahead_blocks;
    uint64_t bs = fs->ctx.block_size;
    if (ra == 0 || bs == 0 || !fs->ctx.cache)
        return;
    uint64_t max = fs->ctx.readahead_max_bytes / bs;
    if (max > RA_BLOCKS_MAX)
        max = RA_BLOCKS_MAX;
    if (max < ra)
        max = ra;
    uint64_t end = off + len;
    uint64_t first = 0, count = 0;
    char etag[BACKEND_ETAG_MAX];
    pthread_mutex_lock(&h->mu);
    /* the version: fixed for a handle, the inode's current one on the no-open connection */
    uint64_t fsize = h->size_bytes;
    memcpy(etag, h->etag, sizeof(etag));
    uint64_t nblocks = (fsize + bs - 1) / bs;
    uint64_t prev = h->last_end;
    /* async readahead may deliver neighbouring requests out of order */
    uint64_t slack = 4 * (uint64_t)len;
    bool seq = off == prev || (off > prev ? off - prev <= slack : prev - off <= slack);
    if (end > h->last_end)
        h->last_end = end;
    if (!seq || h->ra_window == 0) {
        h->ra_window = ra;
        h->ra_mark = UINT64_MAX;
    }
    uint64_t now = 0;
    if (seq) {
        uint64_t cur = end / bs;
        if (cur >= h->ra_mark) {
            now = tier_now_mono_ns();
            uint64_t dt = now - h->ra_mark_ns;
            uint64_t rate = dt && end > h->ra_mark_end
                                ? (uint64_t)((double)(end - h->ra_mark_end) * 1e9 / (double)dt)
                                : 0;
            uint64_t w = cache_readahead_window(fs->ctx.cache, h->be, rate, ra, max);
            if (!w) /* no block fetch of this backend measured yet */
                w = h->ra_window * 2 < max ? h->ra_window * 2 : max;
            h->ra_window = w;
            h->ra_mark = UINT64_MAX;
        }
        first = cur;
        if (first < h->prefetched_upto)
            first = h->prefetched_upto;
        uint64_t stop = cur + h->ra_window;
        if (stop > nblocks)
            stop = nblocks;
        if (stop > first) {
            count = stop - first;
            h->prefetched_upto = stop;
            if (h->ra_mark == UINT64_MAX) {
                h->ra_mark = first;
                h->ra_mark_ns = now ? now : tier_now_mono_ns();
                h->ra_mark_end = h->last_end;
            }
        }
    }
    pthread_mutex_unlock(&h->mu);
    if (count > 0) {
        struct cache_obj obj = {.be = h->be,
                                .key = h->key,
                                .etag = etag,
                                .size_bytes = fsize,
                                .version_id = h->version_id};
        /* Charged to the reader's tenant, at background priority. */
        struct tier_ioctx io = {.tenant = rio->tenant, .cls = TIER_IO_BACKGROUND};
        uint64_t done = cache_prefetch_owned(fs->ctx.cache, &io, &obj, first, count, h);
        if (done < count) { /* the queue is full: the next read asks for the rest again */
            pthread_mutex_lock(&h->mu);
            if (h->prefetched_upto == first + count)
                h->prefetched_upto = first + done;
            pthread_mutex_unlock(&h->mu);
        }
    }
}

/* Serve one read of h's object at the version (etag, fsize) for the reader io; replies to req.
 * Returns 0 or the read's error (-ESTALE: the version is gone from the backend). */
static int serve_read(struct tierd_fuse *fs, fuse_req_t req, fuse_ino_t ino, struct tfs_file *h,
                      const struct tier_ioctx *io, const char *etag, uint64_t fsize, size_t size,
                      off_t off)
{
    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return -EINVAL;
    }
    if ((uint64_t)off >= fsize || size == 0) {
        fuse_reply_buf(req, NULL, 0);
        return 0;
    }
    if ((uint64_t)off + size > fsize)
        size = (size_t)(fsize - (uint64_t)off);
    char *buf = malloc(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return -ENOMEM;
    }
    struct cache_obj obj = {
        .be = h->be, .key = h->key, .etag = etag, .size_bytes = fsize, .version_id = h->version_id};
    struct tfs_opstat os = tfs_op_start();
    enum cache_served served = CACHE_SERVED_RAM;
    ssize_t n = cache_read_served(fs->ctx.cache, io, &obj, (uint64_t)off, buf, size, &served);
    /* cache_served and tele_tier name the same tiers in the same order */
    tfs_op_done(fs, io, TELE_OP_READ, (int)served, os, n > 0 ? (uint64_t)n : 0, n < 0 ? (int)n : 0);
    if (n == -ENOENT && h->version_id)
        n = -ESTALE; /* the recorded version is gone (deleted for good): as a changed file */
    if (n < 0) {
        if (n == -ESTALE) {
            pthread_mutex_lock(&h->mu);
            bool first = !h->stale_logged;
            h->stale_logged = true;
            pthread_mutex_unlock(&h->mu);
            if (first && tfs_ctl_path(fs, h->path))
                log_warn("fuse: %s: the file of this dataset version changed in the backend "
                         "since the commit (the version has etag %s, the backend another) and "
                         "%s: it cannot be read (EIO). Restore the object, or commit a new "
                         "version",
                         h->path, etag,
                         h->version_id ? "its recorded version is gone too"
                                       : "the commit recorded no version id (the bucket keeps "
                                         "no older versions)");
            else if (first)
                log_warn("fuse: %s changed on the backend while open (etag %s); this handle "
                         "fails with EIO, a new open reads the new version",
                         h->path, etag);
            struct tfs_node *node = tfs_node_get(fs, ino);
            if (node) {
                tfs_node_drop_attr(node);
                tfs_node_put(fs, node);
            }
        } else {
            log_warn("fuse: read of %s at %lld (%zu bytes) failed: %s", h->path, (long long)off,
                     size, strerror((int)-n));
        }
        fuse_reply_err(req, tfs_errno((int)n));
    } else {
        /* before the reply: once the kernel has it, release may free the handle */
        note_access(fs, h, io);
        maybe_prefetch(fs, h, io, (uint64_t)off, (size_t)n);
        hints_observe(fs->ctx.hints, io->tenant, h->be, h->key, etag, (uint64_t)off, (size_t)n,
                      fsize, &h->hint_seen);
        /* fuse_reply_data splices the buffer into /dev/fuse when the kernel allows it (one copy
         * fewer than fuse_reply_buf); it is done with buf when it returns */
        struct fuse_bufvec bv = FUSE_BUFVEC_INIT((size_t)n);
        bv.buf[0].mem = buf;
        fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
    }
    free(buf);
    return n < 0 ? (int)n : 0;
}

/*
 * The no-open connection (fuse_noopen.c): reads come with fh 0, so what a handle held lives in
 * the node. Its first read makes the inode's read state (node->rstate: the object's backend and
 * key, the read-ahead window, the hint and access notes) and takes its version: a dataset
 * version's recorded one (tfs_vview_pin: fixed), else the node's attributes (node->rd_*), which
 * revalidation switches (tfs_node_set_attr, with the kernel's pages dropped). The first read of
 * each version does what an open did (the access note, the listing-order prefetch); the
 * tenant is the reader's (its pid, uid, gid), or the first reader's for a request without a pid.
 */
static void rstate_free(void *p)
{
    struct tfs_file *h = p;
    if (h->cache)
        cache_prefetch_cancel(h->cache, h);
    file_destroy(h);
}

static int rstate_get(struct tierd_fuse *fs, struct tfs_node *n, const struct tier_ioctx *io,
                      pid_t pid, struct tfs_file **out)
{
    pthread_mutex_lock(&n->mu);
    struct tfs_file *h = n->rstate;
    pthread_mutex_unlock(&n->mu);
    if (h) {
        *out = h;
        return 0;
    }
    h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    pthread_mutex_init(&h->mu, NULL);
    h->ino = n->ino;
    h->io = *io;
    h->cache = fs->ctx.cache;
    struct tfs_attr a;
    memset(&a, 0, sizeof(a));
    if (fs->ctx.test_fault_file) { /* test builds: hold pid's first read here (test_noopen_fuse) */
        char what[64];
        snprintf(what, sizeof(what), "noopen first read pause %d\n", (int)pid);
        tier_test_pause(fs->ctx.test_fault_file, what);
    }
    int rc = (h->path = strdup(n->path)) ? 0 : -ENOMEM;
    if (rc == 0 && fs->vview_pin && tfs_ctl_path(fs, n->path)) {
        h->pinned = true; /* a file of a dataset version (no other control file reaches here) */
        rc = fs->vview_pin(fs, n->path, &h->be, &h->key, h->etag, &h->version_id, &h->size_bytes);
    } else if (rc == 0) {
        struct tierd_ns *ns = NULL;
        bool is_root = false;
        rc = tfs_node_attr(fs, io, n, &a);
        if (rc == 0 && a.is_dir)
            rc = -EISDIR;
        if (rc == 0)
            rc = tfs_resolve(fs, n->path, &ns, &h->key, &is_root);
        if (rc == 0)
            h->be = ns->be;
    }
    if (rc) {
        h->cache = NULL;
        file_destroy(h);
        return rc;
    }
    pthread_mutex_lock(&n->mu);
    if (n->rstate) { /* another reader made it first */
        struct tfs_file *other = n->rstate;
        pthread_mutex_unlock(&n->mu);
        h->cache = NULL;
        file_destroy(h);
        *out = other;
        return 0;
    }
    n->rstate = h;
    n->rstate_free = rstate_free;
    if (!h->pinned && !n->rd_set) {
        /* the node's attributes, when it has them, rather than a: a getattr may have stored a
         * newer version (and given the kernel its size) since a was fetched */
        const struct tfs_attr *cur = n->attr_valid && !n->attr.is_dir ? &n->attr : &a;
        memcpy(n->rd_etag, cur->etag, sizeof(n->rd_etag));
        n->rd_size = cur->size_bytes;
        n->rd_set = true;
    }
    pthread_mutex_unlock(&n->mu);
    *out = h;
    return 0;
}

static void noopen_read(struct tierd_fuse *fs, fuse_req_t req, fuse_ino_t ino, size_t size,
                        off_t off)
{
    struct tfs_node *n = tfs_node_get_or_stale(req, fs, ino);
    if (!n)
        return;
    const struct fuse_ctx *c = fuse_req_ctx(req);
    struct tier_ioctx io = tfs_req_io(fs, req);
    struct tfs_file *h = NULL;
    int rc = rstate_get(fs, n, &io, c ? c->pid : 0, &h);
    if (rc) {
        fuse_reply_err(req, tfs_errno(rc));
        tfs_node_put(fs, n);
        return;
    }
    if (!c || c->pid == 0)
        io = h->io; /* no process to resolve: the first reader's tenant */
    char etag[BACKEND_ETAG_MAX];
    uint64_t fsize = 0, gen = 0;
    if (!h->pinned) {
        pthread_mutex_lock(&n->mu);
        memcpy(etag, n->rd_etag, sizeof(etag));
        fsize = n->rd_size;
        gen = n->rd_gen;
        pthread_mutex_unlock(&n->mu);
    }
    bool first = false, moved = false;
    pthread_mutex_lock(&h->mu);
    if (h->pinned) {
        memcpy(etag, h->etag, sizeof(etag));
        fsize = h->size_bytes;
    } else if (h->gen != gen || !h->opened) {
        /* a new version: its stream, hint and log state start again */
        moved = h->opened;
        memcpy(h->etag, etag, sizeof(h->etag));
        h->size_bytes = fsize;
        h->gen = gen;
        h->last_end = h->prefetched_upto = h->ra_window = 0;
        h->ra_mark = UINT64_MAX;
        h->stale_logged = false;
        atomic_store(&h->hint_seen, false);
    }
    /* a read from offset 0 starts a new pass over the file, as an open did */
    first = !h->opened || moved || off == 0;
    if (off == 0)
        atomic_store(&h->hint_seen, false);
    h->opened = true;
    pthread_mutex_unlock(&h->mu);
    if (moved && h->cache)
        cache_prefetch_cancel(h->cache, h); /* the old version's read-ahead */
    if (first && !h->pinned)
        listing_prefetch(fs, n, h->be, h->key, &io);
    if (serve_read(fs, req, ino, h, &io, etag, fsize, size, off) == -ESTALE && !h->pinned)
        /* The object was replaced (its node attributes are dropped): the kernel's attributes go
         * too, not its pages (that would wait for the page this read is for), so the next read
         * or stat asks getattr, whose fresh attributes move the inode to the new version and
         * drop its pages (tfs_node_set_attr): the next pass reads the new version whole, this
         * one fails with EIO, as a handle of the old version did. */
        fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
    tfs_node_put(fs, n);
}

void tfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    TFS_COUNT(fs, read);
    if (fi->fh == 0) { /* the no-open connection: no handle */
        noopen_read(fs, req, ino, size, off);
        return;
    }
    struct tfs_file *h = (struct tfs_file *)(uintptr_t)fi->fh;
    (void)serve_read(fs, req, ino, h, &h->io, h->etag, h->size_bytes, size, off);
}

void tfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct tfs_file *h = (struct tfs_file *)(uintptr_t)fi->fh;
    struct tierd_fuse *fs = fuse_req_userdata(req);
    if (h) {
        /* the reader is gone: its read-ahead still queued is not fetched (nor charged to it) */
        cache_prefetch_cancel(fs->ctx.cache, h);
        file_free(fs, h);
    }
    fuse_reply_err(req, 0);
}

void tfs_file_orphan_free(struct tierd_fuse *fs, struct tfs_hbase *hb)
{
    (void)fs;
    file_destroy((struct tfs_file *)hb);
}
