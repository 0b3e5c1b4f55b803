/* SPDX-License-Identifier: Apache-2.0 */
/* test_cluster_member.c - src/cluster/member.c against the test Ceph cluster (the rgw fixture,
 * scripts/ceph.sh): two members see each other; a crashed member is removed once its lock
 * lapses; a paused member fences itself before the others remove it, then rejoins with a new
 * incarnation; members joining at once all land (compare-and-swap retries); a re-read reads a
 * few locks, not every member's, and still removes every crashed member; omap keys with a NUL
 * in them ("node.x\0junk", "epoch\0x") are ignored. Each member has its own RADOS client, as
 * separate nodes would. Conditions are polled with deadlines of minutes; where a member's lock
 * lapsing (a stall of 2/3 of a lease) would fail a test, the lease is 20 s. test_osd_restart
 * restarts the OSD (scripts/ceph.sh stop-osd, start-osd), so it runs alone, as the test
 * cluster_osd_restart (TIER_TEST_FILTER), which CTest runs with no other test beside it. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/member.h"
#include "testutil.h"

#define POOL "tierd-cluster-test"
#define DEADLINE_MS (180 * 1000)

struct node {
    rados_t rados;
    rados_ioctx_t io;
    struct member *m;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void connect_node(struct node *n)
{
    const char *dir = getenv("TIER_CEPH_DIR");
    assert_non_null(dir);
    char conf[1024];
    snprintf(conf, sizeof(conf), "%s/ceph.conf", dir);
    assert_int_equal(rados_create(&n->rados, "admin"), 0);
    assert_int_equal(rados_conf_read_file(n->rados, conf), 0);
    rados_conf_set(n->rados, "log_file", "");
    rados_conf_set(n->rados, "rados_osd_op_timeout", "60");
    rados_conf_set(n->rados, "rados_mon_op_timeout", "60");
    assert_int_equal(rados_connect(n->rados), 0);
    int rc = rados_pool_create(n->rados, POOL);
    assert_true(rc == 0 || rc == -EEXIST);
    assert_int_equal(rados_ioctx_create(n->rados, POOL, &n->io), 0);
}

static void disconnect_node(struct node *n)
{
    rados_ioctx_destroy(n->io);
    rados_shutdown(n->rados);
}

/* A cluster name no other run shares. */
static void cluster_name(char *buf, size_t size, const char *what)
{
    snprintf(buf, size, "%s-%d-%lld", what, (int)getpid(), (long long)now_ms());
}

static void join_node(struct node *n, const char *cluster, const char *id, double weight,
                      uint32_t lease_ms)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", 7000 + (int)strlen(id));
    struct member_conf c = {
        .cluster = cluster, .id = id, .addr = addr, .weight = weight, .lease_ms = lease_ms};
    assert_int_equal(member_join(n->io, &c, &n->m), 0);
    /* Polled: a join slower than lease/2 (a loaded machine) may serve only from its first
     * renewal on, which follows at once. */
    int64_t end = now_ms() + DEADLINE_MS;
    while (!member_may_serve(n->m))
        assert_true(now_ms() < end && (pause_ms(20), 1));
}

/* The incarnation of `id` in m's view, 0 when it is not there. */
static uint64_t seen(struct member *m, const char *id)
{
    struct member_entry *v;
    size_t n;
    uint64_t epoch;
    assert_int_equal(member_view(m, &v, &n, &epoch), 0);
    uint64_t inc = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].id, id) == 0)
            inc = v[i].incarnation;
    free(v);
    return inc;
}

/* Polls until `id` is (present) or is not (!present) in m's view; fails at the deadline. */
static void wait_seen(struct member *m, const char *id, int present)
{
    int64_t end = now_ms() + DEADLINE_MS;
    while ((seen(m, id) != 0) != present) {
        assert_true(now_ms() < end);
        pause_ms(20);
    }
}

