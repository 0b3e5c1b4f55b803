/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_datasets.c - dataset versions through the control API (dataset.h, docs/VERSIONS.md): POST
 * /v1/datasets (commit), GET /v1/datasets?path=P (list), GET /v1/datasets/NAME (show), GET
 * /v1/datasets/A/diff/B and DELETE /v1/datasets/NAME. Called on the HTTP server's connection
 * threads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "api/api_int.h"
#include "datasets/dataset.h"
#include "core/state.h"

/* path: the tree asked for (the view is built from it, not from the manifest's own field) */
static json_t *manifest_summary(struct tierd *d, const struct manifest *m, const char *path)
{
    json_t *o = json_pack(
        "{s:o, s:o, s:o, s:o, s:o, s:s, s:I, s:I, s:I}", "name", api_jstr(m->name), "path",
        api_jstr(m->path), "namespace", api_jstr(m->ns), "backend", api_jstr(m->backend), "prefix",
        api_jstr(m->prefix), "commit_id", m->commit_id, "created_at", (json_int_t)m->created_at,
        "count", (json_int_t)m->n, "bytes", (json_int_t)m->bytes);
    /* files recorded with a version id (a bucket that keeps versions: they read their
     * committed bytes after an overwrite or a delete) */
    size_t nv = 0;
    for (size_t i = 0; i < m->n; i++)
        nv += m->files[i].version_id != NULL;
    if (o)
        json_object_set_new(o, "versioned", json_integer((json_int_t)nv));
    /* where the mount serves it (fuse_ctl_versions.c): <mount>/.tierd/datasets<path>@<name> */
    const char *mp = d->cfg.mount_path;
    char *view = NULL;
    if (o && d->fuse && d->hints &&
        mp) { /* /.tierd exists with the hint engine (fuse_ctl_hints.c) */
        size_t ml = strlen(mp);
        while (ml > 1 && mp[ml - 1] == '/')
            ml--;
        size_t pl = strlen(path);
        while (pl > 1 && path[pl - 1] == '/')
            pl--;
        if (asprintf(&view, "%.*s/.tierd/datasets%.*s@%s", (int)ml, mp, (int)pl, path, m->name) >=
            0) {
            json_object_set_new(o, "view", api_jstr(view));
            free(view);
        }
    }
    return o;
}

/* -EEXIST (the name is taken) is 409; the rest as every error maps (ENOENT 404, EINVAL 400). */
static unsigned reply_dataset_error(struct api_reply *out, int rc, const char *what)
{
    const char *msg = *tier_err_msg() ? tier_err_msg() : strerror(-rc);
    if (rc == -EEXIST)
        return api_reply_error_status(out, 409, rc, "%s: %s", what, msg);
    if (rc == -EBADMSG) /* a damaged manifest: the request is answered, the version refused */
        return api_reply_error_status(out, 400, -EINVAL, "%s: %s", what, msg);
    return api_reply_error(out, rc, "%s: %s", what, msg);
}

/* POST /v1/datasets {"path", "name"}: commit. */
unsigned api_datasets_post(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                           const char *rest)
{
    (void)rest;
    unsigned ret;
    json_t *j = api_parse_body(rq, out, &ret);
    if (!j)
        return ret;
    static const char *const fields[] = {"path", "name"};
    const char *bad = api_unknown_field(j, fields, 2);
    const char *path = json_string_value(json_object_get(j, "path"));
    const char *name = json_string_value(json_object_get(j, "name"));
    if (bad)
        ret = api_reply_error(out, -EINVAL, "unknown field '%.60s' (allowed: path, name)", bad);
    else if (!path || path[0] != '/' || !name)
        ret =
            api_reply_error(out, -EINVAL,
                            "expected {\"path\": \"/datasets/x\", \"name\": \"v3\"} (a mount path "
                            "and a version name)");
    else {
        struct manifest m;
        tier_err_clear();
        int rc = dataset_commit(d->datasets, path, name, &m);
        if (rc)
            ret = reply_dataset_error(out, rc, "commit");
        else {
            ret = api_reply_json(out, 201, manifest_summary(d, &m, path));
            manifest_fini(&m);
        }
    }
    json_decref(j);
    return ret;
}

/* GET /v1/datasets/A/diff/B?path=P: what B added, removed and changed against A (by key; a
 * changed file has another size or ETag), one merge walk of the two sorted manifests. */
