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

/* Connection details for the test RGW, from $TIER_CEPH_DIR/env (written by scripts/ceph.sh). */
struct tu_s3_env {
    char endpoint[256];
    char region[64];
    char access_key[128];
    char secret_key[128];
};
/* Returns true if the env file exists and was parsed. */
bool tu_s3_env_load(struct tu_s3_env *env);
/* Create a bucket with a unique name starting with tag (via the S3 backend's own PUT bucket is not
 * part of the interface, so this uses libcurl with SigV4 directly). name: out, >= 64 bytes.
 * Returns 0 or -errno. */
int tu_s3_bucket_create(const struct tu_s3_env *env, const char *tag, char *name, size_t namesz);
/* Run scripts/ceph.sh with one verb ("stop-rgw", "start-rgw"); returns its exit status. */
int tu_ceph_ctl(const char *verb);

#endif
