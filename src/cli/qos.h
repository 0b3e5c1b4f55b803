/* SPDX-License-Identifier: Apache-2.0 */
/*
 * qos.h - `tierctl qos`: the configured and delivered QoS per backend lane, tenant and class,
 * on the local disk's lane and on a cluster node's peer lane, from two answers of GET /v1/qos
 * (docs/API.md). tierd keeps counters (granted_bytes, grants, now_ns), not rates: a rate is the
 * difference of two answers over the difference of their now_ns. Pure functions over the JSON;
 * tierctl.c makes the requests.
 */
#ifndef TIER_CLI_QOS_H
#define TIER_CLI_QOS_H

#include <jansson.h>
#include <stdio.h>

/* The LANE column of the disk's rows (a backend's rows show its name, which has no '('). */
#define CTL_QOS_DISK_LANE "(disk)"
/* The LANE column of the peer lane's rows (a cluster node's peer requests, "peers" in the answer)
 */
#define CTL_QOS_PEERS_LANE "(peers)"

/* Add "delivered": {"bytes_per_s", "ops_per_s"} to every tenant and class entry of cur (a GET
 * /v1/qos answer), of every backend lane, of the disk's and of the peers', from prev, an earlier
 * answer, and "interval_s" to cur. A tenant or backend missing from prev (added in between) counts
 * from 0. 0, or -EINVAL when the two answers carry no increasing now_ns. */
int ctl_qos_rates(const json_t *prev, json_t *cur);

/* The table: one row per lane (each backend's, then the disk's, then the peers'), tenant and class,
 * for the tenant's own class, a class with values of the tenant's own (of every lane or of that
 * lane), and a class that was granted anything in the interval. */
void ctl_qos_print(const json_t *cur, FILE *f);

#endif
