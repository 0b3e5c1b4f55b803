/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config_check.c - phase 3 of reading tierd.conf (config.c's DESIGN): the checks that span keys
 * and sections once the key tables have filled struct tierd_config — write-back spools, the
 * control API's token and TCP listener, upload buffers, tenants, QoS, quotas, [cluster], the
 * namespaces and backends together (cfg_check_semantics), and the [policy] rules
 * (cfg_check_policies). Every message is "FILE:LINE: what is wrong (what is allowed)".
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/keytab.h"
#include "common/log.h"
#include "common/strutil.h"
#include "cluster/member_entry.h"
#include "cluster/peer.h"
#include "daemon/config_int.h"
#include "lifecycle/lifecycle.h"
#include "tenant/tenant.h"

/* Write-back namespaces need a spool directory; durability belongs to write-back namespaces. */
static void check_writeback(struct parser *p)
{
    struct tierd_config *c = p->cfg;
    int first_wb = 0;
    for (size_t n = 0; n < c->nnamespaces; n++) {
        const struct tierd_ns_conf *ns = &c->namespaces[n];
        if (ns->mode == TIERD_NS_WRITE_BACK && !first_wb)
            first_wb = ns->conf_line;
        if (ns->mode != TIERD_NS_WRITE_BACK && p->ns_durability_line[n])
            cfg_fail(
                p, p->ns_durability_line[n],
                "[namespace %s] durability only applies to mode = write-back (remove it or set "
                "mode = write-back)",
                ns->path);
    }
    if (!first_wb || c->wb_spool_dir || c->cache_disk_dir)
        return;
    cfg_fail(p, first_wb,
             "a write-back namespace needs a spool directory: set [writeback] spool_dir = DIR (or "
             "[cache] disk_dir, whose sibling 'spool' is the default)");
}

/* Is the host part of HOST:PORT a loopback address (127.0.0.0/8, ::1, localhost)? */
static bool host_is_loopback(const char *hostport)
{
    const char *colon = strrchr(hostport, ':');
    size_t hl = (size_t)(colon - hostport);
    char host[256];
    if (hl == 0 || hl >= sizeof(host))
        return false;
    memcpy(host, hostport, hl);
    host[hl] = '\0';
    char *h = host;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h[hl - 1] = '\0';
        h++;
    }
    if (strcmp(h, "localhost") == 0)
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, h, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, h, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

/* Tokens that appear in examples and docs: never accepted. */
static const char *const weak_tokens[] = {"change-me", "changeme", "secret",
                                          "token",     "password", NULL};

#define API_TOKEN_MIN 16

/* Read the bearer token from [api] token_file: owned by tierd's user, no group or other
 * permission bits, one line of printable ASCII. */
static void read_token_file(struct parser *p, int line)
{
    struct tierd_config *c = p->cfg;
    const char *path = c->api_token_file;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        cfg_fail(p, line, "[api] token_file = '%s' cannot be read: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        cfg_fail(
            p, line,
            "[api] token_file = '%s' must be a regular file owned by tierd's user (uid %u) and "
            "readable by it alone (it is uid %u, mode %04o; fix: chown %u %s; chmod 600 %s)",
            path, (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
            (unsigned)geteuid(), path, path);
        close(fd);
        return;
    }
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0) {
        cfg_fail(p, line, "[api] token_file = '%s' cannot be read: %s", path, strerror(errno));
        return;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        n--;
    buf[n] = '\0';
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] <= ' ' || buf[i] > '~') {
            cfg_fail(
                p, line,
                "[api] token_file = '%s' must hold one token of printable ASCII without spaces "
                "(like the output of: head -c 32 /dev/urandom | base64)",
                path);
            return;
        }
    c->api_token = cfg_own_str(p, buf);
    explicit_bzero(buf, sizeof(buf));
}

