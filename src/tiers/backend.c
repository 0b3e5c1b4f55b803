/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.c - the backend-independent half of backend.h: key validation, the dispatchers that
 * validate before calling a backend, the attempt observer, and the parallel ranged read built on
 * plain reads.
 *
 * Stateless apart from the short-lived worker threads of backend_read_parallel(), which share
 * only an atomic chunk cursor and write disjoint parts of the caller's buffer.
 */
#include "tiers/backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/strutil.h"

int backend_key_valid(const char *key, size_t len, bool allow_dir)
{
    if (!key || len == 0) {
        tier_err_set("empty key");
        return -EINVAL;
    }
    if (len > BACKEND_KEY_MAX) {
        tier_err_set("key of %zu bytes is longer than the %d allowed", len, BACKEND_KEY_MAX);
        return -ENAMETOOLONG;
    }
    if (memchr(key, '\0', len)) {
        tier_err_set("key contains a NUL byte");
        return -EINVAL;
    }
    if (key[0] == '/') {
        tier_err_set("key '%.*s' is absolute; keys are relative to the backend root", (int)len,
                     key);
        return -EINVAL;
    }
    if (key[len - 1] == '/' && !allow_dir) {
        tier_err_set("key '%.*s' ends in '/'", (int)len, key);
        return -EINVAL;
    }
    size_t seg_start = 0;
    size_t end = key[len - 1] == '/' ? len - 1 : len;
    for (size_t i = 0; i <= end; i++) {
        if (i < end && (unsigned char)key[i] < 0x20) {
            tier_err_set("key contains control character 0x%02x", (unsigned char)key[i]);
            return -EINVAL;
        }
        if (i < end && (unsigned char)key[i] == 0x7f) {
            tier_err_set("key contains control character 0x7f");
            return -EINVAL;
        }
        if (i == end || key[i] == '/') {
            size_t seg = i - seg_start;
            const char *s = key + seg_start;
            if (seg == 0) {
                tier_err_set("key '%.*s' has an empty path segment", (int)len, key);
                return -EINVAL;
            }
            if ((seg == 1 && s[0] == '.') || (seg == 2 && s[0] == '.' && s[1] == '.')) {
                tier_err_set("key '%.*s' has a '.' or '..' segment", (int)len, key);
                return -EINVAL;
            }
            if (seg > BACKEND_SEGMENT_MAX) {
                tier_err_set("key has a segment of %zu bytes (max %d)", seg, BACKEND_SEGMENT_MAX);
                return -ENAMETOOLONG;
            }
            seg_start = i + 1;
        }
    }
    return 0;
}

static int check_key(const char *key, bool allow_dir)
{
    return backend_key_valid(key, key ? strlen(key) : 0, allow_dir);
}

/* A listing prefix may end anywhere, even mid-segment ("data/shard-0", "logs/."): its complete
 * segments (up to the last '/') must form a valid directory key, while the unfinished last one
 * only filters names and is never resolved as a path, so it may be "." or "..". */
static int check_prefix(const char *prefix)
{
    size_t len = strlen(prefix);
    const char *slash = strrchr(prefix, '/');
    size_t dlen = slash ? (size_t)(slash - prefix) + 1 : 0;
    if (len > BACKEND_KEY_MAX)
        return backend_key_valid(prefix, len, true); /* reports the length */
    if (dlen) {
        int rc = backend_key_valid(prefix, dlen, true);
        if (rc)
            return rc;
    }
    const char *tail = prefix + dlen;
    size_t tlen = len - dlen;
    if (tlen > BACKEND_SEGMENT_MAX) {
        tier_err_set("listing prefix has a segment of %zu bytes (max %d)", tlen,
                     BACKEND_SEGMENT_MAX);
        return -ENAMETOOLONG;
    }
    for (size_t i = 0; i < tlen; i++) {
        unsigned char c = (unsigned char)tail[i];
        if (c < 0x20 || c == 0x7f) {
            tier_err_set("listing prefix contains control character 0x%02x", c);
            return -EINVAL;
        }
    }
    return 0;
}

/* Make io this thread's current ioctx for one backend call, so a wrapper behind the ops table
 * (the scheduler's, qos/sched_backend.c) sees whose call it is; NULL leaves the caller's. */
