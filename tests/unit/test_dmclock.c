/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dmclock.c - the dmClock tag scheduler (src/qos/dmclock.c) on a virtual clock: the tag
 * arithmetic step by step, then a simulated server (one request in service at a time, capacity
 * CAP cost units per second, each client keeping a number of requests outstanding) that checks
 * the allocation: weights split the capacity within 10 %, an idle client's share goes to the
 * others at once and a returning one is neither favoured nor starved, a limit holds over every
 * 1 s window, a reservation is met when the server is saturated, and a property test over random
 * clients, parameters and request sizes against the allocation mClock promises (each client's
 * weight share, raised to its reservation, capped at its limit: water-filling); and the
 * caller's filter of dmc_pull_filtered (passed-over heads, -EBUSY).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qos/dmclock.h"

#define SEC 1000000000ull
#define MS 1000000ull
#define CAP 1000000000ull /* simulated server: cost units (bytes) per second */
#define MAXC 12

/* ---- parameters through the callback ---------------------------------------------------- */

struct ptab {
    struct dmc_params p[MAXC];             /* by tenant; every class alike ... */
    uint32_t cls_weight[TIER_IO_NCLASSES]; /* ... but for a class weight set here */
};

static void ptab_fn(void *ud, uint32_t tenant, enum tier_io_class cls, struct dmc_params *out)
{
    const struct ptab *t = ud;
    *out = tenant < MAXC ? t->p[tenant] : (struct dmc_params){.weight = 1};
    if (t->cls_weight[cls])
        out->weight = t->cls_weight[cls];
}

static struct dmc *new_dmc(struct ptab *t, uint64_t op_cost)
{
    struct dmc_config cfg = {.op_cost = op_cost, .params = ptab_fn, .params_ud = t};
    struct dmc *d = NULL;
    assert_int_equal(dmc_new(&cfg, &d), 0);
    return d;
}

/* ---- tag arithmetic ----------------------------------------------------------------------- */

