/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dmclock.c - the dmClock tag scheduler (dmclock.h): clients in a table indexed by
 * tenant * TIER_IO_NCLASSES + class (grown on demand), an active list of the clients with
 * queued requests, and per client a FIFO of caller-owned requests carrying their R and P tags.
 *
 * Only sched.c calls it, under the scheduler's mutex; the tests call it on a virtual clock.
 * Tag arithmetic and the phases are described in dmclock.h. A client's states: idle (no queued
 * request, off the active list) and active; the functions that perform each step:
 *
 * TRANSITION -> FUNCTION
 *   idle -> active, arrival tags R and P      dmc_add
 *   choice of the constraint or weight phase  dmc_pull, dmc_pull_filtered
 *   grant: L tag, R adjustment, V             grant_head()
 *   active -> idle (queue emptied)            unqueue()
 *   a request withdrawn                       dmc_cancel
 */
#include "qos/dmclock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

#define NS_PER_SEC 1000000000ull

__extension__ typedef unsigned __int128 u128;

/* A tenant's limit over its classes together. */
struct dmc_tenant {
    uint64_t limit;  /* 0: none */
    uint64_t l_next; /* earliest time of the tenant's next grant */
};

struct dmc_client {
    struct tier_list alink; /* on dmc.active: the client has queued requests */
    struct dmc_tenant *t;   /* owned by the dmc's tenant table */
    uint32_t tenant;
    enum tier_io_class cls;
    struct dmc_params p;
    struct tier_list q; /* its requests (dmc_req.link), oldest first */
    size_t queued;
    uint64_t r_prev; /* R tag of the last arrival */
    double p_prev;   /* P tag of the last arrival */
    uint64_t l_next; /* earliest time of the next grant under the limit */
    uint64_t granted, granted_ops, grants_r, grants_p;
};

struct dmc {
    uint64_t op_cost;
    dmc_params_fn params;
    void *params_ud;
    struct dmc_client **tab; /* by tenant * TIER_IO_NCLASSES + class; NULL: not seen yet */
    size_t ntab;
    struct dmc_tenant **ten; /* by tenant; NULL: not seen yet */
    size_t nten;
    struct tier_list active; /* clients with queued requests (dmc_client.alink), newest first */
    size_t queued;
    double vtime; /* V: start tag of the last weight-phase grant */
};

/* cost / rate seconds in ns, rounded up (so limits err on the safe side). */
static uint64_t span_ns(uint64_t cost, uint64_t rate)
{
    u128 n = (u128)cost * NS_PER_SEC + rate - 1;
    n /= rate;
    return n > UINT64_MAX ? UINT64_MAX : (uint64_t)n;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static void load_params(struct dmc *d, struct dmc_client *c)
{
    struct dmc_params p = {.weight = 1};
    if (d->params)
        d->params(d->params_ud, c->tenant, c->cls, &p);
    if (p.weight == 0)
        p.weight = 1;
    if (p.weight > DMC_WEIGHT_MAX)
        p.weight = DMC_WEIGHT_MAX;
    c->p = p;
    c->t->limit = p.tenant_limit;
}

int dmc_new(const struct dmc_config *cfg, struct dmc **out)
{
    struct dmc *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->op_cost = cfg && cfg->op_cost ? cfg->op_cost : DMC_OP_COST_DEFAULT;
    d->params = cfg ? cfg->params : NULL;
    d->params_ud = cfg ? cfg->params_ud : NULL;
    tier_list_init(&d->active);
    *out = d;
    return 0;
}

void dmc_free(struct dmc *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->ntab; i++)
        free(d->tab[i]);
    free(d->tab);
    for (size_t i = 0; i < d->nten; i++)
        free(d->ten[i]);
    free(d->ten);
    free(d);
}

uint64_t dmc_cost(const struct dmc *d, uint64_t bytes)
{
    return sat_add(bytes, d->op_cost);
}

size_t dmc_queued(const struct dmc *d)
{
    return d->queued;
}

static struct dmc_client *lookup(const struct dmc *d, uint32_t tenant, enum tier_io_class cls)
{
    size_t i = (size_t)tenant * TIER_IO_NCLASSES + (size_t)cls;
    return i < d->ntab ? d->tab[i] : NULL;
}

static int client_get(struct dmc *d, uint32_t tenant, enum tier_io_class cls,
                      struct dmc_client **out)
{
    if (tenant >= DMC_MAX_TENANTS || (unsigned)cls >= TIER_IO_NCLASSES)
        return -EINVAL;
    struct dmc_tenant **ten = tier_vec_grow(d->ten, &d->nten, (size_t)tenant + 1, sizeof(*ten), 16);
    if (!ten)
        return -ENOMEM;
    d->ten = ten;
    if (!d->ten[tenant] && !(d->ten[tenant] = calloc(1, sizeof(*d->ten[tenant]))))
        return -ENOMEM;
    size_t i = (size_t)tenant * TIER_IO_NCLASSES + (size_t)cls;
    struct dmc_client **tab =
        tier_vec_grow(d->tab, &d->ntab, i + 1, sizeof(*tab), 16 * TIER_IO_NCLASSES);
    if (!tab)
        return -ENOMEM;
    d->tab = tab;
    if (!d->tab[i]) {
        struct dmc_client *c = calloc(1, sizeof(*c));
        if (!c)
            return -ENOMEM;
        c->tenant = tenant;
        c->cls = cls;
        tier_list_init(&c->alink);
        tier_list_init(&c->q);
        c->t = d->ten[tenant];
        load_params(d, c);
        d->tab[i] = c;
    }
    *out = d->tab[i];
    return 0;
}

