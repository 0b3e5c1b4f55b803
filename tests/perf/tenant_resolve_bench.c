/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant_resolve_bench.c - what a pid-cache hit of tenant_resolve costs (every FUSE request
 * resolves its caller, src/fuse/fuse_session.c): this process's pid and one thread's id,
 * resolved over and over after the first (cached) resolution, with pidfds (the default: one
 * epoll_wait(0) and a shard lock) and with pidfd_off (each hit reads /proc/<pid>/stat, the
 * check pidfds replaced); then two threads at once, each resolving its own thread id; and the
 * system calls a pidfd check could use, alone: poll() of one pidfd, pidfd_send_signal(sig 0),
 * epoll_wait(0) on a set of pidfds none of which is ready, and open+read+close of
 * /proc/<pid>/stat. Median of RUNS runs each.
 *
 *   tenant_resolve_bench [ITERS] [RUNS]    ITERS calls per run (default 200,000), RUNS (5)
 *
 * Results: docs/BENCHMARKS.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "tenant/tenant.h"

static unsigned long g_iters = 200000;
static uid_t g_uid; /* read once: getuid() is a system call of its own */
static gid_t g_gid;
static int g_runs = 5;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void report(const char *what, double *v)
{
    double lo = v[0], hi = v[0];
    for (int i = 1; i < g_runs; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    printf("%-58s median %8.1f ns (min %.1f, max %.1f; %d runs x %lu)\n", what, median(v, g_runs),
           lo, hi, g_runs, g_iters);
}

static struct tenant_reg *reg_new(bool pidfd_off)
{
    struct tenant_reg_config c = {.pidfd_off = pidfd_off};
    struct tenant_reg *r = NULL;
    if (tenant_reg_new(&c, &r) != 0) {
        fprintf(stderr, "tenant_reg_new failed\n");
        exit(1);
    }
    return r;
}

/* ns per tenant_resolve of pid, after a first call that fills the cache */
static double resolve_loop(struct tenant_reg *r, pid_t pid)
{
    (void)tenant_resolve(r, pid, g_uid, g_gid);
    uint64_t t0 = tier_now_mono_ns();
    for (unsigned long i = 0; i < g_iters; i++)
        (void)tenant_resolve(r, pid, g_uid, g_gid);
    return (double)(tier_now_mono_ns() - t0) / (double)g_iters;
}

static uint64_t hits(struct tenant_reg *r)
{
    struct tenant_stats st;
    tenant_stats_get(r, &st);
    return st.cache_hits;
}

/* A run whose calls were not all cache hits measured something else: say so and stop. */
static void check_hits(struct tenant_reg *r, uint64_t before, uint64_t want)
{
    uint64_t got = hits(r) - before;
    if (got != want) {
        fprintf(stderr, "%llu of %llu calls were cache hits\n", (unsigned long long)got,
                (unsigned long long)want);
        exit(1);
    }
}

/* ---- a thread that resolves its own id -------------------------------------------------- */

struct worker {
    struct tenant_reg *r;
    pthread_barrier_t *go;
    pid_t tid;
    double ns;
};

static void *worker_main(void *p)
{
    struct worker *w = p;
    w->tid = gettid();
    pthread_barrier_wait(w->go);
    w->ns = resolve_loop(w->r, w->tid);
    return NULL;
}

/* ns per cached resolve on each of nthreads threads at once (their mean) */
static double threads_run(struct tenant_reg *r, int nthreads)
{
    pthread_t th[2];
    struct worker w[2];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        w[i] = (struct worker){.r = r, .go = &go};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    uint64_t before = hits(r);
    pthread_barrier_wait(&go);
    double sum = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        sum += w[i].ns;
    }
    pthread_barrier_destroy(&go);
    check_hits(r, before, (uint64_t)nthreads * g_iters);
    return sum / nthreads;
}

/* ---- the bare system calls ---------------------------------------------------------------- */

enum sc { SC_POLL, SC_SIGNAL, SC_EPOLL, SC_STAT };

