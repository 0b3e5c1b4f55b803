/* SPDX-License-Identifier: Apache-2.0 */
/* peer.c - the peer block-read transport (peer.h): the endpoint on libmicrohttpd and the client on
 * libcurl; the protocol's pure parts are peer_proto.c's.
 *
 * Server: MHD with a thread per connection and an internal polling thread, on a socket bound
 * here (so that port 0 works and peer_server_port() knows the port). A request is answered at
 * its end (a GET has no body; one with a body is refused at its head): the query and headers are
 * checked, then may_serve, then the serve callback fills a malloc'd buffer that MHD frees once
 * sent. The counters are atomics; nothing else is shared between connection threads.
 *
 * Client: a free list of curl easy handles under a mutex (a handle is taken for one request and
 * given back, so its connections stay alive for the next request to the same peer). Each request
 * writes the body straight into the caller's buffer, collects X-Tierd-Sum and X-Tierd-Auth in its
 * header callback, and maps every outcome to one enum peer_fail, counted. No lock is held across
 * a request. */
#include "cluster/peer.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "cluster/peer_proto.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/listen.h"
#include "common/strutil.h"

static void stat_add(uint64_t *c, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static uint64_t stat_load(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* ---- the endpoint ---------------------------------------------------------------------------- */

struct peer_server {
    struct MHD_Daemon *mhd;
    uint16_t port;
    uint8_t *secret; /* secret_len bytes, wiped at stop */
    size_t secret_len;
    char *cert_pem, *key_pem;
    peer_serve_fn serve;
    bool (*may_serve)(void *ud);
    void *ud;
    struct peer_server_stats st; /* atomics */
};

/* The markers of a request in *con_cls: its head seen (MHD calls again at its end), answered. */
static int seen, answered;
static char empty_body[1];

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, void *body, size_t len,
                             const char *sum_hex, const char *auth_hex)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, len ? body : empty_body, len ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (len)
            free(body);
        return MHD_NO;
    }
    if (sum_hex) {
        MHD_add_response_header(r, "X-Tierd-Sum", sum_hex);
        MHD_add_response_header(r, "X-Tierd-Auth", auth_hex);
        MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_status(struct MHD_Connection *c, unsigned status)
{
    return reply(c, status, NULL, 0, NULL, NULL);
}

/* The request's headers and its MAC over name: true when they hold (nonce filled). */
static bool request_authentic(struct peer_server *s, struct MHD_Connection *c, char mode,
                              enum tier_io_class cls, const char *name, size_t name_len,
                              uint8_t nonce[PEER_NONCE_LEN], const char **node)
{
    const char *v[3] = {NULL, NULL, NULL};
    size_t n[3] = {0, 0, 0};
    static const char *const hdr[3] = {"X-Tierd-Node", "X-Tierd-Nonce", "X-Tierd-Auth"};
    for (size_t i = 0; i < 3; i++)
        if (MHD_lookup_connection_value_n(c, MHD_HEADER_KIND, hdr[i], strlen(hdr[i]), &v[i],
                                          &n[i]) != MHD_YES)
            v[i] = NULL;
    uint8_t got[PEER_MAC_LEN], want[PEER_MAC_LEN];
    if (peer_req_headers_parse(v[0], n[0], v[1], n[1], v[2], n[2], nonce, got) != 0 ||
        peer_req_mac_mode(s->secret, s->secret_len, mode, cls, nonce, v[0], n[0], name, name_len,
                          want) != 0 ||
        !peer_mem_equal(got, want, PEER_MAC_LEN))
        return false;
    *node = v[0];
    return true;
}

/* Collects each query value into the struct peer_query (MHD has unescaped them). */
static enum MHD_Result query_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_len, const char *value, size_t value_len)
{
    (void)kind;
    peer_query_add(cls, key, key_len, value ? value : "", value ? value_len : 0);
    return MHD_YES;
}

