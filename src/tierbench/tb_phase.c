/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_phase.c - a run: each enabled class alone, then all of them together, with the same
 * duration, each engine in its own thread from one common start instant. Also the live progress
 * line (only when asked for, normally when stdout is a TTY) and the interference ratios.
 * Called from the main thread; the engine threads and the progress thread are joined before a
 * phase's results are read.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"

struct engine {
    enum tb_class cls;
    const struct tb_config *cfg;
    const struct tb_run *run;
    const struct tb_io *io;
    struct tb_phase *ph;
    int rc;
    char msg[256];
};

static void *engine_main(void *arg)
{
    struct engine *e = arg;
    struct tb_phase *ph = e->ph;
    const struct tb_config *c = e->cfg;
    uint64_t seed = c->run.seed;
    tier_err_clear();
    switch (e->cls) {
    case TB_TRAIN:
        e->rc = tb_train_run(&c->train, &e->run->ds, e->io, seed, ph->series.t0_ns, ph->duration_ns,
                             &ph->r[TB_TRAIN], &ph->series);
        break;
    case TB_INFER:
        e->rc = tb_infer_run(&c->infer, &e->run->ds, e->io, seed, ph->series.t0_ns, ph->duration_ns,
                             &ph->r[TB_INFER], &ph->series);
        break;
    case TB_CKPT:
        e->rc = tb_ckpt_run(&c->ckpt, e->run->ckpt_dir, ph->name, seed, ph->series.t0_ns,
                            ph->duration_ns, &ph->r[TB_CKPT], &ph->series);
        break;
    default:
        e->rc = -EINVAL;
    }
    tier_strlcpy(e->msg, tier_err_msg(), sizeof(e->msg));
    return NULL;
}

struct progress {
    struct tb_phase *ph;
    _Atomic int done;
};

static void *progress_main(void *arg)
{
    struct progress *p = arg;
    struct tb_phase *ph = p->ph;
    uint64_t tick = ph->series.t0_ns;
    while (!atomic_load(&p->done)) {
        tick += 250000000ULL;
        tb_sleep_until(tick);
        uint64_t now = tier_now_mono_ns();
        double el = now > ph->series.t0_ns ? (double)(now - ph->series.t0_ns) / 1e9 : 0;
        /* the last complete second */
        uint64_t prev = now > ph->series.t0_ns + TIER_NS_PER_SEC ? now - TIER_NS_PER_SEC : 0;
        char line[256];
        int n = snprintf(line, sizeof(line), "\r%-18s %5.1fs/%.0fs", ph->name, el,
                         (double)ph->duration_ns / 1e9);
        for (int c = 0; c < TB_NCLASS && n > 0 && (size_t)n < sizeof(line); c++) {
            if (!(ph->mask & (1u << c)))
                continue;
            struct tb_slot *s = prev ? tb_series_slot(&ph->series, (enum tb_class)c, prev) : NULL;
            uint64_t ops = s ? atomic_load(&s->ops) : 0, by = s ? atomic_load(&s->bytes) : 0;
            if (c == TB_TRAIN) {
                uint64_t b = s ? atomic_load(&s->busy_ns) : 0, w = s ? atomic_load(&s->wait_ns) : 0;
                n += snprintf(line + n, sizeof(line) - (size_t)n, " | train %llu smp/s AU %.0f%%",
                              (unsigned long long)ops,
                              b + w ? 100.0 * (double)b / (double)(b + w) : 0.0);
            } else if (c == TB_INFER) {
                uint64_t ls = s ? atomic_load(&s->lat_sum_ns) : 0;
                n += snprintf(line + n, sizeof(line) - (size_t)n, " | infer %llu req/s %.2fms",
                              (unsigned long long)ops, ops ? (double)ls / (double)ops / 1e6 : 0.0);
            } else {
                n += snprintf(line + n, sizeof(line) - (size_t)n, " | ckpt %.0f MB/s",
                              (double)by / 1e6);
            }
        }
        fputs(line, stdout);
        fputs("   ", stdout);
        fflush(stdout);
    }
    fputs("\n", stdout);
    fflush(stdout);
    return NULL;
}

static void drop_caches(void)
{
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "3\n", 2) != 2)
        fprintf(stderr,
                "tierbench: warning: cannot drop the page cache (%s); "
                "results include cached data\n",
                strerror(errno));
    if (fd >= 0)
        close(fd);
}

static int run_phase(struct tb_run *run, struct tb_phase *ph, const struct tb_io *io, char *err,
                     size_t errsz)
{
    const struct tb_config *c = run->cfg;
    struct engine eng[TB_NCLASS];
    pthread_t th[TB_NCLASS];
    int started[TB_NCLASS] = {0};
    struct progress prog = {.ph = ph};
    pthread_t pth;
    int have_prog = 0, rc = 0;

    for (int k = 0; k < TB_NCLASS; k++) {
        rc = tb_result_init(&ph->r[k]);
        if (rc < 0)
            return rc;
    }
    if (c->run.drop_caches)
        drop_caches();
    uint64_t slack_s = c->infer.drain_ns / TIER_NS_PER_SEC + 30;
    rc = tb_series_init(&ph->series, tier_now_mono_ns() + 20 * TIER_NS_PER_MS,
                        (size_t)(ph->duration_ns / TIER_NS_PER_SEC + slack_s));
    if (rc < 0)
        return rc;
    for (int k = 0; k < TB_NCLASS; k++) {
        if (!(ph->mask & (1u << k)))
            continue;
        eng[k] = (struct engine){.cls = (enum tb_class)k, .cfg = c, .run = run, .io = io, .ph = ph};
        int e = pthread_create(&th[k], NULL, engine_main, &eng[k]);
        if (e) {
            snprintf(err, errsz, "cannot start the %s thread: %s", tb_class_name(k), strerror(e));
            rc = -e;
            break;
        }
        started[k] = 1;
    }
    if (c->progress == 1 && pthread_create(&pth, NULL, progress_main, &prog) == 0)
        have_prog = 1;
    for (int k = 0; k < TB_NCLASS; k++) {
        if (!started[k])
            continue;
        pthread_join(th[k], NULL);
        if (eng[k].rc < 0 && rc == 0) {
            rc = eng[k].rc;
            snprintf(err, errsz, "%s: %s", ph->name,
                     eng[k].msg[0] ? eng[k].msg : strerror(-eng[k].rc));
        }
    }
    if (have_prog) {
        atomic_store(&prog.done, 1);
        pthread_join(pth, NULL);
    }
    return rc;
}

