/* SPDX-License-Identifier: Apache-2.0 */
/*
 * manifest.h - the manifest of a dataset version (docs/VERSIONS.md): every file of a tree at the
 * moment of its commit (key relative to the tree, size, ETag), stored as one JSON object in the
 * namespace's own backend and published create-only (backend_put_new). Its text comes back from
 * the backend, so it is untrusted input: manifest_decode checks everything (format, types, key
 * syntax, strict key order, the totals) and refuses the whole manifest on the first fault; it
 * has a libFuzzer target (tests/fuzz/fuzz_manifest.c).
 *
 * Format (version 1; version 2, "tierd-dataset/2", is the same with "version_id" in files, and
 * is written only when a file has one):
 *   {"format": "tierd-dataset/1", "name", "path" (the tree's mount path), "namespace",
 *    "backend", "prefix" (the tree's key prefix in the backend), "commit_id" (32 hex digits),
 *    "created_at" (seconds since the epoch), "count", "bytes",
 *    "files": [{"key", "size", "etag", "version_id"?}, ...]}   keys strictly ascending (byte
 *    order); version_id only where the bucket keeps versions (reads then fetch that version)
 */
#ifndef TIER_DATASETS_MANIFEST_H
#define TIER_DATASETS_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#define MANIFEST_FORMAT "tierd-dataset/1"
/* written when a file has a version_id, so a tierd that knows only /1 refuses it clearly */
#define MANIFEST_FORMAT_V2 "tierd-dataset/2"
#define MANIFEST_NAME_MAX 64 /* a version's name: 1 to 63 of [A-Za-z0-9._-], alnum first */
#define MANIFEST_MAX_BYTES (512u << 20) /* the largest manifest decoded (~5 million files) */

struct manifest_file {
    char *key; /* relative to the tree's prefix; owned */
    uint64_t size;
    char *etag;       /* owned */
    char *version_id; /* the object's version in a versioned bucket (owned), or NULL */
};

struct manifest {
    char *name, *path, *ns, *backend, *prefix, *commit_id; /* owned */
    int64_t created_at;
    uint64_t bytes; /* the sum of the sizes */
    struct manifest_file *files;
    size_t n, cap;
};

/* A version name tierd accepts (it is also part of a backend key). */
int manifest_name_valid(const char *name);
/* Append a file (key copied); keys must come in strictly ascending order, be UTF-8 without
 * control characters, the ETag printable ASCII, the total at most 2^63-1. 0, -EINVAL, -ENOMEM. */
int manifest_add(struct manifest *m, const char *key, uint64_t size, const char *etag);
/* The same with the object's version id (NULL: none; else 1..1024 printable ASCII). */
int manifest_add_version(struct manifest *m, const char *key, uint64_t size, const char *etag,
                         const char *version_id);
/* The manifest as JSON text, malloc'd (NUL-terminated) into *out. 0 or -ENOMEM. */
int manifest_encode(const struct manifest *m, char **out, size_t *len);
/* Parse and check text of len bytes. 0, or -EINVAL with a message in err (what is wrong and
 * where). On failure *m is empty. */
int manifest_decode(const char *text, size_t len, struct manifest *m, char *err, size_t esz);
void manifest_fini(struct manifest *m);
/* What key (relative to the tree, no leading '/'; "" the version's root) is in m, by binary
 * search over its sorted keys: 0 a file (*idx its index), 1 a directory (some key starts with
 * "key/"; the root always), -ENOENT, -ENOMEM. */
int manifest_find(const struct manifest *m, const char *key, size_t *idx);
/* The index of the first file whose key is >= key (m->n: none), by binary search. */
size_t manifest_lower_bound(const struct manifest *m, const char *key);

#endif
