/* SPDX-License-Identifier: Apache-2.0 */
/* timeutil.c - see timeutil.h. */
#include "common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

void tier_cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

struct timespec tier_mono_deadline(uint64_t ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t nsec = (uint64_t)t.tv_nsec + ns % TIER_NS_PER_SEC;
    t.tv_sec += (time_t)(ns / TIER_NS_PER_SEC + nsec / TIER_NS_PER_SEC);
    t.tv_nsec = (long)(nsec % TIER_NS_PER_SEC);
    return t;
}

void tier_sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

void tier_test_pause(const char *fault_file, const char *what)
{
    char paused[PATH_MAX];
    snprintf(paused, sizeof(paused), "%s.paused", fault_file);
    bool marked = false;
    for (int i = 0; i < 3000; i++) {
        char buf[256];
        int fd = open(fault_file, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
            close(fd);
        buf[n > 0 ? n : 0] = '\0';
        if (!strstr(buf, what))
            break;
        if (!marked) {
            int m = open(paused, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
            if (m >= 0)
                close(m);
            marked = true;
        }
        tier_sleep_ms(10);
    }
    if (marked)
        unlink(paused);
}
