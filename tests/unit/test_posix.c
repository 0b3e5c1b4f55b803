/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_posix.c - unit tests of the POSIX directory backend (src/tiers/posix.c) on real files in
 * a scratch directory: containment (symlink and '..' escapes refused, inner symlinks allowed),
 * atomic put, version checks, multipart upload, listing order and hiding of internal files, pages
 * of a large directory, and
 * injected faults (permission denied, read-only file system, ENOSPC on a tiny tmpfs).
 * Behaviour shared with the S3 backend is tested by tests/integration/test_backend_suite.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "testutil.h"
#include "tiers/backend.h"

#define MIB (1024u * 1024u)

struct fx {
    char *top; /* scratch dir holding root/ and files "outside" the root */
    char root[512];
    struct backend *be;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->top = tu_mkdtemp("posix");
    snprintf(f->root, sizeof(f->root), "%s/root", f->top);
    assert_int_equal(mkdir(f->root, 0755), 0);
    struct posix_backend_config cfg = {.name = "warm", .root = f->root};
    assert_int_equal(backend_posix_open(&cfg, &f->be), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    backend_free(f->be);
    /* A failed assertion may have left the test tmpfs mounted: detach it before removing. */
    char mnt[1024];
    snprintf(mnt, sizeof(mnt), "%s/small", f->top);
    umount2(mnt, MNT_DETACH);
    chmod(f->root, 0755);
    tu_rmtree(f->top);
    free(f->top);
    free(f);
    return 0;
}

static void path_in(const struct fx *f, const char *rel, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s/%s", f->root, rel);
}

static void put_str(struct backend *be, const char *key, const char *s)
{
    int rc = backend_put(be, NULL, key, s, strlen(s), NULL);
    if (rc)
        fail_msg("put %s: %d %s", key, rc, tier_err_msg());
}

/* Number of names in dir (recursively) that start with ".tier-tmp.". */
static int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (!strncmp(de->d_name, ".tier-tmp.", 10))
            n++;
        if (de->d_type == DT_DIR) {
            char sub[1024];
            snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
            n += count_tmp(sub);
        }
    }
    closedir(d);
    return n;
}

static void test_escapes_refused(void **state)
{
    struct fx *f = *state;
    char p[1024], outside[1024];
    snprintf(outside, sizeof(outside), "%s/secret", f->top);
    tu_write_file(outside, "top secret", 10);
    path_in(f, "etc", p, sizeof(p));
    assert_int_equal(symlink("/etc", p), 0);
    path_in(f, "up", p, sizeof(p));
    assert_int_equal(symlink("..", p), 0);
    path_in(f, "abs", p, sizeof(p));
    assert_int_equal(symlink(outside, p), 0);
    /* Absolute even though it points inside the root: still refused (RESOLVE_BENEATH). */
    char inner_abs[1024];
    path_in(f, "plain", inner_abs, sizeof(inner_abs));
    tu_write_file(inner_abs, "x", 1);
    path_in(f, "absin", p, sizeof(p));
    assert_int_equal(symlink(inner_abs, p), 0);

    struct backend_stat st;
    char buf[64];
    static const char *const keys[] = {"etc/passwd", "up/secret", "abs", "absin", "up/root/plain"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        tier_err_clear();
        int rc = backend_stat(f->be, NULL, keys[i], &st);
        if (rc != -EACCES)
            fail_msg("stat %s: %d, want -EACCES", keys[i], rc);
        assert_non_null(strstr(tier_err_msg(), "leaves the backend root"));
        assert_int_equal(backend_read(f->be, NULL, keys[i], 0, buf, sizeof(buf), NULL, NULL),
                         -EACCES);
    }
    /* Writes through an escaping directory link are refused and create nothing outside. */
    assert_int_equal(backend_put(f->be, NULL, "up/planted", "x", 1, NULL), -EACCES);
    char planted[1024];
    snprintf(planted, sizeof(planted), "%s/planted", f->top);
    assert_int_equal(access(planted, F_OK), -1);
    assert_int_equal(backend_put(f->be, NULL, "etc/tierd-planted", "x", 1, NULL), -EACCES);
    assert_int_equal(access("/etc/tierd-planted", F_OK), -1);
    assert_int_equal(backend_del(f->be, NULL, "up/secret"), -EACCES);
    assert_int_equal(access(outside, F_OK), 0);
    char *id = NULL;
    assert_int_equal(backend_mpu_create(f->be, NULL, "up/mpu", &id),
                     0); /* staging is in the root */
    assert_int_equal(backend_mpu_abort(f->be, NULL, "up/mpu", id), 0);
    free(id);

    /* A put onto a key that is an escaping symlink replaces the link, not its target. */
    put_str(f->be, "abs", "new");
    size_t len;
    char *data = tu_read_file(outside, &len);
    assert_int_equal(len, 10);
    assert_memory_equal(data, "top secret", 10);
    free(data);
    path_in(f, "abs", p, sizeof(p));
    struct stat s;
    assert_int_equal(lstat(p, &s), 0);
    assert_true(S_ISREG(s.st_mode));

    /* Listings do not show escaping links. */
    struct backend_list_page page;
    assert_int_equal(backend_list(f->be, NULL, "", "/", NULL, 0, &page), 0);
    for (size_t i = 0; i < page.n; i++) {
        assert_string_not_equal(page.entries[i].name, "etc/");
        assert_string_not_equal(page.entries[i].name, "up/");
        assert_string_not_equal(page.entries[i].name, "absin");
    }
    backend_list_page_fini(&page);
}

