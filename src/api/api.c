/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c - the control API's HTTP server: libmicrohttpd on a Unix socket we bind ourselves, and an
 * optional TCP socket that demands a bearer token (TLS with [api] tls_cert/tls_key; plain HTTP
 * only on a loopback address). This file is the thin adapter between libmicrohttpd and the pure
 * request function of api_route.c (api_int.h); the contract is docs/API.md.
 *
 * Threads: each listener is its own MHD daemon (a thread per connection), so a flood of TCP
 * connections cannot take the Unix socket's slots. Each daemon admits at most [api]
 * max_connections connections (the TCP one also at most max_connections_per_ip per client
 * address; MHD accepts them on its poll()-based listening thread and closes those over the
 * bounds at once). A blocking POST /v1/wait holds only its own connection's thread.
 *
 * The Unix socket is accepted by our own thread (gate_main), not by MHD, because the bounds there
 * are per caller: tierctl, `systemctl reload` and the Slurm provider (root or admins) must get
 * in while any socket-group member holds as many connections as it can open. The thread reads
 * each connection's SO_PEERCRED and admits it (MHD_add_connection) or answers it at once and
 * closes it (gate_refuse): an admin (root, tierd's uid, [api] admin_group, as for changing state)
 * always gets in below max_connections; the other callers together hold at most
 * max_connections - admin_connections, one uid at most max_connections_per_uid (a long-polling
 * POST /v1/wait counts as the connection it holds). Their connections are closed after
 * user_timeout without a request (header or idle), an admin's after 60 s. The counts are taken at
 * accept, under gate.mu (which nothing else is held with), and the connection is entered in the
 * gate's pending table (by fd and socket inode) before it is handed to MHD. MHD's STARTED
 * notification (gate_notify) claims the entry and its CLOSED one gives the share back; an entry
 * whose fd no longer names its socket was dropped by MHD unannounced and is given back by the
 * next accept (gate_sweep).
 *
 * Request flow: the first callback of a request (headers complete, no body read) runs
 * api_admit(), which reads the request's row of the route table (api_routes[]): token on TCP,
 * the caller's rights on the Unix socket (SO_PEERCRED: only root, tierd's uid or a member of
 * [api] admin_group may call an admin route), the declared body size. A refusal is answered at
 * once and the body is never read. The body is then collected into a dynbuf capped at
 * api_body_max() (the row's bound: API_BODY_MAX; more for POST /v1/hints); a body that grows past
 * it is answered 413 and the connection closed without reading the rest.
 *
 * The socket file is bound in a private directory (mode 0700) made beside it, given its mode
 * (0660) and [api] socket_group there, and renamed into place: no moment where it has a wider
 * mode, and no chmod by name that could follow a symlink swapped in by someone else (fchmod and
 * fchown on a Unix socket's fd do not change the file's mode on Linux). The parent directory
 * must be owned by root or tierd's user and not writable by others (unless sticky).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/listen.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "api/api.h"
#include "api/api_int.h"
#include "core/state.h"

struct listener {
    struct tierd_api *api;
    struct MHD_Daemon *mhd;
    int fd;
    bool tcp; /* requests must carry the bearer token */
};

#define GATE_LINGER_MAX 32
#define GATE_LINGER_NS (2 * TIER_NS_PER_SEC)

/* Open connections of one non-admin uid on the Unix socket. */
struct uid_conns {
    uid_t uid;
    int n;
    bool refused_logged; /* a refusal was logged since n was last below the cap */
};

/* A counted connection handed to MHD whose STARTED notification has not come yet. */
struct pending_conn {
    int fd;
    dev_t dev; /* the socket's identity: fd may be closed and reused for another file */
    ino_t ino;
    uid_t uid;
    bool admin;
};

/* The Unix socket's admission (see the top of the file). Fields under mu; the accept thread and
 * MHD's notifications (on MHD's threads) take it. */
struct gate {
    pthread_mutex_t mu;
    struct uid_conns *uids; /* the uids with open connections, nuids of cap_uids */
    size_t nuids, cap_uids;
    /* counted connections not yet STARTED (npending of cap_uids: each is counted in users or
     * admins, which together stay below max_connections) */
    struct pending_conn *pending;
    size_t npending;
    int users, admins;       /* open connections */
    uint64_t refused;        /* connections answered 429/503 at accept */
    uint64_t full_logged_ns; /* when a 503 was last logged (at most one a minute) */
    pthread_t thread;
    bool started;     /* the accept thread runs (tierd_api_start and _stop's thread only) */
    int stop_pipe[2]; /* a byte or the close of [1] ends gate_main */
    /* refused connections, answered and kept open (gate_main's own) until the peer closes or
     * GATE_LINGER_NS pass: a client that writes its request after the answer arrived would
     * otherwise get EPIPE and never read the answer */
    struct {
        int fd;
        uint64_t until_ns;
    } linger[GATE_LINGER_MAX];
    size_t nlinger;
};

struct tierd_api {
    struct tierd *d;
    struct listener unix_l, tcp_l;
    char *socket_path;
    char *tls_cert_pem, *tls_key_pem; /* kept while the TCP daemon runs */
    struct gate gate;
};

/* What gate_notify keeps per Unix-socket connection (MHD's socket_context). */
struct conn_info {
    uid_t uid;
    bool admin;
};

/* Per request; owned by the connection's thread. */
struct request {
    struct dynbuf body;
    bool answered; /* a refusal was queued before the body: ignore what follows */
    bool admin;    /* may change state (the token on TCP; SO_PEERCRED on the socket) */
    bool peer;     /* cred is the socket peer's */
    struct ucred cred;
    gid_t *groups; /* the peer's supplementary groups (malloc'd), ngroups of them */
    size_t ngroups;
    bool groups_unknown; /* SO_PEERGROUPS failed */
};

/* ---- adapter --------------------------------------------------------------------------- */

static enum MHD_Result queue_reply(struct MHD_Connection *c, struct api_reply *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        r->len, r->body, r->is_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        api_reply_fini(r);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->retry_after_s) {
        char ra[16];
        snprintf(ra, sizeof(ra), "%u", r->retry_after_s);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (r->content_type && strncmp(r->content_type, "text/html", 9) == 0) {
        /* The dashboard: its own scripts only (no inline script, nothing from another origin),
         * fetches back to tierd only, and never a Referer (the page's URL has the token in its
         * fragment, which browsers do not send, but say so anyway). */
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'none'; script-src 'self'; connect-src 'self'; "
                                "style-src 'self'; img-src 'self'; frame-ancestors 'none'");
        MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
        MHD_add_response_header(resp, "Cache-Control", "no-store");
    }
    enum MHD_Result ret = MHD_queue_response(c, r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* Is the peer cr of Unix-socket fd an administrator: root, tierd's own uid, or a member
 * (primary or supplementary group) of [api] admin_group? */
static bool cred_admin(const struct tierd *d, int fd, const struct ucred *cr)
{
    if (cr->uid == 0 || cr->uid == geteuid())
        return true;
    if (d->cfg.api_admin_gid < 0)
        return false;
    gid_t admin = (gid_t)d->cfg.api_admin_gid;
    if (cr->gid == admin)
        return true;
    gid_t small[64];
    gid_t *groups = small;
    socklen_t gl = sizeof(small);
    int rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl);
    if (rc != 0 && errno == ERANGE) {
        groups = malloc(gl);
        if (!groups)
            return false;
        rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl);
    }
    bool ok = false;
    for (size_t i = 0; rc == 0 && i < gl / sizeof(gid_t) && !ok; i++)
        ok = groups[i] == admin;
    if (groups != small)
        free(groups);
    return ok;
}

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* May the peer of this Unix-socket connection change state? (cred_admin) */
static bool peer_may_mutate(const struct tierd *d, struct MHD_Connection *c, struct ucred *crp,
                            bool *have)
{
    *have = false;
    int fd = conn_fd(c);
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return false;
    *crp = cr;
    *have = true;
    return cred_admin(d, fd, &cr);
}

