/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c - tierd.conf: a ceph.conf-like INI file parsed with inih into struct tierd_config.
 *
 * Called once by main() at start-up (and by the config tests and fuzz target); not thread-safe,
 * because inih's options are process globals.
 *
 * DESIGN: parsing runs in three phases. Phase 1 lets inih split the text into sections and
 * key/value pairs; a line reader wrapped around the input counts lines and notes every section
 * header, so each pair and section carries its line number (the packaged inih is built without
 * INI_HANDLER_LINENO and does not report empty sections). Phase 2 validates the collected pairs
 * against per-section key tables and fills the struct; phase 3 (config_check.c) checks what spans
 * keys and sections (the API's token and listener, tenants, QoS, quotas, [cluster], the [policy]
 * rules). Validation keeps the error with the lowest line number; "missing required key" errors
 * (reported at the section's line) only win when nothing else is wrong, because a typo of that key
 * is the more useful message. Every message reads "FILE:LINE: what is wrong (what is allowed)",
 * with a did-you-mean from the edit distance to the known keys. The pieces every key table shares
 * (choices of an enumerated value, whose list is its "allowed:" text, and the did-you-mean) are
 * keytab.c's, so that the [policy NAME] keys, whose table is lifecycle_rules.c's, get the same.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/keytab.h"
#include "cluster/member_entry.h"
#include "hints/hints.h"
#include "lifecycle/lifecycle.h"
#include "daemon/tierd.h"
#include "tenant/tenant.h"

#include "daemon/config_int.h"

static const char *const sec_names[] = {"daemon",    "cache",   "mount",   "api",
                                        "writeback", "tenants", "cluster", "backend",
                                        "namespace", "tenant",  "class",   "policy"};

/* The name argument a named section takes, for messages ("" for singletons). */
static const char *sec_arg_hint(const char *name)
{
    if (strcmp(name, "backend") == 0 || strcmp(name, "tenant") == 0 || strcmp(name, "class") == 0 ||
        strcmp(name, "policy") == 0)
        return " NAME";
    if (strcmp(name, "namespace") == 0)
        return " /PATH";
    return "";
}

/* ---- errors ---------------------------------------------------------------------------- */

static void vrecord(char *dst, int *dst_line, const char *file, int line, const char *fmt,
                    va_list ap) __attribute__((format(printf, 5, 0)));
static void vrecord(char *dst, int *dst_line, const char *file, int line, const char *fmt,
                    va_list ap)
{
    int eff = line > 0 ? line : 1;
    if (*dst_line != 0 && *dst_line <= eff)
        return;
    char msg[400];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (line > 0)
        snprintf(dst, 512, "%s:%d: %s", file, line, msg);
    else
        snprintf(dst, 512, "%s: %s", file, msg);
    *dst_line = eff;
}

void cfg_fail(struct parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cfg_fail(struct parser *p, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrecord(p->err, &p->err_line, p->file, line, fmt, ap);
    va_end(ap);
}

void cfg_fail_missing(struct parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cfg_fail_missing(struct parser *p, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrecord(p->miss, &p->miss_line, p->file, line, fmt, ap);
    va_end(ap);
}

/* ---- owned strings --------------------------------------------------------------------- */

char *cfg_own(struct parser *p, const char *s, size_t len)
{
    struct tierd_config *c = p->cfg;
    if (c->nstrs == c->capstrs) {
        size_t ncap = c->capstrs ? c->capstrs * 2 : 32;
        char **n = realloc(c->strs, ncap * sizeof(*n));
        if (!n) {
            p->oom = true;
            return NULL;
        }
        c->strs = n;
        c->capstrs = ncap;
    }
    char *d = strndup(s, len);
    if (!d) {
        p->oom = true;
        return NULL;
    }
    c->strs[c->nstrs++] = d;
    return d;
}

char *cfg_own_str(struct parser *p, const char *s)
{
    return cfg_own(p, s, strlen(s));
}

/* ---- phase 1: inih + line reader ------------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static void note_section(struct parser *p, const char *line)
{
    const char *s = line;
    if (p->line == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
        (unsigned char)s[2] == 0xBF)
        s += 3;
    while (isspace((unsigned char)*s))
        s++;
    if (*s != '[')
        return;
    const char *end = strchr(s + 1, ']');
    if (!end)
        return; /* inih reports the syntax error for this line */
    if (p->nsecs == MAX_SECTIONS) {
        cfg_fail(p, p->line, "too many sections (at most %d)", MAX_SECTIONS);
        p->stop = true;
        return;
    }
    char *name = strndup(s + 1, (size_t)(end - s - 1));
    if (!name) {
        p->oom = true;
        p->stop = true;
        return;
    }
    char *t = trim(name);
    memmove(name, t, strlen(t) + 1);
    struct raw_section *sec = &p->secs[p->nsecs++];
    sec->name = name;
    sec->line = p->line;
    sec->kind = SEC_BAD;
    sec->index = -1;
    sec->seen = 0;
}

static char *reader(char *str, int num, void *stream)
{
    struct parser *p = stream;
    if (p->stop || num < 4)
        return NULL;
    ssize_t n = getline(&p->linebuf, &p->linecap, p->in);
    if (n < 0)
        return NULL;
    p->line++;
    size_t len = strnlen(p->linebuf, (size_t)n);
    if (len + 3 > (size_t)num) {
        cfg_fail(p, p->line, "line too long (at most %d characters)", num - 3);
        p->stop = true;
        return NULL;
    }
    memcpy(str, p->linebuf, len);
    str[len] = '\0';
    note_section(p, str);
    return p->stop ? NULL : str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    (void)section;
    struct parser *p = user;
    if (!name)
        return 1;
    if (p->npairs == MAX_PAIRS) {
        cfg_fail(p, p->line, "too many keys (at most %d)", MAX_PAIRS);
        p->stop = true;
        return 0;
    }
    if (p->npairs == p->cappairs) {
        size_t ncap = p->cappairs ? p->cappairs * 2 : 64;
        struct raw_pair *np = realloc(p->pairs, ncap * sizeof(*np));
        if (!np) {
            p->oom = true;
            p->stop = true;
            return 0;
        }
        p->pairs = np;
        p->cappairs = ncap;
    }
    struct raw_pair *kv = &p->pairs[p->npairs];
    kv->key = strdup(name);
    kv->val = strdup(value ? value : "");
    if (!kv->key || !kv->val) {
        free(kv->key);
        free(kv->val);
        p->oom = true;
        p->stop = true;
        return 0;
    }
    kv->sec = (int)p->nsecs - 1;
    kv->line = p->line;
    p->npairs++;
    return 1;
}

/* ---- phase 2: key tables --------------------------------------------------------------- */

enum vkind {
    V_STR,      /* char * */
    V_CSTR,     /* const char * */
    V_SIZE,     /* uint64_t bytes */
    V_SIZEZ,    /* size_t bytes */
    V_DUR,      /* uint64_t milliseconds */
    V_INT,      /* int in [min, max] */
    V_U64,      /* uint64_t in [min, max] */
    V_BOOL,     /* bool */
    V_ENUM,     /* an int-sized enum: one of the key's choices (keytab.h) */
    V_LOGLEVEL, /* char *, one of the log levels */
    V_BTYPE,    /* char *, backend type */
    V_UID,      /* int64_t: a user name or number */
    V_GID,      /* int64_t: a group name or number */
    V_UMASK,    /* int: octal 0..0777 */
    V_CLASS,    /* enum tier_io_class */
    V_JOB,      /* char *, a Slurm job id */
    V_CGPREFIX, /* char *, a cgroup path prefix */
    V_RATE,     /* uint64_t bytes/s: SIZE/s, or none (TIERD_RATE_NONE) */
    V_QUOTA,    /* uint64_t bytes > 0, or none (CACHE_QUOTA_NONE) */
    V_FALLBACK, /* bool: [tenants] fallback = default (true) or uid (false) */
    V_SPLIT,    /* uint64_t bytes in [min, max], or auto (TIERD_SPLIT_AUTO), or off (0) */
};

enum { BT_ANY = 0, BT_POSIX = 1, BT_S3 = 2 };

struct keydef {
    const char *name;
    enum vkind kind;
    size_t off;
    uint64_t min, max;
    bool required;
    int btype;                           /* backends: which type the key belongs to */
    const struct config_choice *choices; /* V_ENUM: the allowed values */
};

static const struct config_choice cache_policy_choices[] = {
    {"s3fifo", CACHE_POLICY_S3FIFO}, {"lru", CACHE_POLICY_LRU}, {NULL, 0}};
static const struct config_choice ns_mode_choices[] = {
    {"read-cache", TIERD_NS_READ_CACHE}, {"write-back", TIERD_NS_WRITE_BACK}, {NULL, 0}};
static const struct config_choice durability_choices[] = {
    {"local", TIERD_DURABILITY_LOCAL}, {"remote", TIERD_DURABILITY_REMOTE}, {NULL, 0}};
static const struct config_choice no_open_choices[] = {
    {"auto", TIERD_NO_OPEN_AUTO}, {"on", TIERD_NO_OPEN_ON}, {"off", TIERD_NO_OPEN_OFF}, {NULL, 0}};
static const struct config_choice gpu_sampling_choices[] = {
    {"auto", TIERD_GPU_AUTO}, {"off", TIERD_GPU_OFF}, {NULL, 0}};
/* [backend NAME] type, checked in the type pre-pass (backend_types) */
static const struct config_choice btype_choices[] = {{"posix", BT_POSIX}, {"s3", BT_S3}, {NULL, 0}};

/* V_ENUM stores through an int: each enum it fills must be int-sized. */
_Static_assert(sizeof(enum cache_policy_kind) == sizeof(int), "V_ENUM field size");
_Static_assert(sizeof(enum tierd_ns_mode) == sizeof(int), "V_ENUM field size");
_Static_assert(sizeof(enum tierd_durability) == sizeof(int), "V_ENUM field size");
_Static_assert(sizeof(enum tierd_no_open) == sizeof(int), "V_ENUM field size");
_Static_assert(sizeof(enum tierd_gpu_sampling) == sizeof(int), "V_ENUM field size");

#define CFG(f) offsetof(struct tierd_config, f)
#define BE(f) offsetof(struct tierd_backend_conf, f)
#define NS(f) offsetof(struct tierd_ns_conf, f)
#define TN(f) offsetof(struct tierd_tenant_conf, f)
#define QC(f) offsetof(struct tierd_qos_conf, f)
#define KIB 1024ULL
#define MIB (1024ULL * 1024ULL)

static const struct keydef daemon_keys[] = {
    {"log_level", V_LOGLEVEL, CFG(log_level), 0, 0, false, 0, NULL},
    {"backend_timeout", V_DUR, CFG(backend_timeout_ms), 100, 3600000, false, 0, NULL},
    {"stage_threads", V_INT, CFG(stage_threads), 1, 256, false, 0, NULL},
    {"health_backlog_age", V_DUR, CFG(health_backlog_ms), 0, 30 * 86400000ULL, false, 0, NULL},
    {"telemetry", V_BOOL, CFG(telemetry), 0, 0, false, 0, NULL},
    {"gpu_sampling", V_ENUM, CFG(gpu_sampling), 0, 0, false, 0, gpu_sampling_choices},
    {"gpu_sample_interval", V_DUR, CFG(gpu_sample_interval_ms), 1000, 3600000, false, 0, NULL},
    {"qos", V_BOOL, CFG(qos), 0, 0, false, 0, NULL},
    {"qos_op_cost", V_SIZE, CFG(qos_op_cost), 1, 64 * MIB, false, 0, NULL},
    {"policy_interval", V_DUR, CFG(policy_interval_ms), 1000, 86400000, false, 0, NULL},
    {"policy_state", V_STR, CFG(policy_state), 0, 0, false, 0, NULL},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

static const struct keydef cache_keys[] = {
    {"block_size", V_SIZEZ, CFG(cache.block_size), 64 * KIB, 64 * MIB, false, 0, NULL},
    {"ram_size", V_SIZE, CFG(cache.ram_bytes), 0, UINT64_MAX, false, 0, NULL},
    {"disk_dir", V_STR, CFG(cache_disk_dir), 0, 0, false, 0, NULL},
    {"disk_size", V_SIZE, CFG(cache.disk_bytes), 0, UINT64_MAX, false, 0, NULL},
    {"disk_min_free", V_SIZE, CFG(cache.disk_min_free_bytes), 0, UINT64_MAX, false, 0, NULL},
    {"pin_size", V_SIZE, CFG(cache.pin_bytes), 0, UINT64_MAX, false, 0, NULL},
    {"policy", V_ENUM, CFG(cache.policy), 0, 0, false, 0, cache_policy_choices},
    {"max_fetches", V_INT, CFG(cache.max_fetches), 1, 4096, false, 0, NULL},
    {"disk_capacity", V_RATE, CFG(disk_capacity_bps), 0, 0, false, 0, NULL},
    {"disk_max_inflight", V_INT, CFG(disk_max_inflight), 1, 4096, false, 0, NULL},
    {"disk_op_cost", V_SIZE, CFG(disk_op_cost), 1, 64 * MIB, false, 0, NULL},
    {"hint_threads", V_INT, CFG(hints_threads), 1, 256, false, 0, NULL},
    {"hint_window", V_U64, CFG(hints_window_files), 1, 1000000, false, 0, NULL},
    {"prefetch_threads", V_INT, CFG(cache.prefetch_threads), 1, 32, false, 0, NULL},
    {"verify_every_read", V_BOOL, CFG(cache.disk_verify_every_read), 0, 0, false, 0, NULL},
    {"curves", V_BOOL, CFG(cache.mrc), 0, 0, false, 0, NULL},
    {"curve_blocks", V_INT, CFG(cache.mrc_max_keys), 64, 1000000, false, 0, NULL},
    {"curve_halflife", V_DUR, CFG(cache.mrc_halflife_ms), 0, 30 * 86400000ULL, false, 0, NULL},
    {"write_through_queue", V_SIZE, CFG(cache.store_queue_bytes), 64 * KIB, UINT64_MAX, false, 0,
     NULL},
    {"write_through_nice", V_INT, CFG(cache.store_nice), 0, 19, false, 0, NULL},
    {"hint_window_size", V_SIZE, CFG(hints_window_bytes), 64 * KIB, UINT64_MAX, false, 0, NULL},
    {"hint_cache_size", V_SIZE, CFG(hints_cache_bytes), 64 * KIB, UINT64_MAX, false, 0, NULL},
    {"hint_tenant_sets", V_INT, CFG(hints_tenant_sets), 1, HINTS_SETS_MAX, false, 0, NULL},
    {"hint_tenant_entries", V_U64, CFG(hints_tenant_entries), 1, 10000000, false, 0, NULL},
    {"hint_tenant_size", V_SIZE, CFG(hints_tenant_bytes), 64 * KIB, UINT64_MAX, false, 0, NULL},
    {"hint_state_size", V_SIZE, CFG(hints_state_bytes), 64 * KIB, UINT64_MAX, false, 0, NULL},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

static const struct keydef mount_keys[] = {
    {"path", V_STR, CFG(mount_path), 0, 0, true, 0, NULL},
    {"attr_ttl", V_DUR, CFG(attr_ttl_ms), 0, 86400000, false, 0, NULL},
    {"entry_ttl", V_DUR, CFG(entry_ttl_ms), 0, 86400000, false, 0, NULL},
    {"version_list_ttl", V_DUR, CFG(version_list_ttl_ms), 0, 86400000, false, 0, NULL},
    {"threads", V_INT, CFG(fuse_threads), 1, 1024, false, 0, NULL},
    {"allow_other", V_BOOL, CFG(allow_other), 0, 0, false, 0, NULL},
    {"readahead_blocks", V_U64, CFG(readahead_blocks), 0, 1024, false, 0, NULL},
    {"readahead_max", V_SIZE, CFG(readahead_max_bytes), 64 * KIB, 4096 * MIB, false, 0, NULL},
    {"uid", V_UID, CFG(mount_uid), 0, 0, false, 0, NULL},
    {"gid", V_GID, CFG(mount_gid), 0, 0, false, 0, NULL},
    {"umask", V_UMASK, CFG(mount_umask), 0, 0, false, 0, NULL},
    {"max_dir_entries", V_U64, CFG(max_dir_entries), 1, 10000000, false, 0, NULL},
    {"splice_writes", V_BOOL, CFG(splice_writes), 0, 0, false, 0, NULL},
    {"no_open", V_ENUM, CFG(no_open), 0, 0, false, 0, no_open_choices},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

static const struct keydef api_keys[] = {
    {"socket", V_STR, CFG(api_socket), 0, 0, false, 0, NULL},
    {"tcp", V_STR, CFG(api_tcp), 0, 0, false, 0, NULL},
    {"token", V_STR, CFG(api_token), 0, 0, false, 0, NULL},
    {"token_file", V_STR, CFG(api_token_file), 0, 0, false, 0, NULL},
    {"tls_cert", V_STR, CFG(api_tls_cert), 0, 0, false, 0, NULL},
    {"tls_key", V_STR, CFG(api_tls_key), 0, 0, false, 0, NULL},
    {"socket_group", V_STR, CFG(api_socket_group), 0, 0, false, 0, NULL},
    {"admin_group", V_STR, CFG(api_admin_group), 0, 0, false, 0, NULL},
    {"max_connections", V_INT, CFG(api_max_connections), 1, 100000, false, 0, NULL},
    {"max_connections_per_ip", V_INT, CFG(api_max_connections_per_ip), 1, 100000, false, 0, NULL},
    {"max_connections_per_uid", V_INT, CFG(api_max_connections_per_uid), 1, 100000, false, 0, NULL},
    {"admin_connections", V_INT, CFG(api_admin_connections), 0, 100000, false, 0, NULL},
    {"user_timeout", V_DUR, CFG(api_user_timeout_ms), 1000, 3600000, false, 0, NULL},
    {"max_wait", V_DUR, CFG(api_max_wait_ms), 1000, 86400000, false, 0, NULL},
    {"max_stage_jobs", V_INT, CFG(api_max_stage_jobs), 1, 4096, false, 0, NULL},
    {"ui_chartjs", V_STR, CFG(api_ui_chartjs), 0, 0, false, 0, NULL},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

static const struct keydef writeback_keys[] = {
    {"spool_dir", V_STR, CFG(wb_spool_dir), 0, 0, false, 0, NULL},
    {"journal", V_STR, CFG(wb_journal), 0, 0, false, 0, NULL},
    {"upload_threads", V_INT, CFG(wb_upload_threads), 1, 64, false, 0, NULL},
    {"parts_parallel", V_INT, CFG(wb_parts_parallel), 1, 64, false, 0, NULL},
    {"part_size", V_SIZE, CFG(wb_part_size), 5 * MIB, 5 * 1024 * MIB, false, 0, NULL},
    {"max_dirty", V_SIZE, CFG(wb_max_dirty), 0, UINT64_MAX, false, 0, NULL},
    {"max_dirty_age", V_DUR, CFG(wb_max_dirty_age_ms), 0, 7 * 86400000ULL, false, 0, NULL},
    {"backpressure_wait", V_DUR, CFG(wb_backpressure_wait_ms), 0, 86400000, false, 0, NULL},
    {"upload_deadline", V_DUR, CFG(wb_upload_deadline_ms), 0, 7 * 86400000ULL, false, 0, NULL},
    {"upload_holdoff", V_DUR, CFG(wb_upload_holdoff_ms), 0, 3600000, false, 0, NULL},
    {"upload_holdoff_max", V_DUR, CFG(wb_upload_holdoff_max_ms), 1, 7 * 86400000ULL, false, 0,
     NULL},
    {"retention_keep", V_INT, CFG(wb_retention_keep), 0, 1000000, false, 0, NULL},
    {"durability", V_ENUM, CFG(wb_durability), 0, 0, false, 0, durability_choices},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

static const struct keydef backend_keys[] = {
    {"type", V_BTYPE, BE(type), 0, 0, true, BT_ANY, NULL},
    {"root", V_CSTR, BE(posix.root), 0, 0, true, BT_POSIX, NULL},
    {"endpoint", V_CSTR, BE(s3.endpoint), 0, 0, true, BT_S3, NULL},
    {"region", V_CSTR, BE(s3.region), 0, 0, false, BT_S3, NULL},
    {"bucket", V_CSTR, BE(s3.bucket), 0, 0, true, BT_S3, NULL},
    {"prefix", V_CSTR, BE(s3.prefix), 0, 0, false, BT_S3, NULL},
    {"path_style", V_BOOL, BE(s3.path_style), 0, 0, false, BT_S3, NULL},
    {"access_key", V_CSTR, BE(s3.access_key), 0, 0, false, BT_S3, NULL},
    {"secret_key", V_CSTR, BE(s3.secret_key), 0, 0, false, BT_S3, NULL},
    {"max_retries", V_INT, BE(s3.max_retries), 0, 100, false, BT_S3, NULL},
    {"connect_timeout", V_DUR, BE(s3.connect_timeout_ms), 10, 600000, false, BT_S3, NULL},
    {"request_timeout", V_DUR, BE(s3.request_timeout_ms), 10, 3600000, false, BT_S3, NULL},
    {"max_connections", V_INT, BE(s3.max_connections), 1, 1024, false, BT_S3, NULL},
    {"max_inflight", V_INT, BE(max_inflight), 1, 4096, false, BT_ANY, NULL},
    {"breaker_failures", V_INT, BE(breaker_failures), 0, 1000, false, BT_ANY, NULL},
    {"breaker_cooldown", V_DUR, BE(breaker_cooldown_ms), 10, 3600000, false, BT_ANY, NULL},
    {"link_capacity", V_RATE, BE(link_capacity_bps), 0, 0, false, BT_ANY, NULL},
    {"yield_inflight", V_INT, BE(yield_inflight), 0, 4096, false, BT_ANY, NULL},
    {"yield_hold", V_DUR, BE(yield_hold_ms), 1, 3600000, false, BT_ANY, NULL},
    {"split_reads", V_SPLIT, BE(split_read_bytes), 16 * KIB, 64 * MIB, false, BT_ANY, NULL},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

static const struct keydef namespace_keys[] = {
    {"backend", V_STR, NS(backend), 0, 0, true, 0, NULL},
    {"prefix", V_STR, NS(prefix), 0, 0, false, 0, NULL},
    {"mode", V_ENUM, NS(mode), 0, 0, false, 0, ns_mode_choices},
    {"durability", V_ENUM, NS(durability), 0, 0, false, 0, durability_choices},
    {"uid", V_UID, NS(uid), 0, 0, false, 0, NULL},
    {"gid", V_GID, NS(gid), 0, 0, false, 0, NULL},
    {"umask", V_UMASK, NS(umask), 0, 0, false, 0, NULL},
    {"attr_ttl", V_DUR, NS(attr_ttl_ms), 0, 86400000, false, 0, NULL},
    {"entry_ttl", V_DUR, NS(entry_ttl_ms), 0, 86400000, false, 0, NULL},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

static const struct keydef tenants_keys[] = {
    {"max_tenants", V_U64, CFG(max_tenants), 2, TENANT_MAX_TENANTS_LIMIT, false, 0, NULL},
    {"pid_cache", V_U64, CFG(tenant_pid_cache), 1, TENANT_PID_CACHE_LIMIT, false, 0, NULL},
    {"cache_quota", V_QUOTA, CFG(cache.default_quota), 0, 0, false, 0, NULL},
    {"fallback", V_FALLBACK, CFG(tenant_fallback_default), 0, 0, false, 0, NULL},
    {"reserved_ids", V_U64, CFG(tenant_reserved_ids), 0, TENANT_MAX_TENANTS_LIMIT, false, 0, NULL},
    {"implicit_per_minute", V_U64, CFG(tenant_implicit_per_minute), 1, 1000000, false, 0, NULL},
    {"idle_reclaim", V_DUR, CFG(tenant_idle_reclaim_ms), 0, 30 * 86400000ULL, false, 0, NULL},
    {"slurm_cgroup_root", V_CGPREFIX, CFG(tenant_slurm_cgroup_root), 0, 0, false, 0, NULL},
    {"auto_quota", V_BOOL, CFG(auto_quota), 0, 0, false, 0, NULL},
    {"advice_interval", V_DUR, CFG(advice_interval_ms), 1000, 3600000, false, 0, NULL},
    {"advice_target", V_INT, CFG(advice_target_util), 1, 99, false, 0, NULL},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

/* [cluster] (docs/CLUSTER.md); the defaults and the checks of the values: check_cluster */
static const struct keydef cluster_keys[] = {
    {"name", V_STR, CFG(cluster_name), 0, 0, true, 0, NULL},
    {"ceph_conf", V_STR, CFG(cluster_ceph_conf), 0, 0, false, 0, NULL},
    {"user", V_STR, CFG(cluster_user), 0, 0, false, 0, NULL},
    {"keyring", V_STR, CFG(cluster_keyring), 0, 0, false, 0, NULL},
    {"pool", V_STR, CFG(cluster_pool), 0, 0, false, 0, NULL},
    {"node_id", V_STR, CFG(cluster_node_id), 0, 0, false, 0, NULL},
    {"address", V_STR, CFG(cluster_address), 0, 0, false, 0, NULL},
    {"weight", V_STR, CFG(cluster_weight), 0, 0, false, 0, NULL},
    {"lease", V_DUR, CFG(cluster_lease_ms), 2000, 300000, false, 0, NULL},
    {"secret_file", V_STR, CFG(cluster_secret_file), 0, 0, false, 0, NULL},
    {"share", V_BOOL, CFG(cluster_share), 0, 0, false, 0, NULL},
    {"peer_timeout", V_DUR, CFG(cluster_peer_timeout_ms), 100, 600000, false, 0, NULL},
    {"balance", V_STR, CFG(cluster_balance), 0, 0, false, 0, NULL},
    {"peer_inflight", V_INT, CFG(cluster_peer_inflight), 1, 4096, false, 0, NULL},
    {"tls_cert", V_STR, CFG(cluster_tls_cert), 0, 0, false, 0, NULL},
    {"tls_key", V_STR, CFG(cluster_tls_key), 0, 0, false, 0, NULL},
    {"tls_ca", V_STR, CFG(cluster_tls_ca), 0, 0, false, 0, NULL},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

static const struct keydef tenant_keys[] = {
    {"class", V_CLASS, TN(cls), 0, 0, false, 0, NULL},
    {"slurm_job", V_JOB, TN(slurm_job), 0, 0, false, 0, NULL},
    {"cgroup", V_CGPREFIX, TN(cgroup), 0, 0, false, 0, NULL},
    {"uid", V_UID, TN(uid), 0, 0, false, 0, NULL},
    {"gid", V_GID, TN(gid), 0, 0, false, 0, NULL},
    {"reservation", V_RATE, TN(qos.reservation_bps), 0, 0, false, 0, NULL},
    {"weight", V_U64, TN(qos.weight), 1, 10000, false, 0, NULL},
    {"limit", V_RATE, TN(qos.limit_bps), 0, 0, false, 0, NULL},
    {"disk_weight", V_U64, TN(qos.disk_weight), 1, 10000, false, 0, NULL},
    {"disk_limit", V_RATE, TN(qos.disk_limit_bps), 0, 0, false, 0, NULL},
    {"cache_quota", V_QUOTA, TN(cache_quota), 0, 0, false, 0, NULL},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

/* [class NAME]: that class's QoS defaults (the weight range is qos/sched.h's) */
static const struct keydef class_keys[] = {
    {"reservation", V_RATE, QC(reservation_bps), 0, 0, false, 0, NULL},
    {"weight", V_U64, QC(weight), 1, 10000, false, 0, NULL},
    {"limit", V_RATE, QC(limit_bps), 0, 0, false, 0, NULL},
    {"disk_weight", V_U64, QC(disk_weight), 1, 10000, false, 0, NULL},
    {"disk_limit", V_RATE, QC(disk_limit_bps), 0, 0, false, 0, NULL},
    {NULL, 0, 0, 0, 0, false, 0, NULL},
};

static const struct keydef *const tables[] = {
    daemon_keys,  cache_keys,   mount_keys,   api_keys,       writeback_keys,
    tenants_keys, cluster_keys, backend_keys, namespace_keys, tenant_keys,
    class_keys,   NULL /* [policy NAME]: lifecycle_rules.c's table (policy_rule_key_name) */};

static const char *const btype_names[] = {"any", "posix", "s3"};

/* Comma-separated list of the keys valid in a section ("root" for a posix backend). */
static void key_list(const struct keydef *t, int btype, char *out, size_t outsz)
{
    const char *names[64];
    size_t n = 0;
    for (const struct keydef *k = t; k->name && n < 64; k++)
        if (k->btype == BT_ANY || k->btype == btype)
            names[n++] = k->name;
    config_names_list(names, n, out, outsz);
}

/* A uid/gid: digits, or a name looked up in the user/group database. */
static int parse_id(const char *val, bool user, int64_t *out)
{
    uint64_t u = 0;
    if (isdigit((unsigned char)*val)) {
        if (tier_parse_u64(val, &u) || u > 4294967294ULL)
            return -EINVAL;
        *out = (int64_t)u;
        return 0;
    }
    char buf[4096];
    if (user) {
        struct passwd pw, *res = NULL;
        if (getpwnam_r(val, &pw, buf, sizeof(buf), &res) != 0 || !res)
            return -ENOENT;
        *out = (int64_t)res->pw_uid;
    } else {
        struct group gr, *res = NULL;
        if (getgrnam_r(val, &gr, buf, sizeof(buf), &res) != 0 || !res)
            return -ENOENT;
        *out = (int64_t)res->gr_gid;
    }
    return 0;
}

/* A rate: "200MiB/s", "1.5G/s", "500000/s" (K/M/G/T powers of 1024), or "none"; 0/s is none.
 * Also the control API's parser (PUT /v1/qos), so the file and the API take the same text. */
int tierd_rate_parse(const char *val, uint64_t *out)
{
    if (strcasecmp(val, "none") == 0) {
        *out = TIERD_RATE_NONE;
        return 0;
    }
    size_t n = strlen(val);
    if (n < 3 || strcasecmp(val + n - 2, "/s") != 0 || n - 2 >= 64)
        return -EINVAL;
    char num[64];
    memcpy(num, val, n - 2);
    num[n - 2] = '\0';
    uint64_t u = 0;
    int rc = tier_parse_size(trim(num), &u);
    if (rc)
        return rc == -ERANGE ? -ERANGE : -EINVAL;
    if (u == 0 && strpbrk(num, "123456789"))
        return -ERANGE; /* under 1 B/s ("0.5/s"): not "no limit" (second review of issue 11) */
    *out = u ? u : TIERD_RATE_NONE;
    return 0;
}

/* V_STR, V_CSTR: a copy of a non-empty value. */
static int set_string(struct parser *p, const struct keydef *k, char *field, const char *sect,
                      const char *val, int line)
{
    if (*val == '\0') {
        cfg_fail(p, line, "[%s] %s is empty (give a value or remove the line)", sect, k->name);
        return -EINVAL;
    }
    char *s = cfg_own_str(p, val);
    if (!s)
        return -ENOMEM;
    if (k->kind == V_STR)
        *(char **)(void *)field = s;
    else
        *(const char **)(void *)field = s;
    return 0;
}

/* V_SIZE, V_SIZEZ, V_DUR, V_INT, V_U64: a number in [k->min, k->max]. */
static int set_number(struct parser *p, const struct keydef *k, char *field, const char *sect,
                      const char *val, int line)
{
    uint64_t u = 0;
    int rc = k->kind == V_DUR                          ? tier_parse_duration_ms(val, &u)
             : k->kind == V_SIZE || k->kind == V_SIZEZ ? tier_parse_size(val, &u)
                                                       : tier_parse_u64(val, &u);
    if (rc || u < k->min || u > k->max) {
        char lo[32], hi[32];
        if ((k->kind == V_SIZE || k->kind == V_SIZEZ) && k->max == UINT64_MAX)
            cfg_fail(p, line,
                     "[%s] %s = '%s' is not a size (allowed: a byte count like 512M, 64GiB, 2T)",
                     sect, k->name, val);
        else if (k->kind == V_SIZE || k->kind == V_SIZEZ)
            cfg_fail(p, line,
                     "[%s] %s = '%s' is not allowed (allowed: a size from %s to %s, like 4M)", sect,
                     k->name, val, tier_fmt_bytes(k->min, lo, sizeof(lo)),
                     tier_fmt_bytes(k->max, hi, sizeof(hi)));
        else if (k->kind == V_DUR)
            cfg_fail(p, line,
                     "[%s] %s = '%s' is not allowed (allowed: a duration from %llums to %llums, "
                     "like 500ms, 10s, 2m)",
                     sect, k->name, val, (unsigned long long)k->min, (unsigned long long)k->max);
        else
            cfg_fail(p, line,
                     "[%s] %s = '%s' is not allowed (allowed: a whole number from %llu to %llu)",
                     sect, k->name, val, (unsigned long long)k->min, (unsigned long long)k->max);
        return -EINVAL;
    }
    if (strcmp(k->name, "curve_halflife") == 0 && u && u < 10000) {
        /* the curves' thread wakes every 200 ms: a shorter half-life would halve at each wake */
        cfg_fail(p, line,
                 "[%s] %s = '%s' is not allowed (allowed: 0 for never, or a duration from 10s to "
                 "30d)",
                 sect, k->name, val);
        return -EINVAL;
    }
    if (k->kind == V_SIZEZ)
        *(size_t *)(void *)field = (size_t)u;
    else if (k->kind == V_INT)
        *(int *)(void *)field = (int)u;
    else
        *(uint64_t *)(void *)field = u;
    return 0;
}

/* V_ENUM: one of k->choices, whose list is the error's "allowed:" text. */
static int set_enum(struct parser *p, const struct keydef *k, char *field, const char *sect,
                    const char *val, int line)
{
    if (config_choice_parse(k->choices, val, (int *)(void *)field)) {
        char allowed[256];
        config_choice_list(k->choices, allowed, sizeof(allowed));
        cfg_fail(p, line, "[%s] %s = '%s' is not allowed (allowed: %s)", sect, k->name, val,
                 allowed);
        return -EINVAL;
    }
    return 0;
}

/* V_UID, V_GID, V_UMASK: an owner or a permission mask. */
static int set_owner(struct parser *p, const struct keydef *k, char *field, const char *sect,
                     const char *val, int line)
{
    if (k->kind == V_UMASK) {
        char *end = NULL;
        errno = 0;
        unsigned long m = strtoul(val, &end, 8);
        if (!isdigit((unsigned char)*val) || errno || *end || m > 0777) {
            cfg_fail(p, line,
                     "[%s] umask = '%s' is not allowed (allowed: an octal mask from 000 to 777, "
                     "like 027)",
                     sect, val);
            return -EINVAL;
        }
        *(int *)(void *)field = (int)m;
        return 0;
    }
    int64_t id = -1;
    bool user = k->kind == V_UID;
    if (parse_id(val, user, &id)) {
        cfg_fail(p, line,
                 "[%s] %s = '%s' is not a known %s (allowed: a %s name from %s, or a number "
                 "from 0 to 4294967294)",
                 sect, k->name, val, user ? "user" : "group", user ? "user" : "group",
                 user ? "/etc/passwd" : "/etc/group");
        return -EINVAL;
    }
    *(int64_t *)(void *)field = id;
    return 0;
}

/* V_RATE, V_QUOTA: bytes per second or bytes of the hot tier, or none. */
static int set_budget(struct parser *p, const struct keydef *k, char *field, const char *sect,
                      const char *val, int line)
{
    uint64_t u = 0;
    if (k->kind == V_RATE && tierd_rate_parse(val, &u)) {
        cfg_fail(p, line,
                 "[%s] %s = '%s' is not a rate (allowed: bytes per second like 200MiB/s, 1.5G/s "
                 "or 500000/s, or none)",
                 sect, k->name, val);
        return -EINVAL;
    }
    if (k->kind == V_QUOTA && strcmp(val, "none") == 0) {
        u = CACHE_QUOTA_NONE;
    } else if (k->kind == V_QUOTA && (tier_parse_size(val, &u) || u == 0)) {
        cfg_fail(p, line,
                 "[%s] %s = '%s' is not a quota (allowed: the bytes of the hot tier the tenant "
                 "may hold, like 40G or 512MiB, or none)",
                 sect, k->name, val);
        return -EINVAL;
    }
    *(uint64_t *)(void *)field = u;
    return 0;
}

/* V_SPLIT: auto, off (or 0), or a size in [k->min, k->max]. */
static int set_split(struct parser *p, const struct keydef *k, char *field, const char *sect,
                     const char *val, int line)
{
    uint64_t u = 0;
    if (strcmp(val, "auto") == 0) {
        u = TIERD_SPLIT_AUTO;
    } else if (strcmp(val, "off") != 0 &&
               (tier_parse_size(val, &u) || (u && (u < k->min || u > k->max)))) {
        char lo[32], hi[32];
        cfg_fail(p, line,
                 "[%s] %s = '%s' is not allowed (allowed: auto, off, or a size from %s to %s, "
                 "like 64K)",
                 sect, k->name, val, tier_fmt_bytes(k->min, lo, sizeof(lo)),
                 tier_fmt_bytes(k->max, hi, sizeof(hi)));
        return -EINVAL;
    }
    *(uint64_t *)(void *)field = u;
    return 0;
}

/* V_JOB, V_CGPREFIX: a Slurm job id or a cgroup path prefix, kept as written. */
static int set_tenant_match(struct parser *p, const struct keydef *k, char *field, const char *sect,
                            const char *val, int line)
{
    const char *problem = NULL;
    if (k->kind == V_JOB && !tenant_job_valid(val))
        problem = "is not a Slurm job id (allowed: the job's number, 1 to 20 digits with no "
                  "leading zero, as in SLURM_JOB_ID)";
    if (k->kind == V_CGPREFIX && (problem = tenant_cgroup_prefix_problem(val)) != NULL) {
        cfg_fail(p, line,
                 "[%s] %s = '%s' %s (allowed: a cgroup path prefix as in "
                 "/proc/PID/cgroup, like /system.slice/inference.service)",
                 sect, k->name, val, problem);
        return -EINVAL;
    }
    /* a Slurm root must be one only root can create cgroups in: systemd delegates each
     * user@UID.service subtree of /user.slice to its user */
    if (k->kind == V_CGPREFIX && strcmp(k->name, "slurm_cgroup_root") == 0 &&
        (strcmp(val, "/") == 0 || strncmp(val, "/user.slice", 11) == 0)) {
        cfg_fail(p, line,
                 "[%s] %s = '%s' is not allowed: users create cgroups there (systemd delegates "
                 "/user.slice/.../user@UID.service to each user), so any user could name any "
                 "job; give the root slurmd creates job cgroups in, like /slurm_node1",
                 sect, k->name, val);
        return -EINVAL;
    }
    if (problem) {
        cfg_fail(p, line, "[%s] %s = '%s' %s", sect, k->name, val, problem);
        return -EINVAL;
    }
    char *s = cfg_own_str(p, val);
    if (!s)
        return -ENOMEM;
    *(char **)(void *)field = s;
    return 0;
}

/* The value of key k into its field of base (the struct its section fills): 0, or -EINVAL with
 * the error recorded, or -ENOMEM. One helper per family of kinds. */
static int set_value(struct parser *p, const struct keydef *k, void *base, const char *sect,
                     const char *val, int line)
{
    char *field = (char *)base + k->off;
    switch (k->kind) {
    case V_STR:
    case V_CSTR:
        return set_string(p, k, field, sect, val, line);
    case V_SIZE:
    case V_SIZEZ:
    case V_DUR:
    case V_INT:
    case V_U64:
        return set_number(p, k, field, sect, val, line);
    case V_ENUM:
        return set_enum(p, k, field, sect, val, line);
    case V_UID:
    case V_GID:
    case V_UMASK:
        return set_owner(p, k, field, sect, val, line);
    case V_RATE:
    case V_QUOTA:
        return set_budget(p, k, field, sect, val, line);
    case V_SPLIT:
        return set_split(p, k, field, sect, val, line);
    case V_JOB:
    case V_CGPREFIX:
        return set_tenant_match(p, k, field, sect, val, line);
    case V_BOOL: {
        int b = 0;
        if (tier_parse_bool(val, &b)) {
            cfg_fail(p, line,
                     "[%s] %s = '%s' is not allowed (allowed: true, false, yes, no, on, off, 1, 0)",
                     sect, k->name, val);
            return -EINVAL;
        }
        *(bool *)(void *)field = b != 0;
        return 0;
    }
    case V_FALLBACK:
        if (strcmp(val, "uid") != 0 && strcmp(val, "default") != 0) {
            cfg_fail(p, line,
                     "[%s] %s = '%s' is not allowed (allowed: uid, a tenant uid-<n> per user, or "
                     "default, one tenant for every caller no rule, job or pod names)",
                     sect, k->name, val);
            return -EINVAL;
        }
        *(bool *)(void *)field = strcmp(val, "default") == 0;
        return 0;
    case V_LOGLEVEL: {
        enum tier_log_level lvl;
        if (tier_log_level_parse(val, &lvl)) {
            cfg_fail(p, line, "[%s] %s = '%s' is not allowed (allowed: error, warn, info, debug)",
                     sect, k->name, val);
            return -EINVAL;
        }
        char *s = cfg_own_str(p, val);
        if (!s)
            return -ENOMEM;
        *(char **)(void *)field = s;
        return 0;
    }
    case V_CLASS:
        if (tier_io_class_parse(val, (enum tier_io_class *)(void *)field)) {
            cfg_fail(p, line,
                     "[%s] class = '%s' is not allowed (allowed: inference, training, checkpoint, "
                     "background)",
                     sect, val);
            return -EINVAL;
        }
        return 0;
    case V_BTYPE:
        return 0; /* checked in the type pre-pass (backend_types) */
    }
    return -EINVAL;
}

/* Is key valid in some other singleton section? Gives its name for a hint. */
static const char *section_of_key(const char *key, enum sec_kind except)
{
    for (int s = SEC_DAEMON; s < SEC_BAD; s++) {
        if (s == (int)except)
            continue;
        if (s == SEC_POLICY) {
            for (size_t i = 0; policy_rule_key_name(i); i++)
                if (strcmp(policy_rule_key_name(i), key) == 0)
                    return sec_names[s];
            continue;
        }
        for (const struct keydef *k = tables[s]; k->name; k++)
            if (strcmp(k->name, key) == 0)
                return sec_names[s];
    }
    return NULL;
}

static void unknown_key(struct parser *p, const struct raw_section *sec, const struct keydef *t,
                        int btype, const char *key, int line)
{
    const char *names[64];
    size_t n = 0;
    for (const struct keydef *k = t; k->name && n < 64; k++)
        if (k->btype == BT_ANY || k->btype == btype)
            names[n++] = k->name;
    char valid[512];
    key_list(t, btype, valid, sizeof(valid));
    const char *near = config_key_closest(key, names, n);
    if (near) {
        cfg_fail(p, line, "unknown key '%s' in [%s] (did you mean '%s'?)", key, sec->name, near);
        return;
    }
    /* a key of the other backend type */
    if (sec->kind == SEC_BACKEND) {
        for (const struct keydef *k = t; k->name; k++) {
            if (strcmp(k->name, key) == 0 && k->btype != btype) {
                cfg_fail(p, line,
                         "key '%s' is for backends of type %s, but [%s] has type %s (valid: %s)",
                         key, btype_names[k->btype], sec->name, btype_names[btype], valid);
                return;
            }
        }
    }
    const char *other = section_of_key(key, sec->kind);
    if (other) {
        cfg_fail(p, line, "unknown key '%s' in [%s] (it belongs in [%s%s]; valid here: %s)", key,
                 sec->name, other, sec_arg_hint(other), valid);
        return;
    }
    cfg_fail(p, line, "unknown key '%s' in [%s] (valid: %s)", key, sec->name, valid);
}

static bool valid_backend_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
            return false;
    return true;
}

/* "/datasets" or "/a/b": absolute, no trailing slash, no empty/./.. segments. */
static const char *ns_path_problem(const char *s)
{
    if (s[0] != '/')
        return "must start with '/'";
    if (s[1] == '\0')
        return "cannot be '/' itself (the root lists the namespaces)";
    if (strncmp(s, "/.tierd", 7) == 0 && (s[7] == '\0' || s[7] == '/'))
        return "cannot be /.tierd or below it (the mount keeps /.tierd for its control files, "
               "such as /.tierd/hints: docs/HINTS.md)";
    size_t len = strlen(s);
    if (len > 1024)
        return "is too long";
    if (s[len - 1] == '/')
        return "must not end with '/'";
    const char *seg = s + 1;
    while (*seg) {
        const char *end = strchr(seg, '/');
        size_t sl = end ? (size_t)(end - seg) : strlen(seg);
        if (sl == 0)
            return "has an empty segment ('//')";
        if ((sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.'))
            return "has a '.' or '..' segment";
        if (sl > 255)
            return "has a segment over 255 bytes";
        for (size_t i = 0; i < sl; i++)
            if ((unsigned char)seg[i] < 0x20 || seg[i] == 0x7f)
                return "has a control character";
        seg = end ? end + 1 : seg + sl;
    }
    return NULL;
}

/* Is a the same as b or one of its ancestors ("/a" vs "/a/b")? */
static bool path_covers(const char *a, const char *b)
{
    size_t la = strlen(a);
    return strncmp(a, b, la) == 0 && (b[la] == '\0' || b[la] == '/');
}

static void classify_tenant(struct parser *p, struct raw_section *s, const char *arg)
{
    struct tierd_config *c = p->cfg;
    if (!*arg || !tenant_name_valid(arg)) {
        cfg_fail(p, s->line,
                 "[%s]: a tenant needs a name of 1 to %d letters, digits, '_', '-', '.' (like "
                 "[tenant inference])",
                 s->name, TENANT_NAME_MAX - 1);
        return;
    }
    if (strcmp(arg, "default") == 0 || strcmp(arg, "other") == 0 ||
        strcmp(arg, TENANT_RETIRED_NAME) == 0) {
        cfg_fail(p, s->line,
                 "[tenant %s]: '%s' is a built-in tenant (callers no rule matches, tenants beyond "
                 "max_tenants, reclaimed tenants' counters); choose another name",
                 arg, arg);
        return;
    }
    for (size_t t = 0; t < c->ntenants; t++) {
        if (strcmp(c->tenants[t].name, arg) == 0) {
            cfg_fail(p, s->line, "duplicate section [tenant %s] (first at line %d; merge them)",
                     arg, c->tenants[t].conf_line);
            return;
        }
    }
    if (c->ntenants == TIERD_MAX_TENANT_CONFS) {
        cfg_fail(p, s->line, "too many [tenant] sections (at most %d)", TIERD_MAX_TENANT_CONFS);
        return;
    }
    struct tierd_tenant_conf *t = &c->tenants[c->ntenants];
    t->name = cfg_own_str(p, arg);
    t->conf_line = s->line;
    s->index = (int)c->ntenants++;
    s->kind = SEC_TENANT;
}

static void classify_class(struct parser *p, struct raw_section *s, const char *arg)
{
    enum tier_io_class cls;
    if (!*arg || tier_io_class_parse(arg, &cls)) {
        cfg_fail(p, s->line,
                 "[%s]: not a class (allowed: [class inference], [class training], [class "
                 "checkpoint], [class background])",
                 s->name);
        return;
    }
    if (p->cfg->class_line[cls]) {
        cfg_fail(p, s->line, "duplicate section [class %s] (first at line %d; merge them)",
                 tier_io_class_name(cls), p->cfg->class_line[cls]);
        return;
    }
    p->cfg->class_line[cls] = s->line;
    s->index = (int)cls;
    s->kind = SEC_CLASS;
}

static void classify_policy(struct parser *p, struct raw_section *s, const char *arg)
{
    struct tierd_config *c = p->cfg;
    if (!*arg || strlen(arg) >= POLICY_NAME_MAX || !tenant_name_valid(arg)) {
        cfg_fail(p, s->line,
                 "[%s]: a policy needs a name of 1 to %d letters, digits, '_', '-', '.' (like "
                 "[policy ckpt-hot])",
                 s->name, POLICY_NAME_MAX - 1);
        return;
    }
    for (size_t i = 0; i < c->npolicies; i++) {
        if (strcmp(c->policies[i].name, arg) == 0) {
            cfg_fail(p, s->line, "duplicate section [policy %s] (first at line %d; merge them)",
                     arg, c->policies[i].conf_line);
            return;
        }
    }
    if (c->npolicies == TIERD_MAX_POLICIES) {
        cfg_fail(p, s->line, "too many [policy] sections (at most %d)", TIERD_MAX_POLICIES);
        return;
    }
    struct tierd_policy_conf *pc = &c->policies[c->npolicies];
    pc->name = cfg_own_str(p, arg);
    pc->conf_line = s->line;
    s->index = (int)c->npolicies++;
    s->kind = SEC_POLICY;
}

/* A key of a [policy NAME] section, kept as written for policy_rules_build. */
static void policy_pair(struct parser *p, const struct raw_section *sec, const struct raw_pair *kv)
{
    struct tierd_policy_conf *pc = &p->cfg->policies[sec->index];
    for (size_t i = 0; i < pc->nkv; i++) {
        if (strcmp(pc->kv[i].key, kv->key) == 0) {
            cfg_fail(p, kv->line, "duplicate key '%s' in [%s] (first at line %d; keep one)",
                     kv->key, sec->name, pc->kv[i].line);
            return;
        }
    }
    if (pc->nkv == TIERD_POLICY_MAX_KEYS) {
        cfg_fail(p, kv->line, "[%s] has too many keys (at most %d)", sec->name,
                 TIERD_POLICY_MAX_KEYS);
        return;
    }
    pc->kv[pc->nkv].key = cfg_own_str(p, kv->key);
    pc->kv[pc->nkv].val = cfg_own_str(p, kv->val);
    pc->kv[pc->nkv].line = kv->line;
    pc->nkv++;
}

/* The kind of section s (its first word), its argument (the rest, blanks skipped) in *arg; -1
 * (reported) for an unknown one. */
static int section_kind(struct parser *p, const struct raw_section *s, const char **arg)
{
    char word[64];
    const char *sp = strpbrk(s->name, " \t");
    size_t wl = sp ? (size_t)(sp - s->name) : strlen(s->name);
    tier_strlcpy(word, s->name, wl + 1 < sizeof(word) ? wl + 1 : sizeof(word));
    *arg = sp ? sp : "";
    while (**arg == ' ' || **arg == '\t')
        (*arg)++;
    int kind = -1;
    for (int k = 0; k < SEC_BAD; k++)
        if (strcmp(word, sec_names[k]) == 0)
            kind = k;
    if (kind < 0) {
        const char *near = config_key_closest(word, sec_names, SEC_BAD);
        if (near)
            cfg_fail(p, s->line, "unknown section [%s] (did you mean [%s%s]?)", s->name, near,
                     sec_arg_hint(near));
        else
            cfg_fail(p, s->line,
                     "unknown section [%s] (allowed: [daemon], [cache], [mount], [api], "
                     "[writeback], [tenants], [cluster], [backend NAME], [namespace /PATH], "
                     "[tenant NAME], [class NAME], [policy NAME])",
                     s->name);
    }
    return kind;
}

/* A section without a name ([daemon], [cache], ...): once each. singleton_line: the line of
 * each kind's first, 0 none yet. */
static void classify_singleton(struct parser *p, struct raw_section *s, int kind, const char *arg,
                               int *singleton_line)
{
    if (*arg) {
        cfg_fail(p, s->line, "section [%s] takes no name (write [%s])", s->name, sec_names[kind]);
        return;
    }
    if (singleton_line[kind]) {
        cfg_fail(p, s->line, "duplicate section [%s] (first at line %d; merge them)", s->name,
                 singleton_line[kind]);
        return;
    }
    singleton_line[kind] = s->line;
    s->kind = (enum sec_kind)kind;
    if (kind == SEC_CLUSTER)
        p->cfg->cluster_line = s->line;
}

static void classify_backend(struct parser *p, struct raw_section *s, const char *arg)
{
    struct tierd_config *c = p->cfg;
    if (!*arg || !valid_backend_name(arg)) {
        cfg_fail(p, s->line,
                 "[%s]: a backend needs a name of letters, digits, '_', '-', '.' (like "
                 "[backend warm])",
                 s->name);
        return;
    }
    bool dup = false;
    for (size_t b = 0; b < c->nbackends; b++) {
        if (strcmp(c->backends[b].name, arg) == 0) {
            cfg_fail(p, s->line, "duplicate backend '%s' (first at line %d)", arg,
                     c->backends[b].conf_line);
            dup = true;
        }
    }
    if (dup)
        return;
    if (c->nbackends == TIERD_MAX_BACKENDS) {
        cfg_fail(p, s->line, "too many backends (at most %d)", TIERD_MAX_BACKENDS);
        return;
    }
    struct tierd_backend_conf *b = &c->backends[c->nbackends];
    b->name = cfg_own_str(p, arg);
    b->conf_line = s->line;
    b->posix.name = b->name;
    b->s3.name = b->name;
    s->index = (int)c->nbackends++;
    s->kind = SEC_BACKEND;
}

static void classify_namespace(struct parser *p, struct raw_section *s, const char *arg)
{
    struct tierd_config *c = p->cfg;
    const char *problem = *arg ? ns_path_problem(arg) : "is missing";
    if (problem) {
        cfg_fail(p, s->line,
                 "[%s]: the namespace path %s (allowed: an absolute mount sub-path like "
                 "[namespace /datasets])",
                 s->name, problem);
        return;
    }
    for (size_t n = 0; n < c->nnamespaces; n++) {
        const struct tierd_ns_conf *o = &c->namespaces[n];
        if (path_covers(o->path, arg) || path_covers(arg, o->path)) {
            cfg_fail(p, s->line,
                     "namespace %s overlaps namespace %s (line %d); namespaces must be disjoint",
                     arg, o->path, o->conf_line);
            return;
        }
    }
    if (c->nnamespaces == TIERD_MAX_NAMESPACES) {
        cfg_fail(p, s->line, "too many namespaces (at most %d)", TIERD_MAX_NAMESPACES);
        return;
    }
    struct tierd_ns_conf *ns = &c->namespaces[c->nnamespaces];
    ns->path = cfg_own_str(p, arg);
    ns->conf_line = s->line;
    ns->mode = TIERD_NS_READ_CACHE;
    s->index = (int)c->nnamespaces++;
    s->kind = SEC_NAMESPACE;
}

/* Each section's kind (and, for a named one, its entry in the config), in file order. */
static void classify_sections(struct parser *p)
{
    int singleton_line[SEC_BACKEND] = {0};
    for (size_t i = 0; i < p->nsecs; i++) {
        struct raw_section *s = &p->secs[i];
        const char *arg;
        int kind = section_kind(p, s, &arg);
        if (kind < 0)
            continue;
        if (kind < SEC_BACKEND)
            classify_singleton(p, s, kind, arg, singleton_line);
        else if (kind == SEC_BACKEND)
            classify_backend(p, s, arg);
        else if (kind == SEC_TENANT)
            classify_tenant(p, s, arg);
        else if (kind == SEC_CLASS)
            classify_class(p, s, arg);
        else if (kind == SEC_POLICY)
            classify_policy(p, s, arg);
        else
            classify_namespace(p, s, arg);
    }
}

/* Backend types first: which keys are valid depends on them. */
static void backend_types(struct parser *p)
{
    for (size_t i = 0; i < p->npairs; i++) {
        struct raw_pair *kv = &p->pairs[i];
        if (kv->sec < 0 || p->secs[kv->sec].kind != SEC_BACKEND || strcmp(kv->key, "type") != 0)
            continue;
        struct tierd_backend_conf *b = &p->cfg->backends[p->secs[kv->sec].index];
        int bt;
        if (config_choice_parse(btype_choices, kv->val, &bt)) {
            char allowed[64];
            config_choice_list(btype_choices, allowed, sizeof(allowed));
            cfg_fail(p, kv->line, "[%s] type = '%s' is not allowed (allowed: %s)",
                     p->secs[kv->sec].name, kv->val, allowed);
            continue;
        }
        if (!b->type)
            b->type = cfg_own_str(p, kv->val);
    }
}

/* The struct the keys of section sec set (the config, or its entry), and its backend type (for
 * a backend: BT_POSIX or BT_S3; else BT_ANY); NULL for a backend with no valid type (reported
 * elsewhere). */
static void *pair_base(struct parser *p, const struct raw_section *sec, int *btype)
{
    struct tierd_config *c = p->cfg;
    *btype = BT_ANY;
    switch (sec->kind) {
    case SEC_BACKEND: {
        struct tierd_backend_conf *b = &c->backends[sec->index];
        if (!b->type)
            return NULL;
        *btype = strcmp(b->type, "posix") == 0 ? BT_POSIX : BT_S3;
        return b;
    }
    case SEC_NAMESPACE:
        return &c->namespaces[sec->index];
    case SEC_TENANT:
        return &c->tenants[sec->index];
    case SEC_CLASS:
        return &c->classes[sec->index];
    default:
        return c;
    }
}

/* Where the keys the later checks name were set (key idx of sec's table, set from kv). */
static void note_pair(struct parser *p, const struct raw_section *sec, const struct raw_pair *kv,
                      int idx)
{
    struct tierd_config *c = p->cfg;
    if (sec->kind == SEC_NAMESPACE && strcmp(kv->key, "backend") == 0)
        p->ns_backend_line[sec->index] = kv->line;
    if (sec->kind == SEC_NAMESPACE && strcmp(kv->key, "durability") == 0)
        p->ns_durability_line[sec->index] = kv->line;
    if (sec->kind == SEC_API && strcmp(kv->key, "tcp") == 0)
        p->tcp_line = kv->line;
    if (sec->kind == SEC_API && idx < 24)
        p->api_line[idx] = kv->line;
    if (sec->kind == SEC_WRITEBACK)
        p->wb_line = sec->line;
    if (sec->kind == SEC_MOUNT && strcmp(kv->key, "attr_ttl") == 0)
        c->attr_ttl_set = true;
    if (sec->kind == SEC_MOUNT && strcmp(kv->key, "entry_ttl") == 0)
        c->entry_ttl_set = true;
    if (sec->kind == SEC_TENANTS && strcmp(kv->key, "max_tenants") == 0)
        p->max_tenants_line = kv->line;
    if (sec->kind == SEC_TENANTS && strcmp(kv->key, "reserved_ids") == 0)
        p->reserved_ids_line = kv->line;
    if (sec->kind == SEC_TENANTS && strcmp(kv->key, "cache_quota") == 0)
        p->cache_quota_line = kv->line;
    if (sec->kind == SEC_TENANT && strcmp(kv->key, "cache_quota") == 0)
        c->tenants[sec->index].cache_quota_line = kv->line;
    if (sec->kind == SEC_CACHE && strcmp(kv->key, "pin_size") == 0)
        p->set_pin_size = true;
    if (sec->kind == SEC_BACKEND && strcmp(kv->key, "request_timeout") == 0)
        p->set_request_timeout[sec->index] = true;
    if (sec->kind == SEC_BACKEND && strcmp(kv->key, "connect_timeout") == 0)
        p->set_connect_timeout[sec->index] = true;
    if (sec->kind == SEC_BACKEND && strcmp(kv->key, "link_capacity") == 0)
        c->backends[sec->index].link_capacity_line = kv->line;
    if (sec->kind == SEC_TENANT || sec->kind == SEC_CLASS) {
        struct tierd_qos_conf *q =
            sec->kind == SEC_TENANT ? &c->tenants[sec->index].qos : &c->classes[sec->index];
        if (strcmp(kv->key, "reservation") == 0)
            q->reservation_line = kv->line;
        if (strcmp(kv->key, "limit") == 0)
            q->limit_line = kv->line;
    }
}

/* One key = value: checked against its section's table and set. */
static void apply_pair(struct parser *p, struct raw_pair *kv)
{
    if (kv->sec < 0) {
        cfg_fail(p, kv->line,
                 "key '%s' is outside any section (put it under [daemon], [cache], [mount], "
                 "[api], [writeback], [tenants], [cluster], [backend NAME], [namespace /PATH], "
                 "[tenant NAME], [class NAME] or [policy NAME])",
                 kv->key);
        return;
    }
    struct raw_section *sec = &p->secs[kv->sec];
    if (sec->kind == SEC_BAD)
        return; /* already reported */
    if (sec->kind == SEC_POLICY) {
        policy_pair(p, sec, kv);
        return;
    }
    const struct keydef *t = tables[sec->kind];
    int btype;
    void *base = pair_base(p, sec, &btype);
    if (!base)
        return; /* missing or bad type: reported elsewhere */
    int idx = -1;
    for (int k = 0; t[k].name; k++)
        if (strcmp(t[k].name, kv->key) == 0 && (t[k].btype == BT_ANY || t[k].btype == btype))
            idx = k;
    if (idx < 0) {
        unknown_key(p, sec, t, btype, kv->key, kv->line);
        return;
    }
    if (sec->seen & (1ULL << idx)) {
        cfg_fail(p, kv->line, "duplicate key '%s' in [%s] (keep one)", kv->key, sec->name);
        return;
    }
    sec->seen |= 1ULL << idx;
    if (set_value(p, &t[idx], base, sec->name, kv->val, kv->line))
        return;
    note_pair(p, sec, kv, idx);
}

/* Required keys, reported at the section's line. */
static void check_required(struct parser *p)
{
    char btype_list[64];
    config_choice_list(btype_choices, btype_list, sizeof(btype_list));
    for (size_t i = 0; i < p->nsecs; i++) {
        struct raw_section *sec = &p->secs[i];
        if (sec->kind == SEC_BAD || sec->kind == SEC_POLICY)
            continue;
        int btype = BT_ANY;
        if (sec->kind == SEC_BACKEND) {
            const struct tierd_backend_conf *b = &p->cfg->backends[sec->index];
            if (!b->type) {
                cfg_fail_missing(p, sec->line, "[%s] is missing required key 'type' (allowed: %s)",
                                 sec->name, btype_list);
                continue;
            }
            btype = strcmp(b->type, "posix") == 0 ? BT_POSIX : BT_S3;
        }
        const struct keydef *t = tables[sec->kind];
        for (int k = 0; t[k].name; k++) {
            if (!t[k].required || (t[k].btype != BT_ANY && t[k].btype != btype))
                continue;
            if (!(sec->seen & (1ULL << k)))
                cfg_fail_missing(p, sec->line, "[%s] is missing required key '%s'", sec->name,
                                 t[k].name);
        }
    }
}

static void apply_pairs(struct parser *p)
{
    for (size_t i = 0; i < p->npairs; i++)
        apply_pair(p, &p->pairs[i]);
    check_required(p);
}

/* Line of the [api] key name (0 if not set). */
int cfg_api_key_line(const struct parser *p, const char *name)
{
    for (int k = 0; api_keys[k].name && k < 24; k++)
        if (strcmp(api_keys[k].name, name) == 0)
            return p->api_line[k];
    return 0;
}

static void apply_defaults(struct tierd_config *c)
{
    c->cache.block_size = 4 * MIB;
    c->cache.ram_bytes = 1024 * MIB;
    c->cache.disk_bytes = 10240 * MIB;
    c->cache.disk_min_free_bytes = 1024 * MIB;
    c->cache.policy = CACHE_POLICY_S3FIFO;
    c->cache.max_fetches = 64;
    c->hints_threads = 16;
    c->hints_window_files = 256;
    c->hints_window_bytes = 1ull << 30;
    c->hints_tenant_sets = 4; /* 64 tenants at their cap fill HINTS_SETS_MAX */
    c->hints_tenant_entries = 1000000;
    c->hints_tenant_bytes = 128 * MIB; /* 16 tenants at their cap fill hint_state_size */
    c->hints_state_bytes = 2048 * MIB;
    c->attr_ttl_ms = 1000;
    c->entry_ttl_ms = 1000;
    c->version_list_ttl_ms = 10000;
    c->fuse_threads = 16;
    c->readahead_blocks = 4;
    c->readahead_max_bytes = 64 * MIB;
    c->cache.prefetch_threads = 8;
    c->cache.store_queue_bytes = 256 * MIB;
    c->cache.store_nice = 19;
    c->cache.mrc_halflife_ms = 300000;
    c->mount_uid = c->mount_gid = -1;
    c->mount_umask = -1;
    c->max_dir_entries = 1000000;
    for (size_t n = 0; n < TIERD_MAX_NAMESPACES; n++) {
        c->namespaces[n].uid = c->namespaces[n].gid = -1;
        c->namespaces[n].umask = -1;
        c->namespaces[n].attr_ttl_ms = c->namespaces[n].entry_ttl_ms = TIERD_TTL_UNSET;
    }
    c->qos_op_cost = 64 * KIB;
    c->disk_max_inflight = 64;
    c->disk_op_cost = 4 * KIB;
    c->max_tenants = TENANT_MAX_TENANTS_DEFAULT;
    c->cluster_lease_ms = 10000;
    c->cluster_weight_val = 1.0;
    c->cluster_share = true;
    c->cluster_peer_timeout_ms = 0; /* backend_timeout (finish) */
    c->cluster_peer_inflight = TIERD_PEER_INFLIGHT_DEFAULT;
    c->cluster_balance_val = 1.25;
    c->tenant_pid_cache = TENANT_PID_CACHE_DEFAULT;
    c->tenant_reserved_ids = TIERD_RESERVED_IDS_UNSET;
    c->tenant_implicit_per_minute = TIERD_IMPLICIT_PER_MINUTE_DEFAULT;
    c->tenant_idle_reclaim_ms = TIERD_IDLE_RECLAIM_MS_DEFAULT;
    for (size_t t = 0; t < TIERD_MAX_TENANT_CONFS; t++) {
        c->tenants[t].cls = TIER_IO_TRAINING;
        c->tenants[t].uid = c->tenants[t].gid = -1;
    }
    c->backend_timeout_ms = 10000;
    c->stage_threads = 16;
    c->no_open = TIERD_NO_OPEN_OFF; /* opt-in: docs/CONFIG.md "No-open connection", its limits */
    c->health_backlog_ms = 300000;
    c->telemetry = true;
    c->gpu_sampling = TIERD_GPU_AUTO;
    c->gpu_sample_interval_ms = 5000;
    c->qos = true;
    c->policy_interval_ms = 30000;
    c->wb_upload_threads = 2;
    c->wb_parts_parallel = 4;
    c->wb_part_size = 8 * MIB;
    c->wb_backpressure_wait_ms = 60000;
    c->wb_upload_holdoff_ms = 200;
    c->wb_upload_holdoff_max_ms = 30000;
    c->wb_retention_keep = 2;
    c->wb_durability = TIERD_DURABILITY_LOCAL;
    c->api_max_connections = 64;
    c->api_max_connections_per_ip = 16;
    c->api_max_connections_per_uid = 8;
    c->api_admin_connections = -1;
    c->api_user_timeout_ms = 10000;
    c->api_max_wait_ms = 300000;
    c->api_max_stage_jobs = 16;
    c->api_socket_gid = -1;
    c->api_admin_gid = -1;
    for (size_t b = 0; b < TIERD_MAX_BACKENDS; b++) {
        struct s3_backend_config *s3 = &c->backends[b].s3;
        s3->path_style = true;
        s3->max_retries = 4;
        s3->retry_base_ms = 100;
        s3->retry_max_ms = 5000;
        s3->connect_timeout_ms = 3000;
        s3->request_timeout_ms = 30000;
        s3->max_connections = 16;
        c->backends[b].breaker_failures = 5;
        c->backends[b].breaker_cooldown_ms = 5000;
        c->backends[b].yield_inflight = 1;
        c->backends[b].yield_hold_ms = 500;
        c->backends[b].split_read_bytes = TIERD_SPLIT_AUTO;
    }
}

static void finish_defaults(struct parser *p)
{
    struct tierd_config *c = p->cfg;
    if (!c->log_level)
        c->log_level = cfg_own_str(p, "info");
    if (!c->api_socket)
        c->api_socket = cfg_own_str(p, "/run/tierd/api.sock");
    if (!c->api_ui_chartjs)
        c->api_ui_chartjs = cfg_own_str(p, "/usr/share/javascript/chart.js/chart.min.js");
    c->cache.disk_dir = c->cache_disk_dir;
    for (size_t n = 0; n < c->nnamespaces; n++)
        if (!p->ns_durability_line[n])
            c->namespaces[n].durability = c->wb_durability;
    if (!c->wb_spool_dir && c->cache_disk_dir) {
        /* "spool" beside the cache directory: /var/cache/tierd/disk -> /var/cache/tierd/spool */
        const char *d = c->cache_disk_dir;
        size_t len = strlen(d);
        while (len > 1 && d[len - 1] == '/')
            len--;
        size_t cut = len;
        while (cut > 0 && d[cut - 1] != '/')
            cut--;
        char buf[4096];
        int w = cut == 0 ? snprintf(buf, sizeof(buf), "spool")
                         : snprintf(buf, sizeof(buf), "%.*sspool", (int)cut, d);
        if (w > 0 && (size_t)w < sizeof(buf))
            c->wb_spool_dir = cfg_own_str(p, buf);
    }
    if (!c->cache_disk_dir)
        c->cache.disk_bytes = 0;
    if (!p->set_pin_size)
        c->cache.pin_bytes = (c->cache_disk_dir ? c->cache.disk_bytes : c->cache.ram_bytes) / 2;
    /* A peer's first byte of a block it does not hold comes after its own backend fetch, which
     * may take backend_timeout: a shorter deadline would take a busy owner for a hung one. */
    if (!c->cluster_peer_timeout_ms)
        c->cluster_peer_timeout_ms =
            c->backend_timeout_ms < 600000 ? c->backend_timeout_ms : 600000;
    /* One backend call, retries included, must end within backend_timeout: split it over the
     * attempts unless the user chose the per-attempt timeouts. The S3 backend bounds the call by
     * (max_retries + 1) * request_timeout plus the backoff caps, and each attempt's stalls (no
     * byte moved) by request_timeout. */
    for (size_t b = 0; b < c->nbackends; b++) {
        struct s3_backend_config *s3 = &c->backends[b].s3;
        uint64_t per = c->backend_timeout_ms / (uint64_t)(s3->max_retries + 1);
        if (per < 100)
            per = 100;
        if (!p->set_request_timeout[b])
            s3->request_timeout_ms = per;
        if (!p->set_connect_timeout[b] && s3->connect_timeout_ms > per)
            s3->connect_timeout_ms = per;
        uint64_t backoff_cap = c->backend_timeout_ms / 8;
        if (s3->retry_max_ms > backoff_cap)
            s3->retry_max_ms = backoff_cap > 10 ? backoff_cap : 10;
        if (s3->retry_base_ms > s3->retry_max_ms)
            s3->retry_base_ms = s3->retry_max_ms;
    }
}

static int parse_stream(const char *name, FILE *in, struct tierd_config *cfg, char *err,
                        size_t errsz)
{
    struct parser *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->file = name;
    p->in = in;
    p->cfg = cfg;
    cfg->file = cfg_own_str(p, name);
    apply_defaults(cfg);

    ini_allow_multiline = false;
    int irc = ini_parse_stream(reader, p, handler, p);
    int rc = 0;
    if (p->oom) {
        rc = -ENOMEM;
        snprintf(err, errsz, "%s: out of memory while parsing", name);
        goto out;
    }
    if (irc > 0)
        cfg_fail(p, irc, "syntax error: expected '[section]', 'key = value' or a comment (; or #)");
    classify_sections(p);
    backend_types(p);
    apply_pairs(p);
    cfg_check_semantics(p);
    finish_defaults(p);
    cfg_check_policies(p);
    if (p->oom) {
        rc = -ENOMEM;
        snprintf(err, errsz, "%s: out of memory while parsing", name);
    } else if (p->err_line) {
        rc = -EINVAL;
        tier_strlcpy(err, p->err, errsz);
    } else if (p->miss_line) {
        rc = -EINVAL;
        tier_strlcpy(err, p->miss, errsz);
    }
out:
    for (size_t i = 0; i < p->nsecs; i++)
        free(p->secs[i].name);
    for (size_t i = 0; i < p->npairs; i++) {
        free(p->pairs[i].key);
        free(p->pairs[i].val);
    }
    free(p->pairs);
    free(p->linebuf);
    free(p);
    return rc;
}

int tierd_config_load(const char *path, struct tierd_config *cfg, char *err, size_t errsz)
{
    memset(cfg, 0, sizeof(*cfg));
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errsz, "%s: cannot open the config file: %s", path, strerror(e));
        return -e;
    }
    int rc = parse_stream(path, f, cfg, err, errsz);
    fclose(f);
    return rc;
}

int tierd_config_load_string(const char *name, const char *text, size_t len,
                             struct tierd_config *cfg, char *err, size_t errsz)
{
    memset(cfg, 0, sizeof(*cfg));
    static char empty[1];
    FILE *f = len ? fmemopen((void *)(uintptr_t)text, len, "r") : fmemopen(empty, 1, "r");
    if (!f) {
        snprintf(err, errsz, "%s: cannot read the config text", name);
        return -ENOMEM;
    }
    int rc = parse_stream(name, f, cfg, err, errsz);
    fclose(f);
    return rc;
}

void tierd_config_fini(struct tierd_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->nstrs; i++)
        free(cfg->strs[i]);
    free(cfg->strs);
    memset(cfg, 0, sizeof(*cfg));
}

/* ---- the lifecycle rules' view of a config (lifecycle.h) ------------------------------------ */

void tierd_policy_view_of(const struct tierd_config *cfg, struct tierd_policy_view *v)
{
    size_t nkv = 0;
    for (size_t i = 0; i < cfg->npolicies; i++) {
        const struct tierd_policy_conf *pc = &cfg->policies[i];
        v->sections[i] = (struct policy_section){
            .name = pc->name, .line = pc->conf_line, .kv = &v->kv[nkv], .nkv = pc->nkv};
        for (size_t k = 0; k < pc->nkv; k++)
            v->kv[nkv++] = (struct policy_kv){
                .key = pc->kv[k].key, .val = pc->kv[k].val, .line = pc->kv[k].line};
    }
    for (size_t b = 0; b < cfg->nbackends; b++)
        v->backends[b] = cfg->backends[b].name;
    v->conf = (struct policy_conf){
        .file = cfg->file,
        .sections = v->sections,
        .nsections = cfg->npolicies,
        .namespaces = cfg->namespaces,
        .nnamespaces = cfg->nnamespaces,
        .backends = v->backends,
        .nbackends = cfg->nbackends,
        .retention_keep = cfg->wb_retention_keep,
        .disk_level = cfg->cache_disk_dir && cfg->cache.disk_bytes,
    };
}

int policy_rules_build(const struct tierd_config *cfg, struct policy_rules *out, char *err,
                       size_t errsz, int *err_line)
{
    struct tierd_policy_view *v = malloc(sizeof(*v));
    if (!v)
        return -ENOMEM;
    tierd_policy_view_of(cfg, v);
    int rc = policy_rules_build_conf(&v->conf, out, err, errsz, err_line);
    free(v);
    return rc;
}

struct policy_conf *tierd_policy_conf_new(const struct tierd_config *cfg)
{
    struct tierd_policy_view *v = malloc(sizeof(*v));
    if (!v)
        return NULL;
    tierd_policy_view_of(cfg, v);
    return &v->conf;
}

void tierd_policy_conf_free(struct policy_conf *pc)
{
    if (pc)
        free((char *)pc - offsetof(struct tierd_policy_view, conf));
}