static void check_api(struct parser *p)
{
    struct tierd_config *c = p->cfg;
    int tok_line = cfg_api_key_line(p, "token"), file_line = cfg_api_key_line(p, "token_file");
    if (c->api_token && c->api_token_file) {
        cfg_fail(p, file_line,
                 "[api] has both token and token_file: keep token_file (remove the "
                 "token line, the config file is often readable by more users)");
        return;
    }
    if (c->api_token_file)
        read_token_file(p, file_line);
    if (c->api_token) {
        int line = file_line ? file_line : tok_line;
        bool weak = strlen(c->api_token) < API_TOKEN_MIN;
        for (size_t i = 0; weak_tokens[i] && !weak; i++)
            weak = strcasecmp(c->api_token, weak_tokens[i]) == 0;
        if (weak)
            cfg_fail(p, line,
                     "[api] token is too weak: at least %d characters, not an example value (make "
                     "one with: head -c 32 /dev/urandom | base64 > /etc/tierd/api.token; chmod 600 "
                     "/etc/tierd/api.token; then token_file = /etc/tierd/api.token)",
                     API_TOKEN_MIN);
    }
    bool tls = c->api_tls_cert || c->api_tls_key;
    if (tls && !(c->api_tls_cert && c->api_tls_key))
        cfg_fail(p, cfg_api_key_line(p, c->api_tls_cert ? "tls_cert" : "tls_key"),
                 "[api] TLS needs both tls_cert = PEM_FILE and tls_key = PEM_FILE");
    if (tls && !c->api_tcp)
        cfg_fail(p, cfg_api_key_line(p, c->api_tls_cert ? "tls_cert" : "tls_key"),
                 "[api] tls_cert/tls_key only apply to the TCP listener: set tcp = HOST:PORT or "
                 "remove them");
    if (c->api_tcp) {
        const char *colon = strrchr(c->api_tcp, ':');
        uint64_t port = 0;
        if (!colon || colon == c->api_tcp || tier_parse_u64(colon + 1, &port) || port == 0 ||
            port > 65535)
            cfg_fail(p, p->tcp_line,
                     "[api] tcp = '%s' is not allowed (allowed: HOST:PORT, like 127.0.0.1:7700)",
                     c->api_tcp);
        else if (!c->api_token && !c->api_token_file) /* a bad token_file has its own error */
            cfg_fail(p, p->tcp_line,
                     "[api] tcp is set but no token: the TCP listener requires 'token_file = FILE' "
                     "(or 'token = SECRET'; clients send Authorization: Bearer SECRET)");
        else if (!tls && !host_is_loopback(c->api_tcp))
            cfg_fail(p, p->tcp_line,
                     "[api] tcp = '%s' is not a loopback address and TLS is not configured: the "
                     "token and every answer would cross the network in clear (use 127.0.0.1:PORT, "
                     "or set tls_cert and tls_key)",
                     c->api_tcp);
    }
    /* the Unix socket's slots kept for administrators: the default leaves non-admins at least
     * half of max_connections */
    if (c->api_admin_connections < 0)
        c->api_admin_connections = c->api_max_connections / 2 < 8 ? c->api_max_connections / 2 : 8;
    else if (c->api_admin_connections >= c->api_max_connections)
        cfg_fail(
            p, cfg_api_key_line(p, "admin_connections"),
            "[api] admin_connections = %d leaves no connection of the socket to other users: it "
            "must be below max_connections (%d)",
            c->api_admin_connections, c->api_max_connections);
    const char *gkeys[2] = {"socket_group", "admin_group"};
    char *gnames[2] = {c->api_socket_group, c->api_admin_group};
    int64_t *gids[2] = {&c->api_socket_gid, &c->api_admin_gid};
    for (int i = 0; i < 2; i++) {
        *gids[i] = -1;
        if (!gnames[i])
            continue;
        struct group gr, *res = NULL;
        char gbuf[4096];
        uint64_t num = 0;
        if (getgrnam_r(gnames[i], &gr, gbuf, sizeof(gbuf), &res) == 0 && res)
            *gids[i] = (int64_t)res->gr_gid;
        else if (tier_parse_u64(gnames[i], &num) == 0 && num < UINT32_MAX)
            *gids[i] = (int64_t)num;
        else
            cfg_fail(p, cfg_api_key_line(p, gkeys[i]),
                     "[api] %s = '%s' is not a group of this system (give a group name from "
                     "/etc/group or a numeric gid)",
                     gkeys[i], gnames[i]);
    }
}

