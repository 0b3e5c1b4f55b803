/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu.c - the NVML sampler (gpu.h): loads the library at run time, samples the per-process
 * utilisation of every device on its own thread and keeps a recent figure per tenant. Called by
 * the daemon (gpu_open, gpu_start, gpu_close) and the telemetry renderers (gpu_list,
 * gpu_stats_get); locking in gpu.h.
 *
 * DESIGN. The NVML types below are declared here, ABI-exact with NVML's public nvml.h (the
 * header is not needed to build): nvmlReturn_t is an int-sized enum, a device handle an opaque
 * pointer, and nvmlProcessUtilizationSample_t five unsigned ints and one unsigned long long in
 * nvml.h's order. nvmlDeviceGetProcessUtilization is called twice per device and pass: with a
 * NULL buffer it answers INSUFFICIENT_SIZE and the number of samples newer than lastSeen, then
 * fills the buffer, offered whole (NOT_FOUND either time: none since lastSeen); the buffer grows
 * to the count the first call gave, up to GPU_SAMPLES_MAX. lastSeen per device is the newest
 * timeStamp NVML returned (its clock, epoch microseconds; tierd's clock never sets it); samples
 * at or before lastSeen, or with pid 0, are left out. More samples than GPU_SAMPLES_MAX: none is
 * read and lastSeen stays, so the next call asks again (NVML's own history is bounded).
 */
#include "telemetry/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/ioctx.h"
#include "common/log.h"
#include "common/timeutil.h"

/* ---- NVML's types (nvml.h) ----------------------------------------------------------------- */

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned int pid;
    unsigned long long timeStamp; /* CPU time in microseconds */
    unsigned int smUtil;          /* percent */
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvml.h's layout on LP64");

struct nvml {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *,
                         unsigned long long);
    const char *(*error_string)(nvmlReturn_t); /* optional */
};

/* ---- state --------------------------------------------------------------------------------- */

struct gpu_tenant {
    double util;      /* 0..1 */
    uint64_t last_ns; /* the pass that set it; 0: never */
    unsigned procs;
};
_Static_assert(sizeof(struct gpu_tenant) == 24, "update the memory figures in gpu.h");

struct gpu {
    void *lib;
    struct nvml f;
    uint64_t interval_ns;
    unsigned max_tenants;
    int (*tenant_of)(void *ud, uint32_t pid, uint32_t *tenant);
    void *tenant_of_ud;
    unsigned ndev;
    nvmlDevice_t dev[GPU_DEVICES_MAX];

    /* pass_mu: one pass at a time; these belong to the pass */
    pthread_mutex_t pass_mu;
    unsigned long long last_seen[GPU_DEVICES_MAX];
    bool failing[GPU_DEVICES_MAX];       /* the device's last call failed: log only the first */
    bool dropped[GPU_DEVICES_MAX];       /* NOT_SUPPORTED or NO_PERMISSION: no longer asked */
    nvmlProcessUtilizationSample_t *buf; /* [cap] */
    unsigned cap;                        /* GPU_SAMPLES_MIN .. GPU_SAMPLES_MAX */
    double *sum;                         /* [max_tenants] */
    unsigned *n;                         /* [max_tenants] */

    /* mu: the figures and counters */
    pthread_mutex_t mu;
    struct gpu_tenant *t; /* [max_tenants] */
    struct gpu_stats st;

    /* run_mu: the thread */
    pthread_mutex_t run_mu;
    pthread_cond_t run_cv;
    pthread_t thread;
    bool running, stop;
};

static const char *nvml_msg(const struct gpu *g, nvmlReturn_t r)
{
    const char *s = g->f.error_string ? g->f.error_string(r) : NULL;
    return s ? s : "NVML error";
}

/* Resolve the symbols; -ENOSYS naming the first one missing. */
static int resolve(void *lib, const char *path, struct nvml *f)
{
    static const char *const names[] = {"nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2",
                                        "nvmlDeviceGetHandleByIndex_v2",
                                        "nvmlDeviceGetProcessUtilization"};
    void *p[5];
    for (int i = 0; i < 5; i++) {
        p[i] = dlsym(lib, names[i]);
        if (!p[i]) {
            tier_err_set("gpu: %s has no symbol %s", path, names[i]);
            return -ENOSYS;
        }
    }
    /* dlsym answers a data pointer; POSIX guarantees it converts to a function pointer */
    memcpy(&f->init, &p[0], sizeof(p[0]));
    memcpy(&f->shutdown, &p[1], sizeof(p[1]));
    memcpy(&f->count, &p[2], sizeof(p[2]));
    memcpy(&f->handle, &p[3], sizeof(p[3]));
    memcpy(&f->util, &p[4], sizeof(p[4]));
    void *es = dlsym(lib, "nvmlErrorString");
    memcpy(&f->error_string, &es, sizeof(es));
    return 0;
}

/* Free what gpu_open allocated (the library is closed by the caller). */
static void gpu_destroy(struct gpu *g)
{
    pthread_cond_destroy(&g->run_cv);
    pthread_mutex_destroy(&g->run_mu);
    pthread_mutex_destroy(&g->mu);
    pthread_mutex_destroy(&g->pass_mu);
    free(g->buf);
    free(g->sum);
    free(g->n);
    free(g->t);
    free(g);
}

static struct gpu *gpu_alloc(const struct gpu_config *c)
{
    struct gpu *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->max_tenants = c->max_tenants;
    g->interval_ns = c->interval_ns ? c->interval_ns : GPU_INTERVAL_NS_DEFAULT;
    g->tenant_of = c->tenant_of;
    g->tenant_of_ud = c->tenant_of_ud;
    g->cap = GPU_SAMPLES_MIN;
    g->buf = calloc(g->cap, sizeof(*g->buf));
    g->sum = calloc(c->max_tenants, sizeof(*g->sum));
    g->n = calloc(c->max_tenants, sizeof(*g->n));
    g->t = calloc(c->max_tenants, sizeof(*g->t));
    pthread_mutex_init(&g->pass_mu, NULL);
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->run_mu, NULL);
    tier_cond_init_mono(&g->run_cv); /* the interval is not moved by clock steps */
    if (!g->buf || !g->sum || !g->n || !g->t) {
        gpu_destroy(g);
        return NULL;
    }
    g->st.interval_ns = g->interval_ns;
    return g;
}

