/* SPDX-License-Identifier: Apache-2.0 */
/*
 * telemetry.h - per-tenant counters and latency histograms, and their export.
 *
 * Series: for every (tenant, class, op, tier that served it) a latency histogram with at most 2 %
 * relative quantile error from 1 us to 60 s (log-linear buckets), plus counters of ops, bytes and
 * errors. Separately, for every (tenant, class) at the scheduling point, the queue wait and the
 * service time of backend calls. A series exists once it has been recorded into (lazily
 * allocated); memory per series and per tenant is stated below and in docs/ARCHITECTURE.md.
 *
 * Record path: no lock; relaxed atomic adds into the series (a series is created once with a
 * compare-and-swap). Readers (export) see every count at least as new as the last completed
 * record, not a snapshot across series.
 *
 * Data stalls (stall.h): the wait and compute seconds training loops report (POST /v1/progress)
 * are kept per tenant in a store of the telemetry's, with its own lock and fixed memory per
 * tenant, and exported with the series.
 *
 * GPU utilisation (gpu.h): where NVML is installed, a sampler the telemetry owns keeps a recent
 * SM utilisation per tenant, exported beside the stalls.
 *
 * Tenant ids index arrays of size max_tenants; ids beyond it are folded into TIER_TENANT_OTHER.
 * Names come from the tenant registry through the name callback, at export time only.
 *
 * Histogram (log-linear, after HdrHistogram): values in ns; below 512 ns one underflow bucket,
 * then 27 octaves [2^k, 2^(k+1)) for k = 9..35, each cut into 32 equal sub-buckets, then one
 * overflow bucket for values >= 2^36 ns (68.7 s). A sub-bucket spans at most 1/32 of its lower
 * bound; a quantile is reported as the bucket's midpoint, so its relative error is at most
 * 1/64 = 1.6 % for values from 512 ns to 68.7 s. 866 buckets of 8 bytes.
 *
 * Memory: an op series is 6,968 bytes (866 counts + sum, min, max, bytes, errors), a scheduler
 * series 13,920 bytes (two histograms); the pointer tables are 8 bytes per possible series
 * (max_tenants x 76: 38,912 bytes for 64 tenants). A tenant that recorded every op and tier in
 * every class holds 72 op series and 4 scheduler series: 557,376 bytes at most; with the default
 * 64 tenants the bound is 35.7 MB. Series are freed only by telemetry_free. (telemetry.c checks
 * the struct sizes at compile time.)
 */
#ifndef TIER_TELEMETRY_TELEMETRY_H
#define TIER_TELEMETRY_TELEMETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ioctx.h"

struct dynbuf;
struct telemetry;

/* FUSE operations as a tenant sees them. */
enum tele_op {
    TELE_OP_READ = 0,
    TELE_OP_WRITE = 1,
    TELE_OP_OPEN = 2,    /* open and create */
    TELE_OP_LOOKUP = 3,  /* lookup and getattr */
    TELE_OP_READDIR = 4, /* opendir + readdir */
    TELE_OP_FSYNC = 5,   /* fsync of a write-back file (the spool flush) */
    TELE_NOPS = 6,
};

/* The tier that served a request: RAM (no device touched), the node's disk (cache disk level
 * or write-back spool), or a backend (any block or metadata fetched from it). */
enum tele_tier {
    TELE_TIER_RAM = 0,
    TELE_TIER_DISK = 1,
    TELE_TIER_BACKEND = 2,
    TELE_NTIERS = 3,
};

const char *tele_op_name(enum tele_op op);
const char *tele_tier_name(enum tele_tier t);

struct telemetry_config {
    unsigned max_tenants; /* ids 0..max_tenants-1 are kept apart; 0: default 64; 2..65536 */
    /* Name of a tenant id at export time (the tenant registry's tenant_name); NULL, or a NULL
     * answer: the id as a decimal number. The string must stay valid until the render returns. */
    const char *(*tenant_name)(void *ud, uint32_t id);
    void *tenant_name_ud;
};

/* 0, -EINVAL (max_tenants out of range, tier_err_msg() says so) or -ENOMEM. */
int telemetry_new(const struct telemetry_config *cfg, struct telemetry **out);
void telemetry_free(struct telemetry *t); /* NULL: no-op; no record or render may run */

