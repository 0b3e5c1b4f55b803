/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_api.c - libFuzzer target for the control API as a pure function (src/api/api_int.h):
 * an input is a raw request (tests/lib/api_fixture.h gives the format: "METHOD URL", headers,
 * a blank line, the body), run through api_admit() and api_handle() over a POSIX fixture (a
 * read-cache and a write-back namespace, names that are not UTF-8, a symlink out of the root).
 * Every answer must be a JSON object (json_loadb succeeds) and its status one docs/API.md lists;
 * an error must carry "error" and "errno" strings, except the one error status whose body is not
 * an error: POST /v1/jobs answers a queued job as 409 JOB (state "queued", its 1-based "position"
 * and its "reason", no "error"), while its other 409 (a conflict under the id) is an error. 422
 * (rejected: it can never fit) is documented for POST /v1/jobs only, as an error. The only
 * answers of another content type are a 200 of GET /metrics or of one of the dashboard's files,
 * and never empty. The fixture, with the hint engine and the telemetry started as main() starts
 * them, lives for the whole run (its state, pins, staging jobs, jobs, hint sets, dataset versions
 * and stall reports carry over from input to input, as in a daemon).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <microhttpd.h>

#include "api_fixture.h"
#include "hints/hints.h"
#include "telemetry/telemetry.h"
#include "tenant/tenant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct api_fixture fx;
static bool fx_open;

static const char *tenant_label(void *ud, uint32_t id)
{
    return tenant_name(ud, id);
}

static void fixture_close(void)
{
    if (fx_open) {
        hints_free(fx.d.hints); /* before the cache, as main() frees it */
        fx.d.hints = NULL;
        telemetry_free(fx.d.tele);
        fx.d.tele = NULL;
        api_fixture_close(&fx);
    }
    fx_open = false;
}

/* Is the input's request POST /v1/jobs? Its request line read as api_fixture_request reads it:
 * the method up to the first space or NUL (the fixture copies it with strndup; a real request's
 * method holds no NUL), the path up to '?' or the line's end, percent-decoded. */
static bool is_jobs_post(const uint8_t *data, size_t size)
{
    const char *raw = (const char *)data, *end = raw + size;
    const char *nl = memchr(raw, '\n', size);
    const char *le = nl ? nl : end;
    const char *sp = memchr(raw, ' ', (size_t)(le - raw));
    if (!sp || strnlen(raw, (size_t)(sp - raw)) != 4 || memcmp(raw, "POST", 4) != 0)
        return false;
    const char *url = sp + 1;
    const char *q = memchr(url, '?', (size_t)(le - url));
    char *path = strndup(url, (size_t)((q ? q : le) - url));
    if (!path)
        return false;
    path[MHD_http_unescape(path)] = '\0';
    bool yes = strcmp(path, "/v1/jobs") == 0;
    free(path);
    return yes;
}

static bool status_documented(unsigned st, bool jobs_post)
{
    static const unsigned ok[] = {200, 201, 202, 400, 401, 403, 404, 409, 413, 429, 503, 504, 507};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (st == ok[i])
            return true;
    return st == 422 && jobs_post;
}

static bool is_str(json_t *j, const char *key)
{
    return json_is_string(json_object_get(j, key));
}

static bool is_count(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    return json_is_integer(v) && json_integer_value(v) >= 0;
}

/* The 409 JOB of a queued job (docs/API.md, "Jobs" and JOB): its fields, state "queued", a
 * 1-based position, a reason; no "error" or "errno" (it is an answer, not a failure). */
static bool queued_job(json_t *j)
{
    json_t *pos = json_object_get(j, "position");
    json_t *st = json_object_get(j, "staging");
    const char *state = json_string_value(json_object_get(j, "state"));
    return is_str(j, "job") && is_str(j, "tenant") && is_str(j, "class") && state &&
           strcmp(state, "queued") == 0 && json_is_integer(pos) && json_integer_value(pos) >= 1 &&
           is_str(j, "reason") && is_count(j, "cache_bytes") && is_count(j, "bandwidth_bps") &&
           json_is_array(json_object_get(j, "stage")) &&
           json_is_array(json_object_get(j, "stage_out")) && json_is_object(st) &&
           is_str(st, "state") && json_is_number(json_object_get(j, "submitted_at")) &&
           !json_object_get(j, "error") && !json_object_get(j, "errno") &&
           !json_object_get(j, "admitted_at");
}

