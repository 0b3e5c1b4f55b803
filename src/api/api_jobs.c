/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_jobs.c - job admission through the control API (jobs.h): POST /v1/jobs (parse the whole
 * body, resolve each stage path to its pin rule, then register the tenant and submit), GET
 * /v1/jobs, GET and DELETE /v1/jobs/ID. Called on the HTTP server's connection threads; the job
 * registry and the tenant registry are thread-safe.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "api/api_int.h"
#include "jobs/jobs.h"
#include "core/state.h"
#include "tenant/tenant.h"

#define JOBS_POST_FIELDS                                                                           \
    "job, tenant, stage, cache_bytes, bandwidth, class, stage_out, dry_run, uid, slurm_job, "      \
    "cluster"

static json_t *job_json(const struct jobs_info *ji)
{
    json_t *st =
        json_pack("{s:s, s:I, s:I, s:I, s:b}", "state", jobs_staging_name(ji->staging), "stage_job",
                  (json_int_t)ji->stage_id, "bytes_done", (json_int_t)ji->staged_bytes,
                  "bytes_total", (json_int_t)ji->stage_total_bytes, "cluster", ji->cluster);
    if (st && ji->cluster) /* of bytes_done: warmed on the nodes that own them, pinned there */
        json_object_set_new(st, "bytes_on_peers", json_integer((json_int_t)ji->staged_on_peers));
    if (st && ji->stage_error[0])
        json_object_set_new(st, "error", api_jstr(ji->stage_error));
    json_t *o = json_pack(
        "{s:o, s:o, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:f}", "job", api_jstr(ji->id), "tenant",
        api_jstr(ji->tenant_name), "class", tier_io_class_name(ji->cls), "state",
        jobs_state_name(ji->state), "cache_bytes", (json_int_t)ji->cache_bytes, "bandwidth_bps",
        (json_int_t)ji->bandwidth_bps, "stage", api_jstr_array(ji->stage, ji->nstage), "stage_out",
        api_jstr_array(ji->stage_out, ji->nstage_out), "staging", st, "submitted_at",
        (double)ji->submitted_ns / (double)TIER_NS_PER_SEC);
    if (o && ji->state == JOBS_QUEUED)
        json_object_set_new(o, "position", json_integer((json_int_t)ji->position));
    if (o && (ji->state == JOBS_QUEUED || ji->reason[0])) /* admitted: its staging waits */
        json_object_set_new(o, "reason", api_jstr(ji->reason));
    if (o && ji->admitted_ns)
        json_object_set_new(o, "admitted_at",
                            json_real((double)ji->admitted_ns / (double)TIER_NS_PER_SEC));
    if (o && ji->tenant == TIER_TENANT_OTHER && strcmp(ji->tenant_name, "other") != 0)
        json_object_set_new(o, "counted_as", json_string("other")); /* the registry was full */
    return o;
}

/* A size or a rate field: a non-negative integer (bytes, bytes/s) or a string ("40G", "800M",
 * "800MiB/s"), at most INT64_MAX (GET answers it as a JSON integer). 0, or -EINVAL. */
static int jobs_amount(json_t *v, bool rate, uint64_t *out)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return -EINVAL;
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s)
        return -EINVAL;
    size_t n = strlen(s);
    if (rate && n > 2 && strcmp(s + n - 2, "/s") == 0) {
        uint64_t r = 0;
        if (tierd_rate_parse(s, &r) != 0)
            return -EINVAL;
        *out = r == TIERD_RATE_NONE ? 0 : r;
        return *out > (uint64_t)INT64_MAX ? -EINVAL : 0;
    }
    return tier_parse_size(s, out) == 0 && *out <= (uint64_t)INT64_MAX ? 0 : -EINVAL;
}

/* Do pin prefixes a and b (keys of one backend: "" all, "dir/" a directory, else one key) take
 * the same keys or one the other's? Not lifecycle_rules.c's keys_overlap(): a pin prefix without
 * a trailing '/' is one key, so "dir" and "dir/x" are apart here, where a namespace prefix "dir"
 * holds "dir/x" there. */