/* The answer to a good request: 200 with the block, or the status of its failure. */
static enum MHD_Result serve_block(struct peer_server *s, struct MHD_Connection *c,
                                   const char *node, const struct peer_block *b,
                                   const uint8_t nonce[PEER_NONCE_LEN], const char *name,
                                   size_t name_len)
{
    if (b->block_size > PEER_BLOCK_SIZE_MAX) {
        stat_add(&s->st.mismatched, 1);
        return reply_status(c, MHD_HTTP_CONFLICT);
    }
    if (s->may_serve && !s->may_serve(s->ud)) {
        stat_add(&s->st.refused, 1);
        return reply_status(c, MHD_HTTP_SERVICE_UNAVAILABLE);
    }
    size_t len = peer_block_len(b);
    uint8_t *buf = malloc(len);
    if (!buf) {
        stat_add(&s->st.refused, 1);
        return reply_status(c, MHD_HTTP_SERVICE_UNAVAILABLE);
    }
    ssize_t got = s->serve(s->ud, node, b, buf, len);
    if (got != (ssize_t)len) {
        free(buf);
        unsigned status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        uint64_t *count = &s->st.errors;
        if (got == -ENOENT) {
            status = MHD_HTTP_NOT_FOUND;
            count = &s->st.not_found;
        } else if (got == -ESTALE) {
            status = MHD_HTTP_PRECONDITION_FAILED;
            count = &s->st.stale;
        } else if (got == -EXDEV) {
            status = MHD_HTTP_CONFLICT;
            count = &s->st.mismatched;
        } else if (got == -EAGAIN) {
            status = MHD_HTTP_SERVICE_UNAVAILABLE;
            count = &s->st.refused;
        }
        stat_add(count, 1);
        return reply_status(c, status);
    }
    uint8_t sum[PEER_SUM_LEN], mac[PEER_MAC_LEN];
    char sum_hex[2 * PEER_SUM_LEN + 1], mac_hex[2 * PEER_MAC_LEN + 1];
    if (b->warm) { /* warmed: held here now; none of it is sent */
        free(buf);
        buf = NULL;
        len = 0;
    }
    peer_sum(buf ? (const void *)buf : "", len, sum);
    if (peer_rsp_mac(s->secret, s->secret_len, nonce, name, name_len, sum, mac) != 0) {
        free(buf);
        stat_add(&s->st.errors, 1);
        return reply_status(c, MHD_HTTP_INTERNAL_SERVER_ERROR);
    }
    peer_hex_encode(sum, PEER_SUM_LEN, sum_hex);
    peer_hex_encode(mac, PEER_MAC_LEN, mac_hex);
    if (!buf) {
        stat_add(&s->st.warmed, 1);
        return reply(c, MHD_HTTP_NO_CONTENT, NULL, 0, sum_hex, mac_hex);
    }
    stat_add(&s->st.served, 1);
    stat_add(&s->st.served_bytes, len);
    return reply(c, MHD_HTTP_OK, buf, len, sum_hex, mac_hex);
}

/* A request with a body: Content-Length other than 0, or a Transfer-Encoding. */
static bool has_body(struct MHD_Connection *c)
{
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    return (cl && strcmp(cl, "0") != 0) ||
           MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
}

static enum MHD_Result answer(struct peer_server *s, struct MHD_Connection *c, const char *url);

/* MHD calls this at a request's head (answered there only when refused: an answer before the
 * request's end makes MHD close the connection), then at its end, where a good request is
 * answered so that the connection stays open for the next one. */
static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    struct peer_server *s = cls;
    if (*con_cls == NULL) {
        *con_cls = &seen;
        if (strcmp(method, "GET") != 0 ||
            (strcmp(url, "/v1/ping") != 0 && strcmp(url, "/v1/block") != 0) || has_body(c)) {
            *con_cls = &answered;
            stat_add(&s->st.bad_requests, 1);
            return reply_status(c, MHD_HTTP_BAD_REQUEST);
        }
        return MHD_YES;
    }
    if (*con_cls == &answered || *upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    *con_cls = &answered;
    return answer(s, c, url);
}

