/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_int.h - private to src/fuse: the session object, the inode table, the attribute and
 * listing caches and the per-mode tables (struct tfs_ns_ops) shared by the operation files. The
 * files call each other without a cycle, in the order of the sections below (core first,
 * session last; docs/ARCHITECTURE.md, "The FUSE files").
 *
 * DESIGN (I/O paths; see also docs/ARCHITECTURE.md):
 *   lookup    trigger: kernel dentry miss.  action: answer from the parent's cached listing when
 *             fresh (no backend call; a name absent from a complete listing is ENOENT), else
 *             revalidate (below), else backend_stat (+ a one-key list for S3 implicit
 *             directories).  fallback: EIO.
 *   getattr   node attribute cache (attr_ttl), else revalidate, else the same stat.
 *   revalidate  trigger: a lookup, or a node whose attributes expired (getattr, open), in a
 *             directory that was listed before and whose listing is stale (or fresh but newer
 *             than the node's attributes: then no backend call).  action: rebuild that listing
 *             (single-flight, as readdir)
 *             and answer every child from it: one LIST per directory and entry_ttl instead of a
 *             HEAD per file (sizes, ETags, mtimes come with the listing; a name absent from it
 *             is ENOENT).  A HEAD is kept where it is cheaper or the listing cannot answer:
 *             the parent was never listed (one name of an unknown directory: a HEAD, not a
 *             LIST of all of it), its listing is truncated (max_dir_entries) or was made from
 *             pinned metadata in an outage (not complete), the parent is a virtual directory
 *             (no backend call either way), write-back namespaces (no caches: as before), and
 *             while a large directory's rebuild does not pay yet: a stale listing of P backend
 *             pages is rebuilt at the P-th revalidation of its children, the first P-1 take a
 *             HEAD each (rent or buy: at most about twice the calls of the better choice; a
 *             one-page directory is rebuilt at once). Requests that come during a rebuild of
 *             more than one page take a HEAD instead of waiting for all its pages (only the
 *             one that started it waits). A listing older than what the node holds
 *             (fetched_ns) is not used: a HEAD instead.  fallback: the rebuild fails (backend
 *             down): a node's last known attributes, else the stat path.
 *   readdir   one listing per directory, cached entry_ttl, shared by open handles (refcounted
 *             snapshot), built once for concurrent openers (single-flight), at most
 *             max_dir_entries entries (then EFBIG at its end); readdirplus also primes child
 *             attribute caches, so `ls -l` and the following opens cost no backend call.
 *   modes     synthesised: the namespace's (or [mount]'s) uid, gid, umask (tfs_fill_stat).
 *   open      attributes through the cache; the handle keeps (key, etag, size): it reads one
 *             version. keep_cache when the etag equals the previous open's, else the kernel
 *             drops its pages of the inode.
 *   read      cache_read() for the handle's version; -ESTALE (object replaced) -> EIO for this
 *             handle, the attribute cache is dropped so the next open sees the new version.
 *             Sequential reads queue cache_prefetch() of the blocks ahead (a window that grows
 *             with the stream, readahead_blocks up to readahead_max). Opens that follow the
 *             directory's cached listing (its next entry each time) queue the first window of the
 *             files after them (listing-order prefetch).
 *             The reply is spliced (fuse_reply_data) when the kernel allows it.
 *   no-open   trigger: [mount] no_open (fuse_noopen.c).  action: a second session serves the
 *             read-cache namespaces and /.tierd/datasets, bound over the main mount: OPEN,
 *             FLUSH answer ENOSYS once, reads come with fh 0 and take the inode's version
 *             (n->rd_*, switched by revalidation, which drops the kernel's pages) and read state
 *             (n->rstate); directories keep OPENDIR.  fallback: everything on the main session.
 *   control   /.tierd/hints/NAME (fuse_ctl_hints.c): an open for writing buffers what is written
 *             in memory (4 MiB at most, 32 MiB for root: EFBIG; per tenant and in all: EDQUOT,
 *             ENOSPC; a bad complete line: EINVAL from that write), flush and fsync hand the
 *             lines to hints_submit on a closer thread (one of a few), which answers them
 *             as the opener's tenant (its error is close(2)'s), read shows the set's progress,
 *             unlink drops it. Those operations sit in front of the others (tfs_ops_ctl) and take
 *             only the control paths; lookup, getattr and opendir reach them through the control
 *             files' struct tfs_ns_ops (stat, listing).
 *   mutations EROFS (read-cache namespaces). Write-back namespaces (fuse_ops_write.c) stage
 *             writes in the burst buffer (src/writeback/wb.h): lookup/getattr/readdir of such a
 *             namespace bypass the node and listing caches and merge the buffer's live files
 *             (read-your-writes: their struct tfs_ns_ops, fuse_wb_ns.c); reads of a file with a
 * local copy go to wb_read, others to the cache as above. backend down  stat/list errors other than
 * ENOENT fall back to the node's last known attributes and the directory's last listing
 * (stale-if-error), so cached data stays readable; a read that needs the backend fails with EIO
 * after backend_timeout. versions  every attribute carries the time it was fetched and a node never
 * takes older information than it has (a stale listing cannot shrink a size a newer stat gave); an
 * open that finds a new version invalidates the kernel's attributes (not pages: keep_cache = 0
 * drops those) so the kernel's i_size matches the handle's version. Internal functions return
 * -errno; the positive errno is made only at fuse_reply_err().
 *
 * Locking: the inode table has one mutex (tbl_mu) for its two hash maps and the nlookup/ref
 * counts; each node has a mutex (mu) for its attribute cache and listing pointer. tbl_mu is
 * never taken while holding a node mutex, and no lock is held across backend I/O.
 */
