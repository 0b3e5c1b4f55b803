/* SPDX-License-Identifier: Apache-2.0 */
/* timeutil.c - see timeutil.h. */
#include "common/timeutil.h"

#include <errno.h>
#include <time.h>

static uint64_t now(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * TIER_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t tier_now_mono_ns(void)
{
    return now(CLOCK_MONOTONIC);
}

uint64_t tier_now_real_ns(void)
{
    return now(CLOCK_REALTIME);
}

void tier_sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}
