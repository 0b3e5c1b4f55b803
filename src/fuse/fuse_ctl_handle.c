/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ctl_handle.c - the hint files' handles (fuse_ctl_hints.c's DESIGN): who may write
 * (tfs_ctl_may_hint), the buffer of a writer and its bounds (per file, per tenant, in all:
 * charges), the submission of what was written to hints_submit, and the status text a read
 * returns. Locking as fuse_ctl_hints.c says: ctl->mu (the writers' list), a handle's mu (its
 * buffer), ctl->charge_mu (a leaf).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "hints/hintlines.h"
#include "fuse/fuse_ctl.h"
#include "tenant/tenant.h"

const char *tfs_ctl_tenant_name(const struct tierd_fuse *fs, uint32_t tenant)
{
    return fs->ctx.tenants ? tenant_name(fs->ctx.tenants, tenant) : "default";
}

/* The set (tenant, name) into *out (may be NULL): true if it exists. */
bool tfs_ctl_find_set(struct tierd_fuse *fs, uint32_t tenant, const char *name,
                      struct hints_set_stats *out)
{
    struct hints_set_stats *st = malloc(HINTS_SETS_MAX * sizeof(*st));
    if (!st)
        return false;
    size_t n = hints_list(fs->ctx.hints, st, HINTS_SETS_MAX);
    bool found = false;
    for (size_t i = 0; i < n && i < HINTS_SETS_MAX && !found; i++) {
        if (st[i].tenant == tenant && strcmp(st[i].name, name) == 0) {
            found = true;
            if (out)
                *out = st[i];
        }
    }
    free(st);
    return found;
}

static bool writing(struct tierd_fuse *fs, uint32_t tenant, const char *name)
{
    bool found = false;
    pthread_mutex_lock(&fs->ctl->mu);
    for (struct tfs_ctlh *h = fs->ctl->writers; h && !found; h = h->next)
        found = h->tenant == tenant && !h->cancelled && strcmp(h->name, name) == 0;
    pthread_mutex_unlock(&fs->ctl->mu);
    return found;
}

bool tfs_ctl_file_exists(struct tierd_fuse *fs, uint32_t tenant, const char *name)
{
    return hints_name_ok(name) &&
           (writing(fs, tenant, name) || tfs_ctl_find_set(fs, tenant, name, NULL));
}

/* ---- handles ----------------------------------------------------------------------------- */

/* Charge more bytes of h's buffer to the writers' total and (but for an administrator's) to its
 * tenant's share. 0, -EDQUOT (the tenant's share) or -ENOSPC (the total, or CTL_CHARGES
 * tenants with buffers already), logged with what to do. */
static int charge(struct tierd_fuse *fs, struct tfs_ctlh *h, uint64_t more)
{
    struct tfs_ctl *c = fs->ctl;
    if (atomic_fetch_add(&c->buffered, more) + more > CTL_TOTAL_MAX) {
        atomic_fetch_sub(&c->buffered, more);
        log_warn("fuse: hint file %s" CTL_HINTS "/%s: the hint files being written hold %llu "
                 "MiB already; close them (or write smaller orders) first",
                 fs->mountpoint, h->name, (unsigned long long)(CTL_TOTAL_MAX >> 20));
        return -ENOSPC;
    }
    if (h->admin)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&c->charge_mu);
    struct ctl_charge *slot = NULL, *spare = NULL;
    for (size_t i = 0; i < CTL_CHARGES && !slot; i++) {
        if (c->charges[i].bytes && c->charges[i].tenant == h->tenant)
            slot = &c->charges[i];
        else if (!c->charges[i].bytes && !spare)
            spare = &c->charges[i];
    }
    if (!slot && spare) {
        slot = spare;
        slot->tenant = h->tenant;
    }
    uint64_t had = slot ? slot->bytes : 0;
    if (!slot)
        rc = -ENOSPC;
    else if (had + more > CTL_TENANT_MAX)
        rc = -EDQUOT;
    else
        slot->bytes += more;
    pthread_mutex_unlock(&c->charge_mu);
    if (rc) {
        atomic_fetch_sub(&c->buffered, more);
        if (rc == -EDQUOT)
            log_warn("fuse: hint file %s" CTL_HINTS "/%s: tenant %s's hint files being written "
                     "hold %llu KiB already, at most %llu KiB per tenant; close them (or write "
                     "smaller orders, appending the rest) first",
                     fs->mountpoint, h->name, tfs_ctl_tenant_name(fs, h->tenant),
                     (unsigned long long)(had >> 10), (unsigned long long)(CTL_TENANT_MAX >> 10));
        else
            log_warn("fuse: hint file %s" CTL_HINTS "/%s: %llu tenants have hint files being "
                     "written already; close some first",
                     fs->mountpoint, h->name, (unsigned long long)CTL_CHARGES);
    }
    return rc;
}

