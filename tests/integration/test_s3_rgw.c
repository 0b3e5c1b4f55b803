/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_s3_rgw.c - S3-specific behaviour of the S3 backend against the real Ceph RGW started by
 * scripts/ceph.sh (CTest fixture `rgw`): data round trips with ranges and odd keys, If-Match with a
 * stale ETag, a 2,500-key listing across pages with and without a delimiter, a 64 MiB multipart
 * upload read back byte-identical, errno mapping of real server errors (missing key, missing
 * bucket, wrong secret, too-small parts), and RGW stopped mid-test: bounded failure, then
 * recovery. The generic behavioural suite shared with the POSIX backend lives elsewhere.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "testutil.h"
#include "tiers/backend.h"
#include "tiers/retry.h"

static struct tu_s3_env g_env;
static char g_bucket[128];

static struct s3_backend_config base_config(void)
{
    struct s3_backend_config c = {
        .name = "cold",
        .endpoint = g_env.endpoint,
        .region = g_env.region,
        .bucket = g_bucket,
        .prefix = "it",
        .path_style = true,
        .access_key = g_env.access_key,
        .secret_key = g_env.secret_key,
        .max_connections = 16,
    };
    return c;
}

static struct backend *open_be(const struct s3_backend_config *c)
{
    struct backend *be = NULL;
    int rc = backend_s3_open(c, &be);
    if (rc)
        fail_msg("backend_s3_open: %d %s", rc, tier_err_msg());
    return be;
}

static int group_setup(void **state)
{
    (void)state;
    if (!tu_s3_env_load(&g_env)) {
        fprintf(stderr, "no RGW env file under $TIER_CEPH_DIR; run scripts/ceph.sh start\n");
        return -1;
    }
    if (tu_s3_bucket_create(&g_env, "s3rgw", g_bucket, sizeof(g_bucket)) != 0) {
        fprintf(stderr, "cannot create a bucket on %s\n", g_env.endpoint);
        return -1;
    }
    return 0;
}

