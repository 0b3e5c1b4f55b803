/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_noopen.c - the no-open connection: a second FUSE session of the same process that serves
 * the read-cache namespaces and the dataset version view (/.tierd/datasets) without OPEN and
 * RELEASE, and nothing else (other namespaces and /.tierd/hints are ENOENT there:
 * tfs_noopen_ns_ops, fuse_ctl_hints.c), mounted at a private directory (mode 0700, beside the
 * API socket: "noopen.mnt") and bound (mount --bind) over the same directories of the main
 * mount, so the paths users see are those of the main mount.
 *
 * DESIGN: the kernel's no-open mode is per connection: once OPEN answers ENOSYS the kernel never
 * sends OPEN or RELEASE on that connection again, treats every open as one with keep_cache (the
 * page cache stays across opens), and sends reads with fh 0. Write-back namespaces and the hint
 * files need OPEN (a handle per writer), so the main connection keeps OPEN and the read-only trees
 * move to this one. What a handle held lives in the inode (fuse_ops_file.c, "no-open"): its
 * version is the node's (key, etag, size), switched only by revalidation, which then drops the
 * kernel's pages and attributes of the inode (tfs_node_set_attr queues that invalidation to the
 * session's notifier thread: the caller may be answering a READ of the inode, whose locked page
 * the invalidation waits for); a dataset version's file reads its recorded version. FLUSH answers
 * ENOSYS too (no handle has anything to flush: the kernel then stops sending it). OPENDIR is kept:
 * without it the kernel caches a directory's entries (FOPEN_CACHE_DIR is its no-opendir default)
 * until the directory's mtime changes, and the mtime tierd shows does not follow its listings, so a
 * listing would outlive entry_ttl; one OPENDIR per directory listed costs little next to one OPEN
 * per file.
 *
 * Set-up (fuse_session.c calls): tfs_noopen_wanted decides ([mount] no_open, root, the kernel),
 * the side session is mounted after the main one, its loop runs on its own thread
 * (tfs_noopen_loop_start), the binds are made once both mounts answer (tfs_noopen_bind, from the
 * ready thread) and detached before either mount goes (tfs_noopen_stop, which also ends the side
 * loop); struct tfs_noopen is freed only after the ready thread has been joined
 * (tfs_noopen_free). Anything that fails logs one line and leaves that tree on the main
 * connection, as with no_open = off. Locking: struct tfs_noopen's mutex guards the bind list and
 * the stopping flag, never held across a stat or mount (they walk the mounts, which at shutdown
 * answer only once the sessions go); a bind made after the stop began detaches itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timeutil.h"
#include "fuse/fuse_int.h"

struct tfs_noopen {
    pthread_mutex_t mu;
    bool stopping;                         /* mu: tfs_noopen_stop has begun */
    char *binds[TIERD_MAX_NAMESPACES + 1]; /* mu: the bound directories of the main mount */
    int bind_fd[TIERD_MAX_NAMESPACES + 1]; /* mu: each bind's root (O_PATH), for its detach */
    size_t nbinds;                         /* mu */
    /* the side session's workers (side_worker): they stop at stop, woken from their read by
     * SIGUSR2 (a handler that does nothing, so the read returns EINTR) */
    pthread_t *workers;
    unsigned nworkers;
    _Atomic bool stop;
};

/*
 * The kernels known to be safe (docs/CONFIG.md, "no_open"): upstream e26ee4efbc79 took the inode
 * reference a no-open file held away, and readahead reclaim could then deadlock; bd5603eaae0a
 * ("fuse: fix readahead reclaim deadlock") fixed it in v6.19 and went to the 6.18.y, 6.12.y,
 * 6.6.y and 5.15.y stable lines in January 2026. The first fixed release of each line is not
 * pinned down here, so each minimum lies above the January 2026 releases of its line; 6.1.y
 * (Debian 12) has no fix known, and older kernels are not known to predate the bug either.
 */
static const struct {
    int major, minor, patch;
} safe_min[] = {{6, 18, 8}, {6, 12, 68}, {6, 6, 122}, {5, 15, 200}};

static bool kernel_safe(const char *release)
{
    int ma = 0, mi = 0, pa = 0;
    if (sscanf(release, "%d.%d.%d", &ma, &mi, &pa) < 2)
        return false;
    if (ma > 6 || (ma == 6 && mi >= 19))
        return true;
    for (size_t i = 0; i < sizeof(safe_min) / sizeof(safe_min[0]); i++)
        if (ma == safe_min[i].major && mi == safe_min[i].minor)
            return pa >= safe_min[i].patch;
    return false;
}

