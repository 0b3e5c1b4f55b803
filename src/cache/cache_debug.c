/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_debug.c - cache_debug_check(), which walks the whole cache under its locks and checks
 * the invariants I1-I10, and the other test hooks of cache_debug.h.
 *
 * Invariants, lock order and block states of the cache: the top of cache.c.
 */
#include "cache/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "cache/cache_debug.h"
#include "cache/cache_int.h"
#include "common/strutil.h"

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

void cache_debug_set_pin_hook(struct cache *c, void (*fn)(void *), void *arg)
{
    c->debug_pin_arg = arg;
    c->debug_pin_hook = fn;
}
