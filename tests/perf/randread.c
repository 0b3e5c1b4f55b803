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
 *
 *     randread --ab SECONDS BLOCK CHUNK FILE_A... -- FILE_B...
 *
 * One thread compares two file sets (two mounts) side by side: rounds of CHUNK reads of set A
 * and CHUNK reads of set B, the order ABBA (A first in even rounds, B first in odd ones), each
 * half timed, for SECONDS. Disturbances slower than a round (other load on the machine) hit
 * both halves alike. Prints "rounds=N a_reads_per_s=RA b_reads_per_s=RB ratio_median=M
 * ratio_q1=Q1 ratio_q3=Q3 ratio_min=MIN ratio_max=MAX", ratio = A's reads/s / B's, per round.
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

/* ---- --ab: two file sets side by side ---------------------------------------------------- */

struct fset {
    int n;
    int fds[MAX_FILES];
    uint64_t sizes[MAX_FILES];
};

static int fset_open(struct fset *fs, char **names, int n)
{
    fs->n = n;
    for (int i = 0; i < n; i++) {
        struct stat st;
        fs->fds[i] = open(names[i], O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fs->fds[i] < 0 || fstat(fs->fds[i], &st) != 0 || (uint64_t)st.st_size < block) {
            fprintf(stderr, "randread: %s: cannot open O_DIRECT, or smaller than one block\n",
                    names[i]);
            return -1;
        }
        fs->sizes[i] = (uint64_t)st.st_size;
    }
    return 0;
}

/* CHUNK reads of fs; seconds taken, or -1 on a failed or short read. */
static double fset_chunk(const struct fset *fs, void *buf, unsigned chunk, uint64_t *x)
{
    double t0 = now_s();
    for (unsigned i = 0; i < chunk; i++) {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        unsigned f = (unsigned)(*x % (uint64_t)fs->n);
        uint64_t off = ((*x >> 20) % (fs->sizes[f] / block)) * block;
        if (pread(fs->fds[f], buf, block, (off_t)off) != (ssize_t)block) {
            fprintf(stderr, "randread: pread at %llu: %s\n", (unsigned long long)off,
                    strerror(errno));
            return -1;
        }
    }
    return now_s() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int main_ab(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: randread --ab SECONDS BLOCK CHUNK FILE_A... -- FILE_B...\n");
        return 2;
    }
    run_s = atof(argv[2]);
    block = (size_t)strtoull(argv[3], NULL, 10);
    unsigned chunk = (unsigned)atoi(argv[4]);
    int sep = -1;
    for (int i = 5; i < argc; i++)
        if (strcmp(argv[i], "--") == 0)
            sep = i;
    int na = sep - 5, nb = argc - sep - 1;
    if (run_s <= 0 || block < 512 || block % 512 || chunk < 1 || sep < 0 || na < 1 || nb < 1 ||
        na > MAX_FILES || nb > MAX_FILES) {
        fprintf(stderr, "randread --ab: SECONDS > 0, BLOCK a multiple of 512, CHUNK >= 1, two "
                        "non-empty file sets split by --\n");
        return 2;
    }
    static struct fset a, b;
    void *buf = NULL;
    if (fset_open(&a, argv + 5, na) || fset_open(&b, argv + sep + 1, nb) ||
        posix_memalign(&buf, 4096, block))
        return 1;
    size_t cap = 1 << 20, n = 0;
    double *ratio = malloc(cap * sizeof(double));
    if (!ratio)
        return 1;
    uint64_t xa = 0x9e3779b97f4a7c15ULL, xb = xa; /* the same offsets on both sides */
    double ta = 0, tb = 0, end = now_s() + run_s;
    while (now_s() < end && n < cap) {
        double da, db;
        if (n % 2 == 0) {
            da = fset_chunk(&a, buf, chunk, &xa);
            db = da < 0 ? -1 : fset_chunk(&b, buf, chunk, &xb);
        } else {
            db = fset_chunk(&b, buf, chunk, &xb);
            da = db < 0 ? -1 : fset_chunk(&a, buf, chunk, &xa);
        }
        if (da < 0 || db < 0)
            return 1;
        ta += da;
        tb += db;
        ratio[n++] = db / da; /* reads/s of A over reads/s of B */
    }
    if (n == 0) {
        fprintf(stderr, "randread --ab: no round in %g s\n", run_s);
        return 1;
    }
    qsort(ratio, n, sizeof(double), cmp_double);
    printf("rounds=%zu a_reads_per_s=%.0f b_reads_per_s=%.0f ratio_median=%.4f ratio_q1=%.4f "
           "ratio_q3=%.4f ratio_min=%.4f ratio_max=%.4f\n",
           n, (double)n * chunk / ta, (double)n * chunk / tb, ratio[n / 2], ratio[n / 4],
           ratio[(3 * n) / 4], ratio[0], ratio[n - 1]);
    free(ratio);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--ab") == 0)
        return main_ab(argc, argv);
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