static void test_inner_symlinks_allowed(void **state)
{
    struct fx *f = *state;
    put_str(f->be, "sub/f", "hello");
    char p[1024];
    path_in(f, "in", p, sizeof(p));
    assert_int_equal(symlink("sub", p), 0);
    path_in(f, "sub/deep", p, sizeof(p));
    assert_int_equal(mkdir(p, 0755), 0);
    path_in(f, "sub/deep/back", p, sizeof(p));
    assert_int_equal(symlink("../f", p), 0); /* goes up, but stays inside the root */
    path_in(f, "f2", p, sizeof(p));
    assert_int_equal(symlink("sub/f", p), 0);

    struct backend_stat st;
    char buf[16];
    assert_int_equal(backend_stat(f->be, NULL, "in/f", &st), 0);
    assert_int_equal(st.size_bytes, 5);
    assert_int_equal(backend_read(f->be, NULL, "f2", 0, buf, sizeof(buf), NULL, NULL), 5);
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(backend_read(f->be, NULL, "sub/deep/back", 1, buf, 3, NULL, NULL), 3);
    assert_memory_equal(buf, "ell", 3);
    /* Through a directory link: listed as a prefix, readable, not descended recursively. */
    struct backend_list_page page;
    assert_int_equal(backend_list(f->be, NULL, "", "/", NULL, 0, &page), 0);
    assert_int_equal(page.n, 3);
    assert_string_equal(page.entries[0].name, "f2");
    assert_string_equal(page.entries[1].name, "in/");
    assert_true(page.entries[1].is_prefix);
    assert_string_equal(page.entries[2].name, "sub/");
    backend_list_page_fini(&page);
    assert_int_equal(backend_list(f->be, NULL, "in/", NULL, NULL, 0, &page), 0);
    assert_int_equal(page.n, 2);
    assert_string_equal(page.entries[0].name, "in/deep/back");
    assert_string_equal(page.entries[1].name, "in/f");
    backend_list_page_fini(&page);
    assert_int_equal(backend_list(f->be, NULL, "", NULL, NULL, 0, &page), 0);
    assert_int_equal(page.n, 3); /* f2, sub/deep/back, sub/f; "in/" is not descended */
    assert_string_equal(page.entries[0].name, "f2");
    assert_string_equal(page.entries[1].name, "sub/deep/back");
    assert_string_equal(page.entries[2].name, "sub/f");
    backend_list_page_fini(&page);
}

