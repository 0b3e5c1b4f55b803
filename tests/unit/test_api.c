/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_api.c - the control API's request function (src/api/api_int.h) over the POSIX fixture
 * (tests/lib/api_fixture.h), without HTTP: UTF-8 repair of answers and messages, 403 for a
 * backend's permission refusal and for a caller without admin rights and for one asking about a
 * namespace it may not read, the caps on stage paths and pin rules, the telemetry endpoints
 * (/metrics with its content type and the TCP token, /v1/telemetry, /v1/health ready and degraded
 * by an open breaker, 404 when [daemon] telemetry = off), the dashboard's files (test_ui), POST
 * /v1/jobs "cluster" on a tierd in no cluster (test_jobs_cluster). Each
 * answer but /metrics and the dashboard's files must be a JSON object.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "api_fixture.h"
#include "api/api_int.h"
#include "cache/cache.h"
#include "common/dynbuf.h"
#include "hints/hints.h"
#include "advice/advisor.h"
#include "qos/sched.h"
#include "telemetry/stall.h"
#include "telemetry/telemetry.h"
#include "tiers/backend.h"
#include "tenant/tenant.h"
#include "writeback/wb.h"

static struct api_fixture fx;

static int setup(void **state)
{
    (void)state;
    return api_fixture_open(&fx, "test_api") == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    api_fixture_close(&fx);
    return 0;
}

/* Run raw; the answer must be a JSON object with status want. Returns it (json_decref). */
static json_t *request(const char *raw, size_t len, unsigned want)
{
    struct api_reply r;
    api_fixture_request(&fx, raw, len, &r);
    json_error_t je;
    json_t *j = json_loadb(r.body, r.len, 0, &je);
    if (!j || !json_is_object(j) || r.status != want)
        fail_msg("%.60s: status %u (want %u), answer %.*s", raw, r.status, want, (int)r.len,
                 r.body);
    api_reply_fini(&r);
    return j;
}

static json_t *req(const char *raw, unsigned want)
{
    return request(raw, strlen(raw), want);
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(api_utf8_valid("caf\xc3\xa9 \xf0\x9f\x98\x80", 10));
    const char *bad[] = {"caf\xe9",  "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                         "\xe2\x82", "\xff",     "\x80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(api_utf8_valid(bad[i], strlen(bad[i])));
    char *c = api_utf8_clean("caf\xe9!", 100);
    assert_string_equal(c, "caf\xef\xbf\xbd!");
    free(c);
    /* cut on a character boundary: "é" is 2 bytes, 5 bytes hold two of them */
    c = api_utf8_clean("\xc3\xa9\xc3\xa9\xc3\xa9", 5);
    assert_string_equal(c, "\xc3\xa9\xc3\xa9");
    free(c);
}

/* Names that are not UTF-8 give JSON answers; path_b64 names the file exactly. */
static void test_non_utf8_names(void **state)
{
    (void)state;
    json_t *j = req("GET /v1/checkpoints\n\n", 200);
    json_t *files = json_object_get(j, "files");
    assert_int_equal(json_array_size(files), 1);
    json_t *f = json_array_get(files, 0);
    assert_string_equal(json_string_value(json_object_get(f, "path")), "/ck/caf\xef\xbf\xbd");
    assert_string_equal(json_string_value(json_object_get(f, "path_b64")), "L2NrL2NhZuk=");
    assert_string_equal(json_string_value(json_object_get(f, "key_b64")), "Y2twdC9jYWbp");
    json_decref(j);
    json_decref(req("GET /v1/checkpoints?path=/ck/caf%E9\n\n", 200));
    json_decref(req("GET /v1/stage/%E9\n\n", 400));
    json_decref(req("GET /v1/checkpoints?path=/ns/%E9\n\n", 404));
    json_decref(req("GET /v1/%FF\n\n", 404));
    /* a message echoing 300 x "é" (600 bytes) is cut to 512 bytes on a character boundary */
    char raw[1024];
    int n = snprintf(raw, sizeof(raw), "POST /v1/pin\n\n{\"path\": \"/ns/");
    for (int i = 0; i < 300; i++)
        n += snprintf(raw + n, sizeof(raw) - (size_t)n, "\xc3\xa9");
    snprintf(raw + n, sizeof(raw) - (size_t)n, "\"}");
    j = req(raw, 400);
    const char *msg = json_string_value(json_object_get(j, "error"));
    assert_non_null(msg);
    assert_true(strlen(msg) <= 512);
    assert_true(api_utf8_valid(msg, strlen(msg)));
    json_decref(j);
}

/* The backend's refusal (a symlink out of its root) is 403, not the token's 401. */
static void test_backend_permission_is_403(void **state)
{
    (void)state;
    json_t *j = req("POST /v1/pin\n\n{\"path\": \"/ns/esc/passwd\"}", 403);
    assert_string_equal(json_string_value(json_object_get(j, "errno")), "EACCES");
    json_decref(j);
    json_decref(req("GET /v1/status\nX-Listener: tcp\n\n", 401));
    json_decref(req(
        "GET /v1/status\nX-Listener: tcp\nAuthorization: Bearer " API_FIXTURE_TOKEN "\n\n", 200));
}

/* A Unix-socket caller without admin rights reads but does not change state. */
static void test_reader(void **state)
{
    (void)state;
    json_t *st = req("GET /v1/status\nX-Caller: reader\n\n", 200);
    /* the cache's fetch-buffer bound and skipped write-throughs are shown (default bound 64) */
    json_t *cj = json_object_get(st, "cache");
    assert_int_equal(json_integer_value(json_object_get(cj, "max_fetches")), 64);
    assert_true(json_is_integer(json_object_get(cj, "fetch_buffers_peak")));
    assert_true(json_is_integer(json_object_get(cj, "disk_store_skipped")));
    /* the Unix socket's connections: none in the fixture, which has no server */
    json_t *aj = json_object_get(st, "api");
    assert_int_equal(json_integer_value(json_object_get(aj, "connections_user")), 0);
    assert_int_equal(json_integer_value(json_object_get(aj, "refused_connections")), 0);
    json_decref(st);
    /* the fixture's mount has no allow_other: a reader may read no namespace through it, so
     * the API shows it none (an administrator sees /ck's file) */
    json_t *cp = req("GET /v1/checkpoints\nX-Caller: reader\n\n", 200);
    assert_int_equal(json_array_size(json_object_get(cp, "files")), 0);
    json_decref(cp);
    cp = req("GET /v1/checkpoints\n\n", 200);
    assert_int_equal(json_array_size(json_object_get(cp, "files")), 1);
    json_decref(cp);
    /* a datasets path in no namespace is refused before the dataset code sees it: 404 */
    const char *none[] = {"GET /v1/datasets?path=/", "GET /v1/datasets?path=/elsewhere/x",
                          "GET /v1/datasets/v1?path=/elsewhere/x"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        char raw[256];
        snprintf(raw, sizeof(raw), "%s\nX-Caller: reader\n\n", none[i]);
        json_t *j = req(raw, 404);
        assert_string_equal(json_string_value(json_object_get(j, "errno")), "ENOENT");
        json_decref(j);
    }
    const char *priv[] = {"GET /v1/checkpoints?path=/ck", "GET /v1/datasets?path=/ns/a",
                          "GET /v1/datasets/v1?path=/ns/a",
                          "GET /v1/datasets/v1/diff/v2?path=/ns/a"};
    for (size_t i = 0; i < sizeof(priv) / sizeof(priv[0]); i++) {
        char raw[256];
        snprintf(raw, sizeof(raw), "%s\nX-Caller: reader\n\n", priv[i]);
        json_t *j = req(raw, 403);
        assert_string_equal(json_string_value(json_object_get(j, "errno")), "EACCES");
        json_decref(j);
    }
    /* a wait is not a change (no 403 EPERM), but this reader may not read /ck (below) */
    json_t *w =
        req("POST /v1/wait\nX-Caller: reader\n\n{\"path\": \"/ck\", \"timeout_s\": 0}", 403);
    assert_string_equal(json_string_value(json_object_get(w, "errno")), "EACCES");
    json_decref(w);
    json_decref(req("POST /v1/wait\n\n{\"path\": \"/ck\", \"timeout_s\": 0}", 200));
    const char *mut[] = {"POST /v1/evict", "POST /v1/pin", "POST /v1/unpin", "POST /v1/stage",
                         "DELETE /v1/status"};
    for (size_t i = 0; i < sizeof(mut) / sizeof(mut[0]); i++) {
        char raw[256];
        snprintf(raw, sizeof(raw), "%s\nX-Caller: reader\n\n{\"path\": \"/ns\"}", mut[i]);
        json_t *j = req(raw, 403);
        assert_string_equal(json_string_value(json_object_get(j, "errno")), "EPERM");
        json_decref(j);
    }
}

/* What a caller who is not an administrator may read follows what the kernel would let it do
 * through the mount (default_permissions): search on the root and on every directory above the
 * namespace, then read and search on the namespace, each by owner, group or other class. */
static void test_caller_reads(void **state)
{
    (void)state;
    struct tierd *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    d->cfg.allow_other = true;
    d->cfg.mount_uid = 0;
    d->cfg.mount_gid = 0;
    d->cfg.mount_umask = 077;
    char px[] = "/x", pa[] = "/a", pab[] = "/a/b";
    struct tierd_ns_conf x = {.path = px, .uid = -1, .gid = -1, .umask = 022};
    struct tierd_ns_conf a = {.path = pa, .uid = -1, .gid = -1, .umask = 077};
    struct tierd_ns_conf ab = {.path = pab, .uid = -1, .gid = -1, .umask = 022};
    d->ns[0].conf = &x;
    d->ns[1].conf = &a;
    d->ns[2].conf = &ab;
    d->nns = 3;
    struct api_request rq = {.peer = true, .uid = 65534, .gid = 65534};
    /* [mount] umask 077: nobody cannot enter the mount's root, so it sees nothing of /x */
    assert_false(api_caller_reads(d, &rq, &x));
    d->cfg.mount_umask = 022;
    assert_true(api_caller_reads(d, &rq, &x));
    /* /a/b is open, but /a above it (a namespace with umask 077) is not searchable */
    assert_false(api_caller_reads(d, &rq, &ab));
    a.umask = 022;
    assert_true(api_caller_reads(d, &rq, &ab));
    /* the owner's class decides for the owner, even where others may more */
    struct api_request owner = {.peer = true, .uid = 4000, .gid = 65534};
    x.uid = 4000;
    x.umask = 0700;
    assert_false(api_caller_reads(d, &owner, &x));
    assert_true(api_caller_reads(d, &rq, &x));
    /* group 100 may not, others may: a member (primary or supplementary) may not */
    x.uid = -1;
    x.gid = 100;
    x.umask = 070;
    assert_true(api_caller_reads(d, &rq, &x));
    gid_t g100[] = {100};
    struct api_request member = {
        .peer = true, .uid = 4001, .gid = 65534, .groups = g100, .ngroups = 1};
    assert_false(api_caller_reads(d, &member, &x));
    member.gid = 100;
    member.ngroups = 0;
    assert_false(api_caller_reads(d, &member, &x));
    /* supplementary groups unknown (SO_PEERGROUPS failed): where the group's and the others'
     * bits differ the caller might be a member, refused; where they agree, those bits */
    struct api_request unknown = {.peer = true, .uid = 4002, .gid = 65534, .groups_unknown = true};
    assert_false(api_caller_reads(d, &unknown, &x));
    x.umask = 022;
    assert_true(api_caller_reads(d, &unknown, &x));
    x.umask = 027;
    assert_false(api_caller_reads(d, &unknown, &x));
    /* an administrator reads everything; a caller not on the socket, nothing */
    struct api_request adm = {.admin = true};
    d->cfg.mount_umask = 077;
    assert_true(api_caller_reads(d, &adm, &x));
    struct api_request nopeer = {.uid = 65534};
    d->cfg.mount_umask = 022;
    assert_false(api_caller_reads(d, &nopeer, &x));
    free(d);
}

/* At most 256 paths per stage request; at most CACHE_PIN_RULES_MAX pin rules. */
static void test_caps(void **state)
{
    (void)state;
    size_t cap = 300 * 10 + 64;
    char *raw = malloc(cap);
    assert_non_null(raw);
    for (int want_n = 256; want_n <= 257; want_n++) {
        size_t n = (size_t)snprintf(raw, cap, "POST /v1/stage\n\n{\"paths\": [");
        for (int i = 0; i < want_n; i++)
            n += (size_t)snprintf(raw + n, cap - n, "%s\"/ns/a\"", i ? "," : "");
        snprintf(raw + n, cap - n, "]}");
        json_decref(req(raw, want_n == 256 ? 202 : 400));
    }
    free(raw);

    char dir[1024], p[1200], body[256];
    snprintf(dir, sizeof(dir), "%s/warm/ds/many", fx.dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    for (int i = 0; i <= CACHE_PIN_RULES_MAX; i++) {
        snprintf(p, sizeof(p), "%s/f%04d", dir, i);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fclose(f);
    }
    for (int i = 0; i <= CACHE_PIN_RULES_MAX; i++) {
        snprintf(body, sizeof(body), "POST /v1/pin\n\n{\"path\": \"/ns/many/f%04d\"}", i);
        json_t *j = req(body, i < CACHE_PIN_RULES_MAX ? 200 : 507);
        if (i == CACHE_PIN_RULES_MAX)
            assert_non_null(
                strstr(json_string_value(json_object_get(j, "error")), "pin rules exist"));
        json_decref(j);
    }
    for (int i = 0; i < CACHE_PIN_RULES_MAX; i++) {
        snprintf(body, sizeof(body), "POST /v1/unpin\n\n{\"path\": \"/ns/many/f%04d\"}", i);
        json_decref(req(body, 200));
    }
}

/* The dashboard: its static files are answered on TCP without the token (they hold no data), with
 * their content type; everything else on TCP still needs it; Chart.js is read from [api]
 * ui_chartjs at each request, and a missing file is a 404 that names it and the package. */
static void test_ui(void **state)
{
    (void)state;
    struct api_reply r;
    static const struct {
        const char *raw;
        unsigned status;
        const char *type; /* NULL: JSON */
        const char *contains;
    } cases[] = {
        {"GET /ui\nX-Listener: tcp\n\n", 200, "text/html; charset=utf-8", "id=\"tenants\""},
        {"GET /ui/\nX-Listener: tcp\n\n", 200, "text/html; charset=utf-8", "/ui/dashboard.js"},
        {"GET /ui/dashboard.js\nX-Listener: tcp\n\n", 200, "text/javascript; charset=utf-8",
         "/v1/telemetry"},
        {"GET /ui/dashboard.css\nX-Listener: tcp\n\n", 200, "text/css; charset=utf-8", "table"},
        {"GET /ui/nope.js\nX-Caller: reader\n\n", 404, NULL, "no such dashboard file"},
        /* only the dashboard's own names are public, not everything that starts with /ui/ */
        {"GET /ui/nope.js\nX-Listener: tcp\n\n", 401, NULL, "bearer token"},
        {"GET /ui/../v1/telemetry\nX-Listener: tcp\n\n", 401, NULL, "bearer token"},
        /* the token is still needed for data, and for anything but GET under /ui */
        {"GET /v1/status\nX-Listener: tcp\n\n", 401, NULL, "bearer token"},
        {"POST /ui\nX-Listener: tcp\n\n", 401, NULL, "bearer token"},
        {"GET /uix\nX-Listener: tcp\n\n", 401, NULL, "bearer token"},
        /* the page needs no rights on the Unix socket either */
        {"GET /ui\nX-Caller: reader\n\n", 200, "text/html; charset=utf-8", "<table"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        api_fixture_request(&fx, cases[i].raw, strlen(cases[i].raw), &r);
        if (r.status != cases[i].status || !r.body || !strstr(r.body, cases[i].contains))
            fail_msg("%s: status %u (want %u), answer %.200s", cases[i].raw, r.status,
                     cases[i].status, r.body ? r.body : "(none)");
        if (cases[i].type)
            assert_string_equal(r.content_type, cases[i].type);
        else
            assert_null(r.content_type);
        assert_int_equal(r.len, strlen(r.body));
        api_reply_fini(&r);
    }

    char *saved = fx.d.cfg.api_ui_chartjs;
    char path[1200];
    snprintf(path, sizeof(path), "%s/chart.min.js", fx.dir);
    fx.d.cfg.api_ui_chartjs = path;
    const char *raw = "GET /ui/chart.js\nX-Listener: tcp\n\n";
    api_fixture_request(&fx, raw, strlen(raw), &r);
    assert_int_equal(r.status, 404);
    assert_null(r.content_type);
    assert_non_null(strstr(r.body, path));
    assert_non_null(strstr(r.body, "libjs-chart.js"));
    api_reply_fini(&r);

    static const char js[] = "/* a Chart.js stand-in */ window.Chart = function () {};\n";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(js, 1, sizeof(js) - 1, f), sizeof(js) - 1);
    assert_int_equal(fclose(f), 0);
    api_fixture_request(&fx, raw, strlen(raw), &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "text/javascript; charset=utf-8");
    assert_int_equal(r.len, sizeof(js) - 1);
    assert_memory_equal(r.body, js, r.len);
    api_reply_fini(&r);

    /* a directory is not a script */
    fx.d.cfg.api_ui_chartjs = fx.dir;
    api_fixture_request(&fx, raw, strlen(raw), &r);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "not a regular file"));
    api_reply_fini(&r);
    fx.d.cfg.api_ui_chartjs = saved;
    unlink(path);
}