static void test_tags(void **state)
{
    (void)state;
    struct ptab t = {0};
    t.p[0] = (struct dmc_params){.reservation = 1000000, .weight = 2, .limit = 2000000};
    struct dmc *d = new_dmc(&t, 1000); /* cost = bytes + 1000 */
    struct dmc_req rq[4];
    struct dmc_client_info ci;
    uint64_t now = 10 * SEC;
    for (int i = 0; i < 3; i++)
        assert_int_equal(dmc_add(d, 0, TIER_IO_TRAINING, 999000, now, &rq[i]), 0);
    assert_int_equal(dmc_queued(d), 3);
    /* R advances by cost/r = 1 s from max(R_prev + 1 s, now) = now; P by cost/w = 500000 */
    assert_int_equal(rq[0].r_tag, 10 * SEC);
    assert_int_equal(rq[1].r_tag, 11 * SEC);
    assert_int_equal(rq[2].r_tag, 12 * SEC);
    assert_true(rq[0].p_tag == 500000.0 && rq[1].p_tag == 1000000.0 && rq[2].p_tag == 1500000.0);

    struct dmc_req *out = NULL;
    enum dmc_phase ph;
    uint64_t next = 0;
    assert_int_equal(dmc_pull(d, now, &out, &ph, &next), 0);
    assert_ptr_equal(out, &rq[0]);
    assert_int_equal(ph, DMC_PHASE_RESERVATION);
    /* L advances by cost/l = 0.5 s from the grant (less the slack S): nothing until then */
    const uint64_t S = DMC_LIMIT_SLACK_NS;
    assert_int_equal(dmc_client_info_get(d, 0, TIER_IO_TRAINING, &ci), 0);
    assert_int_equal(ci.l_next, 10 * SEC - S + 500 * MS);
    assert_int_equal(dmc_pull(d, 10 * SEC - S + 499 * MS, &out, &ph, &next), -EAGAIN);
    assert_int_equal(next, 10 * SEC - S + 500 * MS);

    /* at 10.5 s the head's R (11 s) is in the future: weight phase, and the remaining R tags
     * give back cost/r = 1 s */
    now = 10 * SEC + 500 * MS;
    assert_int_equal(dmc_pull(d, now, &out, &ph, &next), 0);
    assert_ptr_equal(out, &rq[1]);
    assert_int_equal(ph, DMC_PHASE_WEIGHT);
    assert_int_equal(rq[2].r_tag, 11 * SEC);
    assert_int_equal(dmc_client_info_get(d, 0, TIER_IO_TRAINING, &ci), 0);
    assert_int_equal(ci.r_prev, 11 * SEC);
    assert_int_equal(ci.l_next, 11 * SEC - S); /* from L_prev: the grant was not late */
    assert_int_equal(ci.grants_reservation, 1);
    assert_int_equal(ci.grants_weight, 1);
    assert_int_equal(ci.granted, 2000000);

    /* a new arrival continues from R_prev */
    assert_int_equal(dmc_add(d, 0, TIER_IO_TRAINING, 999000, now, &rq[3]), 0);
    assert_int_equal(rq[3].r_tag, 12 * SEC);
    /* at 11 s: rq[2] by reservation (R = 11 s), then rq[3] waits for L = 11.5 s - S */
    assert_int_equal(dmc_pull(d, 11 * SEC, &out, &ph, &next), 0);
    assert_ptr_equal(out, &rq[2]);
    assert_int_equal(ph, DMC_PHASE_RESERVATION);
    assert_int_equal(dmc_pull(d, 11 * SEC, &out, &ph, &next), -EAGAIN);
    assert_int_equal(next, 11 * SEC - S + 500 * MS);
    /* cancelled: gone, the client idle */
    dmc_cancel(d, &rq[3]);
    assert_int_equal(dmc_queued(d), 0);
    assert_int_equal(dmc_pull(d, 20 * SEC, &out, &ph, &next), -ENOENT);

    /* idle for long: no credit; R restarts at now, L lets the first one go at once */
    now = 100 * SEC;
    assert_int_equal(dmc_add(d, 0, TIER_IO_TRAINING, 999000, now, &rq[0]), 0);
    assert_int_equal(rq[0].r_tag, 100 * SEC);
    assert_int_equal(dmc_pull(d, now, &out, &ph, &next), 0);
    assert_int_equal(ph, DMC_PHASE_RESERVATION);

    /* a refresh re-reads the parameters and moves P_prev up to V */
    t.p[0].weight = 5;
    dmc_refresh(d, now);
    assert_int_equal(dmc_client_info_get(d, 0, TIER_IO_TRAINING, &ci), 0);
    assert_int_equal(ci.params.weight, 5);

    /* bad client keys */
    assert_int_equal(dmc_add(d, DMC_MAX_TENANTS, TIER_IO_TRAINING, 1, now, &rq[1]), -EINVAL);
    assert_int_equal(dmc_add(d, 0, (enum tier_io_class)9, 1, now, &rq[1]), -EINVAL);
    assert_int_equal(dmc_client_info_get(d, 5, TIER_IO_TRAINING, &ci), -ENOENT);
    dmc_free(d);
    dmc_free(NULL);
}

/* ---- simulated server ----------------------------------------------------------------------- */

#define MAXDEPTH 8
#define MAXGRANTS 400000

struct grant {
    uint64_t t;
    uint64_t cost;
    int client;
};

struct sim {
    struct ptab t;
    struct dmc *d;
    int n;
    int depth[MAXC];              /* requests each client keeps outstanding while on */
    uint32_t tenant[MAXC];        /* the client's tenant (default: its index) ... */
    enum tier_io_class cls[MAXC]; /* ... and class (default: training) */
    uint64_t on_from[MAXC];       /* client sends from this time ... */
    uint64_t on_until[MAXC];      /* ... until this one (0: for ever) */
    uint64_t size_lo, size_hi;    /* payload bytes, uniform */
    uint64_t rnd;                 /* LCG state */
    struct dmc_req req[MAXC][MAXDEPTH];
    bool busy[MAXC][MAXDEPTH]; /* queued or in service */
    struct grant *g;
    size_t ng;
    uint64_t last_order[MAXC]; /* FIFO check: arrival sequence of the last grant */
    uint64_t seq[MAXC][MAXDEPTH];
    uint64_t nseq;
};

static uint64_t rnd_next(struct sim *s)
{
    s->rnd = s->rnd * 6364136223846793005ull + 1442695040888963407ull;
    return s->rnd >> 17;
}

static uint64_t sim_size(struct sim *s)
{
    if (s->size_hi <= s->size_lo)
        return s->size_lo;
    return s->size_lo + rnd_next(s) % (s->size_hi - s->size_lo);
}

