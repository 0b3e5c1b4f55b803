/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.c - the hot-tier block cache (cache.h): index, RAM and disk levels, single-flight loads,
 * pinning, eviction by prefix and the prefetch pool. Block files are in disk.c (cache_int.h).
 *
 * Callers: FUSE read path, stager, control API, prefetch workers (all via cache.h).
 *
 * INVARIANTS (checked by cache_debug_check())
 *   I1  One block struct per identity (backend name, key, etag, index) in the index; its 128-bit
 *       XXH3 hash, keyed with the cache's secret, is the index key and the disk file name. A
 *       key never becomes a path. Every lookup compares the identity, not only the hash; a
 *       slot held by another identity (a collision) is never served for this one.
 *   I2  b->ram != NULL  <=>  b's ram_node is in the RAM policy; ram.used == sum of their sizes.
 *   I3  B_ON_DISK  <=>  b's disk_node is in the disk policy, and its file exists and was fully
 *       written (rename after write). disk.used == sum of their file sizes + reservations of
 *       writes in flight. A file is written or unlinked only by the one thread that set
 *       B_DISK_IO on its block, so writes and unlinks of one name never race.
 *   I4  level.used <= level.budget, except for the blocks being inserted right now (a new block
 *       is added, then victims are evicted; if none can be, the new block is taken out again).
 *   I5  pinned_bytes == sum of len over blocks with B_PINNED that are cached (RAM or disk), and
 *       <= pin budget. A pinned block is never evicted from the disk level; it leaves RAM only
 *       when it is safe on disk (or stays in RAM when there is no disk level).
 *   I6  At most one load (from disk or backend) per block at a time (B_FETCHING); others wait on
 *       the shard condvar and get the same result or error (b->ready).
 *   I7  A block struct is freed only when it is in no level, not loading, has no published
 *       result, no disk I/O and no thread holds it (refs == 0) - see maybe_free().
 *   I8  No lock is held across backend or disk I/O (cache_debug_check() excepted).
 *   I9  Space quotas: b->charged  <=>  b is cached (RAM or disk), not pinned, and its owner is
 *       a tenant id < max_tenants; then b is in exactly its owner's charge list, and a
 *       tenant's held bytes == sum of len over its charged blocks. Blocks are charged and
 *       uncharged in the same shard-locked section that changes what they depend on
 *       (acct_update()); a tenant's held bytes pass its quota only until the thread that
 *       charged them runs quota_check() (at the end of its read, before it returns).
 *   I10 Hinted blocks (B_HINTED <=> nhints > 0, one hold per hint set holding the block:
 *       cache_fetch_block_hinted, cache_hint_release): only cached blocks carry the flag (it
 *       goes, with every hold, when the block leaves its last level); hinted_bytes == sum of len
 *       over them <= the hint share (cfg.hinted_max: beyond, a hold is refused);
 *       the levels never evict them (a RAM copy goes only once it is on disk, as a pinned
 *       block's), and an owned unpinned one is counted in its owner's hinted bytes (hcharged)
 *       instead of its charge list: it counts against the quota, the CLOCK never takes it.
 *
 * LOCK ORDER: pin_mu -> ram.mu -> disk.mu -> shard.mu -> own_mu. A cached block is pinned
 * (B_PINNED set) only with both level locks held, so an evictor that holds them and saw a block
 * unpinned under its shard lock may take it out of both levels. A thread holding a shard lock
 * takes no other lock but own_mu, the leaf lock of the charge lists (taken only when a block's
 * charge changes, never on a plain hit), so the hit path is one shard lock (S3-FIFO hits are an
 * atomic bump under it).
 *
 * BLOCK STATES (flags and pointers of struct cblock, under its shard lock):
 *
 *          lookup miss                  load done (ready)        placed in RAM/disk
 *   (none) ----------> FETCHING --------------------------> FETCHING+ready -------> cached
 *                         |   \ load error -> ready(err) -> freed once waiters took it   |
 *                         |                                                             |
 *   cached = RAM and/or ON_DISK; RAM evict / disk evict / cache_evict / checksum failure  |
 *   remove one level each; DISK_IO brackets every file write and unlink; a block in no     |
 *   level and with no holder is freed.  <------------------------------------------------+
 *
 * TRANSITION -> FUNCTION
 *   RAM hit (no state change)                  ram_hit() via block_get()
 *   wait for a load in flight (single-flight)  wait_loading()
 *   miss: create block, set FETCHING           block_acquire()
 *   load from disk (checksum verified)         load_block() -> disk_block_load()
 *   RAM-less disk hit (no state change)        disk_direct() -> disk_block_read_range()
 *   load from backend (backend_read with io)   load_block() -> backend_fetch()
 *     (a fetch slot of its backend first)      fetch_slot_take(), fetch_slot_give()
 *   hash collision: read uncached              block_get() -> backend_fetch()
 *   publish result to waiters, end FETCHING    publish(), release_result()
 *   insert into RAM (+ evict RAM victims)      publish() -> ram_insert()
 *   write-through to disk (+ evict victims)    publish() -> disk_store()
 *     ... or by the writer thread, then end    publish() -> store_enqueue(); st_worker()
 *     the load                                   -> disk_store(), load_end()
 *   explicit drop while its write waits: the   drop_held() (B_STORE_CANCEL), disk_store()
 *     write is not done
 *   pin / hold of a block whose write waits    wait_stored()
 *   write-through of a block pinned or held    store_held() -> disk_store()
 *     after its skipped one
 *   RAM eviction (drop, never I/O)             ram_insert() -> ram_remove()
 *   disk eviction (unlink outside locks)       disk_reserve() -> disk_detach(), finish_unlinks()
 *   disk copy corrupt or gone: drop it         load_block() -> disk_drop()
 *   explicit eviction                          cache_evict()
 *   demotion out of one level: RAM -> disk     cache_demote() -> demote_ram() (disk_store(),
 *     (written first), or the disk copy gone     ram_remove()) / demote_disk() (disk_detach())
 *   pin / unpin                                cache_pin(), cache_unpin(), acct_update()
 *   charge / uncharge a tenant (I9)            acct_update() -> charge_sync()
 *   claim an unowned block on a hit            owner_touch()
 *   quota eviction of a tenant's own blocks    quota_check() -> quota_enforce(),
 *                                              quota_evict_one()
 *   hold a block for a hint / let it go        cache_fetch_block_hinted(), cache_hint_release()
 *   restart: rebuild from disk                 cache_open() -> disk_scan() -> adopt_one()
 *   free                                       maybe_free()
 *
 * WRITE-THROUGH: a block fetched from the backend is written to disk right after it is
 * published to readers and placed in RAM. RAM evictions are then free (no I/O in the eviction
 * path, which runs inside some reader's call). The cost is a disk write for blocks read once; the
 * disk level has its own S3-FIFO, so such blocks do not displace hot ones there either. With
 * cfg.store_async the write of a block that a read or a prefetch fetched goes to the writer
 * thread (st_worker; at most STORE_QUEUE wait, beyond that the fetching thread writes): the read
 * replies and the prefetcher starts its next GET without waiting for the disk. The load stays
 * open (FETCHING, its result published) until the writer is done, so I6 holds and a reader
 * meanwhile takes the published buffer; cache_evict() first waits for the queue to empty
 * (store_drain), cache_close() lets the writer finish it. Staging and hinted fetches write on
 * their own thread: when they return, the block is on disk.
 *
 * DISK ADMISSION (cfg.disk_adm, common/diskadm.h; the daemon's disk lane, qos/sched.h): every
 * read of a block file is admitted with the reader's ioctx and its bytes before it starts
 * (disk_direct(): the bytes asked for; load_block(): the whole block), waiting if the disk lane
 * says so; a write-through is admitted without waiting, as background I/O of the fetching
 * reader's tenant, and skipped when refused (counted in disk_store_skipped): the reader already
 * has its data and must not queue for the disk to store it. RAM hits are never admitted. No lock
 * is held across an admission (I8).
 *
 * SPACE QUOTAS (cache.h, cache_quota_set): each block has an owner, the tenant whose request
 * created it (a block adopted from disk at open has none until a tenant reads it: owner_touch()).
 * A tenant's charged blocks form its charge list, oldest charge first. When a read leaves its
 * tenant over quota, quota_enforce() walks that list CLOCK-wise (a block hit since it was last
 * passed gets one more round) and evicts the tenant's own blocks from both levels until it fits;
 * nothing of another tenant is evicted. The eviction runs in the reader's call, with no lock
 * held across its unlinks (I8), as the levels' own evictions do.
 */
#include "cache/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cache/cache_debug.h"
#include "cache/cache_int.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"

#define NSHARDS 64
#define PREFETCH_THREADS_DEFAULT 4
#define PREFETCH_THREADS_MAX 32
#define PREFETCH_QUEUE 64
#define STORE_QUEUE 16                  /* write-throughs waiting for the writer (store_async) */
#define STORE_QUEUE_BYTES (64ull << 20) /* ... and their bytes (one block at least) */
#define MAX_FETCHES_DEFAULT 64
#define DISK_OPEN_FILES 1024     /* block files kept open for disk hits (disk_fdcache) */
#define CACHE_TENANTS_DEFAULT 64 /* the tenant registry's default max_tenants */
#define CACHE_TENANTS_MAX TIER_TENANT_IDS_MAX /* the registry's id limit */

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

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

/* One tenant's space (cache_quota_set). */
struct qtenant {
    _Atomic uint64_t limit;      /* quota in force, bytes; UINT64_MAX: none */
    _Atomic uint64_t held;       /* own_mu to change: bytes of its charged blocks */
    _Atomic uint64_t hinted;     /* own_mu to change: bytes of its hinted blocks (I10) */
    uint64_t blocks;             /* own_mu */
    struct cblock *head, *tail;  /* own_mu: charge list, oldest first */
    uint64_t evictions, evicted; /* own_mu: quota evictions, count and bytes */
};

/* Grants a waiting class may be passed over by more urgent ones (as sched's starve_limit). */
#define FETCH_STARVE_LIMIT 64

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

    pthread_mutex_t pin_mu; /* rules; order: first */
    struct pin_rule *rules;
    _Atomic uint64_t pinned_bytes;

    pthread_mutex_t hook_mu;
    struct cache_fetch_hook hook;

    _Atomic uint64_t fetches, fetch_bytes, fetch_errors, fetch_ns, sf_waits, csum_failures;
    struct tier_disk_adm adm; /* cfg.disk_adm's copy (enter NULL: none); immutable */
    _Atomic uint64_t store_skipped;
    /* fetch_mu: the per-backend bound on fetches holding a buffer (cfg.max_fetches) */
    pthread_mutex_t fetch_mu;
    struct fetch_slots *fetch_slots;
    uint64_t fetch_bufs_now, fetch_bufs_peak, fetch_slot_waits;
    _Atomic uint64_t io_warn_ns; /* last transient disk-read warning (rate limit) */
    struct disk_fdcache *fds;    /* open block files for disk hits (disk.c); NULL: no disk */

    /* prefetch pool: pf_mu guards the queue and pf_stop */
    pthread_mutex_t pf_mu;
    pthread_cond_t pf_cv;
    struct pf_item *pf_head, *pf_tail;
    size_t pf_len;
    bool pf_stop;
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

/* ---- data buffers ----------------------------------------------------------------------- */

struct cdata *cdata_new(size_t len)
{
    struct cdata *d = malloc(sizeof(*d) + (len ? len : 1));
    if (!d)
        return NULL;
    atomic_init(&d->refs, 1);
    d->len = len;
    return d;
}

static struct cdata *cdata_ref(struct cdata *d)
{
    atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
    return d;
}

void cdata_unref(struct cdata *d)
{
    if (d && atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) == 1)
        free(d);
}

/* ---- identity and index ------------------------------------------------------------------ */

int cache_block_id(const struct cache *c, const char *be_name, const char *key, const char *etag,
                   uint64_t index, uint8_t id[16])
{
    uint64_t block_size = c->cfg.block_size;
    size_t nl = strlen(be_name), kl = strlen(key), el = strlen(etag);
    if (nl > CACHE_NAME_MAX || kl > BACKEND_KEY_MAX || el >= BACKEND_ETAG_MAX)
        return -EINVAL;
    unsigned char buf[CACHE_NAME_MAX + BACKEND_KEY_MAX + BACKEND_ETAG_MAX + 24];
    size_t o = 0;
    memcpy(buf + o, be_name, nl + 1);
    o += nl + 1;
    memcpy(buf + o, key, kl + 1);
    o += kl + 1;
    memcpy(buf + o, etag, el + 1);
    o += el + 1;
    /* The block size is part of the identity: block N of a 4 MiB cache is not block N of a
     * 1 MiB cache, so a restart with another block_size must never find the old blocks. */
    for (int i = 0; i < 8; i++)
        buf[o++] = (unsigned char)(index >> (8 * i));
    for (int i = 0; i < 8; i++)
        buf[o++] = (unsigned char)(block_size >> (8 * i));
    /* Keyed with the cache's own secret: without it nobody can aim a key at another object's
     * blocks (XXH3 is not collision-resistant). Lookups compare the identity anyway. */
    XXH128_hash_t h = c->debug_collide
                          ? (XXH128_hash_t){.low64 = index, .high64 = 0}
                          : XXH3_128bits_withSecret(buf, o, c->secret, sizeof(c->secret));
    for (int i = 0; i < 8; i++) {
        id[i] = (uint8_t)(h.high64 >> (56 - 8 * i));
        id[8 + i] = (uint8_t)(h.low64 >> (56 - 8 * i));
    }
    return 0;
}

static uint64_t id_low(const uint8_t id[16])
{
    uint64_t v = 0;
    for (int i = 8; i < 16; i++)
        v = (v << 8) | id[i];
    return v;
}

static struct shard *shard_of(struct cache *c, const uint8_t id[16])
{
    return &c->shards[id_low(id) % NSHARDS];
}

static struct cblock *shard_lookup(struct shard *s, const uint8_t id[16])
{
    if (!s->nbuckets)
        return NULL;
    size_t bi = (id_low(id) / NSHARDS) & (s->nbuckets - 1);
    for (struct cblock *b = s->buckets[bi]; b; b = b->hnext)
        if (!memcmp(b->id, id, 16))
            return b;
    return NULL;
}

/* Is b exactly block `index` of obj (len bytes)? The hash is only the index key: two identities
 * with one hash must never share a block. */
static bool same_ident(const struct cblock *b, const struct cache_obj *obj, uint64_t index,
                       uint32_t len)
{
    return b->index == index && b->len == len && !strcmp(b->key, obj->key) &&
           !strcmp(b->etag, obj->etag) && !strcmp(b->be_name, obj->be->name);
}

static uint32_t block_len(const struct cache *c, const struct cache_obj *obj, uint64_t index);

/* Shard lock held. The block of obj's block `index`, or NULL; *collision (may be NULL) is set
 * when the hash's slot holds another identity. */
static struct cblock *obj_lookup(struct cache *c, struct shard *s, const uint8_t id[16],
                                 const struct cache_obj *obj, uint64_t index, bool *collision)
{
    struct cblock *b = shard_lookup(s, id);
    bool other = b && !same_ident(b, obj, index, block_len(c, obj, index));
    if (collision)
        *collision = other;
    return other ? NULL : b;
}

static int shard_insert(struct shard *s, struct cblock *b)
{
    if (s->n + 1 > s->nbuckets) {
        size_t ncap = s->nbuckets ? s->nbuckets * 2 : 64;
        struct cblock **nb = calloc(ncap, sizeof(*nb));
        if (!nb)
            return -ENOMEM;
        for (size_t i = 0; i < s->nbuckets; i++) {
            struct cblock *x = s->buckets[i];
            while (x) {
                struct cblock *nx = x->hnext;
                size_t bi = (id_low(x->id) / NSHARDS) & (ncap - 1);
                x->hnext = nb[bi];
                nb[bi] = x;
                x = nx;
            }
        }
        free(s->buckets);
        s->buckets = nb;
        s->nbuckets = ncap;
    }
    size_t bi = (id_low(b->id) / NSHARDS) & (s->nbuckets - 1);
    b->hnext = s->buckets[bi];
    s->buckets[bi] = b;
    s->n++;
    return 0;
}

static void shard_remove(struct shard *s, struct cblock *b)
{
    size_t bi = (id_low(b->id) / NSHARDS) & (s->nbuckets - 1);
    for (struct cblock **pp = &s->buckets[bi]; *pp; pp = &(*pp)->hnext) {
        if (*pp == b) {
            *pp = b->hnext;
            s->n--;
            return;
        }
    }
}

struct cblock *cblock_new(const uint8_t id[16], const char *be_name, const char *key,
                          const char *etag, uint64_t index, uint32_t len)
{
    size_t nl = strlen(be_name), kl = strlen(key), el = strlen(etag);
    struct cblock *b = calloc(1, sizeof(*b) + nl + kl + el + 3);
    if (!b)
        return NULL;
    memcpy(b->id, id, 16);
    b->index = index;
    b->len = len;
    b->be_name = b->strs;
    b->key = b->be_name + nl + 1;
    b->etag = b->key + kl + 1;
    memcpy(b->be_name, be_name, nl + 1);
    memcpy(b->key, key, kl + 1);
    memcpy(b->etag, etag, el + 1);
    b->ram_node.hash = b->disk_node.hash = id_low(id);
    b->owner = CACHE_OWNER_NONE;
    return b;
}

/* Shard lock held. I7. */
static void maybe_free(struct shard *s, struct cblock *b)
{
    if (b->refs || b->nwaiters || b->ready || b->ram ||
        (b->flags & (B_FETCHING | B_ON_DISK | B_DISK_IO)))
        return;
    shard_remove(s, b);
    free(b);
}

/* ---- pinning ------------------------------------------------------------------------------ */

static bool pin_counted(const struct cblock *b)
{
    return (b->flags & B_PINNED) && (b->ram || (b->flags & B_ON_DISK));
}

static void charge_sync(struct cache *c, struct cblock *b);

/* Shard lock held; before = pin_counted(b) before the change just made. A pinned block that
 * becomes cached while the pin budget is full is kept unpinned (I5). Then b's charge follows
 * what it is now (I9). */
static void acct_update(struct cache *c, struct cblock *b, bool before)
{
    bool now = pin_counted(b);
    if (now && !before) {
        uint64_t old = atomic_fetch_add(&c->pinned_bytes, b->len);
        if (old + b->len > c->cfg.pin_bytes) {
            atomic_fetch_sub(&c->pinned_bytes, b->len);
            b->flags &= ~(unsigned)(B_PINNED | B_PIN_EXPLICIT);
            log_debug("cache: pin budget full, block %" PRIu64 " of %s cached unpinned", b->index,
                      b->key);
        }
    } else if (!now && before) {
        atomic_fetch_sub(&c->pinned_bytes, b->len);
    }
    charge_sync(c, b);
}

/* ---- space quotas (I9) -------------------------------------------------------------------- */

static bool owned_cached(const struct cache *c, const struct cblock *b)
{
    return b->owner < c->cfg.max_tenants && (b->ram || (b->flags & B_ON_DISK)) &&
           !(b->flags & B_PINNED);
}

static bool charge_due(const struct cache *c, const struct cblock *b)
{
    return owned_cached(c, b) && !(b->flags & B_HINTED);
}

static bool hcharge_due(const struct cache *c, const struct cblock *b)
{
    return owned_cached(c, b) && (b->flags & B_HINTED);
}

/* own_mu held. */
static void qlist_unlink(struct qtenant *q, struct cblock *b)
{
    if (b->qprev)
        b->qprev->qnext = b->qnext;
    else
        q->head = b->qnext;
    if (b->qnext)
        b->qnext->qprev = b->qprev;
    else
        q->tail = b->qprev;
    b->qprev = b->qnext = NULL;
}

/* own_mu held. */
static void qlist_append(struct qtenant *q, struct cblock *b)
{
    b->qnext = NULL;
    b->qprev = q->tail;
    if (q->tail)
        q->tail->qnext = b;
    else
        q->head = b;
    q->tail = b;
}

/* Shard lock held: make b's charge match charge_due() and hcharge_due() (I9, I10). A block
 * that left its last level also stops being hinted here. */
static void charge_sync(struct cache *c, struct cblock *b)
{
    if ((b->flags & B_HINTED) && !b->ram && !(b->flags & B_ON_DISK)) {
        b->flags &= ~(unsigned)B_HINTED;
        b->nhints = 0;
        atomic_fetch_sub(&c->hinted_bytes, b->len);
    }
    bool hdue = hcharge_due(c, b);
    if (hdue != b->hcharged) {
        pthread_mutex_lock(&c->own_mu);
        struct qtenant *hq = &c->qt[b->owner];
        atomic_store_explicit(&hq->hinted,
                              hdue ? atomic_load(&hq->hinted) + b->len
                                   : atomic_load(&hq->hinted) - b->len,
                              memory_order_relaxed);
        b->hcharged = hdue;
        pthread_mutex_unlock(&c->own_mu);
    }
    bool due = charge_due(c, b);
    if (due == b->charged)
        return;
    struct qtenant *q = &c->qt[b->owner];
    pthread_mutex_lock(&c->own_mu);
    if (due) {
        qlist_append(q, b);
        atomic_store_explicit(&q->held, atomic_load(&q->held) + b->len, memory_order_relaxed);
        q->blocks++;
    } else {
        qlist_unlink(q, b);
        atomic_store_explicit(&q->held, atomic_load(&q->held) - b->len, memory_order_relaxed);
        q->blocks--;
    }
    atomic_store_explicit(&b->qhit, false, memory_order_relaxed);
    b->charged = due;
    pthread_mutex_unlock(&c->own_mu);
}

/* Shard lock held: charge b to tenant t from now on (a hint holds it for t). */
static void charge_move(struct cache *c, struct cblock *b, uint32_t t)
{
    pthread_mutex_lock(&c->own_mu);
    if (b->charged) {
        struct qtenant *q = &c->qt[b->owner];
        qlist_unlink(q, b);
        atomic_store_explicit(&q->held, atomic_load(&q->held) - b->len, memory_order_relaxed);
        q->blocks--;
        b->charged = false;
    }
    if (b->hcharged) {
        struct qtenant *q = &c->qt[b->owner];
        atomic_store_explicit(&q->hinted, atomic_load(&q->hinted) - b->len, memory_order_relaxed);
        b->hcharged = false;
    }
    b->owner = t;
    pthread_mutex_unlock(&c->own_mu);
}

/* Shard lock held, b cached and read by io: note the hit for the quota's CLOCK, and charge a
 * block nobody owns (one adopted from disk at open) to the reader. */
static void owner_touch(struct cache *c, struct cblock *b, const struct tier_ioctx *io)
{
    if (b->charged)
        atomic_store_explicit(&b->qhit, true, memory_order_relaxed);
    else if (b->owner == CACHE_OWNER_NONE && io && io->tenant < c->cfg.max_tenants) {
        pthread_mutex_lock(&c->own_mu);
        b->owner = io->tenant;
        pthread_mutex_unlock(&c->own_mu);
        charge_sync(c, b);
    }
}

static struct cdata *ram_remove(struct cache *c, struct cblock *b, bool evicted);
static void disk_detach(struct cache *c, struct cblock *b, bool evicted, struct cblock **list);
static void finish_unlinks(struct cache *c, struct cblock *list);

/* ram.mu and disk.mu held, b referenced by the caller (refs++ under its shard lock s): take b
 * out of both levels (an explicit drop: no ghost), then let go of the reference. Returns its RAM
 * buffer to unref and adds its file to *list for finish_unlinks(), both after the level locks
 * are dropped. */
static struct cdata *drop_held(struct cache *c, struct shard *s, struct cblock *b,
                               struct cblock **list)
{
    struct cdata *d = NULL;
    if (b->ram) /* b->ram changes only under ram.mu (I2), held */
        d = ram_remove(c, b, false);
    pthread_mutex_lock(&s->mu);
    bool on = (b->flags & B_ON_DISK) != 0;
    /* a write-through may still be queued, or a write outside a load (store_held, cache_demote)
     * in flight: it must not bring b back (load_end or that write clears the mark) */
    if (b->flags & (B_FETCHING | B_DISK_IO))
        b->flags |= B_STORE_CANCEL;
    pthread_mutex_unlock(&s->mu);
    if (on)
        disk_detach(c, b, false, list);
    pthread_mutex_lock(&s->mu);
    b->refs--;
    maybe_free(s, b);
    pthread_mutex_unlock(&s->mu);
    return d;
}

/* No lock held. Evict the block with identity id from both levels if it is still charged to
 * tenant t. Returns its bytes, or 0 when it is no longer t's (a race: the caller looks again). */
static uint32_t quota_evict_one(struct cache *c, const uint8_t id[16], uint32_t t)
{
    struct shard *s = shard_of(c, id);
    struct cblock *list = NULL;
    struct cdata *d = NULL;
    uint32_t len = 0;
    pthread_mutex_lock(&c->ram.mu);
    pthread_mutex_lock(&c->disk.mu);
    pthread_mutex_lock(&s->mu);
    struct cblock *b = shard_lookup(s, id);
    /* charged implies not pinned, and a cached block is pinned only under both level locks
     * (held here): it cannot become pinned before it is out */
    if (b && b->charged && b->owner == t) {
        b->refs++;
        len = b->len;
    }
    pthread_mutex_unlock(&s->mu);
    if (len)
        d = drop_held(c, s, b, &list);
    pthread_mutex_unlock(&c->disk.mu);
    pthread_mutex_unlock(&c->ram.mu);
    finish_unlinks(c, list);
    cdata_unref(d);
    return len;
}

/* Second chances one quota_enforce() call gives at most: a tenant whose whole list is hot pays a
 * bounded walk per over-quota read under own_mu, which every tenant's charge takes too. */
#define QUOTA_CHANCES_MAX 64

/* No lock held. Evict tenant t's own blocks until its held bytes fit its quota: the head of its
 * charge list goes unless it was hit since it was last passed (then it moves to the tail, its
 * bit cleared). The walk is bounded: after QUOTA_CHANCES_MAX second chances the head goes
 * whatever its bit. */
static void quota_enforce(struct cache *c, uint32_t t)
{
    struct qtenant *q = &c->qt[t];
    uint64_t chances = 0;
    for (;;) {
        uint8_t id[16];
        pthread_mutex_lock(&c->own_mu);
        uint64_t limit = atomic_load(&q->limit);
        struct cblock *b = q->head;
        uint64_t used = tier_sum_sat(atomic_load(&q->held), atomic_load(&q->hinted));
        if (used <= limit || !b) {
            pthread_mutex_unlock(&c->own_mu);
            return;
        }
        if (atomic_load_explicit(&b->qhit, memory_order_relaxed) && q->head != q->tail &&
            chances < QUOTA_CHANCES_MAX) {
            atomic_store_explicit(&b->qhit, false, memory_order_relaxed);
            qlist_unlink(q, b);
            qlist_append(q, b);
            chances++;
            pthread_mutex_unlock(&c->own_mu);
            continue;
        }
        memcpy(id, b->id, sizeof(id));
        pthread_mutex_unlock(&c->own_mu);
        uint32_t n = quota_evict_one(c, id, t);
        if (n) {
            pthread_mutex_lock(&c->own_mu);
            q->evictions++;
            q->evicted += n;
            pthread_mutex_unlock(&c->own_mu);
            atomic_fetch_add_explicit(&c->quota_evictions, 1, memory_order_relaxed);
        }
    }
}

/* No lock held: after a request of io's tenant, evict its own blocks if it is over quota. One
 * relaxed load each when it is not (the common case). */
static void quota_check(struct cache *c, const struct tier_ioctx *io)
{
    uint32_t t = io ? io->tenant : TIER_TENANT_DEFAULT;
    if (t >= c->cfg.max_tenants)
        return;
    struct qtenant *q = &c->qt[t];
    if (tier_sum_sat(atomic_load_explicit(&q->held, memory_order_relaxed),
                     atomic_load_explicit(&q->hinted, memory_order_relaxed)) >
        atomic_load_explicit(&q->limit, memory_order_relaxed))
        quota_enforce(c, t);
}

int cache_quota_set(struct cache *c, uint32_t tenant, uint64_t bytes)
{
    if (!c || tenant >= c->cfg.max_tenants) {
        tier_err_set("tenant id %" PRIu32 " out of range (the cache keeps %u tenants apart)",
                     tenant, c ? c->cfg.max_tenants : 0);
        return -EINVAL;
    }
    struct qtenant *q = &c->qt[tenant];
    uint64_t limit = bytes == CACHE_QUOTA_DEFAULT
                         ? (c->cfg.default_quota ? c->cfg.default_quota : UINT64_MAX)
                         : bytes;
    atomic_store(&q->limit, limit);
    const struct tier_ioctx io = {.tenant = tenant, .cls = TIER_IO_BACKGROUND};
    quota_check(c, &io);
    return 0;
}

int cache_tenant_stats_get(struct cache *c, uint32_t tenant, struct cache_tenant_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!c || tenant >= c->cfg.max_tenants)
        return -EINVAL;
    struct qtenant *q = &c->qt[tenant];
    pthread_mutex_lock(&c->own_mu);
    uint64_t limit = atomic_load(&q->limit);
    out->quota = limit == UINT64_MAX ? 0 : limit;
    out->hinted_bytes = atomic_load(&q->hinted);
    out->bytes = atomic_load(&q->held) + out->hinted_bytes;
    out->blocks = q->blocks;
    out->quota_evictions = q->evictions;
    out->quota_evicted_bytes = q->evicted;
    pthread_mutex_unlock(&c->own_mu);
    return 0;
}

int cache_tenant_fold(struct cache *c, uint32_t tenant, uint32_t into)
{
    if (!c || tenant >= c->cfg.max_tenants || into >= c->cfg.max_tenants || tenant == into)
        return -EINVAL;
    pthread_mutex_lock(&c->own_mu);
    struct qtenant *q = &c->qt[tenant], *to = &c->qt[into];
    to->evictions += q->evictions;
    to->evicted += q->evicted;
    q->evictions = q->evicted = 0;
    pthread_mutex_unlock(&c->own_mu);
    return 0;
}

unsigned cache_max_tenants(const struct cache *c)
{
    return c ? c->cfg.max_tenants : 0;
}

uint64_t cache_hint_share(const struct cache *c)
{
    return c ? c->hinted_max : 0;
}

/* A rule is a directory prefix when it is "" or ends in '/', and one object's key otherwise:
 * pinning or evicting "d/a.bin" must not touch "d/a.bin.bak". */
static bool key_matches(const char *key, const char *rule)
{
    size_t n = strlen(rule);
    if (n == 0 || rule[n - 1] == '/')
        return !strncmp(key, rule, n);
    return !strcmp(key, rule);
}

static bool prefix_match(const struct cblock *b, const char *be_name, const char *prefix)
{
    return !strcmp(b->be_name, be_name) && key_matches(b->key, prefix);
}

/* pin_mu held. */
static bool rules_match(struct cache *c, const char *be_name, const char *key)
{
    for (struct pin_rule *r = c->rules; r; r = r->next)
        if (!strcmp(r->be_name, be_name) && key_matches(key, r->prefix))
            return true;
    return false;
}

/* ---- levels ----------------------------------------------------------------------------- */

static bool ram_evictable(struct pol_node *n, void *ud)
{
    struct cache *c = ud;
    struct cblock *b = container_of(n, struct cblock, ram_node);
    struct shard *s = shard_of(c, b->id);
    pthread_mutex_lock(&s->mu);
    bool ok = !(b->flags & (B_PINNED | B_HINTED)) || (b->flags & B_ON_DISK);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static bool disk_evictable(struct pol_node *n, void *ud)
{
    struct cache *c = ud;
    struct cblock *b = container_of(n, struct cblock, disk_node);
    struct shard *s = shard_of(c, b->id);
    pthread_mutex_lock(&s->mu);
    bool ok = !(b->flags & (B_PINNED | B_HINTED));
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* ram.mu held. Take b out of the RAM level; returns its buffer for the caller to unref after
 * dropping the locks. */
static struct cdata *ram_remove(struct cache *c, struct cblock *b, bool evicted)
{
    struct shard *s = shard_of(c, b->id);
    pthread_mutex_lock(&s->mu);
    bool before = pin_counted(b);
    struct cdata *d = b->ram;
    policy_remove(c->ram.pol, &b->ram_node, evicted);
    c->ram.used -= b->ram_node.size;
    b->ram = NULL;
    acct_update(c, b, before);
    maybe_free(s, b);
    pthread_mutex_unlock(&s->mu);
    return d;
}

/* Put d into the RAM level as b's copy, then evict down to the budget. */
static void ram_insert(struct cache *c, struct cblock *b, struct cdata *d)
{
    if (!c->ram.budget || d->len > c->ram.budget)
        return;
    struct cdata *drop[16];
    size_t ndrop = 0;
    struct shard *s = shard_of(c, b->id);
    pthread_mutex_lock(&c->ram.mu);
    pthread_mutex_lock(&s->mu);
    /* B_STORE_CANCEL: dropped (drop_held, which holds ram.mu) while it loaded: not placed */
    if (b->ram || (b->flags & B_STORE_CANCEL)) {
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_unlock(&c->ram.mu);
        return;
    }
    bool before = pin_counted(b);
    b->ram = cdata_ref(d);
    b->ram_node.size = d->len;
    policy_insert(c->ram.pol, &b->ram_node);
    c->ram.used += d->len;
    acct_update(c, b, before);
    pthread_mutex_unlock(&s->mu);
    while (c->ram.used > c->ram.budget) {
        struct pol_node *n = policy_evict_candidate(c->ram.pol, ram_evictable, c);
        if (!n)
            n = &b->ram_node; /* nothing else can go: refuse the new block (I4) */
        struct cblock *v = container_of(n, struct cblock, ram_node);
        if (!policy_contains(n))
            break;
        struct cdata *vd = ram_remove(c, v, true);
        atomic_fetch_add_explicit(&c->ram.evictions, 1, memory_order_relaxed);
        if (ndrop == 16) {
            /* free() is not I/O, but keep the lock hold short in the common case */
            cdata_unref(vd);
        } else {
            drop[ndrop++] = vd;
        }
        if (v == b)
            break;
    }
    pthread_mutex_unlock(&c->ram.mu);
    for (size_t i = 0; i < ndrop; i++)
        cdata_unref(drop[i]);
}

/* disk.mu held. Take b (ON_DISK) out of the disk level and mark it for unlink by the caller:
 * sets B_DISK_IO and takes a reference; the caller must call finish_unlinks(). */
static void disk_detach(struct cache *c, struct cblock *b, bool evicted, struct cblock **list)
{
    struct shard *s = shard_of(c, b->id);
    pthread_mutex_lock(&s->mu);
    bool before = pin_counted(b);
    policy_remove(c->disk.pol, &b->disk_node, evicted);
    c->disk.used -= b->disk_node.size;
    b->flags &= ~(unsigned)B_ON_DISK;
    b->flags |= B_DISK_IO;
    b->refs++;
    acct_update(c, b, before);
    b->vnext = *list;
    *list = b;
    pthread_mutex_unlock(&s->mu);
}

/* Unlink the files of detached blocks (no lock held) and release them. */
static void finish_unlinks(struct cache *c, struct cblock *list)
{
    while (list) {
        struct cblock *b = list;
        list = b->vnext;
        disk_block_unlink(c->disk_dir, b->id);
        disk_fdcache_forget(c->fds, b->id);
        struct shard *s = shard_of(c, b->id);
        pthread_mutex_lock(&s->mu);
        b->flags &= ~(unsigned)B_DISK_IO;
        if (!(b->flags & B_FETCHING)) /* a drop's mark while the unlink ran: no write to stop */
            b->flags &= ~(unsigned)B_STORE_CANCEL;
        b->refs--;
        maybe_free(s, b);
        pthread_mutex_unlock(&s->mu);
    }
}

/* disk.mu held. Evict until need more bytes fit in the budget and at least free_bytes were
 * freed; then reserve need. Returns 0 or -ENOSPC (nothing reserved). */
static int disk_reserve(struct cache *c, uint64_t need, uint64_t free_bytes, struct cblock **list)
{
    uint64_t freed = 0;
    while (c->disk.used + need > c->disk.budget || freed < free_bytes) {
        struct pol_node *n = policy_evict_candidate(c->disk.pol, disk_evictable, c);
        if (!n)
            return -ENOSPC;
        freed += n->size;
        disk_detach(c, container_of(n, struct cblock, disk_node), true, list);
        atomic_fetch_add_explicit(&c->disk.evictions, 1, memory_order_relaxed);
    }
    c->disk.used += need;
    return 0;
}

static uint64_t disk_avail(struct cache *c)
{
    struct statvfs sv;
    if (statvfs(c->disk_dir, &sv) < 0)
        return UINT64_MAX;
    return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* A write disk_store() took DISK_IO and a reference for ends without a file: let both go, and
 * a drop's mark with them outside a load (a load's stays for its publish; load_end clears it). */
static void store_abandon(struct shard *s, struct cblock *b)
{
    pthread_mutex_lock(&s->mu);
    b->flags &= ~(unsigned)B_DISK_IO;
    if (!(b->flags & B_FETCHING))
        b->flags &= ~(unsigned)B_STORE_CANCEL;
    b->refs--;
    maybe_free(s, b);
    pthread_mutex_unlock(&s->mu);
}

/* Write-through: store b's data d as a block file, evicting to stay in budget and above the
 * free-space floor. Failures only mean the block is not on disk. The write runs on the thread
 * that fetched the block, before its read returns: it is admitted as background I/O of that
 * reader's tenant (io) without waiting, and skipped when the disk admission refuses it (the disk
 * busy with other I/O, or the tenant at a disk limit): a reader never waits for disk bandwidth
 * to store a block it already has. */
static void disk_store(struct cache *c, const struct tier_ioctx *io, struct cblock *b,
                       const struct cdata *d)
{
    if (!c->disk_dir || !c->disk.budget)
        return;
    struct shard *s = shard_of(c, b->id);
    pthread_mutex_lock(&s->mu);
    if (b->flags & (B_ON_DISK | B_DISK_IO | B_STORE_CANCEL)) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    b->flags |= B_DISK_IO;
    b->refs++;
    /* A pinned or hinted block must reach the disk (RAM eviction skips such blocks while they
     * are not on disk, so a skipped write-through would hold it in RAM for good): it waits for
     * the disk lane instead of being skipped. */
    bool must = (b->flags & (B_PINNED | B_HINTED)) != 0;
    pthread_mutex_unlock(&s->mu);
    const struct tier_ioctx wio = {.tenant = io ? io->tenant : TIER_TENANT_DEFAULT,
                                   .cls = TIER_IO_BACKGROUND};
    if (tier_disk_enter(&c->adm, &wio, d->len, !must) != 0) {
        atomic_fetch_add_explicit(&c->store_skipped, 1, memory_order_relaxed);
        store_abandon(s, b);
        return;
    }

    uint64_t need = disk_block_file_size(b);
    struct cblock *victims = NULL;
    pthread_mutex_lock(&c->disk.mu);
    /* The floor is checked under disk.mu, against the free space less the writes other threads
     * have reserved but not finished (statvfs does not see them yet): concurrent writers cannot
     * all pass the check on the same free space. statvfs is a metadata call, the one system call
     * made under a level lock (I8). Unlinks still pending make it err on the safe side. */
    uint64_t avail = disk_avail(c);
    avail = avail > c->disk_writing ? avail - c->disk_writing : 0;
    uint64_t floor = c->cfg.disk_min_free_bytes + need;
    uint64_t deficit = avail < floor ? floor - avail : 0;
    int r = need > c->disk.budget ? -ENOSPC : disk_reserve(c, need, deficit, &victims);
    if (r == 0)
        c->disk_writing += need;
    pthread_mutex_unlock(&c->disk.mu);
    finish_unlinks(c, victims);
    if (r == 0) {
        r = disk_block_write(c->disk_dir, c->cfg.block_size, b, d->bytes, d->len);
        if (r == 0) /* renamed over any older file of the name: read the new one from now on */
            disk_fdcache_forget(c->fds, b->id);
        tier_disk_leave(&c->adm, &wio, d->len, r);
        if (r < 0)
            log_debug("cache: block %" PRIu64 " of %s not written to disk: %s", b->index, b->key,
                      strerror(-r));
        pthread_mutex_lock(&c->disk.mu);
        c->disk_writing -= need;
        pthread_mutex_lock(&s->mu);
        bool cancelled = r == 0 && (b->flags & B_STORE_CANCEL);
        if (r == 0 && !cancelled) {
            bool before = pin_counted(b);
            b->flags |= B_ON_DISK;
            b->disk_node.size = need;
            policy_insert(c->disk.pol, &b->disk_node);
            acct_update(c, b, before);
        } else {
            c->disk.used -= need;
        }
        if (cancelled) {
            /* dropped while it was written: the file goes, as the drop's would have; DISK_IO
             * and the reference pass to finish_unlinks. Outside a load the mark is this write's
             * alone (a load's stays for its publish, and load_end clears it) */
            if (!(b->flags & B_FETCHING))
                b->flags &= ~(unsigned)B_STORE_CANCEL;
            b->vnext = NULL;
            pthread_mutex_unlock(&s->mu);
            pthread_mutex_unlock(&c->disk.mu);
            finish_unlinks(c, b);
            return;
        }
        /* DISK_IO ends in the same section that publishes ON_DISK: once an evictor can see the
         * block on disk it may take DISK_IO for its unlink, and we must not clear that. */
        b->flags &= ~(unsigned)B_DISK_IO;
        if (!(b->flags & B_FETCHING)) /* a drop's mark for a write that failed */
            b->flags &= ~(unsigned)B_STORE_CANCEL;
        b->refs--;
        maybe_free(s, b);
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_unlock(&c->disk.mu);
        return;
    }
    tier_disk_leave(&c->adm, &wio, d->len, r); /* admitted, not written (no room) */
    store_abandon(s, b);
}

/* A disk copy failed verification or is gone: take it out and delete it. */
static void disk_drop(struct cache *c, struct cblock *b)
{
    struct cblock *list = NULL;
    struct shard *s = shard_of(c, b->id);
    pthread_mutex_lock(&c->disk.mu);
    pthread_mutex_lock(&s->mu);
    bool on = (b->flags & B_ON_DISK) != 0;
    pthread_mutex_unlock(&s->mu);
    if (on)
        disk_detach(c, b, false, &list);
    pthread_mutex_unlock(&c->disk.mu);
    finish_unlinks(c, list);
}

/* ---- loads ------------------------------------------------------------------------------- */

static uint32_t block_len(const struct cache *c, const struct cache_obj *obj, uint64_t index)
{
    uint64_t start = index * c->cfg.block_size;
    uint64_t left = obj->size_bytes - start;
    return (uint32_t)(left < c->cfg.block_size ? left : c->cfg.block_size);
}

/* Take one of obj's backend's cfg.max_fetches fetch slots, waiting while all are held: a fetch
 * allocates its block buffer only once it has one, so misses queued behind a slow backend (and
 * behind its scheduler lane, inside backend_read) hold no buffer, and fetch memory is at most
 * max_fetches blocks per backend. Per backend, so a hung one never holds back the misses of
 * another. Single-flight waiters never get here. NULL: no memory. */
static bool slot_mine(const struct cache *c, const struct fetch_slots *fs, int cls)
{
    if (fs->active >= (int)c->cfg.max_fetches)
        return false;
    if (fs->passed_cls[cls] >= FETCH_STARVE_LIMIT)
        return true;
    for (int k = 0; k < cls; k++)
        if (fs->waiting_cls[k] > 0)
            return false;
    return true;
}

static struct fetch_slots *fetch_slot_take(struct cache *c, const struct backend *be, int cls)
{
    pthread_mutex_lock(&c->fetch_mu);
    struct fetch_slots *fs = c->fetch_slots;
    while (fs && fs->be != be)
        fs = fs->next;
    if (!fs) {
        fs = calloc(1, sizeof(*fs));
        if (!fs) {
            pthread_mutex_unlock(&c->fetch_mu);
            return NULL;
        }
        fs->be = be;
        pthread_cond_init(&fs->cv, NULL);
        fs->next = c->fetch_slots;
        c->fetch_slots = fs;
    }
    if (!slot_mine(c, fs, cls)) {
        c->fetch_slot_waits++;
        fs->waiting++;
        fs->waiting_cls[cls]++;
        while (!slot_mine(c, fs, cls))
            pthread_cond_wait(&fs->cv, &c->fetch_mu);
        fs->waiting_cls[cls]--;
        fs->waiting--;
    }
    fs->passed_cls[cls] = 0;
    for (int k = cls + 1; k < TIER_IO_NCLASSES; k++)
        if (fs->waiting_cls[k] > 0)
            fs->passed_cls[k]++;
    fs->active++;
    if (++c->fetch_bufs_now > c->fetch_bufs_peak)
        c->fetch_bufs_peak = c->fetch_bufs_now;
    pthread_mutex_unlock(&c->fetch_mu);
    return fs;
}

/* The fetch is done (its buffer is the block's now, or freed): hand the slot on. */
static void fetch_slot_give(struct cache *c, struct fetch_slots *fs)
{
    pthread_mutex_lock(&c->fetch_mu);
    fs->active--;
    c->fetch_bufs_now--;
    if (fs->waiting) {
        pthread_cond_broadcast(&fs->cv); /* the most urgent class takes it: see slot_mine */
    } else if (!fs->active) {
        struct fetch_slots **pp = &c->fetch_slots;
        while (*pp != fs)
            pp = &(*pp)->next;
        *pp = fs->next;
        pthread_cond_destroy(&fs->cv);
        free(fs);
    }
    pthread_mutex_unlock(&c->fetch_mu);
}

static int backend_fetch(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                         uint64_t index, uint32_t len, struct cdata **out)
{
    struct cache_fetch_hook hook;
    pthread_mutex_lock(&c->hook_mu);
    hook = c->hook;
    pthread_mutex_unlock(&c->hook_mu);
    struct tier_ioctx dio = io ? *io : TIER_IOCTX_DEFAULT;

    /* The buffer is allocated only with a fetch slot (fetch_slot_take): fetches waiting for one
     * hold no block buffer. */
    int cls = (unsigned)dio.cls < TIER_IO_NCLASSES ? (int)dio.cls : TIER_IO_BACKGROUND;
    struct fetch_slots *fs = fetch_slot_take(c, obj->be, cls);
    if (hook.before)
        hook.before(hook.ud, &dio, obj, index, len);
    struct cdata *d = fs ? cdata_new(len) : NULL;
    uint64_t t0 = tier_now_mono_ns();
    ssize_t n = !d                ? -ENOMEM
                : obj->version_id ? backend_read_version(obj->be, &dio, obj->key, obj->version_id,
                                                         index * c->cfg.block_size, d->bytes, len,
                                                         obj->etag, NULL)
                                  : backend_read(obj->be, &dio, obj->key, index * c->cfg.block_size,
                                                 d->bytes, len, obj->etag, NULL);
    /* a version read the backend will not do (no versions, s3:GetObjectVersion denied, an id
     * it does not take): the current object, pinned to the same ETag, is the same bytes when it
     * has not changed (and -ESTALE when it has) */
    if (d && obj->version_id && (n == -EACCES || n == -ENOTSUP || n == -EINVAL))
        n = backend_read(obj->be, &dio, obj->key, index * c->cfg.block_size, d->bytes, len,
                         obj->etag, NULL);
    uint64_t dt = tier_now_mono_ns() - t0;
    if (fs)
        fetch_slot_give(c, fs);
    if (hook.after)
        hook.after(hook.ud, &dio, obj, index, n, dt);
    atomic_fetch_add_explicit(&c->fetches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->fetch_ns, dt, memory_order_relaxed);
    if (n >= 0 && (size_t)n != len) {
        tier_err_set("%s: short read of block %" PRIu64 " of '%s' (%zd of %u bytes)", obj->be->name,
                     index, obj->key, n, len);
        n = -EIO;
    }
    if (n < 0) {
        atomic_fetch_add_explicit(&c->fetch_errors, 1, memory_order_relaxed);
        cdata_unref(d);
        return (int)n;
    }
    atomic_fetch_add_explicit(&c->fetch_bytes, len, memory_order_relaxed);
    *out = d;
    return 0;
}

/* Shard lock held. Take a reference on b's published result (or its error). */
static int take_result(struct cblock *b, struct cdata **out)
{
    if (b->fetch_err)
        return b->fetch_err;
    *out = cdata_ref(b->ready_data);
    return 0;
}

/* Shard lock held: drop the published result once the loader is done and no waiter needs it. */
static void release_result(struct shard *s, struct cblock *b)
{
    if (b->ready && !(b->flags & B_FETCHING) && !b->nwaiters) {
        b->ready = false;
        cdata_unref(b->ready_data);
        b->ready_data = NULL;
        b->fetch_err = 0;
    }
    maybe_free(s, b);
}

/* Shard lock held, b in RAM; returns with it dropped. A RAM hit: take a reference on the buffer
 * and tell the policy (off_in_block/seq_len: the sequential-continuation rule). */
static struct cdata *ram_hit(struct cache *c, struct shard *s, struct cblock *b,
                             uint32_t off_in_block, uint32_t seq_len)
{
    struct cdata *d = cdata_ref(b->ram);
    bool count = off_in_block == 0 || off_in_block != b->next_off;
    b->next_off = off_in_block + seq_len;
    bool lru_hit = count && !policy_hit_lockfree(c->ram.pol);
    if (count && !lru_hit)
        policy_hit(c->ram.pol, &b->ram_node);
    if (lru_hit)
        b->refs++;
    pthread_mutex_unlock(&s->mu);
    if (lru_hit) {
        pthread_mutex_lock(&c->ram.mu);
        if (policy_contains(&b->ram_node))
            policy_hit(c->ram.pol, &b->ram_node);
        pthread_mutex_unlock(&c->ram.mu);
        pthread_mutex_lock(&s->mu);
        b->refs--;
        maybe_free(s, b);
        pthread_mutex_unlock(&s->mu);
    }
    atomic_fetch_add_explicit(&c->ram.hits, 1, memory_order_relaxed);
    return d;
}

/* Shard lock held, b loading or with a published result; returns with it dropped. Wait for the
 * load in flight (single-flight) and take its result or error. */
static int wait_loading(struct cache *c, struct shard *s, struct cblock *b, struct cdata **out,
                        bool *from_disk)
{
    atomic_fetch_add_explicit(&c->sf_waits, 1, memory_order_relaxed);
    b->nwaiters++;
    while (!b->ready)
        pthread_cond_wait(&s->cv, &s->mu);
    *from_disk = b->ready_from_disk;
    int r = take_result(b, out);
    b->nwaiters--;
    release_result(s, b);
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* Shard lock held; *bp is NULL (a miss: create the block) or a block cached on disk only.
 * Mark it FETCHING and hold it: this thread is its one loader (I6). Returns with the lock
 * dropped; *try_disk says whether there is a disk copy to load. */
static int block_acquire(struct cache *c, struct shard *s, const struct tier_ioctx *io,
                         const uint8_t id[16], const struct cache_obj *obj, uint64_t index,
                         uint32_t next_off, bool pinned, struct cblock **bp, bool *try_disk)
{
    struct cblock *b = *bp;
    uint32_t t = io ? io->tenant : TIER_TENANT_DEFAULT;
    uint32_t owner = t < c->cfg.max_tenants ? t : CACHE_OWNER_NOBODY;
    if (b && (b->ram || (b->flags & B_ON_DISK))) {
        owner_touch(c, b, io); /* a disk hit */
    } else if (b) {
        /* a struct that outlived its levels (someone still held it): this load caches it
         * anew, for this reader, as a new block would be (not charged: no list to leave) */
        pthread_mutex_lock(&c->own_mu);
        b->owner = owner;
        pthread_mutex_unlock(&c->own_mu);
    } else {
        b = cblock_new(id, obj->be->name, obj->key, obj->etag, index, block_len(c, obj, index));
        if (!b || shard_insert(s, b) < 0) {
            pthread_mutex_unlock(&s->mu);
            free(b);
            return -ENOMEM;
        }
        if (pinned)
            b->flags |= B_PINNED;
        b->owner = owner; /* unpublished until the shard lock drops: own_mu not needed */
    }
    b->flags |= B_FETCHING;
    b->refs++;
    b->next_off = next_off;
    *try_disk = (b->flags & B_ON_DISK) != 0;
    pthread_mutex_unlock(&s->mu);
    *bp = b;
    return 0;
}

/* No lock held; b is FETCHING and held. Load it from its disk copy if it has one, else from the
 * backend. Only a disk copy that is corrupt (-EBADMSG) or gone (-ENOENT) is dropped; any other
 * error of the disk read (EMFILE, ENOMEM, EIO ...) is transient and says nothing about the
 * file, so the copy stays and this one read is served from the backend. */
static int load_block(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                      struct cblock *b, bool try_disk, struct cdata **out, bool *from_backend)
{
    *from_backend = false;
    if (try_disk) {
        bool adm = tier_disk_enter(&c->adm, io, b->len, false) == 0; /* may wait */
        int r = disk_block_load(c->disk_dir, c->fds, c->cfg.block_size, b, out);
        if (adm)
            tier_disk_leave(&c->adm, io, b->len, r);
        if (r == 0) {
            /* a disk hit: tell the disk policy (b is held, so its node cannot go away) */
            pthread_mutex_lock(&c->disk.mu);
            if (policy_contains(&b->disk_node))
                policy_hit(c->disk.pol, &b->disk_node);
            pthread_mutex_unlock(&c->disk.mu);
            atomic_fetch_add_explicit(&c->disk.hits, 1, memory_order_relaxed);
            return 0;
        }
        if (r == -EBADMSG) {
            atomic_fetch_add_explicit(&c->csum_failures, 1, memory_order_relaxed);
            log_warn("cache: corrupt disk block %" PRIu64 " of %s/%s dropped, refetching", b->index,
                     b->be_name, b->key);
            disk_drop(c, b);
        } else if (r == -ENOENT) {
            log_warn("cache: disk block %" PRIu64 " of %s/%s vanished, refetching", b->index,
                     b->be_name, b->key);
            disk_drop(c, b);
        } else {
            /* at most one line a second: EMFILE or ENOMEM tends to hit every read at once */
            uint64_t now = tier_now_mono_ns(), last = atomic_load(&c->io_warn_ns);
            if (now - last >= TIER_NS_PER_SEC &&
                atomic_compare_exchange_strong(&c->io_warn_ns, &last, now))
                log_warn("cache: cannot read disk block %" PRIu64 " of %s/%s (%s); kept, "
                         "reading from the backend",
                         b->index, b->be_name, b->key, strerror(-r));
        }
    }
    if (c->disk_dir)
        atomic_fetch_add_explicit(&c->disk.misses, 1, memory_order_relaxed);
    int r = backend_fetch(c, io, obj, b->index, b->len, out);
    *from_backend = r == 0;
    return r;
}

/* No lock held; b is FETCHING and held by this loader. Publish the load's result r / d to the
 * waiters, then place d into RAM and (from the backend) write it through to disk while still
 * FETCHING, so that no second load can start before the block is findable in a level; then end
 * the load and let go of b. */
static void load_end(struct shard *s, struct cblock *b)
{
    pthread_mutex_lock(&s->mu);
    b->flags &= ~(unsigned)(B_FETCHING | B_STORE_CANCEL);
    b->refs--;
    pthread_cond_broadcast(&s->cv); /* wait_stored() */
    release_result(s, b);
    pthread_mutex_unlock(&s->mu);
}

/* No lock held; the block of id was just loaded by or for the caller. Wait until its load has
 * ended (a write-through queued by another reader's load is done), so that what the caller
 * checks next (is it cached? pin it, hold it) sees the block's levels as they end up. */
static void wait_stored(struct cache *c, const uint8_t id[16], const struct cache_obj *obj,
                        uint64_t index)
{
    struct shard *s = shard_of(c, id);
    pthread_mutex_lock(&s->mu);
    struct cblock *b = obj_lookup(c, s, id, obj, index, NULL);
    if (b && (b->flags & B_FETCHING) && b->ready) {
        b->refs++;
        while ((b->flags & B_FETCHING) && b->ready)
            pthread_cond_wait(&s->cv, &s->mu);
        b->refs--;
        maybe_free(s, b);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Hand the write-through of b (its load still open) to the writer thread; false when there is
 * none or its queue is full (the caller then stores it itself). */
static bool store_enqueue(struct cache *c, const struct tier_ioctx *io, struct shard *s,
                          struct cblock *b, struct cdata *d)
{
    if (!c->disk_dir || !c->disk.budget)
        return false;
    struct st_item *it = malloc(sizeof(*it));
    if (!it)
        return false;
    *it = (struct st_item){.s = s, .b = b, .d = cdata_ref(d), .io = io ? *io : TIER_IOCTX_DEFAULT};
    pthread_mutex_lock(&c->st_mu);
    bool ok = c->st_running && !c->st_stop && c->st_len < STORE_QUEUE &&
              (c->st_len == 0 || c->st_bytes + d->len <= STORE_QUEUE_BYTES);
    if (ok) {
        if (c->st_tail)
            c->st_tail->next = it;
        else
            c->st_head = it;
        c->st_tail = it;
        c->st_len++;
        c->st_bytes += d->len;
        c->st_queued++;
        pthread_cond_signal(&c->st_cv);
    }
    pthread_mutex_unlock(&c->st_mu);
    if (!ok) {
        cdata_unref(it->d);
        free(it);
        atomic_fetch_add_explicit(&c->store_inline_n, 1, memory_order_relaxed);
        return false;
    }
    atomic_fetch_add_explicit(&c->store_async_n, 1, memory_order_relaxed);
    return true;
}

/* The writer: stores queued blocks in order and ends their loads; at stop it empties the queue
 * first, so nothing fetched before cache_close is left unwritten. */
static void *st_worker(void *arg)
{
    struct cache *c = arg;
    pthread_mutex_lock(&c->st_mu);
    for (;;) {
        while (!c->st_head && !c->st_stop)
            pthread_cond_wait(&c->st_cv, &c->st_mu);
        if (!c->st_head)
            break; /* stopped, and nothing left */
        struct st_item *it = c->st_head;
        c->st_head = it->next;
        if (!c->st_head)
            c->st_tail = NULL;
        c->st_len--;
        c->st_bytes -= it->d->len;
        pthread_mutex_unlock(&c->st_mu);
        disk_store(c, &it->io, it->b, it->d);
        cdata_unref(it->d);
        load_end(it->s, it->b);
        /* the block may now count on disk for its tenant: trim it as its reader would have */
        quota_check(c, &it->io);
        free(it);
        pthread_mutex_lock(&c->st_mu);
        c->st_done++;
        pthread_cond_broadcast(&c->st_idle);
    }
    pthread_mutex_unlock(&c->st_mu);
    return NULL;
}

/* Wait until every write-through handed to the writer before this call is done (not those
 * queued since: a steady stream must not hold the caller). */
static void store_drain(struct cache *c)
{
    pthread_mutex_lock(&c->st_mu);
    uint64_t upto = c->st_queued;
    while (c->st_running && c->st_done < upto)
        pthread_cond_wait(&c->st_idle, &c->st_mu);
    pthread_mutex_unlock(&c->st_mu);
}

/* async: the write-through of a block from the backend may go to the writer thread
 * (cfg.store_async), which then ends the load. */
static void publish(struct cache *c, const struct tier_ioctx *io, struct shard *s, struct cblock *b,
                    int r, struct cdata *d, bool from_backend, bool async)
{
    pthread_mutex_lock(&s->mu);
    b->ready = true;
    b->fetch_err = r;
    b->ready_data = r == 0 ? cdata_ref(d) : NULL;
    b->ready_from_disk = r == 0 && !from_backend;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (r == 0) {
        ram_insert(c, b, d); /* not if it was dropped meanwhile (B_STORE_CANCEL) */
        if (from_backend) {
            if (async && c->cfg.store_async && store_enqueue(c, io, s, b, d))
                return; /* the writer ends the load */
            disk_store(c, io, b, d);
        }
    }
    load_end(s, b);
}

/*
 * Get block `index` of obj as a referenced buffer: ram_hit(), or wait_loading() for a load in
 * flight, or block_acquire() + load_block() (disk, else backend) + publish(). The one entry to
 * the data path. off_in_block/seq_len feed the sequential-continuation rule: a read that
 * continues exactly where the previous read of this block ended is not a new access for the
 * policy, so a sequential reader splitting a block into many small reads does not look "hot".
 * A block whose hash slot is held by another identity (a hash collision) is read from the
 * backend and not cached.
 */
static int block_get(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                     uint64_t index, uint32_t off_in_block, uint32_t seq_len, bool pinned,
                     bool async, struct cdata **out, struct level **from)
{
    *from = NULL;
    uint8_t id[16];
    int r = cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id);
    if (r < 0)
        return r;
    struct shard *s = shard_of(c, id);

    pthread_mutex_lock(&s->mu);
    bool collision;
    struct cblock *b = obj_lookup(c, s, id, obj, index, &collision);
    if (collision) {
        pthread_mutex_unlock(&s->mu);
        log_debug("cache: block %" PRIu64 " of %s/%s shares its hash with another block; read "
                  "uncached",
                  index, obj->be->name, obj->key);
        return backend_fetch(c, io, obj, index, block_len(c, obj, index), out);
    }
    if (b && b->ram) {
        owner_touch(c, b, io);
        *out = ram_hit(c, s, b, off_in_block, seq_len);
        *from = &c->ram;
        return 0;
    }
    if (b && (b->ready || (b->flags & B_FETCHING))) {
        /* the loader's level (NULL: the backend), so a waiter's served tier is right too */
        bool from_disk = false;
        r = wait_loading(c, s, b, out, &from_disk);
        if (r == 0 && from_disk)
            *from = &c->disk;
        return r;
    }
    bool try_disk;
    if ((r = block_acquire(c, s, io, id, obj, index, off_in_block + seq_len, pinned, &b,
                           &try_disk)) < 0)
        return r;
    if (c->ram.budget)
        atomic_fetch_add_explicit(&c->ram.misses, 1, memory_order_relaxed);

    struct cdata *d = NULL;
    bool from_backend;
    r = load_block(c, io, obj, b, try_disk, &d, &from_backend);
    publish(c, io, s, b, r, d, from_backend, async);
    if (r == 0) {
        *out = d;
        *from = from_backend ? NULL : &c->disk;
    }
    return r;
}

/*
 * RAM-less disk hit (fast path): with no RAM level to promote into, a block on disk is read
 * straight into the caller's buffer, only the 64 KiB chunks asked for, each verified, with no
 * single-flight load and no intermediate copy. Returns 0 on a hit, else < 0 and the caller takes
 * the normal path (which also handles a checksum failure: drop, count, refetch).
 */
static int disk_direct(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                       uint64_t index, uint32_t in, uint32_t n, void *dst)
{
    if (c->ram.budget || !c->disk_dir)
        return -EAGAIN;
    uint8_t id[16];
    if (cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id) < 0)
        return -EAGAIN;
    struct shard *s = shard_of(c, id);
    pthread_mutex_lock(&s->mu);
    struct cblock *b = obj_lookup(c, s, id, obj, index, NULL);
    if (!b || !(b->flags & B_ON_DISK) || (b->flags & B_FETCHING)) {
        pthread_mutex_unlock(&s->mu);
        return -EAGAIN;
    }
    owner_touch(c, b, io);
    bool count = in == 0 || in != b->next_off;
    b->next_off = in + n;
    bool lockfree = policy_hit_lockfree(c->disk.pol);
    if (count && lockfree)
        policy_hit(c->disk.pol, &b->disk_node);
    b->refs++;
    pthread_mutex_unlock(&s->mu);
    bool adm = tier_disk_enter(&c->adm, io, n, false) == 0; /* may wait */
    int r = disk_block_read_range(c->disk_dir, c->fds, c->cfg.block_size, b, in, n, dst);
    if (adm)
        tier_disk_leave(&c->adm, io, n, r);
    if (r == 0 && count && !lockfree) {
        pthread_mutex_lock(&c->disk.mu);
        if (policy_contains(&b->disk_node))
            policy_hit(c->disk.pol, &b->disk_node);
        pthread_mutex_unlock(&c->disk.mu);
    }
    pthread_mutex_lock(&s->mu);
    b->refs--;
    maybe_free(s, b);
    pthread_mutex_unlock(&s->mu);
    if (r == 0) {
        atomic_fetch_add_explicit(&c->disk.hits, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->disk.bytes_read, n, memory_order_relaxed);
    }
    return r;
}

static bool obj_ok(const struct cache_obj *obj)
{
    return obj && obj->be && obj->be->name && obj->key && obj->etag;
}

static bool obj_pinned(struct cache *c, const struct cache_obj *obj)
{
    pthread_mutex_lock(&c->pin_mu);
    bool p = c->rules && rules_match(c, obj->be->name, obj->key);
    pthread_mutex_unlock(&c->pin_mu);
    return p;
}

ssize_t cache_read(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                   uint64_t off, void *buf, size_t len)
{
    return cache_read_served(c, io, obj, off, buf, len, NULL);
}

ssize_t cache_read_served(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                          uint64_t off, void *buf, size_t len, enum cache_served *served)
{
    enum cache_served worst = CACHE_SERVED_RAM;
    if (served)
        *served = CACHE_SERVED_RAM;
    if (!c || !obj_ok(obj) || (!buf && len))
        return -EINVAL;
    if (off >= obj->size_bytes || !len)
        return 0;
    if (len > obj->size_bytes - off)
        len = (size_t)(obj->size_bytes - off);
    bool pinned = obj_pinned(c, obj);
    size_t done = 0;
    while (done < len) {
        uint64_t pos = off + done;
        uint64_t index = pos / c->cfg.block_size;
        uint32_t in = (uint32_t)(pos % c->cfg.block_size);
        uint32_t blen = block_len(c, obj, index);
        size_t n = blen - in;
        if (n > len - done)
            n = len - done;
        if (disk_direct(c, io, obj, index, in, (uint32_t)n, (char *)buf + done) == 0) {
            if (worst < CACHE_SERVED_DISK)
                worst = CACHE_SERVED_DISK;
            done += n;
            continue;
        }
        struct cdata *d = NULL;
        struct level *from = NULL;
        int r = block_get(c, io, obj, index, in, (uint32_t)n, pinned, true, &d, &from);
        /* A failure part-way is the whole read's failure: a short count means end of object
         * to the kernel, which would then shrink the file's size (a silent truncation). The
         * blocks it cached before count all the same. */
        if (r < 0) {
            quota_check(c, io);
            return r;
        }
        memcpy((char *)buf + done, d->bytes + in, n);
        if (from)
            atomic_fetch_add_explicit(&from->bytes_read, n, memory_order_relaxed);
        /* No level: fetched from the backend, by this read or by the load it waited for. */
        enum cache_served got = from == &c->ram    ? CACHE_SERVED_RAM
                                : from == &c->disk ? CACHE_SERVED_DISK
                                                   : CACHE_SERVED_BACKEND;
        if (got > worst)
            worst = got;
        cdata_unref(d);
        done += n;
    }
    quota_check(c, io);
    if (served)
        *served = worst;
    return (ssize_t)done;
}

/* No lock held; the block of id was just pinned or hinted. Such a block leaves RAM only once it
 * is on disk (I5, I10), so a write-through the disk lane refused when it loaded (try) is made
 * now, waiting for the lane: else it would stay in RAM for good. */
static void store_held(struct cache *c, const struct tier_ioctx *io, const uint8_t id[16],
                       const struct cache_obj *obj, uint64_t index)
{
    if (!c->disk_dir || !c->disk.budget)
        return;
    struct shard *s = shard_of(c, id);
    pthread_mutex_lock(&s->mu);
    struct cblock *b = obj_lookup(c, s, id, obj, index, NULL);
    struct cdata *d = NULL;
    if (b && b->ram && (b->flags & (B_PINNED | B_HINTED)) &&
        !(b->flags & (B_ON_DISK | B_DISK_IO | B_FETCHING))) {
        d = cdata_ref(b->ram);
        b->refs++;
    }
    pthread_mutex_unlock(&s->mu);
    if (!d)
        return;
    disk_store(c, io, b, d); /* must: it is pinned or hinted */
    cdata_unref(d);
    pthread_mutex_lock(&s->mu);
    b->refs--;
    maybe_free(s, b);
    pthread_mutex_unlock(&s->mu);
}

/* cache_fetch_block; async: its write-through may go to the writer (a prefetch's). */
static int fetch_block(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                       uint64_t index, bool pin, bool async)
{
    if (!c || !obj_ok(obj))
        return -EINVAL;
    if (index * c->cfg.block_size >= obj->size_bytes)
        return obj->size_bytes == 0 && index == 0 ? 0 : -EINVAL;
    struct cdata *d = NULL;
    struct level *from = NULL;
    int r = block_get(c, io, obj, index, 0, block_len(c, obj, index), obj_pinned(c, obj),
                      async && !pin, &d, &from);
    if (r < 0) {
        quota_check(c, io);
        return r;
    }
    cdata_unref(d);
    if (!pin) {
        quota_check(c, io);
        return 0;
    }
    /* pin first, then trim the tenant: the block just fetched leaves its charge by the pin
     * instead of being the quota's victim (then the pin would find nothing cached) */
    uint8_t id[16];
    cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id);
    wait_stored(c, id, obj, index); /* another reader's load may still be writing it */
    struct shard *s = shard_of(c, id);
    /* a cached block is pinned only under both level locks, so an evictor holding them
     * (cache_evict, quota_evict_one) never takes a block pinned meanwhile */
    pthread_mutex_lock(&c->ram.mu);
    pthread_mutex_lock(&c->disk.mu);
    pthread_mutex_lock(&s->mu);
    struct cblock *b = obj_lookup(c, s, id, obj, index, NULL);
    r = -ENOSPC; /* not cached at all: the levels had no room */
    if (b && (b->ram || (b->flags & B_ON_DISK))) {
        if (b->flags & B_PINNED) {
            b->flags |= B_PIN_EXPLICIT;
            r = 0;
        } else {
            bool before = pin_counted(b);
            b->flags |= B_PINNED | B_PIN_EXPLICIT;
            acct_update(c, b, before);
            r = (b->flags & B_PINNED) ? 0 : -ENOSPC;
        }
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&c->disk.mu);
    pthread_mutex_unlock(&c->ram.mu);
    if (r == 0)
        store_held(c, io, id, obj, index);
    quota_check(c, io);
    return r;
}

int cache_fetch_block(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                      uint64_t index, bool pin)
{
    return fetch_block(c, io, obj, index, pin, false);
}

/* ---- hinted blocks (I10) ------------------------------------------------------------------- */

int cache_fetch_block_hinted(struct cache *c, const struct tier_ioctx *io,
                             const struct cache_obj *obj, uint64_t index)
{
    if (!c || !obj_ok(obj))
        return -EINVAL;
    if (index * c->cfg.block_size >= obj->size_bytes)
        return obj->size_bytes == 0 && index == 0 ? 0 : -EINVAL;
    struct cdata *d = NULL;
    struct level *from = NULL;
    int r = block_get(c, io, obj, index, 0, block_len(c, obj, index), obj_pinned(c, obj), false, &d,
                      &from);
    if (r == 0) {
        cdata_unref(d);
        /* hold it before the tenant is trimmed, as a pin is (cache_fetch_block) */
        uint8_t id[16];
        cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id);
        wait_stored(c, id, obj, index); /* another reader's load may still be writing it */
        struct shard *s = shard_of(c, id);
        pthread_mutex_lock(&c->ram.mu); /* like B_PINNED: set on cached blocks under both */
        pthread_mutex_lock(&c->disk.mu);
        pthread_mutex_lock(&s->mu);
        struct cblock *b = obj_lookup(c, s, id, obj, index, NULL);
        r = -ENOSPC; /* not cached at all: the levels had no room */
        uint32_t t = io ? io->tenant : TIER_TENANT_DEFAULT;
        if (b && (b->ram || (b->flags & B_ON_DISK))) {
            r = 0;
            if (b->nhints == UINT16_MAX) {
                r = -EOVERFLOW;
            } else if (b->nhints == 0 && atomic_load(&c->hinted_bytes) + b->len > c->hinted_max) {
                r = -EDQUOT; /* the hint share is full: cached, not held */
            } else if (b->nhints > 0 && t < c->cfg.max_tenants && b->owner != t) {
                r = -EEXIST; /* held for another tenant, who pays for it: no second payer */
            } else if (b->nhints++ == 0) {
                b->flags |= B_HINTED;
                atomic_fetch_add(&c->hinted_bytes, b->len);
                /* held for the hinting tenant: charged to it, not to whoever cached it */
                if (t < c->cfg.max_tenants && b->owner != t)
                    charge_move(c, b, t);
                charge_sync(c, b);
            }
        }
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_unlock(&c->disk.mu);
        pthread_mutex_unlock(&c->ram.mu);
        if (r == 0)
            store_held(c, io, id, obj, index);
    }
    quota_check(c, io);
    return r;
}

uint64_t cache_hint_release(struct cache *c, const struct cache_obj *obj, bool evict)
{
    if (!c || !obj_ok(obj))
        return 0;
    uint64_t released = 0;
    uint64_t nblocks = (obj->size_bytes + c->cfg.block_size - 1) / c->cfg.block_size;
    for (uint64_t i = 0; i < nblocks; i++) {
        uint8_t id[16];
        if (cache_block_id(c, obj->be->name, obj->key, obj->etag, i, id) < 0)
            break;
        struct shard *s = shard_of(c, id);
        struct cblock *list = NULL;
        struct cdata *drop = NULL;
        pthread_mutex_lock(&c->ram.mu);
        pthread_mutex_lock(&c->disk.mu);
        pthread_mutex_lock(&s->mu);
        struct cblock *b = obj_lookup(c, s, id, obj, i, NULL);
        bool take = false;
        if (b && b->nhints > 0 && --b->nhints == 0) { /* the last hold goes */
            b->flags &= ~(unsigned)B_HINTED;
            atomic_fetch_sub(&c->hinted_bytes, b->len);
            charge_sync(c, b);
            released += b->len;
            take = evict && !(b->flags & B_PINNED);
            if (take)
                b->refs++;
        }
        pthread_mutex_unlock(&s->mu);
        if (take)
            drop = drop_held(c, s, b, &list);
        pthread_mutex_unlock(&c->disk.mu);
        pthread_mutex_unlock(&c->ram.mu);
        finish_unlinks(c, list);
        cdata_unref(drop);
    }
    return released;
}

/* ---- pin / evict / accounting ------------------------------------------------------------ */

bool cache_pin_exists(struct cache *c, const char *backend_name, const char *prefix)
{
    if (!c || !backend_name || !prefix)
        return false;
    bool found = false;
    pthread_mutex_lock(&c->pin_mu);
    for (struct pin_rule *x = c->rules; x && !found; x = x->next)
        found = !strcmp(x->be_name, backend_name) && !strcmp(x->prefix, prefix);
    pthread_mutex_unlock(&c->pin_mu);
    return found;
}

int cache_pin(struct cache *c, const char *backend_name, const char *prefix)
{
    if (!c || !backend_name || !prefix)
        return -EINVAL;
    int r = 0;
    size_t nrules = 0;
    pthread_mutex_lock(&c->pin_mu);
    for (struct pin_rule *x = c->rules; x; x = x->next, nrules++)
        if (!strcmp(x->be_name, backend_name) && !strcmp(x->prefix, prefix))
            goto out;
    /* every cache_read walks the rules under pin_mu: keep the list short */
    if (nrules >= CACHE_PIN_RULES_MAX) {
        tier_err_set("%zu pin rules exist already (at most %d): unpin some, or pin a common "
                     "parent directory instead",
                     nrules, CACHE_PIN_RULES_MAX);
        r = -EDQUOT;
        goto out;
    }
    uint64_t extra = 0;
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets; k++)
            for (struct cblock *b = s->buckets[k]; b; b = b->hnext)
                if (prefix_match(b, backend_name, prefix) && !(b->flags & B_PINNED) &&
                    (b->ram || (b->flags & B_ON_DISK)))
                    extra += b->len;
        pthread_mutex_unlock(&s->mu);
    }
    if (atomic_load(&c->pinned_bytes) + extra > c->cfg.pin_bytes) {
        tier_err_set("pinning %s:%s needs %" PRIu64 " more bytes, over the pin budget of %" PRIu64,
                     backend_name, prefix, extra, c->cfg.pin_bytes);
        r = -ENOSPC;
        goto out;
    }
    struct pin_rule *rule = calloc(1, sizeof(*rule));
    if (!rule || !(rule->be_name = strdup(backend_name)) || !(rule->prefix = strdup(prefix))) {
        if (rule) {
            free(rule->be_name);
            free(rule);
        }
        r = -ENOMEM;
        goto out;
    }
    rule->next = c->rules;
    c->rules = rule;
    pthread_mutex_lock(&c->ram.mu); /* pinning cached blocks: under both level locks */
    pthread_mutex_lock(&c->disk.mu);
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets; k++) {
            for (struct cblock *b = s->buckets[k]; b; b = b->hnext) {
                if (!prefix_match(b, backend_name, prefix) || (b->flags & B_PINNED))
                    continue;
                bool before = pin_counted(b);
                b->flags |= B_PINNED;
                acct_update(c, b, before);
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&c->disk.mu);
    pthread_mutex_unlock(&c->ram.mu);
out:
    pthread_mutex_unlock(&c->pin_mu);
    return r;
}

