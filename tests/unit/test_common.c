/* SPDX-License-Identifier: Apache-2.0 */
/* test_common.c - unit tests for src/common: number parsing, bounded buffers, string helpers, vec.h
 * and list.h, the escaping of control bytes in log lines. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/list.h"
#include "common/strutil.h"
#include "common/vec.h"

static void test_parse_size(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(tier_parse_size("4096", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(tier_parse_size("64K", &v), 0);
    assert_int_equal(v, 65536);
    assert_int_equal(tier_parse_size("8MiB", &v), 0);
    assert_int_equal(v, 8u << 20);
    assert_int_equal(tier_parse_size("1.5g", &v), 0);
    assert_int_equal(v, 3ull << 29);
    assert_int_equal(tier_parse_size("", &v), -EINVAL);
    assert_int_equal(tier_parse_size("12 parsecs", &v), -EINVAL);
    assert_int_equal(tier_parse_size("-1", &v), -EINVAL);
    assert_int_equal(tier_parse_size("99999999999T", &v), -ERANGE);
}

static void test_parse_misc(void **state)
{
    (void)state;
    uint64_t v = 0;
    int b = -1;
    assert_int_equal(tier_parse_u64("18446744073709551615", &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(tier_parse_u64("18446744073709551616", &v), -ERANGE);
    assert_int_equal(tier_parse_u64("12x", &v), -EINVAL);
    assert_int_equal(tier_parse_u64(" 1", &v), -EINVAL);
    assert_int_equal(tier_parse_duration_ms("5s", &v), 0);
    assert_int_equal(v, 5000);
    assert_int_equal(tier_parse_duration_ms("250", &v), 0);
    assert_int_equal(v, 250);
    assert_int_equal(tier_parse_duration_ms("2m", &v), 0);
    assert_int_equal(v, 120000);
    assert_int_equal(tier_parse_duration_ms("2 fortnights", &v), -EINVAL);
    assert_int_equal(tier_parse_bool("Yes", &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(tier_parse_bool("off", &b), 0);
    assert_int_equal(b, 0);
    assert_int_equal(tier_parse_bool("maybe", &b), -EINVAL);
}

static void test_strlcpy_hex(void **state)
{
    (void)state;
    char buf[4];
    assert_int_equal(tier_strlcpy(buf, "abcdef", sizeof(buf)), 6);
    assert_string_equal(buf, "abc");
    assert_int_equal(tier_strlcpy(buf, "ab", sizeof(buf)), 2);
    assert_string_equal(buf, "ab");
    char hex[7];
    tier_hex("\x01\xab\xff", 3, hex);
    assert_string_equal(hex, "01abff");
    char human[32];
    assert_string_equal(tier_fmt_bytes(1536, human, sizeof(human)), "1.5 KiB");
    assert_string_equal(tier_fmt_bytes(12, human, sizeof(human)), "12 B");
    char *d = tier_dir_prefix("a/b");
    assert_non_null(d);
    assert_string_equal(d, "a/b/");
    free(d);
}

/* tier_name_chars: the names of tenants, hint sets, stall reporters and cluster members */
static void test_name_chars(void **state)
{
    (void)state;
    assert_true(tier_name_chars("job-7_a.b", 9));
    assert_true(tier_name_chars("Z9", 2));
    assert_false(tier_name_chars("", 0));
    assert_false(tier_name_chars("a b", 3));
    assert_false(tier_name_chars("a/b", 3));
    assert_false(tier_name_chars("caf\xc3\xa9", 5));
    assert_true(tier_name_chars("ab/", 2)); /* only the n bytes asked about */
}

static void test_dynbuf_bounded(void **state)
{
    (void)state;
    struct dynbuf b;
    dynbuf_init(&b, 10);
    assert_int_equal(dynbuf_append(&b, "hello", 5), 0);
    assert_int_equal(dynbuf_printf(&b, "%d", 1234), 0);
    assert_string_equal(b.data, "hello1234");
    assert_int_equal(dynbuf_append(&b, "xy", 2), -E2BIG);
    assert_string_equal(b.data, "hello1234"); /* a failed append changes nothing */
    assert_int_equal(dynbuf_append(&b, "z", 1), 0);
    assert_int_equal(b.len, 10);
    size_t len = 0;
    char *p = dynbuf_take(&b, &len);
    assert_int_equal(len, 10);
    assert_null(b.data);
    free(p);
    dynbuf_fini(&b);
}

