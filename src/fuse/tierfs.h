/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tierfs.h - the FUSE file system of tierd: the unified, read-only namespace tree served from the
 * block cache. Used by the daemon only (main.c; wiring.c builds its context); the operations
 * themselves live in fuse_ops_*.c.
 *
 * Lifecycle: tierfs_mount() (clears a stale mount first) -> tierfs_loop() (blocks, serves with
 * fuse_threads threads until SIGINT/SIGTERM/SIGHUP) -> tierfs_free() (unmounts).
 *
 * The mount is opened with struct tierfs_ctx, what it uses: the services it calls, the
 * namespaces and how a mount path resolves to one, and its slice of the config.
 * tierfs_ctx_tierd() (src/daemon/wiring.c) builds it over the daemon's state.
 */
#ifndef TIER_FUSE_TIERFS_H
#define TIER_FUSE_TIERFS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ns.h"

struct tierd_fuse;
struct cache;
struct tenant_reg;
struct hints;
struct wb;
struct pinmeta;
struct telemetry;
struct datasets;
struct access_log;

/* What the mount uses. The services and the namespaces are borrowed: they outlive the session
 * (tierfs_free). A service pointer is NULL when the daemon runs without it. */
struct tierfs_ctx {
    struct cache *cache;        /* the block cache (cache/cache.h) */
    struct tenant_reg *tenants; /* who is asking (tenant/tenant.h) */
    struct hints *hints;        /* epoch-order hints (hints/hints.h); NULL: no control files */
    struct wb *wb;              /* the burst buffer (writeback/wb.h); NULL: read-only mount */
    struct pinmeta *pinned;     /* pinned objects' attributes (stage/pinmeta.h) */
    struct telemetry *tele;     /* per-tenant series (telemetry/telemetry.h) */
    struct datasets *datasets;  /* dataset versions, for the view (datasets/dataset.h) */
    struct access_log *access;  /* last uses for the policies (lifecycle/access.h) */
    struct tierd_ns *ns;        /* the namespaces */
    size_t nns;
    /* resolve, is_virtual_dir, virtual_children (manifest is not called) */
    struct tierd_ns_ops ops;
    /* the root of namespace i's backend when that is a POSIX one (the allow_other warning),
     * else NULL */
    const char *ns_posix_root[TIERD_MAX_NAMESPACES];
    _Atomic bool *mounted;       /* set while the mount answers (read by the API); may be NULL */
    uint64_t start_ns;           /* the daemon's start (real time): directories' mtime */
    const char *test_fault_file; /* test builds only (pause points); else NULL */
    /* [mount] (docs/CONFIG.md) */
    const char *mount_path;
    bool allow_other;
    int fuse_threads;
    uint64_t attr_ttl_ms, entry_ttl_ms;
    bool attr_ttl_set, entry_ttl_set;
    int64_t mount_uid, mount_gid;
    int mount_umask;
    uint64_t max_dir_entries;
    /* write_buf: a write-back file's bytes are spliced from libfuse's pipe into the spool (only
     * where the pipe can hold a whole request: fs.pipe-max-size or CAP_SYS_RESOURCE) */
    bool splice_writes;
    /* no_open: the read-cache namespaces and the dataset version view on a second connection
     * without OPEN (fuse_noopen.c), mounted in a directory beside the API socket (api_socket's
     * directory, "noopen.mnt") and bound over the same directories of the mount */
    enum tierd_no_open no_open;
    const char *api_socket;
    struct tierd_fuse_counts *counts; /* [0] main connection, [1] no-open one; may be NULL */
    uint64_t version_list_ttl_ms;
    uint64_t readahead_blocks, readahead_max_bytes;
    uint64_t block_size; /* [cache] block_size */
    /* [writeback] */
    const char *wb_spool_dir;
    uint64_t wb_upload_deadline_ms;
};

/* Create the session and mount it at ctx->mount_path (created if missing); ctx is copied.
 * Installs the SIGINT/SIGTERM/SIGHUP handlers that end the loop. Returns 0 or -errno (message
 * in tier_err_msg()). */
int tierfs_mount(const struct tierfs_ctx *ctx, struct tierd_fuse **out);

/* Serve requests until the session ends. ready(arg) is called from another thread once the mount
 * answers (a stat of the mount point succeeded); may be NULL. Returns 0 or -errno. */
int tierfs_loop(struct tierd_fuse *f, void (*ready)(void *arg, int status), void *arg);

/* The signals that end the loop (SIGINT, SIGTERM, SIGHUP) into *set: threads other than the
 * loop's keep them blocked, so they land where the loop notices. */
void tierfs_stop_signals(sigset_t *set);

/* Unmount and free. NULL is a no-op. */
void tierfs_free(struct tierd_fuse *f);

/* If path is a dead FUSE mount ("Transport endpoint is not connected"), detach it. Returns 1 if
 * one was cleared, 0 if there was none, -errno if it could not be cleared. */
int tierfs_clear_stale_mount(const char *path);

#endif
