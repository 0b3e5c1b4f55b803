/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wiring.c - each service's context, built from the daemon's state (core/state.h): what main()
 * (and the tests' fixtures, which build a struct tierd) pass to datasets_open(), hints_new(),
 * stage_registry_new(), jobs_new(), policy_engine_start() and tierfs_mount(). The contexts borrow
 * d's members, so d outlives the services; the daemon makes the members a context copies (the
 * cache, the tenant registry, the pinned metadata, ...) before it builds that context.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "advice/advisor.h"
#include "cache/cache.h"
#include "cache/mrc.h"
#include "daemon/tierd.h"
#include "datasets/dataset.h"
#include "fuse/tierfs.h"
#include "hints/hints.h"
#include "jobs/jobs.h"
#include "lifecycle/lifecycle.h"
#include "qos/sched.h"
#include "stage/stage.h"
#include "telemetry/stall.h"
#include "telemetry/telemetry.h"
#include "tenant/tenant.h"

static int ns_resolve(void *ud, const char *path, struct tierd_ns **ns, char **key, bool *is_root)
{
    return tierd_resolve(ud, path, ns, key, is_root);
}

static int ns_manifest(void *ud, const char *tree, const char *name, size_t max_text,
                       struct manifest *out)
{
    const struct tierd *d = ud;
    if (!d->datasets) /* a test's struct tierd that opened none */
        return -ENOENT;
    return dataset_show_max(d->datasets, tree, name, max_text, out);
}

static bool ns_is_virtual_dir(void *ud, const char *path)
{
    return tierd_is_virtual_dir(ud, path);
}

static void ns_virtual_children(void *ud, const char *path,
                                void (*fn)(const char *name, size_t len, void *arg), void *arg)
{
    tierd_virtual_children(ud, path, fn, arg);
}

struct tierd_ns_ops tierd_ns_ops(struct tierd *d)
{
    return (struct tierd_ns_ops){.resolve = ns_resolve,
                                 .manifest = ns_manifest,
                                 .is_virtual_dir = ns_is_virtual_dir,
                                 .virtual_children = ns_virtual_children,
                                 .ud = d};
}

struct datasets_ctx datasets_ctx_tierd(struct tierd *d)
{
    return (struct datasets_ctx){.ns = d->ns, .nns = d->nns, .ops = tierd_ns_ops(d)};
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
        .warm = d->cfg.cluster_name ? tierd_cluster_warm : NULL,
        .warm_ud = d,
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
 * in flight at the release would pin its block again). Cluster-wide, a block another node owns
 * is warmed there, where that node's job (the Slurm provider admits the job on each of its
 * nodes) pins it by the same rule: each node pins its own share. */
