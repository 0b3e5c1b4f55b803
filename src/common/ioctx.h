/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ioctx.h - who an I/O is for. Every request that may reach a backend carries one of these: the
 * tenant (for per-tenant QoS and telemetry) and the class (for priority). It passes through the
 * single scheduling point (src/qos/sched.h) before any backend call. Plain value type.
 */
#ifndef TIER_COMMON_IOCTX_H
#define TIER_COMMON_IOCTX_H

#include <stdint.h>

enum tier_io_class {
    TIER_IO_INTERACTIVE = 0, /* inference: small reads, tail latency matters most */
    TIER_IO_STREAMING = 1,   /* training reads: throughput matters */
    TIER_IO_CHECKPOINT = 2,  /* write-back uploads */
    TIER_IO_BACKGROUND = 3,  /* staging, prefetch, lifecycle moves */
    TIER_IO_NCLASSES = 4,
};

struct tier_ioctx {
    uint32_t tenant; /* 0 = default tenant */
    enum tier_io_class cls;
};

#define TIER_IOCTX_DEFAULT ((struct tier_ioctx){.tenant = 0, .cls = TIER_IO_STREAMING})

static inline const char *tier_io_class_name(enum tier_io_class c)
{
    static const char *const names[] = {"interactive", "streaming", "checkpoint", "background"};
    return (unsigned)c < TIER_IO_NCLASSES ? names[c] : "unknown";
}

#endif
