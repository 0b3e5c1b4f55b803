/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ops_ctl.c - the control files under <mount>/.tierd: epoch-order hints given by writing a
 * file, so that a job in any language can hint with a shell line (docs/HINTS.md).
 *
 *   /.tierd             a read-only directory holding "hints"
 *   /.tierd/hints       one file per hint set of the caller's tenant (and per file being written)
 *   /.tierd/hints/NAME  write: the set's order, mount paths one a line; read: the set's progress
 *                       ("key: value" lines from hints_list); unlink: drop the set (hints_cancel)
 *   /.tierd/datasets/TREE@NAME/...
 *                       read-only: version NAME of the tree at mount path /TREE (docs/VERSIONS.md),
 *                       its files as the manifest lists them, every read pinned to the file's
 *                       ETag in the manifest (tfs_open_pinned: a file changed since the commit
 *                       fails with EIO, logged with why). The first path component holding '@'
 *                       followed by a valid version name is the version's root; the directories
 *                       above it list the namespaces, trees and versions under them
 *                       (dataset_view_list; inside a namespace with its permissions).
 *                       Those listings are kept CTL_VLIST_TTL_NS (CTL_VLIST of them; a commit
 *                       or delete through this tierd makes them stale at once).
 *                       Manifests are cached (CTL_VCACHE of them, re-read after
 *                       CTL_VCACHE_TTL_NS: a deleted version disappears by then); their
 *                       metadata needs no backend request.
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
#include "fuse/fuse_int.h"
#include "tenant/tenant.h"

#define CTL_FILE_MAX (32ull << 20)   /* bytes of one hint file (the API's admin body bound) */
#define CTL_TOTAL_MAX (256ull << 20) /* bytes of all hint files being written at once */
/* bytes of the hint files one tenant's writers who are no administrators have open at once:
 * four files of the users' bound, so that one tenant cannot take CTL_TOTAL_MAX from the rest
 * (16 tenants at their share fill it) */
#define CTL_TENANT_MAX (4 * (HINTS_USER_BYTES_MAX + 1ull))
#define CTL_BUF_MIN (64u << 10) /* a buffer's first allocation */
/* tenants with writers' buffers at once: each holds CTL_BUF_MIN at least, so CTL_TOTAL_MAX runs
 * out before the slots do */
#define CTL_CHARGES (CTL_TOTAL_MAX / CTL_BUF_MIN)
#define CTL_CLOSERS 4 /* closer threads: one slow close holds up no other handle's */
#define CTL_HINTS TFS_CTL_DIR "/hints"
#define CTL_TEXT_MAX 2048 /* the status text of one set */
#define CTL_VERSIONS TFS_CTL_DIR "/datasets"
#define CTL_VCACHE 8                                /* manifests kept decoded */
#define CTL_VCACHE_TTL_NS (60ull * TIER_NS_PER_SEC) /* then read again (deleted: gone) */
#define CTL_VLIST 8 /* listings kept of the view's directories above the versions */
/* then listed again (a version committed or deleted on another node shows by then; through
 * this tierd at once: dataset_generation) */
#define CTL_VLIST_TTL_NS (10ull * TIER_NS_PER_SEC)

/* A decoded manifest of the view (ctl->mu). */
struct vcache {
    char *tree; /* the tree's mount path; NULL: a free slot */
    char name[MANIFEST_NAME_MAX];
    struct manifest m;
    uint64_t loaded_ns, used;
};

/* A listing of a view directory above the versions (ctl->mu). */
struct vlist {
    char *path;            /* NULL: a free slot */
    struct tfs_listing *l; /* one reference held */
    uint64_t loaded_ns, gen, used;
};

struct tfs_ctlh;

/* A flush, fsync or release of a writer handle, for a closer thread to serve and answer. */
enum job_kind { JOB_FLUSH, JOB_FSYNC, JOB_RELEASE };
struct ctl_job {
    struct ctl_job *next;
    fuse_req_t req;
    struct tfs_ctlh *h;
    enum job_kind kind;
};

/* The bytes one tenant's writers who are no administrators hold in buffers (charge_mu). */
struct ctl_charge {
    uint32_t tenant;
    uint64_t bytes; /* 0: a free slot */
};

struct tfs_ctl {
    struct fuse_lowlevel_ops inner; /* the operations for every other path (immutable) */
    pthread_mutex_t mu;
    struct tfs_ctlh *writers;  /* mu: open writer handles */
    _Atomic uint64_t buffered; /* bytes allocated by the writers' buffers */
    pthread_mutex_t charge_mu; /* a leaf lock: taken with a handle's mu held */
    struct ctl_charge charges[CTL_CHARGES];
    /* the closers: submissions at close, off the FUSE workers (qmu) */
    pthread_mutex_t qmu;
    struct ctl_closer {
        struct tierd_fuse *fs;
        pthread_cond_t cv;
        struct ctl_job *head, *tail; /* qmu: its jobs, served in order */
        unsigned load;               /* qmu: jobs queued or being served */
        bool on;                     /* started (immutable after tfs_ctl_init) */
        pthread_t th;
    } closers[CTL_CLOSERS];
    bool qstop;                   /* qmu */
    struct vcache vc[CTL_VCACHE]; /* mu */
    uint64_t vclock;              /* mu */
    struct vlist vl[CTL_VLIST];   /* mu */
};

/* fi->fh of a control file. */
struct tfs_ctlh {
    struct tfs_hbase hb;          /* TFS_H_CTL */
    struct tfs_ctlh *prev, *next; /* ctl->mu: on ctl->writers (writers only) */
    char name[HINTS_NAME_MAX];    /* immutable */
    uint32_t tenant;              /* the opener's (immutable) */
    bool writer;                  /* opened for writing (immutable) */
    bool admin;                   /* the opener is root or tierd's uid (immutable) */
    bool append_flag;             /* opened with O_APPEND (immutable) */
    _Atomic bool cancelled;       /* the file was unlinked: nothing more is submitted */
    struct ctl_job release_job;   /* its release, queued without an allocation (writers) */
    unsigned queued;              /* ctl->qmu: its jobs queued or being served */
    unsigned closer;              /* ctl->qmu: the closer serving them (while queued > 0) */
    pthread_mutex_t mu;
    char *buf; /* mu: what was written, NUL-terminated at len */
    size_t len, cap;
    size_t taken;           /* mu: bytes handed to hints_submit already (never rewritten) */
    uint64_t line0;         /* mu: lines in the taken bytes (line numbers in messages) */
    size_t checked;         /* mu: bytes whose complete lines write checked (a line boundary) */
    uint64_t checked_lines; /* mu: lines in the checked bytes */
    bool nocheck;           /* mu: a write went below checked: only flush checks */
    bool dirty;             /* mu: written, truncated or created since the last submission */
    bool submitted;         /* mu: a submission happened: the later ones append */
    int err;                /* mu: sticky error (write beyond the bound, failed submission) */
    char *text;             /* mu: the status read returns, made at offset 0 */
    size_t tlen;
};

