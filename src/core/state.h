/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/state.h - the daemon's shared state, as seen by the layers that still take it whole: the
 * config types (parsed by src/daemon/config.c), struct tierd and namespace resolution (defined in
 * src/daemon/resolve.c). Included by src/daemon and src/api only; the services and the FUSE layer
 * are opened with a context of what they use and do not include it (docs/ARCHITECTURE.md,
 * "Folders"). It lives below src/daemon so that the control API need not include the daemon's
 * folder, which includes the API's (scripts/check-layers.sh fails on such a cycle).
 *
 * One struct tierd per process, built by main() from the config, then read-only apart from
 * fields documented as guarded. Namespaces map a mount sub-tree ("/datasets") to a backend and
 * a key prefix; paths inside the mount resolve to (namespace, key) with tierd_resolve().
 */
#ifndef TIER_CORE_STATE_H
#define TIER_CORE_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "core/ns.h"
#include "common/ioctx.h"
#include "tiers/backend.h"

#define TIERD_MAX_BACKENDS 16
#define TIERD_MAX_TENANT_CONFS 128 /* [tenant NAME] sections */
#define TIERD_RESERVED_IDS_UNSET UINT64_MAX
#define TIERD_IMPLICIT_PER_MINUTE_DEFAULT 4
#define TIERD_IDLE_RECLAIM_MS_DEFAULT 600000 /* [tenants] idle_reclaim: 10 minutes */
#define TIERD_MAX_POLICIES 64                /* [policy NAME] sections */
#define TIERD_PEER_INFLIGHT_DEFAULT 32       /* [cluster] peer_inflight */
/* [cluster] (docs/CLUSTER.md "Peer traffic and QoS"): the scheduler lane this node's peer
 * requests enter (d->peer_lane), and the tenant its endpoint serves every peer's request as */
#define TIERD_PEER_LANE "peers"
#define TIERD_PEER_TENANT "peers"
#define TIERD_POLICY_MAX_KEYS 16 /* keys of one [policy NAME] section */

/* QoS values of a [class NAME] or [tenant NAME] section (docs/CONFIG.md, "QoS"), as
 * qos/sched.h's struct sched_qos takes them: rates in bytes/s, 0 not given (the default),
 * TIERD_RATE_NONE "none"; weight 0 not given. */
#define TIERD_RATE_NONE UINT64_MAX
/* [backend] split_reads = auto (the default): the part size follows link_capacity. */
#define TIERD_SPLIT_AUTO UINT64_MAX
struct tierd_qos_conf {
    uint64_t reservation_bps, limit_bps;
    uint64_t weight;
    int reservation_line, limit_line; /* 0: not set */
    /* the local disk's lane (disk_weight, disk_limit): the same encoding */
    uint64_t disk_limit_bps, disk_weight;
};

struct tierd_backend_conf {
    char *name;
    char *type; /* "posix" | "s3" */
    struct posix_backend_config posix;
    struct s3_backend_config s3;
    /* The backend's lane in the scheduler (qos/sched.h), any type. */
    int max_inflight;             /* calls in flight; 0: s3 max_connections, posix 32 */
    int breaker_failures;         /* consecutive failures that open the breaker; 0: none */
    uint64_t breaker_cooldown_ms; /* open time before a probe */
    uint64_t link_capacity_bps;   /* the link's rate for QoS; 0: unknown */
    int link_capacity_line;       /* 0: not set */
    int yield_inflight;     /* other classes' data calls per direction beside inference; 0: off */
    uint64_t yield_hold_ms; /* inference demand lasts this long after its last call */
    /* Reads in parts while inference has demand (sched.h split_bytes): TIERD_SPLIT_AUTO, 0 off,
     * else the part size in bytes. */
    uint64_t split_read_bytes;
    int conf_line; /* where it was defined, for messages */
};

/* A [tenant NAME] section: a tenant of the registry (src/tenant/tenant.h) and, when any match
 * key is set, its rule (every key set must match). */
struct tierd_tenant_conf {
    char *name;
    enum tier_io_class cls;    /* default training */
    char *slurm_job;           /* NULL: any */
    char *cgroup;              /* cgroup path prefix; NULL: any */
    int64_t uid, gid;          /* -1: any */
    struct tierd_qos_conf qos; /* for requests of its class (cls) */
    /* hot-tier space (cache.h, cache_quota_set): 0 = [tenants] cache_quota, CACHE_QUOTA_NONE =
     * none, else bytes */
    uint64_t cache_quota;
    int cache_quota_line;
    int conf_line;
};