/* The uploaders hold up to upload_threads x parts_parallel part buffers of part_size (a single
 * PUT: one buffer of less than part_size); a file's own part size only grows past part_size for
 * files over part_size x 10,000 (docs/WRITEBACK.md). */
#define WB_UPLOAD_BUFFERS_MAX (16ULL << 30)

static void check_upload_buffers(struct parser *p)
{
    const struct tierd_config *c = p->cfg;
    uint64_t bufs = (uint64_t)c->wb_upload_threads * (uint64_t)c->wb_parts_parallel;
    if (c->wb_part_size && bufs > WB_UPLOAD_BUFFERS_MAX / c->wb_part_size)
        cfg_fail(p, p->wb_line,
                 "[writeback] upload_threads x parts_parallel x part_size = %d x %d x %llu MiB of "
                 "upload buffers, more than %llu GiB; lower one of them",
                 c->wb_upload_threads, c->wb_parts_parallel,
                 (unsigned long long)(c->wb_part_size >> 20),
                 (unsigned long long)(WB_UPLOAD_BUFFERS_MAX >> 30));
}

/* The configured tenants and the two built-in ones must fit max_tenants; reserved_ids (default
 * a quarter of max_tenants) must leave the two built-in ones. */
static void check_tenants(struct parser *p)
{
    struct tierd_config *c = p->cfg;
    if (c->tenant_reserved_ids == TIERD_RESERVED_IDS_UNSET)
        c->tenant_reserved_ids = c->max_tenants / 4;
    else if (c->tenant_reserved_ids > c->max_tenants - 2)
        cfg_fail(
            p, p->reserved_ids_line,
            "[tenants] reserved_ids = %llu is more than max_tenants - 2 = %llu (the ids implicit "
            "tenants may not take; default and other hold two): lower it or raise max_tenants",
            (unsigned long long)c->tenant_reserved_ids, (unsigned long long)c->max_tenants - 2);
    if (c->ntenants + 2 <= c->max_tenants)
        return;
    const struct tierd_tenant_conf *t = &c->tenants[c->max_tenants - 2];
    if (p->max_tenants_line)
        cfg_fail(
            p, p->max_tenants_line,
            "[tenants] max_tenants = %llu leaves no id for [tenant %s] (line %d): %zu [tenant] "
            "sections and the built-in default and other need max_tenants = %zu or more",
            (unsigned long long)c->max_tenants, t->name, t->conf_line, c->ntenants,
            c->ntenants + 2);
    else
        cfg_fail(
            p, t->conf_line,
            "[tenant %s]: %zu [tenant] sections and the built-in default and other exceed the "
            "%llu tenant ids of the default max_tenants (set [tenants] max_tenants = %zu or more)",
            t->name, c->ntenants, (unsigned long long)c->max_tenants, c->ntenants + 2);
}

/* A set rate (not 0 = unset, not none), else 0. */
static uint64_t rate_set(uint64_t v)
{
    return v == TIERD_RATE_NONE ? 0 : v;
}

static const char *fmt_rate(uint64_t bps, char *buf, size_t n)
{
    char b[32];
    snprintf(buf, n, "%s/s", tier_fmt_bytes(bps, b, sizeof(b)));
    return buf;
}

/* Reservations must fit under limits, and the reservations that apply to a backend under its
 * link_capacity. A class's reservation is counted once (as its default tenant's: which tenants
 * will use a class's default is not known in advance); inference's built-in reservation, a
 * tenth of the link, counts unless [class inference] sets one (qos/sched.h). */
