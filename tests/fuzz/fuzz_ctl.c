/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_ctl.c - libFuzzer target for the write path of the mount's control files
 * (<mount>/.tierd/hints/NAME, src/fuse/fuse_ctl_hints.c): the real FUSE operations tfs_ops_ctl
 * installs (create, open, write, setattr, flush, fsync, read, release, unlink), called as the
 * kernel calls them, on a struct tierd_fuse made as tierfs_mount makes it minus the session and
 * the mount, over the control API's POSIX fixture (tests/lib/api_fixture.h) with the hint engine
 * and a dataset version v1 of /ns/a (its files are hints too: /.tierd/datasets/ns/a@v1/f.txt).
 * No FUSE session exists: this file defines the libfuse calls the operations make
 * (fuse_req_userdata, fuse_req_ctx, fuse_reply_*), which the linker takes before libfuse's, and
 * records each reply. An input is lines, run in order:
 *
 *   uid U                      later requests come from uid U (0 root, 4242 tenant infer's,
 *                              65534 an unmatched caller: tenant default), this process's pid
 *   create H NAME FLAGS        create(2) of .tierd/hints/NAME into slot H (0-3); FLAGS letters:
 *   open H NAME FLAGS          w O_WRONLY, r O_RDWR (neither: O_RDONLY), a O_APPEND, t O_TRUNC;
 *                              create of "-" is one in /.tierd itself
 *   write H OFF LEN            pwrite of the LEN bytes after this line's newline at OFF (an OFF
 *                              from 1 MiB up to the 32 MiB bound is taken modulo 1 MiB: each of
 *                              those would cost a scan of up to 32 MiB of hole at the close; at
 *                              and beyond the bound a write fails before it allocates)
 *   trunc H SIZE               ftruncate (setattr of the size with the handle)
 *   flush H | fsync H          close(2)'s flush, fsync(2)
 *   read H OFF SIZE            read of the status text
 *   release H                  the last close of the handle
 *   unlink NAME                unlink(2) of .tierd/hints/NAME
 *
 * At the end every open handle is flushed and released (as the kernel does when the process
 * exits), the nodes the kernel would hold are forgotten, and the sets are dropped.
 *
 * What must hold: every operation replies exactly once, with an errno the operation documents
 * (the DESIGN comment of fuse_ctl_hints.c); a write that succeeds reports all its bytes; an error
 * of a bound (EFBIG, ENOSPC) sticks: later writes, flushes and fsyncs of the handle fail (but
 * the close of a file unlinked meanwhile, which takes nothing, succeeds); a
 * flush or fsync that succeeds after a write leaves the set of the writer's tenant listed
 * (hints_list) unless the name was unlinked meanwhile; a read answers at most what was asked, and
 * at offset 0 a text that starts "name: NAME"; nothing leaks (the whole run under ASan).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_fixture.h"
#include "hints/hints.h"
#include "fuse/fuse_int.h"
#include "fuse/tierfs.h"
#include "tenant/tenant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libfuse keeps its request private; without a session this file's requests are these. */
struct fuse_req {
    struct tierd_fuse *fs;
    struct fuse_ctx ctx;
    int replies;
    int err; /* of fuse_reply_err; 0 for any other reply */
    size_t count;
    const char *buf;
    struct fuse_entry_param entry;
    struct fuse_file_info fi;
};

void *fuse_req_userdata(fuse_req_t req)
{
    return req->fs;
}

const struct fuse_ctx *fuse_req_ctx(fuse_req_t req)
{
    return &req->ctx;
}

int fuse_reply_err(fuse_req_t req, int err)
{
    req->replies++;
    req->err = err;
    return 0;
}

void fuse_reply_none(fuse_req_t req)
{
    req->replies++;
}

int fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
    req->replies++;
    req->entry = *e;
    return 0;
}

int fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
                      const struct fuse_file_info *fi)
{
    req->replies++;
    req->entry = *e;
    req->fi = *fi;
    return 0;
}

int fuse_reply_attr(fuse_req_t req, const struct stat *attr, double attr_timeout)
{
    (void)attr;
    (void)attr_timeout;
    req->replies++;
    return 0;
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
    req->replies++;
    req->fi = *fi;
    return 0;
}

int fuse_reply_write(fuse_req_t req, size_t count)
{
    req->replies++;
    req->count = count;
    return 0;
}

int fuse_reply_buf(fuse_req_t req, const char *buf, size_t size)
{
    req->replies++;
    req->buf = buf;
    req->count = size;
    if (size && !buf)
        abort();
    return 0;
}

#define NSLOTS 4
#define NNODES 64

