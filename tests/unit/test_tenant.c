/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_tenant.c - the tenant registry and caller resolution (src/tenant/tenant.h): the cgroup
 * and environ parsers on recorded /proc/<pid>/cgroup texts (Slurm on cgroup v1 and v2, a hybrid
 * hierarchy, Kubernetes in its cgroupfs and systemd forms, a systemd service, a login session,
 * empty, garbage, over-long); the registry's rules (order, AND of fields, uid/gid, cgroup
 * prefixes by segment), the cap (ids fold into "other", -ENOSPC), and the pid cache (a reused
 * pid with another start time is resolved again, the bound holds) over a fake /proc tree the
 * test writes (proc_root); one check of the start-time parser against the real /proc/self; the
 * pidfd path on real processes and threads (an exited child's or thread's entry is not used, a
 * zombie's though its /proc/<pid>/stat still reads the same, the pidfd bound, no fd left after
 * tenant_reg_free); concurrent resolution while tenants and rules are added, and on the pidfd
 * path while children exit (both labelled tsan).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tenant/tenant.h"
#include "testutil.h"

/* ---- recorded /proc/<pid>/cgroup texts ---------------------------------------------------- */

/* Slurm with proctrack/cgroup on cgroup v1 (slurmd under systemd). */
static const char CG_SLURM_V1[] = "12:pids:/slurm/uid_1000/job_4242/step_0/task_0\n"
                                  "11:hugetlb:/\n"
                                  "10:cpuset:/slurm/uid_1000/job_4242/step_0\n"
                                  "9:memory:/slurm/uid_1000/job_4242/step_0/task_0\n"
                                  "8:devices:/slurm/uid_1000/job_4242/step_0\n"
                                  "7:freezer:/slurm/uid_1000/job_4242/step_0\n"
                                  "6:net_cls,net_prio:/\n"
                                  "5:perf_event:/\n"
                                  "4:blkio:/system.slice/slurmd.service\n"
                                  "3:cpu,cpuacct:/system.slice/slurmd.service\n"
                                  "2:rdma:/\n"
                                  "1:name=systemd:/system.slice/slurmd.service\n";
/* Slurm's cgroup/v2 plugin. */
static const char CG_SLURM_V2[] = "0::/system.slice/slurmstepd.scope/job_4243/step_0/user/task_0\n";
/* A hybrid hierarchy (v1 controllers + the unified one), the job's cgroup in the unified tree. */
static const char CG_HYBRID[] = "12:pids:/user.slice/user-1000.slice/session-2.scope\n"
                                "4:memory:/user.slice/user-1000.slice/session-2.scope\n"
                                "3:cpu,cpuacct:/user.slice\n"
                                "1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n"
                                "0::/tierd-test/slurm/uid_1000/job_99/task_0\n";
/* Kubernetes, cgroupfs driver on cgroup v1. */
static const char CG_K8S_CGROUPFS[] =
    "12:pids:/kubepods/burstable/pod6f0f6c5e-1b2a-4c4e-9a8e-2d6f3b9c1a7e/"
    "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9\n"
    "4:memory:/kubepods/burstable/pod6f0f6c5e-1b2a-4c4e-9a8e-2d6f3b9c1a7e/"
    "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9\n"
    "1:name=systemd:/kubepods/burstable/pod6f0f6c5e-1b2a-4c4e-9a8e-2d6f3b9c1a7e/"
    "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9\n";
/* Kubernetes, systemd driver on cgroup v2 (the pod uid's dashes escaped as '_'). */
static const char CG_K8S_SYSTEMD[] =
    "0::/kubepods.slice/kubepods-burstable.slice/"
    "kubepods-burstable-pod6f0f6c5e_1b2a_4c4e_9a8e_2d6f3b9c1a7e.slice/"
    "cri-containerd-0a1b2c3d4e5f60718293a4b5c6d7e8f9.scope\n";
/* A guaranteed-QoS pod (no QoS slice), systemd driver. */
static const char CG_K8S_GUARANTEED[] =
    "0::/kubepods.slice/kubepods-pod0d6e2b1a_aaaa_bbbb_cccc_0123456789ab.slice/"
    "cri-containerd-ff.scope\n";
static const char CG_SERVICE[] = "0::/system.slice/inference-server.service\n";
static const char CG_SESSION[] = "0::/user.slice/user-1000.slice/session-4.scope\n";
static const char CG_USER_APP[] = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                                  "app-gnome-firefox-1234.scope\n";

static struct tenant_origin_id parse_root(const char *text, size_t len, const char *root)
{
    struct tenant_origin_id o;
    int rc = tenant_parse_cgroup(text, len, root, &o);
    if (rc != 0)
        fail_msg("tenant_parse_cgroup: %d for\n%.*s", rc, (int)len, text);
    return o;
}

static struct tenant_origin_id parse_ok(const char *text, size_t len)
{
    return parse_root(text, len, NULL);
}

static struct tenant_origin_id parse_str(const char *text)
{
    return parse_ok(text, strlen(text));
}

