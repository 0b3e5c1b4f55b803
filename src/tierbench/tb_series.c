/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_series.c - the per-second time series of a phase, one row of counters per class and second.
 * Written concurrently by every engine thread with relaxed atomics (the counters are independent
 * sums, so no ordering is needed) and read by the progress printer and, after the phase, the
 * reports. Times outside the series land in the last second.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tb_series_init(struct tb_series *s, uint64_t t0_ns, size_t nsec)
{
    memset(s, 0, sizeof(*s));
    s->t0_ns = t0_ns;
    s->nsec = nsec ? nsec : 1;
    for (int c = 0; c < TB_NCLASS; c++) {
        s->slots[c] = calloc(s->nsec, sizeof(struct tb_slot));
        if (!s->slots[c]) {
            tb_series_fini(s);
            return -ENOMEM;
        }
    }
    return 0;
}

void tb_series_fini(struct tb_series *s)
{
    for (int c = 0; c < TB_NCLASS; c++) {
        free(s->slots[c]);
        s->slots[c] = NULL;
    }
}

struct tb_slot *tb_series_slot(struct tb_series *s, enum tb_class c, uint64_t t_ns)
{
    if (!s || !s->slots[c])
        return NULL;
    size_t i = t_ns <= s->t0_ns ? 0 : (size_t)((t_ns - s->t0_ns) / 1000000000ULL);
    if (i >= s->nsec)
        i = s->nsec - 1;
    return &s->slots[c][i];
}

void tb_series_add_lat(struct tb_series *s, enum tb_class c, uint64_t t_ns, uint64_t lat_ns)
{
    struct tb_slot *sl = tb_series_slot(s, c, t_ns);
    if (!sl)
        return;
    atomic_fetch_add_explicit(&sl->lat_sum_ns, lat_ns, memory_order_relaxed);
    uint64_t cur = atomic_load_explicit(&sl->lat_max_ns, memory_order_relaxed);
    while (lat_ns > cur &&
           !atomic_compare_exchange_weak_explicit(&sl->lat_max_ns, &cur, lat_ns,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

void tb_series_add_interval(struct tb_series *s, enum tb_class c, uint64_t a, uint64_t b, int busy)
{
    if (!s || !s->slots[c] || b <= a)
        return;
    while (a < b) {
        uint64_t rel = a > s->t0_ns ? a - s->t0_ns : 0;
        uint64_t sec_end = s->t0_ns + (rel / 1000000000ULL + 1) * 1000000000ULL;
        uint64_t e = b < sec_end ? b : sec_end;
        if (a < s->t0_ns)
            e = b < s->t0_ns ? b : s->t0_ns;
        struct tb_slot *sl = tb_series_slot(s, c, a);
        atomic_fetch_add_explicit(busy ? &sl->busy_ns : &sl->wait_ns, e - a, memory_order_relaxed);
        a = e;
    }
}
