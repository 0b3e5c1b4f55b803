/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu.h - GPU utilisation per tenant, sampled from NVML (the NVIDIA Management Library) where it
 * is installed: the accelerator's side of the data-stall signal (stall.h, docs/ADVICE.md "The
 * stall signal"). Optional at run time: the library is loaded with dlopen at gpu_open, and where
 * it is absent, finds no driver or no device, gpu_open returns -ENOENT and nothing runs; tierd
 * neither links nor ships it.
 * Opened by the daemon ([daemon] gpu_sampling, main.c), handed to the telemetry (tele_gpu_set),
 * exported by its renderers (/metrics tierd_tenant_gpu_utilisation, GET /v1/telemetry
 * "gpu_util" and "gpu").
 *
 * Untested on a real GPU: the tests run against a fake library (tests/lib/fake_nvml.c) that
 * exports the same symbols with the types declared in gpu.c, copied from NVML's public nvml.h.
 *
 * A pass (every interval on the sampler's thread, or gpu_sample for the tests) asks each device
 * for the per-process samples newer than the last one it returned
 * (nvmlDeviceGetProcessUtilization), averages each process's samples per device, maps the
 * process to its tenant with the caller's tenant_of callback, and sets each tenant that had a
 * sample to the mean over its processes (SM utilisation, 0..1) at the pass's time. NVML reports
 * only processes with non-zero utilisation: an idle process is not counted, and a tenant
 * without a sample for GPU_FADE_INTERVALS intervals has no figure (a starved job's utilisation
 * fades to none, not to 0). NVML errors are counted, the first of a run of them per device is
 * logged, and the next pass tries again; a device answering NOT_SUPPORTED or NO_PERMISSION (a
 * MIG parent, a vGPU) is dropped from the sampled set with one info line.
 *
 * Memory: fixed at gpu_open, 24 bytes per possible tenant plus 12 bytes per tenant of scratch
 * and GPU_DEVICES_MAX device handles; a sample buffer of GPU_SAMPLES_MIN samples of 32 bytes
 * that grows to what one call returns, up to GPU_SAMPLES_MAX. Devices beyond GPU_DEVICES_MAX
 * are left out (logged at gpu_open), a call's samples beyond GPU_SAMPLES_MAX too (counted in
 * truncated).
 *
 * Threads: one mutex guards the tenants' figures and the counters (readers: gpu_list,
 * gpu_stats_get, from any thread); a second serialises passes, so NVML is never called by two
 * threads of ours at once and no reader waits for NVML. tenant_of is called from the pass, with
 * neither lock held.
 */
#ifndef TIER_TELEMETRY_GPU_H
#define TIER_TELEMETRY_GPU_H

#include <stddef.h>
#include <stdint.h>

struct gpu;

#define GPU_LIBRARY_DEFAULT "libnvidia-ml.so.1"
#define GPU_INTERVAL_NS_DEFAULT 5000000000ULL /* 5 s */
#define GPU_INTERVAL_NS_MAX 3600000000000ULL  /* 1 h */
#define GPU_FADE_INTERVALS 3                  /* a tenant silent this many intervals has none */
#define GPU_DEVICES_MAX 64                    /* devices sampled, at most */
#define GPU_SAMPLES_MIN 1024                  /* the sample buffer at gpu_open */
#define GPU_SAMPLES_MAX 16384                 /* process samples taken from one call, at most */

struct gpu_config {
    const char *library;  /* NULL: GPU_LIBRARY_DEFAULT (the tests name their fake) */
    uint64_t interval_ns; /* 0: GPU_INTERVAL_NS_DEFAULT; at most GPU_INTERVAL_NS_MAX */
    unsigned max_tenants; /* ids 0..max_tenants-1 apart, beyond: TIER_TENANT_OTHER; 2.. */
    /* The tenant of process pid (host pid namespace, as NVML gives it): 0 and *tenant, or a
     * negative errno (the process is gone: its sample is left out, counted in unresolved).
     * Called on the sampler's thread; must be thread-safe. NULL: every sample is TIER_TENANT_
     * DEFAULT's. */
    int (*tenant_of)(void *ud, uint32_t pid, uint32_t *tenant);
    void *tenant_of_ud;
};

/* Load the library (dlopen RTLD_NOW | RTLD_LOCAL), resolve its symbols, nvmlInit_v2 and take
 * the devices' handles; no thread yet (gpu_start). 0; -ENOENT: the library is not there,
 * nvmlInit_v2 answers DRIVER_NOT_LOADED or LIBRARY_NOT_FOUND, or there is no device (an info
 * line is logged; the caller goes on without); -ENOSYS: a symbol is missing; -EIO: NVML failed
 * otherwise to initialise or to list its devices; -EINVAL: a bound out of range; -ENOMEM. On
 * failure nothing is left loaded and tier_err_msg() says what (the symbol, NVML's message). */
int gpu_open(const struct gpu_config *cfg, struct gpu **out);
/* Stop the thread (joined), nvmlShutdown, dlclose. NULL: no-op. */
void gpu_close(struct gpu *g);
/* Stop the thread and join it; the object stays (readers go on answering the last figures,
 * gpu_sample still works, gpu_close frees it). Idempotent; NULL: no-op. The daemon calls it
 * first at shutdown: a pass's tenant_of may run the tenant registry's reclaim hooks, which use
 * the cache and the schedulers freed before the telemetry. */
void gpu_stop(struct gpu *g);

/* Sample every interval on a thread of its own, the first pass at once. 0, -EALREADY, or the
 * error of pthread_create. */
int gpu_start(struct gpu *g);
/* One pass now, as of now_ns (monotonic): for the tests, which drive the clock. */
void gpu_sample(struct gpu *g, uint64_t now_ns);

struct gpu_tenant_stats {
    uint32_t tenant;
    double util;    /* mean over its processes of each one's mean SM utilisation, 0..1 */
    double age_s;   /* since the pass that set it */
    unsigned procs; /* the processes (per device) that pass averaged */
};

/* The tenants with a recent figure (set within GPU_FADE_INTERVALS intervals of now_ns), in id
 * order: up to max into out; returns how many there are (may exceed max). */
size_t gpu_list(struct gpu *g, uint64_t now_ns, struct gpu_tenant_stats *out, size_t max);
/* One tenant's recent utilisation as of now_ns: 0 and *util, or -ENOENT (none). */
int gpu_tenant_util(struct gpu *g, uint32_t tenant, uint64_t now_ns, double *util);

/* Tenant id was reclaimed (telemetry.h, tele_tenant_fold): its figure is dropped, so the id's
 * next tenant does not show it. g NULL or an id out of range: no-op. */
void gpu_tenant_forget(struct gpu *g, uint32_t tenant);

struct gpu_stats {
    unsigned devices; /* sampled (at most GPU_DEVICES_MAX; less the ones dropped) */
    uint64_t interval_ns;
    uint64_t passes;     /* completed passes */
    uint64_t samples;    /* process samples used */
    uint64_t errors;     /* NVML calls that failed (NOT_FOUND, no new sample, is not one; nor
                          * NOT_SUPPORTED or NO_PERMISSION: the device is dropped) */
    uint64_t truncated;  /* samples beyond GPU_SAMPLES_MAX left out */
    uint64_t unresolved; /* samples whose process tenant_of did not find (or whose tenant does
                          * not exist yet: tierd_tenant_of_pid) */
};
void gpu_stats_get(struct gpu *g, struct gpu_stats *st);

#endif
