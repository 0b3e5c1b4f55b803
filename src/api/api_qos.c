/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_qos.c - live QoS through the control API (sched.h): GET /v1/qos (per lane, tenant and
 * class, the parameters in force and what the lane granted) and PUT /v1/qos (one tenant's
 * reservation, weight, limit or space quota, checked against the lane's capacity first; one
 * change at a time, under qos_put_mu). Called on the HTTP server's connection threads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "api/api_int.h"
#include "core/state.h"
#include "qos/sched.h"
#include "tenant/tenant.h"

/* PUT /v1/qos reads the tenant's values, checks the result and applies it: one at a time, so
 * two PUTs cannot interleave their read and their write (the scheduler's own lock guards each
 * call). */
static pthread_mutex_t qos_put_mu = PTHREAD_MUTEX_INITIALIZER;

/* A set rate of the config or of struct sched_qos (not 0 = default, not none), else 0. */
static uint64_t qos_rate_set(uint64_t v)
{
    return v == TIERD_RATE_NONE ? 0 : v;
}

/* v as the scheduler resolves it: 0 takes dflt, none is 0 (qos/sched.c rate_or). */
static uint64_t qos_rate_or(uint64_t v, uint64_t dflt)
{
    return v == 0 ? dflt : v == TIERD_RATE_NONE ? 0 : v;
}

/* A limit or capacity in an answer: bytes/s, or null for none. */
static json_t *qos_limit_json(uint64_t bps)
{
    return bps ? json_integer((json_int_t)bps) : json_null();
}

/* One lane QoS applies to: a backend's lane of d->sched (the link), or the disk's, the one lane
 * of d->disk_sched (main.c open_disk_lane). */
struct qos_lane {
    struct sched *s;
    struct sched_lane *l;
    const char *name; /* the backend's, "disk" or "peers" */
    uint64_t cap;     /* link_capacity or [cache] disk_capacity, bytes/s; 0: unknown */
    bool disk;
    bool peers; /* the lane of this node's peer requests (d->peer_lane, daemon/cluster.c) */
};

/* The lanes of one resource into out[TIERD_MAX_BACKENDS]; returns how many. */
static size_t qos_lanes(struct tierd *d, bool disk, struct qos_lane *out)
{
    if (disk) {
        if (!d->disk_sched || !d->disk_lane)
            return 0;
        out[0] = (struct qos_lane){.s = d->disk_sched,
                                   .l = d->disk_lane,
                                   .name = "disk",
                                   .cap = qos_rate_set(d->cfg.disk_capacity_bps),
                                   .disk = true};
        return 1;
    }
    size_t n = 0;
    for (size_t i = 0; i < d->cfg.nbackends && i < TIERD_MAX_BACKENDS; i++) {
        struct sched_lane *l = d->backends[i] ? sched_backend_lane(d->sched, d->backends[i]) : NULL;
        if (l)
            out[n++] = (struct qos_lane){.s = d->sched,
                                         .l = l,
                                         .name = d->backends[i]->name,
                                         .cap = qos_rate_set(d->cfg.backends[i].link_capacity_bps)};
    }
    return n;
}

/* A class's reservation as configured for the resource of ql ([class NAME] reservation; the disk
 * has none to configure), raw (0 not given, none). */
static uint64_t qos_class_reservation(const struct tierd *d, const struct qos_lane *ql, int c)
{
    return ql->disk ? 0 : d->cfg.classes[c].reservation_bps;
}

/* One tenant on one lane: its limit, and per class the parameters the lane applies and what it
 * granted. */
