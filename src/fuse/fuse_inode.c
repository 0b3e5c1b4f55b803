/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_inode.c - the inode table: mount paths <-> inode numbers, with the kernel's lookup counts.
 *
 * A node exists while the kernel holds lookups on it (nlookup > 0) or an operation holds it
 * (refs > 0); the root (ino 1) lives as long as the table. Inode numbers are never reused, so a
 * path that disappears and comes back gets a new number and the kernel cannot confuse the two.
 * Two chained hash maps (by ino, by path) share one mutex (tbl_mu); the critical sections are a
 * hash probe and a counter update, never I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/fuse_int.h"

static uint64_t hash_path(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static size_t ino_slot(const struct tierd_fuse *fs, uint64_t ino)
{
    return (size_t)((ino * 0x9E3779B97F4A7C15ULL) >> 17) & (fs->nbuckets - 1);
}

static size_t path_slot(const struct tierd_fuse *fs, const char *path)
{
    return (size_t)hash_path(path) & (fs->nbuckets - 1);
}

static void insert(struct tierd_fuse *fs, struct tfs_node *n)
{
    size_t i = ino_slot(fs, n->ino);
    n->next_ino = fs->by_ino[i];
    fs->by_ino[i] = n;
    size_t p = path_slot(fs, n->path);
    n->next_path = fs->by_path[p];
    fs->by_path[p] = n;
    fs->nnodes++;
}

/* Double the bucket arrays; on allocation failure keep the old (longer chains, still right). */
static void grow(struct tierd_fuse *fs)
{
    size_t nb = fs->nbuckets * 2;
    struct tfs_node **bi = calloc(nb, sizeof(*bi));
    struct tfs_node **bp = calloc(nb, sizeof(*bp));
    if (!bi || !bp) {
        free(bi);
        free(bp);
        return;
    }
    struct tfs_node **oi = fs->by_ino;
    size_t ob = fs->nbuckets;
    free(fs->by_path);
    fs->by_ino = bi;
    fs->by_path = bp;
    fs->nbuckets = nb;
    fs->nnodes = 0;
    for (size_t i = 0; i < ob; i++) {
        struct tfs_node *n = oi[i];
        while (n) {
            struct tfs_node *next = n->next_ino;
            insert(fs, n);
            n = next;
        }
    }
    free(oi);
}

static void unlink_node(struct tierd_fuse *fs, struct tfs_node *n)
{
    struct tfs_node **pp = &fs->by_ino[ino_slot(fs, n->ino)];
    while (*pp && *pp != n)
        pp = &(*pp)->next_ino;
    if (*pp)
        *pp = n->next_ino;
    pp = &fs->by_path[path_slot(fs, n->path)];
    while (*pp && *pp != n)
        pp = &(*pp)->next_path;
    if (*pp)
        *pp = n->next_path;
    fs->nnodes--;
}

static void node_free(struct tfs_node *n)
{
    if (n->listing)
        tfs_listing_unref(n->listing);
    if (n->rstate)
        n->rstate_free(n->rstate);
    pthread_cond_destroy(&n->list_cv);
    pthread_mutex_destroy(&n->mu);
    free(n->path);
    free(n);
}

static struct tfs_node *node_new(const struct tierd_fuse *fs, const char *path, uint64_t ino)
{
    struct tfs_node *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->path = strdup(path);
    if (!n->path) {
        free(n);
        return NULL;
    }
    n->ino = ino;
    n->perm = tfs_path_perm(fs, path);
    n->nsops = tfs_path_ops(fs, path);
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->list_cv, NULL);
    return n;
}

int tfs_table_init(struct tierd_fuse *fs)
{
    pthread_mutex_init(&fs->tbl_mu, NULL);
    fs->nbuckets = 1024;
    fs->by_ino = calloc(fs->nbuckets, sizeof(*fs->by_ino));
    fs->by_path = calloc(fs->nbuckets, sizeof(*fs->by_path));
    struct tfs_node *root = node_new(fs, "/", FUSE_ROOT_ID);
    if (!fs->by_ino || !fs->by_path || !root) {
        free(root);
        free(fs->by_ino);
        free(fs->by_path);
        fs->by_ino = fs->by_path = NULL;
        pthread_mutex_destroy(&fs->tbl_mu);
        return -ENOMEM;
    }
    root->nlookup = 1; /* the kernel's reference, never forgotten */
    insert(fs, root);
    fs->next_ino = FUSE_ROOT_ID + 1;
    return 0;
}

