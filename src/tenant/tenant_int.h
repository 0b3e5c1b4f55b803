/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant_int.h - private to src/tenant: the registry's structs (struct tenant_reg, its tenants,
 * rules, pid-cache shards and job-owner entries) and the helpers shared by tenant.c,
 * tenant_parse.c, tenant_reclaim.c and tenant_resolve.c. Each field's lock is noted on it; the
 * design is at the top of tenant.c. The helpers are described at their definitions.
 */
#ifndef TIER_TENANT_TENANT_INT_H
#define TIER_TENANT_TENANT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tenant/tenant.h"

#define JOB_ID_MAX 20 /* digits of a Slurm job id (a 64-bit number) */

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

/* An incremental scan for SLURM_JOB_ID, fed the file in pieces of any size; only the first
 * bytes of each entry are kept. */
struct env_scan {
    char head[48];
    size_t hlen, elen;
    bool done;
    int rc; /* -ENOENT until found */
    char job[TENANT_NAME_MAX];
};

/* tenant.c */
const char *tname(const struct tenant *t);
void touch(const struct tenant_reg *r, uint32_t id);
uint32_t name_hash(const char *s);
int find_locked(const struct tenant_reg *r, const char *name, uint32_t *id);
void index_put(struct tenant_reg *r, uint32_t id);
uint32_t used_locked(const struct tenant_reg *r);
uint32_t create_locked(struct tenant_reg *r, const char *name, enum tier_io_class cls,
                       bool implicit);
int32_t owner_find(const struct tenant_reg *r, const char *job);
void gen_bump(struct tenant_reg *r);
void owner_put_locked(struct tenant_reg *r, const char *job, uid_t uid, bool learnt, const char *by,
                      bool *conflict);

/* tenant_parse.c */
void env_feed(struct env_scan *s, const char *p, size_t n);
void env_finish(struct env_scan *s);

/* tenant_resolve.c */
void ns_check_self(struct tenant_reg *r); /* tierd's own cgroup checked once */

#endif
