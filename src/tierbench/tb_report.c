/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_report.c - what a run produces: the terminal table, the JSON document (every figure plus the
 * exact configuration), the per-second CSV series, PNG charts drawn by gnuplot (latency CDF per
 * class, throughput over time, AU over time) and `tierbench compare`, which lines up several JSON
 * results as one table of ratios. Main thread only, after the run's threads are joined.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/strutil.h"

static const double PCTS[] = {50, 90, 99, 99.9};
static const char *const PCT_KEYS[] = {"p50", "p90", "p99", "p999"};

static char *fmt_ns(uint64_t ns, char *buf, size_t sz)
{
    if (ns < 1000)
        snprintf(buf, sz, "%lluns", (unsigned long long)ns);
    else if (ns < 1000000)
        snprintf(buf, sz, "%.1fus", (double)ns / 1e3);
    else if (ns < 1000000000ULL)
        snprintf(buf, sz, "%.2fms", (double)ns / 1e6);
    else
        snprintf(buf, sz, "%.2fs", (double)ns / 1e9);
    return buf;
}

static double ckpt_mbps(const struct tb_class_result *r)
{
    return r->stall_ns ? (double)r->bytes / 1e6 / ((double)r->stall_ns / 1e9) : 0.0;
}

/* Seconds of series worth reporting: the phase, plus any drain or overrunning checkpoint. */
static size_t used_seconds(const struct tb_phase *ph)
{
    size_t n = (size_t)((ph->duration_ns + 999999999ULL) / 1000000000ULL);
    for (int c = 0; c < TB_NCLASS; c++) {
        if (!ph->series.slots[c])
            continue;
        for (size_t i = n; i < ph->series.nsec; i++) {
            const struct tb_slot *s = &ph->series.slots[c][i];
            /* Not bytes: readers finishing an in-flight sample after the end add only those. */
            if (atomic_load(&s->ops) || atomic_load(&s->wait_ns))
                n = i + 1;
        }
    }
    return n < ph->series.nsec ? n : ph->series.nsec;
}