struct slot {
    bool open;
    struct fuse_file_info fi;
    uint64_t ino;
    uint32_t tenant;
    char name[96];
    bool wrote;    /* a write succeeded since the open (or the last failed flush) */
    bool stuck;    /* a bound's error (EFBIG, ENOSPC) stuck to the handle */
    bool unlinked; /* the name of the handle's tenant was unlinked since the open */
};

static struct api_fixture fx;
static struct tierd_fuse *fs;
static struct fuse_lowlevel_ops ops;
static uint64_t hints_dir_ino, ctl_dir_ino;
static bool fx_open;

static void fail(const char *what, const char *detail, int err)
{
    fprintf(stderr, "fuzz_ctl: %s (%s, errno %d)\n", what, detail ? detail : "", err);
    abort();
}

static void fixture_close(void)
{
    if (!fx_open)
        return;
    tfs_node_forget(fs, hints_dir_ino, 1);
    tfs_node_forget(fs, ctl_dir_ino, 1);
    tierfs_free(fs);
    hints_free(fx.d.hints);
    fx.d.hints = NULL;
    api_fixture_close(&fx);
    fx_open = false;
}

/* What tierfs_mount sets up before the session (fuse_session.c), with the mount's own umask 0. */
static void fixture_open(void)
{
    if (api_fixture_open(&fx, "fuzz_ctl") != 0 || api_fixture_hints_new(&fx) != 0)
        abort();
    static const char commit[] = "POST /v1/datasets\n\n{\"path\": \"/ns/a\", \"name\": \"v1\"}";
    struct api_reply ar;
    api_fixture_request(&fx, commit, sizeof(commit) - 1, &ar);
    if (ar.status != 201)
        abort();
    api_reply_fini(&ar);
    fs = calloc(1, sizeof(*fs));
    if (!fs)
        abort();
    fs->ctx = tierfs_ctx_tierd(&fx.d);
    pthread_mutex_init(&fs->handles_mu, NULL);
    fs->handles.prev = fs->handles.next = &fs->handles;
    fs->max_dir_entries = (size_t)fs->ctx.max_dir_entries;
    if (tfs_ctl_init(fs) != 0 || !fs->ctl || tfs_table_init(fs) != 0)
        abort();
    /* the closer threads stopped: each flush, fsync and release is then served inline, as the
     * mount does while it goes away, so every operation has replied when its call returns */
    tfs_ctl_drain(fs);
    tfs_wb_init(fs);
    fs->mountpoint = strdup("/mnt/tier");
    memset(&ops, 0, sizeof(ops));
    tfs_ops_readonly(&ops);
    tfs_ops_ctl(fs, &ops);
    struct tfs_node *n = NULL;
    if (tfs_node_lookup(fs, TFS_CTL_DIR "/hints", &n) != 0)
        abort();
    hints_dir_ino = n->ino;
    tfs_node_put(fs, n);
    if (tfs_node_lookup(fs, TFS_CTL_DIR, &n) != 0)
        abort();
    ctl_dir_ino = n->ino;
    tfs_node_put(fs, n);
    fx_open = true;
    atexit(fixture_close);
}

static uid_t cur_uid;
static uint64_t lookups[NNODES]; /* inos the kernel would hold (one lookup each) */
static size_t nlookups;

static struct fuse_req req_new(void)
{
    return (struct fuse_req){
        .fs = fs, .ctx = {.uid = cur_uid, .gid = cur_uid, .pid = getpid()}, .err = -1};
}

static void replied_once(const struct fuse_req *r, const char *op)
{
    if (r->replies != 1)
        fail("an operation did not reply exactly once", op, r->replies);
}

/* Is r's errno one of allowed (0-terminated)? */
static void err_in(const struct fuse_req *r, const char *op, const int *allowed)
{
    for (const int *a = allowed; *a; a++)
        if (r->err == *a)
            return;
    fail("an errno the operation does not document", op, r->err);
}

static int flags_of(const char *f)
{
    int fl = strchr(f, 'r') ? O_RDWR : strchr(f, 'w') ? O_WRONLY : O_RDONLY;
    if (strchr(f, 'a'))
        fl |= O_APPEND;
    if (strchr(f, 't'))
        fl |= O_TRUNC;
    return fl;
}

static uint32_t tenant_now(void)
{
    return tenant_resolve(fx.d.tenants, getpid(), cur_uid, cur_uid).tenant;
}

static bool set_listed(uint32_t tenant, const char *name)
{
    static struct hints_set_stats st[HINTS_SETS_MAX];
    size_t n = hints_list(fx.d.hints, st, HINTS_SETS_MAX);
    for (size_t i = 0; i < n && i < HINTS_SETS_MAX; i++)
        if (st[i].tenant == tenant && strcmp(st[i].name, name) == 0)
            return true;
    return false;
}

