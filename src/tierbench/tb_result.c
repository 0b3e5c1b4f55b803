/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_result.c - per-class results and the figures derived from them (AU, MB/s, rate), plus the
 * default POSIX I/O used by the engines. A result is owned by the engine thread filling it until
 * that thread is joined.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static ssize_t posix_pread(void *arg, int fd, void *buf, size_t len, uint64_t off)
{
    (void)arg;
    for (;;) {
        ssize_t n = pread(fd, buf, len, (off_t)off);
        if (n >= 0)
            return n;
        if (errno != EINTR)
            return -errno;
    }
}

const struct tb_io tb_io_posix = {.pread = posix_pread, .arg = NULL};

int tb_result_init(struct tb_class_result *r)
{
    memset(r, 0, sizeof(*r));
    return tier_hist_new(&r->lat);
}

void tb_result_fini(struct tb_class_result *r)
{
    tier_hist_free(r->lat);
    r->lat = NULL;
}

double tb_result_au(const struct tb_class_result *r)
{
    uint64_t t = r->compute_ns + r->wait_ns;
    return t ? 100.0 * (double)r->compute_ns / (double)t : 0.0;
}

double tb_result_mbps(const struct tb_class_result *r)
{
    return r->elapsed_ns ? (double)r->bytes / 1e6 / ((double)r->elapsed_ns / 1e9) : 0.0;
}

double tb_result_ops_per_s(const struct tb_class_result *r)
{
    return r->elapsed_ns ? (double)r->ops / ((double)r->elapsed_ns / 1e9) : 0.0;
}
