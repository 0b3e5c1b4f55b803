/* SPDX-License-Identifier: Apache-2.0 */
/* peer_proto.h - the pure parts of the peer protocol (peer.h), private to src/cluster/peer*.c and
 * their tests and fuzz target: the block name, the two HMACs, hex, the checksum, and the strict
 * parsing of what arrives from the network (a request's query values and headers, an answer's
 * headers). No state, no I/O, no allocation: every function may be called from any thread.
 *
 * Every parser either fills its output and returns 0, or returns -EINVAL (a request) or -EBADMSG
 * (an answer) and leaves its output as it was, except struct peer_query, which collects values
 * one at a time and is checked whole by peer_query_finish(). */
#ifndef TIER_CLUSTER_PEER_PROTO_H
#define TIER_CLUSTER_PEER_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/peer.h"

/* Bounds of a block's strings, in bytes (a request past one is a 400; the client refuses to
 * send it with -EINVAL). */
#define PEER_BACKEND_MAX 255
#define PEER_KEY_MAX 1024
#define PEER_ETAG_MAX 255
#define PEER_VERSION_MAX 1024
#define PEER_NODE_MAX 255 /* X-Tierd-Node: 1..255 bytes, 0x21..0x7e */
/* The largest block size a node asks for or serves (the cache's own bound, 64 MiB): a request for
 * a larger one is answered 409 without calling the serve callback, so that no request makes the
 * server allocate more than this. */
#define PEER_BLOCK_SIZE_MAX (64u << 20)

#define PEER_NONCE_LEN 16 /* bytes; 32 hex digits on the wire */
#define PEER_SUM_LEN 16   /* XXH3-128, canonical (big-endian); 32 hex digits */
#define PEER_MAC_LEN 32   /* HMAC-SHA256; 64 hex digits */
/* The longest block name: seven fields, each at most 20 digits of length, ':' and its bytes. */
#define PEER_NAME_MAX                                                                              \
    (PEER_BACKEND_MAX + PEER_KEY_MAX + PEER_ETAG_MAX + PEER_VERSION_MAX + 3 * 20 + 7 * 21)

/* The block name of b ("LEN:BYTES" for backend, key, etag, version, then size, block_size and
 * index as decimal strings) into out (cap bytes, NUL-terminated). Returns its length, or -EINVAL
 * when a string is NULL or over its bound (or cap is too small). */
int peer_block_name(const struct peer_block *b, char *out, size_t cap);

/* HMAC-SHA256(secret, "tierd-peer-req" || nonce || node || name): the request's X-Tierd-Auth.
 * nonce is its PEER_NONCE_LEN bytes (not its hex); node is the X-Tierd-Node value, entered as
 * its decimal length, ':' and its node_len bytes (so the asker's id cannot be changed on the
 * way); name is peer_block_name()'s ("" for a ping). 0 or -EINVAL (name over PEER_NAME_MAX, node
 * NULL, empty or over PEER_NODE_MAX) or -EIO (OpenSSL failed). */
int peer_req_mac(const void *secret, size_t secret_len, const uint8_t nonce[PEER_NONCE_LEN],
                 const char *node, size_t node_len, const char *name, size_t name_len,
                 uint8_t mac[PEER_MAC_LEN]);
/* A request's mode: 0 (the block), 'c' (cached_only) or 'w' (warm); warm wins. */
char peer_block_mode(const struct peer_block *b);
/* peer_req_mac() for a request of mode (peer_block_mode()) and class cls (the asker's, struct
 * peer_block.cls): the label is "tierd-peer-req", then "-c" or "-w" for a mode, then "-q" and
 * the class's digit unless cls is training (so a request without q= and one with q=1 have the
 * same), so neither a request's mode nor its class can be changed on the way. -EINVAL for
 * another mode or a class out of range. */
int peer_req_mac_mode(const void *secret, size_t secret_len, char mode, enum tier_io_class cls,
                      const uint8_t nonce[PEER_NONCE_LEN], const char *node, size_t node_len,
                      const char *name, size_t name_len, uint8_t out[PEER_MAC_LEN]);
/* HMAC-SHA256(secret, "tierd-peer-rsp" || nonce || name || sum): the answer's X-Tierd-Auth, with
 * sum the PEER_SUM_LEN bytes of X-Tierd-Sum. 0, -EINVAL or -EIO as peer_req_mac(). */
