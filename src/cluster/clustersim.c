/* SPDX-License-Identifier: Apache-2.0 */
/* clustersim.c - tier-clustersim: the placement of src/cluster/place.c over a simulated cluster.
 *
 * N nodes (default 1,000) and B blocks (default 1,000,000) of one dataset. It places every block
 * with place_rank(), serves one read of each block with bounded load (place_pick_ranked() over that
 * order, place_pick_bounded() when the order is exhausted), then applies membership changes,
 * alternately a join (a new node) and a leave (a random node, as a crash: its cached blocks are
 * lost), and after each reports how many blocks changed owner.
 *
 * Owners are kept incrementally, the way a member would: on a join only the new node is scored
 * against each block (it takes the blocks where it beats the owner's score); on a leave only the
 * leaving node's blocks are re-placed. --verify recomputes every owner from scratch after each
 * change and fails on the first mismatch.
 *
 * What it prints (ratios to the weighted fair share, so 1.0 is perfect):
 *   owned max/mean    the most blocks any node owns over its share w / W of B
 *   moved per change  blocks that changed owner, in units of B / N (N counting the changed node;
 *                     1.0 is the minimum for an equal-weight node)
 *   egress            object-store reads per block when every node reads the whole dataset
 *                     through its owner: each block once, plus every block a leaving node held
 *                     (a joining node fills from the previous owner, which still lives)
 *   served max/mean   the busiest node's reads over its share, under bounded load (c, 1.25):
 *                     one read of each block, and B reads of Zipf(0.9) popularity (a hot file)
 *   spilled           the fraction of those reads served past the first choice
 * Single-threaded; exits 0, 1 on a --verify mismatch, 2 on bad usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/place.h"
#include "common/strutil.h"

struct sim {
    struct place_node *nodes; /* the members now, [0, n) */
    uint32_t *ids;            /* each member's id number (node-ID), for the report */
    size_t n, cap;
    uint32_t next_id;
    int mixed; /* weights 1, 2 or 4 instead of all 1 */
    size_t blocks;
    uint64_t *block; /* place_block_id() of each block */
    uint32_t *owner; /* index into nodes of each block's owner */
    double *score;   /* the owner's score for the block */
    uint64_t rng;
    /* the changes */
    double moved_sum, moved_max; /* in units of blocks / N */
    size_t changes;
    uint64_t refetched; /* blocks a leaving node held: read again from the object store */
};

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void add_node(struct sim *s)
{
    char id[32];
    uint32_t num = s->next_id++;
    snprintf(id, sizeof(id), "node-%" PRIu32, num);
    static const double weights[] = {1.0, 2.0, 4.0};
    s->nodes[s->n].hash = place_node_hash(id);
    s->nodes[s->n].weight = s->mixed ? weights[splitmix(&s->rng) % 3] : 1.0;
    s->ids[s->n] = num;
    s->n++;
}

static double weight_sum(const struct sim *s)
{
    double w = 0;
    for (size_t i = 0; i < s->n; i++)
        w += s->nodes[i].weight;
    return w;
}

/* The largest of count[i] over its share total * w_i / W. */
static double max_over_share(const struct sim *s, const uint64_t *count, uint64_t total)
{
    double wsum = weight_sum(s), mx = 0;
    for (size_t i = 0; i < s->n; i++) {
        double r = (double)count[i] / ((double)total * s->nodes[i].weight / wsum);
        mx = r > mx ? r : mx;
    }
    return mx;
}