/* The supplementary groups of the peer of Unix-socket connection c (malloc'd into *out, *n of
 * them); false (and none) when they cannot be read. */
static bool peer_groups(struct MHD_Connection *c, gid_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int fd = conn_fd(c);
    socklen_t gl = 64 * sizeof(gid_t);
    gid_t *g = malloc(gl);
    int rc = g && fd >= 0 ? getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &gl) : -1;
    if (rc != 0 && g && errno == ERANGE) {
        gid_t *bigger = realloc(g, gl);
        if (bigger) {
            g = bigger;
            rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &gl);
        }
    }
    if (rc != 0) {
        free(g);
        return false;
    }
    *out = g;
    *n = gl / sizeof(gid_t);
    return true;
}

static int64_t content_length(struct MHD_Connection *c)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    uint64_t n = 0;
    if (!v || tier_parse_u64(v, &n) != 0)
        return -1;
    return n > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)n;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct listener *l = cls;
    struct tierd *d = l->api->d;
    struct request *rq = *con_cls;
    struct api_reply r = {0};
    if (!rq) {
        rq = calloc(1, sizeof(*rq));
        if (!rq)
            return MHD_NO;
        *con_cls = rq;
        struct ucred cr = {0};
        bool have_peer = false;
        struct api_head h = {
            .method = method,
            .url = url,
            .tcp = l->tcp,
            .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
            .may_mutate = l->tcp || peer_may_mutate(d, c, &cr, &have_peer),
            .content_length = content_length(c),
        };
        rq->admin = h.may_mutate;
        dynbuf_init(&rq->body, api_body_max(method, url, rq->admin));
        rq->peer = !l->tcp && have_peer;
        rq->cred = cr;
        if (rq->peer && !rq->admin)
            rq->groups_unknown = !peer_groups(c, &rq->groups, &rq->ngroups);
        if (api_admit(d, &h, &r) == 0)
            return MHD_YES;
        rq->answered = true;
        return queue_reply(c, &r);
    }
    if (rq->answered) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        if (dynbuf_append(&rq->body, upload_data, *upload_data_size) != 0) {
            /* past the cap: answer now; MHD closes the connection without reading the rest */
            rq->answered = true;
            *upload_data_size = 0;
            api_reply_too_large(&r);
            return queue_reply(c, &r);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    struct api_request req = {
        .method = method,
        .url = url,
        .arg_path = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path"),
        .body = rq->body.data,
        .body_len = rq->body.len,
        .admin = rq->admin,
        .peer = rq->peer,
        .pid = rq->cred.pid,
        .uid = rq->cred.uid,
        .gid = rq->cred.gid,
        .groups = rq->groups,
        .ngroups = rq->ngroups,
        .groups_unknown = rq->groups_unknown,
    };
    api_handle(d, &req, &r);
    return queue_reply(c, &r);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct request *rq = *con_cls;
    if (rq) {
        dynbuf_fini(&rq->body);
        free(rq->groups);
        free(rq);
        *con_cls = NULL;
    }
}

