/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_wb_crash.c - crash test of the write-back burst buffer: no acknowledged byte is lost and
 * nothing half-written appears in the backend, across SIGKILLs at random points.
 *
 * A child process runs a writer through the library (durability local): it creates files of
 * random sizes (about half of them multipart, up to 24 MiB with 5 MiB parts), writes them in
 * 1 MiB chunks, closes each and only then appends "index size sha256" to a manifest that it
 * fsyncs. Every chunk, close, manifest line and uploader event (upload start, part done,
 * uploaded) is reported to the parent as one byte through a pipe. The parent SIGKILLs the child
 * after a random number of those notifications (seeded; no sleeps), then restarts it, so the
 * library's recovery runs each time. A kill "lands in an upload" when the journal, read right
 * after the kill, has a row in state 'uploading'; the test fails if that never happened. At the
 * end the parent opens the burst buffer itself, waits for everything, and checks that every
 * manifest file is byte-identical in the backend (backend_read + SHA-256), that the journal has
 * no pending row, and (POSIX) that any multipart upload left behind holds no part.
 *
 * Usage: test_wb_crash [posix|rgw|rgw-outage] (rgw-outage: see test_rgw_outage). Environment:
 * WB_CRASH_CYCLES (default 50 posix, 12 rgw), WB_CRASH_SEED (default 20261130), WB_CRASH_FILES
 * (files written in all).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <sqlite3.h>

#include "common/dynbuf.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "testutil.h"
#include "tiers/backend.h"
#include "writeback/wb.h"

#define MIB (1024u * 1024u)
#define CHUNK MIB

struct crash {
    bool rgw;
    char *dir;
    char spool[512], journal[512], manifest[512], root[512];
    struct tu_s3_env s3;
    char bucket[64];
    uint64_t seed;
    int cycles, files;
};

static struct crash C;
static int notify_fd = -1;

static void notify(char c)
{
    if (notify_fd >= 0) {
        ssize_t n = write(notify_fd, &c, 1);
        (void)n;
    }
}

static void on_event(void *ctx, enum wb_event ev, int64_t id)
{
    (void)ctx;
    (void)id;
    if (ev == WB_EV_UPLOAD_START || ev == WB_EV_PART_DONE || ev == WB_EV_UPLOADED)
        notify('e');
}

static int open_backend(struct backend **out)
{
    if (!C.rgw) {
        struct posix_backend_config pc = {.name = "cold", .root = C.root};
        return backend_posix_open(&pc, out);
    }
#ifdef WB_HAVE_S3
    struct s3_backend_config sc = {.name = "cold",
                                   .endpoint = C.s3.endpoint,
                                   .region = C.s3.region,
                                   .bucket = C.bucket,
                                   .path_style = true,
                                   .access_key = C.s3.access_key,
                                   .secret_key = C.s3.secret_key};
    return backend_s3_open(&sc, out);
#else
    return -ENOTSUP;
#endif
}

static struct backend *g_be;

static struct backend *resolve(void *ctx, const char *name)
{
    (void)ctx;
    return strcmp(name, "cold") == 0 ? g_be : NULL;
}

static uint64_t file_size(int idx)
{
    uint64_t st = C.seed * 1000003u + (uint64_t)idx;
    uint64_t r = tu_rand_next(&st);
    uint64_t kind = r % 100;
    uint64_t v = tu_rand_next(&st);
    if (kind < 50)
        return v % (512 * 1024); /* one PUT */
    if (kind < 92)
        return 5 * MIB + v % (7 * MIB);   /* 2-3 parts */
    return 12 * MIB + v % (12 * MIB + 1); /* up to 24 MiB, 3-5 parts */
}

static void file_key(int idx, char *key, size_t n)
{
    snprintf(key, n, "ckpt/step-%03d.bin", idx);
}

static void sha256_hex(const void *buf, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int n;
    EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL);
    tier_hex(md, 32, out);
}

/* Count complete manifest lines ("idx size sha\n"), checking their order. */
static int manifest_count(void)
{
    FILE *fp = fopen(C.manifest, "r");
    if (!fp)
        return 0;
    int n = 0, idx;
    unsigned long long size;
    char sha[65];
    while (fscanf(fp, "%d %llu %64s\n", &idx, &size, sha) == 3 && idx == n)
        n++;
    fclose(fp);
    return n;
}

