/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakebe.c - the fake backend of the tests (fakebe.h). One mutex guards the object table, the
 * fault plans and the gate; the call counters and the on/off switches are atomics. No lock is held
 * while a call sleeps, waits at the gate or runs in the real backend.
 */
#include "fakebe.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "common/err.h"
#include "common/strutil.h"

#define FAKEBE_MAX_OBJS 4096

struct mobj {
    char key[BACKEND_KEY_MAX + 1];
    char etag[BACKEND_ETAG_MAX];
    uint64_t size;
};

struct plan {
    struct fakebe_fault f;
    char key_part[BACKEND_KEY_MAX + 1];
    unsigned latency_us;
};

struct fakebe {
    struct backend be;
    struct backend_ops ops; /* this instance's copy (max_parts) */
    struct backend *inner;  /* wrapper mode; NULL for the memory store */
    _Atomic uint64_t calls[FAKEBE_NOPS];
    pthread_mutex_t mu;
    pthread_cond_t gate_cv;
    struct mobj *objs;
    size_t nobjs;
    struct plan plans[FAKEBE_NOPS];
    atomic_bool down, create_lost, blank_etag;
    char stale_part[BACKEND_KEY_MAX + 1]; /* "": none */
    bool gate_set, gate_closed;
    enum fakebe_op gate_op;
    char gate_part[BACKEND_KEY_MAX + 1]; /* "": every key */
    int gate_arrived, gate_passed;
};

static struct fakebe *fb_of(struct backend *be)
{
    return (struct fakebe *)be;
}

static bool key_has(const char *key, const char *part)
{
    return !part[0] || (key && strstr(key, part));
}

/* Everything a call passes before it reaches the store or the real backend: 0 or -errno. */
static int pre(struct fakebe *f, enum fakebe_op op, const char *key, int part_no)
{
    atomic_fetch_add(&f->calls[op], 1);
    pthread_mutex_lock(&f->mu);
    unsigned us = f->plans[op].latency_us;
    pthread_mutex_unlock(&f->mu);
    if (us) {
        struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&f->mu);
    if (f->gate_set && f->gate_op == op && key_has(key, f->gate_part)) {
        f->gate_arrived++;
        while (f->gate_closed)
            pthread_cond_wait(&f->gate_cv, &f->mu);
        f->gate_passed++;
    }
    int rc = 0;
    struct plan *p = &f->plans[op];
    if (atomic_load(&f->down)) {
        rc = -EIO;
        tier_err_set("backend %s is down (injected)", f->be.name);
    } else if (p->f.err && p->f.count != 0 && key_has(key, p->key_part) &&
               (!p->f.part_no || p->f.part_no == part_no)) {
        if (p->f.skip > 0) {
            p->f.skip--;
        } else {
            rc = p->f.err;
            if (p->f.count > 0)
                p->f.count--;
            tier_err_set("injected failure for %s", key ? key : "");
        }
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* ---- the memory store ------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void fakebe_expected(const char *key, const char *etag, uint64_t off, void *buf, size_t len)
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

static struct mobj *find(struct fakebe *f, const char *key)
{
    for (size_t i = 0; i < f->nobjs; i++)
        if (!strcmp(f->objs[i].key, key))
            return &f->objs[i];
    return NULL;
}

static int mem_stat(struct fakebe *f, const char *key, struct backend_stat *st)
{
    pthread_mutex_lock(&f->mu);
    struct mobj *o = find(f, key);
    int r = -ENOENT;
    if (o) {
        memset(st, 0, sizeof(*st));
        st->size_bytes = o->size;
        tier_strlcpy(st->etag, o->etag, sizeof(st->etag));
        r = 0;
    }
    pthread_mutex_unlock(&f->mu);
    return r;
}

static ssize_t mem_read(struct fakebe *f, const char *key, uint64_t off, void *buf, size_t len,
                        const char *if_match, struct backend_stat *st)
{
    char etag[BACKEND_ETAG_MAX];
    uint64_t size;
    pthread_mutex_lock(&f->mu);
    struct mobj *o = find(f, key);
    if (!o) {
        pthread_mutex_unlock(&f->mu);
        return -ENOENT;
    }
    tier_strlcpy(etag, o->etag, sizeof(etag));
    size = o->size;
    pthread_mutex_unlock(&f->mu);
    if (if_match && strcmp(if_match, etag))
        return -ESTALE;
    if (off >= size)
        return 0;
    if (len > size - off)
        len = (size_t)(size - off);
    fakebe_expected(key, etag, off, buf, len);
    if (st) {
        memset(st, 0, sizeof(*st));
        st->size_bytes = size;
        tier_strlcpy(st->etag, etag, sizeof(st->etag));
    }
    return (ssize_t)len;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct backend_entry *)a)->name, ((const struct backend_entry *)b)->name);
}

