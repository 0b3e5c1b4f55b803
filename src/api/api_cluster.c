/* SPDX-License-Identifier: Apache-2.0 */
/* api_cluster.c - GET /v1/cluster: this node's view of the [cluster] membership
 * (cluster/member.h, docs/CLUSTER.md): {"enabled": false} without a [cluster] section, else the
 * cluster's name, this node's id, the epoch, its incarnation, whether it may serve peers and the
 * members by id. */
#include <stdlib.h>

#include "api/api_int.h"
#include "core/state.h"

#ifdef TIER_HAVE_RADOS
#include "cluster/member.h"

static json_t *cluster_json(struct tierd *d)
{
    struct member_entry *v = NULL;
    size_t n = 0;
    uint64_t epoch = 0;
    if (member_view(d->member, &v, &n, &epoch))
        return NULL;
    json_t *members = json_array();
    for (size_t i = 0; members && i < n; i++)
        json_array_append_new(members, json_pack("{s:o, s:o, s:f, s:I}", "id", api_jstr(v[i].id),
                                                 "addr", api_jstr(v[i].addr), "weight", v[i].weight,
                                                 "incarnation", (json_int_t)v[i].incarnation));
    free(v);
    /* incarnations and epochs are 64-bit: JSON integers as jansson writes them (json_int_t) */
    return json_pack("{s:b, s:o, s:o, s:I, s:I, s:b, s:o*}", "enabled", 1, "name",
                     api_jstr(d->cfg.cluster_name), "node_id", api_jstr(d->cfg.cluster_node_id),
                     "epoch", (json_int_t)epoch, "incarnation",
                     (json_int_t)member_incarnation(d->member), "may_serve",
                     member_may_serve(d->member), "members", members);
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
