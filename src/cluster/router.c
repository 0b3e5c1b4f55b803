/* SPDX-License-Identifier: Apache-2.0 */
/* router.c - which peer to ask for a block (router.h).
 *
 * STATE of one member in this node's view (struct rmem, under r->mu):
 *
 *                 peer failed (connect, timeout, auth, garbage, checksum)
 *     usable  ------------------------------------------------------------>  skipped
 *        ^    <------------------------------------------------------------     |
 *        |     a view of another epoch (every skip is cleared), or now >=        |
 *        |     skip_until: placed again (the probe; a failure skips it again)     |
 *
 * TRANSITION -> FUNCTION
 *   a new epoch: members rebuilt, counters kept by id  view_refresh() -> view_adopt()
 *   placed, then admitted (the admit hook):            pick(), route()
 *     inflight + 1, requests + 1
 *   asked for a handover (this node's own block, or    route(), a copy only
 *     one it serves: the best other node's copy)
 *   asked to warm a block it owns (a cluster stage)    router_warm() -> route()
 *   not admitted: the block to the backend, nothing    route() -> fall_back()
 *     counted on the member
 *   answered: inflight - 1, ok/bytes or failures       account()
 *   failed for the peer's own reason: skipped          account() -> skip_reason()
 *   probe time passed: placed again                    pick() (usable_now())
 *
 * INVARIANTS
 *   R1 every member of r->m has a distinct (id, incarnation); inflight counts requests
 *      placed by pick(), admitted and not yet accounted (a request whose member left the view is
 *      accounted to nobody).
 *   R2 no lock is held across a peer request, the view callback or the admission callbacks.
 *   R3 a block goes to a peer only when this node may serve; to the pick when that is not this
 *      node and the caller is not serving a peer, else (a handover) to the best other node for
 *      a copy it holds (cached_only: it never fetches, so no request travels on). A failure of
 *      the peer returns -EAGAIN (the caller reads the backend), never an error.
 *   R4 the pick ranks before this node in the block's order, or is this node (bounded load
 *      stops at this node, whose load is 0), so a peer's router_serves_for() agrees to load it. */
#include "cluster/router.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/peer_proto.h"
#include "cluster/place.h"
#include "common/timeutil.h"

struct rmem {
    struct member_entry e;
    uint64_t hash; /* place_node_hash(e.id) */
    bool skipped;
    uint64_t skip_until_ms;
    uint64_t inflight, requests, ok, bytes, failures;
};

struct router {
    struct router_conf conf;
    char self_id[MEMBER_ID_MAX + 1];
    pthread_mutex_t mu;
    bool have_view;
    uint64_t epoch;
    struct rmem *m;
    size_t n;
    uint64_t peer_blocks, peer_bytes, backend[ROUTER_WHY_N], skips, handovers, warms;
};

const char *router_why_name(enum router_why w)
{
    static const char *const names[ROUTER_WHY_N] = {"self", "fenced", "alone", "peer_failed",
                                                    "admission"};
    return (unsigned)w < ROUTER_WHY_N ? names[w] : "unknown";
}

int router_new(const struct router_conf *conf, struct router **out)
{
    if (!conf || !conf->self_id || !conf->peer || !conf->view ||
        strlen(conf->self_id) > MEMBER_ID_MAX)
        return -EINVAL;
    struct router *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->conf = *conf;
    strcpy(r->self_id, conf->self_id);
    r->conf.self_id = r->self_id;
    if (!(r->conf.balance > 1.0))
        r->conf.balance = 1.25;
    if (!r->conf.probe_ms)
        r->conf.probe_ms = 10000;
    if (!r->conf.spill_min)
        r->conf.spill_min = 16;
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return 0;
}

void router_free(struct router *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->mu);
    free(r->m);
    free(r);
}

static uint64_t now_ms(void)
{
    return tier_now_mono_ns() / TIER_NS_PER_MS;
}

static struct rmem *find(struct router *r, const char *id, uint64_t incarnation)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].e.incarnation == incarnation && strcmp(r->m[i].e.id, id) == 0)
            return &r->m[i];
    return NULL;
}

/* r->mu held. Take the view v (n entries, owned by the caller) at epoch: each member keeps its
 * counters when it is the same incarnation, and no member stays skipped. */