static void check_qos(struct parser *p)
{
    const struct tierd_config *c = p->cfg;
    char a[48], b[48];
    for (int k = 0; k < TIER_IO_NCLASSES; k++) {
        const struct tierd_qos_conf *q = &c->classes[k];
        uint64_t r = rate_set(q->reservation_bps), l = rate_set(q->limit_bps);
        if (r && l && r > l)
            cfg_fail(p, q->reservation_line,
                     "[class %s] reservation = %s is above its limit = %s (line %d): a reservation "
                     "must fit under the limit; lower it or raise the limit",
                     tier_io_class_name(k), fmt_rate(r, a, sizeof(a)), fmt_rate(l, b, sizeof(b)),
                     q->limit_line);
    }
    for (size_t i = 0; i < c->ntenants; i++) {
        /* the tenant's limit caps all its classes; its class's limit that class; either must
         * leave room for the reservation of its class (its own or the class's) */
        const struct tierd_tenant_conf *t = &c->tenants[i];
        const struct tierd_qos_conf *cq = &c->classes[t->cls];
        uint64_t r =
            rate_set(t->qos.reservation_bps ? t->qos.reservation_bps : cq->reservation_bps);
        uint64_t tl = rate_set(t->qos.limit_bps), cl = rate_set(cq->limit_bps);
        if (!r || (!t->qos.reservation_bps && !tl))
            continue; /* nothing of the tenant's own (the class check covers the rest) */
        bool over_t = tl && r > tl, over_c = cl && r > cl;
        if (!over_t && !over_c)
            continue;
        int line = t->qos.reservation_bps ? t->qos.reservation_line : t->qos.limit_line;
        char from[96] = "";
        if (!over_t)
            snprintf(from, sizeof(from), " ([class %s] line %d)", tier_io_class_name(t->cls),
                     cq->limit_line);
        else if (!t->qos.reservation_bps)
            snprintf(from, sizeof(from), " (reservation from [class %s] line %d)",
                     tier_io_class_name(t->cls), cq->reservation_line);
        cfg_fail(p, line,
                 "[tenant %s] reservation = %s is above its limit = %s%s: a reservation must fit "
                 "under the limit; lower it or raise the limit",
                 t->name, fmt_rate(r, a, sizeof(a)), fmt_rate(over_t ? tl : cl, b, sizeof(b)),
                 from);
    }
    for (size_t bi = 0; bi < c->nbackends; bi++) {
        const struct tierd_backend_conf *be = &c->backends[bi];
        uint64_t cap = rate_set(be->link_capacity_bps);
        if (!cap)
            continue;
        uint64_t sum = 0;
        for (int k = 0; k < TIER_IO_NCLASSES; k++) {
            uint64_t r = c->classes[k].reservation_bps;
            if (k == TIER_IO_INFERENCE && r == 0)
                r = cap / 10; /* the built-in default */
            sum = tier_sum_sat(sum, rate_set(r));
        }
        for (size_t i = 0; i < c->ntenants; i++)
            sum = tier_sum_sat(sum, rate_set(c->tenants[i].qos.reservation_bps));
        if (sum > cap)
            cfg_fail(p, be->link_capacity_line,
                     "[backend %s] link_capacity = %s is less than the reservations that apply to "
                     "it, %s in all (each [class] reservation once, inference's built-in tenth of "
                     "the link unless [class inference] sets one, and every [tenant] reservation): "
                     "lower the reservations or raise link_capacity",
                     be->name, fmt_rate(cap, a, sizeof(a)), fmt_rate(sum, b, sizeof(b)));
    }
}

/* A space quota below one block keeps nothing a tenant reads: refuse it. */
static void check_quota(struct parser *p, const char *sect, uint64_t q, int line)
{
    size_t bs = p->cfg->cache.block_size ? p->cfg->cache.block_size : 4u << 20;
    char a[32], b[32];
    if (q && q != CACHE_QUOTA_NONE && q < bs)
        cfg_fail(
            p, line,
            "[%s] cache_quota = %s is less than one cache block ([cache] block_size = %s): the "
            "tenant could keep nothing it reads; raise it to at least %s, or write none",
            sect, tier_fmt_bytes(q, a, sizeof(a)), tier_fmt_bytes(bs, b, sizeof(b)),
            tier_fmt_bytes(bs, b, sizeof(b)));
}

