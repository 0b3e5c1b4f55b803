/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_tierbench.c - unit tests for tierbench's engines and helpers (tierbench_core), driven
 * in-process: open-loop pacing against a target whose per-read latency the test controls (through
 * the engine's pluggable I/O function), AU arithmetic on tmpfs and on a target of known speed,
 * checkpoint writing and clean-up, the keyed shuffle, and the parsers. The command line and the
 * output files are tested by test_tierbench_cli.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tierbench/tb.h"
#include "common/timeutil.h"
#include "testutil.h"

/* Slack on wall-clock upper bounds for what no counter measures (a few system calls, ASan's
 * bookkeeping): it catches an engine that queues or ignores its schedule (seconds off). What a
 * loaded machine adds on top is measured, not guessed: every upper bound is widened by the
 * scheduling delay the run's threads really suffered (see below). Lower bounds need neither: a
 * sleep never ends early. */
#define LOAD_SLACK_NS (500 * TIER_NS_PER_MS)

/* ---- the scheduling delay the test's threads suffered ----
 *
 * The kernel counts, per thread, the time it was runnable but waiting for a CPU (run_delay, the
 * second field of /proc/thread-self/schedstat, zero when the thread is created). The engine
 * threads report theirs through the I/O hooks below: each call adds what its thread accrued since
 * its last report, and a thread-specific-data destructor adds the rest when the thread exits (all
 * are joined before the engine returns). The test's own thread runs the training accelerator and
 * starts the engine threads; delay_probe_end adds its share. A machine that delays the engine's
 * wake-ups by D in total can make a start, a latency or a wait at most D longer, so a bound
 * widened by D holds under any load and stays as tight as before on an idle machine. Where the
 * kernel does not expose run_delay, the delay is unknown and taken as DELAY_UNKNOWN_NS (the
 * load-sensitive upper bounds then pass; the exact relations are still checked). */
#define DELAY_UNKNOWN_NS (3600 * TIER_NS_PER_SEC)

static _Atomic uint64_t engine_delay_ns;
static _Atomic int delay_unknown;
static pthread_key_t delay_key;
static pthread_once_t delay_once = PTHREAD_ONCE_INIT;

/* The calling thread's run_delay in ns, or -1 when the kernel does not say. */
static int64_t thread_run_delay_ns(void)
{
    char line[128];
    unsigned long long run_ns = 0, delay_ns = 0;
    FILE *fp = fopen("/proc/thread-self/schedstat", "r");
    if (!fp)
        return -1;
    int n = fgets(line, sizeof(line), fp) ? sscanf(line, "%llu %llu", &run_ns, &delay_ns) : 0;
    fclose(fp);
    return n == 2 ? (int64_t)delay_ns : -1;
}

/* Add what the calling thread accrued since its last report (*last, 0 at its creation). */
static void delay_report(uint64_t *last)
{
    int64_t now = thread_run_delay_ns();
    if (now < 0) {
        atomic_store(&delay_unknown, 1);
        return;
    }
    if ((uint64_t)now > *last)
        atomic_fetch_add(&engine_delay_ns, (uint64_t)now - *last);
    *last = (uint64_t)now;
}

static void delay_thread_exit(void *p)
{
    delay_report(p);
    free(p);
}

static void delay_key_create(void)
{
    if (pthread_key_create(&delay_key, delay_thread_exit) != 0)
        atomic_store(&delay_unknown, 1);
}

/* Called by the I/O hooks, in the engine's threads (never in the test's own thread). */
static void delay_note(void)
{
    uint64_t *last = pthread_getspecific(delay_key);
    if (!last) {
        last = calloc(1, sizeof(*last));
        if (!last || pthread_setspecific(delay_key, last) != 0) {
            free(last);
            atomic_store(&delay_unknown, 1);
            return;
        }
    }
    delay_report(last);
}

struct delay_probe {
    int64_t main0;
};

static void delay_probe_start(struct delay_probe *p)
{
    pthread_once(&delay_once, delay_key_create);
    atomic_store(&engine_delay_ns, 0);
    atomic_store(&delay_unknown, 0);
    p->main0 = thread_run_delay_ns();
}

/* The scheduling delay of the test's thread and of every engine thread since delay_probe_start
 * (call it after the engine returned, when its threads have exited). */
static uint64_t delay_probe_end(const struct delay_probe *p)
{
    int64_t main1 = thread_run_delay_ns();
    if (p->main0 < 0 || main1 < 0 || atomic_load(&delay_unknown))
        return DELAY_UNKNOWN_NS;
    uint64_t d = atomic_load(&engine_delay_ns) + (uint64_t)(main1 - p->main0);
    print_message("scheduling delay suffered: %.1f ms\n", (double)d / 1e6);
    return d;
}

/* Real reads through the default POSIX I/O, reporting the reader's scheduling delay. */
static ssize_t tracked_pread(void *arg, int fd, void *buf, size_t len, uint64_t off)
{
    delay_note();
    return tb_io_posix.pread(arg, fd, buf, len, off);
}

/* ---- a target of controlled speed: every read takes delay_ns, then really reads ---- */
#define SLOW_MAX_CALLS 4096
struct slow_target {
    uint64_t delay_ns;
    _Atomic uint64_t calls;
    _Atomic int in_flight, max_in_flight;
    uint64_t starts[SLOW_MAX_CALLS], ends[SLOW_MAX_CALLS];
};

static ssize_t slow_pread(void *arg, int fd, void *buf, size_t len, uint64_t off)
{
    struct slow_target *t = arg;
    uint64_t now = tier_now_mono_ns();
    delay_note();
    uint64_t k = atomic_fetch_add(&t->calls, 1);
    int in = atomic_fetch_add(&t->in_flight, 1) + 1;
    for (int m = atomic_load(&t->max_in_flight); in > m;)
        if (atomic_compare_exchange_weak(&t->max_in_flight, &m, in))
            break;
    if (k < SLOW_MAX_CALLS)
        t->starts[k] = now;
    tb_sleep_until(now + t->delay_ns);
    ssize_t n = pread(fd, buf, len, (off_t)off);
    atomic_fetch_sub(&t->in_flight, 1);
    if (k < SLOW_MAX_CALLS)
        t->ends[k] = tier_now_mono_ns();
    return n < 0 ? -errno : n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A failing target: every second read returns -EIO, after a short delay. */
static _Atomic uint64_t flaky_calls;

static ssize_t flaky_pread(void *arg, int fd, void *buf, size_t len, uint64_t off)
{
    (void)arg;
    if (atomic_fetch_add(&flaky_calls, 1) % 2 == 0)
        return -EIO;
    ssize_t n = pread(fd, buf, len, (off_t)off);
    return n < 0 ? -errno : n;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

static void rm_rf(const char *p)
{
    nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A small dataset made by `gen` in dir. */
static void make_dataset(const char *dir, uint64_t files, const char *size)
{
    struct tb_gen_cfg g = {.files = files, .seed = 1};
    char err[256];
    assert_int_equal(tb_size_dist_parse(size, &g.size), 0);
    if (tb_gen_run(dir, &g, err, sizeof(err)) != 0)
        fail_msg("gen: %s", err);
}

struct fixture {
    char *dir;
    struct tb_dataset ds;
    struct tb_class_result res;
    struct tb_series series;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char err[256];
    f->dir = tu_mkdtemp("tierbench");
    make_dataset(f->dir, 16, "fixed:256K");
    if (tb_dataset_load(&f->ds, f->dir, NULL, 0, err, sizeof(err)) != 0)
        fail_msg("load: %s", err);
    assert_int_equal(tb_result_init(&f->res), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    tb_result_fini(&f->res);
    tb_series_fini(&f->series);
    tb_dataset_fini(&f->ds);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static struct tb_infer_cfg infer_cfg(double rate, unsigned threads)
{
    return (struct tb_infer_cfg){.enabled = 1,
                                 .rate = rate,
                                 .threads = threads,
                                 .min_bytes = 4096,
                                 .max_bytes = 65536,
                                 .max_files = 64,
                                 .drain_ns = 10 * TIER_NS_PER_SEC};
}

/* A slow target with enough workers: requests still start on the open-loop schedule. Checked
 * without fixed wall-clock windows (a loaded machine wakes workers late): no request starts
 * before its intended time (the k-th start in time order is at or after request k's intended time
 * t0 + k x 5 ms: a closed loop or a burst runs ahead of it), none starts later than the slack plus
 * the scheduling delay the run suffered (an engine pacing at half the rate is k x 5 ms behind,
 * ~1 s by the last request), the requests overlap (an engine waiting for each read would have
 * one in flight and take 8 s), and the latency holds no queueing. */
static void test_pacing_keeps_rate(void **state)
{
    struct fixture *f = *state;
    static struct slow_target t;
    memset(&t, 0, sizeof(t));
    t.delay_ns = 40 * TIER_NS_PER_MS;
    struct tb_io io = {.pread = slow_pread, .arg = &t};
    struct tb_infer_cfg cfg = infer_cfg(200, 32); /* capacity 800/s > 200/s */
    struct delay_probe probe;
    delay_probe_start(&probe);
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&f->series, t0, 20), 0);
    assert_int_equal(tb_infer_run(&cfg, &f->ds, &io, 1, t0, TIER_NS_PER_SEC, &f->res, &f->series),
                     0);
    uint64_t late_ok = LOAD_SLACK_NS + delay_probe_end(&probe);
    assert_int_equal(f->res.scheduled, 200);
    assert_int_equal(f->res.ops, 200);
    assert_int_equal(f->res.dropped, 0);
    assert_int_equal(f->res.errors, 0);
    assert_int_equal(atomic_load(&t.calls), 200);
    uint64_t sorted[200], in_window = 0, due_early = 0;
    memcpy(sorted, t.starts, sizeof(sorted));
    qsort(sorted, 200, sizeof(sorted[0]), cmp_u64);
    for (uint64_t k = 0; k < 200; k++) {
        uint64_t due = t0 + k * 5 * TIER_NS_PER_MS;
        if (sorted[k] < due)
            fail_msg("start %llu came %.1f ms before request %llu's intended time",
                     (unsigned long long)k, (double)(due - sorted[k]) / 1e6, (unsigned long long)k);
        if (sorted[k] >= due + late_ok)
            fail_msg("start %llu came %.1f ms after request %llu's intended time (allowed %.1f)",
                     (unsigned long long)k, (double)(sorted[k] - due) / 1e6, (unsigned long long)k,
                     (double)late_ok / 1e6);
        in_window += sorted[k] < t0 + TIER_NS_PER_SEC;
        due_early += due + late_ok <= t0 + TIER_NS_PER_SEC;
    }
    /* Serial reads (40 ms each) would start the last request ~8 s after t0, which the bound on
     * the starts above already rules out unless the run was delayed by seconds. */
    if (late_ok < 6 * TIER_NS_PER_SEC)
        assert_true(atomic_load(&t.max_in_flight) >= 2);
    /* the engine's count of requests issued in the window: each is issued before the target
     * sees it, and every request due more than late_ok before the window's end (the first 100
     * on an idle machine) was issued inside it */
    assert_true(f->res.issued_in_window >= in_window);
    assert_true(f->res.issued_in_window >= due_early);
    /* Typical latency is the target's 40 ms, not the seconds a queue would add. */
    uint64_t p50 = tier_hist_percentile(f->res.lat, 50);
    assert_true(p50 >= 40 * TIER_NS_PER_MS);
    if (p50 >= 40 * TIER_NS_PER_MS + late_ok)
        fail_msg("p50 %.1f ms, expected 40 ms (allowed %.1f)", (double)p50 / 1e6,
                 (double)(40 * TIER_NS_PER_MS + late_ok) / 1e6);
    assert_int_equal(atomic_load(&f->series.slots[TB_INFER][0].ops), 200);
}

/* direct = true: the files are opened O_DIRECT (fcntl shows it), every read is 4 KiB-aligned in
 * buffer, offset and size (odd sizes 5000-9000 are rounded down), and the real O_DIRECT preads
 * of the dataset succeed with the bytes asked for. */
struct direct_target {
    _Atomic uint64_t calls, misaligned, not_direct, short_reads;
};

static ssize_t direct_pread(void *arg, int fd, void *buf, size_t len, uint64_t off)
{
    struct direct_target *t = arg;
    atomic_fetch_add(&t->calls, 1);
    if ((uintptr_t)buf % 4096 || len % 4096 || off % 4096 || len == 0)
        atomic_fetch_add(&t->misaligned, 1);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || !(fl & O_DIRECT))
        atomic_fetch_add(&t->not_direct, 1);
    ssize_t n = pread(fd, buf, len, (off_t)off);
    if (n >= 0 && (size_t)n != len)
        atomic_fetch_add(&t->short_reads, 1);
    return n < 0 ? -errno : n;
}

static void test_infer_direct(void **state)
{
    struct fixture *f = *state;
    int probe = open(f->ds.paths[0], O_RDONLY | O_DIRECT);
    if (probe < 0 && errno == EINVAL)
        skip(); /* a file system without O_DIRECT: tierbench says so (not tested here) */
    assert_true(probe >= 0);
    close(probe);
    static struct direct_target t;
    memset(&t, 0, sizeof(t));
    struct tb_io io = {.pread = direct_pread, .arg = &t};
    struct tb_infer_cfg cfg = infer_cfg(400, 4);
    cfg.min_bytes = 5000;
    cfg.max_bytes = 9000;
    cfg.direct = 1;
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&f->series, t0, 20), 0);
    assert_int_equal(
        tb_infer_run(&cfg, &f->ds, &io, 3, t0, 250 * TIER_NS_PER_MS, &f->res, &f->series), 0);
    assert_int_equal(f->res.errors, 0);
    assert_int_equal(f->res.ops, 100);
    assert_int_equal(atomic_load(&t.calls), 100);
    assert_int_equal(atomic_load(&t.misaligned), 0);
    assert_int_equal(atomic_load(&t.not_direct), 0);
    assert_int_equal(atomic_load(&t.short_reads), 0); /* 256 KiB files, reads of 4 or 8 KiB */
    assert_true(f->res.bytes % 4096 == 0 && f->res.bytes >= 100 * 4096);
}

/* One worker, 20 ms per read, 100 req/s: the target serves only 50/s, so request i waits for the
 * i requests before it. Latency measured from the intended time grows ~10 ms per request
 * (20 (i+1) - 10 i ms), which a closed-loop client would report as a flat 20 ms. */
static void test_queueing_counted_in_latency(void **state)
{
    struct fixture *f = *state;
    static struct slow_target t;
    memset(&t, 0, sizeof(t));
    t.delay_ns = 20 * TIER_NS_PER_MS;
    struct tb_io io = {.pread = slow_pread, .arg = &t};
    struct tb_infer_cfg cfg = infer_cfg(100, 1);
    struct delay_probe probe;
    delay_probe_start(&probe);
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&f->series, t0, 20), 0);
    assert_int_equal(tb_infer_run(&cfg, &f->ds, &io, 2, t0, TIER_NS_PER_SEC, &f->res, &f->series),
                     0);
    double slack = (double)(LOAD_SLACK_NS + delay_probe_end(&probe)) / 1e6;
    assert_int_equal(f->res.scheduled, 100);
    assert_int_equal(f->res.ops, 100); /* all completed during the drain */
    assert_int_equal(f->res.dropped, 0);
    double p50 = (double)tier_hist_percentile(f->res.lat, 50) / 1e6;
    double mx = (double)tier_hist_max(f->res.lat) / 1e6;
    double mn = (double)tier_hist_min(f->res.lat) / 1e6;
    /* Requests are meant every 10 ms; the one worker serves them in order, 20 ms each at least
     * (more on a loaded machine: the server's own pace, read off its call ends, decides).
     * Latency counts from the intended start, so it holds the queueing: request i ends at
     * 20 (i + 1) ms or later and was due at 10 i ms, so request 49 (the median) waited at least
     * 510 ms, request 99 at least 1010 ms. Without the queueing it would be ~20 ms. The engine
     * reads its clock after the target's: measured latencies are at least the target's (less
     * the histogram's 5 % resolution), and more only by the scheduling delay the run suffered. */
    assert_int_equal(atomic_load(&t.calls), 100);
    double end49 = (double)(t.ends[49] - t0) / 1e6, end99 = (double)(t.ends[99] - t0) / 1e6;
    double end0 = (double)(t.ends[0] - t0) / 1e6;
    double exp50 = end49 - 490, expmax = end99 - 990;
    if (p50 < 490 || p50 < exp50 * 0.95 || p50 > exp50 * 1.05 + slack)
        fail_msg("p50 %.1f ms, expected ~%.1f ms (request 49 ended %.1f ms after t0)", p50, exp50,
                 end49);
    if (mx < 990 || mx < expmax * 0.95 || mx > expmax * 1.05 + slack)
        fail_msg("max %.1f ms, expected ~%.1f ms", mx, expmax);
    if (mn < 20 || mn < end0 * 0.95 || mn > end0 * 1.05 + slack)
        fail_msg("min %.1f ms, expected ~%.1f ms (request 0 ended then)", mn, end0);
    assert_true(f->res.late >= 90); /* nearly every request started after its intended time */
}

