/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant.c - the tenant registry and the resolution of a FUSE caller to a tenant (tenant.h).
 *
 * Called by the FUSE layer (tenant_resolve on every request: lookup, getattr, open, read, ...),
 * the config loader and the control API (tenant_add, tenant_register), telemetry and the API's
 * listings (tenant_name, tenant_class, tenant_rules). Leaf module: depends on src/common only.
 *
 * DESIGN. Three tables. The tenants and the rules are under one mutex (r->lock):
 *   - tenants: an array of max_tenants entries allocated once, so a name pointer never moves;
 *     entry i is written before r->count is raised past i with a release store, which lets
 *     tenant_name/tenant_class/tenant_count read without the lock. A name index (open addressing,
 *     ids only ever inserted) finds a name under the lock.
 *   - rules: an array of pointers to rules, appended under the lock, never removed; each rule's
 *     strings live as long as the registry. r->gen counts the rules added (release store, so a
 *     cache hit reads it without the lock).
 *   - the pid cache: pid_cache_max slots in up to 16 shards (pid modulo the shard count; 16 when
 *     each shard gets at least 256 slots, so a small cache is one exact ring), each with its own
 *     mutex, its slots filled as a ring (a new pid takes the shard's oldest slot) and a hash
 *     index of chains by pid, at most one slot per pid. A slot holds (pid, start time, uid, gid,
 *     rule generation) -> tenant, and a lookup that differs in uid, gid or generation is a miss.
 *
 * Same process? A hit must never answer for a pid reused by another process. Two checks:
 *   - by pidfd (proc_root "/proc", the default): when a slot is filled, a pidfd of the pid is
 *     opened (pidfd_open; PIDFD_THREAD for a thread that leads no thread group, as FUSE gives
 *     thread ids) and registered, level-triggered, in one epoll set (r->epfd) with the token
 *     (pid, seq). A pidfd refers to its process (struct pid), not to the number: it turns
 *     readable when the process (the thread) exits, and a pid number is only freed, and so
 *     reused, after that. Each tenant_resolve first calls epoll_wait(r->epfd, timeout 0)
 *     (reap_exited), one system call without any lock, and drops the entries whose pidfd is
 *     readable; an entry that still holds a pidfd is then the same process. The miss path opens
 *     the pidfd before reading the start time, the cgroup and the environ, then reads the start
 *     time again and checks the pidfd has not exited: then the pid belonged to the pidfd's
 *     process through every read, and the facts are its own. At most pidfd_max pidfds are open
 *     (split over the shards): those of the slots each shard filled last, a window that moves
 *     with the ring (cache_put closes the pidfd of the slot that leaves it).
 *   - by start time (a slot without a pidfd: outside the window, a fake proc_root, pidfd_off, a
 *     kernel without pidfd_open (5.3) or, for a non-leader thread, without PIDFD_THREAD (6.9),
 *     no fd left): the hit reads /proc/<pid>/stat and compares field 22. On a miss the start
 *     time is read before and after the cgroup and environ reads: if it changed, the pid was
 *     reused during the reads and the answer is returned but not cached.
 * The /proc reads and every system call on the miss path are done without a lock; the
 * registry lock is then taken to match the rules and create an implicit tenant, and the shard
 * lock to fill the slot. A pidfd leaves its slot under the shard lock and is closed after it
 * (pidfd_drop: EPOLL_CTL_DEL, close). Locks are never nested.
 *
 * Pid-cache slot states: free, checked by pidfd, checked by start time.
 * TRANSITION -> FUNCTION
 *   free or the ring's oldest slot -> filled       cache_put()
 *   filled -> refilled in place (uid, rules, ...)   cache_put() (its old pidfd: take_pidfd())
 *   by pidfd -> by start time (the window moved)    cache_put() -> take_pidfd()
 *   by pidfd -> free (its process exited)           reap_exited() -> cache_drop()
 *   by pidfd -> free (epoll could not tell)         probe_locked() -> cache_drop()
 *   any -> gone                                     tenant_reg_free() -> shards_fini()
 *
 * Resolution (decide_locked()): the facts (a Slurm job from the cgroup, else from SLURM_JOB_ID;
 * a pod; the cgroup path) are vetted first (vet_locked): a job from SLURM_JOB_ID counts only when
 * the job-owner table maps it to the caller's uid, a ".../uid_<u>/job_<id>" cgroup only when <u>
 * is the caller's uid (each refusal logged once per (uid, job): a direct-mapped table of
 * NOTED_MAX pairs by hash); a "/slurm/uid_<u>/job_<id>" cgroup seen with its uid <u> (not 0)
 * records <u> as the job's owner unless the scheduler named one (a cgroup v2 job path names no
 * uid, and a setuid program may run in it: it teaches nothing). Then the facts and the caller's
 * uid and gid go through the rules in order; the first match wins. Else a job becomes
 * "slurm-<job>", a pod "k8s-<pod>", anyone else (pid known, uid not 0, no fallback_default)
 * "uid-<uid>": found, or created while fewer than implicit_max (max_tenants - reserved_ids) ids
 * exist and, for a job from SLURM_JOB_ID, within the uid's implicit_per_minute (a fixed
 * one-minute window per uid, RATE_UIDS uids kept in a ring; a job or pod a root-made cgroup
 * proves is not rated), and for a uid tenant while fewer than uid_max (half the implicit share)
 * uid tenants exist, else "default"; else "other". Else "default".
 *
 * Trust. The uid and gid are the kernel's. A cgroup path is trusted only where users cannot
 * create cgroups: slurmstepd.scope and /slurm are created by slurmd as root, /kubepods by the
 * kubelet, a configured root by the administrator; /user.slice/.../user@<uid>.service is
 * delegated to its user by systemd, so no pattern looks there (tenant.h). The environment is
 * the process's own, so it only selects among jobs the caller's uid is known to run.
 *
 * The job-owner table: TENANT_JOB_OWNERS_MAX entries with chains by job id, under r->lock; a
 * new entry takes a free slot (the ring's next), or when the table is full the oldest learnt
 * entry, else the oldest scheduler entry (one scan, only when full). Each entry records which
 * scheduler job set it (tenant_job_owner_release drops those) and whether two registrations
 * named different uids (a conflict: believed for neither). A change bumps r->gen so cached
 * answers are recomputed; learning an owner it already has changes nothing.
 *
 * Reclaim (idle_reclaim_s > 0; docs/ARCHITECTURE.md "Tenants"). Telemetry, the space quotas,
 * QoS and the policies' access log index arrays by tenant id, so an id given to a new tenant
 * must carry nothing of its old one. Id 2 is "retired" (an id beyond max_tenants: r->nids is
 * max + 1, and the caps count ids without it); only implicit tenants are reclaimed, never
 * default, other, retired, configured or registered ones. An id's states:
 *   LIVE: in the name index, handed out by resolution and tenant_find.
 *   QUARANTINE: out of the name index (a new caller of that name gets a new tenant), not
 *     handed out for a new tenant; a request that resolved it just before still records under
 *     it, and the second fold moves that.
 *   FREE: on r->freel; create_locked takes it before a new id.
 * Idleness: every tenant_resolve answer and tenant_find hit sets the id's `touched` flag (a
 * load, and a store only when clear: no shared write per request). A sweep (tenant_reclaim)
 * clears the flags; a touched id's since_s becomes the sweep's time. So since_s is never later
 * than the truth by more than one sweep interval and an id is idle only when no request was
 * given it for idle_s: sweeps far apart delay reclaim, never hasten it.
 * TRANSITION -> FUNCTION
 *   (new id) -> LIVE                                     create_locked()
 *   LIVE, implicit, idle, not busy -> QUARANTINE         tenant_reclaim() (then the retire hook
 *                                                        folds; the rule generation is bumped, so
 *                                                        no pid-cache entry answers the id again)
 *   QUARANTINE, idle again, not busy -> FREE             tenant_reclaim() (the retire hook folds
 *                                                        again first: once free, a new tenant may
 *                                                        record at once)
 *   FREE -> LIVE                                         create_locked() (the name written in the
 *                                                        buffer readers are not pointed at, then
 *                                                        the buffers flipped)
 *
 * An id with open FUSE handles (holds, tenant_hold: reads through a handle are not resolved
 * again) is in use like a touched one. The busy hook (what the tenant holds: hot-tier bytes, an
 * own quota, hint sets, QoS parameters or queued calls) is asked without the registry lock,
 * then the flags and holds are checked again under it: an id used meanwhile stays. Invariant: an id
 * is reused only after two idle periods in which no request was given it and, at the end of each,
 * it held nothing; a request that started for the old tenant and still records after that (it ran
 * longer than 2 x idle_s without a new resolve) is the one case counted under the new tenant.
 * Sweeps run from the miss path of tenant_resolve every idle_s / 4 (no thread of tierd's runs in
 * every configuration, and a miss is when a new id may be wanted), one at a time (r->sweeping).
 */
#include "tenant/tenant.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"

/* Biggest /proc/<pid>/cgroup read; a larger file (not seen on any kernel) names nothing. */
#define CGROUP_FILE_MAX (64 * 1024)
#define JOB_ID_MAX 20                        /* digits of a Slurm job id (a 64-bit number) */
#define POD_ID_MAX (TENANT_NAME_MAX - 1 - 4) /* "k8s-" + uid fits a tenant name */

/* An id's states (reclaim, DESIGN): LIVE -> QUARANTINE (idle, held nothing) -> FREE -> LIVE. */
enum { T_LIVE = 0, T_QUARANTINE = 1, T_FREE = 2 };

struct tenant {
    /* Two name buffers: a reused id writes the one readers are not pointed at, then flips cur
     * (release), so a lock-free reader (tenant_name) always reads a whole name; the other
     * buffer is written again only at the id's next reuse, two idle periods later. */
    char names[2][TENANT_NAME_MAX];
    _Atomic unsigned cur;
    _Atomic int cls;        /* enum tier_io_class; changes once when an implicit tenant is added */
    _Atomic bool implicit;  /* created by resolution, not added yet */
    _Atomic int state;      /* T_LIVE, ...; written under lock */
    _Atomic bool touched;   /* resolved or looked up since the last sweep (no lock) */
    _Atomic uint32_t holds; /* open handles of it (tenant_hold; no lock) */
    uint64_t since_s;       /* lock: LIVE: last sweep that saw it touched; QUARANTINE: retired */
};

static const char *tname(const struct tenant *t)
{
    return t
        ->names[atomic_load_explicit(&((struct tenant *)(uintptr_t)t)->cur, memory_order_acquire) &
                1];
}

struct rule {
    uint32_t tenant;
    char *slurm_job;     /* NULL: any */
    char *cgroup_prefix; /* NULL: any; without a trailing '/' unless it is "/" */
    size_t prefix_len;
    bool has_uid;
    uid_t uid;
    bool has_gid;
    gid_t gid;
};

/* A pid-cache entry. It is checked on a hit either by its pidfd (pidfd >= 0: the process it
 * refers to has not exited, which the registry's epoll set reports) or, without one, by the
 * start time read again from /proc/<pid>/stat. */
struct centry {
    pid_t pid;    /* 0: free */
    int pidfd;    /* -1: none */
    uint32_t seq; /* with pid, the token of pidfd's registration in r->epfd */
    uint64_t start;
    uid_t uid;
    gid_t gid;
    uint64_t gen;
    uint32_t tenant;
    int32_t next; /* chain of the bucket, -1: end */
};

