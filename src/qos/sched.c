/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched.c - the QoS scheduling point (sched.h): admission of backend requests in lanes, each
 * with a bound on requests in flight, an order (dmClock on backend lanes, strict class priority
 * and FIFO within a class on the default lane), an optional admission deadline and an optional
 * circuit breaker.
 *
 * Callers: the backend wrappers (sched_backend.c) for every backend call (the cache's fetches,
 * the FUSE layer's metadata, staging and the write-back uploads all reach a backend through
 * them), sched_admit() for requests that name no backend, and the local disk's lane through the
 * hook of sched_lane_disk_adm() (the cache's disk I/O, the burst buffer's spool writes). Admission
 * may block the calling thread; nothing here does I/O.
 *
 * A lane with idle_fast (the disk lane) grants a call of an unlimited client at once, like the
 * default lane, when a slot is free and nobody waits: no dmClock tags, no condition variable.
 * sched_lane_try_enter() grants the same way, or through dmClock when the client is limited but
 * under its limits now (under_limits(), so the grant in grant() is certain), and otherwise
 * returns -EAGAIN having queued nothing.
 *
 * DESIGN. Every mutable field of struct sched and of its lanes is guarded by sched.mu. A lane
 * keeps one FIFO list of waiters per class; each waiter sleeps on its own condition variable
 * (CLOCK_MONOTONIC, for the deadline). Grants are handed over, not raced for: whoever frees a
 * slot or queues behind a free slot calls grant(), which moves heads of the queue that goes next
 * into flight while slots are free, marks them granted and signals each. So a waiter never has to
 * win a wake-up race, and a waiter whose deadline passes simply unlinks itself: no ticket
 * numbers that a departed waiter would leave as a hole.
 *
 * Next waiter, backend lanes: dmc_pull() of the lane's dmClock queue (qos/dmclock.h), in which
 * every waiter's request is also queued (it keeps the class lists too: the breaker refuses
 * every queued waiter through them, and the timer is picked from them). When dmClock answers
 * that every waiting client is at its limit, grant() stores the earliest eligible time in
 * wake_ns and makes one waiter the lane's timer (arm_timer): it sleeps until then (or its own
 * deadline), calls grant() itself, and hands the role on when it leaves the queue. No thread
 * polls: the timer sleeps on a timed wait, every other waiter on its own condition variable.
 *
 * QoS off (sched_config.qos_off, [daemon] qos = off): backend lanes get no dmClock queue
 * (dmc NULL) and grant exactly as the default lane does, below; only their deadline and
 * breaker remain theirs.
 *
 * Next class, the default lane: the highest class with waiters, except that a class passed over
 * starve_limit times (passed[c] counts grants to higher classes while c had waiters) goes first,
 * and its counter restarts. Strict priority alone could starve a lower class for ever, and a
 * streaming reader waiting on a block a background stage worker is fetching would starve with it.
 *
 * Yield (sched.h, "Inference first on the link"): grant() passes dmClock a filter (yield_ok)
 * while the lane has inference demand (yielding()); dmClock answers -EBUSY when the filter alone
 * held every waiter back, and grant() stops until the next leave.
 *
 * Invariants (under mu): in the default lane waiters exist only while inflight == cap (grant()
 * is eager); in a backend lane waiters exist only while inflight == cap, or every waiting client
 * is at its limit (then wake_ns is set and the timer is one of them), or the yield holds back
 * every waiting client not at its limit (then each held waiter's direction has other_dir >=
 * yield_max >= 1 calls in flight); a waiter is in its lane's dmClock queue iff in_dmc; inflight
 * <= cap; inf_inflight + other_dir[0] + other_dir[1] <= inflight; queued[c] is the length of
 * class c's list; per class, summed over lanes, admitted - completed == inflight_now.
 *
 * The breaker's state machine is in sched.h with the function performing each transition:
 * breaker_open() is the only way into OPEN (it also refuses every queued waiter of the lane),
 * reached through note_failure() for a failed call or an unanswered attempt the backend reports
 * (sched_lane_attempt_failed), admit_timeout() for a probe whose admission timed out and
 * breaker_admit() for a probe not back by its deadline; breaker_admit() (lane_admit's first step)
 * makes the probe (OPEN -> HALF_OPEN); note_answer() closes on any answer.
 */
#include "qos/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/list.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "common/vec.h"
#include "qos/dmclock.h"
#include "telemetry/telemetry.h"

#define DEFAULT_MAX_INFLIGHT 32 /* the scheduler's historical global bound */
#define DEFAULT_STARVE_LIMIT 64
#define DEFAULT_ADMIT_TIMEOUT_MS 10000 /* [daemon] backend_timeout's default */
#define DEFAULT_BREAKER_FAILURES 5
#define DEFAULT_BREAKER_COOLDOWN_MS 5000
#define DEFAULT_YIELD_INFLIGHT 1
#define DEFAULT_YIELD_HOLD_MS 500

/* Built-in class parameters (sched.h's table); inference reserves a tenth of a known link. */
static const uint32_t builtin_weight[TIER_IO_NCLASSES] = {64, 16, 4, 1};
#define BUILTIN_INFERENCE_RESERVATION_DIV 10

struct waiter {
    struct tier_list link; /* on its lane's queue of its class */
    pthread_cond_t cv;
    int cls;
    enum sched_dir dir;
    uint64_t t0_ns;
    bool granted; /* set by grant(): the waiter is in flight */
    bool refused; /* set by breaker_open(): fail at once */
    bool in_dmc;  /* req is in the lane's dmClock queue */
    struct dmc_req req;
};

struct sched_lane {
    struct sched_lane *next_lane; /* creation order; immutable once linked */
    /* Immutable after sched_lane_new. */
    char name[64];
    int cap;
    uint64_t admit_timeout_ns; /* 0: wait without a deadline */
    int breaker_failures;      /* <= 0: no breaker */
    uint64_t cooldown_ns;
    bool idle_fast; /* sched_backend_config.idle_fast */
    /* Under sched.mu. */
    int inflight;
    struct tier_list q[TIER_IO_NCLASSES]; /* waiters (waiter.link) by class, oldest first */
    uint64_t queued[TIER_IO_NCLASSES];
    uint64_t passed[TIER_IO_NCLASSES];
    enum sched_breaker_state br;
    uint64_t open_until_ns;
    bool probe_out;             /* HALF_OPEN: the probe is queued or in flight */
    uint64_t probe_deadline_ns; /* ... and when it counts as failed if it has not returned */
    uint64_t admitted, completed, failures, admit_timeouts, consecutive, opens, fast_fails;
    /* QoS, backend lanes only (dmc NULL: the default lane). dmc's state and the fields below
     * are under sched.mu; sched, link_bps and cls_qos are immutable after sched_lane_new. */
    struct sched *sched;
    struct dmc *dmc;
    uint64_t link_bps;
    struct dmc_params cls_qos[TIER_IO_NCLASSES]; /* this lane's class defaults, resolved */
    uint64_t wake_ns;     /* every waiting client at its limit: the earliest grant; 0: none */
    struct waiter *timer; /* the waiter that sleeps until wake_ns; NULL: none */
    uint64_t grants_r, grants_w, limit_waits;
    struct lane_tenant *lt; /* this lane's own values by tenant (sched_lane_qos_set); under mu */
    size_t nlt;
    /* Yield (sched_backend_config.yield_inflight), backend lanes with dmClock: yield_max
     * (0: off) and yield_hold_ns are immutable after sched_lane_new; the rest under sched.mu. */
    int yield_max;
    uint64_t yield_hold_ns;
    int inf_inflight;     /* inference calls in flight */
    uint64_t inf_last_ns; /* when the last inference call left (0: none yet) */
    int other_dir[2];     /* other classes' calls in flight, by direction: down, up */
    uint64_t yield_waits;
    /* Reads in parts (sched_backend_config.split_bytes): split_bytes (0: none) is immutable
     * after sched_lane_new, split_reads under sched.mu. */
    uint64_t split_bytes;
    uint64_t split_reads;
};

/* A tenant's own parameters for one class (sched_qos_set). */
struct tenant_qos {
    bool set;
    struct sched_qos q;
};

/* A tenant's values on one lane only (sched_lane_qos_set, sched_lane_tenant_limit_set), read
 * over its values for every lane: a field 0 takes those. */
struct lane_tenant {
    struct tenant_qos q[TIER_IO_NCLASSES];
    uint64_t tenant_limit; /* 0: the tenant's limit of every lane; SCHED_RATE_NONE: none here */
};

struct sched {
    uint64_t starve_limit;                      /* immutable after sched_new */
    uint64_t op_cost;                           /* ditto */
    bool qos_off;                               /* ditto: backend lanes without dmClock */
    struct sched_qos_cls cls[TIER_IO_NCLASSES]; /* ditto: sched_config.cls */
    pthread_condattr_t cattr;

    pthread_mutex_t mu;
    struct sched_lane def; /* sched_admit's lane */
    struct sched_lane *lanes, *lanes_tail;
    size_t nlanes;
    struct sched_class_stats st[TIER_IO_NCLASSES];
    struct telemetry *tele; /* set before the first call (sched_set_telemetry); NULL: none */
    struct tenant_qos *tq;  /* by tenant * TIER_IO_NCLASSES + class; under mu */
    size_t ntq;
    uint64_t *tlim; /* tenant limits (sched_tenant_limit_set) by tenant; under mu */
    size_t ntlim;
};

/* Whether the backend reported an attempt (sched_lane_attempt_failed) during this thread's
 * current lane call: its final failure was then accounted already and is not counted again. */
static _Thread_local bool t_attempt_reported;
static _Thread_local long t_attempt_err; /* ... and the last reported attempt's error */
/* The admission wait of this thread's current lane call (sched_lane_enter), for telemetry. */
static _Thread_local uint64_t t_lane_waited_ns;

const char *sched_breaker_state_name(enum sched_breaker_state st)
{
    switch (st) {
    case SCHED_BREAKER_CLOSED:
        return "closed";
    case SCHED_BREAKER_OPEN:
        return "open";
    case SCHED_BREAKER_HALF_OPEN:
        return "half-open";
    }
    return "unknown";
}

static int class_of(const struct tier_ioctx *io)
{
    if (!io)
        io = tier_ioctx_current(); /* set by the backend dispatcher of the call */
    if (!io)
        return TIER_IO_TRAINING;
    if ((unsigned)io->cls >= TIER_IO_NCLASSES)
        return TIER_IO_BACKGROUND; /* unknown classes get the lowest priority, not a crash */
    return (int)io->cls;
}

static uint32_t tenant_of(const struct tier_ioctx *io)
{
    if (!io)
        io = tier_ioctx_current();
    if (!io)
        return TIER_TENANT_DEFAULT;
    return io->tenant < DMC_MAX_TENANTS ? io->tenant : TIER_TENANT_OTHER;
}

static void lane_init(struct sched_lane *l, const char *name, int cap, uint64_t admit_timeout_ms,
                      int breaker_failures, uint64_t cooldown_ms)
{
    memset(l, 0, sizeof(*l));
    tier_strlcpy(l->name, name, sizeof(l->name));
    l->cap = cap;
    l->admit_timeout_ns =
        admit_timeout_ms == SCHED_TIMEOUT_NONE ? 0 : admit_timeout_ms * TIER_NS_PER_MS;
    l->breaker_failures = breaker_failures;
    l->cooldown_ns = cooldown_ms * TIER_NS_PER_MS;
    for (int c = 0; c < TIER_IO_NCLASSES; c++)
        tier_list_init(&l->q[c]);
}

int sched_new(const struct sched_config *cfg, struct sched **out)
{
    for (int c = 0; cfg && c < TIER_IO_NCLASSES; c++) {
        if (cfg->cls[c].weight > SCHED_WEIGHT_MAX) {
            tier_err_set("class %s: weight %u is above %d", tier_io_class_name(c),
                         cfg->cls[c].weight, SCHED_WEIGHT_MAX);
            return -EINVAL;
        }
    }
    struct sched *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->op_cost = cfg && cfg->op_cost_bytes ? cfg->op_cost_bytes : DMC_OP_COST_DEFAULT;
    s->qos_off = cfg && cfg->qos_off;
    if (cfg)
        memcpy(s->cls, cfg->cls, sizeof(s->cls));
    s->starve_limit =
        cfg && cfg->starve_limit > 0 ? (uint64_t)cfg->starve_limit : DEFAULT_STARVE_LIMIT;
    lane_init(&s->def, "default",
              cfg && cfg->max_inflight > 0 ? cfg->max_inflight : DEFAULT_MAX_INFLIGHT, 0, 0, 0);
    if (pthread_condattr_init(&s->cattr) != 0)
        goto fail_attr;
    if (pthread_condattr_setclock(&s->cattr, CLOCK_MONOTONIC) != 0)
        goto fail_mutex;
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        goto fail_mutex;
    *out = s;
    return 0;

fail_mutex:
    pthread_condattr_destroy(&s->cattr);
fail_attr:
    free(s);
    return -ENOMEM;
}

void sched_free(struct sched *s)
{
    if (!s)
        return;
    struct sched_lane *l = s->lanes;
    while (l) {
        struct sched_lane *n = l->next_lane;
        dmc_free(l->dmc);
        free(l->lt);
        free(l);
        l = n;
    }
    free(s->tq);
    free(s->tlim);
    pthread_mutex_destroy(&s->mu);
    pthread_condattr_destroy(&s->cattr);
    free(s);
}

/* ---- QoS parameters ------------------------------------------------------------------------ */

/* v as configured: 0 takes dflt, SCHED_RATE_NONE is none (0 for dmClock). */
static uint64_t rate_or(uint64_t v, uint64_t dflt)
{
    return v == 0 ? dflt : v == SCHED_RATE_NONE ? 0 : v;
}

/* The lane's class defaults: sched_config.cls over the built-in table. */
static void lane_class_defaults(const struct sched *s, struct sched_lane *l)
{
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        uint64_t res = c == TIER_IO_INFERENCE ? l->link_bps / BUILTIN_INFERENCE_RESERVATION_DIV : 0;
        struct dmc_params *p = &l->cls_qos[c];
        p->reservation = rate_or(s->cls[c].reservation_bps, res);
        p->limit = rate_or(s->cls[c].limit_bps, 0);
        p->weight = s->cls[c].weight ? s->cls[c].weight : builtin_weight[c];
        if (p->limit && p->reservation > p->limit)
            p->reservation = p->limit; /* a built-in reservation never exceeds a set limit */
    }
}