void tb_report_table(const struct tb_run *run, FILE *f)
{
    char b[6][32];
    const struct tb_config *c = run->cfg;
    fprintf(f, "\ntierbench %s  dir=%s  dataset=%zu files (%s, %zu samples, %s)  phase=%.1fs\n",
            TB_VERSION, c->dir, run->ds.nfiles, run->ds.layout[0] ? run->ds.layout : "-",
            run->ds.nitems, tier_fmt_bytes(run->ds.total_bytes, b[0], sizeof(b[0])),
            (double)c->run.duration_ns / 1e9);
    if (c->train.enabled) {
        fprintf(f, "\nTRAINING (%u readers, batch %u, compute %s/sample)\n", c->train.threads,
                c->train.batch, fmt_ns(c->train.compute_ns, b[0], sizeof(b[0])));
        fprintf(f, "  %-18s %10s %9s %7s %10s %10s %7s %7s\n", "phase", "samples/s", "MB/s", "AU%",
                "wait p50", "wait p99", "epochs", "errors");
        for (size_t i = 0; i < run->nphases; i++) {
            const struct tb_phase *ph = &run->phases[i];
            const struct tb_class_result *r = &ph->r[TB_TRAIN];
            if (!(ph->mask & (1u << TB_TRAIN)) || !r->ran)
                continue;
            fprintf(f, "  %-18s %10.1f %9.1f %7.1f %10s %10s %7.2f %7llu\n", ph->name,
                    tb_result_ops_per_s(r), tb_result_mbps(r), tb_result_au(r),
                    fmt_ns(tier_hist_percentile(r->lat, 50), b[1], sizeof(b[1])),
                    fmt_ns(tier_hist_percentile(r->lat, 99), b[2], sizeof(b[2])),
                    run->ds.nitems ? (double)r->ops / (double)run->ds.nitems : 0.0,
                    (unsigned long long)r->errors);
        }
    }
    if (c->infer.enabled) {
        fprintf(f, "\nINFERENCE (open loop %.0f req/s, %u workers, reads %s-%s)\n", c->infer.rate,
                c->infer.threads, tier_fmt_bytes(c->infer.min_bytes, b[0], sizeof(b[0])),
                tier_fmt_bytes(c->infer.max_bytes, b[1], sizeof(b[1])));
        fprintf(f, "  %-18s %8s %8s %9s %9s %9s %9s %9s %6s %6s %6s\n", "phase", "req/s", "MB/s",
                "p50", "p90", "p99", "p99.9", "max", "late", "drop", "errors");
        for (size_t i = 0; i < run->nphases; i++) {
            const struct tb_phase *ph = &run->phases[i];
            const struct tb_class_result *r = &ph->r[TB_INFER];
            if (!(ph->mask & (1u << TB_INFER)) || !r->ran)
                continue;
            fprintf(f, "  %-18s %8.1f %8.1f", ph->name,
                    (double)r->issued_in_window / ((double)r->elapsed_ns / 1e9), tb_result_mbps(r));
            for (int k = 0; k < 4; k++)
                fprintf(f, " %9s",
                        fmt_ns(tier_hist_percentile(r->lat, PCTS[k]), b[k], sizeof(b[k])));
            fprintf(f, " %9s %6llu %6llu %6llu\n",
                    fmt_ns(tier_hist_max(r->lat), b[4], sizeof(b[4])), (unsigned long long)r->late,
                    (unsigned long long)r->dropped, (unsigned long long)r->errors);
        }
    }
    if (c->ckpt.enabled) {
        fprintf(f, "\nCHECKPOINT (every %s, %s as %u files, fsync %s)\n",
                fmt_ns(c->ckpt.interval_ns, b[0], sizeof(b[0])),
                tier_fmt_bytes(c->ckpt.bytes, b[1], sizeof(b[1])), c->ckpt.files,
                c->ckpt.fsync ? "on" : "off");
        fprintf(f, "  %-18s %6s %10s %11s %11s %7s\n", "phase", "ckpts", "write MB/s", "stall mean",
                "stall max", "errors");
        for (size_t i = 0; i < run->nphases; i++) {
            const struct tb_phase *ph = &run->phases[i];
            const struct tb_class_result *r = &ph->r[TB_CKPT];
            if (!(ph->mask & (1u << TB_CKPT)) || !r->ran)
                continue;
            fprintf(
                f, "  %-18s %6llu %10.1f %11s %11s %7llu\n", ph->name, (unsigned long long)r->ops,
                ckpt_mbps(r), fmt_ns((uint64_t)tier_hist_mean(r->lat), b[0], sizeof(b[0])),
                fmt_ns(tier_hist_max(r->lat), b[1], sizeof(b[1])), (unsigned long long)r->errors);
        }
    }
    struct tb_interference in;
    tb_run_interference(run, &in);
    if (tb_run_together(run)) {
        fprintf(f, "\nINTERFERENCE (together / alone; 1.00 = no interference)\n");
        if (in.infer_p99 >= 0)
            fprintf(f, "  inference p99 latency  x%.2f\n", in.infer_p99);
        if (in.train_au >= 0)
            fprintf(f, "  training AU            x%.2f\n", in.train_au);
        if (in.ckpt_stall >= 0)
            fprintf(f, "  checkpoint stall       x%.2f\n", in.ckpt_stall);
    }
    for (size_t i = 0; i < run->nphases; i++)
        for (int k = 0; k < TB_NCLASS; k++)
            if (run->phases[i].r[k].errors)
                fprintf(f, "\nwarning: %s/%s had %llu I/O errors (first: %s)\n",
                        run->phases[i].name, tb_class_name(k),
                        (unsigned long long)run->phases[i].r[k].errors,
                        strerror(-run->phases[i].r[k].first_error));
    fprintf(f, "\n");
}

/* ---- JSON ---- */

static json_t *hist_json(const struct tier_hist *h)
{
    json_t *o = json_object();
    json_object_set_new(o, "count", json_integer((json_int_t)tier_hist_count(h)));
    json_object_set_new(o, "min", json_integer((json_int_t)tier_hist_min(h)));
    json_object_set_new(o, "mean", json_real(tier_hist_mean(h)));
    for (int k = 0; k < 4; k++)
        json_object_set_new(o, PCT_KEYS[k],
                            json_integer((json_int_t)tier_hist_percentile(h, PCTS[k])));
    json_object_set_new(o, "max", json_integer((json_int_t)tier_hist_max(h)));
    return o;
}

#define JI(o, k, v) json_object_set_new((o), (k), json_integer((json_int_t)(v)))
#define JR(o, k, v) json_object_set_new((o), (k), json_real((double)(v)))
#define JS(o, k, v) json_object_set_new((o), (k), json_string(v))
#define JB(o, k, v) json_object_set_new((o), (k), json_boolean(v))

