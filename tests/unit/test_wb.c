/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_wb.c - unit tests for src/writeback: state transitions and journal contents, fail-stop
 * fsync, short writes, write errors, ENOSPC on a small tmpfs spool, backend down (nothing lost,
 * uploaded later), unlink/overwrite/rename, backpressure, durability=remote, retention, and
 * recovery of each journalled state. Runs against the real POSIX backend in a scratch directory,
 * wrapped by the fake backend of tests/lib/fakebe.h (faults, a down switch, a gate) for the
 * error paths.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>
#include <sqlite3.h>
#include <xxhash.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "fakebe.h"
#include "testutil.h"
#include "tiers/backend.h"
#include "writeback/wb.h"
#include "common/dynbuf.h"
#include "qos/sched.h"
#include "telemetry/telemetry.h"

#define MIB (1024u * 1024u)

/* ---- fixture -----------------------------------------------------------------------------------
 */

struct fx {
    char *dir;
    char spool[512], root[512], journal[512];
    struct backend *posix;
    struct backend *fault;   /* fakebe wrapping posix: the backend "warm" the buffer uses */
    struct backend *wrapped; /* NULL, or a scheduler wrapper "warm" resolves to instead */
    struct wb_config cfg;
    struct wb *wb;
    /* local I/O faults */
    atomic_int fsync_fail;    /* fail the next n fsyncs with -EIO */
    atomic_int pwrite_err;    /* 0 or -errno for every pwrite */
    atomic_size_t pwrite_max; /* 0 or the most bytes one pwrite writes (short writes) */
    struct wb_io_hooks io;
};

static struct backend *resolve(void *ctx, const char *name)
{
    struct fx *f = ctx;
    if (strcmp(name, "warm") != 0)
        return NULL;
    return f->wrapped ? f->wrapped : f->fault;
}

/* Calls of op that reached the fake backend. */
static int calls(struct fx *f, enum fakebe_op op)
{
    return (int)fakebe_calls(f->fault, op);
}

/* Every upload of part number no answers -EIO (0: none). */
static void fail_part(struct fx *f, int no)
{
    const struct fakebe_fault part = {.err = -EIO, .count = FAKEBE_ALWAYS, .part_no = no};
    fakebe_fail(f->fault, FAKEBE_MPU_PART, no ? &part : NULL);
}

static ssize_t hook_pwrite(void *ctx, int fd, const void *buf, size_t len, off_t off)
{
    struct fx *f = ctx;
    if (f->pwrite_err)
        return f->pwrite_err;
    if (f->pwrite_max && len > f->pwrite_max)
        len = f->pwrite_max;
    ssize_t n = pwrite(fd, buf, len, off);
    return n < 0 ? -errno : n;
}

static int hook_fsync(void *ctx, int fd)
{
    struct fx *f = ctx;
    if (f->fsync_fail > 0) {
        f->fsync_fail--;
        return -EIO;
    }
    return fsync(fd) == 0 ? 0 : -errno;
}

static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->dir = tu_mkdtemp("wb");
    snprintf(f->spool, sizeof(f->spool), "%s/spool", f->dir);
    snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
    snprintf(f->journal, sizeof(f->journal), "%s/journal.db", f->dir);
    assert_int_equal(mkdir(f->root, 0700), 0);
    struct posix_backend_config pc = {.name = "warm", .root = f->root};
    assert_int_equal(backend_posix_open(&pc, &f->posix), 0);
    f->fault = fakebe_wrap_new("warm", f->posix);
    assert_non_null(f->fault);
    f->io = (struct wb_io_hooks){.pwrite = hook_pwrite, .fsync = hook_fsync, .ctx = f};
    f->cfg = (struct wb_config){.spool_dir = f->spool,
                                .journal_path = f->journal,
                                .resolve = resolve,
                                .resolve_ctx = f,
                                .upload_threads = 2,
                                .parts_parallel = 3,
                                .part_size_bytes = 5 * MIB,
                                .retention_keep = -1,
                                .retry_base_ms = 10,
                                .retry_max_ms = 100,
                                .io = &f->io};
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    wb_close(f->wb);
    backend_free(f->fault);
    backend_free(f->posix);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void fx_open(struct fx *f)
{
    assert_int_equal(wb_open(&f->cfg, &f->wb), 0);
}

static void fx_reopen(struct fx *f)
{
    wb_close(f->wb);
    f->wb = NULL;
    fx_open(f);
}

/* ---- helpers -----------------------------------------------------------------------------------
 */

static long long jr_query(struct fx *f, const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(f->journal, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static long long jr_count_state(struct fx *f, const char *state)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM files WHERE state='%s'", state);
    return jr_query(f, sql);
}

static void write_file(struct fx *f, const char *key, size_t size, uint64_t seed)
{
    unsigned char *buf = malloc(size ? size : 1);
    tu_fill_random(buf, size, seed);
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", key, &fh), 0);
    /* Write in uneven chunks, the last ones first, to exercise pwrite at offsets. */
    size_t chunk = 700 * 1024 + 13;
    size_t n = (size + chunk - 1) / chunk;
    for (size_t i = n; i-- > 0;) {
        size_t off = i * chunk, len = size - off < chunk ? size - off : chunk;
        assert_int_equal(wb_write(fh, buf + off, len, (off_t)off), (ssize_t)len);
    }
    assert_int_equal(wb_file_close(fh), 0);
    free(buf);
}

static void assert_object(struct fx *f, const char *key, size_t size, uint64_t seed)
{
    unsigned char *want = malloc(size + 1), *got = malloc(size + 1);
    tu_fill_random(want, size, seed);
    ssize_t n = backend_read(f->posix, NULL, key, 0, got, size + 1, NULL, NULL);
    assert_int_equal(n, (ssize_t)size);
    assert_memory_equal(want, got, size);
    free(want);
    free(got);
}

static void assert_no_object(struct fx *f, const char *key)
{
    struct backend_stat st;
    assert_int_equal(backend_stat(f->posix, NULL, key, &st), -ENOENT);
}

/* No multipart upload is left in the POSIX backend (its staging area is <root>/.tier-mpu). */
static void assert_no_mpu(struct fx *f)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/.tier-mpu", f->root);
    DIR *d = opendir(p);
    if (!d)
        return;
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 0);
}

static int count_staging(struct fx *f)
{
    DIR *d = opendir(f->spool);
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        n += strstr(de->d_name, ".stg") != NULL;
    closedir(d);
    return n;
}

static struct wb_stats stats(struct fx *f)
{
    struct wb_stats st;
    wb_stats_get(f->wb, &st);
    return st;
}

/* Poll a condition with a deadline (no sleeps as synchronisation: the loop ends as soon as the
 * condition holds; the short pause only avoids spinning). */
/* The seal checksum of buf computed here with the one-shot API (the engine streams it). */
static void checksum_of(const void *buf, size_t len, char out[WB_CHECKSUM_MAX])
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
    snprintf(out, WB_CHECKSUM_MAX, "xxh128:");
    tier_hex(c.digest, sizeof(c.digest), out + 7);
}

/* ---- tests -------------------------------------------------------------------------------------
 */

static void test_small_file_states(void **state)
{
    struct fx *f = *state;
    fakebe_set_down(f->fault, true); /* hold the upload so the SEALED state is observable */
    fx_open(f);
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "ckpt/a.bin", &fh), 0);
    assert_int_equal(jr_count_state(f, "open"), 1);
    unsigned char buf[100000];
    tu_fill_random(buf, sizeof(buf), 1);
    assert_int_equal(wb_write(fh, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
    unsigned char rd[16];
    assert_int_equal(wb_file_read(fh, rd, 16, 50), 16);
    assert_memory_equal(rd, buf + 50, 16);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(jr_count_state(f, "sealed"), 1);
    assert_int_equal(jr_query(f, "SELECT size FROM files"), (long long)sizeof(buf));
    assert_int_equal(stats(f).dirty_bytes, sizeof(buf));
    /* Read-your-writes while not uploaded. */
    assert_int_equal(wb_read(f->wb, "warm", "ckpt/a.bin", rd, 16, 1000), 16);
    assert_memory_equal(rd, buf + 1000, 16);
    assert_int_equal(wb_wait(f->wb, "warm", "ckpt/", 50), -ETIMEDOUT);
    assert_no_object(f, "ckpt/a.bin");

    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "ckpt/a.bin", sizeof(buf), 1);
    assert_int_equal(jr_count_state(f, "uploaded"), 1);
    char sum[WB_CHECKSUM_MAX];
    checksum_of(buf, sizeof(buf), sum);
    struct wb_file_info *list;
    size_t n;
    assert_int_equal(wb_list(f->wb, "warm", "ckpt/", &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].key, "ckpt/a.bin");
    assert_int_equal(list[0].state, WB_UPLOADED);
    assert_string_equal(list[0].checksum, sum);
    assert_true(list[0].etag[0] != '\0');
    wb_list_free(list, n);
    assert_int_equal(stats(f).dirty_bytes, 0);
    assert_int_equal(calls(f, FAKEBE_MPU_CREATE), 0); /* small file: one PUT, no multipart */
}

static void test_multipart_and_retention(void **state)
{
    struct fx *f = *state;
    f->cfg.retention_keep = 1;
    fx_open(f);
    write_file(f, "ck/1.bin", 12 * MIB + 5, 11);
    assert_int_equal(wb_wait(f->wb, "warm", "ck/", 30000), 0);
    write_file(f, "ck/2.bin", 3 * MIB, 12);
    assert_int_equal(wb_wait(f->wb, "warm", "ck/", 30000), 0);
    assert_object(f, "ck/1.bin", 12 * MIB + 5, 11);
    assert_object(f, "ck/2.bin", 3 * MIB, 12);
    assert_int_equal(calls(f, FAKEBE_MPU_PART), 3);
    assert_int_equal(calls(f, FAKEBE_MPU_COMPLETE), 1);
    assert_int_equal(stats(f).parts_done, 3);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM parts"), 0);
    /* Retention keeps only the newest file of the directory locally. */
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE state='evictable' AND "
                                 "key='ck/1.bin'"),
                     1);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE state='uploaded' AND "
                                 "key='ck/2.bin'"),
                     1);
    assert_int_equal(count_staging(f), 1);
    char b[8];
    assert_int_equal(wb_read(f->wb, "warm", "ck/1.bin", b, 8, 0), -ENOENT);
    assert_int_equal(wb_read(f->wb, "warm", "ck/2.bin", b, 8, 0), 8);
    assert_no_mpu(f);
}

static void test_fsync_fail_stop(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "x/failed", &fh), 0);
    char buf[4096] = {1};
    assert_int_equal(wb_write(fh, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
    f->fsync_fail = 1;
    assert_int_equal(wb_file_fsync(fh), -EIO);
    assert_int_equal(f->fsync_fail, 0);
    assert_int_equal(jr_count_state(f, "failed"), 1);
    /* The next fsync would succeed at the OS level, but must never report success. */
    assert_int_equal(wb_file_fsync(fh), -EIO);
    assert_int_equal(wb_write(fh, buf, sizeof(buf), 0), -EIO);
    assert_int_equal(wb_file_close(fh), -EIO);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 0);
    assert_int_equal(count_staging(f), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 1000), 0);
    assert_no_object(f, "x/failed");
    /* A failure at close's own fsync is fail-stop too. */
    assert_int_equal(wb_file_create(f->wb, "warm", "x/failed2", &fh), 0);
    assert_int_equal(wb_write(fh, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
    f->fsync_fail = 1;
    assert_int_equal(wb_file_close(fh), -EIO);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 0);
    assert_no_object(f, "x/failed2");
}

