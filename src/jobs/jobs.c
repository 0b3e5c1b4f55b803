/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobs.c - job admission (jobs.h): the capacity model, the FIFO queue, reference-counted pins of
 * the jobs' stage paths, through the ops it is opened with (jobs_ops; the daemon's are
 * jobs_ops_tierd() in src/daemon/wiring.c). Called by the control API's handlers
 * (POST/GET/DELETE /v1/jobs), on its connection threads.
 *
 * CAPACITY MODEL. Jobs reserve space in the hot tier's largest level (the disk level's budget,
 * RAM's without a disk level). Their staged blocks are pinned, so the pin budget ([cache]
 * pin_size, by default half the level) bounds them too:
 *
 *     capacity   = min(level budget, pin budget) - pins outside jobs
 *     reservable = capacity - sum(cache_bytes of admitted jobs)
 *
 * "pins outside jobs" is the cache's pinned_bytes less what the admitted jobs have staged here
 * (each counted up to its reservation; a cluster-wide staging's blocks warmed on their owners
 * are pinned there, not here), so a job's own pinned blocks are not counted twice; it is an
 * estimate when two jobs stage the same files. A job staged cluster-wide (jobs_request.cluster)
 * still reserves its cache_bytes on this node, as any job: the node pins only its own share of
 * the blocks while every peer answers, but the blocks of a peer that fails are fetched, and
 * pinned, here. Bandwidth is reserved on the backends of the job's
 * stage paths: on a backend with [backend] link_capacity, the admitted jobs' bandwidth there plus
 * the request's must fit; on a backend without one, and for a job without stage paths, bandwidth
 * is recorded but not checked.
 *
 * A request larger than min(level budget, pin budget), or asking more bandwidth than a link has,
 * can never fit and is rejected; pins outside jobs only delay it (they may go). Otherwise it is
 * admitted when nothing is queued and it fits, else queued at the tail. A release, and every
 * submit, GET and list, admits the queue's head while it fits: a head that does not fit blocks
 * those behind it (no overtaking, so a large job is not starved); a queued head is never rejected.
 *
 * Job state machine (guarded by jobs->mu; a released job leaves the registry):
 *
 *                 submit: fits, queue empty
 *     (new) ---------------------------------> ADMITTED --release--> (gone: unpinned)
 *       |                                         ^
 *       | submit: fits later                      | head of the queue and fits (after a
 *       v                                         | release, a submit, a GET or a list)
 *     QUEUED ------------------------------------+
 *       |
 *       +--release--> (gone)
 *     (new) --submit: can never fit, or stage paths with cache_bytes 0--> rejected (not recorded)
 *
 * An admitted job's staging (jobs_info.staging):
 *
 *     NONE (no stage paths)
 *     pending (need_start) --ops.stage, mu dropped--> RUNNING --> DONE | FAILED
 *        |   ^                                          |
 *        +---+ -EBUSY (the stager is full): retried     +--listed bytes > cache_bytes--> FAILED
 *              at the next settle()                        (cancelled; the reservation stays)
 *     pending --a pin, or ops.stage, fails--> FAILED (the reservation is held; the client
 *                                             releases the job)
 *
 * TRANSITION -> FUNCTION
 *   new -> ADMITTED / QUEUED / rejected          jobs_submit() -> verdict_of() -> fits()
 *   -> ADMITTED: pin the stage paths             admit() -> pin_ref()
 *   QUEUED -> ADMITTED (head, in order)          kick(), from settle()
 *   pending -> RUNNING / FAILED / pending        start_stagings() -> ops.stage (mu dropped)
 *   RUNNING -> DONE / FAILED (progress kept)     staged_bytes()
 *   ADMITTED -> gone: cancel staging, unpin      jobs_release() -> unadmit() -> pin_unref()
 *   ADMITTED, starting -> gone                   jobs_release() (released), start_stagings()
 *   QUEUED -> gone                               jobs_release()
 *
 * INVARIANTS (under mu):
 *   J1  a job is in exactly one of the lists admitted and queue; ids are unique across both. A
 *       job released while starting is in neither (released set): only start_stagings() has it.
 *   J2  a pin rule (backend, prefix) has a pinref with refs = the number of admitted jobs that
 *       hold it (held[i] set), and the cache has the rule while refs > 0: one job's release never
 *       unpins a prefix another admitted job still holds, nor a rule that existed before the
 *       first job pinned it (foreign: pinned by hand; cache_pin_exists()).
 *   J3  the queue's head does not fit (else settle() admits it), unless the queue is empty.
 *   S1  need_start only on an admitted job with stage paths and no stage_id.
 *   S2  starting: exactly one thread is in ops.stage for the job; nstarting counts such jobs.
 *   S3  final: prog is the staging's last progress (DONE/FAILED), kept when the stager prunes
 *       it (it keeps the latest 256 finished stagings); a staging gone before it was seen
 *       finished reads FAILED with its last seen bytes.
 *   S4  stage_error set with a stage_id: the staging was cancelled for listing more than
 *       cache_bytes; its staged bytes still count as the job's, up to cache_bytes.
 *
 * Locking: mu guards everything; the ops are called with it held except ops.stage: the start of
 * a staging (stage_start_for) resolves each stage path with a backend stat and a listing, each up
 * to [daemon] backend_timeout, so start_stagings() drops mu around it (starting marks the job;
 * a release meanwhile leaves it to that thread, which cancels the new staging and frees it;
 * jobs_free() waits for starts in flight). Never FUSE reads. Nothing is persisted: a restart
 * forgets every job and reservation, and the pins go with the process (pin rules are not kept
 * across a restart; blocks on the disk level are adopted unpinned).
 *
 * Not enforced: the cancel above bounds a job's pins by what its stage paths list; a file added
 * under a stage path later and read through the mount is pinned by the job's rule past
 * cache_bytes; pins taken by hand (POST /v1/pin) ignore the reservations (they count as pins
 * outside jobs at the next decision).
 */