static void test_atomic_put_and_versions(void **state)
{
    struct fx *f = *state;
    char etag1[BACKEND_ETAG_MAX], etag2[BACKEND_ETAG_MAX];
    assert_int_equal(backend_put(f->be, NULL, "d1/d2/obj", "first version", 13, etag1), 0);
    struct backend_stat st;
    assert_int_equal(backend_stat(f->be, NULL, "d1/d2/obj", &st), 0);
    assert_string_equal(st.etag, etag1);
    assert_int_equal(st.size_bytes, 13);
    assert_false(st.is_dir);
    assert_true(st.mtime_ns > 0);

    char buf[32];
    assert_int_equal(backend_read(f->be, NULL, "d1/d2/obj", 0, buf, sizeof(buf), etag1, &st), 13);
    assert_int_equal(backend_put(f->be, NULL, "d1/d2/obj", "second", 6, etag2), 0);
    assert_string_not_equal(etag1, etag2);
    /* The content is replaced whole and the old version is refused. */
    tier_err_clear();
    assert_int_equal(backend_read(f->be, NULL, "d1/d2/obj", 0, buf, sizeof(buf), etag1, NULL),
                     -ESTALE);
    assert_non_null(strstr(tier_err_msg(), "changed"));
    assert_int_equal(backend_read(f->be, NULL, "d1/d2/obj", 0, buf, sizeof(buf), etag2, &st), 6);
    assert_memory_equal(buf, "second", 6);
    assert_string_equal(st.etag, etag2);
    /* Same size, same content rewritten: still a new version. */
    char etag3[BACKEND_ETAG_MAX];
    assert_int_equal(backend_put(f->be, NULL, "d1/d2/obj", "second", 6, etag3), 0);
    assert_string_not_equal(etag2, etag3);
    assert_int_equal(count_tmp(f->root), 0);
    /* Rewrites of the same size in quick succession free and reuse inodes within one clock
     * tick: the tags must still all differ. */
    char seen[64][BACKEND_ETAG_MAX];
    for (int i = 0; i < 64; i++) {
        assert_int_equal(backend_put(f->be, NULL, "reuse", "same size", 9, seen[i]), 0);
        for (int j = 0; j < i; j++)
            if (strcmp(seen[i], seen[j]) == 0)
                fail_msg("put %d and %d got the same version %s", j, i, seen[i]);
    }
    /* A file rewritten in place by someone else is detected too (mtime/size change). */
    char p[1024];
    path_in(f, "d1/d2/obj", p, sizeof(p));
    tu_write_file(p, "third version!", 14);
    assert_int_equal(backend_read(f->be, NULL, "d1/d2/obj", 0, buf, 4, etag3, NULL), -ESTALE);

    /* Directories: stat says so, read refuses, put under a file refuses. */
    assert_int_equal(backend_stat(f->be, NULL, "d1/d2", &st), 0);
    assert_true(st.is_dir);
    assert_int_equal(backend_read(f->be, NULL, "d1", 0, buf, 4, NULL, NULL), -EISDIR);
    assert_int_equal(backend_put(f->be, NULL, "d1/d2/obj/child", "x", 1, NULL), -ENOTDIR);
    assert_int_equal(backend_stat(f->be, NULL, "d1/d2/obj/child", &st), -ENOENT);
    assert_int_equal(backend_del(f->be, NULL, "d1/d2"), -EISDIR);
    /* Reserved names are not keys. */
    assert_int_equal(backend_put(f->be, NULL, ".tier-mpu/x", "x", 1, NULL), -EINVAL);
    assert_int_equal(backend_stat(f->be, NULL, "a/.tier-tmp.123", &st), -EINVAL);
    /* Empty object. */
    assert_int_equal(backend_put(f->be, NULL, "empty", "", 0, NULL), 0);
    assert_int_equal(backend_read(f->be, NULL, "empty", 0, buf, sizeof(buf), NULL, &st), 0);
    assert_int_equal(st.size_bytes, 0);
}

static void test_multipart(void **state)
{
    struct fx *f = *state;
    size_t total = 5 * MIB + 1000;
    unsigned char *data = malloc(total), *back = malloc(total);
    tu_fill_random(data, total, 7);
    char *id = NULL;
    assert_int_equal(backend_mpu_create(f->be, NULL, "mp/obj", &id), 0);
    struct backend_part parts[2] = {{.number = 1}, {.number = 2}};
    assert_int_equal(
        backend_mpu_put_part(f->be, NULL, "mp/obj", id, 2, data + 5 * MIB, 1000, parts[1].etag), 0);
    assert_int_equal(
        backend_mpu_put_part(f->be, NULL, "mp/obj", id, 1, data, 5 * MIB, parts[0].etag), 0);
    /* Not visible until complete; not listed; staging hidden. */
    struct backend_stat st;
    assert_int_equal(backend_stat(f->be, NULL, "mp/obj", &st), -ENOENT);
    struct backend_list_page page;
    assert_int_equal(backend_list(f->be, NULL, "", NULL, NULL, 0, &page), 0);
    assert_int_equal(page.n, 0);
    backend_list_page_fini(&page);
    /* Wrong key, bad ids, wrong order, unknown part, stale part tag. */
    assert_int_equal(backend_mpu_put_part(f->be, NULL, "other", id, 1, data, 10, NULL), -ENOENT);
    assert_int_equal(backend_mpu_abort(f->be, NULL, "mp/obj", "../../../etc"), -ENOENT);
    assert_int_equal(backend_mpu_abort(f->be, NULL, "mp/obj", "0123456789abcdef0123456789abcdef"),
                     -ENOENT);
    struct backend_part rev[2] = {parts[1], parts[0]};
    assert_int_equal(backend_mpu_complete(f->be, NULL, "mp/obj", id, rev, 2, NULL), -EINVAL);
    struct backend_part missing[1] = {{.number = 3}};
    assert_int_equal(backend_mpu_complete(f->be, NULL, "mp/obj", id, missing, 1, NULL), -EINVAL);
    struct backend_part stale[2] = {parts[0], parts[1]};
    stale[1].etag[0] ^= 1;
    assert_int_equal(backend_mpu_complete(f->be, NULL, "mp/obj", id, stale, 2, NULL), -EINVAL);
    char etag[BACKEND_ETAG_MAX];
    assert_int_equal(backend_mpu_complete(f->be, NULL, "mp/obj", id, parts, 2, etag), 0);
    assert_int_equal(backend_stat(f->be, NULL, "mp/obj", &st), 0);
    assert_string_equal(st.etag, etag);
    assert_int_equal(st.size_bytes, total);
    assert_int_equal(backend_read(f->be, NULL, "mp/obj", 0, back, total, etag, NULL),
                     (ssize_t)total);
    assert_memory_equal(back, data, total);
    /* Staging removed; the id is gone. */
    char p[1024];
    path_in(f, ".tier-mpu", p, sizeof(p));
    DIR *d = opendir(p);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        assert_true(de->d_name[0] == '.');
    closedir(d);
    assert_int_equal(backend_mpu_abort(f->be, NULL, "mp/obj", id), -ENOENT);
    free(id);

    /* A small non-last part is refused, as S3 does. */
    assert_int_equal(backend_mpu_create(f->be, NULL, "mp/small", &id), 0);
    assert_int_equal(backend_mpu_put_part(f->be, NULL, "mp/small", id, 1, data, 100, parts[0].etag),
                     0);
    assert_int_equal(backend_mpu_put_part(f->be, NULL, "mp/small", id, 2, data, 100, parts[1].etag),
                     0);
    tier_err_clear();
    assert_int_equal(backend_mpu_complete(f->be, NULL, "mp/small", id, parts, 2, NULL), -EINVAL);
    assert_non_null(strstr(tier_err_msg(), "5 MiB"));
    /* Abort discards it all. */
    assert_int_equal(backend_mpu_abort(f->be, NULL, "mp/small", id), 0);
    assert_int_equal(backend_stat(f->be, NULL, "mp/small", &st), -ENOENT);
    assert_int_equal(backend_mpu_put_part(f->be, NULL, "mp/small", id, 3, data, 1, NULL), -ENOENT);
    free(id);
    assert_int_equal(count_tmp(f->root), 0);
    free(data);
    free(back);
}

