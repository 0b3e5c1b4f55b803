/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset.h - dataset versions (docs/VERSIONS.md): `commit` records every file under a mount path
 * (key, size, ETag, from the backend's listing) in a manifest (manifest.h) and publishes it in
 * the namespace's own backend, create-only, under the reserved prefix DATASET_RESERVED in the
 * namespace's key prefix: of two committers of one name exactly one wins. No data is copied.
 * list, show and delete read or remove manifests only (delete never touches data).
 *
 * The manifest of version NAME of the tree at mount path P (relative path R inside its
 * namespace, "" for the namespace root) has the key
 *   <namespace prefix>.tierd-datasets/<R, '%' and '@' percent-encoded>/@<NAME>
 * in the namespace's backend ("...tierd-datasets/@NAME" for the namespace root), so the versions
 * of a tree and of a tree inside it sit side by side (no encoded segment starts with '@'). The
 * reserved name is hidden from listings through the mount and refused as a file name there
 * (fuse_listing.c, fuse_ops_attr.c, fuse_ops_write.c), and skipped by commits.
 *
 * The calls do backend I/O on the caller's thread (the control API's, the mount's); they take no
 * lock. The service is opened with struct datasets_ctx, what it uses: the namespaces and how a
 * mount path resolves to one (src/daemon/wiring.c builds it over the daemon's state; a test over
 * a namespace of its own).
 */
#ifndef TIER_DATASETS_DATASET_H
#define TIER_DATASETS_DATASET_H

#include <stdbool.h>
#include <stddef.h>

#include "core/ns.h"
#include "datasets/manifest.h"

#define DATASET_RESERVED ".tierd-datasets" /* a name at a namespace's root */

/* What the dataset versions use, borrowed (it outlives the service): the namespaces (the view
 * lists those under a path) and ops.resolve, a mount path to its namespace and key (the other
 * ops are not called). */
struct datasets_ctx {
    struct tierd_ns *ns;
    size_t nns;
    struct tierd_ns_ops ops;
};

/* The service: its context and the generation counter (dataset_generation). */
struct datasets;
/* A service over ctx (copied); NULL on ENOMEM. */
struct datasets *datasets_open(const struct datasets_ctx *ctx);
/* NULL is a no-op. After its callers (the mount, the API, the stager, the policies, the hints). */
void datasets_close(struct datasets *ds);

/* Commit the tree at mount path `path` as version `name`. On success *out is the manifest as
 * published. -EEXIST: the name is taken (message names the version and its commit time);
 * -ENOENT: nothing under path; -EINVAL: bad name or path; others from the backend. */
int dataset_commit(struct datasets *ds, const char *path, const char *name, struct manifest *out);
/* The names of the versions of path, sorted, malloc'd (dataset_names_free). */
int dataset_list(struct datasets *ds, const char *path, char ***names, size_t *n);
void dataset_names_free(char **names, size_t n);
/* Read and check version name of path (manifest_decode); -ENOENT when there is none, -EBADMSG
 * with a message for a malformed or truncated manifest, or one of another tree (nothing is
 * served from it), -EINVAL for a bad name or path. */
int dataset_show(struct datasets *ds, const char *path, const char *name, struct manifest *out);
/* dataset_show, refusing a manifest whose text is over max_text bytes (its size asked first)
 * before it is read and decoded (-E2BIG, with a message). */
int dataset_show_max(struct datasets *ds, const char *path, const char *name, size_t max_text,
                     struct manifest *out);
/* Remove the manifest of version name (never data). -ENOENT when there is none. */
int dataset_delete(struct datasets *ds, const char *path, const char *name);
/* The mount's read-only view of the versions (fuse_ctl_versions.c):
 * <mount>/.tierd/datasets/TREE@NAME */
#define DATASET_VIEW "/.tierd/datasets"
/* Parse a mount path under DATASET_VIEW: 1 for the view's directories above a version; 0 with
 * the version's tree (malloc'd mount path, "/ds/a"), name (MANIFEST_NAME_MAX bytes) and rest
 * ("" for the version's root, else "/key..." inside it); -ENOENT for a path not under the view,
 * -ENOMEM. */
int dataset_view_path(const char *path, char **tree, char *name, const char **rest);
/* The names in the view's directory `path` above the versions (dataset_view_path gave 1:
 * "/.tierd/datasets" or "/.tierd/datasets/ds/sub"): the next segment of every namespace under it
 * and of every tree under it that has versions, and TREE@NAME for each version of a tree just
 * under it; sorted, unique, malloc'd (dataset_names_free). Backend listings of the versions'
 * reserved prefix, a few per call; 0, -EINVAL (not such a path), or the listing's error. A
 * namespace whose versions cannot be listed now is logged and listed without them (*partial set
 * when partial is not NULL): the others stay listed. */
int dataset_view_list(struct datasets *ds, const char *path, char ***names, size_t *n,
                      bool *partial);
/* A count of the versions committed and deleted through ds: a listing of the view made
 * before it changed may miss a version or show a deleted one (the mount's cache of them). */
uint64_t dataset_generation(struct datasets *ds);
/* Is name, at the root of a namespace, the reserved one? */
bool dataset_reserved_name(const char *name);
/* Is key (of namespace ns) the reserved name or under it? Such keys are not files of the mount. */
bool dataset_reserved_key(const struct tierd_ns *ns, const char *key);
struct backend_entry;
struct tier_ioctx;
/* Call fn(ud, e) for every object under prefix in ns's backend, every page (versions: the
 * current version of each, with its id: backend_list_versions), leaving out common prefixes, S3
 * "folder" markers and the versions' manifests; the commit and the lifecycle policies list
 * with it. Stops at fn's first non-zero return, which it returns; else 0 or the listing's
 * error. io: whose calls. */
int dataset_walk_objects(struct tierd_ns *ns, const struct tier_ioctx *io, const char *prefix,
                         bool versions, int (*fn)(void *ud, const struct backend_entry *e),
                         void *ud);

#endif