/* A job-owner table entry: Slurm job -> the uid it runs as. */
struct owner {
    char job[JOB_ID_MAX + 1]; /* "": free */
    uid_t uid;
    bool learnt;   /* from a /slurm/uid_<u>/job_<id> cgroup, not from the scheduler */
    bool conflict; /* two scheduler registrations named different uids: believed for neither */
    uint64_t age;  /* r->own_seq when recorded: the smallest is the oldest */
    char by[TENANT_OWNER_BY_MAX]; /* the scheduler's job that set it (tierd job id); "": none */
    int32_t next;                 /* chain of the bucket, -1: end */
};

/* A (uid, job) already logged (ignored SLURM_JOB_ID, or a uid_<u> cgroup not the caller's), in
 * a direct-mapped table by hash: a pair whose slot another took since is logged again. */
struct noted {
    uid_t uid;
    uint8_t kind; /* 0: free; NOTE_ENV, NOTE_UID */
    char job[JOB_ID_MAX + 1];
};
#define NOTED_MAX 256 /* a power of two */

/* How many job or pod tenants one uid created in its current minute. */
struct rate {
    bool used;
    bool logged; /* the refusal of this window was logged */
    uid_t uid;
    uint64_t window_s; /* when the window began */
    uint32_t n;
};
#define RATE_UIDS 256
#define RATE_WINDOW_S 60

/* One shard of the pid cache: the pids equal to its index modulo the shard count. All fields
 * under lock. Aligned so two shards' locks never share a cache line. */
struct shard {
    alignas(64) pthread_mutex_t lock;
    struct centry *ce; /* cmax slots, filled as a ring from cnext */
    int32_t *bucket;   /* 1 << (32 - bshift) chains by pid */
    uint32_t cmax, cnext, cused, bshift;
    uint32_t fdmax, fdused; /* pidfds may be held by the fdmax slots filled last, see DESIGN */
    uint64_t hits, misses, evictions;
};

struct tenant_reg {
    pthread_mutex_t lock;
    char *proc_root;        /* immutable */
    uint32_t max;           /* immutable: the cap (max_tenants) */
    uint32_t nids;          /* immutable: ids that may exist: max, and "retired" with reclaim */
    struct tenant *t;       /* max entries; [0, count) in use (see DESIGN) */
    _Atomic uint32_t count; /* written under lock */
    uint32_t *name_idx;     /* lock; id + 1, 0: empty */
    uint32_t name_mask;
    struct rule **rules; /* lock */
    size_t nrules, caprules;
    _Atomic uint64_t gen; /* written under lock (release), read without it; rules added */
    uint64_t folded;      /* lock */
    /* trust (all under lock but the immutable settings) */
    uint32_t implicit_max;   /* immutable: ids implicit tenants may fill up to */
    uint32_t per_minute;     /* immutable; 0: no cap */
    bool fallback_default;   /* immutable */
    char *slurm_root;        /* immutable; NULL: none */
    uint64_t (*now_s)(void); /* immutable */
    struct owner *own;       /* TENANT_JOB_OWNERS_MAX entries, filled as a ring */
    int32_t *own_bucket;     /* TENANT_JOB_OWNERS_MAX chains by job */
    uint32_t own_next, own_used;
    uint64_t own_seq;
    uint32_t uid_max, uid_count; /* uid-<n> tenants: at most uid_max of the implicit share */
    bool uid_full_logged;
    _Atomic bool ns_logged;        /* a cgroup path outside tierd's cgroup namespace was logged */
    struct noted noted[NOTED_MAX]; /* by hash */
    struct rate rate[RATE_UIDS];   /* a ring */
    uint32_t rate_next;
    uint64_t rate_folded, env_ignored, uid_mismatch;
    /* the pid cache */
    struct shard *sh; /* nshards, immutable pointer */
    uint32_t nshards; /* a power of two */
    int epfd;         /* immutable; -1: no pidfds (a proc_root other than /proc, or pidfd_off) */
    _Atomic uint32_t seq;       /* tokens of epoll registrations */
    _Atomic bool no_pidfd_open; /* the kernel has no pidfd_open (ENOSYS) */
    /* reclaim (DESIGN "Reclaim"; all under lock but the immutable setting and next_sweep_s) */
    uint64_t idle_s;               /* immutable; 0: no reclaim */
    _Atomic uint64_t next_sweep_s; /* when the miss path runs tenant_reclaim next */
    struct tenant_reclaim_hooks hooks;
    uint32_t *freel; /* ids in state FREE, a stack; max entries */
    uint32_t nfree;
    uint64_t reclaimed;
    bool sweeping; /* one sweep at a time */
};

/* Mark id used now (reclaim's idleness): a load, and a store only when the flag was clear, so
 * the hit path does not write a shared line on every request. */
static void touch(const struct tenant_reg *r, uint32_t id)
{
    struct tenant *t = &((struct tenant_reg *)(uintptr_t)r)->t[id];
    if (r->idle_s && !atomic_load_explicit(&t->touched, memory_order_relaxed))
        atomic_store_explicit(&t->touched, true, memory_order_relaxed);
}

/* ---- validation ------------------------------------------------------------------------ */

bool tenant_name_valid(const char *name)
{
    if (!name)
        return false;
    size_t n = strnlen(name, TENANT_NAME_MAX);
    if (n == 0 || n >= TENANT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

bool tenant_job_valid(const char *s)
{
    if (!s)
        return false;
    size_t n = strnlen(s, JOB_ID_MAX + 1);
    /* one spelling per job: "007" is not job 7 (Slurm prints no leading zeros) */
    return n <= JOB_ID_MAX && tier_all_digits(s, n) && (s[0] != '0' || n == 1);
}

const char *tenant_cgroup_prefix_problem(const char *prefix)
{
    if (!prefix || prefix[0] != '/')
        return "must start with '/'";
    size_t n = strnlen(prefix, TENANT_CGROUP_PREFIX_MAX);
    if (n >= TENANT_CGROUP_PREFIX_MAX)
        return "is too long (at most 255 bytes)";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)prefix[i] < 0x20 || prefix[i] == 0x7f)
            return "has a control character";
    return NULL;
}

/* ---- parsing: /proc/<pid>/cgroup -------------------------------------------------------- */

static bool is_pod_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-' ||
           c == '_';
}

/* A pod uid in one segment: "pod<uid>" at its start or after '-', the uid running to the end
 * of the segment or to a '.' (".slice"); '_' (systemd's escape) back to '-'. */
static bool seg_pod(const char *seg, size_t n, char *id)
{
    for (size_t i = 0; i + 3 < n; i++) {
        if (memcmp(seg + i, "pod", 3) != 0 || (i > 0 && seg[i - 1] != '-'))
            continue;
        size_t b = i + 3, e = b;
        while (e < n && is_pod_char(seg[e]))
            e++;
        if (e == b || e - b > POD_ID_MAX || (e < n && seg[e] != '.'))
            continue;
        for (size_t k = b; k < e; k++)
            id[k - b] = seg[k] == '_' ? '-' : seg[k];
        id[e - b] = '\0';
        return true;
    }
    return false;
}

/* Does p (len bytes) start with the path prefix pre (plen bytes), whole segments? */
static bool path_under(const char *p, size_t len, const char *pre, size_t plen)
{
    return len >= plen && memcmp(p, pre, plen) == 0 && (len == plen || p[plen] == '/');
}

/* The segment "<word><digits>" at p + *off (which is at a '/'), the digits at most maxd: their
 * start and count, *off moved past it. */
static bool seg_number(const char *p, size_t len, size_t *off, const char *word, size_t maxd,
                       const char **digits, size_t *nd)
{
    size_t wl = strlen(word), i = *off;
    if (i >= len || p[i] != '/' || len - i - 1 < wl || memcmp(p + i + 1, word, wl) != 0)
        return false;
    size_t b = i + 1 + wl, e = b;
    while (e < len && p[e] != '/')
        e++;
    if (e == b || e - b > maxd || !tier_all_digits(p + b, e - b))
        return false;
    *digits = p + b;
    *nd = e - b;
    *off = e;
    return true;
}

/* After a Slurm root (p + off at its end): "/job_N" (no_uid allowed) or "/uid_U/job_N" (U the
 * owner's uid, up to 4294967294), followed by the end or '/'. */
static bool slurm_job_at(const char *p, size_t len, size_t off, bool no_uid, char *id,
                         bool *has_uid, uid_t *uid)
{
    const char *d = NULL;
    size_t nd = 0;
    bool with_uid = false;
    uint64_t u = 0;
    if (seg_number(p, len, &off, "uid_", 10, &d, &nd)) {
        for (size_t k = 0; k < nd; k++)
            u = u * 10 + (uint64_t)(d[k] - '0');
        if (u > 4294967294ULL)
            return false;
        with_uid = true;
    } else if (!no_uid) {
        return false;
    }
    if (!seg_number(p, len, &off, "job_", JOB_ID_MAX, &d, &nd))
        return false;
    memcpy(id, d, nd);
    id[nd] = '\0';
    *has_uid = with_uid;
    *uid = (uid_t)u;
    return true;
}

#define STEPD_ROOT "/system.slice/slurmstepd.scope"
#define SLURM_V1_ROOT "/slurm"

/* Is p a Slurm job's cgroup, where slurmd (root) puts jobs and no user can create one? */
static bool slurm_path(const char *p, size_t len, const char *root, char *id, bool *has_uid,
                       uid_t *uid)
{
    size_t off = sizeof(STEPD_ROOT) - 1, vl = sizeof(SLURM_V1_ROOT) - 1;
    const char *d = NULL;
    size_t nd = 0;
    *has_uid = false;
    if (path_under(p, len, STEPD_ROOT, off) &&
        seg_number(p, len, &off, "job_", JOB_ID_MAX, &d, &nd)) {
        memcpy(id, d, nd);
        id[nd] = '\0';
        return true;
    }
    if (path_under(p, len, SLURM_V1_ROOT, vl) && slurm_job_at(p, len, vl, false, id, has_uid, uid))
        return true;
    if (root) {
        size_t rl = strlen(root);
        while (rl > 0 && root[rl - 1] == '/')
            rl--; /* "/" becomes "": every path is under it */
        if (path_under(p, len, root, rl) && slurm_job_at(p, len, rl, true, id, has_uid, uid))
            return true;
    }
    return false;
}

/* Is p a Kubernetes pod's cgroup: under /kubepods (cgroupfs driver) or /kubepods.slice
 * (systemd driver) at the top, where only the kubelet creates cgroups? The first pod segment
 * below names it (a container may create cgroups inside its own pod, never above it). */
static bool pod_path(const char *p, size_t len, char *id)
{
    if (!path_under(p, len, "/kubepods", 9) && !path_under(p, len, "/kubepods.slice", 15))
        return false;
    for (size_t i = 1; i < len;) {
        while (i < len && p[i] == '/')
            i++;
        size_t b = i;
        while (i < len && p[i] != '/')
            i++;
        if (i > b && seg_pod(p + b, i - b, id))
            return true;
    }
    return false;
}