/* A [policy NAME] section as written: its keys are checked by policy_rules_build (policy.h),
 * which config.c calls at load so that every error has its file and line. */
struct tierd_policy_conf {
    char *name;
    int conf_line;
    size_t nkv;
    struct {
        char *key, *val;
        int line;
    } kv[TIERD_POLICY_MAX_KEYS];
};

/* [daemon] gpu_sampling (docs/CONFIG.md): the NVML sampler of per-tenant GPU utilisation. */
enum tierd_gpu_sampling {
    TIERD_GPU_AUTO = 0, /* on where libnvidia-ml.so.1 loads and initialises; else off, quietly */
    TIERD_GPU_OFF = 1,  /* the library is never loaded */
};

struct tierd_config {
    char *file; /* config path, for messages */
    /* [cache] */
    struct cache_config cache;
    char *cache_disk_dir;
    /* the local disk's QoS lane (qos/sched.h; docs/CONFIG.md "QoS"): */
    uint64_t disk_capacity_bps; /* the disk's rate; 0: unknown */
    int disk_max_inflight;      /* disk I/Os in flight at once; default 64 */
    uint64_t disk_op_cost;      /* cost of one disk I/O beyond its bytes; default 4 KiB */
    /* epoch-order hints (hints/hints.h): fetch workers, the prefetch window's files and bytes,
     * the bytes a hint set may hold (0: half the hot tier; never above its tenant's quota) */
    int hints_threads;           /* default 16 */
    uint64_t hints_window_files; /* default 256 */
    uint64_t hints_window_bytes; /* default 1 GiB */
    uint64_t hints_cache_bytes;
    /* what hint state may cost in memory (hints.h "Limits"): per tenant of a caller who is no
     * administrator its sets, entries and bytes; all sets together their bytes */
    int hints_tenant_sets;         /* default 4 */
    uint64_t hints_tenant_entries; /* default 1,000,000 */
    uint64_t hints_tenant_bytes;   /* default 128 MiB */
    uint64_t hints_state_bytes;    /* default 2 GiB */
    /* [mount] */
    char *mount_path;
    uint64_t attr_ttl_ms;             /* attribute cache TTL; default 1000 */
    uint64_t entry_ttl_ms;            /* lookup/dir listing TTL; default 1000 */
    uint64_t version_list_ttl_ms;     /* the dataset view's listings above versions; 10000 */
    bool attr_ttl_set, entry_ttl_set; /* given in [mount] (then the namespaces' default too) */
    int fuse_threads;                 /* default 16 */
    bool allow_other;
    uint64_t readahead_blocks;    /* sequential prefetch depth at first; default 4 */
    uint64_t readahead_max_bytes; /* ... doubling up to this; default 64 MiB */
    int64_t mount_uid, mount_gid; /* synthesised owner; -1: tierd's own uid / gid */
    int mount_umask;              /* -1: 022, or 027 with allow_other (docs/CONFIG.md) */
    uint64_t max_dir_entries;     /* entries of one directory listing; default 1,000,000 */
    bool splice_writes; /* [mount] splice_writes: write-back bytes spliced into the spool; off */
    enum tierd_no_open no_open; /* [mount] no_open: a second connection without OPEN; off */
    /* [api] */
    char *api_socket;     /* Unix socket path; default /run/tierd/api.sock */
    char *api_tcp;        /* "127.0.0.1:7700" or NULL (off) */
    char *api_token;      /* required when api_tcp is set (inline, or read from api_token_file) */
    char *api_token_file; /* owner tierd's uid, mode 0600 or stricter */
    char *api_tls_cert, *api_tls_key; /* PEM files: TLS on the TCP listener when both are set */
    char *api_socket_group;           /* group of the socket file (mode 0660); NULL: tierd's */
    int64_t api_socket_gid;           /* resolved api_socket_group; -1: none */
    char *api_admin_group;            /* Unix-socket callers of this group may change state */
    int64_t api_admin_gid;            /* resolved api_admin_group; -1: none */
    int api_max_connections;          /* per listener; default 64 */
    int api_max_connections_per_ip;   /* TCP listener; default 16 */
    int api_max_connections_per_uid;  /* Unix socket, one non-admin uid; default 8 */
    int api_admin_connections;        /* Unix-socket slots only admins take; min(8, max / 2) */
    uint64_t api_user_timeout_ms;     /* a non-admin's idle connection is closed; default 10 s */
    uint64_t api_max_wait_ms;         /* longest POST /v1/wait; default 300 s */
    int api_max_stage_jobs;           /* running staging jobs before 429; default 16 */
    char *api_ui_chartjs; /* Chart.js for GET /ui/chart.js; default Debian's libjs-chart.js */
    /* [daemon] */
    char *log_level;
    uint64_t backend_timeout_ms; /* bound on one backend call incl. retries; default 10000 */
    int stage_threads;           /* default 8 */
    uint64_t health_backlog_ms;  /* older write-back backlog: degraded; 0 = never; 300 s */
    bool telemetry;              /* per-tenant series (d->tele); off: NULL, endpoints 404 */
    bool qos;                    /* dmClock on backend lanes; off: strict class priority */
    uint64_t policy_interval_ms; /* lifecycle policies: a full pass this often; default 30 s */
    char *policy_state;          /* their copy journal; default <spool_dir>/policy.db */
    /* the NVML sampler of GPU utilisation per tenant (telemetry/gpu.h) */
    enum tierd_gpu_sampling gpu_sampling; /* default auto */
    uint64_t gpu_sample_interval_ms;      /* default 5 s */
    /* [writeback]: the burst buffer, used when a namespace has mode = write-back */
    char *wb_spool_dir;                  /* default: "spool" beside [cache] disk_dir */
    char *wb_journal;                    /* NULL: <spool_dir>/journal.db */
    int wb_upload_threads;               /* default 2 */
    int wb_parts_parallel;               /* default 4 */
    uint64_t wb_part_size;               /* default 8 MiB (5 MiB .. 5 GiB) */
    uint64_t wb_max_dirty;               /* bytes not yet uploaded before writers wait; 0 = none */
    uint64_t wb_max_dirty_age_ms;        /* 0 = no bound */
    uint64_t wb_backpressure_wait_ms;    /* then ENOSPC; default 60 s */
    uint64_t wb_upload_deadline_ms;      /* warn when a file waits longer; 0 = never */
    uint64_t wb_upload_holdoff_ms;       /* uploads wait for writes to pause; default 200 ms */
    uint64_t wb_upload_holdoff_max_ms;   /* ... at most this long after a seal; default 30 s */
    int wb_retention_keep;               /* uploaded files per directory kept locally; default 2 */
    enum tierd_durability wb_durability; /* default for write-back namespaces: local */
    /* [tenants] */
    uint64_t max_tenants;      /* tenant ids, default and other included; default 64 */
    uint64_t tenant_pid_cache; /* pids whose tenant is remembered; default 4096 */
    /* ids implicit tenants may not take; default (TIERD_RESERVED_IDS_UNSET until the check) a
     * quarter of max_tenants */
    uint64_t tenant_reserved_ids;
    uint64_t tenant_implicit_per_minute; /* job/pod tenants one uid creates a minute; default 4 */
    uint64_t tenant_idle_reclaim_ms;     /* implicit tenants idle this long are reclaimed; 0: no */
    bool tenant_fallback_default;        /* fallback = default: no uid-<n> tenants */
    bool auto_quota;                     /* [tenants] auto_quota (docs/ADVICE.md) */
    uint64_t advice_interval_ms;         /* [tenants] advice_interval; 0: 30 s */
    int advice_target_util;              /* [tenants] advice_target, percent; 0: 85 */
    char *tenant_slurm_cgroup_root;      /* NULL: only the built-in Slurm cgroup roots */
    /* [cluster] (docs/CLUSTER.md): membership in RADOS; cluster_name NULL: no [cluster] */
    char *cluster_name;
    char *cluster_ceph_conf;   /* default /etc/ceph/ceph.conf */
    char *cluster_user;        /* cephx id, without "client."; default admin */
    char *cluster_keyring;     /* NULL: the one ceph.conf names */
    char *cluster_pool;        /* default tierd */
    char *cluster_node_id;     /* default: the host name */
    char *cluster_address;     /* host:port peers reach this node at; NULL: none yet */
    char *cluster_weight;      /* as written; cluster_weight_val is its value (default 1) */
    double cluster_weight_val; /* > 0 */
    uint64_t cluster_lease_ms; /* default 10 s */
    char *cluster_secret_file; /* required: the peers' shared secret */
    bool cluster_share; /* serve peers (default); false: consume-only, no address published */
    uint64_t cluster_peer_timeout_ms; /* a peer request's stall deadline; default
                                       * backend_timeout, at most 600 s */
    /* this node's peer requests in flight at once (its `peers` scheduler lane); default 32 */
    int cluster_peer_inflight;
    char *cluster_balance; /* as written; cluster_balance_val its value (1.25) */
    double cluster_balance_val;
    char *cluster_tls_cert, *cluster_tls_key, *cluster_tls_ca; /* all three or none */
    int cluster_line;                                          /* the section's line, 0: none */
    /* [class NAME]: each class's QoS defaults; [daemon] qos_op_cost */
    struct tierd_qos_conf classes[TIER_IO_NCLASSES];
    int class_line[TIER_IO_NCLASSES]; /* the section's line, 0: none */
    uint64_t qos_op_cost;             /* cost of a request beyond its bytes; default 64 KiB */

