/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_int.h - private to src/cache: the block struct shared by the index (cache.c) and the
 * block-file store (disk.c), and the cache's own structs and helpers shared by cache.c and the
 * cache_*.c files. Locking of each field is noted on it; see the top of cache.c.
 */
#ifndef TIER_CACHE_CACHE_INT_H
#define TIER_CACHE_CACHE_INT_H

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <xxhash.h>
/* Debian's libxxhash picks the widest vector unit (AVX2/AVX-512) at run time through these
 * *_dispatch entry points; the header maps XXH3_64bits() etc. onto them. Block checksums are
 * verified on every disk hit, so their speed is the disk-hit path's speed. */
#include <xxh_x86dispatch.h>

#include "cache/cache.h"
#include "cache/mrc.h"
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
    /* space quota (cache_quota.c, I9): written holding both the shard lock and own_mu, so either
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

/* ---- the cache: structs and helpers shared by cache.c and the cache_*.c files ----------- */

#define NSHARDS 64
#define PREFETCH_THREADS_MAX 32

struct shard {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast when a load publishes its result */
    struct cblock **buckets;
    size_t nbuckets, n;
};

/* One cache level. mu guards pol and used; counters are atomics. */
struct level {
    pthread_mutex_t mu;
    struct policy *pol;
    uint64_t budget;
    uint64_t used;
    _Atomic uint64_t hits, misses, evictions, bytes_read;
};

struct pin_rule {
    struct pin_rule *next;
    char *be_name;
    char *prefix;
};

struct pf_item {
    struct pf_item *next;
    const void *owner; /* cache_prefetch_owned's; compared only */
    struct backend *be;
    char *key, *etag;
    char *version_id; /* NULL, or the object version to fetch (cache_obj.version_id) */
    uint64_t size, index;
    struct tier_ioctx io;
};

/* A write-through handed to the writer thread: the load of b (FETCHING, held by the loader's
 * reference, which the item now owns) ends when the writer has stored d. */
struct st_item {
    struct st_item *next;
    struct shard *s;
    struct cblock *b;
    struct cdata *d; /* a reference */
    struct tier_ioctx io;
};

/* The backend fetches of one backend that hold a block buffer now (fetch_slot_take). Exists
 * while any fetch holds or waits for one; fetch_mu. */
struct fetch_slots {
    struct fetch_slots *next;
    const struct backend *be;
    int active, waiting;
    /* Waiters by class: a freed slot goes to the most urgent class waiting (inference first,
     * as the scheduler's lanes grant), except that a class passed over FETCH_STARVE_LIMIT
     * times goes next, so background staging is slowed, never stopped. */
    int waiting_cls[TIER_IO_NCLASSES];
    int passed_cls[TIER_IO_NCLASSES];
    pthread_cond_t cv; /* a slot freed */
};

/* A backend's block fetch time: an EWMA (weight 1/8) over its full-block fetches (a block's
 * GET from request to last byte: the link's round trip plus the block at one stream's rate).
 * Under est_mu; one per backend that has fetched a full block, freed at close. */
struct fetch_est {
    struct fetch_est *next;
    const struct backend *be;
    uint64_t ns;      /* the estimate */
    uint64_t samples; /* fetches it has seen */
};

/* One tenant's space (cache_quota_set). */
struct qtenant {
    _Atomic uint64_t limit;      /* quota in force, bytes; UINT64_MAX: none */
    _Atomic uint64_t held;       /* own_mu to change: bytes of its charged blocks */
    _Atomic uint64_t hinted;     /* own_mu to change: bytes of its hinted blocks (I10) */
    uint64_t blocks;             /* own_mu */
    struct cblock *head, *tail;  /* own_mu: charge list, oldest first */
    uint64_t evictions, evicted; /* own_mu: quota evictions, count and bytes */
};

struct cache {
    struct cache_config cfg;
    char *disk_dir;
    int lock_fd;
    struct shard shards[NSHARDS];
    struct level ram, disk;
    uint64_t disk_writing; /* disk.mu: bytes reserved by block writes not yet finished */
    unsigned char secret[CACHE_SECRET_BYTES]; /* key of the identity hash; immutable */
    bool debug_collide; /* cache_debug_force_collisions(); set before any read */

