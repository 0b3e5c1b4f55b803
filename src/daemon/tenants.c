/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenants.c - the daemon's tenant registry built from the config: [tenants] gives its bounds
 * and trust settings (reserved_ids, implicit_per_minute, fallback, slurm_cgroup_root,
 * idle_reclaim), each [tenant NAME] section (config.c) one tenant with its default class and, when
 * the section has match keys, one rule, added in file order (rules match in that order,
 * tenant/tenant.h). Called by main() at start-up and by the API test fixture; single-threaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/strutil.h"
#include "lifecycle/access.h"
#include "hints/hints.h"
#include "daemon/tierd.h"
#include "qos/sched.h"
#include "stage/stage.h"
#include "telemetry/telemetry.h"
#include "writeback/wb.h"
#include "tenant/tenant.h"

int tierd_tenants_open(const struct tierd_config *cfg, struct tenant_reg **out)
{
    struct tenant_reg_config rc_cfg = {
        .max_tenants = (unsigned)cfg->max_tenants,
        .pid_cache_max = (unsigned)cfg->tenant_pid_cache,
        .proc_root = "/proc",
        .reserved_ids = cfg->tenant_reserved_ids == TIERD_RESERVED_IDS_UNSET
                            ? (unsigned)(cfg->max_tenants / 4)
                            : (unsigned)cfg->tenant_reserved_ids,
        .implicit_per_minute = (unsigned)cfg->tenant_implicit_per_minute,
        .fallback_default = cfg->tenant_fallback_default,
        .slurm_cgroup_root = cfg->tenant_slurm_cgroup_root,
        .idle_reclaim_s = (cfg->tenant_idle_reclaim_ms + 999) / 1000,
    };
    struct tenant_reg *r = NULL;
    int rc = tenant_reg_new(&rc_cfg, &r);
    if (rc)
        return rc;
    for (size_t i = 0; i < cfg->ntenants; i++) {
        const struct tierd_tenant_conf *t = &cfg->tenants[i];
        struct tenant_rule rule = {
            .tenant = t->name,
            .cls = t->cls,
            .slurm_job = t->slurm_job,
            .cgroup_prefix = t->cgroup,
            .has_uid = t->uid >= 0,
            .uid = t->uid >= 0 ? (uid_t)t->uid : 0,
            .has_gid = t->gid >= 0,
            .gid = t->gid >= 0 ? (gid_t)t->gid : 0,
        };
        rc = tenant_add(r, t->name, t->cls, &rule, NULL); /* no match key: no rule */
        if (rc) {
            /* the config loader checked names, keys and the cap: only memory is left */
            char why[256];
            tier_strlcpy(why, *tier_err_msg() ? tier_err_msg() : "out of memory", sizeof(why));
            tier_err_set("%s:%d: [tenant %s] cannot be registered: %s", cfg->file, t->conf_line,
                         t->name, why);
            tenant_reg_free(r);
            return rc;
        }
    }
    *out = r;
    return 0;
}

/* Reclaim (tenant.h): what an implicit tenant may hold that its id's next tenant must not
 * inherit: hot-tier bytes (its quota charge, hinted blocks included), hint sets, QoS parameters
 * of its own, calls queued in a lane, running staging jobs or write-back files not uploaded. While
 * it holds any, it is not reclaimed. Pinned blocks are charged to nobody. */
bool tierd_tenant_holds(void *ud, uint32_t id)
{
    struct tierd *d = ud;
    struct cache_tenant_stats cs;
    /* a quota other than the default is the administrator's word for this tenant (PUT /v1/qos) */
    if (d->cache && cache_tenant_stats_get(d->cache, id, &cs) == 0 &&
        (cs.bytes || cs.blocks ||
         cs.quota !=
             (d->cfg.cache.default_quota == CACHE_QUOTA_NONE ? 0 : d->cfg.cache.default_quota)))
        return true;
    if ((d->sched && sched_tenant_busy(d->sched, id)) ||
        (d->disk_sched && sched_tenant_busy(d->disk_sched, id)))
        return true;
    /* one count under the engine's lock: a list sized by one call and filled by another could
     * meet a set created in between */
    if (d->hints && hints_tenant_sets(d->hints, id) > 0)
        return true;
    /* staging jobs it runs: their reads are charged to it */
    if (d->stages && stage_tenant_running(d->stages, id) > 0)
        return true;
    /* write-back files it wrote and that are not uploaded yet: their uploads run as it */
    return d->wb && wb_tenant_pending(d->wb, id) > 0;
}

/* Reclaim: id's telemetry and quota-eviction counters into "retired", its dmClock clients reset,
 * its reads forgotten by the policies' log (called at retirement and again before the id's reuse:
 * what came in between). */
static void tenant_retire(void *ud, uint32_t id)
{
    struct tierd *d = ud;
    (void)tele_tenant_fold(d->tele, id, TENANT_RETIRED_ID);
    if (d->cache)
        (void)cache_tenant_fold(d->cache, id, TENANT_RETIRED_ID);
    if (d->sched)
        (void)sched_tenant_forget(d->sched, id);
    if (d->disk_sched)
        (void)sched_tenant_forget(d->disk_sched, id);
    access_forget_tenant(d->access, id);
}

void tierd_tenants_reclaim_hooks(struct tierd *d, struct tenant_reg *r)
{
    tenant_reclaim_hooks_set(r, &(struct tenant_reclaim_hooks){
                                    .busy = tierd_tenant_holds, .retire = tenant_retire, .ud = d});
}

int tierd_tenant_of_pid(void *reg, uint32_t pid, uint32_t *tenant)
{
    char path[48], buf[4096];
    if (pid == 0 || pid > INT32_MAX)
        return -ESRCH;
    snprintf(path, sizeof(path), "/proc/%u/status", (unsigned)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -ESRCH;
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    uid_t uid = 0;
    gid_t gid = 0;
    if (n <= 0 || tenant_parse_status(buf, (size_t)n, &uid, &gid) != 0)
        return -ESRCH;
    /* a lookup: an observed process whose tenant does not exist yet creates none */
    return tenant_lookup(reg, (pid_t)pid, uid, gid, tenant) == 0 ? 0 : -ENOENT;
}
