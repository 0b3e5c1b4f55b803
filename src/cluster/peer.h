/* SPDX-License-Identifier: Apache-2.0 */
/* peer.h - block reads between the nodes of a cluster (issue 25, docs/CLUSTER.md "Peer reads"):
 * the endpoint a node serves its cached blocks on, and the client a node asks its peers with.
 *
 * A block is named by what makes its bytes unique (struct peer_block: backend name, key, ETag,
 * version id, object size, block size, index). Every request and every answer is authenticated
 * with the cluster's shared secret (HMAC-SHA256), and every answer carries a checksum of its
 * bytes (XXH3-128) that the HMAC binds to the request's nonce and to the block's name, so a
 * client accepts only the bytes a member sent for exactly the block it asked for:
 *
 *   GET /v1/block?b=BACKEND&k=KEY&e=ETAG&v=VERSION&s=SIZE&z=BLOCK_SIZE&i=INDEX[&m=MODE][&q=CLASS]
 *     X-Tierd-Node:  the asking node's id
 *     X-Tierd-Nonce: 32 hex digits, fresh per request
 *     X-Tierd-Auth:  hex HMAC-SHA256(secret, LABEL || nonce || node || block name)
 *   200, the block's bytes (exactly its length: the last block of an object is shorter)
 *     X-Tierd-Sum:   hex XXH3-128 of the bytes
 *     X-Tierd-Auth:  hex HMAC-SHA256(secret, "tierd-peer-rsp" || nonce || block name || sum)
 *   400 a malformed query (or another method or path); 401 the request's HMAC is wrong, or a
 *   header is malformed or missing; 404 no such backend or object; 412 the object's ETag is not
 *   e (stale); 409 the block size differs (or is over 64 MiB); 503 the node does not serve
 *   (fenced, share = no, busy); 500 its fetch failed. GET /v1/ping (the same headers, an empty
 *   block name): 204 with X-Tierd-Sum and X-Tierd-Auth over no bytes (whether or not the node
 *   serves now).
 *
 * MODE (optional, not part of the block's name) is c (a handover: only a copy the peer holds) or
 * w (a warm); CLASS (optional) is the asker's class, 0 inference, 1 training, 2 checkpoint, 3
 * background (ioctx.h), absent: training; the peer serves the request in that class (its QoS,
 * docs/CLUSTER.md "Peer traffic and QoS"). LABEL binds both to the request, so neither can be
 * changed on the way: "tierd-peer-req", then "-c" or "-w" for a mode, then "-q" and the class's
 * digit for a class other than training (peer_req_mac_mode). Any other MODE or CLASS is a 400.
 * The node (X-Tierd-Node) enters the request's HMAC as a field (its decimal length, ':' and its
 * bytes) after the nonce, so the asker's id cannot be changed on the way either.
 *
 * The block name in the HMACs is each field as its decimal length, ':' and its bytes, in the
 * order above (the numbers as decimal strings), so no two distinct blocks share it. The nonce and
 * the sum enter the HMACs as their 16 bytes (the sum canonical: big-endian), not as their hex.
 * The endpoint accepts canonical decimals only (no sign, no leading zero, no overflow), each
 * value once, strings within their bounds (src/cluster/peer_proto.h: backend and ETag 255 bytes,
 * key and version 1,024) and an index inside the object. TLS (when configured) is the
 * transport's; the HMACs are checked either way.
 *
 * Thread-safety: every function may be called from any thread; a server serves each
 * connection on its own thread (the serve callback may block). */
#ifndef TIER_CLUSTER_PEER_H
#define TIER_CLUSTER_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/ioctx.h"

#define PEER_SECRET_MIN 16 /* bytes of a cluster secret, at least */

/* One block. Strings are borrowed, NUL-terminated; version "" when none. */
struct peer_block {
    const char *backend;
    const char *key;
    const char *etag;
    const char *version; /* "" for the current object */
    uint64_t size;       /* the object's size (with the ETag, fixes every block's length) */
    uint32_t block_size; /* the asker's block size: the owner refuses another (409) */
    uint64_t index;
    /* Not part of the block's name: ask only for a copy the peer holds (`m=c`): it answers 404
     * rather than fetch the block from its backend (a new owner asking the previous one). */
    bool cached_only;
    /* Not part of the name either: fetch the block into the peer's cache and send none of it
     * (`m=w`, a cluster stage): it answers 204 once it holds the block. */
    bool warm;
    /* Not part of the name either: the asker's class (`q=`), bound into the request's HMAC; the
     * peer serves the request in it. A block made with all fields zero says inference: set it
     * (the daemon's is the reader's class; peer_query_finish gives training when q is absent). */
    enum tier_io_class cls;
};

/* The length of block b (0 when index is past the object's end). */
uint32_t peer_block_len(const struct peer_block *b);

/* ---- the endpoint ------------------------------------------------------------------------- */

/* The server's callback: the bytes of b (peer_block_len(b) of them) into buf. Returns that
 * length, or -ENOENT (no such backend or object: 404), -ESTALE (ETag differs: 412), -EXDEV
 * (block size differs: 409), -EAGAIN (not serving now: 503), any other -errno (500). */
typedef ssize_t (*peer_serve_fn)(void *ud, const char *from_node, const struct peer_block *b,
                                 void *buf, size_t len);