int peer_rsp_mac(const void *secret, size_t secret_len, const uint8_t nonce[PEER_NONCE_LEN],
                 const char *name, size_t name_len, const uint8_t sum[PEER_SUM_LEN],
                 uint8_t mac[PEER_MAC_LEN]);
/* Constant-time comparison of n bytes (CRYPTO_memcmp). */
bool peer_mem_equal(const void *a, const void *b, size_t n);

/* Lower-case hex of n bytes into out (2n + 1 bytes, NUL-terminated). */
void peer_hex_encode(const uint8_t *in, size_t n, char *out);
/* Exactly 2n hex digits (either case) from s (slen bytes) into out: 0, or -EINVAL (out
 * untouched). */
int peer_hex_decode(const char *s, size_t slen, uint8_t *out, size_t n);

/* The XXH3-128 of len bytes, canonical (big-endian). */
void peer_sum(const void *buf, size_t len, uint8_t sum[PEER_SUM_LEN]);

/* ---- a request (server side) ----------------------------------------------------------------- */

/* The query values of one GET /v1/block, collected by peer_query_add() in any order, then checked
 * whole by peer_query_finish(). Its strings are copies (the block points into it). */
struct peer_query {
    char backend[PEER_BACKEND_MAX + 1];
    char key[PEER_KEY_MAX + 1];
    char etag[PEER_ETAG_MAX + 1];
    char version[PEER_VERSION_MAX + 1];
    uint64_t size, block_size, index;
    unsigned seen; /* a bit per key of "bkevszimq" (m and q optional) */
    char mode;     /* m: 0, 'c' (cached only) or 'w' (warm) */
    uint8_t cls;   /* q: 0..3 (enum tier_io_class), when seen */
    bool bad;      /* some value was refused: finish fails */
};

void peer_query_init(struct peer_query *q);
/* One query value (name and value as MHD unescaped them, with their lengths). -EINVAL, and q
 * marked bad, on: an unknown or repeated name, a value with a NUL byte or over its bound, a
 * number that is not canonical decimal (digits only, no leading zero, no overflow; z <= 2^32-1),
 * a mode other than c or w, a class other than one digit 0..3. */
int peer_query_add(struct peer_query *q, const char *name, size_t name_len, const char *value,
                   size_t value_len);
/* 0 and *b (pointing into q; its class training when q was absent), or -EINVAL: a value was
 * refused or is missing, the backend or key is empty, the block size is 0, or the index is past
 * the object's last block. */
int peer_query_finish(const struct peer_query *q, struct peer_block *b);

/* The headers of a request: node (X-Tierd-Node, 1..PEER_NODE_MAX bytes of 0x21..0x7e), nonce
 * (X-Tierd-Nonce, 32 hex digits) and auth (X-Tierd-Auth, 64 hex digits), each with its length
 * (NULL: missing). 0 with nonce and mac filled, or -EINVAL. */
int peer_req_headers_parse(const char *node, size_t node_len, const char *nonce_hex,
                           size_t nonce_len, const char *auth_hex, size_t auth_len,
                           uint8_t nonce[PEER_NONCE_LEN], uint8_t mac[PEER_MAC_LEN]);

/* ---- an answer (client side) ----------------------------------------------------------------- */

/* The headers of an answer: X-Tierd-Sum (32 hex digits) and X-Tierd-Auth (64 hex digits), each
 * with its length (NULL: missing). 0 with sum and mac filled, or -EBADMSG. */
int peer_rsp_headers_parse(const char *sum_hex, size_t sum_len, const char *auth_hex,
                           size_t auth_len, uint8_t sum[PEER_SUM_LEN], uint8_t mac[PEER_MAC_LEN]);
/* Checks an answer to the request (nonce, name): its mac against the secret (-EACCES), then its
 * len bytes against its sum (-EILSEQ). 0 when both hold; -EIO when OpenSSL failed. */
int peer_rsp_verify(const void *secret, size_t secret_len, const uint8_t nonce[PEER_NONCE_LEN],
                    const char *name, size_t name_len, const uint8_t sum[PEER_SUM_LEN],
                    const uint8_t mac[PEER_MAC_LEN], const void *buf, size_t len);

#endif