int cache_unpin(struct cache *c, const char *backend_name, const char *prefix)
{
    if (!c || !backend_name || !prefix)
        return -EINVAL;
    pthread_mutex_lock(&c->pin_mu);
    struct pin_rule **pp = &c->rules;
    while (*pp && (strcmp((*pp)->be_name, backend_name) || strcmp((*pp)->prefix, prefix)))
        pp = &(*pp)->next;
    struct pin_rule *rule = *pp;
    if (rule) {
        *pp = rule->next;
        free(rule->be_name);
        free(rule->prefix);
        free(rule);
    }
    /* Also clears explicit pins (cache_fetch_block(pin=true)) under the prefix. */
    bool any = rule != NULL;
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets; k++) {
            for (struct cblock *b = s->buckets[k]; b; b = b->hnext) {
                if (!(b->flags & B_PINNED) || !prefix_match(b, backend_name, prefix))
                    continue;
                if (rules_match(c, b->be_name, b->key))
                    continue;
                any = true;
                bool before = pin_counted(b);
                b->flags &= ~(unsigned)(B_PINNED | B_PIN_EXPLICIT);
                acct_update(c, b, before);
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&c->pin_mu);
    /* unpinned blocks are charged again: trim every tenant now over its quota */
    for (unsigned t = 0; t < c->cfg.max_tenants; t++) {
        const struct tier_ioctx io = {.tenant = t, .cls = TIER_IO_BACKGROUND};
        quota_check(c, &io);
    }
    return any ? 0 : -ENOENT;
}

