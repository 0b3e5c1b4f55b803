/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_xml.c - the S3 backend's XML: ListObjectsV2 listings, error documents, single-value results
 * (UploadId, ETag) parsed with expat, and escaping for the bodies we send. Called by s3.c on
 * response bodies it has already bounded to S3_XML_MAX_BYTES. Stateless; thread-safe.
 *
 * DESIGN: one small walker (xml_walk) feeds expat events to per-document callbacks with the
 * element path so far and the text of the element just closed; each document type is then a
 * dozen lines. Expat unescapes entities (`a&amp;b` -> `a&b`); a DOCTYPE is refused outright so no
 * entity can be declared (no billion-laughs, no external entities). Any parse error, an
 * unexpected root element or an over-long text is -EPROTO; nothing here trusts the server.
 */
#include "tiers/s3_int.h"

#include <errno.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/strutil.h"
#include "common/vec.h"

#define WALK_DEPTH 4
#define WALK_NAME 40

struct xml_walk {
    XML_Parser p;
    int depth;                             /* current element depth; root = 1 */
    char names[WALK_DEPTH + 1][WALK_NAME]; /* names[d] = element at depth d (truncated) */
    struct dynbuf text;                    /* text of the innermost open element */
    int err;
    void (*on_start)(struct xml_walk *w, const char *name);
    void (*on_end)(struct xml_walk *w, const char *name, const char *text);
    void *ud;
};

static void walk_fail(struct xml_walk *w, int err)
{
    if (!w->err)
        w->err = err;
    XML_StopParser(w->p, XML_FALSE);
}

static void XMLCALL walk_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    (void)attrs;
    struct xml_walk *w = ud;
    if (w->err)
        return;
    w->depth++;
    if (w->depth <= WALK_DEPTH)
        tier_strlcpy(w->names[w->depth], name, WALK_NAME);
    dynbuf_reset(&w->text);
    if (w->on_start)
        w->on_start(w, name);
}

static void XMLCALL walk_end(void *ud, const XML_Char *name)
{
    struct xml_walk *w = ud;
    if (w->err)
        return;
    if (w->on_end)
        w->on_end(w, name, w->text.data ? w->text.data : "");
    dynbuf_reset(&w->text);
    w->depth--;
}

static void XMLCALL walk_text(void *ud, const XML_Char *s, int len)
{
    struct xml_walk *w = ud;
    if (w->err || w->depth < 2 || len <= 0)
        return;
    if (dynbuf_append(&w->text, s, (size_t)len) != 0)
        walk_fail(w, -EPROTO);
}

static void XMLCALL walk_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                                 const XML_Char *pubid, int has_internal_subset)
{
    (void)name;
    (void)sysid;
    (void)pubid;
    (void)has_internal_subset;
    walk_fail(ud, -EPROTO);
}

static int walk_run(struct xml_walk *w, const char *xml, size_t len)
{
    if (len > S3_XML_MAX_BYTES)
        return -EPROTO;
    /* S3 may send whitespace to keep a slow CompleteMultipartUpload alive; expat wants the XML
     * declaration first. */
    while (len > 0 && (*xml == ' ' || *xml == '\n' || *xml == '\r' || *xml == '\t')) {
        xml++;
        len--;
    }
    w->p = XML_ParserCreate("UTF-8");
    if (!w->p)
        return -ENOMEM;
    dynbuf_init(&w->text, S3_XML_TEXT_MAX);
    XML_SetUserData(w->p, w);
    XML_SetElementHandler(w->p, walk_start, walk_end);
    XML_SetCharacterDataHandler(w->p, walk_text);
    XML_SetStartDoctypeDeclHandler(w->p, walk_doctype);
    enum XML_Status st = XML_Parse(w->p, xml ? xml : "", (int)len, XML_TRUE);
    int rc = w->err;
    if (!rc && st != XML_STATUS_OK)
        rc = -EPROTO;
    if (!rc && w->names[1][0] == '\0')
        rc = -EPROTO; /* no root element */
    XML_ParserFree(w->p);
    dynbuf_fini(&w->text);
    return rc;
}