static void uncharge(struct tierd_fuse *fs, struct tfs_ctlh *h, uint64_t bytes)
{
    struct tfs_ctl *c = fs->ctl;
    atomic_fetch_sub(&c->buffered, bytes);
    if (h->admin || !bytes)
        return;
    pthread_mutex_lock(&c->charge_mu);
    for (size_t i = 0; i < CTL_CHARGES; i++)
        if (c->charges[i].bytes && c->charges[i].tenant == h->tenant) {
            c->charges[i].bytes -= bytes < c->charges[i].bytes ? bytes : c->charges[i].bytes;
            break;
        }
    pthread_mutex_unlock(&c->charge_mu);
}

static void handle_destroy(struct tierd_fuse *fs, struct tfs_ctlh *h)
{
    if (h->writer) {
        pthread_mutex_lock(&fs->ctl->mu);
        if (h->prev)
            h->prev->next = h->next;
        else
            fs->ctl->writers = h->next;
        if (h->next)
            h->next->prev = h->prev;
        pthread_mutex_unlock(&fs->ctl->mu);
    }
    uncharge(fs, h, (uint64_t)h->cap);
    pthread_mutex_destroy(&h->mu);
    free(h->buf);
    free(h->text);
    free(h);
}

void tfs_ctl_orphan_free(struct tierd_fuse *fs, struct tfs_hbase *hb)
{
    handle_destroy(fs, (struct tfs_ctlh *)hb);
}

/* May the caller of req give hints, and as which tenant? Tenants default and other are every
 * unmatched caller's: only root and tierd's own uid may hint for them (as an administrator may
 * through the API). */
int tfs_ctl_may_hint(struct tierd_fuse *fs, fuse_req_t req, const char *name, uint32_t *tenant,
                     bool *admin)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    struct tier_ioctx io = tfs_req_io(fs, req);
    if (admin)
        *admin = ctx->uid == 0 || ctx->uid == geteuid();
    bool shared = io.tenant == TIER_TENANT_DEFAULT || io.tenant == TIER_TENANT_OTHER;
    if (shared && ctx->uid != 0 && ctx->uid != geteuid()) {
        log_warn("fuse: %s" CTL_HINTS "/%.64s: pid %d (uid %u) is tenant %s, which every "
                 "unmatched caller shares: hints need a tenant of one's own (a [tenant] section "
                 "matching the job's uid or cgroup, a Slurm job, a pod), or root",
                 fs->mountpoint, name, (int)ctx->pid, (unsigned)ctx->uid,
                 tfs_ctl_tenant_name(fs, io.tenant));
        return -EPERM;
    }
    *tenant = io.tenant;
    return 0;
}

/* A new handle on hint file name; writers are checked (may_hint) and listed. */
int tfs_ctl_handle_open(struct tierd_fuse *fs, fuse_req_t req, const char *name, int flags,
                        bool created, struct tfs_ctlh **out)
{
    if (!hints_name_ok(name)) {
        log_warn("fuse: %s" CTL_HINTS "/%.80s: not a hint set name (1 to %d letters, digits, "
                 "'.', '_', '-')",
                 fs->mountpoint, name, HINTS_NAME_MAX - 1);
        return -EINVAL;
    }
    bool writer = (flags & O_ACCMODE) != O_RDONLY, admin = false;
    uint32_t tenant = 0;
    if (writer) {
        int rc = tfs_ctl_may_hint(fs, req, name, &tenant, &admin);
        if (rc)
            return rc;
    } else {
        tenant = tfs_req_io(fs, req).tenant;
        if (!tfs_ctl_file_exists(fs, tenant, name))
            return -ENOENT;
    }
    struct tfs_ctlh *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    snprintf(h->name, sizeof(h->name), "%s", name);
    h->tenant = tenant;
    h->writer = writer;
    h->admin = admin;
    h->append_flag = (flags & O_APPEND) != 0;
    h->dirty = created || (flags & O_TRUNC);
    pthread_mutex_init(&h->mu, NULL);
    if (writer) {
        pthread_mutex_lock(&fs->ctl->mu);
        h->next = fs->ctl->writers;
        if (h->next)
            h->next->prev = h;
        fs->ctl->writers = h;
        pthread_mutex_unlock(&fs->ctl->mu);
    }
    tfs_handle_track(fs, &h->hb, TFS_H_CTL, tenant);
    *out = h;
    return 0;
}