/* ---- the Unix socket's admission ------------------------------------------------------ */

static struct uid_conns *gate_uid(struct gate *g, uid_t uid)
{
    for (size_t i = 0; i < g->nuids; i++)
        if (g->uids[i].uid == uid)
            return &g->uids[i];
    return NULL;
}

/* Count a connection of (uid, admin) in; 0, or the HTTP status that refuses it (429: the uid holds
 * its share; 503: the non-admins together hold theirs, or the socket is full). */
static unsigned gate_take(struct tierd_api *a, uid_t uid, bool admin, bool *log_it)
{
    const struct tierd_config *cfg = &a->d->cfg;
    struct gate *g = &a->gate;
    unsigned st = 0;
    *log_it = false;
    pthread_mutex_lock(&g->mu);
    struct uid_conns *u = admin ? NULL : gate_uid(g, uid);
    if (g->users + g->admins >= cfg->api_max_connections) {
        st = 503;
    } else if (admin) {
        g->admins++;
    } else if (u && u->n >= cfg->api_max_connections_per_uid) {
        st = 429;
        *log_it = !u->refused_logged;
        u->refused_logged = true;
    } else if (g->users >= cfg->api_max_connections - cfg->api_admin_connections ||
               (!u && g->nuids == g->cap_uids)) {
        st = 503;
    } else {
        if (!u) {
            u = &g->uids[g->nuids++];
            *u = (struct uid_conns){.uid = uid};
        }
        u->n++;
        g->users++;
    }
    if (st)
        g->refused++;
    uint64_t now = tier_now_mono_ns();
    if (st == 503 && (!g->full_logged_ns || now - g->full_logged_ns >= 60 * TIER_NS_PER_SEC)) {
        *log_it = true;
        g->full_logged_ns = now;
    }
    pthread_mutex_unlock(&g->mu);
    return st;
}

/* Give back what gate_take counted for (uid, admin); under g->mu. */
static void gate_give_locked(struct gate *g, uid_t uid, bool admin)
{
    struct uid_conns *u = admin ? NULL : gate_uid(g, uid);
    if (admin) {
        g->admins--;
    } else if (u) {
        g->users--;
        u->refused_logged = false;
        if (--u->n == 0)
            *u = g->uids[--g->nuids];
    }
}

