/* SPDX-License-Identifier: Apache-2.0 */
/*
 * checkpoint_bench.c - the checkpoint burst buffer's numbers (issue 5, Performance). Run by
 * bench/checkpoint.sh, which starts a private RGW (and, for the through-the-mount figures, tierd);
 * results go to docs/bench/checkpoint.md.
 *
 * One checkpoint = FILES files of FILE_MIB MiB each, written in WRITE_KIB KiB writes from a fixed
 * pseudo-random buffer (the same bytes in every mode). Modes (--mode, may be repeated):
 *   posix   write(2) each file into --dir, fsync, close: the writer's time until its last close
 *           returns. Used for the local-disk baseline and, with --dir on the tierd mount, for the
 *           writer through FUSE into a write-back namespace.
 *   direct  each file straight to S3 as one multipart upload (PART_MIB parts, --direct-threads
 *           parts in flight, 1 = a single stream), until the last complete returns.
 *   engine  the write-back engine without FUSE: wb_open (spool in --dir) over the S3 backend,
 *           wb_file_create / wb_write / wb_file_close per file (durability local), then
 *           wb_wait: time to the last close, and time until everything is durable in S3.
 *   engine-noupload  the same writes to a backend the engine does not know, so nothing is
 *           uploaded: the write path alone, without the upload competing for disk and cores.
 * direct and engine check afterwards that every object exists with the right size, then delete
 * the objects (the test cluster's OSD is small).
 *
 * Usage: checkpoint_bench --env FILE [--dir DIR] [--files 8] [--file-mib 256] [--write-kib 1024]
 *                         [--part-mib 8] [--direct-threads 1] [--upload-threads 2]
 *                         [--parts-parallel 4] --mode posix|direct|engine|engine-noupload ...
 * Output: one line per mode, "mode=... seconds=... mib_s=..." (engine adds durable_s).
 * Single-threaded apart from the direct mode's part workers and the engine's uploaders.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/err.h"
#include "common/strutil.h"
#include "common/timeutil.h"
#include "s3env.h"
#include "tiers/backend.h"
#include "writeback/wb.h"

#define MIB (1024ULL * 1024ULL)
#define DATA_BYTES (64 * MIB) /* the pseudo-random source; files read it cyclically */

struct opts {
    const char *env_path, *dir;
    int files, direct_threads, upload_threads, parts_parallel;
    uint64_t file_bytes, write_bytes, part_bytes;
};

static unsigned char *g_data;

static double secs_since(uint64_t t0)
{
    return (double)(tier_now_mono_ns() - t0) / 1e9;
}

/* The bytes at offset off of every file (one write or part, len <= DATA_BYTES): a pointer into
 * the cyclic source. Write and part sizes that divide DATA_BYTES (powers of two up to 64 MiB)
 * never wrap, so every mode writes exactly the same bytes; a range that would wrap starts at 0. */
static const unsigned char *file_bytes(int i, uint64_t off, uint64_t len)
{
    (void)i;
    uint64_t start = off % DATA_BYTES;
    if (start + len > DATA_BYTES)
        start = 0;
    return g_data + start;
}

static void print_result(const char *mode, const struct opts *o, double s, const char *extra)
{
    double mib = (double)o->file_bytes * o->files / (double)MIB;
    printf("mode=%s files=%d file_mib=%.0f seconds=%.3f mib_s=%.1f%s\n", mode, o->files,
           (double)o->file_bytes / (double)MIB, s, mib / s, extra ? extra : "");
    fflush(stdout);
}

/* ---- posix: write + fsync + close into a directory ------------------------------------------ */

