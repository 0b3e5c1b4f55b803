/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tierd.h - what only the daemon's own files (src/daemon: main.c, config.c, resolve.c, tenants.c,
 * cluster.c, wiring.c) and the tests' fixtures share beyond core/state.h, which holds the state the
 * other layers see. No file outside src/daemon includes it (scripts/check-layers.sh).
 */
#ifndef TIER_DAEMON_TIERD_H
#define TIER_DAEMON_TIERD_H

#include "core/state.h"
#include "advice/advisor.h"
#include "lifecycle/lifecycle.h"

struct tenant_reg;
struct hints_ctx;
struct stage_ctx;
struct jobs_ops;
struct datasets_ctx;
struct tierfs_ctx;

/* The tenant registry of cfg: [tenants] limits, then every [tenant NAME] in order (its rule, if
 * it has match keys). 0, or -errno with tier_err_msg() naming the section. */
int tierd_tenants_open(const struct tierd_config *cfg, struct tenant_reg **out);
/* Reclaim in tierd (tenants.c): r's hooks (tenant.h) ask d's cache, schedulers and hints what a
 * tenant holds, and fold a reclaimed one's telemetry into "retired". Set once every holder
 * exists, before the mount. tierd_tenant_holds is the busy hook (for tests). */
void tierd_tenants_reclaim_hooks(struct tierd *d, struct tenant_reg *r);
bool tierd_tenant_holds(void *d, uint32_t id);
/* The tenant of process pid as its reads would be charged, when that tenant exists
 * (tenant_lookup with its filesystem uid and gid from /proc/<pid>/status, tenant_parse_status):
 * the GPU sampler's tenant_of (telemetry/gpu.h), reg a struct tenant_reg. Creates and touches
 * no tenant. 0; -ESRCH (the process is gone, or its status unreadable or malformed); -ENOENT
 * (its tenant would be a new implicit one). */
int tierd_tenant_of_pid(void *reg, uint32_t pid, uint32_t *tenant);

/* cluster.c: with a [cluster] section, connects to RADOS and joins the cluster (d->member); 0
 * (also without the section), or -errno with tier_err_msg() naming what failed. The close
 * leaves the cluster and disconnects; a no-op without a member. */
int tierd_cluster_open(struct tierd *d);
/* stage_ctx.warm (stage.h) of a daemon with a [cluster] section: block index of obj warmed in
 * the cache of the node that owns it. 0, or -EAGAIN (this node owns it, it is fenced, the
 * owner failed, or the cluster is not up). */
int tierd_cluster_warm(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                       uint64_t index);
void tierd_cluster_close(struct tierd *d);

/* wiring.c: each service's context over d (borrowing d's members; d outlives the service). */
/* tierd_resolve, dataset_show_max (of d->datasets), tierd_is_virtual_dir, tierd_virtual_children */
struct tierd_ns_ops tierd_ns_ops(struct tierd *d);
struct datasets_ctx datasets_ctx_tierd(struct tierd *d);
struct hints_ctx hints_ctx_tierd(struct tierd *d);
struct stage_ctx stage_ctx_tierd(struct tierd *d);
/* The job registry's ops over d (its cache, stager and config). */
struct jobs_ops jobs_ops_tierd(struct tierd *d);
/* The policy engine's context over d, its rules from conf (the caller's view of d->cfg:
 * tierd_policy_view_of), which policy_engine_start reads and does not keep. */
struct policy_engine_ctx policy_engine_ctx_tierd(struct tierd *d, const struct policy_conf *conf);
/* The mount's context over d: after every service it calls is open and the policies have set
 * d->access (main.c's step_mount). */
struct tierfs_ctx tierfs_ctx_tierd(struct tierd *d);
/* The advice loop's context over d (its cache's curves and quotas, tenants, QoS weights). */
struct advisor_ctx advisor_ctx_tierd(struct tierd *d);

/* The slice of a config the lifecycle rules read (struct policy_conf), with the arrays it points
 * into; its strings are the config's (valid while it is). config.c. */
struct tierd_policy_view {
    struct policy_conf conf;
    struct policy_section sections[TIERD_MAX_POLICIES];
    struct policy_kv kv[TIERD_MAX_POLICIES * TIERD_POLICY_MAX_KEYS];
    const char *backends[TIERD_MAX_BACKENDS];
};
void tierd_policy_view_of(const struct tierd_config *cfg, struct tierd_policy_view *v);
/* policy_rules_build_conf (lifecycle.h) over the slice of cfg: for the callers that hold a whole
 * config (config.c's load, the tests, the bench). config.c. */
int policy_rules_build(const struct tierd_config *cfg, struct policy_rules *out, char *err,
                       size_t errsz, int *err_line);

#endif
