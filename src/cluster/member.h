/* SPDX-License-Identifier: Apache-2.0 */
/* member.h - cluster membership in Ceph RADOS: who is in the cluster, held by the OSDs, with no
 * quorum or leader of our own (issue 25, docs/CLUSTER.md).
 *
 * One object per cluster, `tierd.cluster.NAME`, in a pool the caller opened: its omap holds
 * `epoch` (20 decimal digits) and one `node.ID` entry per member (member_entry.h); every change is
 * a compare-and-swap on the epoch. Each member holds the exclusive lock `node.ID` on that object,
 * with its incarnation as the cookie and the lease as the duration, and renews it every lease/3;
 * an entry whose lock is gone is removed by whichever member sees it. A member that could not
 * renew for lease/2 stops serving peers (member_may_serve()) before the others can declare it
 * dead (lease). The daemon joins with it when its config has a [cluster] section
 * (src/daemon/cluster.c).
 *
 * Threads: member_join() starts one thread per member that renews, re-reads and writes; the
 * functions below may be called from any thread. The caller owns the rados ioctx and keeps it
 * open until member_leave() (or member_abandon()) returns. */
#ifndef TIER_CLUSTER_MEMBER_H
#define TIER_CLUSTER_MEMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rados/librados.h>

#include "cluster/member_entry.h"

struct member_conf {
    const char *cluster; /* the cluster's name: the object is tierd.cluster.NAME */
    const char *id;      /* this node's id (member_id_valid()) */
    const char *addr;    /* its peer endpoint, as others should reach it */
    double weight;       /* > 0: its hot-tier share */
    uint32_t lease_ms;   /* the lock's duration (e.g. 10000); >= 300 */
};

struct member;

/* Joins the cluster: creates the object if it is new, takes the lock with a new incarnation,
 * watches the object, adds this node's entry (retrying the compare-and-swap), tells the others,
 * and starts the member's thread. 0 and *out, or a negative errno (-EINVAL: conf; -EBUSY: another
 * instance holds this id's lock; a librados error) with nothing left behind. */
int member_join(rados_ioctx_t io, const struct member_conf *conf, struct member **out);

/* Leaves: stops the thread, removes this node's entry, releases the lock, tells the others, and
 * frees m. NULL is a no-op. */
void member_leave(struct member *m);

/* The members as last read (this node among them once joined), sorted by id, and the epoch they
 * were read at. *out is malloc'd (free() it); 0 or -ENOMEM. */
int member_view(struct member *m, struct member_entry **out, size_t *n, uint64_t *epoch);

/* Whether this node may serve peers: its lock was renewed less than lease/2 ago. */
bool member_may_serve(struct member *m);

/* The current incarnation (it changes when the node re-joins after losing its lock). */
uint64_t member_incarnation(struct member *m);

/* Tests and diagnostics: when the last successful renewal (or the join's or rejoin's taking of
 * the lock) started, in milliseconds of CLOCK_MONOTONIC. The lock lives at least a lease after
 * it; member_may_serve() is true for lease/2 after it. */
int64_t member_last_renew_ms(struct member *m);

/* Tests and diagnostics: the re-reads that looked at the members' locks, and the locks they read
 * in all (about 3 per re-read, plus one per lapsed member passed: member.c M6). */
void member_reap_stats(struct member *m, uint64_t *rereads, uint64_t *lock_checks);

/* Tests: stop (or resume) renewing the lock, as a node stopped by SIGSTOP would. */
void member_pause(struct member *m, bool paused);

/* Tests: a crash. Stops the thread and frees m without removing the entry or releasing the lock,
 * which lapses after the lease. */
void member_abandon(struct member *m);

#endif
