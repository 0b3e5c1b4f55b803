/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_policy.c - the rules of lifecycle policies (src/lifecycle/lifecycle_rules.c), without I/O:
 * rules built from config text (tierd_config_load_string + policy_rules_build), then
 * policy_select over hand-made file lists: keep_last by a regex's capture (numbers as numbers,
 * every file of a step together, groups apart, pending files ranked but never selected), by
 * directory and time (the built-in retention), age, size, glob, watermark; the built-in rule is
 * made for each write-back namespace and replaced by a namespace's own keep_last demote rule;
 * the tenant filter and the demote level; the last-use table (access.h) with its tenants; copy
 * targets that overlap another rule's target or a namespace refused at their line. And the
 * engine opened with a context built by hand (struct policy_engine_ctx; no daemon, no config
 * file) over two posix backends: a pass of a copy rule copies the object; an idle rule's
 * last-use table appears in the context's slot and goes with the engine; a target that holds
 * the source's bytes with a leftover multipart upload of its key is journalled and the upload
 * aborted.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/err.h"
#include "common/ioctx.h"
#include "lifecycle/access.h"
#include "lifecycle/lifecycle.h"
#include "daemon/tierd.h"
#include "tiers/backend.h"

#define HEAD                                                                                       \
    "[backend warm]\ntype = posix\nroot = /srv\n"                                                  \
    "[backend archive]\ntype = posix\nroot = /arch\n"                                              \
    "[namespace /ck]\nbackend = warm\nprefix = ck\nmode = write-back\n"                            \
    "[namespace /ds]\nbackend = warm\nprefix = ds\n"                                               \
    "[writeback]\nspool_dir = /tmp/s\n"                                                            \
    "[cache]\ndisk_dir = /tmp/c\n"                                                                 \
    "[mount]\npath = /mnt/t\n"

static void build(const char *text, struct tierd_config *c, struct policy_rules *r)
{
    char err[512];
    int rc = tierd_config_load_string("t.conf", text, strlen(text), c, err, sizeof(err));
    if (rc)
        fail_msg("config: %s", err);
    int line = 0;
    rc = policy_rules_build(c, r, err, sizeof(err), &line);
    if (rc)
        fail_msg("rules: %d: %s", line, err);
}

#define S 1000000000LL
#define D (POLICY_F_DURABLE)

/* The keys selected, space-separated, in the order given. */
static void selected(const struct policy_rule *r, const struct policy_file *f, size_t n,
                     int64_t now, unsigned hot, char *out, size_t outsz)
{
    size_t sel[64];
    size_t k = policy_select(r, f, n, now, hot, sel);
    out[0] = '\0';
    for (size_t i = 0; i < k; i++) {
        strncat(out, f[sel[i]].key, outsz - strlen(out) - 1);
        if (i + 1 < k)
            strncat(out, " ", outsz - strlen(out) - 1);
    }
}

static void test_keep_last_steps(void **state)
{
    (void)state;
    struct tierd_config c;
    struct policy_rules r;
    build(HEAD "[policy hot]\nnamespace = /ck\nmatch = step_([0-9]+)/\nkeep_last = 2\n"
               "action = demote\n",
          &c, &r);
    /* the built-in retention stays, and leaves the files of the namespace's own rule to it */
    assert_int_equal(r.n, 2);
    assert_false(r.v[0].builtin);
    assert_true(r.v[1].builtin);
    struct policy_file step = {"a/step_1/m.pt", 1, 1, D | POLICY_F_LOCAL, NULL, 0, -1};
    struct policy_file other = {"a/notes.txt", 1, 1, D | POLICY_F_LOCAL, NULL, 0, -1};
    assert_true(policy_yields(&r, &r.v[1], &step));
    assert_false(policy_yields(&r, &r.v[1], &other));
    assert_false(policy_yields(&r, &r.v[0], &step)); /* only a built-in rule yields */
    /* keys sorted; run a and run b are two groups; step_10 is newer than step_9 */
    struct policy_file f[] = {
        {"a/step_10/m.pt", 5, 10 * S, D, NULL, 0, -1},
        {"a/step_10/o.pt", 5, 10 * S, D, NULL, 0, -1},
        {"a/step_11/m.pt", 5, 11 * S, POLICY_F_PENDING | POLICY_F_LOCAL, NULL, 0, -1},
        {"a/step_8/m.pt", 5, 8 * S, D, NULL, 0, -1},
        {"a/step_8/o.pt", 5, 8 * S, D, NULL, 0, -1},
        {"a/step_9/m.pt", 5, 9 * S, D | POLICY_F_LOCAL, NULL, 0, -1},
        {"b/step_1/m.pt", 5, 1 * S, D, NULL, 0, -1},
        {"b/step_2/m.pt", 5, 2 * S, D, NULL, 0, -1},
        {"b/step_3/m.pt", 5, 3 * S, D, NULL, 0, -1},
        {"notastep.txt", 5, 1 * S, D, NULL, 0, -1},
    };
    char got[512];
    selected(&r.v[0], f, sizeof(f) / sizeof(f[0]), 100 * S, 0, got, sizeof(got));
    /* a keeps 11 (pending: ranked) and 10; 9 and 8 go, oldest step first; b keeps 3, 2 */
    assert_string_equal(got, "a/step_8/o.pt a/step_8/m.pt a/step_9/m.pt b/step_1/m.pt");
    policy_rules_free(&r);
    tierd_config_fini(&c);
}