/* With a drain timeout too short for the backlog, unserved requests are counted as dropped,
 * with the time they had waited, never silently forgotten. */
static void test_drain_timeout_drops(void **state)
{
    struct fixture *f = *state;
    static struct slow_target t;
    memset(&t, 0, sizeof(t));
    t.delay_ns = 50 * TIER_NS_PER_MS;
    struct tb_io io = {.pread = slow_pread, .arg = &t};
    struct tb_infer_cfg cfg = infer_cfg(100, 1);
    cfg.drain_ns = 100 * TIER_NS_PER_MS;
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&f->series, t0, 20), 0);
    assert_int_equal(
        tb_infer_run(&cfg, &f->ds, &io, 3, t0, 500 * TIER_NS_PER_MS, &f->res, &f->series), 0);
    assert_int_equal(f->res.scheduled, 50);
    /* at most 600 ms / 50 ms reads before the drain ends (fewer on a loaded machine); every
     * read the target finished before the drain ended (t0 + 600 ms) is counted as done */
    uint64_t ended = 0, ncalls = atomic_load(&t.calls);
    for (uint64_t k = 0; k < ncalls && k < SLOW_MAX_CALLS; k++)
        ended += t.ends[k] != 0 && t.ends[k] < t0 + 600 * TIER_NS_PER_MS;
    assert_true(f->res.ops >= ended && f->res.ops <= 14);
    assert_int_equal(f->res.ops, ncalls); /* a read once started is waited for, never dropped */
    assert_int_equal(f->res.ops + f->res.dropped, 50);
    assert_int_equal(tier_hist_count(f->res.lat), 50);
    assert_true(tier_hist_max(f->res.lat) >= 100 * TIER_NS_PER_MS);
}