struct peer_server_conf {
    const char *listen; /* HOST:PORT (IPv4 address or name, "" every one; port 0: any free) */
    const void *secret; /* the cluster secret, >= PEER_SECRET_MIN bytes (copied) */
    size_t secret_len;
    const char *tls_cert; /* PEM files; both or neither (NULL: plain HTTP) */
    const char *tls_key;
    unsigned max_connections; /* 0: 64 */
    peer_serve_fn serve;
    /* Called before every block is served: false answers 503 (self-fencing). NULL: always. */
    bool (*may_serve)(void *ud);
    void *ud;
};

struct peer_server_stats {
    uint64_t served, served_bytes; /* 200s and their bytes */
    uint64_t warmed;               /* 204s to a warm (m=w): blocks fetched here for a stage */
    uint64_t auth_failures;        /* 401: a wrong secret, a malformed or missing header */
    uint64_t bad_requests;         /* 400: a malformed query */
    uint64_t refused;              /* 503: may_serve false or the serve callback's -EAGAIN */
    uint64_t not_found, stale, mismatched, errors; /* 404, 412, 409, 500 */
};

struct peer_server;

/* Listens and serves. 0 and *out, or -errno with tier_err_msg() naming what failed (the address,
 * the TLS files, the secret's length). */
int peer_server_start(const struct peer_server_conf *conf, struct peer_server **out);
/* The port it listens on (the one picked for port 0). */
uint16_t peer_server_port(const struct peer_server *s);
void peer_server_stats_get(struct peer_server *s, struct peer_server_stats *out);
/* Stops listening, waits for the requests in progress, frees s. NULL is a no-op. */
void peer_server_stop(struct peer_server *s);

/* ---- the client --------------------------------------------------------------------------- */

struct peer_client_conf {
    const char *node_id; /* this node's id (sent as X-Tierd-Node) */
    const void *secret;  /* as the server's (copied) */
    size_t secret_len;
    const char *tls_ca; /* PEM file: use https and accept peers whose certificate it signed
                         * (their addresses are not checked against it); NULL: plain http */
    /* A request that has received no byte for stall_ms (rounded up to whole seconds once
     * connected), or taken total_ms in all, fails with -ETIMEDOUT; connecting has stall_ms.
     * 0: 2000 and 30000. */
    uint32_t stall_ms, total_ms;
};

/* Why a peer read failed: peer_fetch()'s result and the client's counters. */
enum peer_fail {
    PEER_FAIL_CONNECT = 0, /* -ECONNREFUSED: no connection (refused, unreachable, reset, closed
                            * without an answer, TLS failed) */
    PEER_FAIL_TIMEOUT,     /* -ETIMEDOUT: stalled or over total_ms */
    PEER_FAIL_AUTH,        /* -EACCES: the peer said 401, or its answer's HMAC is wrong */
    PEER_FAIL_GARBAGE,     /* -EBADMSG: not the protocol (not HTTP, another status such as
                            * 400, a missing or malformed header, another length) */
    PEER_FAIL_CHECKSUM,    /* -EILSEQ: the bytes do not match their checksum */
    PEER_FAIL_STALE,       /* -ESTALE: 412 */
    PEER_FAIL_NOT_FOUND,   /* -ENOENT: 404 */
    PEER_FAIL_REFUSED,     /* -EAGAIN: 503, or 409 (block sizes differ) */
    PEER_FAIL_ERROR,       /* -EIO: 500 */
    PEER_FAIL_N,
};
const char *peer_fail_name(enum peer_fail f); /* "connect", "timeout", "auth", ... */

struct peer_client_stats {
    uint64_t requests, ok, bytes; /* block requests, those that returned bytes, their bytes */
    uint64_t fail[PEER_FAIL_N];
};

struct peer_client;

/* 0 and *out, or -errno with tier_err_msg() (the secret's length, the node id, an unreadable
 * tls_ca). */
int peer_client_new(const struct peer_client_conf *conf, struct peer_client **out);
void peer_client_free(struct peer_client *pc);

/* Block b from the peer at addr (HOST:PORT) into buf (len = peer_block_len(b)), verified. Returns
 * len, or the negative errno of its enum peer_fail (counted, with fail_out set when not NULL);
 * buf's content is undefined after a failure. -EINVAL, not counted and no request made, when
 * len is not peer_block_len(b) or 0, a string of b is over its bound or the backend or key is
 * empty, the block size is over 64 MiB, b's class is not a class, or addr is not HOST:PORT. */
ssize_t peer_fetch(struct peer_client *pc, const char *addr, const struct peer_block *b, void *buf,
                   size_t len, enum peer_fail *fail_out);
/* Asks the peer at addr to fetch block b into its cache (b->warm is implied): 0 once it holds it,
 * or as peer_fetch (counted as a block request, with no bytes). */
int peer_warm(struct peer_client *pc, const char *addr, const struct peer_block *b,
              enum peer_fail *fail_out);
/* GET /v1/ping, its answer verified: 0, or as peer_fetch (not counted in the stats). */
int peer_ping(struct peer_client *pc, const char *addr, enum peer_fail *fail_out);
void peer_client_stats_get(struct peer_client *pc, struct peer_client_stats *out);

#endif
