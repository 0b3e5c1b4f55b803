/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_disk.c - the disk level's block files against faults and hostile contents: a
 * transient error reading a block file (EMFILE) keeps the file, at run time and at the restart
 * scan; two identities with one hash never share data (forced collisions in the index, a file
 * whose header names another identity under a block's name); a block file of another format
 * version is removed at open with a log line naming the version; the identity hash is keyed
 * with a per-cache secret kept in disk_dir/.secret (0600), replaced when others can read it.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmocka.h>

#include "cache/cache.h"
#include "cache/cache_debug.h"
#include "fakebe.h"
#include "testutil.h"

#define BS (64u << 10)
#define NBLK 3
#define SIZE (NBLK * BS)

/* Block file header offsets (disk.c, struct disk_hdr, format version 3). */
#define H_VERSION 8
#define H_LEN 12
#define H_ID 16
#define H_CSUM 72

struct fx {
    char *dir;
    struct backend *be;
    struct cache_config cfg;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp("cache_disk");
    f->be = fakebe_mem_new("mem");
    fakebe_add(f->be, "a", SIZE, "\"1\"");
    fakebe_add(f->be, "b", SIZE, "\"1\"");
    f->cfg = (struct cache_config){.block_size = BS, .disk_dir = f->dir, .disk_bytes = 64 * BS};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    backend_free(f->be);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static struct cache_obj obj(struct fx *f, const char *key)
{
    return (struct cache_obj){.be = f->be, .key = key, .etag = "\"1\"", .size_bytes = SIZE};
}

/* Read all of key through c; 0 when the bytes are the backend's. */
static int read_check(struct cache *c, struct fx *f, const char *key)
{
    struct cache_obj o = obj(f, key);
    char *buf = malloc(SIZE), *want = malloc(SIZE);
    fakebe_expected(key, "\"1\"", 0, want, SIZE);
    ssize_t n = cache_read(c, NULL, &o, 0, buf, SIZE);
    int r = n != SIZE ? -1 : memcmp(buf, want, SIZE) ? -2 : 0;
    free(buf);
    free(want);
    return r;
}

static void block_path(struct cache *c, const char *key, uint64_t index, char *path)
{
    assert_int_equal(cache_debug_block_path(c, "mem", key, "\"1\"", index, path, 4096), 0);
}

/* Recompute the header checksum of a block file image after an edit. */
static void fix_csum(unsigned char *img)
{
    uint32_t hl;
    memcpy(&hl, img + H_LEN, 4);
    memset(img + H_CSUM, 0, 8);
    uint64_t sum = XXH3_64bits(img, hl);
    memcpy(img + H_CSUM, &sum, 8);
}

/* Regression: any error loading a block file dropped it, so a transient one (here
 * EMFILE, from a lowered RLIMIT_NOFILE) deleted good blocks. The reads must still succeed (from
 * the backend), the files must survive, and the next reads must be disk hits again. The restart
 * scan must not delete files it cannot open either. Runs in a child: the fd limit is per process.
 */
static int transient_child(struct fx *f)
{
    struct cache *c = NULL;
    if (cache_open(&f->cfg, &c) < 0)
        return 10;
    if (read_check(c, f, "a") < 0)
        return 11;
    char path[NBLK][4096];
    for (int i = 0; i < NBLK; i++)
        if (cache_debug_block_path(c, "mem", "a", "\"1\"", (uint64_t)i, path[i], 4096) < 0)
            return 12;
    struct cache_stats st;
    cache_stats_get(c, &st);
    uint64_t fetches0 = st.fetches;

    struct rlimit old, low;
    getrlimit(RLIMIT_NOFILE, &old);
    int probe = dup(0); /* the lowest free descriptor: the limit makes every open() fail */
    close(probe);
    low = old;
    low.rlim_cur = (rlim_t)probe;
    if (setrlimit(RLIMIT_NOFILE, &low) < 0)
        return 13;
    int rr = read_check(c, f, "a"); /* the memory store needs no descriptor */
    setrlimit(RLIMIT_NOFILE, &old);
    if (rr < 0)
        return 14;
    for (int i = 0; i < NBLK; i++)
        if (access(path[i], F_OK) < 0)
            return 15; /* deleted by a transient error */
    cache_stats_get(c, &st);
    if (st.checksum_failures != 0 || st.fetches != fetches0 + NBLK)
        return 16;
    char msg[256];
    if (cache_debug_check(c, msg, sizeof(msg)) < 0)
        return 17;
    if (read_check(c, f, "a") < 0)
        return 18;
    cache_stats_get(c, &st);
    if (st.fetches != fetches0 + NBLK)
        return 19; /* the kept files serve again */
    cache_close(c);

    /* The restart scan: the lock file and one directory stream fit under the limit, no block file
     * does. */
    probe = dup(0);
    close(probe);
    low.rlim_cur = (rlim_t)probe + 2;
    if (setrlimit(RLIMIT_NOFILE, &low) < 0)
        return 20;
    int ro = cache_open(&f->cfg, &c);
    setrlimit(RLIMIT_NOFILE, &old);
    if (ro < 0)
        return 21;
    for (int i = 0; i < NBLK; i++)
        if (access(path[i], F_OK) < 0)
            return 22; /* deleted by the scan */
    cache_close(c);
    if (cache_open(&f->cfg, &c) < 0)
        return 23;
    struct cache_obj o = obj(f, "a");
    if (cache_cached_bytes(c, &o) != SIZE)
        return 24; /* adopted again once the files can be read */
    cache_close(c);
    return 0;
}

static void test_transient_error_keeps_block(void **state)
{
    struct fx *f = *state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(transient_child(f));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Regression: the index compared only the 128-bit hash, so two identities with one
 * hash shared a block and the second was served the first's bytes. Forced collisions (block N of
 * every object has one hash): every read returns its own object's bytes, from RAM and from
 * disk, in either order. */
static void test_collision_not_served(void **state)
{
    struct fx *f = *state;
    for (int ram = 0; ram < 2; ram++) {
        struct cache_config cfg = f->cfg;
        cfg.ram_bytes = ram ? 16 * BS : 0;
        struct cache *c = NULL;
        assert_int_equal(cache_open(&cfg, &c), 0);
        cache_debug_force_collisions(c, true);
        assert_int_equal(read_check(c, f, "a"), 0);
        assert_int_equal(read_check(c, f, "b"), 0); /* same hashes as "a" */
        assert_int_equal(read_check(c, f, "a"), 0);
        assert_int_equal(read_check(c, f, "b"), 0);
        struct cache_obj oa = obj(f, "a"), ob = obj(f, "b");
        assert_int_equal(cache_cached_bytes(c, &oa), SIZE);
        assert_int_equal(cache_cached_bytes(c, &ob), 0); /* served uncached, never as "a" */
        char msg[256];
        assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
        cache_close(c);
        tu_rmtree(f->dir);
        free(f->dir);
        f->dir = tu_mkdtemp("cache_disk");
        f->cfg.disk_dir = f->dir;
    }
}

/* Regression (disk side): a load compared only the hash, index and length in the
 * header, so a file naming another identity under a block's file name was served. Plant "a"'s
 * block 1 (with "b"'s hash in its id field, header checksum fixed) as "b"'s block 1: reading "b"
 * must give "b"'s bytes, drop the file and refetch. */
static void test_planted_block_other_identity(void **state)
{
    struct fx *f = *state;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    assert_int_equal(read_check(c, f, "a"), 0);
    assert_int_equal(read_check(c, f, "b"), 0);
    char pa[4096], pb[4096];
    block_path(c, "a", 1, pa);
    block_path(c, "b", 1, pb);
    size_t la = 0, lb = 0;
    unsigned char *ia = tu_read_file(pa, &la), *ib = tu_read_file(pb, &lb);
    assert_int_equal(la, lb);
    memcpy(ia + H_ID, ib + H_ID, 16);
    fix_csum(ia);
    tu_write_file(pb, ia, la);
    free(ia);
    free(ib);
    assert_int_equal(read_check(c, f, "b"), 0);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.checksum_failures, 1);
    assert_int_equal(st.fetches, 2 * NBLK + 1);
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);
}