/* Failed reads are counted, the first errno kept, and every request is still accounted for. */
static void test_infer_read_errors(void **state)
{
    struct fixture *f = *state;
    struct tb_io io = {.pread = flaky_pread};
    struct tb_infer_cfg cfg = infer_cfg(200, 4);
    atomic_store(&flaky_calls, 0);
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&f->series, t0, 20), 0);
    assert_int_equal(
        tb_infer_run(&cfg, &f->ds, &io, 4, t0, 500 * TIER_NS_PER_MS, &f->res, &f->series), 0);
    assert_int_equal(f->res.scheduled, 100);
    assert_int_equal(f->res.errors, 50);
    assert_int_equal(f->res.ops, 50);
    assert_int_equal(f->res.first_error, -EIO);
    assert_int_equal(tier_hist_count(f->res.lat), 50); /* only successes have a latency */
}

static struct tb_train_cfg train_cfg(unsigned threads, unsigned batch, uint64_t compute_ns)
{
    return (struct tb_train_cfg){
        .enabled = 1, .threads = threads, .batch = batch, .prefetch = 2, .compute_ns = compute_ns};
}

/* On tmpfs reads take microseconds, so the accelerator almost never waits: AU near 100 % and
 * the sample rate is the compute bound 1 / compute_per_sample. A loaded machine makes the
 * accelerator wait only while it or a reader was kept off the CPU, so the idle-machine bounds
 * (AU >= 90 %, 640 samples: 10 epochs) are widened by the scheduling delay the run suffered; the
 * relations between the engine's counters are exact under any load. */
