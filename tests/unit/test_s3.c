/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_s3.c - unit tests of the S3 backend's pure parts, no S3 server needed: the ListObjectsV2
 * and error XML parsers on recorded responses, the errno mapping table, the retry policy (seeded
 * random source, fake clock, no sleeping), URI encoding, the backend against a closed local port
 * (bounded retries, -EIO within the computed bound), and the backend against a scripted local
 * HTTP server (503 retried, 4xx not, a broken-off read restarted from the start of its range,
 * bodies bounded by the caller's buffer, 416 at EOF). Also the response header parser on raw
 * lines, the transport checks at open (only http/https; a warning for non-loopback http://), and
 * more concurrent calls than pooled connections on a black-hole endpoint (tests/lib/blackhole.c):
 * each ends within the call's deadline. And request_timeout as a stall bound against a server
 * that paces its answer: a body trickled over several request_timeouts is read in one attempt,
 * one that stops fails its attempt request_timeout after its last byte, and keep-alive
 * connections are reused.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "blackhole.h"
#include "common/err.h"
#include "common/timeutil.h"
#include "tiers/backend.h"
#include "tiers/retry.h"
#include "tiers/s3_int.h"

/* Slack on the wall-clock upper bounds of the timeout tests: they catch a call that hangs or waits
 * several times its bound, never one that a loaded machine woke late (scheduling delays there are
 * tens of milliseconds, not seconds). Lower bounds need no slack: timeouts never end early. */
#define LOAD_SLACK_MS 5000
#define XML_HDR "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
#define NS " xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""

/* ---- ListObjectsV2 ------------------------------------------------------------------------- */

/* Recorded from RGW: a truncated page with a continuation token, keys under prefix "pfx/". */
static const char k_list_truncated[] = XML_HDR
    "<ListBucketResult" NS "><Name>bkt</Name><Prefix>pfx/d/</Prefix>"
    "<MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>"
    "<Contents><Key>pfx/d/a.bin</Key><LastModified>2026-11-29T23:29:01.123Z</LastModified>"
    "<ETag>&quot;0cc175b9c0f1b6a831c399e269772661&quot;</ETag><Size>100</Size>"
    "<StorageClass>STANDARD</StorageClass><Owner><ID>u</ID><DisplayName>u</DisplayName>"
    "</Owner><Type>Normal</Type></Contents>"
    "<Contents><Key>pfx/d/b.bin</Key><LastModified>2026-11-29T23:29:02.000Z</LastModified>"
    "<ETag>&quot;92eb5ffee6ae2fec3ad71c777531578f-3&quot;</ETag><Size>15728640</Size>"
    "</Contents><KeyCount>2</KeyCount>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    "</ListBucketResult>";

static void test_list_truncated(void **state)
{
    (void)state;
    struct backend_list_page pg;
    assert_int_equal(s3_xml_parse_list(k_list_truncated, strlen(k_list_truncated), "pfx/", &pg), 0);
    assert_int_equal(pg.n, 2);
    assert_string_equal(pg.entries[0].name, "d/a.bin");
    assert_false(pg.entries[0].is_prefix);
    assert_int_equal(pg.entries[0].size_bytes, 100);
    assert_string_equal(pg.entries[0].etag, "\"0cc175b9c0f1b6a831c399e269772661\"");
    assert_true(pg.entries[0].mtime_ns == 1795994941123000000LL);
    assert_string_equal(pg.entries[1].name, "d/b.bin");
    assert_int_equal(pg.entries[1].size_bytes, 15728640);
    assert_non_null(pg.next_token);
    assert_string_equal(pg.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    backend_list_page_fini(&pg);
}

static void test_list_empty(void **state)
{
    (void)state;
    static const char doc[] = XML_HDR "<ListBucketResult" NS "><Name>bkt</Name><Prefix>none/"
                                      "</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys>"
                                      "<IsTruncated>false</IsTruncated></ListBucketResult>";
    struct backend_list_page pg;
    assert_int_equal(s3_xml_parse_list(doc, strlen(doc), "", &pg), 0);
    assert_int_equal(pg.n, 0);
    assert_null(pg.next_token);
    backend_list_page_fini(&pg);
}

static void test_list_escaped_and_prefixes(void **state)
{
    (void)state;
    /* Objects and common prefixes come in two runs; the page must be in key order. Keys are
     * XML-escaped by the server and unescaped by expat. */
    static const char doc[] =
        XML_HDR "<ListBucketResult" NS "><Name>bkt</Name><Prefix></Prefix>"
                "<Delimiter>/</Delimiter><IsTruncated>false</IsTruncated>"
                "<Contents><Key>a&amp;b</Key><Size>1</Size><ETag>&quot;x&quot;</ETag>"
                "<LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>"
                "<Contents><Key>z&lt;&gt;&quot;&apos; \xc3\xa9</Key><Size>2</Size>"
                "<ETag>\"y\"</ETag></Contents>"
                "<CommonPrefixes><Prefix>dir1/</Prefix></CommonPrefixes>"
                "<CommonPrefixes><Prefix>b&amp;dir/</Prefix></CommonPrefixes>"
                "</ListBucketResult>";
    struct backend_list_page pg;
    assert_int_equal(s3_xml_parse_list(doc, strlen(doc), "", &pg), 0);
    assert_int_equal(pg.n, 4);
    assert_string_equal(pg.entries[0].name, "a&b");
    assert_false(pg.entries[0].is_prefix);
    assert_string_equal(pg.entries[1].name, "b&dir/");
    assert_true(pg.entries[1].is_prefix);
    assert_string_equal(pg.entries[2].name, "dir1/");
    assert_true(pg.entries[2].is_prefix);
    assert_string_equal(pg.entries[3].name, "z<>\"' \xc3\xa9");
    assert_string_equal(pg.entries[3].etag, "\"y\"");
    backend_list_page_fini(&pg);
}

static void test_list_url_encoded(void **state)
{
    (void)state;
    static const char doc[] = XML_HDR "<ListBucketResult" NS "><EncodingType>url</EncodingType>"
                                      "<IsTruncated>false</IsTruncated>"
                                      "<Contents><Key>p%2Fa+b%26c</Key><Size>1</Size></Contents>"
                                      "<CommonPrefixes><Prefix>p%2Fsub%2F</Prefix></CommonPrefixes>"
                                      "</ListBucketResult>";
    struct backend_list_page pg;
    assert_int_equal(s3_xml_parse_list(doc, strlen(doc), "p/", &pg), 0);
    assert_int_equal(pg.n, 2);
    assert_string_equal(pg.entries[0].name, "a b&c");
    assert_string_equal(pg.entries[1].name, "sub/");
    backend_list_page_fini(&pg);
}

static void test_list_strip_prefix_object(void **state)
{
    (void)state;
    /* An object named exactly like the backend prefix ("pfx/") is not a key under the root. */
    static const char doc[] = XML_HDR "<ListBucketResult><IsTruncated>false</IsTruncated>"
                                      "<Contents><Key>pfx/</Key><Size>0</Size></Contents>"
                                      "<Contents><Key>pfx/k</Key><Size>3</Size></Contents>"
                                      "</ListBucketResult>";
    struct backend_list_page pg;
    assert_int_equal(s3_xml_parse_list(doc, strlen(doc), "pfx/", &pg), 0);
    assert_int_equal(pg.n, 1);
    assert_string_equal(pg.entries[0].name, "k");
    backend_list_page_fini(&pg);
    /* A key outside our prefix means the server answered something else. */
    assert_int_equal(s3_xml_parse_list(doc, strlen(doc), "other/", &pg), -EPROTO);
    assert_int_equal(pg.n, 0);
    assert_null(pg.entries);
}

static void test_list_malformed(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "not xml at all",
        XML_HDR "<ListBucketResult><Contents><Key>a</Key>",         /* cut off */
        XML_HDR "<ListBucketResult><Contents><Key>a</Contents>",    /* mismatched */
        XML_HDR "<Error><Code>NoSuchBucket</Code></Error>",         /* wrong root */
        XML_HDR "<ListBucketResult><IsTruncated>true</IsTruncated>" /* truncated, no token */
                "</ListBucketResult>",
        XML_HDR "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
        XML_HDR "<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents>"
                "</ListBucketResult>",
        XML_HDR "<ListBucketResult><Contents><Key>a</Key><LastModified>yesterday</LastModified>"
                "</Contents></ListBucketResult>",
        XML_HDR "<!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;\">]>"
                "<ListBucketResult><Contents><Key>&b;</Key></Contents></ListBucketResult>",
        XML_HDR "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%zz</Key>"
                "</Contents></ListBucketResult>",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct backend_list_page pg;
        int rc = s3_xml_parse_list(bad[i], strlen(bad[i]), "", &pg);
        if (rc != -EPROTO)
            fail_msg("document %zu: expected -EPROTO, got %d", i, rc);
        assert_int_equal(pg.n, 0);
    }
    /* An element text longer than the bound is refused, not buffered. */
    size_t big = S3_XML_TEXT_MAX + 100;
    char *doc = malloc(big + 200);
    assert_non_null(doc);
    int n = snprintf(doc, 200, "<ListBucketResult><Contents><Key>");
    memset(doc + n, 'k', big);
    snprintf(doc + n + big, 100, "</Key></Contents></ListBucketResult>");
    struct backend_list_page pg;
    assert_int_equal(s3_xml_parse_list(doc, strlen(doc), "", &pg), -EPROTO);
    free(doc);
}

/* ListMultipartUploads: only the exact key (after the backend prefix) is returned, with its
 * start time; a truncated page gives both markers; a truncated page without a key marker, an
 * Upload without an id and another root are protocol errors. */
static void test_uploads_parse(void **state)
{
    (void)state;
    const char *doc = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                      "<ListMultipartUploadsResult><Bucket>b</Bucket><Prefix>pfx/a&amp;b</Prefix>"
                      "<IsTruncated>true</IsTruncated><NextKeyMarker>pfx/a&amp;b</NextKeyMarker>"
                      "<NextUploadIdMarker>u3</NextUploadIdMarker>"
                      "<Upload><Key>pfx/a&amp;b</Key><UploadId>u1</UploadId>"
                      "<Initiated>2026-11-30T01:02:03.000Z</Initiated></Upload>"
                      "<Upload><Key>pfx/a&amp;bc</Key><UploadId>u2</UploadId></Upload>"
                      "<Upload><Key>pfx/a&amp;b</Key><UploadId>u3</UploadId></Upload>"
                      "</ListMultipartUploadsResult>";
    struct backend_mpu *v = NULL;
    size_t n = 0;
    char *nk = NULL, *nu = NULL;
    assert_int_equal(s3_xml_parse_uploads(doc, strlen(doc), "pfx/", "a&b", &v, &n, &nk, &nu), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].upload_id, "u1");
    int64_t want;
    assert_int_equal(s3_time_parse_iso8601("2026-11-30T01:02:03.000Z", &want), 0);
    assert_int_equal(v[0].initiated_ns, want);
    assert_string_equal(v[1].upload_id, "u3");
    assert_int_equal(v[1].initiated_ns, 0);
    assert_string_equal(nk, "pfx/a&b");
    assert_string_equal(nu, "u3");
    backend_mpu_list_free(v, n);
    free(nk);
    free(nu);

    /* EncodingType=url after the Uploads (the order S3 documents): keys are decoded anyway */
    const char *enc = "<ListMultipartUploadsResult>"
                      "<Upload><Key>pfx/a%26b</Key><UploadId>e1</UploadId></Upload>"
                      "<Upload><Key>pfx/a%26bc</Key><UploadId>e2</UploadId></Upload>"
                      "<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
                      "</ListMultipartUploadsResult>";
    assert_int_equal(s3_xml_parse_uploads(enc, strlen(enc), "pfx/", "a&b", &v, &n, &nk, &nu), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].upload_id, "e1");
    assert_null(nk);
    backend_mpu_list_free(v, n);

    const char *last = "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
                       "</ListMultipartUploadsResult>";
    assert_int_equal(s3_xml_parse_uploads(last, strlen(last), "", "k", &v, &n, &nk, &nu), 0);
    assert_int_equal(n, 0);
    assert_null(v);
    assert_null(nk);
    assert_null(nu);

    const char *bad[] = {
        "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
        "</ListMultipartUploadsResult>",
        /* truncated with a key marker only: the next page would skip the key's other uploads */
        "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
        "<NextKeyMarker>k</NextKeyMarker></ListMultipartUploadsResult>",
        "<ListMultipartUploadsResult><Upload><Key>k</Key></Upload></ListMultipartUploadsResult>",
        "<ListBucketResult></ListBucketResult>",
        "<ListMultipartUploadsResult><Upload><Key>k</Key><UploadId>u</UploadId>"
        "<Initiated>yesterday</Initiated></Upload></ListMultipartUploadsResult>",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(s3_xml_parse_uploads(bad[i], strlen(bad[i]), "", "k", &v, &n, &nk, &nu),
                         -EPROTO);
        assert_null(v);
        assert_int_equal(n, 0);
        assert_null(nk);
        assert_null(nu);
    }
}