static void test_short_writes_and_eio(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    f->pwrite_max = 1000;
    write_file(f, "s/short", 300000, 5);
    f->pwrite_max = 0;
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "s/short", 300000, 5);

    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "s/eio", &fh), 0);
    char buf[100] = {0};
    f->pwrite_err = -EIO;
    assert_int_equal(wb_write(fh, buf, sizeof(buf), 0), -EIO);
    f->pwrite_err = 0;
    assert_int_equal(wb_write(fh, buf, sizeof(buf), 0), -EIO); /* fail-stop */
    assert_int_equal(wb_file_close(fh), -EIO);
    assert_no_object(f, "s/eio");
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='s/eio'"), 0);
}

static void test_enospc_tmpfs(void **state)
{
    struct fx *f = *state;
    assert_int_equal(mkdir(f->spool, 0700), 0);
    if (mount("tmpfs", f->spool, "tmpfs", 0, "size=16m") != 0) {
        print_message("skipped: cannot mount a tmpfs spool (%s)\n", strerror(errno));
        skip();
    }
    f->cfg.io = NULL; /* the real pwrite */
    fx_open(f);
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "full/big", &fh), 0);
    size_t chunk = MIB;
    char *buf = malloc(chunk);
    tu_fill_random(buf, chunk, 3);
    ssize_t rc = 0;
    size_t off = 0;
    for (int i = 0; i < 32; i++, off += chunk) {
        rc = wb_write(fh, buf, chunk, (off_t)off);
        if (rc < 0)
            break;
    }
    assert_int_equal(rc, -ENOSPC);
    assert_true(off <= 16 * MIB);
    assert_int_not_equal(wb_file_close(fh), 0);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 0);
    assert_int_equal(count_staging(f), 0);
    assert_no_object(f, "full/big");
    /* The space is back: a file that fits is accepted and uploaded. */
    write_file(f, "full/small", 2 * MIB, 4);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "full/small", 2 * MIB, 4);
    wb_close(f->wb);
    f->wb = NULL;
    free(buf);
    assert_int_equal(umount(f->spool), 0);
}

/* Bytes spliced from a pipe (the mount's write_buf path): a full spool answers ENOSPC like a
 * pwrite and fails the file; with the I/O test hooks on, wb_write_fd declines (-EOPNOTSUPP)
 * without touching the pipe, so the caller reads the bytes and the hooks see them. */
static void test_write_fd_enospc_and_hooks(void **state)
{
    struct fx *f = *state;
    assert_int_equal(mkdir(f->spool, 0700), 0);
    if (mount("tmpfs", f->spool, "tmpfs", 0, "size=4m") != 0) {
        print_message("skipped: cannot mount a tmpfs spool (%s)\n", strerror(errno));
        skip();
    }
    f->cfg.io = NULL; /* the real pwrite and splice */
    fx_open(f);
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "fd/big", &fh), 0);
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(fcntl(p[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
    char *buf = malloc(MIB);
    assert_non_null(buf);
    tu_fill_random(buf, MIB, 32);
    ssize_t rc = 0;
    size_t off = 0;
    for (int i = 0; i < 8; i++, off += MIB) {
        assert_int_equal(write(p[1], buf, MIB), (ssize_t)MIB);
        rc = wb_write_fd(fh, p[0], MIB, (off_t)off);
        if (rc < 0)
            break;
    }
    assert_int_equal(rc, -ENOSPC);
    assert_true(off <= 4 * MIB);
    assert_int_equal(wb_write(fh, buf, 1, 0), -EIO); /* fail-stop, as after a pwrite's ENOSPC */
    assert_int_not_equal(wb_file_close(fh), 0);
    assert_no_object(f, "fd/big");
    assert_int_equal(count_staging(f), 0);
    wb_close(f->wb);
    f->wb = NULL;
    /* drain what the failed write left in the pipe (non-blocking: it may be empty) */
    assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    while (read(p[0], buf, MIB) > 0)
        ;

    f->cfg.io = &f->io; /* hooks on: wb_write_fd declines, the pipe is left as it was */
    fx_open(f);
    assert_int_equal(wb_file_create(f->wb, "warm", "fd/hooked", &fh), 0);
    char b[4096], back[4096];
    tu_fill_random(b, sizeof(b), 31);
    assert_int_equal(write(p[1], b, sizeof(b)), (ssize_t)sizeof(b));
    assert_int_equal(wb_write_fd(fh, p[0], sizeof(b), 0), -EOPNOTSUPP);
    assert_int_equal(read(p[0], back, sizeof(back)), (ssize_t)sizeof(back));
    assert_memory_equal(back, b, sizeof(b));
    assert_int_equal(wb_write(fh, back, sizeof(back), 0), (ssize_t)sizeof(back));
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    wb_close(f->wb);
    f->wb = NULL;
    free(buf);
    close(p[0]);
    close(p[1]);
    assert_int_equal(umount(f->spool), 0);
}

static void test_backend_down_then_restart(void **state)
{
    struct fx *f = *state;
    fakebe_set_down(f->fault, true);
    fx_open(f);
    write_file(f, "d/small", 1000, 21);
    write_file(f, "d/large", 11 * MIB, 22);
    TU_WAIT_UNTIL(stats(f).upload_retries >= 4);
    assert_int_equal(jr_count_state(f, "sealed"), 2);
    assert_int_equal(wb_wait(f->wb, NULL, "d/", 20), -ETIMEDOUT);
    /* Part 2 fails once the backend is back: the file sits in UPLOADING with its upload id. */
    fail_part(f, 2);
    fakebe_set_down(f->fault, false);
    TU_WAIT_UNTIL(jr_count_state(f, "uploading") == 1 &&
                  jr_query(f, "SELECT count(*) FROM parts") == 2);
    TU_WAIT_UNTIL(jr_count_state(f, "uploaded") == 1);
    assert_object(f, "d/small", 1000, 21);
    assert_no_object(f, "d/large");
    /* Restart (recovery) with the backend healthy: only the missing part is sent. */
    wb_close(f->wb);
    f->wb = NULL;
    fail_part(f, 0);
    int parts_before = calls(f, FAKEBE_MPU_PART);
    fx_open(f);
    assert_int_equal(stats(f).recovered_uploading, 1);
    assert_int_equal(wb_wait(f->wb, NULL, "", 20000), 0);
    assert_int_equal(calls(f, FAKEBE_MPU_PART) - parts_before, 1);
    assert_object(f, "d/large", 11 * MIB, 22);
    assert_no_mpu(f);
}

static void test_unlink_while_uploading(void **state)
{
    struct fx *f = *state;
    fail_part(f, 3);
    fx_open(f);
    write_file(f, "u/big", 11 * MIB, 31);
    TU_WAIT_UNTIL(jr_count_state(f, "uploading") == 1 && calls(f, FAKEBE_MPU_PART) >= 3);
    assert_int_equal(wb_unlink(f->wb, "warm", "u/big"), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_int_equal(calls(f, FAKEBE_MPU_COMPLETE), 0);
    assert_true(calls(f, FAKEBE_MPU_ABORT) >= 1);
    assert_no_object(f, "u/big");
    assert_no_mpu(f);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 0);
    assert_int_equal(count_staging(f), 0);
    assert_int_equal(wb_unlink(f->wb, "warm", "u/big"), -ENOENT);

    /* Unlink of a sealed, not yet uploaded file: never appears. */
    fakebe_set_down(f->fault, true);
    write_file(f, "u/sealed", 1000, 32);
    assert_int_equal(wb_unlink(f->wb, "warm", "u/sealed"), 0);
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_no_object(f, "u/sealed");
    /* Unlink of an uploaded file deletes the object. */
    write_file(f, "u/done", 1000, 33);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "u/done", 1000, 33);
    assert_int_equal(wb_unlink(f->wb, "warm", "u/done"), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_no_object(f, "u/done");
    /* Unlink while the writer still has it open: close succeeds, nothing is uploaded. */
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "u/open", &fh), 0);
    assert_int_equal(wb_write(fh, "abc", 3, 0), 3);
    assert_int_equal(wb_unlink(f->wb, "warm", "u/open"), 0);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_no_object(f, "u/open");
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 0);
}

static void test_overwrite_and_rename(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    write_file(f, "o/k", 5000, 41);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    write_file(f, "o/k", 7000, 42);
    assert_int_equal(jr_query(f, "SELECT max(generation) FROM files WHERE key='o/k'"), 2);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "o/k", 7000, 42);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='o/k'"), 1);

    /* Overwrite of a sealed file while the backend is down: only the new one ever appears. */
    fakebe_set_down(f->fault, true);
    write_file(f, "o/m", 11 * MIB, 43);
    write_file(f, "o/m", 6 * MIB, 44);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='o/m'"), 1);
    /* Rename of a not-yet-uploaded file. */
    write_file(f, "o/r1", 3000, 45);
    assert_int_equal(wb_rename(f->wb, "warm", "o/r1", "o/r2"), 0);
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_wait(f->wb, NULL, "", 20000), 0);
    assert_object(f, "o/m", 6 * MIB, 44);
    assert_object(f, "o/r2", 3000, 45);
    assert_no_object(f, "o/r1");
    /* Rename of an uploaded file (local copy kept): re-uploaded, old object deleted. */
    assert_int_equal(wb_rename(f->wb, "warm", "o/r2", "o/r3"), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "o/r3", 3000, 45);
    assert_no_object(f, "o/r2");
    /* Rename over an existing uploaded file replaces it. */
    assert_int_equal(wb_rename(f->wb, "warm", "o/r3", "o/k"), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "o/k", 3000, 45);
    assert_no_object(f, "o/r3");
    assert_int_equal(wb_rename(f->wb, "warm", "o/nope", "o/x"), -ENOENT);
    assert_no_mpu(f);
}

static void test_backpressure(void **state)
{
    struct fx *f = *state;
    fakebe_set_down(f->fault, true);
    f->cfg.max_dirty_bytes = 2 * MIB;
    f->cfg.backpressure_wait_ms = 300;
    fx_open(f);
    write_file(f, "b/1", 3 * MIB / 2, 51);
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "b/2", &fh), 0);
    char *buf = calloc(1, MIB);
    uint64_t t0 = tier_now_mono_ns();
    assert_int_equal(wb_write(fh, buf, MIB, 0), -ENOSPC);
    uint64_t waited_ms = (tier_now_mono_ns() - t0) / TIER_NS_PER_MS;
    assert_true(waited_ms >= 250);
    assert_int_equal(stats(f).backpressure_waits, 1);
    assert_true(stats(f).dirty_bytes <= 2 * MIB);
    /* Once uploads drain, the writer proceeds (the wait ends on the upload, not on a timer). */
    wb_close(f->wb);
    f->wb = NULL; /* fh was freed by wb_close */
    f->cfg.backpressure_wait_ms = 20000;
    fx_open(f);
    assert_int_equal(wb_file_create(f->wb, "warm", "b/2", &fh), 0);
    fakebe_set_down(f->fault, false);
    t0 = tier_now_mono_ns();
    assert_int_equal(wb_write(fh, buf, MIB, 0), MIB);
    assert_true((tier_now_mono_ns() - t0) / TIER_NS_PER_MS < 15000);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "b/1", 3 * MIB / 2, 51);
    free(buf);
}

