/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_level.c - the cache's RAM and disk levels: insertion with eviction of victims (RAM:
 * a drop, never I/O; disk: detach under the locks, unlink outside them), disk space
 * reservations, the write-through of a block to disk and the drop of a bad disk copy.
 *
 * Invariants, lock order and block states of the cache: the top of cache.c.
 */
#include "cache/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/statvfs.h>

#include "cache/cache_debug.h"
#include "cache/cache_int.h"
#include "common/log.h"
#include "common/strutil.h"

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

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
struct cdata *ram_remove(struct cache *c, struct cblock *b, bool evicted)
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
void ram_insert(struct cache *c, struct cblock *b, struct cdata *d)
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
void disk_detach(struct cache *c, struct cblock *b, bool evicted, struct cblock **list)
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
void finish_unlinks(struct cache *c, struct cblock *list)
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
int disk_reserve(struct cache *c, uint64_t need, uint64_t free_bytes, struct cblock **list)
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
void disk_store(struct cache *c, const struct tier_ioctx *io, struct cblock *b,
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
void disk_drop(struct cache *c, struct cblock *b)
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
