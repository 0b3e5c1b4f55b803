/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_tenants.c - the tenant registry through the control API (tenant.h): GET and POST
 * /v1/tenants. Called on the HTTP server's connection threads; the registry is thread-safe.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "api/api_int.h"
#include "core/state.h"
#include "tenant/tenant.h"

static json_t *rule_json(const struct tenant_rule *ru)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (ru->slurm_job)
        json_object_set_new(o, "slurm_job", api_jstr(ru->slurm_job));
    if (ru->cgroup_prefix)
        json_object_set_new(o, "cgroup", api_jstr(ru->cgroup_prefix));
    if (ru->has_uid)
        json_object_set_new(o, "uid", json_integer((json_int_t)ru->uid));
    if (ru->has_gid)
        json_object_set_new(o, "gid", json_integer((json_int_t)ru->gid));
    return o;
}

static json_t *tenant_json(struct tenant_reg *r, uint32_t id)
{
    struct tenant_rule stack[8], *rules = stack;
    size_t n = tenant_rules(r, id, stack, 8);
    if (n > 8) {
        rules = calloc(n, sizeof(*rules));
        if (!rules)
            return NULL;
        (void)tenant_rules(r, id, rules, n); /* rules only grow: the first n are these */
    }
    json_t *rj = json_array();
    for (size_t i = 0; rj && i < n; i++)
        json_array_append_new(rj, rule_json(&rules[i]));
    if (rules != stack)
        free(rules);
    return json_pack("{s:I, s:o, s:s, s:b, s:o}", "id", (json_int_t)id, "name",
                     api_jstr(tenant_name(r, id)), "class", tier_io_class_name(tenant_class(r, id)),
                     "implicit", tenant_implicit(r, id), "rules", rj);
}

