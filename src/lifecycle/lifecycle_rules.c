/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle_rules.c - the rules of lifecycle policies (lifecycle.h, docs/POLICIES.md): the
 * [policy NAME] sections checked into struct policy_rule, and their evaluation over a namespace's
 * files (policy_select). No I/O, no locks: config.c calls the builder at load, the engine
 * (lifecycle.c) and the bench call both. The keys are a table (rule_keys: one setter per key)
 * with the did-you-mean and the choices tables of config.c's (common/keytab.h).
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "common/keytab.h"
#include "datasets/manifest.h"
#include "lifecycle/lifecycle.h"
#include "tenant/tenant.h"

/* The values of action and level, in the order their "allowed:" text lists them. */
static const struct config_choice action_choices[] = {{"demote", POLICY_DEMOTE},
                                                      {"stage", POLICY_STAGE},
                                                      {"pin", POLICY_PIN},
                                                      {"unpin", POLICY_UNPIN},
                                                      {"copy", POLICY_COPY},
                                                      {"expire", POLICY_EXPIRE},
                                                      {NULL, 0}};
_Static_assert(sizeof(action_choices) / sizeof(action_choices[0]) == POLICY_NACTIONS + 1,
               "one choice per action");
static const struct config_choice level_choices[] = {
    {"ram", POLICY_LEVEL_RAM}, {"disk", POLICY_LEVEL_DISK}, {"all", POLICY_LEVEL_ALL}, {NULL, 0}};

const char *policy_action_name(enum policy_action a)
{
    const char *n = config_choice_name(action_choices, (int)a);
    return n ? n : "?";
}

const char *policy_level_name(enum policy_level l)
{
    const char *n = config_choice_name(level_choices, (int)l);
    return n ? n : "?";
}

struct builder {
    const struct policy_conf *cfg;
    char *err;
    size_t errsz;
    int *err_line;
    int rc;
};

static void bfail(struct builder *b, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bfail(struct builder *b, int line, const char *fmt, ...)
{
    if (b->rc)
        return; /* the first error (by section order) is the one shown */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, b->errsz, fmt, ap);
    va_end(ap);
    *b->err_line = line;
    b->rc = -EINVAL;
}

static void rule_fini(struct policy_rule *r)
{
    free(r->prefix);
    free(r->glob);
    if (r->match)
        regfree(&r->re);
    free(r->match);
    free(r->dataset);
    free(r->tenant);
    free(r->copy_prefix);
    memset(r, 0, sizeof(*r));
}

