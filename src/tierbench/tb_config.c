/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_config.c - tierbench run configuration: defaults, the INI profile (sections [training]
 * [inference] [checkpoint] [run], parsed with inih) and command-line flags, which override the
 * profile because they are applied after it. Every key goes through tb_config_set(), so a value
 * is validated the same way wherever it comes from. Single-threaded (main thread before a run).
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/strutil.h"

void tb_config_defaults(struct tb_config *c)
{
    memset(c, 0, sizeof(*c));
    c->train = (struct tb_train_cfg){.enabled = 1,
                                     .threads = 4,
                                     .batch = 16,
                                     .prefetch = 2,
                                     .compute_ns = 1000000, /* 1 ms per sample */
                                     .record_bytes = 0};
    c->infer = (struct tb_infer_cfg){.enabled = 1,
                                     .rate = 200,
                                     .threads = 16,
                                     .min_bytes = 4096,
                                     .max_bytes = 256 * 1024,
                                     .max_files = 256,
                                     .drain_ns = 10ULL * 1000000000ULL};
    c->ckpt = (struct tb_ckpt_cfg){.enabled = 1,
                                   .interval_ns = 5ULL * 1000000000ULL,
                                   .bytes = 256ULL << 20,
                                   .files = 4,
                                   .threads = 4,
                                   .fsync = 1};
    c->run = (struct tb_run_cfg){.duration_ns = 10ULL * 1000000000ULL,
                                 .phases = TB_PHASES_ALL,
                                 .seed = 42,
                                 .drop_caches = 0};
    c->progress = -1;
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errsz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static const char *const KEYS_TRAIN = "enabled, threads, batch_size, prefetch_batches, "
                                      "compute_per_sample, record_size";
static const char *const KEYS_INFER = "enabled, rate, threads, read_size, max_files, "
                                      "drain_timeout, direct";
static const char *const KEYS_CKPT = "enabled, interval, size, files, threads, fsync, dir";
static const char *const KEYS_RUN = "duration, phases, seed, drop_caches";

static int set_bool(const char *sec, const char *key, const char *v, int *out, char *err,
                    size_t errsz)
{
    if (tier_parse_bool(v, out) < 0)
        return fail(err, errsz, "[%s] %s: '%s' is not a boolean (use true or false)", sec, key, v);
    return 0;
}

static int set_uint(const char *sec, const char *key, const char *v, unsigned min, unsigned max,
                    unsigned *out, char *err, size_t errsz)
{
    if (tb_parse_uint(v, min, max, out) < 0)
        return fail(err, errsz, "[%s] %s: '%s' is not a whole number in %u..%u", sec, key, v, min,
                    max);
    return 0;
}

static int set_dur(const char *sec, const char *key, const char *v, uint64_t *out, char *err,
                   size_t errsz)
{
    if (tb_parse_duration_ns(v, out) < 0)
        return fail(err, errsz,
                    "[%s] %s: '%s' is not a duration (a number with a unit: ns, us, ms, s, m, h)",
                    sec, key, v);
    return 0;
}

static int set_size(const char *sec, const char *key, const char *v, uint64_t *out, char *err,
                    size_t errsz)
{
    if (tier_parse_size(v, out) < 0)
        return fail(err, errsz, "[%s] %s: '%s' is not a size (e.g. 4096, 64K, 8MiB, 1G)", sec, key,
                    v);
    return 0;
}

static int set_train(struct tb_train_cfg *t, const char *key, const char *v, char *err,
                     size_t errsz)
{
    const char *s = "training";
    if (strcmp(key, "enabled") == 0)
        return set_bool(s, key, v, &t->enabled, err, errsz);
    if (strcmp(key, "threads") == 0)
        return set_uint(s, key, v, 1, 1024, &t->threads, err, errsz);
    if (strcmp(key, "batch_size") == 0)
        return set_uint(s, key, v, 1, 1u << 20, &t->batch, err, errsz);
    if (strcmp(key, "prefetch_batches") == 0)
        return set_uint(s, key, v, 1, 1024, &t->prefetch, err, errsz);
    if (strcmp(key, "compute_per_sample") == 0)
        return set_dur(s, key, v, &t->compute_ns, err, errsz);
    if (strcmp(key, "record_size") == 0)
        return set_size(s, key, v, &t->record_bytes, err, errsz);
    return fail(err, errsz, "unknown key '%s' in [training] (known: %s)", key, KEYS_TRAIN);
}

static int set_infer(struct tb_infer_cfg *t, const char *key, const char *v, char *err,
                     size_t errsz)
{
    const char *s = "inference";
    if (strcmp(key, "enabled") == 0)
        return set_bool(s, key, v, &t->enabled, err, errsz);
    if (strcmp(key, "rate") == 0) {
        double r;
        if (tb_parse_double(v, &r) < 0 || r <= 0 || r > 1e7)
            return fail(err, errsz,
                        "[inference] rate: '%s' is not a request rate (requests per second, "
                        "greater than 0)",
                        v);
        t->rate = r;
        return 0;
    }
    if (strcmp(key, "threads") == 0)
        return set_uint(s, key, v, 1, 4096, &t->threads, err, errsz);
    if (strcmp(key, "read_size") == 0) {
        if (tb_parse_range(v, &t->min_bytes, &t->max_bytes) < 0)
            return fail(err, errsz,
                        "[inference] read_size: '%s' is not a size range MIN-MAX with "
                        "0 < MIN <= MAX (e.g. 4K-256K)",
                        v);
        return 0;
    }
    if (strcmp(key, "max_files") == 0)
        return set_uint(s, key, v, 1, 65536, &t->max_files, err, errsz);
    if (strcmp(key, "drain_timeout") == 0)
        return set_dur(s, key, v, &t->drain_ns, err, errsz);
    if (strcmp(key, "direct") == 0)
        return set_bool(s, key, v, &t->direct, err, errsz);
    return fail(err, errsz, "unknown key '%s' in [inference] (known: %s)", key, KEYS_INFER);
}

static int set_ckpt(struct tb_ckpt_cfg *t, const char *key, const char *v, char *err, size_t errsz)
{
    const char *s = "checkpoint";
    if (strcmp(key, "enabled") == 0)
        return set_bool(s, key, v, &t->enabled, err, errsz);
    if (strcmp(key, "interval") == 0)
        return set_dur(s, key, v, &t->interval_ns, err, errsz);
    if (strcmp(key, "size") == 0)
        return set_size(s, key, v, &t->bytes, err, errsz);
    if (strcmp(key, "files") == 0)
        return set_uint(s, key, v, 1, 4096, &t->files, err, errsz);
    if (strcmp(key, "threads") == 0)
        return set_uint(s, key, v, 1, 256, &t->threads, err, errsz);
    if (strcmp(key, "fsync") == 0)
        return set_bool(s, key, v, &t->fsync, err, errsz);
    if (strcmp(key, "dir") == 0) {
        if (!*v || tier_strlcpy(t->dir, v, sizeof(t->dir)) >= sizeof(t->dir))
            return fail(err, errsz, "[checkpoint] dir: empty or too long");
        return 0;
    }
    return fail(err, errsz, "unknown key '%s' in [checkpoint] (known: %s)", key, KEYS_CKPT);
}

static int set_run(struct tb_run_cfg *t, const char *key, const char *v, char *err, size_t errsz)
{
    if (strcmp(key, "duration") == 0)
        return set_dur("run", key, v, &t->duration_ns, err, errsz);
    if (strcmp(key, "phases") == 0) {
        if (strcmp(v, "all") == 0)
            t->phases = TB_PHASES_ALL;
        else if (strcmp(v, "alone") == 0)
            t->phases = TB_PHASES_ALONE;
        else if (strcmp(v, "together") == 0)
            t->phases = TB_PHASES_TOGETHER;
        else
            return fail(err, errsz, "[run] phases: '%s' is not one of all, alone, together", v);
        return 0;
    }
    if (strcmp(key, "seed") == 0) {
        if (tier_parse_u64(v, &t->seed) < 0)
            return fail(err, errsz, "[run] seed: '%s' is not a whole number", v);
        return 0;
    }
    if (strcmp(key, "drop_caches") == 0)
        return set_bool("run", key, v, &t->drop_caches, err, errsz);
    return fail(err, errsz, "unknown key '%s' in [run] (known: %s)", key, KEYS_RUN);
}

int tb_config_set(struct tb_config *c, const char *section, const char *key, const char *value,
                  char *err, size_t errsz)
{
    if (strcmp(section, "training") == 0)
        return set_train(&c->train, key, value, err, errsz);
    if (strcmp(section, "inference") == 0)
        return set_infer(&c->infer, key, value, err, errsz);
    if (strcmp(section, "checkpoint") == 0)
        return set_ckpt(&c->ckpt, key, value, err, errsz);
    if (strcmp(section, "run") == 0)
        return set_run(&c->run, key, value, err, errsz);
    if (!*section)
        return fail(err, errsz,
                    "key '%s' is outside any section (start with [run], [training], "
                    "[inference] or [checkpoint])",
                    key);
    return fail(err, errsz,
                "unknown section [%s] (known: [run], [training], [inference], [checkpoint])",
                section);
}

struct ini_ctx {
    struct tb_config *c;
    char msg[512];
    int failed;
};

static int profile_handler(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *ctx = user;
    if (ctx->failed)
        return 1; /* report only the first error */
    if (tb_config_set(ctx->c, section, name, value, ctx->msg, sizeof(ctx->msg)) < 0) {
        ctx->failed = 1;
        return 0;
    }
    return 1;
}

int tb_config_load_profile(struct tb_config *c, const char *path, char *err, size_t errsz)
{
    struct ini_ctx ctx = {.c = c};
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errsz, "%s: cannot open profile: %s", path, strerror(e));
        return -e;
    }
    int line = ini_parse_file(f, profile_handler, &ctx);
    fclose(f);
    if (line == 0)
        return 0;
    if (ctx.failed)
        snprintf(err, errsz, "%s:%d: %s", path, line, ctx.msg);
    else
        snprintf(err, errsz, "%s:%d: syntax error (expected [section] or key = value)", path, line);
    return -EINVAL;
}