/* What one cgroup path names: 2 for a Slurm job or pod, 1 for a systemd unit, 0 for nothing. */
static int classify_path(const char *p, size_t len, const char *root, enum tenant_origin *origin,
                         char *id, bool *has_uid, uid_t *uid)
{
    *has_uid = false;
    if (slurm_path(p, len, root, id, has_uid, uid)) {
        *origin = TENANT_ORIGIN_SLURM;
        return 2;
    }
    if (pod_path(p, len, id)) {
        *origin = TENANT_ORIGIN_K8S;
        return 2;
    }
    const char *unit = NULL;
    size_t unit_len = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && p[i] == '/')
            i++;
        size_t b = i;
        while (i < len && p[i] != '/')
            i++;
        const char *seg = p + b;
        size_t n = i - b;
        bool service = n > 8 && memcmp(seg + n - 8, ".service", 8) == 0;
        bool scope = n > 6 && memcmp(seg + n - 6, ".scope", 6) == 0;
        if (service || scope) {
            unit = seg;
            unit_len = n;
        }
    }
    if (!unit || unit_len >= TENANT_NAME_MAX)
        return 0;
    /* a login session is a user, not a workload: the uid rules decide */
    if (unit_len > 8 + 6 && memcmp(unit, "session-", 8) == 0 &&
        memcmp(unit + unit_len - 6, ".scope", 6) == 0)
        return 0;
    for (size_t k = 0; k < unit_len; k++)
        if ((unsigned char)unit[k] <= ' ' || (unsigned char)unit[k] >= 0x7f)
            return 0;
    memcpy(id, unit, unit_len);
    id[unit_len] = '\0';
    *origin = TENANT_ORIGIN_SYSTEMD;
    return 1;
}

static void keep_path(struct tenant_origin_id *out, const char *p, size_t n)
{
    out->cgroup_truncated = n >= sizeof(out->cgroup);
    if (out->cgroup_truncated)
        n = sizeof(out->cgroup) - 1;
    memcpy(out->cgroup, p, n);
    out->cgroup[n] = '\0';
}

int tenant_parse_cgroup(const char *text, size_t len, const char *slurm_root,
                        struct tenant_origin_id *out)
{
    if (!out || (!text && len))
        return -EINVAL;
    if (len && memchr(text, '\0', len))
        return -EINVAL;
    struct {
        const char *p;
        size_t n;
    } v2 = {0}, sysd = {0}, first = {0}, named = {0};
    int best = 0;
    enum tenant_origin origin = TENANT_ORIGIN_NONE;
    char id[TENANT_NAME_MAX] = "";
    bool has_uid = false;
    uid_t job_uid = 0;
    for (size_t pos = 0; pos < len;) {
        const char *line = text + pos;
        const char *eol = memchr(line, '\n', len - pos);
        size_t ll = eol ? (size_t)(eol - line) : len - pos;
        pos += ll + (eol ? 1 : 0);
        if (ll == 0)
            continue;
        /* ID:CONTROLLERS:/PATH */
        size_t i = 0;
        while (i < ll && line[i] >= '0' && line[i] <= '9')
            i++;
        if (i == 0 || i > 10 || i == ll || line[i] != ':')
            return -EINVAL;
        bool id_zero = i == 1 && line[0] == '0';
        size_t cb = ++i;
        while (i < ll && line[i] != ':') {
            char c = line[i];
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == ',' || c == '=' || c == '.' || c == '-';
            if (!ok)
                return -EINVAL;
            i++;
        }
        if (i == ll)
            return -EINVAL;
        size_t cl = i - cb;
        const char *path = line + i + 1;
        size_t pl = ll - i - 1;
        if (pl == 0 || path[0] != '/' || pl >= TENANT_CGROUP_PATH_MAX)
            return -EINVAL;
        if (id_zero && cl == 0 && !v2.p) {
            v2.p = path;
            v2.n = pl;
        }
        if (cl == 12 && memcmp(line + cb, "name=systemd", 12) == 0 && !sysd.p) {
            sysd.p = path;
            sysd.n = pl;
        }
        if (!first.p) {
            first.p = path;
            first.n = pl;
        }
        enum tenant_origin o = TENANT_ORIGIN_NONE;
        char lid[TENANT_NAME_MAX];
        bool lhas = false;
        uid_t luid = 0;
        int rank = classify_path(path, pl, slurm_root, &o, lid, &lhas, &luid);
        if (rank > best) {
            best = rank;
            origin = o;
            has_uid = lhas;
            job_uid = luid;
            memcpy(id, lid, sizeof(id));
            named.p = path;
            named.n = pl;
        }
    }
    memset(out, 0, sizeof(*out));
    out->origin = origin;
    memcpy(out->id, id, sizeof(out->id));
    out->has_job_uid = has_uid;
    out->job_uid = job_uid;
    if (named.p)
        keep_path(out, named.p, named.n);
    else if (v2.p)
        keep_path(out, v2.p, v2.n);
    else if (sysd.p)
        keep_path(out, sysd.p, sysd.n);
    else if (first.p)
        keep_path(out, first.p, first.n);
    return 0;
}

/* ---- parsing: /proc/<pid>/environ -------------------------------------------------------- */

/* An incremental scan for SLURM_JOB_ID, fed the file in pieces of any size; only the first
 * bytes of each entry are kept. */
struct env_scan {
    char head[48];
    size_t hlen, elen;
    bool done;
    int rc; /* -ENOENT until found */
    char job[TENANT_NAME_MAX];
};

static const char ENV_KEY[] = "SLURM_JOB_ID=";
#define ENV_KEY_LEN (sizeof(ENV_KEY) - 1)

static void env_entry_end(struct env_scan *s)
{
    if (s->elen >= ENV_KEY_LEN && memcmp(s->head, ENV_KEY, ENV_KEY_LEN) == 0) {
        size_t vl = s->elen - ENV_KEY_LEN;
        s->done = true;
        /* 13 + 20 bytes fit the head: a value of up to JOB_ID_MAX digits is all there */
        if (vl <= JOB_ID_MAX && tier_all_digits(s->head + ENV_KEY_LEN, vl)) {
            memcpy(s->job, s->head + ENV_KEY_LEN, vl);
            s->job[vl] = '\0';
            s->rc = 0;
        } else {
            s->rc = -EINVAL;
        }
    }
    s->hlen = s->elen = 0;
}

static void env_feed(struct env_scan *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n && !s->done; i++) {
        if (p[i] == '\0') {
            env_entry_end(s);
            continue;
        }
        if (s->hlen < sizeof(s->head))
            s->head[s->hlen++] = p[i];
        s->elen++;
    }
}

static void env_finish(struct env_scan *s)
{
    if (!s->done && s->elen > 0)
        env_entry_end(s);
}

int tenant_parse_environ(const char *text, size_t len, char *job)
{
    if (!job || (!text && len))
        return -EINVAL;
    struct env_scan s = {.rc = -ENOENT};
    env_feed(&s, text, len);
    env_finish(&s);
    if (s.rc == 0)
        memcpy(job, s.job, strlen(s.job) + 1);
    return s.rc;
}

/* ---- registry ---------------------------------------------------------------------------- */

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

/* Under lock. */
static int find_locked(const struct tenant_reg *r, const char *name, uint32_t *id)
{
    for (uint32_t i = name_hash(name) & r->name_mask;; i = (i + 1) & r->name_mask) {
        uint32_t v = r->name_idx[i];
        if (v == 0)
            return -ENOENT;
        if (strcmp(tname(&r->t[v - 1]), name) == 0) {
            *id = v - 1;
            return 0;
        }
    }
}

/* Under lock: insert id under its name into the name index. */
static void index_put(struct tenant_reg *r, uint32_t id)
{
    uint32_t i = name_hash(tname(&r->t[id])) & r->name_mask;
    while (r->name_idx[i] != 0)
        i = (i + 1) & r->name_mask;
    r->name_idx[i] = id + 1;
}

/* Under lock: ids taken (live or in quarantine) but "retired": what the caps count. */
static uint32_t used_locked(const struct tenant_reg *r)
{
    return atomic_load_explicit(&r->count, memory_order_relaxed) - r->nfree -
           (r->nids > r->max ? 1 : 0);
}

/* Under lock, used_locked < max, name valid and absent. A freed id first (reclaim), else the
 * next new one. */
static uint32_t create_locked(struct tenant_reg *r, const char *name, enum tier_io_class cls,
                              bool implicit)
{
    uint32_t count = atomic_load_explicit(&r->count, memory_order_relaxed);
    bool reuse = r->nfree > 0;
    uint32_t id = reuse ? r->freel[--r->nfree] : count;
    struct tenant *t = &r->t[id];
    unsigned buf = reuse ? (atomic_load_explicit(&t->cur, memory_order_relaxed) & 1) ^ 1 : 0;
    tier_strlcpy(t->names[buf], name, sizeof(t->names[buf]));
    atomic_store_explicit(&t->cur, buf, memory_order_release);
    atomic_store_explicit(&t->cls, (int)cls, memory_order_relaxed);
    atomic_store_explicit(&t->implicit, implicit, memory_order_relaxed);
    atomic_store_explicit(&t->touched, true, memory_order_relaxed);
    t->since_s = r->idle_s ? r->now_s() : 0;
    atomic_store_explicit(&t->state, T_LIVE, memory_order_release);
    index_put(r, id);
    if (!reuse)
        atomic_store_explicit(&r->count, id + 1, memory_order_release);
    return id;
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

/* Slots of shard i when n are split over nshards shards (the first ones take the remainder). */
static uint32_t share(uint32_t n, uint32_t nshards, uint32_t i)
{
    return n / nshards + (i < n % nshards ? 1 : 0);
}

/* How many pidfds the registry may hold by default: a quarter of the fd limit it starts with
 * (tierd raises its soft limit to the hard one first, main.c), so the pidfds never take the fds
 * that cache files, API connections and backend sockets need. */
static uint32_t default_pidfd_max(uint32_t cmax)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return cmax < 256 ? cmax : 256;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 4 >= cmax)
        return cmax;
    return (uint32_t)(rl.rlim_cur / 4);
}

static int shards_init(struct tenant_reg *r, uint32_t cmax, uint32_t fdmax)
{
    /* at least 256 slots per shard, at most 16 shards: a small cache stays one exact ring */
    uint32_t n = 1;
    while (n < 16 && cmax / (n * 2) >= 256)
        n *= 2;
    r->sh = aligned_alloc(alignof(struct shard), n * sizeof(*r->sh));
    if (!r->sh)
        return -ENOMEM;
    memset(r->sh, 0, n * sizeof(*r->sh));
    for (uint32_t i = 0; i < n; i++) {
        struct shard *s = &r->sh[i];
        s->cmax = share(cmax, n, i);
        s->fdmax = share(fdmax, n, i);
        uint32_t nb = pow2_at_least(s->cmax);
        s->bshift = 32;
        for (uint32_t b = nb; b > 1; b >>= 1)
            s->bshift--;
        s->ce = calloc(s->cmax, sizeof(*s->ce));
        s->bucket = malloc(nb * sizeof(*s->bucket));
        if (!s->ce || !s->bucket || pthread_mutex_init(&s->lock, NULL) != 0) {
            free(s->ce);
            free(s->bucket);
            r->nshards = i;
            return -ENOMEM;
        }
        for (uint32_t b = 0; b < nb; b++)
            s->bucket[b] = -1;
        for (uint32_t k = 0; k < s->cmax; k++)
            s->ce[k].pidfd = -1;
        r->nshards = i + 1;
    }
    return 0;
}

static void shards_fini(struct tenant_reg *r)
{
    for (uint32_t i = 0; i < r->nshards; i++) {
        struct shard *s = &r->sh[i];
        for (uint32_t k = 0; k < s->cmax; k++)
            if (s->ce[k].pidfd >= 0)
                close(s->ce[k].pidfd);
        pthread_mutex_destroy(&s->lock);
        free(s->ce);
        free(s->bucket);
    }
    free(r->sh);
}

