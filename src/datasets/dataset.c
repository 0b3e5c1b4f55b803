/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset.c - dataset versions: commit, list, show, delete (dataset.h). A commit lists the tree
 * page by page (no delimiter: every key under it), builds the manifest in key order, and
 * publishes it with backend_put_new. A commit id (128 random bits) inside the manifest tells our
 * own manifest from another committer's when a retried PUT finds the key taken (S3 answers 412
 * to the retry of a PUT whose first reply was lost): ours is a success, theirs is -EEXIST.
 */
#include "datasets/dataset.h"

#include <errno.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/err.h"
#include "common/ioctx.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "tiers/backend.h"

/* Manifests are read and written as administrative I/O of the default tenant. */
static const struct tier_ioctx ds_io = {.tenant = TIER_TENANT_DEFAULT, .cls = TIER_IO_BACKGROUND};

struct datasets {
    struct datasets_ctx c; /* immutable */
    _Atomic uint64_t gen;  /* versions committed or deleted through it (dataset_generation) */
};

struct datasets *datasets_open(const struct datasets_ctx *ctx)
{
    struct datasets *ds = calloc(1, sizeof(*ds));
    if (ds)
        ds->c = *ctx;
    return ds;
}

void datasets_close(struct datasets *ds)
{
    free(ds);
}

bool dataset_reserved_name(const char *name)
{
    return name && strcmp(name, DATASET_RESERVED) == 0;
}

bool dataset_reserved_key(const struct tierd_ns *ns, const char *key)
{
    const char *nsp = ns->conf->prefix ? ns->conf->prefix : "";
    size_t pl = strlen(nsp), rl = sizeof(DATASET_RESERVED) - 1;
    return key && strncmp(key, nsp, pl) == 0 && strncmp(key + pl, DATASET_RESERVED, rl) == 0 &&
           (key[pl + rl] == '\0' || key[pl + rl] == '/');
}

/* The tree at path: its namespace, its relative path R ("" for the root) and its key prefix
 * ("" or ending in '/'). */
static int tree_of(struct datasets *ds, const char *path, struct tierd_ns **ns, char **rel,
                   char **prefix)
{
    bool is_root = false;
    char *key = NULL;
    int rc = ds->c.ops.resolve(ds->c.ops.ud, path, ns, &key, &is_root);
    if (rc)
        return rc;
    const char *nsp = (*ns)->conf->prefix ? (*ns)->conf->prefix : "";
    size_t npl = strlen(nsp);
    *rel = strdup(key + npl);
    if (is_root)
        *prefix = key;
    else {
        size_t kl = strlen(key);
        *prefix = malloc(kl + 2);
        if (*prefix) {
            memcpy(*prefix, key, kl);
            (*prefix)[kl] = '/';
            (*prefix)[kl + 1] = '\0';
        }
        free(key);
    }
    if (!*rel || !*prefix) {
        free(*rel);
        free(*prefix);
        return -ENOMEM;
    }
    if (strncmp(*rel, DATASET_RESERVED, strlen(DATASET_RESERVED)) == 0 &&
        ((*rel)[strlen(DATASET_RESERVED)] == '\0' || (*rel)[strlen(DATASET_RESERVED)] == '/')) {
        tier_err_set("%s is inside the reserved %s", path, DATASET_RESERVED);
        free(*rel);
        free(*prefix);
        return -EINVAL;
    }
    return 0;
}

/* <namespace prefix>.tierd-datasets/<rel, each segment's '%' and '@' percent-encoded>/@ (the
 * versions' common prefix; "<...>.tierd-datasets/@" for the root) + name. A segment never starts
 * with '@' once encoded, so a tree's versions and its subtrees' directories cannot collide, and
 * every segment stays as long as the tree's own. */
