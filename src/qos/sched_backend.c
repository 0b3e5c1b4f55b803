/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched_backend.c - the scheduler as a decorator of backend.h: sched_backend_wrap() returns a
 * backend whose every operation first passes sched_lane_enter() on the backend's own lane (its
 * in-flight cap, admission deadline and circuit breaker) and reports its result with
 * sched_lane_leave() (their _dir forms, with the way the call's data goes on the link: reads
 * down, puts and multipart parts up); a read of another class than inference may go out in parts
 * while inference has demand (read_parts). tierd installs one around each configured backend, so
 * stat and list from the FUSE layer and the API pass the scheduling point as reads and uploads do.
 * It also installs an attempt hook on the inner backend (backend_set_attempt_hook), so the lane's
 * breaker counts the inner backend's failed retries and stops them once open.
 *
 * The wrapper has its own copy of the inner backend's ops table (same type string, same optional
 * ops), so messages and backend_mpu_list() behave as for the inner backend. Keys arrive validated
 * by the dispatchers of backend.c and go straight to the inner backend's ops.
 *
 * Immutable after creation; thread-safety is sched.c's and the inner backend's.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "qos/sched.h"
#include "tiers/backend.h"

struct sched_be {
    struct backend base;
    struct backend_ops ops;
    struct backend *inner; /* owned */
    struct sched *s;
    struct sched_lane *lane;                  /* owned by s */
    _Atomic uint64_t calls[SCHED_BE_NOPS];    /* admitted calls by operation */
    _Atomic uint64_t notfound[SCHED_BE_NOPS]; /* of those, answered -ENOENT */
};

static struct sched_be *W(struct backend *be)
{
    return (struct sched_be *)be;
}

/* Which way op's data goes on the link (sched.h yield_inflight): reads down, puts and parts up;
 * the rest move little. */
static enum sched_dir dir_of(enum sched_be_op op)
{
    switch (op) {
    case SCHED_BE_READ:
        return SCHED_DIR_DOWN;
    case SCHED_BE_PUT:
    case SCHED_BE_MPU_PART:
        return SCHED_DIR_UP;
    default:
        return SCHED_DIR_NONE;
    }
}

/* part: a later part of a read in parts (read_parts), which costs its bytes only. */
static int enter_as(struct sched_be *w, enum sched_be_op op, size_t bytes, bool part, uint64_t *t0)
{
    int rc = part ? sched_lane_enter_part(w->s, w->lane, NULL, bytes, dir_of(op))
                  : sched_lane_enter_dir(w->s, w->lane, NULL, bytes, dir_of(op));
    *t0 = tier_now_mono_ns();
    if (rc == 0)
        atomic_fetch_add_explicit(&w->calls[op], 1, memory_order_relaxed);
    return rc;
}

static int enter(struct sched_be *w, enum sched_be_op op, size_t bytes, uint64_t *t0)
{
    return enter_as(w, op, bytes, false, t0);
}

static void leave(struct sched_be *w, enum sched_be_op op, size_t bytes, long result, uint64_t t0)
{
    if (result == -ENOENT)
        atomic_fetch_add_explicit(&w->notfound[op], 1, memory_order_relaxed);
    sched_lane_leave_dir(w->s, w->lane, NULL, bytes, result, tier_now_mono_ns() - t0, dir_of(op));
}

static int w_stat(struct backend *be, const char *key, struct backend_stat *st)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_STAT, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->stat(w->inner, key, st);
    leave(w, SCHED_BE_STAT, 0, rc, t0);
    return rc;
}

/* One ranged read of the inner backend: of version_id when not NULL, else of the current
 * object. */
static ssize_t inner_read(struct sched_be *w, const char *key, const char *version_id, uint64_t off,
                          void *buf, size_t len, const char *if_match, struct backend_stat *st)
{
    if (version_id)
        return w->inner->ops->read_version(w->inner, key, version_id, off, buf, len, if_match, st);
    return w->inner->ops->read(w->inner, key, off, buf, len, if_match, st);
}

/* A read admitted and sent as one call, or, when the lane says so (sched_lane_read_part: another
 * class's read while inference has demand), as ranged reads of the lane's part size one after
 * another, each admitted on its own (so an inference call is granted between two parts, and at
 * most one part of it queues ahead of an inference response on the link), the first at the full
 * op cost and the others at their bytes only. The first part fixes the version (its ETag, or the
 * caller's if_match): every later part must match it, so a read never mixes two versions (an
 * object replaced between two parts is -ESTALE, as a read pinned to a version gets). The caller
 * sees one read: the same bytes, the first part's stat, a short count only at the end of the
 * object (a short part ends it), and any part's error as the read's error (nothing of the read
 * is kept; the caller retries it as it retries any failed read). */