/* GET /metrics (raw text): status and body; the body is malloc'd (free). */
static char *metrics(const char *raw, unsigned want)
{
    struct api_reply r;
    api_fixture_request(&fx, raw, strlen(raw), &r);
    if (r.status != want)
        fail_msg("%.60s: status %u (want %u): %.*s", raw, r.status, want, (int)r.len, r.body);
    char *body = strndup(r.body, r.len);
    if (want == 200)
        assert_string_equal(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    api_reply_fini(&r);
    assert_non_null(body);
    return body;
}

static void test_telemetry_endpoints(void **state)
{
    (void)state;
    struct telemetry *t = NULL;
    assert_int_equal(telemetry_new(NULL, &t), 0);
    fx.d.tele = t;
    sched_set_telemetry(fx.d.sched, t);
    struct tier_ioctx io = {.tenant = 5, .cls = TIER_IO_INFERENCE};
    tele_op_record(t, &io, TELE_OP_READ, TELE_TIER_RAM, 3000, 4096, 0);

    /* reads: open to a reader on the socket; on TCP the bearer token, as Prometheus sends it */
    const char *want_bytes =
        "tierd_op_bytes_total{tenant=\"5\",class=\"inference\",op=\"read\",tier=\"ram\"} 4096\n";
    char *m = metrics("GET /metrics\nX-Caller: reader\n\n", 200);
    assert_non_null(strstr(m, want_bytes));
    assert_non_null(strstr(m, "tierd_health_ok 1\n"));
    assert_non_null(strstr(m, "tierd_writeback_failed_files 0\n"));
    assert_non_null(strstr(m, "tierd_tier_capacity_bytes{tier=\"ram\"} 4194304\n"));
    free(m);
    m = metrics("GET /metrics\nX-Listener: tcp\nAuthorization: Bearer " API_FIXTURE_TOKEN "\n\n",
                200);
    assert_non_null(strstr(m, want_bytes));
    free(m);
    json_decref(req("GET /metrics\nX-Listener: tcp\n\n", 401));
    json_decref(req("GET /metrics\nX-Listener: tcp\nAuthorization: Bearer wrong\n\n", 401));

    json_t *j = req("GET /v1/telemetry\nX-Caller: reader\n\n", 200);
    json_t *ops = json_object_get(j, "ops");
    assert_int_equal(json_array_size(ops), 1);
    json_t *s = json_array_get(ops, 0);
    assert_int_equal(json_integer_value(json_object_get(s, "tenant_id")), 5);
    assert_int_equal(json_integer_value(json_object_get(s, "bytes")), 4096);
    assert_int_equal(json_integer_value(json_object_get(s, "ops")), 1);
    assert_true(json_is_object(json_object_get(json_object_get(j, "gauges"), "writeback")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "health"), "status")),
                        "ready");
    json_decref(j);

    j = req("GET /v1/health\nX-Caller: reader\n\n", 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ready");
    assert_int_equal(json_array_size(json_object_get(j, "reasons")), 0);
    json_decref(j);

    /* a lane whose breaker opens at the first failure: degraded, named, and in /metrics; the
     * failed call is recorded as the scheduler series of its tenant */
    struct sched_backend_config bc = {
        .max_inflight = 2, .breaker_failures = 1, .breaker_cooldown_ms = 3600000};
    struct sched_lane *lane = NULL;
    assert_int_equal(sched_lane_new(fx.d.sched, "flaky", &bc, &lane), 0);
    struct tier_ioctx ck = {.tenant = 7, .cls = TIER_IO_CHECKPOINT};
    assert_int_equal(sched_lane_enter(fx.d.sched, lane, &ck, 100), 0);
    sched_lane_leave(fx.d.sched, lane, &ck, 100, -ETIMEDOUT, 1000000);
    j = req("GET /v1/health\nX-Caller: reader\n\n", 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "degraded");
    assert_int_equal(json_array_size(json_object_get(j, "reasons")), 1);
    assert_non_null(
        strstr(json_string_value(json_array_get(json_object_get(j, "reasons"), 0)), "'flaky'"));
    json_decref(j);
    m = metrics("GET /metrics\n\n", 200);
    assert_non_null(strstr(m, "tierd_backend_breaker_open{backend=\"flaky\"} 1\n"));
    assert_non_null(strstr(m, "tierd_health_ok 0\n"));
    assert_non_null(strstr(m, "tierd_health_reason{reason=\"backend_breaker_open\"} 1\n"));
    assert_non_null(strstr(m, "tierd_sched_errors_total{tenant=\"7\",class=\"checkpoint\"} 1\n"));
    assert_non_null(strstr(
        m, "tierd_sched_service_seconds_sum{tenant=\"7\",class=\"checkpoint\"} 0.001000000\n"));
    free(m);

    sched_set_telemetry(fx.d.sched, NULL);
    fx.d.tele = NULL;
    telemetry_free(t);
}

