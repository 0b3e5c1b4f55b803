/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tierctl.c - the command-line tool for a running tierd: status, stage, pin, unpin, evict, top
 * (the model and table in top.c), and for write-back namespaces wait and checkpoints.
 *
 * It talks to tierd only over the control API (docs/API.md) through client.c, and links no
 * daemon code, so it works against any tierd that speaks the API. Exit codes (docs/TIERCTL.md):
 * 0 ok, 1 operation failed, 2 usage error, 3 tierd not reachable, 4 API error, 130 interrupted.
 * Single-threaded.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/client.h"
#include "cli/progress.h"
#include "cli/qos.h"
#include "cli/top.h"
#include "common/strutil.h"
#include "common/timeutil.h"

enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_UNREACHABLE = 3,
    EXIT_API = 4,
    EXIT_INTERRUPTED = 130,
};

#define DEFAULT_SOCKET "/run/tierd/api.sock"
#define START_HINT "tierd -c /etc/tierd/tierd.conf"
/* Poll a staging job every 50 ms for its first 2 s (a small job's end is seen at once), then
 * every 200 ms. */
#define POLL_FAST_MS 50
#define POLL_MS 200
#define POLL_FAST_NS (2 * TIER_NS_PER_SEC)
#define PLAIN_EVERY_NS (2 * TIER_NS_PER_SEC)

static const char usage_text[] =
    "usage: tierctl [-s SOCKET | --tcp [https://]HOST:PORT [--token-file FILE]] COMMAND [ARGS]\n"
    "\n"
    "Control a running tierd over its control API.\n"
    "\n"
    "commands:\n"
    "  status [--json]                 tiers, budgets and usage, hit ratios, namespaces\n"
    "  stats                           cache and scheduler counters (JSON)\n"
    "  stage PATH... [--pin] [--no-wait] [--tenant NAME] [--cluster]\n"
    "                                  fetch every block of every file under PATHs into the\n"
    "                                  hot tier, with progress; safe to re-run (cached blocks\n"
    "                                  are skipped); --tenant: for that tenant (its QoS share\n"
    "                                  and hot-tier quota; default: tenant default);\n"
    "                                  --cluster: each block into the cache of the cluster\n"
    "                                  node that owns it (fetched once for the cluster)\n"
    "  stage --job ID                  follow a staging job started earlier\n"
    "  pin PATH                        keep PATH's blocks in the hot tier\n"
    "  unpin PATH                      let them be evicted again\n"
    "  evict PATH                      drop PATH's unpinned blocks from the hot tier\n"
    "  wait PATH [--timeout SECONDS]   block until every closed file under PATH (a file or a\n"
    "                                  directory of a write-back namespace) is durable in the\n"
    "                                  backend (S3); exit 1 if --timeout passes first\n"
    "  checkpoints [PATH] [--json]     files of write-back namespaces (under PATH): state, size,\n"
    "                                  upload progress, age\n"
    "  top [--interval SECONDS] [--sort ops|bytes] [--once] [--json] [--count N]\n"
    "                                  live per-tenant view: ops/s, MB/s, hit % by tier,\n"
    "                                  p50/p99 per class, scheduler queue wait; --once: one\n"
    "                                  interval, one table; --json: one JSON object per interval\n"
    "  qos [--interval SECONDS] [--json]\n"
    "                                  per backend lane and the disk's, tenant and class:\n"
    "                                  reservation, weight, limit and the rate delivered over\n"
    "                                  SECONDS (default 1)\n"
    "  qos set TENANT [reservation=RATE] [weight=N] [limit=RATE] [class=CLASS]\n"
    "          [backend=NAME | resource=disk] [cache_quota=SIZE]\n"
    "                                  change a tenant's QoS live (root or [api] admin_group):\n"
    "                                  on every backend lane, on backend NAME's only, or on the\n"
    "                                  local disk's lane; RATE like 100MiB/s or none, default:\n"
    "                                  back to the default; cache_quota: its hot-tier space\n"
    "                                  (like 40G, or none; lowering it evicts at once)\n"
    "  hint PATH --order FILE [--name NAME] [--tenant T] [--append]\n"
    "                                  the order files under PATH will be read in (FILE: a\n"
    "                                  path per line, relative to PATH; -: stdin); tierd\n"
    "                                  prefetches ahead (docs/HINTS.md)\n"
    "  hint --list | --drop NAME       show the hint sets, or drop one\n"
    "  jobs [show|release ID] [--json] admitted and queued jobs; release one\n"
    "  dataset commit|show|path|delete PATH NAME | list PATH | diff PATH A B   [--json]\n"
    "                                  dataset versions: record every file under PATH (no\n"
    "                                  copy) as version NAME; list, show, diff, delete\n"
    "                                  (docs/VERSIONS.md)\n"
    "  reload [--json]                 re-read tierd's config: applies [daemon] log_level and the\n"
    "                                  [policy] sections, names what needs a restart\n"
    "  policy status | plan [NAME] | run [NAME]   [--json]\n"
    "                                  lifecycle policies: what they did; what one pass would\n"
    "                                  do; run a pass now (exit 1 if an action failed)\n"
    "  cluster [--json]                the [cluster] members as this node sees them: id,\n"
    "                                  address, weight and share, incarnation; the epoch\n";
/* The rest of the text (one literal stays under C's 4095-character guarantee). */
static const char usage_tail[] =
    "  advise [--json]                 per tenant and for the node: hit ratio and data stall\n"
    "                                  now, predicted at other hot-tier sizes, the size for\n"
    "                                  the utilisation target, the advised quota split\n"
    "                                  (docs/ADVICE.md)\n"
    "\n"
    "PATH is a path in tierd's namespace (\"/datasets/x\") or a path under the mount point.\n"
    "\n"
    "options:\n"
    "  -s, --socket PATH   control socket (default $TIERD_SOCKET or " DEFAULT_SOCKET ")\n"
    "      --tcp HOST:PORT use the TCP listener instead (needs $TIERD_TOKEN or --token-file);\n"
    "                      https://HOST:PORT when tierd has [api] tls_cert\n"
    "      --token-file FILE  read the bearer token for --tcp from FILE\n"
    "      --cacert FILE   CA certificate (PEM) to verify tierd's TLS certificate\n"
    "      --token TOKEN   bearer token on the command line (other users see it in ps:\n"
    "                      prefer $TIERD_TOKEN or --token-file)\n"
    "  -h, --help          this text\n"
    "      --version       print the version\n"
    "\n"
    "exit status:\n"
    "  0  success\n"
    "  1  the operation failed (e.g. some files could not be staged; the first error is shown;\n"
    "     wait: the timeout passed before PATH was durable)\n"
    "  2  usage error\n"
    "  3  tierd is not reachable (not running, or no permission on its socket)\n"
    "  4  tierd refused the request (its error message is shown)\n"
    "  130 interrupted (a staging job keeps running in tierd)\n";

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

struct ctl {
    struct ctl_client *cl;
    const char *socket_path;
    const char *tcp;
    bool status_loaded;
    char *mount; /* mount point from /v1/status, or NULL */
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tierctl: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nRun 'tierctl --help' for usage.\n");
    va_end(ap);
    return EXIT_USAGE;
}

/* ---- requests ------------------------------------------------------------------------------ */

/* What a request's outcome means for the user: prints why it failed and returns the exit code
 * (EXIT_OK for a 2xx answer). j (the answer, borrowed) gives the daemon's error message. */
static int outcome(const struct ctl *ctl, const char *method, const char *path, enum ctl_result r,
                   long status, const json_t *j, const char *err)
{
    switch (r) {
    case CTL_OK:
        break;
    case CTL_UNREACHABLE:
        if (ctl->tcp)
            fprintf(stderr,
                    "tierctl: tierd is not reachable at %s (%s). Start it with: " START_HINT "\n",
                    ctl->tcp, err);
        else
            fprintf(stderr,
                    "tierctl: tierd is not running (no control socket at %s). Start it "
                    "with: " START_HINT "\n",
                    ctl->socket_path);
        return EXIT_UNREACHABLE;
    case CTL_DENIED:
        fprintf(stderr, "tierctl: %s (run tierctl as root or as a member of the socket's group)\n",
                err);
        return EXIT_UNREACHABLE;
    case CTL_FAILED:
        fprintf(stderr, "tierctl: %s\n", err);
        return EXIT_API;
    }
    if (status < 200 || status > 299) {
        const char *msg = json_string_value(json_object_get(j, "error"));
        if (msg)
            fprintf(stderr, "tierctl: %s\n", msg);
        else
            fprintf(stderr, "tierctl: tierd answered %s %s with HTTP %ld\n", method, path, status);
        return EXIT_API;
    }
    return EXIT_OK;
}

/* One request; on anything but a 2xx JSON answer prints why and returns the exit code. */
static int call(struct ctl *ctl, const char *method, const char *path, const json_t *body,
                json_t **answer, char **raw)
{
    char err[512];
    long status = 0;
    json_t *j = NULL;
    enum ctl_result r =
        ctl_request(ctl->cl, method, path, body, &status, &j, raw, err, sizeof(err));
    int rc = outcome(ctl, method, path, r, status, j, err);
    if (rc != EXIT_OK) {
        json_decref(j);
        if (raw && r == CTL_OK) {
            free(*raw);
            *raw = NULL;
        }
        return rc;
    }
    if (answer)
        *answer = j;
    else
        json_decref(j);
    return EXIT_OK;
}

