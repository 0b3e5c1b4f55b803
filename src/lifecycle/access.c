/* SPDX-License-Identifier: Apache-2.0 */
/*
 * access.c - last-read times and tenants by object (access.h): a 4-way set-associative table of
 * (hash, time, tenant) entries in relaxed atomics.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "lifecycle/access.h"

#define WAYS 4

struct slot {
    _Atomic uint64_t tag; /* 0: empty */
    _Atomic int64_t at_ns;
    /* the tenant (low 17 bits; ACCESS_TENANT_MAX: unknown) and the tag's top 15 bits, so that a
     * reader tells a tenant of this tag from one of the entry it replaced */
    _Atomic uint32_t who;
};

#define TENANT_BITS 17

static uint32_t who_of(uint64_t tag, uint32_t tenant)
{
    if (tenant > ACCESS_TENANT_MAX)
        tenant = ACCESS_TENANT_MAX;
    return (uint32_t)(tag >> (64 - (32 - TENANT_BITS))) << TENANT_BITS | tenant;
}

struct access_log {
    size_t nsets; /* a power of two */
    struct slot *v;
    _Atomic int64_t *floor; /* per set: the newest time it forgot (a miss reads it) */
};

int access_log_new(unsigned bits, struct access_log **out)
{
    if (bits < 4 || bits > 26)
        return -EINVAL;
    struct access_log *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->nsets = ((size_t)1 << bits) / WAYS;
    a->v = calloc(a->nsets * WAYS, sizeof(*a->v));
    a->floor = calloc(a->nsets, sizeof(*a->floor));
    if (!a->v || !a->floor) {
        free(a->v);
        free(a->floor);
        free(a);
        return -ENOMEM;
    }
    *out = a;
    return 0;
}

void access_log_free(struct access_log *a)
{
    if (!a)
        return;
    free(a->v);
    free(a->floor);
    free(a);
}

static uint64_t tag_of(const char *backend, const char *key)
{
    uint64_t seed = XXH3_64bits(backend, strlen(backend));
    uint64_t h = XXH3_64bits_withSeed(key, strlen(key), seed);
    return h ? h : 1;
}

void access_note(struct access_log *a, const char *backend, const char *key, int64_t now_ns,
                 uint32_t tenant)
{
    if (!a)
        return;
    uint64_t t = tag_of(backend, key);
    struct slot *set = &a->v[(t & (a->nsets - 1)) * WAYS];
    size_t victim = 0;
    int64_t oldest = INT64_MAX;
    for (size_t w = 0; w < WAYS; w++) {
        uint64_t have = atomic_load_explicit(&set[w].tag, memory_order_relaxed);
        if (have == t) {
            atomic_store_explicit(&set[w].at_ns, now_ns, memory_order_relaxed);
            atomic_store_explicit(&set[w].who, who_of(t, tenant), memory_order_relaxed);
            return;
        }
        int64_t at = have ? atomic_load_explicit(&set[w].at_ns, memory_order_relaxed) : INT64_MIN;
        if (at < oldest) {
            oldest = at;
            victim = w;
        }
    }
    /* the victim is the set's oldest: its time bounds every read the set forgets */
    if (oldest != INT64_MIN) {
        _Atomic int64_t *fl = &a->floor[t & (a->nsets - 1)];
        int64_t cur = atomic_load_explicit(fl, memory_order_relaxed);
        while (oldest > cur && !atomic_compare_exchange_weak_explicit(
                                   fl, &cur, oldest, memory_order_relaxed, memory_order_relaxed))
            ;
    }
    atomic_store_explicit(&set[victim].at_ns, now_ns, memory_order_relaxed);
    atomic_store_explicit(&set[victim].who, who_of(t, tenant), memory_order_relaxed);
    atomic_store_explicit(&set[victim].tag, t, memory_order_relaxed);
}

int64_t access_last(const struct access_log *a, const char *backend, const char *key,
                    int64_t *tenant)
{
    if (tenant)
        *tenant = -1;
    if (!a)
        return 0;
    uint64_t t = tag_of(backend, key);
    const struct slot *set = &a->v[(t & (a->nsets - 1)) * WAYS];
    for (size_t w = 0; w < WAYS; w++) {
        if (atomic_load_explicit(&set[w].tag, memory_order_relaxed) != t)
            continue;
        uint32_t who = atomic_load_explicit(&set[w].who, memory_order_relaxed);
        uint32_t id = who & ACCESS_TENANT_MAX;
        if (tenant && who == who_of(t, id) && id != ACCESS_TENANT_MAX)
            *tenant = id;
        return atomic_load_explicit(&set[w].at_ns, memory_order_relaxed);
    }
    /* not (or no longer) known: it may have been read as late as the newest time the set
     * forgot, so it counts as read then (never idler than the truth) */
    return atomic_load_explicit(&a->floor[t & (a->nsets - 1)], memory_order_relaxed);
}

void access_forget_tenant(struct access_log *a, uint32_t tenant)
{
    if (!a || tenant >= ACCESS_TENANT_MAX)
        return;
    for (size_t i = 0; i < a->nsets * WAYS; i++) {
        uint32_t who = atomic_load_explicit(&a->v[i].who, memory_order_relaxed);
        /* a CAS: a note racing with this keeps its own tenant */
        if ((who & ACCESS_TENANT_MAX) == tenant)
            atomic_compare_exchange_strong_explicit(&a->v[i].who, &who, who | ACCESS_TENANT_MAX,
                                                    memory_order_relaxed, memory_order_relaxed);
    }
}
