/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.h - the hot tier: a block cache over any backend, with a RAM level and a local-disk
 * (NVMe) level, scan-resistant eviction, pinning, single-flight fetches and checksummed blocks
 * that survive a restart.
 *
 * Callers: the FUSE read path, the stager (tierctl stage), the control API (pin/evict/stats).
 * The cache knows nothing of FUSE; it knows backends only through tiers/backend.h.
 *
 * Objects are cached in fixed-size blocks (cfg.block_size; the last block of an object is
 * shorter). A block's identity is (backend name, key, version tag, block index): a changed
 * object has a new version tag, so its old blocks are never served for it and age out.
 *
 * Every backend fetch is a backend_read() carrying the caller's struct tier_ioctx (for a
 * prefetch, the ioctx given to cache_prefetch), so the backend's scheduler wrapper, the single
 * scheduling point (qos/sched.h), admits it as that tenant and class. The fetch hook
 * (cache_set_fetch_hook) only observes fetches.
 *
 * Thread-safety: every function may be called from any number of threads at once. No lock is
 * held across disk or network I/O.
 *
 * Errors: 0 / byte count, or a negative errno: -ENOENT (object gone), -ESTALE (the object's
 * version changed under the read: re-stat and retry), -EIO (backend failed), -ENOSPC (pin over
 * budget), -ENOMEM, -EINVAL.
 */
#ifndef TIER_CACHE_CACHE_H
#define TIER_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diskadm.h"
#include "common/ioctx.h"
#include "tiers/backend.h"

enum cache_policy_kind {
    CACHE_POLICY_S3FIFO = 0, /* default: small FIFO + main FIFO + ghost history */
    CACHE_POLICY_LRU = 1,
};

/* A RAM-less disk hit may serve a 64 KiB chunk its open block file verified less than this long
 * ago without hashing it again (docs/CACHE.md "Verification of disk reads"). */
#define CACHE_DISK_VERIFY_TTL_NS 1000000000ull

struct cache_config {
    size_t block_size;            /* bytes; default 4 MiB; 64 KiB..64 MiB */
    uint64_t ram_bytes;           /* RAM level budget; 0 = no RAM level */
    const char *disk_dir;         /* disk level directory (created); NULL = no disk level */
    uint64_t disk_bytes;          /* disk level budget */
    uint64_t disk_min_free_bytes; /* keep at least this much free on disk_dir's file system */
    uint64_t pin_bytes;           /* budget for pinned blocks (counted inside the levels) */
    enum cache_policy_kind policy;
    int prefetch_threads; /* background fetchers for cache_prefetch(); default 4 (tierd's
                           * config: 8), max 32: the ranged GETs a sequential read-ahead keeps
                           * in flight against a slow backend */
    int max_fetches;      /* backend block fetches of one backend holding a block buffer at
                           * once (the rest wait, holding none); 0: 64; 1..4096 */
    /* Admission of the disk level's I/O (common/diskadm.h; copied at open; NULL: none): every
     * disk-level read with the reader's ioctx, blocking (a RAM-less hit with its bytes, a load
     * into RAM with the block's); every write-through of a fetched block with try and class
     * background of the reader's tenant, skipped when refused (disk_store_skipped). RAM hits
     * never pass it. */
    const struct tier_disk_adm *disk_adm;
    /* Space (cache_quota_set): blocks are charged to the tenant whose read, prefetch or staging
     * brought them in, ids 0 .. max_tenants - 1 (0: 64; others are charged to nobody); a tenant
     * over its quota evicts its own blocks, never another's. default_quota: the quota of every
     * tenant without its own (0: none). */
    unsigned max_tenants;
    uint64_t default_quota;
    /* Hinted blocks (cache_fetch_block_hinted) held at once, all hint sets together; 0, or more
     * than three quarters of the smaller level: three quarters of the smaller level. */
    uint64_t hinted_max;
    /* Write-through off the reader's path: a block a read or a prefetch fetched is handed to
     * a writer thread for its disk copy (up to store_queue_bytes waiting; beyond, the fetching
     * thread writes it), so neither the read's reply nor the prefetcher's next fetch waits for the
     * disk. cache_fetch_block (staging) and hinted fetches still write before they return. false:
     * every write-through on the fetching thread (the library's default; tierd sets it). */
    bool store_async;
    /* The writer's queue, in bytes of waiting blocks (one block at least); 0: 256 MiB. The
     * queued blocks are the RAM level's own buffers while they stay there. */
    uint64_t store_queue_bytes;
    /* The writer thread's nice value (0..19; 0: as the daemon). A nice writer leaves the CPU
     * to the read path while both want it (a cold read on few cores) and catches up when it is
     * idle; a full queue sends the write back to the fetching thread, so the writer cannot fall
     * behind by more than store_queue_bytes. */
    int store_nice;
    /* Hash every chunk of every disk-level read. false (default): a RAM-less hit may serve
     * chunks its open block file verified less than 1 s earlier with a plain pread, under the
     * conditions of docs/CACHE.md "Verification of disk reads" (a write to the file is never
     * served; other changes at most 1 s after the last verification). */
    bool disk_verify_every_read;
    /* Miss-ratio curves (docs/ADVICE.md): every read's new access to a block also feeds the
     * node's curve and its tenant's (cache_mrc_curve). mrc_rate: base sampling rate (0: 0.01);
     * mrc_max_keys: sampled blocks tracked per curve before the rate is cut (0: 4096); memory
     * per curve about (mrc_max_keys + CACHE_MRC_SIZES * 256) * 500 bytes;
     * mrc_halflife_ms: every curve's counters halve this often, so a curve weighs the recent
     * stream most (0: never). false: none. */
    bool mrc;
    double mrc_rate;
    int mrc_max_keys;
    uint64_t mrc_halflife_ms;
};

