/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resolve.c - the unified tree: which namespace (backend + key prefix) a mount path belongs to,
 * and which directories exist above the namespace roots ("/" and, for a namespace "/a/b", "/a").
 *
 * Called by the FUSE operations, the control API and the stager, from any thread. Reads only the
 * immutable namespace table of struct tierd, so it takes no lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "daemon/tierd.h"

/* Does namespace path ns cover p (p == ns or p is below ns)? Returns the rest of p after ns
 * ("" or "/x/y"), or NULL. */
static const char *under(const char *ns, const char *p)
{
    size_t n = strlen(ns);
    if (strncmp(ns, p, n) != 0)
        return NULL;
    if (p[n] != '\0' && p[n] != '/')
        return NULL;
    return p + n;
}

int tierd_resolve(struct tierd *d, const char *path, struct tierd_ns **ns, char **key,
                  bool *is_root)
{
    if (!path || path[0] != '/') {
        tier_err_set("path '%s' must start with '/'", path ? path : "(null)");
        return -EINVAL;
    }
    /* tolerate one trailing slash from users ("/datasets/x/") */
    size_t plen = strlen(path);
    char *clean = strndup(path, plen);
    if (!clean)
        return -ENOMEM;
    while (plen > 1 && clean[plen - 1] == '/')
        clean[--plen] = '\0';

    int rc = -ENOENT;
    for (size_t i = 0; i < d->nns; i++) {
        const char *rest = under(d->ns[i].conf->path, clean);
        if (!rest)
            continue;
        const char *prefix = d->ns[i].conf->prefix ? d->ns[i].conf->prefix : "";
        size_t pl = strlen(prefix);
        const char *rel = *rest == '/' ? rest + 1 : rest;
        size_t rl = strlen(rel);
        char *k = malloc(pl + rl + 1);
        if (!k) {
            rc = -ENOMEM;
            goto out;
        }
        memcpy(k, prefix, pl);
        memcpy(k + pl, rel, rl + 1);
        if (rl > 0 && backend_key_valid(k, pl + rl, false) != 0) {
            free(k);
            rc = -EINVAL;
            goto out;
        }
        *ns = &d->ns[i];
        *key = k;
        *is_root = rl == 0;
        rc = 0;
        goto out;
    }
    tier_err_set("path '%s' is in no namespace", path);
out:
    free(clean);
    return rc;
}

bool tierd_is_virtual_dir(const struct tierd *d, const char *path)
{
    if (strcmp(path, "/") == 0)
        return true;
    for (size_t i = 0; i < d->nns; i++) {
        const char *rest = under(path, d->ns[i].conf->path);
        if (rest && *rest == '/')
            return true;
    }
    return false;
}

void tierd_virtual_children(const struct tierd *d, const char *path,
                            void (*fn)(const char *name, size_t len, void *arg), void *arg)
{
    bool root = strcmp(path, "/") == 0;
    for (size_t i = 0; i < d->nns; i++) {
        const char *nsp = d->ns[i].conf->path;
        const char *rest = root ? nsp : under(path, nsp);
        if (!rest || *rest != '/')
            continue;
        const char *name = rest + 1;
        const char *end = strchr(name, '/');
        size_t len = end ? (size_t)(end - name) : strlen(name);
        /* skip a name an earlier namespace already produced */
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++) {
            const char *r2 = root ? d->ns[j].conf->path : under(path, d->ns[j].conf->path);
            if (!r2 || *r2 != '/')
                continue;
            const char *n2 = r2 + 1;
            const char *e2 = strchr(n2, '/');
            size_t l2 = e2 ? (size_t)(e2 - n2) : strlen(n2);
            dup = l2 == len && memcmp(n2, name, len) == 0;
        }
        if (!dup)
            fn(name, len, arg);
    }
}
