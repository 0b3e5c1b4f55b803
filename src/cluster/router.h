/* SPDX-License-Identifier: Apache-2.0 */
/* router.h - which peer a node asks for a block, and what it does when the peer fails
 * (docs/CLUSTER.md "Peer reads").
 *
 * For each block it would otherwise fetch from the backend, a node asks router_fetch(): the
 * router reads the membership (a callback: the daemon's is member_view()), places the block over
 * the members that share (a non-empty address) by weighted rendezvous hashing, with bounded
 * load (place.h) once this node has spill_min requests in flight to the owner (the load is this
 * node's requests in flight to each; its own is 0: it does not know its peers' requests to
 * it), and when the block's pick is
 * another node, reads it from that node (peer.h); for a block of its own it first asks the next
 * node in the block's order for a copy that node holds (the previous owner's, after a join).
 * Everything else is a fallback to the backend
 * (-EAGAIN), counted by its reason: this node owns the block, it is fenced (may_serve false), no
 * member shares, the peer failed, or the request was not admitted (router_conf.admit). A peer that
 * failed for a reason of its own (no connection, a timeout, a wrong secret, garbage, a bad
 * checksum) is skipped, as if it had left, until the membership changes or `probe_ms` has passed
 * (then the next block placed on it probes it): so a dead or slow peer costs a reader one deadline,
 * and the next readers none. A read never fails because a peer did.
 *
 * No librados here (the membership comes through the callback), so unit tests drive it with a
 * view of their own. Thread-safe: one mutex guards the view, the loads and the counters; no lock
 * is held across a peer request. */
#ifndef TIER_CLUSTER_ROUTER_H
#define TIER_CLUSTER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cluster/member_entry.h"
#include "cluster/peer.h"
#include "common/ioctx.h"

/* The membership now: entries (malloc'd, the caller frees), their count and the epoch; 0 or a
 * negative errno (the router then keeps its last view). */
typedef int (*router_view_fn)(void *ud, struct member_entry **out, size_t *n, uint64_t *epoch);

struct router_conf {
    const char *self_id; /* this node's id: a block it owns is its own to fetch */
    double balance;      /* bounded load's c (place.h); <= 1: 1.25 */
    uint32_t probe_ms;   /* how long a failed peer is skipped; 0: 10000 */
    /* requests in flight from this node to a block's owner below which it is asked whatever
     * the others' loads (bounded load decides only past it); 0: 16 */
    uint32_t spill_min;
    struct peer_client *peer; /* borrowed: the client requests go out on */
    router_view_fn view;
    bool (*may_serve)(void *ud); /* false: this node is fenced, asks no peer. NULL: never fenced */
    /* Admission of every peer request before it is sent (the daemon's `peers` scheduler lane),
     * after the peer is picked; NULL: none. admit: 0 (then admit_done is called once, after the
     * request, with admit's arguments, its result and the time it took), or a negative errno: the
     * request is not sent and the block goes to the backend (ROUTER_ADMIT). io is router_fetch's or
     * router_warm's (the reader's), bytes the block's length (0 for a warm). may_wait false:
     * grant now or refuse, never queue: a handover (this node's own block, or one it serves),
     * which the daemon must not make wait (docs/CLUSTER.md "Peer traffic and QoS": an endpoint
     * thread never waits on a lane). No lock of the router is held across either call. */
    int (*admit)(void *ud, const struct tier_ioctx *io, size_t bytes, bool warm, bool may_wait);
    void (*admit_done)(void *ud, const struct tier_ioctx *io, size_t bytes, bool warm,
                       bool may_wait, ssize_t result, uint64_t service_ns);
    void *ud;
};

/* Why a block went to the backend instead of a peer. */
enum router_why {
    ROUTER_SELF = 0,    /* this node is the block's pick */
    ROUTER_FENCED,      /* may_serve false */
    ROUTER_ALONE,       /* no other member shares (or no view yet) */
    ROUTER_PEER_FAILED, /* asked, and the peer failed (the reason: peer_client_stats) */
    ROUTER_ADMIT,       /* not asked: router_conf.admit refused it (the peers lane's deadline) */
    ROUTER_WHY_N,
};
/* "self", "fenced", "alone", "peer_failed", "admission" */
const char *router_why_name(enum router_why w);

struct router;

/* 0 and *out, or -EINVAL (no self_id, peer or view) / -ENOMEM. */
int router_new(const struct router_conf *conf, struct router **out);
void router_free(struct router *r);

/* Block b into buf (len = peer_block_len(b)) from its owner, when that is another node: len,
 * or -EAGAIN (fetch it from the backend; the reason counted, in *why when not NULL). When the
 * owner is this node, or serving (the caller loads the block for a peer's request), only a
 * handover is tried: a copy the best-ranked other node holds (b->cached_only), which is the
 * block's previous owner when this node took the block over by joining. io: whom the read is
 * for, handed to router_conf.admit (may be NULL); the request's class is b->cls. */
ssize_t router_fetch(struct router *r, const struct peer_block *b, void *buf, size_t len,
                     bool serving, const struct tier_ioctx *io, enum router_why *why);

/* A cluster's staging: block b fetched into the cache of its owner, when that is another node
 * (peer_warm: the owner answers once it holds the block, sending none of it). 0, or -EAGAIN:
 * fetch it here (this node owns it, it is fenced, no member shares, the owner failed). */
int router_warm(struct router *r, const struct peer_block *b, const struct tier_ioctx *io,
                enum router_why *why);

/* Whether this node may load block b (a fetch, when it holds no copy) for a request of the node
 * whose id is asker: when this node ranks before the asker in the block's rendezvous order (a
 * comparison of the two nodes' scores alone, so that every view with the same weights agrees),
 * or the asker shares nothing in this node's view (a consume-only node, or one it has not seen
 * join). A node asks only nodes that rank before it (its pick, or with bounded load a later
 * choice that still ranks before it: it places itself first once reached), and a node that
 * serves a peer asks no one for a fetch (only a handover, answered from a copy), so the waits a
 * request can start all go towards better-ranked nodes and never form a cycle. false when this
 * node shares nothing in its view (not joined). */
bool router_serves_for(struct router *r, const struct peer_block *b, const char *asker);

/* One member as this node's router sees it. */
struct router_member {
    char id[MEMBER_ID_MAX + 1];
    char addr[MEMBER_ADDR_MAX + 1]; /* "" : it does not share (consume-only) */
    double weight;
    double share;      /* its expected share of the blocks: weight over the sharing weight */
    bool skipped;      /* failed lately: skipped until the view changes or the probe */
    uint64_t inflight; /* this node's requests to it now */
    uint64_t requests, ok, bytes, failures; /* this node's requests to it, since it joined */
};

struct router_stats {
    uint64_t epoch;                   /* of the view in use */
    uint64_t peer_blocks, peer_bytes; /* blocks read from peers */
    uint64_t backend[ROUTER_WHY_N];   /* blocks sent to the backend, by reason */
    uint64_t skips;                   /* peers marked skipped */
    /* of peer_blocks: this node's own blocks (or ones it served) that came from another node's
     * copy (the previous owner's, after a join) */
    uint64_t handovers;
    uint64_t warms; /* blocks warmed on their owners for a cluster stage (router_warm) */
};

/* The counters, and the members (malloc'd into *members, free() it; NULL: not wanted). */
int router_stats_get(struct router *r, struct router_stats *st, struct router_member **members,
                     size_t *n);

#endif
