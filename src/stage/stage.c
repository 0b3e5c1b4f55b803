/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stage.c - staging jobs (stage.h): copy every block of every file under some mount paths into
 * the hot tier ahead of a job. Called by the control API (api.c): stage_start() returns a job id
 * at once, stage_progress_get() reads the job's counters.
 *
 * DESIGN. A job is one lister thread plus cfg.stage_threads worker threads. The lister walks
 * each path (an object is queued as is; anything else is listed recursively, without a
 * delimiter and page by page, under its key prefix) and pushes files, with the version tag and
 * size the listing reported, into a bounded queue; the workers note how much of each file is
 * already cached, then cache_fetch_block() every block of that version with class
 * TIER_IO_BACKGROUND, so the fetches pass the QoS scheduling point behind inference and
 * training reads. A file whose version is unknown, or changed since the listing (-ESTALE from
 * the fetch, which demands the version), is stat()ed and staged afresh. Blocks already cached
 * cost no backend request, which makes a re-run idempotent and a killed run resumable.
 *
 * Job state machine (guarded by job->mu):
 *
 *     RUNNING --(lister and workers finished, no error, not cancelled)--> DONE
 *     RUNNING --(some file failed, a path could not be listed, or cancelled)--> FAILED
 *
 * Locking: reg->mu guards the job list and next_id; job->mu guards the job's queue, counters and
 * state; job->cancel is atomic so that the hot loops can test it without a lock. Lock order is
 * reg->mu before job->mu. No lock is held across backend or cache I/O. Jobs live until the
 * registry is freed (the oldest finished ones are dropped beyond MAX_FINISHED_JOBS).
 */
#include "stage/stage.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "datasets/dataset.h"
#include "datasets/manifest.h"
#include "stage/pinmeta.h"
#include "cache/cache.h"
#include "common/ioctx.h"
#include "tiers/backend.h"

#define MAX_FINISHED_JOBS 256
#define QUEUE_PER_WORKER 16
#define MAX_WORKERS 256

/* One root of a job, resolved by stage_start(). */
struct stage_root {
    char *path; /* mount path as given (normalised: no trailing '/') */
    struct tierd_ns *ns;
    char *key; /* object key, or the listing prefix when is_prefix */
    bool is_prefix;
    uint64_t size_bytes;         /* object size when !is_prefix */
    char etag[BACKEND_ETAG_MAX]; /* its version when !is_prefix */
    /* a dataset version's path (<mount>/.tierd/datasets/TREE@NAME[/...]): its manifest and the
     * files of it to stage, those in [vfirst, vlast) under key (the path inside the version, ""
     * for all); each read pinned to the manifest's ETag */
    struct manifest *version;
    size_t vfirst, vlast;
};

struct stage_item {
    struct tierd_ns *ns;
    char *key;
    uint64_t listed_bytes;
    char etag[BACKEND_ETAG_MAX]; /* version from the listing; "" = unknown, stat first */
    bool pinned;                 /* a dataset version's file: this etag or nothing */
    char *version_id;            /* ... and the object version to read (owned), or NULL */
};

struct stage_job {
    uint64_t id; /* immutable */
    struct stage_registry *reg;
    bool pin;                 /* immutable */
    bool cluster;             /* immutable: blocks other nodes own are warmed there (c.warm) */
    struct tier_ioctx io;     /* whose I/O: class background of the job's tenant; immutable */
    struct stage_root *roots; /* immutable after start */
    size_t nroots;
    pthread_t lister;
    atomic_bool cancel;

    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    struct stage_item *queue; /* ring of qcap items */
    size_t qcap, qhead, qlen;
    bool queue_closed;       /* lister pushes no more */
    struct stage_progress p; /* state, counters, first_error */
    uint64_t start_ns;
    bool finished; /* lister thread has returned (join will not block) */

    struct stage_job *next; /* registry list, guarded by reg->mu */
};

struct stage_registry {
    struct stage_ctx c; /* immutable; what it points to outlives the registry */
    pthread_mutex_t mu;
    struct stage_job *jobs; /* newest first */
    uint64_t next_id;
    bool closing;
};

