/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_status.c - the control API's figures: GET /v1/status, /v1/stats, /metrics, /v1/telemetry
 * and /v1/health, gathered from the modules' thread-safe stats calls at each request.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "api/api_int.h"
#include "lifecycle/lifecycle.h"
#include "core/state.h"
#include "qos/sched.h"
#include "telemetry/telemetry.h"
#include "tenant/tenant.h"
#include "writeback/wb.h"

/* ---- figures --------------------------------------------------------------------------- */

static json_t *level_json(const struct cache_level_stats *l)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "used", (json_int_t)l->bytes_used,
                     "budget", (json_int_t)l->bytes_budget, "blocks", (json_int_t)l->blocks, "hits",
                     (json_int_t)l->hits, "misses", (json_int_t)l->misses, "evictions",
                     (json_int_t)l->evictions, "bytes_read", (json_int_t)l->bytes_read);
}

/* Share of block lookups served from RAM or disk: every lookup starts at the first level that
 * exists, and a miss there is a hit or a miss of the disk level. */
static double hit_ratio(const struct cache_stats *s)
{
    uint64_t hits = s->ram.hits + s->disk.hits;
    uint64_t lookups =
        s->ram.bytes_budget ? s->ram.hits + s->ram.misses : s->disk.hits + s->disk.misses;
    if (lookups == 0)
        return 0.0;
    double r = (double)hits / (double)lookups;
    return r > 1.0 ? 1.0 : r;
}

static json_t *cache_json(struct tierd *d)
{
    struct cache_stats s;
    memset(&s, 0, sizeof(s));
    if (d->cache)
        cache_stats_get(d->cache, &s);
    json_t *j = json_pack(
        "{s:o, s:o, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}", "ram", level_json(&s.ram),
        "disk", level_json(&s.disk), "pinned_bytes", (json_int_t)s.pinned_bytes, "pin_budget",
        (json_int_t)s.pin_budget, "hit_ratio", hit_ratio(&s), "fetches", (json_int_t)s.fetches,
        "fetch_bytes", (json_int_t)s.fetch_bytes, "fetch_errors", (json_int_t)s.fetch_errors,
        "fetch_ns_total", (json_int_t)s.fetch_ns_total, "singleflight_waits",
        (json_int_t)s.singleflight_waits, "checksum_failures", (json_int_t)s.checksum_failures);
    /* blocks a cluster's peers gave instead of the backend (docs/CLUSTER.md) */
    if (j)
        json_object_update_missing_new(j, json_pack("{s:I, s:I}", "peer_fetches",
                                                    (json_int_t)s.peer_fetches, "peer_bytes",
                                                    (json_int_t)s.peer_bytes));
    /* the fetch-buffer bound ([cache] max_fetches) and the disk lane's skipped write-throughs */
    if (j)
        json_object_update_missing_new(
            j, json_pack("{s:I, s:I, s:I, s:I, s:I}", "max_fetches", (json_int_t)s.max_fetches,
                         "fetch_buffers_now", (json_int_t)s.fetch_buffers_now, "fetch_buffers_peak",
                         (json_int_t)s.fetch_buffers_peak, "fetch_slot_waits",
                         (json_int_t)s.fetch_slot_waits, "disk_store_skipped",
                         (json_int_t)s.disk_store_skipped));
    /* write-throughs off the reader's path, and those a full queue kept on it */
    if (j)
        json_object_update_missing_new(
            j, json_pack("{s:I, s:I}", "disk_store_async", (json_int_t)s.disk_store_async,
                         "disk_store_inline", (json_int_t)s.disk_store_inline));
    /* read-ahead sized from the bandwidth-delay product: prefetch GETs in flight, and the last
     * sizing's reader rate, measured block fetch time and window (docs/CACHE.md) */
    if (j)
        json_object_update_missing_new(
            j, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "prefetch_inflight",
                         (json_int_t)s.prefetch_inflight, "prefetch_inflight_peak",
                         (json_int_t)s.prefetch_inflight_peak, "readahead_rate_bps",
                         (json_int_t)s.readahead_rate_bps, "readahead_fetch_ns",
                         (json_int_t)s.readahead_fetch_ns, "readahead_window",
                         (json_int_t)s.readahead_window, "readahead_window_peak",
                         (json_int_t)s.readahead_window_peak));
    /* space quotas: bytes charged to tenants, blocks their quotas evicted */
    if (j)
        json_object_update_missing_new(j, json_pack("{s:I, s:I}", "charged_bytes",
                                                    (json_int_t)s.charged_bytes, "quota_evictions",
                                                    (json_int_t)s.quota_evictions));
    return j;
}

