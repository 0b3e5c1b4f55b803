/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant_resolve.c - the resolution of a FUSE caller to a tenant (tenant_resolve): the pid
 * cache, its pidfds, the /proc reads of the miss path and the rules. The registry it answers
 * from is tenant.c; its three tables are described at the top of tenant.c.
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
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "tenant/tenant_int.h"

/* Biggest /proc/<pid>/cgroup read; a larger file (not seen on any kernel) names nothing. */
#define CGROUP_FILE_MAX (64 * 1024)

#define RATE_WINDOW_S 60

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
void ns_check_self(struct tenant_reg *r)
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

/* decide_locked's answer in lookup mode for a tenant that would be created */
#define WOULD_CREATE UINT32_MAX

/* Under lock: the implicit tenant prefix+id, created when missing and there is room in the
 * implicit share (and, when rated, within uid's rate). note NULL (a lookup): nothing created
 * or counted; WOULD_CREATE instead of a new tenant, TIER_TENANT_OTHER when the share is full. */
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
        if (note)
            r->folded++;
        return TIER_TENANT_OTHER;
    }
    if (!note)
        return WOULD_CREATE;
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
 * that is not the caller's, and records the owner of a job a trusted cgroup names. note NULL (a
 * lookup): the same judgement, nothing counted or recorded. */
static void vet_locked(struct tenant_reg *r, struct facts *f, uid_t uid, struct note *note)
{
    if (!f->has_job)
        return;
    if (f->job_from_env) {
        int32_t slot = owner_find(r, f->job);
        if (slot >= 0 && r->own[slot].uid == uid && !r->own[slot].conflict)
            return;
        f->has_job = false;
        if (!note)
            return;
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
        if (!note)
            return;
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
    if (note && f->cg.has_job_uid && uid != 0)
        owner_put_locked(r, f->job, uid, true, "", &conflict);
}

/* Under lock. pid_known: a request of a process (pid not 0), whose facts were gathered. note
 * NULL: a lookup (tenant_lookup), which changes nothing and answers WOULD_CREATE for a tenant
 * it would create. */
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
        if (note && !r->uid_full_logged) {
            r->uid_full_logged = true;
            note->kind = NOTE_UIDS;
            note->uid = uid;
        }
        return TIER_TENANT_DEFAULT;
    }
    tid = implicit_locked(r, "uid-", id, false, uid, note);
    if (note && tid != TIER_TENANT_OTHER && tid != TIER_TENANT_DEFAULT)
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

int tenant_lookup(struct tenant_reg *r, pid_t pid, uid_t uid, gid_t gid, uint32_t *id)
{
    if (!r || pid <= 0)
        return -ENOENT;
    struct facts f;
    gather(r, pid, &f);
    pthread_mutex_lock(&r->lock);
    uint32_t tid = decide_locked(r, &f, uid, gid, true, NULL);
    pthread_mutex_unlock(&r->lock);
    if (tid == WOULD_CREATE)
        return -ENOENT;
    *id = tid;
    return 0;
}
