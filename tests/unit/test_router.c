/* SPDX-License-Identifier: Apache-2.0 */
/* test_router.c - unit tests for src/cluster/router: which peer a node asks for a block and what
 * it does when the peer fails. Two real peer endpoints (peer.c on 127.0.0.1, port 0) serve
 * deterministic bytes; the membership is a view of the test's own (the view callback), so no
 * RADOS is needed.
 *
 * Asserts: a block owned by a peer comes from that peer, right, and one owned by this node is
 * -EAGAIN (self); every block goes where placement puts it; a dead peer costs one failed request
 * (connect), is skipped (its blocks go to the others) until the view's epoch changes; a block of
 * its own (or one it serves) is asked of the next node only as a handover (a copy that node
 * holds; a 404 is no failure); a fenced node asks no peer; a consume-only node (no address) owns
 * nothing; no sharing member: alone; a node loads a block it does not hold only for an asker it
 * ranks before (router_serves_for), and a skipped owner's next choice is such a node; every
 * request sent passed admission first (a handover without waiting), and one admission refused
 * goes to the backend as "admission", unsent. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/peer.h"
#include "cluster/peer_proto.h"
#include "cluster/place.h"
#include "cluster/router.h"

#define SECRET "router-test-secret-0123456789"
#define BS 4096u
#define SIZE (64ull * BS)

static uint8_t byte_of(const struct peer_block *b, uint64_t at)
{
    return (uint8_t)(b->index * 131 + at * 7 + (uint8_t)b->key[0]);
}

struct srv {
    struct peer_server *s;
    char addr[64];
    int served;
    bool holds; /* answers a handover (cached_only): it holds every block */
    int warmed;
};

static ssize_t serve(void *ud, const char *from, const struct peer_block *b, void *buf, size_t len)
{
    struct srv *sv = ud;
    (void)from;
    if (b->cached_only && !sv->holds)
        return -ENOENT;
    if (b->warm) { /* fetched into this node's cache: none of it goes back */
        __atomic_fetch_add(&sv->warmed, 1, __ATOMIC_RELAXED);
        return (ssize_t)len;
    }
    uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        p[i] = byte_of(b, i);
    __atomic_fetch_add(&sv->served, 1, __ATOMIC_RELAXED);
    return (ssize_t)len;
}

static void srv_start(struct srv *sv)
{
    struct peer_server_conf c = {.listen = "127.0.0.1:0",
                                 .secret = SECRET,
                                 .secret_len = strlen(SECRET),
                                 .serve = serve,
                                 .ud = sv};
    assert_int_equal(peer_server_start(&c, &sv->s), 0);
    snprintf(sv->addr, sizeof(sv->addr), "127.0.0.1:%u", (unsigned)peer_server_port(sv->s));
}

/* the test's membership: self "a" and peers "b", "c" */
struct world {
    struct member_entry v[3];
    size_t n;
    uint64_t epoch;
    bool fenced;
};

static int view(void *ud, struct member_entry **out, size_t *n, uint64_t *epoch)
{
    struct world *w = ud;
    *out = malloc(sizeof(w->v));
    if (!*out)
        return -ENOMEM;
    memcpy(*out, w->v, sizeof(w->v));
    *n = w->n;
    *epoch = w->epoch;
    return 0;
}

static bool may_serve(void *ud)
{
    return !((struct world *)ud)->fenced;
}

static void entry(struct member_entry *e, const char *id, const char *addr, uint64_t inc)
{
    memset(e, 0, sizeof(*e));
    snprintf(e->id, sizeof(e->id), "%s", id);
    snprintf(e->addr, sizeof(e->addr), "%s", addr);
    e->weight = 1.0;
    e->incarnation = inc;
}

static struct peer_block blk(uint64_t i)
{
    return (struct peer_block){.backend = "s3",
                               .key = "k/obj",
                               .etag = "e1",
                               .version = "",
                               .size = SIZE,
                               .block_size = BS,
                               .index = i,
                               .cls = TIER_IO_TRAINING};
}

/* The owner of block i over the members of w that share, as the router places it. */
static const char *owner_of(const struct world *w, uint64_t i)
{
    struct place_node nodes[3];
    size_t map[3], k = 0;
    for (size_t m = 0; m < w->n; m++)
        if (w->v[m].addr[0]) {
            nodes[k] = (struct place_node){.hash = place_node_hash(w->v[m].id), .weight = 1.0};
            map[k++] = m;
        }
    struct peer_block b = blk(i);
    char name[PEER_NAME_MAX + 1];
    int len = peer_block_name(&b, name, sizeof(name));
    assert_true(len > 0);
    ssize_t o = place_owner(nodes, k, place_block_id(name, (size_t)len, i));
    return o < 0 ? NULL : w->v[map[o]].id;
}

