/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stage.h - staging jobs: fetch every block of every file under some mount paths into the hot
 * tier (optionally pinned) ahead of a job, with parallel workers. Called by the control API.
 *
 * A job lists the paths recursively, then stat()s and fetches each file's blocks with
 * cfg.stage_threads workers through cache_fetch_block() (class TIER_IO_BACKGROUND). Blocks
 * already cached cost nothing, so a re-run is idempotent and a killed run resumes where the
 * cache stopped. Jobs are kept in a registry the daemon owns (thread-safe).
 */
#ifndef TIER_STAGE_STAGE_H
#define TIER_STAGE_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ns.h"

struct cache;
struct cache_obj;
struct pinmeta;
struct tier_ioctx;
struct stage_registry;

enum stage_state { STAGE_RUNNING = 0, STAGE_DONE = 1, STAGE_FAILED = 2 };

struct stage_progress {
    enum stage_state state;
    bool listing_done; /* files_total/bytes_total are final */
    uint64_t files_total, files_done;
    uint64_t bytes_total, bytes_done;
    uint64_t bytes_already_cached; /* found cached when the job reached them */
    uint64_t bytes_on_peers;       /* of bytes_done: warmed on the nodes that own them */
    uint64_t errors;
    char first_error[256]; /* "path: message" of the first failure */
    uint64_t elapsed_ns;
    uint32_t tenant; /* whose job (stage_start_for) */
};

/* What the registry uses, all borrowed for its life (built by main(): stage_ctx_tierd() in
 * src/daemon/wiring.c). */
struct stage_ctx {
    struct cache *cache;     /* where the blocks go */
    struct pinmeta *pinned;  /* pinned objects' attributes are noted here; NULL: none kept */
    struct tierd_ns_ops ops; /* mount paths and dataset versions */
    int threads;             /* fetch workers of one job ([daemon] stage_threads); <= 0: 8 */
    int max_jobs;            /* running jobs before stage_start fails ([api] max_stage_jobs);
                              * <= 0: no bound */
    /* A cluster's warm-up (stage_start_cluster, docs/CLUSTER.md): block index of obj fetched
     * into the cache of the node that owns it, when that is another node. 0, or -EAGAIN: fetch
     * it here (this node owns it, or the owner could not). NULL: in no cluster. */
    int (*warm)(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj, uint64_t index);
    void *warm_ud;
};

int stage_registry_new(const struct stage_ctx *ctx, struct stage_registry **out);
/* Waits for running jobs to stop (they are cancelled), then frees. NULL is a no-op. */
void stage_registry_free(struct stage_registry *r);

/* Start a job over mount paths ("/datasets/imagenet"); returns its id at once.
 * -ENOENT if a path resolves to no namespace; -EBUSY (with a message) while [api] max_stage_jobs
 * jobs are running (0: no limit). */
int stage_start(struct stage_registry *r, const char *const *paths, size_t npaths, bool pin,
                uint64_t *job_id);
/* The same for a tenant: every stat, listing and block fetch of the job is class background of
 * tenant (its QoS share and telemetry), and the blocks it caches are charged to tenant's hot-tier
 * space (cache.h, quotas; pinned ones are not). stage_start is this for the default tenant. */
int stage_start_for(struct stage_registry *r, uint32_t tenant, const char *const *paths,
                    size_t npaths, bool pin, uint64_t *job_id);
/* stage_start_for over a cluster (`tierctl stage --cluster`): each block is fetched once, by
 * the node that owns it (ctx.warm), this node fetching and pinning only its own share (pins and
 * quotas stay per node). -ENOTSUP (with a message) when ctx.warm is NULL. */
int stage_start_cluster(struct stage_registry *r, uint32_t tenant, const char *const *paths,
                        size_t npaths, bool pin, uint64_t *job_id);
/* Stop a running job (job admission releases a job whose staging still runs): it ends FAILED
 * with "staging cancelled"; a worker finishes the block it is fetching first. 0 (also for a
 * finished job) or -ENOENT. */
int stage_cancel(struct stage_registry *r, uint64_t job_id);
/* Running jobs staging for tenant (stage_start_for): their reads are charged to it. Reclaim asks
 * it (tenant.h). */
size_t stage_tenant_running(struct stage_registry *r, uint32_t tenant);
/* -ENOENT for an unknown id. */
int stage_progress_get(struct stage_registry *r, uint64_t job_id, struct stage_progress *p);

#endif
