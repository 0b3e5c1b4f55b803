/* SPDX-License-Identifier: Apache-2.0 */
/*
 * upload.c - the write-back uploader: N threads that take SEALED/UPLOADING files (oldest seal
 * first) and CANCELLED rows (first of all) and bring each to its next journalled state.
 *
 * Started by wb_open(), stopped by wb_close(). A thread that picks an entry marks it `busy` and
 * is then the only one to send backend requests for it; the per-file order of transitions is the
 * order of that thread's code. A multipart file's parts go out over up to parts_parallel short-
 * lived worker threads, each journalling its part's ETag as it lands. Every backend request is
 * admitted by the QoS scheduler (class checkpoint) when one is configured.
 *
 * Failures never drop a file: the attempt ends, the entry gets a growing delay (retry_base_ms
 * doubling up to retry_max_ms) and is tried again, until uploaded or cancelled. When the backend
 * no longer knows the upload id (-ENOENT, NoSuchUpload) or rejects the part list (-EINVAL), the
 * multipart upload is aborted and restarted from the local copy. Errors that no retry can mend
 * (struct attempt's `refused`: the backend refuses the size or the key of the request, or the
 * local copy no longer matches its seal checksum) make the file FAILED instead (fail_sealed): kept
 * with its reason, reported by wb_wait and wb_list, never retried, no longer counted in the
 * backlog.
 *
 * Part size: each file's own, part_size_for(): the configured one, or more where that would need
 * more parts than the backend takes, so every file under WB_MAX_FILE_BYTES can be uploaded. It is
 * a function of the size and the configuration, so a resumed upload computes the same one (a
 * changed part_size restarts it: the journalled parts no longer fit).
 *
 * Verification (what is checked, see docs/WRITEBACK.md): the bytes read from the staging file
 * are hashed against the seal checksum (a single PUT: exactly the bytes sent; multipart: one
 * sequential pass beside the part workers, finished before the complete request); each part's
 * ETag, and a single PUT's ETag, is compared with the MD5 of the bytes sent when the backend
 * returns an MD5-shaped ETag (S3 without SSE-KMS); a multipart ETag of the form md5(part md5s)-N
 * is compared likewise; after every upload backend_stat must report exactly the sealed size.
 *
 * Locking: wb->lock for every entry field and the journal; never held across a backend request
 * or a staging-file read.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "writeback/wb_int.h"

#define KEY_BLOCKED_RETRY_MS 20
/* Internal: another row of the key must finish first, or an upload restarts from the local copy;
 * tried again after KEY_BLOCKED_RETRY_MS, without backoff. No backend answers EINPROGRESS, so a
 * backend's -EAGAIN (throttling) keeps its growing delay. */
#define RETRY_SOON (-EINPROGRESS)
/* S3's largest part (and so the largest per-file part size). */
#define MAX_PART_BYTES (5ULL << 30)
/* Threads sending the parts of one file, at most (parts_parallel is capped here). */
#define PARTS_THREADS_MAX 64

/* ---- helpers --------------------------------------------------------------------------------- */

/* Whose backend calls the uploader makes for entry e: the writer's tenant (e->tenant), class
 * checkpoint. Every call goes through a backend dispatcher with it, so the scheduler's wrapper
 * (qos/sched_backend.c) admits it in the backend's own lane as that tenant's checkpoint I/O. */
#define UPLOAD_IO(e) (&(const struct tier_ioctx){.tenant = (e)->tenant, .cls = TIER_IO_CHECKPOINT})

static int md5_bin(const void *buf, size_t len, unsigned char out[16])
{
    unsigned int n = 0;
    return EVP_Digest(buf, len, out, &n, EVP_md5(), NULL) == 1 ? 0 : -ENOMEM;
}

/* Copy the ETag without quotes into out (33 bytes) if it is 32 hex digits (an MD5). */
static bool etag_md5(const char *etag, char out[33])
{
    size_t n = strlen(etag);
    if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"') {
        etag++;
        n -= 2;
    }
    if (n != 32)
        return false;
    for (size_t i = 0; i < 32; i++) {
        char c = etag[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
        out[i] = (c >= 'A' && c <= 'F') ? (char)(c - 'A' + 'a') : c;
    }
    out[32] = '\0';
    return true;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0) {
            tier_err_set("staging file shorter than its sealed size");
            return -EIO;
        }
        done += (size_t)n;
    }
    return 0;
}

static int open_staging(struct wb *wb, int64_t id)
{
    char p[PATH_MAX];
    wb_staging_path(wb, id, p, sizeof(p));
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        tier_err_set("write-back: cannot open staging file %s: %s", p, strerror(errno));
        /* gone while its row says sealed: the spool was tampered with; no retry brings it back */
        return rc == -ENOENT ? -EBADMSG : rc;
    }
    return fd;
}

/* What one upload attempt found out beyond its errno. refused: no retry can succeed (the local
 * copy does not match its seal checksum or is gone, or the backend refused the size or the key
 * of exactly this request: EFBIG, S3 EntityTooLarge; ENAMETOOLONG, KeyTooLongError, from a PUT
 * or a create; a key that passed backend_key_check at create can still meet limits of the store).
 * Only those sites set it: an errno alone does not tell (S3 answers every 400 without a known
 * code -EINVAL, a request timeout or an expired token among them, and those are retried).
 * maybe_set: this attempt journalled "may exist" (mark_maybe); final_refused: and its final
 * request was then refused, so nothing was stored. */
struct attempt {
    bool refused, maybe_set, final_refused;
};

static bool size_or_key_refused(int rc)
{
    return rc == -EFBIG || rc == -ENAMETOOLONG;
}

/* The part size of a file of size bytes: part_size, or the smallest whole MiB that keeps it
 * within the backend's part count. */
