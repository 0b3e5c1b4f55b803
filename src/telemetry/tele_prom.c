/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tele_prom.c - the Prometheus text exposition (format 0.0.4) of the telemetry series, the
 * gauges and health (tele_render_prometheus). Runs on API threads beside the record path; reads
 * each counter once (tele_hist_read), so a series' buckets, _sum and _count agree with each
 * other within one render.
 *
 * Export buckets: the internal histogram has 866 buckets; the exposition has a fixed set of 27
 * `le` bounds, the powers of two from 2^10 ns (1.024 us) to 2^36 ns (68.7 s), plus +Inf. Every
 * power of two is an internal bucket boundary, so each exported cumulative count is exact. A
 * quantile computed from them (histogram_quantile) lies in the bucket of the true quantile, a
 * factor 2 wide: up to 100 % above or 50 % below the true value (docs/API.md).
 *
 * Output is written with dynbuf_append and a digit loop, not printf, because 64 tenants x 4
 * classes x every op and tier is 4,608 histograms of 30 lines each (docs/BENCHMARKS.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "telemetry/gpu.h"
#include "telemetry/tele_int.h"

#define STR_(x) #x
#define STR(x) STR_(x) /* a macro's value as a string literal */

#define LE_FIRST_SHIFT 10
#define LE_LAST_SHIFT (TELE_HIST_MIN_SHIFT + TELE_HIST_OCTAVES) /* 36 */
#define NLE (LE_LAST_SHIFT - LE_FIRST_SHIFT + 1)                /* 27 */

/* Internal index of the last bucket counted under le = 2^(LE_FIRST_SHIFT + k) ns. */
static unsigned le_last_index(unsigned k)
{
    return (k + 1) << TELE_HIST_SUB_BITS;
}

/* ns as seconds, exactly: "12.000345678" */
static void put_seconds(struct tele_out *o, uint64_t ns)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu.%09llu", (unsigned long long)(ns / 1000000000ULL),
             (unsigned long long)(ns % 1000000000ULL));
    tele_out_put(o, buf);
}

static void put_double(struct tele_out *o, double v)
{
    char buf[40];
    snprintf(buf, sizeof(buf), "%.17g", v);
    tele_out_put(o, buf);
}

static void family(struct tele_out *o, const char *name, const char *type, const char *help)
{
    tele_out_put(o, "# HELP ");
    tele_out_put(o, name);
    tele_out_put(o, " ");
    tele_out_put(o, help);
    tele_out_put(o, "\n# TYPE ");
    tele_out_put(o, name);
    tele_out_put(o, " ");
    tele_out_put(o, type);
    tele_out_put(o, "\n");
}

static void label(struct tele_out *o, const char *name, const char *value, bool first)
{
    if (!first)
        tele_out_put(o, ",");
    tele_out_put(o, name);
    tele_out_put(o, "=\"");
    if (o->rc == 0)
        o->rc = tele_prom_escape(o->b, value, strlen(value));
    tele_out_put(o, "\"");
}

/* labels of an op series (or of a scheduler series: op NULL) into lb, without braces */
static int series_labels(const struct telemetry *t, struct dynbuf *lb, unsigned tenant,
                         unsigned cls, const char *op, const char *tier)
{
    char idbuf[16];
    struct tele_out o = {lb, 0};
    dynbuf_reset(lb);
    label(&o, "tenant", tele_tenant_label(t, tenant, idbuf, sizeof(idbuf)), true);
    label(&o, "class", tier_io_class_name((enum tier_io_class)cls), false);
    if (op) {
        label(&o, "op", op, false);
        label(&o, "tier", tier, false);
    }
    return o.rc;
}

static void sample(struct tele_out *o, const char *name, const char *suffix,
                   const struct dynbuf *lb)
{
    tele_out_put(o, name);
    tele_out_put(o, suffix);
    tele_out_put(o, "{");
    tele_out_putn(o, lb->data ? lb->data : "", lb->len);
    tele_out_put(o, "} ");
}

