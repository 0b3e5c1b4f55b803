/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_pinmeta.c - unit tests for src/stage/pinmeta.c: an object and the directories above it,
 * a directory's children (each subdirectory once), replacement by a newer note, forgetting a
 * prefix, and backends kept apart. The mount-level behaviour (a pinned model read while RGW is
 * stopped) is in tests/integration/test_fuse_rgw.sh.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "stage/pinmeta.h"

struct seen {
    char names[16][32];
    bool dir[16];
    int n;
};

static void collect(const char *name, size_t len, bool is_dir, const struct pinmeta_obj *o,
                    void *arg)
{
    struct seen *s = arg;
    assert_true(s->n < 16);
    snprintf(s->names[s->n], sizeof(s->names[0]), "%.*s", (int)len, name);
    s->dir[s->n] = is_dir;
    assert_true(is_dir == (o == NULL));
    s->n++;
}

static void test_pinmeta(void **state)
{
    (void)state;
    struct pinmeta *pm;
    assert_int_equal(pinmeta_new(&pm), 0);
    struct pinmeta_obj a = {.size_bytes = 10, .mtime_ns = 5, .etag = "e1"};
    struct pinmeta_obj b = {.size_bytes = 20, .etag = "e2"};
    assert_int_equal(pinmeta_note(pm, "s3", "m/llama/w1.bin", &a), 0);
    assert_int_equal(pinmeta_note(pm, "s3", "m/llama/w2.bin", &b), 0);
    assert_int_equal(pinmeta_note(pm, "s3", "m/llama/sub/x", &a), 0);
    assert_int_equal(pinmeta_note(pm, "s3", "m/llama/sub/y", &a), 0);
    assert_int_equal(pinmeta_note(pm, "s3", "m/top", &b), 0);
    assert_int_equal(pinmeta_note(pm, "other", "m/llama/w1.bin", &b), 0);

    struct pinmeta_obj o;
    assert_int_equal(pinmeta_stat(pm, "s3", "m/llama/w1.bin", &o), 0);
    assert_int_equal(o.size_bytes, 10);
    assert_string_equal(o.etag, "e1");
    assert_int_equal(pinmeta_stat(pm, "s3", "m/llama", &o), 1);
    assert_int_equal(pinmeta_stat(pm, "s3", "m", &o), 1);
    assert_int_equal(pinmeta_stat(pm, "s3", "m/lla", &o), -ENOENT); /* not a path prefix */
    assert_int_equal(pinmeta_stat(pm, "s3", "m/llama/w3.bin", &o), -ENOENT);

    struct seen s = {0};
    pinmeta_children(pm, "s3", "m/llama/", collect, &s);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.names[0], "sub");
    assert_true(s.dir[0]);
    assert_string_equal(s.names[1], "w1.bin");
    assert_string_equal(s.names[2], "w2.bin");

    /* a newer note replaces; forgetting a prefix leaves the rest and the other backend */
    assert_int_equal(pinmeta_note(pm, "s3", "m/llama/w1.bin", &b), 0);
    assert_int_equal(pinmeta_stat(pm, "s3", "m/llama/w1.bin", &o), 0);
    assert_string_equal(o.etag, "e2");
    assert_int_equal(pinmeta_forget(pm, "s3", "m/llama/"), 4);
    assert_int_equal(pinmeta_stat(pm, "s3", "m/llama", &o), -ENOENT);
    assert_int_equal(pinmeta_stat(pm, "s3", "m/top", &o), 0);
    assert_int_equal(pinmeta_stat(pm, "other", "m/llama/w1.bin", &o), 0);
    pinmeta_free(pm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pinmeta)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
