/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant_reclaim.c - the reclaim of idle implicit tenant ids (tenant_reclaim, tenant_hold,
 * tenant_unhold). The registry it works on is tenant.c.
 *
 * Reclaim (idle_reclaim_s > 0; docs/ARCHITECTURE.md "Tenants"). Telemetry, the space quotas,
 * QoS and the policies' access log index arrays by tenant id, so an id given to a new tenant
 * must carry nothing of its old one. Id 2 is "retired" (an id beyond max_tenants: r->nids is
 * max + 1, and the caps count ids without it); only implicit tenants are reclaimed, never
 * default, other, retired, configured or registered ones. An id's states:
 *   LIVE: in the name index, handed out by resolution and tenant_find.
 *   QUARANTINE: out of the name index (a new caller of that name gets a new tenant), not
 *     handed out for a new tenant; a request that resolved it just before still records under
 *     it, and the second fold moves that.
 *   FREE: on r->freel; create_locked takes it before a new id.
 * Idleness: every tenant_resolve answer and tenant_find hit sets the id's `touched` flag (a
 * load, and a store only when clear: no shared write per request). A sweep (tenant_reclaim)
 * clears the flags; a touched id's since_s becomes the sweep's time. So since_s is never later
 * than the truth by more than one sweep interval and an id is idle only when no request was
 * given it for idle_s: sweeps far apart delay reclaim, never hasten it.
 * TRANSITION -> FUNCTION
 *   (new id) -> LIVE                                     create_locked()
 *   LIVE, implicit, idle, not busy -> QUARANTINE         tenant_reclaim() (then the retire hook
 *                                                        folds; the rule generation is bumped, so
 *                                                        no pid-cache entry answers the id again)
 *   QUARANTINE, idle again, not busy -> FREE             tenant_reclaim() (the retire hook folds
 *                                                        again first: once free, a new tenant may
 *                                                        record at once)
 *   FREE -> LIVE                                         create_locked() (the name written in the
 *                                                        buffer readers are not pointed at, then
 *                                                        the buffers flipped)
 *
 * An id with open FUSE handles (holds, tenant_hold: reads through a handle are not resolved
 * again) is in use like a touched one. The busy hook (what the tenant holds: hot-tier bytes, an
 * own quota, hint sets, QoS parameters or queued calls) is asked without the registry lock,
 * then the flags and holds are checked again under it: an id used meanwhile stays. Invariant: an id
 * is reused only after two idle periods in which no request was given it and, at the end of each,
 * it held nothing; a request that started for the old tenant and still records after that (it ran
 * longer than 2 x idle_s without a new resolve) is the one case counted under the new tenant.
 * Sweeps run from the miss path of tenant_resolve every idle_s / 4 (no thread of tierd's runs in
 * every configuration, and a miss is when a new id may be wanted), one at a time (r->sweeping).
 */
#include "tenant/tenant.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "tenant/tenant_int.h"

/* ---- reclaim (DESIGN "Reclaim") ---------------------------------------------------------- */

void tenant_hold(struct tenant_reg *r, uint32_t id)
{
    if (r && id < tenant_count(r))
        atomic_fetch_add_explicit(&r->t[id].holds, 1, memory_order_relaxed);
}

void tenant_unhold(struct tenant_reg *r, uint32_t id)
{
    if (r && id < tenant_count(r))
        atomic_fetch_sub_explicit(&r->t[id].holds, 1, memory_order_relaxed);
}

/* Used since the last look: resolved, found, or holding an open handle. Under lock. */
static bool used_since_look(struct tenant *t)
{
    return atomic_load_explicit(&t->touched, memory_order_relaxed) ||
           atomic_load_explicit(&t->holds, memory_order_relaxed) > 0;
}

void tenant_reclaim_hooks_set(struct tenant_reg *r, const struct tenant_reclaim_hooks *h)
{
    pthread_mutex_lock(&r->lock);
    r->hooks = h ? *h : (struct tenant_reclaim_hooks){0};
    pthread_mutex_unlock(&r->lock);
}

/* Under lock: the name index rebuilt from the live ids (a retired name leaves it; open
 * addressing has no cheap delete, and a sweep that retires anything is rare). */
static void index_rebuild_locked(struct tenant_reg *r)
{
    memset(r->name_idx, 0, ((size_t)r->name_mask + 1) * sizeof(*r->name_idx));
    uint32_t n = atomic_load_explicit(&r->count, memory_order_relaxed);
    for (uint32_t id = 0; id < n; id++)
        if (atomic_load_explicit(&r->t[id].state, memory_order_relaxed) == T_LIVE)
            index_put(r, id);
}

/* What a sweep may do to an id, decided under the lock, checked against the hooks outside it. */
struct cand {
    uint32_t id;
    int from; /* T_LIVE (retire) or T_QUARANTINE (free) */
    bool busy;
};

