/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.c - the write-back journal: one SQLite database (WAL, synchronous=FULL) recording the
 * state of every file of the burst buffer, so that a crash at any instant loses no closed byte
 * and leaves nothing half-written in the backend.
 *
 * Called by wb.c, the wb_*.c files and upload.c with wb->lock held: each function is one
 * transaction, and the commit is the instant the transition happens. The lock is held across the
 * commit (the one exception to "no lock across I/O" in this module) so that the in-memory entry and
 * its row change together; backend requests and staging-file I/O never run under it.
 *
 * STATE MACHINE (one row per file generation; staging file <spool>/<id>.stg):
 *
 *            wb_file_create                 wb_file_close (fsync, XXH3-128)
 *   (none) ----------------> OPEN -------------------------------------> SEALED
 *                             |  \ fsync/write error                       |  \
 *                             |   `-------------> FAILED --(close)--> (none)  | size < part: PUT
 *                             | unlink/overwrite                            |  \
 *                             v                                   mpu_create |   `----------.
 *                          (none)                                           v               |
 *                                          UPLOADING (upload id; parts with ETags) ---------+
 *                                                |                 complete + stat verify   |
 *                                                v                                          v
 *                                           UPLOADED (ETag) -- retention --> EVICTABLE (no local)
 *
 *   SEALED, UPLOADING --refused for good (key, size) or local copy != checksum--> FAILED (kept)
 *   any of SEALED, UPLOADING, UPLOADED, EVICTABLE --unlink/overwrite/rename--> CANCELLED
 *   any of SEALED, UPLOADING, UPLOADED, EVICTABLE --seal of a newer generation--> CANCELLED
 *   CANCELLED --(uploader: abort upload id if any; delete object if etag set)--> (none)
 *
 *   Replace at seal (wb_file_create_ex WB_CREATE_REPLACE_AT_SEAL, the FUSE rewrite path): the
 *   new generation is OPEN next to the live old one, which keeps uploading and serving reads;
 *   readers pick the newest generation. wb_file_close seals the new row and cancels the old
 *   live row(s) of the key in ONE transaction (jr_seal_replace). A crash before that commit
 *   leaves the old generation live (the OPEN row is discarded); after it, the new one sealed
 *   and the old one cancelled. FAILED / discarded / OPEN-at-recovery: the old one untouched.
 *
 * INVARIANTS
 *   I1. A row is committed before its staging file is created; a staging file is deleted only
 *       after the commit that made its row stop needing it (CANCELLED, EVICTABLE, deleted).
 *       Stray *.stg files without a row are removed at recovery.
 *   I2. SEALED implies the staging file was fsync'd with exactly `size` bytes hashing to
 *       `checksum`, and the spool directory entry was fsync'd at create.
 *   I3. An upload id is journalled (UPLOADING) before any part is sent; a part's ETag is
 *       journalled after the part is stored; UPLOADED is journalled after complete/PUT returned
 *       and the object's size was verified with backend_stat.
 *   I4. An object becomes visible only through backend_put (atomic) or mpu_complete, and only
 *       for a row that is not CANCELLED at that instant (checked under wb->lock right before the
 *       request, and cancellation waits for the in-flight request: `busy`/`interrupt`).
 *   I5. At most one live (non-CANCELLED) row per (backend, key), not counting OPEN and FAILED
 *       rows (a replacement being written, never uploaded); every seal cancels, in its own
 *       transaction, the other live non-OPEN rows of its key. Requests touching one key are
 *       ordered: a CANCELLED row that must delete key K is processed before any later generation
 *       of K may PUT/complete, and never while such a request is in flight.
 *   I6. A FAILED file never reports success again. A FAILED row never sealed (sealed_ns = 0: the
 *       writer's write or fsync failed) is removed at close or recovery. A FAILED row sealed
 *       (sealed_ns != 0: the backend refused it for good, or its staging copy no longer hashes to
 *       `checksum`) keeps its staging file and its `error` until an unlink or a newer seal of
 *       the key removes it; it has no upload id and is never picked for upload.
 *   I7. The journal's format is PRAGMA user_version (JR_FORMAT_VERSION); a newer one is refused
 *       at open, an older one migrated in one transaction.
 *
 * TRANSITION -> FUNCTION (a row's state changes through wb_commit in wb.c, or, where one
 * transaction changes several rows, wb_commit_seal and wb_commit_rekey: the rows are written
 * from a proposed copy, the entries change only after the commit; the journal write in brackets)
 *   (none) -> OPEN                wb_file_create (jr_insert)
 *   OPEN -> SEALED                wb_file_close (wb_commit_seal, jr_seal_replace: seal + cancel
 *                                 the replaced)
 *   OPEN -> FAILED                record_failure in wb.c (wb_commit, jr_set_state)
 *   SEALED -> UPLOADING           upload.c mpu_begin (wb_commit, jr_set_upload)
 *   UPLOADING: part done          upload.c part_worker (jr_part_done)
 *   UPLOADING -> SEALED           upload.c restart_multipart (wb_commit, jr_set_upload NULL)
 *   SEALED/UPLOADING: may exist   upload.c mark_maybe (wb_commit, jr_set_state: etag "?")
 *   SEALED/UPLOADING -> UPLOADED  upload.c finish_upload (wb_commit, jr_uploaded)
 *   SEALED/UPLOADING -> FAILED    upload.c fail_sealed (wb_commit, jr_fail_sealed)
 *   UPLOADED -> EVICTABLE         demote_entry: retention, wb_demote (wb_commit, jr_set_state)
 *   * -> CANCELLED                wb.c cancel_entry (wb_commit, jr_set_state), wb_rename
 *                                 tombstone (wb_commit_rekey, jr_rekey), wb_file_close of a
 *                                 newer generation (wb_commit_seal, jr_seal_replace)
 *   rename to a new key           wb_rename (wb_commit_rekey, jr_rekey: re-key + tombstone):
 *                                 OPEN stays OPEN, SEALED/UPLOADING/UPLOADED -> SEALED
 *   OPEN/FAILED -> (none)         wb_file_close of a failed file, wb_file_discard (jr_delete);
 *                                 a sealed FAILED row: wb.c cancel_entry (unlink, overwrite),
 *                                 wb_file_close of a newer generation (wb_commit_seal)
 *   CANCELLED -> (none)           upload.c process_cancelled (jr_delete)
 *   EVICTABLE -> (none)           wb_prune_evictable (jr_delete_many), over its bound
 *
 * RECOVERY (wb_open): OPEN rows and FAILED rows never sealed are discarded with their staging
 * files (only closed files are promised); sealed FAILED rows are kept, with a log line each; SEALED
 * rows are queued; UPLOADING rows resume: parts journalled as done are kept and the rest uploaded,
 * and if the backend no longer knows the upload id (or rejects the complete) the upload is aborted
 * and restarted from the local copy; CANCELLED rows are processed (abort / delete); UPLOADED rows
 * whose local copy vanished become EVICTABLE.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "writeback/wb_int.h"

static const char *const schema =
    "CREATE TABLE IF NOT EXISTS files("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " backend TEXT NOT NULL, key TEXT NOT NULL, generation INTEGER NOT NULL,"
    " state TEXT NOT NULL, size INTEGER NOT NULL DEFAULT 0, checksum TEXT, upload_id TEXT,"
    " created_ns INTEGER, sealed_ns INTEGER, uploaded_ns INTEGER, etag TEXT, error TEXT);"
    "CREATE TABLE IF NOT EXISTS parts("
    " file_id INTEGER NOT NULL, part_no INTEGER NOT NULL, etag TEXT NOT NULL,"
    " size INTEGER NOT NULL, PRIMARY KEY(file_id, part_no));";

/* Names as stored in the `state` column (human-readable with the sqlite3 shell). */
static const char *const state_names[] = {"open",      "sealed",    "uploading", "uploaded",
                                          "evictable", "cancelled", "failed"};

const char *wb_state_name(enum wb_state s)
{
    return (unsigned)s <= WB_FAILED ? state_names[s] : "unknown";
}

static int state_parse(const char *s, enum wb_state *out)
{
    for (int i = 0; i <= WB_FAILED; i++)
        if (s && strcmp(s, state_names[i]) == 0) {
            *out = (enum wb_state)i;
            return 0;
        }
    return -EINVAL;
}

/* The one place SQLite result codes become errnos. */
static int sql_errno(sqlite3 *db, int rc, const char *what)
{
    int prim = rc & 0xff;
    int err = prim == SQLITE_FULL ? -ENOSPC : prim == SQLITE_NOMEM ? -ENOMEM : -EIO;
    tier_err_set("write-back journal: %s: %s", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    return err;
}

static int exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        int e = sql_errno(db, rc, sql);
        sqlite3_free(msg);
        return e;
    }
    return 0;
}

