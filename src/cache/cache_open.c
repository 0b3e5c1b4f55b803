/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_open.c - cache_open (levels, disk directory, identity secret, the rebuild of the index
 * from the block files, prefetch and writer threads) and cache_close.
 *
 * Invariants, lock order and block states of the cache: the top of cache.c.
 */
#include "cache/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache_debug.h"
#include "cache/cache_int.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"

#define PREFETCH_THREADS_DEFAULT 4

#define MAX_FETCHES_DEFAULT 64
#define DISK_OPEN_FILES 1024     /* block files kept open for disk hits (disk_fdcache) */
#define CACHE_TENANTS_DEFAULT 64 /* the tenant registry's default max_tenants */
#define CACHE_TENANTS_MAX TIER_TENANT_IDS_MAX /* the registry's id limit */

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
    /* cache-line aligned members (the curves' queue ends): so must it be (sizeof is a multiple) */
    struct cache *c = aligned_alloc(_Alignof(struct cache), sizeof(*c));
    if (!c)
        return -ENOMEM;
    memset(c, 0, sizeof(*c));
    int r = 0;
    c->lock_fd = -1;
    c->cfg = k;
    if (k.disk_adm)
        c->adm = *k.disk_adm;
    c->cfg.disk_adm = NULL; /* c->adm is the copy in use */
    c->cfg.disk_dir = NULL;
    pthread_mutex_init(&c->fetch_mu, NULL);
    pthread_mutex_init(&c->est_mu, NULL);
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
    pthread_cond_init(&c->peer_cv, NULL);
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
            (r = disk_fdcache_new(disk_open_files(), c->cfg.disk_verify_every_read, &c->fds)) < 0)
            goto fail;
        /* the budget may have shrunk since the last run */
        struct cblock *victims = NULL;
        pthread_mutex_lock(&c->disk.mu);
        if (c->disk.used > c->disk.budget)
            disk_reserve(c, 0, 0, &victims);
        pthread_mutex_unlock(&c->disk.mu);
        finish_unlinks(c, victims);
    }
    if ((r = mrc_setup(c)) < 0)
        goto fail;
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
    fetch_est_free(c);
    pthread_mutex_destroy(&c->est_mu);
    pthread_mutex_destroy(&c->own_mu);
    mrc_teardown(c);
    free(c->qt);
    disk_fdcache_free(c->fds);
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    free(c->disk_dir);
    free(c);
}
