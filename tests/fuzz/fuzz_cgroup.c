/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_cgroup.c - libFuzzer target for the parsers of untrusted /proc text in src/tenant/: an
 * input is given whole to tenant_parse_cgroup() (the text of /proc/<pid>/cgroup, which the
 * process's owner shapes by naming its cgroups), once without and once with a configured Slurm
 * cgroup root, and to tenant_parse_environ() (the text of
 * /proc/<pid>/environ, which the process sets at will) and to tenant_parse_status() (the text of
 * /proc/<pid>/status, whose Name: line the process sets). Checks: the only results are 0 and
 * -EINVAL (cgroup, status) / 0, -ENOENT, -EINVAL (environ); a status uid or gid is never
 * (uid_t)-1; on 0 every output is NUL-terminated within
 * its buffer, an origin is one of the enum, a Slurm id is digits, a pod id fits a tenant name
 * after "k8s-", the kept path starts with '/' (or is empty) and is cut only when flagged; a
 * Slurm job is only named by a path anchored at one of the Slurm roots (never under
 * /user.slice), a pod only under /kubepods, and a uid_<u> only with a Slurm job.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenant/tenant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_cgroup: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so reading past size is an ASan error */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    if (size)
        memcpy(text, data, size);

    static const char *const roots[] = {NULL, "/slurm_node1"};
    for (size_t ri = 0; ri < sizeof(roots) / sizeof(roots[0]); ri++) {
        struct tenant_origin_id o;
        memset(&o, 0xAA, sizeof(o));
        int rc = tenant_parse_cgroup(text, size, roots[ri], &o);
        check(rc == 0 || rc == -EINVAL, "tenant_parse_cgroup: unexpected return");
        if (rc != 0)
            continue;
        size_t il = strnlen(o.id, sizeof(o.id));
        size_t cl = strnlen(o.cgroup, sizeof(o.cgroup));
        check(il < sizeof(o.id) && cl < sizeof(o.cgroup), "output not NUL-terminated");
        check(cl == 0 || o.cgroup[0] == '/', "kept path does not start with '/'");
        check(!o.cgroup_truncated || cl == sizeof(o.cgroup) - 1, "truncated flag without a cut");
        check(!o.has_job_uid || o.origin == TENANT_ORIGIN_SLURM, "a job uid without a job");
        switch (o.origin) {
        case TENANT_ORIGIN_NONE:
            check(il == 0, "an id without an origin");
            break;
        case TENANT_ORIGIN_SLURM:
            check(tenant_job_valid(o.id), "a Slurm id that is not a job id");
            /* the naming path is kept (cut only past 511 bytes, beyond every root) */
            check(strncmp(o.cgroup, "/system.slice/slurmstepd.scope/job_", 35) == 0 ||
                      strncmp(o.cgroup, "/slurm/uid_", 11) == 0 ||
                      (roots[ri] && strncmp(o.cgroup, roots[ri], strlen(roots[ri])) == 0),
                  "a Slurm job outside the Slurm roots");
            break;
        case TENANT_ORIGIN_K8S: {
            char name[TENANT_NAME_MAX + 8];
            snprintf(name, sizeof(name), "k8s-%s", o.id);
            check(il > 0 && tenant_name_valid(name), "a pod id that makes no tenant name");
            check(strncmp(o.cgroup, "/kubepods", 9) == 0, "a pod outside /kubepods");
            break;
        }
        case TENANT_ORIGIN_SYSTEMD:
            check(il > 0, "an empty unit name");
            break;
        default:
            check(false, "origin out of range");
        }
    }

    char job[TENANT_NAME_MAX];
    memset(job, 0xAA, sizeof(job));
    int rc = tenant_parse_environ(text, size, job);
    check(rc == 0 || rc == -ENOENT || rc == -EINVAL, "tenant_parse_environ: unexpected return");
    if (rc == 0)
        check(strnlen(job, sizeof(job)) < sizeof(job) && tenant_job_valid(job),
              "environ: not a job id");
    uid_t u = 0;
    gid_t g = 0;
    rc = tenant_parse_status(text, size, &u, &g);
    check(rc == 0 || rc == -EINVAL, "tenant_parse_status: unexpected return");
    check(rc != 0 || (u != (uid_t)-1 && g != (gid_t)-1), "status: (uid_t)-1 accepted");
    free(text);
    return 0;
}