/* Run cache_open with stderr (the log) sent to a file; returns what was logged. */
static char *open_logged(struct fx *f, struct cache **c, int *r)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s.log", f->dir);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    *r = cache_open(&f->cfg, c);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t len = 0;
    char *log = tu_read_file(path, &len);
    unlink(path);
    char *s = malloc(len + 1);
    memcpy(s, log, len);
    s[len] = 0;
    free(log);
    return s;
}

/* Upgrade (issue 15): a block file byte for byte as tierd 0.1.0 (commit e4c5dfb, format version
 * 2) wrote it — its 72-byte header (magic, version 2, hdr_len, identity, index, data length,
 * 64 KiB chunks, the identity strings' lengths, XXH3-64 of the header), the strings, one XXH3-64
 * per chunk, the data — built here by hand, placed where this version keeps the block: the
 * cache opens, removes it with a log line naming format version 2, and the read is right
 * (refetched from the backend, never the old file misread). */
static void test_block_fixture_0_1_0(void **state)
{
    struct fx *f = *state;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    char p0[4096];
    block_path(c, "a", 0, p0);
    cache_close(c);
    char *want = malloc(SIZE);
    fakebe_expected("a", "\"1\"", 0, want, SIZE);
    const char *name = "mem", *key = "a", *etag = "\"1\"";
    const uint32_t chunk = 64u << 10;
    uint64_t data_len = BS;
    uint32_t nchunks = (uint32_t)((data_len + chunk - 1) / chunk);
    uint32_t hl = 72 + (uint32_t)(strlen(name) + strlen(key) + strlen(etag)) + 8 * nchunks;
    unsigned char *img = calloc(1, hl + data_len);
    assert_non_null(img);
    memcpy(img, "TIERCB01", 8);
    uint32_t v32 = 2;
    memcpy(img + 8, &v32, 4);
    memcpy(img + 12, &hl, 4);
    memset(img + 16, 0xab, 16); /* 0.1.0's identity hash (unkeyed): any 16 bytes here */
    uint64_t v64 = 0;
    memcpy(img + 32, &v64, 8); /* index */
    memcpy(img + 40, &data_len, 8);
    memcpy(img + 48, &chunk, 4);
    memcpy(img + 52, &nchunks, 4);
    uint16_t l16 = (uint16_t)strlen(name);
    memcpy(img + 56, &l16, 2);
    l16 = (uint16_t)strlen(key);
    memcpy(img + 58, &l16, 2);
    l16 = (uint16_t)strlen(etag);
    memcpy(img + 60, &l16, 2);
    size_t o = 72;
    memcpy(img + o, name, strlen(name));
    o += strlen(name);
    memcpy(img + o, key, strlen(key));
    o += strlen(key);
    memcpy(img + o, etag, strlen(etag));
    o += strlen(etag);
    for (uint32_t i = 0; i < nchunks; i++) {
        size_t co = (size_t)i * chunk, cl = data_len - co < chunk ? data_len - co : chunk;
        uint64_t sum = XXH3_64bits(want + co, cl);
        memcpy(img + o + 8 * (size_t)i, &sum, 8);
    }
    memcpy(img + hl, want, data_len);
    uint64_t csum = XXH3_64bits(img, hl); /* with the checksum field (offset 64) still zero */
    memcpy(img + 64, &csum, 8);
    tu_write_file(p0, img, hl + data_len);
    free(img);

    int r;
    char *log = open_logged(f, &c, &r);
    assert_int_equal(r, 0);
    if (!strstr(log, "format version 2"))
        fail_msg("no log line names format version 2; log was:\n%s", log);
    free(log);
    assert_int_equal(access(p0, F_OK), -1);
    assert_int_equal(read_check(c, f, "a"), 0);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.fetches, NBLK); /* block 0 too: refetched, the old file not read */
    cache_close(c);
    free(want);
}

