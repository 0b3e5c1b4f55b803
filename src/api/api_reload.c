/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_reload.c - POST /v1/reload (tierctl reload, systemd's ExecReload): read the config file
 * again, apply what can change while tierd runs, and say which changed sections need a restart.
 * One reload at a time (inih's options are globals).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/strutil.h"
#include "api/api_int.h"
#include "lifecycle/lifecycle.h"
#include "core/state.h"

static bool str_differ(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* One section's "key=value" lines of an INI text, trimmed, in file order (the reload's
 * comparison: any difference but in the keys that apply live names the section). */
struct ini_sec {
    char *name;
    char **kv;
    size_t n;
};

static void ini_secs_free(struct ini_sec *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < v[i].n; k++)
            free(v[i].kv[k]);
        free(v[i].kv);
        free(v[i].name);
    }
    free(v);
}

static char *trim_dup(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    return strndup(s, n);
}

/* The sections of text (NULL: none). 0 or -ENOMEM. */
static int ini_secs(const char *text, struct ini_sec **out, size_t *nout)
{
    struct ini_sec *v = NULL;
    size_t n = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char *t = trim_dup(l, len);
        l = e ? e + 1 : l + len;
        if (!t)
            goto oom;
        if (!*t || *t == ';' || *t == '#') {
            free(t);
            continue;
        }
        if (*t == '[') {
            struct ini_sec *nv = realloc(v, (n + 1) * sizeof(*nv));
            if (!nv) {
                free(t);
                goto oom;
            }
            v = nv;
            char *close = strchr(t, ']');
            v[n] = (struct ini_sec){
                .name = trim_dup(t + 1, close ? (size_t)(close - t - 1) : strlen(t + 1))};
            free(t);
            if (!v[n++].name)
                goto oom;
            continue;
        }
        if (n == 0) { /* a key before any section: the config check refuses it anyway */
            free(t);
            continue;
        }
        char *eq = strchr(t, '='), *kv = NULL;
        if (eq) {
            char *k = trim_dup(t, (size_t)(eq - t)), *val = trim_dup(eq + 1, strlen(eq + 1));
            if (k && val && asprintf(&kv, "%s=%s", k, val) < 0)
                kv = NULL;
            free(k);
            free(val);
        } else {
            kv = strdup(t);
        }
        free(t);
        char **nkv = kv ? realloc(v[n - 1].kv, (v[n - 1].n + 1) * sizeof(*nkv)) : NULL;
        if (!nkv) {
            free(kv);
            goto oom;
        }
        v[n - 1].kv = nkv;
        v[n - 1].kv[v[n - 1].n++] = kv;
    }
    *out = v;
    *nout = n;
    return 0;
oom:
    ini_secs_free(v, n);
    return -ENOMEM;
}

/* Does section s (of one text) say the same as section o, the live keys left out? */
static bool sec_same(const struct ini_sec *s, const struct ini_sec *o)
{
    bool daemon = strcmp(s->name, "daemon") == 0;
    size_t i = 0, j = 0;
    for (;;) {
        while (daemon && i < s->n && strncmp(s->kv[i], "log_level=", 10) == 0)
            i++;
        while (daemon && j < o->n && strncmp(o->kv[j], "log_level=", 10) == 0)
            j++;
        if (i == s->n || j == o->n)
            return i == s->n && j == o->n;
        if (strcmp(s->kv[i++], o->kv[j++]) != 0)
            return false;
    }
}

