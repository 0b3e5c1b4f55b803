/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_int.h - the control API as a pure function, private to src/api (api.c, the libmicrohttpd
 * adapter and the listeners; api_route.c, the route table, admission and dispatch; the handler
 * files api_*.c) and to its tests (tests/fuzz/fuzz_api.c, tests/unit/test_api*.c).
 *
 * A request is answered in two steps, as the HTTP server sees it: api_admit() when the request
 * line and headers have arrived (token, caller's rights, declared body size: a refusal is answered
 * before any body byte is read), then api_handle() with the whole body. Both read one row of the
 * route table (api_routes[], api_route.c): who may call, whether it changes state, its body bound
 * and its handler. Both fill a struct api_reply whose body is a JSON object (a fixed text when
 * even that cannot be built), so no request ends in an empty reply; the exceptions are GET
 * /metrics (Prometheus text) and the dashboard's files (GET /ui, /ui/...), whose content_type
 * says what they are.
 */
#ifndef TIER_API_API_INT_H
#define TIER_API_API_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

#include <jansson.h>

#include "common/ioctx.h"

struct tierd;

#define API_BODY_MAX (64 * 1024)
/* POST /v1/hints carries a whole epoch's order (a path per sample): its bound, for an
 * administrator and for anyone else (who hints in more POSTs, "append": true) */
#define API_HINTS_BODY_MAX (32 * 1024 * 1024)
#define API_HINTS_BODY_MAX_USER (4 * 1024 * 1024)
/* The body bound of a request: its route's (api_routes[]), API_BODY_MAX for no route. */
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

/* ---- the route table (api_route.c; docs/API.md "Routes" lists the same rows) ---------- */

/* A handler answers one request into *out and returns its status. rest: what follows the
 * route's path for an API_PREFIX route ("42" of /v1/jobs/42), "" for an API_EXACT one. */
typedef unsigned api_handler_fn(struct tierd *d, const struct api_request *rq,
                                struct api_reply *out, const char *rest);

enum api_match {
    API_EXACT,  /* the url is the path */
    API_PREFIX, /* the url starts with the path (which ends in '/'); the rest goes to the handler */
};

/* Who may call a route, as api_admit() decides before the body (for API_OWN the handler then
 * checks whose tenant the request is for). */
enum api_access {
    API_PUBLIC, /* anyone who may connect; on TCP without the token (the dashboard's files) */
    API_READ,   /* anyone who may connect; on TCP with the token. Routes that name files answer
                 * only about the namespaces the caller may read (api_caller_reads) */
    API_OWN,    /* as API_READ, for the caller's own tenant: the handler checks whose (hints,
                 * stall reports) */
    API_ADMIN,  /* on the socket root, tierd's uid or [api] admin_group (else 403); on TCP the
                 * token */
};

struct api_route {
    const char *method;
    const char *path;
    enum api_match match;
    api_handler_fn *handler;
    enum api_access access;
    bool mutates;         /* changes tierd's state (docs/API.md; admission goes by access) */
    size_t body_max;      /* the body bound for an administrator (or the TCP token) */
    size_t body_max_user; /* and for anyone else */
};

extern const struct api_route api_routes[];
extern const size_t api_nroutes;

/* The route of METHOD url (the first row that matches, in table order), or NULL; *rest (may be
 * NULL) gets what follows an API_PREFIX route's path in url. */
const struct api_route *api_route_find(const char *method, const char *url, const char **rest);

/* Is METHOD url a route answered on TCP without the token (API_PUBLIC: the dashboard's static
 * files, exact names)? */
bool api_route_public(const char *method, const char *url);

/* Is METHOD url refused on the Unix socket to a caller without admin rights? API_ADMIN routes,
 * and a request that matches no route unless it is a GET or HEAD (so probing for a writing
 * route a build lacks is refused as its writing would be). */
bool api_route_admin(const char *method, const char *url);

/* Is s (len bytes) valid UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF)? */
bool api_utf8_valid(const char *s, size_t len);
/* s with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD, cut on a
 * character boundary to at most max bytes; malloc'd, NULL without memory. */
char *api_utf8_clean(const char *s, size_t max);

/* ---- shared by the handler files (api_util.c, api_perm.c, api_stage.c, api_tenants.c) ---- */

