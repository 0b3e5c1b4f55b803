/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_stage.c - staging, pins and evictions through the control API: POST /v1/stage, GET
 * /v1/stage/ID, POST /v1/pin, /v1/unpin, /v1/evict; and the mount path (or dataset version path)
 * to key prefix resolution they and POST /v1/jobs share. The backend calls they make go as
 * api_io. Called on the HTTP server's connection threads; the stager and the cache are
 * thread-safe.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "api/api_int.h"
#include "datasets/dataset.h"
#include "stage/pinmeta.h"
#include "stage/stage.h"
#include "core/state.h"
#include "tenant/tenant.h"

/* Paths per POST /v1/stage: each is resolved (a backend stat) before the answer. */
#define API_STAGE_PATHS_MAX 256

unsigned api_stage_post(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                        const char *rest)
{
    (void)rest;
    unsigned ret;
    json_t *j = api_parse_body(rq, out, &ret);
    if (!j)
        return ret;
    json_t *paths = json_object_get(j, "paths");
    json_t *pin = json_object_get(j, "pin");
    json_t *tj = json_object_get(j, "tenant");
    json_t *cl = json_object_get(j, "cluster");
    size_t n = json_is_array(paths) ? json_array_size(paths) : 0;
    static const char *const fields[] = {"paths", "pin", "tenant", "cluster"};
    const char *bad = api_unknown_field(j, fields, sizeof(fields) / sizeof(fields[0]));
    if (bad || n == 0 || n > API_STAGE_PATHS_MAX || (pin && !json_is_boolean(pin)) ||
        (tj && !json_is_string(tj)) || (cl && !json_is_boolean(cl))) {
        ret = api_reply_error(
            out, -EINVAL,
            "%s%.60s%sexpected {\"paths\": [\"/ns/dir\", ...] (1 to %d), \"pin\": "
            "false, \"tenant\": \"NAME\", \"cluster\": false} (pin, tenant and cluster "
            "optional)",
            bad ? "unknown field '" : "", bad ? bad : "", bad ? "': " : "", API_STAGE_PATHS_MAX);
        json_decref(j);
        return ret;
    }
    /* whose staging: its QoS share, telemetry and hot-tier space (default: tenant default) */
    uint32_t tenant = TIER_TENANT_DEFAULT;
    if (tj && (!d->tenants || tenant_find(d->tenants, json_string_value(tj), &tenant) != 0)) {
        ret = api_reply_no_tenant(out, json_string_value(tj));
        json_decref(j);
        return ret;
    }
    const char **pv = calloc(n, sizeof(*pv));
    if (!pv) {
        json_decref(j);
        return api_reply_error(out, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        pv[i] = json_string_value(json_array_get(paths, i));
        if (!pv[i] || pv[i][0] != '/') {
            free(pv);
            json_decref(j);
            return api_reply_error(out, -EINVAL,
                                   "paths[%zu] must be a mount path starting with '/'", i);
        }
    }
    uint64_t id = 0;
    tier_err_clear();
    int rc = !d->stages ? -ENOSYS
             : json_is_true(cl)
                 ? stage_start_cluster(d->stages, tenant, pv, n, json_is_true(pin), &id)
                 : stage_start_for(d->stages, tenant, pv, n, json_is_true(pin), &id);
    if (rc) {
        ret = api_reply_error(out, rc, "cannot stage: %s",
                              *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    } else {
        ret = api_reply_json(out, 202, json_pack("{s:I}", "job", (json_int_t)id));
    }
    free(pv);
    json_decref(j);
    return ret;
}

unsigned api_stage_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                       const char *rest)
{
    (void)rq;
    const char *ids = rest;
    uint64_t id = 0;
    if (tier_parse_u64(ids, &id))
        return api_reply_error(out, -EINVAL, "job id '%s' is not a number", ids);
    struct stage_progress p;
    memset(&p, 0, sizeof(p));
    int rc = d->stages ? stage_progress_get(d->stages, id, &p) : -ENOENT;
    if (rc)
        return api_reply_error(out, rc, "no staging job %llu", (unsigned long long)id);
    const char *state = p.state == STAGE_RUNNING ? "running"
                        : p.state == STAGE_DONE  ? "done"
                                                 : "failed";
    const char *tname = d->tenants ? tenant_name(d->tenants, p.tenant) : NULL;
    return api_reply_json(
        out, 200,
        json_pack("{s:I, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:f}", "job",
                  (json_int_t)id, "state", state, "tenant", tname ? tname : "default",
                  "listing_done", p.listing_done, "files_total", (json_int_t)p.files_total,
                  "files_done", (json_int_t)p.files_done, "bytes_total", (json_int_t)p.bytes_total,
                  "bytes_done", (json_int_t)p.bytes_done, "bytes_already_cached",
                  (json_int_t)p.bytes_already_cached, "bytes_on_peers",
                  (json_int_t)p.bytes_on_peers, "errors", (json_int_t)p.errors, "first_error",
                  api_jstr(p.first_error), "elapsed_s",
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
int api_path_prefix(struct tierd *d, const char *path, struct tierd_ns **ns, char **prefix)
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
int api_version_prefix(struct tierd *d, const char *path, struct tierd_ns **ns, char **prefix,
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
        rc = dataset_show(d->datasets, tree, name, &m);
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

static unsigned path_op(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                        const char *op)
{
    unsigned ret;
    json_t *j = api_parse_body(rq, out, &ret);
    if (!j)
        return ret;
    const char *path = json_string_value(json_object_get(j, "path"));
    if (!path || path[0] != '/') {
        json_decref(j);
        return api_reply_error(out, -EINVAL, "expected {\"path\": \"/namespace/...\"}");
    }
    struct tierd_ns *ns = NULL;
    char *prefix = NULL;
    tier_err_clear();
    int rc = api_version_prefix(d, path, &ns, &prefix, false);
    if (rc == 1)
        rc = api_path_prefix(d, path, &ns, &prefix);
    if (rc) {
        ret = api_reply_error(out, rc, "%s: %s", path,
                              *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        goto out;
    }
    if (strcmp(op, "pin") == 0) {
        rc = cache_pin(d->cache, ns->be->name, prefix);
        if (rc == -ENOSPC)
            ret =
                api_reply_error(out, rc,
                                "pinning %s would exceed the pin budget ([cache] pin_size); unpin "
                                "something or raise pin_size",
                                path);
        else if (rc)
            ret =
                api_reply_error(out, rc, "pin %s failed: %s", path,
                                rc == -EDQUOT && *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        else
            ret = api_reply_json(out, 200, json_pack("{s:b}", "ok", 1));
    } else if (strcmp(op, "unpin") == 0) {
        rc = cache_unpin(d->cache, ns->be->name, prefix);
        if (rc == 0 && d->pinned)
            pinmeta_forget(d->pinned, ns->be->name, prefix);
        if (rc)
            ret = api_reply_error(out, rc, "unpin %s failed: %s", path,
                                  rc == -ENOENT ? "it was not pinned" : strerror(-rc));
        else
            ret = api_reply_json(out, 200, json_pack("{s:b}", "ok", 1));
    } else {
        long n = cache_evict(d->cache, ns->be->name, prefix); /* pinned blocks stay, and so
                                                               * does pinmeta */
        if (n < 0)
            ret = api_reply_error(out, (int)n, "evict %s failed: %s", path, strerror((int)-n));
        else
            ret = api_reply_json(out, 200, json_pack("{s:I}", "evicted_blocks", (json_int_t)n));
    }
out:
    free(prefix);
    json_decref(j);
    return ret;
}

unsigned api_pin(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                 const char *rest)
{
    (void)rest;
    return path_op(d, rq, out, "pin");
}

unsigned api_unpin(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                   const char *rest)
{
    (void)rest;
    return path_op(d, rq, out, "unpin");
}

unsigned api_evict(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                   const char *rest)
{
    (void)rest;
    return path_op(d, rq, out, "evict");
}
