/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hints.h - epoch-order hints: a tenant names the files it will read next, in order; tierd keeps
 * a prefetch window ahead of the reader and holds what it fetched by next use (Belady), in the
 * tenant's own hot-tier space (docs/HINTS.md, docs/ARCHITECTURE.md "Epoch-order hints").
 *
 * Callers: the control API (POST/GET/DELETE /v1/hints: an administrator for any tenant, anyone
 * else for the tenant its socket peer resolves to), the mount's control files
 * (<mount>/.tierd/hints/NAME, src/fuse/fuse_ctl_hints.c: for the writer's tenant), the FUSE read
 * path (hints_observe, once per read), main.c (new/free).
 *
 * A hint set has a name, a tenant and an order of files (mount paths; a file may occur many
 * times: one entry per epoch it is read in); appending extends the known future (the next epoch's
 * order before this one ends). Per set the engine keeps a hintwin (src/hints/hintwin.h) over the
 * order: files entering its window are stat'ed and fetched by the engine's workers as the set's
 * tenant, in the tenant's class (work done for the tenant, charged to its QoS share), and held in
 * the cache (cache_fetch_block_hinted); the reader's reads move the window on; before a fetch
 * would take the tenant's sets past their budget (min of [cache] hint_cache_size, the cache's hint
 * share and the tenant's cache_quota), the held file whose next use is farthest is released and
 * evicted (hintwin_victim), one never used again first.
 *
 * What hint state may cost is bounded (hints_submit): per tenant of a caller who is no
 * administrator its sets, entries and bytes, and the bytes of all sets; per submission the
 * dataset manifests it reads (each version once).
 *
 * Thread-safe: one mutex for the engine; no I/O under it.
 */
#ifndef TIER_HINTS_HINTS_H
#define TIER_HINTS_HINTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ns.h"

struct backend;
struct backend_stat;
struct hints;
struct manifest;
struct cache;
struct tenant_reg;

#define HINTS_NAME_MAX 64          /* bytes of a set's name, NUL included */
#define HINTS_SETS_MAX 256         /* sets at once (all tenants) */
#define HINTS_ENTRIES_MAX 10000000 /* entries of one set (about 13 bytes each, plus its files) */
/* One submission's bytes for a caller who is no administrator, whether by POST /v1/hints (its
 * body) or by a control file under the mount (the file): one size limit for both. */
#define HINTS_USER_BYTES_MAX (4u << 20)
/* One submission reads each dataset version it names once (all of them kept decoded while it
 * resolves, so paths of many versions in any order cost one read each), and at most this many
 * versions and decoded manifest bytes: past them it is refused (-E2BIG), split it by version. */
#define HINTS_REQ_VERSIONS 16
#define HINTS_REQ_MANIFEST_BYTES (1ull << 30)
/* Decoded manifest bytes all submissions in flight hold together; past it a submission is
 * refused (-EBUSY: try again later). */
#define HINTS_MANIFEST_BYTES_ALL (2ull << 30)

/* What the engine uses, all borrowed for its life (built by main(): hints_ctx_tierd() in
 * src/daemon/wiring.c). */
struct hints_ctx {
    struct cache *cache;        /* where hinted blocks are held; NULL: none (fetches fail) */
    struct tenant_reg *tenants; /* a tenant's name and class; NULL: "default", training */
    struct tierd_ns *ns;        /* the namespaces (a read's backend to its namespace) */
    size_t nns;
    struct tierd_ns_ops ops;     /* mount paths and dataset versions */
    const char *test_fault_file; /* test builds' pause points (timeutil.h); else NULL */
    /* the [cache] hint keys (docs/CONFIG.md); 0 gives each one's default */
    int threads;                           /* fetch workers; 0: 16 */
    uint64_t window_files, window_bytes;   /* the prefetch window */
    uint64_t cache_bytes;                  /* a set's budget; 0: half of hot_bytes */
    uint64_t hot_bytes;                    /* the hot tier's size */
    int tenant_sets;                       /* per tenant of a non-administrator; 0: no bound */
    uint64_t tenant_entries, tenant_bytes; /* ... 0: no bound */
    uint64_t state_bytes;                  /* all sets together; 0: no bound */
};

int hints_new(const struct hints_ctx *ctx, struct hints **out);
/* Stops the workers (fetches in flight finish), releases every held block. NULL: no-op. */
void hints_free(struct hints *h);

/* Give set `name` of tenant the order paths[0..n) (mount paths, or a dataset version's file
 * paths under DATASET_VIEW: fetched pinned to the manifest, its manifest read once per version
 * and submission). append: after the set's known
 * order (a new set if none); else the set is replaced (its held blocks released). The whole list
 * is checked first: nothing changes on error. Every path is resolved before it costs the set
 * memory: its namespace, and for a version's file the version and the file in its manifest (a
 * current file's existence is not asked of the backend: that would be a request per path; one
 * that is gone counts an error when it is fetched). Limits: admin false (a caller who is no
 * administrator) is held to the tenant's caps ([cache] hint_tenant_sets, hint_tenant_entries,
 * hint_tenant_size: -EDQUOT), everyone to the bytes of all hint state (hint_state_size:
 * -ENOSPC); the bytes are an estimate of the memory a set takes (hints_set_stats.bytes).
 * 0, -EINVAL (a bad name or path, a path outside
 * every namespace, a path of a write-back namespace, a version that cannot be read or a path
 * that is no file of it: tier_err_msg() names it), -E2BIG (over
 * HINTS_ENTRIES_MAX entries, or over HINTS_REQ_VERSIONS / HINTS_REQ_MANIFEST_BYTES), -EBUSY
 * (the submissions in flight at HINTS_MANIFEST_BYTES_ALL of manifests), -ENOSPC
 * (HINTS_SETS_MAX sets, or the state budget), -EDQUOT (a tenant's cap), -EEXIST (the name is
 * another tenant's), -ENOMEM. tier_err_msg() says which limit and what to do. */
int hints_submit(struct hints *h, const char *name, uint32_t tenant, const char *const *paths,
                 size_t n, bool append, bool admin);
/* What a decoded manifest takes in memory, about (what HINTS_REQ_MANIFEST_BYTES and
 * HINTS_MANIFEST_BYTES_ALL count): its strings (keys, ETags, version ids) and file array, and
 * 16 bytes of the allocator's for each. */
uint64_t hints_manifest_mem(const struct manifest *m);
/* Manifests read by submissions since hints_new (each a backend read and a decode). */
uint64_t hints_manifest_reads(struct hints *h);
/* Is name a valid set name: 1 to HINTS_NAME_MAX - 1 letters, digits, '.', '_', '-'? */
bool hints_name_ok(const char *name);
/* Would hints_submit take path (a file of a read-cache namespace, or a version's file: only its
 * form and namespace, no manifest read)? 0, -EINVAL (tier_err_msg() says why), -ENOMEM. For a
 * caller that checks a list as it arrives (the mount's control files); hints_submit checks
 * again. */
int hints_check_path(struct hints *h, const char *path);
/* Drop tenant's set name (tenant -1: every set of that name: an administrator's) and release its
 * held blocks to the cache's policies. 0 or -ENOENT. Names are per tenant. */
int hints_cancel(struct hints *h, const char *name, int64_t tenant);

/* A read of [off, off+len) of key (size bytes, version etag: the handle's; may be NULL) on be
 * by tenant, served: when it reaches the file's end, consumes the file's next entry in each of
 * that tenant's sets and moves them on (the key's entry as a current file, else as a dataset
 * version's file with that ETag); *seen (the open handle's flag, may be NULL) makes that once
 * per open. Cheap when there is no set. */
void hints_observe(struct hints *h, uint32_t tenant, const struct backend *be, const char *key,
                   const char *etag, uint64_t off, size_t len, uint64_t size, _Atomic bool *seen);

/* Where the engine learns a file's size and etag before it fetches: fn (the mount's cached
 * listing of the file's directory, no backend call) when it knows them (0, *st filled), else a
 * backend_stat (a HEAD on S3: a round trip per file). NULL fn: none. Setting it waits for the
 * calls of the previous fn in flight, so its owner may go away after hints_set_meta(h, NULL). */
typedef int (*hints_meta_fn)(void *ud, const struct tierd_ns *ns, const char *key,
                             struct backend_stat *st);
void hints_set_meta(struct hints *h, hints_meta_fn fn, void *ud);

/* A set nobody appended to or read through for this long is dropped (its job is gone). */
#define HINTS_IDLE_NS (600ull * 1000000000ull)

struct hints_set_stats {
    char name[HINTS_NAME_MAX];
    uint32_t tenant;
    uint64_t entries, files; /* known order, distinct files */
    uint64_t cursor;         /* entries consumed (the reader's position) */
    uint64_t window_files, window_bytes;
    uint64_t held_bytes, budget;           /* held for the set, and its bound */
    uint64_t fetched_files, fetched_bytes; /* brought in by the engine */
    uint64_t already_held;                 /* files entering the window still held: no fetch */
    uint64_t released;                     /* files released as Belady victims */
    uint64_t errors;                       /* files whose stat or fetch failed */
    uint64_t attrs_listed, attrs_stat;     /* sizes and etags from the mount's listings / stats */
    uint64_t skipped;                      /* entries the reader passed without reading them */
    uint64_t bytes;                        /* memory the set's state takes (an estimate) */
    char first_error[160];
};
/* Up to max sets, in submission order; returns how many there are. */
size_t hints_list(struct hints *h, struct hints_set_stats *out, size_t max);
/* How many sets tenant has now (one look under the engine's lock: no list to size first). */
size_t hints_tenant_sets(struct hints *h, uint32_t tenant);

#endif