static void gate_give(struct gate *g, uid_t uid, bool admin)
{
    pthread_mutex_lock(&g->mu);
    gate_give_locked(g, uid, admin);
    pthread_mutex_unlock(&g->mu);
}

/* Take the pending entry of fd out of the table (under g->mu); false if there is none. */
static bool pending_claim(struct gate *g, int fd, struct pending_conn *out)
{
    for (size_t i = 0; i < g->npending; i++)
        if (g->pending[i].fd == fd) {
            *out = g->pending[i];
            g->pending[i] = g->pending[--g->npending];
            return true;
        }
    return false;
}

/* Give back the connections that ended without MHD's STARTED notification: MHD (0.9.72 on) only
 * queues a connection in MHD_add_connection and sets it up on its own thread later; when that
 * fails (its connection limit, a pool allocation) it closes the fd and notifies nothing. Such an
 * entry's fd is closed or now names another file. An entry whose fd still names its socket is
 * waiting for STARTED, which runs before MHD closes the fd and claims the entry under mu. Run by
 * the accept thread before each admission, so a uid is never refused for connections it no
 * longer holds. */
static void gate_sweep(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    for (size_t i = g->npending; i-- > 0;) {
        struct pending_conn *p = &g->pending[i];
        struct stat st;
        if (fstat(p->fd, &st) == 0 && st.st_dev == p->dev && st.st_ino == p->ino)
            continue;
        gate_give_locked(g, p->uid, p->admin);
        *p = g->pending[--g->npending];
    }
    pthread_mutex_unlock(&g->mu);
}

/* Test builds: does [TIERD_TEST_FAULT_FILE] say "api lose uid UID" (a line)? Then the gate
 * closes that uid's admitted connections itself instead of handing them to MHD, as MHD does
 * when it cannot set up a queued connection: no STARTED and no CLOSED notification. */