static const char *reg_name(void *ud, uint32_t id)
{
    return tenant_name(ud, id);
}

/* POST /v1/progress and its answer (json_decref). */
static json_t *progress(const char *caller, const char *body, unsigned want)
{
    char raw[1024];
    snprintf(raw, sizeof(raw), "POST /v1/progress\n%s%s\n%s", caller, *caller ? "\n" : "", body);
    return req(raw, want);
}

/* The error of a refused POST /v1/progress contains part. */
static void progress_refused(const char *caller, const char *body, unsigned want, const char *part)
{
    json_t *j = progress(caller, body, want);
    const char *msg = json_string_value(json_object_get(j, "error"));
    if (!msg || !strstr(msg, part))
        fail_msg("%s: error '%s' lacks '%s'", body, msg ? msg : "(none)", part);
    json_decref(j);
}

/* POST /v1/progress: 404 with telemetry off; a report lands in the caller's own tenant by its
 * peer credentials (infer by uid 4242, an administrator's own or the one it names, default over
 * TCP); a non-administrator naming another tenant, or whose tenant is default's or other's, 403;
 * bad reports
 * 400 naming the field, recording nothing; the figures in /metrics and /v1/telemetry. */
static void test_progress(void **state)
{
    (void)state;
    const char *ok = "{\"name\": \"job7-0\", \"wait_s\": 1.5, \"compute_s\": 0.5, \"steps\": 4}";
    progress_refused("X-Caller: infer", ok, 404, "telemetry is off");
    struct telemetry *t = NULL;
    struct telemetry_config tc = {.tenant_name = reg_name, .tenant_name_ud = fx.d.tenants};
    assert_int_equal(telemetry_new(&tc, &t), 0);
    fx.d.tele = t;

    static const struct {
        const char *body, *part;
    } bad[] = {
        {"{\"name\": \"j\", \"wait_s\": -1, \"compute_s\": 0, \"steps\": 1}", "wait_s -1 is out"},
        {"{\"name\": \"j\", \"wait_s\": 0, \"compute_s\": 1e9, \"steps\": 1}", "compute_s 1e+09"},
        {"{\"name\": \"j\", \"wait_s\": 0, \"compute_s\": 0, \"steps\": -2}", "steps -2"},
        {"{\"name\": \"j\", \"wait_s\": 0, \"compute_s\": 0, \"steps\": 1.5}", "expected {"},
        {"{\"name\": \"j\", \"wait_s\": \"1\", \"compute_s\": 0, \"steps\": 1}", "expected {"},
        {"{\"wait_s\": 0, \"compute_s\": 0, \"steps\": 1}", "expected {"},
        {"{\"name\": \"a b\", \"wait_s\": 0, \"compute_s\": 0, \"steps\": 1}", "progress name"},
        {"{\"name\": \"j\", \"wait_s\": 0, \"compute_s\": 0, \"steps\": 1, \"gpu\": 1}",
         "unknown field 'gpu'"},
        {"{\"name\": \"j\", \"wait_s\": NaN, \"compute_s\": 0, \"steps\": 1}", "JSON"},
        {"[1]", "JSON object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        progress_refused("X-Caller: infer", bad[i].body, 400, bad[i].part);
    struct dynbuf b;
    dynbuf_init(&b, 1 << 20);
    assert_int_equal(tele_render_prometheus(t, NULL, &b), 0);
    assert_int_equal(dynbuf_append(&b, "", 1), 0);
    assert_null(strstr(b.data, "tierd_tenant_data_")); /* nothing recorded */
    dynbuf_fini(&b);

    json_t *j = progress("X-Caller: infer", ok, 200);
    assert_string_equal(json_string_value(json_object_get(j, "tenant")), "infer");
    json_decref(j);
    j = progress("X-Caller: infer",
                 "{\"name\": \"job7-1\", \"wait_s\": 0.5, \"compute_s\": 1.5, \"steps\": 4, "
                 "\"tenant\": \"infer\"}",
                 200);
    json_decref(j);
    progress_refused("X-Caller: infer",
                     "{\"name\": \"j\", \"wait_s\": 1, \"compute_s\": 1, \"steps\": 1, \"tenant\": "
                     "\"default\"}",
                     403, "another tenant");
    /* the reader (uid 65534): its tenant uid-65534 while the registry has room; by now the
     * earlier tests have filled it, so it is other's, which no non-administrator reports for */
    uint32_t rid = tenant_resolve(fx.d.tenants, getpid(), 65534, 65534).tenant;
    if (rid == TIER_TENANT_DEFAULT || rid == TIER_TENANT_OTHER) {
        progress_refused("X-Caller: reader", ok, 403, "tenant default's (or other's)");
    } else {
        j = progress("X-Caller: reader", ok, 200);
        assert_string_equal(json_string_value(json_object_get(j, "tenant")),
                            tenant_name(fx.d.tenants, rid));
        json_decref(j);
    }
    j = progress("", ok, 200); /* root: its own tenant, default */
    assert_string_equal(json_string_value(json_object_get(j, "tenant")), "default");
    json_decref(j);
    j = progress("",
                 "{\"name\": \"adm\", \"wait_s\": 1, \"compute_s\": 1, \"steps\": 2, \"tenant\": "
                 "\"infer\"}",
                 200);
    assert_string_equal(json_string_value(json_object_get(j, "tenant")), "infer");
    json_decref(j);
    progress_refused("",
                     "{\"name\": \"j\", \"wait_s\": 1, \"compute_s\": 1, \"steps\": 1, \"tenant\": "
                     "\"nope\"}",
                     404, "no tenant 'nope'");
    j = progress("X-Listener: tcp\nAuthorization: Bearer " API_FIXTURE_TOKEN, ok, 200);
    assert_string_equal(json_string_value(json_object_get(j, "tenant")), "default");
    json_decref(j);
    progress_refused("X-Listener: tcp", ok, 401, "bearer token");

    char *m = metrics("GET /metrics\nX-Caller: reader\n\n", 200);
    assert_non_null(strstr(m, "tierd_tenant_data_wait_seconds_total{tenant=\"infer\"} "
                              "3.000000000\n"));
    assert_non_null(
        strstr(m, "tierd_tenant_compute_seconds_total{tenant=\"infer\"} 3.000000000\n"));
    assert_non_null(strstr(m, "tierd_tenant_data_steps_total{tenant=\"infer\"} 10\n"));
    assert_non_null(strstr(m, "tierd_tenant_data_reporters{tenant=\"infer\"} 3\n"));
    assert_non_null(strstr(m, "tierd_tenant_data_steps_total{tenant=\"default\"} 8\n"));
    free(m);
    j = req("GET /v1/telemetry\nX-Caller: reader\n\n", 200);
    json_t *st = json_object_get(j, "stalls"), *e, *infer = NULL;
    size_t i;
    json_array_foreach(st, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "tenant")), "infer") == 0)
            infer = e;
    }
    assert_non_null(infer);
    assert_int_equal(json_integer_value(json_object_get(infer, "steps")), 10);
    assert_int_equal(json_array_size(json_object_get(infer, "names")), 3);
    assert_true(fabs(json_number_value(json_object_get(infer, "stall_ratio")) - 0.5) < 1e-3);
    json_decref(j);
    fx.d.tele = NULL;
    telemetry_free(t);
}

/* [daemon] telemetry = off leaves d->tele NULL: /metrics and /v1/telemetry answer 404 with the
 * key to change, /v1/health still answers. (The fixture starts without a telemetry.) */
static void test_telemetry_off(void **state)
{
    (void)state;
    assert_null(fx.d.tele);
    const char *raw[] = {"GET /metrics\n\n", "GET /v1/telemetry\nX-Caller: reader\n\n",
                         "GET /metrics\nX-Listener: tcp\nAuthorization: Bearer " API_FIXTURE_TOKEN
                         "\n\n"};
    for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
        json_t *j = req(raw[i], 404);
        const char *msg = json_string_value(json_object_get(j, "error"));
        assert_non_null(msg);
        assert_non_null(strstr(msg, "telemetry is off ([daemon] telemetry = off"));
        assert_string_equal(json_string_value(json_object_get(j, "errno")), "EOPNOTSUPP");
        json_decref(j);
    }
    json_decref(req("GET /metrics\nX-Listener: tcp\n\n", 401)); /* the token first */
    /* degraded here: test_telemetry_endpoints left the breaker of lane 'flaky' open */
    json_t *j = req("GET /v1/health\nX-Caller: reader\n\n", 200);
    const char *st = json_string_value(json_object_get(j, "status"));
    bool known = st && (strcmp(st, "ready") == 0 || strcmp(st, "degraded") == 0);
    json_decref(j);
    assert_true(known);
}

/* The tenants as GET /v1/tenants lists them, as canonical text (malloc'd). */
static char *tenants_text(void)
{
    json_t *j = req("GET /v1/tenants\n\n", 200);
    char *t = json_dumps(json_object_get(j, "tenants"), JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(j);
    assert_non_null(t);
    return t;
}

/* The entry of name in GET /v1/tenants (json_decref), or NULL. */
static json_t *tenant_entry(const char *name)
{
    json_t *j = req("GET /v1/tenants\n\n", 200);
    json_t *arr = json_object_get(j, "tenants"), *hit = NULL, *v;
    size_t i;
    json_array_foreach(arr, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0) {
            hit = json_incref(v);
            assert_int_equal(json_integer_value(json_object_get(v, "id")), (json_int_t)i);
        }
    }
    json_decref(j);
    return hit;
}

static void post_tenant(const char *body, unsigned want, const char *err_part)
{
    char raw[1024];
    snprintf(raw, sizeof(raw), "POST /v1/tenants\n\n%s", body);
    json_t *j = req(raw, want);
    if (err_part) {
        const char *e = json_string_value(json_object_get(j, "error"));
        if (!e || !strstr(e, err_part))
            fail_msg("%s: error \"%s\" lacks \"%s\"", body, e ? e : "(none)", err_part);
    }
    json_decref(j);
}

