/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_backend_suite.c - one behavioural suite run against every backend kind, so that callers
 * can rely on the same semantics whichever tier they hold. argv[1] picks the backend:
 *   posix   a POSIX backend on a fresh scratch directory;
 *   s3      the S3 backend on a fresh bucket of the test RGW ($TIER_CEPH_DIR/env, started by
 *           the CTest fixture `rgw`).
 * With argv[2] = "sched" the backend is wrapped in its scheduler lane (sched_backend_wrap, as
 * tierd runs every backend) with an in-flight cap of 3, so the decorator is held to the same
 * contract and the parallel cases queue at admission.
 * Cases: put/get/ranged get/stat/delete, reads at and after the end, version change on overwrite,
 * 2,500-key listing over pages (recursive and with delimiter), a 64 MiB multipart upload read back
 * plainly and with backend_read_parallel, abort, missing keys, invalid keys, and 8 threads doing
 * puts and reads at once; wrapped, a training read in parts while an inference call is in flight.
 * Every case uses its own key prefix.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "qos/sched.h"
#include "testutil.h"
#include "tiers/backend.h"

#define MIB (1024u * 1024u)

static const char *g_kind;
static struct backend *g_be;
static bool g_sched_wrap;     /* argv[2] == "sched" */
static struct sched *g_sched; /* the lane's scheduler when wrapped */
static char *g_dir;           /* posix: the scratch root */

/* A bucket with a unique name for this run (tests/lib/s3env.c signs the PUT and sends the
 * x-amz-content-sha256 header RGW needs). */
static int bucket_create(const struct tu_s3_env *env, char *name, size_t namesz)
{
    int rc = tu_s3_bucket_create(env, "suite", name, namesz);
    if (rc)
        fprintf(stderr, "backend_suite s3: PUT bucket %s at %s: %s\n", name, env->endpoint,
                strerror(-rc));
    return rc;
}