static char *manifest_key(const struct tierd_ns *ns, const char *rel, const char *name)
{
    const char *nsp = ns->conf->prefix ? ns->conf->prefix : "";
    size_t cap = strlen(nsp) + sizeof(DATASET_RESERVED) + 3 * strlen(rel) + 3 +
                 (name ? strlen(name) : 0) + 1;
    char *k = malloc(cap);
    if (!k)
        return NULL;
    size_t o = (size_t)snprintf(k, cap, "%s%s/", nsp, DATASET_RESERVED);
    for (const char *p = rel; *p; p++) {
        if (*p == '%' || *p == '@')
            o += (size_t)snprintf(k + o, cap - o, "%%%02X", (unsigned char)*p);
        else
            k[o++] = *p;
    }
    if (*rel)
        k[o++] = '/';
    k[o++] = '@';
    k[o] = '\0';
    if (name)
        snprintf(k + o, cap - o, "%s", name);
    return k;
}

static int check_name(const char *name)
{
    if (!manifest_name_valid(name)) {
        tier_err_set("version name '%.80s' is not allowed (1 to %d letters, digits, '.', '_', "
                     "'-', the first a letter or digit)",
                     name ? name : "", MANIFEST_NAME_MAX - 1);
        return -EINVAL;
    }
    return 0;
}

/* Read a whole manifest object into a malloc'd buffer; -E2BIG (no message) when it is over
 * max bytes, known from its size before it is read. */
static int read_object(struct backend *be, const char *key, size_t max, char **buf, size_t *len)
{
    struct backend_stat st;
    int rc = backend_stat(be, &ds_io, key, &st);
    if (rc)
        return rc;
    if (st.size_bytes > MANIFEST_MAX_BYTES) {
        tier_err_set("manifest %s is %llu bytes, more than %u", key,
                     (unsigned long long)st.size_bytes, MANIFEST_MAX_BYTES);
        return -EINVAL;
    }
    if (st.size_bytes > max)
        return -E2BIG;
    char *b = malloc(st.size_bytes + 1);
    if (!b)
        return -ENOMEM;
    ssize_t r = backend_read(be, &ds_io, key, 0, b, st.size_bytes, st.etag, NULL);
    if (r < 0) {
        free(b);
        return (int)r;
    }
    b[r] = '\0';
    *buf = b;
    *len = (size_t)r;
    return 0;
}

/* An error the backend may not give next time (no answer, a timeout): the commit fails then,
 * rather than going on without what it could not learn. */
static bool transient(int rc)
{
    return rc == -ETIMEDOUT || rc == -EAGAIN || rc == -ECONNREFUSED || rc == -ECONNRESET ||
           rc == -EHOSTUNREACH || rc == -ENETUNREACH || rc == -ECONNABORTED || rc == -EPIPE;
}

int dataset_walk_objects(struct tierd_ns *ns, const struct tier_ioctx *io, const char *prefix,
                         bool versions, int (*fn)(void *ud, const struct backend_entry *e),
                         void *ud)
{
    size_t pl = strlen(prefix);
    char *token = NULL;
    int rc = 0;
    do {
        struct backend_list_page page;
        memset(&page, 0, sizeof(page));
        rc = versions ? backend_list_versions(ns->be, io, prefix, token, 0, &page)
                      : backend_list(ns->be, io, prefix, NULL, token, 0, &page);
        free(token);
        token = NULL;
        if (rc)
            break;
        for (size_t i = 0; i < page.n && rc == 0; i++) {
            const struct backend_entry *e = &page.entries[i];
            size_t nl = strlen(e->name);
            if (e->is_prefix || nl <= pl || strncmp(e->name, prefix, pl) != 0)
                continue;
            if (e->name[nl - 1] == '/' || dataset_reserved_key(ns, e->name))
                continue; /* an S3 "folder" marker (AWS console, s3fs, rclone), or a manifest */
            rc = fn(ud, e);
        }
        if (rc == 0 && page.next_token && !(token = strdup(page.next_token)))
            rc = -ENOMEM;
        backend_list_page_fini(&page);
    } while (rc == 0 && token);
    free(token);
    return rc;
}

struct tree_ctx {
    struct manifest *m;
    size_t pl;       /* the tree's prefix length */
    const char *rel; /* the tree, for messages */
};