static json_t *qos_tenant_json(struct tierd *d, const struct qos_lane *ql, uint32_t id)
{
    json_t *classes = json_object();
    uint64_t bytes = 0, grants = 0;
    uint64_t tlim = 0;
    for (int c = 0; classes && c < TIER_IO_NCLASSES; c++) {
        enum tier_io_class cls = (enum tier_io_class)c;
        struct sched_qos eff, own, lane_own;
        sched_lane_qos_get(ql->s, ql->l, id, cls, &eff, &tlim);
        bool has_own = sched_qos_get(ql->s, id, cls, &own);
        bool has_lane = sched_lane_qos_own_get(ql->s, ql->l, id, cls, &lane_own);
        struct sched_client_stats cs;
        sched_lane_client_stats_get(ql->s, ql->l, id, cls, &cs);
        bytes += cs.granted_bytes;
        grants += cs.grants;
        json_object_set_new(
            classes, tier_io_class_name(cls),
            json_pack("{s:I, s:I, s:o, s:b, s:b, s:I, s:I, s:I}", "reservation",
                      (json_int_t)eff.reservation_bps, "weight", (json_int_t)eff.weight, "limit",
                      qos_limit_json(eff.limit_bps), "own", has_own, "lane_own", has_lane,
                      "granted_bytes", (json_int_t)cs.granted_bytes, "grants",
                      (json_int_t)cs.grants, "queued_now", (json_int_t)cs.queued_now));
    }
    bool lane_limit = sched_lane_tenant_limit_own_get(ql->s, ql->l, id) != 0;
    return json_pack("{s:I, s:o, s:s, s:o, s:b, s:I, s:I, s:o}", "id", (json_int_t)id, "name",
                     api_jstr(tenant_name(d->tenants, id)), "class",
                     tier_io_class_name(tenant_class(d->tenants, id)), "limit",
                     qos_limit_json(tlim), "limit_lane_own", lane_limit, "granted_bytes",
                     (json_int_t)bytes, "grants", (json_int_t)grants, "classes", classes);
}

/* One lane with every tenant (only < 0) or one (only >= 0): a backend's lane has its
 * link_capacity, the disk's its capacity, op_cost and max_inflight. */
static json_t *qos_lane_json(struct tierd *d, const struct qos_lane *ql, int64_t only)
{
    struct sched_backend_stats bs[TIERD_MAX_BACKENDS + 1]; /* the backends' and the peers' */
    size_t nb = sched_backend_stats_get(ql->s, bs, TIERD_MAX_BACKENDS + 1);
    const struct sched_backend_stats *b = NULL;
    for (size_t k = 0; k < nb && k < TIERD_MAX_BACKENDS + 1; k++)
        if (strcmp(bs[k].name, ql->name) == 0)
            b = &bs[k];
    json_t *tenants = json_array();
    uint32_t n = tenant_count(d->tenants);
    for (uint32_t id = 0; tenants && id < n; id++)
        if ((only < 0 && tenant_in_use(d->tenants, id)) || (int64_t)id == only)
            json_array_append_new(tenants, qos_tenant_json(d, ql, id));
    json_t *o = json_pack("{s:o, s:o, s:I, s:I, s:I, s:o}", "name", api_jstr(ql->name),
                          ql->disk ? "capacity" : "link_capacity", qos_limit_json(ql->cap),
                          "grants_reservation", (json_int_t)(b ? b->grants_reservation : 0),
                          "grants_weight", (json_int_t)(b ? b->grants_weight : 0), "limit_waits",
                          (json_int_t)(b ? b->limit_waits : 0), "tenants", tenants);
    if (o && !ql->disk && !ql->peers) { /* reads in parts while inference has demand */
        json_object_set_new(o, "split_bytes", json_integer((json_int_t)(b ? b->split_bytes : 0)));
        json_object_set_new(o, "split_reads", json_integer((json_int_t)(b ? b->split_reads : 0)));
    }
    if (o && ql->disk) {
        json_object_set_new(o, "op_cost", json_integer((json_int_t)sched_op_cost(ql->s)));
        json_object_set_new(o, "max_inflight", json_integer(b ? b->max_inflight : 0));
    }
    if (o && ql->peers) { /* [cluster] peer_inflight, and the requests sent to the backend */
        json_object_set_new(o, "max_inflight", json_integer(b ? b->max_inflight : 0));
        json_object_set_new(o, "inflight_now", json_integer((json_int_t)(b ? b->inflight_now : 0)));
        json_object_set_new(o, "queued_now", json_integer((json_int_t)(b ? b->queued_now : 0)));
        json_object_set_new(o, "admit_timeouts",
                            json_integer((json_int_t)(b ? b->admit_timeouts : 0)));
    }
    return o;
}

/* Every backend lane, the disk's lane and the peers' lane, with every tenant (only < 0) or one
 * (only >= 0). */
