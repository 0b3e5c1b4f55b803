/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3.c - the S3 backend (cold tier): backend.h on libcurl, signed with curl's own SigV4
 * (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3"), against AWS S3 or Ceph RGW.
 *
 * Callers are the dispatchers in backend.c (keys already validated) from any number of threads.
 *
 * DESIGN - concurrency: a pool of curl easy handles, not one shared curl multi. Every backend
 * call is one blocking request on the caller's thread (backend.h promises exactly that), so the
 * simplest shape that lets N threads have N requests in flight is: a thread takes a free easy
 * handle (creating one while fewer than max_connections exist, otherwise blocking on a condition
 * variable until one is returned or the call's deadline passes: -ETIMEDOUT), performs, and gives
 * it back. All handles share one CURLSH for the DNS cache, the connection cache and TLS sessions
 * (with a mutex per shared data kind, the share lock callbacks), so connections opened by one
 * thread are reused by the next; handles are also kept alive between requests, which keeps their
 * own connections warm. A shared curl multi would need an event thread and hand-offs for what is,
 * for our callers, blocking work. No lock is held across a request: the pool lock guards only the
 * free list. Each pooled easy handle has a curl multi handle of its own, which drives its requests
 * on the caller's thread (what curl_easy_perform() does inside), so that an attempt can watch its
 * progress between polls (drive(): the stall bound below).
 *
 * Requests: stat = HEAD; read = ranged GET (If-Match when asked; 412 -> -ESTALE; 416 -> 0 bytes)
 * written straight into the caller's buffer by a bounded write callback (a server sending more
 * than asked fails the call, never overflows); list = ListObjectsV2 parsed by s3_xml.c; put = PUT;
 * multipart = POST ?uploads / PUT ?partNumber&uploadId / POST ?uploadId / DELETE ?uploadId;
 * delete = HEAD then DELETE, because S3 answers 204 even for a missing key and backend.h promises
 * -ENOENT (a key deleted by someone else between the two requests still returns 0).
 *
 * Retries: every request goes through retry_run() (retry.c) with the configured policy: retried on
 * 5xx, 503 SlowDown, 429, connection errors and timeouts, never on other 4xx. An attempt fails
 * when it cannot connect within connect_timeout_ms, or when it moves no byte (request or response,
 * headers or body) for request_timeout_ms: a stall bound, not a bound on the whole attempt, so a
 * transfer that is slow but moving (a 1 MiB range on a busy 100 Mbit/s link) is never killed and
 * started again from scratch. The whole call (waiting for a pooled connection included) is bounded
 * by its deadline, retry_worst_case_ms(policy, request_timeout_ms), and so is every attempt in it
 * (curl's own CURLOPT_TIMEOUT_MS is what is left of that deadline): a dead or hung endpoint fails
 * each attempt after request_timeout_ms and the call within that bound however many threads queue
 * for connections, and a slow transfer can use the rest of the call's time. A read retried after a
 * partial body starts again at the beginning of its range (the write callback rewinds to the
 * buffer's start).
 *
 * Transport: only http and https (CURLOPT_PROTOCOLS_STR and CURLOPT_REDIR_PROTOCOLS_STR on every
 * request; other endpoint schemes are refused at open); a plain http:// endpoint that is not
 * loopback is logged as a warning at open, since bodies are UNSIGNED-PAYLOAD and the session
 * token travels in a header.
 *
 * Errors: failures are mapped to errno in s3_errno_map() (s3_err.c); the S3 code and message go
 * to tier_err_set(), e.g. "S3 GET bkt/a/b: 403 SignatureDoesNotMatch: ... - check the secret key".
 * Connection failures are -EIO, curl timeouts -ETIMEDOUT.
 *
 * S3 has no directories: stat of a key that is only a prefix of other keys is -ENOENT and is_dir
 * is never set by stat; listings report common prefixes (is_prefix) and callers that want
 * implicit directories list "key/" (the FUSE layer does).
 *
 * Keys: the config prefix (a '/' is appended if missing) is prepended to every key and stripped
 * from listed keys, so callers only see keys relative to the backend root. Each path segment is
 * percent-encoded (SigV4 canonical form, '/' kept). Query strings are built already sorted and
 * encoded, since curl 7.88 signs the query string as given.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "tiers/backend.h"
#include "tiers/retry.h"
#include "tiers/s3_int.h"

/* Reads of at least this size get a receive buffer of S3_RECV_BUFFER_BYTES (curl's default is
 * 16 KiB; its maximum 512 KiB). */
#define S3_BIG_READ_BYTES (1u << 20)
#define S3_RECV_BUFFER_BYTES (512L * 1024)
/* Longest single wait of drive() for socket activity before it looks at the clocks again. */
#define S3_POLL_SLICE_MS 100

/* A pooled handle: an easy handle and the multi handle that drives it (drive()). */
struct s3_handle {
    CURL *easy;
    CURLM *multi;
};

struct s3_backend {
    struct backend base;
    /* Immutable after open. */
    char *url_base;   /* "http://host:port/bucket" (path style) or "http://bucket.host:port" */
    char *bucket;     /* for messages */
    char *prefix;     /* "" or ending in '/' */
    char *sigv4;      /* "aws:amz:REGION:s3" */
    char *access_key; /* owned copies */
    char *secret_key;
    char *token; /* session token (x-amz-security-token) or NULL */
    struct retry_policy retry;
    long connect_timeout_ms;
    long request_timeout_ms;
    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST]; /* one per shared data kind */

    /* Handle pool, guarded by pool_lock. */
    pthread_mutex_t pool_lock;
    pthread_cond_t pool_cond;
    struct s3_handle *free_handles; /* stack of idle handles, max_handles slots */
    int nfree;
    int ncreated;
    int max_handles;
};

/* ---- handle pool -------------------------------------------------------------------------- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
    (void)h;
    (void)access;
    struct s3_backend *s = ud;
    pthread_mutex_lock(&s->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
    (void)h;
    struct s3_backend *s = ud;
    pthread_mutex_unlock(&s->share_locks[data]);
}

static void handle_fini(struct s3_handle *h)
{
    if (h->multi)
        curl_multi_cleanup(h->multi);
    if (h->easy)
        curl_easy_cleanup(h->easy);
    h->multi = NULL;
    h->easy = NULL;
}

/* Take an idle handle, or create one while fewer than max_handles exist, else wait for one until
 * deadline_ns (CLOCK_MONOTONIC): 0 with *out, -ETIMEDOUT, or -ENOMEM. */
static int pool_take(struct s3_backend *s, uint64_t deadline_ns, struct s3_handle *out)
{
    struct s3_handle h = {0};
    int rc = 0;
    struct timespec dl = {.tv_sec = (time_t)(deadline_ns / 1000000000ULL),
                          .tv_nsec = (long)(deadline_ns % 1000000000ULL)};
    pthread_mutex_lock(&s->pool_lock);
    while (s->nfree == 0 && s->ncreated >= s->max_handles && rc == 0)
        rc = pthread_cond_timedwait(&s->pool_cond, &s->pool_lock, &dl);
    if (s->nfree > 0) {
        h = s->free_handles[--s->nfree];
    } else if (s->ncreated < s->max_handles) {
        h.easy = curl_easy_init();
        h.multi = h.easy ? curl_multi_init() : NULL;
        if (h.multi)
            s->ncreated++;
        else
            handle_fini(&h);
    }
    pthread_mutex_unlock(&s->pool_lock);
    if (!h.easy)
        return rc == ETIMEDOUT ? -ETIMEDOUT : -ENOMEM;
    *out = h;
    return 0;
}

static void pool_give(struct s3_backend *s, struct s3_handle h)
{
    pthread_mutex_lock(&s->pool_lock);
    s->free_handles[s->nfree++] = h;
    pthread_cond_signal(&s->pool_cond);
    pthread_mutex_unlock(&s->pool_lock);
}

/* ---- one request --------------------------------------------------------------------------- */

struct s3_req {
    /* in */
    const char *method; /* GET HEAD PUT POST DELETE */
    const char *key;    /* key relative to the backend root, or NULL for the bucket */
    const char *query;  /* canonical (sorted, encoded) query string, or NULL */
    const void *body;   /* PUT/POST body */
    size_t body_len;
    char *out; /* GET: the caller's buffer for a 2xx body */
    size_t out_cap;
    bool ranged;
    uint64_t range_off;
    const char *if_match;
    bool if_none_match; /* PUT: If-None-Match: * (create only) */
    size_t xml_max;     /* bound on a 2xx body kept in resp (list, mpu), 0 = discard */
    /* out, reset by every attempt */
    long status;
    size_t out_len;
    size_t skip; /* bytes of a 200 (range ignored) body to skip before out */
    size_t body_pos;
    bool overflow;
    struct dynbuf resp;         /* error document or XML result */
    struct s3_resp_headers hdr; /* ETag, Last-Modified, lengths of the last response */
    size_t upload_pos;
    uint64_t deadline_ns; /* CLOCK_MONOTONIC end of the whole call, retries included */
    /* context */
    struct s3_backend *s;
    CURL *h;  /* the pooled easy handle */
    CURLM *m; /* its multi handle */
    struct curl_slist *hdrs;
    char *url;
    char errbuf[CURL_ERROR_SIZE];
    CURLcode cc;
    struct s3_error s3err;
};

static bool is_2xx(long status)
{
    return status >= 200 && status <= 299;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct s3_req *r = ud;
    s3_resp_header_line(&r->hdr, p, sz * n);
    return sz * n;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    struct s3_req *r = ud;
    size_t len = sz * n;
    if (r->status == 0)
        curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
    if (is_2xx(r->status) && r->out) {
        /* The caller's buffer: never write past out_cap. A 200 to a ranged request (the server
         * ignored Range) carries the whole object: skip up to the range start. */
        size_t pos = r->body_pos;
        r->body_pos += len;
        const char *src = p;
        size_t avail = len;
        if (r->status == 200 && pos < r->skip) {
            size_t drop = r->skip - pos < avail ? r->skip - pos : avail;
            src += drop;
            avail -= drop;
        }
        size_t room = r->out_cap - r->out_len;
        if (avail > room) {
            if (r->status == 206) {
                r->overflow = true;
                return 0; /* more than the range we asked for: fail, do not overflow */
            }
            avail = room; /* a whole-object 200: drop the bytes past our range */
        }
        memcpy(r->out + r->out_len, src, avail);
        r->out_len += avail;
        return len;
    }
    if (is_2xx(r->status) && r->xml_max == 0)
        return len; /* a body we do not need */
    if (dynbuf_append(&r->resp, p, len) != 0) {
        r->overflow = true;
        return 0;
    }
    return len;
}

static size_t on_upload(char *p, size_t sz, size_t n, void *ud)
{
    struct s3_req *r = ud;
    size_t room = sz * n;
    size_t left = r->body_len - r->upload_pos;
    size_t k = left < room ? left : room;
    if (k)
        memcpy(p, (const char *)r->body + r->upload_pos, k);
    r->upload_pos += k;
    return k;
}

static int seek_upload(void *ud, curl_off_t off, int origin)
{
    struct s3_req *r = ud;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > r->body_len)
        return CURL_SEEKFUNC_FAIL;
    r->upload_pos = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

static int build_url(struct s3_backend *s, const char *key, const char *query, char **out)
{
    struct dynbuf b;
    dynbuf_init(&b, 16384);
    int rc = dynbuf_append(&b, s->url_base, strlen(s->url_base));
    if (!rc)
        rc = dynbuf_append(&b, "/", 1);
    if (!rc && key) {
        rc = s3_uri_encode(&b, s->prefix, true);
        if (!rc)
            rc = s3_uri_encode(&b, key, true);
    }
    if (!rc && query && *query) {
        rc = dynbuf_append(&b, "?", 1);
        if (!rc)
            rc = dynbuf_append(&b, query, strlen(query));
    }
    if (rc) {
        dynbuf_fini(&b);
        return rc == -E2BIG ? -ENAMETOOLONG : rc;
    }
    *out = dynbuf_take(&b, NULL);
    return 0;
}

/* Append "name: value", or "name:" (which makes curl drop a default header) when value is NULL. */
static int add_hdr(struct curl_slist **l, const char *name, const char *v)
{
    char line[2048];
    if ((size_t)snprintf(line, sizeof(line), "%s:%s%s", name, v ? " " : "", v ? v : "") >=
        sizeof(line))
        return -EINVAL;
    struct curl_slist *n = curl_slist_append(*l, line);
    if (!n)
        return -ENOMEM;
    *l = n;
    return 0;
}

/* Set every option for one attempt on a reset handle. */
static int setup(struct s3_req *r)
{
    struct s3_backend *s = r->s;
    CURL *h = r->h;
    int rc = 0;
    curl_easy_reset(h);
    curl_slist_free_all(r->hdrs);
    r->hdrs = NULL;
    /* No "Expect:" override here: curl 7.88 would sign the empty header it then does not send
     * (SignatureDoesNotMatch). RGW answers 100-continue promptly, so the default is harmless.
     * curl 7.88 signs the payload as the hash of an empty body unless this header names it, and
     * sends no x-amz-content-sha256 at all, which RGW and S3 reject. UNSIGNED-PAYLOAD is what curl
     * uses for the signature when the header is present (bodies are then protected by TCP/TLS,
     * not by the signature). */
    rc = add_hdr(&r->hdrs, "x-amz-content-sha256", "UNSIGNED-PAYLOAD");
    if (!rc && s->token)
        rc = add_hdr(&r->hdrs, "x-amz-security-token", s->token);
    if (!rc && r->if_match)
        rc = add_hdr(&r->hdrs, "If-Match", r->if_match);
    if (!rc && r->if_none_match)
        rc = add_hdr(&r->hdrs, "If-None-Match", "*");
    if (!rc && r->ranged) {
        char range[96];
        snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, r->range_off,
                 r->range_off + r->out_cap - 1);
        rc = add_hdr(&r->hdrs, "Range", range);
    }
    if (!rc && strcmp(r->method, "POST") == 0 && r->body_len)
        rc = add_hdr(&r->hdrs, "Content-Type", "application/xml");
    if (rc)
        return rc;
    curl_easy_setopt(h, CURLOPT_URL, r->url);
    curl_easy_setopt(h, CURLOPT_SHARE, s->share);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* No attempt outlives the call's deadline (a late attempt gets what is left); within it, an
     * attempt runs as long as bytes keep moving (drive() ends a stalled one). */
    uint64_t now = tier_now_mono_ns();
    long left_ms = r->deadline_ns > now ? (long)((r->deadline_ns - now) / 1000000ULL) : 0;
    if (left_ms < 1)
        left_ms = 1;
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     s->connect_timeout_ms < left_ms ? s->connect_timeout_ms : left_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, left_ms);
    /* Only HTTP(S), also for any redirect (none are followed today): an endpoint or a Location
     * naming file://, ftp://, ... is refused by curl, never fetched. */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(h, CURLOPT_USERNAME, s->access_key);
    curl_easy_setopt(h, CURLOPT_PASSWORD, s->secret_key);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, r->hdrs);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    /* Larger receive chunks: fewer recv() calls and callbacks for multi-MiB ranges. */
    if (r->out && r->out_cap >= S3_BIG_READ_BYTES)
        curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)S3_RECV_BUFFER_BYTES);
    if (strcmp(r->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(r->method, "PUT") == 0) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(h, CURLOPT_READDATA, r);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seek_upload);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, r);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
    } else if (strcmp(r->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    } else if (strcmp(r->method, "DELETE") == 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    return 0;
}

/* Bytes an attempt has moved so far: request and response, headers and bodies. */
static curl_off_t moved_bytes(CURL *h)
{
    curl_off_t down = 0, up = 0;
    long hdr = 0, req = 0;
    curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down);
    curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
    curl_easy_getinfo(h, CURLINFO_HEADER_SIZE, &hdr);
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &req);
    return down + up + (curl_off_t)hdr + (curl_off_t)req;
}