void policy_rules_free(struct policy_rules *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        rule_fini(&r->v[i]);
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

static int find_ns(const struct policy_conf *c, const char *path)
{
    for (size_t n = 0; n < c->nnamespaces; n++)
        if (strcmp(c->namespaces[n].path, path) == 0)
            return (int)n;
    return -1;
}

static int find_backend(const struct policy_conf *c, const char *name, size_t len)
{
    for (size_t b = 0; b < c->nbackends; b++)
        if (strlen(c->backends[b]) == len && strncmp(c->backends[b], name, len) == 0)
            return (int)b;
    return -1;
}

/* A relative key prefix as a rule takes it: no leading '/', no '.'/'..' segment, valid as a key
 * prefix. NULL, or what is wrong. */
static const char *prefix_problem(const char *v)
{
    if (v[0] == '/')
        return "must be relative to the namespace's root (no leading '/')";
    for (const char *s = v; *s;) {
        const char *e = strchr(s, '/');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if ((l == 1 && s[0] == '.') || (l == 2 && s[0] == '.' && s[1] == '.'))
            return "has a '.' or '..' segment";
        if (l == 0 && e)
            return "has an empty segment ('//')";
        s = e ? e + 1 : s + l;
    }
    for (const unsigned char *s = (const unsigned char *)v; *s; s++)
        if (*s < 0x20 || *s == 0x7f)
            return "has a control character";
    return NULL;
}

/* A duration as [daemon] keys take it (ms, s, m, h), or a number of days ("7d"). */
static int parse_age(const char *v, uint64_t *out)
{
    size_t l = strlen(v);
    if (l >= 2 && l < 16 && v[l - 1] == 'd') {
        char num[16];
        memcpy(num, v, l - 1);
        num[l - 1] = '\0';
        uint64_t days;
        if (tier_parse_u64(num, &days) || days > 36500)
            return -EINVAL;
        *out = days * 86400000ULL;
        return 0;
    }
    return tier_parse_duration_ms(v, out);
}

/* ---- the [policy NAME] keys: one setter each, found through rule_keys ----------------------- */

/* A key's setter: val (written at line of [policy sect]) into r, or the error into b. */
typedef void key_setter(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                        const char *val, int line);

static void set_namespace(struct builder *b, const char *sect, struct policy_rule *r,
                          const char *key, const char *val, int line)
{
    (void)key;
    int n = find_ns(b->cfg, val);
    if (n < 0)
        bfail(b, line,
              "[policy %s] namespace = '%s' is not a [namespace /PATH] of this file (write "
              "the mount path of one, like /ckpt)",
              sect, val);
    else
        r->ns = (size_t)n;
}

static void set_prefix(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                       const char *val, int line)
{
    (void)key;
    const char *why = prefix_problem(val);
    if (why)
        bfail(b, line, "[policy %s] prefix = '%s' %s", sect, val, why);
    else if (!(r->prefix = strdup(val)))
        b->rc = -ENOMEM;
}

static void set_glob(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                     const char *val, int line)
{
    (void)key;
    if (!*val)
        bfail(b, line, "[policy %s] glob is empty (write a pattern like *.pt, or remove it)", sect);
    else if (!(r->glob = strdup(val)))
        b->rc = -ENOMEM;
}

static void set_match(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                      const char *val, int line)
{
    (void)key;
    int rc = regcomp(&r->re, val, REG_EXTENDED);
    if (rc) {
        char why[160];
        regerror(rc, &r->re, why, sizeof(why));
        bfail(b, line, "[policy %s] match = '%s' is not a POSIX extended regular expression: %s",
              sect, val, why);
    } else if (!(r->match = strdup(val))) {
        regfree(&r->re);
        b->rc = -ENOMEM;
    }
}

static void set_dataset(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                        const char *val, int line)
{
    (void)key;
    const char *at = strrchr(val, '@');
    if (val[0] != '/' || !at || at == val + 1 || !manifest_name_valid(at + 1))
        bfail(b, line,
              "[policy %s] dataset = '%s' is not a version (write TREE@NAME with the tree's "
              "mount path, like /datasets/imagenet@v3)",
              sect, val);
    else if (!(r->dataset = strdup(val)))
        b->rc = -ENOMEM;
}

static void set_tenant(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                       const char *val, int line)
{
    (void)key;
    if (!tenant_name_valid(val))
        bfail(b, line,
              "[policy %s] tenant = '%s' is not a tenant name (1 to 63 of A-Z a-z 0-9 . _ -, "
              "like a [tenant NAME] section's or slurm-1234)",
              sect, val);
    else if (!(r->tenant = strdup(val)))
        b->rc = -ENOMEM;
}

/* min_size, max_size */
static void set_size(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                     const char *val, int line)
{
    uint64_t u;
    if (tier_parse_size(val, &u))
        bfail(b, line, "[policy %s] %s = '%s' is not a size (like 100M, 4G)", sect, key, val);
    else if (strcmp(key, "min_size") == 0)
        r->min_size = u;
    else
        r->max_size = u;
}

/* age, idle: a duration above 0 */
static void set_age(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                    const char *val, int line)
{
    uint64_t u;
    bool idle = strcmp(key, "idle") == 0;
    if (parse_age(val, &u) || u == 0)
        bfail(b, line, "[policy %s] %s = '%s' is not a duration above 0 (like %s)", sect, key, val,
              idle ? "30m, 12h, 7d" : "7d, 12h, 30m");
    else if (idle)
        r->idle_ms = u;
    else
        r->age_ms = u;
}

static void set_keep_last(struct builder *b, const char *sect, struct policy_rule *r,
                          const char *key, const char *val, int line)
{
    (void)key;
    uint64_t u;
    if (tier_parse_u64(val, &u) || u > 1000000)
        bfail(b, line, "[policy %s] keep_last = '%s' is not a count of 0 to 1000000", sect, val);
    else
        r->keep_last = (int64_t)u;
}

static void set_watermark(struct builder *b, const char *sect, struct policy_rule *r,
                          const char *key, const char *val, int line)
{
    (void)key;
    uint64_t u = 0;
    char num[16];
    size_t l = strlen(val);
    if (l && val[l - 1] == '%')
        l--;
    if (l > 0 && l < sizeof(num)) {
        memcpy(num, val, l);
        num[l] = '\0';
        if (tier_parse_u64(num, &u))
            u = 0;
    }
    if (u < 1 || u > 99)
        bfail(b, line,
              "[policy %s] watermark = '%s' is not a fill of the hot tier from 1%% to 99%% "
              "(like 90%%)",
              sect, val);
    else
        r->watermark_pct = (unsigned)u;
}

static void set_action(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                       const char *val, int line)
{
    (void)key;
    int a;
    if (config_choice_parse(action_choices, val, &a)) {
        char allowed[128];
        config_choice_list(action_choices, allowed, sizeof(allowed));
        bfail(b, line, "[policy %s] action = '%s' is not an action (allowed: %s)", sect, val,
              allowed);
    } else {
        r->action = (enum policy_action)a;
    }
}

static void set_level(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                      const char *val, int line)
{
    (void)key;
    int l;
    if (config_choice_parse(level_choices, val, &l)) {
        char allowed[128];
        config_choice_list(level_choices, allowed, sizeof(allowed));
        bfail(b, line, "[policy %s] level = '%s' is not a level of the hot tier (allowed: %s)",
              sect, val, allowed);
    } else {
        r->level = (enum policy_level)l;
    }
}

/* BACKEND or BACKEND:PREFIX; the prefix kept with a trailing '/' (or "") */
static void set_target(struct builder *b, const char *sect, struct policy_rule *r, const char *key,
                       const char *val, int line)
{
    (void)key;
    const char *colon = strchr(val, ':');
    size_t bl = colon ? (size_t)(colon - val) : strlen(val);
    int be = find_backend(b->cfg, val, bl);
    const char *pre = colon ? colon + 1 : "";
    const char *why = prefix_problem(pre);
    if (be < 0) {
        bfail(b, line,
              "[policy %s] target = '%s': '%.*s' is not a [backend NAME] of this file (write "
              "BACKEND or BACKEND:PREFIX/, like archive:ckpt/)",
              sect, val, (int)bl, val);
        return;
    }
    if (why) {
        bfail(b, line, "[policy %s] target = '%s': the prefix %s", sect, val, why);
        return;
    }
    size_t pl = strlen(pre);
    r->copy_backend = be;
    r->copy_prefix = malloc(pl + 2);
    if (!r->copy_prefix) {
        b->rc = -ENOMEM;
        return;
    }
    memcpy(r->copy_prefix, pre, pl);
    if (pl && pre[pl - 1] != '/')
        r->copy_prefix[pl++] = '/';
    r->copy_prefix[pl] = '\0';
}

static void set_allow_delete(struct builder *b, const char *sect, struct policy_rule *r,
                             const char *key, const char *val, int line)
{
    (void)key;
    int bv;
    if (tier_parse_bool(val, &bv))
        bfail(b, line, "[policy %s] allow_delete = '%s' is not a boolean (true or false)", sect,
              val);
    else
        r->allow_delete = bv != 0;
}

/* The keys a [policy] section may have, in the order its "allowed:" text lists them. */
static const struct {
    const char *name;
    key_setter *set;
} rule_keys[] = {
    {"namespace", set_namespace},
    {"prefix", set_prefix},
    {"glob", set_glob},
    {"match", set_match},
    {"dataset", set_dataset},
    {"tenant", set_tenant},
    {"min_size", set_size},
    {"max_size", set_size},
    {"age", set_age},
    {"idle", set_age},
    {"keep_last", set_keep_last},
    {"watermark", set_watermark},
    {"action", set_action},
    {"level", set_level},
    {"target", set_target},
    {"allow_delete", set_allow_delete},
};
#define NRULE_KEYS (sizeof(rule_keys) / sizeof(rule_keys[0]))

const char *policy_rule_key_name(size_t i)
{
    return i < NRULE_KEYS ? rule_keys[i].name : NULL;
}

/* An unknown key: the did-you-mean of config.c's keys (edit distance), and the list. */
static void unknown_key(struct builder *b, const char *sect, const char *key, int line)
{
    const char *names[NRULE_KEYS];
    for (size_t i = 0; i < NRULE_KEYS; i++)
        names[i] = rule_keys[i].name;
    char near[120] = "", allowed[256];
    const char *m = config_key_closest(key, names, NRULE_KEYS);
    if (m)
        snprintf(near, sizeof(near), " (did you mean '%s'?)", m);
    config_names_list(names, NRULE_KEYS, allowed, sizeof(allowed));
    bfail(b, line, "[policy %s] unknown key '%s'%s (allowed: %s)", sect, key, near, allowed);
}

static void set_key(struct builder *b, const struct policy_section *pc, struct policy_rule *r,
                    const char *key, const char *val, int line)
{
    for (size_t i = 0; i < NRULE_KEYS; i++) {
        if (strcmp(key, rule_keys[i].name) == 0) {
            rule_keys[i].set(b, pc->name, r, key, val, line);
            return;
        }
    }
    unknown_key(b, pc->name, key, line);
}

/* Do the scopes of two rules of one namespace overlap, as far as can be told without knowing
 * the keys? Nested prefixes, and the same or no glob, and the same or no match. */
static bool scopes_overlap(const struct policy_rule *a, const struct policy_rule *b)
{
    if (a->ns != b->ns)
        return false;
    size_t la = strlen(a->prefix), lb = strlen(b->prefix);
    if (strncmp(a->prefix, b->prefix, la < lb ? la : lb) != 0)
        return false;
    if (a->glob && b->glob && strcmp(a->glob, b->glob) != 0)
        return false;
    if (a->match && b->match && strcmp(a->match, b->match) != 0)
        return false;
    if (a->tenant && b->tenant && strcmp(a->tenant, b->tenant) != 0)
        return false;
    if (a->max_size && b->min_size > a->max_size)
        return false;
    if (b->max_size && a->min_size > b->max_size)
        return false;
    return true;
}

/* Would two rules over the same files undo each other? */
static bool actions_contradict(const struct policy_rule *a, const struct policy_rule *b)
{
    bool keep_a = a->action == POLICY_STAGE || a->action == POLICY_PIN;
    bool keep_b = b->action == POLICY_STAGE || b->action == POLICY_PIN;
    /* a demote out of RAM keeps the file hot (on the node's disk): no fight with stage or pin */
    bool drop_a = (a->action == POLICY_DEMOTE && a->level != POLICY_LEVEL_RAM) ||
                  a->action == POLICY_UNPIN || a->action == POLICY_EXPIRE;
    bool drop_b = (b->action == POLICY_DEMOTE && b->level != POLICY_LEVEL_RAM) ||
                  b->action == POLICY_UNPIN || b->action == POLICY_EXPIRE;
    /* two copy rules into one place are refused whatever their scopes (copy_targets_clash) */
    return (keep_a && drop_b) || (keep_b && drop_a);
}

/* Do two key prefixes of one backend overlap: one is the other, or holds it at a '/' boundary
 * ("" is the whole backend)? Copy targets end in '/' (or are ""), namespace prefixes too
 * (config.c); the boundary check keeps "arch" apart from "archive/" for any other caller. */
static bool keys_overlap(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > lb) {
        const char *t = a;
        a = b;
        b = t;
        size_t tl = la;
        la = lb;
        lb = tl;
    }
    if (la == 0)
        return true;
    return strncmp(a, b, la) == 0 && (la == lb || a[la - 1] == '/' || b[la] == '/');
}

