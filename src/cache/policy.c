/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.c - S3-FIFO and LRU eviction (policy.h).
 *
 * DESIGN. S3-FIFO (Yang et al., SOSP'23): new nodes enter a small FIFO (~10 % of the capacity).
 * When the small FIFO is over its share, its tail is either promoted to the main FIFO (it was hit
 * while in small) or evicted, leaving its hash in a ghost FIFO. A node inserted while its hash is
 * in the ghost goes straight to main. The main FIFO is a CLOCK: a tail node with a non-zero
 * frequency (2 bits, saturating at 3) is decremented and reinserted at the head; with frequency 0
 * it is evicted. A one-pass scan therefore only churns the small FIFO and never reaches a hot
 * working set that sits in main. Hits only bump the atomic frequency, so they need no queue lock.
 *
 * LRU: one list, hit moves to the head, the tail is evicted.
 *
 * The ghost is a FIFO of (hash, size) bounded to the capacity in bytes, with a linear-probing
 * hash map hash -> sequence number for O(1) membership (stale map entries are told apart from
 * live ones by the sequence number).
 */
#include "cache/policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ghost_ent {
    uint64_t hash, size, seq;
};

struct policy {
    enum cache_policy_kind kind;
    uint64_t capacity;
    uint64_t small_target;       /* S3-FIFO: bytes the small FIFO may hold before it evicts */
    struct pol_node small, main; /* circular list heads; LRU uses main */
    uint64_t small_bytes, main_bytes;
    size_t small_count, main_count;
    /* ghost FIFO ring */
    struct ghost_ent *ring;
    size_t ring_cap, ring_head, ring_len;
    uint64_t ghost_bytes, seq;
    /* ghost map: open addressing, key 0 = empty (hash 0 is stored as 1) */
    uint64_t *map_key, *map_seq;
    size_t map_cap, map_len;
};

static void list_init(struct pol_node *h)
{
    h->next = h->prev = h;
}

static void list_del(struct pol_node *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

static void list_push_head(struct pol_node *h, struct pol_node *n)
{
    n->next = h->next;
    n->prev = h;
    h->next->prev = n;
    h->next = n;
}

static bool list_empty(const struct pol_node *h)
{
    return h->next == h;
}

/* ---- ghost ------------------------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static uint64_t gkey(uint64_t h)
{
    return h ? h : 1;
}

static size_t map_find(const struct policy *p, uint64_t key)
{
    size_t mask = p->map_cap - 1;
    size_t i = mix(key) & mask;
    while (p->map_key[i] && p->map_key[i] != key)
        i = (i + 1) & mask;
    return i;
}

static int map_grow(struct policy *p)
{
    size_t ncap = p->map_cap ? p->map_cap * 2 : 64;
    uint64_t *nk = calloc(ncap, sizeof(*nk));
    uint64_t *ns = calloc(ncap, sizeof(*ns));
    if (!nk || !ns) {
        free(nk);
        free(ns);
        return -ENOMEM;
    }
    uint64_t *ok = p->map_key, *os = p->map_seq;
    size_t ocap = p->map_cap;
    p->map_key = nk;
    p->map_seq = ns;
    p->map_cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (ok[i]) {
            size_t j = map_find(p, ok[i]);
            p->map_key[j] = ok[i];
            p->map_seq[j] = os[i];
        }
    }
    free(ok);
    free(os);
    return 0;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void map_del_at(struct policy *p, size_t i)
{
    size_t mask = p->map_cap - 1;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!p->map_key[j])
            break;
        size_t home = mix(p->map_key[j]) & mask;
        /* move j into the hole at i if its home is not in (i, j] cyclically */
        bool in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            p->map_key[i] = p->map_key[j];
            p->map_seq[i] = p->map_seq[j];
            i = j;
        }
    }
    p->map_key[i] = 0;
    p->map_len--;
}

static bool ghost_take(struct policy *p, uint64_t hash)
{
    if (!p->map_cap)
        return false;
    size_t i = map_find(p, gkey(hash));
    if (!p->map_key[i])
        return false;
    map_del_at(p, i);
    return true;
}

static void ghost_pop(struct policy *p)
{
    struct ghost_ent *e = &p->ring[p->ring_head];
    size_t i = map_find(p, gkey(e->hash));
    if (p->map_key[i] && p->map_seq[i] == e->seq)
        map_del_at(p, i);
    p->ghost_bytes -= e->size;
    p->ring_head = (p->ring_head + 1) % p->ring_cap;
    p->ring_len--;
}

static void ghost_add(struct policy *p, uint64_t hash, uint64_t size)
{
    if (size > p->capacity)
        return;
    if (p->ring_len == p->ring_cap) {
        size_t ncap = p->ring_cap ? p->ring_cap * 2 : 64;
        struct ghost_ent *nr = malloc(ncap * sizeof(*nr));
        if (!nr) {
            ghost_pop(p); /* out of memory: keep the ghost at its current length */
        } else {
            for (size_t k = 0; k < p->ring_len; k++)
                nr[k] = p->ring[(p->ring_head + k) % p->ring_cap];
            free(p->ring);
            p->ring = nr;
            p->ring_cap = ncap;
            p->ring_head = 0;
        }
    }
    if ((p->map_len + 1) * 2 > p->map_cap && map_grow(p) < 0)
        return;
    while (p->ring_len && p->ghost_bytes + size > p->capacity)
        ghost_pop(p);
    uint64_t seq = ++p->seq;
    struct ghost_ent *e = &p->ring[(p->ring_head + p->ring_len) % p->ring_cap];
    e->hash = hash;
    e->size = size;
    e->seq = seq;
    p->ring_len++;
    p->ghost_bytes += size;
    size_t i = map_find(p, gkey(hash));
    if (!p->map_key[i]) {
        p->map_key[i] = gkey(hash);
        p->map_len++;
    }
    p->map_seq[i] = seq;
}

