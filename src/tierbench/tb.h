/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb.h - tierbench internals shared by its modules and its unit tests (library tierbench_core).
 *
 * tierbench is a standalone tool: it uses only src/common leaf utilities, never tierd internals,
 * so it can measure any directory (a tierd mount, a local disk, tmpfs, NFS...).
 *
 * Module map (one concern per file):
 *   tb_util.c     number/duration/size-distribution parsing, seeded RNG, keyed permutation
 *   tb_config.c   defaults, INI profile (inih) and command-line flags, validation (exit code 2)
 *   tb_dataset.c  finding the sample files under DIR and cutting shards into records
 *   tb_gen.c      `tierbench gen`: deterministic synthetic datasets
 *   tb_series.c   per-second time series shared by the engines (relaxed atomics)
 *   tb_train.c    training engine: reader threads + one emulated accelerator, AU
 *   tb_infer.c    inference engine: open-loop arrivals, latency from the intended send time
 *   tb_ckpt.c     checkpoint engine: periodic multi-file writes with fsync
 *   tb_phase.c    runs the engines alone and together, interference ratios
 *   tb_report.c   terminal table, JSON, CSV, gnuplot charts, `tierbench compare`
 *   tb_main.c     command dispatch
 *
 * Threads: each engine runs in its own thread during a phase and owns its tb_class_result until it
 * returns; the per-second tb_series is written by all engine threads with relaxed atomics and read
 * by the progress printer. Errors: functions return 0 or -errno and put a sentence in the caller's
 * err buffer where a user must act on it.
 */
#ifndef TIER_TIERBENCH_TB_H
#define TIER_TIERBENCH_TB_H

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/hist.h"

#define TB_VERSION TIER_VERSION /* CMakeLists.txt's project version (one for everything) */
#define TB_EXIT_OK 0
#define TB_EXIT_FAIL 1  /* the benchmark ran into an I/O or system error */
#define TB_EXIT_USAGE 2 /* bad arguments, bad profile, bad dataset directory */
#define TB_CKPT_DEFAULT_SUBDIR ".tierbench-ckpt"

enum tb_class { TB_TRAIN = 0, TB_INFER = 1, TB_CKPT = 2, TB_NCLASS = 3 };
const char *tb_class_name(enum tb_class c);

/* ---- tb_util.c ---- */
int tb_parse_duration_ns(const char *s, uint64_t *out); /* "500us", "2ms", "1.5s", "2m", "1h" */
int tb_parse_double(const char *s, double *out);
int tb_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);
int tb_parse_range(const char *s, uint64_t *lo, uint64_t *hi); /* "4K-256K" */

enum tb_size_kind { TB_SIZE_FIXED, TB_SIZE_UNIFORM, TB_SIZE_LOGNORMAL };
struct tb_size_dist {
    enum tb_size_kind kind;
    uint64_t a, b; /* fixed: a; uniform: [a, b]; lognormal: median a */
    double sigma;
};
/* "fixed:SZ", "uniform:MIN-MAX", "lognormal:MEDIAN,SIGMA". */
int tb_size_dist_parse(const char *s, struct tb_size_dist *out);
uint64_t tb_size_dist_sample(const struct tb_size_dist *d, uint64_t *rng);

uint64_t tb_rng_next(uint64_t *state); /* splitmix64 */
double tb_rng_unit(uint64_t *state);   /* [0, 1) */
uint64_t tb_mix64(uint64_t x);
/* A bijection of [0, n) keyed by key (Feistel network + cycle walking): a fresh shuffled order per
 * epoch without storing or locking a shuffled array. */
uint64_t tb_perm(uint64_t i, uint64_t n, uint64_t key);
/* Sleep until the CLOCK_MONOTONIC instant t_ns (returns at once if it has passed). */
void tb_sleep_until(uint64_t t_ns);

/* ---- tb_config.c ---- */
enum tb_phases { TB_PHASES_ALONE = 1, TB_PHASES_TOGETHER = 2, TB_PHASES_ALL = 3 };

struct tb_train_cfg {
    int enabled;
    unsigned threads;      /* reader threads */
    unsigned batch;        /* samples per batch */
    unsigned prefetch;     /* batches the readers may run ahead of the accelerator */
    uint64_t compute_ns;   /* emulated accelerator time per sample */
    uint64_t record_bytes; /* cut files larger than this into records (0: whole file = sample) */
};

