/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu.c - unit tests for the NVML sampler (src/telemetry/gpu.c) against the fake library
 * tests/lib/fake_nvml.c (no GPU needed): an absent library, a missing symbol and a failing
 * nvmlInit_v2 start nothing; a pass maps the test process's samples to its tenant (0.70); the
 * mean over a tenant's processes; NVML errors are counted and sampling goes on; a flood of
 * samples beyond the buffer is left out and counted; a tenant whose samples stop fades out after
 * 3 intervals; the thread samples on its own and stops (labelled tsan); the figures in /metrics
 * and GET /v1/telemetry, dropped with a reclaimed tenant. Time is the test's (now_ns) except for
 * the thread's test, which polls with a deadline. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/timeutil.h"
#include "telemetry/gpu.h"
#include "telemetry/stall.h"
#include "telemetry/telemetry.h"

#define S 1000000000ULL
#define T0 (1000 * S)
#define IV (5 * S) /* the sampler's interval in the clock-driven tests */
#define OWN_TENANT 5u
#define PEER_TENANT 6u
#define PEER_PID_A 4000001u /* made-up pids the test's tenant_of knows */
#define PEER_PID_B 4000002u

/* The fake's setters, found with dlsym in the library gpu.c loads (same handle, same state). */
static void *fake;
static void (*set_procs)(unsigned, const unsigned *, const unsigned *);
static void (*fail_util)(int);
static void (*set_extra)(unsigned);
static void (*fail_init)(int);
static void (*set_devices)(unsigned);
static int (*inits)(void);
static void (*fail_util_on)(int, int);
static void (*set_auto)(int);
static unsigned long long (*push)(unsigned, unsigned, unsigned);
static unsigned long long (*last_seen)(unsigned);
static void (*clear)(void);
static void (*no_devices)(int);
static unsigned long (*util_calls)(void);

static void *sym(const char *name)
{
    void *p = dlsym(fake, name);
    if (!p)
        fail_msg("%s: no %s", FAKE_NVML_PATH, name);
    return p;
}

static int setup(void **state)
{
    (void)state;
    fake = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!fake)
        fail_msg("%s", dlerror());
    void *p = sym("fake_nvml_set_procs");
    memcpy(&set_procs, &p, sizeof(p));
    p = sym("fake_nvml_fail_util");
    memcpy(&fail_util, &p, sizeof(p));
    p = sym("fake_nvml_set_extra");
    memcpy(&set_extra, &p, sizeof(p));
    p = sym("fake_nvml_fail_init");
    memcpy(&fail_init, &p, sizeof(p));
    p = sym("fake_nvml_set_devices");
    memcpy(&set_devices, &p, sizeof(p));
    p = sym("fake_nvml_inits");
    memcpy(&inits, &p, sizeof(p));
    p = sym("fake_nvml_fail_util_on");
    memcpy(&fail_util_on, &p, sizeof(p));
    p = sym("fake_nvml_set_auto");
    memcpy(&set_auto, &p, sizeof(p));
    p = sym("fake_nvml_push");
    memcpy(&push, &p, sizeof(p));
    p = sym("fake_nvml_last_seen");
    memcpy(&last_seen, &p, sizeof(p));
    p = sym("fake_nvml_clear");
    memcpy(&clear, &p, sizeof(p));
    p = sym("fake_nvml_no_devices");
    memcpy(&no_devices, &p, sizeof(p));
    p = sym("fake_nvml_util_calls");
    memcpy(&util_calls, &p, sizeof(p));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlclose(fake);
    return 0;
}

/* Each test starts from: one device, the test process at 70 % SM (a fresh sample each pass), no
 * failure, no sample held. */
static int reset(void **state)
{
    (void)state;
    unsigned pid = (unsigned)getpid(), sm = 70;
    set_procs(1, &pid, &sm);
    fail_util_on(-1, 0);
    set_extra(0);
    fail_init(0);
    no_devices(0);
    set_devices(1);
    set_auto(1);
    clear();
    return 0;
}

