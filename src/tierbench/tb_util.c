/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_util.c - tierbench's small helpers: strict parsing of durations, sizes and size
 * distributions, a seeded splitmix64 RNG and a keyed permutation for per-epoch shuffles.
 * Stateless; thread-safe (RNG state belongs to the caller).
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/strutil.h"

const char *tb_class_name(enum tb_class c)
{
    switch (c) {
    case TB_TRAIN:
        return "training";
    case TB_INFER:
        return "inference";
    case TB_CKPT:
        return "checkpoint";
    default:
        return "?";
    }
}

int tb_parse_double(const char *s, double *out)
{
    char *end = NULL;
    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v))
        return -EINVAL;
    *out = v;
    return 0;
}

int tb_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
    uint64_t v = 0;
    int rc = tier_parse_u64(s, &v);
    if (rc < 0)
        return rc;
    if (v < min || v > max)
        return -ERANGE;
    *out = (unsigned)v;
    return 0;
}

int tb_parse_duration_ns(const char *s, uint64_t *out)
{
    char *end = NULL;
    if (!s || !*s || *s == '-' || *s == '+')
        return -EINVAL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return -EINVAL;
    double mult;
    if (strcmp(end, "ns") == 0)
        mult = 1;
    else if (strcmp(end, "us") == 0)
        mult = 1e3;
    else if (strcmp(end, "ms") == 0)
        mult = 1e6;
    else if (strcmp(end, "s") == 0)
        mult = 1e9;
    else if (strcmp(end, "m") == 0)
        mult = 60e9;
    else if (strcmp(end, "h") == 0)
        mult = 3600e9;
    else
        return -EINVAL; /* a bare number is ambiguous: the unit is required */
    double ns = v * mult;
    if (ns > 1e18)
        return -ERANGE;
    *out = (uint64_t)(ns + 0.5);
    return 0;
}

int tb_parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
    char a[64], b[64];
    const char *dash = s ? strchr(s, '-') : NULL;
    if (!dash || (size_t)(dash - s) >= sizeof(a) || strlen(dash + 1) >= sizeof(b))
        return -EINVAL;
    memcpy(a, s, (size_t)(dash - s));
    a[dash - s] = '\0';
    tier_strlcpy(b, dash + 1, sizeof(b));
    uint64_t x, y;
    if (tier_parse_size(a, &x) < 0 || tier_parse_size(b, &y) < 0)
        return -EINVAL;
    if (x == 0 || x > y)
        return -ERANGE;
    *lo = x;
    *hi = y;
    return 0;
}

int tb_size_dist_parse(const char *s, struct tb_size_dist *out)
{
    struct tb_size_dist d = {0};
    if (!s)
        return -EINVAL;
    if (strncmp(s, "fixed:", 6) == 0) {
        d.kind = TB_SIZE_FIXED;
        if (tier_parse_size(s + 6, &d.a) < 0 || d.a == 0)
            return -EINVAL;
    } else if (strncmp(s, "uniform:", 8) == 0) {
        d.kind = TB_SIZE_UNIFORM;
        if (tb_parse_range(s + 8, &d.a, &d.b) < 0)
            return -EINVAL;
    } else if (strncmp(s, "lognormal:", 10) == 0) {
        char med[64];
        const char *comma = strchr(s + 10, ',');
        if (!comma || (size_t)(comma - (s + 10)) >= sizeof(med))
            return -EINVAL;
        memcpy(med, s + 10, (size_t)(comma - (s + 10)));
        med[comma - (s + 10)] = '\0';
        if (tier_parse_size(med, &d.a) < 0 || d.a == 0)
            return -EINVAL;
        if (tb_parse_double(comma + 1, &d.sigma) < 0 || d.sigma < 0 || d.sigma > 5)
            return -EINVAL;
        d.kind = TB_SIZE_LOGNORMAL;
    } else {
        return -EINVAL;
    }
    *out = d;
    return 0;
}

uint64_t tb_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t tb_rng_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return tb_mix64(*state);
}

double tb_rng_unit(uint64_t *state)
{
    return (double)(tb_rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t tb_size_dist_sample(const struct tb_size_dist *d, uint64_t *rng)
{
    switch (d->kind) {
    case TB_SIZE_FIXED:
        return d->a;
    case TB_SIZE_UNIFORM:
        return d->a + tb_rng_next(rng) % (d->b - d->a + 1);
    case TB_SIZE_LOGNORMAL: {
        double u1 = 1.0 - tb_rng_unit(rng); /* (0, 1] so the log is finite */
        double u2 = tb_rng_unit(rng);
        double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
        double v = (double)d->a * exp(d->sigma * z);
        if (v < 1.0)
            v = 1.0;
        if (v > 1e12)
            v = 1e12;
        return (uint64_t)v;
    }
    }
    return d->a;
}

uint64_t tb_perm(uint64_t i, uint64_t n, uint64_t key)
{
    if (n <= 1)
        return 0;
    unsigned bits = 64u - (unsigned)__builtin_clzll(n - 1);
    unsigned half = (bits + 1) / 2;
    if (half == 0)
        half = 1;
    uint64_t mask = ((uint64_t)1 << half) - 1;
    uint64_t x = i;
    do {
        uint64_t l = x >> half, r = x & mask;
        for (unsigned round = 0; round < 4; round++) {
            uint64_t f = tb_mix64(r ^ key ^ ((uint64_t)round * 0x9e3779b97f4a7c15ULL)) & mask;
            uint64_t nl = r;
            r = l ^ f;
            l = nl;
        }
        x = (l << half) | r;
    } while (x >= n); /* cycle walking stays inside [0, n) and keeps the bijection */
    return x;
}

void tb_sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000ULL),
                          .tv_nsec = (long)(t_ns % 1000000000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}
