/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_handlers.c - the control API's routing and handlers as a pure function of the request
 * (api_int.h): (method, url, headers known at admission, body) -> (status, JSON). api.c adapts
 * libmicrohttpd to it; tests/fuzz/fuzz_api.c calls it directly over a POSIX fixture. The
 * contract is docs/API.md; keep the two in step.
 *
 * Threads: called on the HTTP server's connection threads, concurrently; handlers call
 * thread-safe modules only (cache, stager, scheduler stats, tierd_resolve, the write-back
 * engine, the tenant registry). POST /v1/wait blocks its caller in wb_wait() for at most [api]
 * max_wait.
 *
 * Text: every string put into an answer goes through jstr(), which replaces bytes that are not
 * valid UTF-8 by U+FFFD (jansson refuses such strings, and a failed json_pack would lose the
 * whole answer). Paths and keys of write-back files that are not valid UTF-8 are also given
 * exactly, base64-encoded, in path_b64 / key_b64. Errors are {"error": "...", "errno": "ENOENT"}
 * with an HTTP status chosen from the errno in one place (http_status()); when even that answer
 * cannot be built (no memory), the fixed FALLBACK_BODY is sent.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "api/api_int.h"
#include "hints/hints.h"
#include "datasets/dataset.h"
#include "jobs/jobs.h"
#include "datasets/manifest.h"
#include "stage/pinmeta.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"
#include "core/state.h"
#include "api/ui_assets.h"
#include "qos/sched.h"
#include "telemetry/telemetry.h"
#include "tenant/tenant.h"
#include "writeback/wb.h"

/* Paths per POST /v1/stage: each is resolved (a backend stat) before the answer. */
#define API_STAGE_PATHS_MAX 256

/* Largest Chart.js file GET /ui/chart.js serves (Debian's chart.min.js 3.9 is 195 KiB). */
#define UI_CHARTJS_MAX (8u << 20)

/* Longest "error" text, in bytes (cut on a character boundary). */
#define ERROR_MSG_MAX 512

static const char FALLBACK_BODY[] =
    "{\"error\":\"tierd could not build the answer (out of memory); retry\",\"errno\":\"ENOMEM\"}";

/* ---- UTF-8 ----------------------------------------------------------------------------- */

bool api_utf8_valid(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t k = tier_utf8_seq(u + i, len - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

char *api_utf8_clean(const char *s, size_t max)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    size_t cap = n > (SIZE_MAX - 1) / 3 ? SIZE_MAX - 1 : n * 3;
    if (cap > max)
        cap = max;
    char *o = malloc(cap + 1);
    if (!o)
        return NULL;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t k = tier_utf8_seq(u + i, n - i);
        const char *src = k ? s + i : "\xEF\xBF\xBD";
        size_t sl = k ? k : 3;
        if (w + sl > cap)
            break;
        memcpy(o + w, src, sl);
        w += sl;
        i += k ? k : 1;
    }
    o[w] = '\0';
    return o;
}

/* A JSON string of s made valid UTF-8 (see the top of the file); NULL without memory. */
static json_t *jstr(const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s);
    if (api_utf8_valid(s, n))
        return json_stringn(s, n);
    char *c = api_utf8_clean(s, SIZE_MAX);
    if (!c)
        return NULL;
    json_t *j = json_string(c);
    free(c);
    return j;
}

/* Standard base64 (RFC 4648, with padding) of s, as a JSON string. */
static json_t *jb64(const char *s)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    char *o = malloc((n + 2) / 3 * 4 + 1);
    if (!o)
        return NULL;
    size_t w = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)u[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)u[i + 1] << 8;
        if (i + 2 < n)
            v |= u[i + 2];
        o[w++] = tab[(v >> 18) & 63];
        o[w++] = tab[(v >> 12) & 63];
        o[w++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        o[w++] = i + 2 < n ? tab[v & 63] : '=';
    }
    o[w] = '\0';
    json_t *j = json_string(o);
    free(o);
    return j;
}

/* ---- responses ------------------------------------------------------------------------- */

static unsigned http_status(int neg)
{
    switch (-neg) {
    case ENOENT:
    case ENOSYS:
        return 404;
    case EINVAL:
    case ENAMETOOLONG:
    case EISDIR:
    case ENOTDIR:
        return 400;
    case ENOSPC:
    case EDQUOT:
        return 507;
    case EACCES:
    case EPERM:
        /* a backend's permission refusal (or the caller's rights on the Unix socket); a missing
         * or wrong token is answered 401 by api_admit() itself */
        return 403;
    case E2BIG:
        return 413;
    case EROFS:
    case EEXIST:
        return 409;
    case EBUSY:
        return 429;
    case ETIMEDOUT:
        return 504;
    case ENOTSUP:
    case ESHUTDOWN:
        return 503;
    default:
        return 500;
    }
}

static void reply_fallback(struct api_reply *out)
{
    out->status = 500;
    out->body = (char *)(uintptr_t)FALLBACK_BODY;
    out->len = sizeof(FALLBACK_BODY) - 1;
    out->is_static = true;
    out->content_type = NULL;
}

/* Answer status with j (consumed); a NULL j or a failed dump answers the fallback. */
static unsigned reply_json(struct api_reply *out, unsigned status, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text) {
        reply_fallback(out);
        return out->status;
    }
    out->status = status;
    out->body = text;
    out->len = strlen(text);
    out->is_static = false;
    out->content_type = NULL;
    return status;
}

static unsigned reply_verror(struct api_reply *out, unsigned status, int neg, const char *fmt,
                             va_list ap) __attribute__((format(printf, 4, 0)));
static unsigned reply_verror(struct api_reply *out, unsigned status, int neg, const char *fmt,
                             va_list ap)
{
    char raw[4 * ERROR_MSG_MAX];
    vsnprintf(raw, sizeof(raw), fmt, ap);
    char *msg = api_utf8_clean(raw, ERROR_MSG_MAX);
    const char *name = strerrorname_np(-neg);
    json_t *j = msg ? json_pack("{s:s, s:s}", "error", msg, "errno", name ? name : "EIO") : NULL;
    free(msg);
    return reply_json(out, status, j);
}

static unsigned reply_error(struct api_reply *out, int neg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static unsigned reply_error(struct api_reply *out, int neg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    unsigned st = reply_verror(out, http_status(neg), neg, fmt, ap);
    va_end(ap);
    return st;
}

static unsigned reply_error_status(struct api_reply *out, unsigned status, int neg, const char *fmt,
                                   ...) __attribute__((format(printf, 4, 5)));
static unsigned reply_error_status(struct api_reply *out, unsigned status, int neg, const char *fmt,
                                   ...)
{
    va_list ap;
    va_start(ap, fmt);
    unsigned st = reply_verror(out, status, neg, fmt, ap);
    va_end(ap);
    return st;
}

size_t api_body_max(const char *method, const char *url, bool admin)
{
    if (method && url && !strcmp(method, "POST") && !strcmp(url, "/v1/hints"))
        return admin ? API_HINTS_BODY_MAX : API_HINTS_BODY_MAX_USER;
    return API_BODY_MAX;
}

void api_reply_too_large(struct api_reply *out)
{
    reply_error(out, -E2BIG,
                "request body over the bound (%d bytes; %d for POST /v1/hints: split the order "
                "into several POSTs with \"append\": true)",
                API_BODY_MAX, API_HINTS_BODY_MAX);
}

void api_reply_fini(struct api_reply *r)
{
    if (r && !r->is_static)
        free(r->body);
    if (r) {
        r->body = NULL;
        r->len = 0;
        r->is_static = false;
    }
}

/* ---- what a caller may read ------------------------------------------------------------- */

/* The owner, group and umask the mount shows for a node (fuse_session.c, perm_init). */
struct shown_perm {
    uid_t uid;
    gid_t gid;
    mode_t umask;
};

static struct shown_perm mount_perm(const struct tierd_config *c)
{
    return (struct shown_perm){
        .uid = c->mount_uid >= 0 ? (uid_t)c->mount_uid : getuid(),
        .gid = c->mount_gid >= 0 ? (gid_t)c->mount_gid : getgid(),
        .umask =
            c->mount_umask >= 0 ? (mode_t)c->mount_umask : (mode_t)(c->allow_other ? 027 : 022),
    };
}

static struct shown_perm ns_perm(const struct tierd_config *c, const struct tierd_ns_conf *nc)
{
    struct shown_perm m = mount_perm(c);
    return (struct shown_perm){
        .uid = nc->uid >= 0 ? (uid_t)nc->uid : m.uid,
        .gid = nc->gid >= 0 ? (gid_t)nc->gid : m.gid,
        .umask = nc->umask >= 0 ? (mode_t)nc->umask : m.umask,
    };
}

/* The permissions the mount shows for the directory path[0..len) (as fuse_inode.c's
 * tfs_path_perm: the first namespace holding it, else the mount's: the root and the virtual
 * directories above the namespaces). */
static struct shown_perm dir_perm(const struct tierd *d, const char *path, size_t len)
{
    for (size_t i = 0; i < d->nns; i++) {
        const char *np = d->ns[i].conf->path;
        size_t l = strlen(np);
        if (l <= len && strncmp(path, np, l) == 0 && (l == len || path[l] == '/'))
            return ns_perm(&d->cfg, d->ns[i].conf);
    }
    return mount_perm(&d->cfg);
}

/* Does the caller get the bits want (4: read, 1: search) on a directory shown as p with mode
 * 0555 & ~umask? The kernel's order: the owner's class, else the group's (primary or
 * supplementary gid), else the others'. With the supplementary groups unknown (SO_PEERGROUPS
 * failed), a caller who is neither owner nor of the primary group might be a member: refused
 * where the group's and the others' bits differ. */
static bool caller_may(const struct api_request *rq, struct shown_perm p, mode_t want)
{
    mode_t mode = 0555 & ~p.umask;
    if (rq->uid == p.uid)
        return ((mode >> 6) & want) == want;
    mode_t grp = (mode >> 3) & want, oth = mode & want;
    bool member = rq->gid == p.gid;
    for (size_t i = 0; i < rq->ngroups && !member; i++)
        member = rq->groups[i] == p.gid;
    if (!member && rq->groups_unknown && grp != oth)
        return false;
    return (member ? grp : oth) == want;
}

bool api_caller_reads(const struct tierd *d, const struct api_request *rq,
                      const struct tierd_ns_conf *nc)
{
    if (rq->admin)
        return true;
    const struct tierd_config *c = &d->cfg;
    if (!rq->peer || !c->allow_other) /* without allow_other only tierd's user enters the mount */
        return false;
    /* with default_permissions the kernel wants search (x) on every directory above the
     * namespace, from the mount's root down, then read and search on the namespace itself (its
     * listing and what lies in it) */
    const char *p = nc->path;
    for (size_t len = 0;;) {
        if (!caller_may(rq, len ? dir_perm(d, p, len) : mount_perm(c), 01))
            return false;
        const char *next = strchr(p + len + 1, '/');
        if (!next)
            break;
        len = (size_t)(next - p);
    }
    return caller_may(rq, ns_perm(c, nc), 05);
}

/* The namespace of a mount path, or NULL. */
static const struct tierd_ns_conf *ns_of(struct tierd *d, const char *path)
{
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    bool is_root = false;
    if (!path || tierd_resolve(d, path, &ns, &key, &is_root) != 0)
        return NULL;
    free(key);
    return ns->conf;
}

static unsigned reply_not_readable(struct api_reply *out, const struct api_request *rq,
                                   const char *path, const struct tierd_ns_conf *nc)
{
    return reply_error_status(out, 403, -EACCES,
                              "%s: uid %u may not read namespace %s (its [namespace] or [mount] "
                              "uid, gid and umask, and [mount] allow_other, decide who may)",
                              path, (unsigned)rq->uid, nc->path);
}

/* Leave out of the array a (of objects) those whose "path" lies in a namespace the caller may
 * not read (or in none); returns how many were left out. */
static size_t filter_paths(struct tierd *d, const struct api_request *rq, json_t *a)
{
    size_t dropped = 0;
    if (rq->admin || !json_is_array(a))
        return 0;
    for (size_t i = json_array_size(a); i-- > 0;) {
        const char *p = json_string_value(json_object_get(json_array_get(a, i), "path"));
        const struct tierd_ns_conf *nc = ns_of(d, p);
        if (!nc || !api_caller_reads(d, rq, nc)) {
            json_array_remove(a, i);
            dropped++;
        }
    }
    return dropped;
}

/* ---- figures --------------------------------------------------------------------------- */

static json_t *level_json(const struct cache_level_stats *l)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "used", (json_int_t)l->bytes_used,
                     "budget", (json_int_t)l->bytes_budget, "blocks", (json_int_t)l->blocks, "hits",
                     (json_int_t)l->hits, "misses", (json_int_t)l->misses, "evictions",
                     (json_int_t)l->evictions, "bytes_read", (json_int_t)l->bytes_read);
}

/* Share of block lookups served from RAM or disk: every lookup starts at the first level that
 * exists, and a miss there is a hit or a miss of the disk level. */
static double hit_ratio(const struct cache_stats *s)
{
    uint64_t hits = s->ram.hits + s->disk.hits;
    uint64_t lookups =
        s->ram.bytes_budget ? s->ram.hits + s->ram.misses : s->disk.hits + s->disk.misses;
    if (lookups == 0)
        return 0.0;
    double r = (double)hits / (double)lookups;
    return r > 1.0 ? 1.0 : r;
}

static json_t *cache_json(struct tierd *d)
{
    struct cache_stats s;
    memset(&s, 0, sizeof(s));
    if (d->cache)
        cache_stats_get(d->cache, &s);
    json_t *j = json_pack(
        "{s:o, s:o, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}", "ram", level_json(&s.ram),
        "disk", level_json(&s.disk), "pinned_bytes", (json_int_t)s.pinned_bytes, "pin_budget",
        (json_int_t)s.pin_budget, "hit_ratio", hit_ratio(&s), "fetches", (json_int_t)s.fetches,
        "fetch_bytes", (json_int_t)s.fetch_bytes, "fetch_errors", (json_int_t)s.fetch_errors,
        "fetch_ns_total", (json_int_t)s.fetch_ns_total, "singleflight_waits",
        (json_int_t)s.singleflight_waits, "checksum_failures", (json_int_t)s.checksum_failures);
    /* the fetch-buffer bound ([cache] max_fetches) and the disk lane's skipped write-throughs */
    if (j)
        json_object_update_missing_new(
            j, json_pack("{s:I, s:I, s:I, s:I, s:I}", "max_fetches", (json_int_t)s.max_fetches,
                         "fetch_buffers_now", (json_int_t)s.fetch_buffers_now, "fetch_buffers_peak",
                         (json_int_t)s.fetch_buffers_peak, "fetch_slot_waits",
                         (json_int_t)s.fetch_slot_waits, "disk_store_skipped",
                         (json_int_t)s.disk_store_skipped));
    /* write-throughs off the reader's path, and those a full queue kept on it */
    if (j)
        json_object_update_missing_new(
            j, json_pack("{s:I, s:I}", "disk_store_async", (json_int_t)s.disk_store_async,
                         "disk_store_inline", (json_int_t)s.disk_store_inline));
    /* space quotas: bytes charged to tenants, blocks their quotas evicted */
    if (j)
        json_object_update_missing_new(j, json_pack("{s:I, s:I}", "charged_bytes",
                                                    (json_int_t)s.charged_bytes, "quota_evictions",
                                                    (json_int_t)s.quota_evictions));
    return j;
}