static json_t *status_json(struct tierd *d)
{
    json_t *nss = json_array();
    for (size_t i = 0; i < d->nns; i++) {
        const struct tierd_ns_conf *n = d->ns[i].conf;
        const char *type = "";
        for (size_t b = 0; b < d->cfg.nbackends; b++)
            if (strcmp(d->cfg.backends[b].name, n->backend) == 0)
                type = d->cfg.backends[b].type;
        json_array_append_new(
            nss,
            json_pack("{s:o, s:o, s:o, s:o, s:s}", "path", api_jstr(n->path), "backend",
                      api_jstr(n->backend), "type", api_jstr(type), "prefix", api_jstr(n->prefix),
                      "mode", n->mode == TIERD_NS_WRITE_BACK ? "write-back" : "read-cache"));
    }
    uint64_t now = tier_now_real_ns();
    uint64_t up = now > d->start_ns ? (now - d->start_ns) / TIER_NS_PER_SEC : 0;
    json_t *j = json_pack("{s:s, s:I, s:o, s:b, s:o, s:o}", "version", TIER_VERSION, "uptime_s",
                          (json_int_t)up, "mount", api_jstr(d->cfg.mount_path), "mounted",
                          d->mounted, "cache", cache_json(d), "namespaces", nss);
    struct api_conn_stats cs;
    api_conn_stats(d, &cs);
    json_object_set_new(j, "api",
                        json_pack("{s:i, s:i, s:i, s:I}", "connections_admin", cs.admin,
                                  "connections_user", cs.user, "user_uids", cs.user_uids,
                                  "refused_connections", (json_int_t)cs.refused));
    if (d->wb) {
        struct wb_stats w;
        wb_stats_get(d->wb, &w);
        json_object_set_new(
            j, "writeback",
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "dirty_bytes",
                      (json_int_t)w.dirty_bytes, "open", (json_int_t)w.files[WB_OPEN], "sealed",
                      (json_int_t)w.files[WB_SEALED], "uploading",
                      (json_int_t)w.files[WB_UPLOADING], "held", (json_int_t)w.held, "uploads_done",
                      (json_int_t)w.uploads_done, "upload_retries", (json_int_t)w.upload_retries,
                      "backpressure_waits", (json_int_t)w.backpressure_waits, "failed",
                      (json_int_t)w.files[WB_FAILED]));
    }
    return j;
}