/* Places every block, and serves one read of each with bounded load c in block order. */
static int place_all(struct sim *s, double c, double *served_ratio, double *spilled)
{
    uint64_t *load = calloc(s->n, sizeof(*load));
    if (load == NULL)
        return -ENOMEM;
    uint64_t spills = 0;
    for (size_t b = 0; b < s->blocks; b++) {
        size_t order[4];
        ssize_t k = place_rank(s->nodes, s->n, s->block[b], 4, order);
        if (k <= 0) {
            free(load);
            return k < 0 ? (int)k : -ENOENT;
        }
        s->owner[b] = (uint32_t)order[0];
        s->score[b] = place_score(s->nodes[order[0]].hash, s->block[b], s->nodes[order[0]].weight);
        ssize_t p = place_pick_ranked(s->nodes, s->n, order, (size_t)k, load, b, c);
        if (p < 0)
            p = place_pick_bounded(s->nodes, s->n, s->block[b], load, b, c);
        if (p < 0) {
            free(load);
            return (int)p;
        }
        spills += (size_t)p != order[0];
        load[p]++;
    }
    *served_ratio = max_over_share(s, load, s->blocks);
    *spilled = (double)spills / (double)s->blocks;
    free(load);
    return 0;
}

/* Zipf(alpha) popularity over the blocks: the cumulative weights of ranks 1..B (rank r is block
 * r - 1; block ids are hashed, so rank and placement are unrelated). */
static double *zipf_cdf(size_t n, double alpha)
{
    double *cdf = malloc(n * sizeof(*cdf));
    if (cdf == NULL)
        return NULL;
    double sum = 0;
    for (size_t r = 0; r < n; r++) {
        sum += pow((double)(r + 1), -alpha);
        cdf[r] = sum;
    }
    return cdf;
}