static void test_err_msg(void **state)
{
    (void)state;
    tier_err_clear();
    assert_string_equal(tier_err_msg(), "");
    tier_err_set("bucket %s: %s", "b1", "NoSuchBucket");
    assert_string_equal(tier_err_msg(), "bucket b1: NoSuchBucket");
}

static void test_log_escape(void **state)
{
    (void)state;
    char out[128];
    /* CR, ESC (a colour sequence), LF, TAB, DEL, a C1 CSI in UTF-8 (U+009B); é kept; a backslash
     * doubled, so a logged "\\n" cannot pass for an escaped line break */
    const char *in = "a\rb\x1b[31mred\nx\ty\x7f\xc2\x9b"
                     "caf\xc3\xa9 \\n";
    size_t n = tier_log_escape(in, out, sizeof(out));
    assert_string_equal(out, "a\\rb\\x1b[31mred\\nx\\ty\\x7f\\xc2\\x9bcaf\xc3\xa9 \\\\n");
    assert_int_equal(n, strlen(out));
    for (size_t i = 0; i < n; i++)
        assert_true((unsigned char)out[i] >= 0x20 && (unsigned char)out[i] != 0x7f);
    /* an escape that does not fit is left out whole: "ab" + "\x01" needs 4 more bytes */
    assert_int_equal(tier_log_escape("ab\x01z", out, 6), 2);
    assert_string_equal(out, "ab");
    assert_int_equal(tier_log_escape("ab\x01z", out, 7), 6);
    assert_string_equal(out, "ab\\x01");
    assert_int_equal(tier_log_escape("", out, 1), 0);
    /* bytes of no valid UTF-8 sequence are escaped: a raw C1 CSI (0x9b), a Latin-1 é, a lone
     * continuation byte, an overlong '/', a surrogate, a lead byte cut short; 4-byte UTF-8 kept */
    tier_log_escape("\x9b[2J \xe9 \x80 \xc0\xaf \xed\xa0\x80 \xe2\x82 \xf0\x9f\x98\x80", out,
                    sizeof(out));
    assert_string_equal(out, "\\x9b[2J \\xe9 \\x80 \\xc0\\xaf \\xed\\xa0\\x80 \\xe2\\x82 "
                             "\xf0\x9f\x98\x80");
    /* characters that change how a line reads without showing are escaped (a right-to-left
     * override U+202E, a zero-width space U+200B, a line separator U+2028, a BOM); é is kept */
    tier_log_escape("a\xe2\x80\xae b\xe2\x80\x8b c\xe2\x80\xa8 \xef\xbb\xbf \xc3\xa9", out,
                    sizeof(out));
    assert_string_equal(out, "a\\xe2\\x80\\xae b\\xe2\\x80\\x8b c\\xe2\\x80\\xa8 "
                             "\\xef\\xbb\\xbf \xc3\xa9");
    /* a character that does not fit whole is left out whole: "ab" + "é" (2 bytes) */
    assert_int_equal(tier_log_escape("ab\xc3\xa9", out, 4), 2);
    assert_string_equal(out, "ab");
    /* tier_utf8_cut drops only an incomplete last character */
    assert_int_equal(tier_utf8_cut("ab\xc3", 3), 2);
    assert_int_equal(tier_utf8_cut("ab\xe2\x82", 4), 2);
    assert_int_equal(tier_utf8_cut("ab\xf0\x9f\x98", 5), 2);
    assert_int_equal(tier_utf8_cut("ab\xc3\xa9", 4), 4);
    assert_int_equal(tier_utf8_cut("ab\xf0\x9f\x98\x80", 6), 6);
    assert_int_equal(tier_utf8_cut("ab\x80", 3), 3); /* not a cut character: escaped later */
    assert_int_equal(tier_utf8_cut("", 0), 0);
}

/* A message longer than tier_log's buffer is cut at a character's start: no half character
 * (which would be logged as \xNN bytes) at the end. */
static void test_log_cut_utf8(void **state)
{
    (void)state;
    char path[] = "/tmp/test_common_cut.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    char long_msg[3000];
    size_t k = 0;
    /* 2-byte characters: the buffer's 2047 bytes end in the first half of one */
    while (k + 2 < sizeof(long_msg)) {
        long_msg[k++] = '\xc3';
        long_msg[k++] = '\xa9';
    }
    long_msg[k] = '\0';
    log_err("%s", long_msg);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    char buf[4096];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_null(strstr(buf, "\\x"));
    assert_true(n >= 2 && buf[n - 1] == '\n' && (unsigned char)buf[n - 2] == 0xa9);
}