/* The sizes a curve is kept at: CACHE_MRC_SIZES points, log-spaced from an eighth of the smaller
 * level (RAM, or disk when there is no RAM level) to four times the larger one. */
#define CACHE_MRC_SIZES 12

/* The object being read: borrowed for the call. */
struct cache_obj {
    struct backend *be; /* be->name is part of the block identity */
    const char *key;
    const char *etag;    /* version tag from backend_stat(); reads demand it (if_match) */
    uint64_t size_bytes; /* object size from the same stat */
    /* NULL, or the version id to fetch (a dataset version of a versioned bucket: an older
     * version than the current one, read with backend_read_version; etag still checked) */
    const char *version_id;
};

struct cache;

int cache_open(const struct cache_config *cfg, struct cache **out);
/* Stop background work and free everything; the disk level stays for the next open. */
void cache_close(struct cache *c);

/* Read [off, off+len) of obj into buf through the cache. Returns bytes read (short only at the
 * object's end) or -errno. */
ssize_t cache_read(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                   uint64_t off, void *buf, size_t len);

/* The slowest tier any block of a read came from (telemetry's "tier that served it"). */
enum cache_served {
    CACHE_SERVED_RAM = 0,     /* every block a RAM hit */
    CACHE_SERVED_DISK = 1,    /* at least one block read from the disk level, none fetched */
    CACHE_SERVED_BACKEND = 2, /* at least one block fetched (or awaited) from the backend */
};
/* cache_read, also saying in *served (if not NULL) which tier served it. */
ssize_t cache_read_served(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                          uint64_t off, void *buf, size_t len, enum cache_served *served);

/* Make sure block `index` of obj is cached (fetch if missing), without copying it out. Used by
 * the stager and prefetcher; blocking. pin: also pin the block. */
int cache_fetch_block(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                      uint64_t index, bool pin);

/* Queue blocks [first, first+count) of obj for background fetch (sequential-read prefetch).
 * Returns at once; blocks already cached or in flight are skipped; the queue is bounded and
 * excess requests are dropped (prefetch is advisory). Returns how many blocks from first were
 * queued or skipped before the rest had to be dropped (count, or the blocks up to the object's
 * end, when none was): the caller may ask for the others again later. */
uint64_t cache_prefetch(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                        uint64_t first, uint64_t count);
/* cache_prefetch for owner (any pointer, only compared: a reader's file handle), so that
 * cache_prefetch_cancel(c, owner) can take back what is still queued when the reader goes away
 * (its fetches in flight finish). */
uint64_t cache_prefetch_owned(struct cache *c, const struct tier_ioctx *io,
                              const struct cache_obj *obj, uint64_t first, uint64_t count,
                              const void *owner);
void cache_prefetch_cancel(struct cache *c, const void *owner);