static uint64_t monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec;
}

/* tierd's own cgroup checked once (below, with the /proc readers) */
static void ns_check_self(struct tenant_reg *r);

static void rule_free(struct rule *ru);

/* Frees a registry, whole or as far as tenant_reg_new built it (locked: its mutex was made):
 * one release for both, so a field added to the registry is freed on every path. */
static void reg_release(struct tenant_reg *r, bool locked)
{
    for (size_t i = 0; i < r->nrules; i++)
        rule_free(r->rules[i]);
    free(r->rules);
    if (locked)
        pthread_mutex_destroy(&r->lock);
    shards_fini(r);
    if (r->epfd >= 0)
        close(r->epfd);
    free(r->proc_root);
    free(r->slurm_root);
    free(r->own);
    free(r->own_bucket);
    free(r->t);
    free(r->name_idx);
    free(r->freel);
    free(r);
}

int tenant_reg_new(const struct tenant_reg_config *cfg, struct tenant_reg **out)
{
    unsigned max = cfg && cfg->max_tenants ? cfg->max_tenants : TENANT_MAX_TENANTS_DEFAULT;
    unsigned cmax = cfg && cfg->pid_cache_max ? cfg->pid_cache_max : TENANT_PID_CACHE_DEFAULT;
    const char *root = cfg && cfg->proc_root ? cfg->proc_root : "/proc";
    if (max < 2 || max > TENANT_MAX_TENANTS_LIMIT) {
        tier_err_set("max_tenants = %u is out of range (2 to %u: default and other included)", max,
                     TENANT_MAX_TENANTS_LIMIT);
        return -EINVAL;
    }
    if (cmax > TENANT_PID_CACHE_LIMIT) {
        tier_err_set("pid_cache = %u is out of range (1 to %u)", cmax, TENANT_PID_CACHE_LIMIT);
        return -EINVAL;
    }
    uint64_t idle = cfg ? cfg->idle_reclaim_s : 0;
    unsigned reserved = cfg ? cfg->reserved_ids : 0;
    if (reserved > max - 2) {
        tier_err_set("reserved_ids = %u is out of range (0 to max_tenants - 2 = %u)", reserved,
                     max - 2);
        return -EINVAL;
    }
    const char *sroot = cfg ? cfg->slurm_cgroup_root : NULL;
    const char *problem = sroot ? tenant_cgroup_prefix_problem(sroot) : NULL;
    if (problem) {
        tier_err_set("slurm_cgroup_root = '%.80s' %s", sroot, problem);
        return -EINVAL;
    }
    /* pidfds only for the kernel's own /proc: a test's fake tree names no real processes */
    bool pidfds = strcmp(root, "/proc") == 0 && !(cfg && cfg->pidfd_off);
    uint32_t fdmax = 0;
    if (pidfds)
        fdmax = cfg && cfg->pidfd_max ? cfg->pidfd_max : default_pidfd_max(cmax);
    if (fdmax > cmax)
        fdmax = cmax;
    struct tenant_reg *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->max = max;
    r->implicit_max = max - reserved;
    /* half of the implicit share (beyond "default" and "other") for uid-<n> tenants, so that
     * jobs and pods keep ids however many users there are */
    r->uid_max = r->implicit_max > 2 ? (r->implicit_max - 2) / 2 : 0;
    r->per_minute = cfg ? cfg->implicit_per_minute : 0;
    r->fallback_default = cfg && cfg->fallback_default;
    r->now_s = cfg && cfg->now_s ? cfg->now_s : monotonic_s;
    r->idle_s = idle;
    r->epfd = -1;
    /* "retired" is an id beyond the cap: max_tenants keeps its meaning (DESIGN "Reclaim") */
    r->nids = max + (idle ? 1 : 0);
    uint32_t nslots = pow2_at_least(2ULL * r->nids);
    r->name_mask = nslots - 1;
    r->proc_root = strdup(root);
    r->t = calloc(r->nids, sizeof(*r->t));
    r->name_idx = calloc(nslots, sizeof(*r->name_idx));
    r->freel = calloc(r->nids, sizeof(*r->freel));
    r->own = calloc(TENANT_JOB_OWNERS_MAX, sizeof(*r->own));
    r->own_bucket = malloc(TENANT_JOB_OWNERS_MAX * sizeof(*r->own_bucket));
    if (sroot)
        r->slurm_root = strdup(sroot);
    bool locked = false;
    if (!r->proc_root || !r->t || !r->name_idx || !r->freel || !r->own || !r->own_bucket ||
        (sroot && !r->slurm_root) || shards_init(r, cmax, fdmax) != 0 ||
        !(locked = pthread_mutex_init(&r->lock, NULL) == 0))
        goto oom;
    for (uint32_t i = 0; i < TENANT_JOB_OWNERS_MAX; i++)
        r->own_bucket[i] = -1;
    /* without an epoll set the cache still works, by start times alone */
    if (fdmax > 0)
        r->epfd = epoll_create1(EPOLL_CLOEXEC);
    create_locked(r, "default", TIER_IO_TRAINING, false);
    create_locked(r, "other", TIER_IO_TRAINING, false);
    if (r->idle_s)
        create_locked(r, TENANT_RETIRED_NAME, TIER_IO_TRAINING, false);
    ns_check_self(r);
    *out = r;
    return 0;
oom:
    reg_release(r, locked);
    return -ENOMEM;
}

static void rule_free(struct rule *ru)
{
    if (!ru)
        return;
    free(ru->slurm_job);
    free(ru->cgroup_prefix);
    free(ru);
}

void tenant_reg_free(struct tenant_reg *r)
{
    if (r)
        reg_release(r, true);
}

static bool rule_empty(const struct tenant_rule *rule)
{
    return !rule->slurm_job && !rule->cgroup_prefix && !rule->has_uid && !rule->has_gid;
}

/* A registry copy of rule for tenant id (the prefix without its trailing '/'), or NULL without
 * memory. The fields were validated. */
