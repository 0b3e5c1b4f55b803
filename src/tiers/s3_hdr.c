/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_hdr.c - the S3 backend's response header parser (s3_int.h): the pure half of s3.c's
 * CURLOPT_HEADERFUNCTION, split out so that it is unit-tested and fuzzed (fuzz_s3_headers) on
 * raw header lines. Headers come from the server, so nothing about them is trusted: lines are
 * length-delimited (never NUL-terminated), values are bounded, numbers parsed strictly.
 * Stateless; writes only the caller's struct.
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "common/strutil.h"
#include "tiers/s3_int.h"

/* Longest header value kept; no header we use is this long (an ETag is at most 95 bytes). */
#define S3_HDR_VALUE_MAX 256

void s3_resp_headers_reset(struct s3_resp_headers *h)
{
    memset(h, 0, sizeof(*h));
}

static bool name_is(const char *p, size_t nlen, const char *name)
{
    return nlen == strlen(name) && strncasecmp(p, name, nlen) == 0;
}

void s3_resp_header_line(struct s3_resp_headers *h, const char *p, size_t len)
{
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        /* A new response (after a 100 Continue, or a redirect): forget the previous headers. */
        s3_resp_headers_reset(h);
        return;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return;
    size_t nlen = (size_t)(colon - p);
    const char *v = colon + 1;
    const char *end = p + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    char val[S3_HDR_VALUE_MAX];
    size_t vlen = (size_t)(end - v);
    if (vlen >= sizeof(val))
        return;
    memcpy(val, v, vlen);
    val[vlen] = '\0';
    if (memchr(val, '\0', vlen))
        return; /* a NUL inside a value: not a header we can use */
    if (name_is(p, nlen, "ETag")) {
        tier_strlcpy(h->etag, val, sizeof(h->etag));
    } else if (name_is(p, nlen, "Last-Modified")) {
        time_t t = curl_getdate(val, NULL);
        /* ns since the epoch overflow int64_t after 2262: keep 0 ("unknown") then */
        h->mtime_ns =
            t >= 0 && (int64_t)t <= INT64_MAX / 1000000000LL ? (int64_t)t * 1000000000LL : 0;
    } else if (name_is(p, nlen, "Content-Length")) {
        h->have_length = tier_parse_u64(val, &h->content_length) == 0;
    } else if (name_is(p, nlen, "Content-Range")) {
        const char *slash = strrchr(val, '/');
        h->have_total = slash && tier_parse_u64(slash + 1, &h->total_size) == 0;
    }
}
