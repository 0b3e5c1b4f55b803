/* SPDX-License-Identifier: Apache-2.0 */
/*
 * top.c - the model and the rendering of `tierctl top` (top.h): parse GET /v1/telemetry answers,
 * diff two of them series by series, fold the differences into per-tenant and per-(tenant, class)
 * rows, print them. tierctl.c owns the loop, the requests and the terminal.
 *
 * DESIGN. tierd exports cumulative counters and per-bucket counts since its start, never rates,
 * so the client chooses the interval and any two clients see consistent numbers. A series of the
 * newer answer is matched with the older one by its labels (both sorted, bsearch); a series new
 * in the interval counts from zero; a counter that went down, or a changed started_ns, means tierd
 * restarted and the newer answer counts from zero as a whole. Quantiles merge the differences of
 * the buckets (same bounds in every series: one scheme, given in the answer's "hist") and take
 * the midpoint of the bucket holding the rank with the telemetry library's own
 * tele_quantile_diff (tierctl links tier_telemetry): within 1/(2 * sub_buckets) of the exact
 * value (1.6 %) from min_ns to max_ns. An answer of another scheme (a tierd whose buckets have
 * other bounds) shows no quantiles ("-") rather than wrong ones.
 *
 * What the columns count: OPS/S every FUSE op of the tenant; MB/S the bytes of its reads and
 * writes; RAM%/DISK%/BACK% the share of its reads each tier served; P50/P99 its read and write
 * latencies (lookups and opens would drown them); QWAIT its backend calls' wait at the
 * scheduling point; STALL% the tenant's recent data-stall ratio, wait / (wait + compute) of its
 * training loops as tierd decays it (GET /v1/telemetry "stalls", POST /v1/progress), shown as
 * tierd gives it rather than diffed, so one answer suffices; GPU% likewise the tenant's recent
 * GPU utilisation where tierd samples NVML (GET /v1/telemetry "gpu").
 */
#include "cli/top.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "common/vec.h"

#define NS_PER_S 1e9

static const char *const tier_names[TOP_NTIERS] = {"ram", "disk", "backend"};

/* ---- parsing --------------------------------------------------------------------------------- */

static uint64_t ju64(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v) && json_integer_value(v) > 0)
        return (uint64_t)json_integer_value(v);
    if (json_is_real(v) && json_real_value(v) > 0)
        return (uint64_t)json_real_value(v);
    return 0;
}

static int cmp_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}

/* Order of the series: ops entries (op set) before sched entries, then by labels. */
static int cmp_series(const void *pa, const void *pb)
{
    const struct top_series *a = pa, *b = pb;
    int c = (a->op == NULL) - (b->op == NULL);
    if (!c)
        c = cmp_str(a->tenant, b->tenant);
    if (!c)
        c = cmp_str(a->cls, b->cls);
    if (!c)
        c = cmp_str(a->op, b->op);
    if (!c)
        c = cmp_str(a->tier, b->tier);
    return c;
}

static int cmp_bucket(const void *pa, const void *pb)
{
    const struct tele_bucket *a = pa, *b = pb;
    return a->upper_ns < b->upper_ns ? -1 : a->upper_ns > b->upper_ns;
}

static int parse_buckets(const json_t *arr, struct top_series *s)
{
    size_t n = json_array_size(arr);
    if (!json_is_array(arr))
        return -EINVAL;
    if (n == 0)
        return 0;
    s->b = calloc(n, sizeof(*s->b));
    if (!s->b)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *pair = json_array_get(arr, i);
        const json_t *u = json_array_get(pair, 0), *c = json_array_get(pair, 1);
        if (json_array_size(pair) != 2 || !json_is_integer(u) || !json_is_integer(c) ||
            json_integer_value(u) <= 0 || json_integer_value(c) < 0)
            return -EINVAL;
        s->b[i].upper_ns = (uint64_t)json_integer_value(u);
        s->b[i].count = (uint64_t)json_integer_value(c);
    }
    s->nb = n;
    qsort(s->b, n, sizeof(*s->b), cmp_bucket);
    return 0;
}