/* The 200 of POST /v1/jobs: a dry run's verdict, or the JOB admitted (since admitted_at). */
static bool admitted_job(json_t *j)
{
    const char *state = json_string_value(json_object_get(j, "state"));
    const char *verdict = json_string_value(json_object_get(j, "verdict"));
    if (json_is_true(json_object_get(j, "dry_run")))
        return is_str(j, "job") && is_str(j, "reason") && verdict &&
               (strcmp(verdict, "valid") == 0 || strcmp(verdict, "conflict") == 0);
    return is_str(j, "job") && is_str(j, "tenant") && state && strcmp(state, "admitted") == 0 &&
           !json_object_get(j, "position") && json_is_number(json_object_get(j, "admitted_at"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2 * API_BODY_MAX)
        return 0;
    if (!fx_open) {
        if (api_fixture_open(&fx, "fuzz_api") != 0 || api_fixture_hints_new(&fx) != 0)
            abort();
        struct telemetry_config tc = {.max_tenants = API_FIXTURE_MAX_TENANTS,
                                      .tenant_name = tenant_label,
                                      .tenant_name_ud = fx.d.tenants};
        if (telemetry_new(&tc, &fx.d.tele) != 0)
            abort();
        fx_open = true;
        atexit(fixture_close);
    }
    struct api_reply r;
    api_fixture_request(&fx, (const char *)data, size, &r);
    if (r.content_type) {
        static const char *const types[] = {
            "text/plain; version=0.0.4; charset=utf-8", "text/html; charset=utf-8",
            "text/javascript; charset=utf-8", "text/css; charset=utf-8"};
        bool known = false;
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
            known = known || strcmp(r.content_type, types[i]) == 0;
        if (!known || r.status != 200 || r.len == 0) {
            fprintf(stderr, "fuzz_api: status %u, content type %s, %zu bytes\n", r.status,
                    r.content_type, r.len);
            abort();
        }
        api_reply_fini(&r);
        return 0;
    }
    json_error_t je;
    json_t *j = r.body ? json_loadb(r.body, r.len, 0, &je) : NULL;
    if (!j || !json_is_object(j)) {
        fprintf(stderr, "fuzz_api: status %u, answer is not a JSON object: %.*s\n", r.status,
                (int)(r.len > 300 ? 300 : r.len), r.body ? r.body : "(null)");
        abort();
    }
    bool jobs_post = is_jobs_post(data, size);
    if (!status_documented(r.status, jobs_post)) {
        fprintf(stderr, "fuzz_api: status %u is not documented: %.*s\n", r.status, (int)r.len,
                r.body);
        abort();
    }
    bool error = is_str(j, "error") && is_str(j, "errno");
    if (r.status == 409 && jobs_post && !error && !queued_job(j)) {
        fprintf(stderr,
                "fuzz_api: 409 of POST /v1/jobs is neither an error nor a queued JOB: %.*s\n",
                (int)r.len, r.body);
        abort();
    }
    if (r.status == 200 && jobs_post && !admitted_job(j)) {
        fprintf(stderr,
                "fuzz_api: 200 of POST /v1/jobs is neither a dry run nor an admitted JOB: "
                "%.*s\n",
                (int)r.len, r.body);
        abort();
    }
    if (r.status >= 400 && !error && !(r.status == 409 && jobs_post)) {
        fprintf(stderr, "fuzz_api: error answer without error/errno: %.*s\n", (int)r.len, r.body);
        abort();
    }
    json_decref(j);
    api_reply_fini(&r);
    return 0;
}