/* POST /v1/tenants: created 201, again 200 (idempotent), bad input 400 changing nothing, a class
 * conflict 409, a full registry 507; GET /v1/tenants lists the configured tenant and its rule. */
static void test_tenants(void **state)
{
    (void)state;
    json_t *e = tenant_entry("infer");
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "class")), "inference");
    json_t *rules = json_object_get(e, "rules");
    assert_int_equal(json_array_size(rules), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rules, 0), "uid")), 4242);
    json_decref(e);
    e = tenant_entry("default");
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "class")), "training");
    json_decref(e);

    char *before = tenants_text();
    static const struct {
        const char *body, *err;
    } bad[] = {
        {"{not json", "must be a JSON object"},
        {"[\"name\"]", "must be a JSON object"},
        {"", "must be a JSON object"},
        {"{\"name\": \"x\", \"bogus\": 1}", "unknown field 'bogus'"},
        {"{\"class\": \"inference\"}", "name required"},
        {"{\"name\": 7}", "name required"},
        {"{\"name\": \"a b\"}", "name 'a b' is not allowed"},
        {"{\"name\": \"\"}", "is not allowed"},
        {"{\"name\": \"x\", \"class\": \"fast\"}", "class 'fast' is not allowed"},
        {"{\"name\": \"x\", \"class\": 3}", "class (not a string) is not allowed"},
        {"{\"name\": \"x\", \"slurm_job\": \"12x\"}", "slurm_job must be a Slurm job id"},
        {"{\"name\": \"x\", \"slurm_job\": -1}", "slurm_job"},
        {"{\"name\": \"x\", \"slurm_job\": 1.5}", "slurm_job"},
        {"{\"name\": \"x\", \"uid\": -1}", "uid and gid"},
        {"{\"name\": \"x\", \"gid\": \"root\"}", "uid and gid"},
        {"{\"name\": \"x\", \"uid\": 4294967295}", "uid and gid"},
        {"{\"name\": \"x\", \"cgroup\": \"rel/path\"}", "cgroup must start with '/'"},
        {"{\"name\": \"x\", \"cgroup\": 5}", "cgroup is not a string"},
        /* an existing tenant with a bad field: no rule is added to it */
        {"{\"name\": \"infer\", \"uid\": 1, \"bogus\": true}", "unknown field"},
        {"{\"name\": \"infer\", \"uid\": 1, \"class\": \"nope\"}", "class 'nope'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        post_tenant(bad[i].body, 400, bad[i].err);
        char *now = tenants_text();
        if (strcmp(now, before) != 0)
            fail_msg("%s changed the tenants:\n%s\n->\n%s", bad[i].body, before, now);
        free(now);
    }
    free(before);

    /* created, then idempotent; a job id as a number is the same rule as the string */
    char raw[256];
    json_t *j = req("POST /v1/tenants\n\n{\"name\": \"job42\", \"class\": \"checkpoint\", "
                    "\"slurm_job\": \"42\"}",
                    201);
    json_int_t id = json_integer_value(json_object_get(j, "id"));
    assert_int_equal(id, 4); /* after default, other, retired ([tenants] idle_reclaim) and infer */
    assert_string_equal(json_string_value(json_object_get(j, "name")), "job42");
    assert_string_equal(json_string_value(json_object_get(j, "class")), "checkpoint");
    assert_true(json_is_true(json_object_get(j, "created")));
    json_decref(j);
    j = req("POST /v1/tenants\n\n{\"name\": \"job42\", \"class\": \"checkpoint\", "
            "\"slurm_job\": \"42\"}",
            200);
    assert_int_equal(json_integer_value(json_object_get(j, "id")), id);
    assert_true(json_is_false(json_object_get(j, "created")));
    json_decref(j);
    post_tenant("{\"name\": \"job42\", \"slurm_job\": 42}", 200, NULL);
    e = tenant_entry("job42");
    assert_int_equal(json_array_size(json_object_get(e, "rules")), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(e, "rules"), 0), "slurm_job")),
                        "42");
    json_decref(e);
    /* another class for an existing name: 409, nothing changes */
    snprintf(raw, sizeof(raw),
             "POST /v1/tenants\n\n{\"name\": \"job42\", \"class\": \"inference\"}");
    j = req(raw, 409);
    assert_string_equal(json_string_value(json_object_get(j, "errno")), "EEXIST");
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "class checkpoint"));
    json_decref(j);
    e = tenant_entry("job42");
    assert_string_equal(json_string_value(json_object_get(e, "class")), "checkpoint");
    json_decref(e);
    /* a rule added to a configured tenant: all match keys in one rule */
    post_tenant("{\"name\": \"infer\", \"uid\": 1, \"gid\": 2, \"cgroup\": \"/x/\"}", 200, NULL);
    e = tenant_entry("infer");
    rules = json_object_get(e, "rules");
    assert_int_equal(json_array_size(rules), 2);
    json_t *r1 = json_array_get(rules, 1);
    assert_int_equal(json_integer_value(json_object_get(r1, "uid")), 1);
    assert_int_equal(json_integer_value(json_object_get(r1, "gid")), 2);
    assert_string_equal(json_string_value(json_object_get(r1, "cgroup")), "/x");
    json_decref(e);
    /* the former class names are understood, the answer uses the new ones */
    j = req("POST /v1/tenants\n\n{\"name\": \"legacy\", \"class\": \"interactive\"}", 201);
    assert_string_equal(json_string_value(json_object_get(j, "class")), "inference");
    json_decref(j);

    /* mutating: not for a reader on the socket, nor over TCP without the token */
    json_decref(req("POST /v1/tenants\nX-Caller: reader\n\n{\"name\": \"r\"}", 403));
    json_decref(req("POST /v1/tenants\nX-Listener: tcp\n\n{\"name\": \"r\"}", 401));
    json_decref(req("GET /v1/tenants\nX-Caller: reader\n\n", 200));
    assert_null(tenant_entry("r"));

    /* the cap: default, other, infer, job42, legacy + 3 = API_FIXTURE_MAX_TENANTS, then 507 */
    for (int i = 0; i < 4; i++) {
        snprintf(raw, sizeof(raw), "POST /v1/tenants\n\n{\"name\": \"fill%d\"}", i);
        j = req(raw, i < 3 ? 201 : 507);
        if (i == 3) {
            assert_string_equal(json_string_value(json_object_get(j, "errno")), "ENOSPC");
            assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "full"));
        }
        json_decref(j);
    }
    j = req("GET /v1/tenants\n\n", 200);
    /* and retired, listed, outside the cap */
    assert_int_equal(json_array_size(json_object_get(j, "tenants")), API_FIXTURE_MAX_TENANTS + 1);
    assert_int_equal(json_integer_value(json_object_get(j, "max_tenants")),
                     API_FIXTURE_MAX_TENANTS);
    json_decref(j);
    /* full, an existing name still answers 200 */
    post_tenant("{\"name\": \"fill0\"}", 200, NULL);
}

/* ---- QoS: GET and PUT /v1/qos ------------------------------------------------------------- */

#define MIB 1048576LL

/* The lane name of the disk's lane in qos_entry() (no backend of the fixture is named so). */
#define QOS_DISK "@disk"

/* The entry of tenant in lane object b (borrowed), NULL if none; with cls, its class entry. */
static json_t *qos_lane_entry(json_t *b, const char *tenant, const char *cls)
{
    json_t *t;
    size_t k;
    json_array_foreach(json_object_get(b, "tenants"), k, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "name")), tenant) == 0)
            return cls ? json_object_get(json_object_get(t, "classes"), cls) : t;
    }
    return NULL;
}

/* The class entry of (backend, tenant, class) in a GET /v1/qos answer (borrowed from j), or
 * fail. With cls NULL, the tenant's entry. Backend QOS_DISK: the disk's lane. */
static json_t *qos_entry(json_t *j, const char *backend, const char *tenant, const char *cls)
{
    json_t *b, *e = NULL;
    size_t i;
    if (strcmp(backend, QOS_DISK) == 0)
        e = qos_lane_entry(json_object_get(j, "disk"), tenant, cls);
    json_array_foreach(json_object_get(j, "backends"), i, b)
    {
        if (!e && strcmp(json_string_value(json_object_get(b, "name")), backend) == 0)
            e = qos_lane_entry(b, tenant, cls);
    }
    if (!e)
        fail_msg("no backend %s tenant %s in GET /v1/qos", backend, tenant);
    return e;
}

static json_int_t qos_int(json_t *j, const char *backend, const char *tenant, const char *cls,
                          const char *key)
{
    json_t *v = json_object_get(qos_entry(j, backend, tenant, cls), key);
    if (json_is_null(v))
        return -1; /* none */
    if (!json_is_integer(v))
        fail_msg("%s/%s/%s: %s is not an integer", backend, tenant, cls ? cls : "-", key);
    return json_integer_value(v);
}

/* GET /v1/qos without its clock, as canonical text (malloc'd): what a refused PUT must leave. */
static char *qos_text(void)
{
    json_t *j = req("GET /v1/qos\n\n", 200);
    json_object_del(j, "now_ns");
    char *t = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(j);
    return t;
}

static json_t *qos_put(const char *body, unsigned want)
{
    char raw[1024];
    snprintf(raw, sizeof(raw), "PUT /v1/qos\n\n%s", body);
    return req(raw, want);
}

/* GET shows the configured values (built-in, [class], link_capacity) per lane; PUT changes them
 * and GET shows the change; null goes back to the defaults; each bad input is 400 (404 for an
 * unknown tenant or backend) naming the problem and GET shows nothing changed; a reader on the
 * socket is 403, TCP without the token 401; grants are counted per lane and tenant. */