/* ---- helpers ------------------------------------------------------------------------------ */

static size_t block_size(const struct stage_registry *r)
{
    return cache_block_size(r->c.cache);
}

static int worker_count(const struct stage_registry *r)
{
    int n = r->c.threads;
    if (n <= 0)
        return 8;
    return n > MAX_WORKERS ? MAX_WORKERS : n;
}

/* The mount path of a key inside ns, for messages: ns path + key without the ns prefix. */
static void mount_path_of(const struct tierd_ns *ns, const char *key, char *buf, size_t bufsz)
{
    const char *prefix = ns->conf->prefix ? ns->conf->prefix : "";
    size_t pl = strlen(prefix);
    const char *rel = strncmp(key, prefix, pl) == 0 ? key + pl : key;
    snprintf(buf, bufsz, "%s/%s", ns->conf->path, rel);
}

/* Count a failure; keep the first one as "path: message". Takes job->mu. */
static void job_error(struct stage_job *job, const char *path, int rc, const char *msg)
{
    if (!msg || !*msg)
        msg = strerror(-rc);
    pthread_mutex_lock(&job->mu);
    /* Bounded to fit first_error[256]; the log line below has the message whole. */
    if (job->p.errors++ == 0)
        snprintf(job->p.first_error, sizeof(job->p.first_error), "%.120s: %.130s", path, msg);
    pthread_mutex_unlock(&job->mu);
    log_warn("stage job %llu: %s: %s", (unsigned long long)job->id, path, msg);
}

/* ---- the bounded queue between lister and workers --------------------------------------- */

/* Push an item (takes ownership of key). Blocks while the queue is full. Returns -ECANCELED if
 * the job was cancelled (key is freed). */
static int queue_push_item(struct stage_job *job, struct tierd_ns *ns, char *key, uint64_t bytes,
                           const char *etag, bool pinned, char *version_id)
{
    pthread_mutex_lock(&job->mu);
    while (job->qlen == job->qcap && !atomic_load(&job->cancel))
        pthread_cond_wait(&job->not_full, &job->mu);
    if (atomic_load(&job->cancel)) {
        pthread_mutex_unlock(&job->mu);
        free(key);
        free(version_id);
        return -ECANCELED;
    }
    struct stage_item *it = &job->queue[(job->qhead + job->qlen) % job->qcap];
    it->ns = ns;
    it->key = key;
    it->listed_bytes = bytes;
    tier_strlcpy(it->etag, etag ? etag : "", sizeof(it->etag));
    it->pinned = pinned;
    it->version_id = version_id;
    job->qlen++;
    job->p.files_total++;
    job->p.bytes_total += bytes;
    pthread_cond_signal(&job->not_empty);
    pthread_mutex_unlock(&job->mu);
    return 0;
}

static int queue_push(struct stage_job *job, struct tierd_ns *ns, char *key, uint64_t bytes,
                      const char *etag)
{
    return queue_push_item(job, ns, key, bytes, etag, false, NULL);
}

/* Pop an item; false when the queue is closed and empty, or the job was cancelled. */
static bool queue_pop(struct stage_job *job, struct stage_item *out)
{
    pthread_mutex_lock(&job->mu);
    while (job->qlen == 0 && !job->queue_closed && !atomic_load(&job->cancel))
        pthread_cond_wait(&job->not_empty, &job->mu);
    if (job->qlen == 0 || atomic_load(&job->cancel)) {
        pthread_mutex_unlock(&job->mu);
        return false;
    }
    *out = job->queue[job->qhead];
    job->qhead = (job->qhead + 1) % job->qcap;
    job->qlen--;
    pthread_cond_signal(&job->not_full);
    pthread_mutex_unlock(&job->mu);
    return true;
}

static void queue_close(struct stage_job *job)
{
    pthread_mutex_lock(&job->mu);
    job->queue_closed = true;
    pthread_cond_broadcast(&job->not_empty);
    pthread_mutex_unlock(&job->mu);
}

