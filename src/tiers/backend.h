/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.h - the one interface every tier backend implements (POSIX directory, S3, ...).
 *
 * Callers (cache, stager, write-back uploader, daemon) hold a `struct backend *` and never know
 * which kind it is. All functions return 0 / a byte count, or a negative errno; on failure a
 * sentence for the user is left in tier_err_msg() (common/err.h) of the calling thread, e.g. the
 * S3 error code and message.
 *
 * Concurrency: every operation is thread-safe and may be called from many threads at once; each
 * call is one blocking request. Concurrency comes from the caller's threads (the S3 backend keeps
 * a pool of curl easy handles sharing one connection/DNS/TLS cache, so N threads = N requests in
 * flight over reused connections). backend_read_parallel() splits one large ranged read over
 * several threads.
 *
 * Keys are object keys relative to the backend root: "a/b/c.bin". They are validated by
 * backend_key_valid() before any use; no key is ever turned into a path outside the root.
 *
 * Versions: every stat and read reports the object's version tag (S3 ETag, or for POSIX a tag
 * built from inode, size and mtime). A read can demand a version (if_match) and fails with
 * -ESTALE when the object changed, so callers never mix blocks of two versions.
 */
#ifndef TIER_TIERS_BACKEND_H
#define TIER_TIERS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/ioctx.h"

#define BACKEND_ETAG_MAX 96     /* bytes including NUL */
#define BACKEND_KEY_MAX 1024    /* bytes excluding NUL, as S3 */
#define BACKEND_SEGMENT_MAX 255 /* one path segment, as NAME_MAX */

struct backend;

struct backend_stat {
    uint64_t size_bytes;
    int64_t mtime_ns;            /* wall clock, ns since the epoch */
    char etag[BACKEND_ETAG_MAX]; /* version tag; never empty for an object */
    bool is_dir;                 /* a "directory" (POSIX dir, or S3 common prefix) */
};

struct backend_entry {
    char *name;     /* full key (or prefix ending in the delimiter); owned */
    bool is_prefix; /* a common prefix ("directory"), not an object */
    uint64_t size_bytes;
    int64_t mtime_ns;
    char etag[BACKEND_ETAG_MAX];
    char *version_id; /* list_versions only: the object's version id (owned); else NULL */
};

#define BACKEND_VERSION_ID_MAX 1024 /* bytes excluding NUL, as S3 */
/* A version id tierd will send back in a query and keep in a manifest: 1 to
 * BACKEND_VERSION_ID_MAX printable ASCII characters, no blank. */
bool backend_version_id_valid(const char *s);

struct backend_list_page {
    struct backend_entry *entries; /* owned; free with backend_list_page_fini() */
    size_t n;
    char *next_token; /* NULL when this was the last page; owned */
};

struct backend_part {
    int number; /* 1..10000 */
    char etag[BACKEND_ETAG_MAX];
};

/* A multipart upload in progress (mpu_list). */
struct backend_mpu {
    char *upload_id;      /* owned */
    int64_t initiated_ns; /* realtime; 0 when the backend does not say */
};

struct backend_ops {
    const char *type; /* "posix", "s3" */

