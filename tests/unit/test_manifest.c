/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_manifest.c - lookups in a dataset version's manifest (manifest_find,
 * manifest_lower_bound): a file, a directory even when siblings such as "train.csv" and
 * "train-2/" sort between "train" and "train/", the root, a missing key; the order manifest_add
 * demands.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hints/hints.h"
#include "datasets/manifest.h"

static void test_find(void **state)
{
    (void)state;
    struct manifest m;
    memset(&m, 0, sizeof(m));
    /* strictly ascending by strcmp: '-' (0x2d) and '.' (0x2e) sort before '/' (0x2f) */
    const char *keys[] = {"a.bin",       "train-2/x",       "train.csv",
                          "train/a.bin", "train/sub/b.bin", "val/c.bin"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        assert_int_equal(manifest_add(&m, keys[i], 10 + i, "\"e\""), 0);
    assert_int_equal(manifest_add(&m, "b.bin", 1, "\"e\""), -EINVAL); /* out of order */
    size_t idx = 99;
    assert_int_equal(manifest_find(&m, "train.csv", &idx), 0);
    assert_int_equal(idx, 2);
    assert_int_equal(manifest_find(&m, "train/sub/b.bin", &idx), 0);
    assert_int_equal(idx, 4);
    assert_int_equal(manifest_find(&m, "train", &idx), 1); /* train.csv and train-2 between */
    assert_int_equal(manifest_find(&m, "train/sub", &idx), 1);
    assert_int_equal(manifest_find(&m, "", &idx), 1);
    assert_int_equal(manifest_find(&m, "tra", &idx), -ENOENT);
    assert_int_equal(manifest_find(&m, "train/a", &idx), -ENOENT);
    assert_int_equal(manifest_find(&m, "zzz", &idx), -ENOENT);
    assert_int_equal(manifest_lower_bound(&m, "train/"), 3);
    assert_int_equal(manifest_lower_bound(&m, ""), 0);
    assert_int_equal(manifest_lower_bound(&m, "zzz"), m.n);
    manifest_fini(&m);
}

/* What a submission counts for a decoded manifest (hints_manifest_mem): every string, ETags
 * too, and the allocator's overhead of each allocation. */
static void test_hints_mem(void **state)
{
    (void)state;
    struct manifest m;
    memset(&m, 0, sizeof(m));
    char etag[90], vid[600];
    memset(etag, 'e', sizeof(etag) - 1);
    etag[sizeof(etag) - 1] = '\0';
    memset(vid, 'v', sizeof(vid) - 1);
    vid[sizeof(vid) - 1] = '\0';
    const char *keys[] = {"a.bin", "b.bin", "c.bin"};
    uint64_t strings = 0;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(manifest_add_version(&m, keys[i], 1, etag, vid), 0);
        strings += strlen(keys[i]) + 1 + strlen(etag) + 1 + strlen(vid) + 1;
    }
    /* the file array and, per file, three allocations (key, ETag, version id) */
    uint64_t floor = sizeof(m) + m.cap * sizeof(*m.files) + strings + 16 * (1 + 3 * 3);
    assert_true(hints_manifest_mem(&m) >= floor);
    manifest_fini(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_hints_mem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
