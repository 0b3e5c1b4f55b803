/* SPDX-License-Identifier: Apache-2.0 */
/* cluster.c - the daemon's [cluster] (docs/CLUSTER.md): membership and peer reads.
 *
 * Start (tierd_cluster_open, the start-up step `cluster`): the secret; the peer client and the
 * router (cluster/router.h) over this node's view of the members; the peer endpoint on
 * `address` (share = yes), whose blocks come from the cache; a RADOS client on the section's
 * ceph.conf and cephx user, the pool's ioctx, and member_join() (cluster/member.h); last the
 * cache's peer source (cache_set_peer_source), from then on every block the cache would fetch
 * from an S3 backend goes to the router first. The endpoint starts before the join, so a peer
 * that sees this node can reach it (until the join it answers 503: may_serve is false).
 *
 * A block served to a peer is read with cache_read() on the endpoint's thread with `serving`
 * set: that thread's loads ask other nodes only for a copy they hold (a handover, cached_only:
 * they never fetch for it), so no request travels on between nodes whose views differ. A
 * handover asked of this node is answered only from a copy it holds.
 *
 * QoS of peer traffic (docs/CLUSTER.md "Peer traffic and QoS"), on both ends. Asking: every peer
 * request of this node enters the scheduler lane `peers` (d->peer_lane: [cluster] peer_inflight
 * in flight, the request's total bound as admission deadline, no breaker: the router skips
 * failing peers) under the reader's tenant and class before it is sent (the router's admit
 * hook), and the request carries the class (q=). Serving: the endpoint reads every block as the
 * tenant `peers` (d->peer_tenant) in the asker's class (a warm: background), so on this node's
 * backend and disk lanes the peers are one dmClock client per class, set like any tenant's.
 *
 * Waits through the `peers` lane. Only a thread that is not serving a peer waits for a slot, and
 * only for a request that is no handover: a fetch or a warm of a block another node owns (the
 * router gives a handover, which every request made while serving is, may_wait false:
 * sched_lane_try_enter, granted now or sent to the backend), so an endpoint thread never waits
 * on a lane itself. A slot is held by a request in flight, which the peer's endpoint thread
 * serves from its cache: a hit, or a load of the block it starts or joins. For a block the peer
 * owns, every load of it there asks other nodes only for a handover, so the chain of waits from
 * the slot ends one node away at a backend or a cache, and no cycle can pass through it. For a
 * block the peer serves without owning it (router_serves_for: a spill, a skipped owner's next
 * choice), the load it joins may be one of its own readers' fetches waiting for a slot of its
 * own `peers` lane; per block such chains climb the block's order to its owner, but a lane is
 * shared by all blocks, so two nodes spilling to each other with both lanes full could wait on
 * each other. That wait is bounded, never a deadlock: an admission wait ends at the request's
 * total bound (the block then goes to the backend, counted `admission`), and every request at
 * its own (the asker then reads the backend). docs/CLUSTER.md "Peer traffic and QoS".
 *
 * d->member, d->router, d->peer_client and d->peer_server are what the control API reads
 * (GET /v1/cluster). In a build without librados the config refuses a [cluster] section, so
 * there is nothing to join. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "daemon/tierd.h"

#ifdef TIER_HAVE_RADOS
#include <rados/librados.h>

#include "cache/cache.h"
#include "cluster/member.h"
#include "cluster/peer.h"
#include "cluster/router.h"
#include "qos/sched.h"
#include "telemetry/telemetry.h"
#include "tenant/tenant.h"

struct cluster_conn {
    rados_t rados;
    rados_ioctx_t io;
};

/* Set on an endpoint thread while it reads a block for a peer: its loads ask other nodes only
 * for a handover (a copy they hold), never for a fetch. */
static _Thread_local bool serving;

/* The backend named name, if it is one whose blocks peers share (S3: the cold tier; a POSIX
 * backend is a shared file system every node reads as fast itself). NULL: none. */
