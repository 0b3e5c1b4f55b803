/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pinmeta.h - what the mount needs to show a pinned object while its backend cannot be asked:
 * its size, version and mtime, noted when a pinning stage job fetched it. The blocks themselves
 * are in the block cache (pinned: never evicted), so lookup, getattr, readdir and reads of a
 * pinned model keep working through a backend outage, also for files never opened through the
 * mount before it. Kept in memory only: after a restart during an outage, pinned files show
 * again once the backend answers (their blocks are still on disk).
 *
 * Thread-safe (one mutex); every call is O(log n) plus the entries it returns.
 */
#ifndef TIER_STAGE_PINMETA_H
#define TIER_STAGE_PINMETA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pinmeta;

struct pinmeta_obj {
    uint64_t size_bytes;
    int64_t mtime_ns;
    char etag[96];
};

int pinmeta_new(struct pinmeta **out);
void pinmeta_free(struct pinmeta *pm);
/* Remember backend:key (a newer note replaces an older one). */
int pinmeta_note(struct pinmeta *pm, const char *backend, const char *key,
                 const struct pinmeta_obj *o);
/* Forget what an unpin of the pin rule prefix releases (cache_pin's matching: "" every key of
 * backend, a prefix ending in '/' every key under it, else that exact key); returns how many. */
size_t pinmeta_forget(struct pinmeta *pm, const char *backend, const char *prefix);
/* 0 and *o for a pinned object, 1 for a directory above one (a key under "key/"), -ENOENT. */
int pinmeta_stat(struct pinmeta *pm, const char *backend, const char *key, struct pinmeta_obj *o);
/* fn for each direct child of directory prefix ("" or ending in '/'): a pinned object (is_dir
 * false, with o) or a directory above one (is_dir true, once per name). */
void pinmeta_children(struct pinmeta *pm, const char *backend, const char *prefix,
                      void (*fn)(const char *name, size_t len, bool is_dir,
                                 const struct pinmeta_obj *o, void *arg),
                      void *arg);

#endif
