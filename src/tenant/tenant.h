/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant.h - who is asking: the tenant registry and the resolution of a FUSE caller (pid, uid,
 * gid) to a tenant.
 *
 * A tenant is a name with a small id (struct tier_ioctx.tenant) and a default class. Ids 0 and 1
 * are always "default" (root's, pid 0's, and with fallback_default every caller nothing names)
 * and "other" (callers refused a new implicit tenant fold here); see common/ioctx.h. With
 * idle_reclaim_s, id 2 is "retired" and an implicit tenant idle that long and holding nothing
 * (the hooks say) is reclaimed: its counters are folded into "retired" (the hooks), its name
 * leaves the registry, and its id is handed out again once a second idle period has passed
 * without a request given it (tenant_reclaim.c DESIGN "Reclaim"). Other ids are never reused.
 *
 * Tenants come from the config ([tenant NAME] sections: match rules + default class), from
 * POST /v1/tenants and POST /v1/jobs (a scheduler registering a job at its start), and
 * implicitly: a Slurm job or Kubernetes pod that matches no rule becomes tenant "slurm-<jobid>" /
 * "k8s-<pod uid>", and a caller with neither "uid-<uid>" (unless fallback_default, and never for
 * uid 0, the administrator's: "default"). Implicit tenants take at most max_tenants -
 * reserved_ids ids, so explicit ones always find one; one uid creates at most
 * implicit_per_minute job or pod tenants a minute (beyond: "other").
 *
 * What is trusted (docs/ARCHITECTURE.md "Tenants"). A caller's uid and gid (the kernel's). Its
 * cgroup, only where users cannot create cgroups: a Slurm job at the start of the path,
 * "/system.slice/slurmstepd.scope/job_<id>[/...]" (cgroup v2), "/slurm/uid_<u>/job_<id>[/...]"
 * (cgroup v1, <u> must be the caller's uid) or under slurm_cgroup_root ("<root>/job_<id>",
 * "<root>/uid_<u>/job_<id>"); a pod under "/kubepods" or "/kubepods.slice" at the top; a
 * systemd unit anywhere (it only serves cgroup prefix rules, which the administrator anchors).
 * Never anything under "/user.slice" by pattern: systemd delegates user@<uid>.service's subtree
 * to the user. SLURM_JOB_ID in /proc/<pid>/environ (the user sets it at will) names a job only
 * when the job-owner table says the job belongs to the caller's uid; the table is filled by the
 * scheduler (tenant_job_owner_set_by: POST /v1/jobs or POST /v1/tenants with "uid") and learnt
 * from a "/slurm/uid_<u>/job_<id>" cgroup seen with its own uid <u> (not 0); a cgroup v2 job
 * path names no uid and teaches nothing. Otherwise the variable is ignored and logged once per
 * (uid, job). A cgroup path starting with "/.." (tierd in a private cgroup namespace) matches
 * no anchor: logged once.
 *
 * Resolution of a caller, in order: the process's cgroup (above), then SLURM_JOB_ID when the
 * cgroup named no job; these facts and the caller's uid and gid go through the rules (slurm job,
 * cgroup path prefix, uid, gid) in order, the first match naming the tenant; a job or pod no
 * rule matched becomes its implicit tenant (or "other" when its share of the registry is full or,
 * for a job named by SLURM_JOB_ID, the uid's rate is spent); else "uid-<uid>" ("default" for
 * uid 0, with fallback_default, or when uid tenants hold half of the implicit share; "other"
 * when the implicit share is full). A systemd unit alone creates no tenant: its path only
 * serves cgroup prefix rules.
 * Results are cached per pid, bounded, and a reused pid is never attributed to the old
 * process's tenant: a cached entry holds a pidfd of its process (the entries filled last, up to
 * pidfd_max), and a hit needs that process not to have exited, which one epoll_wait over all of
 * them tells; an entry without a pidfd is checked by the process start time read again from
 * /proc/<pid>/stat (tenant_resolve.c DESIGN). pid 0 (a request the kernel makes on nobody's behalf)
 * is resolved by the uid and gid rules alone, uncached ("default" when none matches).
 *
 * Thread-safe; tenant_resolve takes a pid-cache shard's lock for the lookup and the insert and
 * the registry lock to match the rules (the /proc reads and system calls are done outside
 * both). tenant_name, tenant_class, tenant_count and tenant_implicit take no lock (the tenant
 * table is allocated once, entries are published with an atomic count). The registry holds up
 * to pidfd_max + 1 file descriptors (the pidfds and their epoll set), all close-on-exec.
 *
 * A cached result also records the caller's uid and gid and the rule generation (bumped by every
 * rule added and every change of the job-owner table), so a process that changed its uid, or a
 * rule or job owner registered after a process was first seen, is resolved again.
 */