static bool fault_lose(const struct tierd *d, uid_t uid)
{
    if (!d->test_fault_file)
        return false;
    char buf[256], want[48];
    int fd = open(d->test_fault_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    snprintf(want, sizeof(want), "api lose uid %u\n", (unsigned)uid);
    return strstr(buf, want) != NULL;
}

static void linger_drop(struct gate *g, size_t i)
{
    close(g->linger[i].fd);
    g->linger[i] = g->linger[--g->nlinger];
}

/* Answer a refused connection in one write (it is fresh: its socket buffer takes these few hundred
 * bytes), then linger on it (gate_main closes it); its request is read only to be dropped. */
static void gate_refuse(struct tierd_api *a, int fd, uid_t uid, unsigned st)
{
    const struct tierd_config *cfg = &a->d->cfg;
    char body[320], msg[640];
    if (st == 429)
        snprintf(body, sizeof(body),
                 "{\"error\":\"uid %u holds %d connections to the API socket, its most ([api] "
                 "max_connections_per_uid): close one or wait for one to end\",\"errno\":"
                 "\"EBUSY\"}",
                 (unsigned)uid, cfg->api_max_connections_per_uid);
    else
        snprintf(body, sizeof(body),
                 "{\"error\":\"the API socket's connections for users other than administrators "
                 "are all taken ([api] max_connections - admin_connections = %d); try again\","
                 "\"errno\":\"EBUSY\"}",
                 cfg->api_max_connections - cfg->api_admin_connections);
    int n =
        snprintf(msg, sizeof(msg),
                 "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: "
                 "%zu\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s",
                 st, st == 429 ? "Too Many Requests" : "Service Unavailable", strlen(body), body);
    if (n > 0 && send(fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1,
                      MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* the peer is gone or its buffer is full: closing is the answer */
    }
    shutdown(fd, SHUT_WR);
    struct gate *g = &a->gate;
    if (g->nlinger == GATE_LINGER_MAX) { /* the oldest goes: a flood costs no more descriptors */
        size_t old = 0;
        for (size_t i = 1; i < g->nlinger; i++)
            if (g->linger[i].until_ns < g->linger[old].until_ns)
                old = i;
        linger_drop(g, old);
    }
    g->linger[g->nlinger].fd = fd;
    g->linger[g->nlinger].until_ns = tier_now_mono_ns() + GATE_LINGER_NS;
    g->nlinger++;
}

/* Read what lingering peers sent (dropped); close those that closed or whose time is up. */
static void linger_service(struct gate *g, const struct pollfd *pf, uint64_t now)
{
    /* pf[k] is linger[k] as they were polled; walk down so that linger_drop's move of the last
     * entry into slot k touches only entries already handled */
    for (size_t k = g->nlinger; k-- > 0;) {
        bool done = now >= g->linger[k].until_ns;
        if (!done && pf[k].revents) {
            char buf[512];
            ssize_t n = recv(g->linger[k].fd, buf, sizeof(buf), MSG_DONTWAIT);
            done = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
        }
        if (done)
            linger_drop(g, k);
    }
}

/* One accepted Unix-socket connection: admit it to MHD or refuse it. */
static void gate_admit(struct tierd_api *a, int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
        close(fd);
        return;
    }
    bool admin = cred_admin(a->d, fd, &cr), log_it = false;
    gate_sweep(&a->gate);
    unsigned st = gate_take(a, cr.uid, admin, &log_it);
    if (st) {
        if (log_it && st == 429)
            log_warn("api: uid %u (pid %d) holds [api] max_connections_per_uid = %d connections "
                     "to %s; its further connections are refused (429) until one ends",
                     (unsigned)cr.uid, (int)cr.pid, a->d->cfg.api_max_connections_per_uid,
                     a->socket_path);
        else if (log_it)
            log_warn("api: %s has no connection left for uid %u (pid %d): refused (503); "
                     "[api] max_connections = %d, of which admin_connections = %d only for "
                     "administrators",
                     a->socket_path, (unsigned)cr.uid, (int)cr.pid, a->d->cfg.api_max_connections,
                     a->d->cfg.api_admin_connections);
        gate_refuse(a, fd, cr.uid, st);
        return;
    }
    /* The share is given back by whoever ends the pending entry: MHD's CLOSED notification
     * after STARTED claimed it, gate_sweep when MHD dropped it unannounced, or the refusal
     * below. Never by MHD_add_connection's result alone: libmicrohttpd before 0.9.72 sends
     * STARTED and CLOSED before it answers MHD_NO for a thread it could not start. */
    struct gate *g = &a->gate;
    struct stat fst;
    if (fstat(fd, &fst) != 0) {
        gate_give(g, cr.uid, admin);
        close(fd);
        return;
    }
    pthread_mutex_lock(&g->mu);
    g->pending[g->npending++] = (struct pending_conn){
        .fd = fd, .dev = fst.st_dev, .ino = fst.st_ino, .uid = cr.uid, .admin = admin};
    pthread_mutex_unlock(&g->mu);
    if (fault_lose(a->d, cr.uid)) {
        close(fd);
        return;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (MHD_add_connection(a->unix_l.mhd, fd, (const struct sockaddr *)&sa, sizeof(sa)) !=
        MHD_YES) {
        /* MHD closed fd; unless its notifications already ended the entry, no STARTED comes */
        struct pending_conn p;
        pthread_mutex_lock(&g->mu);
        if (pending_claim(g, fd, &p))
            gate_give_locked(g, p.uid, p.admin);
        pthread_mutex_unlock(&g->mu);
    }
}

static void *gate_main(void *arg)
{
    struct tierd_api *a = arg;
    struct gate *g = &a->gate;
    struct pollfd pf[2 + GATE_LINGER_MAX];
    for (;;) {
        pf[0] = (struct pollfd){.fd = a->unix_l.fd, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = g->stop_pipe[0], .events = POLLIN};
        uint64_t now = tier_now_mono_ns(), next = UINT64_MAX;
        for (size_t k = 0; k < g->nlinger; k++) {
            pf[2 + k] = (struct pollfd){.fd = g->linger[k].fd, .events = POLLIN};
            if (g->linger[k].until_ns < next)
                next = g->linger[k].until_ns;
        }
        int timeout_ms = next == UINT64_MAX ? -1
                         : next <= now      ? 0
                                            : (int)((next - now) / TIER_NS_PER_MS + 1);
        size_t polled = g->nlinger;
        if (poll(pf, 2 + polled, timeout_ms) < 0) {
            if (errno == EINTR)
                continue;
            log_err("api: poll of %s failed: %s; the socket takes no more connections",
                    a->socket_path, strerror(errno));
            break;
        }
        if (pf[1].revents)
            break;
        linger_service(g, pf + 2, tier_now_mono_ns());
        if (!(pf[0].revents & POLLIN))
            continue;
        int fd = accept4(a->unix_l.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            gate_admit(a, fd);
        } else if (errno == EMFILE || errno == ENFILE) {
            /* out of descriptors: wait for one to be closed rather than spin */
            struct pollfd only_stop = pf[1];
            (void)poll(&only_stop, 1, 100);
            if (only_stop.revents)
                break;
        }
    }
    return NULL;
}

/* MHD's notification of a Unix-socket connection starting and closing (on MHD's threads). */
static void gate_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe)
{
    struct listener *l = cls;
    struct tierd_api *a = l->api;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = NULL;
        int fd = conn_fd(c);
        struct pending_conn p;
        struct gate *g = &a->gate;
        pthread_mutex_lock(&g->mu);
        bool counted = fd >= 0 && pending_claim(g, fd, &p);
        pthread_mutex_unlock(&g->mu);
        if (!counted) { /* not admitted by gate_admit (no such path): serve nothing uncounted */
            if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
            return;
        }
        struct conn_info *ci = malloc(sizeof(*ci));
        if (!ci) { /* nothing to give its share back with at the close: give it now, end it */
            gate_give(g, p.uid, p.admin);
            shutdown(fd, SHUT_RDWR);
            return;
        }
        ci->uid = p.uid;
        ci->admin = p.admin;
        *socket_context = ci;
        if (!ci->admin)
            MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                                      (unsigned int)(a->d->cfg.api_user_timeout_ms / 1000));
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct conn_info *ci = *socket_context;
        if (ci) {
            gate_give(&a->gate, ci->uid, ci->admin);
            free(ci);
            *socket_context = NULL;
        }
    }
}

