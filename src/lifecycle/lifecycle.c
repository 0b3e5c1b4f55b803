/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.c - the lifecycle policy engine (policy.h, docs/POLICIES.md): one thread that runs a
 * full pass every [daemon] policy_interval, and a local pass soon after a write-back upload
 * (demote rules of write-back namespaces: the built-in retention keeps its old promptness);
 * `tierctl policy run` forces a full pass and `tierctl policy plan` plans one.
 *
 * A pass, per namespace that has rules: gather its files (a full pass lists the backend under
 * the namespace's prefix, or the rules' common prefix below it; a write-back namespace adds the
 * burst buffer's journal: what is local, what is not uploaded yet), sorted by key; then each
 * rule in config order selects its files (policy_select) and each selected file gets the rule's
 * action. Only files the backend holds whole are acted on; a file with a generation not
 * uploaded yet is left for a later pass.
 *
 * Crash safety (SIGKILL anywhere): every action is idempotent, or journalled.
 *   - demote: wb_demote is a journalled transition; cache_evict only drops copies.
 *   - copy: the target key is stat'ed first; an object there is written over only when it is
 *     this rule's copy (its journal row of the key records that object's ETag, or no target
 *     ETag: format 1); else, holding the source's bytes, it is journalled as it is, and
 *     otherwise skipped (it may be the only copy of something else). The object is read pinned
 *     to the source's ETag (If-Match) and written whole (one PUT, or a multipart upload that
 *     appears only at complete); then the target is stat'ed (size) and only then the copy is
 *     journalled (rule, key, source ETag, target, size, and the target's ETag as its stat gave
 *     it) in the engine's SQLite file. A kill before the journal write finds the source's bytes
 *     on the target at the next pass and journals them, so a key is never duplicated. Multipart
 *     uploads of the key left by a killed copy are listed and aborted before a new one starts,
 *     and when the target found holding the source's bytes is journalled.
 *   - expire: never before every copy rule that takes the object (by backend and key, of any
 *     namespace: two namespaces may map onto the same keys) has journalled its copy of this
 *     version, and a stat of each copy's target, right before the delete, finds the size and
 *     ETag journalled; else the delete is skipped (counted, logged once per file and reason;
 *     a copy that is gone is forgotten so that its rule makes it again). Then one delete (a
 *     second is ENOENT, counted as done). The config refuses copy targets that overlap another
 *     rule's target or any namespace (lifecycle_rules.c), so no other writer of tierd's shares a
 *     target; the stat catches the writers outside it.
 *
 * STATE of one file under one rule, per pass (no state is kept between passes but the copy
 * journal, so there is no transition table beyond this):
 *   not durable (pending) -> never selected; selected, the action finds nothing to do (already
 *   demoted, copied, pinned) -> nothing; selected, the action cannot take it yet (busy local
 *   copy, expire waiting for its copy, changed since the listing) -> deferred (counted);
 *   an expire whose copy is not on its target as journalled, or a copy whose target holds an
 *   object that is not the rule's copy -> skipped (counted, logged once);
 *   else done or failed (counted, logged, in the recent-actions ring).
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "cache/cache.h"
#include "common/timeutil.h"
#include "common/vec.h"
#include "lifecycle/access.h"
#include "datasets/dataset.h"
#include "datasets/manifest.h"
#include "stage/pinmeta.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"
#include "tenant/tenant.h"
#include "tiers/backend.h"
#include "writeback/wb.h"

#define PE_RECENT 256         /* actions kept for GET /v1/policy */
#define PE_DB_FORMAT 2        /* the copy journal's format (PRAGMA user_version) */
#define PE_SKIP_LOGGED 4096   /* (rule, file, reason) skips remembered as logged */
#define PE_RESULT_MAX 2000    /* actions listed in one run's or plan's answer */
#define PE_LOCAL_DELAY_MS 200 /* a local pass this long after the first upload that kicked it */
#define PE_STAGE_PATHS 4096   /* files one staging job of a pass takes at most */

/* The policies' backend calls: background work of the default tenant. */
static const struct tier_ioctx pe_io = {.tenant = TIER_TENANT_DEFAULT, .cls = TIER_IO_BACKGROUND};

struct pe_count {
    uint64_t done, bytes, deferred, failed, skipped;
};

struct pe_event {
    int64_t at_ns;
    size_t rule;
    bool failed, skipped;
    uint64_t bytes;
    char path[320];
    char detail[200];
};

struct policy_engine {
    struct policy_engine_ctx ctx; /* the opener's (policy_engine_start), read-only */
    struct access_log *access;    /* *ctx.access: made at start, freed at free; NULL: none */
    struct policy_rules rules;
    sqlite3 *db; /* the copy journal; used under pass_lock only */
    char *db_path;

    pthread_mutex_t pass_lock; /* one pass at a time (thread, run, plan) */

    pthread_mutex_t lock; /* the fields below */
    pthread_cond_t cond;
    bool stopping, kicked;
    struct pe_count *counts; /* per rule */
    struct pe_event recent[PE_RECENT];
    size_t nrecent, recent_head;
    uint64_t passes, local_passes;
    int64_t last_pass_ns;
    uint64_t last_pass_ms;
    char last_error[256];
    /* skipped expires already logged: hashes of (rule, key, reason), open addressing, 0 free;
     * full: further ones are counted, not logged (said once) */
    uint64_t skip_logged[PE_SKIP_LOGGED];
    size_t nskip_logged;
    bool skip_log_full;

    pthread_t thread;
    bool started;
    int64_t start_ns; /* realtime: reads before it are unknown (idle) */
};

/* One pass's work: what it did or plans, for the answer of run and plan. */
struct pe_pass {
    bool full, dry_run;
    const char *only; /* a rule name, or NULL */
    json_t *actions;  /* array */
    size_t listed, truncated;
    uint64_t done, deferred, failed, skipped, files;
    /* the dataset versions of copy rules an expire asked about (copy_covers), read once a pass:
     * per rule index, 0 not read yet, 1 read into ds[i], < 0 the error */
    struct manifest *ds;
    int *ds_rc;
};

/* ---- the copy journal -------------------------------------------------------------------- */

