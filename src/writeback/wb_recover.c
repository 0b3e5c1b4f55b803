/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb_recover.c - wb_open (the spool and private directories, the journal, recovery of every
 * journalled file against its staging file, the sweep of stray staging files, the uploader
 * threads) and wb_close.
 *
 * Locking: as the top of wb.c says (wb->lock guards every entry and the journal connection).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "writeback/wb_int.h"

/* ---- open / recovery / close ----------------------------------------------------------------- */

struct load_ctx {
    struct wb *wb;
    int err;
};

static bool staging_exists(const struct wb *wb, int64_t id)
{
    char p[PATH_MAX];
    wb_staging_path(wb, id, p, sizeof(p));
    return access(p, F_OK) == 0;
}

/* Recovery of one journalled row (see journal.c RECOVERY). Returns 0 having taken e (linked or
 * freed), or an error leaving e to the caller (jr_load frees it). */
static int recover_one(void *ctx, struct wb_entry *e)
{
    struct load_ctx *lc = ctx;
    struct wb *wb = lc->wb;
    uint64_t now_real = tier_now_real_ns(), now_mono = tier_now_mono_ns();
    int rrc = wbi_reserve(wb, 1);
    if (rrc)
        return rrc;
    if (e->sealed_ns > wb->last_sealed_ns)
        wb->last_sealed_ns = e->sealed_ns; /* new seals go after every journalled one */
    switch (e->state) {
    case WB_FAILED:
        if (wb_entry_failed_sealed(e)) {
            /* the backend refused it for good: kept, visible, until unlinked or replaced */
            log_err("write-back: %s:%s (id %lld) is FAILED and will not be uploaded: %s",
                    e->backend, e->key, (long long)e->id, e->error ? e->error : "?");
            break;
        }
        /* never sealed, so never promised: discarded like an OPEN row */
        __attribute__((fallthrough));
    case WB_OPEN: {
        int rc = jr_delete(wb->db, e->id);
        if (rc)
            return rc;
        staging_remove(wb, e->id);
        wb->stats.recovered_discarded++;
        wb_entry_free(e);
        return 0;
    }
    case WB_SEALED:
    case WB_UPLOADING:
        if (!staging_exists(wb, e->id)) {
            /* Cannot happen unless the spool was tampered with or lost: the data is gone. */
            log_err("write-back: staging copy of sealed file %s:%s (id %lld) is missing; the "
                    "file cannot be uploaded and is dropped from the journal",
                    e->backend, e->key, (long long)e->id);
            int rc = jr_delete(wb->db, e->id);
            if (rc)
                return rc;
            wb_entry_free(e);
            return 0;
        }
        if (e->state == WB_SEALED) {
            wb->stats.recovered_sealed++;
            /* the crash may have come between mpu_create and its commit */
            e->mpu_orphans_ns = e->sealed_ns ? e->sealed_ns : 1;
        } else
            wb->stats.recovered_uploading++;
        /* Its age, from the journalled seal time: sealed before the monotonic clock's start (a
         * reboot since) it is older than anything sealed after it, so it gets the clock's
         * start, not "now" (which queued it behind newer files for the age bound). */
        e->sealed_mono_ns = now_mono;
        if (e->sealed_ns > 0 && now_real > (uint64_t)e->sealed_ns)
            e->sealed_mono_ns = now_mono > now_real - (uint64_t)e->sealed_ns
                                    ? now_mono - (now_real - (uint64_t)e->sealed_ns)
                                    : 1;
        break;
    case WB_UPLOADED:
        if (!staging_exists(wb, e->id)) {
            e->state = WB_EVICTABLE;
            int rc = jr_set_state(wb->db, e);
            if (rc)
                return rc;
        }
        break;
    case WB_EVICTABLE:
        break;
    case WB_CANCELLED:
        staging_remove(wb, e->id);
        if (!e->upload_id && !e->etag[0]) {
            int rc = jr_delete(wb->db, e->id);
            if (rc)
                return rc;
            wb_entry_free(e);
            return 0;
        }
        wb->stats.recovered_aborts++;
        break;
    }
    entry_link(wb, e);
    return 0;
}