void api_conn_stats(const struct tierd *d, struct api_conn_stats *out)
{
    memset(out, 0, sizeof(*out));
    struct tierd_api *a = __atomic_load_n(&d->api, __ATOMIC_ACQUIRE);
    if (!a) /* gate.mu lives from tierd_api_start to the end of tierd_api_stop */
        return;
    pthread_mutex_lock(&a->gate.mu);
    out->admin = a->gate.admins;
    out->user = a->gate.users;
    out->user_uids = (int)a->gate.nuids;
    out->refused = a->gate.refused;
    pthread_mutex_unlock(&a->gate.mu);
}

static int gate_start(struct tierd_api *a)
{
    struct gate *g = &a->gate;
    g->cap_uids = (size_t)a->d->cfg.api_max_connections;
    g->uids = calloc(g->cap_uids, sizeof(*g->uids));
    g->pending = calloc(g->cap_uids, sizeof(*g->pending));
    if (!g->uids || !g->pending)
        return -ENOMEM;
    if (pipe2(g->stop_pipe, O_CLOEXEC) != 0)
        return -errno;
    int rc = pthread_create(&g->thread, NULL, gate_main, a);
    if (rc) {
        tier_err_set("cannot start the API socket's accept thread: %s", strerror(rc));
        return -rc;
    }
    g->started = true;
    return 0;
}

/* Ends the accept thread (no new connection reaches MHD after it returns). */
static void gate_stop(struct gate *g)
{
    if (g->started) {
        close(g->stop_pipe[1]);
        g->stop_pipe[1] = -1;
        pthread_join(g->thread, NULL);
        g->started = false;
    }
}

static void gate_fini(struct gate *g)
{
    while (g->nlinger > 0)
        linger_drop(g, g->nlinger - 1);
    for (int i = 0; i < 2; i++)
        if (g->stop_pipe[i] >= 0)
            close(g->stop_pipe[i]);
    free(g->uids);
    free(g->pending);
    pthread_mutex_destroy(&g->mu);
}

/* ---- listeners ------------------------------------------------------------------------- */

static int mkdir_parent(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    int rc = 0;
    char *slash = strrchr(p, '/');
    if (slash && slash != p) {
        *slash = '\0';
        for (char *s = p + 1;; s++) {
            if (*s == '/' || *s == '\0') {
                char ch = *s;
                *s = '\0';
                if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                    rc = -errno;
                    break;
                }
                *s = ch;
                if (ch == '\0')
                    break;
            }
        }
    }
    free(p);
    return rc;
}

/* The directory of the socket must not let another user replace the socket: owned by root or
 * tierd's user, and not writable by group or others unless sticky (like /tmp). */
static int check_parent(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) { /* a symlink to a directory (/var/run -> /run) is fine */
        int rc = -errno;
        tier_err_set("cannot inspect %s, the directory of the API socket: %s", dir, strerror(-rc));
        return rc;
    }
    if (!S_ISDIR(st.st_mode)) {
        tier_err_set("%s, the directory of the API socket, is not a directory: fix [api] socket",
                     dir);
        return -ENOTDIR;
    }
    bool owner_ok = st.st_uid == 0 || st.st_uid == geteuid();
    bool open_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(st.st_mode & S_ISVTX);
    if (!owner_ok || open_write) {
        tier_err_set("%s, the directory of the API socket, is owned by uid %u with mode %04o: "
                     "another user could replace the socket; use a directory owned by root or "
                     "tierd's user (uid %u) that only its owner may write, like /run/tierd",
                     dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return -EPERM;
    }
    return 0;
}