static json_t *status_json(struct tierd *d)
{
    json_t *nss = json_array();
    for (size_t i = 0; i < d->nns; i++) {
        const struct tierd_ns_conf *n = d->ns[i].conf;
        const char *type = "";
        for (size_t b = 0; b < d->cfg.nbackends; b++)
            if (strcmp(d->cfg.backends[b].name, n->backend) == 0)
                type = d->cfg.backends[b].type;
        json_array_append_new(
            nss, json_pack("{s:o, s:o, s:o, s:o, s:s}", "path", jstr(n->path), "backend",
                           jstr(n->backend), "type", jstr(type), "prefix", jstr(n->prefix), "mode",
                           n->mode == TIERD_NS_WRITE_BACK ? "write-back" : "read-cache"));
    }
    uint64_t now = tier_now_real_ns();
    uint64_t up = now > d->start_ns ? (now - d->start_ns) / TIER_NS_PER_SEC : 0;
    json_t *j = json_pack("{s:s, s:I, s:o, s:b, s:o, s:o}", "version", TIER_VERSION, "uptime_s",
                          (json_int_t)up, "mount", jstr(d->cfg.mount_path), "mounted", d->mounted,
                          "cache", cache_json(d), "namespaces", nss);
    struct api_conn_stats cs;
    api_conn_stats(d, &cs);
    json_object_set_new(j, "api",
                        json_pack("{s:i, s:i, s:i, s:I}", "connections_admin", cs.admin,
                                  "connections_user", cs.user, "user_uids", cs.user_uids,
                                  "refused_connections", (json_int_t)cs.refused));
    if (d->wb) {
        struct wb_stats w;
        wb_stats_get(d->wb, &w);
        json_object_set_new(
            j, "writeback",
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "dirty_bytes",
                      (json_int_t)w.dirty_bytes, "open", (json_int_t)w.files[WB_OPEN], "sealed",
                      (json_int_t)w.files[WB_SEALED], "uploading",
                      (json_int_t)w.files[WB_UPLOADING], "held", (json_int_t)w.held, "uploads_done",
                      (json_int_t)w.uploads_done, "upload_retries", (json_int_t)w.upload_retries,
                      "backpressure_waits", (json_int_t)w.backpressure_waits, "failed",
                      (json_int_t)w.files[WB_FAILED]));
    }
    return j;
}

/* Each backend's scheduler lane and the calls it admitted, by operation. */
static json_t *backends_json(struct tierd *d)
{
    json_t *arr = json_array();
    if (!d->sched)
        return arr;
    for (size_t i = 0; i < d->cfg.nbackends; i++) {
        uint64_t calls[SCHED_BE_NOPS], notfound[SCHED_BE_NOPS];
        if (!d->backends[i] ||
            sched_backend_calls_get(d->sched, d->backends[i], calls, notfound) != 0)
            continue;
        struct sched_backend_stats bs[TIERD_MAX_BACKENDS];
        size_t n = sched_backend_stats_get(d->sched, bs, TIERD_MAX_BACKENDS);
        const struct sched_backend_stats *b = NULL;
        for (size_t k = 0; k < n && k < TIERD_MAX_BACKENDS; k++)
            if (strcmp(bs[k].name, d->backends[i]->name) == 0)
                b = &bs[k];
        if (!b)
            continue;
        json_t *cj = json_object(), *nj = json_object();
        for (int op = 0; op < SCHED_BE_NOPS; op++) {
            json_object_set_new(cj, sched_be_op_name((enum sched_be_op)op),
                                json_integer((json_int_t)calls[op]));
            json_object_set_new(nj, sched_be_op_name((enum sched_be_op)op),
                                json_integer((json_int_t)notfound[op]));
        }
        json_t *bj = json_pack(
            "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "name", b->name,
            "breaker", sched_breaker_state_name(b->breaker), "max_inflight",
            (json_int_t)b->max_inflight, "inflight_now", (json_int_t)b->inflight_now, "queued_now",
            (json_int_t)b->queued_now, "admitted", (json_int_t)b->admitted, "completed",
            (json_int_t)b->completed, "failures", (json_int_t)b->failures, "admit_timeouts",
            (json_int_t)b->admit_timeouts, "breaker_opens", (json_int_t)b->breaker_opens,
            "fast_fails", (json_int_t)b->fast_fails, "calls", cj, "calls_not_found", nj);
        /* QoS (dmClock): grants by phase, how often every waiting client was at its limit
         * while slots were free, and how often every waiting call was held back for inference */
        json_object_set_new(bj, "link_capacity",
                            b->link_capacity_bps ? json_integer((json_int_t)b->link_capacity_bps)
                                                 : json_null());
        json_object_set_new(bj, "grants_reservation",
                            json_integer((json_int_t)b->grants_reservation));
        json_object_set_new(bj, "grants_weight", json_integer((json_int_t)b->grants_weight));
        json_object_set_new(bj, "limit_waits", json_integer((json_int_t)b->limit_waits));
        json_object_set_new(bj, "yield_waits", json_integer((json_int_t)b->yield_waits));
        json_array_append_new(arr, bj);
    }
    return arr;
}

static json_t *stats_json(struct tierd *d)
{
    json_t *j = status_json(d);
    json_t *sched = json_object();
    if (d->sched) {
        struct sched_stats st;
        memset(&st, 0, sizeof(st));
        sched_stats_get(d->sched, &st);
        for (int i = 0; i < TIER_IO_NCLASSES; i++) {
            const struct sched_class_stats *c = &st.cls[i];
            json_t *cj = json_pack(
                "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "admitted", (json_int_t)c->admitted,
                "completed", (json_int_t)c->completed, "errors", (json_int_t)c->errors, "bytes",
                (json_int_t)c->bytes, "wait_ns_total", (json_int_t)c->wait_ns_total,
                "service_ns_total", (json_int_t)c->service_ns_total, "queued_now",
                (json_int_t)c->queued_now, "inflight_now", (json_int_t)c->inflight_now);
            /* The legacy class names (interactive, streaming) are answered too, until the next
             * release. */
            const char *legacy = tier_io_class_legacy_name((enum tier_io_class)i);
            if (strcmp(legacy, tier_io_class_name((enum tier_io_class)i)) != 0)
                json_object_set(sched, legacy, cj);
            json_object_set_new(sched, tier_io_class_name((enum tier_io_class)i), cj);
        }
    }
    json_object_set_new(j, "sched", sched);
    json_object_set_new(j, "backends", backends_json(d));
    /* 0 in tierd: every layer passes its request's ioctx (test_sched_rgw checks) */
    json_object_set_new(j, "backend_calls_without_ioctx",
                        json_integer((json_int_t)backend_calls_without_ioctx()));
    return j;
}

/* ---- telemetry and health ---------------------------------------------------------------- */

/* Largest /metrics or /v1/telemetry answer: 64 tenants x 4 classes with every op and tier is
 * about 30 MB of exposition (docs/BENCHMARKS.md); the cap only stops a runaway. */
#define TELE_BODY_MAX (512u << 20)

/* The backend names of g point into names (the caller's, TELE_MAX_BACKENDS entries). */
struct gauge_names {
    struct sched_backend_stats be[TELE_MAX_BACKENDS];
    struct tele_space *space; /* malloc'd: gauges_fini() */
    struct tele_policy policies[POLICY_MAX_RULES + TIERD_MAX_NAMESPACES];
    char pnames[POLICY_MAX_RULES + TIERD_MAX_NAMESPACES][POLICY_NAME_MAX];
};

static void gauges_fini(struct gauge_names *nm)
{
    free(nm->space);
    nm->space = NULL;
}

/* The tenants that hold hot-tier bytes or have a quota (space quotas, cache.h) into nm->space;
 * on ENOMEM none are shown. */
static void gather_space(struct tierd *d, struct tele_gauges *g, struct gauge_names *nm)
{
    unsigned max = cache_max_tenants(d->cache);
    uint32_t n = d->tenants ? tenant_count(d->tenants) : max;
    if (n > max)
        n = max;
    nm->space = n ? calloc(n, sizeof(*nm->space)) : NULL;
    for (uint32_t id = 0; nm->space && id < n; id++) {
        struct cache_tenant_stats ts;
        if (cache_tenant_stats_get(d->cache, id, &ts) != 0 ||
            (!ts.bytes && !ts.quota && !ts.quota_evictions))
            continue;
        nm->space[g->nspace++] = (struct tele_space){.tenant = id,
                                                     .bytes = ts.bytes,
                                                     .quota = ts.quota,
                                                     .quota_evictions = ts.quota_evictions};
    }
    g->space = nm->space;
}

/* Oldest wait since seal of the files the burst buffer has not uploaded yet, in s. */
static double oldest_backlog_s(struct tierd *d)
{
    uint64_t oldest_ms = 0;
    for (size_t i = 0; i < d->nns; i++) {
        const struct tierd_ns_conf *n = d->ns[i].conf;
        if (n->mode != TIERD_NS_WRITE_BACK)
            continue;
        struct wb_file_info *list = NULL;
        size_t nl = 0;
        if (wb_list(d->wb, n->backend, n->prefix, &list, &nl) != 0)
            continue; /* the gauge is a lower bound then; the counts below are exact */
        for (size_t k = 0; k < nl; k++)
            if ((list[k].state == WB_SEALED || list[k].state == WB_UPLOADING) &&
                list[k].waiting_ms > oldest_ms)
                oldest_ms = list[k].waiting_ms;
        wb_list_free(list, nl);
    }
    return (double)oldest_ms / 1000.0;
}

/* Gather the gauges of /metrics, /v1/telemetry and /v1/health from the modules' stats. */
static void gather_gauges(struct tierd *d, struct tele_gauges *g, struct gauge_names *nm)
{
    memset(g, 0, sizeof(*g));
    nm->space = NULL;
    if (d->cache) {
        struct cache_stats s;
        memset(&s, 0, sizeof(s));
        cache_stats_get(d->cache, &s);
        g->ram_used_bytes = s.ram.bytes_used;
        g->ram_capacity_bytes = s.ram.bytes_budget;
        g->disk_used_bytes = s.disk.bytes_used;
        g->disk_capacity_bytes = s.disk.bytes_budget;
        g->pinned_bytes = s.pinned_bytes;
        gather_space(d, g, nm);
    }
    if (d->wb) {
        struct wb_stats w;
        wb_stats_get(d->wb, &w);
        g->writeback = true;
        g->wb_backlog_files = w.files[WB_SEALED] + w.files[WB_UPLOADING];
        g->wb_backlog_bytes = w.dirty_bytes;
        g->wb_failed_files = w.files[WB_FAILED];
        g->wb_oldest_backlog_age_s = g->wb_backlog_files ? oldest_backlog_s(d) : 0.0;
        g->wb_backlog_age_limit_s = (double)d->cfg.health_backlog_ms / 1000.0;
    }
    struct policy_engine *pe = __atomic_load_n(&d->policy, __ATOMIC_ACQUIRE);
    if (pe) {
        struct policy_counts pc[POLICY_MAX_RULES + TIERD_MAX_NAMESPACES];
        size_t n = policy_engine_counts(pe, pc, sizeof(pc) / sizeof(pc[0]));
        for (size_t i = 0; i < n; i++) {
            tier_strlcpy(nm->pnames[i], pc[i].name, sizeof(nm->pnames[i]));
            nm->policies[i] = (struct tele_policy){.name = nm->pnames[i],
                                                   .ns = pc[i].ns,
                                                   .action = policy_action_name(pc[i].action),
                                                   .done = pc[i].done,
                                                   .bytes = pc[i].bytes,
                                                   .deferred = pc[i].deferred,
                                                   .failed = pc[i].failed,
                                                   .skipped = pc[i].skipped};
        }
        g->npolicies = (unsigned)n;
        g->policies = nm->policies;
    }
    if (d->sched) {
        size_t n = sched_backend_stats_get(d->sched, nm->be, TELE_MAX_BACKENDS);
        g->nbackends = (unsigned)(n < TELE_MAX_BACKENDS ? n : TELE_MAX_BACKENDS);
        for (unsigned i = 0; i < g->nbackends; i++) {
            g->backends[i].name = nm->be[i].name;
            g->backends[i].breaker = (int)nm->be[i].breaker;
            g->backends[i].inflight = nm->be[i].inflight_now;
            g->backends[i].queued = nm->be[i].queued_now;
        }
    }
}

static unsigned do_tele_render(struct tierd *d, struct api_reply *out, bool prom)
{
    if (!d->tele)
        return reply_error_status(out, 404, -ENOTSUP,
                                  "telemetry is off ([daemon] telemetry = off in the config)");
    struct tele_gauges g;
    struct gauge_names nm;
    gather_gauges(d, &g, &nm);
    struct dynbuf b;
    dynbuf_init(&b, TELE_BODY_MAX);
    int rc = prom ? tele_render_prometheus(d->tele, &g, &b) : tele_render_json(d->tele, &g, &b);
    gauges_fini(&nm);
    size_t len = 0;
    char *text = rc == 0 ? dynbuf_take(&b, &len) : NULL;
    dynbuf_fini(&b);
    if (!text)
        return reply_error(out, rc ? rc : -ENOMEM, "cannot render the telemetry: %s",
                           strerror(rc ? -rc : ENOMEM));
    out->status = 200;
    out->body = text;
    out->len = len;
    out->is_static = false;
    out->content_type = prom ? "text/plain; version=0.0.4; charset=utf-8" : NULL;
    return 200;
}

static unsigned do_health(struct tierd *d, struct api_reply *out)
{
    struct tele_gauges g;
    struct gauge_names nm;
    gather_gauges(d, &g, &nm);
    struct tele_health h;
    tele_health_eval(&g, &h);
    gauges_fini(&nm);
    json_t *reasons = json_array();
    for (unsigned i = 0; i < h.nreasons; i++)
        json_array_append_new(reasons, jstr(h.reasons[i]));
    /* 200 when degraded too: tierd still serves (docs/API.md, "GET /v1/health") */
    return reply_json(
        out, 200,
        json_pack("{s:s, s:o}", "status", h.nreasons ? "degraded" : "ready", "reasons", reasons));
}

/* The backend calls the API makes itself (resolving a path for pin, stage, evict): an
 * operator waits on them, so they go as inference, tenant default. */
static const struct tier_ioctx api_io = {.tenant = TIER_TENANT_DEFAULT, .cls = TIER_IO_INFERENCE};

/* The first key of the JSON object j that is not one of fields[0..n), or NULL. */
static const char *unknown_field(json_t *j, const char *const *fields, size_t n)
{
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v)
    {
        bool known = false;
        for (size_t i = 0; i < n; i++)
            known = known || strcmp(key, fields[i]) == 0;
        if (!known)
            return key;
    }
    return NULL;
}

/* ---- handlers -------------------------------------------------------------------------- */

static json_t *parse_body(const struct api_request *rq, struct api_reply *out, unsigned *ret)
{
    json_error_t jerr;
    json_t *j = rq->body ? json_loadb(rq->body, rq->body_len, 0, &jerr) : NULL;
    if (!j || !json_is_object(j)) {
        json_decref(j);
        *ret = reply_error(out, -EINVAL, "the body must be a JSON object (see docs/API.md)%s%s",
                           rq->body ? ": " : "", rq->body ? jerr.text : "");
        return NULL;
    }
    return j;
}

/* 404 for a tenant name the registry does not know. */
static unsigned reply_no_tenant(struct api_reply *out, const char *name)
{
    return reply_error(out, -ENOENT,
                       "no tenant '%.80s' (GET /v1/tenants lists them; add one with a [tenant "
                       "NAME] section or POST /v1/tenants)",
                       name);
}

