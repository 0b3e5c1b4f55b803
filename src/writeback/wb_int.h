/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb_int.h - private structures of the write-back module, shared by journal.c, wb.c, the wb_*.c
 * files and upload.c only. See journal.c for the state machine and its invariants.
 */
#ifndef TIER_WRITEBACK_WB_INT_H
#define TIER_WRITEBACK_WB_INT_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/ioctx.h"
#include "tiers/backend.h"
#include "writeback/wb.h"

/* One journal row in memory. Every field is owned by wb->lock. An entry whose `busy` is set is
 * being worked on by one uploader thread: only that thread issues backend requests for it and
 * only it may free it; other threads that must change it set `interrupt` and wait on wb->cond
 * until busy clears. */
struct wb_entry {
    int64_t id;
    char *backend;
    char *key;
    int64_t generation;
    enum wb_state state;
    uint64_t size;
    char checksum[WB_CHECKSUM_MAX];
    char *upload_id;             /* multipart upload id, or NULL */
    char etag[BACKEND_ETAG_MAX]; /* UPLOADED/EVICTABLE: the object's ETag; CANCELLED: non-empty
                                  * means the object exists and must be deleted */
    int64_t created_ns, sealed_ns, uploaded_ns; /* realtime, as journalled */
    uint64_t sealed_mono_ns;                    /* for age and deadline (0: not sealed) */
    int nparts;                                 /* multipart: total parts; 0 otherwise */
    int parts_done;
    struct backend_part *parts; /* nparts entries; etag "" = not done */
    uint64_t *part_bytes;       /* nparts entries: size of each done part */
    struct wb_file *fh;         /* the open handle (OPEN state), or NULL */
    bool busy;                  /* owned by an uploader thread */
    bool interrupt;             /* asks the owner to stop at its next check point */
    bool deadline_warned;
    int64_t mpu_orphans_ns; /* realtime; != 0: a multipart upload started since then may exist
                             * that no row names (a crash or a lost reply after mpu_create):
                             * list and abort before uploading (best effort) */
    char *error;     /* FAILED after seal: why the backend cannot take the file (journalled) */
    uint32_t tenant; /* whose upload (struct tier_ioctx.tenant): the writer's (wb_file_set_tenant),
                      * else wb_config.tenant; in memory only, a recovered file is the latter's */
    int attempts;
    uint64_t next_try_mono_ns;
    struct wb_entry *next, *prev;   /* every entry (wb->head) */
    struct wb_entry *pnext, *pprev; /* wb->ready or wb->cancels, while queued */
    int queue;                      /* which of them (wb_index.c), 0: none */
    bool counted_evictable;         /* in wb->n_evictable */
};

struct wb_file {
    struct wb *wb;
    struct wb_entry *e; /* NULL once the file was unlinked/overwritten (wb->lock) */
    int64_t id;
    int fd;
    int error;       /* first local I/O error: the file is FAILED (fail-stop) */
    uint32_t tenant; /* whose writes (wb_file_set_tenant), for the disk admission */
    /* The seal checksum of bytes [0, sum_len), streamed while every write so far came from
     * memory in order (a checkpoint's writes do): the seal then needs no second pass over the
     * file. NULL once a write came out of order, spliced, or a truncate cut it: the seal reads
     * the file back. The writer's thread (as fd). */
    struct wb_sum *sum;
    uint64_t sum_len;
};

struct wb {
    struct wb_config cfg;     /* strings below are our copies */
    struct tier_disk_adm adm; /* cfg.disk_adm's copy (enter NULL: none); immutable */
    char *spool;
    char *journal_path;
    sqlite3 *db; /* used only under lock */