/* The journal's format, kept in SQLite's `PRAGMA user_version`:
 *   0  journals of tierd before the format was numbered (a `sha256` column, or `checksum`
 *      without `error`);
 *   1  `checksum` ("xxh128:" or "sha256:" + hex) and `error` (why a sealed file is FAILED).
 * A journal of a newer format than this tierd knows is refused at open: its rows may mean
 * something this code would misread (and recovery deletes what it does not understand). */
#define JR_FORMAT_VERSION 1

static int has_column(sqlite3 *db, const char *col, bool *out)
{
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT %s FROM files LIMIT 0", col);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    sqlite3_finalize(st);
    *out = rc == SQLITE_OK;
    /* only "no such column" means it is absent; anything else is an error */
    if (rc != SQLITE_OK && !strstr(sqlite3_errmsg(db), "no such column"))
        return sql_errno(db, rc, "journal schema check");
    return 0;
}

static int user_version(sqlite3 *db, int *out)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sql_errno(db, rc, "PRAGMA user_version");
    rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : sql_errno(db, rc, "PRAGMA user_version");
}

/* Bring a journal of format 0 to JR_FORMAT_VERSION in one transaction: a `sha256` column of bare
 * hex (the seal checksum before it became XXH3-128) is renamed `checksum` and its values tagged
 * with their algorithm; the `error` column is added. */