/* ---- workers ------------------------------------------------------------------------------ */

/* Fetch every block of one version of a file. Counts progress as it goes and, so that a retry
 * with another version can take it back, reports what it counted in *done, *cached and
 * *on_peers. Returns 0 or the first fetch error (-ECANCELED when the job was cancelled). */
static int fetch_blocks(struct stage_job *job, const struct cache_obj *obj, uint64_t *done,
                        uint64_t *cached, uint64_t *on_peers)
{
    struct stage_registry *r = job->reg;
    const struct tier_ioctx *io = &job->io;
    size_t bs = block_size(r);

    *cached = cache_cached_bytes(r->c.cache, obj);
    *done = 0;
    *on_peers = 0;
    pthread_mutex_lock(&job->mu);
    job->p.bytes_already_cached += *cached;
    pthread_mutex_unlock(&job->mu);

    uint64_t nblocks = (obj->size_bytes + bs - 1) / bs;
    for (uint64_t i = 0; i < nblocks; i++) {
        if (atomic_load(&job->cancel))
            return -ECANCELED;
        tier_err_clear();
        uint64_t left = obj->size_bytes - i * bs;
        uint64_t len = left < bs ? left : bs;
        /* a cluster's staging: a block another node owns is fetched into that node's cache */
        bool on_peer = job->cluster && r->c.warm(r->c.warm_ud, io, obj, i) == 0;
        int rc = on_peer ? 0 : cache_fetch_block(r->c.cache, io, obj, i, job->pin);
        if (rc < 0)
            return rc;
        *done += len;
        if (on_peer)
            *on_peers += len;
        pthread_mutex_lock(&job->mu);
        job->p.bytes_done += len;
        if (on_peer)
            job->p.bytes_on_peers += len;
        pthread_mutex_unlock(&job->mu);
    }
    return 0;
}

/* Stage one file. The version and size come from the listing when it gave them (S3 and POSIX
 * listings report the same tag as stat), which saves one backend request per file; every
 * block fetch demands that version (if_match), so if the object changed since the listing the
 * fetch fails with -ESTALE and the file is staged again from a fresh stat. */
static void stage_file(struct stage_job *job, const struct stage_item *it)
{
    struct backend_stat st = {0};
    char path[1200];
    uint64_t done = 0, cached = 0, on_peers = 0;
    int rc = -ESTALE;

    mount_path_of(it->ns, it->key, path, sizeof(path));
    if (it->etag[0]) {
        struct cache_obj obj = {.be = it->ns->be,
                                .key = it->key,
                                .etag = it->etag,
                                .size_bytes = it->listed_bytes,
                                .version_id = it->version_id};
        rc = fetch_blocks(job, &obj, &done, &cached, &on_peers);
        if (rc == -ESTALE) {
            /* Take back what this version counted; the fresh one counts again. */
            pthread_mutex_lock(&job->mu);
            job->p.bytes_done -= done;
            job->p.bytes_already_cached -= cached;
            job->p.bytes_on_peers -= on_peers;
            pthread_mutex_unlock(&job->mu);
        }
    }
    if ((rc == -ESTALE || rc == -ENOENT) && it->pinned) {
        tier_err_set("it %s in the backend since its dataset version was committed, and %s: the "
                     "version's bytes cannot be staged",
                     rc == -ESTALE ? "changed" : "was deleted",
                     it->version_id ? "its recorded version is gone too"
                                    : "the commit recorded no version id (the bucket keeps no "
                                      "older versions)");
        rc = -EIO;
    } else if (rc == -ESTALE) {
        tier_err_clear();
        rc = backend_stat(it->ns->be, &job->io, it->key, &st);
        if (rc == 0 && st.is_dir)
            rc = -EISDIR;
        if (rc == 0) {
            pthread_mutex_lock(&job->mu);
            /* The listing's size may be older than the stat; the total follows the object. */
            job->p.bytes_total = job->p.bytes_total - it->listed_bytes + st.size_bytes;
            pthread_mutex_unlock(&job->mu);
            struct cache_obj obj = {
                .be = it->ns->be, .key = it->key, .etag = st.etag, .size_bytes = st.size_bytes};
            rc = fetch_blocks(job, &obj, &done, &cached, &on_peers);
        }
    }
    if (rc == -ECANCELED)
        return;
    if (rc < 0) {
        job_error(job, path, rc, tier_err_msg());
        return;
    }
    if (job->pin && job->reg->c.pinned && !it->pinned) {
        /* the mount can show it while the backend cannot be asked (pinmeta.h); not a version's
         * file, whose bytes need not be the key's current ones */
        struct pinmeta_obj po = {.size_bytes = st.etag[0] ? st.size_bytes : it->listed_bytes,
                                 .mtime_ns = st.mtime_ns};
        tier_strlcpy(po.etag, st.etag[0] ? st.etag : it->etag, sizeof(po.etag));
        if (pinmeta_note(job->reg->c.pinned, it->ns->be->name, it->key, &po) != 0)
            log_warn("stage: cannot note %s for outages (out of memory)", path);
    }
    pthread_mutex_lock(&job->mu);
    job->p.files_done++;
    pthread_mutex_unlock(&job->mu);
}