    struct tierd_backend_conf backends[TIERD_MAX_BACKENDS];
    size_t nbackends;
    struct tierd_ns_conf namespaces[TIERD_MAX_NAMESPACES];
    size_t nnamespaces;
    struct tierd_tenant_conf tenants[TIERD_MAX_TENANT_CONFS]; /* in config order = rule order */
    size_t ntenants;
    struct tierd_policy_conf policies[TIERD_MAX_POLICIES]; /* in config order */
    size_t npolicies;

    /* Every string above (including the const char * fields of the backend configs) points into
     * this list of allocations, freed by tierd_config_fini(). Private to config.c. */
    char **strs;
    size_t nstrs, capstrs;
};

/* Parse a config file. On error returns -EINVAL and fills err (errsz bytes) with
 * "FILE:LINE: what is wrong ... (what is allowed / how to fix)". cfg is zeroed first and is
 * always safe to pass to tierd_config_fini(). Not thread-safe (inih has global options). */
int tierd_config_load(const char *path, struct tierd_config *cfg, char *err, size_t errsz);
/* The same over an in-memory text; name is used in messages (the fuzz target and tests). */
int tierd_config_load_string(const char *name, const char *text, size_t len,
                             struct tierd_config *cfg, char *err, size_t errsz);
void tierd_config_fini(struct tierd_config *cfg);
struct policy_conf; /* lifecycle/lifecycle.h */
/* The slice of cfg the lifecycle rules read (lifecycle.h's struct policy_conf), in one allocation
 * whose strings are cfg's (valid while it is); NULL when out of memory. For the layers that hold
 * a config but not daemon/tierd.h's view of it (the API's reload). */