static void hist_samples(struct tele_out *o, const char *name, const struct dynbuf *lb,
                         const struct tele_hist_copy *c, const char (*le)[24])
{
    uint64_t cum = 0;
    unsigned idx = 0;
    for (unsigned k = 0; k < NLE; k++) {
        for (; idx <= le_last_index(k); idx++)
            cum += c->counts[idx];
        tele_out_put(o, name);
        tele_out_put(o, "_bucket{");
        tele_out_putn(o, lb->data ? lb->data : "", lb->len);
        tele_out_put(o, ",le=\"");
        tele_out_put(o, le[k]);
        tele_out_put(o, "\"} ");
        tele_out_u64(o, cum);
        tele_out_put(o, "\n");
    }
    tele_out_put(o, name);
    tele_out_put(o, "_bucket{");
    tele_out_putn(o, lb->data ? lb->data : "", lb->len);
    tele_out_put(o, ",le=\"+Inf\"} ");
    tele_out_u64(o, c->n);
    tele_out_put(o, "\n");
    sample(o, name, "_sum", lb);
    put_seconds(o, c->sum_ns);
    tele_out_put(o, "\n");
    sample(o, name, "_count", lb);
    tele_out_u64(o, c->n);
    tele_out_put(o, "\n");
}

static struct tele_op_series *op_at(const struct telemetry *t, size_t slot)
{
    return atomic_load_explicit(&t->ops[slot], memory_order_acquire);
}

static struct tele_sched_series *sched_at(const struct telemetry *t, size_t slot)
{
    return atomic_load_explicit(&t->sched[slot], memory_order_acquire);
}

/* the op families: latency histogram, then bytes, then errors (a family's samples together) */
static void render_ops(struct telemetry *t, struct tele_out *o, struct dynbuf *lb,
                       struct tele_hist_copy *c, const char (*le)[24])
{
    static const char *const names[] = {"tierd_op_latency_seconds", "tierd_op_bytes_total",
                                        "tierd_op_errors_total"};
    static const char *const types[] = {"histogram", "counter", "counter"};
    static const char *const helps[] = {
        ("Latency of FUSE requests (and of blocks served to cluster peers, tenant peers) by "
         "tenant, class, operation and the tier that served them."),
        "Bytes moved by FUSE requests (read replies, writes).", "FUSE requests that failed."};
    for (int f = 0; f < 3; f++) {
        family(o, names[f], types[f], helps[f]);
        for (unsigned tn = 0; tn < t->max_tenants; tn++)
            for (unsigned cl = 0; cl < TIER_IO_NCLASSES; cl++)
                for (unsigned op = 0; op < TELE_NOPS; op++)
                    for (unsigned tr = 0; tr < TELE_NTIERS && o->rc == 0; tr++) {
                        struct tele_op_series *s = op_at(t, tele_op_slot(tn, cl, op, tr));
                        if (!s || tele_hist_empty(&s->lat))
                            continue;
                        o->rc = series_labels(t, lb, tn, cl, tele_op_name((enum tele_op)op),
                                              tele_tier_name((enum tele_tier)tr));
                        if (f == 0) {
                            tele_hist_read(&s->lat, c);
                            hist_samples(o, names[f], lb, c, le);
                            continue;
                        }
                        sample(o, names[f], "", lb);
                        tele_out_u64(o, atomic_load_explicit(f == 1 ? &s->bytes : &s->errors,
                                                             memory_order_relaxed));
                        tele_out_put(o, "\n");
                    }
    }
}

static void render_sched(struct telemetry *t, struct tele_out *o, struct dynbuf *lb,
                         struct tele_hist_copy *c, const char (*le)[24])
{
    static const char *const names[] = {"tierd_sched_queue_wait_seconds",
                                        "tierd_sched_service_seconds", "tierd_sched_bytes_total",
                                        "tierd_sched_errors_total"};
    static const char *const types[] = {"histogram", "histogram", "counter", "counter"};
    static const char *const helps[] = {
        "Time backend calls waited for admission at the scheduling point.",
        "Time from admission to completion of backend calls.",
        "Bytes of backend calls that passed the scheduling point.", "Backend calls that failed."};
    for (int f = 0; f < 4; f++) {
        family(o, names[f], types[f], helps[f]);
        for (unsigned tn = 0; tn < t->max_tenants; tn++)
            for (unsigned cl = 0; cl < TIER_IO_NCLASSES && o->rc == 0; cl++) {
                struct tele_sched_series *s = sched_at(t, tele_sched_slot(tn, cl));
                if (!s || tele_hist_empty(&s->wait))
                    continue;
                o->rc = series_labels(t, lb, tn, cl, NULL, NULL);
                if (f < 2) {
                    tele_hist_read(f == 0 ? &s->wait : &s->service, c);
                    hist_samples(o, names[f], lb, c, le);
                    continue;
                }
                sample(o, names[f], "", lb);
                tele_out_u64(
                    o, atomic_load_explicit(f == 2 ? &s->bytes : &s->errors, memory_order_relaxed));
                tele_out_put(o, "\n");
            }
    }
}

