/* SPDX-License-Identifier: Apache-2.0 */
/*
 * err.h - a per-thread detail message to go with a negative errno.
 *
 * Functions return 0 or -errno (STYLE.md). When the errno alone would not tell the user what to do
 * (an S3 error message, a config line), the failing layer also records a sentence here with
 * tier_err_set(); whoever handles the error reads it with tier_err_msg() on the same thread.
 * Thread-local, so no lock; valid until the next tier_err_set()/tier_err_clear() on the thread.
 */
#ifndef TIER_COMMON_ERR_H
#define TIER_COMMON_ERR_H

void tier_err_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tier_err_clear(void);
/* The last message set on this thread, or "" if none. */
const char *tier_err_msg(void);

#endif