static json_t *qos_json(struct tierd *d, int64_t only)
{
    struct qos_lane lanes[TIERD_MAX_BACKENDS];
    size_t n = qos_lanes(d, false, lanes);
    json_t *backends = json_array();
    for (size_t i = 0; backends && i < n; i++)
        json_array_append_new(backends, qos_lane_json(d, &lanes[i], only));
    json_t *disk = qos_lanes(d, true, lanes) ? qos_lane_json(d, &lanes[0], only) : json_null();
    /* this node's peer requests ([cluster]): the tenants' values of every lane apply there */
    struct qos_lane pl = {.s = d->sched, .l = d->peer_lane, .name = TIERD_PEER_LANE, .peers = true};
    json_t *peers = d->peer_lane ? qos_lane_json(d, &pl, only) : json_null();
    /* the third resource: hot-tier space of the tenants with a quota or bytes held */
    json_t *space = json_array();
    uint32_t nt = d->tenants ? tenant_count(d->tenants) : 0;
    for (uint32_t t = 0; space && d->cache && t < nt; t++) {
        struct cache_tenant_stats ts;
        if ((only >= 0 && (uint32_t)only != t) || cache_tenant_stats_get(d->cache, t, &ts) ||
            (!ts.quota && !ts.bytes && only < 0))
            continue;
        json_array_append_new(space, json_pack("{s:o, s:I, s:I, s:I, s:I}", "name",
                                               api_jstr(tenant_name(d->tenants, t)), "quota",
                                               (json_int_t)ts.quota, "bytes", (json_int_t)ts.bytes,
                                               "blocks", (json_int_t)ts.blocks, "quota_evictions",
                                               (json_int_t)ts.quota_evictions));
    }
    return json_pack("{s:I, s:s, s:I, s:o, s:o, s:o, s:o}", "now_ns",
                     (json_int_t)tier_now_mono_ns(), "scheduler",
                     sched_qos_enabled(d->sched) ? "dmclock" : "strict-priority", "op_cost",
                     (json_int_t)sched_op_cost(d->sched), "backends", backends, "disk", disk,
                     "peers", peers, "space", space);
}

unsigned api_qos_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                     const char *rest)
{
    (void)rq;
    (void)rest;
    if (!d->sched || !d->tenants)
        return api_reply_error(out, -ENOTSUP, "tierd runs without a scheduler or tenant registry");
    return api_reply_json(out, 200, qos_json(d, -1));
}

#define QOS_PUT_FIELDS "tenant, class, reservation, weight, limit, backend, resource, cache_quota"
#define QOS_RATE_HELP "bytes per second like 100MiB/s, 1.5G/s, 500000/s, or \"none\""

/* An optional rate field: absent (*given false), null (0: back to the default) or a rate text
 * as the config takes it (tierd_rate_parse: TIERD_RATE_NONE for "none"). -EINVAL with the
 * answer in out. */
static int qos_rate_field(json_t *j, const char *key, bool *given, uint64_t *val,
                          struct api_reply *out)
{
    json_t *v = json_object_get(j, key);
    *given = v != NULL;
    *val = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        api_reply_error(out, -EINVAL,
                        "%s must be a string (" QOS_RATE_HELP ") or null (the default)", key);
        return -EINVAL;
    }
    const char *s = json_string_value(v);
    int rc = tierd_rate_parse(s, val);
    if (rc) {
        api_reply_error(out, -EINVAL, "%s = '%.60s' is %s (allowed: " QOS_RATE_HELP ")", key, s,
                        rc == -ERANGE ? "out of range"
                        : s[0] == '-' ? "negative"
                                      : "not a rate");
        return -EINVAL;
    }
    return 0;
}

static const char *qos_fmt_rate(uint64_t bps, char *buf, size_t n)
{
    char b[32];
    snprintf(buf, n, "%s/s", tier_fmt_bytes(bps, b, sizeof(b)));
    return buf;
}

/* The request, parsed: what changes for which client, where. */
struct qos_change {
    uint32_t id;
    const char *tenant;
    enum tier_io_class cls; /* the client whose reservation and weight change */
    bool cls_given;         /* a limit given with a class is that class's; else the tenant's */
    bool disk;              /* "resource": "disk": the disk's scheduler, else the link's */
    struct sched *s;        /* d->sched or d->disk_sched */
    /* "backend": that lane's own values (sched_lane_qos_set); NULL: the tenant's values of
     * every lane of s (sched_qos_set) */
    struct sched_lane *lane;
    const char *where; /* for messages: "backend NAME", "every backend", "the disk" */
    char where_buf[96];
    bool set_q, set_tl; /* what is written */
    struct sched_qos q, q_old;
    bool q_old_set;
    /* tenant limit: every lane: 0 none; a lane's own: 0 the every-lane one, TIERD_RATE_NONE none */
    uint64_t tl, tl_old;
    /* "cache_quota": the tenant's hot-tier space (cache_quota_set: CACHE_QUOTA_DEFAULT for null,
     * CACHE_QUOTA_NONE for "none", else bytes), whatever resource or backend says */
    bool set_quota;
    uint64_t quota;
};