static uint64_t jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        return json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
    if (json_is_real(v))
        return json_real_value(v) > 0 ? (uint64_t)json_real_value(v) : 0;
    return 0;
}

static double jreal(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static const char *jstr(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

/* The mount point as /v1/status reports it: a string, or an object with "path". */
static const char *status_mount(const json_t *st)
{
    const json_t *m = json_object_get(st, "mount");
    if (json_is_string(m))
        return json_string_value(m);
    if (json_is_object(m))
        return jstr(m, "path", NULL);
    return NULL;
}

/* Turn a user path into a namespace path: relative paths are taken from the current directory,
 * and a path under the mount point loses the mount prefix. Returns a malloc'd string or NULL
 * (out of memory). A failed status lookup only skips the mount translation. */
static char *api_path(struct ctl *ctl, const char *arg)
{
    char *abs = NULL;
    if (arg[0] == '/') {
        abs = strdup(arg);
    } else {
        char cwd[4096];
        if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, arg) < 0)
            abs = NULL;
    }
    if (!abs)
        return NULL;

    if (!ctl->status_loaded) {
        json_t *st = NULL;
        char err[256];
        long code = 0;
        ctl->status_loaded = true;
        if (ctl_request(ctl->cl, "GET", "/v1/status", NULL, &code, &st, NULL, err, sizeof(err)) ==
                CTL_OK &&
            code / 100 == 2) {
            const char *m = status_mount(st);
            if (m && strcmp(m, "/") != 0 && *m)
                ctl->mount = strdup(m);
        }
        json_decref(st);
    }
    if (ctl->mount) {
        size_t ml = strlen(ctl->mount);
        while (ml > 1 && ctl->mount[ml - 1] == '/')
            ml--;
        if (strncmp(abs, ctl->mount, ml) == 0 && (abs[ml] == '/' || abs[ml] == '\0')) {
            char *rel = strdup(abs[ml] ? abs + ml : "/");
            free(abs);
            abs = rel;
        }
    }
    return abs;
}

/* ---- status -------------------------------------------------------------------------------- */

static void print_level(const char *name, const json_t *lv)
{
    char used[32], budget[32];
    if (!json_is_object(lv) || jnum(lv, "budget") == 0) {
        printf("%-10s %s\n", name, "off");
        return;
    }
    uint64_t u = jnum(lv, "used"), b = jnum(lv, "budget");
    char pct[16];
    snprintf(pct, sizeof(pct), "%.0f%%", b ? 100.0 * (double)u / (double)b : 0.0);
    printf("%-10s %-11s %-11s %-5s %-10llu %-10llu %-10llu %llu\n", name,
           tier_fmt_bytes(u, used, sizeof(used)), tier_fmt_bytes(b, budget, sizeof(budget)), pct,
           (unsigned long long)jnum(lv, "blocks"), (unsigned long long)jnum(lv, "hits"),
           (unsigned long long)jnum(lv, "misses"), (unsigned long long)jnum(lv, "evictions"));
}

static void print_status(const json_t *st)
{
    char up[32], a[32], b[32];
    const char *mount = status_mount(st);
    const json_t *mounted = json_object_get(st, "mounted");
    bool is_mounted = mount && (!json_is_boolean(mounted) || json_is_true(mounted));
    printf("tierd %s, up %s, %s%s\n\n", jstr(st, "version", "?"),
           ctl_fmt_duration(jreal(st, "uptime_s"), up, sizeof(up)),
           is_mounted ? "mounted at " : "not mounted", is_mounted ? mount : "");

    const json_t *c = json_object_get(st, "cache");
    printf("%-10s %-11s %-11s %-5s %-10s %-10s %-10s %s\n", "TIER", "USED", "BUDGET", "USE",
           "BLOCKS", "HITS", "MISSES", "EVICTIONS");
    print_level("ram", json_object_get(c, "ram"));
    print_level("disk", json_object_get(c, "disk"));
    printf("\npinned     %s of %s\n", tier_fmt_bytes(jnum(c, "pinned_bytes"), a, sizeof(a)),
           tier_fmt_bytes(jnum(c, "pin_budget"), b, sizeof(b)));
    printf("hit ratio  %.1f%%\n", 100.0 * jreal(c, "hit_ratio"));
    printf("fetches    %llu from backends (%s), %llu failed\n",
           (unsigned long long)jnum(c, "fetches"),
           tier_fmt_bytes(jnum(c, "fetch_bytes"), a, sizeof(a)),
           (unsigned long long)jnum(c, "fetch_errors"));

    const json_t *wb = json_object_get(st, "writeback");
    if (json_is_object(wb))
        printf("write-back %s not yet uploaded: %llu open, %llu sealed (%llu held while "
               "writers write), %llu uploading, %llu failed; %llu uploaded since start\n",
               tier_fmt_bytes(jnum(wb, "dirty_bytes"), a, sizeof(a)),
               (unsigned long long)jnum(wb, "open"), (unsigned long long)jnum(wb, "sealed"),
               (unsigned long long)jnum(wb, "held"), (unsigned long long)jnum(wb, "uploading"),
               (unsigned long long)jnum(wb, "failed"),
               (unsigned long long)jnum(wb, "uploads_done"));

    const json_t *nss = json_object_get(st, "namespaces");
    printf("\n%-24s %-12s %-6s %-20s %s\n", "NAMESPACE", "BACKEND", "TYPE", "PREFIX", "MODE");
    size_t i;
    const json_t *ns;
    json_array_foreach(nss, i, ns)
    {
        const json_t *mode = json_object_get(ns, "mode");
        const char *ms = json_is_string(mode)       ? json_string_value(mode)
                         : json_integer_value(mode) ? "write-back"
                                                    : "read-cache";
        const char *prefix = jstr(ns, "prefix", "");
        printf("%-24s %-12s %-6s %-20s %s\n", jstr(ns, "path", "?"), jstr(ns, "backend", "?"),
               jstr(ns, "type", "?"), *prefix ? prefix : "(root)", ms);
    }
    if (json_array_size(nss) == 0)
        printf("(none)\n");
}

/* --json: the API's answer as it came, ending in one newline. */
static void print_raw_json(const char *raw)
{
    size_t len = raw ? strlen(raw) : 0;
    fputs(raw ? raw : "", stdout);
    if (len == 0 || raw[len - 1] != '\n')
        fputc('\n', stdout);
}

/* The options of a command whose only flag is --json; optind is left at the first operand.
 * Returns 0, or usage_error()'s exit code (2). */
static int parse_json_flag(int argc, char **argv, const char *cmd, bool *as_json)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'}, {0, 0, 0, 0}};
    int c;
    optind = 0; /* GNU getopt: re-initialise for the command's own options */
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c != 'j')
            return usage_error("%s: unknown option", cmd);
        *as_json = true;
    }
    return 0;
}

static int cmd_status(struct ctl *ctl, int argc, char **argv)
{
    bool as_json = false;
    int urc = parse_json_flag(argc, argv, "status", &as_json);
    if (urc)
        return urc;
    if (optind != argc)
        return usage_error("status takes no arguments (got '%s')", argv[optind]);

    json_t *st = NULL;
    char *raw = NULL;
    int rc = call(ctl, "GET", "/v1/status", NULL, &st, as_json ? &raw : NULL);
    if (rc != EXIT_OK)
        return rc;
    if (as_json) {
        print_raw_json(raw);
    } else {
        print_status(st);
    }
    free(raw);
    json_decref(st);
    return EXIT_OK;
}

static int cmd_stats(struct ctl *ctl, int argc, char **argv)
{
    (void)argv;
    if (argc != 1)
        return usage_error("stats takes no arguments (got '%s')", argv[1]);
    json_t *st = NULL;
    int rc = call(ctl, "GET", "/v1/stats", NULL, &st, NULL);
    if (rc != EXIT_OK)
        return rc;
    json_dumpf(st, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    fputc('\n', stdout);
    json_decref(st);
    return EXIT_OK;
}

/* ---- stage --------------------------------------------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    /* An interrupting signal cuts the nap short, which is what the poll loop wants. */
    nanosleep(&ts, NULL);
}

static void progress_from_json(const json_t *j, struct ctl_progress *p)
{
    p->running = strcmp(jstr(j, "state", "running"), "running") == 0;
    p->listing_done = json_is_true(json_object_get(j, "listing_done"));
    p->files_total = jnum(j, "files_total");
    p->files_done = jnum(j, "files_done");
    p->bytes_total = jnum(j, "bytes_total");
    p->bytes_done = jnum(j, "bytes_done");
    p->bytes_already_cached = jnum(j, "bytes_already_cached");
    p->bytes_on_peers = jnum(j, "bytes_on_peers");
    p->errors = jnum(j, "errors");
    p->elapsed_s = jreal(j, "elapsed_s");
}

