/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_fixture.h - a tierd without HTTP server or FUSE mount, for calling the control API's pure
 * request function (src/api/api_int.h) from tests/fuzz/fuzz_api.c and tests/unit/test_api.c:
 * a POSIX read-cache namespace /ns (files a/f.txt, b.bin, caf\xe9, a symlink esc -> /etc), a POSIX
 * write-back namespace /ck with one sealed file ck/caf\xe9, a RAM-only cache, the scheduler and
 * the stager, with the [api] limits of the config below ([api] max_wait is 20 ms), and the tenant
 * registry: [tenants] max_tenants = API_FIXTURE_MAX_TENANTS, one [tenant infer] (class inference,
 * uid 4242).
 */
#ifndef TIER_TEST_API_FIXTURE_H
#define TIER_TEST_API_FIXTURE_H

#include <stddef.h>

#include "api/api_int.h"
#include "daemon/tierd.h"

#define API_FIXTURE_TOKEN "fuzz-token-0123456789"
#define API_FIXTURE_MAX_TENANTS 8
#define API_FIXTURE_MAX_TENANTS_STR "8"

struct api_fixture {
    struct tierd d;
    char *dir; /* scratch directory, removed by api_fixture_close() */
};

/* 0 or -errno (message on stderr). */
int api_fixture_open(struct api_fixture *f, const char *tag);
/* The hint engine over the fixture's daemon (hints_new with hints_ctx_tierd): f->d.hints. */
int api_fixture_hints_new(struct api_fixture *f);
void api_fixture_close(struct api_fixture *f);

/* One request as the HTTP server would run it, from the raw text
 *   METHOD SP URL LF (HEADER: VALUE LF)* LF BODY
 * URL is percent-decoded (path and the ?path= argument) as libmicrohttpd does. Headers the
 * fixture knows: Authorization, Content-Length, X-Listener: tcp (the TCP listener's rules),
 * X-Caller: reader (a Unix-socket caller without admin rights, uid 65534), X-Caller: infer (one
 * without admin rights whose uid, 4242, is tenant infer's). Fills *out (api_reply_fini()). */
void api_fixture_request(struct api_fixture *f, const char *raw, size_t len, struct api_reply *out);

#endif