#ifndef TIER_FUSE_FUSE_INT_H
#define TIER_FUSE_FUSE_INT_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fuse/tierfs.h"
#include "telemetry/telemetry.h"
#include "tiers/backend.h"

/* The control files' directory (fuse_ctl_hints.c, fuse_ctl_versions.c). */
#define TFS_CTL_DIR "/.tierd"

/* What a node shows by its namespace: owner and umask, and how long the kernel and the node
 * cache keep its attributes and entries (per namespace: docs/CONFIG.md). */
struct tfs_perm {
    uid_t uid;
    gid_t gid;
    mode_t umask; /* applied to 0444/0555 (read-cache) and 0666/0777 (write-back) */
    uint64_t attr_ttl_ns, entry_ttl_ns;
    double attr_ttl_s, entry_ttl_s;
};

/* One directory entry of a listing (names are relative, no '/'). */
struct tfs_dirent {
    char *name;
    bool is_dir;
    uint64_t size_bytes;
    int64_t mtime_ns;
    char etag[BACKEND_ETAG_MAX];
    bool pending; /* from the write-back buffer: wins over a backend entry of the same name */
};

/* An immutable snapshot of one directory, shared by the node cache and open dir handles. */
struct tfs_listing {
    _Atomic int refs;
    uint64_t fetched_ns; /* monotonic time the backend was asked */
    uint64_t expire_ns;
    struct tfs_dirent *e; /* sorted by name, unique */
    size_t n;
    bool truncated; /* the directory has more than max_dir_entries: e holds the first ones, a
                     * name absent from it may still exist, and readdir ends in EFBIG */
    bool from_pins; /* the backend could not list: e holds the pinned children only, so a name
                     * absent from it may still exist (not complete, like truncated) */
    size_t pages;   /* backend_list calls the build made: what a rebuild costs */
};

/* What a node is known to be (attribute cache). */
struct tfs_attr {
    bool is_dir;
    uint64_t size_bytes;
    int64_t mtime_ns;
    char etag[BACKEND_ETAG_MAX];
    uint64_t fetched_ns; /* monotonic time the backend was asked; newer information wins */
    bool writable;       /* in a write-back namespace: mode 0644 / 0755 instead of 0444 / 0555 */
    mode_t mode;         /* nonzero: the permission bits shown as they are, no umask applied
                          * (the control files, fuse_ctl_hints.c) */
};

/* What the read code (lookup, getattr, readdir, open) does in a namespace of one mode: one table
 * per mode, so that the read code asks the table, never which mode a path is in. The read-cache
 * table is fuse_node.c's (tfs_ns_read_cache: the root and the virtual directories above the
 * namespaces too); the write-back one is fuse_wb_ns.c's and the control files' is
 * fuse_ctl_hints.c's, which their set-up (tfs_wb_init, tfs_ctl_init) registers in the session,
 * so the read code calls them without linking to them. Immutable. */
