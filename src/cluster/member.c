/* SPDX-License-Identifier: Apache-2.0 */
/*
 * member.c - cluster membership in Ceph RADOS (member.h): the compare-and-swap writes, the lock
 * renewal, the watch, the periodic re-read that removes lapsed members, and self-fencing.
 *
 * THE OBJECT tierd.cluster.NAME (in the caller's pool)
 *   omap "epoch"    20 decimal digits, +1 on every change; every write compares it first
 *   omap "node.ID"  member_entry JSON of each member
 *   lock "node.ID"  exclusive, cookie = the entry's incarnation, duration = the lease
 *   watchers        every member; a writer notifies after each change
 *   any other key is no member's and is left alone; a key with a NUL in it too (read_all() does
 *   not take "node.x\0junk" for node.x's entry, nor "epoch\0x" for the epoch)
 *
 * STATES of one member (m->state, under m->mu; FENCED is not stored: it is JOINED with the last
 * renewal older than lease/2, which member_may_serve() reads off the clock):
 *
 *     OUT --join--> JOINED --no renewal for lease/2--> FENCED --renewed--> JOINED
 *                     |  ^                               |
 *                     |  +-------- rejoin (new          | renewal answers -ENOENT
 *                     |            incarnation) ----- LAPSED <--------+
 *                     +--leave / abandon--> OUT (thread stopped)
 *
 * TRANSITION -> FUNCTION
 *   OUT to JOINED: object ensured, lock taken, watch, entry added     member_join()
 *   JOINED: lock renewed lease/3 after the last renewal (the first:  renew()
 *     lease/3 after the join took it), must still be held
 *   JOINED to FENCED and back: the clock against the last renewal     member_may_serve()
 *   JOINED or FENCED to LAPSED: the renewal answers -ENOENT           renew()
 *   LAPSED to JOINED: a new incarnation, lock taken, entry rewritten  rejoin()
 *   a notify or lease/2 passed: read all, remove lapsed entries,      reread() -> reap_plan()
 *     restore its own entry while it may serve (M2)
 *   a watch error: watch again; after a failure not before lease/10,  rewatch()
 *     doubling up to lease/2
 *   to OUT: entry removed, lock released, watch dropped               member_leave()
 *   to OUT without a trace (tests: a crash)                           member_abandon()
 *
 * INVARIANTS
 *   M1  Every change of the omap compares the epoch read with it and writes epoch + 1 in the same
 *       write op (cas_write()): two writers never both succeed from one epoch.
 *   M2  A member writes its entry only while it holds its lock (right after taking it, on a join
 *       or a rejoin; on a re-read only while its last successful renewal is younger than lease/2,
 *       so renewals failing for longer, the lock perhaps gone, write nothing) and removes its
 *       entry before it releases the lock, so an entry without a live lock belongs to a member
 *       that is gone or lapsed, and any member may remove it.
 *   M3  A member serves peers only while its last successful renewal (timed from before the call)
 *       is younger than lease/2; the others remove it no earlier than the lease after that
 *       renewal: it stops serving before anyone can place its blocks elsewhere.
 *   M4  No lock (m->mu) is held across a librados call.
 *   M5  Notifies are hints: a member re-reads every lease/2 and after a watch error too.
 *   M6  A re-read looks at the locks of the entries that follow its own key in key order, until
 *       REAP_LIVE of them are held (reap_plan()): every entry whose lock is gone follows some
 *       live member at a distance of fewer than REAP_LIVE live entries, so it is removed by the
 *       next re-read of that member (while any member lives).
 */
#include "cluster/member.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strutil.h"

#define OBJ_PREFIX "tierd.cluster."
#define KEY_PREFIX "node."
#define EPOCH_KEY "epoch"
#define CAS_TRIES 100
#define PAGE 1000
#define REAP_LIVE 3 /* live entries after its own whose locks a re-read looks at (M6) */

enum mstate { M_JOINED, M_LAPSED };

