/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_jobs.c - unit tests for src/daemon/jobs.c over fake ops (no cache, no stager): the
 * capacity model (min of the level and the pin budget, less pins outside jobs, less
 * reservations; a job's own staged bytes not counted twice), admission, the FIFO queue without
 * overtaking and its order on release, rejection, bandwidth against each backend's link,
 * reference-counted pins shared by two jobs, a failing pin, idempotent retries and conflicts.
 * The real mount is tests/integration/test_jobs_fuse.sh.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/jobs.h"

#define MIB (1024ull * 1024)

struct fake_pin {
    char key[128];
    int pins, unpins;
};

struct fake {
    uint64_t level, pin_budget, pinned;
    uint64_t link_warm; /* backend "warm"'s link_capacity; "cold" has none */
    struct fake_pin pin[16];
    int npin;
    int fail_pin; /* -errno for the next pin */
    int stages, cancels;
    struct stage_progress prog[32]; /* by stage id */
};

static struct fake_pin *pin_of(struct fake *f, const char *be, const char *prefix)
{
    char key[128];
    snprintf(key, sizeof(key), "%s:%s", be, prefix);
    for (int i = 0; i < f->npin; i++)
        if (!strcmp(f->pin[i].key, key))
            return &f->pin[i];
    assert_true(f->npin < 16);
    snprintf(f->pin[f->npin].key, sizeof(key), "%s", key);
    return &f->pin[f->npin++];
}

static void f_space(void *ud, uint64_t *level, uint64_t *pin_budget, uint64_t *pinned)
{
    struct fake *f = ud;
    *level = f->level;
    *pin_budget = f->pin_budget;
    *pinned = f->pinned;
}

static uint64_t f_link(void *ud, const char *be)
{
    struct fake *f = ud;
    return !strcmp(be, "warm") ? f->link_warm : 0;
}

static int f_pin(void *ud, const char *be, const char *prefix)
{
    struct fake *f = ud;
    if (f->fail_pin) {
        int rc = f->fail_pin;
        f->fail_pin = 0;
        return rc;
    }
    struct fake_pin *p = pin_of(f, be, prefix);
    assert_int_equal(p->pins, p->unpins); /* J2: never pinned twice at once */
    p->pins++;
    return 0;
}

static int f_unpin(void *ud, const char *be, const char *prefix)
{
    struct fake *f = ud;
    struct fake_pin *p = pin_of(f, be, prefix);
    p->unpins++;
    assert_int_equal(p->pins, p->unpins);
    return 0;
}

static int f_stage(void *ud, uint32_t tenant, const char *const *paths, size_t n, uint64_t *id)
{
    (void)tenant;
    struct fake *f = ud;
    assert_true(n > 0 && paths[0][0] == '/');
    f->stages++;
    assert_true(f->stages < 32);
    *id = (uint64_t)f->stages;
    f->prog[f->stages].state = STAGE_RUNNING;
    return 0;
}

static int f_progress(void *ud, uint64_t id, struct stage_progress *p)
{
    struct fake *f = ud;
    if (id == 0 || id >= 32)
        return -ENOENT;
    *p = f->prog[id];
    return 0;
}

static int f_cancel(void *ud, uint64_t id)
{
    struct fake *f = ud;
    (void)id;
    f->cancels++;
    return 0;
}

static struct jobs *open_jobs(struct fake *f)
{
    struct jobs_ops ops = {.space = f_space,
                           .link_capacity = f_link,
                           .pin = f_pin,
                           .unpin = f_unpin,
                           .stage = f_stage,
                           .stage_progress = f_progress,
                           .cancel = f_cancel,
                           .ud = f};
    struct jobs *j = NULL;
    assert_int_equal(jobs_new(&ops, &j), 0);
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
    struct fake f = {.level = 100 * MIB, .pin_budget = 50 * MIB, .pinned = 10 * MIB};
    struct jobs *j = open_jobs(&f);
    char reason[256];
    size_t pos = 99;

    /* capacity 50 - 10 = 40 MiB */
    assert_int_equal(submit(j, "big", 41 * MIB, 0, NULL, 0, NULL, reason), JOBS_REJECT);
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
}

/* A job's staged (pinned) bytes are inside pinned_bytes: they do not count as pins outside
 * jobs, up to its reservation. */
static void test_own_pins_not_counted_twice(void **state)
{
    (void)state;
    struct fake f = {.level = 64 * MIB, .pin_budget = 64 * MIB};
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
}

/* Bandwidth is reserved per backend of the stage paths, against its link; a backend with no
 * link capacity, and a job with no stage paths, are not checked. */
static void test_bandwidth(void **state)
{
    (void)state;
    struct fake f = {.level = 64 * MIB, .pin_budget = 64 * MIB, .link_warm = 100 * MIB};
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
}

/* Two jobs pinning the same prefix: one pin, and the rule stays until the last release. */
static void test_pin_refcount(void **state)
{
    (void)state;
    struct fake f = {.level = 64 * MIB, .pin_budget = 64 * MIB};
    struct jobs *j = open_jobs(&f);
    const struct jobs_path ab[] = {DS_A, DS_B};
    assert_int_equal(submit(j, "1", MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(submit(j, "2", MIB, 0, ab, 2, NULL, NULL), JOBS_ADMIT);
    struct fake_pin *pa = pin_of(&f, "warm", "ds/a/"), *pb = pin_of(&f, "warm", "ds/b/");
    assert_int_equal(pa->pins, 1);
    assert_int_equal(pb->pins, 1);
    assert_int_equal(f.stages, 2);
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
}

/* A pin that fails leaves the job admitted with the error, and its release unpins nothing it
 * did not pin. */
static void test_pin_failure(void **state)
{
    (void)state;
    struct fake f = {.level = 64 * MIB, .pin_budget = 64 * MIB, .fail_pin = -ENOSPC};
    struct jobs *j = open_jobs(&f);
    assert_int_equal(submit(j, "1", MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    struct jobs_info ji;
    assert_int_equal(jobs_get(j, "1", &ji), 0);
    assert_int_equal(ji.staging, JOBS_STAGING_FAILED);
    assert_non_null(strstr(ji.stage_error, "cannot pin /ds/a"));
    jobs_info_fini(&ji);
    assert_int_equal(f.stages, 0);
    assert_int_equal(jobs_release(j, "1", &ji), 0);
    assert_string_equal(ji.id, "1");
    jobs_info_fini(&ji);
    assert_int_equal(pin_of(&f, "warm", "ds/a/")->unpins, 0);
    jobs_free(j);
}

/* The same request under the same id answers the job as it stands; another is a conflict. */
static void test_idempotent_and_conflict(void **state)
{
    (void)state;
    struct fake f = {.level = 10 * MIB, .pin_budget = 10 * MIB};
    struct jobs *j = open_jobs(&f);
    size_t pos = 0;
    char reason[256];
    assert_int_equal(submit(j, "1", 8 * MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(submit(j, "1", 8 * MIB, 0, &DS_A, 1, NULL, NULL), JOBS_ADMIT);
    assert_int_equal(f.stages, 1); /* not staged again */
    assert_int_equal(pin_of(&f, "warm", "ds/a/")->pins, 1);
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
    jobs_free(j);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