/* Flags for the common knobs; each maps onto a profile key so both paths validate alike. */
struct flag {
    const char *name;
    const char *section;
    const char *key;
    const char *fixed; /* value for flags without an argument */
};

static const struct flag FLAGS[] = {
    {"--duration", "run", "duration", NULL},
    {"--phases", "run", "phases", NULL},
    {"--seed", "run", "seed", NULL},
    {"--drop-caches", "run", "drop_caches", "true"},
    {"--train-threads", "training", "threads", NULL},
    {"--batch", "training", "batch_size", NULL},
    {"--compute", "training", "compute_per_sample", NULL},
    {"--record-size", "training", "record_size", NULL},
    {"--no-training", "training", "enabled", "false"},
    {"--rate", "inference", "rate", NULL},
    {"--infer-threads", "inference", "threads", NULL},
    {"--read-size", "inference", "read_size", NULL},
    {"--no-inference", "inference", "enabled", "false"},
    {"--direct", "inference", "direct", "true"},
    {"--ckpt-interval", "checkpoint", "interval", NULL},
    {"--ckpt-size", "checkpoint", "size", NULL},
    {"--ckpt-files", "checkpoint", "files", NULL},
    {"--ckpt-dir", "checkpoint", "dir", NULL},
    {"--no-checkpoint", "checkpoint", "enabled", "false"},
};