/* The rank of member id in block i's order over the members of w that share (0: the owner), or
 * -1 when it does not share. */
static int rank_of(const struct world *w, uint64_t i, const char *id)
{
    struct place_node nodes[3];
    size_t map[3], order[3], k = 0;
    for (size_t m = 0; m < w->n; m++)
        if (w->v[m].addr[0]) {
            nodes[k] =
                (struct place_node){.hash = place_node_hash(w->v[m].id), .weight = w->v[m].weight};
            map[k++] = m;
        }
    struct peer_block b = blk(i);
    char name[PEER_NAME_MAX + 1];
    int len = peer_block_name(&b, name, sizeof(name));
    assert_true(len > 0);
    ssize_t got = place_rank(nodes, k, place_block_id(name, (size_t)len, i), k, order);
    for (ssize_t r = 0; r < got; r++)
        if (strcmp(w->v[map[order[r]]].id, id) == 0)
            return (int)r;
    return -1;
}

struct fix {
    struct srv b, c;
    struct world w;
    struct peer_client *pc;
    struct router *r;
};

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    srv_start(&f->b);
    srv_start(&f->c);
    entry(&f->w.v[0], "a", "127.0.0.1:1", 1); /* self: never asked */
    entry(&f->w.v[1], "b", f->b.addr, 2);
    entry(&f->w.v[2], "c", f->c.addr, 3);
    f->w.n = 3;
    f->w.epoch = 1;
    struct peer_client_conf pcc = {
        .node_id = "a", .secret = SECRET, .secret_len = strlen(SECRET), .stall_ms = 60000};
    assert_int_equal(peer_client_new(&pcc, &f->pc), 0);
    struct router_conf rc = {.self_id = "a",
                             .probe_ms = 600000,
                             .peer = f->pc,
                             .view = view,
                             .may_serve = may_serve,
                             .ud = &f->w};
    assert_int_equal(router_new(&rc, &f->r), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    router_free(f->r);
    peer_client_free(f->pc);
    peer_server_stop(f->b.s);
    peer_server_stop(f->c.s);
    free(f);
    return 0;
}

/* Fetches block i through the router: its result and why. */
static ssize_t fetch(struct fix *f, uint64_t i, uint8_t *buf, enum router_why *why)
{
    struct peer_block b = blk(i);
    *why = ROUTER_WHY_N;
    return router_fetch(f->r, &b, buf, peer_block_len(&b), false, NULL, why);
}

static void test_owner_serves(void **state)
{
    struct fix *f = *state;
    uint8_t buf[BS];
    int from_peer = 0, own = 0;
    for (uint64_t i = 0; i < 64; i++) {
        enum router_why why;
        ssize_t n = fetch(f, i, buf, &why);
        const char *o = owner_of(&f->w, i);
        if (strcmp(o, "a") == 0) {
            assert_int_equal(n, -EAGAIN);
            assert_int_equal(why, ROUTER_SELF);
            own++;
            continue;
        }
        assert_int_equal(n, BS);
        struct peer_block b = blk(i);
        for (size_t k = 0; k < BS; k++)
            assert_int_equal(buf[k], byte_of(&b, k));
        from_peer++;
    }
    assert_true(own > 5 && from_peer > 20); /* about a third and two thirds of 64 */
    assert_int_equal(f->b.served + f->c.served, from_peer);
    struct router_stats st;
    struct router_member *m = NULL;
    size_t n = 0;
    assert_int_equal(router_stats_get(f->r, &st, &m, &n), 0);
    assert_int_equal(st.peer_blocks, (uint64_t)from_peer);
    assert_int_equal(st.backend[ROUTER_SELF], (uint64_t)own);
    assert_int_equal(n, 3);
    assert_int_equal(m[1].ok + m[2].ok, (uint64_t)from_peer);
    assert_int_equal(m[1].ok, (uint64_t)f->b.served);
    assert_true(m[0].share > 0.33 && m[0].share < 0.34);
    free(m);
}

static uint64_t connect_failures(struct fix *f)
{
    struct peer_client_stats cs;
    peer_client_stats_get(f->pc, &cs);
    return cs.fail[PEER_FAIL_CONNECT];
}

