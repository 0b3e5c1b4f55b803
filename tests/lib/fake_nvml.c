/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_nvml.c - a stand-in for NVML (libnvidia-ml.so.1), built only for the tests as a shared
 * library that src/telemetry/gpu.c loads with dlopen: the five functions gpu.c resolves and
 * nvmlErrorString, with nvml.h's signatures and types, answering canned process samples. A test
 * loads the same file with dlopen (same handle, same state) and steers it through the fake_nvml_*
 * setters. Built twice: FAKE_NVML_NO_UTIL leaves out nvmlDeviceGetProcessUtilization, for the
 * missing-symbol test.
 *
 * Loaded by tierd itself (tests/integration/test_gpu_fuse.sh puts it on LD_LIBRARY_PATH as
 * libnvidia-ml.so.1), it is steered by the environment instead: FAKE_NVML_PID, read at the first
 * nvmlInit_v2, is a process every device reports at FAKE_NVML_SM percent (default 70).
 *
 * Each device keeps a ring of its last FAKE_RING samples (pid, SM percent, a timeStamp in epoch
 * microseconds from one clock that starts at FAKE_EPOCH_US and goes up by 1,000 per sample), and
 * nvmlDeviceGetProcessUtilization answers those newer than lastSeen, as NVML does: NOT_FOUND
 * when there are none, INSUFFICIENT_SIZE and the count with a NULL buffer or too small a count.
 * By default (auto) each call with a NULL buffer first appends one sample per process set, so
 * every pass of gpu.c finds fresh ones; fake_nvml_set_auto(0) stops that, and a test appends
 * samples itself (fake_nvml_push, several per pid if it likes). fake_nvml_last_seen tells the
 * lastSeen of a device's latest call. Setters and calls take one mutex (the sampler calls from
 * its thread).
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define FAKE_PROCS 8
#define FAKE_DEVICES 2
#define FAKE_RING 256
#define FAKE_EPOCH_US 1700000000000000ULL

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    unsigned pid, sm;
} procs[FAKE_PROCS];
static unsigned nprocs;
static unsigned extra;         /* samples claimed beyond procs (a flood: never handed out) */
static int fail_util;          /* nvmlDeviceGetProcessUtilization answers this; 0: samples */
static int fail_util_dev = -1; /* ... on this device alone; -1: every device */
static int fail_init_count;    /* nvmlDeviceGetCount_v2 answers 0 devices when set */
static int auto_samples = 1;   /* a NULL-buffer call appends one sample per process first */
static unsigned long long clock_us = FAKE_EPOCH_US;
static struct ring {
    nvmlProcessUtilizationSample_t s[FAKE_RING];
    unsigned n, next;             /* held, and the slot the next sample goes to */
    unsigned long long last_seen; /* of the latest call */
} rings[FAKE_DEVICES];
static int fail_init; /* nvmlInit_v2 answers this */
static unsigned devices = 1;
static int inits; /* nvmlInit_v2 minus nvmlShutdown */
static unsigned long util_calls;
static struct nvmlDevice_st {
    int index;
} dev[FAKE_DEVICES] = {{0}, {1}};

/* The prototypes of what the library exports (it has no header: the tests dlsym them). */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *count, unsigned long long last_seen);
const char *nvmlErrorString(nvmlReturn_t r);
void fake_nvml_set_procs(unsigned n, const unsigned *pids, const unsigned *sm);
void fake_nvml_fail_util(int r);
void fake_nvml_set_extra(unsigned n);
void fake_nvml_fail_init(int r);
void fake_nvml_set_devices(unsigned n);
void fake_nvml_fail_util_on(int dev, int r);
void fake_nvml_set_auto(int on);
unsigned long long fake_nvml_push(unsigned devi, unsigned pid, unsigned sm);
unsigned long long fake_nvml_last_seen(unsigned devi);
void fake_nvml_clear(void);
void fake_nvml_no_devices(int on);
int fake_nvml_inits(void);
unsigned long fake_nvml_util_calls(void);

/* FAKE_NVML_PID and FAKE_NVML_SM (see the top), once; under mu. */
static void from_environment(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const char *pid = getenv("FAKE_NVML_PID"), *sm = getenv("FAKE_NVML_SM");
    if (!pid)
        return;
    procs[0].pid = (unsigned)strtoul(pid, NULL, 10);
    procs[0].sm = sm ? (unsigned)strtoul(sm, NULL, 10) : 70;
    nprocs = 1;
}

nvmlReturn_t nvmlInit_v2(void)
{
    pthread_mutex_lock(&mu);
    from_environment();
    int r = fail_init;
    if (!r)
        inits++;
    pthread_mutex_unlock(&mu);
    return r;
}

nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&mu);
    int r = inits > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (inits > 0)
        inits--;
    pthread_mutex_unlock(&mu);
    return r;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    pthread_mutex_lock(&mu);
    *count = fail_init_count ? 0 : devices;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (index >= FAKE_DEVICES)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &dev[index];
    return NVML_SUCCESS;
}

/* Append a sample to device devi's ring; its timeStamp. Under mu. */
static unsigned long long push_locked(unsigned devi, unsigned pid, unsigned sm)
{
    struct ring *g = &rings[devi];
    clock_us += 1000;
    g->s[g->next] =
        (nvmlProcessUtilizationSample_t){.pid = pid, .timeStamp = clock_us, .smUtil = sm};
    g->next = (g->next + 1) % FAKE_RING;
    if (g->n < FAKE_RING)
        g->n++;
    return clock_us;
}

