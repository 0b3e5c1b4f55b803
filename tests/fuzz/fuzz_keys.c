/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_keys.c - libFuzzer target for key validation (backend_key_valid) and containment of the
 * POSIX backend. Invariants checked on every input:
 *   1. an accepted key has no leading '/', no empty, "." or ".." segment, no NUL or control
 *      byte, is at most BACKEND_KEY_MAX bytes with segments of at most BACKEND_SEGMENT_MAX;
 *   2. stat/read of an accepted key through a POSIX backend whose root holds escaping symlinks
 *      ("esc" -> "..", "abs" -> "/", "absin" -> absolute path into the root) never reaches a
 *      file outside the root: the inode in the version tag is never that of the canary file
 *      beside the root, of the root's parent, or of "/";
 *   3. a listing under an accepted prefix only returns names under that prefix.
 * Also built as a corpus-replay test (tests/fuzz/corpus/keys) in CTest.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiers/backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_keys: invariant failed: %s (line %d)\n", #cond, __LINE__);       \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

static struct backend *g_be;
static unsigned long long g_forbidden[3]; /* inodes that must never be reached */
static char g_top[512];

static void write_file(const char *path, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    char buf[256] = {0};
    while (len) {
        size_t n = len < sizeof(buf) ? len : sizeof(buf);
        CHECK(write(fd, buf, n) == (ssize_t)n);
        len -= n;
    }
    close(fd);
}

static void cleanup(void)
{
    backend_free(g_be);
    g_be = NULL;
    char p[600];
    const char *const rel[] = {"root/in/f", "root/esc",      "root/abs", "root/absin",
                               "root/loop", "root/top-file", "canary"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", g_top, rel[i]);
        unlink(p);
    }
    snprintf(p, sizeof(p), "%s/root/in", g_top);
    rmdir(p);
    snprintf(p, sizeof(p), "%s/root", g_top);
    rmdir(p);
    rmdir(g_top);
}

static void init_once(void)
{
    if (g_be)
        return;
    const char *tmp = getenv("TIER_TEST_TMP");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    if (mkdir(tmp, 0755) == 0)
        chmod(tmp, 0755); /* whatever the umask: FUSE tests share it as other uids */
    snprintf(g_top, sizeof(g_top), "%s/fuzzkeys.XXXXXX", tmp);
    CHECK(mkdtemp(g_top) != NULL);
    char p[600], q[600];
    snprintf(p, sizeof(p), "%s/canary", g_top);
    write_file(p, 12345);
    struct stat s;
    CHECK(stat(p, &s) == 0);
    g_forbidden[0] = (unsigned long long)s.st_ino;
    CHECK(stat(g_top, &s) == 0);
    g_forbidden[1] = (unsigned long long)s.st_ino;
    CHECK(stat("/", &s) == 0);
    g_forbidden[2] = (unsigned long long)s.st_ino;
    snprintf(p, sizeof(p), "%s/root", g_top);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof(p), "%s/root/in", g_top);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof(p), "%s/root/in/f", g_top);
    write_file(p, 7);
    snprintf(p, sizeof(p), "%s/root/top-file", g_top);
    write_file(p, 3);
    snprintf(p, sizeof(p), "%s/root/esc", g_top);
    CHECK(symlink("..", p) == 0);
    snprintf(p, sizeof(p), "%s/root/abs", g_top);
    CHECK(symlink("/", p) == 0);
    snprintf(p, sizeof(p), "%s/root/absin", g_top);
    snprintf(q, sizeof(q), "%s/root/in", g_top);
    CHECK(symlink(q, p) == 0);
    snprintf(p, sizeof(p), "%s/root/loop", g_top);
    CHECK(symlink("loop", p) == 0);
    snprintf(p, sizeof(p), "%s/root", g_top);
    struct posix_backend_config cfg = {.name = "fuzz", .root = p};
    CHECK(backend_posix_open(&cfg, &g_be) == 0);
    atexit(cleanup);
}

static void check_shape(const char *key, size_t len, bool allow_dir)
{
    CHECK(len > 0 && len <= BACKEND_KEY_MAX);
    CHECK(key[0] != '/');
    CHECK(allow_dir || key[len - 1] != '/');
    size_t end = key[len - 1] == '/' ? len - 1 : len;
    size_t seg = 0;
    for (size_t i = 0; i <= end; i++) {
        if (i == end || key[i] == '/') {
            const char *s = key + seg;
            size_t n = i - seg;
            CHECK(n > 0 && n <= BACKEND_SEGMENT_MAX);
            CHECK(!(n == 1 && s[0] == '.'));
            CHECK(!(n == 2 && s[0] == '.' && s[1] == '.'));
            seg = i + 1;
        } else {
            CHECK(key[i] != '\0');
            CHECK((unsigned char)key[i] >= 0x20 && (unsigned char)key[i] != 0x7f);
        }
    }
}

static void check_not_outside(const struct backend_stat *st)
{
    unsigned long long ino = strtoull(st->etag, NULL, 16);
    for (size_t i = 0; i < sizeof(g_forbidden) / sizeof(g_forbidden[0]); i++)
        CHECK(ino != g_forbidden[i]);
    CHECK(st->size_bytes != 12345);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    const char *key = (const char *)data;
    bool file_ok = backend_key_valid(key, size, false) == 0;
    bool dir_ok = backend_key_valid(key, size, true) == 0;
    if (file_ok)
        CHECK(dir_ok); /* allow_dir only widens */
    if (!dir_ok)
        return 0;
    check_shape(key, size, !file_ok);
    char *z = malloc(size + 1);
    CHECK(z != NULL);
    memcpy(z, data, size);
    z[size] = '\0';
    if (file_ok) {
        struct backend_stat st;
        if (backend_stat(g_be, NULL, z, &st) == 0)
            check_not_outside(&st);
        char buf[16];
        if (backend_read(g_be, NULL, z, 0, buf, sizeof(buf), NULL, &st) >= 0)
            check_not_outside(&st);
    }
    struct backend_list_page page;
    if (backend_list(g_be, NULL, z, "/", NULL, 50, &page) == 0) {
        for (size_t i = 0; i < page.n; i++) {
            CHECK(strncmp(page.entries[i].name, z, size) == 0);
            CHECK(page.entries[i].size_bytes != 12345);
        }
        backend_list_page_fini(&page);
    }
    free(z);
    return 0;
}