static void test_dead_peer_skipped(void **state)
{
    struct fix *f = *state;
    uint8_t buf[BS];
    peer_server_stop(f->c.s); /* c dies; the view still lists it */
    f->c.s = NULL;
    int c_blocks = 0;
    for (uint64_t i = 0; i < 64; i++) {
        enum router_why why;
        ssize_t n = fetch(f, i, buf, &why);
        if (strcmp(owner_of(&f->w, i), "c") == 0)
            c_blocks++;
        if (n < 0) /* this node's own (or a handover c could not give), or c's first */
            assert_true(n == -EAGAIN && (why == ROUTER_SELF || why == ROUTER_PEER_FAILED));
        else
            assert_int_equal(n, BS);
    }
    assert_true(c_blocks > 5);
    /* one failed request to c (a block of c's, or a handover asked of it); then c is skipped */
    assert_int_equal(connect_failures(f), 1);
    struct router_stats st;
    struct router_member *m = NULL;
    size_t n = 0;
    assert_int_equal(router_stats_get(f->r, &st, &m, &n), 0);
    assert_int_equal(st.skips, 1);
    assert_true(m[2].skipped && m[2].failures == 1 && m[2].requests == 1);
    free(m);

    /* a new epoch without c: its blocks have new owners, nothing fails */
    f->w.n = 2;
    f->w.epoch = 2;
    for (uint64_t i = 0; i < 64; i++) {
        enum router_why why;
        ssize_t r = fetch(f, i, buf, &why);
        assert_true(r == BS || why == ROUTER_SELF);
    }
    assert_int_equal(connect_failures(f), 1);
    /* c back in a new epoch: asked again (and failing again, once) */
    f->w.n = 3;
    f->w.epoch = 3;
    for (uint64_t i = 0; i < 64; i++) {
        enum router_why why;
        fetch(f, i, buf, &why);
    }
    assert_int_equal(connect_failures(f), 2);
}

/* This node's own blocks, and blocks it serves: only a copy the next node holds (handover) */
static void test_handover(void **state)
{
    struct fix *f = *state;
    uint8_t buf[BS];
    enum router_why why;
    f->b.holds = f->c.holds = true;
    int own = 0;
    for (uint64_t i = 0; i < 64; i++) {
        bool mine = strcmp(owner_of(&f->w, i), "a") == 0;
        own += mine;
        assert_int_equal(fetch(f, i, buf, &why), BS);
        struct peer_block b = blk(i);
        for (size_t k = 0; k < BS; k++)
            assert_int_equal(buf[k], byte_of(&b, k));
    }
    struct router_stats st;
    assert_int_equal(router_stats_get(f->r, &st, NULL, NULL), 0);
    assert_int_equal(st.handovers, (uint64_t)own);
    assert_int_equal(st.peer_blocks, 64);

    /* they hold nothing: a handover is a 404, no failure, the backend (self) */
    f->b.holds = f->c.holds = false;
    int self = 0;
    for (uint64_t i = 0; i < 64; i++) {
        ssize_t n = fetch(f, i, buf, &why);
        if (n < 0) {
            assert_int_equal(why, ROUTER_SELF);
            self++;
        }
    }
    assert_int_equal(self, own);
    assert_int_equal(router_stats_get(f->r, &st, NULL, NULL), 0);
    assert_int_equal(st.skips, 0);

    /* serving a peer: never a full fetch from another node, only a handover */
    int before = f->b.served + f->c.served;
    for (uint64_t i = 0; i < 64; i++) {
        struct peer_block b = blk(i);
        assert_int_equal(router_fetch(f->r, &b, buf, BS, true, NULL, &why), -EAGAIN);
        assert_int_equal(why, ROUTER_SELF);
    }
    assert_int_equal(f->b.served + f->c.served, before);
}

/* A cluster stage: the blocks other nodes own are warmed there, this node's own are its own */
static void test_warm(void **state)
{
    struct fix *f = *state;
    int own = 0;
    for (uint64_t i = 0; i < 64; i++) {
        struct peer_block b = blk(i);
        enum router_why why = ROUTER_WHY_N;
        int rc = router_warm(f->r, &b, NULL, &why);
        if (strcmp(owner_of(&f->w, i), "a") == 0) {
            assert_int_equal(rc, -EAGAIN);
            assert_int_equal(why, ROUTER_SELF);
            own++;
        } else {
            assert_int_equal(rc, 0);
        }
    }
    assert_int_equal(f->b.warmed + f->c.warmed, 64 - own);
    assert_int_equal(f->b.served + f->c.served, 0); /* no bytes went back */
    struct router_stats st;
    assert_int_equal(router_stats_get(f->r, &st, NULL, NULL), 0);
    assert_int_equal(st.warms, (uint64_t)(64 - own));
    assert_int_equal(st.peer_bytes, 0);
    struct peer_server_stats ss;
    peer_server_stats_get(f->b.s, &ss);
    assert_int_equal(ss.warmed, (uint64_t)f->b.warmed);
    assert_int_equal(ss.served_bytes, 0);
}