static int follow_job(struct ctl *ctl, uint64_t job)
{
    char path[64], line[512];
    bool tty = isatty(STDOUT_FILENO) == 1;
    uint64_t t_start = tier_now_mono_ns();
    uint64_t last_plain = t_start; /* first plain line after PLAIN_EVERY_NS */
    struct ctl_progress p = {.running = true};
    json_t *j = NULL;
    int rc;

    snprintf(path, sizeof(path), "/v1/stage/%llu", (unsigned long long)job);
    for (;;) {
        json_decref(j);
        j = NULL;
        rc = call(ctl, "GET", path, NULL, &j, NULL);
        if (rc != EXIT_OK) {
            if (tty)
                fputc('\n', stdout);
            return rc;
        }
        progress_from_json(j, &p);
        if (tty) {
            printf("\r%s\033[K", ctl_progress_line(&p, true, line, sizeof(line)));
            fflush(stdout);
        } else if (p.running && tier_now_mono_ns() - last_plain >= PLAIN_EVERY_NS) {
            printf("%s\n", ctl_progress_line(&p, false, line, sizeof(line)));
            fflush(stdout);
            last_plain = tier_now_mono_ns();
        }
        if (!p.running)
            break;
        if (g_interrupted) {
            if (tty)
                fputc('\n', stdout);
            fprintf(stderr,
                    "tierctl: interrupted; staging job %llu keeps running in tierd (follow it "
                    "with: tierctl stage --job %llu)\n",
                    (unsigned long long)job, (unsigned long long)job);
            json_decref(j);
            return EXIT_INTERRUPTED;
        }
        sleep_ms(tier_now_mono_ns() - t_start < POLL_FAST_NS ? POLL_FAST_MS : POLL_MS);
    }
    if (tty)
        fputc('\n', stdout);
    printf("%s\n", ctl_progress_summary(&p, line, sizeof(line)));

    rc = EXIT_OK;
    const char *state = jstr(j, "state", "?");
    const char *first = jstr(j, "first_error", "");
    if (p.errors > 0) {
        fprintf(stderr, "tierctl: %llu file%s could not be staged; first error: %s\n",
                (unsigned long long)p.errors, p.errors == 1 ? "" : "s", first);
        rc = EXIT_FAILED;
    } else if (strcmp(state, "done") != 0) {
        fprintf(stderr, "tierctl: staging job %llu %s%s%s\n", (unsigned long long)job, state,
                *first ? ": " : "", first);
        rc = EXIT_FAILED;
    }
    json_decref(j);
    return rc;
}

static int cmd_stage(struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        {"pin", no_argument, NULL, 'p'},       {"no-wait", no_argument, NULL, 'n'},
        {"job", required_argument, NULL, 'j'}, {"tenant", required_argument, NULL, 't'},
        {"cluster", no_argument, NULL, 'c'},   {0, 0, 0, 0}};
    bool pin = false, wait = true, cluster = false;
    const char *tenant = NULL;
    uint64_t job = 0;
    int c;
    optind = 0; /* GNU getopt: re-initialise for the command's own options */
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            pin = true;
            break;
        case 'n':
            wait = false;
            break;
        case 'j':
            if (tier_parse_u64(optarg, &job) != 0 || job == 0)
                return usage_error("--job wants a job number, not '%s'", optarg);
            break;
        case 't':
            tenant = optarg;
            break;
        case 'c':
            cluster = true;
            break;
        default:
            return usage_error("%s: unknown option", "stage");
        }
    }
    if (job) {
        if (optind != argc || pin || !wait || tenant || cluster)
            return usage_error("%s: --job takes no paths and no other option", "stage");
        return follow_job(ctl, job);
    }
    if (optind == argc)
        return usage_error("%s: give at least one PATH to stage", "stage");

    json_t *paths = json_array();
    json_t *body = json_object();
    int rc = EXIT_OK;
    if (!paths || !body) {
        rc = EXIT_FAILED;
        goto out;
    }
    for (int i = optind; i < argc; i++) {
        char *p = api_path(ctl, argv[i]);
        if (!p || json_array_append_new(paths, json_string(p)) != 0) {
            free(p);
            fprintf(stderr, "tierctl: out of memory\n");
            rc = EXIT_FAILED;
            goto out;
        }
        free(p);
    }
    json_object_set(body, "paths", paths);
    json_object_set_new(body, "pin", json_boolean(pin));
    if (tenant)
        json_object_set_new(body, "tenant", json_string(tenant));
    if (cluster)
        json_object_set_new(body, "cluster", json_true());

    json_t *ans = NULL;
    rc = call(ctl, "POST", "/v1/stage", body, &ans, NULL);
    if (rc != EXIT_OK)
        goto out;
    job = jnum(ans, "job");
    json_decref(ans);
    if (job == 0) {
        fprintf(stderr, "tierctl: tierd accepted the staging request but sent no job number\n");
        rc = EXIT_API;
        goto out;
    }
    if (!wait) {
        printf("staging job %llu started (follow it with: tierctl stage --job %llu)\n",
               (unsigned long long)job, (unsigned long long)job);
        goto out;
    }
    rc = follow_job(ctl, job);
out:
    json_decref(paths);
    json_decref(body);
    return rc;
}

/* ---- pin, unpin, evict --------------------------------------------------------------------- */

static int cmd_path_op(struct ctl *ctl, const char *cmd, int argc, char **argv)
{
    if (argc != 2)
        return usage_error("%s takes exactly one PATH", cmd);
    if (argv[1][0] == '-')
        return usage_error("%s: unknown option", argv[1]);
    char *p = api_path(ctl, argv[1]);
    if (!p) {
        fprintf(stderr, "tierctl: out of memory\n");
        return EXIT_FAILED;
    }
    char url[32];
    snprintf(url, sizeof(url), "/v1/%s", cmd);
    json_t *body = json_pack("{s:s}", "path", p);
    json_t *ans = NULL;
    int rc = body ? call(ctl, "POST", url, body, &ans, NULL) : EXIT_FAILED;
    if (rc == EXIT_OK) {
        if (strcmp(cmd, "evict") == 0)
            printf("evicted %llu blocks under %s\n",
                   (unsigned long long)jnum(ans, "evicted_blocks"), p);
        else
            printf("%sned %s\n", cmd, p);
    }
    json_decref(ans);
    json_decref(body);
    free(p);
    return rc;
}

/* ---- wait, checkpoints (write-back namespaces) --------------------------------------------- */

/* One /v1/wait request of at most this long, so that Ctrl-C is seen between requests and the
 * HTTP client's 30 s request timeout is never reached. */
#define WAIT_CHUNK_S 20.0

static int cmd_wait(struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {{"timeout", required_argument, NULL, 't'}, {0, 0, 0, 0}};
    double timeout_s = -1;
    int c;
    optind = 0; /* GNU getopt: re-initialise for the command's own options */
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c != 't')
            return usage_error("%s: unknown option", "wait");
        char *end = NULL;
        errno = 0;
        timeout_s = strtod(optarg, &end);
        if (errno || end == optarg || *end || !(timeout_s >= 0) || timeout_s > 1e8)
            return usage_error("--timeout wants a number of seconds >= 0, not '%s'", optarg);
    }
    if (argc - optind != 1)
        return usage_error("wait takes exactly one PATH");
    char *p = api_path(ctl, argv[optind]);
    if (!p) {
        fprintf(stderr, "tierctl: out of memory\n");
        return EXIT_FAILED;
    }
    uint64_t t0 = tier_now_mono_ns();
    int rc = EXIT_OK;
    for (;;) {
        double elapsed = (double)(tier_now_mono_ns() - t0) / (double)TIER_NS_PER_SEC;
        double chunk = WAIT_CHUNK_S;
        if (timeout_s >= 0 && timeout_s - elapsed < chunk)
            chunk = timeout_s - elapsed > 0 ? timeout_s - elapsed : 0;
        json_t *body = json_pack("{s:s, s:f}", "path", p, "timeout_s", chunk);
        json_t *ans = NULL;
        long status = 0;
        char err[512];
        enum ctl_result r = body ? ctl_request(ctl->cl, "POST", "/v1/wait", body, &status, &ans,
                                               NULL, err, sizeof(err))
                                 : CTL_FAILED;
        json_decref(body);
        if (r != CTL_OK || (status / 100 != 2 && status != 504)) {
            rc = outcome(ctl, "POST", "/v1/wait", r, status, ans, err);
            json_decref(ans);
            if (rc == EXIT_OK) /* a 1xx/3xx answer */
                rc = EXIT_API;
            break;
        }
        json_decref(ans);
        elapsed = (double)(tier_now_mono_ns() - t0) / (double)TIER_NS_PER_SEC;
        char d[32];
        if (status / 100 == 2) {
            printf("%s is durable in the backend (waited %s)\n", p,
                   ctl_fmt_duration(elapsed, d, sizeof(d)));
            rc = EXIT_OK;
            break;
        }
        if (timeout_s >= 0 && elapsed >= timeout_s) {
            fprintf(stderr,
                    "tierctl: timed out after %s: %s is not yet durable in the backend (uploads "
                    "continue in tierd; see: tierctl checkpoints %s)\n",
                    ctl_fmt_duration(elapsed, d, sizeof(d)), p, p);
            rc = EXIT_FAILED;
            break;
        }
        if (g_interrupted) {
            fprintf(stderr, "tierctl: interrupted; %s is not yet durable in the backend\n", p);
            rc = EXIT_INTERRUPTED;
            break;
        }
    }
    free(p);
    return rc;
}

/* Percent-encode a path for a query string ('/' kept). */
static char *query_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            strchr("/-._~", *c)) {
            *o++ = (char)*c;
        } else {
            *o++ = '%';
            *o++ = hex[*c >> 4];
            *o++ = hex[*c & 15];
        }
    }
    *o = '\0';
    return out;
}