static void test_durability_remote(void **state)
{
    struct fx *f = *state;
    f->cfg.durability = WB_DURABILITY_REMOTE;
    fx_open(f);
    write_file(f, "r/a", 6 * MIB, 61);
    /* close returned: the object must already be there, verified. */
    assert_object(f, "r/a", 6 * MIB, 61);
    assert_int_equal(jr_count_state(f, "uploaded"), 1);
    /* retention_keep = 0: the local copy goes as soon as the upload is done. */
    f->cfg.retention_keep = 0;
    fx_reopen(f);
    write_file(f, "r/b", 1000, 62);
    /* Both r/a (uploaded under keep = all) and r/b lose their local copy. */
    assert_int_equal(jr_count_state(f, "evictable"), 2);
    assert_int_equal(count_staging(f), 0);
    char b[4];
    assert_int_equal(wb_read(f->wb, "warm", "r/b", b, 4, 0), -ENOENT);
}

static void test_recovery_discards_unclosed(void **state)
{
    struct fx *f = *state;
    fakebe_set_down(f->fault, true);
    fx_open(f);
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "rc/open", &fh), 0);
    assert_int_equal(wb_write(fh, "data", 4, 0), 4);
    assert_int_equal(wb_file_fsync(fh), 0);
    write_file(f, "rc/sealed", 2000, 71);
    /* A stray staging file without a row (crash between a commit and an unlink). */
    char p[600];
    snprintf(p, sizeof(p), "%s/999.stg", f->spool);
    tu_write_file(p, "x", 1);
    wb_close(f->wb); /* as a crash: the open handle is never closed */
    f->wb = NULL;
    fakebe_set_down(f->fault, false);
    fx_open(f);
    struct wb_stats st = stats(f);
    assert_int_equal(st.recovered_discarded, 1);
    assert_int_equal(st.recovered_sealed, 1);
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "rc/sealed", 2000, 71);
    assert_no_object(f, "rc/open");
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='rc/open'"), 0);
    fx_reopen(f);
    assert_int_equal(stats(f).recovered_sealed, 0);
}

static void test_recovery_aborts_cancelled(void **state)
{
    struct fx *f = *state;
    fail_part(f, 1);
    fx_open(f);
    write_file(f, "ca/big", 11 * MIB, 81);
    TU_WAIT_UNTIL(jr_count_state(f, "uploading") == 1);
    fakebe_set_down(f->fault, true); /* the abort cannot reach the backend */
    assert_int_equal(wb_unlink(f->wb, "warm", "ca/big"), 0);
    assert_int_equal(jr_count_state(f, "cancelled"), 1);
    assert_int_equal(wb_wait(f->wb, NULL, "", 100), -ETIMEDOUT);
    wb_close(f->wb);
    f->wb = NULL;
    fakebe_set_down(f->fault, false);
    fail_part(f, 0);
    fx_open(f);
    assert_int_equal(stats(f).recovered_aborts, 1);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 0);
    assert_no_mpu(f);
    assert_no_object(f, "ca/big");
    assert_int_equal(calls(f, FAKEBE_MPU_COMPLETE), 0);
}

static void test_bad_config_and_keys(void **state)
{
    struct fx *f = *state;
    f->cfg.part_size_bytes = MIB;
    assert_int_equal(wb_open(&f->cfg, &f->wb), -EINVAL);
    f->wb = NULL;
    f->cfg.part_size_bytes = 5 * MIB;
    fx_open(f);
    struct wb_file *fh = NULL;
    assert_int_equal(wb_file_create(f->wb, "warm", "../escape", &fh), -EINVAL);
    assert_int_equal(wb_file_create(f->wb, "warm", "/abs", &fh), -EINVAL);
    assert_int_equal(wb_file_create(f->wb, "", "k", &fh), -EINVAL);
    assert_null(fh);
    /* A file for an unknown backend waits (it is never dropped). */
    assert_int_equal(wb_file_create(f->wb, "nosuch", "k", &fh), 0);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(wb_wait(f->wb, "nosuch", "", 100), -ETIMEDOUT);
    assert_int_equal(jr_count_state(f, "sealed"), 1);
}

static void test_age_bound_and_deadline(void **state)
{
    struct fx *f = *state;
    fakebe_set_down(f->fault, true);
    f->cfg.max_dirty_age_ms = 100;
    f->cfg.backpressure_wait_ms = 300;
    f->cfg.upload_deadline_ms = 50;
    fx_open(f);
    write_file(f, "age/1", 1000, 95);
    /* The sealed file cannot upload: once it is older than 100 ms, new writers are held back. */
    TU_WAIT_UNTIL(stats(f).deadline_warnings == 1);
    TU_WAIT_UNTIL(jr_query(f, "SELECT count(*) FROM files WHERE state='sealed'") == 1);
    struct wb_file *fh = NULL;
    uint64_t t0 = tier_now_mono_ns();
    int rc;
    do { /* the age bound holds from 100 ms after the seal on */
        rc = wb_file_create(f->wb, "warm", "age/2", &fh);
        if (rc == 0)
            assert_int_equal(wb_file_close(fh), 0);
    } while (rc == 0 && tier_now_mono_ns() - t0 < 5 * TIER_NS_PER_SEC);
    assert_int_equal(rc, -ENOSPC);
    assert_true(stats(f).backpressure_waits >= 1);
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_int_equal(wb_file_create(f->wb, "warm", "age/3", &fh), 0);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "age/1", 1000, 95);
}

/* The order in which uploads start (WB_EV_UPLOAD_START), as file ids. */
struct start_log {
    pthread_mutex_t mu;
    int64_t ids[16];
    int n;
};

static void log_start(void *ctx, enum wb_event ev, int64_t id)
{
    struct start_log *l = ctx;
    pthread_mutex_lock(&l->mu);
    if (ev == WB_EV_UPLOAD_START && l->n < 16)
        l->ids[l->n++] = id;
    pthread_mutex_unlock(&l->mu);
}

static int starts(struct start_log *l)
{
    pthread_mutex_lock(&l->mu);
    int n = l->n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

static long long id_of(struct fx *f, const char *key)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT id FROM files WHERE key='%s'", key);
    return jr_query(f, sql);
}

/* The burst buffer drains oldest first (WRITEBACK.md "In memory"): with one upload thread, files
 * created in one order and sealed in another start their uploads in seal order, live and after
 * a restart. Before the fix, a restart after a reboot queued the files sealed before the boot
 * (older than the monotonic clock) behind the newer ones, and files of equal age by id, so the
 * oldest checkpoint waited for the newest (third review). */
static void test_upload_order_is_seal_order(void **state)
{
    struct fx *f = *state;
    /* static: the teardown's wb_close after a failed assertion must not find it gone */
    static struct start_log lg = {.mu = PTHREAD_MUTEX_INITIALIZER};
    lg.n = 0;
    f->cfg.upload_threads = 1;
    f->cfg.on_event = log_start;
    f->cfg.event_ctx = &lg;
    fx_open(f);
    /* Live: created o0..o4, sealed o3 o1 o4 o0 o2; the first upload waits at the gate while the
     * others are sealed. */
    static const char *const live[] = {"o/0", "o/1", "o/2", "o/3", "o/4"};
    static const int seal_order[] = {3, 1, 4, 0, 2};
    struct wb_file *fh[5];
    for (int i = 0; i < 5; i++) {
        assert_int_equal(wb_file_create(f->wb, "warm", live[i], &fh[i]), 0);
        assert_int_equal(wb_write(fh[i], "x", 1, 0), 1);
    }
    fakebe_gate_close(f->fault, FAKEBE_PUT, NULL);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(wb_file_close(fh[seal_order[i]]), 0);
        if (i == 0)
            TU_WAIT_UNTIL(fakebe_gate_arrived(f->fault) == 1);
    }
    fakebe_gate_open(f->fault);
    assert_int_equal(wb_wait(f->wb, NULL, "o/", 10000), 0);
    assert_int_equal(starts(&lg), 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(lg.ids[i], id_of(f, live[seal_order[i]]));

    /* Restart: created r/c, r/b, r/a, sealed r/a, r/b, r/c while the backend is down; the
     * journal then says r/a and r/b were sealed before this boot (20 years ago), r/c a second
     * ago. Recovery must queue them a, b, c. */
    fakebe_set_down(f->fault, true);
    struct wb_file *c, *b, *a;
    assert_int_equal(wb_file_create(f->wb, "warm", "r/c", &c), 0);
    assert_int_equal(wb_file_create(f->wb, "warm", "r/b", &b), 0);
    assert_int_equal(wb_file_create(f->wb, "warm", "r/a", &a), 0);
    assert_int_equal(wb_write(a, "x", 1, 0), 1);
    assert_int_equal(wb_file_close(a), 0);
    assert_int_equal(wb_file_close(b), 0);
    assert_int_equal(wb_file_close(c), 0);
    wb_close(f->wb);
    f->wb = NULL;
    int64_t now = (int64_t)tier_now_real_ns(), year = 365LL * 24 * 3600 * TIER_NS_PER_SEC;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->journal, &db), SQLITE_OK);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "UPDATE files SET sealed_ns = CASE key WHEN 'r/a' THEN %lld WHEN 'r/b' THEN %lld "
             "ELSE %lld END WHERE key LIKE 'r/%%'",
             (long long)(now - 20 * year), (long long)(now - 20 * year + TIER_NS_PER_SEC),
             (long long)(now - TIER_NS_PER_SEC));
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    fakebe_set_down(f->fault, false);
    pthread_mutex_lock(&lg.mu);
    lg.n = 0;
    pthread_mutex_unlock(&lg.mu);
    fx_open(f);
    assert_int_equal(wb_wait(f->wb, NULL, "r/", 10000), 0);
    assert_int_equal(starts(&lg), 3);
    assert_int_equal(lg.ids[0], id_of(f, "r/a"));
    assert_int_equal(lg.ids[1], id_of(f, "r/b"));
    assert_int_equal(lg.ids[2], id_of(f, "r/c"));
    char got[2];
    assert_int_equal(backend_read(f->posix, NULL, "r/a", 0, got, sizeof(got), NULL, NULL), 1);
    assert_int_equal(got[0], 'x');
    /* the uploader may still report an event after wb_wait returned (the end of the last
     * upload): close the buffer while this test's lg is its event context (lg was on this
     * stack, and the teardown's wb_close once called log_start on a dead frame: a glibc mutex
     * assertion, about 1 run in 30 under load) */
    wb_close(f->wb);
    f->wb = NULL;
}

static bool has_object(struct fx *f, const char *key)
{
    struct backend_stat st;
    return backend_stat(f->posix, NULL, key, &st) == 0;
}

/* Burst absorption: a file sealed while writes go on is held; wb_wait and a backlog at half of
 * max_dirty each lift the hold, which comes back once they are gone. */
