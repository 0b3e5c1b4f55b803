/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timeutil.h - clocks in integer nanoseconds. Monotonic for intervals and deadlines, realtime only
 * for timestamps shown to people or stored on disk. Stateless; thread-safe.
 */
#ifndef TIER_COMMON_TIMEUTIL_H
#define TIER_COMMON_TIMEUTIL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define TIER_NS_PER_MS 1000000ULL
#define TIER_NS_PER_SEC 1000000000ULL

uint64_t tier_now_mono_ns(void);
uint64_t tier_now_real_ns(void);
/* Initialise cv so that its timed waits run on CLOCK_MONOTONIC (clock steps do not move them). */
void tier_cond_init_mono(pthread_cond_t *cv);
/* The CLOCK_MONOTONIC time ns from now: a deadline for the timed wait of such a variable. */
struct timespec tier_mono_deadline(uint64_t ns);
/* Sleep for ms milliseconds, resuming after signals. */
void tier_sleep_ms(uint64_t ms);

/* Test builds' pause points: while the file fault_file holds the text `what`, wait (polling it
 * every 10 ms, fault_file.paused existing meanwhile so a test can see the pause began), at most
 * 30 s. Reads only fault_file; never called unless tierd was given a fault file. */
void tier_test_pause(const char *fault_file, const char *what);

#endif
