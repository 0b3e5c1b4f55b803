/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gen_disk_block_corpus.c - writes the seed corpus of fuzz_disk_block (tests/fuzz/corpus/
 * disk_block) with the real writer: a cache with fuzz_disk_block's configuration and secret
 * reads a few objects of the in-memory backend, so their blocks are written through by
 * disk_block_write(); each block file is copied out as a valid seed, and hostile seeds are
 * derived from them: truncations, a flipped header byte, other format versions, edited lengths
 * and identities (header checksum recomputed so deeper checks are reached), a flipped chunk sum
 * or data byte, trailing bytes. Not a test; run by hand when the format changes:
 *   build-asan/tests/gen_disk_block_corpus tests/fuzz/corpus/disk_block
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "fakebe.h"
#include "cache/cache.h"
#include "disk_block_fuzz.h"
#include "testutil.h"

static const char *g_out;
static int g_n;

static void emit(const char *tag, const unsigned char *img, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%02d-%s", g_out, g_n++, tag);
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(img, 1, len, f) != len)) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

static void fix_csum(unsigned char *img, size_t len)
{
    uint32_t hl;
    memcpy(&hl, img + FDB_H_LEN, 4);
    if (hl > len)
        hl = (uint32_t)len;
    memset(img + FDB_H_CSUM, 0, 8);
    uint64_t sum = XXH3_64bits(img, hl);
    memcpy(img + FDB_H_CSUM, &sum, 8);
}

/* Emit a copy of img with 4 bytes at off set to v (csum: recompute the header checksum). */
static void edit32(const char *tag, const unsigned char *img, size_t len, size_t off, uint32_t v,
                   int csum)
{
    unsigned char *c = malloc(len);
    memcpy(c, img, len);
    memcpy(c + off, &v, 4);
    if (csum)
        fix_csum(c, len);
    emit(tag, c, len);
    free(c);
}

static void edit16(const char *tag, const unsigned char *img, size_t len, size_t off, uint16_t v)
{
    unsigned char *c = malloc(len);
    memcpy(c, img, len);
    memcpy(c + off, &v, 2);
    fix_csum(c, len);
    emit(tag, c, len);
    free(c);
}

