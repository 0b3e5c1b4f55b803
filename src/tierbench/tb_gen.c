/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_gen.c - `tierbench gen DIR`: a synthetic dataset, byte-for-byte reproducible from the seed.
 * Either N sample files under DIR/samples with sizes from a distribution (fixed, uniform,
 * lognormal), or M shard files under DIR/shards. File i's size and content depend only on (seed,
 * i). A small manifest DIR/tierbench-dataset.txt records how it was made. Single-threaded.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strutil.h"
#include "common/timeutil.h"

#define GEN_CHUNK (1u << 20)

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int write_file(const char *path, uint64_t size, uint64_t seed, char *buf)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    uint64_t rng = seed;
    int rc = 0;
    for (uint64_t done = 0; done < size;) {
        size_t n = size - done < GEN_CHUNK ? (size_t)(size - done) : GEN_CHUNK;
        for (size_t k = 0; k < n; k += 8) {
            uint64_t v = tb_rng_next(&rng);
            memcpy(buf + k, &v, n - k < 8 ? n - k : 8);
        }
        rc = write_all(fd, buf, n);
        if (rc < 0)
            break;
        done += n;
    }
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    return rc;
}

int tb_gen_run(const char *dir, const struct tb_gen_cfg *g, char *err, size_t errsz)
{
    char sub[PATH_MAX], path[PATH_MAX + 32], b1[32];
    int shards = g->shards > 0;
    uint64_t n = shards ? g->shards : g->files;
    uint64_t total = 0, last_ns = 0;
    int rc = 0;
    char *buf = malloc(GEN_CHUNK + 8);
    if (!buf)
        return -ENOMEM;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errsz, "%s: cannot create directory: %s", dir, strerror(errno));
        goto out;
    }
    snprintf(sub, sizeof(sub), "%s/%s", dir, shards ? "shards" : "samples");
    if (mkdir(sub, 0755) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errsz, "%s: cannot create directory: %s", sub, strerror(errno));
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t rng = tb_mix64(g->seed * 0x9e3779b97f4a7c15ULL + i);
        uint64_t size = shards ? g->shard_bytes : tb_size_dist_sample(&g->size, &rng);
        if (shards)
            snprintf(path, sizeof(path), "%s/shard-%05llu.bin", sub, (unsigned long long)i);
        else
            snprintf(path, sizeof(path), "%s/s%08llu.bin", sub, (unsigned long long)i);
        rc = write_file(path, size, tb_mix64(rng ^ 0xda7a), buf);
        if (rc < 0) {
            snprintf(err, errsz, "%s: cannot write: %s", path, strerror(-rc));
            goto out;
        }
        total += size;
        uint64_t now = tier_now_mono_ns();
        if (g->progress && (now - last_ns > 200000000ULL || i + 1 == n)) {
            printf("\rgen: %llu/%llu files, %s written   ", (unsigned long long)(i + 1),
                   (unsigned long long)n, tier_fmt_bytes(total, b1, sizeof(b1)));
            fflush(stdout);
            last_ns = now;
        }
    }
    if (g->progress)
        printf("\n");
    snprintf(path, sizeof(path), "%s/tierbench-dataset.txt", dir);
    FILE *m = fopen(path, "w");
    if (m) {
        fprintf(m, "tierbench dataset v1\nlayout %s\ncount %llu\nbytes %llu\nseed %llu\n",
                shards ? "shards" : "samples", (unsigned long long)n, (unsigned long long)total,
                (unsigned long long)g->seed);
        fclose(m);
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        syncfs(dfd); /* so a following run does not measure our write-back */
        close(dfd);
    }
    printf("gen: %s: %llu %s, %s\n", dir, (unsigned long long)n, shards ? "shards" : "files",
           tier_fmt_bytes(total, b1, sizeof(b1)));
out:
    free(buf);
    return rc;
}

__attribute__((format(printf, 1, 2))) static int usage_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tierbench gen: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: tierbench gen DIR [--files N --size fixed:SZ|uniform:MIN-MAX|"
                    "lognormal:MEDIAN,SIGMA | --shards M --shard-size SZ] [--seed S]\n");
    return TB_EXIT_USAGE;
}

int tb_gen_main(int argc, char **argv)
{
    struct tb_gen_cfg g = {.files = 1000,
                           .size = {.kind = TB_SIZE_FIXED, .a = 128 * 1024},
                           .shard_bytes = 256ULL << 20,
                           .seed = 42,
                           .progress = isatty(STDOUT_FILENO)};
    const char *dir = NULL;
    int have_files = 0, have_size = 0, have_shard_size = 0;
    char err[512];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (dir)
                return usage_err("unexpected argument '%s' (only one DIR)", a);
            dir = a;
            continue;
        }
        if (strcmp(a, "--progress") == 0) {
            g.progress = 1;
            continue;
        }
        if (strcmp(a, "--no-progress") == 0) {
            g.progress = 0;
            continue;
        }
        if (i + 1 >= argc)
            return usage_err("%s needs a value", a);
        const char *v = argv[++i];
        if (strcmp(a, "--files") == 0) {
            if (tier_parse_u64(v, &g.files) < 0 || g.files == 0 || g.files > 100000000)
                return usage_err("--files: '%s' is not a count in 1..100000000", v);
            have_files = 1;
        } else if (strcmp(a, "--size") == 0) {
            if (tb_size_dist_parse(v, &g.size) < 0)
                return usage_err("--size: '%s' is not fixed:SZ, uniform:MIN-MAX or "
                                 "lognormal:MEDIAN,SIGMA (e.g. lognormal:128K,0.5)",
                                 v);
            have_size = 1;
        } else if (strcmp(a, "--shards") == 0) {
            if (tier_parse_u64(v, &g.shards) < 0 || g.shards == 0 || g.shards > 1000000)
                return usage_err("--shards: '%s' is not a count in 1..1000000", v);
        } else if (strcmp(a, "--shard-size") == 0) {
            if (tier_parse_size(v, &g.shard_bytes) < 0 || g.shard_bytes == 0)
                return usage_err("--shard-size: '%s' is not a size (e.g. 256M)", v);
            have_shard_size = 1;
        } else if (strcmp(a, "--seed") == 0) {
            if (tier_parse_u64(v, &g.seed) < 0)
                return usage_err("--seed: '%s' is not a whole number", v);
        } else {
            return usage_err("unknown option '%s'", a);
        }
    }
    if (!dir)
        return usage_err("%s", "missing DIR");
    if (g.shards && (have_files || have_size))
        return usage_err("%s", "--shards cannot be combined with --files/--size");
    if (!g.shards && have_shard_size)
        return usage_err("%s", "--shard-size needs --shards");
    int rc = tb_gen_run(dir, &g, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "tierbench gen: %s\n", err);
        return TB_EXIT_FAIL;
    }
    return TB_EXIT_OK;
}