static int tree_add(void *ud, const struct backend_entry *e)
{
    struct tree_ctx *t = ud;
    struct manifest *m = t->m;
    size_t nl = strlen(e->name);
    if (backend_key_valid(e->name, nl, false) != 0) {
        tier_err_set("%s holds the key '%.300s', which the mount cannot serve (empty, '.' or '..' "
                     "segments, or too long): such a tree cannot be versioned",
                     t->rel[0] ? t->rel : "the namespace", e->name);
        return -EINVAL;
    }
    /* "null": an object written while versioning was off or suspended, which the next write
     * replaces in place: no id to keep */
    const char *vid = e->version_id && strcmp(e->version_id, "null") != 0 ? e->version_id : NULL;
    int rc = manifest_add_version(m, e->name + t->pl, e->size_bytes, e->etag, vid);
    if (rc == -EINVAL && m->n > 0 && strcmp(m->files[m->n - 1].key, e->name + t->pl) >= 0) {
        tier_err_set("the backend listed %s out of order", e->name);
        rc = -EIO;
    } else if (rc == -EINVAL) {
        tier_err_set("'%.300s' cannot be versioned: its name is not UTF-8 or holds a control "
                     "character, or the backend gave no ETag for it",
                     e->name);
    }
    return rc;
}

static int list_tree(struct tierd_ns *ns, const char *prefix, const char *rel, struct manifest *m,
                     bool versions)
{
    struct tree_ctx t = {.m = m, .pl = strlen(prefix), .rel = rel};
    return dataset_walk_objects(ns, &ds_io, prefix, versions, tree_add, &t);
}

int dataset_commit(struct datasets *ds, const char *path, const char *name, struct manifest *out)
{
    memset(out, 0, sizeof(*out));
    int rc = check_name(name);
    if (rc)
        return rc;
    struct tierd_ns *ns = NULL;
    char *rel = NULL, *prefix = NULL, *key = NULL, *text = NULL;
    rc = tree_of(ds, path, &ns, &rel, &prefix);
    if (rc)
        return rc;
    struct manifest *m = out;
    unsigned char raw[16];
    char id[33];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        rc = -EIO;
        goto out;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(id + 2 * i, 3, "%02x", raw[i]);
    m->name = strdup(name);
    size_t pl = strlen(path);
    while (pl > 1 && path[pl - 1] == '/')
        pl--; /* "/ds/a/" is the tree /ds/a (its view is /.tierd/datasets/ds/a@NAME) */
    m->path = strndup(path, pl);
    m->ns = strdup(ns->conf->path);
    m->backend = strdup(ns->be->name);
    m->prefix = strdup(prefix);
    m->commit_id = strdup(id);
    m->created_at = (int64_t)(tier_now_real_ns() / TIER_NS_PER_SEC);
    if (!m->name || !m->path || !m->ns || !m->backend || !m->prefix || !m->commit_id) {
        rc = -ENOMEM;
        goto out;
    }
    /* A bucket that keeps older versions: record each file's version id, so the version reads
     * its bytes after the key is overwritten or deleted (a backend without versions: -ENOTSUP,
     * and reads of a changed file fail instead) */
    bool keeps = false;
    tier_err_clear();
    rc = backend_versioning(ns->be, &ds_io, &keeps);
    if (rc && transient(rc))
        goto out; /* the backend cannot be asked now: the commit fails, to be retried */
    if (rc && rc != -ENOTSUP)
        log_warn("dataset: %s does not say whether it keeps versions (%s): %s is committed "
                 "without version ids",
                 ns->be->name, *tier_err_msg() ? tier_err_msg() : strerror(-rc), path);
    rc = list_tree(ns, prefix, rel, m, keeps);
    if (rc && keeps && !transient(rc) && rc != -ENOMEM && m->n == 0) {
        /* ListObjectVersions refused (its own permission, s3:ListBucketVersions) */
        log_warn("dataset: %s refuses to list versions (%s): %s is committed without version "
                 "ids",
                 ns->be->name, *tier_err_msg() ? tier_err_msg() : strerror(-rc), path);
        rc = list_tree(ns, prefix, rel, m, false);
    }
    if (rc)
        goto out;
    if (m->n == 0) {
        tier_err_set("%s names no file: nothing to commit", path);
        rc = -ENOENT;
        goto out;
    }
    key = manifest_key(ns, rel, name);
    size_t len = 0;
    if (!key || (rc = manifest_encode(m, &text, &len)) != 0) {
        rc = rc ? rc : -ENOMEM;
        goto out;
    }
    if (len > MANIFEST_MAX_BYTES) {
        tier_err_set("%s has %zu files: its manifest (%zu bytes) would be larger than the %u "
                     "bytes tierd reads back; commit smaller trees",
                     path, m->n, len, MANIFEST_MAX_BYTES);
        rc = -EFBIG;
        goto out;
    }
    rc = backend_put_new(ns->be, &ds_io, key, text, len, NULL);
    if (rc == -EEXIST) {
        /* ours (a retried PUT whose first reply was lost), or another committer's? */
        struct manifest other;
        char *buf = NULL;
        size_t bl = 0;
        char err[256];
        if (read_object(ns->be, key, SIZE_MAX, &buf, &bl) == 0 &&
            manifest_decode(buf, bl, &other, err, sizeof(err)) == 0) {
            if (strcmp(other.commit_id, id) == 0)
                rc = 0;
            else
                tier_err_set("version %s of %s exists (committed at %lld, %zu files): pick "
                             "another name, or delete it first",
                             name, path, (long long)other.created_at, other.n);
            manifest_fini(&other);
        } else {
            tier_err_set("version %s of %s exists (its manifest does not read back: delete it "
                         "first)",
                         name, path);
        }
        free(buf);
    }
out:
    if (rc)
        manifest_fini(m);
    else
        atomic_fetch_add(&ds->gen, 1); /* the view lists it at once (dataset_generation) */
    free(text);
    free(key);
    free(rel);
    free(prefix);
    return rc;
}