bool tfs_noopen_wanted(const struct tierd_fuse *fs)
{
    enum tierd_no_open mode = fs->ctx.no_open;
    if (mode == TIERD_NO_OPEN_OFF)
        return false;
    bool any = fs->ctl != NULL; /* the version view */
    for (size_t i = 0; i < fs->ctx.nns; i++)
        any = any || fs->ctx.ns[i].conf->mode == TIERD_NS_READ_CACHE;
    if (!any)
        return false;
    if (mode == TIERD_NO_OPEN_AUTO && fs->ctx.access) {
        /* a policy's idle trigger or tenant filter counts reads, and a read the kernel's page
         * cache answers on the no-open connection never reaches tierd */
        log_info("fuse: [mount] no_open = auto: a [policy] rule uses idle or tenant, "
                 "which needs every read of a file to reach tierd, so every file is opened "
                 "through tierd; no_open = on serves read-only trees without OPEN anyway");
        return false;
    }
    struct utsname u;
    if (mode == TIERD_NO_OPEN_AUTO && (uname(&u) != 0 || !kernel_safe(u.release))) {
        log_info("fuse: [mount] no_open = auto: kernel %s is not known to have the no-open "
                 "readahead fix (bd5603eaae0a), so every file is opened through tierd; "
                 "no_open = on serves read-only trees without OPEN anyway (docs/CONFIG.md)",
                 uname(&u) == 0 ? u.release : "?");
        return false;
    }
    if (geteuid() != 0) {
        log_info("fuse: [mount] no_open: tierd is not root (the bind mounts need "
                 "CAP_SYS_ADMIN), so every file is opened through tierd");
        return false;
    }
    return true;
}

char *tfs_noopen_dir(const struct tierd_fuse *fs)
{
    const char *sock = fs->ctx.api_socket;
    const char *slash = sock ? strrchr(sock, '/') : NULL;
    char *dir = NULL;
    if (!slash)
        return NULL;
    if (asprintf(&dir, "%.*s/noopen.mnt", (int)(slash - sock), sock) < 0)
        return NULL;
    return dir;
}

/* Is a namespace at nspath below (or at) dir, by whole segments ("/": every one)? */
static bool ns_below(const char *nspath, const char *dir)
{
    size_t n = strlen(dir);
    return strcmp(dir, "/") == 0 ||
           (strncmp(nspath, dir, n) == 0 && (nspath[n] == '\0' || nspath[n] == '/'));
}

/* Does a read-cache namespace of mfs lie below (or at) path? */
static bool rc_below(const struct tierd_fuse *mfs, const char *path)
{
    for (size_t i = 0; i < mfs->ctx.nns; i++)
        if (mfs->ctx.ns[i].conf->mode == TIERD_NS_READ_CACHE &&
            ns_below(mfs->ctx.ns[i].conf->path, path))
            return true;
    return false;
}

/* The side session's namespace operations (ud: the main session): the main ones, less every
 * namespace that is not read-cache (ENOENT; a write-back one read here would bypass its spool)
 * and the virtual directories with no read-cache namespace below. */
static int side_resolve(void *ud, const char *path, struct tierd_ns **ns, char **key, bool *is_root)
{
    const struct tierd_fuse *mfs = ud;
    int rc = mfs->ctx.ops.resolve(mfs->ctx.ops.ud, path, ns, key, is_root);
    if (rc == 0 && (*ns)->conf->mode != TIERD_NS_READ_CACHE) {
        free(*key);
        *key = NULL;
        *ns = NULL;
        rc = -ENOENT;
    }
    return rc;
}

static bool side_is_virtual_dir(void *ud, const char *path)
{
    const struct tierd_fuse *mfs = ud;
    return mfs->ctx.ops.is_virtual_dir(mfs->ctx.ops.ud, path) && rc_below(mfs, path);
}

struct side_children_arg {
    const struct tierd_fuse *mfs;
    const char *path;
    void (*fn)(const char *name, size_t len, void *arg);
    void *arg;
};

static void side_child(const char *name, size_t len, void *arg)
{
    struct side_children_arg *a = arg;
    char *child = NULL;
    const char *sep = strcmp(a->path, "/") == 0 ? "" : "/";
    if (asprintf(&child, "%s%s%.*s", a->path, sep, (int)len, name) < 0)
        return;
    if (rc_below(a->mfs, child))
        a->fn(name, len, a->arg);
    free(child);
}

static void side_children(void *ud, const char *path,
                          void (*fn)(const char *name, size_t len, void *arg), void *arg)
{
    const struct tierd_fuse *mfs = ud;
    struct side_children_arg a = {.mfs = mfs, .path = path, .fn = fn, .arg = arg};
    mfs->ctx.ops.virtual_children(mfs->ctx.ops.ud, path, side_child, &a);
}