static json_t *config_json(const struct tb_config *c)
{
    json_t *o = json_object(), *t = json_object(), *i = json_object(), *k = json_object(),
           *r = json_object();
    JS(o, "dir", c->dir);
    JS(o, "profile", c->profile);
    JB(t, "enabled", c->train.enabled);
    JI(t, "threads", c->train.threads);
    JI(t, "batch_size", c->train.batch);
    JI(t, "prefetch_batches", c->train.prefetch);
    JI(t, "compute_per_sample_ns", c->train.compute_ns);
    JI(t, "record_size", c->train.record_bytes);
    JB(i, "enabled", c->infer.enabled);
    JR(i, "rate", c->infer.rate);
    JI(i, "threads", c->infer.threads);
    JI(i, "read_min", c->infer.min_bytes);
    JI(i, "read_max", c->infer.max_bytes);
    JI(i, "max_files", c->infer.max_files);
    JI(i, "drain_timeout_ns", c->infer.drain_ns);
    JB(i, "direct", c->infer.direct);
    JB(k, "enabled", c->ckpt.enabled);
    JI(k, "interval_ns", c->ckpt.interval_ns);
    JI(k, "size", c->ckpt.bytes);
    JI(k, "files", c->ckpt.files);
    JI(k, "threads", c->ckpt.threads);
    JB(k, "fsync", c->ckpt.fsync);
    JS(k, "dir", c->ckpt.dir);
    JI(r, "duration_ns", c->run.duration_ns);
    JS(r, "phases",
       c->run.phases == TB_PHASES_ALL ? "all"
                                      : (c->run.phases == TB_PHASES_ALONE ? "alone" : "together"));
    JI(r, "seed", c->run.seed);
    JB(r, "drop_caches", c->run.drop_caches);
    json_object_set_new(o, "training", t);
    json_object_set_new(o, "inference", i);
    json_object_set_new(o, "checkpoint", k);
    json_object_set_new(o, "run", r);
    return o;
}

static json_t *class_json(const struct tb_run *run, const struct tb_phase *ph, enum tb_class c)
{
    const struct tb_class_result *r = &ph->r[c];
    json_t *o = json_object();
    JR(o, "elapsed_s", (double)r->elapsed_ns / 1e9);
    JI(o, "bytes", r->bytes);
    JI(o, "errors", r->errors);
    if (r->first_error)
        JS(o, "first_error", strerror(-r->first_error));
    if (c == TB_TRAIN) {
        JI(o, "samples", r->ops);
        JR(o, "samples_per_s", tb_result_ops_per_s(r));
        JR(o, "mb_per_s", tb_result_mbps(r));
        JR(o, "au_pct", tb_result_au(r));
        JR(o, "compute_s", (double)r->compute_ns / 1e9);
        JR(o, "wait_s", (double)r->wait_ns / 1e9);
        JI(o, "batches", r->batches);
        JR(o, "epochs", run->ds.nitems ? (double)r->ops / (double)run->ds.nitems : 0.0);
        json_object_set_new(o, "batch_wait_ns", hist_json(r->lat));
    } else if (c == TB_INFER) {
        JI(o, "scheduled", r->scheduled);
        JI(o, "completed", r->ops);
        JI(o, "issued_in_window", r->issued_in_window);
        JR(o, "target_rate", run->cfg->infer.rate);
        JR(o, "achieved_rate", (double)r->issued_in_window / ((double)r->elapsed_ns / 1e9));
        JI(o, "late", r->late);
        JI(o, "dropped", r->dropped);
        JR(o, "mb_per_s", tb_result_mbps(r));
        json_object_set_new(o, "latency_ns", hist_json(r->lat));
    } else {
        JI(o, "checkpoints", r->ops);
        JI(o, "files", r->files_written);
        JR(o, "mb_per_s", ckpt_mbps(r));
        JR(o, "stall_total_s", (double)r->stall_ns / 1e9);
        json_object_set_new(o, "stall_ns", hist_json(r->lat));
    }
    /* the per-second series of this class */
    size_t n = used_seconds(ph);
    json_t *ops = json_array(), *mb = json_array(), *au = json_array(), *lat = json_array();
    for (size_t s = 0; s < n; s++) {
        const struct tb_slot *sl = &ph->series.slots[c][s];
        uint64_t so = atomic_load(&sl->ops), b = atomic_load(&sl->busy_ns),
                 w = atomic_load(&sl->wait_ns), ls = atomic_load(&sl->lat_sum_ns);
        json_array_append_new(ops, json_integer((json_int_t)so));
        json_array_append_new(mb, json_real((double)atomic_load(&sl->bytes) / 1e6));
        if (c == TB_TRAIN)
            json_array_append_new(au, json_real(b + w ? 100.0 * (double)b / (double)(b + w) : 0));
        else
            json_array_append_new(lat, json_real(so ? (double)ls / (double)so / 1e3 : 0));
    }
    json_t *ser = json_object();
    json_object_set_new(ser, "ops", ops);
    json_object_set_new(ser, "mb", mb);
    if (c == TB_TRAIN) {
        json_object_set_new(ser, "au_pct", au);
        json_decref(lat);
    } else {
        json_object_set_new(ser, "lat_mean_us", lat);
        json_decref(au);
    }
    json_object_set_new(o, "per_second", ser);
    return o;
}