struct member {
    rados_ioctx_t io;
    char oid[sizeof(OBJ_PREFIX) + 128];
    char key[sizeof(KEY_PREFIX) + MEMBER_ID_MAX]; /* node.ID: omap key and lock name */
    struct member_conf conf;                      /* strings point into id/addr below */
    char id[MEMBER_ID_MAX + 1], addr[MEMBER_ADDR_MAX + 1], name[128];
    pthread_t thread;
    uint64_t watch; /* the watch handle (member thread; 0: none) */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    /* under mu */
    enum mstate state;
    uint64_t incarnation;
    int64_t last_renew_ms; /* monotonic, taken before the successful lock call */
    bool stop, paused, reread, rewatch;
    struct member_entry *view;
    size_t nview;
    uint64_t epoch;
    /* read_all()'s callers: the member's thread, or member_join() and member_leave() while there
     * is none */
    bool told_nul_key;             /* a key with a NUL in it was logged once */
    uint64_t rereads, lock_checks; /* under mu: reap_plan()'s calls and the locks they read */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t new_incarnation(uint64_t before)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t v = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return v > before ? v : before + 1;
}

/* ---- the omap ------------------------------------------------------------------------------- */

struct raw {
    char key[sizeof(KEY_PREFIX) + MEMBER_ID_MAX + 8];
    bool valid; /* the value parsed (e) */
    struct member_entry e;
};

/* Where the page after `key` (klen bytes) starts, as the C string start_after that librados
 * takes: the key itself, or for a key with a NUL in it, its part before the NUL and "\x01" (after
 * every key that shares that part up to a NUL; only the key written exactly so is passed over,
 * and it ends in a byte no member's key holds). NULL: -ENOMEM. */
static char *page_after(const char *key, size_t klen)
{
    const char *nul = memchr(key, '\0', klen);
    if (nul == NULL)
        return strndup(key, klen);
    size_t l = (size_t)(nul - key);
    char *s = malloc(l + 2);
    if (s != NULL) {
        memcpy(s, key, l);
        s[l] = '\x01';
        s[l + 1] = '\0';
    }
    return s;
}

/* Every node.* entry and the epoch, in one read per page. *out is malloc'd. A key with a NUL in
 * it is no member's and is not read as the C string before its NUL: "node.x\0junk" is not
 * node.x's entry (which the re-read would remove again and again, each time writing a new
 * epoch), "epoch\0x" not the epoch (which would fail every compare-and-swap). */
