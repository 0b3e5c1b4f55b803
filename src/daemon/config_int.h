/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config_int.h - what config.c (phases 1 and 2: reading and the key tables) and config_check.c
 * (phase 3: the checks across keys and sections) share: the parser's state and its error and
 * string helpers. Private to src/daemon.
 */
#ifndef TIER_DAEMON_CONFIG_INT_H
#define TIER_DAEMON_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/tierd.h"

#define MAX_SECTIONS 256
#define MAX_PAIRS 4096

enum sec_kind {
    SEC_DAEMON,
    SEC_CACHE,
    SEC_MOUNT,
    SEC_API,
    SEC_WRITEBACK,
    SEC_TENANTS,
    SEC_CLUSTER, /* the last singleton: kinds below SEC_BACKEND take no name */
    SEC_BACKEND,
    SEC_NAMESPACE,
    SEC_TENANT,
    SEC_CLASS,
    SEC_POLICY,
    SEC_BAD
};

struct raw_section {
    char *name; /* as written, trimmed: "backend warm" */
    enum sec_kind kind;
    int line;
    int index;     /* backend / namespace slot, or -1 */
    uint64_t seen; /* bit per key table entry */
};

struct raw_pair {
    int sec; /* index into secs, -1 when before any section */
    char *key, *val;
    int line;
};

struct parser {
    const char *file;
    FILE *in;
    char *linebuf;
    size_t linecap;
    int line;
    bool stop;
    struct raw_section secs[MAX_SECTIONS];
    size_t nsecs;
    struct raw_pair *pairs;
    size_t npairs, cappairs;
    bool oom;
    /* the first error by line; missing-key errors kept apart (see DESIGN) */
    int err_line;
    char err[512];
    int miss_line;
    char miss[512];
    struct tierd_config *cfg;
    int ns_backend_line[TIERD_MAX_NAMESPACES];
    int ns_durability_line[TIERD_MAX_NAMESPACES]; /* 0: not set */
    int tcp_line;
    int api_line[24];      /* line of each [api] key (index in api_keys), 0: not set */
    int wb_line;           /* the [writeback] section's line, 0: none */
    int max_tenants_line;  /* [tenants] max_tenants, 0: not set */
    int reserved_ids_line; /* [tenants] reserved_ids, 0: not set */
    int cache_quota_line;  /* [tenants] cache_quota, 0: not set */
    bool set_request_timeout[TIERD_MAX_BACKENDS];
    bool set_connect_timeout[TIERD_MAX_BACKENDS];
    bool set_pin_size;
};

/* Records an error at line (the lowest line wins; see config.c's DESIGN). */
void cfg_fail(struct parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records a "missing required key" error, which wins only when nothing else is wrong. */
void cfg_fail_missing(struct parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A copy of s (len bytes) / of the string s owned by the config being built (NULL: out of memory,
 * p->oom set). */
char *cfg_own(struct parser *p, const char *s, size_t len);
char *cfg_own_str(struct parser *p, const char *s);
/* The line of the [api] key name (0 if not set). */
int cfg_api_key_line(const struct parser *p, const char *name);

/* config_check.c: the checks across keys and sections, after the key tables filled the config. */
void cfg_check_semantics(struct parser *p);
void cfg_check_policies(struct parser *p);

#endif
