/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disk.c - the disk level's block files: naming, format, write, verified read, restart scan.
 *
 * Callers: the cache's files only (cache.c, cache_level.c, cache_open.c, cache_pin.c,
 * cache_debug.c; cache_int.h). Stateless apart from the directory and the table of open block
 * files (struct disk_fdcache, its own mutex, held only around its slots, never across I/O). Every
 * function here does file I/O and is called with no cache lock held (the restart scan runs in
 * cache_open() before the cache is shared; cache_debug_check() is the one exception).
 *
 * FILE FORMAT (native byte order; a cache directory is not moved between architectures):
 *   struct disk_hdr (80 bytes): magic "TIERCB01", format version (DISK_VERSION), hdr_len,
 *   128-bit identity hash, block index, data_len, chunk size (64 KiB) and chunk count, the
 *   cache's block size, lengths of the three identity strings, XXH3-64 of the whole header (with
 *   that field zero); then backend name, key and etag (no NULs); then one XXH3-64 per data chunk;
 *   then the data. Per-chunk checksums let a read of part of a block (disk_block_read_range, the
 *   RAM-less hit path) verify just what it reads. The file name is the hex of the identity hash
 *   (keyed with the cache's secret, see cache_block_id), under a fan-out directory of its first
 *   byte: dir/ab/ab12...ef. The identity strings in the header let a restarted cache find the
 *   block again from (backend, key, etag, index) and apply pin rules and evict-by-prefix to it;
 *   every load compares them, and the block size, with the block asked for, so a file is never
 *   served for another identity whatever its name says.
 *
 * VERSION: the magic and the version are checked before any other field is read. A file of
 *   another version (an older tierd's, or a newer one's after a downgrade) is never interpreted:
 *   the restart scan removes it with a log line naming the version (-EPROTONOSUPPORT from
 *   read_header), and its block is refetched when read.
 *
 * DURABILITY: a file is written under "<name>.tmp" and renamed; no fsync. After kill -9 the page
 * cache still holds every completed write, and after a power loss a renamed file may hold
 * garbage, which the data checksum catches on its first read. Either way a bad block is
 * re-fetched, never served, so the cost of an fsync per block buys nothing here.
 *
 * RESTART: disk_scan() deletes temp files, deletes files whose header is bad or of another
 * version, whose name does not match the identity in the header, or whose size is not hdr_len +
 * data_len (torn), and adopts the rest. A file that cannot be read for another reason (EMFILE,
 * EIO, ENOMEM ...) is left in place, not adopted, and logged: a transient error never deletes a
 * good block. The data checksums are verified by reads (a load hashes every chunk; a range read
 * hashes what this open file did not verify less than 1 s ago: VERIFIED RANGE READS below), so
 * a block adopted at open is never served before its chunks have been verified.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache_int.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strutil.h"

#define DISK_MAGIC "TIERCB01"
/* 3: block size in the header, identity hash keyed with the cache's secret. */
#define DISK_VERSION 3u
#define CHUNK_BYTES (64u << 10)
/* Chunks read per syscall on the verified read path (256 KiB: stays in L2 until hashed). */
#define VERIFY_GROUP 4u
/* A range read may skip hashing chunks this open file verified less than this long ago (the
 * bound of the guarantee in the top comment of the table of open files below). */
#define VERIFY_TTL_NS CACHE_DISK_VERIFY_TTL_NS
/* ... and only when the file's last change (ctime) was this long before the verification:
 * a later write then sets another ctime even on a file system with 1 s (or 2 s) timestamps. */
#define CTIME_SETTLE_NS 3000000000ull

struct disk_hdr {
    char magic[8];
    uint32_t version;
    uint32_t hdr_len;
    uint8_t id[16];
    uint64_t index;
    uint64_t data_len;
    uint32_t chunk_bytes;
    uint32_t nchunks;
    uint32_t block_size; /* the cache's block size (cfg.block_size) */
    uint16_t name_len, key_len, etag_len, pad;
    uint32_t pad2;
    uint64_t hdr_csum;
};
_Static_assert(sizeof(struct disk_hdr) == 80, "disk header layout");
/* magic + version: all a reader looks at before it knows the layout */
#define HDR_PREFIX (offsetof(struct disk_hdr, version) + sizeof(uint32_t))

#define MAX_CHUNKS ((64u << 20) / CHUNK_BYTES)
#define HDR_MAX                                                                                    \
    (sizeof(struct disk_hdr) + CACHE_NAME_MAX + BACKEND_KEY_MAX + BACKEND_ETAG_MAX + 8 * MAX_CHUNKS)

static uint32_t nchunks_of(uint64_t len)
{
    return (uint32_t)((len + CHUNK_BYTES - 1) / CHUNK_BYTES);
}

int disk_block_path(const char *dir, const uint8_t id[16], const char *suffix, char *path,
                    size_t pathsz)
{
    char hex[33];
    tier_hex(id, 16, hex);
    int n = snprintf(path, pathsz, "%s/%.2s/%s%s", dir, hex, hex, suffix);
    return n < 0 || (size_t)n >= pathsz ? -ENAMETOOLONG : 0;
}

static uint32_t hdr_len_of(const struct cblock *b)
{
    return (uint32_t)(sizeof(struct disk_hdr) + strlen(b->be_name) + strlen(b->key) +
                      strlen(b->etag) + 8 * nchunks_of(b->len));
}

uint64_t disk_block_file_size(const struct cblock *b)
{
    return hdr_len_of(b) + (uint64_t)b->len;
}

static int write_all(int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len, off_t off)
{
    char *p = buf;
    while (len) {
        ssize_t n = pread(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EBADMSG; /* shorter than the header says: torn */
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

int disk_block_write(const char *dir, size_t block_size, const struct cblock *b, const void *data,
                     size_t len)
{
    char path[4096], tmp[4096];
    int r = disk_block_path(dir, b->id, "", path, sizeof(path));
    if (r < 0 || (r = disk_block_path(dir, b->id, ".tmp", tmp, sizeof(tmp))) < 0)
        return r;
    uint32_t hl = hdr_len_of(b);
    unsigned char *hbuf = calloc(1, hl);
    if (!hbuf)
        return -ENOMEM;
    struct disk_hdr h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, DISK_MAGIC, 8);
    h.version = DISK_VERSION;
    h.hdr_len = hl;
    memcpy(h.id, b->id, 16);
    h.index = b->index;
    h.data_len = len;
    h.chunk_bytes = CHUNK_BYTES;
    h.nchunks = nchunks_of(len);
    h.block_size = (uint32_t)block_size;
    h.name_len = (uint16_t)strlen(b->be_name);
    h.key_len = (uint16_t)strlen(b->key);
    h.etag_len = (uint16_t)strlen(b->etag);
    size_t o = sizeof(h);
    memcpy(hbuf + o, b->be_name, h.name_len);
    o += h.name_len;
    memcpy(hbuf + o, b->key, h.key_len);
    o += h.key_len;
    memcpy(hbuf + o, b->etag, h.etag_len);
    o += h.etag_len;
    for (uint32_t i = 0; i < h.nchunks; i++) {
        size_t co = (size_t)i * CHUNK_BYTES;
        size_t cl = len - co < CHUNK_BYTES ? len - co : CHUNK_BYTES;
        uint64_t sum = XXH3_64bits((const char *)data + co, cl);
        memcpy(hbuf + o + 8 * (size_t)i, &sum, 8);
    }
    memcpy(hbuf, &h, sizeof(h));
    h.hdr_csum = XXH3_64bits(hbuf, hl);
    memcpy(hbuf, &h, sizeof(h));

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    r = write_all(fd, hbuf, hl, 0);
    if (r == 0)
        r = write_all(fd, data, len, hl);
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
out:
    free(hbuf);
    return r;
}

/* Read and check the header of an open block file into h and hbuf (HDR_MAX bytes: the header,
 * identity strings and chunk sums). Returns 0; -EBADMSG (not a block file, torn or corrupt);
 * -EPROTONOSUPPORT (a block file of another format version, h->version says which; nothing else
 * of it was interpreted); or -errno of the read (transient: the file may be good). */
static int read_header(int fd, struct disk_hdr *h, unsigned char *hbuf)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    /* one read covers the whole header of most blocks (4 MiB block: ~0.6 KiB) */
    size_t first = st.st_size < 4096 ? (size_t)st.st_size : 4096;
    if (first < HDR_PREFIX)
        return -EBADMSG;
    int r = read_all(fd, hbuf, first, 0);
    if (r < 0)
        return r;
    memset(h, 0, sizeof(*h));
    memcpy(h, hbuf, first < sizeof(*h) ? first : sizeof(*h));
    if (memcmp(h->magic, DISK_MAGIC, 8))
        return -EBADMSG;
    if (h->version != DISK_VERSION)
        return -EPROTONOSUPPORT;
    if (first < sizeof(*h) || h->chunk_bytes != CHUNK_BYTES ||
        h->nchunks != nchunks_of(h->data_len) || h->nchunks > MAX_CHUNKS ||
        h->hdr_len !=
            sizeof(*h) + (uint32_t)h->name_len + h->key_len + h->etag_len + 8 * h->nchunks ||
        h->hdr_len > HDR_MAX || h->name_len > CACHE_NAME_MAX || h->key_len > BACKEND_KEY_MAX ||
        h->etag_len >= BACKEND_ETAG_MAX || h->data_len > h->block_size ||
        (uint64_t)st.st_size != h->hdr_len + h->data_len)
        return -EBADMSG;
    if (h->hdr_len > first &&
        (r = read_all(fd, hbuf + first, h->hdr_len - first, (off_t)first)) < 0)
        return r;
    uint64_t want = h->hdr_csum;
    memset(hbuf + offsetof(struct disk_hdr, hdr_csum), 0, sizeof(h->hdr_csum));
    if (XXH3_64bits(hbuf, h->hdr_len) != want)
        return -EBADMSG;
    return 0;
}

/* The identity strings of a checked header, as pointers into hbuf with their lengths. */
static const char *hdr_name(const unsigned char *hbuf)
{
    return (const char *)hbuf + sizeof(struct disk_hdr);
}

/* Does a checked header name exactly block b of a cache of block_size? Compares the identity
 * itself, not only its hash: a hash collision, or a file planted under another block's name,
 * must never be served. */
static bool hdr_is_block(const struct disk_hdr *h, const unsigned char *hbuf, size_t block_size,
                         const struct cblock *b)
{
    const char *nm = hdr_name(hbuf), *key = nm + h->name_len, *etag = key + h->key_len;
    return !memcmp(h->id, b->id, 16) && h->index == b->index && h->data_len == b->len &&
           h->block_size == block_size && strlen(b->be_name) == h->name_len &&
           !memcmp(nm, b->be_name, h->name_len) && strlen(b->key) == h->key_len &&
           !memcmp(key, b->key, h->key_len) && strlen(b->etag) == h->etag_len &&
           !memcmp(etag, b->etag, h->etag_len);
}

/* Read [off, off+len) of the data (len > 0) into dst, verifying every chunk it touches: runs of
 * whole chunks are read straight into dst with one pread, partial edge chunks through a bounce
 * buffer. vtime (NULL: none): each chunk that passes gets stamp. Returns 0, -EBADMSG (checksum)
 * or -errno. */
static int read_verified(int fd, const struct disk_hdr *h, const unsigned char *hbuf, uint64_t off,
                         size_t len, unsigned char *dst, _Atomic uint64_t *vtime, uint64_t stamp)
{
    const unsigned char *sums = hbuf + h->hdr_len - 8 * (size_t)h->nchunks;
    uint64_t end = off + len;
    uint32_t c0 = (uint32_t)(off / CHUNK_BYTES), c1 = (uint32_t)((end - 1) / CHUNK_BYTES);
    unsigned char *bounce = NULL;
    int r = 0;
#define CH_START(ci) ((uint64_t)(ci)*CHUNK_BYTES)
#define CH_END(ci)                                                                                 \
    (CH_START(ci) + CHUNK_BYTES < h->data_len ? CH_START(ci) + CHUNK_BYTES : h->data_len)
#define CH_WHOLE(ci) (CH_START(ci) >= off && CH_END(ci) <= end)
    for (uint32_t ci = c0; ci <= c1 && r == 0;) {
        if (CH_WHOLE(ci)) {
            uint32_t cj = ci;
            while (cj + 1 <= c1 && CH_WHOLE(cj + 1))
                cj++;
            /* Read a run of whole chunks a few at a time and hash each group right after its
             * read, while the bytes are still in the CPU cache: one pass over memory instead of
             * two. */
            for (uint32_t k = ci; k <= cj && r == 0;) {
                uint32_t kend = k + VERIFY_GROUP - 1 < cj ? k + VERIFY_GROUP - 1 : cj;
                unsigned char *p = dst + (CH_START(k) - off);
                r = read_all(fd, p, (size_t)(CH_END(kend) - CH_START(k)),
                             (off_t)(h->hdr_len + CH_START(k)));
                for (; k <= kend && r == 0; k++) {
                    uint64_t want;
                    memcpy(&want, sums + 8 * (size_t)k, 8);
                    if (XXH3_64bits(dst + (CH_START(k) - off), (size_t)(CH_END(k) - CH_START(k))) !=
                        want)
                        r = -EBADMSG;
                    else if (vtime)
                        atomic_store_explicit(&vtime[k], stamp, memory_order_relaxed);
                }
            }
            ci = cj + 1;
            continue;
        }
        if (!bounce && !(bounce = malloc(CHUNK_BYTES))) {
            r = -ENOMEM;
            break;
        }
        size_t cl = (size_t)(CH_END(ci) - CH_START(ci));
        r = read_all(fd, bounce, cl, (off_t)(h->hdr_len + CH_START(ci)));
        uint64_t want;
        memcpy(&want, sums + 8 * (size_t)ci, 8);
        if (r == 0 && XXH3_64bits(bounce, cl) != want)
            r = -EBADMSG;
        if (r == 0 && vtime)
            atomic_store_explicit(&vtime[ci], stamp, memory_order_relaxed);
        if (r == 0) {
            uint64_t from = off > CH_START(ci) ? off : CH_START(ci);
            uint64_t to = end < CH_END(ci) ? end : CH_END(ci);
            memcpy(dst + (from - off), bounce + (from - CH_START(ci)), (size_t)(to - from));
        }
        ci++;
    }
#undef CH_START
#undef CH_END
#undef CH_WHOLE
    free(bounce);
    return r;
}

/* Open b's file and check its header against b. A file of another version, or one that names
 * another identity, is -EBADMSG here: the caller drops it. Other errors are -errno. */
static int open_block(const char *dir, size_t block_size, const struct cblock *b,
                      struct disk_hdr *h, unsigned char *hbuf, int *fd_out)
{
    char path[4096];
    int r = disk_block_path(dir, b->id, "", path, sizeof(path));
    if (r < 0)
        return r;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    r = read_header(fd, h, hbuf);
    if (r == -EPROTONOSUPPORT || (r == 0 && !hdr_is_block(h, hbuf, block_size, b)))
        r = -EBADMSG;
    if (r < 0) {
        close(fd);
        return r;
    }
    *fd_out = fd;
    return 0;
}

/* ---- open block files (struct disk_fdcache) ------------------------------------------------
 *
 * A slot holds one open block file: its fd, its checked header (h, hbuf: the header's own bytes),
 * and the readers using it (refs). Slot of a block: its id's low bits. A lookup that finds the
 * block there takes a reference and preads without the lock; one that finds another block, or
 * nothing, opens and checks the file as before and puts it in the slot if the slot's entry has
 * no reader (else the new one is used once and closed). Forgetting a block (its file unlinked or
 * replaced) detaches its entry; the last reader closes it. An entry is never reused for another
 * file while a reader holds it, and a file's header is checked once per open, not per read: the
 * identity was checked then.
 *
 * VERIFIED RANGE READS (disk_block_read_range; whole-block loads hash every chunk): a read hashes
 * every 64 KiB chunk it touches, except when all of these hold, and then it is one plain pread
 * into the caller's buffer with no hash pass:
 *   (1) this open file hashed each chunk touched, successfully, less than VERIFY_TTL_NS (1 s) ago
 *       (o->vtime: per chunk, the monotonic time taken before that verification's pread);
 *   (2) at that verification the file's ctime, taken by fstat when the file was opened, was at
 *       least CTIME_SETTLE_NS (3 s) old;
 *   (3) the pread, preadv2(RWF_NOWAIT), found every page of the range in the page cache (a
 *       page that has to come from the device makes it fail or come up short: the range is
 *       then read again and hashed, so a page loaded from the device by this read is verified);
 *       on a file system without RWF_NOWAIT for buffered reads (EOPNOTSUPP) a plain pread;
 *   (4) an fstat after the pread shows the inode, size, ctime and mtime recorded at the open.
 * A write to the file through the file system (write, pwrite, truncate; a shared mapping's first
 * write after writeback) sets its ctime before it changes a byte, to a clock tick later than
 * the settled ctime of (2): the fstat of (4) sees it and the range is hashed, so such a change
 * is never served. What changes a chunk's bytes without a ctime change (the page cache dropping
 * a page and another process's read loading it again from a damaged device, memory
 * corruption, a write through a shared mapping whose page is already dirty) is served for at
 * most VERIFY_TTL_NS after the chunk's last verification: the first read after that hashes the
 * chunk and drops the block if it is corrupt. A file whose fstat differs (4) is hashed on every
 * read until it is opened again (another slot takes it, or the block is rewritten). */

struct ofile {
    uint8_t id[16];
    int fd;
    unsigned refs;
    bool detached;           /* out of its slot: closed by its last reader */
    bool verify_every;       /* hash every read (the table's setting) */
    _Atomic bool changed;    /* the fstat of a read differed from st: hash every read */
    struct stat st;          /* at the open: inode, size, ctime, mtime compared by reads */
    _Atomic uint64_t *vtime; /* per chunk: monotonic ns before its last verification, 0: none */
    struct disk_hdr h;
    unsigned char hbuf[]; /* h.hdr_len bytes */
};

/* Ways of a set: a block's file may sit in any of its set's slots, so a few blocks whose ids
 * fall in one set do not close each other's files (and lose their verification stamps). */
#define FD_WAYS 4u

struct disk_fdcache {
    pthread_mutex_t mu;
    unsigned nslots, ways, nsets; /* nslots = ways * nsets */
    struct ofile **slot;
    uint64_t *used; /* per slot: use tick of its last lookup (the least recent idle one goes) */
    uint64_t tick;
    uint32_t *gen;          /* per set: bumped by every forget there, so a reader that opened a file
                             * before its unlink cannot put the unlinked inode in the set after it */
    bool verify_every;      /* cache_config.disk_verify_every_read */
    _Atomic bool no_nowait; /* RWF_NOWAIT refused (EOPNOTSUPP): plain preads */
    _Atomic uint64_t hits, opens, forgets, unhashed;
};

int disk_fdcache_new(unsigned slots, bool verify_every, struct disk_fdcache **out)
{
    struct disk_fdcache *fc = calloc(1, sizeof(*fc));
    if (!slots)
        slots = 1;
    unsigned ways = slots < FD_WAYS ? slots : FD_WAYS;
    if (!fc || !(fc->slot = calloc(slots, sizeof(*fc->slot))) ||
        !(fc->used = calloc(slots, sizeof(*fc->used))) ||
        !(fc->gen = calloc(slots / ways, sizeof(*fc->gen)))) {
        if (fc) {
            free(fc->slot);
            free(fc->used);
        }
        free(fc);
        return -ENOMEM;
    }
    fc->ways = ways;
    fc->nsets = slots / ways;
    fc->nslots = fc->nsets * ways;
    fc->verify_every = verify_every;
    pthread_mutex_init(&fc->mu, NULL);
    *out = fc;
    return 0;
}

static void ofile_close(struct ofile *o)
{
    close(o->fd);
    free(o->vtime);
    free(o);
}

void disk_fdcache_free(struct disk_fdcache *fc)
{
    if (!fc)
        return;
    for (unsigned i = 0; i < fc->nslots; i++)
        if (fc->slot[i])
            ofile_close(fc->slot[i]); /* no reader is left when the cache closes */
    free(fc->slot);
    free(fc->used);
    free(fc->gen);
    pthread_mutex_destroy(&fc->mu);
    free(fc);
}

static unsigned set_of(const struct disk_fdcache *fc, const uint8_t id[16])
{
    uint32_t v;
    memcpy(&v, id, sizeof(v));
    return v % fc->nsets;
}

/* The slot of set si holding id's file, or -1. Under fc->mu. */
static int slot_find(const struct disk_fdcache *fc, unsigned si, const uint8_t id[16])
{
    for (unsigned w = 0; w < fc->ways; w++) {
        struct ofile *o = fc->slot[si * fc->ways + w];
        if (o && !memcmp(o->id, id, 16))
            return (int)(si * fc->ways + w);
    }
    return -1;
}

void disk_fdcache_forget(struct disk_fdcache *fc, const uint8_t id[16])
{
    if (!fc)
        return;
    struct ofile *close_now = NULL;
    pthread_mutex_lock(&fc->mu);
    unsigned si = set_of(fc, id);
    fc->gen[si]++;
    int i = slot_find(fc, si, id);
    struct ofile *o = i < 0 ? NULL : fc->slot[i];
    if (o) {
        fc->slot[i] = NULL;
        o->detached = true;
        if (!o->refs)
            close_now = o;
        atomic_fetch_add_explicit(&fc->forgets, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&fc->mu);
    if (close_now)
        ofile_close(close_now);
}

void disk_fdcache_stats_get(struct disk_fdcache *fc, struct disk_fdcache_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (!fc)
        return;
    st->hits = atomic_load(&fc->hits);
    st->opens = atomic_load(&fc->opens);
    st->forgets = atomic_load(&fc->forgets);
    st->unhashed = atomic_load(&fc->unhashed);
}

/* An open, checked block file for b, referenced (ofile_put when done). */
static int ofile_get(struct disk_fdcache *fc, const char *dir, size_t block_size,
                     const struct cblock *b, struct ofile **out)
{
    uint32_t gen0 = 0;
    if (fc) {
        pthread_mutex_lock(&fc->mu);
        unsigned si = set_of(fc, b->id);
        int i = slot_find(fc, si, b->id);
        struct ofile *o = i < 0 ? NULL : fc->slot[i];
        /* the whole identity, as at the open: never another block's file (I1) */
        if (o && hdr_is_block(&o->h, o->hbuf, block_size, b)) {
            o->refs++;
            fc->used[i] = ++fc->tick;
            pthread_mutex_unlock(&fc->mu);
            atomic_fetch_add_explicit(&fc->hits, 1, memory_order_relaxed);
            *out = o;
            return 0;
        }
        gen0 = fc->gen[si];
        pthread_mutex_unlock(&fc->mu);
    }
    struct disk_hdr h;
    unsigned char *hbuf = malloc(HDR_MAX);
    int fd = -1;
    if (!hbuf)
        return -ENOMEM;
    int r = open_block(dir, block_size, b, &h, hbuf, &fd);
    if (r < 0) {
        free(hbuf);
        return r; /* open_block closed what it opened */
    }
    struct ofile *o = malloc(sizeof(*o) + h.hdr_len);
    if (o)
        o->vtime = calloc(h.nchunks ? h.nchunks : 1, sizeof(*o->vtime));
    if (!o || !o->vtime || fstat(fd, &o->st) < 0) {
        r = o && o->vtime ? -errno : -ENOMEM;
        if (o)
            free(o->vtime);
        free(o);
        free(hbuf);
        close(fd);
        return r;
    }
    memcpy(o->id, b->id, 16);
    o->fd = fd;
    o->refs = 1;
    o->detached = true; /* until a slot takes it */
    o->verify_every = !fc || fc->verify_every;
    atomic_init(&o->changed, false);
    o->h = h;
    memcpy(o->hbuf, hbuf, h.hdr_len);
    free(hbuf);
    if (fc) {
        atomic_fetch_add_explicit(&fc->opens, 1, memory_order_relaxed);
        struct ofile *evict = NULL;
        pthread_mutex_lock(&fc->mu);
        unsigned si = set_of(fc, b->id);
        /* b's own entry if another reader put one there meanwhile (idle), else an empty slot,
         * else the least recently used idle one */
        int i = slot_find(fc, si, b->id);
        if (i >= 0 && fc->slot[i]->refs)
            i = -2; /* in use: this file is used once */
        for (unsigned w = 0; i == -1 && w < fc->ways; w++)
            if (!fc->slot[si * fc->ways + w])
                i = (int)(si * fc->ways + w);
        for (unsigned w = 0; i == -1 && w < fc->ways; w++) {
            unsigned k = si * fc->ways + w;
            if (!fc->slot[k]->refs)
                for (unsigned x = 0; x < fc->ways; x++) {
                    unsigned y = si * fc->ways + x;
                    if (!fc->slot[y]->refs && fc->used[y] < fc->used[k])
                        k = y;
                }
            if (!fc->slot[k]->refs)
                i = (int)k;
        }
        if (fc->gen[si] == gen0 && i >= 0) {
            evict = fc->slot[i]; /* idle: closed for this one */
            fc->slot[i] = o;
            fc->used[i] = ++fc->tick;
            o->detached = false;
        }
        pthread_mutex_unlock(&fc->mu);
        if (evict)
            ofile_close(evict);
    }
    *out = o;
    return 0;
}

/* r: the read's result; after an error the descriptor is not kept (an ESTALE or EIO one would
 * fail every later read of the block), the next read opens the file again, and the threads that
 * still hold it hash every read from then on (a failed check, -EBADMSG, ends its chunks' unhashed
 * reads at once, not a TTL later). */
static void ofile_put(struct disk_fdcache *fc, struct ofile *o, int r)
{
    bool close_now = true;
    if (r < 0)
        atomic_store_explicit(&o->changed, true, memory_order_relaxed);
    if (fc) {
        pthread_mutex_lock(&fc->mu);
        if (r < 0 && !o->detached) {
            int i = slot_find(fc, set_of(fc, o->id), o->id);
            if (i >= 0 && fc->slot[i] == o)
                fc->slot[i] = NULL;
            o->detached = true;
        }
        close_now = --o->refs == 0 && o->detached;
        pthread_mutex_unlock(&fc->mu);
    }
    if (close_now)
        ofile_close(o);
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t ts_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static bool ts_eq(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Where the verification about to run may stamp its chunks (condition (2) of the top comment of
 * the table): NULL when o hashes every read or its ctime is not settled. */
static _Atomic uint64_t *verify_stamps(const struct ofile *o)
{
    if (o->verify_every || atomic_load_explicit(&o->changed, memory_order_relaxed))
        return NULL;
    uint64_t now = clock_ns(CLOCK_REALTIME), ct = ts_ns(&o->st.st_ctim);
    return ct <= now && now - ct >= CTIME_SETTLE_NS ? o->vtime : NULL;
}

/* The unhashed read of conditions (1), (3) and (4): true when dst holds [off, off+len) of the
 * data, served without hashing; false: the caller reads and hashes the range. */
static bool read_unhashed(struct disk_fdcache *fc, struct ofile *o, uint64_t off, size_t len,
                          unsigned char *dst, uint64_t now)
{
    if (o->verify_every || atomic_load_explicit(&o->changed, memory_order_relaxed))
        return false;
    for (uint32_t ci = (uint32_t)(off / CHUNK_BYTES);
         ci <= (uint32_t)((off + len - 1) / CHUNK_BYTES); ci++) {
        uint64_t v = atomic_load_explicit(&o->vtime[ci], memory_order_relaxed);
        if (!v || now - v >= VERIFY_TTL_NS)
            return false;
    }
    struct iovec iov = {.iov_base = dst, .iov_len = len};
    off_t at = (off_t)(o->h.hdr_len + off);
    ssize_t n;
    if (!atomic_load_explicit(&fc->no_nowait, memory_order_relaxed)) {
        n = preadv2(o->fd, &iov, 1, at, RWF_NOWAIT);
        if (n < 0 && errno == EOPNOTSUPP) {
            atomic_store_explicit(&fc->no_nowait, true, memory_order_relaxed);
            n = pread(o->fd, dst, len, at);
        }
    } else {
        n = pread(o->fd, dst, len, at);
    }
    if (n != (ssize_t)len)
        return false; /* not all in the page cache (or an error): read and hash it */
    struct stat st;
    if (fstat(o->fd, &st) < 0)
        return false;
    if (st.st_ino != o->st.st_ino || st.st_dev != o->st.st_dev || st.st_size != o->st.st_size ||
        !ts_eq(&st.st_ctim, &o->st.st_ctim) || !ts_eq(&st.st_mtim, &o->st.st_mtim)) {
        atomic_store_explicit(&o->changed, true, memory_order_relaxed);
        return false;
    }
    atomic_fetch_add_explicit(&fc->unhashed, 1, memory_order_relaxed);
    return true;
}

int disk_block_load(const char *dir, struct disk_fdcache *fc, size_t block_size,
                    const struct cblock *b, struct cdata **out)
{
    struct ofile *o = NULL;
    int r = ofile_get(fc, dir, block_size, b, &o);
    if (r < 0)
        return r;
    struct cdata *d = cdata_new(b->len);
    if (!d)
        r = -ENOMEM;
    else if (b->len)
        r = read_verified(o->fd, &o->h, o->hbuf, 0, b->len, d->bytes, verify_stamps(o),
                          clock_ns(CLOCK_MONOTONIC));
    ofile_put(fc, o, r);
    if (r < 0) {
        cdata_unref(d);
        return r;
    }
    *out = d;
    return 0;
}

int disk_block_read_range(const char *dir, struct disk_fdcache *fc, size_t block_size,
                          const struct cblock *b, uint32_t off, uint32_t len, void *dst)
{
    if ((uint64_t)off + len > b->len)
        return -EINVAL;
    struct ofile *o = NULL;
    int r = ofile_get(fc, dir, block_size, b, &o);
    if (r == 0 && len) {
        uint64_t now = clock_ns(CLOCK_MONOTONIC);
        if (!fc || !read_unhashed(fc, o, off, len, dst, now))
            r = read_verified(o->fd, &o->h, o->hbuf, off, len, dst, verify_stamps(o), now);
    }
    if (o)
        ofile_put(fc, o, r);
    return r;
}

void disk_block_unlink(const char *dir, const uint8_t id[16])
{
    char path[4096];
    if (disk_block_path(dir, id, "", path, sizeof(path)) == 0 && unlink(path) < 0 &&
        errno != ENOENT)
        log_warn("cache: cannot delete block file %s: %s", path, strerror(errno));
}

bool disk_block_exists(const char *dir, const uint8_t id[16])
{
    char path[4096];
    return disk_block_path(dir, id, "", path, sizeof(path)) == 0 && access(path, F_OK) == 0;
}

int disk_dir_prepare(const char *dir, int *lock_fd)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        int e = errno;
        tier_err_set("cannot create cache directory %s: %s", dir, strerror(e));
        return -e;
    }
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s/.lock", dir);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -ENAMETOOLONG;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        tier_err_set("cache directory %s is in use by another cache (%s)", dir, strerror(e));
        return e == EWOULDBLOCK ? -EBUSY : -e;
    }
    for (int i = 0; i < 256; i++) {
        snprintf(path, sizeof(path), "%s/%02x", dir, i);
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
            int e = errno;
            close(fd);
            tier_err_set("cannot create %s: %s", path, strerror(e));
            return -e;
        }
    }
    *lock_fd = fd;
    return 0;
}

/* Write a new random secret to dir/.secret (temp file, 0600, fsync, rename). */
static int secret_create(const char *dir, const char *path, unsigned char *secret, size_t len)
{
    char tmp[4096];
    int n = snprintf(tmp, sizeof(tmp), "%s/.secret.tmp", dir);
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return -ENAMETOOLONG;
    if (getrandom(secret, len, 0) != (ssize_t)len) {
        int e = errno ? errno : EIO;
        tier_err_set("cannot draw a random cache secret: %s", strerror(e));
        return -e;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        int e = errno;
        tier_err_set("cannot create %s: %s", tmp, strerror(e));
        return -e;
    }
    int r = write_all(fd, secret, len, 0);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        tier_err_set("cannot write the cache secret %s: %s", path, strerror(-r));
    }
    return r;
}

