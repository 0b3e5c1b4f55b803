/* SPDX-License-Identifier: Apache-2.0 */
/* api_cluster.c - GET /v1/cluster: this node's view of the [cluster] membership
 * (cluster/member.h, docs/CLUSTER.md): {"enabled": false} without a [cluster] section, else the
 * cluster's name, this node's id, the epoch, its incarnation, whether it may serve peers, its
 * peer traffic (router.h, peer.h) and the members by id, each with its share of the blocks and
 * this node's requests to it. */
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "core/state.h"

#ifdef TIER_HAVE_RADOS
#include "cluster/member.h"
#include "cluster/peer.h"
#include "cluster/router.h"

/* This node's router's view of member e (zeros when the router has not seen it yet). */
static const struct router_member *router_of(const struct router_member *rm, size_t n,
                                             const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rm[i].id, id) == 0)
            return &rm[i];
    return NULL;
}

/* "peers": what this node read from its peers and served them, and every fallback by reason. */
static json_t *peers_json(struct tierd *d, const struct router_stats *rs)
{
    struct peer_client_stats cs = {0};
    struct peer_server_stats ss = {0};
    if (d->peer_client)
        peer_client_stats_get(d->peer_client, &cs);
    if (d->peer_server)
        peer_server_stats_get(d->peer_server, &ss);
    json_t *backend = json_object(), *fail = json_object();
    for (int w = 0; backend && w < ROUTER_WHY_N; w++)
        json_object_set_new(backend, router_why_name((enum router_why)w),
                            json_integer((json_int_t)rs->backend[w]));
    for (int f = 0; fail && f < PEER_FAIL_N; f++)
        json_object_set_new(fail, peer_fail_name((enum peer_fail)f),
                            json_integer((json_int_t)cs.fail[f]));
    json_t *served =
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "blocks",
                  (json_int_t)ss.served, "bytes", (json_int_t)ss.served_bytes, "warmed",
                  (json_int_t)ss.warmed, "auth_failures", (json_int_t)ss.auth_failures,
                  "bad_requests", (json_int_t)ss.bad_requests, "refused", (json_int_t)ss.refused,
                  "not_found", (json_int_t)ss.not_found, "stale", (json_int_t)ss.stale,
                  "mismatched", (json_int_t)ss.mismatched, "errors", (json_int_t)ss.errors);
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:o*, s:o*, s:I, s:o*}", "blocks",
                     (json_int_t)rs->peer_blocks, "bytes", (json_int_t)rs->peer_bytes, "handovers",
                     (json_int_t)rs->handovers, "warms", (json_int_t)rs->warms, "requests",
                     (json_int_t)cs.requests, "failures", fail, "to_backend", backend, "skips",
                     (json_int_t)rs->skips, "served", served);
}

static json_t *cluster_json(struct tierd *d)
{
    struct member_entry *v = NULL;
    size_t n = 0;
    uint64_t epoch = 0;
    if (member_view(d->member, &v, &n, &epoch))
        return NULL;
    struct router_stats rs = {0};
    struct router_member *rm = NULL;
    size_t nrm = 0;
    if (d->router && router_stats_get(d->router, &rs, &rm, &nrm)) {
        free(v);
        return NULL;
    }
    double total = 0; /* the weight of the members that share: placement's */
    for (size_t i = 0; i < n; i++)
        if (v[i].addr[0])
            total += v[i].weight;
    json_t *members = json_array();
    for (size_t i = 0; members && i < n; i++) {
        const struct router_member *r = router_of(rm, nrm, v[i].id);
        json_array_append_new(
            members, json_pack("{s:o, s:o, s:f, s:I, s:f, s:b, s:I, s:I, s:I, s:I, s:I}", "id",
                               api_jstr(v[i].id), "addr", api_jstr(v[i].addr), "weight",
                               v[i].weight, "incarnation", (json_int_t)v[i].incarnation, "share",
                               v[i].addr[0] && total > 0 ? v[i].weight / total : 0.0, "skipped",
                               r && r->skipped, "inflight", (json_int_t)(r ? r->inflight : 0),
                               "requests", (json_int_t)(r ? r->requests : 0), "ok",
                               (json_int_t)(r ? r->ok : 0), "bytes", (json_int_t)(r ? r->bytes : 0),
                               "failures", (json_int_t)(r ? r->failures : 0)));
    }
    free(v);
    free(rm);
    /* incarnations and epochs are 64-bit: JSON integers as jansson writes them (json_int_t) */
    return json_pack("{s:b, s:o, s:o, s:I, s:I, s:b, s:b, s:o*, s:o}", "enabled", 1, "name",
                     api_jstr(d->cfg.cluster_name), "node_id", api_jstr(d->cfg.cluster_node_id),
                     "epoch", (json_int_t)epoch, "incarnation",
                     (json_int_t)member_incarnation(d->member), "may_serve",
                     member_may_serve(d->member), "share", d->cfg.cluster_share, "peers",
                     peers_json(d, &rs), "members", members);
}
#endif

unsigned api_cluster_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                         const char *rest)
{
    (void)rq;
    (void)rest;
#ifdef TIER_HAVE_RADOS
    if (d->member)
        return api_reply_json(out, 200, cluster_json(d));
#else
    (void)d; /* the config refuses [cluster] in a build without librados */
#endif
    return api_reply_json(out, 200, json_pack("{s:b}", "enabled", 0));
}