static int read_all(struct member *m, uint64_t *epoch, struct raw **out, size_t *n)
{
    struct raw *v = NULL;
    size_t cnt = 0, cap = 0;
    char *after = NULL; /* where the next page starts (page_after()) */
    bool have_epoch = false;
    int rc = 0;
    for (bool more = true; more && rc == 0;) {
        rados_read_op_t op = rados_create_read_op();
        rados_omap_iter_t it = NULL;
        unsigned char pmore = 0;
        int prval = 0;
        rados_read_op_omap_get_vals2(op, after ? after : "", "", PAGE, &it, &pmore, &prval);
        rc = rados_read_op_operate(op, m->io, m->oid, 0);
        if (rc == 0 && prval < 0)
            rc = prval;
        char *k, *val;
        size_t klen, vlen;
        while (rc == 0 && rados_omap_get_next2(it, &k, &val, &klen, &vlen) == 0 && k != NULL) {
            free(after);
            if ((after = page_after(k, klen)) == NULL) {
                rc = -ENOMEM;
                break;
            }
            if (memchr(k, '\0', klen) != NULL) {
                if (!m->told_nul_key) {
                    log_debug("%s: omap key \"%s\" has a NUL in it (at byte %zu of %zu): ignored",
                              m->oid, k, strlen(k), klen);
                    m->told_nul_key = true;
                }
                continue;
            }
            if (klen == strlen(EPOCH_KEY) && memcmp(k, EPOCH_KEY, klen) == 0) {
                char num[32];
                size_t l = vlen < sizeof(num) - 1 ? vlen : sizeof(num) - 1;
                memcpy(num, val, l);
                num[l] = '\0';
                have_epoch = tier_parse_u64(num, epoch) == 0;
                continue;
            }
            /* Not ours, or longer than any key a member writes. */
            if (klen < strlen(KEY_PREFIX) || memcmp(k, KEY_PREFIX, strlen(KEY_PREFIX)) != 0 ||
                klen >= sizeof(v->key))
                continue;
            if (cnt == cap) {
                size_t nc = cap ? cap * 2 : 16;
                struct raw *nv = realloc(v, nc * sizeof(*nv));
                if (nv == NULL) {
                    rc = -ENOMEM;
                    break;
                }
                v = nv;
                cap = nc;
            }
            struct raw *r = &v[cnt++];
            memcpy(r->key, k, klen);
            r->key[klen] = '\0';
            r->valid = member_entry_parse(val, vlen, &r->e) == 0 &&
                       strcmp(r->key + strlen(KEY_PREFIX), r->e.id) == 0;
        }
        if (it != NULL)
            rados_omap_get_end(it);
        rados_release_read_op(op);
        more = pmore != 0;
    }
    free(after);
    if (rc == 0 && !have_epoch)
        rc = -EIO; /* not an object member_join() made */
    if (rc < 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* One compare-and-swap: if the epoch is still `epoch`, set it to epoch + 1, set `set_val` under
 * this member's key (when not NULL) and remove rm[0..nrm). 0, -ECANCELED (someone wrote first),
 * or a librados error. */
static int cas_write(struct member *m, uint64_t epoch, const char *set_val, const char **rm,
                     size_t nrm)
{
    char old[24], new[24];
    snprintf(old, sizeof(old), "%020" PRIu64, epoch);
    snprintf(new, sizeof(new), "%020" PRIu64, epoch + 1);
    const char *keys[2] = {EPOCH_KEY, m->key};
    const char *vals[2] = {new, set_val};
    size_t lens[2] = {20, set_val ? strlen(set_val) : 0};
    rados_write_op_t op = rados_create_write_op();
    int cmp = 0;
    rados_write_op_omap_cmp(op, EPOCH_KEY, LIBRADOS_CMPXATTR_OP_EQ, old, 20, &cmp);
    rados_write_op_omap_set(op, keys, vals, lens, set_val ? 2 : 1);
    if (nrm > 0)
        rados_write_op_omap_rm_keys(op, rm, nrm);
    int rc = rados_write_op_operate(op, m->io, m->oid, NULL, 0);
    rados_release_write_op(op);
    if (rc == 0 && cmp < 0)
        rc = cmp;
    return rc;
}

/* Tells the watchers (a hint: M5). Waits at most a second for their acks. */
static void notify(struct member *m)
{
    char *reply = NULL;
    size_t reply_len = 0;
    if (rados_notify2(m->io, m->oid, "", 0, 1000, &reply, &reply_len) >= 0 || reply != NULL)
        rados_buffer_free(reply);
}

static int self_json(struct member *m, uint64_t incarnation, char *buf, size_t size)
{
    struct member_entry e = {.weight = m->conf.weight, .incarnation = incarnation};
    tier_strlcpy(e.id, m->id, sizeof(e.id));
    tier_strlcpy(e.addr, m->addr, sizeof(e.addr));
    ssize_t n = member_entry_format(&e, buf, size);
    return n < 0 ? (int)n : 0;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct member_entry *)a)->id, ((const struct member_entry *)b)->id);
}

/* Publishes the valid entries of v as the view at epoch. */
static void publish(struct member *m, const struct raw *v, size_t n, uint64_t epoch)
{
    struct member_entry *e = malloc((n ? n : 1) * sizeof(*e));
    if (e == NULL)
        return; /* the old view stays; the next re-read tries again */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].valid)
            e[k++] = v[i].e;
    qsort(e, k, sizeof(*e), cmp_entry);
    pthread_mutex_lock(&m->mu);
    free(m->view);
    m->view = e;
    m->nview = k;
    m->epoch = epoch;
    pthread_mutex_unlock(&m->mu);
}