static int part_size_for(const struct wb *wb, const struct backend *be, uint64_t size,
                         uint64_t *out)
{
    uint64_t psz = wb->cfg.part_size_bytes, maxp = (uint64_t)backend_max_parts(be);
    if (size > psz * maxp) {
        psz = (size + maxp - 1) / maxp;
        psz = (psz + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
    }
    if (psz > MAX_PART_BYTES) {
        tier_err_set("write-back: %llu bytes need parts over 5 GiB in %llu parts",
                     (unsigned long long)size, (unsigned long long)maxp);
        return -EFBIG;
    }
    *out = psz;
    return 0;
}

/* Does the checksum of what was read (got) match the seal's (want)? Logs and sets the error. */
static int check_seal_sum(const char *key, const char *want, const char *got)
{
    if (strcmp(want, got) == 0)
        return 0;
    tier_err_set("the local copy of %s no longer matches its seal checksum (sealed %s, now %s): "
                 "the spool was corrupted after close",
                 key, want, got);
    log_err("write-back: %s", tier_err_msg());
    return -EBADMSG;
}

/* Another row of the same key has to delete the object first (invariant I5). wb->lock held. */
static bool key_blocked(struct wb *wb, const struct wb_entry *e)
{
    struct wb_entry *t;
    WB_FOR_KEY (wb, t, e->backend, e->key) {
        if (t != e && t->state == WB_CANCELLED && t->etag[0])
            return true;
    }
    return false;
}

/* A live row of the same key is in the middle of a request: a delete must wait. */
static bool key_busy(struct wb *wb, const struct wb_entry *e)
{
    struct wb_entry *t;
    WB_FOR_KEY (wb, t, e->backend, e->key) {
        if (t != e && t->busy)
            return true;
    }
    return false;
}

static bool stop_requested(struct wb *wb, const struct wb_entry *e)
{
    return wb->stopping || e->interrupt || e->state == WB_CANCELLED;
}

static void clear_parts(struct wb_entry *e)
{
    free(e->parts);
    free(e->part_bytes);
    e->parts = NULL;
    e->part_bytes = NULL;
    e->nparts = e->parts_done = 0;
}

static int alloc_parts(struct wb_entry *e, int nparts)
{
    struct backend_part *p = calloc((size_t)nparts, sizeof(*p));
    uint64_t *b = calloc((size_t)nparts, sizeof(*b));
    if (!p || !b) {
        free(p);
        free(b);
        return -ENOMEM;
    }
    int keep = e->nparts < nparts ? e->nparts : nparts;
    for (int i = 0; i < keep; i++) {
        p[i] = e->parts[i];
        b[i] = e->part_bytes[i];
    }
    clear_parts(e);
    e->parts = p;
    e->part_bytes = b;
    e->nparts = nparts;
    for (int i = 0; i < nparts; i++)
        if (p[i].etag[0])
            e->parts_done++;
    return 0;
}

/* e may have left an upload no row names (wb->lock not held): any upload of this generation
 * was created after its seal, so the cleanup looks from there. */
static void flag_orphans(struct wb *wb, struct wb_entry *e)
{
    pthread_mutex_lock(&wb->lock);
    int64_t t = e->sealed_ns ? e->sealed_ns : 1;
    if (!e->mpu_orphans_ns || t < e->mpu_orphans_ns)
        e->mpu_orphans_ns = t;
    pthread_mutex_unlock(&wb->lock);
}

/* Abort e's multipart upload upload_id (wb->lock not held); if the backend cannot say it is gone,
 * the orphan flag makes a later owner of the key list and abort it. */
static void abort_upload(struct wb *wb, struct wb_entry *e, struct backend *be, const char *key,
                         const char *upload_id)
{
    int rc = backend_mpu_abort(be, UPLOAD_IO(e), key, upload_id);
    if (rc && rc != -ENOENT)
        flag_orphans(wb, e);
}

/* UPLOADING -> SEALED: forget the upload id (journal first), then abort it in the backend. */
static void restart_multipart(struct wb *wb, struct wb_entry *e, struct backend *be)
{
    pthread_mutex_lock(&wb->lock);
    char *old = e->upload_id ? strdup(e->upload_id) : NULL;
    char *key = strdup(e->key);
    struct wb_change c = {.state = WB_SEALED, .set_upload = true, .upload_id = NULL};
    if ((e->upload_id && !old) || !key || wb_commit(wb, e, WB_JR_UPLOAD, &c) != 0) {
        /* still UPLOADING in the journal and in memory: tried again later */
        pthread_mutex_unlock(&wb->lock);
        free(old);
        free(key);
        return;
    }
    clear_parts(e);
    pthread_mutex_unlock(&wb->lock);
    if (old && key) {
        log_info("write-back: restarting the upload of %s from the local copy", key);
        abort_upload(wb, e, be, key, old);
    }
    free(old);
    free(key);
}

/* Check the object now in the backend: exactly the sealed size. */
static int verify_object(const struct wb_entry *e, struct backend *be, const char *key,
                         uint64_t size)
{
    struct backend_stat st;
    int rc = backend_stat(be, UPLOAD_IO(e), key, &st);
    if (rc)
        return rc;
    if (st.size_bytes != size) {
        tier_err_set("write-back: %s is %llu bytes in the backend after upload, expected %llu", key,
                     (unsigned long long)st.size_bytes, (unsigned long long)size);
        log_err("%s", tier_err_msg());
        return -EIO;
    }
    return 0;
}

/* Journal UPLOADED (after the object was verified). */
static int finish_upload(struct wb *wb, struct wb_entry *e, const char *etag)
{
    pthread_mutex_lock(&wb->lock);
    struct wb_change c = {
        .state = WB_UPLOADED, .etag = etag, .uploaded_ns = (int64_t)tier_now_real_ns()};
    int rc = wb_commit(wb, e, WB_JR_UPLOADED, &c);
    if (rc) { /* as journalled: "may exist" (mark_maybe), so a cancel deletes the key */
        pthread_mutex_unlock(&wb->lock);
        return rc;
    }
    clear_parts(e);
    wb->stats.uploads_done++;
    wb_retention_apply(wb, e);
    int64_t id = e->id;
    pthread_cond_broadcast(&wb->cond);
    pthread_mutex_unlock(&wb->lock);
    wb_emit(wb, WB_EV_UPLOADED, id);
    return 0;
}

/* The final request is about to be sent: from now on the object may exist before UPLOADED is
 * journalled (a crash, a failed check after it), so a cancel of the row must delete the key
 * (WB_ETAG_MAYBE). Journalled first. wb->lock held. */
static int mark_maybe(struct wb *wb, struct wb_entry *e, struct attempt *at)
{
    if (wb_entry_has_object(e))
        return 0;
    int rc = wb_commit(wb, e, WB_JR_STATE,
                       &(struct wb_change){.state = e->state, .etag = WB_ETAG_MAYBE});
    if (!rc)
        at->maybe_set = true;
    return rc;
}

/* ---- single PUT ------------------------------------------------------------------------------ */

static int upload_single(struct wb *wb, struct wb_entry *e, struct backend *be, const char *key,
                         uint64_t size, const char *sum, struct attempt *at)
{
    int fd = open_staging(wb, e->id);
    if (fd < 0) {
        at->refused = fd == -EBADMSG; /* gone while its row says sealed */
        return fd;
    }
    int rc = 0;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    rc = pread_full(fd, buf, size, 0);
    if (rc)
        goto out;
    if (sum[0]) { /* exactly the bytes that will be sent */
        struct wb_sum *c;
        char got[WB_CHECKSUM_MAX];
        rc = wb_sum_begin(&c, sum);
        if (rc)
            goto out;
        wb_sum_update(c, buf, size);
        wb_sum_end(c, got);
        rc = check_seal_sum(key, sum, got);
        if (rc) {
            at->refused = true;
            goto out;
        }
    }
    unsigned char md[16];
    char want[33];
    rc = md5_bin(buf, size, md);
    if (rc)
        goto out;
    tier_hex(md, 16, want);
    pthread_mutex_lock(&wb->lock);
    rc = stop_requested(wb, e) ? -ECANCELED
         : key_blocked(wb, e)  ? RETRY_SOON
                               : mark_maybe(wb, e, at);
    pthread_mutex_unlock(&wb->lock);
    if (rc)
        goto out;
    char etag[BACKEND_ETAG_MAX] = "";
    rc = backend_put(be, UPLOAD_IO(e), key, buf, size, etag);
    if (size_or_key_refused(rc))
        at->refused = at->final_refused = true;
    if (rc)
        goto out;
    char got[33];
    if (etag_md5(etag, got) && strcmp(got, want) != 0) {
        tier_err_set("write-back: %s: backend ETag %s is not the MD5 %s of the bytes sent", key,
                     etag, want);
        log_err("%s", tier_err_msg());
        rc = -EIO;
        goto out;
    }
    rc = verify_object(e, be, key, size);
    if (!rc)
        rc = finish_upload(wb, e, etag);
out:
    free(buf);
    close(fd);
    return rc;
}

/* ---- multipart ------------------------------------------------------------------------------- */

struct mpu {
    struct wb *wb;
    struct wb_entry *e;
    struct backend *be;
    const char *key;
    const char *upload_id;
    int fd;
    uint64_t size, psz;
    int nparts;
    int next;      /* wb->lock */
    int err;       /* wb->lock: first error of any worker */
    bool refused;  /* wb->lock: that error is a refusal of the part's size (EntityTooLarge) */
    char msg[512]; /* wb->lock: its sentence (tier_err_msg() is per thread) */
};

/* The first error of any worker wins; its sentence travels with it. wb->lock held. */
static void mpu_fail(struct mpu *u, int rc)
{
    if (u->err)
        return;
    u->err = rc;
    u->refused = rc == -EFBIG;
    tier_strlcpy(u->msg, tier_err_msg(), sizeof(u->msg));
}

static void *part_worker(void *arg)
{
    struct mpu *u = arg;
    struct wb *wb = u->wb;
    struct wb_entry *e = u->e;
    unsigned char *buf = malloc(u->psz);
    pthread_mutex_lock(&wb->lock);
    if (!buf)
        mpu_fail(u, -ENOMEM);
    for (;;) {
        while (u->next <= u->nparts && e->parts[u->next - 1].etag[0])
            u->next++;
        if (!u->err && stop_requested(wb, e))
            mpu_fail(u, -ECANCELED);
        if (u->err || u->next > u->nparts)
            break;
        int no = u->next++;
        pthread_mutex_unlock(&wb->lock);

        uint64_t off = (uint64_t)(no - 1) * u->psz;
        size_t len = (size_t)(u->size - off < u->psz ? u->size - off : u->psz);
        char etag[BACKEND_ETAG_MAX] = "";
        unsigned char md[16];
        char want[33], got[33];
        int rc = pread_full(u->fd, buf, len, off);
        if (!rc)
            rc = md5_bin(buf, len, md);
        if (!rc) {
            tier_hex(md, 16, want);
            rc = backend_mpu_put_part(u->be, UPLOAD_IO(u->e), u->key, u->upload_id, no, buf, len,
                                      etag);
        }
        if (!rc && etag_md5(etag, got) && strcmp(got, want) != 0) {
            tier_err_set("part %d: backend ETag %s is not the MD5 %s of the bytes sent", no, etag,
                         want);
            rc = -EIO;
        }
        if (rc)
            log_warn("write-back: upload of %s part %d failed: %s", u->key, no, tier_err_msg());

        pthread_mutex_lock(&wb->lock);
        if (!rc) {
            rc = jr_part_done(wb->db, e->id, no, etag, len);
            if (!rc) {
                e->parts[no - 1].number = no;
                tier_strlcpy(e->parts[no - 1].etag, etag, sizeof(e->parts[no - 1].etag));
                e->part_bytes[no - 1] = len;
                e->parts_done++;
                wb->stats.parts_done++;
            }
        }
        if (rc) {
            mpu_fail(u, rc);
            break;
        }
        int64_t id = e->id;
        pthread_mutex_unlock(&wb->lock);
        wb_emit(wb, WB_EV_PART_DONE, id);
        pthread_mutex_lock(&wb->lock);
    }
    pthread_mutex_unlock(&wb->lock);
    free(buf);
    return NULL;
}

/* The ETag S3 gives a multipart object: md5 of the concatenated binary part MD5s, "-N". Empty
 * when some part ETag is not an MD5. */
static void multipart_etag(const struct backend_part *parts, int n, char out[48])
{
    out[0] = '\0';
    unsigned char *cat = malloc((size_t)n * 16);
    if (!cat)
        return;
    for (int i = 0; i < n; i++) {
        char hex[33];
        if (!etag_md5(parts[i].etag, hex)) {
            free(cat);
            return;
        }
        for (int j = 0; j < 16; j++) {
            unsigned v = 0;
            sscanf(hex + 2 * j, "%2x", &v);
            cat[i * 16 + j] = (unsigned char)v;
        }
    }
    unsigned char md[16];
    if (md5_bin(cat, (size_t)n * 16, md) == 0) {
        tier_hex(md, 16, out);
        snprintf(out + 32, 16, "-%d", n);
    }
    free(cat);
}

static bool upload_gone(int rc)
{
    return rc == -ENOENT || rc == -EINVAL;
}

/* Does a row hold this upload id? wb->lock held. */
static bool upload_named(struct wb *wb, const char *upload_id)
{
    for (struct wb_entry *t = wb->head; t; t = t->next)
        if (t->upload_id && strcmp(t->upload_id, upload_id) == 0)
            return true;
    return false;
}

/* How far a backend's clock may be behind ours when we tell our uploads from others' by time. */
#define ORPHAN_CLOCK_SKEW_NS (300 * TIER_NS_PER_SEC)

/* Abort the multipart uploads of key started since e->mpu_orphans_ns (minus clock skew): no row
 * names them (e has no upload id), so they were left by a crash or a lost reply after
 * mpu_create, by e or by a generation e replaced. Uploads of the key started earlier are left
 * alone; another writer's upload of the same key started since would be aborted too: two
 * writers of one key conflict anyway (docs/WRITEBACK.md). Best effort: a backend that cannot
 * list (no op, no permission, an error) gets a warning and the upload goes ahead, so cleanup
 * never holds a checkpoint back; the flag is cleared only by a successful listing, so a retry
 * of a failed upload looks again. */
static void abort_orphans(struct wb *wb, struct wb_entry *e, struct backend *be, const char *key)
{
    pthread_mutex_lock(&wb->lock);
    int64_t flag = e->mpu_orphans_ns, since = flag - (int64_t)ORPHAN_CLOCK_SKEW_NS;
    pthread_mutex_unlock(&wb->lock);
    struct backend_mpu *v = NULL;
    size_t n = 0;
    int rc = backend_mpu_list(be, UPLOAD_IO(e), key, &v, &n);
    if (rc) {
        /* the flag stays (the next attempt, if any, looks again); the upload goes ahead */
        log_warn("write-back: cannot list the multipart uploads of %s:%s (%s: %s); one left by a "
                 "crash stays until a bucket lifecycle rule removes it",
                 be->name, key, strerror(-rc), tier_err_msg());
        return;
    }
    pthread_mutex_lock(&wb->lock);
    if (e->mpu_orphans_ns == flag)
        e->mpu_orphans_ns = 0; /* listed: what the flag covered is in v */
    pthread_mutex_unlock(&wb->lock);
    int aborted = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].initiated_ns && v[i].initiated_ns < since)
            continue;
        pthread_mutex_lock(&wb->lock);
        bool cancelled = e->state == WB_CANCELLED; /* a tombstone does this as its own work */
        bool stop = cancelled ? wb->stopping : stop_requested(wb, e);
        bool named = upload_named(wb, v[i].upload_id);
        pthread_mutex_unlock(&wb->lock);
        if (named)
            continue; /* a row holds it: not an orphan (a newer generation of the key) */
        if (stop) {   /* unlinked, replaced or shutting down: the next owner looks again */
            pthread_mutex_lock(&wb->lock);
            if (!e->mpu_orphans_ns || flag < e->mpu_orphans_ns)
                e->mpu_orphans_ns = flag;
            pthread_mutex_unlock(&wb->lock);
            break;
        }
        rc = backend_mpu_abort(be, UPLOAD_IO(e), key, v[i].upload_id);
        if (rc == 0)
            aborted++;
        else if (rc != -ENOENT) /* -ENOENT: finished meanwhile */
            log_warn("write-back: cannot abort multipart upload %s of %s:%s: %s", v[i].upload_id,
                     be->name, key, strerror(-rc));
    }
    backend_mpu_list_free(v, n);
    if (aborted)
        log_info("write-back: aborted %d multipart upload(s) of %s:%s that no journal row named "
                 "(left by a crash or a lost reply)",
                 aborted, be->name, key);
}

