/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hintwin.c - the prefetch window over a known read order (src/hints/hintwin.c), the policy
 * of epoch-order hints:
 *
 *   - invariants under thousands of random appends, seeks and bound changes, recomputed by brute
 *     force after every step: the window is exactly the distinct items of seq[cursor, end), its
 *     bytes never exceed max_bytes nor its items max_items (but for the cursor's own entry), and
 *     end is as far as the bounds allow (the window is not short either);
 *   - enter/leave callbacks: each item enters once per stay, in the order of its first use;
 *   - next-use eviction against a brute-force optimum: on 300 random small traces (up to 5 items,
 *     14 requests, a cache of 1-3 items, every request cached on the way), the hinted cache with a
 *     window of one item fetches exactly as often as the best of every possible eviction choice
 *     (MIN); with a larger window it never fetches more than the brute force plus what the window
 *     prefetches for requests not yet due, and never holds more than the cache;
 *   - a victim is never in the window, and one never used again goes first.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hints/hintwin.h"
#include "testutil.h"

/* ---- invariants ---------------------------------------------------------------------------- */

#define NITEMS 40
#define MAXSEQ 4000

static uint64_t isize(uint32_t x)
{
    return 1 + (x * 7919u) % 100;
}

struct cbs {
    int entered[NITEMS];
    int left[NITEMS];
    uint64_t last_enter_pos;
    int order_bad;
};

static void on_enter(void *ud, uint32_t item, uint64_t pos)
{
    struct cbs *c = ud;
    c->entered[item]++;
    if (pos < c->last_enter_pos)
        c->order_bad++;
    c->last_enter_pos = pos;
}

static void on_leave(void *ud, uint32_t item, uint64_t pos)
{
    (void)pos;
    struct cbs *c = ud;
    c->left[item]++;
}

static void check_window(struct hintwin *w, const uint32_t *seq, uint64_t max_items,
                         uint64_t max_bytes, bool filled)
{
    uint64_t cur = hintwin_cursor(w), end = hintwin_end(w), len = hintwin_len(w);
    assert_true(cur <= end && end <= len);
    bool in[NITEMS] = {0};
    uint64_t items = 0, bytes = 0;
    for (uint64_t p = cur; p < end; p++)
        if (!in[seq[p]]) {
            in[seq[p]] = true;
            items++;
            bytes += isize(seq[p]);
        }
    for (uint32_t x = 0; x < NITEMS; x++)
        assert_int_equal(hintwin_contains(w, x), in[x]);
    assert_int_equal(hintwin_items(w), items);
    assert_int_equal(hintwin_bytes(w), bytes);
    if (items > 1) { /* bounds hold, but for an item that entered an empty window alone */
        assert_true(!max_items || items <= max_items);
        assert_true(!max_bytes || bytes <= max_bytes);
    }
    if (filled && cur < len) /* the cursor's entry is always in, once filled */
        assert_true(end > cur);
}

/* After a fill, the window is not short: the next entry would break a bound (or is in already,
 * which fill would have taken). */
static void check_full(struct hintwin *w, const uint32_t *seq, uint64_t max_items,
                       uint64_t max_bytes)
{
    uint64_t end = hintwin_end(w);
    if (end == hintwin_len(w) || end == hintwin_cursor(w))
        return;
    uint32_t x = seq[end];
    assert_false(hintwin_contains(w, x));
    bool items_full = max_items && hintwin_items(w) + 1 > max_items;
    bool bytes_full = max_bytes && hintwin_bytes(w) + isize(x) > max_bytes;
    assert_true(items_full || bytes_full);
}

static void test_invariants_random(void **state)
{
    (void)state;
    uint64_t rng = 77;
    uint32_t *seq = malloc(MAXSEQ * sizeof(*seq));
    for (int round = 0; round < 20; round++) {
        uint64_t max_items = tu_rand_next(&rng) % 8, max_bytes = tu_rand_next(&rng) % 400;
        struct hintwin *w = NULL;
        assert_int_equal(hintwin_new(max_items, max_bytes, &w), 0);
        struct cbs c = {0};
        uint64_t len = 0;
        for (int op = 0; op < 600; op++) {
            unsigned what = (unsigned)(tu_rand_next(&rng) % 10);
            if (what < 4 && len < MAXSEQ) {
                uint32_t x = (uint32_t)(tu_rand_next(&rng) % NITEMS);
                assert_int_equal(hintwin_append(w, x, isize(x)), 0);
                seq[len++] = x;
            } else if (what < 8) {
                uint64_t cur = hintwin_cursor(w);
                uint64_t to = cur + tu_rand_next(&rng) % 4;
                hintwin_seek(w, to > len ? len : to, on_leave, &c);
            } else if (what < 9) {
                max_items = tu_rand_next(&rng) % 8;
                max_bytes = tu_rand_next(&rng) % 400;
                hintwin_set_bounds(w, max_items, max_bytes, on_leave, &c);
                c.last_enter_pos = 0; /* a shrunk window refills from its new end */
            }
            check_window(w, seq, max_items, max_bytes, false);
            hintwin_fill(w, on_enter, &c);
            check_window(w, seq, max_items, max_bytes, true);
            check_full(w, seq, max_items, max_bytes);
            /* every item in the window entered once more than it left */
            for (uint32_t x = 0; x < NITEMS; x++)
                assert_int_equal(c.entered[x] - c.left[x], hintwin_contains(w, x) ? 1 : 0);
        }
        assert_int_equal(c.order_bad, 0);
        hintwin_free(w);
    }
    free(seq);
}

/* ---- next-use eviction vs brute force ------------------------------------------------------- */

#define BF_ITEMS 5
#define BF_LEN 14

/* Fewest fetches for reqs[i..n) from cached set mask with room for cap items: every request is
 * cached on the way (a miss evicts one item when full), as the hinted cache does. */
static int brute(const uint32_t *reqs, int n, int i, unsigned mask, int cap)
{
    if (i == n)
        return 0;
    unsigned bit = 1u << reqs[i];
    if (mask & bit)
        return brute(reqs, n, i + 1, mask, cap);
    if (__builtin_popcount(mask) < cap)
        return 1 + brute(reqs, n, i + 1, mask | bit, cap);
    int best = 1 << 30;
    for (int v = 0; v < BF_ITEMS; v++)
        if (mask & (1u << v)) {
            int f = 1 + brute(reqs, n, i + 1, (mask & ~(1u << v)) | bit, cap);
            if (f < best)
                best = f;
        }
    return best;
}

struct hcache {
    struct hintwin *w;
    int cap, used, fetches, overfull;
};

static void h_enter(void *ud, uint32_t item, uint64_t pos)
{
    (void)pos;
    struct hcache *h = ud;
    if (hintwin_is_held(h->w, item))
        return;
    h->fetches++;
    uint32_t v;
    while (h->used >= h->cap && hintwin_victim(h->w, &v)) {
        assert_false(hintwin_contains(h->w, v));
        hintwin_held(h->w, v, false);
        h->used--;
    }
    if (h->used < h->cap) {
        hintwin_held(h->w, item, true);
        h->used++;
    } else {
        h->overfull++; /* the window alone is larger than the cache */
    }
}

static int hinted(const uint32_t *reqs, int n, int cap, uint64_t window)
{
    struct hintwin *w = NULL;
    assert_int_equal(hintwin_new(window, 0, &w), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(hintwin_append(w, reqs[i], 1), 0);
    struct hcache h = {.w = w, .cap = cap};
    for (int i = 0; i < n; i++) {
        hintwin_seek(w, (uint64_t)i, NULL, NULL);
        hintwin_fill(w, h_enter, &h);
        assert_true(hintwin_is_held(w, reqs[i])); /* the request is cached when it is due */
        assert_true(h.used <= cap);
        assert_true(hintwin_held_bytes(w) == (uint64_t)h.used);
    }
    assert_int_equal(h.overfull, 0);
    hintwin_free(w);
    return h.fetches;
}

static void test_next_use_vs_brute_force(void **state)
{
    (void)state;
    uint64_t rng = 2026;
    int worse = 0;
    for (int t = 0; t < 300; t++) {
        uint32_t reqs[BF_LEN];
        int n = 4 + (int)(tu_rand_next(&rng) % (BF_LEN - 3));
        int nitems = 2 + (int)(tu_rand_next(&rng) % (BF_ITEMS - 1));
        for (int i = 0; i < n; i++)
            reqs[i] = (uint32_t)(tu_rand_next(&rng) % (uint64_t)nitems);
        int cap = 1 + (int)(tu_rand_next(&rng) % 3);
        int opt = brute(reqs, n, 0, 0, cap);
        assert_int_equal(hinted(reqs, n, cap, 1), opt); /* window 1: MIN itself */
        int pre = hinted(reqs, n, cap, (uint64_t)cap);  /* prefetching up to the cache */
        assert_true(pre >= opt);                        /* nothing beats the optimum */
        worse += pre > opt;
    }
    print_message("prefetch windows as large as the cache fetched more than MIN on %d of 300 "
                  "traces\n",
                  worse);
}

static void test_victim_order(void **state)
{
    (void)state;
    struct hintwin *w = NULL;
    assert_int_equal(hintwin_new(1, 0, &w), 0);
    /* a b c a b: after c, a (next at 3) is nearer than b (next at 4); c has no next use */
    static const uint32_t s[] = {0, 1, 2, 0, 1};
    for (int i = 0; i < 5; i++)
        assert_int_equal(hintwin_append(w, s[i], 10), 0);
    for (uint32_t x = 0; x < 3; x++) {
        hintwin_seek(w, x, NULL, NULL);
        hintwin_fill(w, NULL, NULL);
        hintwin_held(w, x, true);
    }
    hintwin_seek(w, 3, NULL, NULL); /* c left too; the window holds a (entry 3) */
    hintwin_fill(w, NULL, NULL);
    assert_true(hintwin_contains(w, 0));
    uint32_t v = 99;
    assert_true(hintwin_victim(w, &v));
    assert_int_equal(v, 2); /* never used again */
    hintwin_held(w, 2, false);
    assert_true(hintwin_victim(w, &v));
    assert_int_equal(v, 1); /* b, not a: a is in the window */
    hintwin_held(w, 1, false);
    assert_false(hintwin_victim(w, &v));
    assert_int_equal(hintwin_held_bytes(w), 10);
    /* a next use revealed later moves an item back from "never" */
    assert_int_equal(hintwin_append(w, 2, 10), 0);
    hintwin_held(w, 2, true);
    hintwin_seek(w, 5, NULL, NULL); /* a left (no next use); c's next use is entry 5 */
    assert_true(hintwin_victim(w, &v));
    assert_int_equal(v, 0);
    assert_int_equal(hintwin_append(w, 99, 1), 0);
    assert_int_equal(hintwin_append(w, HINTWIN_ITEMS_MAX, 1), -EINVAL);
    hintwin_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariants_random),
        cmocka_unit_test(test_next_use_vs_brute_force),
        cmocka_unit_test(test_victim_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