static void test_qos(void **state)
{
    (void)state;
    json_t *j = req("GET /v1/qos\n\n", 200);
    assert_true(json_is_integer(json_object_get(j, "now_ns")));
    assert_int_equal(json_integer_value(json_object_get(j, "op_cost")), 64 * 1024);
    assert_int_equal(json_array_size(json_object_get(j, "backends")), 2);
    /* inference's built-in reservation is a tenth of the warm link; cold has no capacity */
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "reservation"), 10 * MIB);
    assert_int_equal(qos_int(j, "cold", "infer", "inference", "reservation"), 0);
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "weight"), 64);
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "limit"), -1);
    assert_int_equal(qos_int(j, "warm", "infer", "training", "limit"), 80 * MIB); /* [class] */
    assert_int_equal(qos_int(j, "warm", "infer", NULL, "limit"), -1);
    assert_false(json_is_true(json_object_get(qos_entry(j, "warm", "infer", "inference"), "own")));
    json_decref(j);

    /* the tenant's class and its limit over all classes, on every lane */
    j = qos_put("{\"tenant\": \"infer\", \"reservation\": \"20MiB/s\", \"weight\": 100, "
                "\"limit\": \"50MiB/s\"}",
                200);
    json_decref(j);
    j = req("GET /v1/qos\n\n", 200);
    for (int b = 0; b < 2; b++) {
        const char *be = b ? "cold" : "warm";
        assert_int_equal(qos_int(j, be, "infer", "inference", "reservation"), 20 * MIB);
        assert_int_equal(qos_int(j, be, "infer", "inference", "weight"), 100);
        assert_int_equal(qos_int(j, be, "infer", NULL, "limit"), 50 * MIB);
        assert_true(json_is_true(json_object_get(qos_entry(j, be, "infer", "inference"), "own")));
        /* other classes keep their defaults; other tenants are untouched */
        assert_int_equal(qos_int(j, be, "infer", "training", "weight"), 16);
        assert_int_equal(qos_int(j, be, "default", NULL, "limit"), -1);
    }
    json_decref(j);
    /* a class named: that class's own values, its limit that class's only */
    json_decref(qos_put("{\"tenant\": \"infer\", \"class\": \"background\", \"limit\": "
                        "\"1.5MiB/s\", \"weight\": 3}",
                        200));
    j = req("GET /v1/qos\n\n", 200);
    assert_int_equal(qos_int(j, "warm", "infer", "background", "limit"), 3 * MIB / 2);
    assert_int_equal(qos_int(j, "warm", "infer", "background", "weight"), 3);
    assert_int_equal(qos_int(j, "warm", "infer", NULL, "limit"), 50 * MIB);
    json_decref(j);

    /* bad input: 400 (404) naming the problem, and nothing changed */
    char *before = qos_text();
    static const struct {
        const char *body;
        unsigned status;
        const char *says;
    } bad[] = {
        {"{\"tenant\": \"infer\", \"reservation\": \"-5MiB/s\"}", 400, "is negative"},
        {"{\"tenant\": \"infer\", \"reservation\": \"fast\"}", 400, "not a rate"},
        {"{\"tenant\": \"infer\", \"reservation\": 5}", 400, "must be a string"},
        {"{\"tenant\": \"infer\", \"limit\": \"10MiB\"}", 400, "not a rate"},
        {"{\"tenant\": \"infer\", \"limit\": \"1e30G/s\"}", 400, "out of range"},
        {"{\"tenant\": \"infer\", \"weight\": 0}", 400, "weight"},
        {"{\"tenant\": \"infer\", \"weight\": -3}", 400, "weight"},
        {"{\"tenant\": \"infer\", \"weight\": \"9\"}", 400, "weight"},
        {"{\"tenant\": \"infer\", \"weight\": 10001}", 400, "10000"},
        /* above its own tenant limit of 50 MiB/s, and a limit below its reservation of 20 */
        {"{\"tenant\": \"infer\", \"reservation\": \"60MiB/s\"}", 400, "above the tenant's limit"},
        {"{\"tenant\": \"infer\", \"limit\": \"10MiB/s\"}", 400, "above the tenant's limit"},
        /* above [class training] limit = 80MiB/s */
        {"{\"tenant\": \"infer\", \"class\": \"training\", \"reservation\": \"90MiB/s\"}", 400,
         "above the class limit"},
        {"{\"tenant\": \"infer\", \"class\": \"inference\", \"reservation\": \"20MiB/s\", "
         "\"limit\": \"10MiB/s\"}",
         400, "above the class limit"},
        /* 10 (inference's built-in) + 20 (infer) + 75 > the warm link's 100 MiB/s */
        {"{\"tenant\": \"default\", \"class\": \"checkpoint\", \"reservation\": \"75MiB/s\"}", 400,
         "link_capacity"},
        {"{\"tenant\": \"nobody\", \"weight\": 2}", 404, "no tenant 'nobody'"},
        {"{\"tenant\": \"infer\", \"class\": \"fastest\", \"weight\": 2}", 400, "class fastest"},
        {"{\"tenant\": \"infer\", \"backend\": \"nope\", \"weight\": 2}", 400,
         "backend 'nope' is not configured"},
        {"{\"tenant\": \"infer\", \"backend\": 3, \"weight\": 2}", 400, "not configured"},
        {"{\"tenant\": \"infer\", \"wieght\": 2}", 400, "unknown field 'wieght'"},
        {"{\"tenant\": \"infer\"}", 400, "nothing to change"},
        {"{\"weight\": 2}", 400, "tenant required"},
        {"[1]", 400, "JSON object"},
        {"not json", 400, "JSON object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = qos_put(bad[i].body, bad[i].status);
        const char *e = json_string_value(json_object_get(j, "error"));
        if (!e || !strstr(e, bad[i].says))
            fail_msg("%s: error '%s' does not say '%s'", bad[i].body, e ? e : "(none)",
                     bad[i].says);
        json_decref(j);
        char *now = qos_text();
        if (strcmp(before, now) != 0)
            fail_msg("%s changed the QoS:\n%s\n->\n%s", bad[i].body, before, now);
        free(now);
    }
    free(before);

    /* an administrator's act: not for a reader on the socket, nor over TCP without the token */
    json_decref(
        req("PUT /v1/qos\nX-Caller: reader\n\n{\"tenant\": \"infer\", \"weight\": 2}", 403));
    json_decref(req("PUT /v1/qos\nX-Listener: tcp\n\n{\"tenant\": \"infer\", \"weight\": 2}", 401));
    j = req("GET /v1/qos\nX-Caller: reader\n\n", 200);
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "weight"), 100);
    json_decref(j);

    /* delivered: a read of tenant infer through the warm lane is counted there, not on cold */
    uint32_t id = 0;
    assert_int_equal(tenant_find(fx.d.tenants, "infer", &id), 0);
    struct tier_ioctx io = {.tenant = id, .cls = TIER_IO_INFERENCE};
    char buf[4096];
    assert_true(backend_read(fx.d.backends[0], &io, "ds/b.bin", 0, buf, sizeof(buf), NULL, NULL) >
                0);
    j = req("GET /v1/qos\n\n", 200);
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "grants"), 1);
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "granted_bytes"), 4096);
    assert_int_equal(qos_int(j, "warm", "infer", NULL, "granted_bytes"), 4096);
    assert_int_equal(qos_int(j, "cold", "infer", NULL, "grants"), 0);
    json_decref(j);
    /* /v1/stats backends[] has the lane's QoS counters */
    j = req("GET /v1/stats\n\n", 200);
    json_t *b0 = json_array_get(json_object_get(j, "backends"), 0);
    assert_string_equal(json_string_value(json_object_get(b0, "name")), "warm");
    assert_int_equal(json_integer_value(json_object_get(b0, "link_capacity")), 100 * MIB);
    assert_true(json_integer_value(json_object_get(b0, "grants_reservation")) +
                    json_integer_value(json_object_get(b0, "grants_weight")) >=
                1);
    assert_true(json_is_integer(json_object_get(b0, "limit_waits")));
    /* reads in parts: auto, 2 ms of warm's 100 MiB/s rounded up to 256 KiB; none split yet */
    assert_int_equal(json_integer_value(json_object_get(b0, "split_bytes")), 256 << 10);
    assert_int_equal(json_integer_value(json_object_get(b0, "split_reads")), 0);
    json_decref(j);
    j = req("GET /v1/qos\n\n", 200);
    size_t li;
    json_t *lane;
    json_array_foreach(json_object_get(j, "backends"), li, lane)
    { /* cold has no link_capacity: auto splits nothing there */
        bool warm = strcmp(json_string_value(json_object_get(lane, "name")), "warm") == 0;
        assert_int_equal(json_integer_value(json_object_get(lane, "split_bytes")),
                         warm ? 256 << 10 : 0);
        assert_true(json_is_integer(json_object_get(lane, "split_reads")));
    }
    json_decref(j);

    /* null: back to the defaults (the class's, and no tenant limit) */
    json_decref(qos_put("{\"tenant\": \"infer\", \"reservation\": null, \"weight\": null, "
                        "\"limit\": null}",
                        200));
    json_decref(qos_put("{\"tenant\": \"infer\", \"class\": \"background\", \"limit\": null, "
                        "\"weight\": null}",
                        200));
    j = req("GET /v1/qos\n\n", 200);
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "reservation"), 10 * MIB);
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "weight"), 64);
    assert_int_equal(qos_int(j, "warm", "infer", NULL, "limit"), -1);
    assert_int_equal(qos_int(j, "warm", "infer", "background", "limit"), -1);
    assert_false(json_is_true(json_object_get(qos_entry(j, "warm", "infer", "inference"), "own")));
    json_decref(j);
    /* "none" is an explicit none: no reservation even where the class has one */
    json_decref(qos_put("{\"tenant\": \"infer\", \"reservation\": \"none\"}", 200));
    j = req("GET /v1/qos\n\n", 200);
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "reservation"), 0);
    json_decref(j);
    json_decref(qos_put("{\"tenant\": \"infer\", \"reservation\": null}", 200));
}

/* The disk's lane ("resource": "disk") and one backend's own values ("backend"): GET shows the
 * disk with its capacity and the values in force; a disk PUT changes the disk only, a backend PUT
 * that backend's lane only (lane_own, limit_lane_own), over the tenant's values of every lane;
 * null drops them; each bad input is 400 naming the problem, nothing changed; a reader is 403;
 * the disk's grants are counted. */
