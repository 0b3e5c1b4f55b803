/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant.c - the tenant registry (tenant.h): names and ids, rules, the job-owner table. The
 * resolution of a FUSE caller to a tenant with its pid cache is in tenant_resolve.c, the parsers
 * of /proc/<pid>/cgroup and /proc/<pid>/environ in tenant_parse.c, the reclaim of idle ids in
 * tenant_reclaim.c; the structs they share are in tenant_int.h.
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
 * The job-owner table: TENANT_JOB_OWNERS_MAX entries with chains by job id, under r->lock; a
 * new entry takes a free slot (the ring's next), or when the table is full the oldest learnt
 * entry, else the oldest scheduler entry (one scan, only when full). Each entry records which
 * scheduler job set it (tenant_job_owner_release drops those) and whether two registrations
 * named different uids (a conflict: believed for neither). A change bumps r->gen so cached
 * answers are recomputed; learning an owner it already has changes nothing.
 */
#include "tenant/tenant.h"

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "tenant/tenant_int.h"

const char *tname(const struct tenant *t)
{
    return t
        ->names[atomic_load_explicit(&((struct tenant *)(uintptr_t)t)->cur, memory_order_acquire) &
                1];
}

/* Mark id used now (reclaim's idleness): a load, and a store only when the flag was clear, so
 * the hit path does not write a shared line on every request. */
void touch(const struct tenant_reg *r, uint32_t id)
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
    return n < TENANT_NAME_MAX && tier_name_chars(name, n);
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

/* ---- registry ---------------------------------------------------------------------------- */

uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

/* Under lock. */
int find_locked(const struct tenant_reg *r, const char *name, uint32_t *id)
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
void index_put(struct tenant_reg *r, uint32_t id)
{
    uint32_t i = name_hash(tname(&r->t[id])) & r->name_mask;
    while (r->name_idx[i] != 0)
        i = (i + 1) & r->name_mask;
    r->name_idx[i] = id + 1;
}

/* Under lock: ids taken (live or in quarantine) but "retired": what the caps count. */
uint32_t used_locked(const struct tenant_reg *r)
{
    return atomic_load_explicit(&r->count, memory_order_relaxed) - r->nfree -
           (r->nids > r->max ? 1 : 0);
}

/* Under lock, used_locked < max, name valid and absent. A freed id first (reclaim), else the
 * next new one. */
uint32_t create_locked(struct tenant_reg *r, const char *name, enum tier_io_class cls,
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

int32_t owner_find(const struct tenant_reg *r, const char *job)
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

void gen_bump(struct tenant_reg *r)
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
void owner_put_locked(struct tenant_reg *r, const char *job, uid_t uid, bool learnt, const char *by,
                      bool *conflict)
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