/* The tenant's own values of (t, k) that lane ql applies, field by field as qos/sched.c reads
 * them (the lane's own over the tenant's of every lane; raw: 0 not given), with ch applied
 * (with) or as they are. Returns whether there are any. */
static bool qos_own(const struct qos_change *ch, const struct qos_lane *ql, uint32_t t, int k,
                    bool with, struct sched_qos *out)
{
    struct sched_qos g, l;
    bool hg = sched_qos_get(ql->s, t, (enum tier_io_class)k, &g);
    bool hl = sched_lane_qos_own_get(ql->s, ql->l, t, (enum tier_io_class)k, &l);
    if (with && ch->set_q && t == ch->id && k == (int)ch->cls) {
        if (!ch->lane) {
            g = ch->q;
            hg = true;
        } else if (ch->lane == ql->l) {
            l = ch->q;
            hl = true;
        }
    }
    memset(out, 0, sizeof(*out));
    if (hg)
        *out = g;
    if (hl) {
        if (l.reservation_bps)
            out->reservation_bps = l.reservation_bps;
        if (l.limit_bps)
            out->limit_bps = l.limit_bps;
        if (l.weight)
            out->weight = l.weight;
    }
    return hg || hl;
}

/* The tenant's limit over all its classes that lane ql applies once ch is applied: bytes/s, 0
 * none. */
static uint64_t qos_tenant_limit(const struct qos_change *ch, const struct qos_lane *ql)
{
    bool here = ch->set_tl && ch->lane == ql->l;
    uint64_t g = ch->set_tl && !ch->lane ? ch->tl : sched_tenant_limit_get(ql->s, ch->id);
    uint64_t l = here ? ch->tl : sched_lane_tenant_limit_own_get(ql->s, ql->l, ch->id);
    return l ? qos_rate_set(l) : g;
}

/* Check the tenant's values after the change on every lane it touches, as the config checks the
 * file (config.c check_qos): a reservation must fit under its limits, and the reservations that
 * apply to a lane under its capacity (link_capacity, [cache] disk_capacity). 0, or -EINVAL with
 * the answer in out. */