/* The test's tenants: its own process is OWN_TENANT, the made-up peers PEER_TENANT, any other
 * pid is gone. */
static int tenant_of(void *ud, uint32_t pid, uint32_t *tenant)
{
    (void)ud;
    if (pid == (uint32_t)getpid())
        *tenant = OWN_TENANT;
    else if (pid == PEER_PID_A || pid == PEER_PID_B)
        *tenant = PEER_TENANT;
    else
        return -ESRCH;
    return 0;
}

static struct gpu *open_fake(uint64_t interval_ns)
{
    struct gpu *g = NULL;
    struct gpu_config c = {.library = FAKE_NVML_PATH,
                           .interval_ns = interval_ns,
                           .max_tenants = 8,
                           .tenant_of = tenant_of};
    int rc = gpu_open(&c, &g);
    if (rc)
        fail_msg("gpu_open: %d: %s", rc, tier_err_msg());
    assert_non_null(g);
    return g;
}

static void test_absent(void **state)
{
    (void)state;
    struct gpu *g = NULL;
    struct gpu_config c = {.library = "/nonexistent/libnvidia-ml.so.1", .max_tenants = 8};
    assert_int_equal(gpu_open(&c, &g), -ENOENT);
    assert_null(g);
    assert_non_null(strstr(tier_err_msg(), "/nonexistent/libnvidia-ml.so.1"));
    /* a bound out of range is refused before anything is loaded */
    c.library = FAKE_NVML_PATH;
    c.max_tenants = 1;
    assert_int_equal(gpu_open(&c, &g), -EINVAL);
    assert_null(g);
    assert_int_equal(inits(), 0);
}

static void test_missing_symbol(void **state)
{
    (void)state;
    struct gpu *g = NULL;
    struct gpu_config c = {.library = FAKE_NVML_NOSYM_PATH, .max_tenants = 8};
    assert_int_equal(gpu_open(&c, &g), -ENOSYS);
    assert_null(g);
    assert_non_null(strstr(tier_err_msg(), "nvmlDeviceGetProcessUtilization"));
    assert_non_null(strstr(tier_err_msg(), FAKE_NVML_NOSYM_PATH));
}

static void test_init_fails(void **state)
{
    (void)state;
    fail_init(999);
    struct gpu *g = NULL;
    struct gpu_config c = {.library = FAKE_NVML_PATH, .max_tenants = 8};
    assert_int_equal(gpu_open(&c, &g), -EIO);
    assert_null(g);
    assert_non_null(strstr(tier_err_msg(), "nvmlInit_v2: Fake Error (999)"));
    assert_int_equal(inits(), 0);
}

/* No driver (DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND) or no device: like an absent library,
 * -ENOENT (the daemon logs nothing more) and nothing left initialised. */
static void test_no_driver_or_device(void **state)
{
    (void)state;
    struct gpu *g = NULL;
    struct gpu_config c = {.library = FAKE_NVML_PATH, .max_tenants = 8};
    fail_init(9);
    assert_int_equal(gpu_open(&c, &g), -ENOENT);
    assert_null(g);
    fail_init(12);
    assert_int_equal(gpu_open(&c, &g), -ENOENT);
    assert_null(g);
    fail_init(0);
    no_devices(1);
    assert_int_equal(gpu_open(&c, &g), -ENOENT);
    assert_null(g);
    assert_int_equal(inits(), 0);
    /* an interval beyond an hour is refused */
    no_devices(0);
    c.interval_ns = GPU_INTERVAL_NS_MAX + 1;
    assert_int_equal(gpu_open(&c, &g), -EINVAL);
    assert_null(g);
    c.interval_ns = GPU_INTERVAL_NS_MAX;
    assert_int_equal(gpu_open(&c, &g), 0);
    gpu_close(g);
    assert_int_equal(inits(), 0);
}