static unsigned do_stage_post(struct tierd *d, const struct api_request *rq, struct api_reply *out)
{
    unsigned ret;
    json_t *j = parse_body(rq, out, &ret);
    if (!j)
        return ret;
    json_t *paths = json_object_get(j, "paths");
    json_t *pin = json_object_get(j, "pin");
    json_t *tj = json_object_get(j, "tenant");
    size_t n = json_is_array(paths) ? json_array_size(paths) : 0;
    static const char *const fields[] = {"paths", "pin", "tenant"};
    const char *bad = unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    if (bad || n == 0 || n > API_STAGE_PATHS_MAX || (pin && !json_is_boolean(pin)) ||
        (tj && !json_is_string(tj))) {
        ret = reply_error(out, -EINVAL,
                          "%s%.60s%sexpected {\"paths\": [\"/ns/dir\", ...] (1 to %d), \"pin\": "
                          "false, \"tenant\": \"NAME\"} (pin and tenant optional)",
                          bad ? "unknown field '" : "", bad ? bad : "", bad ? "': " : "",
                          API_STAGE_PATHS_MAX);
        json_decref(j);
        return ret;
    }
    /* whose staging: its QoS share, telemetry and hot-tier space (default: tenant default) */
    uint32_t tenant = TIER_TENANT_DEFAULT;
    if (tj && (!d->tenants || tenant_find(d->tenants, json_string_value(tj), &tenant) != 0)) {
        ret = reply_no_tenant(out, json_string_value(tj));
        json_decref(j);
        return ret;
    }
    const char **pv = calloc(n, sizeof(*pv));
    if (!pv) {
        json_decref(j);
        return reply_error(out, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        pv[i] = json_string_value(json_array_get(paths, i));
        if (!pv[i] || pv[i][0] != '/') {
            free(pv);
            json_decref(j);
            return reply_error(out, -EINVAL, "paths[%zu] must be a mount path starting with '/'",
                               i);
        }
    }
    uint64_t id = 0;
    tier_err_clear();
    int rc =
        d->stages ? stage_start_for(d->stages, tenant, pv, n, json_is_true(pin), &id) : -ENOSYS;
    if (rc) {
        ret = reply_error(out, rc, "cannot stage: %s",
                          *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    } else {
        ret = reply_json(out, 202, json_pack("{s:I}", "job", (json_int_t)id));
    }
    free(pv);
    json_decref(j);
    return ret;
}

static unsigned do_stage_get(struct tierd *d, struct api_reply *out, const char *ids)
{
    uint64_t id = 0;
    if (tier_parse_u64(ids, &id))
        return reply_error(out, -EINVAL, "job id '%s' is not a number", ids);
    struct stage_progress p;
    memset(&p, 0, sizeof(p));
    int rc = d->stages ? stage_progress_get(d->stages, id, &p) : -ENOENT;
    if (rc)
        return reply_error(out, rc, "no staging job %llu", (unsigned long long)id);
    const char *state = p.state == STAGE_RUNNING ? "running"
                        : p.state == STAGE_DONE  ? "done"
                                                 : "failed";
    const char *tname = d->tenants ? tenant_name(d->tenants, p.tenant) : NULL;
    return reply_json(out, 200,
                      json_pack("{s:I, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:f}",
                                "job", (json_int_t)id, "state", state, "tenant",
                                tname ? tname : "default", "listing_done", p.listing_done,
                                "files_total", (json_int_t)p.files_total, "files_done",
                                (json_int_t)p.files_done, "bytes_total", (json_int_t)p.bytes_total,
                                "bytes_done", (json_int_t)p.bytes_done, "bytes_already_cached",
                                (json_int_t)p.bytes_already_cached, "errors", (json_int_t)p.errors,
                                "first_error", jstr(p.first_error), "elapsed_s",
                                (double)p.elapsed_ns / (double)TIER_NS_PER_SEC));
}

/* key + "/" (the prefix of a directory), malloc'd; key is freed either way. NULL: no memory. */
static char *dir_prefix(char *key)
{
    char *dk = tier_dir_prefix(key);
    free(key);
    return dk;
}

/* The (backend, key prefix) a mount path stands for: the namespace prefix for a namespace root,
 * the exact key for an object, "key/" for a directory. */
static int path_to_prefix(struct tierd *d, const char *path, struct tierd_ns **ns, char **prefix)
{
    bool is_root = false;
    char *key = NULL;
    int rc = tierd_resolve(d, path, ns, &key, &is_root);
    if (rc)
        return rc;
    if (is_root) {
        *prefix = key;
        return 0;
    }
    struct backend_stat st;
    memset(&st, 0, sizeof(st));
    rc = backend_stat((*ns)->be, &api_io, key, &st);
    if (rc == 0 && !st.is_dir) {
        *prefix = key;
        return 0;
    }
    char *dk = dir_prefix(key);
    if (!dk)
        return -ENOMEM;
    if (rc == -ENOENT) {
        /* an S3 implicit directory, or nothing at all */
        struct backend_list_page page;
        memset(&page, 0, sizeof(page));
        rc = backend_list((*ns)->be, &api_io, dk, "/", NULL, 1, &page);
        if (rc == 0 && page.n == 0)
            rc = -ENOENT;
        backend_list_page_fini(&page);
        if (rc) {
            tier_err_set("%s does not exist", path);
            free(dk);
            return rc;
        }
    } else if (rc) {
        free(dk);
        return rc;
    }
    *prefix = dk;
    return 0;
}

/* A dataset version's path (dataset.h, DATASET_VIEW) as the key prefix of its tree it stands
 * for: pins and evictions go by key, so a version's pin is its tree's keys (the blocks of every
 * version of them). dry: no backend I/O (a job's dry run): the manifest is not read, so the path
 * is taken as written (a file or, ending in '/', a directory). 1: not such a path; 0; -errno
 * with a message. */
static int version_prefix(struct tierd *d, const char *path, struct tierd_ns **ns, char **prefix,
                          bool dry)
{
    char *tree = NULL, name[MANIFEST_NAME_MAX];
    const char *rest = NULL;
    int rc = dataset_view_path(path, &tree, name, &rest);
    if (rc == -ENOENT)
        return 1;
    if (rc == 1) {
        tier_err_set("%s is a directory of the versions' view, not a version", path);
        return -EINVAL;
    }
    if (rc)
        return rc;
    char *tkey = NULL;
    bool is_root = false;
    struct manifest m;
    memset(&m, 0, sizeof(m));
    rc = tierd_resolve(d, tree, ns, &tkey, &is_root);
    if (rc == 0 && dry) { /* the tree's prefix as the commit records it (dataset.c, tree_of) */
        rc = asprintf(prefix, "%s%s%s", tkey, is_root ? "" : "/", *rest ? rest + 1 : "") < 0
                 ? -ENOMEM
                 : 0;
        free(tkey);
        free(tree);
        return rc;
    }
    free(tkey);
    if (rc == 0)
        rc = dataset_show(d, tree, name, &m);
    free(tree);
    if (rc)
        return rc;
    const char *sub = *rest ? rest + 1 : "";
    size_t sl = strlen(sub);
    while (sl > 0 && sub[sl - 1] == '/')
        sl--; /* "train/" is "train", as for mount paths */
    char *want = strndup(sub, sl);
    size_t idx = 0;
    int k = want ? manifest_find(&m, want, &idx) : -ENOMEM;
    free(want);
    if (k == 1 && m.n == 0)
        k = -ENOENT; /* an empty version has no root to pin */
    if (k == -ENOENT) {
        tier_err_set("%s: no such file or directory in version %s", path, name);
        rc = -ENOENT;
    } else if (k < 0 ||
               asprintf(prefix, "%s%.*s%s", m.prefix, (int)sl, sub, sl && k == 1 ? "/" : "") < 0) {
        rc = -ENOMEM;
    }
    manifest_fini(&m);
    return rc;
}

static unsigned do_path_op(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                           const char *op)
{
    unsigned ret;
    json_t *j = parse_body(rq, out, &ret);
    if (!j)
        return ret;
    const char *path = json_string_value(json_object_get(j, "path"));
    if (!path || path[0] != '/') {
        json_decref(j);
        return reply_error(out, -EINVAL, "expected {\"path\": \"/namespace/...\"}");
    }
    struct tierd_ns *ns = NULL;
    char *prefix = NULL;
    tier_err_clear();
    int rc = version_prefix(d, path, &ns, &prefix, false);
    if (rc == 1)
        rc = path_to_prefix(d, path, &ns, &prefix);
    if (rc) {
        ret =
            reply_error(out, rc, "%s: %s", path, *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        goto out;
    }
    if (strcmp(op, "pin") == 0) {
        rc = cache_pin(d->cache, ns->be->name, prefix);
        if (rc == -ENOSPC)
            ret = reply_error(out, rc,
                              "pinning %s would exceed the pin budget ([cache] pin_size); unpin "
                              "something or raise pin_size",
                              path);
        else if (rc)
            ret = reply_error(out, rc, "pin %s failed: %s", path,
                              rc == -EDQUOT && *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        else
            ret = reply_json(out, 200, json_pack("{s:b}", "ok", 1));
    } else if (strcmp(op, "unpin") == 0) {
        rc = cache_unpin(d->cache, ns->be->name, prefix);
        if (rc == 0 && d->pinned)
            pinmeta_forget(d->pinned, ns->be->name, prefix);
        if (rc)
            ret = reply_error(out, rc, "unpin %s failed: %s", path,
                              rc == -ENOENT ? "it was not pinned" : strerror(-rc));
        else
            ret = reply_json(out, 200, json_pack("{s:b}", "ok", 1));
    } else {
        long n = cache_evict(d->cache, ns->be->name, prefix); /* pinned blocks stay, and so
                                                               * does pinmeta */
        if (n < 0)
            ret = reply_error(out, (int)n, "evict %s failed: %s", path, strerror((int)-n));
        else
            ret = reply_json(out, 200, json_pack("{s:I}", "evicted_blocks", (json_int_t)n));
    }
out:
    free(prefix);
    json_decref(j);
    return ret;
}

/* ---- lifecycle policies (policy.h) ---------------------------------------------------------- */

static unsigned no_policies(struct api_reply *out)
{
    return reply_error(out, -ENOENT,
                       "no lifecycle policy is configured (add a [policy NAME] section, or "
                       "[writeback] retention_keep for a write-back namespace: "
                       "docs/POLICIES.md)");
}

static unsigned do_policy_get(struct tierd *d, const struct api_request *rq, struct api_reply *out)
{
    struct policy_engine *pe = __atomic_load_n(&d->policy, __ATOMIC_ACQUIRE);
    if (!pe)
        return no_policies(out);
    json_t *j = policy_engine_status(pe);
    if (j)
        filter_paths(d, rq, json_object_get(j, "recent"));
    return j ? reply_json(out, 200, j) : reply_error(out, -ENOMEM, "out of memory");
}

/* Plans of callers who are not administrators: each is a full listing of every rule's source,
 * so a uid has one in flight at a time and a bucket of PLAN_BURST plans that refills one per
 * PLAN_REFILL_S. The table holds PLAN_UIDS uids; a new one takes the slot of the uid seen
 * longest ago that has none in flight (its bucket starts full again). Under plan_mu. */
#define PLAN_UIDS 64
#define PLAN_BURST 3.0
#define PLAN_REFILL_S 20
static struct plan_bucket {
    bool used, inflight;
    uid_t uid;
    double tokens;
    uint64_t at_ns; /* tokens as of then */
} plan_buckets[PLAN_UIDS];
static pthread_mutex_t plan_mu = PTHREAD_MUTEX_INITIALIZER;

/* 0: go on (then plan_done); else the seconds to wait (the caller answers 429). */
static unsigned plan_take(uid_t uid)
{
    uint64_t now = tier_now_mono_ns();
    unsigned wait_s = 0;
    pthread_mutex_lock(&plan_mu);
    struct plan_bucket *b = NULL, *spare = NULL;
    for (size_t i = 0; i < PLAN_UIDS && !b; i++) {
        struct plan_bucket *e = &plan_buckets[i];
        if (e->used && e->uid == uid)
            b = e;
        else if (!e->used && !spare)
            spare = e;
        else if (!e->inflight && (!spare || (spare->used && e->at_ns < spare->at_ns)))
            spare = e;
    }
    if (!b && spare)
        *(b = spare) =
            (struct plan_bucket){.used = true, .uid = uid, .tokens = PLAN_BURST, .at_ns = now};
    if (!b) {
        wait_s = 1; /* every slot has a plan in flight */
    } else {
        b->tokens += (double)(now - b->at_ns) / ((double)PLAN_REFILL_S * TIER_NS_PER_SEC);
        if (b->tokens > PLAN_BURST)
            b->tokens = PLAN_BURST;
        b->at_ns = now;
        if (b->inflight)
            wait_s = 1;
        else if (b->tokens < 1.0)
            wait_s = (unsigned)((1.0 - b->tokens) * PLAN_REFILL_S) + 1;
        else {
            b->tokens -= 1.0;
            b->inflight = true;
        }
    }
    pthread_mutex_unlock(&plan_mu);
    return wait_s;
}

static void plan_done(uid_t uid)
{
    pthread_mutex_lock(&plan_mu);
    for (size_t i = 0; i < PLAN_UIDS; i++)
        if (plan_buckets[i].used && plan_buckets[i].uid == uid)
            plan_buckets[i].inflight = false;
    pthread_mutex_unlock(&plan_mu);
}

/* POST /v1/policy/run and /v1/policy/plan: {"policy": NAME} (optional) runs or plans one full
 * pass of every rule, or of that one, and answers what it did or would do. */
static unsigned do_policy_run(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                              bool dry_run)
{
    struct policy_engine *pe = __atomic_load_n(&d->policy, __ATOMIC_ACQUIRE);
    if (!pe)
        return no_policies(out);
    const char *name = NULL;
    json_t *j = NULL;
    if (rq->body && rq->body_len) {
        unsigned ret;
        if (!(j = parse_body(rq, out, &ret)))
            return ret;
        static const char *const fields[] = {"policy"};
        const char *bad = unknown_field(j, fields, 1);
        json_t *p = json_object_get(j, "policy");
        if (bad || (p && !json_is_string(p))) {
            json_decref(j);
            return reply_error(out, -EINVAL, "expected {\"policy\": \"NAME\"} or no body%s%s",
                               bad ? "; unknown field " : "", bad ? bad : "");
        }
        name = p ? json_string_value(p) : NULL;
    }
    /* a plan of a caller who is not an administrator: rate-limited, and it shows only the
     * namespaces the caller may read (its counts, over every namespace, are left out) */
    bool limited = dry_run && !rq->admin;
    unsigned wait_s = limited ? plan_take(rq->uid) : 0;
    if (wait_s) {
        json_decref(j);
        reply_error_status(out, 429, -EBUSY,
                           "uid %u has a plan in flight or planned %d times in the last %d s "
                           "(callers who are not administrators may plan one at a time, %d "
                           "in a row, then one every %d s); retry in %u s",
                           (unsigned)rq->uid, (int)PLAN_BURST, (int)PLAN_BURST * PLAN_REFILL_S,
                           (int)PLAN_BURST, PLAN_REFILL_S, wait_s);
        out->retry_after_s = wait_s;
        return 429;
    }
    json_t *res = NULL;
    tier_err_clear();
    int rc = policy_engine_run(pe, name, dry_run, &res);
    if (limited)
        plan_done(rq->uid);
    if (rc == 0 && limited) {
        static const char *const counts[] = {"files", "done", "deferred", "failed", "truncated"};
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
            json_object_del(res, counts[i]);
        filter_paths(d, rq, json_object_get(res, "actions"));
        json_object_set_new(res, "filtered", json_true());
    }
    unsigned ret;
    if (rc == -ENOENT)
        ret = reply_error(out, rc, "no policy '%.80s' (GET /v1/policy lists them)", name);
    else if (rc)
        ret = reply_error(out, rc, "the policy pass failed: %s", strerror(-rc));
    else
        ret = reply_json(out, 200, res);
    json_decref(j);
    return ret;
}

/* ---- reload (tierctl reload, systemd's ExecReload) ---------------------------------------- */

static bool str_differ(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* One section's "key=value" lines of an INI text, trimmed, in file order (the reload's
 * comparison: any difference but in the keys that apply live names the section). */
struct ini_sec {
    char *name;
    char **kv;
    size_t n;
};

static void ini_secs_free(struct ini_sec *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < v[i].n; k++)
            free(v[i].kv[k]);
        free(v[i].kv);
        free(v[i].name);
    }
    free(v);
}

static char *trim_dup(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    return strndup(s, n);
}

/* The sections of text (NULL: none). 0 or -ENOMEM. */
static int ini_secs(const char *text, struct ini_sec **out, size_t *nout)
{
    struct ini_sec *v = NULL;
    size_t n = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char *t = trim_dup(l, len);
        l = e ? e + 1 : l + len;
        if (!t)
            goto oom;
        if (!*t || *t == ';' || *t == '#') {
            free(t);
            continue;
        }
        if (*t == '[') {
            struct ini_sec *nv = realloc(v, (n + 1) * sizeof(*nv));
            if (!nv) {
                free(t);
                goto oom;
            }
            v = nv;
            char *close = strchr(t, ']');
            v[n] = (struct ini_sec){
                .name = trim_dup(t + 1, close ? (size_t)(close - t - 1) : strlen(t + 1))};
            free(t);
            if (!v[n++].name)
                goto oom;
            continue;
        }
        if (n == 0) { /* a key before any section: the config check refuses it anyway */
            free(t);
            continue;
        }
        char *eq = strchr(t, '='), *kv = NULL;
        if (eq) {
            char *k = trim_dup(t, (size_t)(eq - t)), *val = trim_dup(eq + 1, strlen(eq + 1));
            if (k && val && asprintf(&kv, "%s=%s", k, val) < 0)
                kv = NULL;
            free(k);
            free(val);
        } else {
            kv = strdup(t);
        }
        free(t);
        char **nkv = kv ? realloc(v[n - 1].kv, (v[n - 1].n + 1) * sizeof(*nkv)) : NULL;
        if (!nkv) {
            free(kv);
            goto oom;
        }
        v[n - 1].kv = nkv;
        v[n - 1].kv[v[n - 1].n++] = kv;
    }
    *out = v;
    *nout = n;
    return 0;
oom:
    ini_secs_free(v, n);
    return -ENOMEM;
}

/* Does section s (of one text) say the same as section o, the live keys left out? */
static bool sec_same(const struct ini_sec *s, const struct ini_sec *o)
{
    bool daemon = strcmp(s->name, "daemon") == 0;
    size_t i = 0, j = 0;
    for (;;) {
        while (daemon && i < s->n && strncmp(s->kv[i], "log_level=", 10) == 0)
            i++;
        while (daemon && j < o->n && strncmp(o->kv[j], "log_level=", 10) == 0)
            j++;
        if (i == s->n || j == o->n)
            return i == s->n && j == o->n;
        if (strcmp(s->kv[i++], o->kv[j++]) != 0)
            return false;
    }
}

static const struct ini_sec *sec_find(const struct ini_sec *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

/* Name in restart every section of the running config's text (old) and the new one that
 * differs, but for what applies live ([daemon] log_level and the [policy NAME] sections). */
static int text_changes(const char *old, const char *new, json_t *restart)
{
    struct ini_sec *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int rc = ini_secs(old, &a, &na);
    if (rc == 0)
        rc = ini_secs(new, &b, &nb);
    for (int pass = 0; rc == 0 && pass < 2; pass++) {
        const struct ini_sec *x = pass ? b : a, *y = pass ? a : b;
        size_t nx = pass ? nb : na, ny = pass ? na : nb;
        for (size_t i = 0; i < nx; i++) {
            if (strncmp(x[i].name, "policy ", 7) == 0)
                continue;
            const struct ini_sec *o = sec_find(y, ny, x[i].name);
            if (pass == 1 && o)
                continue; /* compared in the first pass */
            if (!o || !sec_same(&x[i], o)) {
                char buf[160];
                snprintf(buf, sizeof(buf), "[%.150s]", x[i].name);
                json_array_append_new(restart, json_string(buf));
            }
        }
    }
    ini_secs_free(a, na);
    ini_secs_free(b, nb);
    return rc;
}

/* Do the namespaces or backends of nc differ from the running ones (by position, as the
 * policy rules refer to them)? Then no policy reload. */
static bool needs_restart(const struct tierd_config *c, const struct tierd_config *nc)
{
    bool layout = c->nnamespaces != nc->nnamespaces || c->nbackends != nc->nbackends;
    for (size_t i = 0; !layout && i < c->nnamespaces; i++) {
        const struct tierd_ns_conf *a = &c->namespaces[i], *b = &nc->namespaces[i];
        layout = str_differ(a->path, b->path) || str_differ(a->backend, b->backend) ||
                 str_differ(a->prefix, b->prefix) || a->mode != b->mode;
    }
    for (size_t i = 0; !layout && i < c->nbackends; i++)
        layout = str_differ(c->backends[i].name, nc->backends[i].name) ||
                 str_differ(c->backends[i].type, nc->backends[i].type);
    return layout;
}

/* POST /v1/reload: re-read the config file tierd started with; apply what can change live
 * ([daemon] log_level, the [policy] sections and [writeback] retention_keep's built-in rules),
 * name what needs a restart. A config with an error changes nothing (400 with FILE:LINE). */
static unsigned do_reload(struct tierd *d, struct api_reply *out)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* inih's options are globals */
    pthread_mutex_lock(&mu);
    struct tierd_config nc;
    char err[1024];
    int rc = tierd_config_load(d->cfg.file, &nc, err, sizeof(err));
    pthread_mutex_unlock(&mu);
    if (rc) {
        tierd_config_fini(&nc);
        return reply_error(out, rc, "%s (nothing was changed)", err);
    }
    json_t *applied = json_array(), *restart = json_array();
    bool layout = needs_restart(&d->cfg, &nc);
    /* what the file says now against what tierd started with: each other section that differs
     * is named (the running values stay until a restart) */
    char *text = tier_read_text(d->cfg.file);
    if (!text || text_changes(d->cfg_text, text, restart) != 0)
        json_array_append_new(restart,
                              json_string("(cannot compare the sections: restart to be sure)"));
    free(text);
    enum tier_log_level lvl = TIER_LOG_INFO;
    (void)tier_log_level_parse(nc.log_level, &lvl);
    if (!d->verbose && lvl != tier_log_get_level()) {
        tier_log_set_level(lvl);
        json_array_append_new(applied, json_string("[daemon] log_level"));
    }
    struct policy_engine *pe = __atomic_load_n(&d->policy, __ATOMIC_ACQUIRE);
    unsigned ret = 0;
    if (layout) {
        /* the rules name namespaces and backends by position: only a restart applies them */
        json_array_append_new(restart,
                              json_string("[policy] sections (not applied: the namespaces or "
                                          "backends changed)"));
    } else if (pe) {
        char perr[600];
        rc = policy_engine_reload(pe, &nc, perr, sizeof(perr));
        if (rc)
            ret = reply_error(out, rc, "%s (the other changes: %zu applied)", perr,
                              json_array_size(applied));
        else
            json_array_append_new(applied, json_string("[policy] sections"));
    } else if (nc.npolicies) {
        json_array_append_new(restart, json_string("[policy] sections (no policy engine runs)"));
    }
    tierd_config_fini(&nc);
    if (ret) {
        json_decref(applied);
        json_decref(restart);
        return ret;
    }
    log_info("tierd: reloaded %s: %zu change(s) applied, %zu need a restart", d->cfg.file,
             json_array_size(applied), json_array_size(restart));
    return reply_json(out, 200,
                      json_pack("{s:s, s:o, s:o}", "file", d->cfg.file, "applied", applied,
                                "restart_needed", restart));
}

/* ---- write-back: wait, checkpoints ------------------------------------------------------- */

/* Resolve a mount path inside a write-back namespace. The answer is the backend key prefix the
 * path stands for: the namespace's prefix for its root, the exact key for a file the burst buffer
 * knows, "key/" otherwise (a directory). -ENOENT (with a message) outside a write-back namespace;
 * -ENOTSUP when tierd runs no burst buffer. */
static int wb_path_prefix(struct tierd *d, const char *path, struct tierd_ns **ns, char **prefix)
{
    if (!d->wb) {
        tier_err_set("no namespace is in write-back mode (set mode = write-back in a [namespace] "
                     "section of the config and restart tierd)");
        return -ENOTSUP;
    }
    bool is_root = false;
    char *key = NULL;
    int rc = tierd_resolve(d, path, ns, &key, &is_root);
    if (rc) {
        if (rc == -ENOENT)
            tier_err_set("%s is in no namespace", path);
        return rc;
    }
    if ((*ns)->conf->mode != TIERD_NS_WRITE_BACK) {
        tier_err_set("%s is in namespace %s, which is not in write-back mode", path,
                     (*ns)->conf->path);
        free(key);
        return -ENOENT;
    }
    if (is_root) {
        *prefix = key;
        return 0;
    }
    struct wb_file_info *v = NULL;
    size_t n = 0;
    bool exact = false;
    rc = wb_list(d->wb, (*ns)->conf->backend, key, &v, &n);
    if (rc) {
        free(key);
        return rc;
    }
    for (size_t i = 0; i < n && !exact; i++)
        exact = strcmp(v[i].key, key) == 0;
    wb_list_free(v, n);
    if (exact) {
        *prefix = key;
        return 0;
    }
    char *dk = dir_prefix(key);
    if (!dk)
        return -ENOMEM;
    *prefix = dk;
    return 0;
}

/* Does the prefix name anything: a file the burst buffer knows, or an object or directory in the
 * backend (uploaded and forgotten, or written before)? A namespace root always exists. A typo in
 * `tierctl wait` must not read as "durable". 0, -ENOENT (with a message), or the backend's error.
 */
static int wb_path_exists(struct tierd *d, const struct tierd_ns *ns, const char *path,
                          const char *prefix)
{
    if (strcmp(prefix, ns->conf->prefix) == 0)
        return 0;
    struct wb_file_info *v = NULL;
    size_t n = 0;
    int rc = wb_list(d->wb, ns->conf->backend, prefix, &v, &n);
    if (rc)
        return rc;
    wb_list_free(v, n);
    if (n > 0)
        return 0;
    /* wb_path_prefix gave "key/" for anything the burst buffer does not know: a file in the
     * backend, a directory, an S3 implicit directory (keys under "key/"), or nothing */
    size_t pl = strlen(prefix);
    char *key = strndup(prefix, pl > 0 && prefix[pl - 1] == '/' ? pl - 1 : pl);
    if (!key)
        return -ENOMEM;
    struct backend_stat st;
    memset(&st, 0, sizeof(st));
    rc = backend_stat(ns->be, &api_io, key, &st);
    free(key);
    if (rc == -ENOENT) {
        struct backend_list_page page;
        memset(&page, 0, sizeof(page));
        rc = backend_list(ns->be, &api_io, prefix, "/", NULL, 1, &page);
        if (rc == 0 && page.n == 0)
            rc = -ENOENT;
        backend_list_page_fini(&page);
    }
    if (rc == -ENOENT)
        tier_err_set("%s: no such file or directory in the write-back namespace %s", path,
                     ns->conf->path);
    return rc;
}

static unsigned do_wait(struct tierd *d, const struct api_request *rq, struct api_reply *out)
{
    unsigned ret;
    json_t *j = parse_body(rq, out, &ret);
    if (!j)
        return ret;
    const char *path = json_string_value(json_object_get(j, "path"));
    json_t *to = json_object_get(j, "timeout_s");
    if (!path || path[0] != '/' || (to && !json_is_null(to) && !json_is_number(to))) {
        json_decref(j);
        return reply_error(out, -EINVAL,
                           "expected {\"path\": \"/namespace/...\", \"timeout_s\": SECONDS} "
                           "(timeout_s optional; absent, null or negative: [api] max_wait)");
    }
    /* One request holds a server thread while it waits: at most [api] max_wait, also when the
     * client asks for more or for no limit (a client that must wait longer sends more waits). */
    double secs = json_is_number(to) ? json_number_value(to) : -1.0;
    double max_s = (double)d->cfg.api_max_wait_ms / 1000.0;
    bool capped = secs < 0 || secs > max_s;
    int64_t timeout_ms = capped ? (int64_t)d->cfg.api_max_wait_ms : (int64_t)(secs * 1000.0);
    struct tierd_ns *ns = NULL;
    char *prefix = NULL;
    tier_err_clear();
    int rc = wb_path_prefix(d, path, &ns, &prefix);
    if (rc == 0 && !api_caller_reads(d, rq, ns->conf)) { /* its answer tells what exists */
        ret = reply_not_readable(out, rq, path, ns->conf);
        goto out;
    }
    if (rc == 0)
        rc = wb_path_exists(d, ns, path, prefix);
    if (rc) {
        ret = reply_error(out, rc, "%s", *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        goto out;
    }
    uint64_t t0 = tier_now_mono_ns();
    rc = wb_wait(d->wb, ns->conf->backend, prefix, timeout_ms);
    double waited = (double)(tier_now_mono_ns() - t0) / (double)TIER_NS_PER_SEC;
    if (rc == -ETIMEDOUT)
        ret = reply_error(out, rc, "%s is not yet durable in the backend after %.1f s%s", path,
                          waited,
                          capped ? " (one wait lasts at most [api] max_wait; ask again)" : "");
    else if (rc == -ESHUTDOWN)
        ret = reply_error(out, rc,
                          "tierd is shutting down; %s is not yet durable (it will be "
                          "uploaded after the restart)",
                          path);
    else if (rc)
        ret = reply_error(out, rc, "wait %s failed: %s", path,
                          *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    else
        ret = reply_json(out, 200, json_pack("{s:b, s:f}", "ok", 1, "waited_s", waited));
out:
    free(prefix);
    json_decref(j);
    return ret;
}

/* Append the burst buffer's files under (ns, prefix) to files, as mount paths. A prefix that is
 * a file's exact key (see wb_path_prefix) lists that file only. */
static int list_ns(struct tierd *d, const struct tierd_ns *ns, const char *prefix, json_t *files)
{
    struct wb_file_info *v = NULL;
    size_t n = 0;
    int rc = wb_list(d->wb, ns->conf->backend, prefix, &v, &n);
    if (rc)
        return rc;
    const char *nsp = ns->conf->prefix;
    size_t pl = strlen(nsp);
    size_t xl = strlen(prefix);
    bool file = xl > 0 && prefix[xl - 1] != '/' && strcmp(prefix, nsp) != 0;
    for (size_t i = 0; i < n; i++) {
        const struct wb_file_info *f = &v[i];
        if (file && f->key[xl] != '\0') /* "key", not "key.tmp" */
            continue;
        const char *rel = strncmp(f->key, nsp, pl) == 0 ? f->key + pl : f->key;
        char *mp = NULL;
        if (asprintf(&mp, "%s/%s", ns->conf->path, rel) < 0) {
            rc = -ENOMEM;
            break;
        }
        json_t *o = json_pack("{s:o, s:s, s:I, s:i, s:i, s:f, s:f, s:o, s:o, s:I}", "path",
                              jstr(mp), "state", wb_state_name(f->state), "size",
                              (json_int_t)f->size_bytes, "parts_done", f->parts_done, "parts_total",
                              f->parts_total, "age_s", (double)f->age_ms / 1000.0, "waiting_s",
                              (double)f->waiting_ms / 1000.0, "key", jstr(f->key), "checksum",
                              jstr(f->checksum), "generation", (json_int_t)f->generation);
        if (o && !api_utf8_valid(mp, strlen(mp))) {
            json_object_set_new(o, "path_b64", jb64(mp));
            json_object_set_new(o, "key_b64", jb64(f->key));
        }
        free(mp);
        if (!o) {
            rc = -ENOMEM;
            break;
        }
        json_object_set_new(o, "uploaded_etag", f->etag[0] ? jstr(f->etag) : json_null());
        json_object_set_new(o, "error", f->error ? jstr(f->error) : json_null());
        json_array_append_new(files, o);
    }
    wb_list_free(v, n);
    return rc;
}

static unsigned do_checkpoints(struct tierd *d, const struct api_request *rq, struct api_reply *out)
{
    const char *path = rq->arg_path;
    json_t *files = json_array();
    if (!files)
        return reply_error(out, -ENOMEM, "out of memory");
    int rc = 0;
    tier_err_clear();
    if (path && *path && strcmp(path, "/") != 0) {
        struct tierd_ns *ns = NULL;
        char *prefix = NULL;
        if (path[0] != '/') {
            json_decref(files);
            return reply_error(out, -EINVAL, "path must be a mount path starting with '/'");
        }
        rc = wb_path_prefix(d, path, &ns, &prefix);
        if (rc == 0 && !api_caller_reads(d, rq, ns->conf)) {
            free(prefix);
            json_decref(files);
            return reply_not_readable(out, rq, path, ns->conf);
        }
        if (rc == 0)
            rc = list_ns(d, ns, prefix, files);
        free(prefix);
    } else if (!d->wb) {
        struct tierd_ns *ns = NULL;
        rc = wb_path_prefix(d, "/", &ns, NULL); /* -ENOTSUP with its message */
    } else {
        for (size_t i = 0; i < d->nns && rc == 0; i++)
            if (d->ns[i].conf->mode == TIERD_NS_WRITE_BACK &&
                api_caller_reads(d, rq, d->ns[i].conf)) /* the others' are left out */
                rc = list_ns(d, &d->ns[i], d->ns[i].conf->prefix, files);
    }
    if (rc) {
        json_decref(files);
        return reply_error(out, rc, "%s", *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    }
    return reply_json(out, 200, json_pack("{s:o}", "files", files));
}

/* ---- tenants --------------------------------------------------------------------------- */

static json_t *rule_json(const struct tenant_rule *ru)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (ru->slurm_job)
        json_object_set_new(o, "slurm_job", jstr(ru->slurm_job));
    if (ru->cgroup_prefix)
        json_object_set_new(o, "cgroup", jstr(ru->cgroup_prefix));
    if (ru->has_uid)
        json_object_set_new(o, "uid", json_integer((json_int_t)ru->uid));
    if (ru->has_gid)
        json_object_set_new(o, "gid", json_integer((json_int_t)ru->gid));
    return o;
}

static json_t *tenant_json(struct tenant_reg *r, uint32_t id)
{
    struct tenant_rule stack[8], *rules = stack;
    size_t n = tenant_rules(r, id, stack, 8);
    if (n > 8) {
        rules = calloc(n, sizeof(*rules));
        if (!rules)
            return NULL;
        (void)tenant_rules(r, id, rules, n); /* rules only grow: the first n are these */
    }
    json_t *rj = json_array();
    for (size_t i = 0; rj && i < n; i++)
        json_array_append_new(rj, rule_json(&rules[i]));
    if (rules != stack)
        free(rules);
    return json_pack("{s:I, s:o, s:s, s:b, s:o}", "id", (json_int_t)id, "name",
                     jstr(tenant_name(r, id)), "class", tier_io_class_name(tenant_class(r, id)),
                     "implicit", tenant_implicit(r, id), "rules", rj);
}

static unsigned do_tenants_get(struct tierd *d, struct api_reply *out)
{
    struct tenant_reg *r = d->tenants;
    if (!r)
        return reply_error(out, -ENOTSUP, "tierd runs without a tenant registry");
    json_t *arr = json_array();
    uint32_t n = tenant_count(r);
    for (uint32_t id = 0; arr && id < n; id++) {
        if (!tenant_in_use(r, id)) /* reclaimed: its counters are retired's */
            continue;
        json_t *tj = tenant_json(r, id);
        struct cache_tenant_stats ts;
        if (tj && d->cache && cache_tenant_stats_get(d->cache, id, &ts) == 0)
            json_object_set_new(tj, "cache",
                                json_pack("{s:I, s:I, s:I, s:I, s:I}", "bytes",
                                          (json_int_t)ts.bytes, "blocks", (json_int_t)ts.blocks,
                                          "quota", (json_int_t)ts.quota, "quota_evictions",
                                          (json_int_t)ts.quota_evictions, "quota_evicted_bytes",
                                          (json_int_t)ts.quota_evicted_bytes));
        if (json_array_append_new(arr, tj) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    return reply_json(
        out, 200,
        json_pack("{s:o, s:I, s:{s:I, s:I, s:I, s:I}, s:I, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}}",
                  "tenants", arr, "max_tenants", (json_int_t)tenant_max(r), "pid_cache", "entries",
                  (json_int_t)st.cache_entries, "hits", (json_int_t)st.cache_hits, "misses",
                  (json_int_t)st.cache_misses, "evictions", (json_int_t)st.cache_evictions,
                  "folded", (json_int_t)st.folded, "trust", "job_owners", (json_int_t)st.job_owners,
                  "env_ignored", (json_int_t)st.env_ignored, "uid_mismatch",
                  (json_int_t)st.uid_mismatch, "rate_folded", (json_int_t)st.rate_folded, "reclaim",
                  "reclaimed", (json_int_t)st.reclaimed, "ids_free", (json_int_t)st.ids_free));
}

#define TENANT_POST_FIELDS "name, class, slurm_job, uid, gid, cgroup"

/* An optional uid/gid field: absent or null, or an integer from 0 to 4294967294. */
static int id_field(json_t *j, const char *key, bool *has, uint32_t *val)
{
    json_t *v = json_object_get(j, key);
    *has = false;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4294967294LL)
        return -EINVAL;
    *has = true;
    *val = (uint32_t)json_integer_value(v);
    return 0;
}

/* Validate the whole body before anything changes: a bad field answers 400 and registers
 * nothing. */
static unsigned do_tenants_post(struct tierd *d, const struct api_request *rq,
                                struct api_reply *out)
{
    if (!d->tenants)
        return reply_error(out, -ENOTSUP, "tierd runs without a tenant registry");
    unsigned ret;
    json_t *j = parse_body(rq, out, &ret);
    if (!j)
        return ret;
    static const char *const fields[] = {"name", "class", "slurm_job", "uid", "gid", "cgroup"};
    const char *bad = unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    if (bad) {
        ret = reply_error(out, -EINVAL, "unknown field '%.60s' (allowed: " TENANT_POST_FIELDS ")",
                          bad);
        goto out;
    }
    const char *name = json_string_value(json_object_get(j, "name"));
    if (!name) {
        ret = reply_error(out, -EINVAL,
                          "expected {\"name\": \"NAME\", \"class\": \"inference\", ...} (name "
                          "required; optional: class, slurm_job, uid, gid, cgroup)");
        goto out;
    }
    if (!tenant_name_valid(name)) {
        ret = reply_error(out, -EINVAL,
                          "name '%.80s' is not allowed (1 to %d letters, digits, '.', '_', '-')",
                          name, TENANT_NAME_MAX - 1);
        goto out;
    }
    enum tier_io_class cls = TIER_IO_TRAINING;
    json_t *cj = json_object_get(j, "class");
    bool has_cls = cj && !json_is_null(cj);
    if (has_cls && (!json_is_string(cj) || tier_io_class_parse(json_string_value(cj), &cls))) {
        ret = reply_error(out, -EINVAL,
                          "class %s%.40s%s is not allowed (allowed: inference, training, "
                          "checkpoint, background)",
                          json_is_string(cj) ? "'" : "",
                          json_is_string(cj) ? json_string_value(cj) : "(not a string)",
                          json_is_string(cj) ? "'" : "");
        goto out;
    }
    struct tenant_rule rule = {.tenant = name, .cls = cls};
    char job[32];
    json_t *jj = json_object_get(j, "slurm_job");
    if (json_is_integer(jj) && json_integer_value(jj) >= 0) {
        snprintf(job, sizeof(job), "%lld", (long long)json_integer_value(jj));
        rule.slurm_job = job;
    } else if (json_is_string(jj)) {
        rule.slurm_job = json_string_value(jj);
    }
    if (jj && !json_is_null(jj) && (!rule.slurm_job || !tenant_job_valid(rule.slurm_job))) {
        ret = reply_error(out, -EINVAL,
                          "slurm_job must be a Slurm job id (its number, 1 to 20 digits with no "
                          "leading zero, as a string or an integer)");
        goto out;
    }
    json_t *gj = json_object_get(j, "cgroup");
    if (gj && !json_is_null(gj)) {
        const char *problem = json_is_string(gj)
                                  ? tenant_cgroup_prefix_problem(json_string_value(gj))
                                  : "is not a string";
        if (problem) {
            ret = reply_error(out, -EINVAL,
                              "cgroup %s (a cgroup path prefix as in /proc/PID/cgroup, like "
                              "/system.slice/inference.service)",
                              problem);
            goto out;
        }
        rule.cgroup_prefix = json_string_value(gj);
    }
    uint32_t uid = 0, gid = 0;
    if (id_field(j, "uid", &rule.has_uid, &uid) || id_field(j, "gid", &rule.has_gid, &gid)) {
        ret = reply_error(out, -EINVAL, "uid and gid must be numbers from 0 to 4294967294");
        goto out;
    }
    rule.uid = (uid_t)uid;
    rule.gid = (gid_t)gid;
    uint32_t id = 0;
    bool created = false;
    tier_err_clear();
    int rc = tenant_register(d->tenants, name, has_cls ? &cls : NULL, &rule, &id, &created);
    /* a scheduler naming a job's uid tells who owns the job: its SLURM_JOB_ID is then believed
     * for that uid (tenant/tenant.h) */
    if (rc == 0 && rule.slurm_job && rule.has_uid)
        rc = tenant_job_owner_set(d->tenants, rule.slurm_job, rule.uid);
    if (rc)
        ret = reply_error(out, rc, "cannot register tenant '%s': %s", name,
                          *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    else
        ret = reply_json(out, created ? 201 : 200,
                         json_pack("{s:I, s:o, s:s, s:b}", "id", (json_int_t)id, "name",
                                   jstr(tenant_name(d->tenants, id)), "class",
                                   tier_io_class_name(tenant_class(d->tenants, id)), "created",
                                   created));
out:
    json_decref(j);
    return ret;
}

/* ---- dataset versions (/v1/datasets) ------------------------------------------------------ */

/* path: the tree asked for (the view is built from it, not from the manifest's own field) */
static json_t *manifest_summary(struct tierd *d, const struct manifest *m, const char *path)
{
    json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:s, s:I, s:I, s:I}", "name", jstr(m->name),
                          "path", jstr(m->path), "namespace", jstr(m->ns), "backend",
                          jstr(m->backend), "prefix", jstr(m->prefix), "commit_id", m->commit_id,
                          "created_at", (json_int_t)m->created_at, "count", (json_int_t)m->n,
                          "bytes", (json_int_t)m->bytes);
    /* files recorded with a version id (a bucket that keeps versions: they read their
     * committed bytes after an overwrite or a delete) */
    size_t nv = 0;
    for (size_t i = 0; i < m->n; i++)
        nv += m->files[i].version_id != NULL;
    if (o)
        json_object_set_new(o, "versioned", json_integer((json_int_t)nv));
    /* where the mount serves it (fuse_ops_ctl.c): <mount>/.tierd/datasets<path>@<name> */
    const char *mp = d->cfg.mount_path;
    char *view = NULL;
    if (o && d->fuse && d->hints && mp) { /* /.tierd exists with the hint engine (fuse_ops_ctl.c) */
        size_t ml = strlen(mp);
        while (ml > 1 && mp[ml - 1] == '/')
            ml--;
        size_t pl = strlen(path);
        while (pl > 1 && path[pl - 1] == '/')
            pl--;
        if (asprintf(&view, "%.*s/.tierd/datasets%.*s@%s", (int)ml, mp, (int)pl, path, m->name) >=
            0) {
            json_object_set_new(o, "view", jstr(view));
            free(view);
        }
    }
    return o;
}

static json_t *jstr_array(char *const *v, size_t n);

/* -EEXIST (the name is taken) is 409; the rest as every error maps (ENOENT 404, EINVAL 400). */
static unsigned reply_dataset_error(struct api_reply *out, int rc, const char *what)
{
    const char *msg = *tier_err_msg() ? tier_err_msg() : strerror(-rc);
    if (rc == -EEXIST)
        return reply_error_status(out, 409, rc, "%s: %s", what, msg);
    if (rc == -EBADMSG) /* a damaged manifest: the request is answered, the version refused */
        return reply_error_status(out, 400, -EINVAL, "%s: %s", what, msg);
    return reply_error(out, rc, "%s: %s", what, msg);
}

/* POST /v1/datasets {"path", "name"}: commit. */
static unsigned do_datasets_post(struct tierd *d, const struct api_request *rq,
                                 struct api_reply *out)
{
    unsigned ret;
    json_t *j = parse_body(rq, out, &ret);
    if (!j)
        return ret;
    static const char *const fields[] = {"path", "name"};
    const char *bad = unknown_field(j, fields, 2);
    const char *path = json_string_value(json_object_get(j, "path"));
    const char *name = json_string_value(json_object_get(j, "name"));
    if (bad)
        ret = reply_error(out, -EINVAL, "unknown field '%.60s' (allowed: path, name)", bad);
    else if (!path || path[0] != '/' || !name)
        ret = reply_error(out, -EINVAL,
                          "expected {\"path\": \"/datasets/x\", \"name\": \"v3\"} (a mount path "
                          "and a version name)");
    else {
        struct manifest m;
        tier_err_clear();
        int rc = dataset_commit(d, path, name, &m);
        if (rc)
            ret = reply_dataset_error(out, rc, "commit");
        else {
            ret = reply_json(out, 201, manifest_summary(d, &m, path));
            manifest_fini(&m);
        }
    }
    json_decref(j);
    return ret;
}

/* GET /v1/datasets/A/diff/B?path=P: what B added, removed and changed against A (by key; a
 * changed file has another size or ETag), one merge walk of the two sorted manifests. */
static unsigned do_datasets_diff(struct tierd *d, const char *path, const char *spec,
                                 const char *sep, struct api_reply *out)
{
    char a[MANIFEST_NAME_MAX], b[MANIFEST_NAME_MAX];
    size_t al = (size_t)(sep - spec);
    const char *bn = sep + strlen("/diff/");
    if (al == 0 || al >= sizeof(a) || strlen(bn) >= sizeof(b))
        return reply_error(out, -EINVAL,
                           "expected /v1/datasets/A/diff/B?path=P (two version names)");
    memcpy(a, spec, al);
    a[al] = '\0';
    snprintf(b, sizeof(b), "%s", bn);
    struct manifest ma, mb;
    int rc = dataset_show(d, path, a, &ma);
    if (rc)
        return reply_dataset_error(out, rc, "diff");
    rc = dataset_show(d, path, b, &mb);
    if (rc) {
        manifest_fini(&ma);
        return reply_dataset_error(out, rc, "diff");
    }
    json_t *added = json_array(), *removed = json_array(), *changed = json_array();
    size_t i = 0, k = 0, same = 0;
    bool ok = added && removed && changed;
    while (ok && (i < ma.n || k < mb.n)) {
        int c = i == ma.n ? 1 : k == mb.n ? -1 : strcmp(ma.files[i].key, mb.files[k].key);
        json_t *e = NULL;
        if (c < 0) {
            e = json_pack("{s:o, s:I}", "key", jstr(ma.files[i].key), "size",
                          (json_int_t)ma.files[i].size);
            ok = e && json_array_append_new(removed, e) == 0;
            i++;
        } else if (c > 0) {
            e = json_pack("{s:o, s:I}", "key", jstr(mb.files[k].key), "size",
                          (json_int_t)mb.files[k].size);
            ok = e && json_array_append_new(added, e) == 0;
            k++;
        } else {
            if (ma.files[i].size != mb.files[k].size ||
                strcmp(ma.files[i].etag, mb.files[k].etag) != 0) {
                e = json_pack("{s:o, s:I, s:I}", "key", jstr(ma.files[i].key), "size_a",
                              (json_int_t)ma.files[i].size, "size_b", (json_int_t)mb.files[k].size);
                ok = e && json_array_append_new(changed, e) == 0;
            } else {
                same++;
            }
            i++;
            k++;
        }
    }
    manifest_fini(&ma);
    manifest_fini(&mb);
    if (!ok) {
        json_decref(added);
        json_decref(removed);
        json_decref(changed);
        return reply_error(out, -ENOMEM, "out of memory");
    }
    return reply_json(out, 200,
                      json_pack("{s:o, s:s, s:s, s:o, s:o, s:o, s:I}", "path", jstr(path), "a", a,
                                "b", b, "added", added, "removed", removed, "changed", changed,
                                "unchanged", (json_int_t)same));
}

/* GET /v1/datasets?path=P (the versions of P); GET or DELETE /v1/datasets/NAME?path=P. */
static unsigned do_datasets_get(struct tierd *d, const struct api_request *rq,
                                struct api_reply *out, const char *name, bool del)
{
    const char *path = rq->arg_path;
    if (!path || path[0] != '/')
        return reply_error(out, -EINVAL,
                           "path must be given, a mount path starting with '/' "
                           "(/v1/datasets?path=/datasets/x)");
    const struct tierd_ns_conf *nc = del ? NULL : ns_of(d, path);
    if (nc && !api_caller_reads(d, rq, nc))
        return reply_not_readable(out, rq, path, nc);
    if (!nc && !rq->admin) /* what the mount does not show is no reader's business */
        return reply_error_status(out, 404, -ENOENT, "%s is in no namespace", path);
    tier_err_clear();
    if (del) {
        int rc = dataset_delete(d, path, name);
        if (rc)
            return reply_dataset_error(out, rc, "delete");
        return reply_json(out, 200,
                          json_pack("{s:o, s:o}", "deleted", jstr(name), "path", jstr(path)));
    }
    const char *dsep = name ? strstr(name, "/diff/") : NULL;
    if (dsep) /* GET /v1/datasets/A/diff/B */
        return do_datasets_diff(d, path, name, dsep, out);
    if (name) {
        struct manifest m;
        int rc = dataset_show(d, path, name, &m);
        if (rc)
            return reply_dataset_error(out, rc, "show");
        unsigned ret = reply_json(out, 200, manifest_summary(d, &m, path));
        manifest_fini(&m);
        return ret;
    }
    char **names = NULL;
    size_t n = 0;
    int rc = dataset_list(d, path, &names, &n);
    if (rc)
        return reply_dataset_error(out, rc, "list");
    json_t *arr = jstr_array(names, n);
    dataset_names_free(names, n);
    return reply_json(out, 200, json_pack("{s:o, s:o}", "path", jstr(path), "versions", arr));
}

/* ---- job admission (/v1/jobs) ------------------------------------------------------------ */

#define JOBS_POST_FIELDS                                                                           \
    "job, tenant, stage, cache_bytes, bandwidth, class, stage_out, dry_run, uid, slurm_job"

static json_t *jstr_array(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, jstr(v[i]));
    return a;
}

static json_t *job_json(const struct jobs_info *ji)
{
    json_t *st =
        json_pack("{s:s, s:I, s:I, s:I}", "state", jobs_staging_name(ji->staging), "stage_job",
                  (json_int_t)ji->stage_id, "bytes_done", (json_int_t)ji->staged_bytes,
                  "bytes_total", (json_int_t)ji->stage_total_bytes);
    if (st && ji->stage_error[0])
        json_object_set_new(st, "error", jstr(ji->stage_error));
    json_t *o = json_pack("{s:o, s:o, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:f}", "job", jstr(ji->id),
                          "tenant", jstr(ji->tenant_name), "class", tier_io_class_name(ji->cls),
                          "state", jobs_state_name(ji->state), "cache_bytes",
                          (json_int_t)ji->cache_bytes, "bandwidth_bps",
                          (json_int_t)ji->bandwidth_bps, "stage", jstr_array(ji->stage, ji->nstage),
                          "stage_out", jstr_array(ji->stage_out, ji->nstage_out), "staging", st,
                          "submitted_at", (double)ji->submitted_ns / (double)TIER_NS_PER_SEC);
    if (o && ji->state == JOBS_QUEUED)
        json_object_set_new(o, "position", json_integer((json_int_t)ji->position));
    if (o && (ji->state == JOBS_QUEUED || ji->reason[0])) /* admitted: its staging waits */
        json_object_set_new(o, "reason", jstr(ji->reason));
    if (o && ji->admitted_ns)
        json_object_set_new(o, "admitted_at",
                            json_real((double)ji->admitted_ns / (double)TIER_NS_PER_SEC));
    if (o && ji->tenant == TIER_TENANT_OTHER && strcmp(ji->tenant_name, "other") != 0)
        json_object_set_new(o, "counted_as", json_string("other")); /* the registry was full */
    return o;
}

/* A size or a rate field: a non-negative integer (bytes, bytes/s) or a string ("40G", "800M",
 * "800MiB/s"), at most INT64_MAX (GET answers it as a JSON integer). 0, or -EINVAL. */
static int jobs_amount(json_t *v, bool rate, uint64_t *out)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return -EINVAL;
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s)
        return -EINVAL;
    size_t n = strlen(s);
    if (rate && n > 2 && strcmp(s + n - 2, "/s") == 0) {
        uint64_t r = 0;
        if (tierd_rate_parse(s, &r) != 0)
            return -EINVAL;
        *out = r == TIERD_RATE_NONE ? 0 : r;
        return *out > (uint64_t)INT64_MAX ? -EINVAL : 0;
    }
    return tier_parse_size(s, out) == 0 && *out <= (uint64_t)INT64_MAX ? 0 : -EINVAL;
}