void tfs_table_fini(struct tierd_fuse *fs)
{
    if (!fs->by_ino)
        return;
    for (size_t i = 0; i < fs->nbuckets; i++) {
        struct tfs_node *n = fs->by_ino[i];
        while (n) {
            struct tfs_node *next = n->next_ino;
            node_free(n);
            n = next;
        }
    }
    free(fs->by_ino);
    free(fs->by_path);
    fs->by_ino = fs->by_path = NULL;
    for (size_t i = 0; i < fs->ngrave; i++)
        free(fs->graveyard[i]);
    free(fs->graveyard);
    fs->graveyard = NULL;
    fs->ngrave = fs->capgrave = 0;
    pthread_mutex_destroy(&fs->tbl_mu);
}

/* With tbl_mu held: give n a new path. The old string may still be read by an operation in
 * progress (paths are read without locks), so it goes to the graveyard, freed at fini. */
static int repath_locked(struct tierd_fuse *fs, struct tfs_node *n, char *np)
{
    if (fs->ngrave == fs->capgrave) {
        size_t nc = fs->capgrave ? fs->capgrave * 2 : 16;
        char **g = realloc(fs->graveyard, nc * sizeof(*g));
        if (!g)
            return -ENOMEM;
        fs->graveyard = g;
        fs->capgrave = nc;
    }
    struct tfs_node **pp = &fs->by_path[path_slot(fs, n->path)];
    while (*pp && *pp != n)
        pp = &(*pp)->next_path;
    if (*pp)
        *pp = n->next_path;
    fs->graveyard[fs->ngrave++] = n->path;
    n->path = np;
    n->nsops = tfs_path_ops(fs, np); /* as the path says: an unreachable one is no namespace's */
    size_t p = path_slot(fs, n->path);
    n->next_path = fs->by_path[p];
    fs->by_path[p] = n;
    return 0;
}

static struct tfs_node *find_path_locked(struct tierd_fuse *fs, const char *path)
{
    struct tfs_node *n = fs->by_path[path_slot(fs, path)];
    while (n && strcmp(n->path, path) != 0)
        n = n->next_path;
    return n;
}

int tfs_node_rename(struct tierd_fuse *fs, const char *old_path, const char *new_path)
{
    char *np = strdup(new_path);
    char dead[64];
    pthread_mutex_lock(&fs->tbl_mu);
    int rc = np ? 0 : -ENOMEM;
    struct tfs_node *victim = rc ? NULL : find_path_locked(fs, new_path);
    if (victim && victim->ino != FUSE_ROOT_ID) {
        /* an unreachable, unique path: the node lives on until forgotten */
        snprintf(dead, sizeof(dead), "\x01replaced/%llu", (unsigned long long)victim->ino);
        char *dp = strdup(dead);
        rc = dp ? repath_locked(fs, victim, dp) : -ENOMEM;
        if (rc)
            free(dp);
    }
    struct tfs_node *n = rc ? NULL : find_path_locked(fs, old_path);
    if (n && n->ino != FUSE_ROOT_ID) {
        rc = repath_locked(fs, n, np);
        if (rc == 0)
            np = NULL;
    }
    pthread_mutex_unlock(&fs->tbl_mu);
    free(np);
    return rc;
}

struct tfs_node *tfs_node_detach(struct tierd_fuse *fs, const char *path)
{
    char dead[64];
    pthread_mutex_lock(&fs->tbl_mu);
    struct tfs_node *n = find_path_locked(fs, path);
    if (n && n->ino != FUSE_ROOT_ID) {
        /* an unreachable, unique path: the node lives on (open handles) until forgotten */
        snprintf(dead, sizeof(dead), "\x01unlinked/%llu", (unsigned long long)n->ino);
        char *dp = strdup(dead);
        if (dp && repath_locked(fs, n, dp) == 0) {
            n->refs++;
        } else {
            free(dp);
            n = NULL;
        }
    } else {
        n = NULL;
    }
    pthread_mutex_unlock(&fs->tbl_mu);
    return n;
}