int dataset_show(struct datasets *ds, const char *path, const char *name, struct manifest *out)
{
    return dataset_show_max(ds, path, name, SIZE_MAX, out);
}

int dataset_show_max(struct datasets *ds, const char *path, const char *name, size_t max_text,
                     struct manifest *out)
{
    memset(out, 0, sizeof(*out));
    int rc = check_name(name);
    if (rc)
        return rc;
    struct tierd_ns *ns = NULL;
    char *rel = NULL, *prefix = NULL, *buf = NULL;
    rc = tree_of(ds, path, &ns, &rel, &prefix);
    if (rc)
        return rc;
    char *key = manifest_key(ns, rel, name);
    size_t len = 0;
    rc = key ? read_object(ns->be, key, max_text, &buf, &len) : -ENOMEM;
    if (rc == 0 && len > max_text)
        rc = -E2BIG; /* grown since its size was asked */
    if (rc == -ENOENT)
        tier_err_set("%s has no version %s", path, name);
    else if (rc == -E2BIG)
        tier_err_set("version %s of %s: its manifest (%s) is over the %zu KiB of text this reader "
                     "may decode",
                     name, path, key, max_text >> 10);
    if (rc == 0) {
        char err[256];
        rc = manifest_decode(buf, len, out, err, sizeof(err));
        if (rc == -EINVAL) {
            tier_err_set("version %s of %s is refused: its manifest (%s in backend %s) is "
                         "malformed: %s",
                         name, path, key, ns->be->name, err);
            rc = -EBADMSG;
        } else if (rc == 0 && (strcmp(out->name, name) != 0 || strcmp(out->prefix, prefix) != 0 ||
                               strcmp(out->backend, ns->be->name) != 0)) {
            tier_err_set("version %s of %s is refused: its manifest (%s) names version %s of "
                         "prefix %s in backend %s",
                         name, path, key, out->name, out->prefix, out->backend);
            manifest_fini(out);
            rc = -EBADMSG;
        }
    }
    free(buf);
    free(key);
    free(rel);
    free(prefix);
    return rc;
}

