/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pinmeta.c - the attributes of pinned objects (pinmeta.h): one array sorted by (backend, key),
 * so an object is a binary search and a directory's children are one contiguous range.
 */
#include "stage/pinmeta.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "common/vec.h"

struct pm_entry {
    char *backend, *key;
    struct pinmeta_obj o;
};

struct pinmeta {
    pthread_mutex_t mu;
    struct pm_entry *v;
    size_t n, cap;
};

int pinmeta_new(struct pinmeta **out)
{
    struct pinmeta *pm = calloc(1, sizeof(*pm));
    if (!pm)
        return -ENOMEM;
    pthread_mutex_init(&pm->mu, NULL);
    *out = pm;
    return 0;
}

void pinmeta_free(struct pinmeta *pm)
{
    if (!pm)
        return;
    for (size_t i = 0; i < pm->n; i++) {
        free(pm->v[i].backend);
        free(pm->v[i].key);
    }
    free(pm->v);
    pthread_mutex_destroy(&pm->mu);
    free(pm);
}

static int cmp(const struct pm_entry *e, const char *backend, const char *key)
{
    int c = strcmp(e->backend, backend);
    return c ? c : strcmp(e->key, key);
}

/* First position whose (backend, key) is >= the one given. mu held. */
static size_t lower(const struct pinmeta *pm, const char *backend, const char *key)
{
    size_t lo = 0, hi = pm->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp(&pm->v[mid], backend, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool has_prefix(const struct pm_entry *e, const char *backend, const char *prefix,
                       size_t plen)
{
    return strcmp(e->backend, backend) == 0 && strncmp(e->key, prefix, plen) == 0;
}

int pinmeta_note(struct pinmeta *pm, const char *backend, const char *key,
                 const struct pinmeta_obj *o)
{
    pthread_mutex_lock(&pm->mu);
    size_t i = lower(pm, backend, key);
    int rc = 0;
    if (i < pm->n && cmp(&pm->v[i], backend, key) == 0) {
        pm->v[i].o = *o;
        goto out;
    }
    struct pm_entry *v = tier_vec_grow(pm->v, &pm->cap, pm->n + 1, sizeof(*v), 64);
    if (!v) {
        rc = -ENOMEM;
        goto out;
    }
    pm->v = v;
    struct pm_entry e = {.backend = strdup(backend), .key = strdup(key), .o = *o};
    if (!e.backend || !e.key) {
        free(e.backend);
        free(e.key);
        rc = -ENOMEM;
        goto out;
    }
    memmove(&pm->v[i + 1], &pm->v[i], (pm->n - i) * sizeof(*pm->v));
    pm->v[i] = e;
    pm->n++;
out:
    pthread_mutex_unlock(&pm->mu);
    return rc;
}

size_t pinmeta_forget(struct pinmeta *pm, const char *backend, const char *prefix)
{
    size_t plen = strlen(prefix), gone = 0;
    pthread_mutex_lock(&pm->mu);
    size_t i = lower(pm, backend, prefix), j = i;
    /* as cache_pin's rules: "" the whole backend, "dir/" a directory, else one exact key (an
     * unpin of d/a.bin must not forget d/a.bin.bak, still pinned) */
    bool exact = plen > 0 && prefix[plen - 1] != '/';
    while (j < pm->n && has_prefix(&pm->v[j], backend, prefix, plen) &&
           (!exact || pm->v[j].key[plen] == '\0')) {
        free(pm->v[j].backend);
        free(pm->v[j].key);
        j++;
    }
    gone = j - i;
    if (gone) /* never memmove on the NULL array of an empty table */
        memmove(&pm->v[i], &pm->v[j], (pm->n - j) * sizeof(*pm->v));
    pm->n -= gone;
    pthread_mutex_unlock(&pm->mu);
    return gone;
}

int pinmeta_stat(struct pinmeta *pm, const char *backend, const char *key, struct pinmeta_obj *o)
{
    char *dir = tier_dir_prefix(key);
    if (!dir)
        return -ENOMEM;
    int rc = -ENOENT;
    pthread_mutex_lock(&pm->mu);
    size_t i = lower(pm, backend, key);
    if (i < pm->n && cmp(&pm->v[i], backend, key) == 0) {
        *o = pm->v[i].o;
        rc = 0;
    } else {
        size_t d = lower(pm, backend, dir);
        if (d < pm->n && has_prefix(&pm->v[d], backend, dir, strlen(dir)))
            rc = 1;
    }
    pthread_mutex_unlock(&pm->mu);
    free(dir);
    return rc;
}

void pinmeta_children(struct pinmeta *pm, const char *backend, const char *prefix,
                      void (*fn)(const char *name, size_t len, bool is_dir,
                                 const struct pinmeta_obj *o, void *arg),
                      void *arg)
{
    size_t plen = strlen(prefix);
    pthread_mutex_lock(&pm->mu);
    const char *last_dir = NULL; /* keys are sorted: a directory's keys are adjacent */
    size_t last_len = 0;
    for (size_t i = lower(pm, backend, prefix);
         i < pm->n && has_prefix(&pm->v[i], backend, prefix, plen); i++) {
        const char *name = pm->v[i].key + plen;
        const char *slash = strchr(name, '/');
        if (!slash) {
            fn(name, strlen(name), false, &pm->v[i].o, arg);
            continue;
        }
        size_t len = (size_t)(slash - name);
        if (last_dir && last_len == len && memcmp(last_dir, name, len) == 0)
            continue;
        last_dir = name;
        last_len = len;
        fn(name, len, true, NULL, arg);
    }
    pthread_mutex_unlock(&pm->mu);
}