void tfs_noopen_ns_ops(const struct tierd_fuse *mfs, struct tierfs_ctx *sc)
{
    sc->ops.resolve = side_resolve;
    sc->ops.is_virtual_dir = side_is_virtual_dir;
    sc->ops.virtual_children = side_children;
    sc->ops.manifest = NULL; /* not called by the FUSE layer */
    sc->ops.ud = (void *)(uintptr_t)mfs;
}

static void noopen_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino, (void)fi;
    struct tierd_fuse *fs = fuse_req_userdata(req);
    TFS_COUNT(fs, open);
    /* the kernel then opens every file of this connection itself, from now on */
    fuse_reply_err(req, ENOSYS);
}

void tfs_ops_noopen(struct fuse_lowlevel_ops *ops)
{
    ops->open = noopen_open;
    ops->flush = NULL;   /* ENOSYS from libfuse: the kernel stops sending FLUSH */
    ops->release = NULL; /* never sent without OPEN */
}

struct worker_arg {
    struct tierd_fuse *side;
    struct tfs_noopen *no;
};

static void wake_handler(int sig)
{
    (void)sig;
}

/* One worker of the side session: libfuse's multi-threaded loop has no way to be stopped from
 * another thread while its workers wait in read(2), so the side session has its own loop. */
static void *side_worker(void *arg)
{
    struct worker_arg *wa = arg;
    struct fuse_buf buf = {.mem = NULL};
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, SIGUSR2);
    pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
    while (!atomic_load(&wa->no->stop)) {
        int res = fuse_session_receive_buf(wa->side->se, &buf);
        if (res == -EINTR)
            continue;
        if (res <= 0)
            break; /* the connection went (ENODEV) */
        fuse_session_process_buf(wa->side->se, &buf);
    }
    free(buf.mem);
    return NULL;
}