/* Steps that are not all digits: numbers first (as numbers), then the others as bytes, a total
 * order ("9" < "10" < "1a" < "9b"): qsort needs one. */
static void test_keep_last_mixed_units(void **state)
{
    (void)state;
    struct tierd_config c;
    struct policy_rules r;
    build(HEAD "[policy hot]\nnamespace = /ck\nmatch = s_([^/]+)/\nkeep_last = 1\n"
               "action = demote\n",
          &c, &r);
    struct policy_file f[] = {
        {"s_10/m", 1, 1, D, NULL, 0, -1},
        {"s_1a/m", 1, 1, D, NULL, 0, -1},
        {"s_9/m", 1, 1, D, NULL, 0, -1},
        {"s_9b/m", 1, 1, D, NULL, 0, -1},
    };
    char got[128];
    selected(&r.v[0], f, 4, 10 * S, 0, got, sizeof(got));
    assert_string_equal(got, "s_9/m s_10/m s_1a/m");
    policy_rules_free(&r);
    tierd_config_fini(&c);
}

static void test_builtin_and_time(void **state)
{
    (void)state;
    struct tierd_config c;
    struct policy_rules r;
    build(HEAD, &c, &r);
    /* retention_keep = 2 (the default): one built-in rule, for the write-back namespace only */
    assert_int_equal(r.n, 1);
    assert_true(r.v[0].builtin);
    assert_true(r.v[0].local_only);
    assert_int_equal(r.v[0].keep_last, 2);
    assert_string_equal(c.namespaces[r.v[0].ns].path, "/ck");
    /* per directory, newest by time: d/ keeps z and x (newest two), y goes; e/ keeps both */
    struct policy_file f[] = {
        {"d/x", 1, 30 * S, D | POLICY_F_LOCAL, NULL, 0, -1},
        {"d/y", 1, 10 * S, D | POLICY_F_LOCAL, NULL, 0, -1},
        {"d/z", 1, 20 * S, D | POLICY_F_LOCAL, NULL, 0, -1},
        {"e/a", 1, 1 * S, D, NULL, 0, -1},
        {"e/b", 1, 2 * S, D, NULL, 0, -1},
    };
    char got[256];
    selected(&r.v[0], f, 5, 100 * S, 0, got, sizeof(got));
    assert_string_equal(got, "d/y");
    policy_rules_free(&r);
    tierd_config_fini(&c);
}