static void test_list_order_and_hiding(void **state)
{
    struct fx *f = *state;
    /* '.' (0x2e) < '/' (0x2f) < '0' (0x30): S3 order interleaves files and directories. */
    static const char *const keys[] = {"a0", "a/b", "a.c", "a/c/d", "b", "a-"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        put_str(f->be, keys[i], keys[i]);
    char p[1024];
    path_in(f, "a/.tier-tmp.deadbeef", p, sizeof(p));
    tu_write_file(p, "junk", 4);
    char *id = NULL;
    assert_int_equal(backend_mpu_create(f->be, NULL, "pending", &id), 0);
    path_in(f, "fifo", p, sizeof(p));
    assert_int_equal(mkfifo(p, 0644), 0);

    static const char *const rec[] = {"a-", "a.c", "a/b", "a/c/d", "a0", "b"};
    struct backend_list_page page;
    assert_int_equal(backend_list(f->be, NULL, "", NULL, NULL, 0, &page), 0);
    assert_int_equal(page.n, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_string_equal(page.entries[i].name, rec[i]);
        assert_false(page.entries[i].is_prefix);
        assert_int_equal(page.entries[i].size_bytes, strlen(rec[i]));
        assert_true(page.entries[i].etag[0] != '\0');
    }
    assert_null(page.next_token);
    backend_list_page_fini(&page);

    /* Pages of two, following tokens. */
    size_t seen = 0;
    char *token = NULL;
    do {
        assert_int_equal(backend_list(f->be, NULL, "", NULL, token, 2, &page), 0);
        free(token);
        token = page.next_token ? strdup(page.next_token) : NULL;
        for (size_t i = 0; i < page.n; i++)
            assert_string_equal(page.entries[i].name, rec[seen++]);
        backend_list_page_fini(&page);
    } while (token);
    assert_int_equal(seen, 6);

    static const char *const delim[] = {"a-", "a.c", "a/", "a0"};
    assert_int_equal(backend_list(f->be, NULL, "a", "/", NULL, 0, &page), 0);
    assert_int_equal(page.n, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(page.entries[i].name, delim[i]);
        assert_int_equal(page.entries[i].is_prefix, i == 2);
    }
    backend_list_page_fini(&page);
    /* A token that is a prefix skips that whole "directory". */
    assert_int_equal(backend_list(f->be, NULL, "a", "/", "a/", 0, &page), 0);
    assert_int_equal(page.n, 1);
    assert_string_equal(page.entries[0].name, "a0");
    backend_list_page_fini(&page);
    assert_int_equal(backend_list(f->be, NULL, "a/", "/", NULL, 0, &page), 0);
    assert_int_equal(page.n, 2);
    assert_string_equal(page.entries[0].name, "a/b");
    assert_string_equal(page.entries[1].name, "a/c/");
    backend_list_page_fini(&page);
    /* Recursive from the middle of a tree, and a missing prefix. */
    assert_int_equal(backend_list(f->be, NULL, "a/", NULL, "a/b", 0, &page), 0);
    assert_int_equal(page.n, 1);
    assert_string_equal(page.entries[0].name, "a/c/d");
    backend_list_page_fini(&page);
    assert_int_equal(backend_list(f->be, NULL, "nothing/here/", NULL, NULL, 0, &page), 0);
    assert_int_equal(page.n, 0);
    backend_list_page_fini(&page);
    assert_int_equal(backend_list(f->be, NULL, ".tier-mpu/", NULL, NULL, 0, &page), -EINVAL);
    /* An unfinished last segment filters names, even "." and "..". */
    put_str(f->be, "h/.hidden", "1");
    put_str(f->be, "h/..dots", "2");
    put_str(f->be, "h/x", "3");
    assert_int_equal(backend_list(f->be, NULL, "h/.", "/", NULL, 0, &page), 0);
    assert_int_equal(page.n, 2);
    assert_string_equal(page.entries[0].name, "h/..dots");
    assert_string_equal(page.entries[1].name, "h/.hidden");
    backend_list_page_fini(&page);
    assert_int_equal(backend_list(f->be, NULL, "h/..", NULL, NULL, 0, &page), 0);
    assert_int_equal(page.n, 1);
    assert_string_equal(page.entries[0].name, "h/..dots");
    backend_list_page_fini(&page);
    assert_int_equal(backend_mpu_abort(f->be, NULL, "pending", id), 0);
    free(id);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every page of a list, max_keys at a time, must continue exactly after the last: compared with
 * want (sorted); the files' sizes are the length of their base names. */
static void check_pages(struct backend *be, const char *prefix, const char *delim, size_t max_keys,
                        char **want, size_t nwant)
{
    size_t seen = 0;
    char *token = NULL;
    do {
        struct backend_list_page page;
        assert_int_equal(backend_list(be, NULL, prefix, delim, token, max_keys, &page), 0);
        free(token);
        token = page.next_token ? strdup(page.next_token) : NULL;
        assert_true(page.n <= (max_keys ? max_keys : 1000));
        assert_true(token == NULL || page.n > 0);
        for (size_t i = 0; i < page.n; i++) {
            assert_true(seen < nwant);
            assert_string_equal(page.entries[i].name, want[seen]);
            const char *base = strrchr(page.entries[i].name, '/');
            base = base ? base + 1 : page.entries[i].name;
            if (!page.entries[i].is_prefix)
                assert_int_equal(page.entries[i].size_bytes, strlen(base));
            seen++;
        }
        backend_list_page_fini(&page);
    } while (token);
    assert_int_equal(seen, nwant);
}

/* A page of a large directory selects its first keys after the token instead of sorting (and
 * stating) the whole directory: files, directories, empty directories (no key when recursive)
 * and names around '/' in key order ("n0010-/" < "n0010.x" < "n0010/"), in random order on
 * disk, list the same whatever the page size. */
static void test_list_pages_large_dir(void **state)
{
    struct fx *f = *state;
    char p[1024], name[64], k[80];
    char *flat[3000], *rec[3000];
    size_t nflat = 0, nrec = 0;
    for (unsigned i = 0; i < 2000; i++) {
        unsigned kind = (i * 7919u) % 5; /* 0-2 file, 3 directory with a file, 4 empty */
        snprintf(name, sizeof(name), "n%04u", i);
        path_in(f, name, p, sizeof(p));
        if (kind <= 2) {
            tu_write_file(p, name, strlen(name));
            flat[nflat++] = strdup(name);
            rec[nrec++] = strdup(name);
        } else {
            assert_int_equal(mkdir(p, 0755), 0);
            snprintf(k, sizeof(k), "%s/", name);
            flat[nflat++] = strdup(k);
            if (kind == 3) {
                snprintf(k, sizeof(k), "%s/x", name);
                path_in(f, k, p, sizeof(p));
                tu_write_file(p, "x", 1);
                rec[nrec++] = strdup(k);
            }
        }
        if (i % 10 == 0) {
            snprintf(k, sizeof(k), "n%04u.x", i);
            path_in(f, k, p, sizeof(p));
            tu_write_file(p, k, strlen(k));
            flat[nflat++] = strdup(k);
            rec[nrec++] = strdup(k);
            snprintf(k, sizeof(k), "n%04u-", i);
            path_in(f, k, p, sizeof(p));
            assert_int_equal(mkdir(p, 0755), 0);
            snprintf(k, sizeof(k), "n%04u-/", i);
            flat[nflat++] = strdup(k);
            snprintf(k, sizeof(k), "n%04u-/yy", i);
            path_in(f, k, p, sizeof(p));
            tu_write_file(p, "yy", 2);
            rec[nrec++] = strdup(k);
        }
    }
    qsort(flat, nflat, sizeof(flat[0]), cmp_str);
    qsort(rec, nrec, sizeof(rec[0]), cmp_str);
    static const size_t sizes[] = {0, 333, 7};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        check_pages(f->be, "", "/", sizes[s], flat, nflat);
        check_pages(f->be, "", NULL, sizes[s], rec, nrec);
    }
    for (size_t i = 0; i < nflat; i++)
        free(flat[i]);
    for (size_t i = 0; i < nrec; i++)
        free(rec[i]);
}

/* Set the mtime of directory rel an hour back: its listing's cursor is kept between pages. */
static void settle_dir(const struct fx *f, const char *rel)
{
    char p[1024];
    path_in(f, rel, p, sizeof(p));
    struct timespec t[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = time(NULL) - 3600}};
    assert_int_equal(utimensat(AT_FDCWD, p, t, 0), 0);
}

