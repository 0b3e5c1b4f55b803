/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.c - the hot-tier block cache (cache.h): the index, single-flight loads and the read
 * path, and hinted blocks. The rest of the cache: the RAM and disk levels (cache_level.c), space
 * quotas (cache_quota.c), pinning, eviction by prefix and demotion (cache_pin.c), the prefetch
 * pool (cache_prefetch.c), open and close (cache_open.c), cache_debug_check() (cache_debug.c);
 * their shared structs are in cache_int.h. Block files are in disk.c (cache_int.h).
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
 *     ... or from the peer source first          backend_fetch() -> c->peer.fetch
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
 *   a rule changed while a block loaded: its   pin_settle() -> acct_update()
 *     pin follows the rules as they are now
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
 * thread (st_worker, at cfg.store_nice; up to cfg.store_queue_bytes wait, beyond that the
 * fetching thread writes): the read
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
 */
#include "cache/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache_debug.h"
#include "cache/cache_int.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"

#define STORE_QUEUE_BYTES (256ull << 20) /* default cfg.store_queue_bytes */

/* Grants a waiting class may be passed over by more urgent ones (as sched's starve_limit). */
#define FETCH_STARVE_LIMIT 64

/* ---- data buffers ----------------------------------------------------------------------- */

#define HUGE_BYTES (2u << 20) /* a transparent huge page (x86-64, arm64 with 4 KiB pages) */

struct cdata *cdata_new(size_t len)
{
    size_t size = sizeof(struct cdata) + (len ? len : 1);
    struct cdata *d = NULL;
    if (len >= HUGE_BYTES) {
        /* A fetched block is written once by the backend's read and faulted in as it goes: on
         * huge pages that is one fault per 2 MiB instead of 512 (with THP in madvise mode; where
         * it is off, or the advice fails, small pages as before). */
        void *p = NULL;
        if (posix_memalign(&p, HUGE_BYTES, size) == 0) {
            (void)madvise(p, size & ~(size_t)(HUGE_BYTES - 1), MADV_HUGEPAGE);
            d = p;
        }
    } else {
        d = malloc(size);
    }
    if (!d)
        return NULL;
    atomic_init(&d->refs, 1);
    d->len = len;
    return d;
}

struct cdata *cdata_ref(struct cdata *d)
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

struct shard *shard_of(struct cache *c, const uint8_t id[16])
{
    return &c->shards[id_low(id) % NSHARDS];
}

struct cblock *shard_lookup(struct shard *s, const uint8_t id[16])
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
struct cblock *obj_lookup(struct cache *c, struct shard *s, const uint8_t id[16],
                          const struct cache_obj *obj, uint64_t index, bool *collision)
{
    struct cblock *b = shard_lookup(s, id);
    bool other = b && !same_ident(b, obj, index, block_len(c, obj, index));
    if (collision)
        *collision = other;
    return other ? NULL : b;
}