    pthread_mutex_t lock;
    pthread_cond_t cond; /* any state change: waiters (wait, close, backpressure, quiesce) */
    pthread_cond_t work; /* uploaders: new work or stopping */
    struct wb_entry *head;
    /* wb_index.c: every entry by (backend, key, id) and by id; the uploaders' queue */
    struct wb_entry **by_key, **by_id;
    size_t nkeys, cap_keys, nids, cap_ids;
    struct wb_entry *ready, *ready_tail;     /* SEALED, UPLOADING in seal order (pnext) */
    struct wb_entry *cancels, *cancels_tail; /* CANCELLED, in cancel order (pnext) */
    int64_t last_sealed_ns;                  /* the newest sealed_ns given (wb_next_sealed_ns) */
    uint64_t deadline_check_mono_ns;         /* upload.c: the last upload_deadline check */
    size_t n_evictable;                      /* EVICTABLE entries (max_evictable_rows) */
    uint64_t dirty_bytes;
    _Atomic uint64_t last_write_mono_ns; /* burst absorption: the newest write (no lock) */
    atomic_int writers_busy;             /* ... and fsyncs/seals running now */
    int waiters;                         /* in wb_wait() */
    int bp_waiters;                      /* writers held in backpressure_wait() */
    bool stopping;
    struct wb_awaiter *awaiters; /* wb_wait_async: pending waits */
    pthread_t awaiter;           /* ... and the thread that answers them */
    bool awaiter_started;
    int awaiters_firing; /* callbacks being run by the waiter thread now */
    pthread_t *threads;
    int nthreads;
    struct wb_stats stats;
};

/* The etag of a SEALED/UPLOADING row whose final request (PUT or CompleteMultipartUpload) has
 * been sent: the object may exist in the backend although UPLOADED is not journalled yet, so
 * cancelling the row deletes the key (it is journalled before the request). */
#define WB_ETAG_MAYBE "?"

/* A sealed file the backend can never take (or whose local copy no longer matches its seal
 * checksum): kept, with its reason, until unlinked or replaced; FAILED rows of files never sealed
 * are the writer's failure and are discarded at close or recovery. */
static inline bool wb_entry_failed_sealed(const struct wb_entry *e)
{
    return e->state == WB_FAILED && e->sealed_ns != 0;
}

/* Does e's generation (possibly) have an object in the backend that a cancel must delete? */
static inline bool wb_entry_has_object(const struct wb_entry *e)
{
    return e->state == WB_UPLOADED || e->state == WB_EVICTABLE ||
           (e->etag[0] == WB_ETAG_MAYBE[0] && e->etag[1] == '\0');
}

/* The etag a CANCELLED row of e keeps so that the uploader deletes the key: e's own, or the
 * "may exist" marker when the backend gave none (an empty etag would skip the delete). */
static inline const char *wb_cancel_etag(const struct wb_entry *e)
{
    return e->etag[0] ? e->etag : WB_ETAG_MAYBE;
}

/* ---- journal.c: one SQLite transaction each; called with wb->lock held ----------------------- */
int jr_open(const char *path, sqlite3 **out);
void jr_close(sqlite3 *db);
int jr_insert(sqlite3 *db, struct wb_entry *e); /* sets e->id */
int jr_set_state(sqlite3 *db, const struct wb_entry *e);
int jr_seal(sqlite3 *db, const struct wb_entry *e);
int jr_set_upload(sqlite3 *db, const struct wb_entry *e); /* upload id + state; clears parts */
int jr_part_done(sqlite3 *db, int64_t id, int part_no, const char *etag, uint64_t size);
int jr_uploaded(sqlite3 *db, const struct wb_entry *e);
int jr_delete(sqlite3 *db, int64_t id);
/* Delete rows ids[0..n) (and their parts) in one transaction. */
int jr_delete_many(sqlite3 *db, const int64_t *ids, size_t n);
/* SEALED/UPLOADING -> FAILED: e->error journalled, upload id and parts forgotten, etag kept (a
 * "may exist" marker still makes a later cancel delete the key). */
int jr_fail_sealed(sqlite3 *db, const struct wb_entry *e);
/* Rename: in one transaction, re-key row e (now SEALED/OPEN, no upload id, no parts) and insert
 * tombstone t (CANCELLED) if t != NULL. */
int jr_rekey(sqlite3 *db, const struct wb_entry *e, struct wb_entry *t);
/* Seal e and, in the same transaction, cancel the replaced generations old[0..n) of its key:
 * a row for which jr_cancel_keeps_row() is true becomes CANCELLED (etag kept only when the object
 * exists, so that the uploader deletes it), any other is deleted. */
int jr_seal_replace(sqlite3 *db, const struct wb_entry *e, struct wb_entry *const *old, size_t n);
/* A cancelled row must stay (as CANCELLED) while it has an upload id to abort or an object. */
bool jr_cancel_keeps_row(const struct wb_entry *o);
/* Load every row, in id order, with its parts; entries are appended through add. */
int jr_load(sqlite3 *db, int (*add)(void *ctx, struct wb_entry *e), void *ctx);