static const struct ini_sec *sec_find(const struct ini_sec *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

/* Name in restart every section of the running config's text (old) and the new one that
 * differs, but for what applies live ([daemon] log_level and the [policy NAME] sections). */
static int text_changes(const char *old, const char *new, json_t *restart)
{
    struct ini_sec *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int rc = ini_secs(old, &a, &na);
    if (rc == 0)
        rc = ini_secs(new, &b, &nb);
    for (int pass = 0; rc == 0 && pass < 2; pass++) {
        const struct ini_sec *x = pass ? b : a, *y = pass ? a : b;
        size_t nx = pass ? nb : na, ny = pass ? na : nb;
        for (size_t i = 0; i < nx; i++) {
            if (strncmp(x[i].name, "policy ", 7) == 0)
                continue;
            const struct ini_sec *o = sec_find(y, ny, x[i].name);
            if (pass == 1 && o)
                continue; /* compared in the first pass */
            if (!o || !sec_same(&x[i], o)) {
                char buf[160];
                snprintf(buf, sizeof(buf), "[%.150s]", x[i].name);
                json_array_append_new(restart, json_string(buf));
            }
        }
    }
    ini_secs_free(a, na);
    ini_secs_free(b, nb);
    return rc;
}

/* Do the namespaces or backends of nc differ from the running ones (by position, as the
 * policy rules refer to them)? Then no policy reload. */
static bool needs_restart(const struct tierd_config *c, const struct tierd_config *nc)
{
    bool layout = c->nnamespaces != nc->nnamespaces || c->nbackends != nc->nbackends;
    for (size_t i = 0; !layout && i < c->nnamespaces; i++) {
        const struct tierd_ns_conf *a = &c->namespaces[i], *b = &nc->namespaces[i];
        layout = str_differ(a->path, b->path) || str_differ(a->backend, b->backend) ||
                 str_differ(a->prefix, b->prefix) || a->mode != b->mode;
    }
    for (size_t i = 0; !layout && i < c->nbackends; i++)
        layout = str_differ(c->backends[i].name, nc->backends[i].name) ||
                 str_differ(c->backends[i].type, nc->backends[i].type);
    return layout;
}

/* POST /v1/reload: re-read the config file tierd started with; apply what can change live
 * ([daemon] log_level, the [policy] sections and [writeback] retention_keep's built-in rules),
 * name what needs a restart. A config with an error changes nothing (400 with FILE:LINE). */
unsigned api_reload(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                    const char *rest)
{
    (void)rq;
    (void)rest;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* inih's options are globals */
    pthread_mutex_lock(&mu);
    struct tierd_config nc;
    char err[1024];
    int rc = tierd_config_load(d->cfg.file, &nc, err, sizeof(err));
    pthread_mutex_unlock(&mu);
    if (rc) {
        tierd_config_fini(&nc);
        return api_reply_error(out, rc, "%s (nothing was changed)", err);
    }
    json_t *applied = json_array(), *restart = json_array();
    bool layout = needs_restart(&d->cfg, &nc);
    /* what the file says now against what tierd started with: each other section that differs
     * is named (the running values stay until a restart) */
    char *text = tier_read_text(d->cfg.file);
    if (!text || text_changes(d->cfg_text, text, restart) != 0)
        json_array_append_new(restart,
                              json_string("(cannot compare the sections: restart to be sure)"));
    free(text);
    enum tier_log_level lvl = TIER_LOG_INFO;
    (void)tier_log_level_parse(nc.log_level, &lvl);
    if (!d->verbose && lvl != tier_log_get_level()) {
        tier_log_set_level(lvl);
        json_array_append_new(applied, json_string("[daemon] log_level"));
    }
    struct policy_engine *pe = __atomic_load_n(&d->policy, __ATOMIC_ACQUIRE);
    unsigned ret = 0;
    if (layout) {
        /* the rules name namespaces and backends by position: only a restart applies them */
        json_array_append_new(restart,
                              json_string("[policy] sections (not applied: the namespaces or "
                                          "backends changed)"));
    } else if (pe) {
        char perr[600] = "out of memory";
        struct policy_conf *pc = tierd_policy_conf_new(&nc);
        rc = pc ? policy_engine_reload_conf(pe, pc, perr, sizeof(perr)) : -ENOMEM;
        tierd_policy_conf_free(pc);
        if (rc)
            ret = api_reply_error(out, rc, "%s (the other changes: %zu applied)", perr,
                                  json_array_size(applied));
        else
            json_array_append_new(applied, json_string("[policy] sections"));
    } else if (nc.npolicies) {
        json_array_append_new(restart, json_string("[policy] sections (no policy engine runs)"));
    }
    tierd_config_fini(&nc);
    if (ret) {
        json_decref(applied);
        json_decref(restart);
        return ret;
    }
    log_info("tierd: reloaded %s: %zu change(s) applied, %zu need a restart", d->cfg.file,
             json_array_size(applied), json_array_size(restart));
    return api_reply_json(out, 200,
                          json_pack("{s:s, s:o, s:o}", "file", d->cfg.file, "applied", applied,
                                    "restart_needed", restart));
}
