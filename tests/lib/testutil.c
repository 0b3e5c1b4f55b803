/* SPDX-License-Identifier: Apache-2.0 */
/* testutil.c - shared test helpers. See testutil.h. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/strutil.h"

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static const char *tmp_root(void)
{
    const char *r = getenv("TIER_TEST_TMP");
    return r && *r ? r : "/tmp";
}

char *tu_mkdtemp(const char *tag)
{
    const char *root = tmp_root();
    /* 0755 whatever the umask: FUSE tests reach their directories as other uids */
    if (mkdir(root, 0755) == 0)
        chmod(root, 0755);
    else if (errno != EEXIST)
        die("mkdir %s: %s", root, strerror(errno));
    char *path = NULL;
    if (asprintf(&path, "%s/%s.XXXXXX", root, tag) < 0)
        die("asprintf");
    if (!mkdtemp(path))
        die("mkdtemp %s: %s", path, strerror(errno));
    return path;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(p) != 0 && errno != ENOENT)
        fprintf(stderr, "remove %s: %s\n", p, strerror(errno));
    return 0;
}

void tu_rmtree(const char *path)
{
    if (!path || strncmp(path, tmp_root(), strlen(tmp_root())) != 0)
        die("refusing to remove %s outside the test tmp root", path ? path : "(null)");
    nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

uint64_t tu_rand_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void tu_fill_random(void *buf, size_t len, uint64_t seed)
{
    uint64_t st = seed;
    unsigned char *p = buf;
    while (len >= 8) {
        uint64_t v = tu_rand_next(&st);
        memcpy(p, &v, 8);
        p += 8;
        len -= 8;
    }
    if (len) {
        uint64_t v = tu_rand_next(&st);
        memcpy(p, &v, len);
    }
}

void tu_write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        die("open %s: %s", path, strerror(errno));
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0)
            die("write %s: %s", path, strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    close(fd);
}

void *tu_read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die("open %s: %s", path, strerror(errno));
    struct stat st;
    fstat(fd, &st);
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0)
            die("read %s: %s", path, n < 0 ? strerror(errno) : "short");
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    *len = got;
    return buf;
}

int tu_ceph_ctl(const char *verb)
{
    const char *src = getenv("TIER_SRC");
    const char *dir = getenv("TIER_CEPH_DIR");
    if (!src || !dir)
        return -1;
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "'%s/scripts/ceph.sh' %s '%s'", src, verb, dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool tu_wait_tick(uint64_t *deadline)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (*deadline == 0)
        *deadline = now + (uint64_t)TU_WAIT_S * 1000000000u;
    if (now >= *deadline)
        return false;
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    return true;
}
