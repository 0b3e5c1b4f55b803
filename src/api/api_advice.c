/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_advice.c - GET /v1/advice (docs/API.md, docs/ADVICE.md): the node's miss-ratio curve with
 * what it predicts at the RAM and disk levels' sizes, and the advice loop's latest round per
 * tenant (advice/advisor.h): hit ratio and stall now, the curve with the backend rate and stall
 * predicted at each size, the size that brings the stall under the target, and the share of the
 * hot tier the split gives it. Called on the HTTP server's threads.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "advice/advisor.h"
#include "api/api_int.h"
#include "cache/cache.h"
#include "cache/mrc.h"
#include "common/timeutil.h"
#include "common/dynbuf.h"
#include "core/state.h"
#include "telemetry/telemetry.h"
#include "tenant/tenant.h"

static json_t *num_or_null(double x)
{
    return isnan(x) ? json_null() : json_real(x);
}

static json_t *size_or_null(uint64_t s)
{
    return s == UINT64_MAX ? json_null() : json_integer((json_int_t)s);
}

static json_t *tenant_json(const struct advisor_result *r)
{
    json_t *curve = json_array();
    for (size_t k = 0; curve && k < r->in.npoints; k++) {
        struct advice_pred p;
        advice_predict(&r->in, r->in.curve[k].size_bytes, &p);
        json_array_append_new(
            curve, json_pack("{s:I, s:o, s:o, s:o}", "size_bytes", (json_int_t)p.size_bytes,
                             "hit_ratio", num_or_null(r->in.curve[k].hit_ratio), "backend_bps",
                             json_real(p.backend_bps), "stall", num_or_null(p.stall)));
    }
    return json_pack("{s:I, s:s, s:I, s:f, s:f, s:o, s:o, s:o, s:o, s:I, s:f, s:f, s:f, s:I, s:o}",
                     "id", (json_int_t)r->tenant, "name", r->name, "share_bytes",
                     (json_int_t)r->in.share_bytes, "demand_bps", r->in.demand_bps, "hit_ratio",
                     r->out.hit_now, "stall", num_or_null(r->out.stall_now), "wait_s",
                     r->in.has_stall ? json_real(r->in.wait_s) : json_null(), "compute_s",
                     r->in.has_stall ? json_real(r->in.compute_s) : json_null(), "size_for_target",
                     size_or_null(r->out.size_for_target), "split_bytes",
                     (json_int_t)r->out.split_bytes, "weight", r->in.weight, "cost_now",
                     r->out.cost_now, "cost_split", r->out.split_cost, "quota_changes",
                     (json_int_t)r->quota_changes, "curve", curve);
}

/* The node's curve, and its hit ratio read at each level's size. */
static json_t *node_json(struct tierd *d)
{
    struct mrc_point pt[CACHE_MRC_SIZES];
    size_t n = 0;
    if (cache_mrc_curve(d->cache, -1, pt, CACHE_MRC_SIZES, &n) != 0)
        return json_null();
    struct advice_in in = {.npoints = n < ADVICE_POINTS_MAX ? n : ADVICE_POINTS_MAX};
    json_t *curve = json_array();
    for (size_t k = 0; k < in.npoints; k++) {
        in.curve[k] = (struct advice_point){pt[k].size_bytes, pt[k].hit_ratio};
        json_array_append_new(curve,
                              json_pack("{s:I, s:o}", "size_bytes", (json_int_t)pt[k].size_bytes,
                                        "hit_ratio", num_or_null(pt[k].hit_ratio)));
    }
    const struct cache_config *cc = &d->cfg.cache;
    uint64_t disk = cc->disk_dir ? cc->disk_bytes : 0;
    struct advice_pred ram, dsk;
    advice_predict(&in, cc->ram_bytes, &ram);
    advice_predict(&in, disk, &dsk);
    return json_pack("{s:I, s:I, s:f, s:o, s:I, s:o}", "ram_bytes", (json_int_t)cc->ram_bytes,
                     "disk_bytes", (json_int_t)disk, "hit_ratio_ram", ram.hit_ratio,
                     "hit_ratio_disk", disk ? json_real(dsk.hit_ratio) : json_null(), "curve_drops",
                     (json_int_t)cache_mrc_dropped(d->cache), "curve", curve);
}