static void test_au_tmpfs(void **state)
{
    (void)state;
    char dir[] = "/dev/shm/tierbench-au.XXXXXX";
    char err[256];
    struct tb_dataset ds;
    struct tb_class_result res;
    struct tb_series series;
    if (!mkdtemp(dir))
        skip(); /* no tmpfs on this machine */
    make_dataset(dir, 64, "fixed:16K");
    assert_int_equal(tb_dataset_load(&ds, dir, NULL, 0, err, sizeof(err)), 0);
    assert_int_equal(ds.nitems, 64);
    assert_int_equal(tb_result_init(&res), 0);
    struct tb_train_cfg cfg = train_cfg(2, 4, 2 * TIER_NS_PER_MS);
    cfg.prefetch = 8; /* 64 ms of lead over the accelerator */
    struct tb_io io = {.pread = tracked_pread};
    struct delay_probe probe;
    delay_probe_start(&probe);
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    uint64_t dur = 1500 * TIER_NS_PER_MS, batch_ns = 4 * 2 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&series, t0, 10), 0);
    assert_int_equal(tb_train_run(&cfg, &ds, &io, 5, t0, dur, &res, &series), 0);
    uint64_t delay = delay_probe_end(&probe);
    double au = tb_result_au(&res), sps = tb_result_ops_per_s(&res);
    /* AU = compute / (compute + wait), and the two account for the whole run back to back */
    assert_true(res.compute_ns + res.wait_ns <= dur);
    assert_true(res.compute_ns + res.wait_ns >= dur - TIER_NS_PER_MS);
    assert_true(fabs(au - 100.0 * (double)res.compute_ns / (double)dur) < 0.1);
    /* every sample consumed got its compute time (the last batch may be cut at the end), and no
     * more than a late wake-up of the accelerator, paid back from later batches, adds */
    assert_true(res.compute_ns + batch_ns >= res.ops * 2 * TIER_NS_PER_MS);
    assert_true(res.compute_ns <= res.ops * 2 * TIER_NS_PER_MS + TIER_NS_PER_MS + delay);
    /* AU >= 90 %: the wait is at most a ninth of the compute, plus the delay suffered */
    if (res.wait_ns > res.compute_ns / 9 + delay)
        fail_msg("AU %.1f%% on tmpfs (wait %.1f ms, compute %.1f ms, scheduling delay %.1f ms), "
                 "expected 90..100",
                 au, (double)res.wait_ns / 1e6, (double)res.compute_ns / 1e6, (double)delay / 1e6);
    /* compute bound: 1 / 2 ms = 500 samples/s, never more; at least 640 samples (10 epochs of
     * 64 files, 427/s), less what the delay held back */
    if (sps > 500 * 1.01 || res.ops * 2 * TIER_NS_PER_MS + delay < 640 * 2 * TIER_NS_PER_MS)
        fail_msg("%.1f samples/s (scheduling delay %.1f ms), expected just under 500", sps,
                 (double)delay / 1e6);
    assert_true(res.bytes >= res.ops * 16384);
    assert_int_equal(res.errors, 0);
    assert_int_equal(res.epochs, res.ops / 64);
    tb_series_fini(&series);
    tb_result_fini(&res);
    tb_dataset_fini(&ds);
    rm_rf(dir);
}

