/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb_meta_bench.c - the cost of the write-back engine's metadata calls as its journal grows: the
 * mount's stat of one file is wb_list(backend, key), timed at 1,000, 10,000 and 100,000 journal
 * rows, next to the same call without a backend name, which walks every row (the cost every
 * stat paid before the key index), in the same run. Also: wb_open (recovery) time per row count.
 *
 *   wb_meta_bench [DIR] [CALLS]     DIR: scratch directory (default /tmp); CALLS per point
 *                                   (default 20000)
 *
 * Rows are written straight into the journal (EVICTABLE, as uploaded checkpoints leave them),
 * with max_evictable_rows = -1 so none is pruned. Results: docs/BENCHMARKS.md.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "tiers/backend.h"
#include "writeback/wb.h"

static struct backend *g_be;

static struct backend *resolve(void *ctx, const char *name)
{
    (void)ctx;
    return strcmp(name, "warm") == 0 ? g_be : NULL;
}

static int bulk_rows(const char *journal, int n)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_open(journal, &db) == SQLITE_OK ? 0 : -EIO;
    if (!rc && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        rc = -EIO;
    if (!rc && sqlite3_prepare_v2(db,
                                  "INSERT INTO files(backend,key,generation,state,size,created_ns,"
                                  "sealed_ns,uploaded_ns,etag) VALUES('warm',"
                                  "printf('run/step%06d/model.pt',?1),1,'evictable',10,1,2,?1,'e')",
                                  -1, &st, NULL) != SQLITE_OK)
        rc = -EIO;
    for (int i = 0; !rc && i < n; i++) {
        sqlite3_bind_int(st, 1, i);
        rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (!rc && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        rc = -EIO;
    sqlite3_close(db);
    return rc;
}

static double per_call_us(struct wb *wb, const char *backend, int rows, int calls)
{
    char key[64];
    uint64_t t0 = tier_now_mono_ns();
    for (int i = 0; i < calls; i++) {
        snprintf(key, sizeof(key), "run/step%06d/model.pt", (i * 7919) % rows);
        struct wb_file_info *v = NULL;
        size_t n = 0;
        if (wb_list(wb, backend, key, &v, &n) != 0 || n != 1) {
            fprintf(stderr, "wb_list %s: %zu rows\n", key, n);
            exit(1);
        }
        wb_list_free(v, n);
    }
    return (double)(tier_now_mono_ns() - t0) / 1e3 / calls;
}

int main(int argc, char **argv)
{
    const char *base = argc > 1 ? argv[1] : "/tmp";
    int calls = argc > 2 ? atoi(argv[2]) : 20000;
    char dir[512], root[600], spool[600], journal[700];
    snprintf(dir, sizeof(dir), "%s/wb_meta_bench.XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(root, sizeof(root), "%s/root", dir);
    mkdir(root, 0700);
    struct posix_backend_config pc = {.name = "warm", .root = root};
    if (backend_posix_open(&pc, &g_be) != 0)
        return 1;
    printf("| rows | wb_open | stat (key index) | stat (walk of every row) | walk / index |\n");
    printf("|---:|---:|---:|---:|---:|\n");
    static const int counts[] = {1000, 10000, 100000};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        int rows = counts[c];
        snprintf(spool, sizeof(spool), "%s/spool%d", dir, rows);
        snprintf(journal, sizeof(journal), "%s/journal.db", spool);
        struct wb_config cfg = {
            .spool_dir = spool, .resolve = resolve, .retention_keep = -1, .max_evictable_rows = -1};
        struct wb *wb = NULL;
        if (wb_open(&cfg, &wb) != 0) /* the schema */
            return 1;
        wb_close(wb);
        if (bulk_rows(journal, rows) != 0)
            return 1;
        uint64_t t0 = tier_now_mono_ns();
        if (wb_open(&cfg, &wb) != 0)
            return 1;
        double open_ms = (double)(tier_now_mono_ns() - t0) / 1e6;
        double idx = per_call_us(wb, "warm", rows, calls);
        int walk_calls = calls / (rows / 1000 > 0 ? rows / 1000 : 1);
        double walk = per_call_us(wb, NULL, rows, walk_calls > 20 ? walk_calls : 20);
        printf("| %d | %.0f ms | %.2f µs | %.1f µs | %.0f× |\n", rows, open_ms, idx, walk,
               walk / idx);
        wb_close(wb);
    }
    backend_free(g_be);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
