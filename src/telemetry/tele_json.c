/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tele_json.c - the JSON of GET /v1/telemetry (tele_render_json; format in docs/API.md):
 * cumulative counters and the non-empty buckets of every series, so that a client diffs two
 * snapshots for rates and quantiles over the interval between them (tele_quantile_diff).
 *
 * Written by hand into the dynbuf (the module depends on tier_common only): strings are escaped
 * per RFC 8259 and bytes that are not valid UTF-8 become U+FFFD, as the API's jstr() does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "telemetry/gpu.h"
#include "telemetry/tele_int.h"

static void put_double(struct tele_out *o, double v)
{
    char buf[40];
    snprintf(buf, sizeof(buf), "%.6f", v);
    tele_out_put(o, buf);
}

static void put_str(struct tele_out *o, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    tele_out_put(o, "\"");
    for (size_t i = 0; i < n && o->rc == 0;) {
        unsigned char c = u[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c, esc[2] = 0;
            tele_out_put(o, esc);
            i++;
        } else if (c < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            tele_out_put(o, esc);
            i++;
        } else {
            size_t seq = tier_utf8_seq(u + i, n - i);
            if (seq == 0) {
                tele_out_put(o, "\xEF\xBF\xBD");
                i++;
            } else {
                o->rc = dynbuf_append(o->b, s + i, seq);
                i += seq;
            }
        }
    }
    tele_out_put(o, "\"");
}

static void key(struct tele_out *o, const char *k)
{
    tele_out_put(o, "\"");
    tele_out_put(o, k);
    tele_out_put(o, "\":");
}

static void kv_u64(struct tele_out *o, const char *k, uint64_t v, bool comma)
{
    key(o, k);
    tele_out_u64(o, v);
    if (comma)
        tele_out_put(o, ",");
}

static void kv_str(struct tele_out *o, const char *k, const char *v, bool comma)
{
    key(o, k);
    put_str(o, v);
    if (comma)
        tele_out_put(o, ",");
}

/* "sum_ns":..,"min_ns":..,"max_ns":..,"buckets":[[upper,count],...] */
static void hist_fields(struct tele_out *o, const struct tele_hist_copy *c)
{
    kv_u64(o, "sum_ns", c->sum_ns, true);
    kv_u64(o, "min_ns", c->min_ns, true);
    kv_u64(o, "max_ns", c->max_ns, true);
    key(o, "buckets");
    tele_out_put(o, "[");
    bool first = true;
    for (unsigned i = 0; i < TELE_HIST_NBUCKETS; i++) {
        if (!c->counts[i])
            continue;
        tele_out_put(o, first ? "[" : ",[");
        first = false;
        tele_out_u64(o, tele_hist_upper_ns(i));
        tele_out_put(o, ",");
        tele_out_u64(o, c->counts[i]);
        tele_out_put(o, "]");
    }
    tele_out_put(o, "]");
}

static void tenant_fields(const struct telemetry *t, struct tele_out *o, unsigned tn, unsigned cl)
{
    char idbuf[16];
    kv_u64(o, "tenant_id", tn, true);
    kv_str(o, "tenant", tele_tenant_label(t, tn, idbuf, sizeof(idbuf)), true);
    kv_str(o, "class", tier_io_class_name((enum tier_io_class)cl), true);
}

static void render_ops(struct telemetry *t, struct tele_out *o, struct tele_hist_copy *c)
{
    key(o, "ops");
    tele_out_put(o, "[");
    bool first = true;
    for (unsigned tn = 0; tn < t->max_tenants; tn++)
        for (unsigned cl = 0; cl < TIER_IO_NCLASSES; cl++)
            for (unsigned op = 0; op < TELE_NOPS; op++)
                for (unsigned tr = 0; tr < TELE_NTIERS && o->rc == 0; tr++) {
                    struct tele_op_series *s = atomic_load_explicit(
                        &t->ops[tele_op_slot(tn, cl, op, tr)], memory_order_acquire);
                    if (!s || tele_hist_empty(&s->lat))
                        continue;
                    tele_hist_read(&s->lat, c);
                    tele_out_put(o, first ? "{" : ",{");
                    first = false;
                    tenant_fields(t, o, tn, cl);
                    kv_str(o, "op", tele_op_name((enum tele_op)op), true);
                    kv_str(o, "tier", tele_tier_name((enum tele_tier)tr), true);
                    kv_u64(o, "ops", c->n, true);
                    kv_u64(o, "bytes", atomic_load_explicit(&s->bytes, memory_order_relaxed), true);
                    kv_u64(o, "errors", atomic_load_explicit(&s->errors, memory_order_relaxed),
                           true);
                    hist_fields(o, c);
                    tele_out_put(o, "}");
                }
    tele_out_put(o, "]");
}