long cache_evict(struct cache *c, const char *backend_name, const char *prefix)
{
    if (!c || !backend_name || !prefix)
        return -EINVAL;
    store_drain(c); /* a write-through still queued would bring a block back after this */
    long count = 0;
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        struct cblock *list = NULL, *ram_list = NULL;
        pthread_mutex_lock(&c->ram.mu);
        pthread_mutex_lock(&c->disk.mu);
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets; k++) {
            for (struct cblock *b = s->buckets[k]; b; b = b->hnext) {
                if ((b->flags & B_PINNED) || !prefix_match(b, backend_name, prefix))
                    continue;
                if (!b->ram && !(b->flags & B_ON_DISK))
                    continue;
                /* collect first: the level helpers take the shard lock themselves */
                b->refs++;
                b->enext = ram_list;
                ram_list = b;
                count++;
            }
        }
        pthread_mutex_unlock(&s->mu);
        for (struct cblock *b = ram_list, *nx; b; b = nx) {
            nx = b->enext;
            cdata_unref(drop_held(c, s, b, &list)); /* free() only: no I/O under the locks */
        }
        pthread_mutex_unlock(&c->disk.mu);
        pthread_mutex_unlock(&c->ram.mu);
        finish_unlinks(c, list);
    }
    return count;
}