static int parse_series(const json_t *e, bool sched, struct top_series *s)
{
    s->tenant = json_string_value(json_object_get(e, "tenant"));
    s->cls = json_string_value(json_object_get(e, "class"));
    if (!s->tenant || !s->cls)
        return -EINVAL;
    if (!sched) {
        s->op = json_string_value(json_object_get(e, "op"));
        s->tier = json_string_value(json_object_get(e, "tier"));
        if (!s->op || !s->tier)
            return -EINVAL;
    }
    s->ops = ju64(e, "ops");
    s->bytes = ju64(e, "bytes");
    s->errors = ju64(e, "errors");
    const json_t *h = sched ? json_object_get(e, "wait") : e;
    if (!json_is_object(h))
        return -EINVAL;
    s->sum_ns = ju64(h, "sum_ns");
    return parse_buckets(json_object_get(h, "buckets"), s);
}

static int cmp_stall(const void *a, const void *b)
{
    return cmp_str(((const struct top_stall *)a)->tenant, ((const struct top_stall *)b)->tenant);
}

static double jnum(const json_t *o, const char *key, double none)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : none;
}

/* "stalls" (absent from an older tierd: none); entries without a tenant name are skipped. */
static int parse_stalls(const json_t *answer, struct top_snap *s)
{
    const json_t *arr = json_object_get(answer, "stalls");
    size_t n = json_array_size(arr);
    if (n == 0)
        return 0;
    s->st = calloc(n, sizeof(*s->st));
    if (!s->st)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        const char *tn = json_string_value(json_object_get(e, "tenant"));
        if (!tn)
            continue;
        s->st[s->nst++] = (struct top_stall){.tenant = tn,
                                             .wait_s = jnum(e, "wait_s", 0),
                                             .compute_s = jnum(e, "compute_s", 0),
                                             .ratio = jnum(e, "stall_ratio", -1),
                                             .steps = ju64(e, "steps"),
                                             .reporters = ju64(e, "reporters")};
    }
    qsort(s->st, s->nst, sizeof(*s->st), cmp_stall);
    return 0;
}

static int cmp_gpu(const void *a, const void *b)
{
    return cmp_str(((const struct top_gpu *)a)->tenant, ((const struct top_gpu *)b)->tenant);
}

/* "gpu": {"tenants": [...]} (null, or absent from an older tierd: none). */
static int parse_gpu(const json_t *answer, struct top_snap *s)
{
    const json_t *gj = json_object_get(answer, "gpu");
    s->has_gpu = json_is_object(gj);
    const json_t *arr = json_object_get(gj, "tenants");
    size_t n = json_array_size(arr);
    if (n == 0)
        return 0;
    s->gpu = calloc(n, sizeof(*s->gpu));
    if (!s->gpu)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        const char *tn = json_string_value(json_object_get(e, "tenant"));
        double u = jnum(e, "gpu_util", -1);
        if (tn && u >= 0)
            s->gpu[s->ngpu++] = (struct top_gpu){.tenant = tn, .util = u};
    }
    qsort(s->gpu, s->ngpu, sizeof(*s->gpu), cmp_gpu);
    return 0;
}

void top_snap_fini(struct top_snap *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->s[i].b);
    free(s->s);
    free(s->st);
    free(s->gpu);
    json_decref(s->json);
    memset(s, 0, sizeof(*s));
}

