/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hintwin.h - the prefetch window over a known future read order (epoch-order hints): which
 * items to hold in the hot tier now, given the order in which a reader will read them.
 *
 * Callers: the daemon's hint engine (src/hints/hints.c), which maps each hinted file to an item
 * id and feeds the reader's progress; tests/perf/cachesim.c, which replays traces through exactly
 * this code (the `hinted` column).
 *
 * The window is the longest run of the known future, from the reader's cursor on, whose distinct
 * items fit max_items and max_bytes (each item counted once however often it occurs in the run).
 * Items enter the window in the order of their first use (hintwin_fill: prefetch them) and leave
 * it when the cursor passes their last use inside it (hintwin_seek). Items in the window are never
 * victims; of the items the caller still holds outside it, hintwin_victim() names the one whose
 * next use is farthest, one never used again within the known future first: Belady's MIN over
 * the known future. So the prefetcher never evicts a block it needs sooner than the one it
 * fetches, and a block consumed and not needed again is the first to go. The window is the
 * prefetch depth (small: enough to hide the backend's latency); the rest of the caller's space
 * keeps what left it, by next use (tests/perf/cachesim.c: with a window of 256 items this matches
 * Belady's miss ratio on the epoch trace).
 *
 * Entries are appended as the future becomes known (the next epoch's order before this one ends);
 * an item's size is fixed at its first append. Positions are entry indexes from 0, never reused.
 *
 * Not thread-safe: the caller serialises all calls on one window. No allocation but in append.
 */
#ifndef TIER_HINTS_HINTWIN_H
#define TIER_HINTS_HINTWIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hintwin;

/* max_items, max_bytes: the window's bounds (0: no bound on that one). The window always holds
 * the item at the cursor, however large. */
int hintwin_new(uint64_t max_items, uint64_t max_bytes, struct hintwin **out);
void hintwin_free(struct hintwin *w); /* NULL is a no-op */

/* Append one entry (item, read next after the ones before); size: the item's bytes, taken at
 * its first append. 0, -ENOMEM, -EINVAL (item >= HINTWIN_ITEMS_MAX). */
#define HINTWIN_ITEMS_MAX (1u << 30)
int hintwin_append(struct hintwin *w, uint32_t item, uint64_t size);

/* Extend the window as far as its bounds allow; enter(ud, item, pos) for each item that enters
 * (pos: the entry of its first use), in that order. Returns how many entered. */
size_t hintwin_fill(struct hintwin *w, void (*enter)(void *ud, uint32_t item, uint64_t pos),
                    void *ud);

/* The reader has consumed every entry before pos (pos <= hintwin_len; an earlier pos is a
 * no-op): leave(ud, item, last) for each item with no use left in [pos, end), last being the
 * entry of its last use in the window (its next use, if known, is the item's first entry after
 * end). Then fill again. */
void hintwin_seek(struct hintwin *w, uint64_t pos,
                  void (*leave)(void *ud, uint32_t item, uint64_t pos), void *ud);

/* Change the bounds (a quota changed). A smaller window drops its farthest items: leave() for
 * each, farthest first, with last = the entry dropped (the item's next use). */
void hintwin_set_bounds(struct hintwin *w, uint64_t max_items, uint64_t max_bytes,
                        void (*leave)(void *ud, uint32_t item, uint64_t pos), void *ud);

/* What the caller holds in the hot tier, for the victim choice: held(item, true) once an item is
 * cached (fetched for the window, or found cached), held(item, false) once it is not. */
void hintwin_held(struct hintwin *w, uint32_t item, bool held);
/* The held item outside the window whose next use is farthest (never used again within the known
 * future first): Belady's victim. false when every held item is in the window. The item stays
 * held until the caller says otherwise. */
bool hintwin_victim(struct hintwin *w, uint32_t *item);
uint64_t hintwin_held_bytes(const struct hintwin *w);
bool hintwin_is_held(const struct hintwin *w, uint32_t item);

bool hintwin_contains(const struct hintwin *w, uint32_t item);   /* in the window now */
uint64_t hintwin_len(const struct hintwin *w);                   /* entries appended */
uint64_t hintwin_cursor(const struct hintwin *w);                /* first entry not consumed */
uint64_t hintwin_end(const struct hintwin *w);                   /* first entry past the window */
uint64_t hintwin_items(const struct hintwin *w);                 /* distinct items in it */
uint64_t hintwin_bytes(const struct hintwin *w);                 /* their bytes */
uint32_t hintwin_item_at(const struct hintwin *w, uint64_t pos); /* pos < hintwin_len */
/* The next entry of the same item after pos (pos < hintwin_len), HINTWIN_NONE: none known. */
#define HINTWIN_NONE UINT64_MAX
uint64_t hintwin_next_of(const struct hintwin *w, uint64_t pos);
/* The item's size became known (it was appended with a guess): the window's and the held bytes
 * follow. A window now over its byte bound stops growing until it drains below it. */
void hintwin_set_size(struct hintwin *w, uint32_t item, uint64_t size);

#endif
