/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_dataset.c - the file list a run reads. A dataset made by `tierbench gen` lives in
 * DIR/samples (one file per sample) or DIR/shards (large files cut into records); any other
 * directory is walked whole, so tierbench can also read an existing dataset. Paths are sorted so
 * a seed gives the same order on every file system. Main thread only; read-only during a run.
 */
#include "tierbench/tb.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/strutil.h"

struct walk {
    char **paths;
    uint64_t *sizes;
    size_t n, cap;
    const char *skip;
    size_t skiplen;
    int err;
};

static _Thread_local struct walk *cur_walk;

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    struct walk *w = cur_walk;
    if (type == FTW_D && w->skip && strncmp(path, w->skip, w->skiplen) == 0 &&
        (path[w->skiplen] == '\0' || path[w->skiplen] == '/'))
        return FTW_SKIP_SUBTREE;
    if (type == FTW_D && ftw->level > 0 && strcmp(path + ftw->base, TB_CKPT_DEFAULT_SUBDIR) == 0)
        return FTW_SKIP_SUBTREE;
    if (type != FTW_F || !S_ISREG(st->st_mode) || st->st_size == 0)
        return FTW_CONTINUE;
    const char *base = strrchr(path, '/');
    if (base && strcmp(base + 1, "tierbench-dataset.txt") == 0)
        return FTW_CONTINUE; /* gen's manifest is not data */
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 1024;
        char **p = realloc(w->paths, cap * sizeof(*p));
        if (!p)
            goto nomem;
        w->paths = p;
        uint64_t *s = realloc(w->sizes, cap * sizeof(*s));
        if (!s)
            goto nomem;
        w->sizes = s;
        w->cap = cap;
    }
    w->paths[w->n] = strdup(path);
    if (!w->paths[w->n])
        goto nomem;
    w->sizes[w->n++] = (uint64_t)st->st_size;
    return FTW_CONTINUE;
nomem:
    w->err = -ENOMEM;
    return FTW_STOP;
}

struct pair {
    char *path;
    uint64_t size;
};

static int cmp_pair(const void *a, const void *b)
{
    return strcmp(((const struct pair *)a)->path, ((const struct pair *)b)->path);
}

void tb_dataset_fini(struct tb_dataset *ds)
{
    for (size_t i = 0; i < ds->nfiles; i++)
        free(ds->paths[i]);
    free(ds->paths);
    free(ds->sizes);
    free(ds->items);
    memset(ds, 0, sizeof(*ds));
}

int tb_dataset_load(struct tb_dataset *ds, const char *dir, const char *skip_dir,
                    uint64_t record_bytes, char *err, size_t errsz)
{
    struct walk w = {.skip = skip_dir, .skiplen = skip_dir ? strlen(skip_dir) : 0};
    char root[PATH_MAX];
    struct stat st;
    int rc = 0;

    memset(ds, 0, sizeof(*ds));
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errsz, "%s: not a directory (create a dataset with: tierbench gen %s)", dir,
                 dir);
        return -ENOTDIR;
    }
    snprintf(root, sizeof(root), "%s/samples", dir);
    tier_strlcpy(ds->layout, "samples", sizeof(ds->layout));
    if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(root, sizeof(root), "%s/shards", dir);
        tier_strlcpy(ds->layout, "shards", sizeof(ds->layout));
        if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode)) {
            tier_strlcpy(root, dir, sizeof(root));
            tier_strlcpy(ds->layout, "tree", sizeof(ds->layout));
        }
    }
    if (strcmp(ds->layout, "shards") == 0 && record_bytes == 0)
        record_bytes = 1 << 20; /* shards hold many samples; default record 1 MiB */

    cur_walk = &w;
    if (nftw(root, walk_cb, 32, FTW_PHYS | FTW_ACTIONRETVAL) < 0 && !w.err)
        w.err = -errno;
    cur_walk = NULL;
    if (w.err) {
        rc = w.err;
        snprintf(err, errsz, "%s: cannot list the dataset: %s", root, strerror(-rc));
        goto fail;
    }
    if (w.n == 0) {
        rc = -ENOENT;
        snprintf(err, errsz, "%s: no data files (create a dataset with: tierbench gen %s)", dir,
                 dir);
        goto fail;
    }
    struct pair *pairs = malloc(w.n * sizeof(*pairs));
    if (!pairs) {
        rc = -ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < w.n; i++)
        pairs[i] = (struct pair){w.paths[i], w.sizes[i]};
    qsort(pairs, w.n, sizeof(*pairs), cmp_pair);
    for (size_t i = 0; i < w.n; i++) {
        w.paths[i] = pairs[i].path;
        w.sizes[i] = pairs[i].size;
    }
    free(pairs);

    size_t nitems = 0;
    for (size_t i = 0; i < w.n; i++)
        nitems += record_bytes ? (size_t)((w.sizes[i] + record_bytes - 1) / record_bytes) : 1;
    ds->items = calloc(nitems, sizeof(*ds->items));
    if (!ds->items) {
        rc = -ENOMEM;
        goto fail;
    }
    size_t k = 0;
    for (size_t i = 0; i < w.n; i++) {
        ds->total_bytes += w.sizes[i];
        uint64_t rec = record_bytes ? record_bytes : w.sizes[i];
        for (uint64_t off = 0; off < w.sizes[i]; off += rec) {
            uint64_t len = w.sizes[i] - off < rec ? w.sizes[i] - off : rec;
            ds->items[k++] = (struct tb_item){.file = (uint32_t)i, .off = off, .len = len};
        }
    }
    ds->nitems = k;
    ds->paths = w.paths;
    ds->sizes = w.sizes;
    ds->nfiles = w.n;
    return 0;
fail:
    for (size_t i = 0; i < w.n; i++)
        free(w.paths[i]);
    free(w.paths);
    free(w.sizes);
    free(ds->items);
    ds->items = NULL;
    return rc;
}
