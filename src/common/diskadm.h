/* SPDX-License-Identifier: Apache-2.0 */
/*
 * diskadm.h - the admission hook of the node's local disk, the second resource QoS schedules
 * (docs/ARCHITECTURE.md, "QoS"). The cache (its disk-level reads and the write-through of
 * fetched blocks) and the burst buffer (its spool writes) call it around each disk I/O; the
 * daemon installs the scheduler's disk lane behind it (qos/sched.h, main.c), so neither module
 * depends on src/qos. NULL (no hook, or a hook without enter) admits everything at once.
 *
 * Contract: enter() returns 0, then exactly one leave() with the same io and bytes follows on
 * the same thread once the I/O is done. try: never wait; -EAGAIN when the I/O would have to
 * queue (the caller then skips it: only for work that may be left undone). Without try, enter
 * waits until the I/O may go (the disk lane has no deadline); any error it returns (-ENOMEM:
 * the scheduler could not allocate the tenant's state) means "not admitted": the I/O goes on
 * anyway, without a leave. io: whose I/O (tenant, class; NULL: the thread's current ioctx, as
 * the scheduler takes it); bytes: what it reads or writes. Any thread may call either at once.
 */
#ifndef TIER_COMMON_DISKADM_H
#define TIER_COMMON_DISKADM_H

#include <stdbool.h>
#include <stddef.h>

#include "common/ioctx.h"

struct tier_disk_adm {
    int (*enter)(void *ud, const struct tier_ioctx *io, size_t bytes, bool try);
    void (*leave)(void *ud, const struct tier_ioctx *io, size_t bytes, long result);
    void *ud;
};

/* enter through a (NULL or without enter: 0 at once). */
static inline int tier_disk_enter(const struct tier_disk_adm *a, const struct tier_ioctx *io,
                                  size_t bytes, bool try)
{
    return a && a->enter ? a->enter(a->ud, io, bytes, try) : 0;
}

static inline void tier_disk_leave(const struct tier_disk_adm *a, const struct tier_ioctx *io,
                                   size_t bytes, long result)
{
    if (a && a->enter && a->leave)
        a->leave(a->ud, io, bytes, result);
}

#endif
