/* SPDX-License-Identifier: Apache-2.0 */
/*
 * telemetry.c - the telemetry series and their record path (telemetry.h), the health rules, and
 * the small text helpers the two renderers share.
 *
 * DESIGN. A series is found by index arithmetic in a pointer table sized at creation
 * (max_tenants x classes x ops x tiers), so recording takes no lock and no search: fold the
 * tenant, compute the slot, load the pointer (acquire); on the first record into a slot,
 * allocate and initialise a series and publish it with a compare-and-swap (release), freeing
 * ours when another thread won. Then relaxed adds: the histogram bucket, the latency sum, bytes
 * and errors when non-zero; the op count is the sum of the buckets, so it needs no add of its
 * own. min and max are a relaxed load and, only when the value is a new extreme, a CAS loop.
 * Called from the FUSE threads (tele_op_record) and every thread that makes a backend call
 * (tele_sched_record); the renderers run on API threads at the same time.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/strutil.h"
#include "common/err.h"
#include "common/timeutil.h"
#include "telemetry/gpu.h"
#include "telemetry/tele_int.h"

#define DEFAULT_MAX_TENANTS 64
#define MAX_MAX_TENANTS TIER_TENANT_IDS_MAX /* tenant_id_limit() at the max_tenants limit */

/* The sizes docs/ARCHITECTURE.md and telemetry.h state. */
_Static_assert(sizeof(struct tele_hist) == 6952, "update the memory figures in the docs");
_Static_assert(sizeof(struct tele_op_series) == 6968, "update the memory figures in the docs");
_Static_assert(sizeof(struct tele_sched_series) == 13920, "update the memory figures in the docs");

const char *tele_op_name(enum tele_op op)
{
    static const char *const names[] = {"read", "write", "open", "lookup", "readdir", "fsync"};
    return (unsigned)op < TELE_NOPS ? names[op] : "unknown";
}

const char *tele_tier_name(enum tele_tier t)
{
    static const char *const names[] = {"ram", "disk", "backend"};
    return (unsigned)t < TELE_NTIERS ? names[t] : "unknown";
}

int telemetry_new(const struct telemetry_config *cfg, struct telemetry **out)
{
    unsigned mt = cfg && cfg->max_tenants ? cfg->max_tenants : DEFAULT_MAX_TENANTS;
    if (mt < 2 || mt > MAX_MAX_TENANTS) {
        tier_err_set("telemetry: max_tenants %u out of range (allowed: 2 .. %u; ids 0 and 1 are "
                     "'default' and 'other')",
                     mt, MAX_MAX_TENANTS);
        return -EINVAL;
    }
    struct telemetry *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->max_tenants = mt;
    if (cfg) {
        t->tenant_name = cfg->tenant_name;
        t->tenant_name_ud = cfg->tenant_name_ud;
    }
    t->started_real_ns = tier_now_real_ns();
    t->ops = calloc((size_t)mt * TELE_OPS_PER_TENANT, sizeof(*t->ops));
    t->sched = calloc((size_t)mt * TIER_IO_NCLASSES, sizeof(*t->sched));
    int rc = stall_new(&(struct stall_config){.max_tenants = mt}, &t->stall);
    if (!t->ops || !t->sched || rc) {
        telemetry_free(t);
        return -ENOMEM;
    }
    *out = t;
    return 0;
}

void telemetry_free(struct telemetry *t)
{
    if (!t)
        return;
    if (t->ops)
        for (size_t i = 0; i < (size_t)t->max_tenants * TELE_OPS_PER_TENANT; i++)
            free(atomic_load_explicit(&t->ops[i], memory_order_relaxed));
    if (t->sched)
        for (size_t i = 0; i < (size_t)t->max_tenants * TIER_IO_NCLASSES; i++)
            free(atomic_load_explicit(&t->sched[i], memory_order_relaxed));
    free(t->ops);
    free(t->sched);
    stall_free(t->stall);
    gpu_close(atomic_load_explicit(&t->gpu, memory_order_acquire));
    free(t);
}

static void hist_init(struct tele_hist *h)
{
    /* calloc'd: counts, sum and max are 0 */
    atomic_init(&h->min_ns, UINT64_MAX);
}

/* Get the series pointer of slot, allocating it on first use; NULL without memory. */
static void *slot_get(void *_Atomic *slot, size_t size, void (*init)(void *))
{
    void *s = atomic_load_explicit(slot, memory_order_acquire);
    if (s)
        return s;
    void *mine = calloc(1, size);
    if (!mine)
        return NULL; /* this one value is lost; the next record tries again */
    init(mine);
    void *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &expected, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    free(mine); /* another thread published first: use its series */
    return expected;
}