/* A referenced block and, for a RAM demotion, its RAM buffer (cache_demote). */
struct demote_item {
    struct cblock *b;
    struct cdata *d;
};

static long demote_ram(struct cache *c, struct shard *s, struct demote_item *v, size_t n)
{
    static const struct tier_ioctx io = {.tenant = TIER_TENANT_DEFAULT, .cls = TIER_IO_BACKGROUND};
    long moved = 0;
    for (size_t i = 0; i < n; i++) {
        struct cblock *b = v[i].b;
        pthread_mutex_lock(&s->mu);
        bool on = (b->flags & B_ON_DISK) != 0;
        pthread_mutex_unlock(&s->mu);
        if (!on)
            disk_store(c, &io, b, v[i].d); /* a no-op without a disk level or room */
        struct cdata *drop = NULL;
        /* disk.mu too: a disk eviction (disk_reserve holds only disk.mu) must not take the disk
         * copy between this check and the RAM copy's removal */
        pthread_mutex_lock(&c->ram.mu);
        pthread_mutex_lock(&c->disk.mu);
        pthread_mutex_lock(&s->mu);
        on = (b->flags & B_ON_DISK) != 0;
        pthread_mutex_unlock(&s->mu);
        if (on && b->ram) { /* b->ram changes only under ram.mu (I2), held */
            drop = ram_remove(c, b, false);
            moved++;
        }
        pthread_mutex_unlock(&c->disk.mu);
        pthread_mutex_unlock(&c->ram.mu);
        cdata_unref(drop);
        cdata_unref(v[i].d);
    }
    return moved;
}

