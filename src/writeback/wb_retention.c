/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb_retention.c - retention of uploaded files: the per-directory versions kept
 * (wb_retention_apply), demotion of a file's local copy (wb_demote) and the choice of local
 * copies a full spool may drop (wb_prune_evictable).
 *
 * Locking: as the top of wb.c says (wb->lock guards every entry and the journal connection).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "writeback/wb_int.h"

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
