/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_hints.c - epoch-order hints through the control API (hints.h, docs/HINTS.md): POST
 * /v1/hints, GET /v1/hints and DELETE /v1/hints/NAME. Anyone who may connect may hint for their
 * own tenant (hints_caller_tenant); an administrator for any. Called on the HTTP server's
 * connection threads; the hint engine is thread-safe.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "api/api_int.h"
#include "hints/hints.h"
#include "core/state.h"
#include "tenant/tenant.h"

/* one size limit for a non-administrator's hint, by the API or by a control file */
_Static_assert(API_HINTS_BODY_MAX_USER == HINTS_USER_BYTES_MAX,
               "POST /v1/hints's body bound for users is the hint files' (hints.h)");

/* Whose hint a request may give: -1 an administrator's (any tenant, "tenant" names it, default
 * the default tenant); a caller's own tenant id (resolved from its SO_PEERCRED pid, uid, gid as
 * the mount resolves its reads); -2 nobody's (a non-administrator whose peer is unknown). */
static int64_t hints_caller_tenant(struct tierd *d, const struct api_request *rq)
{
    if (rq->admin)
        return -1;
    if (!rq->peer || !d->tenants)
        return -2;
    uint32_t t = tenant_resolve(d->tenants, rq->pid, rq->uid, rq->gid).tenant;
    /* default and other are every unmatched caller's: no one of them may act for all */
    return t == TIER_TENANT_DEFAULT || t == TIER_TENANT_OTHER ? -3 : (int64_t)t;
}