/* Do pin prefixes a and b (keys of one backend: "" all, "dir/" a directory, else one key) take
 * the same keys or one the other's? */
static bool jobs_prefixes_nested(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > lb) {
        const char *t = a;
        a = b;
        b = t;
        la = lb;
    }
    return strcmp(a, b) == 0 || la == 0 || (a[la - 1] == '/' && strncmp(a, b, la) == 0);
}

/* Do mount paths a and b name the same tree or one inside the other ("/ds" and "/ds/a")?
 * Trailing '/' do not count; "/" holds everything. */
static bool jobs_paths_overlap(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    while (na > 0 && a[na - 1] == '/')
        na--;
    while (nb > 0 && b[nb - 1] == '/')
        nb--;
    size_t n = na < nb ? na : nb;
    if (strncmp(a, b, n) != 0)
        return false;
    return na == nb || (na < nb ? b[n] == '/' : a[n] == '/');
}

/* A list of mount paths ("stage", "stage_out"): absent, or an array of at most JOBS_PATHS_MAX
 * strings starting with '/'. The number in *n, or -EINVAL with the message in msg. */
static int jobs_paths(json_t *j, const char *key, size_t *n, char *msg, size_t msz)
{
    json_t *a = json_object_get(j, key);
    *n = 0;
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a) || json_array_size(a) > JOBS_PATHS_MAX) {
        snprintf(msg, msz, "%s must be an array of at most %d mount paths", key, JOBS_PATHS_MAX);
        return -EINVAL;
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        const char *p = json_string_value(json_array_get(a, i));
        if (!p || p[0] != '/' || strlen(p) > 1024) {
            snprintf(msg, msz, "%s[%zu] must be a mount path starting with '/' (\"/datasets/x\")",
                     key, i);
            return -EINVAL;
        }
    }
    *n = json_array_size(a);
    return 0;
}