static void check_quotas(struct parser *p)
{
    const struct tierd_config *c = p->cfg;
    check_quota(p, "tenants", c->cache.default_quota, p->cache_quota_line);
    for (size_t i = 0; i < c->ntenants; i++) {
        char sect[96];
        snprintf(sect, sizeof(sect), "tenant %s", c->tenants[i].name);
        check_quota(p, sect, c->tenants[i].cache_quota, c->tenants[i].cache_quota_line);
    }
}

/* [cluster]'s peer reads: the secret, an address to serve on (share = yes), TLS off loopback
 * (as the control API's TCP listener), the balance factor. */
static void check_cluster_peers(struct parser *p)
{
    struct tierd_config *c = p->cfg;
    /* the endpoint serves peers as this tenant: a match key would fold local callers into it */
    for (size_t i = 0; i < c->ntenants; i++) {
        const struct tierd_tenant_conf *t = &c->tenants[i];
        if (strcmp(t->name, TIERD_PEER_TENANT) == 0 &&
            (t->slurm_job || t->cgroup || t->uid >= 0 || t->gid >= 0))
            cfg_fail(p, t->conf_line,
                     "[tenant %s] with a [cluster] section is the peers' traffic (what this node "
                     "serves to the others): it takes no slurm_job, cgroup, uid or gid, which "
                     "would put local callers into it; remove them, or name the local tenant "
                     "otherwise",
                     TIERD_PEER_TENANT);
    }
    if (!c->cluster_secret_file)
        cfg_fail(p, c->cluster_line,
                 "[cluster] needs secret_file = PATH: a file holding the cluster's shared secret "
                 "(at least %d bytes, the same file on every node, readable by tierd only), e.g. "
                 "`head -c 32 /dev/urandom | base64 > PATH && chmod 600 PATH`",
                 PEER_SECRET_MIN);
    if (c->cluster_share && !c->cluster_address)
        cfg_fail(p, c->cluster_line,
                 "[cluster] share = yes needs address = HOST:PORT (where this node serves its "
                 "blocks to the others), or set share = no (read from peers, serve none)");
    if (c->cluster_share && c->cluster_address) {
        const char *colon = strrchr(c->cluster_address, ':');
        char *end = NULL;
        unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
        if (!colon || colon == c->cluster_address || !end || *end || port == 0 || port > 65535)
            cfg_fail(p, c->cluster_line,
                     "[cluster] address = '%s' is not HOST:PORT (an IPv4 address or localhost, "
                     "and a port 1..65535)",
                     c->cluster_address);
    }
    /* a node that serves needs all three; a consume-only one only the CA, to check its peers */
    int ntls = !!c->cluster_tls_cert + !!c->cluster_tls_key + !!c->cluster_tls_ca;
    if (c->cluster_share && ntls && ntls != 3)
        cfg_fail(p, c->cluster_line,
                 "[cluster] TLS needs all of tls_cert, tls_key and tls_ca (the PEM files of "
                 "this node's certificate, its key, and the CA that signed every node's)");
    if (!c->cluster_share && (c->cluster_tls_cert || c->cluster_tls_key))
        cfg_fail(p, c->cluster_line,
                 "[cluster] share = no serves no peer: tls_cert and tls_key are not used (keep "
                 "tls_ca, with which it checks the peers it reads from)");
    /* the peer lane is listed beside the backends' (/metrics): a backend may not take its name */
    for (size_t i = 0; i < c->nbackends; i++)
        if (strcmp(c->backends[i].name, TIERD_PEER_LANE) == 0)
            cfg_fail(p, c->backends[i].conf_line,
                     "[backend %s]: with a [cluster] section, '%s' names the scheduler lane of "
                     "this node's peer requests; give the backend another name",
                     TIERD_PEER_LANE, TIERD_PEER_LANE);
    if (!ntls && c->cluster_share && c->cluster_address && !host_is_loopback(c->cluster_address))
        cfg_fail(p, c->cluster_line,
                 "[cluster] address = '%s' is not a loopback address and TLS is not configured: "
                 "blocks would cross the network in the clear; set tls_cert, tls_key and tls_ca",
                 c->cluster_address);
    if (c->cluster_balance) {
        char *end = NULL;
        errno = 0;
        double b = strtod(c->cluster_balance, &end);
        if (errno || end == c->cluster_balance || *end || !isfinite(b) || b <= 1.0 || b > 100)
            cfg_fail(p, c->cluster_line,
                     "[cluster] balance = '%s' is not allowed (allowed: a number above 1 and at "
                     "most 100, like 1.25: no node takes more than that times its share of the "
                     "peer requests)",
                     c->cluster_balance);
        else
            c->cluster_balance_val = b;
    }
}

