/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dmclock.h - a dmClock-style tag scheduler (mClock, Gulati, Merchant, Varman, OSDI 2010; the
 * dmClock form Ceph uses) as a pure data structure: no threads, no locks, no clock of its own.
 * The caller passes the time (now_ns) to every call, so tests run it on a virtual clock and the
 * scheduler (sched.c) on CLOCK_MONOTONIC under its own mutex.
 *
 * Clients are (tenant, class) pairs, created on their first request, with three parameters in
 * cost units (bytes) per second: a reservation r (0: none), a weight w (> 0) and a limit l
 * (0: none); and a tenant may have a limit of its own over all its classes together (its demand
 * reads, its prefetch, its staging, its uploads: work done for a tenant is charged to it), kept
 * with the same kind of L tag. A request costs its bytes plus op_cost (default DMC_OP_COST_DEFAULT
 * = 64 KiB, the transfer time of one request's round trip at a few GB/s), so many small requests
 * are not free; a call sent as several requests (a read in parts) pays op_cost with its first part
 * only (dmc_add_ex), so it costs what it would cost whole. The allocation it converges to, for
 * backlogged clients: each client's share of what is served is proportional to its weight, raised
 * to its reservation and capped at its limit; what a cap or an idle client leaves is split among
 * the others by weight at once (work-conserving).
 *
 * Tags (ns on the caller's clock; P in virtual units of cost/weight):
 *
 *   R = max(R_prev + cost/r, now)          per arrival, clients with r > 0
 *   P = max(P_prev, V) + cost/w             per arrival at an idle client, P_prev + cost/w at
 *                                           a client with queued requests; V: the start tag of
 *                                           the last weight-phase grant (system virtual time)
 *   L = max(L_prev, t_grant - S) + cost/l   per grant: when the client's next request may go;
 *                                           S = DMC_LIMIT_SLACK_NS; a tenant's own L likewise,
 *                                           advanced by the grants of all its clients
 *
 * The max with now (R) and with V (P) is the idle adjustment: a client that was idle gets no
 * burst of credit and is not starved either; its first P tag starts at the virtual time of
 * the clients that stayed busy. A backlogged client keeps its P sequence: clients held back by
 * a limit (their own or their tenant's) fall behind V, which only matters while the limit
 * holds them, and among themselves they keep the order of their weights. L departs from the paper
 * on purpose: it is computed at grant time from the previous grant, not at arrival, so a client
 * held back by contention (its arrival tags falling behind now) never accumulates more than S of
 * limit credit. That is what makes a limit hold over every window: the cost granted to a client in
 * any window of length T is at most l*(T + S) plus one request's cost (1.02 l + one request over 1
 * s). S itself is there because the server is not preemptive: a request whose L came while the
 * server was busy with another one is granted late, and without S each such delay would be lost for
 * good, so a limited client would get visibly less than its limit (about 10 % less in
 * test_dmclock's simulation of 4 MiB requests at 20 % of the capacity).
 *
 * dmc_pull, at now:
 *   1. constraint phase: among clients whose head has R <= now and whose L <= now, the
 *      smallest R;
 *   2. weight phase: among clients whose L <= now, the smallest head P (ties: lower class,
 *      then lower tenant); a grant here subtracts cost/r from the client's queued R tags and
 *      R_prev, so reservation credit is not used up by service the reservation did not pay for;
 *   3. nothing eligible (every waiting client is at its limit): -EAGAIN and the earliest L.
 * Limits are checked in the constraint phase too (the paper does not): with r <= l, which the
 * config enforces, this costs no reservation and keeps limits hard. "Under its limit" means
 * under the client's L and under its tenant's L (when the tenant has a limit); a grant advances
 * both.
 *
 * Invariants: a client is on the active list iff it has queued requests; requests of a client
 * are granted in arrival order; R tags of a client's queue are non-decreasing; V never
 * decreases. Cost: O(1) per dmc_add and dmc_cancel, O(active clients) per dmc_pull (at most
 * max_tenants x 4, and in practice the number of threads waiting); a weight-phase grant also
 * walks that client's own queue to adjust its R tags.
 *
 * Ownership: requests are the caller's (embedded in its waiter); dmc_free frees the clients
 * only. Not thread-safe: one lock around every call (sched.c's mutex).
 */
#ifndef TIER_QOS_DMCLOCK_H
#define TIER_QOS_DMCLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ioctx.h"
#include "common/list.h"

#define DMC_OP_COST_DEFAULT (64u * 1024u)
#define DMC_MAX_TENANTS TIER_TENANT_IDS_MAX /* tenant ids at most (tenant_id_limit()) */
#define DMC_WEIGHT_MAX 10000u
#define DMC_LIMIT_SLACK_NS 20000000ull /* S: lateness a limited client keeps, 20 ms */

struct dmc_params {
    uint64_t reservation; /* cost units (bytes) per second; 0: none */
    uint32_t weight;      /* 1 .. DMC_WEIGHT_MAX; 0 is taken as 1 */
    uint64_t limit;       /* cost units per second; 0: none */
    /* The tenant's limit over all its classes together, cost units per second; 0: none. Every
     * client of a tenant must report the same value (the last one loaded counts). */
    uint64_t tenant_limit;
};

/* The parameters of client (tenant, cls): called when the client is created and by
 * dmc_refresh, under the caller's lock. */
typedef void (*dmc_params_fn)(void *ud, uint32_t tenant, enum tier_io_class cls,
                              struct dmc_params *out);

struct dmc_config {
    uint64_t op_cost; /* cost of a request beyond its bytes; 0: DMC_OP_COST_DEFAULT */
    dmc_params_fn params;
    void *params_ud;
};

struct dmc_client;

/* One request, owned by the caller (embed it); valid from dmc_add until dmc_pull returns it
 * or dmc_cancel removes it. */
struct dmc_req {
    struct tier_list link; /* on the client's FIFO */
    struct dmc_client *cl;
    uint64_t cost;
    bool op;        /* cost includes op_cost (dmc_add_ex) */
    uint64_t r_tag; /* ns; meaningful when the client has a reservation */
    double p_tag;
};

enum dmc_phase {
    DMC_PHASE_RESERVATION = 0,
    DMC_PHASE_WEIGHT = 1,
};

struct dmc;

int dmc_new(const struct dmc_config *cfg, struct dmc **out);
void dmc_free(struct dmc *d); /* NULL is a no-op */

/* Queue req for client (tenant, cls) with bytes of payload at now_ns: 0, -EINVAL (tenant >=
 * DMC_MAX_TENANTS or a class out of range), or -ENOMEM (a new client could not be allocated);
 * on failure req is not queued. */
int dmc_add(struct dmc *d, uint32_t tenant, enum tier_io_class cls, uint64_t bytes, uint64_t now_ns,
            struct dmc_req *req);
/* dmc_add of a request that costs its bytes only (op false): a later part of one call sent as
 * several requests (sched.h, split reads), whose op cost its first part paid; op true is
 * dmc_add. */
int dmc_add_ex(struct dmc *d, uint32_t tenant, enum tier_io_class cls, uint64_t bytes, bool op,
               uint64_t now_ns, struct dmc_req *req);
/* The next request at now_ns: 0 with *out (removed from the queue) and *phase (may be NULL);
 * -EAGAIN when requests wait but every one's client is at its limit, with *next_ns (may be
 * NULL) the earliest time one may go; -ENOENT when nothing waits. */
int dmc_pull(struct dmc *d, uint64_t now_ns, struct dmc_req **out, enum dmc_phase *phase,
             uint64_t *next_ns);
/* The caller's veto over a client's head request (sched.c: yield_inflight): false, the request
 * may not go now. Called under the caller's lock, with no side effects on d. */
typedef bool (*dmc_filter_fn)(void *ud, const struct dmc_req *head);
/* dmc_pull that passes over every client whose head ok (NULL: none) refuses, as if the client
 * had nothing queued: its tags stay, and it falls behind V as a limited client does. Returns as
 * dmc_pull, and -EBUSY when requests wait, none at its limit, but ok refused every head (the
 * caller knows when its veto ends: no time to wait for). With a client at its limit too it is
 * -EAGAIN and *next_ns. */
int dmc_pull_filtered(struct dmc *d, uint64_t now_ns, dmc_filter_fn ok, void *ok_ud,
                      struct dmc_req **out, enum dmc_phase *phase, uint64_t *next_ns);
/* Remove a queued request without granting it (its caller gave up). Its tags are not handed
 * back: a cancelled request costs its client at most that request's share. */
void dmc_cancel(struct dmc *d, struct dmc_req *req);
/* Ask params again for every client (after a configuration change); a client's next P tag
 * starts at V at the latest, so one a lowered limit held back gets no credit from it. */
void dmc_refresh(struct dmc *d, uint64_t now_ns);
/* Requests queued, all clients. */
size_t dmc_queued(const struct dmc *d);
/* The cost a request of bytes is charged. */
uint64_t dmc_cost(const struct dmc *d, uint64_t bytes);

/* Forget every client of tenant (its tags and grant counts), as if it never called: its id is
 * being given to another tenant (tenant.h, reclaim). 0, or -EBUSY (nothing changed) while a
 * request of the tenant is queued. */
int dmc_tenant_forget(struct dmc *d, uint32_t tenant);

/* One client's state, for tests and the stats. */
struct dmc_client_info {
    struct dmc_params params;
    size_t queued;
    uint64_t r_prev;        /* R tag of the last arrival (ns) */
    uint64_t l_next;        /* L: earliest time of the next grant (ns) */
    uint64_t tenant_l_next; /* the tenant's L (ns) */
    double p_prev;          /* P tag of the last arrival */
    uint64_t head_r;        /* the head request's R tag, 0 with no request */
    double head_p;          /* ... and its P tag */
    uint64_t granted;       /* cost granted so far */
    uint64_t granted_ops;   /* grants that paid op_cost (all but the later parts of a call) */
    uint64_t grants_reservation, grants_weight;
};
/* 0 and *out, or -ENOENT when the client does not exist yet. */
int dmc_client_info_get(const struct dmc *d, uint32_t tenant, enum tier_io_class cls,
                        struct dmc_client_info *out);

#endif