/* Answer a job: 200 admitted, 409 queued (with position and reason). */
static unsigned reply_job(struct api_reply *out, const struct jobs_info *ji)
{
    return reply_json(out, ji->state == JOBS_ADMITTED ? 200 : 409, job_json(ji));
}

/* Validate the whole body (fields, sizes, paths: each resolved to its pin rule) before anything
 * changes; then register the tenant if it is new, and submit. */
static unsigned do_jobs_post(struct tierd *d, const struct api_request *rq, struct api_reply *out)
{
    if (!d->jobs)
        return reply_error(out, -ENOTSUP, "tierd runs without job admission");
    unsigned ret;
    json_t *j = parse_body(rq, out, &ret);
    if (!j)
        return ret;
    struct jobs_path stage[JOBS_PATHS_MAX];
    char *prefixes[JOBS_PATHS_MAX];
    const char *stage_out[JOBS_PATHS_MAX];
    size_t nstage = 0, nprefix = 0, nout = 0;
    char msg[256], idbuf[32];
    static const char *const fields[] = {"job",       "tenant",   "stage",     "cache_bytes",
                                         "bandwidth", "class",    "stage_out", "dry_run",
                                         "uid",       "slurm_job"};
    const char *bad = unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    if (bad) {
        ret =
            reply_error(out, -EINVAL, "unknown field '%.60s' (allowed: " JOBS_POST_FIELDS ")", bad);
        goto out;
    }
    json_t *dj = json_object_get(j, "dry_run");
    if (dj && !json_is_boolean(dj)) {
        ret = reply_error(out, -EINVAL, "dry_run must be true or false");
        goto out;
    }
    bool dry_run = json_is_true(dj);
    json_t *idj = json_object_get(j, "job");
    const char *id = json_string_value(idj);
    if (json_is_integer(idj) && json_integer_value(idj) >= 0) {
        snprintf(idbuf, sizeof(idbuf), "%lld", (long long)json_integer_value(idj));
        id = idbuf;
    }
    if (!id || !jobs_id_valid(id)) {
        ret = reply_error(
            out, -EINVAL,
            "job must be the job's id: a number, or 1 to %d letters, digits, '.', "
            "'_', '-', the first a letter or digit (expected {\"job\": 1234, \"tenant\": \"NAME\", "
            "\"cache_bytes\": \"40G\", ...}; see docs/API.md)",
            JOBS_ID_MAX - 1);
        goto out;
    }
    /* "uid": the uid the job runs as, for the Slurm job "slurm_job" (default: the job id when it
     * is a number) */
    bool has_uid = false;
    uint32_t job_uid = 0;
    char sjbuf[32];
    const char *sjob = NULL;
    if (id_field(j, "uid", &has_uid, &job_uid)) {
        ret = reply_error(out, -EINVAL,
                          "uid must be a number from 0 to 4294967294 (the uid the "
                          "job runs as)");
        goto out;
    }
    json_t *sjj = json_object_get(j, "slurm_job");
    if (json_is_integer(sjj) && json_integer_value(sjj) >= 0) {
        snprintf(sjbuf, sizeof(sjbuf), "%lld", (long long)json_integer_value(sjj));
        sjob = sjbuf;
    } else if (json_is_string(sjj)) {
        sjob = json_string_value(sjj);
    }
    if (sjj && !json_is_null(sjj) && (!sjob || !tenant_job_valid(sjob))) {
        ret = reply_error(out, -EINVAL,
                          "slurm_job must be a Slurm job id (its number, 1 to 20 digits with no "
                          "leading zero, as a string or an integer)");
        goto out;
    }
    if (!sjob && tenant_job_valid(id))
        sjob = id;
    if (has_uid && !sjob) {
        ret = reply_error(out, -EINVAL,
                          "uid needs the Slurm job it is the owner of: a job id that is a number, "
                          "or \"slurm_job\": N");
        goto out;
    }
    const char *tname = json_string_value(json_object_get(j, "tenant"));
    if (!tname || !tenant_name_valid(tname)) {
        ret = reply_error(out, -EINVAL,
                          "tenant must be a tenant name (1 to %d letters, digits, '.', '_', '-'); "
                          "it is registered if new",
                          TENANT_NAME_MAX - 1);
        goto out;
    }
    uint64_t cache_bytes = 0, bw = 0;
    json_t *cb = json_object_get(j, "cache_bytes");
    if (!cb || jobs_amount(cb, false, &cache_bytes) != 0) {
        ret = reply_error(out, -EINVAL,
                          "cache_bytes must be the hot-tier space the job reserves: bytes, or a "
                          "size like \"40G\" (K/M/G/T are powers of 1024)");
        goto out;
    }
    json_t *bwj = json_object_get(j, "bandwidth");
    if (bwj && !json_is_null(bwj) && jobs_amount(bwj, true, &bw) != 0) {
        ret = reply_error(out, -EINVAL,
                          "bandwidth must be a rate: bytes/s, or like \"800M\" or \"800MiB/s\"");
        goto out;
    }
    enum tier_io_class cls = TIER_IO_TRAINING;
    json_t *cj = json_object_get(j, "class");
    if (cj && !json_is_null(cj) &&
        (!json_is_string(cj) || tier_io_class_parse(json_string_value(cj), &cls) != 0)) {
        ret = reply_error(out, -EINVAL,
                          "class is not allowed (allowed: inference, training, checkpoint, "
                          "background)");
        goto out;
    }
    if (jobs_paths(j, "stage", &nstage, msg, sizeof(msg)) ||
        jobs_paths(j, "stage_out", &nout, msg, sizeof(msg))) {
        ret = reply_error(out, -EINVAL, "%s", msg);
        goto out;
    }
    if (nstage && cache_bytes == 0) {
        ret = reply_error(out, -EINVAL,
                          "cache_bytes must be more than 0 with stage paths: the staged blocks "
                          "are pinned inside the job's reservation");
        goto out;
    }
    for (size_t i = 0; i < nstage; i++) {
        json_t *sa = json_object_get(j, "stage");
        for (size_t k = 0; k < i; k++) {
            const char *pi = json_string_value(json_array_get(sa, i));
            const char *pk = json_string_value(json_array_get(sa, k));
            if (jobs_paths_overlap(pi, pk)) {
                ret = reply_error(out, -EINVAL,
                                  "stage[%zu] %.200s and stage[%zu] %.200s are the same or nested: "
                                  "list each tree once",
                                  k, pk, i, pi);
                goto out;
            }
        }
    }
    for (size_t i = 0; i < nout; i++) {
        stage_out[i] = json_string_value(json_array_get(json_object_get(j, "stage_out"), i));
        struct tierd_ns *ns = NULL;
        char *key = NULL;
        bool is_root = false;
        int rc = tierd_resolve(d, stage_out[i], &ns, &key, &is_root);
        free(key);
        if (rc || ns->conf->mode != TIERD_NS_WRITE_BACK) {
            ret = reply_error(out, -EINVAL,
                              "stage_out[%zu] %.200s must be inside a write-back namespace (mode "
                              "= write-back; GET /v1/status lists the namespaces)",
                              i, stage_out[i]);
            goto out;
        }
    }
    for (size_t i = 0; i < nstage; i++) {
        const char *p = json_string_value(json_array_get(json_object_get(j, "stage"), i));
        struct tierd_ns *ns = NULL;
        tier_err_clear();
        /* a dry run resolves only (no backend I/O: the Slurm provider asks it at sbatch, inside
         * slurmctld), so a path that names nothing is found at the real request */
        bool is_root = false;
        /* a dataset version's path pins its tree's keys, as POST /v1/pin does */
        int rc = version_prefix(d, p, &ns, &prefixes[i], dry_run);
        if (rc == 1)
            rc = dry_run ? tierd_resolve(d, p, &ns, &prefixes[i], &is_root)
                         : path_to_prefix(d, p, &ns, &prefixes[i]);
        if (rc) {
            ret = reply_error_status(out, rc == -ENOENT || rc == -EINVAL ? 400 : http_status(rc),
                                     rc, "stage[%zu] %.200s: %s", i, p,
                                     rc == -ENOENT && !*tier_err_msg()
                                         ? "is not inside any namespace (GET /v1/status "
                                           "lists them)"
                                     : *tier_err_msg() ? tier_err_msg()
                                                       : strerror(-rc));
            goto out;
        }
        nprefix = i + 1;
        stage[i] = (struct jobs_path){.path = p, .backend = ns->be->name, .prefix = prefixes[i]};
        /* a version's path and its tree's (or two versions of one tree) pin the same keys, and
         * their unchanged files would count twice against cache_bytes */
        for (size_t k = 0; k < i; k++) {
            if (strcmp(stage[k].backend, stage[i].backend) == 0 &&
                jobs_prefixes_nested(stage[k].prefix, stage[i].prefix)) {
                ret = reply_error(out, -EINVAL,
                                  "stage[%zu] %.200s and stage[%zu] %.200s take the same keys of "
                                  "backend %s (a version and its tree, or two versions of one "
                                  "tree): list each tree once",
                                  k, stage[k].path, i, p, stage[i].backend);
                goto out;
            }
        }
    }

    /* valid; the tenant is registered (with the job's class, and it stays) only for a request
     * that is neither rejected nor a conflict */
    uint32_t tenant = TIER_TENANT_DEFAULT;
    if (!d->tenants) {
        ret = reply_error(out, -ENOTSUP, "tierd runs without a tenant registry");
        goto out;
    }
    struct jobs_request jr = {.id = id,
                              .tenant = tenant,
                              .tenant_name = tname,
                              .cls = cls,
                              .cache_bytes = cache_bytes,
                              .bandwidth_bps = bw,
                              .stage = stage,
                              .nstage = nstage,
                              .stage_out = stage_out,
                              .nstage_out = nout};
    char why[256];
    enum jobs_verdict pre = jobs_precheck(d->jobs, &jr, why, sizeof(why));
    if (pre == JOBS_REJECT) {
        ret = reply_error_status(out, 422, -ENOSPC, "job %s is rejected: %s", id, why);
        goto out;
    }
    if (dry_run) { /* valid and could fit: say so, record and register nothing */
        json_t *a = json_pack("{s:b, s:s, s:s, s:s}", "dry_run", 1, "job", id, "verdict",
                              pre == JOBS_CONFLICT ? "conflict" : "valid", "reason", why);
        ret = a ? reply_json(out, 200, a) : reply_error(out, -ENOMEM, "out of memory");
        goto out;
    }
    if (pre == JOBS_CONFLICT) {
        ret = reply_error_status(out, 409, -EEXIST, "%s", why);
        goto out;
    }
    if (tenant_find(d->tenants, tname, &tenant) != 0) {
        tier_err_clear();
        int rc = tenant_register(d->tenants, tname, &cls, NULL, &tenant, NULL);
        if (rc == -EEXIST && tenant_find(d->tenants, tname, &tenant) == 0)
            rc = 0; /* registered meanwhile by another request, with another class */
        if (rc == -ENOSPC) {
            /* A full registry folds the job's tenant into "other", as resolution does: a job's
             * admission and data never depend on a telemetry id. */
            log_warn("jobs: the tenant registry is full ([tenants] max_tenants): job %s's tenant "
                     "'%s' is counted as 'other'",
                     id, tname);
            tenant_note_folded(d->tenants);
            tenant = TIER_TENANT_OTHER; /* the job keeps the name it asked for ("counted_as") */
            rc = 0;
        }
        if (rc) {
            ret = reply_error(out, rc, "cannot register tenant '%s': %s", tname,
                              *tier_err_msg() ? tier_err_msg() : strerror(-rc));
            goto out;
        }
    }
    jr.tenant = tenant;
    enum jobs_verdict v = JOBS_REJECT;
    struct jobs_info ji;
    int rc = jobs_submit(d->jobs, &jr, &v, &ji);
    if (rc == -ENOSPC)
        ret = reply_error_status(out, 503, rc,
                                 "%d jobs are admitted or queued already: release some", JOBS_MAX);
    else if (rc)
        ret = reply_error(out, rc, "cannot submit job %s: %s", id, strerror(-rc));
    else if (v == JOBS_REJECT)
        ret = reply_error_status(out, 422, -ENOSPC, "job %s is rejected: %s", id, ji.reason);
    else if (v == JOBS_CONFLICT)
        ret = reply_error_status(out, 409, -EEXIST, "%s", ji.reason);
    else
        ret = reply_job(out, &ji);
    /* admitted or queued: the job's processes are its uid's */
    if (rc == 0 && has_uid && (v == JOBS_ADMIT || v == JOBS_QUEUE))
        (void)tenant_job_owner_set_by(d->tenants, sjob, (uid_t)job_uid, id);
    if (rc == 0)
        jobs_info_fini(&ji);
out:
    for (size_t i = 0; i < nprefix; i++)
        free(prefixes[i]);
    json_decref(j);
    return ret;
}