/* [cluster]: a build with librados, ids member_id_valid() takes, a positive weight, and the
 * defaults (docs/CONFIG.md, [cluster]). */
static void check_cluster(struct parser *p)
{
    struct tierd_config *c = p->cfg;
    if (!c->cluster_line)
        return;
#ifndef TIER_HAVE_RADOS
    cfg_fail(
        p, c->cluster_line,
        "[cluster]: this tierd was built without librados (Debian's librados-dev), so it cannot "
        "join a cluster; remove the section or build tierd with librados");
    return;
#endif
    if (!c->cluster_name)
        return; /* missing: check_required reported it */
    if (!member_id_valid(c->cluster_name))
        cfg_fail(
            p, c->cluster_line,
            "[cluster] name = '%s' is not allowed (allowed: 1 to %d letters, digits, '_', '-', "
            "'.')",
            c->cluster_name, MEMBER_ID_MAX);
    if (!c->cluster_node_id) {
        char host[256] = "";
        if (gethostname(host, sizeof(host) - 1) != 0 || !member_id_valid(host)) {
            cfg_fail(
                p, c->cluster_line,
                "[cluster]: the host name '%s' is not a node id (1 to %d letters, digits, '_', "
                "'-', '.'): set node_id",
                host, MEMBER_ID_MAX);
            return;
        }
        c->cluster_node_id = cfg_own_str(p, host);
    } else if (!member_id_valid(c->cluster_node_id)) {
        cfg_fail(p, c->cluster_line,
                 "[cluster] node_id = '%s' is not allowed (allowed: 1 to %d letters, digits, '_', "
                 "'-', '.')",
                 c->cluster_node_id, MEMBER_ID_MAX);
    }
    if (c->cluster_address) {
        bool printable = strlen(c->cluster_address) <= MEMBER_ADDR_MAX;
        for (const char *a = c->cluster_address; *a; a++)
            printable = printable && *a > 0x20 && *a < 0x7f;
        if (!printable)
            cfg_fail(
                p, c->cluster_line,
                "[cluster] address = '%s' is not allowed (allowed: HOST:PORT, up to %d printable "
                "characters without blanks)",
                c->cluster_address, MEMBER_ADDR_MAX);
    }
    if (c->cluster_weight) {
        char *end = NULL;
        errno = 0;
        double w = strtod(c->cluster_weight, &end);
        if (errno || end == c->cluster_weight || *end || !isfinite(w) || w <= 0 ||
            w > MEMBER_WEIGHT_MAX)
            cfg_fail(
                p, c->cluster_line,
                "[cluster] weight = '%s' is not allowed (allowed: a number above 0 and at most "
                "1e15, like 1 or 2.5: this node's share of the cluster's blocks)",
                c->cluster_weight);
        else
            c->cluster_weight_val = w;
    }
    check_cluster_peers(p);
    if (!c->cluster_ceph_conf)
        c->cluster_ceph_conf = cfg_own_str(p, "/etc/ceph/ceph.conf");
    if (!c->cluster_user)
        c->cluster_user = cfg_own_str(p, "admin");
    if (!c->cluster_pool)
        c->cluster_pool = cfg_own_str(p, "tierd");
}