enum ctl_kind { CTL_NONE, CTL_ROOT, CTL_DIR, CTL_FILE };

bool tfs_ctl_path(const struct tierd_fuse *fs, const char *path)
{
    size_t l = sizeof(TFS_CTL_DIR) - 1;
    return fs->ctl && strncmp(path, TFS_CTL_DIR, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

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

/* ---- dataset versions (the read-only view) ------------------------------------------------ */

static bool in_versions(const char *path)
{
    size_t l = sizeof(CTL_VERSIONS) - 1;
    return strncmp(path, CTL_VERSIONS, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

/* A path under CTL_VERSIONS: dataset_view_path (dataset.h; the stager parses it too). */
static int vpath(const char *path, char **tree, char *name, const char **rest)
{
    return dataset_view_path(path, tree, name, rest);
}

/* The slot of (tree, name), loaded if needed; ctl->mu is held on return 0 (the caller unlocks). */
static int vget_locked(struct tierd_fuse *fs, const char *tree, const char *name,
                       struct vcache **out)
{
    struct tfs_ctl *c = fs->ctl;
    uint64_t now = tier_now_mono_ns();
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < CTL_VCACHE; i++) {
        struct vcache *v = &c->vc[i];
        if (v->tree && strcmp(v->tree, tree) == 0 && strcmp(v->name, name) == 0 &&
            now - v->loaded_ns < CTL_VCACHE_TTL_NS) {
            v->used = ++c->vclock;
            *out = v;
            return 0;
        }
    }
    pthread_mutex_unlock(&c->mu);
    struct manifest m;
    tier_err_clear();
    int rc = dataset_show(fs->d, tree, name, &m); /* backend I/O, without the lock */
    if (rc == -EBADMSG)
        log_warn("fuse: %s", tier_err_msg()); /* a malformed manifest: say why, serve none */
    if (rc == -EBADMSG || rc == -ENOENT || rc == -EINVAL || rc == -ENOMEM)
        return rc == -EBADMSG ? -EIO : rc == -ENOMEM ? rc : -ENOENT;
    if (rc) {
        /* the backend cannot say now: a version is immutable, so the expired copy still holds
         * (tried again after another TTL) */
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < CTL_VCACHE; i++) {
            struct vcache *v = &c->vc[i];
            if (v->tree && strcmp(v->tree, tree) == 0 && strcmp(v->name, name) == 0) {
                v->loaded_ns = now;
                v->used = ++c->vclock;
                *out = v;
                return 0;
            }
        }
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    char *t = strdup(tree);
    if (!t) {
        manifest_fini(&m);
        return -ENOMEM;
    }
    pthread_mutex_lock(&c->mu);
    struct vcache *v = &c->vc[0];
    for (size_t i = 0; i < CTL_VCACHE; i++) {
        struct vcache *x = &c->vc[i];
        if (x->tree && strcmp(x->tree, tree) == 0 && strcmp(x->name, name) == 0) {
            v = x; /* loaded meanwhile, or expired: replace it */
            break;
        }
        if (!x->tree || x->used < v->used)
            v = x;
    }
    free(v->tree);
    manifest_fini(&v->m);
    v->tree = t;
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->m = m;
    v->loaded_ns = now;
    v->used = ++c->vclock;
    *out = v;
    return 0;
}

/* What rest ("" or "/key") is in m: 1 a directory, 0 a file (*idx), -ENOENT, -ENOMEM. */
static int vfind(const struct manifest *m, const char *rest, size_t *idx)
{
    return manifest_find(m, *rest ? rest + 1 : "", idx);
}

/* The permissions of the namespace holding tree (its uid, gid, umask and TTLs: a version's
 * files are that namespace's files), or NULL. */
static int tree_ns(const struct tierd_fuse *fs, const char *tree, size_t *nsi)
{
    const struct tierd *d = fs->d;
    for (size_t i = 0; i < d->nns; i++) {
        const char *np = d->ns[i].conf->path;
        size_t l = strlen(np);
        if (strncmp(tree, np, l) == 0 && (tree[l] == '\0' || tree[l] == '/' || l == 1)) {
            *nsi = i;
            return 0;
        }
    }
    return -ENOENT;
}

/* The permissions of a view directory above the versions: inside a namespace's mount path
 * ("/.tierd/datasets/priv/t"), the namespace's (it lists that namespace's trees), else the
 * mount's. */
static const struct tfs_perm *above_perm(const struct tierd_fuse *fs, const char *path)
{
    const char *tree = path + sizeof(DATASET_VIEW) - 1;
    size_t i = 0;
    return *tree && tree_ns(fs, tree, &i) == 0 ? &fs->ns_perm[i] : &fs->perm;
}

const struct tfs_perm *tfs_ctl_version_perm(const struct tierd_fuse *fs, const char *path)
{
    /* /.tierd itself and the view's directories never change: the mount's TTLs (a directory
     * inside a namespace's path: the namespace's, as its permissions), so a path walk down to a
     * version's file is not a lookup per component each time (the hint files keep ctl_perm: no
     * caching) */
    if (strcmp(path, TFS_CTL_DIR) == 0)
        return &fs->perm;
    char *tree = NULL, name[MANIFEST_NAME_MAX];
    const char *rest = NULL;
    int rc = in_versions(path) ? vpath(path, &tree, name, &rest) : -ENOENT;
    if (rc == 1)
        return above_perm(fs, path);
    if (rc != 0)
        return NULL;
    size_t i = 0;
    int nrc = tree_ns(fs, tree, &i);
    free(tree);
    return nrc ? NULL : &fs->ns_perm[i];
}

/* The version holding path: 1 for the view's directories above the versions (nothing held), 0
 * with its cache slot *v (ctl->mu held: the caller unlocks), the path inside it (*rest) and the
 * index of the namespace holding its tree (*nsi: its permissions and backend), or -errno. */
static int vlocate(struct tierd_fuse *fs, const char *path, struct vcache **v, const char **rest,
                   size_t *nsi)
{
    char *tree = NULL, name[MANIFEST_NAME_MAX];
    int rc = vpath(path, &tree, name, rest);
    if (rc)
        return rc;
    rc = tree_ns(fs, tree, nsi);
    if (rc == 0)
        rc = vget_locked(fs, tree, name, v);
    free(tree);
    return rc;
}

static int vstat(struct tierd_fuse *fs, const char *path, struct tfs_attr *a)
{
    struct vcache *v = NULL;
    const char *rest = NULL;
    size_t nsi = 0;
    int rc = vlocate(fs, path, &v, &rest, &nsi);
    memset(a, 0, sizeof(*a));
    a->mtime_ns = (int64_t)fs->d->start_ns;
    a->is_dir = true;
    a->mode = 0555 & ~(rc == 1 ? above_perm(fs, path) : &fs->perm)->umask;
    if (rc)
        return rc == 1 ? 0 : rc;
    const struct tfs_perm *tp = &fs->ns_perm[nsi];
    a->mode = 0555 & ~tp->umask;
    size_t i = 0;
    rc = vfind(&v->m, rest, &i);
    a->mtime_ns = v->m.created_at * (int64_t)TIER_NS_PER_SEC;
    if (rc == 0) {
        a->is_dir = false;
        a->mode = 0444 & ~tp->umask;
        a->size_bytes = v->m.files[i].size;
        snprintf(a->etag, sizeof(a->etag), "%s", v->m.files[i].etag);
    }
    pthread_mutex_unlock(&fs->ctl->mu);
    return rc < 0 ? rc : 0;
}

static int cmp_name(const void *a, const void *b);

/* A directory above the versions: the namespaces and trees under it, and the versions of the
 * trees just under it (dataset_view_list: backend listings, no lock held). */
static int vlisting_above(struct tierd_fuse *fs, const char *path, struct tfs_dirent **ep,
                          size_t *np, bool *partial)
{
    char **names = NULL;
    size_t n = 0;
    int rc = dataset_view_list(fs->d, path, &names, &n, partial);
    if (rc)
        return rc;
    struct tfs_dirent *e = calloc(n ? n : 1, sizeof(*e));
    if (!e) {
        dataset_names_free(names, n);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        e[i].name = names[i]; /* taken over */
        e[i].is_dir = true;
        e[i].mtime_ns = (int64_t)fs->d->start_ns;
    }
    free(names);
    *ep = e;
    *np = n;
    return 0;
}

/* Is path one of the view's directories above the versions? */
static bool vabove(const char *path)
{
    char *tree = NULL, name[MANIFEST_NAME_MAX];
    const char *rest = NULL;
    int rc = vpath(path, &tree, name, &rest);
    free(tree);
    return rc == 1;
}

/* The slot of path in ctl->vl (ctl->mu held): fresh only (younger than CTL_VLIST_TTL_NS and
 * listed at generation gen; now may be older than the slot: read before another thread stored
 * it), or any. NULL: none. */
static struct vlist *vlist_find_locked(struct tfs_ctl *c, const char *path, bool fresh,
                                       uint64_t now, uint64_t gen)
{
    for (size_t i = 0; i < CTL_VLIST; i++) {
        struct vlist *x = &c->vl[i];
        if (x->path && strcmp(x->path, path) == 0 &&
            (!fresh ||
             (x->gen == gen && (x->loaded_ns > now || now - x->loaded_ns < CTL_VLIST_TTL_NS))))
            return x;
    }
    return NULL;
}

/* Can a kept listing stand in for one that failed with rc? Only while the backend cannot answer
 * now; a directory or bucket that is gone, or access refused, is said as it is. */
static bool vlist_stale_ok(int rc)
{
    return rc != -ENOMEM && rc != -ENOENT && rc != -EINVAL && rc != -EACCES && rc != -EPERM &&
           rc != -ENOTDIR;
}

/* The listing of a view directory above the versions, from ctl->vl (a listing of the last
 * CTL_VLIST_TTL_NS made since the last commit or delete through this tierd), else listed afresh
 * (vlisting_above: 1 + the trees' backend listings) and kept, unless it is partial (a
 * namespace's versions could not be listed: answered, never kept). A listing that fails while
 * the backend cannot answer (vlist_stale_ok) is answered with the last one kept of that
 * directory, however old, as readdir answers with a stale listing; else with its error. */
static int vlisting_above_cached(struct tierd_fuse *fs, const char *path, struct tfs_listing **out)
{
    struct tfs_ctl *c = fs->ctl;
    uint64_t now = tier_now_mono_ns(), gen = dataset_generation(fs->d); /* gen before listing */
    pthread_mutex_lock(&c->mu);
    struct vlist *x = vlist_find_locked(c, path, true, now, gen);
    if (x) {
        x->used = ++c->vclock;
        atomic_fetch_add_explicit(&x->l->refs, 1, memory_order_relaxed);
        *out = x->l;
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    pthread_mutex_unlock(&c->mu);
    struct tfs_listing *l = calloc(1, sizeof(*l));
    char *p = strdup(path);
    bool partial = false;
    int rc = l && p ? vlisting_above(fs, path, &l->e, &l->n, &partial) : -ENOMEM;
    pthread_mutex_lock(&c->mu);
    if (rc) {
        free(l);
        free(p);
        x = vlist_stale_ok(rc) ? vlist_find_locked(c, path, false, now, gen) : NULL;
        if (x) {
            atomic_fetch_add_explicit(&x->l->refs, 1, memory_order_relaxed);
            *out = x->l;
            rc = 0;
        }
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    l->refs = 1;                        /* the caller's */
    l->fetched_ns = l->expire_ns = now; /* the node cache keeps no control listing */
    *out = l;
    x = vlist_find_locked(c, path, false, now, gen); /* replaced, else a free or the LRU slot */
    if (partial || (x && (x->gen > gen || x->loaded_ns > now))) {
        /* partial, or another thread kept a newer one meanwhile: that one stays */
        pthread_mutex_unlock(&c->mu);
        free(p);
        return 0;
    }
    for (size_t i = 0; !x && i < CTL_VLIST; i++)
        if (!c->vl[i].path)
            x = &c->vl[i];
    if (!x) {
        x = &c->vl[0];
        for (size_t i = 1; i < CTL_VLIST; i++)
            if (c->vl[i].used < x->used)
                x = &c->vl[i];
    }
    struct tfs_listing *old = x->l;
    l->refs = 2; /* and the slot's */
    free(x->path);
    x->path = p;
    x->l = l;
    x->loaded_ns = now;
    x->gen = gen;
    x->used = ++c->vclock;
    pthread_mutex_unlock(&c->mu);
    if (old)
        tfs_listing_unref(old);
    return 0;
}

static int vlisting(struct tierd_fuse *fs, const char *path, struct tfs_dirent **ep, size_t *np)
{
    struct vcache *v = NULL;
    const char *rest = NULL;
    size_t nsi = 0;
    int rc = vlocate(fs, path, &v, &rest, &nsi);
    *ep = NULL;
    *np = 0;
    if (rc == 1)
        return vlisting_above(fs, path, ep, np, NULL);
    if (rc)
        return rc;
    size_t i = 0;
    int k = vfind(&v->m, rest, &i);
    if (k != 1) {
        pthread_mutex_unlock(&fs->ctl->mu);
        return k == 0 ? -ENOTDIR : k;
    }
    const char *pre = *rest ? rest + 1 : "";
    size_t pl = strlen(pre) + (*rest ? 1 : 0), cap = 0, n = 0;
    char *prefix = malloc(pl + 1);
    struct tfs_dirent *e = NULL;
    rc = prefix ? 0 : -ENOMEM;
    if (prefix)
        snprintf(prefix, pl + 1, "%s%s", pre, *rest ? "/" : "");
    for (i = rc ? v->m.n : manifest_lower_bound(&v->m, prefix);
         rc == 0 && i < v->m.n && strncmp(v->m.files[i].key, prefix, pl) == 0; i++) {
        const char *child = v->m.files[i].key + pl, *sl = strchr(child, '/');
        size_t cl = sl ? (size_t)(sl - child) : strlen(child);
        if (n > 0 && strlen(e[n - 1].name) == cl && strncmp(e[n - 1].name, child, cl) == 0)
            continue; /* the next file of a directory already listed */
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            struct tfs_dirent *ne = realloc(e, cap * sizeof(*ne));
            if (!ne) {
                rc = -ENOMEM;
                break;
            }
            e = ne;
        }
        memset(&e[n], 0, sizeof(e[n]));
        e[n].name = strndup(child, cl);
        e[n].is_dir = sl != NULL;
        if (!e[n].name) {
            rc = -ENOMEM;
            break;
        }
        e[n].mtime_ns = v->m.created_at * (int64_t)TIER_NS_PER_SEC;
        if (!sl) {
            e[n].size_bytes = v->m.files[i].size;
            snprintf(e[n].etag, sizeof(e[n].etag), "%s", v->m.files[i].etag);
        }
        n++;
    }
    pthread_mutex_unlock(&fs->ctl->mu);
    free(prefix);
    if (rc) {
        for (size_t j = 0; j < n; j++)
            free(e[j].name);
        free(e);
        return rc;
    }
    /* byte order of keys is not order of names ("a.txt" < "a/b" but "a" < "a.txt"), and S3 may
     * hold both "a" and "a/b": sort, and keep one entry per name */
    if (n > 1) {
        qsort(e, n, sizeof(*e), cmp_name);
        size_t w = 1;
        for (size_t j = 1; j < n; j++) {
            if (strcmp(e[w - 1].name, e[j].name) == 0) {
                /* keep the file, as vfind answers (a name is a file before a directory) */
                if (e[w - 1].is_dir && !e[j].is_dir) {
                    free(e[w - 1].name);
                    e[w - 1] = e[j];
                } else {
                    free(e[j].name);
                }
                continue;
            }
            e[w++] = e[j];
        }
        n = w;
    }
    *ep = e;
    *np = n;
    return 0;
}

/* Open a file of a version: a read handle pinned to the manifest's ETag (and its version id,
 * where the bucket keeps versions). */
static void vopen(struct tierd_fuse *fs, fuse_req_t req, fuse_ino_t ino, const char *path,
                  struct fuse_file_info *fi)
{
    struct vcache *v = NULL;
    const char *rest = NULL;
    char *key = NULL, *vid = NULL, etag[BACKEND_ETAG_MAX];
    uint64_t size = 0;
    size_t nsi = 0, i = 0;
    int rc = vlocate(fs, path, &v, &rest, &nsi);
    if (rc == 0) {
        int k = vfind(&v->m, rest, &i);
        if (k == 0) {
            size = v->m.files[i].size;
            snprintf(etag, sizeof(etag), "%s", v->m.files[i].etag);
            if (asprintf(&key, "%s%s", v->m.prefix, v->m.files[i].key) < 0)
                key = NULL;
            if (v->m.files[i].version_id && !(vid = strdup(v->m.files[i].version_id)))
                rc = -ENOMEM;
            rc = key && rc == 0 ? 0 : -ENOMEM;
        } else {
            rc = k == 1 ? -EISDIR : k;
        }
        pthread_mutex_unlock(&fs->ctl->mu);
    } else if (rc == 1) {
        rc = -EISDIR;
    }
    if (rc == 0 && ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)))
        rc = -EROFS;
    /* the backend of the namespace holding the tree asked for: dataset_show checked the
     * manifest's prefix and backend against it */
    if (rc)
        fuse_reply_err(req, tfs_errno(rc));
    else
        tfs_open_pinned(req, ino, fi, path, fs->d->ns[nsi].be, key, etag, vid, size);
    free(key);
    free(vid);
}

static bool is_ctl_handle(const struct fuse_file_info *fi)
{
    return fi && fi->fh && *(const uint32_t *)(uintptr_t)fi->fh == TFS_H_CTL;
}

static const char *tname(const struct tierd_fuse *fs, uint32_t tenant)
{
    return fs->d->tenants ? tenant_name(fs->d->tenants, tenant) : "default";
}

/* Whoever may read the mount may write the hint files: each class of the umask that leaves r
 * gets rw (and x for the directory). */
static mode_t readers_rw(const struct tierd_fuse *fs, bool dir)
{
    mode_t r = 0444 & ~fs->perm.umask;
    return r | r >> 1 | (dir ? r >> 2 : 0);
}

/* The set (tenant, name) into *out (may be NULL): true if it exists. */
static bool find_set(struct tierd_fuse *fs, uint32_t tenant, const char *name,
                     struct hints_set_stats *out)
{
    struct hints_set_stats *st = malloc(HINTS_SETS_MAX * sizeof(*st));
    if (!st)
        return false;
    size_t n = hints_list(fs->d->hints, st, HINTS_SETS_MAX);
    bool found = false;
    for (size_t i = 0; i < n && i < HINTS_SETS_MAX && !found; i++) {
        if (st[i].tenant == tenant && strcmp(st[i].name, name) == 0) {
            found = true;
            if (out)
                *out = st[i];
        }
    }
    free(st);
    return found;
}

static bool writing(struct tierd_fuse *fs, uint32_t tenant, const char *name)
{
    bool found = false;
    pthread_mutex_lock(&fs->ctl->mu);
    for (struct tfs_ctlh *h = fs->ctl->writers; h && !found; h = h->next)
        found = h->tenant == tenant && !h->cancelled && strcmp(h->name, name) == 0;
    pthread_mutex_unlock(&fs->ctl->mu);
    return found;
}

static bool file_exists(struct tierd_fuse *fs, uint32_t tenant, const char *name)
{
    return hints_name_ok(name) && (writing(fs, tenant, name) || find_set(fs, tenant, name, NULL));
}

int tfs_ctl_stat(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                 struct tfs_attr *a)
{
    const char *name = NULL;
    enum ctl_kind k = classify(path, &name);
    if (k == CTL_NONE && in_versions(path))
        return vstat(fs, path, a);
    if (k == CTL_NONE || (k == CTL_FILE && !file_exists(fs, io->tenant, name)))
        return -ENOENT;
    memset(a, 0, sizeof(*a));
    a->is_dir = k != CTL_FILE;
    a->mtime_ns = (int64_t)fs->d->start_ns;
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

int tfs_ctl_listing(struct tierd_fuse *fs, const struct tier_ioctx *io, const char *path,
                    struct tfs_listing **out)
{
    const char *name = NULL;
    enum ctl_kind k = classify(path, &name);
    if (k == CTL_NONE && in_versions(path)) {
        if (vabove(path))
            return vlisting_above_cached(fs, path, out);
        struct tfs_listing *vl = calloc(1, sizeof(*vl));
        if (!vl)
            return -ENOMEM;
        int vrc = vlisting(fs, path, &vl->e, &vl->n);
        if (vrc) {
            free(vl);
            return vrc;
        }
        vl->refs = 1;
        vl->fetched_ns = vl->expire_ns = tier_now_mono_ns();
        *out = vl;
        return 0;
    }
    if (k != CTL_ROOT && k != CTL_DIR)
        return k == CTL_FILE ? -ENOTDIR : -ENOENT;
    /* at most HINTS_SETS_MAX sets, and as many files being written */
    size_t max = 2 * HINTS_SETS_MAX, n = 0;
    struct tfs_listing *l = calloc(1, sizeof(*l));
    struct tfs_dirent *e = calloc(max, sizeof(*e));
    struct hints_set_stats *st = calloc(HINTS_SETS_MAX, sizeof(*st));
    int rc = l && e && st ? 0 : -ENOMEM;
    if (rc == 0 && k == CTL_ROOT) {
        rc = dirent_add(e, &n, "hints", true);
        if (rc == 0)
            rc = dirent_add(e, &n, "datasets", true);
    } else if (rc == 0) {
        size_t ns = hints_list(fs->d->hints, st, HINTS_SETS_MAX);
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

/* ---- handles ----------------------------------------------------------------------------- */

/* Charge more bytes of h's buffer to the writers' total and (but for an administrator's) to its
 * tenant's share. 0, -EDQUOT (the tenant's share) or -ENOSPC (the total, or CTL_CHARGES
 * tenants with buffers already), logged with what to do. */
static int charge(struct tierd_fuse *fs, struct tfs_ctlh *h, uint64_t more)
{
    struct tfs_ctl *c = fs->ctl;
    if (atomic_fetch_add(&c->buffered, more) + more > CTL_TOTAL_MAX) {
        atomic_fetch_sub(&c->buffered, more);
        log_warn("fuse: hint file %s" CTL_HINTS "/%s: the hint files being written hold %llu "
                 "MiB already; close them (or write smaller orders) first",
                 fs->mountpoint, h->name, (unsigned long long)(CTL_TOTAL_MAX >> 20));
        return -ENOSPC;
    }
    if (h->admin)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&c->charge_mu);
    struct ctl_charge *slot = NULL, *spare = NULL;
    for (size_t i = 0; i < CTL_CHARGES && !slot; i++) {
        if (c->charges[i].bytes && c->charges[i].tenant == h->tenant)
            slot = &c->charges[i];
        else if (!c->charges[i].bytes && !spare)
            spare = &c->charges[i];
    }
    if (!slot && spare) {
        slot = spare;
        slot->tenant = h->tenant;
    }
    uint64_t had = slot ? slot->bytes : 0;
    if (!slot)
        rc = -ENOSPC;
    else if (had + more > CTL_TENANT_MAX)
        rc = -EDQUOT;
    else
        slot->bytes += more;
    pthread_mutex_unlock(&c->charge_mu);
    if (rc) {
        atomic_fetch_sub(&c->buffered, more);
        if (rc == -EDQUOT)
            log_warn("fuse: hint file %s" CTL_HINTS "/%s: tenant %s's hint files being written "
                     "hold %llu KiB already, at most %llu KiB per tenant; close them (or write "
                     "smaller orders, appending the rest) first",
                     fs->mountpoint, h->name, tname(fs, h->tenant), (unsigned long long)(had >> 10),
                     (unsigned long long)(CTL_TENANT_MAX >> 10));
        else
            log_warn("fuse: hint file %s" CTL_HINTS "/%s: %llu tenants have hint files being "
                     "written already; close some first",
                     fs->mountpoint, h->name, (unsigned long long)CTL_CHARGES);
    }
    return rc;
}

static void uncharge(struct tierd_fuse *fs, struct tfs_ctlh *h, uint64_t bytes)
{
    struct tfs_ctl *c = fs->ctl;
    atomic_fetch_sub(&c->buffered, bytes);
    if (h->admin || !bytes)
        return;
    pthread_mutex_lock(&c->charge_mu);
    for (size_t i = 0; i < CTL_CHARGES; i++)
        if (c->charges[i].bytes && c->charges[i].tenant == h->tenant) {
            c->charges[i].bytes -= bytes < c->charges[i].bytes ? bytes : c->charges[i].bytes;
            break;
        }
    pthread_mutex_unlock(&c->charge_mu);
}

static void handle_destroy(struct tierd_fuse *fs, struct tfs_ctlh *h)
{
    if (h->writer) {
        pthread_mutex_lock(&fs->ctl->mu);
        if (h->prev)
            h->prev->next = h->next;
        else
            fs->ctl->writers = h->next;
        if (h->next)
            h->next->prev = h->prev;
        pthread_mutex_unlock(&fs->ctl->mu);
    }
    uncharge(fs, h, (uint64_t)h->cap);
    pthread_mutex_destroy(&h->mu);
    free(h->buf);
    free(h->text);
    free(h);
}

void tfs_ctl_orphan_free(struct tierd_fuse *fs, struct tfs_hbase *hb)
{
    handle_destroy(fs, (struct tfs_ctlh *)hb);
}

/* May the caller of req give hints, and as which tenant? Tenants default and other are every
 * unmatched caller's: only root and tierd's own uid may hint for them (as an administrator may
 * through the API). */
static int may_hint(struct tierd_fuse *fs, fuse_req_t req, const char *name, uint32_t *tenant,
                    bool *admin)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    struct tier_ioctx io = tfs_req_io(fs, req);
    if (admin)
        *admin = ctx->uid == 0 || ctx->uid == geteuid();
    bool shared = io.tenant == TIER_TENANT_DEFAULT || io.tenant == TIER_TENANT_OTHER;
    if (shared && ctx->uid != 0 && ctx->uid != geteuid()) {
        log_warn("fuse: %s" CTL_HINTS "/%.64s: pid %d (uid %u) is tenant %s, which every "
                 "unmatched caller shares: hints need a tenant of one's own (a [tenant] section "
                 "matching the job's uid or cgroup, a Slurm job, a pod), or root",
                 fs->mountpoint, name, (int)ctx->pid, (unsigned)ctx->uid, tname(fs, io.tenant));
        return -EPERM;
    }
    *tenant = io.tenant;
    return 0;
}

/* A new handle on hint file name; writers are checked (may_hint) and listed. */
static int handle_open(struct tierd_fuse *fs, fuse_req_t req, const char *name, int flags,
                       bool created, struct tfs_ctlh **out)
{
    if (!hints_name_ok(name)) {
        log_warn("fuse: %s" CTL_HINTS "/%.80s: not a hint set name (1 to %d letters, digits, "
                 "'.', '_', '-')",
                 fs->mountpoint, name, HINTS_NAME_MAX - 1);
        return -EINVAL;
    }
    bool writer = (flags & O_ACCMODE) != O_RDONLY, admin = false;
    uint32_t tenant = 0;
    if (writer) {
        int rc = may_hint(fs, req, name, &tenant, &admin);
        if (rc)
            return rc;
    } else {
        tenant = tfs_req_io(fs, req).tenant;
        if (!file_exists(fs, tenant, name))
            return -ENOENT;
    }
    struct tfs_ctlh *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    snprintf(h->name, sizeof(h->name), "%s", name);
    h->tenant = tenant;
    h->writer = writer;
    h->admin = admin;
    h->append_flag = (flags & O_APPEND) != 0;
    h->dirty = created || (flags & O_TRUNC);
    pthread_mutex_init(&h->mu, NULL);
    if (writer) {
        pthread_mutex_lock(&fs->ctl->mu);
        h->next = fs->ctl->writers;
        if (h->next)
            h->next->prev = h;
        fs->ctl->writers = h;
        pthread_mutex_unlock(&fs->ctl->mu);
    }
    tfs_handle_track(fs, &h->hb, TFS_H_CTL, tenant);
    *out = h;
    return 0;
}

static void handle_free(struct tierd_fuse *fs, struct tfs_ctlh *h)
{
    tfs_handle_untrack(fs, &h->hb);
    handle_destroy(fs, h);
}

static void handle_fi(struct fuse_file_info *fi, struct tfs_ctlh *h)
{
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->direct_io = 1; /* read although the size is 0; no page cache of a changing text */
    fi->keep_cache = 0;
    fi->noflush = !h->writer;
}

/* ---- submission ---------------------------------------------------------------------------- */

/* h->mu held: parse buf[taken, len) into paths (pointers into buf, whose newlines become NULs)
 * and their line numbers (hintlines_parse: hints/hintlines.h); *lastp: the number of the last
 * line. */
static int parse(struct tierd_fuse *fs, struct tfs_ctlh *h, const char ***pathsp, uint32_t **linesp,
                 size_t *np, uint64_t *lastp, bool *append)
{
    if (!h->buf) {
        *pathsp = calloc(1, sizeof(**pathsp));
        *linesp = calloc(1, sizeof(**linesp));
        if (!*pathsp || !*linesp) {
            free(*pathsp);
            free(*linesp);
            return -ENOMEM;
        }
        *np = 0;
        *lastp = h->line0;
        return 0;
    }
    return hintlines_parse(fs->mountpoint, h->buf + h->taken, h->len - h->taken, h->line0,
                           HINTS_ENTRIES_MAX, pathsp, linesp, np, lastp, append);
}

/* h->mu held: hand what was written since the last submission to hints_submit. A close of a
 * descriptor that wrote nothing new hands nothing over: a shell's `>` closes its first copy of
 * the descriptor before the command writes, and each process that inherited it closes its own.
 * A file created or truncated and never written is an empty order: handed over at release. 0
 * when there was nothing to hand over. */
static int submit_locked(struct tierd_fuse *fs, struct tfs_ctlh *h, const char *when, bool last)
{
    if (!h->writer || h->cancelled)
        return 0;
    if (h->err)
        return h->err;
    if (h->len == h->taken && !(last && h->dirty && !h->submitted))
        return 0;
    bool append = h->submitted || h->append_flag;
    const char **paths = NULL;
    uint32_t *lines = NULL;
    size_t n = 0;
    uint64_t lastline = 0;
    tier_err_clear();
    int rc = parse(fs, h, &paths, &lines, &n, &lastline, &append);
    if (rc == 0)
        rc = hints_submit(fs->d->hints, h->name, h->tenant, paths, n, append, h->admin);
    if (rc == 0) {
        h->taken = h->checked = h->len;
        h->line0 = h->checked_lines = lastline;
        h->dirty = false;
        h->submitted = true;
        log_debug("fuse: hint file %s" CTL_HINTS "/%s of tenant %s: %zu paths %s at %s",
                  fs->mountpoint, h->name, tname(fs, h->tenant), n, append ? "appended" : "given",
                  when);
    } else {
        /* which line hints_submit's "paths[i]" is */
        char where[48] = "";
        size_t i = 0;
        if (paths && sscanf(tier_err_msg(), "paths[%zu]", &i) == 1 && i < n)
            snprintf(where, sizeof(where), " (line %" PRIu32 ")", lines[i]);
        log_warn("fuse: hint file %s" CTL_HINTS "/%s of tenant %s not taken at %s: %s%s; the "
                 "set is unchanged",
                 fs->mountpoint, h->name, tname(fs, h->tenant), when,
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc), where);
        h->err = rc; /* the list is not what the writer meant: nothing later is taken either */
    }
    free(paths);
    free(lines);
    return rc;
}

static int submit(struct tierd_fuse *fs, struct tfs_ctlh *h, const char *when, bool last)
{
    pthread_mutex_lock(&h->mu);
    int rc = submit_locked(fs, h, when, last);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

/* ---- status text ------------------------------------------------------------------------- */

/* h->mu held: make the text read returns. */
static int status_make(struct tierd_fuse *fs, struct tfs_ctlh *h)
{
    char *t = malloc(CTL_TEXT_MAX);
    if (!t)
        return -ENOMEM;
    struct hints_set_stats s;
    int w;
    if (find_set(fs, h->tenant, h->name, &s))
        w = snprintf(t, CTL_TEXT_MAX,
                     "name: %s\ntenant: %s\nstate: active\nentries: %" PRIu64 "\nfiles: %" PRIu64
                     "\ncursor: %" PRIu64 "\nwindow_files: %" PRIu64 "\nwindow_bytes: %" PRIu64
                     "\nheld_bytes: %" PRIu64 "\nbudget: %" PRIu64 "\nfetched_files: %" PRIu64
                     "\nfetched_bytes: %" PRIu64 "\nalready_held: %" PRIu64 "\nreleased: %" PRIu64
                     "\nerrors: %" PRIu64 "\nskipped: %" PRIu64 "\nfirst_error: %s\n",
                     s.name, tname(fs, s.tenant), s.entries, s.files, s.cursor, s.window_files,
                     s.window_bytes, s.held_bytes, s.budget, s.fetched_files, s.fetched_bytes,
                     s.already_held, s.released, s.errors, s.skipped, s.first_error);
    else
        w = snprintf(t, CTL_TEXT_MAX,
                     "name: %s\ntenant: %s\nstate: none (no such set of this tenant yet: a file "
                     "being written is taken when it is closed)\n",
                     h->name, tname(fs, h->tenant));
    free(h->text);
    h->text = t;
    h->tlen = w < 0 ? 0 : (size_t)w < CTL_TEXT_MAX ? (size_t)w : CTL_TEXT_MAX - 1;
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
        rc = handle_open(fs, req, name, fi->flags, true, &h);
    if (rc == 0)
        rc = tfs_node_lookup(fs, path, &n);
    if (rc)
        goto fail;
    struct tier_ioctx io = {.tenant = h->tenant};
    struct tfs_attr a;
    rc = tfs_ctl_stat(fs, &io, path, &a); /* h is a writer of the name: it exists */
    if (rc) {
        tfs_node_forget(fs, n->ino, 1);
        goto fail;
    }
    tfs_node_set_attr(fs, n, &a);
    struct fuse_entry_param e;
    tfs_fill_entry(fs, n, &a, &e);
    handle_fi(fi, h);
    if (fuse_reply_create(req, &e, fi) != 0) {
        tfs_node_forget(fs, n->ino, 1);
        handle_free(fs, h);
    }
    goto out;
fail:
    if (h)
        handle_free(fs, h);
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
    if (in_versions(n->path)) {
        char *p = strdup(n->path);
        tfs_node_put(fs, n);
        if (!p)
            fuse_reply_err(req, ENOMEM);
        else
            vopen(fs, req, ino, p, fi);
        free(p);
        return;
    }
    const char *name = NULL;
    struct tfs_ctlh *h = NULL;
    int rc = classify(n->path, &name) == CTL_FILE ? 0 : -EISDIR;
    if (rc == 0)
        rc = handle_open(fs, req, name, fi->flags, false, &h);
    tfs_node_put(fs, n);
    if (rc) {
        fuse_reply_err(req, tfs_errno(rc));
        return;
    }
    handle_fi(fi, h);
    if (fuse_reply_open(req, fi) != 0)
        handle_free(fs, h);
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
    int rc = off == 0 || !h->text ? status_make(fs, h) : 0;
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

/* h->mu held: room for end bytes (and the NUL) in h->buf, within the bounds: a file of a writer
 * who is no administrator holds HINTS_USER_BYTES_MAX (POST /v1/hints's body bound for users),
 * an administrator's CTL_FILE_MAX; the buffers are charged (charge). */
static int reserve(struct tierd_fuse *fs, struct tfs_ctlh *h, uint64_t end)
{
    uint64_t max = h->admin ? CTL_FILE_MAX : HINTS_USER_BYTES_MAX;
    if (end > max) {
        log_warn("fuse: hint file %s" CTL_HINTS "/%s: over %llu MiB written (the bound for %s); "
                 "split the order and append the rest (O_APPEND, or '#append' as the first line)",
                 fs->mountpoint, h->name, (unsigned long long)(max >> 20),
                 h->admin ? "root and tierd's user" : "a writer who is not root");
        return -EFBIG;
    }
    if (end + 1 <= h->cap)
        return 0;
    size_t ncap = h->cap ? h->cap : CTL_BUF_MIN;
    while (ncap < end + 1)
        ncap *= 2;
    if (ncap > max + 1)
        ncap = max + 1;
    uint64_t more = ncap - h->cap;
    int rc = charge(fs, h, more);
    if (rc)
        return rc;
    char *nb = realloc(h->buf, ncap);
    if (!nb) {
        uncharge(fs, h, more);
        return -ENOMEM;
    }
    h->buf = nb;
    h->cap = ncap;
    return 0;
}

/* h->mu held: check the lines the last write completed, so that a bad path fails write(2)
 * already: a shell does not look at close(2)'s result (`printf ... > file` would say nothing).
 * hints_submit checks them again at the submission; this is the writer's early warning. */
static int check_new_lines(struct tierd_fuse *fs, struct tfs_ctlh *h)
{
    if (h->nocheck)
        return 0;
    int rc = 0;
    char *end = h->buf + h->len;
    for (char *p = h->buf + h->checked, *nl;
         rc == 0 && p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
        size_t ll = (size_t)(nl - p);
        if (ll > 0 && p[ll - 1] == '\r')
            ll--;
        char save = p[ll];
        p[ll] = '\0'; /* for the check only: the buffer is parsed again at the submission */
        uint64_t lineno = h->checked_lines + 1;
        const char *path = NULL;
        rc = hintlines_path(fs->mountpoint, p, ll, lineno, &path);
        if (rc == 0 && path && (rc = hints_check_path(fs->d->hints, path)) != 0) {
            char why[256];
            snprintf(why, sizeof(why), "%s", tier_err_msg());
            tier_err_set("line %" PRIu64 " %s", lineno, why);
        }
        p[ll] = save;
        if (rc == 0) {
            h->checked = (size_t)(nl + 1 - h->buf);
            h->checked_lines = lineno;
        }
    }
    return rc;
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
        rc = reserve(fs, h, pos + size);
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
        rc = check_new_lines(fs, h);
        bad_line = rc != 0;
    }
    if (bad_line)
        log_warn("fuse: hint file %s" CTL_HINTS "/%s of tenant %s: %s; the write fails and "
                 "nothing of this file is taken",
                 fs->mountpoint, h->name, tname(fs, h->tenant),
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
        if (fs->d->test_fault_file) { /* test builds: hold a close here (test_hintlimits_fuse) */
            char ff[PATH_MAX];        /* one fault file (and .paused marker) per hint file's name */
            snprintf(ff, sizeof(ff), "%s.close.%s", fs->d->test_fault_file, j->h->name);
            tier_test_pause(ff, "hint close pause");
        }
        rc = submit(fs, j->h, "close", false);
        fuse_reply_err(j->req, rc ? tfs_errno(rc) : 0);
        break;
    case JOB_FSYNC:
        rc = submit(fs, j->h, "fsync", false);
        fuse_reply_err(j->req, rc ? tfs_errno(rc) : 0);
        break;
    case JOB_RELEASE: {
        fuse_req_t req = j->req;
        (void)submit(fs, j->h, "release", true); /* what no flush took (logged if refused) */
        handle_free(fs, j->h);                   /* j is the handle's: gone now */
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
    int rc = last ? 0 : submit_locked(fs, h, kind == JOB_FLUSH ? "close" : "fsync", false);
    pthread_mutex_unlock(&h->mu);
    if (last)
        handle_free(fs, h);
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
    handle_free(fs, h);
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
    if (in_versions(path)) { /* dataset versions are read-only */
        tfs_node_put(fs, n);
        fuse_reply_err(req, EROFS);
        return;
    }
    struct tier_ioctx io = tfs_req_io(fs, req);
    if (h)
        io.tenant = h->tenant;
    int rc = 0;
    if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
        rc = -EPERM; /* modes are synthesised (fuse_ops_ctl.c, readers_rw) */
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
        rc = tfs_ctl_stat(fs, &io, path, &a);
    if (rc) {
        fuse_reply_err(req, tfs_errno(rc));
    } else {
        struct stat st;
        tfs_fill_stat(fs, ino, &a, &st);
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
        rc = may_hint(fs, req, name, &tenant, NULL);
    if (rc == 0) {
        bool cancelled = false;
        pthread_mutex_lock(&fs->ctl->mu);
        for (struct tfs_ctlh *h = fs->ctl->writers; h; h = h->next)
            if (h->tenant == tenant && strcmp(h->name, name) == 0 && !h->cancelled) {
                h->cancelled = true; /* an unlinked file's writes go nowhere */
                cancelled = true;
            }
        pthread_mutex_unlock(&fs->ctl->mu);
        rc = hints_cancel(fs->d->hints, name, tenant);
        if (rc == -ENOENT && cancelled)
            rc = 0;
        if (rc == 0)
            log_info("fuse: hint set %s of tenant %s dropped (unlink of %s" CTL_HINTS "/%s)", name,
                     tname(fs, tenant), fs->mountpoint, name);
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

int tfs_ctl_init(struct tierd_fuse *fs)
{
    fs->ctl_perm = fs->perm;
    fs->ctl_perm.attr_ttl_ns = fs->ctl_perm.entry_ttl_ns = 0;
    fs->ctl_perm.attr_ttl_s = fs->ctl_perm.entry_ttl_s = 0;
    fs->ctl = NULL;
    if (!fs->d->hints)
        return 0; /* no cache, no hints: no control files */
    struct tfs_ctl *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->charge_mu, NULL);
    pthread_mutex_init(&c->qmu, NULL);
    fs->ctl = c;
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
    for (size_t i = 0; i < CTL_VCACHE; i++) {
        free(fs->ctl->vc[i].tree);
        manifest_fini(&fs->ctl->vc[i].m);
    }
    for (size_t i = 0; i < CTL_VLIST; i++) {
        free(fs->ctl->vl[i].path);
        if (fs->ctl->vl[i].l)
            tfs_listing_unref(fs->ctl->vl[i].l);
    }
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
