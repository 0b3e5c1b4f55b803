/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_membe.c - the in-memory test backend (test_cache_membe.h). Thread-safe: one mutex
 * for the object table, atomics for the counters.
 */
#include "test_cache_membe.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "common/strutil.h"

#define MEMBE_MAX_OBJS 4096

struct mobj {
    char key[BACKEND_KEY_MAX + 1];
    char etag[BACKEND_ETAG_MAX];
    uint64_t size;
};

struct membe {
    struct backend be;
    pthread_mutex_t mu;
    struct mobj *objs;
    size_t nobjs;
    _Atomic uint64_t reads;
    _Atomic int fail_count;
    _Atomic int fail_err;
    _Atomic unsigned latency_us;
};

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void membe_expected(const char *key, const char *etag, uint64_t off, void *buf, size_t len)
{
    uint64_t seed = XXH3_64bits(key, strlen(key)) ^ (XXH3_64bits(etag, strlen(etag)) << 1);
    unsigned char *p = buf;
    uint64_t w = off / 8;
    size_t i = 0;
    while (i < len) {
        uint64_t v = mix64(seed ^ w);
        size_t from = (size_t)((off + i) % 8);
        for (size_t k = from; k < 8 && i < len; k++)
            p[i++] = (unsigned char)(v >> (8 * k));
        w++;
    }
}

static struct mobj *find(struct membe *m, const char *key)
{
    for (size_t i = 0; i < m->nobjs; i++)
        if (!strcmp(m->objs[i].key, key))
            return &m->objs[i];
    return NULL;
}

static int m_stat(struct backend *be, const char *key, struct backend_stat *st)
{
    struct membe *m = (struct membe *)be;
    pthread_mutex_lock(&m->mu);
    struct mobj *o = find(m, key);
    int r = -ENOENT;
    if (o) {
        memset(st, 0, sizeof(*st));
        st->size_bytes = o->size;
        tier_strlcpy(st->etag, o->etag, sizeof(st->etag));
        r = 0;
    }
    pthread_mutex_unlock(&m->mu);
    return r;
}

static ssize_t m_read(struct backend *be, const char *key, uint64_t off, void *buf, size_t len,
                      const char *if_match, struct backend_stat *st)
{
    struct membe *m = (struct membe *)be;
    atomic_fetch_add(&m->reads, 1);
    unsigned us = atomic_load(&m->latency_us);
    if (us) {
        struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    int fc = atomic_load(&m->fail_count);
    while (fc > 0) {
        if (atomic_compare_exchange_weak(&m->fail_count, &fc, fc - 1))
            return atomic_load(&m->fail_err);
    }
    char etag[BACKEND_ETAG_MAX];
    uint64_t size;
    pthread_mutex_lock(&m->mu);
    struct mobj *o = find(m, key);
    if (!o) {
        pthread_mutex_unlock(&m->mu);
        return -ENOENT;
    }
    tier_strlcpy(etag, o->etag, sizeof(etag));
    size = o->size;
    pthread_mutex_unlock(&m->mu);
    if (if_match && strcmp(if_match, etag))
        return -ESTALE;
    if (off >= size)
        return 0;
    if (len > size - off)
        len = (size_t)(size - off);
    membe_expected(key, etag, off, buf, len);
    if (st) {
        memset(st, 0, sizeof(*st));
        st->size_bytes = size;
        tier_strlcpy(st->etag, etag, sizeof(st->etag));
    }
    return (ssize_t)len;
}

static void m_destroy(struct backend *be)
{
    struct membe *m = (struct membe *)be;
    pthread_mutex_destroy(&m->mu);
    free(m->objs);
    free(m->be.name);
    free(m);
}

static const struct backend_ops membe_ops = {
    .type = "mem",
    .stat = m_stat,
    .read = m_read,
    .destroy = m_destroy,
};

struct backend *membe_new(const char *name)
{
    struct membe *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->objs = calloc(MEMBE_MAX_OBJS, sizeof(*m->objs));
    m->be.ops = &membe_ops;
    m->be.name = strdup(name);
    pthread_mutex_init(&m->mu, NULL);
    return &m->be;
}

void membe_add(struct backend *be, const char *key, uint64_t size, const char *etag)
{
    struct membe *m = (struct membe *)be;
    pthread_mutex_lock(&m->mu);
    struct mobj *o = find(m, key);
    if (!o && m->nobjs < MEMBE_MAX_OBJS)
        o = &m->objs[m->nobjs++];
    if (o) {
        tier_strlcpy(o->key, key, sizeof(o->key));
        tier_strlcpy(o->etag, etag, sizeof(o->etag));
        o->size = size;
    }
    pthread_mutex_unlock(&m->mu);
}

uint64_t membe_reads(struct backend *be)
{
    return atomic_load(&((struct membe *)be)->reads);
}

void membe_fail_next(struct backend *be, int err, int count)
{
    struct membe *m = (struct membe *)be;
    atomic_store(&m->fail_err, err);
    atomic_store(&m->fail_count, count);
}

void membe_set_latency_us(struct backend *be, unsigned us)
{
    atomic_store(&((struct membe *)be)->latency_us, us);
}
