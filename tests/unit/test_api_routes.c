/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_api_routes.c - the control API's route table (api_routes[], src/api/api_route.c) against
 * docs/API.md "Routes", both ways: every route is documented with its access, whether it changes
 * state and its body bound, and every documented route is in the table. Then each row as
 * admission sees it: on the Unix socket a caller without admin rights is refused exactly the
 * admin routes (403), on TCP without the token only the public routes pass (else 401), and a
 * declared body one byte over the row's bound is refused (413); a request no row matches is
 * refused to such a caller unless it is a GET or HEAD. No row hides behind an earlier one.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/api_int.h"
#include "daemon/tierd.h"

#define DOC_ROWS_MAX 128

static const char *access_name(enum api_access a)
{
    switch (a) {
    case API_PUBLIC:
        return "public";
    case API_READ:
        return "read";
    case API_OWN:
        return "own tenant";
    case API_ADMIN:
        return "admin";
    }
    return "?";
}

static void size_text(size_t n, char *buf, size_t len)
{
    if (n % (1024 * 1024) == 0)
        snprintf(buf, len, "%zu MiB", n / (1024 * 1024));
    else if (n % 1024 == 0)
        snprintf(buf, len, "%zu KiB", n / 1024);
    else
        snprintf(buf, len, "%zu bytes", n);
}

/* The body limit column of a row: "64 KiB", or "32 MiB; 4 MiB for others". */
static void body_text(const struct api_route *r, char *buf, size_t len)
{
    char a[32], u[32];
    size_text(r->body_max, a, sizeof(a));
    size_text(r->body_max_user, u, sizeof(u));
    if (r->body_max == r->body_max_user)
        snprintf(buf, len, "%s", a);
    else
        snprintf(buf, len, "%s; %s for others", a, u);
}

/* The path column of a row: the path, with '*' after a prefix route's. */
static void path_text(const struct api_route *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", r->path, r->match == API_PREFIX ? "*" : "");
}

struct doc_row {
    char cell[5][96]; /* method, path, access, mutates, body limit; without the backticks */
    bool seen;
};

/* A cell of a markdown table row, trimmed, backticks dropped. */
static void cell_copy(char *dst, size_t len, const char *s, size_t n)
{
    while (n && (*s == ' '))
        s++, n--;
    while (n && s[n - 1] == ' ')
        n--;
    size_t w = 0;
    for (size_t i = 0; i < n && w + 1 < len; i++)
        if (s[i] != '`')
            dst[w++] = s[i];
    dst[w] = '\0';
}

/* The rows of docs/API.md's route table (the one headed "| method | path | access | mutates |
 * body limit |"). */
static size_t read_doc(struct doc_row *rows, size_t max)
{
    const char *src = getenv("TIER_SRC");
    char path[4096];
    snprintf(path, sizeof(path), "%s/docs/API.md", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (TIER_SRC is the source tree)", path);
    char line[4096];
    size_t n = 0;
    int state = 0; /* 0: before the header, 1: separator next, 2: rows */
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (state == 0) {
            if (strcmp(line, "| method | path | access | mutates | body limit |") == 0)
                state = 1;
            continue;
        }
        if (state == 1) {
            state = 2;
            continue;
        }
        if (line[0] != '|')
            break;
        if (n == max)
            fail_msg("more than %zu rows in the route table of %s", max, path);
        const char *p = line + 1;
        for (int c = 0; c < 5; c++) {
            const char *e = strchr(p, '|');
            if (!e)
                fail_msg("%s: route row '%s' has not 5 cells", path, line);
            cell_copy(rows[n].cell[c], sizeof(rows[n].cell[c]), p, (size_t)(e - p));
            p = e + 1;
        }
        rows[n].seen = false;
        n++;
    }
    fclose(f);
    if (state != 2)
        fail_msg("%s has no route table (\"| method | path | access | mutates | body limit |\")",
                 path);
    return n;
}

static void test_table_matches_doc(void **state)
{
    (void)state;
    static struct doc_row rows[DOC_ROWS_MAX];
    size_t n = read_doc(rows, DOC_ROWS_MAX);
    for (size_t i = 0; i < api_nroutes; i++) {
        const struct api_route *r = &api_routes[i];
        char p[128], body[96];
        path_text(r, p, sizeof(p));
        body_text(r, body, sizeof(body));
        struct doc_row *row = NULL;
        for (size_t k = 0; k < n; k++)
            if (strcmp(rows[k].cell[0], r->method) == 0 && strcmp(rows[k].cell[1], p) == 0) {
                if (row)
                    fail_msg("docs/API.md lists %s %s twice", r->method, p);
                row = &rows[k];
            }
        if (!row)
            fail_msg("route %s %s is not in docs/API.md's route table", r->method, p);
        row->seen = true;
        if (strcmp(row->cell[2], access_name(r->access)) != 0)
            fail_msg("%s %s: access is %s, docs/API.md says %s", r->method, p,
                     access_name(r->access), row->cell[2]);
        if (strcmp(row->cell[3], r->mutates ? "yes" : "no") != 0)
            fail_msg("%s %s: mutates is %s, docs/API.md says %s", r->method, p,
                     r->mutates ? "yes" : "no", row->cell[3]);
        if (strcmp(row->cell[4], body) != 0)
            fail_msg("%s %s: body limit is %s, docs/API.md says %s", r->method, p, body,
                     row->cell[4]);
    }
    for (size_t k = 0; k < n; k++)
        if (!rows[k].seen)
            fail_msg("docs/API.md lists %s %s, which is no route", rows[k].cell[0],
                     rows[k].cell[1]);
    assert_int_equal(n, api_nroutes);
}

