/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wb_wait.c - waits for durability: wb_wait (blocking, under wb->cond) and the asynchronous
 * waits (wb_wait_async), held by one awaiter thread.
 *
 * Locking: as the top of wb.c says (wb->lock guards every entry and the journal connection).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "writeback/wb_int.h"

/* Where a wait on (backend_name, prefix) stands: 1 while a sealed file under it is not yet in
 * the backend (or a cancellation not yet applied), 0 when none is, -EIO (tier_err_msg() names
 * it) while a sealed file under it is FAILED: it will never be durable, so say so now rather
 * than at the timeout. wb->lock held. */
static int wait_verdict(struct wb *wb, const char *backend_name, const char *prefix, bool exact)
{
    bool pending = false;
    struct entry_iter it;
    iter_init(&it, wb, backend_name, prefix);
    if (exact && backend_name) /* one key: its generations, not every key it prefixes */
        it.plen = SIZE_MAX;
    for (struct wb_entry *e; (e = iter_next(&it)) != NULL;) {
        if (exact && strcmp(e->key, prefix) != 0)
            continue;
        if (wb_entry_failed_sealed(e)) {
            tier_err_set("write-back: %s:%s will never be uploaded: %s", e->backend, e->key,
                         e->error ? e->error : "failed");
            return -EIO;
        }
        pending = pending || e->state == WB_SEALED || e->state == WB_UPLOADING ||
                  e->state == WB_CANCELLED;
    }
    return pending ? 1 : 0;
}

int wb_wait(struct wb *wb, const char *backend_name, const char *prefix, int64_t timeout_ms)
{
    uint64_t deadline =
        timeout_ms < 0 ? 0 : tier_now_mono_ns() + (uint64_t)timeout_ms * TIER_NS_PER_MS;
    int rc = 0;
    pthread_mutex_lock(&wb->lock);
    wb->waiters++; /* someone wants durability now: lifts the upload hold-off */
    pthread_cond_broadcast(&wb->work);
    while ((rc = wait_verdict(wb, backend_name, prefix, false)) > 0) {
        if (wb->stopping) {
            rc = -ESHUTDOWN;
            break;
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&wb->cond, &wb->lock);
            continue;
        }
        if (tier_now_mono_ns() >= deadline) {
            rc = -ETIMEDOUT;
            break;
        }
        struct timespec ts;
        abs_deadline(&ts, deadline);
        pthread_cond_timedwait(&wb->cond, &wb->lock, &ts);
    }
    wb->waiters--;
    pthread_mutex_unlock(&wb->lock);
    return rc;
}

/* ---- asynchronous waits (durability = remote closes through the mount) -----------------------
 * One thread, started at the first wb_wait_async, holds every pending wait: it re-evaluates them
 * at each state change (wb->cond) and at the earliest deadline, and calls their callbacks without
 * the lock. A FUSE close that waits this way holds no FUSE worker thread, so a backend outage
 * cannot take every worker. */

struct wb_awaiter {
    char *backend, *prefix;
    bool exact;                /* prefix is one key */
    uint64_t deadline_mono_ns; /* 0: none */
    wb_wait_fn done;
    void *arg;
    int rc;
    char msg[256]; /* the verdict's sentence: tier_err_msg() in the callback */
    struct wb_awaiter *next;
};

/* Move the awaiters that are answered (or, with all, every one) from wb->awaiters to *fired,
 * with their verdicts; *wake gets the earliest deadline left. wb->lock held. */