void dataset_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* A growing list of names (dataset_list, dataset_view_list). */
struct names {
    char **v;
    size_t n, cap;
};

static int names_add(struct names *l, const char *name, size_t len)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        char **nv = realloc(l->v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = nc;
    }
    if (!(l->v[l->n] = strndup(name, len)))
        return -ENOMEM;
    l->n++;
    return 0;
}

/* Call fn(ud, e) for every entry (objects and common prefixes) of the listing of prefix with
 * delimiter '/', every page; stops at fn's first non-zero return, which it returns. */
static int walk_level(struct tierd_ns *ns, const char *prefix,
                      int (*fn)(void *ud, const struct backend_entry *e), void *ud)
{
    char *token = NULL;
    int rc = 0;
    for (;;) {
        struct backend_list_page page;
        memset(&page, 0, sizeof(page));
        rc = backend_list(ns->be, &ds_io, prefix, "/", token, 0, &page);
        free(token);
        token = NULL;
        if (rc)
            break;
        for (size_t i = 0; i < page.n && rc == 0; i++)
            rc = fn(ud, &page.entries[i]);
        if (rc == 0 && page.next_token && !(token = strdup(page.next_token)))
            rc = -ENOMEM;
        backend_list_page_fini(&page);
        if (!token)
            break;
    }
    free(token);
    return rc;
}

struct list_ctx {
    const char *vp; /* the versions' common prefix (".../@") */
    size_t vl;
    struct names *out;
};

static int list_one(void *ud, const struct backend_entry *e)
{
    struct list_ctx *x = ud;
    if (e->is_prefix || strncmp(e->name, x->vp, x->vl) != 0 ||
        !manifest_name_valid(e->name + x->vl))
        return 0;
    return names_add(x->out, e->name + x->vl, strlen(e->name + x->vl));
}

int dataset_list(struct datasets *ds, const char *path, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    struct tierd_ns *ns = NULL;
    char *rel = NULL, *prefix = NULL;
    int rc = tree_of(ds, path, &ns, &rel, &prefix);
    if (rc)
        return rc;
    char *vp = manifest_key(ns, rel, NULL);
    struct names list = {0};
    struct list_ctx x = {.vp = vp, .vl = vp ? strlen(vp) : 0, .out = &list};
    rc = vp ? walk_level(ns, vp, list_one, &x) : -ENOMEM;
    free(vp);
    free(rel);
    free(prefix);
    if (rc) {
        dataset_names_free(list.v, list.n);
        return rc;
    }
    *names = list.v;
    *n = list.n;
    return 0;
}

int dataset_delete(struct datasets *ds, const char *path, const char *name)
{
    int rc = check_name(name);
    if (rc)
        return rc;
    struct tierd_ns *ns = NULL;
    char *rel = NULL, *prefix = NULL;
    rc = tree_of(ds, path, &ns, &rel, &prefix);
    if (rc)
        return rc;
    char *key = manifest_key(ns, rel, name);
    rc = key ? backend_del(ns->be, &ds_io, key) : -ENOMEM;
    if (rc == -ENOENT)
        tier_err_set("%s has no version %s", path, name);
    if (rc == 0)
        atomic_fetch_add(&ds->gen, 1);
    free(key);
    free(rel);
    free(prefix);
    return rc;
}

/* (dataset.h) A path under DATASET_VIEW: 1 for the view's directories above a version, 0 with the
 * version (tree, name) and rest ("" for its root, else "/key...") for a path in one, -ENOENT else.
 */
/* Can name (len bytes) be a directory entry of the view: one path segment the mount can look
 * up (readdirplus copies it into a segment-sized buffer), not "." or "..", no control bytes? */
static bool entry_ok(const char *name, size_t len)
{
    if (len == 0 || len > BACKEND_SEGMENT_MAX || (len == 1 && name[0] == '.') ||
        (len == 2 && name[0] == '.' && name[1] == '.'))
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f || name[i] == '/')
            return false;
    return true;
}