int disk_secret_load(const char *dir, unsigned char *secret, size_t len)
{
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s/.secret", dir);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT)
        return secret_create(dir, path, secret, len);
    const char *why = NULL;
    struct stat st;
    if (fd < 0) {
        why = strerror(errno);
    } else if (fstat(fd, &st) < 0) {
        why = strerror(errno);
    } else if (!S_ISREG(st.st_mode) || st.st_size != (off_t)len) {
        why = "not a regular file of the right size";
    } else if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        why = "not owned by this user with mode 0600";
    } else if (read_all(fd, secret, len, 0) < 0) {
        why = "unreadable";
    }
    if (fd >= 0)
        close(fd);
    if (!why)
        return 0;
    /* A secret others may know (or a damaged one) is replaced: every block named with the old
     * one then fails its name check at the scan and is deleted, which is safe for a cache. */
    log_warn("cache: secret %s: %s; replacing it (the cached blocks are dropped)", path, why);
    if (unlink(path) < 0 && errno != ENOENT) {
        int e = errno;
        tier_err_set("cannot replace the cache secret %s: %s", path, strerror(e));
        return -e;
    }
    return secret_create(dir, path, secret, len);
}

static bool parse_hex_id(const char *name, uint8_t id[16])
{
    if (strlen(name) != 32)
        return false;
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char ch = name[2 * i + k];
            unsigned x;
            if (ch >= '0' && ch <= '9')
                x = (unsigned)(ch - '0');
            else if (ch >= 'a' && ch <= 'f')
                x = (unsigned)(ch - 'a' + 10);
            else
                return false;
            v = v * 16 + x;
        }
        id[i] = (uint8_t)v;
    }
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Validate one file; on success hand a new block to the index. Returns 0; -EBADMSG (delete
 * it); -EPROTONOSUPPORT (another format version, *version says which: delete it); -ENOMEM;
 * another -errno (could not be read: leave it). */
