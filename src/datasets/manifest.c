/* SPDX-License-Identifier: Apache-2.0 */
/*
 * manifest.c - encoding and strict decoding of dataset-version manifests (manifest.h), with
 * jansson. The decoder is written for hostile input: it bounds the text, takes only the fields
 * of the format with their types, checks each key as the backends check keys
 * (backend_key_valid), requires strictly ascending keys (so no duplicates) and totals that
 * match, and fails the whole manifest at the first fault, naming it.
 */
#include "datasets/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "tiers/backend.h"

/* Valid UTF-8 without control characters (what a key, path or name in a manifest may hold). */
static bool text_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    while (n > 0) {
        if (*p < 0x20 || *p == 0x7f)
            return false;
        size_t l = tier_utf8_seq(p, n);
        if (l == 0)
            return false;
        p += l;
        n -= l;
    }
    return true;
}

/* An ETag: printable ASCII, no blank (it goes into If-Match headers as it is). */
static bool etag_ok(const char *s)
{
    if (!*s || strlen(s) >= BACKEND_ETAG_MAX)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e)
            return false;
    return true;
}

int manifest_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= MANIFEST_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return 0;
    }
    return 1;
}

int manifest_add(struct manifest *m, const char *key, uint64_t size, const char *etag)
{
    return manifest_add_version(m, key, size, etag, NULL);
}

int manifest_add_version(struct manifest *m, const char *key, uint64_t size, const char *etag,
                         const char *version_id)
{
    if (version_id && !backend_version_id_valid(version_id))
        return -EINVAL;
    if (!key || !*key || !etag || !text_ok(key) || !etag_ok(etag) || size > INT64_MAX ||
        m->bytes + size < m->bytes || m->bytes + size > INT64_MAX)
        return -EINVAL;
    if (m->n > 0 && strcmp(m->files[m->n - 1].key, key) >= 0)
        return -EINVAL;
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 256;
        struct manifest_file *nf = realloc(m->files, nc * sizeof(*nf));
        if (!nf)
            return -ENOMEM;
        m->files = nf;
        m->cap = nc;
    }
    struct manifest_file *f = &m->files[m->n];
    f->key = strdup(key);
    f->etag = strdup(etag);
    f->version_id = version_id ? strdup(version_id) : NULL;
    if (!f->key || !f->etag || (version_id && !f->version_id)) {
        free(f->key);
        free(f->etag);
        free(f->version_id);
        return -ENOMEM;
    }
    f->size = size;
    m->n++;
    m->bytes += size;
    return 0;
}

size_t manifest_lower_bound(const struct manifest *m, const char *key)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(m->files[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int manifest_find(const struct manifest *m, const char *key, size_t *idx)
{
    if (!*key)
        return 1;
    size_t kl = strlen(key);
    size_t i = manifest_lower_bound(m, key);
    if (i < m->n && strcmp(m->files[i].key, key) == 0) {
        *idx = i;
        return 0;
    }
    /* a directory: the first key >= "key/" starts with it ("key.csv", "key-2" sort between) */
    char *dk = malloc(kl + 2);
    if (!dk)
        return -ENOMEM;
    memcpy(dk, key, kl);
    dk[kl] = '/';
    dk[kl + 1] = '\0';
    i = manifest_lower_bound(m, dk);
    bool dir = i < m->n && strncmp(m->files[i].key, dk, kl + 1) == 0;
    free(dk);
    return dir ? 1 : -ENOENT;
}

void manifest_fini(struct manifest *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->files[i].key);
        free(m->files[i].etag);
        free(m->files[i].version_id);
    }
    free(m->files);
    free(m->name);
    free(m->path);
    free(m->ns);
    free(m->backend);
    free(m->prefix);
    free(m->commit_id);
    memset(m, 0, sizeof(*m));
}

int manifest_encode(const struct manifest *m, char **out, size_t *len)
{
    json_t *files = json_array();
    if (!files)
        return -ENOMEM;
    for (size_t i = 0; i < m->n; i++) {
        json_t *f = json_pack("{s:s, s:I, s:s}", "key", m->files[i].key, "size",
                              (json_int_t)m->files[i].size, "etag", m->files[i].etag);
        if (f && m->files[i].version_id &&
            json_object_set_new(f, "version_id", json_string(m->files[i].version_id)) != 0) {
            json_decref(f);
            f = NULL;
        }
        if (!f || json_array_append_new(files, f) != 0) {
            json_decref(files);
            return -ENOMEM;
        }
    }
    bool v2 = false;
    for (size_t i = 0; i < m->n && !v2; i++)
        v2 = m->files[i].version_id != NULL;
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:o}", "format",
                  v2 ? MANIFEST_FORMAT_V2 : MANIFEST_FORMAT, "name", m->name ? m->name : "", "path",
                  m->path ? m->path : "", "namespace", m->ns ? m->ns : "", "backend",
                  m->backend ? m->backend : "", "prefix", m->prefix ? m->prefix : "", "commit_id",
                  m->commit_id ? m->commit_id : "", "created_at", (json_int_t)m->created_at,
                  "count", (json_int_t)m->n, "bytes", (json_int_t)m->bytes, "files", files);
    if (!o)
        return -ENOMEM;
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return -ENOMEM;
    *out = text;
    *len = strlen(text);
    return 0;
}