static struct backend *shared_backend(struct tierd *d, const char *name)
{
    for (size_t i = 0; i < d->cfg.nbackends; i++)
        if (d->backends[i] && strcmp(d->backends[i]->name, name) == 0)
            return strcmp(d->cfg.backends[i].type, "s3") == 0 ? d->backends[i] : NULL;
    return NULL;
}

/* The peer_block of block index of obj as this node names it, asked in class cls. */
static struct peer_block block_of(struct tierd *d, const struct cache_obj *obj, uint64_t index,
                                  enum tier_io_class cls)
{
    return (struct peer_block){.backend = obj->be->name,
                               .key = obj->key,
                               .etag = obj->etag ? obj->etag : "",
                               .version = obj->version_id ? obj->version_id : "",
                               .size = obj->size_bytes,
                               .block_size = (uint32_t)cache_block_size(d->cache),
                               .index = index,
                               .cls = cls};
}

/* The cache's peer source: the block from its owner when that is a peer (router_fetch). */
static ssize_t source_fetch(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                            uint64_t index, void *buf, size_t len)
{
    struct tierd *d = ud;
    if (!shared_backend(d, obj->be->name))
        return -EAGAIN;
    /* one ioctx for the wire's class and the lane's client */
    struct tier_ioctx wio = io ? *io : TIER_IOCTX_DEFAULT;
    struct peer_block b = block_of(d, obj, index, wio.cls);
    if (peer_block_len(&b) != len)
        return -EAGAIN;
    return router_fetch(d->router, &b, buf, len, serving, &wio, NULL);
}

/* The endpoint's callback: block b from this node's cache (a hit, a handover, or one fetch from
 * the backend that every asker waits on: the cache's single-flight); a warm (b->warm) only
 * brings it in. */
static ssize_t serve_block(void *ud, const char *from, const struct peer_block *b, void *buf,
                           size_t len)
{
    struct tierd *d = ud;
    if (b->block_size != cache_block_size(d->cache))
        return -EXDEV;
    if (!len || peer_block_len(b) != len) /* past the object's end: no such block */
        return -ENOENT;
    struct backend *be = shared_backend(d, b->backend);
    if (!be)
        return -ENOENT;
    struct cache_obj obj = {.be = be,
                            .key = b->key,
                            .etag = b->etag[0] ? b->etag : NULL,
                            .size_bytes = b->size,
                            .version_id = b->version[0] ? b->version : NULL};
    bool cached = cache_block_cached(d->cache, &obj, b->index);
    if (b->cached_only && !cached)
        return -ENOENT; /* a handover: only a copy this node holds */
    /* A block this node does not hold is loaded for the asker only when this node ranks before
     * it in the block's order (router_serves_for: the owner, or bounded load's spill or a
     * skipped owner's next choice); else it is refused (503, no failure of this node's): its
     * own readers may be loading the block from the asker, and joining that load would wait on
     * the asker in a loop. */
    if (!cached && !b->warm && !router_serves_for(d->router, b, from))
        return -EAGAIN;
    /* every peer is the tenant `peers`, in the asker's class */
    struct tier_ioctx io = {.tenant = d->peer_tenant, .cls = b->cls};
    if (b->warm) { /* a cluster stage: into the cache, as staging does (class background) */
        io.cls = TIER_IO_BACKGROUND;
        serving = true;
        int rc = cache_fetch_block(d->cache, &io, &obj, b->index, false);
        serving = false;
        return rc < 0 ? rc : (ssize_t)len;
    }
    enum cache_served tier = CACHE_SERVED_RAM;
    uint64_t t0 = tier_now_mono_ns();
    serving = true;
    ssize_t n = cache_read_served(d->cache, &io, &obj, b->index * b->block_size, buf, len, &tier);
    serving = false;
    if (n >= 0 && (size_t)n != len)
        n = -EIO;
    /* what peers read here, in the telemetry: a read of tenant `peers`, by the tier it came from */
    tele_op_record(d->tele, &io, TELE_OP_READ, (enum tele_tier)tier, tier_now_mono_ns() - t0,
                   n < 0 ? 0 : (uint64_t)n, n < 0 ? (int)n : 0);
    return n;
}