static int qos_check(struct tierd *d, const struct qos_change *ch, struct api_reply *out)
{
    char a[48], b[48];
    struct qos_lane lanes[TIERD_MAX_BACKENDS];
    size_t nl = qos_lanes(d, ch->disk, lanes);
    for (size_t li = 0; li < nl; li++) {
        const struct qos_lane *ql = &lanes[li];
        if (ch->lane && ch->lane != ql->l)
            continue; /* another lane's values do not change */
        char where[96];
        if (ql->disk)
            snprintf(where, sizeof(where), "the disk");
        else
            snprintf(where, sizeof(where), "backend %s", ql->name);
        for (int c = 0; c < TIER_IO_NCLASSES; c++) {
            if (!(ch->set_tl || (ch->set_q && c == (int)ch->cls)))
                continue; /* unchanged */
            struct sched_qos own, dflt;
            bool has = qos_own(ch, ql, ch->id, c, true, &own);
            sched_lane_class_qos_get(ql->s, ql->l, (enum tier_io_class)c, &dflt);
            /* the tenant's own reservation, else its class's configured one for the tenant's
             * class (the built-in share of inference is not the tenant's: a limit may be below
             * it, as in the config) */
            uint64_t r = has ? qos_rate_set(own.reservation_bps) : 0;
            if (!r && c == (int)tenant_class(d->tenants, ch->id))
                r = qos_rate_set(qos_class_reservation(d, ql, c));
            uint64_t cl = qos_rate_or(has ? own.limit_bps : 0, dflt.limit_bps);
            uint64_t tl = qos_tenant_limit(ch, ql);
            const char *cn = tier_io_class_name((enum tier_io_class)c);
            if (r && cl && r > cl) {
                api_reply_error(
                    out, -EINVAL,
                    "tenant %s, class %s, on %s: reservation %s is above the class limit "
                    "%s: a reservation must fit under the limit; nothing was changed",
                    ch->tenant, cn, where, qos_fmt_rate(r, a, sizeof(a)),
                    qos_fmt_rate(cl, b, sizeof(b)));
                return -EINVAL;
            }
            if (r && tl && r > tl) {
                api_reply_error(
                    out, -EINVAL,
                    "tenant %s, class %s, on %s: reservation %s is above the tenant's "
                    "limit %s: a reservation must fit under the limit; nothing was changed",
                    ch->tenant, cn, where, qos_fmt_rate(r, a, sizeof(a)),
                    qos_fmt_rate(tl, b, sizeof(b)));
                return -EINVAL;
            }
        }
        if (!ql->cap || !ch->set_q)
            continue;
        /* each [class] reservation once (inference's built-in tenth unless set), and every
         * tenant's own reservations on this lane, with this change in */
        uint64_t sum = 0, old_sum = 0;
        for (int k = 0; k < TIER_IO_NCLASSES; k++) {
            uint64_t r = qos_class_reservation(d, ql, k);
            if (k == TIER_IO_INFERENCE && r == 0)
                r = ql->cap / 10;
            sum = tier_sum_sat(sum, qos_rate_set(r));
        }
        old_sum = sum;
        uint32_t n = tenant_count(d->tenants);
        for (uint32_t t = 0; t < n; t++)
            for (int k = 0; k < TIER_IO_NCLASSES; k++) {
                struct sched_qos q;
                uint64_t r = qos_own(ch, ql, t, k, false, &q) ? qos_rate_set(q.reservation_bps) : 0;
                old_sum = tier_sum_sat(old_sum, r);
                if (t == ch->id && k == (int)ch->cls)
                    r = qos_own(ch, ql, t, k, true, &q) ? qos_rate_set(q.reservation_bps) : 0;
                sum = tier_sum_sat(sum, r);
            }
        if (sum > ql->cap && sum > old_sum) {
            if (ql->disk)
                api_reply_error(
                    out, -EINVAL,
                    "the disk: the reservations that apply to it would be %s in all, "
                    "above its [cache] disk_capacity %s (inference's built-in tenth of "
                    "it, and every tenant's own): lower a reservation first; nothing was "
                    "changed",
                    qos_fmt_rate(sum, a, sizeof(a)), qos_fmt_rate(ql->cap, b, sizeof(b)));
            else
                api_reply_error(
                    out, -EINVAL,
                    "backend %s: the reservations that apply to it would be %s in all, "
                    "above its link_capacity %s (each [class] reservation once, "
                    "inference's built-in tenth of the link unless [class inference] sets "
                    "one, and every tenant's own): lower a reservation first; nothing was "
                    "changed",
                    ql->name, qos_fmt_rate(sum, a, sizeof(a)), qos_fmt_rate(ql->cap, b, sizeof(b)));
            return -EINVAL;
        }
    }
    return 0;
}

/* "resource" and "backend" of the body into ch (s, disk, lane, where); 0, or the status of the
 * answer put in out. */
static unsigned qos_parse_where(struct tierd *d, json_t *j, struct qos_change *ch,
                                struct api_reply *out)
{
    json_t *rj = json_object_get(j, "resource");
    const char *rn = rj && !json_is_null(rj) ? json_string_value(rj) : "link";
    if (!rn || (strcmp(rn, "link") != 0 && strcmp(rn, "disk") != 0))
        return api_reply_error(out, -EINVAL, "resource %.40s is not allowed (allowed: link, disk)",
                               rn ? rn : "(not a string)");
    ch->disk = strcmp(rn, "disk") == 0;
    ch->s = ch->disk ? d->disk_sched : d->sched;
    if (!ch->s || (ch->disk && !d->disk_lane))
        return api_reply_error(out, -EINVAL, "tierd runs without a disk lane: resource disk");
    json_t *bj = json_object_get(j, "backend");
    if (!bj || json_is_null(bj)) {
        ch->where = ch->disk ? "the disk" : "every backend";
        return 0;
    }
    if (ch->disk)
        return api_reply_error(out, -EINVAL,
                               "backend names a lane of the link; the disk has one lane: omit "
                               "backend with resource disk");
    const char *bn = json_string_value(bj);
    for (size_t i = 0; bn && i < d->cfg.nbackends && i < TIERD_MAX_BACKENDS; i++)
        if (strcmp(d->cfg.backends[i].name, bn) == 0 && d->backends[i])
            ch->lane = sched_backend_lane(d->sched, d->backends[i]);
    if (!ch->lane)
        return api_reply_error(
            out, -EINVAL, "backend %s%.80s%s is not configured (GET /v1/qos lists the backends)",
            bn ? "'" : "", bn ? bn : "(not a string)", bn ? "'" : "");
    snprintf(ch->where_buf, sizeof(ch->where_buf), "backend %.80s", bn);
    ch->where = ch->where_buf;
    return 0;
}