/* The child: write files C.files in order, from where the manifest says we are. */
static void child_main(int wfd)
{
    notify_fd = wfd;
    tier_log_set_level(TIER_LOG_ERR);
    if (open_backend(&g_be) != 0)
        _exit(3);
    struct wb_config cfg = {.spool_dir = C.spool,
                            .journal_path = C.journal,
                            .resolve = resolve,
                            .upload_threads = 2,
                            .parts_parallel = 2,
                            .part_size_bytes = 5 * MIB,
                            .retention_keep = 0,
                            .retry_base_ms = 20,
                            .retry_max_ms = 500,
                            .on_event = on_event};
    struct wb *wb;
    if (wb_open(&cfg, &wb) != 0)
        _exit(4);
    unsigned char *buf = malloc(24 * MIB + 1);
    int mfd = open(C.manifest, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (!buf || mfd < 0)
        _exit(5);
    for (int idx = manifest_count(); idx < C.files; idx++) {
        uint64_t size = file_size(idx);
        tu_fill_random(buf, size, C.seed ^ ((uint64_t)idx << 32));
        char key[64];
        file_key(idx, key, sizeof(key));
        struct wb_file *fh;
        if (wb_file_create(wb, "cold", key, &fh) != 0)
            _exit(6);
        for (uint64_t off = 0; off < size; off += CHUNK) {
            size_t len = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
            if (wb_write(fh, buf + off, len, (off_t)off) != (ssize_t)len)
                _exit(7);
            notify('w');
        }
        if (wb_file_close(fh) != 0)
            _exit(8);
        notify('c');
        /* Only now is the file acknowledged: record it. */
        char sha[65], line[128];
        sha256_hex(buf, size, sha);
        int n = snprintf(line, sizeof(line), "%d %llu %s\n", idx, (unsigned long long)size, sha);
        if (write(mfd, line, (size_t)n) != n || fsync(mfd) != 0)
            _exit(9);
        notify('m');
    }
    wb_wait(wb, NULL, "", -1);
    notify('D');
    wb_close(wb);
    backend_free(g_be);
    _exit(0);
}

static long long journal_uploading(void)
{
    sqlite3 *db;
    long long v = 0;
    if (sqlite3_open_v2(C.journal, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return 0;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM files WHERE state='uploading'", -1, &st,
                           NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

static long long journal_pending(void)
{
    sqlite3 *db;
    long long v = -1;
    assert_int_equal(sqlite3_open_v2(C.journal, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT count(*) FROM files WHERE state IN "
                                        "('open','sealed','uploading','cancelled','failed')",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* POSIX backend: a multipart upload left behind may only be one created right before a kill and
 * never journalled (see docs/WRITEBACK.md); such an upload holds no part (invariant I3). */
static int posix_leftover_uploads(int *completed_garbage)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/.tier-mpu", C.root);
    DIR *d = opendir(p);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        n++;
        char sub[1200];
        snprintf(sub, sizeof(sub), "%s/%s", p, de->d_name);
        DIR *s = opendir(sub);
        assert_non_null(s);
        struct dirent *pe;
        bool has_key = false, has_part = false;
        while ((pe = readdir(s))) {
            has_key |= strcmp(pe->d_name, "key") == 0;
            has_part |= strncmp(pe->d_name, "part-", 5) == 0;
        }
        closedir(s);
        /* Without its "key" file the directory is what posix_mpu_complete leaves when killed
         * while removing the staging of an upload that did complete (a backend cleanup
         * issue, not a lost upload). */
        if (!has_key) {
            (*completed_garbage)++;
            continue;
        }
        if (has_part)
            fail_msg("upload %s holds parts: a journalled upload was not finished or aborted",
                     de->d_name);
    }
    closedir(d);
    return n;
}

#ifdef WB_HAVE_S3
static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
    return dynbuf_append(ud, p, sz * n) == 0 ? sz * n : 0;
}

/* GET endpoint/bucket/path (SigV4 through libcurl); the body goes to out. Returns the HTTP
 * status or -1. The backend interface has no multipart listing, so the test asks RGW itself. */
static long s3_get(const char *path, struct dynbuf *out)
{
    char url[1024], sigv4[128], userpwd[300];
    snprintf(url, sizeof(url), "%s/%s/%s", C.s3.endpoint, C.bucket, path);
    snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", C.s3.region);
    snprintf(userpwd, sizeof(userpwd), "%s:%s", C.s3.access_key, C.s3.secret_key);
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
    curl_easy_setopt(c, CURLOPT_USERPWD, userpwd);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    struct curl_slist *hdrs = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    CURLcode cc = curl_easy_perform(c);
    long status = -1;
    if (cc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    return status;
}

/* The text of the first <tag>...</tag> at or after *pos; advances *pos. */
static bool xml_next(const char **pos, const char *tag, char *out, size_t outsz)
{
    char open[64], close[64];
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = strstr(*pos, open);
    if (!a)
        return false;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (!b)
        return false;
    snprintf(out, outsz, "%.*s", (int)(b - a), a);
    *pos = b + strlen(close);
    return true;
}

/* Multipart uploads left in the bucket; fails if any of them holds a part. */
static int rgw_leftover_uploads(void)
{
    struct dynbuf b;
    dynbuf_init(&b, 4u << 20);
    assert_int_equal(s3_get("?uploads=", &b), 200);
    int n = 0;
    const char *pos = b.data ? b.data : "";
    char key[512], id[256];
    while (xml_next(&pos, "Key", key, sizeof(key)) && xml_next(&pos, "UploadId", id, sizeof(id))) {
        n++;
        char path[1024];
        snprintf(path, sizeof(path), "%s?uploadId=%s", key, id);
        struct dynbuf pb;
        dynbuf_init(&pb, 4u << 20);
        assert_int_equal(s3_get(path, &pb), 200);
        if (pb.data && strstr(pb.data, "<PartNumber>"))
            fail_msg("multipart upload %s of %s holds parts: a journalled upload was not "
                     "finished or aborted",
                     id, key);
        dynbuf_fini(&pb);
    }
    dynbuf_fini(&b);
    return n;
}
#endif

static void run_crash(void)
{
    uint64_t rng = C.seed;
    int kills = 0, kills_in_upload = 0, finished = 0;
    for (int cycle = 0; cycle < C.cycles; cycle++) {
        int pfd[2];
        assert_int_equal(pipe(pfd), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(pfd[0]);
            child_main(pfd[1]);
        }
        close(pfd[1]);
        int target = 1 + (int)(tu_rand_next(&rng) % 30);
        int seen = 0;
        bool done = false;
        char c;
        while (seen < target) {
            ssize_t n = read(pfd[0], &c, 1);
            if (n == 1 && c == 'D') {
                done = true;
                break;
            }
            if (n <= 0)
                break;
            seen++;
        }
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        close(pfd[0]);
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
            fail_msg("cycle %d: writer exited with status %d", cycle, WEXITSTATUS(status));
        if (WIFSIGNALED(status)) {
            kills++;
            if (journal_uploading() > 0)
                kills_in_upload++;
        }
        finished += done;
    }
    int acked = manifest_count();
    print_message("crash test (%s): seed %llu, %d cycles, %d kills, %d during a multipart "
                  "upload, %d acknowledged files, %d runs reached the end\n",
                  C.rgw ? "rgw" : "posix", (unsigned long long)C.seed, C.cycles, kills,
                  kills_in_upload, acked, finished);
    assert_true(kills_in_upload > 0);
    assert_true(acked > 0);

    /* Final recovery in this process; then every acknowledged file must be in the backend. */
    assert_int_equal(open_backend(&g_be), 0);
    struct wb_config cfg = {.spool_dir = C.spool,
                            .journal_path = C.journal,
                            .resolve = resolve,
                            .part_size_bytes = 5 * MIB,
                            .retention_keep = 0,
                            .retry_base_ms = 20,
                            .retry_max_ms = 500};
    struct wb *wb;
    assert_int_equal(wb_open(&cfg, &wb), 0);
    assert_int_equal(wb_wait(wb, NULL, "", 120000), 0);
    wb_close(wb);
    assert_int_equal(journal_pending(), 0);

    FILE *fp = fopen(C.manifest, "r");
    assert_non_null(fp);
    unsigned char *buf = malloc(24 * MIB + 2);
    int idx;
    unsigned long long size;
    char sha[65], got[65];
    int checked = 0;
    while (fscanf(fp, "%d %llu %64s\n", &idx, &size, sha) == 3) {
        char key[64];
        file_key(idx, key, sizeof(key));
        ssize_t n = backend_read(g_be, NULL, key, 0, buf, 24 * MIB + 2, NULL, NULL);
        if (n != (ssize_t)size)
            fail_msg("%s: %zd bytes in the backend, %llu acknowledged", key, n, size);
        sha256_hex(buf, (size_t)n, got);
        if (strcmp(sha, got) != 0)
            fail_msg("%s: content differs from the acknowledged file", key);
        checked++;
    }
    fclose(fp);
    free(buf);
    assert_int_equal(checked, acked);
    if (!C.rgw) {
        int garbage = 0;
        int left = posix_leftover_uploads(&garbage);
        print_message("verified %d files; %d never-journalled empty multipart uploads left, "
                      "%d half-removed staging dirs of completed uploads\n",
                      checked, left - garbage, garbage);
    } else {
#ifdef WB_HAVE_S3
        print_message("verified %d files; %d never-journalled empty multipart uploads left\n",
                      checked, rgw_leftover_uploads());
#endif
    }
    backend_free(g_be);
    g_be = NULL;
}

static void setup_dirs(const char *tag)
{
    C.dir = tu_mkdtemp(tag);
    snprintf(C.spool, sizeof(C.spool), "%s/spool", C.dir);
    snprintf(C.journal, sizeof(C.journal), "%s/journal.db", C.dir);
    snprintf(C.manifest, sizeof(C.manifest), "%s/manifest", C.dir);
    snprintf(C.root, sizeof(C.root), "%s/root", C.dir);
    assert_int_equal(mkdir(C.root, 0700), 0);
}

static int env_int(const char *name, int def)
{
    const char *s = getenv(name);
    uint64_t v;
    return s && tier_parse_u64(s, &v) == 0 && v > 0 && v < 100000 ? (int)v : def;
}

static void test_crash_posix(void **state)
{
    (void)state;
    setup_dirs("wbcrash");
    C.cycles = env_int("WB_CRASH_CYCLES", 50);
    C.files = env_int("WB_CRASH_FILES", 30);
    run_crash();
    tu_rmtree(C.dir);
    free(C.dir);
}

/* Skip unless the S3 backend is built and the RGW runs (scripts/ceph.sh); otherwise a new bucket
 * named after bucket_tag and the directories for dir_tag. */
static void rgw_setup(const char *bucket_tag, const char *dir_tag)
{
#ifndef WB_HAVE_S3
    (void)bucket_tag, (void)dir_tag;
    print_message("skipped: the S3 backend is not built\n");
    skip();
#else
    if (!tu_s3_env_load(&C.s3)) {
        print_message("skipped: no RGW env (scripts/ceph.sh)\n");
        skip();
    }
    C.rgw = true;
    assert_int_equal(tu_s3_bucket_create(&C.s3, bucket_tag, C.bucket, sizeof(C.bucket)), 0);
    setup_dirs(dir_tag);
#endif
}

static void test_crash_rgw(void **state)
{
    (void)state;
    rgw_setup("wbcrash", "wbcrash-rgw");
#ifdef WB_HAVE_S3
    C.cycles = env_int("WB_CRASH_CYCLES", 12);
    C.files = env_int("WB_CRASH_FILES", 24);
    run_crash();
    tu_rmtree(C.dir);
    free(C.dir);
#endif
}

#ifdef WB_HAVE_S3
/* RGW outage: RGW is stopped in the middle of a multipart upload (from the first part-done
 * event, so the stop lands deterministically mid-upload), the burst buffer is restarted while
 * RGW is down, then RGW comes back: every file must end up complete and identical, and no
 * multipart upload may be left behind. */
static atomic_int outage_parts;

static void outage_event(void *ctx, enum wb_event ev, int64_t id)
{
    (void)ctx;
    (void)id;
    if (ev == WB_EV_PART_DONE && atomic_fetch_add(&outage_parts, 1) == 0) {
        int rc = tu_ceph_ctl("stop-rgw");
        if (rc != 0)
            fprintf(stderr, "stop-rgw failed: %d\n", rc);
    }
}

static void outage_test(void)
{
    struct s3_backend_config sc = {.name = "cold",
                                   .endpoint = C.s3.endpoint,
                                   .region = C.s3.region,
                                   .bucket = C.bucket,
                                   .path_style = true,
                                   .access_key = C.s3.access_key,
                                   .secret_key = C.s3.secret_key,
                                   .max_retries = 1,
                                   .retry_base_ms = 50,
                                   .connect_timeout_ms = 1000,
                                   .request_timeout_ms = 5000};
    assert_int_equal(backend_s3_open(&sc, &g_be), 0);
    struct wb_config cfg = {.spool_dir = C.spool,
                            .journal_path = C.journal,
                            .resolve = resolve,
                            .upload_threads = 1,
                            .parts_parallel = 1,
                            .part_size_bytes = 5 * MIB,
                            .retention_keep = 0,
                            .retry_base_ms = 100,
                            .retry_max_ms = 1000,
                            .on_event = outage_event};
    struct wb *wb;
    assert_int_equal(wb_open(&cfg, &wb), 0);
    enum { NFILES = 3 };
    const uint64_t sizes[NFILES] = {16 * MIB + 3, 11 * MIB, 100000};
    unsigned char *buf = malloc(16 * MIB + 3);
    for (int i = 0; i < NFILES; i++) {
        tu_fill_random(buf, sizes[i], 500 + (uint64_t)i);
        char key[64];
        file_key(i, key, sizeof(key));
        struct wb_file *fh;
        assert_int_equal(wb_file_create(wb, "cold", key, &fh), 0);
        assert_int_equal(wb_write(fh, buf, sizes[i], 0), (ssize_t)sizes[i]);
        assert_int_equal(wb_file_close(fh), 0);
    }
    /* The first part-done event stops RGW; uploads then fail and are retried. Poll the
     * counters with a deadline. */
    uint64_t dl = tier_now_mono_ns() + 120 * TIER_NS_PER_SEC;
    struct wb_stats st;
    do {
        wb_stats_get(wb, &st);
        if (st.upload_retries >= 2)
            break;
        tier_sleep_ms(20);
    } while (tier_now_mono_ns() < dl);
    assert_true(st.upload_retries >= 2);
    assert_int_equal(wb_wait(wb, NULL, "", 100), -ETIMEDOUT);
    print_message("RGW stopped mid-upload: %llu retries, %llu files uploaded so far\n",
                  (unsigned long long)st.upload_retries, (unsigned long long)st.uploads_done);
    /* Restart the burst buffer while RGW is down: recovery resumes the partial upload. */
    wb_close(wb);
    cfg.on_event = NULL;
    assert_int_equal(wb_open(&cfg, &wb), 0);
    wb_stats_get(wb, &st);
    assert_true(st.recovered_sealed + st.recovered_uploading >= 1);
    assert_int_equal(tu_ceph_ctl("start-rgw"), 0);
    assert_int_equal(wb_wait(wb, NULL, "", 180000), 0);
    wb_close(wb);
    for (int i = 0; i < NFILES; i++) {
        unsigned char *got = malloc(sizes[i] + 1);
        tu_fill_random(buf, sizes[i], 500 + (uint64_t)i);
        char key[64];
        file_key(i, key, sizeof(key));
        assert_int_equal(backend_read(g_be, NULL, key, 0, got, sizes[i] + 1, NULL, NULL),
                         (ssize_t)sizes[i]);
        assert_memory_equal(buf, got, sizes[i]);
        free(got);
    }
    free(buf);
    assert_int_equal(rgw_leftover_uploads(), 0);
    backend_free(g_be);
    g_be = NULL;
}
#endif

static void test_rgw_outage(void **state)
{
    (void)state;
    rgw_setup("wboutage", "wboutage");
#ifdef WB_HAVE_S3
    outage_test();
    tu_rmtree(C.dir);
    free(C.dir);
#endif
}

int main(int argc, char **argv)
{
    const char *s = getenv("WB_CRASH_SEED");
    uint64_t seed;
    C.seed = s && tier_parse_u64(s, &seed) == 0 ? seed : 20261130;
    const char *mode = argc > 1 ? argv[1] : "posix";
    const struct CMUnitTest posix[] = {cmocka_unit_test(test_crash_posix)};
    const struct CMUnitTest s3[] = {cmocka_unit_test(test_crash_rgw)};
    const struct CMUnitTest outage[] = {cmocka_unit_test(test_rgw_outage)};
    if (strcmp(mode, "rgw") == 0)
        return cmocka_run_group_tests(s3, NULL, NULL);
    if (strcmp(mode, "rgw-outage") == 0)
        return cmocka_run_group_tests(outage, NULL, NULL);
    return cmocka_run_group_tests(posix, NULL, NULL);
}