/* Do two copy rules' targets (backend and prefix) overlap? Then one key of the target could be
 * written by both (the same relative key from two namespaces, or from two scopes of one), and
 * an expire trusting one rule's copy would delete a source whose copy is another file. */
static bool copy_targets_clash(const struct policy_rule *a, const struct policy_rule *b)
{
    return a->action == POLICY_COPY && b->action == POLICY_COPY &&
           a->copy_backend == b->copy_backend && keys_overlap(a->copy_prefix, b->copy_prefix);
}

/* Does the copy target of r overlap namespace n's keys (same backend, one prefix inside the
 * other)? */
static bool target_in_ns(const struct policy_conf *c, const struct policy_rule *r, size_t n)
{
    const struct tierd_ns_conf *ns = &c->namespaces[n];
    return ns->backend && strcmp(ns->backend, c->backends[r->copy_backend]) == 0 &&
           keys_overlap(ns->prefix ? ns->prefix : "", r->copy_prefix);
}

/* A namespace other than r's own (read-cache or write-back) whose keys the copy target of r
 * overlaps, or -1. Every rule's source lies inside its namespace's prefix, so a target apart
 * from every namespace is apart from every rule's source too. */
static int ns_overlap(const struct policy_conf *c, const struct policy_rule *r)
{
    for (size_t n = 0; n < c->nnamespaces; n++)
        if (n != r->ns && target_in_ns(c, r, n))
            return (int)n;
    return -1;
}