#ifndef FAKE_NVML_NO_UTIL
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *count, unsigned long long last_seen)
{
    if (!device || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&mu);
    util_calls++;
    struct ring *g = &rings[device->index];
    g->last_seen = last_seen;
    int r = NVML_SUCCESS;
    if (inits <= 0) {
        r = NVML_ERROR_UNINITIALIZED;
    } else if (fail_util && (fail_util_dev < 0 || fail_util_dev == device->index)) {
        r = fail_util;
    } else {
        if (!utilization && auto_samples)
            for (unsigned i = 0; i < nprocs; i++)
                (void)push_locked((unsigned)device->index, procs[i].pid, procs[i].sm);
        unsigned newer = 0;
        for (unsigned i = 0; i < g->n; i++)
            newer += g->s[i].timeStamp > last_seen;
        if (newer + extra == 0) {
            r = NVML_ERROR_NOT_FOUND;
        } else if (!utilization || *count < newer + extra) {
            *count = newer + extra;
            r = NVML_ERROR_INSUFFICIENT_SIZE;
        } else {
            unsigned k = 0, first = (g->next + FAKE_RING - g->n) % FAKE_RING;
            for (unsigned i = 0; i < g->n; i++) { /* oldest first */
                const nvmlProcessUtilizationSample_t *x = &g->s[(first + i) % FAKE_RING];
                if (x->timeStamp > last_seen)
                    utilization[k++] = *x;
            }
            *count = k;
        }
    }
    pthread_mutex_unlock(&mu);
    return r;
}
#endif

const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    default:
        return "Fake Error";
    }
}

/* The processes each device reports (at most FAKE_PROCS; n 0: none, NOT_FOUND). */
void fake_nvml_set_procs(unsigned n, const unsigned *pids, const unsigned *sm)
{
    pthread_mutex_lock(&mu);
    nprocs = n < FAKE_PROCS ? n : FAKE_PROCS;
    for (unsigned i = 0; i < nprocs; i++) {
        procs[i].pid = pids[i];
        procs[i].sm = sm[i];
    }
    pthread_mutex_unlock(&mu);
}

void fake_nvml_fail_util(int r)
{
    fake_nvml_fail_util_on(-1, r);
}

/* nvmlDeviceGetProcessUtilization answers r on device dev (-1: every device); r 0: samples. */
void fake_nvml_fail_util_on(int d, int r)
{
    pthread_mutex_lock(&mu);
    fail_util = r;
    fail_util_dev = d;
    pthread_mutex_unlock(&mu);
}

/* on 0: a NULL-buffer call appends no sample (the test pushes them); 1: one per process. */
void fake_nvml_set_auto(int on)
{
    pthread_mutex_lock(&mu);
    auto_samples = on;
    pthread_mutex_unlock(&mu);
}

/* Append one sample of pid at sm percent to device devi; its timeStamp (0: no such device). */
unsigned long long fake_nvml_push(unsigned devi, unsigned pid, unsigned sm)
{
    if (devi >= FAKE_DEVICES)
        return 0;
    pthread_mutex_lock(&mu);
    unsigned long long ts = push_locked(devi, pid, sm);
    pthread_mutex_unlock(&mu);
    return ts;
}

/* The lastSeen device devi's latest nvmlDeviceGetProcessUtilization call was given. */
unsigned long long fake_nvml_last_seen(unsigned devi)
{
    pthread_mutex_lock(&mu);
    unsigned long long v = devi < FAKE_DEVICES ? rings[devi].last_seen : 0;
    pthread_mutex_unlock(&mu);
    return v;
}

/* Every ring emptied (the clock goes on). */
void fake_nvml_clear(void)
{
    pthread_mutex_lock(&mu);
    for (unsigned i = 0; i < FAKE_DEVICES; i++)
        rings[i] = (struct ring){0};
    pthread_mutex_unlock(&mu);
}

/* Claim n samples more than the processes set, so that no buffer of the caller's is enough. */
void fake_nvml_set_extra(unsigned n)
{
    pthread_mutex_lock(&mu);
    extra = n;
    pthread_mutex_unlock(&mu);
}

void fake_nvml_fail_init(int r)
{
    pthread_mutex_lock(&mu);
    fail_init = r;
    pthread_mutex_unlock(&mu);
}

/* on: nvmlDeviceGetCount_v2 answers 0 devices. */
void fake_nvml_no_devices(int on)
{
    pthread_mutex_lock(&mu);
    fail_init_count = on;
    pthread_mutex_unlock(&mu);
}

void fake_nvml_set_devices(unsigned n)
{
    pthread_mutex_lock(&mu);
    devices = n < FAKE_DEVICES ? n : FAKE_DEVICES;
    pthread_mutex_unlock(&mu);
}

int fake_nvml_inits(void)
{
    pthread_mutex_lock(&mu);
    int n = inits;
    pthread_mutex_unlock(&mu);
    return n;
}

unsigned long fake_nvml_util_calls(void)
{
    pthread_mutex_lock(&mu);
    unsigned long n = util_calls;
    pthread_mutex_unlock(&mu);
    return n;
}
