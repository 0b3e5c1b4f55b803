/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_tierbench_cli.c - runs the real tierbench binary (path in argv[1]) as a subprocess:
 * every bad argument or profile gives a clear message and exit code 2; `gen` is deterministic;
 * a short end-to-end run writes valid JSON (parsed back with jansson), CSV and PNG charts; a
 * missing gnuplot is reported and skipped; `compare` prints ratios.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

extern char **environ;

static const char *g_bin;
static char *g_dir; /* scratch directory for this program */

struct out {
    int status;
    char *text; /* stdout + stderr */
};

/* Run tierbench with args (NULL-terminated), output captured into a file; env_extra may add one
 * NAME=VALUE to the environment. */
static struct out run_tb(const char *env_extra, ...)
{
    char *argv[64];
    int n = 0;
    va_list ap;
    argv[n++] = strdup(g_bin);
    va_start(ap, env_extra);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 63;)
        argv[n++] = strdup(a);
    va_end(ap);
    argv[n] = NULL;

    char outpath[PATH_MAX];
    snprintf(outpath, sizeof(outpath), "%s/out.txt", g_dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);

    char **env = environ;
    char **env2 = NULL;
    if (env_extra) {
        size_t ne = 0;
        while (environ[ne])
            ne++;
        env2 = calloc(ne + 2, sizeof(char *));
        memcpy(env2, environ, ne * sizeof(char *));
        env2[ne] = strdup(env_extra);
        env = env2;
    }
    pid_t pid;
    int rc = posix_spawn(&pid, g_bin, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    assert_int_equal(rc, 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    for (int i = 0; i < n; i++)
        free(argv[i]);
    if (env2) {
        size_t ne = 0;
        while (env2[ne])
            ne++;
        free(env2[ne - 1]);
        free(env2);
    }
    struct out o = {.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)};
    size_t len = 0;
    char *raw = tu_read_file(outpath, &len);
    o.text = calloc(len + 1, 1);
    memcpy(o.text, raw, len);
    free(raw);
    return o;
}

static void expect_usage_error(struct out o, const char *needle)
{
    if (o.status != 2 || !strstr(o.text, needle))
        fail_msg("expected exit 2 and '%s'; got exit %d and:\n%s", needle, o.status, o.text);
    free(o.text);
}

static char *write_tmp(const char *name, const char *text)
{
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%s", g_dir, name) > 0);
    tu_write_file(p, text, strlen(text));
    return p;
}

static char *dataset(void)
{
    static char *ds;
    if (!ds) {
        assert_true(asprintf(&ds, "%s/ds", g_dir) > 0);
        struct out o = run_tb(NULL, "gen", ds, "--files", "40", "--size", "uniform:16K-128K",
                              "--seed", "9", NULL);
        assert_int_equal(o.status, 0);
        assert_non_null(strstr(o.text, "40 files"));
        free(o.text);
    }
    return ds;
}