/* Perform the request set up on r->h, on its own multi handle, on this thread. It ends as curl
 * ends it (done, failed, or CURLOPT_TIMEOUT_MS at the call's deadline), or when no byte has moved
 * for request_timeout_ms (a stall, counted from the start of the attempt, so a connection or an
 * answer that never comes is one too; connecting, a TLS handshake included, counts no byte until
 * the request goes out): then CURLE_OPERATION_TIMEDOUT with a message in errbuf,
 * the same failure as an attempt that curl timed out. The progress counters are read between
 * polls of at most S3_POLL_SLICE_MS, so a stall is seen within a few milliseconds of its bound;
 * curl's own tools for this are too coarse (CURLOPT_LOW_SPEED_TIME counts whole seconds, and the
 * progress callback runs about once a second while a transfer is idle). */
static CURLcode drive(struct s3_req *r)
{
    CURLMcode mc = curl_multi_add_handle(r->m, r->h);
    if (mc != CURLM_OK)
        return mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
    uint64_t stall_ns = (uint64_t)r->s->request_timeout_ms * 1000000ULL;
    uint64_t last_ns = tier_now_mono_ns(); /* when a byte last moved */
    curl_off_t moved = 0;
    CURLcode cc = CURLE_OK;
    bool stalled = false;
    for (;;) {
        int running = 0;
        mc = curl_multi_perform(r->m, &running);
        if (mc != CURLM_OK) {
            cc = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
            break;
        }
        CURLMsg *msg;
        int queued;
        bool done = false;
        while ((msg = curl_multi_info_read(r->m, &queued)) != NULL) {
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == r->h) {
                cc = msg->data.result;
                done = true;
            }
        }
        if (done)
            break;
        if (!running) { /* ended without a result: never seen, but not a reason to spin */
            cc = CURLE_FAILED_INIT;
            break;
        }
        uint64_t now = tier_now_mono_ns();
        curl_off_t sofar = moved_bytes(r->h);
        if (sofar != moved) {
            moved = sofar;
            last_ns = now;
        } else if (now - last_ns >= stall_ns) {
            stalled = true;
            break;
        }
        uint64_t wait_ns = last_ns + stall_ns - now;
        if (r->deadline_ns > now && r->deadline_ns - now < wait_ns)
            wait_ns = r->deadline_ns - now;
        uint64_t wait_ms = (wait_ns + 999999ULL) / 1000000ULL; /* up, so no busy loop at the end */
        if (wait_ms > S3_POLL_SLICE_MS)
            wait_ms = S3_POLL_SLICE_MS;
        if (wait_ms < 1)
            wait_ms = 1;
        mc = curl_multi_poll(r->m, NULL, 0, (int)wait_ms, NULL);
        if (mc != CURLM_OK) {
            cc = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
            break;
        }
    }
    curl_multi_remove_handle(r->m, r->h);
    if (stalled) {
        snprintf(r->errbuf, sizeof(r->errbuf), "no byte sent or received for %ld ms",
                 r->s->request_timeout_ms);
        cc = CURLE_OPERATION_TIMEDOUT;
    }
    return cc;
}