unsigned api_advice_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                        const char *rest)
{
    (void)rq;
    (void)rest;
    if (!d->advisor || !d->cache)
        return api_reply_json(
            out, 200,
            json_pack("{s:b, s:s}", "enabled", 0, "how",
                      "set [cache] curves = on (or [tenants] auto_quota = on) and restart"));
    struct advisor_view v;
    if (advisor_get(d->advisor, &v) != 0)
        return api_reply_error(out, -ENOMEM, "out of memory");
    json_t *tenants = json_array();
    uint64_t need = 0;
    bool all_known = true;
    for (size_t i = 0; tenants && i < v.n; i++) {
        json_array_append_new(tenants, tenant_json(&v.r[i]));
        uint64_t s = v.r[i].out.size_for_target;
        if (s == UINT64_MAX)
            all_known = false;
        else
            need += s ? s : v.r[i].in.share_bytes;
    }
    int util = d->cfg.advice_target_util ? d->cfg.advice_target_util : 85;
    uint64_t age_ns = v.at_ns ? tier_now_mono_ns() - v.at_ns : 0;
    json_t *j = json_pack(
        "{s:b, s:b, s:I, s:f, s:o, s:f, s:I, s:f, s:f, s:b, s:o, s:o, s:o}", "enabled", 1,
        "auto_quota", d->cfg.auto_quota, "rounds", (json_int_t)v.ticks, "interval_s", v.interval_s,
        "age_s", v.at_ns ? json_real((double)age_ns / 1e9) : json_null(), "target_utilisation",
        util / 100.0, "hot_bytes",
        (json_int_t)(d->cfg.cache.disk_dir && d->cfg.cache.disk_bytes ? d->cfg.cache.disk_bytes
                                                                      : d->cfg.cache.ram_bytes),
        "cost_now", v.cost_now, "cost_split", v.cost_split, "moved", v.moved,
        "hot_bytes_for_target", all_known ? json_integer((json_int_t)need) : json_null(), "node",
        node_json(d), "tenants", tenants);
    advisor_view_free(&v);
    return api_reply_json(out, 200, j);
}

/* One sample: NAME{tenant="T",size="S"} VALUE (tenant or size may be NULL). */
static int prom_sample(struct dynbuf *b, const char *name, const char *tenant, const char *size,
                       double v)
{
    int rc = dynbuf_printf(b, "%s", name);
    if (rc == 0 && (tenant || size))
        rc = dynbuf_printf(b, "{");
    if (rc == 0 && tenant) {
        rc = dynbuf_printf(b, "tenant=\"");
        if (rc == 0)
            rc = tele_prom_escape(b, tenant, strlen(tenant));
        if (rc == 0)
            rc = dynbuf_printf(b, "\"%s", size ? "," : "");
    }
    if (rc == 0 && size)
        rc = dynbuf_printf(b, "size=\"%s\"", size);
    if (rc == 0 && (tenant || size))
        rc = dynbuf_printf(b, "}");
    if (rc == 0)
        rc = dynbuf_printf(b, " %.9g\n", v);
    return rc;
}

