/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakebe.h - the one fake backend of the tests, in two modes:
 *
 *   memory store (fakebe_mem_new): objects with procedural content, a function of key, etag and
 *     offset (fakebe_expected), so any process can check any byte. stat, read and list work;
 *     the other operations answer -ENOTSUP (after the steps below), key_check accepts every key.
 *   wrapper (fakebe_wrap_new): every operation is forwarded to a real backend (the POSIX one in
 *     a scratch directory), which stays the caller's.
 *
 * In both modes every call passes, in this order: its count (fakebe_calls), the op's latency, the
 * gate, the "down" switch (-EIO), the op's fault plan. An injected error leaves a sentence in
 * tier_err_msg(): "injected failure for KEY" (a plan) or "backend NAME is down (injected)".
 * Thread-safe. Free with backend_free(); a wrapper does not free its real backend.
 */
#ifndef TIER_TESTS_FAKEBE_H
#define TIER_TESTS_FAKEBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tiers/backend.h"

enum fakebe_op {
    FAKEBE_STAT,
    FAKEBE_READ,
    FAKEBE_LIST,
    FAKEBE_PUT,
    FAKEBE_MPU_CREATE,
    FAKEBE_MPU_PART,
    FAKEBE_MPU_COMPLETE,
    FAKEBE_MPU_ABORT,
    FAKEBE_DEL,
    FAKEBE_MPU_LIST,
    FAKEBE_NOPS
};

/* fakebe_fault.count: fail every matching call until the plan is replaced. */
#define FAKEBE_ALWAYS (-1)

/* One op's fault plan: matching calls answer err. */
struct fakebe_fault {
    int err;              /* negative errno; 0: no fault */
    int count;            /* matching calls to fail, or FAKEBE_ALWAYS */
    const char *key_part; /* NULL, or only keys (list: prefixes) containing it (copied) */
    int part_no;          /* FAKEBE_MPU_PART: 0, or only this part number */
    int skip;             /* matching calls to let through before the first failure */
};

struct backend *fakebe_mem_new(const char *name);
struct backend *fakebe_wrap_new(const char *name, struct backend *inner);

/* Memory store: add or replace an object (a new etag changes its content). */
void fakebe_add(struct backend *be, const char *key, uint64_t size, const char *etag);
/* Memory store: the bytes of (key, etag) at [off, off+len). */
void fakebe_expected(const char *key, const char *etag, uint64_t off, void *buf, size_t len);

/* Calls of op so far (every call, failed or not, counted on entry). */
uint64_t fakebe_calls(struct backend *be, enum fakebe_op op);

/* Replace op's fault plan (NULL: none). fakebe_fail_next: the next count calls answer err. */
void fakebe_fail(struct backend *be, enum fakebe_op op, const struct fakebe_fault *fault);
void fakebe_fail_next(struct backend *be, enum fakebe_op op, int err, int count);
/* Every call of op sleeps this long first (simulated network latency). */
void fakebe_set_latency_us(struct backend *be, enum fakebe_op op, unsigned us);

/* Down: every call but key_check answers -EIO (the backend is unreachable). */
void fakebe_set_down(struct backend *be, bool down);
bool fakebe_is_down(struct backend *be);

/* The gate: calls of op whose key contains key_part (NULL: all) wait while it is closed.
 * fakebe_gate_close sets the filter, closes the gate and zeroes its counters; the filter stays
 * after fakebe_gate_open, which returns the calls that had arrived when it opened. */
void fakebe_gate_close(struct backend *be, enum fakebe_op op, const char *key_part);
int fakebe_gate_open(struct backend *be);
/* Matching calls since fakebe_gate_close that reached the gate / went through it. */
int fakebe_gate_arrived(struct backend *be);
int fakebe_gate_passed(struct backend *be);

/* Wrapper: the next mpu_create is made by the real backend but answered -EIO (the reply was
 * lost), and the fake then goes down. */
void fakebe_lose_next_create(struct backend *be);
/* Wrapper: successful puts answer without an ETag (a server that sends no ETag header). */
void fakebe_blank_put_etag(struct backend *be, bool blank);
/* Listed entries whose name contains key_part (NULL: none) carry a version they do not have
 * (the object changed after the listing). */
void fakebe_list_stale(struct backend *be, const char *key_part);
/* The backend's part limit (backend_max_parts); 0: BACKEND_MAX_PARTS. */
void fakebe_set_max_parts(struct backend *be, int max_parts);

#endif