static ssize_t read_parts(struct sched_be *w, const char *key, const char *version_id, uint64_t off,
                          void *buf, size_t len, const char *if_match, struct backend_stat *st)
{
    size_t part = sched_lane_read_part(w->s, w->lane, NULL, len);
    if (part >= len) {
        uint64_t t0;
        int rc = enter(w, SCHED_BE_READ, len, &t0);
        if (rc)
            return rc;
        ssize_t n = inner_read(w, key, version_id, off, buf, len, if_match, st);
        leave(w, SCHED_BE_READ, n > 0 ? (size_t)n : 0, (long)n, t0);
        return n;
    }
    struct backend_stat first;
    memset(&first, 0, sizeof(first));
    const char *match = if_match;
    size_t done = 0;
    while (done < len) {
        size_t want = len - done < part ? len - done : part;
        struct backend_stat pst;
        uint64_t t0;
        int rc = enter_as(w, SCHED_BE_READ, want, done > 0, &t0);
        if (rc)
            return rc;
        ssize_t n =
            inner_read(w, key, version_id, off + done, (char *)buf + done, want, match, &pst);
        leave(w, SCHED_BE_READ, n > 0 ? (size_t)n : 0, (long)n, t0);
        if (n < 0)
            return n;
        if (done == 0) {
            first = pst;
            if (!match || !*match)
                match = first.etag;
        }
        done += (size_t)n;
        if ((size_t)n < want)
            break; /* the end of the object */
    }
    if (st)
        *st = first;
    return (ssize_t)done;
}

static ssize_t w_read(struct backend *be, const char *key, uint64_t off, void *buf, size_t len,
                      const char *if_match, struct backend_stat *st)
{
    return read_parts(W(be), key, NULL, off, buf, len, if_match, st);
}

static int w_list(struct backend *be, const char *prefix, const char *delimiter, const char *token,
                  size_t max_keys, struct backend_list_page *page)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_LIST, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->list(w->inner, prefix, delimiter, token, max_keys, page);
    leave(w, SCHED_BE_LIST, 0, rc, t0);
    return rc;
}

static int w_versioning(struct backend *be, bool *keeps)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_STAT, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->versioning(w->inner, keeps);
    leave(w, SCHED_BE_STAT, 0, rc, t0);
    return rc;
}

static int w_list_versions(struct backend *be, const char *prefix, const char *token,
                           size_t max_keys, struct backend_list_page *page)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_LIST, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->list_versions(w->inner, prefix, token, max_keys, page);
    leave(w, SCHED_BE_LIST, 0, rc, t0);
    return rc;
}

static ssize_t w_read_version(struct backend *be, const char *key, const char *version_id,
                              uint64_t off, void *buf, size_t len, const char *if_match,
                              struct backend_stat *st)
{
    return read_parts(W(be), key, version_id, off, buf, len, if_match, st);
}

static int w_put(struct backend *be, const char *key, const void *buf, size_t len, char *etag_out)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_PUT, len, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->put(w->inner, key, buf, len, etag_out);
    leave(w, SCHED_BE_PUT, len, rc, t0);
    return rc;
}

static int w_put_new(struct backend *be, const char *key, const void *buf, size_t len,
                     char *etag_out)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_PUT, len, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->put_new(w->inner, key, buf, len, etag_out);
    /* -EEXIST is an answer (the key was taken), not a failure of the backend */
    leave(w, SCHED_BE_PUT, len, rc == -EEXIST ? 0 : rc, t0);
    return rc;
}

static int w_mpu_create(struct backend *be, const char *key, char **upload_id)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_MPU_CREATE, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->mpu_create(w->inner, key, upload_id);
    leave(w, SCHED_BE_MPU_CREATE, 0, rc, t0);
    return rc;
}

static int w_mpu_put_part(struct backend *be, const char *key, const char *upload_id, int part_no,
                          const void *buf, size_t len, char *etag_out)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_MPU_PART, len, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->mpu_put_part(w->inner, key, upload_id, part_no, buf, len, etag_out);
    leave(w, SCHED_BE_MPU_PART, len, rc, t0);
    return rc;
}

static int w_mpu_complete(struct backend *be, const char *key, const char *upload_id,
                          const struct backend_part *parts, size_t nparts, char *etag_out)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_MPU_COMPLETE, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->mpu_complete(w->inner, key, upload_id, parts, nparts, etag_out);
    leave(w, SCHED_BE_MPU_COMPLETE, 0, rc, t0);
    return rc;
}

