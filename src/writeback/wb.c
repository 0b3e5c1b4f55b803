/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb.c - the write-back file API (wb.h): open/recovery, the writer's handle (create, write,
 * truncate, fsync, close), unlink, rename, wait, read-your-writes, listing and backpressure.
 *
 * Called by the daemon's FUSE write path and control API; the uploader threads live in upload.c.
 * Locking: one mutex (wb->lock) guards every entry and the journal connection; journal commits
 * happen under it (see journal.c), staging-file data I/O and backend requests never do. Creating
 * or removing a staging file (a metadata syscall) is done under the lock so that the file and its
 * row can never disagree as seen by another thread.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "writeback/wb_int.h"

#define CHECKSUM_CHUNK_BYTES (1u << 20)

/* ---- entries --------------------------------------------------------------------------------- */

static bool state_dirty(enum wb_state s)
{
    return s == WB_OPEN || s == WB_SEALED || s == WB_UPLOADING;
}

static bool state_local(enum wb_state s)
{
    return s == WB_OPEN || s == WB_SEALED || s == WB_UPLOADING || s == WB_UPLOADED ||
           s == WB_FAILED;
}

void wb_entry_set_state(struct wb *wb, struct wb_entry *e, enum wb_state st)
{
    if (state_dirty(e->state) && !state_dirty(st))
        wb->dirty_bytes -= e->size;
    else if (!state_dirty(e->state) && state_dirty(st))
        wb->dirty_bytes += e->size;
    e->state = st;
    wbi_state_changed(wb, e);
}

int wb_commit(struct wb *wb, struct wb_entry *e, enum wb_jr_op op, const struct wb_change *c)
{
    bool drops_upload = op == WB_JR_UPLOADED || op == WB_JR_FAIL;
    char *uid = NULL, *err = NULL;
    if ((c->set_upload && c->upload_id && !(uid = strdup(c->upload_id))) ||
        (c->error && !(err = strdup(c->error)))) {
        free(uid);
        return -ENOMEM;
    }
    struct wb_entry p = *e; /* the row as proposed; its strings are borrowed */
    p.state = c->state;
    if (c->etag)
        tier_strlcpy(p.etag, c->etag, sizeof(p.etag));
    if (c->set_upload || drops_upload)
        p.upload_id = uid;
    if (err)
        p.error = err;
    if (c->uploaded_ns)
        p.uploaded_ns = c->uploaded_ns;
    int rc = op == WB_JR_UPLOAD     ? jr_set_upload(wb->db, &p)
             : op == WB_JR_UPLOADED ? jr_uploaded(wb->db, &p)
             : op == WB_JR_FAIL     ? jr_fail_sealed(wb->db, &p)
                                    : jr_set_state(wb->db, &p);
    if (rc) {
        free(uid);
        free(err);
        return rc;
    }
    memcpy(e->etag, p.etag, sizeof(e->etag));
    if (c->set_upload || drops_upload) {
        free(e->upload_id);
        e->upload_id = uid;
    }
    if (err) {
        free(e->error);
        e->error = err;
    }
    e->uploaded_ns = p.uploaded_ns;
    wb_entry_set_state(wb, e, c->state);
    return 0;
}

static void entry_set_size(struct wb *wb, struct wb_entry *e, uint64_t size)
{
    uint64_t before = wb->dirty_bytes, half = wb->cfg.max_dirty_bytes / 2;
    if (state_dirty(e->state))
        wb->dirty_bytes = wb->dirty_bytes - e->size + size;
    e->size = size;
    /* the backlog reached half of its bound: held uploads start now (wb_holdoff_until) */
    if (wb->cfg.upload_holdoff_ms && half && before < half && wb->dirty_bytes >= half)
        pthread_cond_broadcast(&wb->work);
}

static void entry_link(struct wb *wb, struct wb_entry *e)
{
    e->prev = NULL;
    e->next = wb->head;
    if (wb->head)
        wb->head->prev = e;
    wb->head = e;
    if (state_dirty(e->state))
        wb->dirty_bytes += e->size;
    wbi_insert(wb, e);
}

void wb_entry_drop(struct wb *wb, struct wb_entry *e)
{
    if (state_dirty(e->state))
        wb->dirty_bytes -= e->size;
    if (e->prev)
        e->prev->next = e->next;
    else
        wb->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    wbi_remove(wb, e);
    if (e->fh)
        e->fh->e = NULL;
    wb_entry_free(e);
    pthread_cond_broadcast(&wb->cond);
}

void wb_staging_path(const struct wb *wb, int64_t id, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%s/%lld.stg", wb->spool, (long long)id);
}

static void staging_remove(const struct wb *wb, int64_t id)
{
    char p[PATH_MAX];
    wb_staging_path(wb, id, p, sizeof(p));
    if (unlink(p) != 0 && errno != ENOENT)
        log_warn("write-back: cannot remove staging file %s: %s", p, strerror(errno));
}

static struct wb_entry *find_id(struct wb *wb, int64_t id)
{
    return wbi_find_id(wb, id);
}

static struct wb_entry *find_live(struct wb *wb, const char *backend, const char *key)
{
    struct wb_entry *e;
    WB_FOR_KEY (wb, e, backend, key) {
        if (e->state != WB_CANCELLED)
            return e;
    }
    return NULL;
}

static bool matches(const struct wb_entry *e, const char *backend, const char *prefix)
{
    if (backend && strcmp(e->backend, backend) != 0)
        return false;
    return !prefix || strncmp(e->key, prefix, strlen(prefix)) == 0;
}

/* The entries of backend (NULL: any) whose key starts with prefix: a range of the key index, or
 * with no backend named, a walk of every entry. No entry may be added or dropped meanwhile. */
struct entry_iter {
    struct wb *wb;
    const char *backend, *prefix;
    size_t plen, i;
    struct wb_entry *next;
};

static void iter_init(struct entry_iter *it, struct wb *wb, const char *backend, const char *prefix)
{
    *it = (struct entry_iter){.wb = wb, .backend = backend, .prefix = prefix ? prefix : ""};
    it->plen = strlen(it->prefix);
    if (backend)
        it->i = wbi_first(wb, backend, it->prefix);
    else
        it->next = wb->head;
}

static struct wb_entry *iter_next(struct entry_iter *it)
{
    if (it->backend)
        return wbi_prefix_at(it->wb, it->i++, it->backend, it->prefix, it->plen);
    while (it->next) {
        struct wb_entry *e = it->next;
        it->next = e->next;
        it->wb->stats.index_visits++; /* every row examined counts, as in the key index */
        if (matches(e, NULL, it->prefix))
            return e;
    }
    return NULL;
}

void wb_emit(struct wb *wb, enum wb_event ev, int64_t id)
{
    if (wb->cfg.on_event)
        wb->cfg.on_event(wb->cfg.event_ctx, ev, id);
}

static void abs_deadline(struct timespec *ts, uint64_t mono_ns)
{
    ts->tv_sec = (time_t)(mono_ns / TIER_NS_PER_SEC);
    ts->tv_nsec = (long)(mono_ns % TIER_NS_PER_SEC);
}

/* Wait until the uploader that owns e (if any) stopped working on it; returns the entry again
 * (NULL if it went away meanwhile). wb->lock held. */
static struct wb_entry *quiesce(struct wb *wb, struct wb_entry *e)
{
    int64_t id = e->id;
    while (e && e->busy) {
        e->interrupt = true;
        wb->stats.busy_waiters++;
        pthread_cond_wait(&wb->cond, &wb->lock);
        wb->stats.busy_waiters--;
        e = find_id(wb, id);
    }
    if (e)
        e->interrupt = false;
    return e;
}

/* Cancel a live, quiesced entry (unlink or overwrite). Commit first, then drop the local copy;
 * an upload id to abort or an object to delete turns the row into a CANCELLED row that the
 * uploader finishes. wb->lock held. */
