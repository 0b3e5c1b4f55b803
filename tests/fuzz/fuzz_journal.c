/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_journal.c - libFuzzer target for the write-back journal as read at start-up: every input
 * becomes a journal.db (plus staging files) in a fresh spool, and the burst buffer is opened on
 * it, which runs recovery (jr_load -> recover_one for every row, the spool sweep, the pruning of
 * EVICTABLE rows) and starts the uploaders against a POSIX backend in a scratch directory; then
 * every file is listed, the statistics read, a zero-timeout wait made, and the buffer closed.
 * Also built as a corpus-replay test (fuzz_journal_replay) in CTest.
 *
 * Input: either a raw database file (it starts with "SQLite format 3", so damaged files reach
 * SQLite itself), or lines that are inserted as rows of the current schema, fields split on '|',
 * "~" for SQL NULL, integers where the column is an integer:
 *   f|id|backend|key|generation|state|size|checksum|upload_id|created|sealed|uploaded|etag|error
 *   p|file_id|part_no|etag|size
 *   s|id|bytes            a staging file <id>.stg of that many bytes (at most 64 KiB)
 *   v|N                   PRAGMA user_version = N
 *
 * Checks what must hold for any journal: no crash, leak or sanitizer report; wb_open either
 * succeeds or fails with a negative errno and a message (tier_err_msg); after a successful open
 * every listed file has a state name and a key, and wb_close returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "tiers/backend.h"
#include "writeback/wb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct backend *g_be;

static struct backend *resolve(void *ctx, const char *name)
{
    (void)ctx;
    return strcmp(name, "warm") == 0 ? g_be : NULL;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* A scratch directory on tmpfs where there is one: the journal fsyncs every commit. */
static char *scratch(void)
{
    const char *base = getenv("TIER_TEST_TMP");
    if (!base || !*base)
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    if (mkdir(base, 0755) == 0)
        chmod(base, 0755); /* whatever the umask: FUSE tests share it as other uids */
    char *p = NULL;
    if (asprintf(&p, "%s/fuzz_journal.XXXXXX", base) < 0)
        return NULL;
    if (!mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

static void bind_field(sqlite3_stmt *st, int i, const char *f, bool integer)
{
    if (strcmp(f, "~") == 0)
        sqlite3_bind_null(st, i);
    else if (integer)
        sqlite3_bind_int64(st, i, strtoll(f, NULL, 10));
    else
        sqlite3_bind_text(st, i, f, -1, SQLITE_TRANSIENT);
}

/* Run one INSERT with the '|' fields of line (after the tag); ints[i] says which are integers. */
static void insert(sqlite3 *db, const char *sql, char *rest, const bool *ints, int nf)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return;
    char *save = NULL;
    int i = 0;
    for (char *f = strtok_r(rest, "|", &save); f && i < nf; f = strtok_r(NULL, "|", &save), i++)
        bind_field(st, i + 1, f, ints[i]);
    if (i == nf)
        sqlite3_step(st); /* a constraint violation is a fine outcome of a hostile row */
    sqlite3_finalize(st);
}

static void staging(const char *spool, char *rest)
{
    char *save = NULL;
    char *id = strtok_r(rest, "|", &save), *n = strtok_r(NULL, "|", &save);
    if (!id || !n)
        return;
    long long bytes = strtoll(n, NULL, 10);
    if (bytes < 0 || bytes > 65536)
        return;
    char p[700];
    snprintf(p, sizeof(p), "%s/%lld.stg", spool, strtoll(id, NULL, 10));
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    static const char fill[4096] = {'x'};
    for (long long off = 0; off < bytes;) {
        size_t want = (size_t)(bytes - off < 4096 ? bytes - off : 4096);
        ssize_t w = write(fd, fill, want);
        if (w <= 0)
            break;
        off += w;
    }
    close(fd);
}

static void build_rows(const char *journal, const char *spool, const uint8_t *data, size_t size)
{
    sqlite3 *db = NULL;
    if (sqlite3_open(journal, &db) != SQLITE_OK) {
        sqlite3_close(db);
        return;
    }
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    char *text = strndup((const char *)data, size);
    char *save = NULL;
    static const bool file_ints[] = {1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0};
    static const bool part_ints[] = {1, 1, 0, 1};
    for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "f|", 2) == 0)
            insert(db,
                   "INSERT INTO files(id,backend,key,generation,state,size,checksum,upload_id,"
                   "created_ns,sealed_ns,uploaded_ns,etag,error) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   line + 2, file_ints, 13);
        else if (strncmp(line, "p|", 2) == 0)
            insert(db, "INSERT INTO parts(file_id,part_no,etag,size) VALUES(?,?,?,?)", line + 2,
                   part_ints, 4);
        else if (strncmp(line, "s|", 2) == 0)
            staging(spool, line + 2);
        else if (strncmp(line, "v|", 2) == 0) {
            char sql[64];
            snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", atoi(line + 2));
            sqlite3_exec(db, sql, NULL, NULL, NULL);
        }
    }
    free(text);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256 * 1024)
        return 0;
    static bool quiet;
    if (!quiet) {
        tier_log_set_level(TIER_LOG_ERR); /* recovery logs every odd row; keep the run readable */
        quiet = true;
    }
    char *dir = scratch();
    if (!dir)
        abort();
    char root[600], spool[600], journal[700];
    snprintf(root, sizeof(root), "%s/root", dir);
    snprintf(spool, sizeof(spool), "%s/spool", dir);
    snprintf(journal, sizeof(journal), "%s/journal.db", spool);
    mkdir(root, 0700);
    struct posix_backend_config pc = {.name = "warm", .root = root};
    if (backend_posix_open(&pc, &g_be) != 0)
        abort();
    struct wb_config cfg = {.spool_dir = spool,
                            .resolve = resolve,
                            .upload_threads = 1,
                            .retention_keep = -1,
                            .retry_base_ms = 1,
                            .retry_max_ms = 5};
    struct wb *wb = NULL;
    if (wb_open(&cfg, &wb) != 0) /* a fresh journal: the schema */
        abort();
    wb_close(wb);
    wb = NULL;
    static const char sqlite_magic[] = "SQLite format 3";
    if (size >= sizeof(sqlite_magic) - 1 &&
        memcmp(data, sqlite_magic, sizeof(sqlite_magic) - 1) == 0) {
        unlink(journal);
        int fd = open(journal, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            ssize_t w = write(fd, data, size);
            (void)w;
            close(fd);
        }
    } else {
        build_rows(journal, spool, data, size);
    }
    tier_err_clear();
    int rc = wb_open(&cfg, &wb);
    if (rc > 0 || (rc < 0 && !*tier_err_msg()))
        abort(); /* every refusal is a negative errno with a sentence */
    if (rc == 0) {
        struct wb_file_info *v = NULL;
        size_t n = 0;
        if (wb_list(wb, NULL, "", &v, &n) == 0) {
            for (size_t i = 0; i < n; i++)
                if (!v[i].key || !v[i].backend || !strcmp(wb_state_name(v[i].state), "unknown"))
                    abort();
            wb_list_free(v, n);
        }
        struct wb_stats st;
        wb_stats_get(wb, &st);
        (void)wb_wait(wb, NULL, "", 0);
        wb_close(wb);
    }
    backend_free(g_be);
    g_be = NULL;
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
    return 0;
}