static int db_open(struct policy_engine *pe)
{
    int rc =
        sqlite3_open_v2(pe->db_path, &pe->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        tier_err_set("cannot open the policies' copy journal %s: %s", pe->db_path,
                     pe->db ? sqlite3_errmsg(pe->db) : sqlite3_errstr(rc));
        return -EIO;
    }
    /* the format, in PRAGMA user_version: 0 a new file, PE_DB_FORMAT this one; a newer one is
     * a newer tierd's: refused, never misread */
    sqlite3_stmt *st = NULL;
    int ver = -1;
    if (sqlite3_prepare_v2(pe->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        ver = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (ver < 0 || ver > PE_DB_FORMAT) {
        tier_err_set("the policies' copy journal %s has format %d, which this tierd (format %d) "
                     "cannot read%s: run the tierd that wrote it, or move the file away (the "
                     "copies are then made again)",
                     pe->db_path, ver, PE_DB_FORMAT,
                     ver > PE_DB_FORMAT ? " (a newer tierd's)" : "");
        return -EPROTONOSUPPORT;
    }
    /* WAL first (not inside a transaction); then the schema and the format in one transaction,
     * so that a kill leaves either the old file or the new one. Format 1 had no target_etag: its
     * rows are kept (the column is added, NULL), and such a copy is made once more before an
     * expire may trust it (db_copy_row). Format 0 with a table is a format-1 file whose first
     * creation was killed before its user_version was written: its table gets the column too. */
    char *msg = NULL;
    rc = sqlite3_exec(pe->db, "PRAGMA journal_mode=WAL; BEGIN IMMEDIATE;", NULL, NULL, &msg);
    int cols = -1, has_tetag = 0;
    if (rc == SQLITE_OK) {
        rc = sqlite3_prepare_v2(pe->db,
                                "SELECT count(*), coalesce(sum(name = 'target_etag'), 0) FROM "
                                "pragma_table_info('copies')",
                                -1, &st, NULL);
        if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
            cols = sqlite3_column_int(st, 0);
            has_tetag = sqlite3_column_int(st, 1);
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_OK && cols < 0)
            rc = SQLITE_ERROR;
    }
    bool upgraded = rc == SQLITE_OK && cols > 0 && !has_tetag;
    if (upgraded)
        rc = sqlite3_exec(pe->db, "ALTER TABLE copies ADD COLUMN target_etag TEXT;", NULL, NULL,
                          &msg);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(pe->db,
                          "CREATE TABLE IF NOT EXISTS copies (rule TEXT NOT NULL,"
                          " key TEXT NOT NULL, etag TEXT NOT NULL, target TEXT NOT NULL,"
                          " size INTEGER NOT NULL, done_ns INTEGER NOT NULL,"
                          " target_etag TEXT, PRIMARY KEY (rule, key));"
                          "PRAGMA user_version = 2;"
                          "COMMIT;",
                          NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        tier_err_set("the policies' copy journal %s: %s", pe->db_path,
                     msg ? msg : sqlite3_errmsg(pe->db));
        sqlite3_free(msg);
        if (!sqlite3_get_autocommit(pe->db))
            (void)sqlite3_exec(pe->db, "ROLLBACK", NULL, NULL, NULL);
        return -EIO;
    }
    if (upgraded)
        log_info("policy: the copy journal %s (format %d) was upgraded to format %d (the "
                 "target's ETag is journalled now; copies journalled before are made once more)",
                 pe->db_path, ver, PE_DB_FORMAT);
    return 0;
}

/* The target of rule r's copy of relative key rel: its key, and "BACKEND:KEY". 0, or
 * -ENAMETOOLONG. */
static int copy_target(const struct policy_engine_ctx *cx, const struct policy_rule *r,
                       const char *rel, char *dkey, size_t dsz, char *target, size_t tsz)
{
    const char *bname = cx->backends[r->copy_backend]->name;
    if (snprintf(dkey, dsz, "%s%s", r->copy_prefix, rel) >= (int)dsz ||
        snprintf(target, tsz, "%s:%s", bname, dkey) >= (int)tsz)
        return -ENAMETOOLONG;
    return 0;
}

/* The copy journal's row of rule r, key and target ("BACKEND:KEY"): true with the source's
 * ETag at the copy (setag), the size copied and the target's ETag right after it (tetag, "" in a
 * row of format 1), each buffer BACKEND_ETAG_MAX; false when there is none (or it cannot be
 * read). */
static bool db_row(struct policy_engine *pe, const struct policy_rule *r, const char *key,
                   const char *target, char *setag, uint64_t *size, char *tetag)
{
    sqlite3_stmt *st = NULL;
    bool found = false;
    if (sqlite3_prepare_v2(pe->db,
                           "SELECT etag, size, target_etag FROM copies WHERE rule = ?1 AND "
                           "key = ?2 AND target = ?3",
                           -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, r->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, target, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *e = sqlite3_column_text(st, 0);
        const unsigned char *te = sqlite3_column_text(st, 2);
        tier_strlcpy(setag, e ? (const char *)e : "", BACKEND_ETAG_MAX);
        tier_strlcpy(tetag, te ? (const char *)te : "", BACKEND_ETAG_MAX);
        *size = (uint64_t)sqlite3_column_int64(st, 1);
        found = true;
    }
    sqlite3_finalize(st);
    return found;
}

/* Has rule r copied backend key (absolute) at version etag to target ("BACKEND:KEY"), with the
 * target's ETag journalled? Then *size and tetag (BACKEND_ETAG_MAX) get what the target had
 * right after the copy: its size (the source's) and its ETag (the backend's version tag: S3's
 * ETag; POSIX's inode, size and mtime). A rule whose target changed copies again; so does a row
 * of format 1 (no target ETag). size and tetag may be NULL. */
static bool db_copy_row(struct policy_engine *pe, const struct policy_rule *r, const char *key,
                        const char *etag, const char *target, uint64_t *size, char *tetag)
{
    char e[BACKEND_ETAG_MAX], te[BACKEND_ETAG_MAX];
    uint64_t sz = 0;
    if (!etag || !db_row(pe, r, key, target, e, &sz, te) || !te[0] || strcmp(e, etag) != 0)
        return false;
    if (size)
        *size = sz;
    if (tetag)
        tier_strlcpy(tetag, te, BACKEND_ETAG_MAX);
    return true;
}

static bool db_copied(struct policy_engine *pe, const struct policy_rule *r, const char *key,
                      const char *etag, const char *target)
{
    return db_copy_row(pe, r, key, etag, target, NULL, NULL);
}

/* May rule r overwrite what target ("BACKEND:KEY") holds now (ETag cur, from a stat)? Only its
 * own copy: the row of (r, key) for this target journals cur as the target's ETag (a copy of an
 * older version of the same source), or journals no target ETag (a row of format 1). */
static bool db_target_ours(struct policy_engine *pe, const struct policy_rule *r, const char *key,
                           const char *target, const char *cur)
{
    char e[BACKEND_ETAG_MAX], te[BACKEND_ETAG_MAX];
    uint64_t sz = 0;
    return db_row(pe, r, key, target, e, &sz, te) && (!te[0] || strcmp(te, cur) == 0);
}

/* Forget rule r's copy of key: the next pass of r copies it again. Best effort. */
static void db_forget(struct policy_engine *pe, const struct policy_rule *r, const char *key)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(pe->db, "DELETE FROM copies WHERE rule = ?1 AND key = ?2", -1, &st,
                           NULL) != SQLITE_OK)
        return;
    sqlite3_bind_text(st, 1, r->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    (void)sqlite3_step(st);
    sqlite3_finalize(st);
}

static int db_record(struct policy_engine *pe, const struct policy_rule *r, const char *key,
                     const char *etag, const char *target, uint64_t size, const char *tetag)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(pe->db,
                           "INSERT OR REPLACE INTO copies (rule, key, etag, target, size, done_ns,"
                           " target_etag) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                           -1, &st, NULL) != SQLITE_OK)
        return -EIO;
    sqlite3_bind_text(st, 1, r->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, etag, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, target, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, (sqlite3_int64)size);
    sqlite3_bind_int64(st, 6, (sqlite3_int64)tier_now_real_ns());
    sqlite3_bind_text(st, 7, tetag, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
    if (rc)
        tier_err_set("cannot journal the copy of %s: %s", key, sqlite3_errmsg(pe->db));
    sqlite3_finalize(st);
    return rc;
}

/* Drop the rows of rules that are no copy rule any more (removed, renamed, another action): no
 * pass asks for them. A rule that comes back copies again (the same bytes onto the same keys).
 * Best effort: a failure leaves the rows. */
static void db_prune_rules(struct policy_engine *pe)
{
    sqlite3_stmt *st = NULL, *del = NULL;
    if (sqlite3_prepare_v2(pe->db, "SELECT DISTINCT rule FROM copies", -1, &st, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(pe->db, "DELETE FROM copies WHERE rule = ?1", -1, &del, NULL) !=
            SQLITE_OK) {
        sqlite3_finalize(st);
        return;
    }
    char *gone[16];
    size_t n = 0;
    while (n < sizeof(gone) / sizeof(gone[0]) && sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        bool live = false;
        for (size_t i = 0; name && !live && i < pe->rules.n; i++)
            live = pe->rules.v[i].action == POLICY_COPY && strcmp(pe->rules.v[i].name, name) == 0;
        if (name && !live && (gone[n] = strdup(name)) != NULL)
            n++;
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_text(del, 1, gone[i], -1, SQLITE_TRANSIENT);
        if (sqlite3_step(del) == SQLITE_DONE && sqlite3_changes(pe->db) > 0)
            log_info("policy: copy journal: %d row(s) of rule %s dropped (no such copy rule now)",
                     sqlite3_changes(pe->db), gone[i]);
        sqlite3_reset(del);
        free(gone[i]);
    }
    sqlite3_finalize(del);
}

/* ---- files of a namespace ---------------------------------------------------------------- */

/* A file's entry came from the burst buffer (engine-private flag beside policy.h's). */
#define PE_F_WB 0x100u

struct pe_files {
    struct policy_file *v; /* v[i].key and v[i].etag are owned (pf_free) */
    size_t n, cap;
};

static void pf_free(const char *s)
{
    free((void *)(uintptr_t)s);
}

static void files_free(struct pe_files *f)
{
    for (size_t i = 0; i < f->n; i++) {
        pf_free(f->v[i].key);
        pf_free(f->v[i].etag);
    }
    free(f->v);
    memset(f, 0, sizeof(*f));
}

static int files_add(struct pe_files *f, const char *key, uint64_t size, int64_t mtime,
                     unsigned flags, const char *etag)
{
    struct policy_file *nv = tier_vec_grow(f->v, &f->cap, f->n + 1, sizeof(*nv), 256);
    if (!nv)
        return -ENOMEM;
    f->v = nv;
    char *k = strdup(key), *e = etag && *etag ? strdup(etag) : NULL;
    if (!k || (etag && *etag && !e)) {
        free(k);
        free(e);
        return -ENOMEM;
    }
    f->v[f->n++] = (struct policy_file){
        .key = k, .size = size, .mtime_ns = mtime, .flags = flags, .etag = e, .tenant = -1};
    return 0;
}

static int file_key_cmp(const void *a, const void *b)
{
    const struct policy_file *x = a, *y = b;
    return strcmp(x->key, y->key);
}

/* Sort by key and merge the entries of one key (the listing's and the burst buffer's
 * generations): flags or'ed; size, mtime and ETag all from one entry: the burst buffer's newest
 * (its seal time ranks keep_last the same in a full pass as in a local one), else the listing's.
 * When the listing and the buffer name different versions of the key (it changed between the
 * two reads, or outside tierd), the file is marked changed: no copy or expire takes it. */
static void files_merge(struct pe_files *f)
{
    if (f->n == 0)
        return;
    qsort(f->v, f->n, sizeof(*f->v), file_key_cmp);
    size_t o = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (o > 0 && strcmp(f->v[o - 1].key, f->v[i].key) == 0) {
            struct policy_file *a = &f->v[o - 1], *b = &f->v[i];
            bool differ = a->etag && b->etag && strcmp(a->etag, b->etag) != 0;
            unsigned fl = a->flags | b->flags;
            bool b_wins =
                (b->flags & PE_F_WB) && (!(a->flags & PE_F_WB) || b->mtime_ns >= a->mtime_ns);
            if (b_wins) {
                const char *t = a->etag;
                a->etag = b->etag;
                b->etag = t;
                a->size = b->size;
                a->mtime_ns = b->mtime_ns;
            }
            a->flags = fl | (differ ? POLICY_F_CHANGED : 0);
            pf_free(b->key);
            pf_free(b->etag);
            continue;
        }
        f->v[o++] = f->v[i];
    }
    f->n = o;
}

struct list_ctx {
    struct pe_files *f;
    size_t nspl; /* the namespace's prefix length: keys become relative to its root */
};

static int list_add(void *ud, const struct backend_entry *e)
{
    struct list_ctx *l = ud;
    return files_add(l->f, e->name + l->nspl, e->size_bytes, e->mtime_ns, POLICY_F_DURABLE,
                     e->etag);
}

static int list_backend(struct tierd_ns *ns, const char *prefix, struct pe_files *f)
{
    struct list_ctx l = {.f = f, .nspl = strlen(ns->conf->prefix ? ns->conf->prefix : "")};
    return dataset_walk_objects(ns, &pe_io, prefix, false, list_add, &l);
}

static int list_wb(const struct policy_engine_ctx *cx, struct tierd_ns *ns, const char *prefix,
                   struct pe_files *f)
{
    struct wb_file_info *v = NULL;
    size_t n = 0;
    int rc = wb_list(cx->wb, ns->be->name, prefix, &v, &n);
    if (rc)
        return rc;
    size_t nspl = strlen(ns->conf->prefix ? ns->conf->prefix : "");
    int64_t now = (int64_t)tier_now_real_ns();
    for (size_t i = 0; i < n && rc == 0; i++) {
        unsigned fl;
        switch (v[i].state) {
        case WB_UPLOADED:
            fl = POLICY_F_DURABLE | POLICY_F_LOCAL;
            break;
        case WB_EVICTABLE:
            fl = POLICY_F_DURABLE;
            break;
        default: /* OPEN, SEALED, UPLOADING; CANCELLED (being deleted); FAILED (kept) */
            fl = POLICY_F_PENDING | POLICY_F_LOCAL;
            break;
        }
        if (strlen(v[i].key) < nspl)
            continue;
        rc = files_add(f, v[i].key + nspl, v[i].size_bytes, v[i].sealed_ns ? v[i].sealed_ns : now,
                       fl | PE_F_WB, v[i].etag);
    }
    wb_list_free(v, n);
    return rc;
}

/* The longest prefix every rule of namespace n starts with (all of them, not only those that
 * run: db_prune_absent takes the listing as whole for every copy rule of n). */
static size_t common_prefix(const struct policy_rules *rs, size_t n, const char **out)
{
    const char *p = NULL;
    size_t len = 0;
    for (size_t i = 0; i < rs->n; i++) {
        if (rs->v[i].ns != n)
            continue;
        if (!p) {
            p = rs->v[i].prefix;
            len = strlen(p);
            continue;
        }
        size_t k = 0;
        while (k < len && rs->v[i].prefix[k] == p[k])
            k++;
        len = k;
    }
    *out = p ? p : "";
    return len;
}

/* ---- recording ----------------------------------------------------------------------------- */

static void record(struct policy_engine *pe, struct pe_pass *ps, size_t ri, const char *path,
                   int result, uint64_t bytes, const char *detail)
{
    const struct policy_rule *r = &pe->rules.v[ri];
    /* result: 1 done, 0 planned (dry run), -EAGAIN deferred, < 0 failed */
    const char *what = result == 1         ? "done"
                       : result == 0       ? "planned"
                       : result == -EAGAIN ? "deferred"
                                           : "failed";
    if (result != 0 && !ps->dry_run) {
        pthread_mutex_lock(&pe->lock);
        struct pe_count *c = &pe->counts[ri];
        if (result == 1) {
            c->done++;
            c->bytes += bytes;
        } else if (result == -EAGAIN) {
            c->deferred++;
        } else {
            c->failed++;
        }
        if (result != -EAGAIN) {
            struct pe_event *e = &pe->recent[pe->recent_head];
            pe->recent_head = (pe->recent_head + 1) % PE_RECENT;
            if (pe->nrecent < PE_RECENT)
                pe->nrecent++;
            e->at_ns = (int64_t)tier_now_real_ns();
            e->rule = ri;
            e->failed = result < 0;
            e->skipped = false;
            e->bytes = bytes;
            tier_strlcpy(e->path, path, sizeof(e->path));
            tier_strlcpy(e->detail, detail ? detail : "", sizeof(e->detail));
        }
        pthread_mutex_unlock(&pe->lock);
    }
    if (ps->dry_run)
        ; /* a plan changes nothing: no counter, no log */
    else if (result == 1)
        log_info("policy %s: %s %s%s%s", r->name, policy_action_name(r->action), path,
                 detail && *detail ? ": " : "", detail ? detail : "");
    else if (result < 0 && result != -EAGAIN)
        log_warn("policy %s: %s %s failed: %s (retried at the next pass)", r->name,
                 policy_action_name(r->action), path, detail ? detail : strerror(-result));
    if (result == 1)
        ps->done++;
    else if (result == -EAGAIN)
        ps->deferred++;
    else if (result < 0)
        ps->failed++;
    if (result == -EAGAIN && !ps->dry_run)
        return; /* counted, not listed: a pending upload is deferred at every pass */
    if (ps->listed >= PE_RESULT_MAX) {
        ps->truncated++;
        return;
    }
    json_t *a = json_pack("{s:s, s:s, s:s, s:s, s:I}", "policy", r->name, "action",
                          policy_action_name(r->action), "path", path, "result", what, "bytes",
                          (json_int_t)bytes);
    if (a && detail && *detail)
        json_object_set_new(a, "detail", json_string(detail));
    if (a && json_array_append_new(ps->actions, a) == 0)
        ps->listed++;
}

/* Has the engine logged the skip of (rule, path, reason) already? If not, remember it (under
 * pe->lock). True also when the table is full (then said once). */
static bool skip_seen(struct policy_engine *pe, const char *rule, const char *path, int reason)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const char *p = rule; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ 0xffu) * 1099511628211ULL;
    for (const char *p = path; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ (uint64_t)(unsigned)-reason) * 1099511628211ULL;
    if (!h)
        h = 1;
    size_t i = (size_t)(h % PE_SKIP_LOGGED);
    while (pe->skip_logged[i]) {
        if (pe->skip_logged[i] == h)
            return true;
        i = (i + 1) % PE_SKIP_LOGGED;
    }
    if (pe->nskip_logged >= PE_SKIP_LOGGED * 3 / 4) {
        if (!pe->skip_log_full)
            log_warn("policy: more skipped expires than tierd remembers as logged (%d): further "
                     "ones are counted (tierctl policy status) but not logged",
                     PE_SKIP_LOGGED * 3 / 4);
        pe->skip_log_full = true;
        return true;
    }
    pe->skip_logged[i] = h;
    pe->nskip_logged++;
    return false;
}