static void test_cgroup_slurm(void **state)
{
    (void)state;
    struct tenant_origin_id o = parse_str(CG_SLURM_V1);
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_string_equal(o.id, "4242");
    assert_string_equal(o.cgroup, "/slurm/uid_1000/job_4242/step_0/task_0"); /* first naming */
    assert_false(o.cgroup_truncated);
    assert_true(o.has_job_uid); /* v1: the resolver checks it is the caller's */
    assert_int_equal(o.job_uid, 1000);

    o = parse_str(CG_SLURM_V2);
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_string_equal(o.id, "4243");
    assert_string_equal(o.cgroup, "/system.slice/slurmstepd.scope/job_4243/step_0/user/task_0");
    assert_false(o.has_job_uid);

    /* the hybrid: the v1 lines name a login session (nothing); the unified line's job is under
     * no Slurm root but a configured one */
    o = parse_str(CG_HYBRID);
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    o = parse_root(CG_HYBRID, strlen(CG_HYBRID), "/tierd-test/slurm/");
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_string_equal(o.id, "99");
    assert_true(o.has_job_uid);
    assert_int_equal(o.job_uid, 1000);
    assert_string_equal(o.cgroup, "/tierd-test/slurm/uid_1000/job_99/task_0");

    /* job_ without a Slurm root above it is not a job; job_ must be all digits */
    o = parse_str("0::/batch/job_5/x\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    o = parse_str("0::/slurm/uid_0/job_5a/x\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    o = parse_str("0::/slurm/uid_7/job_123456789012345678901\n"); /* 21 digits */
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    /* no trailing newline, job as the last segment */
    o = parse_str("0::/slurm/uid_7/job_7");
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_string_equal(o.id, "7");
    /* /slurm needs uid_<u> (v1's layout); a configured root takes job_<id> alone too */
    o = parse_str("0::/slurm/job_7\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    o = parse_root("0::/slurm/job_7\n", 16, "/slurm");
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_false(o.has_job_uid);
    o = parse_root("0::/slurm_n1/job_8/step_0\n", 26, "/slurm_n1");
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_string_equal(o.id, "8");
    o = parse_root("0::/slurm_n10/job_8\n", 20, "/slurm_n1"); /* by segment */
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    /* uid_<u> without a job below it: no job, and no uid left behind for the unit it names */
    o = parse_str("0::/slurm/uid_5/notjob/x.service\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_SYSTEMD);
    assert_false(o.has_job_uid);
    /* a uid beyond 4294967294 is no uid, so no job */
    o = parse_str("0::/slurm/uid_4294967295/job_1\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    o = parse_str("0::/slurm/uid_4294967294/job_1\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_int_equal(o.job_uid, 4294967294u);
    /* slurmstepd.scope: job_<id> right below it, anchored at the top */
    o = parse_str("0::/system.slice/slurmstepd.scope/job_3\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_string_equal(o.id, "3");
    o = parse_str("0::/system.slice/slurmstepd.scope/step_0/job_3\n");
    assert_int_not_equal(o.origin, TENANT_ORIGIN_SLURM);
    o = parse_str("0::/x/system.slice/slurmstepd.scope/job_3\n");
    assert_int_not_equal(o.origin, TENANT_ORIGIN_SLURM);
    o = parse_str("0::/system.slice/slurmstepd.scopex/job_3\n");
    assert_int_not_equal(o.origin, TENANT_ORIGIN_SLURM);
}

/* A user's own systemd subtree (user@UID.service, delegated to the user) names no job, however
 * it is shaped: the review's path, and Slurm's own layouts rebuilt inside it. */
static void test_cgroup_user_slice(void **state)
{
    (void)state;
    static const char *const forged[] = {
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/myslurmish/job_4242\n",
        "0::/user.slice/user-1000.slice/user@1000.service/system.slice/slurmstepd.scope/job_4242\n",
        "0::/user.slice/user-1000.slice/user@1000.service/slurm/uid_1000/job_4242\n",
        "0::/user.slice/user-1000.slice/user@1000.service/kubepods/pod1234abcd/c\n",
        "4:memory:/user.slice/slurm/uid_1000/job_4242\n",
    };
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        struct tenant_origin_id o = parse_root(forged[i], strlen(forged[i]), "/slurm");
        if (o.origin == TENANT_ORIGIN_SLURM || o.origin == TENANT_ORIGIN_K8S)
            fail_msg("%s names %s %s", forged[i], o.origin == TENANT_ORIGIN_SLURM ? "job" : "pod",
                     o.id);
    }
}

static void test_cgroup_k8s(void **state)
{
    (void)state;
    struct tenant_origin_id o = parse_str(CG_K8S_CGROUPFS);
    assert_int_equal(o.origin, TENANT_ORIGIN_K8S);
    assert_string_equal(o.id, "6f0f6c5e-1b2a-4c4e-9a8e-2d6f3b9c1a7e");
    o = parse_str(CG_K8S_SYSTEMD);
    assert_int_equal(o.origin, TENANT_ORIGIN_K8S); /* the pod, not the container's .scope */
    assert_string_equal(o.id, "6f0f6c5e-1b2a-4c4e-9a8e-2d6f3b9c1a7e");
    o = parse_str(CG_K8S_GUARANTEED);
    assert_int_equal(o.origin, TENANT_ORIGIN_K8S);
    assert_string_equal(o.id, "0d6e2b1a-aaaa-bbbb-cccc-0123456789ab");
    /* the kubepods slices alone name no pod ("kubepods" holds "pod" but not as a pod uid) */
    o = parse_str("0::/kubepods.slice/kubepods-besteffort.slice\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    /* pod<uid> outside a kubepods hierarchy at the top is not a pod */
    o = parse_str("0::/x/kubepods/pod1234/c\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    o = parse_str("0::/kubepods/pod1234/c\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_K8S);
    assert_string_equal(o.id, "1234");
    o = parse_str("0::/machine.slice/pod1234.scope\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_SYSTEMD);
    assert_string_equal(o.id, "pod1234.scope");
}

static void test_cgroup_systemd(void **state)
{
    (void)state;
    struct tenant_origin_id o = parse_str(CG_SERVICE);
    assert_int_equal(o.origin, TENANT_ORIGIN_SYSTEMD);
    assert_string_equal(o.id, "inference-server.service");
    assert_string_equal(o.cgroup, "/system.slice/inference-server.service");
    /* the last unit of the path */
    o = parse_str(CG_USER_APP);
    assert_int_equal(o.origin, TENANT_ORIGIN_SYSTEMD);
    assert_string_equal(o.id, "app-gnome-firefox-1234.scope");
    /* a login session is not a tenant; its path stays for prefix rules */
    o = parse_str(CG_SESSION);
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    assert_string_equal(o.id, "");
    assert_string_equal(o.cgroup, "/user.slice/user-1000.slice/session-4.scope");
    /* a Slurm job wins over a unit named on an earlier line */
    o = parse_str("1:name=systemd:/system.slice/x.service\n0::/slurm/uid_1/job_3\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_string_equal(o.id, "3");
    /* nothing named: the v2 path is kept, else the name=systemd line's, else the first line's */
    o = parse_str("2:cpu:/a\n1:name=systemd:/b\n0::/c\n");
    assert_string_equal(o.cgroup, "/c");
    o = parse_str("2:cpu:/a\n1:name=systemd:/b\n");
    assert_string_equal(o.cgroup, "/b");
    o = parse_str("2:cpu:/a\n3:memory:/d\n");
    assert_string_equal(o.cgroup, "/a");
}

static void test_cgroup_empty_garbage_long(void **state)
{
    (void)state;
    struct tenant_origin_id o = parse_ok("", 0);
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    assert_string_equal(o.cgroup, "");
    o = parse_ok(NULL, 0);
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    o = parse_str("0::/\n");
    assert_int_equal(o.origin, TENANT_ORIGIN_NONE);
    assert_string_equal(o.cgroup, "/");

    const char *garbage[] = {
        "hello world\n",
        "0:/x\n",
        "x::/a\n",
        "0::relative/path\n",
        "0::\n",
        ":::/a\n",
        "0:cpu x:/a\n",
        "00000000000:cpu:/a\n",
        "0::/a\nnot a line\n",
        "\xff\xfe::/\n",
    };
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        struct tenant_origin_id g;
        int rc = tenant_parse_cgroup(garbage[i], strlen(garbage[i]), NULL, &g);
        if (rc != -EINVAL)
            fail_msg("garbage %zu (%s): rc %d, want -EINVAL", i, garbage[i], rc);
    }
    /* a NUL byte inside: not a cgroup file */
    struct tenant_origin_id g;
    assert_int_equal(tenant_parse_cgroup("0::/slurm/job_1\0x\n", 18, NULL, &g), -EINVAL);
    /* not NUL-terminated: only len bytes are read (the job id stops at len) */
    char buf[40];
    memcpy(buf, "0::/slurm/uid_1/job_12345", 25);
    memset(buf + 25, '9', sizeof(buf) - 25);
    o = parse_ok(buf, 22);
    assert_string_equal(o.id, "12");

    /* a path over 4 KiB: over-long input */
    size_t n = 3 + 5000;
    char *big = malloc(n + 2);
    assert_non_null(big);
    memcpy(big, "0::/", 4);
    memset(big + 4, 'a', n - 4);
    big[n] = '\n';
    assert_int_equal(tenant_parse_cgroup(big, n + 1, NULL, &g), -EINVAL);
    /* a 1000-byte path still names its job; the kept path is cut and says so */
    char *mid = malloc(1100);
    assert_non_null(mid);
    int w = snprintf(mid, 1100, "0::/slurm/uid_1/job_5/%0990d/x\n", 0);
    assert_true(w > 1000);
    o = parse_ok(mid, (size_t)w);
    assert_int_equal(o.origin, TENANT_ORIGIN_SLURM);
    assert_string_equal(o.id, "5");
    assert_true(o.cgroup_truncated);
    assert_int_equal(strlen(o.cgroup), TENANT_CGROUP_MAX - 1);
    assert_memory_equal(o.cgroup, "/slurm/uid_1/job_5/000", 22);
    free(mid);
    free(big);
}

static void test_environ(void **state)
{
    (void)state;
    char job[TENANT_NAME_MAX] = "";
    static const char env1[] = "PATH=/usr/bin\0SLURM_JOB_ID=1234\0HOME=/home/a\0";
    assert_int_equal(tenant_parse_environ(env1, sizeof(env1) - 1, job), 0);
    assert_string_equal(job, "1234");
    static const char env2[] = "PATH=/usr/bin\0SLURM_JOB_NAME=x\0XSLURM_JOB_ID=5\0";
    assert_int_equal(tenant_parse_environ(env2, sizeof(env2) - 1, job), -ENOENT);
    assert_int_equal(tenant_parse_environ("", 0, job), -ENOENT);
    static const char env3[] = "A=b\0SLURM_JOB_ID=77"; /* last entry not terminated */
    assert_int_equal(tenant_parse_environ(env3, sizeof(env3) - 1, job), 0);
    assert_string_equal(job, "77");
    static const char env4[] = "SLURM_JOB_ID=12ab\0";
    assert_int_equal(tenant_parse_environ(env4, sizeof(env4) - 1, job), -EINVAL);
    static const char env5[] = "SLURM_JOB_ID=\0";
    assert_int_equal(tenant_parse_environ(env5, sizeof(env5) - 1, job), -EINVAL);
    static const char env6[] = "SLURM_JOB_ID=123456789012345678901\0"; /* 21 digits */
    assert_int_equal(tenant_parse_environ(env6, sizeof(env6) - 1, job), -EINVAL);
    /* the first one counts */
    static const char env7[] = "SLURM_JOB_ID=8\0SLURM_JOB_ID=9\0";
    assert_int_equal(tenant_parse_environ(env7, sizeof(env7) - 1, job), 0);
    assert_string_equal(job, "8");
}

/* ---- a fake /proc ------------------------------------------------------------------------ */

/* /proc/<pid>/status: the fourth (filesystem) ids of Uid: and Gid:; malformed text refused. */
static void test_parse_status(void **state)
{
    (void)state;
    uid_t u = 7;
    gid_t g = 7;
    static const char ok[] = "Name:\tpy\nUmask:\t0022\nState:\tS (sleeping)\n"
                             "Uid:\t1000\t1001\t1002\t1003\nGid:\t2000\t2001\t2002\t2003\n"
                             "Groups:\t27 100\n";
    assert_int_equal(tenant_parse_status(ok, sizeof(ok) - 1, &u, &g), 0);
    assert_int_equal(u, 1003);
    assert_int_equal(g, 2003);
    /* not NUL-terminated: len bounds it (the last line ends at len) */
    static const char cut[] = "Uid:\t1 2 3 4\nGid:\t5 6 7 8";
    assert_int_equal(tenant_parse_status(cut, sizeof(cut) - 1, &u, &g), 0);
    assert_int_equal(u, 4);
    assert_int_equal(g, 8);
    /* the last field cut off by len: three fields */
    assert_int_equal(tenant_parse_status(cut, sizeof(cut) - 2, &u, &g), -EINVAL);
    static const char *const bad[] = {
        "",
        "Uid:\t1000\t1000\t1000\t1000\n",                       /* no Gid: */
        "Uid:\t1000\t1000\t1000\nGid:\t1\t1\t1\t1\n",           /* three fields */
        "Uid:\t1\t1\t1\t4294967296\nGid:\t1\t1\t1\t1\n",        /* > UINT32_MAX */
        "Uid:\t1\t1\t1\t4294967295\nGid:\t1\t1\t1\t1\n",        /* (uid_t)-1 */
        "Uid:\t1\t1\t1\t99999999999999999999\nGid:\t1 1 1 1\n", /* overflow */
        "Uid:\t1\t1\t1\t-1\nGid:\t1\t1\t1\t1\n",
        "Uid:\t1\t1\t1\t1x\nGid:\t1\t1\t1\t1\n",
        "XUid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(tenant_parse_status(bad[i], strlen(bad[i]), &u, &g), -EINVAL);
}

static char *g_root;

static void put(pid_t pid, const char *file, const char *data, size_t len)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%d", g_root, (int)pid);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/%d/%s", g_root, (int)pid, file);
    tu_write_file(p, data, len);
}

/* A process: its stat line (start time in field 22, a comm with ") (" to trip a naive parser),
 * its cgroup file, its environ (NULL: none readable). */
static void proc_put(pid_t pid, uint64_t start, const char *cgroup, const char *env, size_t envlen)
{
    char stat[512];
    int n = snprintf(stat, sizeof(stat),
                     "%d (py) (x) S 1 %d %d 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 %llu "
                     "123456 789 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n",
                     (int)pid, (int)pid, (int)pid, (unsigned long long)start);
    put(pid, "stat", stat, (size_t)n);
    put(pid, "cgroup", cgroup, strlen(cgroup));
    char p[1024];
    snprintf(p, sizeof(p), "%s/%d/environ", g_root, (int)pid);
    unlink(p);
    if (env)
        put(pid, "environ", env, envlen);
}

static int setup(void **state)
{
    (void)state;
    g_root = tu_mkdtemp("test_tenant");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(g_root);
    free(g_root);
    g_root = NULL;
    return 0;
}

/* A registry over the fake /proc; its configured Slurm root is /slurm, so "/slurm/job_<id>"
 * (the shortest job path) names a job. */
static struct tenant_reg *reg_new(unsigned max_tenants, unsigned pid_cache)
{
    struct tenant_reg_config c = {.max_tenants = max_tenants,
                                  .pid_cache_max = pid_cache,
                                  .proc_root = g_root,
                                  .slurm_cgroup_root = "/slurm"};
    struct tenant_reg *r = NULL;
    assert_int_equal(tenant_reg_new(&c, &r), 0);
    return r;
}

static struct tenant_reg *reg_with(struct tenant_reg_config c)
{
    c.proc_root = g_root;
    struct tenant_reg *r = NULL;
    assert_int_equal(tenant_reg_new(&c, &r), 0);
    return r;
}

static const char *who(struct tenant_reg *r, pid_t pid, uid_t uid, gid_t gid)
{
    return tenant_name(r, tenant_resolve(r, pid, uid, gid).tenant);
}

static void test_registry_basics(void **state)
{
    (void)state;
    struct tenant_reg *r = reg_new(0, 0);
    assert_int_equal(tenant_max(r), TENANT_MAX_TENANTS_DEFAULT);
    assert_int_equal(tenant_count(r), 2);
    assert_string_equal(tenant_name(r, TIER_TENANT_DEFAULT), "default");
    assert_string_equal(tenant_name(r, TIER_TENANT_OTHER), "other");
    assert_string_equal(tenant_name(r, 999), "other");
    assert_int_equal(tenant_class(r, TIER_TENANT_DEFAULT), TIER_IO_TRAINING);

    uint32_t id = 0, id2 = 0;
    assert_int_equal(tenant_add(r, "inference-a", TIER_IO_INFERENCE, NULL, &id), 0);
    assert_int_equal(id, 2);
    assert_int_equal(tenant_class(r, id), TIER_IO_INFERENCE);
    /* idempotent with the same class; another class is refused and changes nothing */
    assert_int_equal(tenant_add(r, "inference-a", TIER_IO_INFERENCE, NULL, &id2), 0);
    assert_int_equal(id2, id);
    assert_int_equal(tenant_add(r, "inference-a", TIER_IO_BACKGROUND, NULL, &id2), -EEXIST);
    assert_int_equal(tenant_class(r, id), TIER_IO_INFERENCE);
    assert_int_equal(tenant_add(r, "default", TIER_IO_INFERENCE, NULL, &id2), -EEXIST);
    assert_int_equal(tenant_count(r), 3);
    /* names */
    const char *bad[] = {
        "",           "a b",
        "x/y",        "caf\xc3\xa9",
        "semi;colon", "0123456789012345678901234567890123456789012345678901234567890123"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(tenant_add(r, bad[i], TIER_IO_TRAINING, NULL, &id2), -EINVAL);
    assert_int_equal(tenant_add(r, NULL, TIER_IO_TRAINING, NULL, &id2), -EINVAL);
    assert_true(tenant_name_valid("a.b_c-D9"));
    assert_int_equal(tenant_count(r), 3);
    /* bad rule fields: -EINVAL, nothing added */
    struct tenant_rule bj = {.slurm_job = "12x"};
    assert_int_equal(tenant_add(r, "j", TIER_IO_TRAINING, &bj, &id2), -EINVAL);
    struct tenant_rule bc = {.cgroup_prefix = "system.slice"};
    assert_int_equal(tenant_add(r, "j", TIER_IO_TRAINING, &bc, &id2), -EINVAL);
    assert_int_equal(tenant_count(r), 3);
    assert_int_equal(tenant_find(r, "j", &id2), -ENOENT);
    /* rules: an identical rule is kept once; an empty rule is no rule */
    struct tenant_rule ru = {.has_uid = true, .uid = 1000};
    assert_int_equal(tenant_add(r, "inference-a", TIER_IO_INFERENCE, &ru, &id2), 0);
    assert_int_equal(tenant_add(r, "inference-a", TIER_IO_INFERENCE, &ru, &id2), 0);
    struct tenant_rule none = {0};
    assert_int_equal(tenant_add(r, "inference-a", TIER_IO_INFERENCE, &none, &id2), 0);
    struct tenant_rule got[4];
    assert_int_equal(tenant_rules(r, id, got, 4), 1);
    assert_true(got[0].has_uid);
    assert_int_equal(got[0].uid, 1000);
    assert_null(got[0].slurm_job);
    /* tenant_register: a NULL class keeps the existing one; created tells new from old */
    bool created = true;
    assert_int_equal(tenant_register(r, "inference-a", NULL, NULL, &id2, &created), 0);
    assert_false(created);
    assert_int_equal(id2, id);
    assert_int_equal(tenant_register(r, "fresh", NULL, NULL, &id2, &created), 0);
    assert_true(created);
    assert_int_equal(tenant_class(r, id2), TIER_IO_TRAINING);
    assert_int_equal(tenant_find(r, "fresh", &id), 0);
    assert_int_equal(id, id2);
    tenant_reg_free(r);
    tenant_reg_free(NULL);

    struct tenant_reg_config c = {.max_tenants = 1};
    assert_int_equal(tenant_reg_new(&c, &r), -EINVAL);
    c.max_tenants = TENANT_MAX_TENANTS_LIMIT + 1;
    assert_int_equal(tenant_reg_new(&c, &r), -EINVAL);
}

static void test_resolve_sources(void **state)
{
    (void)state;
    struct tenant_reg *r =
        reg_with((struct tenant_reg_config){.slurm_cgroup_root = "/tierd-test/slurm"});
    proc_put(101, 1000, CG_SLURM_V1, NULL, 0);
    proc_put(102, 1000, CG_SLURM_V2, NULL, 0);
    proc_put(103, 1000, CG_K8S_SYSTEMD, NULL, 0);
    proc_put(104, 1000, CG_SERVICE, NULL, 0);
    proc_put(105, 1000, CG_SESSION, "A=b\0SLURM_JOB_ID=555\0", 21);
    proc_put(106, 1000, CG_SESSION, "A=b\0", 4);
    proc_put(107, 1000, CG_HYBRID, "SLURM_JOB_ID=1\0", 15); /* the cgroup's job wins */
    proc_put(108, 1000, "garbage", NULL, 0);
    assert_string_equal(who(r, 101, 1000, 1000), "slurm-4242");
    assert_string_equal(who(r, 102, 1000, 1000), "slurm-4243");
    assert_string_equal(who(r, 103, 1000, 1000), "k8s-6f0f6c5e-1b2a-4c4e-9a8e-2d6f3b9c1a7e");
    /* a unit alone, a session, garbage, no process: no job, so the uid's own tenant */
    assert_string_equal(who(r, 104, 1000, 1000), "uid-1000");
    assert_string_equal(who(r, 106, 1000, 1000), "uid-1000");
    assert_string_equal(who(r, 107, 1000, 1000), "slurm-99");
    assert_string_equal(who(r, 108, 1000, 1000), "uid-1000");
    assert_string_equal(who(r, 4000000, 1000, 1000), "uid-1000"); /* no such process */
    /* SLURM_JOB_ID of a job not known to be uid 1000's: ignored */
    assert_string_equal(who(r, 105, 1000, 1000), "uid-1000");
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.env_ignored, 1);
    /* the scheduler says job 555 runs as uid 1000: the cached answer is recomputed */
    assert_int_equal(tenant_job_owner_set(r, "555", 1000), 0);
    assert_string_equal(who(r, 105, 1000, 1000), "slurm-555");
    assert_int_equal(tenant_job_owner_set(r, "55x", 1000), -EINVAL);
    uint32_t id = 0;
    assert_int_equal(tenant_find(r, "slurm-4242", &id), 0);
    assert_true(tenant_implicit(r, id));
    assert_int_equal(tenant_class(r, id), TIER_IO_TRAINING);
    assert_int_equal(tenant_find(r, "uid-1000", &id), 0);
    assert_true(tenant_implicit(r, id));
    /* a scheduler registering the implicit tenant sets its class once */
    assert_int_equal(tenant_find(r, "slurm-4242", &id), 0);
    assert_int_equal(tenant_add(r, "slurm-4242", TIER_IO_INFERENCE, NULL, NULL), 0);
    assert_false(tenant_implicit(r, id));
    assert_int_equal(tenant_class(r, id), TIER_IO_INFERENCE);
    assert_int_equal(tenant_resolve(r, 101, 1000, 1000).cls, TIER_IO_INFERENCE);
    assert_int_equal(tenant_add(r, "slurm-4242", TIER_IO_TRAINING, NULL, NULL), -EEXIST);
    /* uid 0 is the administrator's: default; pid 0 goes by rules alone */
    assert_string_equal(who(r, 106, 0, 0), "default");
    assert_string_equal(who(r, 0, 1000, 1000), "default");

    /* SLURM_JOB_ID straddling two reads of the environ (4 KiB each) */
    size_t envlen = 4090 + 20;
    char *env = malloc(envlen);
    assert_non_null(env);
    memset(env, 'x', 4088);
    memcpy(env, "PAD=", 4);
    env[4088] = '\0';
    memcpy(env + 4089, "SLURM_JOB_ID=31337", 18);
    env[4089 + 18] = '\0';
    proc_put(109, 1000, CG_SESSION, env, 4089 + 19);
    free(env);
    assert_int_equal(tenant_job_owner_set(r, "31337", 1000), 0);
    assert_string_equal(who(r, 109, 1000, 1000), "slurm-31337");
    tenant_reg_free(r);

    /* fallback = default: no uid tenants */
    r = reg_with((struct tenant_reg_config){.fallback_default = true});
    assert_string_equal(who(r, 106, 1000, 1000), "default");
    assert_string_equal(who(r, 102, 1000, 1000), "slurm-4243");
    tenant_reg_free(r);
}

/* The review's forgery: SLURM_JOB_ID of another user's job names neither the job's implicit
 * tenant nor a [tenant] slurm_job rule's, until the scheduler says the job is the caller's. */
static void test_env_forged(void **state)
{
    (void)state;
    struct tenant_reg *r = reg_new(0, 0);
    struct tenant_rule victim = {.slurm_job = "4242"};
    assert_int_equal(tenant_add(r, "victim", TIER_IO_INFERENCE, &victim, NULL), 0);
    proc_put(151, 1000, CG_SESSION, "SLURM_JOB_ID=4242\0", 18);
    proc_put(152, 1000, CG_SESSION, "SLURM_JOB_ID=4243\0", 18);
    assert_string_equal(who(r, 151, 65534, 65534), "uid-65534");
    assert_string_equal(who(r, 152, 65534, 65534), "uid-65534");
    assert_int_equal(tenant_find(r, "slurm-4243", NULL), -ENOENT);
    /* registered for another uid: still ignored */
    assert_int_equal(tenant_job_owner_set(r, "4242", 1000), 0);
    assert_string_equal(who(r, 151, 65534, 65534), "uid-65534");
    /* registered for the caller's uid: the job is its */
    assert_int_equal(tenant_job_owner_set(r, "4242", 65534), 0);
    uid_t u = 0;
    assert_int_equal(tenant_job_owner(r, "4242", &u), 0);
    assert_int_equal(u, 65534);
    assert_string_equal(who(r, 151, 65534, 65534), "victim");
    assert_int_equal(tenant_resolve(r, 151, 65534, 65534).cls, TIER_IO_INFERENCE);
    /* released: back to the uid's own */
    tenant_job_owner_drop(r, "4242");
    assert_int_equal(tenant_job_owner(r, "4242", &u), -ENOENT);
    assert_string_equal(who(r, 151, 65534, 65534), "uid-65534");
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.env_ignored, 4);
    tenant_reg_free(r);
}

/* A v1 job cgroup /slurm/uid_<u>/job_<id> is job <id> only for uid <u>, and teaches that <u>
 * owns the job, so its SLURM_JOB_ID counts too. A v2 job cgroup names no uid: whoever runs in it
 * (a setuid program too) is of the job, but owns nothing. */
static void test_cgroup_uid(void **state)
{
    (void)state;
    struct tenant_reg *r = reg_new(0, 0);
    proc_put(161, 1000, CG_SLURM_V1, NULL, 0); /* uid_1000/job_4242 */
    proc_put(162, 1000, CG_SLURM_V2, NULL, 0); /* slurmstepd.scope/job_4243 */
    proc_put(163, 1000, "0::/system.slice/slurmstepd.scope/job_6000/step_0\n", NULL, 0);
    proc_put(164, 1000, CG_SESSION, "SLURM_JOB_ID=4243\0", 18);
    assert_string_equal(who(r, 161, 1001, 1001), "uid-1001"); /* not its uid_ */
    assert_string_equal(who(r, 161, 1001, 1001), "uid-1001");
    assert_int_equal(tenant_find(r, "slurm-4242", NULL), -ENOENT);
    assert_string_equal(who(r, 161, 1000, 1000), "slurm-4242");
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.uid_mismatch, 1); /* the second was a cache hit */
    /* the owner is learnt from the uid_1000 cgroup; the same uid's environ then names the job */
    uid_t u = 0;
    assert_int_equal(tenant_job_owner(r, "4242", &u), 0);
    assert_int_equal(u, 1000);
    proc_put(165, 1000, CG_SESSION, "SLURM_JOB_ID=4242\0", 18);
    assert_string_equal(who(r, 165, 1000, 1000), "slurm-4242");
    assert_string_equal(who(r, 165, 1001, 1001), "uid-1001");
    /* a v2 job cgroup teaches no owner: a setuid program of uid 1002 inside job 4243 is of
     * the job, but its SLURM_JOB_ID elsewhere is not believed */
    assert_string_equal(who(r, 164, 1002, 1002), "uid-1002");
    assert_string_equal(who(r, 162, 1002, 1002), "slurm-4243");
    assert_int_equal(tenant_job_owner(r, "4243", &u), -ENOENT);
    assert_string_equal(who(r, 164, 1002, 1002), "uid-1002");
    /* root in a job's cgroup (slurmstepd) is of the job but owns nothing */
    assert_string_equal(who(r, 163, 0, 0), "slurm-6000");
    assert_int_equal(tenant_job_owner(r, "6000", &u), -ENOENT);
    tenant_reg_free(r);
}

static uint64_t g_now_s = 1000;
static uint64_t fake_now_s(void)
{
    return g_now_s;
}

/* Reclaim's hooks in the tests: one id may be made busy; the retire calls are recorded. */
static uint32_t g_busy_id = UINT32_MAX;
static uint32_t g_retired[16];
static size_t g_nretired;

static bool busy_hook(void *ud, uint32_t id)
{
    (void)ud;
    return id == g_busy_id;
}

static void retire_hook(void *ud, uint32_t id)
{
    (void)ud;
    if (g_nretired < 16)
        g_retired[g_nretired++] = id;
}

/* An implicit tenant idle for idle_reclaim_s and holding nothing is reclaimed, its id reused
 * only after a second idle period; a busy one and a configured one are not; a pid cached for
 * the old tenant is resolved afresh, never answered with the id's new tenant. */
static void test_reclaim(void **state)
{
    (void)state;
    g_now_s = 1000;
    g_busy_id = UINT32_MAX;
    g_nretired = 0;
    struct tenant_reg *r = reg_with((struct tenant_reg_config){
        .idle_reclaim_s = 100, .now_s = fake_now_s, .slurm_cgroup_root = "/slurm"});
    assert_int_equal(tenant_count(r), 3);
    assert_string_equal(tenant_name(r, TENANT_RETIRED_ID), "retired");
    assert_int_equal(tenant_add(r, "retired", TIER_IO_TRAINING, NULL, NULL), -EINVAL);
    uint32_t conf = 0, a = 0, b = 0, c = 0;
    assert_int_equal(tenant_add(r, "conf", TIER_IO_TRAINING, NULL, &conf), 0);
    proc_put(201, 1000, "0::/slurm/job_501\n", NULL, 0);
    proc_put(202, 1000, "0::/slurm/job_502\n", NULL, 0);
    proc_put(203, 1000, "0::/slurm/job_503\n", NULL, 0);
    a = tenant_resolve(r, 201, 0, 0).tenant;
    b = tenant_resolve(r, 202, 0, 0).tenant;
    assert_string_equal(tenant_name(r, a), "slurm-501");
    assert_string_equal(tenant_name(r, b), "slurm-502");
    /* no hooks yet: nothing is reclaimed, however idle */
    g_now_s += 1000;
    assert_int_equal(tenant_reclaim(r), 0);
    tenant_reclaim_hooks_set(
        r, &(struct tenant_reclaim_hooks){.busy = busy_hook, .retire = retire_hook});
    assert_int_equal(tenant_reclaim(r), 0); /* touched before this sweep: idle from now */
    g_busy_id = b;                          /* b holds something (hot-tier bytes, hints) */
    g_now_s += 99;
    assert_int_equal(tenant_reclaim(r), 0);
    g_now_s += 1;
    assert_int_equal(tenant_reclaim(r), 1);
    assert_false(tenant_in_use(r, a));
    assert_true(tenant_in_use(r, b));
    assert_true(tenant_in_use(r, conf)); /* configured: never */
    assert_int_equal(tenant_find(r, "slurm-501", NULL), -ENOENT);
    assert_int_equal(g_nretired, 1);
    assert_int_equal(g_retired[0], a);
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.reclaimed, 1);
    assert_int_equal(st.ids_free, 0);
    /* in quarantine the id is not handed out: a new tenant takes a new id */
    c = tenant_resolve(r, 203, 0, 0).tenant;
    assert_string_equal(tenant_name(r, c), "slurm-503");
    assert_int_not_equal(c, a);
    g_now_s += 100;
    assert_int_equal(tenant_reclaim(r), 0); /* a freed (a second fold), b still busy */
    assert_int_equal(g_nretired, 2);
    assert_int_equal(g_retired[1], a);
    tenant_stats_get(r, &st);
    assert_int_equal(st.ids_free, 1);
    /* the freed id goes to the next new tenant */
    proc_put(204, 1000, "0::/slurm/job_504\n", NULL, 0);
    uint32_t d = tenant_resolve(r, 204, 0, 0).tenant;
    assert_int_equal(d, a);
    assert_string_equal(tenant_name(r, d), "slurm-504");
    assert_true(tenant_in_use(r, d));
    /* pid 201 was cached as id a: it is resolved again, as its own job's tenant */
    uint32_t again = tenant_resolve(r, 201, 0, 0).tenant;
    assert_int_not_equal(again, a);
    assert_string_equal(tenant_name(r, again), "slurm-501");
    /* b, no longer busy, goes; the configured tenant stays however long it is idle; d, with an
     * open handle (reads through it are not resolved), stays until the handle is released and
     * a whole idle period has passed */
    g_busy_id = UINT32_MAX;
    tenant_hold(r, d);
    g_now_s += 1000;
    (void)tenant_reclaim(r);
    (void)tenant_reclaim(r);
    assert_false(tenant_in_use(r, b));
    assert_true(tenant_in_use(r, conf));
    assert_true(tenant_in_use(r, TENANT_RETIRED_ID));
    assert_true(tenant_in_use(r, d));
    tenant_unhold(r, d);
    g_now_s += 99;
    (void)tenant_reclaim(r);
    assert_true(tenant_in_use(r, d));
    g_now_s += 1;
    (void)tenant_reclaim(r);
    assert_false(tenant_in_use(r, d));
    tenant_reg_free(r);
}

/* A hook that registers an implicit tenant's name while the sweep asks it (the hooks run without
 * the registry lock, as POST /v1/tenants may then): the sweep must keep the now explicit tenant. */
static struct tenant_reg *g_reg_in_hook;
static const char *g_reg_name;
static const struct tenant_rule *g_reg_rule;

static bool registering_hook(void *ud, uint32_t id)
{
    (void)ud;
    if (g_reg_name && strcmp(tenant_name(g_reg_in_hook, id), g_reg_name) == 0)
        assert_int_equal(tenant_register(g_reg_in_hook, g_reg_name, NULL, g_reg_rule, NULL, NULL),
                         0);
    return false;
}

/* tenant_lookup (the GPU sampler's): the tenant a process resolves to when it exists; it creates
 * none, touches none (an observed process keeps no tenant from reclaim), counts nothing. */
static void test_lookup(void **state)
{
    (void)state;
    g_now_s = 1000;
    g_busy_id = UINT32_MAX;
    g_nretired = 0;
    struct tenant_reg *r = reg_with((struct tenant_reg_config){
        .idle_reclaim_s = 100, .now_s = fake_now_s, .slurm_cgroup_root = "/slurm"});
    tenant_reclaim_hooks_set(
        r, &(struct tenant_reclaim_hooks){.busy = busy_hook, .retire = retire_hook});
    proc_put(301, 1000, "0::/slurm/job_601\n", NULL, 0);
    proc_put(302, 1000, "0::/user.slice/user-1001.slice/session-3.scope\n", NULL, 0);
    proc_put(303, 1000, "0::/user.slice/user-1000.slice/session-4.scope\n", "SLURM_JOB_ID=777\0",
             17);
    uint32_t n0 = tenant_count(r), id = 0;
    assert_int_equal(tenant_lookup(r, 301, 1000, 1000, &id), -ENOENT); /* slurm-601 */
    assert_int_equal(tenant_lookup(r, 302, 1001, 1001, &id), -ENOENT); /* uid-1001 */
    assert_int_equal(tenant_lookup(r, 303, 1000, 1000, &id), -ENOENT); /* uid-1000 */
    assert_int_equal(tenant_lookup(r, 0, 1000, 1000, &id), -ENOENT);
    assert_int_equal(tenant_count(r), n0);
    assert_int_equal(tenant_find(r, "slurm-601", NULL), -ENOENT);
    assert_int_equal(tenant_find(r, "uid-1001", NULL), -ENOENT);
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.env_ignored, 0); /* judged the same, but not counted */
    /* uid 0 with no job is "default", which exists */
    assert_int_equal(tenant_lookup(r, 302, 0, 0, &id), 0);
    assert_int_equal(id, TIER_TENANT_DEFAULT);
    /* once a caller made it, the lookup finds it */
    uint32_t a = tenant_resolve(r, 301, 1000, 1000).tenant;
    assert_string_equal(tenant_name(r, a), "slurm-601");
    assert_int_equal(tenant_lookup(r, 301, 1000, 1000, &id), 0);
    assert_int_equal(id, a);
    assert_int_equal(tenant_count(r), n0 + 1);
    /* lookups do not keep it from reclaim */
    assert_int_equal(tenant_reclaim(r), 0); /* touched before this sweep: idle from now */
    for (int i = 0; i < 10; i++) {
        g_now_s += 10;
        assert_int_equal(tenant_lookup(r, 301, 1000, 1000, &id), 0);
    }
    assert_int_equal(tenant_reclaim(r), 1);
    assert_false(tenant_in_use(r, a));
    assert_int_equal(tenant_lookup(r, 301, 1000, 1000, &id), -ENOENT);
    tenant_reg_free(r);
}

static void test_reclaim_registered_meanwhile(void **state)
{
    (void)state;
    g_now_s = 1000;
    struct tenant_reg *r = reg_with((struct tenant_reg_config){
        .idle_reclaim_s = 100, .now_s = fake_now_s, .slurm_cgroup_root = "/slurm"});
    tenant_reclaim_hooks_set(r, &(struct tenant_reclaim_hooks){.busy = registering_hook});
    g_reg_in_hook = r;
    proc_put(211, 1000, "0::/slurm/job_511\n", NULL, 0);
    proc_put(212, 1000, "0::/slurm/job_512\n", NULL, 0);
    proc_put(213, 1000, "0::/slurm/job_513\n", NULL, 0);
    uint32_t a = tenant_resolve(r, 211, 0, 0).tenant;
    uint32_t b = tenant_resolve(r, 212, 0, 0).tenant;
    uint32_t c = tenant_resolve(r, 213, 0, 0).tenant;
    assert_string_equal(tenant_name(r, a), "slurm-511");
    assert_int_equal(tenant_reclaim(r), 0); /* touched: idle from now */
    g_now_s += 50;
    assert_int_equal(tenant_find(r, "slurm-512", NULL), 0); /* b: idle from the next sweep */
    g_now_s += 50;
    /* a registered without a rule, b with one (uid 1000), both while the sweep asks the hook;
     * c is reclaimed */
    g_reg_name = "slurm-511";
    g_reg_rule = NULL;
    struct tenant_rule rule = {.tenant = "slurm-512", .has_uid = true, .uid = 1000};
    assert_int_equal(tenant_reclaim(r), 1);
    assert_true(tenant_in_use(r, a));
    assert_false(tenant_in_use(r, c));
    g_now_s += 100;
    g_reg_name = "slurm-512";
    g_reg_rule = &rule;
    assert_int_equal(tenant_reclaim(r), 0);
    assert_true(tenant_in_use(r, b));
    assert_string_equal(tenant_name(r, b), "slurm-512");
    /* registered: never reclaimed later either; the rule's id stays its tenant's */
    g_reg_name = NULL;
    g_now_s += 1000;
    (void)tenant_reclaim(r);
    (void)tenant_reclaim(r);
    assert_true(tenant_in_use(r, a));
    assert_true(tenant_in_use(r, b));
    assert_string_equal(tenant_name(r, b), "slurm-512");
    assert_string_equal(tenant_name(r, a), "slurm-511");
    g_reg_in_hook = NULL;
    tenant_reg_free(r);
}

/* Implicit tenants stay within max_tenants - reserved_ids, so explicit ones find ids; one uid
 * creates at most implicit_per_minute job tenants a minute. */
static void test_reserve_rate(void **state)
{
    (void)state;
    struct tenant_reg_config bad = {.max_tenants = 8, .reserved_ids = 7};
    struct tenant_reg *r = NULL;
    assert_int_equal(tenant_reg_new(&bad, &r), -EINVAL);
    r = reg_with((struct tenant_reg_config){
        .max_tenants = 8, .reserved_ids = 2, .slurm_cgroup_root = "/slurm"});
    for (int k = 1; k <= 5; k++) {
        char cg[64];
        snprintf(cg, sizeof(cg), "0::/slurm/job_%d\n", k);
        proc_put(170 + k, 1000, cg, NULL, 0);
    }
    proc_put(176, 1000, CG_SESSION, NULL, 0);
    for (int k = 1; k <= 4; k++) {
        char want[32];
        snprintf(want, sizeof(want), "slurm-%d", k);
        assert_string_equal(who(r, 170 + k, 0, 0), want);
    }
    assert_int_equal(tenant_count(r), 6);
    assert_string_equal(who(r, 175, 0, 0), "other");       /* the implicit share is full */
    assert_string_equal(who(r, 176, 1000, 1000), "other"); /* uid tenants share it */
    uint32_t id = 0;
    assert_int_equal(tenant_register(r, "a", NULL, NULL, &id, NULL), 0);
    assert_int_equal(tenant_register(r, "b", NULL, NULL, &id, NULL), 0);
    assert_int_equal(tenant_register(r, "c", NULL, NULL, &id, NULL), -ENOSPC);
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.folded, 2);
    assert_int_equal(st.rate_folded, 0);
    tenant_reg_free(r);

    /* the rate counts jobs named by SLURM_JOB_ID (a job the scheduler gave the uid) */
    g_now_s = 1000;
    r = reg_with((struct tenant_reg_config){
        .implicit_per_minute = 4, .now_s = fake_now_s, .slurm_cgroup_root = "/slurm"});
    for (int k = 0; k < 6; k++) {
        char env[32], job[16];
        int n = snprintf(env, sizeof(env), "SLURM_JOB_ID=%d", 10 + k);
        proc_put(180 + k, 1000, CG_SESSION, env, (size_t)n + 1);
        snprintf(job, sizeof(job), "%d", 10 + k);
        assert_int_equal(tenant_job_owner_set(r, job, 1000), 0);
    }
    assert_int_equal(tenant_job_owner_set(r, "20", 1001), 0);
    proc_put(186, 1000, CG_SESSION, "SLURM_JOB_ID=20\0", 16);
    proc_put(187, 1000, CG_SESSION, NULL, 0);
    proc_put(188, 2000, CG_SESSION, "SLURM_JOB_ID=14\0", 16);
    for (int k = 0; k < 4; k++) {
        char want[32];
        snprintf(want, sizeof(want), "slurm-%d", 10 + k);
        assert_string_equal(who(r, 180 + k, 1000, 1000), want);
    }
    assert_string_equal(who(r, 184, 1000, 1000), "other"); /* the fifth in a minute */
    assert_string_equal(who(r, 185, 1000, 1000), "other");
    assert_string_equal(who(r, 186, 1001, 1001), "slurm-20"); /* another uid's own count */
    assert_string_equal(who(r, 187, 1000, 1000), "uid-1000"); /* not a job tenant */
    assert_string_equal(who(r, 180, 1000, 1000), "slurm-10"); /* existing ones resolve */
    tenant_stats_get(r, &st);
    assert_int_equal(st.rate_folded, 2);
    g_now_s += 59;
    assert_string_equal(who(r, 188, 1000, 1000), "other");
    g_now_s += 1; /* a new minute: a new process of job 14 gets its tenant */
    proc_put(188, 3000, CG_SESSION, "SLURM_JOB_ID=14\0", 16);
    assert_string_equal(who(r, 188, 1000, 1000), "slurm-14");
    /* jobs and pods root-made cgroups prove are not rated: a job array's many tasks, pods */
    for (int k = 0; k < 6; k++) {
        char cg[64], want[32];
        snprintf(cg, sizeof(cg), "0::/slurm/uid_1000/job_%d\n", 30 + k);
        proc_put(190 + k, 1000, cg, NULL, 0);
        snprintf(want, sizeof(want), "slurm-%d", 30 + k);
        assert_string_equal(who(r, 190 + k, 1000, 1000), want);
    }
    tenant_stats_get(r, &st);
    assert_int_equal(st.rate_folded, 3);
    tenant_reg_free(r);
}

