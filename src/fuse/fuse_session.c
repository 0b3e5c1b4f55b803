/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_session.c - mount, serve and unmount the tierd file system; clear a stale mount left by a
 * crashed tierd.
 *
 * Called by main() on its own thread: tierfs_mount() -> tierfs_loop() -> tierfs_free(). The
 * session's signal handlers (SIGINT, SIGTERM, SIGHUP) end the multi-threaded loop; main() keeps
 * those signals blocked in every other thread it starts, so they land where the loop notices.
 * Readiness is observed from the outside: a helper thread stat()s the mount point, which returns
 * only once the kernel's INIT has been answered and our getattr served.
 *
 * The top of src/fuse: it sets every other file up and installs their operations, in layers
 * (read-only, write-back in front, control files in front of all); none of them calls it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "hints/hints.h"
#include "fuse/fuse_int.h"
#include "tenant/tenant.h"
#include "writeback/wb.h"
#include "fuse/tierfs.h"

struct ready_ctx {
    struct tierd_fuse *fs;
    void (*ready)(void *arg, int status);
    void *arg;
};

static pthread_t g_ready_thread;
static bool g_ready_started;

static int mkdir_p(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                rc = -errno;
                break;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    free(p);
    return rc;
}

/* Is path the mount point of some mount right now (per /proc/self/mountinfo)? */
static bool is_mountpoint(const char *path, char *fstype, size_t fstypesz)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return false;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    while (getline(&line, &cap, f) > 0) {
        /* id parent maj:min root mountpoint opts ... - fstype source superopts */
        char *save = NULL;
        char *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok && i < 4; i++)
            tok = strtok_r(NULL, " ", &save);
        if (!tok || strcmp(tok, path) != 0)
            continue;
        char *t;
        while ((t = strtok_r(NULL, " ", &save)) != NULL) {
            if (strcmp(t, "-") == 0) {
                t = strtok_r(NULL, " ", &save);
                tier_strlcpy(fstype, t ? t : "", fstypesz);
                break;
            }
        }
        found = true;
    }
    free(line);
    fclose(f);
    return found;
}

