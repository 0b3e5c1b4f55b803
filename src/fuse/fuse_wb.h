/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_wb.h - private to the write-back files of src/fuse (fuse_wb_ns.c, fuse_wb_gen.c,
 * fuse_ops_write.c): their handles, the shared write state of an inode, and what each file
 * offers the others. The read code never includes it: it reaches write-back namespaces through
 * their struct tfs_ns_ops (fuse_int.h).
 */
#ifndef TIER_FUSE_FUSE_WB_H
#define TIER_FUSE_FUSE_WB_H

#include "fuse/fuse_int.h"

struct wb_file;
struct wb_file_info;

/* The writers of one inode (n->w): one open generation shared by its write handles. */
struct tfs_wstate {
    pthread_mutex_t mu;
    struct wb_file *wf; /* the open generation, or NULL */
    int handles;        /* write handles of the inode */
    int err;            /* sticky: after a failed fsync/close every writer gets it */
    bool unlinked;      /* the file was unlinked: never start a generation of its key again */
};

struct tfs_whandle {
    struct tfs_hbase hb; /* TFS_H_WB */
    struct tfs_node *n;
    struct tierd_ns *ns;
    char *key;
    bool writable;
    bool dirty;           /* wrote or truncated since its last flush (durability = remote) */
    struct tfs_wstate *w; /* writable handles */
    struct tier_ioctx io; /* the opener's, bound at open: kernel write-back has no pid */
    pthread_mutex_t mu;   /* the backend version read once the local copy is gone */
    bool be_known;
    char etag[BACKEND_ETAG_MAX];
    uint64_t be_size;
    _Atomic uint64_t access_mono; /* when this handle last noted a read (access.h), mono ns */
};

/* ---- the namespace's side (fuse_wb_ns.c) ---- */
/* A file the mount shows from its local copy; a sealed file that FAILED stays visible (its
 * reads fail with EIO) until it is unlinked or replaced, never an older object in its place. */
bool tfs_wb_live(const struct wb_file_info *f);
/* What the burst buffer (or a directory marker) knows about (ns, key) at path: 0 with a filled
 * (a file with a local copy, or a directory holding pending files or marked: by mkdir, emptied
 * through the mount, or holding a marked one), -ENOENT otherwise. */
int tfs_wb_stat(struct tierd_fuse *fs, struct tierd_ns *ns, const char *key, const char *path,
                struct tfs_attr *a);
/* Add the buffer's live files and the marked directories under the directory key prefix (ending
 * in '/' or "") at path to a listing: fn(name, len, is_dir, size, arg). */
void tfs_wb_list_children(
    struct tierd_fuse *fs, struct tierd_ns *ns, const char *prefix, const char *path,
    void (*fn)(const char *name, size_t len, bool is_dir, uint64_t size, void *arg), void *arg);
/* What (ns, key) is now, without a node: buffer first, then the backend; *from_wb: a file the
 * buffer holds. */
int tfs_wb_stat_key(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tierd_ns *ns,
                    const char *key, const char *path, struct tfs_attr *a, bool *from_wb);
/* Directory markers (fs->dirs): mkdir's (add), a directory emptied through the mount keeps one
 * (keep_parent), a created file drops those above it (drop_above), rmdir removes it (del: true
 * when there was one). */
int tfs_wb_marker_add(struct tierd_fuse *fs, const char *path);
void tfs_wb_marker_keep_parent(struct tierd_fuse *fs, const char *path);
void tfs_wb_marker_drop_above(struct tierd_fuse *fs, const char *path);
bool tfs_wb_marker_del(struct tierd_fuse *fs, const char *path);

/* ---- generations (fuse_wb_gen.c) ---- */
/* Start a new generation of dst_key; with src_key, holding src_key's current content (at
 * src_path). It replaces the live generation of dst_key only when sealed. On failure *out is
 * NULL. */
int tfs_wb_new_gen(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tierd_ns *ns,
                   const char *dst_key, const char *src_key, const char *src_path,
                   struct wb_file **out);
/* Add a writer to node n's write state (made on the first): NULL on ENOMEM. */
struct tfs_wstate *tfs_wb_wstate_attach(struct tfs_node *n);
/* Drop a writer; the last one seals the open generation (what: the operation, for the log).
 * Returns the seal's result. */
int tfs_wb_wstate_detach(struct tierd_fuse *fs, struct tfs_node *n, struct tfs_wstate *w,
                         const char *what);
/* With w->mu held: the generation to write into (copying the current content first). */
int tfs_wb_ensure_gen(struct tierd_fuse *fs, struct tfs_whandle *h);
/* Truncate through w (held: w->mu) to size. */
int tfs_wb_truncate_locked(struct tierd_fuse *fs, struct tfs_whandle *h, uint64_t size);

#endif