static void test_roundtrip(void **state)
{
    (void)state;
    struct s3_backend_config c = base_config();
    struct backend *be = open_be(&c);
    const size_t n = 1u << 20;
    char *data = malloc(n), *buf = malloc(n + 100);
    assert_non_null(data);
    assert_non_null(buf);
    tu_fill_random(data, n, 1);
    char etag[BACKEND_ETAG_MAX];
    assert_int_equal(backend_put(be, NULL, "rt/obj.bin", data, n, etag), 0);
    assert_true(etag[0] == '"');

    struct backend_stat st;
    assert_int_equal(backend_stat(be, NULL, "rt/obj.bin", &st), 0);
    assert_int_equal(st.size_bytes, n);
    assert_string_equal(st.etag, etag);
    int64_t age_s = ((int64_t)tier_now_real_ns() - st.mtime_ns) / 1000000000LL;
    assert_true(age_s > -120 && age_s < 600);
    assert_false(st.is_dir);

    /* whole object, with the version it had */
    memset(buf, 0, n);
    struct backend_stat rst;
    assert_int_equal(backend_read(be, NULL, "rt/obj.bin", 0, buf, n, NULL, &rst), (ssize_t)n);
    assert_memory_equal(buf, data, n);
    assert_string_equal(rst.etag, etag);
    assert_int_equal(rst.size_bytes, n);
    /* a range in the middle */
    assert_int_equal(backend_read(be, NULL, "rt/obj.bin", 4097, buf, 12345, NULL, &rst), 12345);
    assert_memory_equal(buf, data + 4097, 12345);
    assert_int_equal(rst.size_bytes, n);
    /* a range crossing the end is short; one at or after the end reads 0 bytes */
    assert_int_equal(backend_read(be, NULL, "rt/obj.bin", n - 10, buf, 100, NULL, NULL), 10);
    assert_memory_equal(buf, data + n - 10, 10);
    assert_int_equal(backend_read(be, NULL, "rt/obj.bin", n, buf, 100, NULL, &rst), 0);
    assert_int_equal(rst.size_bytes, n);
    assert_int_equal(backend_read(be, NULL, "rt/obj.bin", n + 5000, buf, 100, NULL, NULL), 0);
    /* the caller's buffer bounds the read even for a big request */
    assert_int_equal(backend_read(be, NULL, "rt/obj.bin", 0, buf, 7, NULL, NULL), 7);
    assert_memory_equal(buf, data, 7);

    /* keys that need percent-encoding and XML escaping round-trip through put/read/list */
    static const char *odd[] = {"rt/odd/a b&c+d=e%f.bin", "rt/odd/\xc3\xa9t\xc3\xa9 <1>'\".bin",
                                "rt/odd/q?x#y;z,@$!*().bin"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(backend_put(be, NULL, odd[i], odd[i], strlen(odd[i]), NULL), 0);
        assert_int_equal(backend_read(be, NULL, odd[i], 0, buf, 200, NULL, NULL),
                         (ssize_t)strlen(odd[i]));
        assert_memory_equal(buf, odd[i], strlen(odd[i]));
    }
    struct backend_list_page pg;
    assert_int_equal(backend_list(be, NULL, "rt/odd/", "/", NULL, 0, &pg), 0);
    assert_int_equal(pg.n, 3);
    for (size_t i = 0; i < pg.n; i++) {
        bool found = false;
        for (size_t j = 0; j < 3; j++)
            found |= strcmp(pg.entries[i].name, odd[j]) == 0;
        if (!found)
            fail_msg("listed unexpected key '%s'", pg.entries[i].name);
    }
    backend_list_page_fini(&pg);

    /* a zero-length object */
    assert_int_equal(backend_put(be, NULL, "rt/empty", "", 0, NULL), 0);
    assert_int_equal(backend_stat(be, NULL, "rt/empty", &st), 0);
    assert_int_equal(st.size_bytes, 0);
    assert_int_equal(backend_read(be, NULL, "rt/empty", 0, buf, 10, NULL, NULL), 0);

    /* delete; deleting again or reading is -ENOENT */
    assert_int_equal(backend_del(be, NULL, "rt/obj.bin"), 0);
    assert_int_equal(backend_stat(be, NULL, "rt/obj.bin", &st), -ENOENT);
    assert_int_equal(backend_read(be, NULL, "rt/obj.bin", 0, buf, 10, NULL, NULL), -ENOENT);
    assert_int_equal(backend_del(be, NULL, "rt/obj.bin"), -ENOENT);
    free(data);
    free(buf);
    backend_free(be);
}

static void test_if_match_stale(void **state)
{
    (void)state;
    struct s3_backend_config c = base_config();
    struct backend *be = open_be(&c);
    char e1[BACKEND_ETAG_MAX], e2[BACKEND_ETAG_MAX], buf[64];
    assert_int_equal(backend_put(be, NULL, "im/k", "version one", 11, e1), 0);
    struct backend_stat st;
    assert_int_equal(backend_read(be, NULL, "im/k", 0, buf, sizeof(buf), e1, &st), 11);
    assert_string_equal(st.etag, e1);
    assert_int_equal(backend_put(be, NULL, "im/k", "version two!", 12, e2), 0);
    assert_string_not_equal(e1, e2);
    assert_int_equal(backend_read(be, NULL, "im/k", 0, buf, sizeof(buf), e1, NULL), -ESTALE);
    assert_non_null(strstr(tier_err_msg(), "412"));
    assert_int_equal(backend_read(be, NULL, "im/k", 0, buf, sizeof(buf), e2, &st), 12);
    assert_memory_equal(buf, "version two!", 12);
    /* a stale version is stale at EOF and for empty reads too */
    assert_int_equal(backend_read(be, NULL, "im/k", 100, buf, sizeof(buf), e1, NULL), -ESTALE);
    assert_int_equal(backend_read(be, NULL, "im/k", 0, buf, 0, e1, NULL), -ESTALE);
    backend_free(be);
}

/* ---- 2,500 keys ----------------------------------------------------------------------------- */

#define NKEYS 2500
#define NPUT_THREADS 16

struct put_job {
    struct backend *be;
    int first, step;
    int err;
};