/* The answer to a GET of /v1/ping or /v1/block. */
static enum MHD_Result answer(struct peer_server *s, struct MHD_Connection *c, const char *url)
{
    uint8_t nonce[PEER_NONCE_LEN];
    const char *node = NULL;
    bool ping = strcmp(url, "/v1/ping") == 0;
    if (ping) {
        uint8_t sum[PEER_SUM_LEN], mac[PEER_MAC_LEN];
        char sum_hex[2 * PEER_SUM_LEN + 1], mac_hex[2 * PEER_MAC_LEN + 1];
        if (!request_authentic(s, c, 0, TIER_IO_TRAINING, "", 0, nonce, &node)) {
            stat_add(&s->st.auth_failures, 1);
            return reply_status(c, MHD_HTTP_UNAUTHORIZED);
        }
        peer_sum("", 0, sum);
        if (peer_rsp_mac(s->secret, s->secret_len, nonce, "", 0, sum, mac) != 0) {
            stat_add(&s->st.errors, 1);
            return reply_status(c, MHD_HTTP_INTERNAL_SERVER_ERROR);
        }
        peer_hex_encode(sum, PEER_SUM_LEN, sum_hex);
        peer_hex_encode(mac, PEER_MAC_LEN, mac_hex);
        return reply(c, MHD_HTTP_NO_CONTENT, NULL, 0, sum_hex, mac_hex);
    }
    struct peer_query *q = malloc(sizeof(*q));
    char *name = malloc(PEER_NAME_MAX + 1);
    struct peer_block b;
    enum MHD_Result ret;
    if (!q || !name) {
        stat_add(&s->st.refused, 1);
        ret = reply_status(c, MHD_HTTP_SERVICE_UNAVAILABLE);
        goto out;
    }
    peer_query_init(q);
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, query_value, q);
    int name_len = -EINVAL;
    if (peer_query_finish(q, &b) != 0 ||
        (name_len = peer_block_name(&b, name, PEER_NAME_MAX + 1)) < 0) {
        stat_add(&s->st.bad_requests, 1);
        ret = reply_status(c, MHD_HTTP_BAD_REQUEST);
        goto out;
    }
    if (!request_authentic(s, c, peer_block_mode(&b), b.cls, name, (size_t)name_len, nonce,
                           &node)) {
        stat_add(&s->st.auth_failures, 1);
        ret = reply_status(c, MHD_HTTP_UNAUTHORIZED);
        goto out;
    }
    ret = serve_block(s, c, node, &b, nonce, name, (size_t)name_len);
out:
    free(name);
    free(q);
    return ret;
}