/* nvmlInit_v2 and the devices' handles. 0, -ENOENT (no driver, or no device: an info line, as
 * for an absent library) or -EIO (tier_err_msg set). */
static int nvml_start(struct gpu *g, const char *path)
{
    nvmlReturn_t r = g->f.init();
    if (r == NVML_ERROR_DRIVER_NOT_LOADED || r == NVML_ERROR_LIBRARY_NOT_FOUND) {
        log_info("gpu: %s: nvmlInit_v2: %s (%d): no GPU sampling", path, nvml_msg(g, r), r);
        tier_err_set("gpu: %s: no driver", path);
        return -ENOENT;
    }
    if (r != NVML_SUCCESS) {
        tier_err_set("gpu: %s: nvmlInit_v2: %s (%d)", path, nvml_msg(g, r), r);
        return -EIO;
    }
    unsigned int n = 0;
    r = g->f.count(&n);
    if (r != NVML_SUCCESS) {
        tier_err_set("gpu: %s: nvmlDeviceGetCount_v2: %s (%d)", path, nvml_msg(g, r), r);
        g->f.shutdown();
        return -EIO;
    }
    if (n > GPU_DEVICES_MAX)
        log_warn("gpu: %u devices, sampling the first %d", n, GPU_DEVICES_MAX);
    for (unsigned i = 0; i < n && g->ndev < GPU_DEVICES_MAX; i++) {
        r = g->f.handle(i, &g->dev[g->ndev]);
        if (r != NVML_SUCCESS) {
            log_warn("gpu: nvmlDeviceGetHandleByIndex_v2(%u): %s (%d): device left out", i,
                     nvml_msg(g, r), r);
            continue;
        }
        g->ndev++;
    }
    g->st.devices = g->ndev;
    if (g->ndev == 0) {
        log_info("gpu: %s: no GPU: no GPU sampling", path);
        tier_err_set("gpu: %s: no device", path);
        g->f.shutdown();
        return -ENOENT;
    }
    return 0;
}