unsigned api_tenants_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                         const char *rest)
{
    (void)rq;
    (void)rest;
    struct tenant_reg *r = d->tenants;
    if (!r)
        return api_reply_error(out, -ENOTSUP, "tierd runs without a tenant registry");
    json_t *arr = json_array();
    uint32_t n = tenant_count(r);
    for (uint32_t id = 0; arr && id < n; id++) {
        if (!tenant_in_use(r, id)) /* reclaimed: its counters are retired's */
            continue;
        json_t *tj = tenant_json(r, id);
        struct cache_tenant_stats ts;
        if (tj && d->cache && cache_tenant_stats_get(d->cache, id, &ts) == 0)
            json_object_set_new(tj, "cache",
                                json_pack("{s:I, s:I, s:I, s:I, s:I}", "bytes",
                                          (json_int_t)ts.bytes, "blocks", (json_int_t)ts.blocks,
                                          "quota", (json_int_t)ts.quota, "quota_evictions",
                                          (json_int_t)ts.quota_evictions, "quota_evicted_bytes",
                                          (json_int_t)ts.quota_evicted_bytes));
        if (json_array_append_new(arr, tj) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    return api_reply_json(
        out, 200,
        json_pack("{s:o, s:I, s:{s:I, s:I, s:I, s:I}, s:I, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}}",
                  "tenants", arr, "max_tenants", (json_int_t)tenant_max(r), "pid_cache", "entries",
                  (json_int_t)st.cache_entries, "hits", (json_int_t)st.cache_hits, "misses",
                  (json_int_t)st.cache_misses, "evictions", (json_int_t)st.cache_evictions,
                  "folded", (json_int_t)st.folded, "trust", "job_owners", (json_int_t)st.job_owners,
                  "env_ignored", (json_int_t)st.env_ignored, "uid_mismatch",
                  (json_int_t)st.uid_mismatch, "rate_folded", (json_int_t)st.rate_folded, "reclaim",
                  "reclaimed", (json_int_t)st.reclaimed, "ids_free", (json_int_t)st.ids_free));
}

#define TENANT_POST_FIELDS "name, class, slurm_job, uid, gid, cgroup"

/* An optional uid/gid field: absent or null, or an integer from 0 to 4294967294. */
int api_id_field(json_t *j, const char *key, bool *has, uint32_t *val)
{
    json_t *v = json_object_get(j, key);
    *has = false;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4294967294LL)
        return -EINVAL;
    *has = true;
    *val = (uint32_t)json_integer_value(v);
    return 0;
}

/* Validate the whole body before anything changes: a bad field answers 400 and registers
 * nothing. */
unsigned api_tenants_post(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                          const char *rest)
{
    (void)rest;
    if (!d->tenants)
        return api_reply_error(out, -ENOTSUP, "tierd runs without a tenant registry");
    unsigned ret;
    json_t *j = api_parse_body(rq, out, &ret);
    if (!j)
        return ret;
    static const char *const fields[] = {"name", "class", "slurm_job", "uid", "gid", "cgroup"};
    const char *bad = api_unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    if (bad) {
        ret = api_reply_error(out, -EINVAL,
                              "unknown field '%.60s' (allowed: " TENANT_POST_FIELDS ")", bad);
        goto out;
    }
    const char *name = json_string_value(json_object_get(j, "name"));
    if (!name) {
        ret = api_reply_error(out, -EINVAL,
                              "expected {\"name\": \"NAME\", \"class\": \"inference\", ...} (name "
                              "required; optional: class, slurm_job, uid, gid, cgroup)");
        goto out;
    }
    if (!tenant_name_valid(name)) {
        ret = api_reply_error(
            out, -EINVAL, "name '%.80s' is not allowed (1 to %d letters, digits, '.', '_', '-')",
            name, TENANT_NAME_MAX - 1);
        goto out;
    }
    enum tier_io_class cls = TIER_IO_TRAINING;
    json_t *cj = json_object_get(j, "class");
    bool has_cls = cj && !json_is_null(cj);
    if (has_cls && (!json_is_string(cj) || tier_io_class_parse(json_string_value(cj), &cls))) {
        ret = api_reply_error(out, -EINVAL,
                              "class %s%.40s%s is not allowed (allowed: inference, training, "
                              "checkpoint, background)",
                              json_is_string(cj) ? "'" : "",
                              json_is_string(cj) ? json_string_value(cj) : "(not a string)",
                              json_is_string(cj) ? "'" : "");
        goto out;
    }
    struct tenant_rule rule = {.tenant = name, .cls = cls};
    char job[32];
    json_t *jj = json_object_get(j, "slurm_job");
    if (json_is_integer(jj) && json_integer_value(jj) >= 0) {
        snprintf(job, sizeof(job), "%lld", (long long)json_integer_value(jj));
        rule.slurm_job = job;
    } else if (json_is_string(jj)) {
        rule.slurm_job = json_string_value(jj);
    }
    if (jj && !json_is_null(jj) && (!rule.slurm_job || !tenant_job_valid(rule.slurm_job))) {
        ret =
            api_reply_error(out, -EINVAL,
                            "slurm_job must be a Slurm job id (its number, 1 to 20 digits with no "
                            "leading zero, as a string or an integer)");
        goto out;
    }
    json_t *gj = json_object_get(j, "cgroup");
    if (gj && !json_is_null(gj)) {
        const char *problem = json_is_string(gj)
                                  ? tenant_cgroup_prefix_problem(json_string_value(gj))
                                  : "is not a string";
        if (problem) {
            ret = api_reply_error(out, -EINVAL,
                                  "cgroup %s (a cgroup path prefix as in /proc/PID/cgroup, like "
                                  "/system.slice/inference.service)",
                                  problem);
            goto out;
        }
        rule.cgroup_prefix = json_string_value(gj);
    }
    uint32_t uid = 0, gid = 0;
    if (api_id_field(j, "uid", &rule.has_uid, &uid) ||
        api_id_field(j, "gid", &rule.has_gid, &gid)) {
        ret = api_reply_error(out, -EINVAL, "uid and gid must be numbers from 0 to 4294967294");
        goto out;
    }
    rule.uid = (uid_t)uid;
    rule.gid = (gid_t)gid;
    uint32_t id = 0;
    bool created = false;
    tier_err_clear();
    int rc = tenant_register(d->tenants, name, has_cls ? &cls : NULL, &rule, &id, &created);
    /* a scheduler naming a job's uid tells who owns the job: its SLURM_JOB_ID is then believed
     * for that uid (tenant/tenant.h) */
    if (rc == 0 && rule.slurm_job && rule.has_uid)
        rc = tenant_job_owner_set(d->tenants, rule.slurm_job, rule.uid);
    if (rc)
        ret = api_reply_error(out, rc, "cannot register tenant '%s': %s", name,
                              *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    else
        ret = api_reply_json(out, created ? 201 : 200,
                             json_pack("{s:I, s:o, s:s, s:b}", "id", (json_int_t)id, "name",
                                       api_jstr(tenant_name(d->tenants, id)), "class",
                                       tier_io_class_name(tenant_class(d->tenants, id)), "created",
                                       created));
out:
    json_decref(j);
    return ret;
}