#ifndef TIER_TENANT_TENANT_H
#define TIER_TENANT_TENANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/ioctx.h"

#define TENANT_NAME_MAX 64 /* bytes including NUL */

struct tenant_reg;

/* What a cgroup path or an environment names (pure parsing, for tests and the resolver). */
enum tenant_origin {
    TENANT_ORIGIN_NONE = 0,
    TENANT_ORIGIN_SLURM = 1,   /* id: the job id */
    TENANT_ORIGIN_K8S = 2,     /* id: the pod uid */
    TENANT_ORIGIN_SYSTEMD = 3, /* id: the unit name (foo.service, foo.scope) */
};
#define TENANT_CGROUP_MAX 512 /* bytes kept of a cgroup path, NUL included */
/* Longest cgroup_prefix of a rule, NUL included: shorter than TENANT_CGROUP_MAX, so a prefix
 * compares exactly against a path cut to TENANT_CGROUP_MAX - 1 bytes. */
#define TENANT_CGROUP_PREFIX_MAX 256
/* Longest path of one line of a cgroup file (the kernel's PATH_MAX); longer: not a cgroup file. */
#define TENANT_CGROUP_PATH_MAX 4096

struct tenant_origin_id {
    enum tenant_origin origin;
    char id[TENANT_NAME_MAX];
    /* The path that named it (the v2 path, or the v1 line's path); with origin NONE the v2 path
     * ("0::" line), else the name=systemd line's, else the first line's; "" for an empty file.
     * Cut to TENANT_CGROUP_MAX - 1 bytes (cgroup_truncated): prefix rules still compare exactly,
     * see TENANT_CGROUP_PREFIX_MAX. */
    char cgroup[TENANT_CGROUP_MAX];
    bool cgroup_truncated;
    /* origin SLURM from ".../uid_<u>/job_<id>": <u>, which the resolver requires to be the
     * caller's uid */
    bool has_job_uid;
    uid_t job_uid;
};

/* Parse the text of /proc/<pid>/cgroup (len bytes, need not be NUL-terminated). slurm_root
 * (NULL: none) is a configured Slurm cgroup root (see above). 0 with *out filled (origin NONE
 * when nothing is named), or -EINVAL for text that is not a cgroup file (a line that is not
 * "ID:CONTROLLERS:/PATH", a NUL byte, a path over TENANT_CGROUP_PATH_MAX). When several lines
 * name something, a Slurm job or a pod wins over a systemd unit, and an earlier line over a
 * later one of the same kind. Pure: no uid is checked here (has_job_uid tells the resolver). */
int tenant_parse_cgroup(const char *text, size_t len, const char *slurm_root,
                        struct tenant_origin_id *out);
/* Find SLURM_JOB_ID in the text of /proc/<pid>/environ (NUL-separated; the last entry need not
 * be terminated). 0 and the id in job[TENANT_NAME_MAX]; -ENOENT when absent; -EINVAL when its
 * value is not a job id (1 to 20 digits). The first SLURM_JOB_ID counts. */
int tenant_parse_environ(const char *text, size_t len, char *job);
/* The filesystem uid and gid (the fourth field of the "Uid:" and "Gid:" lines: what FUSE
 * reports of a caller) in the text of /proc/<pid>/status (len bytes, need not be NUL-
 * terminated). 0 and both; -EINVAL when a line is missing, has fewer than four decimal fields,
 * or a value above UINT32_MAX - 1 ((uid_t)-1 is no uid). The first line of each counts. */
int tenant_parse_status(const char *text, size_t len, uid_t *fsuid, gid_t *fsgid);

