/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_int.h - the control API as a pure function, private to api.c (the libmicrohttpd adapter and
 * the listeners), api_handlers.c (routing, handlers, JSON) and the fuzz target
 * tests/fuzz/fuzz_api.c.
 *
 * A request is answered in two steps, as the HTTP server sees it: api_admit() when the request
 * line and headers have arrived (token, caller's rights, declared body size: a refusal is answered
 * before any body byte is read), then api_handle() with the whole body. Both fill a struct
 * api_reply whose body is a JSON object (a fixed text when even that cannot be built), so no
 * request ends in an empty reply; the exceptions are GET /metrics (Prometheus text) and the
 * dashboard's files (GET /ui, /ui/...), whose content_type says what they are.
 */
#ifndef TIER_API_API_INT_H
#define TIER_API_API_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

struct tierd;

#define API_BODY_MAX (64 * 1024)
/* POST /v1/hints carries a whole epoch's order (a path per sample): its bound, for an
 * administrator and for anyone else (who hints in more POSTs, "append": true) */
#define API_HINTS_BODY_MAX (32 * 1024 * 1024)
#define API_HINTS_BODY_MAX_USER (4 * 1024 * 1024)
/* The body bound of a request (API_BODY_MAX but for POST /v1/hints). */
size_t api_body_max(const char *method, const char *url, bool admin);

/* What the server knows of a request before its body. */
struct api_head {
    const char *method;
    const char *url;           /* percent-decoded path, without the query */
    bool tcp;                  /* came over the TCP listener: the bearer token is required */
    const char *authorization; /* the Authorization header or NULL */
    bool may_mutate;           /* Unix socket: the caller may change state (SO_PEERCRED check) */
    int64_t content_length;    /* declared body size; -1 when unknown (chunked, none) */
};

struct api_request {
    const char *method;
    const char *url;      /* percent-decoded path, without the query */
    const char *arg_path; /* the percent-decoded ?path= argument, or NULL */
    const char *body;     /* NULL: no body */
    size_t body_len;
    /* who asks: admin as api_head.may_mutate; peer: pid/uid/gid from SO_PEERCRED are known
     * (the Unix socket), for requests a caller may make for its own tenant (POST /v1/hints) */
    bool admin, peer;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    /* the peer's supplementary groups (SO_PEERGROUPS), for the namespaces a caller who is not
     * an administrator may read (api_caller_reads); NULL: none */
    const gid_t *groups;
    size_t ngroups;
    bool groups_unknown; /* SO_PEERGROUPS failed: the caller may be in groups not listed */
};

struct api_reply {
    unsigned status;
    char *body; /* JSON text (or content_type); malloc'd unless is_static */
    size_t len;
    bool is_static;           /* body is a fixed text (fallback, embedded file), not to be freed */
    const char *content_type; /* static string; NULL: application/json */
    unsigned retry_after_s;   /* > 0: sent as Retry-After (a 429) */
};

/* 0: go on and read the body; 1: refused, *out holds the answer (401, 403, 413). */
int api_admit(struct tierd *d, const struct api_head *h, struct api_reply *out);
/* Route and answer one request; *out always holds a JSON object afterwards. */
void api_handle(struct tierd *d, const struct api_request *rq, struct api_reply *out);
/* May the caller of rq read the namespace nc through the mount? An administrator (or the TCP
 * token) always; anyone else when the mount lets other users in (allow_other) and the
 * namespace's directory mode, as the mount shows it ([namespace] or [mount] uid, gid and umask),
 * grants read to the caller's class: owner by uid, group by primary or supplementary gid, else
 * others. */
struct tierd_ns_conf;
bool api_caller_reads(const struct tierd *d, const struct api_request *rq,
                      const struct tierd_ns_conf *nc);

/* The answer for a body that grew past API_BODY_MAX while being read (chunked uploads). */
void api_reply_too_large(struct api_reply *out);
void api_reply_fini(struct api_reply *r);

/* The Unix socket's connections now (api.c; all zero before the server runs and in the test
 * fixture, which has none). */
struct api_conn_stats {
    int admin, user;  /* open connections of administrators and of other callers */
    int user_uids;    /* distinct uids among the other callers */
    uint64_t refused; /* connections refused at accept since start (per-uid or users' share) */
};
void api_conn_stats(const struct tierd *d, struct api_conn_stats *out);

/* Is METHOD url one of the dashboard's static files (GET of /ui, /ui/, /ui/dashboard.js,
 * /ui/dashboard.css, /ui/chart.js: exact names)? They carry no data and are answered on TCP
 * without the token (docs/API.md, Dashboard). */
bool api_route_public(const char *method, const char *url);

/* Does METHOD url change state (everything but GET and POST /v1/wait)? Such requests on the Unix
 * socket need a caller with admin rights. */
bool api_route_mutates(const char *method, const char *url);

/* Is s (len bytes) valid UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF)? */
bool api_utf8_valid(const char *s, size_t len);
/* s with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD, cut on a
 * character boundary to at most max bytes; malloc'd, NULL without memory. */
char *api_utf8_clean(const char *s, size_t max);

#endif
