/* SPDX-License-Identifier: Apache-2.0 */
/*
 * posix.c - the POSIX directory backend (the warm tier): object keys are files under one root
 * directory, which may be any mounted local, shared or parallel file system.
 *
 * Called through backend.h by the cache, stager and uploader. Thread-safe: the state is the root
 * directory fd, opened once and never changed (every call opens its own fds), and the listing
 * cursors under cur_mu (held for a slot's take or put, never across I/O).
 *
 * DESIGN. Containment: the root is opened once with O_PATH, and every key is resolved with
 * openat2(root_fd, key, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so neither "..", an absolute
 * path nor a symlink (relative or absolute) can name anything outside the root; the kernel
 * answers EXDEV for an escape, reported as -EACCES. Symlinks that stay inside the root work.
 *
 * Versions: the tag of a file is "<ino>-<size>-<mtime ns>" in hex. Every put writes a new inode
 * (temp file + rename) whose mtime it sets from the nanosecond clock, so any rewrite through the
 * backend changes the tag even when a freed inode number is reused at once; a read with if_match
 * fstat()s the fd it reads from, so the check and the data refer to the same inode. A file
 * rewritten in place by someone else changes the tag through its size or mtime (as coarse as
 * the file system's clock).
 *
 * Atomic put: write ".tier-tmp.<random>" in the target's directory, fsync it, renameat() over the
 * key, fsync the directory. Readers see the old file or the new one, never a mix; a crash leaves
 * at most a temp file, which listings hide.
 *
 * Multipart upload state, one directory per upload:
 *
 *     <root>/.tier-mpu/<upload-id>/key          the key the upload was created for
 *     <root>/.tier-mpu/<upload-id>/part-NNNNN   each uploaded part (written atomically)
 *
 *     transition                   function
 *     (none)     -> open           posix_mpu_create    mkdir .tier-tmp.<id>, write "key" in it,
 *                                                      rename it to <id>: an upload is listed
 *                                                      only with its key (a crash mid-create
 *                                                      leaves a temp dir, swept when stale)
 *     open       -> open           posix_mpu_put_part  tmp + rename of part-NNNNN
 *     open       -> object         posix_mpu_complete  concatenate parts into a temp file beside
 *                                                      the key, rename, then remove staging
 *     open       -> (none)         posix_mpu_abort     rename the staging dir to .tier-tmp.<id>,
 *                                                      then remove it (complete does the same)
 *
 * The upload id is 32 lowercase hex characters and is checked before use as a path component.
 * Keys whose segments are ".tier-mpu" or start with ".tier-tmp." are reserved and refused.
 *
 * Listing walks the directory under the prefix's directory part. Entries of each directory are
 * sorted comparing a directory as "name/", which makes a depth-first walk produce keys in plain
 * byte order, as S3 does. The page token is the last key (or prefix) returned; subtrees wholly
 * before the token are skipped without being read. The token is never parsed, only compared with
 * strcmp/strncmp against listed names, and callers pass back the previous page's next_token, so
 * it needs no fuzz target of its own (fuzz_keys covers the listing's containment). Symlinked
 * directories are listed as prefixes but not descended in recursive listings (no cycles).
 * Page cost: only the entries after the token are kept, only the files listed are stat'ed (the
 * directory entry's type tells files from directories), and a page that reads its directory
 * sorts only the first entries it needs (selected in linear time). A listing with a delimiter
 * keeps its sorted directory between pages (a cursor: POSIX_CURSORS of them, the least recently
 * used replaced), so the next page, asked with the token the last one handed out, continues
 * without reading the directory again, while the directory's mtime and ctime are those it was
 * read with. A directory modified within the last second is read again for every page (its
 * timestamps, as coarse as the file system's clock, could miss a change in the same tick).
 * Listing 100,000 files in 100 pages is one readdir and 100,000 stats, where it was 100
 * readdirs, 10,000,000 stats and 100 sorts (docs/BENCHMARKS.md, "Listings").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "common/vec.h"
#include "tiers/backend.h"

#define MPU_DIR ".tier-mpu"
#define TMP_PREFIX ".tier-tmp."
#define UPLOAD_ID_LEN 32
#define MPU_MIN_PART_BYTES (5u * 1024 * 1024)
#define LIST_MAX_KEYS 1000
#define COPY_BUF_BYTES (1u << 20)

#define POSIX_CURSORS 8
#define CURSOR_IDLE_NS (30000 * TIER_NS_PER_MS)

struct cursor;

struct posix_backend {
    struct backend base;
    int root_fd; /* O_PATH|O_DIRECTORY; read-only after open */
    char *root;  /* for messages */
    pthread_mutex_t cur_mu;
    struct cursor *cur[POSIX_CURSORS]; /* cur_mu: listings between pages (DESIGN), or NULL */
};

static struct posix_backend *to_pb(struct backend *be)
{
    return (struct posix_backend *)be;
}

/* ---- path resolution ---------------------------------------------------------------------- */

/* openat2 beneath the root. Returns an fd or -errno (with a message for escapes). */
static int open_beneath(const struct posix_backend *pb, const char *path, int flags, mode_t mode)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC),
        .mode = (flags & O_CREAT) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    /* EAGAIN: a concurrent rename raced a ".." in the lookup; the kernel asks for a retry. */
    for (int tries = 0;; tries++) {
        long fd = syscall(SYS_openat2, pb->root_fd, path, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if ((errno == EINTR || errno == EAGAIN) && tries < 100)
            continue;
        return -errno;
    }
}

/* Turn an errno from resolving or using key into the value returned to the caller, with a
 * message saying what happened. */
static int fail(const struct posix_backend *pb, int neg, const char *op, const char *key)
{
    switch (neg) {
    case -EXDEV:
        tier_err_set("%s '%s': refused, the path leaves the backend root %s (a symlink or '..' "
                     "pointing outside it)",
                     op, key, pb->root);
        return -EACCES;
    case -ELOOP:
        tier_err_set("%s '%s': refused, too many symlinks or a magic link under %s", op, key,
                     pb->root);
        return -EACCES;
    case -ENOTDIR:
        tier_err_set("%s '%s': no such object (a parent is not a directory) under %s", op, key,
                     pb->root);
        return -ENOENT;
    case -ENOENT:
        tier_err_set("%s '%s': no such object under %s", op, key, pb->root);
        return -ENOENT;
    case -EACCES:
    case -EPERM:
        tier_err_set("%s '%s': permission denied under %s (check the directory's owner and mode)",
                     op, key, pb->root);
        return -EACCES;
    case -ENOSPC:
    case -EDQUOT:
        tier_err_set("%s '%s': no space left on the file system of %s", op, key, pb->root);
        return neg;
    case -EROFS:
        tier_err_set("%s '%s': the file system of %s is mounted read-only", op, key, pb->root);
        return neg;
    default:
        tier_err_set("%s '%s' under %s: %s", op, key, pb->root, strerror(-neg));
        return neg;
    }
}