static int cancel_entry(struct wb *wb, struct wb_entry *e)
{
    int rc;
    /* an unjournalled multipart upload may exist (mpu_orphans_ns): the CANCELLED row looks */
    bool remote = e->upload_id || wb_entry_has_object(e) || e->mpu_orphans_ns;
    if (!remote) {
        rc = jr_delete(wb->db, e->id);
        if (rc)
            return rc;
        staging_remove(wb, e->id);
        wb_entry_drop(wb, e);
        return 0;
    }
    /* the etag stays only when the object (may) exist: the uploader then deletes the key */
    struct wb_change c = {.state = WB_CANCELLED,
                          .etag = wb_entry_has_object(e) ? wb_cancel_etag(e) : ""};
    rc = wb_commit(wb, e, WB_JR_STATE, &c);
    if (rc)
        return rc;
    if (e->fh)
        e->fh->e = NULL;
    e->fh = NULL;
    staging_remove(wb, e->id);
    e->next_try_mono_ns = 0;
    e->attempts = 0;
    pthread_cond_broadcast(&wb->work);
    pthread_cond_broadcast(&wb->cond);
    return 0;
}

/* The head of the ready queue: sealed_mono_ns grows along it (seals append with the clock,
 * recovery derives it from sealed_ns, in that order), so the first is the oldest. */
uint64_t wb_oldest_pending_age_ms(struct wb *wb, uint64_t now)
{
    const struct wb_entry *e = wb->ready;
    if (!e || !e->sealed_mono_ns || now <= e->sealed_mono_ns)
        return 0;
    return (now - e->sealed_mono_ns) / TIER_NS_PER_MS;
}

/* The sealed_ns of a seal now: the clock, made strictly greater than every earlier seal's (also
 * those of the journal, recover_one), so that seal order survives a clock step back and equal
 * readings, and recovery queues the rows in the order they were sealed. */
static int64_t next_sealed_ns(struct wb *wb)
{
    int64_t t = (int64_t)tier_now_real_ns();
    if (t <= wb->last_sealed_ns)
        t = wb->last_sealed_ns + 1;
    wb->last_sealed_ns = t;
    return t;
}

static bool over_bounds(struct wb *wb, uint64_t growth)
{
    if (wb->cfg.max_dirty_bytes && wb->dirty_bytes + growth > wb->cfg.max_dirty_bytes)
        return true;
    if (wb->cfg.max_dirty_age_ms &&
        wb_oldest_pending_age_ms(wb, tier_now_mono_ns()) > wb->cfg.max_dirty_age_ms)
        return true;
    return false;
}

/* Backpressure: wait (bounded) while adding growth bytes would exceed the backlog bounds.
 * wb->lock held; it is released while waiting. */
static int backpressure_wait(struct wb *wb, uint64_t growth)
{
    if (!over_bounds(wb, growth))
        return 0;
    wb->stats.backpressure_waits++;
    wb->bp_waiters++; /* lifts the upload hold-off: a held writer must not wait for itself */
    pthread_cond_broadcast(&wb->work);
    uint64_t deadline = tier_now_mono_ns() + wb->cfg.backpressure_wait_ms * TIER_NS_PER_MS;
    int rc = 0;
    while (over_bounds(wb, growth)) {
        if (wb->stopping) {
            rc = -ESHUTDOWN;
            break;
        }
        uint64_t now = tier_now_mono_ns();
        if (now >= deadline) {
            tier_err_set("write-back backlog over its bound (%llu dirty bytes, max %llu) for "
                         "%llu ms; uploads are not keeping up",
                         (unsigned long long)wb->dirty_bytes,
                         (unsigned long long)wb->cfg.max_dirty_bytes,
                         (unsigned long long)wb->cfg.backpressure_wait_ms);
            rc = -ENOSPC;
            break;
        }
        /* The age bound changes with time alone, so re-check at least every 100 ms. */
        uint64_t until = now + 100 * TIER_NS_PER_MS;
        struct timespec ts;
        abs_deadline(&ts, until < deadline ? until : deadline);
        pthread_cond_timedwait(&wb->cond, &wb->lock, &ts);
    }
    wb->bp_waiters--;
    return rc;
}

/* A writer was active now: uploads hold off (burst absorption, see wb_holdoff_until). */
static void note_write(struct wb *wb)
{
    if (wb->cfg.upload_holdoff_ms)
        atomic_store_explicit(&wb->last_write_mono_ns, tier_now_mono_ns(), memory_order_relaxed);
}

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

static void awaiter_stop(struct wb *wb);

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
            free(fh);
        }
    }
    pthread_mutex_unlock(&wb->lock);
    wb_free(wb);
}

/* ---- writer's handle ------------------------------------------------------------------------- */

static int check_names(const char *backend_name, const char *key)
{
    if (!backend_name || !*backend_name) {
        tier_err_set("write-back: empty backend name");
        return -EINVAL;
    }
    return backend_key_valid(key, key ? strlen(key) : 0, false);
}

/* A file is created only under a key its backend can take (a name the POSIX backend reserves
 * would be sealed and then refused for ever). An unknown backend name is left to the uploader,
 * which waits for it (wb_resolve_fn). */
static int check_create(struct wb *wb, const char *backend_name, const char *key)
{
    int rc = check_names(backend_name, key);
    struct backend *be = rc ? NULL : wb->cfg.resolve(wb->cfg.resolve_ctx, backend_name);
    return be ? backend_key_check(be, key) : rc;
}

static int fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

int wb_file_create(struct wb *wb, const char *backend_name, const char *key, struct wb_file **out)
{
    return wb_file_create_ex(wb, backend_name, key, 0, out);
}

int wb_file_create_ex(struct wb *wb, const char *backend_name, const char *key, unsigned flags,
                      struct wb_file **out)
{
    int rc = check_create(wb, backend_name, key);
    if (rc)
        return rc;
    if (flags & ~WB_CREATE_REPLACE_AT_SEAL)
        return -EINVAL;
    struct wb_file *fh = calloc(1, sizeof(*fh));
    struct wb_entry *e = calloc(1, sizeof(*e));
    if (!fh || !e) {
        free(fh);
        free(e);
        return -ENOMEM;
    }
    fh->fd = -1;
    e->backend = strdup(backend_name);
    e->key = strdup(key);
    if (!e->backend || !e->key) {
        rc = -ENOMEM;
        goto out_free;
    }
    pthread_mutex_lock(&wb->lock);
    rc = wb->stopping ? -ESHUTDOWN : backpressure_wait(wb, 0);
    if (rc)
        goto out_unlock;
    e->generation = 1;
    e->tenant = wb->cfg.tenant;
    if (flags & WB_CREATE_REPLACE_AT_SEAL) {
        /* The older generations stay live until this one is sealed (wb_file_close cancels
         * them in the seal's transaction); this one is newer than all of them, so that readers
         * (wb_read, wb_list users) pick it. */
        struct wb_entry *o;
        WB_FOR_KEY (wb, o, backend_name, key) {
            if (o->state != WB_CANCELLED && o->generation + 1 > e->generation)
                e->generation = o->generation + 1;
        }
        goto insert;
    }
    /* quiesce() drops the lock while it waits, so when it returns the entry may be gone or
     * already cancelled, and another creator may have inserted a newer one: look again until no
     * live entry is left, so that exactly one generation of a key is ever live (I5). */
    struct wb_entry *old;
    while ((old = find_live(wb, backend_name, key)) != NULL) {
        old = quiesce(wb, old);
        if (!old || old->state == WB_CANCELLED)
            continue;
        if (old->generation + 1 > e->generation)
            e->generation = old->generation + 1;
        wb_orphans_inherit(e, old);
        old->mpu_orphans_ns = 0; /* moved to e: the cancelled row does not look too */
        rc = cancel_entry(wb, old);
        if (rc)
            goto out_unlock;
    }
insert:
    e->state = WB_OPEN;
    e->created_ns = (int64_t)tier_now_real_ns();
    rc = wbi_reserve(wb, 1);
    if (!rc)
        rc = jr_insert(wb->db, e);
    if (rc)
        goto out_unlock;
    char path[PATH_MAX];
    wb_staging_path(wb, e->id, path, sizeof(path));
    fh->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    rc = fh->fd < 0 ? -errno : 0;
    if (rc) {
        tier_err_set("write-back: cannot create staging file %s: %s", path, strerror(-rc));
        if (fh->fd >= 0) {
            close(fh->fd);
            unlink(path);
        }
        jr_delete(wb->db, e->id);
        goto out_unlock;
    }
    fh->wb = wb;
    fh->tenant = e->tenant;
    fh->e = e;
    fh->id = e->id;
    e->fh = fh;
    entry_link(wb, e);
    note_write(wb);
    pthread_mutex_unlock(&wb->lock);
    /* The directory entry is made durable outside the lock (a directory fsync can take
     * milliseconds, and every metadata call of the mount waits for wb->lock); nothing is
     * promised before close, and an OPEN row is discarded at recovery anyway. */
    rc = fsync_dir(wb->spool);
    if (rc) {
        tier_err_set("write-back: cannot fsync the spool directory %s: %s", wb->spool,
                     strerror(-rc));
        wb_file_discard(fh);
        return rc;
    }
    *out = fh;
    return 0;
out_unlock:
    pthread_mutex_unlock(&wb->lock);
out_free:
    wb_entry_free(e);
    free(fh);
    return rc;
}