/* One reader at 10 ms per sample delivers 100 samples/s; the accelerator needs 5 ms per sample
 * (200/s). Each batch of 4 takes 40 ms to arrive and 20 ms to compute: AU = 20/40 = 50 %. A
 * loaded machine stretches the reads and the compute by its wake-up delays, so the exact checks
 * are relations between what the target delivered and what the engine counted, and the nominal
 * figures are bounds widened by the scheduling delay the run suffered. */
static void test_au_known_speed(void **state)
{
    struct fixture *f = *state;
    static struct slow_target t;
    memset(&t, 0, sizeof(t));
    t.delay_ns = 10 * TIER_NS_PER_MS;
    struct tb_io io = {.pread = slow_pread, .arg = &t};
    struct tb_train_cfg cfg = train_cfg(1, 4, 5 * TIER_NS_PER_MS);
    uint64_t dur = 2 * TIER_NS_PER_SEC, batch_ns = 4 * 5 * TIER_NS_PER_MS;
    struct delay_probe probe;
    delay_probe_start(&probe);
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&f->series, t0, 10), 0);
    assert_int_equal(tb_train_run(&cfg, &f->ds, &io, 6, t0, dur, &f->res, &f->series), 0);
    uint64_t delay = delay_probe_end(&probe);
    double au = tb_result_au(&f->res);
    uint64_t calls = atomic_load(&t.calls), ops = f->res.ops;
    /* Every sample is one read (256 KiB files, 1 MiB chunks). The samples consumed are the
     * samples read, less at most the prefetch queue (2 batches of 4): a queue that is not
     * counted, or samples counted without being read, break this. With the bounds on the reads
     * below, it also bounds the samples per second (~100). */
    if (ops > calls || ops + 8 < calls)
        fail_msg("%llu samples consumed, %llu read: expected the reads less at most 8",
                 (unsigned long long)ops, (unsigned long long)calls);
    /* AU = compute / (compute + wait), and the two account for the whole run back to back */
    assert_true(f->res.compute_ns + f->res.wait_ns <= dur);
    assert_true(f->res.compute_ns + f->res.wait_ns >= dur - TIER_NS_PER_MS);
    /* every sample consumed got its full compute time (the last batch may be cut at the end),
     * and no more than a late wake-up of the accelerator, paid back from later batches, adds */
    assert_true(f->res.compute_ns + batch_ns >= ops * 5 * TIER_NS_PER_MS);
    assert_true(f->res.compute_ns <= ops * 5 * TIER_NS_PER_MS + TIER_NS_PER_MS + delay);
    /* so AU is what the samples consumed predict: compute per sample x samples per second */
    double predicted = 100.0 * (double)ops * 5e6 / (double)dur;
    double tol = 100.0 * (double)(batch_ns + TIER_NS_PER_MS + delay) / (double)dur;
    if (fabs(au - predicted) > tol)
        fail_msg("AU %.1f%%, predicted %.1f%% +- %.1f from %llu samples consumed", au, predicted,
                 tol, (unsigned long long)ops);
    /* never above the storage bound: reads take 10 ms or more, one after the other, from t0
     * until the engine stops its reader (at the end, later only by a delayed wake-up); below
     * it only by the reads the scheduling delay held back (10 % for the reader's own work) */
    if (calls * 10 * TIER_NS_PER_MS > dur + delay + 20 * TIER_NS_PER_MS ||
        calls * 10 * TIER_NS_PER_MS + delay < dur * 9 / 10)
        fail_msg("%llu reads in 2 s (scheduling delay %.1f ms), expected ~200",
                 (unsigned long long)calls, (double)delay / 1e6);
    if (au > 60.0 + 100.0 * (double)delay / (double)dur)
        fail_msg("AU %.1f%%, expected ~50%% (storage-bound)", au);
    /* the per-second series carries the same split: its seconds add up to the totals */
    uint64_t busy = 0, wait = 0;
    for (int sec = 0; sec < 10; sec++) {
        struct tb_slot *sl = &f->series.slots[TB_TRAIN][sec];
        busy += sl->busy_ns;
        wait += sl->wait_ns;
        assert_true(sl->busy_ns + sl->wait_ns <= TIER_NS_PER_SEC + TIER_NS_PER_MS);
    }
    assert_int_equal(busy, f->res.compute_ns);
    assert_int_equal(wait, f->res.wait_ns);
    /* The second second both computed and waited: waits last ~20 ms and compute 20 ms, so only
     * a single interval of a whole second, which takes more than ~900 ms of delay, fills it. */
    struct tb_slot *s1 = &f->series.slots[TB_TRAIN][1];
    if (delay < 900 * TIER_NS_PER_MS)
        assert_true(s1->busy_ns > 0 && s1->wait_ns > 0);
}