/* Is the tree of version spec ("/ds/a@v3") the namespace at path or inside it? */
static bool dataset_in_ns(const char *spec, const char *path)
{
    size_t tl = (size_t)(strrchr(spec, '@') - spec), pl = strlen(path);
    return tl >= pl && strncmp(spec, path, pl) == 0 && (tl == pl || spec[pl] == '/');
}

/* The lines of the keys of a section that build_one's checks name (0: not given). */
struct key_lines {
    bool has_ns, has_action;
    int action, target, allow_delete, keep_last, dataset, tenant, level;
};

/* Set each key of section pc on r, noting where the keys the checks name were given. */
static void set_keys(struct builder *b, const struct policy_section *pc, struct policy_rule *r,
                     struct key_lines *kl)
{
    for (size_t i = 0; i < pc->nkv && !b->rc; i++) {
        const char *k = pc->kv[i].key;
        set_key(b, pc, r, k, pc->kv[i].val, pc->kv[i].line);
        kl->has_ns = kl->has_ns || strcmp(k, "namespace") == 0;
        kl->has_action = kl->has_action || strcmp(k, "action") == 0;
        if (strcmp(k, "action") == 0)
            kl->action = pc->kv[i].line;
        if (strcmp(k, "target") == 0)
            kl->target = r->target_line = pc->kv[i].line;
        if (strcmp(k, "allow_delete") == 0)
            kl->allow_delete = pc->kv[i].line;
        if (strcmp(k, "keep_last") == 0)
            kl->keep_last = pc->kv[i].line;
        if (strcmp(k, "dataset") == 0)
            kl->dataset = pc->kv[i].line;
        if (strcmp(k, "tenant") == 0)
            kl->tenant = pc->kv[i].line;
        if (strcmp(k, "level") == 0)
            kl->level = pc->kv[i].line;
    }
}