static int adopt_one(struct cache *c, int dfd, const char *name, const uint8_t fid[16],
                     unsigned char *hbuf, uint32_t *version)
{
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ELOOP ? -EBADMSG : -errno;
    struct disk_hdr h;
    int r = read_header(fd, &h, hbuf);
    close(fd);
    if (r == -EPROTONOSUPPORT)
        *version = h.version;
    if (r < 0)
        return r;
    char strs[CACHE_NAME_MAX + BACKEND_KEY_MAX + BACKEND_ETAG_MAX + 3];
    const char *src = hdr_name(hbuf);
    char *nm = strs, *key = nm + h.name_len + 1, *etag = key + h.key_len + 1;
    memcpy(nm, src, h.name_len);
    nm[h.name_len] = 0;
    memcpy(key, src + h.name_len, h.key_len);
    key[h.key_len] = 0;
    memcpy(etag, src + h.name_len + h.key_len, h.etag_len);
    etag[h.etag_len] = 0;
    uint8_t id[16];
    /* An identity string with a NUL in it would hash as a shorter string: not ours. */
    if (strlen(nm) != h.name_len || strlen(key) != h.key_len || strlen(etag) != h.etag_len ||
        h.block_size != cache_block_size(c) || cache_block_id(c, nm, key, etag, h.index, id) < 0 ||
        memcmp(id, fid, 16) || memcmp(id, h.id, 16))
        return -EBADMSG;
    struct cblock *b = cblock_new(id, nm, key, etag, h.index, (uint32_t)h.data_len);
    if (!b)
        return -ENOMEM;
    r = cache_adopt_disk_block(c, b, h.hdr_len + h.data_len);
    if (r < 0)
        free(b);
    return r;
}