struct tierd_fuse;
enum tfs_mode { TFS_MODE_READ_CACHE, TFS_MODE_WRITE_BACK, TFS_MODE_CONTROL };
struct tfs_ns_ops {
    enum tfs_mode mode;
    bool cached;           /* attributes and listings are kept in the node (the TTLs) */
    bool revalidate;       /* a child's attributes may come from its parent's listing */
    bool writable;         /* shown 0666/0777 before the umask, instead of 0444/0555 */
    bool absent_when_down; /* a stat the backend cannot answer is ENOENT, so new files can
                            * be created while the object store is down (a burst buffer) */
    /* The whole answer for a path of this mode, instead of the backend: 0 with a filled, or
     * -errno. NULL: the backend's. */
    int (*stat)(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                struct tfs_attr *a);
    /* A new listing of a directory of this mode (referenced; never cached in the node). NULL:
     * the backend's, through the node's listing cache. */
    int (*listing)(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                   struct tfs_listing **out);
    /* What this mode holds of (ns, key) at path before the backend is asked (read-your-writes):
     * 0 with a filled, -ENOENT: ask the backend. NULL: nothing. */
    int (*local_stat)(struct tierd_fuse *fs, struct tierd_ns *ns, const char *key, const char *path,
                      struct tfs_attr *a);
    /* Add what this mode holds under the directory key prefix (ending in '/' or "") at path to a
     * backend listing: fn(name, len, is_dir, size, arg). NULL: nothing. */
    void (*local_children)(
        struct tierd_fuse *fs, struct tierd_ns *ns, const char *prefix, const char *path,
        void (*fn)(const char *name, size_t len, bool is_dir, uint64_t size, void *arg), void *arg);
    /* The permissions of a path of this mode, or NULL: its namespace's. NULL: always those. */
    const struct tfs_perm *(*perm)(const struct tierd_fuse *fs, const char *path);
};
extern const struct tfs_ns_ops tfs_ns_read_cache;

struct tfs_node {
    uint64_t ino;
    char *path;                  /* mount path, "/" or "/datasets/a" (immutable) */
    const struct tfs_perm *perm; /* owner and umask (of its namespace at creation; immutable) */
    /* what its namespace does (tfs_path_ops of its path: set at creation, and by a rename or
     * unlink that moves it, under tbl_mu; read without a lock) */
    _Atomic(const struct tfs_ns_ops *) nsops;
    /* tbl_mu */
    uint64_t nlookup;
    uint64_t refs; /* operations in progress holding the node */
    struct tfs_node *next_ino, *next_path;
    /* mu */
    pthread_mutex_t mu;
    bool attr_valid;
    uint64_t attr_expire_ns;
    uint64_t attr_floor_ns; /* tfs_node_drop_attr's time: older information is not taken */
    struct tfs_attr attr;
    char last_open_etag[BACKEND_ETAG_MAX]; /* for keep_cache */
    struct tfs_listing *listing;
    /* single-flight listing builds (read-cache paths): one thread builds, the others wait on
     * list_cv for its result (list_gen moves on, list_rc holds its error) */
    bool list_building;
    bool list_cap_logged; /* "over max_dir_entries" logged for this node */
    uint64_t list_gen;
    int list_rc;
    pthread_cond_t list_cv;
    uint64_t reval_heads; /* children revalidated by a HEAD since the listing went stale (the
                           * rent-or-buy count of "revalidate" above; 0 at each build) */
    struct tfs_wstate *w; /* write-back: the writers' shared state (fuse_wb_gen.c), or NULL */
    /* mu: listing-order prefetch of a directory's files (fuse_ops_file.c): the listing the
     * indices refer to (its fetched_ns), the entry after the one opened last, how many opens in
     * a row followed the listing, the first entry not yet queued */
    uint64_t lo_gen;
    size_t lo_next, lo_upto;
    unsigned lo_run;
    /* mu: the no-open connection (fuse_noopen.c), where reads come without a handle: the
     * version its reads serve (rd_etag, rd_size), set at the first read and switched by
     * tfs_node_set_attr when revalidation brings another etag (rd_gen counts the switches; the
     * switch drops the kernel's pages and attributes of the inode); rstate, the inode's read
     * state (fuse_ops_file.c: read-ahead window, hint and access notes), freed with the node by
     * rstate_free */
    bool rd_set;
    char rd_etag[BACKEND_ETAG_MAX];
    uint64_t rd_size;
    uint64_t rd_gen;
    void *rstate;
    void (*rstate_free)(void *rstate);
};