struct tfs_node *tfs_node_get(struct tierd_fuse *fs, uint64_t ino)
{
    pthread_mutex_lock(&fs->tbl_mu);
    struct tfs_node *n = fs->by_ino[ino_slot(fs, ino)];
    while (n && n->ino != ino)
        n = n->next_ino;
    if (n)
        n->refs++;
    pthread_mutex_unlock(&fs->tbl_mu);
    return n;
}

struct tfs_node *tfs_node_get_path(struct tierd_fuse *fs, const char *path)
{
    pthread_mutex_lock(&fs->tbl_mu);
    struct tfs_node *n = find_path_locked(fs, path);
    if (n)
        n->refs++;
    pthread_mutex_unlock(&fs->tbl_mu);
    return n;
}

struct tfs_node *tfs_node_get_or_stale(fuse_req_t req, struct tierd_fuse *fs, uint64_t ino)
{
    struct tfs_node *n = tfs_node_get(fs, ino);
    if (!n)
        fuse_reply_err(req, ESTALE);
    return n;
}

/* With tbl_mu held: free the node if nothing holds it any more. */
static void maybe_free_locked(struct tierd_fuse *fs, struct tfs_node *n)
{
    if (n->nlookup == 0 && n->refs == 0 && n->ino != FUSE_ROOT_ID) {
        unlink_node(fs, n);
        node_free(n);
    }
}

void tfs_node_put(struct tierd_fuse *fs, struct tfs_node *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&fs->tbl_mu);
    n->refs--;
    maybe_free_locked(fs, n);
    pthread_mutex_unlock(&fs->tbl_mu);
}

int tfs_node_lookup(struct tierd_fuse *fs, const char *path, struct tfs_node **out)
{
    pthread_mutex_lock(&fs->tbl_mu);
    struct tfs_node *n = fs->by_path[path_slot(fs, path)];
    while (n && strcmp(n->path, path) != 0)
        n = n->next_path;
    if (!n) {
        n = node_new(fs, path, fs->next_ino);
        if (!n) {
            pthread_mutex_unlock(&fs->tbl_mu);
            return -ENOMEM;
        }
        fs->next_ino++;
        if (fs->nnodes >= fs->nbuckets)
            grow(fs);
        insert(fs, n);
    }
    n->nlookup++;
    n->refs++;
    pthread_mutex_unlock(&fs->tbl_mu);
    *out = n;
    return 0;
}

void tfs_node_forget(struct tierd_fuse *fs, uint64_t ino, uint64_t nlookup)
{
    pthread_mutex_lock(&fs->tbl_mu);
    struct tfs_node *n = fs->by_ino[ino_slot(fs, ino)];
    while (n && n->ino != ino)
        n = n->next_ino;
    if (n && ino != FUSE_ROOT_ID) {
        n->nlookup = nlookup >= n->nlookup ? 0 : n->nlookup - nlookup;
        maybe_free_locked(fs, n);
    }
    pthread_mutex_unlock(&fs->tbl_mu);
}

int tfs_path_join(const char *parent, const char *name, char **out)
{
    size_t nl = strlen(name);
    if (nl > BACKEND_SEGMENT_MAX)
        return -ENAMETOOLONG;
    size_t pl = strlen(parent);
    bool root = pl == 1 && parent[0] == '/';
    if (pl + nl + 2 > BACKEND_KEY_MAX + 1024)
        return -ENAMETOOLONG;
    char *p = malloc(pl + nl + 2);
    if (!p)
        return -ENOMEM;
    size_t o = 0;
    if (!root) {
        memcpy(p, parent, pl);
        o = pl;
    }
    p[o++] = '/';
    memcpy(p + o, name, nl + 1);
    *out = p;
    return 0;
}

void tfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    tfs_node_forget(fs, ino, nlookup);
    fuse_reply_none(req);
}

void tfs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct tierd_fuse *fs = fuse_req_userdata(req);
    for (size_t i = 0; i < count; i++)
        tfs_node_forget(fs, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}