static void test_upload_holdoff_lifts(void **state)
{
    struct fx *f = *state;
    f->cfg.upload_holdoff_ms = 120000; /* longer than the test: only a lift releases a file */
    f->cfg.upload_holdoff_max_ms = 600000;
    f->cfg.max_dirty_bytes = 64 * MIB;
    fx_open(f);
    write_file(f, "h/a", 100000, 11);
    assert_int_equal(stats(f).held, 1);
    /* Held, not merely not yet uploaded: an upload of 100 KB takes milliseconds. */
    uint64_t until = tier_now_mono_ns() + 300 * TIER_NS_PER_MS;
    while (tier_now_mono_ns() < until) {
        assert_int_equal(calls(f, FAKEBE_PUT), 0);
        tier_sleep_ms(5);
    }
    assert_false(has_object(f, "h/a"));
    /* A waiter lifts the hold (tierctl wait, durability = remote). */
    assert_int_equal(wb_wait(f->wb, NULL, "h/a", 10000), 0);
    assert_object(f, "h/a", 100000, 11);
    /* Without a waiter the next file is held again. */
    write_file(f, "h/b", 100000, 12);
    assert_int_equal(stats(f).held, 1);
    /* A backlog at half of max_dirty is drained, the held file first (oldest). */
    write_file(f, "h/big", 33 * MIB, 13);
    TU_WAIT_UNTIL(has_object(f, "h/b") && has_object(f, "h/big"));
    assert_object(f, "h/b", 100000, 12);
    assert_object(f, "h/big", 33 * MIB, 13);
    TU_WAIT_UNTIL(stats(f).dirty_bytes == 0);
    write_file(f, "h/c", 1000, 14);
    assert_int_equal(stats(f).held, 1);
}

/* Burst absorption ends: at upload_holdoff_max after a seal even while writes go on, and when
 * the writes pause for upload_holdoff. */
static void test_upload_holdoff_bounds(void **state)
{
    struct fx *f = *state;
    f->cfg.upload_holdoff_ms = 120000;
    f->cfg.upload_holdoff_max_ms = 200;
    fx_open(f);
    uint64_t t0 = tier_now_mono_ns(); /* before the seal: the upload comes >= 200 ms after it */
    write_file(f, "m/a", 100000, 21);
    struct wb_file *fh = NULL;
    assert_int_equal(wb_file_create(f->wb, "warm", "m/writing", &fh), 0);
    char chunk[4096];
    memset(chunk, 7, sizeof(chunk));
    uint64_t deadline = tier_now_mono_ns() + 20 * TIER_NS_PER_SEC;
    off_t off = 0;
    while (!has_object(f, "m/a") && tier_now_mono_ns() < deadline) { /* keep writing */
        assert_int_equal(wb_write(fh, chunk, sizeof(chunk), off), (ssize_t)sizeof(chunk));
        off += (off_t)sizeof(chunk);
        tier_sleep_ms(2);
    }
    assert_true(has_object(f, "m/a"));
    assert_true(tier_now_mono_ns() - t0 >= 200 * TIER_NS_PER_MS); /* not before the bound */
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    wb_close(f->wb);
    f->wb = NULL;

    f->cfg.upload_holdoff_ms = 100;
    f->cfg.upload_holdoff_max_ms = 600000;
    fx_open(f);
    write_file(f, "m/b", 100000, 22);
    TU_WAIT_UNTIL(has_object(f, "m/b")); /* no waiter: the pause in writes releases it */
    assert_object(f, "m/b", 100000, 22);
}

/* A journal written before the seal checksum became XXH3-128 (column sha256, bare hex) opens:
 * the column is renamed and its values tagged "sha256:". */
static void test_journal_migration_sha256(void **state)
{
    struct fx *f = *state;
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->journal, &db), SQLITE_OK);
    const char *old =
        "CREATE TABLE files(id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL,"
        " key TEXT NOT NULL, generation INTEGER NOT NULL, state TEXT NOT NULL,"
        " size INTEGER NOT NULL DEFAULT 0, sha256 TEXT, upload_id TEXT, created_ns INTEGER,"
        " sealed_ns INTEGER, uploaded_ns INTEGER, etag TEXT);"
        "CREATE TABLE parts(file_id INTEGER NOT NULL, part_no INTEGER NOT NULL,"
        " etag TEXT NOT NULL, size INTEGER NOT NULL, PRIMARY KEY(file_id, part_no));"
        "INSERT INTO files(backend,key,generation,state,size,sha256,created_ns,sealed_ns,"
        " uploaded_ns,etag) VALUES('warm','old/x',1,'evictable',5,"
        " '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824',1,2,3,'e1');";
    assert_int_equal(sqlite3_exec(db, old, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    fx_open(f);
    struct wb_file_info *list;
    size_t n;
    assert_int_equal(wb_list(f->wb, "warm", "old/", &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].checksum,
                        "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    wb_list_free(list, n);
    /* New seals in the migrated journal carry the new checksum. */
    write_file(f, "old/y", 1000, 5);
    unsigned char buf[1000];
    tu_fill_random(buf, sizeof(buf), 5);
    char sum[WB_CHECKSUM_MAX];
    checksum_of(buf, sizeof(buf), sum);
    assert_int_equal(wb_list(f->wb, "warm", "old/y", &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].checksum, sum);
    wb_list_free(list, n);
}

/* Upgrade (issue 15): a journal exactly as tierd 0.1.0 (commit e4c5dfb) wrote it, built here by
 * hand with that version's schema (`checksum` already, no `error` column, no user_version), with
 * a sealed file waiting for its upload (its staging file beside it) and an evicted one: it opens,
 * is migrated to the current format, the sealed file is uploaded byte-identical (its checksum
 * verified) and the evicted one is listed. */
static void test_journal_fixture_0_1_0(void **state)
{
    struct fx *f = *state;
    unsigned char buf[1000];
    tu_fill_random(buf, sizeof(buf), 7);
    char sum[WB_CHECKSUM_MAX], sql[2048];
    checksum_of(buf, sizeof(buf), sum);
    assert_int_equal(mkdir(f->spool, 0700) == 0 || errno == EEXIST, 1);
    char stg[600];
    snprintf(stg, sizeof(stg), "%s/1.stg", f->spool);
    tu_write_file(stg, buf, sizeof(buf));
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->journal, &db), SQLITE_OK);
    snprintf(sql, sizeof(sql),
             /* e4c5dfb's src/writeback/journal.c schema, verbatim */
             "CREATE TABLE IF NOT EXISTS files("
             " id INTEGER PRIMARY KEY AUTOINCREMENT,"
             " backend TEXT NOT NULL, key TEXT NOT NULL, generation INTEGER NOT NULL,"
             " state TEXT NOT NULL, size INTEGER NOT NULL DEFAULT 0, checksum TEXT, upload_id TEXT,"
             " created_ns INTEGER, sealed_ns INTEGER, uploaded_ns INTEGER, etag TEXT);"
             "CREATE TABLE IF NOT EXISTS parts("
             " file_id INTEGER NOT NULL, part_no INTEGER NOT NULL, etag TEXT NOT NULL,"
             " size INTEGER NOT NULL, PRIMARY KEY(file_id, part_no));"
             "INSERT INTO files(backend,key,generation,state,size,checksum,created_ns,sealed_ns)"
             " VALUES('warm','fx/sealed',1,'sealed',1000,'%s',1000,2000);"
             "INSERT INTO files(backend,key,generation,state,size,checksum,created_ns,sealed_ns,"
             " uploaded_ns,etag) VALUES('warm','fx/done',1,'evictable',5,'%s',1,2,3,'e1');",
             sum, sum);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    fx_open(f);
    assert_int_equal(wb_wait(f->wb, "warm", "fx/", 30000), 0);
    assert_object(f, "fx/sealed", 1000, 7);
    struct wb_file_info *list;
    size_t n;
    assert_int_equal(wb_list(f->wb, "warm", "fx/", &list, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].key, "fx/done");
    assert_int_equal(list[0].state, WB_EVICTABLE);
    assert_string_equal(list[1].key, "fx/sealed");
    assert_true(list[1].state == WB_UPLOADED || list[1].state == WB_EVICTABLE);
    wb_list_free(list, n);
    assert_int_equal(jr_query(f, "PRAGMA user_version"), 1);
    assert_int_equal(
        jr_query(f, "SELECT count(*) FROM pragma_table_info('files') WHERE name='error'"), 1);
}

/* ---- files the backend can never take (FAILED, never sealed for ever) and spool corruption --- */

/* A name the POSIX backend reserves is refused at create, before close(2) can promise it (it
 * used to be sealed and then refused by every upload attempt, for ever). */
static void test_reserved_name_refused_at_create(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    struct wb_file *fh = NULL;
    assert_int_equal(wb_file_create(f->wb, "warm", "ckpt/.tier-tmp.x", &fh), -EINVAL);
    assert_int_equal(wb_file_create(f->wb, "warm", ".tier-mpu/k", &fh), -EINVAL);
    assert_null(fh);
    write_file(f, "ckpt/a", 100, 1);
    assert_int_equal(wb_rename(f->wb, "warm", "ckpt/a", "ckpt/.tier-tmp.y"), -EINVAL);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key LIKE '%tier-%'"), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "ckpt/a", 100, 1);
}

/* A file that needs more parts than the backend takes at part_size gets larger parts of its own
 * (it used to fail with EFBIG on every attempt, for ever). */
static void test_per_file_part_size(void **state)
{
    struct fx *f = *state;
    fakebe_set_max_parts(f->fault, 2); /* as S3's 10,000 for a 78 GiB file at 8 MiB parts */
    fx_open(f);
    write_file(f, "big/a", 12 * MIB + 5, 7); /* 3 parts of 5 MiB: too many */
    assert_int_equal(wb_wait(f->wb, NULL, "", 30000), 0);
    assert_object(f, "big/a", 12 * MIB + 5, 7);
    assert_int_equal(calls(f, FAKEBE_MPU_PART), 2);
    assert_int_equal(jr_count_state(f, "failed"), 0);
    /* beyond what any part size fits, a write is refused with EFBIG and the file stays usable */
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "big/b", &fh), 0);
    char c = 'x';
    assert_int_equal(wb_write(fh, &c, 1, (off_t)WB_MAX_FILE_BYTES), -EFBIG);
    assert_int_equal(wb_truncate(fh, (off_t)WB_MAX_FILE_BYTES + 1), -EFBIG);
    assert_int_equal(wb_write(fh, &c, 1, 0), 1);
    assert_int_equal(wb_file_close(fh), 0);
}

static void assert_failed_listed(struct fx *f, const char *key, const char *why)
{
    struct wb_file_info *list;
    size_t n;
    assert_int_equal(wb_list(f->wb, "warm", key, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].state, WB_FAILED);
    assert_true(list[0].sealed);
    assert_non_null(list[0].error);
    if (!strstr(list[0].error, why))
        fail_msg("error '%s' does not say '%s'", list[0].error, why);
    wb_list_free(list, n);
}

/* A permanent refusal by the backend makes the sealed file FAILED: wait reports it at once, the
 * backlog no longer counts it, reads fail (never an older object), it survives a restart with its
 * local copy, and unlink or a rewrite ends it. */