static void test_two_see_each_other(void **state)
{
    (void)state;
    char cl[96];
    cluster_name(cl, sizeof(cl), "see");
    struct node a, b;
    connect_node(&a);
    connect_node(&b);
    /* A lease long beside a loaded machine's stalls (renewed every lease/3, lapsed only after a
     * renewal is late by 2/3 of it), so keeping it below says nothing about the load. */
    const uint32_t lease = 20000;
    join_node(&a, cl, "alpha", 1.0, lease);
    join_node(&b, cl, "beta", 2.0, lease);
    wait_seen(a.m, "beta", 1);
    wait_seen(b.m, "alpha", 1);
    assert_int_equal(seen(a.m, "alpha"), member_incarnation(a.m));
    assert_int_equal(seen(a.m, "beta"), member_incarnation(b.m));

    struct member_entry *v;
    size_t n;
    uint64_t epoch;
    assert_int_equal(member_view(a.m, &v, &n, &epoch), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[1].id, "beta");
    assert_true(v[1].weight == 2.0);
    assert_string_equal(v[1].addr, "127.0.0.1:7004");
    assert_true(epoch >= 2);
    free(v);

    /* Both keep their locks: over a whole lease neither lapses (which would give it a new
     * incarnation), and each has renewed since (it may serve again only after a renewal). */
    uint64_t inc_a = member_incarnation(a.m), inc_b = member_incarnation(b.m);
    int64_t until = now_ms() + lease + 1000;
    while (now_ms() < until) {
        assert_int_equal(member_incarnation(a.m), inc_a);
        assert_int_equal(member_incarnation(b.m), inc_b);
        pause_ms(100);
    }
    int64_t end = now_ms() + DEADLINE_MS;
    while (!member_may_serve(a.m) || !member_may_serve(b.m))
        assert_true(now_ms() < end && (pause_ms(20), 1));
    assert_int_equal(seen(b.m, "alpha"), inc_a);

    /* A member that leaves is gone from the other's view (told by a notify). */
    member_leave(b.m);
    wait_seen(a.m, "beta", 0);
    member_leave(a.m);
    disconnect_node(&a);
    disconnect_node(&b);
}

/* Two members of cluster cl, alpha and beta (weight 1, the lease given), each on its own client;
 * returns once alpha sees beta. */
static void alpha_and_beta(struct node *a, struct node *b, const char *cl, uint32_t lease)
{
    connect_node(a);
    connect_node(b);
    join_node(a, cl, "alpha", 1.0, lease);
    join_node(b, cl, "beta", 1.0, lease);
    wait_seen(a->m, "beta", 1);
}

static void test_crashed_member_removed(void **state)
{
    (void)state;
    char cl[96];
    cluster_name(cl, sizeof(cl), "crash");
    const uint32_t lease = 6000;
    struct node a, b;
    alpha_and_beta(&a, &b, cl, lease);
    /* beta crashes: its thread and client are gone, its entry and lock stay behind. Its last
     * renewal, read before the crash, is no later than the last one it made (one made in
     * between is later): its lock lives at least a lease after that. */
    int64_t renewed = member_last_renew_ms(b.m), crash = now_ms();
    member_abandon(b.m);
    disconnect_node(&b);
    wait_seen(a.m, "beta", 0);
    /* Not before its lock could lapse. The OSD times the lock by its own clock (the same host's
     * real time) and this test by the monotonic one, in whole milliseconds: 50 ms spare. */
    int64_t took = now_ms() - renewed;
    print_message("crashed member removed %lld ms after its last renewal, %lld ms after the crash "
                  "(lease %u)\n",
                  (long long)took, (long long)(now_ms() - crash), lease);
    assert_true(took >= (int64_t)lease - 50);
    assert_true(seen(a.m, "alpha") != 0);
    member_leave(a.m);
    disconnect_node(&a);
}

/* A re-read reads the locks of only the members after its own key until 3 of them are live
 * (member.c M6), not every member's: with six members each re-read reads at most 3. Four
 * members in a row crash (r1..r4): the two left (r0 and r5) still remove all four, since a walk
 * goes on past lapsed members (with a plain "the next 3" r3 and r4 would stay). */