void cfg_check_semantics(struct parser *p)
{
    struct tierd_config *c = p->cfg;
    check_cluster(p);
    check_upload_buffers(p);
    check_tenants(p);
    check_quotas(p);
    check_qos(p);
    if (!c->mount_path)
        cfg_fail_missing(p, 0,
                         "no [mount] section with 'path = DIR' (where to mount the namespaces)");
    else if (c->mount_path[0] != '/')
        cfg_fail(p, 0, "[mount] path = '%s' must be an absolute path", c->mount_path);
    if (c->nnamespaces == 0)
        cfg_fail_missing(p, 0,
                         "no [namespace /PATH] section: nothing to mount (add e.g. [namespace "
                         "/datasets] with backend = NAME)");
    const char *bnames[TIERD_MAX_BACKENDS];
    for (size_t b = 0; b < c->nbackends; b++)
        bnames[b] = c->backends[b].name;
    for (size_t n = 0; n < c->nnamespaces; n++) {
        struct tierd_ns_conf *ns = &c->namespaces[n];
        if (ns->backend) {
            bool found = false;
            for (size_t b = 0; b < c->nbackends; b++)
                found = found || strcmp(bnames[b], ns->backend) == 0;
            if (!found) {
                const char *near = config_key_closest(ns->backend, bnames, c->nbackends);
                char known[256] = "";
                size_t used = 0;
                for (size_t b = 0; b < c->nbackends; b++) {
                    int w = snprintf(known + used, sizeof(known) - used, "%s%s", used ? ", " : "",
                                     bnames[b]);
                    if (w < 0 || (size_t)w >= sizeof(known) - used)
                        break;
                    used += (size_t)w;
                }
                if (near)
                    cfg_fail(p, p->ns_backend_line[n],
                             "[namespace %s] backend = '%s' is not defined (did you mean '%s'?)",
                             ns->path, ns->backend, near);
                else
                    cfg_fail(p, p->ns_backend_line[n],
                             "[namespace %s] backend = '%s' is not defined (defined backends: %s)",
                             ns->path, ns->backend,
                             c->nbackends ? known : "none; add [backend NAME]");
            }
        }
        /* prefix: no leading '/', ends with '/' unless empty */
        const char *pre = ns->prefix ? ns->prefix : "";
        while (*pre == '/')
            pre++;
        size_t pl = strlen(pre);
        if (pl == 0) {
            ns->prefix = cfg_own_str(p, "");
        } else {
            char *np = malloc(pl + 2);
            if (!np) {
                p->oom = true;
                return;
            }
            memcpy(np, pre, pl);
            if (pre[pl - 1] != '/')
                np[pl++] = '/';
            np[pl] = '\0';
            if (backend_key_valid(np, pl, true) != 0)
                cfg_fail(p, ns->conf_line,
                         "[namespace %s] prefix = '%s' is not a valid key prefix (%s)", ns->path,
                         ns->prefix, tier_err_msg());
            ns->prefix = cfg_own(p, np, pl);
            free(np);
        }
    }
    check_api(p);
    if (c->cache.ram_bytes == 0 && !c->cache_disk_dir)
        cfg_fail(p, 0, "[cache] has neither RAM (ram_size = 0) nor disk (disk_dir): set one");
    check_writeback(p);
}

/* The [policy NAME] sections, once the namespaces and backends are known (lifecycle_rules.c has
 * the rules of each key; it reports the line of what is wrong). */
void cfg_check_policies(struct parser *p)
{
    if (p->err_line || p->miss_line)
        return; /* the policies' checks need a sound rest of the file */
    struct policy_rules r;
    char msg[400];
    int line = 0;
    int rc = policy_rules_build(p->cfg, &r, msg, sizeof(msg), &line);
    if (rc == -ENOMEM)
        p->oom = true;
    else if (rc)
        cfg_fail(p, line, "%s", msg);
    else
        policy_rules_free(&r);
}