int tfs_noopen_loop_start(struct tierd_fuse *fs)
{
    struct tfs_noopen *no = calloc(1, sizeof(*no));
    if (!no)
        return -ENOMEM;
    pthread_mutex_init(&no->mu, NULL);
    unsigned threads = (unsigned)(fs->ctx.fuse_threads > 0 ? fs->ctx.fuse_threads : 16);
    static struct worker_arg wa; /* one side session per process */
    wa.side = fs->side;
    wa.no = no;
    no->workers = calloc(threads, sizeof(*no->workers));
    if (!no->workers) {
        atomic_store(&fs->nopen, no); /* freed with the rest (tfs_noopen_free) */
        return -ENOMEM;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = wake_handler; /* no SA_RESTART: a read it interrupts returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    /* the signals that end the main loop stay with it */
    sigset_t block, old;
    sigfillset(&block);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int e = 0;
    for (unsigned i = 0; i < threads && e == 0; i++) {
        e = pthread_create(&no->workers[i], NULL, side_worker, &wa);
        if (e == 0)
            no->nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    atomic_store(&fs->nopen, no); /* complete: the ready thread may read it */
    return no->nworkers ? 0 : -e;
}

/* Does the side mount answer (its root is the FUSE root)? Polls for at most 30 s. */
static bool side_ready(struct tierd_fuse *fs)
{
    uint64_t deadline = tier_now_mono_ns() + 30 * TIER_NS_PER_SEC;
    while (tier_now_mono_ns() < deadline && !fs->loop_done) {
        struct stat st;
        struct statfs sf;
        if (statfs(fs->side->mountpoint, &sf) == 0 && stat(fs->side->mountpoint, &st) == 0 &&
            st.st_ino == FUSE_ROOT_ID)
            return true;
        tier_sleep_ms(10);
    }
    return false;
}

/* Detach the bind whose root fd is (or dst, without one): through the descriptor, since at
 * shutdown the main loop has ended and a path through the main mount would wait for its answer
 * (without the descriptor, or /proc, the main mount's detach takes the bind with it). */
static void bind_detach(const char *dst, int fd)
{
    char fdpath[64];
    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
    if (fd >= 0 && umount2(fdpath, MNT_DETACH) != 0)
        log_warn("fuse: cannot detach the bind at %s (%s); it goes with the mount", dst,
                 strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* Bind the side mount's path over the main mount's (both mount paths + tree). The stats and the
 * mount walk both mounts, so they run without no->mu: a stop meanwhile (whose loops have ended,
 * so a walk waits until the sessions go) does not wait for them, and a bind made once the stop
 * has begun is detached here. */
static void bind_one(struct tierd_fuse *fs, struct tfs_noopen *no, const char *tree)
{
    char *src = NULL, *dst = NULL;
    if (asprintf(&src, "%s%s", fs->side->mountpoint, tree) < 0)
        return;
    if (asprintf(&dst, "%s%s", fs->mountpoint, tree) < 0) {
        free(src);
        return;
    }
    if (fs->ctx.test_fault_file) /* test builds: hold a bind here (test_noopen_fuse) */
        tier_test_pause(fs->ctx.test_fault_file, "noopen bind pause");
    struct stat st;
    pthread_mutex_lock(&no->mu);
    bool skip = no->stopping || no->nbinds >= TIERD_MAX_NAMESPACES + 1;
    pthread_mutex_unlock(&no->mu);
    if (skip) {
    } else if (stat(src, &st) != 0 || !S_ISDIR(st.st_mode) || stat(dst, &st) != 0) {
        log_warn("fuse: no-open connection: %s is not a directory on both mounts (%s); it is "
                 "served through the main one",
                 tree, strerror(errno));
    } else if (mount(src, dst, NULL, MS_BIND, NULL) != 0) {
        log_warn("fuse: no-open connection: cannot bind %s over %s (%s); %s is served through "
                 "the main connection",
                 src, dst, strerror(errno), tree);
    } else {
        int fd = open(dst, O_PATH | O_DIRECTORY | O_CLOEXEC);
        pthread_mutex_lock(&no->mu);
        if (no->stopping) {
            pthread_mutex_unlock(&no->mu);
            bind_detach(dst, fd);
        } else {
            no->bind_fd[no->nbinds] = fd;
            no->binds[no->nbinds++] = dst;
            dst = NULL;
            pthread_mutex_unlock(&no->mu);
        }
    }
    free(src);
    free(dst);
}

/* Is path below (or at) dir, by whole segments? */
static bool path_within(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

void tfs_noopen_bind(struct tierd_fuse *fs)
{
    /* read once: freed only after this thread is joined (tfs_noopen_free); no worker: a stat of
     * the side mount would wait for ever */
    struct tfs_noopen *no = atomic_load(&fs->nopen);
    if (!fs->side || !no || !no->nworkers || !side_ready(fs)) {
        if (fs->side)
            log_warn("fuse: no-open connection at %s does not answer; every file is opened "
                     "through the main connection",
                     fs->side->mountpoint);
        return;
    }
    const struct tierfs_ctx *c = &fs->ctx;
    for (size_t i = 0; i < c->nns; i++) {
        const struct tierd_ns_conf *nc = c->ns[i].conf;
        if (nc->mode != TIERD_NS_READ_CACHE)
            continue;
        bool skip = false;
        for (size_t j = 0; j < c->nns && !skip; j++) {
            const struct tierd_ns_conf *o = c->ns[j].conf;
            if (j == i)
                continue;
            /* a write-back namespace inside it must stay on the main connection; a read-cache
             * one around it is bound already */
            if (o->mode == TIERD_NS_WRITE_BACK && path_within(o->path, nc->path))
                skip = true;
            if (o->mode == TIERD_NS_READ_CACHE && path_within(nc->path, o->path) &&
                strcmp(o->path, nc->path) != 0)
                skip = true;
        }
        if (!skip)
            bind_one(fs, no, nc->path);
    }
    if (fs->ctl)
        bind_one(fs, no, TFS_CTL_VERSIONS);
    pthread_mutex_lock(&no->mu);
    size_t n = no->nbinds;
    pthread_mutex_unlock(&no->mu);
    log_info("fuse: %zu read-only tree(s) served without OPEN through %s", n, fs->side->mountpoint);
}

void tfs_noopen_stop(struct tierd_fuse *fs)
{
    struct tfs_noopen *no = atomic_load(&fs->nopen);
    if (!no)
        return;
    pthread_mutex_lock(&no->mu);
    no->stopping = true;
    for (size_t i = no->nbinds; i-- > 0;) {
        bind_detach(no->binds[i], no->bind_fd[i]);
        free(no->binds[i]);
    }
    no->nbinds = 0;
    pthread_mutex_unlock(&no->mu);
    atomic_store(&no->stop, true);
    for (unsigned i = 0; i < no->nworkers; i++) {
        /* again until it has left: the signal may come between its check and its read */
        while (pthread_tryjoin_np(no->workers[i], NULL) == EBUSY) {
            pthread_kill(no->workers[i], SIGUSR2);
            tier_sleep_ms(1);
        }
    }
    no->nworkers = 0;
    log_info("fuse: no-open connection: binds detached, its loop ended");
}

void tfs_noopen_free(struct tierd_fuse *fs)
{
    struct tfs_noopen *no = atomic_exchange(&fs->nopen, NULL);
    if (!no)
        return;
    free(no->workers);
    pthread_mutex_destroy(&no->mu);
    free(no);
}