/* A limit raised or lifted applies from now: the next grant is no later than now. Tags computed
 * at the old, lower rate would otherwise hold a queued client back until they pass (a limit
 * lifted while a waiter slept released it only at its old L tag; second review of issue 11). */
static void limit_changed(uint64_t *l_next, uint64_t old_limit, uint64_t new_limit, uint64_t now_ns)
{
    bool looser = new_limit == 0 ? old_limit != 0 : old_limit != 0 && new_limit > old_limit;
    if (looser && *l_next > now_ns)
        *l_next = now_ns;
}

void dmc_refresh(struct dmc *d, uint64_t now_ns)
{
    for (size_t i = 0; i < d->ntab; i++) {
        struct dmc_client *c = d->tab[i];
        if (!c)
            continue;
        uint64_t old_limit = c->p.limit, old_tlimit = c->t->limit;
        load_params(d, c);
        limit_changed(&c->l_next, old_limit, c->p.limit, now_ns);
        limit_changed(&c->t->l_next, old_tlimit, c->t->limit, now_ns);
        /* a client a limit held back is behind V; with its limit raised it must not win the
         * weight phase until it caught up: its next arrival starts at V at the latest */
        if (c->p_prev < d->vtime)
            c->p_prev = d->vtime;
    }
}

int dmc_add(struct dmc *d, uint32_t tenant, enum tier_io_class cls, uint64_t bytes, uint64_t now_ns,
            struct dmc_req *req)
{
    return dmc_add_ex(d, tenant, cls, bytes, true, now_ns, req);
}

int dmc_add_ex(struct dmc *d, uint32_t tenant, enum tier_io_class cls, uint64_t bytes, bool op,
               uint64_t now_ns, struct dmc_req *req)
{
    struct dmc_client *c = NULL;
    int rc = client_get(d, tenant, cls, &c);
    if (rc)
        return rc;
    req->cl = c;
    req->op = op;
    req->cost = op ? dmc_cost(d, bytes) : bytes;
    if (c->p.reservation) {
        c->r_prev = max_u64(sat_add(c->r_prev, span_ns(req->cost, c->p.reservation)), now_ns);
        req->r_tag = c->r_prev;
    } else {
        req->r_tag = UINT64_MAX;
    }
    /* the idle adjustment only when the client becomes active: a backlogged client keeps its
     * place, so clients held back by a (tenant) limit keep their weights among themselves */
    double start = c->queued || c->p_prev > d->vtime ? c->p_prev : d->vtime;
    c->p_prev = start + (double)req->cost / (double)c->p.weight;
    req->p_tag = c->p_prev;
    tier_list_push_tail(&c->q, &req->link);
    if (c->queued++ == 0)
        tier_list_push_head(&d->active, &c->alink);
    d->queued++;
    return 0;
}

/* Take req off its client's queue; the client leaves the active list when it empties. */
static void unqueue(struct dmc *d, struct dmc_req *req)
{
    struct dmc_client *c = req->cl;
    tier_list_remove(&req->link);
    d->queued--;
    if (--c->queued == 0)
        tier_list_remove(&c->alink);
}

void dmc_cancel(struct dmc *d, struct dmc_req *req)
{
    unqueue(d, req);
    req->cl = NULL;
}

/* When c may next be granted under its own and its tenant's limit (<= now: it may). */
static uint64_t limit_time(const struct dmc_client *c)
{
    uint64_t t = c->p.limit ? c->l_next : 0;
    if (c->t->limit && c->t->l_next > t)
        t = c->t->l_next;
    return t;
}

/* L = max(L_prev, t_grant - S) + cost/rate */
static void advance_l(uint64_t *l_next, uint64_t now, uint64_t cost, uint64_t rate)
{
    uint64_t late = now > DMC_LIMIT_SLACK_NS ? now - DMC_LIMIT_SLACK_NS : 0;
    *l_next = sat_add(max_u64(*l_next, late), span_ns(cost, rate));
}

/* The oldest request of c, an active client (its queue is not empty). */
static struct dmc_req *head_of(const struct dmc_client *c)
{
    return tier_list_entry(c->q.next, struct dmc_req, link);
}

/* Ties in the weight phase go to the lower class, then the lower tenant: deterministic. */
static bool p_before(const struct dmc_client *a, const struct dmc_client *b)
{
    if (head_of(a)->p_tag != head_of(b)->p_tag)
        return head_of(a)->p_tag < head_of(b)->p_tag;
    if (a->cls != b->cls)
        return a->cls < b->cls;
    return a->tenant < b->tenant;
}