int gpu_open(const struct gpu_config *cfg, struct gpu **out)
{
    struct gpu_config c = cfg ? *cfg : (struct gpu_config){0};
    const char *path = c.library ? c.library : GPU_LIBRARY_DEFAULT;
    if (c.max_tenants < 2 || c.max_tenants > TIER_TENANT_IDS_MAX) {
        tier_err_set("gpu: max_tenants %u out of range (allowed: 2 .. %u)", c.max_tenants,
                     TIER_TENANT_IDS_MAX);
        return -EINVAL;
    }
    if (c.interval_ns > GPU_INTERVAL_NS_MAX) {
        tier_err_set("gpu: interval %llu ns out of range (allowed: up to 1 h)",
                     (unsigned long long)c.interval_ns);
        return -EINVAL;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        log_info("gpu: NVML not loaded (%s): no GPU sampling", dlerror());
        tier_err_set("gpu: %s not loaded", path);
        return -ENOENT;
    }
    struct gpu *g = gpu_alloc(&c);
    if (!g) {
        dlclose(lib);
        return -ENOMEM;
    }
    g->lib = lib;
    int rc = resolve(lib, path, &g->f);
    if (rc == 0)
        rc = nvml_start(g, path);
    if (rc) {
        gpu_destroy(g);
        dlclose(lib);
        return rc;
    }
    *out = g;
    return 0;
}

/* ---- a pass -------------------------------------------------------------------------------- */

static int by_pid_then_time(const void *a, const void *b)
{
    const nvmlProcessUtilizationSample_t *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return (x->timeStamp > y->timeStamp) - (x->timeStamp < y->timeStamp);
}

/* An NVML error of device dev: counted; logged when its previous call had none. A device that
 * does not support per-process samples, or does not let tierd read them (a MIG parent, a vGPU),
 * is dropped from the sampled set with one info line instead. */
static void pass_error(struct gpu *g, const char *what, unsigned dev, nvmlReturn_t r)
{
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_NO_PERMISSION) {
        log_info("gpu: %s(device %u): %s (%d): device no longer sampled", what, dev, nvml_msg(g, r),
                 r);
        g->dropped[dev] = true;
        pthread_mutex_lock(&g->mu);
        g->st.devices--;
        pthread_mutex_unlock(&g->mu);
        return;
    }
    if (!g->failing[dev])
        log_warn("gpu: %s(device %u): %s (%d); sampling goes on", what, dev, nvml_msg(g, r), r);
    g->failing[dev] = true;
    pthread_mutex_lock(&g->mu);
    g->st.errors++;
    pthread_mutex_unlock(&g->mu);
}

/* Grow the sample buffer to hold want samples (at most GPU_SAMPLES_MAX); false when it cannot. */
static bool buf_fit(struct gpu *g, unsigned want)
{
    if (want <= g->cap)
        return true;
    if (g->cap >= GPU_SAMPLES_MAX)
        return false;
    unsigned cap = want < GPU_SAMPLES_MAX ? want : GPU_SAMPLES_MAX;
    nvmlProcessUtilizationSample_t *b = realloc(g->buf, (size_t)cap * sizeof(*b));
    if (!b)
        return false;
    g->buf = b;
    g->cap = cap;
    return want <= cap;
}

