/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_wb_ns.c - what a write-back namespace is to the read code: the write-back table of
 * struct tfs_ns_ops (read-your-writes for lookup, getattr and readdir: the burst buffer's live
 * files and the directory markers, merged with the backend's answer), registered by
 * tfs_wb_init; and the directory markers themselves (mkdir, and directories emptied through the
 * mount), which fuse_ops_write.c's mkdir, rmdir, create, unlink and rename keep.
 *
 * See "mkdir" in fuse_ops_write.c's DESIGN. Called from the FUSE worker threads; the markers
 * under fs->dirs_mu, a leaf lock.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/timeutil.h"
#include "fuse/fuse_wb.h"
#include "writeback/wb.h"

/* A file the mount shows from its local copy; a sealed file that FAILED stays visible (its
 * reads fail with EIO) until it is unlinked or replaced, never an older object in its place. */
bool tfs_wb_live(const struct wb_file_info *f)
{
    return f->state == WB_OPEN || f->state == WB_SEALED || f->state == WB_UPLOADING ||
           f->state == WB_UPLOADED || (f->state == WB_FAILED && f->sealed);
}

/* ---- directory markers (mkdir, and directories emptied through the mount) ---- */

/* Is path a directory by a marker: its own, or one below it (the listing of path's parent
 * shows path then, so its lookup must find it)? */
static bool marker_has(struct tierd_fuse *fs, const char *path)
{
    bool found = false;
    size_t pl = strlen(path);
    pthread_mutex_lock(&fs->dirs_mu);
    for (size_t i = 0; i < fs->ndirs && !found; i++)
        found = strncmp(fs->dirs[i], path, pl) == 0 &&
                (fs->dirs[i][pl] == '\0' || fs->dirs[i][pl] == '/');
    pthread_mutex_unlock(&fs->dirs_mu);
    return found;
}

/* Append the marker m (malloc'd; taken over on 0) with fs->dirs_mu held: 0 or -ENOMEM. */
static int marker_append_locked(struct tierd_fuse *fs, char *m)
{
    if (fs->ndirs == fs->capdirs) {
        size_t nc = fs->capdirs ? fs->capdirs * 2 : 16;
        char **v = realloc(fs->dirs, nc * sizeof(*v));
        if (!v)
            return -ENOMEM;
        fs->dirs = v;
        fs->capdirs = nc;
    }
    fs->dirs[fs->ndirs++] = m;
    return 0;
}

int tfs_wb_marker_add(struct tierd_fuse *fs, const char *path)
{
    char *m = strdup(path);
    if (!m)
        return -ENOMEM;
    pthread_mutex_lock(&fs->dirs_mu);
    int rc = marker_append_locked(fs, m);
    pthread_mutex_unlock(&fs->dirs_mu);
    if (rc)
        free(m);
    return rc;
}

/* Markers at most that tfs_wb_marker_keep_parent adds to (mkdir's and its own; create drops those
 * above a new file): beyond, a directory emptied through the mount goes as S3's do (with its
 * last object). */
#define TFS_MARKERS_MAX 4096

/* The file or directory at path (a mount path) is gone through the mount: its directory stays,
 * as a directory does when its last entry is removed (S3 keeps none: it is only its objects'
 * prefix), so a lookup still finds it and `rm -r` can remove it (rmdir: tfs_wb_marker_del). Not a
 * namespace's root (always there); best effort (logged once when TFS_MARKERS_MAX is reached). */
void tfs_wb_marker_keep_parent(struct tierd_fuse *fs, const char *path)
{
    const char *sl = strrchr(path, '/');
    if (!sl || sl == path)
        return;
    size_t pl = (size_t)(sl - path);
    for (size_t i = 0; i < fs->ctx.nns; i++)
        if (strlen(fs->ctx.ns[i].conf->path) == pl &&
            strncmp(fs->ctx.ns[i].conf->path, path, pl) == 0)
            return;
    char *parent = strndup(path, pl);
    if (!parent)
        return;
    pthread_mutex_lock(&fs->dirs_mu);
    bool have = fs->ndirs >= TFS_MARKERS_MAX;
    static _Atomic bool said;
    if (have && !atomic_exchange(&said, true))
        log_warn("fuse: %d directory markers: a directory emptied through the mount now goes "
                 "with its last object, as on S3 (rmdir the empty ones to free markers)",
                 TFS_MARKERS_MAX);
    for (size_t i = 0; i < fs->ndirs && !have; i++)
        have = strcmp(fs->dirs[i], parent) == 0;
    if (!have && marker_append_locked(fs, parent) == 0)
        parent = NULL;
    pthread_mutex_unlock(&fs->dirs_mu);
    free(parent);
}

/* A file was created at path: the markers of the directories above it are not needed while
 * it is there (its row, then its key, makes them directories), and they would hold
 * TFS_MARKERS_MAX. tfs_wb_marker_keep_parent adds them again when it goes. */
void tfs_wb_marker_drop_above(struct tierd_fuse *fs, const char *path)
{
    pthread_mutex_lock(&fs->dirs_mu);
    for (size_t i = 0; i < fs->ndirs;) {
        size_t ml = strlen(fs->dirs[i]);
        if (strncmp(path, fs->dirs[i], ml) == 0 && path[ml] == '/') {
            free(fs->dirs[i]);
            fs->dirs[i] = fs->dirs[--fs->ndirs];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&fs->dirs_mu);
}

bool tfs_wb_marker_del(struct tierd_fuse *fs, const char *path)
{
    bool found = false;
    pthread_mutex_lock(&fs->dirs_mu);
    for (size_t i = 0; i < fs->ndirs; i++) {
        if (strcmp(fs->dirs[i], path) == 0) {
            free(fs->dirs[i]);
            fs->dirs[i] = fs->dirs[--fs->ndirs];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&fs->dirs_mu);
    return found;
}

/* ---- read-your-writes for lookup/getattr/readdir ---- */

int tfs_wb_stat(struct tierd_fuse *fs, struct tierd_ns *ns, const char *key, const char *path,
                struct tfs_attr *a)
{
    struct wb_file_info *v = NULL;
    size_t n = 0;
    int rc = wb_list(fs->ctx.wb, ns->be->name, key, &v, &n);
    if (rc)
        return rc;
    size_t kl = strlen(key);
    const struct wb_file_info *best = NULL;
    bool dir = false;
    for (size_t i = 0; i < n; i++) {
        /* An EVICTABLE row is a file in the backend whose local copy was dropped: it exists
         * even while the backend cannot be asked (a writer must not see it as absent and
         * create it anew, replacing its content). */
        if (!tfs_wb_live(&v[i]) && v[i].state != WB_EVICTABLE)
            continue;
        if (strcmp(v[i].key, key) == 0) {
            if (!best || v[i].generation > best->generation)
                best = &v[i];
        } else if (v[i].key[kl] == '/') {
            dir = true;
        }
    }
    rc = -ENOENT;
    memset(a, 0, sizeof(*a));
    if (dir || (!best && marker_has(fs, path))) {
        a->is_dir = true;
        a->mtime_ns = (int64_t)fs->ctx.start_ns;
        rc = 0;
    } else if (best) {
        a->size_bytes = best->size_bytes;
        uint64_t now = tier_now_real_ns();
        uint64_t age = best->age_ms * TIER_NS_PER_MS;
        a->mtime_ns = (int64_t)(now > age ? now - age : now);
        rc = 0;
    }
    wb_list_free(v, n);
    return rc;
}

void tfs_wb_list_children(
    struct tierd_fuse *fs, struct tierd_ns *ns, const char *prefix, const char *path,
    void (*fn)(const char *name, size_t len, bool is_dir, uint64_t size, void *arg), void *arg)
{
    struct wb_file_info *v = NULL;
    size_t n = 0;
    size_t pl = strlen(prefix);
    if (wb_list(fs->ctx.wb, ns->be->name, prefix, &v, &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            if (!tfs_wb_live(&v[i]))
                continue;
            /* Two generations of one key (an OPEN replacement and the one it replaces): list
             * the name once, with the newest one's size (wb_list sorts by key, then id). */
            bool newer = false;
            for (size_t j = i + 1; j < n && strcmp(v[j].key, v[i].key) == 0 && !newer; j++)
                newer = tfs_wb_live(&v[j]);
            if (newer)
                continue;
            const char *rest = v[i].key + pl;
            const char *slash = strchr(rest, '/');
            if (slash)
                fn(rest, (size_t)(slash - rest), true, 0, arg);
            else
                fn(rest, strlen(rest), false, v[i].size_bytes, arg);
        }
        wb_list_free(v, n);
    }
    size_t dl = strlen(path);
    pthread_mutex_lock(&fs->dirs_mu);
    for (size_t i = 0; i < fs->ndirs; i++) {
        /* a marker anywhere below: its first segment is a directory here (as marker_has says;
         * the listing keeps one entry per name) */
        const char *m = fs->dirs[i];
        if (strncmp(m, path, dl) == 0 && m[dl] == '/' && m[dl + 1]) {
            const char *c = m + dl + 1, *sl = strchr(c, '/');
            fn(c, sl ? (size_t)(sl - c) : strlen(c), true, 0, arg);
        }
    }
    pthread_mutex_unlock(&fs->dirs_mu);
}

/* What (ns, key) is now, without a node: buffer first, then the backend. */
int tfs_wb_stat_key(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tierd_ns *ns,
                    const char *key, const char *path, struct tfs_attr *a, bool *from_wb)
{
    *from_wb = false;
    int rc = tfs_wb_stat(fs, ns, key, path, a);
    if (rc == 0) {
        *from_wb = !a->is_dir;
        return 0;
    }
    return tfs_backend_attr(ns, io, key, a);
}

/* The write-back table: no node or listing caches (the mount's own writes change the
 * namespace), shown writable, the burst buffer asked before the backend, and a name the backend
 * cannot be asked about is absent (so a checkpoint can be written while the store is down). */
static const struct tfs_ns_ops wb_ops = {
    .mode = TFS_MODE_WRITE_BACK,
    .cached = false,
    .revalidate = false,
    .writable = true,
    .absent_when_down = true,
    .local_stat = tfs_wb_stat,
    .local_children = tfs_wb_list_children,
};

/* ---- set-up ---- */

void tfs_wb_init(struct tierd_fuse *fs)
{
    pthread_mutex_init(&fs->dirs_mu, NULL);
    fs->wb_ops = &wb_ops;
}

void tfs_wb_fini(struct tierd_fuse *fs)
{
    for (size_t i = 0; i < fs->ndirs; i++)
        free(fs->dirs[i]);
    free(fs->dirs);
    fs->dirs = NULL;
    fs->ndirs = fs->capdirs = 0;
    pthread_mutex_destroy(&fs->dirs_mu);
}