static void flip(const char *tag, const unsigned char *img, size_t len, size_t off, int csum)
{
    unsigned char *c = malloc(len);
    memcpy(c, img, len);
    c[off] ^= 0x20;
    if (csum)
        fix_csum(c, len);
    emit(tag, c, len);
    free(c);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* The block file of (key, index) among those written: the one whose header names key. */
static unsigned char *find_block(const char *dir, const char *key, uint64_t index, size_t *len)
{
    for (int i = 0; i < 256; i++) {
        char sub[4096];
        snprintf(sub, sizeof(sub), "%s/%02x", dir, i);
        DIR *d = opendir(sub);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char p[8192];
            snprintf(p, sizeof(p), "%s/%s", sub, de->d_name);
            size_t l = 0;
            unsigned char *b = slurp(p, &l);
            if (!b || l < FDB_H_SIZE) {
                free(b);
                continue;
            }
            uint16_t nl, kl;
            uint64_t ix;
            memcpy(&nl, b + FDB_H_NAME_LEN, 2);
            memcpy(&kl, b + FDB_H_KEY_LEN, 2);
            memcpy(&ix, b + FDB_H_INDEX, 8);
            if (kl == strlen(key) && ix == index && !memcmp(b + FDB_H_SIZE + nl, key, kl)) {
                closedir(d);
                *len = l;
                return b;
            }
            free(b);
        }
        closedir(d);
    }
    fprintf(stderr, "block %s/%llu not found\n", key, (unsigned long long)index);
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    g_out = argv[1];
    char dir[] = "/tmp/gen_disk_block.XXXXXX";
    if (!mkdtemp(dir) || fdb_write_secret(dir) < 0)
        return 1;
    struct backend *be = fakebe_mem_new(FDB_BACKEND);
    static const struct {
        const char *key, *etag;
        uint64_t size;
    } objs[] = {
        {"k", "\"1\"", 1},
        {"d/obj.bin", "\"abc\"", FDB_BLOCK_SIZE + 3000}, /* a full block (2 chunks) + 3000 */
        {"x/\xc3\xa9t\xc3\xa9/long-name-of-a-file-0123456789.dat", "W/\"etag-with-slash\"", 70000},
        {"e", "", 65536}, /* exactly one chunk, empty etag */
    };
    struct cache_config cfg = {.block_size = FDB_BLOCK_SIZE,
                               .disk_dir = dir,
                               .disk_bytes = 1u << 30,
                               .prefetch_threads = 1};
    struct cache *c = NULL;
    if (cache_open(&cfg, &c) < 0)
        return 1;
    char *buf = malloc(2 * FDB_BLOCK_SIZE);
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
        fakebe_add(be, objs[i].key, objs[i].size, objs[i].etag);
        struct cache_obj o = {
            .be = be, .key = objs[i].key, .etag = objs[i].etag, .size_bytes = objs[i].size};
        if (cache_read(c, NULL, &o, 0, buf, objs[i].size) != (ssize_t)objs[i].size)
            return 1;
    }
    free(buf);
    cache_close(c);

    size_t l = 0;
    unsigned char *b;
    b = find_block(dir, "k", 0, &l);
    emit("valid-1byte", b, l);
    free(b);
    b = find_block(dir, "d/obj.bin", 1, &l);
    emit("valid-3000", b, l);
    free(b);
    b = find_block(dir, objs[2].key, 0, &l);
    emit("valid-2chunks-utf8", b, l);
    free(b);
    b = find_block(dir, "e", 0, &l);
    emit("valid-1chunk-empty-etag", b, l);
    free(b);
    unsigned char *big = find_block(dir, "d/obj.bin", 0, &l);
    size_t biglen = l;
    emit("valid-full-block", big, biglen);

    /* hostile seeds from the small block of d/obj.bin (index 1, 3000 bytes) */
    b = find_block(dir, "d/obj.bin", 1, &l);
    uint32_t hl;
    memcpy(&hl, b + FDB_H_LEN, 4);
    size_t cuts[] = {0, 7, 12, 40, FDB_H_SIZE - 1, FDB_H_SIZE, hl - 1, hl, l - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        char tag[32];
        snprintf(tag, sizeof(tag), "torn-at-%zu", cuts[i]);
        emit(tag, b, cuts[i]);
    }
    flip("bad-header-csum", b, l, FDB_H_INDEX, 0);
    flip("bad-magic", b, l, 3, 1);
    edit32("version-2", b, l, FDB_H_VERSION, 2, 1);
    edit32("version-99", b, l, FDB_H_VERSION, 99, 1);
    edit32("version-0-no-csum", b, l, FDB_H_VERSION, 0, 0);
    edit32("hdr-len-plus-8", b, l, FDB_H_LEN, hl + 8, 1);
    edit32("hdr-len-huge", b, l, FDB_H_LEN, 0xfffffff0u, 1);
    edit32("data-len-plus-1", b, l, FDB_H_DATA_LEN, 3001, 1);
    edit32("data-len-over-block", b, l, FDB_H_DATA_LEN, FDB_BLOCK_SIZE + 1, 1);
    edit32("nchunks-2", b, l, FDB_H_NCHUNKS, 2, 1);
    edit32("nchunks-0", b, l, FDB_H_NCHUNKS, 0, 1);
    edit32("block-size-other", b, l, FDB_H_BLOCK_SIZE, FDB_BLOCK_SIZE * 2, 1);
    edit32("index-other", b, l, FDB_H_INDEX, 7, 1);
    edit16("name-len-huge", b, l, FDB_H_NAME_LEN, 0xffff);
    edit16("key-len-plus-1", b, l, FDB_H_KEY_LEN, 10);
    edit16("etag-len-zero", b, l, FDB_H_ETAG_LEN, 0);
    flip("id-other", b, l, FDB_H_ID + 5, 1);
    flip("key-byte", b, l, FDB_H_SIZE + 2 + 3, 1);
    {
        unsigned char *c2 = malloc(l);
        memcpy(c2, b, l);
        c2[FDB_H_SIZE + 2 + 1] = 0; /* a NUL inside the key */
        fix_csum(c2, l);
        emit("key-with-nul", c2, l);
        free(c2);
    }
    flip("chunk-sum", b, l, hl - 3, 1);
    flip("data-byte", b, l, l - 10, 0);
    {
        unsigned char *c2 = malloc(l + 5);
        memcpy(c2, b, l);
        memcpy(c2 + l, "extra", 5);
        emit("trailing-bytes", c2, l + 5);
        free(c2);
    }
    free(b);
    /* the two-chunk block: second chunk corrupt (a range read of chunk 0 still succeeds) */
    flip("full-block-chunk1-byte", big, biglen, biglen - 100, 0);
    free(big);
    backend_free(be);
    tu_rmtree(dir);
    printf("wrote %d seeds to %s\n", g_n, g_out);
    return 0;
}