struct policy_conf *tierd_policy_conf_new(const struct tierd_config *cfg);
void tierd_policy_conf_free(struct policy_conf *pc); /* NULL: a no-op */
/* A rate as the config writes it ("200MiB/s", "1.5G/s", "500000/s": K/M/G/T are powers of
 * 1024; "none"): 0 and *out in bytes/s, TIERD_RATE_NONE for "none" and for 0/s; -EINVAL (not a
 * rate: no "/s", not a number, negative) or -ERANGE (too large). */
int tierd_rate_parse(const char *val, uint64_t *out);

struct tierd_api;     /* api.h */
struct tierd_fuse;    /* fuse/tierfs.h */
struct wb;            /* writeback/wb.h */
struct telemetry;     /* telemetry/telemetry.h */
struct tenant_reg;    /* tenant/tenant.h */
struct jobs;          /* jobs.h */
struct policy_engine; /* policy.h */
struct access_log;    /* access.h */
struct datasets;      /* datasets/dataset.h */
struct member;        /* cluster/member.h */
struct router;        /* cluster/router.h */
struct peer_server;   /* cluster/peer.h */
struct peer_client;   /* cluster/peer.h */

struct advisor;
struct tierd {
    struct tierd_config cfg;
    struct backend *backends[TIERD_MAX_BACKENDS];
    struct tierd_ns ns[TIERD_MAX_NAMESPACES];
    size_t nns;
    struct cache *cache;
    struct sched *sched; /* QoS scheduling point (src/qos/sched.h) */
    /* The local disk, the second resource QoS schedules: a scheduler of its own (its own
     * tenant and class parameters) with one lane, installed into the cache and the burst
     * buffer as their struct tier_disk_adm (common/diskadm.h, main.c). */
    struct sched *disk_sched;
    struct sched_lane *disk_lane;
    struct tier_disk_adm disk_adm;
    struct stage_registry *stages; /* staging jobs (stage.h) */
    struct pinmeta *pinned;        /* attributes of pinned objects (pinmeta.h); NULL: none kept */
    const char *test_fault_file;   /* test builds only (main.c TIER_TEST_HOOKS); else NULL */
    struct tierd_api *api;         /* control API server (api.h) */
    struct tierd_fuse *fuse;       /* the FUSE session (fuse/tierfs.h) */
    struct wb *wb;        /* checkpoint burst buffer (src/writeback/wb.h); NULL when no namespace is
                           * in write-back mode */
    _Atomic bool mounted; /* FUSE session is up (set by the FUSE thread, read by the API) */
    /* requests per FUSE connection: [0] the main one, [1] the no-open one (FUSE threads) */
    struct tierd_fuse_counts fuse_counts[2];
    struct datasets *datasets; /* dataset versions (datasets/dataset.h) */
    uint64_t start_ns;
    bool verbose;   /* -v: debug logging whatever [daemon] log_level says (a reload keeps it) */
    char *cfg_text; /* the config file's text as tierd started with it (reload compares) */
    /* per-tenant series (telemetry/telemetry.h): recorded into by the FUSE layer and the
     * scheduler, exported by the API */
    struct telemetry *tele;
    struct tenant_reg *tenants; /* who is asking (tenant/tenant.h); built by tierd_tenants_open */
    struct advisor *advisor;    /* the hot-tier advice loop (advice/advisor.h); NULL: curves off */
    struct hints *hints;        /* epoch-order hints (hints.h) */
    struct jobs *jobs;          /* job admission (jobs.h): reservations, queue, pins */
    struct policy_engine *policy; /* lifecycle policies (policy.h); NULL: no rule */
    /* last reads by object for the policies' idle trigger (access.h): made and freed by the
     * policy engine, set before the mount starts; NULL when no rule has idle */
    struct access_log *access;
    /* [cluster] membership (daemon/cluster.c): the member (cluster/member.h), read by the API;
     * NULL without a [cluster] section */
    struct member *member;
    void *cluster_conn; /* its RADOS connection (daemon/cluster.c) */
    /* peer reads (daemon/cluster.c, docs/CLUSTER.md): the router the cache's peer source asks,
     * the client it asks with and the endpoint this node serves on (NULL with share = no) */
    struct router *router;
    struct peer_client *peer_client;
    struct peer_server *peer_server;
    /* QoS of peer traffic (daemon/cluster.c, docs/CLUSTER.md "Peer traffic and QoS"): the lane
     * of d->sched every peer request of this node enters (TIERD_PEER_LANE; lives until
     * sched_free), and the tenant the endpoint serves every peer's request as
     * (TIERD_PEER_TENANT, held against reclaim); both set once by tierd_cluster_open */
    struct sched_lane *peer_lane;
    uint32_t peer_tenant;
    /* a cluster's staging asks the router from the stager's threads (tierd_cluster_warm):
     * cluster_mu guards router for them and counts their calls, so that the router outlives
     * the last; initialised by tierd_cluster_open */
    pthread_mutex_t cluster_mu;
    pthread_cond_t cluster_cv;
    unsigned cluster_calls;
};

/* Resolve a mount path ("/datasets/a/b.bin") to its namespace and backend key ("prefix/a/b.bin",
 * malloc'd into *key). A path equal to a namespace root gives key = prefix (may be ""), and
 * *is_root = true. Returns 0, -ENOENT (no namespace), -EINVAL (bad path), -ENOMEM. */
int tierd_resolve(struct tierd *d, const char *path, struct tierd_ns **ns, char **key,
                  bool *is_root);

/* Is path ("/", "/a" when a namespace is "/a/b") a directory above one or more namespace roots
 * (a virtual directory of the unified tree)? */
bool tierd_is_virtual_dir(const struct tierd *d, const char *path);

/* The names of the children of a virtual directory, in namespace order, without duplicates:
 * calls fn(name, len, arg) for each. */
void tierd_virtual_children(const struct tierd *d, const char *path,
                            void (*fn)(const char *name, size_t len, void *arg), void *arg);

#endif