static unsigned do_jobs_list(struct tierd *d, struct api_reply *out)
{
    if (!d->jobs)
        return reply_error(out, -ENOTSUP, "tierd runs without job admission");
    struct jobs_info *v = NULL;
    size_t n = 0;
    struct jobs_capacity c;
    int rc = jobs_list(d->jobs, &v, &n, &c);
    if (rc)
        return reply_error(out, rc, "cannot list jobs: %s", strerror(-rc));
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, job_json(&v[i]));
    jobs_list_free(v, n);
    return reply_json(
        out, 200,
        json_pack("{s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}", "jobs", arr, "capacity",
                  "level_bytes", (json_int_t)c.level_bytes, "pin_budget", (json_int_t)c.pin_budget,
                  "pinned_bytes", (json_int_t)c.pinned_bytes, "jobs_pinned_bytes",
                  (json_int_t)c.jobs_pinned_bytes, "capacity_bytes", (json_int_t)c.capacity_bytes,
                  "reserved_bytes", (json_int_t)c.reserved_bytes, "reservable_bytes",
                  (json_int_t)c.reservable_bytes, "admitted", (json_int_t)c.admitted, "queued",
                  (json_int_t)c.queued));
}

static unsigned do_jobs_one(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                            const char *id)
{
    if (!d->jobs)
        return reply_error(out, -ENOTSUP, "tierd runs without job admission");
    bool del = strcmp(rq->method, "DELETE") == 0;
    struct jobs_info ji;
    int rc = del ? jobs_release(d->jobs, id, &ji) : jobs_get(d->jobs, id, &ji);
    /* a released job's Slurm job (the slurm_job its POST named) no longer names a tenant by its
     * SLURM_JOB_ID: the owner entries this job set go, not another job's for the same number */
    if (del && rc == 0 && d->tenants)
        tenant_job_owner_release(d->tenants, id);
    if (rc == -ENOENT)
        return reply_error(out, rc, "no job '%.80s' (GET /v1/jobs lists them)", id);
    if (rc)
        return reply_error(out, rc, "job %.80s: %s", id, strerror(-rc));
    json_t *o = job_json(&ji);
    jobs_info_fini(&ji);
    if (!del)
        return reply_json(out, 200, o);
    return reply_json(out, 200, json_pack("{s:o, s:o}", "released", jstr(id), "job", o));
}

