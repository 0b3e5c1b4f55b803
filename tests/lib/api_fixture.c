/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_fixture.c - see api_fixture.h. Built like main() builds tierd (open_backends,
 * open_writeback), minus the HTTP server and the mount.
 */
#include "api_fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/err.h"
#include "datasets/dataset.h"
#include "hints/hints.h"
#include "jobs/jobs.h"
#include "stage/stage.h"
#include "qos/sched.h"
#include "tenant/tenant.h"
#include "writeback/wb.h"

static int put_file(const char *dir, const char *rel, const char *text)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    FILE *fp = fopen(p, "w");
    if (!fp)
        return -errno;
    fputs(text, fp);
    return fclose(fp) == 0 ? 0 : -EIO;
}

static struct backend *resolve_backend(void *ctx, const char *name)
{
    struct tierd *d = ctx;
    for (size_t i = 0; i < d->cfg.nbackends; i++)
        if (strcmp(d->cfg.backends[i].name, name) == 0)
            return d->backends[i];
    return NULL;
}

int api_fixture_open(struct api_fixture *f, const char *tag)
{
    memset(f, 0, sizeof(*f));
    const char *root = getenv("TIER_TEST_TMP");
    char dir[512];
    if (!root || !*root)
        root = "/tmp";
    snprintf(dir, sizeof(dir), "%s/%s.XXXXXX", root, tag);
    if (mkdir(root, 0755) == 0)
        chmod(root, 0755); /* whatever the umask: other uids reach the tests' directories */
    if (!mkdtemp(dir))
        return -errno;
    f->dir = strdup(dir);
    char p[1024];
    const char *sub[] = {"warm", "warm/ds", "warm/ds/a", "cold", "cold/ckpt", "spool"};
    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, sub[i]);
        if (mkdir(p, 0755) != 0)
            return -errno;
    }
    int rc = put_file(dir, "warm/ds/a/f.txt", "hello\n");
    if (rc == 0)
        rc = put_file(dir, "warm/ds/b.bin", "0123456789abcdef\n");
    if (rc == 0)
        rc = put_file(dir, "warm/ds/caf\xe9", "latin-1 name\n");
    snprintf(p, sizeof(p), "%s/warm/ds/esc", dir);
    if (rc == 0 && symlink("/etc", p) != 0)
        rc = -errno;
    if (rc)
        return rc;

    char conf[4096];
    int n = snprintf(conf, sizeof(conf),
                     "[cache]\nblock_size = 64K\nram_size = 4M\npin_size = 1M\n"
                     "disk_capacity = 200MiB/s\n"
                     "[writeback]\nspool_dir = %s/spool\nupload_holdoff = 0\n"
                     "[backend warm]\ntype = posix\nroot = %s/warm\nlink_capacity = 100MiB/s\n"
                     "[backend cold]\ntype = posix\nroot = %s/cold\n"
                     "[namespace /ns]\nbackend = warm\nprefix = ds/\n"
                     "[namespace /ck]\nbackend = cold\nprefix = ckpt/\nmode = write-back\n"
                     "[mount]\npath = %s/mnt\n"
                     "[daemon]\nstage_threads = 2\n"
                     "[api]\ntcp = 127.0.0.1:1\ntoken = " API_FIXTURE_TOKEN "\n"
                     "max_stage_jobs = 4\n"
                     "[tenants]\nmax_tenants = " API_FIXTURE_MAX_TENANTS_STR "\n"
                     "[tenant infer]\nclass = inference\nuid = 4242\ndisk_limit = 60MiB/s\n"
                     "[class training]\nlimit = 80MiB/s\n",
                     dir, dir, dir, dir);
    char err[1024];
    rc = tierd_config_load_string("fixture.conf", conf, (size_t)n, &f->d.cfg, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "api_fixture: %s\n", err);
        return rc;
    }
    struct tierd *d = &f->d;
    rc = tierd_tenants_open(&d->cfg, &d->tenants);
    if (rc) {
        fprintf(stderr, "api_fixture: tenants: %s\n", tier_err_msg());
        return rc;
    }
    d->cfg.api_max_wait_ms = 20; /* below the config's minimum: the fuzzer must not sit in waits */
    /* every backend in its scheduler lane, as main() wires them (QoS, GET /v1/qos) */
    struct sched_config sc = {.max_inflight = 32, .op_cost_bytes = d->cfg.qos_op_cost};
    for (int c = 0; c < TIER_IO_NCLASSES; c++)
        sc.cls[c] = (struct sched_qos_cls){.reservation_bps = d->cfg.classes[c].reservation_bps,
                                           .limit_bps = d->cfg.classes[c].limit_bps,
                                           .weight = (uint32_t)d->cfg.classes[c].weight};
    rc = sched_new(&sc, &d->sched);
    for (size_t i = 0; i < d->cfg.nbackends && rc == 0; i++) {
        struct backend *raw = NULL;
        const struct tierd_backend_conf *bc = &d->cfg.backends[i];
        struct sched_backend_config lc = {
            .link_capacity_bps =
                bc->link_capacity_bps == TIERD_RATE_NONE ? 0 : bc->link_capacity_bps};
        rc = backend_posix_open(&bc->posix, &raw);
        if (rc == 0) {
            rc = sched_backend_wrap(d->sched, raw, &lc, &d->backends[i]);
            if (rc)
                backend_free(raw);
        }
    }
    /* the disk's lane, as main.c open_disk_lane makes it (GET and PUT /v1/qos "disk") */
    if (rc == 0) {
        struct sched_config dsc = {.op_cost_bytes = d->cfg.disk_op_cost};
        for (int c = 0; c < TIER_IO_NCLASSES; c++)
            dsc.cls[c] = (struct sched_qos_cls){.limit_bps = d->cfg.classes[c].disk_limit_bps,
                                                .weight = (uint32_t)d->cfg.classes[c].disk_weight};
        rc = sched_new(&dsc, &d->disk_sched);
    }
    if (rc == 0) {
        struct sched_backend_config dbc = {
            .max_inflight = d->cfg.disk_max_inflight,
            .admit_timeout_ms = SCHED_TIMEOUT_NONE,
            .breaker_failures = -1,
            .link_capacity_bps =
                d->cfg.disk_capacity_bps == TIERD_RATE_NONE ? 0 : d->cfg.disk_capacity_bps,
            .idle_fast = true,
        };
        rc = sched_lane_new(d->disk_sched, "disk", &dbc, &d->disk_lane);
    }
    for (size_t i = 0; i < d->cfg.ntenants && rc == 0; i++) {
        const struct tierd_tenant_conf *t = &d->cfg.tenants[i];
        uint32_t id = 0;
        if (t->qos.disk_limit_bps && tenant_find(d->tenants, t->name, &id) == 0)
            rc = sched_tenant_limit_set(d->disk_sched, id, t->qos.disk_limit_bps);
    }
    if (rc == 0) {
        sched_lane_disk_adm(d->disk_lane, &d->disk_adm);
        d->cfg.cache.disk_adm = &d->disk_adm;
    }
    for (size_t i = 0; i < d->cfg.nnamespaces; i++) {
        d->ns[i].conf = &d->cfg.namespaces[i];
        for (size_t b = 0; b < d->cfg.nbackends; b++)
            if (strcmp(d->cfg.backends[b].name, d->cfg.namespaces[i].backend) == 0)
                d->ns[i].be = d->backends[b];
    }
    d->nns = d->cfg.nnamespaces;
    if (rc == 0) {
        struct datasets_ctx dc = datasets_ctx_tierd(d);
        rc = (d->datasets = datasets_open(&dc)) ? 0 : -ENOMEM;
    }
    if (rc == 0)
        rc = cache_open(&d->cfg.cache, &d->cache);
    if (rc == 0) {
        struct wb_config wc;
        memset(&wc, 0, sizeof(wc));
        wc.spool_dir = d->cfg.wb_spool_dir;
        wc.resolve = resolve_backend;
        wc.resolve_ctx = d;
        wc.upload_threads = 1;
        wc.parts_parallel = 1;
        wc.part_size_bytes = d->cfg.wb_part_size;
        wc.retention_keep = 2;
        rc = wb_open(&wc, &d->wb);
    }
    if (rc == 0) {
        struct stage_ctx stc = stage_ctx_tierd(d);
        rc = stage_registry_new(&stc, &d->stages);
    }
    if (rc == 0) {
        struct jobs_ops jops = jobs_ops_tierd(d);
        rc = jobs_new(&jops, &d->jobs);
    }
    if (rc == 0) {
        struct wb_file *fh = NULL;
        rc = wb_file_create(d->wb, "cold", "ckpt/caf\xe9", &fh);
        if (rc == 0 && wb_write(fh, "x\n", 2, 0) != 2)
            rc = -EIO;
        if (fh) {
            int crc = wb_file_close(fh);
            rc = rc ? rc : crc;
        }
        /* uploaded before the caller registers its atexit handler: the upload initialises
         * OpenSSL, whose own exit handler must run after the uploader threads have stopped */
        if (rc == 0)
            rc = wb_wait(d->wb, "cold", "ckpt/caf\xe9", 30000);
    }
    if (rc)
        fprintf(stderr, "api_fixture: start-up failed: %s (%s)\n", strerror(-rc), tier_err_msg());
    return rc;
}