static int set_path(char *dst, size_t dstsz, const char *flag, const char *v, char *err,
                    size_t errsz)
{
    if (!*v || tier_strlcpy(dst, v, dstsz) >= dstsz)
        return fail(err, errsz, "%s: empty or too long path", flag);
    return 0;
}

int tb_config_from_args(struct tb_config *c, int argc, char **argv, char *err, size_t errsz)
{
    int have_dir = 0;
    /* Pass 1: DIR, --profile, output flags, and a syntax check of every flag. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (have_dir)
                return fail(err, errsz, "unexpected argument '%s' (only one DIR)", a);
            if (set_path(c->dir, sizeof(c->dir), "DIR", a, err, errsz) < 0)
                return -EINVAL;
            have_dir = 1;
            continue;
        }
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        char *dst = NULL;
        size_t dstsz = 0;
        if (strcmp(a, "--profile") == 0) {
            dst = c->profile;
            dstsz = sizeof(c->profile);
        } else if (strcmp(a, "--json") == 0) {
            dst = c->json_path;
            dstsz = sizeof(c->json_path);
        } else if (strcmp(a, "--csv") == 0) {
            dst = c->csv_path;
            dstsz = sizeof(c->csv_path);
        } else if (strcmp(a, "--plot") == 0) {
            dst = c->plot_dir;
            dstsz = sizeof(c->plot_dir);
        } else if (strcmp(a, "--progress") == 0) {
            c->progress = 1;
            continue;
        } else if (strcmp(a, "--no-progress") == 0) {
            c->progress = 0;
            continue;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            c->quiet = 1;
            continue;
        }
        if (dst) {
            if (!next)
                return fail(err, errsz, "%s needs a value", a);
            if (set_path(dst, dstsz, a, next, err, errsz) < 0)
                return -EINVAL;
            i++;
            continue;
        }
        const struct flag *f = NULL;
        for (size_t k = 0; k < sizeof(FLAGS) / sizeof(FLAGS[0]); k++)
            if (strcmp(a, FLAGS[k].name) == 0)
                f = &FLAGS[k];
        if (!f)
            return fail(err, errsz, "unknown option '%s' (see tierbench --help)", a);
        if (!f->fixed) {
            if (!next)
                return fail(err, errsz, "%s needs a value", a);
            i++;
        }
    }
    if (!have_dir)
        return fail(err, errsz, "missing DIR (usage: tierbench run DIR [--profile FILE] ...)");
    if (c->profile[0]) {
        int rc = tb_config_load_profile(c, c->profile, err, errsz);
        if (rc < 0)
            return -EINVAL;
    }
    /* Pass 2: knob flags, after the profile so they override it. */
    for (int i = 1; i < argc; i++) {
        for (size_t k = 0; k < sizeof(FLAGS) / sizeof(FLAGS[0]); k++) {
            if (strcmp(argv[i], FLAGS[k].name) != 0)
                continue;
            const char *v = FLAGS[k].fixed ? FLAGS[k].fixed : argv[++i];
            char sub[400];
            if (tb_config_set(c, FLAGS[k].section, FLAGS[k].key, v, sub, sizeof(sub)) < 0)
                return fail(err, errsz, "%s: %s", FLAGS[k].name, sub);
            break;
        }
        if (strcmp(argv[i], "--profile") == 0 || strcmp(argv[i], "--json") == 0 ||
            strcmp(argv[i], "--csv") == 0 || strcmp(argv[i], "--plot") == 0)
            i++;
    }
    return 0;
}

int tb_config_validate(const struct tb_config *c, char *err, size_t errsz)
{
    int n = c->train.enabled + c->infer.enabled + c->ckpt.enabled;
    if (n == 0)
        return fail(err, errsz,
                    "no workload class enabled: enable at least one of [training], "
                    "[inference], [checkpoint]");
    if (c->run.duration_ns < 100000000ULL)
        return fail(err, errsz, "[run] duration must be at least 100ms");
    if (c->ckpt.enabled) {
        if (c->ckpt.interval_ns == 0 || c->ckpt.interval_ns >= c->run.duration_ns)
            return fail(err, errsz,
                        "[checkpoint] interval (%.3gs) must be shorter than [run] duration "
                        "(%.3gs), or no checkpoint would be written",
                        (double)c->ckpt.interval_ns / 1e9, (double)c->run.duration_ns / 1e9);
        if (c->ckpt.bytes < c->ckpt.files)
            return fail(err, errsz, "[checkpoint] size must be at least one byte per file");
    }
    if (c->infer.enabled && c->infer.min_bytes > c->infer.max_bytes)
        return fail(err, errsz, "[inference] read_size: MIN is larger than MAX");
    return 0;
}