    /* space quotas (I9): own_mu guards every qtenant's held/blocks/list and each block's
     * owner/charged/qprev/qnext (with the block's shard lock); limit is atomic so the check at
     * the end of a read takes no lock */
    pthread_mutex_t own_mu;
    struct qtenant *qt; /* cfg.max_tenants entries */
    _Atomic uint64_t quota_evictions;
    _Atomic uint64_t hinted_bytes; /* I10 */
    uint64_t hinted_max;           /* I10: the hint share; immutable */

    /* miss-ratio curves (cache_mrc.c): the node's and each tenant's, made at its first access
     * (mrc_tenant[t]: NULL until then, set once by compare-and-swap); the queue of sampled
     * accesses (readers push, lock-free; one consumer at a time, under mrc_drain_mu, pops) and
     * the thread that drains it (mrc_mu, mrc_cv, mrc_kick, mrc_stop: its wake-ups) */
    bool mrc_on;
    struct mrc *mrc_node;
    struct mrc *_Atomic *mrc_tenant; /* cfg.max_tenants entries */
    uint64_t mrc_sizes[CACHE_MRC_SIZES];
    struct mrc_qcell *mrc_q;
    _Atomic bool mrc_hold;     /* cache_debug_mrc_hold() */
    _Atomic bool mrc_overflow; /* the queue was found full: leave accesses out until drained */
    /* each on a cache line of its own: every push writes the tail, every pop the head */
    _Alignas(64) _Atomic uint64_t mrc_q_tail;
    _Alignas(64) uint64_t mrc_q_head; /* under mrc_drain_mu */
    _Atomic uint64_t mrc_drops;
    _Atomic uint64_t mrc_ages; /* halvings so far (cfg.mrc_halflife_ms) */
    pthread_mutex_t mrc_drain_mu, mrc_mu;
    pthread_cond_t mrc_cv;
    bool mrc_kick, mrc_stop; /* under mrc_mu */
    bool mrc_thread_on;
    pthread_t mrc_thread;

    pthread_mutex_t pin_mu; /* rules; order: first */
    struct pin_rule *rules;
    _Atomic uint64_t pin_gen;       /* +1 under pin_mu at every rule change, before its walk (I5) */
    void (*debug_pin_hook)(void *); /* cache_debug_set_pin_hook(); set before any read */
    void *debug_pin_arg;
    _Atomic uint64_t pinned_bytes;

    pthread_mutex_t hook_mu;
    struct cache_fetch_hook hook;
    struct cache_peer_source peer; /* under hook_mu, with peer_calls: calls in progress */
    unsigned peer_calls;
    pthread_cond_t peer_cv; /* peer_calls fell to 0 */
    _Atomic uint64_t peer_fetches, peer_bytes;

    _Atomic uint64_t fetches, fetch_bytes, fetch_errors, fetch_ns, sf_waits, csum_failures;
    struct tier_disk_adm adm; /* cfg.disk_adm's copy (enter NULL: none); immutable */
    _Atomic uint64_t store_skipped;
    /* fetch_mu: the per-backend bound on fetches holding a buffer (cfg.max_fetches) */
    pthread_mutex_t fetch_mu;
    struct fetch_slots *fetch_slots;
    uint64_t fetch_bufs_now, fetch_bufs_peak, fetch_slot_waits;
    _Atomic uint64_t io_warn_ns; /* last transient disk-read warning (rate limit) */
    struct disk_fdcache *fds;    /* open block files for disk hits (disk.c); NULL: no disk */

    /* prefetch pool: pf_mu guards the queue, pf_stop and the in-flight counts */
    pthread_mutex_t pf_mu;
    pthread_cond_t pf_cv;
    struct pf_item *pf_head, *pf_tail;
    size_t pf_len;
    bool pf_stop;
    int pf_active, pf_active_peak; /* prefetches being fetched now / at most so far */
    /* read-ahead sizing (cache_readahead_window): est_mu guards the list and the last sizing */
    pthread_mutex_t est_mu;
    struct fetch_est *est;
    uint64_t ra_last_rate_bps, ra_last_fetch_ns, ra_last_window, ra_window_peak;
    pthread_t pf_threads[PREFETCH_THREADS_MAX];
    int pf_nthreads;