static struct rule *rule_copy(const struct tenant_rule *rule, uint32_t id)
{
    struct rule *ru = calloc(1, sizeof(*ru));
    if (!ru)
        return NULL;
    ru->tenant = id;
    ru->has_uid = rule->has_uid;
    ru->uid = rule->uid;
    ru->has_gid = rule->has_gid;
    ru->gid = rule->gid;
    if (rule->slurm_job && !(ru->slurm_job = strdup(rule->slurm_job)))
        goto oom;
    if (rule->cgroup_prefix) {
        size_t n = strlen(rule->cgroup_prefix);
        while (n > 1 && rule->cgroup_prefix[n - 1] == '/')
            n--;
        if (!(ru->cgroup_prefix = strndup(rule->cgroup_prefix, n)))
            goto oom;
        ru->prefix_len = n;
    }
    return ru;
oom:
    rule_free(ru);
    return NULL;
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool rule_same(const struct rule *a, const struct rule *b)
{
    return a->tenant == b->tenant && str_eq(a->slurm_job, b->slurm_job) &&
           str_eq(a->cgroup_prefix, b->cgroup_prefix) && a->has_uid == b->has_uid &&
           (!a->has_uid || a->uid == b->uid) && a->has_gid == b->has_gid &&
           (!a->has_gid || a->gid == b->gid);
}

/* ---- the job-owner table (under lock) ------------------------------------------------------ */

static uint32_t owner_bucket(const char *job)
{
    return name_hash(job) & (TENANT_JOB_OWNERS_MAX - 1);
}

static int32_t owner_find(const struct tenant_reg *r, const char *job)
{
    for (int32_t i = r->own_bucket[owner_bucket(job)]; i >= 0; i = r->own[i].next)
        if (strcmp(r->own[i].job, job) == 0)
            return i;
    return -1;
}

static void owner_unlink(struct tenant_reg *r, int32_t slot)
{
    int32_t *pp = &r->own_bucket[owner_bucket(r->own[slot].job)];
    while (*pp >= 0 && *pp != slot)
        pp = &r->own[*pp].next;
    if (*pp == slot)
        *pp = r->own[slot].next;
    r->own[slot].job[0] = '\0';
    r->own_used--;
}

static void gen_bump(struct tenant_reg *r)
{
    atomic_store_explicit(&r->gen, atomic_load_explicit(&r->gen, memory_order_relaxed) + 1,
                          memory_order_release);
}

/* The slot a new entry takes: a free one (the ring's next), else the oldest learnt entry, else
 * the oldest the scheduler set (a scan of the table, only when it is full). */
static int32_t owner_victim(struct tenant_reg *r)
{
    if (r->own_used < TENANT_JOB_OWNERS_MAX) {
        while (r->own[r->own_next].job[0])
            r->own_next = (r->own_next + 1) % TENANT_JOB_OWNERS_MAX;
        int32_t slot = (int32_t)r->own_next;
        r->own_next = (r->own_next + 1) % TENANT_JOB_OWNERS_MAX;
        return slot;
    }
    int32_t best = 0;
    for (int32_t i = 1; i < TENANT_JOB_OWNERS_MAX; i++) {
        const struct owner *a = &r->own[i], *b = &r->own[best];
        if (a->learnt != b->learnt ? a->learnt : a->age < b->age)
            best = i;
    }
    owner_unlink(r, best);
    return best;
}

/* Record job -> uid. A learnt owner (learnt) never replaces an entry. The scheduler's word
 * (by: its job, or "") replaces a learnt one, and its own earlier one (the same by); another
 * job's word for the same uid takes the entry over (its release drops it), for another uid it
 * makes the entry a conflict (*conflict set), which stays until the entry is released or
 * evicted. Bumps the rule generation when the table changed (cached answers may depend on it). */
static void owner_put_locked(struct tenant_reg *r, const char *job, uid_t uid, bool learnt,
                             const char *by, bool *conflict)
{
    int32_t slot = owner_find(r, job);
    if (slot >= 0) {
        struct owner *o = &r->own[slot];
        if (learnt || o->conflict)
            return;
        bool same_by = strcmp(o->by, by) == 0;
        if (!o->learnt && o->uid == uid && (same_by || !by[0]))
            return;
        if (!o->learnt && o->uid != uid && !same_by) {
            o->conflict = true;
            *conflict = true;
        } else {
            o->uid = uid;
            o->learnt = false;
            tier_strlcpy(o->by, by, sizeof(o->by));
        }
        o->age = ++r->own_seq;
    } else {
        slot = owner_victim(r);
        struct owner *o = &r->own[slot];
        tier_strlcpy(o->job, job, sizeof(o->job));
        o->uid = uid;
        o->learnt = learnt;
        o->conflict = false;
        o->age = ++r->own_seq;
        tier_strlcpy(o->by, by, sizeof(o->by));
        uint32_t b = owner_bucket(job);
        o->next = r->own_bucket[b];
        r->own_bucket[b] = slot;
        r->own_used++;
    }
    gen_bump(r);
}

int tenant_job_owner_set_by(struct tenant_reg *r, const char *job, uid_t uid, const char *by)
{
    if (!r || !tenant_job_valid(job))
        return -EINVAL;
    if (!by)
        by = "";
    bool conflict = false;
    pthread_mutex_lock(&r->lock);
    owner_put_locked(r, job, uid, false, by, &conflict);
    pthread_mutex_unlock(&r->lock);
    if (conflict)
        log_warn("tenants: Slurm job %s was registered for two uids (%u the last; several "
                 "clusters sharing one tierd?): SLURM_JOB_ID=%s is believed for neither until the "
                 "job is released; jobs are still known by their cgroups",
                 job, (unsigned)uid, job);
    return 0;
}

int tenant_job_owner_set(struct tenant_reg *r, const char *job, uid_t uid)
{
    return tenant_job_owner_set_by(r, job, uid, NULL);
}

void tenant_job_owner_release(struct tenant_reg *r, const char *by)
{
    if (!r || !by || !by[0])
        return;
    pthread_mutex_lock(&r->lock);
    bool changed = false;
    for (int32_t i = 0; i < TENANT_JOB_OWNERS_MAX; i++)
        if (r->own[i].job[0] && strcmp(r->own[i].by, by) == 0) {
            owner_unlink(r, i);
            changed = true;
        }
    if (changed)
        gen_bump(r);
    pthread_mutex_unlock(&r->lock);
}

void tenant_job_owner_drop(struct tenant_reg *r, const char *job)
{
    if (!r || !tenant_job_valid(job))
        return;
    pthread_mutex_lock(&r->lock);
    int32_t slot = owner_find(r, job);
    if (slot >= 0) {
        owner_unlink(r, slot);
        atomic_store_explicit(&r->gen, atomic_load_explicit(&r->gen, memory_order_relaxed) + 1,
                              memory_order_release);
    }
    pthread_mutex_unlock(&r->lock);
}

int tenant_job_owner(struct tenant_reg *r, const char *job, uid_t *uid)
{
    if (!r || !tenant_job_valid(job))
        return -ENOENT;
    pthread_mutex_lock(&r->lock);
    int32_t slot = owner_find(r, job);
    bool conflict = slot >= 0 && r->own[slot].conflict;
    if (slot >= 0 && uid)
        *uid = r->own[slot].uid;
    pthread_mutex_unlock(&r->lock);
    return slot < 0 ? -ENOENT : conflict ? -EBUSY : 0;
}

void tenant_note_folded(struct tenant_reg *r)
{
    pthread_mutex_lock(&r->lock);
    r->folded++;
    pthread_mutex_unlock(&r->lock);
}

int tenant_register(struct tenant_reg *r, const char *name, const enum tier_io_class *cls,
                    const struct tenant_rule *rule, uint32_t *id, bool *created)
{
    if (!r || !tenant_name_valid(name)) {
        tier_err_set("tenant name '%.80s' is not allowed (1 to %d bytes of letters, digits, '.', "
                     "'_', '-')",
                     name ? name : "", TENANT_NAME_MAX - 1);
        return -EINVAL;
    }
    if (strcmp(name, TENANT_RETIRED_NAME) == 0) {
        tier_err_set("tenant name '%s' is reserved (the series of reclaimed tenants)", name);
        return -EINVAL;
    }
    if (cls && (unsigned)*cls >= TIER_IO_NCLASSES) {
        tier_err_set("tenant '%s': class %d is not a class", name, (int)*cls);
        return -EINVAL;
    }
    if (rule && rule_empty(rule))
        rule = NULL;
    if (rule && rule->slurm_job && !tenant_job_valid(rule->slurm_job)) {
        tier_err_set("tenant '%s': slurm_job '%.40s' is not a job id (1 to %d digits)", name,
                     rule->slurm_job, JOB_ID_MAX);
        return -EINVAL;
    }
    const char *problem = rule ? tenant_cgroup_prefix_problem(rule->cgroup_prefix) : NULL;
    if (rule && rule->cgroup_prefix && problem) {
        tier_err_set("tenant '%s': cgroup '%.80s' %s", name, rule->cgroup_prefix, problem);
        return -EINVAL;
    }
    /* Allocate before taking the lock; the tenant id is filled in under it. */
    struct rule *ru = rule ? rule_copy(rule, 0) : NULL;
    if (rule && !ru)
        return -ENOMEM;
    int rc = 0;
    bool is_new = false;
    uint32_t tid = 0;
    pthread_mutex_lock(&r->lock);
    if (ru && r->nrules == r->caprules) {
        size_t ncap = r->caprules ? r->caprules * 2 : 16;
        struct rule **nr = realloc(r->rules, ncap * sizeof(*nr));
        if (!nr) {
            rc = -ENOMEM;
            goto out;
        }
        r->rules = nr;
        r->caprules = ncap;
    }
    bool exists = find_locked(r, name, &tid) == 0;
    if (exists) {
        struct tenant *t = &r->t[tid];
        int cur = atomic_load_explicit(&t->cls, memory_order_relaxed);
        bool implicit = atomic_load_explicit(&t->implicit, memory_order_relaxed);
        if (cls && (int)*cls != cur && !implicit) {
            tier_err_set("tenant '%s' exists with class %s (a tenant keeps its class; register "
                         "it with class %s, or choose another name)",
                         name, tier_io_class_name((enum tier_io_class)cur),
                         tier_io_class_name((enum tier_io_class)cur));
            rc = -EEXIST;
            goto out;
        }
        if (ru) {
            ru->tenant = tid;
            for (size_t i = 0; i < r->nrules && ru; i++)
                if (rule_same(r->rules[i], ru)) {
                    rule_free(ru);
                    ru = NULL;
                }
        }
        if (ru && r->nrules == TENANT_RULES_MAX) {
            tier_err_set("the tenant registry holds %d rules, the most it takes", TENANT_RULES_MAX);
            rc = -ENOSPC;
            goto out;
        }
        if (implicit && cls)
            atomic_store_explicit(&t->cls, (int)*cls, memory_order_relaxed);
        atomic_store_explicit(&t->implicit, false, memory_order_relaxed);
        touch(r, tid); /* a sweep asking its hooks now must not retire it */
    } else {
        if (used_locked(r) >= r->max) {
            tier_err_set("the tenant registry is full (%u tenants, default and other included; "
                         "raise [tenants] max_tenants)",
                         r->max);
            rc = -ENOSPC;
            goto out;
        }
        if (ru && r->nrules == TENANT_RULES_MAX) {
            tier_err_set("the tenant registry holds %d rules, the most it takes", TENANT_RULES_MAX);
            rc = -ENOSPC;
            goto out;
        }
        tid = create_locked(r, name, cls ? *cls : TIER_IO_TRAINING, false);
        is_new = true;
        if (ru)
            ru->tenant = tid;
    }
    if (ru) {
        r->rules[r->nrules++] = ru;
        atomic_store_explicit(&r->gen, atomic_load_explicit(&r->gen, memory_order_relaxed) + 1,
                              memory_order_release);
        ru = NULL;
    }
out:
    pthread_mutex_unlock(&r->lock);
    rule_free(ru);
    if (rc == 0) {
        if (id)
            *id = tid;
        if (created)
            *created = is_new;
    }
    return rc;
}

int tenant_add(struct tenant_reg *r, const char *name, enum tier_io_class cls,
               const struct tenant_rule *rule, uint32_t *id)
{
    return tenant_register(r, name, &cls, rule, id, NULL);
}

int tenant_find(struct tenant_reg *r, const char *name, uint32_t *id)
{
    if (!r || !tenant_name_valid(name))
        return -ENOENT;
    pthread_mutex_lock(&r->lock);
    uint32_t tid = 0;
    int rc = find_locked(r, name, &tid);
    if (rc == 0)
        touch(r, tid);
    pthread_mutex_unlock(&r->lock);
    if (rc == 0 && id)
        *id = tid;
    return rc;
}

const char *tenant_name(const struct tenant_reg *r, uint32_t id)
{
    uint32_t n =
        atomic_load_explicit(&((struct tenant_reg *)(uintptr_t)r)->count, memory_order_acquire);
    return tname(&r->t[id < n ? id : TIER_TENANT_OTHER]);
}

bool tenant_in_use(const struct tenant_reg *r, uint32_t id)
{
    return id < tenant_count(r) &&
           atomic_load_explicit(&r->t[id].state, memory_order_acquire) == T_LIVE;
}

uint32_t tenant_count(const struct tenant_reg *r)
{
    return atomic_load_explicit(&((struct tenant_reg *)(uintptr_t)r)->count, memory_order_acquire);
}

enum tier_io_class tenant_class(const struct tenant_reg *r, uint32_t id)
{
    uint32_t n = tenant_count(r);
    struct tenant *t = &r->t[id < n ? id : TIER_TENANT_OTHER];
    return (enum tier_io_class)atomic_load_explicit(&t->cls, memory_order_relaxed);
}

bool tenant_implicit(const struct tenant_reg *r, uint32_t id)
{
    uint32_t n = tenant_count(r);
    return id < n && atomic_load_explicit(&r->t[id].implicit, memory_order_relaxed);
}

uint32_t tenant_max(const struct tenant_reg *r)
{
    return r->max;
}

uint32_t tenant_id_limit(const struct tenant_reg *r)
{
    return r->nids;
}

size_t tenant_rules(struct tenant_reg *r, uint32_t id, struct tenant_rule *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->nrules; i++) {
        const struct rule *ru = r->rules[i];
        if (ru->tenant != id)
            continue;
        if (n < max) {
            struct tenant_rule *o = &out[n];
            memset(o, 0, sizeof(*o));
            o->tenant = tname(&r->t[id]);
            o->cls = (enum tier_io_class)atomic_load_explicit(&r->t[id].cls, memory_order_relaxed);
            o->slurm_job = ru->slurm_job;
            o->cgroup_prefix = ru->cgroup_prefix;
            o->has_uid = ru->has_uid;
            o->uid = ru->uid;
            o->has_gid = ru->has_gid;
            o->gid = ru->gid;
        }
        n++;
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}

void tenant_stats_get(struct tenant_reg *r, struct tenant_stats *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&r->lock);
    out->folded = r->folded;
    out->rate_folded = r->rate_folded;
    out->env_ignored = r->env_ignored;
    out->uid_mismatch = r->uid_mismatch;
    out->job_owners = r->own_used;
    out->reclaimed = r->reclaimed;
    out->ids_free = r->nfree;
    pthread_mutex_unlock(&r->lock);
    for (uint32_t i = 0; i < r->nshards; i++) {
        struct shard *s = &r->sh[i];
        pthread_mutex_lock(&s->lock);
        out->cache_hits += s->hits;
        out->cache_misses += s->misses;
        out->cache_evictions += s->evictions;
        out->cache_entries += s->cused;
        out->cache_pidfds += s->fdused;
        pthread_mutex_unlock(&s->lock);
    }
}

/* ---- reclaim (DESIGN "Reclaim") ---------------------------------------------------------- */

void tenant_hold(struct tenant_reg *r, uint32_t id)
{
    if (r && id < tenant_count(r))
        atomic_fetch_add_explicit(&r->t[id].holds, 1, memory_order_relaxed);
}

void tenant_unhold(struct tenant_reg *r, uint32_t id)
{
    if (r && id < tenant_count(r))
        atomic_fetch_sub_explicit(&r->t[id].holds, 1, memory_order_relaxed);
}

/* Used since the last look: resolved, found, or holding an open handle. Under lock. */
static bool used_since_look(struct tenant *t)
{
    return atomic_load_explicit(&t->touched, memory_order_relaxed) ||
           atomic_load_explicit(&t->holds, memory_order_relaxed) > 0;
}

void tenant_reclaim_hooks_set(struct tenant_reg *r, const struct tenant_reclaim_hooks *h)
{
    pthread_mutex_lock(&r->lock);
    r->hooks = h ? *h : (struct tenant_reclaim_hooks){0};
    pthread_mutex_unlock(&r->lock);
}