int64_t wb_file_id(const struct wb_file *fh)
{
    return fh->id;
}

/* The file is FAILED from now on (fail-stop). The journal row says so too, so that recovery
 * discards it even if the process dies before close. */
static int record_failure(struct wb_file *fh, int err)
{
    struct wb *wb = fh->wb;
    pthread_mutex_lock(&wb->lock);
    if (!fh->error)
        fh->error = err;
    struct wb_entry *e = fh->e;
    if (e && e->state == WB_OPEN) {
        /* if this commit fails the row stays OPEN, which recovery discards just the same; the
         * handle is failed either way (fh->error) */
        if (wb_commit(wb, e, WB_JR_STATE, &(struct wb_change){.state = WB_FAILED}) != 0)
            log_warn("write-back: could not journal the failure of %s", e->key);
        pthread_cond_broadcast(&wb->cond);
    }
    pthread_mutex_unlock(&wb->lock);
    return err;
}

static ssize_t do_pwrite(struct wb *wb, int fd, const void *buf, size_t len, off_t off)
{
    const struct wb_io_hooks *io = wb->cfg.io;
    if (io && io->pwrite)
        return io->pwrite(io->ctx, fd, buf, len, off);
    ssize_t n = pwrite(fd, buf, len, off);
    return n < 0 ? -errno : n;
}

static int do_fsync(struct wb *wb, int fd)
{
    const struct wb_io_hooks *io = wb->cfg.io;
    if (io && io->fsync)
        return io->fsync(io->ctx, fd);
    return fsync(fd) == 0 ? 0 : -errno;
}

/* Account for the file growing to new_size, waiting for backpressure first. Returns 0, or
 * -ENOSPC/-ESHUTDOWN with nothing changed. */
static int reserve(struct wb_file *fh, uint64_t new_size)
{
    struct wb *wb = fh->wb;
    int rc = 0;
    if (new_size > WB_MAX_FILE_BYTES) {
        tier_err_set("write-back: a file of %llu bytes is over the %llu an object may have",
                     (unsigned long long)new_size, (unsigned long long)WB_MAX_FILE_BYTES);
        return -EFBIG;
    }
    pthread_mutex_lock(&wb->lock);
    struct wb_entry *e = fh->e;
    if (e && new_size > e->size) {
        rc = backpressure_wait(wb, new_size - e->size);
        e = fh->e;
        if (!rc && e && new_size > e->size)
            entry_set_size(wb, e, new_size);
    }
    pthread_mutex_unlock(&wb->lock);
    return rc;
}

ssize_t wb_write(struct wb_file *fh, const void *buf, size_t len, off_t off)
{
    if (fh->error)
        return -EIO;
    if (off < 0 || len > (size_t)SSIZE_MAX || (uint64_t)off + len > (uint64_t)INT64_MAX)
        return -EINVAL;
    if (len == 0)
        return 0;
    int rc = reserve(fh, (uint64_t)off + len);
    if (rc)
        return rc;
    /* the spool write is disk I/O of the writer's tenant: admitted in the disk lane (waits) */
    const struct tier_ioctx io = {.tenant = fh->tenant, .cls = TIER_IO_CHECKPOINT};
    bool adm = tier_disk_enter(&fh->wb->adm, &io, len, false) == 0; /* may wait */
    size_t done = 0;
    int zero_writes = 0;
    ssize_t res = (ssize_t)len;
    while (done < len) {
        ssize_t n =
            do_pwrite(fh->wb, fh->fd, (const char *)buf + done, len - done, off + (off_t)done);
        if (n == -EINTR)
            continue;
        if (n < 0 || (n == 0 && ++zero_writes > 8)) {
            res = n < 0 ? n : -EIO;
            break;
        }
        done += (size_t)n;
    }
    if (adm)
        tier_disk_leave(&fh->wb->adm, &io, len, res);
    if (res < 0)
        return record_failure(fh, (int)res);
    note_write(fh->wb);
    return (ssize_t)len;
}

int wb_truncate(struct wb_file *fh, off_t size)
{
    if (fh->error)
        return -EIO;
    if (size < 0)
        return -EINVAL;
    int rc = reserve(fh, (uint64_t)size);
    if (rc)
        return rc;
    if (ftruncate(fh->fd, size) != 0)
        return record_failure(fh, -errno);
    struct wb *wb = fh->wb;
    note_write(wb);
    pthread_mutex_lock(&wb->lock);
    if (fh->e)
        entry_set_size(wb, fh->e, (uint64_t)size);
    pthread_mutex_unlock(&wb->lock);
    return 0;
}

ssize_t wb_file_read(struct wb_file *fh, void *buf, size_t len, off_t off)
{
    ssize_t n = pread(fh->fd, buf, len, off);
    return n < 0 ? -errno : n;
}

/* An fsync or a seal (fsync + checksum) takes as long as writing: the writer is active during it.
 */
static void busy_begin(struct wb *wb)
{
    if (wb->cfg.upload_holdoff_ms)
        atomic_fetch_add_explicit(&wb->writers_busy, 1, memory_order_relaxed);
}

static void busy_end(struct wb *wb)
{
    if (wb->cfg.upload_holdoff_ms) {
        note_write(wb);
        atomic_fetch_sub_explicit(&wb->writers_busy, 1, memory_order_relaxed);
    }
}

int wb_file_fsync(struct wb_file *fh)
{
    if (fh->error)
        return -EIO;
    busy_begin(fh->wb);
    int rc = do_fsync(fh->wb, fh->fd);
    busy_end(fh->wb);
    if (rc) {
        /* After a failed fsync the page cache may have dropped the dirty pages and a retry
         * would "succeed" without the data (fsyncgate): never report success again. */
        record_failure(fh, rc);
        return -EIO;
    }
    return 0;
}

/* Streaming seal checksums: "xxh128:" and the XXH3 128-bit hash in its canonical (big-endian)
 * hex form, as `xxh128sum` prints it; "sha256:" only to verify rows of journals written before
 * XXH3 (SHA-256, about 0.55 s per GiB on one core with SHA-NI, was the largest cost of the
 * writer's close). */
struct wb_sum {
    bool sha;
    XXH3_state_t *xs;
    EVP_MD_CTX *md;
};