/* The names of one page of "cur/" after token (NULL: the first), max_keys 20, as "a,b,c". */
static char *page_names(struct backend *be, const char *token, char **next, uint64_t *size_c045)
{
    struct backend_list_page page;
    assert_int_equal(backend_list(be, NULL, "cur/", "/", token, 20, &page), 0);
    size_t cap = page.n * 16 + 1, o = 0;
    char *out = calloc(1, cap);
    for (size_t i = 0; i < page.n; i++) {
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? "," : "", page.entries[i].name + 4);
        if (strcmp(page.entries[i].name, "cur/c045") == 0)
            *size_c045 = page.entries[i].size_bytes;
    }
    *next = page.next_token ? strdup(page.next_token) : NULL;
    backend_list_page_fini(&page);
    return out;
}

/* A delimited listing keeps its sorted directory between pages while the directory is
 * unchanged (posix.c DESIGN): the pages are the same as without, a file rewritten in place
 * between pages shows its new size, and an entry added or removed between pages (the mtime even
 * set back) is seen by the next page. */
static void test_list_cursor(void **state)
{
    struct fx *f = *state;
    char p[1024], k[64];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 50; i++) {
            snprintf(k, sizeof(k), "cur/c%03d", i);
            if (round == 0) {
                put_str(f->be, k, "x");
            } else {
                path_in(f, k, p, sizeof(p));
                tu_write_file(p, "x", 1);
            }
        }
        settle_dir(f, "cur");
        char *t1 = NULL, *t2 = NULL, *t3 = NULL;
        uint64_t sz = 0;
        char *p1 = page_names(f->be, NULL, &t1, &sz);
        char *p2 = page_names(f->be, t1, &t2, &sz);
        assert_string_equal(p1, "c000,c001,c002,c003,c004,c005,c006,c007,c008,c009,c010,c011,"
                                "c012,c013,c014,c015,c016,c017,c018,c019");
        assert_string_equal(p2, "c020,c021,c022,c023,c024,c025,c026,c027,c028,c029,c030,c031,"
                                "c032,c033,c034,c035,c036,c037,c038,c039");
        path_in(f, "cur/c045", p, sizeof(p));
        tu_write_file(p, "seven!!", 7); /* in place: the directory does not change */
        if (round == 1) {
            path_in(f, "cur/c039a", p, sizeof(p));
            tu_write_file(p, "new", 3);
            path_in(f, "cur/c046", p, sizeof(p));
            assert_int_equal(unlink(p), 0);
            settle_dir(f, "cur"); /* the mtime back where it was; the ctime moves */
        }
        char *p3 = page_names(f->be, t2, &t3, &sz);
        assert_string_equal(p3, round == 0 ? "c040,c041,c042,c043,c044,c045,c046,c047,c048,c049"
                                           : "c039a,c040,c041,c042,c043,c044,c045,c047,c048,c049");
        assert_int_equal(sz, 7);
        assert_null(t3);
        free(p1);
        free(p2);
        free(p3);
        free(t1);
        free(t2);
    }
}

