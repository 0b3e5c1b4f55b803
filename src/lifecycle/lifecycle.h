/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle.h - lifecycle policies (docs/POLICIES.md): `[policy NAME]` sections of tierd.conf, each
 * a filter (namespace, prefix, glob, regex, size), triggers (age, idle, keep_last, the hot
 * tier's watermark) and one action (demote, stage, pin, unpin, copy, expire), evaluated by
 * one engine thread continuously and on demand (`tierctl policy plan|run|status`, /v1/policy).
 *
 * Two halves:
 *   - rules (lifecycle_rules.c): parse and check the sections (every error "FILE:LINE: ..."; used
 *     by config.c at load, so `tierd --check-config` finds them), and the pure evaluation of
 *     rules over a list of files (policy_select), with no I/O, for the unit tests and the bench;
 *   - the engine (lifecycle.c): gathers each namespace's files (the backend's listing and the
 *     burst buffer's journal), evaluates, carries the actions out, counts and logs them, and
 *     keeps the copies it made in a small SQLite journal so that a copy is never redone for the
 *     same source version, even across a crash.
 *
 * `[writeback] retention_keep = K` is the built-in rule "writeback-retention" of each
 * write-back namespace (keep_last = K files per directory, action demote): one mechanism.
 *
 * Thread-safety: the rule functions are pure; the engine's functions may be called from any
 * thread (one lock inside; one pass runs at a time).
 */
#ifndef TIER_LIFECYCLE_LIFECYCLE_H
#define TIER_LIFECYCLE_LIFECYCLE_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ns.h"

struct access_log;
struct backend;
struct cache;
struct json_t;
struct pinmeta;
struct stage_registry;
struct tenant_reg;
struct wb;

#define POLICY_MAX_RULES 64
#define POLICY_NAME_MAX 64

enum policy_action {
    POLICY_DEMOTE = 0, /* drop the hot copies: the burst buffer's local copy (once uploaded)
                        * and the cached blocks (RAM and disk); pinned blocks stay; a rule's
                        * level narrows it to one level */
    POLICY_STAGE,      /* fetch every block into the hot tier */
    POLICY_PIN,        /* pin (cache_pin of the key) and stage */
    POLICY_UNPIN,      /* drop the key's pin */
    POLICY_COPY,       /* copy the object to copy_backend:copy_prefix + its relative key */
    POLICY_EXPIRE,     /* delete the object from its backend (allow_delete = true only) */
    POLICY_NACTIONS
};
const char *policy_action_name(enum policy_action a);

/* Which hot copies a demote takes (`level = ram|disk|all`). */
enum policy_level {
    POLICY_LEVEL_ALL = 0, /* out of the hot tier: the local copy and every cached block */
    POLICY_LEVEL_RAM,     /* out of RAM into the disk level (cache_demote): the file stays hot */
    POLICY_LEVEL_DISK,    /* the disk level's blocks and the burst buffer's local copy (both on
                           * the node's disk); RAM copies stay */
};
const char *policy_level_name(enum policy_level l);

/* One rule, checked. Strings are owned by the rule (policy_rules_free). */
struct policy_rule {
    char name[POLICY_NAME_MAX];
    int line;        /* the section's line; 0 for a built-in rule */
    int target_line; /* the line of its target (copy), else the section's */
    bool builtin;    /* writeback-retention */
    size_t ns;       /* index of its namespace in cfg->namespaces */
    /* filter, on the key relative to the namespace's root ("run7/step_3/model.pt") */
    char *prefix; /* "" = all */
    char *glob;   /* fnmatch(3) with FNM_PATHNAME, or NULL */
    char *match;  /* the regex as written, or NULL */
    /* a dataset version, as its view names it ("/ds/imagenet@v3", the tree inside this rule's
     * namespace): only the files of that version still in the backend as committed (their
     * ETag); NULL: none. The engine marks them (POLICY_F_INSET) before selecting. */
    char *dataset;
    /* a tenant's name ([tenant NAME], or an implicit one like slurm-1234): only files whose
     * last open, create or read through the mount was that tenant's (access.h; a file the table
     * does not know is nobody's); NULL: any. tenant_id is the engine's, set each pass: the
     * registry's id, or -1 while the registry has no such tenant (then no file matches). */
    char *tenant;
    int64_t tenant_id;
    regex_t re;                  /* match compiled (POSIX extended), valid when match != NULL */
    uint64_t min_size, max_size; /* max 0: no bound */
                                 /* triggers: all given must hold */
    uint64_t age_ms;             /* 0: none; older than this since its mtime (upload or seal) */
    uint64_t idle_ms;            /* 0: none; not read through the mount for this long (access.h;
                                  * reads before tierd started are unknown: its start counts) */
    int64_t keep_last;           /* -1: none; every file but those of the newest K units of its
                                  * group (see policy_select) */
    unsigned watermark_pct;      /* 0: none; while the hot tier is fuller than this */
    enum policy_action action;
    enum policy_level level; /* POLICY_DEMOTE only */
    int copy_backend;        /* index in cfg->backends (POLICY_COPY) */
    char *copy_prefix;       /* "" or ending in '/' */
    bool allow_delete;
    bool local_only; /* demote the burst buffer's local copy only, not cached blocks (the
                      * built-in retention: a re-read old file keeps its cached blocks) */
};

struct policy_rules {
    struct policy_rule *v;
    size_t n;
};

/* One `key = value` line of a [policy NAME] section, as written. */
struct policy_kv {
    const char *key, *val;
    int line;
};

/* A [policy NAME] section as written (config.c keeps them; the rules check them). */
struct policy_section {
    const char *name;
    int line;
    const struct policy_kv *kv;
    size_t nkv;
};

/* What the rules are built from: the slice of the config they read, borrowed for the call
 * (the daemon makes it from its config: daemon/tierd.h). */
struct policy_conf {
    const char *file;                      /* the config's name, for messages ("FILE:LINE: ...") */
    const struct policy_section *sections; /* in config order */
    size_t nsections;
    const struct tierd_ns_conf *namespaces; /* in config order: a rule's ns indexes it */
    size_t nnamespaces;
    const char *const *backends; /* the backends' names in config order: copy_backend */
    size_t nbackends;
    int retention_keep; /* [writeback] retention_keep; < 0: no built-in rule */
    bool disk_level;    /* [cache] has a disk level (disk_dir and disk_size): level = ram */
};

/* Build the rules of pc: its [policy NAME] sections in order, then the built-in retention rule
 * of each write-back namespace (when retention_keep >= 0; it leaves alone the files a rule of
 * the namespace's own with action demote, stage or pin takes: policy_yields). 0, or -EINVAL with
 * err filled with what is wrong and how to fix it, and *err_line its line (config.c prefixes
 * "FILE:LINE: "), or -ENOMEM. */
int policy_rules_build_conf(const struct policy_conf *pc, struct policy_rules *out, char *err,
                            size_t errsz, int *err_line);
void policy_rules_free(struct policy_rules *r);

/* The i-th key a [policy NAME] section may have (lifecycle_rules.c's key table), NULL past the
 * last: config.c's hint for such a key written in another section. */
const char *policy_rule_key_name(size_t i);

/* Where a file of a namespace is, for policy_select (bits). */
#define POLICY_F_DURABLE 0x1u /* complete in the backend (listed, or UPLOADED/EVICTABLE) */
#define POLICY_F_LOCAL 0x2u   /* the burst buffer holds a local copy */
#define POLICY_F_PENDING 0x4u /* the burst buffer has a newer generation not yet uploaded */
/* the listing and the burst buffer name different versions (an overwrite outside tierd, or a
 * race): no copy, no expire */
#define POLICY_F_CHANGED 0x8u
#define POLICY_F_INSET 0x10u /* in the rule's dataset version (the engine's mark, per rule) */

struct policy_file {
    const char *key; /* relative to the namespace root */
    uint64_t size;
    int64_t mtime_ns; /* realtime */
    unsigned flags;
    const char *etag; /* the durable object's version tag (the engine's; may be NULL) */
    int64_t atime_ns; /* its last read (idle rules), at least tierd's start; 0: unknown */
    int64_t tenant;   /* whose its last use was (access.h; rules with tenant), -1: unknown */
};

/* Does rule r's filter (prefix, size, glob, match, dataset, tenant; not its triggers) take f? */
bool policy_matches(const struct policy_rule *r, const struct policy_file *f);
/* Does the built-in rule r leave f to a rule of rules (of its namespace, from a [policy]
 * section) that decides for it: stage or pin, or demote with keep_last or with no trigger?
 * False for a rule that is not built in. */
bool policy_yields(const struct policy_rules *rules, const struct policy_rule *r,
                   const struct policy_file *f);

/* The files of files[0..n) (sorted by key) that rule r selects now, as indexes into sel
 * (caller's, n entries), in the order the action should take them (keep_last: oldest unit
 * first; otherwise oldest mtime first); returns how many. now_ns: realtime; hot_pct: the hot
 * tier's fill in percent (watermark). keep_last groups: with a match regex, its first capture
 * group is the unit (a step: every file whose match captured the same text at the same place)
 * and the key before the capture is the group; numbers compare as numbers. Without a regex the
 * unit is the file and the group its directory, newest by mtime. Files matched by the filter
 * but still pending count in the ranking (they are the newest), but are never selected. */
size_t policy_select(const struct policy_rule *r, const struct policy_file *files, size_t n,
                     int64_t now_ns, unsigned hot_pct, size_t *sel);

/* ---- the engine (lifecycle.c) --------------------------------------------------------------- */

struct policy_engine;

/* What the engine uses, borrowed from its opener (the daemon: policy_engine_ctx_tierd in
 * src/daemon/wiring.c; the tests build one by hand), which keeps every member valid until
 * policy_engine_free. NULL members: that part is absent (no cache, no burst buffer, ...). The
 * engine's copy is read-only (its thread and the callers of its functions read it unlocked). */
struct policy_engine_ctx {
    /* the rules' source: read by policy_engine_start only (not kept) */
    const struct policy_conf *conf;
    uint64_t interval_ms;   /* [daemon] policy_interval: a full pass this often; 0: 30 s */
    uint64_t part_size;     /* [writeback] part_size: a copy's multipart parts; 0: 8 MiB */
    const char *state_path; /* [daemon] policy_state (the copy journal); NULL: as spool_dir */
    const char *spool_dir;  /* [writeback] spool_dir: <spool_dir>/policy.db; NULL: ":memory:" */
    struct backend *const *backends; /* opened backends, in config order (copy targets) */
    size_t nbackends;
    struct tierd_ns *ns; /* the namespaces, in config order (a rule's ns indexes them) */
    size_t nns;
    struct tierd_ns_ops ops; /* manifest: the dataset versions of dataset = rules */
    struct cache *cache;     /* the hot tier (demote, pin, unpin, watermark); may be NULL */
    struct wb *wb;           /* the burst buffer; NULL when no namespace is write-back */
    struct pinmeta *pinned;  /* pinned objects' attributes (unpin forgets them); may be NULL */
    struct stage_registry *stages; /* stage and pin actions' jobs; NULL: they fail (ENOTSUP) */
    struct tenant_reg *tenants;    /* tenant = rules' names to ids; NULL: none matches */
    /* where the last-use table lives (access.h): when a rule has idle or tenant, start makes it
     * and stores it here before the mount (its writer) starts; free frees it and stores NULL */
    struct access_log **access;
};

/* Start the engine over ctx (ctx->conf's rules; none: *out is NULL and nothing runs); ctx is
 * copied. The copy journal is ctx->state_path, else <spool_dir>/policy.db, else ":memory:". 0,
 * or -errno with tier_err_msg() saying why ("FILE:LINE: ..." for a rule). */
int policy_engine_start(const struct policy_engine_ctx *ctx, struct policy_engine **out);
/* Stop the thread (a pass in progress finishes its current action); kicks are still harmless
 * until policy_engine_free (the burst buffer's uploaders kick until wb_close). NULL: no-op. */
void policy_engine_stop(struct policy_engine *pe);
/* Stop if need be, and free. NULL: no-op. */
void policy_engine_free(struct policy_engine *pe);
/* A write-back file was uploaded: the built-in retention and every demote rule of write-back
 * namespaces run soon (debounced), without waiting for the interval. */
void policy_engine_kick(struct policy_engine *pe);
/* Run one full pass now (waits for a running one first), or with dry_run only plan it. The
 * result is a JSON object (docs/API.md, "Policies"): the actions done or planned, counts.
 * policy: NULL for every rule, else only that one (-ENOENT if there is none). */
int policy_engine_run(struct policy_engine *pe, const char *policy, bool dry_run,
                      struct json_t **out);
/* GET /v1/policy: every rule with its counters, the last passes, the recent actions. */
struct json_t *policy_engine_status(struct policy_engine *pe);

/* Replace the rules with those of pc (a config re-read by `tierctl reload`; its namespaces and
 * backends must be the running ones, in the same order: the caller checks), after a running pass.
 * The counters start again from 0. 0; -EINVAL with err (a rule's error, "FILE:LINE: ..."), or
 * when a new rule has idle and reads are not tracked (start-up made no table: restart). */
int policy_engine_reload_conf(struct policy_engine *pe, const struct policy_conf *pc, char *err,
                              size_t errsz);

/* Counters of one rule, for the telemetry (tierd_policy_actions_total). */
struct policy_counts {
    char name[POLICY_NAME_MAX]; /* the rule's */
    const char *ns; /* its namespace's mount path (the ctx's: valid while the engine runs) */
    enum policy_action action;
    uint64_t done, bytes, deferred, failed;
    uint64_t skipped; /* expire: deletes skipped because a copy was not as journalled; copy:
                       * copies not written because the target held another object */
};
/* Up to max rules' counters into out; returns how many. */
size_t policy_engine_counts(struct policy_engine *pe, struct policy_counts *out, size_t max);

#endif