/* A target failing half its reads must not stall the training pipeline: failed samples are
 * delivered as errors and the accelerator keeps getting batches. */
static void test_train_read_errors(void **state)
{
    struct fixture *f = *state;
    struct tb_io io = {.pread = flaky_pread};
    struct tb_train_cfg cfg = train_cfg(2, 4, 1 * TIER_NS_PER_MS);
    atomic_store(&flaky_calls, 0);
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&f->series, t0, 10), 0);
    assert_int_equal(
        tb_train_run(&cfg, &f->ds, &io, 8, t0, 500 * TIER_NS_PER_MS, &f->res, &f->series), 0);
    assert_true(f->res.ops > 100);
    assert_true(f->res.errors > 0);
    assert_int_equal(f->res.first_error, -EIO);
}

/* A checkpoint that cannot be written (its directory is taken by a file) is counted as an
 * error, and later checkpoints still run. */
static void test_checkpoint_write_error(void **state)
{
    struct fixture *f = *state;
    char root[PATH_MAX], blocker[PATH_MAX + 32];
    snprintf(root, sizeof(root), "%s/ckpt-err", f->dir);
    assert_int_equal(mkdir(root, 0755), 0);
    snprintf(blocker, sizeof(blocker), "%s/ckpt-t-1", root);
    tu_write_file(blocker, "x", 1);
    struct tb_ckpt_cfg cfg = {.enabled = 1,
                              .interval_ns = 200 * TIER_NS_PER_MS,
                              .bytes = 1 << 20,
                              .files = 2,
                              .threads = 2,
                              .fsync = 1};
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&f->series, t0, 10), 0);
    assert_int_equal(tb_ckpt_run(&cfg, root, "t", 1, t0, 500 * TIER_NS_PER_MS, &f->res, &f->series),
                     0);
    assert_int_equal(f->res.errors, 1);
    assert_int_equal(f->res.first_error, -ENOTDIR);
    assert_int_equal(f->res.ops, 1); /* the second checkpoint, at 400 ms */
    struct stat st;
    assert_int_equal(stat(root, &st), 0); /* not created by the engine: left in place */
    unlink(blocker);
}