static void test_refused_upload_fails(void **state)
{
    struct fx *f = *state;
    f->cfg.max_dirty_bytes = 2 * MIB; /* a refused file must not hold the backlog */
    fx_open(f);
    write_file(f, "r/old", 1000, 3); /* an older object under the key */
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    fakebe_fail_next(f->fault, FAKEBE_PUT, -EFBIG, FAKEBE_ALWAYS); /* e.g. S3 EntityTooLarge */
    write_file(f, "r/old", 1500 * 1024, 4);
    assert_int_equal(wb_wait(f->wb, "warm", "r/", 10000), -EIO);
    assert_failed_listed(f, "r/old", "File too large");
    assert_int_equal(stats(f).dirty_bytes, 0);
    assert_int_equal(stats(f).upload_failures, 1);
    char b[8];
    assert_int_equal(wb_read(f->wb, "warm", "r/old", b, 8, 0), -EIO);
    assert_int_equal(jr_count_state(f, "failed"), 1);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE error IS NOT NULL"), 1);
    int puts = calls(f, FAKEBE_PUT);
    /* the backend takes PUTs again before r/other is sealed: cleared after the write, the fault
     * could still refuse r/other's upload, which starts at the seal */
    fakebe_fail(f->fault, FAKEBE_PUT, NULL);
    write_file(f, "r/other", 1600 * 1024, 5); /* the backlog bound is not reached by r/old */
    assert_int_equal(wb_wait(f->wb, "warm", "r/other", 10000), 0);
    assert_true(calls(f, FAKEBE_PUT) == puts + 1); /* r/old was not retried */
    fx_reopen(f);                                  /* recovery keeps it, with its staging copy */
    assert_failed_listed(f, "r/old", "File too large");
    assert_int_equal(wb_wait(f->wb, "warm", "r/old", 10000), -EIO);
    assert_int_equal(count_staging(f), 2);
    /* a rewrite replaces it */
    write_file(f, "r/old", 2000, 6);
    assert_int_equal(wb_wait(f->wb, "warm", "r/", 10000), 0);
    assert_object(f, "r/old", 2000, 6);
    assert_int_equal(jr_count_state(f, "failed"), 0);
    /* and an unlink removes one; the refused PUT stored nothing, so no delete is sent */
    fakebe_fail_next(f->fault, FAKEBE_PUT, -ENAMETOOLONG, FAKEBE_ALWAYS);
    write_file(f, "r/gone", 100, 7);
    assert_int_equal(wb_wait(f->wb, "warm", "r/gone", 10000), -EIO);
    int dels = calls(f, FAKEBE_DEL);
    assert_int_equal(wb_unlink(f->wb, "warm", "r/gone"), 0);
    assert_int_equal(jr_count_state(f, "failed"), 0);
    assert_int_equal(wb_wait(f->wb, "warm", "r/", 10000), 0);
    assert_int_equal(calls(f, FAKEBE_DEL), dels);
}

/* Errors that an errno alone cannot tell from a refusal are retried, never FAILED: S3 answers
 * every 400 without a known code (a request timeout, an expired token) -EINVAL, and an open
 * breaker or a deadline -ETIMEDOUT (only a refusal the backend means for good is FAILED). */
static void test_ambiguous_errors_retried(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    fakebe_fail_next(f->fault, FAKEBE_PUT, -EINVAL, FAKEBE_ALWAYS);
    write_file(f, "amb/a", 1000, 1);
    TU_WAIT_UNTIL(stats(f).upload_retries >= 3);
    fakebe_fail_next(f->fault, FAKEBE_PUT, -ETIMEDOUT, FAKEBE_ALWAYS);
    int retries = (int)stats(f).upload_retries;
    TU_WAIT_UNTIL((int)stats(f).upload_retries >= retries + 2);
    assert_int_equal(jr_count_state(f, "failed"), 0);
    fakebe_fail(f->fault, FAKEBE_PUT, NULL);
    assert_int_equal(wb_wait(f->wb, "warm", "amb/", 10000), 0);
    assert_object(f, "amb/a", 1000, 1);
}

/* durability = remote: a close whose file the backend refuses returns EIO instead of waiting for
 * ever. */
static void test_refused_upload_remote_close(void **state)
{
    struct fx *f = *state;
    f->cfg.durability = WB_DURABILITY_REMOTE;
    fx_open(f);
    fakebe_fail_next(f->fault, FAKEBE_PUT, -EFBIG, FAKEBE_ALWAYS);
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "rr/a", &fh), 0);
    assert_int_equal(wb_write(fh, "abc", 3, 0), 3);
    assert_int_equal(wb_file_close(fh), -EIO);
    assert_int_equal(jr_count_state(f, "failed"), 1);
}

static void flip_staging_bit(struct fx *f, off_t off)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/%lld.stg", f->spool,
             jr_query(f, "SELECT max(id) FROM files WHERE state='sealed'"));
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, off), 1);
    c ^= 0x10;
    assert_int_equal(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

/* The seal checksum of one file, as journalled (wb_list). */
static void sealed_sum(struct fx *f, const char *key, char out[WB_CHECKSUM_MAX])
{
    struct wb_file_info *list;
    size_t n;
    assert_int_equal(wb_list(f->wb, "warm", key, &list, &n), 0);
    assert_int_equal(n, 1);
    snprintf(out, WB_CHECKSUM_MAX, "%s", list[0].checksum);
    wb_list_free(list, n);
}

/* The seal checksum is the content's, whether the writes streamed it (in order from offset 0,
 * also after a truncate to 0) or the seal had to read the file back (a write out of order, an
 * overwrite, a truncate that cuts, bytes spliced from a pipe). */
static void test_seal_checksum_streamed_or_read(void **state)
{
    struct fx *f = *state;
    fakebe_set_down(f->fault, true); /* sealed rows stay in the journal */
    f->cfg.io = NULL;                /* the real pwrite and splice */
    fx_open(f);
    enum { LEN = 300000 };
    static unsigned char buf[LEN];
    tu_fill_random(buf, sizeof(buf), 21);
    char want[WB_CHECKSUM_MAX], got[WB_CHECKSUM_MAX];
    checksum_of(buf, sizeof(buf), want);
    struct wb_file *fh;

    /* in order, in uneven pieces */
    assert_int_equal(wb_file_create(f->wb, "warm", "s/order", &fh), 0);
    for (size_t off = 0; off < LEN; off += 70001) {
        size_t n = LEN - off < 70001 ? LEN - off : 70001;
        assert_int_equal(wb_write(fh, buf + off, n, (off_t)off), (ssize_t)n);
    }
    assert_int_equal(wb_file_close(fh), 0);
    sealed_sum(f, "s/order", got);
    assert_string_equal(got, want);

    /* the second half first */
    assert_int_equal(wb_file_create(f->wb, "warm", "s/back", &fh), 0);
    assert_int_equal(wb_write(fh, buf + LEN / 2, LEN - LEN / 2, LEN / 2), LEN - LEN / 2);
    assert_int_equal(wb_write(fh, buf, LEN / 2, 0), LEN / 2);
    assert_int_equal(wb_file_close(fh), 0);
    sealed_sum(f, "s/back", got);
    assert_string_equal(got, want);

    /* garbage, truncated to 0, then in order */
    assert_int_equal(wb_file_create(f->wb, "warm", "s/trunc0", &fh), 0);
    assert_int_equal(wb_write(fh, "junk", 4, 0), 4);
    assert_int_equal(wb_truncate(fh, 0), 0);
    assert_int_equal(wb_write(fh, buf, LEN, 0), LEN);
    assert_int_equal(wb_file_close(fh), 0);
    sealed_sum(f, "s/trunc0", got);
    assert_string_equal(got, want);

    /* an overwrite inside what was streamed, and a truncate that cuts */
    assert_int_equal(wb_file_create(f->wb, "warm", "s/over", &fh), 0);
    assert_int_equal(wb_write(fh, buf, LEN, 0), LEN);
    assert_int_equal(wb_write(fh, "XXXX", 4, 100), 4);
    assert_int_equal(wb_write(fh, buf + 100, 4, 100), 4);
    assert_int_equal(wb_write(fh, buf, 10, LEN), 10);
    assert_int_equal(wb_truncate(fh, LEN), 0);
    assert_int_equal(wb_file_close(fh), 0);
    sealed_sum(f, "s/over", got);
    assert_string_equal(got, want);

    /* spliced from a pipe (the FUSE path), after a streamed first part */
    assert_int_equal(wb_file_create(f->wb, "warm", "s/pipe", &fh), 0);
    assert_int_equal(wb_write(fh, buf, 4096, 0), 4096);
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], buf + 4096, 8192), 8192);
    assert_int_equal(wb_write_fd(fh, p[0], 8192, 4096), 8192);
    close(p[0]);
    close(p[1]);
    assert_int_equal(wb_write(fh, buf + 12288, LEN - 12288, 12288), LEN - 12288);
    assert_int_equal(wb_file_close(fh), 0);
    sealed_sum(f, "s/pipe", got);
    assert_string_equal(got, want);

    /* and the uploader checks every one of them against the file before sending it */
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_wait(f->wb, "warm", "s/", 30000), 0);
    assert_object(f, "s/order", LEN, 21);
    assert_object(f, "s/pipe", LEN, 21);
}

/* A bit flipped in the spool after close is caught against the seal checksum before anything
 * reaches the backend (it used to be uploaded and reported UPLOADED), single PUT and multipart. */
static void test_spool_corruption_fails(void **state)
{
    struct fx *f = *state;
    fakebe_set_down(f->fault, true);
    fx_open(f);
    write_file(f, "c/small", 100000, 8);
    flip_staging_bit(f, 5000);
    write_file(f, "c/big", 12 * MIB + 5, 9);
    flip_staging_bit(f, 11 * MIB);
    write_file(f, "c/good", 12 * MIB, 10);
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_wait(f->wb, "warm", "c/good", 30000), 0);
    assert_object(f, "c/good", 12 * MIB, 10);
    assert_int_equal(wb_wait(f->wb, "warm", "c/", 30000), -EIO);
    TU_WAIT_UNTIL(jr_count_state(f, "failed") == 2);
    assert_failed_listed(f, "c/small", "seal checksum");
    assert_failed_listed(f, "c/big", "seal checksum");
    assert_no_object(f, "c/small");
    assert_no_object(f, "c/big");
    assert_no_mpu(f);
}

/* A journal with n EVICTABLE rows bulk/<i> (as years of checkpoints leave it), written directly. */
static void bulk_journal(struct fx *f, int n)
{
    fx_open(f); /* creates the schema */
    wb_close(f->wb);
    f->wb = NULL;
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->journal, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "INSERT INTO files(backend,key,generation,state,size,"
                                        "created_ns,sealed_ns,uploaded_ns,etag) VALUES('warm',"
                                        "printf('bulk/%06d',?1),1,'evictable',10,1,2,?1,'e')",
                                        -1, &st, NULL),
                     SQLITE_OK);
    for (int i = 0; i < n; i++) {
        sqlite3_bind_int(st, 1, i + 1);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* The mount's stat of one file (wb_list of its key) and the uploaders' per-key checks walk that
 * key's rows, not every row (a scan per call walked and copied all 100,000 rows). */
static void test_index_one_key(void **state)
{
    struct fx *f = *state;
    f->cfg.max_evictable_rows = -1;
    bulk_journal(f, 20000);
    fx_open(f);
    write_file(f, "bulk/000777", 100, 1); /* a new generation of one of them */
    assert_int_equal(wb_wait(f->wb, "warm", "bulk/000777", 10000), 0);
    struct wb_stats a = stats(f);
    struct wb_file_info *list;
    size_t n;
    assert_int_equal(wb_list(f->wb, "warm", "bulk/000777", &list, &n), 0);
    wb_list_free(list, n);
    assert_int_equal(n, 1); /* the cancelled older generation is gone after its delete */
    char b[4];
    assert_int_equal(wb_read(f->wb, "warm", "bulk/000123", b, 4, 0), -ENOENT);
    struct wb_stats z = stats(f);
    assert_true(z.index_visits - a.index_visits <= 4);
    assert_int_equal(wb_list(f->wb, "warm", "bulk/", &list, &n), 0);
    wb_list_free(list, n);
    assert_int_equal(n, 20000);
}

/* EVICTABLE rows are bounded (max_evictable_rows): the oldest are forgotten, at open and as
 * uploads add more, and a forgotten file is still in the backend. */
static void test_prune_evictable(void **state)
{
    struct fx *f = *state;
    f->cfg.max_evictable_rows = 1000;
    bulk_journal(f, 3000);
    fx_open(f);
    assert_int_equal(jr_count_state(f, "evictable"), 1000);
    /* the newest 1000 stay: uploaded_ns of bulk/<i> is i */
    assert_int_equal(jr_query(f, "SELECT min(uploaded_ns) FROM files"), 2001);
    assert_int_equal(stats(f).rows_pruned, 2000);
    wb_close(f->wb);
    f->wb = NULL;
    f->cfg.max_evictable_rows = 5;
    f->cfg.retention_keep = 0;
    fx_open(f);
    assert_int_equal(jr_count_state(f, "evictable"), 5);
    for (int i = 0; i < 12; i++) {
        char k[32];
        snprintf(k, sizeof(k), "p/%02d", i);
        write_file(f, k, 100, (uint64_t)i);
        assert_int_equal(wb_wait(f->wb, "warm", k, 10000), 0);
    }
    TU_WAIT_UNTIL(jr_count_state(f, "evictable") <= 5);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='p/11'"), 1);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='p/00'"), 0);
    assert_object(f, "p/00", 100, 0);
}