static void test_ring_reap(void **state)
{
    (void)state;
    char cl[96];
    cluster_name(cl, sizeof(cl), "ring");
    const uint32_t lease = 6000;
    enum { N = 6 };
    struct node nd[N];
    char id[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(id[i], sizeof(id[i]), "r%d", i);
        connect_node(&nd[i]);
        join_node(&nd[i], cl, id[i], 1.0, lease);
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            wait_seen(nd[i].m, id[j], 1);
    uint64_t r0[N], c0[N], inc0[N];
    for (int i = 0; i < N; i++) {
        member_reap_stats(nd[i].m, &r0[i], &c0[i]);
        inc0[i] = member_incarnation(nd[i].m);
    }
    double per[N];
    for (int i = 0; i < N; i++) {
        uint64_t r, c;
        int64_t end = now_ms() + DEADLINE_MS;
        do {
            assert_true(now_ms() < end);
            pause_ms(50);
            member_reap_stats(nd[i].m, &r, &c);
        } while (r < r0[i] + 3);
        print_message("%s: %llu re-reads read %llu locks\n", id[i], (unsigned long long)(r - r0[i]),
                      (unsigned long long)(c - c0[i]));
        per[i] = (double)(c - c0[i]) / (double)(r - r0[i]);
    }
    /* A member whose lock lapsed meanwhile (a stall of 2/3 of a lease on a loaded machine) is
     * passed by the walks as lapsed, one read more: the bound holds only when none did. */
    bool lapsed = false;
    for (int i = 0; i < N; i++)
        lapsed |= member_incarnation(nd[i].m) != inc0[i];
    for (int i = 0; i < N && !lapsed; i++)
        assert_true(per[i] <= 3.0);
    for (int i = 1; i <= 4; i++) {
        member_abandon(nd[i].m);
        disconnect_node(&nd[i]);
    }
    for (int i = 1; i <= 4; i++) {
        wait_seen(nd[0].m, id[i], 0);
        wait_seen(nd[5].m, id[i], 0);
    }
    assert_true(seen(nd[0].m, "r5") != 0 && seen(nd[5].m, "r0") != 0);
    member_leave(nd[0].m);
    member_leave(nd[5].m);
    disconnect_node(&nd[0]);
    disconnect_node(&nd[5]);
}

static void test_paused_member_fences_then_rejoins(void **state)
{
    (void)state;
    char cl[96];
    cluster_name(cl, sizeof(cl), "pause");
    /* Between beta's fencing (lease/2 after its last renewal) and the removal of its entry (its
     * lock lapsing a full lease after it) the test checks that alpha still lists it: a lease long
     * enough that a loaded machine's stall does not swallow that half-lease window. */
    const uint32_t lease = 20000;
    struct node a, b;
    alpha_and_beta(&a, &b, cl, lease);
    uint64_t inc = member_incarnation(b.m);

    member_pause(b.m, true);
    int64_t end = now_ms() + DEADLINE_MS;
    while (member_may_serve(b.m))
        assert_true(now_ms() < end && (pause_ms(10), 1));
    /* It stopped serving lease/2 after its last renewal; its lock lives until a full lease after
     * it, so the others still list it (M3). */
    assert_int_equal(seen(a.m, "beta"), inc);
    wait_seen(a.m, "beta", 0);
    assert_false(member_may_serve(b.m));

    member_pause(b.m, false);
    end = now_ms() + DEADLINE_MS;
    while (!member_may_serve(b.m) || seen(a.m, "beta") == 0)
        assert_true(now_ms() < end && (pause_ms(20), 1));
    assert_true(member_incarnation(b.m) != inc);
    /* a's view may still be catching up from the removal: wait for the new incarnation. */
    while (seen(a.m, "beta") != member_incarnation(b.m))
        assert_true(now_ms() < end && (pause_ms(20), 1));
    member_leave(b.m);
    member_leave(a.m);
    disconnect_node(&a);
    disconnect_node(&b);
}

/* The epoch in the object's omap, read with librados under the key "epoch" itself. */
static uint64_t omap_epoch(struct node *n, const char *oid)
{
    const char *keys[1] = {"epoch"};
    rados_read_op_t op = rados_create_read_op();
    rados_omap_iter_t it = NULL;
    int prval = 0;
    rados_read_op_omap_get_vals_by_keys(op, keys, 1, &it, &prval);
    assert_int_equal(rados_read_op_operate(op, n->io, oid, 0), 0);
    assert_int_equal(prval, 0);
    char *k, *val, num[32];
    size_t klen, vlen;
    assert_int_equal(rados_omap_get_next2(it, &k, &val, &klen, &vlen), 0);
    assert_non_null(k);
    assert_true(vlen < sizeof(num));
    memcpy(num, val, vlen);
    num[vlen] = '\0';
    rados_omap_get_end(it);
    rados_release_read_op(op);
    return strtoull(num, NULL, 10);
}

/* The view's epoch and size, and the view must hold only the members listed in `ids`, each once
 * (the view is sorted by id, as `ids` must be). */
static uint64_t view_is(struct member *m, const char *const *ids, size_t nids)
{
    struct member_entry *v;
    size_t n;
    uint64_t epoch;
    assert_int_equal(member_view(m, &v, &n, &epoch), 0);
    assert_int_equal(n, nids);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(v[i].id, ids[i]);
    free(v);
    return epoch;
}

/* Keys written by hand with a NUL in them are no member's: "node.ghost\0junk" (a valid entry
 * for ghost, which holds no lock) is neither listed nor removed, over and over, each time with a
 * new epoch; "node.alpha\0x" is not a second entry for alpha; "epoch\0x" is not the epoch (which
 * would fail every compare-and-swap, and with it beta's join). */
static void test_nul_keys_ignored(void **state)
{
    (void)state;
    char cl[96], oid[128];
    cluster_name(cl, sizeof(cl), "nul");
    snprintf(oid, sizeof(oid), "tierd.cluster.%s", cl);
    const uint32_t lease = 20000;
    struct node a, b;
    connect_node(&a);
    connect_node(&b);
    join_node(&a, cl, "alpha", 1.0, lease);
    uint64_t e0 = omap_epoch(&a, oid);

    char ghost[256], alpha[256];
    struct member_entry e = {.id = "ghost", .addr = "127.0.0.1:1", .weight = 1, .incarnation = 7};
    assert_true(member_entry_format(&e, ghost, sizeof(ghost)) > 0);
    struct member_entry ea = {.id = "alpha", .addr = "127.0.0.1:2", .weight = 1, .incarnation = 8};
    assert_true(member_entry_format(&ea, alpha, sizeof(alpha)) > 0);
    const char *keys[3] = {"node.ghost\0junk", "node.alpha\0x", "epoch\0x"};
    const char *vals[3] = {ghost, alpha, "00000000000000000999"};
    size_t klens[3] = {sizeof("node.ghost\0junk") - 1, sizeof("node.alpha\0x") - 1,
                       sizeof("epoch\0x") - 1};
    size_t vlens[3] = {strlen(ghost), strlen(alpha), 20};
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_omap_set2(op, keys, vals, klens, vlens, 3);
    assert_int_equal(rados_write_op_operate(op, a.io, oid, NULL, 0), 0);
    rados_release_write_op(op);

    /* beta's join reads past them and writes the next epoch; alpha, told, re-reads them too. */
    join_node(&b, cl, "beta", 1.0, lease);
    wait_seen(a.m, "beta", 1);
    const char *both[2] = {"alpha", "beta"};
    assert_int_equal(view_is(a.m, both, 2), e0 + 1);
    assert_int_equal(seen(a.m, "alpha"), member_incarnation(a.m));
    /* No write storm: over a re-read interval and then some (every member re-reads every
     * lease/2), no one writes a new epoch. */
    int64_t until = now_ms() + lease / 2 + 2000;
    while (now_ms() < until) {
        assert_int_equal(omap_epoch(&a, oid), e0 + 1);
        assert_int_equal(view_is(a.m, both, 2), e0 + 1);
        assert_int_equal(view_is(b.m, both, 2), e0 + 1);
        pause_ms(100);
    }
    /* The next change is one epoch more, and the view still has alpha alone. */
    member_leave(b.m);
    wait_seen(a.m, "beta", 0);
    const char *one[1] = {"alpha"};
    assert_int_equal(view_is(a.m, one, 1), e0 + 2);
    member_leave(a.m);
    disconnect_node(&a);
    disconnect_node(&b);
}

#define RACERS 4

struct racer {
    struct node n;
    const char *cluster;
    char id[16];
    pthread_barrier_t *go;
    int rc;
};

static void *race_join(void *arg)
{
    struct racer *r = arg;
    struct member_conf c = {
        .cluster = r->cluster, .id = r->id, .addr = "", .weight = 1.0, .lease_ms = 20000};
    pthread_barrier_wait(r->go);
    r->rc = member_join(r->n.io, &c, &r->n.m);
    return NULL;
}

static void test_join_at_once(void **state)
{
    (void)state;
    char cl[96];
    cluster_name(cl, sizeof(cl), "race");
    struct racer r[RACERS];
    pthread_t t[RACERS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
        connect_node(&r[i].n);
        r[i].cluster = cl;
        snprintf(r[i].id, sizeof(r[i].id), "racer-%d", i);
        r[i].go = &go;
    }
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, race_join, &r[i]), 0);
    for (int i = 0; i < RACERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(r[i].rc, 0);
    for (int i = 0; i < RACERS; i++)
        for (int j = 0; j < RACERS; j++)
            wait_seen(r[i].n.m, r[j].id, 1);
    struct member_entry *v;
    size_t n;
    uint64_t epoch;
    assert_int_equal(member_view(r[0].n.m, &v, &n, &epoch), 0);
    assert_int_equal(n, RACERS);
    /* Exactly one epoch per join: each join's write compared the epoch it read, so no two of
     * them wrote the same next epoch (blind writes from one epoch would leave it lower). A lease
     * of 20 s, as a lapse would add a rejoin's epoch. */
    assert_int_equal(epoch, RACERS);
    free(v);
    for (int i = 0; i < RACERS; i++) {
        member_leave(r[i].n.m);
        disconnect_node(&r[i].n);
    }
}