/* One FUSE request finished (or a block a cluster node served to a peer, a read of tenant
 * "peers": daemon/cluster.c): latency ns, bytes moved (read reply / written), err (0 or -errno).
 * t NULL: no-op. io NULL: TIER_IOCTX_DEFAULT. Classes out of range count as background; an op or
 * tier out of range is dropped (a bug of the caller). */
void tele_op_record(struct telemetry *t, const struct tier_ioctx *io, enum tele_op op,
                    enum tele_tier tier, uint64_t latency_ns, uint64_t bytes, int err);
/* One backend call passed the scheduling point: time queued at admission, time from admission to
 * completion, bytes, err (0 or -errno). t NULL: no-op. */
void tele_sched_record(struct telemetry *t, const struct tier_ioctx *io, uint64_t wait_ns,
                       uint64_t service_ns, uint64_t bytes, int err);

/* Tenant `from` was reclaimed (tenant.h, idle_reclaim): move every count of its series into
 * tenant `to`'s ("retired") of the same class, op and tier. Each counter is exchanged with 0 and
 * its value added, so the sums over all tenants are unchanged and a record racing with the fold
 * is counted once, in one of the two (or stays in from for the next fold). Series of from are
 * kept, empty (the renderers skip empty series), for the id's next tenant. 0, -EINVAL (an id
 * out of range, or from == to), -ENOMEM (some counts stay in from). t NULL: 0. */
int tele_tenant_fold(struct telemetry *t, uint32_t from, uint32_t to);

/* The data-stall store (stall.h) the telemetry owns: what training loops report through POST
 * /v1/progress; exported by both renderers ("stalls", tierd_tenant_data_*). Folded with the
 * tenant by tele_tenant_fold. Valid until telemetry_free; t NULL: NULL. */
struct stall;
struct stall *tele_stall(struct telemetry *t);

/* The GPU sampler (gpu.h), where one runs: the telemetry takes it (gpu_close at
 * telemetry_free, before the tenant registry it resolves with goes; the daemon stops its thread
 * earlier, gpu_stop first thing in its teardown, main.c) and its renderers export its figures
 * (tierd_tenant_gpu_utilisation, "gpu_util" and "gpu"); tele_tenant_fold drops a reclaimed
 * tenant's. Set once, before the first render; t NULL: g is closed. */
struct gpu;
void tele_gpu_set(struct telemetry *t, struct gpu *g);
/* The sampler set, or NULL. Valid until telemetry_free. */
struct gpu *tele_gpu(struct telemetry *t);

/* ---- histogram scheme (shared with clients of GET /v1/telemetry) --------------------------- */

#define TELE_HIST_SUB_BITS 5  /* 32 sub-buckets per octave */
#define TELE_HIST_MIN_SHIFT 9 /* first octave starts at 512 ns */
#define TELE_HIST_OCTAVES 27  /* last ends at 2^36 ns = 68.7 s */
#define TELE_HIST_NBUCKETS (2 + (TELE_HIST_OCTAVES << TELE_HIST_SUB_BITS)) /* 866 */
#define TELE_HIST_MAX_NS (1ULL << (TELE_HIST_MIN_SHIFT + TELE_HIST_OCTAVES))
/* The upper bound the overflow bucket is exported with (values >= TELE_HIST_MAX_NS). */
#define TELE_HIST_OVERFLOW_UPPER_NS (2 * TELE_HIST_MAX_NS)

/* Bucket index of a value. */
unsigned tele_hist_index(uint64_t ns);
/* Exclusive upper bound in ns of bucket idx (the overflow bucket: TELE_HIST_OVERFLOW_UPPER_NS). */
uint64_t tele_hist_upper_ns(unsigned idx);
/* Lower bound of the bucket whose upper bound is upper_ns (0 for the underflow bucket). */
uint64_t tele_hist_lower_ns(uint64_t upper_ns);

/* One non-empty bucket as GET /v1/telemetry gives it: [upper_bound_ns, cumulative-since-start
 * count of this bucket] (not cumulative over buckets). */
struct tele_bucket {
    uint64_t upper_ns;
    uint64_t count;
};

/* Quantile q (0..1) of the values recorded between two snapshots of one histogram: cur minus
 * prev (prev may be NULL with nprev 0: everything in cur). Both lists sorted by upper_ns, as
 * exported; a bucket of prev missing from cur, or larger than in cur (a restart), counts as 0.
 * Returns the midpoint of the bucket holding the value of rank ceil(q * n) (at least 1), in ns:
 * at most 1.6 % from the exact quantile in 512 ns .. 68.7 s; the underflow bucket gives 512, the
 * overflow bucket TELE_HIST_MAX_NS. 0 when no value was recorded in between. *n_out (may be
 * NULL) gets the number of values in between. Pure; for tierctl and tests. */