/* ---- ListObjectsV2 -------------------------------------------------------------------------- */

struct list_ctx {
    struct backend_entry *v;
    size_t n, cap;
    struct backend_entry cur; /* entry being parsed (Contents or CommonPrefixes) */
    bool in_entry;
    bool truncated;
    bool url_encoded;
    char *token;
};

static void list_start(struct xml_walk *w, const char *name)
{
    struct list_ctx *lc = w->ud;
    if (w->depth == 1 && strcmp(name, "ListBucketResult") != 0) {
        walk_fail(w, -EPROTO);
        return;
    }
    if (w->depth == 2 && (strcmp(name, "Contents") == 0 || strcmp(name, "CommonPrefixes") == 0)) {
        free(lc->cur.name);
        memset(&lc->cur, 0, sizeof(lc->cur));
        lc->cur.is_prefix = strcmp(name, "CommonPrefixes") == 0;
        lc->in_entry = true;
    }
}

static int set_str(char **dst, const char *text)
{
    char *s = strdup(text);
    if (!s)
        return -ENOMEM;
    free(*dst);
    *dst = s;
    return 0;
}

/* Append the entry being parsed (lc->cur) to the page's entries, which take it; cur is
 * cleared. 0 or -ENOMEM (cur untouched). */
static int list_push(struct list_ctx *lc)
{
    struct backend_entry *v = tier_vec_grow(lc->v, &lc->cap, lc->n + 1, sizeof(*v), 64);
    if (!v)
        return -ENOMEM;
    lc->v = v;
    lc->v[lc->n++] = lc->cur;
    memset(&lc->cur, 0, sizeof(lc->cur));
    return 0;
}

static void list_end(struct xml_walk *w, const char *name, const char *text)
{
    struct list_ctx *lc = w->ud;
    int rc = 0;
    if (w->depth == 3 && lc->in_entry) {
        struct backend_entry *e = &lc->cur;
        if (!e->is_prefix && strcmp(name, "Key") == 0) {
            rc = set_str(&e->name, text);
        } else if (e->is_prefix && strcmp(name, "Prefix") == 0) {
            rc = set_str(&e->name, text);
        } else if (!e->is_prefix && strcmp(name, "Size") == 0) {
            rc = tier_parse_u64(text, &e->size_bytes) ? -EPROTO : 0;
        } else if (!e->is_prefix && strcmp(name, "LastModified") == 0) {
            rc = s3_time_parse_iso8601(text, &e->mtime_ns) ? -EPROTO : 0;
        } else if (!e->is_prefix && strcmp(name, "ETag") == 0) {
            if (tier_strlcpy(e->etag, text, sizeof(e->etag)) >= sizeof(e->etag))
                rc = -EPROTO;
        }
    } else if (w->depth == 2) {
        if (strcmp(name, "Contents") == 0 || strcmp(name, "CommonPrefixes") == 0) {
            if (!lc->cur.name) {
                rc = -EPROTO; /* an entry without a key */
            } else if (list_push(lc) != 0) {
                walk_fail(w, -ENOMEM);
                return;
            }
            lc->in_entry = false;
        } else if (strcmp(name, "IsTruncated") == 0) {
            lc->truncated = strcmp(text, "true") == 0;
        } else if (strcmp(name, "NextContinuationToken") == 0) {
            rc = set_str(&lc->token, text);
        } else if (strcmp(name, "EncodingType") == 0) {
            lc->url_encoded = strcmp(text, "url") == 0;
        }
    }
    if (rc)
        walk_fail(w, rc);
}

static int entry_cmp(const void *a, const void *b)
{
    const struct backend_entry *x = a, *y = b;
    return strcmp(x->name, y->name);
}