static void test_bad_arguments(void **state)
{
    (void)state;
    const char *ds = dataset();
    expect_usage_error(run_tb(NULL, NULL), "usage:");
    expect_usage_error(run_tb(NULL, "frobnicate", NULL), "unknown command 'frobnicate'");
    expect_usage_error(run_tb(NULL, "run", NULL), "missing DIR");
    expect_usage_error(run_tb(NULL, "run", "/nonexistent/tb", NULL), "not a directory");
    expect_usage_error(run_tb(NULL, "run", ds, "--bogus", NULL), "unknown option '--bogus'");
    expect_usage_error(run_tb(NULL, "run", ds, "--rate", "fast", NULL),
                       "--rate: [inference] rate: 'fast' is not a request rate");
    expect_usage_error(run_tb(NULL, "run", ds, "--rate", NULL), "--rate needs a value");
    expect_usage_error(run_tb(NULL, "run", ds, "--duration", "5", NULL),
                       "'5' is not a duration (a number with a unit");
    expect_usage_error(run_tb(NULL, "run", ds, "--train-threads", "0", NULL),
                       "[training] threads: '0' is not a whole number in 1..1024");
    expect_usage_error(run_tb(NULL, "run", ds, "--read-size", "256K-4K", NULL),
                       "is not a size range MIN-MAX");
    expect_usage_error(
        run_tb(NULL, "run", ds, "--no-training", "--no-inference", "--no-checkpoint", NULL),
        "no workload class enabled");
    expect_usage_error(run_tb(NULL, "run", ds, "--duration", "1s", "--ckpt-interval", "2s", NULL),
                       "must be shorter than [run] duration");
    expect_usage_error(run_tb(NULL, "run", ds, "--profile", "/nonexistent.ini", NULL),
                       "/nonexistent.ini: cannot open profile");
    expect_usage_error(run_tb(NULL, "gen", NULL), "missing DIR");
    expect_usage_error(run_tb(NULL, "gen", ds, "--size", "gaussian:4K", NULL),
                       "--size: 'gaussian:4K' is not fixed:SZ");
    expect_usage_error(run_tb(NULL, "gen", ds, "--shards", "2", "--files", "3", NULL),
                       "--shards cannot be combined");
    expect_usage_error(run_tb(NULL, "gen", ds, "--files", "zero", NULL), "--files: 'zero'");
    expect_usage_error(run_tb(NULL, "compare", "nonsense", NULL), "is not NAME=RESULT.json");
    /* An empty directory has no data: the message says how to make some. */
    char *empty = NULL;
    assert_true(asprintf(&empty, "%s/empty", g_dir) > 0);
    assert_int_equal(mkdir(empty, 0755), 0);
    expect_usage_error(run_tb(NULL, "run", empty, "--no-checkpoint", NULL),
                       "no data files (create a dataset with: tierbench gen");
    free(empty);
}

static void test_bad_profiles(void **state)
{
    (void)state;
    const char *ds = dataset();
    static const struct {
        const char *text;
        const char *needle;
    } cases[] = {
        {"[run]\nduration = 2s\n[training]\ntrheads = 4\n",
         "p.ini:4: unknown key 'trheads' in [training] (known: enabled, threads"},
        {"[trainig]\nthreads = 4\n", "p.ini:2: unknown section [trainig]"},
        {"[run]\nthis line has no equals sign\n", "p.ini:2: syntax error"},
        {"[training]\nbatch_size = 0\n", "p.ini:2: [training] batch_size: '0' is not a whole"},
        {"[inference]\nrate = -5\n", "p.ini:2: [inference] rate: '-5' is not a request rate"},
        {"[checkpoint]\nsize = lots\n", "p.ini:2: [checkpoint] size: 'lots' is not a size"},
        {"[checkpoint]\nfsync = perhaps\n", "[checkpoint] fsync: 'perhaps' is not a boolean"},
        {"[run]\nphases = some\n", "[run] phases: 'some' is not one of all, alone, together"},
        {"threads = 4\n", "p.ini:1: key 'threads' is outside any section"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *p = write_tmp("p.ini", cases[i].text);
        expect_usage_error(run_tb(NULL, "run", ds, "--profile", p, NULL), cases[i].needle);
        free(p);
    }
}

static void test_gen_deterministic(void **state)
{
    (void)state;
    char *a = NULL, *b = NULL, *c = NULL;
    assert_true(asprintf(&a, "%s/ga", g_dir) > 0);
    assert_true(asprintf(&b, "%s/gb", g_dir) > 0);
    assert_true(asprintf(&c, "%s/gc", g_dir) > 0);
    struct out o = run_tb(NULL, "gen", a, "--files", "5", "--size", "lognormal:8K,0.7", NULL);
    assert_int_equal(o.status, 0);
    free(o.text);
    o = run_tb(NULL, "gen", b, "--files", "5", "--size", "lognormal:8K,0.7", NULL);
    assert_int_equal(o.status, 0);
    free(o.text);
    o = run_tb(NULL, "gen", c, "--files", "5", "--size", "lognormal:8K,0.7", "--seed", "2", NULL);
    assert_int_equal(o.status, 0);
    free(o.text);
    int differ = 0;
    for (int i = 0; i < 5; i++) {
        char pa[PATH_MAX], pb[PATH_MAX], pc[PATH_MAX];
        size_t la, lb, lc;
        snprintf(pa, sizeof(pa), "%s/samples/s%08d.bin", a, i);
        snprintf(pb, sizeof(pb), "%s/samples/s%08d.bin", b, i);
        snprintf(pc, sizeof(pc), "%s/samples/s%08d.bin", c, i);
        char *da = tu_read_file(pa, &la), *db = tu_read_file(pb, &lb), *dc = tu_read_file(pc, &lc);
        assert_int_equal(la, lb);
        assert_memory_equal(da, db, la);
        differ += la != lc || memcmp(da, dc, la) != 0;
        free(da);
        free(db);
        free(dc);
    }
    assert_int_equal(differ, 5);
    /* shards */
    o = run_tb(NULL, "gen", c, "--shards", "2", "--shard-size", "3M", NULL);
    assert_int_equal(o.status, 0);
    assert_non_null(strstr(o.text, "2 shards, 6.0 MiB"));
    free(o.text);
    free(a);
    free(b);
    free(c);
}

static int png_ok(const char *dir, const char *name)
{
    char p[PATH_MAX];
    unsigned char magic[8] = {0};
    static const unsigned char want[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
        return 0;
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, magic, sizeof(magic));
    close(fd);
    return n == 8 && memcmp(magic, want, 8) == 0;
}

static json_t *phase(json_t *root, const char *name)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(root, "phases"), i, p)
    {
        if (strcmp(json_string_value(json_object_get(p, "name")), name) == 0)
            return p;
    }
    fail_msg("no phase %s", name);
    return NULL;
}

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_number(v))
        fail_msg("no number '%s'", k);
    return json_number_value(v);
}

