/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobs.h - admission of scheduler jobs (POST/GET/DELETE /v1/jobs): a job reserves hot-tier
 * space and backend bandwidth, waits in a FIFO queue while they are not free, and once admitted
 * has its stage paths pinned and staged into the hot tier until it is released. Called by the
 * control API (src/api/api_jobs.c); the registry is in memory only (a restart forgets every job:
 * docs/ARCHITECTURE.md, "Job admission").
 *
 * The registry does not touch the cache, the stager or the config itself: it calls a struct
 * jobs_ops (capacity figures, pin/unpin, start staging, read staging progress), so that the
 * capacity model and the queue are tested with fakes (tests/unit/test_jobs.c);
 * jobs_ops_tierd() (src/daemon/wiring.c) gives the daemon's.
 *
 * Thread-safe: one mutex guards the registry; the ops are called with it held, except ops.stage,
 * and must not call back into the registry (the daemon's take the cache's and the stager's own
 * locks). ops.stage does backend I/O (a stat and a listing per stage path), so it is called with
 * the mutex dropped (jobs.c, Locking).
 */
#ifndef TIER_JOBS_JOBS_H
#define TIER_JOBS_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ioctx.h"
#include "stage/stage.h"

struct jobs;

#define JOBS_ID_MAX 64    /* a job id is 1 to 63 bytes of [A-Za-z0-9._-], the first alphanumeric */
#define JOBS_PATHS_MAX 64 /* stage and stage_out paths per job, each */
#define JOBS_MAX 4096     /* jobs admitted and queued together */

/* What the registry needs of the daemon. ud is jobs_ops.ud. */
struct jobs_ops {
    /* The hot tier's space: the level jobs reserve in (the disk level's budget, RAM's without
     * one), the pin budget ([cache] pin_size) and the bytes pinned now (cache_stats). */
    void (*space)(void *ud, uint64_t *level_bytes, uint64_t *pin_budget, uint64_t *pinned_bytes);
    /* The configured link capacity of a backend in bytes/s ([backend] link_capacity); 0: none. */
    uint64_t (*link_capacity)(void *ud, const char *backend);
    /* cache_pin / cache_unpin of one (backend, key prefix) rule; 0 or -errno. */
    int (*pin)(void *ud, const char *backend, const char *prefix);
    int (*unpin)(void *ud, const char *backend, const char *prefix);
    /* Does the cache have the rule already (pinned by hand: jobs then never unpin it)? NULL: no. */
    bool (*pin_exists)(void *ud, const char *backend, const char *prefix);
    /* Start staging paths for tenant, cluster-wide with cluster (stage_start_cluster: this node
     * fetches its own share of the blocks and warms the others on their owners); 0 and
     * *stage_id, or -errno (-EBUSY: the stager is full, retried later). Called without the
     * registry's mutex: it does backend I/O. */
    int (*stage)(void *ud, uint32_t tenant, const char *const *paths, size_t n, bool cluster,
                 uint64_t *stage_id);
    /* The progress of a staging started by stage; 0 or -ENOENT. */
    int (*stage_progress)(void *ud, uint64_t stage_id, struct stage_progress *p);
    /* Stop a staging (the job is released while it runs); NULL: not needed. */
    int (*cancel)(void *ud, uint64_t stage_id);
    void *ud;
};

/* One stage path, resolved by the caller: the mount path and the (backend, key prefix) rule it
 * stands for (the namespace prefix for a namespace root, the key of a file, "key/" for a
 * directory). */
struct jobs_path {
    const char *path;
    const char *backend;
    const char *prefix;
};

/* A request as POST /v1/jobs gives it, validated by the caller (names, sizes, paths). */
struct jobs_request {
    const char *id;
    uint32_t tenant;
    const char *tenant_name;
    enum tier_io_class cls;
    uint64_t cache_bytes;
    uint64_t bandwidth_bps; /* 0: none asked */
    const struct jobs_path *stage;
    size_t nstage;
    const char *const *stage_out; /* recorded only */
    size_t nstage_out;
    /* Stage cluster-wide (ops.stage's cluster). Not part of the request's identity: a retry
     * with another value answers the job as it stands. */
    bool cluster;
};

