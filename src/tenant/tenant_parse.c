/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant_parse.c - the parsers of the texts a process's owner shapes: /proc/<pid>/cgroup
 * (tenant_parse_cgroup: a Slurm job, a pod, the kept cgroup path) and /proc/<pid>/environ
 * (tenant_parse_environ, and the incremental scan tenant_resolve.c feeds: SLURM_JOB_ID). No
 * state and no lock; the fuzz target fuzz_cgroup covers this file.
 */
#include "tenant/tenant.h"

#include <errno.h>
#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include "common/log.h"
#include "common/strutil.h"
#include "tenant/tenant_int.h"

#define POD_ID_MAX (TENANT_NAME_MAX - 1 - 4) /* "k8s-" + uid fits a tenant name */

/* ---- parsing: /proc/<pid>/cgroup -------------------------------------------------------- */

static bool is_pod_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-' ||
           c == '_';
}

/* A pod uid in one segment: "pod<uid>" at its start or after '-', the uid running to the end
 * of the segment or to a '.' (".slice"); '_' (systemd's escape) back to '-'. */
static bool seg_pod(const char *seg, size_t n, char *id)
{
    for (size_t i = 0; i + 3 < n; i++) {
        if (memcmp(seg + i, "pod", 3) != 0 || (i > 0 && seg[i - 1] != '-'))
            continue;
        size_t b = i + 3, e = b;
        while (e < n && is_pod_char(seg[e]))
            e++;
        if (e == b || e - b > POD_ID_MAX || (e < n && seg[e] != '.'))
            continue;
        for (size_t k = b; k < e; k++)
            id[k - b] = seg[k] == '_' ? '-' : seg[k];
        id[e - b] = '\0';
        return true;
    }
    return false;
}

/* Does p (len bytes) start with the path prefix pre (plen bytes), whole segments? */
static bool path_under(const char *p, size_t len, const char *pre, size_t plen)
{
    return len >= plen && memcmp(p, pre, plen) == 0 && (len == plen || p[plen] == '/');
}

/* The segment "<word><digits>" at p + *off (which is at a '/'), the digits at most maxd: their
 * start and count, *off moved past it. */
static bool seg_number(const char *p, size_t len, size_t *off, const char *word, size_t maxd,
                       const char **digits, size_t *nd)
{
    size_t wl = strlen(word), i = *off;
    if (i >= len || p[i] != '/' || len - i - 1 < wl || memcmp(p + i + 1, word, wl) != 0)
        return false;
    size_t b = i + 1 + wl, e = b;
    while (e < len && p[e] != '/')
        e++;
    if (e == b || e - b > maxd || !tier_all_digits(p + b, e - b))
        return false;
    *digits = p + b;
    *nd = e - b;
    *off = e;
    return true;
}

/* After a Slurm root (p + off at its end): "/job_N" (no_uid allowed) or "/uid_U/job_N" (U the
 * owner's uid, up to 4294967294), followed by the end or '/'. */
static bool slurm_job_at(const char *p, size_t len, size_t off, bool no_uid, char *id,
                         bool *has_uid, uid_t *uid)
{
    const char *d = NULL;
    size_t nd = 0;
    bool with_uid = false;
    uint64_t u = 0;
    if (seg_number(p, len, &off, "uid_", 10, &d, &nd)) {
        for (size_t k = 0; k < nd; k++)
            u = u * 10 + (uint64_t)(d[k] - '0');
        if (u > 4294967294ULL)
            return false;
        with_uid = true;
    } else if (!no_uid) {
        return false;
    }
    if (!seg_number(p, len, &off, "job_", JOB_ID_MAX, &d, &nd))
        return false;
    memcpy(id, d, nd);
    id[nd] = '\0';
    *has_uid = with_uid;
    *uid = (uid_t)u;
    return true;
}

#define STEPD_ROOT "/system.slice/slurmstepd.scope"
#define SLURM_V1_ROOT "/slurm"

/* Is p a Slurm job's cgroup, where slurmd (root) puts jobs and no user can create one? */
static bool slurm_path(const char *p, size_t len, const char *root, char *id, bool *has_uid,
                       uid_t *uid)
{
    size_t off = sizeof(STEPD_ROOT) - 1, vl = sizeof(SLURM_V1_ROOT) - 1;
    const char *d = NULL;
    size_t nd = 0;
    *has_uid = false;
    if (path_under(p, len, STEPD_ROOT, off) &&
        seg_number(p, len, &off, "job_", JOB_ID_MAX, &d, &nd)) {
        memcpy(id, d, nd);
        id[nd] = '\0';
        return true;
    }
    if (path_under(p, len, SLURM_V1_ROOT, vl) && slurm_job_at(p, len, vl, false, id, has_uid, uid))
        return true;
    if (root) {
        size_t rl = strlen(root);
        while (rl > 0 && root[rl - 1] == '/')
            rl--; /* "/" becomes "": every path is under it */
        if (path_under(p, len, root, rl) && slurm_job_at(p, len, rl, true, id, has_uid, uid))
            return true;
    }
    return false;
}