static _Atomic uint64_t calls_without_io;

uint64_t backend_calls_without_ioctx(void)
{
    return atomic_load_explicit(&calls_without_io, memory_order_relaxed);
}

static struct tier_ioctx_saved io_enter(const struct tier_ioctx *io)
{
    tier_backend_call_note();
    if (!io)
        atomic_fetch_add_explicit(&calls_without_io, 1, memory_order_relaxed);
    if (io)
        return tier_ioctx_swap(io);
    return (struct tier_ioctx_saved){0};
}

static void io_leave(const struct tier_ioctx *io, struct tier_ioctx_saved saved)
{
    if (io)
        tier_ioctx_restore(saved);
}

int backend_stat(struct backend *be, const struct tier_ioctx *io, const char *key,
                 struct backend_stat *st)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->stat(be, key, st);
    io_leave(io, sv);
    return r;
}

ssize_t backend_read(struct backend *be, const struct tier_ioctx *io, const char *key, uint64_t off,
                     void *buf, size_t len, const char *if_match, struct backend_stat *st)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    struct tier_ioctx_saved sv = io_enter(io);
    ssize_t r = be->ops->read(be, key, off, buf, len, if_match, st);
    io_leave(io, sv);
    return r;
}

int backend_list(struct backend *be, const struct tier_ioctx *io, const char *prefix,
                 const char *delimiter, const char *token, size_t max_keys,
                 struct backend_list_page *page)
{
    memset(page, 0, sizeof(*page));
    if (prefix && *prefix) {
        int rc = check_prefix(prefix);
        if (rc)
            return rc;
    }
    if (delimiter && strcmp(delimiter, "/") != 0) {
        tier_err_set("only '/' is supported as a listing delimiter");
        return -EINVAL;
    }
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->list(be, prefix ? prefix : "", delimiter, token, max_keys, page);
    io_leave(io, sv);
    return r;
}

int backend_put(struct backend *be, const struct tier_ioctx *io, const char *key, const void *buf,
                size_t len, char *etag_out)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->put(be, key, buf, len, etag_out);
    io_leave(io, sv);
    return r;
}

int backend_put_new(struct backend *be, const struct tier_ioctx *io, const char *key,
                    const void *buf, size_t len, char *etag_out)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    if (!be->ops->put_new) {
        tier_err_set("backend %s (%s) cannot create an object only if it is absent", be->name,
                     be->ops->type);
        return -ENOTSUP;
    }
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->put_new(be, key, buf, len, etag_out);
    io_leave(io, sv);
    return r;
}

int backend_mpu_create(struct backend *be, const struct tier_ioctx *io, const char *key,
                       char **upload_id)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->mpu_create(be, key, upload_id);
    io_leave(io, sv);
    return r;
}

int backend_mpu_put_part(struct backend *be, const struct tier_ioctx *io, const char *key,
                         const char *upload_id, int part_no, const void *buf, size_t len,
                         char *etag_out)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    if (part_no < 1 || part_no > 10000) {
        tier_err_set("multipart part number %d is outside 1..10000", part_no);
        return -EINVAL;
    }
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->mpu_put_part(be, key, upload_id, part_no, buf, len, etag_out);
    io_leave(io, sv);
    return r;
}

int backend_mpu_complete(struct backend *be, const struct tier_ioctx *io, const char *key,
                         const char *upload_id, const struct backend_part *parts, size_t nparts,
                         char *etag_out)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    if (nparts == 0) {
        tier_err_set("multipart upload of '%s' completed with no parts", key);
        return -EINVAL;
    }
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->mpu_complete(be, key, upload_id, parts, nparts, etag_out);
    io_leave(io, sv);
    return r;
}

int backend_mpu_abort(struct backend *be, const struct tier_ioctx *io, const char *key,
                      const char *upload_id)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->mpu_abort(be, key, upload_id);
    io_leave(io, sv);
    return r;
}

int backend_del(struct backend *be, const struct tier_ioctx *io, const char *key)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->del(be, key);
    io_leave(io, sv);
    return r;
}

