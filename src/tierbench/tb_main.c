/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_main.c - the tierbench command line: `gen`, `run`, `compare`. Exit codes: 0 success,
 * 1 the benchmark failed (I/O or system error), 2 bad arguments, profile or dataset directory.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(
        f,
        "tierbench %s - mixed training + inference + checkpoint storage benchmark\n\n"
        "usage:\n"
        "  tierbench gen DIR [--files N --size fixed:SZ|uniform:MIN-MAX|lognormal:MEDIAN,SIGMA\n"
        "                    | --shards M --shard-size SZ] [--seed S] [--[no-]progress]\n"
        "  tierbench run DIR [--profile FILE] [options]\n"
        "  tierbench compare NAME=RESULT.json [NAME=RESULT.json...]\n\n"
        "run options (override the profile):\n"
        "  --duration D        each phase's length (e.g. 10s)\n"
        "  --phases P          all | alone | together\n"
        "  --seed N            --drop-caches\n"
        "  --train-threads N   --batch N   --compute D (per sample)   --record-size SZ\n"
        "  --rate R            --infer-threads N   --read-size MIN-MAX\n"
        "  --ckpt-interval D   --ckpt-size SZ   --ckpt-files N   --ckpt-dir DIR\n"
        "  --no-training       --no-inference   --no-checkpoint\n"
        "  --json FILE  --csv FILE  --plot DIR  --[no-]progress  --quiet\n\n"
        "exit status: 0 ok, 1 the benchmark failed, 2 bad arguments or profile\n",
        TB_VERSION);
}

int tb_run_main(int argc, char **argv)
{
    struct tb_config cfg;
    struct tb_run run;
    char err[1024] = "";
    struct stat st;

    tb_config_defaults(&cfg);
    if (tb_config_from_args(&cfg, argc, argv, err, sizeof(err)) < 0 ||
        tb_config_validate(&cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "tierbench run: %s\n", err);
        return TB_EXIT_USAGE;
    }
    if (stat(cfg.dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "tierbench run: %s: not a directory (create a dataset with: tierbench gen %s)\n",
                cfg.dir, cfg.dir);
        return TB_EXIT_USAGE;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* the inference file set keeps its files open */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (cfg.progress < 0)
        cfg.progress = isatty(STDOUT_FILENO);
    if (cfg.quiet)
        cfg.progress = 0;
    int rc = tb_run_execute(&run, &cfg, NULL, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "tierbench run: %s\n", err[0] ? err : strerror(-rc));
        tb_run_fini(&run);
        return rc == -ENOENT || rc == -ENOTDIR ? TB_EXIT_USAGE : TB_EXIT_FAIL;
    }
    int status = TB_EXIT_OK;
    if (!cfg.quiet)
        tb_report_table(&run, stdout);
    if (cfg.json_path[0] && tb_report_json(&run, cfg.json_path, err, sizeof(err)) < 0) {
        fprintf(stderr, "tierbench run: %s\n", err);
        status = TB_EXIT_FAIL;
    }
    if (cfg.csv_path[0] && tb_report_csv(&run, cfg.csv_path, err, sizeof(err)) < 0) {
        fprintf(stderr, "tierbench run: %s\n", err);
        status = TB_EXIT_FAIL;
    }
    if (cfg.plot_dir[0]) {
        rc = tb_report_plot(&run, cfg.plot_dir, err, sizeof(err));
        if (rc == -ENOENT) {
            fprintf(stderr, "tierbench run: %s\n", err);
        } else if (rc < 0) {
            fprintf(stderr, "tierbench run: %s\n", err);
            status = TB_EXIT_FAIL;
        } else if (!cfg.quiet) {
            printf("charts: %s/latency_cdf.png %s/throughput.png %s/au.png\n", cfg.plot_dir,
                   cfg.plot_dir, cfg.plot_dir);
        }
    }
    uint64_t errors = 0;
    for (size_t i = 0; i < run.nphases; i++)
        for (int k = 0; k < TB_NCLASS; k++)
            errors += run.phases[i].r[k].errors;
    if (errors) {
        fprintf(stderr,
                "tierbench run: %llu I/O errors during the run (see the warnings above); the "
                "figures do not describe a healthy target\n",
                (unsigned long long)errors);
        status = TB_EXIT_FAIL;
    }
    tb_run_fini(&run);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return TB_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "gen") == 0)
        return tb_gen_main(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return tb_run_main(argc - 1, argv + 1);
    if (strcmp(cmd, "compare") == 0)
        return tb_compare_main(argc - 1, argv + 1);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return TB_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("tierbench %s\n", TB_VERSION);
        return TB_EXIT_OK;
    }
    fprintf(stderr, "tierbench: unknown command '%s' (expected gen, run or compare)\n", cmd);
    usage(stderr);
    return TB_EXIT_USAGE;
}