int wb_sum_begin(struct wb_sum **out, const char *like)
{
    struct wb_sum *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->sha = like &&
             strncmp(like, WB_CHECKSUM_SHA256_PREFIX, sizeof(WB_CHECKSUM_SHA256_PREFIX) - 1) == 0;
    bool ok = c->sha ? (c->md = EVP_MD_CTX_new()) && EVP_DigestInit_ex(c->md, EVP_sha256(), NULL)
                     : (c->xs = XXH3_createState()) && XXH3_128bits_reset(c->xs) == XXH_OK;
    if (!ok) {
        wb_sum_end(c, NULL);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

void wb_sum_update(struct wb_sum *c, const void *buf, size_t len)
{
    if (c->sha)
        EVP_DigestUpdate(c->md, buf, len);
    else
        XXH3_128bits_update(c->xs, buf, len);
}

void wb_sum_end(struct wb_sum *c, char out[WB_CHECKSUM_MAX])
{
    if (!c)
        return;
    if (out && c->sha) {
        unsigned char md[32];
        unsigned int n = 0;
        EVP_DigestFinal_ex(c->md, md, &n);
        memcpy(out, WB_CHECKSUM_SHA256_PREFIX, sizeof(WB_CHECKSUM_SHA256_PREFIX) - 1);
        tier_hex(md, n, out + sizeof(WB_CHECKSUM_SHA256_PREFIX) - 1);
    } else if (out) {
        XXH128_canonical_t h;
        XXH128_canonicalFromHash(&h, XXH3_128bits_digest(c->xs));
        memcpy(out, WB_CHECKSUM_PREFIX, sizeof(WB_CHECKSUM_PREFIX) - 1);
        tier_hex(h.digest, sizeof(h.digest), out + sizeof(WB_CHECKSUM_PREFIX) - 1);
    }
    EVP_MD_CTX_free(c->md);
    XXH3_freeState(c->xs);
    free(c);
}

int wb_checksum_fd(int fd, uint64_t size, const char *like, char out[WB_CHECKSUM_MAX])
{
    struct wb_sum *c = NULL;
    unsigned char *buf = malloc(CHECKSUM_CHUNK_BYTES);
    int rc = buf ? wb_sum_begin(&c, like) : -ENOMEM;
    for (uint64_t off = 0; !rc && off < size;) {
        size_t want =
            size - off < CHECKSUM_CHUNK_BYTES ? (size_t)(size - off) : CHECKSUM_CHUNK_BYTES;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -EIO;
            break;
        }
        wb_sum_update(c, buf, (size_t)n);
        off += (uint64_t)n;
    }
    wb_sum_end(c, rc ? NULL : out);
    free(buf);
    return rc;
}

/* Is o a generation that e, being sealed, replaces? (live and not OPEN or a failed writer's:
 * another OPEN generation of the key is left to its own writer; the last one sealed wins. A
 * sealed generation the backend refused is replaced like any other.) */
static bool replaced_by(const struct wb_entry *o, const struct wb_entry *e)
{
    return o != e &&
           (o->state == WB_SEALED || o->state == WB_UPLOADING || o->state == WB_UPLOADED ||
            o->state == WB_EVICTABLE || wb_entry_failed_sealed(o)) &&
           strcmp(o->key, e->key) == 0 && strcmp(o->backend, e->backend) == 0;
}

/* Before sealing fh's generation: mark every generation it replaces `interrupt` (uploaders
 * leave them alone) and wait until no uploader works on any of them. On return (0) *out holds
 * them, all quiesced and interrupted; the caller clears `interrupt` or cancels them. fh->e may
 * be gone on return (unlinked meanwhile). wb->lock held; released while waiting. */
static int quiesce_replaced(struct wb *wb, struct wb_file *fh, struct wb_entry ***out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    for (;;) {
        struct wb_entry *e = fh->e;
        if (!e)
            return 0;
        bool busy = false;
        size_t n = 0;
        struct wb_entry *o;
        WB_FOR_KEY (wb, o, e->backend, e->key) {
            if (replaced_by(o, e)) {
                busy = busy || o->busy;
                n++;
            }
        }
        if (n == 0)
            return 0;
        struct wb_entry **v = malloc(n * sizeof(*v));
        int64_t *ids = malloc(n * sizeof(*ids));
        if (!v || !ids) {
            free(v);
            free(ids);
            return -ENOMEM;
        }
        size_t i = 0;
        WB_FOR_KEY (wb, o, e->backend, e->key) {
            if (replaced_by(o, e)) {
                o->interrupt = true; /* pick() leaves it alone */
                ids[i] = o->id;
                v[i++] = o;
            }
        }
        if (!busy) {
            free(ids);
            *out = v;
            *nout = n;
            return 0;
        }
        free(v);
        wb->stats.busy_waiters++;
        pthread_cond_wait(&wb->cond, &wb->lock);
        wb->stats.busy_waiters--;
        /* Entries may have gone or changed meanwhile: start over from the current list. */
        for (i = 0; i < n; i++) {
            struct wb_entry *x = find_id(wb, ids[i]);
            if (x)
                x->interrupt = false;
        }
        free(ids);
    }
}

void wb_orphans_inherit(struct wb_entry *r, const struct wb_entry *e)
{
    if (e->mpu_orphans_ns && (!r->mpu_orphans_ns || e->mpu_orphans_ns < r->mpu_orphans_ns))
        r->mpu_orphans_ns = e->mpu_orphans_ns;
}

/* In memory, after jr_seal_replace committed: the generation o, replaced by the sealed
 * generation e, is cancelled (as cancel_entry does after its commit). wb->lock held. */
static void replaced_apply(struct wb *wb, struct wb_entry *o, struct wb_entry *e)
{
    wb_orphans_inherit(e, o); /* the same key: e's cleanup covers what o may have left */
    o->interrupt = false;
    staging_remove(wb, o->id);
    if (!jr_cancel_keeps_row(o)) {
        wb_entry_drop(wb, o);
        return;
    }
    if (!wb_entry_has_object(o))
        o->etag[0] = '\0'; /* the object of this generation never appeared */
    else
        tier_strlcpy(o->etag, wb_cancel_etag(o), sizeof(o->etag)); /* as journalled */
    o->mpu_orphans_ns = 0;                                         /* inherited by e */
    wb_entry_set_state(wb, o, WB_CANCELLED);
    o->next_try_mono_ns = 0;
    o->attempts = 0;
    pthread_cond_broadcast(&wb->work);
    pthread_cond_broadcast(&wb->cond);
}

int wb_commit_seal(struct wb *wb, struct wb_entry *e, uint64_t size,
                   const char checksum[WB_CHECKSUM_MAX], struct wb_entry *const *old, size_t n)
{
    struct wb_entry p = *e; /* the row as proposed; its strings are borrowed */
    p.state = WB_SEALED;
    p.size = size;
    memcpy(p.checksum, checksum, sizeof(p.checksum));
    p.sealed_ns = next_sealed_ns(wb);
    /* One transaction: the new generation is sealed and the ones it replaces are cancelled
     * together, so a crash leaves exactly one of them live (I5). */
    int rc = jr_seal_replace(wb->db, &p, old, n);
    if (rc)
        return rc;
    entry_set_size(wb, e, size);
    memcpy(e->checksum, p.checksum, sizeof(e->checksum));
    e->sealed_ns = p.sealed_ns; /* before the state: it orders the ready queue */
    wb_entry_set_state(wb, e, WB_SEALED);
    e->sealed_mono_ns = tier_now_mono_ns();
    for (size_t i = 0; i < n; i++)
        replaced_apply(wb, old[i], e);
    return 0;
}

/* Drop a FAILED (or never sealed) file of a handle being closed. wb->lock held. */
static void discard_entry(struct wb *wb, struct wb_entry *e)
{
    if (jr_delete(wb->db, e->id) != 0)
        log_warn("write-back: could not drop failed file %s from the journal; recovery will",
                 e->key);
    staging_remove(wb, e->id);
    wb_entry_drop(wb, e);
}

static int wait_uploaded(struct wb *wb, int64_t id)
{
    int rc = 0;
    pthread_mutex_lock(&wb->lock);
    wb->waiters++; /* lifts the upload hold-off, as wb_wait */
    pthread_cond_broadcast(&wb->work);
    for (;;) {
        struct wb_entry *e = find_id(wb, id);
        if (!e || e->state == WB_CANCELLED || e->state == WB_UPLOADED || e->state == WB_EVICTABLE)
            break;
        if (e->state == WB_FAILED) {
            tier_err_set("write-back: %s:%s will never be uploaded: %s", e->backend, e->key,
                         e->error ? e->error : "failed");
            rc = -EIO;
            break;
        }
        if (wb->stopping) {
            rc = -ESHUTDOWN;
            break;
        }
        pthread_cond_wait(&wb->cond, &wb->lock);
    }
    wb->waiters--;
    pthread_mutex_unlock(&wb->lock);
    return rc;
}

static int file_close(struct wb_file *fh, int64_t *sealed_id);

int wb_file_close(struct wb_file *fh)
{
    struct wb *wb = fh->wb; /* fh is freed by file_close */
    int64_t id = 0;
    busy_begin(wb);
    int rc = file_close(fh, &id);
    busy_end(wb);
    if (rc == 0 && id && wb->cfg.durability == WB_DURABILITY_REMOTE)
        rc = wait_uploaded(wb, id);
    return rc;
}

/* Seal fh (fsync, XXH3-128 checksum, journal) and free it; *sealed_id gets the sealed row's id. */
static int file_close(struct wb_file *fh, int64_t *sealed_id)
{
    struct wb *wb = fh->wb;
    int rc = fh->error ? -EIO : 0;
    struct stat st;
    char sum[WB_CHECKSUM_MAX] = "";
    if (!rc)
        rc = do_fsync(wb, fh->fd);
    if (rc && !fh->error)
        record_failure(fh, rc);
    if (!rc && fstat(fh->fd, &st) != 0)
        rc = record_failure(fh, -errno);
    if (!rc)
        rc = wb_checksum_fd(fh->fd, (uint64_t)st.st_size, NULL, sum);
    close(fh->fd);
    fh->fd = -1;

    pthread_mutex_lock(&wb->lock);
    struct wb_entry **old = NULL;
    size_t nold = 0;
    if (!rc && fh->e)
        rc = quiesce_replaced(wb, fh, &old, &nold); /* may wait: fh->e is read after it */
    struct wb_entry *e = fh->e;
    if (!e) {
        /* Unlinked or overwritten while open: its data is gone, as with POSIX. */
        for (size_t i = 0; i < nold; i++)
            old[i]->interrupt = false;
        pthread_mutex_unlock(&wb->lock);
        free(old);
        free(fh);
        return 0;
    }
    e->fh = NULL;
    if (!rc)
        rc = wb_commit_seal(wb, e, (uint64_t)st.st_size, sum, old, nold);
    if (rc) { /* e and the generations it would have replaced are as they were */
        for (size_t i = 0; i < nold; i++)
            old[i]->interrupt = false;
        free(old);
        discard_entry(wb, e);
        pthread_mutex_unlock(&wb->lock);
        free(fh);
        return rc == -ENOSPC ? rc : -EIO;
    }
    free(old);
    int64_t id = e->id;
    pthread_cond_broadcast(&wb->work);
    pthread_mutex_unlock(&wb->lock);
    free(fh);
    wb_emit(wb, WB_EV_SEALED, id);
    *sealed_id = id;
    return 0;
}

void wb_file_set_tenant(struct wb_file *fh, uint32_t tenant)
{
    pthread_mutex_lock(&fh->wb->lock);
    fh->tenant = tenant; /* the handle's owner thread reads it (wb_write) */
    if (fh->e)
        fh->e->tenant = tenant;
    pthread_mutex_unlock(&fh->wb->lock);
}

void wb_file_discard(struct wb_file *fh)
{
    if (!fh)
        return;
    struct wb *wb = fh->wb;
    if (fh->fd >= 0)
        close(fh->fd);
    fh->fd = -1;
    pthread_mutex_lock(&wb->lock);
    struct wb_entry *e = fh->e;
    if (e) {
        e->fh = NULL;
        discard_entry(wb, e);
    }
    pthread_mutex_unlock(&wb->lock);
    free(fh);
}

/* ---- namespace operations -------------------------------------------------------------------- */

/* Is e the uploaded generation etag (UPLOADED or EVICTABLE with that ETag)? */
static bool entry_is_version(const struct wb_entry *e, const char *etag)
{
    return (e->state == WB_UPLOADED || e->state == WB_EVICTABLE) && strcmp(e->etag, etag) == 0;
}

/* 0 while every live generation of backend:key is the uploaded version etag, else -EAGAIN.
 * wb->lock held. */
static int only_version(struct wb *wb, const char *backend_name, const char *key, const char *etag)
{
    struct entry_iter it;
    iter_init(&it, wb, backend_name, key);
    for (struct wb_entry *x; (x = iter_next(&it)) != NULL;)
        if (strcmp(x->key, key) == 0 && x->state != WB_CANCELLED && !entry_is_version(x, etag))
            return -EAGAIN;
    return 0;
}

/* wb_unlink, and with if_etag (wb_unlink_if) only while every live generation of key is the
 * uploaded version if_etag: checked before each cancel, with the lock held (quiesce() may drop
 * it, and a writer may create a generation meanwhile). */
static int unlink_key(struct wb *wb, const char *backend_name, const char *key, const char *if_etag)
{
    int rc = check_names(backend_name, key);
    if (rc)
        return rc;
    pthread_mutex_lock(&wb->lock);
    if (if_etag)
        rc = only_version(wb, backend_name, key, if_etag);
    /* Every generation: an OPEN replacement (WB_CREATE_REPLACE_AT_SEAL) and the one it would
     * have replaced. quiesce() drops the lock, so look again until none is left. */
    bool found = false;
    struct wb_entry *e;
    while (!rc && (e = find_live(wb, backend_name, key)) != NULL) {
        e = quiesce(wb, e);
        if (!e || e->state == WB_CANCELLED)
            continue;
        /* quiesce() may have dropped the lock: a writer may have started a generation since,
         * and nothing may be cancelled then (not even this one) */
        if (if_etag && (rc = only_version(wb, backend_name, key, if_etag)) != 0)
            break;
        found = true;
        rc = cancel_entry(wb, e);
    }
    if (!rc && !found)
        rc = -ENOENT;
    pthread_mutex_unlock(&wb->lock);
    return rc;
}

int wb_unlink(struct wb *wb, const char *backend_name, const char *key)
{
    return unlink_key(wb, backend_name, key, NULL);
}

int wb_unlink_if(struct wb *wb, const char *backend_name, const char *key, const char *etag)
{
    return unlink_key(wb, backend_name, key, etag ? etag : "");
}

static struct wb_entry *entry_new(const char *backend, const char *key)
{
    struct wb_entry *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->backend = strdup(backend);
    t->key = strdup(key);
    if (!t->backend || !t->key) {
        wb_entry_free(t);
        return NULL;
    }
    return t;
}

/* The tombstone that takes over what e's old key already has in the backend (a multipart
 * upload, the uploaded object, or uploads no row names): a CANCELLED row of the old key,
 * committed with the re-key. *out is NULL when there is nothing to hand over. */
static int tombstone_new(const struct wb_entry *e, struct wb_entry **out)
{
    *out = NULL;
    if (!e->upload_id && !wb_entry_has_object(e) && !e->mpu_orphans_ns)
        return 0;
    struct wb_entry *t = entry_new(e->backend, e->key);
    if (!t)
        return -ENOMEM;
    t->generation = e->generation;
    t->state = WB_CANCELLED;
    t->created_ns = e->created_ns;
    if (e->upload_id && !(t->upload_id = strdup(e->upload_id))) {
        wb_entry_free(t);
        return -ENOMEM;
    }
    if (wb_entry_has_object(e))
        tier_strlcpy(t->etag, wb_cancel_etag(e), sizeof(t->etag));
    t->mpu_orphans_ns = e->mpu_orphans_ns; /* uploads left at the old key */
    *out = t;
    return 0;
}

int wb_commit_rekey(struct wb *wb, struct wb_entry *e, const char *new_key, int64_t generation)
{
    char *nk = strdup(new_key);
    struct wb_entry *t = NULL;
    int rc = nk ? tombstone_new(e, &t) : -ENOMEM;
    if (!rc)
        rc = wbi_reserve(wb, 1); /* the tombstone */
    struct wb_entry p = *e;      /* the row as proposed; its strings are borrowed */
    p.key = nk;
    p.generation = generation;
    p.state = e->state == WB_OPEN ? WB_OPEN : WB_SEALED;
    if (!rc)
        rc = jr_rekey(wb->db, &p, t);
    if (rc) {
        wb_entry_free(t);
        free(nk);
        return rc;
    }
    wbi_remove(wb, e); /* re-inserted under its new key */
    free(e->key);
    e->key = nk;
    e->generation = generation;
    wbi_insert(wb, e);
    wb_entry_set_state(wb, e, p.state);
    free(e->upload_id);
    e->upload_id = NULL;
    e->etag[0] = '\0';
    e->uploaded_ns = 0;
    free(e->parts);
    e->parts = NULL;
    free(e->part_bytes);
    e->part_bytes = NULL;
    e->nparts = e->parts_done = 0;
    e->attempts = 0;
    if (t)
        e->mpu_orphans_ns = 0; /* handed to the tombstone, which lists the old key */
    e->next_try_mono_ns = 0;
    if (p.state == WB_SEALED && !e->sealed_mono_ns)
        e->sealed_mono_ns = tier_now_mono_ns();
    if (t)
        entry_link(wb, t);
    pthread_cond_broadcast(&wb->work);
    pthread_cond_broadcast(&wb->cond);
    return 0;
}

/* 0 while e has a local copy to re-upload under new_key, else why not (-EIO: FAILED, -EXDEV:
 * EVICTABLE). */
static int rename_has_copy(const struct wb_entry *e, const char *new_key)
{
    if (e->state != WB_EVICTABLE && e->state != WB_FAILED)
        return 0;
    tier_err_set("write-back: '%s' has no local copy to re-upload under '%s'", e->key, new_key);
    return e->state == WB_FAILED ? -EIO : -EXDEV;
}

/* The rename's source: the one live generation of old_key, quiesced, with a local copy.
 * wb->lock held; released while waiting for an uploader. */
static int rename_source(struct wb *wb, const char *backend_name, const char *old_key,
                         const char *new_key, struct wb_entry **out)
{
    struct wb_entry *e = find_live(wb, backend_name, old_key);
    if (e)
        e = quiesce(wb, e);
    if (!e || e->state == WB_CANCELLED)
        return -ENOENT;
    size_t nlive = 0;
    struct wb_entry *o;
    WB_FOR_KEY (wb, o, backend_name, old_key) {
        nlive += o->state != WB_CANCELLED;
    }
    if (nlive > 1) {
        tier_err_set("write-back: '%s' has a replacement being written; rename it once that is "
                     "closed",
                     old_key);
        return -EBUSY;
    }
    int rc = rename_has_copy(e, new_key);
    if (!rc)
        *out = e;
    return rc;
}

/* Cancel every generation at new_key (an OPEN replacement there too), the source *ep kept off
 * the uploaders meanwhile; *ep is looked up again after each wait. *generation: the one the
 * re-keyed row takes (after the newest replaced, else its own). wb->lock held; released while
 * waiting. */
static int rename_clear_dest(struct wb *wb, struct wb_entry **ep, const char *backend_name,
                             const char *new_key, int64_t *generation)
{
    struct wb_entry *e = *ep, *dst;
    int64_t id = e->id, dst_gen = 0;
    bool had_dst = false;
    while ((dst = find_live(wb, backend_name, new_key)) != NULL) {
        /* Keep the uploaders off e (pick() skips interrupted entries) while waiting for dst. */
        e->interrupt = true;
        dst = quiesce(wb, dst);
        e = find_id(wb, id);
        if (!e || e->state == WB_CANCELLED) {
            if (e)
                e->interrupt = false;
            return -ENOENT;
        }
        if (!dst || dst->state == WB_CANCELLED)
            continue;
        had_dst = true;
        if (dst->generation > dst_gen)
            dst_gen = dst->generation;
        int rc = cancel_entry(wb, dst);
        if (rc) {
            e->interrupt = false;
            return rc;
        }
    }
    e->interrupt = false;
    *ep = e;
    *generation = had_dst ? dst_gen + 1 : e->generation;
    return 0;
}

int wb_rename(struct wb *wb, const char *backend_name, const char *old_key, const char *new_key)
{
    int rc = check_names(backend_name, old_key);
    if (!rc)
        rc = check_create(wb, backend_name, new_key);
    if (rc)
        return rc;
    if (strcmp(old_key, new_key) == 0)
        return 0;
    pthread_mutex_lock(&wb->lock);
    struct wb_entry *e = NULL;
    int64_t generation = 0;
    rc = rename_source(wb, backend_name, old_key, new_key, &e);
    if (!rc)
        rc = rename_clear_dest(wb, &e, backend_name, new_key, &generation);
    /* The waits above dropped the lock: retention may have dropped e's local copy meanwhile
     * (EVICTABLE), and a re-key needs that copy to re-upload. Check again. */
    if (!rc)
        rc = rename_has_copy(e, new_key);
    if (!rc)
        rc = wb_commit_rekey(wb, e, new_key, generation);
    pthread_mutex_unlock(&wb->lock);
    return rc;
}

/* Where a wait on (backend_name, prefix) stands: 1 while a sealed file under it is not yet in
 * the backend (or a cancellation not yet applied), 0 when none is, -EIO (tier_err_msg() names
 * it) while a sealed file under it is FAILED: it will never be durable, so say so now rather
 * than at the timeout. wb->lock held. */
static int wait_verdict(struct wb *wb, const char *backend_name, const char *prefix, bool exact)
{
    bool pending = false;
    struct entry_iter it;
    iter_init(&it, wb, backend_name, prefix);
    if (exact && backend_name) /* one key: its generations, not every key it prefixes */
        it.plen = SIZE_MAX;
    for (struct wb_entry *e; (e = iter_next(&it)) != NULL;) {
        if (exact && strcmp(e->key, prefix) != 0)
            continue;
        if (wb_entry_failed_sealed(e)) {
            tier_err_set("write-back: %s:%s will never be uploaded: %s", e->backend, e->key,
                         e->error ? e->error : "failed");
            return -EIO;
        }
        pending = pending || e->state == WB_SEALED || e->state == WB_UPLOADING ||
                  e->state == WB_CANCELLED;
    }
    return pending ? 1 : 0;
}

int wb_wait(struct wb *wb, const char *backend_name, const char *prefix, int64_t timeout_ms)
{
    uint64_t deadline =
        timeout_ms < 0 ? 0 : tier_now_mono_ns() + (uint64_t)timeout_ms * TIER_NS_PER_MS;
    int rc = 0;
    pthread_mutex_lock(&wb->lock);
    wb->waiters++; /* someone wants durability now: lifts the upload hold-off */
    pthread_cond_broadcast(&wb->work);
    while ((rc = wait_verdict(wb, backend_name, prefix, false)) > 0) {
        if (wb->stopping) {
            rc = -ESHUTDOWN;
            break;
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&wb->cond, &wb->lock);
            continue;
        }
        if (tier_now_mono_ns() >= deadline) {
            rc = -ETIMEDOUT;
            break;
        }
        struct timespec ts;
        abs_deadline(&ts, deadline);
        pthread_cond_timedwait(&wb->cond, &wb->lock, &ts);
    }
    wb->waiters--;
    pthread_mutex_unlock(&wb->lock);
    return rc;
}