int tb_report_json(const struct tb_run *run, const char *path, char *err, size_t errsz)
{
    json_t *root = json_object(), *phases = json_array(), *ds = json_object(), *itf = json_object();
    JS(root, "tool", "tierbench");
    JS(root, "version", TB_VERSION);
    JI(root, "started_unix_ns", run->started_real_ns);
    json_object_set_new(root, "config", config_json(run->cfg));
    JI(ds, "files", run->ds.nfiles);
    JI(ds, "samples", run->ds.nitems);
    JI(ds, "bytes", run->ds.total_bytes);
    JS(ds, "layout", run->ds.layout);
    json_object_set_new(root, "dataset", ds);
    for (size_t i = 0; i < run->nphases; i++) {
        const struct tb_phase *ph = &run->phases[i];
        json_t *p = json_object();
        JS(p, "name", ph->name);
        JR(p, "duration_s", (double)ph->duration_ns / 1e9);
        for (int c = 0; c < TB_NCLASS; c++)
            if ((ph->mask & (1u << c)) && ph->r[c].ran)
                json_object_set_new(p, tb_class_name(c), class_json(run, ph, c));
        json_array_append_new(phases, p);
    }
    json_object_set_new(root, "phases", phases);
    struct tb_interference in;
    tb_run_interference(run, &in);
    if (in.infer_p99 >= 0)
        JR(itf, "inference_p99", in.infer_p99);
    if (in.train_au >= 0)
        JR(itf, "training_au", in.train_au);
    if (in.ckpt_stall >= 0)
        JR(itf, "checkpoint_stall", in.ckpt_stall);
    json_object_set_new(root, "interference", itf);
    int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(root);
    if (rc < 0) {
        snprintf(err, errsz, "%s: cannot write the JSON report", path);
        return -EIO;
    }
    return 0;
}

/* ---- CSV ---- */

int tb_report_csv(const struct tb_run *run, const char *path, char *err, size_t errsz)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno;
        snprintf(err, errsz, "%s: cannot write the CSV: %s", path, strerror(e));
        return -e;
    }
    fprintf(f, "phase,t_s,class,ops,bytes,mb_per_s,au_pct,lat_mean_us,lat_max_us,stall_ms\n");
    for (size_t i = 0; i < run->nphases; i++) {
        const struct tb_phase *ph = &run->phases[i];
        size_t n = used_seconds(ph);
        for (size_t s = 0; s < n; s++) {
            for (int c = 0; c < TB_NCLASS; c++) {
                if (!(ph->mask & (1u << c)))
                    continue;
                const struct tb_slot *sl = &ph->series.slots[c][s];
                uint64_t ops = atomic_load(&sl->ops), by = atomic_load(&sl->bytes);
                uint64_t b = atomic_load(&sl->busy_ns), w = atomic_load(&sl->wait_ns);
                uint64_t ls = atomic_load(&sl->lat_sum_ns), lm = atomic_load(&sl->lat_max_ns);
                double au = c == TB_TRAIN && b + w ? 100.0 * (double)b / (double)(b + w) : 0.0;
                fprintf(f, "%s,%zu,%s,%llu,%llu,%.3f,%.2f,%.1f,%.1f,%.1f\n", ph->name, s,
                        tb_class_name(c), (unsigned long long)ops, (unsigned long long)by,
                        (double)by / 1e6, au,
                        c == TB_INFER && ops ? (double)ls / (double)ops / 1e3 : 0.0,
                        c == TB_INFER ? (double)lm / 1e3 : 0.0,
                        c == TB_CKPT ? (double)w / 1e6 : 0.0);
            }
        }
    }
    if (fclose(f) != 0) {
        int e = errno;
        snprintf(err, errsz, "%s: cannot write the CSV: %s", path, strerror(e));
        return -e;
    }
    return 0;
}

