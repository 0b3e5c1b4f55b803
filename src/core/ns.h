/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/ns.h - a namespace of the mount as the services see it: a sub-tree of the mount
 * ("/datasets") served from a backend under a key prefix, with its mode, and how a service opened
 * with a narrow context resolves a mount path to one (struct tierd_ns_ops, built over the daemon's
 * state by src/daemon/wiring.c). The namespaces are made by main() from the config and live as
 * long as the daemon; a struct tierd_ns * stays valid that long.
 */
#ifndef TIER_CORE_NS_H
#define TIER_CORE_NS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backend;
struct manifest;

#define TIERD_MAX_NAMESPACES 32

enum tierd_ns_mode {
    TIERD_NS_READ_CACHE = 0, /* read-only, cached; mutations return EROFS */
    TIERD_NS_WRITE_BACK = 1, /* checkpoint burst buffer (issue 5, src/writeback/wb.h) */
};

/* When close() of a file written into a write-back namespace returns (docs/CONFIG.md). */
enum tierd_durability {
    TIERD_DURABILITY_LOCAL = 0,  /* fsync'd on the local spool and journalled (default) */
    TIERD_DURABILITY_REMOTE = 1, /* complete in the backend */
};

/* [mount] no_open (docs/CONFIG.md): serve the read-cache namespaces and the dataset version
 * view on a second FUSE connection without OPEN/RELEASE (src/fuse/fuse_noopen.c). */
enum tierd_no_open {
    TIERD_NO_OPEN_AUTO =
        0,                /* on where the kernel is known to be safe (uname -r) and tierd is root */
    TIERD_NO_OPEN_ON = 1, /* on wherever it can be set up (root) */
    TIERD_NO_OPEN_OFF = 2, /* one connection, OPEN for every file */
};

/* Requests one FUSE connection received (written by the FUSE threads, read by the API): the
 * main one ([0]) and the no-open one ([1]) each count theirs. */
struct tierd_fuse_counts {
    _Atomic uint64_t open, release, read, opendir;
};

struct tierd_ns_conf {
    char *path;    /* mount sub-tree, "/datasets" (no trailing slash, one segment or more) */
    char *backend; /* backend name */
    char *prefix;  /* key prefix inside the backend, "" or ending in '/' */
    enum tierd_ns_mode mode;
    enum tierd_durability durability; /* write-back only; default [writeback] durability */
    /* owner and umask of the files and directories of this namespace in the mount; -1: as
     * [mount] (docs/CONFIG.md, "Permissions") */
    int64_t uid, gid;
    int umask;
    /* metadata TTLs of the namespace's files and directories; TIERD_TTL_UNSET: [mount]'s when
     * set there, else TIERD_READ_CACHE_TTL_MS for a read-cache namespace (datasets are
     * immutable by convention) and [mount]'s default for a write-back one */
    uint64_t attr_ttl_ms, entry_ttl_ms;
    int conf_line;
};

#define TIERD_TTL_UNSET UINT64_MAX
#define TIERD_READ_CACHE_TTL_MS 60000

struct tierd_ns {
    const struct tierd_ns_conf *conf;
    struct backend *be;
};

/* Namespace resolution and dataset versions for a service that does not hold the daemon's state
 * (hints, stage, datasets, the FUSE layer): called from any thread while the service runs. */
struct tierd_ns_ops {
    /* tierd_resolve(): a mount path to its namespace and key (malloc'd); 0 or -errno */
    int (*resolve)(void *ud, const char *path, struct tierd_ns **ns, char **key, bool *is_root);
    /* dataset_show_max(): version name of the tree at mount path tree, its manifest text at
     * most max_text bytes (SIZE_MAX: no bound); 0 or -errno */
    int (*manifest)(void *ud, const char *tree, const char *name, size_t max_text,
                    struct manifest *out);
    /* tierd_is_virtual_dir(): is path a directory above one or more namespace roots? */
    bool (*is_virtual_dir)(void *ud, const char *path);
    /* tierd_virtual_children(): fn(name, len, arg) for each child of the virtual directory
     * path, in namespace order, without duplicates */
    void (*virtual_children)(void *ud, const char *path,
                             void (*fn)(const char *name, size_t len, void *arg), void *arg);
    void *ud;
};

#endif