/* The checks of an action's keys: target with copy only, allow_delete with expire only, a copy
 * target apart from every namespace. */
static void check_action_keys(struct builder *b, const struct policy_section *pc,
                              const struct policy_rule *r, const struct key_lines *kl)
{
    const struct policy_conf *c = b->cfg;
    int target_ns;
    if (r->action == POLICY_COPY && r->copy_backend < 0)
        bfail(b, kl->action,
              "[policy %s] action = copy needs target = BACKEND[:PREFIX/] (where the copies go)",
              pc->name);
    else if (r->action != POLICY_COPY && kl->target)
        bfail(b, kl->target, "[policy %s] target only applies to action = copy (remove it)",
              pc->name);
    else if (r->action == POLICY_EXPIRE && !r->allow_delete)
        bfail(b, kl->action,
              "[policy %s] action = expire deletes objects from the backend: it needs "
              "allow_delete = true in the same section",
              pc->name);
    else if (r->action != POLICY_EXPIRE && r->allow_delete)
        bfail(b, kl->allow_delete, "[policy %s] allow_delete only applies to action = expire",
              pc->name);
    else if (r->action == POLICY_COPY && target_in_ns(c, r, r->ns))
        bfail(b, kl->target,
              "[policy %s] target = %s:%s is %s the namespace it copies from (%s:%s; the "
              "copies would be copied again, and an expire could delete them): choose another "
              "backend or prefix",
              pc->name, c->backends[r->copy_backend], r->copy_prefix,
              strlen(r->copy_prefix) >= strlen(c->namespaces[r->ns].prefix) ? "inside" : "around",
              c->namespaces[r->ns].backend, c->namespaces[r->ns].prefix);
    else if (r->action == POLICY_COPY && (target_ns = ns_overlap(c, r)) >= 0)
        bfail(b, kl->target,
              "[policy %s] target = %s:%s overlaps the %s namespace %s (line %d) at %s:%s: "
              "its files and the copies would mix (a copy could overwrite one of its files, its "
              "rules could expire a copy, and its uploads could replace one): choose a backend "
              "or prefix outside every namespace",
              pc->name, c->backends[r->copy_backend], r->copy_prefix,
              c->namespaces[target_ns].mode == TIERD_NS_WRITE_BACK ? "write-back" : "read-cache",
              c->namespaces[target_ns].path, c->namespaces[target_ns].conf_line,
              c->namespaces[target_ns].backend, c->namespaces[target_ns].prefix);
}