int tierd_cluster_warm(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                       uint64_t index)
{
    struct tierd *d = ud;
    if (!shared_backend(d, obj->be->name))
        return -EAGAIN;
    pthread_mutex_lock(&d->cluster_mu);
    struct router *r = d->router;
    if (r)
        d->cluster_calls++;
    pthread_mutex_unlock(&d->cluster_mu);
    if (!r)
        return -EAGAIN;
    struct tier_ioctx wio = io ? *io : TIER_IOCTX_BACKGROUND;
    struct peer_block b = block_of(d, obj, index, wio.cls);
    int rc = router_warm(r, &b, &wio, NULL);
    pthread_mutex_lock(&d->cluster_mu);
    if (!--d->cluster_calls)
        pthread_cond_broadcast(&d->cluster_cv);
    pthread_mutex_unlock(&d->cluster_mu);
    return rc;
}

static bool may_serve(void *ud)
{
    struct tierd *d = ud;
    struct member *m = __atomic_load_n(&d->member, __ATOMIC_ACQUIRE);
    return m && member_may_serve(m);
}

static int view(void *ud, struct member_entry **out, size_t *n, uint64_t *epoch)
{
    struct tierd *d = ud;
    struct member *m = __atomic_load_n(&d->member, __ATOMIC_ACQUIRE);
    return m ? member_view(m, out, n, epoch) : -ENOENT;
}

/* The secret in secret_file: at least PEER_SECRET_MIN bytes after the trailing blanks go, in a
 * file no one but its owner may read. 0 and *out (malloc'd), or -errno with tier_err_msg(). */
static int secret_read(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        tier_err_set("[cluster] secret_file = '%s' cannot be read: %s", path, strerror(e));
        return -e;
    }
    if (st.st_mode & 077) {
        close(fd);
        tier_err_set("[cluster] secret_file = '%s' may be read by others (mode %03o): `chmod 600 "
                     "%s`",
                     path, (unsigned)(st.st_mode & 0777), path);
        return -EPERM;
    }
    char *buf = malloc(4097);
    ssize_t got = buf ? read(fd, buf, 4096) : -1;
    close(fd);
    if (got < 0) {
        free(buf);
        tier_err_set("[cluster] secret_file = '%s' cannot be read", path);
        return -EIO;
    }
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r' || buf[got - 1] == ' '))
        got--;
    if (got < PEER_SECRET_MIN) {
        free(buf);
        tier_err_set("[cluster] secret_file = '%s' holds %zd bytes: a secret needs at least %d "
                     "(`head -c 32 /dev/urandom | base64 > %s`)",
                     path, got, PEER_SECRET_MIN, path);
        return -EINVAL;
    }
    *out = buf;
    *len = (size_t)got;
    return 0;
}

/* A peer request's bound in all: 5 x peer_timeout, at least 10 s (a peer that trickles bytes
 * never holds a reader longer). */
