/* SPDX-License-Identifier: Apache-2.0 */
/* fakejobs.c - fake jobs_ops for the job registry's tests (fakejobs.h). */
#include "fakejobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void breach(const char *what, const char *key)
{
    fprintf(stderr, "fakejobs: %s%s%s\n", what, key ? ": " : "", key ? key : "");
    abort();
}

struct fakejobs_pin *fakejobs_pin_of(struct fakejobs *f, const char *be, const char *prefix)
{
    size_t n = strlen(be) + strlen(prefix) + 2;
    char *key = malloc(n);
    if (!key)
        abort();
    snprintf(key, n, "%s:%s", be, prefix);
    for (int i = 0; i < f->npin; i++) {
        if (strcmp(f->pin[i].key, key) == 0) {
            free(key);
            return &f->pin[i];
        }
    }
    if (f->npin == f->cap) {
        int cap = f->cap ? 2 * f->cap : 64;
        struct fakejobs_pin *pin = realloc(f->pin, (size_t)cap * sizeof(*pin));
        if (!pin)
            abort();
        f->pin = pin;
        f->cap = cap;
    }
    bool hand = f->hand_rule && strcmp(prefix, f->hand_rule) == 0;
    f->pin[f->npin] = (struct fakejobs_pin){.key = key, .hand = hand};
    return &f->pin[f->npin++];
}

const struct fakejobs_pin *fakejobs_still_pinned(const struct fakejobs *f)
{
    for (int i = 0; i < f->npin; i++)
        if (!f->pin[i].hand && f->pin[i].pins != f->pin[i].unpins)
            return &f->pin[i];
    return NULL;
}

void fakejobs_fini(struct fakejobs *f)
{
    for (int i = 0; i < f->npin; i++)
        free(f->pin[i].key);
    free(f->pin);
    f->pin = NULL;
    f->npin = f->cap = 0;
}

static void f_space(void *ud, uint64_t *level, uint64_t *pin_budget, uint64_t *pinned)
{
    struct fakejobs *f = ud;
    *level = f->level;
    *pin_budget = f->pin_budget;
    *pinned = f->pinned;
}

static uint64_t f_link(void *ud, const char *be)
{
    struct fakejobs *f = ud;
    return strcmp(be, "warm") == 0 ? f->link_warm : 0;
}

static int f_pin(void *ud, const char *be, const char *prefix)
{
    struct fakejobs *f = ud;
    if (f->fail_pin) {
        int rc = f->fail_pin;
        f->fail_pin = 0;
        return rc;
    }
    struct fakejobs_pin *p = fakejobs_pin_of(f, be, prefix);
    if (p->hand)
        return 0; /* cache_pin answers 0 for a rule that exists */
    if (p->pins != p->unpins)
        breach("a rule pinned twice by jobs at once", p->key);
    p->pins++;
    return 0;
}

static int f_unpin(void *ud, const char *be, const char *prefix)
{
    struct fakejobs *f = ud;
    struct fakejobs_pin *p = fakejobs_pin_of(f, be, prefix);
    if (p->hand)
        breach("a rule pinned by hand was unpinned by a job", p->key);
    p->unpins++;
    if (p->pins != p->unpins)
        breach("a rule unpinned that jobs had not pinned", p->key);
    return 0;
}

static bool f_pin_exists(void *ud, const char *be, const char *prefix)
{
    struct fakejobs *f = ud;
    struct fakejobs_pin *p = fakejobs_pin_of(f, be, prefix);
    return p->hand || p->pins > p->unpins;
}

static int f_stage(void *ud, uint32_t tenant, const char *const *paths, size_t n, bool cluster,
                   uint64_t *id)
{
    (void)tenant;
    struct fakejobs *f = ud;
    if (n == 0 || paths[0][0] != '/')
        breach("a staging of no mount path", NULL);
    f->last_cluster = cluster;
    if (f->on_stage) {
        void (*fn)(struct fakejobs *) = f->on_stage;
        f->on_stage = NULL;
        fn(f);
    }
    if (f->busy > 0) {
        f->busy--;
        return -EBUSY;
    }
    if (f->nstages + 1 >= FAKEJOBS_STAGES)
        return -EBUSY;
    *id = ++f->nstages;
    f->prog[*id] = (struct stage_progress){.state = STAGE_RUNNING};
    return 0;
}

static int f_progress(void *ud, uint64_t id, struct stage_progress *p)
{
    struct fakejobs *f = ud;
    if (id == 0 || id > f->nstages || f->gone[id])
        return -ENOENT;
    *p = f->prog[id];
    return 0;
}

static int f_cancel(void *ud, uint64_t id)
{
    struct fakejobs *f = ud;
    if (id == 0 || id > f->nstages)
        breach("cancel of a staging never started", NULL);
    f->last_cancel = id;
    f->cancels++;
    return 0;
}

void fakejobs_ops(struct fakejobs *f, struct jobs_ops *ops)
{
    *ops = (struct jobs_ops){.space = f_space,
                             .link_capacity = f_link,
                             .pin = f_pin,
                             .unpin = f_unpin,
                             .pin_exists = f_pin_exists,
                             .stage = f_stage,
                             .stage_progress = f_progress,
                             .cancel = f_cancel,
                             .ud = f};
}