int peer_server_start(const struct peer_server_conf *conf, struct peer_server **out)
{
    int rc = 0, fd = -1;
    if (!conf->secret || conf->secret_len < PEER_SECRET_MIN) {
        tier_err_set("peer endpoint: the cluster secret has %zu bytes, at least %d are needed",
                     conf->secret ? conf->secret_len : 0, PEER_SECRET_MIN);
        return -EINVAL;
    }
    if (!conf->serve || !conf->tls_cert != !conf->tls_key) {
        tier_err_set("peer endpoint: %s",
                     conf->serve ? "tls_cert and tls_key go together" : "no serve callback");
        return -EINVAL;
    }
    struct peer_server *s = calloc(1, sizeof(*s));
    if (!s || !(s->secret = malloc(conf->secret_len))) {
        free(s);
        return -ENOMEM;
    }
    memcpy(s->secret, conf->secret, conf->secret_len);
    s->secret_len = conf->secret_len;
    s->serve = conf->serve;
    s->may_serve = conf->may_serve;
    s->ud = conf->ud;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC;
    struct MHD_OptionItem opts[4];
    size_t n = 0;
    if (conf->tls_cert) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            rc = -ENOTSUP;
            tier_err_set("peer endpoint: TLS is configured but this libmicrohttpd has no TLS");
            goto fail;
        }
        rc = tier_read_pem("peer endpoint: tls_cert", conf->tls_cert, false, &s->cert_pem);
        if (rc == 0)
            rc = tier_read_pem("peer endpoint: tls_key", conf->tls_key, true, &s->key_pem);
        if (rc)
            goto fail;
        flags |= MHD_USE_TLS;
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->cert_pem};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->key_pem};
    }
    rc = tier_listen_tcp("peer endpoint: listen =", conf->listen, AF_INET, &fd, &s->port);
    if (rc)
        goto fail;
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, fd, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    unsigned limit = conf->max_connections ? conf->max_connections : 64;
    s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_CONNECTION_LIMIT, limit,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60, MHD_OPTION_ARRAY,
                              opts, MHD_OPTION_END);
    if (!s->mhd) {
        close(fd);
        rc = -EIO;
        tier_err_set("peer endpoint: cannot start the HTTP server on %s%s", conf->listen,
                     conf->tls_cert ? " (check the TLS certificate and key: PEM, a pair)" : "");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    peer_server_stop(s);
    return rc;
}

uint16_t peer_server_port(const struct peer_server *s)
{
    return s->port;
}

void peer_server_stats_get(struct peer_server *s, struct peer_server_stats *out)
{
    out->served = stat_load(&s->st.served);
    out->served_bytes = stat_load(&s->st.served_bytes);
    out->warmed = stat_load(&s->st.warmed);
    out->auth_failures = stat_load(&s->st.auth_failures);
    out->bad_requests = stat_load(&s->st.bad_requests);
    out->refused = stat_load(&s->st.refused);
    out->not_found = stat_load(&s->st.not_found);
    out->stale = stat_load(&s->st.stale);
    out->mismatched = stat_load(&s->st.mismatched);
    out->errors = stat_load(&s->st.errors);
}

void peer_server_stop(struct peer_server *s)
{
    if (!s)
        return;
    /* MHD closes the listen socket it was given and joins every connection's thread */
    if (s->mhd)
        MHD_stop_daemon(s->mhd);
    free(s->cert_pem);
    if (s->key_pem) {
        explicit_bzero(s->key_pem, strlen(s->key_pem));
        free(s->key_pem);
    }
    explicit_bzero(s->secret, s->secret_len);
    free(s->secret);
    free(s);
}

/* ---- the client ------------------------------------------------------------------------------ */

#define POOL_KEEP 64 /* idle handles kept; more are cleaned up when given back */

struct peer_client {
    char *node_id;
    uint8_t *secret;
    size_t secret_len;
    char *tls_ca; /* NULL: plain http */
    uint32_t stall_ms, total_ms;
    pthread_mutex_t lock; /* guards idle, nidle */
    CURL *idle[POOL_KEEP];
    size_t nidle;
    uint64_t requests, ok, bytes, fail[PEER_FAIL_N]; /* atomics */
};

static const char *const fail_names[PEER_FAIL_N] = {
    [PEER_FAIL_CONNECT] = "connect",     [PEER_FAIL_TIMEOUT] = "timeout",
    [PEER_FAIL_AUTH] = "auth",           [PEER_FAIL_GARBAGE] = "garbage",
    [PEER_FAIL_CHECKSUM] = "checksum",   [PEER_FAIL_STALE] = "stale",
    [PEER_FAIL_NOT_FOUND] = "not_found", [PEER_FAIL_REFUSED] = "refused",
    [PEER_FAIL_ERROR] = "error",
};