/* Each backend's scheduler lane and the calls it admitted, by operation. */
static json_t *backends_json(struct tierd *d)
{
    json_t *arr = json_array();
    if (!d->sched)
        return arr;
    for (size_t i = 0; i < d->cfg.nbackends; i++) {
        uint64_t calls[SCHED_BE_NOPS], notfound[SCHED_BE_NOPS];
        if (!d->backends[i] ||
            sched_backend_calls_get(d->sched, d->backends[i], calls, notfound) != 0)
            continue;
        struct sched_backend_stats bs[TIERD_MAX_BACKENDS];
        size_t n = sched_backend_stats_get(d->sched, bs, TIERD_MAX_BACKENDS);
        const struct sched_backend_stats *b = NULL;
        for (size_t k = 0; k < n && k < TIERD_MAX_BACKENDS; k++)
            if (strcmp(bs[k].name, d->backends[i]->name) == 0)
                b = &bs[k];
        if (!b)
            continue;
        json_t *cj = json_object(), *nj = json_object();
        for (int op = 0; op < SCHED_BE_NOPS; op++) {
            json_object_set_new(cj, sched_be_op_name((enum sched_be_op)op),
                                json_integer((json_int_t)calls[op]));
            json_object_set_new(nj, sched_be_op_name((enum sched_be_op)op),
                                json_integer((json_int_t)notfound[op]));
        }
        json_t *bj = json_pack(
            "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "name", b->name,
            "breaker", sched_breaker_state_name(b->breaker), "max_inflight",
            (json_int_t)b->max_inflight, "inflight_now", (json_int_t)b->inflight_now, "queued_now",
            (json_int_t)b->queued_now, "admitted", (json_int_t)b->admitted, "completed",
            (json_int_t)b->completed, "failures", (json_int_t)b->failures, "admit_timeouts",
            (json_int_t)b->admit_timeouts, "breaker_opens", (json_int_t)b->breaker_opens,
            "fast_fails", (json_int_t)b->fast_fails, "calls", cj, "calls_not_found", nj);
        /* QoS (dmClock): grants by phase, how often every waiting client was at its limit
         * while slots were free, and how often every waiting call was held back for inference */
        json_object_set_new(bj, "link_capacity",
                            b->link_capacity_bps ? json_integer((json_int_t)b->link_capacity_bps)
                                                 : json_null());
        json_object_set_new(bj, "grants_reservation",
                            json_integer((json_int_t)b->grants_reservation));
        json_object_set_new(bj, "grants_weight", json_integer((json_int_t)b->grants_weight));
        json_object_set_new(bj, "limit_waits", json_integer((json_int_t)b->limit_waits));
        json_object_set_new(bj, "yield_waits", json_integer((json_int_t)b->yield_waits));
        /* reads in parts while inference has demand: the part size (0: none) and how many */
        json_object_set_new(bj, "split_bytes", json_integer((json_int_t)b->split_bytes));
        json_object_set_new(bj, "split_reads", json_integer((json_int_t)b->split_reads));
        json_array_append_new(arr, bj);
    }
    return arr;
}

static json_t *stats_json(struct tierd *d)
{
    json_t *j = status_json(d);
    json_t *sched = json_object();
    if (d->sched) {
        struct sched_stats st;
        memset(&st, 0, sizeof(st));
        sched_stats_get(d->sched, &st);
        for (int i = 0; i < TIER_IO_NCLASSES; i++) {
            const struct sched_class_stats *c = &st.cls[i];
            json_t *cj = json_pack(
                "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "admitted", (json_int_t)c->admitted,
                "completed", (json_int_t)c->completed, "errors", (json_int_t)c->errors, "bytes",
                (json_int_t)c->bytes, "wait_ns_total", (json_int_t)c->wait_ns_total,
                "service_ns_total", (json_int_t)c->service_ns_total, "queued_now",
                (json_int_t)c->queued_now, "inflight_now", (json_int_t)c->inflight_now);
            /* The legacy class names (interactive, streaming) are answered too, until the next
             * release. */
            const char *legacy = tier_io_class_legacy_name((enum tier_io_class)i);
            if (strcmp(legacy, tier_io_class_name((enum tier_io_class)i)) != 0)
                json_object_set(sched, legacy, cj);
            json_object_set_new(sched, tier_io_class_name((enum tier_io_class)i), cj);
        }
    }
    json_object_set_new(j, "sched", sched);
    /* requests per FUSE connection: the main one and the no-open one (fuse_noopen.c) */
    json_t *fj = json_object();
    for (int i = 0; i < 2; i++) {
        const struct tierd_fuse_counts *fc = &d->fuse_counts[i];
        json_object_set_new(fj, i == 0 ? "main" : "no_open",
                            json_pack("{s:I, s:I, s:I, s:I}", "open",
                                      (json_int_t)atomic_load(&fc->open), "release",
                                      (json_int_t)atomic_load(&fc->release), "read",
                                      (json_int_t)atomic_load(&fc->read), "opendir",
                                      (json_int_t)atomic_load(&fc->opendir)));
    }
    json_object_set_new(j, "fuse_requests", fj);
    json_object_set_new(j, "backends", backends_json(d));
    /* 0 in tierd: every layer passes its request's ioctx (test_sched_rgw checks) */
    json_object_set_new(j, "backend_calls_without_ioctx",
                        json_integer((json_int_t)backend_calls_without_ioctx()));
    return j;
}

/* ---- telemetry and health ---------------------------------------------------------------- */