static void sim_init(struct sim *s, int n)
{
    memset(s, 0, sizeof(*s));
    s->n = n;
    for (int i = 0; i < n; i++) {
        s->depth[i] = 4;
        s->t.p[i].weight = 1;
        s->tenant[i] = (uint32_t)i;
        s->cls[i] = TIER_IO_TRAINING;
    }
    s->size_lo = s->size_hi = 4 << 20;
    s->rnd = 12345;
    s->g = calloc(MAXGRANTS, sizeof(*s->g));
    assert_non_null(s->g);
}

static bool sim_on(const struct sim *s, int c, uint64_t now)
{
    return now >= s->on_from[c] && (!s->on_until[c] || now < s->on_until[c]);
}

/* Top every client that is on up to its depth. */
static void sim_fill(struct sim *s, uint64_t now)
{
    for (int c = 0; c < s->n; c++) {
        if (!sim_on(s, c, now))
            continue;
        for (int k = 0; k < s->depth[c]; k++) {
            if (s->busy[c][k])
                continue;
            assert_int_equal(
                dmc_add(s->d, s->tenant[c], s->cls[c], sim_size(s), now, &s->req[c][k]), 0);
            s->busy[c][k] = true;
            s->seq[c][k] = ++s->nseq;
        }
    }
}

/* Run from t0 to t1: one request in service at a time, CAP cost units per second. */
static void sim_run(struct sim *s, uint64_t t0, uint64_t t1)
{
    if (!s->d) /* a second run continues the first one's queues and tags */
        s->d = new_dmc(&s->t, 0);
    uint64_t now = t0;
    while (now < t1) {
        sim_fill(s, now);
        struct dmc_req *r = NULL;
        uint64_t next = 0;
        int rc = dmc_pull(s->d, now, &r, NULL, &next);
        if (rc == -ENOENT) {
            /* nobody is on: jump to the next client's start */
            uint64_t nx = t1;
            for (int c = 0; c < s->n; c++)
                if (s->on_from[c] > now && s->on_from[c] < nx)
                    nx = s->on_from[c];
            now = nx;
            continue;
        }
        if (rc == -EAGAIN) {
            assert_true(next > now); /* never a busy loop: the next time is in the future */
            now = next < t1 ? next : t1;
            continue;
        }
        assert_int_equal(rc, 0);
        int c = -1, k = -1;
        for (int i = 0; i < s->n && c < 0; i++)
            for (int j = 0; j < MAXDEPTH; j++)
                if (r == &s->req[i][j]) {
                    c = i;
                    k = j;
                }
        assert_true(c >= 0);
        /* per client FIFO */
        assert_true(s->seq[c][k] > s->last_order[c]);
        s->last_order[c] = s->seq[c][k];
        assert_true(s->ng < MAXGRANTS);
        s->g[s->ng++] = (struct grant){.t = now, .cost = r->cost, .client = c};
        now += r->cost * SEC / CAP;
        s->busy[c][k] = false; /* served: the client sends another */
    }
}

static void sim_fini(struct sim *s)
{
    dmc_free(s->d);
    free(s->g);
}

/* Cost granted to client c in [a, b). */
static uint64_t granted(const struct sim *s, int c, uint64_t a, uint64_t b)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < s->ng; i++)
        if (s->g[i].client == c && s->g[i].t >= a && s->g[i].t < b)
            sum += s->g[i].cost;
    return sum;
}

static double share(const struct sim *s, int c, uint64_t a, uint64_t b)
{
    uint64_t all = 0;
    for (int i = 0; i < s->n; i++)
        all += granted(s, i, a, b);
    return all ? (double)granted(s, c, a, b) / (double)all : 0;
}

/* The largest cost granted to c in any window [t, t + w) starting at one of its grants after
 * from (a window holding the most starts at a grant), and its largest request. */
static uint64_t max_window(const struct sim *s, int c, uint64_t from, uint64_t w, uint64_t *maxreq)
{
    uint64_t best = 0, sum = 0;
    size_t j = 0;
    *maxreq = 0;
    for (size_t i = 0; i < s->ng; i++) {
        if (s->g[i].client != c || s->g[i].t < from)
            continue;
        if (s->g[i].cost > *maxreq)
            *maxreq = s->g[i].cost;
        if (j <= i) {
            j = i;
            sum = 0;
        }
        while (j < s->ng && s->g[j].t < s->g[i].t + w) {
            if (s->g[j].client == c)
                sum += s->g[j].cost;
            j++;
        }
        if (sum > best)
            best = sum;
        sum -= s->g[i].cost; /* the next window starts after grant i */
    }
    return best;
}