struct tb_infer_cfg {
    int enabled;
    double rate;        /* requests per second, open loop */
    unsigned threads;   /* concurrent requests in flight at most */
    uint64_t min_bytes; /* read size range */
    uint64_t max_bytes;
    unsigned max_files; /* the file set: first max_files files of the dataset */
    uint64_t drain_ns;  /* after the phase, how long late requests may still complete */
    int direct; /* O_DIRECT: every read reaches the file system (sizes rounded down to 4 KiB) */
};

struct tb_ckpt_cfg {
    int enabled;
    uint64_t interval_ns;
    uint64_t bytes; /* per checkpoint, split over files */
    unsigned files;
    unsigned threads;
    int fsync;
    char dir[PATH_MAX]; /* "" = DIR/.tierbench-ckpt */
};

struct tb_run_cfg {
    uint64_t duration_ns; /* of each phase */
    int phases;           /* enum tb_phases bits */
    uint64_t seed;
    int drop_caches;
};

struct tb_config {
    char dir[PATH_MAX];
    char profile[PATH_MAX];
    struct tb_train_cfg train;
    struct tb_infer_cfg infer;
    struct tb_ckpt_cfg ckpt;
    struct tb_run_cfg run;
    char json_path[PATH_MAX];
    char csv_path[PATH_MAX];
    char plot_dir[PATH_MAX];
    int progress; /* -1 auto (TTY), 0 off, 1 on */
    int quiet;
};

void tb_config_defaults(struct tb_config *c);
/* Apply an INI profile. Returns 0, or -EINVAL/-ENOENT with "FILE:LINE: what" in err. */
int tb_config_load_profile(struct tb_config *c, const char *path, char *err, size_t errsz);
/* Apply one section/key/value (shared by the INI loader and flags). */
int tb_config_set(struct tb_config *c, const char *section, const char *key, const char *value,
                  char *err, size_t errsz);
/* Parse `run` arguments (argv[0] is "run"): DIR, --profile and flags; flags override the profile.
 * Returns 0 or -EINVAL with a message. */
int tb_config_from_args(struct tb_config *c, int argc, char **argv, char *err, size_t errsz);
int tb_config_validate(const struct tb_config *c, char *err, size_t errsz);

/* ---- tb_dataset.c ---- */
struct tb_item {
    uint32_t file;
    uint64_t off;
    uint64_t len;
};

struct tb_dataset {
    char **paths;
    uint64_t *sizes;
    size_t nfiles;
    struct tb_item *items; /* training samples */
    size_t nitems;
    uint64_t total_bytes;
    char layout[16]; /* "samples", "shards" or "tree" */
};

/* Find the data files: DIR/samples or DIR/shards (made by `gen`), else every regular file under
 * DIR except skip_dir. Returns 0, -ENOENT (no data) or another -errno, with a message. */
int tb_dataset_load(struct tb_dataset *ds, const char *dir, const char *skip_dir,
                    uint64_t record_bytes, char *err, size_t errsz);
void tb_dataset_fini(struct tb_dataset *ds);

/* ---- tb_gen.c ---- */
struct tb_gen_cfg {
    uint64_t files;
    struct tb_size_dist size;
    uint64_t shards;
    uint64_t shard_bytes;
    uint64_t seed;
    int progress;
};
int tb_gen_main(int argc, char **argv); /* returns an exit code */
int tb_gen_run(const char *dir, const struct tb_gen_cfg *g, char *err, size_t errsz);

/* ---- I/O hook: the engines read through this so tests can inject a target of known speed. ---- */
struct tb_io {
    /* Read up to len bytes at off; returns bytes read (0 at EOF) or -errno. */
    ssize_t (*pread)(void *arg, int fd, void *buf, size_t len, uint64_t off);
    void *arg;
};
extern const struct tb_io tb_io_posix;

/* ---- tb_series.c ---- */
struct tb_slot {
    _Atomic uint64_t ops;
    _Atomic uint64_t bytes;
    _Atomic uint64_t busy_ns; /* training: compute time */
    _Atomic uint64_t wait_ns; /* training: data wait; checkpoint: writer blocked */
    _Atomic uint64_t lat_sum_ns;
    _Atomic uint64_t lat_max_ns;
};

struct tb_series {
    uint64_t t0_ns;
    size_t nsec;
    struct tb_slot *slots[TB_NCLASS];
};