static void view_adopt(struct router *r, const struct member_entry *v, size_t n, uint64_t epoch)
{
    struct rmem *m = n ? calloc(n, sizeof(*m)) : NULL;
    if (n && !m)
        return; /* keep the last view */
    for (size_t i = 0; i < n; i++) {
        struct rmem *old = find(r, v[i].id, v[i].incarnation);
        if (old)
            m[i] = *old;
        m[i].e = v[i];
        m[i].hash = place_node_hash(v[i].id);
        m[i].skipped = false;
    }
    free(r->m);
    r->m = m;
    r->n = n;
    r->epoch = epoch;
    r->have_view = true;
}

/* Reads the membership (outside the lock, R2) and adopts it when its epoch is new. */
static void view_refresh(struct router *r)
{
    struct member_entry *v = NULL;
    size_t n = 0;
    uint64_t epoch = 0;
    if (r->conf.view(r->conf.ud, &v, &n, &epoch) < 0)
        return;
    pthread_mutex_lock(&r->mu);
    if (!r->have_view || epoch != r->epoch)
        view_adopt(r, v, n, epoch);
    pthread_mutex_unlock(&r->mu);
    free(v);
}

/* The membership now (view_refresh()) and block b's placement id: that of the peer protocol's
 * block name (peer_block_name(), the name every node gives the block). 0, or -EINVAL for a block
 * the protocol cannot name (a field over its bound): no peer could be asked for it. */
static int block_place(struct router *r, const struct peer_block *b, uint64_t *id)
{
    view_refresh(r);
    char name[PEER_NAME_MAX + 1];
    int n = peer_block_name(b, name, sizeof(name));
    if (n < 0)
        return n;
    *id = place_block_id(name, (size_t)n, b->index);
    return 0;
}

/* r->mu held: whether member i may be placed on now (its probe is due when skipped). */
static bool usable_now(const struct rmem *m, uint64_t now)
{
    return m->e.addr[0] && (!m->skipped || now >= m->skip_until_ms);
}

/* r->mu held. The member block `id` goes to: its index into r->m, or -1 (no sharing member);
 * *self true when that is this node. *other: the best-ranked sharing member that is not this
 * node (the previous owner of a block this node took over when it joined), or -1. bounded:
 * bounded load may move the block down its order (else the owner, whatever the loads). */
static ssize_t pick(struct router *r, uint64_t id, bool bounded, bool *self, ssize_t *other)
{
    uint64_t now = now_ms();
    struct place_node nodes_small[32];
    uint64_t load_small[32];
    size_t map_small[32];
    struct place_node *nodes = nodes_small;
    uint64_t *load = load_small;
    size_t *map = map_small;
    if (r->n > 32) {
        nodes = malloc(r->n * sizeof(*nodes));
        load = malloc(r->n * sizeof(*load));
        map = malloc(r->n * sizeof(*map));
    }
    ssize_t got = -1;
    *other = -1;
    if (!nodes || !load || !map)
        goto out;
    size_t k = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (!usable_now(&r->m[i], now))
            continue;
        nodes[k] = (struct place_node){.hash = r->m[i].hash, .weight = r->m[i].e.weight};
        load[k] = r->m[i].inflight;
        total += load[k];
        map[k++] = i;
    }
    if (!k)
        goto out;
    size_t top[2];
    ssize_t nt = place_rank(nodes, k, id, 2, top);
    if (nt <= 0)
        goto out;
    for (ssize_t t = 0; t < nt && *other < 0; t++)
        if (strcmp(r->m[map[top[t]]].e.id, r->self_id) != 0)
            *other = (ssize_t)map[top[t]];
    /* the owner takes the block while this node has fewer than spill_min requests in flight
     * to it; past that, bounded load decides (a spill costs the next node a backend fetch of
     * the block, unless it has it: a few requests in flight are no hot spot worth that) */
    ssize_t p = (ssize_t)top[0];
    if (bounded && load[p] >= r->conf.spill_min)
        p = place_pick_bounded(nodes, k, id, load, total, r->conf.balance);
    if (p < 0)
        goto out;
    got = (ssize_t)map[p];
    *self = strcmp(r->m[got].e.id, r->self_id) == 0;
out:
    if (nodes != nodes_small) {
        free(nodes);
        free(load);
        free(map);
    }
    return got;
}