uint64_t tele_quantile_diff(const struct tele_bucket *cur, size_t ncur,
                            const struct tele_bucket *prev, size_t nprev, double q,
                            uint64_t *n_out);

/* ---- gauges and health --------------------------------------------------------------------- */

/* scheduler lanes in the gauges: tierd's backends' (16 at most) and its cluster's peer lane */
#define TELE_MAX_BACKENDS 17

/* Gauges and health that are not recorded per op, gathered at export time. */
struct tele_gauges {
    uint64_t ram_used_bytes, ram_capacity_bytes;
    uint64_t disk_used_bytes, disk_capacity_bytes;
    uint64_t pinned_bytes;
    bool writeback; /* a burst buffer exists: the wb_* fields are meaningful */
    uint64_t wb_backlog_files, wb_backlog_bytes, wb_failed_files;
    double wb_oldest_backlog_age_s; /* 0: no backlog */
    double wb_backlog_age_limit_s;  /* health: an older backlog is degraded; 0: no limit */
    unsigned nbackends;
    struct {
        const char *name;
        int breaker; /* enum sched_breaker_state: 0 closed, 1 open, 2 half-open */
        uint64_t inflight, queued;
    } backends[TELE_MAX_BACKENDS];
    /* Hot-tier space by tenant (cache.h, space quotas): the tenants that hold bytes or have a
     * quota, in id order; the array is the caller's (NULL when nspace is 0). */
    unsigned nspace;
    const struct tele_space {
        uint32_t tenant;
        uint64_t bytes, quota; /* quota 0: none */
        uint64_t quota_evictions;
    } * space;
    /* Lifecycle policies' counters (lifecycle/lifecycle.h), one per rule in config order; the array
     * is the caller's (NULL when npolicies is 0). */
    unsigned npolicies;
    const struct tele_policy {
        const char *name, *action, *ns; /* ns: the rule's namespace (built-in rules share a name) */
        uint64_t done, bytes, deferred, failed;
        uint64_t skipped; /* expire rules: deletes skipped (a copy not as journalled); copy
                           * rules: copies not written (the target held another object) */
    } * policies;
};

/* Why tierd is degraded. Each kind is exported as tierd_health_reason{reason="<kind>"}. */
enum tele_health_kind {
    TELE_HEALTH_BREAKER_OPEN = 0, /* a backend's circuit breaker is open (not half-open) */
    TELE_HEALTH_BACKLOG_AGE = 1,  /* the oldest write-back backlog is older than the limit */
    TELE_HEALTH_FAILED_FILES = 2, /* write-back files in state FAILED (never uploaded) */
    TELE_HEALTH_NKINDS = 3,
};
const char *tele_health_kind_name(enum tele_health_kind k);

#define TELE_HEALTH_MAX_REASONS (TELE_MAX_BACKENDS + 2)
struct tele_health {
    bool kind[TELE_HEALTH_NKINDS];
    unsigned nreasons;                          /* 0: ready */
    char reasons[TELE_HEALTH_MAX_REASONS][192]; /* operator text, one per open breaker etc. */
};
/* Health from the gauges. Pure. */
void tele_health_eval(const struct tele_gauges *g, struct tele_health *h);

/* ---- export -------------------------------------------------------------------------------- */

/* Prometheus text exposition 0.0.4 of every non-empty series and the gauges and health (g may
 * be NULL: none), appended to out. 0, -ENOMEM or -E2BIG (out's cap). */
int tele_render_prometheus(struct telemetry *t, const struct tele_gauges *g, struct dynbuf *out);
/* The JSON of GET /v1/telemetry (format: docs/API.md), appended to out. 0, -ENOMEM, -E2BIG. */
int tele_render_json(struct telemetry *t, const struct tele_gauges *g, struct dynbuf *out);

/* Append s (len bytes) to out as a Prometheus label value (without quotes): \ " and newline
 * escaped, bytes that are not valid UTF-8 replaced by U+FFFD. 0 or an error of dynbuf_append. */
int tele_prom_escape(struct dynbuf *out, const char *s, size_t len);

#endif