/* Is p a Kubernetes pod's cgroup: under /kubepods (cgroupfs driver) or /kubepods.slice
 * (systemd driver) at the top, where only the kubelet creates cgroups? The first pod segment
 * below names it (a container may create cgroups inside its own pod, never above it). */
static bool pod_path(const char *p, size_t len, char *id)
{
    if (!path_under(p, len, "/kubepods", 9) && !path_under(p, len, "/kubepods.slice", 15))
        return false;
    for (size_t i = 1; i < len;) {
        while (i < len && p[i] == '/')
            i++;
        size_t b = i;
        while (i < len && p[i] != '/')
            i++;
        if (i > b && seg_pod(p + b, i - b, id))
            return true;
    }
    return false;
}

/* What one cgroup path names: 2 for a Slurm job or pod, 1 for a systemd unit, 0 for nothing. */
static int classify_path(const char *p, size_t len, const char *root, enum tenant_origin *origin,
                         char *id, bool *has_uid, uid_t *uid)
{
    *has_uid = false;
    if (slurm_path(p, len, root, id, has_uid, uid)) {
        *origin = TENANT_ORIGIN_SLURM;
        return 2;
    }
    if (pod_path(p, len, id)) {
        *origin = TENANT_ORIGIN_K8S;
        return 2;
    }
    const char *unit = NULL;
    size_t unit_len = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && p[i] == '/')
            i++;
        size_t b = i;
        while (i < len && p[i] != '/')
            i++;
        const char *seg = p + b;
        size_t n = i - b;
        bool service = n > 8 && memcmp(seg + n - 8, ".service", 8) == 0;
        bool scope = n > 6 && memcmp(seg + n - 6, ".scope", 6) == 0;
        if (service || scope) {
            unit = seg;
            unit_len = n;
        }
    }
    if (!unit || unit_len >= TENANT_NAME_MAX)
        return 0;
    /* a login session is a user, not a workload: the uid rules decide */
    if (unit_len > 8 + 6 && memcmp(unit, "session-", 8) == 0 &&
        memcmp(unit + unit_len - 6, ".scope", 6) == 0)
        return 0;
    for (size_t k = 0; k < unit_len; k++)
        if ((unsigned char)unit[k] <= ' ' || (unsigned char)unit[k] >= 0x7f)
            return 0;
    memcpy(id, unit, unit_len);
    id[unit_len] = '\0';
    *origin = TENANT_ORIGIN_SYSTEMD;
    return 1;
}

static void keep_path(struct tenant_origin_id *out, const char *p, size_t n)
{
    out->cgroup_truncated = n >= sizeof(out->cgroup);
    if (out->cgroup_truncated)
        n = sizeof(out->cgroup) - 1;
    memcpy(out->cgroup, p, n);
    out->cgroup[n] = '\0';
}

int tenant_parse_cgroup(const char *text, size_t len, const char *slurm_root,
                        struct tenant_origin_id *out)
{
    if (!out || (!text && len))
        return -EINVAL;
    if (len && memchr(text, '\0', len))
        return -EINVAL;
    struct {
        const char *p;
        size_t n;
    } v2 = {0}, sysd = {0}, first = {0}, named = {0};
    int best = 0;
    enum tenant_origin origin = TENANT_ORIGIN_NONE;
    char id[TENANT_NAME_MAX] = "";
    bool has_uid = false;
    uid_t job_uid = 0;
    for (size_t pos = 0; pos < len;) {
        const char *line = text + pos;
        const char *eol = memchr(line, '\n', len - pos);
        size_t ll = eol ? (size_t)(eol - line) : len - pos;
        pos += ll + (eol ? 1 : 0);
        if (ll == 0)
            continue;
        /* ID:CONTROLLERS:/PATH */
        size_t i = 0;
        while (i < ll && line[i] >= '0' && line[i] <= '9')
            i++;
        if (i == 0 || i > 10 || i == ll || line[i] != ':')
            return -EINVAL;
        bool id_zero = i == 1 && line[0] == '0';
        size_t cb = ++i;
        while (i < ll && line[i] != ':') {
            char c = line[i];
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == ',' || c == '=' || c == '.' || c == '-';
            if (!ok)
                return -EINVAL;
            i++;
        }
        if (i == ll)
            return -EINVAL;
        size_t cl = i - cb;
        const char *path = line + i + 1;
        size_t pl = ll - i - 1;
        if (pl == 0 || path[0] != '/' || pl >= TENANT_CGROUP_PATH_MAX)
            return -EINVAL;
        if (id_zero && cl == 0 && !v2.p) {
            v2.p = path;
            v2.n = pl;
        }
        if (cl == 12 && memcmp(line + cb, "name=systemd", 12) == 0 && !sysd.p) {
            sysd.p = path;
            sysd.n = pl;
        }
        if (!first.p) {
            first.p = path;
            first.n = pl;
        }
        enum tenant_origin o = TENANT_ORIGIN_NONE;
        char lid[TENANT_NAME_MAX];
        bool lhas = false;
        uid_t luid = 0;
        int rank = classify_path(path, pl, slurm_root, &o, lid, &lhas, &luid);
        if (rank > best) {
            best = rank;
            origin = o;
            has_uid = lhas;
            job_uid = luid;
            memcpy(id, lid, sizeof(id));
            named.p = path;
            named.n = pl;
        }
    }
    memset(out, 0, sizeof(*out));
    out->origin = origin;
    memcpy(out->id, id, sizeof(out->id));
    out->has_job_uid = has_uid;
    out->job_uid = job_uid;
    if (named.p)
        keep_path(out, named.p, named.n);
    else if (v2.p)
        keep_path(out, v2.p, v2.n);
    else if (sysd.p)
        keep_path(out, sysd.p, sysd.n);
    else if (first.p)
        keep_path(out, first.p, first.n);
    return 0;
}