static const int fail_errno[PEER_FAIL_N] = {
    [PEER_FAIL_CONNECT] = ECONNREFUSED, [PEER_FAIL_TIMEOUT] = ETIMEDOUT, [PEER_FAIL_AUTH] = EACCES,
    [PEER_FAIL_GARBAGE] = EBADMSG,      [PEER_FAIL_CHECKSUM] = EILSEQ,   [PEER_FAIL_STALE] = ESTALE,
    [PEER_FAIL_NOT_FOUND] = ENOENT,     [PEER_FAIL_REFUSED] = EAGAIN,    [PEER_FAIL_ERROR] = EIO,
};

const char *peer_fail_name(enum peer_fail f)
{
    return (unsigned)f < PEER_FAIL_N ? fail_names[f] : "?";
}

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc;

static void curl_init_once(void)
{
    g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool node_id_ok(const char *id)
{
    size_t n = id ? strnlen(id, PEER_NODE_MAX + 1) : 0;
    if (n == 0 || n > PEER_NODE_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (id[i] < 0x21 || id[i] > 0x7e)
            return false;
    return true;
}

int peer_client_new(const struct peer_client_conf *conf, struct peer_client **out)
{
    if (!conf->secret || conf->secret_len < PEER_SECRET_MIN) {
        tier_err_set("peer client: the cluster secret has %zu bytes, at least %d are needed",
                     conf->secret ? conf->secret_len : 0, PEER_SECRET_MIN);
        return -EINVAL;
    }
    if (!node_id_ok(conf->node_id)) {
        tier_err_set("peer client: the node id must be 1 to %d printable characters, no space",
                     PEER_NODE_MAX);
        return -EINVAL;
    }
    if (conf->tls_ca && access(conf->tls_ca, R_OK) != 0) {
        int rc = -errno;
        tier_err_set("peer client: the TLS CA file %s cannot be read: %s", conf->tls_ca,
                     strerror(-rc));
        return rc;
    }
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init_rc != CURLE_OK) {
        tier_err_set("curl_global_init failed: %s", curl_easy_strerror(g_curl_init_rc));
        return -EIO;
    }
    struct peer_client *pc = calloc(1, sizeof(*pc));
    if (!pc)
        return -ENOMEM;
    pc->node_id = strdup(conf->node_id);
    pc->secret = malloc(conf->secret_len);
    pc->tls_ca = conf->tls_ca ? strdup(conf->tls_ca) : NULL;
    if (!pc->node_id || !pc->secret || (conf->tls_ca && !pc->tls_ca)) {
        free(pc->node_id);
        free(pc->secret);
        free(pc->tls_ca);
        free(pc);
        return -ENOMEM;
    }
    memcpy(pc->secret, conf->secret, conf->secret_len);
    pc->secret_len = conf->secret_len;
    pc->stall_ms = conf->stall_ms ? conf->stall_ms : 2000;
    pc->total_ms = conf->total_ms ? conf->total_ms : 30000;
    pthread_mutex_init(&pc->lock, NULL);
    *out = pc;
    return 0;
}

void peer_client_free(struct peer_client *pc)
{
    if (!pc)
        return;
    for (size_t i = 0; i < pc->nidle; i++)
        curl_easy_cleanup(pc->idle[i]);
    pthread_mutex_destroy(&pc->lock);
    explicit_bzero(pc->secret, pc->secret_len);
    free(pc->secret);
    free(pc->node_id);
    free(pc->tls_ca);
    free(pc);
}

static CURL *pool_take(struct peer_client *pc)
{
    CURL *h = NULL;
    pthread_mutex_lock(&pc->lock);
    if (pc->nidle > 0)
        h = pc->idle[--pc->nidle];
    pthread_mutex_unlock(&pc->lock);
    return h ? h : curl_easy_init();
}

static void pool_give(struct peer_client *pc, CURL *h)
{
    pthread_mutex_lock(&pc->lock);
    if (pc->nidle < POOL_KEEP) {
        pc->idle[pc->nidle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&pc->lock);
    if (h)
        curl_easy_cleanup(h);
}

/* One request's state, shared with curl's callbacks. */
struct exchange {
    CURL *h;
    uint8_t *buf; /* the caller's, cap bytes */
    size_t cap, got;
    bool overflow; /* more body than cap, or more than ERR_BODY_MAX of an error's */
    long status;   /* the answer's, read at its first body byte (0: not yet) */
    char sum[2 * PEER_SUM_LEN + 1], auth[2 * PEER_MAC_LEN + 1];
    size_t sum_len, auth_len; /* 0: missing */
    bool bad_header;          /* one of ours repeated or too long */
};

#define ERR_BODY_MAX 4096 /* bytes of another answer's body read (and dropped) */

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct exchange *x = ud;
    size_t n = size * nmemb;
    if (x->status == 0 && curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status) != CURLE_OK)
        x->status = -1;
    if (x->status != 200) {
        if (x->got + n > ERR_BODY_MAX) {
            x->overflow = true;
            return 0;
        }
        x->got += n;
        return n;
    }
    if (n > x->cap - x->got) {
        x->overflow = true;
        return 0;
    }
    memcpy(x->buf + x->got, p, n);
    x->got += n;
    return n;
}