int tierfs_clear_stale_mount(const char *path)
{
    /* statfs always reaches the FUSE daemon (stat may be answered from the kernel's attribute
     * cache even on a dead connection), so it tells a dead mount from a live one */
    struct statfs sf;
    if (statfs(path, &sf) == 0)
        return 0;
    int e = errno;
    if (e != ENOTCONN && e != ECONNABORTED)
        return 0;
    log_warn("fuse: %s is a dead FUSE mount (%s), probably left by a crashed tierd; detaching it",
             path, strerror(e));
    if (umount2(path, MNT_DETACH) == 0)
        return 1;
    int ue = errno;
    pid_t pid = fork();
    if (pid == 0) {
        execlp("fusermount3", "fusermount3", "-u", "-z", path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 1;
    tier_err_set("%s is a stale FUSE mount and could not be detached (umount2: %s); run "
                 "'fusermount3 -u -z %s' and start tierd again",
                 path, strerror(ue), path);
    return -ue;
}

static void perm_ttl(struct tfs_perm *p, uint64_t attr_ms, uint64_t entry_ms)
{
    p->attr_ttl_ns = attr_ms * TIER_NS_PER_MS;
    p->entry_ttl_ns = entry_ms * TIER_NS_PER_MS;
    p->attr_ttl_s = (double)attr_ms / 1000.0;
    p->entry_ttl_s = (double)entry_ms / 1000.0;
}

/* The synthesised owner and umask of the mount and of each namespace (docs/CONFIG.md,
 * "Permissions"). With allow_other and no [mount] umask the mount is closed to other users
 * (027): exposing every object tierd can read to every local user must be asked for. */
static void perm_init(struct tierd_fuse *fs)
{
    const struct tierfs_ctx *c = &fs->ctx;
    fs->perm.uid = c->mount_uid >= 0 ? (uid_t)c->mount_uid : getuid();
    fs->perm.gid = c->mount_gid >= 0 ? (gid_t)c->mount_gid : getgid();
    fs->perm.umask = c->mount_umask >= 0 ? (mode_t)c->mount_umask : (c->allow_other ? 027 : 022);
    perm_ttl(&fs->perm, c->attr_ttl_ms, c->entry_ttl_ms);
    fs->perm_per_ns = false;
    for (size_t i = 0; i < fs->ctx.nns; i++) {
        const struct tierd_ns_conf *nc = fs->ctx.ns[i].conf;
        struct tfs_perm *p = &fs->ns_perm[i];
        p->uid = nc->uid >= 0 ? (uid_t)nc->uid : fs->perm.uid;
        p->gid = nc->gid >= 0 ? (gid_t)nc->gid : fs->perm.gid;
        p->umask = nc->umask >= 0 ? (mode_t)nc->umask : fs->perm.umask;
        bool rc_ns = nc->mode == TIERD_NS_READ_CACHE;
        uint64_t at = nc->attr_ttl_ms != TIERD_TTL_UNSET ? nc->attr_ttl_ms
                      : c->attr_ttl_set || !rc_ns        ? c->attr_ttl_ms
                                                         : TIERD_READ_CACHE_TTL_MS;
        uint64_t et = nc->entry_ttl_ms != TIERD_TTL_UNSET ? nc->entry_ttl_ms
                      : c->entry_ttl_set || !rc_ns        ? c->entry_ttl_ms
                                                          : TIERD_READ_CACHE_TTL_MS;
        perm_ttl(p, at, et);
        if (p->uid != fs->perm.uid || p->gid != fs->perm.gid || p->umask != fs->perm.umask)
            fs->perm_per_ns = true;
    }
    if (c->allow_other && c->mount_umask < 0)
        log_warn("fuse: allow_other without [mount] umask: the mount is shown with umask 027 "
                 "(owner %u, group %u; other users get no access). Set [mount] gid = GROUP for "
                 "the users who may read, or umask = 022 to let every local user read "
                 "(docs/CONFIG.md, Permissions)",
                 (unsigned)fs->perm.uid, (unsigned)fs->perm.gid);
}

/* May a user outside the owner read what dir holds, as the mount shows it (p)? Warn when the
 * mount shows more than the backend directory itself grants: the users allow_other lets in
 * read, through tierd, objects the backend keeps from them. */
static void warn_exposed_dir(const char *ns_path, const char *dir, const struct tfs_perm *p)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return;
    bool others = !(p->umask & 004), group = !(p->umask & 040);
    char who[64] = "";
    if (others && !(st.st_mode & S_IROTH))
        snprintf(who, sizeof(who), "every local user");
    else if (group && !(st.st_mode & S_IROTH) && !(st.st_gid == p->gid && (st.st_mode & S_IRGRP)))
        snprintf(who, sizeof(who), "the members of group %u", (unsigned)p->gid);
    if (who[0])
        log_warn("fuse: namespace %s: the POSIX backend directory %s is mode %04o (owner %u, "
                 "group %u), but with allow_other the mount lets %s read it through tierd; set "
                 "[namespace %s] or [mount] gid/umask to narrow it",
                 ns_path, dir, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
                 (unsigned)st.st_gid, who, ns_path);
}

static void warn_exposed(struct tierd_fuse *fs)
{
    const struct tierfs_ctx *c = &fs->ctx;
    if (!c->allow_other)
        return;
    for (size_t i = 0; i < c->nns; i++) {
        const struct tierd_ns_conf *nc = c->ns[i].conf;
        const char *root = c->ns_posix_root[i];
        if (!root)
            continue;
        warn_exposed_dir(nc->path, root, &fs->ns_perm[i]);
        if (nc->prefix && nc->prefix[0]) {
            char dir[4096];
            int pl = (int)strlen(nc->prefix) - 1; /* without its trailing '/' */
            int w = snprintf(dir, sizeof(dir), "%s/%.*s", root, pl, nc->prefix);
            if (w > 0 && (size_t)w < sizeof(dir))
                warn_exposed_dir(nc->path, dir, &fs->ns_perm[i]);
        }
    }
}

/* libfuse receives with splice only into a pipe that holds a whole request, max_write plus its
 * 4 KiB header room (FUSE_BUFFER_HEADER_SIZE, private to libfuse); a pipe of 1 MiB + 4 KiB rounds
 * up to 2 MiB, over the default fs.pipe-max-size (1 MiB) for a process without CAP_SYS_RESOURCE.
 * Then libfuse reads every request, silently; say so once, with the fix. */
static void note_splice(const struct fuse_conn_info *conn)
{
    if (!(conn->want & FUSE_CAP_SPLICE_READ))
        return;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return;
    size_t need = (size_t)conn->max_write + 4096, pow2 = 4096;
    while (pow2 < need)
        pow2 *= 2;
    if (fcntl(p[0], F_SETPIPE_SZ, (int)need) < 0)
        log_info("fuse: writes into write-back namespaces are copied through tierd's memory, not "
                 "spliced into the spool: a pipe of %zu bytes is over fs.pipe-max-size and tierd "
                 "lacks CAP_SYS_RESOURCE ('sysctl fs.pipe-max-size=%zu' saves that copy)",
                 need, pow2);
    else
        log_debug("fuse: max_write %u, writes spliced into the spool", conn->max_write);
    close(p[0]);
    close(p[1]);
}

static void tfs_init(void *userdata, struct fuse_conn_info *conn)
{
    const struct tierd_fuse *fs = userdata;
    /* O_TRUNC arrives with open: one new generation of a write-back file, no separate
     * truncate; a control file sees the truncation (fuse_ctl_hints.c); read-cache opens refuse it
     * (EROFS) as the truncate that would follow did. Not on the no-open connection: with no OPEN
     * to refuse it the kernel would truncate its own idea of the file; there the truncate comes
     * as a setattr, which answers EROFS. */
    if ((conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) && !fs->no_open)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    else
        conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC; /* libfuse may have it by default */
    if (conn->capable & FUSE_CAP_READDIRPLUS)
        conn->want |= FUSE_CAP_READDIRPLUS;
    /* always readdirplus: it primes attributes, so ls -l / find / open cost no backend call */
    conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
    if (conn->capable & FUSE_CAP_ASYNC_READ)
        conn->want |= FUSE_CAP_ASYNC_READ;
    if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
        conn->want |= FUSE_CAP_PARALLEL_DIROPS;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE;
    /* Writes: libfuse 3.14 already asks for the largest it can take, max_write = 1 MiB with
     * max_pages = 256 (its receive buffer is 256 pages; the kernel's limit,
     * fs.fuse.max_pages_limit, is 256 by default too), and turns FUSE_CAP_SPLICE_READ on by itself
     * when write_buf is set ([mount] splice_writes, tfs_ops_write_buf): requests arrive through a
     * pipe, so a write's pages
     * are passed by reference and spliced into the spool. The debug log says what was agreed. */
    note_splice(conn);
    conn->max_readahead = 1 << 20;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
}

/* The session's state before its mount: the modes' tables, the control files, the inode
 * table. Returns NULL on failure with *rc set (-errno). */
static struct tierd_fuse *fs_new(const struct tierfs_ctx *ctx, int *rc)
{
    struct tierd_fuse *fs = calloc(1, sizeof(*fs));
    if (!fs) {
        *rc = -ENOMEM;
        return NULL;
    }
    fs->ctx = *ctx;
    pthread_mutex_init(&fs->handles_mu, NULL);
    pthread_mutex_init(&fs->inval_mu, NULL);
    pthread_cond_init(&fs->inval_cv, NULL);
    fs->handles.prev = fs->handles.next = &fs->handles;
    fs->max_dir_entries = (size_t)ctx->max_dir_entries;
    perm_init(fs);
    tfs_wb_init(fs); /* the modes' tables before the first node (the root) is made */
    *rc = tfs_ctl_init(fs);
    if (*rc == 0 && (*rc = tfs_table_init(fs)) != 0)
        tfs_ctl_fini(fs);
    if (*rc) {
        tfs_wb_fini(fs);
        pthread_mutex_destroy(&fs->handles_mu);
        pthread_mutex_destroy(&fs->inval_mu);
        pthread_cond_destroy(&fs->inval_cv);
        free(fs);
        return NULL;
    }
    return fs;
}

/* Prepare the mount point path: clear a stale mount, create it, refuse a live tierd's. */
static int mountpoint_prepare(const char *path)
{
    int rc = tierfs_clear_stale_mount(path);
    if (rc < 0)
        return rc;
    char fstype[64] = "";
    struct stat st;
    if (stat(path, &st) != 0) {
        rc = mkdir_p(path);
        if (rc) {
            tier_err_set("cannot create the mount point %s: %s", path, strerror(-rc));
            return rc;
        }
    } else if (!S_ISDIR(st.st_mode)) {
        tier_err_set("the mount point %s is not a directory", path);
        return -ENOTDIR;
    } else if (is_mountpoint(path, fstype, sizeof(fstype)) && strcmp(fstype, "fuse.tierd") == 0) {
        tier_err_set("%s is already mounted by a running tierd; stop it first (or 'umount %s')",
                     path, path);
        return -EBUSY;
    }
    return 0;
}

/* Create fs's FUSE session with ops and mount it at path. */
static int session_mount(struct tierd_fuse *fs, const struct fuse_lowlevel_ops *ops,
                         const char *path)
{
    char opts[256];
    /* the no-open mount (and so its binds) is read-only and keeps no access times: a read does
     * not make the kernel's cached atime stale, which would cost a GETATTR at the next stat of
     * the file (cat's fstat: one round trip per warm file) */
    snprintf(opts, sizeof(opts), "fsname=%s,subtype=tierd,default_permissions%s%s",
             fs->no_open ? "tierd-noopen" : "tierd", fs->ctx.allow_other ? ",allow_other" : "",
             fs->no_open ? ",ro,noatime" : "");
    char *argv[] = {(char *)(uintptr_t) "tierd", (char *)(uintptr_t) "-o", opts, NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, argv);
    fs->se = fuse_session_new(&args, ops, sizeof(*ops), fs);
    fuse_opt_free_args(&args);
    if (!fs->se) {
        tier_err_set("cannot create the FUSE session (is /dev/fuse there?)");
        return -EINVAL;
    }
    if (!fs->no_open && fuse_set_signal_handlers(fs->se) != 0) {
        tier_err_set("cannot install the FUSE signal handlers");
        return -EIO;
    }
    if (fuse_session_mount(fs->se, path) != 0) {
        tier_err_set("cannot mount FUSE at %s (see the message above; /dev/fuse, permissions, "
                     "allow_other needs user_allow_other in /etc/fuse.conf)",
                     path);
        return -EIO;
    }
    fs->mounted = true;
    return 0;
}

/* The state of a session whose loop has ended (or never ran), and the session. */
static void fs_free(struct tierd_fuse *fs)
{
    tfs_inval_stop(fs); /* no worker queues any more */
    if (fs->se) {
        if (fs->mounted)
            fuse_session_unmount(fs->se);
        if (!fs->no_open)
            fuse_remove_signal_handlers(fs->se);
        fuse_session_destroy(fs->se);
        fs->se = NULL;
    }
}

/* The read operations every session has. */
static void ops_read(struct fuse_lowlevel_ops *ops)
{
    memset(ops, 0, sizeof(*ops));
    ops->init = tfs_init;
    ops->lookup = tfs_op_lookup;
    ops->forget = tfs_op_forget;
    ops->forget_multi = tfs_op_forget_multi;
    ops->getattr = tfs_op_getattr;
    ops->statfs = tfs_op_statfs;
    ops->opendir = tfs_op_opendir;
    ops->readdir = tfs_op_readdir;
    ops->readdirplus = tfs_op_readdirplus;
    ops->releasedir = tfs_op_releasedir;
    ops->open = tfs_op_open;
    ops->read = tfs_op_read;
    ops->release = tfs_op_release;
    tfs_ops_readonly(ops);
}

static void free_state(struct tierd_fuse *fs);

/* The main connection's OPEN (and CREATE, which opens) and RELEASE, counted for /v1/stats in
 * front of every layer. */
static void count_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    TFS_COUNT(fs, open);
    fs->top_open(req, ino, fi);
}

