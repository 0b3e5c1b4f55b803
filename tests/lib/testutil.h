/* SPDX-License-Identifier: Apache-2.0 */
/*
 * testutil.h - helpers shared by the test programs: scratch directories, deterministic random
 * data, and the connection details of the test Ceph RGW written by scripts/ceph.sh.
 */
#ifndef TIER_TESTS_TESTUTIL_H
#define TIER_TESTS_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3env.h"

/* Create a fresh empty directory under $TIER_TEST_TMP (or /tmp) named after tag; returns a
 * malloc'd path. Aborts the test on failure. */
char *tu_mkdtemp(const char *tag);
/* rm -rf path (must be under the test tmp root). */
void tu_rmtree(const char *path);

/* Fill buf with deterministic pseudo-random bytes from seed (splitmix64). */
void tu_fill_random(void *buf, size_t len, uint64_t seed);
uint64_t tu_rand_next(uint64_t *state);

/* Write / read a whole file; abort the test on failure. tu_read_file returns malloc'd data. */
void tu_write_file(const char *path, const void *data, size_t len);
void *tu_read_file(const char *path, size_t *len);

/* Wait for a condition other threads make true: TU_WAIT_UNTIL(cond) evaluates cond every
 * millisecond and fails the test (cmocka's assert_true) when TU_WAIT_S seconds pass first. The
 * deadline is long on purpose: a loaded CI machine is slow, never a reason to fail; a wait that
 * measures time is not this. tu_wait_tick() is its step: it sets *deadline on its first call
 * (*deadline == 0), returns false once it has passed, else sleeps a millisecond and returns true.
 */
#define TU_WAIT_S 120
#define TU_WAIT_UNTIL(cond)                                                                        \
    do {                                                                                           \
        uint64_t tu_deadline_ = 0;                                                                 \
        while (!(cond))                                                                            \
            assert_true(tu_wait_tick(&tu_deadline_));                                              \
    } while (0)
bool tu_wait_tick(uint64_t *deadline);

/* Run scripts/ceph.sh with one verb ("stop-rgw", "start-rgw"); returns its exit status. */
int tu_ceph_ctl(const char *verb);

#endif