static void *worker_main(void *arg)
{
    struct stage_job *job = arg;
    struct stage_item it;
    while (queue_pop(job, &it)) {
        stage_file(job, &it);
        free(it.key);
        free(it.version_id);
    }
    return NULL;
}

/* ---- lister ------------------------------------------------------------------------------- */

/* List every object under root->key (no delimiter: the whole sub-tree) and queue it. */
static int list_root(struct stage_job *job, const struct stage_root *root)
{
    char *token = NULL;
    int rc = 0;
    do {
        struct backend_list_page page = {0};
        tier_err_clear();
        rc = backend_list(root->ns->be, &job->io, root->key, NULL, token, 0, &page);
        free(token);
        token = NULL;
        if (rc < 0) {
            job_error(job, root->path, rc, tier_err_msg());
            return rc;
        }
        for (size_t i = 0; i < page.n && rc == 0; i++) {
            const struct backend_entry *e = &page.entries[i];
            size_t nl = strlen(e->name);
            /* Common prefixes cannot appear without a delimiter; S3 "directory markers"
             * (zero-byte keys ending in '/') are not files. */
            if (e->is_prefix || nl == 0 || e->name[nl - 1] == '/')
                continue;
            char *key = strdup(e->name);
            rc = key ? queue_push(job, root->ns, key, e->size_bytes, e->etag) : -ENOMEM;
        }
        if (rc == 0 && page.next_token) {
            token = page.next_token;
            page.next_token = NULL;
        }
        backend_list_page_fini(&page);
    } while (rc == 0 && token);
    free(token);
    if (rc == -ENOMEM)
        job_error(job, root->path, rc, "out of memory while listing");
    return rc;
}

