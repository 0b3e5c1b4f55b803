/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_train.c - the training workload, modelled on MLPerf Storage / DLIO: R reader threads fetch
 * samples in a new shuffled order each epoch into a bounded prefetch window, and one emulated
 * accelerator (the calling thread) takes them a batch at a time and "computes" for
 * compute_per_sample x batch. AU (accelerator utilisation) = compute / (compute + time the
 * accelerator waited for a full batch).
 *
 * DESIGN: the shuffle is a keyed bijection (tb_perm) of a global sample counter, so readers take
 * work with one atomic increment and no shared shuffled array. The prefetch window (ready +
 * in-flight samples <= prefetch x batch) is the only lock, held for counter updates, never across
 * I/O. A sample that fails to read still counts as delivered (and as an error) so a broken target
 * cannot deadlock the run.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/timeutil.h"

#define TRAIN_CHUNK (1u << 20)

struct train {
    const struct tb_train_cfg *cfg;
    const struct tb_dataset *ds;
    const struct tb_io *io;
    struct tb_series *series;
    uint64_t key;
    _Atomic uint64_t next;
    _Atomic uint64_t bytes;
    _Atomic uint64_t errors;
    _Atomic int first_error;
    pthread_mutex_t mu; /* guards ready, inflight, stop */
    pthread_cond_t can_read;
    pthread_cond_t can_consume;
    uint64_t ready, inflight, cap;
    int stop;
};

static void note_error(struct train *t, int rc)
{
    int zero = 0;
    atomic_fetch_add_explicit(&t->errors, 1, memory_order_relaxed);
    atomic_compare_exchange_strong(&t->first_error, &zero, rc);
}

static void read_sample(struct train *t, const struct tb_item *it, char *buf)
{
    int fd = open(t->ds->paths[it->file], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        note_error(t, -errno);
        return;
    }
    for (uint64_t done = 0; done < it->len;) {
        size_t want = it->len - done < TRAIN_CHUNK ? (size_t)(it->len - done) : TRAIN_CHUNK;
        ssize_t n = t->io->pread(t->io->arg, fd, buf, want, it->off + done);
        if (n < 0) {
            note_error(t, (int)n);
            break;
        }
        if (n == 0)
            break; /* the file shrank: count what was there */
        done += (uint64_t)n;
        atomic_fetch_add_explicit(&t->bytes, (uint64_t)n, memory_order_relaxed);
        struct tb_slot *sl = tb_series_slot(t->series, TB_TRAIN, tier_now_mono_ns());
        if (sl)
            atomic_fetch_add_explicit(&sl->bytes, (uint64_t)n, memory_order_relaxed);
    }
    close(fd);
}

static void *reader(void *arg)
{
    struct train *t = arg;
    char *buf = malloc(TRAIN_CHUNK);
    if (!buf) {
        note_error(t, -ENOMEM);
        return NULL;
    }
    uint64_t n = t->ds->nitems;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        while (!t->stop && t->ready + t->inflight >= t->cap)
            pthread_cond_wait(&t->can_read, &t->mu);
        if (t->stop) {
            pthread_mutex_unlock(&t->mu);
            break;
        }
        t->inflight++;
        pthread_mutex_unlock(&t->mu);

        uint64_t g = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
        uint64_t epoch = g / n;
        uint64_t idx = tb_perm(g % n, n, tb_mix64(t->key + epoch));
        read_sample(t, &t->ds->items[idx], buf);

        pthread_mutex_lock(&t->mu);
        t->inflight--;
        t->ready++;
        pthread_cond_signal(&t->can_consume);
        pthread_mutex_unlock(&t->mu);
    }
    free(buf);
    return NULL;
}