#include "jobs/jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"

struct pinref {
    char *backend, *prefix;
    unsigned refs;
    bool foreign; /* the rule existed before the first job pinned it: never unpinned by jobs */
    struct pinref *next;
};

struct job {
    char id[JOBS_ID_MAX];
    char tenant_name[64];
    uint32_t tenant;
    enum tier_io_class cls;
    enum jobs_state state;
    uint64_t cache_bytes, bandwidth_bps;
    bool cluster;            /* staged cluster-wide (jobs_request.cluster) */
    struct jobs_path *stage; /* strings owned */
    size_t nstage;
    bool *held; /* held[i]: this job holds a ref on stage[i]'s pin rule */
    char **stage_out;
    size_t nstage_out;
    uint64_t stage_id;          /* 0: no staging started */
    char stage_error[256];      /* a pin or the start of staging failed, or over cache_bytes */
    bool need_start;            /* admitted with stage paths, staging not started yet (S1) */
    bool starting;              /* a thread is in ops.stage for it with mu dropped (S2) */
    bool released;              /* released while starting: the starting thread frees it */
    char wait_reason[160];      /* why need_start still holds (the stager was full: -EBUSY) */
    bool final;                 /* prog is the staging's final progress (S3) */
    struct stage_progress prog; /* the staging's progress as last seen */
    uint64_t submitted_ns, admitted_ns;
    struct job *next;
};

struct jobs {
    struct jobs_ops ops;
    pthread_mutex_t mu;
    struct job *admitted; /* in admission order */
    struct job *queue;    /* FIFO: head first */
    struct pinref *pins;
    size_t njobs;
    unsigned nstarting;     /* jobs with starting set */
    pthread_cond_t started; /* signalled when nstarting drops */
};

/* ---- names ---------------------------------------------------------------------------- */

bool jobs_id_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= JOBS_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return false; /* the first is alphanumeric: no ".", "..", "-x" */
    }
    return true;
}

const char *jobs_state_name(enum jobs_state s)
{
    return s == JOBS_ADMITTED ? "admitted" : "queued";
}

const char *jobs_staging_name(enum jobs_staging s)
{
    static const char *const names[] = {"pending", "staging", "staged", "failed", "none"};
    return (unsigned)s < 5 ? names[s] : "?";
}

/* ---- jobs ------------------------------------------------------------------------------ */

static void job_free(struct job *jb)
{
    if (!jb)
        return;
    for (size_t i = 0; i < jb->nstage; i++) {
        free((char *)(uintptr_t)jb->stage[i].path);
        free((char *)(uintptr_t)jb->stage[i].backend);
        free((char *)(uintptr_t)jb->stage[i].prefix);
    }
    free(jb->stage);
    free(jb->held);
    for (size_t i = 0; i < jb->nstage_out; i++)
        free(jb->stage_out[i]);
    free(jb->stage_out);
    free(jb);
}