static int bad(char *err, size_t esz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t esz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && esz)
        vsnprintf(err, esz, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* A string field, copied; NULL when missing or not a string. */
static char *str_field(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? strdup(v) : NULL;
}

static bool hex32(const char *s)
{
    if (!s || strlen(s) != 32)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return false;
    return true;
}

int manifest_decode(const char *text, size_t len, struct manifest *m, char *err, size_t esz)
{
    memset(m, 0, sizeof(*m));
    if (len > MANIFEST_MAX_BYTES)
        return bad(err, esz, "manifest of %zu bytes: larger than %u bytes", len,
                   MANIFEST_MAX_BYTES);
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return bad(err, esz, "not JSON (truncated or damaged?): %s at byte %d", je.text,
                   je.position);
    int rc = -EINVAL;
    if (!json_is_object(o)) {
        rc = bad(err, esz, "not a JSON object");
        goto out;
    }
    static const char *const known[] = {"format",  "name",   "path",      "namespace",
                                        "backend", "prefix", "commit_id", "created_at",
                                        "count",   "bytes",  "files"};
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        bool ok = false;
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            ok = ok || strcmp(k, known[i]) == 0;
        if (!ok) {
            rc = bad(err, esz, "unknown field '%.60s'", k);
            goto out;
        }
    }
    const char *fmt = json_string_value(json_object_get(o, "format"));
    bool v2 = fmt && strcmp(fmt, MANIFEST_FORMAT_V2) == 0;
    if (!fmt || (!v2 && strcmp(fmt, MANIFEST_FORMAT) != 0)) {
        rc = bad(err, esz, "format '%.40s' is not %s or %s (a newer tierd's, or not a manifest)",
                 fmt ? fmt : "(none)", MANIFEST_FORMAT, MANIFEST_FORMAT_V2);
        goto out;
    }
    m->name = str_field(o, "name");
    m->path = str_field(o, "path");
    m->ns = str_field(o, "namespace");
    m->backend = str_field(o, "backend");
    m->prefix = str_field(o, "prefix");
    m->commit_id = str_field(o, "commit_id");
    if (!m->name || !m->path || !m->ns || !m->backend || !m->prefix || !m->commit_id) {
        rc = bad(err, esz,
                 "a string field (name, path, namespace, backend, prefix, commit_id) "
                 "is missing or not a string");
        goto out;
    }
    if (!manifest_name_valid(m->name) || m->path[0] != '/' || !hex32(m->commit_id) ||
        !text_ok(m->path) || !text_ok(m->ns) || !text_ok(m->backend) || !text_ok(m->prefix)) {
        rc = bad(err, esz, "name, path, namespace, backend, prefix or commit_id is malformed");
        goto out;
    }
    json_t *ca = json_object_get(o, "created_at"), *cn = json_object_get(o, "count"),
           *by = json_object_get(o, "bytes"), *files = json_object_get(o, "files");
    if (!json_is_integer(ca) || !json_is_integer(cn) || !json_is_integer(by) ||
        !json_is_array(files) || json_integer_value(cn) < 0 || json_integer_value(by) < 0) {
        rc = bad(err, esz, "created_at, count, bytes or files is missing or of the wrong type");
        goto out;
    }
    m->created_at = (int64_t)json_integer_value(ca);
    if (m->created_at < 0 || m->created_at > ((int64_t)1 << 33)) { /* after the year 2242 */
        rc = bad(err, esz, "created_at %lld is out of range", (long long)m->created_at);
        goto out;
    }
    size_t n = json_array_size(files);
    if ((uint64_t)json_integer_value(cn) != n) {
        rc = bad(err, esz, "count says %lld files, the list has %zu (truncated?)",
                 (long long)json_integer_value(cn), n);
        goto out;
    }
    size_t pl = strlen(m->prefix);
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(files, i);
        const char *key = json_string_value(json_object_get(f, "key"));
        const char *etag = json_string_value(json_object_get(f, "etag"));
        json_t *vj = json_object_get(f, "version_id");
        const char *vid = json_string_value(vj);
        json_t *sz = json_object_get(f, "size");
        if (!json_is_object(f) || json_object_size(f) != (vj ? 4u : 3u) || !key || !etag ||
            (vj && (!v2 || !vid || !backend_version_id_valid(vid))) || !json_is_integer(sz) ||
            json_integer_value(sz) < 0 || !etag_ok(etag)) {
            rc = bad(err, esz,
                     "files[%zu] is not {\"key\", \"size\", \"etag\", \"version_id\" (where "
                     "versioned)}",
                     i);
            goto out;
        }
        /* the whole key as the backend would take it */
        size_t kl = strlen(key);
        char *full = malloc(pl + kl + 1);
        if (!full) {
            rc = -ENOMEM;
            goto out;
        }
        memcpy(full, m->prefix, pl);
        memcpy(full + pl, key, kl + 1);
        int kv = backend_key_valid(full, pl + kl, false);
        free(full);
        if (kl == 0 || kv != 0) {
            rc = bad(err, esz, "files[%zu]: key '%.200s' is not a valid key", i, key);
            goto out;
        }
        if (m->n > 0 && strcmp(m->files[m->n - 1].key, key) >= 0) {
            rc = bad(err, esz, "files[%zu]: key '%.200s' is not after the one before it", i, key);
            goto out;
        }
        int arc = manifest_add_version(m, key, (uint64_t)json_integer_value(sz), etag, vid);
        if (arc) {
            rc = arc == -ENOMEM ? -ENOMEM
                                : bad(err, esz,
                                      "files[%zu]: a control character, bad UTF-8, or "
                                      "the sizes add up past 2^63",
                                      i);
            goto out;
        }
    }
    if ((uint64_t)json_integer_value(by) != m->bytes) {
        rc = bad(err, esz, "bytes says %lld, the files add up to %llu",
                 (long long)json_integer_value(by), (unsigned long long)m->bytes);
        goto out;
    }
    rc = 0;
out:
    json_decref(o);
    if (rc)
        manifest_fini(m);
    return rc;
}