/* ---- gnuplot charts ---- */

static int find_gnuplot(char *out, size_t outsz)
{
    const char *env = getenv("TIERBENCH_GNUPLOT");
    if (env && *env) {
        tier_strlcpy(out, env, outsz);
        return access(out, X_OK) == 0 ? 0 : -ENOENT;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        if (len > 0) {
            snprintf(out, outsz, "%.*s/gnuplot", (int)len, path);
            if (access(out, X_OK) == 0)
                return 0;
        }
        path += len + (colon ? 1 : 0);
    }
    return -ENOENT;
}

static FILE *open_in(const char *dir, const char *name, char *err, size_t errsz)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f)
        snprintf(err, errsz, "%s: cannot write: %s", p, strerror(errno));
    return f;
}

static int write_plot_data(const struct tb_run *run, const char *dir, FILE *gp, char *err,
                           size_t errsz)
{
    char name[96];
    int first = 1;
    /* Latency CDFs: one curve per class and phase. */
    fprintf(gp, "set output 'latency_cdf.png'\nset title 'Latency CDF (training: batch data "
                "wait; inference: request latency; checkpoint: writer stall)'\n"
                "set logscale x\nset xlabel 'latency (ms)'\nset ylabel 'fraction of requests "
                "<= x'\nset key bottom right\nset yrange [0:1.02]\nplot ");
    for (size_t i = 0; i < run->nphases; i++) {
        const struct tb_phase *ph = &run->phases[i];
        for (int c = 0; c < TB_NCLASS; c++) {
            const struct tier_hist *h = ph->r[c].lat;
            if (!(ph->mask & (1u << c)) || !h || !tier_hist_count(h))
                continue;
            snprintf(name, sizeof(name), "cdf-%s-%s.dat", ph->name, tb_class_name(c));
            FILE *f = open_in(dir, name, err, errsz);
            if (!f)
                return -EIO;
            uint64_t seen = 0;
            for (size_t b = 0; b < TIER_HIST_BUCKETS; b++) {
                if (!h->buckets[b])
                    continue;
                seen += h->buckets[b];
                uint64_t v = tier_hist_bucket_hi(b);
                if (v > h->max)
                    v = h->max;
                fprintf(f, "%.6f %.6f\n", (double)(v ? v : 1) / 1e6,
                        (double)seen / (double)h->count);
            }
            fclose(f);
            fprintf(gp, "%s'%s' using 1:2 with steps lw 2 title '%s (%s)'", first ? "" : ", ", name,
                    tb_class_name(c), ph->name);
            first = 0;
        }
    }
    if (first)
        fprintf(gp, "NaN notitle");
    fprintf(gp, "\nunset logscale x\nset autoscale y\n");

    /* Throughput and AU over time, phases back to back on one time axis, each phase marked. */
    size_t at = 0;
    for (size_t i = 0; i < run->nphases; i++) {
        fprintf(gp,
                "set arrow from %zu, graph 0 to %zu, graph 1 nohead dt 2 lc rgb 'gray40'\n"
                "set label '%s' at %.1f, graph 0.97 left font ',9' tc rgb 'gray30'\n",
                at, at, run->phases[i].name, (double)at + 0.1);
        at += used_seconds(&run->phases[i]);
    }
    fprintf(gp, "set xrange [0:%zu]\n", at);
    fprintf(gp, "set output 'throughput.png'\nset title 'Throughput per second (phases back to "
                "back)'\nset xlabel 'time (s)'\nset ylabel 'MB/s'\nset key outside right\n"
                "set offsets 0, 0, graph 0.08, 0\nplot ");
    first = 1;
    for (int c = 0; c < TB_NCLASS; c++) {
        snprintf(name, sizeof(name), "tput-%s.dat", tb_class_name(c));
        FILE *f = open_in(dir, name, err, errsz);
        if (!f)
            return -EIO;
        size_t off = 0;
        int any = 0;
        for (size_t i = 0; i < run->nphases; i++) {
            const struct tb_phase *ph = &run->phases[i];
            size_t n = used_seconds(ph);
            if (ph->mask & (1u << c)) {
                for (size_t s = 0; s < n; s++)
                    fprintf(f, "%zu %.3f\n", off + s,
                            (double)atomic_load(&ph->series.slots[c][s].bytes) / 1e6);
                fprintf(f, "\n");
                any = 1;
            }
            off += n;
        }
        fclose(f);
        if (any) {
            fprintf(gp, "%s'%s' using 1:2 with linespoints lw 2 title '%s'", first ? "" : ", ",
                    name, tb_class_name(c));
            first = 0;
        }
    }
    if (first)
        fprintf(gp, "NaN notitle");
    fprintf(gp, "\n");

    FILE *f = open_in(dir, "au.dat", err, errsz);
    if (!f)
        return -EIO;
    size_t off = 0;
    for (size_t i = 0; i < run->nphases; i++) {
        const struct tb_phase *ph = &run->phases[i];
        size_t n = used_seconds(ph);
        if (ph->mask & (1u << TB_TRAIN)) {
            size_t dn = (size_t)(ph->duration_ns / 1000000000ULL);
            for (size_t s = 0; s < n && s < (dn ? dn : 1); s++) {
                const struct tb_slot *sl = &ph->series.slots[TB_TRAIN][s];
                uint64_t b = atomic_load(&sl->busy_ns), w = atomic_load(&sl->wait_ns);
                fprintf(f, "%zu %.2f\n", off + s,
                        b + w ? 100.0 * (double)b / (double)(b + w) : 0.0);
            }
            fprintf(f, "\n");
        }
        off += n;
    }
    fclose(f);
    fprintf(gp, "set output 'au.png'\nset title 'Training accelerator utilisation (AU) per "
                "second'\nset ylabel 'AU %%'\nset yrange [0:105]\n");
    if (run->cfg->train.enabled)
        fprintf(gp, "plot 'au.dat' using 1:2 with linespoints lw 2 title 'training AU %%'\n");
    else
        fprintf(gp, "set label 99 'training not enabled' at graph 0.4,0.5\nplot NaN notitle\n");
    return 0;
}