static void count_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                         struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    TFS_COUNT(fs, open);
    fs->top_create(req, parent, name, mode, fi);
}

static void count_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    TFS_COUNT(fs, release);
    fs->top_release(req, ino, fi);
}

/* The no-open session (fuse_noopen.c) beside fs: the read-cache namespaces and the version
 * view, read-only, at the private mount point. On failure it logs one line and fs serves
 * everything. */
static void side_mount(struct tierd_fuse *fs)
{
    char *dir = tfs_noopen_dir(fs);
    if (!dir) {
        log_warn("fuse: no-open connection: no directory for its mount (the API socket's); "
                 "every file is opened through tierd");
        return;
    }
    struct tierfs_ctx sc = fs->ctx;
    sc.wb = NULL;               /* the write-back namespaces stay with the main connection */
    tfs_noopen_ns_ops(fs, &sc); /* and the side session does not show them (ENOENT) */
    sc.mounted = NULL;
    sc.mount_path = dir;
    int rc = 0;
    struct tierd_fuse *side = fs_new(&sc, &rc);
    if (!side) {
        log_warn("fuse: no-open connection: %s; every file is opened through tierd", strerror(-rc));
        free(dir);
        return;
    }
    side->no_open = true;
    side->counts = fs->ctx.counts ? &fs->ctx.counts[1] : NULL;
    side->mountpoint = dir;
    struct fuse_lowlevel_ops ops;
    ops_read(&ops);
    tfs_ops_noopen(&ops);
    rc = mountpoint_prepare(dir);
    if (rc == 0 && chmod(dir, 0700) != 0) /* private: the trees are reached through the binds */
        log_debug("fuse: cannot chmod 0700 %s (%s)", dir, strerror(errno));
    if (rc == 0)
        rc = session_mount(side, &ops, dir);
    if (rc) {
        log_warn("fuse: no-open connection at %s: %s; every file is opened through tierd", dir,
                 tier_err_msg());
        fs_free(side);
        free_state(side);
        return;
    }
    fs->side = side;
}

