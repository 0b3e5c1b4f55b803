/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb.h - the checkpoint burst buffer: write-back files staged on the hot tier's local disk,
 * journalled in SQLite, and uploaded to a backend in the background. The public header is the
 * manual; the state machine, its invariants and the durability contract are in journal.c's top
 * comment and docs/WRITEBACK.md.
 *
 * Callers: the daemon's FUSE write path (create/write/fsync/close/unlink/rename on a write-back
 * namespace), `tierctl wait` (wb_wait) and `tierctl checkpoints` (wb_list).
 *
 * Thread-safety: every function may be called from any thread. One struct wb_file handle must be
 * used by one thread at a time (the FUSE layer serialises per open file); different handles are
 * independent. Errors are negative errnos, with a sentence in tier_err_msg() where it helps.
 *
 * Durability contract (short form):
 *   - wb_file_close() returning 0 with durability LOCAL: every byte written through the handle is
 *     on local disk (fsync'd) and the file is journalled SEALED; it will reach the backend even
 *     across crashes and restarts, unless it is unlinked or overwritten first, or the backend
 *     refuses it for good (then it is FAILED, visibly: see WB_FAILED and wb_wait).
 *   - with durability REMOTE: close returns 0 only once the backend holds the complete object and
 *     its size (and ETag where checkable) was verified.
 *   - wb_file_fsync() returning 0: the bytes are on local disk, but a file that is never closed
 *     successfully is discarded at recovery (only closed files are promised).
 *   - after any failed fsync (or a write EIO) the file is FAILED: every later write, fsync and
 *     close on it fails with -EIO (fail-stop; never success after a lost write).
 *   - objects appear in the backend only complete (atomic put or multipart complete).
 */
#ifndef TIER_WRITEBACK_WB_H
#define TIER_WRITEBACK_WB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diskadm.h"

struct backend;
struct wb;
struct wb_file;

#define WB_MIN_PART_BYTES (5ULL << 20)
#define WB_DEFAULT_PART_BYTES (8ULL << 20)
/* The checksum journalled at seal: "xxh128:" + 32 hex digits (compare with `xxh128sum`). */
#define WB_CHECKSUM_PREFIX "xxh128:"
#define WB_CHECKSUM_MAX 80
/* ... and in journals written before it, SHA-256 (still verified at upload). */
#define WB_CHECKSUM_SHA256_PREFIX "sha256:"
/* The largest file the buffer takes (S3's object size limit); a write beyond it is -EFBIG. Each
 * file's part size is max(part_size, size / the backend's part limit), so every file that fits
 * can be uploaded. */
#define WB_MAX_FILE_BYTES (5ULL << 40)

enum wb_state {
    WB_OPEN = 0,      /* being written; not promised */
    WB_SEALED = 1,    /* fsync'd + journalled: durable locally, waiting for upload */
    WB_UPLOADING = 2, /* multipart upload in progress (upload id + parts journalled) */
    WB_UPLOADED = 3,  /* complete in the backend (ETag journalled); local copy kept */
    WB_EVICTABLE = 4, /* complete in the backend; local copy dropped by retention */
    WB_CANCELLED = 5, /* unlinked/overwritten: upload being aborted; object never appears */
    WB_FAILED = 6,    /* never sealed: local write/fsync failed (fail-stop), discarded at close;
                       * sealed: the backend can never take it (a permanent upload error) or
                       * its local copy no longer matches the seal checksum: kept, with its
                       * reason, reads -EIO, until unlinked or replaced */
};

const char *wb_state_name(enum wb_state s);

enum wb_durability {
    WB_DURABILITY_LOCAL = 0,  /* close returns when durable on local disk (default) */
    WB_DURABILITY_REMOTE = 1, /* close returns when durable in the backend */
};

/* Events, for monitoring and for tests that must synchronise without sleeping. Called from the
 * thread that performed the transition, without any wb lock held; must not call back into wb. */
enum wb_event {
    WB_EV_SEALED,       /* a file was sealed (close) */
    WB_EV_UPLOAD_START, /* an upload attempt begins (single PUT or multipart) */
    WB_EV_PART_DONE,    /* one multipart part uploaded and journalled */
    WB_EV_UPLOADED,     /* a file reached UPLOADED */
    WB_EV_CANCELLED,    /* a cancelled file's upload was aborted and its row dropped */
    WB_EV_RETRY,        /* an upload attempt failed; it will be retried after a backoff */
    WB_EV_FAILED,       /* a sealed file became FAILED: the backend can never take it */
};
typedef void (*wb_event_fn)(void *ctx, enum wb_event ev, int64_t file_id);

/* Map a backend name (as given to wb_file_create and stored in the journal) to a backend. The
 * returned backend must stay valid until wb_close(). NULL: unknown (uploads of its files wait and
 * are retried, with a warning). */
typedef struct backend *(*wb_resolve_fn)(void *ctx, const char *name);

/* Local I/O hooks, so that tests inject EIO, ENOSPC and short writes. NULL members use the real
 * pwrite(2) / fsync(2). pwrite returns bytes written or -errno; fsync returns 0 or -errno. */
struct wb_io_hooks {
    ssize_t (*pwrite)(void *ctx, int fd, const void *buf, size_t len, off_t off);
    int (*fsync)(void *ctx, int fd);
    void *ctx;
};

struct wb_config {
    const char *spool_dir;    /* staging files live here (created if missing) */
    const char *journal_path; /* NULL: <spool_dir>/journal.db */
    wb_resolve_fn resolve;
    void *resolve_ctx;
    int upload_threads;            /* files uploaded at once; default 2 */
    int parts_parallel;            /* parts of one file in flight at once; default 4 */
    uint64_t part_size_bytes;      /* >= 5 MiB; default 8 MiB */
    uint64_t max_dirty_bytes;      /* not-yet-uploaded bytes before writers wait; 0 = no bound */
    uint64_t max_dirty_age_ms;     /* age of the oldest sealed, not uploaded file; 0 = no bound */
    uint64_t backpressure_wait_ms; /* how long a writer waits over a bound before -ENOSPC;
                                    * default 60000 */
    uint64_t upload_deadline_ms;   /* warn once for a file not uploaded this long after seal;
                                    * 0 = never */
    /* Burst absorption: a sealed file's upload does not start while any file was written in the
     * last upload_holdoff_ms (the uploads would compete with the writer for disk and CPU), unless
     * it was sealed upload_holdoff_max_ms ago, a wb_wait() is waiting, a writer is held by the
     * backlog bounds, or the backlog is at half of max_dirty_bytes. 0 = upload at once. */
    uint64_t upload_holdoff_ms;
    uint64_t upload_holdoff_max_ms; /* default 30000 */
    int retention_keep;             /* newest K uploaded files per directory keep their local copy;
                                     * < 0 = keep all; default 0 means drop right after upload.
                                     * tierd passes -1: its lifecycle policies (lifecycle/lifecycle.h)
                                     * apply [writeback] retention_keep through wb_demote */
    /* EVICTABLE rows (uploaded, local copy dropped) remembered, newest first; beyond it plus a
     * tenth the oldest are forgotten (journal and memory), down to it. They only let the mount
     * show such files while the backend cannot be asked. 0: 10000; < 0: keep all. */
    int64_t max_evictable_rows;
    enum wb_durability durability;
    uint64_t retry_base_ms;       /* first file-level retry delay; default 200 */
    uint64_t retry_max_ms;        /* cap of the growing delay; default 30000 */
    uint32_t tenant;              /* whose uploads (struct tier_ioctx.tenant), class checkpoint */
    const struct wb_io_hooks *io; /* NULL: real pwrite/fsync */
    /* Admission of spool writes on the local disk (common/diskadm.h; copied at open; NULL:
     * none): each wb_write() waits for it with its bytes, as class checkpoint of the file's
     * tenant (wb_file_set_tenant, else tenant above). */
    const struct tier_disk_adm *disk_adm;
    wb_event_fn on_event;
    void *event_ctx;
};

/* Open the burst buffer: create the spool, open (or create) the journal, run recovery (OPEN and
 * FAILED rows discarded, SEALED queued, UPLOADING resumed, CANCELLED aborted, stray staging files
 * removed) and start the uploader threads. */
int wb_open(const struct wb_config *cfg, struct wb **out);
/* Stop the uploaders (in-flight requests finish; unfinished uploads resume at the next
 * wb_open), free everything. Handles still open are freed; their files are discarded at the next
 * recovery. NULL is a no-op. */
void wb_close(struct wb *wb);

/* Create (or truncate-overwrite) the file backend_name:key. A live earlier generation of the key
 * is cancelled (its upload aborted, its local copy dropped; an already uploaded object stays in
 * the backend until this generation replaces it). Blocks while over the backlog bounds, up to
 * backpressure_wait_ms, then -ENOSPC. */
int wb_file_create(struct wb *wb, const char *backend_name, const char *key, struct wb_file **out);

/* wb_file_create_ex flags. */
#define WB_CREATE_REPLACE_AT_SEAL 0x1u
/* As wb_file_create; with WB_CREATE_REPLACE_AT_SEAL the live earlier generation of the key is
 * NOT cancelled now: it stays live (uploading, readable) while the new generation is OPEN, and
 * is cancelled only when the new one is sealed, in the same journal transaction as the seal
 * (wb_file_close). If the new generation fails, is discarded (wb_file_discard) or is still OPEN
 * at a crash, the old one is untouched. While both exist, wb_read and wb_list readers see the
 * newest generation (read-your-writes); wb_unlink cancels both; wb_rename of the key returns
 * -EBUSY (wb_rename onto it cancels both). Other flags: -EINVAL. */
int wb_file_create_ex(struct wb *wb, const char *backend_name, const char *key, unsigned flags,
                      struct wb_file **out);
/* Charge the file's upload to tenant (struct tier_ioctx.tenant; the scheduler admits its backend
 * calls as that tenant's checkpoint I/O). Call before close; in memory only: after a restart
 * a recovered file's upload is wb_config.tenant's. */
void wb_file_set_tenant(struct wb_file *fh, uint32_t tenant);
/* Give up an OPEN (or FAILED) generation without sealing it: its row and staging file are
 * dropped, an older generation it would have replaced stays live. Frees the handle. */
void wb_file_discard(struct wb_file *fh);
/* Write len bytes at off (short writes are retried internally). Returns len or -errno: -ENOSPC
 * from the buffer's own bounds (its disk budget or the backlog bound, checked before any byte is
 * written: the handle stays usable and the range keeps its old content); any error of the write
 * itself, ENOSPC from the spool's file system included (part of the range may have changed), is
 * returned as it is and makes the file FAILED (later writes: -EIO). */
ssize_t wb_write(struct wb_file *fh, const void *buf, size_t len, off_t off);
/* wb_write of len bytes that wait in the pipe src_fd: they are spliced into the staging file, so
 * they never pass through this process's memory (one copy fewer than read + wb_write). Same
 * results as wb_write, and -EOPNOTSUPP (nothing written, the file not failed) when the file's I/O
 * hooks must see the bytes or the spool cannot splice: the caller reads them and calls wb_write. On
 * any error the pipe may still hold the rest of the bytes; draining it is the caller's. */
ssize_t wb_write_fd(struct wb_file *fh, int src_fd, size_t len, off_t off);
int wb_truncate(struct wb_file *fh, off_t size);
/* Read from the open file's staging copy (read-your-writes for the writer). */
ssize_t wb_file_read(struct wb_file *fh, void *buf, size_t len, off_t off);
/* fsync the staging file. Failure makes the file FAILED (fail-stop). */
int wb_file_fsync(struct wb_file *fh);
/* fsync, seal (XXH3-128, journal SEALED; in the same transaction every other sealed/uploaded
 * generation of the key is cancelled), queue for upload, free the handle. With durability
 * REMOTE, wait until UPLOADED. The handle is freed whatever the result. A handle whose file was
 * unlinked or overwritten meanwhile closes with 0 (its data is gone, as POSIX unlink-while-open).
 */
int wb_file_close(struct wb_file *fh);
/* Journal id of the handle's file. */
int64_t wb_file_id(const struct wb_file *fh);

/* Unlink: cancel every generation of the key (an OPEN replacement too: its writer's close then
 * returns 0 with the data gone, as POSIX unlink-while-open): a not-yet-uploaded file (abort its
 * multipart upload; the object never appears) or delete an uploaded one from the backend. Waits for
 * an in-flight final request (complete / single PUT) of the file, so that when this returns the
 * object does not exist. -ENOENT if the burst buffer does not know the key (the caller then deals
 * with the backend directly). */
int wb_unlink(struct wb *wb, const char *backend_name, const char *key);
/* wb_unlink, but only while every live generation of the key is the uploaded version etag
 * (UPLOADED or EVICTABLE with that ETag): -EAGAIN otherwise (a newer generation is being written
 * or uploaded), and nothing is cancelled. The lifecycle policies' expire. */
int wb_unlink_if(struct wb *wb, const char *backend_name, const char *key, const char *etag);
/* Rename within one backend. Not yet uploaded: re-key (a multipart upload under the old key is
 * aborted and restarted). Uploaded with a local copy: re-key, re-upload from the local copy, and
 * delete the old object. Evicted (no local copy): -EXDEV (the caller copies through the backend).
 * An existing live file at new_key is replaced (as by wb_file_create; every generation of it,
 * an OPEN replacement included, is cancelled). -EBUSY while old_key has an OPEN replacement
 * next to its live generation (WB_CREATE_REPLACE_AT_SEAL): retry once it is sealed. */
int wb_rename(struct wb *wb, const char *backend_name, const char *old_key, const char *new_key);

/* Block until every sealed file whose key starts with prefix ("" = all) on backend_name (NULL =
 * any) is UPLOADED/EVICTABLE (files still OPEN are not waited for). 0, or -ETIMEDOUT
 * (timeout_ms < 0: no timeout), -ESHUTDOWN if wb_close() started, -EIO (at once) while a sealed
 * file under prefix is FAILED (tier_err_msg() names it and why). */
int wb_wait(struct wb *wb, const char *backend_name, const char *prefix, int64_t timeout_ms);

/* wb_wait without blocking the caller: done(arg, rc) is called exactly once, from the buffer's
 * waiter thread, without any wb lock held, with what wb_wait would have returned (-ESHUTDOWN
 * when wb_wait_async_flush or wb_close comes first). exact: prefix is one key (not "every key
 * starting with it"). 0, or -ENOMEM/-ESHUTDOWN/-EAGAIN (done is then never called). */
typedef void (*wb_wait_fn)(void *arg, int rc);
int wb_wait_async(struct wb *wb, const char *backend_name, const char *prefix, bool exact,
                  int64_t timeout_ms, wb_wait_fn done, void *arg);
/* Answer every pending wb_wait_async now with -ESHUTDOWN (before the caller tears down what the
 * callbacks use, e.g. the FUSE session). */
void wb_wait_async_flush(struct wb *wb);

/* Read-your-writes: read backend_name:key from its local staging copy while one exists.
 * -ENOENT when the burst buffer holds no local copy (read the backend instead); -EIO when the
 * newest generation is a sealed file that FAILED (never an older object in its place). */
ssize_t wb_read(struct wb *wb, const char *backend_name, const char *key, void *buf, size_t len,
                off_t off);

/* Drop the local copy of backend_name:key once it is uploaded (UPLOADED -> EVICTABLE; reads then
 * go to the backend): the lifecycle policies' demote (lifecycle/lifecycle.h). 1: dropped; 0:
 * nothing to drop (unknown to the buffer, or already evicted); -EAGAIN: a generation of the key is
 * not uploaded yet, or is being renamed, unlinked or replaced (its local copy stays; try later);
 * else the journal's error. */
int wb_demote(struct wb *wb, const char *backend_name, const char *key);

struct wb_file_info {
    int64_t id;
    char *backend; /* owned by the list */
    char *key;     /* owned by the list */
    int64_t generation;
    enum wb_state state;
    uint64_t size_bytes;
    int parts_done, parts_total;    /* 0/0 for a single PUT */
    uint64_t age_ms;                /* since creation */
    uint64_t waiting_ms;            /* since seal, while not uploaded; 0 otherwise */
    char checksum[WB_CHECKSUM_MAX]; /* "xxh128:<hex>" taken at seal ("sha256:<hex>" in journals
                                     * older than it); "" until sealed */
    char etag[96];                  /* "" until uploaded */
    bool sealed;                    /* closed successfully (a FAILED file too, see error) */
    int64_t sealed_ns;              /* realtime of the seal; 0: not sealed */
    char *error; /* FAILED after seal: why it will never be uploaded (owned); NULL otherwise */
};
/* Every file known to the burst buffer under prefix, in key order. Free with wb_list_free(). */
int wb_list(struct wb *wb, const char *backend_name, const char *prefix, struct wb_file_info **out,
            size_t *n);
void wb_list_free(struct wb_file_info *list, size_t n);

struct wb_stats {
    uint64_t dirty_bytes;              /* OPEN + SEALED + UPLOADING bytes */
    uint64_t files[WB_FAILED + 1];     /* per state */
    uint64_t uploads_done, parts_done; /* since wb_open */
    uint64_t upload_retries;           /* failed attempts that will be retried */
    uint64_t upload_failures;          /* sealed files made FAILED (never retried) */
    uint64_t backpressure_waits;       /* writers that had to wait */
    uint64_t deadline_warnings;
    uint64_t busy_waiters; /* calls waiting now for an upload step to finish */
    uint64_t held;         /* sealed files whose upload is held back now (burst absorption) */
    uint64_t recovered_sealed, recovered_uploading, recovered_discarded, recovered_aborts;
    uint64_t index_lookups, index_visits; /* key index: searches, and entries they walked */
    uint64_t rows_pruned;                 /* EVICTABLE rows dropped (max_evictable_rows) */
    uint64_t demoted;                     /* local copies dropped (retention, wb_demote) */
};
void wb_stats_get(struct wb *wb, struct wb_stats *st);
/* Files of tenant (wb_file_set_tenant, else wb_config.tenant) not uploaded yet: open, sealed or
 * uploading (their uploads run as that tenant). Under the lock; reclaim asks it (tenant.h). */
size_t wb_tenant_pending(struct wb *wb, uint32_t tenant);

#endif