/* Creating the parent directories of key failed: a file in the way is -ENOTDIR (S3 allows keys
 * "a" and "a/b" together; a file system does not). */
static int fail_parent(const struct posix_backend *pb, int neg, const char *op, const char *key)
{
    if (neg == -ENOTDIR || neg == -EEXIST) {
        tier_err_set("%s '%s': a parent of this key is a file under %s, not a directory", op, key,
                     pb->root);
        return -ENOTDIR;
    }
    return fail(pb, neg, op, key);
}

static bool reserved_segment(const char *s, size_t n)
{
    size_t lm = sizeof(MPU_DIR) - 1, lt = sizeof(TMP_PREFIX) - 1;
    return (n == lm && memcmp(s, MPU_DIR, lm) == 0) || (n >= lt && memcmp(s, TMP_PREFIX, lt) == 0);
}

static int check_reserved(const char *key)
{
    const char *s = key;
    for (;;) {
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        if (reserved_segment(s, n)) {
            tier_err_set("key '%s' uses a name reserved by the POSIX backend (%s, %s*)", key,
                         MPU_DIR, TMP_PREFIX);
            return -EINVAL;
        }
        if (!slash)
            return 0;
        s = slash + 1;
    }
}

/* Directory part of key ("a/b" for "a/b/c", "." for "c") into dir (size BACKEND_KEY_MAX + 1);
 * returns a pointer to the base name inside key. */
static const char *split_key(const char *key, char *dir)
{
    const char *slash = strrchr(key, '/');
    if (!slash) {
        tier_strlcpy(dir, ".", BACKEND_KEY_MAX + 1);
        return key;
    }
    size_t n = (size_t)(slash - key);
    memcpy(dir, key, n);
    dir[n] = '\0';
    return slash + 1;
}

/* Open directory dir (relative to the root) for reading/fsync, creating missing components when
 * create is set. Returns an fd or -errno. */
static int open_dir(const struct posix_backend *pb, const char *dir, bool create)
{
    int fd = open_beneath(pb, dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd != -ENOENT || !create)
        return fd;
    /* Create component by component; each mkdir happens inside a directory that was itself
     * resolved beneath the root, so a symlink cannot redirect it. */
    char path[BACKEND_KEY_MAX + 1];
    tier_strlcpy(path, dir, sizeof(path));
    int parent = open_beneath(pb, ".", O_RDONLY | O_DIRECTORY, 0);
    if (parent < 0)
        return parent;
    char *seg = path;
    for (;;) {
        char *slash = strchr(seg, '/');
        if (slash)
            *slash = '\0';
        if (mkdirat(parent, seg, 0755) != 0 && errno != EEXIST) {
            int e = -errno;
            close(parent);
            return e;
        }
        int next = open_beneath(pb, path, O_RDONLY | O_DIRECTORY, 0);
        close(parent);
        if (next < 0)
            return next;
        parent = next;
        if (!slash)
            return parent;
        *slash = '/';
        seg = slash + 1;
    }
}

/* ---- versions ------------------------------------------------------------------------------ */

static int64_t mtime_ns(const struct stat *s)
{
    return (int64_t)s->st_mtim.tv_sec * 1000000000LL + s->st_mtim.tv_nsec;
}

static void fill_stat(const struct stat *s, struct backend_stat *st)
{
    memset(st, 0, sizeof(*st));
    st->is_dir = S_ISDIR(s->st_mode);
    st->size_bytes = st->is_dir ? 0 : (uint64_t)s->st_size;
    st->mtime_ns = mtime_ns(s);
    snprintf(st->etag, sizeof(st->etag), "%llx-%llx-%llx", (unsigned long long)s->st_ino,
             (unsigned long long)s->st_size, (unsigned long long)mtime_ns(s));
}

static void tag_of(const struct stat *s, char *etag_out)
{
    struct backend_stat st;
    fill_stat(s, &st);
    if (etag_out)
        tier_strlcpy(etag_out, st.etag, BACKEND_ETAG_MAX);
}

/* ---- stat / read ------------------------------------------------------------------------- */

static int posix_stat(struct backend *be, const char *key, struct backend_stat *st)
{
    struct posix_backend *pb = to_pb(be);
    int rc = check_reserved(key);
    if (rc)
        return rc;
    int fd = open_beneath(pb, key, O_PATH, 0);
    if (fd < 0)
        return fail(pb, fd, "stat", key);
    struct stat s;
    rc = fstat(fd, &s) == 0 ? 0 : -errno;
    close(fd);
    if (rc)
        return fail(pb, rc, "stat", key);
    fill_stat(&s, st);
    return 0;
}

static ssize_t posix_read(struct backend *be, const char *key, uint64_t off, void *buf, size_t len,
                          const char *if_match, struct backend_stat *st)
{
    struct posix_backend *pb = to_pb(be);
    int rc = check_reserved(key);
    if (rc)
        return rc;
    int fd = open_beneath(pb, key, O_RDONLY, 0);
    if (fd < 0)
        return fail(pb, fd, "read", key);
    ssize_t ret;
    struct stat s;
    struct backend_stat cur;
    if (fstat(fd, &s) != 0) {
        ret = fail(pb, -errno, "read", key);
        goto out;
    }
    fill_stat(&s, &cur);
    if (cur.is_dir) {
        tier_err_set("read '%s': is a directory under %s, not an object", key, pb->root);
        ret = -EISDIR;
        goto out;
    }
    if (if_match && strcmp(if_match, cur.etag) != 0) {
        tier_err_set("read '%s': object changed (version %s, wanted %s)", key, cur.etag, if_match);
        ret = -ESTALE;
        goto out;
    }
    size_t got = 0;
    while (got < len && off + got < cur.size_bytes) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            ret = fail(pb, -errno, "read", key);
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (st)
        *st = cur;
    ret = (ssize_t)got;
out:
    close(fd);
    return ret;
}

/* ---- atomic file creation ---------------------------------------------------------------- */