/* ---- QoS (GET and PUT /v1/qos) ------------------------------------------------------------ */

/* PUT /v1/qos reads the tenant's values, checks the result and applies it: one at a time, so two
 * PUTs cannot interleave their read and their write (the scheduler's own lock guards each call). */
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
    const char *name; /* the backend's, or "disk" */
    uint64_t cap;     /* link_capacity or [cache] disk_capacity, bytes/s; 0: unknown */
    bool disk;
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
                     jstr(tenant_name(d->tenants, id)), "class",
                     tier_io_class_name(tenant_class(d->tenants, id)), "limit",
                     qos_limit_json(tlim), "limit_lane_own", lane_limit, "granted_bytes",
                     (json_int_t)bytes, "grants", (json_int_t)grants, "classes", classes);
}

/* One lane with every tenant (only < 0) or one (only >= 0): a backend's lane has its
 * link_capacity, the disk's its capacity, op_cost and max_inflight. */
static json_t *qos_lane_json(struct tierd *d, const struct qos_lane *ql, int64_t only)
{
    struct sched_backend_stats bs[TIERD_MAX_BACKENDS];
    size_t nb = sched_backend_stats_get(ql->s, bs, TIERD_MAX_BACKENDS);
    const struct sched_backend_stats *b = NULL;
    for (size_t k = 0; k < nb && k < TIERD_MAX_BACKENDS; k++)
        if (strcmp(bs[k].name, ql->name) == 0)
            b = &bs[k];
    json_t *tenants = json_array();
    uint32_t n = tenant_count(d->tenants);
    for (uint32_t id = 0; tenants && id < n; id++)
        if ((only < 0 && tenant_in_use(d->tenants, id)) || (int64_t)id == only)
            json_array_append_new(tenants, qos_tenant_json(d, ql, id));
    json_t *o = json_pack("{s:o, s:o, s:I, s:I, s:I, s:o}", "name", jstr(ql->name),
                          ql->disk ? "capacity" : "link_capacity", qos_limit_json(ql->cap),
                          "grants_reservation", (json_int_t)(b ? b->grants_reservation : 0),
                          "grants_weight", (json_int_t)(b ? b->grants_weight : 0), "limit_waits",
                          (json_int_t)(b ? b->limit_waits : 0), "tenants", tenants);
    if (o && ql->disk) {
        json_object_set_new(o, "op_cost", json_integer((json_int_t)sched_op_cost(ql->s)));
        json_object_set_new(o, "max_inflight", json_integer(b ? b->max_inflight : 0));
    }
    return o;
}

/* Every backend lane and the disk's lane, with every tenant (only < 0) or one (only >= 0). */
static json_t *qos_json(struct tierd *d, int64_t only)
{
    struct qos_lane lanes[TIERD_MAX_BACKENDS];
    size_t n = qos_lanes(d, false, lanes);
    json_t *backends = json_array();
    for (size_t i = 0; backends && i < n; i++)
        json_array_append_new(backends, qos_lane_json(d, &lanes[i], only));
    json_t *disk = qos_lanes(d, true, lanes) ? qos_lane_json(d, &lanes[0], only) : json_null();
    /* the third resource: hot-tier space of the tenants with a quota or bytes held */
    json_t *space = json_array();
    uint32_t nt = d->tenants ? tenant_count(d->tenants) : 0;
    for (uint32_t t = 0; space && d->cache && t < nt; t++) {
        struct cache_tenant_stats ts;
        if ((only >= 0 && (uint32_t)only != t) || cache_tenant_stats_get(d->cache, t, &ts) ||
            (!ts.quota && !ts.bytes && only < 0))
            continue;
        json_array_append_new(space, json_pack("{s:o, s:I, s:I, s:I, s:I}", "name",
                                               jstr(tenant_name(d->tenants, t)), "quota",
                                               (json_int_t)ts.quota, "bytes", (json_int_t)ts.bytes,
                                               "blocks", (json_int_t)ts.blocks, "quota_evictions",
                                               (json_int_t)ts.quota_evictions));
    }
    return json_pack("{s:I, s:s, s:I, s:o, s:o, s:o}", "now_ns", (json_int_t)tier_now_mono_ns(),
                     "scheduler", sched_qos_enabled(d->sched) ? "dmclock" : "strict-priority",
                     "op_cost", (json_int_t)sched_op_cost(d->sched), "backends", backends, "disk",
                     disk, "space", space);
}