int top_snap_parse(json_t *answer, struct top_snap *out, char *err, size_t errsz)
{
    struct top_snap s;
    memset(&s, 0, sizeof(s));
    const json_t *ops = json_object_get(answer, "ops");
    const json_t *sched = json_object_get(answer, "sched");
    const json_t *hist = json_object_get(answer, "hist");
    if (!json_is_object(answer) || !json_is_array(ops) || !json_is_array(sched) ||
        !json_is_object(hist)) {
        snprintf(err, errsz,
                 "GET /v1/telemetry answered without \"ops\", \"sched\" and \"hist\" "
                 "(a tierd older than tierctl? see docs/API.md)");
        return -EINVAL;
    }
    s.json = json_incref(answer);
    s.now_ns = ju64(answer, "now_ns");
    s.started_ns = ju64(answer, "started_ns");
    s.scheme.min_ns = ju64(hist, "min_ns");
    s.scheme.max_ns = ju64(hist, "max_ns");
    s.scheme.sub_buckets = ju64(hist, "sub_buckets");
    s.scheme.overflow_upper_ns = ju64(hist, "overflow_upper_ns");
    size_t nops = json_array_size(ops), n = nops + json_array_size(sched);
    s.s = calloc(n ? n : 1, sizeof(*s.s));
    if (!s.s) {
        top_snap_fini(&s);
        snprintf(err, errsz, "out of memory");
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        bool is_sched = i >= nops;
        const json_t *e = is_sched ? json_array_get(sched, i - nops) : json_array_get(ops, i);
        s.n = i + 1; /* so that fini frees this entry's buckets too */
        int rc = parse_series(e, is_sched, &s.s[i]);
        if (rc) {
            top_snap_fini(&s);
            if (rc == -ENOMEM)
                snprintf(err, errsz, "out of memory");
            else
                snprintf(err, errsz,
                         "GET /v1/telemetry: %s[%zu] is not a series (tenant, class%s, "
                         "buckets [[upper_ns, count], ...]; see docs/API.md)",
                         is_sched ? "sched" : "ops", is_sched ? i - nops : i,
                         is_sched ? ", wait" : ", op, tier");
            return rc;
        }
    }
    qsort(s.s, s.n, sizeof(*s.s), cmp_series);
    const json_t *tiers = json_object_get(json_object_get(answer, "gauges"), "tiers");
    static const char *const gauge_tiers[2] = {"ram", "disk"};
    for (int i = 0; i < 2; i++) {
        const json_t *t = json_object_get(tiers, gauge_tiers[i]);
        s.tier_used[i] = ju64(t, "used_bytes");
        s.tier_capacity[i] = ju64(t, "capacity_bytes");
    }
    if (parse_stalls(answer, &s) != 0 || parse_gpu(answer, &s) != 0) {
        top_snap_fini(&s);
        snprintf(err, errsz, "out of memory");
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

/* ---- quantiles ---------------------------------------------------------------------------------
 */

bool top_scheme_known(const struct top_scheme *sc)
{
    return sc->min_ns == (1ULL << TELE_HIST_MIN_SHIFT) && sc->max_ns == TELE_HIST_MAX_NS &&
           sc->sub_buckets == (1ULL << TELE_HIST_SUB_BITS);
}

uint64_t top_quantile_ns(const struct top_scheme *sc, const struct tele_bucket *h, size_t n,
                         double q)
{
    return top_scheme_known(sc) ? tele_quantile_diff(h, n, NULL, 0, q, NULL) : 0;
}

/* ---- the interval ---------------------------------------------------------------------------- */

/* A growable list of bucket differences, sorted and merged when read. */
struct acc {
    struct tele_bucket *b;
    size_t n, cap;
    uint64_t sum_ns, count;
};

static int acc_add(struct acc *a, uint64_t upper, uint64_t count)
{
    if (count == 0)
        return 0;
    struct tele_bucket *nb = tier_vec_grow(a->b, &a->cap, a->n + 1, sizeof(*nb), 64);
    if (!nb)
        return -ENOMEM;
    a->b = nb;
    a->b[a->n++] = (struct tele_bucket){upper, count};
    a->count += count;
    return 0;
}

/* Quantile q in seconds, -1 when the accumulator is empty or the scheme is not ours. */
static double acc_quantile_s(const struct top_scheme *sc, struct acc *a, double q)
{
    if (a->count == 0 || !top_scheme_known(sc))
        return -1;
    qsort(a->b, a->n, sizeof(*a->b), cmp_bucket);
    return (double)top_quantile_ns(sc, a->b, a->n, q) / NS_PER_S;
}

/* Add cur minus prev (prev may be NULL) to each of the accumulators (up to 2; NULLs skipped). */
static int acc_diff(const struct top_series *cur, const struct top_series *prev, struct acc *a1,
                    struct acc *a2)
{
    size_t j = 0;
    for (size_t i = 0; i < cur->nb; i++) {
        uint64_t c = cur->b[i].count, p = 0;
        while (prev && j < prev->nb && prev->b[j].upper_ns < cur->b[i].upper_ns)
            j++;
        if (prev && j < prev->nb && prev->b[j].upper_ns == cur->b[i].upper_ns)
            p = prev->b[j].count;
        uint64_t d = c >= p ? c - p : c;
        int rc = 0;
        if (a1)
            rc = acc_add(a1, cur->b[i].upper_ns, d);
        if (!rc && a2)
            rc = acc_add(a2, cur->b[i].upper_ns, d);
        if (rc)
            return rc;
    }
    uint64_t ds = prev && cur->sum_ns >= prev->sum_ns ? cur->sum_ns - prev->sum_ns : cur->sum_ns;
    if (a1)
        a1->sum_ns += ds;
    if (a2)
        a2->sum_ns += ds;
    return 0;
}

static uint64_t delta(uint64_t cur, uint64_t prev)
{
    return cur >= prev ? cur - prev : cur;
}

/* Working state of one tenant while the view is built. */
struct work {
    struct acc lat, qwait;
    struct acc cls_lat[TOP_MAX_CLASSES], cls_qwait[TOP_MAX_CLASSES];
    uint64_t reads[TOP_NTIERS];
    uint64_t bytes, cls_bytes[TOP_MAX_CLASSES];
};

static void work_fini(struct work *w)
{
    free(w->lat.b);
    free(w->qwait.b);
    for (size_t i = 0; i < TOP_MAX_CLASSES; i++) {
        free(w->cls_lat[i].b);
        free(w->cls_qwait[i].b);
    }
}

static int cmp_name(const void *key, const void *elem)
{
    return cmp_str(key, ((const struct top_tenant_row *)elem)->tenant);
}

static int cmp_name_rows(const void *a, const void *b)
{
    return cmp_str(((const struct top_tenant_row *)a)->tenant,
                   ((const struct top_tenant_row *)b)->tenant);
}

static int cmp_load(double la, double lb, const char *na, const char *nb)
{
    if (la != lb)
        return la > lb ? -1 : 1;
    return cmp_str(na, nb);
}

static int cmp_rows(const void *pa, const void *pb, void *sort)
{
    const struct top_tenant_row *a = pa, *b = pb;
    bool by_bytes = *(const enum top_sort *)sort == TOP_SORT_BYTES;
    return cmp_load(by_bytes ? a->bytes_s : a->ops_s, by_bytes ? b->bytes_s : b->ops_s, a->tenant,
                    b->tenant);
}

static int cmp_cls(const void *pa, const void *pb, void *sort)
{
    const struct top_class_row *a = pa, *b = pb;
    bool by_bytes = *(const enum top_sort *)sort == TOP_SORT_BYTES;
    return cmp_load(by_bytes ? a->bytes_s : a->ops_s, by_bytes ? b->bytes_s : b->ops_s, a->cls,
                    b->cls);
}

static int tier_index(const char *t)
{
    for (int i = 0; i < TOP_NTIERS; i++)
        if (strcmp(t, tier_names[i]) == 0)
            return i;
    return -1;
}

/* The class row of name in r, added if new; NULL when TOP_MAX_CLASSES are taken. */
static struct top_class_row *class_row(struct top_tenant_row *r, const char *name, size_t *idx)
{
    for (size_t i = 0; i < r->ncls; i++)
        if (strcmp(r->cls[i].cls, name) == 0) {
            *idx = i;
            return &r->cls[i];
        }
    if (r->ncls == TOP_MAX_CLASSES)
        return NULL;
    struct top_class_row *c = &r->cls[r->ncls];
    memset(c, 0, sizeof(*c));
    c->cls = name;
    *idx = r->ncls++;
    return c;
}

static const struct top_series *find_prev(const struct top_snap *prev, const struct top_series *s)
{
    if (!prev || prev->n == 0)
        return NULL;
    return bsearch(s, prev->s, prev->n, sizeof(*prev->s), cmp_series);
}

void top_view_fini(struct top_view *v)
{
    if (!v)
        return;
    free(v->t);
    memset(v, 0, sizeof(*v));
}

static int fold_series(const struct top_snap *prev, const struct top_series *s,
                       struct top_tenant_row *r, struct work *w)
{
    const struct top_series *p = find_prev(prev, s);
    size_t ci = 0;
    struct top_class_row *c = class_row(r, s->cls, &ci);
    uint64_t d_ops = delta(s->ops, p ? p->ops : 0);
    if (s->op == NULL) { /* a backend call at the scheduling point */
        if (c) {
            c->sched_n += d_ops;
            c->sched_total += s->ops;
        }
        return acc_diff(s, p, &w->qwait, c ? &w->cls_qwait[ci] : NULL);
    }
    r->ops_total += s->ops;
    r->ops += d_ops;
    if (c) {
        c->ops += d_ops;
        c->ops_total += s->ops;
    }
    bool data = strcmp(s->op, "read") == 0 || strcmp(s->op, "write") == 0;
    if (!data)
        return 0;
    uint64_t d_bytes = delta(s->bytes, p ? p->bytes : 0);
    w->bytes += d_bytes;
    if (c)
        w->cls_bytes[ci] += d_bytes;
    int t = tier_index(s->tier);
    if (strcmp(s->op, "read") == 0 && t >= 0)
        w->reads[t] += d_ops;
    return acc_diff(s, p, &w->lat, c ? &w->cls_lat[ci] : NULL);
}

static void finish_row(const struct top_scheme *sc, double secs, enum top_sort sort,
                       struct top_tenant_row *r, struct work *w)
{
    r->ops_s = (double)r->ops / secs;
    r->bytes_s = (double)w->bytes / secs;
    uint64_t reads = w->reads[0] + w->reads[1] + w->reads[2];
    for (int t = 0; t < TOP_NTIERS; t++)
        r->hit_pct[t] = reads ? 100.0 * (double)w->reads[t] / (double)reads : -1;
    r->p50_s = acc_quantile_s(sc, &w->lat, 0.50);
    r->p99_s = acc_quantile_s(sc, &w->lat, 0.99);
    r->qwait_p99_s = acc_quantile_s(sc, &w->qwait, 0.99);
    r->qwait_avg_s =
        w->qwait.count ? (double)w->qwait.sum_ns / (double)w->qwait.count / NS_PER_S : -1;
    for (size_t i = 0; i < r->ncls; i++) {
        struct top_class_row *c = &r->cls[i];
        c->ops_s = (double)c->ops / secs;
        c->bytes_s = (double)w->cls_bytes[i] / secs;
        c->lat_n = w->cls_lat[i].count;
        c->p50_s = acc_quantile_s(sc, &w->cls_lat[i], 0.50);
        c->p99_s = acc_quantile_s(sc, &w->cls_lat[i], 0.99);
        c->qwait_p99_s = acc_quantile_s(sc, &w->cls_qwait[i], 0.99);
        struct acc *q = &w->cls_qwait[i];
        c->qwait_avg_s = q->count ? (double)q->sum_ns / (double)q->count / NS_PER_S : -1;
    }
    qsort_r(r->cls, r->ncls, sizeof(r->cls[0]), cmp_cls, &sort);
}

int top_view_build(const struct top_snap *prev, const struct top_snap *cur, double interval_s,
                   enum top_sort sort, struct top_view *out)
{
    struct top_view v;
    memset(&v, 0, sizeof(v));
    v.gpu = cur->has_gpu || (prev && prev->has_gpu);
    if (prev && prev->started_ns != cur->started_ns) {
        prev = NULL;
        v.restarted = true;
    }
    v.interval_s = interval_s > 0 ? interval_s : 1e-9;
    memcpy(v.tier_used, cur->tier_used, sizeof(v.tier_used));
    memcpy(v.tier_capacity, cur->tier_capacity, sizeof(v.tier_capacity));

    /* one row per tenant name (of a series, a stall entry or a GPU figure), sorted by name while
     * folding */
    size_t names = cur->n + cur->nst + cur->ngpu;
    v.t = calloc(names ? names : 1, sizeof(*v.t));
    if (!v.t)
        return -ENOMEM;
    for (size_t i = 0; i < names; i++) {
        const char *tn = i < cur->n              ? cur->s[i].tenant
                         : i < cur->n + cur->nst ? cur->st[i - cur->n].tenant
                                                 : cur->gpu[i - cur->n - cur->nst].tenant;
        if (!bsearch(tn, v.t, v.n, sizeof(*v.t), cmp_name)) {
            v.t[v.n++].tenant = tn;
            qsort(v.t, v.n, sizeof(*v.t), cmp_name_rows);
        }
    }
    for (size_t i = 0; i < v.n; i++) {
        if (cur->nst)
            v.t[i].stall = bsearch(&(struct top_stall){.tenant = v.t[i].tenant}, cur->st, cur->nst,
                                   sizeof(*cur->st), cmp_stall);
        const struct top_gpu *g = cur->ngpu
                                      ? bsearch(&(struct top_gpu){.tenant = v.t[i].tenant},
                                                cur->gpu, cur->ngpu, sizeof(*cur->gpu), cmp_gpu)
                                      : NULL;
        v.t[i].gpu_util = g ? g->util : -1;
    }
    struct work *w = calloc(v.n ? v.n : 1, sizeof(*w));
    if (!w) {
        top_view_fini(&v);
        return -ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < cur->n && rc == 0; i++) {
        struct top_tenant_row *r = bsearch(cur->s[i].tenant, v.t, v.n, sizeof(*v.t), cmp_name);
        rc = fold_series(prev, &cur->s[i], r, &w[r - v.t]);
    }
    for (size_t i = 0; i < v.n && rc == 0; i++)
        finish_row(&cur->scheme, v.interval_s, sort, &v.t[i], &w[i]);
    for (size_t i = 0; i < v.n; i++)
        work_fini(&w[i]);
    free(w);
    if (rc) {
        top_view_fini(&v);
        return rc;
    }
    qsort_r(v.t, v.n, sizeof(*v.t), cmp_rows, &sort);
    *out = v;
    return 0;
}

/* ---- rendering ------------------------------------------------------------------------------- */

static void put_pct(FILE *f, double pct)
{
    if (pct < 0)
        fprintf(f, " %6s", "-");
    else
        fprintf(f, " %6.1f", pct);
}

static void put_ms(FILE *f, double s)
{
    if (s < 0)
        fprintf(f, " %9s", "-");
    else
        fprintf(f, " %9.3f", s * 1e3);
}

static void put_line(FILE *f, const char *tenant, const char *cls, double ops_s, double bytes_s,
                     const double *hit, double p50, double p99, double qwait, double stall,
                     bool show_gpu, double gpu)
{
    fprintf(f, "%-20s %-11s %10.1f %9.2f", tenant, cls, ops_s, bytes_s / 1e6);
    for (int t = 0; t < TOP_NTIERS; t++)
        put_pct(f, hit ? hit[t] : -1);
    put_ms(f, p50);
    put_ms(f, p99);
    put_ms(f, qwait);
    put_pct(f, stall);
    if (show_gpu)
        put_pct(f, gpu);
    fputc('\n', f);
}

/* The row's STALL%: its recent ratio in percent, -1 (shown "-") when none. */
static double stall_pct(const struct top_tenant_row *r)
{
    return r->stall && r->stall->ratio >= 0 ? 100.0 * r->stall->ratio : -1;
}

void top_print_table(FILE *f, const struct top_view *v, enum top_sort sort)
{
    char ru[32], rc[32], du[32], dc[32];
    fprintf(f, "tierd top: %zu tenant%s, interval %.1f s, sorted by %s%s", v->n,
            v->n == 1 ? "" : "s", v->interval_s, sort == TOP_SORT_BYTES ? "MB/s" : "ops/s",
            v->restarted ? " (tierd restarted: since its start)" : "");
    if (v->tier_capacity[0] || v->tier_capacity[1])
        fprintf(f, "; ram %s of %s, disk %s of %s", tier_fmt_bytes(v->tier_used[0], ru, sizeof(ru)),
                tier_fmt_bytes(v->tier_capacity[0], rc, sizeof(rc)),
                tier_fmt_bytes(v->tier_used[1], du, sizeof(du)),
                tier_fmt_bytes(v->tier_capacity[1], dc, sizeof(dc)));
    /* GPU% only where tierd samples GPUs */
    fprintf(f, "\n%-20s %-11s %10s %9s %6s %6s %6s %9s %9s %9s %6s", "TENANT", "CLASS", "OPS/S",
            "MB/S", "RAM%", "DISK%", "BACK%", "P50ms", "P99ms", "QWAITms", "STALL%");
    fprintf(f, v->gpu ? " %6s\n" : "\n", "GPU%");
    for (size_t i = 0; i < v->n; i++) {
        const struct top_tenant_row *r = &v->t[i];
        /* one class: one line that names it; more: the tenant's total, then a line per class */
        const char *cls = r->ncls == 1 ? r->cls[0].cls : r->ncls ? "(all)" : "-";
        double qwait = r->ncls == 1 ? r->cls[0].qwait_avg_s : r->qwait_avg_s;
        put_line(f, r->tenant, cls, r->ops_s, r->bytes_s, r->hit_pct, r->p50_s, r->p99_s, qwait,
                 stall_pct(r), v->gpu, r->gpu_util >= 0 ? 100.0 * r->gpu_util : -1);
        for (size_t c = 0; r->ncls > 1 && c < r->ncls; c++) {
            const struct top_class_row *k = &r->cls[c];
            put_line(f, "", k->cls, k->ops_s, k->bytes_s, NULL, k->p50_s, k->p99_s, k->qwait_avg_s,
                     -1, v->gpu, -1);
        }
    }
}

/* A number of seconds, or null for "none" (negative). */
static json_t *jsecs(double s)
{
    return s < 0 ? json_null() : json_real(s);
}

json_t *top_view_json(const struct top_view *v)
{
    json_t *tenants = json_array();
    json_t *j = json_pack(
        "{s:f, s:b, s:{s:{s:I, s:I}, s:{s:I, s:I}}}", "interval_s", v->interval_s, "restarted",
        v->restarted, "tiers", "ram", "used_bytes", (json_int_t)v->tier_used[0], "capacity_bytes",
        (json_int_t)v->tier_capacity[0], "disk", "used_bytes", (json_int_t)v->tier_used[1],
        "capacity_bytes", (json_int_t)v->tier_capacity[1]);
    if (!tenants || !j)
        goto fail;
    for (size_t i = 0; i < v->n; i++) {
        const struct top_tenant_row *r = &v->t[i];
        json_t *cls = json_array();
        json_t *hit = r->hit_pct[0] < 0 ? json_null()
                                        : json_pack("{s:f, s:f, s:f}", "ram", r->hit_pct[0], "disk",
                                                    r->hit_pct[1], "backend", r->hit_pct[2]);
        for (size_t c = 0; cls && c < r->ncls; c++) {
            const struct top_class_row *k = &r->cls[c];
            json_array_append_new(
                cls,
                json_pack("{s:s, s:f, s:f, s:I, s:I, s:I, s:o, s:o, s:I, s:I, s:o, s:o}", "class",
                          k->cls, "ops_per_s", k->ops_s, "bytes_per_s", k->bytes_s, "ops",
                          (json_int_t)k->ops, "ops_total", (json_int_t)k->ops_total,
                          "latency_samples", (json_int_t)k->lat_n, "p50_s", jsecs(k->p50_s),
                          "p99_s", jsecs(k->p99_s), "backend_calls", (json_int_t)k->sched_n,
                          "backend_calls_total", (json_int_t)k->sched_total, "queue_wait_avg_s",
                          jsecs(k->qwait_avg_s), "queue_wait_p99_s", jsecs(k->qwait_p99_s)));
        }
        json_t *t = json_pack("{s:s, s:f, s:f, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "tenant",
                              r->tenant, "ops_per_s", r->ops_s, "bytes_per_s", r->bytes_s, "ops",
                              (json_int_t)r->ops, "ops_total", (json_int_t)r->ops_total, "hit_pct",
                              hit, "p50_s", jsecs(r->p50_s), "p99_s", jsecs(r->p99_s),
                              "queue_wait_avg_s", jsecs(r->qwait_avg_s), "queue_wait_p99_s",
                              jsecs(r->qwait_p99_s), "classes", cls);
        const struct top_stall *st = r->stall;
        if (t)
            json_object_set_new(t, "stall",
                                st ? json_pack("{s:o, s:f, s:f, s:I, s:I}", "ratio",
                                               st->ratio < 0 ? json_null() : json_real(st->ratio),
                                               "wait_s", st->wait_s, "compute_s", st->compute_s,
                                               "steps", (json_int_t)st->steps, "reporters",
                                               (json_int_t)st->reporters)
                                   : json_null());
        if (t)
            json_object_set_new(t, "gpu_util",
                                r->gpu_util < 0 ? json_null() : json_real(r->gpu_util));
        if (!t || json_array_append_new(tenants, t) != 0)
            goto fail;
    }
    json_object_set_new(j, "tenants", tenants);
    return j;
fail:
    json_decref(tenants);
    json_decref(j);
    return NULL;
}