static void test_end_to_end(void **state)
{
    (void)state;
    const char *ds = dataset();
    char *prof = write_tmp("e2e.ini", "[run]\nduration = 800ms\nseed = 7\n"
                                      "[training]\nthreads = 2\nbatch_size = 4\n"
                                      "compute_per_sample = 1ms\n"
                                      "[inference]\nrate = 200\nthreads = 4\n"
                                      "[checkpoint]\ninterval = 300ms\nsize = 8M\nfiles = 2\n");
    char json[PATH_MAX], csv[PATH_MAX], plot[PATH_MAX], ck[PATH_MAX];
    snprintf(json, sizeof(json), "%s/r.json", g_dir);
    snprintf(csv, sizeof(csv), "%s/r.csv", g_dir);
    snprintf(plot, sizeof(plot), "%s/plots", g_dir);
    struct out o = run_tb(NULL, "run", ds, "--profile", prof, "--json", json, "--csv", csv,
                          "--plot", plot, NULL);
    if (o.status != 0)
        fail_msg("run failed (%d):\n%s", o.status, o.text);
    /* the table, and no progress line: stdout is not a TTY */
    assert_non_null(strstr(o.text, "TRAINING"));
    assert_non_null(strstr(o.text, "INTERFERENCE"));
    assert_null(strchr(o.text, '\r'));
    free(o.text);

    json_error_t je;
    json_t *root = json_load_file(json, 0, &je);
    if (!root)
        fail_msg("invalid JSON: %s:%d %s", json, je.line, je.text);
    json_t *cfg = json_object_get(root, "config");
    assert_int_equal((long long)num(json_object_get(cfg, "run"), "duration_ns"), 800000000LL);
    assert_int_equal((long long)num(json_object_get(cfg, "run"), "seed"), 7);
    assert_int_equal((long long)num(json_object_get(cfg, "training"), "compute_per_sample_ns"),
                     1000000);
    assert_int_equal(json_array_size(json_object_get(root, "phases")), 4);
    json_t *tr = json_object_get(phase(root, "training-alone"), "training");
    assert_true(num(tr, "au_pct") > 0 && num(tr, "au_pct") <= 100);
    assert_true(num(tr, "samples") > 0);
    json_t *inf = json_object_get(phase(root, "inference-alone"), "inference");
    assert_int_equal((long long)num(inf, "scheduled"), 160);
    assert_true(num(json_object_get(inf, "latency_ns"), "p99") > 0);
    json_t *cp = json_object_get(phase(root, "checkpoint-alone"), "checkpoint");
    assert_int_equal((long long)num(cp, "checkpoints"), 2);
    json_t *tog = phase(root, "together");
    assert_non_null(json_object_get(tog, "training"));
    assert_non_null(json_object_get(tog, "inference"));
    assert_non_null(json_object_get(tog, "checkpoint"));
    json_t *itf = json_object_get(root, "interference");
    assert_true(num(itf, "inference_p99") > 0);
    assert_true(num(itf, "training_au") > 0);
    assert_true(num(itf, "checkpoint_stall") > 0);
    json_decref(root);

    size_t len = 0;
    char *text = tu_read_file(csv, &len);
    char *body = calloc(len + 1, 1);
    memcpy(body, text, len);
    free(text);
    static const char header[] =
        "phase,t_s,class,ops,bytes,mb_per_s,au_pct,lat_mean_us,lat_max_us,stall_ms\n";
    assert_true(strncmp(body, header, strlen(header)) == 0);
    assert_non_null(strstr(body, "\ntogether,0,training,"));
    int rows = 0;
    for (char *save = NULL, *line = strtok_r(body, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        int commas = 0;
        for (const char *c = line; *c; c++)
            commas += *c == ',';
        assert_int_equal(commas, 9);
        rows++;
    }
    assert_true(rows >= 1 + 6); /* header + one second per class per phase at least */
    free(body);

    assert_true(png_ok(plot, "latency_cdf.png"));
    assert_true(png_ok(plot, "throughput.png"));
    assert_true(png_ok(plot, "au.png"));

    /* the checkpoint directory was cleaned up */
    snprintf(ck, sizeof(ck), "%s/.tierbench-ckpt", ds);
    struct stat st;
    assert_int_equal(stat(ck, &st), -1);

    /* compare two results: the same run twice gives ratios of 1 */
    char a1[PATH_MAX + 8], a2[PATH_MAX + 8];
    snprintf(a1, sizeof(a1), "one=%s", json);
    snprintf(a2, sizeof(a2), "two=%s", json);
    o = run_tb(NULL, "compare", a1, a2, NULL);
    assert_int_equal(o.status, 0);
    assert_non_null(strstr(o.text, "training AU % (alone)"));
    assert_non_null(strstr(o.text, "(x1.00)"));
    free(o.text);
    free(prof);
}

/* --progress forces the live line (normally only on a TTY): carriage returns, phase names. */
static void test_progress_line(void **state)
{
    (void)state;
    const char *ds = dataset();
    struct out o = run_tb(NULL, "run", ds, "--no-training", "--no-checkpoint", "--duration",
                          "600ms", "--rate", "50", "--progress", NULL);
    assert_int_equal(o.status, 0);
    assert_non_null(strstr(o.text, "\rinference-alone"));
    assert_non_null(strstr(o.text, "req/s"));
    free(o.text);
}

static void test_no_gnuplot(void **state)
{
    (void)state;
    const char *ds = dataset();
    char plot[PATH_MAX];
    snprintf(plot, sizeof(plot), "%s/plots-none", g_dir);
    struct out o =
        run_tb("TIERBENCH_GNUPLOT=/nonexistent/gnuplot", "run", ds, "--no-training",
               "--no-checkpoint", "--duration", "200ms", "--rate", "50", "--plot", plot, NULL);
    if (o.status != 0 || !strstr(o.text, "gnuplot not found"))
        fail_msg("exit %d:\n%s", o.status, o.text);
    assert_false(png_ok(plot, "latency_cdf.png"));
    free(o.text);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH_TO_TIERBENCH\n", argv[0]);
        return 2;
    }
    g_bin = argv[1];
    g_dir = tu_mkdtemp("tierbench-cli");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),     cmocka_unit_test(test_bad_profiles),
        cmocka_unit_test(test_gen_deterministic), cmocka_unit_test(test_end_to_end),
        cmocka_unit_test(test_progress_line),     cmocka_unit_test(test_no_gnuplot),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmtree(g_dir);
    free(g_dir);
    return rc;
}
