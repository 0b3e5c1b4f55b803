/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_hints.c - libFuzzer target for hint submission: a hint file's text, parsed as the mount's
 * control files parse it (hintlines_parse, mount point "/mnt/tier"), each path checked as a write
 * checks it (hints_check_path), then handed to hints_submit for a set, over the control API's
 * POSIX fixture (tests/lib/api_fixture.h) with the hint engine running and a dataset version v1
 * of /ns/a committed, so that version paths (/.tierd/datasets/ns/a@v1/f.txt) resolve.
 *
 * The first input byte picks: bit 0 append, bits 1-2 the tenant (default, infer, a tenant the
 * (other), infer again), bits 3-5 the set's name (valid names, an empty one, one
 * of 63 and one of 64 bytes, one with '/'), bit 6 drop the set first (hints_cancel). The rest is
 * the file.
 *
 * What must hold (src/hints/hints.h): hints_submit answers 0 or one of its documented errors,
 * -EINVAL with a message; all or nothing: on an error the set is as it was (absent, or its
 * entries unchanged); on 0 the set exists with the file's paths as its order (appended: after
 * the entries it had); a path hints_check_path refuses makes the submission fail, and a
 * submission that succeeds had every path pass hints_check_path (what a write takes, the close
 * takes, so `printf ... > .tierd/hints/NAME` fails at the write or not at all for a bad path).
 * Sets are dropped when they grow past 100,000 entries, so that a long run stays in memory, and
 * all of them every 4,096 inputs, so that none stays idle long enough (HINTS_IDLE_NS) for the
 * engine to drop it between this target's two looks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "common/err.h"
#include "hints/hintlines.h"
#include "datasets/dataset.h"
#include "hints/hints.h"
#include "tenant/tenant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct api_fixture fx;
static bool fx_open;
static uint32_t infer_id;

static void fail(const char *what, const char *name, int rc)
{
    fprintf(stderr, "fuzz_hints: %s (set '%s', rc %d, %s)\n", what, name, rc, tier_err_msg());
    abort();
}

static void fixture_close(void)
{
    if (fx_open) {
        hints_free(fx.d.hints);
        fx.d.hints = NULL;
        api_fixture_close(&fx);
    }
    fx_open = false;
}

static void fixture_open(void)
{
    if (api_fixture_open(&fx, "fuzz_hints") != 0 || api_fixture_hints_new(&fx) != 0 ||
        tenant_find(fx.d.tenants, "infer", &infer_id) != 0)
        abort();
    fx_open = true;
    atexit(fixture_close);
    static const char commit[] = "POST /v1/datasets\n\n{\"path\": \"/ns/a\", \"name\": \"v1\"}";
    struct api_reply r;
    api_fixture_request(&fx, commit, sizeof(commit) - 1, &r);
    if (r.status != 201) {
        fprintf(stderr, "fuzz_hints: cannot commit /ns/a v1: %u %.*s\n", r.status, (int)r.len,
                r.body);
        abort();
    }
    api_reply_fini(&r);
}