static int migrate(sqlite3 *db, const char *path)
{
    int ver;
    int rc = user_version(db, &ver);
    if (rc)
        return rc;
    if (ver > JR_FORMAT_VERSION) {
        tier_err_set("write-back journal %s has format %d, newer than this tierd reads (%d): run "
                     "the tierd that wrote it, or move the spool aside",
                     path, ver, JR_FORMAT_VERSION);
        return -EPROTO;
    }
    if (ver == JR_FORMAT_VERSION)
        return 0;
    bool old_sum, has_error;
    rc = has_column(db, "sha256", &old_sum);
    if (!rc)
        rc = has_column(db, "error", &has_error);
    if (rc)
        return rc;
    if (old_sum)
        log_info("write-back: journal: renaming column sha256 to checksum (values tagged sha256:)");
    char sql[512];
    snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE;%s%sPRAGMA user_version=%d;COMMIT;",
             old_sum
                 ? "ALTER TABLE files RENAME COLUMN sha256 TO checksum;"
                   "UPDATE files SET checksum = 'sha256:' || checksum"
                   " WHERE checksum IS NOT NULL AND checksum <> '' AND instr(checksum, ':') = 0;"
                 : "",
             has_error ? "" : "ALTER TABLE files ADD COLUMN error TEXT;", JR_FORMAT_VERSION);
    rc = exec(db, sql);
    if (rc)
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* WAL gives one fsync per commit; where the file system cannot hold it (no shared memory
 * mapping, some network file systems) SQLite stays in its rollback journal, which is as durable
 * with synchronous=FULL but slower: say so rather than assume. */
static int set_wal(sqlite3 *db, const char *path)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sql_errno(db, rc, "PRAGMA journal_mode");
    rc = sqlite3_step(st);
    const unsigned char *mode = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
    if (rc == SQLITE_ROW && (!mode || strcmp((const char *)mode, "wal") != 0))
        log_warn(
            "write-back journal %s: WAL mode refused (mode %s); commits are durable but slower",
            path, mode ? (const char *)mode : "?");
    int e = rc == SQLITE_ROW ? 0 : sql_errno(db, rc, "PRAGMA journal_mode");
    sqlite3_finalize(st);
    return e;
}

int jr_open(const char *path, sqlite3 **out)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        int e = sql_errno(db, rc, path);
        sqlite3_close(db);
        return e;
    }
    sqlite3_busy_timeout(db, 5000);
    int e = set_wal(db, path);
    if (!e)
        e = exec(db, "PRAGMA synchronous=FULL;");
    if (!e)
        e = exec(db, schema);
    if (!e)
        e = migrate(db, path);
    if (e) {
        sqlite3_close(db);
        return e;
    }
    *out = db;
    return 0;
}