/* A device answering NOT_SUPPORTED or NO_PERMISSION is dropped (asked no more, no error); one
 * answering another error is counted every pass and asked again; the other device samples. */
static void test_device_dropped(void **state)
{
    (void)state;
    static const int codes[] = {3, 4};
    for (size_t k = 0; k < 2; k++) {
        reset(NULL);
        set_devices(2);
        fail_util_on(1, codes[k]);
        struct gpu *g = open_fake(IV);
        gpu_sample(g, T0);
        unsigned long calls = util_calls();
        gpu_sample(g, T0 + IV);
        assert_int_equal(util_calls() - calls, 2); /* device 0 alone: NULL call, then the fill */
        struct gpu_stats st;
        gpu_stats_get(g, &st);
        assert_int_equal(st.errors, 0);
        assert_int_equal(st.devices, 1);
        assert_int_equal(st.samples, 2);
        double u = -1;
        assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + IV, &u), 0);
        assert_true(fabs(u - 0.70) < 1e-9);
        gpu_close(g);
    }
    reset(NULL);
    set_devices(2);
    fail_util_on(1, 999);
    struct gpu *g = open_fake(IV);
    gpu_sample(g, T0);
    gpu_sample(g, T0 + IV);
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    assert_int_equal(st.errors, 2);
    assert_int_equal(st.devices, 2);
    assert_int_equal(st.samples, 2);
    gpu_close(g);
}

/* lastSeen is NVML's: the newest timeStamp read. A pass with no new sample adds nothing (the
 * figure fades only by time); a process's samples since lastSeen are averaged; pid 0 is left
 * out. */
static void test_last_seen(void **state)
{
    (void)state;
    set_auto(0);
    unsigned own = (unsigned)getpid();
    struct gpu *g = open_fake(IV);
    (void)push(0, own, 20);
    (void)push(0, own, 40);
    (void)push(0, 0, 100); /* pid 0: no process */
    unsigned long long t3 = push(0, own, 90);
    gpu_sample(g, T0);
    assert_int_equal(last_seen(0), 0);
    double u = -1;
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0, &u), 0);
    assert_true(fabs(u - 0.50) < 1e-9); /* (20 + 40 + 90) / 3 */
    struct gpu_tenant_stats v[2];
    assert_int_equal(gpu_list(g, T0, v, 2), 1);
    assert_int_equal(v[0].procs, 1);
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    assert_int_equal(st.samples, 3);
    assert_int_equal(st.unresolved, 0);
    /* nothing new: nothing added, the figure stands as of T0 and fades by time alone */
    gpu_sample(g, T0 + IV);
    assert_int_equal(last_seen(0), t3);
    gpu_stats_get(g, &st);
    assert_int_equal(st.samples, 3);
    assert_int_equal(gpu_list(g, T0 + IV, v, 2), 1);
    assert_true(fabs(v[0].age_s - 5.0) < 1e-9);
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + 3 * IV, &u), -ENOENT);
    /* new samples alone count */
    (void)push(0, own, 10);
    unsigned long long t5 = push(0, own, 30);
    gpu_sample(g, T0 + 4 * IV);
    assert_int_equal(last_seen(0), t3);
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + 4 * IV, &u), 0);
    assert_true(fabs(u - 0.20) < 1e-9);
    gpu_sample(g, T0 + 5 * IV);
    assert_int_equal(last_seen(0), t5);
    gpu_close(g);
}

static void test_own_process(void **state)
{
    (void)state;
    struct gpu *g = open_fake(IV);
    assert_int_equal(inits(), 1);
    double u = -1;
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0, &u), -ENOENT); /* before a pass */
    gpu_sample(g, T0);
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + S, &u), 0);
    assert_true(fabs(u - 0.70) < 1e-9);
    struct gpu_tenant_stats v[4];
    assert_int_equal(gpu_list(g, T0 + S, v, 4), 1);
    assert_int_equal(v[0].tenant, OWN_TENANT);
    assert_int_equal(v[0].procs, 1);
    assert_true(fabs(v[0].age_s - 1.0) < 1e-9);
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    assert_int_equal(st.devices, 1);
    assert_int_equal(st.passes, 1);
    assert_int_equal(st.samples, 1);
    assert_int_equal(st.errors, 0);
    gpu_close(g);
    assert_int_equal(inits(), 0); /* nvmlShutdown */
}