/* fi->fh of a file or directory points to a struct whose first member is a tfs_hbase. */
enum tfs_handle_kind {
    TFS_H_READ = 0x52454144,
    TFS_H_WB = 0x57424846,
    TFS_H_DIR = 0x44495248,
    TFS_H_CTL = 0x4354524c, /* a control file (fuse_ctl_hints.c) */
};

/* Every open handle is on the session's list until its release. RELEASE is asynchronous
 * (close(2) returns after FLUSH), so a daemon stopped right after a close, or while a process
 * still holds a file open, has handles the kernel never released: tierfs_free frees them. */
struct tfs_hbase {
    uint32_t kind;   /* first: is_wb_handle() reads it through fi->fh */
    uint32_t tenant; /* held (tenant_hold) from track to untrack: not reclaimed meanwhile */
    struct tfs_hbase *prev, *next;
};

struct tierd_fuse {
    struct tierfs_ctx ctx; /* what the mount uses (tierfs.h; immutable) */
    struct fuse_session *se;
    char *mountpoint;
    bool mounted;
    /* the no-open connection (fuse_noopen.c; immutable after mount): no_open is set in the
     * session that serves without OPEN, side is the main session's such session (NULL: none),
     * counts this connection's request counters (ctx.counts[0] or [1], or NULL) */
    bool no_open;
    struct tierd_fuse *side;
    /* the main session's binds and the side's loop thread: set once the loop has started, freed
     * after the ready thread (which binds) has been joined (tfs_noopen_free) */
    struct tfs_noopen *_Atomic nopen;
    /* the inode invalidations of a version switch (tfs_node_set_attr), sent by one notifier
     * thread of this session (started at the first): the kernel's invalidation waits for the
     * pages being read, so a worker answering a READ of the inode must not send it itself;
     * inval_mu guards the rest; stopped by tfs_inval_stop before the session goes */
    pthread_mutex_t inval_mu;
    pthread_cond_t inval_cv;
    fuse_ino_t *inval_q;
    size_t inval_n, inval_cap;
    bool inval_started, inval_stop;
    pthread_t inval_thr;
    struct tierd_fuse_counts *counts;
    /* the main connection's open, create and release behind their counting (fuse_session.c;
     * immutable) */
    void (*top_open)(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
    void (*top_create)(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                       struct fuse_file_info *fi);
    void (*top_release)(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
    _Atomic bool loop_done; /* the loop has returned: the ready thread stops polling */
    uint64_t attr_ttl_ns, entry_ttl_ns;
    double attr_ttl_s, entry_ttl_s;
    /* synthesised owner and umask (docs/CONFIG.md, "Permissions"): perm for the virtual
     * directories, ns_perm[i] for namespace ctx.ns[i]; immutable after mount */
    struct tfs_perm perm;
    struct tfs_perm ns_perm[TIERD_MAX_NAMESPACES];
    bool perm_per_ns; /* some namespace differs from perm: fill_stat finds the node's namespace */
    struct tfs_perm ctl_perm; /* the control files under /.tierd: perm with TTLs of 0 */
    struct tfs_ctl *ctl;      /* their state (fuse_ctl_hints.c); NULL: no control files */
    struct tfs_vview *vview;  /* the dataset version view's (fuse_ctl_versions.c), with ctl */
    /* tfs_vview_pin, registered by tfs_vview_init (NULL: no view), so that the read code reaches
     * the view's recorded versions without calling into its file */
    int (*vview_pin)(struct tierd_fuse *fs, const char *path, struct backend **be, char **key,
                     char etag[BACKEND_ETAG_MAX], char **version_id, uint64_t *size);
    /* the modes' tables (struct tfs_ns_ops), registered by tfs_wb_init and tfs_ctl_init
     * (NULL: none); immutable after mount */
    const struct tfs_ns_ops *wb_ops, *ctl_ops;
    /* the operations the write-back ones defer to elsewhere (tfs_ops_write; immutable) */
    struct fuse_lowlevel_ops wb_inner;
    /* the write operation in front of all (tfs_ops_write_buf; immutable): where a write whose
     * bytes are not spliced into a write-back file goes */
    void (*top_write)(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                      struct fuse_file_info *fi);
    size_t max_dir_entries;
    _Atomic uint64_t listings_built; /* listing builds that asked the backend (debug log) */

    pthread_mutex_t tbl_mu;
    struct tfs_node **by_ino, **by_path;
    size_t nbuckets, nnodes;
    uint64_t next_ino;
    char **graveyard; /* tbl_mu: node paths replaced by a rename, freed at fini */
    size_t ngrave, capgrave;

    /* write-back namespaces: directories made by mkdir, or emptied through the mount
     * (marker_keep_parent), kept until rmdir (local only: S3 has no directories; see
     * docs/WRITEBACK.md) */
    pthread_mutex_t dirs_mu;
    char **dirs;
    size_t ndirs, capdirs;

    pthread_mutex_t handles_mu;
    struct tfs_hbase handles; /* list head of open handles (struct tfs_hbase) */
};

/* The namespaces through the context's ops (core/ns.h): a mount path to its namespace and key
 * (malloc'd), 0 or -errno; is path a directory above namespace roots; its children's names. */
static inline int tfs_resolve(const struct tierd_fuse *fs, const char *path, struct tierd_ns **ns,
                              char **key, bool *is_root)
{
    return fs->ctx.ops.resolve(fs->ctx.ops.ud, path, ns, key, is_root);
}
static inline bool tfs_is_virtual_dir(const struct tierd_fuse *fs, const char *path)
{
    return fs->ctx.ops.is_virtual_dir(fs->ctx.ops.ud, path);
}
static inline void tfs_virtual_children(const struct tierd_fuse *fs, const char *path,
                                        void (*fn)(const char *name, size_t len, void *arg),
                                        void *arg)
{
    fs->ctx.ops.virtual_children(fs->ctx.ops.ud, path, fn, arg);
}
/* Say whether the mount answers (ctx.mounted, read by the API). */
static inline void tfs_set_mounted(const struct tierd_fuse *fs, bool up)
{
    if (fs->ctx.mounted)
        *fs->ctx.mounted = up;
}

/* ---- the core (fuse_node.c): calls no other file of src/fuse ---- */
/* Map an internal -errno to the errno the kernel gets. */
int tfs_errno(int neg);
/* The attributes of node n (its ino and permissions) with a's contents. Owner and mode come from
 * the node's tfs_perm (docs/CONFIG.md, "Permissions"). */
void tfs_fill_stat(struct tierd_fuse *fs, const struct tfs_node *n, const struct tfs_attr *a,
                   struct stat *st);
/* The entry reply for node n with attributes a (its namespace's TTLs, generation 1). */
void tfs_fill_entry(struct tierd_fuse *fs, const struct tfs_node *n, const struct tfs_attr *a,
                    struct fuse_entry_param *e);
/* Store a in the node's attribute cache unless the node already holds newer information (a
 * later fetched_ns); then a is replaced by that newer information, so replies never go back in
 * time (a listing older than a stat must not shrink the kernel's idea of the size). */
void tfs_node_set_attr(struct tierd_fuse *fs, struct tfs_node *n, struct tfs_attr *a);
void tfs_node_drop_attr(struct tfs_node *n);
/* Stop the session's notifier thread (queued invalidations are dropped): before the session is
 * destroyed, once no worker queues any more. */
void tfs_inval_stop(struct tierd_fuse *fs);
/* Listing references: the last unref frees it. */
void tfs_listing_unref(struct tfs_listing *l);
const struct tfs_dirent *tfs_listing_find(const struct tfs_listing *l, const char *name);
/* The attributes a listing entry gives (fetched when l was). */
void tfs_dirent_attr(const struct tfs_listing *l, const struct tfs_dirent *e, struct tfs_attr *a);
/* The table of the mode of path's namespace (a control path, a write-back namespace with the
 * burst buffer open, else tfs_ns_read_cache). No allocation. Nodes keep theirs (n->nsops). */
const struct tfs_ns_ops *tfs_path_ops(const struct tierd_fuse *fs, const char *path);
/* The owner and mode bits of a mount path (a pointer into fs, valid for the session). */
const struct tfs_perm *tfs_path_perm(const struct tierd_fuse *fs, const char *path);
/* Is path /.tierd or below it, with the control files set up? No allocation, no lock. */
bool tfs_ctl_path(const struct tierd_fuse *fs, const char *path);

/* The ioctx of a request: its caller's tenant (fuse_req_ctx: pid, uid, gid, resolved by the
 * tenant registry) and that tenant's default class. read and write use the ioctx bound in the
 * file handle at open instead: the kernel's readahead and write-back arrive without the pid of
 * the process they are for. Reads of the no-open connection have no handle: theirs is the
 * read's own, or the inode's first reader's when the request has no pid. */
struct tier_ioctx tfs_req_io(struct tierd_fuse *fs, fuse_req_t req);

/* Telemetry of one FUSE request (telemetry/telemetry.h): tfs_op_start() when it begins,
 * tfs_op_done() just before its reply (once the kernel has the reply, release may free the
 * handle that holds io). tier < 0: "backend" when this thread made a backend call since the
 * start, else "ram". */
struct tfs_opstat {
    uint64_t t0;
    uint64_t calls0;
};
struct tfs_opstat tfs_op_start(void);
void tfs_op_done(struct tierd_fuse *fs, const struct tier_ioctx *io, enum tele_op op, int tier,
                 struct tfs_opstat st, uint64_t bytes, int err);

/* Open handles: on the session's list until their release (tierfs_free frees the rest, by
 * kind: tfs_*_orphan_free, in each kind's file). */
/* Track h, opened for tenant: the tenant is held (tenant_hold: an idle tenant with an open
 * handle is not reclaimed, its reads going through the handle's ioctx without a resolution)
 * until untrack. */
void tfs_handle_track(struct tierd_fuse *fs, struct tfs_hbase *h, uint32_t kind, uint32_t tenant);
void tfs_handle_untrack(struct tierd_fuse *fs, struct tfs_hbase *h);
void tfs_file_orphan_free(struct tierd_fuse *fs, struct tfs_hbase *h);
void tfs_wb_orphan_free(struct tierd_fuse *fs, struct tfs_hbase *h);
void tfs_dir_orphan_free(struct tierd_fuse *fs, struct tfs_hbase *h);
void tfs_ctl_orphan_free(struct tierd_fuse *fs, struct tfs_hbase *h);

/* ---- inode table (fuse_inode.c) ---- */
int tfs_table_init(struct tierd_fuse *fs);
void tfs_table_fini(struct tierd_fuse *fs);
/* Take a reference on the node of ino for the duration of an operation, or NULL. */
struct tfs_node *tfs_node_get(struct tierd_fuse *fs, uint64_t ino);
/* The same for the node of a mount path (no kernel lookup added), or NULL when none has it. */
struct tfs_node *tfs_node_get_path(struct tierd_fuse *fs, const char *path);
/* tfs_node_get for an operation on ino: when the node is gone, reply ESTALE to req and return
 * NULL (the operation then just returns). */
struct tfs_node *tfs_node_get_or_stale(fuse_req_t req, struct tierd_fuse *fs, uint64_t ino);
void tfs_node_put(struct tierd_fuse *fs, struct tfs_node *n);
/* Find or create the node for path and add one kernel lookup to it (and one ref). */
int tfs_node_lookup(struct tierd_fuse *fs, const char *path, struct tfs_node **out);
/* Drop nlookup kernel references (forget). */
void tfs_node_forget(struct tierd_fuse *fs, uint64_t ino, uint64_t nlookup);
/* A rename moved the kernel's inode of old_path to new_path: the node follows (a node already
 * at new_path, replaced by the rename, is detached from its path). */
int tfs_node_rename(struct tierd_fuse *fs, const char *old_path, const char *new_path);
/* An unlink removed path: its node (if any) moves to a unique unreachable path, so a file
 * created under the name later gets a new node. Returns the node with a reference (put it with
 * tfs_node_put), or NULL when no node had the path (or on ENOMEM, logged by nobody: the node
 * then keeps its path). */
struct tfs_node *tfs_node_detach(struct tierd_fuse *fs, const char *path);
/* Join parent path and name into a new malloc'd path; -ENAMETOOLONG / -ENOMEM. */
int tfs_path_join(const char *parent, const char *name, char **out);
void tfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void tfs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);

/* ---- listings (fuse_listing.c) ---- */
/* A fresh listing of directory node n (reference to drop with tfs_listing_unref). */
int tfs_listing_get(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *n,
                    struct tfs_listing **out);
/* The cached listing of n if fresh (referenced), else NULL: no backend call. */
struct tfs_listing *tfs_listing_peek(struct tierd_fuse *fs, struct tfs_node *n);
/* hints_meta_fn (hints/hints.h) for the hint engine: the size, etag and mtime of key of ns from
 * the fresh cached listing of its directory (no backend call), in the no-open session's cache
 * (fs->side) or the session's; 0, or -ENOENT when no such listing has it. ud is the main
 * session. */
int tfs_meta_peek(void *ud, const struct tierd_ns *ns, const char *key, struct backend_stat *st);
/* For revalidating a child of directory node dir ("revalidate" in DESIGN): a complete listing
 * of dir fetched at or after min_fetched_ns (referenced), rebuilt when stale; -EAGAIN when a
 * HEAD is the better or only way; another -errno when the rebuild failed. */
int tfs_listing_for_child(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *dir,
                          uint64_t min_fetched_ns, struct tfs_listing **out);

/* ---- attributes (fuse_ops_attr.c) ---- */
/* Current attributes of a node (cached for attr_ttl); -ENOENT, -EIO. */
int tfs_node_attr(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *n,
                  struct tfs_attr *a);
/* Is (ns, key), which the backend's stat found absent, a directory of S3's (a prefix of keys
 * below it: no object of its own)? 1, 0, or the listing's error (one LIST of "key/"). */
int tfs_implicit_dir(struct tierd_ns *ns, const struct tier_ioctx *io, const char *key);
/* Ask ns's backend what key is; on success a holds that (everything else zero), otherwise a is
 * untouched. Returns backend_stat's result. */
int tfs_backend_attr(struct tierd_ns *ns, const struct tier_ioctx *io, const char *key,
                     struct tfs_attr *a);
/* Look a name up under a directory node, with the same sources as getattr. */
int tfs_resolve_child(struct tierd_fuse *fs, const struct tier_ioctx *io, struct tfs_node *parent,
                      const char *path, const char *name, struct tfs_attr *a);
void tfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void tfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_op_statfs(fuse_req_t req, fuse_ino_t ino);

/* ---- the read operations (fuse_ops_dir.c, fuse_ops_file.c, fuse_ops_ro.c) ---- */
void tfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi);
void tfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                        struct fuse_file_info *fi);
void tfs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* Open a read handle on exactly (be, key, etag, size) for the node of path (a file of a dataset
 * version, fuse_ctl_versions.c): every read asks for that ETag (-ESTALE -> EIO, logged with
 * why); replies to req. version_id: NULL, or the object version to read (a versioned bucket's
 * older version). */