/* The sequential pass that checks a multipart file's staging copy against its seal checksum,
 * run beside the part workers (they read the same pages, so it mostly hits the page cache). */
struct sum_pass {
    int fd;
    uint64_t size;
    const char *key, *want;
    int rc;
    bool mismatch; /* rc is the seal checksum's verdict, not a read error */
    char msg[512]; /* tier_err_msg() is per thread: the verdict's sentence travels here */
};

static void *sum_pass_main(void *arg)
{
    struct sum_pass *p = arg;
    char got[WB_CHECKSUM_MAX];
    p->rc = wb_checksum_fd(p->fd, p->size, p->want, got);
    if (!p->rc) {
        p->rc = check_seal_sum(p->key, p->want, got);
        p->mismatch = p->rc != 0;
    }
    if (p->rc)
        tier_strlcpy(p->msg, tier_err_msg(), sizeof(p->msg));
    return NULL;
}

/* Do the journalled parts of e fit this part size? (A changed part_size restarts the upload.)
 * wb->lock held. */
static bool parts_fit(const struct wb_entry *e, uint64_t size, uint64_t psz, int nparts)
{
    bool ok = e->nparts <= nparts;
    for (int i = 0; ok && i < e->nparts; i++) {
        uint64_t want = (uint64_t)(i + 1) * psz <= size ? psz : size - (uint64_t)i * psz;
        ok = !e->parts[i].etag[0] || e->part_bytes[i] == want;
    }
    return ok;
}