static void print_checkpoints(const json_t *files)
{
    printf("%-10s %-11s %-20s %-7s %s\n", "STATE", "SIZE", "UPLOAD", "AGE", "PATH");
    size_t i;
    const json_t *f;
    json_array_foreach(files, i, f)
    {
        char size[32], age[32], prog[48];
        const char *state = jstr(f, "state", "?");
        uint64_t pd = jnum(f, "parts_done"), pt = jnum(f, "parts_total");
        if (strcmp(state, "uploaded") == 0 || strcmp(state, "evictable") == 0)
            snprintf(prog, sizeof(prog), "done");
        else if (strcmp(state, "uploading") == 0 && pt > 0)
            snprintf(prog, sizeof(prog), "%llu/%llu parts (%.0f%%)", (unsigned long long)pd,
                     (unsigned long long)pt, 100.0 * (double)pd / (double)pt);
        else if (strcmp(state, "uploading") == 0)
            snprintf(prog, sizeof(prog), "single PUT");
        else if (strcmp(state, "sealed") == 0)
            snprintf(prog, sizeof(prog), "queued");
        else
            snprintf(prog, sizeof(prog), "-");
        printf("%-10s %-11s %-20s %-7s %s\n", state,
               tier_fmt_bytes(jnum(f, "size"), size, sizeof(size)), prog,
               ctl_fmt_duration(jreal(f, "age_s"), age, sizeof(age)), jstr(f, "path", "?"));
        const char *why = jstr(f, "error", "");
        if (*why) /* a sealed file the backend can never take: say why, under its line */
            printf("%-10s error: %s\n", "", why);
    }
    if (json_array_size(files) == 0)
        printf("(none)\n");
}

static int cmd_checkpoints(struct ctl *ctl, int argc, char **argv)
{
    bool as_json = false;
    int urc = parse_json_flag(argc, argv, "checkpoints", &as_json);
    if (urc)
        return urc;
    if (argc - optind > 1)
        return usage_error("checkpoints takes at most one PATH");
    char *url = NULL;
    if (optind < argc) {
        char *p = api_path(ctl, argv[optind]);
        char *q = p ? query_escape(p) : NULL;
        if (!q || asprintf(&url, "/v1/checkpoints?path=%s", q) < 0)
            url = NULL;
        free(p);
        free(q);
    } else {
        url = strdup("/v1/checkpoints");
    }
    if (!url) {
        fprintf(stderr, "tierctl: out of memory\n");
        return EXIT_FAILED;
    }
    json_t *ans = NULL;
    char *raw = NULL;
    int rc = call(ctl, "GET", url, NULL, &ans, as_json ? &raw : NULL);
    free(url);
    if (rc != EXIT_OK)
        return rc;
    if (as_json) {
        print_raw_json(raw);
    } else {
        print_checkpoints(json_object_get(ans, "files"));
    }
    free(raw);
    json_decref(ans);
    return EXIT_OK;
}

/* ---- jobs ---------------------------------------------------------------------------------- */

/* One job as a line of the list: id, state, tenant, class, reservation, bandwidth, staging and,
 * when queued, its position and reason. */
static void print_job_line(const json_t *jb)
{
    char a[32], b[32];
    const json_t *st = json_object_get(jb, "staging");
    uint64_t bw = jnum(jb, "bandwidth_bps");
    printf("%-16s %-9s %-14s %-10s %10s %12s%s %s", jstr(jb, "job", "?"), jstr(jb, "state", "?"),
           jstr(jb, "tenant", "?"), jstr(jb, "class", "?"),
           tier_fmt_bytes(jnum(jb, "cache_bytes"), a, sizeof(a)),
           bw ? tier_fmt_bytes(bw, b, sizeof(b)) : "-", bw ? "/s" : "  ", jstr(st, "state", "?"));
    if (json_object_get(jb, "position"))
        printf(" #%llu: %s", (unsigned long long)jnum(jb, "position"), jstr(jb, "reason", ""));
    else if (json_object_get(st, "error"))
        printf(": %s", jstr(st, "error", ""));
    fputc('\n', stdout);
}

static void print_jobs(const json_t *ans)
{
    const json_t *jobs = json_object_get(ans, "jobs");
    const json_t *c = json_object_get(ans, "capacity");
    char a[32], b[32], e[32], f[32];
    printf("%-16s %-9s %-14s %-10s %10s %14s %s\n", "JOB", "STATE", "TENANT", "CLASS", "RESERVED",
           "BANDWIDTH", "STAGING");
    for (size_t i = 0; i < json_array_size(jobs); i++)
        print_job_line(json_array_get(jobs, i));
    if (json_array_size(jobs) == 0)
        printf("(none)\n");
    printf("\nreservable %s of %s (%s reserved; %s pinned outside jobs)\n",
           tier_fmt_bytes(jnum(c, "reservable_bytes"), a, sizeof(a)),
           tier_fmt_bytes(jnum(c, "capacity_bytes"), b, sizeof(b)),
           tier_fmt_bytes(jnum(c, "reserved_bytes"), e, sizeof(e)),
           tier_fmt_bytes(jnum(c, "pinned_bytes") - jnum(c, "jobs_pinned_bytes"), f, sizeof(f)));
}

static void print_job(const json_t *jb)
{
    char a[32], b[32];
    const json_t *st = json_object_get(jb, "staging");
    printf("job        %s\nstate      %s", jstr(jb, "job", "?"), jstr(jb, "state", "?"));
    if (json_object_get(jb, "position"))
        printf(" (position %llu: %s)", (unsigned long long)jnum(jb, "position"),
               jstr(jb, "reason", ""));
    printf("\ntenant     %s (class %s)\n", jstr(jb, "tenant", "?"), jstr(jb, "class", "?"));
    printf("reserved   %s", tier_fmt_bytes(jnum(jb, "cache_bytes"), a, sizeof(a)));
    if (jnum(jb, "bandwidth_bps"))
        printf(", %s/s", tier_fmt_bytes(jnum(jb, "bandwidth_bps"), a, sizeof(a)));
    printf("\nstaging    %s, %s of %s", jstr(st, "state", "?"),
           tier_fmt_bytes(jnum(st, "bytes_done"), a, sizeof(a)),
           tier_fmt_bytes(jnum(st, "bytes_total"), b, sizeof(b)));
    if (json_object_get(st, "error"))
        printf(": %s", jstr(st, "error", ""));
    fputc('\n', stdout);
    const char *keys[] = {"stage", "stage_out"};
    for (size_t k = 0; k < 2; k++) {
        const json_t *v = json_object_get(jb, keys[k]);
        for (size_t i = 0; i < json_array_size(v); i++)
            printf("%-10s %s\n", i ? "" : keys[k], json_string_value(json_array_get(v, i)));
    }
}

/* tierctl jobs [--json] | jobs show ID [--json] | jobs release ID */
static int cmd_jobs(struct ctl *ctl, int argc, char **argv)
{
    bool as_json = false;
    int urc = parse_json_flag(argc, argv, "jobs", &as_json);
    if (urc)
        return urc;
    int nargs = argc - optind;
    const char *sub = nargs > 0 ? argv[optind] : NULL;
    bool show = sub && strcmp(sub, "show") == 0, rel = sub && strcmp(sub, "release") == 0;
    if ((sub && !show && !rel) || (sub && nargs != 2))
        return usage_error("usage: tierctl jobs [--json] | jobs show ID | jobs release ID");
    char *url = NULL;
    char *q = sub ? query_escape(argv[optind + 1]) : NULL;
    if (sub ? !q || asprintf(&url, "/v1/jobs/%s", q) < 0 : !(url = strdup("/v1/jobs")))
        url = NULL;
    free(q);
    if (!url) {
        fprintf(stderr, "tierctl: out of memory\n");
        return EXIT_FAILED;
    }
    json_t *ans = NULL;
    char *raw = NULL;
    int rc = call(ctl, rel ? "DELETE" : "GET", url, NULL, &ans, as_json ? &raw : NULL);
    free(url);
    if (rc != EXIT_OK)
        return rc;
    if (as_json)
        print_raw_json(raw);
    else if (rel)
        printf("released %s\n", jstr(ans, "released", "?"));
    else if (show)
        print_job(ans);
    else
        print_jobs(ans);
    free(raw);
    json_decref(ans);
    return EXIT_OK;
}

/* ---- dataset versions ---------------------------------------------------------------------- */