void tfs_open_pinned(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, const char *path,
                     struct backend *be, const char *key, const char *etag, const char *version_id,
                     uint64_t size);
void tfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void tfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* Count one request of this connection (fs->counts; none: nothing). */
#define TFS_COUNT(fs, field)                                                                       \
    do {                                                                                           \
        if ((fs)->counts)                                                                          \
            atomic_fetch_add_explicit(&(fs)->counts->field, 1, memory_order_relaxed);              \
    } while (0)
/* Install EROFS for every mutation (read-cache namespaces). */
void tfs_ops_readonly(struct fuse_lowlevel_ops *ops);

/* ---- write-back namespaces (fuse_wb_ns.c, fuse_wb_gen.c, fuse_ops_write.c) ---- */
/* Register the write-back table (fs->wb_ops: read-your-writes for lookup, getattr and readdir)
 * and the directory markers' state. */
void tfs_wb_init(struct tierd_fuse *fs);
void tfs_wb_fini(struct tierd_fuse *fs);
/* Put create/open/read/write/fsync/flush/release/setattr/unlink/rename/mkdir/rmdir in front of
 * the operations installed so far (fs->wb_inner), which keep every path outside the write-back
 * namespaces. */
void tfs_ops_write(struct tierd_fuse *fs, struct fuse_lowlevel_ops *ops);
/* Last, once every layer's write is installed: write_buf, which splices a write-back file's
 * written bytes into its staging file and hands every other write to ops->write. Setting it
 * makes libfuse receive requests with splice (FUSE_CAP_SPLICE_READ). */