/* SEALED -> UPLOADING: create the multipart upload and journal its id before any part is sent
 * (I3); an upload created but not journalled is aborted, or left to the orphan cleanup. */
static int mpu_begin(struct mpu *u, struct attempt *at, char **out)
{
    struct wb *wb = u->wb;
    struct wb_entry *e = u->e;
    char *upload_id = NULL;
    int rc = backend_mpu_create(u->be, UPLOAD_IO(e), u->key, &upload_id);
    if (rc) {
        at->refused = size_or_key_refused(rc);
        flag_orphans(wb, e); /* the server may have created it and the reply got lost */
        return rc;
    }
    pthread_mutex_lock(&wb->lock);
    if (stop_requested(wb, e)) {
        rc = -ECANCELED;
    } else {
        clear_parts(e);
        rc = alloc_parts(e, u->nparts);
        struct wb_change c = {.state = WB_UPLOADING, .set_upload = true, .upload_id = upload_id};
        if (!rc)
            rc = wb_commit(wb, e, WB_JR_UPLOAD, &c); /* I3: before any part is sent */
    }
    pthread_mutex_unlock(&wb->lock);
    if (rc) {
        int arc = backend_mpu_abort(u->be, UPLOAD_IO(e), u->key, upload_id);
        if (arc)
            flag_orphans(wb, e);
        free(upload_id);
        return rc;
    }
    *out = upload_id;
    return 0;
}