static unsigned datasets_diff(struct tierd *d, const char *path, const char *spec, const char *sep,
                              struct api_reply *out)
{
    char a[MANIFEST_NAME_MAX], b[MANIFEST_NAME_MAX];
    size_t al = (size_t)(sep - spec);
    const char *bn = sep + strlen("/diff/");
    if (al == 0 || al >= sizeof(a) || strlen(bn) >= sizeof(b))
        return api_reply_error(out, -EINVAL,
                               "expected /v1/datasets/A/diff/B?path=P (two version names)");
    memcpy(a, spec, al);
    a[al] = '\0';
    snprintf(b, sizeof(b), "%s", bn);
    struct manifest ma, mb;
    int rc = dataset_show(d->datasets, path, a, &ma);
    if (rc)
        return reply_dataset_error(out, rc, "diff");
    rc = dataset_show(d->datasets, path, b, &mb);
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
            e = json_pack("{s:o, s:I}", "key", api_jstr(ma.files[i].key), "size",
                          (json_int_t)ma.files[i].size);
            ok = e && json_array_append_new(removed, e) == 0;
            i++;
        } else if (c > 0) {
            e = json_pack("{s:o, s:I}", "key", api_jstr(mb.files[k].key), "size",
                          (json_int_t)mb.files[k].size);
            ok = e && json_array_append_new(added, e) == 0;
            k++;
        } else {
            if (ma.files[i].size != mb.files[k].size ||
                strcmp(ma.files[i].etag, mb.files[k].etag) != 0) {
                e = json_pack("{s:o, s:I, s:I}", "key", api_jstr(ma.files[i].key), "size_a",
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
        return api_reply_error(out, -ENOMEM, "out of memory");
    }
    return api_reply_json(out, 200,
                          json_pack("{s:o, s:s, s:s, s:o, s:o, s:o, s:I}", "path", api_jstr(path),
                                    "a", a, "b", b, "added", added, "removed", removed, "changed",
                                    changed, "unchanged", (json_int_t)same));
}

/* GET /v1/datasets?path=P (the versions of P); GET or DELETE /v1/datasets/NAME?path=P. */
static unsigned datasets_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                             const char *name, bool del)
{
    const char *path = rq->arg_path;
    if (!path || path[0] != '/')
        return api_reply_error(out, -EINVAL,
                               "path must be given, a mount path starting with '/' "
                               "(/v1/datasets?path=/datasets/x)");
    const struct tierd_ns_conf *nc = del ? NULL : api_ns_of(d, path);
    if (nc && !api_caller_reads(d, rq, nc))
        return api_reply_not_readable(out, rq, path, nc);
    if (!nc && !rq->admin) /* what the mount does not show is no reader's business */
        return api_reply_error_status(out, 404, -ENOENT, "%s is in no namespace", path);
    tier_err_clear();
    if (del) {
        int rc = dataset_delete(d->datasets, path, name);
        if (rc)
            return reply_dataset_error(out, rc, "delete");
        return api_reply_json(
            out, 200, json_pack("{s:o, s:o}", "deleted", api_jstr(name), "path", api_jstr(path)));
    }
    const char *dsep = name ? strstr(name, "/diff/") : NULL;
    if (dsep) /* GET /v1/datasets/A/diff/B */
        return datasets_diff(d, path, name, dsep, out);
    if (name) {
        struct manifest m;
        int rc = dataset_show(d->datasets, path, name, &m);
        if (rc)
            return reply_dataset_error(out, rc, "show");
        unsigned ret = api_reply_json(out, 200, manifest_summary(d, &m, path));
        manifest_fini(&m);
        return ret;
    }
    char **names = NULL;
    size_t n = 0;
    int rc = dataset_list(d->datasets, path, &names, &n);
    if (rc)
        return reply_dataset_error(out, rc, "list");
    json_t *arr = api_jstr_array(names, n);
    dataset_names_free(names, n);
    return api_reply_json(out, 200,
                          json_pack("{s:o, s:o}", "path", api_jstr(path), "versions", arr));
}

unsigned api_datasets_list(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                           const char *rest)
{
    (void)rest;
    return datasets_get(d, rq, out, NULL, false);
}

/* GET or DELETE /v1/datasets/NAME (rest: NAME, or A/diff/B) */
unsigned api_datasets_one(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                          const char *rest)
{
    return datasets_get(d, rq, out, rest, strcmp(rq->method, "DELETE") == 0);
}