static void test_checkpoint_engine(void **state)
{
    struct fixture *f = *state;
    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s/ckpt", f->dir);
    struct tb_ckpt_cfg cfg = {.enabled = 1,
                              .interval_ns = 300 * TIER_NS_PER_MS,
                              .bytes = 4 << 20,
                              .files = 3,
                              .threads = 2,
                              .fsync = 1};
    uint64_t t0 = tier_now_mono_ns() + 20 * TIER_NS_PER_MS;
    assert_int_equal(tb_series_init(&f->series, t0, 10), 0);
    assert_int_equal(tb_ckpt_run(&cfg, root, "t", 1, t0, TIER_NS_PER_SEC, &f->res, &f->series), 0);
    assert_int_equal(f->res.ops, 3); /* at 0.3, 0.6, 0.9 s */
    assert_int_equal(f->res.bytes, 3ull * (4 << 20));
    assert_int_equal(f->res.files_written, 9);
    assert_int_equal(tier_hist_count(f->res.lat), 3);
    assert_true(f->res.stall_ns > 0);
    struct stat st;
    assert_int_equal(stat(root, &st), -1); /* created by the engine, removed at the end */
    /* A directory that cannot be created is a clear setup error. */
    snprintf(root, sizeof(root), "%s/no/such/parent", f->dir);
    tb_result_fini(&f->res);
    assert_int_equal(tb_result_init(&f->res), 0);
    assert_int_equal(tb_ckpt_run(&cfg, root, "t", 1, t0, TIER_NS_PER_SEC, &f->res, &f->series),
                     -ENOENT);
}

static void test_perm_is_bijection(void **state)
{
    (void)state;
    static const uint64_t ns[] = {1, 2, 3, 7, 64, 1000, 4097};
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
        uint64_t n = ns[k];
        unsigned char *seen = calloc(n, 1);
        size_t same = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t p = tb_perm(i, n, 12345);
            assert_true(p < n);
            assert_int_equal(seen[p], 0);
            seen[p] = 1;
            same += tb_perm(i, n, 999) == p;
        }
        if (n >= 64)
            assert_true(same < n / 4); /* another epoch key gives another order */
        free(seen);
    }
}