/* Two devices; a tenant of two processes gets their mean, a process tenant_of does not know is
 * left out and counted. */
static void test_mean_and_unresolved(void **state)
{
    (void)state;
    set_devices(2);
    unsigned pids[] = {(unsigned)getpid(), PEER_PID_A, PEER_PID_B, 4000099u};
    unsigned sm[] = {70, 30, 50, 100};
    set_procs(4, pids, sm);
    struct gpu *g = open_fake(IV);
    gpu_sample(g, T0);
    double u = -1;
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0, &u), 0);
    assert_true(fabs(u - 0.70) < 1e-9);
    assert_int_equal(gpu_tenant_util(g, PEER_TENANT, T0, &u), 0);
    assert_true(fabs(u - 0.40) < 1e-9);
    struct gpu_tenant_stats v[4];
    assert_int_equal(gpu_list(g, T0, v, 4), 2);
    assert_int_equal(v[0].tenant, OWN_TENANT);
    assert_int_equal(v[0].procs, 2); /* one sample per device */
    assert_int_equal(v[1].tenant, PEER_TENANT);
    assert_int_equal(v[1].procs, 4);
    assert_int_equal(gpu_list(g, T0, v, 1), 2); /* the count, beyond max */
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    assert_int_equal(st.devices, 2);
    assert_int_equal(st.samples, 6);
    assert_int_equal(st.unresolved, 2);
    gpu_close(g);
}

static void test_errors_counted(void **state)
{
    (void)state;
    struct gpu *g = open_fake(IV);
    gpu_sample(g, T0);
    fail_util(999);
    gpu_sample(g, T0 + IV);
    gpu_sample(g, T0 + 2 * IV);
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    assert_int_equal(st.errors, 2);
    assert_int_equal(st.passes, 3);
    double u = -1;
    /* the figure of the last good pass stands until it fades */
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + 2 * IV, &u), 0);
    /* the library recovers: sampling goes on */
    fail_util(0);
    unsigned pid = (unsigned)getpid(), sm = 20;
    set_procs(1, &pid, &sm);
    gpu_sample(g, T0 + 3 * IV);
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + 3 * IV, &u), 0);
    assert_true(fabs(u - 0.20) < 1e-9);
    gpu_stats_get(g, &st);
    assert_int_equal(st.errors, 2);
    assert_int_equal(st.samples, 2);
    gpu_close(g);
}

/* More samples than GPU_SAMPLES_MAX: left out and counted, no error, lastSeen stays where the
 * last read left it; the next pass reads what is there since. More than the first buffer but
 * within GPU_SAMPLES_MAX: the buffer grows and all is read. */
static void test_truncated(void **state)
{
    (void)state;
    set_auto(0);
    unsigned own = (unsigned)getpid();
    struct gpu *g = open_fake(IV);
    unsigned long long t1 = push(0, own, 70);
    gpu_sample(g, T0);
    (void)push(0, own, 30);
    set_extra(GPU_SAMPLES_MAX + 10);
    gpu_sample(g, T0 + IV);
    assert_int_equal(last_seen(0), t1);
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    assert_int_equal(st.truncated, GPU_SAMPLES_MAX + 11);
    assert_int_equal(st.errors, 0);
    assert_int_equal(st.samples, 1);
    set_extra(0);
    gpu_sample(g, T0 + 2 * IV);
    assert_int_equal(last_seen(0), t1); /* asked again from the last sample read */
    double u = -1;
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + 2 * IV, &u), 0);
    assert_true(fabs(u - 0.30) < 1e-9);
    gpu_stats_get(g, &st);
    assert_int_equal(st.samples, 2);
    /* beyond the first buffer, within the bound: grown, read whole */
    set_extra(GPU_SAMPLES_MIN + 1);
    gpu_sample(g, T0 + 3 * IV);
    gpu_stats_get(g, &st);
    assert_int_equal(st.truncated, GPU_SAMPLES_MAX + 11);
    assert_int_equal(st.errors, 0);
    gpu_close(g);
}