    int (*stat)(struct backend *be, const char *key, struct backend_stat *st);
    /* Read up to len bytes at off into buf. Returns bytes read (short only at end of object) or
     * -errno. if_match: NULL, or a version the object must still have (else -ESTALE). st, if not
     * NULL, receives the version actually read. */
    ssize_t (*read)(struct backend *be, const char *key, uint64_t off, void *buf, size_t len,
                    const char *if_match, struct backend_stat *st);
    /* One page of keys under prefix (may be ""), in key order. delimiter: NULL or "/" (group
     * deeper keys into common prefixes). token: NULL for the first page, else next_token of the
     * previous page. max_keys: 0 = backend default (1000). */
    int (*list)(struct backend *be, const char *prefix, const char *delimiter, const char *token,
                size_t max_keys, struct backend_list_page *page);
    /* Store a whole object atomically: readers see the old object or the new one, never a mix.
     * etag_out (BACKEND_ETAG_MAX bytes) may be NULL. */
    int (*put)(struct backend *be, const char *key, const void *buf, size_t len, char *etag_out);
    /* Optional (NULL: -ENOTSUP). put, but only if no object has key: of two writers of one key
     * exactly one wins, the other gets -EEXIST (S3: If-None-Match: *; POSIX: a link that never
     * replaces). The publish of a manifest (dataset versions). */
    int (*put_new)(struct backend *be, const char *key, const void *buf, size_t len,
                   char *etag_out);
    /* Multipart upload. The object appears only at complete; abort discards every part. Part
     * numbers start at 1; all parts but the last must be >= 5 MiB (S3 rule, enforced by S3). */
    int (*mpu_create)(struct backend *be, const char *key, char **upload_id);
    int (*mpu_put_part)(struct backend *be, const char *key, const char *upload_id, int part_no,
                        const void *buf, size_t len, char *etag_out);
    int (*mpu_complete)(struct backend *be, const char *key, const char *upload_id,
                        const struct backend_part *parts, size_t nparts, char *etag_out);
    int (*mpu_abort)(struct backend *be, const char *key, const char *upload_id);
    /* Delete an object; deleting a missing key returns -ENOENT. */
    int (*del)(struct backend *be, const char *key);
    void (*destroy)(struct backend *be);
    /* Optional (NULL: -ENOTSUP). The multipart uploads in progress for exactly key, every page,
     * in the backend's order; *out is owned by the caller (backend_mpu_list_free). Used to find
     * uploads created before a crash or a lost reply and never journalled. */
    int (*mpu_list)(struct backend *be, const char *key, struct backend_mpu **out, size_t *n);
    /* Optional (NULL: every valid key). Can this backend ever store an object under key (a name
     * it reserves, a limit of its own)? 0 or -EINVAL/-ENAMETOOLONG with a message. Writers are
     * asked at create, so a file the backend would refuse for ever is refused before any byte is
     * promised. */
    int (*key_check)(struct backend *be, const char *key);
    /* Most parts of one multipart upload; 0: BACKEND_MAX_PARTS. */
    int max_parts;
    /* Optional (NULL: -ENOTSUP), object versions (S3 bucket versioning). Does the store keep
     * older versions of objects (versioning enabled, or suspended with versions kept)? */
    int (*versioning)(struct backend *be, bool *keeps);
    /* list, without delimiter, of the current version of every object under prefix, each with
     * its version_id (entries whose current version is a delete marker are left out). token:
     * as list's. */
    int (*list_versions)(struct backend *be, const char *prefix, const char *token, size_t max_keys,
                         struct backend_list_page *page);
    /* read, of version version_id of key (if_match: as read's, checked on that version). */
    ssize_t (*read_version)(struct backend *be, const char *key, const char *version_id,
                            uint64_t off, void *buf, size_t len, const char *if_match,
                            struct backend_stat *st);
    /* Optional (NULL: the store keeps no directories, nothing to remove: S3). Remove the empty
     * directory dirkey ("a/b/") where the store keeps one after its last object went (POSIX):
     * 0, also when there is none; -ENOTEMPTY when something is still in it. */
    int (*rmdir)(struct backend *be, const char *dirkey);
};

/* S3's limit on the parts of one multipart upload (and the POSIX backend's part-NNNNN names). */
#define BACKEND_MAX_PARTS 10000

/* Optional observer of a backend's internal retries (the scheduler's circuit breaker installs
 * one, qos/sched_backend.c): a backend that retries within one call (S3) reports every failed
 * attempt of a kind it retries (the last one too), on the calling thread, and retries only while
 * failed() returns true. So a breaker that opens also stops the retries of the calls already in
 * flight, and it opens after breaker_failures failed attempts rather than whole calls.
 * answered: the server did answer (an HTTP 5xx, 503 SlowDown, 429): reachable, only unwell;
 * false: no answer (timeout, refused or broken connection). */
struct backend_attempt_hook {
    bool (*failed)(void *ud, int err, bool answered); /* err: -errno; false: stop retrying */
    void *ud;
};

/* Common header of every backend; implementations embed it first. */
struct backend {
    const struct backend_ops *ops;
    char *name; /* config name, e.g. "warm" (owned) */
    /* Set once before the backend is shared (backend_set_attempt_hook), then read-only. */
    struct backend_attempt_hook attempt_hook;
};

/* Install (or with NULL remove) the attempt observer; call before any operation runs. */
void backend_set_attempt_hook(struct backend *be, const struct backend_attempt_hook *hook);
/* For backends: report a failed retryable attempt; returns whether retrying is allowed. */
bool backend_attempt_failed(struct backend *be, int err, bool answered);

/* Validate an object key: non-empty, <= BACKEND_KEY_MAX bytes, no leading '/', no empty, "." or
 * ".." segment, no NUL (checked via len), no segment over BACKEND_SEGMENT_MAX, no control
 * characters. A trailing '/' is allowed only when allow_dir is true (directory prefixes).
 * Returns 0 or -EINVAL (with tier_err_msg() saying why) / -ENAMETOOLONG. */
int backend_key_valid(const char *key, size_t len, bool allow_dir);

/* Dispatchers: validate the key, then call the backend, with io (the caller's tenant and class;
 * NULL: the thread's current one) as this thread's current ioctx for the call (common/ioctx.h).
 * Only tests and tools pass NULL: tierd's layers always pass one (lint checks the source, and
 * backend_calls_without_ioctx(), shown in /v1/stats, counts the calls made without one). */
