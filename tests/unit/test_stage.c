/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_stage.c - unit tests for the staging engine (src/stage/stage.c) over real parts: a POSIX
 * backend on a temp directory, the real block cache (RAM + disk level in the temp directory) and
 * the real QoS scheduler attached to it. The struct tierd is assembled by hand, as main() would.
 *
 * Asserts: a job over a namespace stages every file of the sub-tree (nested directories, many
 * blocks per file, an empty file) and nothing outside the namespace prefix; every block ends up
 * cached; the fetches went through the scheduler as background class; a second job is
 * idempotent (all bytes already cached, no new backend fetch); single-object and directory
 * paths; --pin pins; missing paths give -ENOENT; a failing file is counted with the first error
 * kept (a wrapper backend injects the failure); a file changed since the listing is staged at
 * its new version and counted once; freeing the registry cancels a running job mid-fetch.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cache/cache.h"
#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "stage/stage.h"
#include "daemon/tierd.h"
#include "fakebe.h"
#include "qos/sched.h"
#include "testutil.h"

#define NFILES_TOP 240
#define NFILES_SUB 60 /* under sub/deeper/: 300 in all */
#define NFILES (NFILES_TOP + NFILES_SUB)
#define BLOCK (64u * 1024)
#define NGATED 20

/* The second namespace's backend wraps the real one (fakebe): stat() and read() of keys containing
 * "bad" fail (the only way to make one file of a listing fail deterministically), keys containing
 * "stale" are listed with a version they no longer have (changed after the listing), and reads of
 * keys containing "gate" wait at its gate until the test opens it (to catch a job in the middle of
 * a fetch). */
static const struct fakebe_fault bad_fault = {
    .err = -EIO, .count = FAKEBE_ALWAYS, .key_part = "bad"};

struct fixture {
    char *dir;
    char *root;
    char *cachedir;
    uint64_t total_bytes; /* under data/ */
    uint64_t sub_bytes;   /* under data/sub/ */
    struct backend *wrap;
    struct backend *raw; /* the POSIX backend inside the scheduler wrapper backends[0]: the
                          * test's own checks use it, so the scheduler counts only the stager */ /* second namespace, /bad (fakebe) */
    struct tierd d;
    char cname[16], nspath[16], nsprefix[16];
    char bname[16], bpath[16], bprefix[16];
    char gpath[16], gprefix[16];
};

static struct fixture *F;

static void write_dataset(struct fixture *f)
{
    char path[1024];
    uint64_t rnd = 42;
    snprintf(path, sizeof(path), "%s/data/sub/deeper", f->root);
    assert_int_equal(mkdir(path, 0755) == 0 || errno == EEXIST, 1);
    snprintf(path, sizeof(path), "%s/other", f->root);
    assert_int_equal(mkdir(path, 0755), 0);
    unsigned char *buf = malloc(4 * BLOCK);
    assert_non_null(buf);
    for (int i = 0; i < NFILES; i++) {
        /* 0 .. 4 blocks, with partial last blocks; file 0 is empty. */
        size_t len = i == 0 ? 0 : (size_t)(tu_rand_next(&rnd) % (4 * BLOCK));
        tu_fill_random(buf, len, (uint64_t)i);
        if (i < NFILES_TOP) {
            snprintf(path, sizeof(path), "%s/data/f%03d.bin", f->root, i);
        } else {
            snprintf(path, sizeof(path), "%s/data/sub/deeper/g%03d.bin", f->root, i);
            f->sub_bytes += len;
        }
        tu_write_file(path, buf, len);
        f->total_bytes += len;
    }
    /* Outside the namespace prefix: must not be staged. */
    snprintf(path, sizeof(path), "%s/other/x.bin", f->root);
    tu_write_file(path, buf, BLOCK);
    /* For the wrapper namespace: two good files and one that fails. */
    snprintf(path, sizeof(path), "%s/other/good1.bin", f->root);
    tu_write_file(path, buf, 100);
    snprintf(path, sizeof(path), "%s/other/bad.bin", f->root);
    tu_write_file(path, buf, 100);
    snprintf(path, sizeof(path), "%s/other/good2.bin", f->root);
    tu_write_file(path, buf, 100);
    snprintf(path, sizeof(path), "%s/other/stale.bin", f->root);
    tu_write_file(path, buf, 3 * BLOCK + 5);
    /* For the cancel test: files whose reads wait at the gate. */
    snprintf(path, sizeof(path), "%s/gated", f->root);
    assert_int_equal(mkdir(path, 0755), 0);
    for (int i = 0; i < NGATED; i++) {
        snprintf(path, sizeof(path), "%s/gated/gate%02d.bin", f->root, i);
        tu_write_file(path, buf, 100);
    }
    free(buf);
}