/* Largest /metrics or /v1/telemetry answer: 64 tenants x 4 classes with every op and tier is
 * about 30 MB of exposition (docs/BENCHMARKS.md); the cap only stops a runaway. */
#define TELE_BODY_MAX (512u << 20)

/* The backend names of g point into names (the caller's, TELE_MAX_BACKENDS entries). */
struct gauge_names {
    struct sched_backend_stats be[TELE_MAX_BACKENDS];
    struct tele_space *space; /* malloc'd: gauges_fini() */
    struct tele_policy policies[POLICY_MAX_RULES + TIERD_MAX_NAMESPACES];
    char pnames[POLICY_MAX_RULES + TIERD_MAX_NAMESPACES][POLICY_NAME_MAX];
};

static void gauges_fini(struct gauge_names *nm)
{
    free(nm->space);
    nm->space = NULL;
}

/* The tenants that hold hot-tier bytes or have a quota (space quotas, cache.h) into nm->space;
 * on ENOMEM none are shown. */
static void gather_space(struct tierd *d, struct tele_gauges *g, struct gauge_names *nm)
{
    unsigned max = cache_max_tenants(d->cache);
    uint32_t n = d->tenants ? tenant_count(d->tenants) : max;
    if (n > max)
        n = max;
    nm->space = n ? calloc(n, sizeof(*nm->space)) : NULL;
    for (uint32_t id = 0; nm->space && id < n; id++) {
        struct cache_tenant_stats ts;
        if (cache_tenant_stats_get(d->cache, id, &ts) != 0 ||
            (!ts.bytes && !ts.quota && !ts.quota_evictions))
            continue;
        nm->space[g->nspace++] = (struct tele_space){.tenant = id,
                                                     .bytes = ts.bytes,
                                                     .quota = ts.quota,
                                                     .quota_evictions = ts.quota_evictions};
    }
    g->space = nm->space;
}

/* Oldest wait since seal of the files the burst buffer has not uploaded yet, in s. */
static double oldest_backlog_s(struct tierd *d)
{
    uint64_t oldest_ms = 0;
    for (size_t i = 0; i < d->nns; i++) {
        const struct tierd_ns_conf *n = d->ns[i].conf;
        if (n->mode != TIERD_NS_WRITE_BACK)
            continue;
        struct wb_file_info *list = NULL;
        size_t nl = 0;
        if (wb_list(d->wb, n->backend, n->prefix, &list, &nl) != 0)
            continue; /* the gauge is a lower bound then; the counts below are exact */
        for (size_t k = 0; k < nl; k++)
            if ((list[k].state == WB_SEALED || list[k].state == WB_UPLOADING) &&
                list[k].waiting_ms > oldest_ms)
                oldest_ms = list[k].waiting_ms;
        wb_list_free(list, nl);
    }
    return (double)oldest_ms / 1000.0;
}