/* The samples of device d newer than its last_seen into g->buf: how many (0 on an error). Only
 * samples newer than last_seen with a pid are kept; last_seen moves to the newest timeStamp
 * read (NVML's clock). More samples than GPU_SAMPLES_MAX: none is read, they are counted in
 * truncated and last_seen stays (NVML keeps a bounded history: the next call asks again). */
static unsigned fetch(struct gpu *g, unsigned d)
{
    unsigned int n = 0;
    unsigned long long since = g->last_seen[d];
    nvmlReturn_t r = g->f.util(g->dev[d], NULL, &n, since);
    if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND ||
        (r == NVML_ERROR_INSUFFICIENT_SIZE && !n)) {
        g->failing[d] = false;
        return 0;
    }
    if (r != NVML_ERROR_INSUFFICIENT_SIZE) {
        pass_error(g, "nvmlDeviceGetProcessUtilization", d, r);
        return 0;
    }
    /* the whole buffer: samples that arrived since the first call fit too */
    unsigned want = n;
    (void)buf_fit(g, want);
    n = g->cap;
    r = g->f.util(g->dev[d], g->buf, &n, since);
    if (r == NVML_ERROR_NOT_FOUND) {
        g->failing[d] = false;
        return 0;
    }
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        g->failing[d] = false;
        pthread_mutex_lock(&g->mu);
        g->st.truncated += n > want ? n : want;
        pthread_mutex_unlock(&g->mu);
        return 0;
    }
    if (r != NVML_SUCCESS) {
        pass_error(g, "nvmlDeviceGetProcessUtilization", d, r);
        return 0;
    }
    g->failing[d] = false;
    if (n > g->cap) /* a library that wrote no more than it was given, but says so */
        n = g->cap;
    unsigned kept = 0;
    for (unsigned i = 0; i < n; i++) {
        if (g->buf[i].timeStamp > g->last_seen[d])
            g->last_seen[d] = g->buf[i].timeStamp;
        if (g->buf[i].timeStamp <= since || g->buf[i].pid == 0)
            continue;
        g->buf[kept++] = g->buf[i];
    }
    return kept;
}

/* Add each process's mean over its samples in g->buf[0..n) to its tenant's sum. */
static void account(struct gpu *g, unsigned n, uint64_t *used, uint64_t *unresolved)
{
    qsort(g->buf, n, sizeof(*g->buf), by_pid_then_time);
    for (unsigned i = 0, j; i < n; i = j) {
        double sum = 0;
        for (j = i; j < n && g->buf[j].pid == g->buf[i].pid; j++)
            sum += (g->buf[j].smUtil > 100 ? 100 : g->buf[j].smUtil) / 100.0;
        uint32_t tenant = TIER_TENANT_DEFAULT;
        if (g->tenant_of && g->tenant_of(g->tenant_of_ud, g->buf[i].pid, &tenant) != 0) {
            *unresolved += j - i;
            continue;
        }
        if (tenant >= g->max_tenants)
            tenant = TIER_TENANT_OTHER;
        g->sum[tenant] += sum / (j - i);
        g->n[tenant]++;
        *used += j - i;
    }
}

void gpu_sample(struct gpu *g, uint64_t now_ns)
{
    pthread_mutex_lock(&g->pass_mu);
    memset(g->sum, 0, g->max_tenants * sizeof(*g->sum));
    memset(g->n, 0, g->max_tenants * sizeof(*g->n));
    uint64_t used = 0, unresolved = 0;
    for (unsigned d = 0; d < g->ndev; d++) {
        if (g->dropped[d])
            continue;
        unsigned n = fetch(g, d);
        account(g, n, &used, &unresolved);
    }
    pthread_mutex_lock(&g->mu);
    for (unsigned tn = 0; tn < g->max_tenants; tn++)
        if (g->n[tn]) {
            g->t[tn].util = g->sum[tn] / g->n[tn];
            g->t[tn].procs = g->n[tn];
            g->t[tn].last_ns = now_ns ? now_ns : 1;
        }
    g->st.passes++;
    g->st.samples += used;
    g->st.unresolved += unresolved;
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_unlock(&g->pass_mu);
}