/* Data stalls by tenant (stall.h): what its training loops reported through POST /v1/progress. */
static void render_stall(const struct telemetry *t, struct tele_out *o)
{
    struct stall_tenant_stats *v = NULL;
    size_t n = 0;
    if (o->rc == 0)
        o->rc = tele_stall_list(t, &v, &n);
    static const char *const names[] = {
        "tierd_tenant_data_wait_seconds_total", "tierd_tenant_compute_seconds_total",
        "tierd_tenant_data_steps_total", "tierd_tenant_data_stall_ratio",
        "tierd_tenant_data_reporters"};
    static const char *const types[] = {"counter", "counter", "counter", "gauge", "gauge"};
    static const char *const helps[] = {
        "Time the tenant's training loops waited for their next batch (the data loader's wait, "
        "measured in the loop and reported with POST /v1/progress).",
        "Time the tenant's training loops spent between batches (compute), as reported.",
        "Batches the tenant's training loops reported.",
        "Recent data-stall fraction, wait / (wait + compute), over the tenant's live reporters, "
        "decayed with a 60 s time constant; absent while none has reported time.",
        "The tenant's reporters heard from in the last 300 s."};
    for (int f = 0; f < 5; f++) {
        bool head = true;
        for (size_t i = 0; i < n; i++) {
            const struct stall_tenant_stats *st = &v[i];
            if (f == 3 && st->ratio < 0)
                continue;
            if (head)
                family(o, names[f], types[f], helps[f]);
            head = false;
            char idbuf[16];
            tele_out_put(o, names[f]);
            tele_out_put(o, "{");
            label(o, "tenant", tele_tenant_label(t, st->tenant, idbuf, sizeof(idbuf)), true);
            tele_out_put(o, "} ");
            if (f == 0)
                put_seconds(o, st->wait_ns);
            else if (f == 1)
                put_seconds(o, st->compute_ns);
            else if (f == 2)
                tele_out_u64(o, st->steps);
            else if (f == 3)
                put_double(o, st->ratio);
            else
                tele_out_u64(o, st->reporters);
            tele_out_put(o, "\n");
        }
    }
    free(v);
}

static void gauge1(struct tele_out *o, const char *name, const char *help, const char *lname,
                   const char *lvalue, double v, bool head);

/* GPU utilisation by tenant (gpu.h), where a sampler runs: its tenants with a recent sample,
 * and the sampler's devices and NVML errors. */
static void render_gpu(const struct telemetry *t, struct tele_out *o)
{
    struct gpu *g = atomic_load_explicit(&t->gpu, memory_order_acquire);
    if (!g)
        return;
    struct gpu_tenant_stats *v = NULL;
    size_t n = 0;
    if (o->rc == 0)
        o->rc = tele_gpu_list(t, &v, &n);
    for (size_t i = 0; i < n; i++) {
        if (i == 0)
            family(o, "tierd_tenant_gpu_utilisation", "gauge",
                   "Recent SM utilisation of the tenant's processes on the node's GPUs (NVML, "
                   "mean over each process's samples of the last pass, 0..1; an idle process has "
                   "none); absent while none was sampled in the last " STR(
                       GPU_FADE_INTERVALS) " intervals.");
        char idbuf[16], num[32];
        tele_out_put(o, "tierd_tenant_gpu_utilisation{");
        label(o, "tenant", tele_tenant_label(t, v[i].tenant, idbuf, sizeof(idbuf)), true);
        /* a mean of whole percents: six digits show it exactly (0.7, not 0.69999999999999996) */
        snprintf(num, sizeof(num), "} %.6g\n", v[i].util);
        tele_out_put(o, num);
    }
    free(v);
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    gauge1(o, "tierd_gpu_devices", "GPUs the NVML sampler samples.", NULL, NULL, st.devices, true);
    family(o, "tierd_gpu_sample_errors_total", "counter",
           "NVML calls of the GPU sampler that failed (it samples again the next interval).");
    tele_out_put(o, "tierd_gpu_sample_errors_total ");
    tele_out_u64(o, st.errors);
    tele_out_put(o, "\n");
}