static void *put_worker(void *arg)
{
    struct put_job *j = arg;
    for (int i = j->first; i < NKEYS && !j->err; i += j->step) {
        char key[64];
        snprintf(key, sizeof(key), "many/k%05d", i);
        int rc = backend_put(j->be, NULL, key, key, strlen(key), NULL);
        if (rc)
            j->err = rc;
    }
    return NULL;
}

/* List everything under prefix with max_keys 1000; returns entries seen and checks order. */
static size_t list_all(struct backend *be, const char *prefix, const char *delim, int *pages,
                       size_t *nprefixes, char ***names_out)
{
    char *token = NULL;
    size_t total = 0, cap = 0;
    char **names = NULL;
    *pages = 0;
    *nprefixes = 0;
    do {
        struct backend_list_page pg;
        int rc = backend_list(be, NULL, prefix, delim, token, 1000, &pg);
        if (rc)
            fail_msg("list page %d: %d %s", *pages, rc, tier_err_msg());
        (*pages)++;
        assert_true(pg.n <= 1000);
        free(token);
        token = pg.next_token ? strdup(pg.next_token) : NULL;
        for (size_t i = 0; i < pg.n; i++) {
            if (total == cap) {
                cap = cap ? cap * 2 : 1024;
                names = realloc(names, cap * sizeof(*names));
                assert_non_null(names);
            }
            names[total++] = strdup(pg.entries[i].name);
            *nprefixes += pg.entries[i].is_prefix;
        }
        backend_list_page_fini(&pg);
        assert_true(*pages < 20);
    } while (token);
    for (size_t i = 1; i < total; i++)
        if (strcmp(names[i - 1], names[i]) >= 0)
            fail_msg("listing out of order or duplicated at %zu: %s, %s", i, names[i - 1],
                     names[i]);
    *names_out = names;
    return total;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static void test_list_2500(void **state)
{
    (void)state;
    struct s3_backend_config c = base_config();
    struct backend *be = open_be(&c);
    pthread_t t[NPUT_THREADS];
    struct put_job jobs[NPUT_THREADS];
    for (int i = 0; i < NPUT_THREADS; i++) {
        jobs[i] = (struct put_job){.be = be, .first = i, .step = NPUT_THREADS};
        assert_int_equal(pthread_create(&t[i], NULL, put_worker, &jobs[i]), 0);
    }
    for (int i = 0; i < NPUT_THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NPUT_THREADS; i++)
        if (jobs[i].err)
            fail_msg("put: %d", jobs[i].err);
    assert_int_equal(backend_put(be, NULL, "many/sub1/x", "x", 1, NULL), 0);
    assert_int_equal(backend_put(be, NULL, "many/sub2/y", "y", 1, NULL), 0);

    /* no delimiter: every object, 2,502, in three pages */
    int pages;
    size_t nprefixes;
    char **names;
    size_t n = list_all(be, "many/", NULL, &pages, &nprefixes, &names);
    assert_int_equal(n, NKEYS + 2);
    assert_int_equal(pages, 3);
    assert_int_equal(nprefixes, 0);
    assert_string_equal(names[0], "many/k00000");
    assert_string_equal(names[NKEYS - 1], "many/k02499");
    assert_string_equal(names[NKEYS + 1], "many/sub2/y");
    free_names(names, n);

    /* delimiter: 2,500 objects and 2 common prefixes, the prefixes in key order */
    n = list_all(be, "many/", "/", &pages, &nprefixes, &names);
    assert_int_equal(n, NKEYS + 2);
    assert_int_equal(nprefixes, 2);
    assert_true(pages >= 3);
    assert_string_equal(names[NKEYS], "many/sub1/");
    assert_string_equal(names[NKEYS + 1], "many/sub2/");
    free_names(names, n);

    /* a mid-segment prefix */
    n = list_all(be, "many/k0249", "/", &pages, &nprefixes, &names);
    assert_int_equal(n, 10);
    free_names(names, n);
    backend_free(be);
}

/* ---- multipart --------------------------------------------------------------------------------
 */

static void test_multipart_64m(void **state)
{
    (void)state;
    struct s3_backend_config c = base_config();
    struct backend *be = open_be(&c);
    const size_t part = 5u << 20, total = 64u << 20;
    const int nparts = (int)((total + part - 1) / part); /* 13: 12 x 5 MiB + 4 MiB */
    assert_int_equal(nparts, 13);
    char *data = malloc(total), *back = malloc(total);
    assert_non_null(data);
    assert_non_null(back);
    tu_fill_random(data, total, 64);
    char *id = NULL;
    assert_int_equal(backend_mpu_create(be, NULL, "mpu/big.bin", &id), 0);
    assert_non_null(id);
    struct backend_part parts[13];
    for (int i = 0; i < nparts; i++) {
        size_t off = (size_t)i * part, len = total - off < part ? total - off : part;
        parts[i].number = i + 1;
        int rc = backend_mpu_put_part(be, NULL, "mpu/big.bin", id, i + 1, data + off, len,
                                      parts[i].etag);
        if (rc)
            fail_msg("part %d: %d %s", i + 1, rc, tier_err_msg());
    }
    /* not visible before complete */
    struct backend_stat st;
    assert_int_equal(backend_stat(be, NULL, "mpu/big.bin", &st), -ENOENT);
    char etag[BACKEND_ETAG_MAX];
    assert_int_equal(backend_mpu_complete(be, NULL, "mpu/big.bin", id, parts, 13, etag), 0);
    if (!strstr(etag, "-13"))
        fail_msg("multipart ETag '%s' does not end in -13", etag);
    assert_int_equal(backend_stat(be, NULL, "mpu/big.bin", &st), 0);
    assert_int_equal(st.size_bytes, total);
    assert_string_equal(st.etag, etag);
    memset(back, 0, total);
    assert_int_equal(
        backend_read_parallel(be, NULL, "mpu/big.bin", 0, back, total, 8u << 20, 8, &st),
        (ssize_t)total);
    assert_true(XXH64(back, total, 0) == XXH64(data, total, 0));
    assert_memory_equal(back, data, total);
    free(id);

    /* aborted: parts are gone, completing fails with -ENOENT (NoSuchUpload) */
    assert_int_equal(backend_mpu_create(be, NULL, "mpu/aborted.bin", &id), 0);
    assert_int_equal(
        backend_mpu_put_part(be, NULL, "mpu/aborted.bin", id, 1, data, part, parts[0].etag), 0);
    assert_int_equal(backend_mpu_abort(be, NULL, "mpu/aborted.bin", id), 0);
    /* RGW answers a late complete with 500 "completion already in progress" (retried, then
     * -EIO) rather than NoSuchUpload; a late part upload does get NoSuchUpload. */
    int prc = backend_mpu_put_part(be, NULL, "mpu/aborted.bin", id, 2, data, 10, parts[1].etag);
    if (prc != -ENOENT)
        fail_msg("part after abort: %d %s", prc, tier_err_msg());
    assert_non_null(strstr(tier_err_msg(), "NoSuchUpload"));
    assert_true(backend_mpu_complete(be, NULL, "mpu/aborted.bin", id, parts, 1, NULL) < 0);
    assert_int_equal(backend_stat(be, NULL, "mpu/aborted.bin", &st), -ENOENT);
    free(id);

    /* parts under 5 MiB (but the last) are refused at complete: EntityTooSmall -> -EINVAL */
    assert_int_equal(backend_mpu_create(be, NULL, "mpu/small.bin", &id), 0);
    for (int i = 0; i < 2; i++) {
        parts[i].number = i + 1;
        assert_int_equal(
            backend_mpu_put_part(be, NULL, "mpu/small.bin", id, i + 1, data, 1000, parts[i].etag),
            0);
    }
    assert_int_equal(backend_mpu_complete(be, NULL, "mpu/small.bin", id, parts, 2, NULL), -EINVAL);
    assert_non_null(strstr(tier_err_msg(), "EntityTooSmall"));
    assert_int_equal(backend_mpu_abort(be, NULL, "mpu/small.bin", id), 0);
    free(id);
    free(data);
    free(back);
    backend_free(be);
}

/* ---- errors -----------------------------------------------------------------------------------
 */

static void test_errors(void **state)
{
    (void)state;
    struct s3_backend_config c = base_config();
    struct backend *be = open_be(&c);
    char buf[16];
    struct backend_stat st;
    assert_int_equal(backend_read(be, NULL, "no/such/key", 0, buf, sizeof(buf), NULL, NULL),
                     -ENOENT);
    assert_non_null(strstr(tier_err_msg(), "NoSuchKey"));
    assert_int_equal(backend_stat(be, NULL, "no/such/key", &st), -ENOENT);
    backend_free(be);

    c.bucket = "no-such-bucket-tierd";
    be = open_be(&c);
    assert_int_equal(backend_read(be, NULL, "k", 0, buf, sizeof(buf), NULL, NULL), -ENOENT);
    assert_non_null(strstr(tier_err_msg(), "NoSuchBucket"));
    assert_non_null(strstr(tier_err_msg(), "bucket"));
    struct backend_list_page pg;
    assert_int_equal(backend_list(be, NULL, "", NULL, NULL, 0, &pg), -ENOENT);
    backend_free(be);

    c = base_config();
    c.secret_key = "wrong-secret-key";
    be = open_be(&c);
    assert_int_equal(backend_read(be, NULL, "k", 0, buf, sizeof(buf), NULL, NULL), -EACCES);
    const char *msg = tier_err_msg();
    assert_non_null(strstr(msg, "SignatureDoesNotMatch"));
    assert_non_null(strstr(msg, "secret key"));
    assert_int_equal(backend_put(be, NULL, "k", "x", 1, NULL), -EACCES);
    backend_free(be);

    c = base_config();
    c.access_key = "NOSUCHACCESSKEY";
    be = open_be(&c);
    assert_int_equal(backend_read(be, NULL, "k", 0, buf, sizeof(buf), NULL, NULL), -EACCES);
    assert_non_null(strstr(tier_err_msg(), "InvalidAccessKeyId"));
    backend_free(be);
}

/* Must run last: stops RGW, checks the bounded failure, restarts it. */
static void test_rgw_down_bounded(void **state)
{
    (void)state;
    struct s3_backend_config c = base_config();
    c.max_retries = 2;
    c.retry_base_ms = 50;
    c.retry_max_ms = 200;
    c.connect_timeout_ms = 1000;
    c.request_timeout_ms = 2000;
    struct backend *be = open_be(&c);
    char buf[16];
    assert_int_equal(backend_put(be, NULL, "down/k", "alive", 5, NULL), 0);
    assert_int_equal(backend_read(be, NULL, "down/k", 0, buf, sizeof(buf), NULL, NULL), 5);

    assert_int_equal(tu_ceph_ctl("stop-rgw"), 0);
    struct retry_policy p = {.max_retries = 2, .base_ms = 50, .max_ms = 200};
    uint64_t bound_ms = retry_worst_case_ms(&p, c.request_timeout_ms);
    uint64_t t0 = tier_now_mono_ns();
    ssize_t n = backend_read(be, NULL, "down/k", 0, buf, sizeof(buf), NULL, NULL);
    uint64_t ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    fprintf(stderr, "RGW down: read returned %zd after %" PRIu64 " ms (bound %" PRIu64 " ms): %s\n",
            n, ms, bound_ms, tier_err_msg());
    assert_true(n == -EIO || n == -ETIMEDOUT);
    assert_true(ms < bound_ms + 1000);
    assert_non_null(strstr(tier_err_msg(), "after 3 attempts"));
    t0 = tier_now_mono_ns();
    assert_true(backend_put(be, NULL, "down/k2", "x", 1, NULL) < 0);
    assert_true((tier_now_mono_ns() - t0) / TIER_NS_PER_MS < bound_ms + 1000);

    assert_int_equal(tu_ceph_ctl("start-rgw"), 0);
    /* The next request works (poll with a deadline: RGW may need a moment to listen). */
    uint64_t deadline = tier_now_mono_ns() + 60 * TIER_NS_PER_SEC;
    do {
        n = backend_read(be, NULL, "down/k", 0, buf, sizeof(buf), NULL, NULL);
    } while (n < 0 && tier_now_mono_ns() < deadline);
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "alive", 5);
    backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip), cmocka_unit_test(test_if_match_stale),
        cmocka_unit_test(test_list_2500), cmocka_unit_test(test_multipart_64m),
        cmocka_unit_test(test_errors),    cmocka_unit_test(test_rgw_down_bounded),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