/* The upload id u's parts go to (*out, the caller frees): the journalled one, whose parts done
 * are kept when they fit this part size (else the upload restarts: RETRY_SOON), or a new one. */
static int mpu_begin_or_resume(struct mpu *u, struct attempt *at, char **out)
{
    struct wb *wb = u->wb;
    struct wb_entry *e = u->e;
    pthread_mutex_lock(&wb->lock);
    if (!e->upload_id) {
        pthread_mutex_unlock(&wb->lock);
        return mpu_begin(u, at, out);
    }
    bool ok = parts_fit(e, u->size, u->psz, u->nparts);
    pthread_mutex_unlock(&wb->lock);
    if (!ok) {
        restart_multipart(wb, e, u->be);
        return RETRY_SOON;
    }
    pthread_mutex_lock(&wb->lock);
    int rc = alloc_parts(e, u->nparts);
    char *upload_id = rc ? NULL : strdup(e->upload_id);
    pthread_mutex_unlock(&wb->lock);
    if (!upload_id)
        return -ENOMEM;
    *out = upload_id;
    return 0;
}

/* Send u's parts not yet done over up to parts_parallel threads (this one among them), beside
 * the pass sp that checks the local copy against its seal checksum; when that pass cannot have
 * a thread it runs first, and a bad copy sends no part. */
static void mpu_run_workers(struct mpu *u, struct sum_pass *sp)
{
    int nthreads = u->wb->cfg.parts_parallel < u->nparts ? u->wb->cfg.parts_parallel : u->nparts;
    pthread_t tids[PARTS_THREADS_MAX], sum_tid;
    if (nthreads > PARTS_THREADS_MAX)
        nthreads = PARTS_THREADS_MAX;
    bool summing = sp->want[0] && pthread_create(&sum_tid, NULL, sum_pass_main, sp) == 0;
    bool bad = false; /* known before any part goes (no thread for the pass: it ran here) */
    if (sp->want[0] && !summing) {
        sum_pass_main(sp);
        bad = sp->rc != 0;
    }
    int started = 0;
    for (int i = 1; !bad && i < nthreads; i++)
        if (pthread_create(&tids[started], NULL, part_worker, u) == 0)
            started++;
    if (!bad)
        part_worker(u);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    if (summing)
        pthread_join(sum_tid, NULL); /* sp is read only after this */
}

/* After the parts: the attempt's verdict (a bad local copy first, then the workers' error), and
 * unless there is one, the row still wanted and its key free, every part done, *parts a copy of
 * the part list for the complete request, and "may exist" journalled before it (mark_maybe).
 * wb->lock held. */
static int mpu_verdict(struct mpu *u, const struct sum_pass *sp, struct attempt *at,
                       struct backend_part **parts)
{
    struct wb *wb = u->wb;
    struct wb_entry *e = u->e;
    int rc = sp->rc ? sp->rc : u->err; /* a bad local copy is the verdict, whatever the parts did */
    if (sp->rc) {
        tier_err_set("%s", sp->msg);
        at->refused = sp->mismatch;
    } else if (u->err) {
        tier_err_set("%s", u->msg);
        at->refused = u->refused;
    }
    if (!rc && stop_requested(wb, e))
        rc = -ECANCELED;
    if (!rc && key_blocked(wb, e))
        rc = RETRY_SOON;
    if (!rc && e->parts_done != u->nparts) {
        tier_err_set("write-back: %s: %d of %d parts uploaded", u->key, e->parts_done, u->nparts);
        rc = -EIO;
    }
    if (!rc) {
        *parts = malloc((size_t)u->nparts * sizeof(**parts));
        if (*parts)
            memcpy(*parts, e->parts, (size_t)u->nparts * sizeof(**parts));
        else
            rc = -ENOMEM;
    }
    if (!rc)
        rc = mark_maybe(wb, e, at);
    return rc;
}

/* Upload u's parts from the staging file and check them (mpu_verdict); *parts: the part list for
 * the complete request (the caller frees it). An upload the backend no longer knows restarts
 * from the local copy. */