/* Read-ahead sized from the bandwidth-delay product: the blocks a sequential reader needs
 * queued ahead of it so that it never waits for the backend, by Little's law the bytes it
 * consumes during one block fetch, times two (the window is refilled only as the reader
 * reaches its mark): ceil(2 x rate_bps x fetch_ns / 1e9 / block_bytes) blocks, within
 * [min_blocks, max_blocks] (max_blocks below min_blocks: min_blocks). min_blocks when rate_bps
 * or fetch_ns is 0. Pure. */
uint64_t cache_bdp_blocks(uint64_t rate_bps, uint64_t fetch_ns, uint64_t block_bytes,
                          uint64_t min_blocks, uint64_t max_blocks);
/* cache_bdp_blocks with fetch_ns the measured block fetch time of backend be (an EWMA over its
 * full-block fetches) and this cache's block size; recorded for cache_stats. 0 while be has no
 * full-block fetch measured (the caller keeps its own rule). */
uint64_t cache_readahead_window(struct cache *c, const struct backend *be, uint64_t rate_bps,
                                uint64_t min_blocks, uint64_t max_blocks);

/* Pin rules by backend name and key prefix ("" = the whole backend; a prefix ending in '/' =
 * a directory; anything else is one object's exact key). Blocks matching a rule are never evicted,
 * now or when fetched later. Pinning more than pin_bytes of cached blocks fails with -ENOSPC and
 * changes nothing. */
int cache_pin(struct cache *c, const char *backend_name, const char *prefix);
/* At most this many pin rules exist at once; cache_pin() of one more fails with -EDQUOT. */
#define CACHE_PIN_RULES_MAX 1024
int cache_unpin(struct cache *c, const char *backend_name, const char *prefix);
/* Is (backend_name, prefix) a pin rule now (exactly that rule)? */
bool cache_pin_exists(struct cache *c, const char *backend_name, const char *prefix);

/* Drop every unpinned cached block of keys under prefix (same matching as cache_pin); returns
 * the number dropped or -errno. */
long cache_evict(struct cache *c, const char *backend_name, const char *prefix);

/* One level of the hot tier, for cache_demote. */
enum cache_level { CACHE_LEVEL_RAM = 0, CACHE_LEVEL_DISK };
/* Move the unpinned cached blocks of keys under prefix (as cache_evict) down out of one level:
 *   CACHE_LEVEL_RAM:  each RAM copy moves to the disk level (written there first where the block
 *                     has no disk copy) and leaves RAM; a block the disk level does not take now
 *                     (no disk level, no room, the disk admission busy) stays in RAM;
 *   CACHE_LEVEL_DISK: each disk copy is deleted; RAM copies stay (blocks held for a hint keep
 *                     theirs: RAM may not drop them while they have none).
 * The disk writes are background I/O of the default tenant (the policies' own work). Returns
 * the number of blocks moved or dropped, -EINVAL, or -ENOMEM (the shards done so far stay
 * done). */
long cache_demote(struct cache *c, const char *backend_name, const char *prefix,
                  enum cache_level from);
/* How many bytes of obj have a copy in level l (a block in both levels counts in each). */
uint64_t cache_level_bytes(struct cache *c, const struct cache_obj *obj, enum cache_level l);

/*
 * Space quotas: the bytes of hot-tier blocks (RAM and disk levels together, each block counted
 * once, by its data length) a tenant may hold. A block is charged to the tenant whose request
 * cached it (io->tenant of the read, prefetch or fetch_block); a block found on disk at open is
 * charged to the first tenant that reads it. Pinned blocks are charged to nobody: they have
 * their own budget (pin_bytes). When a tenant's charged bytes pass its quota, its own blocks are
 * evicted, the least recently charged first with a second chance for blocks hit since (CLOCK),
 * until they fit; other tenants' blocks are not touched. So a scanning tenant stays inside its
 * quota, and a tenant's working set survives any other tenant's scan as long as every tenant
 * that reads has a quota and the quotas plus pin_bytes fit in the levels (the global policy
 * still evicts by S3-FIFO/LRU beyond that). Blocks cached for a tenant id >= max_tenants are
 * charged to nobody, ever.
 */
#define CACHE_QUOTA_DEFAULT 0       /* cache_quota_set: take cfg.default_quota */
#define CACHE_QUOTA_NONE UINT64_MAX /* cache_quota_set: no quota */
/* Set tenant's quota in bytes (or one of the two above); lowering it evicts down to it before
 * returning. 0, -EINVAL (tenant >= max_tenants). */