void jr_close(sqlite3 *db)
{
    if (db)
        sqlite3_close(db);
}

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st)
{
    int rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);
    return rc == SQLITE_OK ? 0 : sql_errno(db, rc, sql);
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
    if (s && *s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* Step a prepared statement to completion and finalize it. */
static int step_done(sqlite3 *db, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    int e = rc == SQLITE_DONE ? 0 : sql_errno(db, rc, what);
    sqlite3_finalize(st);
    return e;
}

static int insert_row(sqlite3 *db, struct wb_entry *e)
{
    sqlite3_stmt *st;
    int rc = prepare(db,
                     "INSERT INTO files(backend,key,generation,state,size,checksum,upload_id,"
                     "created_ns,sealed_ns,uploaded_ns,etag) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                     &st);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, e->backend, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, e->key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, e->generation);
    sqlite3_bind_text(st, 4, wb_state_name(e->state), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, (sqlite3_int64)e->size);
    bind_text_or_null(st, 6, e->checksum);
    bind_text_or_null(st, 7, e->upload_id);
    sqlite3_bind_int64(st, 8, e->created_ns);
    sqlite3_bind_int64(st, 9, e->sealed_ns);
    sqlite3_bind_int64(st, 10, e->uploaded_ns);
    bind_text_or_null(st, 11, e->etag);
    rc = step_done(db, st, "insert");
    if (!rc)
        e->id = sqlite3_last_insert_rowid(db);
    return rc;
}

int jr_insert(sqlite3 *db, struct wb_entry *e)
{
    return insert_row(db, e);
}

int jr_set_state(sqlite3 *db, const struct wb_entry *e)
{
    sqlite3_stmt *st;
    int rc = prepare(db, "UPDATE files SET state=?, etag=? WHERE id=?", &st);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, wb_state_name(e->state), -1, SQLITE_STATIC);
    bind_text_or_null(st, 2, e->etag);
    sqlite3_bind_int64(st, 3, e->id);
    return step_done(db, st, "set state");
}

int jr_seal(sqlite3 *db, const struct wb_entry *e)
{
    sqlite3_stmt *st;
    int rc = prepare(
        db, "UPDATE files SET state='sealed', size=?, checksum=?, sealed_ns=? WHERE id=?", &st);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)e->size);
    sqlite3_bind_text(st, 2, e->checksum, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, e->sealed_ns);
    sqlite3_bind_int64(st, 4, e->id);
    return step_done(db, st, "seal");
}

/* Run fn between BEGIN IMMEDIATE and COMMIT; ROLLBACK on failure. */
static int txn(sqlite3 *db, int (*fn)(sqlite3 *db, const void *a, void *b), const void *a, void *b)
{
    int rc = exec(db, "BEGIN IMMEDIATE");
    if (rc)
        return rc;
    rc = fn(db, a, b);
    if (!rc)
        rc = exec(db, "COMMIT");
    if (rc)
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static int delete_parts(sqlite3 *db, int64_t id)
{
    sqlite3_stmt *st;
    int rc = prepare(db, "DELETE FROM parts WHERE file_id=?", &st);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    return step_done(db, st, "delete parts");
}

static int set_upload_fn(sqlite3 *db, const void *a, void *b)
{
    (void)b;
    const struct wb_entry *e = a;
    int rc = delete_parts(db, e->id);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    rc = prepare(db, "UPDATE files SET state=?, upload_id=? WHERE id=?", &st);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, wb_state_name(e->state), -1, SQLITE_STATIC);
    bind_text_or_null(st, 2, e->upload_id);
    sqlite3_bind_int64(st, 3, e->id);
    return step_done(db, st, "set upload id");
}

int jr_set_upload(sqlite3 *db, const struct wb_entry *e)
{
    return txn(db, set_upload_fn, e, NULL);
}

int jr_part_done(sqlite3 *db, int64_t id, int part_no, const char *etag, uint64_t size)
{
    sqlite3_stmt *st;
    int rc =
        prepare(db, "INSERT OR REPLACE INTO parts(file_id,part_no,etag,size) VALUES(?,?,?,?)", &st);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, part_no);
    sqlite3_bind_text(st, 3, etag, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)size);
    return step_done(db, st, "part done");
}

