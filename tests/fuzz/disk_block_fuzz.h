/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disk_block_fuzz.h - what fuzz_disk_block.c and gen_disk_block_corpus.c share: the cache
 * configuration the corpus was written with (block size, backend name) and a fixed cache secret,
 * so that a valid block of the corpus is adopted by the fuzzer's restart scan. Also the offsets
 * of struct disk_hdr (src/cache/disk.c, format version 3) the generator edits.
 */
#ifndef TIER_FUZZ_DISK_BLOCK_FUZZ_H
#define TIER_FUZZ_DISK_BLOCK_FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FDB_BLOCK_SIZE (128u << 10)
#define FDB_BACKEND "fz"
#define FDB_SECRET_BYTES 192

#define FDB_H_VERSION 8
#define FDB_H_LEN 12
#define FDB_H_ID 16
#define FDB_H_INDEX 32
#define FDB_H_DATA_LEN 40
#define FDB_H_NCHUNKS 52
#define FDB_H_BLOCK_SIZE 56
#define FDB_H_NAME_LEN 60
#define FDB_H_KEY_LEN 62
#define FDB_H_ETAG_LEN 64
#define FDB_H_CSUM 72
#define FDB_H_SIZE 80

/* Write the fixed secret as dir/.secret (mode 0600, as the cache wants it). */
static inline int fdb_write_secret(const char *dir)
{
    unsigned char s[FDB_SECRET_BYTES];
    for (unsigned i = 0; i < sizeof(s); i++)
        s[i] = (unsigned char)(i * 167u + 13u);
    char path[4096];
    snprintf(path, sizeof(path), "%s/.secret", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, s, sizeof(s));
    close(fd);
    return n == (ssize_t)sizeof(s) ? 0 : -EIO;
}

#endif