static int setup(void **state)
{
    (void)state;
    struct fixture *f = calloc(1, sizeof(*f));
    char path[1024];
    assert_non_null(f);
    f->dir = tu_mkdtemp("stage");
    assert_true(asprintf(&f->root, "%s/root", f->dir) > 0);
    assert_true(asprintf(&f->cachedir, "%s/cache", f->dir) > 0);
    assert_int_equal(mkdir(f->root, 0755), 0);
    snprintf(path, sizeof(path), "%s/data", f->root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/data/sub", f->root);
    assert_int_equal(mkdir(path, 0755), 0);
    write_dataset(f);

    struct tierd *d = &f->d;
    d->cfg.stage_threads = 4;
    d->cfg.cache.block_size = BLOCK;
    d->cfg.cache.ram_bytes = 8u << 20; /* smaller than the dataset: the disk level holds it */
    d->cfg.cache.disk_dir = f->cachedir;
    d->cfg.cache.disk_bytes = 256u << 20;
    d->cfg.cache.pin_bytes = 128u << 20;
    d->cfg.cache_disk_dir = f->cachedir;

    /* The backend passes the scheduling point as in tierd: wrapped in its own lane. */
    struct sched_config sc = {.max_inflight = 8};
    assert_int_equal(sched_new(&sc, &d->sched), 0);
    struct posix_backend_config pc = {.name = "warm", .root = f->root};
    struct backend *pb = NULL;
    assert_int_equal(backend_posix_open(&pc, &pb), 0);
    struct sched_backend_config bc = {.max_inflight = 8};
    assert_int_equal(sched_backend_wrap(d->sched, pb, &bc, &d->backends[0]), 0);
    f->raw = pb;
    tier_strlcpy(f->bname, "wrap", sizeof(f->bname));
    f->wrap = fakebe_wrap_new(f->bname, d->backends[0]);
    assert_non_null(f->wrap);
    fakebe_fail(f->wrap, FAKEBE_STAT, &bad_fault);
    fakebe_fail(f->wrap, FAKEBE_READ, &bad_fault);
    fakebe_list_stale(f->wrap, "stale");
    fakebe_gate_close(f->wrap, FAKEBE_READ, "gate");

    tier_strlcpy(f->cname, "warm", sizeof(f->cname));
    tier_strlcpy(f->nspath, "/ds", sizeof(f->nspath));
    tier_strlcpy(f->nsprefix, "data/", sizeof(f->nsprefix));
    tier_strlcpy(f->bpath, "/bad", sizeof(f->bpath));
    tier_strlcpy(f->bprefix, "other/", sizeof(f->bprefix));
    tier_strlcpy(f->gpath, "/gated", sizeof(f->gpath));
    tier_strlcpy(f->gprefix, "gated/", sizeof(f->gprefix));
    d->cfg.namespaces[0] = (struct tierd_ns_conf){
        .path = f->nspath, .backend = f->cname, .prefix = f->nsprefix, .mode = TIERD_NS_READ_CACHE};
    d->cfg.namespaces[1] = (struct tierd_ns_conf){
        .path = f->bpath, .backend = f->bname, .prefix = f->bprefix, .mode = TIERD_NS_READ_CACHE};
    d->cfg.namespaces[2] = (struct tierd_ns_conf){
        .path = f->gpath, .backend = f->bname, .prefix = f->gprefix, .mode = TIERD_NS_READ_CACHE};
    d->cfg.nnamespaces = 3;
    d->ns[0] = (struct tierd_ns){.conf = &d->cfg.namespaces[0], .be = d->backends[0]};
    d->ns[1] = (struct tierd_ns){.conf = &d->cfg.namespaces[1], .be = f->wrap};
    d->ns[2] = (struct tierd_ns){.conf = &d->cfg.namespaces[2], .be = f->wrap};
    d->nns = 3;

    assert_int_equal(cache_open(&d->cfg.cache, &d->cache), 0);
    struct stage_ctx stc = stage_ctx_tierd(d);
    assert_int_equal(stage_registry_new(&stc, &d->stages), 0);
    F = f;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    struct fixture *f = F;
    stage_registry_free(f->d.stages);
    cache_close(f->d.cache);
    sched_free(f->d.sched);
    backend_free(f->d.backends[0]);
    backend_free(f->wrap);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f->root);
    free(f->cachedir);
    free(f);
    return 0;
}