/* Writes this member's entry (incarnation inc) or removes it (inc 0), retrying lost races. */
static int write_self(struct member *m, uint64_t inc)
{
    char json[512];
    if (inc != 0) {
        int rc = self_json(m, inc, json, sizeof(json));
        if (rc < 0)
            return rc;
    }
    const char *rm[1] = {m->key};
    for (int t = 0; t < CAS_TRIES; t++) {
        struct raw *v;
        size_t n;
        uint64_t epoch;
        int rc = read_all(m, &epoch, &v, &n);
        if (rc < 0)
            return rc;
        free(v);
        rc = inc != 0 ? cas_write(m, epoch, json, NULL, 0) : cas_write(m, epoch, NULL, rm, 1);
        if (rc != -ECANCELED)
            return rc;
    }
    return -EAGAIN;
}

/* ---- the lock ------------------------------------------------------------------------------- */

static int lock_take(struct member *m, uint64_t inc, uint8_t flags)
{
    char cookie[24];
    snprintf(cookie, sizeof(cookie), "%" PRIu64, inc);
    struct timeval dur = {.tv_sec = m->conf.lease_ms / 1000,
                          .tv_usec = (suseconds_t)(m->conf.lease_ms % 1000) * 1000};
    return rados_lock_exclusive(m->io, m->oid, m->key, cookie, "tierd member", &dur, flags);
}

/* How many hold the lock of the entry keyed `key` (expired lockers are trimmed by the OSD when
 * it reads them); a negative errno when that cannot be told. */
static ssize_t lockers(struct member *m, const char *key)
{
    int excl = 0;
    char tag[128], clients[512], cookies[512], addrs[512];
    size_t tl = sizeof(tag), cl = sizeof(clients), kl = sizeof(cookies), al = sizeof(addrs);
    ssize_t n = rados_list_lockers(m->io, m->oid, key, &excl, tag, &tl, clients, &cl, cookies, &kl,
                                   addrs, &al);
    if (n == -ENOENT || n == -ENODATA)
        return 0; /* never locked */
    return n == -ERANGE ? 1 : n;
}

/* Under m->mu: JOINED, and the last successful renewal younger than lease/2 (M3). The lock then
 * has at least lease/2 left (the OSD counts the lease from after that renewal's start). */
static bool may_serve_locked(struct member *m)
{
    return m->state == M_JOINED && mono_ms() - m->last_renew_ms < (int64_t)m->conf.lease_ms / 2;
}

/* JOINED: renews the lock; -ENOENT (it lapsed) makes the member LAPSED. */
static void renew(struct member *m)
{
    pthread_mutex_lock(&m->mu);
    uint64_t inc = m->incarnation;
    pthread_mutex_unlock(&m->mu);
    int64_t t = mono_ms();
    int rc = lock_take(m, inc, LIBRADOS_LOCK_FLAG_MUST_RENEW);
    pthread_mutex_lock(&m->mu);
    if (rc == 0)
        m->last_renew_ms = t;
    else if (rc == -ENOENT)
        m->state = M_LAPSED;
    pthread_mutex_unlock(&m->mu);
}

/* LAPSED: joins again with a new incarnation (the old one may be removed by now, or soon). */
static void rejoin(struct member *m)
{
    pthread_mutex_lock(&m->mu);
    uint64_t inc = new_incarnation(m->incarnation);
    pthread_mutex_unlock(&m->mu);
    int64_t t = mono_ms();
    if (lock_take(m, inc, 0) != 0)
        return; /* stays LAPSED: tried again at the next renewal time */
    pthread_mutex_lock(&m->mu);
    m->incarnation = inc;
    m->last_renew_ms = t;
    pthread_mutex_unlock(&m->mu);
    if (write_self(m, inc) == 0) {
        pthread_mutex_lock(&m->mu);
        m->state = M_JOINED;
        pthread_mutex_unlock(&m->mu);
        notify(m);
    }
}

/* ---- re-reading ----------------------------------------------------------------------------- */

static int cmp_raw_key(const void *a, const void *b)
{
    return strcmp(((const struct raw *)a)->key, ((const struct raw *)b)->key);
}