static uint32_t peer_total_ms(uint64_t timeout_ms)
{
    uint64_t t = timeout_ms * 5 < 10000 ? 10000 : timeout_ms * 5;
    return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

/* The router's admission (router_conf.admit): the `peers` lane, under the reader's tenant and
 * class; a warm moves no data (bytes 0, no direction). A request that may not wait (a handover:
 * the deadlock argument at the top) is granted now or not at all. */
static int peer_admit(void *ud, const struct tier_ioctx *io, size_t bytes, bool warm, bool may_wait)
{
    struct tierd *d = ud;
    if (!may_wait)
        return sched_lane_try_enter(d->sched, d->peer_lane, io, bytes);
    return sched_lane_enter_dir(d->sched, d->peer_lane, io, bytes,
                                warm ? SCHED_DIR_NONE : SCHED_DIR_DOWN);
}

static void peer_admit_done(void *ud, const struct tier_ioctx *io, size_t bytes, bool warm,
                            bool may_wait, ssize_t result, uint64_t service_ns)
{
    struct tierd *d = ud;
    /* sched_lane_try_enter enters with no direction: leave as it entered */
    sched_lane_leave_dir(d->sched, d->peer_lane, io, bytes, result < 0 ? (long)result : 0,
                         service_ns, warm || !may_wait ? SCHED_DIR_NONE : SCHED_DIR_DOWN);
}

/* The QoS of peer traffic: the tenant `peers` (the config's [tenant peers] when there is one, with
 * its class and QoS; else registered now), held so that it is never reclaimed, and the `peers`
 * lane of d->sched. A registry with no id left serves peers as "other" (logged). */
static int peers_qos_open(struct tierd *d, uint32_t admit_ms)
{
    const struct tierd_config *c = &d->cfg;
    uint32_t id = TIER_TENANT_OTHER;
    if (!d->sched || !d->tenants) {
        tier_err_set("[cluster]: no scheduler or tenant registry for the QoS of peer traffic");
        return -EINVAL;
    }
    int rc = tenant_find(d->tenants, TIERD_PEER_TENANT, &id);
    if (rc == -ENOENT)
        rc = tenant_register(d->tenants, TIERD_PEER_TENANT, NULL, NULL, &id, NULL);
    if (rc == 0) {
        tenant_hold(d->tenants, id);
    } else {
        log_warn("cluster: no tenant id left for '%s' (%s): peers are served as tenant 'other' "
                 "(raise [tenants] max_tenants)",
                 TIERD_PEER_TENANT, strerror(-rc));
        id = TIER_TENANT_OTHER;
    }
    d->peer_tenant = id;
    struct sched_backend_config bc = {.max_inflight = c->cluster_peer_inflight,
                                      .admit_timeout_ms = admit_ms,
                                      .breaker_failures = -1,
                                      .yield_inflight = -1};
    rc = sched_lane_new(d->sched, TIERD_PEER_LANE, &bc, &d->peer_lane);
    if (rc)
        tier_err_set("[cluster]: cannot make the scheduler lane '%s': %s", TIERD_PEER_LANE,
                     strerror(-rc));
    return rc;
}

/* The secret, the peer client, the router and (share = yes) the endpoint. */
static int peers_open(struct tierd *d)
{
    const struct tierd_config *c = &d->cfg;
    char *secret = NULL;
    size_t slen = 0;
    int rc = secret_read(c->cluster_secret_file, &secret, &slen);
    if (rc)
        return rc;
    /* an admission wait ends within a peer's own stall deadline: a reader waits no longer for a
     * slot than for a silent peer, and a serving thread that joined a load queued here makes
     * its asker wait no longer than that asker's deadline */
    rc = peers_qos_open(d, (uint32_t)c->cluster_peer_timeout_ms);
    if (rc)
        goto out;
    struct peer_client_conf pcc = {.node_id = c->cluster_node_id,
                                   .secret = secret,
                                   .secret_len = slen,
                                   .tls_ca = c->cluster_tls_ca,
                                   .stall_ms = (uint32_t)c->cluster_peer_timeout_ms,
                                   .total_ms = peer_total_ms(c->cluster_peer_timeout_ms)};
    rc = peer_client_new(&pcc, &d->peer_client);
    if (rc)
        goto out;
    struct router_conf rc_ = {.self_id = c->cluster_node_id,
                              .balance = c->cluster_balance_val,
                              .probe_ms = (uint32_t)c->cluster_lease_ms,
                              .peer = d->peer_client,
                              .view = view,
                              .may_serve = may_serve,
                              .admit = peer_admit,
                              .admit_done = peer_admit_done,
                              .ud = d};
    rc = router_new(&rc_, &d->router);
    if (rc) {
        tier_err_set("[cluster]: cannot set up peer reads: %s", strerror(-rc));
        goto out;
    }
    if (c->cluster_share) {
        struct peer_server_conf psc = {.listen = c->cluster_address,
                                       .secret = secret,
                                       .secret_len = slen,
                                       .tls_cert = c->cluster_tls_cert,
                                       .tls_key = c->cluster_tls_key,
                                       .serve = serve_block,
                                       .may_serve = may_serve,
                                       .ud = d};
        rc = peer_server_start(&psc, &d->peer_server);
    }
out:
    if (secret)
        memset(secret, 0, slen);
    free(secret);
    return rc;
}

static void peers_close(struct tierd *d)
{
    if (d->cache)
        cache_set_peer_source(d->cache, NULL); /* returns once no fetch is in the router */
    peer_server_stop(d->peer_server);          /* waits for the blocks being served */
    d->peer_server = NULL;
    pthread_mutex_lock(&d->cluster_mu); /* the stager's warms end first */
    struct router *r = d->router;
    d->router = NULL;
    while (d->cluster_calls)
        pthread_cond_wait(&d->cluster_cv, &d->cluster_mu);
    pthread_mutex_unlock(&d->cluster_mu);
    router_free(r);
    peer_client_free(d->peer_client);
    d->peer_client = NULL;
}

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
    pthread_mutex_init(&d->cluster_mu, NULL);
    pthread_cond_init(&d->cluster_cv, NULL);
    int rc = peers_open(d);
    if (rc) {
        peers_close(d);
        return rc;
    }
    struct cluster_conn *cc = NULL;
    rc = conn_open(c, &cc);
    if (rc) {
        peers_close(d);
        return rc;
    }
    struct member_conf mc = {.cluster = c->cluster_name,
                             .id = c->cluster_node_id,
                             .addr = c->cluster_share ? c->cluster_address : "",
                             .weight = c->cluster_weight_val,
                             .lease_ms = (uint32_t)c->cluster_lease_ms};
    struct member *m = NULL;
    rc = member_join(cc->io, &mc, &m);
    /* -EBUSY: the lock of this node id is held. After a crash it is this node's previous run's
     * until its lease lapses, so a restart waits that long (and a half) before it gives up. */
    uint64_t until = tier_now_mono_ns() + (uint64_t)mc.lease_ms * 3 / 2 * TIER_NS_PER_MS;
    if (rc == -EBUSY)
        log_info("cluster: node '%s' of '%s' is locked: waiting up to %u ms for a previous run's "
                 "lease to lapse",
                 mc.id, mc.cluster, mc.lease_ms * 3 / 2);
    while (rc == -EBUSY && tier_now_mono_ns() < until) {
        tier_sleep_ms(500); /* polling the lock, not a synchronisation */
        rc = member_join(cc->io, &mc, &m);
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
        conn_free(cc);
        peers_close(d);
        return rc;
    }
    /* the endpoint's threads read it (may_serve) */
    __atomic_store_n(&d->member, m, __ATOMIC_RELEASE);
    d->cluster_conn = cc;
    cache_set_peer_source(d->cache, &(struct cache_peer_source){.fetch = source_fetch, .ud = d});
    log_info("cluster: joined '%s' as '%s' (pool %s, weight %g, %s)", c->cluster_name,
             c->cluster_node_id, c->cluster_pool, c->cluster_weight_val,
             c->cluster_share ? "serving peers" : "share = no: serving no peer");
    return 0;
}

void tierd_cluster_close(struct tierd *d)
{
    if (!d->cfg.cluster_name)
        return;
    peers_close(d); /* first: the endpoint and the router read d->member */
    member_leave(d->member);
    d->member = NULL;
    conn_free(d->cluster_conn);
    d->cluster_conn = NULL;
}

#else

int tierd_cluster_warm(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                       uint64_t index)
{
    (void)ud;
    (void)io;
    (void)obj;
    (void)index;
    return -EAGAIN; /* no cluster in this build */
}

int tierd_cluster_open(struct tierd *d)
{
    return d->cfg.cluster_name ? -ENOTSUP : 0; /* the config refuses [cluster] in this build */
}

void tierd_cluster_close(struct tierd *d)
{
    (void)d;
}

#endif
