/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_int.h - private to src/cache: the block struct shared by the index (cache.c) and the
 * block-file store (disk.c). Locking of each field is noted on it; see the top of cache.c.
 */
#ifndef TIER_CACHE_CACHE_INT_H
#define TIER_CACHE_CACHE_INT_H

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <xxhash.h>
/* Debian's libxxhash picks the widest vector unit (AVX2/AVX-512) at run time through these
 * *_dispatch entry points; the header maps XXH3_64bits() etc. onto them. Block checksums are
 * verified on every disk hit, so their speed is the disk-hit path's speed. */
#include <xxh_x86dispatch.h>

#include "cache/cache.h"
#include "cache/policy.h"

#define CACHE_NAME_MAX 255     /* backend name bytes in an identity */
#define CACHE_SECRET_BYTES 192 /* key of the identity hash (XXH3 secret, >= 136 bytes) */

/* A block's bytes, shared by reference: a reader copies out of it with no lock held while an
 * evictor drops the level's reference. Immutable after it is filled. */
struct cdata {
    _Atomic unsigned refs;
    size_t len;
    unsigned char bytes[];
};
struct cdata *cdata_new(size_t len);
void cdata_unref(struct cdata *d); /* NULL is a no-op */

enum {
    B_FETCHING = 1u << 0,     /* a load is in flight (one owner thread) */
    B_ON_DISK = 1u << 1,      /* file complete and in the disk policy */
    B_DISK_IO = 1u << 2,      /* a write or unlink of the file is in flight (one owner) */
    B_PINNED = 1u << 3,       /* never evicted (see I5) */
    B_PIN_EXPLICIT = 1u << 4, /* pinned by cache_fetch_block(pin=true) */
    B_HINTED = 1u << 5,       /* held for an epoch-order hint (cache_fetch_block_hinted): out of
                               * the levels' eviction and its tenant's quota CLOCK (I10) */
    B_STORE_CANCEL = 1u << 6, /* dropped (drop_held) while its load was open or its file was
                               * being written: it is not placed in RAM, its write-through is not
                               * done, or its file goes if the write was under way (cleared when
                               * the load ends; outside a load, when that disk I/O ends) */
};

struct cblock {
    struct cblock *hnext; /* shard chain (shard lock) */
    uint8_t id[16];       /* XXH3-128 of the identity; immutable */
    uint64_t index;       /* immutable */
    uint32_t len;         /* data bytes; immutable */
    /* under the shard lock: */
    unsigned flags;
    unsigned refs;        /* threads holding the block outside the lock */
    unsigned nwaiters;    /* threads waiting for the load's result */
    bool ready;           /* load result published: fetch_err / ready_data */
    bool ready_from_disk; /* ... and it was loaded from the disk level, not the backend */
    int fetch_err;
    struct cdata *ready_data;
    struct cdata *ram;    /* RAM level copy; set <=> ram_node in the RAM policy */
    uint32_t next_off;    /* end of the last read, for the sequential-continuation rule */
    struct cblock *vnext; /* unlink batch link: disk_detach() -> finish_unlinks() */
    struct cblock *enext; /* cache_evict()'s collection link; separate from vnext because a
                           * block may sit in another thread's unlink batch while evicted */
    /* space quota (cache.c, I9): written holding both the shard lock and own_mu, so either
     * lock is enough to read them */
    uint32_t owner;               /* tenant charged (CACHE_OWNER_NONE: nobody yet) */
    bool charged;                 /* in owner's charge list and counted in its bytes */
    bool hcharged;                /* hinted: counted in owner's hinted bytes, in no list */
    uint16_t nhints;              /* hint holds (cache_fetch_block_hinted); B_HINTED <=> > 0;
                                   * shard lock, changed under both level locks too */
    _Atomic bool qhit;            /* hit since its quota second chance (CLOCK bit) */
    struct cblock *qprev, *qnext; /* owner's charge list, oldest charge first */
    /* under the level lock (ram.mu / disk.mu); freq is atomic */
    struct pol_node ram_node, disk_node;
    /* identity strings, immutable, stored after the struct */
    char *be_name, *key, *etag;
    char strs[];
};