static size_t zipf_draw(const double *cdf, size_t n, uint64_t *rng)
{
    double x = (double)(splitmix(rng) >> 11) * 0x1p-53 * cdf[n - 1];
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* B reads drawn by Zipf(0.9) popularity (a hot file's blocks and a long tail), each served with
 * bounded load c: the busiest node over its share, and the fraction spilled past the owner. */
static int serve_zipf(struct sim *s, double c, double *served_ratio, double *spilled)
{
    uint64_t *load = calloc(s->n, sizeof(*load));
    double *cdf = zipf_cdf(s->blocks, 0.9);
    if (load == NULL || cdf == NULL) {
        free(load);
        free(cdf);
        return -ENOMEM;
    }
    uint64_t spills = 0, rng = s->rng ^ 0x5a5a5a5a5a5a5a5aULL;
    int rc = 0;
    for (uint64_t r = 0; r < s->blocks; r++) {
        size_t b = zipf_draw(cdf, s->blocks, &rng), order[4];
        ssize_t k = place_rank(s->nodes, s->n, s->block[b], 4, order);
        ssize_t p = k > 0 ? place_pick_ranked(s->nodes, s->n, order, (size_t)k, load, r, c) : k;
        if (p == -ENOENT)
            p = place_pick_bounded(s->nodes, s->n, s->block[b], load, r, c);
        if (p < 0) {
            rc = (int)p;
            break;
        }
        spills += (size_t)p != order[0];
        load[p]++;
    }
    if (rc == 0) {
        *served_ratio = max_over_share(s, load, s->blocks);
        *spilled = (double)spills / (double)s->blocks;
    }
    free(load);
    free(cdf);
    return rc;
}

static void note_moved(struct sim *s, uint64_t moved, size_t n_with)
{
    double units = (double)moved / ((double)s->blocks / (double)n_with);
    s->moved_sum += units;
    s->moved_max = units > s->moved_max ? units : s->moved_max;
    s->changes++;
}

/* A new node: it is scored against every block and takes those where it beats the owner. */
static void join(struct sim *s)
{
    add_node(s);
    size_t j = s->n - 1;
    const struct place_node *nd = &s->nodes[j];
    uint64_t moved = 0;
    for (size_t b = 0; b < s->blocks; b++) {
        double sc = place_score(nd->hash, s->block[b], nd->weight);
        if (place_better(sc, nd->hash, s->score[b], s->nodes[s->owner[b]].hash)) {
            s->owner[b] = (uint32_t)j;
            s->score[b] = sc;
            moved++;
        }
    }
    note_moved(s, moved, s->n);
}

/* A random node leaves (the last takes its slot); only its blocks are placed again. */
static void leave(struct sim *s)
{
    size_t x = (size_t)(splitmix(&s->rng) % s->n), last = s->n - 1;
    size_t n_with = s->n;
    s->nodes[x] = s->nodes[last];
    s->ids[x] = s->ids[last];
    s->n--;
    uint64_t moved = 0;
    for (size_t b = 0; b < s->blocks; b++) {
        if (s->owner[b] == x) {
            ssize_t o = place_owner(s->nodes, s->n, s->block[b]);
            s->owner[b] = (uint32_t)o;
            s->score[b] = place_score(s->nodes[o].hash, s->block[b], s->nodes[o].weight);
            moved++;
        } else if (s->owner[b] == last) {
            s->owner[b] = (uint32_t)x;
        }
    }
    s->refetched += moved;
    note_moved(s, moved, n_with);
}

/* Every owner from scratch against the incremental ones: the index of the first block that
 * differs, or -1. */
static long long verify(const struct sim *s)
{
    for (size_t b = 0; b < s->blocks; b++)
        if ((size_t)place_owner(s->nodes, s->n, s->block[b]) != s->owner[b])
            return (long long)b;
    return -1;
}

static double owned_ratio(const struct sim *s)
{
    uint64_t *cnt = calloc(s->n, sizeof(*cnt));
    if (cnt == NULL)
        return NAN;
    for (size_t b = 0; b < s->blocks; b++)
        cnt[s->owner[b]]++;
    double r = max_over_share(s, cnt, s->blocks);
    free(cnt);
    return r;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: tier-clustersim [--nodes N] [--blocks B] [--changes C] [--verify]\n"
               "                       [--mixed-weights] [--c FACTOR] [--seed S]\n"
               "  N nodes (1000) and B blocks (1000000); C membership changes (16), alternately\n"
               "  a join and a leave; --verify recomputes every owner after each change;\n"
               "  --mixed-weights gives each node weight 1, 2 or 4; FACTOR is the bounded-load\n"
               "  factor c (1.25).\n");
}

static int parse_size(const char *arg, const char *what, size_t *out)
{
    uint64_t v;
    if (tier_parse_u64(arg, &v) != 0 || v == 0 || v > UINT32_MAX) {
        fprintf(stderr, "tier-clustersim: %s '%s': want a whole number from 1 to %u\n", what, arg,
                UINT32_MAX);
        return -EINVAL;
    }
    *out = (size_t)v;
    return 0;
}

struct opts {
    size_t nodes, blocks, changes;
    int verify, mixed;
    double c;
    uint64_t seed;
};

/* 0, 1 after --help (printed), or -EINVAL (said why). */
static int parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"nodes", required_argument, NULL, 'n'},
        {"blocks", required_argument, NULL, 'b'},
        {"changes", required_argument, NULL, 'x'},
        {"verify", no_argument, NULL, 'v'},
        {"mixed-weights", no_argument, NULL, 'm'},
        {"c", required_argument, NULL, 'c'},
        {"seed", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        int rc = 0;
        char *end = NULL;
        switch (ch) {
        case 'n':
            rc = parse_size(optarg, "--nodes", &o->nodes);
            break;
        case 'b':
            rc = parse_size(optarg, "--blocks", &o->blocks);
            break;
        case 'x':
            rc = strcmp(optarg, "0") == 0 ? (o->changes = 0, 0)
                                          : parse_size(optarg, "--changes", &o->changes);
            break;
        case 'v':
            o->verify = 1;
            break;
        case 'm':
            o->mixed = 1;
            break;
        case 'c':
            o->c = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(o->c > 0 && o->c < 100)) {
                fprintf(stderr, "tier-clustersim: --c '%s': want a factor such as 1.25\n", optarg);
                rc = -EINVAL;
            }
            break;
        case 's':
            rc = tier_parse_u64(optarg, &o->seed) == 0 ? 0 : -EINVAL;
            if (rc != 0)
                fprintf(stderr, "tier-clustersim: --seed '%s': want a whole number\n", optarg);
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return -EINVAL;
        }
        if (rc != 0)
            return rc;
    }
    if (optind != argc) {
        usage(stderr);
        return -EINVAL;
    }
    return 0;
}