/* Run fn in a child process as an unprivileged user: root ignores directory modes. */
static int run_as_nobody(struct backend *be, const char *key)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(100);
        tier_err_clear();
        int rc = backend_put(be, NULL, key, "x", 1, NULL);
        int ok = rc == -EACCES && strstr(tier_err_msg(), "permission denied") != NULL;
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_fault_permission(void **state)
{
    struct fx *f = *state;
    put_str(f->be, "ro/existing", "x");
    char p[1024];
    path_in(f, "ro", p, sizeof(p));
    assert_int_equal(chmod(p, 0555), 0);
    assert_int_equal(chmod(f->top, 0755), 0);
    if (geteuid() == 0) {
        assert_int_equal(run_as_nobody(f->be, "ro/new"), 0);
    } else {
        tier_err_clear();
        assert_int_equal(backend_put(f->be, NULL, "ro/new", "x", 1, NULL), -EACCES);
        assert_non_null(strstr(tier_err_msg(), "permission denied"));
    }
    assert_int_equal(count_tmp(f->root), 0);
    chmod(p, 0755);
}

/* Mount a tmpfs of size_opt at dir; false (and a message) when this machine does not allow it. */
static bool try_mount(const char *dir, const char *opts)
{
    if (mount("tmpfs", dir, "tmpfs", 0, opts) != 0) {
        print_message("SKIP part: cannot mount a tmpfs at %s (%s); needs root in a "
                      "namespace that allows mounts\n",
                      dir, strerror(errno));
        return false;
    }
    return true;
}