    /* write-through queue (cfg.store_async): st_mu guards every st_ field but st_thread */
    pthread_mutex_t st_mu;
    pthread_cond_t st_cv;   /* an item queued, or stop */
    pthread_cond_t st_idle; /* an item was stored (store_drain) */
    struct st_item *st_head, *st_tail;
    size_t st_len;
    uint64_t st_bytes;           /* data bytes of the queued items */
    uint64_t st_queued, st_done; /* items ever queued / stored (store_drain) */
    bool st_stop, st_running;
    pthread_t st_thread;
    _Atomic uint64_t store_async_n, store_inline_n;
};

/* The helpers below are described at their definitions. */

/* cache.c */
struct cdata *cdata_ref(struct cdata *d);
struct shard *shard_of(struct cache *c, const uint8_t id[16]);
struct cblock *shard_lookup(struct shard *s, const uint8_t id[16]);
struct cblock *obj_lookup(struct cache *c, struct shard *s, const uint8_t id[16],
                          const struct cache_obj *obj, uint64_t index, bool *collision);
int shard_insert(struct shard *s, struct cblock *b);
void maybe_free(struct shard *s, struct cblock *b);
void *st_worker(void *arg);
void store_drain(struct cache *c);
bool obj_ok(const struct cache_obj *obj);
int fetch_block(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                uint64_t index, bool pin, bool async);

/* cache_quota.c */
bool charge_due(const struct cache *c, const struct cblock *b);
bool hcharge_due(const struct cache *c, const struct cblock *b);
void charge_sync(struct cache *c, struct cblock *b);
void charge_move(struct cache *c, struct cblock *b, uint32_t t);
void owner_touch(struct cache *c, struct cblock *b, const struct tier_ioctx *io);
struct cdata *drop_held(struct cache *c, struct shard *s, struct cblock *b, struct cblock **list);
void quota_check(struct cache *c, const struct tier_ioctx *io);

/* cache_mrc.c */
int mrc_setup(struct cache *c);
void mrc_teardown(struct cache *c);
/* One demand access (a read's new access to the block, as the policy counts it) by io's tenant
 * to the block whose cache_block_id() is id, bytes long: fed to the node's curve and the
 * tenant's (queued when sampled: the simulations run on the curves' thread). */
void mrc_feed(struct cache *c, const struct tier_ioctx *io, const uint8_t id[16], uint32_t bytes);
/* Simulate every sampled access queued before the call. */
void mrc_drain(struct cache *c);
/* Tenant t's id was reclaimed: what it queued is simulated, then its curve starts anew (both
 * under the drain's lock, so nothing of the old tenant lands in the new one's curve). */
void mrc_tenant_reset(struct cache *c, uint32_t t);

/* cache_level.c */
struct cdata *ram_remove(struct cache *c, struct cblock *b, bool evicted);
void ram_insert(struct cache *c, struct cblock *b, struct cdata *d);
void disk_detach(struct cache *c, struct cblock *b, bool evicted, struct cblock **list);
void finish_unlinks(struct cache *c, struct cblock *list);
int disk_reserve(struct cache *c, uint64_t need, uint64_t free_bytes, struct cblock **list);
void disk_store(struct cache *c, const struct tier_ioctx *io, struct cblock *b,
                const struct cdata *d);
void disk_drop(struct cache *c, struct cblock *b);

/* cache_pin.c */
bool pin_counted(const struct cblock *b);
void acct_update(struct cache *c, struct cblock *b, bool before);
bool rules_match(struct cache *c, const char *be_name, const char *key);

/* cache_prefetch.c */
void fetch_est_note(struct cache *c, const struct backend *be, uint64_t ns);
void fetch_est_free(struct cache *c);
void pf_item_free(struct pf_item *it);
void *pf_worker(void *arg);

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
/* verify_every: range reads hash every chunk they touch, also chunks verified less than 1 s ago
 * (cache_config.disk_verify_every_read). */
int disk_fdcache_new(unsigned slots, bool verify_every, struct disk_fdcache **out);
void disk_fdcache_free(struct disk_fdcache *fc); /* NULL: no-op */
/* After unlinking or replacing id's file: later reads open it anew. */
void disk_fdcache_forget(struct disk_fdcache *fc, const uint8_t id[16]);
struct disk_fdcache_stats {
    uint64_t hits, opens, forgets;
    uint64_t unhashed; /* range reads served without hashing (disk.c: VERIFIED RANGE READS) */
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