struct async_rec {
    atomic_int calls;
    atomic_int rc;
};

static void async_done(void *arg, int rc)
{
    struct async_rec *r = arg;
    r->rc = rc;
    r->calls++;
}

/* wb_wait_async answers once, without blocking the caller: at the upload, at its deadline, at a
 * flush (-ESHUTDOWN), and with -EIO for a file that FAILED. */
static void test_wait_async(void **state)
{
    struct fx *f = *state;
    fakebe_set_down(f->fault, true);
    fx_open(f);
    write_file(f, "as/a", 1000, 1);
    struct async_rec up = {0}, late = {0}, flushed = {0}, failed = {0};
    assert_int_equal(wb_wait_async(f->wb, "warm", "as/", false, -1, async_done, &up), 0);
    assert_int_equal(wb_wait_async(f->wb, "warm", "as/", false, 30, async_done, &late), 0);
    TU_WAIT_UNTIL(late.calls == 1);
    assert_int_equal(late.rc, -ETIMEDOUT);
    assert_int_equal(up.calls, 0); /* still pending: the backend is down */
    fakebe_set_down(f->fault, false);
    TU_WAIT_UNTIL(up.calls == 1);
    assert_int_equal(up.rc, 0);
    assert_object(f, "as/a", 1000, 1);
    fakebe_fail_next(f->fault, FAKEBE_PUT, -EFBIG, FAKEBE_ALWAYS);
    write_file(f, "as/b", 1000, 2);
    assert_int_equal(wb_wait_async(f->wb, "warm", "as/b", true, -1, async_done, &failed), 0);
    TU_WAIT_UNTIL(failed.calls == 1);
    assert_int_equal(failed.rc, -EIO);
    fakebe_set_down(f->fault, true);
    write_file(f, "as/c", 1000, 3);
    assert_int_equal(wb_wait_async(f->wb, "warm", "as/c", true, -1, async_done, &flushed), 0);
    wb_wait_async_flush(f->wb);
    assert_int_equal(flushed.calls, 1);
    assert_int_equal(flushed.rc, -ESHUTDOWN);
    assert_int_equal(up.calls + late.calls + failed.calls, 3); /* each answered once */
}

/* A row without a key (a damaged journal) is refused with a clear error, not read as ENOMEM, and
 * nothing is removed (journal.c once read a NULL key as out of memory). */