/* Parse the body into ch; 0, or the status of the answer put in out. Nothing is changed. */
static unsigned qos_quota_field(struct tierd *d, json_t *j, struct qos_change *ch,
                                struct api_reply *out);

static unsigned qos_parse(struct tierd *d, json_t *j, struct qos_change *ch, struct api_reply *out)
{
    static const char *const fields[] = {"tenant", "class",   "reservation", "weight",
                                         "limit",  "backend", "resource",    "cache_quota"};
    const char *bad = api_unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    if (bad)
        return api_reply_error(out, -EINVAL, "unknown field '%.60s' (allowed: " QOS_PUT_FIELDS ")",
                               bad);
    ch->tenant = json_string_value(json_object_get(j, "tenant"));
    if (!ch->tenant)
        return api_reply_error(out, -EINVAL,
                               "expected {\"tenant\": \"NAME\", \"reservation\": \"100MiB/s\", "
                               "\"weight\": 10, \"limit\": \"1GiB/s\"} (tenant required; class, "
                               "backend, resource optional; at least one of reservation, weight, "
                               "limit)");
    if (tenant_find(d->tenants, ch->tenant, &ch->id) != 0)
        return api_reply_no_tenant(out, ch->tenant);
    json_t *cj = json_object_get(j, "class");
    ch->cls_given = cj && !json_is_null(cj);
    ch->cls = tenant_class(d->tenants, ch->id);
    if (ch->cls_given &&
        (!json_is_string(cj) || tier_io_class_parse(json_string_value(cj), &ch->cls)))
        return api_reply_error(
            out, -EINVAL,
            "class %.40s is not allowed (allowed: inference, training, checkpoint, "
            "background)",
            json_is_string(cj) ? json_string_value(cj) : "(not a string)");
    unsigned st = qos_parse_where(d, j, ch, out);
    if (st)
        return st;
    bool r_given, l_given;
    uint64_t r = 0, lim = 0;
    if (qos_rate_field(j, "reservation", &r_given, &r, out) ||
        qos_rate_field(j, "limit", &l_given, &lim, out))
        return out->status;
    json_t *wj = json_object_get(j, "weight");
    bool w_given = wj != NULL;
    uint32_t w = 0;
    if (wj && !json_is_null(wj)) {
        if (!json_is_integer(wj) || json_integer_value(wj) < 1 ||
            json_integer_value(wj) > SCHED_WEIGHT_MAX)
            return api_reply_error(out, -EINVAL,
                                   "weight must be an integer from 1 to %d, or null (the default)",
                                   SCHED_WEIGHT_MAX);
        w = (uint32_t)json_integer_value(wj);
    }
    unsigned qst = qos_quota_field(d, j, ch, out);
    if (qst)
        return qst;
    if (!r_given && !w_given && !l_given && !ch->set_quota)
        return api_reply_error(
            out, -EINVAL,
            "nothing to change: give at least one of reservation, weight, limit, "
            "cache_quota");
    if (ch->lane) {
        ch->q_old_set = sched_lane_qos_own_get(ch->s, ch->lane, ch->id, ch->cls, &ch->q_old);
        ch->tl_old = sched_lane_tenant_limit_own_get(ch->s, ch->lane, ch->id);
    } else {
        ch->q_old_set = sched_qos_get(ch->s, ch->id, ch->cls, &ch->q_old);
        ch->tl_old = sched_tenant_limit_get(ch->s, ch->id);
    }
    ch->q = ch->q_old;
    ch->tl = ch->tl_old;
    if (r_given)
        ch->q.reservation_bps = r;
    if (w_given)
        ch->q.weight = w;
    if (l_given && ch->cls_given)
        ch->q.limit_bps = lim;
    else if (l_given) /* a lane's own: null takes the every-lane limit again, "none" is none */
        ch->tl = lim == TIERD_RATE_NONE && !ch->lane ? 0 : lim;
    ch->set_q = r_given || w_given || (l_given && ch->cls_given);
    ch->set_tl = l_given && !ch->cls_given;
    return 0;
}