int tb_report_plot(const struct tb_run *run, const char *dir, char *err, size_t errsz)
{
    char gnuplot[PATH_MAX];
    if (find_gnuplot(gnuplot, sizeof(gnuplot)) < 0) {
        snprintf(err, errsz, "gnuplot not found (install gnuplot-nox); skipping the charts");
        return -ENOENT;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        int e = errno;
        snprintf(err, errsz, "%s: cannot create the plot directory: %s", dir, strerror(e));
        return -e;
    }
    FILE *gp = open_in(dir, "tierbench.gp", err, errsz);
    if (!gp)
        return -EIO;
    fprintf(gp,
            "# generated by tierbench; run with: cd %s && gnuplot tierbench.gp\n"
            "set terminal pngcairo size 1000,560 noenhanced font ',10'\nset grid\n",
            dir);
    int rc = write_plot_data(run, dir, gp, err, errsz);
    if (fclose(gp) != 0 && rc == 0) {
        snprintf(err, errsz, "%s/tierbench.gp: cannot write", dir);
        rc = -EIO;
    }
    if (rc < 0)
        return rc;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errsz, "cannot start gnuplot: %s", strerror(errno));
        return -errno;
    }
    if (pid == 0) {
        if (chdir(dir) == 0)
            execl(gnuplot, "gnuplot", "tierbench.gp", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(err, errsz, "gnuplot failed on %s/tierbench.gp (status %d)", dir,
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return -EIO;
    }
    return 0;
}

/* ---- tierbench compare ---- */

struct metric {
    const char *label;
    const char *phase; /* NULL: the interference object */
    const char *cls;
    const char *key;
    const char *sub; /* key inside a nested histogram object, or NULL */
    double scale;
};

static const struct metric METRICS[] = {
    {"training samples/s (alone)", "training-alone", "training", "samples_per_s", NULL, 1},
    {"training MB/s (alone)", "training-alone", "training", "mb_per_s", NULL, 1},
    {"training AU % (alone)", "training-alone", "training", "au_pct", NULL, 1},
    {"training AU % (together)", "together", "training", "au_pct", NULL, 1},
    {"inference p50 ms (alone)", "inference-alone", "inference", "latency_ns", "p50", 1e-6},
    {"inference p99 ms (alone)", "inference-alone", "inference", "latency_ns", "p99", 1e-6},
    {"inference p99.9 ms (alone)", "inference-alone", "inference", "latency_ns", "p999", 1e-6},
    {"inference p99 ms (together)", "together", "inference", "latency_ns", "p99", 1e-6},
    {"checkpoint MB/s (alone)", "checkpoint-alone", "checkpoint", "mb_per_s", NULL, 1},
    {"checkpoint stall ms (alone)", "checkpoint-alone", "checkpoint", "stall_ns", "mean", 1e-6},
    {"checkpoint stall ms (together)", "together", "checkpoint", "stall_ns", "mean", 1e-6},
    {"interference: inference p99 x", NULL, NULL, "inference_p99", NULL, 1},
    {"interference: training AU x", NULL, NULL, "training_au", NULL, 1},
    {"interference: checkpoint stall x", NULL, NULL, "checkpoint_stall", NULL, 1},
};

static int metric_value(json_t *root, const struct metric *m, double *out)
{
    json_t *v = NULL;
    if (!m->phase) {
        v = json_object_get(json_object_get(root, "interference"), m->key);
    } else {
        json_t *phases = json_object_get(root, "phases"), *p;
        size_t i;
        json_array_foreach(phases, i, p)
        {
            const char *name = json_string_value(json_object_get(p, "name"));
            if (name && strcmp(name, m->phase) == 0)
                v = json_object_get(json_object_get(p, m->cls), m->key);
        }
        if (v && m->sub)
            v = json_object_get(v, m->sub);
    }
    if (!json_is_number(v))
        return -ENOENT;
    *out = json_number_value(v) * m->scale;
    return 0;
}

int tb_compare_main(int argc, char **argv)
{
    enum { MAXT = 16 };
    json_t *doc[MAXT] = {0};
    char names[MAXT][64];
    int n = 0, rc = TB_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (argv[i][0] == '-' || !eq || eq == argv[i] || (size_t)(eq - argv[i]) >= 64) {
            fprintf(stderr,
                    "tierbench compare: '%s' is not NAME=RESULT.json\n"
                    "usage: tierbench compare NAME=RESULT.json [NAME=RESULT.json...]\n",
                    argv[i]);
            rc = TB_EXIT_USAGE;
            goto out;
        }
        if (n == MAXT) {
            fprintf(stderr, "tierbench compare: at most %d results\n", MAXT);
            rc = TB_EXIT_USAGE;
            goto out;
        }
        memcpy(names[n], argv[i], (size_t)(eq - argv[i]));
        names[n][eq - argv[i]] = '\0';
        json_error_t je;
        doc[n] = json_load_file(eq + 1, 0, &je);
        if (!doc[n]) {
            fprintf(stderr, "tierbench compare: %s:%d: %s\n", eq + 1, je.line, je.text);
            rc = TB_EXIT_USAGE;
            goto out;
        }
        n++;
    }
    if (n == 0) {
        fprintf(stderr, "usage: tierbench compare NAME=RESULT.json [NAME=RESULT.json...]\n");
        rc = TB_EXIT_USAGE;
        goto out;
    }
    printf("%-34s", "metric");
    for (int t = 0; t < n; t++)
        printf(" %*s%s", t ? 22 : 12, names[t], t ? "" : "");
    printf("\n");
    for (size_t m = 0; m < sizeof(METRICS) / sizeof(METRICS[0]); m++) {
        double base = NAN, v;
        int any = 0;
        for (int t = 0; t < n; t++)
            if (metric_value(doc[t], &METRICS[m], &v) == 0)
                any = 1;
        if (!any)
            continue;
        printf("%-34s", METRICS[m].label);
        for (int t = 0; t < n; t++) {
            char cell[64];
            if (metric_value(doc[t], &METRICS[m], &v) < 0) {
                snprintf(cell, sizeof(cell), "-");
            } else if (t == 0) {
                base = v;
                snprintf(cell, sizeof(cell), "%.2f", v);
            } else if (isnan(base) || base == 0) {
                snprintf(cell, sizeof(cell), "%.2f", v);
            } else {
                snprintf(cell, sizeof(cell), "%.2f (x%.2f)", v, v / base);
            }
            printf(" %*s", t ? 22 : 12, cell);
        }
        printf("\n");
    }
    if (n > 1)
        printf("(xN = value / %s)\n", names[0]);
out:
    for (int t = 0; t < n; t++)
        json_decref(doc[t]);
    return rc;
}