static int uploaded_fn(sqlite3 *db, const void *a, void *b)
{
    (void)b;
    const struct wb_entry *e = a;
    int rc = delete_parts(db, e->id);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    rc = prepare(db,
                 "UPDATE files SET state='uploaded', etag=?, uploaded_ns=?, upload_id=NULL "
                 "WHERE id=?",
                 &st);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, e->etag, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, e->uploaded_ns);
    sqlite3_bind_int64(st, 3, e->id);
    return step_done(db, st, "uploaded");
}

int jr_uploaded(sqlite3 *db, const struct wb_entry *e)
{
    return txn(db, uploaded_fn, e, NULL);
}

static int fail_fn(sqlite3 *db, const void *a, void *b)
{
    (void)b;
    const struct wb_entry *e = a;
    int rc = delete_parts(db, e->id);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    rc = prepare(db, "UPDATE files SET state='failed', error=?, upload_id=NULL, etag=? WHERE id=?",
                 &st);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, e->error ? e->error : "failed", -1, SQLITE_TRANSIENT);
    bind_text_or_null(st, 2, e->etag);
    sqlite3_bind_int64(st, 3, e->id);
    return step_done(db, st, "fail sealed");
}

int jr_fail_sealed(sqlite3 *db, const struct wb_entry *e)
{
    return txn(db, fail_fn, e, NULL);
}

static int delete_fn(sqlite3 *db, const void *a, void *b)
{
    (void)b;
    int64_t id = *(const int64_t *)a;
    int rc = delete_parts(db, id);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    rc = prepare(db, "DELETE FROM files WHERE id=?", &st);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    return step_done(db, st, "delete");
}

int jr_delete(sqlite3 *db, int64_t id)
{
    return txn(db, delete_fn, &id, NULL);
}

static int delete_many_fn(sqlite3 *db, const void *a, void *b)
{
    const int64_t *ids = a;
    size_t n = *(const size_t *)b;
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++)
        rc = delete_fn(db, &ids[i], NULL);
    return rc;
}

int jr_delete_many(sqlite3 *db, const int64_t *ids, size_t n)
{
    return txn(db, delete_many_fn, ids, &n);
}

static int rekey_fn(sqlite3 *db, const void *a, void *b)
{
    const struct wb_entry *e = a;
    struct wb_entry *t = b;
    int rc = delete_parts(db, e->id);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    rc = prepare(db,
                 "UPDATE files SET key=?, generation=?, state=?, upload_id=NULL, etag=NULL, "
                 "uploaded_ns=0 WHERE id=?",
                 &st);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, e->key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, e->generation);
    sqlite3_bind_text(st, 3, wb_state_name(e->state), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, e->id);
    rc = step_done(db, st, "rekey");
    if (!rc && t)
        rc = insert_row(db, t);
    return rc;
}

int jr_rekey(sqlite3 *db, const struct wb_entry *e, struct wb_entry *t)
{
    return txn(db, rekey_fn, e, t);
}

struct seal_replace_args {
    struct wb_entry *const *old;
    size_t n;
};

static int seal_replace_fn(sqlite3 *db, const void *a, void *b)
{
    const struct wb_entry *e = a;
    const struct seal_replace_args *r = b;
    int rc = jr_seal(db, e);
    for (size_t i = 0; !rc && i < r->n; i++) {
        const struct wb_entry *o = r->old[i];
        if (!jr_cancel_keeps_row(o)) {
            rc = delete_fn(db, &o->id, NULL);
            continue;
        }
        sqlite3_stmt *st;
        rc = prepare(db, "UPDATE files SET state='cancelled', etag=? WHERE id=?", &st);
        if (rc)
            break;
        bind_text_or_null(st, 1, wb_entry_has_object(o) ? wb_cancel_etag(o) : NULL);
        sqlite3_bind_int64(st, 2, o->id);
        rc = step_done(db, st, "cancel replaced");
    }
    return rc;
}

bool jr_cancel_keeps_row(const struct wb_entry *o)
{
    return o->upload_id || wb_entry_has_object(o);
}

int jr_seal_replace(sqlite3 *db, const struct wb_entry *e, struct wb_entry *const *old, size_t n)
{
    struct seal_replace_args r = {.old = old, .n = n};
    return txn(db, seal_replace_fn, e, &r);
}