static double syscall_run(enum sc which, int pidfd, int epfd)
{
    struct epoll_event ev[64];
    char buf[1024], path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)getpid());
    uint64_t t0 = tier_now_mono_ns();
    for (unsigned long i = 0; i < g_iters; i++) {
        switch (which) {
        case SC_POLL: {
            struct pollfd p = {.fd = pidfd, .events = POLLIN};
            if (poll(&p, 1, 0) != 0)
                return -1;
            break;
        }
        case SC_SIGNAL:
            if (pidfd_send_signal(pidfd, 0, NULL, 0) != 0)
                return -1;
            break;
        case SC_EPOLL:
            if (epoll_wait(epfd, ev, 64, 0) != 0)
                return -1;
            break;
        case SC_STAT: {
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
                return -1;
            close(fd);
            break;
        }
        }
    }
    return (double)(tier_now_mono_ns() - t0) / (double)g_iters;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        g_iters = strtoul(argv[1], NULL, 10);
    if (argc > 2)
        g_runs = atoi(argv[2]) > 0 ? atoi(argv[2]) : 5;
    if (g_iters == 0 || g_runs > 64) {
        fprintf(stderr, "usage: tenant_resolve_bench [ITERS>0] [RUNS<=64]\n");
        return 2;
    }
    g_uid = getuid();
    g_gid = getgid();
    double v[64];
    struct tenant_reg *fast = reg_new(false), *slow = reg_new(true);

    struct {
        const char *what;
        struct tenant_reg *r;
    } pids[] = {
        {"resolve, cached, own pid, start-time check (pidfd_off)", slow},
        {"resolve, cached, own pid, pidfd check", fast},
    };
    for (size_t c = 0; c < sizeof(pids) / sizeof(pids[0]); c++) {
        (void)tenant_resolve(pids[c].r, getpid(), g_uid, g_gid); /* every run: hits */
        for (int i = 0; i < g_runs; i++) {
            uint64_t before = hits(pids[c].r);
            v[i] = resolve_loop(pids[c].r, getpid());
            check_hits(pids[c].r, before, g_iters + 1);
        }
        report(pids[c].what, v);
    }
    struct {
        const char *what;
        struct tenant_reg *r;
        int n;
    } thr[] = {
        {"resolve, cached, 1 thread's tid, start-time check", slow, 1},
        {"resolve, cached, 1 thread's tid, pidfd check", fast, 1},
        {"resolve, cached, 2 threads at once, start-time check", slow, 2},
        {"resolve, cached, 2 threads at once, pidfd check", fast, 2},
    };
    for (size_t c = 0; c < sizeof(thr) / sizeof(thr[0]); c++) {
        for (int i = 0; i < g_runs; i++)
            v[i] = threads_run(thr[c].r, thr[c].n);
        report(thr[c].what, v);
    }
    /* the bare calls, on a pidfd of this process; the epoll set holds 4,096 pidfds (the
     * default pid_cache, all dup()s of it) where the fd limit allows */
    int pidfd = pidfd_open(getpid(), 0);
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    int nwatch = 0;
    for (; pidfd >= 0 && epfd >= 0 && nwatch < 4096; nwatch++) {
        int d = dup(pidfd);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)nwatch};
        if (d < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, d, &ev) != 0) {
            if (d >= 0)
                close(d);
            break;
        }
    }
    if (pidfd < 0 || epfd < 0) {
        fprintf(stderr, "pidfd_open or epoll_create1: %s\n", strerror(errno));
        return 1;
    }
    char ew[80];
    snprintf(ew, sizeof(ew), "epoll_wait(0), %d pidfds watched, none ready", nwatch);
    struct {
        const char *what;
        enum sc which;
    } sc[] = {
        {"poll() of one pidfd, timeout 0", SC_POLL},
        {"pidfd_send_signal(pidfd, 0)", SC_SIGNAL},
        {ew, SC_EPOLL},
        {"open+read+close /proc/<pid>/stat", SC_STAT},
    };
    for (size_t c = 0; c < sizeof(sc) / sizeof(sc[0]); c++) {
        for (int i = 0; i < g_runs; i++)
            v[i] = syscall_run(sc[c].which, pidfd, epfd);
        report(sc[c].what, v);
    }
    tenant_reg_free(fast);
    tenant_reg_free(slow);
    return 0;
}