/* Is name a tenant name: 1..63 bytes of [A-Za-z0-9._-]? */
bool tenant_name_valid(const char *name);
/* Is s a Slurm job id as rules and the parsers take it: 1 to 20 digits, no leading zero? */
bool tenant_job_valid(const char *s);
/* NULL when prefix is a valid cgroup_prefix (starts with '/', shorter than
 * TENANT_CGROUP_PREFIX_MAX, no control characters), else what is wrong with it. */
const char *tenant_cgroup_prefix_problem(const char *prefix);

#define TENANT_MAX_TENANTS_DEFAULT 64
#define TENANT_MAX_TENANTS_LIMIT 65536
_Static_assert(TENANT_MAX_TENANTS_LIMIT + 1 == TIER_TENANT_IDS_MAX,
               "the id limit (tenant_id_limit) is max_tenants and the retired id");
#define TENANT_PID_CACHE_DEFAULT 4096
#define TENANT_PID_CACHE_LIMIT (1u << 20)
#define TENANT_RULES_MAX 4096 /* rules in all, config and API together */

struct tenant_reg_config {
    unsigned max_tenants;   /* ids handed out, default and other included; 0: 64; 2..65536 */
    unsigned pid_cache_max; /* pids remembered; 0: 4096; at most 2^20 */
    const char *proc_root;  /* NULL: "/proc"; a test points it at a tree it wrote (copied) */
    /* pidfds kept open to check cached entries (only with proc_root "/proc"); 0: the smaller of
     * pid_cache_max and a quarter of RLIMIT_NOFILE's soft limit at tenant_reg_new; capped at
     * pid_cache_max. The entries beyond are checked by their start time. */
    unsigned pidfd_max;
    bool pidfd_off; /* no pidfds: every hit reads /proc/<pid>/stat (a benchmark's baseline) */
    /* ids implicit tenants (slurm-, k8s-, uid-) may not take: they are created only while fewer
     * than max_tenants - reserved_ids ids exist. 0: none (tierd's default is a quarter); at most
     * max_tenants - 2. */
    unsigned reserved_ids;
    /* job and pod tenants one uid may create by resolution in a minute; 0: no cap (tierd's
     * default is 4). */
    unsigned implicit_per_minute;
    /* a caller with no job, pod or matching rule is "default" rather than "uid-<uid>" */
    bool fallback_default;
    /* a Slurm cgroup root besides the built-in ones (copied); NULL: none */
    const char *slurm_cgroup_root;
    /* the clock of implicit_per_minute's windows and of reclaim, in seconds; NULL:
     * CLOCK_MONOTONIC (a test passes its own) */
    uint64_t (*now_s)(void);
    /* reclaim implicit tenants neither resolved nor looked up for this long (and holding
     * nothing); 0: never (tierd's default is 600). Makes id 2 "retired", an id besides
     * max_tenants (tenant_id_limit). */
    uint64_t idle_reclaim_s;
};

/* With idle_reclaim_s: the id and name of the series reclaimed tenants are folded into. The name
 * is reserved (tenant_add refuses it) with or without reclaim. */
#define TENANT_RETIRED_ID 2u
#define TENANT_RETIRED_NAME "retired"

/* 0, -EINVAL (a bound out of range, message in tier_err_msg()) or -ENOMEM. */
int tenant_reg_new(const struct tenant_reg_config *cfg, struct tenant_reg **out);
void tenant_reg_free(struct tenant_reg *r);

/* A rule: any field set must match (AND); the first rule that matches names the tenant. Rules
 * are kept in the order they were added and never removed. */
struct tenant_rule {
    const char *tenant;        /* name (ignored by tenant_add, which takes the name as argument) */
    enum tier_io_class cls;    /* (ignored by tenant_add, likewise) */
    const char *slurm_job;     /* NULL: any; a job id (tenant_job_valid) */
    const char *cgroup_prefix; /* NULL: any; matches the path and its descendants, by segment */
    bool has_uid;
    uid_t uid;
    bool has_gid;
    gid_t gid;
};