static void test_qos_lanes(void **state)
{
    (void)state;
    json_t *j = req("GET /v1/qos\n\n", 200);
    json_t *disk = json_object_get(j, "disk");
    assert_string_equal(json_string_value(json_object_get(disk, "name")), "disk");
    assert_int_equal(json_integer_value(json_object_get(disk, "capacity")), 200 * MIB);
    assert_int_equal(json_integer_value(json_object_get(disk, "op_cost")), 4096);
    assert_int_equal(json_integer_value(json_object_get(disk, "max_inflight")), 64);
    /* [tenant infer] disk_limit; inference reserves a tenth of the disk_capacity */
    assert_int_equal(qos_int(j, QOS_DISK, "infer", NULL, "limit"), 60 * MIB);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "inference", "reservation"), 20 * MIB);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "inference", "weight"), 64);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "training", "limit"), -1); /* a link [class] */
    assert_int_equal(qos_int(j, "warm", "infer", NULL, "limit"), -1); /* disk_limit: disk only */
    json_decref(j);

    /* the disk: the tenant's class and its disk limit, the link untouched */
    json_decref(qos_put("{\"tenant\": \"infer\", \"resource\": \"disk\", \"weight\": 9, "
                        "\"limit\": \"30MiB/s\"}",
                        200));
    json_decref(qos_put("{\"tenant\": \"infer\", \"resource\": \"disk\", \"class\": "
                        "\"background\", \"limit\": \"5MiB/s\", \"reservation\": \"1MiB/s\"}",
                        200));
    j = req("GET /v1/qos\n\n", 200);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "inference", "weight"), 9);
    assert_true(json_is_true(json_object_get(qos_entry(j, QOS_DISK, "infer", "inference"), "own")));
    assert_int_equal(qos_int(j, QOS_DISK, "infer", NULL, "limit"), 30 * MIB);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "background", "limit"), 5 * MIB);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "background", "reservation"), MIB);
    assert_int_equal(qos_int(j, QOS_DISK, "default", "inference", "weight"), 64);
    for (int b = 0; b < 2; b++) {
        const char *be = b ? "cold" : "warm";
        assert_int_equal(qos_int(j, be, "infer", "inference", "weight"), 64);
        assert_int_equal(qos_int(j, be, "infer", NULL, "limit"), -1);
        assert_int_equal(qos_int(j, be, "infer", "background", "limit"), -1);
    }
    json_decref(j);

    /* one backend: cold's own values for infer's training, warm's own limit of infer */
    json_decref(qos_put("{\"tenant\": \"infer\", \"backend\": \"cold\", \"class\": \"training\", "
                        "\"limit\": \"7MiB/s\", \"weight\": 5, \"reservation\": \"6MiB/s\"}",
                        200));
    json_decref(
        qos_put("{\"tenant\": \"infer\", \"backend\": \"warm\", \"limit\": \"9MiB/s\"}", 200));
    j = req("GET /v1/qos\n\n", 200);
    assert_int_equal(qos_int(j, "cold", "infer", "training", "limit"), 7 * MIB);
    assert_int_equal(qos_int(j, "cold", "infer", "training", "weight"), 5);
    assert_true(
        json_is_true(json_object_get(qos_entry(j, "cold", "infer", "training"), "lane_own")));
    assert_false(json_is_true(json_object_get(qos_entry(j, "cold", "infer", "training"), "own")));
    assert_int_equal(qos_int(j, "warm", "infer", "training", "limit"), 80 * MIB); /* [class] */
    assert_int_equal(qos_int(j, "warm", "infer", "training", "weight"), 16);
    assert_false(
        json_is_true(json_object_get(qos_entry(j, "warm", "infer", "training"), "lane_own")));
    assert_int_equal(qos_int(j, "warm", "infer", NULL, "limit"), 9 * MIB);
    assert_true(
        json_is_true(json_object_get(qos_entry(j, "warm", "infer", NULL), "limit_lane_own")));
    assert_int_equal(qos_int(j, "cold", "infer", NULL, "limit"), -1);
    assert_false(
        json_is_true(json_object_get(qos_entry(j, "cold", "infer", NULL), "limit_lane_own")));
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "training", "weight"), 16); /* not the disk */
    json_decref(j);
    /* the tenant's values of every lane change under a backend's own: warm keeps its 9 MiB/s */
    json_decref(
        qos_put("{\"tenant\": \"infer\", \"limit\": \"50MiB/s\", \"class\": \"training\"}", 200));
    json_decref(qos_put("{\"tenant\": \"infer\", \"limit\": \"50MiB/s\"}", 200));
    j = req("GET /v1/qos\n\n", 200);
    assert_int_equal(qos_int(j, "cold", "infer", NULL, "limit"), 50 * MIB);
    assert_int_equal(qos_int(j, "warm", "infer", NULL, "limit"), 9 * MIB);
    assert_int_equal(qos_int(j, "warm", "infer", "training", "limit"), 50 * MIB);
    assert_int_equal(qos_int(j, "cold", "infer", "training", "limit"), 7 * MIB);
    json_decref(j);

    /* bad input: 400 naming the problem, nothing changed (the disk included) */
    char *before = qos_text();
    static const struct {
        const char *body;
        const char *says;
    } bad[] = {
        {"{\"tenant\": \"infer\", \"resource\": \"disk\", \"weight\": -1}", "weight"},
        {"{\"tenant\": \"infer\", \"resource\": \"disk\", \"limit\": \"-1MiB/s\"}", "negative"},
        {"{\"tenant\": \"infer\", \"resource\": \"disk\", \"reservation\": \"lots\"}",
         "not a rate"},
        /* above its disk limit of 30 MiB/s; the class's 5 MiB/s disk limit */
        {"{\"tenant\": \"infer\", \"resource\": \"disk\", \"reservation\": \"40MiB/s\"}",
         "on the disk: reservation 40"},
        {"{\"tenant\": \"infer\", \"resource\": \"disk\", \"class\": \"background\", "
         "\"reservation\": \"6MiB/s\"}",
         "above the class limit"},
        {"{\"tenant\": \"infer\", \"resource\": \"disk\", \"limit\": \"512K/s\", \"class\": "
         "\"background\"}",
         "above the class limit"},
        /* 20 (inference's built-in tenth) + 1 (infer's background) + 190 > 200 MiB/s */
        {"{\"tenant\": \"default\", \"resource\": \"disk\", \"class\": \"checkpoint\", "
         "\"reservation\": \"190MiB/s\"}",
         "disk_capacity"},
        {"{\"tenant\": \"infer\", \"resource\": \"ssd\", \"weight\": 2}", "resource ssd"},
        {"{\"tenant\": \"infer\", \"resource\": 1, \"weight\": 2}", "resource"},
        {"{\"tenant\": \"infer\", \"resource\": \"disk\", \"backend\": \"warm\", \"weight\": 2}",
         "omit backend"},
        /* warm: infer's own limit there is 9 MiB/s */
        {"{\"tenant\": \"infer\", \"backend\": \"warm\", \"reservation\": \"20MiB/s\"}",
         "on backend warm: reservation 20"},
        {"{\"tenant\": \"infer\", \"backend\": \"cold\", \"class\": \"training\", \"limit\": "
         "\"5MiB/s\"}",
         "on backend cold: reservation 6"},
        /* every lane: cold's own training reservation of 6 MiB/s is above 4 MiB/s */
        {"{\"tenant\": \"infer\", \"limit\": \"4MiB/s\"}", "on backend cold"},
        /* 10 (inference's built-in on warm) + 95 > 100 MiB/s */
        {"{\"tenant\": \"default\", \"backend\": \"warm\", \"class\": \"checkpoint\", "
         "\"reservation\": \"95MiB/s\"}",
         "link_capacity"},
        {"{\"tenant\": \"infer\", \"backend\": \"warm\", \"weight\": 0}", "weight"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = qos_put(bad[i].body, 400);
        const char *e = json_string_value(json_object_get(j, "error"));
        if (!e || !strstr(e, bad[i].says))
            fail_msg("%s: error '%s' does not say '%s'", bad[i].body, e ? e : "(none)",
                     bad[i].says);
        json_decref(j);
        char *now = qos_text();
        if (strcmp(before, now) != 0)
            fail_msg("%s changed the QoS:\n%s\n->\n%s", bad[i].body, before, now);
        free(now);
    }
    /* on cold (no link_capacity) the same reservation fits */
    json_decref(qos_put("{\"tenant\": \"default\", \"backend\": \"cold\", \"class\": "
                        "\"checkpoint\", \"reservation\": \"95MiB/s\"}",
                        200));
    json_decref(qos_put("{\"tenant\": \"default\", \"backend\": \"cold\", \"class\": "
                        "\"checkpoint\", \"reservation\": null}",
                        200));
    char *after = qos_text();
    assert_string_equal(before, after);
    free(after);
    free(before);

    /* an administrator's act */
    json_decref(req("PUT /v1/qos\nX-Caller: reader\n\n{\"tenant\": \"infer\", \"resource\": "
                    "\"disk\", \"weight\": 2}",
                    403));
    json_decref(req("PUT /v1/qos\nX-Caller: reader\n\n{\"tenant\": \"infer\", \"backend\": "
                    "\"warm\", \"weight\": 2}",
                    403));
    j = req("GET /v1/qos\nX-Caller: reader\n\n", 200);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "inference", "weight"), 9);
    assert_int_equal(qos_int(j, "warm", "infer", "inference", "weight"), 64);
    json_decref(j);

    /* the disk's grants: an I/O of infer through the hook the cache and the burst buffer use */
    uint32_t id = 0;
    assert_int_equal(tenant_find(fx.d.tenants, "infer", &id), 0);
    struct tier_ioctx io = {.tenant = id, .cls = TIER_IO_INFERENCE};
    assert_int_equal(tier_disk_enter(&fx.d.disk_adm, &io, 8192, false), 0);
    tier_disk_leave(&fx.d.disk_adm, &io, 8192, 8192);
    j = req("GET /v1/qos\n\n", 200);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "inference", "grants"), 1);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "inference", "granted_bytes"), 8192);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", NULL, "granted_bytes"), 8192);
    json_decref(j);

    /* null: back to the defaults, the lane's own values dropped */
    json_decref(qos_put("{\"tenant\": \"infer\", \"backend\": \"cold\", \"class\": \"training\", "
                        "\"limit\": null, \"weight\": null, \"reservation\": null}",
                        200));
    json_decref(qos_put("{\"tenant\": \"infer\", \"backend\": \"warm\", \"limit\": null}", 200));
    json_decref(qos_put("{\"tenant\": \"infer\", \"limit\": null}", 200));
    json_decref(qos_put("{\"tenant\": \"infer\", \"class\": \"training\", \"limit\": null}", 200));
    json_decref(qos_put("{\"tenant\": \"infer\", \"resource\": \"disk\", \"weight\": null, "
                        "\"limit\": \"60MiB/s\"}",
                        200));
    json_decref(qos_put("{\"tenant\": \"infer\", \"resource\": \"disk\", \"class\": "
                        "\"background\", \"limit\": null, \"reservation\": null}",
                        200));
    j = req("GET /v1/qos\n\n", 200);
    assert_int_equal(qos_int(j, "cold", "infer", "training", "limit"), 80 * MIB);
    assert_int_equal(qos_int(j, "cold", "infer", "training", "weight"), 16);
    assert_false(
        json_is_true(json_object_get(qos_entry(j, "cold", "infer", "training"), "lane_own")));
    assert_int_equal(qos_int(j, "warm", "infer", NULL, "limit"), -1);
    assert_false(
        json_is_true(json_object_get(qos_entry(j, "warm", "infer", NULL), "limit_lane_own")));
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "inference", "weight"), 64);
    assert_int_equal(qos_int(j, QOS_DISK, "infer", "background", "limit"), -1);
    json_decref(j);
}

/* POST /v1/jobs "cluster": true or false, else 400; a tierd in no cluster (the fixture has no
 * [cluster]) takes the job and stages it on this node alone, its staging showing cluster false,
 * and a dry run says so too. */
