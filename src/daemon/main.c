/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - the tierd executable: parse the config, build the tenant registry ([tenant NAME]
 * sections, tenant/tenant.h), wire backends -> cache -> QoS scheduler ->
 * write-back burst buffer (only when a namespace is mode = write-back; wb_open runs its crash
 * recovery: journal replay, uploads resumed, orphans aborted) -> stager -> control API -> FUSE
 * mount, serve until SIGINT/SIGTERM/SIGHUP, then tear down in reverse order (API first, so no
 * request sees a half-freed daemon; then the mount; then the burst buffer, whose unfinished
 * uploads resume at the next start).
 *
 * Without -f, tierd daemonizes: the parent waits on a pipe until the child reports the mount as
 * ready (or why it failed), so `tierd -c FILE && ls MOUNT` works and start-up errors reach the
 * terminal. Exit codes: 0 clean stop, 1 start-up or runtime failure, 2 usage or config error.
 *
 * Signals: SIGINT/SIGTERM/SIGHUP are blocked while the worker threads (cache, stager, API) are
 * created, so they inherit the block; the FUSE loop's handlers then receive them.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <systemd/sd-daemon.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "api/api.h"
#include "datasets/dataset.h"
#include "hints/hints.h"
#include "jobs/jobs.h"
#include "stage/pinmeta.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"
#include "daemon/tierd.h"
#include "fuse/tierfs.h"
#include "qos/sched.h"
#include "telemetry/gpu.h"
#include "telemetry/telemetry.h"
#include "tenant/tenant.h"
#include "writeback/wb.h"

/* Calls in flight to one POSIX backend (the scheduler's historical global bound); an S3 backend
 * defaults to its connection pool size. */
#define TIERD_POSIX_MAX_INFLIGHT 32
#define TIERD_DEFAULT_LANE_MAX_INFLIGHT 32

static int g_notify_fd = -1; /* daemon mode: pipe to the waiting parent */

static void notify_parent(int status, const char *msg)
{
    if (g_notify_fd < 0)
        return;
    char buf[1024];
    buf[0] = (char)status;
    size_t ml = msg ? strnlen(msg, sizeof(buf) - 2) : 0;
    if (ml)
        memcpy(buf + 1, msg, ml);
    ssize_t w = write(g_notify_fd, buf, ml + 1);
    (void)w;
    close(g_notify_fd);
    g_notify_fd = -1;
}

static void startup_failed(const char *what)
{
    char msg[900];
    snprintf(msg, sizeof(msg), "%s: %s", what, *tier_err_msg() ? tier_err_msg() : "failed");
    log_err("%s", msg);
    notify_parent(1, msg);
}

/* Fork; the parent waits for the child's first status byte and exits with it. */
static int daemonize(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid > 0) {
        close(p[1]);
        char buf[1024];
        ssize_t n;
        do {
            n = read(p[0], buf, sizeof(buf) - 1);
        } while (n < 0 && errno == EINTR);
        if (n <= 0) {
            fprintf(stderr, "tierd: the daemon exited during start-up (see syslog)\n");
            _exit(1);
        }
        buf[n] = '\0';
        if (buf[0] != 0)
            fprintf(stderr, "tierd: %s\n", buf + 1);
        _exit(buf[0]);
    }
    close(p[0]);
    g_notify_fd = p[1];
    if (setsid() < 0)
        return -errno;
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nul >= 0) {
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
        if (nul > 2)
            close(nul);
    }
    tier_log_use_syslog("tierd");
    return 0;
}

_Static_assert(TIERD_RATE_NONE == SCHED_RATE_NONE, "config and scheduler encode none alike");

/* Each [tenant NAME]'s cache_quota (cache.h, space quotas). The guarantee that no tenant's reads
 * evict another's blocks needs every tenant that reads to have a quota and the quotas plus the
 * pin budget to fit in the hot tier; either not holding is allowed (the usual overcommit), with a
 * warning naming which. */
