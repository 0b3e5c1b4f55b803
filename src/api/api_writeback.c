/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_writeback.c - the burst buffer through the control API (wb.h): POST /v1/wait (block until
 * every closed file under a path is durable in the backend, at most [api] max_wait) and GET
 * /v1/checkpoints. Called on the HTTP server's connection threads; a wait blocks its caller's
 * thread in wb_wait().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "api/api_int.h"
#include "core/state.h"
#include "writeback/wb.h"

/* Resolve a mount path inside a write-back namespace. The answer is the backend key prefix the
 * path stands for: the namespace's prefix for its root, the exact key for a file the burst
 * buffer knows, "key/" otherwise (a directory). -ENOENT (with a message) outside a write-back
 * namespace; -ENOTSUP when tierd runs no burst buffer. */
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
    char *dk = tier_dir_prefix(key);
    free(key);
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

unsigned api_wait(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                  const char *rest)
{
    (void)rest;
    unsigned ret;
    json_t *j = api_parse_body(rq, out, &ret);
    if (!j)
        return ret;
    const char *path = json_string_value(json_object_get(j, "path"));
    json_t *to = json_object_get(j, "timeout_s");
    if (!path || path[0] != '/' || (to && !json_is_null(to) && !json_is_number(to))) {
        json_decref(j);
        return api_reply_error(out, -EINVAL,
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
        ret = api_reply_not_readable(out, rq, path, ns->conf);
        goto out;
    }
    if (rc == 0)
        rc = wb_path_exists(d, ns, path, prefix);
    if (rc) {
        ret = api_reply_error(out, rc, "%s", *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        goto out;
    }
    uint64_t t0 = tier_now_mono_ns();
    rc = wb_wait(d->wb, ns->conf->backend, prefix, timeout_ms);
    double waited = (double)(tier_now_mono_ns() - t0) / (double)TIER_NS_PER_SEC;
    if (rc == -ETIMEDOUT)
        ret = api_reply_error(out, rc, "%s is not yet durable in the backend after %.1f s%s", path,
                              waited,
                              capped ? " (one wait lasts at most [api] max_wait; ask again)" : "");
    else if (rc == -ESHUTDOWN)
        ret = api_reply_error(out, rc,
                              "tierd is shutting down; %s is not yet durable (it will be "
                              "uploaded after the restart)",
                              path);
    else if (rc)
        ret = api_reply_error(out, rc, "wait %s failed: %s", path,
                              *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    else
        ret = api_reply_json(out, 200, json_pack("{s:b, s:f}", "ok", 1, "waited_s", waited));
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
                              api_jstr(mp), "state", wb_state_name(f->state), "size",
                              (json_int_t)f->size_bytes, "parts_done", f->parts_done, "parts_total",
                              f->parts_total, "age_s", (double)f->age_ms / 1000.0, "waiting_s",
                              (double)f->waiting_ms / 1000.0, "key", api_jstr(f->key), "checksum",
                              api_jstr(f->checksum), "generation", (json_int_t)f->generation);
        if (o && !api_utf8_valid(mp, strlen(mp))) {
            json_object_set_new(o, "path_b64", api_jb64(mp));
            json_object_set_new(o, "key_b64", api_jb64(f->key));
        }
        free(mp);
        if (!o) {
            rc = -ENOMEM;
            break;
        }
        json_object_set_new(o, "uploaded_etag", f->etag[0] ? api_jstr(f->etag) : json_null());
        json_object_set_new(o, "error", f->error ? api_jstr(f->error) : json_null());
        json_array_append_new(files, o);
    }
    wb_list_free(v, n);
    return rc;
}

unsigned api_checkpoints(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                         const char *rest)
{
    (void)rest;
    const char *path = rq->arg_path;
    json_t *files = json_array();
    if (!files)
        return api_reply_error(out, -ENOMEM, "out of memory");
    int rc = 0;
    tier_err_clear();
    if (path && *path && strcmp(path, "/") != 0) {
        struct tierd_ns *ns = NULL;
        char *prefix = NULL;
        if (path[0] != '/') {
            json_decref(files);
            return api_reply_error(out, -EINVAL, "path must be a mount path starting with '/'");
        }
        rc = wb_path_prefix(d, path, &ns, &prefix);
        if (rc == 0 && !api_caller_reads(d, rq, ns->conf)) {
            free(prefix);
            json_decref(files);
            return api_reply_not_readable(out, rq, path, ns->conf);
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
        return api_reply_error(out, rc, "%s", *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    }
    return api_reply_json(out, 200, json_pack("{s:o}", "files", files));
}