/* ---- error documents and the mapping table ------------------------------------------------- */

static void test_error_parse(void **state)
{
    (void)state;
    static const char doc[] =
        XML_HDR "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we "
                "calculated does not match the signature you provided. Check your key and "
                "signing method.</Message><RequestId>tx0000</RequestId><HostId>h</HostId></Error>";
    struct s3_error e;
    assert_int_equal(s3_xml_parse_error(doc, strlen(doc), &e), 0);
    assert_string_equal(e.code, "SignatureDoesNotMatch");
    assert_true(strncmp(e.message, "The request signature we calculated", 35) == 0);
    /* RGW's NoSuchKey has no Message. */
    static const char rgw[] = XML_HDR "<Error><Code>NoSuchKey</Code><BucketName>b</BucketName>"
                                      "<RequestId>tx1</RequestId></Error>";
    assert_int_equal(s3_xml_parse_error(rgw, strlen(rgw), &e), 0);
    assert_string_equal(e.code, "NoSuchKey");
    assert_string_equal(e.message, "");
    assert_int_equal(s3_xml_parse_error("<html>503</html>", 16, &e), -EPROTO);
    assert_string_equal(e.code, "");
    assert_int_equal(s3_xml_parse_error("<Error><Code>x", 14, &e), -EPROTO);
}

static void test_find_text(void **state)
{
    (void)state;
    static const char doc[] =
        XML_HDR "<InitiateMultipartUploadResult" NS "><Bucket>b</Bucket><Key>k</Key>"
                "<UploadId>2~abc&amp;def</UploadId></InitiateMultipartUploadResult>";
    char out[64];
    assert_int_equal(s3_xml_find_text(doc, strlen(doc), "InitiateMultipartUploadResult", "UploadId",
                                      out, sizeof(out)),
                     0);
    assert_string_equal(out, "2~abc&def");
    assert_int_equal(s3_xml_find_text(doc, strlen(doc), "InitiateMultipartUploadResult", "Nope",
                                      out, sizeof(out)),
                     -ENOENT);
    assert_int_equal(s3_xml_find_text(doc, strlen(doc), "Other", "UploadId", out, sizeof(out)),
                     -EPROTO);
    assert_int_equal(
        s3_xml_find_text(doc, strlen(doc), "InitiateMultipartUploadResult", "UploadId", out, 4),
        -ENAMETOOLONG);
}

static void test_xml_escape(void **state)
{
    (void)state;
    struct dynbuf b;
    dynbuf_init(&b, 1024);
    assert_int_equal(s3_xml_escape(&b, "\"e\"&<>'x"), 0);
    assert_string_equal(b.data, "&quot;e&quot;&amp;&lt;&gt;&apos;x");
    dynbuf_fini(&b);
}

static void test_errno_map(void **state)
{
    (void)state;
    static const struct {
        CURLcode cc;
        long status;
        const char *code;
        int err;
        bool retry;
    } t[] = {
        {CURLE_OK, 200, "", 0, false},
        {CURLE_OK, 204, NULL, 0, false},
        {CURLE_OK, 206, "", 0, false},
        {CURLE_OK, 404, "NoSuchKey", -ENOENT, false},
        {CURLE_OK, 404, "NoSuchUpload", -ENOENT, false},
        {CURLE_OK, 404, "NoSuchBucket", -ENOENT, false},
        {CURLE_OK, 404, "", -ENOENT, false}, /* HEAD: no body */
        {CURLE_OK, 403, "AccessDenied", -EACCES, false},
        {CURLE_OK, 403, "SignatureDoesNotMatch", -EACCES, false},
        {CURLE_OK, 403, "InvalidAccessKeyId", -EACCES, false},
        {CURLE_OK, 403, "", -EACCES, false},
        {CURLE_OK, 412, "PreconditionFailed", -ESTALE, false},
        {CURLE_OK, 412, "", -ESTALE, false},
        {CURLE_OK, 416, "InvalidRange", -ERANGE, false},
        {CURLE_OK, 416, "", -ERANGE, false},
        {CURLE_OK, 400, "EntityTooSmall", -EINVAL, false},
        {CURLE_OK, 400, "InvalidPart", -EINVAL, false},
        {CURLE_OK, 400, "InvalidArgument", -EINVAL, false},
        {CURLE_OK, 400, "", -EINVAL, false},
        {CURLE_OK, 503, "SlowDown", -EAGAIN, true},
        {CURLE_OK, 503, "", -EAGAIN, true},
        {CURLE_OK, 429, "", -EAGAIN, true},
        {CURLE_OK, 500, "InternalError", -EIO, true},
        {CURLE_OK, 502, "", -EIO, true},
        {CURLE_OK, 504, "", -EIO, true},
        {CURLE_OK, 200, "InternalError", -EIO, true}, /* CompleteMultipartUpload 200 + Error */
        {CURLE_OK, 200, "WeirdCode", -EIO, false},
        {CURLE_OK, 409, "BucketNotEmpty", -EIO, false},
        {CURLE_OK, 405, "", -EIO, false},
        {CURLE_OPERATION_TIMEDOUT, 0, NULL, -ETIMEDOUT, true},
        {CURLE_COULDNT_CONNECT, 0, NULL, -EIO, true},
        {CURLE_COULDNT_RESOLVE_HOST, 0, NULL, -EIO, true},
        {CURLE_RECV_ERROR, 0, NULL, -EIO, true},
        {CURLE_GOT_NOTHING, 0, NULL, -EIO, true},
        {CURLE_OUT_OF_MEMORY, 0, NULL, -ENOMEM, false},
        {CURLE_SSL_CACERT_BADFILE, 0, NULL, -EIO, false},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        bool retry = !t[i].retry;
        int err = s3_errno_map(t[i].cc, t[i].status, t[i].code, &retry);
        if (err != t[i].err || retry != t[i].retry)
            fail_msg("row %zu (%d, %ld, %s): got %d/%d, want %d/%d", i, (int)t[i].cc, t[i].status,
                     t[i].code ? t[i].code : "-", err, retry, t[i].err, t[i].retry);
    }
    assert_non_null(strstr(s3_err_hint("SignatureDoesNotMatch", 403), "secret key"));
    assert_non_null(strstr(s3_err_hint("NoSuchBucket", 404), "bucket"));
    assert_non_null(strstr(s3_err_hint("", 403), "secret key"));
}

