/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_infer.c - the inference workload: small random reads arriving open-loop at a fixed rate.
 *
 * DESIGN (no coordinated omission): request i has an intended send time t0 + i / rate that does
 * not depend on how fast earlier requests finished. Worker threads take the next request number
 * with one atomic increment, sleep until its intended time if it is still ahead, and measure
 * latency from the intended time, so when the target is slow the time a request spent queued
 * behind busy workers is part of its latency. Every request intended inside the phase is either
 * completed or, if the drain timeout after the phase runs out, counted as dropped with the time it
 * had waited so far. Each worker owns a histogram; they are merged after the join.
 *
 * direct = true opens the files O_DIRECT, so that each request is one read of the file system
 * (no page cache, no readahead: on a FUSE mount one FUSE READ per request up to max_pages);
 * the buffer is then 4 KiB-aligned and each size rounded down to a multiple of 4 KiB.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/timeutil.h"

#define LATE_NS 1000000ULL /* a request that starts 1 ms after its intended time is late */
#define DIRECT_ALIGN 4096u /* O_DIRECT: buffer, offset and size multiples of this */

struct infer {
    const struct tb_infer_cfg *cfg;
    const struct tb_io *io;
    struct tb_series *series;
    int *fds;
    uint64_t *sizes;
    size_t nf;
    uint64_t seed, t0, end, drain_end;
    _Atomic uint64_t next;
    _Atomic int abort; /* set when starting the workers failed */
};

struct worker {
    struct infer *in;
    struct tier_hist *hist;
    uint64_t ops, bytes, errors, scheduled, issued, late, dropped;
    int first_error;
};

static uint64_t intended(const struct infer *in, uint64_t i)
{
    return in->t0 + (uint64_t)((double)i * 1e9 / in->cfg->rate);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct infer *in = w->in;
    void *buf = NULL;
    if (posix_memalign(&buf, DIRECT_ALIGN,
                       (in->cfg->max_bytes + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN))
        buf = NULL;
    if (!buf) {
        w->first_error = -ENOMEM;
        return NULL;
    }
    for (;;) {
        uint64_t i = atomic_fetch_add_explicit(&in->next, 1, memory_order_relaxed);
        uint64_t ti = intended(in, i);
        if (ti >= in->end || atomic_load_explicit(&in->abort, memory_order_relaxed))
            break;
        w->scheduled++;
        uint64_t now = tier_now_mono_ns();
        if (now > in->drain_end) {
            w->dropped++;
            tier_hist_record(w->hist, now - ti);
            continue;
        }
        if (ti > now)
            tb_sleep_until(ti);
        uint64_t ts = tier_now_mono_ns();
        if (ts < in->end)
            w->issued++;
        if (ts > ti + LATE_NS)
            w->late++;

        uint64_t rng = tb_mix64(in->seed ^ (i * 0x9e3779b97f4a7c15ULL));
        size_t f = (size_t)(tb_rng_next(&rng) % in->nf);
        uint64_t span = in->cfg->max_bytes - in->cfg->min_bytes + 1;
        uint64_t len = in->cfg->min_bytes + tb_rng_next(&rng) % span;
        if (len > in->sizes[f])
            len = in->sizes[f];
        if (in->cfg->direct) /* a short read at EOF is fine; an unaligned size is EINVAL */
            len = len < DIRECT_ALIGN ? DIRECT_ALIGN : len / DIRECT_ALIGN * DIRECT_ALIGN;
        uint64_t room = in->sizes[f] > len ? (in->sizes[f] - len) / 4096 : 0;
        uint64_t off = room ? (tb_rng_next(&rng) % (room + 1)) * 4096 : 0;

        ssize_t n = in->io->pread(in->io->arg, in->fds[f], buf, (size_t)len, off);
        uint64_t te = tier_now_mono_ns();
        if (n < 0) {
            w->errors++;
            if (!w->first_error)
                w->first_error = (int)n;
            continue;
        }
        w->ops++;
        w->bytes += (uint64_t)n;
        tier_hist_record(w->hist, te - ti);
        struct tb_slot *sl = tb_series_slot(in->series, TB_INFER, ti);
        if (sl) {
            atomic_fetch_add_explicit(&sl->ops, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&sl->bytes, (uint64_t)n, memory_order_relaxed);
            tb_series_add_lat(in->series, TB_INFER, ti, te - ti);
        }
    }
    free(buf);
    return NULL;
}

int tb_infer_run(const struct tb_infer_cfg *cfg, const struct tb_dataset *ds,
                 const struct tb_io *io, uint64_t seed, uint64_t t0_ns, uint64_t duration_ns,
                 struct tb_class_result *res, struct tb_series *series)
{
    struct infer in = {.cfg = cfg, .io = io ? io : &tb_io_posix, .series = series};
    struct worker *ws = NULL;
    pthread_t *th = NULL;
    unsigned started = 0;
    int rc = 0;

    size_t nf = ds->nfiles < cfg->max_files ? ds->nfiles : cfg->max_files;
    in.fds = malloc(nf * sizeof(int));
    in.sizes = malloc(nf * sizeof(uint64_t));
    ws = calloc(cfg->threads, sizeof(*ws));
    th = calloc(cfg->threads, sizeof(*th));
    if (!in.fds || !in.sizes || !ws || !th) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < nf; i++) {
        in.fds[in.nf] = open(ds->paths[i], O_RDONLY | O_CLOEXEC | (cfg->direct ? O_DIRECT : 0));
        if (in.fds[in.nf] < 0) {
            rc = -errno;
            tier_err_set("inference: cannot open %s%s: %s%s", ds->paths[i],
                         cfg->direct ? " with O_DIRECT" : "", strerror(-rc),
                         cfg->direct && rc == -EINVAL
                             ? " (the file system has no O_DIRECT: drop [inference] direct)"
                             : "");
            goto out;
        }
        in.sizes[in.nf++] = ds->sizes[i];
    }
    if (in.nf == 0) {
        rc = -ENOENT;
        tier_err_set("inference: the dataset has no files");
        goto out;
    }
    in.seed = tb_mix64(seed ^ 0x696e6665);
    in.t0 = t0_ns;
    in.end = t0_ns + duration_ns;
    in.drain_end = in.end + cfg->drain_ns;
    for (; started < cfg->threads; started++) {
        ws[started].in = &in;
        rc = tier_hist_new(&ws[started].hist);
        if (rc < 0)
            break;
        int e = pthread_create(&th[started], NULL, worker_main, &ws[started]);
        if (e) {
            tier_hist_free(ws[started].hist);
            rc = -e;
            tier_err_set("inference: cannot start worker thread: %s", strerror(e));
            break;
        }
    }
    if (rc < 0)
        atomic_store(&in.abort, 1); /* make the started workers stop at once */
    for (unsigned i = 0; i < started; i++) {
        struct worker *w = &ws[i];
        pthread_join(th[i], NULL);
        tier_hist_merge(res->lat, w->hist);
        tier_hist_free(w->hist);
        res->ops += w->ops;
        res->bytes += w->bytes;
        res->errors += w->errors;
        res->scheduled += w->scheduled;
        res->issued_in_window += w->issued;
        res->late += w->late;
        res->dropped += w->dropped;
        if (!res->first_error)
            res->first_error = w->first_error;
    }
    res->ran = 1;
    res->elapsed_ns = duration_ns;
out:
    for (size_t i = 0; i < in.nf; i++)
        close(in.fds[i]);
    free(in.fds);
    free(in.sizes);
    free(ws);
    free(th);
    return rc;
}
