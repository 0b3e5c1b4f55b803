/* SPDX-License-Identifier: Apache-2.0 */
/*
 * advisor.c - the hot-tier advice loop (advisor.h; docs/ADVICE.md).
 *
 * STATE: per tenant id, the cumulative counters seen at the last tick (to take differences) and
 * auto_quota's count of changes; the latest round's results. Two locks: tick_mu serialises the
 * rounds (the counters, the scratch results, last_ns; held while the round asks the cache for
 * curves and sets quotas), mu guards what readers see (view, seen[].changes) and is held only
 * to copy, so a reader of the advice never waits for a round.
 *
 * TRANSITION -> FUNCTION
 *   first tick: take the counters only                advisor_tick()
 *   later tick: measure, advise, keep the results     advisor_tick() -> gather(), advice_compute()
 *   with auto quotas: move them part of the way        advisor_tick() -> move_quotas()
 *   the thread: a tick every interval until stopped   advisor_start(), advisor_main(),
 *                                                     advisor_stop()
 *   read the latest round                             advisor_get()
 */
#include "advice/advisor.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/timeutil.h"

struct seen {
    uint64_t demand_bytes, wait_ns, compute_ns;
    uint64_t changes;
};

struct advisor {
    pthread_mutex_t tick_mu; /* order: tick_mu, then mu */
    pthread_mutex_t mu;
    /* the thread (advisor_start): run_mu guards stop; run_cv wakes it to stop */
    pthread_mutex_t run_mu;
    pthread_cond_t run_cv;
    pthread_t thread;
    bool running, stop;
    uint64_t interval_ns;
    struct advisor_ctx ctx;
    struct advisor_config cfg;
    struct seen *seen; /* ctx.max_tenants */
    uint64_t last_ns;
    struct advisor_view view; /* the latest round; view.r owned here */
    struct advisor_tenant tmp;
    struct advisor_result *scratch; /* ctx.max_tenants: a round's results before the copy */
};

int advisor_new(const struct advisor_ctx *ctx, const struct advisor_config *cfg,
                struct advisor **out)
{
    if (!ctx || !ctx->max_tenants || !ctx->tenant || (cfg && cfg->auto_quota && !ctx->set_quota))
        return -EINVAL;
    struct advisor *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->seen = calloc(ctx->max_tenants, sizeof(*a->seen));
    a->scratch = calloc(ctx->max_tenants, sizeof(*a->scratch));
    if (!a->seen || !a->scratch) {
        free(a->seen);
        free(a->scratch);
        free(a);
        return -ENOMEM;
    }
    a->ctx = *ctx;
    if (cfg)
        a->cfg = *cfg;
    if (a->cfg.step <= 0 || a->cfg.step > 1)
        a->cfg.step = 0.5;
    if (a->cfg.hysteresis <= 0)
        a->cfg.hysteresis = 0.05;
    if (a->ctx.target_stall <= 0)
        a->ctx.target_stall = 0.15;
    if (!a->ctx.block_size)
        a->ctx.block_size = 1;
    pthread_mutex_init(&a->tick_mu, NULL);
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->run_mu, NULL);
    tier_cond_init_mono(&a->run_cv); /* the interval is not moved by clock steps */
    *out = a;
    return 0;
}

void advisor_free(struct advisor *a)
{
    if (!a)
        return;
    advisor_stop(a);
    pthread_cond_destroy(&a->run_cv);
    pthread_mutex_destroy(&a->run_mu);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->tick_mu);
    free(a->view.r);
    free(a->scratch);
    free(a->seen);
    free(a);
}

static uint64_t diff(uint64_t now, uint64_t then)
{
    return now >= then ? now - then : 0; /* a counter that went back (a reclaimed id): 0 */
}

/* Step 1: the tenants active in this interval, into r (max_tenants of room); returns how many.
 * *idle_held: the hot-tier bytes the others hold (the split shares out the rest). */
