/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hintwin.c - the prefetch window over a known future read order (hintwin.h).
 *
 * STATE: seq[0 .. len) the known future, nxt[p] the next entry of seq[p]'s item (NONE: not known);
 * the window is seq[cursor .. end); occ[item] counts the entries of item inside the window, so an
 * item is in the window iff occ[item] > 0. Held items outside the window are in a max-heap by the
 * next use they had when they left (lnext[item]; entries that no longer match are stale and
 * skipped when popped).
 *
 * INVARIANTS
 *   W1  cursor <= end <= len.
 *   W2  occ[x] == the number of positions p in [cursor, end) with seq[p] == x, for every x.
 *   W3  items == |{x : occ[x] > 0}|, bytes == sum of size[x] over them.
 *   W4  items <= max_items and bytes <= max_bytes, except for one item that entered an empty
 *       window alone (the reader's next item always enters, however large: after a fill,
 *       end > cursor whenever cursor < len).
 *   W5  every held item outside the window has a heap entry (lnext[item], item); held_bytes ==
 *       the sum of size over held items.
 *
 * Every operation is O(entries it moves over): fill moves end forward, seek moves cursor forward,
 * set_bounds moves end back; each entry is passed at most twice per bound change.
 */
#include "hints/hintwin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

#define NONE UINT64_MAX

struct hent {
    uint64_t next;
    uint32_t item;
};

struct hintwin {
    uint64_t max_items, max_bytes; /* 0: none */
    uint32_t *seq;
    uint64_t *nxt;
    uint64_t len, cap;
    uint64_t cursor, end;
    uint32_t *occ;   /* per item id */
    uint64_t *size;  /* per item id; UINT64_MAX: never appended */
    uint64_t *last;  /* per item id: its last entry, NONE: none */
    uint64_t *lnext; /* per item id: next use when it left the window */
    bool *held;      /* per item id */
    uint32_t nids;   /* ids with per-item slots */
    uint64_t items, bytes, held_bytes;
    struct hent *heap;
    size_t hn, hcap;
};

int hintwin_new(uint64_t max_items, uint64_t max_bytes, struct hintwin **out)
{
    struct hintwin *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->max_items = max_items;
    w->max_bytes = max_bytes;
    *out = w;
    return 0;
}

void hintwin_free(struct hintwin *w)
{
    if (!w)
        return;
    free(w->seq);
    free(w->nxt);
    free(w->occ);
    free(w->size);
    free(w->last);
    free(w->lnext);
    free(w->held);
    free(w->heap);
    free(w);
}

static void left(struct hintwin *w, uint32_t x, uint64_t next);

static int grow_ids(struct hintwin *w, uint32_t item)
{
    if (item < w->nids)
        return 0;
    uint64_t n = w->nids ? w->nids : 1024;
    while (n <= item)
        n *= 2;
    if (n > HINTWIN_ITEMS_MAX)
        n = HINTWIN_ITEMS_MAX;
    uint32_t *occ = realloc(w->occ, n * sizeof(*occ));
    if (occ)
        w->occ = occ;
    uint64_t *size = realloc(w->size, n * sizeof(*size));
    if (size)
        w->size = size;
    uint64_t *last = realloc(w->last, n * sizeof(*last));
    if (last)
        w->last = last;
    uint64_t *lnext = realloc(w->lnext, n * sizeof(*lnext));
    if (lnext)
        w->lnext = lnext;
    bool *held = realloc(w->held, n * sizeof(*held));
    if (held)
        w->held = held;
    if (!occ || !size || !last || !lnext || !held)
        return -ENOMEM; /* the grown ones are kept; nids says how many slots are valid */
    memset(occ + w->nids, 0, (n - w->nids) * sizeof(*occ));
    memset(held + w->nids, 0, (n - w->nids) * sizeof(*held));
    for (uint64_t i = w->nids; i < n; i++)
        size[i] = last[i] = lnext[i] = NONE;
    w->nids = (uint32_t)n;
    return 0;
}

int hintwin_append(struct hintwin *w, uint32_t item, uint64_t size)
{
    if (item >= HINTWIN_ITEMS_MAX)
        return -EINVAL;
    int r = grow_ids(w, item);
    if (r < 0)
        return r;
    if (w->len == w->cap) {
        uint64_t ncap = w->cap ? w->cap * 2 : 4096;
        uint32_t *ns = realloc(w->seq, ncap * sizeof(*ns));
        if (ns)
            w->seq = ns;
        uint64_t *nn = realloc(w->nxt, ncap * sizeof(*nn));
        if (nn)
            w->nxt = nn;
        if (!ns || !nn)
            return -ENOMEM;
        w->cap = ncap;
    }
    if (w->size[item] == NONE)
        w->size[item] = size == NONE ? NONE - 1 : size;
    uint64_t p = w->len++;
    w->seq[p] = item;
    w->nxt[p] = NONE;
    if (w->last[item] != NONE)
        w->nxt[w->last[item]] = p;
    w->last[item] = p;
    if (w->occ[item] == 0 && w->lnext[item] == NONE) /* outside the window, next use unknown */
        left(w, item, p);
    return 0;
}

/* Would one more distinct item of sz bytes break a bound? The cursor's entry always fits. */
static bool over(const struct hintwin *w, uint64_t sz)
{
    if (w->end == w->cursor)
        return false;
    if (w->max_items && w->items + 1 > w->max_items)
        return true;
    return w->max_bytes && (sz > w->max_bytes || w->bytes > w->max_bytes - sz);
}