/* What a re-read must change: the keys of entries whose lock is gone (M2) into rm (their count
 * returned), and whether this member's own entry must be (re)written. v is sorted by key here.
 *
 * Not every lock is looked at: only those of the entries after this member's key in key order
 * (a ring: after the last comes the first), walked until REAP_LIVE of them hold their lock or
 * the walk is back at this member (M6). So a re-read costs each member REAP_LIVE lock reads
 * plus one per lapsed entry it passes, not one per member (1,000 members re-reading every
 * lease/2 would otherwise read a million locks of one object per half lease). Every lapsed
 * entry is still seen: the nearest live member before it in the ring walks past it, since
 * lapsed entries do not count towards REAP_LIVE; and it is removed within one re-read period. */
static size_t reap_plan(struct member *m, struct raw *v, size_t n, uint64_t inc, const char **rm,
                        bool *write_own)
{
    size_t k = 0, start = 0;
    *write_own = inc != 0;
    qsort(v, n, sizeof(*v), cmp_raw_key);
    while (start < n && strcmp(v[start].key, m->key) <= 0) {
        if (strcmp(v[start].key, m->key) == 0 && v[start].valid && v[start].e.incarnation == inc)
            *write_own = false;
        start++;
    }
    unsigned live = 0;
    uint64_t checks = 0;
    for (size_t j = 0; j < n && live < REAP_LIVE; j++) {
        const struct raw *e = &v[(start + j) % n];
        if (strcmp(e->key, m->key) == 0)
            break; /* around the ring: every other entry was looked at */
        checks++;
        if (lockers(m, e->key) == 0)
            rm[k++] = e->key;
        else
            live++;
    }
    pthread_mutex_lock(&m->mu);
    m->lock_checks += checks;
    m->rereads++;
    pthread_mutex_unlock(&m->mu);
    return k;
}

/* Reads the members, removes those whose lock is gone, restores this member's own entry if a
 * race removed it, and publishes the view. */
static void reread(struct member *m)
{
    for (int t = 0; t < CAS_TRIES; t++) {
        struct raw *v;
        size_t n;
        uint64_t epoch;
        if (read_all(m, &epoch, &v, &n) < 0)
            return; /* the view stays; the next re-read tries again */
        pthread_mutex_lock(&m->mu);
        /* Only a member that holds its lock writes its own entry (M2): one whose renewals have
         * failed for lease/2 may have lost it. */
        uint64_t inc = may_serve_locked(m) ? m->incarnation : 0;
        pthread_mutex_unlock(&m->mu);
        const char **rm = malloc((n ? n : 1) * sizeof(*rm));
        if (rm == NULL) {
            free(v);
            return;
        }
        bool own;
        size_t nrm = reap_plan(m, v, n, inc, rm, &own);
        if (nrm == 0 && !own) {
            publish(m, v, n, epoch);
            free(rm);
            free(v);
            return;
        }
        char json[512];
        int rc = own ? self_json(m, inc, json, sizeof(json)) : 0;
        if (rc == 0)
            rc = cas_write(m, epoch, own ? json : NULL, rm, nrm);
        free(rm);
        free(v);
        if (rc == 0)
            notify(m); /* then read back what was written, and publish it */
        else if (rc != -ECANCELED)
            return;
    }
}

/* ---- the watch and the thread --------------------------------------------------------------- */

static void on_notify(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id,
                      void *data, size_t data_len)
{
    (void)notifier_id;
    (void)data;
    (void)data_len;
    struct member *m = arg;
    pthread_mutex_lock(&m->mu);
    m->reread = true;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->mu);
    rados_notify_ack(m->io, m->oid, notify_id, handle, NULL, 0);
}

static void on_watch_error(void *arg, uint64_t cookie, int err)
{
    (void)cookie;
    (void)err;
    struct member *m = arg;
    pthread_mutex_lock(&m->mu);
    m->reread = m->rewatch = true; /* notifies may have been missed (M5) */
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->mu);
}

/* Drops the watch and watches again: 0 or a librados error (then there is no watch). */
static int rewatch(struct member *m)
{
    if (m->watch != 0)
        rados_unwatch2(m->io, m->watch);
    m->watch = 0;
    int rc = rados_watch2(m->io, m->oid, &m->watch, on_notify, on_watch_error, m);
    if (rc < 0)
        m->watch = 0;
    return rc;
}