/* tierctl dataset commit PATH NAME | list PATH | show PATH NAME | delete PATH NAME [--json] */
static int cmd_dataset(struct ctl *ctl, int argc, char **argv)
{
    bool as_json = false;
    int urc = parse_json_flag(argc, argv, "dataset", &as_json);
    if (urc)
        return urc;
    int nargs = argc - optind;
    const char *sub = nargs > 0 ? argv[optind] : "";
    bool commit = !strcmp(sub, "commit"), list = !strcmp(sub, "list"), show = !strcmp(sub, "show"),
         del = !strcmp(sub, "delete"), diff = !strcmp(sub, "diff"), vpath = !strcmp(sub, "path");
    show = show || vpath; /* path: the view's path from show's answer */
    if (!(commit || list || show || del || diff) || nargs != (list ? 2 : diff ? 4 : 3))
        return usage_error("usage: tierctl dataset commit PATH NAME | list PATH | show PATH NAME "
                           "| path PATH NAME | diff PATH A B | delete PATH NAME [--json]");
    char *p = api_path(ctl, argv[optind + 1]);
    const char *name = list ? NULL : argv[optind + 2];
    char *url = NULL, *qp = p ? query_escape(p) : NULL, *qn = name ? query_escape(name) : NULL;
    char *qb = diff ? query_escape(argv[optind + 3]) : NULL;
    json_t *body = NULL;
    if (commit)
        body = p ? json_pack("{s:s, s:s}", "path", p, "name", name) : NULL;
    else if (diff && qp && qn && qb &&
             asprintf(&url, "/v1/datasets/%s/diff/%s?path=%s", qn, qb, qp) < 0)
        url = NULL;
    else if (!diff && qp && (list || qn) &&
             asprintf(&url, "/v1/datasets%s%s?path=%s", list ? "" : "/", list ? "" : qn, qp) < 0)
        url = NULL;
    free(qp);
    free(qn);
    free(qb);
    if (!p || (commit ? !body : !url)) {
        free(p);
        free(url);
        json_decref(body);
        fprintf(stderr, "tierctl: out of memory\n");
        return EXIT_FAILED;
    }
    json_t *ans = NULL;
    char *raw = NULL;
    int rc = call(ctl,
                  commit ? "POST"
                  : del  ? "DELETE"
                         : "GET",
                  commit ? "/v1/datasets" : url, body, &ans, as_json ? &raw : NULL);
    json_decref(body);
    free(url);
    if (rc == EXIT_OK) {
        char b[32];
        if (as_json)
            print_raw_json(raw);
        else if (list) {
            const json_t *v = json_object_get(ans, "versions");
            for (size_t i = 0; i < json_array_size(v); i++)
                printf("%s\n", json_string_value(json_array_get(v, i)));
            if (json_array_size(v) == 0)
                printf("(no versions of %s)\n", p);
        } else if (vpath) {
            if (!json_is_string(json_object_get(ans, "view"))) {
                fprintf(stderr, "tierctl: tierd serves no view of dataset versions (no mount or "
                                "no cache)\n");
                rc = EXIT_FAILED;
            } else {
                printf("%s\n", jstr(ans, "view", "?"));
            }
        } else if (del) {
            printf("deleted version %s of %s (its files are untouched)\n", name, p);
        } else if (diff) {
            static const char *const parts[] = {"added", "removed", "changed"};
            static const char marks[] = {'+', '-', '~'};
            for (size_t k = 0; k < 3; k++) {
                const json_t *v = json_object_get(ans, parts[k]);
                for (size_t i = 0; i < json_array_size(v); i++)
                    printf("%c %s\n", marks[k], jstr(json_array_get(v, i), "key", "?"));
            }
            printf("%zu added, %zu removed, %zu changed, %llu unchanged\n",
                   json_array_size(json_object_get(ans, "added")),
                   json_array_size(json_object_get(ans, "removed")),
                   json_array_size(json_object_get(ans, "changed")),
                   (unsigned long long)jnum(ans, "unchanged"));
        } else {
            printf("%s%s %s of %s: %llu files, %s\n", commit ? "committed " : "", "version",
                   jstr(ans, "name", "?"), jstr(ans, "path", "?"),
                   (unsigned long long)jnum(ans, "count"),
                   tier_fmt_bytes(jnum(ans, "bytes"), b, sizeof(b)));
            printf("namespace  %s (backend %s, prefix %s)\ncommit     %s\ncreated    %llu\n",
                   jstr(ans, "namespace", "?"), jstr(ans, "backend", "?"), jstr(ans, "prefix", "?"),
                   jstr(ans, "commit_id", "?"), (unsigned long long)jnum(ans, "created_at"));
            if (json_is_string(json_object_get(ans, "view")))
                printf("read it at %s\n", jstr(ans, "view", "?"));
        }
    }
    free(raw);
    free(p);
    json_decref(ans);
    return rc;
}

/* ---- reload ------------------------------------------------------------------------------------
 */

static int cmd_reload(struct ctl *ctl, int argc, char **argv)
{
    bool as_json = false;
    int urc = parse_json_flag(argc, argv, "reload", &as_json);
    if (urc)
        return urc;
    if (optind != argc)
        return usage_error("reload takes no arguments (got '%s')", argv[optind]);
    json_t *ans = NULL;
    char *raw = NULL;
    int rc = call(ctl, "POST", "/v1/reload", NULL, &ans, as_json ? &raw : NULL);
    if (rc == EXIT_OK && as_json) {
        print_raw_json(raw);
    } else if (rc == EXIT_OK) {
        const json_t *a = json_object_get(ans, "applied"),
                     *r = json_object_get(ans, "restart_needed");
        printf("reloaded %s\n", jstr(ans, "file", "?"));
        for (size_t i = 0; i < json_array_size(a); i++)
            printf("  applied: %s\n", json_string_value(json_array_get(a, i)));
        for (size_t i = 0; i < json_array_size(r); i++)
            printf("  changed, needs a restart: %s\n", json_string_value(json_array_get(r, i)));
    }
    free(raw);
    json_decref(ans);
    return rc;
}

/* ---- cluster ----------------------------------------------------------------------------------
 */

/* tierctl cluster [--json]: GET /v1/cluster as a table of the members (docs/CLUSTER.md) */
static int cmd_cluster(struct ctl *ctl, int argc, char **argv)
{
    bool as_json = false;
    int urc = parse_json_flag(argc, argv, "cluster", &as_json);
    if (urc)
        return urc;
    if (optind != argc)
        return usage_error("cluster takes no arguments (got '%s')", argv[optind]);
    json_t *ans = NULL;
    char *raw = NULL;
    int rc = call(ctl, "GET", "/v1/cluster", NULL, &ans, as_json ? &raw : NULL);
    if (rc == EXIT_OK && as_json) {
        print_raw_json(raw);
    } else if (rc == EXIT_OK && !json_is_true(json_object_get(ans, "enabled"))) {
        printf("no cluster: tierd has no [cluster] section\n");
    } else if (rc == EXIT_OK) {
        const json_t *m = json_object_get(ans, "members");
        printf("cluster %s: node %s, epoch %llu, %zu member%s%s%s\n", jstr(ans, "name", "?"),
               jstr(ans, "node_id", "?"), (unsigned long long)jnum(ans, "epoch"),
               json_array_size(m), json_array_size(m) == 1 ? "" : "s",
               json_is_true(json_object_get(ans, "share")) ? "" : ", share = no (serves no peer)",
               json_is_true(json_object_get(ans, "may_serve"))
                   ? ""
                   : " (this node may not serve peers: fenced)");
        printf("%-20s %-22s %7s %6s %9s %9s %9s  %s\n", "ID", "ADDRESS", "WEIGHT", "SHARE", "ASKED",
               "BYTES", "FAILED", "INCARNATION");
        for (size_t i = 0; i < json_array_size(m); i++) {
            const json_t *e = json_array_get(m, i);
            const char *addr = jstr(e, "addr", "");
            char b[32];
            printf("%-20s %-22s %7.3g %5.1f%% %9llu %9s %9llu  %llu%s%s\n", jstr(e, "id", "?"),
                   *addr ? addr : "-", json_number_value(json_object_get(e, "weight")),
                   100.0 * json_number_value(json_object_get(e, "share")),
                   (unsigned long long)jnum(e, "requests"),
                   tier_fmt_bytes((uint64_t)jnum(e, "bytes"), b, sizeof(b)),
                   (unsigned long long)jnum(e, "failures"),
                   (unsigned long long)jnum(e, "incarnation"),
                   strcmp(jstr(e, "id", ""), jstr(ans, "node_id", "")) == 0 ? "  (this node)" : "",
                   json_is_true(json_object_get(e, "skipped")) ? "  (skipped)" : "");
        }
        const json_t *p = json_object_get(ans, "peers");
        const json_t *tb = json_object_get(p, "to_backend");
        const json_t *sv = json_object_get(p, "served");
        char b1[32], b2[32];
        printf("from peers: %llu blocks, %s; to the backend: %llu own, %llu fenced, %llu alone, "
               "%llu after a peer failed, %llu not admitted (peers lane); served to peers: %llu "
               "blocks, %s\n",
               (unsigned long long)jnum(p, "blocks"),
               tier_fmt_bytes((uint64_t)jnum(p, "bytes"), b1, sizeof(b1)),
               (unsigned long long)jnum(tb, "self"), (unsigned long long)jnum(tb, "fenced"),
               (unsigned long long)jnum(tb, "alone"), (unsigned long long)jnum(tb, "peer_failed"),
               (unsigned long long)jnum(tb, "admission"), (unsigned long long)jnum(sv, "blocks"),
               tier_fmt_bytes((uint64_t)jnum(sv, "bytes"), b2, sizeof(b2)));
        json_t *f = json_object_get(p, "failures");
        const char *k;
        json_t *val;
        bool any = false;
        json_object_foreach(f, k, val)
        {
            if (json_integer_value(val)) {
                printf("%s%s %lld", any ? ", " : "peer failures: ", k,
                       (long long)json_integer_value(val));
                any = true;
            }
        }
        if (any)
            printf("\n");
    }
    free(raw);
    json_decref(ans);
    return rc;
}

/* ---- hot-tier advice (docs/ADVICE.md) ---------------------------------------------------------
 */