static bool jobs_prefixes_nested(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > lb) {
        const char *t = a;
        a = b;
        b = t;
        la = lb;
    }
    return strcmp(a, b) == 0 || la == 0 || (a[la - 1] == '/' && strncmp(a, b, la) == 0);
}

/* Do mount paths a and b name the same tree or one inside the other ("/ds" and "/ds/a")?
 * Trailing '/' do not count; "/" holds everything. */
static bool jobs_paths_overlap(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    while (na > 0 && a[na - 1] == '/')
        na--;
    while (nb > 0 && b[nb - 1] == '/')
        nb--;
    size_t n = na < nb ? na : nb;
    if (strncmp(a, b, n) != 0)
        return false;
    return na == nb || (na < nb ? b[n] == '/' : a[n] == '/');
}

/* A list of mount paths ("stage", "stage_out"): absent, or an array of at most JOBS_PATHS_MAX
 * strings starting with '/'. The number in *n, or -EINVAL with the message in msg. */
static int jobs_paths(json_t *j, const char *key, size_t *n, char *msg, size_t msz)
{
    json_t *a = json_object_get(j, key);
    *n = 0;
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a) || json_array_size(a) > JOBS_PATHS_MAX) {
        snprintf(msg, msz, "%s must be an array of at most %d mount paths", key, JOBS_PATHS_MAX);
        return -EINVAL;
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        const char *p = json_string_value(json_array_get(a, i));
        if (!p || p[0] != '/' || strlen(p) > 1024) {
            snprintf(msg, msz, "%s[%zu] must be a mount path starting with '/' (\"/datasets/x\")",
                     key, i);
            return -EINVAL;
        }
    }
    *n = json_array_size(a);
    return 0;
}

/* Answer a job: 200 admitted, 409 queued (with position and reason). */
static unsigned reply_job(struct api_reply *out, const struct jobs_info *ji)
{
    return api_reply_json(out, ji->state == JOBS_ADMITTED ? 200 : 409, job_json(ji));
}

/* A POST /v1/jobs request as jobs_parse() checked it and jobs_resolve_stage() resolved its stage
 * paths. The strings point into j, or into the buffers here: the struct is not copied. */
struct jobs_post {
    json_t *j;
    bool dry_run;
    const char *id; /* the job's id: a string, or idbuf for a number */
    char idbuf[32];
    bool has_uid; /* "uid": the uid the job runs as, owner of the Slurm job sjob */
    uint32_t job_uid;
    const char *sjob; /* "slurm_job" (sjbuf for a number); default: the id when it is a number */
    char sjbuf[32];
    const char *tname;
    uint64_t cache_bytes, bw;
    enum tier_io_class cls;
    struct jobs_path stage[JOBS_PATHS_MAX];
    char *prefixes[JOBS_PATHS_MAX]; /* malloc'd: the first nprefix */
    const char *stage_out[JOBS_PATHS_MAX];
    size_t nstage, nprefix, nout;
    bool cluster; /* stage cluster-wide: "cluster" asked, and this node is in a cluster */
};

/* The job's identity: "job", "uid", "slurm_job", "tenant", and "dry_run". 0, or the 400 answered.
 */