static void test_jobs_cluster(void **state)
{
    (void)state;
    json_t *j = req("POST /v1/jobs\n\n{\"job\": \"cl-1\", \"tenant\": \"team-c\", "
                    "\"cache_bytes\": \"64K\", \"cluster\": \"yes\"}",
                    400);
    assert_non_null(
        strstr(json_string_value(json_object_get(j, "error")), "cluster must be true or false"));
    json_decref(j);
    j = req("POST /v1/jobs\n\n{\"job\": \"cl-1\", \"tenant\": \"team-c\", \"stage\": [\"/ns/a\"], "
            "\"cache_bytes\": \"64K\", \"cluster\": true, \"dry_run\": true}",
            200);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "valid");
    assert_true(json_is_false(json_object_get(j, "cluster")));
    json_decref(j);
    j = req("POST /v1/jobs\n\n{\"job\": \"cl-1\", \"tenant\": \"team-c\", \"stage\": [\"/ns/a\"], "
            "\"cache_bytes\": \"64K\", \"cluster\": true}",
            200);
    json_t *st = json_object_get(j, "staging");
    assert_true(json_is_false(json_object_get(st, "cluster")));
    assert_null(json_object_get(st, "bytes_on_peers"));
    json_decref(j);
    j = req("GET /v1/jobs/cl-1\n\n", 200);
    assert_true(json_is_false(json_object_get(json_object_get(j, "staging"), "cluster")));
    json_decref(j);
    json_decref(req("DELETE /v1/jobs/cl-1\n\n", 200));
}

/* Who owns a Slurm job (POST /v1/jobs and POST /v1/tenants with "uid"), and the ids kept for
 * explicit tenants: once implicit tenants fill their share, POST /v1/tenants still registers.
 * A fresh fixture (the earlier tests filled the registry). */
static void test_tenants_trust(void **state)
{
    (void)state;
    api_fixture_close(&fx);
    assert_int_equal(api_fixture_open(&fx, "test_api_trust"), 0);
    struct tenant_reg *r = fx.d.tenants;
    uid_t u = 0;
    /* uid needs a Slurm job id: a numeric job, or slurm_job */
    json_t *j = req("POST /v1/jobs\n\n{\"job\": \"run-a\", \"uid\": 1000, \"tenant\": \"job-a\", "
                    "\"cache_bytes\": 0}",
                    400);
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "slurm_job"));
    json_decref(j);
    json_decref(req("POST /v1/jobs\n\n{\"job\": 4242, \"uid\": \"x\", \"tenant\": \"job-a\", "
                    "\"cache_bytes\": 0}",
                    400));
    json_decref(req("POST /v1/jobs\n\n{\"job\": \"run-a\", \"slurm_job\": \"12x\", \"uid\": 1, "
                    "\"tenant\": \"job-a\", \"cache_bytes\": 0}",
                    400));
    assert_int_equal(tenant_find(r, "job-a", NULL), -ENOENT); /* a 400 registers nothing */
    /* a dry run records no owner */
    json_decref(req("POST /v1/jobs\n\n{\"job\": 4244, \"uid\": 1000, \"tenant\": \"job-a\", "
                    "\"cache_bytes\": 0, \"dry_run\": true}",
                    200));
    assert_int_equal(tenant_job_owner(r, "4244", &u), -ENOENT);
    json_decref(req("POST /v1/jobs\n\n{\"job\": \"run-a\", \"slurm_job\": 4243, \"uid\": 1000, "
                    "\"tenant\": \"job-a\", \"cache_bytes\": 0}",
                    200));
    assert_int_equal(tenant_job_owner(r, "4243", &u), 0);
    assert_int_equal(u, 1000);
    json_decref(req("POST /v1/jobs\n\n{\"job\": 4242, \"uid\": 1001, \"tenant\": \"job-b\", "
                    "\"cache_bytes\": 0}",
                    200));
    assert_int_equal(tenant_job_owner(r, "4242", &u), 0);
    assert_int_equal(u, 1001);
    /* only administrators say who owns a job */
    json_decref(req("POST /v1/jobs\nX-Caller: reader\n\n{\"job\": 4245, \"uid\": 7, \"tenant\": "
                    "\"job-b\", \"cache_bytes\": 0}",
                    403));
    assert_int_equal(tenant_job_owner(r, "4245", &u), -ENOENT);
    /* released: forgotten */
    json_decref(req("DELETE /v1/jobs/4242\n\n", 200));
    assert_int_equal(tenant_job_owner(r, "4242", &u), -ENOENT);
    /* POST /v1/tenants with slurm_job and uid records the owner too */
    json_decref(
        req("POST /v1/tenants\n\n{\"name\": \"job-a\", \"slurm_job\": 77, \"uid\": 3000}", 200));
    assert_int_equal(tenant_job_owner(r, "77", &u), 0);
    assert_int_equal(u, 3000);
    j = req("GET /v1/tenants\n\n", 200);
    json_t *tr = json_object_get(j, "trust");
    assert_int_equal(json_integer_value(json_object_get(tr, "job_owners")), 2); /* 4243, 77 */
    json_decref(j);
    /* one spelling of a Slurm job id: "007" is refused, as it would never equal job 7 */
    json_decref(req("POST /v1/tenants\n\n{\"name\": \"job-a\", \"slurm_job\": \"007\", "
                    "\"uid\": 3000}",
                    400));
    json_decref(req("POST /v1/jobs\n\n{\"job\": \"east.7\", \"slurm_job\": \"07\", \"uid\": "
                    "1000, \"tenant\": \"job-a\", \"cache_bytes\": 0}",
                    400));
    assert_int_equal(tenant_job_owner(r, "7", &u), -ENOENT);
    /* a release forgets the owner its job's POST set (by slurm_job, not by the job id), and
     * only that: job "9" of this cluster does not drop the entry west.9 set */
    json_decref(req("POST /v1/jobs\n\n{\"job\": \"east.7\", \"slurm_job\": 7, \"uid\": 1000, "
                    "\"tenant\": \"job-a\", \"cache_bytes\": 0}",
                    200));
    assert_int_equal(tenant_job_owner(r, "7", &u), 0);
    json_decref(req("DELETE /v1/jobs/east.7\n\n", 200));
    assert_int_equal(tenant_job_owner(r, "7", &u), -ENOENT);
    json_decref(
        req("POST /v1/jobs\n\n{\"job\": 9, \"tenant\": \"job-a\", \"cache_bytes\": 0}", 200));
    json_decref(req("POST /v1/jobs\n\n{\"job\": \"west.9\", \"slurm_job\": 9, \"uid\": 1000, "
                    "\"tenant\": \"job-a\", \"cache_bytes\": 0}",
                    200));
    json_decref(req("DELETE /v1/jobs/9\n\n", 200));
    assert_int_equal(tenant_job_owner(r, "9", &u), 0);
    assert_int_equal(u, 1000);
    /* two clusters' job 9 with different uids: SLURM_JOB_ID=9 is believed for neither */
    json_decref(req("POST /v1/jobs\n\n{\"job\": \"east.9\", \"slurm_job\": 9, \"uid\": 1001, "
                    "\"tenant\": \"job-a\", \"cache_bytes\": 0}",
                    200));
    assert_int_equal(tenant_job_owner(r, "9", &u), -EBUSY);
    json_decref(req("DELETE /v1/jobs/west.9\n\n", 200));
    json_decref(req("DELETE /v1/jobs/east.9\n\n", 200));
    assert_int_equal(tenant_job_owner(r, "9", &u), -ENOENT);

    /* default, other, infer, job-a, job-b: 5 of 8 ids; 8 / 4 = 2 are kept for explicit
     * tenants, so one implicit tenant fits. Callers of other uids without a job (this process,
     * outside a Slurm job or pod) are uid-<uid>. */
    struct tier_ioctx io = tenant_resolve(r, getpid(), 2000, 2000);
    const char *first = tenant_name(r, io.tenant);
    if (strncmp(first, "uid-", 4) != 0) {
        print_message("this process is in a job or pod (%s): the reserve is checked by "
                      "test_tenant alone\n",
                      first);
        return;
    }
    assert_string_equal(first, "uid-2000");
    assert_int_equal(tenant_count(r), 7); /* and retired, an id beyond the cap */
    /* a job admitted with an implicit tenant's name registers it: while the job holds the name
     * (jobs.c), reclaim may not hand the id to another tenant */
    uint32_t implicit_id = io.tenant;
    assert_true(tenant_implicit(r, implicit_id));
    json_decref(req("POST /v1/jobs\n\n{\"job\": 4260, \"tenant\": \"uid-2000\", "
                    "\"cache_bytes\": 0}",
                    200));
    assert_false(tenant_implicit(r, implicit_id));
    assert_int_equal(tenant_count(r), 7);
    io = tenant_resolve(r, getpid(), 2001, 2001);
    assert_int_equal(io.tenant, TIER_TENANT_OTHER);
    assert_int_equal(tenant_count(r), 7);
    /* the reserve: two explicit tenants still find ids, then the registry is full */
    json_decref(req("POST /v1/tenants\n\n{\"name\": \"late1\"}", 201));
    json_decref(req("POST /v1/tenants\n\n{\"name\": \"late2\"}", 201));
    json_decref(req("POST /v1/tenants\n\n{\"name\": \"late3\"}", 507));
}

static uint64_t g_reclaim_now = 1000;
static uint64_t reclaim_now(void)
{
    return g_reclaim_now;
}

/* tierd's reclaim hooks (tierd_tenants_reclaim_hooks): an idle implicit tenant that holds hot-
 * tier bytes, a quota or QoS parameters of its own is kept; it is reclaimed once it holds
 * none. GET /v1/tenants lists "retired" and the reclaim counters. */