/* Under mu: the lane's own values of a tenant (lt) over *out, its values for every lane. */
static void lane_own_params(const struct lane_tenant *lt, enum tier_io_class cls,
                            struct dmc_params *out)
{
    if (lt->tenant_limit)
        out->tenant_limit = lt->tenant_limit == SCHED_RATE_NONE ? 0 : lt->tenant_limit;
    if (!lt->q[cls].set)
        return;
    const struct sched_qos *q = &lt->q[cls].q;
    out->reservation = rate_or(q->reservation_bps, out->reservation);
    out->limit = rate_or(q->limit_bps, out->limit);
    if (q->weight)
        out->weight = q->weight;
    if (out->limit && out->reservation > out->limit)
        out->reservation = out->limit;
}

/* dmc_params_fn of a lane, under mu: the lane's own values of the tenant, over the tenant's
 * values for every lane, over the lane's class defaults. */
static void lane_params(void *ud, uint32_t tenant, enum tier_io_class cls, struct dmc_params *out)
{
    const struct sched_lane *l = ud;
    const struct sched *s = l->sched;
    *out = l->cls_qos[cls];
    out->tenant_limit = tenant < s->ntlim ? s->tlim[tenant] : 0;
    size_t i = (size_t)tenant * TIER_IO_NCLASSES + (size_t)cls;
    if (i < s->ntq && s->tq[i].set) {
        const struct sched_qos *q = &s->tq[i].q;
        out->reservation = rate_or(q->reservation_bps, out->reservation);
        out->limit = rate_or(q->limit_bps, out->limit);
        if (q->weight)
            out->weight = q->weight;
        if (out->limit && out->reservation > out->limit)
            out->reservation = out->limit; /* the config refuses this; a default may meet it */
    }
    if (tenant < l->nlt)
        lane_own_params(&l->lt[tenant], cls, out);
}

