/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_api.c - libFuzzer target for the control API as a pure function (src/daemon/api_int.h):
 * an input is a raw request (tests/lib/api_fixture.h gives the format: "METHOD URL", headers,
 * a blank line, the body), run through api_admit() and api_handle() over a POSIX fixture (a
 * read-cache and a write-back namespace, names that are not UTF-8, a symlink out of the root).
 * Every answer must be a JSON object (json_loadb succeeds), an error must carry "error" and
 * "errno" strings, and the status must be one docs/API.md lists; the only answers of another
 * content type are a 200 of GET /metrics or of one of the dashboard's files, and never empty. The
 * fixture lives for the whole run (its state, pins and staging jobs, carries over from input to
 * input, as in a daemon).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct api_fixture fx;
static bool fx_open;

static void fixture_close(void)
{
    if (fx_open)
        api_fixture_close(&fx);
    fx_open = false;
}

static bool status_documented(unsigned st)
{
    static const unsigned ok[] = {200, 201, 202, 400, 401, 403, 404, 409, 413, 429, 503, 504, 507};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (st == ok[i])
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2 * API_BODY_MAX)
        return 0;
    if (!fx_open) {
        if (api_fixture_open(&fx, "fuzz_api") != 0)
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
    if (!status_documented(r.status)) {
        fprintf(stderr, "fuzz_api: status %u is not documented: %.*s\n", r.status, (int)r.len,
                r.body);
        abort();
    }
    if (r.status >= 400 && (!json_is_string(json_object_get(j, "error")) ||
                            !json_is_string(json_object_get(j, "errno")))) {
        fprintf(stderr, "fuzz_api: error answer without error/errno: %.*s\n", (int)r.len, r.body);
        abort();
    }
    json_decref(j);
    api_reply_fini(&r);
    return 0;
}