/* Gather the gauges of /metrics, /v1/telemetry and /v1/health from the modules' stats. */
static void gather_gauges(struct tierd *d, struct tele_gauges *g, struct gauge_names *nm)
{
    memset(g, 0, sizeof(*g));
    nm->space = NULL;
    if (d->cache) {
        struct cache_stats s;
        memset(&s, 0, sizeof(s));
        cache_stats_get(d->cache, &s);
        g->ram_used_bytes = s.ram.bytes_used;
        g->ram_capacity_bytes = s.ram.bytes_budget;
        g->disk_used_bytes = s.disk.bytes_used;
        g->disk_capacity_bytes = s.disk.bytes_budget;
        g->pinned_bytes = s.pinned_bytes;
        gather_space(d, g, nm);
    }
    if (d->wb) {
        struct wb_stats w;
        wb_stats_get(d->wb, &w);
        g->writeback = true;
        g->wb_backlog_files = w.files[WB_SEALED] + w.files[WB_UPLOADING];
        g->wb_backlog_bytes = w.dirty_bytes;
        g->wb_failed_files = w.files[WB_FAILED];
        g->wb_oldest_backlog_age_s = g->wb_backlog_files ? oldest_backlog_s(d) : 0.0;
        g->wb_backlog_age_limit_s = (double)d->cfg.health_backlog_ms / 1000.0;
    }
    struct policy_engine *pe = __atomic_load_n(&d->policy, __ATOMIC_ACQUIRE);
    if (pe) {
        struct policy_counts pc[POLICY_MAX_RULES + TIERD_MAX_NAMESPACES];
        size_t n = policy_engine_counts(pe, pc, sizeof(pc) / sizeof(pc[0]));
        for (size_t i = 0; i < n; i++) {
            tier_strlcpy(nm->pnames[i], pc[i].name, sizeof(nm->pnames[i]));
            nm->policies[i] = (struct tele_policy){.name = nm->pnames[i],
                                                   .ns = pc[i].ns,
                                                   .action = policy_action_name(pc[i].action),
                                                   .done = pc[i].done,
                                                   .bytes = pc[i].bytes,
                                                   .deferred = pc[i].deferred,
                                                   .failed = pc[i].failed,
                                                   .skipped = pc[i].skipped};
        }
        g->npolicies = (unsigned)n;
        g->policies = nm->policies;
    }
    if (d->sched) {
        size_t n = sched_backend_stats_get(d->sched, nm->be, TELE_MAX_BACKENDS);
        g->nbackends = (unsigned)(n < TELE_MAX_BACKENDS ? n : TELE_MAX_BACKENDS);
        for (unsigned i = 0; i < g->nbackends; i++) {
            g->backends[i].name = nm->be[i].name;
            g->backends[i].breaker = (int)nm->be[i].breaker;
            g->backends[i].inflight = nm->be[i].inflight_now;
            g->backends[i].queued = nm->be[i].queued_now;
        }
    }
}

static unsigned tele_render(struct tierd *d, struct api_reply *out, bool prom)
{
    if (!d->tele)
        return api_reply_error_status(out, 404, -ENOTSUP,
                                      "telemetry is off ([daemon] telemetry = off in the config)");
    struct tele_gauges g;
    struct gauge_names nm;
    gather_gauges(d, &g, &nm);
    struct dynbuf b;
    dynbuf_init(&b, TELE_BODY_MAX);
    int rc = prom ? tele_render_prometheus(d->tele, &g, &b) : tele_render_json(d->tele, &g, &b);
    if (rc == 0 && prom)
        rc = api_advice_prom(d, &b);
    gauges_fini(&nm);
    size_t len = 0;
    char *text = rc == 0 ? dynbuf_take(&b, &len) : NULL;
    dynbuf_fini(&b);
    if (!text)
        return api_reply_error(out, rc ? rc : -ENOMEM, "cannot render the telemetry: %s",
                               strerror(rc ? -rc : ENOMEM));
    out->status = 200;
    out->body = text;
    out->len = len;
    out->is_static = false;
    out->content_type = prom ? "text/plain; version=0.0.4; charset=utf-8" : NULL;
    return 200;
}

unsigned api_health(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                    const char *rest)
{
    (void)rq;
    (void)rest;
    struct tele_gauges g;
    struct gauge_names nm;
    gather_gauges(d, &g, &nm);
    struct tele_health h;
    tele_health_eval(&g, &h);
    gauges_fini(&nm);
    json_t *reasons = json_array();
    for (unsigned i = 0; i < h.nreasons; i++)
        json_array_append_new(reasons, api_jstr(h.reasons[i]));
    /* 200 when degraded too: tierd still serves (docs/API.md, "GET /v1/health") */
    return api_reply_json(
        out, 200,
        json_pack("{s:s, s:o}", "status", h.nreasons ? "degraded" : "ready", "reasons", reasons));
}

unsigned api_status_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                        const char *rest)
{
    (void)rq;
    (void)rest;
    return api_reply_json(out, 200, status_json(d));
}

unsigned api_stats_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                       const char *rest)
{
    (void)rq;
    (void)rest;
    return api_reply_json(out, 200, stats_json(d));
}

unsigned api_metrics_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                         const char *rest)
{
    (void)rq;
    (void)rest;
    return tele_render(d, out, true);
}

unsigned api_telemetry_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                           const char *rest)
{
    (void)rq;
    (void)rest;
    return tele_render(d, out, false);
}