static ssize_t attempt(void *ud, int n, bool *retryable)
{
    struct s3_req *r = ud;
    r->status = 0;
    r->out_len = 0; /* a retried read starts again at the beginning of its range */
    r->body_pos = 0;
    r->upload_pos = 0;
    r->overflow = false;
    s3_resp_headers_reset(&r->hdr);
    r->errbuf[0] = '\0';
    memset(&r->s3err, 0, sizeof(r->s3err));
    dynbuf_reset(&r->resp);
    if (n > 0 && tier_now_mono_ns() >= r->deadline_ns) {
        /* The backoff ran into the call's deadline: report the last attempt's failure. */
        *retryable = false;
        r->cc = CURLE_OPERATION_TIMEDOUT;
        return -ETIMEDOUT;
    }
    int rc = setup(r);
    if (rc)
        return rc;
    r->cc = drive(r);
    curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->cc == CURLE_WRITE_ERROR && r->overflow) {
        *retryable = false;
        return is_2xx(r->status) && r->out ? -EIO : -EPROTO;
    }
    if (r->cc == CURLE_OK && !is_2xx(r->status) && r->resp.len)
        s3_xml_parse_error(r->resp.data, r->resp.len, &r->s3err);
    if (r->cc == CURLE_OK && is_2xx(r->status) && r->resp.len && strcmp(r->method, "POST") == 0) {
        /* CompleteMultipartUpload may fail with 200 and an Error document. */
        if (s3_xml_parse_error(r->resp.data, r->resp.len, &r->s3err) != 0)
            memset(&r->s3err, 0, sizeof(r->s3err));
    }
    rc = s3_errno_map(r->cc, r->status, r->s3err.code, retryable);
    /* The scheduler's breaker sees every failed attempt and may stop the retries. */
    if (rc < 0 && *retryable && !backend_attempt_failed(&r->s->base, rc, r->cc == CURLE_OK))
        *retryable = false;
    return rc;
}

