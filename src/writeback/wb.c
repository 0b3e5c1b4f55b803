/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb.c - the write-back file API (wb.h): the entries and the writer's handle (create, write,
 * truncate, fsync, close) with backpressure. The rest of the API: open, recovery and close
 * (wb_recover.c), unlink and rename (wb_ns.c), waits (wb_wait.c), read-your-writes, listing and
 * stats (wb_read.c), retention (wb_retention.c); the helpers they share are in wb_int.h.
 *
 * Called by the daemon's FUSE write path and control API; the uploader threads live in upload.c.
 * Locking: one mutex (wb->lock) guards every entry and the journal connection; journal commits
 * happen under it (see journal.c), staging-file data I/O and backend requests never do. Creating
 * or removing a staging file (a metadata syscall) is done under the lock so that the file and its
 * row can never disagree as seen by another thread.
 */
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

bool state_local(enum wb_state s)
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

void entry_link(struct wb *wb, struct wb_entry *e)
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

void staging_remove(const struct wb *wb, int64_t id)
{
    char p[PATH_MAX];
    wb_staging_path(wb, id, p, sizeof(p));
    if (unlink(p) != 0 && errno != ENOENT)
        log_warn("write-back: cannot remove staging file %s: %s", p, strerror(errno));
}

struct wb_entry *find_id(struct wb *wb, int64_t id)
{
    return wbi_find_id(wb, id);
}

struct wb_entry *find_live(struct wb *wb, const char *backend, const char *key)
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

void iter_init(struct entry_iter *it, struct wb *wb, const char *backend, const char *prefix)
{
    *it = (struct entry_iter){.wb = wb, .backend = backend, .prefix = prefix ? prefix : ""};
    it->plen = strlen(it->prefix);
    if (backend)
        it->i = wbi_first(wb, backend, it->prefix);
    else
        it->next = wb->head;
}

struct wb_entry *iter_next(struct entry_iter *it)
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

void abs_deadline(struct timespec *ts, uint64_t mono_ns)
{
    ts->tv_sec = (time_t)(mono_ns / TIER_NS_PER_SEC);
    ts->tv_nsec = (long)(mono_ns % TIER_NS_PER_SEC);
}

/* Wait until the uploader that owns e (if any) stopped working on it; returns the entry again
 * (NULL if it went away meanwhile). wb->lock held. */
struct wb_entry *quiesce(struct wb *wb, struct wb_entry *e)
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
int cancel_entry(struct wb *wb, struct wb_entry *e)
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

/* ---- writer's handle ------------------------------------------------------------------------- */

int check_names(const char *backend_name, const char *key)
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
int check_create(struct wb *wb, const char *backend_name, const char *key)
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

/* The streamed seal checksum is given up: the seal reads the file back. */
static void sum_drop(struct wb_file *fh)
{
    wb_sum_end(fh->sum, NULL);
    fh->sum = NULL;
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
    if (wb_sum_begin(&fh->sum, NULL) != 0)
        fh->sum = NULL; /* no memory for it: the seal reads the file back */
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
    sum_drop(fh);
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

/* len bytes landed at off: stream them into the seal checksum when they extend it in order. */
static void sum_note(struct wb_file *fh, const void *buf, size_t len, off_t off)
{
    if (!fh->sum)
        return;
    if (!buf || (uint64_t)off != fh->sum_len) {
        sum_drop(fh);
        return;
    }
    wb_sum_update(fh->sum, buf, len);
    fh->sum_len += len;
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

/* One transfer into the staging file: pwrite from buf, or splice from the pipe src_fd (buf
 * NULL). Returns bytes moved (> 0), 0 when nothing could be moved (an empty pipe) or -errno. */
static ssize_t transfer(struct wb_file *fh, const void *buf, int src_fd, size_t len, off_t off)
{
    if (buf)
        return do_pwrite(fh->wb, fh->fd, buf, len, off);
    loff_t at = off;
    /* non-blocking on the pipe: it holds the request's bytes already, and an empty one (a
     * caller's bug) must fail the write rather than hang the thread */
    ssize_t n = splice(src_fd, NULL, fh->fd, &at, len, SPLICE_F_NONBLOCK);
    if (n < 0)
        return errno == EAGAIN ? 0 : -errno;
    return n;
}

/* wb_write and wb_write_fd: reserve, admit, move all len bytes (retrying short transfers). */
static ssize_t write_from(struct wb_file *fh, const void *buf, int src_fd, size_t len, off_t off)
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
        ssize_t n = transfer(fh, buf ? (const char *)buf + done : NULL, src_fd, len - done,
                             off + (off_t)done);
        if (n == -EINTR)
            continue;
        if (n == -EINVAL && !buf && done == 0) {
            res = -EOPNOTSUPP; /* a spool file system without splice: the caller copies */
            break;
        }
        if (n < 0 || (n == 0 && ++zero_writes > 8)) {
            res = n < 0 ? n : -EIO;
            break;
        }
        done += (size_t)n;
    }
    if (adm)
        tier_disk_leave(&fh->wb->adm, &io, len, res);
    if (res == -EOPNOTSUPP)
        return res;
    if (res < 0)
        return record_failure(fh, (int)res);
    sum_note(fh, buf, len, off);
    note_write(fh->wb);
    return (ssize_t)len;
}

ssize_t wb_write(struct wb_file *fh, const void *buf, size_t len, off_t off)
{
    return write_from(fh, buf, -1, len, off);
}

ssize_t wb_write_fd(struct wb_file *fh, int src_fd, size_t len, off_t off)
{
    const struct wb_io_hooks *io = fh->wb->cfg.io;
    if (io && io->pwrite)
        return -EOPNOTSUPP; /* the test hooks see every byte: the caller uses wb_write */
    return write_from(fh, NULL, src_fd, len, off);
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
    if (size == 0) {
        sum_drop(fh); /* empty again: the stream starts over, also after one was dropped */
        if (wb_sum_begin(&fh->sum, NULL) != 0)
            fh->sum = NULL;
        fh->sum_len = 0;
    } else if ((uint64_t)size != fh->sum_len) {
        sum_drop(fh);
    }
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
    if (!rc && fh->sum && fh->sum_len == (uint64_t)st.st_size) {
        wb_sum_end(fh->sum, sum); /* streamed by the writes: no second pass */
        fh->sum = NULL;
    } else if (!rc) {
        rc = wb_checksum_fd(fh->fd, (uint64_t)st.st_size, NULL, sum);
    }
    sum_drop(fh);
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
    sum_drop(fh);
    pthread_mutex_lock(&wb->lock);
    struct wb_entry *e = fh->e;
    if (e) {
        e->fh = NULL;
        discard_entry(wb, e);
    }
    pthread_mutex_unlock(&wb->lock);
    free(fh);
}