enum jobs_state { JOBS_QUEUED = 0, JOBS_ADMITTED = 1 };
enum jobs_staging {
    JOBS_STAGING_PENDING = 0, /* queued, or admitted and waiting to stage: nothing staged yet */
    JOBS_STAGING_RUNNING = 1,
    JOBS_STAGING_DONE = 2,
    JOBS_STAGING_FAILED = 3,
    JOBS_STAGING_NONE = 4, /* admitted with no stage paths */
};

/* A job as GET shows it: a copy, valid until jobs_info_fini(). */
struct jobs_info {
    char id[JOBS_ID_MAX];
    char tenant_name[64];
    uint32_t tenant;
    enum tier_io_class cls;
    enum jobs_state state;
    size_t position;  /* 1-based queue position when queued; 0 when admitted */
    char reason[256]; /* why it is queued; admitted: why its staging waits (else "") */
    uint64_t cache_bytes, bandwidth_bps;
    char **stage, **stage_out; /* mount paths */
    size_t nstage, nstage_out;
    enum jobs_staging staging;
    uint64_t stage_id; /* the staging job (GET /v1/stage/ID); 0: none */
    uint64_t staged_bytes, stage_total_bytes;
    uint64_t staged_on_peers;           /* of staged_bytes: warmed on their owners (cluster) */
    bool cluster;                       /* its staging is cluster-wide (jobs_request.cluster) */
    char stage_error[256];              /* when staging failed */
    uint64_t submitted_ns, admitted_ns; /* realtime; admitted 0 while queued */
};
void jobs_info_fini(struct jobs_info *ji);

/* The capacity model as GET /v1/jobs shows it. */
struct jobs_capacity {
    uint64_t level_bytes, pin_budget, pinned_bytes;
    uint64_t jobs_pinned_bytes; /* of pinned_bytes, the admitted jobs' bytes staged here, not
                                 * warmed on peers (estimate) */
    uint64_t capacity_bytes;    /* min(level, pin budget) - pins outside jobs */
    uint64_t reserved_bytes;    /* admitted jobs' cache_bytes */
    uint64_t reservable_bytes;  /* capacity - reserved */
    size_t admitted, queued;
};

int jobs_new(const struct jobs_ops *ops, struct jobs **out);
/* Unpins what jobs hold (tierd stops). NULL is a no-op. */
void jobs_free(struct jobs *j);

/* The outcome of jobs_submit. */
enum jobs_verdict {
    JOBS_ADMIT = 0,   /* admitted (now, or already: a retry) */
    JOBS_QUEUE = 1,   /* queued (now, or already) */
    JOBS_REJECT = 2,  /* can never fit: nothing recorded */
    JOBS_CONFLICT = 3 /* the id exists with another request: nothing changed */
};

/* Admit, queue or reject a request (copied); -EINVAL for stage paths with cache_bytes 0. A retry of
 * the same request under the same id answers the job's verdict as it stands. *info (always filled
 * but on -errno, then untouched) is the job, or for REJECT/CONFLICT the reason in info->reason.
 * -ENOSPC: JOBS_MAX jobs; -ENOMEM. */
int jobs_submit(struct jobs *j, const struct jobs_request *rq, enum jobs_verdict *verdict,
                struct jobs_info *info);
/* Would jobs_submit(rq) answer JOBS_REJECT or JOBS_CONFLICT (the reason in reason)? Else
 * JOBS_ADMIT: go on. Changes nothing; rq->tenant is not looked at (tenant_name is), so that the
 * caller registers a new tenant only for a request that is not refused. */
enum jobs_verdict jobs_precheck(struct jobs *j, const struct jobs_request *rq, char *reason,
                                size_t rsz);
/* Release a job (admitted: unpin, free its reservation; queued: leave the queue), then admit the
 * queue's head jobs that fit now. *info (may be NULL) is the job as it was. 0 or -ENOENT. */
int jobs_release(struct jobs *j, const char *id, struct jobs_info *info);
/* One job; 0 or -ENOENT. */
int jobs_get(struct jobs *j, const char *id, struct jobs_info *info);
/* Every job, admitted ones first (in admission order), then the queue in order: *out is a
 * malloc'd array of *n (free with jobs_list_free). Also fills *cap when not NULL. */
int jobs_list(struct jobs *j, struct jobs_info **out, size_t *n, struct jobs_capacity *cap);
void jobs_list_free(struct jobs_info *v, size_t n);

/* Is s a valid job id? */
bool jobs_id_valid(const char *s);
const char *jobs_state_name(enum jobs_state s);
const char *jobs_staging_name(enum jobs_staging s);

#endif