/* "cache_quota" of the body into ch: null (the [tenants] default), "none", or a size of at least
 * one cache block as a string ("40G") or a byte count. 0, or the status of the 400 in out. */
static unsigned qos_quota_field(struct tierd *d, json_t *j, struct qos_change *ch,
                                struct api_reply *out)
{
    json_t *v = json_object_get(j, "cache_quota");
    if (!v)
        return 0;
    if (!d->cache)
        return api_reply_error(out, -ENOTSUP, "tierd runs without a cache: no cache_quota to set");
    size_t bs = cache_block_size(d->cache);
    uint64_t q = 0;
    const char *txt = json_is_string(v) ? json_string_value(v) : NULL;
    if (json_is_null(v))
        q = CACHE_QUOTA_DEFAULT;
    else if (txt && strcmp(txt, "none") == 0)
        q = CACHE_QUOTA_NONE;
    else if (!(txt && tier_parse_size(txt, &q) == 0) &&
             !(json_is_integer(v) && json_integer_value(v) > 0 &&
               (q = (uint64_t)json_integer_value(v)) > 0))
        return api_reply_error(out, -EINVAL,
                               "cache_quota must be a size like \"40G\" or \"512MiB\" (or a byte "
                               "count), \"none\", or null (the [tenants] cache_quota)");
    if (q != CACHE_QUOTA_DEFAULT && q != CACHE_QUOTA_NONE && q < bs) {
        char a[32], b[32];
        return api_reply_error(out, -EINVAL,
                               "cache_quota %s is less than one cache block (%s): the tenant could "
                               "keep nothing it reads",
                               tier_fmt_bytes(q, a, sizeof(a)), tier_fmt_bytes(bs, b, sizeof(b)));
    }
    ch->set_quota = true;
    ch->quota = q;
    return 0;
}

/* Write ch's class values (q NULL: back to the defaults) where ch says. */
static int qos_apply_q(const struct qos_change *ch, const struct sched_qos *q)
{
    return ch->lane ? sched_lane_qos_set(ch->s, ch->lane, ch->id, ch->cls, q)
                    : sched_qos_set(ch->s, ch->id, ch->cls, q);
}

static int qos_apply_tl(const struct qos_change *ch, uint64_t tl)
{
    return ch->lane ? sched_lane_tenant_limit_set(ch->s, ch->lane, ch->id, tl)
                    : sched_tenant_limit_set(ch->s, ch->id, tl);
}

/* Validate the whole body and the resulting values before anything changes: bad input answers
 * 400 (an unknown tenant 404) and changes nothing. */
unsigned api_qos_put(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                     const char *rest)
{
    (void)rest;
    if (!d->sched || !d->tenants)
        return api_reply_error(out, -ENOTSUP, "tierd runs without a scheduler or tenant registry");
    unsigned ret;
    json_t *j = api_parse_body(rq, out, &ret);
    if (!j)
        return ret;
    struct qos_change ch;
    memset(&ch, 0, sizeof(ch));
    pthread_mutex_lock(&qos_put_mu);
    ret = qos_parse(d, j, &ch, out);
    if (ret)
        goto out;
    if (qos_check(d, &ch, out)) {
        ret = out->status;
        goto out;
    }
    /* the reservation and weight first, then the tenant's limit; if the second fails (no
     * memory), the first is undone, so a failed PUT changes nothing */
    static const struct sched_qos zero;
    bool q_default = memcmp(&ch.q, &zero, sizeof(zero)) == 0;
    tier_err_clear();
    int rc = ch.set_q ? qos_apply_q(&ch, q_default ? NULL : &ch.q) : 0;
    if (rc == 0 && ch.set_tl) {
        rc = qos_apply_tl(&ch, ch.tl);
        if (rc && ch.set_q)
            (void)qos_apply_q(&ch, ch.q_old_set ? &ch.q_old : NULL);
    }
    /* last: it cannot fail for a registered tenant (the cache keeps the registry's ids apart);
     * a lowered quota evicts down to it before the answer */
    if (rc == 0 && ch.set_quota)
        rc = cache_quota_set(d->cache, ch.id, ch.quota);
    if (rc)
        ret = api_reply_error(out, rc, "cannot apply the QoS of tenant %s on %s: %s", ch.tenant,
                              ch.where, *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    else
        ret = api_reply_json(out, 200, qos_json(d, ch.id));
out:
    pthread_mutex_unlock(&qos_put_mu);
    json_decref(j);
    return ret;
}