/* The objects under prefix in key order, deeper keys grouped at delimiter, one page of max_keys
 * after token. */
static int mem_list(struct fakebe *f, const char *prefix, const char *delimiter, const char *token,
                    size_t max_keys, struct backend_list_page *page)
{
    memset(page, 0, sizeof(*page));
    if (!max_keys)
        max_keys = 1000;
    size_t plen = strlen(prefix), n = 0;
    pthread_mutex_lock(&f->mu);
    struct backend_entry *v = calloc(f->nobjs ? f->nobjs : 1, sizeof(*v));
    for (size_t i = 0; v && i < f->nobjs; i++) {
        const struct mobj *o = &f->objs[i];
        if (strncmp(o->key, prefix, plen))
            continue;
        const char *d = delimiter ? strstr(o->key + plen, delimiter) : NULL;
        size_t len = d ? (size_t)(d - o->key) + strlen(delimiter) : strlen(o->key);
        v[n] = (struct backend_entry){.name = strndup(o->key, len), .is_prefix = d != NULL};
        if (!d) {
            v[n].size_bytes = o->size;
            tier_strlcpy(v[n].etag, o->etag, sizeof(v[n].etag));
        }
        n++;
    }
    pthread_mutex_unlock(&f->mu);
    if (!v)
        return -ENOMEM;
    qsort(v, n, sizeof(*v), entry_cmp);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        bool dup = out && !strcmp(v[out - 1].name, v[i].name);
        if (dup || (token && strcmp(v[i].name, token) <= 0) || out == max_keys) {
            if (out == max_keys && !dup && !page->next_token)
                page->next_token = strdup(v[out - 1].name);
            free(v[i].name);
            continue;
        }
        v[out++] = v[i];
    }
    page->entries = v;
    page->n = out;
    return 0;
}

static const char *const op_names[FAKEBE_NOPS] = {
    "stat",         "read",         "list",      "put", "mpu_create",
    "mpu_put_part", "mpu_complete", "mpu_abort", "del", "mpu_list"};

/* pre(), then for the memory store -ENOTSUP: the operations only a wrapper forwards. */
static int pre_wrap(struct fakebe *f, enum fakebe_op op, const char *key, int part_no)
{
    int rc = pre(f, op, key, part_no);
    if (rc || f->inner)
        return rc;
    tier_err_set("backend %s: the memory store does no %s", f->be.name, op_names[op]);
    return -ENOTSUP;
}

/* ---- the operations --------------------------------------------------------------------- */

static int fb_stat(struct backend *be, const char *key, struct backend_stat *st)
{
    struct fakebe *f = fb_of(be);
    int rc = pre(f, FAKEBE_STAT, key, 0);
    if (rc)
        return rc;
    return f->inner ? backend_stat(f->inner, NULL, key, st) : mem_stat(f, key, st);
}

static ssize_t fb_read(struct backend *be, const char *key, uint64_t off, void *buf, size_t len,
                       const char *if_match, struct backend_stat *st)
{
    struct fakebe *f = fb_of(be);
    int rc = pre(f, FAKEBE_READ, key, 0);
    if (rc)
        return rc;
    return f->inner ? backend_read(f->inner, NULL, key, off, buf, len, if_match, st)
                    : mem_read(f, key, off, buf, len, if_match, st);
}