static void test_filters_and_triggers(void **state)
{
    (void)state;
    struct tierd_config c;
    struct policy_rules r;
    build(HEAD "[policy old]\nnamespace = /ds\nprefix = logs/\nglob = logs/*.txt\n"
               "min_size = 10\nmax_size = 1K\nage = 1h\naction = copy\ntarget = archive:old/\n"
               "[policy full]\nnamespace = /ds\nwatermark = 90%\naction = demote\n",
          &c, &r);
    assert_int_equal(r.n, 3); /* and the built-in one of /ck */
    int64_t now = 10 * 3600 * S;
    struct policy_file f[] = {
        {"logs/a.txt", 100, now - 2 * 3600 * S, D, NULL, 0, -1},   /* yes */
        {"logs/b.txt", 100, now - 60 * S, D, NULL, 0, -1},         /* too young */
        {"logs/c.txt", 5, now - 2 * 3600 * S, D, NULL, 0, -1},     /* too small */
        {"logs/d.txt", 2048, now - 2 * 3600 * S, D, NULL, 0, -1},  /* too large */
        {"logs/e.bin", 100, now - 2 * 3600 * S, D, NULL, 0, -1},   /* glob */
        {"logs/s/f.txt", 100, now - 2 * 3600 * S, D, NULL, 0, -1}, /* glob: '*' stops at '/' */
        {"logs/g.txt", 100, now - 3 * 3600 * S, POLICY_F_PENDING, NULL, 0, -1}, /* not durable */
        {"other/h.txt", 100, now - 2 * 3600 * S, D, NULL, 0, -1},               /* prefix */
    };
    char got[256];
    selected(&r.v[0], f, 8, now, 0, got, sizeof(got));
    assert_string_equal(got, "logs/a.txt");
    assert_string_equal(r.v[0].copy_prefix, "old/");
    /* the watermark: nothing at 90 %, everything durable above it, oldest first */
    selected(&r.v[1], f, 8, now, 90, got, sizeof(got));
    assert_string_equal(got, "");
    selected(&r.v[1], f, 3, now, 91, got, sizeof(got));
    assert_string_equal(got, "logs/a.txt logs/c.txt logs/b.txt");
    policy_rules_free(&r);
    tierd_config_fini(&c);
}

/* idle: the last read (or the write, when later) must be older than the bound */
static void test_idle(void **state)
{
    (void)state;
    struct tierd_config c;
    struct policy_rules r;
    build(HEAD "[policy cold]\nnamespace = /ds\nidle = 1h\naction = demote\n", &c, &r);
    int64_t now = 100 * 3600 * S;
    struct policy_file f[] = {
        {"a", 1, now - 5 * 3600 * S, D, NULL, now - 2 * 3600 * S, -1}, /* read 2 h ago: idle */
        {"b", 1, now - 5 * 3600 * S, D, NULL, now - 60 * S, -1},       /* read a minute ago */
        {"c", 1, now - 60 * S, D, NULL, now - 5 * 3600 * S, -1},       /* written a minute ago */
        {"d", 1, now - 5 * 3600 * S, D, NULL, 0, -1},                  /* never read: idle */
    };
    char got[64];
    selected(&r.v[0], f, 4, now, 0, got, sizeof(got));
    assert_string_equal(got, "a d");
    assert_int_equal(r.v[0].idle_ms, 3600000);
    policy_rules_free(&r);
    tierd_config_fini(&c);
}

/* The built-in retention yields to the rules that decide for a file (keep_last demote, stage,
 * pin), not to a demote that fires only now and then (watermark, age, idle). */
static void test_builtin_floor(void **state)
{
    (void)state;
    struct tierd_config c;
    struct policy_rules r;
    build(HEAD "[policy w]\nnamespace = /ck\nprefix = run/\nglob = run/*/optim.bin\n"
               "watermark = 90%\n"
               "action = demote\n[policy p]\nnamespace = /ck\nprefix = keep/\naction = pin\n",
          &c, &r);
    assert_int_equal(r.n, 3);
    assert_true(r.v[2].builtin);
    struct policy_file optim = {"run/a/optim.bin", 1, 1, D | POLICY_F_LOCAL, NULL, 0, -1};
    struct policy_file kept = {"keep/x", 1, 1, D | POLICY_F_LOCAL, NULL, 0, -1};
    assert_false(policy_yields(&r, &r.v[2], &optim));
    assert_true(policy_yields(&r, &r.v[2], &kept));
    policy_rules_free(&r);
    tierd_config_fini(&c);
}

/* The last-read table forgets, but never makes a file look idler than it is: a miss reads the
 * newest time its set forgot, and its tenant as unknown; a remembered entry keeps its tenant. */