/* ---- the transition function (wb.c, wb_ns.c; wb->lock held) -------------------------------- */
/* Which journal write a change is (journal.c). */
enum wb_jr_op {
    WB_JR_STATE,    /* jr_set_state: state, etag */
    WB_JR_UPLOAD,   /* jr_set_upload: state, upload id; the row's parts are deleted */
    WB_JR_UPLOADED, /* jr_uploaded: UPLOADED, etag, uploaded_ns; upload id and parts gone */
    WB_JR_FAIL,     /* jr_fail_sealed: FAILED, error, etag; upload id and parts gone */
};
/* A proposed change of one entry; NULL / 0 members stay as they are. */
struct wb_change {
    enum wb_state state;
    const char *etag;
    bool set_upload; /* WB_JR_UPLOAD: upload_id is the new one (NULL: none) */
    const char *upload_id;
    const char *error;
    int64_t uploaded_ns;
};
/* The one way a single row changes (TRANSITION -> FUNCTION in journal.c): the row is written
 * from a proposed copy of e with c applied, and only once that committed is c applied to e
 * (state with its dirty bytes and index queue, etag, upload id, error, uploaded_ns); the strings
 * e keeps are copied first, so nothing fails after the commit. In-memory parts are the caller's.
 * 0, or the journal's error (or -ENOMEM) with e unchanged. The multi-row transitions below are
 * built the same way. */
int wb_commit(struct wb *wb, struct wb_entry *e, enum wb_jr_op op, const struct wb_change *c);
/* OPEN -> SEALED of e (size bytes hashing to checksum), and in the same transaction
 * (jr_seal_replace) the generations old[0..n) it replaces are cancelled; they are quiesced and
 * interrupted by the caller, who clears `interrupt` on failure. Once committed, e gets its size,
 * checksum and seal times and each old[i] is cancelled in memory (its staging file removed, the
 * row dropped unless the uploader has work left). 0, or the journal's error with e and old[]
 * unchanged. */
int wb_commit_seal(struct wb *wb, struct wb_entry *e, uint64_t size,
                   const char checksum[WB_CHECKSUM_MAX], struct wb_entry *const *old, size_t n);
/* Rename of the quiesced entry e (OPEN stays OPEN, anything else becomes SEALED: re-uploaded
 * from its local copy) to new_key with generation, and in the same transaction (jr_rekey) a
 * CANCELLED tombstone row of the old key when that key has an upload, an object or possible
 * orphan uploads to clean up. Once committed, e is re-keyed and re-indexed, its upload id,
 * etag, parts and retry state are forgotten, and the tombstone is queued. 0, or the journal's
 * error (or -ENOMEM) with e unchanged and no tombstone. */
int wb_commit_rekey(struct wb *wb, struct wb_entry *e, const char *new_key, int64_t generation);

/* ---- wb.c and wb_retention.c helpers used by upload.c (wb->lock held) ------------------------ */
void wb_entry_set_state(struct wb *wb, struct wb_entry *e, enum wb_state st);
void wb_entry_drop(struct wb *wb, struct wb_entry *e); /* unlink from list, free */
void wb_entry_free(struct wb_entry *e);                /* wb_index.c */
void wb_staging_path(const struct wb *wb, int64_t id, char *buf, size_t bufsz);
void wb_emit(struct wb *wb, enum wb_event ev, int64_t id); /* call without the lock */
void wb_retention_apply(struct wb *wb, const struct wb_entry *e);
void wb_prune_evictable(struct wb *wb); /* max_evictable_rows */

/* Seal checksums (wb.c): streaming, in the algorithm of `like` (a journalled checksum: "sha256:"
 * for rows of old journals) or XXH3-128 when like is NULL. wb_sum_end frees; out may be NULL. */
struct wb_sum;
int wb_sum_begin(struct wb_sum **out, const char *like);
void wb_sum_update(struct wb_sum *c, const void *buf, size_t len);
void wb_sum_end(struct wb_sum *c, char out[WB_CHECKSUM_MAX]);
/* The checksum of the first size bytes of fd. */
int wb_checksum_fd(int fd, uint64_t size, const char *like, char out[WB_CHECKSUM_MAX]);

