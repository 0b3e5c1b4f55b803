/* SPDX-License-Identifier: Apache-2.0 */
/*
 * retry.c - backoff policy and retry loop. See retry.h. No shared state: the default random
 * source keeps its state in a thread-local, everything else is in the caller's arguments.
 */
#include "tiers/retry.h"

#include <pthread.h>

#include "common/timeutil.h"

uint64_t retry_backoff_cap_ms(const struct retry_policy *p, int retry)
{
    uint64_t cap = p->base_ms;
    for (int i = 0; i < retry && cap < p->max_ms; i++) {
        if (cap > UINT64_MAX / 2) {
            cap = UINT64_MAX;
            break;
        }
        cap *= 2;
    }
    return cap < p->max_ms ? cap : p->max_ms;
}

uint64_t retry_backoff_ms(const struct retry_policy *p, int retry, retry_rand_fn rnd, void *rctx)
{
    uint64_t cap = retry_backoff_cap_ms(p, retry);
    if (cap == 0)
        return 0;
    uint64_t r = rnd ? rnd(rctx) : retry_rand_default(NULL);
    if (cap == UINT64_MAX)
        return r;
    return r % (cap + 1);
}

uint64_t retry_worst_case_ms(const struct retry_policy *p, uint64_t attempt_ms)
{
    int n = p->max_retries > 0 ? p->max_retries : 0;
    uint64_t total = attempt_ms * (uint64_t)(n + 1);
    for (int i = 0; i < n; i++)
        total += retry_backoff_cap_ms(p, i);
    return total;
}

bool retry_http_status_retryable(long status)
{
    return status == 429 || (status >= 500 && status <= 599);
}

static _Thread_local uint64_t t_rand_state;
static _Thread_local int t_rand_seeded;

uint64_t retry_rand_default(void *ctx)
{
    (void)ctx;
    if (!t_rand_seeded) {
        t_rand_state = tier_now_mono_ns() ^ ((uint64_t)(uintptr_t)&t_rand_state << 16) ^
                       (uint64_t)pthread_self();
        t_rand_seeded = 1;
    }
    /* splitmix64 */
    uint64_t z = (t_rand_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void real_sleep(void *ctx, uint64_t ms)
{
    (void)ctx;
    tier_sleep_ms(ms);
}

ssize_t retry_run(const struct retry_policy *p, const struct retry_env *env, retry_attempt_fn fn,
                  void *ctx, int *attempts)
{
    retry_rand_fn rnd = env && env->rand ? env->rand : retry_rand_default;
    void *rctx = env ? env->rand_ctx : NULL;
    retry_sleep_fn slp = env && env->sleep ? env->sleep : real_sleep;
    void *sctx = env ? env->sleep_ctx : NULL;
    int max_retries = p->max_retries > 0 ? p->max_retries : 0;
    ssize_t rc = 0;
    int attempt = 0;
    for (;; attempt++) {
        bool retryable = false;
        rc = fn(ctx, attempt, &retryable);
        if (rc >= 0 || !retryable || attempt >= max_retries)
            break;
        slp(sctx, retry_backoff_ms(p, attempt, rnd, rctx));
    }
    if (attempts)
        *attempts = attempt + 1;
    return rc;
}