/* The admission hooks' record (test_admission). */
static struct {
    bool refuse;
    int admits, no_wait, warms, dones, done_ok, done_no_wait;
    size_t bytes;
    const struct tier_ioctx *io; /* the last admit's */
} g_adm;

static int adm_enter(void *ud, const struct tier_ioctx *io, size_t bytes, bool warm, bool may_wait)
{
    (void)ud;
    g_adm.admits++;
    g_adm.no_wait += !may_wait;
    g_adm.warms += warm;
    g_adm.bytes += bytes;
    g_adm.io = io;
    return g_adm.refuse ? -ETIMEDOUT : 0;
}

static void adm_done(void *ud, const struct tier_ioctx *io, size_t bytes, bool warm, bool may_wait,
                     ssize_t result, uint64_t service_ns)
{
    (void)ud;
    (void)io;
    (void)warm;
    (void)service_ns;
    g_adm.dones++;
    g_adm.done_no_wait += !may_wait;
    g_adm.done_ok += result == (ssize_t)bytes;
}

/* Every peer request passes admission before it is sent: a fetch may wait, a handover may not, a
 * warm costs no bytes; a refusal sends nothing and counts "admission". */
static void test_admission(void **state)
{
    struct fix *f = *state;
    struct router_conf rc = {.self_id = "a",
                             .probe_ms = 600000,
                             .peer = f->pc,
                             .view = view,
                             .may_serve = may_serve,
                             .admit = adm_enter,
                             .admit_done = adm_done,
                             .ud = &f->w};
    struct router *r = NULL;
    assert_int_equal(router_new(&rc, &r), 0);
    memset(&g_adm, 0, sizeof(g_adm));
    const struct tier_ioctx io = {.tenant = 7, .cls = TIER_IO_INFERENCE};
    uint8_t buf[BS];
    enum router_why why;
    int own = 0;
    for (uint64_t i = 0; i < 64; i++) {
        struct peer_block b = blk(i);
        b.cls = io.cls;
        own += strcmp(owner_of(&f->w, i), "a") == 0;
        ssize_t n = router_fetch(r, &b, buf, BS, false, &io, &why);
        assert_true(n == BS || (n == -EAGAIN && why == ROUTER_SELF)); /* holds nothing */
    }
    assert_int_equal(g_adm.admits, 64); /* every block: a fetch, or a handover of its own */
    assert_int_equal(g_adm.no_wait, own);
    assert_int_equal(g_adm.bytes, 64 * BS);
    assert_ptr_equal(g_adm.io, &io);
    assert_int_equal(g_adm.dones, 64);
    assert_int_equal(g_adm.done_no_wait, own);
    assert_int_equal(g_adm.done_ok, 64 - own);
    assert_int_equal(f->b.served + f->c.served, 64 - own);

    /* a warm: no bytes; and every other block refused: unsent, counted, no member's */
    struct peer_block w = blk(0);
    for (uint64_t i = 0; strcmp(owner_of(&f->w, i), "a") == 0; i++)
        w = blk(i + 1);
    assert_int_equal(router_warm(r, &w, &io, &why), 0);
    assert_int_equal(g_adm.warms, 1);
    assert_int_equal(g_adm.bytes, 64 * BS);
    struct router_stats before, after;
    struct router_member *mb = NULL, *ma = NULL;
    size_t nb = 0, na = 0;
    assert_int_equal(router_stats_get(r, &before, &mb, &nb), 0);
    g_adm.refuse = true;
    int served = f->b.served + f->c.served, dones = g_adm.dones;
    for (uint64_t i = 0; i < 64; i++) {
        struct peer_block b = blk(i);
        if (strcmp(owner_of(&f->w, i), "a") == 0)
            continue;
        assert_int_equal(router_fetch(r, &b, buf, BS, false, &io, &why), -EAGAIN);
        assert_int_equal(why, ROUTER_ADMIT);
    }
    assert_int_equal(f->b.served + f->c.served, served);
    assert_int_equal(g_adm.dones, dones);
    assert_int_equal(router_stats_get(r, &after, &ma, &na), 0);
    assert_int_equal(after.backend[ROUTER_ADMIT], (uint64_t)(64 - own));
    assert_int_equal(after.backend[ROUTER_PEER_FAILED], before.backend[ROUTER_PEER_FAILED]);
    assert_int_equal(after.skips, 0);
    assert_int_equal(na, nb);
    for (size_t k = 0; k < na; k++) {
        assert_int_equal(ma[k].inflight, 0);
        assert_int_equal(ma[k].requests, mb[k].requests);
        assert_int_equal(ma[k].failures, 0);
    }
    assert_string_equal(router_why_name(ROUTER_ADMIT), "admission");
    free(mb);
    free(ma);
    router_free(r);
}