void tfs_ops_write_buf(struct tierd_fuse *fs, struct fuse_lowlevel_ops *ops);

/* ---- the dataset version view under /.tierd/datasets (fuse_ctl_versions.c) ---- */
#define TFS_CTL_VERSIONS TFS_CTL_DIR "/datasets"
/* Set the view up (fs->vview) / free it: called by tfs_ctl_init / tfs_ctl_fini. */
int tfs_vview_init(struct tierd_fuse *fs);
void tfs_vview_fini(struct tierd_fuse *fs);
/* Is path TFS_CTL_VERSIONS or below it? */
bool tfs_vview_path(const char *path);
/* What a path of the view is (a directory above the versions, or a version's directory or
 * file): 0 with a filled, or -errno. */
int tfs_vview_stat(struct tierd_fuse *fs, const char *path, struct tfs_attr *a);
/* A new listing of a directory of the view (referenced). */
int tfs_vview_listing(struct tierd_fuse *fs, const char *path, struct tfs_listing **out);
/* The recorded version of a file of a version: its namespace's backend, the key (malloc'd), etag,
 * version id (malloc'd or NULL) and size; 0, -EISDIR, -ENOENT or -ENOMEM. */
int tfs_vview_pin(struct tierd_fuse *fs, const char *path, struct backend **be, char **key,
                  char etag[BACKEND_ETAG_MAX], char **version_id, uint64_t *size);
