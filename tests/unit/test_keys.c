/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_keys.c - unit tests of backend_key_valid() (src/tiers/backend.c): the traversal corpus
 * that must be refused, the edge cases that must be accepted, and the dispatchers refusing an
 * invalid key before any backend is called.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"
#include "fakebe.h"
#include "tiers/backend.h"

static int valid(const char *key, bool allow_dir)
{
    tier_err_clear();
    return backend_key_valid(key, strlen(key), allow_dir);
}

/* Refused with -EINVAL, and the message says something. */
static void assert_bad(const char *key, bool allow_dir)
{
    int rc = valid(key, allow_dir);
    if (rc != -EINVAL)
        fail_msg("key '%s' (allow_dir %d): got %d, want -EINVAL", key, allow_dir, rc);
    assert_true(tier_err_msg()[0] != '\0');
}

static void test_traversal_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "../x", "a/../../b", "/etc/passwd", "a//b", "./a",          "a/.", "..",     ".",
        "a/..", "a/./b",     "/",           "//",   "a/b/../../..", "../", "x/../y",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_bad(bad[i], false);
        assert_bad(bad[i], true);
    }
    assert_int_equal(backend_key_valid(NULL, 0, false), -EINVAL);
    assert_int_equal(backend_key_valid("", 0, true), -EINVAL);
    /* The message names the problem. */
    valid("a/../b", false);
    assert_non_null(strstr(tier_err_msg(), ".."));
    valid("/etc/passwd", false);
    assert_non_null(strstr(tier_err_msg(), "absolute"));
}

static void test_nul_inside(void **state)
{
    (void)state;
    static const char k[] = "a\0/../../etc/passwd";
    tier_err_clear();
    assert_int_equal(backend_key_valid(k, sizeof(k) - 1, false), -EINVAL);
    assert_non_null(strstr(tier_err_msg(), "NUL"));
    static const char k2[] = "abc\0";
    assert_int_equal(backend_key_valid(k2, sizeof(k2) - 1, false), -EINVAL);
    /* len bounds the check: the same bytes up to the NUL are fine. */
    assert_int_equal(backend_key_valid(k2, 3, false), 0);
}

static void test_lengths(void **state)
{
    (void)state;
    char key[BACKEND_KEY_MAX + 2];
    /* 1024 bytes: four 250-byte segments, separators and a short last one: the longest key. */
    size_t n = 0;
    for (int s = 0; s < 5; s++) {
        if (s)
            key[n++] = '/';
        size_t seg = s < 4 ? 250 : BACKEND_KEY_MAX - n;
        memset(key + n, 'a' + s, seg);
        n += seg;
    }
    key[n] = '\0';
    assert_int_equal(n, BACKEND_KEY_MAX);
    assert_int_equal(valid(key, false), 0);
    /* 1025 bytes. */
    key[n] = 'z';
    key[n + 1] = '\0';
    assert_int_equal(valid(key, false), -ENAMETOOLONG);
    assert_true(tier_err_msg()[0] != '\0');

    char seg[300];
    memset(seg, 'x', 255);
    seg[255] = '\0';
    assert_int_equal(valid(seg, false), 0);
    memset(seg, 'x', 256);
    seg[256] = '\0';
    assert_int_equal(valid(seg, false), -ENAMETOOLONG);
    char two[320];
    snprintf(two, sizeof(two), "d/%s", seg);
    assert_int_equal(valid(two, false), -ENAMETOOLONG);
    assert_non_null(strstr(tier_err_msg(), "segment"));
}

static void test_control_chars(void **state)
{
    (void)state;
    for (int c = 1; c < 0x20; c++) {
        char k[8];
        snprintf(k, sizeof(k), "a%cb", c);
        assert_bad(k, false);
    }
    assert_bad("a\x7f", false);
    assert_bad("\tx", true);
    assert_bad("dir\n/", true);
}

static void test_trailing_slash(void **state)
{
    (void)state;
    assert_bad("a/", false);
    assert_bad("a/b/", false);
    assert_int_equal(valid("a/", true), 0);
    assert_int_equal(valid("a/b/", true), 0);
    assert_bad("a//", true);
    assert_bad("../", true);
    assert_bad("a/../", true);
}

