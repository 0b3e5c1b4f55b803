/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakejobs.h - fake jobs_ops (src/jobs/jobs.h) for the job registry without a cache or a stager,
 * shared by tests/unit/test_jobs.c and tests/fuzz/fuzz_jobs.c: the hot tier's space, the
 * backends' links, the pin rules and the stagings are fields the test sets and reads. The ops
 * check the registry's pin discipline: a rule is never pinned twice by jobs at once nor unpinned
 * when jobs had not pinned it, and a rule pinned by hand is never unpinned by a job; a breach is
 * printed and abort()s (a cmocka test fails on it, a fuzzer reports it). Not thread-safe: the
 * ops of one registry, which calls them one at a time.
 */
#ifndef TIER_TESTS_FAKEJOBS_H
#define TIER_TESTS_FAKEJOBS_H

#include <stdbool.h>
#include <stdint.h>

#include "jobs/jobs.h"

#define FAKEJOBS_STAGES 64 /* staging ids 1 .. FAKEJOBS_STAGES - 2; later stage calls: -EBUSY */

/* One pin rule, "backend:prefix", as the ops saw it. */
struct fakejobs_pin {
    char *key;
    int pins, unpins;
    bool hand; /* pinned by hand before any job: pin_exists answers true, unpin must not come */
};

struct fakejobs {
    uint64_t level, pin_budget, pinned; /* the space op's answers */
    uint64_t link_warm;                 /* backend "warm"'s link_capacity; the others have none */
    const char *hand_rule;              /* a prefix equal to it is pinned by hand (NULL: none) */
    int fail_pin;                       /* -errno for the next pin (then 0) */
    int busy;                           /* the next this many stage calls answer -EBUSY */
    uint64_t nstages;                   /* stagings started: ids 1 .. nstages */
    bool last_cluster;                  /* the last stage call's cluster (a cluster-wide one) */
    int cancels;
    uint64_t last_cancel;
    struct stage_progress prog[FAKEJOBS_STAGES]; /* by staging id */
    bool gone[FAKEJOBS_STAGES];                  /* pruned by the stager: progress is -ENOENT */
    void (*on_stage)(struct fakejobs *f);        /* called once inside the next stage op */
    void *user;                                  /* the test's own (on_stage may read it) */
    struct fakejobs_pin *pin;
    int npin, cap;
};

/* Fill ops with the fake's operations on f (ops->ud = f). */
void fakejobs_ops(struct fakejobs *f, struct jobs_ops *ops);

/* The record of rule be:prefix, made (pins 0, hand when prefix is hand_rule) when first asked. */
struct fakejobs_pin *fakejobs_pin_of(struct fakejobs *f, const char *be, const char *prefix);

/* The first rule a job pinned and did not unpin (a hand rule never counts), or NULL. */
const struct fakejobs_pin *fakejobs_still_pinned(const struct fakejobs *f);

/* Free the pin records (f's numbers stay). */
void fakejobs_fini(struct fakejobs *f);

#endif