/* Poll a job until it is no longer running; fail at the deadline. */
static void wait_job(uint64_t id, struct stage_progress *p)
{
    TU_WAIT_UNTIL(stage_progress_get(F->d.stages, id, p) == 0 && p->state != STAGE_RUNNING);
}

static uint64_t run_job(const char *const *paths, size_t n, bool pin, struct stage_progress *p)
{
    uint64_t id = 0;
    assert_int_equal(stage_start(F->d.stages, paths, n, pin, &id), 0);
    assert_true(id >= 1);
    wait_job(id, p);
    return id;
}

/* Sum of cache_cached_bytes over every file under data/ (stat'ed afresh). */
static uint64_t cached_dataset_bytes(void)
{
    char key[256];
    uint64_t sum = 0;
    for (int i = 0; i < NFILES; i++) {
        struct backend_stat st;
        if (i < NFILES_TOP)
            snprintf(key, sizeof(key), "data/f%03d.bin", i);
        else
            snprintf(key, sizeof(key), "data/sub/deeper/g%03d.bin", i);
        assert_int_equal(backend_stat(F->raw, NULL, key, &st), 0);
        struct cache_obj obj = {
            .be = F->d.backends[0], .key = key, .etag = st.etag, .size_bytes = st.size_bytes};
        uint64_t c = cache_cached_bytes(F->d.cache, &obj);
        assert_int_equal(c, st.size_bytes);
        sum += c;
    }
    return sum;
}

static void test_stage_namespace_then_idempotent(void **state)
{
    (void)state;
    struct stage_progress p;
    struct cache_stats cs1, cs2;
    struct sched_stats ss;
    const char *paths[] = {"/ds"};

    uint64_t id = run_job(paths, 1, false, &p);
    assert_int_equal(id, 1);
    assert_int_equal(p.state, STAGE_DONE);
    assert_true(p.listing_done);
    assert_int_equal(p.errors, 0);
    assert_string_equal(p.first_error, "");
    assert_int_equal(p.files_total, NFILES);
    assert_int_equal(p.files_done, NFILES);
    assert_int_equal(p.bytes_total, F->total_bytes);
    assert_int_equal(p.bytes_done, F->total_bytes);
    assert_int_equal(p.bytes_already_cached, 0);
    assert_true(p.elapsed_ns > 0);
    assert_int_equal(cached_dataset_bytes(), F->total_bytes);

    /* Every fetch (and the job's stats and listings) passed the scheduling point as background
     * class: the ioctx travels with each backend call into the wrapper's lane. */
    cache_stats_get(F->d.cache, &cs1);
    sched_stats_get(F->d.sched, &ss);
    assert_true(cs1.fetches > 0);
    assert_true(ss.cls[TIER_IO_BACKGROUND].admitted > cs1.fetches); /* + the listing */
    assert_int_equal(ss.cls[TIER_IO_BACKGROUND].completed, ss.cls[TIER_IO_BACKGROUND].admitted);
    assert_int_equal(ss.cls[TIER_IO_TRAINING].admitted, 0);
    assert_int_equal(ss.cls[TIER_IO_INFERENCE].admitted, 0);
    assert_int_equal(ss.cls[TIER_IO_BACKGROUND].inflight_now, 0);

    /* Elapsed time is frozen once done. */
    struct stage_progress again;
    assert_int_equal(stage_progress_get(F->d.stages, id, &again), 0);
    assert_int_equal(again.elapsed_ns, p.elapsed_ns);

    /* Second run: nothing to fetch. Trailing slash means the same path. */
    const char *paths2[] = {"/ds/"};
    id = run_job(paths2, 1, false, &p);
    assert_int_equal(id, 2);
    assert_int_equal(p.state, STAGE_DONE);
    assert_int_equal(p.files_done, NFILES);
    assert_int_equal(p.bytes_done, F->total_bytes);
    assert_int_equal(p.bytes_already_cached, F->total_bytes);
    cache_stats_get(F->d.cache, &cs2);
    assert_int_equal(cs2.fetches, cs1.fetches);
}