int api_advice_prom(struct tierd *d, struct dynbuf *b)
{
    if (!d->advisor || !d->cache)
        return 0;
    struct advisor_view v;
    if (advisor_get(d->advisor, &v) != 0)
        return -ENOMEM;
    int rc = dynbuf_printf(
        b,
        "# HELP tierd_advice_hit_ratio hit ratio the tenant's miss-ratio curve predicts at half, "
        "once and twice its hot-tier share (docs/ADVICE.md)\n"
        "# TYPE tierd_advice_hit_ratio gauge\n");
    static const struct {
        const char *label;
        double f;
    } at[3] = {{"half", 0.5}, {"share", 1}, {"double", 2}};
    for (size_t i = 0; rc == 0 && i < v.n; i++)
        for (int k = 0; rc == 0 && k < 3; k++) {
            struct advice_pred p;
            advice_predict(&v.r[i].in, (uint64_t)((double)v.r[i].in.share_bytes * at[k].f), &p);
            rc = prom_sample(b, "tierd_advice_hit_ratio", v.r[i].name, at[k].label, p.hit_ratio);
        }
    if (rc == 0)
        rc = dynbuf_printf(b, "# HELP tierd_advice_split_bytes the tenant's share in the advised "
                              "split of the hot tier\n# TYPE tierd_advice_split_bytes gauge\n");
    for (size_t i = 0; rc == 0 && i < v.n; i++)
        rc = prom_sample(b, "tierd_advice_split_bytes", v.r[i].name, NULL,
                         (double)v.r[i].out.split_bytes);
    if (rc == 0)
        rc = dynbuf_printf(b, "# HELP tierd_advice_quota_changes_total hot-tier quota changes "
                              "made by auto_quota\n# TYPE tierd_advice_quota_changes_total "
                              "counter\n");
    /* every tenant with a change, whether or not it read in the last round: a counter stays */
    uint32_t nt = d->tenants ? tenant_count(d->tenants) : 0;
    for (uint32_t t = 0; rc == 0 && t < nt; t++) {
        uint64_t c = advisor_quota_changes(d->advisor, t);
        if (c && tenant_in_use(d->tenants, t))
            rc = prom_sample(b, "tierd_advice_quota_changes_total", tenant_name(d->tenants, t),
                             NULL, (double)c);
    }
    /* the node: its curve read at the levels' sizes and at twice the disk */
    struct mrc_point pt[CACHE_MRC_SIZES];
    size_t n = 0;
    if (rc == 0 && cache_mrc_curve(d->cache, -1, pt, CACHE_MRC_SIZES, &n) == 0) {
        struct advice_in in = {.npoints = n < ADVICE_POINTS_MAX ? n : ADVICE_POINTS_MAX};
        for (size_t k = 0; k < in.npoints; k++)
            in.curve[k] = (struct advice_point){pt[k].size_bytes, pt[k].hit_ratio};
        const struct cache_config *cc = &d->cfg.cache;
        uint64_t disk = cc->disk_dir ? cc->disk_bytes : 0;
        rc = dynbuf_printf(b, "# HELP tierd_advice_node_hit_ratio hit ratio the node's curve "
                              "predicts at the RAM level's size, the disk level's and twice "
                              "that\n# TYPE tierd_advice_node_hit_ratio gauge\n");
        struct advice_pred p;
        advice_predict(&in, cc->ram_bytes, &p);
        if (rc == 0)
            rc = prom_sample(b, "tierd_advice_node_hit_ratio", NULL, "ram", p.hit_ratio);
        if (disk) {
            advice_predict(&in, disk, &p);
            if (rc == 0)
                rc = prom_sample(b, "tierd_advice_node_hit_ratio", NULL, "disk", p.hit_ratio);
            advice_predict(&in, 2 * disk, &p);
            if (rc == 0)
                rc =
                    prom_sample(b, "tierd_advice_node_hit_ratio", NULL, "double_disk", p.hit_ratio);
        }
        if (rc == 0)
            rc = dynbuf_printf(b,
                               "# HELP tierd_advice_curve_drops_total accesses left out of "
                               "every curve while the curves' queue was full\n# TYPE "
                               "tierd_advice_curve_drops_total counter\n"
                               "tierd_advice_curve_drops_total %" PRIu64 "\n",
                               cache_mrc_dropped(d->cache));
    }
    advisor_view_free(&v);
    return rc;
}