static int sim_init(struct sim *s, const struct opts *o)
{
    memset(s, 0, sizeof(*s));
    s->cap = o->nodes + o->changes;
    s->mixed = o->mixed;
    s->blocks = o->blocks;
    s->rng = o->seed;
    s->nodes = calloc(s->cap, sizeof(*s->nodes));
    s->ids = calloc(s->cap, sizeof(*s->ids));
    s->block = calloc(s->blocks, sizeof(*s->block));
    s->owner = calloc(s->blocks, sizeof(*s->owner));
    s->score = calloc(s->blocks, sizeof(*s->score));
    if (!s->nodes || !s->ids || !s->block || !s->owner || !s->score)
        return -ENOMEM;
    for (size_t i = 0; i < o->nodes; i++)
        add_node(s);
    static const char name[] = "s3/datasets/imagenet/train.tar@etag";
    for (size_t b = 0; b < s->blocks; b++)
        s->block[b] = place_block_id(name, sizeof(name) - 1, b);
    return 0;
}

static void sim_fini(struct sim *s)
{
    free(s->nodes);
    free(s->ids);
    free(s->block);
    free(s->owner);
    free(s->score);
}

int main(int argc, char **argv)
{
    struct opts o = {.nodes = 1000, .blocks = 1000000, .changes = 16, .c = 1.25, .seed = 1};
    int pa = parse_args(argc, argv, &o);
    if (pa != 0)
        return pa > 0 ? 0 : 2;
    if (o.nodes < 2) {
        fprintf(stderr,
                "tier-clustersim: --nodes %zu: want at least 2 (a leave needs a "
                "survivor)\n",
                o.nodes);
        return 2;
    }
    struct sim s;
    int rc = sim_init(&s, &o);
    double t0 = now_s(), served = 0, spilled = 0, zserved = 0, zspilled = 0;
    if (rc == 0)
        rc = place_all(&s, o.c, &served, &spilled);
    if (rc == 0)
        rc = serve_zipf(&s, o.c, &zserved, &zspilled);
    if (rc != 0) {
        fprintf(stderr, "tier-clustersim: %s\n", strerror(-rc));
        sim_fini(&s);
        return 1;
    }
    double owned = owned_ratio(&s), t1 = now_s();
    for (size_t i = 0; i < o.changes; i++) {
        if (i % 2 == 0)
            join(&s);
        else
            leave(&s);
        long long bad = o.verify ? verify(&s) : -1;
        if (bad >= 0) {
            fprintf(stderr,
                    "tier-clustersim: change %zu (%s): block %lld has owner index %" PRIu32
                    " incrementally, %zd from scratch\n",
                    i + 1, i % 2 == 0 ? "join" : "leave", bad, s.owner[bad],
                    place_owner(s.nodes, s.n, s.block[bad]));
            sim_fini(&s);
            return 1;
        }
    }
    double t2 = now_s();
    printf("nodes %zu\nblocks %zu\nweights %s\nchanges %zu\n", o.nodes, o.blocks,
           o.mixed ? "mixed" : "equal", s.changes);
    printf("owned_max_over_mean %.3f\n", owned);
    printf("moved_per_change_mean %.3f\n", s.changes ? s.moved_sum / (double)s.changes : 0.0);
    printf("moved_per_change_max %.3f\n", s.moved_max);
    printf("egress %.4f\n", (double)(s.blocks + s.refetched) / (double)s.blocks);
    printf("served_max_over_mean %.3f\n", served);
    printf("spilled %.3f\n", spilled);
    printf("zipf_served_max_over_mean %.3f\n", zserved);
    printf("zipf_spilled %.3f\n", zspilled);
    printf("bound_c %.2f\n", o.c);
    printf("verified %s\n", o.verify ? "yes" : "no");
    printf("seconds_place %.1f\nseconds_changes %.1f\n", t1 - t0, t2 - t1);
    sim_fini(&s);
    return 0;
}
