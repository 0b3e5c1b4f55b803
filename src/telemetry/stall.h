/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stall.h - data-stall accounting per tenant: how long each training job's loop waited for its
 * next batch and how long it computed between batches, as the Python helper measures it inside
 * the loop (contrib/python/tierd_hints.py, StallReport) and reports it (POST /v1/progress,
 * api_progress.c). Owned by the telemetry (telemetry.h, tele_stall), exported by its renderers
 * (/metrics, GET /v1/telemetry "stalls") and shown by `tierctl top` (STALL%).
 *
 * A tenant's figures are
 *   - cumulative wait, compute (ns) and steps since tierd started: counters that never go down
 *     (a reporter that ages out or is dropped leaves its counts in its tenant's totals);
 *   - a recent stall ratio, wait / (wait + compute), over its live reporters, each report's
 *     seconds decayed exponentially with time constant tau (default 60 s: a report's weight is
 *     1/e after a minute, 5 % after three); none (-1) while no live reporter has reported any
 *     time.
 * A reporter is one name (one job and rank) of one tenant. One silent for idle_s (default 300 s)
 * ages out: it is removed at the next report or read of the store. A tenant holds at most
 * names_per_tenant reporters (default 16); a new name beyond that replaces the tenant's least
 * recently heard reporter (counted in "dropped"), so one tenant's names never crowd out
 * another's.
 *
 * Memory: a tenant's slot (allocated at its first report, freed by stall_free) is
 * sizeof(struct stall_tenant) in stall.c: 1,840 bytes (16 names of 112 bytes and the totals), plus
 * 8 bytes per possible tenant for the pointer table: 116 KiB for 64 tenants that all report, at
 * most 116 MiB at the registry's 65,537 ids.
 *
 * Threads: one mutex guards the store; reports come every few seconds per reporter, so it is
 * never on the read path. The time of a call is the caller's now_ns (monotonic), for the tests.
 */
#ifndef TIER_TELEMETRY_STALL_H
#define TIER_TELEMETRY_STALL_H

#include <stddef.h>
#include <stdint.h>

struct stall;

#define STALL_NAME_MAX 64                     /* a reporter's name: 1..63 bytes */
#define STALL_NAMES_PER_TENANT 16             /* reporters one tenant holds at once, at most */
#define STALL_TAU_NS_DEFAULT 60000000000ULL   /* 60 s */
#define STALL_IDLE_NS_DEFAULT 300000000000ULL /* 300 s */
#define STALL_REPORT_MAX_S 86400.0            /* one report covers at most a day of each */
#define STALL_REPORT_MAX_STEPS 1000000000ULL  /* and at most 10^9 steps */

struct stall_config {
    unsigned max_tenants;      /* ids 0..max_tenants-1 apart, beyond: TIER_TENANT_OTHER; 2.. */
    unsigned names_per_tenant; /* 0: STALL_NAMES_PER_TENANT; 1..STALL_NAMES_PER_TENANT */
    uint64_t tau_ns;           /* 0: default */
    uint64_t idle_ns;          /* 0: default */
};

/* 0, -EINVAL (a bound out of range, tier_err_msg() says which) or -ENOMEM. */
int stall_new(const struct stall_config *cfg, struct stall **out);
void stall_free(struct stall *s); /* NULL: no-op */

/* Is the report valid? name 1..63 letters, digits, '.', '_', '-'; wait_s and compute_s finite,
 * 0 .. STALL_REPORT_MAX_S; steps 0 .. STALL_REPORT_MAX_STEPS. 0 or -EINVAL with tier_err_msg()
 * naming the field, its value and what is allowed. Pure. */
int stall_report_check(const char *name, double wait_s, double compute_s, double steps);

/* Add one report of reporter name of tenant at now_ns: validated first (stall_report_check);
 * a new name may replace the tenant's least recently heard reporter. 0, -EINVAL or -ENOMEM
 * (nothing recorded). s NULL: -EINVAL. */
int stall_report(struct stall *s, uint32_t tenant, const char *name, double wait_s,
                 double compute_s, uint64_t steps, uint64_t now_ns);

struct stall_tenant_stats {
    uint32_t tenant;
    uint64_t wait_ns, compute_ns, steps; /* cumulative since start */
    uint64_t reports;                    /* reports taken */
    uint64_t dropped;                    /* reporters replaced by a new name (the bound) */
    unsigned reporters;                  /* live reporters now */
    double ratio;                        /* recent wait / (wait + compute); -1: none */
};

struct stall_reporter_stats {
    char name[STALL_NAME_MAX];
    uint64_t wait_ns, compute_ns, steps; /* cumulative since its first report */
    double ratio;                        /* its own recent ratio; -1: none */
    double idle_s;                       /* since its last report */
};

/* The tenants that have ever reported, in id order, as of now_ns (reporters silent for idle_s
 * are removed first): up to max into out; returns how many there are (may exceed max). */
size_t stall_list(struct stall *s, uint64_t now_ns, struct stall_tenant_stats *out, size_t max);

/* One tenant's cumulative wait and compute (the advice loop's, advice/advisor.h): 0, or -ENOENT
 * (it never reported; both 0). */
int stall_totals(struct stall *s, uint32_t tenant, uint64_t *wait_ns, uint64_t *compute_ns);

/* One tenant's live reporters, most recently heard first: up to max into out; returns how many
 * there are. 0 for a tenant that never reported. */
size_t stall_reporters(struct stall *s, uint32_t tenant, uint64_t now_ns,
                       struct stall_reporter_stats *out, size_t max);

/* Tenant from was reclaimed (telemetry.h, tele_tenant_fold): its cumulative counts are added to
 * to's, its reporters are dropped. 0, -EINVAL (an id out of range, from == to), -ENOMEM. */
int stall_tenant_fold(struct stall *s, uint32_t from, uint32_t to);

#endif