int tb_run_execute(struct tb_run *run, const struct tb_config *cfg, const struct tb_io *io,
                   char *err, size_t errsz)
{
    int rc;
    memset(run, 0, sizeof(*run));
    run->cfg = cfg;
    run->started_real_ns = tier_now_real_ns();
    if (cfg->ckpt.dir[0])
        tier_strlcpy(run->ckpt_dir, cfg->ckpt.dir, sizeof(run->ckpt_dir));
    else
        snprintf(run->ckpt_dir, sizeof(run->ckpt_dir), "%s/%s", cfg->dir, TB_CKPT_DEFAULT_SUBDIR);
    if (cfg->train.enabled || cfg->infer.enabled) {
        rc =
            tb_dataset_load(&run->ds, cfg->dir, run->ckpt_dir, cfg->train.record_bytes, err, errsz);
        if (rc < 0)
            return rc;
    }
    unsigned enabled = (cfg->train.enabled ? 1u << TB_TRAIN : 0) |
                       (cfg->infer.enabled ? 1u << TB_INFER : 0) |
                       (cfg->ckpt.enabled ? 1u << TB_CKPT : 0);
    int nen = __builtin_popcount(enabled);
    run->phases = calloc(TB_NCLASS + 1, sizeof(*run->phases));
    if (!run->phases)
        return -ENOMEM;
    if (cfg->run.phases & TB_PHASES_ALONE) {
        for (int k = 0; k < TB_NCLASS; k++) {
            if (!(enabled & (1u << k)))
                continue;
            struct tb_phase *ph = &run->phases[run->nphases++];
            snprintf(ph->name, sizeof(ph->name), "%s-alone", tb_class_name(k));
            ph->mask = 1u << k;
            ph->duration_ns = cfg->run.duration_ns;
        }
    }
    if ((cfg->run.phases & TB_PHASES_TOGETHER) &&
        (nen > 1 || cfg->run.phases == TB_PHASES_TOGETHER)) {
        struct tb_phase *ph = &run->phases[run->nphases++];
        tier_strlcpy(ph->name, "together", sizeof(ph->name));
        ph->mask = enabled;
        ph->duration_ns = cfg->run.duration_ns;
    }
    for (size_t i = 0; i < run->nphases; i++) {
        rc = run_phase(run, &run->phases[i], io, err, errsz);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void tb_run_fini(struct tb_run *run)
{
    for (size_t i = 0; run->phases && i < TB_NCLASS + 1; i++) {
        for (int k = 0; k < TB_NCLASS; k++)
            tb_result_fini(&run->phases[i].r[k]);
        tb_series_fini(&run->phases[i].series);
    }
    free(run->phases);
    tb_dataset_fini(&run->ds);
    memset(run, 0, sizeof(*run));
}

const struct tb_phase *tb_run_alone(const struct tb_run *run, enum tb_class c)
{
    for (size_t i = 0; i < run->nphases; i++)
        if (run->phases[i].mask == (1u << c) && strstr(run->phases[i].name, "-alone"))
            return &run->phases[i];
    return NULL;
}

const struct tb_phase *tb_run_together(const struct tb_run *run)
{
    for (size_t i = 0; i < run->nphases; i++)
        if (strcmp(run->phases[i].name, "together") == 0)
            return &run->phases[i];
    return NULL;
}

static double ratio(double together, double alone)
{
    return alone > 0 && together >= 0 ? together / alone : -1.0;
}

void tb_run_interference(const struct tb_run *run, struct tb_interference *out)
{
    const struct tb_phase *tog = tb_run_together(run);
    const struct tb_phase *a;
    out->infer_p99 = out->train_au = out->ckpt_stall = -1.0;
    if (!tog)
        return;
    if ((a = tb_run_alone(run, TB_INFER)) && (tog->mask & (1u << TB_INFER)))
        out->infer_p99 = ratio((double)tier_hist_percentile(tog->r[TB_INFER].lat, 99),
                               (double)tier_hist_percentile(a->r[TB_INFER].lat, 99));
    if ((a = tb_run_alone(run, TB_TRAIN)) && (tog->mask & (1u << TB_TRAIN)))
        out->train_au = ratio(tb_result_au(&tog->r[TB_TRAIN]), tb_result_au(&a->r[TB_TRAIN]));
    if ((a = tb_run_alone(run, TB_CKPT)) && (tog->mask & (1u << TB_CKPT)))
        out->ckpt_stall =
            ratio(tier_hist_mean(tog->r[TB_CKPT].lat), tier_hist_mean(a->r[TB_CKPT].lat));
}