static struct job *job_copy(const struct jobs_request *rq)
{
    struct job *jb = calloc(1, sizeof(*jb));
    if (!jb)
        return NULL;
    tier_strlcpy(jb->id, rq->id, sizeof(jb->id));
    tier_strlcpy(jb->tenant_name, rq->tenant_name ? rq->tenant_name : "default",
                 sizeof(jb->tenant_name));
    jb->tenant = rq->tenant;
    jb->cls = rq->cls;
    jb->cache_bytes = rq->cache_bytes;
    jb->bandwidth_bps = rq->bandwidth_bps;
    jb->cluster = rq->cluster;
    jb->submitted_ns = tier_now_real_ns();
    if (rq->nstage) {
        jb->stage = calloc(rq->nstage, sizeof(*jb->stage));
        jb->held = calloc(rq->nstage, sizeof(*jb->held));
        if (!jb->stage || !jb->held)
            goto fail;
        for (size_t i = 0; i < rq->nstage; i++) {
            jb->nstage = i + 1;
            jb->stage[i].path = strdup(rq->stage[i].path);
            jb->stage[i].backend = strdup(rq->stage[i].backend);
            jb->stage[i].prefix = strdup(rq->stage[i].prefix);
            if (!jb->stage[i].path || !jb->stage[i].backend || !jb->stage[i].prefix)
                goto fail;
        }
    }
    if (rq->nstage_out) {
        jb->stage_out = calloc(rq->nstage_out, sizeof(*jb->stage_out));
        if (!jb->stage_out)
            goto fail;
        for (size_t i = 0; i < rq->nstage_out; i++) {
            jb->nstage_out = i + 1;
            if (!(jb->stage_out[i] = strdup(rq->stage_out[i])))
                goto fail;
        }
    }
    return jb;
fail:
    job_free(jb);
    return NULL;
}

/* Is rq the request jb was made from? by_name: compare the tenants by name (rq->tenant may not
 * be registered yet; a name never changes its id). cluster is not compared: how the job stages
 * does not change what it reserves, and the same job submitted once by hand and once by the
 * Slurm provider's pre_run (with "cluster") is one job. */
static bool same_request(const struct job *jb, const struct jobs_request *rq, bool by_name)
{
    bool same_tenant = by_name
                           ? !strcmp(jb->tenant_name, rq->tenant_name ? rq->tenant_name : "default")
                           : jb->tenant == rq->tenant;
    if (!same_tenant || jb->cls != rq->cls || jb->cache_bytes != rq->cache_bytes ||
        jb->bandwidth_bps != rq->bandwidth_bps || jb->nstage != rq->nstage ||
        jb->nstage_out != rq->nstage_out)
        return false;
    for (size_t i = 0; i < rq->nstage; i++)
        if (strcmp(jb->stage[i].path, rq->stage[i].path))
            return false;
    for (size_t i = 0; i < rq->nstage_out; i++)
        if (strcmp(jb->stage_out[i], rq->stage_out[i]))
            return false;
    return true;
}

/* mu held. The job of id and its queue position (1-based; 0 when admitted), or NULL. */
static struct job *find(struct jobs *j, const char *id, size_t *pos)
{
    for (struct job *jb = j->admitted; jb; jb = jb->next)
        if (!strcmp(jb->id, id)) {
            *pos = 0;
            return jb;
        }
    size_t n = 0;
    for (struct job *jb = j->queue; jb; jb = jb->next) {
        n++;
        if (!strcmp(jb->id, id)) {
            *pos = n;
            return jb;
        }
    }
    return NULL;
}

static void list_append(struct job **head, struct job *jb)
{
    jb->next = NULL;
    while (*head)
        head = &(*head)->next;
    *head = jb;
}

static void list_remove(struct job **head, struct job *jb)
{
    while (*head && *head != jb)
        head = &(*head)->next;
    if (*head)
        *head = jb->next;
    jb->next = NULL;
}

/* ---- pins (J2) ------------------------------------------------------------------------- */

/* mu held. Take a ref on (backend, prefix), pinning it in the cache at the first. */
static int pin_ref(struct jobs *j, const char *backend, const char *prefix)
{
    for (struct pinref *p = j->pins; p; p = p->next)
        if (!strcmp(p->backend, backend) && !strcmp(p->prefix, prefix)) {
            p->refs++;
            return 0;
        }
    struct pinref *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->backend = strdup(backend);
    p->prefix = strdup(prefix);
    p->foreign = j->ops.pin_exists && j->ops.pin_exists(j->ops.ud, backend, prefix);
    int rc = p->backend && p->prefix ? j->ops.pin(j->ops.ud, backend, prefix) : -ENOMEM;
    if (rc) {
        free(p->backend);
        free(p->prefix);
        free(p);
        return rc;
    }
    p->refs = 1;
    p->next = j->pins;
    j->pins = p;
    return 0;
}