static long demote_disk(struct cache *c, struct shard *s, struct demote_item *v, size_t n)
{
    long dropped = 0;
    struct cblock *list = NULL;
    pthread_mutex_lock(&c->disk.mu);
    for (size_t i = 0; i < n; i++) {
        struct cblock *b = v[i].b;
        pthread_mutex_lock(&s->mu);
        /* ON_DISK is set and cleared under disk.mu, held: still true at disk_detach */
        bool on = (b->flags & B_ON_DISK) && !(b->flags & (B_PINNED | B_HINTED));
        pthread_mutex_unlock(&s->mu);
        if (on) {
            disk_detach(c, b, false, &list);
            dropped++;
        }
    }
    pthread_mutex_unlock(&c->disk.mu);
    finish_unlinks(c, list);
    return dropped;
}

long cache_demote(struct cache *c, const char *backend_name, const char *prefix,
                  enum cache_level from)
{
    if (!c || !backend_name || !prefix || (from != CACHE_LEVEL_RAM && from != CACHE_LEVEL_DISK))
        return -EINVAL;
    store_drain(c); /* a queued write-through is a disk copy about to exist */
    long count = 0;
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        struct demote_item *v = NULL;
        size_t n = 0, cap = 0;
        int rc = 0;
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets && !rc; k++) {
            for (struct cblock *b = s->buckets[k]; b && !rc; b = b->hnext) {
                if ((b->flags & B_PINNED) || !prefix_match(b, backend_name, prefix))
                    continue;
                if (from == CACHE_LEVEL_RAM ? !b->ram
                                            : !(b->flags & B_ON_DISK) || (b->flags & B_HINTED))
                    continue;
                if (n == cap) {
                    size_t nc = cap ? 2 * cap : 16;
                    struct demote_item *nv = realloc(v, nc * sizeof(*v));
                    if (!nv) {
                        rc = -ENOMEM;
                        break;
                    }
                    v = nv;
                    cap = nc;
                }
                b->refs++;
                v[n++] =
                    (struct demote_item){b, from == CACHE_LEVEL_RAM ? cdata_ref(b->ram) : NULL};
            }
        }
        pthread_mutex_unlock(&s->mu);
        count += from == CACHE_LEVEL_RAM ? demote_ram(c, s, v, n) : demote_disk(c, s, v, n);
        pthread_mutex_lock(&s->mu);
        for (size_t j = 0; j < n; j++) {
            v[j].b->refs--;
            maybe_free(s, v[j].b);
        }
        pthread_mutex_unlock(&s->mu);
        free(v);
        if (rc)
            return rc;
    }
    return count;
}

