/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tierfs.h - the FUSE file system of tierd: the unified, read-only namespace tree served from the
 * block cache. Used by main() only; the operations themselves live in fuse_ops_*.c.
 *
 * Lifecycle: tierfs_mount() (clears a stale mount first) -> tierfs_loop() (blocks, serves with
 * cfg.fuse_threads threads until SIGINT/SIGTERM/SIGHUP) -> tierfs_free() (unmounts).
 */
#ifndef TIER_FUSE_TIERFS_H
#define TIER_FUSE_TIERFS_H

#include <signal.h>
#include <stdbool.h>

struct tierd;
struct tierd_fuse;

/* Create the session and mount it at d->cfg.mount_path (created if missing). Installs the
 * SIGINT/SIGTERM/SIGHUP handlers that end the loop. Returns 0 or -errno (message in
 * tier_err_msg()). */
int tierfs_mount(struct tierd *d, struct tierd_fuse **out);

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