static unsigned jobs_parse_who(struct jobs_post *jp, struct api_reply *out)
{
    json_t *j = jp->j;
    json_t *dj = json_object_get(j, "dry_run");
    if (dj && !json_is_boolean(dj))
        return api_reply_error(out, -EINVAL, "dry_run must be true or false");
    jp->dry_run = json_is_true(dj);
    json_t *idj = json_object_get(j, "job");
    jp->id = json_string_value(idj);
    if (json_is_integer(idj) && json_integer_value(idj) >= 0) {
        snprintf(jp->idbuf, sizeof(jp->idbuf), "%lld", (long long)json_integer_value(idj));
        jp->id = jp->idbuf;
    }
    if (!jp->id || !jobs_id_valid(jp->id))
        return api_reply_error(
            out, -EINVAL,
            "job must be the job's id: a number, or 1 to %d letters, digits, '.', "
            "'_', '-', the first a letter or digit (expected {\"job\": 1234, \"tenant\": \"NAME\", "
            "\"cache_bytes\": \"40G\", ...}; see docs/API.md)",
            JOBS_ID_MAX - 1);
    if (api_id_field(j, "uid", &jp->has_uid, &jp->job_uid))
        return api_reply_error(out, -EINVAL,
                               "uid must be a number from 0 to 4294967294 (the uid the "
                               "job runs as)");
    json_t *sjj = json_object_get(j, "slurm_job");
    if (json_is_integer(sjj) && json_integer_value(sjj) >= 0) {
        snprintf(jp->sjbuf, sizeof(jp->sjbuf), "%lld", (long long)json_integer_value(sjj));
        jp->sjob = jp->sjbuf;
    } else if (json_is_string(sjj)) {
        jp->sjob = json_string_value(sjj);
    }
    if (sjj && !json_is_null(sjj) && (!jp->sjob || !tenant_job_valid(jp->sjob)))
        return api_reply_error(out, -EINVAL,
                               "slurm_job must be a Slurm job id (its number, 1 to 20 digits with "
                               "no leading zero, as a string or an integer)");
    if (!jp->sjob && tenant_job_valid(jp->id))
        jp->sjob = jp->id;
    if (jp->has_uid && !jp->sjob)
        return api_reply_error(out, -EINVAL,
                               "uid needs the Slurm job it is the owner of: a job id that is a "
                               "number, or \"slurm_job\": N");
    jp->tname = json_string_value(json_object_get(j, "tenant"));
    if (!jp->tname || !tenant_name_valid(jp->tname))
        return api_reply_error(out, -EINVAL,
                               "tenant must be a tenant name (1 to %d letters, digits, '.', '_', "
                               "'-'); it is registered if new",
                               TENANT_NAME_MAX - 1);
    return 0;
}

/* What the job asks for: "cache_bytes", "bandwidth", "class", "stage" (no two the same or
 * nested), "stage_out" (each inside a write-back namespace) and "cluster". 0, or the 400
 * answered. */
static unsigned jobs_parse_wants(struct tierd *d, struct jobs_post *jp, struct api_reply *out)
{
    json_t *j = jp->j;
    char msg[256];
    json_t *cb = json_object_get(j, "cache_bytes");
    if (!cb || jobs_amount(cb, false, &jp->cache_bytes) != 0)
        return api_reply_error(out, -EINVAL,
                               "cache_bytes must be the hot-tier space the job reserves: bytes, or "
                               "a size like \"40G\" (K/M/G/T are powers of 1024)");
    json_t *bwj = json_object_get(j, "bandwidth");
    if (bwj && !json_is_null(bwj) && jobs_amount(bwj, true, &jp->bw) != 0)
        return api_reply_error(
            out, -EINVAL, "bandwidth must be a rate: bytes/s, or like \"800M\" or \"800MiB/s\"");
    jp->cls = TIER_IO_TRAINING;
    json_t *cj = json_object_get(j, "class");
    if (cj && !json_is_null(cj) &&
        (!json_is_string(cj) || tier_io_class_parse(json_string_value(cj), &jp->cls) != 0))
        return api_reply_error(out, -EINVAL,
                               "class is not allowed (allowed: inference, training, checkpoint, "
                               "background)");
    json_t *clj = json_object_get(j, "cluster");
    if (clj && !json_is_boolean(clj))
        return api_reply_error(out, -EINVAL,
                               "cluster must be true or false (true: stage the job's stage paths "
                               "cluster-wide, each block fetched once, by the node that owns it)");
    /* A tierd in no cluster (no [cluster] section) stages such a job on this node alone and says
     * so (staging.cluster false) rather than refusing it: one tierd_bb.conf serves every node of
     * a Slurm partition, some of which may be in no tierd cluster, and a multi-node job there
     * must run as it would without "cluster" (docs/SLURM.md). */
    jp->cluster = json_is_true(clj) && d->cfg.cluster_name;
    if (json_is_true(clj) && !d->cfg.cluster_name && !jp->dry_run)
        log_info("jobs: job %s asks a cluster-wide staging, and this tierd is in no cluster (no "
                 "[cluster] section): it stages on this node alone",
                 jp->id);
    if (jobs_paths(j, "stage", &jp->nstage, msg, sizeof(msg)) ||
        jobs_paths(j, "stage_out", &jp->nout, msg, sizeof(msg)))
        return api_reply_error(out, -EINVAL, "%s", msg);
    if (jp->nstage && jp->cache_bytes == 0)
        return api_reply_error(out, -EINVAL,
                               "cache_bytes must be more than 0 with stage paths: the staged "
                               "blocks are pinned inside the job's reservation");
    json_t *sa = json_object_get(j, "stage");
    for (size_t i = 0; i < jp->nstage; i++) {
        for (size_t k = 0; k < i; k++) {
            const char *pi = json_string_value(json_array_get(sa, i));
            const char *pk = json_string_value(json_array_get(sa, k));
            if (jobs_paths_overlap(pi, pk))
                return api_reply_error(out, -EINVAL,
                                       "stage[%zu] %.200s and stage[%zu] %.200s are the same or "
                                       "nested: list each tree once",
                                       k, pk, i, pi);
        }
    }
    for (size_t i = 0; i < jp->nout; i++) {
        jp->stage_out[i] = json_string_value(json_array_get(json_object_get(j, "stage_out"), i));
        struct tierd_ns *ns = NULL;
        char *key = NULL;
        bool is_root = false;
        int rc = tierd_resolve(d, jp->stage_out[i], &ns, &key, &is_root);
        free(key);
        if (rc || ns->conf->mode != TIERD_NS_WRITE_BACK)
            return api_reply_error(out, -EINVAL,
                                   "stage_out[%zu] %.200s must be inside a write-back namespace "
                                   "(mode = write-back; GET /v1/status lists the namespaces)",
                                   i, jp->stage_out[i]);
    }
    return 0;
}