/* ---- asynchronous waits (durability = remote closes through the mount) -----------------------
 * One thread, started at the first wb_wait_async, holds every pending wait: it re-evaluates them
 * at each state change (wb->cond) and at the earliest deadline, and calls their callbacks without
 * the lock. A FUSE close that waits this way holds no FUSE worker thread, so a backend outage
 * cannot take every worker. */
struct wb_awaiter {
    char *backend, *prefix;
    bool exact;                /* prefix is one key */
    uint64_t deadline_mono_ns; /* 0: none */
    wb_wait_fn done;
    void *arg;
    int rc;
    char msg[256]; /* the verdict's sentence: tier_err_msg() in the callback */
    struct wb_awaiter *next;
};

/* Move the awaiters that are answered (or, with all, every one) from wb->awaiters to *fired,
 * with their verdicts; *wake gets the earliest deadline left. wb->lock held. */
static void awaiters_collect(struct wb *wb, bool all, uint64_t now, struct wb_awaiter **fired,
                             uint64_t *wake)
{
    struct wb_awaiter **pp = &wb->awaiters;
    while (*pp) {
        struct wb_awaiter *a = *pp;
        int rc = all ? -ESHUTDOWN : wait_verdict(wb, a->backend, a->prefix, a->exact);
        if (rc == -ESHUTDOWN)
            tier_err_set("tierd is stopping; %s is sealed locally and is uploaded after the "
                         "restart",
                         a->prefix);
        if (rc > 0 && wb->stopping) {
            tier_err_set("tierd is stopping; %s is sealed locally and is uploaded after the "
                         "restart",
                         a->prefix);
            rc = -ESHUTDOWN;
        }
        if (rc > 0 && a->deadline_mono_ns && now >= a->deadline_mono_ns) {
            tier_err_set("write-back: %s is not yet durable in the backend", a->prefix);
            rc = -ETIMEDOUT;
        }
        if (rc > 0) {
            if (a->deadline_mono_ns && (!*wake || a->deadline_mono_ns < *wake))
                *wake = a->deadline_mono_ns;
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        a->rc = rc;
        tier_strlcpy(a->msg, rc ? tier_err_msg() : "", sizeof(a->msg));
        a->next = *fired;
        *fired = a;
        wb->waiters--;
    }
}

/* Call and free the fired awaiters; wb->lock NOT held. */
static void awaiters_fire(struct wb_awaiter *a)
{
    while (a) {
        struct wb_awaiter *next = a->next;
        tier_err_set("%s", a->msg);
        a->done(a->arg, a->rc);
        free(a->backend);
        free(a->prefix);
        free(a);
        a = next;
    }
}

static void *awaiter_main(void *arg)
{
    struct wb *wb = arg;
    pthread_mutex_lock(&wb->lock);
    for (;;) {
        struct wb_awaiter *fired = NULL;
        uint64_t wake = 0, now = tier_now_mono_ns();
        awaiters_collect(wb, false, now, &fired, &wake);
        if (fired) {
            wb->awaiters_firing++; /* wb_wait_async_flush waits until these are answered */
            pthread_mutex_unlock(&wb->lock);
            awaiters_fire(fired);
            pthread_mutex_lock(&wb->lock);
            wb->awaiters_firing--;
            pthread_cond_broadcast(&wb->cond);
            continue;
        }
        if (wb->stopping && !wb->awaiters)
            break;
        uint64_t until = now + TIER_NS_PER_SEC; /* a deadline check at least once a second */
        if (wake && wake < until)
            until = wake;
        struct timespec ts;
        abs_deadline(&ts, until);
        pthread_cond_timedwait(&wb->cond, &wb->lock, &ts);
    }
    pthread_mutex_unlock(&wb->lock);
    return NULL;
}

int wb_wait_async(struct wb *wb, const char *backend_name, const char *prefix, bool exact,
                  int64_t timeout_ms, wb_wait_fn done, void *arg)
{
    struct wb_awaiter *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->backend = backend_name ? strdup(backend_name) : NULL;
    a->prefix = strdup(prefix ? prefix : "");
    if ((backend_name && !a->backend) || !a->prefix) {
        free(a->backend);
        free(a->prefix);
        free(a);
        return -ENOMEM;
    }
    a->done = done;
    a->arg = arg;
    a->exact = exact;
    if (timeout_ms >= 0)
        a->deadline_mono_ns = tier_now_mono_ns() + (uint64_t)timeout_ms * TIER_NS_PER_MS;
    pthread_mutex_lock(&wb->lock);
    int rc = wb->stopping ? -ESHUTDOWN : 0;
    if (!rc && !wb->awaiter_started) {
        rc = -pthread_create(&wb->awaiter, NULL, awaiter_main, wb);
        wb->awaiter_started = rc == 0;
    }
    if (rc) {
        pthread_mutex_unlock(&wb->lock);
        free(a->backend);
        free(a->prefix);
        free(a);
        return rc;
    }
    a->next = wb->awaiters;
    wb->awaiters = a;
    wb->waiters++; /* as wb_wait: lifts the upload hold-off */
    pthread_cond_broadcast(&wb->work);
    pthread_cond_broadcast(&wb->cond); /* the awaiter thread evaluates it now */
    pthread_mutex_unlock(&wb->lock);
    return 0;
}

void wb_wait_async_flush(struct wb *wb)
{
    struct wb_awaiter *fired = NULL;
    uint64_t wake = 0;
    pthread_mutex_lock(&wb->lock);
    awaiters_collect(wb, true, tier_now_mono_ns(), &fired, &wake);
    pthread_mutex_unlock(&wb->lock);
    awaiters_fire(fired);
    /* and the ones the waiter thread took out of the list and is answering now: on return no
     * callback runs, so the caller may tear down what they use */
    pthread_mutex_lock(&wb->lock);
    while (wb->awaiters_firing)
        pthread_cond_wait(&wb->cond, &wb->lock);
    pthread_mutex_unlock(&wb->lock);
}

static void awaiter_stop(struct wb *wb)
{
    if (!wb->awaiter_started)
        return;
    wb_wait_async_flush(wb);
    pthread_mutex_lock(&wb->lock);
    wb->stopping = true;
    pthread_cond_broadcast(&wb->cond);
    pthread_mutex_unlock(&wb->lock);
    pthread_join(wb->awaiter, NULL);
    wb->awaiter_started = false;
}

ssize_t wb_read(struct wb *wb, const char *backend_name, const char *key, void *buf, size_t len,
                off_t off)
{
    int fd = -1;
    pthread_mutex_lock(&wb->lock);
    /* The newest generation with a local copy: an OPEN replacement before the generation it
     * will replace (read-your-writes). */
    struct wb_entry *e = NULL, *o;
    WB_FOR_KEY (wb, o, backend_name, key) {
        if (o->state != WB_CANCELLED && (o->state != WB_FAILED || wb_entry_failed_sealed(o)) &&
            state_local(o->state) &&
            (!e || o->generation > e->generation ||
             (o->generation == e->generation && o->id > e->id)))
            e = o;
    }
    if (e && e->state == WB_FAILED) {
        /* the newest generation cannot be trusted or made durable: never an older object */
        tier_err_set("write-back: %s is FAILED: %s", key, e->error ? e->error : "failed");
        pthread_mutex_unlock(&wb->lock);
        return -EIO;
    }
    if (e) {
        char p[PATH_MAX];
        wb_staging_path(wb, e->id, p, sizeof(p));
        fd = open(p, O_RDONLY | O_CLOEXEC);
    }
    pthread_mutex_unlock(&wb->lock);
    if (fd < 0)
        return -ENOENT;
    ssize_t n = pread(fd, buf, len, off);
    if (n < 0)
        n = -errno;
    close(fd);
    return n;
}

static int info_cmp(const void *a, const void *b)
{
    const struct wb_file_info *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->id < y->id ? -1 : x->id > y->id);
}