static void test_stage_subdir_object_and_pin(void **state)
{
    (void)state;
    struct stage_progress p;
    struct cache_stats cs;

    /* A directory inside the namespace, and a single object, in one job, pinned. */
    const char *paths[] = {"/ds/sub", "/ds/f007.bin"};
    struct backend_stat st;
    assert_int_equal(backend_stat(F->raw, NULL, "data/f007.bin", &st), 0);
    run_job(paths, 2, true, &p);
    assert_int_equal(p.state, STAGE_DONE);
    assert_int_equal(p.files_total, NFILES_SUB + 1);
    assert_int_equal(p.files_done, NFILES_SUB + 1);
    assert_int_equal(p.bytes_total, F->sub_bytes + st.size_bytes);
    assert_int_equal(p.bytes_done, F->sub_bytes + st.size_bytes);

    cache_stats_get(F->d.cache, &cs);
    assert_true(cs.pinned_bytes >= F->sub_bytes + st.size_bytes);
    assert_int_equal(cached_dataset_bytes(), F->total_bytes);
}

static void test_stage_missing(void **state)
{
    (void)state;
    uint64_t id = 12345;
    const char *nons[] = {"/nowhere/x"};
    assert_int_equal(stage_start(F->d.stages, nons, 1, false, &id), -ENOENT);
    const char *nofile[] = {"/ds/no-such-file"};
    assert_int_equal(stage_start(F->d.stages, nofile, 1, false, &id), -ENOENT);
    assert_non_null(strstr(tier_err_msg(), "/ds/no-such-file"));
    /* One bad path fails the whole request; nothing is started. */
    const char *mixed[] = {"/ds", "/ds/nope/"};
    assert_int_equal(stage_start(F->d.stages, mixed, 2, false, &id), -ENOENT);
    assert_int_equal(id, 12345);
    assert_int_equal(stage_start(F->d.stages, mixed, 0, false, &id), -EINVAL);
    struct stage_progress p;
    assert_int_equal(stage_progress_get(F->d.stages, 999999, &p), -ENOENT);
}

static void test_stage_error_counted(void **state)
{
    (void)state;
    struct stage_progress p;
    const char *paths[] = {"/bad"};
    run_job(paths, 1, false, &p);
    assert_int_equal(p.state, STAGE_FAILED);
    assert_int_equal(p.files_total, 5); /* x.bin, good1, bad, good2, stale */
    assert_int_equal(p.files_done, 4);
    assert_int_equal(p.errors, 1);
    assert_string_equal(p.first_error, "/bad/bad.bin: injected failure for other/bad.bin");
    /* The stale one was staged afresh after its listed version failed (-ESTALE), and counted
     * once: bytes are those of the four good files. */
    uint64_t want = BLOCK + 100 + 100 + 3 * BLOCK + 5;
    assert_int_equal(p.bytes_done, want);
    assert_int_equal(p.bytes_total, want + 100);
    struct backend_stat st;
    assert_int_equal(backend_stat(F->d.backends[0], NULL, "other/stale.bin", &st), 0);
    struct cache_obj obj = {
        .be = F->wrap, .key = "other/stale.bin", .etag = st.etag, .size_bytes = st.size_bytes};
    assert_int_equal(cache_cached_bytes(F->d.cache, &obj), 3 * BLOCK + 5);
}

/* A cluster's staging (stage_start_cluster) of the same files: blocks the fake warm-up says
 * their owners fetched (the even ones) count in bytes_on_peers once, also for the stale file,
 * whose first (listed) version fails at its block 1 after block 0 went to a peer, and which is
 * then staged again from a fresh stat. */
static int warm_even(void *ud, const struct tier_ioctx *io, const struct cache_obj *obj,
                     uint64_t index)
{
    (void)ud;
    (void)io;
    (void)obj;
    return index % 2 == 0 ? 0 : -EAGAIN;
}

static void test_stage_cluster_stale_counted_once(void **state)
{
    (void)state;
    struct stage_ctx stc = stage_ctx_tierd(&F->d);
    stc.warm = warm_even;
    struct stage_registry *r = NULL;
    assert_int_equal(stage_registry_new(&stc, &r), 0);
    const char *paths[] = {"/bad"};
    uint64_t id = 0;
    assert_int_equal(stage_start_cluster(r, TIER_TENANT_DEFAULT, paths, 1, false, &id), 0);
    struct stage_progress p;
    TU_WAIT_UNTIL(stage_progress_get(r, id, &p) == 0 && p.state != STAGE_RUNNING);
    /* block 0 of each file (x.bin: BLOCK; good1, bad, good2: 100 each) and blocks 0 and 2 of
     * stale.bin (3 * BLOCK + 5): bad.bin's one block is a peer's, so no read of it fails */
    assert_int_equal(p.bytes_on_peers, 3 * BLOCK + 300);
    assert_int_equal(p.bytes_done, BLOCK + 300 + 3 * BLOCK + 5);
    assert_int_equal(p.errors, 0);
    stage_registry_free(r);
}