/* Perform r with retries; on failure leave the user message in tier_err_msg(). */
static ssize_t perform(struct s3_backend *s, struct s3_req *r)
{
    r->s = s;
    dynbuf_init(&r->resp, r->xml_max ? r->xml_max : 64 * 1024);
    int rc = build_url(s, r->key, r->query, &r->url);
    if (rc) {
        tier_err_set("S3 %s %s/%s: key too long for a URL", r->method, s->bucket,
                     r->key ? r->key : "");
        return rc;
    }
    /* The whole call, waiting for a handle included, ends within the retry policy's worst case,
     * which tierd sizes to [daemon] backend_timeout. */
    uint64_t budget_ms = retry_worst_case_ms(&s->retry, (uint64_t)s->request_timeout_ms);
    r->deadline_ns = tier_now_mono_ns() + budget_ms * 1000000ULL;
    struct s3_handle handle;
    rc = pool_take(s, r->deadline_ns, &handle);
    if (rc) {
        free(r->url);
        r->url = NULL;
        if (rc == -ETIMEDOUT)
            tier_err_set("S3 %s %s/%s%s: no connection free within %llu ms (all %d in use) — the "
                         "endpoint is slow or not answering",
                         r->method, s->bucket, s->prefix, r->key ? r->key : "",
                         (unsigned long long)budget_ms, s->max_handles);
        return rc;
    }
    r->h = handle.easy;
    r->m = handle.multi;
    int attempts = 0;
    ssize_t res = retry_run(&s->retry, NULL, attempt, r, &attempts);
    curl_slist_free_all(r->hdrs);
    r->hdrs = NULL;
    pool_give(s, handle);
    r->h = NULL;
    r->m = NULL;
    free(r->url);
    r->url = NULL;
    if (res >= 0)
        return res;
    const char *what = r->key ? r->key : "";
    char tries[48] = "";
    if (attempts > 1)
        snprintf(tries, sizeof(tries), " (after %d attempts)", attempts);
    if (r->cc != CURLE_OK) {
        tier_err_set("S3 %s %s/%s%s%s: %s%s — %s", r->method, s->bucket, s->prefix, what, tries,
                     r->errbuf[0] ? r->errbuf : curl_easy_strerror(r->cc),
                     r->overflow ? " (response larger than expected)" : "",
                     res == -ETIMEDOUT ? "the endpoint did not answer in time"
                                       : "is the endpoint reachable?");
    } else {
        const char *hint = s3_err_hint(r->s3err.code, r->status);
        tier_err_set("S3 %s %s/%s%s%s: %ld%s%s%s%s%s%s", r->method, s->bucket, s->prefix, what,
                     tries, r->status, r->s3err.code[0] ? " " : "", r->s3err.code,
                     r->s3err.message[0] ? ": " : "", r->s3err.message, hint[0] ? " — " : "", hint);
    }
    return res;
}

static void req_fini(struct s3_req *r)
{
    dynbuf_fini(&r->resp);
}

/* ---- operations ---------------------------------------------------------------------------- */

static struct s3_backend *S(struct backend *be)
{
    return (struct s3_backend *)be;
}

static void fill_stat(const struct s3_req *r, uint64_t size, struct backend_stat *st)
{
    memset(st, 0, sizeof(*st));
    st->size_bytes = size;
    st->mtime_ns = r->hdr.mtime_ns;
    if (r->hdr.etag[0])
        tier_strlcpy(st->etag, r->hdr.etag, sizeof(st->etag));
    else /* backend.h: never empty; a server without ETags still gets a usable tag */
        snprintf(st->etag, sizeof(st->etag), "\"s%" PRIu64 "-m%" PRId64 "\"", size,
                 r->hdr.mtime_ns);
}

static int head_q(struct s3_backend *s, const char *key, const char *query, const char *if_match,
                  struct backend_stat *st)
{
    struct s3_req r = {.method = "HEAD", .key = key, .query = query, .if_match = if_match};
    ssize_t rc = perform(s, &r);
    if (rc == 0 && st)
        fill_stat(&r, r.hdr.have_length ? r.hdr.content_length : 0, st);
    req_fini(&r);
    return (int)rc;
}

static int head(struct s3_backend *s, const char *key, const char *if_match,
                struct backend_stat *st)
{
    return head_q(s, key, NULL, if_match, st);
}

static int s3_stat(struct backend *be, const char *key, struct backend_stat *st)
{
    struct backend_stat tmp;
    int rc = head(S(be), key, NULL, &tmp);
    if (rc == 0)
        *st = tmp;
    return rc;
}