static size_t gather(struct advisor *a, double dt_s, bool measure, struct advisor_result *r,
                     uint64_t *idle_held)
{
    *idle_held = 0;
    size_t n = 0;
    for (uint32_t t = 0; t < a->ctx.max_tenants; t++) {
        struct advisor_tenant *x = &a->tmp;
        memset(x, 0, sizeof(*x));
        x->quota_bytes = UINT64_MAX;
        struct seen *s = &a->seen[t];
        if (a->ctx.tenant(a->ctx.ud, t, x) != 0) {
            /* none (yet): a tenant that appears counts from zero, its counters' start */
            s->demand_bytes = s->wait_ns = s->compute_ns = 0;
            continue;
        }
        uint64_t dd = diff(x->demand_bytes, s->demand_bytes);
        uint64_t dw = diff(x->wait_ns, s->wait_ns), dc = diff(x->compute_ns, s->compute_ns);
        s->demand_bytes = x->demand_bytes;
        s->wait_ns = x->wait_ns;
        s->compute_ns = x->compute_ns;
        if (!measure || dd == 0) {
            uint64_t held = x->quota_bytes < x->held_bytes ? x->quota_bytes : x->held_bytes;
            *idle_held += held;
            continue;
        }
        struct advisor_result *o = &r[n++];
        memset(o, 0, sizeof(*o));
        o->tenant = t;
        memcpy(o->name, x->name, sizeof(o->name));
        o->name[sizeof(o->name) - 1] = '\0';
        struct advice_in *in = &o->in;
        in->npoints = x->npoints < ADVICE_POINTS_MAX ? x->npoints : ADVICE_POINTS_MAX;
        memcpy(in->curve, x->curve, in->npoints * sizeof(in->curve[0]));
        in->share_bytes = x->quota_bytes != UINT64_MAX ? x->quota_bytes : x->held_bytes;
        in->demand_bps = (double)dd / dt_s;
        in->has_stall = dw + dc > 0;
        in->wait_s = (double)dw / 1e9;
        in->compute_s = (double)dc / 1e9;
        in->weight = x->weight > 0 ? x->weight : 1;
        in->min_bytes = x->min_bytes;
        o->quota_changes = s->changes;
    }
    return n;
}

/* Step 3: auto_quota. */
static bool move_quotas(struct advisor *a, struct advisor_result *r, size_t n)
{
    uint64_t bs = a->ctx.block_size, least = a->ctx.hot_bytes / 64;
    bool moved = false;
    for (size_t i = 0; i < n; i++) {
        uint64_t now = r[i].in.share_bytes, want = r[i].out.split_bytes;
        double next = (double)now + a->cfg.step * ((double)want - (double)now);
        uint64_t q = (uint64_t)(next / (double)bs + 0.5) * bs;
        if (q < r[i].in.min_bytes)
            q = r[i].in.min_bytes;
        if (q < bs)
            q = bs;
        uint64_t delta = q > now ? q - now : now - q;
        if (delta < least || delta < bs)
            continue;
        int rc = a->ctx.set_quota(a->ctx.ud, r[i].tenant, q);
        if (rc != 0) {
            log_warn("advice: cannot set tenant %s's hot-tier quota to %" PRIu64 " bytes: %s",
                     r[i].name, q, strerror(-rc));
            continue;
        }
        struct seen *s = &a->seen[r[i].tenant];
        pthread_mutex_lock(&a->mu); /* advisor_quota_changes() reads it */
        s->changes++;
        pthread_mutex_unlock(&a->mu);
        r[i].quota_changes = s->changes;
        moved = true;
        log_info("advice: tenant %s's hot-tier quota %" PRIu64 " -> %" PRIu64
                 " bytes (advised %" PRIu64 "; predicted cost %.4f -> %.4f)",
                 r[i].name, now, q, want, r[i].out.cost_now, r[i].out.split_cost);
    }
    return moved;
}