/* The handlers of the routes (one file per group: api_status.c, api_stage.c, api_writeback.c,
 * api_tenants.c, api_jobs.c, api_datasets.c, api_reload.c, api_policy.c, api_qos.c,
 * api_hints.c, api_progress.c, api_ui.c, api_cluster.c). */
api_handler_fn api_status_get, api_stats_get, api_metrics_get, api_telemetry_get, api_health;
api_handler_fn api_stage_post, api_stage_get, api_pin, api_unpin, api_evict;
api_handler_fn api_wait, api_checkpoints;
api_handler_fn api_tenants_get, api_tenants_post;
api_handler_fn api_jobs_post, api_jobs_list, api_jobs_one;
api_handler_fn api_datasets_post, api_datasets_list, api_datasets_one;
api_handler_fn api_reload, api_policy_get, api_policy_run, api_policy_plan;
api_handler_fn api_qos_get, api_qos_put;
api_handler_fn api_hints_post, api_hints_get, api_hints_delete;
api_handler_fn api_progress_post;
api_handler_fn api_ui;
api_handler_fn api_cluster_get;
api_handler_fn api_advice_get; /* api_advice.c */
struct dynbuf;
/* The advice's series for /metrics (docs/API.md "Metrics"), appended to b: 0 or -errno. */
int api_advice_prom(struct tierd *d, struct dynbuf *b);

/* JSON strings: s made valid UTF-8 (bytes that are not become U+FFFD; NULL is ""), s's exact
 * bytes in base64 (RFC 4648), and an array of v[0..n) as api_jstr; NULL without memory. */
json_t *api_jstr(const char *s);
json_t *api_jb64(const char *s);
json_t *api_jstr_array(char *const *v, size_t n);

/* The HTTP status of a negative errno (the one place that chooses it; docs/API.md lists it). */
unsigned api_http_status(int neg);
/* Answer status with j (consumed); a NULL j or a failed dump answers the fixed fallback. */
unsigned api_reply_json(struct api_reply *out, unsigned status, json_t *j);
/* Answer {"error": fmt..., "errno": name of neg} with api_http_status(neg), or with status. */
unsigned api_reply_error(struct api_reply *out, int neg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
unsigned api_reply_error_status(struct api_reply *out, unsigned status, int neg, const char *fmt,
                                ...) __attribute__((format(printf, 4, 5)));
/* The body as a JSON object (the caller json_decref()s it); NULL: *ret is the 400 answered. */
json_t *api_parse_body(const struct api_request *rq, struct api_reply *out, unsigned *ret);
/* The first key of the JSON object j that is not one of fields[0..n), or NULL. */
const char *api_unknown_field(json_t *j, const char *const *fields, size_t n);
/* 404 for a tenant name the registry does not know. */
unsigned api_reply_no_tenant(struct api_reply *out, const char *name);
/* A numeric id field ("uid", "gid") of j: *has says whether it is given; -EINVAL when it is not
 * a number from 0 to 4294967294. */
int api_id_field(json_t *j, const char *key, bool *has, uint32_t *val);

/* The backend calls the API makes itself (resolving a path for pin, stage, evict): an operator
 * waits on them, so they go as inference, tenant default. */
extern const struct tier_ioctx api_io;

/* What a caller may read (api_perm.c): the namespace of a mount path, or NULL; the 403 for a
 * namespace the caller may not read; and the objects of the array a whose "path" lies in such a
 * namespace (or in none) left out (returns how many). */
const struct tierd_ns_conf *api_ns_of(struct tierd *d, const char *path);
unsigned api_reply_not_readable(struct api_reply *out, const struct api_request *rq,
                                const char *path, const struct tierd_ns_conf *nc);
size_t api_filter_paths(struct tierd *d, const struct api_request *rq, json_t *a);

/* The (backend, key prefix) a mount path stands for (api_stage.c): the namespace prefix for a
 * namespace root, the exact key for an object, "key/" for a directory. And the same for a dataset
 * version's path (dataset.h, DATASET_VIEW): 1 when path is not one; dry: no backend I/O. */
struct tierd_ns;
int api_path_prefix(struct tierd *d, const char *path, struct tierd_ns **ns, char **prefix);
int api_version_prefix(struct tierd *d, const char *path, struct tierd_ns **ns, char **prefix,
                       bool dry);

#endif