int backend_rmdir(struct backend *be, const struct tier_ioctx *io, const char *dirkey)
{
    size_t n = dirkey ? strlen(dirkey) : 0;
    int rc = n > 1 && dirkey[n - 1] == '/' ? check_key(dirkey, true) : -EINVAL;
    if (rc)
        return rc;
    if (!be->ops->rmdir)
        return 0;
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->rmdir(be, dirkey);
    io_leave(io, sv);
    return r;
}

bool backend_version_id_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > BACKEND_VERSION_ID_MAX)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e)
            return false;
    return true;
}

int backend_versioning(struct backend *be, const struct tier_ioctx *io, bool *keeps)
{
    *keeps = false;
    if (!be->ops->versioning)
        return -ENOTSUP;
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->versioning(be, keeps);
    io_leave(io, sv);
    return r;
}

int backend_list_versions(struct backend *be, const struct tier_ioctx *io, const char *prefix,
                          const char *token, size_t max_keys, struct backend_list_page *page)
{
    memset(page, 0, sizeof(*page));
    if (!be->ops->list_versions) {
        tier_err_set("backend %s keeps no object versions", be->name);
        return -ENOTSUP;
    }
    if (prefix && *prefix) {
        int rc = check_prefix(prefix);
        if (rc)
            return rc;
    }
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->list_versions(be, prefix ? prefix : "", token, max_keys, page);
    io_leave(io, sv);
    return r;
}

ssize_t backend_read_version(struct backend *be, const struct tier_ioctx *io, const char *key,
                             const char *version_id, uint64_t off, void *buf, size_t len,
                             const char *if_match, struct backend_stat *st)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    size_t vl = version_id ? strlen(version_id) : 0;
    if (vl == 0 || vl > BACKEND_VERSION_ID_MAX) {
        tier_err_set("'%.40s': not a version id", version_id ? version_id : "");
        return -EINVAL;
    }
    if (!be->ops->read_version) {
        tier_err_set("backend %s keeps no object versions", be->name);
        return -ENOTSUP;
    }
    struct tier_ioctx_saved sv = io_enter(io);
    ssize_t r = be->ops->read_version(be, key, version_id, off, buf, len, if_match, st);
    io_leave(io, sv);
    return r;
}

int backend_mpu_list(struct backend *be, const struct tier_ioctx *io, const char *key,
                     struct backend_mpu **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = check_key(key, false);
    if (rc)
        return rc;
    if (!be->ops->mpu_list) {
        tier_err_set("backend %s (%s) cannot list multipart uploads", be->name, be->ops->type);
        return -ENOTSUP;
    }
    struct tier_ioctx_saved sv = io_enter(io);
    int r = be->ops->mpu_list(be, key, out, n);
    io_leave(io, sv);
    return r;
}

int backend_key_check(struct backend *be, const char *key)
{
    int rc = check_key(key, false);
    if (!rc && be->ops->key_check)
        rc = be->ops->key_check(be, key);
    return rc;
}

int backend_max_parts(const struct backend *be)
{
    return be->ops->max_parts > 0 ? be->ops->max_parts : BACKEND_MAX_PARTS;
}

void backend_mpu_list_free(struct backend_mpu *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].upload_id);
    free(v);
}

void backend_set_attempt_hook(struct backend *be, const struct backend_attempt_hook *hook)
{
    if (hook)
        be->attempt_hook = *hook;
    else
        memset(&be->attempt_hook, 0, sizeof(be->attempt_hook));
}

bool backend_attempt_failed(struct backend *be, int err, bool answered)
{
    return !be->attempt_hook.failed || be->attempt_hook.failed(be->attempt_hook.ud, err, answered);
}

void backend_free(struct backend *be)
{
    if (be)
        be->ops->destroy(be);
}

void backend_list_page_fini(struct backend_list_page *page)
{
    if (!page)
        return;
    for (size_t i = 0; i < page->n; i++) {
        free(page->entries[i].name);
        free(page->entries[i].version_id);
    }
    free(page->entries);
    free(page->next_token);
    memset(page, 0, sizeof(*page));
}

/* ---- parallel ranged read ------------------------------------------------------------------ */