/* Remove staging files that no row needs (left by a crash between a commit and the unlink). */
static void sweep_spool(struct wb *wb)
{
    DIR *d = opendir(wb->spool);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *dot = strrchr(de->d_name, '.');
        if (!dot || strcmp(dot, ".stg") != 0)
            continue;
        char num[32];
        size_t n = (size_t)(dot - de->d_name);
        if (n == 0 || n >= sizeof(num))
            continue;
        memcpy(num, de->d_name, n);
        num[n] = '\0';
        uint64_t id;
        if (tier_parse_u64(num, &id) != 0)
            continue;
        struct wb_entry *e = find_id(wb, (int64_t)id);
        if (!e || !state_local(e->state)) {
            log_info("write-back: removing stray staging file %s/%s", wb->spool, de->d_name);
            staging_remove(wb, (int64_t)id);
        }
    }
    closedir(d);
}

static int mkdir_p1(const char *path)
{
    if (mkdir(path, 0700) == 0 || errno == EEXIST)
        return 0;
    return -errno;
}

/* The spool holds checkpoint bytes and the journal names every file: readable by tierd's user
 * only. A directory made before (by hand, a package, an older tierd) with a wider mode is
 * tightened, with a log line; the journal is created 0600 before SQLite opens it (its -wal and
 * -shm files take the database file's mode). One owned by another user is refused. */
static int private_path(const char *path, bool dir)
{
    if (!dir) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            tier_err_set("write-back: cannot open journal %s: %s", path, strerror(errno));
            return -errno;
        }
        close(fd);
    }
    struct stat st;
    if (lstat(path, &st) != 0) {
        tier_err_set("write-back: cannot stat %s: %s", path, strerror(errno));
        return -errno;
    }
    if (st.st_uid != geteuid()) {
        tier_err_set("write-back: %s belongs to uid %u, not tierd's (%u): chown it or choose "
                     "another spool_dir",
                     path, (unsigned)st.st_uid, (unsigned)geteuid());
        return -EPERM;
    }
    mode_t want = dir ? 0700 : 0600;
    if ((st.st_mode & 07777) & ~want) {
        if (chmod(path, want) != 0) {
            tier_err_set("write-back: cannot make %s private: %s", path, strerror(errno));
            return -errno;
        }
        log_info("write-back: %s was mode %04o; now %04o (readable by tierd's user only)", path,
                 (unsigned)(st.st_mode & 07777), (unsigned)want);
    }
    return 0;
}

/* Free what wb_open set up, once no entry and no thread is left: the journal, the index, the
 * locks and the engine itself. */
static void wb_free(struct wb *wb)
{
    jr_close(wb->db);
    wbi_free(wb);
    pthread_cond_destroy(&wb->work);
    pthread_cond_destroy(&wb->cond);
    pthread_mutex_destroy(&wb->lock);
    free(wb->spool);
    free(wb->journal_path);
    free(wb);
}