static void grant_head(struct dmc *d, struct dmc_client *c, uint64_t now, enum dmc_phase ph)
{
    struct dmc_req *req = head_of(c);
    unqueue(d, req);
    if (c->p.limit)
        advance_l(&c->l_next, now, req->cost, c->p.limit);
    if (c->t->limit)
        advance_l(&c->t->l_next, now, req->cost, c->t->limit);
    c->granted = sat_add(c->granted, req->cost);
    if (req->op)
        c->granted_ops++;
    if (ph == DMC_PHASE_RESERVATION) {
        c->grants_r++;
        return;
    }
    c->grants_p++;
    double start = req->p_tag - (double)req->cost / (double)c->p.weight;
    if (start > d->vtime)
        d->vtime = start;
    if (c->p.reservation) {
        /* served beyond the reservation: the remaining R tags must not count it */
        uint64_t dr = span_ns(req->cost, c->p.reservation);
        struct tier_list *l;
        tier_list_foreach (l, &c->q) {
            struct dmc_req *q = tier_list_entry(l, struct dmc_req, link);
            q->r_tag = q->r_tag > dr ? q->r_tag - dr : 0;
        }
        c->r_prev = c->r_prev > dr ? c->r_prev - dr : 0;
    }
}

int dmc_pull(struct dmc *d, uint64_t now_ns, struct dmc_req **out, enum dmc_phase *phase,
             uint64_t *next_ns)
{
    return dmc_pull_filtered(d, now_ns, NULL, NULL, out, phase, next_ns);
}

int dmc_pull_filtered(struct dmc *d, uint64_t now_ns, dmc_filter_fn ok, void *ok_ud,
                      struct dmc_req **out, enum dmc_phase *phase, uint64_t *next_ns)
{
    if (tier_list_empty(&d->active))
        return -ENOENT;
    struct dmc_client *rbest = NULL, *pbest = NULL;
    uint64_t next = UINT64_MAX;
    bool held = false; /* a client under its limits whose head the filter held back */
    struct tier_list *al;
    tier_list_foreach (al, &d->active) {
        struct dmc_client *c = tier_list_entry(al, struct dmc_client, alink);
        uint64_t lt = limit_time(c);
        if (lt > now_ns) {
            next = lt < next ? lt : next;
            continue;
        }
        if (ok && !ok(ok_ud, head_of(c))) {
            held = true;
            continue;
        }
        if (c->p.reservation && head_of(c)->r_tag <= now_ns &&
            (!rbest || head_of(c)->r_tag < head_of(rbest)->r_tag))
            rbest = c;
        if (!pbest || p_before(c, pbest))
            pbest = c;
    }
    struct dmc_client *c = rbest ? rbest : pbest;
    if (!c) {
        if (held && next == UINT64_MAX)
            return -EBUSY;
        if (next_ns)
            *next_ns = next;
        return -EAGAIN;
    }
    enum dmc_phase ph = rbest ? DMC_PHASE_RESERVATION : DMC_PHASE_WEIGHT;
    struct dmc_req *req = head_of(c);
    grant_head(d, c, now_ns, ph);
    *out = req;
    if (phase)
        *phase = ph;
    return 0;
}

int dmc_tenant_forget(struct dmc *d, uint32_t tenant)
{
    if (tenant >= DMC_MAX_TENANTS)
        return 0;
    for (unsigned c = 0; c < TIER_IO_NCLASSES; c++) {
        const struct dmc_client *cl = lookup(d, tenant, (enum tier_io_class)c);
        if (cl && cl->queued)
            return -EBUSY;
    }
    /* no request of the tenant is queued: nothing points at its clients (a request points at
     * its client only from dmc_add to its grant or cancel) */
    for (unsigned c = 0; c < TIER_IO_NCLASSES; c++) {
        size_t i = (size_t)tenant * TIER_IO_NCLASSES + c;
        if (i < d->ntab) {
            free(d->tab[i]);
            d->tab[i] = NULL;
        }
    }
    if (tenant < d->nten) {
        free(d->ten[tenant]);
        d->ten[tenant] = NULL;
    }
    return 0;
}

int dmc_client_info_get(const struct dmc *d, uint32_t tenant, enum tier_io_class cls,
                        struct dmc_client_info *out)
{
    if (tenant >= DMC_MAX_TENANTS || (unsigned)cls >= TIER_IO_NCLASSES)
        return -ENOENT;
    const struct dmc_client *c = lookup(d, tenant, cls);
    if (!c)
        return -ENOENT;
    memset(out, 0, sizeof(*out));
    out->params = c->p;
    out->queued = c->queued;
    out->r_prev = c->r_prev;
    out->l_next = c->l_next;
    out->tenant_l_next = c->t->l_next;
    out->p_prev = c->p_prev;
    if (!tier_list_empty(&c->q)) {
        out->head_r = head_of(c)->r_tag;
        out->head_p = head_of(c)->p_tag;
    }
    out->granted = c->granted;
    out->granted_ops = c->granted_ops;
    out->grants_reservation = c->grants_r;
    out->grants_weight = c->grants_p;
    return 0;
}
