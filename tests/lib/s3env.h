/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3env.h - the test RGW's connection details as scripts/ceph.sh writes them (DIR/env), and a
 * bucket creator. Shared by the tests (through testutil.h) and the benchmark programs in
 * tests/perf/, which link only this small library (no cmocka). No state; thread-safe.
 */
#ifndef TIER_TESTS_S3ENV_H
#define TIER_TESTS_S3ENV_H

#include <stdbool.h>
#include <stddef.h>

struct tu_s3_env {
    char endpoint[256];
    char region[64];
    char access_key[128];
    char secret_key[128];
};
/* Parse an env file (S3_ENDPOINT=..., S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY). Returns true
 * when the endpoint and both keys were found. */
bool tu_s3_env_load_file(const char *path, struct tu_s3_env *env);
/* The same for $TIER_CEPH_DIR/env (set by CTest for tests that need the rgw fixture). */
bool tu_s3_env_load(struct tu_s3_env *env);
/* PUT bucket `name` (bucket creation is not part of the backend interface, so this signs with
 * libcurl's SigV4 directly). Returns 0 or -errno. */
int tu_s3_bucket_create_named(const struct tu_s3_env *env, const char *name);
/* Create a bucket with a unique name starting with tag; name: out, >= 64 bytes. */
int tu_s3_bucket_create(const struct tu_s3_env *env, const char *tag, char *name, size_t namesz);

#endif