/* GET of a byte range of key (query: NULL, or "versionId=..." for one version). */
static ssize_t read_q(struct s3_backend *s, const char *key, const char *query, uint64_t off,
                      void *buf, size_t len, const char *if_match, struct backend_stat *st)
{
    if (len == 0) {
        /* No byte range can express an empty read: check the version with a HEAD. */
        struct backend_stat tmp;
        int rc = head_q(s, key, query, if_match, &tmp);
        if (rc == 0 && st)
            *st = tmp;
        return rc;
    }
    struct s3_req r = {.method = "GET",
                       .key = key,
                       .query = query,
                       .out = buf,
                       .out_cap = len,
                       .ranged = true,
                       .range_off = off,
                       .skip = (size_t)off,
                       .if_match = if_match};
    ssize_t rc = perform(s, &r);
    if (rc == -ERANGE) {
        /* 416: the offset is at or past the end of the object, which reads 0 bytes. */
        req_fini(&r);
        struct backend_stat tmp;
        int hrc = head_q(s, key, query, if_match, &tmp);
        if (hrc)
            return hrc;
        if (off < tmp.size_bytes) {
            tier_err_set("S3 GET %s/%s%s: 416 for offset %" PRIu64 " inside a %" PRIu64
                         "-byte object",
                         s->bucket, s->prefix, key, off, tmp.size_bytes);
            return -EIO;
        }
        if (st)
            *st = tmp;
        return 0;
    }
    if (rc == 0 && if_match && *if_match && r.hdr.etag[0] && strcmp(r.hdr.etag, if_match) != 0) {
        /* A server or proxy that ignores If-Match must not make us mix two versions. */
        tier_err_set("S3 GET %s/%s%s: object changed (ETag %s, expected %s)", s->bucket, s->prefix,
                     key, r.hdr.etag, if_match);
        rc = -ESTALE;
    }
    if (rc == 0) {
        uint64_t size = r.hdr.have_total ? r.hdr.total_size : (uint64_t)r.body_pos;
        if (st)
            fill_stat(&r, size, st);
        rc = (ssize_t)r.out_len;
    }
    req_fini(&r);
    return rc;
}

static ssize_t s3_read(struct backend *be, const char *key, uint64_t off, void *buf, size_t len,
                       const char *if_match, struct backend_stat *st)
{
    return read_q(S(be), key, NULL, off, buf, len, if_match, st);
}

/* Append "name=value" to a query being built in sorted order. */
static int q_add(struct dynbuf *q, const char *name, const char *value)
{
    int rc = q->len ? dynbuf_append(q, "&", 1) : 0;
    if (!rc)
        rc = dynbuf_append(q, name, strlen(name));
    if (!rc)
        rc = dynbuf_append(q, "=", 1);
    if (!rc && value)
        rc = s3_uri_encode(q, value, false);
    return rc;
}

/* A list call's query parameters, added to q in sorted order (SigV4 in curl 7.88 signs the query
 * as written): token and delimiter as the call got them (NULL: none), mk its max-keys and full
 * its prefix under the backend's. 0 or a negative errno. */
typedef int (*list_query_fn)(struct dynbuf *q, const char *token, const char *delimiter,
                             const char *mk, const char *full);
/* The parser of the answer (s3_xml.c). */
typedef int (*list_parse_fn)(const char *xml, size_t len, const char *strip,
                             struct backend_list_page *page);

/* One page of a bucket listing (s3_list, s3_list_versions): query builds the request's query,
 * parse reads the answer into page; suffix ("?versions") and what ("ListObjectsV2") name the
 * request in the message of an answer that could not be parsed. */
static int list_request(struct s3_backend *s, const char *prefix, const char *delimiter,
                        const char *token, size_t max_keys, list_query_fn query,
                        list_parse_fn parse, const char *suffix, const char *what,
                        struct backend_list_page *page)
{
    struct dynbuf q, full;
    dynbuf_init(&q, 8192);
    dynbuf_init(&full, 4096);
    char mk[24];
    snprintf(mk, sizeof(mk), "%zu", max_keys ? (max_keys > 1000 ? 1000 : max_keys) : 1000);
    int rc = dynbuf_printf(&full, "%s%s", s->prefix, prefix);
    if (!rc)
        rc = query(&q, token, delimiter, mk, full.data);
    if (rc) {
        dynbuf_fini(&q);
        dynbuf_fini(&full);
        return rc == -E2BIG ? -ENAMETOOLONG : rc;
    }
    struct s3_req r = {.method = "GET", .query = q.data, .xml_max = S3_XML_MAX_BYTES};
    ssize_t prc = perform(s, &r);
    if (prc == 0) {
        prc = parse(r.resp.data, r.resp.len, s->prefix, page);
        if (prc)
            tier_err_set("S3 list %s/%s%s: the server's %s response could not be parsed", s->bucket,
                         full.data, suffix, what);
    }
    req_fini(&r);
    dynbuf_fini(&q);
    dynbuf_fini(&full);
    return (int)prc;
}

/* ListObjectsV2 */
static int list_query(struct dynbuf *q, const char *token, const char *delimiter, const char *mk,
                      const char *full)
{
    int rc = token ? q_add(q, "continuation-token", token) : 0;
    if (!rc && delimiter)
        rc = q_add(q, "delimiter", delimiter);
    if (!rc)
        rc = q_add(q, "list-type", "2");
    if (!rc)
        rc = q_add(q, "max-keys", mk);
    if (!rc)
        rc = q_add(q, "prefix", full);
    return rc;
}

static int s3_list(struct backend *be, const char *prefix, const char *delimiter, const char *token,
                   size_t max_keys, struct backend_list_page *page)
{
    return list_request(S(be), prefix, delimiter, token, max_keys, list_query, s3_xml_parse_list,
                        "", "ListObjectsV2", page);
}

/* ---- object versions (bucket versioning) -------------------------------------------------- */

static ssize_t s3_read_version(struct backend *be, const char *key, const char *version_id,
                               uint64_t off, void *buf, size_t len, const char *if_match,
                               struct backend_stat *st)
{
    struct dynbuf q;
    dynbuf_init(&q, BACKEND_VERSION_ID_MAX * 3 + 16);
    int rc = q_add(&q, "versionId", version_id);
    if (rc) {
        dynbuf_fini(&q);
        return rc == -E2BIG ? -ENAMETOOLONG : rc;
    }
    ssize_t n = read_q(S(be), key, q.data, off, buf, len, if_match, st);
    dynbuf_fini(&q);
    return n;
}

/* GET ?versioning: Enabled, or Suspended (older versions are kept either way). */
static int s3_versioning(struct backend *be, bool *keeps)
{
    struct s3_backend *s = S(be);
    struct s3_req r = {.method = "GET", .query = "versioning=", .xml_max = 65536};
    ssize_t rc = perform(s, &r);
    *keeps = false;
    if (rc == 0) {
        char st[32] = "";
        int frc = s3_xml_find_text(r.resp.data, r.resp.len, "VersioningConfiguration", "Status", st,
                                   sizeof(st));
        /* no Status element: versioning was never enabled */
        *keeps = frc == 0 && (strcmp(st, "Enabled") == 0 || strcmp(st, "Suspended") == 0);
    }
    req_fini(&r);
    return (int)rc;
}

