/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb_ns.c - the namespace operations on write-back files: unlink (a tombstone when an older
 * version is in the backend) and rename (a new key for the files under the old name, the
 * destination's versions cleared).
 *
 * Locking: as the top of wb.c says (wb->lock guards every entry and the journal connection).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "writeback/wb_int.h"

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