/* ---- policy ----------------------------------------------------------------------------- */

int policy_new(enum cache_policy_kind kind, uint64_t capacity_bytes, struct policy **out)
{
    if (kind != CACHE_POLICY_S3FIFO && kind != CACHE_POLICY_LRU)
        return -EINVAL;
    struct policy *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->kind = kind;
    p->capacity = capacity_bytes;
    p->small_target = capacity_bytes / 10;
    list_init(&p->small);
    list_init(&p->main);
    *out = p;
    return 0;
}

void policy_set_capacity(struct policy *p, uint64_t capacity_bytes)
{
    p->capacity = capacity_bytes;
    p->small_target = capacity_bytes / 10;
    while (p->ring_len && p->ghost_bytes > p->capacity)
        ghost_pop(p);
}

void policy_free(struct policy *p)
{
    if (!p)
        return;
    free(p->ring);
    free(p->map_key);
    free(p->map_seq);
    free(p);
}

const char *policy_name(const struct policy *p)
{
    return p->kind == CACHE_POLICY_LRU ? "lru" : "s3fifo";
}

bool policy_hit_lockfree(const struct policy *p)
{
    return p->kind == CACHE_POLICY_S3FIFO;
}

static void q_add(struct policy *p, struct pol_node *n, enum pol_queue q)
{
    n->queue = (uint8_t)q;
    if (q == POL_SMALL) {
        list_push_head(&p->small, n);
        p->small_bytes += n->size;
        p->small_count++;
    } else {
        list_push_head(&p->main, n);
        p->main_bytes += n->size;
        p->main_count++;
    }
}

static void q_del(struct policy *p, struct pol_node *n)
{
    list_del(n);
    if (n->queue == POL_SMALL) {
        p->small_bytes -= n->size;
        p->small_count--;
    } else {
        p->main_bytes -= n->size;
        p->main_count--;
    }
    n->queue = POL_NONE;
}

void policy_insert(struct policy *p, struct pol_node *n)
{
    atomic_store_explicit(&n->freq, 0, memory_order_relaxed);
    if (p->kind == CACHE_POLICY_LRU)
        q_add(p, n, POL_LRU);
    else
        q_add(p, n, ghost_take(p, n->hash) ? POL_MAIN : POL_SMALL);
}

void policy_hit(struct policy *p, struct pol_node *n)
{
    if (p->kind == CACHE_POLICY_LRU) {
        if (n->queue == POL_LRU) {
            list_del(n);
            list_push_head(&p->main, n);
        }
        return;
    }
    uint8_t f = atomic_load_explicit(&n->freq, memory_order_relaxed);
    while (f < 3 && !atomic_compare_exchange_weak_explicit(
                        &n->freq, &f, (uint8_t)(f + 1), memory_order_relaxed, memory_order_relaxed))
        ;
}

struct pol_node *policy_evict_candidate(struct policy *p,
                                        bool (*evictable)(struct pol_node *n, void *ud), void *ud)
{
    /* Every rotation either lowers a frequency or moves a kept node; 4 passes over all nodes
     * bound the work even when everything is pinned. */
    size_t budget = 4 * (p->small_count + p->main_count) + 8;
    if (p->kind == CACHE_POLICY_LRU) {
        for (size_t k = 0; k < p->main_count; k++) {
            struct pol_node *t = p->main.prev;
            if (!evictable || evictable(t, ud))
                return t;
            list_del(t);
            list_push_head(&p->main, t);
        }
        return NULL;
    }
    while (budget--) {
        bool from_small =
            !list_empty(&p->small) && (p->small_bytes >= p->small_target || list_empty(&p->main));
        if (from_small) {
            struct pol_node *t = p->small.prev;
            bool ok = !evictable || evictable(t, ud);
            if (ok && atomic_load_explicit(&t->freq, memory_order_relaxed) == 0)
                return t;
            q_del(p, t); /* hit while in small, or pinned: promote */
            atomic_store_explicit(&t->freq, 0, memory_order_relaxed);
            q_add(p, t, POL_MAIN);
            continue;
        }
        if (list_empty(&p->main))
            return NULL;
        struct pol_node *t = p->main.prev;
        uint8_t f = atomic_load_explicit(&t->freq, memory_order_relaxed);
        bool ok = !evictable || evictable(t, ud);
        if (ok && f == 0)
            return t;
        if (f > 0)
            atomic_store_explicit(&t->freq, (uint8_t)(f - 1), memory_order_relaxed);
        list_del(t);
        list_push_head(&p->main, t);
    }
    return NULL;
}

void policy_remove(struct policy *p, struct pol_node *n, bool evicted)
{
    if (n->queue == POL_NONE)
        return;
    bool from_small = n->queue == POL_SMALL;
    q_del(p, n);
    /* Only nodes that leave through the small FIFO are remembered: a ghost hit means "this was
     * evicted too early", which is never true of a node that already lived in main. */
    if (evicted && from_small)
        ghost_add(p, n->hash, n->size);
}

uint64_t policy_bytes(const struct policy *p)
{
    return p->small_bytes + p->main_bytes;
}

size_t policy_count(const struct policy *p)
{
    return p->small_count + p->main_count;
}