/* A failure that says something about the peer rather than the block: skip the peer. */
static bool skip_reason(enum peer_fail f)
{
    return f == PEER_FAIL_CONNECT || f == PEER_FAIL_TIMEOUT || f == PEER_FAIL_AUTH ||
           f == PEER_FAIL_GARBAGE || f == PEER_FAIL_CHECKSUM;
}

/* Takes the outcome of a request to (id, incarnation): n bytes or a failure. A handover (a
 * copy asked of the previous owner) that it does not hold is no failure of the peer's. */
static void account(struct router *r, const char *id, uint64_t incarnation, ssize_t n,
                    enum peer_fail fail, bool handover, bool warm)
{
    pthread_mutex_lock(&r->mu);
    struct rmem *m = find(r, id, incarnation);
    if (m && m->inflight)
        m->inflight--;
    if (n >= 0 && warm) {
        r->warms++;
        if (m) {
            m->ok++;
            m->skipped = false;
        }
    } else if (n >= 0) {
        r->peer_blocks++;
        r->peer_bytes += (uint64_t)n;
        if (handover)
            r->handovers++;
        if (m) {
            m->ok++;
            m->bytes += (uint64_t)n;
            m->skipped = false;
        }
    } else if (handover && fail == PEER_FAIL_NOT_FOUND) {
        r->backend[ROUTER_SELF]++;
    } else {
        r->backend[handover ? ROUTER_SELF : ROUTER_PEER_FAILED]++;
        if (m) {
            m->failures++;
            if (skip_reason(fail)) {
                if (!m->skipped)
                    r->skips++;
                m->skipped = true;
                m->skip_until_ms = now_ms() + r->conf.probe_ms;
            }
        }
    }
    pthread_mutex_unlock(&r->mu);
}

static ssize_t fall_back(struct router *r, enum router_why w, enum router_why *why)
{
    pthread_mutex_lock(&r->mu);
    r->backend[w]++;
    pthread_mutex_unlock(&r->mu);
    if (why)
        *why = w;
    return -EAGAIN;
}

enum ask { ASK_FETCH, ASK_SERVING, ASK_WARM };

/* router_fetch (ASK_FETCH, ASK_SERVING) and router_warm (ASK_WARM, no buffer). */
static ssize_t route(struct router *r, const struct peer_block *b, void *buf, size_t len,
                     enum ask mode, const struct tier_ioctx *io, enum router_why *why)
{
    if (r->conf.may_serve && !r->conf.may_serve(r->conf.ud))
        return fall_back(r, ROUTER_FENCED, why);
    uint64_t id;
    if (block_place(r, b, &id) != 0)
        return fall_back(r, ROUTER_ALONE, why);

    char peer_id[MEMBER_ID_MAX + 1], addr[MEMBER_ADDR_MAX + 1];
    uint64_t incarnation;
    bool self = false;
    ssize_t other = -1;
    pthread_mutex_lock(&r->mu);
    ssize_t i = pick(r, id, true, &self, &other);
    /* this node's own block, or one it serves: only a copy the previous owner holds (handover),
     * never a fetch by another node; a warm-up of its own block is its own to do */
    bool handover = i >= 0 && (self || mode == ASK_SERVING) && mode != ASK_WARM;
    if (handover)
        i = other;
    if (i < 0 || (self && mode == ASK_WARM)) {
        pthread_mutex_unlock(&r->mu);
        return fall_back(r, i < 0 && !handover && !self ? ROUTER_ALONE : ROUTER_SELF, why);
    }
    strcpy(peer_id, r->m[i].e.id);
    strcpy(addr, r->m[i].e.addr);
    incarnation = r->m[i].e.incarnation;
    pthread_mutex_unlock(&r->mu);