size_t hintwin_fill(struct hintwin *w, void (*enter)(void *ud, uint32_t item, uint64_t pos),
                    void *ud)
{
    size_t n = 0;
    while (w->end < w->len) {
        uint32_t x = w->seq[w->end];
        if (w->occ[x] == 0) {
            if (over(w, w->size[x]))
                break;
            w->items++;
            w->bytes += w->size[x];
            if (enter)
                enter(ud, x, w->end);
            n++;
        }
        w->occ[x]++;
        w->end++;
    }
    return n;
}

static void heap_push(struct hintwin *w, struct hent e)
{
    struct hent *nh = tier_vec_grow(w->heap, &w->hcap, w->hn + 1, sizeof(*nh), 1024);
    if (!nh)
        return; /* the item is then never a victim: the caller's own eviction takes it */
    w->heap = nh;
    size_t i = w->hn++;
    w->heap[i] = e;
    while (i && w->heap[(i - 1) / 2].next < w->heap[i].next) {
        struct hent t = w->heap[i];
        w->heap[i] = w->heap[(i - 1) / 2];
        w->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static struct hent heap_pop(struct hintwin *w)
{
    struct hent top = w->heap[0];
    w->heap[0] = w->heap[--w->hn];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < w->hn && w->heap[l].next > w->heap[m].next)
            m = l;
        if (r < w->hn && w->heap[r].next > w->heap[m].next)
            m = r;
        if (m == i)
            break;
        struct hent t = w->heap[i];
        w->heap[i] = w->heap[m];
        w->heap[m] = t;
        i = m;
    }
    return top;
}

/* Item x has just left the window; its next use is `next` (NONE: none known). */
static void left(struct hintwin *w, uint32_t x, uint64_t next)
{
    w->lnext[x] = next;
    if (w->held[x])
        heap_push(w, (struct hent){next, x});
}

/* Take entry p out of the window (from the cursor's side: seek; from the far side: set_bounds);
 * leave() when it was its item's last entry in it. */
static void drop(struct hintwin *w, uint64_t p, bool far_side,
                 void (*leave)(void *ud, uint32_t item, uint64_t pos), void *ud)
{
    uint32_t x = w->seq[p];
    if (--w->occ[x] == 0) {
        w->items--;
        w->bytes -= w->size[x];
        left(w, x, far_side ? p : w->nxt[p]);
        if (leave)
            leave(ud, x, p);
    }
}

void hintwin_held(struct hintwin *w, uint32_t item, bool held)
{
    if (item >= w->nids || w->held[item] == held)
        return;
    w->held[item] = held;
    uint64_t sz = w->size[item] == NONE ? 0 : w->size[item];
    w->held_bytes = held ? w->held_bytes + sz : w->held_bytes - sz;
    if (held && w->occ[item] == 0)
        heap_push(w, (struct hent){w->lnext[item], item});
}

bool hintwin_victim(struct hintwin *w, uint32_t *item)
{
    while (w->hn) {
        struct hent e = w->heap[0];
        if (w->held[e.item] && w->occ[e.item] == 0 && w->lnext[e.item] == e.next) {
            *item = e.item;
            return true;
        }
        heap_pop(w); /* stale: re-entered, no longer held, or left again since */
    }
    return false;
}

bool hintwin_is_held(const struct hintwin *w, uint32_t item)
{
    return item < w->nids && w->held[item];
}

uint64_t hintwin_held_bytes(const struct hintwin *w)
{
    return w->held_bytes;
}

void hintwin_seek(struct hintwin *w, uint64_t pos,
                  void (*leave)(void *ud, uint32_t item, uint64_t pos), void *ud)
{
    if (pos > w->len)
        pos = w->len;
    while (w->cursor < pos) {
        if (w->cursor < w->end) {
            drop(w, w->cursor, false, leave, ud);
        } else {
            w->end++; /* the window was empty here: move both */
        }
        w->cursor++;
    }
}

void hintwin_set_bounds(struct hintwin *w, uint64_t max_items, uint64_t max_bytes,
                        void (*leave)(void *ud, uint32_t item, uint64_t pos), void *ud)
{
    w->max_items = max_items;
    w->max_bytes = max_bytes;
    while (w->end > w->cursor + 1 &&
           ((max_items && w->items > max_items) || (max_bytes && w->bytes > max_bytes))) {
        w->end--;
        drop(w, w->end, true, leave, ud);
    }
}

bool hintwin_contains(const struct hintwin *w, uint32_t item)
{
    return item < w->nids && w->occ[item] > 0;
}

uint64_t hintwin_len(const struct hintwin *w)
{
    return w->len;
}

uint64_t hintwin_cursor(const struct hintwin *w)
{
    return w->cursor;
}

uint64_t hintwin_end(const struct hintwin *w)
{
    return w->end;
}

uint64_t hintwin_items(const struct hintwin *w)
{
    return w->items;
}

uint64_t hintwin_bytes(const struct hintwin *w)
{
    return w->bytes;
}

uint32_t hintwin_item_at(const struct hintwin *w, uint64_t pos)
{
    return w->seq[pos];
}

uint64_t hintwin_next_of(const struct hintwin *w, uint64_t pos)
{
    return w->nxt[pos];
}

void hintwin_set_size(struct hintwin *w, uint32_t item, uint64_t size)
{
    if (item >= w->nids || w->size[item] == NONE)
        return;
    uint64_t old = w->size[item];
    if (size == NONE)
        size = NONE - 1;
    w->size[item] = size;
    if (w->occ[item]) {
        w->bytes -= old;
        w->bytes += size;
    }
    if (w->held[item]) {
        w->held_bytes -= old;
        w->held_bytes += size;
    }
}
