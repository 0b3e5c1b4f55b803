/* SPDX-License-Identifier: Apache-2.0 */
/* test_member_entry.c - unit tests for src/cluster/member_entry: the JSON of a member's omap
 * entry parses strictly and formats back to the same entry. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/member_entry.h"

static int parse(const char *s, struct member_entry *e)
{
    return member_entry_parse(s, strlen(s), e);
}

static void test_parse_valid(void **state)
{
    (void)state;
    struct member_entry e;
    assert_int_equal(parse("{\"id\":\"gpu-07\",\"addr\":\"10.0.0.7:7070\",\"weight\":2.5,"
                           "\"incarnation\":1764740000123456789}",
                           &e),
                     0);
    assert_string_equal(e.id, "gpu-07");
    assert_string_equal(e.addr, "10.0.0.7:7070");
    assert_true(e.weight == 2.5);
    assert_true(e.incarnation == 1764740000123456789ULL);
    /* An integer weight is a number too. */
    assert_int_equal(parse("{\"id\":\"a\",\"addr\":\"\",\"weight\":1,\"incarnation\":0}", &e), 0);
    assert_true(e.weight == 1.0);
}

static void test_parse_refuses(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "[]",
        "{\"id\":\"a\",\"addr\":\"x\",\"weight\":1.0}",
        "{\"id\":\"a/b\",\"addr\":\"x\",\"weight\":1.0,\"incarnation\":1}",
        "{\"id\":\"\",\"addr\":\"x\",\"weight\":1.0,\"incarnation\":1}",
        "{\"id\":\"a\",\"addr\":\"x y\",\"weight\":1.0,\"incarnation\":1}",
        "{\"id\":\"a\",\"addr\":\"x\",\"weight\":0,\"incarnation\":1}",
        "{\"id\":\"a\",\"addr\":\"x\",\"weight\":-2,\"incarnation\":1}",
        "{\"id\":\"a\",\"addr\":\"x\",\"weight\":\"1\",\"incarnation\":1}",
        "{\"id\":\"a\",\"addr\":\"x\",\"weight\":1.0,\"incarnation\":-1}",
        "{\"id\":\"a\",\"addr\":\"x\",\"weight\":1.0,\"incarnation\":1.5}",
        "{\"id\":\"a\",\"addr\":\"x\",\"weight\":1.0,\"incarnation\":1,\"more\":1}",
        "{\"id\":\"a\",\"id\":\"b\",\"addr\":\"x\",\"weight\":1.0,\"incarnation\":1}",
        "{\"id\":\"a\\u0000b\",\"addr\":\"x\",\"weight\":1.0,\"incarnation\":1}",
        "{\"id\":\"a\",\"addr\":\"x\",\"weight\":1.0,\"incarnation\":1} trailing",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct member_entry e = {.id = "untouched"};
        assert_int_equal(parse(bad[i], &e), -EINVAL);
        assert_string_equal(e.id, "untouched");
    }
    char longid[80];
    memset(longid, 'x', 64);
    longid[64] = '\0';
    assert_false(member_id_valid(longid));
    longid[63] = '\0';
    assert_true(member_id_valid(longid));
}

static void test_format_round_trip(void **state)
{
    (void)state;
    struct member_entry e = {
        .id = "node.3_x", .addr = "[::1]:7070", .weight = 0.75, .incarnation = 42};
    char buf[256];
    ssize_t n = member_entry_format(&e, buf, sizeof(buf));
    assert_true(n > 0 && (size_t)n == strlen(buf));
    struct member_entry back;
    assert_int_equal(member_entry_parse(buf, (size_t)n, &back), 0);
    assert_string_equal(back.id, e.id);
    assert_string_equal(back.addr, e.addr);
    assert_true(back.weight == e.weight);
    assert_true(back.incarnation == e.incarnation);
    assert_int_equal(member_entry_format(&e, buf, 10), -ENOSPC);
    e.weight = 0;
    assert_int_equal(member_entry_format(&e, buf, sizeof(buf)), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_valid),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_format_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