size_t cache_block_size(const struct cache *c)
{
    return c->cfg.block_size;
}

/* The bytes of obj's blocks that have a copy in RAM (want 1), on disk (2), or either (3). */
static uint64_t obj_bytes(struct cache *c, const struct cache_obj *obj, unsigned want)
{
    if (!c || !obj_ok(obj))
        return 0;
    uint64_t total = 0;
    uint64_t nblocks = (obj->size_bytes + c->cfg.block_size - 1) / c->cfg.block_size;
    for (uint64_t i = 0; i < nblocks; i++) {
        uint8_t id[16];
        if (cache_block_id(c, obj->be->name, obj->key, obj->etag, i, id) < 0)
            return 0;
        struct shard *s = shard_of(c, id);
        pthread_mutex_lock(&s->mu);
        struct cblock *b = obj_lookup(c, s, id, obj, i, NULL);
        if (b && (((want & 1) && b->ram) || ((want & 2) && (b->flags & B_ON_DISK))))
            total += b->len;
        pthread_mutex_unlock(&s->mu);
    }
    return total;
}

uint64_t cache_cached_bytes(struct cache *c, const struct cache_obj *obj)
{
    return obj_bytes(c, obj, 3);
}

uint64_t cache_level_bytes(struct cache *c, const struct cache_obj *obj, enum cache_level l)
{
    return obj_bytes(c, obj, l == CACHE_LEVEL_RAM ? 1 : l == CACHE_LEVEL_DISK ? 2 : 0);
}