int tierfs_mount(const struct tierfs_ctx *ctx, struct tierd_fuse **out)
{
    const char *path = ctx->mount_path;
    int rc = 0;
    struct tierd_fuse *fs = fs_new(ctx, &rc);
    if (!fs)
        return rc;
    fs->counts = ctx->counts ? &ctx->counts[0] : NULL;
    warn_exposed(fs);
    fs->mountpoint = strdup(path);
    if (!fs->mountpoint) {
        rc = -ENOMEM;
        goto fail;
    }
    rc = mountpoint_prepare(path);
    if (rc < 0)
        goto fail;

    struct fuse_lowlevel_ops ops;
    ops_read(&ops);
    if (ctx->wb)
        tfs_ops_write(fs, &ops); /* write-back namespaces; the rest stays read-only */
    tfs_ops_ctl(fs, &ops);       /* the control files, in front of all of them */
    if (ctx->wb && ctx->splice_writes)
        tfs_ops_write_buf(fs, &ops); /* splices write-back files' bytes, else ops.write */
    fs->top_open = ops.open;
    fs->top_create = ops.create;
    fs->top_release = ops.release;
    ops.open = count_open;
    ops.create = count_create;
    ops.release = count_release;
    rc = session_mount(fs, &ops, path);
    if (rc)
        goto fail;
    if (tfs_noopen_wanted(fs))
        side_mount(fs);
    /* the hint engine takes a file's size and etag from our listings when we have them (after
     * fs->side is set: the peeks read it) */
    hints_set_meta(ctx->hints, tfs_meta_peek, fs);
    *out = fs;
    return 0;
fail:
    tierfs_free(fs);
    return rc;
}