static int d_stage(void *ud, uint32_t tenant, const char *const *paths, size_t n, bool cluster,
                   uint64_t *id)
{
    struct tierd *d = ud;
    if (!d->stages)
        return -ENOSYS;
    return cluster ? stage_start_cluster(d->stages, tenant, paths, n, false, id)
                   : stage_start_for(d->stages, tenant, paths, n, false, id);
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

/* ---- the FUSE mount (fuse/tierfs.h) ------------------------------------------------------ */

struct tierfs_ctx tierfs_ctx_tierd(struct tierd *d)
{
    const struct tierd_config *c = &d->cfg;
    struct tierfs_ctx x = {
        .cache = d->cache,
        .tenants = d->tenants,
        .hints = d->hints,
        .wb = d->wb,
        .pinned = d->pinned,
        .tele = d->tele,
        .datasets = d->datasets,
        .access = d->access,
        .ns = d->ns,
        .nns = d->nns,
        .ops = tierd_ns_ops(d),
        .mounted = &d->mounted,
        .start_ns = d->start_ns,
        .test_fault_file = d->test_fault_file,
        .mount_path = c->mount_path,
        .allow_other = c->allow_other,
        .fuse_threads = c->fuse_threads,
        .attr_ttl_ms = c->attr_ttl_ms,
        .entry_ttl_ms = c->entry_ttl_ms,
        .attr_ttl_set = c->attr_ttl_set,
        .entry_ttl_set = c->entry_ttl_set,
        .mount_uid = c->mount_uid,
        .mount_gid = c->mount_gid,
        .mount_umask = c->mount_umask,
        .max_dir_entries = c->max_dir_entries,
        .splice_writes = c->splice_writes,
        .no_open = c->no_open,
        .api_socket = c->api_socket,
        .counts = d->fuse_counts,
        .version_list_ttl_ms = c->version_list_ttl_ms,
        .readahead_blocks = c->readahead_blocks,
        .readahead_max_bytes = c->readahead_max_bytes,
        .block_size = c->cache.block_size,
        .wb_spool_dir = c->wb_spool_dir,
        .wb_upload_deadline_ms = c->wb_upload_deadline_ms,
    };
    for (size_t i = 0; i < d->nns && i < TIERD_MAX_NAMESPACES; i++)
        for (size_t b = 0; b < c->nbackends; b++)
            if (!strcmp(c->backends[b].name, d->ns[i].conf->backend) &&
                !strcmp(c->backends[b].type, "posix"))
                x.ns_posix_root[i] = c->backends[b].posix.root;
    return x;
}

/* ---- the advice loop (advice/advisor.h, docs/ADVICE.md) ---------------------------------- */

/* The configured cache_quota of tenant name: with auto_quota, a tenant's floor. */
static uint64_t adv_floor(const struct tierd *d, const char *name)
{
    for (size_t i = 0; i < d->cfg.ntenants; i++) {
        const struct tierd_tenant_conf *t = &d->cfg.tenants[i];
        if (!strcmp(t->name, name))
            return t->cache_quota && t->cache_quota != CACHE_QUOTA_NONE ? t->cache_quota : 0;
    }
    return 0;
}

static int adv_tenant(void *ud, uint32_t t, struct advisor_tenant *out)
{
    struct tierd *d = ud;
    if (!d->cache || !d->tenants || !tenant_in_use(d->tenants, t))
        return -ENOENT;
    struct mrc_point pt[CACHE_MRC_SIZES];
    size_t n = 0;
    uint64_t acc = 0;
    if (cache_mrc_curve(d->cache, t, pt, CACHE_MRC_SIZES, &n) != 0 ||
        cache_mrc_demand(d->cache, t, &acc, &out->demand_bytes) != 0)
        return -ENOENT;
    for (size_t k = 0; k < n && k < ADVICE_POINTS_MAX; k++)
        out->curve[k] = (struct advice_point){pt[k].size_bytes, pt[k].hit_ratio};
    out->npoints = n < ADVICE_POINTS_MAX ? n : ADVICE_POINTS_MAX;
    const char *name = tenant_name(d->tenants, t);
    size_t len = strnlen(name, sizeof(out->name) - 1);
    memcpy(out->name, name, len);
    out->name[len] = '\0';
    struct cache_tenant_stats cs;
    if (cache_tenant_stats_get(d->cache, t, &cs) == 0) {
        out->held_bytes = cs.bytes;
        out->quota_bytes = cs.quota ? cs.quota : UINT64_MAX;
    }
    struct sched_qos q;
    out->weight = 1;
    if (d->sched && sched_qos_get(d->sched, t, tenant_class(d->tenants, t), &q) && q.weight)
        out->weight = q.weight;
    out->min_bytes = adv_floor(d, name);
    if (d->tele)
        stall_totals(tele_stall(d->tele), t, &out->wait_ns, &out->compute_ns);
    return 0;
}

static int adv_set_quota(void *ud, uint32_t t, uint64_t bytes)
{
    struct tierd *d = ud;
    return d->cache ? cache_quota_set(d->cache, t, bytes) : -ENOENT;
}

struct advisor_ctx advisor_ctx_tierd(struct tierd *d)
{
    const struct cache_config *cc = &d->cfg.cache;
    uint64_t hot = cc->disk_dir && cc->disk_bytes ? cc->disk_bytes : cc->ram_bytes;
    uint64_t link = 0;
    for (size_t i = 0; i < d->cfg.nbackends; i++)
        if (d->cfg.backends[i].link_capacity_bps &&
            d->cfg.backends[i].link_capacity_bps != TIERD_RATE_NONE)
            link += d->cfg.backends[i].link_capacity_bps;
    int util = d->cfg.advice_target_util ? d->cfg.advice_target_util : 85;
    return (struct advisor_ctx){.max_tenants = cache_max_tenants(d->cache),
                                /* the whole level: pinned blocks are charged to no quota */
                                .hot_bytes = hot,
                                .block_size = cc->block_size ? cc->block_size : (4u << 20),
                                .target_stall = 1.0 - util / 100.0,
                                .link_bps = (double)link,
                                .ud = d,
                                .tenant = adv_tenant,
                                .set_quota = adv_set_quota};
}