int tb_train_run(const struct tb_train_cfg *cfg, const struct tb_dataset *ds,
                 const struct tb_io *io, uint64_t seed, uint64_t t0_ns, uint64_t duration_ns,
                 struct tb_class_result *res, struct tb_series *series)
{
    struct train t = {.cfg = cfg, .ds = ds, .io = io ? io : &tb_io_posix, .series = series};
    pthread_t *th = calloc(cfg->threads, sizeof(*th));
    pthread_condattr_t ca;
    unsigned started = 0;
    int rc = 0;

    if (!th)
        return -ENOMEM;
    if (ds->nitems == 0) {
        free(th);
        tier_err_set("training: the dataset has no samples");
        return -ENOENT;
    }
    t.key = tb_mix64(seed ^ 0x7472616e);
    t.cap = (uint64_t)cfg->prefetch * cfg->batch;
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.can_read, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t.can_consume, &ca);
    pthread_condattr_destroy(&ca);

    tb_sleep_until(t0_ns);
    for (; started < cfg->threads; started++) {
        int e = pthread_create(&th[started], NULL, reader, &t);
        if (e) {
            rc = -e;
            tier_err_set("training: cannot start reader thread: %s", strerror(e));
            break;
        }
    }

    uint64_t end = t0_ns + duration_ns;
    uint64_t batch_ns = cfg->compute_ns * cfg->batch;
    struct timespec dl = {.tv_sec = (time_t)(end / TIER_NS_PER_SEC),
                          .tv_nsec = (long)(end % TIER_NS_PER_SEC)};
    /* Time is accounted back to back from t0 to the end: every nanosecond of the accelerator is
     * either waiting for data or computing, so AU is not flattered by gaps between the two. */
    uint64_t w0 = t0_ns, debt = 0;
    while (rc == 0) {
        if (w0 >= end)
            break;
        pthread_mutex_lock(&t.mu);
        while (t.ready < cfg->batch) {
            if (pthread_cond_timedwait(&t.can_consume, &t.mu, &dl) == ETIMEDOUT)
                break;
        }
        int got = t.ready >= cfg->batch;
        if (got) {
            t.ready -= cfg->batch;
            pthread_cond_broadcast(&t.can_read);
        }
        pthread_mutex_unlock(&t.mu);
        uint64_t w1 = tier_now_mono_ns();
        if (w1 > end)
            w1 = end;
        res->wait_ns += w1 - w0;
        tb_series_add_interval(series, TB_TRAIN, w0, w1, 0);
        if (!got)
            break;
        tier_hist_record(res->lat, w1 - w0);
        res->ops += cfg->batch;
        res->batches++;
        struct tb_slot *sl = tb_series_slot(series, TB_TRAIN, w1);
        if (sl)
            atomic_fetch_add_explicit(&sl->ops, cfg->batch, memory_order_relaxed);
        /* The emulated accelerator computes. A sleep can end late on a busy host; the overshoot
         * is paid back from the next batches so compute time stays ops x compute_per_sample. */
        uint64_t want = batch_ns > debt ? batch_ns - debt : 0;
        debt = debt > batch_ns ? debt - batch_ns : 0;
        uint64_t c_end = w1 + want < end ? w1 + want : end;
        tb_sleep_until(c_end);
        uint64_t c1 = tier_now_mono_ns();
        if (c1 > end)
            c1 = end;
        if (c1 > c_end)
            debt += c1 - c_end;
        res->compute_ns += c1 - w1;
        tb_series_add_interval(series, TB_TRAIN, w1, c1, 1);
        w0 = c1;
    }

    pthread_mutex_lock(&t.mu);
    t.stop = 1;
    pthread_cond_broadcast(&t.can_read);
    pthread_mutex_unlock(&t.mu);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
    pthread_cond_destroy(&t.can_consume);
    pthread_cond_destroy(&t.can_read);
    pthread_mutex_destroy(&t.mu);

    res->ran = 1;
    res->elapsed_ns = duration_ns;
    res->bytes = atomic_load(&t.bytes);
    res->errors = atomic_load(&t.errors);
    res->first_error = atomic_load(&t.first_error);
    res->epochs = res->ops / ds->nitems;
    return rc;
}