static int run_posix(const struct opts *o)
{
    char path[4096];
    uint64_t t0 = tier_now_mono_ns();
    uint64_t write_ns = 0, fsync_ns = 0, close_ns = 0; /* where the writer's time goes */
    for (int i = 0; i < o->files; i++) {
        snprintf(path, sizeof(path), "%s/file%02d.bin", o->dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "open %s: %s\n", path, strerror(errno));
            return -errno;
        }
        for (uint64_t off = 0; off < o->file_bytes; off += o->write_bytes) {
            uint64_t len =
                o->file_bytes - off < o->write_bytes ? o->file_bytes - off : o->write_bytes;
            const unsigned char *p = file_bytes(i, off, len);
            size_t done = 0;
            uint64_t tw = tier_now_mono_ns();
            while (done < len) {
                ssize_t n = write(fd, p + done, len - done);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0) {
                    int e = n < 0 ? errno : EIO;
                    fprintf(stderr, "write %s: %s\n", path, strerror(e));
                    close(fd);
                    return -e;
                }
                done += (size_t)n;
            }
            write_ns += tier_now_mono_ns() - tw;
        }
        uint64_t tf = tier_now_mono_ns();
        int frc = fsync(fd);
        uint64_t tc = tier_now_mono_ns();
        int crc = close(fd);
        fsync_ns += tc - tf;
        close_ns += tier_now_mono_ns() - tc;
        if (frc != 0 || crc != 0) {
            fprintf(stderr, "fsync/close %s: %s\n", path, strerror(errno));
            return -errno;
        }
    }
    char extra[128];
    snprintf(extra, sizeof(extra), " write_s=%.3f fsync_s=%.3f close_s=%.3f",
             (double)write_ns / 1e9, (double)fsync_ns / 1e9, (double)close_ns / 1e9);
    print_result("posix", o, secs_since(t0), extra);
    return 0;
}

/* ---- direct: one multipart upload per file -------------------------------------------------- */

struct direct_file {
    struct backend *be;
    const struct opts *o;
    int file;
    const char *key, *upload_id;
    struct backend_part *parts;
    int nparts;
    atomic_int next;
    atomic_int err;
};

static void *direct_worker(void *arg)
{
    struct direct_file *df = arg;
    for (;;) {
        int p = atomic_fetch_add(&df->next, 1);
        if (p >= df->nparts || atomic_load(&df->err))
            return NULL;
        uint64_t off = (uint64_t)p * df->o->part_bytes;
        uint64_t len = df->o->file_bytes - off < df->o->part_bytes ? df->o->file_bytes - off
                                                                   : df->o->part_bytes;
        df->parts[p].number = p + 1;
        int rc = backend_mpu_put_part(df->be, NULL, df->key, df->upload_id, p + 1,
                                      file_bytes(df->file, off, len), len, df->parts[p].etag);
        if (rc) {
            fprintf(stderr, "part %d of %s: %s (%s)\n", p + 1, df->key, strerror(-rc),
                    tier_err_msg());
            atomic_store(&df->err, rc);
        }
    }
}

static int check_objects(struct backend *be, const struct opts *o, const char *dir)
{
    for (int i = 0; i < o->files; i++) {
        char key[256];
        snprintf(key, sizeof(key), "%s/file%02d.bin", dir, i);
        struct backend_stat st;
        int rc = backend_stat(be, NULL, key, &st);
        if (rc || st.size_bytes != o->file_bytes) {
            fprintf(stderr, "check: %s: %s, size %llu (want %llu)\n", key,
                    rc ? strerror(-rc) : "ok", (unsigned long long)(rc ? 0 : st.size_bytes),
                    (unsigned long long)o->file_bytes);
            return rc ? rc : -EIO;
        }
    }
    /* delete them again: the test cluster's OSD is 10 GiB and a run writes several checkpoints */
    for (int i = 0; i < o->files; i++) {
        char key[256];
        snprintf(key, sizeof(key), "%s/file%02d.bin", dir, i);
        backend_del(be, NULL, key);
    }
    return 0;
}

static int run_direct(struct backend *be, const struct opts *o)
{
    int nparts = (int)((o->file_bytes + o->part_bytes - 1) / o->part_bytes);
    struct backend_part *parts = calloc((size_t)nparts, sizeof(*parts));
    pthread_t *th = calloc((size_t)o->direct_threads, sizeof(*th));
    int rc = 0;
    if (!parts || !th) {
        rc = -ENOMEM;
        goto out;
    }
    uint64_t t0 = tier_now_mono_ns();
    for (int i = 0; i < o->files && rc == 0; i++) {
        char key[256];
        char *upload_id = NULL;
        snprintf(key, sizeof(key), "direct/file%02d.bin", i);
        rc = backend_mpu_create(be, NULL, key, &upload_id);
        if (rc) {
            fprintf(stderr, "mpu_create %s: %s\n", key, tier_err_msg());
            break;
        }
        struct direct_file df = {.be = be,
                                 .o = o,
                                 .file = i,
                                 .key = key,
                                 .upload_id = upload_id,
                                 .parts = parts,
                                 .nparts = nparts};
        int started = 0;
        for (; started < o->direct_threads; started++)
            if (pthread_create(&th[started], NULL, direct_worker, &df) != 0)
                break;
        for (int t = 0; t < started; t++)
            pthread_join(th[t], NULL);
        rc = started == 0 ? -EAGAIN : atomic_load(&df.err);
        if (rc == 0)
            rc = backend_mpu_complete(be, NULL, key, upload_id, parts, (size_t)nparts, NULL);
        if (rc) {
            fprintf(stderr, "upload %s: %s\n", key, tier_err_msg());
            backend_mpu_abort(be, NULL, key, upload_id);
        }
        free(upload_id);
    }
    if (rc == 0) {
        char extra[64];
        snprintf(extra, sizeof(extra), " parts_in_flight=%d part_mib=%.0f", o->direct_threads,
                 (double)o->part_bytes / (double)MIB);
        print_result("direct", o, secs_since(t0), extra);
        rc = check_objects(be, o, "direct");
    }
out:
    free(parts);
    free(th);
    return rc;
}