/* Add a tenant with its default class (and, with rule non-NULL, its match). Used by the config
 * loader and POST /v1/tenants. 0 and *id, -EINVAL (bad name: 1..63 bytes of [A-Za-z0-9._-], or a
 * bad rule field; message in tier_err_msg()), -EEXIST (the name exists with another class:
 * nothing changes), or -ENOSPC (registry full, or TENANT_RULES_MAX rules: nothing changes).
 * An existing name with the same class is 0: its rule, if it has none identical, is appended.
 * A rule with no field set is taken as no rule (it would match every caller). A tenant created
 * implicitly (slurm-<job>, k8s-<pod>) takes the class of its first explicit add. */
int tenant_add(struct tenant_reg *r, const char *name, enum tier_io_class cls,
               const struct tenant_rule *rule, uint32_t *id);
/* tenant_add for POST /v1/tenants: cls NULL keeps the class of an existing tenant (training for
 * a new one); *created (may be NULL) tells whether the id is new. Same returns as tenant_add. */
/* Count one caller or job sent to "other" because the registry was full (GET /v1/tenants
 * `folded`): for a full registry met outside resolution (POST /v1/jobs). */
void tenant_note_folded(struct tenant_reg *r);
int tenant_register(struct tenant_reg *r, const char *name, const enum tier_io_class *cls,
                    const struct tenant_rule *rule, uint32_t *id, bool *created);
/* The job-owner table (bounded: TENANT_JOB_OWNERS_MAX jobs; when full, a new entry replaces the
 * oldest one learnt from a /slurm/uid_<u>/job_<id> cgroup, else the oldest the scheduler set).
 * tenant_job_owner_set_by records, for the scheduler, that Slurm job `job` (tenant_job_valid)
 * runs as uid; by (NULL: none) names the scheduler's job that says so (POST /v1/jobs: the tierd
 * job id) so that tenant_job_owner_release(by) forgets exactly the entries that job set. The
 * scheduler's word replaces a learnt owner and its own earlier word; when two registrations
 * (another by) name different uids for one job, as when clusters sharing one tierd each have
 * a job N, SLURM_JOB_ID=N is believed for neither (logged) until the entry is released or
 * replaced. 0, or -EINVAL for a bad job id. tenant_job_owner_set: by = NULL. Drop forgets a job
 * (a no-op when unknown). tenant_job_owner: 0 and *uid, -EBUSY and the last uid for a conflict,
 * or -ENOENT. */
#define TENANT_JOB_OWNERS_MAX 4096
#define TENANT_OWNER_BY_MAX 64
int tenant_job_owner_set_by(struct tenant_reg *r, const char *job, uid_t uid, const char *by);
int tenant_job_owner_set(struct tenant_reg *r, const char *job, uid_t uid);
void tenant_job_owner_release(struct tenant_reg *r, const char *by);
void tenant_job_owner_drop(struct tenant_reg *r, const char *job);
int tenant_job_owner(struct tenant_reg *r, const char *job, uid_t *uid);

/* 0 and the id of name, or -ENOENT. */
int tenant_find(struct tenant_reg *r, const char *name, uint32_t *id);

/* The tenant and its default class of a FUSE caller (pid, uid, gid as fuse_req_ctx() gives
 * them: pid is the calling thread's id, whose /proc/<pid> files the kernel serves like a
 * process's). Never fails: a caller nothing names is its uid's tenant, or TIER_TENANT_DEFAULT
 * (uid 0, pid 0, fallback_default), or TIER_TENANT_OTHER when it may not have a new one. */
struct tier_ioctx tenant_resolve(struct tenant_reg *r, pid_t pid, uid_t uid, gid_t gid);
/* The tenant process pid (uid, gid) resolves to, when it exists: tenant_resolve's rules and
 * facts, but nothing changes: no tenant is created, none touched (an observer's lookup does not
 * keep an idle tenant from reclaim), no reclaim sweep, no pid cache entry, no rate spent, no log
 * line. 0 and *id; -ENOENT when its tenant would be a new implicit one, for pid 0 or r NULL.
 * For observers of processes that are not callers (the GPU sampler, gpu.h). */
int tenant_lookup(struct tenant_reg *r, pid_t pid, uid_t uid, gid_t gid, uint32_t *id);