static char *col_dup(sqlite3_stmt *st, int i)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? strdup((const char *)s) : NULL;
}

static void col_copy(sqlite3_stmt *st, int i, char *dst, size_t dstsz)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    tier_strlcpy(dst, s ? (const char *)s : "", dstsz);
}

/* Attach the journalled parts of e (its nparts is set by the uploader; here we size the array
 * by the highest part number seen). */
static int load_parts(sqlite3 *db, struct wb_entry *e)
{
    sqlite3_stmt *st;
    int rc =
        prepare(db, "SELECT part_no, etag, size FROM parts WHERE file_id=? ORDER BY part_no", &st);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, e->id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int no = sqlite3_column_int(st, 0);
        if (no < 1 || no > 10000)
            continue;
        if (no > e->nparts) {
            struct backend_part *p = realloc(e->parts, (size_t)no * sizeof(*p));
            if (p)
                e->parts = p;
            uint64_t *b = realloc(e->part_bytes, (size_t)no * sizeof(*b));
            if (b)
                e->part_bytes = b;
            if (!p || !b) {
                sqlite3_finalize(st);
                return -ENOMEM;
            }
            memset(p + e->nparts, 0, (size_t)(no - e->nparts) * sizeof(*p));
            memset(b + e->nparts, 0, (size_t)(no - e->nparts) * sizeof(*b));
            e->nparts = no;
        }
        e->parts[no - 1].number = no;
        col_copy(st, 1, e->parts[no - 1].etag, sizeof(e->parts[no - 1].etag));
        e->part_bytes[no - 1] = (uint64_t)sqlite3_column_int64(st, 2);
        e->parts_done++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : sql_errno(db, rc, "load parts");
}

int jr_load(sqlite3 *db, int (*add)(void *ctx, struct wb_entry *e), void *ctx)
{
    sqlite3_stmt *st;
    int rc = prepare(db,
                     "SELECT id,backend,key,generation,state,size,checksum,upload_id,created_ns,"
                     "sealed_ns,uploaded_ns,etag,error FROM files ORDER BY id",
                     &st);
    if (rc)
        return rc;
    int err = 0;
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct wb_entry *e = calloc(1, sizeof(*e));
        if (!e) {
            err = -ENOMEM;
            break;
        }
        e->id = sqlite3_column_int64(st, 0);
        e->backend = col_dup(st, 1);
        e->key = col_dup(st, 2);
        e->generation = sqlite3_column_int64(st, 3);
        const unsigned char *s = sqlite3_column_text(st, 4);
        if (state_parse((const char *)s, &e->state) != 0) {
            log_warn("write-back journal: row %lld has unknown state '%s'; treating it as failed",
                     (long long)e->id, s ? (const char *)s : "");
            e->state = WB_FAILED;
        }
        e->size = (uint64_t)sqlite3_column_int64(st, 5);
        col_copy(st, 6, e->checksum, sizeof(e->checksum));
        e->upload_id = col_dup(st, 7);
        e->created_ns = sqlite3_column_int64(st, 8);
        e->sealed_ns = sqlite3_column_int64(st, 9);
        e->uploaded_ns = sqlite3_column_int64(st, 10);
        col_copy(st, 11, e->etag, sizeof(e->etag));
        e->error = col_dup(st, 12);
        if (sqlite3_column_type(st, 1) == SQLITE_NULL ||
            sqlite3_column_type(st, 2) == SQLITE_NULL) {
            /* nothing this tierd wrote: refuse rather than guess (and sweep its staging file) */
            tier_err_set("write-back journal: row %lld has no backend or key: the journal is "
                         "damaged; inspect it with sqlite3, or move the spool aside",
                         (long long)e->id);
            wb_entry_free(e);
            err = -EBADMSG;
            break;
        }
        if (!e->backend || !e->key) {
            wb_entry_free(e);
            err = -ENOMEM;
            break;
        }
        err = load_parts(db, e);
        if (!err)
            err = add(ctx, e);
        if (err)
            wb_entry_free(e);
    }
    sqlite3_finalize(st);
    if (err)
        return err;
    return rc == SQLITE_DONE ? 0 : sql_errno(db, rc, "load");
}