static int mpu_send_parts(struct mpu *u, const char *sum, struct attempt *at,
                          struct backend_part **parts)
{
    u->fd = open_staging(u->wb, u->e->id);
    if (u->fd < 0) {
        at->refused = u->fd == -EBADMSG; /* gone while its row says sealed */
        return u->fd;
    }
    struct sum_pass sp = {.fd = u->fd, .size = u->size, .key = u->key, .want = sum};
    mpu_run_workers(u, &sp);
    close(u->fd);
    pthread_mutex_lock(&u->wb->lock);
    int rc = mpu_verdict(u, &sp, at, parts);
    pthread_mutex_unlock(&u->wb->lock);
    if (rc && upload_gone(rc)) {
        restart_multipart(u->wb, u->e, u->be);
        rc = -EIO; /* retried from the local copy, not a refusal of the file */
    }
    return rc;
}

/* A multipart ETag of the form md5(part md5s)-N must be the one of the parts sent. */
static int check_multipart_etag(const char *key, const char *etag, const struct backend_part *parts,
                                int nparts)
{
    char want[48], got[48];
    multipart_etag(parts, nparts, want);
    size_t gl = strlen(etag);
    if (gl >= 2 && etag[0] == '"' && etag[gl - 1] == '"') {
        snprintf(got, sizeof(got), "%.*s", (int)(gl - 2), etag + 1);
    } else {
        tier_strlcpy(got, etag, sizeof(got));
    }
    if (want[0] && strchr(got, '-') && strcasecmp(want, got) != 0) {
        tier_err_set("write-back: %s: multipart ETag %s is not the expected %s", key, etag, want);
        log_err("%s", tier_err_msg());
        return -EIO;
    }
    return 0;
}

/* Complete u's upload with parts, check the object (its multipart ETag, its size) and journal
 * UPLOADED; an object found wrong, or an upload the backend no longer knows, restarts the upload
 * from the local copy. */
static int mpu_complete_verify(struct mpu *u, const struct backend_part *parts, struct attempt *at)
{
    char etag[BACKEND_ETAG_MAX] = "";
    int rc = backend_mpu_complete(u->be, UPLOAD_IO(u->e), u->key, u->upload_id, parts,
                                  (size_t)u->nparts, etag);
    if (rc == -EFBIG) /* EntityTooLarge; not ENAMETOOLONG, which can come from its answer */
        at->refused = at->final_refused = true;
    if (rc) {
        log_warn("write-back: completing the upload of %s failed: %s", u->key, tier_err_msg());
        if (upload_gone(rc)) {
            restart_multipart(u->wb, u->e, u->be);
            rc = -EIO; /* retried from the local copy, not a refusal of the file */
        }
        return rc;
    }
    rc = check_multipart_etag(u->key, etag, parts, u->nparts);
    if (!rc)
        rc = verify_object(u->e, u->be, u->key, u->size);
    if (rc == -EIO) {
        /* The object is wrong or unreadable; the upload id is spent: start over. */
        restart_multipart(u->wb, u->e, u->be);
        return rc;
    }
    if (!rc)
        rc = finish_upload(u->wb, u->e, etag);
    return rc;
}

static int upload_multipart(struct wb *wb, struct wb_entry *e, struct backend *be, const char *key,
                            uint64_t size, const char *sum, struct attempt *at)
{
    uint64_t psz;
    int rc = part_size_for(wb, be, size, &psz);
    if (rc) {
        at->refused = true;
        return rc;
    }
    int nparts = (int)((size + psz - 1) / psz);
    if (nparts < 1)
        nparts = 1;
    struct mpu u = {.wb = wb,
                    .e = e,
                    .be = be,
                    .key = key,
                    .size = size,
                    .psz = psz,
                    .nparts = nparts,
                    .next = 1};
    char *upload_id = NULL;
    rc = mpu_begin_or_resume(&u, at, &upload_id);
    if (rc)
        return rc;
    u.upload_id = upload_id;
    struct backend_part *parts = NULL;
    rc = mpu_send_parts(&u, sum, at, &parts);
    if (!rc)
        rc = mpu_complete_verify(&u, parts, at);
    free(parts);
    free(upload_id);
    return rc;
}

/* ---- cancelled rows -------------------------------------------------------------------------- */

static int process_cancelled(struct wb *wb, struct wb_entry *e, struct backend *be, const char *key,
                             bool *dropped)
{
    pthread_mutex_lock(&wb->lock);
    char *upload_id = e->upload_id ? strdup(e->upload_id) : NULL;
    bool del = e->etag[0] != '\0';
    bool orphans = e->mpu_orphans_ns != 0;
    pthread_mutex_unlock(&wb->lock);
    int rc = 0;
    if (e->upload_id && !upload_id)
        return -ENOMEM;
    if (orphans) /* an unlinked or renamed row that may have left an unjournalled upload */
        abort_orphans(wb, e, be, key);
    if (upload_id) {
        rc = backend_mpu_abort(be, UPLOAD_IO(e), key, upload_id);
        if (rc == -ENOENT)
            rc = 0;
    }
    if (!rc && del) {
        rc = backend_del(be, UPLOAD_IO(e), key);
        if (rc == -ENOENT)
            rc = 0;
        if (rc && backend_key_check(be, key) != 0) {
            /* a key this backend can never hold has no object to delete (a row of a journal
             * from before the create-time check): retrying would block the key for ever */
            log_warn("write-back: %s:%s cannot exist in the backend (%s); cancellation done",
                     be->name, key, tier_err_msg());
            rc = 0;
        }
    }
    free(upload_id);
    if (rc)
        return rc;
    pthread_mutex_lock(&wb->lock);
    rc = jr_delete(wb->db, e->id);
    int64_t id = e->id;
    if (!rc) {
        wb_entry_drop(wb, e);
        *dropped = true;
    }
    pthread_mutex_unlock(&wb->lock);
    if (!rc)
        wb_emit(wb, WB_EV_CANCELLED, id);
    return rc;
}

