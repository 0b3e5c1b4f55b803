/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_util.c - what the control API's handlers share: UTF-8 checks, JSON strings, answers and
 * errors, the request body as JSON. Called on the HTTP server's connection threads; no state.
 *
 * Text: every string put into an answer goes through api_jstr(), which replaces bytes that are
 * not valid UTF-8 by U+FFFD (jansson refuses such strings, and a failed json_pack would lose the
 * whole answer). Paths and keys of write-back files that are not valid UTF-8 are also given
 * exactly, base64-encoded, in path_b64 / key_b64. Errors are {"error": "...", "errno": "ENOENT"}
 * with an HTTP status chosen from the errno in one place (api_http_status()); when even that
 * answer cannot be built (no memory), the fixed FALLBACK_BODY is sent.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "api/api_int.h"

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
json_t *api_jstr(const char *s)
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
json_t *api_jb64(const char *s)
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

unsigned api_http_status(int neg)
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
unsigned api_reply_json(struct api_reply *out, unsigned status, json_t *j)
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
    return api_reply_json(out, status, j);
}

unsigned api_reply_error(struct api_reply *out, int neg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    unsigned st = reply_verror(out, api_http_status(neg), neg, fmt, ap);
    va_end(ap);
    return st;
}

unsigned api_reply_error_status(struct api_reply *out, unsigned status, int neg, const char *fmt,
                                ...)
{
    va_list ap;
    va_start(ap, fmt);
    unsigned st = reply_verror(out, status, neg, fmt, ap);
    va_end(ap);
    return st;
}

void api_reply_too_large(struct api_reply *out)
{
    api_reply_error(out, -E2BIG,
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

/* The backend calls the API makes itself (resolving a path for pin, stage, evict): an
 * operator waits on them, so they go as inference, tenant default. */
const struct tier_ioctx api_io = {.tenant = TIER_TENANT_DEFAULT, .cls = TIER_IO_INFERENCE};

/* The first key of the JSON object j that is not one of fields[0..n), or NULL. */
const char *api_unknown_field(json_t *j, const char *const *fields, size_t n)
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

json_t *api_parse_body(const struct api_request *rq, struct api_reply *out, unsigned *ret)
{
    json_error_t jerr;
    json_t *j = rq->body ? json_loadb(rq->body, rq->body_len, 0, &jerr) : NULL;
    if (!j || !json_is_object(j)) {
        json_decref(j);
        *ret = api_reply_error(out, -EINVAL, "the body must be a JSON object (see docs/API.md)%s%s",
                               rq->body ? ": " : "", rq->body ? jerr.text : "");
        return NULL;
    }
    return j;
}

/* 404 for a tenant name the registry does not know. */
unsigned api_reply_no_tenant(struct api_reply *out, const char *name)
{
    return api_reply_error(out, -ENOENT,
                           "no tenant '%.80s' (GET /v1/tenants lists them; add one with a [tenant "
                           "NAME] section or POST /v1/tenants)",
                           name);
}

json_t *api_jstr_array(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, api_jstr(v[i]));
    return a;
}
