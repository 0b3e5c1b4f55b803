/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vec.h - growing an array by doubling (the one helper for the "grow-and-zero" code tierd had at
 * about 29 sites).
 *
 * An array here is a plain pointer plus a capacity the owner keeps (the element count, if any, is
 * the owner's too): tier_vec_grow() only makes room. It never shrinks, and it zeroes the
 * elements it adds, so a slot past the old capacity reads as "unset".
 *
 *     struct item *t = tier_vec_grow(s->items, &s->cap, s->n + 1, sizeof(*t), 16);
 *     if (!t)
 *         return -ENOMEM;      // s->items and s->cap unchanged
 *     s->items = t;
 *     s->items[s->n++] = x;
 *
 * Not thread-safe: the owner holds whatever lock guards the array.
 */
#ifndef TIER_COMMON_VEC_H
#define TIER_COMMON_VEC_H

#include <stddef.h>

/* Make room for at least need elements of elsz bytes in arr (capacity *cap elements; arr may be
 * NULL with *cap 0). When need <= *cap, returns arr as it is. Otherwise the capacity is doubled,
 * starting from min (at least 1), until it holds need; the array is reallocated and the new
 * elements [old *cap, new *cap) are zeroed. Returns the (possibly moved) array and sets *cap; on
 * overflow or out of memory returns NULL and leaves arr and *cap untouched (arr is still valid
 * and still owned by the caller). */
void *tier_vec_grow(void *arr, size_t *cap, size_t need, size_t elsz, size_t min);

/* The same with room for exactly need elements when it must grow (no doubling): for arrays sized
 * once, or grown to a known count. */
void *tier_vec_resize(void *arr, size_t *cap, size_t need, size_t elsz);

#endif
