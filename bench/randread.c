/* SPDX-License-Identifier: Apache-2.0 */
/*
 * randread.c - closed-loop random O_DIRECT preads of a fixed size over a set of files, for
 * bench/telemetry_ramhit.sh (issue 10: RAM-hit 4 KiB reads through the mount, telemetry on vs
 * off).
 *
 *     randread SECONDS THREADS BLOCK FILE...
 *
 * Every file is opened O_DIRECT by every thread (on a FUSE mount the kernel then sends each
 * pread to the daemon as one READ: no page cache, no readahead). Each thread reads BLOCK bytes at
 * a block-aligned offset drawn uniformly from a file drawn uniformly (xorshift, seeded per
 * thread), back to back, for SECONDS. A short read or an error stops the run with exit 1.
 * Prints one line: "reads=N seconds=S reads_per_s=R us_per_read=U" (U is THREADS / R in µs).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 4096
#define MAX_THREADS 64

static int nfiles;
static const char *paths[MAX_FILES];
static uint64_t sizes[MAX_FILES];
static size_t block;
static double run_s;

struct thr {
    pthread_t th;
    unsigned idx;
    uint64_t reads;
    int err;
    char msg[256];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *thr_main(void *arg)
{
    struct thr *t = arg;
    int fds[MAX_FILES];
    void *buf = NULL;
    int opened = 0;
    if (posix_memalign(&buf, 4096, block)) {
        t->err = ENOMEM;
        snprintf(t->msg, sizeof(t->msg), "out of memory");
        return NULL;
    }
    for (; opened < nfiles; opened++) {
        fds[opened] = open(paths[opened], O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fds[opened] < 0) {
            t->err = errno;
            snprintf(t->msg, sizeof(t->msg), "open %s O_DIRECT: %s", paths[opened],
                     strerror(errno));
            goto out;
        }
    }
    uint64_t x = 0x9e3779b97f4a7c15ULL * (t->idx + 1);
    double end = now_s() + run_s;
    for (;;) {
        /* check the clock every 64 reads: a clock_gettime is ~20 ns, a read ~10 µs */
        if ((t->reads & 63) == 0 && now_s() >= end)
            break;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned f = (unsigned)(x % (uint64_t)nfiles);
        uint64_t nblk = sizes[f] / block;
        uint64_t off = ((x >> 20) % nblk) * block;
        ssize_t n = pread(fds[f], buf, block, (off_t)off);
        if (n != (ssize_t)block) {
            t->err = n < 0 ? errno : EIO;
            snprintf(t->msg, sizeof(t->msg), "pread %s at %llu: %s", paths[f],
                     (unsigned long long)off, n < 0 ? strerror(errno) : "short read");
            goto out;
        }
        t->reads++;
    }
out:
    for (int i = 0; i < opened; i++)
        close(fds[i]);
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: randread SECONDS THREADS BLOCK FILE...\n");
        return 2;
    }
    run_s = atof(argv[1]);
    int threads = atoi(argv[2]);
    block = (size_t)strtoull(argv[3], NULL, 10);
    nfiles = argc - 4;
    if (run_s <= 0 || threads < 1 || threads > MAX_THREADS || block < 512 || block % 512 ||
        nfiles > MAX_FILES) {
        fprintf(stderr,
                "randread: SECONDS > 0, THREADS 1..%d, BLOCK a multiple of 512, at most "
                "%d files\n",
                MAX_THREADS, MAX_FILES);
        return 2;
    }
    for (int i = 0; i < nfiles; i++) {
        struct stat st;
        paths[i] = argv[4 + i];
        if (stat(paths[i], &st) != 0 || (uint64_t)st.st_size < block) {
            fprintf(stderr, "randread: %s: missing or smaller than one block\n", paths[i]);
            return 2;
        }
        sizes[i] = (uint64_t)st.st_size;
    }
    struct thr t[MAX_THREADS];
    memset(t, 0, sizeof(t));
    double t0 = now_s();
    for (int i = 0; i < threads; i++) {
        t[i].idx = (unsigned)i;
        if (pthread_create(&t[i].th, NULL, thr_main, &t[i]) != 0) {
            fprintf(stderr, "randread: cannot start thread %d\n", i);
            return 1;
        }
    }
    uint64_t total = 0;
    int rc = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i].th, NULL);
        total += t[i].reads;
        if (t[i].err) {
            fprintf(stderr, "randread: thread %d: %s\n", i, t[i].msg);
            rc = 1;
        }
    }
    double el = now_s() - t0;
    if (rc)
        return rc;
    double rps = (double)total / el;
    printf("reads=%llu seconds=%.3f reads_per_s=%.0f us_per_read=%.2f\n", (unsigned long long)total,
           el, rps, rps > 0 ? 1e6 * threads / rps : 0.0);
    return 0;
}