int shard_insert(struct shard *s, struct cblock *b)
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
void maybe_free(struct shard *s, struct cblock *b)
{
    if (b->refs || b->nwaiters || b->ready || b->ram ||
        (b->flags & (B_FETCHING | B_ON_DISK | B_DISK_IO)))
        return;
    shard_remove(s, b);
    free(b);
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

/* Block index of obj from the peer source (cache_set_peer_source), if any, in a new buffer of len
 * bytes: the buffer with the block (d->len == len), the buffer without it (d->len == 0: the
 * backend's turn), or NULL (no source, no memory). The call is counted in peer_calls so that
 * the source is not replaced under it. */
static struct cdata *peer_fetch_into(struct cache *c, const struct tier_ioctx *io,
                                     const struct cache_obj *obj, uint64_t index, uint32_t len)
{
    pthread_mutex_lock(&c->hook_mu);
    struct cache_peer_source peer = c->peer;
    if (peer.fetch)
        c->peer_calls++;
    pthread_mutex_unlock(&c->hook_mu);
    if (!peer.fetch)
        return NULL;
    struct cdata *d = cdata_new(len);
    ssize_t n = d ? peer.fetch(peer.ud, io, obj, index, d->bytes, len) : -ENOMEM;
    pthread_mutex_lock(&c->hook_mu);
    if (!--c->peer_calls)
        pthread_cond_broadcast(&c->peer_cv);
    pthread_mutex_unlock(&c->hook_mu);
    if (d && n != (ssize_t)len)
        d->len = 0; /* no block in it */
    return d;
}

static int backend_fetch(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                         uint64_t index, uint32_t len, struct cdata **out)
{
    struct cache_fetch_hook hook;
    pthread_mutex_lock(&c->hook_mu);
    hook = c->hook;
    pthread_mutex_unlock(&c->hook_mu);
    struct tier_ioctx dio = io ? *io : TIER_IOCTX_DEFAULT;

    /* The peer source first, without a fetch slot: a load waiting on a peer must not hold one
     * that the peer's own request to this node (a block this node owns) may need. */
    int cls = (unsigned)dio.cls < TIER_IO_NCLASSES ? (int)dio.cls : TIER_IO_BACKGROUND;
    struct cdata *d = peer_fetch_into(c, &dio, obj, index, len);
    if (d && d->len == len) {
        atomic_fetch_add_explicit(&c->peer_fetches, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->peer_bytes, len, memory_order_relaxed);
        *out = d;
        return 0;
    }
    cdata_unref(d);
    /* The buffer for the backend is allocated only with a fetch slot (fetch_slot_take): fetches
     * waiting for one hold no block buffer. */
    struct fetch_slots *fs = fetch_slot_take(c, obj->be, cls);
    d = fs ? cdata_new(len) : NULL;
    if (hook.before)
        hook.before(hook.ud, &dio, obj, index, len);
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
    if (len == c->cfg.block_size) /* a short block would understate the time of a full one */
        fetch_est_note(c, obj->be, dt);
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
                             uint32_t off_in_block, uint32_t seq_len, bool *counted)
{
    struct cdata *d = cdata_ref(b->ram);
    bool count = off_in_block == 0 || off_in_block != b->next_off;
    *counted = count;
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
    uint64_t cap = c->cfg.store_queue_bytes ? c->cfg.store_queue_bytes : STORE_QUEUE_BYTES;
    bool ok = c->st_running && !c->st_stop && (c->st_len == 0 || c->st_bytes + d->len <= cap);
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
void *st_worker(void *arg)
{
    struct cache *c = arg;
    /* per thread on Linux: only this writer yields the CPU (advisory: failing changes nothing
     * but the priority) */
    if (c->cfg.store_nice > 0 && setpriority(PRIO_PROCESS, (id_t)gettid(), c->cfg.store_nice) < 0)
        log_debug("cache: the write-through thread's nice %d: %s", c->cfg.store_nice,
                  strerror(errno));
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
void store_drain(struct cache *c)
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
                     uint64_t index, const uint8_t *id_in, uint32_t off_in_block, uint32_t seq_len,
                     bool pinned, bool async, struct cdata **out, struct level **from,
                     bool *counted)
{
    *from = NULL;
    bool cnt = true; /* a new access to the block, as its policy counts it (ram_hit) */
    uint8_t id[16];
    int r = 0;
    if (id_in)
        memcpy(id, id_in, sizeof(id)); /* the caller's cache_block_id() of the block */
    else if ((r = cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id)) < 0)
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
        if (counted)
            *counted = cnt;
        return backend_fetch(c, io, obj, index, block_len(c, obj, index), out);
    }
    if (b && b->ram) {
        owner_touch(c, b, io);
        *out = ram_hit(c, s, b, off_in_block, seq_len, &cnt);
        *from = &c->ram;
        if (counted)
            *counted = cnt;
        return 0;
    }
    if (b && (b->ready || (b->flags & B_FETCHING))) {
        /* a waiter's read is an access as a hit's is: a new one unless it continues where the
         * block's last read ended, and the next read continues from its end */
        cnt = off_in_block == 0 || off_in_block != b->next_off;
        b->next_off = off_in_block + seq_len;
        /* the loader's level (NULL: the backend), so a waiter's served tier is right too */
        bool from_disk = false;
        r = wait_loading(c, s, b, out, &from_disk);
        if (r == 0 && from_disk)
            *from = &c->disk;
        if (counted)
            *counted = cnt;
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
    if (counted)
        *counted = cnt;
    return r;
}

/*
 * RAM-less disk hit (fast path): with no RAM level to promote into, a block on disk is read
 * straight into the caller's buffer, only the 64 KiB chunks asked for, each verified, with no
 * single-flight load and no intermediate copy. Returns 0 on a hit, else < 0 and the caller takes
 * the normal path (which also handles a checksum failure: drop, count, refetch).
 */
static int disk_direct(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                       uint64_t index, const uint8_t id[16], uint32_t in, uint32_t n, void *dst,
                       bool *counted)
{
    if (c->ram.budget || !c->disk_dir)
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
    *counted = count;
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

bool obj_ok(const struct cache_obj *obj)
{
    return obj && obj->be && obj->be->name && obj->key && obj->etag;
}

/* Whether a pin rule covers obj, and the rules' generation (c->pin_gen) that answer is of. */
static bool obj_pinned(struct cache *c, const struct cache_obj *obj, uint64_t *gen)
{
    pthread_mutex_lock(&c->pin_mu);
    bool p = c->rules && rules_match(c, obj->be->name, obj->key);
    *gen = atomic_load(&c->pin_gen);
    pthread_mutex_unlock(&c->pin_mu);
    if (c->debug_pin_hook)
        c->debug_pin_hook(c->debug_pin_arg);
    return p;
}

/*
 * No lock held; block index of obj was just loaded or found by block_get(), told whether it is
 * pinned by obj_pinned() at generation gen. A rule added or removed since then walked the blocks
 * before this one may have been created (block_acquire), so the block's B_PINNED can be the old
 * answer (I5 would then miss a pinned block, or keep one pinned that no rule covers). cache_pin
 * and cache_unpin bump pin_gen under pin_mu before their walk, and the walk takes each shard
 * lock, so a block created after the walk of its shard sees the new generation here: then the
 * flag is set from the rules as they are now, under the lock order of cache_pin. Explicit pins
 * (B_PIN_EXPLICIT) are left alone. The cost when no rule changed is one atomic load.
 */
static void pin_settle(struct cache *c, const struct cache_obj *obj, uint64_t index, uint64_t gen)
{
    if (atomic_load(&c->pin_gen) == gen)
        return;
    uint8_t id[16];
    if (cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id) < 0)
        return;
    struct shard *s = shard_of(c, id);
    pthread_mutex_lock(&c->pin_mu);
    bool now = c->rules && rules_match(c, obj->be->name, obj->key);
    pthread_mutex_lock(&c->ram.mu); /* pinning cached blocks: under both level locks */
    pthread_mutex_lock(&c->disk.mu);
    pthread_mutex_lock(&s->mu);
    struct cblock *b = obj_lookup(c, s, id, obj, index, NULL);
    if (b && now != ((b->flags & B_PINNED) != 0) && !(b->flags & B_PIN_EXPLICIT)) {
        bool before = pin_counted(b);
        if (now)
            b->flags |= B_PINNED;
        else
            b->flags &= ~(unsigned)B_PINNED;
        acct_update(c, b, before);
        log_debug("cache: block %" PRIu64 " of %s %s by a rule changed while it loaded", index,
                  obj->key, now ? "pinned" : "unpinned");
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&c->disk.mu);
    pthread_mutex_unlock(&c->ram.mu);
    pthread_mutex_unlock(&c->pin_mu);
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
    uint64_t gen;
    bool pinned = obj_pinned(c, obj, &gen);
    size_t done = 0;
    while (done < len) {
        uint64_t pos = off + done;
        uint64_t index = pos / c->cfg.block_size;
        uint32_t in = (uint32_t)(pos % c->cfg.block_size);
        uint32_t blen = block_len(c, obj, index);
        size_t n = blen - in;
        if (n > len - done)
            n = len - done;
        bool counted = false;
        uint8_t id[16];
        int r = cache_block_id(c, obj->be->name, obj->key, obj->etag, index, id);
        if (r < 0) {
            quota_check(c, io); /* blocks this read cached before */
            return r;
        }
        if (disk_direct(c, io, obj, index, id, in, (uint32_t)n, (char *)buf + done, &counted) ==
            0) {
            if (counted && c->mrc_on)
                mrc_feed(c, io, id, blen);
            if (worst < CACHE_SERVED_DISK)
                worst = CACHE_SERVED_DISK;
            done += n;
            continue;
        }
        struct cdata *d = NULL;
        struct level *from = NULL;
        r = block_get(c, io, obj, index, id, in, (uint32_t)n, pinned, true, &d, &from, &counted);
        if (counted && c->mrc_on)
            mrc_feed(c, io, id, blen); /* also a failed load: the access was made */
        /* A failure part-way is the whole read's failure: a short count means end of object
         * to the kernel, which would then shrink the file's size (a silent truncation). The
         * blocks it cached before count all the same. */
        if (r < 0) {
            quota_check(c, io);
            return r;
        }
        pin_settle(c, obj, index, gen);
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
int fetch_block(struct cache *c, const struct tier_ioctx *io, const struct cache_obj *obj,
                uint64_t index, bool pin, bool async)
{
    if (!c || !obj_ok(obj))
        return -EINVAL;
    if (index * c->cfg.block_size >= obj->size_bytes)
        return obj->size_bytes == 0 && index == 0 ? 0 : -EINVAL;
    struct cdata *d = NULL;
    struct level *from = NULL;
    uint64_t gen;
    bool pinned = obj_pinned(c, obj, &gen);
    int r = block_get(c, io, obj, index, NULL, 0, block_len(c, obj, index), pinned, async && !pin,
                      &d, &from, NULL);
    if (r < 0) {
        quota_check(c, io);
        return r;
    }
    pin_settle(c, obj, index, gen);
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
    uint64_t gen;
    bool pinned = obj_pinned(c, obj, &gen);
    int r = block_get(c, io, obj, index, NULL, 0, block_len(c, obj, index), pinned, false, &d,
                      &from, NULL);
    if (r == 0) {
        pin_settle(c, obj, index, gen);
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