/* Rule ri leaves path alone (why): an expire keeps the source because a copy could not be
 * verified, a copy does not write over a target that is not its own. Counted (skipped), listed,
 * in the recent actions, and logged once per (rule, file, reason). */
static void record_skip(struct policy_engine *pe, struct pe_pass *ps, size_t ri, const char *path,
                        int reason, const char *why)
{
    const struct policy_rule *r = &pe->rules.v[ri];
    ps->skipped++;
    if (!ps->dry_run) {
        pthread_mutex_lock(&pe->lock);
        pe->counts[ri].skipped++;
        struct pe_event *e = &pe->recent[pe->recent_head];
        pe->recent_head = (pe->recent_head + 1) % PE_RECENT;
        if (pe->nrecent < PE_RECENT)
            pe->nrecent++;
        *e = (struct pe_event){.at_ns = (int64_t)tier_now_real_ns(), .rule = ri, .skipped = true};
        tier_strlcpy(e->path, path, sizeof(e->path));
        tier_strlcpy(e->detail, why, sizeof(e->detail));
        bool seen = skip_seen(pe, r->name, path, reason);
        pthread_mutex_unlock(&pe->lock);
        if (!seen)
            log_warn("policy %s: %s %s skipped%s: %s (logged once for this file and reason; "
                     "counted as skipped in tierctl policy status)",
                     r->name, policy_action_name(r->action), path,
                     r->action == POLICY_EXPIRE ? ", the source is kept" : "", why);
    }
    if (ps->listed >= PE_RESULT_MAX) {
        ps->truncated++;
        return;
    }
    json_t *a = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "policy", r->name, "action",
                          policy_action_name(r->action), "path", path, "result", "skipped", "bytes",
                          (json_int_t)0, "detail", why);
    if (a && json_array_append_new(ps->actions, a) == 0)
        ps->listed++;
}

/* Is copy rule c's copy at dkey (target "BACKEND:KEY") on its backend now as journalled: size
 * bytes and ETag tetag? 0; -ENOENT (gone), -ESTALE (another object), or the stat's error, with
 * why filled. */