struct par_read {
    struct backend *be;
    const char *key;
    uint64_t off;
    char *buf;
    size_t len;
    size_t chunk;
    size_t nchunks;
    const char *etag;     /* version every chunk must match */
    struct tier_ioctx io; /* whose read: every worker thread makes it its current ioctx */
    bool has_io;
    atomic_size_t next; /* next chunk index to claim */
    atomic_size_t got;  /* bytes read in total */
    atomic_int err;     /* first error, or 0 */
    char msg[256];      /* tier_err_msg() of the worker that set err (written once, by it) */
};

static void *par_worker(void *arg)
{
    struct par_read *pr = arg;
    /* not io_enter: a worker is part of its caller's one call */
    struct tier_ioctx_saved sv =
        pr->has_io ? tier_ioctx_swap(&pr->io) : (struct tier_ioctx_saved){0};
    for (;;) {
        if (atomic_load(&pr->err))
            break;
        size_t i = atomic_fetch_add(&pr->next, 1);
        if (i >= pr->nchunks)
            break;
        size_t coff = i * pr->chunk;
        size_t clen = pr->len - coff < pr->chunk ? pr->len - coff : pr->chunk;
        ssize_t n = pr->be->ops->read(pr->be, pr->key, pr->off + coff, pr->buf + coff, clen,
                                      pr->etag, NULL);
        if (n < 0) {
            /* The message lives in the worker's thread-local slot: hand it to the caller. */
            char msg[sizeof(pr->msg)];
            tier_strlcpy(msg, tier_err_msg(), sizeof(msg));
            int zero = 0;
            if (atomic_compare_exchange_strong(&pr->err, &zero, (int)n))
                memcpy(pr->msg, msg, sizeof(msg));
            break;
        }
        atomic_fetch_add(&pr->got, (size_t)n);
    }
    if (pr->has_io)
        tier_ioctx_restore(sv);
    return NULL;
}

ssize_t backend_read_parallel(struct backend *be, const struct tier_ioctx *io, const char *key,
                              uint64_t off, void *buf, size_t len, size_t chunk_bytes, int nthreads,
                              struct backend_stat *st)
{
    int rc = check_key(key, false);
    if (rc)
        return rc;
    if (chunk_bytes == 0 || nthreads < 1) {
        tier_err_set("parallel read of '%s': chunk size and thread count must be positive", key);
        return -EINVAL;
    }
    /* The first chunk is read here and fixes the version; the rest must match it. */
    struct backend_stat first;
    size_t first_len = len < chunk_bytes ? len : chunk_bytes;
    struct tier_ioctx_saved sv = io_enter(io);
    ssize_t n = be->ops->read(be, key, off, buf, first_len, NULL, &first);
    io_leave(io, sv);
    if (n < 0)
        return n;
    if ((size_t)n < first_len || len == first_len) {
        if (st)
            *st = first;
        return n;
    }
    /* Do not read past the end of the object. */
    size_t want = len;
    if (first.size_bytes > off && first.size_bytes - off < want)
        want = (size_t)(first.size_bytes - off);

    struct par_read pr = {
        .be = be,
        .key = key,
        .off = off + first_len,
        .buf = (char *)buf + first_len,
        .len = want - first_len,
        .chunk = chunk_bytes,
        .etag = first.etag,
    };
    /* The calling thread's ioctx when the caller passed none, so the chunks are admitted as the
     * first one was. */
    const struct tier_ioctx *eff = io ? io : tier_ioctx_current();
    if (eff) {
        pr.io = *eff;
        pr.has_io = true;
    }
    pr.nchunks = (pr.len + chunk_bytes - 1) / chunk_bytes;
    atomic_init(&pr.next, 0);
    atomic_init(&pr.got, 0);
    atomic_init(&pr.err, 0);

    int nt = nthreads > (int)pr.nchunks ? (int)pr.nchunks : nthreads;
    pthread_t tids[64];
    if (nt > 64)
        nt = 64;
    int started = 0;
    for (int i = 1; i < nt; i++) {
        if (pthread_create(&tids[started], NULL, par_worker, &pr) != 0)
            break;
        started++;
    }
    par_worker(&pr); /* the calling thread works too */
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    int err = atomic_load(&pr.err);
    if (err) {
        /* Joined: the worker that set err finished writing msg before exiting. */
        tier_err_set("%s", pr.msg);
        return err;
    }
    if (st)
        *st = first;
    return (ssize_t)(first_len + atomic_load(&pr.got));
}