/* Issue 9: a block file of another format version is removed at open with a log line naming
 * its version, whatever the rest of its header says; the other blocks are reused. Versions 2
 * (an older tierd, 72-byte header) and 99 (a newer one, header checksum valid), and a version-1
 * file shorter than this version's header. */
static void test_unknown_version_removed(void **state)
{
    struct fx *f = *state;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    assert_int_equal(read_check(c, f, "a"), 0);
    char p0[4096], p1[4096], p2[4096];
    block_path(c, "a", 0, p0);
    block_path(c, "a", 1, p1);
    block_path(c, "a", 2, p2);
    cache_close(c);

    size_t len = 0;
    unsigned char *img = tu_read_file(p0, &len);
    uint32_t v = 99;
    memcpy(img + H_VERSION, &v, 4);
    fix_csum(img);
    tu_write_file(p0, img, len);
    v = 2;
    memcpy(img + H_VERSION, &v, 4);
    tu_write_file(p1, img, len);
    v = 1;
    memcpy(img + H_VERSION, &v, 4);
    tu_write_file(p2, img, 40);
    free(img);

    int r;
    char *log = open_logged(f, &c, &r);
    assert_int_equal(r, 0);
    if (!strstr(log, "format version 99") && !strstr(log, "format version 2") &&
        !strstr(log, "format version 1"))
        fail_msg("no log line names the unknown version; log was:\n%s", log);
    assert_non_null(strstr(log, "3 of another format version"));
    free(log);
    assert_int_equal(access(p0, F_OK), -1);
    assert_int_equal(access(p1, F_OK), -1);
    assert_int_equal(access(p2, F_OK), -1);
    assert_int_equal(read_check(c, f, "a"), 0);
    struct cache_stats st;
    cache_stats_get(c, &st);
    assert_int_equal(st.fetches, NBLK);
    assert_int_equal(st.checksum_failures, 0);
    cache_close(c);
}