/* uid-<uid> tenants take at most half of the implicit share: past it a new uid is 'default', and
 * jobs still get their own ids. */
static void test_uid_budget(void **state)
{
    (void)state;
    /* 8 ids, default and other: 6 implicit, 3 of them for uids */
    struct tenant_reg *r = reg_with((struct tenant_reg_config){.max_tenants = 8});
    proc_put(301, 1000, CG_SESSION, NULL, 0);
    for (uid_t u = 1000; u < 1003; u++) {
        char want[32];
        snprintf(want, sizeof(want), "uid-%u", (unsigned)u);
        assert_string_equal(who(r, 301, u, u), want);
    }
    assert_string_equal(who(r, 301, 1003, 1003), "default");
    assert_string_equal(who(r, 301, 1004, 1004), "default");
    assert_string_equal(who(r, 301, 1001, 1001), "uid-1001"); /* existing ones resolve */
    for (int k = 0; k < 3; k++) {
        char cg[64], want[32];
        snprintf(cg, sizeof(cg), "0::/system.slice/slurmstepd.scope/job_%d\n", 40 + k);
        proc_put(302 + k, 1000, cg, NULL, 0);
        snprintf(want, sizeof(want), "slurm-%d", 40 + k);
        assert_string_equal(who(r, 302 + k, 1005, 1005), want);
    }
    assert_int_equal(tenant_count(r), 8);
    tenant_reg_free(r);
}