static void op_series_init(void *p)
{
    hist_init(&((struct tele_op_series *)p)->lat);
}

static void sched_series_init(void *p)
{
    struct tele_sched_series *s = p;
    hist_init(&s->wait);
    hist_init(&s->service);
}

static void hist_add(struct tele_hist *h, uint64_t ns)
{
    atomic_fetch_add_explicit(&h->counts[tele_hist_index(ns)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
    uint64_t m = atomic_load_explicit(&h->min_ns, memory_order_relaxed);
    while (ns < m && !atomic_compare_exchange_weak_explicit(
                         &h->min_ns, &m, ns, memory_order_relaxed, memory_order_relaxed))
        ;
    m = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
    while (ns > m && !atomic_compare_exchange_weak_explicit(
                         &h->max_ns, &m, ns, memory_order_relaxed, memory_order_relaxed))
        ;
}

static void fold(const struct telemetry *t, const struct tier_ioctx *io, unsigned *tenant,
                 unsigned *cls)
{
    struct tier_ioctx d = TIER_IOCTX_DEFAULT;
    if (!io)
        io = &d;
    *tenant = io->tenant < t->max_tenants ? io->tenant : TIER_TENANT_OTHER;
    *cls = (unsigned)io->cls < TIER_IO_NCLASSES ? (unsigned)io->cls : TIER_IO_BACKGROUND;
}

void tele_op_record(struct telemetry *t, const struct tier_ioctx *io, enum tele_op op,
                    enum tele_tier tier, uint64_t latency_ns, uint64_t bytes, int err)
{
    if (!t || (unsigned)op >= TELE_NOPS || (unsigned)tier >= TELE_NTIERS)
        return;
    unsigned tenant, cls;
    fold(t, io, &tenant, &cls);
    struct tele_op_series *s =
        slot_get((void *_Atomic *)&t->ops[tele_op_slot(tenant, cls, op, tier)],
                 sizeof(struct tele_op_series), op_series_init);
    if (!s)
        return;
    hist_add(&s->lat, latency_ns);
    if (bytes)
        atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
    if (err)
        atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
}

void tele_sched_record(struct telemetry *t, const struct tier_ioctx *io, uint64_t wait_ns,
                       uint64_t service_ns, uint64_t bytes, int err)
{
    if (!t)
        return;
    unsigned tenant, cls;
    fold(t, io, &tenant, &cls);
    struct tele_sched_series *s = slot_get((void *_Atomic *)&t->sched[tele_sched_slot(tenant, cls)],
                                           sizeof(struct tele_sched_series), sched_series_init);
    if (!s)
        return;
    hist_add(&s->wait, wait_ns);
    hist_add(&s->service, service_ns);
    if (bytes)
        atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
    if (err)
        atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
}

/* Move every count of src into dst: each counter exchanged with 0 and its value added, so a
 * record racing with the move lands whole in one of the two (or stays in src for the next
 * fold), and sums over all series never change. */
static void hist_move(struct tele_hist *src, struct tele_hist *dst)
{
    for (unsigned i = 0; i < TELE_HIST_NBUCKETS; i++) {
        uint64_t v = atomic_exchange_explicit(&src->counts[i], 0, memory_order_relaxed);
        if (v)
            atomic_fetch_add_explicit(&dst->counts[i], v, memory_order_relaxed);
    }
    uint64_t v = atomic_exchange_explicit(&src->sum_ns, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&dst->sum_ns, v, memory_order_relaxed);
    uint64_t mn = atomic_exchange_explicit(&src->min_ns, UINT64_MAX, memory_order_relaxed);
    uint64_t m = atomic_load_explicit(&dst->min_ns, memory_order_relaxed);
    while (mn < m && !atomic_compare_exchange_weak_explicit(
                         &dst->min_ns, &m, mn, memory_order_relaxed, memory_order_relaxed))
        ;
    uint64_t mx = atomic_exchange_explicit(&src->max_ns, 0, memory_order_relaxed);
    m = atomic_load_explicit(&dst->max_ns, memory_order_relaxed);
    while (mx > m && !atomic_compare_exchange_weak_explicit(
                         &dst->max_ns, &m, mx, memory_order_relaxed, memory_order_relaxed))
        ;
}

static void counter_move(_Atomic uint64_t *src, _Atomic uint64_t *dst)
{
    uint64_t v = atomic_exchange_explicit(src, 0, memory_order_relaxed);
    if (v)
        atomic_fetch_add_explicit(dst, v, memory_order_relaxed);
}

int tele_tenant_fold(struct telemetry *t, uint32_t from, uint32_t to)
{
    if (!t || from >= t->max_tenants || to >= t->max_tenants || from == to)
        return t ? -EINVAL : 0;
    int rc = 0;
    for (unsigned cl = 0; cl < TIER_IO_NCLASSES; cl++) {
        for (unsigned op = 0; op < TELE_NOPS; op++)
            for (unsigned tr = 0; tr < TELE_NTIERS; tr++) {
                struct tele_op_series *s = atomic_load_explicit(
                    &t->ops[tele_op_slot(from, cl, op, tr)], memory_order_acquire);
                if (!s)
                    continue;
                struct tele_op_series *d =
                    slot_get((void *_Atomic *)&t->ops[tele_op_slot(to, cl, op, tr)],
                             sizeof(struct tele_op_series), op_series_init);
                if (!d) {
                    rc = -ENOMEM; /* left in from: the next fold moves it */
                    continue;
                }
                hist_move(&s->lat, &d->lat);
                counter_move(&s->bytes, &d->bytes);
                counter_move(&s->errors, &d->errors);
            }
        struct tele_sched_series *s =
            atomic_load_explicit(&t->sched[tele_sched_slot(from, cl)], memory_order_acquire);
        if (!s)
            continue;
        struct tele_sched_series *d = slot_get((void *_Atomic *)&t->sched[tele_sched_slot(to, cl)],
                                               sizeof(struct tele_sched_series), sched_series_init);
        if (!d) {
            rc = -ENOMEM;
            continue;
        }
        hist_move(&s->wait, &d->wait);
        hist_move(&s->service, &d->service);
        counter_move(&s->bytes, &d->bytes);
        counter_move(&s->errors, &d->errors);
    }
    int src = stall_tenant_fold(t->stall, from, to);
    /* a GPU figure is a recent one, not a count: it goes with the tenant, not to "retired" */
    gpu_tenant_forget(atomic_load_explicit(&t->gpu, memory_order_acquire), from);
    return rc ? rc : src;
}

struct stall *tele_stall(struct telemetry *t)
{
    return t ? t->stall : NULL;
}

void tele_gpu_set(struct telemetry *t, struct gpu *g)
{
    if (!t) {
        gpu_close(g);
        return;
    }
    gpu_close(atomic_exchange_explicit(&t->gpu, g, memory_order_acq_rel));
}

struct gpu *tele_gpu(struct telemetry *t)
{
    return t ? atomic_load_explicit(&t->gpu, memory_order_acquire) : NULL;
}

int tele_gpu_list(const struct telemetry *t, struct gpu_tenant_stats **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct gpu *g = atomic_load_explicit(&t->gpu, memory_order_acquire);
    if (!g)
        return 0;
    uint64_t now = tier_now_mono_ns();
    size_t want = gpu_list(g, now, NULL, 0);
    if (want == 0)
        return 0;
    struct gpu_tenant_stats *v = calloc(want, sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t got = gpu_list(g, now, v, want);
    *out = v;
    *n = got < want ? got : want;
    return 0;
}

double tele_gpu_util_of(const struct gpu_tenant_stats *v, size_t n, uint32_t tenant)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].tenant == tenant)
            return v[i].util;
    return -1;
}