/* Copies the value of "NAME: value\r\n" (trimmed) into dst when it is ours. */
static void take_header(struct exchange *x, const char *line, size_t n, const char *name, char *dst,
                        size_t cap, size_t *len)
{
    size_t nl = strlen(name);
    if (n <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t vl = (size_t)(end - v);
    if (*len || vl == 0 || vl >= cap) {
        x->bad_header = true;
        return;
    }
    memcpy(dst, v, vl);
    dst[vl] = '\0';
    *len = vl;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *ud)
{
    struct exchange *x = ud;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* a status line starts the headers of an answer (after a 1xx, a new one) */
        x->sum_len = x->auth_len = 0;
        x->bad_header = false;
        return n;
    }
    take_header(x, line, n, "X-Tierd-Sum", x->sum, sizeof(x->sum), &x->sum_len);
    take_header(x, line, n, "X-Tierd-Auth", x->auth, sizeof(x->auth), &x->auth_len);
    return n;
}

/* The failure of a transfer that curl itself ended. */
static enum peer_fail curl_fail(CURLcode cc, const struct exchange *x)
{
    switch (cc) {
    case CURLE_OPERATION_TIMEDOUT:
        return PEER_FAIL_TIMEOUT;
    case CURLE_WRITE_ERROR:
        return x->overflow ? PEER_FAIL_GARBAGE : PEER_FAIL_CONNECT;
    case CURLE_UNSUPPORTED_PROTOCOL: /* not HTTP (an HTTP/0.9 answer) */
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_PARTIAL_FILE:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_RANGE_ERROR:
    case CURLE_FILESIZE_EXCEEDED:
        return PEER_FAIL_GARBAGE;
    default:
        /* refused, unreachable, reset, closed without an answer, TLS failed */
        return PEER_FAIL_CONNECT;
    }
}

/* The failure of an answer with a status (0: none), from its status alone. */
static enum peer_fail status_fail(long status)
{
    switch (status) {
    case 401:
        return PEER_FAIL_AUTH;
    case 404:
        return PEER_FAIL_NOT_FOUND;
    case 412:
        return PEER_FAIL_STALE;
    case 409:
    case 503:
        return PEER_FAIL_REFUSED;
    case 500:
        return PEER_FAIL_ERROR;
    default:
        return PEER_FAIL_GARBAGE;
    }
}

/* HOST:PORT with characters of a host name, an IPv4 or a bracketed IPv6 address only. */
static bool addr_ok(const char *addr)
{
    size_t n = addr ? strnlen(addr, 256) : 0;
    if (n == 0 || n > 255 || !strchr(addr, ':'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = addr[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == ':' || c == '[' || c == ']'))
            return false;
    }
    return true;
}

