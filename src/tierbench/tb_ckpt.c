/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_ckpt.c - the checkpoint workload: every interval, write `size` bytes as `files` files (by
 * `threads` writers in parallel), fsync each file and the directory, like a training job saving
 * its model and optimizer state. The writer's blocking time (start of the first write to the last
 * fsync) is the stall a synchronous checkpoint would impose on training. Only the newest
 * checkpoint is kept while running, and all are removed at the end, with the directory if this
 * module created it. Runs in the calling thread plus short-lived writer threads per checkpoint.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/timeutil.h"

#define CKPT_CHUNK (1u << 20)

struct ckpt_job {
    const struct tb_ckpt_cfg *cfg;
    const char *dir; /* this checkpoint's directory */
    const char *data;
    struct tb_series *series;
    unsigned first, step; /* files first, first + step, ... */
    uint64_t bytes;
    int rc;
};

static uint64_t file_bytes(const struct tb_ckpt_cfg *cfg, unsigned j)
{
    uint64_t per = cfg->bytes / cfg->files;
    return j + 1 == cfg->files ? cfg->bytes - per * (cfg->files - 1) : per;
}

static int write_one(struct ckpt_job *job, unsigned j)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/part-%04u.bin", job->dir, j);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = 0;
    uint64_t want = file_bytes(job->cfg, j);
    for (uint64_t done = 0; done < want;) {
        size_t n = want - done < CKPT_CHUNK ? (size_t)(want - done) : CKPT_CHUNK;
        ssize_t w = write(fd, job->data, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        done += (uint64_t)w;
        job->bytes += (uint64_t)w;
        struct tb_slot *sl = tb_series_slot(job->series, TB_CKPT, tier_now_mono_ns());
        if (sl)
            atomic_fetch_add_explicit(&sl->bytes, (uint64_t)w, memory_order_relaxed);
    }
    if (rc == 0 && job->cfg->fsync && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    return rc;
}

static void *writer(void *arg)
{
    struct ckpt_job *job = arg;
    for (unsigned j = job->first; j < job->cfg->files && job->rc == 0; j += job->step)
        job->rc = write_one(job, j);
    return NULL;
}

static void remove_ckpt(const char *dir, unsigned files)
{
    char path[PATH_MAX + 32];
    for (unsigned j = 0; j < files; j++) {
        snprintf(path, sizeof(path), "%s/part-%04u.bin", dir, j);
        unlink(path);
    }
    rmdir(dir);
}

/* Write one checkpoint into dir; returns 0 or the first -errno. */
static int write_ckpt(const struct tb_ckpt_cfg *cfg, const char *dir, const char *data,
                      struct tb_series *series, uint64_t *bytes)
{
    unsigned nt = cfg->threads < cfg->files ? cfg->threads : cfg->files;
    struct ckpt_job *jobs = calloc(nt, sizeof(*jobs));
    pthread_t *th = calloc(nt, sizeof(*th));
    unsigned started = 0;
    int rc = 0;
    if (!jobs || !th) {
        rc = -ENOMEM;
        goto out;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        rc = -errno;
        goto out;
    }
    for (; started < nt; started++) {
        jobs[started] = (struct ckpt_job){
            .cfg = cfg, .dir = dir, .data = data, .series = series, .first = started, .step = nt};
        int e = pthread_create(&th[started], NULL, writer, &jobs[started]);
        if (e) {
            rc = -e;
            break;
        }
    }
    for (unsigned i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        *bytes += jobs[i].bytes;
        if (rc == 0)
            rc = jobs[i].rc;
    }
    if (rc == 0 && cfg->fsync) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || fsync(dfd) < 0)
            rc = -errno;
        if (dfd >= 0)
            close(dfd);
    }
out:
    free(jobs);
    free(th);
    return rc;
}

int tb_ckpt_run(const struct tb_ckpt_cfg *cfg, const char *root, const char *tag, uint64_t seed,
                uint64_t t0_ns, uint64_t duration_ns, struct tb_class_result *res,
                struct tb_series *series)
{
    char dir[PATH_MAX + 64], prev[PATH_MAX + 64] = "";
    int created = 0, rc = 0;
    char *data = malloc(CKPT_CHUNK);
    if (!data)
        return -ENOMEM;
    uint64_t rng = seed ^ 0x636b7074;
    for (size_t k = 0; k + 8 <= CKPT_CHUNK; k += 8) {
        uint64_t v = tb_rng_next(&rng);
        memcpy(data + k, &v, 8);
    }
    if (mkdir(root, 0755) == 0)
        created = 1;
    else if (errno != EEXIST) {
        rc = -errno;
        tier_err_set("checkpoint: cannot create %s: %s", root, strerror(errno));
        goto out;
    }

    uint64_t end = t0_ns + duration_ns;
    for (uint64_t k = 1;; k++) {
        uint64_t ts = t0_ns + k * cfg->interval_ns;
        if (ts >= end)
            break;
        tb_sleep_until(ts);
        snprintf(dir, sizeof(dir), "%s/ckpt-%s-%llu", root, tag, (unsigned long long)k);
        uint64_t start = tier_now_mono_ns(), bytes = 0;
        int w = write_ckpt(cfg, dir, data, series, &bytes);
        uint64_t stop = tier_now_mono_ns();
        res->bytes += bytes;
        if (w < 0) {
            res->errors++;
            if (!res->first_error)
                res->first_error = w;
        } else {
            res->ops++;
            res->files_written += cfg->files;
        }
        res->stall_ns += stop - start;
        tier_hist_record(res->lat, stop - start);
        tb_series_add_interval(series, TB_CKPT, start, stop, 0);
        struct tb_slot *sl = tb_series_slot(series, TB_CKPT, start);
        if (sl) {
            atomic_fetch_add_explicit(&sl->ops, 1, memory_order_relaxed);
            tb_series_add_lat(series, TB_CKPT, start, stop - start);
        }
        if (prev[0])
            remove_ckpt(prev, cfg->files);
        memcpy(prev, dir, sizeof(prev));
    }
    if (prev[0])
        remove_ckpt(prev, cfg->files);
    res->ran = 1;
    {
        uint64_t now = tier_now_mono_ns();
        res->elapsed_ns = now > end ? now - t0_ns : duration_ns;
    }
    if (created)
        rmdir(root);
out:
    free(data);
    return rc;
}