static void assert_near(double got, double want, double rel, const char *what)
{
    if (got < want * (1 - rel) || got > want * (1 + rel))
        fail_msg("%s: %.4f, want %.4f +- %.0f %%", what, got, want, rel * 100);
}

static void test_weights_split(void **state)
{
    (void)state;
    struct sim s;
    sim_init(&s, 3);
    s.t.p[0].weight = 1;
    s.t.p[1].weight = 2;
    s.t.p[2].weight = 5;
    s.size_lo = 64 << 10;
    s.size_hi = 4 << 20; /* mixed sizes: the split is by cost, not by request count */
    sim_run(&s, SEC, 11 * SEC);
    assert_near(share(&s, 0, 2 * SEC, 11 * SEC), 1.0 / 8, 0.10, "weight 1");
    assert_near(share(&s, 1, 2 * SEC, 11 * SEC), 2.0 / 8, 0.10, "weight 2");
    assert_near(share(&s, 2, 2 * SEC, 11 * SEC), 5.0 / 8, 0.10, "weight 5");
    sim_fini(&s);
}

/* A alone, then B joins (equal weights), then B leaves: A's share goes 100 % -> 50 % -> 100 %
 * with no lag, and B, idle for 2 s, starts at its fair half: neither a burst of credit nor a
 * wait behind A's history. */
static void test_idle_share_reused(void **state)
{
    (void)state;
    struct sim s;
    sim_init(&s, 2);
    s.on_from[1] = 3 * SEC;
    s.on_until[1] = 5 * SEC;
    sim_run(&s, SEC, 7 * SEC);
    assert_near(share(&s, 0, SEC, 3 * SEC), 1.0, 0.001, "A alone");
    assert_near(share(&s, 1, 3 * SEC, 3 * SEC + 200 * MS), 0.5, 0.10, "B's first 200 ms");
    assert_near(share(&s, 1, 3 * SEC, 5 * SEC), 0.5, 0.05, "B while both");
    /* B's queued requests still go after 5 s (4 of them, at half the capacity: under 40 ms);
     * from then on A has it all */
    assert_near(share(&s, 0, 5 * SEC + 50 * MS, 5 * SEC + 150 * MS), 1.0, 0.001, "A after B");
    assert_true(granted(&s, 0, 5 * SEC + 50 * MS, 5 * SEC + 150 * MS) >= 95 * CAP / 1000);
    sim_fini(&s);
}