static void test_parsers(void **state)
{
    (void)state;
    uint64_t v = 0, lo = 0, hi = 0;
    struct tb_size_dist d;
    assert_int_equal(tb_parse_duration_ns("500us", &v), 0);
    assert_int_equal(v, 500000);
    assert_int_equal(tb_parse_duration_ns("1.5s", &v), 0);
    assert_int_equal(v, 1500000000ULL);
    assert_int_equal(tb_parse_duration_ns("2m", &v), 0);
    assert_int_equal(v, 120000000000ULL);
    assert_int_equal(tb_parse_duration_ns("5", &v), -EINVAL); /* unit required */
    assert_int_equal(tb_parse_duration_ns("-1s", &v), -EINVAL);
    assert_int_equal(tb_parse_duration_ns("1 fortnight", &v), -EINVAL);
    assert_int_equal(tb_parse_range("4K-256K", &lo, &hi), 0);
    assert_int_equal(lo, 4096);
    assert_int_equal(hi, 262144);
    assert_int_equal(tb_parse_range("256K-4K", &lo, &hi), -ERANGE);
    assert_int_equal(tb_parse_range("4K", &lo, &hi), -EINVAL);
    assert_int_equal(tb_size_dist_parse("fixed:64K", &d), 0);
    assert_int_equal(d.a, 65536);
    assert_int_equal(tb_size_dist_parse("uniform:1K-2K", &d), 0);
    uint64_t rng = 1;
    for (int i = 0; i < 1000; i++) {
        uint64_t s = tb_size_dist_sample(&d, &rng);
        assert_true(s >= 1024 && s <= 2048);
    }
    assert_int_equal(tb_size_dist_parse("lognormal:100K,0.5", &d), 0);
    uint64_t below = 0;
    for (int i = 0; i < 10000; i++)
        below += tb_size_dist_sample(&d, &rng) < 100 * 1024;
    assert_true(below > 4700 && below < 5300); /* the median is the median */
    assert_int_equal(tb_size_dist_parse("normal:1K", &d), -EINVAL);
    assert_int_equal(tb_size_dist_parse("lognormal:1K", &d), -EINVAL);
    assert_int_equal(tb_size_dist_parse("fixed:0", &d), -EINVAL);
}

static void test_profile_messages(void **state)
{
    struct fixture *f = *state;
    char path[PATH_MAX], err[512];
    struct tb_config c;
    snprintf(path, sizeof(path), "%s/p.ini", f->dir);
    const char *good = "[run]\nduration = 3s\nphases = alone\n[training]\nthreads = 7\n"
                       "compute_per_sample = 250us\n[inference]\nrate = 55.5\nread_size = "
                       "8K-16K\n[checkpoint]\nenabled = false\n";
    tu_write_file(path, good, strlen(good));
    tb_config_defaults(&c);
    assert_int_equal(tb_config_load_profile(&c, path, err, sizeof(err)), 0);
    assert_int_equal(c.run.duration_ns, 3 * TIER_NS_PER_SEC);
    assert_int_equal(c.run.phases, TB_PHASES_ALONE);
    assert_int_equal(c.train.threads, 7);
    assert_int_equal(c.train.compute_ns, 250000);
    assert_true(fabs(c.infer.rate - 55.5) < 1e-9);
    assert_int_equal(c.infer.min_bytes, 8192);
    assert_int_equal(c.infer.direct, 0); /* the default */
    assert_int_equal(c.ckpt.enabled, 0);

    const char *direct = "[inference]\ndirect = yes\n";
    tu_write_file(path, direct, strlen(direct));
    assert_int_equal(tb_config_load_profile(&c, path, err, sizeof(err)), 0);
    assert_int_equal(c.infer.direct, 1);

    const char *bad = "[run]\nduration = 3s\n[training]\ntrheads = 4\n";
    tu_write_file(path, bad, strlen(bad));
    assert_int_equal(tb_config_load_profile(&c, path, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "p.ini:4: unknown key 'trheads' in [training]"));

    /* Flags override the profile. */
    tu_write_file(path, good, strlen(good));
    tb_config_defaults(&c);
    char a0[] = "run", a2[] = "--profile", a4[] = "--train-threads", a5[] = "3", a6[] = "--rate",
         a7[] = "10";
    char *argv[] = {a0, f->dir, a2, path, a4, a5, a6, a7};
    assert_int_equal(tb_config_from_args(&c, 8, argv, err, sizeof(err)), 0);
    assert_int_equal(c.train.threads, 3);
    assert_true(fabs(c.infer.rate - 10) < 1e-9);
    assert_int_equal(c.train.compute_ns, 250000); /* from the profile */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pacing_keeps_rate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queueing_counted_in_latency, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_timeout_drops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_infer_direct, setup, teardown),
        cmocka_unit_test_setup_teardown(test_infer_read_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_train_read_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_write_error, setup, teardown),
        cmocka_unit_test(test_au_tmpfs),
        cmocka_unit_test_setup_teardown(test_au_known_speed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_engine, setup, teardown),
        cmocka_unit_test(test_perm_is_bijection),
        cmocka_unit_test(test_parsers),
        cmocka_unit_test_setup_teardown(test_profile_messages, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