/* The set (tenant, name): true and its entries in *entries if it exists. */
static bool set_of(uint32_t tenant, const char *name, uint64_t *entries)
{
    static struct hints_set_stats st[HINTS_SETS_MAX];
    size_t n = hints_list(fx.d.hints, st, HINTS_SETS_MAX);
    for (size_t i = 0; i < n && i < HINTS_SETS_MAX; i++) {
        if (st[i].tenant == tenant && strcmp(st[i].name, name) == 0) {
            *entries = st[i].entries;
            return true;
        }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 256 * 1024)
        return 0;
    if (!fx_open)
        fixture_open();
    static unsigned inputs;
    if (++inputs % 4096 == 0) {
        static struct hints_set_stats st[HINTS_SETS_MAX];
        size_t ns = hints_list(fx.d.hints, st, HINTS_SETS_MAX);
        for (size_t i = 0; i < ns && i < HINTS_SETS_MAX; i++)
            (void)hints_cancel(fx.d.hints, st[i].name, -1);
    }
    static const char *const names[] = {
        "job7",
        "epoch.1_a-b",
        "x",
        "",
        "a23456789012345678901234567890123456789012345678901234567890123",  /* 63 */
        "a234567890123456789012345678901234567890123456789012345678901234", /* 64 */
        "bad/name",
        "j"};
    const uint32_t tenants[] = {TIER_TENANT_DEFAULT, infer_id, TIER_TENANT_OTHER, infer_id};
    bool append = data[0] & 1;
    uint32_t tenant = tenants[(data[0] >> 1) & 3];
    const char *name = names[(data[0] >> 3) & 7];
    if (data[0] & 0x40)
        (void)hints_cancel(fx.d.hints, name, tenant);

    size_t len = size - 1;
    char *buf = malloc(len + 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, len);
    const char **paths = NULL;
    uint32_t *lines = NULL;
    size_t n = 0;
    uint64_t last = 0;
    bool file_append = false;
    tier_err_clear();
    int rc = hintlines_parse("/mnt/tier", buf, len, 0, HINTS_ENTRIES_MAX, &paths, &lines, &n, &last,
                             &file_append);
    if (rc != 0) {
        free(buf);
        return 0; /* the text itself is fuzz_hintlines' */
    }
    append = append || file_append;
    bool every_path_ok = true, version = false;
    for (size_t i = 0; i < n; i++)
        version = version || strncmp(paths[i], DATASET_VIEW "/", sizeof(DATASET_VIEW)) == 0;
    for (size_t i = 0; i < n && every_path_ok; i++) {
        tier_err_clear();
        int crc = hints_check_path(fx.d.hints, paths[i]);
        if (crc != 0 && crc != -EINVAL && crc != -ENOMEM)
            fail("hints_check_path answered an undocumented error", paths[i], crc);
        if (crc == -EINVAL && !*tier_err_msg())
            fail("hints_check_path refused without a message", paths[i], crc);
        every_path_ok = crc == 0;
    }

    uint64_t before = 0, after = 0;
    bool existed = set_of(tenant, name, &before);
    tier_err_clear();
    /* the top bit: an administrator's submission (no per-tenant caps) or a user's */
    bool admin = data[0] & 0x80;
    rc = hints_submit(fx.d.hints, name, tenant, paths, n, append, admin);
    bool exists = set_of(tenant, name, &after);
    switch (rc) {
    case 0:
        if (!every_path_ok)
            fail("hints_submit took a path hints_check_path refuses", name, rc);
        if (!hints_name_ok(name))
            fail("hints_submit took a bad name", name, rc);
        if (!exists)
            fail("hints_submit succeeded and the set is not listed", name, rc);
        /* appended: after what it had (unless the engine dropped it as idle meanwhile) */
        if (after != (append && existed ? before + n : n) && !(append && after == n))
            fail("the set's entries are not its order", name, rc);
        break;
    case -EINVAL:
    case -E2BIG:
    case -ENOSPC:
    case -EEXIST:
    case -ENOMEM:
    case -EDQUOT: /* a user's tenant at its hint_tenant_* cap */
    case -EBUSY:  /* the manifests in flight over their budget */
        if (rc == -EINVAL && !*tier_err_msg())
            fail("hints_submit refused without a message", name, rc);
        if (exists != existed || (exists && after != before))
            fail("a refused submission changed the set", name, rc);
        /* past the checks, only a version's manifest (which the check does not read) fails */
        if (rc == -EINVAL && every_path_ok && hints_name_ok(name) && !version)
            fail("hints_submit refused what every check passed", name, rc);
        break;
    default:
        fail("hints_submit answered an undocumented error", name, rc);
    }
    if (exists && after > 100000)
        (void)hints_cancel(fx.d.hints, name, tenant);
    free(paths);
    free(lines);
    free(buf);
    return 0;
}
