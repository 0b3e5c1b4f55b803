/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched.h - the single scheduling point every backend request passes before it is sent.
 *
 * Requests are admitted in lanes. Each lane bounds its requests in flight. A backend lane grants
 * its waiting requests with the dmClock tag scheduler (qos/dmclock.h): every (tenant, class) is
 * a client with a reservation, a weight and a limit in bytes per second, each request costing
 * its bytes plus op_cost_bytes (below, "QoS"). The default lane grants in strict class priority
 * (inference before training before checkpoint before background) with a bound on starvation
 * (starve_limit) and FIFO within a class. Both keep per-class counters.
 *
 *   - One lane per backend (sched_backend_wrap): its own in-flight cap, an admission deadline
 *     (a wait longer than admit_timeout_ms returns -ETIMEDOUT) and a circuit breaker (below), so
 *     a hung backend holds at most its own slots and, once its breaker is open, no thread at all.
 *     The wrapper admits every backend call (stat, list, read, put, multipart, delete), from any
 *     caller, so there is no side door around it.
 *   - The default lane (sched_admit/sched_done, max_inflight): requests that name no backend.
 *     It waits without a deadline and never fails.
 *   - The local disk's lane (sched_lane_new with idle_fast, no deadline, no breaker; in the
 *     daemon a scheduler of its own, main.c): the cache's disk-level reads and write-throughs
 *     and the burst buffer's spool writes, through the hook sched_lane_disk_adm fills in
 *     (common/diskadm.h), so src/cache and src/writeback need not include this header.
 *
 * The tenant and class of a backend call made through a wrapper are the struct tier_ioctx the
 * caller passed to the backend dispatcher (tiers/backend.h), which makes it the thread's current
 * ioctx for the call (common/ioctx.h); a call with none is training. There is no other way to a
 * backend: the cache, the FUSE ops, the stager, the API and the write-back uploader all call the
 * dispatchers, and scripts/check-banned.sh fails the build's lint on any `->ops->` call outside
 * src/tiers and this wrapper.
 *
 * QoS on a backend lane: a request is granted when a slot is free (max_inflight) and dmClock
 * picks it: first a client behind its reservation, then the client with the smallest weight
 * tag among those under their limit. A request whose client is at its limit waits, with free
 * slots, until its limit tag comes: one waiter of the lane (the lane's timer) sleeps on its
 * condition variable until then and grants whoever is due; the others sleep until granted or
 * until their admission deadline. The parameters of a client, field by field: the lane's own
 * values of its tenant for that class (sched_lane_qos_set), else its tenant's values for that
 * class on every lane (sched_qos_set), else the class's defaults (sched_config.cls), else the
 * built-in ones below; and a tenant may have a limit over all its classes, on one lane
 * (sched_lane_tenant_limit_set) or on every lane (sched_tenant_limit_set):
 *
 *   class        weight  reservation                    limit
 *   inference    64      link_capacity / 10 (if known)  none
 *   training     16      none                           none
 *   checkpoint    4      none                           none
 *   background    1      none                           none
 *
 * Inference first on the link (QoS on, sched_backend_config.yield_inflight, default 1): dmClock
 * orders admission, but an admitted call shares the link below tierd (TCP shares a shaped link
 * per connection, and a bulk response fills the shaper's queue), so an inference GET beside
 * three training GETs took four times as long as alone (docs/BENCHMARKS.md, QoS). So while the
 * lane has inference demand, dmClock passes over (dmc_pull_filtered) every other class's call
 * that moves data in a direction (sched_dir: reads down, puts and parts up) where yield_inflight
 * such calls are in flight already; other calls (stat, list, ...) and inference are never held.
 * State, per lane under the lock: inference calls in flight, the time the last one left, other
 * classes' data calls in flight per direction. Demand: an inference call queued or in flight, or
 * one left less than yield_hold_ms ago (its next call comes soon; without the hold the other
 * classes refill every slot between two inference calls). Invariant: a waiter the yield holds
 * back has, in its direction, a call in flight whose leave grants again, so no timer is needed;
 * when demand ends, the next leave grants as usual. Reservations of other classes are met only
 * through those yield_inflight calls while inference has demand.
 *
 * Reads in parts (QoS on, sched_backend_config.split_bytes): the yield still lets one call of
 * another class beside an inference call, and a large read of it queues ahead of the inference
 * response in the link. So under the same demand the wrapper (sched_backend.c) sends another
 * class's read larger than the lane's part size as ranged reads of that size, one after another,
 * each admitted on its own (sched_lane_read_part decides, once per read, before its first part;
 * sched_lane_enter_part admits the later parts at their bytes only, so the read costs dmClock
 * what it would cost whole).
 *
 * With sched_config.qos_off backend lanes grant as the default lane does (strict class
 * priority, starve_limit), the scheduler tierd had before dmClock: the bench's "QoS off"; no
 * yield.
 *
 * With nothing configured the weights come close to the strict priority order the lanes had
 * before dmClock (busy inference leaves background 1/65 of the link, about what starve_limit 64
 * gave it), and every class can use the whole link when alone: the built-in defaults set no
 * limit, because a limit on staging or prefetch would idle the link while nothing else runs.
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

#include "common/diskadm.h"
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
    /* Backend lanes (QoS): the cost of a request beyond its bytes; 0: 64 KiB. */
    uint64_t op_cost_bytes;
    /* true: backend lanes grant as the default lane does (strict class priority with
     * starve_limit, FIFO within a class) instead of dmClock; reservations, weights and limits
     * are kept (sched_qos_set, the getters) but not applied, and the per-client counters
     * (sched_lane_client_stats_get) stay 0. [daemon] qos = off; the comparison in
     * docs/BENCHMARKS.md. */
    bool qos_off;
    /* Backend lanes: each class's default parameters (struct sched_qos: 0 fields take the
     * built-in default). */
    struct sched_qos_cls {
        uint64_t reservation_bps, limit_bps; /* 0: built-in; SCHED_RATE_NONE: none */
        uint32_t weight;                     /* 0: built-in; 1 .. SCHED_WEIGHT_MAX */
    } cls[TIER_IO_NCLASSES];
};

/* A rate of struct sched_qos / sched_qos_cls that says "none" (0 says "the default"). */
#define SCHED_RATE_NONE UINT64_MAX
#define SCHED_WEIGHT_MAX 10000 /* dmclock.h DMC_WEIGHT_MAX */

/* A tenant's parameters for one class, in bytes per second: 0 takes the class default,
 * SCHED_RATE_NONE none (reservation, limit); weight 0 the class default. */
struct sched_qos {
    uint64_t reservation_bps, limit_bps;
    uint32_t weight;
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

/* 0, -EINVAL (a weight above SCHED_WEIGHT_MAX; tier_err_msg() says which) or -ENOMEM. */
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

/* Set tenant's parameters for class cls on every backend lane (q NULL: back to the class
 * defaults); requests already queued keep their tags, later ones use the new values. 0,
 * -EINVAL (tenant >= 65536, a class out of range, a weight above SCHED_WEIGHT_MAX) or
 * -ENOMEM. */
int sched_qos_set(struct sched *s, uint32_t tenant, enum tier_io_class cls,
                  const struct sched_qos *q);

/* Limit all of tenant's calls together, every class, on every backend lane, to limit_bps
 * (0: no tenant limit); later grants use it. 0, -EINVAL (tenant >= 65536) or -ENOMEM. */
int sched_tenant_limit_set(struct sched *s, uint32_t tenant, uint64_t limit_bps);

/* ---- per-backend lanes ------------------------------------------------------------------- */

/* Set tenant's parameters for class cls on lane l only, over its values of sched_qos_set: a
 * field 0 takes those (then the class defaults); q NULL drops the lane's own values. Later
 * grants use them, as with sched_qos_set. 0, -EINVAL (tenant >= 65536, a class out of range, a
 * weight above SCHED_WEIGHT_MAX, a lane of another scheduler) or -ENOMEM. */
int sched_lane_qos_set(struct sched *s, struct sched_lane *l, uint32_t tenant,
                       enum tier_io_class cls, const struct sched_qos *q);
/* Limit all of tenant's calls on lane l together to limit_bps instead of its limit of every lane
 * (sched_tenant_limit_set): 0 takes that one again, SCHED_RATE_NONE is none on this lane. 0,
 * -EINVAL (tenant >= 65536, a lane of another scheduler) or -ENOMEM. */
int sched_lane_tenant_limit_set(struct sched *s, struct sched_lane *l, uint32_t tenant,
                                uint64_t limit_bps);
/* Lane l's own values of tenant for cls as sched_lane_qos_set last set them: true and *out, or
 * false (*out zeroed): its values of every lane apply. */
bool sched_lane_qos_own_get(struct sched *s, struct sched_lane *l, uint32_t tenant,
                            enum tier_io_class cls, struct sched_qos *out);
/* Lane l's own limit of tenant as sched_lane_tenant_limit_set set it (0: none of its own,
 * SCHED_RATE_NONE: none on this lane). */
uint64_t sched_lane_tenant_limit_own_get(struct sched *s, struct sched_lane *l, uint32_t tenant);

struct sched_backend_config {
    int max_inflight;             /* calls to this backend in flight at once; default 32 */
    uint64_t admit_timeout_ms;    /* longest admission wait, then -ETIMEDOUT; default 10000 */
    int breaker_failures;         /* consecutive failures that open the breaker; default 5;
                                   * negative: no breaker */
    uint64_t breaker_cooldown_ms; /* time OPEN before a probe goes through; default 5000 */
    uint64_t link_capacity_bps;   /* the link's rate, bytes/s; 0: unknown (QoS defaults) */
    /* Grant a call at once, without passing dmClock, when a slot is free, nothing waits and
     * neither its client nor its tenant has a limit (the disk lane, whose hits must cost a lock
     * and not a tag computation: dmClock's idle adjustment makes the skipped tags irrelevant
     * once requests queue). Calls of limited clients, and every call while others wait, go
     * through dmClock as on any backend lane. */
    bool idle_fast;
    /* Inference first on the link (QoS on; sched_lane_enter_dir): while the lane has inference
     * demand (an inference call queued or in flight, or the last one left less than
     * yield_hold_ms ago), a data call of another class is granted only while fewer than
     * yield_inflight data calls of other classes are in flight in its direction (down: reads;
     * up: puts and multipart parts). 0: 1; negative: off. */
    int yield_inflight;
    uint64_t yield_hold_ms; /* 0: 500 */
    /* Reads in parts while inference has demand (QoS on; sched_lane_read_part): a read of
     * another class larger than this goes out as ranged reads of this many bytes, one after
     * another, each admitted on its own. 0: auto (the bytes link_capacity_bps moves in
     * SCHED_SPLIT_AUTO_US, rounded up to a multiple of 64 KiB; none while link_capacity_bps is
     * 0); SCHED_SPLIT_OFF: never. */
    uint64_t split_bytes;
};

#define SCHED_SPLIT_OFF UINT64_MAX
#define SCHED_SPLIT_AUTO_US 2000     /* split_bytes 0: a part takes 2 ms on the link ... */
#define SCHED_SPLIT_UNIT (64u << 10) /* ... in multiples of 64 KiB, at least one */

/* sched_backend_config.admit_timeout_ms: wait for a grant without a deadline (the disk lane:
 * a local read or write is never failed by its scheduler). */
#define SCHED_TIMEOUT_NONE UINT64_MAX

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
    /* QoS (dmClock) */
    uint64_t link_capacity_bps;
    uint64_t grants_reservation, grants_weight; /* grants by dmClock phase */
    uint64_t limit_waits; /* times every waiting client was at its limit with slots free */
    uint64_t yield_waits; /* times every waiting call was held back for inference (yield) */
    uint64_t split_bytes; /* the lane's part size for split reads; 0: it splits none */
    uint64_t split_reads; /* reads that went out in parts (sched_lane_read_part) */
};

const char *sched_breaker_state_name(enum sched_breaker_state st);

/* Add a lane named name (copied). The lane lives until sched_free. */
int sched_lane_new(struct sched *s, const char *name, const struct sched_backend_config *cfg,
                   struct sched_lane **out);
/* Admit one call of bytes to the lane's backend: 0 (then call sched_lane_leave exactly once),
 * -ETIMEDOUT when the admission deadline passed or the breaker refused it, with tier_err_msg()
 * saying which, or -ENOMEM (the tenant's QoS state could not be allocated). io NULL: this
 * thread's current ioctx (tier_ioctx_current), else training of the default tenant. */
int sched_lane_enter(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                     size_t bytes);
/* sched_lane_enter that never waits: 0 when the call is granted now (then sched_lane_leave), or
 * -EAGAIN when it would have to queue (no free slot, others waiting, or its client or tenant at
 * its limit); a refusal changes no QoS state. The breaker's refusals are -ETIMEDOUT as there.
 * For work that may be skipped, such as the cache's write-through of a fetched block. */
int sched_lane_try_enter(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                         size_t bytes);
void sched_lane_leave(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                      size_t bytes, long result, uint64_t service_ns);
/* The direction a call's data takes on the link, for yield_inflight: NONE (a call that moves
 * little: stat, list, delete, the multipart bookkeeping; never held back), DOWN (a read), UP (a
 * put or a multipart part). */
enum sched_dir { SCHED_DIR_NONE = 0, SCHED_DIR_DOWN = 1, SCHED_DIR_UP = 2 };
/* sched_lane_enter and sched_lane_leave of a call whose data goes dir (the backend wrapper's;
 * the plain ones are SCHED_DIR_NONE). Leave with the dir the call entered with. */
int sched_lane_enter_dir(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                         size_t bytes, enum sched_dir dir);
void sched_lane_leave_dir(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                          size_t bytes, long result, uint64_t service_ns, enum sched_dir dir);
/* Reads in parts (sched_backend_config.split_bytes): the bytes each ranged read of a read of len
 * bytes of io's class (NULL: the thread's current ioctx) should ask lane l for now. len (whole)
 * unless the lane has a split size, the read is larger, of another class than inference, and the
 * lane has inference demand (as for the yield: an inference call queued or in flight, or one left
 * less than yield_hold_ms ago); then the split size, and the read counts in split_reads. */
size_t sched_lane_read_part(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                            size_t len);
/* sched_lane_enter_dir for a part after the first of one call sent in parts: dmClock charges it
 * its bytes only (the first part paid the call's op cost), so the parts cost what the whole call
 * would. Leave it with sched_lane_leave_dir, as any call. */
int sched_lane_enter_part(struct sched *s, struct sched_lane *l, const struct tier_ioctx *io,
                          size_t bytes, enum sched_dir dir);
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
 * DELETE, are not counted apart; a read in parts, sched_lane_read_part, counts once per part,
 * each admitted on its own). */
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