int wb_open(const struct wb_config *cfg, struct wb **out)
{
    if (!cfg || !cfg->spool_dir || !cfg->resolve) {
        tier_err_set("write-back: spool_dir and a backend resolver are required");
        return -EINVAL;
    }
    if (cfg->part_size_bytes && cfg->part_size_bytes < WB_MIN_PART_BYTES) {
        tier_err_set("write-back: part size %llu is below the 5 MiB minimum of S3",
                     (unsigned long long)cfg->part_size_bytes);
        return -EINVAL;
    }
    if (cfg->part_size_bytes > (5ULL << 30)) {
        tier_err_set("write-back: part size above 5 GiB");
        return -EINVAL;
    }
    struct wb *wb = calloc(1, sizeof(*wb));
    if (!wb)
        return -ENOMEM;
    int rc = 0;
    wb->cfg = *cfg;
    if (cfg->disk_adm)
        wb->adm = *cfg->disk_adm;
    wb->cfg.disk_adm = NULL; /* wb->adm is the copy in use */
    if (!wb->cfg.upload_threads)
        wb->cfg.upload_threads = 2;
    if (!wb->cfg.parts_parallel)
        wb->cfg.parts_parallel = 4;
    if (!wb->cfg.part_size_bytes)
        wb->cfg.part_size_bytes = WB_DEFAULT_PART_BYTES;
    if (!wb->cfg.backpressure_wait_ms)
        wb->cfg.backpressure_wait_ms = 60000;
    if (!wb->cfg.retry_base_ms)
        wb->cfg.retry_base_ms = 200;
    if (!wb->cfg.retry_max_ms)
        wb->cfg.retry_max_ms = 30000;
    if (!wb->cfg.upload_holdoff_max_ms)
        wb->cfg.upload_holdoff_max_ms = 30000;
    if (!wb->cfg.max_evictable_rows)
        wb->cfg.max_evictable_rows = 10000;
    wb->spool = strdup(cfg->spool_dir);
    if (cfg->journal_path)
        wb->journal_path = strdup(cfg->journal_path);
    else if (asprintf(&wb->journal_path, "%s/journal.db", cfg->spool_dir) < 0)
        wb->journal_path = NULL;
    wb->cfg.spool_dir = wb->spool;
    wb->cfg.journal_path = wb->journal_path;
    pthread_mutex_init(&wb->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wb->cond, &ca);
    pthread_cond_init(&wb->work, &ca);
    pthread_condattr_destroy(&ca);
    if (!wb->spool || !wb->journal_path) {
        rc = -ENOMEM;
        goto fail;
    }
    rc = mkdir_p1(wb->spool);
    if (rc) {
        tier_err_set("write-back: cannot create spool directory %s: %s", wb->spool, strerror(-rc));
        goto fail;
    }
    rc = private_path(wb->spool, true);
    if (!rc)
        rc = private_path(wb->journal_path, false);
    if (rc)
        goto fail;
    rc = jr_open(wb->journal_path, &wb->db);
    if (rc)
        goto fail;
    struct load_ctx lc = {.wb = wb};
    pthread_mutex_lock(&wb->lock);
    rc = jr_load(wb->db, recover_one, &lc);
    if (!rc)
        sweep_spool(wb);
    if (!rc)
        wb_prune_evictable(wb);
    pthread_mutex_unlock(&wb->lock);
    if (rc)
        goto fail;
    if (wb->stats.recovered_sealed + wb->stats.recovered_uploading + wb->stats.recovered_discarded +
            wb->stats.recovered_aborts >
        0)
        log_info("write-back recovery: %llu sealed and %llu partly uploaded files resume, "
                 "%llu unclosed files discarded, %llu cancellations to finish",
                 (unsigned long long)wb->stats.recovered_sealed,
                 (unsigned long long)wb->stats.recovered_uploading,
                 (unsigned long long)wb->stats.recovered_discarded,
                 (unsigned long long)wb->stats.recovered_aborts);
    rc = wb_uploaders_start(wb);
    if (rc)
        goto fail;
    *out = wb;
    return 0;
fail:
    while (wb->head)
        wb_entry_drop(wb, wb->head);
    wb_free(wb);
    return rc;
}

void wb_close(struct wb *wb)
{
    if (!wb)
        return;
    wb_uploaders_stop(wb);
    awaiter_stop(wb);
    pthread_mutex_lock(&wb->lock);
    while (wb->head) {
        struct wb_file *fh = wb->head->fh;
        wb_entry_drop(wb, wb->head);
        if (fh) {
            if (fh->fd >= 0)
                close(fh->fd);
            wb_sum_end(fh->sum, NULL);
            free(fh);
        }
    }
    pthread_mutex_unlock(&wb->lock);
    wb_free(wb);
}