/* Each stage path to the pin rule it stands for (backend, key prefix), as POST /v1/pin does; no
 * two taking the same keys. 0, or the error answered. */
static unsigned jobs_resolve_stage(struct tierd *d, struct jobs_post *jp, struct api_reply *out)
{
    for (size_t i = 0; i < jp->nstage; i++) {
        const char *p = json_string_value(json_array_get(json_object_get(jp->j, "stage"), i));
        struct tierd_ns *ns = NULL;
        tier_err_clear();
        /* a dry run resolves only (no backend I/O: the Slurm provider asks it at sbatch, inside
         * slurmctld), so a path that names nothing is found at the real request */
        bool is_root = false;
        /* a dataset version's path pins its tree's keys, as POST /v1/pin does */
        int rc = api_version_prefix(d, p, &ns, &jp->prefixes[i], jp->dry_run);
        if (rc == 1)
            rc = jp->dry_run ? tierd_resolve(d, p, &ns, &jp->prefixes[i], &is_root)
                             : api_path_prefix(d, p, &ns, &jp->prefixes[i]);
        if (rc)
            return api_reply_error_status(
                out, rc == -ENOENT || rc == -EINVAL ? 400 : api_http_status(rc), rc,
                "stage[%zu] %.200s: %s", i, p,
                rc == -ENOENT && !*tier_err_msg()
                    ? "is not inside any namespace (GET /v1/status lists them)"
                : *tier_err_msg() ? tier_err_msg()
                                  : strerror(-rc));
        jp->nprefix = i + 1;
        jp->stage[i] =
            (struct jobs_path){.path = p, .backend = ns->be->name, .prefix = jp->prefixes[i]};
        /* a version's path and its tree's (or two versions of one tree) pin the same keys, and
         * their unchanged files would count twice against cache_bytes */
        for (size_t k = 0; k < i; k++) {
            if (strcmp(jp->stage[k].backend, jp->stage[i].backend) == 0 &&
                jobs_prefixes_nested(jp->stage[k].prefix, jp->stage[i].prefix))
                return api_reply_error(out, -EINVAL,
                                       "stage[%zu] %.200s and stage[%zu] %.200s take the same keys "
                                       "of backend %s (a version and its tree, or two versions of "
                                       "one tree): list each tree once",
                                       k, jp->stage[k].path, i, p, jp->stage[i].backend);
        }
    }
    return 0;
}

/* The job's tenant id: found, or registered now with the job's class (a full registry folds it
 * into "other"). 0, or the error answered. */