/* ListObjectVersions (no delimiter): the token is "KEY\nVERSION_ID" (s3_xml_parse_versions). */
static int versions_query(struct dynbuf *q, const char *token, const char *delimiter,
                          const char *mk, const char *full)
{
    (void)delimiter;
    const char *nl = token ? strrchr(token, '\n') : NULL;
    char *tk = token ? strndup(token, nl ? (size_t)(nl - token) : strlen(token)) : NULL;
    if (token && !tk)
        return -ENOMEM;
    int rc = tk ? q_add(q, "key-marker", tk) : 0;
    if (!rc)
        rc = q_add(q, "max-keys", mk);
    if (!rc)
        rc = q_add(q, "prefix", full);
    if (!rc && nl && nl[1])
        rc = q_add(q, "version-id-marker", nl + 1);
    if (!rc)
        rc = q_add(q, "versions", NULL);
    free(tk);
    return rc;
}

static int s3_list_versions(struct backend *be, const char *prefix, const char *token,
                            size_t max_keys, struct backend_list_page *page)
{
    return list_request(S(be), prefix, NULL, token, max_keys, versions_query, s3_xml_parse_versions,
                        "?versions", "ListObjectVersions", page);
}

static int s3_put(struct backend *be, const char *key, const void *buf, size_t len, char *etag_out)
{
    struct s3_req r = {.method = "PUT", .key = key, .body = buf, .body_len = len};
    ssize_t rc = perform(S(be), &r);
    if (rc == 0 && etag_out)
        tier_strlcpy(etag_out, r.hdr.etag, BACKEND_ETAG_MAX);
    req_fini(&r);
    return (int)rc;
}

/* PUT with If-None-Match: * ; 412 Precondition Failed (-ESTALE) is -EEXIST. A retry after a lost
 * reply may find its own first attempt and answer 412 too: callers that must know tell their
 * object from another writer's by its content (the dataset manifest carries a commit id). */
static int s3_put_new(struct backend *be, const char *key, const void *buf, size_t len,
                      char *etag_out)
{
    struct s3_backend *s = S(be);
    struct s3_req r = {
        .method = "PUT", .key = key, .body = buf, .body_len = len, .if_none_match = true};
    ssize_t rc = perform(s, &r);
    if (rc == 0 && etag_out)
        tier_strlcpy(etag_out, r.hdr.etag, BACKEND_ETAG_MAX);
    if (rc == -ESTALE) {
        tier_err_set("S3 PUT %s/%s%s: the object exists already (412)", s->bucket, s->prefix, key);
        rc = -EEXIST;
    } else if (rc != 0 && r.status == 409) {
        /* AWS: ConditionalRequestConflict, another conditional PUT of the key is in progress */
        tier_err_set("S3 PUT %s/%s%s: another writer is creating it (409)", s->bucket, s->prefix,
                     key);
        rc = -EEXIST;
    }
    req_fini(&r);
    return (int)rc;
}

static int s3_mpu_create(struct backend *be, const char *key, char **upload_id)
{
    struct s3_backend *s = S(be);
    struct s3_req r = {.method = "POST", .key = key, .query = "uploads=", .xml_max = 65536};
    ssize_t rc = perform(s, &r);
    if (rc == 0) {
        char id[1024];
        rc = s3_xml_find_text(r.resp.data, r.resp.len, "InitiateMultipartUploadResult", "UploadId",
                              id, sizeof(id));
        if (rc == 0 && id[0] == '\0')
            rc = -EPROTO;
        if (rc) {
            tier_err_set("S3 POST %s/%s%s?uploads: no UploadId in the response", s->bucket,
                         s->prefix, key);
            rc = -EPROTO;
        } else {
            *upload_id = strdup(id);
            if (!*upload_id)
                rc = -ENOMEM;
        }
    }
    req_fini(&r);
    return (int)rc;
}

static int upload_query(struct dynbuf *q, int part_no, const char *upload_id)
{
    int rc = 0;
    if (part_no > 0) {
        char pn[16];
        snprintf(pn, sizeof(pn), "%d", part_no);
        rc = q_add(q, "partNumber", pn);
    }
    if (!rc)
        rc = q_add(q, "uploadId", upload_id);
    return rc == -E2BIG ? -EINVAL : rc;
}

static int s3_mpu_put_part(struct backend *be, const char *key, const char *upload_id, int part_no,
                           const void *buf, size_t len, char *etag_out)
{
    struct dynbuf q;
    dynbuf_init(&q, 4096);
    int rc = upload_query(&q, part_no, upload_id);
    if (rc) {
        dynbuf_fini(&q);
        return rc;
    }
    struct s3_req r = {.method = "PUT", .key = key, .query = q.data, .body = buf, .body_len = len};
    rc = (int)perform(S(be), &r);
    if (rc == 0 && etag_out)
        tier_strlcpy(etag_out, r.hdr.etag, BACKEND_ETAG_MAX);
    req_fini(&r);
    dynbuf_fini(&q);
    return rc;
}

static int s3_mpu_complete(struct backend *be, const char *key, const char *upload_id,
                           const struct backend_part *parts, size_t nparts, char *etag_out)
{
    struct s3_backend *s = S(be);
    struct dynbuf q, body;
    dynbuf_init(&q, 4096);
    dynbuf_init(&body, 2u << 20);
    int rc = upload_query(&q, 0, upload_id);
    if (!rc)
        rc = dynbuf_printf(&body, "<CompleteMultipartUpload>");
    for (size_t i = 0; !rc && i < nparts; i++) {
        rc = dynbuf_printf(&body, "<Part><PartNumber>%d</PartNumber><ETag>", parts[i].number);
        if (!rc)
            rc = s3_xml_escape(&body, parts[i].etag);
        if (!rc)
            rc = dynbuf_printf(&body, "</ETag></Part>");
    }
    if (!rc)
        rc = dynbuf_printf(&body, "</CompleteMultipartUpload>");
    if (rc) {
        dynbuf_fini(&q);
        dynbuf_fini(&body);
        return rc == -E2BIG ? -EINVAL : rc;
    }
    struct s3_req r = {.method = "POST",
                       .key = key,
                       .query = q.data,
                       .body = body.data,
                       .body_len = body.len,
                       .xml_max = 65536};
    rc = (int)perform(s, &r);
    if (rc == 0 && etag_out) {
        etag_out[0] = '\0';
        if (s3_xml_find_text(r.resp.data, r.resp.len, "CompleteMultipartUploadResult", "ETag",
                             etag_out, BACKEND_ETAG_MAX) != 0)
            etag_out[0] = '\0';
    }
    req_fini(&r);
    dynbuf_fini(&q);
    dynbuf_fini(&body);
    if (rc == 0 && etag_out && etag_out[0] == '\0') {
        /* RGW answers <ETag></ETag>: ask for it (a writer racing us could make this newer). */
        struct backend_stat st;
        if (head(s, key, NULL, &st) == 0)
            tier_strlcpy(etag_out, st.etag, BACKEND_ETAG_MAX);
    }
    return rc;
}