/* The job-owner table: the scheduler's entries are released by the job that set them; two
 * registrations of one Slurm job id with different uids (clusters sharing one tierd) are a
 * conflict; when full, learnt entries go first, then the oldest of the scheduler's. */
static void test_owner_table(void **state)
{
    (void)state;
    struct tenant_reg *r = reg_new(0, 0);
    uid_t u = 0;
    assert_false(tenant_job_valid("007"));
    assert_true(tenant_job_valid("0"));
    assert_true(tenant_job_valid("70"));
    assert_int_equal(tenant_job_owner_set_by(r, "007", 1000, "x"), -EINVAL);
    /* a conflict: believed for neither */
    assert_int_equal(tenant_job_owner_set_by(r, "7", 1000, "east.7"), 0);
    assert_int_equal(tenant_job_owner_set_by(r, "7", 1000, "east.7"), 0);
    assert_int_equal(tenant_job_owner(r, "7", &u), 0);
    proc_put(311, 1000, CG_SESSION, "SLURM_JOB_ID=7\0", 15);
    assert_string_equal(who(r, 311, 1000, 1000), "slurm-7");
    assert_int_equal(tenant_job_owner_set_by(r, "7", 2000, "west.7"), 0);
    assert_int_equal(tenant_job_owner(r, "7", &u), -EBUSY);
    assert_int_equal(tenant_job_owner_set_by(r, "7", 1000, "east.7"), 0); /* stays a conflict */
    assert_int_equal(tenant_job_owner(r, "7", &u), -EBUSY);
    assert_string_equal(who(r, 311, 1000, 1000), "uid-1000");
    assert_string_equal(who(r, 311, 2000, 2000), "uid-2000");
    /* released by a job that did not set it: kept; by the one that did: gone */
    tenant_job_owner_release(r, "west.7");
    assert_int_equal(tenant_job_owner(r, "7", &u), -EBUSY);
    tenant_job_owner_release(r, "east.7");
    assert_int_equal(tenant_job_owner(r, "7", &u), -ENOENT);
    /* the scheduler's word replaces a learnt owner without a conflict */
    proc_put(312, 1000, "0::/slurm/uid_1000/job_8\n", NULL, 0);
    assert_string_equal(who(r, 312, 1000, 1000), "slurm-8");
    assert_int_equal(tenant_job_owner(r, "8", &u), 0);
    assert_int_equal(tenant_job_owner_set_by(r, "8", 1001, "8"), 0);
    assert_int_equal(tenant_job_owner(r, "8", &u), 0);
    assert_int_equal(u, 1001);
    /* a rule's word (no job) for the same uid leaves the entry to the job that set it */
    assert_int_equal(tenant_job_owner_set(r, "8", 1001), 0);
    tenant_job_owner_release(r, "8");
    assert_int_equal(tenant_job_owner(r, "8", &u), -ENOENT);
    /* eviction: scheduler entry "1", then a learnt one, then scheduler entries to the brim */
    assert_int_equal(tenant_job_owner_set_by(r, "1", 1000, "1"), 0);
    proc_put(313, 1000, "0::/slurm/uid_1000/job_2\n", NULL, 0);
    assert_string_equal(who(r, 313, 1000, 1000), "slurm-2");
    assert_int_equal(tenant_job_owner(r, "2", &u), 0);
    for (int k = 3; k <= TENANT_JOB_OWNERS_MAX; k++) {
        char job[16];
        snprintf(job, sizeof(job), "%d", k);
        assert_int_equal(tenant_job_owner_set_by(r, job, 1000, job), 0);
    }
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.job_owners, TENANT_JOB_OWNERS_MAX);
    assert_int_equal(tenant_job_owner_set_by(r, "100000", 1000, "100000"), 0);
    assert_int_equal(tenant_job_owner(r, "2", &u), -ENOENT); /* the learnt one went */
    assert_int_equal(tenant_job_owner(r, "1", &u), 0);
    assert_int_equal(tenant_job_owner_set_by(r, "100001", 1000, "100001"), 0);
    assert_int_equal(tenant_job_owner(r, "1", &u), -ENOENT); /* then the oldest */
    assert_int_equal(tenant_job_owner(r, "3", &u), 0);
    assert_int_equal(tenant_job_owner(r, "100000", &u), 0);
    tenant_reg_free(r);
}

