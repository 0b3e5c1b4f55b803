/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched.h - the single scheduling point every backend request passes before it is sent.
 *
 * Requests are admitted in lanes. Each lane bounds its requests in flight and grants them in
 * class priority (inference before training before checkpoint before background) with a bound
 * on starvation (starve_limit) and FIFO within a class, with per-class and per-tenant counters.
 *
 *   - One lane per backend (sched_backend_wrap): its own in-flight cap, an admission deadline
 *     (a wait longer than admit_timeout_ms returns -ETIMEDOUT) and a circuit breaker (below), so
 *     a hung backend holds at most its own slots and, once its breaker is open, no thread at all.
 *     The wrapper admits every backend call (stat, list, read, put, multipart, delete), from any
 *     caller, so there is no side door around it.
 *   - The default lane (sched_admit/sched_done, max_inflight): requests that name no backend.
 *     It waits without a deadline and never fails.
 *
 * The tenant and class of a backend call made through a wrapper are the struct tier_ioctx the
 * caller passed to the backend dispatcher (tiers/backend.h), which makes it the thread's current
 * ioctx for the call (common/ioctx.h); a call with none is training. There is no other way to a
 * backend: the cache, the FUSE ops, the stager, the API and the write-back uploader all call the
 * dispatchers, and scripts/check-banned.sh fails the build's lint on any `->ops->` call outside
 * src/tiers and this wrapper. Per-tenant rate limits and reservations (the QoS issue) plug in
 * here without touching callers.
 *
 * Circuit breaker, per backend lane (sched.c performs every transition under the scheduler lock):
 *
 *   CLOSED    --breaker_failures consecutive failures-->  OPEN       sched_lane_leave,
 *                                                                     sched_lane_attempt_failed
 *   OPEN      --breaker_cooldown_ms passed, a call-->     HALF_OPEN  sched_lane_enter (the probe)
 *   any       --an answer (a call or an attempt)-->       CLOSED     sched_lane_leave,
 *                                                                     sched_lane_attempt_failed
 *   HALF_OPEN --a failure (a call or an attempt)-->       OPEN       sched_lane_leave,
 *                                                                     sched_lane_attempt_failed
 *   HALF_OPEN --the probe's admission times out-->        OPEN       sched_lane_enter
 *
 * A failure is a call that ended in -ETIMEDOUT, a connection errno or a dead mount's (-ENOTCONN,
 * -ESHUTDOWN, -ENODEV), or an attempt inside a call (S3 retries) that the backend reports got no
 * answer at all (timeout, connection refused or broken, whatever its errno); any other result
 * (-EIO: one file's read error on a POSIX backend; -ENOENT, -ESTALE, -EACCES, ...) and any
 * attempt the server answered, even with a 5xx, is an answer and resets the count. Once OPEN, the
 * calls in flight stop retrying. While OPEN, and while the probe of HALF_OPEN is out, every other
 * call fails at once with -ETIMEDOUT and a message naming the backend and the time left; calls
 * queued when the breaker opens are failed the same way.
 *
 * Thread-safe: one mutex for all lanes; admission may block the caller (never while the mutex is
 * held by anyone else for long: no I/O under it).
 */
#ifndef TIER_QOS_SCHED_H
#define TIER_QOS_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ioctx.h"

struct backend;
struct sched;
struct sched_lane;

struct sched_config {
    int max_inflight; /* default lane: requests in flight at once; default 32 */
    /* Grants a waiting class may be passed over by higher classes before its head goes first
     * (a bound on starvation, so a reader waiting on a background fetch of the same block never
     * waits forever); default 64. Applies to every lane. */
    int starve_limit;
};

struct sched_class_stats {
    uint64_t admitted, completed, errors;
    uint64_t bytes;
    uint64_t wait_ns_total;    /* time spent queued at admission */
    uint64_t service_ns_total; /* time from admission to completion */
    uint64_t queued_now, inflight_now;
};

/* Sum over every lane. */
struct sched_stats {
    struct sched_class_stats cls[TIER_IO_NCLASSES];
};

int sched_new(const struct sched_config *cfg, struct sched **out);
/* Frees every lane too; the wrappers must not be used afterwards (free them first or after,
 * but call none of their operations). NULL is a no-op. */
void sched_free(struct sched *s);

/* Default lane: block until the request may go; returns the queueing time in ns. Also declares
 * io as this thread's class for the backend calls it makes until sched_done(). */
uint64_t sched_admit(struct sched *s, const struct tier_ioctx *io, size_t bytes);
/* Report completion of a request admitted by sched_admit (result < 0 = error). */
void sched_done(struct sched *s, const struct tier_ioctx *io, size_t bytes, long result,
                uint64_t service_ns);

void sched_stats_get(struct sched *s, struct sched_stats *st);

struct telemetry;
/* Record every completed lane call (sched_lane_leave) into t (telemetry/telemetry.h): its
 * queue wait, service time, bytes and result, under the call's tenant and class. NULL: stop.
 * Set before the first lane call (the field is read without the lock). */
void sched_set_telemetry(struct sched *s, struct telemetry *t);

/* ---- per-backend lanes ------------------------------------------------------------------- */

struct sched_backend_config {
    int max_inflight;             /* calls to this backend in flight at once; default 32 */
    uint64_t admit_timeout_ms;    /* longest admission wait, then -ETIMEDOUT; default 10000 */
    int breaker_failures;         /* consecutive failures that open the breaker; default 5;
                                   * negative: no breaker */
    uint64_t breaker_cooldown_ms; /* time OPEN before a probe goes through; default 5000 */
};

enum sched_breaker_state {
    SCHED_BREAKER_CLOSED = 0,
    SCHED_BREAKER_OPEN = 1,
    SCHED_BREAKER_HALF_OPEN = 2,
};

struct sched_backend_stats {
    char name[64]; /* the backend's config name (cut to fit) */
    int max_inflight;
    uint64_t inflight_now, queued_now;
    uint64_t admitted, completed, failures; /* failures: results counted by the breaker */
    uint64_t admit_timeouts;                /* admission waits that reached the deadline */
    enum sched_breaker_state breaker;
    uint64_t consecutive_failures;
    uint64_t breaker_opens; /* CLOSED/HALF_OPEN -> OPEN transitions */
    uint64_t fast_fails;    /* calls refused at once because the breaker was open */
    uint64_t open_ms_left;  /* OPEN: time until the next probe may go; else 0 */
};

const char *sched_breaker_state_name(enum sched_breaker_state st);

/* Add a lane named name (copied). The lane lives until sched_free. */
int sched_lane_new(struct sched *s, const char *name, const struct sched_backend_config *cfg,
                   struct sched_lane **out);
/* Admit one call to the lane's backend: 0 (then call sched_lane_leave exactly once), or
 * -ETIMEDOUT when the admission deadline passed or the breaker refused it, with tier_err_msg()
 * saying which. io NULL: this thread's current ioctx (tier_ioctx_current), else training. */
int sched_lane_enter(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                     size_t bytes);
void sched_lane_leave(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                      size_t bytes, long result, uint64_t service_ns);
/* Between enter and leave, on the calling thread: the backend's attempt failed with err and it
 * would retry (backend_attempt_hook). Unanswered (a timeout or connection failure), it counts
 * towards the breaker at once; answered (a server error) it is an answer, as a success is. Either
 * way the call's own final failure is then not counted again. Returns false, stop retrying, when
 * the breaker is open. */
bool sched_lane_attempt_failed(struct sched *s, struct sched_lane *l, long err, bool answered);

/* Wrap inner in a backend whose every operation is admitted in a new lane of s (named after
 * inner->name). The wrapper owns inner: backend_free(wrapper) frees both. It has inner's name and
 * type, so cached blocks and messages do not change. On failure inner is left to the caller. */
int sched_backend_wrap(struct sched *s, struct backend *inner,
                       const struct sched_backend_config *cfg, struct backend **out);
/* Backend operations, as the wrapper counts the calls it admitted (once per call: a backend's
 * own retries, and the extra request some calls make, such as the S3 backend's HEAD before a
 * DELETE, are not counted apart). */
enum sched_be_op {
    SCHED_BE_STAT = 0,
    SCHED_BE_READ,
    SCHED_BE_LIST,
    SCHED_BE_PUT,
    SCHED_BE_MPU_CREATE,
    SCHED_BE_MPU_PART,
    SCHED_BE_MPU_COMPLETE,
    SCHED_BE_MPU_ABORT,
    SCHED_BE_MPU_LIST,
    SCHED_BE_DEL,
    SCHED_BE_NOPS,
};
const char *sched_be_op_name(enum sched_be_op op);
/* The calls a wrapper of s admitted, by operation, and (notfound, may be NULL) how many of them
 * the backend answered -ENOENT: 0, or -EINVAL when be is no wrapper of s. */
int sched_backend_calls_get(struct sched *s, struct backend *be, uint64_t out[SCHED_BE_NOPS],
                            uint64_t notfound[SCHED_BE_NOPS]);

/* The lane of a wrapper made by sched_backend_wrap on s, or NULL for any other backend. */
struct sched_lane *sched_backend_lane(struct sched *s, struct backend *be);

/* Fill out[0..max) with the backend lanes in creation order; returns how many lanes there are
 * (may exceed max). */
size_t sched_backend_stats_get(struct sched *s, struct sched_backend_stats *out, size_t max);

#endif