static int s3_mpu_abort(struct backend *be, const char *key, const char *upload_id)
{
    struct dynbuf q;
    dynbuf_init(&q, 4096);
    int rc = upload_query(&q, 0, upload_id);
    if (rc) {
        dynbuf_fini(&q);
        return rc;
    }
    struct s3_req r = {.method = "DELETE", .key = key, .query = q.data};
    rc = (int)perform(S(be), &r);
    req_fini(&r);
    dynbuf_fini(&q);
    return rc;
}

/* ListMultipartUploads with prefix = the key, every page; uploads of longer keys are skipped. */
static int s3_mpu_list(struct backend *be, const char *key, struct backend_mpu **out, size_t *n)
{
    struct s3_backend *s = S(be);
    struct backend_mpu *all = NULL;
    size_t nall = 0;
    char *kmark = NULL, *umark = NULL;
    struct dynbuf q, full;
    dynbuf_init(&full, BACKEND_KEY_MAX + 1024);
    int rc = dynbuf_printf(&full, "%s%s", s->prefix, key);
    for (int page = 0; rc == 0; page++) {
        if (page == 1000) { /* 1,000 pages of uploads of one key: the server is not moving on */
            tier_err_set("S3 list uploads %s/%s: more than 1000 pages", s->bucket, full.data);
            rc = -EPROTO;
            break;
        }
        dynbuf_init(&q, 8192);
        /* SigV4 in curl 7.88 signs the query as written: keep the parameters sorted by name. */
        if (kmark)
            rc = q_add(&q, "key-marker", kmark);
        if (!rc)
            rc = q_add(&q, "prefix", full.data);
        if (!rc && umark)
            rc = q_add(&q, "upload-id-marker", umark);
        if (!rc)
            rc = q_add(&q, "uploads", NULL);
        if (rc) {
            dynbuf_fini(&q);
            rc = rc == -E2BIG ? -ENAMETOOLONG : rc;
            break;
        }
        struct s3_req r = {.method = "GET", .query = q.data, .xml_max = S3_XML_MAX_BYTES};
        rc = (int)perform(s, &r);
        struct backend_mpu *v = NULL;
        size_t nv = 0;
        free(kmark);
        free(umark);
        kmark = umark = NULL;
        if (rc == 0) {
            rc = s3_xml_parse_uploads(r.resp.data, r.resp.len, s->prefix, key, &v, &nv, &kmark,
                                      &umark);
            if (rc)
                tier_err_set("S3 list uploads %s/%s: the response could not be parsed", s->bucket,
                             full.data);
        }
        req_fini(&r);
        dynbuf_fini(&q);
        /* S3 lists uploads in key order: once the next page starts past our key, it has none */
        if (rc == 0 && kmark && strcmp(kmark, full.data) != 0) {
            free(kmark);
            kmark = NULL;
        }
        if (rc == 0 && nv) {
            struct backend_mpu *m = realloc(all, (nall + nv) * sizeof(*m));
            if (!m) {
                rc = -ENOMEM;
                backend_mpu_list_free(v, nv);
                break;
            }
            all = m;
            memcpy(all + nall, v, nv * sizeof(*v));
            nall += nv;
            free(v);
        } else {
            backend_mpu_list_free(v, nv);
        }
        if (rc || !kmark)
            break;
    }
    free(kmark);
    free(umark);
    dynbuf_fini(&full);
    if (rc) {
        backend_mpu_list_free(all, nall);
        return rc;
    }
    *out = all;
    *n = nall;
    return 0;
}

static int s3_del(struct backend *be, const char *key)
{
    struct s3_backend *s = S(be);
    /* S3 answers 204 for a missing key too; backend.h promises -ENOENT, hence the HEAD. */
    int rc = head(s, key, NULL, NULL);
    if (rc)
        return rc;
    struct s3_req r = {.method = "DELETE", .key = key};
    rc = (int)perform(s, &r);
    req_fini(&r);
    return rc;
}

static void s3_destroy(struct backend *be)
{
    struct s3_backend *s = S(be);
    for (int i = 0; i < s->nfree; i++)
        handle_fini(&s->free_handles[i]);
    if (s->share)
        curl_share_cleanup(s->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&s->share_locks[i]);
    pthread_mutex_destroy(&s->pool_lock);
    pthread_cond_destroy(&s->pool_cond);
    free(s->free_handles);
    free(s->url_base);
    free(s->bucket);
    free(s->prefix);
    free(s->sigv4);
    free(s->access_key);
    if (s->secret_key) {
        explicit_bzero(s->secret_key, strlen(s->secret_key));
        free(s->secret_key);
    }
    free(s->token);
    free(s->base.name);
    free(s);
}

static const struct backend_ops s3_ops = {
    .type = "s3",
    .stat = s3_stat,
    .read = s3_read,
    .list = s3_list,
    .put = s3_put,
    .put_new = s3_put_new,
    .mpu_create = s3_mpu_create,
    .mpu_put_part = s3_mpu_put_part,
    .mpu_complete = s3_mpu_complete,
    .mpu_abort = s3_mpu_abort,
    .mpu_list = s3_mpu_list,
    .del = s3_del,
    .destroy = s3_destroy,
    .versioning = s3_versioning,
    .list_versions = s3_list_versions,
    .read_version = s3_read_version,
};

/* ---- construction -------------------------------------------------------------------------- */

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc;