/* The URL of block b (or of a ping when b is NULL) at addr, malloc'd; NULL on no memory. */
static char *make_url(CURL *h, const struct peer_client *pc, const char *addr,
                      const struct peer_block *b)
{
    struct dynbuf u;
    dynbuf_init(&u, 64 * 1024);
    int rc = dynbuf_printf(&u, "%s://%s/v1/%s", pc->tls_ca ? "https" : "http", addr,
                           b ? "block" : "ping");
    if (b) {
        const char *name[4] = {"b", "k", "e", "v"};
        const char *val[4] = {b->backend, b->key, b->etag, b->version};
        for (size_t i = 0; i < 4 && rc == 0; i++) {
            char *esc = curl_easy_escape(h, val[i], (int)strlen(val[i]));
            rc = esc ? dynbuf_printf(&u, "%c%s=%s", i ? '&' : '?', name[i], esc) : -ENOMEM;
            curl_free(esc);
        }
        if (rc == 0)
            rc = dynbuf_printf(&u, "&s=%llu&z=%lu&i=%llu", (unsigned long long)b->size,
                               (unsigned long)b->block_size, (unsigned long long)b->index);
        if (rc == 0 && peer_block_mode(b))
            rc = dynbuf_printf(&u, "&m=%c", peer_block_mode(b));
        if (rc == 0 && b->cls != TIER_IO_TRAINING) /* absent: training */
            rc = dynbuf_printf(&u, "&q=%d", (int)b->cls);
    }
    if (rc) {
        dynbuf_fini(&u);
        return NULL;
    }
    size_t len;
    return dynbuf_take(&u, &len);
}

/* One request: GET of block b (NULL: a ping) at addr into buf (len bytes). 0 when the answer is
 * the expected one and verified, else the failure in *fail. */
static int exchange(struct peer_client *pc, const char *addr, const struct peer_block *b,
                    const char *name, size_t name_len, void *buf, size_t len, enum peer_fail *fail)
{
    uint8_t nonce[PEER_NONCE_LEN], mac[PEER_MAC_LEN];
    char nonce_hex[2 * PEER_NONCE_LEN + 1], mac_hex[2 * PEER_MAC_LEN + 1];
    char hdr[3][PEER_NODE_MAX + 32];
    struct curl_slist *hl = NULL;
    struct exchange x = {.buf = buf, .cap = len};
    char *url = NULL;
    int rc = -1;
    *fail = PEER_FAIL_CONNECT;
    if (getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce) ||
        peer_req_mac_mode(pc->secret, pc->secret_len, peer_block_mode(b),
                          b ? b->cls : TIER_IO_TRAINING, nonce, pc->node_id, strlen(pc->node_id),
                          name, name_len, mac) != 0)
        return -1;
    peer_hex_encode(nonce, sizeof(nonce), nonce_hex);
    peer_hex_encode(mac, sizeof(mac), mac_hex);
    snprintf(hdr[0], sizeof(hdr[0]), "X-Tierd-Node: %s", pc->node_id);
    snprintf(hdr[1], sizeof(hdr[1]), "X-Tierd-Nonce: %s", nonce_hex);
    snprintf(hdr[2], sizeof(hdr[2]), "X-Tierd-Auth: %s", mac_hex);
    CURL *h = pool_take(pc);
    if (!h)
        return -1;
    for (size_t i = 0; i < 3; i++) {
        struct curl_slist *t = curl_slist_append(hl, hdr[i]);
        if (!t)
            goto out;
        hl = t;
    }
    url = make_url(h, pc, addr, b);
    if (!url)
        goto out;
    x.h = h;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* a peer is asked directly, whatever http_proxy says */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)pc->stall_ms);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)((pc->stall_ms + 999) / 1000));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)pc->total_ms);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (pc->tls_ca) {
        curl_easy_setopt(h, CURLOPT_CAINFO, pc->tls_ca);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK) {
        *fail = curl_fail(cc, &x);
        goto out;
    }
    if (status != (b && !b->warm ? 200 : 204)) {
        *fail = status_fail(status);
        goto out;
    }
    uint8_t sum[PEER_SUM_LEN], got_mac[PEER_MAC_LEN];
    *fail = PEER_FAIL_GARBAGE;
    if (x.bad_header || x.got != len ||
        peer_rsp_headers_parse(x.sum_len ? x.sum : NULL, x.sum_len, x.auth_len ? x.auth : NULL,
                               x.auth_len, sum, got_mac) != 0)
        goto out;
    int v =
        peer_rsp_verify(pc->secret, pc->secret_len, nonce, name, name_len, sum, got_mac, buf, len);
    if (v == -EACCES)
        *fail = PEER_FAIL_AUTH;
    else if (v == -EILSEQ)
        *fail = PEER_FAIL_CHECKSUM;
    else if (v != 0)
        *fail = PEER_FAIL_CONNECT;
    else
        rc = 0;