static int verify_copy(const struct policy_engine_ctx *cx, const struct policy_rule *c,
                       const char *dkey, const char *target, uint64_t size, const char *tetag,
                       char *why, size_t wsz)
{
    struct backend_stat st;
    tier_err_clear();
    int rc = backend_stat(cx->backends[c->copy_backend], &pe_io, dkey, &st);
    if (rc == -ENOENT) {
        snprintf(why, wsz,
                 "its copy %.300s (policy %s) is gone; that rule's next pass copies the file "
                 "again",
                 target, c->name);
        return rc;
    }
    if (rc) {
        snprintf(why, wsz, "cannot check its copy %.300s (policy %s): %.200s", target, c->name,
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        return rc;
    }
    if (st.is_dir || st.size_bytes != size || strcmp(st.etag, tetag) != 0) {
        snprintf(why, wsz,
                 "its copy %.300s (policy %s) is not the one made: %llu bytes, ETag %.80s; the "
                 "copy journal has %llu bytes, ETag %.80s (move that file away, and the copy is "
                 "made again)",
                 target, c->name, (unsigned long long)st.size_bytes, st.etag,
                 (unsigned long long)size, tetag);
        return -ESTALE;
    }
    return 0;
}

/* ---- actions --------------------------------------------------------------------------------- */

/* The fill of the part of the hot tier a rule demotes out of (watermark): RAM, the disk level,
 * or both. */
static unsigned hot_fill_pct(const struct policy_engine_ctx *cx, enum policy_level l)
{
    if (!cx->cache)
        return 0;
    struct cache_stats st;
    memset(&st, 0, sizeof(st));
    cache_stats_get(cx->cache, &st);
    uint64_t used = (l != POLICY_LEVEL_DISK ? st.ram.bytes_used : 0) +
                    (l != POLICY_LEVEL_RAM ? st.disk.bytes_used : 0);
    uint64_t cap = (l != POLICY_LEVEL_DISK ? st.ram.bytes_budget : 0) +
                   (l != POLICY_LEVEL_RAM ? st.disk.bytes_budget : 0);
    return cap ? (unsigned)(used * 100 / cap) : 0;
}

/* The bytes of obj a demote out of level l would take from the cache. */
static uint64_t demotable_bytes(struct cache *c, const struct cache_obj *obj, enum policy_level l)
{
    if (l == POLICY_LEVEL_ALL)
        return cache_cached_bytes(c, obj);
    return cache_level_bytes(c, obj, l == POLICY_LEVEL_RAM ? CACHE_LEVEL_RAM : CACHE_LEVEL_DISK);
}

/* Read len bytes at off of key, pinned to etag, into buf (all of them or an error). The object
 * must have size bytes (the listing's): a source of another size is -ESTALE. */
static int read_full(struct backend *be, const char *key, uint64_t off, void *buf, size_t len,
                     const char *etag, uint64_t size)
{
    size_t got = 0;
    if (len == 0) {
        struct backend_stat st;
        int rc = backend_stat(be, &pe_io, key, &st);
        if (rc == 0 && (st.size_bytes != size || strcmp(st.etag, etag) != 0)) {
            tier_err_set("%s changed since it was listed", key);
            rc = -ESTALE;
        }
        return rc;
    }
    while (got < len) {
        struct backend_stat st;
        ssize_t n =
            backend_read(be, &pe_io, key, off + got, (char *)buf + got, len - got, etag, &st);
        if (n >= 0 && st.size_bytes != size) {
            tier_err_set("%s has %llu bytes, not the %llu listed: it changed", key,
                         (unsigned long long)st.size_bytes, (unsigned long long)size);
            return -ESTALE;
        }
        if (n < 0)
            return (int)n;
        if (n == 0) {
            tier_err_set("%s ended early (%zu of %zu bytes): it changed during the copy", key, got,
                         len);
            return -EIO;
        }
        got += (size_t)n;
    }
    return 0;
}

/* Abort the multipart uploads of dst:dkey that a killed copy left behind (nothing else writes
 * under a copy target); best effort: one that stays is aborted at the key's next copy. */
static void abort_leftover_uploads(struct backend *dst, const char *dkey)
{
    struct backend_mpu *old = NULL;
    size_t nold = 0;
    if (backend_mpu_list(dst, &pe_io, dkey, &old, &nold) != 0)
        return;
    for (size_t i = 0; i < nold; i++)
        (void)backend_mpu_abort(dst, &pe_io, dkey, old[i].upload_id);
    backend_mpu_list_free(old, nold);
}

/* Copy src:key (size bytes, version etag) to dst:dkey, whole or not at all, then check the
 * target's size; tetag (BACKEND_ETAG_MAX) gets the target's ETag as its stat gives it. */
static int copy_object(const struct policy_engine_ctx *cx, struct backend *src, const char *key,
                       uint64_t size, const char *etag, struct backend *dst, const char *dkey,
                       char *tetag)
{
    uint64_t part = cx->part_size ? cx->part_size : 8ULL << 20;
    int rc = 0;
    if (size <= part) {
        void *buf = malloc(size ? size : 1);
        if (!buf)
            return -ENOMEM;
        rc = read_full(src, key, 0, buf, size, etag, size);
        if (rc == 0)
            rc = backend_put(dst, &pe_io, dkey, buf, size, NULL);
        free(buf);
    } else {
        int maxp = backend_max_parts(dst);
        if (size / part >= (uint64_t)maxp)
            part = (size / (uint64_t)maxp + (1ULL << 20)) & ~((1ULL << 20) - 1);
        size_t nparts = (size_t)((size + part - 1) / part);
        abort_leftover_uploads(dst, dkey);
        char *uid = NULL;
        rc = backend_mpu_create(dst, &pe_io, dkey, &uid);
        if (rc)
            return rc;
        struct backend_part *parts = calloc(nparts, sizeof(*parts));
        void *buf = malloc(part);
        if (!parts || !buf)
            rc = -ENOMEM;
        for (size_t i = 0; i < nparts && rc == 0; i++) {
            uint64_t off = (uint64_t)i * part;
            size_t len = (size_t)(size - off < part ? size - off : part);
            rc = read_full(src, key, off, buf, len, etag, size);
            if (rc == 0) {
                parts[i].number = (int)i + 1;
                rc = backend_mpu_put_part(dst, &pe_io, dkey, uid, (int)i + 1, buf, len,
                                          parts[i].etag);
            }
        }
        if (rc == 0)
            rc = backend_mpu_complete(dst, &pe_io, dkey, uid, parts, nparts, NULL);
        if (rc) {
            int keep = rc;
            char msg[256];
            tier_strlcpy(msg, tier_err_msg(), sizeof(msg));
            (void)backend_mpu_abort(dst, &pe_io, dkey, uid);
            tier_err_set("%s", msg);
            rc = keep;
        }
        free(buf);
        free(parts);
        free(uid);
    }
    if (rc)
        return rc;
    struct backend_stat st;
    rc = backend_stat(dst, &pe_io, dkey, &st);
    if (rc == 0 && st.size_bytes != size) {
        tier_err_set("the copy %s:%s has %llu bytes, the source %llu", dst->name, dkey,
                     (unsigned long long)st.size_bytes, (unsigned long long)size);
        rc = -EIO;
    } else if (rc == 0 && !st.etag[0]) {
        tier_err_set("the copy %s:%s has no ETag to journal", dst->name, dkey);
        rc = -EIO;
    }
    if (rc == 0)
        tier_strlcpy(tetag, st.etag, BACKEND_ETAG_MAX);
    return rc;
}

/* Does dst:dkey (size bytes, ETag tetag: its stat) hold the bytes of src:key (size bytes,
 * version etag)? Both are read part by part, each pinned to its version. 1 yes, 0 no, or an
 * error (-ESTALE: one of them changed). */
static int same_bytes(const struct policy_engine_ctx *cx, struct backend *src, const char *key,
                      const char *etag, uint64_t size, struct backend *dst, const char *dkey,
                      const char *tetag)
{
    uint64_t part = cx->part_size ? cx->part_size : 8ULL << 20;
    size_t blen = (size_t)(size < part ? size : part);
    char *a = malloc(blen ? blen : 1), *b = malloc(blen ? blen : 1);
    int rc = a && b ? 1 : -ENOMEM;
    if (rc == 1 && size == 0) { /* both still there as stat'ed */
        int e = read_full(src, key, 0, a, 0, etag, 0);
        if (e == 0)
            e = read_full(dst, dkey, 0, b, 0, tetag, 0);
        rc = e ? e : 1;
    }
    for (uint64_t off = 0; rc == 1 && off < size; off += blen) {
        size_t len = (size_t)(size - off < blen ? size - off : blen);
        int e = read_full(src, key, off, a, len, etag, size);
        if (e == 0)
            e = read_full(dst, dkey, off, b, len, tetag, size);
        rc = e ? e : memcmp(a, b, len) == 0;
    }
    free(a);
    free(b);
    return rc;
}

/* Is backend key (absolute) at version etag in the dataset version of copy rule c? The version
 * is read once a pass. 1 yes, 0 no, or the error reading it. */
static int dataset_has(struct policy_engine *pe, struct pe_pass *ps, size_t ci, const char *key,
                       const char *etag)
{
    const struct policy_rule *c = &pe->rules.v[ci];
    if (!ps->ds) {
        ps->ds = calloc(pe->rules.n, sizeof(*ps->ds));
        ps->ds_rc = calloc(pe->rules.n, sizeof(*ps->ds_rc));
        if (!ps->ds || !ps->ds_rc) {
            free(ps->ds);
            free(ps->ds_rc);
            ps->ds = NULL;
            ps->ds_rc = NULL;
            return -ENOMEM;
        }
    }
    if (ps->ds_rc[ci] == 0) {
        const char *at = strrchr(c->dataset, '@');
        char *tree = strndup(c->dataset, (size_t)(at - c->dataset));
        int rc = tree ? pe->ctx.ops.manifest(pe->ctx.ops.ud, tree, at + 1, SIZE_MAX, &ps->ds[ci])
                      : -ENOMEM;
        free(tree);
        ps->ds_rc[ci] = rc ? rc : 1;
    }
    if (ps->ds_rc[ci] < 0)
        return ps->ds_rc[ci];
    const struct manifest *m = &ps->ds[ci];
    size_t mpl = strlen(m->prefix), idx = 0;
    return etag && strncmp(key, m->prefix, mpl) == 0 && manifest_find(m, key + mpl, &idx) == 0 &&
           strcmp(m->files[idx].etag, etag) == 0;
}

/* Does copy rule ci take the object at backend key (absolute) of backend be (file f, as a
 * namespace of that backend lists it)? By the object, not the namespace: two namespaces may map
 * onto the same keys, and an expire in one must wait for a copy rule of the other. Its key
 * relative to the copy rule's namespace goes to *rel. 1 yes; 0 no; a dataset version that
 * cannot be read counts as yes (the expire waits, as the copy rule does). */
static int copy_covers(struct policy_engine *pe, struct pe_pass *ps, size_t ci,
                       const struct backend *be, const char *key, const struct policy_file *f,
                       const char **rel)
{
    const struct policy_engine_ctx *cx = &pe->ctx;
    struct policy_rule *c = &pe->rules.v[ci];
    if (c->action != POLICY_COPY || strcmp(cx->ns[c->ns].be->name, be->name) != 0)
        return 0;
    const char *cp = cx->ns[c->ns].conf->prefix ? cx->ns[c->ns].conf->prefix : "";
    size_t cpl = strlen(cp);
    if (strncmp(key, cp, cpl) != 0)
        return 0;
    struct policy_file g = *f;
    g.key = key + cpl;
    *rel = g.key;
    /* f's dataset and tenant marks are those of its own namespace's rules: c's are taken here */
    g.flags &= ~POLICY_F_INSET;
    if (c->dataset) {
        int in = dataset_has(pe, ps, ci, key, f->etag);
        if (in < 0)
            return 1;
        if (in)
            g.flags |= POLICY_F_INSET;
    }
    if (c->tenant) {
        uint32_t id;
        c->tenant_id =
            cx->tenants && tenant_find(cx->tenants, c->tenant, &id) == 0 ? (int64_t)id : -1;
        g.tenant = -1;
        if (pe->access)
            (void)access_last(pe->access, be->name, key, &g.tenant);
    }
    return policy_matches(c, &g);
}

struct stage_batch {
    const char *paths[PE_STAGE_PATHS];
    char *owned[PE_STAGE_PATHS];
    size_t n;
    bool pin;
};

static void batch_fini(struct stage_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->owned[i]);
    b->n = 0;
}

/* One file under one rule's action, as act() hands it to an act_* function: each returns true
 * when act() is to record the outcome (rc, bytes, detail), false when it recorded it already,
 * queued the file, or found nothing to do. */
struct act_ctx {
    struct policy_engine *pe;
    struct pe_pass *ps;
    size_t ri;
    const struct policy_rule *r;
    struct tierd_ns *ns;
    const struct policy_file *f;
    const char *key;  /* the backend key (the namespace's prefix and f->key) */
    const char *path; /* the mount path, for the record */
    int rc;
    uint64_t bytes;
    char detail[600];
};

