/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_err.c - the one place where S3 failures (curl result, HTTP status, S3 error code) become a
 * negative errno, plus the hints shown to the user and the SigV4 URI encoding. Called by s3.c
 * after every request. Stateless; thread-safe.
 */
#include "tiers/s3_int.h"

#include <errno.h>
#include <string.h>

#include "common/strutil.h"
#include "tiers/retry.h"

struct code_map {
    const char *code;
    int err;
    bool retryable;
    const char *hint;
};

/* S3 error codes we know; anything else falls back to the HTTP status. */
static const struct code_map k_codes[] = {
    {"NoSuchKey", -ENOENT, false, ""},
    {"NoSuchUpload", -ENOENT, false, "the multipart upload was completed or aborted already"},
    {"NoSuchBucket", -ENOENT, false, "the bucket does not exist; create it or fix the bucket name"},
    {"AccessDenied", -EACCES, false, "check the credentials and the bucket's permissions"},
    {"SignatureDoesNotMatch", -EACCES, false, "the signature did not match: check the secret key"},
    {"InvalidAccessKeyId", -EACCES, false, "check the access key"},
    {"PreconditionFailed", -ESTALE, false, "the object changed since it was first read"},
    {"InvalidRange", -ERANGE, false, ""},
    {"EntityTooSmall", -EINVAL, false, "every part but the last must be at least 5 MiB"},
    {"InvalidPart", -EINVAL, false, "a part is missing or its ETag does not match"},
    {"InvalidPartOrder", -EINVAL, false, "parts must be listed in ascending order"},
    {"InvalidArgument", -EINVAL, false, ""},
    {"EntityTooLarge", -EFBIG, false, "the object is larger than the store accepts"},
    {"KeyTooLongError", -ENAMETOOLONG, false, "the key is longer than the store accepts"},
    {"SlowDown", -EAGAIN, true, "the server asks to slow down; retry later"},
    {"ServiceUnavailable", -EAGAIN, true, "the server is overloaded; retry later"},
    {"InternalError", -EIO, true, ""},
};

static const struct code_map *find_code(const char *code)
{
    if (!code || !*code)
        return NULL;
    for (size_t i = 0; i < sizeof(k_codes) / sizeof(k_codes[0]); i++)
        if (strcmp(k_codes[i].code, code) == 0)
            return &k_codes[i];
    return NULL;
}

int s3_errno_map(CURLcode cc, long status, const char *code, bool *retryable)
{
    *retryable = false;
    switch (cc) {
    case CURLE_OK:
        break;
    case CURLE_OPERATION_TIMEDOUT:
        *retryable = true;
        return -ETIMEDOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        *retryable = true;
        return -EIO;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    default:
        return -EIO;
    }
    const struct code_map *m = find_code(code);
    if (m) {
        *retryable = m->retryable;
        return m->err;
    }
    if (status >= 200 && status <= 299)
        return code && *code ? -EIO : 0; /* an unknown error code inside a 200 */
    *retryable = retry_http_status_retryable(status);
    switch (status) {
    case 400:
        return -EINVAL;
    case 403:
        return -EACCES;
    case 404:
        return -ENOENT;
    case 412:
        return -ESTALE;
    case 416:
        return -ERANGE;
    case 429:
    case 503:
        return -EAGAIN;
    default:
        return -EIO;
    }
}

const char *s3_err_hint(const char *code, long status)
{
    const struct code_map *m = find_code(code);
    if (m)
        return m->hint;
    if (status == 403)
        return "check the access key, the secret key and the bucket's permissions";
    if (status >= 500)
        return "the server failed; it may be down or overloaded";
    return "";
}

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

int s3_uri_encode(struct dynbuf *out, const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int rc;
        if (unreserved(*p) || (keep_slash && *p == '/')) {
            rc = dynbuf_append(out, p, 1);
        } else {
            char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            rc = dynbuf_append(out, esc, 3);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int s3_uri_decode(char *s)
{
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (*r == '%') {
            int hi = tier_hex_digit(r[1]);
            int lo = hi < 0 ? -1 : tier_hex_digit(r[2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return -EPROTO;
            *w++ = (char)(hi << 4 | lo);
            r += 2;
        } else if (*r == '+') {
            *w++ = ' '; /* form encoding, as S3 uses for EncodingType=url */
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return 0;
}