/* Raise the kernel readahead of this mount's bdi so one sequential reader keeps several 1 MiB
 * requests in flight (best effort: needs root). */
static void tune_readahead(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    char sys[128];
    snprintf(sys, sizeof(sys), "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev),
             minor(st.st_dev));
    int fd = open(sys, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (write(fd, "4096", 4) != 4)
        log_debug("fuse: cannot set %s", sys);
    close(fd);
}

static void *ready_main(void *arg)
{
    struct ready_ctx *rc = arg;
    struct tierd_fuse *fs = rc->fs;
    uint64_t deadline = tier_now_mono_ns() + 30 * TIER_NS_PER_SEC;
    int status = -ETIMEDOUT;
    while (tier_now_mono_ns() < deadline) {
        struct stat st;
        struct statfs sf;
        if (statfs(fs->mountpoint, &sf) == 0 && stat(fs->mountpoint, &st) == 0 &&
            st.st_ino == FUSE_ROOT_ID) {
            status = 0;
            break;
        }
        if (fs->loop_done) {
            status = -ECANCELED;
            break;
        }
        tier_sleep_ms(10);
    }
    if (status == 0) {
        tune_readahead(fs->mountpoint);
        if (fs->side) {
            tune_readahead(fs->side->mountpoint);
            tfs_noopen_bind(fs); /* before ready: the paths are final when it is called */
        }
        tfs_set_mounted(fs, true);
        log_info("fuse: mounted at %s", fs->mountpoint);
    }
    if (rc->ready)
        rc->ready(rc->arg, status);
    free(rc);
    return NULL;
}

void tierfs_stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

int tierfs_loop(struct tierd_fuse *fs, void (*ready)(void *arg, int status), void *arg)
{
    struct ready_ctx *rc = calloc(1, sizeof(*rc));
    if (!rc)
        return -ENOMEM;
    rc->fs = fs;
    rc->ready = ready;
    rc->arg = arg;
    sigset_t block, old;
    tierfs_stop_signals(&block);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int e = pthread_create(&g_ready_thread, NULL, ready_main, rc);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        free(rc);
        return -e;
    }
    g_ready_started = true;
    if (fs->side && (e = tfs_noopen_loop_start(fs)) != 0)
        log_warn("fuse: no-open connection: cannot start its loop (%s); its trees are served "
                 "through the main connection",
                 strerror(-e));

    struct fuse_loop_config *lc = fuse_loop_cfg_create();
    if (!lc)
        return -ENOMEM;
    unsigned threads = (unsigned)(fs->ctx.fuse_threads > 0 ? fs->ctx.fuse_threads : 16);
    fuse_loop_cfg_set_max_threads(lc, threads);
    fuse_loop_cfg_set_idle_threads(lc, threads);
    fuse_loop_cfg_set_clone_fd(lc, 0);
    int r = fuse_session_loop_mt(fs->se, lc);
    fuse_loop_cfg_destroy(lc);
    fs->loop_done = true;
    tfs_set_mounted(fs, false);
    if (r > 0)
        log_info("fuse: signal %d received, unmounting %s", r, fs->mountpoint);
    return r < 0 ? r : 0;
}

