/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_crash.c - crash test of the cache's disk level. A child process reads random blocks
 * through a cache over the POSIX backend (so it keeps writing block files and evicting) and
 * reports each finished read through a pipe; the parent SIGKILLs it after a random number of
 * reports plus a random spin, in several seeded cycles. After each kill the parent also tears one
 * block file (truncation, as a power loss would), then reopens the cache and checks: no temp
 * file survives the open, every block served matches the backend file, the index agrees with the
 * files on disk. Seed: $TIER_CACHE_CRASH_SEED (default 12345).
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache/cache.h"
#include "cache/cache_debug.h"
#include "common/strutil.h"
#include "testutil.h"
#include "tiers/backend.h"

#define BS (64u << 10)
#define NOBJ 6
#define OBJ_SIZE (10 * BS + 777)
#define CYCLES 8

struct world {
    char *root, *dir;
    struct backend *be;
    char etag[NOBJ][BACKEND_ETAG_MAX];
    char *data[NOBJ];
    struct cache_config cfg;
};

static void key_of(int i, char *key, size_t sz)
{
    snprintf(key, sz, "ds/shard-%d.bin", i);
}

static void child_main(struct world *w, int wfd, uint64_t seed)
{
    struct cache *c = NULL;
    if (cache_open(&w->cfg, &c) < 0)
        _exit(2);
    char *buf = malloc(BS);
    char key[64];
    uint64_t rng = seed;
    for (int n = 0; n < 100000; n++) {
        int i = (int)(tu_rand_next(&rng) % NOBJ);
        uint64_t blk = tu_rand_next(&rng) % ((OBJ_SIZE + BS - 1) / BS);
        key_of(i, key, sizeof(key));
        struct cache_obj o = {.be = w->be, .key = key, .etag = w->etag[i], .size_bytes = OBJ_SIZE};
        if (cache_read(c, NULL, &o, blk * BS, buf, BS) < 0)
            _exit(3);
        char one = 1;
        if (write(wfd, &one, 1) != 1)
            _exit(4);
    }
    _exit(0);
}

static long count_suffix(const char *dir, const char *suffix, bool unlink_some, uint64_t *rng)
{
    long n = 0;
    for (int i = 0; i < 256; i++) {
        char sub[4200];
        snprintf(sub, sizeof(sub), "%s/%02x", dir, i);
        DIR *dp = opendir(sub);
        if (!dp)
            continue;
        struct dirent *de;
        while ((de = readdir(dp)) != NULL) {
            size_t l = strlen(de->d_name), sl = strlen(suffix);
            if (de->d_name[0] == '.' || l < sl || strcmp(de->d_name + l - sl, suffix))
                continue;
            if (!sl && strchr(de->d_name, '.'))
                continue;
            n++;
            if (unlink_some && n == 1 + (long)(*rng % 3)) {
                /* tear this block: keep a random prefix of it */
                char p[4500];
                snprintf(p, sizeof(p), "%s/%s", sub, de->d_name);
                struct stat st;
                if (stat(p, &st) == 0 && st.st_size > 1)
                    assert_int_equal(truncate(p, (off_t)(*rng % (uint64_t)st.st_size)), 0);
                unlink_some = false;
            }
        }
        closedir(dp);
    }
    return n;
}

static void verify(struct world *w, int cycle)
{
    struct cache *c = NULL;
    assert_int_equal(cache_open(&w->cfg, &c), 0);
    assert_int_equal(count_suffix(w->dir, ".tmp", false, NULL), 0);
    char *buf = malloc(OBJ_SIZE);
    char key[64];
    for (int i = 0; i < NOBJ; i++) {
        key_of(i, key, sizeof(key));
        struct cache_obj o = {.be = w->be, .key = key, .etag = w->etag[i], .size_bytes = OBJ_SIZE};
        assert_int_equal(cache_read(c, NULL, &o, 0, buf, OBJ_SIZE), OBJ_SIZE);
        assert_memory_equal(buf, w->data[i], OBJ_SIZE);
    }
    struct cache_stats st;
    cache_stats_get(c, &st);
    char msg[256] = "";
    int r = cache_debug_check(c, msg, sizeof(msg));
    if (r)
        print_message("check: %s\n", msg);
    assert_int_equal(r, 0);
    print_message("cycle %d: after reopen %llu blocks served from disk, %llu fetched, "
                  "%llu checksum failures\n",
                  cycle, (unsigned long long)st.disk.hits, (unsigned long long)st.fetches,
                  (unsigned long long)st.checksum_failures);
    free(buf);
    cache_close(c);
}

static void test_kill9_cycles(void **state)
{
    (void)state;
    uint64_t seed = 12345;
    const char *env = getenv("TIER_CACHE_CRASH_SEED");
    if (env && tier_parse_u64(env, &seed) < 0)
        fail_msg("bad TIER_CACHE_CRASH_SEED");
    print_message("seed %llu\n", (unsigned long long)seed);
    struct world w = {0};
    w.root = tu_mkdtemp("cache_crash_root");
    w.dir = tu_mkdtemp("cache_crash_dir");
    struct posix_backend_config pc = {.name = "warm", .root = w.root};
    assert_int_equal(backend_posix_open(&pc, &w.be), 0);
    char key[64];
    for (int i = 0; i < NOBJ; i++) {
        key_of(i, key, sizeof(key));
        w.data[i] = malloc(OBJ_SIZE);
        tu_fill_random(w.data[i], OBJ_SIZE, seed + (uint64_t)i);
        assert_int_equal(backend_put(w.be, NULL, key, w.data[i], OBJ_SIZE, w.etag[i]), 0);
    }
    /* disk holds ~2/3 of the data set, so the child evicts (unlinks) as well as writes */
    w.cfg = (struct cache_config){
        .block_size = BS, .ram_bytes = 4 * BS, .disk_dir = w.dir, .disk_bytes = 40 * BS};
    uint64_t rng = seed;
    for (int cycle = 0; cycle < CYCLES; cycle++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child_main(&w, fds[1], seed * 31 + (uint64_t)cycle);
        }
        close(fds[1]);
        long want = 1 + (long)(tu_rand_next(&rng) % 60), got = 0;
        char b;
        while (got < want && read(fds[0], &b, 1) == 1)
            got++;
        /* a random spin moves the kill off the report boundary, into the next block's I/O */
        volatile uint64_t spin = tu_rand_next(&rng) % 2000000;
        while (spin)
            spin = spin - 1;
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        close(fds[0]);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        long tmps = count_suffix(w.dir, ".tmp", false, NULL);
        long blocks = count_suffix(w.dir, "", true, &rng); /* and tear one */
        print_message("cycle %d: killed after %ld reads; %ld block files, %ld temp files left\n",
                      cycle, got, blocks, tmps);
        verify(&w, cycle);
    }
    for (int i = 0; i < NOBJ; i++)
        free(w.data[i]);
    backend_free(w.be);
    tu_rmtree(w.root);
    tu_rmtree(w.dir);
    free(w.root);
    free(w.dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill9_cycles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
