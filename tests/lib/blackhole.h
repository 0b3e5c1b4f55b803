/* SPDX-License-Identifier: Apache-2.0 */
/*
 * blackhole.h - a local HTTP endpoint for backend timeout tests: it accepts every connection on
 * 127.0.0.1 and, while hanging, reads the request and never answers (the connection stays open
 * until bh_stop); switched to answering, it replies to each request with one canned response and
 * closes. One server thread; the mode may be switched from any thread.
 */
#ifndef TIER_TESTS_BLACKHOLE_H
#define TIER_TESTS_BLACKHOLE_H

#include <pthread.h>
#include <stdatomic.h>

#define BH_MAX_HELD 512

struct blackhole {
    int lfd;
    int port;
    int stop_pipe[2];
    atomic_int answering;  /* 0: hang; 1: reply with `response` */
    atomic_int accepted;   /* connections accepted so far */
    const char *response;  /* raw HTTP response; set before bh_answer(true) */
    int held[BH_MAX_HELD]; /* server thread only */
    int nheld;
    pthread_t th;
};

/* Start hanging on an ephemeral port (bh->port). Returns 0 or -errno. */
int bh_start(struct blackhole *bh);
/* From now on answer each new request with response (borrowed until bh_stop), or hang again. */
void bh_answer(struct blackhole *bh, const char *response);
void bh_hang(struct blackhole *bh);
/* Close every held connection (clients see the connection drop) and stop. */
void bh_stop(struct blackhole *bh);

#endif