int wb_list(struct wb *wb, const char *backend_name, const char *prefix, struct wb_file_info **out,
            size_t *n)
{
    int rc = 0;
    size_t cnt = 0, i = 0;
    struct wb_file_info *v = NULL;
    uint64_t now_mono = tier_now_mono_ns(), now_real = tier_now_real_ns();
    pthread_mutex_lock(&wb->lock);
    struct entry_iter it;
    iter_init(&it, wb, backend_name, prefix);
    while (iter_next(&it))
        cnt++;
    v = calloc(cnt ? cnt : 1, sizeof(*v));
    if (!v) {
        rc = -ENOMEM;
        goto out;
    }
    iter_init(&it, wb, backend_name, prefix);
    for (struct wb_entry *e; (e = iter_next(&it)) != NULL;) {
        struct wb_file_info *f = &v[i++];
        f->id = e->id;
        f->backend = strdup(e->backend);
        f->key = strdup(e->key);
        if (!f->backend || !f->key) {
            rc = -ENOMEM;
            break;
        }
        f->generation = e->generation;
        f->state = e->state;
        f->size_bytes = e->size;
        f->parts_done = e->parts_done;
        f->parts_total = e->nparts;
        f->age_ms = e->created_ns > 0 && now_real > (uint64_t)e->created_ns
                        ? (now_real - (uint64_t)e->created_ns) / TIER_NS_PER_MS
                        : 0;
        if ((e->state == WB_SEALED || e->state == WB_UPLOADING) && e->sealed_mono_ns &&
            now_mono > e->sealed_mono_ns)
            f->waiting_ms = (now_mono - e->sealed_mono_ns) / TIER_NS_PER_MS;
        tier_strlcpy(f->checksum, e->checksum, sizeof(f->checksum));
        f->sealed = e->sealed_ns != 0;
        f->sealed_ns = e->sealed_ns;
        if (wb_entry_failed_sealed(e) && e->error && !(f->error = strdup(e->error))) {
            rc = -ENOMEM;
            break;
        }
        if (e->state == WB_UPLOADED || e->state == WB_EVICTABLE)
            tier_strlcpy(f->etag, e->etag, sizeof(f->etag)); /* not the "may exist" marker */
    }
out:
    pthread_mutex_unlock(&wb->lock);
    if (rc) {
        wb_list_free(v, i);
        return rc;
    }
    qsort(v, cnt, sizeof(*v), info_cmp);
    *out = v;
    *n = cnt;
    return 0;
}