static int group_setup(void **state)
{
    (void)state;
    int rc;
    if (strcmp(g_kind, "posix") == 0) {
        g_dir = tu_mkdtemp("suite-posix");
        struct posix_backend_config cfg = {.name = "suite", .root = g_dir};
        rc = backend_posix_open(&cfg, &g_be);
    } else {
        struct tu_s3_env env;
        if (!tu_s3_env_load(&env)) {
            fprintf(stderr,
                    "backend_suite s3: no RGW env file in $TIER_CEPH_DIR (%s); start one "
                    "with scripts/ceph.sh start DIR and set TIER_CEPH_DIR=DIR\n",
                    getenv("TIER_CEPH_DIR") ? getenv("TIER_CEPH_DIR") : "unset");
            return -1;
        }
        char bucket[128];
        rc = bucket_create(&env, bucket, sizeof(bucket));
        if (rc) {
            fprintf(stderr, "backend_suite s3: cannot create a bucket on %s: %d\n", env.endpoint,
                    rc);
            return -1;
        }
        struct s3_backend_config cfg = {
            .name = "suite",
            .endpoint = env.endpoint,
            .region = env.region,
            .bucket = bucket,
            .path_style = true,
            .access_key = env.access_key,
            .secret_key = env.secret_key,
        };
        rc = backend_s3_open(&cfg, &g_be);
    }
    if (rc) {
        fprintf(stderr, "backend_suite %s: open failed: %d %s\n", g_kind, rc, tier_err_msg());
        return -1;
    }
    if (g_sched_wrap) {
        struct backend *w = NULL;
        /* split_bytes: reads in parts while inference has demand (test_split_reads) */
        struct sched_backend_config bc = {
            .max_inflight = 3, .admit_timeout_ms = 120000, .split_bytes = 16 << 10};
        if (sched_new(NULL, &g_sched) != 0 || sched_backend_wrap(g_sched, g_be, &bc, &w) != 0) {
            fprintf(stderr, "backend_suite %s: cannot wrap the backend in a lane\n", g_kind);
            return -1;
        }
        g_be = w;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    backend_free(g_be);
    if (g_sched) {
        struct sched_backend_stats b;
        /* every call passed the lane and left it */
        if (sched_backend_stats_get(g_sched, &b, 1) != 1 || b.inflight_now != 0 ||
            b.admitted == 0 || b.admitted != b.completed || b.breaker != SCHED_BREAKER_CLOSED) {
            fprintf(stderr, "backend_suite %s: lane counters do not add up\n", g_kind);
            return -1;
        }
        sched_free(g_sched);
    }
    if (g_dir) {
        tu_rmtree(g_dir);
        free(g_dir);
    }
    return 0;
}

#define ASSERT_OK(expr)                                                                            \
    do {                                                                                           \
        long long rc_ = (long long)(expr);                                                         \
        if (rc_ < 0)                                                                               \
            fail_msg("%s: %lld (%s)", #expr, rc_, tier_err_msg());                                 \
    } while (0)

static void test_put_get_stat_delete(void **state)
{
    (void)state;
    size_t len = 100 * 1024 + 7;
    unsigned char *data = malloc(len), *back = malloc(len + 100);
    tu_fill_random(data, len, 1);
    char etag[BACKEND_ETAG_MAX] = "";
    ASSERT_OK(backend_put(g_be, NULL, "basic/sub/obj.bin", data, len, etag));
    assert_true(etag[0] != '\0');

    struct backend_stat st;
    ASSERT_OK(backend_stat(g_be, NULL, "basic/sub/obj.bin", &st));
    assert_int_equal(st.size_bytes, len);
    assert_string_equal(st.etag, etag);
    assert_false(st.is_dir);
    assert_true(st.mtime_ns > 0);

    /* Whole read, asking for more than there is: short at the end only. */
    memset(back, 0, len + 100);
    assert_int_equal(backend_read(g_be, NULL, "basic/sub/obj.bin", 0, back, len + 100, NULL, &st),
                     len);
    assert_memory_equal(back, data, len);
    assert_string_equal(st.etag, etag);
    assert_int_equal(st.size_bytes, len);
    /* Ranged reads: inside, crossing the end, at the end, past the end. */
    assert_int_equal(backend_read(g_be, NULL, "basic/sub/obj.bin", 1000, back, 5000, etag, NULL),
                     5000);
    assert_memory_equal(back, data + 1000, 5000);
    assert_int_equal(backend_read(g_be, NULL, "basic/sub/obj.bin", len - 10, back, 100, NULL, NULL),
                     10);
    assert_memory_equal(back, data + len - 10, 10);
    assert_int_equal(backend_read(g_be, NULL, "basic/sub/obj.bin", len, back, 100, NULL, NULL), 0);
    assert_int_equal(
        backend_read(g_be, NULL, "basic/sub/obj.bin", len + 4096, back, 100, NULL, NULL), 0);
    assert_int_equal(backend_read(g_be, NULL, "basic/sub/obj.bin", 5, back, 1, NULL, NULL), 1);
    assert_int_equal(back[0], data[5]);

    ASSERT_OK(backend_del(g_be, NULL, "basic/sub/obj.bin"));
    assert_int_equal(backend_stat(g_be, NULL, "basic/sub/obj.bin", &st), -ENOENT);
    assert_int_equal(backend_read(g_be, NULL, "basic/sub/obj.bin", 0, back, 10, NULL, NULL),
                     -ENOENT);
    assert_int_equal(backend_del(g_be, NULL, "basic/sub/obj.bin"), -ENOENT);
    free(data);
    free(back);
}

static void test_overwrite_changes_version(void **state)
{
    (void)state;
    char e1[BACKEND_ETAG_MAX], e2[BACKEND_ETAG_MAX];
    ASSERT_OK(backend_put(g_be, NULL, "over/obj", "version one", 11, e1));
    ASSERT_OK(backend_put(g_be, NULL, "over/obj", "version 2", 9, e2));
    assert_string_not_equal(e1, e2);
    struct backend_stat st;
    ASSERT_OK(backend_stat(g_be, NULL, "over/obj", &st));
    assert_string_equal(st.etag, e2);
    assert_int_equal(st.size_bytes, 9);
    char buf[32];
    tier_err_clear();
    assert_int_equal(backend_read(g_be, NULL, "over/obj", 0, buf, sizeof(buf), e1, NULL), -ESTALE);
    assert_true(tier_err_msg()[0] != '\0');
    assert_int_equal(backend_read(g_be, NULL, "over/obj", 0, buf, sizeof(buf), e2, NULL), 9);
    assert_memory_equal(buf, "version 2", 9);
    /* The same length with other bytes is a new version too. */
    char e3[BACKEND_ETAG_MAX];
    ASSERT_OK(backend_put(g_be, NULL, "over/obj", "version 3", 9, e3));
    assert_string_not_equal(e2, e3);
    assert_int_equal(backend_read(g_be, NULL, "over/obj", 0, buf, 4, e2, NULL), -ESTALE);
}

/* ---- listing ------------------------------------------------------------------------------- */

#define LIST_DIRS 25
#define LIST_PER_DIR 100
#define LIST_TOTAL (LIST_DIRS * LIST_PER_DIR)
#define NTHREADS 8

struct put_job {
    int first, step;
    int err;
    char msg[256];
};

static void *put_list_keys(void *arg)
{
    struct put_job *j = arg;
    for (int i = j->first; i < LIST_TOTAL && !j->err; i += j->step) {
        char key[64], body[32];
        snprintf(key, sizeof(key), "list/d%02d/k%04d", i / LIST_PER_DIR, i);
        int n = snprintf(body, sizeof(body), "%d", i);
        int rc = backend_put(g_be, NULL, key, body, (size_t)n, NULL);
        if (rc) {
            j->err = rc;
            snprintf(j->msg, sizeof(j->msg), "put %s: %s", key, tier_err_msg());
        }
    }
    return NULL;
}

static void test_list_2500(void **state)
{
    (void)state;
    pthread_t t[NTHREADS];
    struct put_job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (struct put_job){.first = i, .step = NTHREADS};
        assert_int_equal(pthread_create(&t[i], NULL, put_list_keys, &jobs[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        if (jobs[i].err)
            fail_msg("%d %s", jobs[i].err, jobs[i].msg);
    ASSERT_OK(backend_put(g_be, NULL, "list/top-a", "a", 1, NULL));
    ASSERT_OK(backend_put(g_be, NULL, "list/top-b", "b", 1, NULL));
    ASSERT_OK(backend_put(g_be, NULL, "listing-not-under-prefix", "c", 1, NULL));

    /* Recursive: every key exactly once, in order, in pages of at most 1000. */
    int seen = 0, pages = 0;
    char *token = NULL;
    char prev[128] = "";
    do {
        struct backend_list_page page;
        ASSERT_OK(backend_list(g_be, NULL, "list/", NULL, token, 1000, &page));
        free(token);
        token = page.next_token ? strdup(page.next_token) : NULL;
        pages++;
        assert_true(page.n <= 1000);
        for (size_t i = 0; i < page.n; i++, seen++) {
            const struct backend_entry *e = &page.entries[i];
            assert_false(e->is_prefix);
            assert_true(strcmp(prev, e->name) < 0);
            snprintf(prev, sizeof(prev), "%s", e->name);
            char want[64];
            if (seen < LIST_TOTAL)
                snprintf(want, sizeof(want), "list/d%02d/k%04d", seen / LIST_PER_DIR, seen);
            else
                snprintf(want, sizeof(want), "list/top-%c", 'a' + (seen - LIST_TOTAL));
            assert_string_equal(e->name, want);
            assert_true(e->size_bytes >= 1 && e->size_bytes <= 4);
            assert_true(e->etag[0] != '\0');
        }
        backend_list_page_fini(&page);
        assert_true(pages < 10);
    } while (token);
    assert_int_equal(seen, LIST_TOTAL + 2);
    assert_int_equal(pages, 3);

    /* With delimiter: 25 common prefixes and 2 objects at this level. */
    struct backend_list_page page;
    ASSERT_OK(backend_list(g_be, NULL, "list/", "/", NULL, 0, &page));
    assert_int_equal(page.n, LIST_DIRS + 2);
    assert_null(page.next_token);
    for (int i = 0; i < LIST_DIRS; i++) {
        char want[32];
        snprintf(want, sizeof(want), "list/d%02d/", i);
        assert_string_equal(page.entries[i].name, want);
        assert_true(page.entries[i].is_prefix);
    }
    assert_string_equal(page.entries[LIST_DIRS].name, "list/top-a");
    assert_false(page.entries[LIST_DIRS].is_prefix);
    backend_list_page_fini(&page);

    /* Delimiter listing paginated: prefixes count toward max_keys and the token skips them. */
    seen = 0;
    token = NULL;
    do {
        ASSERT_OK(backend_list(g_be, NULL, "list/", "/", token, 10, &page));
        free(token);
        token = page.next_token ? strdup(page.next_token) : NULL;
        assert_true(page.n <= 10);
        seen += (int)page.n;
        backend_list_page_fini(&page);
    } while (token);
    assert_int_equal(seen, LIST_DIRS + 2);

    /* One directory, and a prefix ending mid-name. */
    ASSERT_OK(backend_list(g_be, NULL, "list/d07/", "/", NULL, 0, &page));
    assert_int_equal(page.n, LIST_PER_DIR);
    assert_string_equal(page.entries[0].name, "list/d07/k0700");
    backend_list_page_fini(&page);
    ASSERT_OK(backend_list(g_be, NULL, "list/d1", "/", NULL, 0, &page));
    assert_int_equal(page.n, 10);
    assert_string_equal(page.entries[9].name, "list/d19/");
    backend_list_page_fini(&page);
    ASSERT_OK(backend_list(g_be, NULL, "list/d07/k07", NULL, NULL, 0, &page));
    assert_int_equal(page.n, LIST_PER_DIR);
    backend_list_page_fini(&page);
    ASSERT_OK(backend_list(g_be, NULL, "no-such-prefix/", NULL, NULL, 0, &page));
    assert_int_equal(page.n, 0);
    assert_null(page.next_token);
    backend_list_page_fini(&page);
}

/* ---- multipart ----------------------------------------------------------------------------- */

static void test_multipart_64m(void **state)
{
    (void)state;
    const size_t part = 5 * MIB, total = 64 * MIB;
    const int nparts = 13; /* 12 x 5 MiB + 4 MiB */
    unsigned char *data = malloc(total), *back = malloc(total);
    assert_non_null(data);
    assert_non_null(back);
    tu_fill_random(data, total, 64);
    char *id = NULL;
    ASSERT_OK(backend_mpu_create(g_be, NULL, "mpu/big.bin", &id));
    struct backend_part parts[13];
    /* Upload in reverse order: the part number, not the order, places the data. */
    for (int i = nparts - 1; i >= 0; i--) {
        size_t off = (size_t)i * part;
        size_t len = total - off < part ? total - off : part;
        parts[i].number = i + 1;
        ASSERT_OK(backend_mpu_put_part(g_be, NULL, "mpu/big.bin", id, i + 1, data + off, len,
                                       parts[i].etag));
    }
    struct backend_stat st;
    assert_int_equal(backend_stat(g_be, NULL, "mpu/big.bin", &st), -ENOENT);
    char etag[BACKEND_ETAG_MAX];
    ASSERT_OK(backend_mpu_complete(g_be, NULL, "mpu/big.bin", id, parts, (size_t)nparts, etag));
    free(id);
    ASSERT_OK(backend_stat(g_be, NULL, "mpu/big.bin", &st));
    assert_int_equal(st.size_bytes, total);
    assert_string_equal(st.etag, etag);

    memset(back, 0, total);
    assert_int_equal(backend_read(g_be, NULL, "mpu/big.bin", 0, back, total, etag, NULL), total);
    assert_true(memcmp(back, data, total) == 0);
    memset(back, 0, total);
    struct backend_stat pst;
    assert_int_equal(
        backend_read_parallel(g_be, NULL, "mpu/big.bin", 0, back, total, 8 * MIB, 4, &pst), total);
    assert_true(memcmp(back, data, total) == 0);
    assert_string_equal(pst.etag, etag);
    /* Parallel read of an unaligned range ending past the object. */
    memset(back, 0, total);
    assert_int_equal(backend_read_parallel(g_be, NULL, "mpu/big.bin", 3 * MIB + 17, back, total,
                                           8 * MIB, 4, NULL),
                     total - (3 * MIB + 17));
    assert_true(memcmp(back, data + 3 * MIB + 17, total - (3 * MIB + 17)) == 0);
    ASSERT_OK(backend_del(g_be, NULL, "mpu/big.bin"));
    free(data);
    free(back);
}

static void test_multipart_abort(void **state)
{
    (void)state;
    size_t len = 5 * MIB;
    unsigned char *data = malloc(len);
    tu_fill_random(data, len, 5);
    char *id = NULL;
    ASSERT_OK(backend_mpu_create(g_be, NULL, "abort/obj", &id));
    char e1[BACKEND_ETAG_MAX];
    ASSERT_OK(backend_mpu_put_part(g_be, NULL, "abort/obj", id, 1, data, len, e1));
    ASSERT_OK(backend_mpu_abort(g_be, NULL, "abort/obj", id));
    struct backend_stat st;
    assert_int_equal(backend_stat(g_be, NULL, "abort/obj", &st), -ENOENT);
    struct backend_list_page page;
    ASSERT_OK(backend_list(g_be, NULL, "abort/", NULL, NULL, 0, &page));
    assert_int_equal(page.n, 0);
    backend_list_page_fini(&page);
    struct backend_part p = {.number = 1};
    memcpy(p.etag, e1, sizeof(e1));
    assert_true(backend_mpu_complete(g_be, NULL, "abort/obj", id, &p, 1, NULL) < 0);
    assert_int_equal(backend_stat(g_be, NULL, "abort/obj", &st), -ENOENT);
    free(id);
    free(data);
}

static bool mpu_has(const struct backend_mpu *v, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].upload_id, id) == 0)
            return true;
    return false;
}

/* mpu_list: the uploads in progress for exactly one key (not a longer key sharing its prefix, not
 * another key), each with its start time; a completed or aborted upload is gone from it. */
static void test_multipart_list(void **state)
{
    (void)state;
    int64_t t0 = (int64_t)tier_now_real_ns() - 60 * (int64_t)TIER_NS_PER_SEC; /* clock skew */
    char *a1 = NULL, *a2 = NULL, *longer = NULL, *other = NULL;
    ASSERT_OK(backend_mpu_create(g_be, NULL, "mlist/k", &a1));
    ASSERT_OK(backend_mpu_create(g_be, NULL, "mlist/k", &a2));
    ASSERT_OK(backend_mpu_create(g_be, NULL, "mlist/k2", &longer));
    ASSERT_OK(backend_mpu_create(g_be, NULL, "mlist/j", &other));
    struct backend_mpu *v = NULL;
    size_t n = 0;
    ASSERT_OK(backend_mpu_list(g_be, NULL, "mlist/k", &v, &n));
    assert_int_equal(n, 2);
    assert_true(mpu_has(v, n, a1) && mpu_has(v, n, a2));
    for (size_t i = 0; i < n; i++)
        assert_true(v[i].initiated_ns > t0);
    backend_mpu_list_free(v, n);
    ASSERT_OK(backend_mpu_abort(g_be, NULL, "mlist/k", a1));
    ASSERT_OK(backend_mpu_list(g_be, NULL, "mlist/k", &v, &n));
    assert_int_equal(n, 1);
    assert_true(mpu_has(v, n, a2));
    backend_mpu_list_free(v, n);
    ASSERT_OK(backend_mpu_abort(g_be, NULL, "mlist/k", a2));
    ASSERT_OK(backend_mpu_list(g_be, NULL, "mlist/k", &v, &n));
    assert_int_equal(n, 0);
    backend_mpu_list_free(v, n);
    ASSERT_OK(backend_mpu_list(g_be, NULL, "mlist/k2", &v, &n));
    assert_int_equal(n, 1);
    assert_string_equal(v[0].upload_id, longer);
    backend_mpu_list_free(v, n);
    ASSERT_OK(backend_mpu_abort(g_be, NULL, "mlist/k2", longer));
    ASSERT_OK(backend_mpu_abort(g_be, NULL, "mlist/j", other));
    ASSERT_OK(backend_mpu_list(g_be, NULL, "mlist/none", &v, &n));
    assert_int_equal(n, 0);
    backend_mpu_list_free(v, n);
    free(a1);
    free(a2);
    free(longer);
    free(other);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void test_missing_keys(void **state)
{
    (void)state;
    struct backend_stat st;
    char buf[8];
    assert_int_equal(backend_stat(g_be, NULL, "missing/nothing", &st), -ENOENT);
    assert_int_equal(backend_read(g_be, NULL, "missing/nothing", 0, buf, sizeof(buf), NULL, NULL),
                     -ENOENT);
    assert_int_equal(backend_del(g_be, NULL, "missing/nothing"), -ENOENT);
    assert_int_equal(
        backend_read_parallel(g_be, NULL, "missing/nothing", 0, buf, sizeof(buf), 4, 2, NULL),
        -ENOENT);
    tier_err_clear();
    assert_int_equal(backend_stat(g_be, NULL, "missing", &st), -ENOENT);
}

static void test_invalid_keys(void **state)
{
    (void)state;
    static const char *const bad[] = {"../x", "/etc/passwd", "a//b", "a/./b", "dir/",
                                      "",     "a/../../b"};
    struct backend_stat st;
    char buf[8];
    char *id = NULL;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(backend_put(g_be, NULL, bad[i], "x", 1, NULL), -EINVAL);
        assert_int_equal(backend_stat(g_be, NULL, bad[i], &st), -EINVAL);
        assert_int_equal(backend_read(g_be, NULL, bad[i], 0, buf, 1, NULL, NULL), -EINVAL);
        assert_int_equal(backend_del(g_be, NULL, bad[i]), -EINVAL);
        assert_int_equal(backend_mpu_create(g_be, NULL, bad[i], &id), -EINVAL);
    }
    char longkey[BACKEND_KEY_MAX + 2];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    assert_int_equal(backend_put(g_be, NULL, longkey, "x", 1, NULL), -ENAMETOOLONG);
    assert_null(id);
}

/* ---- concurrency ---------------------------------------------------------------------------- */

#define CONC_ITERS 20
#define CONC_BYTES (64 * 1024)

struct conc_job {
    int id;
    int ok;
    int err;
    char msg[256];
};

static void *conc_worker(void *arg)
{
    struct conc_job *j = arg;
    unsigned char *data = malloc(CONC_BYTES), *back = malloc(CONC_BYTES);
    for (int i = 0; i < CONC_ITERS && !j->err; i++) {
        char key[64];
        snprintf(key, sizeof(key), "conc/t%d/k%d", j->id, i % 5);
        tu_fill_random(data, CONC_BYTES, (uint64_t)(j->id * 1000 + i));
        char etag[BACKEND_ETAG_MAX];
        int rc = backend_put(g_be, NULL, key, data, CONC_BYTES, etag);
        ssize_t n = rc ? rc : backend_read(g_be, NULL, key, 0, back, CONC_BYTES, etag, NULL);
        if (n != CONC_BYTES) {
            j->err = n < 0 ? (int)n : -EIO;
            snprintf(j->msg, sizeof(j->msg), "%s: %zd %s", key, n, tier_err_msg());
        } else if (memcmp(data, back, CONC_BYTES) != 0) {
            j->err = -EIO;
            snprintf(j->msg, sizeof(j->msg), "%s: read back other bytes", key);
        } else {
            j->ok++;
        }
    }
    free(data);
    free(back);
    return NULL;
}

/* put_new: create only. Of NEW_RACERS writers of one key at once exactly one wins (its bytes
 * are the object's), the others get -EEXIST; an existing key is never replaced. */
#define NEW_RACERS 8
struct new_racer {
    int id, rc;
    char etag[BACKEND_ETAG_MAX];
    pthread_barrier_t *go;
};

static void *new_racer(void *arg)
{
    struct new_racer *r = arg;
    char body[64];
    int n = snprintf(body, sizeof(body), "writer %d", r->id);
    pthread_barrier_wait(r->go);
    r->rc = backend_put_new(g_be, NULL, "putnew/race", body, (size_t)n, r->etag);
    return NULL;
}

static void test_put_new(void **state)
{
    (void)state;
    char etag[BACKEND_ETAG_MAX] = "", back[64];
    backend_del(g_be, NULL, "putnew/one");
    ASSERT_OK(backend_put_new(g_be, NULL, "putnew/one", "first", 5, etag));
    assert_true(etag[0] != '\0');
    assert_int_equal(backend_put_new(g_be, NULL, "putnew/one", "second", 6, NULL), -EEXIST);
    assert_int_equal(backend_read(g_be, NULL, "putnew/one", 0, back, sizeof(back), NULL, NULL), 5);
    assert_memory_equal(back, "first", 5);
    ASSERT_OK(backend_del(g_be, NULL, "putnew/one"));
    ASSERT_OK(backend_put_new(g_be, NULL, "putnew/one", "third", 5, NULL));
    ASSERT_OK(backend_del(g_be, NULL, "putnew/one"));

    backend_del(g_be, NULL, "putnew/race");
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, NEW_RACERS);
    pthread_t t[NEW_RACERS];
    struct new_racer r[NEW_RACERS];
    for (int i = 0; i < NEW_RACERS; i++) {
        r[i] = (struct new_racer){.id = i, .go = &go};
        assert_int_equal(pthread_create(&t[i], NULL, new_racer, &r[i]), 0);
    }
    int winners = 0, winner = -1;
    for (int i = 0; i < NEW_RACERS; i++) {
        pthread_join(t[i], NULL);
        if (r[i].rc == 0) {
            winners++;
            winner = i;
        } else if (r[i].rc != -EEXIST) {
            fail_msg("racer %d: %d (%s)", i, r[i].rc, tier_err_msg());
        }
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(winners, 1);
    char want[64];
    int n = snprintf(want, sizeof(want), "writer %d", winner);
    memset(back, 0, sizeof(back));
    assert_int_equal(backend_read(g_be, NULL, "putnew/race", 0, back, sizeof(back), NULL, NULL), n);
    assert_memory_equal(back, want, (size_t)n);
    ASSERT_OK(backend_del(g_be, NULL, "putnew/race"));
}

static void test_concurrent_threads(void **state)
{
    (void)state;
    pthread_t t[NTHREADS];
    struct conc_job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (struct conc_job){.id = i};
        assert_int_equal(pthread_create(&t[i], NULL, conc_worker, &jobs[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NTHREADS; i++) {
        if (jobs[i].err)
            fail_msg("thread %d: %d %s", i, jobs[i].err, jobs[i].msg);
        assert_int_equal(jobs[i].ok, CONC_ITERS);
    }
}

/* Reads in parts (sched wrap only; sched.h split_bytes, 16 KiB here): while an inference call is
 * in flight on the lane, a training read goes out as ranged reads of 16 KiB, each a call the
 * wrapper admits, and returns what the unsplit read returns: the same bytes and version, short
 * only at the end (a part ending exactly at the end is followed by one reading nothing, which S3
 * answers 416), nothing past it, and a stale if_match fails it. Without the inference call the
 * same read is one call. */
static void test_split_reads(void **state)
{
    (void)state;
    if (!g_sched_wrap)
        return;
    const size_t len = 100 * 1024 + 7, even = 64 * 1024;
    unsigned char *data = malloc(len), *back = malloc(len + 100);
    assert_non_null(data);
    assert_non_null(back);
    tu_fill_random(data, len, 7);
    char etag[BACKEND_ETAG_MAX] = "", etag2[BACKEND_ETAG_MAX] = "";
    ASSERT_OK(backend_put(g_be, NULL, "split/obj", data, len, etag));
    ASSERT_OK(backend_put(g_be, NULL, "split/even", data, even, etag2));
    struct sched_lane *l = sched_backend_lane(g_sched, g_be);
    assert_non_null(l);
    struct tier_ioctx inf = {.tenant = 1, .cls = TIER_IO_INFERENCE};
    struct tier_ioctx trn = {.tenant = 2, .cls = TIER_IO_TRAINING};
    uint64_t calls[SCHED_BE_NOPS];
    struct sched_backend_stats b;
#define READS()                                                                                    \
    (assert_int_equal(sched_backend_calls_get(g_sched, g_be, calls, NULL), 0), calls[SCHED_BE_READ])

    uint64_t r0 = READS();
    struct backend_stat st;
    assert_int_equal(backend_read(g_be, &trn, "split/obj", 0, back, len + 100, NULL, &st), len);
    assert_memory_equal(back, data, len);
    assert_int_equal(READS() - r0, 1);

    assert_int_equal(sched_lane_enter_dir(g_sched, l, &inf, 0, SCHED_DIR_DOWN), 0);
    assert_int_equal(sched_backend_stats_get(g_sched, &b, 1), 1);
    uint64_t split0 = b.split_reads;
    r0 = READS();
    memset(back, 0, len + 100);
    memset(&st, 0, sizeof(st));
    assert_int_equal(backend_read(g_be, &trn, "split/obj", 0, back, len + 100, NULL, &st), len);
    assert_memory_equal(back, data, len);
    assert_string_equal(st.etag, etag);
    assert_int_equal(st.size_bytes, len);
    assert_int_equal(READS() - r0, 7); /* 6 x 16 KiB and the last 4 KiB + 7 */
    /* inside, at an offset that is no multiple of a part */
    r0 = READS();
    assert_int_equal(backend_read(g_be, &trn, "split/obj", 1000, back, 40000, etag, NULL), 40000);
    assert_memory_equal(back, data + 1000, 40000);
    assert_int_equal(READS() - r0, 3);
    /* ending exactly at the end of the object: one more part reads nothing */
    r0 = READS();
    assert_int_equal(backend_read(g_be, &trn, "split/even", 0, back, 2 * even, NULL, &st), even);
    assert_memory_equal(back, data, even);
    assert_string_equal(st.etag, etag2);
    assert_int_equal(READS() - r0, 5);
    /* past the end; a version the object does not have */
    assert_int_equal(backend_read(g_be, &trn, "split/obj", len + 4096, back, 64 * 1024, NULL, NULL),
                     0);
    assert_int_equal(backend_read(g_be, &trn, "split/obj", 0, back, 64 * 1024, etag2, NULL),
                     -ESTALE);
    assert_int_equal(sched_backend_stats_get(g_sched, &b, 1), 1);
    assert_int_equal(b.split_reads - split0, 5);
    assert_int_equal(b.split_bytes, 16 << 10);
    sched_lane_leave_dir(g_sched, l, &inf, 0, 0, 1, SCHED_DIR_DOWN);
#undef READS
    ASSERT_OK(backend_del(g_be, NULL, "split/obj"));
    ASSERT_OK(backend_del(g_be, NULL, "split/even"));
    free(data);
    free(back);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || (strcmp(argv[1], "posix") != 0 && strcmp(argv[1], "s3") != 0) ||
        (argc == 3 && strcmp(argv[2], "sched") != 0)) {
        fprintf(stderr, "usage: %s posix|s3 [sched]\n", argv[0]);
        return 2;
    }
    g_kind = argv[1];
    g_sched_wrap = argc == 3;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_stat_delete),
        cmocka_unit_test(test_overwrite_changes_version),
        cmocka_unit_test(test_missing_keys),
        cmocka_unit_test(test_invalid_keys),
        cmocka_unit_test(test_list_2500),
        cmocka_unit_test(test_multipart_64m),
        cmocka_unit_test(test_multipart_abort),
        cmocka_unit_test(test_multipart_list),
        cmocka_unit_test(test_concurrent_threads),
        cmocka_unit_test(test_put_new),
        cmocka_unit_test(test_split_reads), /* last: it leaves inference demand for 500 ms */
    };
    return cmocka_run_group_tests_name(g_kind, tests, group_setup, group_teardown);
}