int cache_quota_set(struct cache *c, uint32_t tenant, uint64_t bytes);

struct cache_tenant_stats {
    uint64_t quota;           /* in force; 0: none */
    uint64_t bytes, blocks;   /* charged to the tenant now (bytes: hinted ones included) */
    uint64_t hinted_bytes;    /* of bytes, held for its hints: never the quota's victims */
    uint64_t quota_evictions; /* its blocks evicted by its quota (count, bytes) */
    uint64_t quota_evicted_bytes;
};
/* 0, -EINVAL (tenant >= max_tenants). */
int cache_tenant_stats_get(struct cache *c, uint32_t tenant, struct cache_tenant_stats *out);
unsigned cache_max_tenants(const struct cache *c);
/* Tenant's quota-eviction counters (quota_evictions, quota_evicted_bytes) added to into's and
 * reset, and its miss-ratio curve forgotten: reclaim retires the id (tenant.h), its next tenant
 * counts from zero. 0, -EINVAL (an id
 * >= max_tenants, or the same id). */
int cache_tenant_fold(struct cache *c, uint32_t tenant, uint32_t into);
/* The bytes hinted blocks may hold at once (cfg.hinted_max after defaults). */
uint64_t cache_hint_share(const struct cache *c);

/*
 * Hinted blocks (epoch-order hints, src/hints/hints.c): block `index` of obj fetched (if need
 * be) as cache_fetch_block() does and then held for a hint: the levels do not evict it and the
 * quota CLOCK does not take it until every hold is released (one hold per call; one
 * cache_hint_release() per hold). A held block is charged to io's tenant (the hinter), whoever
 * cached it: its bytes count against that tenant's quota, so the holder keeps its hinted bytes
 * under the quota itself. 0, or as cache_fetch_block; -ENOSPC when the levels had no room to
 * cache it; -EDQUOT when the hint share (cfg.hinted_max) is full, -EEXIST when another tenant
 * holds the block (it is charged to that tenant; the block is cached, not held: no hold to
 * release). A block that leaves its last level (an explicit evict, a corrupt copy dropped) loses
 * every hold; a holder that releases it afterwards may release a newer holder's hold (rare:
 * that holder then reads it as any cached block).
 */
int cache_fetch_block_hinted(struct cache *c, const struct tier_ioctx *io,
                             const struct cache_obj *obj, uint64_t index);
/* Release one hold of every held block of obj; a block whose last hold goes is evicted at once
 * (evict: the hint's Belady victim) or left to the levels' policies. Returns the bytes whose
 * last hold went. */
uint64_t cache_hint_release(struct cache *c, const struct cache_obj *obj, bool evict);

/* The block size in force (cfg.block_size after defaults), for callers that walk blocks. */
size_t cache_block_size(const struct cache *c);

/* How many bytes of obj are cached (any level), for stage progress and status. */
uint64_t cache_cached_bytes(struct cache *c, const struct cache_obj *obj);
/* Whether block index of obj has a copy in some level now (it may leave it the next moment). */
bool cache_block_cached(struct cache *c, const struct cache_obj *obj, uint64_t index);

struct cache_level_stats {
    uint64_t hits, misses;
    uint64_t bytes_used, bytes_budget;
    uint64_t blocks;
    uint64_t evictions;
    uint64_t bytes_read; /* bytes served from this level */
};