/* The parameters lane l applies to (tenant, cls), resolved: rates in bytes/s, 0 = none; and
 * (tenant_limit, may be NULL) the tenant's own limit. */
void sched_lane_qos_get(struct sched *s, struct sched_lane *l, uint32_t tenant,
                        enum tier_io_class cls, struct sched_qos *out, uint64_t *tenant_limit);

/* Read-only views for the control API (GET and PUT /v1/qos), each taken under the lock. */
/* The tenant's own parameters for cls as sched_qos_set last set them: true and *out, or false
 * (*out zeroed): the class defaults apply. */
bool sched_qos_get(struct sched *s, uint32_t tenant, enum tier_io_class cls, struct sched_qos *out);
/* Does tenant hold QoS state its id's next tenant must not inherit: parameters of its own
 * (sched_qos_set, sched_tenant_limit_set, the lane forms) or a call queued on some lane? For
 * reclaim (tenant/tenant.h): such a tenant is not reclaimed. */
bool sched_tenant_busy(struct sched *s, uint32_t tenant);
/* Forget tenant's dmClock clients on every lane (tags, grant counts): its id goes to another
 * tenant. 0, or -EBUSY when a lane had a call of it queued (that lane keeps its clients). */
int sched_tenant_forget(struct sched *s, uint32_t tenant);
/* The tenant's own limit over all its classes (sched_tenant_limit_set), bytes/s; 0: none. */
uint64_t sched_tenant_limit_get(struct sched *s, uint32_t tenant);
/* false when the scheduler was made with sched_config.qos_off. */
bool sched_qos_enabled(const struct sched *s);
/* Lane l's defaults for class cls (sched_config.cls over the built-in table), resolved: rates
 * in bytes/s, 0 = none. */
