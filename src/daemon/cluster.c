/* SPDX-License-Identifier: Apache-2.0 */
/* cluster.c - the daemon's [cluster] membership (docs/CLUSTER.md): a RADOS client on the
 * section's ceph.conf and cephx user, the pool's ioctx, and member_join() (cluster/member.h) as
 * the node the section names. d->member is what the control API reads (GET /v1/cluster). In a
 * build without librados the config refuses a [cluster] section, so there is nothing to join. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "daemon/tierd.h"

#ifdef TIER_HAVE_RADOS
#include <rados/librados.h>

#include "cluster/member.h"

struct cluster_conn {
    rados_t rados;
    rados_ioctx_t io;
};

static void conn_free(struct cluster_conn *cc)
{
    if (!cc)
        return;
    if (cc->io)
        rados_ioctx_destroy(cc->io);
    if (cc->rados)
        rados_shutdown(cc->rados);
    free(cc);
}

/* The RADOS client and the pool's ioctx: 0, or -errno with tier_err_msg() naming what failed. */
static int conn_open(const struct tierd_config *c, struct cluster_conn **out)
{
    struct cluster_conn *cc = calloc(1, sizeof(*cc));
    if (!cc) {
        tier_err_set("[cluster]: out of memory");
        return -ENOMEM;
    }
    int rc = rados_create(&cc->rados, c->cluster_user);
    if (rc < 0) {
        tier_err_set("[cluster]: cannot create a RADOS client for user '%s': %s", c->cluster_user,
                     strerror(-rc));
        free(cc);
        return rc;
    }
    rc = rados_conf_read_file(cc->rados, c->cluster_ceph_conf);
    if (rc < 0) {
        tier_err_set("[cluster] ceph_conf = '%s' cannot be read: %s", c->cluster_ceph_conf,
                     strerror(-rc));
        goto fail;
    }
    if (c->cluster_keyring && (rc = rados_conf_set(cc->rados, "keyring", c->cluster_keyring)) < 0) {
        tier_err_set("[cluster] keyring = '%s': %s", c->cluster_keyring, strerror(-rc));
        goto fail;
    }
    /* bounded waits: a cluster that does not answer fails the start, never hangs it */
    rados_conf_set(cc->rados, "client_mount_timeout", "60");
    rados_conf_set(cc->rados, "rados_osd_op_timeout", "60");
    rados_conf_set(cc->rados, "rados_mon_op_timeout", "60");
    rc = rados_connect(cc->rados);
    if (rc < 0) {
        tier_err_set("[cluster]: cannot connect to Ceph (%s, user client.%s): %s",
                     c->cluster_ceph_conf, c->cluster_user, strerror(-rc));
        goto fail;
    }
    rc = rados_ioctx_create(cc->rados, c->cluster_pool, &cc->io);
    if (rc < 0) {
        if (rc == -ENOENT)
            tier_err_set("[cluster] pool = '%s' does not exist: create it with `ceph osd pool "
                         "create %s`",
                         c->cluster_pool, c->cluster_pool);
        else
            tier_err_set("[cluster] pool = '%s' cannot be opened: %s", c->cluster_pool,
                         strerror(-rc));
        cc->io = NULL;
        goto fail;
    }
    *out = cc;
    return 0;
fail:
    conn_free(cc);
    return rc;
}

int tierd_cluster_open(struct tierd *d)
{
    const struct tierd_config *c = &d->cfg;
    if (!c->cluster_name)
        return 0;
    struct cluster_conn *cc = NULL;
    int rc = conn_open(c, &cc);
    if (rc)
        return rc;
    struct member_conf mc = {.cluster = c->cluster_name,
                             .id = c->cluster_node_id,
                             .addr = c->cluster_address ? c->cluster_address : "",
                             .weight = c->cluster_weight_val,
                             .lease_ms = (uint32_t)c->cluster_lease_ms};
    rc = member_join(cc->io, &mc, &d->member);
    /* -EBUSY: the lock of this node id is held. After a crash it is this node's previous run's
     * until its lease lapses, so a restart waits that long (and a half) before it gives up. */
    uint64_t until = tier_now_mono_ns() + (uint64_t)mc.lease_ms * 3 / 2 * TIER_NS_PER_MS;
    if (rc == -EBUSY)
        log_info("cluster: node '%s' of '%s' is locked: waiting up to %u ms for a previous run's "
                 "lease to lapse",
                 mc.id, mc.cluster, mc.lease_ms * 3 / 2);
    while (rc == -EBUSY && tier_now_mono_ns() < until) {
        tier_sleep_ms(500); /* polling the lock, not a synchronisation */
        rc = member_join(cc->io, &mc, &d->member);
    }
    if (rc) {
        if (rc == -EBUSY)
            tier_err_set("[cluster]: node '%s' is already a member of cluster '%s': another tierd "
                         "holds its lock (give each node its own node_id), or this node's previous "
                         "run still did after %u ms",
                         c->cluster_node_id, c->cluster_name, mc.lease_ms * 3 / 2);
        else
            tier_err_set("[cluster]: cannot join cluster '%s' in pool '%s' as '%s': %s",
                         c->cluster_name, c->cluster_pool, c->cluster_node_id, strerror(-rc));
        d->member = NULL;
        conn_free(cc);
        return rc;
    }
    d->cluster_conn = cc;
    log_info("cluster: joined '%s' as '%s' (pool %s, weight %g)", c->cluster_name,
             c->cluster_node_id, c->cluster_pool, c->cluster_weight_val);
    return 0;
}

void tierd_cluster_close(struct tierd *d)
{
    member_leave(d->member);
    d->member = NULL;
    conn_free(d->cluster_conn);
    d->cluster_conn = NULL;
}

#else

int tierd_cluster_open(struct tierd *d)
{
    return d->cfg.cluster_name ? -ENOTSUP : 0; /* the config refuses [cluster] in this build */
}

void tierd_cluster_close(struct tierd *d)
{
    (void)d;
}

#endif