int tele_stall_list(const struct telemetry *t, struct stall_tenant_stats **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    uint64_t now = tier_now_mono_ns();
    size_t want = stall_list(t->stall, now, NULL, 0);
    if (want == 0)
        return 0;
    /* a tenant's first report between the two calls is left for the next render */
    struct stall_tenant_stats *v = calloc(want, sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t got = stall_list(t->stall, now, v, want);
    *out = v;
    *n = got < want ? got : want;
    return 0;
}

bool tele_hist_empty(const struct tele_hist *h)
{
    for (unsigned i = 0; i < TELE_HIST_NBUCKETS; i++)
        if (atomic_load_explicit(&h->counts[i], memory_order_relaxed))
            return false;
    return true;
}

void tele_hist_read(const struct tele_hist *h, struct tele_hist_copy *c)
{
    c->n = 0;
    for (unsigned i = 0; i < TELE_HIST_NBUCKETS; i++) {
        c->counts[i] = atomic_load_explicit(&h->counts[i], memory_order_relaxed);
        c->n += c->counts[i];
    }
    c->sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
    c->min_ns = atomic_load_explicit(&h->min_ns, memory_order_relaxed);
    c->max_ns = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
    if (c->min_ns == UINT64_MAX)
        c->min_ns = 0;
}

const char *tele_tenant_label(const struct telemetry *t, uint32_t id, char *buf, size_t bufsz)
{
    const char *name = t->tenant_name ? t->tenant_name(t->tenant_name_ud, id) : NULL;
    if (name)
        return name;
    snprintf(buf, bufsz, "%u", (unsigned)id);
    return buf;
}

/* ---- health ---------------------------------------------------------------------------- */

const char *tele_health_kind_name(enum tele_health_kind k)
{
    static const char *const names[] = {"backend_breaker_open", "writeback_backlog_age",
                                        "writeback_failed_files"};
    return (unsigned)k < TELE_HEALTH_NKINDS ? names[k] : "unknown";
}

static void add_reason(struct tele_health *h, enum tele_health_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_reason(struct tele_health *h, enum tele_health_kind k, const char *fmt, ...)
{
    h->kind[k] = true;
    if (h->nreasons >= TELE_HEALTH_MAX_REASONS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->reasons[h->nreasons++], sizeof(h->reasons[0]), fmt, ap);
    va_end(ap);
}

void tele_health_eval(const struct tele_gauges *g, struct tele_health *h)
{
    memset(h, 0, sizeof(*h));
    if (!g)
        return;
    for (unsigned i = 0; i < g->nbackends && i < TELE_MAX_BACKENDS; i++)
        if (g->backends[i].breaker == 1)
            add_reason(h, TELE_HEALTH_BREAKER_OPEN,
                       "backend '%s': circuit breaker open (calls fail at once until a probe "
                       "succeeds)",
                       g->backends[i].name ? g->backends[i].name : "?");
    if (g->writeback && g->wb_backlog_age_limit_s > 0 &&
        g->wb_oldest_backlog_age_s > g->wb_backlog_age_limit_s)
        add_reason(h, TELE_HEALTH_BACKLOG_AGE,
                   "write-back: the oldest of %llu files waiting for upload has waited %.0f s "
                   "(limit [daemon] health_backlog_age %.0f s)",
                   (unsigned long long)g->wb_backlog_files, g->wb_oldest_backlog_age_s,
                   g->wb_backlog_age_limit_s);
    if (g->writeback && g->wb_failed_files > 0)
        add_reason(h, TELE_HEALTH_FAILED_FILES,
                   "write-back: %llu files FAILED and will never be uploaded (tierctl "
                   "checkpoints lists them)",
                   (unsigned long long)g->wb_failed_files);
}

/* ---- text helpers ---------------------------------------------------------------------- */

int tele_put_u64(struct dynbuf *out, uint64_t v)
{
    char buf[24];
    char *p = buf + sizeof(buf);
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return dynbuf_append(out, p, (size_t)(buf + sizeof(buf) - p));
}

void tele_out_put(struct tele_out *o, const char *s)
{
    tele_out_putn(o, s, strlen(s));
}

void tele_out_putn(struct tele_out *o, const char *s, size_t n)
{
    if (o->rc == 0)
        o->rc = dynbuf_append(o->b, s, n);
}

void tele_out_u64(struct tele_out *o, uint64_t v)
{
    if (o->rc == 0)
        o->rc = tele_put_u64(o->b, v);
}

int tele_prom_escape(struct dynbuf *out, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0; /* run: bytes from i - run to i that need no change */
    int rc = 0;
    while (i < len && rc == 0) {
        const char *rep = NULL;
        size_t seq = 1;
        if (u[i] == '\\')
            rep = "\\\\";
        else if (u[i] == '"')
            rep = "\\\"";
        else if (u[i] == '\n')
            rep = "\\n";
        else if ((seq = tier_utf8_seq(u + i, len - i)) == 0)
            rep = "\xEF\xBF\xBD", seq = 1;
        if (!rep) {
            i += seq;
            run += seq;
            continue;
        }
        rc = dynbuf_append(out, s + i - run, run);
        if (rc == 0)
            rc = dynbuf_append(out, rep, strlen(rep));
        run = 0;
        i += seq;
    }
    if (rc == 0)
        rc = dynbuf_append(out, s + i - run, run);
    return rc;
}