static void wait_until(struct member *m, int64_t when_ms)
{
    int64_t now = mono_ms();
    if (when_ms <= now)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + (when_ms - now) % 1000 * 1000000;
    ts.tv_sec += (when_ms - now) / 1000 + ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&m->cond, &m->mu, &ts);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The member's thread: renews lease/3 after the last successful renewal (so the first one
 * lease/3 after member_join() took the lock: at once if the join took longer), and lease/3
 * after a failed one; rejoins when LAPSED; re-reads every lease/2 and on a notify; re-watches
 * after a watch error, and after a failed re-watch not before lease/10, doubling up to lease/2
 * while it keeps failing. Paused (tests), it does nothing. */
static void *member_main(void *arg)
{
    struct member *m = arg;
    int64_t lease = m->conf.lease_ms, next_read = mono_ms() + lease / 2, next_watch = 0,
            watch_backoff = lease / 10;
    pthread_mutex_lock(&m->mu);
    int64_t next_renew = m->last_renew_ms + lease / 3;
    while (!m->stop) {
        int64_t now = mono_ms();
        if (m->paused) {
            wait_until(m, now + lease / 10);
            continue;
        }
        bool do_renew = now >= next_renew, do_read = m->reread || now >= next_read;
        bool do_watch = m->rewatch && now >= next_watch, lapsed = m->state == M_LAPSED;
        if (!do_renew && !do_read && !do_watch) {
            int64_t when = min64(next_renew, next_read);
            wait_until(m, m->rewatch ? min64(when, next_watch) : when);
            continue;
        }
        m->reread = false;
        if (do_watch)
            m->rewatch = false;
        pthread_mutex_unlock(&m->mu); /* M4 */
        if (do_watch) {
            if (rewatch(m) < 0) {
                next_watch = mono_ms() + watch_backoff;
                watch_backoff = min64(watch_backoff * 2, lease / 2);
                pthread_mutex_lock(&m->mu);
                m->rewatch = true;
                pthread_mutex_unlock(&m->mu);
            } else {
                watch_backoff = lease / 10;
            }
        }
        if (do_renew) {
            if (lapsed)
                rejoin(m);
            else
                renew(m);
            pthread_mutex_lock(&m->mu);
            int64_t last = m->last_renew_ms;
            pthread_mutex_unlock(&m->mu);
            /* A failure leaves last where it was: the next try is lease/3 after this one. */
            next_renew = (last > now ? last : now) + lease / 3;
        }
        if (do_read) {
            reread(m);
            next_read = now + lease / 2;
        }
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* ---- the API -------------------------------------------------------------------------------- */

/* The object with epoch 0, unless it exists. */
static int ensure_object(struct member *m)
{
    const char *keys[1] = {EPOCH_KEY};
    const char *vals[1] = {"00000000000000000000"};
    size_t lens[1] = {20};
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
    rados_write_op_omap_set(op, keys, vals, lens, 1);
    int rc = rados_write_op_operate(op, m->io, m->oid, NULL, 0);
    rados_release_write_op(op);
    return rc == -EEXIST ? 0 : rc;
}

static void member_free(struct member *m)
{
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cond);
    free(m->view);
    free(m);
}

static int member_new(rados_ioctx_t io, const struct member_conf *conf, struct member **out)
{
    if (conf->cluster == NULL || conf->id == NULL || !member_id_valid(conf->id) ||
        !member_id_valid(conf->cluster) || conf->lease_ms < 300 || !(conf->weight > 0))
        return -EINVAL;
    struct member *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->io = io;
    m->conf = *conf;
    tier_strlcpy(m->id, conf->id, sizeof(m->id));
    if (tier_strlcpy(m->addr, conf->addr ? conf->addr : "", sizeof(m->addr)) >= sizeof(m->addr)) {
        free(m);
        return -EINVAL;
    }
    tier_strlcpy(m->name, conf->cluster, sizeof(m->name));
    m->conf.id = m->id;
    m->conf.addr = m->addr;
    m->conf.cluster = m->name;
    snprintf(m->oid, sizeof(m->oid), OBJ_PREFIX "%s", conf->cluster);
    snprintf(m->key, sizeof(m->key), KEY_PREFIX "%s", conf->id);
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    *out = m;
    return 0;
}

int member_join(rados_ioctx_t io, const struct member_conf *conf, struct member **out)
{
    struct member *m;
    int rc = member_new(io, conf, &m);
    if (rc < 0)
        return rc;
    char probe[512];
    m->incarnation = new_incarnation(0);
    if ((rc = self_json(m, m->incarnation, probe, sizeof(probe))) < 0)
        goto fail;
    if ((rc = ensure_object(m)) < 0)
        goto fail;
    int64_t t = mono_ms();
    if ((rc = lock_take(m, m->incarnation, 0)) < 0)
        goto fail;
    m->last_renew_ms = t;
    if ((rc = rados_watch2(io, m->oid, &m->watch, on_notify, on_watch_error, m)) < 0)
        goto fail_unlock;
    if ((rc = write_self(m, m->incarnation)) < 0)
        goto fail_unwatch;
    m->state = M_JOINED;
    notify(m);
    reread(m);
    if ((rc = -pthread_create(&m->thread, NULL, member_main, m)) < 0)
        goto fail_entry;
    *out = m;
    return 0;
fail_entry:
    write_self(m, 0);
fail_unwatch:
    rados_unwatch2(io, m->watch);
    rados_watch_flush(rados_ioctx_get_cluster(io));
fail_unlock : {
    char cookie[24];
    snprintf(cookie, sizeof(cookie), "%" PRIu64, m->incarnation);
    rados_unlock(io, m->oid, m->key, cookie);
}
fail:
    member_free(m);
    return rc;
}

/* Stops the thread and the watch: no callback runs after it returns. */
static void stop(struct member *m)
{
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    if (m->watch != 0)
        rados_unwatch2(m->io, m->watch);
    rados_watch_flush(rados_ioctx_get_cluster(m->io));
}

void member_leave(struct member *m)
{
    if (m == NULL)
        return;
    stop(m);
    /* M2: the entry goes before the lock. */
    write_self(m, 0);
    char cookie[24];
    snprintf(cookie, sizeof(cookie), "%" PRIu64, m->incarnation);
    rados_unlock(m->io, m->oid, m->key, cookie);
    notify(m);
    member_free(m);
}

void member_abandon(struct member *m)
{
    if (m == NULL)
        return;
    stop(m);
    member_free(m);
}

int member_view(struct member *m, struct member_entry **out, size_t *n, uint64_t *epoch)
{
    pthread_mutex_lock(&m->mu);
    struct member_entry *v = malloc((m->nview ? m->nview : 1) * sizeof(*v));
    if (v == NULL) {
        pthread_mutex_unlock(&m->mu);
        return -ENOMEM;
    }
    if (m->nview > 0)
        memcpy(v, m->view, m->nview * sizeof(*v));
    *out = v;
    *n = m->nview;
    *epoch = m->epoch;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

bool member_may_serve(struct member *m)
{
    pthread_mutex_lock(&m->mu);
    bool ok = may_serve_locked(m);
    pthread_mutex_unlock(&m->mu);
    return ok;
}

void member_reap_stats(struct member *m, uint64_t *rereads, uint64_t *lock_checks)
{
    pthread_mutex_lock(&m->mu);
    *rereads = m->rereads;
    *lock_checks = m->lock_checks;
    pthread_mutex_unlock(&m->mu);
}

int64_t member_last_renew_ms(struct member *m)
{
    pthread_mutex_lock(&m->mu);
    int64_t v = m->last_renew_ms;
    pthread_mutex_unlock(&m->mu);
    return v;
}

uint64_t member_incarnation(struct member *m)
{
    pthread_mutex_lock(&m->mu);
    uint64_t v = m->incarnation;
    pthread_mutex_unlock(&m->mu);
    return v;
}

void member_pause(struct member *m, bool paused)
{
    pthread_mutex_lock(&m->mu);
    m->paused = paused;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->mu);
}