static void test_limit_every_window(void **state)
{
    (void)state;
    struct sim s;
    sim_init(&s, 3);
    /* A would take 10/12 by weight; its limit holds it to 20 %; B and C split the rest */
    s.t.p[0] = (struct dmc_params){.weight = 10, .limit = CAP / 5};
    s.t.p[1].weight = 1;
    s.t.p[2].weight = 1;
    s.size_lo = 4 << 10;
    s.size_hi = 8 << 20;
    s.depth[0] = 8;
    sim_run(&s, SEC, 13 * SEC);
    uint64_t maxreq = 0;
    uint64_t w = max_window(&s, 0, 3 * SEC, SEC, &maxreq);
    if (w > CAP / 5 * 105 / 100 + maxreq)
        fail_msg("limit exceeded: %llu in a 1 s window, limit %llu + one request %llu",
                 (unsigned long long)w, (unsigned long long)(CAP / 5), (unsigned long long)maxreq);
    /* the limit is also delivered (A has the demand), and the rest is used */
    assert_near((double)granted(&s, 0, 3 * SEC, 13 * SEC) / (10.0 * CAP), 0.2, 0.05, "A's rate");
    assert_near(share(&s, 1, 3 * SEC, 13 * SEC), 0.4, 0.10, "B");
    assert_near(share(&s, 2, 3 * SEC, 13 * SEC), 0.4, 0.10, "C");
    sim_fini(&s);

    /* every client limited: the server idles, pulls answer -EAGAIN with the next time, and the
     * sum of limits is what is delivered */
    sim_init(&s, 2);
    s.t.p[0] = (struct dmc_params){.weight = 1, .limit = CAP / 10};
    s.t.p[1] = (struct dmc_params){.weight = 1, .limit = CAP / 20};
    sim_run(&s, SEC, 11 * SEC);
    assert_near((double)granted(&s, 0, 2 * SEC, 11 * SEC) / (9.0 * CAP), 0.1, 0.05, "A limited");
    assert_near((double)granted(&s, 1, 2 * SEC, 11 * SEC) / (9.0 * CAP), 0.05, 0.05, "B limited");
    for (int c = 0; c < 2; c++) {
        w = max_window(&s, c, 2 * SEC, SEC, &maxreq);
        assert_true(w <= (c ? CAP / 20 : CAP / 10) * 105 / 100 + maxreq);
    }
    sim_fini(&s);

    /* reservation = limit with a high weight: both phases would grant it, the limit still
     * holds (it is checked in the constraint phase too) */
    sim_init(&s, 2);
    s.t.p[0] = (struct dmc_params){.reservation = CAP / 5, .weight = 10, .limit = CAP / 5};
    s.t.p[1].weight = 1;
    sim_run(&s, SEC, 11 * SEC);
    w = max_window(&s, 0, 2 * SEC, SEC, &maxreq);
    assert_true(w <= CAP / 5 * 105 / 100 + maxreq);
    assert_near((double)granted(&s, 0, 2 * SEC, 11 * SEC) / (9.0 * CAP), 0.2, 0.05, "r = l");
    sim_fini(&s);
}

/* A tenant's limit covers all its classes together: tenant 0 reads in training and prefetches
 * in background, each with a weight that would take most of the server; together they stay
 * under the tenant's limit over every window, split by their weights. */
static void test_tenant_limit(void **state)
{
    (void)state;
    for (int run = 0; run < 2; run++) {
        struct sim s;
        sim_init(&s, 3);
        s.tenant[1] = 0; /* client 1: tenant 0's background */
        s.cls[1] = TIER_IO_BACKGROUND;
        s.tenant[2] = 1;
        s.t.p[0] = (struct dmc_params){.weight = 30, .tenant_limit = CAP / 4};
        s.t.cls_weight[TIER_IO_BACKGROUND] = 10;
        if (run == 0) {
            s.size_lo = 64 << 10;
            s.size_hi = 4 << 20;
        }
        sim_run(&s, SEC, 11 * SEC);
        double a = (double)granted(&s, 0, 2 * SEC, 11 * SEC);
        double b = (double)granted(&s, 1, 2 * SEC, 11 * SEC);
        if (run == 1) /* equal sizes: the split inside the tenant follows the weights 30 : 10 */
            assert_near(a / (a + b), 0.75, 0.10, "training within the tenant");
        struct dmc_client_info ci;
        assert_int_equal(dmc_client_info_get(s.d, 0, TIER_IO_BACKGROUND, &ci), 0);
        assert_true(ci.tenant_l_next > 0 && ci.l_next == 0); /* the tenant's L, not its own */
        /* tenant 0's grants in one series, for the window check */
        for (size_t i = 0; i < s.ng; i++)
            if (s.g[i].client == 1)
                s.g[i].client = 0;
        uint64_t maxreq = 0;
        uint64_t w = max_window(&s, 0, 2 * SEC, SEC, &maxreq);
        if (w > CAP / 4 * 105 / 100 + maxreq)
            fail_msg("tenant limit exceeded: %llu in a 1 s window", (unsigned long long)w);
        assert_near((a + b) / (9.0 * CAP), 0.25, 0.05, "tenant 0");
        assert_near(share(&s, 2, 2 * SEC, 11 * SEC), 0.75, 0.05, "tenant 1 gets the rest");
        sim_fini(&s);
    }
}

/* A client a limit held back falls behind V; once the limit is lifted (dmc_refresh, as a live
 * change would do), it gets its weight share, not the whole server until it catches up. */
