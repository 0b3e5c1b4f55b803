/* SPDX-License-Identifier: Apache-2.0 */
/*
 * top.h - the model behind `tierctl top` (docs/TIERCTL.md): from two GET /v1/telemetry answers
 * (docs/API.md: cumulative counters and histogram buckets since tierd started) to one row per
 * tenant and per (tenant, class) with rates and percentiles over the interval between them, and
 * their rendering as a table or as JSON. No I/O but the FILE it prints to; tierctl.c fetches.
 *
 * Single-threaded. A snapshot keeps a reference to its JSON (its strings are borrowed from it);
 * a view borrows its strings from the newer snapshot and is valid while that one lives.
 */
#ifndef TIER_CLI_TOP_H
#define TIER_CLI_TOP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "telemetry/telemetry.h"

/* The tiers that serve a read, as /v1/telemetry names them. */
enum top_tier { TOP_RAM = 0, TOP_DISK = 1, TOP_BACKEND = 2, TOP_NTIERS = 3 };

/* A series' buckets are struct tele_bucket (telemetry/telemetry.h): [upper_ns, the values in
 * this bucket (not cumulative over buckets)]. */

/* One series of the answer: an "ops" entry (tenant, class, op, tier) or a "sched" entry
 * (tenant, class; its queue wait histogram). */
struct top_series {
    const char *tenant, *cls, *op, *tier; /* op and tier NULL for a sched entry */
    uint64_t ops, bytes, errors;
    uint64_t sum_ns;       /* of the latency (ops) or queue wait (sched) histogram */
    struct tele_bucket *b; /* sorted by upper_ns */
    size_t nb;
};

/* The histogram scheme of the answer ("hist"): bucket bounds for the midpoint estimate. */
struct top_scheme {
    uint64_t min_ns, max_ns, sub_buckets, overflow_upper_ns;
};

/* One tenant's data stalls ("stalls" of the answer: what its training loops reported with POST
 * /v1/progress, stall.h): cumulative seconds and steps, and tierd's recent ratio (-1: none). */
struct top_stall {
    const char *tenant;
    double wait_s, compute_s, ratio;
    uint64_t steps, reporters;
};

/* One tenant's recent GPU utilisation ("gpu" of the answer: NVML's, src/telemetry/gpu.h), 0..1. */
struct top_gpu {
    const char *tenant;
    double util;
};

struct top_snap {
    json_t *json;    /* a reference: every string above is borrowed from it */
    uint64_t now_ns; /* tierd's clock at the answer */
    uint64_t started_ns;
    struct top_scheme scheme;
    struct top_series *s; /* sorted by (sched, tenant, class, op, tier) */
    size_t n;
    uint64_t tier_used[2], tier_capacity[2]; /* RAM, disk gauges; 0 when absent */
    struct top_stall *st; /* sorted by tenant; none from a tierd without "stalls" */
    size_t nst;
    struct top_gpu *gpu; /* sorted by tenant; none without a GPU sampler ("gpu" null) */
    size_t ngpu;
    bool has_gpu; /* "gpu" is an object: tierd runs a GPU sampler */
};

/* Parse one /v1/telemetry answer (borrowed; a reference is taken). 0, or -EINVAL with a
 * sentence in err for an answer of another shape, -ENOMEM. */
int top_snap_parse(json_t *answer, struct top_snap *out, char *err, size_t errsz);
void top_snap_fini(struct top_snap *s); /* zeroed or parsed; safe twice */

struct top_class_row {
    const char *cls;
    double ops_s, bytes_s;        /* read + write ops and their bytes, per second */
    double p50_s, p99_s;          /* of the read and write ops in the interval; -1: none */
    double qwait_avg_s;           /* mean queue wait at the scheduling point; -1: no backend call */
    double qwait_p99_s;           /* -1: no backend call */
    uint64_t ops, lat_n, sched_n; /* in the interval: ops of every kind, data ops timed, backend
                                   * calls */
    uint64_t ops_total, sched_total; /* since tierd started */
};

#define TOP_MAX_CLASSES 8

struct top_tenant_row {
    const char *tenant;
    double ops_s, bytes_s;      /* every FUSE op; bytes of reads and writes */
    double hit_pct[TOP_NTIERS]; /* share of the interval's reads served by each tier; -1: no read */
    double p50_s, p99_s;        /* over the tenant's read and write ops; -1: none */
    double qwait_avg_s, qwait_p99_s;
    uint64_t ops_total;                        /* since tierd started */
    uint64_t ops;                              /* in the interval */
    struct top_class_row cls[TOP_MAX_CLASSES]; /* classes with any series, sorted by load */
    size_t ncls;
    /* data stalls, as tierd reports them (not diffed: its ratio is already a recent one) */
    const struct top_stall *stall; /* NULL: the tenant's loops never reported */
    double gpu_util;               /* tierd's recent GPU utilisation, 0..1; -1: none */
};

enum top_sort { TOP_SORT_OPS = 0, TOP_SORT_BYTES = 1 };

struct top_view {
    double interval_s;
    bool restarted;           /* tierd restarted between the snapshots: rates are since its start */
    struct top_tenant_row *t; /* sorted by load, then name */
    size_t n;
    uint64_t tier_used[2], tier_capacity[2];
    bool gpu; /* either snapshot had a GPU sampler: the table shows GPU% */
};

/* Rows for the interval prev -> cur (prev may be NULL: everything since tierd started, over
 * interval_s). Every tenant with a series, a stall entry or a GPU figure in cur gets a row, idle
 * ones with zero rates. 0 or -ENOMEM. */
int top_view_build(const struct top_snap *prev, const struct top_snap *cur, double interval_s,
                   enum top_sort sort, struct top_view *out);
void top_view_fini(struct top_view *v);

/* The table (docs/TIERCTL.md), plain text. */
void top_print_table(FILE *f, const struct top_view *v, enum top_sort sort);
/* The JSON of `tierctl top --json` (docs/TIERCTL.md); NULL without memory. */
json_t *top_view_json(const struct top_view *v);

/* Is sc the bucket scheme of this tierctl's telemetry library (tierd of the same bounds)? */
bool top_scheme_known(const struct top_scheme *sc);
/* Quantile q of the merged histogram h (n buckets, sorted by upper_ns, zero counts allowed) as
 * the midpoint of the bucket holding the value of rank ceil(q * total), in ns, by the telemetry
 * library's tele_quantile_diff; 0 when empty, or when sc is not the library's scheme (a tierd
 * of other bucket bounds: its midpoints would be wrong). Pure; exported for the unit test. */
uint64_t top_quantile_ns(const struct top_scheme *sc, const struct tele_bucket *h, size_t n,
                         double q);

#endif