/* ---- the threads ----------------------------------------------------------------------------- */

/* SEALED/UPLOADING -> FAILED (the attempt was `refused`): the backend can never take e, or its
 * local copy no longer matches its seal checksum. Its multipart upload, if any, is aborted first
 * (best effort: a failed abort leaves the orphan flag, so the row that later cancels e lists and
 * aborts it). The "may exist" marker this attempt set before a final request that was then
 * refused is dropped (nothing was stored, and a cancel must not delete a key the backend may
 * refuse for ever); one set by an earlier attempt stays. Row and staging file stay, so nothing
 * is lost silently and the failure shows (wb_wait -EIO, wb_list, reads -EIO) until the file is
 * unlinked or replaced. 0, or the journal's error (the entry is unchanged and the attempt is
 * retried). */
static int fail_sealed(struct wb *wb, struct wb_entry *e, struct backend *be, const char *key,
                       int err, const struct attempt *at)
{
    char *why = NULL;
    if (asprintf(&why, "%s: %s", strerror(-err), tier_err_msg()) < 0)
        why = NULL;
    pthread_mutex_lock(&wb->lock);
    char *upload_id = e->upload_id ? strdup(e->upload_id) : NULL;
    pthread_mutex_unlock(&wb->lock);
    if (upload_id) {
        abort_upload(wb, e, be, key, upload_id);
        free(upload_id);
    }
    pthread_mutex_lock(&wb->lock);
    struct wb_change c = {.state = WB_FAILED,
                          .etag = at->maybe_set && at->final_refused ? "" : NULL,
                          .error = why ? why : strerror(-err)};
    int rc = wb_commit(wb, e, WB_JR_FAIL, &c);
    free(why);
    if (rc) {
        pthread_mutex_unlock(&wb->lock);
        return rc;
    }
    clear_parts(e);
    wb->stats.upload_failures++;
    int64_t id = e->id;
    pthread_cond_broadcast(&wb->cond);
    log_err("write-back: %s:%s FAILED and will not be uploaded (its local copy is kept until the "
            "file is removed or rewritten): %s",
            be->name, key, e->error ? e->error : strerror(-err));
    pthread_mutex_unlock(&wb->lock);
    wb_emit(wb, WB_EV_FAILED, id);
    return 0;
}

static int process(struct wb *wb, struct wb_entry *e, bool *dropped)
{
    pthread_mutex_lock(&wb->lock);
    char sum[WB_CHECKSUM_MAX];
    memcpy(sum, e->checksum, sizeof(sum));
    char *key = strdup(e->key);
    char *bname = strdup(e->backend);
    enum wb_state st = e->state;
    uint64_t size = e->size;
    bool has_upload = e->upload_id != NULL;
    bool orphans = e->mpu_orphans_ns != 0;
    int64_t id = e->id;
    pthread_mutex_unlock(&wb->lock);
    int rc = 0;
    tier_err_clear(); /* a sentence from another file's attempt must not be journalled here */
    if (!key || !bname) {
        rc = -ENOMEM;
        goto out;
    }
    struct backend *be = wb->cfg.resolve(wb->cfg.resolve_ctx, bname);
    if (!be) {
        tier_err_set("write-back: no backend named '%s' for %s", bname, key);
        rc = -ENODEV;
        goto out;
    }
    if (st == WB_CANCELLED) {
        rc = process_cancelled(wb, e, be, key, dropped);
        goto out;
    }
    wb_emit(wb, WB_EV_UPLOAD_START, id);
    if (!has_upload && orphans)
        abort_orphans(wb, e, be, key);
    struct attempt at = {0};
    if (size < wb->cfg.part_size_bytes && !has_upload)
        rc = upload_single(wb, e, be, key, size, sum, &at);
    else
        rc = upload_multipart(wb, e, be, key, size, sum, &at);
    if (rc && at.refused) {
        rc = fail_sealed(wb, e, be, key, rc, &at);
        if (!rc)
            goto free_out; /* FAILED: nothing to retry */
    }
out:
    if (rc && rc != -ECANCELED && rc != RETRY_SOON)
        log_warn("write-back: upload of %s:%s failed (%s); will retry: %s", bname ? bname : "?",
                 key ? key : "?", strerror(-rc), tier_err_msg());
free_out:
    free(key);
    free(bname);
    return rc;
}

uint64_t wb_holdoff_until(struct wb *wb, uint64_t now)
{
    uint64_t h = wb->cfg.upload_holdoff_ms * TIER_NS_PER_MS;
    if (!h || wb->waiters || wb->bp_waiters || wb->stopping)
        return 0;
    if (wb->cfg.max_dirty_bytes && wb->dirty_bytes >= wb->cfg.max_dirty_bytes / 2)
        return 0; /* start draining before writers meet the bound */
    if (wb->cfg.max_dirty_age_ms &&
        wb_oldest_pending_age_ms(wb, now) * 2 >= wb->cfg.max_dirty_age_ms)
        return 0; /* the same for the age bound */
    if (atomic_load_explicit(&wb->writers_busy, memory_order_relaxed) > 0)
        return now + h; /* an fsync or seal is running: look again later */
    uint64_t last = atomic_load_explicit(&wb->last_write_mono_ns, memory_order_relaxed);
    return last && now < last + h ? last + h : 0;
}

bool wb_entry_held(const struct wb *wb, const struct wb_entry *e, uint64_t hold, uint64_t now)
{
    /* only uploads not yet started: a started one finishes (its parts hold local space) */
    return hold && e->state == WB_SEALED && !e->busy && !e->upload_id &&
           now < e->sealed_mono_ns + wb->cfg.upload_holdoff_max_ms * TIER_NS_PER_MS;
}

/* Whether e may be worked on now; if not and it waits for a time (a retry, or an upload held
 * back while writers are active), *wake gets that time when it is the earliest. */
