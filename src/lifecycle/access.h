/* SPDX-License-Identifier: Apache-2.0 */
/*
 * access.h - when each object was last read through the mount, for the lifecycle policies'
 * `idle` trigger (policy.h). A fixed table (4-way set-associative, keyed by a 64-bit hash of
 * backend and key), lossy by design: a set's oldest entry makes room, and each set keeps the
 * newest time it forgot, which a lookup that misses in it returns: an object forgotten (or
 * never read) counts as read then, so it never looks idler than it is (errs on the side of
 * keeping); its tenant is unknown (a filter by tenant does not take it). No lock: notes and
 * lookups are relaxed atomics, so a racing pair may read a neighbour's time (rare, and only ever
 * a time); the tenant carries 15 bits of its entry's hash, so a tenant read together with a
 * neighbour's entry is, but for one race in 32768, taken as unknown instead.
 *
 * Callers: the FUSE layer notes opens and creates (and reads of long-open files, at most once a
 * second per handle); the policy engine looks up. Created by the engine only when a rule has
 * `idle` or `tenant`.
 */
#ifndef TIER_LIFECYCLE_ACCESS_H
#define TIER_LIFECYCLE_ACCESS_H

#include <stddef.h>
#include <stdint.h>

struct access_log;

/* A table of 1 << bits entries (24 bytes each); bits 4..26. */
int access_log_new(unsigned bits, struct access_log **out);
void access_log_free(struct access_log *a);
#define ACCESS_TENANT_MAX 0x1FFFFu /* tenant ids above are noted as unknown */

/* backend:key was read (or created) at now_ns (realtime) by tenant. a NULL: no-op. */
void access_note(struct access_log *a, const char *backend, const char *key, int64_t now_ns,
                 uint32_t tenant);
/* The last time noted for backend:key; on a miss, the newest time its set forgot (0: none).
 * tenant (may be NULL): the tenant of that note, or -1 on a miss (or a torn read). */
int64_t access_last(const struct access_log *a, const char *backend, const char *key,
                    int64_t *tenant);
/* Tenant id was reclaimed (tenant.h): its notes name no tenant from now on, so the id's next
 * tenant is not taken for the reader of objects it never read (a pass over the table, on the
 * reclaim sweep). a NULL: no-op. */
void access_forget_tenant(struct access_log *a, uint32_t tenant);

#endif