/* ---- engine: wb_* without FUSE -------------------------------------------------------------- */

static struct backend *resolve_one(void *ctx, const char *name)
{
    return strcmp(name, "s3") == 0 ? ctx : NULL;
}

/* no_upload: the files go to a backend name the resolver does not know, so the uploaders leave
 * them sealed: the writer's path alone (write, fsync, SHA-256, journal), without the upload's
 * competition for the disk and the cores. */
static int run_engine(struct backend *be, const struct opts *o, bool no_upload)
{
    struct wb_config cfg = {
        .spool_dir = o->dir,
        .resolve = resolve_one,
        .resolve_ctx = be,
        .upload_threads = o->upload_threads,
        .parts_parallel = o->parts_parallel,
        .part_size_bytes = o->part_bytes,
        .retention_keep = -1,
        .durability = WB_DURABILITY_LOCAL,
    };
    struct wb *wb = NULL;
    int rc = wb_open(&cfg, &wb);
    if (rc) {
        fprintf(stderr, "wb_open %s: %s (%s)\n", o->dir, strerror(-rc), tier_err_msg());
        return rc;
    }
    const char *bname = no_upload ? "nowhere" : "s3";
    uint64_t t0 = tier_now_mono_ns(), close_ns = 0;
    for (int i = 0; i < o->files && rc == 0; i++) {
        char key[256];
        snprintf(key, sizeof(key), "engine/file%02d.bin", i);
        struct wb_file *fh = NULL;
        rc = wb_file_create(wb, bname, key, &fh);
        for (uint64_t off = 0; rc == 0 && off < o->file_bytes; off += o->write_bytes) {
            uint64_t len =
                o->file_bytes - off < o->write_bytes ? o->file_bytes - off : o->write_bytes;
            ssize_t n = wb_write(fh, file_bytes(i, off, len), len, (off_t)off);
            rc = n < 0 ? (int)n : (uint64_t)n == len ? 0 : -EIO;
        }
        if (fh) {
            uint64_t tc = tier_now_mono_ns();
            int crc = wb_file_close(fh);
            close_ns += tier_now_mono_ns() - tc;
            rc = rc ? rc : crc;
        }
        if (rc)
            fprintf(stderr, "engine %s: %s (%s)\n", key, strerror(-rc), tier_err_msg());
    }
    double local_s = secs_since(t0);
    if (rc == 0 && no_upload) {
        char extra[64];
        snprintf(extra, sizeof(extra), " close_s=%.3f (no upload)", (double)close_ns / 1e9);
        print_result("engine-noupload", o, local_s, extra);
        wb_close(wb);
        return 0;
    }
    if (rc == 0)
        rc = wb_wait(wb, "s3", "engine/", -1);
    double durable_s = secs_since(t0);
    if (rc == 0) {
        char extra[128];
        snprintf(extra, sizeof(extra),
                 " close_s=%.3f durable_s=%.3f upload_threads=%d parts_parallel=%d part_mib=%.0f",
                 (double)close_ns / 1e9, durable_s, o->upload_threads, o->parts_parallel,
                 (double)o->part_bytes / (double)MIB);
        print_result("engine", o, local_s, extra);
        rc = check_objects(be, o, "engine");
    }
    wb_close(wb);
    return rc;
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct option lopts[] = {{"env", required_argument, NULL, 'e'},
                                          {"dir", required_argument, NULL, 'd'},
                                          {"files", required_argument, NULL, 'f'},
                                          {"file-mib", required_argument, NULL, 's'},
                                          {"write-kib", required_argument, NULL, 'w'},
                                          {"part-mib", required_argument, NULL, 'p'},
                                          {"direct-threads", required_argument, NULL, 't'},
                                          {"upload-threads", required_argument, NULL, 'u'},
                                          {"parts-parallel", required_argument, NULL, 'P'},
                                          {"mode", required_argument, NULL, 'm'},
                                          {0, 0, 0, 0}};
    struct opts o = {.files = 8,
                     .direct_threads = 1,
                     .upload_threads = 2,
                     .parts_parallel = 4,
                     .file_bytes = 256 * MIB,
                     .write_bytes = 1 * MIB,
                     .part_bytes = 8 * MIB};
    const char *modes[8];
    int nmodes = 0, c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        switch (c) {
        case 'e':
            o.env_path = optarg;
            break;
        case 'd':
            o.dir = optarg;
            break;
        case 'm':
            if (nmodes < 8)
                modes[nmodes++] = optarg;
            break;
        default:
            if (!optarg || tier_parse_u64(optarg, &v) != 0 || v == 0 || v > (1u << 20)) {
                fprintf(stderr, "checkpoint_bench: bad option value (see the top of the file)\n");
                return 2;
            }
            if (c == 'f')
                o.files = (int)v;
            else if (c == 's')
                o.file_bytes = v * MIB;
            else if (c == 'w')
                o.write_bytes = v * 1024;
            else if (c == 'p')
                o.part_bytes = v * MIB;
            else if (c == 't')
                o.direct_threads = (int)v;
            else if (c == 'u')
                o.upload_threads = (int)v;
            else if (c == 'P')
                o.parts_parallel = (int)v;
        }
    }
    if (nmodes == 0 || o.write_bytes > DATA_BYTES || o.part_bytes > DATA_BYTES) {
        fprintf(stderr, "usage: checkpoint_bench --env FILE [--dir DIR] --mode "
                        "posix|direct|engine ... (see the top of the file)\n");
        return 2;
    }
    g_data = malloc(DATA_BYTES);
    if (!g_data)
        return 1;
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < DATA_BYTES / 8; i++) { /* xorshift64: incompressible enough */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(g_data + i * 8, &x, 8);
    }

    struct tu_s3_env e;
    struct backend *be = NULL;
    char bucket[64];
    int rc = 0;
    for (int m = 0; m < nmodes && rc == 0; m++) {
        bool s3 = strcmp(modes[m], "direct") == 0 || strncmp(modes[m], "engine", 6) == 0;
        if ((strcmp(modes[m], "posix") == 0 || strncmp(modes[m], "engine", 6) == 0) && !o.dir) {
            fprintf(stderr, "checkpoint_bench: --mode %s needs --dir\n", modes[m]);
            rc = 2;
            break;
        }
        if (s3 && !be) {
            if (!o.env_path || !tu_s3_env_load_file(o.env_path, &e)) {
                fprintf(stderr, "checkpoint_bench: --env FILE with S3_* settings needed\n");
                rc = 2;
                break;
            }
            snprintf(bucket, sizeof(bucket), "ckbench-%llx",
                     (unsigned long long)(tier_now_real_ns() / 1000));
            if (tu_s3_bucket_create_named(&e, bucket) != 0) {
                fprintf(stderr, "checkpoint_bench: cannot create bucket %s at %s\n", bucket,
                        e.endpoint);
                rc = 1;
                break;
            }
            struct s3_backend_config sc = {.name = "s3",
                                           .endpoint = e.endpoint,
                                           .region = e.region,
                                           .bucket = bucket,
                                           .path_style = true,
                                           .access_key = e.access_key,
                                           .secret_key = e.secret_key,
                                           .request_timeout_ms = 120000};
            if (backend_s3_open(&sc, &be) != 0) {
                fprintf(stderr, "checkpoint_bench: S3 backend: %s\n", tier_err_msg());
                rc = 1;
                break;
            }
        }
        if (strcmp(modes[m], "posix") == 0)
            rc = run_posix(&o);
        else if (strcmp(modes[m], "direct") == 0)
            rc = run_direct(be, &o);
        else if (strcmp(modes[m], "engine") == 0)
            rc = run_engine(be, &o, false);
        else if (strcmp(modes[m], "engine-noupload") == 0)
            rc = run_engine(be, &o, true);
        else {
            fprintf(stderr, "checkpoint_bench: unknown mode %s\n", modes[m]);
            rc = 2;
        }
    }
    backend_free(be);
    free(g_data);
    return rc ? 1 : 0;
}
