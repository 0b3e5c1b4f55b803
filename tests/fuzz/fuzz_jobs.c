/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_jobs.c - libFuzzer target for job admission (src/jobs/jobs.c) without a daemon: the
 * registry over fake ops (the hot tier's space, backend links, pin rules and stagings are numbers
 * the input sets; tests/lib/fakejobs.h, shared with tests/unit/test_jobs.c). An input is lines,
 * run in order on a fresh registry (a prefix "hand/" is a rule pinned by hand):
 *
 *   {JSON}                a POST /v1/jobs body: job, tenant, cache_bytes, bandwidth (bytes or a
 *                         size: tier_parse_size), class, stage (mount paths "/BACKEND/KEY...": the
 *                         backend is the first component, the rule the rest, "" for "/BACKEND",
 *                         "KEY/" for a path ending in '/'), stage_out, dry_run; checked as the
 *                         API checks it, then jobs_precheck and (no dry run) jobs_submit
 *   release ID | get ID   jobs_release, jobs_get
 *   space L P D           the level, the pin budget and the pinned bytes, in KiB
 *   link N                backend warm's link_capacity in KiB/s (0: none; cold has none)
 *   pinfail | busy N      the next pin fails (-ENOSPC); the next N stagings answer -EBUSY
 *   prog S DONE TOTAL ST  staging S's progress (bytes in KiB; ST 0 running, 1 done, 2 failed,
 *                         3 gone: pruned by the stager)
 *
 * After every line the registry must hold what docs/API.md ("Jobs") says: jobs_list gives the
 * admitted jobs, then the queue with positions 1, 2, ... in submission order, and no admitted job
 * entered after a queued one (first come, first admitted: nothing overtakes the queue's head);
 * reserved_bytes is the admitted jobs' cache_bytes and reservable = capacity - reserved; a new
 * admission fits the capacity and warm's link; jobs_get agrees with the list; jobs_precheck's
 * REJECT and CONFLICT are jobs_submit's; a REJECT or CONFLICT records nothing; a retry of the
 * same request answers the job as it stands. The fake ops check that a rule is never pinned
 * twice by jobs nor unpinned when not pinned, a rule pinned by hand is never unpinned, and after
 * jobs_free every rule a job pinned is unpinned.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/ioctx.h"
#include "common/strutil.h"
#include "fakejobs.h"
#include "jobs/jobs.h"
#include "tenant/tenant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KIB 1024ull
#define NIDS 128

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_jobs: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

/* The input's own record of each job id: its submission order (the queue's order). */
struct seen {
    char id[JOBS_ID_MAX];
    uint64_t seq;
    bool admitted, was_admitted; /* now, and at the last check */
};

struct run {
    struct fakejobs f;
    struct jobs *j;
    char *tenants[NIDS]; /* the registry: a tenant's id is its index + 1 */
    size_t ntenants;
    struct seen ids[NIDS];
    size_t nids;
    uint64_t seq;
};

static struct seen *seen_of(struct run *r, const char *id, bool add)
{
    for (size_t i = 0; i < r->nids; i++)
        if (strcmp(r->ids[i].id, id) == 0)
            return &r->ids[i];
    if (!add || r->nids == NIDS)
        return NULL;
    snprintf(r->ids[r->nids].id, JOBS_ID_MAX, "%s", id);
    return &r->ids[r->nids++];
}

/* The tenant id of name, registered if new (as the API registers a job's tenant: one id per
 * name); 0 when the input has named too many. */
static uint32_t tenant_of(struct run *r, const char *name)
{
    for (size_t i = 0; i < r->ntenants; i++)
        if (strcmp(r->tenants[i], name) == 0)
            return (uint32_t)i + 1;
    if (r->ntenants == NIDS || !(r->tenants[r->ntenants] = strdup(name)))
        return 0;
    return (uint32_t)++r->ntenants;
}

static bool stages_warm(const struct jobs_info *ji)
{
    for (size_t k = 0; k < ji->nstage; k++)
        if (strncmp(ji->stage[k], "/warm", 5) == 0 &&
            (ji->stage[k][5] == '/' || ji->stage[k][5] == '\0'))
            return true;
    return false;
}

/* The registry's invariants (the header comment), after any call. */
static void check(struct run *r)
{
    struct jobs_info *v = NULL;
    size_t n = 0;
    struct jobs_capacity c;
    if (jobs_list(r->j, &v, &n, &c) != 0)
        fail("jobs_list failed", NULL);
    uint64_t reserved = 0, max_admitted_seq = 0, min_queued_seq = UINT64_MAX, last_seq = 0;
    uint64_t new_bytes = 0, new_warm_bw = 0, warm_bw = 0;
    const char *new_id = NULL;
    size_t admitted = 0, queued = 0;
    for (size_t i = 0; i < r->nids; i++)
        r->ids[i].admitted = false;
    for (size_t i = 0; i < n; i++) {
        struct seen *s = seen_of(r, v[i].id, false);
        if (!s)
            fail("a job the input never submitted", v[i].id);
        if (v[i].state == JOBS_ADMITTED) {
            if (queued)
                fail("an admitted job listed after a queued one", v[i].id);
            admitted++;
            reserved += v[i].cache_bytes;
            if (v[i].position != 0 || v[i].admitted_ns == 0)
                fail("an admitted job with a position or no admission time", v[i].id);
            if (s->seq > max_admitted_seq)
                max_admitted_seq = s->seq;
            if (stages_warm(&v[i]))
                warm_bw += v[i].bandwidth_bps;
            if (!s->was_admitted) { /* admitted since the last check */
                new_id = v[i].id;
                new_bytes += v[i].cache_bytes;
                new_warm_bw += stages_warm(&v[i]) ? v[i].bandwidth_bps : 0;
            }
            s->admitted = true;
        } else {
            queued++;
            if (v[i].position != queued)
                fail("queue positions are not 1, 2, ...", v[i].id);
            if (queued > 1 && s->seq <= last_seq)
                fail("the queue is not in submission order", v[i].id);
            last_seq = s->seq;
            min_queued_seq = s->seq < min_queued_seq ? s->seq : min_queued_seq;
            if (v[i].staging != JOBS_STAGING_PENDING || !v[i].reason[0] || v[i].admitted_ns)
                fail("a queued job staging, admitted once, or without a reason", v[i].id);
        }
        struct jobs_info g;
        if (jobs_get(r->j, v[i].id, &g) != 0)
            fail("jobs_get does not find a listed job", v[i].id);
        if (g.state != v[i].state || g.position != v[i].position ||
            g.cache_bytes != v[i].cache_bytes)
            fail("jobs_get and jobs_list disagree", v[i].id);
        jobs_info_fini(&g);
    }
    for (size_t i = 0; i < r->nids; i++)
        r->ids[i].was_admitted = r->ids[i].admitted;
    if (queued && max_admitted_seq > min_queued_seq)
        fail("a job was admitted ahead of one queued before it", NULL);
    if (c.admitted != admitted || c.queued != queued || c.reserved_bytes != reserved)
        fail("the capacity figures do not count the listed jobs", NULL);
    if (c.reservable_bytes != (c.capacity_bytes > reserved ? c.capacity_bytes - reserved : 0))
        fail("reservable_bytes is not capacity_bytes - reserved_bytes", NULL);
    /* what was admitted just now fits (what was admitted before may not, after "space") */
    if (new_bytes && reserved > c.capacity_bytes)
        fail("a job was admitted beyond the capacity", new_id);
    if (new_warm_bw && r->f.link_warm && warm_bw > r->f.link_warm)
        fail("a job was admitted beyond warm's link_capacity", new_id);
    jobs_list_free(v, n);
}

/* A size field as the API takes it: a non-negative integer or a size string. */
static int amount(json_t *v, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    const char *s = json_string_value(v);
    return s && tier_parse_size(s, out) == 0 && *out <= (uint64_t)INT64_MAX ? 0 : -EINVAL;
}

/* One POST /v1/jobs body. Requests the API would answer 400 stop at its checks. */
static void post(struct run *r, const char *text, size_t len)
{
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    struct jobs_path stage[JOBS_PATHS_MAX];
    const char *stage_out[JOBS_PATHS_MAX];
    char *be[JOBS_PATHS_MAX], idbuf[32];
    size_t nstage = 0, nout = 0;
    if (!json_is_object(j))
        goto out;
    json_t *idj = json_object_get(j, "job");
    const char *id = json_string_value(idj);
    if (json_is_integer(idj) && json_integer_value(idj) >= 0) {
        snprintf(idbuf, sizeof(idbuf), "%lld", (long long)json_integer_value(idj));
        id = idbuf;
    }
    const char *tname = json_string_value(json_object_get(j, "tenant"));
    uint64_t cache_bytes = 0, bw = 0;
    json_t *bwj = json_object_get(j, "bandwidth"), *cj = json_object_get(j, "class");
    json_t *sj = json_object_get(j, "stage"), *oj = json_object_get(j, "stage_out");
    enum tier_io_class cls = TIER_IO_TRAINING;
    if (!id || !jobs_id_valid(id) || !tname || !tenant_name_valid(tname) ||
        amount(json_object_get(j, "cache_bytes"), &cache_bytes) != 0 ||
        (bwj && amount(bwj, &bw) != 0) ||
        (cj && tier_io_class_parse(json_string_value(cj) ? json_string_value(cj) : "", &cls)) ||
        (sj && (!json_is_array(sj) || json_array_size(sj) > JOBS_PATHS_MAX)) ||
        (oj && (!json_is_array(oj) || json_array_size(oj) > JOBS_PATHS_MAX)))
        goto out;
    for (size_t i = 0; sj && i < json_array_size(sj); i++) {
        const char *p = json_string_value(json_array_get(sj, i));
        if (!p || p[0] != '/' || strlen(p) > 1024)
            goto out;
        /* "/BACKEND/REST": the rule is REST ("" for the backend's root) */
        const char *slash = strchr(p + 1, '/');
        size_t bl = slash ? (size_t)(slash - p - 1) : strlen(p + 1);
        if (bl == 0)
            goto out;
        be[nstage] = strndup(p + 1, bl);
        if (!be[nstage])
            goto out;
        stage[nstage] =
            (struct jobs_path){.path = p, .backend = be[nstage], .prefix = slash ? slash + 1 : ""};
        nstage++;
    }
    for (size_t i = 0; oj && i < json_array_size(oj); i++) {
        stage_out[i] = json_string_value(json_array_get(oj, i));
        if (!stage_out[i] || stage_out[i][0] != '/')
            goto out;
        nout++;
    }
    if (nstage && cache_bytes == 0)
        goto out;
    for (size_t i = 0; i < nstage; i++) /* the same rule twice: the API's 400 */
        for (size_t k = 0; k < i; k++)
            if (strcmp(stage[i].backend, stage[k].backend) == 0 &&
                strcmp(stage[i].prefix, stage[k].prefix) == 0)
                goto out;
    uint32_t tenant = tenant_of(r, tname);
    if (!tenant)
        goto out;
    struct jobs_request rq = {.id = id,
                              .tenant = tenant,
                              .tenant_name = tname,
                              .cls = cls,
                              .cache_bytes = cache_bytes,
                              .bandwidth_bps = bw,
                              .stage = stage,
                              .nstage = nstage,
                              .stage_out = stage_out,
                              .nstage_out = nout};
    struct jobs_info before;
    bool existed = jobs_get(r->j, id, &before) == 0;
    char why[256];
    enum jobs_verdict pre = jobs_precheck(r->j, &rq, why, sizeof(why));
    if (pre != JOBS_ADMIT && pre != JOBS_REJECT && pre != JOBS_CONFLICT)
        fail("jobs_precheck answered a verdict it never gives", NULL);
    if (pre != JOBS_ADMIT && !why[0])
        fail("jobs_precheck refused without a reason", id);
    if (json_is_true(json_object_get(j, "dry_run")) || r->nids == NIDS) {
        if (existed)
            jobs_info_fini(&before);
        goto out; /* a dry run answers pre; nothing changes */
    }
    struct seen *s = seen_of(r, id, true);
    enum jobs_verdict v = JOBS_REJECT;
    struct jobs_info ji;
    int rc = jobs_submit(r->j, &rq, &v, &ji);
    if (rc == -ENOSPC || rc == -ENOMEM) { /* JOBS_MAX jobs (not reached here) */
        if (existed)
            jobs_info_fini(&before);
        goto out;
    }
    if (rc != 0)
        fail("jobs_submit failed on a request the API takes", id);
    if ((pre == JOBS_REJECT) != (v == JOBS_REJECT) ||
        (pre == JOBS_CONFLICT) != (v == JOBS_CONFLICT))
        fail("jobs_precheck and jobs_submit disagree", id);
    if (v == JOBS_CONFLICT && !existed)
        fail("a conflict with a job that does not exist", id);
    if (existed && v != JOBS_CONFLICT && v != JOBS_REJECT &&
        (before.cache_bytes != ji.cache_bytes || (v == JOBS_ADMIT) != (ji.state == JOBS_ADMITTED)))
        fail("a retry did not answer the job as it stands", id);
    if ((v == JOBS_ADMIT || v == JOBS_QUEUE) &&
        (strcmp(ji.id, id) != 0 || (v == JOBS_ADMIT) != (ji.state == JOBS_ADMITTED)))
        fail("the answered job is not the verdict's", id);
    if (!existed && (v == JOBS_ADMIT || v == JOBS_QUEUE))
        s->seq = ++r->seq;
    if (!existed && (v == JOBS_REJECT || v == JOBS_CONFLICT)) {
        struct jobs_info g;
        if (jobs_get(r->j, id, &g) == 0)
            fail("a refused request was recorded", id);
    }
    jobs_info_fini(&ji);
    if (existed)
        jobs_info_fini(&before);
    check(r);
out:
    for (size_t i = 0; i < nstage; i++)
        free(be[i]);
    json_decref(j);
}

/* One command line (the header comment); NUL-terminated. */
static void command(struct run *r, const char *line)
{
    char word[16], arg[80];
    unsigned long long a = 0, b = 0, c = 0, d = 0;
    if (sscanf(line, "release %79s", arg) == 1) {
        struct jobs_info ji;
        bool existed = jobs_get(r->j, arg, &ji) == 0;
        if (existed)
            jobs_info_fini(&ji);
        int rc = jobs_release(r->j, arg, &ji);
        if ((rc == 0) != existed || (rc != 0 && rc != -ENOENT))
            fail("jobs_release of a job that is (not) there", arg);
        if (rc == 0)
            jobs_info_fini(&ji);
        check(r); /* the queue's head may be admitted now: it must fit */
    } else if (sscanf(line, "get %79s", arg) == 1) {
        struct jobs_info ji;
        if (jobs_get(r->j, arg, &ji) == 0)
            jobs_info_fini(&ji);
        check(r);
    } else if (sscanf(line, "space %llu %llu %llu", &a, &b, &c) == 3) {
        r->f.level = (a & 0xffffffffu) * KIB;
        r->f.pin_budget = (b & 0xffffffffu) * KIB;
        r->f.pinned = (c & 0xffffffffu) * KIB;
        check(r);
    } else if (sscanf(line, "link %llu", &a) == 1) {
        r->f.link_warm = (a & 0xffffffffu) * KIB;
    } else if (strcmp(line, "pinfail") == 0) {
        r->f.fail_pin = -ENOSPC;
    } else if (sscanf(line, "busy %llu", &a) == 1) {
        r->f.busy = (int)(a % 100);
    } else if (sscanf(line, "prog %llu %llu %llu %llu", &a, &b, &c, &d) == 4 && a > 0 &&
               a <= r->f.nstages) {
        r->f.prog[a].bytes_done = (b & 0xffffffffu) * KIB;
        r->f.prog[a].bytes_total = (c & 0xffffffffu) * KIB;
        r->f.prog[a].listing_done = true;
        r->f.prog[a].state = d % 4 == 1 ? STAGE_DONE : d % 4 == 2 ? STAGE_FAILED : STAGE_RUNNING;
        r->f.gone[a] = d % 4 == 3;
    } else if (sscanf(line, "%15s", word) == 1 && strcmp(word, "list") == 0) {
        check(r);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    struct run *r = calloc(1, sizeof(*r));
    if (!r)
        return 0;
    r->f = (struct fakejobs){
        .level = 100 * 1024 * KIB, .pin_budget = 50 * 1024 * KIB, .hand_rule = "hand/"};
    struct jobs_ops ops;
    fakejobs_ops(&r->f, &ops);
    if (jobs_new(&ops, &r->j) != 0)
        abort();
    const char *p = (const char *)data, *end = p + size;
    int nlines = 0;
    while (p < end && nlines++ < 256) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = (size_t)((nl ? nl : end) - p);
        if (ll > 0 && p[0] == '{') {
            post(r, p, ll);
        } else if (ll > 0 && ll < 120 && !memchr(p, '\0', ll)) {
            char line[128];
            memcpy(line, p, ll);
            line[ll] = '\0';
            command(r, line);
        }
        p = nl ? nl + 1 : end;
    }
    check(r);
    jobs_free(r->j);
    const struct fakejobs_pin *left = fakejobs_still_pinned(&r->f);
    if (left)
        fail("a rule a job pinned is still pinned after jobs_free", left->key);
    fakejobs_fini(&r->f);
    for (size_t i = 0; i < r->ntenants; i++)
        free(r->tenants[i]);
    free(r);
    return 0;
}