static void test_access_floor(void **state)
{
    (void)state;
    struct access_log *a;
    int64_t who = 0;
    assert_int_equal(access_log_new(4, &a), 0); /* 16 entries: 4 sets of 4 */
    assert_int_equal(access_last(a, "be", "never", &who), 0);
    assert_int_equal(who, -1);
    char k[32];
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        access_note(a, "be", k, 1000 + i, (uint32_t)(i % 7));
    }
    /* the newest note is remembered exactly; anything forgotten reads at least as late as the
     * newest time its set dropped, and never later than the last note */
    assert_int_equal(access_last(a, "be", "k199", &who), 1199);
    assert_int_equal(who, 199 % 7);
    int forgotten = 0, known = 0;
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        int64_t t = access_last(a, "be", k, &who);
        assert_true(t >= 1000 + i);
        assert_true(t <= 1199);
        forgotten += t != 1000 + i;
        /* remembered: its own tenant and time; forgotten: unknown, never another entry's */
        if (who >= 0) {
            assert_int_equal(who, i % 7);
            assert_int_equal(t, 1000 + i);
            known++;
        }
    }
    assert_true(forgotten > 0);
    assert_int_equal(known, 16); /* every entry of the table still names its tenant */
    /* a note again replaces the tenant; an id beyond the table's bits is unknown */
    access_note(a, "be", "k199", 1300, 5);
    assert_int_equal(access_last(a, "be", "k199", &who), 1300);
    assert_int_equal(who, 5);
    access_note(a, "be", "k199", 1301, ACCESS_TENANT_MAX + 9);
    assert_int_equal(access_last(a, "be", "k199", NULL), 1301);
    assert_int_equal(access_last(a, "be", "k199", &who), 1301);
    assert_int_equal(who, -1);
    access_log_free(a);
}

/* tenant: only files whose last use was the tenant's (by id, set by the engine each pass);
 * unknown users and a tenant the registry does not have take nothing. Rules for two tenants do
 * not contradict. level: parsed for demote, all by default. */
static void test_tenant_and_level(void **state)
{
    (void)state;
    struct tierd_config c;
    struct policy_rules r;
    build(HEAD "[policy train-cold]\nnamespace = /ds\ntenant = train\nlevel = ram\n"
               "action = demote\n"
               "[policy infer-hot]\nnamespace = /ds\ntenant = infer\naction = stage\n"
               "[policy all-disk]\nnamespace = /ds\nprefix = x/\ntenant = batch\nlevel = "
               "disk\naction = demote\n",
          &c, &r);
    assert_string_equal(r.v[0].tenant, "train");
    assert_int_equal(r.v[0].level, POLICY_LEVEL_RAM);
    assert_int_equal(r.v[1].level, POLICY_LEVEL_ALL);
    assert_int_equal(r.v[2].level, POLICY_LEVEL_DISK);
    assert_string_equal(policy_level_name(r.v[2].level), "disk");
    assert_int_equal(r.v[0].tenant_id, -1);
    struct policy_file f[] = {
        {"a", 1, 1 * S, D, NULL, 0, 3},  /* train's */
        {"b", 1, 1 * S, D, NULL, 0, 4},  /* infer's */
        {"c", 1, 1 * S, D, NULL, 0, -1}, /* nobody known */
        {"d", 1, 2 * S, D, NULL, 0, 3},  /* train's */
    };
    char got[64];
    selected(&r.v[0], f, 4, 10 * S, 0, got, sizeof(got));
    assert_string_equal(got, ""); /* the registry has no such tenant now */
    r.v[0].tenant_id = 3;
    r.v[1].tenant_id = 4;
    selected(&r.v[0], f, 4, 10 * S, 0, got, sizeof(got));
    assert_string_equal(got, "a d");
    selected(&r.v[1], f, 4, 10 * S, 0, got, sizeof(got));
    assert_string_equal(got, "b");
    assert_false(policy_matches(&r.v[0], &f[2]));
    policy_rules_free(&r);
    tierd_config_fini(&c);

    /* out of RAM only, on a write-back namespace: the built-in retention still drops the local
     * copies (the rule never does), and a stage rule over the same files is no contradiction */
    build(HEAD "[policy ck-ram]\nnamespace = /ck\nlevel = ram\naction = demote\n"
               "[policy ck-stage]\nnamespace = /ck\naction = stage\n",
          &c, &r);
    assert_int_equal(r.n, 3);
    assert_true(r.v[2].builtin);
    struct policy_file local = {"run/m.pt", 1, 1 * S, D | POLICY_F_LOCAL, NULL, 0, -1};
    /* ck-stage decides for the files (it keeps them hot); ck-ram alone would not */
    assert_true(policy_yields(&r, &r.v[2], &local));
    policy_rules_free(&r);
    tierd_config_fini(&c);
    build(HEAD "[policy ck-ram]\nnamespace = /ck\nlevel = ram\naction = demote\n", &c, &r);
    assert_int_equal(r.n, 2);
    assert_false(policy_yields(&r, &r.v[1], &local));
    policy_rules_free(&r);
    tierd_config_fini(&c);
}

