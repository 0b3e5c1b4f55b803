/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ioctx.h - who an I/O is for. Every request that may reach a backend carries one of these: the
 * tenant (for per-tenant QoS and telemetry; an id of the tenant registry, src/tenant/tenant.h)
 * and the class (for priority). It passes through the single scheduling point (src/qos/sched.h)
 * before any backend call. Plain value type.
 *
 * The backend dispatchers (tiers/backend.h) take the ioctx of each call and make it this
 * thread's current ioctx for the duration of the call (tier_ioctx_swap), so the scheduler's
 * backend wrapper, which sits behind the unchanged backend_ops table, sees whose call it admits.
 */
#ifndef TIER_COMMON_IOCTX_H
#define TIER_COMMON_IOCTX_H

#include <stdint.h>

/* Operator-facing names. Until the next release the API also answers the names these classes
 * had before (interactive, streaming): tier_io_class_legacy_name. */
enum tier_io_class {
    TIER_IO_INFERENCE = 0,  /* small reads, tail latency matters most */
    TIER_IO_TRAINING = 1,   /* streaming reads: throughput matters */
    TIER_IO_CHECKPOINT = 2, /* checkpoint writes and their uploads */
    TIER_IO_BACKGROUND = 3, /* staging, prefetch, lifecycle moves */
    TIER_IO_NCLASSES = 4,
};

/* Tenant ids fixed by every registry. */
#define TIER_TENANT_DEFAULT 0u /* "default": root, pid 0 (all with fallback = default) */
#define TIER_TENANT_OTHER 1u   /* "other": tenants beyond the registry's cap fold here */
/* Tenant ids at most: [tenants] max_tenants' limit (TENANT_MAX_TENANTS_LIMIT) and the id of
 * "retired" (idle_reclaim) beyond it; the bound of the telemetry, the cache and dmClock. */
#define TIER_TENANT_IDS_MAX 65537u

struct tier_ioctx {
    uint32_t tenant; /* TIER_TENANT_DEFAULT when unknown */
    enum tier_io_class cls;
};

#define TIER_IOCTX_DEFAULT                                                                         \
    ((struct tier_ioctx){.tenant = TIER_TENANT_DEFAULT, .cls = TIER_IO_TRAINING})
/* Work done for nobody in particular (lifecycle, journal recovery, internal checks). */
#define TIER_IOCTX_BACKGROUND                                                                      \
    ((struct tier_ioctx){.tenant = TIER_TENANT_DEFAULT, .cls = TIER_IO_BACKGROUND})

static inline const char *tier_io_class_name(enum tier_io_class c)
{
    static const char *const names[] = {"inference", "training", "checkpoint", "background"};
    return (unsigned)c < TIER_IO_NCLASSES ? names[c] : "unknown";
}

/* The name a class had before the rename (interactive, streaming, checkpoint, background). */
static inline const char *tier_io_class_legacy_name(enum tier_io_class c)
{
    static const char *const names[] = {"interactive", "streaming", "checkpoint", "background"};
    return (unsigned)c < TIER_IO_NCLASSES ? names[c] : "unknown";
}

/* A class by name, the new names or the legacy ones: 0, or -EINVAL for any other string. */
int tier_io_class_parse(const char *name, enum tier_io_class *out);

/* This thread's current ioctx (NULL: none declared). */
const struct tier_ioctx *tier_ioctx_current(void);
/* Make io (copied; NULL: none) this thread's current ioctx; returns the previous one by value in
 * *prev (prev_set false when there was none), for tier_ioctx_restore. */
struct tier_ioctx_saved {
    struct tier_ioctx io;
    int set;
};
struct tier_ioctx_saved tier_ioctx_swap(const struct tier_ioctx *io);
void tier_ioctx_restore(struct tier_ioctx_saved saved);

/* Backend calls this thread has made (every dispatcher of tiers/backend.h counts one): a FUSE op
 * that sees it grow knows a backend served it (telemetry's tier). */
uint64_t tier_backend_calls(void);
void tier_backend_call_note(void);

#endif