    /* admission (R2: no lock); a handover never queues (router_conf.admit). The request counts
     * as the peer's load only once admitted: requests queued in the lane are no load on the
     * peer, and must not make bounded load spill blocks to nodes that would fetch them. */
    size_t bytes = mode == ASK_WARM ? 0 : len;
    uint64_t t0 = 0;
    if (r->conf.admit) {
        if (r->conf.admit(r->conf.ud, io, bytes, mode == ASK_WARM, !handover) != 0)
            return fall_back(r, ROUTER_ADMIT, why);
        t0 = tier_now_mono_ns();
    }
    pthread_mutex_lock(&r->mu);
    struct rmem *m = find(r, peer_id, incarnation); /* NULL: it left meanwhile (R1) */
    if (m) {
        m->inflight++;
        m->requests++;
        if (m->skipped) /* this request is its probe: the next ones wait for its outcome */
            m->skip_until_ms = now_ms() + r->conf.probe_ms;
    }
    pthread_mutex_unlock(&r->mu);
    struct peer_block ask = *b;
    ask.cached_only = handover;
    enum peer_fail fail = PEER_FAIL_ERROR;
    ssize_t n;
    if (mode == ASK_WARM) {
        n = peer_warm(r->conf.peer, addr, &ask, &fail);
    } else {
        n = peer_fetch(r->conf.peer, addr, &ask, buf, len, &fail);
        if (n >= 0 && (size_t)n != len) { /* peer_fetch checks the length; never trust it */
            n = -EBADMSG;
            fail = PEER_FAIL_GARBAGE;
        }
    }
    if (r->conf.admit && r->conf.admit_done)
        r->conf.admit_done(r->conf.ud, io, bytes, mode == ASK_WARM, !handover, n,
                           tier_now_mono_ns() - t0);
    account(r, peer_id, incarnation, n, fail, handover, mode == ASK_WARM);
    if (n < 0) {
        if (why)
            *why = handover ? ROUTER_SELF : ROUTER_PEER_FAILED;
        return -EAGAIN;
    }
    return n;
}

ssize_t router_fetch(struct router *r, const struct peer_block *b, void *buf, size_t len,
                     bool serving, const struct tier_ioctx *io, enum router_why *why)
{
    return route(r, b, buf, len, serving ? ASK_SERVING : ASK_FETCH, io, why);
}

int router_warm(struct router *r, const struct peer_block *b, const struct tier_ioctx *io,
                enum router_why *why)
{
    ssize_t n = route(r, b, NULL, 0, ASK_WARM, io, why);
    return n < 0 ? (int)n : 0;
}

bool router_serves_for(struct router *r, const struct peer_block *b, const char *asker)
{
    uint64_t id;
    if (block_place(r, b, &id) != 0)
        return false;
    const struct rmem *me = NULL, *them = NULL;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++) {
        const struct rmem *m = &r->m[i];
        if (!m->e.addr[0])
            continue;
        if (strcmp(m->e.id, r->self_id) == 0)
            me = m;
        else if (asker && strcmp(m->e.id, asker) == 0)
            them = m;
    }
    bool ok =
        me && (!them || place_better(place_score(me->hash, id, me->e.weight), me->hash,
                                     place_score(them->hash, id, them->e.weight), them->hash));
    pthread_mutex_unlock(&r->mu);
    return ok;
}

int router_stats_get(struct router *r, struct router_stats *st, struct router_member **members,
                     size_t *n)
{
    pthread_mutex_lock(&r->mu);
    memset(st, 0, sizeof(*st));
    st->epoch = r->epoch;
    st->peer_blocks = r->peer_blocks;
    st->peer_bytes = r->peer_bytes;
    memcpy(st->backend, r->backend, sizeof(st->backend));
    st->skips = r->skips;
    st->handovers = r->handovers;
    st->warms = r->warms;
    if (members) {
        *members = NULL;
        *n = 0;
        struct router_member *out = r->n ? calloc(r->n, sizeof(*out)) : NULL;
        if (r->n && !out) {
            pthread_mutex_unlock(&r->mu);
            return -ENOMEM;
        }
        double total = 0;
        for (size_t i = 0; i < r->n; i++)
            if (r->m[i].e.addr[0])
                total += r->m[i].e.weight;
        uint64_t now = now_ms();
        for (size_t i = 0; i < r->n; i++) {
            const struct rmem *m = &r->m[i];
            struct router_member *o = &out[i];
            strcpy(o->id, m->e.id);
            strcpy(o->addr, m->e.addr);
            o->weight = m->e.weight;
            o->share = m->e.addr[0] && total > 0 ? m->e.weight / total : 0;
            o->skipped = m->skipped && now < m->skip_until_ms;
            o->inflight = m->inflight;
            o->requests = m->requests;
            o->ok = m->ok;
            o->bytes = m->bytes;
            o->failures = m->failures;
        }
        *members = out;
        *n = r->n;
    }
    pthread_mutex_unlock(&r->mu);
    return 0;
}
