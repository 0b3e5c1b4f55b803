/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy_bench.c - what one lifecycle-policy pass costs in CPU, without I/O: N files of a
 * checkpoint-and-dataset namespace (default 100,000: 500 runs x 40 steps x 5 files) evaluated
 * against 10 rules (keep_last by a regex's step, age, size, glob, prefix, watermark), the rules
 * built from config text as tierd builds them. Prints the CPU time of the evaluation (the
 * selection the engine does per pass before any action), best of 5.
 *
 *   policy_bench [FILES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lifecycle/lifecycle.h"
#include "daemon/tierd.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(((const struct policy_file *)a)->key, ((const struct policy_file *)b)->key);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    static const char conf[] =
        "[backend warm]\ntype = posix\nroot = /srv\n[backend archive]\ntype = posix\nroot = /a\n"
        "[namespace /ck]\nbackend = warm\nprefix = ck\nmode = write-back\n"
        "[writeback]\nspool_dir = /tmp/s\n[mount]\npath = /mnt/t\n"
        "[policy hot]\nnamespace = /ck\nmatch = step_([0-9]+)/\nkeep_last = 3\naction = demote\n"
        "[policy arch]\nnamespace = /ck\nmatch = step_([0-9]+)/\nkeep_last = 3\naction = copy\n"
        "target = archive:runs/\n"
        "[policy old]\nnamespace = /ck\nage = 30d\naction = copy\ntarget = archive:old/\n"
        "[policy big]\nnamespace = /ck\nmin_size = 1G\nage = 7d\naction = copy\n"
        "target = archive:big/\n"
        "[policy logs]\nnamespace = /ck\nglob = */*/*.log\nage = 1d\naction = expire\n"
        "allow_delete = true\n"
        "[policy run7]\nnamespace = /ck\nprefix = run7/\nmatch = step_([0-9]+)/\nkeep_last = 1\n"
        "action = copy\ntarget = archive:run7/\n"
        "[policy full]\nnamespace = /ck\nwatermark = 90%\nglob = */*/optim.bin\naction = demote\n"
        "[policy tmp]\nnamespace = /ck\nmatch = /tmp-[a-z]+$\naction = expire\n"
        "allow_delete = true\n"
        "[policy small]\nnamespace = /ck\nmax_size = 4K\nage = 90d\naction = copy\n"
        "target = archive:small/\n"
        "[policy meta]\nnamespace = /ck\nglob = */*/meta.json\nkeep_last = 10\nmatch = "
        "step_([0-9]+)/meta\naction = copy\ntarget = archive:meta/\n";
    struct tierd_config c;
    char err[512];
    if (tierd_config_load_string("bench.conf", conf, sizeof(conf) - 1, &c, err, sizeof(err))) {
        fprintf(stderr, "policy_bench: %s\n", err);
        return 1;
    }
    struct policy_rules r;
    int line;
    if (policy_rules_build(&c, &r, err, sizeof(err), &line)) {
        fprintf(stderr, "policy_bench: line %d: %s\n", line, err);
        return 1;
    }
    struct policy_file *f = calloc(n, sizeof(*f));
    char **keys = calloc(n, sizeof(*keys));
    size_t *sel = calloc(n, sizeof(*sel));
    if (!f || !keys || !sel)
        return 1;
    static const char *const names[] = {"model.bin", "optim.bin", "meta.json", "train.log",
                                        "rng.state"};
    int64_t now = 400LL * 86400 * 1000000000LL;
    for (size_t i = 0; i < n; i++) {
        size_t run = i / 200, step = (i / 5) % 40, file = i % 5;
        char k[128];
        snprintf(k, sizeof(k), "run%zu/step_%zu/%s", run, step, names[file]);
        keys[i] = strdup(k);
        f[i] = (struct policy_file){.key = keys[i],
                                    .size = file == 2 ? 900 : (uint64_t)(i % 7 + 1) << 28,
                                    .mtime_ns = now - (int64_t)(i % 100) * 86400 * 1000000000LL,
                                    .flags = POLICY_F_DURABLE};
    }
    qsort(f, n, sizeof(*f), cmp);
    double best = 1e9;
    size_t total = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = cpu_s();
        total = 0;
        for (size_t i = 0; i < r.n; i++)
            total += policy_select(&r.v[i], f, n, now, 95, sel);
        double t = cpu_s() - t0;
        if (t < best)
            best = t;
    }
    printf("policy_bench: %zu files x %zu rules (%zu user rules): %zu selections, best of 5 "
           "passes %.3f s CPU (goal <= 1 s)\n",
           n, r.n, c.npolicies, total, best);
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    free(f);
    free(sel);
    policy_rules_free(&r);
    tierd_config_fini(&c);
    return 0;
}