static void level_stats(struct level *l, struct cache_level_stats *o)
{
    pthread_mutex_lock(&l->mu);
    o->bytes_used = l->used;
    o->blocks = l->pol ? policy_count(l->pol) : 0;
    pthread_mutex_unlock(&l->mu);
    o->bytes_budget = l->budget;
    o->hits = atomic_load(&l->hits);
    o->misses = atomic_load(&l->misses);
    o->evictions = atomic_load(&l->evictions);
    o->bytes_read = atomic_load(&l->bytes_read);
}

void cache_stats_get(struct cache *c, struct cache_stats *st)
{
    memset(st, 0, sizeof(*st));
    level_stats(&c->ram, &st->ram);
    level_stats(&c->disk, &st->disk);
    st->fetches = atomic_load(&c->fetches);
    st->fetch_bytes = atomic_load(&c->fetch_bytes);
    st->fetch_errors = atomic_load(&c->fetch_errors);
    st->fetch_ns_total = atomic_load(&c->fetch_ns);
    st->singleflight_waits = atomic_load(&c->sf_waits);
    pthread_mutex_lock(&c->fetch_mu);
    st->fetch_buffers_now = c->fetch_bufs_now;
    st->fetch_buffers_peak = c->fetch_bufs_peak;
    st->fetch_slot_waits = c->fetch_slot_waits;
    pthread_mutex_unlock(&c->fetch_mu);
    st->max_fetches = (uint64_t)c->cfg.max_fetches;
    st->pinned_bytes = atomic_load(&c->pinned_bytes);
    st->pin_budget = c->cfg.pin_bytes;
    st->checksum_failures = atomic_load(&c->csum_failures);
    st->disk_store_skipped = atomic_load(&c->store_skipped);
    st->disk_store_async = atomic_load(&c->store_async_n);
    st->disk_store_inline = atomic_load(&c->store_inline_n);
    st->quota_evictions = atomic_load(&c->quota_evictions);
    st->hinted_bytes = atomic_load(&c->hinted_bytes);
    struct disk_fdcache_stats fs;
    disk_fdcache_stats_get(c->fds, &fs);
    st->disk_fd_hits = fs.hits;
    st->disk_fd_opens = fs.opens;
    pthread_mutex_lock(&c->own_mu);
    for (unsigned t = 0; t < c->cfg.max_tenants; t++)
        st->charged_bytes += atomic_load(&c->qt[t].held) + atomic_load(&c->qt[t].hinted);
    pthread_mutex_unlock(&c->own_mu);
}

void cache_set_fetch_hook(struct cache *c, const struct cache_fetch_hook *hook)
{
    pthread_mutex_lock(&c->hook_mu);
    if (hook)
        c->hook = *hook;
    else
        memset(&c->hook, 0, sizeof(c->hook));
    pthread_mutex_unlock(&c->hook_mu);
}

/* ---- prefetch ----------------------------------------------------------------------------- */

static void pf_item_free(struct pf_item *it)
{
    if (!it)
        return;
    free(it->key);
    free(it->etag);
    free(it->version_id);
    free(it);
}

static void *pf_worker(void *arg)
{
    struct cache *c = arg;
    pthread_mutex_lock(&c->pf_mu);
    for (;;) {
        while (!c->pf_head && !c->pf_stop)
            pthread_cond_wait(&c->pf_cv, &c->pf_mu);
        if (c->pf_stop)
            break;
        struct pf_item *it = c->pf_head;
        c->pf_head = it->next;
        if (!c->pf_head)
            c->pf_tail = NULL;
        c->pf_len--;
        pthread_mutex_unlock(&c->pf_mu);
        struct cache_obj obj = {.be = it->be,
                                .key = it->key,
                                .etag = it->etag,
                                .size_bytes = it->size,
                                .version_id = it->version_id};
        int r = fetch_block(c, &it->io, &obj, it->index, false, true);
        if (r < 0)
            log_debug("cache: prefetch of block %" PRIu64 " of %s failed: %s", it->index, it->key,
                      strerror(-r));
        pf_item_free(it);
        pthread_mutex_lock(&c->pf_mu);
    }
    pthread_mutex_unlock(&c->pf_mu);
    return NULL;
}

static bool block_present(struct cache *c, const struct cache_obj *obj, uint64_t index)
{
    uint8_t id[16];
    if (cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id) < 0)
        return true;
    struct shard *s = shard_of(c, id);
    pthread_mutex_lock(&s->mu);
    struct cblock *b = obj_lookup(c, s, id, obj, index, NULL);
    bool present = b && (b->ram || (b->flags & (B_ON_DISK | B_FETCHING)));
    pthread_mutex_unlock(&s->mu);
    return present;
}

uint64_t cache_prefetch(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                        uint64_t first, uint64_t count)
{
    return cache_prefetch_owned(c, io, obj, first, count, NULL);
}

void cache_prefetch_cancel(struct cache *c, const void *owner)
{
    if (!c || !owner)
        return;
    struct pf_item *gone = NULL;
    pthread_mutex_lock(&c->pf_mu);
    struct pf_item **pp = &c->pf_head, *prev = NULL;
    while (*pp) {
        struct pf_item *it = *pp;
        if (it->owner == owner) {
            *pp = it->next;
            c->pf_len--;
            it->next = gone;
            gone = it;
        } else {
            prev = it;
            pp = &it->next;
        }
    }
    c->pf_tail = prev;
    pthread_mutex_unlock(&c->pf_mu);
    while (gone) {
        struct pf_item *nx = gone->next;
        pf_item_free(gone);
        gone = nx;
    }
}

uint64_t cache_prefetch_owned(struct cache *c, const struct tier_ioctx *io,
                              const struct cache_obj *obj, uint64_t first, uint64_t count,
                              const void *owner)
{
    if (!c || !obj_ok(obj) || !c->pf_nthreads)
        return 0;
    uint64_t nblocks = (obj->size_bytes + c->cfg.block_size - 1) / c->cfg.block_size;
    uint64_t i = first;
    for (; i < nblocks && i - first < count; i++) {
        if (block_present(c, obj, i))
            continue;
        pthread_mutex_lock(&c->pf_mu);
        bool full = c->pf_len >= PREFETCH_QUEUE || c->pf_stop;
        pthread_mutex_unlock(&c->pf_mu);
        if (full)
            break; /* advisory: drop the rest */
        struct pf_item *it = calloc(1, sizeof(*it));
        if (!it || !(it->key = strdup(obj->key)) || !(it->etag = strdup(obj->etag)) ||
            (obj->version_id && !(it->version_id = strdup(obj->version_id)))) {
            pf_item_free(it);
            break;
        }
        it->be = obj->be;
        it->size = obj->size_bytes;
        it->index = i;
        it->io = io ? *io : TIER_IOCTX_DEFAULT;
        it->owner = owner;
        pthread_mutex_lock(&c->pf_mu);
        if (c->pf_len >= PREFETCH_QUEUE || c->pf_stop) {
            pthread_mutex_unlock(&c->pf_mu);
            pf_item_free(it);
            break;
        }
        if (c->pf_tail)
            c->pf_tail->next = it;
        else
            c->pf_head = it;
        c->pf_tail = it;
        c->pf_len++;
        pthread_cond_signal(&c->pf_cv);
        pthread_mutex_unlock(&c->pf_mu);
    }
    return i > first ? i - first : 0;
}

/* ---- open / close ------------------------------------------------------------------------ */

/* Called by disk_scan() for each valid block file found at open (single-threaded). */
int cache_adopt_disk_block(struct cache *c, struct cblock *b, uint64_t file_bytes)
{
    struct shard *s = shard_of(c, b->id);
    if (shard_lookup(s, b->id))
        return -EEXIST;
    int r = shard_insert(s, b);
    if (r < 0)
        return r;
    b->flags |= B_ON_DISK;
    b->disk_node.size = file_bytes;
    policy_insert(c->disk.pol, &b->disk_node);
    c->disk.used += file_bytes;
    return 0;
}

/* Block files kept open for disk hits: DISK_OPEN_FILES, but no more than an eighth of the fd
 * limit (a container's limit may be 1024: sockets, uploads and pidfds need theirs). */
static unsigned disk_open_files(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 8 < DISK_OPEN_FILES)
        return rl.rlim_cur / 8 ? (unsigned)(rl.rlim_cur / 8) : 1;
    return DISK_OPEN_FILES;
}

static int level_init(struct level *l, enum cache_policy_kind kind, uint64_t budget)
{
    pthread_mutex_init(&l->mu, NULL);
    l->budget = budget;
    return policy_new(kind, budget, &l->pol);
}