static void test_refresh_no_burst(void **state)
{
    (void)state;
    struct sim s;
    sim_init(&s, 2);
    s.t.p[0] = (struct dmc_params){.weight = 1, .limit = CAP / 10};
    s.depth[0] = 8;
    sim_run(&s, SEC, 5 * SEC);
    assert_near(share(&s, 0, 2 * SEC, 5 * SEC), 0.1, 0.05, "A limited");
    s.t.p[0].limit = 0;
    dmc_refresh(s.d, 5 * SEC);
    sim_run(&s, 5 * SEC, 7 * SEC);
    /* its 8 queued requests (old tags) go first, within 40 ms; then half each */
    assert_near(share(&s, 0, 5 * SEC + 100 * MS, 7 * SEC), 0.5, 0.10, "A after the refresh");
    sim_fini(&s);
}

/* A limit raised or lifted while a client waits at it frees the client at once, not at the
 * L tag computed at the old rate (second review of issue 11: the waiter slept ~10 s). */
static void test_raised_limit_frees_now(void **state)
{
    (void)state;
    struct ptab t;
    memset(&t, 0, sizeof(t));
    t.p[0] = (struct dmc_params){.weight = 1, .limit = 100 * 1024}; /* a 128 KiB request / ~1.3 s */
    struct dmc *d = new_dmc(&t, 1);
    struct dmc_req rq[3];
    uint64_t now = 10 * SEC, next = 0;
    struct dmc_req *out = NULL;
    for (int i = 0; i < 3; i++)
        assert_int_equal(dmc_add(d, 0, TIER_IO_TRAINING, 128 * 1024, now, &rq[i]), 0);
    assert_int_equal(dmc_pull(d, now, &out, NULL, &next), 0); /* the first goes */
    assert_int_equal(dmc_pull(d, now, &out, NULL, &next), -EAGAIN);
    assert_true(next > now + SEC);        /* the second waits for the limit */
    t.p[0].limit = 1024ull * 1024 * 1024; /* raised to 1 GiB/s */
    dmc_refresh(d, now + MS);
    assert_int_equal(dmc_pull(d, now + MS, &out, NULL, &next), 0);
    assert_ptr_equal(out, &rq[1]);
    t.p[0].limit = 100 * 1024;
    dmc_refresh(d, now + 2 * MS);
    t.p[0].limit = 0; /* lifted */
    dmc_refresh(d, now + 3 * MS);
    assert_int_equal(dmc_pull(d, now + 3 * MS, &out, NULL, &next), 0);
    assert_ptr_equal(out, &rq[2]);
    dmc_free(d);
}

static void test_reservation_met(void **state)
{
    (void)state;
    struct sim s;
    sim_init(&s, 3);
    /* by weight A would get 1/21; its reservation is 30 % */
    s.t.p[0] = (struct dmc_params){.reservation = CAP * 3 / 10, .weight = 1};
    s.t.p[1].weight = 10;
    s.t.p[2].weight = 10;
    s.size_lo = 64 << 10;
    s.size_hi = 4 << 20;
    sim_run(&s, SEC, 11 * SEC);
    double a = (double)granted(&s, 0, 2 * SEC, 11 * SEC) / (9.0 * CAP);
    if (a < 0.95 * 0.3)
        fail_msg("reservation not met: %.3f of capacity, reserved 0.300", a);
    assert_near(share(&s, 1, 2 * SEC, 11 * SEC), 0.35, 0.10, "B gets half the rest");
    sim_fini(&s);
}

/* ---- property: random clients against the water-filling allocation ------------------------ */

/* mClock's allocation of CAP among backlogged clients: clamp(w_i * x, r_i, l_i) summing to CAP
 * (or every client at its limit). */
static void water_fill(const struct ptab *t, int n, double out[MAXC])
{
    double lo = 0, hi = (double)CAP;
    for (int it = 0; it < 200; it++) {
        double x = (lo + hi) / 2, sum = 0;
        for (int i = 0; i < n; i++) {
            double a = t->p[i].weight * x;
            if (a < (double)t->p[i].reservation)
                a = (double)t->p[i].reservation;
            if (t->p[i].limit && a > (double)t->p[i].limit)
                a = (double)t->p[i].limit;
            sum += a;
        }
        if (sum > (double)CAP)
            hi = x;
        else
            lo = x;
    }
    for (int i = 0; i < n; i++) {
        double a = t->p[i].weight * lo;
        if (a < (double)t->p[i].reservation)
            a = (double)t->p[i].reservation;
        if (t->p[i].limit && a > (double)t->p[i].limit)
            a = (double)t->p[i].limit;
        out[i] = a;
    }
}