static void rmtree(const char *path)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "api_fixture: could not remove %s\n", path);
}

void api_fixture_close(struct api_fixture *f)
{
    struct tierd *d = &f->d;
    jobs_free(d->jobs);
    stage_registry_free(d->stages);
    datasets_close(d->datasets);
    wb_close(d->wb);
    if (d->cache)
        cache_close(d->cache);
    sched_free(d->sched);
    sched_free(d->disk_sched); /* after the cache, its user */
    for (size_t i = 0; i < TIERD_MAX_BACKENDS; i++)
        backend_free(d->backends[i]);
    tenant_reg_free(d->tenants);
    tierd_config_fini(&d->cfg);
    if (f->dir) {
        rmtree(f->dir);
        free(f->dir);
    }
    memset(f, 0, sizeof(*f));
}

/* A copy of text[0..len) with its percent escapes decoded (MHD_http_unescape, as the server). */
static char *decode(const char *text, size_t len)
{
    char *s = strndup(text, len);
    if (s)
        s[MHD_http_unescape(s)] = '\0';
    return s;
}

void api_fixture_request(struct api_fixture *f, const char *raw, size_t len, struct api_reply *out)
{
    memset(out, 0, sizeof(*out));
    /* request line */
    const char *end = raw + len;
    const char *nl = memchr(raw, '\n', len);
    const char *line_end = nl ? nl : end;
    const char *sp = memchr(raw, ' ', (size_t)(line_end - raw));
    char *method = strndup(raw, sp ? (size_t)(sp - raw) : (size_t)(line_end - raw));
    const char *url = sp ? sp + 1 : line_end;
    const char *q = memchr(url, '?', (size_t)(line_end - url));
    char *path = decode(url, (size_t)((q ? q : line_end) - url));
    char *arg_path = NULL;
    for (const char *a = q ? q + 1 : NULL; a && a < line_end;) {
        const char *amp = memchr(a, '&', (size_t)(line_end - a));
        const char *aend = amp ? amp : line_end;
        if ((size_t)(aend - a) >= 5 && memcmp(a, "path=", 5) == 0 && !arg_path)
            arg_path = decode(a + 5, (size_t)(aend - a - 5));
        else if ((size_t)(aend - a) == 4 && memcmp(a, "path", 4) == 0 && !arg_path)
            arg_path = strdup(""); /* MHD gives "" for a key without '=' */
        a = amp ? amp + 1 : NULL;
    }
    /* headers */
    char *auth = NULL;
    struct api_head h = {.content_length = -1, .may_mutate = true};
    uid_t peer_uid = 0; /* the Unix-socket peer's SO_PEERCRED uid: root unless X-Caller says */
    const char *p = nl ? nl + 1 : end;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        const char *le = e ? e : end;
        if (le == p) {
            p = e ? e + 1 : end;
            break;
        }
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon) {
            size_t kl = (size_t)(colon - p);
            const char *v = colon + 1;
            while (v < le && *v == ' ')
                v++;
            size_t vl = (size_t)(le - v);
            if (kl == 13 && strncasecmp(p, "Authorization", 13) == 0 && !auth)
                auth = strndup(v, vl);
            else if (kl == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
                /* the input is not NUL-terminated: parse a bounded copy */
                char num[20] = "";
                if (vl > 0 && vl < sizeof(num) && v[0] >= '0' && v[0] <= '9')
                    memcpy(num, v, vl);
                h.content_length = num[0] ? strtoll(num, NULL, 10) : -1;
            } else if (kl == 10 && strncasecmp(p, "X-Listener", 10) == 0)
                h.tcp = vl == 3 && memcmp(v, "tcp", 3) == 0;
            else if (kl == 8 && strncasecmp(p, "X-Caller", 8) == 0) {
                bool reader = vl == 6 && memcmp(v, "reader", 6) == 0;
                bool infer = vl == 5 && memcmp(v, "infer", 5) == 0;
                h.may_mutate = !reader && !infer;
                peer_uid = infer ? 4242 : reader ? 65534 : 0;
            }
        }
        p = e ? e + 1 : end;
    }
    if (!method || !path) {
        free(method);
        free(path);
        free(arg_path);
        free(auth);
        api_reply_too_large(out); /* any valid answer: the test only checks it is JSON */
        return;
    }
    h.method = method;
    h.url = path;
    h.authorization = auth;
    if (h.tcp)
        h.may_mutate = true; /* the token is the TCP listener's access control */
    if (api_admit(&f->d, &h, out) == 0) {
        size_t body_len = (size_t)(end - p);
        if (body_len > api_body_max(method, path, h.may_mutate)) {
            api_reply_too_large(out);
        } else {
            struct api_request rq = {
                .method = method,
                .url = path,
                .arg_path = arg_path,
                .body = body_len ? p : NULL,
                .body_len = body_len,
                /* as api.c fills them: the caller's rights, and on the Unix socket its peer
                 * (this process, under the caller's uid) */
                .admin = h.may_mutate,
                .peer = !h.tcp,
                .pid = getpid(),
                .uid = peer_uid,
                .gid = peer_uid,
            };
            api_handle(&f->d, &rq, out);
        }
    }
    free(method);
    free(path);
    free(arg_path);
    free(auth);
}

int api_fixture_hints_new(struct api_fixture *f)
{
    struct hints_ctx hc = hints_ctx_tierd(&f->d);
    return hints_new(&hc, &f->d.hints);
}