static void test_fades(void **state)
{
    (void)state;
    struct gpu *g = open_fake(IV);
    gpu_sample(g, T0);
    set_procs(0, NULL, NULL); /* NOT_FOUND from now on: no sample since lastSeen */
    gpu_sample(g, T0 + IV);
    gpu_sample(g, T0 + 2 * IV);
    double u = -1;
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + 3 * IV - 1, &u), 0);
    assert_true(fabs(u - 0.70) < 1e-9);
    gpu_sample(g, T0 + 3 * IV);
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + 3 * IV, &u), -ENOENT);
    assert_int_equal(gpu_list(g, T0 + 3 * IV, NULL, 0), 0);
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    assert_int_equal(st.errors, 0); /* NOT_FOUND is no error */
    /* it comes back with its next sample */
    unsigned pid = (unsigned)getpid(), sm = 90;
    set_procs(1, &pid, &sm);
    gpu_sample(g, T0 + 4 * IV);
    assert_int_equal(gpu_tenant_util(g, OWN_TENANT, T0 + 4 * IV, &u), 0);
    assert_true(fabs(u - 0.90) < 1e-9);
    gpu_close(g);
}

/* The thread samples by itself; readers run beside it; close joins it and shuts NVML down. */
static void test_thread(void **state)
{
    (void)state;
    struct gpu *g = open_fake(10 * TIER_NS_PER_MS);
    assert_int_equal(gpu_start(g), 0);
    assert_int_equal(gpu_start(g), -EALREADY);
    uint64_t deadline = tier_now_mono_ns() + 60 * S;
    struct gpu_stats st = {0};
    double u = -1;
    for (;;) {
        gpu_stats_get(g, &st);
        if (st.passes >= 3 && gpu_tenant_util(g, OWN_TENANT, tier_now_mono_ns(), &u) == 0)
            break;
        if (tier_now_mono_ns() > deadline)
            fail_msg("no 3 passes within a minute (%llu)", (unsigned long long)st.passes);
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    assert_true(fabs(u - 0.70) < 1e-9);
    /* stop joins the thread and keeps the object: no pass after it, readers still answer */
    gpu_stop(g);
    gpu_stop(g); /* idempotent */
    gpu_stats_get(g, &st);
    uint64_t passes = st.passes;
    unsigned long calls = util_calls();
    nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL); /* five intervals, if it ran */
    gpu_stats_get(g, &st);
    assert_int_equal(st.passes, passes);
    assert_int_equal(util_calls(), calls);
    assert_int_equal(inits(), 1);
    gpu_close(g);
    assert_int_equal(inits(), 0);
}

static const char *names(void *ud, uint32_t id)
{
    (void)ud;
    return id == OWN_TENANT ? "u1001" : NULL;
}