/* ---- parsing: /proc/<pid>/environ -------------------------------------------------------- */

static const char ENV_KEY[] = "SLURM_JOB_ID=";
#define ENV_KEY_LEN (sizeof(ENV_KEY) - 1)

static void env_entry_end(struct env_scan *s)
{
    if (s->elen >= ENV_KEY_LEN && memcmp(s->head, ENV_KEY, ENV_KEY_LEN) == 0) {
        size_t vl = s->elen - ENV_KEY_LEN;
        s->done = true;
        /* 13 + 20 bytes fit the head: a value of up to JOB_ID_MAX digits is all there */
        if (vl <= JOB_ID_MAX && tier_all_digits(s->head + ENV_KEY_LEN, vl)) {
            memcpy(s->job, s->head + ENV_KEY_LEN, vl);
            s->job[vl] = '\0';
            s->rc = 0;
        } else {
            s->rc = -EINVAL;
        }
    }
    s->hlen = s->elen = 0;
}

void env_feed(struct env_scan *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n && !s->done; i++) {
        if (p[i] == '\0') {
            env_entry_end(s);
            continue;
        }
        if (s->hlen < sizeof(s->head))
            s->head[s->hlen++] = p[i];
        s->elen++;
    }
}

void env_finish(struct env_scan *s)
{
    if (!s->done && s->elen > 0)
        env_entry_end(s);
}

int tenant_parse_environ(const char *text, size_t len, char *job)
{
    if (!job || (!text && len))
        return -EINVAL;
    struct env_scan s = {.rc = -ENOENT};
    env_feed(&s, text, len);
    env_finish(&s);
    if (s.rc == 0)
        memcpy(job, s.job, strlen(s.job) + 1);
    return s.rc;
}

/* The fourth decimal field of the line of text[0..len) that starts with key: 0 and *v, or
 * -EINVAL. Fields are separated by tabs or spaces; the line ends at '\n' or len. */
static int status_field4(const char *text, size_t len, const char *key, uint32_t *v)
{
    size_t kl = strlen(key), i = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && text[end] != '\n')
            end++;
        if (end - i >= kl && memcmp(text + i, key, kl) == 0) {
            size_t p = i + kl;
            uint64_t val = 0;
            for (int field = 0; field < 4; field++) {
                while (p < end && (text[p] == '\t' || text[p] == ' '))
                    p++;
                if (p == end || text[p] < '0' || text[p] > '9')
                    return -EINVAL;
                val = 0;
                while (p < end && text[p] >= '0' && text[p] <= '9') {
                    val = val * 10 + (uint64_t)(text[p] - '0');
                    if (val >= UINT32_MAX)
                        return -EINVAL;
                    p++;
                }
                if (p < end && text[p] != '\t' && text[p] != ' ')
                    return -EINVAL;
            }
            *v = (uint32_t)val;
            return 0;
        }
        i = end + 1;
    }
    return -EINVAL;
}

int tenant_parse_status(const char *text, size_t len, uid_t *fsuid, gid_t *fsgid)
{
    uint32_t u = 0, g = 0;
    if (status_field4(text, len, "Uid:", &u) != 0 || status_field4(text, len, "Gid:", &g) != 0)
        return -EINVAL;
    *fsuid = (uid_t)u;
    *fsgid = (gid_t)g;
    return 0;
}