static void test_journal_null_key(void **state)
{
    struct fx *f = *state;
    sqlite3 *db = NULL; /* a schema without NOT NULL, as a damaged or foreign file may have */
    assert_int_equal(sqlite3_open(f->journal, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db,
                     "CREATE TABLE files(id INTEGER PRIMARY KEY AUTOINCREMENT,"
                     " backend TEXT, key TEXT, generation INTEGER, state TEXT,"
                     " size INTEGER, checksum TEXT, upload_id TEXT, created_ns INTEGER,"
                     " sealed_ns INTEGER, uploaded_ns INTEGER, etag TEXT, error TEXT);"
                     "CREATE TABLE parts(file_id INTEGER, part_no INTEGER,"
                     " etag TEXT, size INTEGER, PRIMARY KEY(file_id, part_no));"
                     "INSERT INTO files(backend,key,generation,state,size) "
                     "VALUES('warm',NULL,1,'sealed',3)",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(wb_open(&f->cfg, &f->wb), -EBADMSG);
    assert_non_null(strstr(tier_err_msg(), "no backend or key"));
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 1);
}

/* The spool and the journal are private to tierd's user, also when the spool was made before
 * with a wider mode (a pre-made spool stayed 0755 and the journal was 0644). */
static void test_spool_private(void **state)
{
    struct fx *f = *state;
    assert_int_equal(mkdir(f->spool, 0755), 0);
    assert_int_equal(chmod(f->spool, 0755), 0);
    fx_open(f);
    write_file(f, "p/a", 10, 1);
    struct stat st;
    assert_int_equal(stat(f->spool, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(stat(f->journal, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char wal[600];
    snprintf(wal, sizeof(wal), "%s-wal", f->journal);
    assert_int_equal(stat(wal, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

/* The journal carries its format (PRAGMA user_version); a newer one is refused, not misread. */
static void test_journal_format_version(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    write_file(f, "v/a", 10, 1);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    wb_close(f->wb);
    f->wb = NULL;
    assert_int_equal(jr_query(f, "PRAGMA user_version"), 1);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->journal, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(wb_open(&f->cfg, &f->wb), -EPROTO);
    assert_null(f->wb);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 1); /* nothing touched */
}

static size_t mpu_count(struct fx *f, const char *key)
{
    struct backend_mpu *v = NULL;
    size_t n = 0;
    assert_int_equal(backend_mpu_list(f->posix, NULL, key, &v, &n), 0);
    backend_mpu_list_free(v, n);
    return n;
}

/* A multipart upload created and never journalled (a crash between mpu_create and the commit of
 * its id, or a create whose reply was lost) is found and aborted before the file's own upload;
 * an upload of another key is left alone. */
/* Open the buffer with the backend down, write and seal key, close the buffer: a journal with
 * one SEALED row, as a crash before its upload leaves it. The backend stays down. */
static void seal_offline(struct fx *f, const char *key, size_t size, uint64_t seed)
{
    fakebe_set_down(f->fault, true);
    fx_open(f);
    write_file(f, key, size, seed);
    wb_close(f->wb);
    f->wb = NULL;
}

static void test_orphan_multipart_aborted(void **state)
{
    struct fx *f = *state;
    seal_offline(f, "orph/big", 11 * MIB, 31);
    /* what a crash right after mpu_create leaves: an upload (with a part) no row knows */
    char *orphan = NULL, *other = NULL, etag[BACKEND_ETAG_MAX];
    assert_int_equal(backend_mpu_create(f->posix, NULL, "orph/big", &orphan), 0);
    unsigned char *part = calloc(1, 5 * MIB);
    assert_non_null(part);
    assert_int_equal(
        backend_mpu_put_part(f->posix, NULL, "orph/big", orphan, 1, part, 5 * MIB, etag), 0);
    free(part);
    assert_int_equal(backend_mpu_create(f->posix, NULL, "orph/bigger", &other), 0);
    assert_int_equal(mpu_count(f, "orph/big"), 1);

    fakebe_set_down(f->fault, false);
    fx_open(f); /* recovery: the SEALED row may have an unjournalled upload */
    assert_int_equal(wb_wait(f->wb, NULL, "", 20000), 0);
    assert_object(f, "orph/big", 11 * MIB, 31);
    assert_true(calls(f, FAKEBE_MPU_LIST) >= 1);
    assert_int_equal(mpu_count(f, "orph/big"), 0); /* the orphan is gone, ours completed */
    assert_int_equal(mpu_count(f, "orph/bigger"), 1);
    assert_int_equal(backend_mpu_abort(f->posix, NULL, "orph/bigger", other), 0);
    assert_no_mpu(f);
    free(orphan);
    free(other);
}

/* A backend that cannot list uploads (permission) does not hold the upload back: the cleanup is
 * best effort (regression: a list error retried the upload forever). */
static void test_orphan_list_denied(void **state)
{
    struct fx *f = *state;
    seal_offline(f, "deny/big", 11 * MIB, 41);
    fakebe_set_down(f->fault, false);
    fakebe_fail_next(f->fault, FAKEBE_MPU_LIST, -EACCES, FAKEBE_ALWAYS);
    fx_open(f);
    assert_int_equal(wb_wait(f->wb, NULL, "", 20000), 0);
    assert_object(f, "deny/big", 11 * MIB, 41);
    assert_true(calls(f, FAKEBE_MPU_LIST) >= 1);
}

/* A create whose reply was lost leaves an upload; the file is overwritten before its retry: the
 * new generation inherits the cleanup (regression: the flag died with the replaced row). */
static void test_orphan_inherited_by_overwrite(void **state)
{
    struct fx *f = *state;
    f->cfg.retry_base_ms = 60000; /* no retry of the first generation during the test */
    f->cfg.retry_max_ms = 60000;
    fakebe_lose_next_create(f->fault);
    fx_open(f);
    write_file(f, "inh/f", 11 * MIB, 51);
    TU_WAIT_UNTIL(fakebe_is_down(f->fault)); /* the lost create happened */
    assert_int_equal(mpu_count(f, "inh/f"), 1);
    fakebe_set_down(f->fault, false);
    write_file(f, "inh/f", 12 * MIB, 52); /* overwrite: the first generation is dropped */
    assert_int_equal(wb_wait(f->wb, NULL, "", 20000), 0);
    assert_object(f, "inh/f", 12 * MIB, 52);
    assert_int_equal(mpu_count(f, "inh/f"), 0);
    assert_no_mpu(f);
}

/* The PUT (or CompleteMultipartUpload) reached the backend but UPLOADED was not journalled (the
 * size check after it failed; a crash there is the same journal state): an unlink through the
 * library, even after a restart, deletes the object (regression: the row was just dropped and
 * the file came back in the backend). */
static void test_unlink_after_unjournalled_upload(void **state)
{
    struct fx *f = *state;
    f->cfg.retry_base_ms = 60000; /* the failed upload is not retried during the test */
    f->cfg.retry_max_ms = 60000;
    fakebe_fail_next(f->fault, FAKEBE_STAT, -EIO, FAKEBE_ALWAYS);
    fx_open(f);
    write_file(f, "ghost/small", 100000, 61);    /* one PUT */
    write_file(f, "ghost/big", 11 * MIB, 62);    /* multipart */
    TU_WAIT_UNTIL(stats(f).upload_retries >= 2); /* both sent, both checks failed */
    assert_object(f, "ghost/small", 100000, 61); /* the objects are there */
    assert_object(f, "ghost/big", 11 * MIB, 62);
    assert_int_equal(jr_count_state(f, "sealed") + jr_count_state(f, "uploading"), 2);
    fakebe_set_down(f->fault, true); /* no upload can finish before the unlinks */
    f->cfg.retry_base_ms = 10;       /* the deletes retry at once when the backend is back */
    f->cfg.retry_max_ms = 100;
    fx_reopen(f); /* as after a crash */
    assert_int_equal(wb_unlink(f->wb, "warm", "ghost/small"), 0);
    assert_int_equal(wb_unlink(f->wb, "warm", "ghost/big"), 0);
    fakebe_fail(f->fault, FAKEBE_STAT, NULL);
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_no_object(f, "ghost/small");
    assert_no_object(f, "ghost/big");
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 0);
}

/* Rename of a file whose PUT reached the backend without UPLOADED journalled: the object at the
 * old name is deleted (regression: no tombstone was made for such a row, the old name came back;
 * found in review). */
static void test_rename_after_unjournalled_upload(void **state)
{
    struct fx *f = *state;
    f->cfg.retry_base_ms = 60000;
    f->cfg.retry_max_ms = 60000;
    fakebe_fail_next(f->fault, FAKEBE_STAT, -EIO, FAKEBE_ALWAYS);
    fx_open(f);
    write_file(f, "ghost/small", 100000, 61);
    TU_WAIT_UNTIL(stats(f).upload_retries >= 1);
    assert_object(f, "ghost/small", 100000, 61);
    fakebe_set_down(f->fault, true);
    f->cfg.retry_base_ms = 10;
    f->cfg.retry_max_ms = 100;
    fx_reopen(f);
    assert_int_equal(wb_rename(f->wb, "warm", "ghost/small", "ghost/moved"), 0);
    fakebe_fail(f->fault, FAKEBE_STAT, NULL);
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "ghost/moved", 100000, 61);
    assert_no_object(f, "ghost/small");
}

/* An upload answered without an ETag, then unlinked: the object is deleted (regression: the
 * cancelled row had an empty etag, so the delete was skipped; found in review). */
static void test_unlink_uploaded_without_etag(void **state)
{
    struct fx *f = *state;
    fakebe_blank_put_etag(f->fault, true);
    fx_open(f);
    write_file(f, "ne/small", 100000, 71);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "ne/small", 100000, 71);
    assert_int_equal(wb_unlink(f->wb, "warm", "ne/small"), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_no_object(f, "ne/small");
}

/* A create whose reply was lost, then an unlink before the retry: the cancelled row finds and
 * aborts the upload (regression: the flag died with the dropped row; found in review). */
static void test_orphan_after_unlink(void **state)
{
    struct fx *f = *state;
    f->cfg.retry_base_ms = 60000;
    f->cfg.retry_max_ms = 60000;
    fakebe_lose_next_create(f->fault);
    fx_open(f);
    write_file(f, "ul/f", 11 * MIB, 81);
    TU_WAIT_UNTIL(fakebe_is_down(f->fault));
    assert_int_equal(mpu_count(f, "ul/f"), 1);
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_unlink(f->wb, "warm", "ul/f"), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_int_equal(mpu_count(f, "ul/f"), 0);
    assert_no_object(f, "ul/f");
    assert_no_mpu(f);
}

/* Every upload call passes the backend's scheduler lane as the namespace tenant's checkpoint
 * I/O: the ioctx travels with the backend call (no default-lane admission, no declared class). */
static void test_qos_admission(void **state)
{
    struct fx *f = *state;
    struct sched *s;
    struct sched_config sc = {.max_inflight = 4};
    assert_int_equal(sched_new(&sc, &s), 0);
    struct posix_backend_config pc = {.name = "warm", .root = f->root};
    struct backend *pb = NULL;
    assert_int_equal(backend_posix_open(&pc, &pb), 0);
    struct sched_backend_config bc = {.max_inflight = 4};
    assert_int_equal(sched_backend_wrap(s, pb, &bc, &f->wrapped), 0);
    struct telemetry *t = NULL;
    assert_int_equal(telemetry_new(NULL, &t), 0);
    sched_set_telemetry(s, t);
    f->cfg.tenant = 7;
    fx_open(f);
    write_file(f, "q/big", 11 * MIB, 91);
    /* a writer's own tenant: its upload is charged to it, not to the buffer's default */
    struct wb_file *fh;
    assert_int_equal(wb_file_create(f->wb, "warm", "q/nine", &fh), 0);
    wb_file_set_tenant(fh, 9);
    assert_int_equal(wb_write(fh, "nine bytes", 10, 0), 10);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 20000), 0);
    wb_close(f->wb);
    f->wb = NULL;
    struct dynbuf m;
    dynbuf_init(&m, 1u << 24);
    assert_int_equal(tele_render_prometheus(t, NULL, &m), 0);
    assert_int_equal(dynbuf_append(&m, "", 1), 0);
    const char *text = (const char *)m.data;
    /* put + stat of q/nine: 10 bytes sent; q/big's 11 MiB of parts are tenant 7's */
    assert_non_null(
        strstr(text, "tierd_sched_bytes_total{tenant=\"9\",class=\"checkpoint\"} 10\n"));
    const char *seven = strstr(text, "tierd_sched_bytes_total{tenant=\"7\",class=\"checkpoint\"} ");
    assert_non_null(seven);
    assert_true(strtoull(strchr(seven, '}') + 2, NULL, 10) >= 11 * MIB);
    dynbuf_fini(&m);
    struct sched_stats st;
    sched_stats_get(s, &st);
    const struct sched_class_stats *c = &st.cls[TIER_IO_CHECKPOINT];
    /* create + 3 parts + complete + stat, each admitted as class checkpoint and completed. */
    assert_true(c->admitted >= 6);
    assert_int_equal(c->completed, c->admitted);
    assert_true(c->bytes >= 11 * MIB);
    assert_int_equal(st.cls[TIER_IO_TRAINING].admitted, 0);
    assert_int_equal(st.cls[TIER_IO_INFERENCE].admitted, 0);
    struct sched_backend_stats ls;
    assert_int_equal(sched_backend_stats_get(s, &ls, 1), 1);
    assert_int_equal(ls.admitted, c->admitted);
    backend_free(f->wrapped);
    f->wrapped = NULL;
    sched_free(s);
    telemetry_free(t);
}

struct creator {
    struct fx *f;
    uint64_t seed;
};

static void *creator_main(void *arg)
{
    struct creator *c = arg;
    write_file(c->f, "r/k", 2000, c->seed);
    return NULL;
}

/* Regression: two creates of one key that both waited for a busy old generation each inserted
 * a new one, leaving two live generations that both uploaded. Exactly one may survive. */
static void test_concurrent_create_one_live(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    fakebe_gate_close(f->fault, FAKEBE_PUT, NULL); /* every put waits, after counting */
    write_file(f, "r/k", 1000, 51);
    TU_WAIT_UNTIL(calls(f, FAKEBE_PUT) == 1); /* the uploader is inside put: the entry is busy */
    assert_int_equal(calls(f, FAKEBE_PUT), 1);
    struct creator c1 = {f, 52}, c2 = {f, 53};
    pthread_t t1, t2;
    assert_int_equal(pthread_create(&t1, NULL, creator_main, &c1), 0);
    assert_int_equal(pthread_create(&t2, NULL, creator_main, &c2), 0);
    struct wb_stats st;
    TU_WAIT_UNTIL((wb_stats_get(f->wb, &st), st.busy_waiters == 2)); /* both wait on it */
    assert_int_equal(st.busy_waiters, 2);
    fakebe_gate_open(f->fault);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='r/k'"), 1);
}

/* Bytes [0, size) of key through wb_read equal the seeded content. */
static void assert_wb_read(struct fx *f, const char *key, size_t size, uint64_t seed)
{
    unsigned char *want = malloc(size + 1), *got = malloc(size + 1);
    tu_fill_random(want, size, seed);
    assert_int_equal(wb_read(f->wb, "warm", key, got, size + 1, 0), (ssize_t)size);
    assert_memory_equal(want, got, size);
    free(want);
    free(got);
}

static long long live_rows(struct fx *f, const char *key)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM files WHERE key='%s' AND state NOT IN ('cancelled','open',"
             "'failed')",
             key);
    return jr_query(f, sql);
}

/* A rewrite (WB_CREATE_REPLACE_AT_SEAL) whose copy fails with EIO: the new generation is never
 * sealed and the old uploaded one is untouched (issue 5: the file had neither version). */
static void test_replace_at_seal_copy_eio(void **state)
{
    struct fx *f = *state;
    f->cfg.retention_keep = -1;
    fx_open(f);
    write_file(f, "p/old", 40000, 61);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "p/old", 40000, 61);
    assert_int_equal(jr_count_state(f, "uploaded"), 1);

    struct wb_file *fh;
    assert_int_equal(wb_file_create_ex(f->wb, "warm", "p/old", 0x80, &fh), -EINVAL);
    assert_int_equal(wb_file_create_ex(f->wb, "warm", "p/old", WB_CREATE_REPLACE_AT_SEAL, &fh), 0);
    /* While OPEN: the old row stays live, the new one is newer. */
    assert_int_equal(live_rows(f, "p/old"), 1);
    assert_int_equal(jr_query(f, "SELECT max(generation) FROM files WHERE key='p/old'"), 2);
    assert_int_equal(jr_count_state(f, "open"), 1);
    /* the copy of the old content into the new generation hits an EIO */
    unsigned char *buf = malloc(40000);
    tu_fill_random(buf, 40000, 61);
    assert_int_equal(wb_write(fh, buf, 20000, 0), 20000);
    /* read-your-writes: readers see the new (partial) generation while it is open */
    assert_int_equal(wb_read(f->wb, "warm", "p/old", buf, 40000, 0), 20000);
    f->pwrite_err = -EIO;
    tu_fill_random(buf, 40000, 61);
    assert_int_equal(wb_write(fh, buf + 20000, 20000, 20000), -EIO);
    f->pwrite_err = 0;
    /* failed: readers see the old version again */
    assert_wb_read(f, "p/old", 40000, 61);
    assert_int_equal(wb_file_close(fh), -EIO);
    free(buf);

    /* The old object is still in the backend and readable; exactly the old row is live. */
    assert_object(f, "p/old", 40000, 61);
    assert_wb_read(f, "p/old", 40000, 61);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='p/old'"), 1);
    assert_int_equal(live_rows(f, "p/old"), 1);
    assert_int_equal(jr_count_state(f, "uploaded"), 1);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "p/old", 40000, 61);

    /* An OPEN replacement at a crash is discarded at recovery; the old one survives. */
    assert_int_equal(wb_file_create_ex(f->wb, "warm", "p/old", WB_CREATE_REPLACE_AT_SEAL, &fh), 0);
    char z[10] = {0};
    assert_int_equal(wb_write(fh, z, sizeof(z), 0), (ssize_t)sizeof(z));
    fx_reopen(f); /* frees fh like a crash would leave it: unclosed */
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='p/old'"), 1);
    assert_int_equal(jr_count_state(f, "uploaded"), 1);
    assert_wb_read(f, "p/old", 40000, 61);
    assert_object(f, "p/old", 40000, 61);

    /* wb_file_discard: the same, without a restart. */
    assert_int_equal(wb_file_create_ex(f->wb, "warm", "p/old", WB_CREATE_REPLACE_AT_SEAL, &fh), 0);
    assert_int_equal(wb_write(fh, z, sizeof(z), 0), (ssize_t)sizeof(z));
    wb_file_discard(fh);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='p/old'"), 1);
    assert_wb_read(f, "p/old", 40000, 61);
    assert_int_equal(count_staging(f), 1);
}