int disk_scan(struct cache *c, const char *dir)
{
    unsigned char *hbuf = malloc(HDR_MAX);
    if (!hbuf)
        return -ENOMEM;
    long adopted = 0, dropped = 0, old_version = 0, skipped = 0;
    int r = 0;
    for (int i = 0; i < 256 && r == 0; i++) {
        char sub[4096];
        snprintf(sub, sizeof(sub), "%s/%02x", dir, i);
        DIR *dp = opendir(sub);
        if (!dp) {
            if (errno != ENOENT)
                log_warn("cache: cannot list %s: %s; its blocks are not reused", sub,
                         strerror(errno));
            continue;
        }
        int dfd = dirfd(dp);
        struct dirent *de;
        while ((de = readdir(dp)) != NULL) {
            uint8_t fid[16];
            if (de->d_name[0] == '.')
                continue;
            if (ends_with(de->d_name, ".tmp")) {
                unlinkat(dfd, de->d_name, 0);
                dropped++;
                continue;
            }
            if (!parse_hex_id(de->d_name, fid))
                continue; /* not ours: leave it alone */
            uint32_t version = 0;
            int ar = adopt_one(c, dfd, de->d_name, fid, hbuf, &version);
            if (ar == -ENOMEM) {
                r = ar;
                break;
            }
            if (ar == -EPROTONOSUPPORT) {
                /* Never misread: another version's layout is unknown. One line per scan names
                 * an example; the summary counts them. */
                if (old_version++ == 0)
                    log_warn("cache: %s/%s is a block file of format version %" PRIu32
                             " (this tierd reads version %u): removed, the block is refetched "
                             "when read",
                             sub, de->d_name, version, DISK_VERSION);
                unlinkat(dfd, de->d_name, 0);
            } else if (ar == -EBADMSG) {
                unlinkat(dfd, de->d_name, 0);
                dropped++;
            } else if (ar < 0) {
                /* A transient error (EMFILE, EIO of the read ...) says nothing about the file:
                 * keep it. It is outside the index until a read of its block rewrites it. */
                if (skipped++ == 0)
                    log_warn("cache: cannot read block file %s/%s: %s; left in place, not reused",
                             sub, de->d_name, strerror(-ar));
            } else {
                adopted++;
            }
        }
        closedir(dp);
    }
    free(hbuf);
    if (r == 0 && (adopted || dropped || old_version || skipped))
        log_info("cache: %s: reused %ld blocks, discarded %ld torn, corrupt or temporary files and "
                 "%ld of "
                 "another format version, left %ld unreadable ones",
                 dir, adopted, dropped, old_version, skipped);
    return r;
}

long disk_count_files(const char *dir)
{
    long n = 0;
    for (int i = 0; i < 256; i++) {
        char sub[4096];
        snprintf(sub, sizeof(sub), "%s/%02x", dir, i);
        DIR *dp = opendir(sub);
        if (!dp)
            continue;
        struct dirent *de;
        uint8_t fid[16];
        while ((de = readdir(dp)) != NULL)
            if (parse_hex_id(de->d_name, fid))
                n++;
        closedir(dp);
    }
    return n;
}
