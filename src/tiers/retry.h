/* SPDX-License-Identifier: Apache-2.0 */
/*
 * retry.h - bounded retries with exponential backoff and full jitter, as a pure policy.
 *
 * Used by the S3 backend (s3.c) around every request. The policy has no hidden state: the random
 * source and the sleep are passed in, so a unit test drives it with a seeded generator and a fake
 * clock and never sleeps. Thread-safe as long as each caller passes its own random state.
 *
 * Backoff before retry n (n = 0 for the first retry) is uniform in [0, min(max_ms, base_ms * 2^n)]
 * ("full jitter", AWS architecture blog), so many clients hitting one 503 spread out instead of
 * retrying in lockstep. The total time of one call is bounded by retry_worst_case_ms().
 */
#ifndef TIER_TIERS_RETRY_H
#define TIER_TIERS_RETRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct retry_policy {
    int max_retries;  /* attempts after the first; 0 = no retry */
    uint64_t base_ms; /* cap of the first backoff */
    uint64_t max_ms;  /* cap of any one backoff */
};

/* A source of uniform 64-bit random numbers; ctx is the caller's state. */
typedef uint64_t (*retry_rand_fn)(void *ctx);
/* Sleep (or, in a test, advance a fake clock) for ms milliseconds. */
typedef void (*retry_sleep_fn)(void *ctx, uint64_t ms);

struct retry_env {
    retry_rand_fn rand; /* NULL: retry_rand_default() */
    void *rand_ctx;
    retry_sleep_fn sleep; /* NULL: tier_sleep_ms() */
    void *sleep_ctx;
};

/* Upper bound of the backoff before retry n: min(max_ms, base_ms * 2^n), overflow-safe. */
uint64_t retry_backoff_cap_ms(const struct retry_policy *p, int retry);
/* The backoff before retry n: uniform in [0, retry_backoff_cap_ms(p, n)]. */
uint64_t retry_backoff_ms(const struct retry_policy *p, int retry, retry_rand_fn rnd, void *rctx);
/* Bound on the wall time of one retried call whose attempts each take at most attempt_ms:
 * (max_retries + 1) * attempt_ms + the sum of every backoff cap. */
uint64_t retry_worst_case_ms(const struct retry_policy *p, uint64_t attempt_ms);

/* Whether an HTTP status is worth retrying: 5xx (incl. 503 SlowDown) and 429. Never other 4xx. */
bool retry_http_status_retryable(long status);

/* A per-thread splitmix64 generator seeded from the clock and thread; ctx is ignored. */
uint64_t retry_rand_default(void *ctx);

/* One attempt: returns >= 0 on success or -errno, and sets *retryable when the failure is
 * transient. attempt counts from 0. */
typedef ssize_t (*retry_attempt_fn)(void *ctx, int attempt, bool *retryable);

/* Run fn until it succeeds, fails for good, or max_retries retries are spent, sleeping a jittered
 * backoff between attempts. Returns fn's last result; *attempts (may be NULL) gets the number of
 * attempts made. */
ssize_t retry_run(const struct retry_policy *p, const struct retry_env *env, retry_attempt_fn fn,
                  void *ctx, int *attempts);

#endif
