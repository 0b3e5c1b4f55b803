/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c - the control API server: libmicrohttpd on a Unix socket we bind ourselves (and an
 * optional TCP socket that demands a bearer token), JSON with jansson. The contract is
 * docs/API.md; keep the two in step.
 *
 * Threads: one MHD thread per connection; handlers call thread-safe modules only (cache, stager,
 * scheduler stats, tierd_resolve, the write-back engine). POST /v1/wait blocks its connection's
 * thread in wb_wait() for up to the requested timeout; other connections (status, stats) have
 * their own threads and are not held up. A request body is collected into a dynbuf capped at 64 KiB
 * (413 beyond). Errors are answered as {"error": "...", "errno": "ENOENT"} with an HTTP status
 * chosen from the errno in one place (http_status()).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "daemon/api.h"
#include "daemon/stage.h"
#include "daemon/tierd.h"
#include "qos/sched.h"
#include "writeback/wb.h"

#define API_BODY_MAX (64 * 1024)

struct listener {
    struct tierd_api *api;
    struct MHD_Daemon *mhd;
    int fd;
    bool tcp; /* requests must carry the bearer token */
};

struct tierd_api {
    struct tierd *d;
    struct listener unix_l, tcp_l;
    char *socket_path;
};

struct request {
    struct dynbuf body;
    bool too_large;
    bool denied;
};

/* ---- responses ------------------------------------------------------------------------- */

static int http_status(int neg)
{
    switch (-neg) {
    case ENOENT:
        return MHD_HTTP_NOT_FOUND;
    case EINVAL:
    case ENAMETOOLONG:
    case EISDIR:
    case ENOTDIR:
        return MHD_HTTP_BAD_REQUEST;
    case ENOSPC:
        return MHD_HTTP_INSUFFICIENT_STORAGE;
    case EACCES:
    case EPERM:
        return MHD_HTTP_UNAUTHORIZED;
    case E2BIG:
        return MHD_HTTP_CONTENT_TOO_LARGE;
    case ENOSYS:
        return MHD_HTTP_NOT_FOUND;
    case EROFS:
        return MHD_HTTP_CONFLICT;
    case ETIMEDOUT:
        return MHD_HTTP_GATEWAY_TIMEOUT;
    case ENOTSUP:
    case ESHUTDOWN:
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    default:
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!text)
        return MHD_NO;
    size_t len = strlen(text);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, int neg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result send_error(struct MHD_Connection *c, int neg, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *name = strerrorname_np(-neg);
    json_t *j = json_pack("{s:s, s:s}", "error", msg, "errno", name ? name : "EIO");
    if (!j)
        return MHD_NO;
    return send_json(c, (unsigned)http_status(neg), j);
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
    return json_pack(
        "{s:o, s:o, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}", "ram", level_json(&s.ram),
        "disk", level_json(&s.disk), "pinned_bytes", (json_int_t)s.pinned_bytes, "pin_budget",
        (json_int_t)s.pin_budget, "hit_ratio", hit_ratio(&s), "fetches", (json_int_t)s.fetches,
        "fetch_bytes", (json_int_t)s.fetch_bytes, "fetch_errors", (json_int_t)s.fetch_errors,
        "fetch_ns_total", (json_int_t)s.fetch_ns_total, "singleflight_waits",
        (json_int_t)s.singleflight_waits, "checksum_failures", (json_int_t)s.checksum_failures);
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
            nss, json_pack("{s:s, s:s, s:s, s:s, s:s}", "path", n->path, "backend", n->backend,
                           "type", type, "prefix", n->prefix, "mode",
                           n->mode == TIERD_NS_WRITE_BACK ? "write-back" : "read-cache"));
    }
    uint64_t now = tier_now_real_ns();
    uint64_t up = now > d->start_ns ? (now - d->start_ns) / TIER_NS_PER_SEC : 0;
    json_t *j = json_pack("{s:s, s:I, s:s, s:b, s:o, s:o}", "version", "0.1.0", "uptime_s",
                          (json_int_t)up, "mount", d->cfg.mount_path, "mounted", d->mounted,
                          "cache", cache_json(d), "namespaces", nss);
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
            json_object_set_new(
                sched, tier_io_class_name((enum tier_io_class)i),
                json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "admitted",
                          (json_int_t)c->admitted, "completed", (json_int_t)c->completed, "errors",
                          (json_int_t)c->errors, "bytes", (json_int_t)c->bytes, "wait_ns_total",
                          (json_int_t)c->wait_ns_total, "service_ns_total",
                          (json_int_t)c->service_ns_total, "queued_now", (json_int_t)c->queued_now,
                          "inflight_now", (json_int_t)c->inflight_now));
        }
    }
    json_object_set_new(j, "sched", sched);
    return j;
}