static void test_retention_off(void **state)
{
    (void)state;
    struct tierd_config c;
    struct policy_rules r;
    char err[256];
    const char *text = "[backend warm]\ntype = posix\nroot = /srv\n"
                       "[namespace /ck]\nbackend = warm\nmode = write-back\n"
                       "[writeback]\nspool_dir = /tmp/s\nretention_keep = 0\n"
                       "[mount]\npath = /mnt/t\n";
    assert_int_equal(tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err)),
                     0);
    int line;
    assert_int_equal(policy_rules_build(&c, &r, err, sizeof(err), &line), 0);
    /* retention_keep = 0: every uploaded file loses its local copy */
    assert_int_equal(r.n, 1);
    assert_int_equal(r.v[0].keep_last, 0);
    struct policy_file f[] = {{"a", 1, 1, D | POLICY_F_LOCAL, NULL, 0, -1},
                              {"b", 1, 2, POLICY_F_PENDING | POLICY_F_LOCAL, NULL, 0, -1}};
    char got[64];
    selected(&r.v[0], f, 2, 3, 0, got, sizeof(got));
    assert_string_equal(got, "a");
    policy_rules_free(&r);
    tierd_config_fini(&c);
}

/* The config text must be refused: its error starts with "t.conf:LINE:" and holds each of the
 * NULL-terminated strings. */
static void refused(const char *text, int line, ...)
{
    struct tierd_config c;
    char err[1024], at[32];
    int rc = tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err));
    tierd_config_fini(&c); /* also after a refusal (what it parsed) */
    if (rc == 0)
        fail_msg("accepted, want refused at line %d:\n%s", line, text);
    snprintf(at, sizeof(at), "t.conf:%d: ", line);
    if (strncmp(err, at, strlen(at)) != 0)
        fail_msg("error \"%s\" is not at %s", err, at);
    va_list ap;
    va_start(ap, line);
    for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
        if (!strstr(err, want))
            fail_msg("error \"%s\" lacks \"%s\"", err, want);
    va_end(ap);
}

static void accepted(const char *text)
{
    struct tierd_config c;
    struct policy_rules r;
    build(text, &c, &r);
    policy_rules_free(&r);
    tierd_config_fini(&c);
}

/* Two namespaces of one backend; lines 1-11, so the first [policy] is at line 12. */
#define TWO                                                                                        \
    "[backend be]\ntype = posix\nroot = /srv\n"                                                    \
    "[namespace /datasets]\nbackend = be\nprefix = datasets\n"                                     \
    "[namespace /ckpt]\nbackend = be\nprefix = ckpt\n"                                             \
    "[mount]\npath = /mnt/t\n"
#define CP_A                                                                                       \
    "[policy cpA]\nnamespace = /datasets\nprefix = ds1/\naction = copy\ntarget = be:arch/\n"
#define EX_A                                                                                       \
    "[policy exA]\nnamespace = /datasets\nprefix = ds1/\naction = expire\nallow_delete = true\n"
#define EX_B                                                                                       \
    "[policy exB]\nnamespace = /ckpt\nprefix = ds1/\naction = expire\nallow_delete = true\n"

/* Copy targets (backend and prefix) must not overlap another copy rule's target, in any
 * namespace, nor any namespace's keys (read-cache or write-back; so no rule's source either):
 * else two rules write one key, and an expire trusts a copy that is another file. */