static void *lister_main(void *arg)
{
    struct stage_job *job = arg;
    int nworkers = worker_count(job->reg);
    pthread_t *workers = calloc((size_t)nworkers, sizeof(*workers));
    int started = 0;

    if (workers) {
        for (; started < nworkers; started++) {
            if (pthread_create(&workers[started], NULL, worker_main, job) != 0)
                break;
        }
    }
    if (started == 0) {
        job_error(job, job->roots[0].path, -ENOMEM, "could not start staging workers");
        atomic_store(&job->cancel, true);
    }

    for (size_t i = 0; i < job->nroots && !atomic_load(&job->cancel); i++) {
        const struct stage_root *root = &job->roots[i];
        if (root->version) {
            const struct manifest *m = root->version;
            size_t sl = strlen(root->key); /* the path inside the version ("" all of it) */
            for (size_t k = root->vfirst; k < root->vlast && !atomic_load(&job->cancel); k++) {
                const char *fk = m->files[k].key;
                if (sl && !(strncmp(fk, root->key, sl) == 0 && (fk[sl] == '\0' || fk[sl] == '/')))
                    continue; /* sorted between the matches ("sub-1/x" before "sub/a") */
                char *key = NULL;
                if (asprintf(&key, "%s%s", m->prefix, m->files[k].key) < 0) {
                    job_error(job, root->path, -ENOMEM, "out of memory");
                    break;
                }
                char *vid = m->files[k].version_id ? strdup(m->files[k].version_id) : NULL;
                if (m->files[k].version_id && !vid) {
                    free(key);
                    job_error(job, root->path, -ENOMEM, "out of memory");
                    break;
                }
                if (queue_push_item(job, root->ns, key, m->files[k].size, m->files[k].etag, true,
                                    vid) != 0)
                    break;
            }
        } else if (root->is_prefix) {
            list_root(job, root);
        } else {
            char *key = strdup(root->key);
            if (!key)
                job_error(job, root->path, -ENOMEM, "out of memory");
            else
                queue_push(job, root->ns, key, root->size_bytes, root->etag);
        }
    }
    pthread_mutex_lock(&job->mu);
    job->p.listing_done = true;
    pthread_mutex_unlock(&job->mu);
    queue_close(job);
    /* a version's manifest (up to 512 MiB) is the lister's alone: not kept with the finished
     * job (the registry keeps those for GET /v1/stage) */
    for (size_t i = 0; i < job->nroots; i++) {
        if (job->roots[i].version) {
            manifest_fini(job->roots[i].version);
            free(job->roots[i].version);
            job->roots[i].version = NULL;
        }
    }

    for (int i = 0; i < started; i++)
        pthread_join(workers[i], NULL);
    free(workers);

    /* Items left behind by a cancel are freed here; nobody pops any more. */
    pthread_mutex_lock(&job->mu);
    while (job->qlen > 0) {
        free(job->queue[job->qhead].key);
        free(job->queue[job->qhead].version_id);
        job->qhead = (job->qhead + 1) % job->qcap;
        job->qlen--;
    }
    job->p.elapsed_ns = tier_now_mono_ns() - job->start_ns;
    job->p.state = job->p.errors == 0 && !atomic_load(&job->cancel) ? STAGE_DONE : STAGE_FAILED;
    if (atomic_load(&job->cancel) && job->p.errors == 0)
        tier_strlcpy(job->p.first_error,
                     "staging cancelled (its admitted job was released, or tierd is stopping)",
                     sizeof(job->p.first_error));
    job->finished = true;
    pthread_mutex_unlock(&job->mu);
    log_info("stage job %llu %s: %llu/%llu files, %llu bytes (%llu already cached), %llu errors",
             (unsigned long long)job->id, job->p.state == STAGE_DONE ? "done" : "failed",
             (unsigned long long)job->p.files_done, (unsigned long long)job->p.files_total,
             (unsigned long long)job->p.bytes_done, (unsigned long long)job->p.bytes_already_cached,
             (unsigned long long)job->p.errors);
    return NULL;
}

/* ---- jobs and registry -------------------------------------------------------------------- */

static void job_free(struct stage_job *job)
{
    if (!job)
        return;
    for (size_t i = 0; i < job->nroots; i++) {
        free(job->roots[i].path);
        free(job->roots[i].key);
        if (job->roots[i].version) {
            manifest_fini(job->roots[i].version);
            free(job->roots[i].version);
        }
    }
    free(job->roots);
    free(job->queue);
    pthread_cond_destroy(&job->not_full);
    pthread_cond_destroy(&job->not_empty);
    pthread_mutex_destroy(&job->mu);
    free(job);
}

/* A dataset version's path (dataset.h, DATASET_VIEW): the version's manifest (checked:
 * dataset_show) and its files under the path into root. 1: not such a path; 0; -errno with a
 * message. */