/* Would a lookup take directory name seg for a version's root (dataset_view_path: an '@' and a
 * valid version name after it)? Then it cannot be listed as a directory: it is not one there. */
static bool reads_as_version(const char *seg)
{
    const char *at = strrchr(seg, '@');
    return at && at > seg && manifest_name_valid(at + 1);
}

/* name@version for each version of the tree at mount path tree, as names in its parent; a tree
 * tierd cannot take (not in a namespace, an invalid or reserved path) has none. */
static int add_versions(struct datasets *ds, const char *tree, const char *name, struct names *l)
{
    char **vs = NULL;
    size_t nv = 0;
    int rc = dataset_list(ds, tree, &vs, &nv);
    for (size_t i = 0; rc == 0 && i < nv; i++) {
        char buf[PATH_MAX];
        int w = snprintf(buf, sizeof(buf), "%s@%s", name, vs[i]);
        if (w > 0 && (size_t)w < sizeof(buf) && entry_ok(buf, (size_t)w))
            rc = names_add(l, buf, (size_t)w);
    }
    dataset_names_free(vs, nv);
    return rc == -ENOENT || rc == -EINVAL ? 0 : rc;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

/* One segment of the versions' keys back to its name (manifest_key's %XX); -EINVAL if bad. */
static int seg_decode(const char *s, size_t len, char *out, size_t outsz)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 2 < len ? hexval(s[i + 1]) : -1, lo = hi >= 0 ? hexval(s[i + 2]) : -1;
            if (lo < 0)
                return -EINVAL;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (o + 1 >= outsz || c == '\0' || c == '/')
            return -EINVAL;
        out[o++] = c;
    }
    out[o] = '\0';
    return o ? 0 : -EINVAL;
}

struct subtree_ctx {
    struct datasets *ds;
    const char *tree, *vp; /* the tree's mount path; its children's common prefix (".../rel/") */
    size_t vl;
    bool at_root;
    struct names *out;
};

static int subtree_one(void *ud, const struct backend_entry *e)
{
    struct subtree_ctx *x = ud;
    const char *nm = e->name;
    size_t nl = strlen(nm), vl = x->vl;
    if (!e->is_prefix || strncmp(nm, x->vp, vl) != 0 || nl < vl + 2 || nm[nl - 1] != '/')
        return 0;
    char seg[NAME_MAX + 1], child[PATH_MAX];
    /* not one of tierd's keys (written by another client of the bucket): skipped */
    if (seg_decode(nm + vl, nl - vl - 1, seg, sizeof(seg)) != 0 || !entry_ok(seg, strlen(seg)) ||
        (x->at_root && dataset_reserved_name(seg)))
        return 0;
    int w = snprintf(child, sizeof(child), "%s/%s", x->tree, seg);
    if (w < 0 || (size_t)w >= sizeof(child))
        return 0;
    int rc = reads_as_version(seg) ? 0 : names_add(x->out, seg, strlen(seg));
    return rc ? rc : add_versions(x->ds, child, seg, x->out);
}

/* The child trees of tree (mount path, inside ns) that have versions or subtrees with versions:
 * a directory each; and their versions, as name@version. */