static const char *pct_or_dash(const json_t *v, char *buf, size_t n)
{
    if (!json_is_number(v))
        return "-";
    snprintf(buf, n, "%.1f%%", 100.0 * json_number_value(v));
    return buf;
}

static const char *size_or(const json_t *v, const char *none, char *buf, size_t n)
{
    if (!json_is_integer(v))
        return none;
    if (json_integer_value(v) == 0)
        return "now";
    return tier_fmt_bytes((uint64_t)json_integer_value(v), buf, n);
}

static void advise_print(const json_t *ans)
{
    char a[32], b[32], c[32], d[32], e[32];
    printf("advice: round %llu, %.1f s ago, over %.0f s; target utilisation %.0f%%; auto_quota "
           "%s%s\n",
           (unsigned long long)jnum(ans, "rounds"),
           json_number_value(json_object_get(ans, "age_s")),
           json_number_value(json_object_get(ans, "interval_s")),
           100.0 * json_number_value(json_object_get(ans, "target_utilisation")),
           json_is_true(json_object_get(ans, "auto_quota")) ? "on" : "off",
           json_is_true(json_object_get(ans, "moved")) ? " (quotas moved this round)" : "");
    const json_t *node = json_object_get(ans, "node");
    char disk[96] = "no disk level";
    if (jnum(node, "disk_bytes"))
        snprintf(disk, sizeof(disk), "disk %s hit %s",
                 tier_fmt_bytes(jnum(node, "disk_bytes"), c, sizeof(c)),
                 pct_or_dash(json_object_get(node, "hit_ratio_disk"), d, sizeof(d)));
    printf("node: RAM %s hit %s, %s; hot tier that would meet the target: %s\n",
           tier_fmt_bytes(jnum(node, "ram_bytes"), a, sizeof(a)),
           pct_or_dash(json_object_get(node, "hit_ratio_ram"), b, sizeof(b)), disk,
           size_or(json_object_get(ans, "hot_bytes_for_target"), "out of reach", e, sizeof(e)));
    const json_t *ts = json_object_get(ans, "tenants");
    if (!json_array_size(ts)) {
        printf("no tenant read in the last round\n");
        return;
    }
    printf("%-20s %10s %11s %7s %7s %12s %10s %7s\n", "TENANT", "SHARE", "DEMAND/s", "HIT", "STALL",
           "FOR TARGET", "SPLIT", "MOVES");
    for (size_t i = 0; i < json_array_size(ts); i++) {
        const json_t *t = json_array_get(ts, i);
        char s1[32], s2[32], s3[32], s4[32], s5[32], s6[32];
        printf("%-20s %10s %9s/s %7s %7s %12s %10s %7llu\n", jstr(t, "name", "?"),
               tier_fmt_bytes(jnum(t, "share_bytes"), s1, sizeof(s1)),
               tier_fmt_bytes((uint64_t)json_number_value(json_object_get(t, "demand_bps")), s2,
                              sizeof(s2)),
               pct_or_dash(json_object_get(t, "hit_ratio"), s3, sizeof(s3)),
               pct_or_dash(json_object_get(t, "stall"), s4, sizeof(s4)),
               json_is_number(json_object_get(t, "stall"))
                   ? size_or(json_object_get(t, "size_for_target"), "none", s5, sizeof(s5))
                   : "-",
               tier_fmt_bytes(jnum(t, "split_bytes"), s6, sizeof(s6)),
               (unsigned long long)jnum(t, "quota_changes"));
    }
    for (size_t i = 0; i < json_array_size(ts); i++) {
        const json_t *t = json_array_get(ts, i);
        printf("\n%s: predicted at other sizes\n%10s %7s %12s %7s\n", jstr(t, "name", "?"), "SIZE",
               "HIT", "BACKEND/s", "STALL");
        const json_t *cv = json_object_get(t, "curve");
        for (size_t k = 0; k < json_array_size(cv); k++) {
            const json_t *p = json_array_get(cv, k);
            char s1[32], s2[32], s3[32], s4[32];
            printf("%10s %7s %10s/s %7s\n", tier_fmt_bytes(jnum(p, "size_bytes"), s1, sizeof(s1)),
                   pct_or_dash(json_object_get(p, "hit_ratio"), s2, sizeof(s2)),
                   tier_fmt_bytes((uint64_t)json_number_value(json_object_get(p, "backend_bps")),
                                  s3, sizeof(s3)),
                   pct_or_dash(json_object_get(p, "stall"), s4, sizeof(s4)));
        }
    }
}

/* tierctl advise [--json] */
static int cmd_advise(struct ctl *ctl, int argc, char **argv)
{
    bool as_json = false;
    int urc = parse_json_flag(argc, argv, "advise", &as_json);
    if (urc)
        return urc;
    if (optind != argc)
        return usage_error("advise takes no arguments (got '%s')", argv[optind]);
    json_t *ans = NULL;
    char *raw = NULL;
    int rc = call(ctl, "GET", "/v1/advice", NULL, &ans, as_json ? &raw : NULL);
    if (rc == EXIT_OK && as_json)
        print_raw_json(raw);
    else if (rc == EXIT_OK && !json_is_true(json_object_get(ans, "enabled")))
        printf("no advice: %s\n", jstr(ans, "how", "the curves are off"));
    else if (rc == EXIT_OK && !jnum(ans, "rounds"))
        printf("no advice yet: the first round ends one advice_interval after the start\n");
    else if (rc == EXIT_OK)
        advise_print(ans);
    free(raw);
    json_decref(ans);
    return rc;
}

/* ---- lifecycle policies ---------------------------------------------------------------------- */

/* tierctl policy status | plan [NAME] | run [NAME] [--json] */
static int cmd_policy(struct ctl *ctl, int argc, char **argv)
{
    bool as_json = false;
    int urc = parse_json_flag(argc, argv, "policy", &as_json);
    if (urc)
        return urc;
    int nargs = argc - optind;
    const char *sub = nargs > 0 ? argv[optind] : "";
    bool status = !strcmp(sub, "status"), plan = !strcmp(sub, "plan"), run = !strcmp(sub, "run");
    if (!(status || plan || run) || nargs > (status ? 1 : 2))
        return usage_error("usage: tierctl policy status | plan [NAME] | run [NAME] [--json]");
    json_t *body = NULL;
    if (!status && nargs == 2 && !(body = json_pack("{s:s}", "policy", argv[optind + 1]))) {
        fprintf(stderr, "tierctl: out of memory\n");
        return EXIT_FAILED;
    }
    json_t *ans = NULL;
    char *raw = NULL;
    int rc = call(ctl, status ? "GET" : "POST",
                  status ? "/v1/policy"
                  : plan ? "/v1/policy/plan"
                         : "/v1/policy/run",
                  body, &ans, as_json ? &raw : NULL);
    json_decref(body);
    if (rc == EXIT_OK && as_json) {
        print_raw_json(raw);
    } else if (rc == EXIT_OK && status) {
        char b[32];
        const json_t *rules = json_object_get(ans, "rules");
        printf("%-24s %-16s %-7s %8s %10s %8s %7s %7s\n", "POLICY", "NAMESPACE", "ACTION", "DONE",
               "BYTES", "DEFERRED", "FAILED", "SKIPPED");
        for (size_t i = 0; i < json_array_size(rules); i++) {
            const json_t *r = json_array_get(rules, i);
            char sk[24] = "-"; /* expire rules only */
            if (json_object_get(r, "skipped"))
                snprintf(sk, sizeof(sk), "%llu", (unsigned long long)jnum(r, "skipped"));
            printf(
                "%-24s %-16s %-7s %8llu %10s %8llu %7llu %7s\n", jstr(r, "name", "?"),
                jstr(r, "namespace", "?"), jstr(r, "action", "?"),
                (unsigned long long)jnum(r, "done"), tier_fmt_bytes(jnum(r, "bytes"), b, sizeof(b)),
                (unsigned long long)jnum(r, "deferred"), (unsigned long long)jnum(r, "failed"), sk);
        }
        printf(
            "%llu full and %llu local passes (a full pass every %llu ms); the last took %llu ms\n",
            (unsigned long long)jnum(ans, "passes"), (unsigned long long)jnum(ans, "local_passes"),
            (unsigned long long)jnum(ans, "interval_ms"),
            (unsigned long long)jnum(ans, "last_pass_ms"));
        if (*jstr(ans, "last_error", ""))
            printf("last error: %s\n", jstr(ans, "last_error", ""));
        const json_t *recent = json_object_get(ans, "recent");
        for (size_t i = 0; i < json_array_size(recent) && i < 20; i++) {
            const json_t *e = json_array_get(recent, i);
            printf("%s %s %s %s%s%s\n", jstr(e, "result", "?"), jstr(e, "policy", "?"),
                   jstr(e, "action", "?"), jstr(e, "path", "?"), *jstr(e, "detail", "") ? ": " : "",
                   jstr(e, "detail", ""));
        }
    } else if (rc == EXIT_OK) {
        const json_t *acts = json_object_get(ans, "actions");
        for (size_t i = 0; i < json_array_size(acts); i++) {
            const json_t *a = json_array_get(acts, i);
            const char *res = jstr(a, "result", "?");
            bool planned = strcmp(res, "planned") == 0;
            printf("%s%s%s%s %s (policy %s)%s%s\n", planned ? "would " : "", jstr(a, "action", "?"),
                   planned ? "" : " ", planned ? "" : res, jstr(a, "path", "?"),
                   jstr(a, "policy", "?"), *jstr(a, "detail", "") ? ": " : "",
                   jstr(a, "detail", ""));
        }
        printf("%s: %llu files, %llu %s, %llu deferred, %llu failed, %llu skipped%s%s\n",
               plan ? "plan" : "run", (unsigned long long)jnum(ans, "files"),
               (unsigned long long)(plan ? json_array_size(acts) : jnum(ans, "done")),
               plan ? "planned" : "done", (unsigned long long)jnum(ans, "deferred"),
               (unsigned long long)jnum(ans, "failed"), (unsigned long long)jnum(ans, "skipped"),
               *jstr(ans, "error", "") ? "; " : "", jstr(ans, "error", ""));
        if (run && jnum(ans, "failed") > 0)
            rc = EXIT_FAILED;
    }
    free(raw);
    json_decref(ans);
    return rc;
}