struct cache_stats {
    struct cache_level_stats ram, disk;
    uint64_t fetches; /* backend block fetches */
    uint64_t fetch_bytes;
    uint64_t fetch_errors;
    /* blocks the peer source (cache_set_peer_source) gave instead of the backend, and bytes */
    uint64_t peer_fetches, peer_bytes;
    uint64_t fetch_ns_total;     /* sum of fetch latencies */
    uint64_t singleflight_waits; /* readers that waited on another's fetch */
    uint64_t pinned_bytes, pin_budget;
    uint64_t checksum_failures; /* corrupt disk blocks dropped */
    /* write-throughs the disk admission refused (cache_config.disk_adm): fetched blocks not
     * written to the disk level because the disk was busy or the tenant at its disk limit */
    uint64_t disk_store_skipped;
    /* write-throughs handed to the writer thread (store_async), and those its full queue left
     * to the fetching thread */
    uint64_t disk_store_async, disk_store_inline;
    /* Backend fetches holding a block buffer (all backends), now and at most so far; fetches
     * that waited for one of their backend's max_fetches slots. */
    uint64_t fetch_buffers_now, fetch_buffers_peak, fetch_slot_waits, max_fetches;
    /* Space quotas: bytes charged to some tenant (the rest of the cached bytes are pinned or
     * unclaimed since open), and blocks evicted by a tenant's quota. */
    uint64_t charged_bytes, quota_evictions;
    uint64_t hinted_bytes; /* blocks held for epoch-order hints (cache_fetch_block_hinted) */
    /* disk-level reads that found their block file open already / that opened it (disk.c's
     * table of open block files) */
    uint64_t disk_fd_hits, disk_fd_opens;
    /* RAM-less disk hits served by a plain pread, their chunks verified less than 1 s earlier
     * (docs/CACHE.md "Verification of disk reads") */
    uint64_t disk_reads_unhashed;
    /* Read-ahead (cache_readahead_window): prefetches being fetched now and at most so far;
     * the last sizing's reader rate, block fetch time (its backend's EWMA) and window in
     * blocks, and the largest window sized so far. */
    uint64_t prefetch_inflight, prefetch_inflight_peak;
    uint64_t readahead_rate_bps, readahead_fetch_ns, readahead_window, readahead_window_peak;
};
void cache_stats_get(struct cache *c, struct cache_stats *st);

struct mrc_point;
/* The miss-ratio curve of tenant t (t < 0: the whole node), CACHE_MRC_SIZES points into out
 * (cap of them; *n set to the number of sizes): each size's estimated hit ratio (NAN before its
 * first sampled access). -ENOENT: curves are off (cfg.mrc), or tenant t made no access yet;
 * -EINVAL: t >= max_tenants. */
int cache_mrc_curve(struct cache *c, int64_t t, struct mrc_point *out, size_t cap, size_t *n);
/* The demand behind tenant t's curve (t < 0: the node's): every access it was fed (also those
 * left out of the curve while the curves' queue was full), and their bytes, since the cache
 * opened (or the id was reclaimed). -ENOENT, -EINVAL as cache_mrc_curve. */
int cache_mrc_demand(struct cache *c, int64_t t, uint64_t *accesses, uint64_t *bytes);
/* Cells of the curves' queue of sampled accesses (cache_mrc.c): how far the readers may be ahead
 * of the curves' thread before accesses are left out. */
#define CACHE_MRC_QUEUE 16384u
/* Accesses left out of every curve (sampled or not) because the curves' queue was full, from
 * when a reader found it full to the next drain, since the cache opened; 0 with curves off. */
uint64_t cache_mrc_dropped(struct cache *c);
/* Times the curves' counters were halved (cfg.mrc_halflife_ms) since the cache opened. */
uint64_t cache_mrc_ages(struct cache *c);

/* Fetch hook: an observer called before every backend block fetch with the caller's ioctx (it
 * may block: tests use it as a gate) and after it with its outcome. Both may be NULL. Admission
 * is not done here: the scheduler's backend wrapper admits the fetch's backend_read itself. */
struct cache_fetch_hook {
    void (*before)(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                   uint64_t index, size_t bytes);
    void (*after)(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                  uint64_t index, ssize_t result, uint64_t latency_ns);
    void *ud;
};
void cache_set_fetch_hook(struct cache *c, const struct cache_fetch_hook *hook);

/* Peer source: where a block the cache does not hold may come from before the backend (a
 * cluster's owner of the block, docs/CLUSTER.md). Each load of a block that would fetch it from
 * the backend first calls fetch, before it takes a fetch slot (a load waiting on a peer holds
 * none), with a buffer of len bytes (the block's whole length): a return of len is the block's
 * bytes (verified by the source: the cache takes them as a backend's), anything else sends the load
 * on to the backend as without a source. A block from the source is not a backend fetch: the fetch
 * hook does not see it and the stats count it in peer_fetches / peer_bytes, not fetches. NULL:
 * none. Returns once no call of the source it replaces is in progress, so the caller may free what
 * that source's ud points to. */
struct cache_peer_source {
    ssize_t (*fetch)(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                     uint64_t index, void *buf, size_t len);
    void *ud;
};
void cache_set_peer_source(struct cache *c, const struct cache_peer_source *src);

#endif