/* ---- handlers -------------------------------------------------------------------------- */

static json_t *parse_body(struct MHD_Connection *c, struct request *rq, enum MHD_Result *ret)
{
    json_error_t jerr;
    json_t *j = rq->body.data ? json_loadb(rq->body.data, rq->body.len, 0, &jerr) : NULL;
    if (!j || !json_is_object(j)) {
        json_decref(j);
        *ret = send_error(c, -EINVAL, "the body must be a JSON object (see docs/API.md)%s%s",
                          rq->body.data ? ": " : "", rq->body.data ? jerr.text : "");
        return NULL;
    }
    return j;
}

static enum MHD_Result do_stage_post(struct tierd *d, struct MHD_Connection *c, struct request *rq)
{
    enum MHD_Result ret;
    json_t *j = parse_body(c, rq, &ret);
    if (!j)
        return ret;
    json_t *paths = json_object_get(j, "paths");
    json_t *pin = json_object_get(j, "pin");
    size_t n = json_is_array(paths) ? json_array_size(paths) : 0;
    if (n == 0 || n > 1024 || (pin && !json_is_boolean(pin))) {
        json_decref(j);
        return send_error(c, -EINVAL,
                          "expected {\"paths\": [\"/ns/dir\", ...] (1 to 1024), \"pin\": false}");
    }
    const char **pv = calloc(n, sizeof(*pv));
    if (!pv) {
        json_decref(j);
        return send_error(c, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        pv[i] = json_string_value(json_array_get(paths, i));
        if (!pv[i] || pv[i][0] != '/') {
            free(pv);
            json_decref(j);
            return send_error(c, -EINVAL, "paths[%zu] must be a mount path starting with '/'", i);
        }
    }
    uint64_t id = 0;
    tier_err_clear();
    int rc = d->stages ? stage_start(d->stages, pv, n, json_is_true(pin), &id) : -ENOSYS;
    if (rc) {
        ret =
            send_error(c, rc, "cannot stage: %s", *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    } else {
        ret = send_json(c, MHD_HTTP_ACCEPTED, json_pack("{s:I}", "job", (json_int_t)id));
    }
    free(pv);
    json_decref(j);
    return ret;
}

static enum MHD_Result do_stage_get(struct tierd *d, struct MHD_Connection *c, const char *ids)
{
    uint64_t id = 0;
    if (tier_parse_u64(ids, &id))
        return send_error(c, -EINVAL, "job id '%s' is not a number", ids);
    struct stage_progress p;
    memset(&p, 0, sizeof(p));
    int rc = d->stages ? stage_progress_get(d->stages, id, &p) : -ENOENT;
    if (rc)
        return send_error(c, rc, "no staging job %llu", (unsigned long long)id);
    const char *state = p.state == STAGE_RUNNING ? "running"
                        : p.state == STAGE_DONE  ? "done"
                                                 : "failed";
    return send_json(c, MHD_HTTP_OK,
                     json_pack("{s:I, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:f}", "job",
                               (json_int_t)id, "state", state, "listing_done", p.listing_done,
                               "files_total", (json_int_t)p.files_total, "files_done",
                               (json_int_t)p.files_done, "bytes_total", (json_int_t)p.bytes_total,
                               "bytes_done", (json_int_t)p.bytes_done, "bytes_already_cached",
                               (json_int_t)p.bytes_already_cached, "errors", (json_int_t)p.errors,
                               "first_error", p.first_error, "elapsed_s",
                               (double)p.elapsed_ns / (double)TIER_NS_PER_SEC));
}

/* The (backend, key prefix) a mount path stands for: the namespace prefix for a namespace root,
 * the exact key for an object, "key/" for a directory. */
/* key + "/" (the prefix of a directory), malloc'd; key is freed either way. NULL: no memory. */
static char *dir_prefix(char *key)
{
    size_t kl = strlen(key);
    char *dk = malloc(kl + 2);
    if (dk) {
        memcpy(dk, key, kl);
        dk[kl] = '/';
        dk[kl + 1] = '\0';
    }
    free(key);
    return dk;
}

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
    rc = backend_stat((*ns)->be, key, &st);
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
        rc = backend_list((*ns)->be, dk, "/", NULL, 1, &page);
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

static enum MHD_Result do_path_op(struct tierd *d, struct MHD_Connection *c, struct request *rq,
                                  const char *op)
{
    enum MHD_Result ret;
    json_t *j = parse_body(c, rq, &ret);
    if (!j)
        return ret;
    const char *path = json_string_value(json_object_get(j, "path"));
    if (!path || path[0] != '/') {
        json_decref(j);
        return send_error(c, -EINVAL, "expected {\"path\": \"/namespace/...\"}");
    }
    struct tierd_ns *ns = NULL;
    char *prefix = NULL;
    tier_err_clear();
    int rc = path_to_prefix(d, path, &ns, &prefix);
    if (rc) {
        ret = send_error(c, rc, "%s: %s", path, *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        goto out;
    }
    if (strcmp(op, "pin") == 0) {
        rc = cache_pin(d->cache, ns->be->name, prefix);
        if (rc == -ENOSPC)
            ret = send_error(c, rc,
                             "pinning %s would exceed the pin budget ([cache] pin_size); unpin "
                             "something or raise pin_size",
                             path);
        else if (rc)
            ret = send_error(c, rc, "pin %s failed: %s", path, strerror(-rc));
        else
            ret = send_json(c, MHD_HTTP_OK, json_pack("{s:b}", "ok", 1));
    } else if (strcmp(op, "unpin") == 0) {
        rc = cache_unpin(d->cache, ns->be->name, prefix);
        if (rc)
            ret = send_error(c, rc, "unpin %s failed: %s", path,
                             rc == -ENOENT ? "it was not pinned" : strerror(-rc));
        else
            ret = send_json(c, MHD_HTTP_OK, json_pack("{s:b}", "ok", 1));
    } else {
        long n = cache_evict(d->cache, ns->be->name, prefix);
        if (n < 0)
            ret = send_error(c, (int)n, "evict %s failed: %s", path, strerror((int)-n));
        else
            ret = send_json(c, MHD_HTTP_OK, json_pack("{s:I}", "evicted_blocks", (json_int_t)n));
    }
out:
    free(prefix);
    json_decref(j);
    return ret;
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
    rc = backend_stat(ns->be, key, &st);
    free(key);
    if (rc == -ENOENT) {
        struct backend_list_page page;
        memset(&page, 0, sizeof(page));
        rc = backend_list(ns->be, prefix, "/", NULL, 1, &page);
        if (rc == 0 && page.n == 0)
            rc = -ENOENT;
        backend_list_page_fini(&page);
    }
    if (rc == -ENOENT)
        tier_err_set("%s: no such file or directory in the write-back namespace %s", path,
                     ns->conf->path);
    return rc;
}

static enum MHD_Result do_wait(struct tierd *d, struct MHD_Connection *c, struct request *rq)
{
    enum MHD_Result ret;
    json_t *j = parse_body(c, rq, &ret);
    if (!j)
        return ret;
    const char *path = json_string_value(json_object_get(j, "path"));
    json_t *to = json_object_get(j, "timeout_s");
    if (!path || path[0] != '/' || (to && !json_is_null(to) && !json_is_number(to))) {
        json_decref(j);
        return send_error(c, -EINVAL,
                          "expected {\"path\": \"/namespace/...\", \"timeout_s\": SECONDS} "
                          "(timeout_s optional; absent, null or negative waits without limit)");
    }
    double secs = json_is_number(to) ? json_number_value(to) : -1.0;
    int64_t timeout_ms = secs < 0 ? -1 : secs > 1e9 ? (int64_t)1e12 : (int64_t)(secs * 1000.0);
    struct tierd_ns *ns = NULL;
    char *prefix = NULL;
    tier_err_clear();
    int rc = wb_path_prefix(d, path, &ns, &prefix);
    if (rc == 0)
        rc = wb_path_exists(d, ns, path, prefix);
    if (rc) {
        ret = send_error(c, rc, "%s", *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        goto out;
    }
    uint64_t t0 = tier_now_mono_ns();
    rc = wb_wait(d->wb, ns->conf->backend, prefix, timeout_ms);
    double waited = (double)(tier_now_mono_ns() - t0) / (double)TIER_NS_PER_SEC;
    if (rc == -ETIMEDOUT)
        ret = send_error(c, rc, "%s is not yet durable in the backend after %.1f s", path, waited);
    else if (rc == -ESHUTDOWN)
        ret = send_error(c, rc,
                         "tierd is shutting down; %s is not yet durable (it will be "
                         "uploaded after the restart)",
                         path);
    else if (rc)
        ret = send_error(c, rc, "wait %s failed: %s", path,
                         *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    else
        ret = send_json(c, MHD_HTTP_OK, json_pack("{s:b, s:f}", "ok", 1, "waited_s", waited));
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
        json_t *o = json_pack("{s:s, s:s, s:I, s:i, s:i, s:f, s:f, s:s, s:s, s:I}", "path", mp,
                              "state", wb_state_name(f->state), "size", (json_int_t)f->size_bytes,
                              "parts_done", f->parts_done, "parts_total", f->parts_total, "age_s",
                              (double)f->age_ms / 1000.0, "waiting_s",
                              (double)f->waiting_ms / 1000.0, "key", f->key, "checksum",
                              f->checksum, "generation", (json_int_t)f->generation);
        free(mp);
        if (!o) {
            rc = -ENOMEM;
            break;
        }
        json_object_set_new(o, "uploaded_etag", f->etag[0] ? json_string(f->etag) : json_null());
        json_object_set_new(o, "error", f->error ? json_string(f->error) : json_null());
        json_array_append_new(files, o);
    }
    wb_list_free(v, n);
    return rc;
}

static enum MHD_Result do_checkpoints(struct tierd *d, struct MHD_Connection *c)
{
    const char *path = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path");
    json_t *files = json_array();
    if (!files)
        return send_error(c, -ENOMEM, "out of memory");
    int rc = 0;
    tier_err_clear();
    if (path && *path && strcmp(path, "/") != 0) {
        struct tierd_ns *ns = NULL;
        char *prefix = NULL;
        if (path[0] != '/') {
            json_decref(files);
            return send_error(c, -EINVAL, "path must be a mount path starting with '/'");
        }
        rc = wb_path_prefix(d, path, &ns, &prefix);
        if (rc == 0)
            rc = list_ns(d, ns, prefix, files);
        free(prefix);
    } else if (!d->wb) {
        struct tierd_ns *ns = NULL;
        rc = wb_path_prefix(d, "/", &ns, NULL); /* -ENOTSUP with its message */
    } else {
        for (size_t i = 0; i < d->nns && rc == 0; i++)
            if (d->ns[i].conf->mode == TIERD_NS_WRITE_BACK)
                rc = list_ns(d, &d->ns[i], d->ns[i].conf->prefix, files);
    }
    if (rc) {
        json_decref(files);
        return send_error(c, rc, "%s", *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    }
    return send_json(c, MHD_HTTP_OK, json_pack("{s:o}", "files", files));
}

static bool token_ok(const struct tierd *d, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
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

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct listener *l = cls;
    struct tierd *d = l->api->d;
    struct request *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof(*rq));
        if (!rq)
            return MHD_NO;
        dynbuf_init(&rq->body, API_BODY_MAX);
        *con_cls = rq;
        if (l->tcp && !token_ok(d, c)) {
            rq->denied = true;
            return send_error(c, -EACCES,
                              "missing or wrong bearer token (send Authorization: Bearer <[api] "
                              "token>)");
        }
        return MHD_YES;
    }
    if (rq->denied)
        return MHD_YES;
    if (*upload_data_size > 0) {
        if (!rq->too_large && dynbuf_append(&rq->body, upload_data, *upload_data_size) != 0)
            rq->too_large = true;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (rq->too_large)
        return send_error(c, -E2BIG, "request body over %d bytes", API_BODY_MAX);

    bool get = strcmp(method, "GET") == 0;
    bool post = strcmp(method, "POST") == 0;
    if (get && strcmp(url, "/v1/status") == 0)
        return send_json(c, MHD_HTTP_OK, status_json(d));
    if (get && strcmp(url, "/v1/stats") == 0)
        return send_json(c, MHD_HTTP_OK, stats_json(d));
    if (post && strcmp(url, "/v1/stage") == 0)
        return do_stage_post(d, c, rq);
    if (get && strncmp(url, "/v1/stage/", 10) == 0)
        return do_stage_get(d, c, url + 10);
    if (post && strcmp(url, "/v1/pin") == 0)
        return do_path_op(d, c, rq, "pin");
    if (post && strcmp(url, "/v1/unpin") == 0)
        return do_path_op(d, c, rq, "unpin");
    if (post && strcmp(url, "/v1/evict") == 0)
        return do_path_op(d, c, rq, "evict");
    if (post && strcmp(url, "/v1/wait") == 0)
        return do_wait(d, c, rq);
    if (get && strcmp(url, "/v1/checkpoints") == 0)
        return do_checkpoints(d, c);
    return send_error(c, -ENOENT, "no such endpoint: %s %s (see docs/API.md)", method, url);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct request *rq = *con_cls;
    if (rq) {
        dynbuf_fini(&rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

/* ---- listeners ------------------------------------------------------------------------- */

static int mkdir_parent(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    int rc = 0;
    char *slash = strrchr(p, '/');
    if (slash && slash != p) {
        *slash = '\0';
        for (char *s = p + 1;; s++) {
            if (*s == '/' || *s == '\0') {
                char ch = *s;
                *s = '\0';
                if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                    rc = -errno;
                    break;
                }
                *s = ch;
                if (ch == '\0')
                    break;
            }
        }
    }
    free(p);
    return rc;
}

static int bind_unix(const char *path, int *fd_out)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (tier_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) >= sizeof(sa.sun_path)) {
        tier_err_set("[api] socket path %s is too long (at most %zu bytes)", path,
                     sizeof(sa.sun_path) - 1);
        return -ENAMETOOLONG;
    }
    int rc = mkdir_parent(path);
    if (rc) {
        tier_err_set("cannot create the directory of the API socket %s: %s", path, strerror(-rc));
        return rc;
    }
    /* a socket left by a crashed tierd: refuse only if something still answers on it */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
        if (connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            close(probe);
            tier_err_set("another tierd is listening on %s; stop it or change [api] socket", path);
            return -EADDRINUSE;
        }
        close(probe);
    }
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0660) != 0 ||
        listen(fd, 64) != 0) {
        rc = -errno;
        tier_err_set("cannot listen on %s: %s", path, strerror(-rc));
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

static int bind_tcp(const char *hostport, int *fd_out)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || (size_t)(colon - hostport) >= sizeof(host))
        return -EINVAL;
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    char *h = host;
    size_t hl = strlen(h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [::1]:7700 */
        h[hl - 1] = '\0';
        h++;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int g = getaddrinfo(*h ? h : NULL, colon + 1, &hints, &res);
    if (g != 0) {
        tier_err_set("[api] tcp = %s: %s", hostport, gai_strerror(g));
        return -EINVAL;
    }
    int rc = -EADDRNOTAVAIL;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) {
            *fd_out = fd;
            rc = 0;
            break;
        }
        rc = -errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (rc)
        tier_err_set("cannot listen on [api] tcp = %s: %s", hostport, strerror(-rc));
    return rc;
}

static int start_listener(struct listener *l, int fd)
{
    l->fd = fd;
    l->mhd = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, 0, NULL,
        NULL, handle, l, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, completed, l,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60, MHD_OPTION_END);
    if (!l->mhd) {
        tier_err_set("cannot start the HTTP server of the control API");
        return -EIO;
    }
    return 0;
}