/* The checks of the filters and triggers against the action and the rest of the config. */
static void check_filter_keys(struct builder *b, const struct policy_section *pc,
                              const struct policy_rule *r, const struct key_lines *kl)
{
    const struct policy_conf *c = b->cfg;
    if (r->keep_last >= 0 && r->match && r->re.re_nsub < 1)
        bfail(b, kl->keep_last,
              "[policy %s] keep_last with match = '%s' needs a capture group for the step, like "
              "match = ckpt/step_([0-9]+)/",
              pc->name, r->match);
    else if (r->dataset && !dataset_in_ns(r->dataset, c->namespaces[r->ns].path))
        bfail(b, kl->dataset,
              "[policy %s] dataset = %s is not a tree of the namespace %s (the rule's): name a "
              "version of a tree under it",
              pc->name, r->dataset, c->namespaces[r->ns].path);
    else if (r->watermark_pct && r->action != POLICY_DEMOTE)
        bfail(b, kl->action,
              "[policy %s] watermark only applies to action = demote (it frees the hot tier)",
              pc->name);
    else if (kl->level && r->action != POLICY_DEMOTE)
        bfail(b, kl->level,
              "[policy %s] level only applies to action = demote (the level it demotes out of)",
              pc->name);
    else if (r->level == POLICY_LEVEL_RAM && !c->disk_level)
        bfail(b, kl->level,
              "[policy %s] level = ram moves blocks into the disk level, and [cache] has none "
              "(set disk_dir and disk_size, or use level = all)",
              pc->name);
    else if (r->tenant && r->action == POLICY_EXPIRE)
        bfail(b, kl->tenant,
              "[policy %s] tenant cannot choose what expire deletes: a file's tenant is its last "
              "use through the mount, known only while tierd runs; filter by prefix, glob or "
              "match instead",
              pc->name);
}

/* Rule r of section pc: its keys set, then checked (the first error, in the order written). */
static void build_one(struct builder *b, const struct policy_section *pc, struct policy_rule *r)
{
    r->line = pc->line;
    r->target_line = pc->line;
    r->keep_last = -1;
    r->copy_backend = -1;
    r->tenant_id = -1;
    tier_strlcpy(r->name, pc->name, sizeof(r->name));
    struct key_lines kl = {.action = pc->line};
    set_keys(b, pc, r, &kl);
    if (b->rc)
        return;
    if (!r->prefix && !(r->prefix = strdup(""))) {
        b->rc = -ENOMEM;
        return;
    }
    if (!kl.has_ns) {
        bfail(b, pc->line,
              "[policy %s] is missing required key 'namespace' (the mount path of the namespace "
              "it applies to, like namespace = /ckpt)",
              pc->name);
        return;
    }
    if (!kl.has_action) {
        char allowed[128];
        config_choice_list(action_choices, allowed, sizeof(allowed));
        bfail(b, pc->line, "[policy %s] is missing required key 'action' (allowed: %s)", pc->name,
              allowed);
        return;
    }
    check_action_keys(b, pc, r, &kl);
    check_filter_keys(b, pc, r, &kl);
}

int policy_rules_build_conf(const struct policy_conf *cfg, struct policy_rules *out, char *err,
                            size_t errsz, int *err_line)
{
    struct builder b = {.cfg = cfg, .err = err, .errsz = errsz, .err_line = err_line};
    memset(out, 0, sizeof(*out));
    *err_line = 0;
    if (errsz)
        err[0] = '\0';
    size_t cap = cfg->nsections + cfg->nnamespaces;
    out->v = cap ? calloc(cap, sizeof(*out->v)) : NULL;
    if (cap && !out->v)
        return -ENOMEM;
    for (size_t i = 0; i < cfg->nsections && !b.rc; i++) {
        build_one(&b, &cfg->sections[i], &out->v[out->n]);
        out->n++;
    }
    for (size_t i = 0; i < out->n && !b.rc; i++) {
        for (size_t j = 0; j < i && !b.rc; j++) {
            const struct policy_rule *x = &out->v[j], *y = &out->v[i];
            if (copy_targets_clash(x, y))
                bfail(&b, y->target_line,
                      "[policy %s] target = %s:%s overlaps the target of [policy %s] at line %d "
                      "(%s:%s): both rules could write one key there, and an expire would then "
                      "trust a copy that holds the other rule's file; give each copy rule its own "
                      "target prefix, neither inside the other",
                      y->name, cfg->backends[y->copy_backend], y->copy_prefix, x->name,
                      x->target_line, cfg->backends[x->copy_backend], x->copy_prefix);
            else if (scopes_overlap(x, y) && actions_contradict(x, y))
                bfail(&b, y->line,
                      "[policy %s] (action = %s) contradicts [policy %s] at line %d (action = "
                      "%s): both apply to files under %s%s%s; narrow one's prefix, glob or match, "
                      "or remove one",
                      y->name, policy_action_name(y->action), x->name, x->line,
                      policy_action_name(x->action), cfg->namespaces[y->ns].path,
                      *y->prefix || *x->prefix ? "/" : "",
                      strlen(y->prefix) > strlen(x->prefix) ? y->prefix : x->prefix);
        }
    }
    /* [writeback] retention_keep: the built-in rule of each write-back namespace (it leaves the
     * files a rule of the namespace's own demotes, stages or pins to that rule: policy.c) */
    for (size_t n = 0; n < cfg->nnamespaces && !b.rc && cfg->retention_keep >= 0; n++) {
        if (cfg->namespaces[n].mode != TIERD_NS_WRITE_BACK)
            continue;
        struct policy_rule *r = &out->v[out->n++];
        tier_strlcpy(r->name, "writeback-retention", sizeof(r->name));
        r->builtin = true;
        r->local_only = true;
        r->ns = n;
        r->keep_last = cfg->retention_keep;
        r->copy_backend = -1;
        r->action = POLICY_DEMOTE;
        if (!(r->prefix = strdup("")))
            b.rc = -ENOMEM;
    }
    if (b.rc) {
        policy_rules_free(out);
        return b.rc;
    }
    return 0;
}