static void test_copy_targets(void **state)
{
    (void)state;
    /* the two copy rules of two namespaces onto be:arch/, each with an expire: one source
     * would be deleted while its only copy is overwritten by the other's file */
    refused(
        TWO CP_A EX_A
        "[policy cpB]\nnamespace = /ckpt\nprefix = ds1/\naction = copy\ntarget = be:arch/\n" EX_B,
        26, "[policy cpB] target = be:arch/ overlaps the target of [policy cpA] at line 16",
        "give each copy rule its own target prefix", NULL);
    /* nested targets too, in either order */
    refused(TWO CP_A "[policy cpB]\nnamespace = /ckpt\naction = copy\ntarget = be:arch/ds1/\n", 20,
            "[policy cpB] target = be:arch/ds1/ overlaps the target of [policy cpA]", NULL);
    refused(TWO "[policy cpB]\nnamespace = /ckpt\naction = copy\ntarget = be:arch/ds1/\n" CP_A, 20,
            "[policy cpA] target = be:arch/ overlaps the target of [policy cpB] at line 15", NULL);
    /* and within one namespace, whatever the rules' scopes */
    refused(TWO CP_A "[policy cpC]\nnamespace = /datasets\nprefix = ds2/\naction = copy\n"
                     "target = be:arch/\n",
            21, "[policy cpC] target = be:arch/ overlaps the target of [policy cpA]", NULL);
    /* a target inside another namespace (read-cache), or holding one */
    refused(TWO "[policy cp]\nnamespace = /datasets\naction = copy\ntarget = be:ckpt/old/\n", 15,
            "target = be:ckpt/old/ overlaps the read-cache namespace /ckpt (line 7) at be:ckpt/",
            "outside every namespace", NULL);
    refused(HEAD "[policy cp]\nnamespace = /ck\naction = copy\ntarget = warm:ds/\n", 23,
            "overlaps the read-cache namespace /ds (line 11)", NULL);
    /* another rule's source is inside its namespace: refused as that namespace */
    refused(HEAD "[policy logs]\nnamespace = /ds\nprefix = logs/\nage = 1d\naction = expire\n"
                 "allow_delete = true\n"
                 "[policy cp]\nnamespace = /ck\naction = copy\ntarget = warm:ds/logs/\n",
            29, "target = warm:ds/logs/ overlaps the read-cache namespace /ds", NULL);
    refused(HEAD "[namespace /old]\nbackend = archive\nprefix = old\n"
                 "[policy cp]\nnamespace = /ds\naction = copy\ntarget = archive\n",
            26,
            "target = archive: overlaps the read-cache namespace /old (line 20) at archive:old/",
            NULL);
    refused(HEAD "[policy cp]\nnamespace = /ds\naction = copy\ntarget = warm:ck/\n", 23,
            "overlaps the write-back namespace /ck (line 7)", NULL);
    /* a target around its own namespace */
    refused(TWO "[policy cp]\nnamespace = /datasets\naction = copy\ntarget = be\n", 15,
            "target = be: is around the namespace it copies from (be:datasets/", NULL);
    /* prefixes overlap only at a '/' boundary: arch/ and archive/ are apart, and so are
     * datasets/ and datasets2/; one copy rule per target, with expires, is fine */
    accepted(TWO CP_A EX_A EX_B "[policy cpB]\nnamespace = /ckpt\nprefix = ds1/\naction = copy\n"
                                "target = be:archive/\n"
                                "[policy cpC]\nnamespace = /ckpt\nprefix = ds2/\naction = copy\n"
                                "target = be:datasets2/\n");
}

/* ---- the engine over a hand-made context (no daemon) ---------------------------------------- */

static const struct tier_ioctx test_io = {.tenant = TIER_TENANT_DEFAULT, .cls = TIER_IO_TRAINING};

