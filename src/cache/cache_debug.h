/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_debug.h - introspection for tests and benchmarks; not for the daemon's data path.
 */
#ifndef TIER_CACHE_CACHE_DEBUG_H
#define TIER_CACHE_CACHE_DEBUG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"

/* Check every invariant listed at the top of cache.c with the level locks held (so it stops the
 * cache while it lists the disk directory; call it on a quiet cache): level bytes == sum of their
 * blocks and <= budget, pinned bytes == sum of pinned cached blocks and <= pin budget, and the set
 * of block files on disk == the set of blocks the index says are on disk (blocks with disk I/O in
 * flight are excluded). Returns 0, or -EUCLEAN with a description of the first violation in msg. */
int cache_debug_check(struct cache *c, char *msg, size_t msgsz);

/* Path of the disk file of a block identity (for tests that corrupt it). path: >= 4096 bytes.
 * Returns 0, or -EINVAL when the cache has no disk level. */
int cache_debug_block_path(struct cache *c, const char *backend_name, const char *key,
                           const char *etag, uint64_t index, char *path, size_t pathsz);

/* Make every identity hash depend on the block index only, so that block N of every object
 * collides with block N of every other (for tests of collision handling). Call right after
 * cache_open(), before any read, on a cache without a disk level or with an empty one. */
void cache_debug_force_collisions(struct cache *c, bool on);

/* Call fn(arg) in every read and fetch right after it asked the pin rules whether its object is
 * pinned and before it looks up or creates the block (for tests of a rule that changes in
 * between). fn may call cache_pin/cache_unpin. Set before any read; NULL removes it. */
void cache_debug_set_pin_hook(struct cache *c, void (*fn)(void *), void *arg);

/* Hold (true) or release (false) the miss-ratio curves' queue: while held nothing drains it (not
 * the curves' thread, not cache_mrc_curve), so sampled accesses pile up in its
 * CACHE_MRC_QUEUE cells and, once it is full, every access is left out of the curves until a
 * drain after the release (tests of a full queue). */
void cache_debug_mrc_hold(struct cache *c, bool hold);

#endif