static int apply_tenant_quotas(struct tierd *d)
{
    const struct cache_config *cc = &d->cfg.cache;
    bool dflt = cc->default_quota && cc->default_quota != CACHE_QUOTA_NONE;
    uint64_t hot = cc->disk_dir && cc->disk_bytes > cc->ram_bytes ? cc->disk_bytes : cc->ram_bytes;
    uint64_t sum = cc->pin_bytes;
    size_t nq = 0;
    const char *unquoted = dflt ? NULL : "default";
    for (size_t i = 0; i < d->cfg.ntenants; i++) {
        const struct tierd_tenant_conf *t = &d->cfg.tenants[i];
        uint64_t q = t->cache_quota ? t->cache_quota : cc->default_quota;
        if (q && q != CACHE_QUOTA_NONE) {
            sum = tier_sum_sat(sum, q);
            nq++;
        } else if (!unquoted || !strcmp(unquoted, "default")) {
            unquoted = t->name;
        }
        if (!t->cache_quota)
            continue;
        uint32_t id = 0;
        int rc = tenant_find(d->tenants, t->name, &id);
        if (rc == 0)
            rc = cache_quota_set(d->cache, id, t->cache_quota);
        if (rc) {
            tier_err_set("%s:%d: [tenant %s]: its cache_quota cannot be applied (%s)", d->cfg.file,
                         t->cache_quota_line, t->name, strerror(-rc));
            return rc;
        }
    }
    if (!nq)
        return 0; /* no quotas at all: nothing promised */
    char a[32], b[32];
    if (unquoted)
        log_warn("%s: tenant %s has no cache_quota (nor [tenants] cache_quota): its reads can "
                 "still evict the blocks of tenants inside their quotas when the hot tier is full",
                 d->cfg.file, unquoted);
    if (sum > hot)
        log_warn("%s: the cache_quota of the %zu [tenant] sections with one and [cache] pin_size "
                 "sum to %s, more than the hot tier's %s: a tenant inside its quota can still "
                 "lose blocks to another's reads when the tier is full",
                 d->cfg.file, nq, tier_fmt_bytes(sum, a, sizeof(a)),
                 tier_fmt_bytes(hot, b, sizeof(b)));
    return 0;
}

/* Each [tenant NAME]'s reservation and weight, for requests of its class, and its limit, for
 * all its requests (docs/CONFIG.md, "QoS"); the config loader checked them. */