/* ---- top ----------------------------------------------------------------------------------- */

/* One GET /v1/telemetry into *snap. EXIT_OK or the exit code (message printed). */
static int fetch_snap(struct ctl *ctl, struct top_snap *snap)
{
    json_t *j = NULL;
    int rc = call(ctl, "GET", "/v1/telemetry", NULL, &j, NULL);
    if (rc != EXIT_OK)
        return rc;
    char err[256];
    int prc = top_snap_parse(j, snap, err, sizeof(err));
    json_decref(j);
    if (prc) {
        fprintf(stderr, "tierctl: %s\n", err);
        return EXIT_API;
    }
    return EXIT_OK;
}

/* Sleep ms in short naps, so that Ctrl-C ends top within 50 ms. */
static void nap_ms(long ms)
{
    uint64_t end = tier_now_mono_ns() + (uint64_t)ms * 1000000u;
    while (!g_interrupted) {
        uint64_t now = tier_now_mono_ns();
        if (now >= end)
            break;
        uint64_t left_ms = (end - now) / 1000000u + 1;
        sleep_ms(left_ms < 50 ? (long)left_ms : 50);
    }
}

static int cmd_top(struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        {"interval", required_argument, NULL, 'i'}, {"sort", required_argument, NULL, 's'},
        {"once", no_argument, NULL, 'o'},           {"json", no_argument, NULL, 'j'},
        {"count", required_argument, NULL, 'n'},    {0, 0, 0, 0}};
    double interval = 1.0;
    enum top_sort sort = TOP_SORT_OPS;
    bool once = false, as_json = false;
    uint64_t count = 0; /* 0: until interrupted */
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'i':
            interval = strtod(optarg, &end);
            if (end == optarg || *end || !(interval >= 0.1 && interval <= 3600))
                return usage_error("--interval wants seconds from 0.1 to 3600, not '%s'", optarg);
            break;
        case 's':
            if (strcmp(optarg, "ops") == 0)
                sort = TOP_SORT_OPS;
            else if (strcmp(optarg, "bytes") == 0)
                sort = TOP_SORT_BYTES;
            else
                return usage_error("--sort wants ops or bytes, not '%s'", optarg);
            break;
        case 'o':
            once = true;
            break;
        case 'j':
            as_json = true;
            break;
        case 'n':
            if (tier_parse_u64(optarg, &count) != 0 || count == 0)
                return usage_error("--count wants a number of intervals, not '%s'", optarg);
            break;
        default:
            return usage_error("%s: unknown option", "top");
        }
    }
    if (optind != argc)
        return usage_error("top takes no arguments (see tierctl --help)");
    if (once)
        count = 1;
    /* a terminal gets one table redrawn in place; a pipe or file gets every table in turn */
    bool redraw = !as_json && isatty(STDOUT_FILENO);

    struct top_snap prev, cur;
    memset(&prev, 0, sizeof(prev));
    memset(&cur, 0, sizeof(cur));
    int rc = fetch_snap(ctl, &prev);
    uint64_t t_prev = tier_now_mono_ns();
    for (uint64_t shown = 0; rc == EXIT_OK && !g_interrupted && (!count || shown < count);
         shown++) {
        nap_ms((long)(interval * 1000));
        if (g_interrupted)
            break;
        rc = fetch_snap(ctl, &cur);
        if (rc != EXIT_OK)
            break;
        uint64_t t_cur = tier_now_mono_ns();
        /* tierd's own clock, when it sent one: the interval between its two answers */
        uint64_t span_ns =
            cur.now_ns > prev.now_ns && prev.now_ns ? cur.now_ns - prev.now_ns : t_cur - t_prev;
        struct top_view v;
        if (top_view_build(&prev, &cur, (double)span_ns / 1e9, sort, &v) != 0) {
            fprintf(stderr, "tierctl: out of memory\n");
            rc = EXIT_FAILED;
            break;
        }
        if (as_json) {
            json_t *j = top_view_json(&v);
            char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
            json_decref(j);
            if (!text) {
                top_view_fini(&v);
                fprintf(stderr, "tierctl: out of memory\n");
                rc = EXIT_FAILED;
                break;
            }
            puts(text);
            free(text);
        } else {
            if (redraw)
                fputs("\033[H\033[2J", stdout); /* home, clear screen */
            else if (shown > 0)
                fputc('\n', stdout);
            top_print_table(stdout, &v, sort);
        }
        fflush(stdout);
        top_view_fini(&v);
        top_snap_fini(&prev);
        prev = cur;
        memset(&cur, 0, sizeof(cur));
        t_prev = t_cur;
    }
    top_snap_fini(&prev);
    top_snap_fini(&cur);
    /* Ctrl-C is how a live top ends: success */
    return rc;
}

/* ---- hint ---------------------------------------------------------------------------------- */

#define HINT_CHUNK 100000 /* entries per POST (well under the API's bound for /v1/hints) */

static int hint_post(struct ctl *ctl, const char *name, const char *tenant, json_t *paths,
                     bool append)
{
    json_t *body = json_pack("{s:s, s:O, s:b}", "name", name, "paths", paths, "append", append);
    if (body && tenant)
        json_object_set_new(body, "tenant", json_string(tenant));
    if (!body) {
        fprintf(stderr, "tierctl: out of memory\n");
        return EXIT_FAILED;
    }
    json_t *ans = NULL;
    int rc = call(ctl, "POST", "/v1/hints", body, &ans, NULL);
    json_decref(body);
    json_decref(ans);
    return rc;
}

static int cmd_hint(struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {{"order", required_argument, NULL, 'o'},
                                         {"name", required_argument, NULL, 'n'},
                                         {"tenant", required_argument, NULL, 't'},
                                         {"append", no_argument, NULL, 'a'},
                                         {"list", no_argument, NULL, 'l'},
                                         {"drop", required_argument, NULL, 'd'},
                                         {0, 0, 0, 0}};
    const char *order = NULL, *name = "default", *tenant = NULL, *drop = NULL;
    bool append = false, list = false;
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            order = optarg;
            break;
        case 'n':
            name = optarg;
            break;
        case 't':
            tenant = optarg;
            break;
        case 'a':
            append = true;
            break;
        case 'l':
            list = true;
            break;
        case 'd':
            drop = optarg;
            break;
        default:
            return usage_error("%s: unknown option", "hint");
        }
    }
    if (list || drop) {
        if (optind != argc || order || (list && drop))
            return usage_error("hint: --list and --drop NAME take nothing else");
        json_t *ans = NULL;
        char path[128];
        snprintf(path, sizeof(path), "/v1/hints%s%.80s", drop ? "/" : "", drop ? drop : "");
        int rc = call(ctl, drop ? "DELETE" : "GET", path, NULL, &ans, NULL);
        if (rc == EXIT_OK && list) {
            char *text = json_dumps(ans, JSON_INDENT(2));
            if (text)
                puts(text);
            free(text);
        }
        json_decref(ans);
        return rc;
    }
    if (optind + 1 != argc || !order)
        return usage_error("hint PATH --order FILE: give one PATH and the order file");
    FILE *f = strcmp(order, "-") == 0 ? stdin : fopen(order, "r");
    if (!f) {
        fprintf(stderr, "tierctl: cannot open %s: %s\n", order, strerror(errno));
        return EXIT_FAILED;
    }
    char *base = api_path(ctl, argv[optind]);
    json_t *paths = json_array();
    int rc = base && paths ? EXIT_OK : EXIT_FAILED;
    char *line = NULL;
    size_t cap = 0, total = 0, lineno = 0;
    ssize_t len;
    while (rc == EXIT_OK && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        char *p = NULL;
        if (line[0] == '/') {
            p = api_path(ctl, line);
        } else if (asprintf(&p, "%s/%s", base, line) < 0) {
            p = NULL;
        }
        if (!p || json_array_append_new(paths, json_string(p)) != 0) {
            fprintf(stderr, "tierctl: %s:%zu: out of memory\n", order, lineno);
            rc = EXIT_FAILED;
        }
        free(p);
        if (rc == EXIT_OK && json_array_size(paths) == HINT_CHUNK) {
            rc = hint_post(ctl, name, tenant, paths, append || total > 0);
            total += json_array_size(paths);
            json_array_clear(paths);
        }
    }
    if (rc == EXIT_OK && ferror(f)) {
        fprintf(stderr, "tierctl: reading %s: %s\n", order, strerror(errno));
        rc = EXIT_FAILED;
    }
    if (rc == EXIT_OK && (json_array_size(paths) || total == 0)) {
        rc = hint_post(ctl, name, tenant, paths, append || total > 0);
        total += json_array_size(paths);
    }
    if (rc == EXIT_OK)
        printf("hint %s: %zu entries under %s\n", name, total, base);
    free(line);
    free(base);
    json_decref(paths);
    if (f != stdin)
        fclose(f);
    return rc;
}