static void do_open(struct slot *s, const char *name, const char *flags, bool create)
{
    struct fuse_req r = req_new();
    struct fuse_file_info fi = {.flags = flags_of(flags)};
    static const int allowed[] = {EINVAL, EPERM,        ENOENT, EROFS, EISDIR,
                                  ENOMEM, ENAMETOOLONG, ESTALE, 0};
    uint64_t ino = 0;
    if (create) {
        bool top = strcmp(name, "-") == 0;
        ops.create(&r, top ? ctl_dir_ino : hints_dir_ino, top ? "x" : name, 0644, &fi);
        ino = r.entry.ino;
    } else {
        char path[160];
        snprintf(path, sizeof(path), TFS_CTL_DIR "/hints/%s", name);
        struct tfs_node *n = NULL;
        if (nlookups == NNODES || tfs_node_lookup(fs, path, &n) != 0)
            return;
        ino = n->ino;
        lookups[nlookups++] = ino;
        tfs_node_put(fs, n);
        ops.open(&r, ino, &fi);
    }
    replied_once(&r, create ? "create" : "open");
    if (r.err != -1) {
        err_in(&r, create ? "create" : "open", allowed);
        return;
    }
    if (create) {
        if (nlookups == NNODES) {
            tfs_node_forget(fs, ino, 1);
        } else {
            lookups[nlookups++] = ino;
        }
    }
    if (s->open) { /* the slot's old handle is closed first */
        struct fuse_req rr = req_new();
        ops.release(&rr, s->ino, &s->fi);
    }
    *s = (struct slot){.open = true, .fi = r.fi, .ino = ino, .tenant = tenant_now()};
    snprintf(s->name, sizeof(s->name), "%s", name);
}

static void do_write(struct slot *s, uint64_t off, const char *buf, size_t len)
{
    if (off >= (1u << 20) && off < (32u << 20))
        off %= 1u << 20;
    struct fuse_req r = req_new();
    ops.write(&r, s->ino, buf, len, (off_t)(off & INT64_MAX), &s->fi);
    replied_once(&r, "write");
    if (r.err == -1) {
        if (r.count != len)
            fail("a write reported a short count", s->name, (int)r.count);
        if (s->stuck)
            fail("a write succeeded after a bound's error stuck to the handle", s->name, 0);
        s->wrote = s->wrote || len > 0;
        return;
    }
    /* EDQUOT: the tenant's share of the buffers of hint files being written */
    static const int allowed[] = {EINVAL, EFBIG, ENOSPC, EDQUOT, EBADF, ENOMEM, E2BIG, EEXIST, 0};
    err_in(&r, "write", allowed);
    if (r.err == EFBIG || r.err == ENOSPC || r.err == EDQUOT)
        s->stuck = true;
}

static void do_sync(struct slot *s, bool fsync)
{
    struct fuse_req r = req_new();
    if (fsync)
        ops.fsync(&r, s->ino, 0, &s->fi);
    else
        ops.flush(&r, s->ino, &s->fi);
    replied_once(&r, fsync ? "fsync" : "flush");
    /* EDQUOT: a tenant's cap of hint sets, entries or bytes (hints_submit), or a write's */
    static const int allowed[] = {EINVAL, E2BIG, ENOSPC, EDQUOT, EEXIST, ENOMEM, EFBIG, EBADF, 0};
    if (r.err != 0)
        err_in(&r, fsync ? "fsync" : "flush", allowed);
    /* (an unlinked file's close takes nothing and succeeds) */
    if (r.err == 0 && s->stuck && !s->unlinked && (s->fi.flags & O_ACCMODE) != O_RDONLY)
        fail("a flush succeeded after a bound's error stuck to the handle", s->name, 0);
    if (r.err == 0 && s->wrote && !s->unlinked && !set_listed(s->tenant, s->name))
        fail("a flush took the file and its set is not listed", s->name, 0);
}

static void do_release(struct slot *s)
{
    struct fuse_req r = req_new();
    ops.release(&r, s->ino, &s->fi);
    replied_once(&r, "release");
    if (r.err != 0)
        fail("release answered an error", s->name, r.err);
    s->open = false;
}

static void do_read(struct slot *s, uint64_t off, size_t size)
{
    struct fuse_req r = req_new();
    ops.read(&r, s->ino, size, (off_t)(off & INT64_MAX), &s->fi);
    replied_once(&r, "read");
    if (r.err != -1) {
        static const int allowed[] = {EBADF, ENOMEM, EINVAL, ENOENT, 0};
        err_in(&r, "read", allowed);
        return;
    }
    if (r.count > size)
        fail("a read answered more than asked", s->name, (int)r.count);
    if (off == 0 && size >= 6 + strlen(s->name) &&
        (r.count < 6 || memcmp(r.buf, "name: ", 6) != 0 ||
         memcmp(r.buf + 6, s->name, strlen(s->name)) != 0))
        fail("the status text does not start with the set's name", s->name, 0);
}