/* Read what fn writes to stderr (the log) into buf. */
static void stderr_of(void (*fn)(void), char *buf, size_t cap)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/stderr", g_root);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    fn();
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    ssize_t n = pread(fd, buf, cap - 1, 0);
    assert_true(n >= 0);
    buf[n] = '\0';
    close(fd);
}

static void ns_private(void)
{
    /* a container's private cgroup namespace: paths read relative to tierd's own cgroup */
    proc_put(321, 1000, "0::/../../kubepods-burstable-pod1234.slice/cri-containerd-ab.scope\n",
             NULL, 0);
    struct tenant_reg *r = reg_new(0, 0);
    assert_string_equal(who(r, 321, 1000, 1000), "uid-1000");
    assert_string_equal(who(r, 321, 1001, 1001), "uid-1001");
    tenant_reg_free(r);
}

static void ns_self(void)
{
    char p[1100];
    snprintf(p, sizeof(p), "%s/self", g_root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/self/cgroup", g_root);
    tu_write_file(p, "0::/..\n", 7);
    struct tenant_reg *r = reg_new(0, 0);
    tenant_reg_free(r);
    unlink(p);
}

/* tierd's cgroup namespace is another than pid 1's (two files stand for the two nsfs links;
 * the same file for one namespace) */
static void ns_files(bool same)
{
    char p[1100], q[1100];
    snprintf(p, sizeof(p), "%s/self", g_root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/self/ns", g_root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/1", g_root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/1/ns", g_root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/self/ns/cgroup", g_root);
    snprintf(q, sizeof(q), "%s/1/ns/cgroup", g_root);
    tu_write_file(p, "x", 1);
    if (same)
        assert_int_equal(link(p, q), 0);
    else
        tu_write_file(q, "y", 1);
    struct tenant_reg *r = reg_new(0, 0);
    tenant_reg_free(r);
    unlink(p);
    unlink(q);
}
static void ns_other(void)
{
    ns_files(false);
}
static void ns_same(void)
{
    ns_files(true);
}

/* tierd in a private cgroup namespace says so, once (at start, or at the first caller whose
 * path starts with "/.."). */
static void test_cgroup_namespace(void **state)
{
    (void)state;
    char buf[8192];
    const char *msg = "run tierd in the host cgroup namespace";
    stderr_of(ns_private, buf, sizeof(buf));
    char *hit = strstr(buf, msg);
    assert_non_null(hit);
    assert_null(strstr(hit + 1, msg)); /* once */
    stderr_of(ns_self, buf, sizeof(buf));
    assert_non_null(strstr(buf, msg));
    stderr_of(ns_other, buf, sizeof(buf));
    assert_non_null(strstr(buf, "a cgroup namespace of its own"));
    stderr_of(ns_same, buf, sizeof(buf));
    assert_null(strstr(buf, "a cgroup namespace of its own"));
}

static void test_rules(void **state)
{
    (void)state;
    proc_put(201, 1000, CG_SLURM_V2, NULL, 0);     /* job 4243 */
    proc_put(202, 1000, CG_SERVICE, NULL, 0);      /* /system.slice/inference-server.service */
    proc_put(203, 1000, CG_SESSION, NULL, 0);      /* a login session */
    proc_put(204, 1000, CG_K8S_CGROUPFS, NULL, 0); /* a pod */

    /* rule order: the first match wins */
    struct tenant_reg *r = reg_new(0, 0);
    struct tenant_rule by_uid = {.has_uid = true, .uid = 1000};
    struct tenant_rule by_job = {.slurm_job = "4243"};
    assert_int_equal(tenant_add(r, "alice", TIER_IO_TRAINING, &by_uid, NULL), 0);
    assert_int_equal(tenant_add(r, "job", TIER_IO_CHECKPOINT, &by_job, NULL), 0);
    assert_string_equal(who(r, 201, 1000, 1000), "alice");
    assert_string_equal(who(r, 201, 1001, 1000), "job");
    struct tier_ioctx io = tenant_resolve(r, 201, 1001, 1000);
    assert_int_equal(io.cls, TIER_IO_CHECKPOINT);
    tenant_reg_free(r);
    r = reg_new(0, 0);
    assert_int_equal(tenant_add(r, "job", TIER_IO_CHECKPOINT, &by_job, NULL), 0);
    assert_int_equal(tenant_add(r, "alice", TIER_IO_TRAINING, &by_uid, NULL), 0);
    assert_string_equal(who(r, 201, 1000, 1000), "job");
    /* a rule matches a pod too, before its implicit tenant */
    assert_string_equal(who(r, 204, 1000, 1000), "alice");
    assert_string_equal(who(r, 204, 1002, 1000), "k8s-6f0f6c5e-1b2a-4c4e-9a8e-2d6f3b9c1a7e");
    tenant_reg_free(r);

    /* uid and gid: every field set must match */
    r = reg_new(0, 0);
    struct tenant_rule both = {.has_uid = true, .uid = 1000, .has_gid = true, .gid = 50};
    struct tenant_rule by_gid = {.has_gid = true, .gid = 60};
    assert_int_equal(tenant_add(r, "both", TIER_IO_TRAINING, &both, NULL), 0);
    assert_int_equal(tenant_add(r, "grp", TIER_IO_BACKGROUND, &by_gid, NULL), 0);
    assert_string_equal(who(r, 203, 1000, 50), "both");
    assert_string_equal(who(r, 203, 1000, 51), "uid-1000");
    assert_string_equal(who(r, 203, 1001, 50), "uid-1001");
    assert_string_equal(who(r, 203, 7, 60), "grp");
    assert_string_equal(who(r, 0, 7, 60), "grp"); /* pid 0: the uid/gid rules still apply */
    assert_string_equal(who(r, 0, 7, 61), "default");
    tenant_reg_free(r);

    /* cgroup prefixes match by segment; a trailing '/' is the same prefix */
    r = reg_new(0, 0);
    struct tenant_rule sl = {.cgroup_prefix = "/system.sl"};
    struct tenant_rule svc = {.cgroup_prefix = "/system.slice/inference-server.service/"};
    struct tenant_rule users = {.cgroup_prefix = "/user.slice"};
    assert_int_equal(tenant_add(r, "partial", TIER_IO_TRAINING, &sl, NULL), 0);
    assert_int_equal(tenant_add(r, "svc", TIER_IO_INFERENCE, &svc, NULL), 0);
    assert_int_equal(tenant_add(r, "users", TIER_IO_TRAINING, &users, NULL), 0);
    assert_string_equal(who(r, 202, 0, 0), "svc");
    assert_string_equal(who(r, 203, 1000, 1000), "users");
    assert_string_equal(who(r, 201, 1000, 1000), "slurm-4243");
    struct tenant_rule got[2];
    assert_int_equal(tenant_rules(r, 3, got, 2), 1);
    assert_string_equal(got[0].cgroup_prefix, "/system.slice/inference-server.service");
    tenant_reg_free(r);

    /* a rule added after a process was resolved (and cached) applies to it */
    r = reg_new(0, 0);
    assert_string_equal(who(r, 201, 1000, 1000), "slurm-4243");
    assert_string_equal(who(r, 201, 1000, 1000), "slurm-4243");
    assert_int_equal(tenant_add(r, "late", TIER_IO_INFERENCE, &by_job, NULL), 0);
    assert_string_equal(who(r, 201, 1000, 1000), "late");
    tenant_reg_free(r);
}

static void test_cap(void **state)
{
    (void)state;
    proc_put(301, 1000, "0::/slurm/job_1\n", NULL, 0);
    proc_put(302, 1000, "0::/slurm/job_2\n", NULL, 0);
    proc_put(303, 1000, "0::/slurm/job_3\n", NULL, 0);
    struct tenant_reg *r = reg_new(4, 0);
    uint32_t id = 0;
    assert_int_equal(tenant_add(r, "a", TIER_IO_INFERENCE, NULL, &id), 0);
    assert_string_equal(who(r, 301, 0, 0), "slurm-1"); /* the 4th id */
    assert_int_equal(tenant_count(r), 4);
    assert_int_equal(tenant_add(r, "b", TIER_IO_TRAINING, NULL, &id), -ENOSPC);
    struct tenant_rule ru = {.slurm_job = "3"};
    assert_int_equal(tenant_add(r, "c", TIER_IO_TRAINING, &ru, &id), -ENOSPC);
    assert_int_equal(tenant_count(r), 4);
    struct tenant_rule got[1];
    for (uint32_t t = 0; t < 4; t++)
        assert_int_equal(tenant_rules(r, t, got, 1), 0); /* the refused rule was not kept */
    /* a full registry still takes rules for an existing tenant, and names it */
    assert_int_equal(tenant_add(r, "a", TIER_IO_INFERENCE, &ru, &id), 0);
    assert_string_equal(who(r, 303, 0, 0), "a");
    /* an unmatched job beyond the cap folds into other */
    struct tier_ioctx io = tenant_resolve(r, 302, 0, 0);
    assert_int_equal(io.tenant, TIER_TENANT_OTHER);
    assert_int_equal(io.cls, TIER_IO_TRAINING);
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.folded, 1);
    assert_int_equal(tenant_count(r), 4);
    /* known tenants still resolve */
    assert_string_equal(who(r, 301, 0, 0), "slurm-1");
    tenant_reg_free(r);
}