void sched_lane_class_qos_get(struct sched *s, struct sched_lane *l, enum tier_io_class cls,
                              struct sched_qos *out);
/* What lane l's dmClock granted client (tenant, cls) since the lane was made (counted at the
 * grant, before the call runs: what a limit governs), and its calls waiting now. All 0 for a
 * client that never called. */
struct sched_client_stats {
    uint64_t grants;        /* calls granted */
    uint64_t granted_bytes; /* their bytes (cost less the per-call op cost) */
    uint64_t granted_cost;  /* their cost: bytes + op_cost_bytes per call (per read, not per
                             * part of a read in parts) */
    uint64_t queued_now;
};
void sched_lane_client_stats_get(struct sched *s, struct sched_lane *l, uint32_t tenant,
                                 enum tier_io_class cls, struct sched_client_stats *out);
/* The cost of one call beyond its bytes (sched_config.op_cost_bytes, resolved). */
uint64_t sched_op_cost(const struct sched *s);
/* Lane l as the local disk's admission hook (common/diskadm.h), for the cache and the burst
 * buffer: enter is sched_lane_enter (try: sched_lane_try_enter), which with no deadline on the
 * lane (SCHED_TIMEOUT_NONE) only fails with -ENOMEM (then the I/O goes without admission);
 * leave is sched_lane_leave with the time since the grant. l's lane must outlive the users. */
void sched_lane_disk_adm(struct sched_lane *l, struct tier_disk_adm *out);

/* The lane of a wrapper made by sched_backend_wrap on s, or NULL for any other backend. */
struct sched_lane *sched_backend_lane(struct sched *s, struct backend *be);

/* Fill out[0..max) with the backend lanes in creation order; returns how many lanes there are
 * (may exceed max). */
size_t sched_backend_stats_get(struct sched *s, struct sched_backend_stats *out, size_t max);

#endif