/* Open a file of a version for reading (tfs_open_pinned); replies to req. */
void tfs_vview_open(struct tierd_fuse *fs, fuse_req_t req, fuse_ino_t ino, const char *path,
                    struct fuse_file_info *fi);
/* The permissions of a dataset version's path (those of the namespace holding its tree; the
 * mount's for /.tierd and the view's directories above the versions), or NULL for any other
 * control path. */
const struct tfs_perm *tfs_ctl_version_perm(const struct tierd_fuse *fs, const char *path);

/* ---- the control files under /.tierd (fuse_ctl_hints.c; docs/HINTS.md) ---- */
/* /.tierd (read-only), /.tierd/hints (whoever may read the mount may create files in it) and
 * /.tierd/hints/NAME: writing the file gives the hint set NAME of the writer's tenant, reading it
 * shows the set's progress, unlinking it drops the set; /.tierd/datasets is the version view
 * above. They exist when the hint engine does (ctx.hints), in read-only mounts too. */
/* Set the control files up (fs->ctl, fs->ctl_perm, fs->ctl_ops, the version view): after
 * perm_init, before the mount serves. */
int tfs_ctl_init(struct tierd_fuse *fs);
void tfs_ctl_fini(struct tierd_fuse *fs);
/* Serve the flushes, fsyncs and releases of hint files handed to the closer threads (answering
 * them) and stop those: before the session is destroyed. Later ones are served inline. */