static void test_valid_keys(void **state)
{
    (void)state;
    static const char *const good[] = {
        "a",
        "a/b/c.bin",
        "..a",
        "a..",
        "...",
        ".hidden",
        "a/.b",
        "a/..b/c",
        "a b",
        "a~b",
        "\xc3\xa9t\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.bin",
        "\xf0\x9f\x98\x80",
        "-",
        "a/b.",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        int rc = valid(good[i], false);
        if (rc != 0)
            fail_msg("key '%s' refused: %s", good[i], tier_err_msg());
        assert_int_equal(valid(good[i], true), 0);
    }
}

/* Calls that reached the fake backend, every operation together: the dispatchers must validate
 * first. */
static uint64_t called(struct backend *be)
{
    uint64_t n = 0;
    for (int op = 0; op < FAKEBE_NOPS; op++)
        n += fakebe_calls(be, (enum fakebe_op)op);
    return n;
}

static void test_dispatchers_refuse(void **state)
{
    (void)state;
    struct backend *be = fakebe_mem_new("never");
    assert_non_null(be);
    fakebe_add(be, "a/b", 4, "v1");
    struct backend_stat st;
    char buf[4];
    char *id = NULL;
    struct backend_list_page page;
    assert_int_equal(backend_stat(be, NULL, "../x", &st), -EINVAL);
    assert_int_equal(backend_read(be, NULL, "/etc/passwd", 0, buf, 4, NULL, NULL), -EINVAL);
    assert_int_equal(backend_put(be, NULL, "a//b", buf, 4, NULL), -EINVAL);
    assert_int_equal(backend_del(be, NULL, "a/"), -EINVAL);
    assert_int_equal(backend_mpu_create(be, NULL, "./a", &id), -EINVAL);
    assert_int_equal(backend_list(be, NULL, "../", "/", NULL, 0, &page), -EINVAL);
    assert_int_equal(backend_list(be, NULL, "a/", ",", NULL, 0, &page), -EINVAL);
    assert_int_equal(backend_read_parallel(be, NULL, "a/../b", 0, buf, 4, 1, 1, NULL), -EINVAL);
    assert_int_equal(called(be), 0);
    /* A mid-segment listing prefix and a valid key reach the backend. */
    assert_int_equal(backend_list(be, NULL, "data/shard-0", "/", NULL, 0, &page), 0);
    backend_list_page_fini(&page);
    assert_int_equal(backend_stat(be, NULL, "a/b", &st), 0);
    assert_int_equal(called(be), 2);
    /* An unfinished last segment only filters names: "." and ".." are fine there, but not as
     * complete segments, and control characters never. */
    assert_int_equal(backend_list(be, NULL, "logs/.", NULL, NULL, 0, &page), 0);
    backend_list_page_fini(&page);
    assert_int_equal(backend_list(be, NULL, "..", NULL, NULL, 0, &page), 0);
    backend_list_page_fini(&page);
    assert_int_equal(backend_list(be, NULL, "a/", NULL, NULL, 0, &page), 0);
    backend_list_page_fini(&page);
    assert_int_equal(called(be), 5);
    assert_int_equal(backend_list(be, NULL, "../x", NULL, NULL, 0, &page), -EINVAL);
    assert_int_equal(backend_list(be, NULL, "a/./", NULL, NULL, 0, &page), -EINVAL);
    assert_int_equal(backend_list(be, NULL, "/", NULL, NULL, 0, &page), -EINVAL);
    assert_int_equal(backend_list(be, NULL, "a//x", NULL, NULL, 0, &page), -EINVAL);
    assert_int_equal(backend_list(be, NULL, "a/x\n", NULL, NULL, 0, &page), -EINVAL);
    assert_int_equal(called(be), 5);
    backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traversal_refused),
        cmocka_unit_test(test_nul_inside),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_control_chars),
        cmocka_unit_test(test_trailing_slash),
        cmocka_unit_test(test_valid_keys),
        cmocka_unit_test(test_dispatchers_refuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