static bool startable(struct wb *wb, struct wb_entry *e, uint64_t hold, uint64_t now,
                      uint64_t *wake)
{
    if (e->busy || e->interrupt) /* interrupt: a quiescing thread is about to take it */
        return false;
    if (e->state == WB_CANCELLED && e->etag[0] && key_busy(wb, e))
        return false;
    if (e->next_try_mono_ns > now) {
        if (!*wake || e->next_try_mono_ns < *wake)
            *wake = e->next_try_mono_ns;
        return false;
    }
    if (wb_entry_held(wb, e, hold, now)) {
        uint64_t until = e->sealed_mono_ns + wb->cfg.upload_holdoff_max_ms * TIER_NS_PER_MS;
        if (hold < until)
            until = hold;
        if (!*wake || until < *wake)
            *wake = until;
        return false;
    }
    return true;
}

/* The next entry to work on, or NULL: the first cancellation that may run, else the oldest
 * sealed file that may (the ready queue is in seal order, wb_index.c), so the backlog drains
 * oldest first; the walk stops there. *wake: as in startable(), over the entries passed. */
static struct wb_entry *pick(struct wb *wb, uint64_t now, uint64_t *wake)
{
    uint64_t hold = wb_holdoff_until(wb, now);
    for (struct wb_entry *e = wb->cancels; e; e = e->pnext)
        if (startable(wb, e, hold, now, wake))
            return e;
    for (struct wb_entry *e = wb->ready; e; e = e->pnext)
        if (startable(wb, e, hold, now, wake))
            return e;
    return NULL;
}

/* At most once a second (it is a warning, and with the backend down every file is past it):
 * the files in seal order until the first one that has not waited upload_deadline_ms. */
static void check_deadlines(struct wb *wb, uint64_t now)
{
    uint64_t dl = wb->cfg.upload_deadline_ms;
    if (!dl || now < wb->deadline_check_mono_ns + TIER_NS_PER_SEC)
        return;
    wb->deadline_check_mono_ns = now;
    for (struct wb_entry *e = wb->ready; e; e = e->pnext) {
        if (!e->sealed_mono_ns || now < e->sealed_mono_ns ||
            (now - e->sealed_mono_ns) / TIER_NS_PER_MS <= dl)
            break; /* sealed_mono_ns grows along the queue: the rest are younger */
        if (e->deadline_warned)
            continue;
        e->deadline_warned = true;
        wb->stats.deadline_warnings++;
        log_warn("write-back: %s:%s has waited %llu ms for upload (deadline %llu ms, %d "
                 "attempts); check the backend",
                 e->backend, e->key,
                 (unsigned long long)((now - e->sealed_mono_ns) / TIER_NS_PER_MS),
                 (unsigned long long)dl, e->attempts);
    }
}

static void *uploader_main(void *arg)
{
    struct wb *wb = arg;
    pthread_mutex_lock(&wb->lock);
    while (!wb->stopping) {
        uint64_t now = tier_now_mono_ns();
        check_deadlines(wb, now);
        uint64_t wake = 0;
        struct wb_entry *e = pick(wb, now, &wake);
        if (!e) {
            /* Wake for the next retry, or at least once a second for the deadline check. */
            uint64_t until = now + TIER_NS_PER_SEC;
            if (wake && wake < until)
                until = wake;
            struct timespec ts = {.tv_sec = (time_t)(until / TIER_NS_PER_SEC),
                                  .tv_nsec = (long)(until % TIER_NS_PER_SEC)};
            pthread_cond_timedwait(&wb->work, &wb->lock, &ts);
            continue;
        }
        e->busy = true;
        pthread_mutex_unlock(&wb->lock);
        bool dropped = false;
        int rc = process(wb, e, &dropped);
        bool retry = false;
        pthread_mutex_lock(&wb->lock);
        if (!dropped) {
            e->busy = false;
            now = tier_now_mono_ns();
            if (rc == RETRY_SOON) {
                e->next_try_mono_ns = now + KEY_BLOCKED_RETRY_MS * TIER_NS_PER_MS;
            } else if (rc && rc != -ECANCELED) {
                int shift = e->attempts < 20 ? e->attempts : 20;
                uint64_t d = wb->cfg.retry_base_ms << shift;
                if (d > wb->cfg.retry_max_ms)
                    d = wb->cfg.retry_max_ms;
                e->attempts++;
                e->next_try_mono_ns = now + d * TIER_NS_PER_MS;
                wb->stats.upload_retries++;
                retry = true;
            } else if (!rc) {
                e->attempts = 0;
                e->next_try_mono_ns = 0;
            }
        }
        int64_t id = dropped ? 0 : e->id;
        pthread_cond_broadcast(&wb->cond);
        if (retry) {
            pthread_mutex_unlock(&wb->lock);
            wb_emit(wb, WB_EV_RETRY, id);
            pthread_mutex_lock(&wb->lock);
        }
    }
    pthread_mutex_unlock(&wb->lock);
    return NULL;
}

int wb_uploaders_start(struct wb *wb)
{
    wb->threads = calloc((size_t)wb->cfg.upload_threads, sizeof(*wb->threads));
    if (!wb->threads)
        return -ENOMEM;
    for (int i = 0; i < wb->cfg.upload_threads; i++) {
        int rc = pthread_create(&wb->threads[i], NULL, uploader_main, wb);
        if (rc) {
            wb_uploaders_stop(wb);
            return -rc;
        }
        wb->nthreads++;
    }
    return 0;
}

void wb_uploaders_stop(struct wb *wb)
{
    pthread_mutex_lock(&wb->lock);
    wb->stopping = true;
    pthread_cond_broadcast(&wb->work);
    pthread_cond_broadcast(&wb->cond);
    pthread_mutex_unlock(&wb->lock);
    for (int i = 0; i < wb->nthreads; i++)
        pthread_join(wb->threads[i], NULL);
    free(wb->threads);
    wb->threads = NULL;
    wb->nthreads = 0;
}