static void gauge1(struct tele_out *o, const char *name, const char *help, const char *lname,
                   const char *lvalue, double v, bool head)
{
    if (head)
        family(o, name, "gauge", help);
    tele_out_put(o, name);
    if (lname) {
        tele_out_put(o, "{");
        label(o, lname, lvalue, true);
        tele_out_put(o, "}");
    }
    tele_out_put(o, " ");
    put_double(o, v);
    tele_out_put(o, "\n");
}

/* Space by tenant: bytes held, the quota where one is set, blocks its quota evicted. */
static void render_space(const struct telemetry *t, struct tele_out *o, const struct tele_gauges *g)
{
    static const char *const names[] = {"tierd_tenant_cache_bytes",
                                        "tierd_tenant_cache_quota_bytes",
                                        "tierd_tenant_cache_quota_evictions_total"};
    static const char *const types[] = {"gauge", "gauge", "counter"};
    static const char *const helps[] = {
        "Bytes of hot-tier blocks charged to the tenant (RAM and disk, each block once).",
        "The tenant's hot-tier quota ([tenant] cache_quota); absent: none.",
        "The tenant's blocks evicted because it was over its hot-tier quota."};
    for (int f = 0; f < 3; f++) {
        bool head = true;
        for (unsigned i = 0; i < g->nspace; i++) {
            const struct tele_space *sp = &g->space[i];
            if (f == 1 && !sp->quota)
                continue;
            if (head)
                family(o, names[f], types[f], helps[f]);
            head = false;
            char idbuf[16];
            tele_out_put(o, names[f]);
            tele_out_put(o, "{");
            label(o, "tenant",
                  t ? tele_tenant_label(t, sp->tenant, idbuf, sizeof(idbuf))
                    : (snprintf(idbuf, sizeof(idbuf), "%u", (unsigned)sp->tenant), idbuf),
                  true);
            tele_out_put(o, "} ");
            tele_out_u64(o, f == 0 ? sp->bytes : f == 1 ? sp->quota : sp->quota_evictions);
            tele_out_put(o, "\n");
        }
    }
}

/* Lifecycle policies: actions by rule, action and result; bytes moved. */
static void render_policies(struct tele_out *o, const struct tele_gauges *g)
{
    static const char *const results[] = {"done", "deferred", "failed", "skipped"};
    for (unsigned i = 0; i < g->npolicies; i++) {
        const struct tele_policy *p = &g->policies[i];
        if (i == 0)
            family(o, "tierd_policy_actions_total", "counter",
                   "Lifecycle policy actions, by policy, namespace, action and result (deferred: "
                   "selected but not taken yet: a busy local copy, an expire waiting for its "
                   "copy, an object that changed; skipped, copy and expire only: a copy not "
                   "written because its target held an object that is not the rule's copy, a "
                   "delete not done because a copy of the file was gone or not the one made).");
        const uint64_t v[] = {p->done, p->deferred, p->failed, p->skipped};
        for (int r = 0;
             r < (strcmp(p->action, "expire") == 0 || strcmp(p->action, "copy") == 0 ? 4 : 3);
             r++) {
            tele_out_put(o, "tierd_policy_actions_total{");
            label(o, "policy", p->name, true);
            label(o, "namespace", p->ns ? p->ns : "", false);
            label(o, "action", p->action, false);
            label(o, "result", results[r], false);
            tele_out_put(o, "} ");
            tele_out_u64(o, v[r]);
            tele_out_put(o, "\n");
        }
    }
    for (unsigned i = 0; i < g->npolicies; i++) {
        const struct tele_policy *p = &g->policies[i];
        if (i == 0)
            family(o, "tierd_policy_bytes_total", "counter",
                   "Bytes the lifecycle policies' done actions concerned (demoted, copied, "
                   "expired).");
        tele_out_put(o, "tierd_policy_bytes_total{");
        label(o, "policy", p->name, true);
        label(o, "namespace", p->ns ? p->ns : "", false);
        label(o, "action", p->action, false);
        tele_out_put(o, "} ");
        tele_out_u64(o, p->bytes);
        tele_out_put(o, "\n");
    }
}

