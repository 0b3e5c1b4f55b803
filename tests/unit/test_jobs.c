/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_jobs.c - unit tests for src/jobs/jobs.c over fake ops (tests/lib/fakejobs.h: no cache,
 * no stager): the capacity model (min of the level and the pin budget, less pins outside jobs,
 * less reservations; a job's own staged bytes not counted twice), admission, the FIFO queue
 * without overtaking and its order on release, rejection, bandwidth against each backend's link,
 * reference-counted pins shared by two jobs, a failing pin, idempotent retries and conflicts,
 * a cluster-wide staging (its bytes warmed on peers are not its pins here).
 * The real mount is tests/integration/test_jobs_fuse.sh.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/timeutil.h"
#include "fakejobs.h"
#include "jobs/jobs.h"

#define MIB (1024ull * 1024)

static struct jobs *open_jobs(struct fakejobs *f)
{
    struct jobs_ops ops;
    fakejobs_ops(f, &ops);
    struct jobs *j = NULL;
    assert_int_equal(jobs_new(&ops, &j), 0);
    f->user = j;
    return j;
}

static const struct jobs_path DS_A = {"/ds/a", "warm", "ds/a/"};
static const struct jobs_path DS_B = {"/ds/b", "warm", "ds/b/"};
static const struct jobs_path COLD = {"/cold/x", "cold", "x/"};

/* Submit id asking bytes and bw over stage[0..n); returns the verdict; *pos the position. */
static enum jobs_verdict submit(struct jobs *j, const char *id, uint64_t bytes, uint64_t bw,
                                const struct jobs_path *stage, size_t n, size_t *pos, char *reason)
{
    struct jobs_request rq = {.id = id,
                              .tenant = 1,
                              .tenant_name = "t",
                              .cls = TIER_IO_TRAINING,
                              .cache_bytes = bytes,
                              .bandwidth_bps = bw,
                              .stage = stage,
                              .nstage = n};
    enum jobs_verdict v = JOBS_REJECT;
    struct jobs_info ji;
    assert_int_equal(jobs_submit(j, &rq, &v, &ji), 0);
    if (pos)
        *pos = ji.position;
    if (reason)
        snprintf(reason, 256, "%s", ji.reason);
    jobs_info_fini(&ji);
    return v;
}

static enum jobs_state state_of(struct jobs *j, const char *id)
{
    struct jobs_info ji;
    assert_int_equal(jobs_get(j, id, &ji), 0);
    enum jobs_state s = ji.state;
    jobs_info_fini(&ji);
    return s;
}

/* The capacity is the smaller of the level and the pin budget, less pins outside jobs; jobs
 * queue in order behind a head that does not fit, and a release admits the head(s) in order. */
static void test_capacity_and_queue(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 100 * MIB, .pin_budget = 50 * MIB, .pinned = 10 * MIB};
    struct jobs *j = open_jobs(&f);
    char reason[256];
    size_t pos = 99;

    /* capacity 50 - 10 = 40 MiB; never more than min(100, 50) */
    assert_int_equal(submit(j, "big", 51 * MIB, 0, NULL, 0, NULL, reason), JOBS_REJECT);
    assert_non_null(strstr(reason, "more than jobs may ever reserve"));
    struct jobs_info *v = NULL;
    size_t n = 9;
    struct jobs_capacity c;
    assert_int_equal(jobs_list(j, &v, &n, &c), 0);
    assert_int_equal(n, 0); /* a rejection records nothing */
    jobs_list_free(v, n);
    assert_int_equal(c.capacity_bytes, 40 * MIB);

    assert_int_equal(submit(j, "1", 25 * MIB, 0, NULL, 0, &pos, NULL), JOBS_ADMIT);
    assert_int_equal(pos, 0);
    assert_int_equal(submit(j, "2", 20 * MIB, 0, NULL, 0, &pos, reason), JOBS_QUEUE);
    assert_int_equal(pos, 1);
    assert_non_null(strstr(reason, "hot-tier space"));
    /* 15 MiB are free, but job 2 is first */
    assert_int_equal(submit(j, "3", 5 * MIB, 0, NULL, 0, &pos, reason), JOBS_QUEUE);
    assert_int_equal(pos, 2);
    assert_non_null(strstr(reason, "behind 1 queued"));
    assert_int_equal(submit(j, "4", 30 * MIB, 0, NULL, 0, &pos, NULL), JOBS_QUEUE);
    assert_int_equal(pos, 3);
    assert_int_equal(submit(j, "5", 1 * MIB, 0, NULL, 0, &pos, NULL), JOBS_QUEUE);
    assert_int_equal(pos, 4);

    assert_int_equal(jobs_list(j, &v, &n, &c), 0);
    assert_int_equal(n, 5);
    assert_string_equal(v[0].id, "1");
    assert_string_equal(v[1].id, "2");
    assert_string_equal(v[4].id, "5");
    assert_int_equal(c.reserved_bytes, 25 * MIB);
    assert_int_equal(c.reservable_bytes, 15 * MIB);
    assert_int_equal(c.queued, 4);
    jobs_list_free(v, n);

    /* release 1: 2 (20) and 3 (5) fit in 40; 4 (30) does not, and 5 (1) stays behind it */
    assert_int_equal(jobs_release(j, "1", NULL), 0);
    assert_int_equal(state_of(j, "2"), JOBS_ADMITTED);
    assert_int_equal(state_of(j, "3"), JOBS_ADMITTED);
    assert_int_equal(state_of(j, "4"), JOBS_QUEUED);
    assert_int_equal(state_of(j, "5"), JOBS_QUEUED);
    struct jobs_info ji;
    assert_int_equal(jobs_get(j, "5", &ji), 0);
    assert_int_equal(ji.position, 2);
    jobs_info_fini(&ji);

    /* releasing the queued head lets the one behind it in */
    assert_int_equal(jobs_release(j, "4", NULL), 0);
    assert_int_equal(state_of(j, "5"), JOBS_ADMITTED);
    assert_int_equal(jobs_release(j, "4", NULL), -ENOENT);
    assert_int_equal(jobs_get(j, "4", &ji), -ENOENT);

    /* pins outside jobs going away free space: seen by the next submit */
    assert_int_equal(submit(j, "6", 20 * MIB, 0, NULL, 0, NULL, NULL), JOBS_QUEUE);
    f.pinned = 0; /* 50 - 26 reserved = 24 */
    assert_int_equal(submit(j, "7", 1 * MIB, 0, NULL, 0, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(state_of(j, "6"), JOBS_ADMITTED);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* A job's staged (pinned) bytes are inside pinned_bytes: they do not count as pins outside
 * jobs, up to its reservation. */
static void test_own_pins_not_counted_twice(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB};
    struct jobs *j = open_jobs(&f);
    assert_int_equal(submit(j, "a", 32 * MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    f.prog[1].bytes_done = 40 * MIB; /* staged more than reserved */
    f.prog[1].state = STAGE_DONE;
    f.pinned = 48 * MIB; /* 40 of job a + 8 pinned by hand */
    struct jobs_info *v = NULL;
    size_t n = 0;
    struct jobs_capacity c;
    assert_int_equal(jobs_list(j, &v, &n, &c), 0);
    assert_int_equal(c.jobs_pinned_bytes, 32 * MIB);
    assert_int_equal(c.capacity_bytes, 48 * MIB); /* 64 - (48 - 32) */
    assert_int_equal(c.reservable_bytes, 16 * MIB);
    assert_int_equal(v[0].staging, JOBS_STAGING_DONE);
    assert_int_equal(v[0].staged_bytes, 40 * MIB);
    jobs_list_free(v, n);
    assert_int_equal(submit(j, "b", 16 * MIB, 0, NULL, 0, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(submit(j, "c", 1, 0, NULL, 0, NULL, NULL), JOBS_QUEUE);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* Bandwidth is reserved per backend of the stage paths, against its link; a backend with no
 * link capacity, and a job with no stage paths, are not checked. */
static void test_bandwidth(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB, .link_warm = 100 * MIB};
    struct jobs *j = open_jobs(&f);
    char reason[256];
    const struct jobs_path ab[] = {DS_A, DS_B};
    assert_int_equal(submit(j, "over", 1, 101 * MIB, &DS_A, 1, NULL, reason), JOBS_REJECT);
    assert_non_null(strstr(reason, "link_capacity"));
    /* two paths on one backend reserve once: 60 of 100 */
    assert_int_equal(submit(j, "1", 1, 60 * MIB, ab, 2, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(submit(j, "2", 1, 50 * MIB, &DS_B, 1, NULL, reason), JOBS_QUEUE);
    assert_non_null(strstr(reason, "bandwidth on backend warm"));
    /* no overtaking for bandwidth either, even on another backend */
    assert_int_equal(submit(j, "3", 1, 500 * MIB, &COLD, 1, NULL, NULL), JOBS_QUEUE);
    assert_int_equal(jobs_release(j, "1", NULL), 0);
    assert_int_equal(state_of(j, "2"), JOBS_ADMITTED);
    assert_int_equal(state_of(j, "3"), JOBS_ADMITTED); /* cold has no link capacity */
    assert_int_equal(submit(j, "4", 1, 1000 * MIB, NULL, 0, NULL, NULL), JOBS_ADMIT);
    struct jobs_info ji;
    assert_int_equal(jobs_get(j, "4", &ji), 0);
    assert_int_equal(ji.bandwidth_bps, 1000 * MIB); /* recorded */
    assert_int_equal(ji.staging, JOBS_STAGING_NONE);
    jobs_info_fini(&ji);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* Two jobs pinning the same prefix: one pin, and the rule stays until the last release. */
static void test_pin_refcount(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB};
    struct jobs *j = open_jobs(&f);
    const struct jobs_path ab[] = {DS_A, DS_B};
    assert_int_equal(submit(j, "1", MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(submit(j, "2", MIB, 0, ab, 2, NULL, NULL), JOBS_ADMIT);
    struct fakejobs_pin *pa = fakejobs_pin_of(&f, "warm", "ds/a/"),
                        *pb = fakejobs_pin_of(&f, "warm", "ds/b/");
    assert_int_equal(pa->pins, 1);
    assert_int_equal(pb->pins, 1);
    assert_int_equal(f.nstages, 2);
    assert_int_equal(jobs_release(j, "1", NULL), 0);
    assert_int_equal(pa->unpins, 0); /* job 2 still holds ds/a/ */
    assert_int_equal(f.cancels, 1);
    assert_int_equal(jobs_release(j, "2", NULL), 0);
    assert_int_equal(pa->unpins, 1);
    assert_int_equal(pb->unpins, 1);
    /* pinned again by a new job: a fresh rule */
    assert_int_equal(submit(j, "3", MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(pa->pins, 2);
    jobs_free(j); /* unpins what jobs hold */
    assert_int_equal(pa->unpins, 2);
    fakejobs_fini(&f);
}

/* A pin that fails leaves the job admitted with the error, and its release unpins nothing it
 * did not pin. */
static void test_pin_failure(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB, .fail_pin = -ENOSPC};
    struct jobs *j = open_jobs(&f);
    assert_int_equal(submit(j, "1", MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    struct jobs_info ji;
    assert_int_equal(jobs_get(j, "1", &ji), 0);
    assert_int_equal(ji.staging, JOBS_STAGING_FAILED);
    assert_non_null(strstr(ji.stage_error, "cannot pin /ds/a"));
    jobs_info_fini(&ji);
    assert_int_equal(f.nstages, 0);
    assert_int_equal(jobs_release(j, "1", &ji), 0);
    assert_string_equal(ji.id, "1");
    jobs_info_fini(&ji);
    assert_int_equal(fakejobs_pin_of(&f, "warm", "ds/a/")->unpins, 0);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* The same request under the same id answers the job as it stands; another is a conflict. */
static void test_idempotent_and_conflict(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 10 * MIB, .pin_budget = 10 * MIB};
    struct jobs *j = open_jobs(&f);
    size_t pos = 0;
    char reason[256];
    assert_int_equal(submit(j, "1", 8 * MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(submit(j, "1", 8 * MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(f.nstages, 1); /* not staged again */
    assert_int_equal(fakejobs_pin_of(&f, "warm", "ds/a/")->pins, 1);
    assert_int_equal(submit(j, "2", 8 * MIB, 0, NULL, 0, &pos, NULL), JOBS_QUEUE);
    assert_int_equal(submit(j, "2", 8 * MIB, 0, NULL, 0, &pos, NULL), JOBS_QUEUE);
    assert_int_equal(pos, 1);
    assert_int_equal(submit(j, "1", 8 * MIB, 0, &DS_B, 1, NULL, reason), JOBS_CONFLICT);
    assert_non_null(strstr(reason, "another request"));
    assert_int_equal(submit(j, "2", 9 * MIB, 0, NULL, 0, NULL, reason), JOBS_CONFLICT);
    assert_int_equal(state_of(j, "2"), JOBS_QUEUED);

    struct jobs_request bad = {.id = "no spaces", .cache_bytes = 1};
    enum jobs_verdict v;
    struct jobs_info ji;
    assert_int_equal(jobs_submit(j, &bad, &v, &ji), -EINVAL);
    assert_true(jobs_id_valid("slurm-1234.0"));
    assert_false(jobs_id_valid(""));
    assert_false(jobs_id_valid("a/b"));
    assert_false(jobs_id_valid("."));
    assert_false(jobs_id_valid(".."));
    assert_false(jobs_id_valid("-x"));
    assert_true(jobs_id_valid("a.."));
    /* the precheck (before a new tenant is registered) sees rejections and conflicts only */
    char why[256];
    struct jobs_request pre = {.id = "1",
                               .tenant_name = "t",
                               .cls = TIER_IO_TRAINING,
                               .cache_bytes = 8 * MIB,
                               .stage = &DS_A,
                               .nstage = 1};
    assert_int_equal(jobs_precheck(j, &pre, why, sizeof(why)), JOBS_ADMIT); /* a retry */
    pre.tenant_name = "u";
    assert_int_equal(jobs_precheck(j, &pre, why, sizeof(why)), JOBS_CONFLICT);
    assert_non_null(strstr(why, "another request"));
    pre.id = "new";
    pre.cache_bytes = 11 * MIB;
    assert_int_equal(jobs_precheck(j, &pre, why, sizeof(why)), JOBS_REJECT);
    assert_non_null(strstr(why, "more than jobs may ever reserve"));
    pre.cache_bytes = 9 * MIB; /* would queue */
    assert_int_equal(jobs_precheck(j, &pre, why, sizeof(why)), JOBS_ADMIT);
    assert_int_equal(jobs_get(j, "new", &ji), -ENOENT); /* nothing recorded */
    /* stage paths into no reservation */
    struct jobs_request zero = {.id = "z", .cache_bytes = 0, .stage = &DS_A, .nstage = 1};
    assert_int_equal(jobs_submit(j, &zero, &v, &ji), -EINVAL);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* A job that does not fit only because of pins outside jobs is queued, not rejected, and a GET
 * admits it once they go. */
static void test_never_vs_later(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 100 * MIB, .pin_budget = 50 * MIB, .pinned = 10 * MIB};
    struct jobs *j = open_jobs(&f);
    char reason[256];
    size_t pos = 0;
    assert_int_equal(submit(j, "41", 41 * MIB, 0, NULL, 0, &pos, reason), JOBS_QUEUE);
    assert_int_equal(pos, 1);
    assert_non_null(strstr(reason, "pinned outside jobs"));
    f.pin_budget = 40 * MIB; /* a queued head is never rejected later: it waits */
    assert_int_equal(state_of(j, "41"), JOBS_QUEUED);
    f.pin_budget = 50 * MIB;
    f.pinned = 0;
    assert_int_equal(state_of(j, "41"), JOBS_ADMITTED); /* GET re-examines the queue */
    jobs_free(j);
    fakejobs_fini(&f);
}

struct side {
    struct jobs *j;
    const char *release; /* NULL: list */
    volatile int done;
    int rc;
};

static void *side_main(void *arg)
{
    struct side *s = arg;
    if (s->release) {
        s->rc = jobs_release(s->j, s->release, NULL);
    } else {
        struct jobs_info *v = NULL;
        size_t n = 0;
        s->rc = jobs_list(s->j, &v, &n, NULL);
        if (s->rc == 0)
            jobs_list_free(v, n);
    }
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static struct side g_side;

/* Run g_side on another thread and wait (5 s at most) for it: it needs the registry's mutex. */
static void side_run(struct fakejobs *f)
{
    g_side.j = f->user;
    g_side.done = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, side_main, &g_side), 0);
    uint64_t deadline = tier_now_mono_ns() + 5 * (uint64_t)TIER_NS_PER_SEC;
    while (!__atomic_load_n(&g_side.done, __ATOMIC_ACQUIRE) && tier_now_mono_ns() < deadline)
        sched_yield();
    assert_true(__atomic_load_n(&g_side.done, __ATOMIC_ACQUIRE)); /* mu held across ops.stage */
    pthread_join(t, NULL);
    assert_int_equal(g_side.rc, 0);
}

/* ops.stage (backend I/O) runs without the registry's mutex; a job released meanwhile has its
 * new staging cancelled and its pins dropped. */
static void test_stage_unlocked(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB};
    struct jobs *j = open_jobs(&f);
    g_side.release = NULL;
    f.on_stage = side_run; /* a GET /v1/jobs during the start of a staging */
    assert_int_equal(submit(j, "1", MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(f.nstages, 1);

    g_side.release = "2"; /* DELETE while its staging starts */
    f.on_stage = side_run;
    assert_int_equal(submit(j, "2", MIB, 0, &DS_B, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(f.nstages, 2);
    assert_int_equal(f.cancels, 1);
    assert_int_equal(f.last_cancel, 2);
    assert_int_equal(fakejobs_pin_of(&f, "warm", "ds/b/")->unpins, 1);
    struct jobs_info ji;
    assert_int_equal(jobs_get(j, "2", &ji), -ENOENT);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* The final progress is kept: a staging the stager pruned stays done with its bytes (which keep
 * counting as the job's own pins); one pruned before it was seen finished shows failed. */
static void test_final_progress_kept(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB};
    struct jobs *j = open_jobs(&f);
    assert_int_equal(submit(j, "a", 16 * MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(submit(j, "b", 16 * MIB, 0, &DS_B, 1, NULL, NULL), JOBS_ADMIT);
    f.prog[1] =
        (struct stage_progress){.state = STAGE_DONE, .bytes_done = 8 * MIB, .bytes_total = 8 * MIB};
    f.prog[2].bytes_done = 2 * MIB;
    f.pinned = 10 * MIB;
    struct jobs_info ji;
    assert_int_equal(jobs_get(j, "a", &ji), 0); /* seen finished */
    jobs_info_fini(&ji);
    assert_int_equal(jobs_get(j, "b", &ji), 0); /* seen running, 2 MiB staged */
    jobs_info_fini(&ji);
    f.gone[1] = f.gone[2] = true;
    struct jobs_info *v = NULL;
    size_t n = 0;
    struct jobs_capacity c;
    assert_int_equal(jobs_list(j, &v, &n, &c), 0);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].staging, JOBS_STAGING_DONE);
    assert_int_equal(v[0].staged_bytes, 8 * MIB);
    assert_int_equal(v[1].staging, JOBS_STAGING_FAILED);
    assert_non_null(strstr(v[1].stage_error, "no longer keeps"));
    assert_int_equal(v[1].staged_bytes, 2 * MIB);
    assert_int_equal(c.jobs_pinned_bytes, 10 * MIB); /* no pins outside jobs */
    assert_int_equal(c.capacity_bytes, 64 * MIB);
    jobs_list_free(v, n);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* Stage paths listing more than cache_bytes fail the job's staging (cancelled); the reservation
 * is held until the release. */
static void test_over_reservation(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB};
    struct jobs *j = open_jobs(&f);
    assert_int_equal(submit(j, "a", 4 * MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    f.prog[1].bytes_total = 5 * MIB;
    struct jobs_info *v = NULL;
    size_t n = 0;
    struct jobs_capacity c;
    assert_int_equal(jobs_list(j, &v, &n, &c), 0);
    assert_int_equal(v[0].state, JOBS_ADMITTED);
    assert_int_equal(v[0].staging, JOBS_STAGING_FAILED);
    assert_non_null(strstr(v[0].stage_error, "more than cache_bytes"));
    assert_int_equal(c.reserved_bytes, 4 * MIB);
    jobs_list_free(v, n);
    assert_int_equal(f.cancels, 1);
    assert_int_equal(f.last_cancel, 1);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* A full stager (-EBUSY) leaves the admitted job waiting to stage; a GET retries. */
static void test_stager_busy(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB, .busy = 1};
    struct jobs *j = open_jobs(&f);
    assert_int_equal(submit(j, "a", MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    struct jobs_info ji;
    f.busy = 1; /* still full at the first GET */
    assert_int_equal(jobs_get(j, "a", &ji), 0);
    assert_int_equal(ji.staging, JOBS_STAGING_PENDING);
    assert_non_null(strstr(ji.reason, "waiting to stage"));
    jobs_info_fini(&ji);
    assert_int_equal(jobs_get(j, "a", &ji), 0);
    assert_int_equal(ji.staging, JOBS_STAGING_RUNNING);
    assert_int_equal(ji.stage_id, 1);
    jobs_info_fini(&ji);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* A job with cluster stages cluster-wide (ops.stage's cluster), shows it, and counts as its own
 * pins only what it staged here: the bytes warmed on their owners are pinned there. A retry
 * with another cluster value is the same job (not a conflict), its staging unchanged. */
static void test_cluster_staging(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB};
    struct jobs *j = open_jobs(&f);
    struct jobs_request rq = {.id = "c",
                              .tenant = 1,
                              .tenant_name = "t",
                              .cls = TIER_IO_TRAINING,
                              .cache_bytes = 16 * MIB,
                              .stage = &DS_A,
                              .nstage = 1,
                              .cluster = true};
    enum jobs_verdict v = JOBS_REJECT;
    struct jobs_info ji;
    assert_int_equal(jobs_submit(j, &rq, &v, &ji), 0);
    assert_int_equal(v, JOBS_ADMIT);
    assert_true(ji.cluster);
    jobs_info_fini(&ji);
    assert_true(f.last_cluster);
    f.prog[1] = (struct stage_progress){.state = STAGE_DONE,
                                        .bytes_done = 12 * MIB,
                                        .bytes_total = 12 * MIB,
                                        .bytes_on_peers = 8 * MIB};
    f.pinned = 6 * MIB; /* its 4 MiB, and 2 MiB pinned by hand */
    struct jobs_info *lv = NULL;
    size_t n = 0;
    struct jobs_capacity c;
    assert_int_equal(jobs_list(j, &lv, &n, &c), 0);
    assert_int_equal(n, 1);
    assert_true(lv[0].cluster);
    assert_int_equal(lv[0].staging, JOBS_STAGING_DONE);
    assert_int_equal(lv[0].staged_bytes, 12 * MIB);
    assert_int_equal(lv[0].staged_on_peers, 8 * MIB);
    assert_int_equal(c.jobs_pinned_bytes, 4 * MIB);
    assert_int_equal(c.capacity_bytes, 62 * MIB); /* less the 2 MiB outside jobs */
    jobs_list_free(lv, n);
    rq.cluster = false; /* a retry without it: the job as it stands */
    assert_int_equal(jobs_submit(j, &rq, &v, &ji), 0);
    assert_int_equal(v, JOBS_ADMIT);
    assert_true(ji.cluster);
    jobs_info_fini(&ji);
    /* a job without it stages on this node alone */
    assert_int_equal(submit(j, "d", MIB, 0, &DS_B, 1, NULL, NULL), JOBS_ADMIT);
    assert_false(f.last_cluster);
    assert_int_equal(jobs_get(j, "d", &ji), 0);
    assert_false(ji.cluster);
    jobs_info_fini(&ji);
    jobs_free(j);
    fakejobs_fini(&f);
}

/* A prefix pinned by hand before a job pinned it stays pinned after the job's release. */
static void test_hand_pin_kept(void **state)
{
    (void)state;
    struct fakejobs f = {.level = 64 * MIB, .pin_budget = 64 * MIB};
    struct jobs *j = open_jobs(&f);
    fakejobs_pin_of(&f, "warm", "ds/a/")->hand = true;
    assert_int_equal(submit(j, "a", MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(jobs_release(j, "a", NULL), 0); /* f_unpin asserts it is not called */
    assert_int_equal(fakejobs_pin_of(&f, "warm", "ds/a/")->unpins, 0);
    jobs_free(j);
    fakejobs_fini(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capacity_and_queue),
        cmocka_unit_test(test_own_pins_not_counted_twice),
        cmocka_unit_test(test_bandwidth),
        cmocka_unit_test(test_pin_refcount),
        cmocka_unit_test(test_pin_failure),
        cmocka_unit_test(test_idempotent_and_conflict),
        cmocka_unit_test(test_never_vs_later),
        cmocka_unit_test(test_stage_unlocked),
        cmocka_unit_test(test_final_progress_kept),
        cmocka_unit_test(test_over_reservation),
        cmocka_unit_test(test_stager_busy),
        cmocka_unit_test(test_hand_pin_kept),
        cmocka_unit_test(test_cluster_staging),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