/* demote: drop the burst buffer's local copy and the cached blocks of the rule's level */
static bool act_demote(struct act_ctx *a)
{
    const struct policy_engine_ctx *cx = &a->pe->ctx;
    const struct policy_rule *r = a->r;
    const struct policy_file *f = a->f;
    struct tierd_ns *ns = a->ns;
    /* the burst buffer's local copy is on the node's disk: level ram leaves it */
    bool local = cx->wb && ns->conf->mode == TIERD_NS_WRITE_BACK && (f->flags & POLICY_F_LOCAL) &&
                 r->level != POLICY_LEVEL_RAM;
    const struct cache_obj obj = {ns->be, a->key, f->etag, f->size, NULL};
    if (a->ps->dry_run) {
        if (local || (!r->local_only && cx->cache && demotable_bytes(cx->cache, &obj, r->level)))
            record(a->pe, a->ps, a->ri, a->path, 0, f->size, NULL);
        return false;
    }
    int w = local ? wb_demote(cx->wb, ns->be->name, a->key) : 0;
    /* cache_evict and cache_demote walk the whole cache: only for an object with blocks in
     * the level */
    bool cached =
        !r->local_only && cx->cache && f->etag && demotable_bytes(cx->cache, &obj, r->level) > 0;
    long blocks =
        !cached ? 0
        : r->level == POLICY_LEVEL_ALL
            ? cache_evict(cx->cache, ns->be->name, a->key)
            : cache_demote(cx->cache, ns->be->name, a->key,
                           r->level == POLICY_LEVEL_RAM ? CACHE_LEVEL_RAM : CACHE_LEVEL_DISK);
    if (w < 0 && w != -EAGAIN) {
        snprintf(a->detail, sizeof(a->detail), "cannot drop the local copy: %s", strerror(-w));
        a->rc = w;
    } else if (w == -EAGAIN && blocks <= 0) {
        a->rc = -EAGAIN;
    } else if (w == 1 || blocks > 0) {
        a->rc = 1;
        a->bytes = w == 1 ? f->size : (uint64_t)blocks * cache_block_size(cx->cache);
        snprintf(a->detail, sizeof(a->detail), "%s%s%s", w == 1 ? "local copy dropped" : "",
                 w == 1 && blocks > 0 ? ", " : "",
                 blocks <= 0                     ? ""
                 : r->level == POLICY_LEVEL_RAM  ? "cached blocks moved from RAM to disk"
                 : r->level == POLICY_LEVEL_DISK ? "cached blocks dropped from disk"
                                                 : "cached blocks dropped");
    } else {
        return false; /* nothing hot */
    }
    return true;
}

/* stage, pin: the file joins the pass's staging batch (recorded when the batch's job starts);
 * a pin is made first */
static bool act_stage_pin(struct act_ctx *a, struct stage_batch *batch)
{
    const struct policy_engine_ctx *cx = &a->pe->ctx;
    const struct policy_rule *r = a->r;
    const struct policy_file *f = a->f;
    const char *be = a->ns->be->name;
    if (!cx->cache)
        return false;
    bool pinned = cache_pin_exists(cx->cache, be, a->key);
    uint64_t have = cache_cached_bytes(
        cx->cache, &(struct cache_obj){a->ns->be, a->key, f->etag, f->size, NULL});
    if (r->action == POLICY_PIN ? pinned : have >= f->size)
        return false; /* hot already (a pin staged it when it was made; pinned blocks stay) */
    if (a->ps->dry_run) {
        record(a->pe, a->ps, a->ri, a->path, 0, f->size - (have < f->size ? have : f->size), NULL);
        return false;
    }
    if (r->action == POLICY_PIN && !pinned) {
        a->rc = cache_pin(cx->cache, be, a->key);
        if (a->rc) {
            snprintf(a->detail, sizeof(a->detail), "cannot pin: %s%s",
                     a->rc == -ENOSPC ? "the pin budget ([cache] pin_size) is full"
                                      : strerror(-a->rc),
                     "");
            return true;
        }
    }
    batch->pin = r->action == POLICY_PIN;
    if (batch->n < PE_STAGE_PATHS && (batch->owned[batch->n] = strdup(a->path))) {
        batch->paths[batch->n] = batch->owned[batch->n];
        batch->n++;
    }
    return false; /* recorded when the batch's job starts */
}

/* unpin: the pin and its pinmeta record go */
static bool act_unpin(struct act_ctx *a)
{
    const struct policy_engine_ctx *cx = &a->pe->ctx;
    const char *be = a->ns->be->name;
    if (!cx->cache || !cache_pin_exists(cx->cache, be, a->key))
        return false;
    if (a->ps->dry_run) {
        record(a->pe, a->ps, a->ri, a->path, 0, 0, NULL);
        return false;
    }
    int rc = cache_unpin(cx->cache, be, a->key);
    if (rc == 0 && cx->pinned)
        pinmeta_forget(cx->pinned, be, a->key);
    a->rc = rc == 0 ? 1 : rc;
    return true;
}

/* copy, when the target key holds an object the journal does not know as this rule's copy
 * (t: backend_stat's result on it, tst its stat): never over one that is not (another rule's
 * archived copy whose source is gone, an older copy of a key expired since, someone else's
 * file): it may be the only copy left. One with the source's very bytes is this copy, its
 * journal write lost to a crash: journalled as it is, and the key's leftover multipart uploads
 * aborted (a kill between the complete and the upload's cleanup). true when the file is done
 * (recorded);
 * else *t is what to go on with. */
static bool copy_target_held(struct act_ctx *a, struct backend *dst, const char *dkey,
                             const char *target, const struct backend_stat *tst, int *t)
{
    const struct policy_engine_ctx *cx = &a->pe->ctx;
    const struct policy_file *f = a->f;
    int same = !tst->is_dir && tst->size_bytes == f->size && tst->etag[0]
                   ? same_bytes(cx, a->ns->be, a->key, f->etag, f->size, dst, dkey, tst->etag)
                   : 0;
    if (same == 0) {
        char why[700];
        snprintf(why, sizeof(why),
                 "the target %.400s exists (%llu bytes, ETag %.80s) and is not this "
                 "rule's copy: move it away or change the target",
                 target, (unsigned long long)tst->size_bytes, tst->etag);
        record_skip(a->pe, a->ps, a->ri, a->path, -EEXIST, why);
        return true;
    }
    int j = same == 1 && !a->ps->dry_run
                ? db_record(a->pe, a->r, a->key, f->etag, target, f->size, tst->etag)
                : 0;
    if (same == 1 && j == 0) {
        /* a copy killed after its multipart complete leaves the upload's remains behind */
        if (!a->ps->dry_run)
            abort_leftover_uploads(dst, dkey);
        snprintf(a->detail, sizeof(a->detail),
                 "to %.500s: the target already held these bytes, journalled as the copy", target);
        record(a->pe, a->ps, a->ri, a->path, a->ps->dry_run ? 0 : 1, 0, a->detail);
        return true;
    }
    *t = same < 0 ? same : j;
    return false;
}