static int fb_list(struct backend *be, const char *prefix, const char *delimiter, const char *token,
                   size_t max_keys, struct backend_list_page *page)
{
    struct fakebe *f = fb_of(be);
    int rc = pre(f, FAKEBE_LIST, prefix, 0);
    if (rc)
        return rc;
    rc = f->inner ? backend_list(f->inner, NULL, prefix, delimiter, token, max_keys, page)
                  : mem_list(f, prefix, delimiter, token, max_keys, page);
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; rc == 0 && f->stale_part[0] && i < page->n; i++) {
        if (strstr(page->entries[i].name, f->stale_part))
            tier_strlcpy(page->entries[i].etag, "listed-version", sizeof(page->entries[i].etag));
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fb_put(struct backend *be, const char *key, const void *buf, size_t len, char *etag)
{
    struct fakebe *f = fb_of(be);
    int rc = pre_wrap(f, FAKEBE_PUT, key, 0);
    if (rc)
        return rc;
    rc = backend_put(f->inner, NULL, key, buf, len, etag);
    if (rc == 0 && etag && atomic_load(&f->blank_etag))
        etag[0] = '\0'; /* a server that sends no ETag header */
    return rc;
}

static int fb_create(struct backend *be, const char *key, char **id)
{
    struct fakebe *f = fb_of(be);
    int rc = pre_wrap(f, FAKEBE_MPU_CREATE, key, 0);
    if (rc)
        return rc;
    if (!atomic_exchange(&f->create_lost, false))
        return backend_mpu_create(f->inner, NULL, key, id);
    /* the server made the upload, the reply was lost; then the backend goes away */
    char *made = NULL;
    rc = backend_mpu_create(f->inner, NULL, key, &made);
    free(made);
    fakebe_set_down(be, true);
    tier_err_set("backend %s: the reply to a multipart create was lost (injected)", be->name);
    return rc ? rc : -EIO;
}

static int fb_part(struct backend *be, const char *key, const char *id, int no, const void *buf,
                   size_t len, char *etag)
{
    struct fakebe *f = fb_of(be);
    int rc = pre_wrap(f, FAKEBE_MPU_PART, key, no);
    return rc ? rc : backend_mpu_put_part(f->inner, NULL, key, id, no, buf, len, etag);
}

static int fb_complete(struct backend *be, const char *key, const char *id,
                       const struct backend_part *parts, size_t n, char *etag)
{
    struct fakebe *f = fb_of(be);
    int rc = pre_wrap(f, FAKEBE_MPU_COMPLETE, key, 0);
    return rc ? rc : backend_mpu_complete(f->inner, NULL, key, id, parts, n, etag);
}

static int fb_abort(struct backend *be, const char *key, const char *id)
{
    struct fakebe *f = fb_of(be);
    int rc = pre_wrap(f, FAKEBE_MPU_ABORT, key, 0);
    return rc ? rc : backend_mpu_abort(f->inner, NULL, key, id);
}

static int fb_del(struct backend *be, const char *key)
{
    struct fakebe *f = fb_of(be);
    int rc = pre_wrap(f, FAKEBE_DEL, key, 0);
    return rc ? rc : backend_del(f->inner, NULL, key);
}

static int fb_mpu_list(struct backend *be, const char *key, struct backend_mpu **out, size_t *n)
{
    struct fakebe *f = fb_of(be);
    int rc = pre_wrap(f, FAKEBE_MPU_LIST, key, 0);
    return rc ? rc : backend_mpu_list(f->inner, NULL, key, out, n);
}

static int fb_key_check(struct backend *be, const char *key)
{
    struct fakebe *f = fb_of(be);
    return f->inner ? backend_key_check(f->inner, key) : 0;
}

static void fb_destroy(struct backend *be)
{
    struct fakebe *f = fb_of(be);
    pthread_cond_destroy(&f->gate_cv);
    pthread_mutex_destroy(&f->mu);
    free(f->objs);
    free(f->be.name);
    free(f);
}

static const struct backend_ops fakebe_ops = {
    .stat = fb_stat,
    .read = fb_read,
    .list = fb_list,
    .put = fb_put,
    .mpu_create = fb_create,
    .mpu_put_part = fb_part,
    .mpu_complete = fb_complete,
    .mpu_abort = fb_abort,
    .del = fb_del,
    .destroy = fb_destroy,
    .mpu_list = fb_mpu_list,
    .key_check = fb_key_check,
};

static struct backend *fb_new(const char *name, struct backend *inner)
{
    struct fakebe *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->ops = fakebe_ops;
    f->ops.type = inner ? "fake-wrap" : "fake-mem";
    f->inner = inner;
    if (!inner)
        f->objs = calloc(FAKEBE_MAX_OBJS, sizeof(*f->objs));
    f->be.ops = &f->ops;
    f->be.name = strdup(name);
    if ((!inner && !f->objs) || !f->be.name) {
        free(f->objs);
        free(f->be.name);
        free(f);
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->gate_cv, NULL);
    return &f->be;
}

struct backend *fakebe_mem_new(const char *name)
{
    return fb_new(name, NULL);
}

struct backend *fakebe_wrap_new(const char *name, struct backend *inner)
{
    return inner ? fb_new(name, inner) : NULL;
}

/* ---- controls --------------------------------------------------------------------------- */

void fakebe_add(struct backend *be, const char *key, uint64_t size, const char *etag)
{
    struct fakebe *f = fb_of(be);
    pthread_mutex_lock(&f->mu);
    struct mobj *o = f->objs ? find(f, key) : NULL;
    if (!o && f->objs && f->nobjs < FAKEBE_MAX_OBJS)
        o = &f->objs[f->nobjs++];
    if (o) {
        tier_strlcpy(o->key, key, sizeof(o->key));
        tier_strlcpy(o->etag, etag, sizeof(o->etag));
        o->size = size;
    }
    pthread_mutex_unlock(&f->mu);
}

uint64_t fakebe_calls(struct backend *be, enum fakebe_op op)
{
    return atomic_load(&fb_of(be)->calls[op]);
}

void fakebe_fail(struct backend *be, enum fakebe_op op, const struct fakebe_fault *fault)
{
    struct fakebe *f = fb_of(be);
    pthread_mutex_lock(&f->mu);
    struct plan *p = &f->plans[op];
    p->f = fault ? *fault : (struct fakebe_fault){0};
    tier_strlcpy(p->key_part, fault && fault->key_part ? fault->key_part : "", sizeof(p->key_part));
    p->f.key_part = NULL; /* the copy in p->key_part is used */
    pthread_mutex_unlock(&f->mu);
}

void fakebe_fail_next(struct backend *be, enum fakebe_op op, int err, int count)
{
    fakebe_fail(be, op, &(struct fakebe_fault){.err = err, .count = count});
}

void fakebe_set_latency_us(struct backend *be, enum fakebe_op op, unsigned us)
{
    struct fakebe *f = fb_of(be);
    pthread_mutex_lock(&f->mu);
    f->plans[op].latency_us = us;
    pthread_mutex_unlock(&f->mu);
}

void fakebe_set_down(struct backend *be, bool down)
{
    atomic_store(&fb_of(be)->down, down);
}

bool fakebe_is_down(struct backend *be)
{
    return atomic_load(&fb_of(be)->down);
}

void fakebe_gate_close(struct backend *be, enum fakebe_op op, const char *key_part)
{
    struct fakebe *f = fb_of(be);
    pthread_mutex_lock(&f->mu);
    f->gate_set = true;
    f->gate_closed = true;
    f->gate_op = op;
    tier_strlcpy(f->gate_part, key_part ? key_part : "", sizeof(f->gate_part));
    f->gate_arrived = f->gate_passed = 0;
    pthread_mutex_unlock(&f->mu);
}

int fakebe_gate_open(struct backend *be)
{
    struct fakebe *f = fb_of(be);
    pthread_mutex_lock(&f->mu);
    int arrived = f->gate_arrived;
    f->gate_closed = false;
    pthread_cond_broadcast(&f->gate_cv);
    pthread_mutex_unlock(&f->mu);
    return arrived;
}

static int gate_count(struct backend *be, bool passed)
{
    struct fakebe *f = fb_of(be);
    pthread_mutex_lock(&f->mu);
    int n = passed ? f->gate_passed : f->gate_arrived;
    pthread_mutex_unlock(&f->mu);
    return n;
}

int fakebe_gate_arrived(struct backend *be)
{
    return gate_count(be, false);
}

int fakebe_gate_passed(struct backend *be)
{
    return gate_count(be, true);
}

void fakebe_lose_next_create(struct backend *be)
{
    atomic_store(&fb_of(be)->create_lost, true);
}

void fakebe_blank_put_etag(struct backend *be, bool blank)
{
    atomic_store(&fb_of(be)->blank_etag, blank);
}

void fakebe_list_stale(struct backend *be, const char *key_part)
{
    struct fakebe *f = fb_of(be);
    pthread_mutex_lock(&f->mu);
    tier_strlcpy(f->stale_part, key_part ? key_part : "", sizeof(f->stale_part));
    pthread_mutex_unlock(&f->mu);
}

void fakebe_set_max_parts(struct backend *be, int max_parts)
{
    fb_of(be)->ops.max_parts = max_parts;
}
