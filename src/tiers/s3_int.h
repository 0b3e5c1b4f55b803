/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_int.h - private interface of the S3 backend, shared by its files only (s3.c, s3_xml.c,
 * s3_hdr.c, s3_err.c) and by its unit tests and fuzz targets. Nothing here touches the network:
 * these are the pure parts (XML parsing, response headers, error mapping, URI encoding) split out
 * so they can be tested and fuzzed on recorded responses. All functions are stateless and
 * thread-safe (the header parser writes only the caller's struct).
 */
#ifndef TIER_TIERS_S3_INT_H
#define TIER_TIERS_S3_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "common/dynbuf.h"
#include "tiers/backend.h"

/* Largest XML document accepted from the server (a 1000-key listing is ~300 KiB). */
#define S3_XML_MAX_BYTES (8u << 20)
/* Largest text of one XML element we keep (a key is <= 1024 bytes; an error message a few
 * hundred). Longer text makes the document invalid (-EPROTO). */
#define S3_XML_TEXT_MAX 4096

struct s3_error {
    char code[64];     /* S3 error code, e.g. "NoSuchKey"; "" if none */
    char message[512]; /* human-readable message from the server; "" if none */
};

/* Parse a ListObjectsV2 response (ListBucketResult) into page. strip: the backend's key prefix,
 * removed from every Key and CommonPrefixes/Prefix (an entry without it is a protocol error).
 * Keys are XML-unescaped by expat and, if the document says EncodingType=url, percent-decoded.
 * Returns 0, -EPROTO (malformed, wrong root, truncated without a token), -ENOMEM. On failure page
 * is left empty. */
int s3_xml_parse_list(const char *xml, size_t len, const char *strip,
                      struct backend_list_page *page);

/* One page of a ListMultipartUploads response (ListMultipartUploadsResult): the uploads whose
 * Key equals strip + key (others are skipped: the request's prefix also matches longer keys).
 * Keys are percent-decoded when EncodingType=url. *next_key / *next_upload_id get the markers of
 * the next page (owned) when IsTruncated, else NULL. Returns 0, -EPROTO, -ENOMEM; on failure
 * nothing is returned. */
/* ListObjectVersions: the current version of each key (a delete marker: left out), with its
 * version id, strip removed from the keys; next_token "KEY\nVERSION_ID" when truncated. */
int s3_xml_parse_versions(const char *xml, size_t len, const char *strip,
                          struct backend_list_page *page);
int s3_xml_parse_uploads(const char *xml, size_t len, const char *strip, const char *key,
                         struct backend_mpu **out, size_t *n, char **next_key,
                         char **next_upload_id);

/* Parse an <Error><Code/><Message/></Error> document. Returns 0 if the root is Error, else
 * -EPROTO; err is zeroed first and filled with whatever was found. */
int s3_xml_parse_error(const char *xml, size_t len, struct s3_error *err);

/* Find the text of child element `child` directly under the root element `root` (e.g. UploadId
 * in InitiateMultipartUploadResult). Returns 0, -EPROTO (malformed or another root), -ENOENT (no
 * such child), -ENAMETOOLONG (text does not fit out). */
int s3_xml_find_text(const char *xml, size_t len, const char *root, const char *child, char *out,
                     size_t outsz);

/* Append s to out with the five XML special characters escaped. */
int s3_xml_escape(struct dynbuf *out, const char *s);

/* Parse an ISO 8601 UTC time as S3 writes it ("2026-11-29T23:29:01.123Z") to ns since the epoch.
 * Returns 0 or -EINVAL. */
int s3_time_parse_iso8601(const char *s, int64_t *ns);

/* Append s percent-encoded the way SigV4 canonicalises it: unreserved characters
 * (A-Z a-z 0-9 - _ . ~) are kept, '/' is kept when keep_slash (object paths) and encoded
 * otherwise (query values), everything else becomes %XX with upper-case hex. */
int s3_uri_encode(struct dynbuf *out, const char *s, bool keep_slash);
/* Decode %XX sequences in place (for EncodingType=url listings). Returns 0 or -EPROTO. */
int s3_uri_decode(char *s);

/* What the backend keeps of a response's headers. */
struct s3_resp_headers {
    char etag[BACKEND_ETAG_MAX]; /* ETag as sent (quotes kept), cut to fit; "" if none */
    int64_t mtime_ns;            /* Last-Modified, ns since the epoch; 0 if none or unparsable */
    uint64_t content_length;     /* Content-Length, valid when have_length */
    bool have_length;
    uint64_t total_size; /* the object size from Content-Range "bytes A-B/SIZE", when have_total */
    bool have_total;
};

void s3_resp_headers_reset(struct s3_resp_headers *h);
/* Take in one header line as curl hands it to CURLOPT_HEADERFUNCTION: len bytes, not
 * NUL-terminated, usually ending in CRLF. A status line ("HTTP/...": a new response, after a
 * 100 Continue) resets h; ETag, Last-Modified, Content-Length and Content-Range (names in any
 * case) update it; a value of 256 bytes or more, a malformed number and any other line are
 * ignored. Never reads outside line[0..len). */
void s3_resp_header_line(struct s3_resp_headers *h, const char *line, size_t len);

/* THE mapping from a failed request to a negative errno (STYLE.md: one place per module).
 * cc: the curl result; status: the HTTP status (0 if none); code: the S3 error code from the
 * body ("" or NULL if none). *retryable is set when the failure is transient (5xx, 503 SlowDown,
 * 429, connection errors, timeouts). Returns 0 only for cc == CURLE_OK, a 2xx status and no code.
 *
 *   curl timeout (CURLE_OPERATION_TIMEDOUT)            -ETIMEDOUT   retried
 *   connect/resolve/send/recv failure, empty reply      -EIO         retried
 *   NoSuchKey, NoSuchUpload, NoSuchBucket, 404         -ENOENT
 *   AccessDenied, SignatureDoesNotMatch,
 *     InvalidAccessKeyId, 403                           -EACCES
 *   PreconditionFailed, 412                            -ESTALE
 *   InvalidRange, 416                                  -ERANGE (a read at EOF returns 0 bytes)
 *   EntityTooSmall, InvalidPart, InvalidPartOrder,
 *     InvalidArgument, 400                             -EINVAL
 *   SlowDown, 503, 429                                 -EAGAIN      retried
 *   other 5xx (InternalError, ...)                     -EIO         retried
 *   any other status or code                           -EIO
 */
int s3_errno_map(CURLcode cc, long status, const char *code, bool *retryable);

/* What the user should do about an error, or "" (e.g. "check the secret key"). */
const char *s3_err_hint(const char *code, long status);

#endif