static void render_gauges(struct tele_out *o, const struct tele_gauges *g)
{
    gauge1(o, "tierd_tier_used_bytes", "Bytes used in a cache tier.", "tier", "ram",
           (double)g->ram_used_bytes, true);
    gauge1(o, "tierd_tier_used_bytes", NULL, "tier", "disk", (double)g->disk_used_bytes, false);
    gauge1(o, "tierd_tier_capacity_bytes", "Budget of a cache tier.", "tier", "ram",
           (double)g->ram_capacity_bytes, true);
    gauge1(o, "tierd_tier_capacity_bytes", NULL, "tier", "disk", (double)g->disk_capacity_bytes,
           false);
    gauge1(o, "tierd_cache_pinned_bytes", "Bytes of pinned objects in the cache.", NULL, NULL,
           (double)g->pinned_bytes, true);
    if (g->writeback) {
        gauge1(o, "tierd_writeback_backlog_files", "Write-back files sealed but not yet uploaded.",
               NULL, NULL, (double)g->wb_backlog_files, true);
        gauge1(o, "tierd_writeback_backlog_bytes",
               "Write-back bytes not yet uploaded (open, sealed, uploading).", NULL, NULL,
               (double)g->wb_backlog_bytes, true);
        gauge1(o, "tierd_writeback_oldest_age_seconds",
               "How long the oldest file waiting for upload has waited since its seal.", NULL, NULL,
               g->wb_oldest_backlog_age_s, true);
        gauge1(o, "tierd_writeback_failed_files",
               "Write-back files in state FAILED (never uploaded).", NULL, NULL,
               (double)g->wb_failed_files, true);
    }
    unsigned nb = g->nbackends < TELE_MAX_BACKENDS ? g->nbackends : TELE_MAX_BACKENDS;
    static const char *const bnames[] = {
        "tierd_backend_breaker_open", "tierd_backend_inflight_calls", "tierd_backend_queued_calls"};
    static const char *const bhelps[] = {
        "1 while the backend's circuit breaker is open (calls fail at once), else 0.",
        "Backend calls in flight now.", "Backend calls waiting for admission now."};
    for (int f = 0; f < 3 && nb; f++)
        for (unsigned i = 0; i < nb; i++) {
            double v = f == 0   ? (g->backends[i].breaker == 1 ? 1.0 : 0.0)
                       : f == 1 ? (double)g->backends[i].inflight
                                : (double)g->backends[i].queued;
            gauge1(o, bnames[f], bhelps[f], "backend",
                   g->backends[i].name ? g->backends[i].name : "", v, i == 0);
        }
}

static void render_health(struct tele_out *o, const struct tele_gauges *g)
{
    struct tele_health h;
    tele_health_eval(g, &h);
    gauge1(o, "tierd_health_ok", "1 when tierd is ready, 0 when degraded (GET /v1/health).", NULL,
           NULL, h.nreasons == 0 ? 1.0 : 0.0, true);
    gauge1(o, "tierd_health_degraded_reasons", "Number of reasons tierd is degraded now.", NULL,
           NULL, (double)h.nreasons, true);
    for (int k = 0; k < TELE_HEALTH_NKINDS; k++)
        gauge1(o, "tierd_health_reason", "1 while this kind of reason makes tierd degraded.",
               "reason", tele_health_kind_name((enum tele_health_kind)k), h.kind[k] ? 1.0 : 0.0,
               k == 0);
}

int tele_render_prometheus(struct telemetry *t, const struct tele_gauges *g, struct dynbuf *out)
{
    char le[NLE][24];
    for (unsigned k = 0; k < NLE; k++)
        snprintf(le[k], sizeof(le[k]), "%.12g",
                 (double)(1ULL << (LE_FIRST_SHIFT + k)) / 1000000000.0);
    struct tele_hist_copy *c = malloc(sizeof(*c));
    if (!c)
        return -ENOMEM;
    struct dynbuf lb;
    dynbuf_init(&lb, 64 * 1024);
    struct tele_out o = {out, 0};
    if (t) {
        render_ops(t, &o, &lb, c, (const char(*)[24])le);
        render_sched(t, &o, &lb, c, (const char(*)[24])le);
        render_stall(t, &o);
        render_gpu(t, &o);
    }
    if (g) {
        render_gauges(&o, g);
        render_space(t, &o, g);
        render_policies(&o, g);
    }
    render_health(&o, g);
    dynbuf_fini(&lb);
    free(c);
    return o.rc;
}