static void test_fault_enospc_erofs(void **state)
{
    struct fx *f = *state;
    char mnt[1024];
    snprintf(mnt, sizeof(mnt), "%s/small", f->top);
    assert_int_equal(mkdir(mnt, 0755), 0);
    if (!try_mount(mnt, "size=1m")) {
        skip();
        return;
    }
    struct posix_backend_config cfg = {.name = "tiny", .root = mnt};
    struct backend *be = NULL;
    assert_int_equal(backend_posix_open(&cfg, &be), 0);
    size_t big = 2 * MIB;
    char *data = calloc(1, big);
    put_str(be, "keep", "old content");
    tier_err_clear();
    int rc = backend_put(be, NULL, "keep", data, big, NULL);
    assert_int_equal(rc, -ENOSPC);
    assert_non_null(strstr(tier_err_msg(), "no space"));
    /* Nothing half-written is left, and the old object is intact. */
    assert_int_equal(count_tmp(mnt), 0);
    char buf[32];
    assert_int_equal(backend_read(be, NULL, "keep", 0, buf, sizeof(buf), NULL, NULL), 11);
    assert_memory_equal(buf, "old content", 11);
    /* Multipart completion that does not fit fails the same way and leaves no object. */
    char *id = NULL;
    assert_int_equal(backend_mpu_create(be, NULL, "mp", &id), 0);
    struct backend_part part = {.number = 1};
    assert_int_equal(backend_mpu_put_part(be, NULL, "mp", id, 1, data, 600 * 1024, part.etag), 0);
    assert_int_equal(backend_mpu_complete(be, NULL, "mp", id, &part, 1, NULL), -ENOSPC);
    assert_int_equal(backend_read(be, NULL, "mp", 0, buf, 1, NULL, NULL), -ENOENT);
    assert_int_equal(backend_mpu_abort(be, NULL, "mp", id), 0);
    free(id);

    /* Read-only remount: puts fail with -EROFS and say so; reads still work. */
    assert_int_equal(mount("tmpfs", mnt, "tmpfs", MS_REMOUNT | MS_RDONLY, "size=1m"), 0);
    tier_err_clear();
    assert_int_equal(backend_put(be, NULL, "new", "x", 1, NULL), -EROFS);
    assert_non_null(strstr(tier_err_msg(), "read-only"));
    assert_int_equal(backend_read(be, NULL, "keep", 0, buf, sizeof(buf), NULL, NULL), 11);
    backend_free(be);
    free(data);
    assert_int_equal(umount2(mnt, MNT_DETACH), 0);
}

/* ---- atomicity --------------------------------------------------------------------------- */

#define ATOM_BYTES (64 * 1024)
#define ATOM_PUTS 40

struct atom_ctx {
    struct backend *be;
    int id;
    _Atomic int *writers_left;
    int err;
    int mixed;
    int reads;
};

static void *atom_writer(void *arg)
{
    struct atom_ctx *c = arg;
    unsigned char *buf = malloc(ATOM_BYTES);
    for (int i = 0; i < ATOM_PUTS && !c->err; i++) {
        memset(buf, 'A' + c->id * 8 + i % 8, ATOM_BYTES);
        c->err = backend_put(c->be, NULL, "atom/obj", buf, ATOM_BYTES, NULL);
    }
    atomic_fetch_sub(c->writers_left, 1);
    free(buf);
    return NULL;
}

static void *atom_reader(void *arg)
{
    struct atom_ctx *c = arg;
    unsigned char *buf = malloc(ATOM_BYTES);
    while (atomic_load(c->writers_left) > 0 && !c->err) {
        ssize_t n = backend_read(c->be, NULL, "atom/obj", 0, buf, ATOM_BYTES, NULL, NULL);
        if (n != ATOM_BYTES) {
            c->err = n < 0 ? (int)n : -EIO;
            break;
        }
        for (size_t i = 1; i < ATOM_BYTES; i++)
            if (buf[i] != buf[0]) {
                c->mixed++;
                break;
            }
        c->reads++;
    }
    free(buf);
    return NULL;
}