struct free_arg {
    struct stage_registry *r;
};

static void *free_main(void *arg)
{
    stage_registry_free(((struct free_arg *)arg)->r);
    return NULL;
}

static void test_stage_cancel_on_free(void **state)
{
    (void)state;
    struct backend *w = F->wrap;
    struct stage_progress p;
    uint64_t id = 0;
    const char *paths[] = {"/gated"};
    struct free_arg fa = {NULL};
    pthread_t th;

    struct stage_ctx sc = stage_ctx_tierd(&F->d);
    assert_int_equal(stage_registry_new(&sc, &fa.r), 0);
    assert_int_equal(stage_start_for(fa.r, 7, paths, 1, false, &id), 0);
    assert_int_equal(id, 1); /* ids count per registry */

    /* Wait until a worker is inside a backend read, held at the gate. */
    TU_WAIT_UNTIL(fakebe_gate_arrived(w) > 0);
    assert_int_equal(stage_progress_get(fa.r, id, &p), 0);
    assert_int_equal(p.state, STAGE_RUNNING);
    /* a running job holds its tenant (reclaim's hook, tierd_tenant_holds) */
    assert_int_equal(stage_tenant_running(fa.r, 7), 1);
    assert_int_equal(stage_tenant_running(fa.r, 8), 0);

    /* Free the registry from another thread. It cancels the job, then waits for the worker held
     * at the gate. Once the job has left the registry (progress -ENOENT) it is cancelled. */
    assert_int_equal(pthread_create(&th, NULL, free_main, &fa), 0);
    TU_WAIT_UNTIL(stage_progress_get(fa.r, id, &p) != 0);
    int entered = fakebe_gate_open(w); /* the reads that had reached the gate */
    pthread_join(th, NULL);

    /* Only the reads already started when the job was cancelled were done; no worker took a
     * new file or block afterwards: each of the stage_threads workers did at most the one read
     * it had taken before the cancel. That read may reach the gate after `entered` was counted
     * (a worker between its cancel check and the gate when the job was cancelled), so passed
     * can exceed entered, never stage_threads. */
    int passed = fakebe_gate_passed(w);
    assert_true(passed >= entered);
    assert_true(passed >= 1);
    assert_true(passed <= F->d.cfg.stage_threads);
    assert_true(passed < NGATED);
    stage_registry_free(NULL);
}

/* stage_cancel (job admission releases a job whose staging runs): the job ends FAILED with
 * "cancelled" as soon as the reads held at the gate return, having taken no new file or block;
 * an unknown id is -ENOENT. Runs after test_stage_cancel_on_free: the gate is closed again here
 * (some gated blocks are cached by now; the others still wait at it). */
static void test_stage_cancel_one(void **state)
{
    (void)state;
    struct backend *w = F->wrap;
    struct stage_registry *r = NULL;
    struct stage_progress p;
    uint64_t id = 0;
    const char *paths[] = {"/gated"};

    fakebe_gate_close(w, FAKEBE_READ, "gate");
    struct stage_ctx sc = stage_ctx_tierd(&F->d);
    assert_int_equal(stage_registry_new(&sc, &r), 0);
    assert_int_equal(stage_start(r, paths, 1, false, &id), 0);
    TU_WAIT_UNTIL(fakebe_gate_arrived(w) > 0);
    assert_int_equal(stage_cancel(r, id), 0);
    assert_int_equal(stage_cancel(r, id + 100), -ENOENT);
    fakebe_gate_open(w);
    TU_WAIT_UNTIL(stage_progress_get(r, id, &p) == 0 && p.state != STAGE_RUNNING);
    assert_int_equal(p.state, STAGE_FAILED);
    assert_non_null(strstr(p.first_error, "cancelled"));
    assert_true(p.files_done < NGATED);
    assert_true(fakebe_gate_passed(w) <= F->d.cfg.stage_threads);
    assert_int_equal(stage_cancel(r, id), 0); /* a finished job: nothing to do */
    stage_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage_namespace_then_idempotent),
        cmocka_unit_test(test_stage_subdir_object_and_pin),
        cmocka_unit_test(test_stage_missing),
        cmocka_unit_test(test_stage_error_counted),
        cmocka_unit_test(test_stage_cluster_stale_counted_once),
        cmocka_unit_test(test_stage_cancel_on_free),
        cmocka_unit_test(test_stage_cancel_one),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