void tfs_ctl_handle_free(struct tierd_fuse *fs, struct tfs_ctlh *h)
{
    tfs_handle_untrack(fs, &h->hb);
    handle_destroy(fs, h);
}

void tfs_ctl_handle_fi(struct fuse_file_info *fi, struct tfs_ctlh *h)
{
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->direct_io = 1; /* read although the size is 0; no page cache of a changing text */
    fi->keep_cache = 0;
    fi->noflush = !h->writer;
}

/* ---- submission ---------------------------------------------------------------------------- */

/* h->mu held: parse buf[taken, len) into paths (pointers into buf, whose newlines become NULs)
 * and their line numbers (hintlines_parse: hints/hintlines.h); *lastp: the number of the last
 * line. */
static int parse(struct tierd_fuse *fs, struct tfs_ctlh *h, const char ***pathsp, uint32_t **linesp,
                 size_t *np, uint64_t *lastp, bool *append)
{
    if (!h->buf) {
        *pathsp = calloc(1, sizeof(**pathsp));
        *linesp = calloc(1, sizeof(**linesp));
        if (!*pathsp || !*linesp) {
            free(*pathsp);
            free(*linesp);
            return -ENOMEM;
        }
        *np = 0;
        *lastp = h->line0;
        return 0;
    }
    return hintlines_parse(fs->mountpoint, h->buf + h->taken, h->len - h->taken, h->line0,
                           HINTS_ENTRIES_MAX, pathsp, linesp, np, lastp, append);
}

/* h->mu held: hand what was written since the last submission to hints_submit. A close of a
 * descriptor that wrote nothing new hands nothing over: a shell's `>` closes its first copy of
 * the descriptor before the command writes, and each process that inherited it closes its own.
 * A file created or truncated and never written is an empty order: handed over at release. 0
 * when there was nothing to hand over. */
int tfs_ctl_submit_locked(struct tierd_fuse *fs, struct tfs_ctlh *h, const char *when, bool last)
{
    if (!h->writer || h->cancelled)
        return 0;
    if (h->err)
        return h->err;
    if (h->len == h->taken && !(last && h->dirty && !h->submitted))
        return 0;
    bool append = h->submitted || h->append_flag;
    const char **paths = NULL;
    uint32_t *lines = NULL;
    size_t n = 0;
    uint64_t lastline = 0;
    tier_err_clear();
    int rc = parse(fs, h, &paths, &lines, &n, &lastline, &append);
    if (rc == 0)
        rc = hints_submit(fs->ctx.hints, h->name, h->tenant, paths, n, append, h->admin);
    if (rc == 0) {
        h->taken = h->checked = h->len;
        h->line0 = h->checked_lines = lastline;
        h->dirty = false;
        h->submitted = true;
        log_debug("fuse: hint file %s" CTL_HINTS "/%s of tenant %s: %zu paths %s at %s",
                  fs->mountpoint, h->name, tfs_ctl_tenant_name(fs, h->tenant), n,
                  append ? "appended" : "given", when);
    } else {
        /* which line hints_submit's "paths[i]" is */
        char where[48] = "";
        size_t i = 0;
        if (paths && sscanf(tier_err_msg(), "paths[%zu]", &i) == 1 && i < n)
            snprintf(where, sizeof(where), " (line %" PRIu32 ")", lines[i]);
        log_warn("fuse: hint file %s" CTL_HINTS "/%s of tenant %s not taken at %s: %s%s; the "
                 "set is unchanged",
                 fs->mountpoint, h->name, tfs_ctl_tenant_name(fs, h->tenant), when,
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc), where);
        h->err = rc; /* the list is not what the writer meant: nothing later is taken either */
    }
    free(paths);
    free(lines);
    return rc;
}