/* ---- readers ------------------------------------------------------------------------------- */

/* Does tenant slot t hold a figure recent as of now_ns? Under mu. */
static bool recent(const struct gpu *g, const struct gpu_tenant *t, uint64_t now_ns)
{
    if (!t->last_ns)
        return false;
    return now_ns < t->last_ns || now_ns - t->last_ns < GPU_FADE_INTERVALS * g->interval_ns;
}

size_t gpu_list(struct gpu *g, uint64_t now_ns, struct gpu_tenant_stats *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&g->mu);
    for (unsigned tn = 0; tn < g->max_tenants; tn++) {
        const struct gpu_tenant *t = &g->t[tn];
        if (!recent(g, t, now_ns))
            continue;
        if (n < max)
            out[n] = (struct gpu_tenant_stats){
                .tenant = tn,
                .util = t->util,
                .age_s = now_ns > t->last_ns ? (double)(now_ns - t->last_ns) / 1e9 : 0,
                .procs = t->procs};
        n++;
    }
    pthread_mutex_unlock(&g->mu);
    return n;
}

int gpu_tenant_util(struct gpu *g, uint32_t tenant, uint64_t now_ns, double *util)
{
    if (!g || tenant >= g->max_tenants)
        return -ENOENT;
    int rc = -ENOENT;
    pthread_mutex_lock(&g->mu);
    if (recent(g, &g->t[tenant], now_ns)) {
        *util = g->t[tenant].util;
        rc = 0;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void gpu_tenant_forget(struct gpu *g, uint32_t tenant)
{
    if (!g || tenant >= g->max_tenants)
        return;
    pthread_mutex_lock(&g->mu);
    g->t[tenant] = (struct gpu_tenant){0};
    pthread_mutex_unlock(&g->mu);
}

void gpu_stats_get(struct gpu *g, struct gpu_stats *st)
{
    pthread_mutex_lock(&g->mu);
    *st = g->st;
    pthread_mutex_unlock(&g->mu);
}

/* ---- the thread ---------------------------------------------------------------------------- */

static void *gpu_main(void *arg)
{
    struct gpu *g = arg;
    pthread_mutex_lock(&g->run_mu);
    while (!g->stop) {
        pthread_mutex_unlock(&g->run_mu);
        gpu_sample(g, tier_now_mono_ns());
        pthread_mutex_lock(&g->run_mu);
        struct timespec until = tier_mono_deadline(g->interval_ns);
        while (!g->stop && pthread_cond_timedwait(&g->run_cv, &g->run_mu, &until) == 0)
            ;
    }
    pthread_mutex_unlock(&g->run_mu);
    return NULL;
}

int gpu_start(struct gpu *g)
{
    pthread_mutex_lock(&g->run_mu);
    if (g->running) {
        pthread_mutex_unlock(&g->run_mu);
        return -EALREADY;
    }
    g->stop = false;
    int rc = pthread_create(&g->thread, NULL, gpu_main, g);
    g->running = rc == 0;
    pthread_mutex_unlock(&g->run_mu);
    return -rc;
}

void gpu_stop(struct gpu *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->run_mu);
    bool running = g->running;
    g->stop = true;
    g->running = false;
    pthread_cond_broadcast(&g->run_cv);
    pthread_mutex_unlock(&g->run_mu);
    if (running)
        pthread_join(g->thread, NULL);
}

void gpu_close(struct gpu *g)
{
    if (!g)
        return;
    gpu_stop(g);
    g->f.shutdown();
    void *lib = g->lib;
    gpu_destroy(g);
    dlclose(lib);
}