void tfs_ctl_drain(struct tierd_fuse *fs);
/* Put the control files' create/open/read/write/flush/fsync/release/setattr/unlink in front of
 * the operations installed so far, which keep every other path (call it last). */
void tfs_ops_ctl(struct tierd_fuse *fs, struct fuse_lowlevel_ops *ops);

/* ---- the no-open connection (fuse_noopen.c) ---- */
/* Should a second connection without OPEN serve the read-cache namespaces (ctx.no_open, root,
 * the kernel)? Logs one line when it will not; never fails. */
bool tfs_noopen_wanted(const struct tierd_fuse *fs);
/* The no-open session's operations: OPEN (and FLUSH) answer ENOSYS once, so the kernel serves
 * opens and closes itself; reads come with fh 0 (tfs_op_read). */
void tfs_ops_noopen(struct fuse_lowlevel_ops *ops);
/* Start the side session's loop on its own thread (0 or -errno). */
int tfs_noopen_loop_start(struct tierd_fuse *fs);
/* Once both mounts answer: bind each read-cache namespace's directory and the version view of
 * the side mount over the same directory of the main mount. Logs; never fails. */
void tfs_noopen_bind(struct tierd_fuse *fs);
/* Detach the binds and end the side session's loop (before either mount goes); frees nothing:
 * the ready thread may still be binding (each bind made after this detaches itself). */
void tfs_noopen_stop(struct tierd_fuse *fs);
/* Free what tfs_noopen_loop_start made: after the ready thread has been joined. */
void tfs_noopen_free(struct tierd_fuse *fs);
/* The side session's namespace operations in sc (a copy of main's context): main's, answering
 * ENOENT for every namespace that is not read-cache (and virtual directories with none below);
 * main outlives the side session. */
void tfs_noopen_ns_ops(const struct tierd_fuse *main, struct tierfs_ctx *sc);
/* The private mount point of the side session (malloc'd), or NULL. */
char *tfs_noopen_dir(const struct tierd_fuse *fs);

#endif