int tfs_ctl_submit(struct tierd_fuse *fs, struct tfs_ctlh *h, const char *when, bool last)
{
    pthread_mutex_lock(&h->mu);
    int rc = tfs_ctl_submit_locked(fs, h, when, last);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

/* ---- status text ------------------------------------------------------------------------- */

/* h->mu held: make the text read returns. */
int tfs_ctl_status_make(struct tierd_fuse *fs, struct tfs_ctlh *h)
{
    char *t = malloc(CTL_TEXT_MAX);
    if (!t)
        return -ENOMEM;
    struct hints_set_stats s;
    int w;
    if (tfs_ctl_find_set(fs, h->tenant, h->name, &s))
        w = snprintf(t, CTL_TEXT_MAX,
                     "name: %s\ntenant: %s\nstate: active\nentries: %" PRIu64 "\nfiles: %" PRIu64
                     "\ncursor: %" PRIu64 "\nwindow_files: %" PRIu64 "\nwindow_bytes: %" PRIu64
                     "\nheld_bytes: %" PRIu64 "\nbudget: %" PRIu64 "\nfetched_files: %" PRIu64
                     "\nfetched_bytes: %" PRIu64 "\nalready_held: %" PRIu64 "\nreleased: %" PRIu64
                     "\nerrors: %" PRIu64 "\nskipped: %" PRIu64 "\nfirst_error: %s\n",
                     s.name, tfs_ctl_tenant_name(fs, s.tenant), s.entries, s.files, s.cursor,
                     s.window_files, s.window_bytes, s.held_bytes, s.budget, s.fetched_files,
                     s.fetched_bytes, s.already_held, s.released, s.errors, s.skipped,
                     s.first_error);
    else
        w = snprintf(t, CTL_TEXT_MAX,
                     "name: %s\ntenant: %s\nstate: none (no such set of this tenant yet: a file "
                     "being written is taken when it is closed)\n",
                     h->name, tfs_ctl_tenant_name(fs, h->tenant));
    free(h->text);
    h->text = t;
    h->tlen = w < 0 ? 0 : (size_t)w < CTL_TEXT_MAX ? (size_t)w : CTL_TEXT_MAX - 1;
    return 0;
}

/* h->mu held: room for end bytes (and the NUL) in h->buf, within the bounds: a file of a writer
 * who is no administrator holds HINTS_USER_BYTES_MAX (POST /v1/hints's body bound for users),
 * an administrator's CTL_FILE_MAX; the buffers are charged (charge). */
int tfs_ctl_reserve(struct tierd_fuse *fs, struct tfs_ctlh *h, uint64_t end)
{
    uint64_t max = h->admin ? CTL_FILE_MAX : HINTS_USER_BYTES_MAX;
    if (end > max) {
        log_warn("fuse: hint file %s" CTL_HINTS "/%s: over %llu MiB written (the bound for %s); "
                 "split the order and append the rest (O_APPEND, or '#append' as the first line)",
                 fs->mountpoint, h->name, (unsigned long long)(max >> 20),
                 h->admin ? "root and tierd's user" : "a writer who is not root");
        return -EFBIG;
    }
    if (end + 1 <= h->cap)
        return 0;
    size_t ncap = h->cap ? h->cap : CTL_BUF_MIN;
    while (ncap < end + 1)
        ncap *= 2;
    if (ncap > max + 1)
        ncap = max + 1;
    uint64_t more = ncap - h->cap;
    int rc = charge(fs, h, more);
    if (rc)
        return rc;
    char *nb = realloc(h->buf, ncap);
    if (!nb) {
        uncharge(fs, h, more);
        return -ENOMEM;
    }
    h->buf = nb;
    h->cap = ncap;
    return 0;
}

/* h->mu held: check the lines the last write completed, so that a bad path fails write(2)
 * already: a shell does not look at close(2)'s result (`printf ... > file` would say nothing).
 * hints_submit checks them again at the submission; this is the writer's early warning. */
int tfs_ctl_check_new_lines(struct tierd_fuse *fs, struct tfs_ctlh *h)
{
    if (h->nocheck)
        return 0;
    int rc = 0;
    char *end = h->buf + h->len;
    for (char *p = h->buf + h->checked, *nl;
         rc == 0 && p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
        size_t ll = (size_t)(nl - p);
        if (ll > 0 && p[ll - 1] == '\r')
            ll--;
        char save = p[ll];
        p[ll] = '\0'; /* for the check only: the buffer is parsed again at the submission */
        uint64_t lineno = h->checked_lines + 1;
        const char *path = NULL;
        rc = hintlines_path(fs->mountpoint, p, ll, lineno, &path);
        if (rc == 0 && path && (rc = hints_check_path(fs->ctx.hints, path)) != 0) {
            char why[256];
            snprintf(why, sizeof(why), "%s", tier_err_msg());
            tier_err_set("line %" PRIu64 " %s", lineno, why);
        }
        p[ll] = save;
        if (rc == 0) {
            h->checked = (size_t)(nl + 1 - h->buf);
            h->checked_lines = lineno;
        }
    }
    return rc;
}
