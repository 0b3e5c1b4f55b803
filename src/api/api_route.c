/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_route.c - the control API's one route table, and the three things that read it: admission
 * before the body (api_admit: token, caller's rights, body bound), the body bound itself
 * (api_body_max, also for api.c's reader) and dispatch (api_handle). A route is one row: method,
 * path, how the path matches, handler, who may call, whether it changes state, body bounds. A new
 * route cannot be added without deciding its access, and docs/API.md "Routes" lists the same
 * rows (tests/unit/test_api_routes.c checks both ways).
 *
 * Threads: the table is constant; called on the HTTP server's connection threads, concurrently.
 */
#include <errno.h>
#include <string.h>

#include "api/api_int.h"
#include "core/state.h"

/* A row: METHOD, path, match, handler, access, mutates, body bound (administrator, others). */
#define ROUTE(m, p, match, fn, access, mutates)                                                    \
    {                                                                                              \
        m, p, match, fn, access, mutates, API_BODY_MAX, API_BODY_MAX                               \
    }

/* First match wins: an exact row before a prefix row of the same path ("/ui/"). */
const struct api_route api_routes[] = {
    ROUTE("GET", "/v1/status", API_EXACT, api_status_get, API_READ, false),
    ROUTE("GET", "/v1/stats", API_EXACT, api_stats_get, API_READ, false),
    ROUTE("GET", "/metrics", API_EXACT, api_metrics_get, API_READ, false),
    ROUTE("GET", "/v1/telemetry", API_EXACT, api_telemetry_get, API_READ, false),
    ROUTE("GET", "/v1/health", API_EXACT, api_health, API_READ, false),
    ROUTE("GET", "/v1/cluster", API_EXACT, api_cluster_get, API_READ, false),
    ROUTE("GET", "/v1/advice", API_EXACT, api_advice_get, API_READ, false),
    ROUTE("POST", "/v1/stage", API_EXACT, api_stage_post, API_ADMIN, true),
    ROUTE("GET", "/v1/stage/", API_PREFIX, api_stage_get, API_READ, false),
    ROUTE("POST", "/v1/pin", API_EXACT, api_pin, API_ADMIN, true),
    ROUTE("POST", "/v1/unpin", API_EXACT, api_unpin, API_ADMIN, true),
    ROUTE("POST", "/v1/evict", API_EXACT, api_evict, API_ADMIN, true),
    /* a wait reads the burst buffer's state and changes nothing */
    ROUTE("POST", "/v1/wait", API_EXACT, api_wait, API_READ, false),
    ROUTE("GET", "/v1/checkpoints", API_EXACT, api_checkpoints, API_READ, false),
    ROUTE("GET", "/v1/tenants", API_EXACT, api_tenants_get, API_READ, false),
    ROUTE("POST", "/v1/tenants", API_EXACT, api_tenants_post, API_ADMIN, true),
    ROUTE("POST", "/v1/jobs", API_EXACT, api_jobs_post, API_ADMIN, true),
    ROUTE("GET", "/v1/jobs", API_EXACT, api_jobs_list, API_READ, false),
    ROUTE("GET", "/v1/jobs/", API_PREFIX, api_jobs_one, API_READ, false),
    ROUTE("DELETE", "/v1/jobs/", API_PREFIX, api_jobs_one, API_ADMIN, true),
    ROUTE("POST", "/v1/datasets", API_EXACT, api_datasets_post, API_ADMIN, true),
    ROUTE("GET", "/v1/datasets", API_EXACT, api_datasets_list, API_READ, false),
    ROUTE("GET", "/v1/datasets/", API_PREFIX, api_datasets_one, API_READ, false),
    ROUTE("DELETE", "/v1/datasets/", API_PREFIX, api_datasets_one, API_ADMIN, true),
    ROUTE("POST", "/v1/reload", API_EXACT, api_reload, API_ADMIN, true),
    ROUTE("GET", "/v1/policy", API_EXACT, api_policy_get, API_READ, false),
    ROUTE("POST", "/v1/policy/run", API_EXACT, api_policy_run, API_ADMIN, true),
    /* a plan only reads (the backend's listing, the journals); rate-limited per uid */
    ROUTE("POST", "/v1/policy/plan", API_EXACT, api_policy_plan, API_READ, false),
    ROUTE("GET", "/v1/qos", API_EXACT, api_qos_get, API_READ, false),
    ROUTE("PUT", "/v1/qos", API_EXACT, api_qos_put, API_ADMIN, true),
    /* a hint is anyone's advice for their own tenant (the handlers check who asks); an epoch's
     * order is a path per sample, hence its own body bounds */
    {"POST", "/v1/hints", API_EXACT, api_hints_post, API_OWN, true, API_HINTS_BODY_MAX,
     API_HINTS_BODY_MAX_USER},
    ROUTE("GET", "/v1/hints", API_EXACT, api_hints_get, API_READ, false),
    ROUTE("DELETE", "/v1/hints/", API_PREFIX, api_hints_delete, API_OWN, true),
    /* a training loop's stall report, for its own tenant (the handler checks who asks) */
    ROUTE("POST", "/v1/progress", API_EXACT, api_progress_post, API_OWN, true),
    /* The dashboard's files are the same static bytes for everyone and hold no data (every
     * figure the page shows comes from /v1/telemetry, which needs the token); a browser cannot
     * send a header when it navigates to a page, and the token must not go into a URL. Exact
     * names, not a prefix: "/ui/../v1/telemetry" is not public, whatever routes it. */
    ROUTE("GET", "/ui", API_EXACT, api_ui, API_PUBLIC, false),
    ROUTE("GET", "/ui/", API_EXACT, api_ui, API_PUBLIC, false),
    ROUTE("GET", "/ui/dashboard.js", API_EXACT, api_ui, API_PUBLIC, false),
    ROUTE("GET", "/ui/dashboard.css", API_EXACT, api_ui, API_PUBLIC, false),
    ROUTE("GET", "/ui/chart.js", API_EXACT, api_ui, API_PUBLIC, false),
    ROUTE("GET", "/ui/", API_PREFIX, api_ui, API_READ, false), /* 404 for any other name */
};
const size_t api_nroutes = sizeof(api_routes) / sizeof(api_routes[0]);

const struct api_route *api_route_find(const char *method, const char *url, const char **rest)
{
    if (!method || !url)
        return NULL;
    for (size_t i = 0; i < api_nroutes; i++) {
        const struct api_route *r = &api_routes[i];
        size_t n = strlen(r->path);
        if (strcmp(method, r->method) != 0)
            continue;
        if (r->match == API_EXACT ? strcmp(url, r->path) != 0 : strncmp(url, r->path, n) != 0)
            continue;
        if (rest)
            *rest = r->match == API_EXACT ? "" : url + n;
        return r;
    }
    return NULL;
}

bool api_route_public(const char *method, const char *url)
{
    const struct api_route *r = api_route_find(method, url, NULL);
    return r && r->access == API_PUBLIC;
}

bool api_route_admin(const char *method, const char *url)
{
    const struct api_route *r = api_route_find(method, url, NULL);
    if (r)
        return r->access == API_ADMIN;
    return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
}

size_t api_body_max(const char *method, const char *url, bool admin)
{
    const struct api_route *r = api_route_find(method, url, NULL);
    if (!r)
        return API_BODY_MAX;
    return admin ? r->body_max : r->body_max_user;
}

static bool token_ok(const struct tierd *d, const char *h)
{
    const char *tok = d->cfg.api_token;
    if (!h || !tok || strncmp(h, "Bearer ", 7) != 0)
        return false;
    const char *given = h + 7;
    size_t gl = strlen(given), tl = strlen(tok);
    /* constant time in the token's length: no early exit on the first differing byte */
    unsigned char diff = (unsigned char)(gl != tl);
    for (size_t i = 0; i < tl; i++)
        diff |= (unsigned char)(tok[i] ^ (i < gl ? given[i] : 0));
    return diff == 0;
}

int api_admit(struct tierd *d, const struct api_head *h, struct api_reply *out)
{
    if (h->tcp && !token_ok(d, h->authorization) && !api_route_public(h->method, h->url)) {
        api_reply_error_status(out, 401, -EACCES,
                               "missing or wrong bearer token (send Authorization: Bearer <[api] "
                               "token>)");
        return 1;
    }
    if (!h->tcp && !h->may_mutate && api_route_admin(h->method, h->url)) {
        api_reply_error_status(out, 403, -EPERM,
                               "%s %s changes tierd's state: only root, tierd's own user or a "
                               "member of [api] admin_group may do that over the socket (reading "
                               "is open to everyone who may connect)",
                               h->method, h->url);
        return 1;
    }
    if (h->content_length > (int64_t)api_body_max(h->method, h->url, h->may_mutate)) {
        api_reply_too_large(out);
        return 1;
    }
    return 0;
}

void api_handle(struct tierd *d, const struct api_request *rq, struct api_reply *out)
{
    out->body = NULL;
    out->is_static = false;
    out->content_type = NULL;
    out->retry_after_s = 0;
    const char *rest = "";
    const struct api_route *r = api_route_find(rq->method, rq->url, &rest);
    if (r)
        r->handler(d, rq, out, rest);
    else
        api_reply_error(out, -ENOENT, "no such endpoint: %s %s (see docs/API.md)", rq->method,
                        rq->url);
}