/* Under lock: the name index rebuilt from the live ids (a retired name leaves it; open
 * addressing has no cheap delete, and a sweep that retires anything is rare). */
static void index_rebuild_locked(struct tenant_reg *r)
{
    memset(r->name_idx, 0, ((size_t)r->name_mask + 1) * sizeof(*r->name_idx));
    uint32_t n = atomic_load_explicit(&r->count, memory_order_relaxed);
    for (uint32_t id = 0; id < n; id++)
        if (atomic_load_explicit(&r->t[id].state, memory_order_relaxed) == T_LIVE)
            index_put(r, id);
}

/* What a sweep may do to an id, decided under the lock, checked against the hooks outside it. */
struct cand {
    uint32_t id;
    int from; /* T_LIVE (retire) or T_QUARANTINE (free) */
    bool busy;
};

/* Under lock: candidates (c[0..nc), by id ascending) a rule sends callers to are kept (busy):
 * the rule would send them to the id's next tenant. One pass over the rules. */
static void cand_mark_ruled_locked(const struct tenant_reg *r, struct cand *c, size_t nc)
{
    for (size_t i = 0; i < r->nrules && nc; i++) {
        uint32_t id = r->rules[i]->tenant;
        size_t lo = 0, hi = nc;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (c[mid].id < id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < nc && c[lo].id == id)
            c[lo].busy = true;
    }
}

size_t tenant_reclaim(struct tenant_reg *r)
{
    if (!r || !r->idle_s)
        return 0;
    uint64_t now = r->now_s();
    uint64_t step = r->idle_s / 4 ? r->idle_s / 4 : 1;
    atomic_store_explicit(&r->next_sweep_s, now + step, memory_order_relaxed);
    pthread_mutex_lock(&r->lock);
    struct tenant_reclaim_hooks h = r->hooks;
    uint32_t n = atomic_load_explicit(&r->count, memory_order_relaxed);
    struct cand *c = h.busy && !r->sweeping ? malloc((size_t)n * sizeof(*c)) : NULL;
    size_t nc = 0;
    for (uint32_t id = TENANT_RETIRED_ID + 1; c && id < n; id++) {
        struct tenant *t = &r->t[id];
        int st = atomic_load_explicit(&t->state, memory_order_relaxed);
        /* a touch since the last sweep restarts the idle period, in quarantine too: an id is
         * freed only a whole idle period after the last request that was given it */
        if (st != T_FREE && (atomic_exchange_explicit(&t->touched, false, memory_order_relaxed) ||
                             atomic_load_explicit(&t->holds, memory_order_relaxed) > 0))
            t->since_s = now;
        bool idle = now >= t->since_s && now - t->since_s >= r->idle_s;
        if (idle && ((st == T_LIVE && atomic_load_explicit(&t->implicit, memory_order_relaxed)) ||
                     st == T_QUARANTINE))
            c[nc++] = (struct cand){.id = id, .from = st};
    }
    cand_mark_ruled_locked(r, c, nc);
    r->sweeping = c != NULL;
    pthread_mutex_unlock(&r->lock);
    if (!c)
        return 0;
    /* the holdings are asked without the registry lock (the hooks take the cache's and the
     * hints' locks); a hold taken after the answer is the race DESIGN bounds by the quarantine */
    for (size_t i = 0; i < nc; i++) {
        if (!c[i].busy)
            c[i].busy = h.busy(h.ud, c[i].id);
        /* an id leaving quarantine is folded (what was recorded in quarantine) before it is
         * free: once free, a new tenant may take it and record at once */
        if (!c[i].busy && c[i].from == T_QUARANTINE && h.retire)
            h.retire(h.ud, c[i].id);
    }
    size_t retired = 0;
    pthread_mutex_lock(&r->lock);
    cand_mark_ruled_locked(r, c, nc); /* a rule added meanwhile */
    for (size_t i = 0; i < nc; i++) {
        struct tenant *t = &r->t[c[i].id];
        /* touched or opened while the hooks were asked: used, not idle; registered meanwhile
         * (tenant_register of its name: no longer implicit, perhaps named by a new rule): kept */
        if (c[i].busy || used_since_look(t) ||
            atomic_load_explicit(&t->state, memory_order_relaxed) != c[i].from ||
            (c[i].from == T_LIVE && !atomic_load_explicit(&t->implicit, memory_order_relaxed))) {
            c[i].busy = true;
            continue;
        }
        if (c[i].from == T_LIVE) {
            atomic_store_explicit(&t->state, T_QUARANTINE, memory_order_release);
            t->since_s = now;
            if (strncmp(tname(t), "uid-", 4) == 0 && r->uid_count > 0)
                r->uid_count--;
            r->reclaimed++;
            retired++;
        } else {
            atomic_store_explicit(&t->state, T_FREE, memory_order_release);
            r->freel[r->nfree++] = c[i].id;
        }
    }
    if (retired) {
        index_rebuild_locked(r);
        gen_bump(r); /* no cached pid answers a retired id again */
    }
    r->sweeping = false;
    pthread_mutex_unlock(&r->lock);
    /* fold at retirement (the id is not handed out before it leaves quarantine) */
    for (size_t i = 0; i < nc; i++)
        if (!c[i].busy && c[i].from == T_LIVE && h.retire)
            h.retire(h.ud, c[i].id);
    for (size_t i = 0; i < nc; i++)
        if (!c[i].busy && c[i].from == T_LIVE)
            log_info("tenants: '%s' (id %u) idle for %llu s and holding nothing: reclaimed, its "
                     "counters folded into '%s'",
                     tname(&r->t[c[i].id]), (unsigned)c[i].id, (unsigned long long)r->idle_s,
                     TENANT_RETIRED_NAME);
    free(c);
    return retired;
}

/* ---- the pid cache (each function under its shard's lock unless said) ------------------- */

/* Without a lock. */
static struct shard *shard_of(const struct tenant_reg *r, pid_t pid)
{
    return &r->sh[(uint32_t)pid & (r->nshards - 1)];
}

static uint32_t pid_bucket(const struct tenant_reg *r, const struct shard *s, pid_t pid)
{
    /* the low bits chose the shard; hash the rest */
    uint32_t h = ((uint32_t)pid / r->nshards) * 2654435761u;
    return s->bshift >= 32 ? 0 : h >> s->bshift;
}

static int32_t cache_find(const struct tenant_reg *r, const struct shard *s, pid_t pid)
{
    for (int32_t i = s->bucket[pid_bucket(r, s, pid)]; i >= 0; i = s->ce[i].next)
        if (s->ce[i].pid == pid)
            return i;
    return -1;
}

static void cache_unlink(const struct tenant_reg *r, struct shard *s, int32_t slot)
{
    int32_t *pp = &s->bucket[pid_bucket(r, s, s->ce[slot].pid)];
    while (*pp >= 0 && *pp != slot)
        pp = &s->ce[*pp].next;
    if (*pp == slot)
        *pp = s->ce[slot].next;
}

/* The pidfd of slot, taken out of the entry (-1: it had none): the caller closes it with
 * pidfd_drop once the lock is released. */
static int take_pidfd(struct shard *s, int32_t slot)
{
    int fd = s->ce[slot].pidfd;
    if (fd >= 0) {
        s->ce[slot].pidfd = -1;
        s->fdused--;
    }
    return fd;
}

/* Free slot (its process exited); its pidfd, for pidfd_drop. */
static int cache_drop(const struct tenant_reg *r, struct shard *s, int32_t slot)
{
    int fd = take_pidfd(s, slot);
    cache_unlink(r, s, slot);
    s->ce[slot].pid = 0;
    s->cused--;
    return fd;
}

/* Is slot one of the fdmax slots of the ring filled last (those that may hold a pidfd)? */
static bool in_fd_window(const struct shard *s, int32_t slot)
{
    uint32_t back = (s->cnext + s->cmax - 1 - (uint32_t)slot) % s->cmax;
    return back < s->fdmax;
}

/* Fill the entry of pid. *pidfd (registered under token seq; -1: none) is taken into the entry
 * when its slot lies in the pidfd window (then *pidfd becomes -1); the pidfds that leave entries
 * go to drop[0..1] (-1: none), for the caller to pidfd_drop after the lock. */
static void cache_put(const struct tenant_reg *r, struct shard *s, pid_t pid, uint64_t start,
                      uid_t uid, gid_t gid, uint64_t gen, uint32_t tenant, int *pidfd, uint32_t seq,
                      int drop[2])
{
    drop[0] = drop[1] = -1;
    int32_t slot = cache_find(r, s, pid);
    if (slot < 0) {
        slot = (int32_t)s->cnext;
        s->cnext = (s->cnext + 1) % s->cmax;
        if (s->ce[slot].pid != 0) {
            drop[0] = take_pidfd(s, slot);
            cache_unlink(r, s, slot);
            s->evictions++;
        } else {
            s->cused++;
        }
        uint32_t b = pid_bucket(r, s, pid);
        s->ce[slot].next = s->bucket[b];
        s->bucket[b] = slot;
        s->ce[slot].pid = pid;
        /* the window moved by one slot: the slot filled fdmax fills ago leaves it, and keeps
         * its entry, checked by start time from now on */
        if (s->fdmax > 0 && s->fdmax < s->cmax)
            drop[1] = take_pidfd(s, (int32_t)(((uint32_t)slot + s->cmax - s->fdmax) % s->cmax));
    } else {
        drop[0] = take_pidfd(s, slot); /* a refill: the fresh pidfd, if any, replaces it */
    }
    struct centry *e = &s->ce[slot];
    e->start = start;
    e->uid = uid;
    e->gid = gid;
    e->gen = gen;
    e->tenant = tenant;
    if (*pidfd >= 0 && in_fd_window(s, slot)) {
        e->pidfd = *pidfd;
        e->seq = seq;
        s->fdused++;
        *pidfd = -1;
    }
}

/* ---- pidfds (without a lock) ------------------------------------------------------------- */

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* Linux 6.9: a pidfd for a thread that leads no thread group */
#endif

/* A pidfd for pid (a thread id, as FUSE gives it), or -1 when there is none to have: a kernel
 * without pidfd_open (before 5.3), a thread that leads no thread group on a kernel without
 * PIDFD_THREAD (before 6.9), a process gone, no fd left. The caller then checks the entry by
 * start time, as before pidfds. */
static int pidfd_get(struct tenant_reg *r, pid_t pid)
{
    if (r->epfd < 0 || atomic_load_explicit(&r->no_pidfd_open, memory_order_relaxed))
        return -1;
    int fd = pidfd_open(pid, 0);
    /* a thread that is not its group's leader: EINVAL before Linux 6.9, ENOENT since */
    if (fd < 0 && (errno == EINVAL || errno == ENOENT))
        fd = pidfd_open(pid, PIDFD_THREAD);
    if (fd < 0 && errno == ENOSYS)
        atomic_store_explicit(&r->no_pidfd_open, true, memory_order_relaxed);
    return fd;
}

/* Has the process (or, for a thread pidfd, the thread) of pidfd exited? POLLIN says so; an
 * error (not expected) is taken as yes, which costs only a miss. */
static bool pidfd_exited(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    int n;
    do
        n = poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    return n != 0;
}

static uint64_t token_of(pid_t pid, uint32_t seq)
{
    return (uint64_t)seq << 32 | (uint32_t)pid;
}