out:
    free(url);
    curl_slist_free_all(hl);
    pool_give(pc, h);
    return rc;
}

ssize_t peer_fetch(struct peer_client *pc, const char *addr, const struct peer_block *b, void *buf,
                   size_t len, enum peer_fail *fail_out)
{
    char name[PEER_NAME_MAX + 1];
    int name_len = peer_block_name(b, name, sizeof(name));
    if (name_len < 0 || !addr_ok(addr) || b->block_size > PEER_BLOCK_SIZE_MAX || len == 0 ||
        len != peer_block_len(b) || !b->backend[0] || !b->key[0] ||
        (unsigned)b->cls >= TIER_IO_NCLASSES)
        return -EINVAL;
    enum peer_fail f;
    stat_add(&pc->requests, 1);
    if (exchange(pc, addr, b, name, (size_t)name_len, buf, len, &f) == 0) {
        stat_add(&pc->ok, 1);
        stat_add(&pc->bytes, len);
        return (ssize_t)len;
    }
    stat_add(&pc->fail[f], 1);
    if (fail_out)
        *fail_out = f;
    return -fail_errno[f];
}

int peer_warm(struct peer_client *pc, const char *addr, const struct peer_block *b,
              enum peer_fail *fail_out)
{
    struct peer_block w = *b;
    w.warm = true;
    w.cached_only = false;
    char name[PEER_NAME_MAX + 1];
    int name_len = peer_block_name(&w, name, sizeof(name));
    if (name_len < 0 || !addr_ok(addr) || w.block_size > PEER_BLOCK_SIZE_MAX ||
        peer_block_len(&w) == 0 || !w.backend[0] || !w.key[0] ||
        (unsigned)w.cls >= TIER_IO_NCLASSES)
        return -EINVAL;
    enum peer_fail f;
    stat_add(&pc->requests, 1);
    if (exchange(pc, addr, &w, name, (size_t)name_len, NULL, 0, &f) == 0) {
        stat_add(&pc->ok, 1);
        return 0;
    }
    stat_add(&pc->fail[f], 1);
    if (fail_out)
        *fail_out = f;
    return -fail_errno[f];
}

int peer_ping(struct peer_client *pc, const char *addr, enum peer_fail *fail_out)
{
    if (!addr_ok(addr))
        return -EINVAL;
    enum peer_fail f;
    if (exchange(pc, addr, NULL, "", 0, NULL, 0, &f) == 0)
        return 0;
    if (fail_out)
        *fail_out = f;
    return -fail_errno[f];
}

void peer_client_stats_get(struct peer_client *pc, struct peer_client_stats *out)
{
    out->requests = stat_load(&pc->requests);
    out->ok = stat_load(&pc->ok);
    out->bytes = stat_load(&pc->bytes);
    for (size_t i = 0; i < PEER_FAIL_N; i++)
        out->fail[i] = stat_load(&pc->fail[i]);
}