/* Writers replace one object while readers read it: every read sees one whole version. */
static void test_atomic_put_concurrent(void **state)
{
    struct fx *f = *state;
    char *init = malloc(ATOM_BYTES);
    memset(init, 'z', ATOM_BYTES);
    assert_int_equal(backend_put(f->be, NULL, "atom/obj", init, ATOM_BYTES, NULL), 0);
    free(init);
    _Atomic int writers_left = 4;
    struct atom_ctx ctx[8];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        ctx[i] = (struct atom_ctx){.be = f->be, .id = i % 4, .writers_left = &writers_left};
        assert_int_equal(pthread_create(&t[i], NULL, i < 4 ? atom_writer : atom_reader, &ctx[i]),
                         0);
    }
    int reads = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(ctx[i].err, 0);
        assert_int_equal(ctx[i].mixed, 0);
        reads += ctx[i].reads;
    }
    assert_true(reads > 0);
    assert_int_equal(count_tmp(f->root), 0);
}

/* A writer killed at an arbitrary point leaves the old or the new object, never a torn one;
 * its leftover temp file is not listed. */
static void test_put_killed(void **state)
{
    struct fx *f = *state;
    const size_t len = 1 * MIB;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsigned char *buf = malloc(len);
        for (unsigned v = 0;; v++) {
            memset(buf, (int)(v & 0xff), len);
            if (backend_put(f->be, NULL, "crash/obj", buf, len, NULL) != 0)
                _exit(1);
        }
    }
    /* Let it complete a few versions, then kill it mid-flight. */
    uint64_t deadline = tier_now_mono_ns() + 30 * TIER_NS_PER_SEC;
    unsigned char *back = malloc(len);
    for (;;) {
        ssize_t n = backend_read(f->be, NULL, "crash/obj", 0, back, len, NULL, NULL);
        if (n == (ssize_t)len && back[0] >= 3)
            break;
        assert_true(tier_now_mono_ns() < deadline);
    }
    assert_int_equal(kill(pid, SIGKILL), 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(backend_read(f->be, NULL, "crash/obj", 0, back, len, NULL, NULL),
                     (ssize_t)len);
    for (size_t i = 1; i < len; i++)
        assert_int_equal(back[i], back[0]);
    struct backend_list_page page;
    assert_int_equal(backend_list(f->be, NULL, "crash/", NULL, NULL, 0, &page), 0);
    assert_int_equal(page.n, 1);
    assert_string_equal(page.entries[0].name, "crash/obj");
    backend_list_page_fini(&page);
    free(back);
}

/* rmdir: the directory a put made goes once empty (the mount's rmdir: else it is listed
 * again); a directory with an object stays (ENOTEMPTY), a missing one is no error, a key that
 * is no directory key or is reserved is refused, and the root is never removed. */
static void test_rmdir(void **state)
{
    struct fx *f = *state;
    char p[1024];
    put_str(f->be, "d/e/x", "1");
    assert_int_equal(backend_rmdir(f->be, NULL, "d/e/"), -ENOTEMPTY);
    assert_int_equal(backend_del(f->be, NULL, "d/e/x"), 0);
    assert_int_equal(backend_rmdir(f->be, NULL, "d/"), -ENOTEMPTY); /* e is still in it */
    assert_int_equal(backend_rmdir(f->be, NULL, "d/e/"), 0);
    path_in(f, "d/e", p, sizeof(p));
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(backend_rmdir(f->be, NULL, "d/e/"), 0); /* gone already */
    assert_int_equal(backend_rmdir(f->be, NULL, "nowhere/at/all/"), 0);
    assert_int_equal(backend_rmdir(f->be, NULL, "d/"), 0);
    path_in(f, "d", p, sizeof(p));
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(backend_rmdir(f->be, NULL, "d"), -EINVAL); /* not a directory key */
    assert_int_equal(backend_rmdir(f->be, NULL, "/"), -EINVAL); /* the root */
    assert_int_equal(backend_rmdir(f->be, NULL, "../x/"), -EINVAL);
    assert_int_equal(backend_rmdir(f->be, NULL, ".tier-mpu/"), -EINVAL);
    assert_int_equal(access(f->root, F_OK), 0);
}

static void test_open_errors(void **state)
{
    (void)state;
    struct backend *be = NULL;
    struct posix_backend_config cfg = {.name = "x", .root = "/nonexistent/tierd-root"};
    tier_err_clear();
    assert_int_equal(backend_posix_open(&cfg, &be), -ENOENT);
    assert_non_null(strstr(tier_err_msg(), "/nonexistent/tierd-root"));
    assert_null(be);
    cfg.root = "/etc/passwd";
    assert_int_equal(backend_posix_open(&cfg, &be), -ENOTDIR);
    cfg.root = NULL;
    assert_int_equal(backend_posix_open(&cfg, &be), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_escapes_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inner_symlinks_allowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_atomic_put_and_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_order_and_hiding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_pages_large_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_cursor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_atomic_put_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_killed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_permission, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_enospc_erofs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rmdir, setup, teardown),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