int s3_xml_parse_list(const char *xml, size_t len, const char *strip,
                      struct backend_list_page *page)
{
    struct list_ctx lc = {0};
    struct xml_walk w = {.on_start = list_start, .on_end = list_end, .ud = &lc};
    size_t strip_len = strip ? strlen(strip) : 0;
    memset(page, 0, sizeof(*page));
    int rc = walk_run(&w, xml, len);
    if (rc)
        goto fail;
    if (lc.truncated && (!lc.token || !*lc.token)) {
        rc = -EPROTO; /* cannot continue a truncated listing without a token */
        goto fail;
    }
    /* Decode (EncodingType=url) and check the backend prefix first, so a failure leaves every
     * entry owned exactly once; then strip the prefix and drop the prefix object itself. */
    for (size_t i = 0; i < lc.n; i++) {
        if (lc.url_encoded && s3_uri_decode(lc.v[i].name) != 0) {
            rc = -EPROTO;
            goto fail;
        }
        if (strncmp(lc.v[i].name, strip ? strip : "", strip_len) != 0) {
            rc = -EPROTO; /* the server answered with a key outside our prefix */
            goto fail;
        }
    }
    size_t out = 0;
    for (size_t i = 0; i < lc.n; i++) {
        struct backend_entry e = lc.v[i];
        if (e.name[strip_len] == '\0') {
            free(e.name);
            continue;
        }
        memmove(e.name, e.name + strip_len, strlen(e.name + strip_len) + 1);
        lc.v[out++] = e;
    }
    lc.n = out;
    /* S3 returns objects and common prefixes in two runs; the interface promises key order. */
    if (lc.n > 1)
        qsort(lc.v, lc.n, sizeof(*lc.v), entry_cmp);
    free(lc.cur.name);
    page->entries = lc.v;
    page->n = lc.n;
    page->next_token = lc.truncated ? lc.token : NULL;
    if (!lc.truncated)
        free(lc.token);
    return 0;
fail:
    for (size_t i = 0; i < lc.n; i++)
        free(lc.v[i].name);
    free(lc.v);
    free(lc.cur.name);
    free(lc.token);
    return rc;
}

/* ---- ListObjectVersions ---------------------------------------------------------------------- */

struct versions_ctx {
    struct list_ctx lc; /* the current versions kept, as a listing's entries */
    bool in_version;    /* inside a Version (or a DeleteMarker: in_marker) */
    bool in_marker;
    bool latest;      /* the element's IsLatest */
    bool latest_seen; /* ... was given */
    char *next_key, *next_vid;
};

static void versions_start(struct xml_walk *w, const char *name)
{
    struct versions_ctx *vc = w->ud;
    if (w->depth == 1 && strcmp(name, "ListVersionsResult") != 0) {
        walk_fail(w, -EPROTO);
        return;
    }
    if (w->depth == 2 && (strcmp(name, "Version") == 0 || strcmp(name, "DeleteMarker") == 0)) {
        free(vc->lc.cur.name);
        free(vc->lc.cur.version_id);
        memset(&vc->lc.cur, 0, sizeof(vc->lc.cur));
        vc->in_version = true;
        vc->in_marker = strcmp(name, "DeleteMarker") == 0;
        vc->latest = false;
        vc->latest_seen = false;
    }
}

static void versions_end(struct xml_walk *w, const char *name, const char *text)
{
    struct versions_ctx *vc = w->ud;
    struct backend_entry *e = &vc->lc.cur;
    int rc = 0;
    if (w->depth == 3 && vc->in_version) {
        if (strcmp(name, "Key") == 0)
            rc = set_str(&e->name, text);
        else if (strcmp(name, "VersionId") == 0)
            rc = !backend_version_id_valid(text) ? -EPROTO : set_str(&e->version_id, text);
        else if (strcmp(name, "IsLatest") == 0) {
            vc->latest = strcmp(text, "true") == 0;
            vc->latest_seen = true;
        } else if (strcmp(name, "Size") == 0)
            rc = tier_parse_u64(text, &e->size_bytes) ? -EPROTO : 0;
        else if (strcmp(name, "LastModified") == 0)
            rc = s3_time_parse_iso8601(text, &e->mtime_ns) ? -EPROTO : 0;
        else if (strcmp(name, "ETag") == 0 &&
                 tier_strlcpy(e->etag, text, sizeof(e->etag)) >= sizeof(e->etag))
            rc = -EPROTO;
    } else if (w->depth == 2 && vc->in_version &&
               (strcmp(name, "Version") == 0 || strcmp(name, "DeleteMarker") == 0)) {
        vc->in_version = false;
        if (!e->name || !e->version_id || !vc->latest_seen) {
            rc = -EPROTO; /* a version without a key, an id, or whether it is the current one */
        } else if (vc->in_marker || !vc->latest) {
            free(e->name);
            free(e->version_id);
            memset(e, 0, sizeof(*e)); /* an older version, or the object is deleted */
        } else if (list_push(&vc->lc) != 0) {
            walk_fail(w, -ENOMEM);
            return;
        }
    } else if (w->depth == 2) {
        if (strcmp(name, "IsTruncated") == 0)
            vc->lc.truncated = strcmp(text, "true") == 0;
        else if (strcmp(name, "NextKeyMarker") == 0)
            rc = set_str(&vc->next_key, text);
        else if (strcmp(name, "NextVersionIdMarker") == 0)
            rc = set_str(&vc->next_vid, text);
        else if (strcmp(name, "EncodingType") == 0)
            vc->lc.url_encoded = strcmp(text, "url") == 0;
    }
    if (rc)
        walk_fail(w, rc);
}