static int version_resolve(struct stage_registry *r, struct stage_root *root)
{
    char *tree = NULL, name[MANIFEST_NAME_MAX];
    const char *rest = NULL;
    int rc = dataset_view_path(root->path, &tree, name, &rest);
    if (rc == -ENOENT)
        return 1;
    if (rc == 1) {
        tier_err_set("%s is a directory of the versions' view, not a version: name one (its "
                     "path is `tierctl dataset path TREE NAME`)",
                     root->path);
        return -EINVAL;
    }
    if (rc)
        return rc;
    struct tierd_ns *ns = NULL;
    char *tkey = NULL;
    bool is_root = false;
    rc = r->c.ops.resolve(r->c.ops.ud, tree, &ns, &tkey, &is_root);
    free(tkey);
    struct manifest *m = rc == 0 ? calloc(1, sizeof(*m)) : NULL;
    if (rc == 0 && !m)
        rc = -ENOMEM;
    if (rc == 0) {
        tier_err_clear();
        rc = r->c.ops.manifest(r->c.ops.ud, tree, name, SIZE_MAX, m);
        if (rc == -ENOENT && !*tier_err_msg())
            tier_err_set("%s: no version %s of %s", root->path, name, tree);
    }
    free(tree);
    if (rc) {
        free(m);
        return rc;
    }
    /* rest: "" (the whole version), or "/sub" (one file, or the files under sub/) */
    const char *sub = *rest ? rest + 1 : "";
    size_t sl = strlen(sub), first = m->n, last = 0;
    for (size_t k = 0; k < m->n; k++) {
        const char *key = m->files[k].key;
        if (sl == 0 || (strncmp(key, sub, sl) == 0 && (key[sl] == '\0' || key[sl] == '/'))) {
            if (first == m->n)
                first = k;
            last = k + 1;
        }
    }
    if (first == m->n) {
        tier_err_set("%s: no such file or directory in version %s", root->path, name);
        manifest_fini(m);
        free(m);
        return -ENOENT;
    }
    if (!(root->key = strdup(sub))) {
        manifest_fini(m);
        free(m);
        return -ENOMEM;
    }
    root->ns = ns;
    root->version = m;
    root->vfirst = first;
    root->vlast = last;
    root->is_prefix = true;
    return 0;
}

/* Resolve one mount path into a job root: an object, or a prefix with at least one key under
 * it, or a dataset version's files. -ENOENT when the path names no namespace or nothing in its
 * backend. */
static int root_resolve(struct stage_registry *r, const struct tier_ioctx *io, const char *path,
                        struct stage_root *root)
{
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    bool is_root = false;
    struct backend_stat st = {0};
    int rc;

    root->path = strdup(path);
    if (!root->path)
        return -ENOMEM;
    /* "/datasets/x/" means the same as "/datasets/x". */
    size_t pl = strlen(root->path);
    while (pl > 1 && root->path[pl - 1] == '/')
        root->path[--pl] = '\0';
    rc = version_resolve(r, root);
    if (rc != 1)
        return rc; /* a dataset version's path (0), or what is wrong with it */

    rc = r->c.ops.resolve(r->c.ops.ud, root->path, &ns, &key, &is_root);
    if (rc < 0) {
        if (rc == -ENOENT)
            tier_err_set("%s is not inside any namespace", root->path);
        else if (rc == -EINVAL)
            tier_err_set("%s is not a valid mount path", root->path);
        return rc;
    }
    root->ns = ns;
    if (is_root) {
        root->key = key; /* the namespace prefix: "" or "dir/" */
        root->is_prefix = true;
        return 0;
    }

    tier_err_clear();
    rc = backend_stat(ns->be, io, key, &st);
    if (rc == 0 && !st.is_dir) {
        root->key = key;
        root->size_bytes = st.size_bytes;
        tier_strlcpy(root->etag, st.etag, sizeof(root->etag));
        return 0;
    }
    if (rc < 0 && rc != -ENOENT) {
        char msg[512];
        tier_strlcpy(msg, *tier_err_msg() ? tier_err_msg() : strerror(-rc), sizeof(msg));
        tier_err_set("%s: %s", root->path, msg);
        free(key);
        return rc;
    }
    /* A directory (POSIX) or a prefix (S3 has no directories): list under "key/". */
    char *prefix = tier_dir_prefix(key);
    free(key);
    if (!prefix)
        return -ENOMEM;