int cache_open(const struct cache_config *cfg, struct cache **out)
{
    if (!cfg || !out)
        return -EINVAL;
    struct cache_config k = *cfg;
    if (!k.block_size)
        k.block_size = 4u << 20;
    if (k.block_size < (64u << 10) || k.block_size > (64u << 20)) {
        tier_err_set("cache block_size %zu out of range (64 KiB..64 MiB)", k.block_size);
        return -EINVAL;
    }
    if (!k.max_tenants)
        k.max_tenants = CACHE_TENANTS_DEFAULT;
    if (k.max_tenants > CACHE_TENANTS_MAX) {
        tier_err_set("cache max_tenants %u out of range (1..%u)", k.max_tenants, CACHE_TENANTS_MAX);
        return -EINVAL;
    }
    if (!k.max_fetches)
        k.max_fetches = MAX_FETCHES_DEFAULT;
    if (k.max_fetches < 1 || k.max_fetches > 4096) {
        tier_err_set("cache max_fetches %d out of range (1..4096)", k.max_fetches);
        return -EINVAL;
    }
    struct cache *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int r = 0;
    c->lock_fd = -1;
    c->cfg = k;
    if (k.disk_adm)
        c->adm = *k.disk_adm;
    c->cfg.disk_adm = NULL; /* c->adm is the copy in use */
    c->cfg.disk_dir = NULL;
    pthread_mutex_init(&c->fetch_mu, NULL);
    pthread_mutex_init(&c->own_mu, NULL);
    c->qt = calloc(k.max_tenants, sizeof(*c->qt));
    if (!c->qt) {
        free(c);
        return -ENOMEM;
    }
    for (unsigned t = 0; t < k.max_tenants; t++)
        atomic_init(&c->qt[t].limit, k.default_quota ? k.default_quota : UINT64_MAX);
    /* three quarters of the smaller level unless configured lower: hints never make a level
     * unevictable, a quarter stays for everyone else's blocks */
    uint64_t small = k.ram_bytes;
    if (k.disk_dir && k.disk_bytes && (!small || k.disk_bytes < small))
        small = k.disk_bytes;
    uint64_t share = small / 4 * 3;
    c->hinted_max = k.hinted_max && k.hinted_max < share ? k.hinted_max : share;
    pthread_mutex_init(&c->pin_mu, NULL);
    pthread_mutex_init(&c->hook_mu, NULL);
    pthread_mutex_init(&c->pf_mu, NULL);
    pthread_cond_init(&c->pf_cv, NULL);
    pthread_mutex_init(&c->st_mu, NULL);
    pthread_cond_init(&c->st_cv, NULL);
    pthread_cond_init(&c->st_idle, NULL);
    for (int i = 0; i < NSHARDS; i++) {
        pthread_mutex_init(&c->shards[i].mu, NULL);
        pthread_cond_init(&c->shards[i].cv, NULL);
    }
    if (!k.disk_dir && getrandom(c->secret, sizeof(c->secret), 0) != (ssize_t)sizeof(c->secret)) {
        r = errno ? -errno : -EIO;
        tier_err_set("cannot draw a random cache secret: %s", strerror(-r));
        goto fail;
    }
    if ((r = level_init(&c->ram, k.policy, k.ram_bytes)) < 0 ||
        (r = level_init(&c->disk, k.policy, k.disk_dir ? k.disk_bytes : 0)) < 0)
        goto fail;
    if (k.disk_dir) {
        c->disk_dir = strdup(k.disk_dir);
        if (!c->disk_dir) {
            r = -ENOMEM;
            goto fail;
        }
        c->cfg.disk_dir = c->disk_dir;
        if ((r = disk_dir_prepare(c->disk_dir, &c->lock_fd)) < 0 ||
            (r = disk_secret_load(c->disk_dir, c->secret, sizeof(c->secret))) < 0)
            goto fail;
        if ((r = disk_scan(c, c->disk_dir)) < 0 ||
            (r = disk_fdcache_new(disk_open_files(), &c->fds)) < 0)
            goto fail;
        /* the budget may have shrunk since the last run */
        struct cblock *victims = NULL;
        pthread_mutex_lock(&c->disk.mu);
        if (c->disk.used > c->disk.budget)
            disk_reserve(c, 0, 0, &victims);
        pthread_mutex_unlock(&c->disk.mu);
        finish_unlinks(c, victims);
    }
    if (c->cfg.store_async && c->disk_dir && pthread_create(&c->st_thread, NULL, st_worker, c) == 0)
        c->st_running = true; /* else every write-through stays on its fetching thread */
    int npf = c->cfg.prefetch_threads > 0 ? c->cfg.prefetch_threads : PREFETCH_THREADS_DEFAULT;
    if (npf > PREFETCH_THREADS_MAX)
        npf = PREFETCH_THREADS_MAX;
    for (int i = 0; i < npf; i++) {
        if (pthread_create(&c->pf_threads[i], NULL, pf_worker, c) != 0)
            break;
        c->pf_nthreads++;
    }
    *out = c;
    return 0;
fail:
    cache_close(c);
    return r;
}

void cache_close(struct cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->pf_mu);
    c->pf_stop = true;
    pthread_cond_broadcast(&c->pf_cv);
    pthread_mutex_unlock(&c->pf_mu);
    for (int i = 0; i < c->pf_nthreads; i++)
        pthread_join(c->pf_threads[i], NULL);
    while (c->pf_head) {
        struct pf_item *it = c->pf_head;
        c->pf_head = it->next;
        pf_item_free(it);
    }
    /* no fetch runs now (the callers' have returned, the prefetchers are joined): the writer
     * stores what is queued, then exits */
    if (c->st_running) {
        pthread_mutex_lock(&c->st_mu);
        c->st_stop = true;
        pthread_cond_broadcast(&c->st_cv);
        pthread_mutex_unlock(&c->st_mu);
        pthread_join(c->st_thread, NULL);
        c->st_running = false;
    }
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &c->shards[i];
        for (size_t k = 0; k < s->nbuckets; k++) {
            struct cblock *b = s->buckets[k];
            while (b) {
                struct cblock *nx = b->hnext;
                cdata_unref(b->ram);
                cdata_unref(b->ready_data);
                free(b);
                b = nx;
            }
        }
        free(s->buckets);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
    while (c->rules) {
        struct pin_rule *r = c->rules;
        c->rules = r->next;
        free(r->be_name);
        free(r->prefix);
        free(r);
    }
    policy_free(c->ram.pol);
    policy_free(c->disk.pol);
    pthread_mutex_destroy(&c->fetch_mu); /* no fetch runs now: no slots are left */
    pthread_mutex_destroy(&c->own_mu);
    free(c->qt);
    disk_fdcache_free(c->fds);
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    free(c->disk_dir);
    free(c);
}

/* ---- debug ------------------------------------------------------------------------------- */

static int check_fail(char *msg, size_t msgsz, const char *what)
{
    if (msg && msgsz)
        tier_strlcpy(msg, what, msgsz);
    return -EUCLEAN;
}

int cache_debug_check(struct cache *c, char *msg, size_t msgsz)
{
    char buf[256];
    int r = 0;
    pthread_mutex_lock(&c->pin_mu);
    pthread_mutex_lock(&c->ram.mu);
    pthread_mutex_lock(&c->disk.mu);
    /* Level contents only change under the level locks, so shard locks are taken one at a
     * time (ThreadSanitizer cannot track 64 locks held at once). */
    uint64_t ram_sum = 0, disk_sum = 0, pin_sum = 0, ondisk = 0, inflight_disk = 0;
    uint64_t charged_sum = 0, hinted_sum = 0, hcharged_sum = 0;
    size_t ram_n = 0, disk_n = 0;
    for (int i = 0; i < NSHARDS && !r; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_lock(&s->mu);
        for (size_t k = 0; k < s->nbuckets && !r; k++) {
            for (struct cblock *b = s->buckets[k]; b && !r; b = b->hnext) {
                if ((b->ram != NULL) != policy_contains(&b->ram_node))
                    r = check_fail(msg, msgsz, "I2: RAM pointer and RAM policy disagree");
                if (!!(b->flags & B_ON_DISK) != policy_contains(&b->disk_node))
                    r = check_fail(msg, msgsz, "I3: ON_DISK and disk policy disagree");
                if (b->ram) {
                    ram_sum += b->ram_node.size;
                    ram_n++;
                }
                if (b->flags & B_ON_DISK) {
                    disk_sum += b->disk_node.size;
                    disk_n++;
                    ondisk++;
                    if (!disk_block_exists(c->disk_dir, b->id))
                        r = check_fail(msg, msgsz, "I3: block marked on disk has no file");
                }
                if (b->flags & B_DISK_IO)
                    inflight_disk++;
                if (pin_counted(b))
                    pin_sum += b->len;
                if (b->charged != charge_due(c, b) || b->hcharged != hcharge_due(c, b))
                    r = check_fail(msg, msgsz, "I9: a block's charge disagrees with its state");
                if ((b->flags & B_HINTED) && !b->ram && !(b->flags & B_ON_DISK))
                    r = check_fail(msg, msgsz, "I10: an uncached block is hinted");
                if (!!(b->flags & B_HINTED) != (b->nhints > 0))
                    r = check_fail(msg, msgsz, "I10: B_HINTED and the hold count disagree");
                if (b->flags & B_HINTED)
                    hinted_sum += b->len;
                if (b->hcharged)
                    hcharged_sum += b->len;
                if (b->charged)
                    charged_sum += b->len;
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (!r && ram_sum != c->ram.used) {
        snprintf(buf, sizeof(buf), "I2: ram.used %" PRIu64 " != sum %" PRIu64, c->ram.used,
                 ram_sum);
        r = check_fail(msg, msgsz, buf);
    }
    if (!r && ram_sum > c->ram.budget)
        r = check_fail(msg, msgsz, "I4: RAM over budget");
    if (!r && !inflight_disk && disk_sum != c->disk.used) {
        snprintf(buf, sizeof(buf), "I3: disk.used %" PRIu64 " != sum %" PRIu64, c->disk.used,
                 disk_sum);
        r = check_fail(msg, msgsz, buf);
    }
    if (!r && disk_sum > c->disk.budget)
        r = check_fail(msg, msgsz, "I4: disk over budget");
    if (!r && pin_sum != atomic_load(&c->pinned_bytes)) {
        snprintf(buf, sizeof(buf), "I5: pinned_bytes %" PRIu64 " != sum %" PRIu64,
                 atomic_load(&c->pinned_bytes), pin_sum);
        r = check_fail(msg, msgsz, buf);
    }
    if (!r && pin_sum > c->cfg.pin_bytes)
        r = check_fail(msg, msgsz, "I5: pinned bytes over the pin budget");
    if (!r) {
        uint64_t list_sum = 0;
        pthread_mutex_lock(&c->own_mu);
        for (unsigned t = 0; t < c->cfg.max_tenants && !r; t++) {
            struct qtenant *q = &c->qt[t];
            uint64_t held = 0, n = 0;
            for (struct cblock *b = q->head; b && !r; b = b->qnext) {
                if (!b->charged || b->owner != t || (b->qnext && b->qnext->qprev != b))
                    r = check_fail(msg, msgsz, "I9: a charge list holds another's block");
                held += b->len;
                n++;
            }
            if (!r && (held != atomic_load(&q->held) || n != q->blocks)) {
                snprintf(buf, sizeof(buf),
                         "I9: tenant %u holds %" PRIu64 " bytes in %" PRIu64
                         " blocks, its counters say %" PRIu64 " in %" PRIu64,
                         t, held, n, atomic_load(&q->held), q->blocks);
                r = check_fail(msg, msgsz, buf);
            }
            list_sum += held;
        }
        pthread_mutex_unlock(&c->own_mu);
        uint64_t hq_sum = 0;
        for (unsigned t = 0; t < c->cfg.max_tenants; t++)
            hq_sum += atomic_load(&c->qt[t].hinted);
        if (!r && (hq_sum != hcharged_sum || hinted_sum != atomic_load(&c->hinted_bytes) ||
                   hinted_sum > c->hinted_max)) {
            snprintf(buf, sizeof(buf),
                     "I10: hinted bytes %" PRIu64 " (counted %" PRIu64 "), tenants' %" PRIu64
                     " (blocks %" PRIu64 ")",
                     hinted_sum, atomic_load(&c->hinted_bytes), hq_sum, hcharged_sum);
            r = check_fail(msg, msgsz, buf);
        }
        if (!r && list_sum != charged_sum) {
            snprintf(buf, sizeof(buf), "I9: charge lists hold %" PRIu64 " bytes, blocks %" PRIu64,
                     list_sum, charged_sum);
            r = check_fail(msg, msgsz, buf);
        }
    }
    if (!r && (ram_n != policy_count(c->ram.pol) || disk_n != policy_count(c->disk.pol)))
        r = check_fail(msg, msgsz, "I2/I3: policy holds blocks not in the index");
    if (!r && c->disk_dir && !inflight_disk) {
        long files = disk_count_files(c->disk_dir);
        if (files != (long)ondisk) {
            snprintf(buf, sizeof(buf), "I3: %ld block files on disk, index says %" PRIu64, files,
                     ondisk);
            r = check_fail(msg, msgsz, buf);
        }
    }
    pthread_mutex_unlock(&c->disk.mu);
    pthread_mutex_unlock(&c->ram.mu);
    pthread_mutex_unlock(&c->pin_mu);
    return r;
}

int cache_debug_block_path(struct cache *c, const char *backend_name, const char *key,
                           const char *etag, uint64_t index, char *path, size_t pathsz)
{
    if (!c->disk_dir)
        return -EINVAL;
    uint8_t id[16];
    int r = cache_block_id(c, backend_name, key, etag, index, id);
    if (r < 0)
        return r;
    return disk_block_path(c->disk_dir, id, "", path, pathsz);
}

void cache_debug_force_collisions(struct cache *c, bool on)
{
    c->debug_collide = on;
}