int s3_xml_parse_versions(const char *xml, size_t len, const char *strip,
                          struct backend_list_page *page)
{
    struct versions_ctx vc = {0};
    struct xml_walk w = {.on_start = versions_start, .on_end = versions_end, .ud = &vc};
    size_t strip_len = strip ? strlen(strip) : 0;
    memset(page, 0, sizeof(*page));
    int rc = walk_run(&w, xml, len);
    if (!rc && vc.lc.truncated && (!vc.next_key || !*vc.next_key))
        rc = -EPROTO; /* cannot continue without a marker */
    for (size_t i = 0; !rc && i < vc.lc.n; i++) {
        if (vc.lc.url_encoded && s3_uri_decode(vc.lc.v[i].name) != 0)
            rc = -EPROTO;
        else if (strncmp(vc.lc.v[i].name, strip ? strip : "", strip_len) != 0)
            rc = -EPROTO; /* a key outside our prefix */
    }
    /* the token: "NEXT_KEY\nNEXT_VERSION_ID" (s3.c splits it at the last newline) */
    char *token = NULL;
    if (!rc && vc.lc.truncated &&
        asprintf(&token, "%s\n%s", vc.next_key, vc.next_vid ? vc.next_vid : "") < 0)
        rc = -ENOMEM;
    if (rc) {
        for (size_t i = 0; i < vc.lc.n; i++) {
            free(vc.lc.v[i].name);
            free(vc.lc.v[i].version_id);
        }
        free(vc.lc.v);
        goto out;
    }
    size_t o = 0;
    for (size_t i = 0; i < vc.lc.n; i++) {
        struct backend_entry e = vc.lc.v[i];
        if (e.name[strip_len] == '\0') {
            free(e.name);
            free(e.version_id);
            continue;
        }
        memmove(e.name, e.name + strip_len, strlen(e.name + strip_len) + 1);
        vc.lc.v[o++] = e;
    }
    /* S3 lists by key; the interface promises key order whatever the server sent */
    if (o > 1)
        qsort(vc.lc.v, o, sizeof(*vc.lc.v), entry_cmp);
    page->entries = vc.lc.v;
    page->n = o;
    page->next_token = token;
out:
    free(vc.lc.cur.name);
    free(vc.lc.cur.version_id);
    free(vc.next_key);
    free(vc.next_vid);
    free(vc.lc.token);
    return rc;
}

/* ---- ListMultipartUploads -------------------------------------------------------------------- */

struct uploads_ctx {
    struct backend_mpu *v; /* every Upload of the page, in document order */
    char **keys;           /* keys[i]: v[i]'s key as sent (decoded after the walk) */
    size_t n, cap;
    char *key, *id; /* of the Upload being parsed */
    int64_t initiated_ns;
    bool truncated, url_encoded;
    char *next_key, *next_id;
};