    struct backend_list_page page = {0};
    rc = backend_list(ns->be, io, prefix, "/", NULL, 1, &page);
    bool empty = page.n == 0;
    backend_list_page_fini(&page);
    if (rc == 0 && empty && !st.is_dir)
        rc = -ENOENT;
    if (rc < 0) {
        if (rc == -ENOENT)
            tier_err_set("%s: no such file or directory", root->path);
        free(prefix);
        return rc;
    }
    root->key = prefix;
    root->is_prefix = true;
    return 0;
}

int stage_registry_new(const struct stage_ctx *ctx, struct stage_registry **out)
{
    struct stage_registry *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return -ENOMEM;
    }
    r->c = *ctx;
    r->next_id = 1;
    *out = r;
    return 0;
}

void stage_registry_free(struct stage_registry *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->closing = true;
    struct stage_job *jobs = r->jobs;
    r->jobs = NULL;
    for (struct stage_job *j = jobs; j; j = j->next) {
        pthread_mutex_lock(&j->mu);
        atomic_store(&j->cancel, true);
        pthread_cond_broadcast(&j->not_full);
        pthread_cond_broadcast(&j->not_empty);
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&r->mu);

    /* Joined without reg->mu: a worker blocked in a fetch finishes that one block first. */
    while (jobs) {
        struct stage_job *next = jobs->next;
        pthread_join(jobs->lister, NULL);
        job_free(jobs);
        jobs = next;
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Under reg->mu: drop the oldest finished jobs beyond MAX_FINISHED_JOBS. */
static void prune_finished(struct stage_registry *r)
{
    size_t nfinished = 0;
    struct stage_job **pp = &r->jobs;
    while (*pp) {
        struct stage_job *j = *pp;
        pthread_mutex_lock(&j->mu);
        bool fin = j->finished;
        pthread_mutex_unlock(&j->mu);
        if (fin && ++nfinished > MAX_FINISHED_JOBS) {
            *pp = j->next;
            pthread_join(j->lister, NULL); /* already returned */
            job_free(j);
            continue;
        }
        pp = &j->next;
    }
}

/* Are [api] max_stage_jobs jobs running already? Called with r->mu held. */
static bool too_many_running(struct stage_registry *r)
{
    int max = r->c.max_jobs;
    if (max <= 0)
        return false;
    int running = 0;
    for (struct stage_job *j = r->jobs; j; j = j->next) {
        pthread_mutex_lock(&j->mu);
        running += j->p.state == STAGE_RUNNING;
        pthread_mutex_unlock(&j->mu);
    }
    if (running < max)
        return false;
    tier_err_set("%d staging jobs are running already ([api] max_stage_jobs); retry when one "
                 "has finished",
                 running);
    return true;
}

int stage_start(struct stage_registry *r, const char *const *paths, size_t npaths, bool pin,
                uint64_t *job_id)
{
    return stage_start_for(r, TIER_TENANT_DEFAULT, paths, npaths, pin, job_id);
}

static int start_job(struct stage_registry *r, uint32_t tenant, const char *const *paths,
                     size_t npaths, bool pin, bool cluster, uint64_t *job_id);

int stage_start_for(struct stage_registry *r, uint32_t tenant, const char *const *paths,
                    size_t npaths, bool pin, uint64_t *job_id)
{
    return start_job(r, tenant, paths, npaths, pin, false, job_id);
}

int stage_start_cluster(struct stage_registry *r, uint32_t tenant, const char *const *paths,
                        size_t npaths, bool pin, uint64_t *job_id)
{
    if (!r->c.warm) {
        tier_err_set("this tierd is in no cluster (no [cluster] section): stage without "
                     "--cluster");
        return -ENOTSUP;
    }
    return start_job(r, tenant, paths, npaths, pin, true, job_id);
}

static int start_job(struct stage_registry *r, uint32_t tenant, const char *const *paths,
                     size_t npaths, bool pin, bool cluster, uint64_t *job_id)
{
    struct stage_job *job = NULL;
    int rc = 0;

    if (!paths || npaths == 0) {
        tier_err_set("nothing to stage: give at least one path");
        return -EINVAL;
    }
    /* refuse before the paths are resolved (a stat each); checked again when the job is added */
    pthread_mutex_lock(&r->mu);
    bool busy = too_many_running(r);
    pthread_mutex_unlock(&r->mu);
    if (busy)
        return -EBUSY;
    job = calloc(1, sizeof(*job));
    if (!job)
        return -ENOMEM;
    job->reg = r;
    job->pin = pin;
    job->cluster = cluster;
    job->io = (struct tier_ioctx){.tenant = tenant, .cls = TIER_IO_BACKGROUND};
    job->p.tenant = tenant;
    atomic_init(&job->cancel, false);
    pthread_mutex_init(&job->mu, NULL);
    pthread_cond_init(&job->not_empty, NULL);
    pthread_cond_init(&job->not_full, NULL);
    job->qcap = (size_t)worker_count(r) * QUEUE_PER_WORKER;
    job->queue = calloc(job->qcap, sizeof(*job->queue));
    job->roots = calloc(npaths, sizeof(*job->roots));
    if (!job->queue || !job->roots) {
        rc = -ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < npaths; i++) {
        job->nroots = i + 1;
        rc = root_resolve(r, &job->io, paths[i], &job->roots[i]);
        if (rc < 0)
            goto fail;
    }
    job->p.state = STAGE_RUNNING;
    job->start_ns = tier_now_mono_ns();

    pthread_mutex_lock(&r->mu);
    if (r->closing) {
        pthread_mutex_unlock(&r->mu);
        rc = -ESHUTDOWN;
        goto fail;
    }
    if (too_many_running(r)) {
        pthread_mutex_unlock(&r->mu);
        rc = -EBUSY;
        goto fail;
    }
    job->id = r->next_id;
    if (pthread_create(&job->lister, NULL, lister_main, job) != 0) {
        pthread_mutex_unlock(&r->mu);
        tier_err_set("could not start a staging thread");
        rc = -EAGAIN;
        goto fail;
    }
    r->next_id++;
    job->next = r->jobs;
    r->jobs = job;
    prune_finished(r);
    pthread_mutex_unlock(&r->mu);
    *job_id = job->id;
    return 0;

fail:
    job_free(job);
    return rc;
}

/* Under r->mu: the job of job_id, returned with its own mu held (the caller unlocks it before
 * r->mu), or NULL. */
static struct stage_job *job_find_locked(struct stage_registry *r, uint64_t job_id)
{
    for (struct stage_job *j = r->jobs; j; j = j->next) {
        if (j->id == job_id) {
            pthread_mutex_lock(&j->mu);
            return j;
        }
    }
    return NULL;
}

int stage_cancel(struct stage_registry *r, uint64_t job_id)
{
    pthread_mutex_lock(&r->mu);
    struct stage_job *j = job_find_locked(r, job_id);
    if (j) {
        atomic_store(&j->cancel, true);
        pthread_cond_broadcast(&j->not_full);
        pthread_cond_broadcast(&j->not_empty);
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return j ? 0 : -ENOENT;
}

size_t stage_tenant_running(struct stage_registry *r, uint32_t tenant)
{
    size_t n = 0;
    pthread_mutex_lock(&r->mu);
    for (struct stage_job *j = r->jobs; j; j = j->next) {
        if (j->io.tenant != tenant)
            continue;
        pthread_mutex_lock(&j->mu);
        n += j->p.state == STAGE_RUNNING;
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

int stage_progress_get(struct stage_registry *r, uint64_t job_id, struct stage_progress *p)
{
    pthread_mutex_lock(&r->mu);
    struct stage_job *j = job_find_locked(r, job_id);
    if (j) {
        *p = j->p;
        if (p->state == STAGE_RUNNING)
            p->elapsed_ns = tier_now_mono_ns() - j->start_ns;
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return j ? 0 : -ENOENT;
}