/* The name of id ("default", "other", ...), valid for the registry's lifetime; "other" for an id
 * never handed out. A reclaimed id keeps its old name until it is reused, and the string a
 * call returned keeps its bytes until the id's second reuse after it (at least two idle
 * periods later). */
const char *tenant_name(const struct tenant_reg *r, uint32_t id);
/* Ids handed out are 0 .. tenant_count()-1; with reclaim, some of them may be reclaimed
 * (tenant_in_use false). */
uint32_t tenant_count(const struct tenant_reg *r);
/* Is id a tenant now (handed out and not reclaimed)? Listings skip the others. */
bool tenant_in_use(const struct tenant_reg *r, uint32_t id);

/* Reclaim (idle_reclaim_s). busy: does id hold anything an id's next owner must not inherit (hot-
 * tier bytes, hint sets, ...): then it is not reclaimed (asked without the registry's lock).
 * retire: move id's counters into TENANT_RETIRED_ID; called when id is reclaimed and again just
 * before it may be reused (what was recorded in between). Until hooks with a busy are set,
 * nothing is reclaimed. h NULL: none. */
struct tenant_reclaim_hooks {
    bool (*busy)(void *ud, uint32_t id);
    void (*retire)(void *ud, uint32_t id);
    void *ud;
};
void tenant_reclaim_hooks_set(struct tenant_reg *r, const struct tenant_reclaim_hooks *h);
/* An open file or directory handle of tenant id (the FUSE layer: at open, and unhold at
 * release): reads through a handle are not resolved again, so a tenant holding one counts as
 * in use and is not reclaimed. r NULL: no-op. */
void tenant_hold(struct tenant_reg *r, uint32_t id);
void tenant_unhold(struct tenant_reg *r, uint32_t id);
/* One sweep now: implicit tenants untouched for idle_reclaim_s and not busy are reclaimed, and
 * reclaimed ids untouched for idle_reclaim_s more and not busy become free for reuse. Returns
 * the tenants reclaimed. tenant_resolve runs it on a miss every idle_reclaim_s / 4; a test calls
 * it with its clock. */
size_t tenant_reclaim(struct tenant_reg *r);
/* The default class of id (that of "other" for an id never handed out). */
enum tier_io_class tenant_class(const struct tenant_reg *r, uint32_t id);
/* Was id created by resolution (slurm-<job>, k8s-<pod>, uid-<uid>) and never added explicitly? */
bool tenant_implicit(const struct tenant_reg *r, uint32_t id);
/* The cap (tenant_reg_config.max_tenants after defaults): tenants that may exist at once,
 * default and other included, "retired" not. */
uint32_t tenant_max(const struct tenant_reg *r);
/* Every id is below this: tenant_max, plus one for "retired" with idle_reclaim_s. What arrays
 * indexed by tenant id (telemetry, space quotas) are sized to. */
uint32_t tenant_id_limit(const struct tenant_reg *r);

/* The rules naming id, in match order: fills out[0 .. min(n, max)) and returns n. The strings
 * are the registry's, valid for its lifetime. */
size_t tenant_rules(struct tenant_reg *r, uint32_t id, struct tenant_rule *out, size_t max);

struct tenant_stats {
    uint64_t cache_hits, cache_misses; /* tenant_resolve calls with a pid (not 0) */
    uint64_t cache_evictions;          /* entries dropped to stay within pid_cache_max */
    uint64_t cache_entries;            /* now; at most pid_cache_max */
    uint64_t cache_pidfds;             /* now: entries checked by a pidfd; at most pidfd_max */
    uint64_t folded;                   /* implicit tenants refused by the cap, sent to "other" */
    uint64_t rate_folded;              /* of folded: refused by implicit_per_minute */
    uint64_t env_ignored;  /* SLURM_JOB_ID of a job not known to be the caller's uid's */
    uint64_t uid_mismatch; /* .../uid_<u>/job_<id> cgroups of a caller whose uid is not <u> */
    uint64_t job_owners;   /* entries of the job-owner table now */
    uint64_t reclaimed;    /* idle implicit tenants reclaimed so far */
    uint64_t ids_free;     /* reclaimed ids free for reuse now */
};
void tenant_stats_get(struct tenant_reg *r, struct tenant_stats *out);

#endif
