/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb_index.c - the write-back engine's in-memory indexes over its entries, so that the metadata
 * calls of the mount (lookup, getattr, readdir: wb_list of one key or one directory) and the
 * per-key checks of the uploaders cost the rows of that key or directory, not every row of the
 * buffer (a scan per call made each stat walk and copy all 100,000 rows of a full buffer).
 *
 *   by_key   every entry, sorted by (backend, key, id): a key's generations are adjacent and a
 *            key prefix is one contiguous range (binary search, then a walk while it matches).
 *   by_id    every entry, sorted by id (ids only grow, so an insert is an append but for the
 *            rows loaded at recovery, which come in id order too).
 *   ready    the SEALED and UPLOADING entries in seal order, (sealed_ns, id): the burst buffer
 *            drains oldest first, pick() takes the first one it may start (from the head, so it
 *            costs the entries it passes over: those uploading now, waiting for a retry or held
 *            by burst absorption), and the age bound reads the head. A file keeps its place while
 *            it uploads and while it waits for a retry, and UPLOADING -> SEALED (a restarted
 *            multipart upload) keeps it too. Seals append (wb_file_close makes sealed_ns grow
 *            strictly, wb_next_sealed_ns); an entry inserted out of order (recovery loads rows in
 *            id order, a rename re-queues one) is placed by a walk back from the tail, which costs
 *            its distance from the tail.
 *   cancels  the CANCELLED entries, in the order they were cancelled; pick() serves them first.
 *
 * Sorted arrays rather than trees: lookups are binary searches and ranges are walks over
 * adjacent pointers; an insert or removal moves the pointers after it (memmove of at most 8 bytes
 * a row: 0.8 MB at 100,000 rows, far below the journal commit that comes with every change).
 * Capacity is reserved (wbi_reserve) before the journal commit of a new row, so inserting never
 * fails after the commit.
 *
 * It also owns an entry's memory (wb_entry_free), so that journal.c, which builds entries at load,
 * depends on this file only, not on wb.c and the wb_*.c files (which call journal.c): no cycle
 * between them.
 *
 * Locking: wb->lock for everything here (the caller holds it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "writeback/wb_int.h"

/* An entry's memory (also of one never indexed: jr_load's, recovery's). */
void wb_entry_free(struct wb_entry *e)
{
    if (!e)
        return;
    free(e->backend);
    free(e->key);
    free(e->upload_id);
    free(e->parts);
    free(e->part_bytes);
    free(e->error);
    free(e);
}

static int cmp_key(const struct wb_entry *e, const char *backend, const char *key, int64_t id)
{
    int c = strcmp(e->backend, backend);
    if (!c)
        c = strcmp(e->key, key);
    if (!c)
        c = e->id < id ? -1 : e->id > id;
    return c;
}

/* First position in by_key whose (backend, key, id) is >= the one given. */
static size_t lower_key(const struct wb *wb, const char *backend, const char *key, int64_t id)
{
    size_t lo = 0, hi = wb->nkeys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_key(wb->by_key[mid], backend, key, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t lower_id(const struct wb *wb, int64_t id)
{
    size_t lo = 0, hi = wb->nids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (wb->by_id[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int grow(struct wb_entry ***v, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    struct wb_entry **p = realloc(*v, n * sizeof(*p));
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = n;
    return 0;
}

int wbi_reserve(struct wb *wb, size_t more)
{
    int rc = grow(&wb->by_key, &wb->cap_keys, wb->nkeys + more);
    return rc ? rc : grow(&wb->by_id, &wb->cap_ids, wb->nids + more);
}

enum { Q_NONE, Q_READY, Q_CANCELS };

static int queue_of(enum wb_state s)
{
    if (s == WB_SEALED || s == WB_UPLOADING)
        return Q_READY;
    return s == WB_CANCELLED ? Q_CANCELS : Q_NONE;
}

/* Whether a goes before b in seal order. */
static bool seal_before(const struct wb_entry *a, const struct wb_entry *b)
{
    return a->sealed_ns < b->sealed_ns || (a->sealed_ns == b->sealed_ns && a->id < b->id);
}

static void queue_add(struct wb *wb, struct wb_entry *e, int q)
{
    struct wb_entry **head = q == Q_READY ? &wb->ready : &wb->cancels;
    struct wb_entry **tail = q == Q_READY ? &wb->ready_tail : &wb->cancels_tail;
    struct wb_entry *after = *tail; /* e goes after this one (NULL: at the head) */
    if (q == Q_READY)
        while (after && seal_before(e, after))
            after = after->pprev;
    e->pprev = after;
    e->pnext = after ? after->pnext : *head;
    if (e->pnext)
        e->pnext->pprev = e;
    else
        *tail = e;
    if (after)
        after->pnext = e;
    else
        *head = e;
    e->queue = q;
}

static void queue_del(struct wb *wb, struct wb_entry *e)
{
    struct wb_entry **head = e->queue == Q_READY ? &wb->ready : &wb->cancels;
    struct wb_entry **tail = e->queue == Q_READY ? &wb->ready_tail : &wb->cancels_tail;
    if (e->pprev)
        e->pprev->pnext = e->pnext;
    else
        *head = e->pnext;
    if (e->pnext)
        e->pnext->pprev = e->pprev;
    else
        *tail = e->pprev;
    e->pnext = e->pprev = NULL;
    e->queue = Q_NONE;
}

void wbi_state_changed(struct wb *wb, struct wb_entry *e)
{
    bool ev = e->state == WB_EVICTABLE;
    if (ev != e->counted_evictable) {
        wb->n_evictable += ev ? 1 : (size_t)-1;
        e->counted_evictable = ev;
    }
    int q = queue_of(e->state);
    if (q == e->queue)
        return;
    if (e->queue != Q_NONE)
        queue_del(wb, e);
    if (q != Q_NONE)
        queue_add(wb, e, q);
}

void wbi_insert(struct wb *wb, struct wb_entry *e)
{
    /* capacity was reserved (wbi_reserve); growing here is a fallback that cannot fail twice */
    if (wbi_reserve(wb, 1) != 0)
        abort(); /* unreachable when the caller reserved; never a silently missing entry */
    size_t i = lower_key(wb, e->backend, e->key, e->id);
    memmove(&wb->by_key[i + 1], &wb->by_key[i], (wb->nkeys - i) * sizeof(*wb->by_key));
    wb->by_key[i] = e;
    wb->nkeys++;
    size_t j = lower_id(wb, e->id);
    memmove(&wb->by_id[j + 1], &wb->by_id[j], (wb->nids - j) * sizeof(*wb->by_id));
    wb->by_id[j] = e;
    wb->nids++;
    wbi_state_changed(wb, e);
}

void wbi_remove(struct wb *wb, struct wb_entry *e)
{
    size_t i = lower_key(wb, e->backend, e->key, e->id);
    if (i < wb->nkeys && wb->by_key[i] == e) {
        memmove(&wb->by_key[i], &wb->by_key[i + 1], (wb->nkeys - i - 1) * sizeof(*wb->by_key));
        wb->nkeys--;
    }
    size_t j = lower_id(wb, e->id);
    if (j < wb->nids && wb->by_id[j] == e) {
        memmove(&wb->by_id[j], &wb->by_id[j + 1], (wb->nids - j - 1) * sizeof(*wb->by_id));
        wb->nids--;
    }
    if (e->queue != Q_NONE)
        queue_del(wb, e);
    if (e->counted_evictable) {
        wb->n_evictable--;
        e->counted_evictable = false;
    }
}

struct wb_entry *wbi_find_id(const struct wb *wb, int64_t id)
{
    size_t j = lower_id(wb, id);
    return j < wb->nids && wb->by_id[j]->id == id ? wb->by_id[j] : NULL;
}

size_t wbi_first(struct wb *wb, const char *backend, const char *prefix)
{
    wb->stats.index_lookups++;
    return lower_key(wb, backend, prefix, INT64_MIN);
}

struct wb_entry *wbi_key_at(struct wb *wb, size_t i, const char *backend, const char *key)
{
    if (i >= wb->nkeys)
        return NULL;
    struct wb_entry *e = wb->by_key[i];
    if (strcmp(e->backend, backend) != 0 || strcmp(e->key, key) != 0)
        return NULL;
    wb->stats.index_visits++;
    return e;
}

struct wb_entry *wbi_prefix_at(struct wb *wb, size_t i, const char *backend, const char *prefix,
                               size_t plen)
{
    if (i >= wb->nkeys)
        return NULL;
    struct wb_entry *e = wb->by_key[i];
    /* plen SIZE_MAX: prefix is one whole key (strncmp then compares to its end) */
    if (strcmp(e->backend, backend) != 0 || strncmp(e->key, prefix, plen) != 0)
        return NULL;
    wb->stats.index_visits++;
    return e;
}

void wbi_free(struct wb *wb)
{
    free(wb->by_key);
    free(wb->by_id);
    wb->by_key = wb->by_id = NULL;
    wb->nkeys = wb->nids = wb->cap_keys = wb->cap_ids = 0;
    wb->ready = wb->ready_tail = wb->cancels = wb->cancels_tail = NULL;
}
