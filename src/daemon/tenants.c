/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenants.c - the daemon's tenant registry built from the config: [tenants] gives its bounds
 * and trust settings (reserved_ids, implicit_per_minute, fallback, slurm_cgroup_root),
 * each [tenant NAME] section (config.c) one tenant with its default class and, when the section
 * has match keys, one rule, added in file order (rules match in that order, tenant/tenant.h).
 * Called by main() at start-up and by the API test fixture; single-threaded.
 */
#include <errno.h>
#include <stddef.h>

#include "common/err.h"
#include "common/strutil.h"
#include "daemon/tierd.h"
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