/* Register pidfd in the epoll set: 0 and its token's seq, or -1 (then the entry goes without). */
static int pidfd_watch(struct tenant_reg *r, int pidfd, pid_t pid, uint32_t *seq)
{
    uint32_t q = atomic_fetch_add_explicit(&r->seq, 1, memory_order_relaxed);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = token_of(pid, q)};
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, pidfd, &ev) != 0)
        return -1;
    *seq = q;
    return 0;
}

/* Unregister and close a pidfd taken out of its entry (or never put in one). The explicit DEL:
 * a child tierd forked would otherwise keep the registration alive until it execs. */
static void pidfd_drop(struct tenant_reg *r, int pidfd)
{
    if (pidfd < 0)
        return;
    (void)epoll_ctl(r->epfd, EPOLL_CTL_DEL, pidfd, NULL);
    close(pidfd);
}

#define REAP_BATCH 64
#define REAP_ROUNDS 8

/* Drop the entries whose process exited: the epoll set reports each such pidfd (level-
 * triggered: until it is unregistered) and nothing when none did, in one system call without
 * a lock. true when every ready pidfd was seen; false (an epoll error, or more exits at once
 * than REAP_ROUNDS batches) tells the caller to poll an entry's pidfd itself. */
static bool reap_exited(struct tenant_reg *r)
{
    struct epoll_event ev[REAP_BATCH];
    for (int round = 0; round < REAP_ROUNDS; round++) {
        int n = epoll_wait(r->epfd, ev, REAP_BATCH, 0);
        if (n < 0)
            return false;
        for (int i = 0; i < n; i++) {
            pid_t pid = (pid_t)(uint32_t)ev[i].data.u64;
            uint32_t seq = (uint32_t)(ev[i].data.u64 >> 32);
            struct shard *s = shard_of(r, pid);
            int fd = -1;
            pthread_mutex_lock(&s->lock);
            int32_t slot = cache_find(r, s, pid);
            /* another thread may have dropped it, or the pid's entry be a newer one */
            if (slot >= 0 && s->ce[slot].pidfd >= 0 && s->ce[slot].seq == seq)
                fd = cache_drop(r, s, slot);
            pthread_mutex_unlock(&s->lock);
            pidfd_drop(r, fd);
        }
        if (n < REAP_BATCH)
            return true;
    }
    return false;
}

/* ---- resolution ------------------------------------------------------------------------ */

struct facts {
    bool has_cgroup;
    struct tenant_origin_id cg;
    bool has_job;
    bool job_from_env; /* has_job from SLURM_JOB_ID, not from the cgroup */
    char job[TENANT_NAME_MAX];
    bool has_pod;
    char pod[TENANT_NAME_MAX];
};

/* Read at most cap bytes of path; -EFBIG when the file holds cap bytes or more. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    size_t got = 0;
    while (got < cap) {
        ssize_t k = read(fd, buf + got, cap - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    return got == cap ? -EFBIG : (ssize_t)got;
}

static int proc_path(const struct tenant_reg *r, pid_t pid, const char *file, char *out,
                     size_t outsz)
{
    int n = snprintf(out, outsz, "%s/%d/%s", r->proc_root, (int)pid, file);
    return n > 0 && (size_t)n < outsz ? 0 : -ENAMETOOLONG;
}

/* Field 22 of /proc/<pid>/stat: the process's start time in clock ticks after boot. */
static int read_starttime(const struct tenant_reg *r, pid_t pid, uint64_t *start)
{
    char path[4200], buf[1024];
    int rc = proc_path(r, pid, "stat", path, sizeof(path));
    if (rc)
        return rc;
    ssize_t n = read_small(path, buf, sizeof(buf) - 1);
    if (n < 0)
        return (int)n;
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and ')', so start after the last ')' */
    char *p = strrchr(buf, ')');
    if (!p)
        return -EINVAL;
    p++;
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (*p == '\0')
            return -EINVAL;
        if (field == 22) {
            uint64_t v = 0;
            size_t k = 0;
            for (; p[k] >= '0' && p[k] <= '9' && k < 20; k++)
                v = v * 10 + (uint64_t)(p[k] - '0');
            if (k == 0 || (p[k] != ' ' && p[k] != '\0' && p[k] != '\n'))
                return -EINVAL;
            *start = v;
            return 0;
        }
        while (*p && *p != ' ')
            p++;
    }
    return -EINVAL;
}

static void read_environ_job(const struct tenant_reg *r, pid_t pid, struct facts *f)
{
    char path[4200], buf[4096];
    if (proc_path(r, pid, "environ", path, sizeof(path)))
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return; /* gone, or not ours to read (another user's process, tierd not root) */
    struct env_scan s = {.rc = -ENOENT};
    while (!s.done) {
        ssize_t k = read(fd, buf, sizeof(buf));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        env_feed(&s, buf, (size_t)k);
    }
    close(fd);
    env_finish(&s);
    if (s.rc == 0) {
        f->has_job = true;
        f->job_from_env = true;
        memcpy(f->job, s.job, sizeof(f->job));
    }
}

/* The facts /proc holds on pid. Without the lock: file I/O. */
static void gather(const struct tenant_reg *r, pid_t pid, struct facts *f)
{
    memset(f, 0, sizeof(*f));
    char path[4200];
    char *buf = malloc(CGROUP_FILE_MAX);
    if (buf && proc_path(r, pid, "cgroup", path, sizeof(path)) == 0) {
        ssize_t n = read_small(path, buf, CGROUP_FILE_MAX);
        if (n >= 0 && tenant_parse_cgroup(buf, (size_t)n, r->slurm_root, &f->cg) == 0) {
            f->has_cgroup = f->cg.cgroup[0] != '\0';
            if (f->cg.origin == TENANT_ORIGIN_SLURM) {
                f->has_job = true;
                memcpy(f->job, f->cg.id, sizeof(f->job));
            } else if (f->cg.origin == TENANT_ORIGIN_K8S) {
                f->has_pod = true;
                memcpy(f->pod, f->cg.id, sizeof(f->pod));
            }
        }
    }
    free(buf);
    if (!f->has_job)
        read_environ_job(r, pid, f);
}

/* A path that starts with "/.." lies outside tierd's own cgroup namespace (tierd in a container
 * with a private one): no anchored pattern can match it. Logged once. */
static void ns_check(struct tenant_reg *r, const char *path)
{
    if (strncmp(path, "/..", 3) != 0 || (path[3] != '/' && path[3] != '\0'))
        return;
    if (atomic_exchange(&r->ns_logged, true))
        return;
    log_warn("tenants: tierd sees cgroup paths relative to its own cgroup namespace (%.200s): "
             "jobs and pods are not recognised; run tierd in the host cgroup namespace "
             "(docs/KUBERNETES.md: hostPID and cgroupns host)",
             path);
}

/* tierd's cgroup namespace, checked once at start: inside a private one its own path reads "/",
 * so the namespace itself is compared with pid 1's (the host's init where tierd has the host's
 * pid namespace, which it needs to see its callers' pids at all); then its own path, which
 * starts with "/.." where it was moved out of its namespace's root. */
static void ns_check_self(struct tenant_reg *r)
{
    char path[4200], init[4200];
    struct stat a, b;
    if (snprintf(path, sizeof(path), "%s/self/ns/cgroup", r->proc_root) < (int)sizeof(path) &&
        snprintf(init, sizeof(init), "%s/1/ns/cgroup", r->proc_root) < (int)sizeof(init) &&
        stat(path, &a) == 0 && stat(init, &b) == 0 &&
        (a.st_ino != b.st_ino || a.st_dev != b.st_dev)) {
        if (!atomic_exchange(&r->ns_logged, true))
            log_warn(
                "tenants: tierd runs in a cgroup namespace of its own (not pid 1's): it sees "
                "cgroup paths relative to it, so jobs and pods are not recognised; run tierd "
                "in the host cgroup namespace (docs/KUBERNETES.md: hostPID and cgroupns host)");
        return;
    }
    if (snprintf(path, sizeof(path), "%s/self/cgroup", r->proc_root) >= (int)sizeof(path))
        return;
    char *buf = malloc(CGROUP_FILE_MAX);
    struct tenant_origin_id *cg = malloc(sizeof(*cg));
    if (buf && cg) {
        ssize_t n = read_small(path, buf, CGROUP_FILE_MAX);
        if (n >= 0 && tenant_parse_cgroup(buf, (size_t)n, r->slurm_root, cg) == 0)
            ns_check(r, cg->cgroup);
    }
    free(cg);
    free(buf);
}