static void awaiters_collect(struct wb *wb, bool all, uint64_t now, struct wb_awaiter **fired,
                             uint64_t *wake)
{
    struct wb_awaiter **pp = &wb->awaiters;
    while (*pp) {
        struct wb_awaiter *a = *pp;
        int rc = all ? -ESHUTDOWN : wait_verdict(wb, a->backend, a->prefix, a->exact);
        if (rc == -ESHUTDOWN)
            tier_err_set("tierd is stopping; %s is sealed locally and is uploaded after the "
                         "restart",
                         a->prefix);
        if (rc > 0 && wb->stopping) {
            tier_err_set("tierd is stopping; %s is sealed locally and is uploaded after the "
                         "restart",
                         a->prefix);
            rc = -ESHUTDOWN;
        }
        if (rc > 0 && a->deadline_mono_ns && now >= a->deadline_mono_ns) {
            tier_err_set("write-back: %s is not yet durable in the backend", a->prefix);
            rc = -ETIMEDOUT;
        }
        if (rc > 0) {
            if (a->deadline_mono_ns && (!*wake || a->deadline_mono_ns < *wake))
                *wake = a->deadline_mono_ns;
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        a->rc = rc;
        tier_strlcpy(a->msg, rc ? tier_err_msg() : "", sizeof(a->msg));
        a->next = *fired;
        *fired = a;
        wb->waiters--;
    }
}

/* Call and free the fired awaiters; wb->lock NOT held. */
static void awaiters_fire(struct wb_awaiter *a)
{
    while (a) {
        struct wb_awaiter *next = a->next;
        tier_err_set("%s", a->msg);
        a->done(a->arg, a->rc);
        free(a->backend);
        free(a->prefix);
        free(a);
        a = next;
    }
}

static void *awaiter_main(void *arg)
{
    struct wb *wb = arg;
    pthread_mutex_lock(&wb->lock);
    for (;;) {
        struct wb_awaiter *fired = NULL;
        uint64_t wake = 0, now = tier_now_mono_ns();
        awaiters_collect(wb, false, now, &fired, &wake);
        if (fired) {
            wb->awaiters_firing++; /* wb_wait_async_flush waits until these are answered */
            pthread_mutex_unlock(&wb->lock);
            awaiters_fire(fired);
            pthread_mutex_lock(&wb->lock);
            wb->awaiters_firing--;
            pthread_cond_broadcast(&wb->cond);
            continue;
        }
        if (wb->stopping && !wb->awaiters)
            break;
        uint64_t until = now + TIER_NS_PER_SEC; /* a deadline check at least once a second */
        if (wake && wake < until)
            until = wake;
        struct timespec ts;
        abs_deadline(&ts, until);
        pthread_cond_timedwait(&wb->cond, &wb->lock, &ts);
    }
    pthread_mutex_unlock(&wb->lock);
    return NULL;
}

int wb_wait_async(struct wb *wb, const char *backend_name, const char *prefix, bool exact,
                  int64_t timeout_ms, wb_wait_fn done, void *arg)
{
    struct wb_awaiter *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->backend = backend_name ? strdup(backend_name) : NULL;
    a->prefix = strdup(prefix ? prefix : "");
    if ((backend_name && !a->backend) || !a->prefix) {
        free(a->backend);
        free(a->prefix);
        free(a);
        return -ENOMEM;
    }
    a->done = done;
    a->arg = arg;
    a->exact = exact;
    if (timeout_ms >= 0)
        a->deadline_mono_ns = tier_now_mono_ns() + (uint64_t)timeout_ms * TIER_NS_PER_MS;
    pthread_mutex_lock(&wb->lock);
    int rc = wb->stopping ? -ESHUTDOWN : 0;
    if (!rc && !wb->awaiter_started) {
        rc = -pthread_create(&wb->awaiter, NULL, awaiter_main, wb);
        wb->awaiter_started = rc == 0;
    }
    if (rc) {
        pthread_mutex_unlock(&wb->lock);
        free(a->backend);
        free(a->prefix);
        free(a);
        return rc;
    }
    a->next = wb->awaiters;
    wb->awaiters = a;
    wb->waiters++; /* as wb_wait: lifts the upload hold-off */
    pthread_cond_broadcast(&wb->work);
    pthread_cond_broadcast(&wb->cond); /* the awaiter thread evaluates it now */
    pthread_mutex_unlock(&wb->lock);
    return 0;
}

void wb_wait_async_flush(struct wb *wb)
{
    struct wb_awaiter *fired = NULL;
    uint64_t wake = 0;
    pthread_mutex_lock(&wb->lock);
    awaiters_collect(wb, true, tier_now_mono_ns(), &fired, &wake);
    pthread_mutex_unlock(&wb->lock);
    awaiters_fire(fired);
    /* and the ones the waiter thread took out of the list and is answering now: on return no
     * callback runs, so the caller may tear down what they use */
    pthread_mutex_lock(&wb->lock);
    while (wb->awaiters_firing)
        pthread_cond_wait(&wb->cond, &wb->lock);
    pthread_mutex_unlock(&wb->lock);
}

void awaiter_stop(struct wb *wb)
{
    if (!wb->awaiter_started)
        return;
    wb_wait_async_flush(wb);
    pthread_mutex_lock(&wb->lock);
    wb->stopping = true;
    pthread_cond_broadcast(&wb->cond);
    pthread_mutex_unlock(&wb->lock);
    pthread_join(wb->awaiter, NULL);
    wb->awaiter_started = false;
}