/* A url the row stands for: its path, with "x" after a prefix route's. */
static void url_of(const struct api_route *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", r->path, r->match == API_PREFIX ? "x" : "");
}

static void test_rows_well_formed(void **state)
{
    (void)state;
    for (size_t i = 0; i < api_nroutes; i++) {
        const struct api_route *r = &api_routes[i];
        char url[128];
        url_of(r, url, sizeof(url));
        assert_non_null(r->handler);
        assert_int_equal(r->path[0], '/');
        if (r->match == API_PREFIX)
            assert_int_equal(r->path[strlen(r->path) - 1], '/');
        /* only the dashboard's files are public, and only GET; a route that changes state is
         * never readable by everyone without a check of who asks */
        if (r->access == API_PUBLIC)
            assert_string_equal(r->method, "GET");
        if (r->mutates)
            assert_true(r->access == API_ADMIN || r->access == API_OWN);
        assert_true(r->body_max_user <= r->body_max);
        const char *rest = NULL;
        if (api_route_find(r->method, url, &rest) != r)
            fail_msg("row %zu (%s %s) is hidden by an earlier row", i, r->method, r->path);
        assert_string_equal(rest, r->match == API_PREFIX ? "x" : "");
    }
}

static struct tierd d;

static int admit(const char *method, const char *url, bool tcp, const char *auth, bool admin,
                 int64_t len, unsigned *status)
{
    struct api_head h = {.method = method,
                         .url = url,
                         .tcp = tcp,
                         .authorization = auth,
                         .may_mutate = admin,
                         .content_length = len};
    struct api_reply out = {0};
    int rc = api_admit(&d, &h, &out);
    *status = rc ? out.status : 0;
    api_reply_fini(&out);
    return rc;
}

static void test_admission_per_row(void **state)
{
    (void)state;
    static char token[] = "routes-token-0123456789";
    d.cfg.api_token = token;
    const char *bearer = "Bearer routes-token-0123456789";
    unsigned st;
    for (size_t i = 0; i < api_nroutes; i++) {
        const struct api_route *r = &api_routes[i];
        char url[128];
        url_of(r, url, sizeof(url));
        bool admin_only = r->access == API_ADMIN;
        /* the Unix socket: a caller without admin rights */
        assert_int_equal(admit(r->method, url, false, NULL, false, -1, &st), admin_only);
        if (admin_only)
            assert_int_equal(st, 403);
        assert_int_equal(admit(r->method, url, false, NULL, true, -1, &st), 0);
        /* TCP: the token, or a public route */
        assert_int_equal(admit(r->method, url, true, NULL, true, -1, &st), r->access != API_PUBLIC);
        if (r->access != API_PUBLIC)
            assert_int_equal(st, 401);
        assert_int_equal(admit(r->method, url, true, bearer, true, -1, &st), 0);
        /* body bounds: an administrator's and anyone else's */
        assert_int_equal(api_body_max(r->method, url, true), r->body_max);
        assert_int_equal(api_body_max(r->method, url, false), r->body_max_user);
        assert_int_equal(admit(r->method, url, false, NULL, true, (int64_t)r->body_max, &st), 0);
        assert_int_equal(admit(r->method, url, false, NULL, true, (int64_t)r->body_max + 1, &st),
                         1);
        assert_int_equal(st, 413);
        if (!admin_only) {
            assert_int_equal(
                admit(r->method, url, false, NULL, false, (int64_t)r->body_max_user + 1, &st), 1);
            assert_int_equal(st, 413);
        }
    }
    /* no row: refused to a caller without admin rights unless GET or HEAD, 64 KiB bound */
    assert_int_equal(admit("POST", "/v1/nothing", false, NULL, false, -1, &st), 1);
    assert_int_equal(st, 403);
    assert_int_equal(admit("DELETE", "/v1/status", false, NULL, false, -1, &st), 1);
    assert_int_equal(admit("GET", "/v1/nothing", false, NULL, false, -1, &st), 0);
    assert_int_equal(admit("HEAD", "/v1/status", false, NULL, false, -1, &st), 0);
    assert_int_equal(admit("GET", "/ui/../v1/telemetry", true, NULL, true, -1, &st), 1);
    assert_int_equal(st, 401);
    assert_int_equal(api_body_max("PUT", "/v1/nothing", true), API_BODY_MAX);
    assert_null(api_route_find("GET", "/v1/statusx", NULL));
    d.cfg.api_token = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_matches_doc),
        cmocka_unit_test(test_rows_well_formed),
        cmocka_unit_test(test_admission_per_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
