/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_disk_block.c - libFuzzer target for the cache's block files (src/cache/disk.c): every
 * input is planted as one block file in a cache directory (named after the identity hash field
 * of its header, so valid blocks keep their name) and a cache is opened on it, which runs the
 * restart scan (disk_scan -> adopt_one -> read_header). When the file was adopted, it is read
 * back through the cache: a range read on the RAM-less fast path (disk_block_read_range) and a
 * whole-block load (disk_block_load), both verifying the chunk checksums. Also built as a
 * corpus-replay test (fuzz_disk_block_replay) in CTest. The corpus (tests/fuzz/corpus/disk_block)
 * is written by gen_disk_block_corpus.c with the real writer.
 *
 * Checks what must hold for any file: no crash, leak or sanitizer report; cache_open succeeds;
 * the index agrees with the files on disk (cache_debug_check); a file is adopted only when its
 * header passed; a read of an adopted block returns the whole range or an error, never a short
 * count.
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fakebe.h"
#include "cache/cache.h"
#include "cache/cache_debug.h"
#include "common/log.h"
#include "common/strutil.h"
#include "disk_block_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *g_dir;
static struct backend *g_be;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void cleanup(void)
{
    nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    backend_free(g_be);
    free(g_dir);
}

static void init_once(void)
{
    if (g_dir)
        return;
    const char *tmp = getenv("TIER_TEST_TMP");
    char tmpl[4096];
    if (tmp && mkdir(tmp, 0755) == 0)
        chmod(tmp, 0755); /* whatever the umask: FUSE tests share it as other uids */
    snprintf(tmpl, sizeof(tmpl), "%s/fuzz_disk_block.XXXXXX", tmp ? tmp : "/tmp");
    g_dir = strdup(tmpl);
    if (!g_dir || !mkdtemp(g_dir) || fdb_write_secret(g_dir) < 0)
        abort();
    g_be = fakebe_mem_new(FDB_BACKEND); /* no objects: a refetch gets -ENOENT */
    if (!getenv("TIER_LOG_LEVEL"))
        tier_log_set_level(TIER_LOG_ERR); /* a line per corrupt input would slow the fuzzer */
    atexit(cleanup);
}

static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* If the input's header names backend FDB_BACKEND, read its block back through c. */
static void read_back(struct cache *c, const uint8_t *data, size_t size)
{
    if (size < FDB_H_SIZE)
        abort(); /* adopted a file shorter than a header */
    size_t nl = get16(data + FDB_H_NAME_LEN), kl = get16(data + FDB_H_KEY_LEN),
           el = get16(data + FDB_H_ETAG_LEN);
    uint64_t index = get64(data + FDB_H_INDEX), dlen = get64(data + FDB_H_DATA_LEN);
    if (FDB_H_SIZE + nl + kl + el > size || dlen > FDB_BLOCK_SIZE)
        abort(); /* the scan adopted a header it should have refused */
    const char *p = (const char *)data + FDB_H_SIZE;
    if (nl != strlen(FDB_BACKEND) || memcmp(p, FDB_BACKEND, nl) || index > (1u << 20) || dlen == 0)
        return;
    char key[BACKEND_KEY_MAX + 1], etag[BACKEND_ETAG_MAX];
    if (kl > BACKEND_KEY_MAX || el >= BACKEND_ETAG_MAX)
        abort();
    memcpy(key, p + nl, kl);
    key[kl] = 0;
    memcpy(etag, p + nl + kl, el);
    etag[el] = 0;
    struct cache_obj o = {
        .be = g_be, .key = key, .etag = etag, .size_bytes = index * FDB_BLOCK_SIZE + dlen};
    uint64_t base = index * FDB_BLOCK_SIZE;
    char *buf = malloc(dlen);
    if (!buf)
        return;
    /* an unaligned range: partial edge chunks through the bounce buffer */
    size_t off = dlen > 3 ? 1 : 0, len = dlen > 3 ? (size_t)dlen - 2 : (size_t)dlen;
    ssize_t n = cache_read(c, NULL, &o, base + off, buf, len);
    if (n >= 0 && (size_t)n != len)
        abort();
    int r = cache_fetch_block(c, NULL, &o, index, false);
    (void)r; /* 0 (verified load) or an error (corrupt: dropped, refetch -ENOENT) */
    n = cache_read(c, NULL, &o, base, buf, (size_t)dlen);
    if (n >= 0 && (uint64_t)n != dlen)
        abort();
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    char hex[33], path[4200];
    if (size >= 32)
        tier_hex(data + FDB_H_ID, 16, hex);
    else
        memset(hex, '0', 32), hex[32] = 0;
    snprintf(path, sizeof(path), "%s/%.2s", g_dir, hex);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%.2s/%s", g_dir, hex, hex);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);

    struct cache_config cfg = {.block_size = FDB_BLOCK_SIZE,
                               .disk_dir = g_dir,
                               .disk_bytes = 1u << 30,
                               .prefetch_threads = 1};
    struct cache *c = NULL;
    if (cache_open(&cfg, &c) < 0)
        abort(); /* no block file may stop the cache from opening */
    char msg[256];
    if (cache_debug_check(c, msg, sizeof(msg)) < 0)
        abort();
    struct stat st;
    if (stat(path, &st) == 0)
        read_back(c, data, size);
    if (cache_debug_check(c, msg, sizeof(msg)) < 0)
        abort();
    cache_close(c);
    unlink(path);
    return 0;
}