static int w_mpu_abort(struct backend *be, const char *key, const char *upload_id)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_MPU_ABORT, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->mpu_abort(w->inner, key, upload_id);
    leave(w, SCHED_BE_MPU_ABORT, 0, rc, t0);
    return rc;
}

static int w_key_check(struct backend *be, const char *key)
{
    return W(be)->inner->ops->key_check(W(be)->inner, key);
}

static int w_mpu_list(struct backend *be, const char *key, struct backend_mpu **out, size_t *n)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_MPU_LIST, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->mpu_list(w->inner, key, out, n);
    leave(w, SCHED_BE_MPU_LIST, 0, rc, t0);
    return rc;
}

static int w_del(struct backend *be, const char *key)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_DEL, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->del(w->inner, key);
    leave(w, SCHED_BE_DEL, 0, rc, t0);
    return rc;
}

static int w_rmdir(struct backend *be, const char *dirkey)
{
    struct sched_be *w = W(be);
    uint64_t t0;
    int rc = enter(w, SCHED_BE_DEL, 0, &t0);
    if (rc)
        return rc;
    rc = w->inner->ops->rmdir(w->inner, dirkey);
    leave(w, SCHED_BE_DEL, 0, rc, t0);
    return rc;
}

static bool on_attempt_failed(void *ud, int err, bool answered)
{
    struct sched_be *w = ud;
    return sched_lane_attempt_failed(w->s, w->lane, err, answered);
}

static void w_destroy(struct backend *be)
{
    struct sched_be *w = W(be);
    backend_free(w->inner);
    free(w->base.name);
    free(w);
}

int sched_backend_wrap(struct sched *s, struct backend *inner,
                       const struct sched_backend_config *cfg, struct backend **out)
{
    struct sched_be *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->base.name = strdup(inner->name ? inner->name : "");
    if (!w->base.name) {
        free(w);
        return -ENOMEM;
    }
    int rc = sched_lane_new(s, inner->name, cfg, &w->lane);
    if (rc) {
        free(w->base.name);
        free(w);
        return rc;
    }
    w->ops = (struct backend_ops){
        .type = inner->ops->type,
        .stat = w_stat,
        .read = w_read,
        .list = w_list,
        .put = w_put,
        .put_new = inner->ops->put_new ? w_put_new : NULL,
        .mpu_create = w_mpu_create,
        .mpu_put_part = w_mpu_put_part,
        .mpu_complete = w_mpu_complete,
        .mpu_abort = w_mpu_abort,
        .del = w_del,
        .destroy = w_destroy,
        .mpu_list = inner->ops->mpu_list ? w_mpu_list : NULL,
        /* no I/O: the inner backend's own answer, not admitted through the lane */
        .key_check = inner->ops->key_check ? w_key_check : NULL,
        .max_parts = inner->ops->max_parts,
        .versioning = inner->ops->versioning ? w_versioning : NULL,
        .list_versions = inner->ops->list_versions ? w_list_versions : NULL,
        .read_version = inner->ops->read_version ? w_read_version : NULL,
        .rmdir = inner->ops->rmdir ? w_rmdir : NULL,
    };
    w->base.ops = &w->ops;
    w->inner = inner;
    w->s = s;
    struct backend_attempt_hook hook = {.failed = on_attempt_failed, .ud = w};
    backend_set_attempt_hook(inner, &hook);
    *out = &w->base;
    return 0;
}

struct sched_lane *sched_backend_lane(struct sched *s, struct backend *be)
{
    if (!be || be->ops->stat != w_stat || W(be)->s != s)
        return NULL;
    return W(be)->lane;
}

int sched_backend_calls_get(struct sched *s, struct backend *be, uint64_t out[SCHED_BE_NOPS],
                            uint64_t notfound[SCHED_BE_NOPS])
{
    if (!sched_backend_lane(s, be))
        return -EINVAL;
    struct sched_be *w = W(be);
    for (int i = 0; i < SCHED_BE_NOPS; i++) {
        out[i] = atomic_load_explicit(&w->calls[i], memory_order_relaxed);
        if (notfound)
            notfound[i] = atomic_load_explicit(&w->notfound[i], memory_order_relaxed);
    }
    return 0;
}

const char *sched_be_op_name(enum sched_be_op op)
{
    static const char *const names[SCHED_BE_NOPS] = {
        "stat",     "read",         "list",      "put",      "mpu_create",
        "mpu_part", "mpu_complete", "mpu_abort", "mpu_list", "delete"};
    return (unsigned)op < SCHED_BE_NOPS ? names[op] : "unknown";
}