static void render_sched(struct telemetry *t, struct tele_out *o, struct tele_hist_copy *c)
{
    key(o, "sched");
    tele_out_put(o, "[");
    bool first = true;
    for (unsigned tn = 0; tn < t->max_tenants; tn++)
        for (unsigned cl = 0; cl < TIER_IO_NCLASSES && o->rc == 0; cl++) {
            struct tele_sched_series *s =
                atomic_load_explicit(&t->sched[tele_sched_slot(tn, cl)], memory_order_acquire);
            if (!s || tele_hist_empty(&s->wait))
                continue;
            tele_out_put(o, first ? "{" : ",{");
            first = false;
            tenant_fields(t, o, tn, cl);
            tele_hist_read(&s->wait, c);
            kv_u64(o, "ops", c->n, true);
            kv_u64(o, "bytes", atomic_load_explicit(&s->bytes, memory_order_relaxed), true);
            kv_u64(o, "errors", atomic_load_explicit(&s->errors, memory_order_relaxed), true);
            key(o, "wait");
            tele_out_put(o, "{");
            hist_fields(o, c);
            tele_out_put(o, "},");
            tele_hist_read(&s->service, c);
            key(o, "service");
            tele_out_put(o, "{");
            hist_fields(o, c);
            tele_out_put(o, "}}");
        }
    tele_out_put(o, "]");
}

/* "stalls": [{tenant_id, tenant, wait_s, compute_s, steps, reports, dropped, reporters,
 * stall_ratio, gpu_util, names: [{name, wait_s, compute_s, steps, stall_ratio, idle_s}]}] */
static void render_stall(struct telemetry *t, struct tele_out *o)
{
    struct stall_tenant_stats *v = NULL;
    size_t n = 0;
    struct gpu_tenant_stats *gv = NULL;
    size_t gn = 0;
    struct stall_reporter_stats *rs = malloc(STALL_NAMES_PER_TENANT * sizeof(*rs));
    if (!rs && o->rc == 0)
        o->rc = -ENOMEM;
    if (o->rc == 0)
        o->rc = tele_stall_list(t, &v, &n);
    if (o->rc == 0)
        o->rc = tele_gpu_list(t, &gv, &gn);
    uint64_t now = tier_now_mono_ns();
    key(o, "stalls");
    tele_out_put(o, "[");
    for (size_t i = 0; i < n && o->rc == 0; i++) {
        const struct stall_tenant_stats *st = &v[i];
        char idbuf[16];
        tele_out_put(o, i ? ",{" : "{");
        kv_u64(o, "tenant_id", st->tenant, true);
        kv_str(o, "tenant", tele_tenant_label(t, st->tenant, idbuf, sizeof(idbuf)), true);
        key(o, "wait_s");
        put_double(o, (double)st->wait_ns / 1e9);
        tele_out_put(o, ",");
        key(o, "compute_s");
        put_double(o, (double)st->compute_ns / 1e9);
        tele_out_put(o, ",");
        kv_u64(o, "steps", st->steps, true);
        kv_u64(o, "reports", st->reports, true);
        kv_u64(o, "dropped", st->dropped, true);
        kv_u64(o, "reporters", st->reporters, true);
        key(o, "stall_ratio");
        if (st->ratio < 0)
            tele_out_put(o, "null");
        else
            put_double(o, st->ratio);
        tele_out_put(o, ",");
        key(o, "gpu_util");
        double gu = tele_gpu_util_of(gv, gn, st->tenant);
        if (gu < 0)
            tele_out_put(o, "null");
        else
            put_double(o, gu);
        tele_out_put(o, ",");
        key(o, "names");
        tele_out_put(o, "[");
        size_t nr = stall_reporters(t->stall, st->tenant, now, rs, STALL_NAMES_PER_TENANT);
        for (size_t k = 0; k < nr && k < STALL_NAMES_PER_TENANT; k++) {
            tele_out_put(o, k ? ",{" : "{");
            kv_str(o, "name", rs[k].name, true);
            key(o, "wait_s");
            put_double(o, (double)rs[k].wait_ns / 1e9);
            tele_out_put(o, ",");
            key(o, "compute_s");
            put_double(o, (double)rs[k].compute_ns / 1e9);
            tele_out_put(o, ",");
            kv_u64(o, "steps", rs[k].steps, true);
            key(o, "stall_ratio");
            if (rs[k].ratio < 0)
                tele_out_put(o, "null");
            else
                put_double(o, rs[k].ratio);
            tele_out_put(o, ",");
            key(o, "idle_s");
            put_double(o, rs[k].idle_s);
            tele_out_put(o, "}");
        }
        tele_out_put(o, "]}");
    }
    tele_out_put(o, "]");
    free(v);
    free(gv);
    free(rs);
}

