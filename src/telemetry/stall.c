/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stall.c - the data-stall store (stall.h): per tenant, cumulative wait and compute seconds and
 * steps of its training loops, and a recent stall ratio over its live reporters. Called by the
 * API's POST /v1/progress handler (stall_report) and the telemetry renderers (stall_list,
 * stall_reporters), on the HTTP server's connection threads; one mutex guards everything.
 *
 * DESIGN. Each reporter keeps its decayed sums ew_wait and ew_compute as of its last report
 * (last_ns): a report at now multiplies both by exp(-(now - last_ns) / tau) and adds its seconds.
 * Read later, the tenant's recent ratio is the sum over its live reporters of the decayed wait
 * over that of wait + compute, each reporter's sums decayed from its last report to the newest
 * report of the tenant (the ratio does not change when all are scaled alike, so decaying to the
 * newest rather than to now gives the same value, and exactly a lone reporter's own): a
 * reporter that stops fades out of the ratio against those that go on, and leaves it when it
 * ages out. Cumulative counts are
 * kept per tenant beside the reporters, so removing a reporter never makes a counter go down.
 */
#include "telemetry/stall.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/ioctx.h"
#include "common/strutil.h"

struct stall_reporter {
    char name[STALL_NAME_MAX]; /* "" : a free slot */
    uint64_t wait_ns, compute_ns, steps;
    double ew_wait_s, ew_compute_s; /* decayed, as of last_ns */
    uint64_t last_ns;
};

struct stall_tenant {
    uint64_t wait_ns, compute_ns, steps, reports, dropped;
    unsigned n; /* reporters in use: rep[0..n) */
    struct stall_reporter rep[STALL_NAMES_PER_TENANT];
};

/* The size stall.h states (a tenant's slot with the default number of names). */
_Static_assert(sizeof(struct stall_reporter) == 112, "update the memory figures in stall.h");
_Static_assert(sizeof(struct stall_tenant) == 1840, "update the memory figures in stall.h");

struct stall {
    pthread_mutex_t mu;
    unsigned max_tenants, names;
    uint64_t tau_ns, idle_ns;
    struct stall_tenant **t; /* [max_tenants], NULL until the tenant's first report */
};

int stall_new(const struct stall_config *cfg, struct stall **out)
{
    struct stall_config c = cfg ? *cfg : (struct stall_config){0};
    if (c.max_tenants < 2 || c.max_tenants > TIER_TENANT_IDS_MAX) {
        tier_err_set("stall: max_tenants %u out of range (allowed: 2 .. %u)", c.max_tenants,
                     TIER_TENANT_IDS_MAX);
        return -EINVAL;
    }
    if (c.names_per_tenant > STALL_NAMES_PER_TENANT) {
        tier_err_set("stall: names_per_tenant %u out of range (allowed: 1 .. %u)",
                     c.names_per_tenant, STALL_NAMES_PER_TENANT);
        return -EINVAL;
    }
    struct stall *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->t = calloc(c.max_tenants, sizeof(*s->t));
    if (!s->t) {
        free(s);
        return -ENOMEM;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->max_tenants = c.max_tenants;
    s->names = c.names_per_tenant ? c.names_per_tenant : STALL_NAMES_PER_TENANT;
    s->tau_ns = c.tau_ns ? c.tau_ns : STALL_TAU_NS_DEFAULT;
    s->idle_ns = c.idle_ns ? c.idle_ns : STALL_IDLE_NS_DEFAULT;
    *out = s;
    return 0;
}

void stall_free(struct stall *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->max_tenants; i++)
        free(s->t[i]);
    free(s->t);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static bool name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n < STALL_NAME_MAX && tier_name_chars(name, n);
}

static int seconds_check(const char *field, double v)
{
    if (isfinite(v) && v >= 0 && v <= STALL_REPORT_MAX_S)
        return 0;
    tier_err_set("%s %g is out of range (seconds since the last report, 0 .. %.0f)", field, v,
                 STALL_REPORT_MAX_S);
    return -EINVAL;
}

int stall_report_check(const char *name, double wait_s, double compute_s, double steps)
{
    if (!name_ok(name)) {
        tier_err_set("progress name '%.80s' is not allowed (1 to %d letters, digits, '.', '_', "
                     "'-')",
                     name ? name : "", STALL_NAME_MAX - 1);
        return -EINVAL;
    }
    int rc = seconds_check("wait_s", wait_s);
    if (rc == 0)
        rc = seconds_check("compute_s", compute_s);
    if (rc)
        return rc;
    if (!isfinite(steps) || steps < 0 || steps > (double)STALL_REPORT_MAX_STEPS ||
        steps != floor(steps)) {
        tier_err_set("steps %g is out of range (batches since the last report, a whole number 0 "
                     ".. %llu)",
                     steps, (unsigned long long)STALL_REPORT_MAX_STEPS);
        return -EINVAL;
    }
    return 0;
}

static double decay(const struct stall *s, uint64_t from_ns, uint64_t now_ns)
{
    if (now_ns <= from_ns)
        return 1.0;
    return exp(-(double)(now_ns - from_ns) / (double)s->tau_ns);
}

static uint64_t to_ns(double secs)
{
    return (uint64_t)llround(secs * 1e9);
}

/* Remove the reporters of t silent for idle_ns (order kept). */
static void age(const struct stall *s, struct stall_tenant *t, uint64_t now_ns)
{
    unsigned k = 0;
    for (unsigned i = 0; i < t->n; i++) {
        if (now_ns > t->rep[i].last_ns && now_ns - t->rep[i].last_ns > s->idle_ns)
            continue;
        if (k != i)
            t->rep[k] = t->rep[i];
        k++;
    }
    t->n = k;
}

static unsigned fold_id(const struct stall *s, uint32_t tenant)
{
    return tenant < s->max_tenants ? tenant : TIER_TENANT_OTHER;
}

int stall_report(struct stall *s, uint32_t tenant, const char *name, double wait_s,
                 double compute_s, uint64_t steps, uint64_t now_ns)
{
    if (!s)
        return -EINVAL;
    int rc = stall_report_check(name, wait_s, compute_s, (double)steps);
    if (rc)
        return rc;
    unsigned id = fold_id(s, tenant);
    pthread_mutex_lock(&s->mu);
    struct stall_tenant *t = s->t[id];
    if (!t) {
        t = s->t[id] = calloc(1, sizeof(*t));
        if (!t) {
            pthread_mutex_unlock(&s->mu);
            return -ENOMEM;
        }
    }
    age(s, t, now_ns);
    struct stall_reporter *r = NULL;
    for (unsigned i = 0; i < t->n && !r; i++)
        if (strcmp(t->rep[i].name, name) == 0)
            r = &t->rep[i];
    if (!r) {
        if (t->n < s->names) {
            r = &t->rep[t->n++];
        } else { /* full: the least recently heard reporter makes room */
            r = &t->rep[0];
            for (unsigned i = 1; i < t->n; i++)
                if (t->rep[i].last_ns < r->last_ns)
                    r = &t->rep[i];
            t->dropped++;
        }
        memset(r, 0, sizeof(*r));
        tier_strlcpy(r->name, name, sizeof(r->name));
        r->last_ns = now_ns;
    }
    double f = decay(s, r->last_ns, now_ns);
    r->ew_wait_s = r->ew_wait_s * f + wait_s;
    r->ew_compute_s = r->ew_compute_s * f + compute_s;
    if (now_ns > r->last_ns)
        r->last_ns = now_ns;
    uint64_t w = to_ns(wait_s), c = to_ns(compute_s);
    r->wait_ns += w;
    r->compute_ns += c;
    r->steps += steps;
    t->wait_ns += w;
    t->compute_ns += c;
    t->steps += steps;
    t->reports++;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static double ratio(double w, double c)
{
    return w + c > 0 ? w / (w + c) : -1.0;
}

size_t stall_list(struct stall *s, uint64_t now_ns, struct stall_tenant_stats *out, size_t max)
{
    if (!s)
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (unsigned id = 0; id < s->max_tenants; id++) {
        struct stall_tenant *t = s->t[id];
        if (!t)
            continue;
        age(s, t, now_ns);
        if (n < max) {
            /* the ratio does not change when every sum is scaled alike: decay each to the
             * newest report rather than to now, so a lone reporter's ratio is its own exactly */
            uint64_t newest = 0;
            for (unsigned i = 0; i < t->n; i++)
                if (t->rep[i].last_ns > newest)
                    newest = t->rep[i].last_ns;
            double w = 0, c = 0;
            for (unsigned i = 0; i < t->n; i++) {
                double f = decay(s, t->rep[i].last_ns, newest);
                w += t->rep[i].ew_wait_s * f;
                c += t->rep[i].ew_compute_s * f;
            }
            out[n] = (struct stall_tenant_stats){.tenant = id,
                                                 .wait_ns = t->wait_ns,
                                                 .compute_ns = t->compute_ns,
                                                 .steps = t->steps,
                                                 .reports = t->reports,
                                                 .dropped = t->dropped,
                                                 .reporters = t->n,
                                                 .ratio = ratio(w, c)};
        }
        n++;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

int stall_totals(struct stall *s, uint32_t tenant, uint64_t *wait_ns, uint64_t *compute_ns)
{
    *wait_ns = *compute_ns = 0;
    if (!s || tenant >= s->max_tenants)
        return -ENOENT;
    pthread_mutex_lock(&s->mu);
    const struct stall_tenant *t = s->t[tenant];
    if (t) {
        *wait_ns = t->wait_ns;
        *compute_ns = t->compute_ns;
    }
    pthread_mutex_unlock(&s->mu);
    return t ? 0 : -ENOENT;
}

static int cmp_recent(const void *pa, const void *pb)
{
    const struct stall_reporter_stats *a = pa, *b = pb;
    if (a->idle_s != b->idle_s)
        return a->idle_s < b->idle_s ? -1 : 1;
    return strcmp(a->name, b->name);
}

size_t stall_reporters(struct stall *s, uint32_t tenant, uint64_t now_ns,
                       struct stall_reporter_stats *out, size_t max)
{
    if (!s)
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&s->mu);
    struct stall_tenant *t = s->t[fold_id(s, tenant)];
    if (t) {
        age(s, t, now_ns);
        for (unsigned i = 0; i < t->n && n < max; i++, n++) {
            const struct stall_reporter *r = &t->rep[i];
            out[n] = (struct stall_reporter_stats){
                .wait_ns = r->wait_ns,
                .compute_ns = r->compute_ns,
                .steps = r->steps,
                .ratio = ratio(r->ew_wait_s, r->ew_compute_s), /* decay scales both alike */
                .idle_s = now_ns > r->last_ns ? (double)(now_ns - r->last_ns) / 1e9 : 0.0};
            memcpy(out[n].name, r->name, sizeof(out[n].name));
        }
    }
    pthread_mutex_unlock(&s->mu);
    qsort(out, n, sizeof(*out), cmp_recent);
    return n;
}

int stall_tenant_fold(struct stall *s, uint32_t from, uint32_t to)
{
    if (!s || from >= s->max_tenants || to >= s->max_tenants || from == to)
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    struct stall_tenant *f = s->t[from];
    if (f && (f->reports || f->n)) {
        struct stall_tenant *t = s->t[to];
        if (!t)
            t = s->t[to] = calloc(1, sizeof(*t));
        if (!t) {
            rc = -ENOMEM; /* left in from: the next fold moves it */
        } else {
            t->wait_ns += f->wait_ns;
            t->compute_ns += f->compute_ns;
            t->steps += f->steps;
            t->reports += f->reports;
            t->dropped += f->dropped;
            free(f);
            s->t[from] = NULL;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}