static int add_subtrees(struct datasets *ds, const char *tree, struct names *l)
{
    struct tierd_ns *ns = NULL;
    char *rel = NULL, *prefix = NULL;
    int rc = tree_of(ds, tree, &ns, &rel, &prefix);
    if (rc)
        return rc == -ENOENT ? 0 : rc;
    char *vp = manifest_key(ns, rel, NULL); /* ".../rel/@": the children are under ".../rel/" */
    struct subtree_ctx x = {.ds = ds, .tree = tree, .at_root = !*rel, .out = l};
    free(rel);
    free(prefix);
    if (!vp)
        return -ENOMEM;
    x.vl = strlen(vp) - 1;
    vp[x.vl] = '\0';
    x.vp = vp;
    rc = walk_level(ns, vp, subtree_one, &x);
    free(vp);
    return rc;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int dataset_view_list(struct datasets *ds, const char *path, char ***names, size_t *n,
                      bool *partial)
{
    *names = NULL;
    *n = 0;
    if (partial)
        *partial = false;
    size_t l = sizeof(DATASET_VIEW) - 1;
    if (strncmp(path, DATASET_VIEW, l) != 0 || (path[l] != '\0' && path[l] != '/'))
        return -EINVAL;
    char tree[PATH_MAX];
    size_t tl = strlen(path + l);
    while (tl > 0 && path[l + tl - 1] == '/')
        tl--;
    if (tl >= sizeof(tree))
        return -EINVAL;
    memcpy(tree, path + l, tl);
    tree[tl] = '\0'; /* "" for the view's root, else "/ds/sub" */
    struct names list = {0};
    int rc = 0;
    /* the namespaces under it: their next segment; a namespace just under it, its versions (a
     * namespace whose backend cannot list them now is logged and shown without them: the
     * others stay listed) */
    for (size_t i = 0; rc == 0 && i < ds->c.nns; i++) {
        const char *np = ds->c.ns[i].conf->path;
        if (strncmp(np, tree, tl) != 0 || np[tl] != '/' || !np[tl + 1])
            continue;
        const char *seg = np + tl + 1, *sl = strchr(seg, '/');
        size_t sgl = sl ? (size_t)(sl - seg) : strlen(seg);
        char nm[NAME_MAX + 1];
        if (!entry_ok(seg, sgl) || sgl >= sizeof(nm))
            continue;
        snprintf(nm, sizeof(nm), "%.*s", (int)sgl, seg);
        if (!reads_as_version(nm))
            rc = names_add(&list, nm, sgl);
        if (rc == 0 && !sl) {
            rc = add_versions(ds, np, nm, &list);
            if (rc && rc != -ENOMEM) {
                log_warn("dataset: cannot list the versions of %s for the view: %s", np,
                         *tier_err_msg() ? tier_err_msg() : strerror(-rc));
                rc = 0;
                if (partial)
                    *partial = true;
            }
        }
    }
    /* inside a namespace: the trees under it with versions */
    if (rc == 0 && tl > 0)
        rc = add_subtrees(ds, tree, &list);
    if (rc) {
        dataset_names_free(list.v, list.n);
        return rc;
    }
    if (list.n > 1) {
        qsort(list.v, list.n, sizeof(*list.v), name_cmp);
        size_t w = 1;
        for (size_t i = 1; i < list.n; i++) {
            if (strcmp(list.v[w - 1], list.v[i]) == 0)
                free(list.v[i]);
            else
                list.v[w++] = list.v[i];
        }
        list.n = w;
    }
    *names = list.v;
    *n = list.n;
    return 0;
}

uint64_t dataset_generation(struct datasets *ds)
{
    return atomic_load(&ds->gen);
}

int dataset_view_path(const char *path, char **tree, char *name, const char **rest)
{
    size_t l = sizeof(DATASET_VIEW) - 1;
    if (strncmp(path, DATASET_VIEW, l) != 0 || (path[l] != '\0' && path[l] != '/'))
        return -ENOENT;
    const char *s = path + l;
    while (*s == '/') {
        const char *b = s + 1, *e = strchr(b, '/');
        if (!e)
            e = b + strlen(b);
        const char *at = NULL;
        for (const char *q = b; q < e; q++)
            if (*q == '@')
                at = q;
        if (at && at > b && (size_t)(e - at - 1) < MANIFEST_NAME_MAX) {
            memcpy(name, at + 1, (size_t)(e - at - 1));
            name[e - at - 1] = '\0';
            if (manifest_name_valid(name)) {
                size_t tl = (size_t)(at - (path + l));
                *tree = strndup(path + l, tl);
                *rest = e;
                return *tree ? 0 : -ENOMEM;
            }
        }
        s = e;
    }
    return 1;
}