/* ---- evaluation ----------------------------------------------------------------------------- */

static bool filter_match(const struct policy_rule *r, const struct policy_file *f, regmatch_t *m)
{
    size_t pl = strlen(r->prefix);
    if (pl && strncmp(f->key, r->prefix, pl) != 0)
        return false;
    if (f->size < r->min_size || (r->max_size && f->size > r->max_size))
        return false;
    if (r->glob && fnmatch(r->glob, f->key, FNM_PATHNAME) != 0)
        return false;
    if (r->match && regexec(&r->re, f->key, m ? 2 : 0, m, 0) != 0)
        return false;
    if (r->dataset && !(f->flags & POLICY_F_INSET))
        return false;
    if (r->tenant && (f->tenant < 0 || f->tenant != r->tenant_id))
        return false;
    return true;
}

bool policy_matches(const struct policy_rule *r, const struct policy_file *f)
{
    return filter_match(r, f, NULL);
}

bool policy_yields(const struct policy_rules *rules, const struct policy_rule *r,
                   const struct policy_file *f)
{
    if (!r->builtin)
        return false;
    for (size_t i = 0; i < rules->n; i++) {
        const struct policy_rule *o = &rules->v[i];
        /* a rule that keeps its files hot, or a demote rule that ranks them (keep_last) or
         * takes them all (no trigger), decides for them; a demote rule that fires only now
         * and then (age, idle, watermark) leaves the retention's floor in place, and so does
         * one out of RAM only (it never drops a local copy) */
        bool decides = o->action == POLICY_STAGE || o->action == POLICY_PIN ||
                       (o->action == POLICY_DEMOTE && o->level != POLICY_LEVEL_RAM &&
                        (o->keep_last >= 0 || (!o->age_ms && !o->idle_ms && !o->watermark_pct)));
        if (!o->builtin && o->ns == r->ns && decides && filter_match(o, f, NULL))
            return true;
    }
    return false;
}

/* A file of a keep_last ranking: its group (key[0..glen)) and unit (key[uoff..uoff+ulen)). */
struct ranked {
    size_t idx;
    size_t glen, uoff, ulen;
    int64_t mtime;
    const char *key;
    bool by_time; /* unit = the file, newest by mtime (no regex) */
};

/* Units compare as numbers when both are digits ("step_10" after "step_9"); all-digit units
 * come before the others, which compare as bytes (a total order, as qsort needs). */
static int unit_cmp(const struct ranked *a, const struct ranked *b)
{
    if (a->by_time) {
        if (a->mtime != b->mtime)
            return a->mtime < b->mtime ? -1 : 1;
        return strcmp(a->key, b->key);
    }
    const char *x = a->key + a->uoff, *y = b->key + b->uoff;
    size_t xl = a->ulen, yl = b->ulen;
    bool dx = tier_all_digits(x, xl), dy = tier_all_digits(y, yl);
    if (dx != dy)
        return dx ? -1 : 1;
    if (dx) {
        while (xl > 1 && *x == '0')
            x++, xl--;
        while (yl > 1 && *y == '0')
            y++, yl--;
        if (xl != yl)
            return xl < yl ? -1 : 1;
    }
    size_t m = xl < yl ? xl : yl;
    int c = memcmp(x, y, m);
    if (c)
        return c;
    return xl < yl ? -1 : xl > yl;
}