static void test_property_random(void **state)
{
    (void)state;
    size_t total_grants = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        struct sim s;
        int n = 2 + (int)(seed % 7);
        sim_init(&s, n);
        s.rnd = seed * 7919;
        s.size_lo = 4 << 10;
        s.size_hi = 2 << 20;
        uint64_t rsum = 0;
        for (int i = 0; i < n; i++) {
            uint64_t v = rnd_next(&s);
            s.t.p[i].weight = 1 + (uint32_t)(v % 20);
            s.depth[i] = 1 + (int)(rnd_next(&s) % MAXDEPTH);
            if (v % 3 == 0 && rsum < CAP / 2) { /* reservations sum to at most 60 % */
                s.t.p[i].reservation = CAP / 100 * (1 + rnd_next(&s) % 10);
                rsum += s.t.p[i].reservation;
            }
            if (v % 4 == 1) /* a limit at or above the reservation */
                s.t.p[i].limit = s.t.p[i].reservation + CAP / 100 * (2 + rnd_next(&s) % 30);
        }
        sim_run(&s, SEC, 9 * SEC);
        total_grants += s.ng;
        double want[MAXC];
        water_fill(&s.t, n, want);
        double sum_got = 0;
        for (int i = 0; i < n; i++) {
            double got = (double)granted(&s, i, 2 * SEC, 9 * SEC) / 7.0;
            sum_got += got;
            /* within 10 % of the allocation, or 0.5 % of the capacity for tiny ones */
            double tol = want[i] * 0.10 > CAP * 0.005 ? want[i] * 0.10 : CAP * 0.005;
            if (got < want[i] - tol || got > want[i] + tol)
                fail_msg("seed %llu client %d (r %llu w %u l %llu depth %d): %.0f/s, want %.0f",
                         (unsigned long long)seed, i, (unsigned long long)s.t.p[i].reservation,
                         s.t.p[i].weight, (unsigned long long)s.t.p[i].limit, s.depth[i], got,
                         want[i]);
            if (s.t.p[i].reservation && got < 0.95 * (double)s.t.p[i].reservation)
                fail_msg("seed %llu client %d: reservation not met", (unsigned long long)seed, i);
            if (s.t.p[i].limit) {
                uint64_t maxreq = 0;
                uint64_t w = max_window(&s, i, 2 * SEC, SEC, &maxreq);
                if (w > s.t.p[i].limit * 105 / 100 + maxreq)
                    fail_msg("seed %llu client %d: limit exceeded", (unsigned long long)seed, i);
            }
        }
        /* work-conserving: unless every client is capped, the server never idles */
        double wsum = 0;
        for (int i = 0; i < n; i++)
            wsum += want[i];
        assert_near(sum_got, wsum, 0.02, "delivered in all");
        sim_fini(&s);
    }
    assert_true(total_grants > 10000); /* thousands of random arrivals */
}

/* ---- the caller's filter (dmc_pull_filtered) ---------------------------------------------- */

static const struct dmc_req *refused_req; /* the filter refuses this head */

static bool refuse_one(void *ud, const struct dmc_req *head)
{
    (void)ud;
    return head != refused_req;
}

/* A head the filter refuses is passed over, its client keeping its order and tags: the other
 * client goes although its P tag is later; with only refused heads the answer is -EBUSY (no
 * time to wait for), with a client at its limit beside them -EAGAIN and its L. */
