/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_policy.c - lifecycle policies through the control API (lifecycle.h): GET /v1/policy, POST
 * /v1/policy/run and /v1/policy/plan, with the per-uid rate limit of plans by callers who are not
 * administrators (under plan_mu). Called on the HTTP server's connection threads.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "api/api_int.h"
#include "lifecycle/lifecycle.h"
#include "core/state.h"

static unsigned no_policies(struct api_reply *out)
{
    return api_reply_error(out, -ENOENT,
                           "no lifecycle policy is configured (add a [policy NAME] section, or "
                           "[writeback] retention_keep for a write-back namespace: "
                           "docs/POLICIES.md)");
}

unsigned api_policy_get(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                        const char *rest)
{
    (void)rest;
    struct policy_engine *pe = __atomic_load_n(&d->policy, __ATOMIC_ACQUIRE);
    if (!pe)
        return no_policies(out);
    json_t *j = policy_engine_status(pe);
    if (j)
        api_filter_paths(d, rq, json_object_get(j, "recent"));
    return j ? api_reply_json(out, 200, j) : api_reply_error(out, -ENOMEM, "out of memory");
}

/* Plans of callers who are not administrators: each is a full listing of every rule's source,
 * so a uid has one in flight at a time and a bucket of PLAN_BURST plans that refills one per
 * PLAN_REFILL_S. The table holds PLAN_UIDS uids; a new one takes the slot of the uid seen
 * longest ago that has none in flight (its bucket starts full again). Under plan_mu. */
#define PLAN_UIDS 64
#define PLAN_BURST 3.0
#define PLAN_REFILL_S 20
static struct plan_bucket {
    bool used, inflight;
    uid_t uid;
    double tokens;
    uint64_t at_ns; /* tokens as of then */
} plan_buckets[PLAN_UIDS];
static pthread_mutex_t plan_mu = PTHREAD_MUTEX_INITIALIZER;

/* 0: go on (then plan_done); else the seconds to wait (the caller answers 429). */
static unsigned plan_take(uid_t uid)
{
    uint64_t now = tier_now_mono_ns();
    unsigned wait_s = 0;
    pthread_mutex_lock(&plan_mu);
    struct plan_bucket *b = NULL, *spare = NULL;
    for (size_t i = 0; i < PLAN_UIDS && !b; i++) {
        struct plan_bucket *e = &plan_buckets[i];
        if (e->used && e->uid == uid)
            b = e;
        else if (!e->used && !spare)
            spare = e;
        else if (!e->inflight && (!spare || (spare->used && e->at_ns < spare->at_ns)))
            spare = e;
    }
    if (!b && spare)
        *(b = spare) =
            (struct plan_bucket){.used = true, .uid = uid, .tokens = PLAN_BURST, .at_ns = now};
    if (!b) {
        wait_s = 1; /* every slot has a plan in flight */
    } else {
        b->tokens += (double)(now - b->at_ns) / ((double)PLAN_REFILL_S * TIER_NS_PER_SEC);
        if (b->tokens > PLAN_BURST)
            b->tokens = PLAN_BURST;
        b->at_ns = now;
        if (b->inflight)
            wait_s = 1;
        else if (b->tokens < 1.0)
            wait_s = (unsigned)((1.0 - b->tokens) * PLAN_REFILL_S) + 1;
        else {
            b->tokens -= 1.0;
            b->inflight = true;
        }
    }
    pthread_mutex_unlock(&plan_mu);
    return wait_s;
}

static void plan_done(uid_t uid)
{
    pthread_mutex_lock(&plan_mu);
    for (size_t i = 0; i < PLAN_UIDS; i++)
        if (plan_buckets[i].used && plan_buckets[i].uid == uid)
            plan_buckets[i].inflight = false;
    pthread_mutex_unlock(&plan_mu);
}

/* POST /v1/policy/run and /v1/policy/plan: {"policy": NAME} (optional) runs or plans one full
 * pass of every rule, or of that one, and answers what it did or would do. */
static unsigned policy_pass(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                            bool dry_run)
{
    struct policy_engine *pe = __atomic_load_n(&d->policy, __ATOMIC_ACQUIRE);
    if (!pe)
        return no_policies(out);
    const char *name = NULL;
    json_t *j = NULL;
    if (rq->body && rq->body_len) {
        unsigned ret;
        if (!(j = api_parse_body(rq, out, &ret)))
            return ret;
        static const char *const fields[] = {"policy"};
        const char *bad = api_unknown_field(j, fields, 1);
        json_t *p = json_object_get(j, "policy");
        if (bad || (p && !json_is_string(p))) {
            json_decref(j);
            return api_reply_error(out, -EINVAL, "expected {\"policy\": \"NAME\"} or no body%s%s",
                                   bad ? "; unknown field " : "", bad ? bad : "");
        }
        name = p ? json_string_value(p) : NULL;
    }
    /* a plan of a caller who is not an administrator: rate-limited, and it shows only the
     * namespaces the caller may read (its counts, over every namespace, are left out) */
    bool limited = dry_run && !rq->admin;
    unsigned wait_s = limited ? plan_take(rq->uid) : 0;
    if (wait_s) {
        json_decref(j);
        api_reply_error_status(out, 429, -EBUSY,
                               "uid %u has a plan in flight or planned %d times in the last %d s "
                               "(callers who are not administrators may plan one at a time, %d "
                               "in a row, then one every %d s); retry in %u s",
                               (unsigned)rq->uid, (int)PLAN_BURST, (int)PLAN_BURST * PLAN_REFILL_S,
                               (int)PLAN_BURST, PLAN_REFILL_S, wait_s);
        out->retry_after_s = wait_s;
        return 429;
    }
    json_t *res = NULL;
    tier_err_clear();
    int rc = policy_engine_run(pe, name, dry_run, &res);
    if (limited)
        plan_done(rq->uid);
    if (rc == 0 && limited) {
        static const char *const counts[] = {"files", "done", "deferred", "failed", "truncated"};
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
            json_object_del(res, counts[i]);
        api_filter_paths(d, rq, json_object_get(res, "actions"));
        json_object_set_new(res, "filtered", json_true());
    }
    unsigned ret;
    if (rc == -ENOENT)
        ret = api_reply_error(out, rc, "no policy '%.80s' (GET /v1/policy lists them)", name);
    else if (rc)
        ret = api_reply_error(out, rc, "the policy pass failed: %s", strerror(-rc));
    else
        ret = api_reply_json(out, 200, res);
    json_decref(j);
    return ret;
}

unsigned api_policy_run(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                        const char *rest)
{
    (void)rest;
    return policy_pass(d, rq, out, false);
}

unsigned api_policy_plan(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                         const char *rest)
{
    (void)rest;
    return policy_pass(d, rq, out, true);
}