void wb_list_free(struct wb_file_info *list, size_t n)
{
    if (!list)
        return;
    for (size_t i = 0; i < n; i++) {
        free(list[i].backend);
        free(list[i].key);
        free(list[i].error);
    }
    free(list);
}

void wb_stats_get(struct wb *wb, struct wb_stats *st)
{
    pthread_mutex_lock(&wb->lock);
    *st = wb->stats;
    st->dirty_bytes = wb->dirty_bytes;
    memset(st->files, 0, sizeof(st->files));
    uint64_t now = tier_now_mono_ns();
    uint64_t hold = wb_holdoff_until(wb, now);
    st->held = 0;
    for (struct wb_entry *e = wb->head; e; e = e->next) {
        st->files[e->state]++;
        st->held += wb_entry_held(wb, e, hold, now);
    }
    pthread_mutex_unlock(&wb->lock);
}

size_t wb_tenant_pending(struct wb *wb, uint32_t tenant)
{
    size_t n = 0;
    pthread_mutex_lock(&wb->lock);
    for (struct wb_entry *e = wb->head; e; e = e->next)
        n += e->tenant == tenant &&
             (e->state == WB_OPEN || e->state == WB_SEALED || e->state == WB_UPLOADING);
    pthread_mutex_unlock(&wb->lock);
    return n;
}