/* After the session is gone (no operation runs): free the handles the kernel never released. */
static void handles_fini(struct tierd_fuse *fs)
{
    size_t nfiles = 0;
    while (fs->handles.next != &fs->handles) {
        struct tfs_hbase *h = fs->handles.next;
        tfs_handle_untrack(fs, h);
        if (h->kind == TFS_H_READ) {
            tfs_file_orphan_free(fs, h);
            nfiles++;
        } else if (h->kind == TFS_H_WB) {
            tfs_wb_orphan_free(fs, h);
            nfiles++;
        } else if (h->kind == TFS_H_CTL) {
            tfs_ctl_orphan_free(fs, h);
            nfiles++;
        } else {
            tfs_dir_orphan_free(fs, h);
        }
    }
    if (nfiles)
        log_info("fuse: %zu file handle(s) not released by the kernel at unmount, freed", nfiles);
    pthread_mutex_destroy(&fs->handles_mu);
}

/* After the session is gone: the state fs_new made, and fs. */
static void free_state(struct tierd_fuse *fs)
{
    tfs_ctl_drain(fs);
    handles_fini(fs);
    tfs_table_fini(fs);
    tfs_wb_fini(fs);
    tfs_ctl_fini(fs);
    pthread_mutex_destroy(&fs->inval_mu);
    pthread_cond_destroy(&fs->inval_cv);
    free(fs->mountpoint);
    free(fs);
}

void tierfs_free(struct tierd_fuse *fs)
{
    if (!fs)
        return;
    fs->loop_done = true;
    hints_set_meta(fs->ctx.hints, NULL, NULL); /* waits for peeks in flight */
    if (fs->ctx.wb)
        wb_wait_async_flush(fs->ctx.wb); /* remote closes are answered before the session goes */
    tfs_ctl_drain(fs);                   /* and hint files' closes */
    /* the binds over the main mount go first, then the side session's loop, then both
     * sessions: a ready thread still binding finds its stats answered (ENOTCONN) and the stop
     * begun, and only then is it joined and the binds' state freed */
    tfs_noopen_stop(fs);
    fs_free(fs);
    if (fs->side)
        fs_free(fs->side);
    if (g_ready_started) {
        pthread_join(g_ready_thread, NULL);
        g_ready_started = false;
    }
    tfs_noopen_free(fs);
    if (fs->side) {
        free_state(fs->side);
        fs->side = NULL;
    }
    tfs_set_mounted(fs, false);
    free_state(fs);
}