/* copy: the object to the rule's target, journalled (db_record) */
static bool act_copy(struct act_ctx *a)
{
    const struct policy_engine_ctx *cx = &a->pe->ctx;
    const struct policy_rule *r = a->r;
    const struct policy_file *f = a->f;
    struct backend *dst = cx->backends[r->copy_backend];
    char dkey[BACKEND_KEY_MAX + 1], target[BACKEND_KEY_MAX + 80];
    if (!f->etag || copy_target(cx, r, f->key, dkey, sizeof(dkey), target, sizeof(target)) != 0) {
        record(a->pe, a->ps, a->ri, a->path, -EINVAL, 0,
               f->etag ? "the target key would be too long" : "the backend gave no ETag");
        return false;
    }
    if (db_copied(a->pe, r, a->key, f->etag, target))
        return false;
    struct backend_stat tst;
    tier_err_clear();
    int t = backend_stat(dst, &pe_io, dkey, &tst);
    if (t == 0 && !db_target_ours(a->pe, r, a->key, target, tst.etag) &&
        copy_target_held(a, dst, dkey, target, &tst, &t))
        return false;
    if (t && t != -ENOENT) {
        snprintf(a->detail, sizeof(a->detail), "to %.300s: %.280s", target,
                 *tier_err_msg() ? tier_err_msg() : strerror(-t));
        record(a->pe, a->ps, a->ri, a->path, t == -ESTALE ? -EAGAIN : t, 0, a->detail);
        return false;
    }
    snprintf(a->detail, sizeof(a->detail), "to %.500s", target);
    if (a->ps->dry_run) {
        record(a->pe, a->ps, a->ri, a->path, 0, f->size, a->detail);
        return false;
    }
    tier_err_clear();
    /* one line before the bytes move (the crash test aims its kills at it) */
    log_info("policy %s: copy %s to %s started (%llu bytes)", r->name, a->path, target,
             (unsigned long long)f->size);
    char tetag[BACKEND_ETAG_MAX];
    int rc = copy_object(cx, a->ns->be, a->key, f->size, f->etag, dst, dkey, tetag);
    if (rc == 0)
        rc = db_record(a->pe, r, a->key, f->etag, target, f->size, tetag);
    if (rc) {
        snprintf(a->detail, sizeof(a->detail), "to %.300s: %.280s", target,
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        if (rc == -ESTALE)
            rc = -EAGAIN; /* it changed under the copy: the next pass takes the new one */
    } else {
        rc = 1;
        a->bytes = f->size;
    }
    a->rc = rc;
    return true;
}

/* expire, first: has every copy rule that takes the file copied this version, and is each copy
 * on its target now as it was made (a stat: the size and ETag the journal has)? A copy that is
 * gone is forgotten, so its rule makes it again. false when the file must wait (recorded). */
static bool copies_verified(struct act_ctx *a)
{
    struct policy_engine *pe = a->pe;
    const struct policy_file *f = a->f;
    for (size_t i = 0; i < pe->rules.n; i++) {
        const struct policy_rule *c = &pe->rules.v[i];
        char dkey[BACKEND_KEY_MAX + 1], target[BACKEND_KEY_MAX + 80];
        char tetag[BACKEND_ETAG_MAX], why[1024];
        uint64_t csize = 0;
        const char *crel = NULL;
        if (!copy_covers(pe, a->ps, i, a->ns->be, a->key, f, &crel))
            continue;
        if (!f->etag ||
            copy_target(&pe->ctx, c, crel, dkey, sizeof(dkey), target, sizeof(target)) != 0 ||
            !db_copy_row(pe, c, a->key, f->etag, target, &csize, tetag)) {
            record(pe, a->ps, a->ri, a->path, -EAGAIN, 0,
                   a->ps->dry_run ? "waits for its copy" : NULL);
            return false;
        }
        int v = verify_copy(&pe->ctx, c, dkey, target, csize, tetag, why, sizeof(why));
        if (v == -ENOENT && !a->ps->dry_run)
            db_forget(pe, c, a->key);
        if (v) {
            record_skip(pe, a->ps, a->ri, a->path, v, why);
            return false;
        }
    }
    return true;
}

/* expire: the object is deleted from the backend, once its copies are verified */
static bool act_expire(struct act_ctx *a)
{
    const struct policy_engine_ctx *cx = &a->pe->ctx;
    const struct policy_file *f = a->f;
    struct tierd_ns *ns = a->ns;
    if (!copies_verified(a))
        return false;
    if (!f->etag) {
        record(a->pe, a->ps, a->ri, a->path, -EINVAL, 0, "the backend gave no ETag");
        return false;
    }
    if (a->ps->dry_run) {
        record(a->pe, a->ps, a->ri, a->path, 0, f->size, NULL);
        return false;
    }
    /* Only the version the pass saw, and only if no generation is being written: checked
     * again right before the delete (a pass may take minutes). */
    tier_err_clear();
    int rc = -ENOENT;
    if (cx->wb && ns->conf->mode == TIERD_NS_WRITE_BACK)
        rc = wb_unlink_if(cx->wb, ns->be->name, a->key, f->etag);
    if (rc == -ENOENT) {
        struct backend_stat st;
        rc = backend_stat(ns->be, &pe_io, a->key, &st);
        if (rc == 0 && strcmp(st.etag, f->etag) != 0)
            rc = -EAGAIN; /* overwritten since the listing: not the version seen */
        else if (rc == 0)
            rc = backend_del(ns->be, &pe_io, a->key);
    }
    if (rc == 0 || rc == -ENOENT) {
        if (cx->cache)
            (void)cache_evict(cx->cache, ns->be->name, a->key);
        rc = 1;
        a->bytes = f->size;
    } else if (rc != -EAGAIN) {
        snprintf(a->detail, sizeof(a->detail), "%s",
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    }
    a->rc = rc;
    return true;
}

/* The action of rule ri on file f of namespace nsi: one act_* per action. */
static void act(struct policy_engine *pe, struct pe_pass *ps, size_t ri, size_t nsi,
                const struct policy_file *f, struct stage_batch *batch)
{
    struct tierd_ns *ns = &pe->ctx.ns[nsi];
    const char *nsp = ns->conf->prefix ? ns->conf->prefix : "";
    char key[BACKEND_KEY_MAX + 1], path[1400];
    if (snprintf(key, sizeof(key), "%s%s", nsp, f->key) >= (int)sizeof(key))
        return;
    snprintf(path, sizeof(path), "%s/%s", ns->conf->path, f->key);
    struct act_ctx a = {.pe = pe,
                        .ps = ps,
                        .ri = ri,
                        .r = &pe->rules.v[ri],
                        .ns = ns,
                        .f = f,
                        .key = key,
                        .path = path};
    bool done;
    switch (a.r->action) {
    case POLICY_DEMOTE:
        done = act_demote(&a);
        break;
    case POLICY_STAGE:
    case POLICY_PIN:
        done = act_stage_pin(&a, batch);
        break;
    case POLICY_UNPIN:
        done = act_unpin(&a);
        break;
    case POLICY_COPY:
        done = act_copy(&a);
        break;
    case POLICY_EXPIRE:
        done = act_expire(&a);
        break;
    default:
        return;
    }
    if (done)
        record(pe, ps, ri, path, a.rc, a.bytes, a.detail);
}

static void start_batch(struct policy_engine *pe, struct pe_pass *ps, size_t ri,
                        struct stage_batch *b)
{
    if (b->n == 0)
        return;
    const struct policy_engine_ctx *cx = &pe->ctx;
    uint64_t job = 0;
    int rc = cx->stages ? stage_start(cx->stages, b->paths, b->n, b->pin, &job) : -ENOTSUP;
    char detail[200];
    if (rc == 0)
        snprintf(detail, sizeof(detail), "staging job %llu", (unsigned long long)job);
    else
        snprintf(detail, sizeof(detail), "cannot start staging: %s",
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc));
    for (size_t i = 0; i < b->n; i++)
        record(pe, ps, ri, b->paths[i], rc == 0 ? 1 : rc, 0, detail);
    batch_fini(b);
}

/* ---- a pass ---------------------------------------------------------------------------------- */

static int file_find_cmp(const void *k, const void *e)
{
    return strcmp(k, ((const struct policy_file *)e)->key);
}

/* Drop copy rule r's rows whose source key is in none of files (a whole listing of r's
 * namespace, whose keys are relative to its prefix nsp, sorted and unique): the file was deleted
 * or expired. A new object under the key has another ETag and is copied again, so a dropped row
 * is never missed. One transaction; best effort. */
static void db_prune_absent(struct policy_engine *pe, const struct policy_rule *r, const char *nsp,
                            const struct pe_files *files)
{
    sqlite3_stmt *st = NULL, *del = NULL;
    if (sqlite3_prepare_v2(pe->db, "SELECT key FROM copies WHERE rule = ?1", -1, &st, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(pe->db, "DELETE FROM copies WHERE rule = ?1 AND key = ?2", -1, &del,
                           NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return;
    }
    sqlite3_bind_text(st, 1, r->name, -1, SQLITE_STATIC);
    char **gone = NULL;
    size_t n = 0, cap = 0, pl = strlen(nsp);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(st, 0);
        if (!key)
            continue;
        if (strncmp(key, nsp, pl) == 0 &&
            bsearch(key + pl, files->v, files->n, sizeof(*files->v), file_find_cmp))
            continue; /* still there */
        char **ng = tier_vec_grow(gone, &cap, n + 1, sizeof(*ng), 64);
        if (!ng)
            break;
        gone = ng;
        if ((gone[n] = strdup(key)) != NULL)
            n++;
    }
    sqlite3_finalize(st);
    int dropped = 0;
    if (n > 0 && sqlite3_exec(pe->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK) {
        bool ok = true;
        for (size_t i = 0; ok && i < n; i++) {
            sqlite3_bind_text(del, 1, r->name, -1, SQLITE_STATIC);
            sqlite3_bind_text(del, 2, gone[i], -1, SQLITE_TRANSIENT);
            ok = sqlite3_step(del) == SQLITE_DONE;
            if (ok)
                dropped += sqlite3_changes(pe->db);
            sqlite3_reset(del);
        }
        if (!ok || sqlite3_exec(pe->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
            if (!sqlite3_get_autocommit(pe->db)) /* SQLite may have rolled back already */
                (void)sqlite3_exec(pe->db, "ROLLBACK", NULL, NULL, NULL);
            dropped = 0;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(gone[i]);
    free(gone);
    sqlite3_finalize(del);
    if (dropped > 0)
        log_info("policy %s: copy journal: %d row(s) of files no longer there dropped", r->name,
                 dropped);
}

/* Mark (POLICY_F_INSET) the files of r's dataset version that the backend still holds as
 * committed (same ETag), clear the mark on the others. 0, or the error reading the version
 * (recorded in last_error and logged). */
static int mark_dataset(struct policy_engine *pe, const struct policy_rule *r, struct tierd_ns *ns,
                        struct pe_files *files)
{
    for (size_t i = 0; i < files->n; i++)
        files->v[i].flags &= ~POLICY_F_INSET;
    const char *at = strrchr(r->dataset, '@');
    char *tree = strndup(r->dataset, (size_t)(at - r->dataset));
    if (!tree)
        return -ENOMEM;
    struct manifest m;
    memset(&m, 0, sizeof(m));
    tier_err_clear();
    int rc = pe->ctx.ops.manifest(pe->ctx.ops.ud, tree, at + 1, SIZE_MAX, &m);
    free(tree);
    if (rc) {
        pthread_mutex_lock(&pe->lock);
        snprintf(pe->last_error, sizeof(pe->last_error), "policy %s: dataset %s: %s", r->name,
                 r->dataset, *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        pthread_mutex_unlock(&pe->lock);
        log_warn("policy %s: cannot read dataset version %s (the rule waits): %s", r->name,
                 r->dataset, *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        return rc;
    }
    /* the manifest's keys are under its prefix; the files' are relative to the namespace */
    const char *nsp = ns->conf->prefix ? ns->conf->prefix : "";
    size_t npl = strlen(nsp), mpl = strlen(m.prefix);
    const char *rel = mpl >= npl ? m.prefix + npl : "";
    char k[BACKEND_KEY_MAX + 1];
    for (size_t i = 0; i < m.n; i++) {
        if (snprintf(k, sizeof(k), "%s%s", rel, m.files[i].key) >= (int)sizeof(k))
            continue;
        struct policy_file *f =
            files->n ? bsearch(k, files->v, files->n, sizeof(*files->v), file_find_cmp) : NULL;
        if (f && f->etag && strcmp(f->etag, m.files[i].etag) == 0)
            f->flags |= POLICY_F_INSET;
    }
    manifest_fini(&m);
    return 0;
}

static bool rule_runs(const struct policy_engine *pe, const struct pe_pass *ps, size_t ri)
{
    const struct policy_rule *r = &pe->rules.v[ri];
    if (ps->only && strcmp(ps->only, r->name) != 0)
        return false;
    if (ps->full)
        return true;
    return r->action == POLICY_DEMOTE && !r->dataset &&
           /* a manifest read: full passes only */ pe->ctx.ns[r->ns].conf->mode ==
               TIERD_NS_WRITE_BACK;
}

static int run_pass_rules(struct policy_engine *pe, struct pe_pass *ps);

static int run_pass(struct policy_engine *pe, struct pe_pass *ps)
{
    int rc = run_pass_rules(pe, ps);
    for (size_t i = 0; ps->ds && i < pe->rules.n; i++)
        if (ps->ds_rc[i] == 1)
            manifest_fini(&ps->ds[i]);
    free(ps->ds);
    free(ps->ds_rc);
    ps->ds = NULL;
    ps->ds_rc = NULL;
    return rc;
}

/* The files of namespace n for a pass: its listing under the rules' common prefix (need_list),
 * and the burst buffer's, merged by key. 0; 1 when they cannot be listed (logged, kept as
 * last_error, and in *first_rc if it is the pass's first error: the namespace's rules wait);
 * -ENOMEM. */
static int gather_files(struct policy_engine *pe, size_t n, bool need_list, struct pe_files *files,
                        int *first_rc)
{
    const struct policy_engine_ctx *cx = &pe->ctx;
    struct tierd_ns *ns = &cx->ns[n];
    const char *cp;
    size_t cpl = common_prefix(&pe->rules, n, &cp);
    char *prefix = NULL;
    if (asprintf(&prefix, "%s%.*s", ns->conf->prefix ? ns->conf->prefix : "", (int)cpl, cp) < 0)
        return -ENOMEM;
    tier_err_clear();
    int rc = need_list ? list_backend(ns, prefix, files) : 0;
    if (rc == 0 && cx->wb && ns->conf->mode == TIERD_NS_WRITE_BACK)
        rc = list_wb(cx, ns, prefix, files);
    free(prefix);
    if (rc) {
        pthread_mutex_lock(&pe->lock);
        snprintf(pe->last_error, sizeof(pe->last_error), "cannot list %s: %s", ns->conf->path,
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        pthread_mutex_unlock(&pe->lock);
        log_warn("policy: cannot list %s (its rules wait for the next pass): %s", ns->conf->path,
                 *tier_err_msg() ? tier_err_msg() : strerror(-rc));
        files_free(files);
        if (!*first_rc)
            *first_rc = rc;
        return 1;
    }
    files_merge(files);
    return 0;
}

/* The tenant ids of namespace n's tenant rules (tenants come and go: slurm-<job>), and, when a
 * rule of it has idle or tenant, each file's last use and its tenant (access.h). */
static void note_uses(struct policy_engine *pe, size_t n, struct pe_files *files)
{
    const struct policy_engine_ctx *cx = &pe->ctx;
    struct tierd_ns *ns = &cx->ns[n];
    bool idle = false;
    for (size_t i = 0; i < pe->rules.n; i++) {
        struct policy_rule *r = &pe->rules.v[i];
        if (r->ns != n)
            continue;
        idle = idle || r->idle_ms || r->tenant;
        uint32_t id;
        /* tenants come and go (slurm-<job>): the name's id now, or none */
        if (r->tenant)
            r->tenant_id =
                cx->tenants && tenant_find(cx->tenants, r->tenant, &id) == 0 ? (int64_t)id : -1;
    }
    for (size_t i = 0; idle && pe->access && i < files->n; i++) {
        char k[BACKEND_KEY_MAX + 1];
        snprintf(k, sizeof(k), "%s%s", ns->conf->prefix ? ns->conf->prefix : "", files->v[i].key);
        int64_t at = access_last(pe->access, ns->be->name, k, &files->v[i].tenant);
        files->v[i].atime_ns = at > pe->start_ns ? at : pe->start_ns;
    }
}

/* Rule i over files (of its namespace n): select, then act on each selected file (stopping
 * early when the engine stops or the hot tier is below the rule's watermark again), then its
 * staging job. sel: files->n entries. false when out of memory. */
static bool run_rule(struct policy_engine *pe, struct pe_pass *ps, size_t i, size_t n,
                     struct pe_files *files, size_t *sel)
{
    const struct policy_rule *r = &pe->rules.v[i];
    if (r->dataset && mark_dataset(pe, r, &pe->ctx.ns[n], files) != 0)
        return true; /* the version cannot be read: the rule waits (last_error says why) */
    int64_t now = (int64_t)tier_now_real_ns();
    size_t k = policy_select(r, files->v, files->n, now, hot_fill_pct(&pe->ctx, r->level), sel);
    struct stage_batch *batch = calloc(1, sizeof(*batch));
    if (!batch)
        return false;
    for (size_t j = 0; j < k; j++) {
        pthread_mutex_lock(&pe->lock);
        bool stop = pe->stopping;
        pthread_mutex_unlock(&pe->lock);
        if (stop)
            break;
        if (r->watermark_pct && !ps->dry_run &&
            hot_fill_pct(&pe->ctx, r->level) <= r->watermark_pct)
            break; /* below the watermark again */
        if (policy_yields(&pe->rules, r, &files->v[sel[j]]))
            continue; /* the namespace's own rule has it */
        act(pe, ps, i, n, &files->v[sel[j]], batch);
    }
    if (ps->dry_run) {
        for (size_t b = 0; b < batch->n; b++)
            record(pe, ps, i, batch->paths[b], 0, 0, NULL);
        batch_fini(batch);
    } else {
        start_batch(pe, ps, i, batch);
    }
    free(batch);
    return true;
}

static int run_pass_rules(struct policy_engine *pe, struct pe_pass *ps)
{
    const struct policy_engine_ctx *cx = &pe->ctx;
    uint64_t t0 = tier_now_mono_ns();
    int first_rc = 0;
    if (ps->full && !ps->dry_run && pe->db)
        db_prune_rules(pe);
    for (size_t n = 0; n < cx->nns; n++) {
        bool any = false, need_list = false;
        for (size_t i = 0; i < pe->rules.n; i++) {
            if (pe->rules.v[i].ns != n || !rule_runs(pe, ps, i))
                continue;
            any = true;
            need_list = need_list || (ps->full && !pe->rules.v[i].local_only);
        }
        if (!any)
            continue;
        struct pe_files files = {0};
        int rc = gather_files(pe, n, need_list, &files, &first_rc);
        if (rc < 0)
            return rc;
        if (rc)
            continue;
        ps->files += files.n;
        note_uses(pe, n, &files);
        size_t *sel = malloc((files.n ? files.n : 1) * sizeof(*sel));
        if (!sel) {
            files_free(&files);
            return -ENOMEM;
        }
        for (size_t i = 0; i < pe->rules.n; i++)
            if (pe->rules.v[i].ns == n && rule_runs(pe, ps, i) &&
                !run_rule(pe, ps, i, n, &files, sel))
                break;
        free(sel);
        /* a whole listing of the namespace: the copy journal forgets the files gone from it (not
         * after an empty one: a prefix directory gone for a moment must not cost every copy
         * again) */
        const char *nsp = cx->ns[n].conf->prefix ? cx->ns[n].conf->prefix : "";
        for (size_t i = 0;
             need_list && files.n > 0 && ps->full && !ps->dry_run && pe->db && i < pe->rules.n; i++)
            if (pe->rules.v[i].ns == n && pe->rules.v[i].action == POLICY_COPY)
                db_prune_absent(pe, &pe->rules.v[i], nsp, &files);
        files_free(&files);
    }
    uint64_t ms = (tier_now_mono_ns() - t0) / 1000000;
    if (!ps->dry_run) {
        pthread_mutex_lock(&pe->lock);
        if (ps->full)
            pe->passes++;
        else
            pe->local_passes++;
        pe->last_pass_ns = (int64_t)tier_now_real_ns();
        pe->last_pass_ms = ms;
        if (!first_rc)
            pe->last_error[0] = '\0';
        pthread_mutex_unlock(&pe->lock);
    }
    return first_rc;
}

static void *engine_main(void *arg)
{
    struct policy_engine *pe = arg;
    uint64_t interval = pe->ctx.interval_ms ? pe->ctx.interval_ms : 30000;
    uint64_t next_full = tier_now_mono_ns() + interval * 1000000ULL;
    uint64_t local_due = 0;
    pthread_mutex_lock(&pe->lock);
    while (!pe->stopping) {
        if (pe->kicked) {
            pe->kicked = false;
            if (!local_due)
                local_due = tier_now_mono_ns() + PE_LOCAL_DELAY_MS * 1000000ULL;
        }
        uint64_t now = tier_now_mono_ns();
        bool full = now >= next_full, local = local_due && now >= local_due;
        if (!full && !local) {
            uint64_t until = local_due && local_due < next_full ? local_due : next_full;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t wait = until - now;
            ts.tv_sec += (time_t)(wait / 1000000000ULL);
            ts.tv_nsec += (long)(wait % 1000000000ULL);
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&pe->cond, &pe->lock, &ts);
            continue;
        }
        pthread_mutex_unlock(&pe->lock);
        struct pe_pass ps = {.full = full, .actions = json_array()};
        pthread_mutex_lock(&pe->pass_lock);
        (void)run_pass(pe, &ps);
        pthread_mutex_unlock(&pe->pass_lock);
        json_decref(ps.actions);
        local_due = 0;
        if (full)
            next_full = tier_now_mono_ns() + interval * 1000000ULL;
        pthread_mutex_lock(&pe->lock);
    }
    pthread_mutex_unlock(&pe->lock);
    return NULL;
}

/* ---- public -------------------------------------------------------------------------------- */

static char *default_state(const struct policy_engine_ctx *c)
{
    char *p = NULL;
    if (c->state_path)
        return strdup(c->state_path);
    if (c->spool_dir) {
        (void)mkdir(c->spool_dir, 0700); /* wb_open makes it for a write-back namespace */
        if (asprintf(&p, "%s/policy.db", c->spool_dir) < 0)
            return NULL;
        return p;
    }
    return strdup(":memory:");
}

int policy_engine_start(const struct policy_engine_ctx *ctx, struct policy_engine **out)
{
    *out = NULL;
    struct policy_rules rules;
    char err[400];
    int line = 0;
    int rc = policy_rules_build_conf(ctx->conf, &rules, err, sizeof(err), &line);
    if (rc) {
        tier_err_set("%s:%d: %s", ctx->conf->file, line, err);
        return rc;
    }
    if (rules.n == 0) {
        policy_rules_free(&rules);
        return 0;
    }
    struct policy_engine *pe = calloc(1, sizeof(*pe));
    if (!pe || !(pe->counts = calloc(rules.n, sizeof(*pe->counts)))) {
        free(pe);
        policy_rules_free(&rules);
        return -ENOMEM;
    }
    pe->ctx = *ctx;
    pe->ctx.conf = NULL; /* borrowed for this call only */
    pe->rules = rules;
    pthread_mutex_init(&pe->pass_lock, NULL);
    pthread_mutex_init(&pe->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&pe->cond, &ca);
    pthread_condattr_destroy(&ca);
    pe->db_path = default_state(ctx);
    pe->start_ns = (int64_t)tier_now_real_ns();
    rc = pe->db_path ? db_open(pe) : -ENOMEM;
    bool idle = false;
    for (size_t i = 0; i < pe->rules.n; i++)
        idle = idle || pe->rules.v[i].idle_ms || pe->rules.v[i].tenant;
    if (rc == 0 && idle) /* 1 M objects' last uses (24 MiB), before the mount notes any */
        rc = access_log_new(20, &pe->access);
    if (rc == 0 && pe->ctx.access)
        *pe->ctx.access = pe->access;
    if (rc == 0) {
        rc = -pthread_create(&pe->thread, NULL, engine_main, pe);
        pe->started = rc == 0;
    }
    if (rc) {
        policy_engine_free(pe);
        return rc;
    }
    size_t user = 0;
    for (size_t i = 0; i < pe->rules.n; i++)
        user += !pe->rules.v[i].builtin;
    log_info("policy: %zu rule(s) (%zu from [policy] sections), a pass every %llu ms, copies "
             "journalled in %s",
             pe->rules.n, user, (unsigned long long)ctx->interval_ms, pe->db_path);
    *out = pe;
    return 0;
}

void policy_engine_stop(struct policy_engine *pe)
{
    if (!pe || !pe->started)
        return;
    pthread_mutex_lock(&pe->lock);
    pe->stopping = true;
    pthread_cond_broadcast(&pe->cond);
    pthread_mutex_unlock(&pe->lock);
    pthread_join(pe->thread, NULL);
    pe->started = false;
}

void policy_engine_free(struct policy_engine *pe)
{
    if (!pe)
        return;
    policy_engine_stop(pe);
    if (pe->db)
        sqlite3_close(pe->db);
    free(pe->db_path);
    policy_rules_free(&pe->rules);
    free(pe->counts);
    if (pe->ctx.access && *pe->ctx.access == pe->access)
        *pe->ctx.access = NULL;
    access_log_free(pe->access); /* after the mount, its only writer */
    pthread_cond_destroy(&pe->cond);
    pthread_mutex_destroy(&pe->lock);
    pthread_mutex_destroy(&pe->pass_lock);
    free(pe);
}

void policy_engine_kick(struct policy_engine *pe)
{
    if (!pe)
        return;
    pthread_mutex_lock(&pe->lock);
    pe->kicked = true;
    pthread_cond_signal(&pe->cond);
    pthread_mutex_unlock(&pe->lock);
}

int policy_engine_run(struct policy_engine *pe, const char *policy, bool dry_run, json_t **out)
{
    *out = NULL;
    struct pe_pass ps = {.full = true, .dry_run = dry_run, .only = policy, .actions = json_array()};
    if (!ps.actions)
        return -ENOMEM;
    uint64_t t0 = tier_now_mono_ns();
    pthread_mutex_lock(&pe->pass_lock); /* the rules do not change under it (reload) */
    bool found = !policy;
    for (size_t i = 0; i < pe->rules.n && !found; i++)
        found = strcmp(pe->rules.v[i].name, policy) == 0;
    if (!found) {
        pthread_mutex_unlock(&pe->pass_lock);
        json_decref(ps.actions);
        return -ENOENT;
    }
    int rc = run_pass(pe, &ps);
    pthread_mutex_unlock(&pe->pass_lock);
    char err[256] = "";
    if (rc)
        tier_strlcpy(err, tier_err_msg(), sizeof(err));
    json_t *j =
        json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "dry_run", dry_run, "files",
                  (json_int_t)ps.files, "done", (json_int_t)ps.done, "deferred",
                  (json_int_t)ps.deferred, "failed", (json_int_t)ps.failed, "skipped",
                  (json_int_t)ps.skipped, "truncated", (json_int_t)ps.truncated, "duration_ms",
                  (json_int_t)((tier_now_mono_ns() - t0) / 1000000), "actions", ps.actions);
    if (j && rc)
        json_object_set_new(j, "error", json_string(*err ? err : strerror(-rc)));
    *out = j;
    return j ? 0 : -ENOMEM;
}

static json_t *rule_json(const struct policy_engine *pe, size_t i)
{
    const struct policy_rule *r = &pe->rules.v[i];
    const struct policy_engine_ctx *c = &pe->ctx;
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:b}", "name", r->name, "namespace",
                          c->ns[r->ns].conf->path, "prefix", r->prefix, "action",
                          policy_action_name(r->action), "builtin", r->builtin);
    if (!j)
        return NULL;
    if (r->line)
        json_object_set_new(j, "line", json_integer(r->line));
    if (r->glob)
        json_object_set_new(j, "glob", json_string(r->glob));
    if (r->match)
        json_object_set_new(j, "match", json_string(r->match));
    if (r->dataset)
        json_object_set_new(j, "dataset", json_string(r->dataset));
    if (r->tenant)
        json_object_set_new(j, "tenant", json_string(r->tenant));
    if (r->action == POLICY_DEMOTE && r->level != POLICY_LEVEL_ALL)
        json_object_set_new(j, "level", json_string(policy_level_name(r->level)));
    if (r->min_size)
        json_object_set_new(j, "min_size", json_integer((json_int_t)r->min_size));
    if (r->max_size)
        json_object_set_new(j, "max_size", json_integer((json_int_t)r->max_size));
    if (r->age_ms)
        json_object_set_new(j, "age_ms", json_integer((json_int_t)r->age_ms));
    if (r->idle_ms)
        json_object_set_new(j, "idle_ms", json_integer((json_int_t)r->idle_ms));
    if (r->keep_last >= 0)
        json_object_set_new(j, "keep_last", json_integer((json_int_t)r->keep_last));
    if (r->watermark_pct)
        json_object_set_new(j, "watermark_pct", json_integer(r->watermark_pct));
    if (r->action == POLICY_COPY) {
        char t[BACKEND_KEY_MAX + 80];
        snprintf(t, sizeof(t), "%s:%s", c->backends[r->copy_backend]->name, r->copy_prefix);
        json_object_set_new(j, "target", json_string(t));
    }
    const struct pe_count *n = &pe->counts[i];
    json_object_set_new(j, "done", json_integer((json_int_t)n->done));
    json_object_set_new(j, "bytes", json_integer((json_int_t)n->bytes));
    json_object_set_new(j, "deferred", json_integer((json_int_t)n->deferred));
    json_object_set_new(j, "failed", json_integer((json_int_t)n->failed));
    if (r->action == POLICY_EXPIRE || r->action == POLICY_COPY)
        json_object_set_new(j, "skipped", json_integer((json_int_t)n->skipped));
    return j;
}

json_t *policy_engine_status(struct policy_engine *pe)
{
    pthread_mutex_lock(&pe->lock);
    json_t *rules = json_array(), *recent = json_array();
    for (size_t i = 0; i < pe->rules.n; i++)
        json_array_append_new(rules, rule_json(pe, i));
    /* newest first */
    for (size_t k = 0; k < pe->nrecent; k++) {
        const struct pe_event *e = &pe->recent[(pe->recent_head + PE_RECENT - 1 - k) % PE_RECENT];
        const struct policy_rule *r = &pe->rules.v[e->rule];
        json_array_append_new(recent,
                              json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:s}", "at_ns",
                                        (json_int_t)e->at_ns, "policy", r->name, "action",
                                        policy_action_name(r->action), "path", e->path, "result",
                                        e->failed    ? "failed"
                                        : e->skipped ? "skipped"
                                                     : "done",
                                        "bytes", (json_int_t)e->bytes, "detail", e->detail));
    }
    json_t *j = json_pack("{s:I, s:s, s:I, s:I, s:I, s:I, s:s, s:o, s:o}", "interval_ms",
                          (json_int_t)pe->ctx.interval_ms, "state", pe->db_path, "passes",
                          (json_int_t)pe->passes, "local_passes", (json_int_t)pe->local_passes,
                          "last_pass_ns", (json_int_t)pe->last_pass_ns, "last_pass_ms",
                          (json_int_t)pe->last_pass_ms, "last_error", pe->last_error, "rules",
                          rules, "recent", recent);
    pthread_mutex_unlock(&pe->lock);
    return j;
}

size_t policy_engine_counts(struct policy_engine *pe, struct policy_counts *out, size_t max)
{
    if (!pe)
        return 0;
    pthread_mutex_lock(&pe->lock);
    size_t n = pe->rules.n < max ? pe->rules.n : max;
    for (size_t i = 0; i < n; i++)
        out[i] = (struct policy_counts){.ns = pe->ctx.ns[pe->rules.v[i].ns].conf->path,
                                        .action = pe->rules.v[i].action,
                                        .done = pe->counts[i].done,
                                        .bytes = pe->counts[i].bytes,
                                        .deferred = pe->counts[i].deferred,
                                        .failed = pe->counts[i].failed,
                                        .skipped = pe->counts[i].skipped};
    for (size_t i = 0; i < n; i++)
        tier_strlcpy(out[i].name, pe->rules.v[i].name, sizeof(out[i].name));
    pthread_mutex_unlock(&pe->lock);
    return n;
}

int policy_engine_reload_conf(struct policy_engine *pe, const struct policy_conf *cfg, char *err,
                              size_t errsz)
{
    struct policy_rules rules;
    char msg[400];
    int line = 0;
    int rc = policy_rules_build_conf(cfg, &rules, msg, sizeof(msg), &line);
    if (rc) {
        snprintf(err, errsz, "%s:%d: %s", cfg->file, line, msg);
        return rc;
    }
    bool idle = false;
    for (size_t i = 0; i < rules.n; i++)
        idle = idle || rules.v[i].idle_ms || rules.v[i].tenant;
    if (idle && !pe->access) {
        snprintf(err, errsz,
                 "a rule has idle or tenant, and tierd tracks uses only when a rule had one of "
                 "them at start: restart tierd for it");
        policy_rules_free(&rules);
        return -EINVAL;
    }
    struct pe_count *counts = calloc(rules.n ? rules.n : 1, sizeof(*counts));
    if (!counts) {
        policy_rules_free(&rules);
        return -ENOMEM;
    }
    pthread_mutex_lock(&pe->pass_lock); /* no pass runs on the old rules any more */
    pthread_mutex_lock(&pe->lock);
    struct policy_rules old = pe->rules;
    free(pe->counts);
    pe->rules = rules;
    pe->counts = counts;
    pe->nrecent = 0; /* the ring names rules by index */
    pe->recent_head = 0;
    memset(pe->skip_logged, 0, sizeof(pe->skip_logged)); /* rules may have new names */
    pe->nskip_logged = 0;
    pe->skip_log_full = false;
    pthread_mutex_unlock(&pe->lock);
    pthread_mutex_unlock(&pe->pass_lock);
    policy_rules_free(&old);
    log_info("policy: reloaded: %zu rule(s)", rules.n);
    return 0;
}