/* mu held. Drop a ref; the last one unpins. */
static void pin_unref(struct jobs *j, const char *backend, const char *prefix)
{
    for (struct pinref **pp = &j->pins; *pp; pp = &(*pp)->next) {
        struct pinref *p = *pp;
        if (strcmp(p->backend, backend) || strcmp(p->prefix, prefix))
            continue;
        if (--p->refs == 0) {
            if (!p->foreign) /* a rule pinned by hand before the job stays (J2) */
                (void)j->ops.unpin(j->ops.ud, backend, prefix); /* -ENOENT: unpinned by hand */
            *pp = p->next;
            free(p->backend);
            free(p->prefix);
            free(p);
        }
        return;
    }
}

/* ---- capacity -------------------------------------------------------------------------- */

static uint64_t sub_sat(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* mu held. The bytes jb has staged so far (0 without staging), its progress in *p. The final
 * progress is kept in jb (S3): the stager forgets the oldest finished stagings. A staging whose
 * stage paths list more than cache_bytes is cancelled and the job's staging failed (S4). */
static uint64_t staged_bytes(struct jobs *j, struct job *jb, struct stage_progress *p)
{
    memset(p, 0, sizeof(*p));
    if (!jb->stage_id)
        return 0;
    if (!jb->final) {
        struct stage_progress now;
        if (j->ops.stage_progress(j->ops.ud, jb->stage_id, &now) == 0) {
            jb->prog = now;
            jb->final = now.state != STAGE_RUNNING;
        } else { /* gone before it was seen finished: it finished (the stager prunes those) */
            jb->final = true;
            jb->prog.state = STAGE_FAILED;
            snprintf(jb->prog.first_error, sizeof(jb->prog.first_error),
                     "the stager no longer keeps staging %" PRIu64
                     " (it keeps the latest finished ones): its outcome is unknown",
                     jb->stage_id);
        }
        char a[32], b[32];
        if (!jb->stage_error[0] && jb->prog.bytes_total > jb->cache_bytes) {
            snprintf(jb->stage_error, sizeof(jb->stage_error),
                     "the stage paths hold %s (listed so far), more than cache_bytes %s: staging "
                     "cancelled; release the job and submit it with a larger cache_bytes",
                     tier_fmt_bytes(jb->prog.bytes_total, a, sizeof(a)),
                     tier_fmt_bytes(jb->cache_bytes, b, sizeof(b)));
            if (!jb->final && j->ops.cancel)
                (void)j->ops.cancel(j->ops.ud, jb->stage_id);
        }
    }
    *p = jb->prog;
    return p->bytes_done;
}

/* mu held. */
static void capacity(struct jobs *j, struct jobs_capacity *c)
{
    memset(c, 0, sizeof(*c));
    j->ops.space(j->ops.ud, &c->level_bytes, &c->pin_budget, &c->pinned_bytes);
    for (struct job *jb = j->admitted; jb; jb = jb->next) {
        struct stage_progress p;
        /* a cluster-wide staging's blocks warmed on their owners are pinned there */
        uint64_t s = staged_bytes(j, jb, &p);
        s = sub_sat(s, p.bytes_on_peers);
        c->jobs_pinned_bytes += s < jb->cache_bytes ? s : jb->cache_bytes;
        c->reserved_bytes = tier_sum_sat(c->reserved_bytes, jb->cache_bytes);
        c->admitted++;
    }
    for (struct job *jb = j->queue; jb; jb = jb->next)
        c->queued++;
    if (c->jobs_pinned_bytes > c->pinned_bytes)
        c->jobs_pinned_bytes = c->pinned_bytes;
    uint64_t total = c->level_bytes < c->pin_budget ? c->level_bytes : c->pin_budget;
    c->capacity_bytes = sub_sat(total, c->pinned_bytes - c->jobs_pinned_bytes);
    c->reservable_bytes = sub_sat(c->capacity_bytes, c->reserved_bytes);
}

/* mu held. The bandwidth admitted jobs reserve on backend. */
static uint64_t bw_used(struct jobs *j, const char *backend)
{
    uint64_t sum = 0;
    for (struct job *jb = j->admitted; jb; jb = jb->next) {
        for (size_t i = 0; i < jb->nstage; i++) {
            if (!strcmp(jb->stage[i].backend, backend)) {
                sum = tier_sum_sat(sum, jb->bandwidth_bps);
                break;
            }
        }
    }
    return sum;
}

/* Does backend appear in stage[0..i)? (a job reserves once per backend) */
static bool seen_before(const struct jobs_path *stage, size_t i)
{
    for (size_t k = 0; k < i; k++)
        if (!strcmp(stage[k].backend, stage[i].backend))
            return true;
    return false;
}

enum fit { FIT = 0, FIT_LATER = 1, FIT_NEVER = 2 };

/* mu held. Could a job asking cache_bytes and bw on the backends of stage be admitted now? The
 * reason why not goes into reason. */
static enum fit fits(struct jobs *j, uint64_t cache_bytes, uint64_t bw,
                     const struct jobs_path *stage, size_t nstage, char *reason, size_t rsz)
{
    struct jobs_capacity c;
    capacity(j, &c);
    char a[32], b[32], e[32], f[32];
    uint64_t total = c.level_bytes < c.pin_budget ? c.level_bytes : c.pin_budget;
    if (cache_bytes > total) { /* pins outside jobs may go: they only delay (FIT_LATER) */
        snprintf(reason, rsz,
                 "cache_bytes %s is more than jobs may ever reserve in the hot tier (%s: the "
                 "smaller of its level budget %s and [cache] pin_size %s)",
                 tier_fmt_bytes(cache_bytes, a, sizeof(a)), tier_fmt_bytes(total, b, sizeof(b)),
                 tier_fmt_bytes(c.level_bytes, e, sizeof(e)),
                 tier_fmt_bytes(c.pin_budget, f, sizeof(f)));
        return FIT_NEVER;
    }
    for (size_t i = 0; bw && i < nstage; i++) {
        if (seen_before(stage, i))
            continue;
        uint64_t link = j->ops.link_capacity(j->ops.ud, stage[i].backend);
        if (link && bw > link) {
            snprintf(reason, rsz, "bandwidth %s/s is more than backend %s's link_capacity (%s/s)",
                     tier_fmt_bytes(bw, a, sizeof(a)), stage[i].backend,
                     tier_fmt_bytes(link, b, sizeof(b)));
            return FIT_NEVER;
        }
    }
    if (cache_bytes > c.reservable_bytes) {
        snprintf(reason, rsz,
                 "hot-tier space: asks %s, %s reservable now (%s reserved by %zu admitted jobs, "
                 "%s pinned outside jobs)",
                 tier_fmt_bytes(cache_bytes, a, sizeof(a)),
                 tier_fmt_bytes(c.reservable_bytes, b, sizeof(b)),
                 tier_fmt_bytes(c.reserved_bytes, e, sizeof(e)), c.admitted,
                 tier_fmt_bytes(c.pinned_bytes - c.jobs_pinned_bytes, f, sizeof(f)));
        return FIT_LATER;
    }
    for (size_t i = 0; bw && i < nstage; i++) {
        if (seen_before(stage, i))
            continue;
        uint64_t link = j->ops.link_capacity(j->ops.ud, stage[i].backend);
        uint64_t used = bw_used(j, stage[i].backend);
        if (link && tier_sum_sat(used, bw) > link) {
            snprintf(reason, rsz,
                     "bandwidth on backend %s: asks %s/s, %s/s of its link_capacity %s/s is "
                     "reserved",
                     stage[i].backend, tier_fmt_bytes(bw, a, sizeof(a)),
                     tier_fmt_bytes(used, b, sizeof(b)), tier_fmt_bytes(link, e, sizeof(e)));
            return FIT_LATER;
        }
    }
    return FIT;
}

/* ---- transitions ----------------------------------------------------------------------- */

/* mu held; jb is in no list. Make it ADMITTED: reserve, pin its stage paths, and mark its
 * staging to start (start_stagings(), with mu dropped). A failing pin leaves it admitted with the
 * error (the client releases it). No backend I/O here. */
static void admit(struct jobs *j, struct job *jb)
{
    jb->state = JOBS_ADMITTED;
    jb->admitted_ns = tier_now_real_ns();
    list_append(&j->admitted, jb);
    for (size_t i = 0; i < jb->nstage; i++) {
        tier_err_clear();
        int rc = pin_ref(j, jb->stage[i].backend, jb->stage[i].prefix);
        if (rc) {
            snprintf(jb->stage_error, sizeof(jb->stage_error), "cannot pin %.100s: %.120s",
                     jb->stage[i].path, *tier_err_msg() ? tier_err_msg() : strerror(-rc));
            return;
        }
        jb->held[i] = true;
    }
    jb->need_start = jb->nstage > 0;
}

/* mu held (dropped and retaken around each ops.stage: it resolves each stage path with a
 * backend stat and a listing). Start the stagings of admitted jobs that need one, in admission
 * order. A job released meanwhile is freed here, its new staging cancelled; a stager that is
 * full (-EBUSY: [api] max_stage_jobs) leaves the job waiting, retried at the next call. */
static void start_stagings(struct jobs *j)
{
    for (;;) {
        struct job *jb = j->admitted;
        while (jb && !(jb->need_start && !jb->starting))
            jb = jb->next;
        if (!jb)
            return;
        const char *paths[JOBS_PATHS_MAX];
        for (size_t i = 0; i < jb->nstage && i < JOBS_PATHS_MAX; i++)
            paths[i] = jb->stage[i].path;
        jb->starting = true;
        j->nstarting++;
        pthread_mutex_unlock(&j->mu);
        uint64_t id = 0;
        tier_err_clear();
        int rc = j->ops.stage(j->ops.ud, jb->tenant, paths, jb->nstage, jb->cluster, &id);
        char msg[200];
        if (*tier_err_msg())
            tier_strlcpy(msg, tier_err_msg(), sizeof(msg));
        else if (rc == -EBUSY)
            tier_strlcpy(msg, "[api] max_stage_jobs stagings are running", sizeof(msg));
        else
            tier_strlcpy(msg, strerror(rc ? -rc : EIO), sizeof(msg));
        pthread_mutex_lock(&j->mu);
        jb->starting = false;
        j->nstarting--;
        pthread_cond_broadcast(&j->started);
        if (jb->released) { /* out of the lists already, unpinned */
            if (rc == 0 && j->ops.cancel)
                (void)j->ops.cancel(j->ops.ud, id);
            job_free(jb);
            continue;
        }
        if (rc == -EBUSY) { /* the others would be refused too: retry at the next call */
            snprintf(jb->wait_reason, sizeof(jb->wait_reason), "waiting to stage: %.140s", msg);
            return;
        }
        jb->need_start = false;
        jb->wait_reason[0] = '\0';
        if (rc == 0)
            jb->stage_id = id;
        else
            snprintf(jb->stage_error, sizeof(jb->stage_error), "cannot start staging: %.200s", msg);
    }
}

/* mu held; jb is admitted and out of the list. Cancel its staging, drop its pins. */
static void unadmit(struct jobs *j, struct job *jb)
{
    if (jb->stage_id && j->ops.cancel)
        (void)j->ops.cancel(j->ops.ud, jb->stage_id);
    for (size_t i = 0; i < jb->nstage; i++) {
        if (jb->held[i])
            pin_unref(j, jb->stage[i].backend, jb->stage[i].prefix);
        jb->held[i] = false;
    }
}

/* mu held. Admit the queue's head while it fits (J3). No backend I/O: the caller then calls
 * start_stagings() (settle()). */
static void kick(struct jobs *j)
{
    char reason[256];
    while (j->queue) {
        struct job *head = j->queue;
        if (fits(j, head->cache_bytes, head->bandwidth_bps, head->stage, head->nstage, reason,
                 sizeof(reason)) != FIT)
            return;
        j->queue = head->next;
        head->next = NULL;
        admit(j, head);
    }
}

/* mu held (dropped around backend I/O). Admit what fits now, start the stagings due. */
static void settle(struct jobs *j)
{
    kick(j);
    start_stagings(j);
}

/* mu held. Fill *ji from jb at queue position pos. */
static int info_fill(struct jobs *j, struct job *jb, size_t pos, struct jobs_info *ji)
{
    memset(ji, 0, sizeof(*ji));
    tier_strlcpy(ji->id, jb->id, sizeof(ji->id));
    tier_strlcpy(ji->tenant_name, jb->tenant_name, sizeof(ji->tenant_name));
    ji->tenant = jb->tenant;
    ji->cls = jb->cls;
    ji->state = jb->state;
    ji->position = pos;
    ji->cache_bytes = jb->cache_bytes;
    ji->bandwidth_bps = jb->bandwidth_bps;
    ji->cluster = jb->cluster;
    ji->submitted_ns = jb->submitted_ns;
    ji->admitted_ns = jb->admitted_ns;
    ji->stage_id = jb->stage_id;
    if (jb->nstage && !(ji->stage = calloc(jb->nstage, sizeof(char *))))
        goto nomem;
    for (size_t i = 0; i < jb->nstage; i++, ji->nstage++)
        if (!(ji->stage[i] = strdup(jb->stage[i].path)))
            goto nomem;
    if (jb->nstage_out && !(ji->stage_out = calloc(jb->nstage_out, sizeof(char *))))
        goto nomem;
    for (size_t i = 0; i < jb->nstage_out; i++, ji->nstage_out++)
        if (!(ji->stage_out[i] = strdup(jb->stage_out[i])))
            goto nomem;

    if (jb->state == JOBS_QUEUED) {
        ji->staging = JOBS_STAGING_PENDING;
        if (pos > 1)
            snprintf(ji->reason, sizeof(ji->reason),
                     "behind %zu queued job(s) (first come, first admitted)", pos - 1);
        else
            (void)fits(j, jb->cache_bytes, jb->bandwidth_bps, jb->stage, jb->nstage, ji->reason,
                       sizeof(ji->reason));
    } else if (jb->need_start) {
        ji->staging = JOBS_STAGING_PENDING;
        tier_strlcpy(ji->reason, jb->wait_reason, sizeof(ji->reason));
    } else if (!jb->stage_id && !jb->stage_error[0]) {
        ji->staging = JOBS_STAGING_NONE;
    } else {
        struct stage_progress p;
        ji->staged_bytes = staged_bytes(j, jb, &p);
        ji->staged_on_peers = p.bytes_on_peers;
        ji->stage_total_bytes = p.bytes_total;
        ji->staging = jb->stage_error[0]         ? JOBS_STAGING_FAILED
                      : p.state == STAGE_RUNNING ? JOBS_STAGING_RUNNING
                      : p.state == STAGE_DONE    ? JOBS_STAGING_DONE
                                                 : JOBS_STAGING_FAILED;
        tier_strlcpy(ji->stage_error, jb->stage_error[0] ? jb->stage_error : p.first_error,
                     sizeof(ji->stage_error));
        if (ji->staging != JOBS_STAGING_FAILED)
            ji->stage_error[0] = '\0';
    }
    return 0;
nomem:
    jobs_info_fini(ji);
    return -ENOMEM;
}

void jobs_info_fini(struct jobs_info *ji)
{
    if (!ji)
        return;
    for (size_t i = 0; i < ji->nstage; i++)
        free(ji->stage[i]);
    free(ji->stage);
    for (size_t i = 0; i < ji->nstage_out; i++)
        free(ji->stage_out[i]);
    free(ji->stage_out);
    ji->stage = ji->stage_out = NULL;
    ji->nstage = ji->nstage_out = 0;
}

/* ---- the registry ---------------------------------------------------------------------- */

int jobs_new(const struct jobs_ops *ops, struct jobs **out)
{
    struct jobs *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->ops = *ops;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->started, NULL);
    *out = j;
    return 0;
}