static unsigned do_qos_get(struct tierd *d, struct api_reply *out)
{
    if (!d->sched || !d->tenants)
        return reply_error(out, -ENOTSUP, "tierd runs without a scheduler or tenant registry");
    return reply_json(out, 200, qos_json(d, -1));
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
        reply_error(out, -EINVAL, "%s must be a string (" QOS_RATE_HELP ") or null (the default)",
                    key);
        return -EINVAL;
    }
    const char *s = json_string_value(v);
    int rc = tierd_rate_parse(s, val);
    if (rc) {
        reply_error(out, -EINVAL, "%s = '%.60s' is %s (allowed: " QOS_RATE_HELP ")", key, s,
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
                reply_error(out, -EINVAL,
                            "tenant %s, class %s, on %s: reservation %s is above the class limit "
                            "%s: a reservation must fit under the limit; nothing was changed",
                            ch->tenant, cn, where, qos_fmt_rate(r, a, sizeof(a)),
                            qos_fmt_rate(cl, b, sizeof(b)));
                return -EINVAL;
            }
            if (r && tl && r > tl) {
                reply_error(out, -EINVAL,
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
                reply_error(out, -EINVAL,
                            "the disk: the reservations that apply to it would be %s in all, "
                            "above its [cache] disk_capacity %s (inference's built-in tenth of "
                            "it, and every tenant's own): lower a reservation first; nothing was "
                            "changed",
                            qos_fmt_rate(sum, a, sizeof(a)), qos_fmt_rate(ql->cap, b, sizeof(b)));
            else
                reply_error(out, -EINVAL,
                            "backend %s: the reservations that apply to it would be %s in all, "
                            "above its link_capacity %s (each [class] reservation once, "
                            "inference's built-in tenth of the link unless [class inference] sets "
                            "one, and every tenant's own): lower a reservation first; nothing was "
                            "changed",
                            ql->name, qos_fmt_rate(sum, a, sizeof(a)),
                            qos_fmt_rate(ql->cap, b, sizeof(b)));
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
        return reply_error(out, -EINVAL, "resource %.40s is not allowed (allowed: link, disk)",
                           rn ? rn : "(not a string)");
    ch->disk = strcmp(rn, "disk") == 0;
    ch->s = ch->disk ? d->disk_sched : d->sched;
    if (!ch->s || (ch->disk && !d->disk_lane))
        return reply_error(out, -EINVAL, "tierd runs without a disk lane: resource disk");
    json_t *bj = json_object_get(j, "backend");
    if (!bj || json_is_null(bj)) {
        ch->where = ch->disk ? "the disk" : "every backend";
        return 0;
    }
    if (ch->disk)
        return reply_error(out, -EINVAL,
                           "backend names a lane of the link; the disk has one lane: omit "
                           "backend with resource disk");
    const char *bn = json_string_value(bj);
    for (size_t i = 0; bn && i < d->cfg.nbackends && i < TIERD_MAX_BACKENDS; i++)
        if (strcmp(d->cfg.backends[i].name, bn) == 0 && d->backends[i])
            ch->lane = sched_backend_lane(d->sched, d->backends[i]);
    if (!ch->lane)
        return reply_error(out, -EINVAL,
                           "backend %s%.80s%s is not configured (GET /v1/qos lists the backends)",
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
    const char *bad = unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    if (bad)
        return reply_error(out, -EINVAL, "unknown field '%.60s' (allowed: " QOS_PUT_FIELDS ")",
                           bad);
    ch->tenant = json_string_value(json_object_get(j, "tenant"));
    if (!ch->tenant)
        return reply_error(out, -EINVAL,
                           "expected {\"tenant\": \"NAME\", \"reservation\": \"100MiB/s\", "
                           "\"weight\": 10, \"limit\": \"1GiB/s\"} (tenant required; class, "
                           "backend, resource optional; at least one of reservation, weight, "
                           "limit)");
    if (tenant_find(d->tenants, ch->tenant, &ch->id) != 0)
        return reply_no_tenant(out, ch->tenant);
    json_t *cj = json_object_get(j, "class");
    ch->cls_given = cj && !json_is_null(cj);
    ch->cls = tenant_class(d->tenants, ch->id);
    if (ch->cls_given &&
        (!json_is_string(cj) || tier_io_class_parse(json_string_value(cj), &ch->cls)))
        return reply_error(out, -EINVAL,
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
            return reply_error(out, -EINVAL,
                               "weight must be an integer from 1 to %d, or null (the default)",
                               SCHED_WEIGHT_MAX);
        w = (uint32_t)json_integer_value(wj);
    }
    unsigned qst = qos_quota_field(d, j, ch, out);
    if (qst)
        return qst;
    if (!r_given && !w_given && !l_given && !ch->set_quota)
        return reply_error(out, -EINVAL,
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
        return reply_error(out, -ENOTSUP, "tierd runs without a cache: no cache_quota to set");
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
        return reply_error(out, -EINVAL,
                           "cache_quota must be a size like \"40G\" or \"512MiB\" (or a byte "
                           "count), \"none\", or null (the [tenants] cache_quota)");
    if (q != CACHE_QUOTA_DEFAULT && q != CACHE_QUOTA_NONE && q < bs) {
        char a[32], b[32];
        return reply_error(out, -EINVAL,
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
static unsigned do_qos_put(struct tierd *d, const struct api_request *rq, struct api_reply *out)
{
    if (!d->sched || !d->tenants)
        return reply_error(out, -ENOTSUP, "tierd runs without a scheduler or tenant registry");
    unsigned ret;
    json_t *j = parse_body(rq, out, &ret);
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
        ret = reply_error(out, rc, "cannot apply the QoS of tenant %s on %s: %s", ch.tenant,
                          ch.where, *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    else
        ret = reply_json(out, 200, qos_json(d, ch.id));
out:
    pthread_mutex_unlock(&qos_put_mu);
    json_decref(j);
    return ret;
}

/* ---- epoch-order hints (/v1/hints) -------------------------------------------------------- */

/* one size limit for a non-administrator's hint, by the API or by a control file */
_Static_assert(API_HINTS_BODY_MAX_USER == HINTS_USER_BYTES_MAX,
               "POST /v1/hints's body bound for users is the hint files' (hints.h)");

/* Whose hint a request may give: -1 an administrator's (any tenant, "tenant" names it, default
 * the default tenant); a caller's own tenant id (resolved from its SO_PEERCRED pid, uid, gid as
 * the mount resolves its reads); -2 nobody's (a non-administrator whose peer is unknown). */
static int64_t hints_caller_tenant(struct tierd *d, const struct api_request *rq)
{
    if (rq->admin)
        return -1;
    if (!rq->peer || !d->tenants)
        return -2;
    uint32_t t = tenant_resolve(d->tenants, rq->pid, rq->uid, rq->gid).tenant;
    /* default and other are every unmatched caller's: no one of them may act for all */
    return t == TIER_TENANT_DEFAULT || t == TIER_TENANT_OTHER ? -3 : (int64_t)t;
}

/* Validated whole before anything changes (hints_submit is all or nothing too). */
static unsigned do_hints_post(struct tierd *d, const struct api_request *rq, struct api_reply *out)
{
    if (!d->hints)
        return reply_error(out, -ENOTSUP, "tierd runs without a cache: no hints");
    unsigned ret;
    json_t *j = parse_body(rq, out, &ret);
    if (!j)
        return ret;
    static const char *const fields[] = {"name", "tenant", "paths", "append"};
    const char *bad = unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    json_t *nj = json_object_get(j, "name"), *tj = json_object_get(j, "tenant");
    json_t *pj = json_object_get(j, "paths"), *aj = json_object_get(j, "append");
    const char **pv = NULL;
    if (bad || !json_is_string(nj) || !json_is_array(pj) || (tj && !json_is_string(tj)) ||
        (aj && !json_is_boolean(aj))) {
        ret = reply_error(out, -EINVAL,
                          "%s%.60s%sexpected {\"name\": \"NAME\", \"paths\": [\"/ns/file\", "
                          "...], \"tenant\": \"NAME\", \"append\": false} (tenant and append "
                          "optional)",
                          bad ? "unknown field '" : "", bad ? bad : "", bad ? "': " : "");
        goto out;
    }
    uint32_t tenant = TIER_TENANT_DEFAULT;
    if (tj && (!d->tenants || tenant_find(d->tenants, json_string_value(tj), &tenant) != 0)) {
        ret = reply_no_tenant(out, json_string_value(tj));
        goto out;
    }
    int64_t own = hints_caller_tenant(d, rq);
    if (own == -2 || own == -3) {
        ret = reply_error_status(
            out, 403, -EPERM,
            own == -2 ? "POST /v1/hints: tierd cannot tell who is asking (hint over the Unix "
                        "socket, or as an administrator)"
                      : "POST /v1/hints: your requests are tenant default's (or other's), which "
                        "every unmatched caller shares: hints need a tenant of your own (a "
                        "[tenant NAME] section, a Slurm job or a pod), or an administrator");
        goto out;
    }
    if (own >= 0 && tj && (uint32_t)own != tenant) {
        ret = reply_error_status(out, 403, -EPERM,
                                 "POST /v1/hints: only root, tierd's user or [api] admin_group "
                                 "may hint for another tenant than the caller's own (%.80s)",
                                 tenant_name(d->tenants, (uint32_t)own));
        goto out;
    }
    if (own >= 0)
        tenant = (uint32_t)own;
    size_t n = json_array_size(pj);
    pv = calloc(n ? n : 1, sizeof(*pv));
    if (!pv) {
        ret = reply_error(out, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        pv[i] = json_string_value(json_array_get(pj, i));
        if (!pv[i] || pv[i][0] != '/') {
            ret = reply_error(out, -EINVAL, "paths[%zu] must be a mount path starting with '/'", i);
            goto out;
        }
    }
    tier_err_clear();
    int rc =
        hints_submit(d->hints, json_string_value(nj), tenant, pv, n, json_is_true(aj), rq->admin);
    if (rc)
        ret = reply_error(out, rc, "cannot take the hint: %s",
                          *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    else
        ret = reply_json(
            out, 200,
            json_pack("{s:s, s:I}", "name", json_string_value(nj), "entries", (json_int_t)n));
out:
    free(pv);
    json_decref(j);
    return ret;
}

static unsigned do_hints_get(struct tierd *d, struct api_reply *out)
{
    struct hints_set_stats *st = malloc(HINTS_SETS_MAX * sizeof(*st)); /* too big for a stack */
    if (!st)
        return reply_error(out, -ENOMEM, "out of memory");
    size_t n = d->hints ? hints_list(d->hints, st, HINTS_SETS_MAX) : 0;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n && i < HINTS_SETS_MAX; i++) {
        const struct hints_set_stats *s = &st[i];
        const char *tn = d->tenants ? tenant_name(d->tenants, s->tenant) : NULL;
        json_array_append_new(
            arr,
            json_pack("{s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                      "s:o}",
                      "name", s->name, "tenant", jstr(tn ? tn : "default"), "entries",
                      (json_int_t)s->entries, "files", (json_int_t)s->files, "cursor",
                      (json_int_t)s->cursor, "window_files", (json_int_t)s->window_files,
                      "window_bytes", (json_int_t)s->window_bytes, "held_bytes",
                      (json_int_t)s->held_bytes, "budget", (json_int_t)s->budget, "fetched_files",
                      (json_int_t)s->fetched_files, "fetched_bytes", (json_int_t)s->fetched_bytes,
                      "already_held", (json_int_t)s->already_held, "released",
                      (json_int_t)s->released, "errors", (json_int_t)s->errors, "skipped",
                      (json_int_t)s->skipped, "first_error", jstr(s->first_error)));
        /* where the sizes and etags came from: the mount's listings, or a stat each */
        json_t *last = json_array_get(arr, json_array_size(arr) - 1);
        if (last)
            json_object_update_missing_new(last, json_pack("{s:I, s:I, s:I}", "attrs_listed",
                                                           (json_int_t)s->attrs_listed,
                                                           "attrs_stat", (json_int_t)s->attrs_stat,
                                                           "bytes", (json_int_t)s->bytes));
    }
    free(st);
    /* manifest reads of all submissions: each version read once per submission */
    return reply_json(out, 200,
                      json_pack("{s:o, s:I}", "sets", arr, "manifest_reads",
                                (json_int_t)hints_manifest_reads(d->hints)));
}

/* ---- dashboard (GET /ui) ----------------------------------------------------------------- */

static void reply_static(struct api_reply *out, const unsigned char *data, size_t len,
                         const char *type)
{
    out->status = 200;
    out->body = (char *)(uintptr_t)data;
    out->len = len;
    out->is_static = true;
    out->content_type = type;
}

/* Chart.js, read from [api] ui_chartjs at each request: the package may be installed, upgraded
 * or removed while tierd runs, and the file is read only when someone opens the dashboard. */
static unsigned do_ui_chartjs(struct tierd *d, struct api_reply *out)
{
    const char *path = d->cfg.api_ui_chartjs;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY) : -1;
    struct stat st = {0}; /* set by fstat below; zeroed for the -O2 flow analysis */
    int rc = 0;
    if (fd < 0)
        rc = -errno;
    else if (fstat(fd, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > UI_CHARTJS_MAX)
        rc = -EINVAL;
    char *buf = NULL;
    size_t got = 0;
    if (rc == 0) {
        buf = malloc((size_t)st.st_size + 1);
        if (!buf)
            rc = -ENOMEM;
    }
    while (rc == 0 && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -EIO; /* the file shrank while we read it */
            break;
        }
        got += (size_t)n;
    }
    if (fd >= 0)
        close(fd);
    if (rc == -ENOMEM) {
        free(buf);
        return reply_error(out, rc, "out of memory reading %s", path);
    }
    if (rc) {
        free(buf);
        return reply_error_status(
            out, 404, rc,
            "the dashboard's charting library %s cannot be served (%s): install Debian's "
            "libjs-chart.js (scripts/deps.sh) or point [api] ui_chartjs at a Chart.js 3 UMD "
            "build (chart.min.js); the dashboard's table works without it",
            path ? path : "(none)",
            rc == -EINVAL ? "not a regular file of at most 8 MiB" : strerror(-rc));
    }
    out->status = 200;
    out->body = buf;
    out->len = got;
    out->is_static = false;
    out->content_type = "text/javascript; charset=utf-8";
    return 200;
}

static void do_ui(struct tierd *d, const char *url, struct api_reply *out)
{
    if (strcmp(url, "/ui") == 0 || strcmp(url, "/ui/") == 0)
        reply_static(out, tier_ui_html, tier_ui_html_len, "text/html; charset=utf-8");
    else if (strcmp(url, "/ui/dashboard.js") == 0)
        reply_static(out, tier_ui_js, tier_ui_js_len, "text/javascript; charset=utf-8");
    else if (strcmp(url, "/ui/dashboard.css") == 0)
        reply_static(out, tier_ui_css, tier_ui_css_len, "text/css; charset=utf-8");
    else if (strcmp(url, "/ui/chart.js") == 0)
        do_ui_chartjs(d, out);
    else
        reply_error(out, -ENOENT,
                    "no such dashboard file: %s (the dashboard is GET /ui; see docs/API.md)", url);
}

/* ---- admission and routing ------------------------------------------------------------- */

static bool token_ok(const struct tierd *d, const char *h)
{
    const char *tok = d->cfg.api_token;
    if (!h || !tok || strncmp(h, "Bearer ", 7) != 0)
        return false;
    const char *given = h + 7;
    size_t gl = strlen(given), tl = strlen(tok);
    /* constant time in the token's length: no early exit on the first differing byte */
    unsigned char diff = (unsigned char)(gl != tl);
    for (size_t i = 0; i < tl; i++)
        diff |= (unsigned char)(tok[i] ^ (i < gl ? given[i] : 0));
    return diff == 0;
}

bool api_route_public(const char *method, const char *url)
{
    /* exact names, not a prefix: "/ui/../v1/telemetry" is not public, whatever routes it */
    static const char *const files[] = {"/ui", "/ui/", "/ui/dashboard.js", "/ui/dashboard.css",
                                        "/ui/chart.js"};
    if (strcmp(method, "GET") != 0)
        return false;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (strcmp(url, files[i]) == 0)
            return true;
    return false;
}

bool api_route_mutates(const char *method, const char *url)
{
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return false;
    /* a wait reads the burst buffer's state and changes nothing; a hint is anyone's advice
     * for their own tenant (its handler checks who asks: do_hints_post, do_hints_delete) */
    if (strcmp(method, "POST") == 0 && strcmp(url, "/v1/hints") == 0)
        return false;
    if (strcmp(method, "DELETE") == 0 && strncmp(url, "/v1/hints/", 10) == 0)
        return false;
    /* a plan only reads (the backend's listing, the journals) */
    if (strcmp(method, "POST") == 0 && strcmp(url, "/v1/policy/plan") == 0)
        return false;
    return !(strcmp(method, "POST") == 0 && strcmp(url, "/v1/wait") == 0);
}

int api_admit(struct tierd *d, const struct api_head *h, struct api_reply *out)
{
    /* The dashboard's files are the same static bytes for everyone and hold no data (every
     * figure the page shows comes from /v1/telemetry, which needs the token); a browser cannot
     * send a header when it navigates to a page, and the token must not go into a URL. */
    if (h->tcp && !token_ok(d, h->authorization) && !api_route_public(h->method, h->url)) {
        reply_error_status(out, 401, -EACCES,
                           "missing or wrong bearer token (send Authorization: Bearer <[api] "
                           "token>)");
        return 1;
    }
    if (!h->tcp && !h->may_mutate && api_route_mutates(h->method, h->url)) {
        reply_error_status(out, 403, -EPERM,
                           "%s %s changes tierd's state: only root, tierd's own user or a member "
                           "of [api] admin_group may do that over the socket (reading is open to "
                           "everyone who may connect)",
                           h->method, h->url);
        return 1;
    }
    if (h->content_length > (int64_t)api_body_max(h->method, h->url, h->may_mutate)) {
        api_reply_too_large(out);
        return 1;
    }
    return 0;
}

void api_handle(struct tierd *d, const struct api_request *rq, struct api_reply *out)
{
    const char *method = rq->method, *url = rq->url;
    bool get = strcmp(method, "GET") == 0;
    bool post = strcmp(method, "POST") == 0;
    out->body = NULL;
    out->is_static = false;
    out->content_type = NULL;
    out->retry_after_s = 0;
    if (get && strcmp(url, "/v1/status") == 0)
        reply_json(out, 200, status_json(d));
    else if (get && strcmp(url, "/v1/stats") == 0)
        reply_json(out, 200, stats_json(d));
    else if (get && strcmp(url, "/metrics") == 0)
        do_tele_render(d, out, true);
    else if (get && strcmp(url, "/v1/telemetry") == 0)
        do_tele_render(d, out, false);
    else if (get && strcmp(url, "/v1/health") == 0)
        do_health(d, out);
    else if (post && strcmp(url, "/v1/stage") == 0)
        do_stage_post(d, rq, out);
    else if (get && strncmp(url, "/v1/stage/", 10) == 0)
        do_stage_get(d, out, url + 10);
    else if (post && strcmp(url, "/v1/pin") == 0)
        do_path_op(d, rq, out, "pin");
    else if (post && strcmp(url, "/v1/unpin") == 0)
        do_path_op(d, rq, out, "unpin");
    else if (post && strcmp(url, "/v1/evict") == 0)
        do_path_op(d, rq, out, "evict");
    else if (post && strcmp(url, "/v1/wait") == 0)
        do_wait(d, rq, out);
    else if (get && strcmp(url, "/v1/checkpoints") == 0)
        do_checkpoints(d, rq, out);
    else if (get && strcmp(url, "/v1/tenants") == 0)
        do_tenants_get(d, out);
    else if (post && strcmp(url, "/v1/tenants") == 0)
        do_tenants_post(d, rq, out);
    else if (post && strcmp(url, "/v1/jobs") == 0)
        do_jobs_post(d, rq, out);
    else if (get && strcmp(url, "/v1/jobs") == 0)
        do_jobs_list(d, out);
    else if ((get || strcmp(method, "DELETE") == 0) && strncmp(url, "/v1/jobs/", 9) == 0)
        do_jobs_one(d, rq, out, url + 9);
    else if (post && strcmp(url, "/v1/datasets") == 0)
        do_datasets_post(d, rq, out);
    else if (get && strcmp(url, "/v1/datasets") == 0)
        do_datasets_get(d, rq, out, NULL, false);
    else if ((get || strcmp(method, "DELETE") == 0) && strncmp(url, "/v1/datasets/", 13) == 0)
        do_datasets_get(d, rq, out, url + 13, !get);
    else if (post && strcmp(url, "/v1/reload") == 0)
        do_reload(d, out);
    else if (get && strcmp(url, "/v1/policy") == 0)
        do_policy_get(d, rq, out);
    else if (post && (strcmp(url, "/v1/policy/run") == 0 || strcmp(url, "/v1/policy/plan") == 0))
        do_policy_run(d, rq, out, strcmp(url, "/v1/policy/plan") == 0);
    else if (get && strcmp(url, "/v1/qos") == 0)
        do_qos_get(d, out);
    else if (strcmp(method, "PUT") == 0 && strcmp(url, "/v1/qos") == 0)
        do_qos_put(d, rq, out);
    else if (post && strcmp(url, "/v1/hints") == 0)
        do_hints_post(d, rq, out);
    else if (get && strcmp(url, "/v1/hints") == 0)
        do_hints_get(d, out);
    else if (strcmp(method, "DELETE") == 0 && strncmp(url, "/v1/hints/", 10) == 0) {
        int64_t own = hints_caller_tenant(d, rq);
        int rc = own < -1 ? -EPERM : d->hints ? hints_cancel(d->hints, url + 10, own) : -ENOENT;
        if (rc == -EPERM)
            reply_error_status(out, 403, -EPERM,
                               "hint set '%.80s' is another tenant's: only its tenant or an "
                               "administrator may drop it",
                               url + 10);
        else if (rc)
            reply_error(out, -ENOENT, "no hint set '%.80s' (GET /v1/hints lists them)", url + 10);
        else
            reply_json(out, 200, json_pack("{s:s}", "dropped", url + 10));
    } else if (get && (strcmp(url, "/ui") == 0 || strncmp(url, "/ui/", 4) == 0))
        do_ui(d, url, out);
    else
        reply_error(out, -ENOENT, "no such endpoint: %s %s (see docs/API.md)", method, url);
}