/* ---- retry policy --------------------------------------------------------------------------- */

struct fake {
    uint64_t rng;
    uint64_t now_ms;
    int sleeps;
    uint64_t delays[64];
    int fail_times; /* attempts that fail before one succeeds */
    bool retryable; /* whether the failures are transient */
    int calls;
};

static uint64_t fake_rand(void *ctx)
{
    struct fake *f = ctx;
    uint64_t z = (f->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fake_sleep(void *ctx, uint64_t ms)
{
    struct fake *f = ctx;
    if (f->sleeps < 64)
        f->delays[f->sleeps] = ms;
    f->sleeps++;
    f->now_ms += ms;
}

static ssize_t fake_attempt(void *ctx, int n, bool *retryable)
{
    struct fake *f = ctx;
    assert_int_equal(n, f->calls);
    f->calls++;
    f->now_ms += 7; /* every attempt takes 7 ms of fake time */
    if (f->calls <= f->fail_times) {
        *retryable = f->retryable;
        return -EIO;
    }
    return 42;
}

static void test_retry_caps(void **state)
{
    (void)state;
    struct retry_policy p = {.max_retries = 10, .base_ms = 100, .max_ms = 5000};
    assert_int_equal(retry_backoff_cap_ms(&p, 0), 100);
    assert_int_equal(retry_backoff_cap_ms(&p, 1), 200);
    assert_int_equal(retry_backoff_cap_ms(&p, 5), 3200);
    assert_int_equal(retry_backoff_cap_ms(&p, 6), 5000);
    assert_int_equal(retry_backoff_cap_ms(&p, 1000), 5000); /* no overflow for huge n */
    struct retry_policy big = {.max_retries = 3, .base_ms = UINT64_MAX / 3, .max_ms = UINT64_MAX};
    assert_true(retry_backoff_cap_ms(&big, 70) == UINT64_MAX);
    /* (3 + 1) * 50 + 100 + 200 + 400 */
    struct retry_policy q = {.max_retries = 3, .base_ms = 100, .max_ms = 5000};
    assert_int_equal(retry_worst_case_ms(&q, 50), 900);
    struct retry_policy none = {.max_retries = 0, .base_ms = 100, .max_ms = 5000};
    assert_int_equal(retry_worst_case_ms(&none, 50), 50);
}

static void test_retry_jitter_bounds(void **state)
{
    (void)state;
    struct retry_policy p = {.max_retries = 8, .base_ms = 100, .max_ms = 2000};
    struct fake f = {.rng = 12345};
    /* Full jitter: every delay in [0, min(cap, base * 2^n)], and they really vary. */
    for (int n = 0; n < 8; n++) {
        uint64_t cap = retry_backoff_cap_ms(&p, n);
        uint64_t lo = UINT64_MAX, hi = 0;
        for (int i = 0; i < 2000; i++) {
            uint64_t d = retry_backoff_ms(&p, n, fake_rand, &f);
            assert_true(d <= cap);
            lo = d < lo ? d : lo;
            hi = d > hi ? d : hi;
        }
        assert_true(lo < cap / 8 + 1);
        assert_true(hi > cap - cap / 8 - 1);
    }
    /* Deterministic with the same seed. */
    struct fake a = {.rng = 7}, b = {.rng = 7};
    for (int i = 0; i < 100; i++)
        assert_int_equal(retry_backoff_ms(&p, 3, fake_rand, &a),
                         retry_backoff_ms(&p, 3, fake_rand, &b));
}

static void test_retry_run(void **state)
{
    (void)state;
    struct retry_policy p = {.max_retries = 4, .base_ms = 100, .max_ms = 1000};
    /* Transient failures twice, then success: 3 attempts, 2 sleeps within their caps. */
    struct fake f = {.rng = 99, .fail_times = 2, .retryable = true};
    struct retry_env env = {
        .rand = fake_rand, .rand_ctx = &f, .sleep = fake_sleep, .sleep_ctx = &f};
    int attempts = 0;
    assert_int_equal(retry_run(&p, &env, fake_attempt, &f, &attempts), 42);
    assert_int_equal(attempts, 3);
    assert_int_equal(f.sleeps, 2);
    assert_true(f.delays[0] <= 100 && f.delays[1] <= 200);

    /* Always transient: bounded by max_retries, and by the worst-case time. */
    struct fake g = {.rng = 5, .fail_times = 1000, .retryable = true};
    struct retry_env genv = {
        .rand = fake_rand, .rand_ctx = &g, .sleep = fake_sleep, .sleep_ctx = &g};
    assert_int_equal(retry_run(&p, &genv, fake_attempt, &g, &attempts), -EIO);
    assert_int_equal(attempts, 5);
    assert_int_equal(g.calls, 5);
    assert_int_equal(g.sleeps, 4);
    assert_true(g.now_ms <= retry_worst_case_ms(&p, 7));

    /* A permanent failure (a 4xx) is never retried. */
    struct fake h = {.rng = 5, .fail_times = 1000, .retryable = false};
    struct retry_env henv = {
        .rand = fake_rand, .rand_ctx = &h, .sleep = fake_sleep, .sleep_ctx = &h};
    assert_int_equal(retry_run(&p, &henv, fake_attempt, &h, &attempts), -EIO);
    assert_int_equal(attempts, 1);
    assert_int_equal(h.sleeps, 0);
}

static void test_retry_statuses(void **state)
{
    (void)state;
    for (long s = 100; s < 600; s++) {
        bool want = s == 429 || s >= 500;
        if (retry_http_status_retryable(s) != want)
            fail_msg("status %ld", s);
    }
}

/* ---- URI encoding and time ------------------------------------------------------------------ */

static void test_uri_encode(void **state)
{
    (void)state;
    struct dynbuf b;
    dynbuf_init(&b, 4096);
    assert_int_equal(s3_uri_encode(&b, "dir/a b+c&d=e%f~g_h-i.j/\xc3\xa9", true), 0);
    assert_string_equal(b.data, "dir/a%20b%2Bc%26d%3De%25f~g_h-i.j/%C3%A9");
    dynbuf_reset(&b);
    assert_int_equal(s3_uri_encode(&b, "pfx/d/", false), 0);
    assert_string_equal(b.data, "pfx%2Fd%2F");
    dynbuf_reset(&b);
    assert_int_equal(s3_uri_encode(&b, "1ueG/x=", false), 0);
    assert_string_equal(b.data, "1ueG%2Fx%3D");
    dynbuf_fini(&b);

    char s[] = "a%2Fb+c%c3%A9";
    assert_int_equal(s3_uri_decode(s), 0);
    assert_string_equal(s, "a/b c\xc3\xa9");
    char bad1[] = "a%2";
    char bad2[] = "a%00b";
    assert_int_equal(s3_uri_decode(bad1), -EPROTO);
    assert_int_equal(s3_uri_decode(bad2), -EPROTO);
}

static void test_time_parse(void **state)
{
    (void)state;
    int64_t ns = 0;
    assert_int_equal(s3_time_parse_iso8601("1970-01-01T00:00:01.5Z", &ns), 0);
    assert_true(ns == 1500000000LL);
    assert_int_equal(s3_time_parse_iso8601("2026-11-29T23:29:01Z", &ns), 0);
    assert_true(ns == 1795994941000000000LL);
    assert_int_equal(s3_time_parse_iso8601("2026-11-29 23:29:01Z", &ns), -EINVAL);
    assert_int_equal(s3_time_parse_iso8601("2026-13-29T23:29:01Z", &ns), -EINVAL);
    assert_int_equal(s3_time_parse_iso8601("2026-11-29T23:29:01", &ns), -EINVAL);
    assert_int_equal(s3_time_parse_iso8601("9999-11-29T23:29:01Z", &ns), -EINVAL); /* > 2262 */
}

static void hdr(struct s3_resp_headers *h, const char *line)
{
    s3_resp_header_line(h, line, strlen(line));
}

/* The response header parser (s3_hdr.c) on raw lines as curl hands them over. */
static void test_resp_headers(void **state)
{
    (void)state;
    struct s3_resp_headers h;
    s3_resp_headers_reset(&h);
    hdr(&h, "HTTP/1.1 206 Partial Content\r\n");
    hdr(&h, "etag:   \"abc-2\"  \r\n");
    hdr(&h, "Last-Modified: Sun, 29 Nov 2026 23:29:01 GMT\r\n");
    hdr(&h, "CONTENT-LENGTH: 4\r\n");
    hdr(&h, "Content-Range: bytes 0-3/1000\r\n");
    hdr(&h, "X-Other: 1\r\n");
    hdr(&h, "no colon here\r\n");
    hdr(&h, "\r\n");
    assert_string_equal(h.etag, "\"abc-2\"");
    assert_int_equal(h.mtime_ns, 1795994941LL * 1000000000LL);
    assert_true(h.have_length);
    assert_int_equal(h.content_length, 4);
    assert_true(h.have_total);
    assert_int_equal(h.total_size, 1000);
    /* bad numbers are not taken; an unknown total ("*") neither */
    hdr(&h, "Content-Length: 12x\r\n");
    assert_false(h.have_length);
    hdr(&h, "Content-Range: bytes */1000\r\n");
    assert_true(h.have_total);
    hdr(&h, "Content-Range: bytes 0-3/*\r\n");
    assert_false(h.have_total);
    hdr(&h, "Content-Length: 99999999999999999999999\r\n");
    assert_false(h.have_length);
    /* A date past 2262 does not fit ns in int64_t: unknown, not a signed overflow (UBSan). */
    hdr(&h, "Last-Modified: Fri, 31 Dec 9999 23:59:59 GMT\r\n");
    assert_int_equal(h.mtime_ns, 0);
    /* an overlong value is ignored, a long ETag is cut to fit */
    char line[600];
    memset(line, 'a', sizeof(line));
    memcpy(line, "ETag: ", 6);
    s3_resp_header_line(&h, line, sizeof(line));
    assert_string_equal(h.etag, "\"abc-2\"");
    s3_resp_header_line(&h, line, 6 + 200);
    assert_int_equal(strlen(h.etag), BACKEND_ETAG_MAX - 1);
    /* the length bounds the line: nothing past it is read */
    s3_resp_header_line(&h, "ETag: \"x\"GARBAGE", 9);
    assert_string_equal(h.etag, "\"x\"");
    /* a new response forgets the last one's headers */
    hdr(&h, "HTTP/1.1 200 OK\r\n");
    assert_string_equal(h.etag, "");
    assert_false(h.have_length);
    assert_false(h.have_total);
    assert_int_equal(h.mtime_ns, 0);
}

/* ---- the backend without a server ------------------------------------------------------------ */

static void test_open_config(void **state)
{
    (void)state;
    struct backend *be = NULL;
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    struct s3_backend_config c = {
        .endpoint = "http://127.0.0.1:1", .bucket = "bkt", .path_style = true};
    assert_int_equal(backend_s3_open(&c, &be), -EINVAL);
    assert_non_null(strstr(tier_err_msg(), "AWS_ACCESS_KEY_ID"));
    setenv("AWS_ACCESS_KEY_ID", "ak", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "sk", 1);
    assert_int_equal(backend_s3_open(&c, &be), 0);
    assert_string_equal(be->ops->type, "s3");
    backend_free(be);
    struct s3_backend_config bad = c;
    bad.endpoint = "127.0.0.1:7480";
    assert_int_equal(backend_s3_open(&bad, &be), -EINVAL);
    bad.endpoint = "http://h/path";
    assert_int_equal(backend_s3_open(&bad, &be), -EINVAL);
    bad = c;
    bad.bucket = "a";
    assert_int_equal(backend_s3_open(&bad, &be), -EINVAL);
    bad = c;
    bad.prefix = "../x";
    assert_int_equal(backend_s3_open(&bad, &be), -EINVAL);
    /* Only HTTP(S): curl would fetch a file:// or ftp:// URL as happily. */
    static const char *const schemes[] = {"file:///etc", "ftp://127.0.0.1:21", "gopher://h",
                                          "dict://h:2628", "httpx://h"};
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        bad = c;
        bad.endpoint = schemes[i];
        assert_int_equal(backend_s3_open(&bad, &be), -EINVAL);
        assert_non_null(strstr(tier_err_msg(), "only http:// and https:// are allowed"));
    }
    bad = c;
    bad.endpoint = "HTTPS://127.0.0.1:7480";
    assert_int_equal(backend_s3_open(&bad, &be), 0);
    backend_free(be);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
}

/* Open an S3 backend on endpoint with stderr (where log_warn writes) captured; returns whether
 * the captured output contains needle. */
static bool open_logs(const char *endpoint, const char *needle)
{
    char path[] = "/tmp/test_s3_log_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    struct s3_backend_config c = {.name = "cold",
                                  .endpoint = endpoint,
                                  .bucket = "bkt",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk"};
    struct backend *be = NULL;
    int rc = backend_s3_open(&c, &be);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_int_equal(rc, 0);
    backend_free(be);
    char buf[4096];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strstr(buf, needle) != NULL;
}

/* Plain http:// to anything but loopback carries object data, the signature and the session
 * token in the clear: warned at open; loopback and https are not. */
static void test_plain_http_warning(void **state)
{
    (void)state;
    const char *w = "backend 'cold': endpoint";
    assert_true(open_logs("http://10.1.2.3:7480", w));
    assert_true(open_logs("http://s3.example.com", w));
    assert_true(open_logs("http://127.example.com:80", w));
    assert_true(open_logs("http://[2001:db8::1]:7480", w));
    assert_true(open_logs("http://127.0.0.1.nip.io:7480", w));
    assert_false(open_logs("http://127.0.0.1:7480", w));
    assert_false(open_logs("http://127.1.2.3", w));
    assert_false(open_logs("http://localhost:7480/", w));
    assert_false(open_logs("http://[::1]:7480", w));
    assert_false(open_logs("https://10.1.2.3:7480", w));
    assert_false(open_logs("https://s3.us-east-1.amazonaws.com", w));
}

/* A port nobody listens on: bind an ephemeral port and close it again. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_dead_endpoint_bounded(void **state)
{
    (void)state;
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", closed_port());
    struct s3_backend_config c = {.endpoint = ep,
                                  .bucket = "bkt",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = 3,
                                  .retry_base_ms = 20,
                                  .retry_max_ms = 50,
                                  .connect_timeout_ms = 500,
                                  .request_timeout_ms = 1000};
    struct backend *be = NULL;
    assert_int_equal(backend_s3_open(&c, &be), 0);
    struct retry_policy p = {.max_retries = 3, .base_ms = 20, .max_ms = 50};
    uint64_t bound_ms = retry_worst_case_ms(&p, c.request_timeout_ms);
    char buf[16];
    uint64_t t0 = tier_now_mono_ns();
    ssize_t n = backend_read(be, NULL, "k", 0, buf, sizeof(buf), NULL, NULL);
    uint64_t ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    assert_true(n == -EIO || n == -ETIMEDOUT);
    assert_true(ms < bound_ms + LOAD_SLACK_MS);
    assert_non_null(strstr(tier_err_msg(), "after 4 attempts"));
    assert_non_null(strstr(tier_err_msg(), "S3 GET bkt/k"));
    struct backend_stat st;
    assert_true(backend_stat(be, NULL, "k", &st) == -EIO);
    backend_free(be);
}

/* ---- scripted HTTP server: retries and bounded reads end to end, without RGW ----------------- */

/* A listening socket on 127.0.0.1 at an ephemeral port (*port). */
static int loopback_listen(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Reads from fd into buf (cap bytes, NUL-terminated) until the end of a request's headers or
 * EOF; returns the bytes read. */
static size_t read_headers(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    buf[0] = '\0';
    while (got < cap - 1 && !strstr(buf, "\r\n\r\n")) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
    }
    return got;
}

struct script_srv {
    int lfd;
    int port;
    const char *const *resp; /* raw HTTP responses, one per connection */
    int nresp;
    int served;          /* read after srv_stop() only */
    atomic_int accepted; /* connections accepted so far; readable while running */
    char reqs[8][4096];  /* request i as received (headers + body); read after srv_stop() */
    char *last_req;      /* the last of reqs; read after srv_stop() */
    pthread_t th;
};

static void *srv_main(void *arg)
{
    struct script_srv *s = arg;
    for (int i = 0; i < s->nresp; i++) {
        struct pollfd p = {.fd = s->lfd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
            break; /* the client gave up earlier than scripted */
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            break;
        atomic_fetch_add(&s->accepted, 1);
        s->last_req = s->reqs[i < 8 ? i : 7];
        size_t got = read_headers(fd, s->last_req, sizeof(s->reqs[0]));
        /* Keep the request body too (a CompleteMultipartUpload document). */
        const char *end = strstr(s->last_req, "\r\n\r\n");
        const char *cl = strcasestr(s->last_req, "\r\nContent-Length:");
        if (end && cl && cl < end) {
            size_t want = (size_t)(end + 4 - s->last_req) + strtoul(cl + 17, NULL, 10);
            if (strcasestr(s->last_req, "\r\nExpect: 100-continue"))
                (void)!write(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
            while (got < want && got < sizeof(s->reqs[0]) - 1) {
                ssize_t n = read(fd, s->last_req + got, sizeof(s->reqs[0]) - 1 - got);
                if (n <= 0)
                    break;
                got += (size_t)n;
                s->last_req[got] = '\0';
            }
        }
        const char *r = s->resp[i];
        size_t len = strlen(r);
        while (len) {
            ssize_t n = write(fd, r, len);
            if (n <= 0)
                break;
            r += n;
            len -= (size_t)n;
        }
        shutdown(fd, SHUT_RDWR);
        close(fd);
        s->served++;
    }
    return NULL;
}

static void srv_start(struct script_srv *s, const char *const *resp, int n)
{
    memset(s, 0, sizeof(*s));
    atomic_init(&s->accepted, 0);
    s->resp = resp;
    s->nresp = n;
    s->lfd = loopback_listen(&s->port);
    assert_int_equal(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static int srv_stop(struct script_srv *s)
{
    pthread_join(s->th, NULL);
    close(s->lfd);
    return s->served;
}

static struct backend *srv_backend(const struct script_srv *s, char *ep, size_t epsz)
{
    snprintf(ep, epsz, "http://127.0.0.1:%d", s->port);
    struct s3_backend_config c = {.endpoint = ep,
                                  .bucket = "bkt",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = 3,
                                  .retry_base_ms = 1,
                                  .retry_max_ms = 5,
                                  .connect_timeout_ms = 2000,
                                  .request_timeout_ms = 5000};
    struct backend *be = NULL;
    assert_int_equal(backend_s3_open(&c, &be), 0);
    return be;
}

#define R503                                                                                       \
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"                        \
    "Content-Length: 69\r\nConnection: close\r\n\r\n"                                              \
    "<Error><Code>SlowDown</Code><Message>Please slow</Message></Error>\n\n\n"
#define HDR206(len)                                                                                \
    "HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\nContent-Range: bytes 0-" #len                 \
    "/1000\r\nContent-Length: " #len "\r\nConnection: close\r\n\r\n"

static void test_srv_retry_then_ok(void **state)
{
    (void)state;
    static const char *const resp[] = {R503, R503, HDR206(4) "data"};
    struct script_srv s;
    srv_start(&s, resp, 3);
    char ep[64], buf[4];
    struct backend *be = srv_backend(&s, ep, sizeof(ep));
    struct backend_stat st;
    assert_int_equal(backend_read(be, NULL, "a b/k", 0, buf, 4, "\"v1\"", &st), 4);
    assert_memory_equal(buf, "data", 4);
    assert_string_equal(st.etag, "\"v1\"");
    assert_int_equal(st.size_bytes, 1000);
    backend_free(be);
    assert_int_equal(srv_stop(&s), 3);
    /* what went on the wire: encoded path, range, version, signature */
    assert_non_null(strstr(s.last_req, "GET /bkt/a%20b/k HTTP/1.1"));
    assert_non_null(strcasestr(s.last_req, "Range: bytes=0-3"));
    assert_non_null(strcasestr(s.last_req, "If-Match: \"v1\""));
    assert_non_null(strstr(s.last_req, "AWS4-HMAC-SHA256 Credential=ak/"));
    assert_non_null(strcasestr(s.last_req, "x-amz-content-sha256: UNSIGNED-PAYLOAD"));
}

static void test_srv_partial_read_restarts(void **state)
{
    (void)state;
    /* The first answer breaks off after 5 of 10 bytes; the retry must refill from the start of
     * the range, not append (which would leave "AAAAA" in front and overflow the buffer). */
    static const char *const resp[] = {HDR206(10) "AAAAA", HDR206(10) "BBBBBBBBBB"};
    struct script_srv s;
    srv_start(&s, resp, 2);
    char ep[64], buf[10];
    struct backend *be = srv_backend(&s, ep, sizeof(ep));
    assert_int_equal(backend_read(be, NULL, "k", 0, buf, 10, NULL, NULL), 10);
    assert_memory_equal(buf, "BBBBBBBBBB", 10);
    backend_free(be);
    assert_int_equal(srv_stop(&s), 2);
}

static void test_srv_no_retry_on_4xx(void **state)
{
    (void)state;
    static const char *const resp[] = {
        "HTTP/1.1 400 Bad Request\r\nContent-Length: 73\r\nConnection: close\r\n\r\n"
        "<Error><Code>InvalidArgument</Code><Message>bad thing</Message></Error>\n\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"};
    struct script_srv s;
    srv_start(&s, resp, 2);
    char ep[64], buf[10];
    struct backend *be = srv_backend(&s, ep, sizeof(ep));
    assert_int_equal(backend_read(be, NULL, "k", 0, buf, 10, NULL, NULL), -EINVAL);
    assert_non_null(strstr(tier_err_msg(), "400 InvalidArgument: bad thing"));
    /* the second scripted answer is still unused: one request only */
    assert_int_equal(atomic_load(&s.accepted), 1);
    struct backend_stat st;
    assert_int_equal(backend_stat(be, NULL, "k", &st), 0); /* consumes the 200 */
    backend_free(be);
    assert_int_equal(srv_stop(&s), 2);
}

static void test_srv_slowdown_exhausted(void **state)
{
    (void)state;
    static const char *const resp[] = {R503, R503, R503, R503};
    struct script_srv s;
    srv_start(&s, resp, 4);
    char ep[64], buf[10];
    struct backend *be = srv_backend(&s, ep, sizeof(ep));
    assert_int_equal(backend_read(be, NULL, "k", 0, buf, 10, NULL, NULL), -EAGAIN);
    assert_non_null(strstr(tier_err_msg(), "(after 4 attempts): 503 SlowDown"));
    backend_free(be);
    assert_int_equal(srv_stop(&s), 4);
}

static void test_srv_bounded_body(void **state)
{
    (void)state;
    static const char *const resp[] = {
        /* a 206 with more bytes than the range asked for: refused, never overflowing */
        HDR206(20) "01234567890123456789",
        /* a 200 (Range ignored) with the whole object: the range is cut out of it */
        "HTTP/1.1 200 OK\r\nETag: \"w\"\r\nContent-Length: 20\r\nConnection: close\r\n\r\n"
        "abcdefghijklmnopqrst",
        /* 416 at EOF: 0 bytes, version from a HEAD */
        "HTTP/1.1 416 Requested Range Not Satisfiable\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n",
        "HTTP/1.1 200 OK\r\nETag: \"w\"\r\nContent-Length: 20\r\nConnection: close\r\n\r\n"};
    struct script_srv s;
    srv_start(&s, resp, 4);
    char ep[64];
    char *buf = malloc(10); /* exact size, so ASan sees any overflow */
    assert_non_null(buf);
    struct backend *be = srv_backend(&s, ep, sizeof(ep));
    assert_int_equal(backend_read(be, NULL, "k", 0, buf, 10, NULL, NULL), -EIO);
    struct backend_stat st;
    assert_int_equal(backend_read(be, NULL, "k", 5, buf, 10, NULL, &st), 10);
    assert_memory_equal(buf, "fghijklmno", 10);
    assert_int_equal(st.size_bytes, 20);
    assert_int_equal(backend_read(be, NULL, "k", 20, buf, 10, NULL, &st), 0);
    assert_int_equal(st.size_bytes, 20);
    assert_string_equal(st.etag, "\"w\"");
    backend_free(be);
    free(buf);
    assert_int_equal(srv_stop(&s), 4);
}

static void test_srv_wire_format(void **state)
{
    (void)state;
    static const char *const resp[] = {
        /* 1: list with a token containing '/', '+' and '=' */
        "HTTP/1.1 200 OK\r\nContent-Length: 176\r\nConnection: close\r\n\r\n"
        "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>p/d/a</Key><Size>1"
        "</Size></Contents><CommonPrefixes><Prefix>p/d/s/</Prefix></CommonPrefixes>"
        "</ListBucketResult>",
        /* 2: complete; RGW-style empty ETag, so the backend asks with a HEAD (3) */
        "HTTP/1.1 200 OK\r\nContent-Length: 84\r\nConnection: close\r\n\r\n"
        "<CompleteMultipartUploadResult><ETag></ETag></CompleteMultipartUploadResult>\n\n\n\n\n"
        "\n\n\n",
        "HTTP/1.1 200 OK\r\nETag: \"m-2\"\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
        /* 4: complete answered 200 with an Error document */
        "HTTP/1.1 200 OK\r\nContent-Length: 72\r\nConnection: close\r\n\r\n"
        "<Error><Code>InvalidPart</Code><Message>part 2 is gone</Message></Error>",
    };
    struct script_srv s;
    srv_start(&s, resp, 4);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", s.port);
    setenv("AWS_SESSION_TOKEN", "tok123", 1);
    struct s3_backend_config c = {.endpoint = ep,
                                  .bucket = "bkt",
                                  .prefix = "p",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = 1,
                                  .retry_base_ms = 1,
                                  .retry_max_ms = 1};
    struct backend *be = NULL;
    assert_int_equal(backend_s3_open(&c, &be), 0);
    unsetenv("AWS_SESSION_TOKEN");

    struct backend_list_page pg;
    assert_int_equal(backend_list(be, NULL, "d/", "/", "t/k+=", 0, &pg), 0);
    assert_int_equal(pg.n, 2);
    assert_string_equal(pg.entries[0].name, "d/a");
    assert_string_equal(pg.entries[1].name, "d/s/");
    assert_true(pg.entries[1].is_prefix);
    backend_list_page_fini(&pg);

    struct backend_part parts[2] = {{1, "\"e1\""}, {2, "\"e&2\""}};
    char etag[BACKEND_ETAG_MAX];
    assert_int_equal(backend_mpu_complete(be, NULL, "k", "up/id=", parts, 2, etag), 0);
    assert_string_equal(etag, "\"m-2\"");
    assert_int_equal(backend_mpu_complete(be, NULL, "k", "up/id=", parts, 2, etag), -EINVAL);
    assert_non_null(strstr(tier_err_msg(), "InvalidPart: part 2 is gone"));
    backend_free(be);
    assert_int_equal(srv_stop(&s), 4);
    /* The list query is sorted and encoded, since curl 7.88 signs it verbatim; the backend's
     * prefix is added to the listing prefix (and was stripped from the answer above). */
    assert_non_null(strstr(s.reqs[0], "GET /bkt/?continuation-token=t%2Fk%2B%3D&delimiter=%2F"
                                      "&list-type=2&max-keys=1000&prefix=p%2Fd%2F HTTP/1.1"));
    assert_non_null(strcasestr(s.reqs[0], "\r\nx-amz-security-token: tok123\r\n"));
    /* The complete document escapes the ETags' quotes and ampersand. */
    assert_non_null(strstr(s.reqs[1], "POST /bkt/p/k?uploadId=up%2Fid%3D HTTP/1.1"));
    assert_non_null(strstr(s.reqs[1], "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
                                      "<ETag>&quot;e1&quot;</ETag></Part><Part><PartNumber>2"
                                      "</PartNumber><ETag>&quot;e&amp;2&quot;</ETag></Part>"
                                      "</CompleteMultipartUpload>"));
    assert_non_null(strstr(s.reqs[2], "HEAD /bkt/p/k HTTP/1.1"));
}

static void test_srv_virtual_host(void **state)
{
    (void)state;
    /* curl resolves every *.localhost name to the loopback address itself. */
    static const char *const resp[] = {
        "HTTP/1.1 200 OK\r\nETag: \"v\"\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"};
    struct script_srv s;
    srv_start(&s, resp, 1);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://localhost:%d/", s.port);
    struct s3_backend_config c = {.endpoint = ep,
                                  .bucket = "bkt",
                                  .path_style = false,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = 1,
                                  .retry_base_ms = 1,
                                  .retry_max_ms = 1};
    struct backend *be = NULL;
    assert_int_equal(backend_s3_open(&c, &be), 0);
    struct backend_stat st;
    int rc = backend_stat(be, NULL, "dir/k", &st);
    if (rc)
        fail_msg("stat: %d %s", rc, tier_err_msg());
    assert_int_equal(st.size_bytes, 3);
    backend_free(be);
    assert_int_equal(srv_stop(&s), 1);
    assert_non_null(strstr(s.last_req, "HEAD /dir/k HTTP/1.1"));
    char host[64];
    snprintf(host, sizeof(host), "\r\nHost: bkt.localhost:%d\r\n", s.port);
    assert_non_null(strcasestr(s.last_req, host));
}

static void test_hung_endpoint_times_out(void **state)
{
    (void)state;
    /* A listener that never accepts: the kernel completes the TCP handshake, the request goes
     * out, no answer ever comes. Every attempt must end at request_timeout_ms (-ETIMEDOUT,
     * retried), and the call within retry_worst_case_ms(). */
    int port;
    int lfd = loopback_listen(&port);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", port);
    struct s3_backend_config c = {.endpoint = ep,
                                  .bucket = "bkt",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = 2,
                                  .retry_base_ms = 10,
                                  .retry_max_ms = 20,
                                  .connect_timeout_ms = 200,
                                  .request_timeout_ms = 200};
    struct backend *be = NULL;
    assert_int_equal(backend_s3_open(&c, &be), 0);
    struct retry_policy p = {.max_retries = 2, .base_ms = 10, .max_ms = 20};
    uint64_t bound_ms = retry_worst_case_ms(&p, c.request_timeout_ms); /* 630 */
    char buf[8];
    uint64_t t0 = tier_now_mono_ns();
    ssize_t n = backend_read(be, NULL, "k", 0, buf, sizeof(buf), NULL, NULL);
    uint64_t ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    assert_int_equal(n, -ETIMEDOUT);
    assert_true(ms >= 3 * c.request_timeout_ms - 30); /* three attempts, each ran out */
    assert_true(ms < bound_ms + LOAD_SLACK_MS);
    assert_non_null(strstr(tier_err_msg(), "after 3 attempts"));
    assert_non_null(strstr(tier_err_msg(), "did not answer in time"));
    backend_free(be);
    close(lfd);
}

/* ---- a body trickled over time: request_timeout bounds a stall, not a slow transfer ---------- */

#define TRICKLE_LEN 65536

/* Serves one connection after the other, connection i as script[i] says: 't' the answer's headers
 * at once, then its body in `pieces` pieces gap_ms apart; 's' the same, but only the first
 * `send_pieces` pieces, then silence until the client closes the connection; 'f' the whole answer
 * at once; 'k' the whole answer at once, keeping the connection open for the next request, until
 * the client closes it; '5' a 503 SlowDown. */
struct trickle_srv {
    int lfd;
    int port;
    const char *script;
    int pieces;
    int send_pieces;
    int gap_ms;
    char body[TRICKLE_LEN];
    atomic_int accepted;
    atomic_int requests;   /* requests read, on all connections */
    uint64_t last_send_ns; /* 't', 's': when the last byte went out; read after trickle_stop() */
    uint64_t closed_ns;    /* 's': when the client closed the connection, 0 if it did not */
    pthread_t th;
};

/* Serve one request on fd; false when none came (the client closed the connection). */
static bool trickle_serve(struct trickle_srv *t, int fd, char how)
{
    char req[4096];
    read_headers(fd, req, sizeof(req));
    if (!strstr(req, "\r\n\r\n"))
        return false;
    atomic_fetch_add(&t->requests, 1);
    if (how == '5')
        return send(fd, R503, strlen(R503), MSG_NOSIGNAL) > 0;
    char head[256];
    int hl = snprintf(head, sizeof(head),
                      "HTTP/1.1 206 Partial Content\r\nETag: \"t\"\r\nContent-Range: bytes 0-%d/%d"
                      "\r\nContent-Length: %d\r\n%s\r\n",
                      TRICKLE_LEN - 1, TRICKLE_LEN, TRICKLE_LEN,
                      how == 'k' ? "" : "Connection: close\r\n");
    bool ok = send(fd, head, (size_t)hl, MSG_NOSIGNAL) == hl;
    if (how == 'f' || how == 'k')
        return ok && send(fd, t->body, TRICKLE_LEN, MSG_NOSIGNAL) == TRICKLE_LEN;
    t->last_send_ns = tier_now_mono_ns();
    size_t piece = TRICKLE_LEN / (size_t)t->pieces;
    int send_pieces = how == 's' ? t->send_pieces : t->pieces;
    for (int i = 0; ok && i < send_pieces; i++) {
        if (i > 0)
            tier_sleep_ms((uint64_t)t->gap_ms); /* the pace under test, not a synchronisation */
        ok = send(fd, t->body + (size_t)i * piece, piece, MSG_NOSIGNAL) == (ssize_t)piece;
        t->last_send_ns = tier_now_mono_ns();
    }
    if (ok && how == 's') {
        /* Silent from here on: wait for the client to give up and close. */
        struct pollfd c = {.fd = fd, .events = POLLIN};
        char b[64];
        if (poll(&c, 1, 30000) == 1 && read(fd, b, sizeof(b)) <= 0)
            t->closed_ns = tier_now_mono_ns();
    }
    return ok;
}

static void *trickle_main(void *arg)
{
    struct trickle_srv *t = arg;
    for (int i = 0; t->script[i]; i++) {
        struct pollfd p = {.fd = t->lfd, .events = POLLIN};
        if (poll(&p, 1, 30000) != 1)
            break;
        int fd = accept(t->lfd, NULL, NULL);
        if (fd < 0)
            break;
        atomic_fetch_add(&t->accepted, 1);
        while (trickle_serve(t, fd, t->script[i]) && t->script[i] == 'k')
            ;
        shutdown(fd, SHUT_RDWR);
        close(fd);
    }
    return NULL;
}

static void trickle_start(struct trickle_srv *t, const char *script, int pieces, int send_pieces,
                          int gap_ms)
{
    memset(t, 0, sizeof(*t));
    atomic_init(&t->accepted, 0);
    atomic_init(&t->requests, 0);
    t->script = script;
    t->pieces = pieces;
    t->send_pieces = send_pieces;
    t->gap_ms = gap_ms;
    for (size_t i = 0; i < TRICKLE_LEN; i++)
        t->body[i] = (char)(i * 7 + (i >> 8));
    t->lfd = loopback_listen(&t->port);
    assert_int_equal(pthread_create(&t->th, NULL, trickle_main, t), 0);
}

static void trickle_stop(struct trickle_srv *t)
{
    pthread_join(t->th, NULL);
    close(t->lfd);
}

/* request_timeout 300 ms; 5 attempts and 4 backoffs of at most 2 s: the call's deadline is 9.5 s,
 * room for a slow transfer and a retry on a loaded machine. */
static struct backend *trickle_backend(const struct trickle_srv *t, char *ep, size_t epsz)
{
    snprintf(ep, epsz, "http://127.0.0.1:%d", t->port);
    struct s3_backend_config c = {.endpoint = ep,
                                  .bucket = "bkt",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = 4,
                                  .retry_base_ms = 2000,
                                  .retry_max_ms = 2000,
                                  .connect_timeout_ms = 300,
                                  .request_timeout_ms = 300};
    struct backend *be = NULL;
    assert_int_equal(backend_s3_open(&c, &be), 0);
    return be;
}

/* A 64 KiB answer trickled in 32 pieces 50 ms apart takes about 1.55 s, five times the 300 ms
 * request_timeout, but never goes 300 ms without a byte: the read succeeds in its first attempt
 * (one connection) with every byte right. An attempt bounded as a whole by request_timeout would
 * be cut off at 300 ms, every time, and the call would fail. */
static void test_slow_transfer_not_cut_off(void **state)
{
    (void)state;
    static struct trickle_srv t; /* 64 KiB: off the stack */
    trickle_start(&t, "t", 32, 0, 50);
    char ep[64];
    struct backend *be = trickle_backend(&t, ep, sizeof(ep));
    char *buf = malloc(TRICKLE_LEN);
    assert_non_null(buf);
    uint64_t t0 = tier_now_mono_ns();
    ssize_t n = backend_read(be, NULL, "k", 0, buf, TRICKLE_LEN, NULL, NULL);
    uint64_t ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    backend_free(be);
    trickle_stop(&t);
    if (n != TRICKLE_LEN)
        fail_msg("read: %zd %s", n, tier_err_msg());
    assert_memory_equal(buf, t.body, TRICKLE_LEN);
    free(buf);
    assert_true(ms >= 31 * 50); /* the transfer was as slow as scripted */
    assert_int_equal(atomic_load(&t.accepted), 1);
}

/* Headers and 4 of 32 pieces (100 ms apart), then silence: the attempt fails request_timeout
 * (300 ms) after the last byte came, not 300 ms after it started, and closes the connection (a
 * half-read answer is never reused); the retry, on a new connection answered at once, reads every
 * byte right. */
static void test_stalled_transfer_retried(void **state)
{
    (void)state;
    static struct trickle_srv t;
    trickle_start(&t, "sf", 32, 4, 100);
    char ep[64];
    struct backend *be = trickle_backend(&t, ep, sizeof(ep));
    char *buf = malloc(TRICKLE_LEN);
    assert_non_null(buf);
    uint64_t t0 = tier_now_mono_ns();
    ssize_t n = backend_read(be, NULL, "k", 0, buf, TRICKLE_LEN, NULL, NULL);
    backend_free(be);
    trickle_stop(&t);
    if (n != TRICKLE_LEN)
        fail_msg("read: %zd %s", n, tier_err_msg());
    assert_memory_equal(buf, t.body, TRICKLE_LEN);
    free(buf);
    assert_int_equal(atomic_load(&t.accepted), 2);
    assert_true(t.last_send_ns >= t0 + 3 * 100 * TIER_NS_PER_MS); /* the pieces were paced */
    assert_true(t.closed_ns != 0);                                /* the client hung up */
    /* The stall counts from the last byte: the client, which saw it after it was sent, gave up
     * never less than 300 ms after it, and not much more (loosely: a loaded machine wakes late). */
    assert_true(t.closed_ns >= t.last_send_ns + 300 * TIER_NS_PER_MS);
    assert_true(t.closed_ns < t.last_send_ns + (300 + LOAD_SLACK_MS) * TIER_NS_PER_MS);
}

/* Attempts driven on each handle's own multi handle still reuse connections: three reads one
 * after the other go over one keep-alive connection. */
static void test_connection_reused(void **state)
{
    (void)state;
    static struct trickle_srv t;
    trickle_start(&t, "k", 32, 0, 0);
    char ep[64];
    struct backend *be = trickle_backend(&t, ep, sizeof(ep));
    char *buf = malloc(TRICKLE_LEN);
    assert_non_null(buf);
    for (int i = 0; i < 3; i++) {
        memset(buf, 0, TRICKLE_LEN);
        ssize_t n = backend_read(be, NULL, "k", 0, buf, TRICKLE_LEN, NULL, NULL);
        if (n != TRICKLE_LEN)
            fail_msg("read %d: %zd %s", i, n, tier_err_msg());
        assert_memory_equal(buf, t.body, TRICKLE_LEN);
    }
    free(buf);
    backend_free(be); /* closes the connection: the server's loop ends */
    trickle_stop(&t);
    assert_int_equal(atomic_load(&t.requests), 3);
    assert_int_equal(atomic_load(&t.accepted), 1);
}

/* Two 503s, then headers and one piece of the body, then silence: the last attempt fails with
 * -ETIMEDOUT 300 ms after that piece, well before the call's deadline (3 attempts of 300 ms and
 * 2 backoffs of at most 10 ms: 920 ms), and the call says why. */
static void test_stalled_transfer_times_out(void **state)
{
    (void)state;
    static struct trickle_srv t;
    trickle_start(&t, "55s", 32, 1, 0);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", t.port);
    struct s3_backend_config c = {.endpoint = ep,
                                  .bucket = "bkt",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = 2,
                                  .retry_base_ms = 10,
                                  .retry_max_ms = 10,
                                  .connect_timeout_ms = 300,
                                  .request_timeout_ms = 300};
    struct backend *be = NULL;
    assert_int_equal(backend_s3_open(&c, &be), 0);
    char *buf = malloc(TRICKLE_LEN);
    assert_non_null(buf);
    uint64_t t0 = tier_now_mono_ns();
    ssize_t n = backend_read(be, NULL, "k", 0, buf, TRICKLE_LEN, NULL, NULL);
    uint64_t end = tier_now_mono_ns();
    backend_free(be);
    trickle_stop(&t);
    free(buf);
    assert_int_equal(n, -ETIMEDOUT);
    assert_int_equal(atomic_load(&t.accepted), 3);
    assert_non_null(strstr(tier_err_msg(), "(after 3 attempts): no byte sent or received for "
                                           "300 ms — the endpoint did not answer in time"));
    assert_true(end >= t.last_send_ns + 300 * TIER_NS_PER_MS);
    assert_true(end < t0 + (920 + LOAD_SLACK_MS) * TIER_NS_PER_MS);
}

struct pool_call {
    struct backend *be;
    pthread_barrier_t *go;
    int rc;
    uint64_t ms;
    char msg[512];
};

static void *pool_call_main(void *arg)
{
    struct pool_call *a = arg;
    struct backend_stat st;
    pthread_barrier_wait(a->go);
    uint64_t t0 = tier_now_mono_ns();
    a->rc = backend_stat(a->be, NULL, "k", &st);
    a->ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    snprintf(a->msg, sizeof(a->msg), "%s", tier_err_msg());
    return NULL;
}

/* More concurrent calls than pooled connections on an endpoint that accepts and never answers:
 * the calls waiting for a handle give up at the call's deadline (the retry policy's worst case,
 * 300 ms here) with "no connection free", instead of waiting for the handles in front of them.
 * The check is on what each call reports, not on how long it took, so a loaded machine cannot
 * fail it: 12 calls start together on 2 handles, and a handle is held for a whole 300 ms attempt,
 * so for every waiter to get one in time, the waiters' own starts would have to spread over more
 * than a second. A pool_take() that waited without bound would hand every waiter a handle in the
 * end (each then fails its attempt at the deadline with "did not answer in time"), and no call
 * would say "no connection free". The waiters' times have only a lower bound: none gives up
 * before its deadline. */
static void test_pool_wait_bounded(void **state)
{
    (void)state;
    struct blackhole bh;
    assert_int_equal(bh_start(&bh), 0);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", bh.port);
    struct s3_backend_config c = {.endpoint = ep,
                                  .bucket = "bkt",
                                  .path_style = true,
                                  .access_key = "ak",
                                  .secret_key = "sk",
                                  .max_retries = -1,
                                  .connect_timeout_ms = 300,
                                  .request_timeout_ms = 300,
                                  .max_connections = 2};
    struct backend *be = NULL;
    assert_int_equal(backend_s3_open(&c, &be), 0);
    enum { N = 12 };
    struct pool_call a[N];
    pthread_t th[N];
    pthread_barrier_t go;
    assert_int_equal(pthread_barrier_init(&go, NULL, N), 0);
    for (int i = 0; i < N; i++) {
        a[i].be = be;
        a[i].go = &go;
        assert_int_equal(pthread_create(&th[i], NULL, pool_call_main, &a[i]), 0);
    }
    int no_handle = 0, timed_out = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, -ETIMEDOUT);
        if (strstr(a[i].msg, "no connection free within 300 ms (all 2 in use)")) {
            no_handle++;
            assert_true(a[i].ms >= 300); /* waited until its deadline, not less */
        } else if (strstr(a[i].msg, "did not answer in time")) {
            timed_out++; /* held a handle: its one attempt ran out */
        } else {
            fail_msg("call %d: unexpected message: %s", i, a[i].msg);
        }
        assert_true(a[i].ms < 300 + LOAD_SLACK_MS); /* hangs on neither the pool nor the socket */
    }
    assert_true(timed_out >= 2); /* the two handles were used */
    assert_true(no_handle >= 1); /* the calls that never got a handle say so */
    assert_int_equal(pthread_barrier_destroy(&go), 0);
    backend_free(be);
    bh_stop(&bh);
}

/* ListObjectVersions (tests/fuzz/corpus/s3_xml/versions.xml): the current version of each key,
 * with its id; an older version and a key whose current version is a delete marker are left
 * out; the next page's token is "KEY\nVERSION_ID". */
static const char k_versions[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListVersionsResult xmlns=\"http://s3.amazonaw"
    "s.com/doc/2006-03-01/\"><Name>b</Name><Prefix>pfx/</Prefix><KeyMarker></KeyMarker><Versi"
    "onIdMarker></VersionIdMarker><NextKeyMarker>pfx/c</NextKeyMarker><NextVersionIdMarker>v9"
    "</NextVersionIdMarker><MaxKeys>3</MaxKeys><IsTruncated>true</IsTruncated><Version><Key>p"
    "fx/a</Key><VersionId>v2</VersionId><IsLatest>true</IsLatest><LastModified>2026-12-01T10:"
    "00:00.000Z</LastModified><ETag>\"e2\"</ETag><Size>5</Size></Version><Version><Key>pfx/a<"
    "/Key><VersionId>v1</VersionId><IsLatest>false</IsLatest><LastModified>2026-11-01T10:00:0"
    "0.000Z</LastModified><ETag>\"e1\"</ETag><Size>4</Size></Version><DeleteMarker><Key>pfx/b"
    "</Key><VersionId>v5</VersionId><IsLatest>true</IsLatest><LastModified>2026-12-01T11:00:0"
    "0.000Z</LastModified></DeleteMarker><Version><Key>pfx/b</Key><VersionId>v4</VersionId><I"
    "sLatest>false</IsLatest><LastModified>2026-11-01T10:00:00.000Z</LastModified><ETag>\"e4"
    "\"</ETag><Size>7</Size></Version><Version><Key>pfx/c</Key><VersionId>null</VersionId><IsL"
    "atest>true</IsLatest><LastModified>2026-10-01T10:00:00.000Z</LastModified><ETag>\"e9\"</"
    "ETag><Size>9</Size></Version></ListVersionsResult>";

static void test_versions_parse(void **state)
{
    (void)state;
    struct backend_list_page pg;
    assert_int_equal(s3_xml_parse_versions(k_versions, strlen(k_versions), "pfx/", &pg), 0);
    assert_int_equal(pg.n, 2);
    assert_string_equal(pg.entries[0].name, "a");
    assert_string_equal(pg.entries[0].version_id, "v2");
    assert_string_equal(pg.entries[0].etag, "\"e2\"");
    assert_int_equal(pg.entries[0].size_bytes, 5);
    assert_string_equal(pg.entries[1].name, "c");
    assert_string_equal(pg.entries[1].version_id, "null");
    assert_string_equal(pg.next_token, "pfx/c\nv9");
    backend_list_page_fini(&pg);
    /* a version without an id is refused, and leaves the page empty */
    static const char bad[] = "<ListVersionsResult><Version><Key>pfx/a</Key><IsLatest>true"
                              "</IsLatest></Version></ListVersionsResult>";
    assert_int_equal(s3_xml_parse_versions(bad, strlen(bad), "pfx/", &pg), -EPROTO);
    assert_int_equal(pg.n, 0);
    /* a listing root is not a versions document */
    static const char other[] = "<ListBucketResult></ListBucketResult>";
    assert_int_equal(s3_xml_parse_versions(other, strlen(other), "", &pg), -EPROTO);
}

/* A scripted answer of 200 with body (into buf). */
static const char *ok_answer(char *buf, size_t sz, const char *body)
{
    snprintf(buf, sz, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             strlen(body), body);
    return buf;
}

/* The two listings share their request (list_request): ListObjectVersions's query is sorted and
 * carries the token's key and version id apart; an answer neither parser reads fails with a
 * message naming the listing. */
static void test_srv_list_versions_wire(void **state)
{
    (void)state;
    char a[3][512];
    const char *resp[] = {
        ok_answer(a[0], sizeof(a[0]),
                  "<ListVersionsResult><IsTruncated>false</IsTruncated><Version><Key>d/b</Key>"
                  "<VersionId>v2</VersionId><IsLatest>true</IsLatest><ETag>\"e\"</ETag><Size>1"
                  "</Size></Version></ListVersionsResult>"),
        ok_answer(a[1], sizeof(a[1]), "<Nonsense></Nonsense>"),
        ok_answer(a[2], sizeof(a[2]), "<Nonsense></Nonsense>"),
    };
    struct script_srv s;
    srv_start(&s, resp, 3);
    char ep[64];
    struct backend *be = srv_backend(&s, ep, sizeof(ep));
    struct backend_list_page pg;
    assert_int_equal(backend_list_versions(be, NULL, "d/", "d/a\nv1", 2, &pg), 0);
    assert_int_equal(pg.n, 1);
    assert_string_equal(pg.entries[0].name, "d/b");
    assert_string_equal(pg.entries[0].version_id, "v2");
    backend_list_page_fini(&pg);
    assert_int_equal(backend_list(be, NULL, "d/", "/", NULL, 0, &pg), -EPROTO);
    assert_non_null(
        strstr(tier_err_msg(), "S3 list bkt/d/: the server's ListObjectsV2 response could not"));
    backend_list_page_fini(&pg);
    assert_int_equal(backend_list_versions(be, NULL, "d/", NULL, 0, &pg), -EPROTO);
    assert_non_null(strstr(tier_err_msg(), "S3 list bkt/d/?versions: the server's "
                                           "ListObjectVersions response could not be parsed"));
    backend_list_page_fini(&pg);
    backend_free(be);
    assert_int_equal(srv_stop(&s), 3);
    assert_non_null(strstr(s.reqs[0], "GET /bkt/?key-marker=d%2Fa&max-keys=2&prefix=d%2F"
                                      "&version-id-marker=v1&versions= HTTP/1.1"));
    assert_non_null(
        strstr(s.reqs[1], "GET /bkt/?delimiter=%2F&list-type=2&max-keys=1000&prefix=d%2F HTTP"));
    assert_non_null(strstr(s.reqs[2], "GET /bkt/?max-keys=1000&prefix=d%2F&versions= HTTP/1.1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_truncated),
        cmocka_unit_test(test_versions_parse),
        cmocka_unit_test(test_uploads_parse),
        cmocka_unit_test(test_list_empty),
        cmocka_unit_test(test_list_escaped_and_prefixes),
        cmocka_unit_test(test_list_url_encoded),
        cmocka_unit_test(test_list_strip_prefix_object),
        cmocka_unit_test(test_list_malformed),
        cmocka_unit_test(test_error_parse),
        cmocka_unit_test(test_find_text),
        cmocka_unit_test(test_xml_escape),
        cmocka_unit_test(test_errno_map),
        cmocka_unit_test(test_retry_caps),
        cmocka_unit_test(test_retry_jitter_bounds),
        cmocka_unit_test(test_retry_run),
        cmocka_unit_test(test_retry_statuses),
        cmocka_unit_test(test_uri_encode),
        cmocka_unit_test(test_time_parse),
        cmocka_unit_test(test_resp_headers),
        cmocka_unit_test(test_open_config),
        cmocka_unit_test(test_dead_endpoint_bounded),
        cmocka_unit_test(test_srv_retry_then_ok),
        cmocka_unit_test(test_srv_partial_read_restarts),
        cmocka_unit_test(test_srv_no_retry_on_4xx),
        cmocka_unit_test(test_srv_slowdown_exhausted),
        cmocka_unit_test(test_srv_bounded_body),
        cmocka_unit_test(test_srv_wire_format),
        cmocka_unit_test(test_srv_list_versions_wire),
        cmocka_unit_test(test_srv_virtual_host),
        cmocka_unit_test(test_hung_endpoint_times_out),
        cmocka_unit_test(test_slow_transfer_not_cut_off),
        cmocka_unit_test(test_stalled_transfer_retried),
        cmocka_unit_test(test_connection_reused),
        cmocka_unit_test(test_stalled_transfer_times_out),
        cmocka_unit_test(test_plain_http_warning),
        cmocka_unit_test(test_pool_wait_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
