/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wiring.c - each service's context, built from the daemon's state (core/state.h): what main()
 * (and the tests' fixtures, which build a struct tierd) pass to hints_new(),
 * stage_registry_new(), jobs_new() and policy_engine_start(). The contexts borrow d's members, so d
 * outlives the services; the daemon makes d->cache, d->tenants and d->pinned before it calls these.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cache/cache.h"
#include "daemon/tierd.h"
#include "datasets/dataset.h"
#include "hints/hints.h"
#include "jobs/jobs.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"

static int ns_resolve(void *ud, const char *path, struct tierd_ns **ns, char **key, bool *is_root)
{
    return tierd_resolve(ud, path, ns, key, is_root);
}

static int ns_manifest(void *ud, const char *tree, const char *name, size_t max_text,
                       struct manifest *out)
{
    return dataset_show_max(ud, tree, name, max_text, out);
}

struct tierd_ns_ops tierd_ns_ops(struct tierd *d)
{
    return (struct tierd_ns_ops){.resolve = ns_resolve, .manifest = ns_manifest, .ud = d};
}

struct hints_ctx hints_ctx_tierd(struct tierd *d)
{
    const struct cache_config *cc = &d->cfg.cache;
    return (struct hints_ctx){
        .cache = d->cache,
        .tenants = d->tenants,
        .ns = d->ns,
        .nns = d->nns,
        .ops = tierd_ns_ops(d),
        .test_fault_file = d->test_fault_file,
        .threads = d->cfg.hints_threads,
        .window_files = d->cfg.hints_window_files,
        .window_bytes = d->cfg.hints_window_bytes,
        .cache_bytes = d->cfg.hints_cache_bytes,
        .hot_bytes =
            cc->disk_dir && cc->disk_bytes > cc->ram_bytes ? cc->disk_bytes : cc->ram_bytes,
        .tenant_sets = d->cfg.hints_tenant_sets,
        .tenant_entries = d->cfg.hints_tenant_entries,
        .tenant_bytes = d->cfg.hints_tenant_bytes,
        .state_bytes = d->cfg.hints_state_bytes,
    };
}

struct stage_ctx stage_ctx_tierd(struct tierd *d)
{
    return (struct stage_ctx){
        .cache = d->cache,
        .pinned = d->pinned,
        .ops = tierd_ns_ops(d),
        .threads = d->cfg.stage_threads,
        .max_jobs = d->cfg.api_max_stage_jobs,
    };
}

/* ---- jobs: the daemon's ops (jobs.h) ----------------------------------------------------- */

static void d_space(void *ud, uint64_t *level, uint64_t *pin_budget, uint64_t *pinned)
{
    struct tierd *d = ud;
    struct cache_stats st;
    memset(&st, 0, sizeof(st));
    if (d->cache)
        cache_stats_get(d->cache, &st);
    *level = st.disk.bytes_budget ? st.disk.bytes_budget : st.ram.bytes_budget;
    *pin_budget = st.pin_budget;
    *pinned = st.pinned_bytes;
}

static uint64_t d_link_capacity(void *ud, const char *backend)
{
    struct tierd *d = ud;
    for (size_t i = 0; i < d->cfg.nbackends; i++)
        if (!strcmp(d->cfg.backends[i].name, backend))
            return d->cfg.backends[i].link_capacity_bps == TIERD_RATE_NONE
                       ? 0
                       : d->cfg.backends[i].link_capacity_bps;
    return 0;
}

static int d_pin(void *ud, const char *backend, const char *prefix)
{
    struct tierd *d = ud;
    return d->cache ? cache_pin(d->cache, backend, prefix) : -ENOSYS;
}

static int d_unpin(void *ud, const char *backend, const char *prefix)
{
    struct tierd *d = ud;
    return d->cache ? cache_unpin(d->cache, backend, prefix) : -ENOSYS;
}

static bool d_pin_exists(void *ud, const char *backend, const char *prefix)
{
    struct tierd *d = ud;
    return d->cache && cache_pin_exists(d->cache, backend, prefix);
}

/* Staged unpinned: the job's pin rules pin each block as it is fetched, and go with the
 * release, so that no explicit pin outlives the job (cache_unpin clears those too, but a fetch
 * in flight at the release would pin its block again). */
static int d_stage(void *ud, uint32_t tenant, const char *const *paths, size_t n, uint64_t *id)
{
    struct tierd *d = ud;
    return d->stages ? stage_start_for(d->stages, tenant, paths, n, false, id) : -ENOSYS;
}

static int d_stage_progress(void *ud, uint64_t id, struct stage_progress *p)
{
    struct tierd *d = ud;
    return d->stages ? stage_progress_get(d->stages, id, p) : -ENOENT;
}

static int d_cancel(void *ud, uint64_t id)
{
    struct tierd *d = ud;
    return d->stages ? stage_cancel(d->stages, id) : -ENOENT;
}

struct jobs_ops jobs_ops_tierd(struct tierd *d)
{
    return (struct jobs_ops){.space = d_space,
                             .link_capacity = d_link_capacity,
                             .pin = d_pin,
                             .unpin = d_unpin,
                             .pin_exists = d_pin_exists,
                             .stage = d_stage,
                             .stage_progress = d_stage_progress,
                             .cancel = d_cancel,
                             .ud = d};
}

/* ---- lifecycle policies (lifecycle.h) ---------------------------------------------------- */

struct policy_engine_ctx policy_engine_ctx_tierd(struct tierd *d, const struct policy_conf *conf)
{
    return (struct policy_engine_ctx){
        .conf = conf,
        .interval_ms = d->cfg.policy_interval_ms,
        .part_size = d->cfg.wb_part_size,
        .state_path = d->cfg.policy_state,
        .spool_dir = d->cfg.wb_spool_dir,
        .backends = d->backends,
        .nbackends = d->cfg.nbackends,
        .ns = d->ns,
        .nns = d->nns,
        .ops = tierd_ns_ops(d),
        .cache = d->cache,
        .wb = d->wb,
        .pinned = d->pinned,
        .stages = d->stages,
        .tenants = d->tenants,
        .access = &d->access,
    };
}