/* The identity hash is keyed with disk_dir/.secret, created 0600 at first open and
 * kept across restarts (blocks are reused); a secret others can read is replaced, and the
 * blocks named with it are then dropped at the scan. */
static void test_secret_file(void **state)
{
    struct fx *f = *state;
    struct cache *c = NULL;
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    assert_int_equal(read_check(c, f, "a"), 0);
    cache_close(c);
    char sp[4200];
    snprintf(sp, sizeof(sp), "%s/.secret", f->dir);
    struct stat st;
    assert_int_equal(stat(sp, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_true(st.st_size >= 136);
    size_t l1 = 0, l2 = 0;
    unsigned char *s1 = tu_read_file(sp, &l1);

    struct cache_obj o = obj(f, "a");
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    assert_int_equal(cache_cached_bytes(c, &o), SIZE); /* same secret: blocks reused */
    cache_close(c);

    assert_int_equal(chmod(sp, 0644), 0);
    assert_int_equal(cache_open(&f->cfg, &c), 0);
    assert_int_equal(cache_cached_bytes(c, &o), 0); /* new secret: old names dropped */
    char msg[256];
    assert_int_equal(cache_debug_check(c, msg, sizeof(msg)), 0);
    cache_close(c);
    assert_int_equal(stat(sp, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    unsigned char *s2 = tu_read_file(sp, &l2);
    assert_int_equal(l1, l2);
    assert_memory_not_equal(s1, s2, l1);
    free(s1);
    free(s2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_transient_error_keeps_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collision_not_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planted_block_other_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_version_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_fixture_0_1_0, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