/* ---- qos ----------------------------------------------------------------------------------- */

/* `qos set TENANT key=value...`: the body of PUT /v1/qos. "default" (or "null") goes back to the
 * default; rates are passed as given, so tierd's own parser (the config's) judges them. */
static int qos_set(struct ctl *ctl, int argc, char **argv)
{
    if (argc < 3)
        return usage_error("qos set TENANT reservation=RATE weight=N limit=RATE [class=CLASS] "
                           "[backend=NAME | resource=disk] cache_quota=SIZE: give a tenant and at "
                           "least one value");
    json_t *body = json_pack("{s:s}", "tenant", argv[1]);
    if (!body) {
        fprintf(stderr, "tierctl: out of memory\n");
        return EXIT_FAILED;
    }
    for (int i = 2; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        static const char *const keys[] = {"reservation", "weight",   "limit",      "class",
                                           "backend",     "resource", "cache_quota"};
        bool known = false;
        size_t kl = eq ? (size_t)(eq - argv[i]) : 0;
        for (size_t k = 0; eq && k < sizeof(keys) / sizeof(keys[0]); k++)
            known = known || (strlen(keys[k]) == kl && strncmp(argv[i], keys[k], kl) == 0);
        if (!known) {
            json_decref(body);
            return usage_error("qos set: '%s' is not KEY=VALUE with KEY one of reservation, "
                               "weight, limit, class, backend, resource, cache_quota",
                               argv[i]);
        }
        char key[16];
        snprintf(key, sizeof(key), "%.*s", (int)kl, argv[i]);
        const char *val = eq + 1;
        json_t *v;
        uint64_t w = 0;
        if (strcmp(val, "default") == 0 || strcmp(val, "null") == 0)
            v = json_null();
        else if (strcmp(key, "weight") == 0) {
            if (tier_parse_u64(val, &w) != 0 || w > INT32_MAX) {
                json_decref(body);
                return usage_error("qos set: weight wants a number from 1 to 10000 or default, "
                                   "not '%s'",
                                   val);
            }
            v = json_integer((json_int_t)w);
        } else
            v = json_string(val);
        json_object_set_new(body, key, v);
    }
    json_t *ans = NULL;
    int rc = call(ctl, "PUT", "/v1/qos", body, &ans, NULL);
    json_decref(body);
    if (rc != EXIT_OK)
        return rc;
    ctl_qos_print(ans, stdout);
    json_decref(ans);
    return EXIT_OK;
}

static int cmd_qos(struct ctl *ctl, int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "set") == 0)
        return qos_set(ctl, argc - 1, argv + 1);
    static const struct option opts[] = {
        {"interval", required_argument, NULL, 'i'}, {"json", no_argument, NULL, 'j'}, {0, 0, 0, 0}};
    double interval = 1.0;
    bool as_json = false;
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        if (c == 'j') {
            as_json = true;
        } else if (c == 'i') {
            interval = strtod(optarg, &end);
            if (end == optarg || *end || !(interval >= 0 && interval <= 3600))
                return usage_error("--interval wants seconds from 0 to 3600, not '%s'", optarg);
        } else {
            return usage_error("%s: unknown option", "qos");
        }
    }
    if (optind != argc)
        return usage_error("qos takes no arguments but set (see tierctl --help)");
    json_t *prev = NULL, *cur = NULL;
    int rc = call(ctl, "GET", "/v1/qos", NULL, &prev, NULL);
    if (rc == EXIT_OK && interval > 0) {
        nap_ms((long)(interval * 1000));
        rc = g_interrupted ? EXIT_INTERRUPTED : call(ctl, "GET", "/v1/qos", NULL, &cur, NULL);
        if (rc == EXIT_OK && ctl_qos_rates(prev, cur) != 0) {
            fprintf(stderr, "tierctl: tierd's answers carry no clock (now_ns): no rates\n");
            rc = EXIT_API;
        }
    } else if (rc == EXIT_OK) {
        cur = json_incref(prev); /* --interval 0: the configured values and counters only */
    }
    if (rc == EXIT_OK) {
        if (as_json) {
            json_dumpf(cur, stdout, JSON_COMPACT);
            fputc('\n', stdout);
        } else {
            ctl_qos_print(cur, stdout);
        }
    }
    json_decref(prev);
    json_decref(cur);
    return rc;
}

/* ---- main ---------------------------------------------------------------------------------- */

/* The first line of FILE, without its newline, into buf. EXIT_OK or EXIT_USAGE (with a message). */
static int read_token_file(const char *path, char *buf, size_t bufsz)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return usage_error("--token-file %s: %s", path, strerror(errno));
    bool ok = fgets(buf, (int)bufsz, f) != NULL;
    fclose(f);
    size_t n = ok ? strcspn(buf, "\r\n") : 0;
    if (!ok || n == 0)
        return usage_error("--token-file %s is empty (it should hold the token of [api] "
                           "token_file)",
                           path);
    buf[n] = '\0';
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'}, {"tcp", required_argument, NULL, 't'},
        {"token", required_argument, NULL, 'k'},  {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},      {"token-file", required_argument, NULL, 'f'},
        {"cacert", required_argument, NULL, 'C'}, {0, 0, 0, 0}};
    struct ctl ctl = {0};
    const char *token = getenv("TIERD_TOKEN");
    const char *token_file = NULL, *cacert = NULL;
    char file_token[1024];
    int c;

    ctl.socket_path = getenv("TIERD_SOCKET");
    if (!ctl.socket_path || !*ctl.socket_path)
        ctl.socket_path = DEFAULT_SOCKET;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "+s:h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            ctl.socket_path = optarg;
            break;
        case 't':
            ctl.tcp = optarg;
            break;
        case 'k':
            token = optarg;
            fprintf(stderr, "tierctl: warning: --token puts the token on the command line, where "
                            "other users can read it (ps); use $TIERD_TOKEN or --token-file\n");
            break;
        case 'f':
            token_file = optarg;
            break;
        case 'C':
            cacert = optarg;
            break;
        case 'h':
            fputs(usage_text, stdout);
            fputs(usage_tail, stdout);
            return EXIT_OK;
        case 'V':
            printf("tierctl %s\n", TIER_VERSION);
            return EXIT_OK;
        default:
            fputs(usage_text, stderr);
            fputs(usage_tail, stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fputs(usage_text, stderr);
        fputs(usage_tail, stderr);
        return EXIT_USAGE;
    }
    if (token_file) {
        int rc = read_token_file(token_file, file_token, sizeof(file_token));
        if (rc)
            return rc;
        token = file_token;
    }
    if (ctl.tcp && (!token || !*token))
        return usage_error("--tcp %s needs a token: $TIERD_TOKEN or --token-file FILE", ctl.tcp);

    const char *cmd = argv[optind];
    int cargc = argc - optind;
    char **cargv = argv + optind;
    int (*fn)(struct ctl *, int, char **) = NULL;
    if (strcmp(cmd, "status") == 0)
        fn = cmd_status;
    else if (strcmp(cmd, "stats") == 0)
        fn = cmd_stats;
    else if (strcmp(cmd, "stage") == 0)
        fn = cmd_stage;
    else if (strcmp(cmd, "wait") == 0)
        fn = cmd_wait;
    else if (strcmp(cmd, "checkpoints") == 0)
        fn = cmd_checkpoints;
    else if (strcmp(cmd, "top") == 0)
        fn = cmd_top;
    else if (strcmp(cmd, "qos") == 0)
        fn = cmd_qos;
    else if (strcmp(cmd, "hint") == 0)
        fn = cmd_hint;
    else if (strcmp(cmd, "jobs") == 0)
        fn = cmd_jobs;
    else if (strcmp(cmd, "dataset") == 0)
        fn = cmd_dataset;
    else if (strcmp(cmd, "policy") == 0)
        fn = cmd_policy;
    else if (strcmp(cmd, "reload") == 0)
        fn = cmd_reload;
    else if (strcmp(cmd, "cluster") == 0)
        fn = cmd_cluster;
    else if (strcmp(cmd, "advise") == 0)
        fn = cmd_advise;
    else if (strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        fputs(usage_tail, stdout);
        return EXIT_OK;
    } else if (strcmp(cmd, "pin") != 0 && strcmp(cmd, "unpin") != 0 && strcmp(cmd, "evict") != 0)
        return usage_error("unknown command '%s'", cmd);

    struct ctl_client_config cc = {.socket_path = ctl.socket_path,
                                   .tcp = ctl.tcp,
                                   .token = ctl.tcp ? token : NULL,
                                   .cacert = cacert};
    if (ctl_client_new(&cc, &ctl.cl) != 0) {
        fprintf(stderr, "tierctl: out of memory\n");
        return EXIT_FAILED;
    }
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    int rc = fn ? fn(&ctl, cargc, cargv) : cmd_path_op(&ctl, cmd, cargc, cargv);
    ctl_client_free(ctl.cl);
    free(ctl.mount);
    return rc;
}
