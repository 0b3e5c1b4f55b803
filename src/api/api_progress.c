/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_progress.c - POST /v1/progress: a training loop's data-stall report (the seconds it waited
 * for its next batch and computed between batches since its last report, and the batches), kept
 * per tenant by the telemetry's stall store (telemetry/stall.h) and exported by /metrics, GET
 * /v1/telemetry and `tierctl top` (docs/API.md "Data stalls", docs/ADVICE.md "The stall signal").
 *
 * Whose report: the caller's own tenant, resolved from its SO_PEERCRED pid, uid and gid as the
 * mount resolves its reads (so a Slurm job's or a pod's loop lands in the tenant its reads are
 * charged to); a caller who is no administrator and resolves to default or other is refused, as
 * hints are (those tenants are every unmatched caller's), and may not name another tenant. An
 * administrator may name any tenant; without one, its own resolved tenant (default or other
 * included), or default over TCP. Called on the HTTP server's connection threads; the store is
 * thread-safe.
 */
#include <errno.h>
#include <string.h>

#include "api/api_int.h"
#include "common/err.h"
#include "common/timeutil.h"
#include "core/state.h"
#include "telemetry/stall.h"
#include "telemetry/telemetry.h"
#include "tenant/tenant.h"

#define USAGE                                                                                      \
    "expected {\"name\": \"NAME\", \"wait_s\": SECONDS, \"compute_s\": SECONDS, \"steps\": N, "    \
    "\"tenant\": \"NAME\"} (tenant optional)"

/* The tenant the report is for into *tenant, or the refusal answered into out (returns its
 * status; 0 when *tenant is set). */
static unsigned report_tenant(struct tierd *d, const struct api_request *rq, json_t *tj,
                              struct api_reply *out, uint32_t *tenant)
{
    uint32_t named = TIER_TENANT_DEFAULT;
    if (tj && (!d->tenants || tenant_find(d->tenants, json_string_value(tj), &named) != 0))
        return api_reply_no_tenant(out, json_string_value(tj));
    if (rq->admin) {
        if (tj)
            *tenant = named;
        else if (rq->peer && d->tenants)
            *tenant = tenant_resolve(d->tenants, rq->pid, rq->uid, rq->gid).tenant;
        else
            *tenant = TIER_TENANT_DEFAULT;
        return 0;
    }
    if (!rq->peer || !d->tenants)
        return api_reply_error_status(out, 403, -EPERM,
                                      "POST /v1/progress: tierd cannot tell who is asking (report "
                                      "over the Unix socket, or as an administrator)");
    uint32_t own = tenant_resolve(d->tenants, rq->pid, rq->uid, rq->gid).tenant;
    if (own == TIER_TENANT_DEFAULT || own == TIER_TENANT_OTHER)
        return api_reply_error_status(
            out, 403, -EPERM,
            "POST /v1/progress: your requests are tenant default's (or other's), which every "
            "unmatched caller shares: stall reports need a tenant of your own (a [tenant NAME] "
            "section, a Slurm job or a pod), or an administrator");
    if (tj && named != own)
        return api_reply_error_status(out, 403, -EPERM,
                                      "POST /v1/progress: only root, tierd's user or [api] "
                                      "admin_group may report for another tenant than the "
                                      "caller's own (%.80s)",
                                      tenant_name(d->tenants, own));
    *tenant = own;
    return 0;
}

unsigned api_progress_post(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                           const char *rest)
{
    (void)rest;
    struct stall *st = tele_stall(d->tele);
    if (!st)
        return api_reply_error_status(out, 404, -ENOTSUP,
                                      "telemetry is off ([daemon] telemetry = off in the config): "
                                      "no stall reports");
    unsigned ret;
    json_t *j = api_parse_body(rq, out, &ret);
    if (!j)
        return ret;
    static const char *const fields[] = {"name", "wait_s", "compute_s", "steps", "tenant"};
    const char *bad = api_unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    json_t *nj = json_object_get(j, "name"), *tj = json_object_get(j, "tenant");
    json_t *wj = json_object_get(j, "wait_s"), *cj = json_object_get(j, "compute_s");
    json_t *sj = json_object_get(j, "steps");
    if (bad || !json_is_string(nj) || !json_is_number(wj) || !json_is_number(cj) ||
        !json_is_integer(sj) || (tj && !json_is_string(tj))) {
        ret = api_reply_error(out, -EINVAL, "%s%.60s%s" USAGE, bad ? "unknown field '" : "",
                              bad ? bad : "", bad ? "': " : "");
        goto out;
    }
    const char *name = json_string_value(nj);
    double wait_s = json_number_value(wj), compute_s = json_number_value(cj);
    json_int_t steps = json_integer_value(sj);
    /* checked before the tenant is resolved: a bad report creates no implicit tenant */
    tier_err_clear();
    int rc = stall_report_check(name, wait_s, compute_s, (double)steps);
    if (rc) {
        ret = api_reply_error(out, rc, "POST /v1/progress: %s", tier_err_msg());
        goto out;
    }
    uint32_t tenant = TIER_TENANT_DEFAULT;
    ret = report_tenant(d, rq, tj, out, &tenant);
    if (ret)
        goto out;
    rc = stall_report(st, tenant, name, wait_s, compute_s, (uint64_t)steps, tier_now_mono_ns());
    if (rc) {
        ret = api_reply_error(out, rc, "POST /v1/progress: %s",
                              *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        goto out;
    }
    const char *tn = d->tenants ? tenant_name(d->tenants, tenant) : NULL;
    ret = api_reply_json(
        out, 200, json_pack("{s:s, s:o}", "name", name, "tenant", api_jstr(tn ? tn : "default")));
out:
    json_decref(j);
    return ret;
}