static void test_tenants_reclaim(void **state)
{
    (void)state;
    json_t *e = tenant_entry("retired");
    assert_non_null(e);
    assert_int_equal(json_integer_value(json_object_get(e, "id")), TENANT_RETIRED_ID);
    json_decref(e);
    json_t *j = req("GET /v1/tenants\n\n", 200);
    assert_non_null(json_object_get(json_object_get(j, "reclaim"), "reclaimed"));
    assert_non_null(json_object_get(json_object_get(j, "reclaim"), "ids_free"));
    json_decref(j);

    /* a registry on a test clock, whose ids are past the fixture's own (infer's disk limit) */
    struct tierd *d = &fx.d;
    struct tenant_reg *r = NULL;
    g_reclaim_now = 1000;
    assert_int_equal(tenant_reg_new(&(struct tenant_reg_config){.max_tenants = 32,
                                                                .idle_reclaim_s = 60,
                                                                .now_s = reclaim_now},
                                    &r),
                     0);
    for (int i = 0; i < 8; i++) {
        char name[16];
        snprintf(name, sizeof(name), "pad%d", i);
        assert_int_equal(tenant_add(r, name, TIER_IO_TRAINING, NULL, NULL), 0);
    }
    tierd_tenants_reclaim_hooks(d, r);
    struct tier_ioctx io = tenant_resolve(r, getpid(), 3000, 3000);
    if (strcmp(tenant_name(r, io.tenant), "uid-3000") != 0) {
        print_message("this process is in a job or pod (%s): reclaim is checked by test_tenant "
                      "alone\n",
                      tenant_name(r, io.tenant));
        tenant_reg_free(r);
        return;
    }
    uint32_t x = io.tenant;
    assert_false(tierd_tenant_holds(d, x));
    /* x reads a file: its block is charged to x */
    struct backend_stat st;
    assert_int_equal(backend_stat(d->backends[0], NULL, "ds/b.bin", &st), 0);
    struct cache_obj o = {
        .be = d->backends[0], .key = "ds/b.bin", .etag = st.etag, .size_bytes = st.size_bytes};
    char buf[64];
    assert_int_equal(cache_read(d->cache, &io, &o, 0, buf, sizeof(buf)), (ssize_t)st.size_bytes);
    assert_true(tierd_tenant_holds(d, x));
    g_reclaim_now += 1000;
    assert_int_equal(tenant_reclaim(r), 0); /* resolved since the last sweep: idle from now */
    g_reclaim_now += 60;
    assert_int_equal(tenant_reclaim(r), 0); /* idle, but holds hot-tier bytes */
    assert_true(tenant_in_use(r, x));
    /* its block evicted by a quota below it: still kept, for the quota of its own */
    assert_int_equal(cache_quota_set(d->cache, x, 1), 0);
    struct cache_tenant_stats cs;
    assert_int_equal(cache_tenant_stats_get(d->cache, x, &cs), 0);
    assert_int_equal(cs.bytes, 0);
    assert_true(tierd_tenant_holds(d, x));
    assert_int_equal(cache_quota_set(d->cache, x, CACHE_QUOTA_DEFAULT), 0);
    assert_false(tierd_tenant_holds(d, x));
    /* QoS parameters of its own keep it too */
    struct sched_qos q = {.weight = 3};
    assert_int_equal(sched_qos_set(d->sched, x, TIER_IO_TRAINING, &q), 0);
    assert_true(tierd_tenant_holds(d, x));
    g_reclaim_now += 60;
    assert_int_equal(tenant_reclaim(r), 0);
    assert_int_equal(sched_qos_set(d->sched, x, TIER_IO_TRAINING, NULL), 0);
    assert_false(tierd_tenant_holds(d, x));
    /* a hint set of its own keeps it (counted under the engine's lock, hints_tenant_sets: not a
     * list sized by one call and filled by another); a file that is not there: nothing charged */
    bool own = !d->hints;
    if (own)
        assert_int_equal(api_fixture_hints_new(&fx), 0);
    const char *paths[] = {"/ns/no-such-file"};
    assert_int_equal(hints_submit(d->hints, "keep", x, paths, 1, false, true), 0);
    assert_int_equal(hints_tenant_sets(d->hints, x), 1);
    assert_int_equal(hints_tenant_sets(d->hints, x + 1), 0);
    assert_true(tierd_tenant_holds(d, x));
    g_reclaim_now += 60;
    assert_int_equal(tenant_reclaim(r), 0);
    assert_int_equal(hints_cancel(d->hints, "keep", x), 0);
    assert_false(tierd_tenant_holds(d, x));
    if (own) {
        hints_free(d->hints);
        d->hints = NULL;
    }
    /* a write-back file it writes keeps it until uploaded (the upload runs as x) */
    struct wb_file *fh = NULL;
    assert_int_equal(wb_file_create(d->wb, "cold", "ckpt/held-by-x", &fh), 0);
    wb_file_set_tenant(fh, x);
    assert_int_equal(wb_write(fh, "x\n", 2, 0), 2);
    assert_int_equal(wb_tenant_pending(d->wb, x), 1);
    assert_true(tierd_tenant_holds(d, x));
    g_reclaim_now += 60;
    assert_int_equal(tenant_reclaim(r), 0);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(wb_wait(d->wb, "cold", "ckpt/held-by-x", 30000), 0);
    assert_int_equal(wb_tenant_pending(d->wb, x), 0);
    assert_false(tierd_tenant_holds(d, x));
    assert_int_equal(cache_tenant_stats_get(d->cache, x, &cs), 0);
    assert_int_equal(cs.quota_evictions, 1); /* its quota of 1 byte above */
    struct cache_tenant_stats rs;
    assert_int_equal(cache_tenant_stats_get(d->cache, TENANT_RETIRED_ID, &rs), 0);
    assert_int_equal(tenant_reclaim(r), 1);
    assert_false(tenant_in_use(r, x));
    /* retired: its quota-eviction counters went to "retired"; the id's next tenant counts from 0 */
    assert_int_equal(cache_tenant_stats_get(d->cache, x, &cs), 0);
    assert_int_equal(cs.quota_evictions, 0);
    assert_int_equal(cs.quota_evicted_bytes, 0);
    struct cache_tenant_stats rs2;
    assert_int_equal(cache_tenant_stats_get(d->cache, TENANT_RETIRED_ID, &rs2), 0);
    assert_int_equal(rs2.quota_evictions, rs.quota_evictions + 1);
    tenant_reg_free(r);
}

/* GET /v1/advice: off without curves; with them (a cache of the fixture's config with curves
 * on, and the advice loop over it), a tenant that read in the last interval is listed with its
 * demand, its curve of 12 points and a split that adds up to the hot tier. */
static void test_advice(void **state)
{
    (void)state;
    struct tierd *d = &fx.d;
    json_t *j = req("GET /v1/advice\n\n", 200);
    assert_false(json_is_true(json_object_get(j, "enabled")));
    assert_non_null(strstr(json_string_value(json_object_get(j, "how")), "curves = on"));
    json_decref(j);

    struct cache *saved = d->cache;
    struct cache_config cc = d->cfg.cache;
    cc.mrc = true;
    cc.mrc_rate = 1.0;
    cc.max_tenants = tenant_id_limit(d->tenants);
    assert_int_equal(cache_open(&cc, &d->cache), 0);
    d->cfg.cache.mrc = true;
    struct advisor_ctx ac = advisor_ctx_tierd(d);
    assert_int_equal(ac.hot_bytes, 4u << 20); /* the RAM level: the fixture has no disk level */
    assert_true(ac.link_bps == 100.0 * (1 << 20));
    assert_int_equal(advisor_new(&ac, NULL, &d->advisor), 0);
    struct tier_ioctx io = tenant_resolve(d->tenants, getpid(), 4242, 4242);
    assert_string_equal(tenant_name(d->tenants, io.tenant), "infer");
    struct backend_stat st;
    assert_int_equal(backend_stat(d->backends[0], NULL, "ds/b.bin", &st), 0);
    struct cache_obj o = {
        .be = d->backends[0], .key = "ds/b.bin", .etag = st.etag, .size_bytes = st.size_bytes};
    char buf[64];
    struct telemetry *saved_tele = d->tele, *tl = NULL;
    struct telemetry_config tc = {.tenant_name = reg_name, .tenant_name_ud = d->tenants};
    assert_int_equal(telemetry_new(&tc, &tl), 0);
    d->tele = tl;
    advisor_tick(d->advisor, 1000000000ull);
    for (int i = 0; i < 4; i++)
        assert_int_equal(cache_read(d->cache, &io, &o, 0, buf, sizeof(buf)),
                         (ssize_t)st.size_bytes);
    /* its training loop waited 3 s and computed 7 s in the interval */
    assert_int_equal(stall_report(tele_stall(tl), io.tenant, "job-0", 3, 7, 10, 1), 0);
    advisor_tick(d->advisor, 11000000000ull);
    j = req("GET /v1/advice\n\n", 200);
    assert_true(json_is_true(json_object_get(j, "enabled")));
    assert_int_equal(json_integer_value(json_object_get(j, "rounds")), 1);
    json_t *ts = json_object_get(j, "tenants");
    assert_int_equal(json_array_size(ts), 1);
    json_t *t = json_array_get(ts, 0);
    assert_string_equal(json_string_value(json_object_get(t, "name")), "infer");
    assert_true(fabs(json_number_value(json_object_get(t, "demand_bps")) -
                     4.0 * (double)st.size_bytes / 10) < 1e-6);
    assert_int_equal(json_array_size(json_object_get(t, "curve")), CACHE_MRC_SIZES);
    assert_true(fabs(json_number_value(json_object_get(t, "stall")) - 0.3) < 1e-9);
    assert_true(fabs(json_number_value(json_object_get(t, "wait_s")) - 3) < 1e-9);
    assert_int_equal(json_integer_value(json_object_get(t, "split_bytes")), ac.hot_bytes);
    json_t *node = json_object_get(j, "node");
    assert_int_equal(json_array_size(json_object_get(node, "curve")), CACHE_MRC_SIZES);
    /* 4 reads of one block: 3 hits at every size */
    assert_true(fabs(json_number_value(json_object_get(node, "hit_ratio_ram")) - 0.75) < 1e-9);
    assert_int_equal(json_integer_value(json_object_get(node, "curve_drops")), 0);
    assert_non_null(json_object_get(node, "curve_drops"));
    json_decref(j);
    /* the advice's series of /metrics (the fixture runs without telemetry: rendered alone) */
    struct dynbuf mb;
    dynbuf_init(&mb, 1 << 20);
    assert_int_equal(api_advice_prom(d, &mb), 0);
    size_t mlen = 0;
    char *text = dynbuf_take(&mb, &mlen);
    dynbuf_fini(&mb);
    assert_non_null(text);
    assert_non_null(strstr(text, "tierd_advice_hit_ratio{tenant=\"infer\",size=\"share\"} "));
    assert_non_null(strstr(text, "tierd_advice_split_bytes{tenant=\"infer\"} 4194304\n"));
    assert_null(strstr(text, "tierd_advice_quota_changes_total{")); /* no change: no sample */
    assert_non_null(strstr(text, "tierd_advice_node_hit_ratio{size=\"ram\"} 0.75\n"));
    assert_non_null(strstr(text, "\ntierd_advice_curve_drops_total 0\n"));
    free(text);

    advisor_free(d->advisor);
    d->advisor = NULL;
    d->tele = saved_tele;
    telemetry_free(tl);
    d->cfg.cache.mrc = false;
    cache_close(d->cache);
    d->cache = saved;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8), cmocka_unit_test(test_non_utf8_names),
        cmocka_unit_test(test_backend_permission_is_403), cmocka_unit_test(test_reader),
        cmocka_unit_test(test_caller_reads), cmocka_unit_test(test_caps), cmocka_unit_test(test_ui),
        cmocka_unit_test(test_telemetry_endpoints), cmocka_unit_test(test_telemetry_off),
        cmocka_unit_test(test_tenants), cmocka_unit_test(test_qos),
        cmocka_unit_test(test_qos_lanes), cmocka_unit_test(test_tenants_reclaim),
        cmocka_unit_test(test_jobs_cluster),
        /* after test_tenants, whose ids a tenant made for the reader would shift */
        cmocka_unit_test(test_progress), cmocka_unit_test(test_advice),
        cmocka_unit_test(test_tenants_trust), /* last: it replaces the fixture */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