/* A replacement that is sealed cancels the old generation in the same transaction. */
static void test_replace_at_seal_success(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    write_file(f, "q/k", 30000, 71);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "q/k", 30000, 71);

    unsigned char *buf = malloc(50000);
    tu_fill_random(buf, 50000, 72);
    struct wb_file *fh;
    assert_int_equal(wb_file_create_ex(f->wb, "warm", "q/k", WB_CREATE_REPLACE_AT_SEAL, &fh), 0);
    assert_int_equal(wb_write(fh, buf, 50000, 0), 50000);
    assert_int_equal(live_rows(f, "q/k"), 1);
    assert_object(f, "q/k", 30000, 71);  /* the old object stays until the seal */
    assert_wb_read(f, "q/k", 50000, 72); /* readers see the writer's content */
    struct wb_file_info *v;
    size_t n;
    assert_int_equal(wb_list(f->wb, "warm", "q/k", &v, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(v[1].state, WB_OPEN);
    assert_true(v[1].generation > v[0].generation);
    wb_list_free(v, n);
    /* rename of a key with an open replacement: EBUSY; nothing changed */
    assert_int_equal(wb_rename(f->wb, "warm", "q/k", "q/other"), -EBUSY);
    assert_int_equal(wb_file_close(fh), 0);
    free(buf);
    /* exactly one live row, the new one, and the old one cancelled */
    assert_int_equal(live_rows(f, "q/k"), 1);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='q/k' AND state IN "
                                 "('sealed','uploading','uploaded') AND generation=2"),
                     1);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "q/k", 50000, 72);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='q/k'"), 1);
    assert_wb_read(f, "q/k", 50000, 72);

    /* Sealing while the old generation's upload is in flight: the seal waits for it and
     * cancels it; only the new content ends up in the backend. */
    fakebe_gate_close(f->fault, FAKEBE_PUT, NULL); /* every put waits, after counting */
    int puts0 = calls(f, FAKEBE_PUT);
    write_file(f, "q/busy", 1000, 73);
    TU_WAIT_UNTIL(calls(f, FAKEBE_PUT) == puts0 + 1);
    buf = malloc(2000);
    tu_fill_random(buf, 2000, 74);
    assert_int_equal(wb_file_create_ex(f->wb, "warm", "q/busy", WB_CREATE_REPLACE_AT_SEAL, &fh), 0);
    assert_int_equal(wb_write(fh, buf, 2000, 0), 2000);
    free(buf);
    fakebe_gate_open(f->fault);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(live_rows(f, "q/busy"), 1);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "q/busy", 2000, 74);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='q/busy'"), 1);

    /* unlink with an open replacement cancels both; the writer's close returns 0, no data */
    assert_int_equal(wb_file_create_ex(f->wb, "warm", "q/k", WB_CREATE_REPLACE_AT_SEAL, &fh), 0);
    char z[10] = {0};
    assert_int_equal(wb_write(fh, z, sizeof(z), 0), (ssize_t)sizeof(z));
    assert_int_equal(wb_unlink(f->wb, "warm", "q/k"), 0);
    assert_int_equal(wb_file_close(fh), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_no_object(f, "q/k");
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='q/k'"), 0);
    assert_int_equal(wb_unlink(f->wb, "warm", "q/k"), -ENOENT);
    assert_no_mpu(f);
}

struct renamer {
    struct fx *f;
    int rc;
};

static void *renamer_main(void *arg)
{
    struct renamer *r = arg;
    r->rc = wb_rename(r->f->wb, "warm", "d/a", "d/b");
    return NULL;
}

/* Regression: wb_rename onto an existing key waits for the destination's upload with the lock
 * dropped; retention could meanwhile drop the source's local copy, and the rename then re-keyed a
 * row with nothing to upload: the destination's object was deleted and the source never arrived. */
static void test_rename_vs_retention(void **state)
{
    struct fx *f = *state;
    f->cfg.retention_keep = 1;
    fx_open(f);
    write_file(f, "d/a", 3000, 61);
    assert_int_equal(wb_wait(f->wb, NULL, "d/a", 10000), 0);
    fakebe_gate_close(f->fault, FAKEBE_PUT, "d/b"); /* puts of d/b wait, after counting */
    int puts0 = calls(f, FAKEBE_PUT);
    write_file(f, "d/b", 2000, 62);
    TU_WAIT_UNTIL(calls(f, FAKEBE_PUT) == puts0 + 1); /* d/b's upload is inside put: busy */
    struct renamer r = {f, 99};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, renamer_main, &r), 0);
    struct wb_stats st;
    TU_WAIT_UNTIL((wb_stats_get(f->wb, &st), st.busy_waiters == 1)); /* rename waits on d/b */
    assert_int_equal(st.busy_waiters, 1);
    write_file(f, "d/c", 1000, 63); /* its upload runs retention over d/ (keep 1) */
    assert_int_equal(wb_wait(f->wb, NULL, "d/c", 10000), 0);
    fakebe_gate_open(f->fault);
    pthread_join(t, NULL);
    assert_int_equal(r.rc, 0);
    assert_int_equal(wb_wait(f->wb, NULL, "d/", 10000), 0);
    assert_object(f, "d/b", 3000, 61); /* the renamed content, not lost, not the old d/b */
    assert_no_object(f, "d/a");
}

/* Journal fault injection: a trigger in the journal makes every UPDATE of a files row for which
 * `when` holds fail (RAISE ABORT, an -EIO for the engine), until jr_heal drops it. The engine's
 * connection sees the schema change at its next statement. */
static void jr_inject(struct fx *f, const char *name, const char *when)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->journal, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000); /* an uploader may be in a transaction */
    char sql[512];
    snprintf(sql, sizeof(sql),
             "CREATE TRIGGER %s BEFORE UPDATE ON files WHEN %s BEGIN SELECT RAISE(ABORT, "
             "'injected journal fault'); END",
             name, when);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void jr_heal(struct fx *f, const char *name)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->journal, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    char sql[128];
    snprintf(sql, sizeof(sql), "DROP TRIGGER %s", name);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* A seal whose journal commit fails (wb_commit_seal): the writer gets -EIO, its generation is
 * dropped, and everything else is as before the close: the generation it would have replaced is
 * still SEALED, readable, counted in the backlog, not left interrupted (it uploads once the
 * backend is back), and no byte of the failed file is counted as dirty. */
static void test_seal_commit_fails(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    fakebe_set_down(f->fault, true); /* the old generation stays SEALED */
    write_file(f, "s/k", 30000, 81);
    unsigned char *buf = malloc(50000);
    tu_fill_random(buf, 50000, 82);
    struct wb_file *fh;
    assert_int_equal(wb_file_create_ex(f->wb, "warm", "s/k", WB_CREATE_REPLACE_AT_SEAL, &fh), 0);
    assert_int_equal(wb_write(fh, buf, 50000, 0), 50000);
    free(buf);
    assert_int_equal(stats(f).dirty_bytes, 80000);
    jr_inject(f, "no_seal", "OLD.state = 'open' AND NEW.state = 'sealed'");
    assert_int_equal(wb_file_close(fh), -EIO);
    jr_heal(f, "no_seal");

    struct wb_stats st = stats(f);
    assert_int_equal(st.dirty_bytes, 30000);
    assert_int_equal(st.files[WB_SEALED], 1);
    assert_int_equal(st.files[WB_OPEN], 0);
    assert_int_equal(st.files[WB_CANCELLED], 0);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='s/k'"), 1);
    assert_int_equal(jr_query(f, "SELECT generation FROM files WHERE key='s/k'"), 1);
    assert_int_equal(live_rows(f, "s/k"), 1);
    assert_int_equal(count_staging(f), 1);
    assert_wb_read(f, "s/k", 30000, 81);
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "s/k", 30000, 81);
    assert_int_equal(stats(f).dirty_bytes, 0);
}

/* A rename whose journal commit fails (wb_commit_rekey): -EIO, and the file is as it was under
 * its old key (row, key index, state, generation, dirty bytes; an uploaded one keeps its ETag
 * and its object), with no tombstone; the same renames succeed once the journal is healed. */
static void test_rename_commit_fails(void **state)
{
    struct fx *f = *state;
    fx_open(f);
    write_file(f, "n/up", 4000, 91);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    fakebe_set_down(f->fault, true);
    write_file(f, "n/sealed", 20000, 92);
    assert_int_equal(stats(f).dirty_bytes, 20000);
    jr_inject(f, "no_rekey", "NEW.key IS NOT OLD.key");
    assert_int_equal(wb_rename(f->wb, "warm", "n/sealed", "n/sealed2"), -EIO);
    assert_int_equal(wb_rename(f->wb, "warm", "n/up", "n/up2"), -EIO);

    struct wb_stats st = stats(f);
    assert_int_equal(st.dirty_bytes, 20000);
    assert_int_equal(st.files[WB_SEALED], 1);
    assert_int_equal(st.files[WB_UPLOADED], 1);
    assert_int_equal(st.files[WB_CANCELLED], 0);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 2);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='n/sealed' AND "
                                 "state='sealed' AND generation=1"),
                     1);
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files WHERE key='n/up' AND "
                                 "state='uploaded' AND etag IS NOT NULL AND etag != ''"),
                     1);
    struct wb_file_info *v;
    size_t n;
    assert_int_equal(wb_list(f->wb, "warm", "n/", &v, &n), 0);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_true(strcmp(v[i].key, "n/sealed") == 0 || strcmp(v[i].key, "n/up") == 0);
    wb_list_free(v, n);
    assert_wb_read(f, "n/sealed", 20000, 92);
    assert_wb_read(f, "n/up", 4000, 91);
    char b[8];
    assert_int_equal(wb_read(f->wb, "warm", "n/sealed2", b, sizeof(b), 0), -ENOENT);
    assert_int_equal(wb_read(f->wb, "warm", "n/up2", b, sizeof(b), 0), -ENOENT);
    assert_object(f, "n/up", 4000, 91);

    jr_heal(f, "no_rekey");
    fakebe_set_down(f->fault, false);
    assert_int_equal(wb_rename(f->wb, "warm", "n/sealed", "n/sealed2"), 0);
    assert_int_equal(wb_rename(f->wb, "warm", "n/up", "n/up2"), 0);
    assert_int_equal(wb_wait(f->wb, NULL, "", 10000), 0);
    assert_object(f, "n/sealed2", 20000, 92);
    assert_object(f, "n/up2", 4000, 91);
    assert_no_object(f, "n/sealed");
    assert_no_object(f, "n/up");
    assert_int_equal(jr_query(f, "SELECT count(*) FROM files"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_small_file_states, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_seal_checksum_streamed_or_read, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_write_fd_enospc_and_hooks, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_create_one_live, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_rename_vs_retention, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_seal_commit_fails, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_rename_commit_fails, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_multipart_and_retention, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fsync_fail_stop, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_short_writes_and_eio, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_enospc_tmpfs, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_backend_down_then_restart, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_unlink_while_uploading, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_overwrite_and_rename, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_replace_at_seal_copy_eio, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_replace_at_seal_success, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_backpressure, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_durability_remote, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_recovery_discards_unclosed, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_recovery_aborts_cancelled, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bad_config_and_keys, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_age_bound_and_deadline, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_upload_order_is_seal_order, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_qos_admission, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_upload_holdoff_lifts, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_journal_migration_sha256, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_journal_fixture_0_1_0, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_orphan_multipart_aborted, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_orphan_list_denied, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_rename_after_unjournalled_upload, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_unlink_uploaded_without_etag, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_orphan_after_unlink, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_unlink_after_unjournalled_upload, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_orphan_inherited_by_overwrite, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_upload_holdoff_bounds, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_reserved_name_refused_at_create, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_per_file_part_size, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_refused_upload_fails, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_refused_upload_remote_close, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_ambiguous_errors_retried, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_spool_corruption_fails, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_journal_format_version, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_wait_async, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_spool_private, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_journal_null_key, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_index_one_key, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_prune_evictable, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
