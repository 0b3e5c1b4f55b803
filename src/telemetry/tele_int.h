/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tele_int.h - the telemetry module's private state, shared by telemetry.c (series, record
 * path), tele_hist.c (bucket scheme), tele_prom.c and tele_json.c (export). Only src/telemetry/
 * includes it.
 *
 * Ownership: struct telemetry is immutable after telemetry_new apart from the series pointer
 * tables, whose slots go from NULL to a series once (compare-and-swap, acquire/release), and the
 * series' counters, which only grow (relaxed atomics) but for tele_tenant_fold, which moves a
 * reclaimed tenant's counts to another tenant (exchange with 0, then add). Readers load each
 * counter on its own and skip a series whose histogram is empty.
 */
#ifndef TIER_TELEMETRY_TELE_INT_H
#define TIER_TELEMETRY_TELE_INT_H

#include <stdatomic.h>

#include "telemetry/stall.h"
#include "telemetry/telemetry.h"

struct dynbuf;

struct tele_hist {
    _Atomic uint64_t counts[TELE_HIST_NBUCKETS];
    _Atomic uint64_t sum_ns;
    _Atomic uint64_t min_ns; /* UINT64_MAX until the first value */
    _Atomic uint64_t max_ns;
};

/* One (tenant, class, op, tier). ops is the sum of the histogram's counts. */
struct tele_op_series {
    struct tele_hist lat;
    _Atomic uint64_t bytes;
    _Atomic uint64_t errors;
};

/* One (tenant, class) at the scheduling point. ops is the sum of wait's counts. */
struct tele_sched_series {
    struct tele_hist wait, service;
    _Atomic uint64_t bytes;
    _Atomic uint64_t errors;
};

#define TELE_OPS_PER_TENANT (TIER_IO_NCLASSES * TELE_NOPS * TELE_NTIERS)

struct telemetry {
    unsigned max_tenants;
    const char *(*tenant_name)(void *ud, uint32_t id);
    void *tenant_name_ud;
    uint64_t started_real_ns; /* telemetry_new: lets a client tell a restart from a diff */
    /* [tenant][class][op][tier] and [tenant][class]; NULL until first recorded */
    struct tele_op_series *_Atomic *ops;
    struct tele_sched_series *_Atomic *sched;
    struct stall *stall;     /* data stalls reported by training loops (stall.h); its own lock */
    struct gpu *_Atomic gpu; /* GPU sampler (gpu.h) or NULL; set once, its own locks */
};

static inline size_t tele_op_slot(unsigned tenant, unsigned cls, unsigned op, unsigned tier)
{
    return (((size_t)tenant * TIER_IO_NCLASSES + cls) * TELE_NOPS + op) * TELE_NTIERS + tier;
}

static inline size_t tele_sched_slot(unsigned tenant, unsigned cls)
{
    return (size_t)tenant * TIER_IO_NCLASSES + cls;
}

/* A plain copy of a histogram's counters, taken counter by counter. */
struct tele_hist_copy {
    uint64_t counts[TELE_HIST_NBUCKETS];
    uint64_t n, sum_ns, min_ns, max_ns;
};
void tele_hist_read(const struct tele_hist *h, struct tele_hist_copy *c);
/* No value recorded (or all of them folded away, tele_tenant_fold): the renderers skip such a
 * series. */
bool tele_hist_empty(const struct tele_hist *h);

/* The tenant's name for export: the callback's answer, or the id in decimal in buf. */
const char *tele_tenant_label(const struct telemetry *t, uint32_t id, char *buf, size_t bufsz);

/* The stall store's tenants now (stall_list), malloc'd into *out (NULL when none); -ENOMEM. */
int tele_stall_list(const struct telemetry *t, struct stall_tenant_stats **out, size_t *n);

/* The GPU sampler's tenants now (gpu_list), malloc'd into *out (NULL when none or no sampler);
 * -ENOMEM. */
struct gpu_tenant_stats;
int tele_gpu_list(const struct telemetry *t, struct gpu_tenant_stats **out, size_t *n);
/* The recent utilisation of tenant in v[0..n) (tele_gpu_list's answer), or -1: none. */
double tele_gpu_util_of(const struct gpu_tenant_stats *v, size_t n, uint32_t tenant);

/* Append the decimal digits of v. */
int tele_put_u64(struct dynbuf *out, uint64_t v);

/* A renderer's output: once an append fails, the later ones are skipped and rc keeps the error
 * (-ENOMEM or -E2BIG), so a renderer checks it once at the end. */
struct tele_out {
    struct dynbuf *b;
    int rc;
};
void tele_out_put(struct tele_out *o, const char *s);
void tele_out_putn(struct tele_out *o, const char *s, size_t n);
void tele_out_u64(struct tele_out *o, uint64_t v);

#endif