static void test_pid_reuse(void **state)
{
    (void)state;
    struct tenant_reg *r = reg_new(0, 0);
    struct tenant_stats st;
    proc_put(401, 5000, "0::/slurm/job_11\n", NULL, 0);
    assert_string_equal(who(r, 401, 1000, 1000), "slurm-11");
    /* same process (same start time): the cache answers, even if its files now say otherwise */
    proc_put(401, 5000, "0::/slurm/job_99\n", NULL, 0);
    assert_string_equal(who(r, 401, 1000, 1000), "slurm-11");
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_hits, 1);
    assert_int_equal(st.cache_misses, 1);
    /* the pid reused by a new process (another start time): resolved again */
    proc_put(401, 6000, "0::/slurm/job_12\n", NULL, 0);
    assert_string_equal(who(r, 401, 1000, 1000), "slurm-12");
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_misses, 2);
    assert_int_equal(st.cache_entries, 1); /* one slot per pid */
    /* the same process after setuid: resolved again (uid rules may differ) */
    struct tenant_rule ru = {.has_uid = true, .uid = 0};
    assert_int_equal(tenant_add(r, "root", TIER_IO_BACKGROUND, &ru, NULL), 0);
    assert_string_equal(who(r, 401, 1000, 1000), "slurm-12");
    assert_string_equal(who(r, 401, 0, 1000), "root");
    /* the process gone: nothing cached is used (no start time to compare) */
    char p[1024];
    snprintf(p, sizeof(p), "%s/401/stat", g_root);
    assert_int_equal(unlink(p), 0);
    assert_string_equal(who(r, 401, 1000, 1000), "slurm-12"); /* from its cgroup file */
    snprintf(p, sizeof(p), "%s/401/cgroup", g_root);
    assert_int_equal(unlink(p), 0);
    assert_string_equal(who(r, 401, 1000, 1000), "uid-1000");
    tenant_reg_free(r);
}