/* ---- helpers shared by wb.c and the wb_*.c files (described at their definitions) -------- */

/* The entries of backend (NULL: any) whose key starts with prefix: a range of the key index, or
 * with no backend named, a walk of every entry. No entry may be added or dropped meanwhile. */
struct entry_iter {
    struct wb *wb;
    const char *backend, *prefix;
    size_t plen, i;
    struct wb_entry *next;
};

/* wb.c */
bool state_local(enum wb_state s);
void entry_link(struct wb *wb, struct wb_entry *e);
void staging_remove(const struct wb *wb, int64_t id);
struct wb_entry *find_id(struct wb *wb, int64_t id);
struct wb_entry *find_live(struct wb *wb, const char *backend, const char *key);
void iter_init(struct entry_iter *it, struct wb *wb, const char *backend, const char *prefix);
struct wb_entry *iter_next(struct entry_iter *it);
void abs_deadline(struct timespec *ts, uint64_t mono_ns);
struct wb_entry *quiesce(struct wb *wb, struct wb_entry *e);
int cancel_entry(struct wb *wb, struct wb_entry *e);
int check_names(const char *backend_name, const char *key);
int check_create(struct wb *wb, const char *backend_name, const char *key);

/* wb_wait.c */
void awaiter_stop(struct wb *wb);

/* ---- wb_index.c (wb->lock held) ------------------------------------------------------------ */
/* Room for `more` entries, reserved before the commit that creates them (wbi_insert cannot fail
 * afterwards). */
int wbi_reserve(struct wb *wb, size_t more);
void wbi_insert(struct wb *wb, struct wb_entry *e); /* by its backend, key, id, state */
void wbi_remove(struct wb *wb, struct wb_entry *e); /* before its key changes or it is freed */
void wbi_state_changed(struct wb *wb, struct wb_entry *e); /* (un)queue it; sealed_ns set */
struct wb_entry *wbi_find_id(const struct wb *wb, int64_t id);
void wbi_free(struct wb *wb);
/* Range walks: i = wbi_first(backend, prefix), then wbi_key_at (exactly key) or wbi_prefix_at
 * (key starts with prefix) until NULL. */
size_t wbi_first(struct wb *wb, const char *backend, const char *prefix);
struct wb_entry *wbi_key_at(struct wb *wb, size_t i, const char *backend, const char *key);
struct wb_entry *wbi_prefix_at(struct wb *wb, size_t i, const char *backend, const char *prefix,
                               size_t plen);
/* for (e over the generations of backend:key) */
#define WB_FOR_KEY(wb, e, backend, key)                                                            \
    for (size_t wbi_i_ = wbi_first((wb), (backend), (key));                                        \
         ((e) = wbi_key_at((wb), wbi_i_, (backend), (key))) != NULL; wbi_i_++)
/* for (e over every entry of backend whose key starts with prefix) */
#define WB_FOR_PREFIX(wb, e, backend, prefix)                                                      \
    for (size_t wbi_i_ = wbi_first((wb), (backend), (prefix)), wbi_l_ = strlen(prefix);            \
         ((e) = wbi_prefix_at((wb), wbi_i_, (backend), (prefix), wbi_l_)) != NULL; wbi_i_++)

/* ---- upload.c ------------------------------------------------------------------------------ */
/* Burst absorption (wb->lock held): the monotonic time until which new uploads are held back,
 * or 0 when they may start now. */
uint64_t wb_holdoff_until(struct wb *wb, uint64_t now);
/* Age in ms of the oldest sealed, not yet uploaded file (wb->lock held). */
uint64_t wb_oldest_pending_age_ms(struct wb *wb, uint64_t now);
/* A row that may have left an unjournalled upload (e) is replaced by r: r inherits the cleanup,
 * from the earlier of the two times (wb->lock held). */
void wb_orphans_inherit(struct wb_entry *r, const struct wb_entry *e);
/* Whether e's upload is held back now; hold is wb_holdoff_until(). */
bool wb_entry_held(const struct wb *wb, const struct wb_entry *e, uint64_t hold, uint64_t now);
int wb_uploaders_start(struct wb *wb);
void wb_uploaders_stop(struct wb *wb);

#endif
