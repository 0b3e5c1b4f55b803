/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_perm.c - what a caller who is not an administrator may read through the control API: the
 * namespaces the mount would let it read (api_caller_reads), and the answers and filters the
 * routes that name files use (docs/API.md, "What a caller who is not an administrator sees").
 * No state; called on the HTTP server's connection threads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_int.h"
#include "core/state.h"

/* The owner, group and umask the mount shows for a node (fuse_session.c, perm_init). */
struct shown_perm {
    uid_t uid;
    gid_t gid;
    mode_t umask;
};

static struct shown_perm mount_perm(const struct tierd_config *c)
{
    return (struct shown_perm){
        .uid = c->mount_uid >= 0 ? (uid_t)c->mount_uid : getuid(),
        .gid = c->mount_gid >= 0 ? (gid_t)c->mount_gid : getgid(),
        .umask =
            c->mount_umask >= 0 ? (mode_t)c->mount_umask : (mode_t)(c->allow_other ? 027 : 022),
    };
}

static struct shown_perm ns_perm(const struct tierd_config *c, const struct tierd_ns_conf *nc)
{
    struct shown_perm m = mount_perm(c);
    return (struct shown_perm){
        .uid = nc->uid >= 0 ? (uid_t)nc->uid : m.uid,
        .gid = nc->gid >= 0 ? (gid_t)nc->gid : m.gid,
        .umask = nc->umask >= 0 ? (mode_t)nc->umask : m.umask,
    };
}

/* The permissions the mount shows for the directory path[0..len) (as fuse_inode.c's
 * tfs_path_perm: the first namespace holding it, else the mount's: the root and the virtual
 * directories above the namespaces). */
static struct shown_perm dir_perm(const struct tierd *d, const char *path, size_t len)
{
    for (size_t i = 0; i < d->nns; i++) {
        const char *np = d->ns[i].conf->path;
        size_t l = strlen(np);
        if (l <= len && strncmp(path, np, l) == 0 && (l == len || path[l] == '/'))
            return ns_perm(&d->cfg, d->ns[i].conf);
    }
    return mount_perm(&d->cfg);
}

/* Does the caller get the bits want (4: read, 1: search) on a directory shown as p with mode
 * 0555 & ~umask? The kernel's order: the owner's class, else the group's (primary or
 * supplementary gid), else the others'. With the supplementary groups unknown (SO_PEERGROUPS
 * failed), a caller who is neither owner nor of the primary group might be a member: refused
 * where the group's and the others' bits differ. */
static bool caller_may(const struct api_request *rq, struct shown_perm p, mode_t want)
{
    mode_t mode = 0555 & ~p.umask;
    if (rq->uid == p.uid)
        return ((mode >> 6) & want) == want;
    mode_t grp = (mode >> 3) & want, oth = mode & want;
    bool member = rq->gid == p.gid;
    for (size_t i = 0; i < rq->ngroups && !member; i++)
        member = rq->groups[i] == p.gid;
    if (!member && rq->groups_unknown && grp != oth)
        return false;
    return (member ? grp : oth) == want;
}

bool api_caller_reads(const struct tierd *d, const struct api_request *rq,
                      const struct tierd_ns_conf *nc)
{
    if (rq->admin)
        return true;
    const struct tierd_config *c = &d->cfg;
    if (!rq->peer || !c->allow_other) /* without allow_other only tierd's user enters the mount */
        return false;
    /* with default_permissions the kernel wants search (x) on every directory above the
     * namespace, from the mount's root down, then read and search on the namespace itself (its
     * listing and what lies in it) */
    const char *p = nc->path;
    for (size_t len = 0;;) {
        if (!caller_may(rq, len ? dir_perm(d, p, len) : mount_perm(c), 01))
            return false;
        const char *next = strchr(p + len + 1, '/');
        if (!next)
            break;
        len = (size_t)(next - p);
    }
    return caller_may(rq, ns_perm(c, nc), 05);
}

/* The namespace of a mount path, or NULL. */
const struct tierd_ns_conf *api_ns_of(struct tierd *d, const char *path)
{
    struct tierd_ns *ns = NULL;
    char *key = NULL;
    bool is_root = false;
    if (!path || tierd_resolve(d, path, &ns, &key, &is_root) != 0)
        return NULL;
    free(key);
    return ns->conf;
}

unsigned api_reply_not_readable(struct api_reply *out, const struct api_request *rq,
                                const char *path, const struct tierd_ns_conf *nc)
{
    return api_reply_error_status(
        out, 403, -EACCES,
        "%s: uid %u may not read namespace %s (its [namespace] or [mount] "
        "uid, gid and umask, and [mount] allow_other, decide who may)",
        path, (unsigned)rq->uid, nc->path);
}

/* Leave out of the array a (of objects) those whose "path" lies in a namespace the caller may
 * not read (or in none); returns how many were left out. */
size_t api_filter_paths(struct tierd *d, const struct api_request *rq, json_t *a)
{
    size_t dropped = 0;
    if (rq->admin || !json_is_array(a))
        return 0;
    for (size_t i = json_array_size(a); i-- > 0;) {
        const char *p = json_string_value(json_object_get(json_array_get(a, i), "path"));
        const struct tierd_ns_conf *nc = api_ns_of(d, p);
        if (!nc || !api_caller_reads(d, rq, nc)) {
            json_array_remove(a, i);
            dropped++;
        }
    }
    return dropped;
}