int tb_series_init(struct tb_series *s, uint64_t t0_ns, size_t nsec);
void tb_series_fini(struct tb_series *s);
struct tb_slot *tb_series_slot(struct tb_series *s, enum tb_class c, uint64_t t_ns);
void tb_series_add_lat(struct tb_series *s, enum tb_class c, uint64_t t_ns, uint64_t lat_ns);
/* Spread the interval [a, b) over the seconds it covers into busy_ns (busy=1) or wait_ns. */
void tb_series_add_interval(struct tb_series *s, enum tb_class c, uint64_t a, uint64_t b, int busy);

/* ---- results ---- */
struct tb_class_result {
    int ran;
    uint64_t elapsed_ns;
    uint64_t ops;   /* training: samples; inference: completed requests; checkpoint: checkpoints */
    uint64_t bytes; /* read (training, inference) or written (checkpoint) */
    uint64_t errors;
    int first_error;       /* -errno of the first failed I/O, 0 if none */
    struct tier_hist *lat; /* training: wait per batch; inference: latency; checkpoint: stall */
    /* training */
    uint64_t compute_ns, wait_ns, batches, epochs;
    /* inference */
    uint64_t scheduled, issued_in_window, late, dropped;
    /* checkpoint */
    uint64_t stall_ns, files_written;
};

int tb_result_init(struct tb_class_result *r);
void tb_result_fini(struct tb_class_result *r);
double tb_result_au(const struct tb_class_result *r); /* percent; 0 when nothing ran */
double tb_result_mbps(const struct tb_class_result *r);
double tb_result_ops_per_s(const struct tb_class_result *r);

/* ---- engines ---- */
int tb_train_run(const struct tb_train_cfg *cfg, const struct tb_dataset *ds,
                 const struct tb_io *io, uint64_t seed, uint64_t t0_ns, uint64_t duration_ns,
                 struct tb_class_result *res, struct tb_series *series);
int tb_infer_run(const struct tb_infer_cfg *cfg, const struct tb_dataset *ds,
                 const struct tb_io *io, uint64_t seed, uint64_t t0_ns, uint64_t duration_ns,
                 struct tb_class_result *res, struct tb_series *series);
int tb_ckpt_run(const struct tb_ckpt_cfg *cfg, const char *dir, const char *tag, uint64_t seed,
                uint64_t t0_ns, uint64_t duration_ns, struct tb_class_result *res,
                struct tb_series *series);

/* ---- tb_phase.c ---- */
struct tb_phase {
    char name[32];
    unsigned mask; /* 1 << enum tb_class */
    uint64_t duration_ns;
    struct tb_class_result r[TB_NCLASS];
    struct tb_series series;
};

struct tb_run {
    const struct tb_config *cfg;
    struct tb_dataset ds;
    char ckpt_dir[PATH_MAX + 32];
    struct tb_phase *phases;
    size_t nphases;
    uint64_t started_real_ns;
};

/* Run every configured phase. io: NULL for real POSIX I/O. Returns 0 or -errno. */
int tb_run_execute(struct tb_run *run, const struct tb_config *cfg, const struct tb_io *io,
                   char *err, size_t errsz);
void tb_run_fini(struct tb_run *run);
/* The phase running class c alone / the together phase, or NULL. */
const struct tb_phase *tb_run_alone(const struct tb_run *run, enum tb_class c);
const struct tb_phase *tb_run_together(const struct tb_run *run);

/* Interference ratios: together / alone; negative when one side is missing. */
struct tb_interference {
    double infer_p99;
    double train_au;
    double ckpt_stall;
};
void tb_run_interference(const struct tb_run *run, struct tb_interference *out);

/* ---- tb_report.c ---- */
void tb_report_table(const struct tb_run *run, FILE *f);
int tb_report_json(const struct tb_run *run, const char *path, char *err, size_t errsz);
int tb_report_csv(const struct tb_run *run, const char *path, char *err, size_t errsz);
/* PNG charts with gnuplot. Returns 0, -ENOENT when gnuplot is not installed, or another -errno. */
int tb_report_plot(const struct tb_run *run, const char *dir, char *err, size_t errsz);
/* `tierbench compare NAME=RESULT.json...`: one table of figures and ratios to the first. */
int tb_compare_main(int argc, char **argv);
int tb_run_main(int argc, char **argv);

#endif