#define CACHE_OWNER_NONE UINT32_MAX /* adopted from disk: the first reader claims it */
#define CACHE_OWNER_NOBODY                                                                         \
    (UINT32_MAX - 1) /* cached for a tenant id >= max_tenants: never charged */

struct cblock *cblock_new(const uint8_t id[16], const char *be_name, const char *key,
                          const char *etag, uint64_t index, uint32_t len);
/* The 128-bit identity hash of block `index` of (backend, key, etag) in cache c: XXH3-128 keyed
 * with c's secret, over the strings and c's block size. Only an index key and a file name: every
 * lookup and load also compares the identity itself. */
int cache_block_id(const struct cache *c, const char *be_name, const char *key, const char *etag,
                   uint64_t index, uint8_t id[16]);
/* disk_scan() hands each valid block found at open to the index (single-threaded). */
int cache_adopt_disk_block(struct cache *c, struct cblock *b, uint64_t file_bytes);

/* ---- disk.c: block files ---------------------------------------------------------------- */

/* Create dir and its 256 fan-out subdirectories, take an exclusive flock on dir/.lock (a second
 * cache on the same directory gets -EBUSY). */
int disk_dir_prepare(const char *dir, int *lock_fd);
/* Rebuild the index from dir: delete temp files and torn or foreign files, adopt the rest. */
int disk_scan(struct cache *c, const char *dir);
/* dir/ab/abcdef...<suffix> */
int disk_block_path(const char *dir, const uint8_t id[16], const char *suffix, char *path,
                    size_t pathsz);
uint64_t disk_block_file_size(const struct cblock *b);
/* Load dir/.secret (CACHE_SECRET_BYTES, 0600, ours) into secret; create it with random bytes
 * when missing, replace it when damaged or readable by others. Returns 0 or -errno (message set).
 */
int disk_secret_load(const char *dir, unsigned char *secret, size_t len);
/* Write b's file (temp name, then rename). Returns 0 or -errno. */
int disk_block_write(const char *dir, size_t block_size, const struct cblock *b, const void *data,
                     size_t len);
/* Open block files kept for the hits (disk hits at pread speed): a direct-mapped table of
 * slots, each an open descriptor of one block file with its checked header, shared by readers
 * (pread) and closed when its slot is taken by another block or the file is forgotten (its
 * unlink or rewrite). Thread-safe. fc NULL everywhere: open, check and close per read. */
struct disk_fdcache;
int disk_fdcache_new(unsigned slots, struct disk_fdcache **out);
void disk_fdcache_free(struct disk_fdcache *fc); /* NULL: no-op */
/* After unlinking or replacing id's file: later reads open it anew. */
void disk_fdcache_forget(struct disk_fdcache *fc, const uint8_t id[16]);
struct disk_fdcache_stats {
    uint64_t hits, opens, forgets;
};
void disk_fdcache_stats_get(struct disk_fdcache *fc, struct disk_fdcache_stats *st);

/* Read and verify b's file. -EBADMSG: corrupt (checksum, header, length, another version, or a
 * header naming another identity or block size): the caller drops it; -ENOENT: gone; any other
 * -errno is transient (EMFILE, ENOMEM, EIO ...) and says nothing about the file. */
int disk_block_load(const char *dir, struct disk_fdcache *fc, size_t block_size,
                    const struct cblock *b, struct cdata **out);
/* Read [off, off+len) of b's data straight into dst, verifying only the chunks it touches.
 * Errors as disk_block_load(). */
int disk_block_read_range(const char *dir, struct disk_fdcache *fc, size_t block_size,
                          const struct cblock *b, uint32_t off, uint32_t len, void *dst);
void disk_block_unlink(const char *dir, const uint8_t id[16]);
bool disk_block_exists(const char *dir, const uint8_t id[16]);
/* Number of block files (not temp files) under dir, or -errno. */
long disk_count_files(const char *dir);

#endif