static void uploads_start(struct xml_walk *w, const char *name)
{
    struct uploads_ctx *uc = w->ud;
    if (w->depth == 1 && strcmp(name, "ListMultipartUploadsResult") != 0)
        walk_fail(w, -EPROTO);
    else if (w->depth == 2 && strcmp(name, "Upload") == 0) {
        free(uc->key);
        free(uc->id);
        uc->key = uc->id = NULL;
        uc->initiated_ns = 0;
    }
}

static int uploads_add(struct uploads_ctx *uc)
{
    if (!uc->key || !uc->id || !*uc->id)
        return -EPROTO; /* an Upload without its key or id */
    if (uc->n == uc->cap) {
        size_t cap = uc->cap ? uc->cap * 2 : 8;
        struct backend_mpu *v = realloc(uc->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        uc->v = v;
        char **k = realloc(uc->keys, cap * sizeof(*k));
        if (!k)
            return -ENOMEM;
        uc->keys = k;
        uc->cap = cap;
    }
    uc->v[uc->n].upload_id = uc->id;
    uc->v[uc->n].initiated_ns = uc->initiated_ns;
    uc->keys[uc->n] = uc->key;
    uc->n++;
    uc->id = uc->key = NULL;
    return 0;
}

static void uploads_end(struct xml_walk *w, const char *name, const char *text)
{
    struct uploads_ctx *uc = w->ud;
    int rc = 0;
    if (w->depth == 3 && strcmp(w->names[2], "Upload") == 0) {
        if (strcmp(name, "Key") == 0)
            rc = set_str(&uc->key, text);
        else if (strcmp(name, "UploadId") == 0)
            rc = set_str(&uc->id, text);
        else if (strcmp(name, "Initiated") == 0)
            rc = s3_time_parse_iso8601(text, &uc->initiated_ns) ? -EPROTO : 0;
    } else if (w->depth == 2) {
        if (strcmp(name, "Upload") == 0)
            rc = uploads_add(uc);
        else if (strcmp(name, "IsTruncated") == 0)
            uc->truncated = strcmp(text, "true") == 0;
        else if (strcmp(name, "NextKeyMarker") == 0)
            rc = set_str(&uc->next_key, text);
        else if (strcmp(name, "NextUploadIdMarker") == 0)
            rc = set_str(&uc->next_id, text);
        else if (strcmp(name, "EncodingType") == 0)
            uc->url_encoded = strcmp(text, "url") == 0;
    }
    if (rc)
        walk_fail(w, rc);
}

int s3_xml_parse_uploads(const char *xml, size_t len, const char *strip, const char *key,
                         struct backend_mpu **out, size_t *n, char **next_key,
                         char **next_upload_id)
{
    *out = NULL;
    *n = 0;
    *next_key = *next_upload_id = NULL;
    struct uploads_ctx uc = {0};
    struct xml_walk w = {.on_start = uploads_start, .on_end = uploads_end, .ud = &uc};
    int rc = walk_run(&w, xml, len);
    /* a truncated page must say where the next one starts (both markers: the key alone would
     * skip the rest of that key's uploads) */
    if (!rc && uc.truncated && (!uc.next_key || !*uc.next_key || !uc.next_id || !*uc.next_id))
        rc = -EPROTO;
    /* EncodingType may come after the Uploads: decode once the whole page is read */
    if (!rc && uc.truncated && uc.url_encoded && s3_uri_decode(uc.next_key) != 0)
        rc = -EPROTO;
    size_t strip_len = strip ? strlen(strip) : 0, kept = 0;
    for (size_t i = 0; i < uc.n; i++) {
        bool keep = false;
        if (!rc && uc.url_encoded && s3_uri_decode(uc.keys[i]) != 0)
            rc = -EPROTO;
        if (!rc)
            keep = strncmp(uc.keys[i], strip ? strip : "", strip_len) == 0 &&
                   strcmp(uc.keys[i] + strip_len, key) == 0;
        free(uc.keys[i]);
        if (keep)
            uc.v[kept++] = uc.v[i];
        else
            free(uc.v[i].upload_id);
    }
    free(uc.keys);
    uc.n = kept;
    free(uc.key);
    free(uc.id);
    if (rc || !uc.truncated) {
        free(uc.next_key);
        free(uc.next_id);
        uc.next_key = uc.next_id = NULL;
    }
    if (rc) {
        backend_mpu_list_free(uc.v, uc.n);
        return rc;
    }
    if (!uc.n) {
        free(uc.v);
        uc.v = NULL;
    }
    *out = uc.v;
    *n = uc.n;
    *next_key = uc.next_key;
    *next_upload_id = uc.next_id;
    return 0;
}

/* ---- error documents and single values ------------------------------------------------------ */

struct find_ctx {
    const char *root;
    const char *child;
    char *out;
    size_t outsz;
    bool found;
    /* error mode */
    struct s3_error *err;
};

static void find_start(struct xml_walk *w, const char *name)
{
    struct find_ctx *fc = w->ud;
    if (w->depth == 1 && strcmp(name, fc->root) != 0)
        walk_fail(w, -EPROTO);
}

static void find_end(struct xml_walk *w, const char *name, const char *text)
{
    struct find_ctx *fc = w->ud;
    if (w->depth != 2)
        return;
    if (fc->err) {
        if (strcmp(name, "Code") == 0)
            tier_strlcpy(fc->err->code, text, sizeof(fc->err->code));
        else if (strcmp(name, "Message") == 0)
            tier_strlcpy(fc->err->message, text, sizeof(fc->err->message));
        return;
    }
    if (!fc->found && strcmp(name, fc->child) == 0) {
        fc->found = true;
        if (tier_strlcpy(fc->out, text, fc->outsz) >= fc->outsz)
            walk_fail(w, -ENAMETOOLONG);
    }
}

int s3_xml_parse_error(const char *xml, size_t len, struct s3_error *err)
{
    memset(err, 0, sizeof(*err));
    struct find_ctx fc = {.root = "Error", .err = err};
    struct xml_walk w = {.on_start = find_start, .on_end = find_end, .ud = &fc};
    return walk_run(&w, xml, len);
}

int s3_xml_find_text(const char *xml, size_t len, const char *root, const char *child, char *out,
                     size_t outsz)
{
    if (!outsz)
        return -ENAMETOOLONG;
    struct find_ctx fc = {.root = root, .child = child, .out = out, .outsz = outsz};
    struct xml_walk w = {.on_start = find_start, .on_end = find_end, .ud = &fc};
    out[0] = '\0';
    int rc = walk_run(&w, xml, len);
    if (rc)
        return rc;
    return fc.found ? 0 : -ENOENT;
}

int s3_xml_escape(struct dynbuf *out, const char *s)
{
    for (; *s; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&apos;";
            break;
        default:
            break;
        }
        int rc = rep ? dynbuf_append(out, rep, strlen(rep)) : dynbuf_append(out, s, 1);
        if (rc)
            return rc;
    }
    return 0;
}

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int s3_time_parse_iso8601(const char *s, int64_t *ns)
{
    /* YYYY-MM-DDTHH:MM:SS[.fff...]Z */
    int y, mo, d, h, mi, sec;
    if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
        s[16] != ':')
        return -EINVAL;
    if (digits(s, 4, &y) || digits(s + 5, 2, &mo) || digits(s + 8, 2, &d) ||
        digits(s + 11, 2, &h) || digits(s + 14, 2, &mi) || digits(s + 17, 2, &sec))
        return -EINVAL;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return -EINVAL;
    const char *p = s + 19;
    int64_t frac_ns = 0;
    if (*p == '.') {
        p++;
        int64_t scale = 100000000;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
            frac_ns += (*p - '0') * scale;
            scale /= 10;
        }
    }
    if (p[0] != 'Z' || p[1] != '\0')
        return -EINVAL;
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    /* int64 nanoseconds cover 1677..2262; anything else is not a plausible S3 timestamp. */
    if (t == (time_t)-1 || t < -(INT64_MAX / 1000000000LL) + 1 || t > INT64_MAX / 1000000000LL - 1)
        return -EINVAL;
    *ns = (int64_t)t * 1000000000LL + frac_ns;
    return 0;
}