/* ---- retention ------------------------------------------------------------------------------- */

static size_t dir_len(const char *key)
{
    const char *s = strrchr(key, '/');
    return s ? (size_t)(s - key) : 0;
}

static int newest_first(const void *a, const void *b)
{
    const struct wb_entry *x = *(struct wb_entry *const *)a, *y = *(struct wb_entry *const *)b;
    if (x->sealed_ns != y->sealed_ns)
        return x->sealed_ns > y->sealed_ns ? -1 : 1;
    return x->id > y->id ? -1 : x->id < y->id;
}

/* UPLOADED -> EVICTABLE: drop e's local copy (its object is complete in the backend). ref: the
 * caller's own entry (the uploader that just uploaded it), whose busy flag is its own. An
 * interrupted or busy entry is being renamed, unlinked or replaced, which may need its local
 * copy: -EAGAIN, for a later pass. 1 (dropped), or the journal's error. wb->lock held. */
static int demote_entry(struct wb *wb, struct wb_entry *e, const struct wb_entry *ref)
{
    if ((e->busy && e != ref) || e->interrupt)
        return -EAGAIN;
    int rc = wb_commit(wb, e, WB_JR_STATE, &(struct wb_change){.state = WB_EVICTABLE});
    if (rc)
        return rc;
    staging_remove(wb, e->id);
    wb->stats.demoted++;
    return 1;
}

void wb_retention_apply(struct wb *wb, const struct wb_entry *ref)
{
    int keep = wb->cfg.retention_keep;
    if (keep < 0)
        return;
    size_t dl = dir_len(ref->key), n = 0;
    char *dir = strndup(ref->key, dl); /* the directory's range of the key index */
    if (!dir)
        return; /* retention is best effort; the next upload retries it */
    struct entry_iter it;
    iter_init(&it, wb, ref->backend, dir);
    for (struct wb_entry *e; (e = iter_next(&it)) != NULL;)
        n += e->state == WB_UPLOADED && dir_len(e->key) == dl;
    struct wb_entry **v = n > (size_t)keep ? malloc(n * sizeof(*v)) : NULL;
    if (!v) {
        free(dir);
        return; /* nothing to do, or best effort: the next upload retries it */
    }
    size_t i = 0;
    iter_init(&it, wb, ref->backend, dir);
    for (struct wb_entry *e; (e = iter_next(&it)) != NULL;)
        if (e->state == WB_UPLOADED && dir_len(e->key) == dl)
            v[i++] = e;
    free(dir);
    qsort(v, n, sizeof(*v), newest_first);
    for (i = (size_t)keep; i < n; i++)
        (void)demote_entry(wb, v[i], ref); /* best effort: the next upload tries again */
    free(v);
    wb_prune_evictable(wb);
}

int wb_demote(struct wb *wb, const char *backend_name, const char *key)
{
    pthread_mutex_lock(&wb->lock);
    int rc = 0;
    struct entry_iter it;
    iter_init(&it, wb, backend_name, key);
    for (struct wb_entry *e; (e = iter_next(&it)) != NULL;) {
        if (strcmp(e->key, key) != 0 || e->state == WB_CANCELLED || e->state == WB_EVICTABLE)
            continue;
        if (e->state != WB_UPLOADED) {
            rc = -EAGAIN; /* a generation not uploaded yet: its local copy is the only one */
            break;
        }
    }
    if (rc == 0) {
        iter_init(&it, wb, backend_name, key);
        for (struct wb_entry *e; (e = iter_next(&it)) != NULL;) {
            if (strcmp(e->key, key) != 0 || e->state != WB_UPLOADED)
                continue;
            int r = demote_entry(wb, e, NULL);
            if (r < 0) {
                rc = r;
                break;
            }
            rc = 1;
            break; /* one live generation: the iterator must not go on past a changed entry */
        }
    }
    if (rc == 1)
        wb_prune_evictable(wb);
    pthread_mutex_unlock(&wb->lock);
    return rc;
}

static int oldest_upload_first(const void *a, const void *b)
{
    const struct wb_entry *x = *(struct wb_entry *const *)a, *y = *(struct wb_entry *const *)b;
    if (x->uploaded_ns != y->uploaded_ns)
        return x->uploaded_ns < y->uploaded_ns ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* EVICTABLE rows are the only ones that grow without bound (one per file ever uploaded and
 * evicted): over max_evictable_rows plus a tenth, forget the oldest, down to the bound, in one
 * journal transaction (so the walk and the commit are paid once per tenth, not per upload). A
 * forgotten file is still in the backend; the mount finds it there (while the backend answers).
 * wb->lock held. */
void wb_prune_evictable(struct wb *wb)
{
    int64_t max = wb->cfg.max_evictable_rows;
    if (max < 0 || wb->n_evictable <= (size_t)max + (size_t)max / 10)
        return;
    size_t n = 0, drop = wb->n_evictable - (size_t)max;
    struct wb_entry **v = malloc(wb->n_evictable * sizeof(*v));
    int64_t *ids = malloc(drop * sizeof(*ids));
    if (!v || !ids)
        goto out; /* best effort: the next upload tries again */
    for (struct wb_entry *e = wb->head; e; e = e->next)
        if (e->state == WB_EVICTABLE && !e->busy && !e->interrupt && n < wb->n_evictable)
            v[n++] = e;
    qsort(v, n, sizeof(*v), oldest_upload_first);
    if (drop > n)
        drop = n;
    for (size_t i = 0; i < drop; i++)
        ids[i] = v[i]->id;
    if (jr_delete_many(wb->db, ids, drop) != 0) {
        log_warn("write-back: cannot prune %zu evicted rows from the journal: %s", drop,
                 tier_err_msg());
        goto out;
    }
    for (size_t i = 0; i < drop; i++)
        wb_entry_drop(wb, v[i]);
    wb->stats.rows_pruned += drop;
out:
    free(v);
    free(ids);
}