static int apply_tenant_qos(struct tierd *d)
{
    for (size_t i = 0; i < d->cfg.ntenants; i++) {
        const struct tierd_tenant_conf *t = &d->cfg.tenants[i];
        if (!t->qos.reservation_bps && !t->qos.limit_bps && !t->qos.weight)
            continue;
        uint32_t id = 0;
        int rc = tenant_find(d->tenants, t->name, &id);
        if (rc == 0 && (t->qos.reservation_bps || t->qos.weight)) {
            struct sched_qos q = {.reservation_bps = t->qos.reservation_bps,
                                  .weight = (uint32_t)t->qos.weight};
            rc = sched_qos_set(d->sched, id, t->cls, &q);
        }
        if (rc == 0 && t->qos.limit_bps) /* over all its classes */
            rc = sched_tenant_limit_set(d->sched, id, t->qos.limit_bps);
        if (rc) {
            tier_err_set("%s:%d: [tenant %s]: its QoS cannot be applied (%s)", d->cfg.file,
                         t->conf_line, t->name, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

/* The local disk, QoS's second resource (docs/ARCHITECTURE.md, "QoS"): a scheduler of its own,
 * so its tenant and class parameters ([class] / [tenant] disk_weight, disk_limit) and its lock
 * are apart from the link's, with one lane: no admission deadline and no breaker (a disk read
 * or write is never failed by QoS; a file system error is the I/O's own result), idle_fast (a
 * disk hit with the lane idle costs one lock, no dmClock work). Installed into the cache (disk
 * reads, write-through) and the burst buffer (spool writes) as their tier_disk_adm. */
static int open_disk_lane(struct tierd *d)
{
    const struct tierd_config *c = &d->cfg;
    struct sched_config sc = {.op_cost_bytes = c->disk_op_cost};
    for (int k = 0; k < TIER_IO_NCLASSES; k++) /* same encoding: 0 default, NONE none */
        sc.cls[k] = (struct sched_qos_cls){.limit_bps = c->classes[k].disk_limit_bps,
                                           .weight = (uint32_t)c->classes[k].disk_weight};
    int rc = sched_new(&sc, &d->disk_sched);
    if (rc)
        return rc;
    struct sched_backend_config bc = {
        .max_inflight = c->disk_max_inflight,
        .admit_timeout_ms = SCHED_TIMEOUT_NONE,
        .breaker_failures = -1,
        .link_capacity_bps = c->disk_capacity_bps == TIERD_RATE_NONE ? 0 : c->disk_capacity_bps,
        .idle_fast = true,
    };
    rc = sched_lane_new(d->disk_sched, "disk", &bc, &d->disk_lane);
    if (rc)
        return rc;
    for (size_t i = 0; i < c->ntenants; i++) {
        const struct tierd_tenant_conf *t = &c->tenants[i];
        if (!t->qos.disk_weight && !t->qos.disk_limit_bps)
            continue;
        uint32_t id = 0;
        rc = tenant_find(d->tenants, t->name, &id);
        if (rc == 0 && t->qos.disk_weight) {
            struct sched_qos q = {.weight = (uint32_t)t->qos.disk_weight};
            rc = sched_qos_set(d->disk_sched, id, t->cls, &q);
        }
        if (rc == 0 && t->qos.disk_limit_bps) /* over all its classes */
            rc = sched_tenant_limit_set(d->disk_sched, id, t->qos.disk_limit_bps);
        if (rc) {
            tier_err_set("%s:%d: [tenant %s]: its disk QoS cannot be applied (%s)", c->file,
                         t->conf_line, t->name, strerror(-rc));
            return rc;
        }
    }
    sched_lane_disk_adm(d->disk_lane, &d->disk_adm);
    d->cfg.cache.disk_adm = &d->disk_adm;
    return 0;
}

/* Open every backend and wrap it in its scheduler lane (sched_backend_wrap), so every call to
 * it, from any module, passes its in-flight cap, admission deadline and circuit breaker. */
static int open_backends(struct tierd *d)
{
    struct tierd_config *c = &d->cfg;
    for (size_t i = 0; i < c->nbackends; i++) {
        struct tierd_backend_conf *b = &c->backends[i];
        bool posix = strcmp(b->type, "posix") == 0;
        struct backend *raw = NULL;
        /* The config always sets max_retries (default 4); for backend_s3_open 0 means "default"
         * and a negative value "none", so max_retries = 0 in the file must become -1. */
        struct s3_backend_config s3 = b->s3;
        if (s3.max_retries == 0)
            s3.max_retries = -1;
        int rc = posix ? backend_posix_open(&b->posix, &raw) : backend_s3_open(&s3, &raw);
        if (rc == 0) {
            struct sched_backend_config bc = {
                .max_inflight = b->max_inflight ? b->max_inflight
                                : posix         ? TIERD_POSIX_MAX_INFLIGHT
                                                : b->s3.max_connections,
                .admit_timeout_ms = c->backend_timeout_ms,
                .breaker_failures = b->breaker_failures ? b->breaker_failures : -1,
                .breaker_cooldown_ms = b->breaker_cooldown_ms,
                .link_capacity_bps =
                    b->link_capacity_bps == TIERD_RATE_NONE ? 0 : b->link_capacity_bps,
                .yield_inflight = b->yield_inflight ? b->yield_inflight : -1,
                .yield_hold_ms = b->yield_hold_ms,
                .split_bytes = b->split_read_bytes == TIERD_SPLIT_AUTO ? 0
                               : b->split_read_bytes                   ? b->split_read_bytes
                                                                       : SCHED_SPLIT_OFF,
            };
            rc = sched_backend_wrap(d->sched, raw, &bc, &d->backends[i]);
            if (rc) {
                tier_err_set("cannot allocate its scheduler lane");
                backend_free(raw);
            }
        }
        if (rc) {
            char m[600];
            snprintf(m, sizeof(m), "%s:%d: backend '%s' (%s) cannot be opened: %s", c->file,
                     b->conf_line, b->name, b->type,
                     *tier_err_msg() ? tier_err_msg() : strerror(-rc));
            tier_err_set("%s", m);
            return rc;
        }
    }
    for (size_t n = 0; n < c->nnamespaces; n++) {
        d->ns[n].conf = &c->namespaces[n];
        for (size_t i = 0; i < c->nbackends; i++)
            if (strcmp(c->backends[i].name, c->namespaces[n].backend) == 0)
                d->ns[n].be = d->backends[i];
    }
    d->nns = c->nnamespaces;
    return 0;
}

/* wb_resolve_fn: journalled backend names are the config's backend names. */
static struct backend *wb_resolve_backend(void *ctx, const char *name)
{
    struct tierd *d = ctx;
    for (size_t i = 0; i < d->cfg.nbackends; i++)
        if (strcmp(d->cfg.backends[i].name, name) == 0)
            return d->backends[i];
    return NULL;
}

static void wb_log_event(void *ctx, enum wb_event ev, int64_t id)
{
    struct tierd *d = ctx;
    /* the built-in retention and the demote rules of write-back namespaces run soon after an
     * upload (policy.h); d->policy is set after the buffer opens, and freed after it closes */
    if (ev == WB_EV_UPLOADED)
        policy_engine_kick(__atomic_load_n(&d->policy, __ATOMIC_ACQUIRE));
    /* one line per upload start/end: the crash test counts kills that land mid-upload */
    if (ev == WB_EV_UPLOAD_START)
        log_info("wb: upload start file %lld", (long long)id);
    else if (ev == WB_EV_UPLOADED)
        log_info("wb: uploaded file %lld", (long long)id);
    else if (ev == WB_EV_RETRY)
        log_info("wb: upload retry file %lld", (long long)id);
}

#ifdef TIER_TEST_HOOKS
/* Test fault injection for the burst buffer's local I/O (issue 5's fault tests through the
 * mount), compiled only with -DTIER_TEST_HOOKS=ON (the default for Debug and sanitizer builds,
 * off for Release/RelWithDebInfo: a production tierd has no such hook, and the variable is
 * ignored): with TIERD_TEST_FAULT_FILE=PATH in the environment, every staging pwrite/fsync reads
 * PATH and fails as it says: "fsync EIO", "pwrite EIO", "pwrite ENOSPC", "pwrite short" (half
 * the bytes per call); "snapshot pause" holds a rewrite's copy after its first chunk (PATH.paused
 * exists meanwhile) until the line is gone; "noopen bind pause" holds the no-open connection's
 * ready thread before each bind (fuse_noopen.c) likewise, "noopen first read pause PID\n" the
 * no-open connection's first read of a file by process PID (fuse_ops_file.c). Absent or empty file:
 * no fault. Unset variable: real I/O, no hooks. */
static const char *g_fault_file;

static bool fault_is(const char *what)
{
    char buf[128];
    int fd = open(g_fault_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strstr(buf, what) != NULL;
}

static ssize_t fault_pwrite(void *ctx, int fd, const void *buf, size_t len, off_t off)
{
    (void)ctx;
    if (fault_is("pwrite EIO"))
        return -EIO;
    if (fault_is("pwrite ENOSPC"))
        return -ENOSPC;
    if (fault_is("pwrite short") && len > 1)
        len /= 2;
    ssize_t n = pwrite(fd, buf, len, off);
    return n < 0 ? -errno : n;
}

static int fault_fsync(void *ctx, int fd)
{
    (void)ctx;
    if (fault_is("fsync EIO"))
        return -EIO;
    return fsync(fd) == 0 ? 0 : -errno;
}

static const struct wb_io_hooks g_fault_hooks = {
    .pwrite = fault_pwrite, .fsync = fault_fsync, .ctx = NULL};

static void install_test_hooks(struct tierd *d, struct wb_config *wc)
{
    g_fault_file = getenv("TIERD_TEST_FAULT_FILE");
    if (g_fault_file && *g_fault_file) {
        wc->io = &g_fault_hooks;
        d->test_fault_file = g_fault_file; /* "snapshot pause" (fuse_wb_gen.c) */
        log_warn("wb: TIERD_TEST_FAULT_FILE=%s: local I/O fault injection is on (tests only)",
                 g_fault_file);
    }
}
#else
static void install_test_hooks(struct tierd *d, struct wb_config *wc)
{
    (void)d, (void)wc;
}
#endif

/* Open the burst buffer when some namespace is write-back (recovery runs inside wb_open). */
static int open_writeback(struct tierd *d)
{
    const struct tierd_config *c = &d->cfg;
    bool any = false;
    for (size_t n = 0; n < c->nnamespaces; n++)
        any = any || c->namespaces[n].mode == TIERD_NS_WRITE_BACK;
    if (!any)
        return 0;
    struct wb_config wc;
    memset(&wc, 0, sizeof(wc));
    wc.spool_dir = c->wb_spool_dir;
    wc.journal_path = c->wb_journal;
    wc.resolve = wb_resolve_backend;
    wc.resolve_ctx = d;
    wc.upload_threads = c->wb_upload_threads;
    wc.parts_parallel = c->wb_parts_parallel;
    wc.part_size_bytes = c->wb_part_size;
    wc.max_dirty_bytes = c->wb_max_dirty;
    wc.max_dirty_age_ms = c->wb_max_dirty_age_ms;
    wc.backpressure_wait_ms = c->wb_backpressure_wait_ms;
    wc.upload_deadline_ms = c->wb_upload_deadline_ms;
    wc.upload_holdoff_ms = c->wb_upload_holdoff_ms;
    wc.upload_holdoff_max_ms = c->wb_upload_holdoff_max_ms;
    wc.retention_keep = -1; /* [writeback] retention_keep is a policy rule (policy.h) */
    /* per-namespace durability = remote is the FUSE layer's wait after close (fuse_ops_write.c) */
    wc.durability = WB_DURABILITY_LOCAL;
    wc.on_event = wb_log_event;
    wc.event_ctx = d;
    wc.disk_adm = &d->disk_adm; /* spool writes pass the disk lane */
    install_test_hooks(d, &wc);
    int rc = wb_open(&wc, &d->wb);
    if (rc == 0) {
        struct wb_stats st;
        wb_stats_get(d->wb, &st);
        log_info("wb: spool %s: recovered %llu sealed, %llu uploading, %llu discarded, %llu "
                 "aborted",
                 c->wb_spool_dir, (unsigned long long)st.recovered_sealed,
                 (unsigned long long)st.recovered_uploading,
                 (unsigned long long)st.recovered_discarded,
                 (unsigned long long)st.recovered_aborts);
    }
    return rc;
}

/* The telemetry's names for tenant ids, at export. */
static const char *tele_tenant_name(void *ud, uint32_t id)
{
    return tenant_name(ud, id);
}

static void teardown(struct tierd *d)
{
    /* first: a GPU pass resolves pids through the tenant registry, whose reclaim hooks use the
     * cache, the schedulers and the access log; the object goes at telemetry_free */
    gpu_stop(tele_gpu(d->tele));
    if (d->tenants) /* no sweep asks the cache or the hints once they go */
        tenant_reclaim_hooks_set(d->tenants, NULL);
    /* first: a pass in progress (its thread's, or one a /v1/policy/run call is waiting for)
     * stops at its next action; the API's later calls run no action */
    policy_engine_stop(d->policy);
    advisor_stop(d->advisor); /* before the cache it reads; its quotas stay as they are */
    tierd_api_stop(d->api);
    d->api = NULL;
    tierfs_free(d->fuse);
    d->fuse = NULL;
    wb_close(d->wb);
    d->wb = NULL;
    /* after the API, which reads the member; after the write-back's last uploads, which a leave
     * that waits on an unreachable Ceph (up to four calls of 60 s) must not hold up */
    tierd_cluster_close(d);
    policy_engine_free(__atomic_exchange_n(&d->policy, NULL, __ATOMIC_ACQ_REL));
    jobs_free(d->jobs); /* after the API, its caller; before the stager and the cache */
    d->jobs = NULL;
    stage_registry_free(d->stages);
    d->stages = NULL;
    hints_free(d->hints); /* after the mount and the API, its callers; before the cache */
    d->hints = NULL;
    datasets_close(d->datasets); /* after its callers: the mount, the API, the services */
    d->datasets = NULL;
    pinmeta_free(d->pinned); /* after the stager and the mount, its only users */
    d->pinned = NULL;
    advisor_free(d->advisor); /* after the API, which reads it; before the cache */
    d->advisor = NULL;
    if (d->cache)
        cache_close(d->cache);
    d->cache = NULL;
    for (size_t i = 0; i < TIERD_MAX_BACKENDS; i++) {
        backend_free(d->backends[i]);
        d->backends[i] = NULL;
    }
    sched_free(d->sched); /* after the wrappers: each backend's lane lives in it */
    d->sched = NULL;
    sched_free(d->disk_sched); /* after the cache and the burst buffer, its users */
    d->disk_sched = NULL;
    d->disk_lane = NULL;
    telemetry_free(d->tele); /* last: every recorder (mount, scheduler) is gone */
    d->tele = NULL;
    tenant_reg_free(d->tenants); /* after the mount and the API, its users */
    d->tenants = NULL;
    free(d->cfg_text);
    d->cfg_text = NULL;
    tierd_config_fini(&d->cfg);
}

static void on_ready(void *arg, int status)
{
    const struct tierd *d = arg;
    if (status == 0) {
        notify_parent(0, NULL);
        /* systemd (Type=notify): ready once the mount answers (this call) and the API listens
         * (it started before the mount); a no-op without $NOTIFY_SOCKET */
        sd_notifyf(0, "READY=1\nSTATUS=serving %zu namespace(s) at %s", d->nns, d->cfg.mount_path);
    } else {
        tier_err_set("the mount did not answer (%s)", strerror(-status));
        startup_failed("FUSE mount");
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: tierd -c FILE [-f] [-v]\n"
               "       tierd --unmount -c FILE\n"
               "       tierd --version | --help\n"
               "  -c, --config FILE  config file (tierd.conf(5), docs/CONFIG.md)\n"
               "  -f, --foreground   stay in the foreground, log to stderr (to the journal, with\n"
               "                     priorities, under systemd: contrib/systemd/tierd.service)\n"
               "  -v, --verbose      debug logging (overrides [daemon] log_level)\n"
               "  -V, --version      print the version and exit\n"
               "  -U, --unmount      detach the mount a stopped or crashed tierd left at the\n"
               "                     config's [mount] path (a live mount is left alone), exit\n"
               "  -h, --help         this text\n"
               "SIGINT, SIGTERM and SIGHUP unmount and stop; `tierctl reload` re-reads the config\n"
               "exit codes: 0 clean stop, 1 start-up/runtime failure, 2 usage or config error\n");
}

/* stderr is the journal's stream (systemd sets JOURNAL_STREAM to its "DEV:INODE")? */
static bool stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    struct stat st;
    unsigned long long dev, ino;
    if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* The command line: 0 with the options filled in, else the exit code (usage, --version, --help). */
struct opts {
    const char *conf;
    bool fg, verbose, unmount;
};

static int parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                             {"foreground", no_argument, NULL, 'f'},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"version", no_argument, NULL, 'V'},
                                             {"unmount", no_argument, NULL, 'U'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "c:fvVUh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'V':
            printf("tierd %s\n", TIER_VERSION);
            return 0;
        case 'U':
            o->unmount = true;
            break;
        case 'c':
            o->conf = optarg;
            break;
        case 'f':
            o->fg = true;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!o->conf || optind != argc) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Load the config into d->cfg and set the log up; with --unmount, detach a stale mount instead.
 * -1: go on; else the exit code (d->cfg finished). */
static int load_config(struct tierd *d, const struct opts *o)
{
    char err[1024];
    int rc = tierd_config_load(o->conf, &d->cfg, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "tierd: %s\n", err);
        tierd_config_fini(&d->cfg);
        return 2;
    }
    if (o->unmount) {
        /* ExecStopPost: detach the mount a dead tierd left (a live one is not touched) */
        int urc = tierfs_clear_stale_mount(d->cfg.mount_path);
        if (urc < 0)
            fprintf(stderr, "tierd: %s\n", tier_err_msg());
        tierd_config_fini(&d->cfg);
        return urc < 0 ? 1 : 0;
    }
    enum tier_log_level lvl = TIER_LOG_INFO;
    (void)tier_log_level_parse(d->cfg.log_level, &lvl);
    tier_log_set_level(o->verbose ? TIER_LOG_DEBUG : lvl);
    d->verbose = o->verbose;
    d->cfg_text = tier_read_text(o->conf);
    if (o->fg && stderr_is_journal())
        tier_log_use_journal();
    return -1;
}

/* Every API connection, cache file and backend socket is an fd: use all the hard limit. */
static void raise_nofile(void)
{
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &nofile);
    }
}

/* ---- start-up steps, in order (each 0 or -errno with tier_err_msg()) ------------------------ */

static int step_tenants(struct tierd *d)
{
    return tierd_tenants_open(&d->cfg, &d->tenants);
}

static int step_scheduler(struct tierd *d)
{
    /* The default lane admits only requests that name no backend (write-back uploads declare
     * their class there; their backend calls then pass the backend's own lane). */
    struct sched_config sc = {.max_inflight = TIERD_DEFAULT_LANE_MAX_INFLIGHT,
                              .op_cost_bytes = d->cfg.qos_op_cost,
                              .qos_off = !d->cfg.qos};
    for (int c = 0; c < TIER_IO_NCLASSES; c++) /* same encoding: 0 default, NONE none */
        sc.cls[c] = (struct sched_qos_cls){.reservation_bps = d->cfg.classes[c].reservation_bps,
                                           .limit_bps = d->cfg.classes[c].limit_bps,
                                           .weight = (uint32_t)d->cfg.classes[c].weight};
    int rc = sched_new(&sc, &d->sched);
    if (rc == 0)
        rc = apply_tenant_qos(d);
    if (rc == 0)
        rc = open_disk_lane(d);
    return rc;
}

/* [daemon] gpu_sampling = auto: the NVML sampler where the library loads, owned by the
 * telemetry (its thread stopped first thing in teardown, the object freed at telemetry_free).
 * Optional:
 * without the library (an info line) or with one that fails (a warning) tierd goes on without. */
/* Is tierd in the initial pid namespace? NVML gives host pids, which name other processes (or
 * none) in a namespace of tierd's own (a container). Its inode is PROC_PID_INIT_INO; a link that
 * cannot be read counts as not. */
static bool in_initial_pid_ns(void)
{
    char l[64];
    ssize_t n = readlink("/proc/self/ns/pid", l, sizeof(l) - 1);
    if (n <= 0)
        return false;
    l[n] = '\0';
    return strcmp(l, "pid:[4026531836]") == 0;
}

static void start_gpu(struct tierd *d)
{
    if (d->cfg.gpu_sampling == TIERD_GPU_OFF)
        return;
    if (!in_initial_pid_ns()) {
        log_info("gpu: tierd runs in a pid namespace of its own, NVML's pids are the host's: no "
                 "GPU sampling");
        return;
    }
    struct gpu_config gc = {.interval_ns = d->cfg.gpu_sample_interval_ms * TIER_NS_PER_MS,
                            .max_tenants = tenant_id_limit(d->tenants),
                            .tenant_of = tierd_tenant_of_pid,
                            .tenant_of_ud = d->tenants};
    struct gpu *g = NULL;
    int rc = gpu_open(&gc, &g);
    if (rc) {
        if (rc != -ENOENT) /* absent: gpu_open said so at info */
            log_warn("%s: no GPU sampling", tier_err_msg());
        return;
    }
    rc = gpu_start(g);
    if (rc) {
        log_warn("gpu: sampler thread: %s: no GPU sampling", strerror(-rc));
        gpu_close(g);
        return;
    }
    struct gpu_stats st;
    gpu_stats_get(g, &st);
    log_info("gpu: NVML loaded: sampling %u device(s) every %llu ms", st.devices,
             (unsigned long long)d->cfg.gpu_sample_interval_ms);
    tele_gpu_set(d->tele, g);
}

static int step_telemetry(struct tierd *d)
{
    /* One cap for both: every id the registry hands out has its own series. */
    struct telemetry_config tc = {.max_tenants = tenant_id_limit(d->tenants),
                                  .tenant_name = tele_tenant_name,
                                  .tenant_name_ud = d->tenants};
    /* [daemon] telemetry = off leaves d->tele NULL: the FUSE layer and the scheduler then record
     * nothing, /metrics and /v1/telemetry answer 404 (the comparison in docs/BENCHMARKS.md) */
    int rc = d->cfg.telemetry ? telemetry_new(&tc, &d->tele) : 0;
    if (rc == 0)
        sched_set_telemetry(d->sched, d->tele);
    if (rc == 0 && d->tele)
        start_gpu(d);
    return rc;
}

static int step_cache(struct tierd *d)
{
    d->cfg.cache.max_tenants = tenant_id_limit(d->tenants); /* a space account per tenant id */
    d->cfg.cache.store_async = true; /* write-throughs off the reader's path (cache.h) */
    if (d->cfg.auto_quota)
        d->cfg.cache.mrc = true; /* the loop moves quotas along the tenants' curves */
    int rc = cache_open(&d->cfg.cache, &d->cache);
    if (rc == 0)
        rc = apply_tenant_quotas(d);
    return rc;
}

/* The hot-tier advice loop (docs/ADVICE.md): with the curves on; its first tick at once. */
static int step_advice(struct tierd *d)
{
    if (!d->cfg.cache.mrc)
        return 0;
    struct advisor_ctx ac = advisor_ctx_tierd(d);
    struct advisor_config acfg = {.auto_quota = d->cfg.auto_quota};
    int rc = advisor_new(&ac, &acfg, &d->advisor);
    if (rc == 0)
        rc = advisor_start(d->advisor,
                           (d->cfg.advice_interval_ms ? d->cfg.advice_interval_ms : 30000) *
                               TIER_NS_PER_MS);
    if (rc == 0 && d->cfg.auto_quota)
        log_info(
            "advice: auto_quota on: hot-tier quotas move along the tenants' curves every "
            "%llu ms",
            (unsigned long long)(d->cfg.advice_interval_ms ? d->cfg.advice_interval_ms : 30000));
    return rc;
}

/* The dataset versions over the namespaces (wiring.c): before their callers (the stager, the
 * hints, the policies, the API, the mount). */
static int step_datasets(struct tierd *d)
{
    struct datasets_ctx dc = datasets_ctx_tierd(d);
    d->datasets = datasets_open(&dc);
    return d->datasets ? 0 : -ENOMEM;
}

/* The services, each opened with its context (wiring.c). */
static int step_services(struct tierd *d)
{
    int rc = pinmeta_new(&d->pinned);
    if (!rc) {
        struct stage_ctx sc = stage_ctx_tierd(d);
        rc = stage_registry_new(&sc, &d->stages);
    }
    if (!rc) {
        struct jobs_ops jops = jobs_ops_tierd(d);
        rc = jobs_new(&jops, &d->jobs);
    }
    if (!rc && d->cache) {
        struct hints_ctx hc = hints_ctx_tierd(d);
        rc = hints_new(&hc, &d->hints);
    }
    return rc;
}

static int step_policies(struct tierd *d)
{
    struct policy_engine *pe = NULL;
    struct tierd_policy_view *v = malloc(sizeof(*v));
    if (!v)
        return -ENOMEM;
    tierd_policy_view_of(&d->cfg, v);
    struct policy_engine_ctx pc = policy_engine_ctx_tierd(d, &v->conf);
    int rc = policy_engine_start(&pc, &pe);
    free(v);
    if (rc == 0) {
        __atomic_store_n(&d->policy, pe, __ATOMIC_RELEASE);
        /* every holder the hooks ask exists now; the sweeps run on resolution misses (mount) */
        tierd_tenants_reclaim_hooks(d, d->tenants);
    }
    return rc;
}

static int step_api(struct tierd *d)
{
    return tierd_api_start(d, &d->api);
}

static int step_mount(struct tierd *d)
{
    struct tierfs_ctx fc = tierfs_ctx_tierd(d);
    return tierfs_mount(&fc, &d->fuse);
}

static const struct step {
    const char *what; /* for "tierd: start-up failed: WHAT: ..." */
    int (*run)(struct tierd *d);
} steps[] = {
    {"tenants", step_tenants},
    {"scheduler", step_scheduler},
    {"telemetry", step_telemetry},
    {"backends", open_backends},
    {"cache", step_cache},
    {"hot-tier advice", step_advice},
    {"write-back spool", open_writeback},
    {"datasets", step_datasets},
    {"stager", step_services},
    {"lifecycle policies", step_policies},
    {"cluster", tierd_cluster_open},
    {"control API", step_api},
    {"FUSE mount", step_mount},
};

/* Serve until a stop signal (the signals of block are blocked outside the loop). 0 or 1. */
static int serve(struct tierd *d, const sigset_t *block, const sigset_t *old)
{
    log_info("tierd: serving %zu namespace(s) at %s, API on %s", d->nns, d->cfg.mount_path,
             d->cfg.api_socket);
    pthread_sigmask(SIG_SETMASK, old, NULL);
    int rc = tierfs_loop(d->fuse, on_ready, d);
    pthread_sigmask(SIG_BLOCK, block, NULL);
    sd_notify(0, "STOPPING=1\nSTATUS=stopping: unmounting, finishing uploads in flight");
    if (rc)
        log_err("tierd: FUSE loop failed: %s", strerror(-rc));
    else
        log_info("tierd: stopping");
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    static struct tierd d;
    rc = load_config(&d, &o);
    if (rc >= 0)
        return rc;
    if (!o.fg && daemonize() != 0) {
        fprintf(stderr, "tierd: cannot daemonize: %s\n", strerror(errno));
        return 1;
    }
    d.start_ns = tier_now_real_ns();

    sigset_t block, old;
    tierfs_stop_signals(&block);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    signal(SIGPIPE, SIG_IGN);
    raise_nofile();

    int status = 1;
    tier_err_clear();
    size_t i = 0;
    while (i < sizeof(steps) / sizeof(steps[0]) && steps[i].run(&d) == 0)
        i++;
    if (i < sizeof(steps) / sizeof(steps[0]))
        startup_failed(steps[i].what);
    else
        status = serve(&d, &block, &old);
    teardown(&d);
    if (g_notify_fd >= 0)
        notify_parent(1, "start-up failed");
    return status;
}