static int bind_unix(const struct tierd_config *cfg, int *fd_out)
{
    const char *path = cfg->api_socket;
    struct sockaddr_un sa, tmp_sa;
    memset(&sa, 0, sizeof(sa));
    memset(&tmp_sa, 0, sizeof(tmp_sa));
    sa.sun_family = AF_UNIX;
    tmp_sa.sun_family = AF_UNIX;
    /* the private directory beside the socket: "<dir>/.tierd-XXXXXX/s" */
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 0;
    char dir[sizeof(sa.sun_path)], tmpdir[sizeof(sa.sun_path) + 16], tmpsock[sizeof(tmpdir) + 2];
    size_t limit = sizeof(sa.sun_path) - 1 - strlen("/.tierd-XXXXXX/s");
    if (tier_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) >= sizeof(sa.sun_path) || dl > limit) {
        tier_err_set("[api] socket path %s is too long (its directory may have at most %zu bytes)",
                     path, limit);
        return -ENAMETOOLONG;
    }
    if (dl == 0)
        snprintf(dir, sizeof(dir), "%s", slash ? "/" : ".");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)dl, path);
    int rc = mkdir_parent(path);
    if (rc) {
        tier_err_set("cannot create the directory of the API socket %s: %s", path, strerror(-rc));
        return rc;
    }
    rc = check_parent(dir);
    if (rc)
        return rc;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            tier_err_set("%s exists and is not a socket: remove it or change [api] socket", path);
            return -EEXIST;
        }
        /* a socket left by a crashed tierd: refuse only if something still answers on it */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0) {
            if (connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
                close(probe);
                tier_err_set("another tierd is listening on %s; stop it or change [api] socket",
                             path);
                return -EADDRINUSE;
            }
            close(probe);
        }
    }
    snprintf(tmpdir, sizeof(tmpdir), "%s/.tierd-XXXXXX", dir);
    if (!mkdtemp(tmpdir)) {
        rc = -errno;
        tier_err_set("cannot create a private directory in %s for the API socket: %s", dir,
                     strerror(-rc));
        return rc;
    }
    snprintf(tmpsock, sizeof(tmpsock), "%s/s", tmpdir);
    tier_strlcpy(tmp_sa.sun_path, tmpsock, sizeof(tmp_sa.sun_path)); /* fits: dl <= limit */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        rmdir(tmpdir);
        return rc;
    }
    const char *step = "bind";
    if (bind(fd, (struct sockaddr *)&tmp_sa, sizeof(tmp_sa)) != 0)
        goto fail;
    step = "chmod 0660";
    if (chmod(tmp_sa.sun_path, 0660) != 0)
        goto fail;
    step = "chown to [api] socket_group";
    if (cfg->api_socket_gid >= 0 && chown(tmp_sa.sun_path, (uid_t)-1, (gid_t)cfg->api_socket_gid))
        goto fail;
    step = "listen";
    if (listen(fd, 64) != 0)
        goto fail;
    step = "rename into place";
    if (rename(tmp_sa.sun_path, path) != 0)
        goto fail;
    rmdir(tmpdir);
    *fd_out = fd;
    return 0;
fail:
    rc = -errno;
    tier_err_set("cannot listen on %s (%s): %s", path, step, strerror(-rc));
    close(fd);
    unlink(tmp_sa.sun_path);
    rmdir(tmpdir);
    return rc;
}