/* Validated whole before anything changes (hints_submit is all or nothing too). */
unsigned api_hints_post(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                        const char *rest)
{
    (void)rest;
    if (!d->hints)
        return api_reply_error(out, -ENOTSUP, "tierd runs without a cache: no hints");
    unsigned ret;
    json_t *j = api_parse_body(rq, out, &ret);
    if (!j)
        return ret;
    static const char *const fields[] = {"name", "tenant", "paths", "append"};
    const char *bad = api_unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    json_t *nj = json_object_get(j, "name"), *tj = json_object_get(j, "tenant");
    json_t *pj = json_object_get(j, "paths"), *aj = json_object_get(j, "append");
    const char **pv = NULL;
    if (bad || !json_is_string(nj) || !json_is_array(pj) || (tj && !json_is_string(tj)) ||
        (aj && !json_is_boolean(aj))) {
        ret = api_reply_error(out, -EINVAL,
                              "%s%.60s%sexpected {\"name\": \"NAME\", \"paths\": [\"/ns/file\", "
                              "...], \"tenant\": \"NAME\", \"append\": false} (tenant and append "
                              "optional)",
                              bad ? "unknown field '" : "", bad ? bad : "", bad ? "': " : "");
        goto out;
    }
    uint32_t tenant = TIER_TENANT_DEFAULT;
    if (tj && (!d->tenants || tenant_find(d->tenants, json_string_value(tj), &tenant) != 0)) {
        ret = api_reply_no_tenant(out, json_string_value(tj));
        goto out;
    }
    int64_t own = hints_caller_tenant(d, rq);
    if (own == -2 || own == -3) {
        ret = api_reply_error_status(
            out, 403, -EPERM,
            own == -2 ? "POST /v1/hints: tierd cannot tell who is asking (hint over the Unix "
                        "socket, or as an administrator)"
                      : "POST /v1/hints: your requests are tenant default's (or other's), which "
                        "every unmatched caller shares: hints need a tenant of your own (a "
                        "[tenant NAME] section, a Slurm job or a pod), or an administrator");
        goto out;
    }
    if (own >= 0 && tj && (uint32_t)own != tenant) {
        ret = api_reply_error_status(out, 403, -EPERM,
                                     "POST /v1/hints: only root, tierd's user or [api] admin_group "
                                     "may hint for another tenant than the caller's own (%.80s)",
                                     tenant_name(d->tenants, (uint32_t)own));
        goto out;
    }
    if (own >= 0)
        tenant = (uint32_t)own;
    size_t n = json_array_size(pj);
    pv = calloc(n ? n : 1, sizeof(*pv));
    if (!pv) {
        ret = api_reply_error(out, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        pv[i] = json_string_value(json_array_get(pj, i));
        if (!pv[i] || pv[i][0] != '/') {
            ret = api_reply_error(out, -EINVAL, "paths[%zu] must be a mount path starting with '/'",
                                  i);
            goto out;
        }
    }
    tier_err_clear();
    int rc =
        hints_submit(d->hints, json_string_value(nj), tenant, pv, n, json_is_true(aj), rq->admin);
    if (rc)
        ret = api_reply_error(out, rc, "cannot take the hint: %s",
                              *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    else
        ret = api_reply_json(
            out, 200,
            json_pack("{s:s, s:I}", "name", json_string_value(nj), "entries", (json_int_t)n));
out:
    free(pv);
    json_decref(j);
    return ret;
}

unsigned api_hints_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                       const char *rest)
{
    (void)rq;
    (void)rest;
    struct hints_set_stats *st = malloc(HINTS_SETS_MAX * sizeof(*st)); /* too big for a stack */
    if (!st)
        return api_reply_error(out, -ENOMEM, "out of memory");
    size_t n = d->hints ? hints_list(d->hints, st, HINTS_SETS_MAX) : 0;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n && i < HINTS_SETS_MAX; i++) {
        const struct hints_set_stats *s = &st[i];
        const char *tn = d->tenants ? tenant_name(d->tenants, s->tenant) : NULL;
        json_array_append_new(
            arr,
            json_pack("{s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                      "s:o}",
                      "name", s->name, "tenant", api_jstr(tn ? tn : "default"), "entries",
                      (json_int_t)s->entries, "files", (json_int_t)s->files, "cursor",
                      (json_int_t)s->cursor, "window_files", (json_int_t)s->window_files,
                      "window_bytes", (json_int_t)s->window_bytes, "held_bytes",
                      (json_int_t)s->held_bytes, "budget", (json_int_t)s->budget, "fetched_files",
                      (json_int_t)s->fetched_files, "fetched_bytes", (json_int_t)s->fetched_bytes,
                      "already_held", (json_int_t)s->already_held, "released",
                      (json_int_t)s->released, "errors", (json_int_t)s->errors, "skipped",
                      (json_int_t)s->skipped, "first_error", api_jstr(s->first_error)));
        /* where the sizes and etags came from: the mount's listings, or a stat each */
        json_t *last = json_array_get(arr, json_array_size(arr) - 1);
        if (last)
            json_object_update_missing_new(last, json_pack("{s:I, s:I, s:I}", "attrs_listed",
                                                           (json_int_t)s->attrs_listed,
                                                           "attrs_stat", (json_int_t)s->attrs_stat,
                                                           "bytes", (json_int_t)s->bytes));
    }
    free(st);
    /* manifest reads of all submissions: each version read once per submission */
    return api_reply_json(out, 200,
                          json_pack("{s:o, s:I}", "sets", arr, "manifest_reads",
                                    (json_int_t)hints_manifest_reads(d->hints)));
}

/* DELETE /v1/hints/NAME: an administrator's of any set, anyone else's of their tenant's. */
unsigned api_hints_delete(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                          const char *rest)
{
    int64_t own = hints_caller_tenant(d, rq);
    int rc = own < -1 ? -EPERM : d->hints ? hints_cancel(d->hints, rest, own) : -ENOENT;
    if (rc == -EPERM)
        return api_reply_error_status(out, 403, -EPERM,
                                      "hint set '%.80s' is another tenant's: only its tenant or an "
                                      "administrator may drop it",
                                      rest);
    if (rc)
        return api_reply_error(out, -ENOENT, "no hint set '%.80s' (GET /v1/hints lists them)",
                               rest);
    return api_reply_json(out, 200, json_pack("{s:s}", "dropped", rest));
}