/* The OSD restarts under two members: their renewals and watches fail while it is down (librados
 * waits up to its op timeout); once it is back both serve again, each lists the other's current
 * incarnation, and a third member that joins afterwards is seen by both. */
static void test_osd_restart(void **state)
{
    (void)state;
    char cl[96];
    cluster_name(cl, sizeof(cl), "osd");
    const uint32_t lease = 20000;
    struct node a, b, c;
    alpha_and_beta(&a, &b, cl, lease);
    wait_seen(b.m, "alpha", 1);
    assert_int_equal(tu_ceph_ctl("stop-osd"), 0);
    assert_int_equal(tu_ceph_ctl("start-osd"), 0);
    int64_t end = now_ms() + DEADLINE_MS;
    while (!member_may_serve(a.m) || !member_may_serve(b.m) ||
           seen(a.m, "beta") != member_incarnation(b.m) ||
           seen(b.m, "alpha") != member_incarnation(a.m))
        assert_true(now_ms() < end && (pause_ms(50), 1));
    connect_node(&c);
    join_node(&c, cl, "gamma", 1.0, lease);
    wait_seen(a.m, "gamma", 1);
    wait_seen(b.m, "gamma", 1);
    member_leave(c.m);
    member_leave(b.m);
    member_leave(a.m);
    disconnect_node(&c);
    disconnect_node(&a);
    disconnect_node(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_see_each_other),
        cmocka_unit_test(test_crashed_member_removed),
        cmocka_unit_test(test_ring_reap),
        cmocka_unit_test(test_paused_member_fences_then_rejoins),
        cmocka_unit_test(test_join_at_once),
        cmocka_unit_test(test_nul_keys_ignored),
        cmocka_unit_test(test_osd_restart),
    };
    /* TIER_TEST_FILTER names the tests to run (cluster_osd_restart: test_osd_restart); without
     * it, all but test_osd_restart */
    const char *only = getenv("TIER_TEST_FILTER");
    if (only && *only)
        cmocka_set_test_filter(only);
    else
        cmocka_set_skip_filter("test_osd_restart");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