static void test_pid_cache_bound(void **state)
{
    (void)state;
    struct tenant_reg *r = reg_new(0, 8);
    for (pid_t pid = 1000; pid < 1100; pid++)
        proc_put(pid, 100 + (uint64_t)pid, "0::/slurm/job_42\n", NULL, 0);
    for (pid_t pid = 1000; pid < 1100; pid++)
        assert_string_equal(who(r, pid, 1, 1), "slurm-42");
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_entries, 8);
    assert_int_equal(st.cache_misses, 100);
    assert_int_equal(st.cache_evictions, 92);
    /* the 8 newest are cached, the oldest not */
    for (pid_t pid = 1092; pid < 1100; pid++)
        assert_string_equal(who(r, pid, 1, 1), "slurm-42");
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_hits, 8);
    assert_string_equal(who(r, 1000, 1, 1), "slurm-42");
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_hits, 8);
    assert_int_equal(st.cache_misses, 101);
    assert_int_equal(st.cache_entries, 8);
    tenant_reg_free(r);
}

/* The start-time parser against the kernel's own /proc/<pid>/stat: the second lookup of this
 * process hits the cache, which needs field 22 read alike twice. */
static void test_real_proc(void **state)
{
    (void)state;
    struct tenant_reg_config c = {0};
    struct tenant_reg *r = NULL;
    assert_int_equal(tenant_reg_new(&c, &r), 0);
    struct tier_ioctx a = tenant_resolve(r, getpid(), getuid(), getgid());
    struct tier_ioctx b = tenant_resolve(r, getpid(), getuid(), getgid());
    assert_int_equal(a.tenant, b.tenant);
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_misses, 1);
    assert_int_equal(st.cache_hits, 1);
    tenant_reg_free(r);
}

/* ---- the pidfd path, on real processes -------------------------------------------------- */

/* pidfds this process holds (their /proc/self/fd links read "anon_inode:[pidfd]"). */
static int pidfds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char p[300], link[256];
        snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
        ssize_t k = readlink(p, link, sizeof(link) - 1);
        if (k > 0) {
            link[k] = '\0';
            n += strstr(link, "[pidfd]") != NULL;
        }
    }
    closedir(d);
    return n;
}

/* A child that waits to be killed, and dies with this process should a test fail first. */
static pid_t child_start(void)
{
    pid_t parent = getpid();
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(1);
        for (;;)
            pause();
    }
    return c;
}

/* Kill the child and wait until it has exited (a zombie: not reaped). */
static void child_exit_unreaped(pid_t c)
{
    assert_int_equal(kill(c, SIGKILL), 0);
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    assert_int_equal(waitid(P_PID, (id_t)c, &si, WEXITED | WNOWAIT), 0);
    assert_int_equal(si.si_pid, c);
}

static struct tenant_reg *real_reg_new(unsigned pid_cache, unsigned pidfd_max, bool off)
{
    struct tenant_reg_config c = {
        .pid_cache_max = pid_cache, .pidfd_max = pidfd_max, .pidfd_off = off};
    struct tenant_reg *r = NULL;
    assert_int_equal(tenant_reg_new(&c, &r), 0);
    return r;
}

/* A cached child that exits is not answered from the cache, although its /proc/<pid>/stat
 * (a zombie's) still reads with the same start time: the registry without pidfds does answer
 * from it, which shows the check is the pidfd's. */
static void test_pidfd_exit(void **state)
{
    (void)state;
    int base = pidfds_open();
    pid_t c = child_start();
    struct tenant_reg *r = real_reg_new(0, 0, false);
    struct tenant_reg *old = real_reg_new(0, 0, true);
    struct tenant_stats st, so;
    for (int i = 0; i < 2; i++) {
        (void)tenant_resolve(r, c, 1000, 1000);
        (void)tenant_resolve(old, c, 1000, 1000);
    }
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_misses, 1);
    assert_int_equal(st.cache_hits, 1);
    assert_int_equal(st.cache_entries, 1);
    assert_int_equal(st.cache_pidfds, 1);
    assert_int_equal(pidfds_open(), base + 1);
    tenant_stats_get(old, &so);
    assert_int_equal(so.cache_hits, 1);
    assert_int_equal(so.cache_pidfds, 0);

    child_exit_unreaped(c);
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)c);
    assert_int_equal(access(p, R_OK), 0); /* the zombie's stat is still there */
    (void)tenant_resolve(r, c, 1000, 1000);
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_hits, 1); /* not a hit */
    assert_int_equal(st.cache_misses, 2);
    assert_int_equal(st.cache_entries, 0); /* the dead entry dropped, a zombie not cached */
    assert_int_equal(st.cache_pidfds, 0);
    assert_int_equal(pidfds_open(), base);
    (void)tenant_resolve(old, c, 1000, 1000);
    tenant_stats_get(old, &so);
    assert_int_equal(so.cache_hits, 2); /* same start time: the old check lets it through */

    assert_int_equal(waitpid(c, NULL, 0), c); /* reaped: the pid may now be reused */
    (void)tenant_resolve(r, c, 1000, 1000);
    (void)tenant_resolve(old, c, 1000, 1000);
    tenant_stats_get(r, &st);
    tenant_stats_get(old, &so);
    assert_int_equal(st.cache_hits, 1);
    assert_int_equal(st.cache_misses, 3);
    assert_int_equal(so.cache_hits, 2);
    assert_int_equal(so.cache_misses, 2);
    tenant_reg_free(old);
    tenant_reg_free(r);
    assert_int_equal(pidfds_open(), base);
}