/* "gpu": null without a sampler, else {devices, interval_s, passes, samples, errors, truncated,
 * unresolved, tenants: [{tenant_id, tenant, gpu_util, procs, age_s}]} */
static void render_gpu(struct telemetry *t, struct tele_out *o)
{
    key(o, "gpu");
    struct gpu *g = tele_gpu(t);
    if (!g) {
        tele_out_put(o, "null");
        return;
    }
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    struct gpu_tenant_stats *v = NULL;
    size_t n = 0;
    if (o->rc == 0)
        o->rc = tele_gpu_list(t, &v, &n);
    tele_out_put(o, "{");
    kv_u64(o, "devices", st.devices, true);
    key(o, "interval_s");
    put_double(o, (double)st.interval_ns / 1e9);
    tele_out_put(o, ",");
    kv_u64(o, "passes", st.passes, true);
    kv_u64(o, "samples", st.samples, true);
    kv_u64(o, "errors", st.errors, true);
    kv_u64(o, "truncated", st.truncated, true);
    kv_u64(o, "unresolved", st.unresolved, true);
    key(o, "tenants");
    tele_out_put(o, "[");
    for (size_t i = 0; i < n; i++) {
        char idbuf[16];
        tele_out_put(o, i ? ",{" : "{");
        kv_u64(o, "tenant_id", v[i].tenant, true);
        kv_str(o, "tenant", tele_tenant_label(t, v[i].tenant, idbuf, sizeof(idbuf)), true);
        key(o, "gpu_util");
        put_double(o, v[i].util);
        tele_out_put(o, ",");
        kv_u64(o, "procs", v[i].procs, true);
        key(o, "age_s");
        put_double(o, v[i].age_s);
        tele_out_put(o, "}");
    }
    tele_out_put(o, "]}");
    free(v);
}