/* Under lock: candidates (c[0..nc), by id ascending) a rule sends callers to are kept (busy):
 * the rule would send them to the id's next tenant. One pass over the rules. */
static void cand_mark_ruled_locked(const struct tenant_reg *r, struct cand *c, size_t nc)
{
    for (size_t i = 0; i < r->nrules && nc; i++) {
        uint32_t id = r->rules[i]->tenant;
        size_t lo = 0, hi = nc;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (c[mid].id < id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < nc && c[lo].id == id)
            c[lo].busy = true;
    }
}

size_t tenant_reclaim(struct tenant_reg *r)
{
    if (!r || !r->idle_s)
        return 0;
    uint64_t now = r->now_s();
    uint64_t step = r->idle_s / 4 ? r->idle_s / 4 : 1;
    atomic_store_explicit(&r->next_sweep_s, now + step, memory_order_relaxed);
    pthread_mutex_lock(&r->lock);
    struct tenant_reclaim_hooks h = r->hooks;
    uint32_t n = atomic_load_explicit(&r->count, memory_order_relaxed);
    struct cand *c = h.busy && !r->sweeping ? malloc((size_t)n * sizeof(*c)) : NULL;
    size_t nc = 0;
    for (uint32_t id = TENANT_RETIRED_ID + 1; c && id < n; id++) {
        struct tenant *t = &r->t[id];
        int st = atomic_load_explicit(&t->state, memory_order_relaxed);
        /* a touch since the last sweep restarts the idle period, in quarantine too: an id is
         * freed only a whole idle period after the last request that was given it */
        if (st != T_FREE && (atomic_exchange_explicit(&t->touched, false, memory_order_relaxed) ||
                             atomic_load_explicit(&t->holds, memory_order_relaxed) > 0))
            t->since_s = now;
        bool idle = now >= t->since_s && now - t->since_s >= r->idle_s;
        if (idle && ((st == T_LIVE && atomic_load_explicit(&t->implicit, memory_order_relaxed)) ||
                     st == T_QUARANTINE))
            c[nc++] = (struct cand){.id = id, .from = st};
    }
    cand_mark_ruled_locked(r, c, nc);
    r->sweeping = c != NULL;
    pthread_mutex_unlock(&r->lock);
    if (!c)
        return 0;
    /* the holdings are asked without the registry lock (the hooks take the cache's and the
     * hints' locks); a hold taken after the answer is the race DESIGN bounds by the quarantine */
    for (size_t i = 0; i < nc; i++) {
        if (!c[i].busy)
            c[i].busy = h.busy(h.ud, c[i].id);
        /* an id leaving quarantine is folded (what was recorded in quarantine) before it is
         * free: once free, a new tenant may take it and record at once */
        if (!c[i].busy && c[i].from == T_QUARANTINE && h.retire)
            h.retire(h.ud, c[i].id);
    }
    size_t retired = 0;
    pthread_mutex_lock(&r->lock);
    cand_mark_ruled_locked(r, c, nc); /* a rule added meanwhile */
    for (size_t i = 0; i < nc; i++) {
        struct tenant *t = &r->t[c[i].id];
        /* touched or opened while the hooks were asked: used, not idle; registered meanwhile
         * (tenant_register of its name: no longer implicit, perhaps named by a new rule): kept */
        if (c[i].busy || used_since_look(t) ||
            atomic_load_explicit(&t->state, memory_order_relaxed) != c[i].from ||
            (c[i].from == T_LIVE && !atomic_load_explicit(&t->implicit, memory_order_relaxed))) {
            c[i].busy = true;
            continue;
        }
        if (c[i].from == T_LIVE) {
            atomic_store_explicit(&t->state, T_QUARANTINE, memory_order_release);
            t->since_s = now;
            if (strncmp(tname(t), "uid-", 4) == 0 && r->uid_count > 0)
                r->uid_count--;
            r->reclaimed++;
            retired++;
        } else {
            atomic_store_explicit(&t->state, T_FREE, memory_order_release);
            r->freel[r->nfree++] = c[i].id;
        }
    }
    if (retired) {
        index_rebuild_locked(r);
        gen_bump(r); /* no cached pid answers a retired id again */
    }
    r->sweeping = false;
    pthread_mutex_unlock(&r->lock);
    /* fold at retirement (the id is not handed out before it leaves quarantine) */
    for (size_t i = 0; i < nc; i++)
        if (!c[i].busy && c[i].from == T_LIVE && h.retire)
            h.retire(h.ud, c[i].id);
    for (size_t i = 0; i < nc; i++)
        if (!c[i].busy && c[i].from == T_LIVE)
            log_info("tenants: '%s' (id %u) idle for %llu s and holding nothing: reclaimed, its "
                     "counters folded into '%s'",
                     tname(&r->t[c[i].id]), (unsigned)c[i].id, (unsigned long long)r->idle_s,
                     TENANT_RETIRED_NAME);
    free(c);
    return retired;
}