struct thr {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pid_t tid;
    bool quit;
};

static void *thr_main(void *p)
{
    struct thr *t = p;
    pthread_mutex_lock(&t->mu);
    t->tid = gettid();
    pthread_cond_broadcast(&t->cv);
    while (!t->quit)
        pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* FUSE gives the calling thread's id: a thread that leads no group gets a thread pidfd where
 * the kernel has them (Linux 6.9), else its entry is checked by start time; either way a hit,
 * and once the thread exited its entry is gone. */
static void test_pidfd_thread(void **state)
{
    (void)state;
    int base = pidfds_open();
    struct thr t = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, thr_main, &t), 0);
    pthread_mutex_lock(&t.mu);
    while (t.tid == 0)
        pthread_cond_wait(&t.cv, &t.mu);
    pthread_mutex_unlock(&t.mu);
    assert_int_not_equal(t.tid, getpid());
    /* does this kernel give thread pidfds? (PIDFD_THREAD is O_EXCL) */
    int probe = pidfd_open(t.tid, O_EXCL);
    bool thread_pidfds = probe >= 0;
    if (probe >= 0)
        close(probe);

    struct tenant_reg *r = real_reg_new(0, 0, false);
    struct tier_ioctx a = tenant_resolve(r, t.tid, getuid(), getgid());
    struct tier_ioctx b = tenant_resolve(r, t.tid, getuid(), getgid());
    assert_int_equal(a.tenant, b.tenant);
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_hits, 1);
    assert_int_equal(st.cache_entries, 1);
    assert_int_equal(st.cache_pidfds, thread_pidfds ? 1 : 0);

    pthread_mutex_lock(&t.mu);
    t.quit = true;
    pthread_cond_broadcast(&t.cv);
    pthread_mutex_unlock(&t.mu);
    assert_int_equal(pthread_join(th, NULL), 0);
    /* pthread_join returns once the thread cleared its tid; the kernel may reap the task (and
     * signal its pidfd) a moment later: wait, with a deadline, until the thread is gone */
    for (int i = 0; i < 5000 && syscall(SYS_tgkill, getpid(), t.tid, 0) == 0; i++)
        usleep(1000);
    assert_int_equal(syscall(SYS_tgkill, getpid(), t.tid, 0), -1);
    (void)tenant_resolve(r, t.tid, getuid(), getgid());
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_hits, 1);
    assert_int_equal(st.cache_misses, 2);
    if (thread_pidfds)
        assert_int_equal(st.cache_entries, 0); /* its exit seen, the entry dropped */
    assert_int_equal(st.cache_pidfds, 0);
    tenant_reg_free(r);
    assert_int_equal(pidfds_open(), base);
}

/* pidfd_max bounds the fds: the entries filled last hold them, older ones are checked by
 * start time (still hits); an exit is seen on both kinds; nothing is left open at free. */
static void test_pidfd_window(void **state)
{
    (void)state;
    int base = pidfds_open();
    enum { N = 4 };
    pid_t c[N];
    for (int i = 0; i < N; i++)
        c[i] = child_start();
    struct tenant_reg *r = real_reg_new(8, 2, false);
    struct tenant_stats st;
    for (int i = 0; i < N; i++)
        (void)tenant_resolve(r, c[i], 1, 1);
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_entries, N);
    assert_int_equal(st.cache_pidfds, 2);
    assert_int_equal(pidfds_open(), base + 2);
    for (int i = 0; i < N; i++)
        (void)tenant_resolve(r, c[i], 1, 1);
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_hits, N);
    assert_int_equal(st.cache_misses, N);

    /* c[0] is checked by start time, c[3] by its pidfd: both exit and are reaped */
    int gone[2] = {0, N - 1};
    for (int k = 0; k < 2; k++) {
        child_exit_unreaped(c[gone[k]]);
        assert_int_equal(waitpid(c[gone[k]], NULL, 0), c[gone[k]]);
    }
    for (int i = 0; i < N; i++)
        (void)tenant_resolve(r, c[i], 1, 1);
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_hits, N + 2);
    assert_int_equal(st.cache_misses, N + 2);
    assert_int_equal(st.cache_pidfds, 1); /* c[2]'s; c[3]'s closed with its entry */
    assert_int_equal(st.cache_entries, N - 1);
    assert_int_equal(pidfds_open(), base + 1);
    tenant_reg_free(r);
    assert_int_equal(pidfds_open(), base);
    for (int i = 1; i < N - 1; i++) {
        assert_int_equal(kill(c[i], SIGKILL), 0);
        assert_int_equal(waitpid(c[i], NULL, 0), c[i]);
    }
}

/* ---- concurrency --------------------------------------------------------------------------- */

#define CONC_PIDS 64
#define CONC_ITERS 3000

struct conc_arg {
    struct tenant_reg *r;
    int seed;
    int wrong;
};

static void *conc_worker(void *p)
{
    struct conc_arg *a = p;
    for (int i = 0; i < CONC_ITERS; i++) {
        int k = (i * 7 + a->seed) % CONC_PIDS;
        struct tier_ioctx io = tenant_resolve(a->r, 2000 + k, 1, 1);
        char want[32];
        snprintf(want, sizeof(want), "slurm-%d", k % 10);
        if (strcmp(tenant_name(a->r, io.tenant), want) != 0)
            a->wrong++;
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    for (int k = 0; k < CONC_PIDS; k++) {
        char cg[64];
        snprintf(cg, sizeof(cg), "0::/slurm/job_%d/step_0\n", k % 10);
        proc_put(2000 + k, 77, cg, NULL, 0);
    }
    struct tenant_reg *r = reg_new(256, 16); /* a small cache: evictions under contention */
    pthread_t th[4];
    struct conc_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct conc_arg){.r = r, .seed = i * 13};
        assert_int_equal(pthread_create(&th[i], NULL, conc_worker, &args[i]), 0);
    }
    /* meanwhile: tenants and rules (for jobs no process is in) are added */
    for (int i = 0; i < 100; i++) {
        char name[32], job[32];
        snprintf(name, sizeof(name), "t%d", i);
        snprintf(job, sizeof(job), "%d", 1000 + i);
        struct tenant_rule ru = {.slurm_job = job};
        assert_int_equal(tenant_add(r, name, TIER_IO_TRAINING, i % 2 ? &ru : NULL, NULL), 0);
        (void)tenant_name(r, (uint32_t)i);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(args[i].wrong, 0);
    }
    assert_int_equal(tenant_count(r), 2 + 10 + 100);
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    assert_int_equal(st.cache_hits + st.cache_misses, 4 * CONC_ITERS);
    assert_true(st.cache_entries <= 16);
    tenant_reg_free(r);
}

#define PCONC_KIDS 6
#define PCONC_ITERS 2000

struct pconc {
    struct tenant_reg *r;
    _Atomic pid_t kids[PCONC_KIDS];
};

static void *pconc_worker(void *p)
{
    struct pconc *a = p;
    pid_t self = gettid();
    for (int i = 0; i < PCONC_ITERS; i++) { /* 3 calls each */
        (void)tenant_resolve(a->r, getpid(), 1, 1);
        (void)tenant_resolve(a->r, self, 1, 1);
        (void)tenant_resolve(a->r, atomic_load(&a->kids[i % PCONC_KIDS]), 1, 1);
    }
    return NULL;
}

/* The pidfd path under contention: threads resolve this process, themselves and children
 * that exit and are replaced meanwhile, through a cache small enough that the pidfd window
 * moves and entries are evicted and dropped all the time (labelled tsan). */
static void test_pidfd_concurrent(void **state)
{
    (void)state;
    int base = pidfds_open();
    static struct pconc a;
    memset(&a, 0, sizeof(a));
    a.r = real_reg_new(8, 3, false);
    for (int k = 0; k < PCONC_KIDS; k++)
        atomic_store(&a.kids[k], child_start());
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, pconc_worker, &a), 0);
    /* replace children while the workers run */
    for (int round = 0; round < 40; round++) {
        int k = round % PCONC_KIDS;
        pid_t old = atomic_load(&a.kids[k]);
        atomic_store(&a.kids[k], child_start());
        assert_int_equal(kill(old, SIGKILL), 0);
        assert_int_equal(waitpid(old, NULL, 0), old);
        struct tenant_stats st;
        tenant_stats_get(a.r, &st);
        assert_true(st.cache_pidfds <= 3);
        assert_true(st.cache_entries <= 8);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    struct tenant_stats st;
    tenant_stats_get(a.r, &st);
    assert_int_equal(st.cache_hits + st.cache_misses, 3 * 3 * PCONC_ITERS);
    assert_true(st.cache_hits > 0);
    assert_true(st.cache_pidfds <= 3);
    assert_true(pidfds_open() <= base + 3);
    tenant_reg_free(a.r);
    assert_int_equal(pidfds_open(), base);
    for (int k = 0; k < PCONC_KIDS; k++) {
        pid_t c = atomic_load(&a.kids[k]);
        assert_int_equal(kill(c, SIGKILL), 0);
        assert_int_equal(waitpid(c, NULL, 0), c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cgroup_slurm),
        cmocka_unit_test(test_cgroup_user_slice),
        cmocka_unit_test(test_cgroup_k8s),
        cmocka_unit_test(test_cgroup_systemd),
        cmocka_unit_test(test_cgroup_empty_garbage_long),
        cmocka_unit_test(test_environ),
        cmocka_unit_test(test_registry_basics),
        cmocka_unit_test(test_resolve_sources),
        cmocka_unit_test(test_env_forged),
        cmocka_unit_test(test_cgroup_uid),
        cmocka_unit_test(test_reserve_rate),
        cmocka_unit_test(test_uid_budget),
        cmocka_unit_test(test_owner_table),
        cmocka_unit_test(test_cgroup_namespace),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_pid_reuse),
        cmocka_unit_test(test_pid_cache_bound),
        cmocka_unit_test(test_real_proc),
        cmocka_unit_test(test_pidfd_exit),
        cmocka_unit_test(test_pidfd_thread),
        cmocka_unit_test(test_pidfd_window),
        cmocka_unit_test(test_reclaim),
        cmocka_unit_test(test_reclaim_registered_meanwhile),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_parse_status),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_pidfd_concurrent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