static void render_gauges(const struct telemetry *t, struct tele_out *o,
                          const struct tele_gauges *g)
{
    key(o, "gauges");
    if (!g) {
        tele_out_put(o, "null");
        return;
    }
    tele_out_put(o, "{\"tiers\":{\"ram\":{");
    kv_u64(o, "used_bytes", g->ram_used_bytes, true);
    kv_u64(o, "capacity_bytes", g->ram_capacity_bytes, false);
    tele_out_put(o, "},\"disk\":{");
    kv_u64(o, "used_bytes", g->disk_used_bytes, true);
    kv_u64(o, "capacity_bytes", g->disk_capacity_bytes, false);
    tele_out_put(o, "}},");
    kv_u64(o, "pinned_bytes", g->pinned_bytes, true);
    key(o, "writeback");
    if (g->writeback) {
        tele_out_put(o, "{");
        kv_u64(o, "backlog_files", g->wb_backlog_files, true);
        kv_u64(o, "backlog_bytes", g->wb_backlog_bytes, true);
        kv_u64(o, "failed_files", g->wb_failed_files, true);
        key(o, "oldest_backlog_age_s");
        put_double(o, g->wb_oldest_backlog_age_s);
        tele_out_put(o, "},");
    } else {
        tele_out_put(o, "null,");
    }
    key(o, "backends");
    tele_out_put(o, "[");
    static const char *const br[] = {"closed", "open", "half-open"};
    for (unsigned i = 0; i < g->nbackends && i < TELE_MAX_BACKENDS; i++) {
        tele_out_put(o, i ? ",{" : "{");
        kv_str(o, "name", g->backends[i].name ? g->backends[i].name : "", true);
        int b = g->backends[i].breaker;
        kv_str(o, "breaker", b >= 0 && b <= 2 ? br[b] : "unknown", true);
        kv_u64(o, "inflight", g->backends[i].inflight, true);
        kv_u64(o, "queued", g->backends[i].queued, false);
        tele_out_put(o, "}");
    }
    tele_out_put(o, "],");
    key(o, "space");
    tele_out_put(o, "[");
    for (unsigned i = 0; i < g->nspace; i++) {
        const struct tele_space *sp = &g->space[i];
        char idbuf[16];
        tele_out_put(o, i ? ",{" : "{");
        kv_u64(o, "tenant_id", sp->tenant, true);
        kv_str(o, "tenant",
               t ? tele_tenant_label(t, sp->tenant, idbuf, sizeof(idbuf))
                 : (snprintf(idbuf, sizeof(idbuf), "%u", (unsigned)sp->tenant), idbuf),
               true);
        kv_u64(o, "bytes", sp->bytes, true);
        kv_u64(o, "quota", sp->quota, true);
        kv_u64(o, "quota_evictions", sp->quota_evictions, false);
        tele_out_put(o, "}");
    }
    tele_out_put(o, "]}");
}

static void render_health(struct tele_out *o, const struct tele_gauges *g)
{
    struct tele_health h;
    tele_health_eval(g, &h);
    key(o, "health");
    tele_out_put(o, "{");
    kv_str(o, "status", h.nreasons ? "degraded" : "ready", true);
    key(o, "reasons");
    tele_out_put(o, "[");
    for (unsigned i = 0; i < h.nreasons; i++) {
        if (i)
            tele_out_put(o, ",");
        put_str(o, h.reasons[i]);
    }
    tele_out_put(o, "]}");
}

int tele_render_json(struct telemetry *t, const struct tele_gauges *g, struct dynbuf *out)
{
    struct tele_hist_copy *c = malloc(sizeof(*c));
    if (!c)
        return -ENOMEM;
    struct tele_out o = {out, 0};
    tele_out_put(&o, "{");
    kv_u64(&o, "version", 1, true);
    kv_u64(&o, "now_ns", tier_now_real_ns(), true);
    kv_u64(&o, "started_ns", t ? t->started_real_ns : 0, true);
    kv_u64(&o, "max_tenants", t ? t->max_tenants : 0, true);
    tele_out_put(&o, "\"hist\":{");
    kv_u64(&o, "min_ns", 1ULL << TELE_HIST_MIN_SHIFT, true);
    kv_u64(&o, "max_ns", TELE_HIST_MAX_NS, true);
    kv_u64(&o, "sub_buckets", 1u << TELE_HIST_SUB_BITS, true);
    kv_u64(&o, "overflow_upper_ns", TELE_HIST_OVERFLOW_UPPER_NS, false);
    tele_out_put(&o, "},");
    if (t) {
        render_ops(t, &o, c);
        tele_out_put(&o, ",");
        render_sched(t, &o, c);
        tele_out_put(&o, ",");
        render_stall(t, &o);
        tele_out_put(&o, ",");
        render_gpu(t, &o);
    } else {
        tele_out_put(&o, "\"ops\":[],\"sched\":[],\"stalls\":[],\"gpu\":null");
    }
    tele_out_put(&o, ",");
    render_gauges(t, &o, g);
    tele_out_put(&o, ",");
    render_health(&o, g);
    tele_out_put(&o, "}");
    free(c);
    return o.rc;
}