int tierd_api_start(struct tierd *d, struct tierd_api **out)
{
    struct tierd_api *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->d = d;
    a->unix_l.api = a;
    a->unix_l.fd = -1;
    a->tcp_l.api = a;
    a->tcp_l.fd = -1;
    a->tcp_l.tcp = true;
    int fd = -1;
    int rc = bind_unix(d->cfg.api_socket, &fd);
    if (rc)
        goto fail;
    a->socket_path = strdup(d->cfg.api_socket);
    rc = start_listener(&a->unix_l, fd);
    if (rc) {
        close(fd);
        goto fail;
    }
    if (d->cfg.api_tcp) {
        if (!d->cfg.api_token) {
            rc = -EINVAL;
            tier_err_set("[api] tcp needs a token");
            goto fail;
        }
        rc = bind_tcp(d->cfg.api_tcp, &fd);
        if (rc)
            goto fail;
        rc = start_listener(&a->tcp_l, fd);
        if (rc) {
            close(fd);
            goto fail;
        }
    }
    log_info("api: listening on %s%s%s", d->cfg.api_socket, d->cfg.api_tcp ? " and tcp " : "",
             d->cfg.api_tcp ? d->cfg.api_tcp : "");
    *out = a;
    return 0;
fail:
    tierd_api_stop(a);
    return rc;
}

void tierd_api_stop(struct tierd_api *a)
{
    if (!a)
        return;
    struct listener *ls[] = {&a->tcp_l, &a->unix_l};
    for (size_t i = 0; i < 2; i++) {
        /* MHD closes the listen socket it was given */
        if (ls[i]->mhd)
            MHD_stop_daemon(ls[i]->mhd);
        ls[i]->mhd = NULL;
    }
    if (a->socket_path) {
        unlink(a->socket_path);
        free(a->socket_path);
    }
    free(a);
}