static void grant(struct sched *s, struct sched_lane *l);

/* Under mu, after a change of QoS parameters: every lane's clients re-read theirs, and since a
 * limit raised or lifted frees waiters now, every lane grants again. */
static void refresh_lanes(struct sched *s)
{
    uint64_t now = tier_now_mono_ns();
    for (struct sched_lane *l = s->lanes; l; l = l->next_lane) {
        if (l->dmc)
            dmc_refresh(l->dmc, now);
        grant(s, l);
    }
}

int sched_qos_set(struct sched *s, uint32_t tenant, enum tier_io_class cls,
                  const struct sched_qos *q)
{
    if (tenant >= DMC_MAX_TENANTS || (unsigned)cls >= TIER_IO_NCLASSES) {
        tier_err_set("QoS for tenant %u class %d: no such tenant id or class", tenant, (int)cls);
        return -EINVAL;
    }
    if (q && q->weight > SCHED_WEIGHT_MAX) {
        tier_err_set("QoS weight %u is above %d", q->weight, SCHED_WEIGHT_MAX);
        return -EINVAL;
    }
    size_t i = (size_t)tenant * TIER_IO_NCLASSES + (size_t)cls;
    pthread_mutex_lock(&s->mu);
    struct tenant_qos *tq =
        tier_vec_grow(s->tq, &s->ntq, i + 1, sizeof(*tq), 64 * TIER_IO_NCLASSES);
    if (!tq) {
        pthread_mutex_unlock(&s->mu);
        return -ENOMEM;
    }
    s->tq = tq;
    s->tq[i].set = q != NULL;
    if (q)
        s->tq[i].q = *q;
    refresh_lanes(s);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int sched_tenant_limit_set(struct sched *s, uint32_t tenant, uint64_t limit_bps)
{
    if (tenant >= DMC_MAX_TENANTS) {
        tier_err_set("QoS limit for tenant %u: no such tenant id", tenant);
        return -EINVAL;
    }
    pthread_mutex_lock(&s->mu);
    uint64_t *tlim = tier_vec_grow(s->tlim, &s->ntlim, (size_t)tenant + 1, sizeof(*tlim), 64);
    if (!tlim) {
        pthread_mutex_unlock(&s->mu);
        return -ENOMEM;
    }
    s->tlim = tlim;
    s->tlim[tenant] = limit_bps == SCHED_RATE_NONE ? 0 : limit_bps;
    refresh_lanes(s);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Under mu: lane l's entry of tenant, the table grown (zeroed) to hold it; NULL: no memory. */
static struct lane_tenant *lane_tenant_at(struct sched_lane *l, uint32_t tenant)
{
    struct lane_tenant *t = tier_vec_grow(l->lt, &l->nlt, (size_t)tenant + 1, sizeof(*t), 64);
    if (!t)
        return NULL;
    l->lt = t;
    return &l->lt[tenant];
}

int sched_lane_qos_set(struct sched *s, struct sched_lane *l, uint32_t tenant,
                       enum tier_io_class cls, const struct sched_qos *q)
{
    if (tenant >= DMC_MAX_TENANTS || (unsigned)cls >= TIER_IO_NCLASSES || l->sched != s) {
        tier_err_set("QoS for tenant %u class %d on lane '%s': no such tenant id, class or lane",
                     tenant, (int)cls, l->name);
        return -EINVAL;
    }
    if (q && q->weight > SCHED_WEIGHT_MAX) {
        tier_err_set("QoS weight %u is above %d", q->weight, SCHED_WEIGHT_MAX);
        return -EINVAL;
    }
    pthread_mutex_lock(&s->mu);
    struct lane_tenant *lt = lane_tenant_at(l, tenant);
    if (!lt) {
        pthread_mutex_unlock(&s->mu);
        return -ENOMEM;
    }
    lt->q[cls].set = q != NULL;
    lt->q[cls].q = q ? *q : (struct sched_qos){0};
    refresh_lanes(s);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int sched_lane_tenant_limit_set(struct sched *s, struct sched_lane *l, uint32_t tenant,
                                uint64_t limit_bps)
{
    if (tenant >= DMC_MAX_TENANTS || l->sched != s) {
        tier_err_set("QoS limit for tenant %u on lane '%s': no such tenant id or lane", tenant,
                     l->name);
        return -EINVAL;
    }
    pthread_mutex_lock(&s->mu);
    struct lane_tenant *lt = lane_tenant_at(l, tenant);
    if (!lt) {
        pthread_mutex_unlock(&s->mu);
        return -ENOMEM;
    }
    lt->tenant_limit = limit_bps;
    refresh_lanes(s);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

bool sched_lane_qos_own_get(struct sched *s, struct sched_lane *l, uint32_t tenant,
                            enum tier_io_class cls, struct sched_qos *out)
{
    memset(out, 0, sizeof(*out));
    if ((unsigned)cls >= TIER_IO_NCLASSES)
        return false;
    pthread_mutex_lock(&s->mu);
    bool set = tenant < l->nlt && l->lt[tenant].q[cls].set;
    if (set)
        *out = l->lt[tenant].q[cls].q;
    pthread_mutex_unlock(&s->mu);
    return set;
}

uint64_t sched_lane_tenant_limit_own_get(struct sched *s, struct sched_lane *l, uint32_t tenant)
{
    pthread_mutex_lock(&s->mu);
    uint64_t v = tenant < l->nlt ? l->lt[tenant].tenant_limit : 0;
    pthread_mutex_unlock(&s->mu);
    return v;
}

void sched_lane_qos_get(struct sched *s, struct sched_lane *l, uint32_t tenant,
                        enum tier_io_class cls, struct sched_qos *out, uint64_t *tenant_limit)
{
    struct dmc_params p;
    pthread_mutex_lock(&s->mu);
    lane_params(l, tenant < DMC_MAX_TENANTS ? tenant : TIER_TENANT_OTHER,
                (unsigned)cls < TIER_IO_NCLASSES ? cls : TIER_IO_BACKGROUND, &p);
    pthread_mutex_unlock(&s->mu);
    out->reservation_bps = p.reservation;
    out->limit_bps = p.limit;
    out->weight = p.weight;
    if (tenant_limit)
        *tenant_limit = p.tenant_limit;
}

bool sched_qos_get(struct sched *s, uint32_t tenant, enum tier_io_class cls, struct sched_qos *out)
{
    memset(out, 0, sizeof(*out));
    if (tenant >= DMC_MAX_TENANTS || (unsigned)cls >= TIER_IO_NCLASSES)
        return false;
    size_t i = (size_t)tenant * TIER_IO_NCLASSES + (size_t)cls;
    pthread_mutex_lock(&s->mu);
    bool set = i < s->ntq && s->tq[i].set;
    if (set)
        *out = s->tq[i].q;
    pthread_mutex_unlock(&s->mu);
    return set;
}

bool sched_qos_enabled(const struct sched *s)
{
    return !s->qos_off;
}

bool sched_tenant_busy(struct sched *s, uint32_t tenant)
{
    bool busy = false;
    pthread_mutex_lock(&s->mu);
    for (unsigned c = 0; c < TIER_IO_NCLASSES && !busy; c++) {
        size_t i = (size_t)tenant * TIER_IO_NCLASSES + c;
        busy = i < s->ntq && s->tq[i].set;
    }
    busy = busy || (tenant < s->ntlim && s->tlim[tenant]);
    for (struct sched_lane *l = s->lanes; l && !busy; l = l->next_lane) {
        if (tenant < l->nlt) {
            const struct lane_tenant *lt = &l->lt[tenant];
            busy = lt->tenant_limit != 0;
            for (unsigned c = 0; c < TIER_IO_NCLASSES && !busy; c++)
                busy = lt->q[c].set;
        }
        for (unsigned c = 0; c < TIER_IO_NCLASSES && l->dmc && !busy; c++) {
            struct dmc_client_info ci;
            busy = dmc_client_info_get(l->dmc, tenant, (enum tier_io_class)c, &ci) == 0 &&
                   ci.queued > 0;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return busy;
}

int sched_tenant_forget(struct sched *s, uint32_t tenant)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    for (struct sched_lane *l = s->lanes; l; l = l->next_lane)
        if (l->dmc && dmc_tenant_forget(l->dmc, tenant) != 0)
            rc = -EBUSY;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

uint64_t sched_tenant_limit_get(struct sched *s, uint32_t tenant)
{
    pthread_mutex_lock(&s->mu);
    uint64_t v = tenant < s->ntlim ? s->tlim[tenant] : 0;
    pthread_mutex_unlock(&s->mu);
    return v;
}

void sched_lane_class_qos_get(struct sched *s, struct sched_lane *l, enum tier_io_class cls,
                              struct sched_qos *out)
{
    (void)s; /* cls_qos is immutable after sched_lane_new */
    const struct dmc_params *p = &l->cls_qos[(unsigned)cls < TIER_IO_NCLASSES ? cls : 0];
    out->reservation_bps = p->reservation;
    out->limit_bps = p->limit;
    out->weight = p->weight;
}

void sched_lane_client_stats_get(struct sched *s, struct sched_lane *l, uint32_t tenant,
                                 enum tier_io_class cls, struct sched_client_stats *out)
{
    memset(out, 0, sizeof(*out));
    struct dmc_client_info ci;
    pthread_mutex_lock(&s->mu);
    int rc = l->dmc ? dmc_client_info_get(l->dmc, tenant, cls, &ci) : -ENOENT;
    pthread_mutex_unlock(&s->mu);
    if (rc)
        return;
    out->grants = ci.grants_reservation + ci.grants_weight;
    out->granted_cost = ci.granted;
    uint64_t ops = ci.granted_ops * s->op_cost;
    out->granted_bytes = ci.granted > ops ? ci.granted - ops : 0;
    out->queued_now = ci.queued;
}

uint64_t sched_op_cost(const struct sched *s)
{
    return s->op_cost;
}

/* A lane's part size for reads in parts (sched_backend_config.split_bytes), resolved: 0 none. */
static uint64_t split_size(const struct sched_backend_config *cfg)
{
    uint64_t v = cfg ? cfg->split_bytes : 0;
    if (v == SCHED_SPLIT_OFF)
        return 0;
    if (v)
        return v;
    if (!cfg || !cfg->link_capacity_bps)
        return 0;
    uint64_t b = cfg->link_capacity_bps / 1000000 * SCHED_SPLIT_AUTO_US +
                 cfg->link_capacity_bps % 1000000 * SCHED_SPLIT_AUTO_US / 1000000;
    b = (b + SCHED_SPLIT_UNIT - 1) / SCHED_SPLIT_UNIT * SCHED_SPLIT_UNIT;
    return b ? b : SCHED_SPLIT_UNIT;
}

int sched_lane_new(struct sched *s, const char *name, const struct sched_backend_config *cfg,
                   struct sched_lane **out)
{
    struct sched_lane *l = malloc(sizeof(*l));
    if (!l)
        return -ENOMEM;
    lane_init(l, name ? name : "backend",
              cfg && cfg->max_inflight > 0 ? cfg->max_inflight : DEFAULT_MAX_INFLIGHT,
              cfg && cfg->admit_timeout_ms ? cfg->admit_timeout_ms : DEFAULT_ADMIT_TIMEOUT_MS,
              cfg && cfg->breaker_failures ? cfg->breaker_failures : DEFAULT_BREAKER_FAILURES,
              cfg && cfg->breaker_cooldown_ms ? cfg->breaker_cooldown_ms
                                              : DEFAULT_BREAKER_COOLDOWN_MS);
    l->sched = s;
    l->idle_fast = cfg && cfg->idle_fast;
    l->link_bps = cfg ? cfg->link_capacity_bps : 0;
    if (!s->qos_off) {
        if (!(cfg && cfg->yield_inflight < 0))
            l->yield_max =
                cfg && cfg->yield_inflight ? cfg->yield_inflight : DEFAULT_YIELD_INFLIGHT;
        l->yield_hold_ns =
            (cfg && cfg->yield_hold_ms ? cfg->yield_hold_ms : DEFAULT_YIELD_HOLD_MS) *
            TIER_NS_PER_MS;
        l->split_bytes = split_size(cfg);
    }
    lane_class_defaults(s, l);
    struct dmc_config dc = {.op_cost = s->op_cost, .params = lane_params, .params_ud = l};
    /* QoS off: no dmClock, so grant() and lane_admit() treat the lane as the default lane */
    if (!s->qos_off && dmc_new(&dc, &l->dmc) != 0) {
        free(l);
        return -ENOMEM;
    }
    pthread_mutex_lock(&s->mu);
    if (s->lanes_tail)
        s->lanes_tail->next_lane = l;
    else
        s->lanes = l;
    s->lanes_tail = l;
    s->nlanes++;
    pthread_mutex_unlock(&s->mu);
    *out = l;
    return 0;
}

/* ---- queue ---------------------------------------------------------------------------------- */

/* Under mu: the class whose head goes next, or -1 if nobody waits. */
static int next_class(const struct sched *s, const struct sched_lane *l)
{
    int first = -1;
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        if (!l->queued[c])
            continue;
        if (l->passed[c] >= s->starve_limit)
            return c;
        if (first < 0)
            first = c;
    }
    return first;
}

/* Under mu: the oldest waiter of class c on l, or NULL. */
static struct waiter *first_waiter(const struct sched_lane *l, int c)
{
    struct tier_list *f = tier_list_first(&l->q[c]);
    return f ? tier_list_entry(f, struct waiter, link) : NULL;
}

/* Under mu: every waiting client of l is at its limit until wake_ns: make sure one waiter
 * sleeps until then (the first queued, by class), and wake it so it sleeps to the new time. */
static void arm_timer(struct sched_lane *l)
{
    if (!l->wake_ns)
        return;
    for (int c = 0; !l->timer && c < TIER_IO_NCLASSES; c++)
        l->timer = first_waiter(l, c);
    if (l->timer)
        pthread_cond_signal(&l->timer->cv);
}

static void unlink_waiter(struct sched *s, struct sched_lane *l, struct waiter *w)
{
    int c = w->cls;
    if (w->in_dmc) { /* leaving without a grant (deadline, breaker) */
        dmc_cancel(l->dmc, &w->req);
        w->in_dmc = false;
    }
    tier_list_remove(&w->link);
    l->queued[c]--;
    s->st[c].queued_now--;
    if (!l->queued[c])
        l->passed[c] = 0;
    if (l->timer == w) { /* hand the timer on */
        l->timer = NULL;
        arm_timer(l);
    }
}

/* Under mu, backend lanes with QoS: whether the lane has inference demand at now (a call
 * queued or in flight, or the last one left less than yield_hold_ns ago). */
static bool inference_demand(const struct sched_lane *l, uint64_t now)
{
    if (l->inf_inflight || l->queued[TIER_IO_INFERENCE])
        return true;
    return l->inf_last_ns && now - l->inf_last_ns < l->yield_hold_ns;
}

/* Under mu, backend lanes with yield: whether the yield applies at now (inference demand). */
static bool yielding(const struct sched_lane *l, uint64_t now)
{
    return l->yield_max && inference_demand(l, now);
}

/* Under mu: whether a call of class c moving data dir must wait for inference, given whether
 * the lane yields now: its direction already has yield_max calls of other classes in flight. */
static bool yield_holds(const struct sched_lane *l, int c, enum sched_dir dir, bool yield)
{
    return yield && c != TIER_IO_INFERENCE && dir != SCHED_DIR_NONE &&
           l->other_dir[dir - 1] >= l->yield_max;
}

/* Under mu: account one admission of class c moving data dir that waited waited_ns. */
static void account_admit(struct sched *s, struct sched_lane *l, int c, enum sched_dir dir,
                          uint64_t waited_ns)
{
    if (c == TIER_IO_INFERENCE)
        l->inf_inflight++;
    else if (dir != SCHED_DIR_NONE)
        l->other_dir[dir - 1]++;
    l->inflight++;
    l->admitted++;
    s->st[c].inflight_now++;
    s->st[c].admitted++;
    s->st[c].wait_ns_total += waited_ns;
}

static struct waiter *waiter_of(struct dmc_req *r)
{
    return (struct waiter *)(void *)((char *)r - offsetof(struct waiter, req));
}

/* dmc_filter_fn of a yielding lane: whether the head's call may go past the inference demand. */
static bool yield_ok(void *ud, const struct dmc_req *head)
{
    const struct waiter *w =
        (const struct waiter *)(const void *)((const char *)head - offsetof(struct waiter, req));
    return !yield_holds(ud, w->cls, w->dir, true);
}

/* Under mu, backend lanes: the waiter dmClock grants next, or NULL (then, when every waiting
 * client is at its limit, the timer is armed for the earliest; when yield holds back every
 * waiter the others are not at their limits, a call it waits for is in flight and its
 * sched_lane_leave grants again). */
static struct waiter *next_dmc(struct sched_lane *l, uint64_t now)
{
    struct dmc_req *r = NULL;
    enum dmc_phase ph = DMC_PHASE_WEIGHT;
    uint64_t next = 0;
    bool y = yielding(l, now);
    int rc = dmc_pull_filtered(l->dmc, now, y ? yield_ok : NULL, l, &r, &ph, &next);
    if (rc == -EBUSY) {
        l->yield_waits++;
        return NULL;
    }
    if (rc == -EAGAIN) {
        l->wake_ns = next;
        l->limit_waits++;
        arm_timer(l);
        return NULL;
    }
    if (rc)
        return NULL;
    struct waiter *w = waiter_of(r);
    w->in_dmc = false;
    if (ph == DMC_PHASE_RESERVATION)
        l->grants_r++;
    else
        l->grants_w++;
    return w;
}

/* Under mu: hand free slots to the waiters that go next. */
static void grant(struct sched *s, struct sched_lane *l)
{
    l->wake_ns = 0; /* next_dmc sets it again if every waiting client is still limited */
    while (l->inflight < l->cap) {
        uint64_t now = tier_now_mono_ns();
        struct waiter *w;
        int c;
        if (l->dmc) {
            w = next_dmc(l, now);
            if (!w)
                return;
            c = w->cls;
            unlink_waiter(s, l, w);
        } else {
            c = next_class(s, l);
            if (c < 0)
                return;
            w = first_waiter(l, c);
            if (!w) /* next_class() picks a class with a waiter: never, but say so */
                return;
            unlink_waiter(s, l, w);
            l->passed[c] = 0;
            for (int k = c + 1; k < TIER_IO_NCLASSES; k++) {
                if (l->queued[k])
                    l->passed[k]++;
            }
        }
        /* the waiting time must be counted even when it rounds to nothing */
        account_admit(s, l, c, w->dir, now > w->t0_ns ? now - w->t0_ns : 1);
        w->granted = true;
        pthread_cond_signal(&w->cv);
    }
}

/* ---- breaker -------------------------------------------------------------------------------- */

/* Whether a call's own result (no attempt of it reported) says the backend gave no answer: a
 * timeout (S3's curl timeout, a deadline), a refused, broken or missing connection, or a mount
 * that is gone (ENOTCONN: a FUSE file system whose daemon died; ESHUTDOWN, ENODEV: a device or
 * transport taken away). -EIO is not one: the POSIX backend passes the file system's errno
 * through, and an EIO from the read of one damaged file is that file's answer, so a few bad
 * files must not open the breaker for a healthy backend (third review). S3 connection failures,
 * which it maps to -EIO, are attempts it reports unanswered (sched_lane_attempt_failed). */
static bool is_failure(long result)
{
    switch (-result) {
    case ETIMEDOUT:
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EHOSTUNREACH:
    case EHOSTDOWN:
    case ENETUNREACH:
    case ENETDOWN:
    case ENOTCONN:
    case ESHUTDOWN:
    case ENODEV:
        return true;
    default:
        return false;
    }
}

/* Under mu: CLOSED/HALF_OPEN -> OPEN; every queued call of the lane is refused at once. */
static void breaker_open(struct sched *s, struct sched_lane *l, uint64_t now)
{
    l->br = SCHED_BREAKER_OPEN;
    l->open_until_ns = now + l->cooldown_ns;
    l->probe_out = false;
    l->opens++;
    for (int c = 0; c < TIER_IO_NCLASSES; c++) {
        struct waiter *w;
        while ((w = first_waiter(l, c))) {
            unlink_waiter(s, l, w);
            w->refused = true;
            l->fast_fails++;
            pthread_cond_signal(&w->cv);
        }
    }
}

/* Under mu: a failure moves the breaker towards OPEN. */
static void note_failure(struct sched *s, struct sched_lane *l)
{
    l->failures++;
    l->consecutive++;
    if (l->br == SCHED_BREAKER_HALF_OPEN ||
        (l->br == SCHED_BREAKER_CLOSED && l->consecutive >= (uint64_t)l->breaker_failures))
        breaker_open(s, l, tier_now_mono_ns());
}

/* Under mu: the backend answered: whatever the state, it is reachable again. */
static void note_answer(struct sched_lane *l)
{
    l->consecutive = 0;
    l->br = SCHED_BREAKER_CLOSED;
    l->probe_out = false;
}

/* Under mu: a completed call's result moves the breaker; reported: its attempts were accounted
 * one by one already (last_err: the last one's error), so a result that is that attempt's error
 * is not counted again, whatever its errno (an S3 connection failure is -EIO). */
static void note_result(struct sched *s, struct sched_lane *l, long result, bool reported,
                        long last_err)
{
    if (l->breaker_failures <= 0)
        return;
    if (reported) {
        if (result >= 0 || (result != last_err && !is_failure(result)))
            note_answer(l);
    } else if (!is_failure(result)) {
        note_answer(l);
    } else {
        note_failure(s, l);
    }
}

bool sched_lane_attempt_failed(struct sched *s, struct sched_lane *l, long err, bool answered)
{
    if (l->breaker_failures <= 0)
        return true;
    pthread_mutex_lock(&s->mu);
    t_attempt_reported = true;
    t_attempt_err = err;
    if (answered) /* the backend knows whether it got an answer: unanswered is a failure */
        note_answer(l);
    else
        note_failure(s, l);
    bool retry = l->br != SCHED_BREAKER_OPEN;
    pthread_mutex_unlock(&s->mu);
    return retry;
}

static int fast_fail(const struct sched_lane *l, uint64_t consecutive, uint64_t left_ns)
{
    tier_err_set("backend '%s' is not answering: circuit breaker open after %llu consecutive "
                 "failures; calls fail at once for another %llu ms, then one probe goes through",
                 l->name, (unsigned long long)consecutive,
                 (unsigned long long)(left_ns / TIER_NS_PER_MS));
    return -ETIMEDOUT;
}

/* ---- admission ------------------------------------------------------------------------------ */

static struct timespec mono_ts(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / TIER_NS_PER_SEC),
                          .tv_nsec = (long)(ns % TIER_NS_PER_SEC)};
    return ts;
}

/* Under mu, backend lanes: whether (tenant, c) has no limit of its own and no tenant limit. */
static bool unlimited(struct sched_lane *l, uint32_t tenant, int c)
{
    struct dmc_params p;
    lane_params(l, tenant, (enum tier_io_class)c, &p);
    return !p.limit && !p.tenant_limit;
}

/* Under mu, backend lanes: whether dmClock would grant (tenant, c) at now, alone in the queue:
 * its client and its tenant under their limits (a client not seen yet is). */
static bool under_limits(const struct sched_lane *l, uint32_t tenant, int c, uint64_t now)
{
    struct dmc_client_info ci;
    if (dmc_client_info_get(l->dmc, tenant, (enum tier_io_class)c, &ci) != 0)
        return true;
    if (ci.params.limit && ci.l_next > now)
        return false;
    return !(ci.params.tenant_limit && ci.tenant_l_next > now);
}

/* Under mu: the breaker's say on a call at t0. false: the call goes on (*probe: it is the probe
 * of HALF_OPEN, whose deadline is set). true: it fails at once, fast_fail(l, *cons, *left_ns)
 * once mu is released. */
static bool breaker_admit(struct sched *s, struct sched_lane *l, uint64_t t0, bool *probe,
                          uint64_t *cons, uint64_t *left_ns)
{
    *probe = false;
    if (l->breaker_failures <= 0 || l->br == SCHED_BREAKER_CLOSED)
        return false;
    if (l->br == SCHED_BREAKER_OPEN && t0 >= l->open_until_ns) {
        l->br = SCHED_BREAKER_HALF_OPEN; /* this call is the probe */
        l->probe_out = true;
        *probe = true;
    } else if (l->br == SCHED_BREAKER_HALF_OPEN && !l->probe_out) {
        l->probe_out = true;
        *probe = true;
    } else if (l->br == SCHED_BREAKER_HALF_OPEN && t0 >= l->probe_deadline_ns) {
        /* the probe never came back (a POSIX call stuck in the kernel): it failed; OPEN
         * again, so another probe goes after the cool-down, instead of HALF_OPEN for ever */
        breaker_open(s, l, t0);
        l->fast_fails++;
        *cons = l->consecutive;
        *left_ns = l->cooldown_ns;
        return true;
    } else {
        *left_ns = l->br == SCHED_BREAKER_OPEN ? l->open_until_ns - t0 : 0;
        *cons = l->consecutive;
        l->fast_fails++;
        return true;
    }
    uint64_t wait = l->admit_timeout_ns > l->cooldown_ns ? l->admit_timeout_ns : l->cooldown_ns;
    l->probe_deadline_ns = t0 + (wait ? wait : TIER_NS_PER_SEC);
    return false;
}

/* Under mu: w waits in l until granted or refused (true), or until its admission timeout
 * (false, w still queued). The lane's timer also wakes it when the first limited client may
 * go. */
static bool await_grant(struct sched *s, struct sched_lane *l, struct waiter *w, uint64_t t0)
{
    uint64_t deadline = l->admit_timeout_ns ? t0 + l->admit_timeout_ns : 0;
    while (!w->granted && !w->refused) {
        uint64_t until = deadline;
        if (l->timer == w && l->wake_ns && (!until || l->wake_ns < until))
            until = l->wake_ns;
        if (!until) {
            pthread_cond_wait(&w->cv, &s->mu);
            continue;
        }
        struct timespec ts = mono_ts(until);
        (void)pthread_cond_timedwait(&w->cv, &s->mu, &ts);
        if (w->granted || w->refused)
            break;
        uint64_t now = tier_now_mono_ns();
        if (l->timer == w && l->wake_ns && now >= l->wake_ns) {
            grant(s, l); /* may grant us, others, or re-arm the timer */
            continue;
        }
        if (deadline && now >= deadline)
            return false;
    }
    return true;
}

/* Under mu, which it releases: w (tenant's, of class c) timed out waiting; it leaves the queue,
 * the breaker hears of it, and the message says whether it waited for its QoS limit or for a
 * slot. */
static void admit_timeout(struct sched *s, struct sched_lane *l, struct waiter *w, uint32_t tenant,
                          int c, bool probe)
{
    bool limited = l->inflight < l->cap; /* slots were free: it waited for its limit */
    unlink_waiter(s, l, w);
    l->admit_timeouts++;
    if (probe && l->br == SCHED_BREAKER_HALF_OPEN)
        breaker_open(s, l, tier_now_mono_ns());
    else if (l->breaker_failures > 0 && l->br == SCHED_BREAKER_CLOSED && l->inflight >= l->cap)
        /* every slot is held by calls that do not return (a hung POSIX mount reports no
         * failure until they do): a full lane's timeout counts towards OPEN */
        note_failure(s, l);
    int inflight = l->inflight;
    uint64_t queued = 0;
    for (int k = 0; k < TIER_IO_NCLASSES; k++)
        queued += l->queued[k];
    struct dmc_params qp = {0};
    if (limited)
        lane_params(l, tenant, (enum tier_io_class)c, &qp);
    pthread_mutex_unlock(&s->mu);
    pthread_cond_destroy(&w->cv);
    if (limited)
        tier_err_set("backend '%s': tenant %u's %s requests are at their QoS limit "
                     "(%llu bytes/s) and this one waited over %llu ms with %llu more "
                     "queued: raise the limit or send less",
                     l->name, tenant, tier_io_class_name((enum tier_io_class)c),
                     (unsigned long long)qp.limit,
                     (unsigned long long)(l->admit_timeout_ns / TIER_NS_PER_MS),
                     (unsigned long long)queued);
    else
        tier_err_set("backend '%s': no free slot within %llu ms (%d calls in flight, "
                     "%llu more queued): the backend is slow or not answering",
                     l->name, (unsigned long long)(l->admit_timeout_ns / TIER_NS_PER_MS), inflight,
                     (unsigned long long)queued);
}

/* Admit one call of class c for tenant, of bytes, in l: 0 with *waited_ns, -ETIMEDOUT
 * (message set) or -ENOMEM (backend lanes: the client's QoS state); try: -EAGAIN instead of
 * queueing (sched_lane_try_enter); op false: a later part of a call in parts, charged its bytes
 * only (sched_lane_enter_part). The breaker first (breaker_admit), then the fast path, then a
 * place in the queue (await_grant; admit_timeout when it times out). */
static int lane_admit(struct sched *s, struct sched_lane *l, int c, uint32_t tenant, size_t bytes,
                      enum sched_dir dir, bool try, bool op, uint64_t *waited_ns)
{
    uint64_t t0 = tier_now_mono_ns(), cons = 0, left = 0;
    bool probe = false;
    pthread_mutex_lock(&s->mu);
    if (breaker_admit(s, l, t0, &probe, &cons, &left)) {
        pthread_mutex_unlock(&s->mu);
        return fast_fail(l, cons, left);
    }
    bool queued_any = false;
    for (int k = 0; k < TIER_IO_NCLASSES; k++)
        queued_any = queued_any || l->queued[k];
    bool held = yield_holds(l, c, dir, yielding(l, t0));
    bool free_now = l->inflight < l->cap && !queued_any && !held;
    if (free_now && (!l->dmc || ((l->idle_fast || try) && unlimited(l, tenant, c)))) {
        account_admit(s, l, c, dir, 0);
        pthread_mutex_unlock(&s->mu);
        *waited_ns = 0;
        return 0;
    }
    /* try: a free slot with waiters means every waiter is held by its own limit (the lane's
     * invariant), so a caller under its limits goes through dmClock and is granted now; only a
     * full lane or the caller's own limit refuses it (a throttled tenant once made every other
     * tenant's write-through be skipped: second review of issue 11) */
    if (try && (l->inflight >= l->cap || !l->dmc || held || !under_limits(l, tenant, c, t0))) {
        if (probe)
            l->probe_out = false; /* no probe went: the next call is one */
        pthread_mutex_unlock(&s->mu);
        return -EAGAIN;
    }

    struct waiter w = {.cls = c, .dir = dir, .t0_ns = t0};
    if (l->dmc) { /* every call of a backend lane goes through dmClock: limits apply always */
        int rc = dmc_add_ex(l->dmc, tenant, (enum tier_io_class)c, bytes, op, t0, &w.req);
        if (rc) {
            if (probe)
                l->probe_out = false; /* no probe went: the next call is one */
            pthread_mutex_unlock(&s->mu);
            tier_err_set("backend '%s': no memory for tenant %u's QoS state", l->name, tenant);
            return rc;
        }
        w.in_dmc = true;
    }
    pthread_cond_init(&w.cv, &s->cattr);
    tier_list_push_tail(&l->q[c], &w.link);
    l->queued[c]++;
    s->st[c].queued_now++;
    grant(s, l); /* a slot may be free while only lower classes waited; dmClock: maybe us */
    if (try && !w.granted && !w.refused) {
        /* under_limits said dmClock grants us, alone in the queue: not reached; safe anyway */
        unlink_waiter(s, l, &w);
        pthread_mutex_unlock(&s->mu);
        pthread_cond_destroy(&w.cv);
        return -EAGAIN;
    }
    if (!await_grant(s, l, &w, t0)) {
        admit_timeout(s, l, &w, tenant, c, probe);
        return -ETIMEDOUT;
    }
    int rc = 0;
    if (w.refused) {
        uint64_t now = tier_now_mono_ns();
        uint64_t left_ns = l->open_until_ns > now ? l->open_until_ns - now : 0;
        rc = fast_fail(l, l->consecutive, left_ns);
    } else {
        *waited_ns = tier_now_mono_ns() - t0;
    }
    pthread_mutex_unlock(&s->mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

static void lane_done(struct sched *s, struct sched_lane *l, int c, enum sched_dir dir,
                      size_t bytes, long result, uint64_t service_ns, bool counted, long last_err)
{
    pthread_mutex_lock(&s->mu);
    if (c == TIER_IO_INFERENCE) {
        l->inf_inflight--;
        l->inf_last_ns = tier_now_mono_ns();
    } else if (dir != SCHED_DIR_NONE) {
        l->other_dir[dir - 1]--;
    }
    l->inflight--;
    l->completed++;
    s->st[c].inflight_now--;
    s->st[c].completed++;
    if (result < 0)
        s->st[c].errors++;
    else
        s->st[c].bytes += bytes;
    s->st[c].service_ns_total += service_ns;
    note_result(s, l, result, counted, last_err);
    grant(s, l);
    pthread_mutex_unlock(&s->mu);
}

uint64_t sched_admit(struct sched *s, const struct tier_ioctx *io, size_t bytes)
{
    int c = class_of(io);
    uint64_t waited = 0;
    /* never fails: the default lane has no deadline, no breaker and no dmClock */
    (void)lane_admit(s, &s->def, c, TIER_TENANT_DEFAULT, bytes, SCHED_DIR_NONE, false, true,
                     &waited);
    return waited;
}

void sched_done(struct sched *s, const struct tier_ioctx *io, size_t bytes, long result,
                uint64_t service_ns)
{
    int c = class_of(io);
    lane_done(s, &s->def, c, SCHED_DIR_NONE, bytes, result, service_ns, false, 0);
}

static int lane_enter(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                      size_t bytes, enum sched_dir dir, bool try, bool op)
{
    uint64_t waited = 0;
    t_attempt_reported = false;
    int rc = lane_admit(s, l, class_of(io), tenant_of(io), bytes, dir, try, op, &waited);
    t_lane_waited_ns = waited;
    return rc;
}

int sched_lane_enter(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                     size_t bytes)
{
    return lane_enter(s, l, io, bytes, SCHED_DIR_NONE, false, true);
}

int sched_lane_enter_dir(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                         size_t bytes, enum sched_dir dir)
{
    return lane_enter(s, l, io, bytes, (unsigned)dir <= SCHED_DIR_UP ? dir : SCHED_DIR_NONE, false,
                      true);
}

int sched_lane_enter_part(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                          size_t bytes, enum sched_dir dir)
{
    return lane_enter(s, l, io, bytes, (unsigned)dir <= SCHED_DIR_UP ? dir : SCHED_DIR_NONE, false,
                      false);
}

size_t sched_lane_read_part(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                            size_t len)
{
    /* split_bytes is immutable: no lock for the reads that cannot split */
    if (!l->split_bytes || len <= l->split_bytes || class_of(io) == TIER_IO_INFERENCE)
        return len;
    pthread_mutex_lock(&s->mu);
    bool split = inference_demand(l, tier_now_mono_ns());
    if (split)
        l->split_reads++;
    pthread_mutex_unlock(&s->mu);
    return split ? (size_t)l->split_bytes : len;
}

int sched_lane_try_enter(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                         size_t bytes)
{
    return lane_enter(s, l, io, bytes, SCHED_DIR_NONE, true, true);
}

void sched_lane_leave(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                      size_t bytes, long result, uint64_t service_ns)
{
    sched_lane_leave_dir(s, l, io, bytes, result, service_ns, SCHED_DIR_NONE);
}

void sched_lane_leave_dir(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                          size_t bytes, long result, uint64_t service_ns, enum sched_dir dir)
{
    lane_done(s, l, class_of(io), (unsigned)dir <= SCHED_DIR_UP ? dir : SCHED_DIR_NONE, bytes,
              result, service_ns, t_attempt_reported, t_attempt_err);
    t_attempt_reported = false;
    if (s->tele) {
        /* whose call: the argument, else the ioctx the backend dispatcher made current
         * (common/ioctx.h), as class_of() */
        const struct tier_ioctx *cio = io ? io : tier_ioctx_current();
        tele_sched_record(s->tele, cio, t_lane_waited_ns, service_ns, result < 0 ? 0 : bytes,
                          result < 0 ? (int)result : 0);
    }
}

/* ---- the disk admission hook --------------------------------------------------------------- */

static _Thread_local uint64_t t_disk_t0; /* grant time of this thread's disk I/O */

static int disk_enter(void *ud, const struct tier_ioctx *io, size_t bytes, bool try)
{
    struct sched_lane *l = ud;
    /* without try, on a lane with no deadline and no breaker, only -ENOMEM: not admitted, the
     * caller goes on without a leave (common/diskadm.h) */
    int rc = try ? sched_lane_try_enter(l->sched, l, io, bytes)
                 : sched_lane_enter(l->sched, l, io, bytes);
    if (rc == 0)
        t_disk_t0 = tier_now_mono_ns();
    return rc;
}

static void disk_leave(void *ud, const struct tier_ioctx *io, size_t bytes, long result)
{
    struct sched_lane *l = ud;
    uint64_t now = tier_now_mono_ns();
    sched_lane_leave(l->sched, l, io, bytes, result, now > t_disk_t0 ? now - t_disk_t0 : 0);
}

void sched_lane_disk_adm(struct sched_lane *l, struct tier_disk_adm *out)
{
    *out = (struct tier_disk_adm){.enter = disk_enter, .leave = disk_leave, .ud = l};
}

void sched_set_telemetry(struct sched *s, struct telemetry *t)
{
    s->tele = t;
}

void sched_stats_get(struct sched *s, struct sched_stats *st)
{
    pthread_mutex_lock(&s->mu);
    for (int c = 0; c < TIER_IO_NCLASSES; c++)
        st->cls[c] = s->st[c];
    pthread_mutex_unlock(&s->mu);
}

size_t sched_backend_stats_get(struct sched *s, struct sched_backend_stats *out, size_t max)
{
    pthread_mutex_lock(&s->mu);
    uint64_t now = tier_now_mono_ns();
    size_t i = 0;
    for (struct sched_lane *l = s->lanes; l && i < max; l = l->next_lane, i++) {
        struct sched_backend_stats *b = &out[i];
        memset(b, 0, sizeof(*b));
        tier_strlcpy(b->name, l->name, sizeof(b->name));
        b->max_inflight = l->cap;
        b->inflight_now = (uint64_t)l->inflight;
        for (int c = 0; c < TIER_IO_NCLASSES; c++)
            b->queued_now += l->queued[c];
        b->admitted = l->admitted;
        b->completed = l->completed;
        b->failures = l->failures;
        b->admit_timeouts = l->admit_timeouts;
        b->breaker = l->br;
        b->consecutive_failures = l->consecutive;
        b->breaker_opens = l->opens;
        b->fast_fails = l->fast_fails;
        if (l->br == SCHED_BREAKER_OPEN && l->open_until_ns > now)
            b->open_ms_left = (l->open_until_ns - now + TIER_NS_PER_MS - 1) / TIER_NS_PER_MS;
        b->link_capacity_bps = l->link_bps;
        b->grants_reservation = l->grants_r;
        b->grants_weight = l->grants_w;
        b->limit_waits = l->limit_waits;
        b->yield_waits = l->yield_waits;
        b->split_bytes = l->split_bytes;
        b->split_reads = l->split_reads;
    }
    size_t n = s->nlanes;
    pthread_mutex_unlock(&s->mu);
    return n;
}