static int group_cmp(const struct ranked *a, const struct ranked *b)
{
    size_t m = a->glen < b->glen ? a->glen : b->glen;
    int c = memcmp(a->key, b->key, m);
    if (c)
        return c;
    return a->glen < b->glen ? -1 : a->glen > b->glen;
}

/* group ascending, then unit descending (newest first) */
static int ranked_cmp(const void *pa, const void *pb)
{
    const struct ranked *a = pa, *b = pb;
    int c = group_cmp(a, b);
    if (c)
        return c;
    c = unit_cmp(a, b);
    if (c)
        return -c;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

struct by_mtime_ctx {
    size_t idx;
    int64_t mtime;
};

static int mtime_cmp(const void *pa, const void *pb)
{
    const struct by_mtime_ctx *a = pa, *b = pb;
    if (a->mtime != b->mtime)
        return a->mtime < b->mtime ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static bool selectable(const struct policy_rule *r, const struct policy_file *f, int64_t now_ns)
{
    if (!(f->flags & POLICY_F_DURABLE) || (f->flags & POLICY_F_PENDING))
        return false; /* only what the backend holds whole, and no newer generation waits */
    if ((f->flags & POLICY_F_CHANGED) && (r->action == POLICY_COPY || r->action == POLICY_EXPIRE))
        return false; /* which version is it? demote and the rest may, these two may not */
    if (r->age_ms && (now_ns - f->mtime_ns) / 1000000 < (int64_t)r->age_ms)
        return false;
    if (r->idle_ms) {
        int64_t last = f->atime_ns > f->mtime_ns ? f->atime_ns : f->mtime_ns;
        if ((now_ns - last) / 1000000 < (int64_t)r->idle_ms)
            return false;
    }
    return true;
}

size_t policy_select(const struct policy_rule *r, const struct policy_file *files, size_t n,
                     int64_t now_ns, unsigned hot_pct, size_t *sel)
{
    if (r->watermark_pct && hot_pct <= r->watermark_pct)
        return 0;
    size_t ns = 0;
    if (r->keep_last < 0) {
        struct by_mtime_ctx *v = malloc((n ? n : 1) * sizeof(*v));
        if (!v)
            return 0; /* nothing this pass; the next one tries again */
        for (size_t i = 0; i < n; i++)
            if (filter_match(r, &files[i], NULL) && selectable(r, &files[i], now_ns))
                v[ns++] = (struct by_mtime_ctx){i, files[i].mtime_ns};
        qsort(v, ns, sizeof(*v), mtime_cmp);
        for (size_t i = 0; i < ns; i++)
            sel[i] = v[i].idx;
        free(v);
        return ns;
    }
    struct ranked *v = malloc((n ? n : 1) * sizeof(*v));
    if (!v)
        return 0;
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        regmatch_t m[2];
        if (!filter_match(r, &files[i], r->match ? m : NULL))
            continue;
        struct ranked *x = &v[nr++];
        x->idx = i;
        x->key = files[i].key;
        x->mtime = files[i].mtime_ns;
        if (r->match && m[1].rm_so >= 0) {
            x->by_time = false;
            x->glen = (size_t)m[1].rm_so;
            x->uoff = (size_t)m[1].rm_so;
            x->ulen = (size_t)(m[1].rm_eo - m[1].rm_so);
        } else if (r->match) {
            nr--; /* the capture did not take part in the match: no step to rank */
        } else {
            const char *slash = strrchr(files[i].key, '/');
            x->by_time = true;
            x->glen = slash ? (size_t)(slash - files[i].key) + 1 : 0;
            x->uoff = x->ulen = 0;
        }
    }
    qsort(v, nr, sizeof(*v), ranked_cmp);
    /* walk each group newest unit first; past the K-th distinct unit, select (oldest unit first
     * in the output: the groups' tails reversed) */
    size_t g0 = 0;
    while (g0 < nr) {
        size_t g1 = g0 + 1;
        while (g1 < nr && group_cmp(&v[g0], &v[g1]) == 0)
            g1++;
        int64_t units = 0;
        size_t cut = g1;
        for (size_t i = g0; i < g1; i++) {
            if (i == g0 || unit_cmp(&v[i - 1], &v[i]) != 0)
                units++;
            if (units > r->keep_last) {
                cut = i;
                break;
            }
        }
        for (size_t i = g1; i > cut; i--)
            if (selectable(r, &files[v[i - 1].idx], now_ns))
                sel[ns++] = v[i - 1].idx;
        g0 = g1;
    }
    free(v);
    return ns;
}