static void test_exports(void **state)
{
    (void)state;
    struct telemetry *t = NULL;
    struct telemetry_config cfg = {.max_tenants = 8, .tenant_name = names};
    assert_int_equal(telemetry_new(&cfg, &t), 0);
    struct dynbuf b;
    dynbuf_init(&b, 1 << 20);
    /* no sampler: no gauge, "gpu" null, a stall entry's gpu_util null */
    uint64_t now = tier_now_mono_ns();
    assert_int_equal(stall_report(tele_stall(t), OWN_TENANT, "py-1-0", 1, 3, 4, now), 0);
    assert_int_equal(tele_render_prometheus(t, NULL, &b), 0);
    assert_int_equal(dynbuf_append(&b, "", 1), 0);
    assert_null(strstr(b.data, "tierd_tenant_gpu_utilisation"));
    assert_null(strstr(b.data, "tierd_gpu_devices"));
    dynbuf_reset(&b);
    assert_int_equal(tele_render_json(t, NULL, &b), 0);
    json_error_t e;
    json_t *j = json_loadb(b.data, b.len, 0, &e);
    assert_non_null(j);
    assert_true(json_is_null(json_object_get(j, "gpu")));
    json_t *st = json_array_get(json_object_get(j, "stalls"), 0);
    assert_true(json_is_null(json_object_get(st, "gpu_util")));
    json_decref(j);

    struct gpu *g = open_fake(IV);
    gpu_sample(g, tier_now_mono_ns());
    tele_gpu_set(t, g); /* the telemetry closes it */
    assert_ptr_equal(tele_gpu(t), g);
    dynbuf_reset(&b);
    assert_int_equal(tele_render_prometheus(t, NULL, &b), 0);
    assert_int_equal(dynbuf_append(&b, "", 1), 0);
    assert_non_null(strstr(b.data, "# TYPE tierd_tenant_gpu_utilisation gauge\n"
                                   "tierd_tenant_gpu_utilisation{tenant=\"u1001\"} 0.7\n"));
    assert_non_null(strstr(b.data, "tierd_gpu_devices 1\n"));
    assert_non_null(strstr(b.data, "tierd_gpu_sample_errors_total 0\n"));
    dynbuf_reset(&b);
    assert_int_equal(tele_render_json(t, NULL, &b), 0);
    j = json_loadb(b.data, b.len, 0, &e);
    assert_non_null(j);
    st = json_array_get(json_object_get(j, "stalls"), 0);
    assert_true(fabs(json_number_value(json_object_get(st, "gpu_util")) - 0.7) < 1e-9);
    json_t *gj = json_object_get(j, "gpu");
    assert_int_equal(json_integer_value(json_object_get(gj, "devices")), 1);
    assert_int_equal(json_integer_value(json_object_get(gj, "passes")), 1);
    json_t *gt = json_array_get(json_object_get(gj, "tenants"), 0);
    assert_string_equal(json_string_value(json_object_get(gt, "tenant")), "u1001");
    assert_true(fabs(json_number_value(json_object_get(gt, "gpu_util")) - 0.7) < 1e-9);
    json_decref(j);
    /* a reclaimed tenant's figure goes with it (its id's next tenant must not show it) */
    assert_int_equal(tele_tenant_fold(t, OWN_TENANT, 2), 0);
    assert_int_equal(gpu_list(g, tier_now_mono_ns(), NULL, 0), 0);
    dynbuf_reset(&b);
    assert_int_equal(tele_render_prometheus(t, NULL, &b), 0);
    assert_int_equal(dynbuf_append(&b, "", 1), 0);
    assert_null(strstr(b.data, "tierd_tenant_gpu_utilisation{"));
    dynbuf_fini(&b);
    telemetry_free(t);
    assert_int_equal(inits(), 0); /* telemetry_free closed the sampler */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_absent, reset),
        cmocka_unit_test_setup(test_missing_symbol, reset),
        cmocka_unit_test_setup(test_init_fails, reset),
        cmocka_unit_test_setup(test_no_driver_or_device, reset),
        cmocka_unit_test_setup(test_device_dropped, reset),
        cmocka_unit_test_setup(test_last_seen, reset),
        cmocka_unit_test_setup(test_own_process, reset),
        cmocka_unit_test_setup(test_mean_and_unresolved, reset),
        cmocka_unit_test_setup(test_errors_counted, reset),
        cmocka_unit_test_setup(test_truncated, reset),
        cmocka_unit_test_setup(test_fades, reset),
        cmocka_unit_test_setup(test_thread, reset),
        cmocka_unit_test_setup(test_exports, reset),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
