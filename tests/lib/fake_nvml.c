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
 * Each call of nvmlDeviceGetProcessUtilization makes fresh samples (one per process set, stamped
 * with a counter that goes up by one per call, in microseconds), so gpu.c's lastSeen never hides
 * them: with a NULL buffer or too small a count it answers INSUFFICIENT_SIZE and the count, as
 * NVML does. Setters and calls take one mutex (the sampler calls from its thread).
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

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    unsigned pid, sm;
} procs[FAKE_PROCS];
static unsigned nprocs;
static unsigned extra; /* samples claimed beyond procs (a flood: never handed out) */
static int fail_util;  /* nvmlDeviceGetProcessUtilization answers this; 0: samples */
static int fail_init;  /* nvmlInit_v2 answers this */
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
    *count = devices;
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

#ifndef FAKE_NVML_NO_UTIL
static unsigned long long clock_us; /* the samples' timeStamp */

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *count, unsigned long long last_seen)
{
    if (!device || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&mu);
    util_calls++;
    int r = NVML_SUCCESS;
    if (inits <= 0)
        r = NVML_ERROR_UNINITIALIZED;
    else if (fail_util)
        r = fail_util;
    else if (nprocs == 0)
        r = NVML_ERROR_NOT_FOUND;
    else if (!utilization || *count < nprocs + extra) {
        *count = nprocs + extra;
        r = NVML_ERROR_INSUFFICIENT_SIZE;
    } else {
        clock_us = clock_us > last_seen ? clock_us + 1 : last_seen + 1;
        for (unsigned i = 0; i < nprocs; i++)
            utilization[i] = (nvmlProcessUtilizationSample_t){
                .pid = procs[i].pid, .timeStamp = clock_us, .smUtil = procs[i].sm};
        *count = nprocs;
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
    pthread_mutex_lock(&mu);
    fail_util = r;
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