static void test_fenced_alone_consumer(void **state)
{
    struct fix *f = *state;
    uint8_t buf[BS];
    enum router_why why;
    f->w.fenced = true;
    for (uint64_t i = 0; i < 16; i++) {
        assert_int_equal(fetch(f, i, buf, &why), -EAGAIN);
        assert_int_equal(why, ROUTER_FENCED);
    }
    assert_int_equal(f->b.served + f->c.served, 0);
    f->w.fenced = false;

    /* consume-only: this node has no address, so every block is a peer's */
    entry(&f->w.v[0], "a", "", 1);
    f->w.epoch = 2;
    for (uint64_t i = 0; i < 64; i++)
        assert_int_equal(fetch(f, i, buf, &why), BS);
    assert_int_equal(f->b.served + f->c.served, 64);

    /* no member shares: alone */
    entry(&f->w.v[1], "b", "", 2);
    entry(&f->w.v[2], "c", "", 3);
    f->w.epoch = 3;
    assert_int_equal(fetch(f, 0, buf, &why), -EAGAIN);
    assert_int_equal(why, ROUTER_ALONE);
}

/* router_serves_for: this node ("a") loads a block it does not hold for an asker it ranks
 * before, and for none it ranks after (so of two nodes exactly one would load for the other);
 * an asker that shares nothing (consume-only, or unknown) is always served; a node that shares
 * nothing serves no one. And the pick of a node whose owner is skipped ranks before it, so the
 * pick agrees to load the block (router.c R4). */
static void test_serves_for(void **state)
{
    struct fix *f = *state;
    int first = 0, last = 0;
    for (uint64_t i = 0; i < 64; i++) {
        struct peer_block b = blk(i);
        int ra = rank_of(&f->w, i, "a");
        static const char *const askers[] = {"b", "c"};
        for (size_t k = 0; k < 2; k++) {
            bool want = ra < rank_of(&f->w, i, askers[k]);
            assert_int_equal(router_serves_for(f->r, &b, askers[k]), want);
        }
        assert_true(router_serves_for(f->r, &b, "stranger"));
        first += ra == 0;
        last += ra == 2;
    }
    assert_true(first > 5 && last > 5); /* both cases were seen */

    /* unequal weights: b weighs 4, so it ranks before a on most blocks, and the answer follows
     * the weighted scores */
    f->w.v[1].weight = 4.0;
    f->w.epoch = 9;
    int b_first = 0;
    for (uint64_t i = 0; i < 64; i++) {
        struct peer_block b = blk(i);
        bool want = rank_of(&f->w, i, "a") < rank_of(&f->w, i, "b");
        assert_int_equal(router_serves_for(f->r, &b, "b"), want);
        b_first += !want;
    }
    assert_true(b_first > 40); /* 4 / (4 + 1) of the pairs, about 51 of 64 */
    f->w.v[1].weight = 1.0;
    f->w.epoch = 10;

    /* c is dead and skipped: a block a places on b ranks b before a */
    peer_server_stop(f->c.s);
    f->c.s = NULL;
    uint8_t buf[BS];
    int asked_b = 0;
    for (uint64_t i = 0; i < 64; i++) {
        enum router_why why;
        int served = f->b.served;
        ssize_t n = fetch(f, i, buf, &why);
        if (n == BS && f->b.served > served) {
            assert_true(rank_of(&f->w, i, "b") < rank_of(&f->w, i, "a"));
            asked_b++;
        }
    }
    assert_true(asked_b > 5);

    /* b consume-only: served whatever the order; a consume-only: serves no one */
    entry(&f->w.v[1], "b", "", 2);
    f->w.epoch = 2;
    for (uint64_t i = 0; i < 16; i++) {
        struct peer_block b = blk(i);
        assert_true(router_serves_for(f->r, &b, "b"));
    }
    entry(&f->w.v[0], "a", "", 1);
    f->w.epoch = 3;
    for (uint64_t i = 0; i < 16; i++) {
        struct peer_block b = blk(i);
        assert_false(router_serves_for(f->r, &b, "c"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_owner_serves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_peer_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admission, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fenced_alone_consumer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_serves_for, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