static void rm_tree(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A policy context made by hand over two backends, warm (be[0], namespace /ds on ds/) and archive
 * (be[1]), with one rule [policy arch]: copy /ds to archive:copies/. It lives in the test's
 * frame: the engine keeps pointers into it. */
struct hand_ctx {
    char path[4], bname[5], prefix[4];
    struct tierd_ns_conf nsc;
    struct tierd_ns ns;
    const char *names[2];
    struct policy_kv kv[3];
    struct policy_section sec;
    struct policy_conf conf;
    struct access_log *access;
    struct policy_engine_ctx ctx;
};

static void hand_ctx_init(struct hand_ctx *h, struct backend **be)
{
    memset(h, 0, sizeof(*h));
    strcpy(h->path, "/ds");
    strcpy(h->bname, "warm");
    strcpy(h->prefix, "ds/");
    h->nsc = (struct tierd_ns_conf){.path = h->path,
                                    .backend = h->bname,
                                    .prefix = h->prefix,
                                    .uid = -1,
                                    .gid = -1,
                                    .umask = -1,
                                    .conf_line = 1};
    h->ns = (struct tierd_ns){.conf = &h->nsc, .be = be[0]};
    h->names[0] = "warm";
    h->names[1] = "archive";
    h->kv[0] = (struct policy_kv){"namespace", "/ds", 3};
    h->kv[1] = (struct policy_kv){"action", "copy", 4};
    h->kv[2] = (struct policy_kv){"target", "archive:copies/", 5};
    h->sec = (struct policy_section){.name = "arch", .line = 2, .kv = h->kv, .nkv = 3};
    h->conf = (struct policy_conf){.file = "hand.conf",
                                   .sections = &h->sec,
                                   .nsections = 1,
                                   .namespaces = &h->nsc,
                                   .nnamespaces = 1,
                                   .backends = h->names,
                                   .nbackends = 2,
                                   .retention_keep = -1};
    h->ctx = (struct policy_engine_ctx){.conf = &h->conf,
                                        .interval_ms = 3600000, /* no pass of its own */
                                        .state_path = ":memory:",
                                        .backends = be,
                                        .nbackends = 2,
                                        .ns = &h->ns,
                                        .nns = 1,
                                        .access = &h->access};
}

/* The two POSIX backends of struct hand_ctx in fresh directories src and dst (mkdtemp templates):
 * warm (be[0]) with the source ds/run1/a.bin ("hello"), archive (be[1]) empty. */
static void hand_backends(char *src, char *dst, struct backend **be)
{
    assert_non_null(mkdtemp(src));
    assert_non_null(mkdtemp(dst));
    assert_int_equal(
        backend_posix_open(&(struct posix_backend_config){.name = "warm", .root = src}, &be[0]), 0);
    assert_int_equal(
        backend_posix_open(&(struct posix_backend_config){.name = "archive", .root = dst}, &be[1]),
        0);
    assert_int_equal(backend_put(be[0], &test_io, "ds/run1/a.bin", "hello", 5, NULL), 0);
}

static void hand_backends_free(const char *src, const char *dst, struct backend **be)
{
    backend_free(be[0]);
    backend_free(be[1]);
    rm_tree(src);
    rm_tree(dst);
}

static void test_engine_ctx(void **state)
{
    (void)state;
    char src[] = "/tmp/test_policy_srcXXXXXX", dst[] = "/tmp/test_policy_dstXXXXXX";
    struct backend *be[2];
    hand_backends(src, dst, be);

    struct hand_ctx h;
    hand_ctx_init(&h, be);
    struct policy_engine *pe = NULL;
    assert_int_equal(policy_engine_start(&h.ctx, &pe), 0);
    assert_non_null(pe);
    assert_null(h.access); /* no rule has idle or tenant */

    json_t *res = NULL;
    assert_int_equal(policy_engine_run(pe, NULL, false, &res), 0);
    assert_non_null(res);
    assert_int_equal(json_integer_value(json_object_get(res, "done")), 1);
    assert_int_equal(json_integer_value(json_object_get(res, "failed")), 0);
    json_decref(res);
    char buf[16] = "";
    struct backend_stat st;
    assert_int_equal(
        backend_read(be[1], &test_io, "copies/run1/a.bin", 0, buf, sizeof(buf), NULL, &st), 5);
    assert_memory_equal(buf, "hello", 5);
    /* the status names the rule's namespace and target from the context */
    json_t *j = policy_engine_status(pe);
    json_t *r0 = json_array_get(json_object_get(j, "rules"), 0);
    assert_string_equal(json_string_value(json_object_get(r0, "namespace")), "/ds");
    assert_string_equal(json_string_value(json_object_get(r0, "target")), "archive:copies/");
    assert_int_equal(json_integer_value(json_object_get(r0, "done")), 1);
    json_decref(j);
    policy_engine_free(pe);

    /* an idle rule: start makes the last-use table in the context's slot, free takes it back */
    const struct policy_kv kv2[] = {
        {"namespace", "/ds", 3}, {"idle", "1d", 4}, {"action", "demote", 5}};
    const struct policy_section sec2 = {.name = "cold", .line = 2, .kv = kv2, .nkv = 3};
    h.conf.sections = &sec2;
    pe = NULL;
    assert_int_equal(policy_engine_start(&h.ctx, &pe), 0);
    assert_non_null(pe);
    assert_non_null(h.access);
    policy_engine_free(pe);
    assert_null(h.access);

    /* no rule: nothing runs; a rule's error names the file and line */
    h.conf.nsections = 0;
    pe = (struct policy_engine *)1;
    assert_int_equal(policy_engine_start(&h.ctx, &pe), 0);
    assert_null(pe);
    const struct policy_kv kv3[] = {{"namespace", "/nowhere", 7}, {"action", "demote", 8}};
    const struct policy_section sec3 = {.name = "bad", .line = 6, .kv = kv3, .nkv = 2};
    h.conf.sections = &sec3;
    h.conf.nsections = 1;
    assert_int_equal(policy_engine_start(&h.ctx, &pe), -EINVAL);
    assert_null(pe);
    assert_non_null(strstr(tier_err_msg(), "hand.conf:7: [policy bad]"));

    hand_backends_free(src, dst, be);
}

/* A copy killed after its multipart complete placed the target but before the upload's cleanup:
 * the next pass finds the source's bytes on the target, journals them as the copy and aborts
 * the key's leftover upload (none stays on the backend). */
static void test_copy_held_aborts_uploads(void **state)
{
    (void)state;
    char src[] = "/tmp/test_policy_srcXXXXXX", dst[] = "/tmp/test_policy_dstXXXXXX";
    struct backend *be[2];
    hand_backends(src, dst, be);
    /* the killed copy's remains: its target, and an upload of the key never cleaned up */
    assert_int_equal(backend_put(be[1], &test_io, "copies/run1/a.bin", "hello", 5, NULL), 0);
    char *uid = NULL;
    assert_int_equal(backend_mpu_create(be[1], &test_io, "copies/run1/a.bin", &uid), 0);
    char petag[BACKEND_ETAG_MAX];
    assert_int_equal(
        backend_mpu_put_part(be[1], &test_io, "copies/run1/a.bin", uid, 1, "hello", 5, petag), 0);
    free(uid);
    struct backend_mpu *ups = NULL;
    size_t nups = 0;
    assert_int_equal(backend_mpu_list(be[1], &test_io, "copies/run1/a.bin", &ups, &nups), 0);
    assert_int_equal(nups, 1);
    backend_mpu_list_free(ups, nups);

    struct hand_ctx h;
    hand_ctx_init(&h, be);
    struct policy_engine *pe = NULL;
    assert_int_equal(policy_engine_start(&h.ctx, &pe), 0);
    assert_non_null(pe);

    /* a dry run plans the journal write and leaves the upload alone */
    json_t *res = NULL;
    assert_int_equal(policy_engine_run(pe, NULL, true, &res), 0);
    json_decref(res);
    assert_int_equal(backend_mpu_list(be[1], &test_io, "copies/run1/a.bin", &ups, &nups), 0);
    assert_int_equal(nups, 1);
    backend_mpu_list_free(ups, nups);

    res = NULL;
    assert_int_equal(policy_engine_run(pe, NULL, false, &res), 0);
    assert_non_null(res);
    assert_int_equal(json_integer_value(json_object_get(res, "done")), 1);
    assert_int_equal(json_integer_value(json_object_get(res, "failed")), 0);
    assert_int_equal(json_integer_value(json_object_get(res, "skipped")), 0);
    json_decref(res);
    assert_int_equal(backend_mpu_list(be[1], &test_io, "copies/run1/a.bin", &ups, &nups), 0);
    assert_int_equal(nups, 0);
    backend_mpu_list_free(ups, nups);
    /* journalled: the next pass finds the copy made and does nothing */
    res = NULL;
    assert_int_equal(policy_engine_run(pe, NULL, false, &res), 0);
    assert_int_equal(json_integer_value(json_object_get(res, "done")), 0);
    assert_int_equal(json_integer_value(json_object_get(res, "failed")), 0);
    json_decref(res);
    policy_engine_free(pe);

    hand_backends_free(src, dst, be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_last_steps),  cmocka_unit_test(test_keep_last_mixed_units),
        cmocka_unit_test(test_builtin_and_time), cmocka_unit_test(test_filters_and_triggers),
        cmocka_unit_test(test_retention_off),    cmocka_unit_test(test_idle),
        cmocka_unit_test(test_builtin_floor),    cmocka_unit_test(test_access_floor),
        cmocka_unit_test(test_tenant_and_level), cmocka_unit_test(test_copy_targets),
        cmocka_unit_test(test_engine_ctx),       cmocka_unit_test(test_copy_held_aborts_uploads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