static void curl_init_once(void)
{
    g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static const char *pick(const char *cfg, const char *env)
{
    if (cfg)
        return cfg;
    const char *v = getenv(env);
    return v && *v ? v : NULL;
}

/* "scheme://host[:port][/]" -> path style "scheme://host:port/bucket", virtual host style
 * "scheme://bucket.host:port". */
static int make_url_base(const struct s3_backend_config *cfg, char **out)
{
    const char *ep = cfg->endpoint;
    const char *sep = strstr(ep, "://");
    if (!sep || sep == ep || sep[3] == '\0') {
        tier_err_set("S3 endpoint '%s' is not a URL like http://127.0.0.1:7480", ep);
        return -EINVAL;
    }
    size_t eplen = strlen(ep);
    while (eplen > 0 && ep[eplen - 1] == '/')
        eplen--;
    size_t slen = (size_t)(sep - ep);
    if (!(slen == 4 && strncasecmp(ep, "http", 4) == 0) &&
        !(slen == 5 && strncasecmp(ep, "https", 5) == 0)) {
        tier_err_set("S3 endpoint '%s' uses scheme '%.*s'; only http:// and https:// are allowed",
                     ep, (int)slen, ep);
        return -EINVAL;
    }
    if (strchr(sep + 3, '/') && strchr(sep + 3, '/') < ep + eplen) {
        tier_err_set("S3 endpoint '%s' must not contain a path", ep);
        return -EINVAL;
    }
    int n;
    if (cfg->path_style)
        n = asprintf(out, "%.*s/%s", (int)eplen, ep, cfg->bucket);
    else
        n = asprintf(out, "%.*s%s.%.*s", (int)(sep + 3 - ep), ep, cfg->bucket,
                     (int)(eplen - (size_t)(sep + 3 - ep)), sep + 3);
    return n < 0 ? -ENOMEM : 0;
}

/* Whether a plain http:// endpoint goes to this host only (localhost, 127.0.0.0/8, ::1), where
 * no network sees the traffic. ep is already checked by make_url_base. */
static bool endpoint_is_loopback(const char *ep)
{
    const char *h = strstr(ep, "://") + 3;
    size_t n;
    if (*h == '[') {
        h++;
        n = strcspn(h, "]");
    } else {
        n = strcspn(h, ":/");
    }
    if ((n == 9 && strncasecmp(h, "localhost", 9) == 0) || (n == 3 && strncmp(h, "::1", 3) == 0))
        return true;
    if (n < 4 || strncmp(h, "127.", 4) != 0)
        return false;
    for (size_t i = 4; i < n; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || h[i] == '.'))
            return false;
    return true;
}

static bool bucket_name_ok(const char *b)
{
    size_t n = strlen(b);
    if (n < 3 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              (c >= 'A' && c <= 'Z') || c == '_'))
            return false;
    }
    return true;
}

int backend_s3_open(const struct s3_backend_config *cfg, struct backend **out)
{
    if (!cfg || !cfg->endpoint || !cfg->bucket) {
        tier_err_set("S3 backend needs an endpoint and a bucket");
        return -EINVAL;
    }
    if (!bucket_name_ok(cfg->bucket)) {
        tier_err_set("S3 bucket name '%s' is not valid (3-63 letters, digits, '-', '.')",
                     cfg->bucket);
        return -EINVAL;
    }
    const char *ak = pick(cfg->access_key, "AWS_ACCESS_KEY_ID");
    const char *sk = pick(cfg->secret_key, "AWS_SECRET_ACCESS_KEY");
    const char *tok = pick(cfg->session_token, "AWS_SESSION_TOKEN");
    if (!ak || !sk) {
        tier_err_set("S3 backend '%s': no credentials; set access_key and secret_key, or "
                     "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                     cfg->name ? cfg->name : cfg->bucket);
        return -EINVAL;
    }
    const char *prefix = cfg->prefix ? cfg->prefix : "";
    if (*prefix) {
        size_t plen = strlen(prefix);
        bool dir = prefix[plen - 1] == '/';
        if (backend_key_valid(prefix, plen, dir) != 0)
            return -EINVAL;
    }
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init_rc != CURLE_OK) {
        tier_err_set("curl_global_init failed: %s", curl_easy_strerror(g_curl_init_rc));
        return -EIO;
    }

    struct s3_backend *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    int rc = -ENOMEM;
    s->base.ops = &s3_ops;
    pthread_mutex_init(&s->pool_lock, NULL);
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC); /* pool_take's deadline */
    pthread_cond_init(&s->pool_cond, &cattr);
    pthread_condattr_destroy(&cattr);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&s->share_locks[i], NULL);
    s->max_handles = cfg->max_connections > 0 ? cfg->max_connections : 16;
    s->retry.max_retries = cfg->max_retries > 0 ? cfg->max_retries : (cfg->max_retries < 0 ? 0 : 4);
    s->retry.base_ms = cfg->retry_base_ms ? cfg->retry_base_ms : 100;
    s->retry.max_ms = cfg->retry_max_ms ? cfg->retry_max_ms : 5000;
    s->connect_timeout_ms = (long)(cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 3000);
    s->request_timeout_ms = (long)(cfg->request_timeout_ms ? cfg->request_timeout_ms : 30000);

    s->base.name = strdup(cfg->name ? cfg->name : "s3");
    s->bucket = strdup(cfg->bucket);
    s->access_key = strdup(ak);
    s->secret_key = strdup(sk);
    s->free_handles = calloc((size_t)s->max_handles, sizeof(*s->free_handles));
    if (!s->base.name || !s->bucket || !s->access_key || !s->secret_key || !s->free_handles)
        goto fail;
    size_t plen = strlen(prefix);
    if (asprintf(&s->prefix, "%s%s", prefix, plen && prefix[plen - 1] != '/' ? "/" : "") < 0) {
        s->prefix = NULL;
        goto fail;
    }
    if (asprintf(&s->sigv4, "aws:amz:%s:s3", cfg->region ? cfg->region : "us-east-1") < 0) {
        s->sigv4 = NULL;
        goto fail;
    }
    if (tok && !(s->token = strdup(tok)))
        goto fail;
    rc = make_url_base(cfg, &s->url_base);
    if (rc)
        goto fail;
    if (strncasecmp(cfg->endpoint, "http://", 7) == 0 && !endpoint_is_loopback(cfg->endpoint))
        log_warn("S3 backend '%s': endpoint %s is plain http:// to a host that is not loopback: "
                 "requests, object data and the session token cross the network unencrypted "
                 "(payloads are sent UNSIGNED-PAYLOAD); use https://",
                 s->base.name, cfg->endpoint);
    rc = -ENOMEM;
    s->share = curl_share_init();
    if (!s->share)
        goto fail;
    curl_share_setopt(s->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(s->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(s->share, CURLSHOPT_USERDATA, s);
    curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    if (curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK)
        log_warn("S3 backend '%s': this libcurl cannot share connections; each handle keeps its "
                 "own",
                 s->base.name);
    *out = &s->base;
    return 0;
fail:
    s3_destroy(&s->base);
    return rc;
}