static void do_trunc(struct slot *s, uint64_t sz)
{
    struct fuse_req r = req_new();
    struct stat st = {.st_size = (off_t)(sz & INT64_MAX)};
    ops.setattr(&r, s->ino, &st, FUSE_SET_ATTR_SIZE, &s->fi);
    replied_once(&r, "setattr");
    if (r.err != -1) {
        static const int allowed[] = {EINVAL, EPERM, ENOENT, ESTALE, ENOMEM, 0};
        err_in(&r, "setattr", allowed);
    } else {
        s->wrote = false; /* cut to what was handed over already: nothing new to take */
    }
}

static void do_unlink(struct slot *slots, const char *name)
{
    struct fuse_req r = req_new();
    ops.unlink(&r, hints_dir_ino, name);
    replied_once(&r, "unlink");
    static const int allowed[] = {ENOENT, EPERM, EROFS, ENAMETOOLONG, ENOMEM, 0};
    if (r.err != 0)
        err_in(&r, "unlink", allowed);
    if (r.err == 0) {
        uint32_t t = tenant_now();
        for (int i = 0; i < NSLOTS; i++)
            if (slots[i].open && slots[i].tenant == t && strcmp(slots[i].name, name) == 0)
                slots[i].unlinked = true;
        if (set_listed(t, name))
            fail("an unlinked set is still listed", name, 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256 * 1024)
        return 0;
    if (!fx_open)
        fixture_open();
    struct slot slots[NSLOTS];
    memset(slots, 0, sizeof(slots));
    cur_uid = 4242;
    nlookups = 0;
    const char *p = (const char *)data, *end = p + size;
    int nops = 0;
    while (p < end && nops++ < 512) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = (size_t)((nl ? nl : end) - p);
        char line[160], name[96], flags[8] = "";
        unsigned h = 0;
        unsigned long long a = 0, b = 0;
        const char *next = nl ? nl + 1 : end;
        if (ll >= sizeof(line) || memchr(p, '\0', ll)) {
            p = next;
            continue;
        }
        memcpy(line, p, ll);
        line[ll] = '\0';
        struct slot *s = NULL;
        if (sscanf(line, "%*s %u", &h) == 1 && h < NSLOTS)
            s = &slots[h];
        if (sscanf(line, "uid %llu", &a) == 1) {
            cur_uid = (uid_t)a;
        } else if (s &&
                   (sscanf(line, "create %*u %95s %7s", name, flags) >= 1 ||
                    sscanf(line, "open %*u %95s %7s", name, flags) >= 1) &&
                   !strchr(name, '/')) { /* the kernel passes one component */
            do_open(s, name, flags, line[0] == 'c');
        } else if (s && s->open && sscanf(line, "write %*u %llu %llu", &a, &b) == 2) {
            size_t len = b < (size_t)(end - next) ? (size_t)b : (size_t)(end - next);
            do_write(s, a, next, len);
            next += len;
        } else if (s && s->open && sscanf(line, "trunc %*u %llu", &a) == 1) {
            do_trunc(s, a);
        } else if (s && s->open && strncmp(line, "flush", 5) == 0) {
            do_sync(s, false);
        } else if (s && s->open && strncmp(line, "fsync", 5) == 0) {
            do_sync(s, true);
        } else if (s && s->open && sscanf(line, "read %*u %llu %llu", &a, &b) == 2) {
            do_read(s, a, (size_t)(b % (1u << 20)));
        } else if (s && s->open && strncmp(line, "release", 7) == 0) {
            do_release(s);
        } else if (sscanf(line, "unlink %95s", name) == 1 && !strchr(name, '/')) {
            do_unlink(slots, name);
        }
        p = next;
    }
    /* the process exits: each descriptor is flushed, then released */
    for (int i = 0; i < NSLOTS; i++) {
        if (slots[i].open) {
            do_sync(&slots[i], false);
            do_release(&slots[i]);
        }
    }
    for (size_t i = 0; i < nlookups; i++)
        tfs_node_forget(fs, lookups[i], 1);
    struct hints_set_stats *st = calloc(HINTS_SETS_MAX, sizeof(*st));
    size_t n = st ? hints_list(fx.d.hints, st, HINTS_SETS_MAX) : 0;
    for (size_t i = 0; i < n && i < HINTS_SETS_MAX; i++)
        (void)hints_cancel(fx.d.hints, st[i].name, -1);
    free(st);
    return 0;
}