static unsigned jobs_tenant(struct tierd *d, const struct jobs_post *jp, uint32_t *tenant,
                            struct api_reply *out)
{
    /* registered even when the name exists: an implicit tenant (slurm-N, resolved before the
     * job was admitted) becomes explicit, so reclaim does not hand its id to another tenant
     * while the job holds it (tenant_register: it takes the job's class; an explicit tenant of
     * another class is -EEXIST and keeps its own) */
    tier_err_clear();
    enum tier_io_class cls = jp->cls;
    int rc = tenant_register(d->tenants, jp->tname, &cls, NULL, tenant, NULL);
    if (rc == -EEXIST && tenant_find(d->tenants, jp->tname, tenant) == 0)
        rc = 0; /* registered meanwhile by another request, with another class */
    if (rc == -ENOSPC) {
        /* A full registry folds the job's tenant into "other", as resolution does: a job's
         * admission and data never depend on a telemetry id. */
        log_warn("jobs: the tenant registry is full ([tenants] max_tenants): job %s's tenant "
                 "'%s' is counted as 'other'",
                 jp->id, jp->tname);
        tenant_note_folded(d->tenants);
        *tenant = TIER_TENANT_OTHER; /* the job keeps the name it asked for ("counted_as") */
        rc = 0;
    }
    if (rc)
        return api_reply_error(out, rc, "cannot register tenant '%s': %s", jp->tname,
                               *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    return 0;
}

/* A valid request: precheck it; a dry run says whether it could fit and records nothing; else
 * register the tenant (only for a request that is neither rejected nor a conflict: it stays)
 * and submit. */
static unsigned jobs_submit_post(struct tierd *d, struct jobs_post *jp, struct api_reply *out)
{
    if (!d->tenants)
        return api_reply_error(out, -ENOTSUP, "tierd runs without a tenant registry");
    struct jobs_request jr = {.id = jp->id,
                              .tenant = TIER_TENANT_DEFAULT,
                              .tenant_name = jp->tname,
                              .cls = jp->cls,
                              .cache_bytes = jp->cache_bytes,
                              .bandwidth_bps = jp->bw,
                              .stage = jp->stage,
                              .nstage = jp->nstage,
                              .stage_out = jp->stage_out,
                              .nstage_out = jp->nout,
                              .cluster = jp->cluster};
    char why[256];
    enum jobs_verdict pre = jobs_precheck(d->jobs, &jr, why, sizeof(why));
    if (pre == JOBS_REJECT)
        return api_reply_error_status(out, 422, -ENOSPC, "job %s is rejected: %s", jp->id, why);
    if (jp->dry_run) { /* valid and could fit: say so, record and register nothing */
        json_t *a = json_pack("{s:b, s:s, s:s, s:s, s:b}", "dry_run", 1, "job", jp->id, "verdict",
                              pre == JOBS_CONFLICT ? "conflict" : "valid", "reason", why, "cluster",
                              jp->cluster);
        return a ? api_reply_json(out, 200, a) : api_reply_error(out, -ENOMEM, "out of memory");
    }
    if (pre == JOBS_CONFLICT)
        return api_reply_error_status(out, 409, -EEXIST, "%s", why);
    unsigned ret = jobs_tenant(d, jp, &jr.tenant, out);
    if (ret)
        return ret;
    enum jobs_verdict v = JOBS_REJECT;
    struct jobs_info ji;
    int rc = jobs_submit(d->jobs, &jr, &v, &ji);
    if (rc == -ENOSPC)
        ret = api_reply_error_status(
            out, 503, rc, "%d jobs are admitted or queued already: release some", JOBS_MAX);
    else if (rc)
        ret = api_reply_error(out, rc, "cannot submit job %s: %s", jp->id, strerror(-rc));
    else if (v == JOBS_REJECT)
        ret =
            api_reply_error_status(out, 422, -ENOSPC, "job %s is rejected: %s", jp->id, ji.reason);
    else if (v == JOBS_CONFLICT)
        ret = api_reply_error_status(out, 409, -EEXIST, "%s", ji.reason);
    else
        ret = reply_job(out, &ji);
    /* admitted or queued: the job's processes are its uid's */
    if (rc == 0 && jp->has_uid && (v == JOBS_ADMIT || v == JOBS_QUEUE))
        (void)tenant_job_owner_set_by(d->tenants, jp->sjob, (uid_t)jp->job_uid, jp->id);
    if (rc == 0)
        jobs_info_fini(&ji);
    return ret;
}

/* Validate the whole body (fields, sizes, paths: each resolved to its pin rule) before anything
 * changes; then register the tenant if it is new, and submit. */
unsigned api_jobs_post(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                       const char *rest)
{
    (void)rest;
    if (!d->jobs)
        return api_reply_error(out, -ENOTSUP, "tierd runs without job admission");
    struct jobs_post jp = {0};
    unsigned ret;
    jp.j = api_parse_body(rq, out, &ret);
    if (!jp.j)
        return ret;
    static const char *const fields[] = {"job",       "tenant",    "stage",     "cache_bytes",
                                         "bandwidth", "class",     "stage_out", "dry_run",
                                         "uid",       "slurm_job", "cluster"};
    const char *bad = api_unknown_field(jp.j, fields, sizeof(fields) / sizeof(fields[0]));
    /* each step answers its error and returns the status, or 0 to go on */
    if (bad)
        ret = api_reply_error(out, -EINVAL, "unknown field '%.60s' (allowed: " JOBS_POST_FIELDS ")",
                              bad);
    else
        ret = jobs_parse_who(&jp, out);
    if (!ret)
        ret = jobs_parse_wants(d, &jp, out);
    if (!ret)
        ret = jobs_resolve_stage(d, &jp, out);
    if (!ret)
        ret = jobs_submit_post(d, &jp, out);
    for (size_t i = 0; i < jp.nprefix; i++)
        free(jp.prefixes[i]);
    json_decref(jp.j);
    return ret;
}

unsigned api_jobs_list(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                       const char *rest)
{
    (void)rq;
    (void)rest;
    if (!d->jobs)
        return api_reply_error(out, -ENOTSUP, "tierd runs without job admission");
    struct jobs_info *v = NULL;
    size_t n = 0;
    struct jobs_capacity c;
    int rc = jobs_list(d->jobs, &v, &n, &c);
    if (rc)
        return api_reply_error(out, rc, "cannot list jobs: %s", strerror(-rc));
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, job_json(&v[i]));
    jobs_list_free(v, n);
    return api_reply_json(
        out, 200,
        json_pack("{s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}", "jobs", arr, "capacity",
                  "level_bytes", (json_int_t)c.level_bytes, "pin_budget", (json_int_t)c.pin_budget,
                  "pinned_bytes", (json_int_t)c.pinned_bytes, "jobs_pinned_bytes",
                  (json_int_t)c.jobs_pinned_bytes, "capacity_bytes", (json_int_t)c.capacity_bytes,
                  "reserved_bytes", (json_int_t)c.reserved_bytes, "reservable_bytes",
                  (json_int_t)c.reservable_bytes, "admitted", (json_int_t)c.admitted, "queued",
                  (json_int_t)c.queued));
}

/* GET or DELETE /v1/jobs/ID (rest: ID) */
unsigned api_jobs_one(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                      const char *rest)
{
    const char *id = rest;
    if (!d->jobs)
        return api_reply_error(out, -ENOTSUP, "tierd runs without job admission");
    bool del = strcmp(rq->method, "DELETE") == 0;
    struct jobs_info ji;
    int rc = del ? jobs_release(d->jobs, id, &ji) : jobs_get(d->jobs, id, &ji);
    /* a released job's Slurm job (the slurm_job its POST named) no longer names a tenant by its
     * SLURM_JOB_ID: the owner entries this job set go, not another job's for the same number */
    if (del && rc == 0 && d->tenants)
        tenant_job_owner_release(d->tenants, id);
    if (rc == -ENOENT)
        return api_reply_error(out, rc, "no job '%.80s' (GET /v1/jobs lists them)", id);
    if (rc)
        return api_reply_error(out, rc, "job %.80s: %s", id, strerror(-rc));
    json_t *o = job_json(&ji);
    jobs_info_fini(&ji);
    if (!del)
        return api_reply_json(out, 200, o);
    return api_reply_json(out, 200, json_pack("{s:o, s:o}", "released", api_jstr(id), "job", o));
}