uint64_t backend_calls_without_ioctx(void);
int backend_stat(struct backend *be, const struct tier_ioctx *io, const char *key,
                 struct backend_stat *st);
ssize_t backend_read(struct backend *be, const struct tier_ioctx *io, const char *key, uint64_t off,
                     void *buf, size_t len, const char *if_match, struct backend_stat *st);
int backend_list(struct backend *be, const struct tier_ioctx *io, const char *prefix,
                 const char *delimiter, const char *token, size_t max_keys,
                 struct backend_list_page *page);
int backend_put(struct backend *be, const struct tier_ioctx *io, const char *key, const void *buf,
                size_t len, char *etag_out);
/* ops->put_new: -EEXIST when key exists already, -ENOTSUP when the backend cannot promise it. */
int backend_put_new(struct backend *be, const struct tier_ioctx *io, const char *key,
                    const void *buf, size_t len, char *etag_out);
int backend_mpu_create(struct backend *be, const struct tier_ioctx *io, const char *key,
                       char **upload_id);
int backend_mpu_put_part(struct backend *be, const struct tier_ioctx *io, const char *key,
                         const char *upload_id, int part_no, const void *buf, size_t len,
                         char *etag_out);
int backend_mpu_complete(struct backend *be, const struct tier_ioctx *io, const char *key,
                         const char *upload_id, const struct backend_part *parts, size_t nparts,
                         char *etag_out);
int backend_mpu_abort(struct backend *be, const struct tier_ioctx *io, const char *key,
                      const char *upload_id);
int backend_del(struct backend *be, const struct tier_ioctx *io, const char *key);
/* The empty directory dirkey ("a/b/"), where the store keeps directories (the rmdir op): 0 when
 * removed or when there is none, -ENOTEMPTY, -EINVAL for a bad key. */
int backend_rmdir(struct backend *be, const struct tier_ioctx *io, const char *dirkey);
/* Object versions (the optional ops above): -ENOTSUP where the backend has none. */
int backend_versioning(struct backend *be, const struct tier_ioctx *io, bool *keeps);
int backend_list_versions(struct backend *be, const struct tier_ioctx *io, const char *prefix,
                          const char *token, size_t max_keys, struct backend_list_page *page);
ssize_t backend_read_version(struct backend *be, const struct tier_ioctx *io, const char *key,
                             const char *version_id, uint64_t off, void *buf, size_t len,
                             const char *if_match, struct backend_stat *st);
int backend_mpu_list(struct backend *be, const struct tier_ioctx *io, const char *key,
                     struct backend_mpu **out, size_t *n);
/* backend_key_valid, then the backend's own key_check. */
int backend_key_check(struct backend *be, const char *key);
/* ops->max_parts, or BACKEND_MAX_PARTS. */
int backend_max_parts(const struct backend *be);
void backend_mpu_list_free(struct backend_mpu *v, size_t n);
/* Destroy a backend; NULL is a no-op. */
void backend_free(struct backend *be);

void backend_list_page_fini(struct backend_list_page *page);

/* Read [off, off+len) with up to nthreads concurrent ranged reads of chunk_bytes each, all pinned
 * to the version of the first chunk (if_match). Returns bytes read or -errno. */
ssize_t backend_read_parallel(struct backend *be, const struct tier_ioctx *io, const char *key,
                              uint64_t off, void *buf, size_t len, size_t chunk_bytes, int nthreads,
                              struct backend_stat *st);

/* ---- constructors ---------------------------------------------------------------------- */

struct posix_backend_config {
    const char *name;
    const char *root; /* existing directory */
};
int backend_posix_open(const struct posix_backend_config *cfg, struct backend **out);

struct s3_backend_config {
    const char *name;
    const char *endpoint; /* "http://127.0.0.1:7480" or "https://s3.us-east-1.amazonaws.com" */
    const char *region;   /* "us-east-1" if NULL */
    const char *bucket;
    const char *prefix;          /* key prefix inside the bucket, "" or NULL for none */
    bool path_style;             /* true: endpoint/bucket/key; false: bucket.endpoint/key */
    const char *access_key;      /* NULL: $AWS_ACCESS_KEY_ID */
    const char *secret_key;      /* NULL: $AWS_SECRET_ACCESS_KEY */
    const char *session_token;   /* NULL: $AWS_SESSION_TOKEN (optional) */
    int max_retries;             /* attempts after the first; default 4 */
    uint64_t retry_base_ms;      /* first backoff; default 100 */
    uint64_t retry_max_ms;       /* backoff cap; default 5000 */
    uint64_t connect_timeout_ms; /* default 3000 */
    uint64_t request_timeout_ms; /* per attempt: fails after this long without a byte moved;
                                  * default 30000 */
    int max_connections;         /* pool size; default 16 */
};
int backend_s3_open(const struct s3_backend_config *cfg, struct backend **out);

#endif