void jobs_free(struct jobs *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    while (j->nstarting) /* a staging start in flight (no API thread should be left) */
        pthread_cond_wait(&j->started, &j->mu);
    while (j->admitted) {
        struct job *jb = j->admitted;
        j->admitted = jb->next;
        unadmit(j, jb);
        job_free(jb);
    }
    while (j->queue) {
        struct job *jb = j->queue;
        j->queue = jb->next;
        job_free(jb);
    }
    pthread_mutex_unlock(&j->mu);
    pthread_cond_destroy(&j->started);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* mu held. The verdict for a new request, the reason in reason. */
static enum jobs_verdict verdict_of(struct jobs *j, const struct jobs_request *rq, char *reason,
                                    size_t rsz)
{
    enum fit f = fits(j, rq->cache_bytes, rq->bandwidth_bps, rq->stage, rq->nstage, reason, rsz);
    if (f == FIT_NEVER)
        return JOBS_REJECT;
    return f == FIT && !j->queue ? JOBS_ADMIT : JOBS_QUEUE;
}

int jobs_submit(struct jobs *j, const struct jobs_request *rq, enum jobs_verdict *verdict,
                struct jobs_info *info)
{
    if (!rq->id || !jobs_id_valid(rq->id) || rq->nstage > JOBS_PATHS_MAX ||
        rq->nstage_out > JOBS_PATHS_MAX || (rq->nstage && rq->cache_bytes == 0))
        return -EINVAL; /* staging into no reservation would pin outside it */
    int rc = 0;
    size_t pos = 0;
    pthread_mutex_lock(&j->mu);
    settle(j); /* pins outside jobs may have gone since the last release */
    struct job *jb = find(j, rq->id, &pos);
    if (jb) {
        if (!same_request(jb, rq, false)) {
            memset(info, 0, sizeof(*info));
            tier_strlcpy(info->id, rq->id, sizeof(info->id));
            snprintf(info->reason, sizeof(info->reason),
                     "job %s exists (%s) with another request: release it first (DELETE "
                     "/v1/jobs/%s), or submit under another id",
                     rq->id, jobs_state_name(jb->state), rq->id);
            *verdict = JOBS_CONFLICT;
            goto out;
        }
        rc = info_fill(j, jb, pos, info);
        *verdict = jb->state == JOBS_ADMITTED ? JOBS_ADMIT : JOBS_QUEUE;
        goto out;
    }
    char reason[256] = "";
    enum jobs_verdict v = verdict_of(j, rq, reason, sizeof(reason));
    if (v == JOBS_REJECT) {
        memset(info, 0, sizeof(*info));
        tier_strlcpy(info->id, rq->id, sizeof(info->id));
        tier_strlcpy(info->reason, reason, sizeof(info->reason));
        *verdict = v;
        goto out;
    }
    if (j->njobs >= JOBS_MAX) {
        rc = -ENOSPC;
        goto out;
    }
    jb = job_copy(rq);
    if (!jb) {
        rc = -ENOMEM;
        goto out;
    }
    j->njobs++;
    if (v == JOBS_ADMIT) {
        admit(j, jb);
    } else {
        jb->state = JOBS_QUEUED;
        list_append(&j->queue, jb);
    }
    (void)find(j, rq->id, &pos);
    rc = info_fill(j, jb, pos, info);
    *verdict = v;
    if (rc == 0 && v == JOBS_ADMIT && jb->need_start) {
        start_stagings(j); /* drops mu: jb may be released meanwhile */
        struct job *now = find(j, rq->id, &pos);
        struct jobs_info again;
        if (now && info_fill(j, now, pos, &again) == 0) {
            jobs_info_fini(info);
            *info = again;
        }
    }
out:
    pthread_mutex_unlock(&j->mu);
    return rc;
}

enum jobs_verdict jobs_precheck(struct jobs *j, const struct jobs_request *rq, char *reason,
                                size_t rsz)
{
    enum jobs_verdict v = JOBS_ADMIT;
    size_t pos = 0;
    reason[0] = '\0';
    pthread_mutex_lock(&j->mu);
    struct job *jb = rq->id ? find(j, rq->id, &pos) : NULL;
    if (jb && !same_request(jb, rq, true)) {
        snprintf(reason, rsz,
                 "job %s exists (%s) with another request: release it first (DELETE "
                 "/v1/jobs/%s), or submit under another id",
                 rq->id, jobs_state_name(jb->state), rq->id);
        v = JOBS_CONFLICT;
    } else if (!jb && fits(j, rq->cache_bytes, rq->bandwidth_bps, rq->stage, rq->nstage, reason,
                           rsz) == FIT_NEVER) {
        v = JOBS_REJECT;
    }
    pthread_mutex_unlock(&j->mu);
    return v;
}

int jobs_release(struct jobs *j, const char *id, struct jobs_info *info)
{
    size_t pos = 0;
    pthread_mutex_lock(&j->mu);
    struct job *jb = id ? find(j, id, &pos) : NULL;
    if (!jb) {
        pthread_mutex_unlock(&j->mu);
        return -ENOENT;
    }
    if (info && info_fill(j, jb, pos, info) != 0)
        memset(info, 0, sizeof(*info)); /* the release goes on: it frees, not allocates */
    if (jb->state == JOBS_ADMITTED) {
        list_remove(&j->admitted, jb);
        unadmit(j, jb);
    } else {
        list_remove(&j->queue, jb);
    }
    if (jb->starting)
        jb->released = true; /* start_stagings() frees it and cancels its staging */
    else
        job_free(jb);
    j->njobs--;
    settle(j);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

int jobs_get(struct jobs *j, const char *id, struct jobs_info *info)
{
    size_t pos = 0;
    pthread_mutex_lock(&j->mu);
    settle(j); /* pins outside jobs may have gone; a staging may be due (the stager was full) */
    struct job *jb = id ? find(j, id, &pos) : NULL;
    int rc = jb ? info_fill(j, jb, pos, info) : -ENOENT;
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int jobs_list(struct jobs *j, struct jobs_info **out, size_t *n, struct jobs_capacity *cap)
{
    pthread_mutex_lock(&j->mu);
    settle(j);
    size_t total = j->njobs, k = 0;
    struct jobs_info *v = calloc(total ? total : 1, sizeof(*v));
    int rc = v ? 0 : -ENOMEM;
    for (struct job *jb = j->admitted; rc == 0 && jb; jb = jb->next)
        if ((rc = info_fill(j, jb, 0, &v[k])) == 0)
            k++;
    size_t pos = 0;
    for (struct job *jb = j->queue; rc == 0 && jb; jb = jb->next)
        if ((rc = info_fill(j, jb, ++pos, &v[k])) == 0)
            k++;
    if (rc == 0 && cap)
        capacity(j, cap);
    pthread_mutex_unlock(&j->mu);
    if (rc) {
        jobs_list_free(v, k);
        return rc;
    }
    *out = v;
    *n = k;
    return 0;
}

void jobs_list_free(struct jobs_info *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        jobs_info_fini(&v[i]);
    free(v);
}
