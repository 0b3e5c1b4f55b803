/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb_read.c - what the write-back files answer before they are uploaded: wb_read
 * (read-your-writes from the staging file), wb_list, wb_stats_get and wb_tenant_pending.
 *
 * Locking: as the top of wb.c says (wb->lock guards every entry and the journal connection).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "writeback/wb_int.h"

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