static int start_listener(struct tierd_api *a, struct listener *l, int fd)
{
    const struct tierd_config *cfg = &a->d->cfg;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC;
    struct MHD_OptionItem opts[7];
    size_t n = 0;
    /* the Unix socket's bound is gate_take's. MHD counts a connection until its polling thread
     * has joined the connection's thread, well after gate_notify gave its share back: its own
     * limit sits far above, so that it never refuses one the gate admitted (gate_sweep would
     * give such a one back, but its client would get no answer) */
    int limit = l->tcp ? cfg->api_max_connections : 4 * cfg->api_max_connections + 64;
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, (intptr_t)limit, NULL};
    if (l->tcp) {
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                            (intptr_t)cfg->api_max_connections_per_ip, NULL};
        if (a->tls_cert_pem) {
            flags |= MHD_USE_TLS;
            opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, a->tls_cert_pem};
            opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, a->tls_key_pem};
        }
    }
    if (l->tcp) {
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, fd, NULL};
    } else {
        /* gate_main accepts; MHD serves what it admits */
        flags |= MHD_USE_NO_LISTEN_SOCKET;
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)gate_notify, l};
    }
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    l->fd = fd;
    l->mhd = MHD_start_daemon(flags, 0, NULL, NULL, handle, l, MHD_OPTION_NOTIFY_COMPLETED,
                              completed, l, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60,
                              MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!l->mhd) {
        tier_err_set("cannot start the HTTP server of the control API%s",
                     l->tcp && a->tls_cert_pem ? " (check [api] tls_cert and tls_key: a PEM "
                                                 "certificate and its private key)"
                                               : "");
        return -EIO;
    }
    return 0;
}

int tierd_api_start(struct tierd *d, struct tierd_api **out)
{
    struct tierd_api *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->d = d;
    a->unix_l.api = a;
    a->unix_l.fd = -1;
    a->tcp_l.api = a;
    a->tcp_l.fd = -1;
    a->tcp_l.tcp = true;
    pthread_mutex_init(&a->gate.mu, NULL);
    a->gate.stop_pipe[0] = a->gate.stop_pipe[1] = -1;
    /* for api_conn_stats before *out is set (main() passes &d->api as out) */
    __atomic_store_n(&d->api, a, __ATOMIC_RELEASE);
    int fd = -1;
    int rc = bind_unix(&d->cfg, &fd);
    if (rc)
        goto fail;
    a->socket_path = strdup(d->cfg.api_socket);
    rc = start_listener(a, &a->unix_l, fd);
    if (rc) {
        close(fd);
        a->unix_l.fd = -1;
        goto fail;
    }
    rc = gate_start(a);
    if (rc)
        goto fail;
    if (d->cfg.api_tcp) {
        if (!d->cfg.api_token) {
            rc = -EINVAL;
            tier_err_set("[api] tcp needs a token");
            goto fail;
        }
        if (d->cfg.api_tls_cert) {
            if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
                rc = -ENOTSUP;
                tier_err_set("[api] tls_cert is set but this libmicrohttpd has no TLS support");
                goto fail;
            }
            rc = tier_read_pem("[api] tls_cert =", d->cfg.api_tls_cert, false, &a->tls_cert_pem);
            if (rc == 0)
                rc = tier_read_pem("[api] tls_key =", d->cfg.api_tls_key, true, &a->tls_key_pem);
            if (rc)
                goto fail;
        }
        rc = tier_listen_tcp("[api] tcp =", d->cfg.api_tcp, AF_UNSPEC, &fd, NULL);
        if (rc)
            goto fail;
        rc = start_listener(a, &a->tcp_l, fd);
        if (rc) {
            close(fd);
            goto fail;
        }
    }
    log_info("api: listening on %s%s%s%s", d->cfg.api_socket, d->cfg.api_tcp ? " and tcp " : "",
             d->cfg.api_tcp ? d->cfg.api_tcp : "", a->tls_cert_pem ? " (TLS)" : "");
    if (*out != a)
        *out = a;
    return 0;
fail:
    tierd_api_stop(a);
    return rc;
}

void tierd_api_stop(struct tierd_api *a)
{
    if (!a)
        return;
    gate_stop(&a->gate);
    struct listener *ls[] = {&a->tcp_l, &a->unix_l};
    for (size_t i = 0; i < 2; i++) {
        /* MHD closes the listen socket it was given (TCP); the Unix one is ours */
        if (ls[i]->mhd)
            MHD_stop_daemon(ls[i]->mhd);
        ls[i]->mhd = NULL;
    }
    if (a->unix_l.fd >= 0)
        close(a->unix_l.fd);
    if (__atomic_load_n(&a->d->api, __ATOMIC_ACQUIRE) == a)
        __atomic_store_n(&a->d->api, NULL, __ATOMIC_RELEASE);
    if (a->socket_path) {
        unlink(a->socket_path);
        free(a->socket_path);
    }
    gate_fini(&a->gate);
    free(a->tls_cert_pem);
    if (a->tls_key_pem) {
        explicit_bzero(a->tls_key_pem, strlen(a->tls_key_pem));
        free(a->tls_key_pem);
    }
    free(a);
}