/* What tier_log writes to stderr carries the escaped message: one line, no raw control byte. */
static void test_log_line_escaped(void **state)
{
    (void)state;
    char path[] = "/tmp/test_common_log.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    log_err("hint line '%s' refused", "/data/x\r\x1b[2Kfake line\ntierd: all good");
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    char buf[512];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "hint line '/data/x\\r\\x1b[2Kfake line\\ntierd: all good' "
                                "refused\n"));
    assert_ptr_equal(strchr(buf, '\n'), buf + n - 1); /* one line: the newline ends it */
    assert_null(strchr(buf, '\r'));
    assert_null(strchr(buf, '\x1b'));
}

static void test_vec_grow(void **state)
{
    (void)state;
    size_t cap = 0;
    int *a = tier_vec_grow(NULL, &cap, 1, sizeof(int), 4);
    assert_non_null(a);
    assert_int_equal(cap, 4);
    for (size_t i = 0; i < cap; i++)
        assert_int_equal(a[i], 0);
    a[3] = 7;
    int *same = tier_vec_grow(a, &cap, 4, sizeof(int), 4);
    assert_ptr_equal(same, a); /* room already: no realloc */
    a = tier_vec_grow(a, &cap, 9, sizeof(int), 4);
    assert_non_null(a);
    assert_int_equal(cap, 16); /* 4 -> 8 -> 16 */
    assert_int_equal(a[3], 7);
    for (size_t i = 4; i < cap; i++)
        assert_int_equal(a[i], 0); /* the new elements are zeroed */
    size_t before = cap;
    assert_null(tier_vec_grow(a, &cap, SIZE_MAX / 2, sizeof(int), 4)); /* overflows */
    assert_int_equal(cap, before); /* a and cap unchanged on failure */
    assert_int_equal(a[3], 7);
    a = tier_vec_resize(a, &cap, 21, sizeof(int));
    assert_non_null(a);
    assert_int_equal(cap, 21);
    assert_int_equal(a[20], 0);
    free(a);
}

struct litem {
    int v;
    struct tier_list link;
};

static void test_list(void **state)
{
    (void)state;
    struct tier_list head;
    tier_list_init(&head);
    assert_true(tier_list_empty(&head));
    assert_null(tier_list_first(&head));
    struct litem it[4];
    for (int i = 0; i < 4; i++) {
        it[i].v = i;
        tier_list_init(&it[i].link);
        assert_false(tier_list_linked(&it[i].link));
    }
    tier_list_push_tail(&head, &it[1].link);
    tier_list_push_tail(&head, &it[2].link);
    tier_list_push_head(&head, &it[0].link);
    tier_list_push_tail(&head, &it[3].link);
    int want = 0;
    struct tier_list *l, *tmp;
    tier_list_foreach (l, &head) {
        assert_int_equal(tier_list_entry(l, struct litem, link)->v, want);
        want++;
    }
    assert_int_equal(want, 4);
    struct tier_list *last = tier_list_last(&head);
    assert_ptr_equal(last, &it[3].link);
    assert_ptr_equal(tier_list_next(&head, &it[1].link), &it[2].link);
    assert_null(tier_list_next(&head, &it[3].link));
    assert_null(tier_list_prev(&head, &it[0].link));
    tier_list_remove(&it[2].link);
    assert_false(tier_list_linked(&it[2].link));
    tier_list_remove(&it[2].link); /* twice: harmless */
    assert_ptr_equal(tier_list_next(&head, &it[1].link), &it[3].link);
    tier_list_foreach_safe (l, tmp, &head)
        tier_list_remove(l);
    assert_true(tier_list_empty(&head));
    for (int i = 0; i < 4; i++)
        assert_false(tier_list_linked(&it[i].link));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_size),     cmocka_unit_test(test_parse_misc),
        cmocka_unit_test(test_strlcpy_hex),    cmocka_unit_test(test_name_chars),
        cmocka_unit_test(test_dynbuf_bounded), cmocka_unit_test(test_err_msg),
        cmocka_unit_test(test_log_escape),     cmocka_unit_test(test_log_line_escaped),
        cmocka_unit_test(test_log_cut_utf8),   cmocka_unit_test(test_vec_grow),
        cmocka_unit_test(test_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