static void test_pull_filtered(void **state)
{
    (void)state;
    struct ptab t = {0};
    t.p[0] = (struct dmc_params){.weight = 4};
    t.p[1] = (struct dmc_params){.weight = 1, .limit = 1000000};
    struct dmc *d = new_dmc(&t, 1000);
    struct dmc_req a[2], b[2];
    uint64_t now = 10 * SEC, next = 0;
    struct dmc_req *out = NULL;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dmc_add(d, 0, TIER_IO_INFERENCE, 999000, now, &a[i]), 0);
        assert_int_equal(dmc_add(d, 1, TIER_IO_TRAINING, 999000, now, &b[i]), 0);
    }
    /* unfiltered, tenant 0 (P 250000) goes before tenant 1 (P 1000000) */
    refused_req = &a[0];
    assert_int_equal(dmc_pull_filtered(d, now, refuse_one, NULL, &out, NULL, &next), 0);
    assert_ptr_equal(out, &b[0]);
    /* tenant 1 is now at its limit (1 s per request) and tenant 0's head refused */
    assert_int_equal(dmc_pull_filtered(d, now, refuse_one, NULL, &out, NULL, &next), -EAGAIN);
    assert_true(next > now);
    /* after tenant 1's L: b[1] may go; refused too, nothing but the filter holds: -EBUSY */
    refused_req = &b[1];
    assert_int_equal(dmc_pull_filtered(d, next, refuse_one, NULL, &out, NULL, &next), 0);
    assert_ptr_equal(out, &a[0]); /* a[0] is no longer refused */
    refused_req = &a[1];
    assert_int_equal(dmc_pull(d, 12 * SEC, &out, NULL, &next), 0);
    assert_ptr_equal(out, &a[1]); /* without the filter: the smaller P */
    refused_req = &b[1];
    assert_int_equal(dmc_pull_filtered(d, 12 * SEC, refuse_one, NULL, &out, NULL, &next), -EBUSY);
    assert_int_equal(dmc_queued(d), 1);
    assert_int_equal(dmc_pull_filtered(d, 12 * SEC, NULL, NULL, &out, NULL, &next), 0);
    assert_ptr_equal(out, &b[1]);
    assert_int_equal(dmc_pull_filtered(d, 12 * SEC, refuse_one, NULL, &out, NULL, &next), -ENOENT);
    dmc_free(d);
}

/* A reclaimed tenant's id (tenant.h) starts afresh: its clients are forgotten, tags and grant
 * counts, but not while a request of it is queued; other tenants keep theirs. */
static void test_tenant_forget(void **state)
{
    (void)state;
    struct ptab t = {0};
    t.p[3] = (struct dmc_params){.weight = 1, .limit = 1000000};
    struct dmc *d = new_dmc(&t, 1000);
    struct dmc_req a, b;
    struct dmc_req *out = NULL;
    uint64_t now = 10 * SEC, next = 0;
    struct dmc_client_info ci;
    assert_int_equal(dmc_add(d, 3, TIER_IO_TRAINING, 999000, now, &a), 0);
    assert_int_equal(dmc_add(d, 4, TIER_IO_TRAINING, 999000, now, &b), 0);
    assert_int_equal(dmc_tenant_forget(d, 3), -EBUSY); /* a is queued */
    assert_int_equal(dmc_client_info_get(d, 3, TIER_IO_TRAINING, &ci), 0);
    assert_int_equal(dmc_pull(d, now, &out, NULL, &next), 0);
    assert_int_equal(dmc_pull(d, now, &out, NULL, &next), 0);
    assert_int_equal(dmc_client_info_get(d, 3, TIER_IO_TRAINING, &ci), 0);
    assert_int_equal(ci.granted, 1000000);
    assert_true(ci.l_next > now);
    assert_int_equal(dmc_tenant_forget(d, 3), 0);
    assert_int_equal(dmc_client_info_get(d, 3, TIER_IO_TRAINING, &ci), -ENOENT);
    assert_int_equal(dmc_client_info_get(d, 4, TIER_IO_TRAINING, &ci), 0);
    assert_int_equal(dmc_tenant_forget(d, 99), 0); /* never seen: nothing to do */
    /* the id's next tenant is not held back by the old one's limit tag */
    t.p[3] = (struct dmc_params){.weight = 1};
    assert_int_equal(dmc_add(d, 3, TIER_IO_TRAINING, 999000, now, &a), 0);
    assert_int_equal(dmc_pull(d, now, &out, NULL, &next), 0);
    assert_ptr_equal(out, &a);
    assert_int_equal(dmc_client_info_get(d, 3, TIER_IO_TRAINING, &ci), 0);
    assert_int_equal(ci.granted, 1000000);
    dmc_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_tenant_forget),
        cmocka_unit_test(test_weights_split),
        cmocka_unit_test(test_idle_share_reused),
        cmocka_unit_test(test_limit_every_window),
        cmocka_unit_test(test_reservation_met),
        cmocka_unit_test(test_tenant_limit),
        cmocka_unit_test(test_refresh_no_burst),
        cmocka_unit_test(test_raised_limit_frees_now),
        cmocka_unit_test(test_property_random),
        cmocka_unit_test(test_pull_filtered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
