/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ops_dir.c - opendir, readdir, readdirplus and releasedir over the listings of
 * fuse_listing.c (or, for a mode that lists itself, tfs_ns_ops.listing: the control files).
 *
 * opendir takes a reference to a listing snapshot, so the offsets a handle hands to the kernel
 * stay valid while a newer listing replaces the cached one; readdirplus primes the children's
 * attribute caches, so `ls -l` and the opens after it cost no backend call. Called from the
 * FUSE worker threads.
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
#include "fuse/fuse_int.h"

/* fi->fh of an open directory: the listing it reads (one snapshot per opendir). */
struct tfs_dirh {
    struct tfs_hbase hb; /* TFS_H_DIR */
    struct tfs_listing *l;
};

static void dirh_free(struct tierd_fuse *fs, struct tfs_dirh *dh)
{
    tfs_handle_untrack(fs, &dh->hb);
    tfs_listing_unref(dh->l);
    free(dh);
}

void tfs_dir_orphan_free(struct tierd_fuse *fs, struct tfs_hbase *hb)
{
    (void)fs;
    struct tfs_dirh *dh = (struct tfs_dirh *)hb;
    tfs_listing_unref(dh->l);
    free(dh);
}

void tfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    TFS_COUNT(fs, opendir);
    struct tfs_node *n = tfs_node_get_or_stale(req, fs, ino);
    if (!n)
        return;
    struct tfs_attr a;
    struct tfs_opstat os = tfs_op_start();
    struct tier_ioctx io = tfs_req_io(fs, req);
    int rc = tfs_node_attr(fs, &io, n, &a);
    if (rc == 0 && !a.is_dir)
        rc = -ENOTDIR;
    struct tfs_listing *l = NULL;
    if (rc == 0)
        rc = n->nsops->listing ? n->nsops->listing(fs, &io, n->path, &l)
                               : tfs_listing_get(fs, &io, n, &l);
    struct tfs_dirh *dh = NULL;
    if (rc == 0 && !(dh = calloc(1, sizeof(*dh)))) {
        tfs_listing_unref(l);
        rc = -ENOMEM;
    }
    tfs_op_done(fs, &io, TELE_OP_READDIR, -1, os, 0, rc);
    if (rc) {
        fuse_reply_err(req, tfs_errno(rc));
    } else {
        dh->l = l;
        tfs_handle_track(fs, &dh->hb, TFS_H_DIR, io.tenant);
        fi->fh = (uint64_t)(uintptr_t)dh;
        fi->cache_readdir = 0;
        fi->keep_cache = 0;
        if (fuse_reply_open(req, fi) != 0)
            dirh_free(fs, dh);
    }
    tfs_node_put(fs, n);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi, bool plus)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    struct tfs_listing *l = ((struct tfs_dirh *)(uintptr_t)fi->fh)->l;
    struct tfs_node *dir = plus ? tfs_node_get(fs, ino) : NULL;
    if (plus && !dir) {
        fuse_reply_err(req, ESTALE);
        return;
    }
    /* readdirplus: one path buffer for the children's "dir/name" (a 100,000-entry directory
     * is listed in thousands of calls: nothing per entry but the node lookup) */
    size_t dl = plus ? strlen(dir->path) : 0;
    char *buf = malloc(size);
    char *path = plus ? malloc(dl + BACKEND_SEGMENT_MAX + 2) : NULL;
    if (!buf || (plus && !path)) {
        free(buf);
        free(path);
        tfs_node_put(fs, dir);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    bool writable = plus && dir->nsops->writable;
    if (plus) {
        memcpy(path, dir->path, dl);
        if (dl == 1)
            dl = 0; /* the root: "/name" */
        path[dl++] = '/';
    }
    size_t pos = 0;
    for (size_t i = (size_t)off; i < l->n; i++) {
        const struct tfs_dirent *e = &l->e[i];
        if (!plus) {
            struct stat st;
            memset(&st, 0, sizeof(st));
            st.st_ino = 0xffffffff; /* unknown: the kernel looks the name up */
            st.st_mode = e->is_dir ? S_IFDIR : S_IFREG;
            size_t need =
                fuse_add_direntry(req, buf + pos, size - pos, e->name, &st, (off_t)(i + 1));
            if (need > size - pos)
                break;
            pos += need;
            continue;
        }
        size_t nl = strlen(e->name);
        if (nl > BACKEND_SEGMENT_MAX)
            continue; /* no lookup can reach it (and path holds one segment): never listed */
        /* readdirplus: each entry is a lookup; count it only if it fits in the reply */
        size_t need = fuse_add_direntry_plus(req, NULL, 0, e->name, NULL, 0);
        if (need > size - pos)
            break;
        memcpy(path + dl, e->name, nl + 1);
        struct tfs_node *n = NULL;
        if (tfs_node_lookup(fs, path, &n) != 0)
            break;
        struct tfs_attr a;
        tfs_dirent_attr(l, e, &a);
        a.writable = writable;
        tfs_node_set_attr(fs, n, &a);
        struct fuse_entry_param ep;
        tfs_fill_entry(fs, n, &a, &ep);
        pos += fuse_add_direntry_plus(req, buf + pos, size - pos, e->name, &ep, (off_t)(i + 1));
        tfs_node_put(fs, n);
    }
    if (pos == 0 && (size_t)off >= l->n && l->truncated)
        fuse_reply_err(req, EFBIG); /* the end of a cut listing (see DESIGN) */
    else
        fuse_reply_buf(req, buf, pos);
    free(buf);
    free(path);
    tfs_node_put(fs, dir);
}

void tfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, false);
}

void tfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                        struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, true);
}

void tfs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    dirh_free(fuse_req_userdata(req), (struct tfs_dirh *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}