void advisor_tick(struct advisor *a, uint64_t now_ns)
{
    pthread_mutex_lock(&a->tick_mu);
    bool measure = a->last_ns && now_ns > a->last_ns;
    double dt = measure ? (double)(now_ns - a->last_ns) / 1e9 : 0;
    struct advisor_result *r = a->scratch;
    uint64_t idle_held = 0;
    size_t n = gather(a, dt, measure, r, &idle_held);
    a->last_ns = now_ns;
    struct advice_in *in = NULL;
    struct advice_out *out = NULL;
    struct advisor_result *keep = NULL;
    if (!measure || !(in = calloc(n ? n : 1, sizeof(*in))) ||
        !(out = calloc(n ? n : 1, sizeof(*out))) || !(keep = malloc((n ? n : 1) * sizeof(*r)))) {
        free(in);
        free(out);
        pthread_mutex_unlock(&a->tick_mu);
        return; /* the first tick takes the counters only; out of memory: no round */
    }
    for (size_t i = 0; i < n; i++) {
        in[i] = r[i].in;
        in[i].name = r[i].name;
    }
    /* a tenant that did not read in this interval keeps its quota and what it holds: the split
     * shares out the rest, so quotas moved for some never add up past the hot tier */
    uint64_t hot = a->ctx.hot_bytes > idle_held ? a->ctx.hot_bytes - idle_held : 0;
    struct advice_params p = {
        .hot_bytes = hot, .target_stall = a->ctx.target_stall, .link_bps = a->ctx.link_bps};
    double cost_now = 0, cost = advice_compute(&p, in, n, out, &cost_now);
    for (size_t i = 0; i < n; i++)
        r[i].out = out[i];
    bool moved = false;
    if (a->cfg.auto_quota && n && cost < cost_now * (1 - a->cfg.hysteresis))
        moved = move_quotas(a, r, n);
    free(in);
    free(out);
    memcpy(keep, r, n * sizeof(*r));
    for (size_t i = 0; i < n; i++)
        keep[i].in.name = keep[i].name; /* the copy's own */
    pthread_mutex_lock(&a->mu);
    free(a->view.r);
    a->view = (struct advisor_view){.ticks = a->view.ticks + 1,
                                    .at_ns = now_ns,
                                    .interval_s = dt,
                                    .cost_now = cost_now,
                                    .cost_split = cost,
                                    .moved = moved,
                                    .n = n,
                                    .r = keep};
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_unlock(&a->tick_mu);
}

uint64_t advisor_quota_changes(struct advisor *a, uint32_t t)
{
    if (t >= a->ctx.max_tenants)
        return 0;
    pthread_mutex_lock(&a->mu);
    uint64_t n = a->seen[t].changes;
    pthread_mutex_unlock(&a->mu);
    return n;
}

int advisor_get(struct advisor *a, struct advisor_view *v)
{
    pthread_mutex_lock(&a->mu);
    *v = a->view;
    v->r = NULL;
    if (a->view.n) {
        v->r = malloc(a->view.n * sizeof(*v->r));
        if (!v->r) {
            pthread_mutex_unlock(&a->mu);
            return -ENOMEM;
        }
        memcpy(v->r, a->view.r, a->view.n * sizeof(*v->r));
    }
    pthread_mutex_unlock(&a->mu);
    for (size_t i = 0; i < v->n; i++)
        v->r[i].in.name = v->r[i].name; /* the copy's own */
    return 0;
}

void advisor_view_free(struct advisor_view *v)
{
    free(v->r);
    v->r = NULL;
    v->n = 0;
}

static void *advisor_main(void *arg)
{
    struct advisor *a = arg;
    pthread_mutex_lock(&a->run_mu);
    while (!a->stop) {
        pthread_mutex_unlock(&a->run_mu);
        advisor_tick(a, tier_now_mono_ns());
        pthread_mutex_lock(&a->run_mu);
        struct timespec until = tier_mono_deadline(a->interval_ns);
        while (!a->stop && pthread_cond_timedwait(&a->run_cv, &a->run_mu, &until) == 0)
            ;
    }
    pthread_mutex_unlock(&a->run_mu);
    return NULL;
}

int advisor_start(struct advisor *a, uint64_t interval_ns)
{
    pthread_mutex_lock(&a->run_mu);
    if (a->running) {
        pthread_mutex_unlock(&a->run_mu);
        return -EALREADY;
    }
    a->interval_ns = interval_ns ? interval_ns : 30 * TIER_NS_PER_SEC;
    a->stop = false;
    int rc = pthread_create(&a->thread, NULL, advisor_main, a);
    a->running = rc == 0;
    pthread_mutex_unlock(&a->run_mu);
    return -rc;
}

void advisor_stop(struct advisor *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->run_mu);
    if (!a->running) {
        pthread_mutex_unlock(&a->run_mu);
        return;
    }
    a->stop = true;
    pthread_cond_broadcast(&a->run_cv);
    pthread_mutex_unlock(&a->run_mu);
    pthread_join(a->thread, NULL);
    a->running = false;
}