static int random_hex(char *out, size_t nbytes)
{
    unsigned char raw[32];
    if (nbytes > sizeof(raw))
        return -EINVAL;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(raw + got, nbytes - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        got += (size_t)n;
    }
    tier_hex(raw, nbytes, out);
    return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A temp file being filled in directory dirfd, to be renamed over its final name. */
struct tmpfile {
    int dirfd;
    int fd;
    char name[sizeof(TMP_PREFIX) + 32];
};

static int tmp_create(int dirfd, struct tmpfile *t)
{
    t->dirfd = dirfd;
    t->fd = -1;
    for (int tries = 0; tries < 8; tries++) {
        char rnd[33];
        int rc = random_hex(rnd, 8);
        if (rc)
            return rc;
        snprintf(t->name, sizeof(t->name), TMP_PREFIX "%s", rnd);
        t->fd = openat(dirfd, t->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (t->fd >= 0)
            return 0;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

static void tmp_discard(struct tmpfile *t)
{
    if (t->fd >= 0) {
        close(t->fd);
        t->fd = -1;
        unlinkat(t->dirfd, t->name, 0);
    }
}

/* fsync the temp file, record its tag, rename it to name and fsync the directory. */
/* excl: never replace an existing name (-EEXIST): renameat2(RENAME_NOREPLACE), or where the
 * file system has no such rename, a hard link (which fails on an existing name) and an unlink. */
static int tmp_commit_mode(struct tmpfile *t, const char *name, char *etag_out, bool excl)
{
    /* Stamp mtime from the fine-grained clock: file systems stamp it from a coarse one (one
     * tick, ms), and a freed inode number may be reused by the next put of the same size within
     * that tick, which would give it the old version's tag. */
    struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {0}};
    clock_gettime(CLOCK_REALTIME, &ts[1]);
    struct stat s;
    if (futimens(t->fd, ts) != 0 || fsync(t->fd) != 0 || fstat(t->fd, &s) != 0)
        return -errno;
    if (!excl) {
        if (renameat(t->dirfd, t->name, t->dirfd, name) != 0)
            return -errno;
    } else if (renameat2(t->dirfd, t->name, t->dirfd, name, RENAME_NOREPLACE) != 0) {
        if (errno != EINVAL && errno != ENOSYS)
            return -errno;
        if (linkat(t->dirfd, t->name, t->dirfd, name, 0) != 0)
            return -errno;
        unlinkat(t->dirfd, t->name, 0); /* the name is published; the temporary goes */
    }
    close(t->fd);
    t->fd = -1;
    tag_of(&s, etag_out);
    if (fsync(t->dirfd) != 0)
        return -errno;
    return 0;
}

static int tmp_commit(struct tmpfile *t, const char *name, char *etag_out)
{
    return tmp_commit_mode(t, name, etag_out, false);
}

/* The prologue of op (a put: create set, or a delete) on key's object: a reserved name is
 * refused, the parent directory opened (with create, missing ones made). Returns the parent's fd
 * with *base, key's last component (pointing into key), or a negative errno with the message
 * set (fail_parent's with create, fail's without). */
static int open_parent(const struct posix_backend *pb, const char *key, bool create, const char *op,
                       const char **base)
{
    int rc = check_reserved(key);
    if (rc)
        return rc;
    char dir[BACKEND_KEY_MAX + 1];
    *base = split_key(key, dir);
    int dirfd = open_dir(pb, dir, create);
    if (dirfd < 0)
        return create ? fail_parent(pb, dirfd, op, key) : fail(pb, dirfd, op, key);
    return dirfd;
}

static int put_mode(struct backend *be, const char *key, const void *buf, size_t len,
                    char *etag_out, bool excl)
{
    struct posix_backend *pb = to_pb(be);
    const char *base;
    int dirfd = open_parent(pb, key, true, "put", &base);
    if (dirfd < 0)
        return dirfd;
    struct tmpfile t;
    int rc = tmp_create(dirfd, &t);
    if (rc == 0)
        rc = write_all(t.fd, buf, len);
    if (rc == 0)
        rc = tmp_commit_mode(&t, base, etag_out, excl);
    tmp_discard(&t);
    close(dirfd);
    if (rc == -EEXIST && excl) {
        tier_err_set("put '%s' under %s: the object exists already", key, pb->root);
        return rc;
    }
    return rc ? fail(pb, rc, "put", key) : 0;
}

static int posix_put(struct backend *be, const char *key, const void *buf, size_t len,
                     char *etag_out)
{
    return put_mode(be, key, buf, len, etag_out, false);
}

static int posix_put_new(struct backend *be, const char *key, const void *buf, size_t len,
                         char *etag_out)
{
    return put_mode(be, key, buf, len, etag_out, true);
}

/* ---- delete -------------------------------------------------------------------------------- */

static int posix_del(struct backend *be, const char *key)
{
    struct posix_backend *pb = to_pb(be);
    const char *base;
    int dirfd = open_parent(pb, key, false, "delete", &base);
    if (dirfd < 0)
        return dirfd;
    int rc = unlinkat(dirfd, base, 0) == 0 ? 0 : -errno;
    close(dirfd);
    if (rc == -EISDIR) {
        tier_err_set("delete '%s': is a directory under %s, not an object", key, pb->root);
        return rc;
    }
    return rc ? fail(pb, rc, "delete", key) : 0;
}

/* The directory a file's put created (open_dir), once its last object went: a directory the
 * mount removes (rmdir) must not be listed again. Never the root. */
static int posix_rmdir(struct backend *be, const char *dirkey)
{
    struct posix_backend *pb = to_pb(be);
    char key[BACKEND_KEY_MAX + 1], dir[BACKEND_KEY_MAX + 1];
    size_t n = strlen(dirkey);
    if (n < 2 || n > BACKEND_KEY_MAX || dirkey[n - 1] != '/')
        return -EINVAL;
    memcpy(key, dirkey, n - 1);
    key[n - 1] = '\0';
    int rc = check_reserved(key);
    if (rc)
        return rc;
    const char *base = split_key(key, dir);
    int dirfd = open_dir(pb, dir, false);
    if (dirfd == -ENOENT)
        return 0; /* its parent is gone too */
    if (dirfd < 0)
        return fail(pb, dirfd, "remove directory", dirkey);
    rc = unlinkat(dirfd, base, AT_REMOVEDIR) == 0 ? 0 : -errno;
    close(dirfd);
    if (rc == -ENOENT)
        return 0;
    if (rc == -EEXIST || rc == -ENOTEMPTY) {
        tier_err_set("remove directory '%s': not empty under %s (it may hold a %s* file an "
                     "interrupted write left: remove it by hand)",
                     dirkey, pb->root, TMP_PREFIX);
        return -ENOTEMPTY;
    }
    return rc ? fail(pb, rc, "remove directory", dirkey) : 0;
}

/* ---- multipart upload -------------------------------------------------------------------- */

static bool upload_id_valid(const char *id)
{
    if (!id || strlen(id) != UPLOAD_ID_LEN)
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* Open the staging dir of upload id and check it belongs to key. Returns an fd or -errno. */
static int mpu_open(const struct posix_backend *pb, const char *key, const char *id, const char *op)
{
    if (!upload_id_valid(id)) {
        tier_err_set("%s '%s': no such multipart upload '%s'", op, key, id ? id : "(null)");
        return -ENOENT;
    }
    char path[sizeof(MPU_DIR) + UPLOAD_ID_LEN + 1];
    snprintf(path, sizeof(path), MPU_DIR "/%s", id);
    int fd = open_beneath(pb, path, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
        if (fd == -ENOENT)
            tier_err_set("%s '%s': no such multipart upload '%s'", op, key, id);
        else
            fail(pb, fd, op, key);
        return fd == -ENOENT ? fd : -EIO;
    }
    char stored[BACKEND_KEY_MAX + 1];
    int kfd = openat(fd, "key", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n = kfd >= 0 ? pread(kfd, stored, sizeof(stored) - 1, 0) : -1;
    if (kfd >= 0)
        close(kfd);
    if (n < 0 || (size_t)n != strlen(key) || memcmp(stored, key, (size_t)n) != 0) {
        close(fd);
        tier_err_set("%s '%s': multipart upload '%s' was not created for this key", op, key, id);
        return -ENOENT;
    }
    return fd;
}

/* Temporary staging directories older than this are a crashed create's: removed. */
#define MPU_TMP_STALE_S 600

/* Remove the temporary staging directories (".tier-tmp.<id>" in .tier-mpu) a crash in the middle
 * of posix_mpu_create left behind, once stale (a create in progress takes milliseconds). Best
 * effort. */
static void mpu_sweep_stale(int mpu)
{
    int dfd = dup(mpu);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        if (strncmp(de->d_name, TMP_PREFIX, sizeof(TMP_PREFIX) - 1) != 0 ||
            fstatat(mpu, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
            now - st.st_mtime < MPU_TMP_STALE_S)
            continue;
        int sfd = openat(mpu, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        DIR *sd = sfd >= 0 ? fdopendir(sfd) : NULL;
        if (!sd) {
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        struct dirent *fe;
        while ((fe = readdir(sd)) != NULL)
            if (strcmp(fe->d_name, ".") != 0 && strcmp(fe->d_name, "..") != 0)
                (void)unlinkat(dirfd(sd), fe->d_name, 0);
        closedir(sd);
        (void)unlinkat(mpu, de->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

static int posix_mpu_create(struct backend *be, const char *key, char **upload_id)
{
    struct posix_backend *pb = to_pb(be);
    int rc = check_reserved(key);
    if (rc)
        return rc;
    char id[UPLOAD_ID_LEN + 1];
    rc = random_hex(id, UPLOAD_ID_LEN / 2);
    if (rc)
        return fail(pb, rc, "multipart create", key);
    int mpu = open_dir(pb, MPU_DIR, true);
    if (mpu < 0)
        return fail(pb, mpu, "multipart create", key);
    mpu_sweep_stale(mpu);
    int sfd = -1;
    bool renamed = false;
    char tmpdir[sizeof(TMP_PREFIX) + UPLOAD_ID_LEN + 1];
    snprintf(tmpdir, sizeof(tmpdir), TMP_PREFIX "%s", id);
    if (mkdirat(mpu, tmpdir, 0700) != 0) {
        rc = -errno;
        goto out;
    }
    sfd = openat(mpu, tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (sfd < 0) {
        rc = -errno;
        goto out;
    }
    struct tmpfile t;
    rc = tmp_create(sfd, &t);
    if (rc == 0)
        rc = write_all(t.fd, key, strlen(key));
    if (rc == 0)
        rc = tmp_commit(&t, "key", NULL);
    tmp_discard(&t);
    if (rc == 0 && renameat(mpu, tmpdir, mpu, id) != 0)
        rc = -errno;
    renamed = rc == 0;
    if (rc == 0 && fsync(mpu) != 0)
        rc = -errno;
    if (rc == 0) {
        *upload_id = strdup(id);
        if (!*upload_id)
            rc = -ENOMEM;
    }
out:
    if (rc && sfd >= 0) {
        /* back to the temporary name first: never an upload id without its key */
        if (renamed && renameat(mpu, id, mpu, tmpdir) != 0) {
            close(sfd);
            close(mpu);
            return fail(pb, rc, "multipart create", key); /* listed with its key: abortable */
        }
        unlinkat(sfd, "key", 0);
        unlinkat(mpu, tmpdir, AT_REMOVEDIR);
    }
    if (sfd >= 0)
        close(sfd);
    close(mpu);
    return rc ? fail(pb, rc, "multipart create", key) : 0;
}

static void part_name(int part_no, char *out, size_t outsz)
{
    snprintf(out, outsz, "part-%05d", part_no);
}

static int posix_mpu_put_part(struct backend *be, const char *key, const char *upload_id,
                              int part_no, const void *buf, size_t len, char *etag_out)
{
    struct posix_backend *pb = to_pb(be);
    int sfd = mpu_open(pb, key, upload_id, "multipart upload part");
    if (sfd < 0)
        return sfd;
    char name[32];
    part_name(part_no, name, sizeof(name));
    struct tmpfile t;
    int rc = tmp_create(sfd, &t);
    if (rc == 0)
        rc = write_all(t.fd, buf, len);
    if (rc == 0)
        rc = tmp_commit(&t, name, etag_out);
    tmp_discard(&t);
    close(sfd);
    return rc ? fail(pb, rc, "multipart upload part", key) : 0;
}

/* Append the whole of file src to fd dst. */
static int append_file(int dst, int src, char *buf)
{
    off_t in_off = 0;
    for (;;) {
        ssize_t n = copy_file_range(src, &in_off, dst, NULL, 1u << 30, 0);
        if (n == 0)
            return 0;
        if (n > 0)
            continue;
        if (errno == EINTR)
            continue;
        if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
            return -errno;
        break; /* not supported here: plain copy from where it stopped */
    }
    for (;;) {
        ssize_t n = pread(src, buf, COPY_BUF_BYTES, in_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return 0;
        int rc = write_all(dst, buf, (size_t)n);
        if (rc)
            return rc;
        in_off += n;
    }
}

/* Remove a staging dir: first renamed to a temporary name (the upload is gone from listings at
 * once, atomically), then its files, then itself. A crash part-way through leaves a temporary
 * directory, which no listing shows and mpu_sweep_stale removes once stale; never a directory
 * under the upload's id that has lost its key (no later abort could find it). */
static int remove_staging(const struct posix_backend *pb, int sfd, const char *id)
{
    int mpu = open_beneath(pb, MPU_DIR, O_RDONLY | O_DIRECTORY, 0);
    if (mpu < 0)
        return mpu;
    char tmp[sizeof(TMP_PREFIX) + UPLOAD_ID_LEN + 1];
    snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s", id);
    if (renameat(mpu, id, mpu, tmp) != 0) {
        int rc = -errno;
        close(mpu);
        return rc;
    }
    (void)utimensat(mpu, tmp, NULL, 0); /* fresh: a sweep leaves it to us */
    int dfd = dup(sfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                unlinkat(sfd, de->d_name, 0);
        closedir(d);
    } else if (dfd >= 0) {
        close(dfd);
    }
    int rc = unlinkat(mpu, tmp, AT_REMOVEDIR) == 0 ? 0 : -errno;
    close(mpu);
    /* ENOTEMPTY: the sweep finishes it; ENOENT: a sweep took it already (its mtime was old) */
    return rc == -ENOTEMPTY || rc == -ENOENT ? 0 : rc;
}

/* Check that part p was uploaded and still has the tag the caller names; fd: the part opened,
 * or -1 to look it up by name. Fills s. Returns 0 or -EINVAL with a message. */
static int part_check(int sfd, const char *key, const struct backend_part *p, struct stat *s,
                      int fd)
{
    char name[32];
    part_name(p->number, name, sizeof(name));
    int rc = fd >= 0 ? fstat(fd, s) : fstatat(sfd, name, s, AT_SYMLINK_NOFOLLOW);
    if (rc != 0 || !S_ISREG(s->st_mode)) {
        tier_err_set("multipart complete '%s': part %d was not uploaded", key, p->number);
        return -EINVAL;
    }
    char tag[BACKEND_ETAG_MAX];
    tag_of(s, tag);
    if (strcmp(tag, p->etag) != 0) {
        tier_err_set("multipart complete '%s': part %d has version %s, not %s", key, p->number, tag,
                     p->etag);
        return -EINVAL;
    }
    return 0;
}

static int posix_mpu_complete(struct backend *be, const char *key, const char *upload_id,
                              const struct backend_part *parts, size_t nparts, char *etag_out)
{
    struct posix_backend *pb = to_pb(be);
    const char *op = "multipart complete";
    int sfd = mpu_open(pb, key, upload_id, op);
    if (sfd < 0)
        return sfd;
    char dir[BACKEND_KEY_MAX + 1];
    const char *base = split_key(key, dir);
    int rc = 0;
    int dirfd = -1;
    char *buf = NULL;
    struct tmpfile t = {.fd = -1};
    /* Check every part first, as S3 does (InvalidPartOrder, InvalidPart, EntityTooSmall); the
     * tags are checked again as each part is copied, in case one was uploaded anew meanwhile. */
    for (size_t i = 0; i < nparts; i++) {
        if (i > 0 && parts[i].number <= parts[i - 1].number) {
            tier_err_set("%s '%s': part numbers must be in ascending order (%d after %d)", op, key,
                         parts[i].number, parts[i - 1].number);
            rc = -EINVAL;
            goto out;
        }
        struct stat s;
        rc = part_check(sfd, key, &parts[i], &s, -1);
        if (rc)
            goto out;
        if (i + 1 < nparts && (uint64_t)s.st_size < MPU_MIN_PART_BYTES) {
            tier_err_set("%s '%s': part %d is %lld bytes; all parts but the last must be at "
                         "least 5 MiB",
                         op, key, parts[i].number, (long long)s.st_size);
            rc = -EINVAL;
            goto out;
        }
    }
    buf = malloc(COPY_BUF_BYTES);
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    dirfd = open_dir(pb, dir, true);
    if (dirfd < 0) {
        rc = fail_parent(pb, dirfd, op, key);
        goto out;
    }
    rc = tmp_create(dirfd, &t);
    for (size_t i = 0; rc == 0 && i < nparts; i++) {
        char name[32];
        part_name(parts[i].number, name, sizeof(name));
        int pfd = openat(sfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (pfd < 0) {
            rc = -errno;
            break;
        }
        struct stat s;
        rc = part_check(sfd, key, &parts[i], &s, pfd);
        if (rc == 0)
            rc = append_file(t.fd, pfd, buf);
        close(pfd);
        if (rc == -EINVAL) {
            tmp_discard(&t);
            goto out; /* message already set */
        }
    }
    if (rc == 0)
        rc = tmp_commit(&t, base, etag_out);
    tmp_discard(&t);
    if (rc) {
        rc = fail(pb, rc, op, key);
        goto out;
    }
    /* The object is in place; a failure to clean up staging does not undo that. */
    remove_staging(pb, sfd, upload_id);
out:
    free(buf);
    if (dirfd >= 0)
        close(dirfd);
    close(sfd);
    return rc;
}

static int posix_mpu_abort(struct backend *be, const char *key, const char *upload_id)
{
    struct posix_backend *pb = to_pb(be);
    int sfd = mpu_open(pb, key, upload_id, "multipart abort");
    if (sfd < 0)
        return sfd;
    int rc = remove_staging(pb, sfd, upload_id);
    close(sfd);
    return rc ? fail(pb, rc, "multipart abort", key) : 0;
}

/* The uploads whose staging dir names key; initiated = the staging dir's mtime (set at create,
 * and by each part written into it: "last activity", close enough for orphan cleanup). */
static int posix_mpu_list(struct backend *be, const char *key, struct backend_mpu **out, size_t *n)
{
    struct posix_backend *pb = to_pb(be);
    int mpu = open_beneath(pb, MPU_DIR, O_RDONLY | O_DIRECTORY, 0);
    if (mpu == -ENOENT)
        return 0; /* no upload was ever created */
    if (mpu < 0)
        return fail(pb, mpu, "multipart list", key);
    DIR *d = fdopendir(mpu);
    if (!d) {
        int e = -errno;
        close(mpu);
        return fail(pb, e, "multipart list", key);
    }
    struct backend_mpu *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!upload_id_valid(de->d_name))
            continue;
        int sfd = mpu_open(pb, key, de->d_name, "multipart list");
        if (sfd < 0)
            continue; /* another key's upload, or gone meanwhile */
        struct stat st;
        int64_t t =
            fstat(sfd, &st) == 0 ? (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec : 0;
        close(sfd);
        struct backend_mpu *nv = tier_vec_grow(v, &cap, cnt + 1, sizeof(*nv), 4);
        if (!nv) {
            rc = -ENOMEM;
            break;
        }
        v = nv;
        v[cnt].initiated_ns = t;
        v[cnt].upload_id = strdup(de->d_name);
        if (!v[cnt].upload_id) {
            rc = -ENOMEM;
            break;
        }
        cnt++;
    }
    closedir(d);
    if (rc) {
        backend_mpu_list_free(v, cnt);
        return fail(pb, rc, "multipart list", key);
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* ---- listing ------------------------------------------------------------------------------- */

enum ent_kind { ENT_FILE, ENT_DIR, ENT_LINKDIR };

struct dent {
    char *name;
    size_t len; /* strlen(name) */
    enum ent_kind kind;
    bool st_valid;  /* st was taken when the directory was read; else (a file the directory
                     * entry's type named) walk() stats it when it lists it */
    struct stat st; /* for files */
};

struct lister {
    const struct posix_backend *pb;
    const char *token; /* return only names > token; NULL for none */
    size_t limit;      /* stop after this many entries */
    bool recursive;
    struct backend_entry *v;
    size_t n, cap;
};

/* Character i of the entry's name with a directory read as "name/"; 0 past the end. */
static int dent_char(const struct dent *d, size_t i, size_t len)
{
    if (i < len)
        return (unsigned char)d->name[i];
    return i == len && d->kind != ENT_FILE ? '/' : 0;
}

/* Compare names, a directory counting as "name/": makes depth-first order equal key order.
 * Names hold no '/', so past their common part the first differing character decides. */
static int dent_cmp(const void *a, const void *b)
{
    const struct dent *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, m);
    if (c)
        return c;
    return dent_char(x, m, x->len) - dent_char(y, m, y->len);
}

static void dents_free(struct dent *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(d[i].name);
    free(d);
}

#define DENT_KEY_MAX (BACKEND_KEY_MAX + NAME_MAX + 4)

/* Can no key of the entry name (its own, or as a directory "name/" every key below) come
 * after the token? key is a scratch buffer holding dirkey (dl bytes) with room for a segment. */
static bool before_token(const struct lister *l, char *key, size_t dl, const char *nm, size_t nlen)
{
    if (!l->token || dl + nlen + 2 > DENT_KEY_MAX)
        return false; /* too long to be a key: walk() skips it */
    memcpy(key + dl, nm, nlen);
    key[dl + nlen] = '/';
    key[dl + nlen + 1] = '\0';
    /* the file "name" sorts before "name/": both are <= the token when "name/" is */
    int c = strcmp(key, l->token);
    if (!l->recursive)
        return c <= 0;
    /* recursive: "name/" is a subtree, passed unless the token lies inside it */
    return c < 0 && strncmp(l->token, key, dl + nlen + 1) != 0;
}

/* Read directory fd (borrowed) whose key prefix is dirkey: the entries whose names start
 * with name_prefix and that may come after the token, classified, in directory order.
 * The directory entry's type classifies files and directories (no stat: a page of a large
 * directory stats only the files it lists, in walk()); a link, or a file system that does not
 * say, is stat'ed here. */
static int read_dents(const struct lister *l, int fd, const char *dirkey, const char *name_prefix,
                      struct dent **out, size_t *nout)
{
    char key[DENT_KEY_MAX];
    size_t dl = strlen(dirkey);
    if (dl + 2 > sizeof(key)) {
        *out = NULL; /* no key can be this long */
        *nout = 0;
        return 0;
    }
    memcpy(key, dirkey, dl + 1);
    int dfd = dup(fd);
    if (dfd < 0)
        return -errno;
    DIR *d = fdopendir(dfd);
    if (!d) {
        int e = -errno;
        close(dfd);
        return e;
    }
    /* dup() shares the file offset: start from the beginning in case fd was read before. */
    rewinddir(d);
    struct dent *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    size_t plen = strlen(name_prefix);
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        size_t nlen = strlen(nm);
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 || reserved_segment(nm, nlen) ||
            strncmp(nm, name_prefix, plen) != 0 || before_token(l, key, dl, nm, nlen))
            continue;
        struct dent e = {0};
        struct stat s;
        if (de->d_type == DT_DIR) {
            e.kind = ENT_DIR;
        } else if (de->d_type == DT_REG) {
            e.kind = ENT_FILE;
        } else if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN) {
            continue; /* sockets, fifos, devices are not objects */
        } else if (fstatat(dirfd(d), nm, &s, AT_SYMLINK_NOFOLLOW) != 0) {
            continue; /* vanished meanwhile */
        } else if (S_ISDIR(s.st_mode)) {
            e.kind = ENT_DIR;
        } else if (S_ISREG(s.st_mode)) {
            e.kind = ENT_FILE;
            e.st = s;
            e.st_valid = true;
        } else if (S_ISLNK(s.st_mode)) {
            /* Follow it only beneath the root; links that leave it are not listed. */
            char full[BACKEND_KEY_MAX + NAME_MAX + 2];
            snprintf(full, sizeof(full), "%s%s", dirkey, nm);
            int lfd = open_beneath(l->pb, full, O_PATH, 0);
            if (lfd < 0)
                continue;
            int frc = fstat(lfd, &s);
            close(lfd);
            if (frc != 0 || !(S_ISDIR(s.st_mode) || S_ISREG(s.st_mode)))
                continue;
            e.kind = S_ISDIR(s.st_mode) ? ENT_LINKDIR : ENT_FILE;
            e.st = s;
            e.st_valid = true;
        } else {
            continue; /* sockets, fifos, devices are not objects */
        }
        struct dent *nv = tier_vec_grow(v, &cap, n + 1, sizeof(*nv), 64);
        if (!nv) {
            rc = -ENOMEM;
            break;
        }
        v = nv;
        e.name = strndup(nm, nlen);
        e.len = nlen;
        if (!e.name) {
            rc = -ENOMEM;
            break;
        }
        v[n++] = e;
    }
    closedir(d);
    if (rc) {
        dents_free(v, n);
        return rc;
    }
    *out = v;
    *nout = n;
    return 0;
}

static void dent_swap(struct dent *a, struct dent *b)
{
    struct dent t = *a;
    *a = *b;
    *b = t;
}

/* Put the k smallest of v[0..n) first, sorted; the rest follow unsorted, none smaller. Returns
 * how many lead sorted (k, or n when k >= n). A page needs only its first keys after the token:
 * selecting them is linear, where sorting a large directory for every page was not. Names are
 * unique, so the partition (median of three, Lomuto) has no runs of equal keys. */
static size_t sort_smallest(struct dent *v, size_t n, size_t k)
{
    if (k >= n) {
        if (n > 1)
            qsort(v, n, sizeof(*v), dent_cmp);
        return n;
    }
    size_t lo = 0, hi = n; /* v[0..lo) <= v[lo..n), v[0..hi) <= v[hi..n), lo <= k < hi */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2, last = hi - 1;
        if (dent_cmp(&v[mid], &v[lo]) < 0)
            dent_swap(&v[mid], &v[lo]);
        if (dent_cmp(&v[last], &v[lo]) < 0)
            dent_swap(&v[last], &v[lo]);
        if (dent_cmp(&v[mid], &v[last]) < 0)
            dent_swap(&v[mid], &v[last]); /* the median is the pivot, at last */
        size_t store = lo;
        for (size_t i = lo; i < last; i++)
            if (dent_cmp(&v[i], &v[last]) < 0)
                dent_swap(&v[i], &v[store++]);
        dent_swap(&v[store], &v[last]);
        if (store == k)
            break;
        if (k < store)
            hi = store;
        else
            lo = store + 1;
    }
    if (k > 1)
        qsort(v, k, sizeof(*v), dent_cmp);
    return k;
}

static int emit(struct lister *l, const char *key, bool is_prefix, const struct stat *s)
{
    struct backend_entry *nv = tier_vec_grow(l->v, &l->cap, l->n + 1, sizeof(*nv), 64);
    if (!nv)
        return -ENOMEM;
    l->v = nv;
    struct backend_entry *e = &l->v[l->n];
    memset(e, 0, sizeof(*e));
    e->name = strdup(key);
    if (!e->name)
        return -ENOMEM;
    e->is_prefix = is_prefix;
    if (s) {
        struct backend_stat st;
        fill_stat(s, &st);
        e->size_bytes = st.size_bytes;
        e->mtime_ns = st.mtime_ns;
        tier_strlcpy(e->etag, st.etag, sizeof(e->etag));
    }
    l->n++;
    return 0;
}

/* List entry d of directory fd (borrowed) with key prefix dirkey: a file, or (no recursion) a
 * directory as a prefix, unless it makes no key or is not after the token. */
static int dent_emit(struct lister *l, int fd, const char *dirkey, struct dent *d)
{
    char full[BACKEND_KEY_MAX + 2];
    bool file = d->kind == ENT_FILE;
    int len = snprintf(full, sizeof(full), "%s%s%s", dirkey, d->name, file ? "" : "/");
    if (len < 0 || (size_t)len >= sizeof(full) || backend_key_valid(full, (size_t)len, !file))
        return 0; /* no key */
    if (l->token && strcmp(full, l->token) <= 0)
        return 0;
    if (!file)
        return emit(l, full, true, NULL);
    if (!d->st_valid &&
        (fstatat(fd, d->name, &d->st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(d->st.st_mode)))
        return 0; /* removed or replaced since the directory was read */
    return emit(l, full, false, &d->st);
}

/* Walk directory fd (borrowed) with key prefix dirkey ("" or ending in '/'). */
static int walk(struct lister *l, int fd, const char *dirkey, const char *name_prefix)
{
    struct dent *v = NULL;
    size_t n = 0;
    int rc = read_dents(l, fd, dirkey, name_prefix, &v, &n);
    if (rc)
        return rc;
    /* Each entry gives at most one key here, or a subtree of keys (recursive): the page's
     * first ones are among the first (limit - n) entries, unless some give none (an empty
     * subtree, a name that is no key, a file gone meanwhile); then the rest is sorted too. */
    size_t sorted = sort_smallest(v, n, l->limit - l->n);
    for (size_t i = 0; i < n && l->n < l->limit && rc == 0; i++) {
        if (i == sorted)
            sorted = sort_smallest(v + i, n - i, n - i) + i;
        if (v[i].kind == ENT_FILE || !l->recursive) {
            rc = dent_emit(l, fd, dirkey, &v[i]);
            continue;
        }
        char full[BACKEND_KEY_MAX + 2];
        int len = snprintf(full, sizeof(full), "%s%s/", dirkey, v[i].name);
        if (len < 0 || (size_t)len >= sizeof(full) ||
            backend_key_valid(full, (size_t)len, true) != 0)
            continue; /* no key */
        if (v[i].kind == ENT_LINKDIR)
            continue; /* not descended: a link may point at an ancestor */
        /* Every key below starts with full: skip the subtree when all of it is <= token. */
        if (l->token && strcmp(full, l->token) < 0 && strncmp(l->token, full, (size_t)len) != 0)
            continue;
        int sub = openat(fd, v[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue; /* replaced or removed meanwhile */
        rc = walk(l, sub, full, "");
        close(sub);
    }
    dents_free(v, n);
    return rc;
}

/* The sorted entries of one directory after a page's token, kept for the next page. */
struct cursor {
    char *dirkey, *name_prefix;
    char *token;      /* the next_token the last page handed out */
    struct dent *v;   /* sorted */
    size_t n, next;   /* v[next] is the first entry after token */
    struct stat dir;  /* the directory when it was read */
    uint64_t used_ns; /* monotonic time of the last put */
};

static void cursor_free(struct cursor *c)
{
    if (!c)
        return;
    dents_free(c->v, c->n);
    free(c->dirkey);
    free(c->name_prefix);
    free(c->token);
    free(c);
}

static bool same_dir(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Take the cursor the previous page of this listing left, if the directory is unchanged. */
static struct cursor *cursor_take(struct posix_backend *pb, const char *dirkey,
                                  const char *name_prefix, const char *token,
                                  const struct stat *dir)
{
    struct cursor *c = NULL;
    pthread_mutex_lock(&pb->cur_mu);
    for (size_t i = 0; i < POSIX_CURSORS && !c; i++) {
        struct cursor *x = pb->cur[i];
        if (x && strcmp(x->token, token) == 0 && strcmp(x->dirkey, dirkey) == 0 &&
            strcmp(x->name_prefix, name_prefix) == 0) {
            c = x;
            pb->cur[i] = NULL;
        }
    }
    pthread_mutex_unlock(&pb->cur_mu);
    if (c && !same_dir(&c->dir, dir)) {
        cursor_free(c); /* changed since: read it again */
        c = NULL;
    }
    return c;
}

/* Keep c for the next page, in a free slot or the least recently used one; cursors of
 * listings nobody continued for CURSOR_IDLE_NS are dropped (their memory: a directory's names). */
static void cursor_put(struct posix_backend *pb, struct cursor *c)
{
    struct cursor *old[POSIX_CURSORS];
    size_t nold = 0;
    uint64_t now = tier_now_mono_ns();
    c->used_ns = now;
    pthread_mutex_lock(&pb->cur_mu);
    size_t slot = 0;
    for (size_t i = 0; i < POSIX_CURSORS; i++) {
        if (pb->cur[i] && now - pb->cur[i]->used_ns > CURSOR_IDLE_NS) {
            old[nold++] = pb->cur[i];
            pb->cur[i] = NULL;
        }
        if (pb->cur[slot] && (!pb->cur[i] || pb->cur[i]->used_ns < pb->cur[slot]->used_ns))
            slot = i;
    }
    if (pb->cur[slot])
        old[nold++] = pb->cur[slot];
    pb->cur[slot] = c;
    pthread_mutex_unlock(&pb->cur_mu);
    for (size_t i = 0; i < nold; i++)
        cursor_free(old[i]);
}

/* May a directory read now be kept for the next page? Not when its entries changed within the
 * last second: a change later in the same clock tick would leave its mtime as it is. (Once the
 * mtime is older, any change of an entry sets it to now, and same_dir() sees that; a touch that
 * sets it back also moves the ctime.) */
static bool settled(const struct stat *dir)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return dir->st_mtim.tv_sec + 1 < now.tv_sec;
}

/* One page of a listing with a delimiter: the entries of directory fd after the token, from the
 * previous page's cursor or a fresh read (DESIGN). */
static int list_flat(struct posix_backend *pb, struct lister *l, int fd, const char *dirkey,
                     const char *name_prefix)
{
    struct stat ds;
    if (fstat(fd, &ds) != 0)
        return -errno;
    struct cursor *c = l->token ? cursor_take(pb, dirkey, name_prefix, l->token, &ds) : NULL;
    size_t sorted;
    bool keep = settled(&ds);
    if (c) {
        sorted = c->n;
    } else {
        c = calloc(1, sizeof(*c));
        if (!c)
            return -ENOMEM;
        int rc = read_dents(l, fd, dirkey, name_prefix, &c->v, &c->n);
        if (rc) {
            free(c);
            return rc;
        }
        c->dir = ds;
        /* kept: sorted whole once; else only what this page needs (as walk) */
        sorted = sort_smallest(c->v, c->n, keep ? c->n : l->limit - l->n);
    }
    int rc = 0;
    size_t extra = c->n; /* the entry that gave the key past max_keys: the next page's first */
    for (size_t i = c->next; i < c->n && l->n < l->limit && rc == 0; i++) {
        if (i == sorted)
            sorted = sort_smallest(c->v + i, c->n - i, c->n - i) + i;
        rc = dent_emit(l, fd, dirkey, &c->v[i]);
        if (rc == 0 && l->n == l->limit && extra == c->n)
            extra = i;
    }
    if (rc == 0 && extra < c->n && keep && l->limit >= 2) {
        c->next = extra;
        free(c->token);
        c->token = strdup(l->v[l->limit - 2].name); /* posix_list's next_token */
        if (!c->dirkey)
            c->dirkey = strdup(dirkey);
        if (!c->name_prefix)
            c->name_prefix = strdup(name_prefix);
        if (c->token && c->dirkey && c->name_prefix) {
            cursor_put(pb, c);
            return 0;
        }
    }
    cursor_free(c);
    return rc;
}

static int posix_list(struct backend *be, const char *prefix, const char *delimiter,
                      const char *token, size_t max_keys, struct backend_list_page *page)
{
    struct posix_backend *pb = to_pb(be);
    if (max_keys == 0 || max_keys > LIST_MAX_KEYS)
        max_keys = LIST_MAX_KEYS;
    struct lister l = {
        .pb = pb,
        .token = token && *token ? token : NULL,
        .limit = max_keys + 1, /* one more tells whether another page follows */
        .recursive = delimiter == NULL,
    };
    /* The prefix's directory part is walked; its last part filters names at that level. */
    char dirkey[BACKEND_KEY_MAX + 2];
    const char *slash = strrchr(prefix, '/');
    size_t dlen = slash ? (size_t)(slash - prefix) + 1 : 0;
    memcpy(dirkey, prefix, dlen);
    dirkey[dlen] = '\0';
    int rc = 0;
    if (dlen) {
        rc = check_reserved(dirkey);
        if (rc)
            return rc;
    }
    char dir[BACKEND_KEY_MAX + 2];
    if (dlen > 1) {
        memcpy(dir, prefix, dlen - 1);
        dir[dlen - 1] = '\0';
    } else {
        tier_strlcpy(dir, ".", sizeof(dir));
    }
    int fd = open_dir(pb, dir, false);
    if (fd == -ENOENT || fd == -ENOTDIR)
        return 0; /* nothing under this prefix: an empty page, as S3 answers */
    if (fd < 0)
        return fail(pb, fd, "list", prefix);
    rc = l.recursive ? walk(&l, fd, dirkey, prefix + dlen)
                     : list_flat(pb, &l, fd, dirkey, prefix + dlen);
    close(fd);
    if (rc == 0 && l.n > max_keys) {
        free(l.v[max_keys].name);
        l.n = max_keys;
        page->next_token = strdup(l.v[max_keys - 1].name);
        if (!page->next_token)
            rc = -ENOMEM;
    }
    if (rc) {
        for (size_t i = 0; i < l.n; i++)
            free(l.v[i].name);
        free(l.v);
        return fail(pb, rc, "list", prefix);
    }
    page->entries = l.v;
    page->n = l.n;
    return 0;
}

static void posix_destroy(struct backend *be)
{
    struct posix_backend *pb = to_pb(be);
    for (size_t i = 0; i < POSIX_CURSORS; i++)
        cursor_free(pb->cur[i]);
    pthread_mutex_destroy(&pb->cur_mu);
    close(pb->root_fd);
    free(pb->root);
    free(pb->base.name);
    free(pb);
}

static int posix_key_check(struct backend *be, const char *key)
{
    (void)be;
    return check_reserved(key);
}

static const struct backend_ops posix_ops = {
    .type = "posix",
    .stat = posix_stat,
    .read = posix_read,
    .list = posix_list,
    .put = posix_put,
    .put_new = posix_put_new,
    .mpu_create = posix_mpu_create,
    .mpu_put_part = posix_mpu_put_part,
    .mpu_complete = posix_mpu_complete,
    .mpu_abort = posix_mpu_abort,
    .mpu_list = posix_mpu_list,
    .key_check = posix_key_check,
    .del = posix_del,
    .rmdir = posix_rmdir,
    .destroy = posix_destroy,
};

int backend_posix_open(const struct posix_backend_config *cfg, struct backend **out)
{
    if (!cfg || !cfg->root || !*cfg->root) {
        tier_err_set("posix backend: no root directory configured");
        return -EINVAL;
    }
    struct posix_backend *pb = calloc(1, sizeof(*pb));
    if (!pb)
        return -ENOMEM;
    pb->root_fd = -1;
    int rc;
    pb->root = strdup(cfg->root);
    pb->base.name = strdup(cfg->name ? cfg->name : "posix");
    if (!pb->root || !pb->base.name) {
        rc = -ENOMEM;
        goto fail;
    }
    pb->root_fd = open(cfg->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pb->root_fd < 0) {
        rc = -errno;
        tier_err_set("posix backend '%s': cannot open root directory %s: %s", pb->base.name,
                     cfg->root, strerror(errno));
        goto fail;
    }
    /* openat2 needs Linux 5.6; say so instead of failing on the first key. */
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
    long probe = syscall(SYS_openat2, pb->root_fd, ".", &how, sizeof(how));
    if (probe < 0) {
        rc = -errno;
        tier_err_set("posix backend '%s': openat2() is unavailable (%s); Linux >= 5.6 is needed "
                     "to confine keys to %s",
                     pb->base.name, strerror(errno), cfg->root);
        goto fail;
    }
    close((int)probe);
    pthread_mutex_init(&pb->cur_mu, NULL);
    pb->base.ops = &posix_ops;
    *out = &pb->base;
    return 0;
fail:
    if (pb->root_fd >= 0)
        close(pb->root_fd);
    free(pb->root);
    free(pb->base.name);
    free(pb);
    return rc;
}