static bool prefix_match(const struct rule *ru, const struct facts *f)
{
    if (!f->has_cgroup)
        return false;
    const char *p = f->cg.cgroup;
    size_t n = ru->prefix_len;
    if (n == 1) /* "/" */
        return true;
    return strncmp(p, ru->cgroup_prefix, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

static bool rule_match(const struct rule *ru, const struct facts *f, uid_t uid, gid_t gid)
{
    if (ru->slurm_job && !(f->has_job && strcmp(ru->slurm_job, f->job) == 0))
        return false;
    if (ru->cgroup_prefix && !prefix_match(ru, f))
        return false;
    if (ru->has_uid && ru->uid != uid)
        return false;
    if (ru->has_gid && ru->gid != gid)
        return false;
    return true;
}

/* Something decide_locked found worth a log line, written by the caller after the lock. */
enum note_kind { NOTE_NONE = 0, NOTE_ENV, NOTE_UID, NOTE_RATE, NOTE_UIDS };
struct note {
    enum note_kind kind;
    uid_t uid;    /* the caller's */
    uid_t cg_uid; /* NOTE_UID: the uid_<u> of the cgroup */
    char job[JOB_ID_MAX + 1];
    char name[TENANT_NAME_MAX]; /* NOTE_RATE: the tenant refused */
};

/* Under lock: true the first time (kind, uid, job) is seen (while its slot of the direct-mapped
 * table keeps it). */
static bool noted_first(struct tenant_reg *r, enum note_kind kind, uid_t uid, const char *job)
{
    uint32_t h =
        (name_hash(job) ^ ((uint32_t)uid * 2654435761u) ^ (uint32_t)kind) & (NOTED_MAX - 1);
    struct noted *n = &r->noted[h];
    if (n->kind == (uint8_t)kind && n->uid == uid && strcmp(n->job, job) == 0)
        return false;
    n->kind = (uint8_t)kind;
    n->uid = uid;
    tier_strlcpy(n->job, job, sizeof(n->job));
    return true;
}

/* Under lock: may uid create one more job or pod tenant now? Counts it when yes; *log tells
 * the first refusal of the uid's current window. */
static bool rate_take(struct tenant_reg *r, uid_t uid, bool *log)
{
    *log = false;
    if (r->per_minute == 0)
        return true;
    uint64_t now = r->now_s();
    struct rate *e = NULL;
    for (uint32_t i = 0; i < RATE_UIDS && !e; i++)
        if (r->rate[i].used && r->rate[i].uid == uid)
            e = &r->rate[i];
    if (!e) { /* a new uid takes the ring's oldest slot */
        e = &r->rate[r->rate_next];
        r->rate_next = (r->rate_next + 1) % RATE_UIDS;
        *e = (struct rate){.used = true, .uid = uid, .window_s = now};
    }
    if (now - e->window_s >= RATE_WINDOW_S || now < e->window_s)
        *e = (struct rate){.used = true, .uid = uid, .window_s = now};
    if (e->n < r->per_minute) {
        e->n++;
        return true;
    }
    *log = !e->logged;
    e->logged = true;
    return false;
}

/* Under lock: the implicit tenant prefix+id, created when missing and there is room in the
 * implicit share (and, when rated, within uid's rate). */
static uint32_t implicit_locked(struct tenant_reg *r, const char *prefix, const char *id,
                                bool rated, uid_t uid, struct note *note)
{
    char name[TENANT_NAME_MAX];
    int w = snprintf(name, sizeof(name), "%s%s", prefix, id);
    if (w < 0 || (size_t)w >= sizeof(name) || !tenant_name_valid(name))
        return TIER_TENANT_DEFAULT; /* cannot happen: the parsers bound the ids */
    uint32_t tid = 0;
    if (find_locked(r, name, &tid) == 0)
        return tid;
    if (used_locked(r) >= r->implicit_max) {
        r->folded++;
        return TIER_TENANT_OTHER;
    }
    bool log = false;
    if (rated && !rate_take(r, uid, &log)) {
        r->folded++;
        r->rate_folded++;
        if (log) {
            note->kind = NOTE_RATE;
            note->uid = uid;
            tier_strlcpy(note->name, name, sizeof(note->name));
        }
        return TIER_TENANT_OTHER;
    }
    return create_locked(r, name, TIER_IO_TRAINING, true);
}

/* Under lock: which of the facts are trusted for a caller of uid (DESIGN, "Trust"). Drops a job
 * that is not the caller's, and records the owner of a job a trusted cgroup names. */
static void vet_locked(struct tenant_reg *r, struct facts *f, uid_t uid, struct note *note)
{
    if (!f->has_job)
        return;
    if (f->job_from_env) {
        int32_t slot = owner_find(r, f->job);
        if (slot >= 0 && r->own[slot].uid == uid && !r->own[slot].conflict)
            return;
        f->has_job = false;
        r->env_ignored++;
        if (noted_first(r, NOTE_ENV, uid, f->job)) {
            note->kind = NOTE_ENV;
            note->uid = uid;
            tier_strlcpy(note->job, f->job, sizeof(note->job));
        }
        return;
    }
    if (f->cg.has_job_uid && f->cg.job_uid != uid) {
        f->has_job = false;
        r->uid_mismatch++;
        if (noted_first(r, NOTE_UID, uid, f->job)) {
            note->kind = NOTE_UID;
            note->uid = uid;
            note->cg_uid = f->cg.job_uid;
            tier_strlcpy(note->job, f->job, sizeof(note->job));
        }
        return;
    }
    /* only a /slurm/uid_<u>/job_<id> path names the owner (root-made, <u> is the caller's);
     * in a cgroup v2 job_<id> any uid (a setuid program) may run, and the job's processes are
     * the job by their cgroup anyway. Root there is slurmstepd, not the job's user. */
    bool conflict = false;
    if (f->cg.has_job_uid && uid != 0)
        owner_put_locked(r, f->job, uid, true, "", &conflict);
}

/* Under lock. pid_known: a request of a process (pid not 0), whose facts were gathered. */
static uint32_t decide_locked(struct tenant_reg *r, struct facts *f, uid_t uid, gid_t gid,
                              bool pid_known, struct note *note)
{
    vet_locked(r, f, uid, note);
    for (size_t i = 0; i < r->nrules; i++)
        if (rule_match(r->rules[i], f, uid, gid))
            return r->rules[i]->tenant;
    /* a job or pod a root-made cgroup proves is not rated: its user cannot make more of them
     * than the scheduler runs; a job from SLURM_JOB_ID is */
    if (f->has_job)
        return implicit_locked(r, "slurm-", f->job, f->job_from_env, uid, note);
    if (f->has_pod)
        return implicit_locked(r, "k8s-", f->pod, false, uid, note);
    if (!pid_known || uid == 0 || r->fallback_default)
        return TIER_TENANT_DEFAULT;
    char id[16], name[TENANT_NAME_MAX];
    snprintf(id, sizeof(id), "%u", (unsigned)uid);
    snprintf(name, sizeof(name), "uid-%u", (unsigned)uid);
    uint32_t tid = 0;
    if (find_locked(r, name, &tid) == 0)
        return tid;
    if (r->uid_count >= r->uid_max) {
        if (!r->uid_full_logged) {
            r->uid_full_logged = true;
            note->kind = NOTE_UIDS;
            note->uid = uid;
        }
        return TIER_TENANT_DEFAULT;
    }
    tid = implicit_locked(r, "uid-", id, false, uid, note);
    if (tid != TIER_TENANT_OTHER && tid != TIER_TENANT_DEFAULT)
        r->uid_count++;
    return tid;
}

/* The log line of a note, once the registry lock is released. */
static void note_log(const struct tenant_reg *r, const struct note *n)
{
    switch (n->kind) {
    case NOTE_ENV:
        log_warn("tenants: uid %u has SLURM_JOB_ID=%s, but job %s is not known to run as uid %u "
                 "(the Slurm provider registers a job's uid with POST /v1/jobs; its cgroup under "
                 "slurmstepd.scope or /slurm/uid_%u shows it): the variable is ignored (logged "
                 "once per uid and job)",
                 (unsigned)n->uid, n->job, n->job, (unsigned)n->uid, (unsigned)n->uid);
        break;
    case NOTE_UID:
        log_warn("tenants: uid %u is in the cgroup of job %s under uid_%u: not its job, so not "
                 "job %s's tenant (logged once per uid and job)",
                 (unsigned)n->uid, n->job, (unsigned)n->cg_uid, n->job);
        break;
    case NOTE_RATE:
        log_warn("tenants: uid %u created %u job or pod tenants in the last minute ([tenants] "
                 "implicit_per_minute): '%s' and the next ones this minute are counted as 'other'",
                 (unsigned)n->uid, r->per_minute, n->name);
        break;
    case NOTE_UIDS:
        log_warn("tenants: %u uid-<uid> tenants exist, half of the ids implicit tenants may take "
                 "([tenants] max_tenants - reserved_ids): uid %u and every further uid with no "
                 "job are counted as 'default' (logged once)",
                 r->uid_max, (unsigned)n->uid);
        break;
    case NOTE_NONE:
        break;
    }
}

static struct tier_ioctx ioctx_of(const struct tenant_reg *r, uint32_t id)
{
    touch(r, id);
    return (struct tier_ioctx){.tenant = id, .cls = tenant_class(r, id)};
}

enum probe {
    PROBE_MISS,      /* no usable entry: resolve */
    PROBE_HIT,       /* *id answers */
    PROBE_NEED_START /* an entry without a pidfd: call again with the start time */
};

/* Under s->lock: look pid up. An entry with a pidfd is the same process unless reap_exited
 * dropped it (verified) or, when that could not be done, unless its pidfd says it exited; one
 * without is by the start time (NULL: not read yet). Counts the hit or the miss. */
static enum probe probe_locked(struct tenant_reg *r, struct shard *s, pid_t pid, uid_t uid,
                               gid_t gid, const uint64_t *start, bool verified, uint32_t *id,
                               int *drop)
{
    int32_t slot = cache_find(r, s, pid);
    if (slot >= 0) {
        const struct centry *e = &s->ce[slot];
        if (e->pidfd < 0 && !start)
            return PROBE_NEED_START;
        if (e->pidfd >= 0 && !verified && pidfd_exited(e->pidfd)) {
            *drop = cache_drop(r, s, slot);
        } else if ((e->pidfd >= 0 || e->start == *start) && e->uid == uid && e->gid == gid &&
                   e->gen == atomic_load_explicit(&r->gen, memory_order_acquire)) {
            *id = e->tenant;
            s->hits++;
            return PROBE_HIT;
        }
    }
    s->misses++;
    return PROBE_MISS;
}

struct tier_ioctx tenant_resolve(struct tenant_reg *r, pid_t pid, uid_t uid, gid_t gid)
{
    if (!r)
        return TIER_IOCTX_DEFAULT;
    struct facts f;
    memset(&f, 0, sizeof(f));
    struct note note = {.kind = NOTE_NONE};
    uint32_t id = 0;
    if (pid <= 0) {
        pthread_mutex_lock(&r->lock);
        id = decide_locked(r, &f, uid, gid, false, &note);
        pthread_mutex_unlock(&r->lock);
        return ioctx_of(r, id);
    }
    struct shard *s = shard_of(r, pid);
    uint64_t start = 0;
    bool have_start = false, cacheable = true, verified = false;
    if (r->epfd < 0)
        cacheable = have_start = read_starttime(r, pid, &start) == 0;
    else
        verified = reap_exited(r);
    if (!cacheable) {
        pthread_mutex_lock(&s->lock);
        s->misses++;
        pthread_mutex_unlock(&s->lock);
    }
    while (cacheable) {
        int drop = -1;
        pthread_mutex_lock(&s->lock);
        enum probe p =
            probe_locked(r, s, pid, uid, gid, have_start ? &start : NULL, verified, &id, &drop);
        pthread_mutex_unlock(&s->lock);
        pidfd_drop(r, drop);
        if (p == PROBE_HIT)
            return ioctx_of(r, id);
        if (p == PROBE_MISS)
            break;
        cacheable = have_start = read_starttime(r, pid, &start) == 0;
        if (!cacheable) { /* gone: counted as a miss like any other */
            pthread_mutex_lock(&s->lock);
            s->misses++;
            pthread_mutex_unlock(&s->lock);
        }
    }
    /* A miss. With a pidfd, opened before the start time is read: if its process is still
     * alive after the second read below, the pid belonged to it all along, so the start time
     * and the facts are its own. */
    int pidfd = cacheable ? pidfd_get(r, pid) : -1;
    if (cacheable && (pidfd >= 0 || !have_start) && read_starttime(r, pid, &start) != 0)
        cacheable = false;
    gather(r, pid, &f);
    if (f.has_cgroup)
        ns_check(r, f.cg.cgroup);
    /* the pid may have been reused while its files were read: then the facts may be of
     * another process, good enough for this request but not to remember */
    uint64_t again = 0;
    if (cacheable && (read_starttime(r, pid, &again) != 0 || again != start))
        cacheable = false;
    if (pidfd >= 0 && cacheable && pidfd_exited(pidfd))
        cacheable = false; /* exited (a zombie's files still read): it makes no more requests */
    uint32_t seq = 0;
    if (pidfd >= 0 && (!cacheable || pidfd_watch(r, pidfd, pid, &seq) != 0)) {
        close(pidfd);
        pidfd = -1;
    }
    /* the sweep rides on misses: a new process is when an id may be wanted (DESIGN) */
    if (r->idle_s && r->now_s() >= atomic_load_explicit(&r->next_sweep_s, memory_order_relaxed))
        (void)tenant_reclaim(r);
    pthread_mutex_lock(&r->lock);
    id = decide_locked(r, &f, uid, gid, true, &note);
    uint64_t gen = atomic_load_explicit(&r->gen, memory_order_relaxed);
    pthread_mutex_unlock(&r->lock);
    note_log(r, &note);
    if (cacheable) {
        int drop[2];
        pthread_mutex_lock(&s->lock);
        cache_put(r, s, pid, start, uid, gid, gen, id, &pidfd, seq, drop);
        pthread_mutex_unlock(&s->lock);
        pidfd_drop(r, drop[0]);
        pidfd_drop(r, drop[1]);
        pidfd_drop(r, pidfd); /* not taken: its slot is outside the pidfd window */
    }
    return ioctx_of(r, id);
}
