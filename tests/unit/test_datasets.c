/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_datasets.c - the dataset versions service (datasets/dataset.h) opened with a context built
 * here, without a daemon: a POSIX backend in a scratch directory, the namespace /ds over its
 * prefix data/ and an empty one /x/y, and a resolver of its own over those two. Commit, list,
 * show (and its bound), delete, the view's listings, and the generation counter: moved by each
 * commit and delete through the service, by nothing that fails, and by nothing done through
 * another service over the same namespaces.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "datasets/dataset.h"
#include "tiers/backend.h"
#include "testutil.h"

struct fx {
    char *dir, *root;
    struct backend *be;
    char path0[8], path1[8], prefix0[8], prefix1[8], bname[8]; /* the namespaces' strings */
    struct tierd_ns_conf conf[2];
    struct tierd_ns ns[2];
    struct datasets *ds;
};

/* The daemon's resolution (src/daemon/resolve.c) reduced to what this test needs: a path equal
 * to a namespace's path or below it, to the namespace's prefix plus the rest. */
static int resolve(void *ud, const char *path, struct tierd_ns **ns, char **key, bool *is_root)
{
    struct fx *f = ud;
    for (size_t i = 0; i < 2; i++) {
        const char *np = f->conf[i].path;
        size_t nl = strlen(np);
        if (strncmp(path, np, nl) != 0 || (path[nl] != '\0' && path[nl] != '/'))
            continue;
        const char *rest = path[nl] == '/' ? path + nl + 1 : path + nl;
        size_t rl = strlen(rest);
        while (rl > 0 && rest[rl - 1] == '/')
            rl--;
        if (asprintf(key, "%s%.*s", f->conf[i].prefix, (int)rl, rest) < 0)
            return -ENOMEM;
        *ns = &f->ns[i];
        *is_root = rl == 0;
        return 0;
    }
    return -ENOENT;
}

static void put(struct fx *f, const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", f->root, rel);
    for (char *s = path + strlen(f->root) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        (void)mkdir(path, 0755);
        *s = '/';
    }
    tu_write_file(path, text, strlen(text));
}

static struct datasets *open_over(struct fx *f)
{
    struct datasets_ctx c = {.ns = f->ns, .nns = 2, .ops = {.resolve = resolve, .ud = f}};
    struct datasets *ds = datasets_open(&c);
    assert_non_null(ds);
    return ds;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->dir = tu_mkdtemp("datasets");
    assert_true(asprintf(&f->root, "%s/root", f->dir) > 0);
    assert_int_equal(mkdir(f->root, 0755), 0);
    put(f, "data/a/f1.txt", "one\n");
    put(f, "data/a/sub/f2.bin", "twotwo\n");
    put(f, "data/b/g.txt", "g\n");
    char other[4096];
    snprintf(other, sizeof(other), "%s/other", f->root);
    assert_int_equal(mkdir(other, 0755), 0);
    struct posix_backend_config pc = {.name = "warm", .root = f->root};
    assert_int_equal(backend_posix_open(&pc, &f->be), 0);
    snprintf(f->path0, sizeof(f->path0), "/ds");
    snprintf(f->prefix0, sizeof(f->prefix0), "data/");
    snprintf(f->path1, sizeof(f->path1), "/x/y");
    snprintf(f->prefix1, sizeof(f->prefix1), "other/");
    snprintf(f->bname, sizeof(f->bname), "warm");
    f->conf[0] = (struct tierd_ns_conf){
        .path = f->path0, .backend = f->bname, .prefix = f->prefix0, .mode = TIERD_NS_READ_CACHE};
    f->conf[1] = (struct tierd_ns_conf){
        .path = f->path1, .backend = f->bname, .prefix = f->prefix1, .mode = TIERD_NS_READ_CACHE};
    for (size_t i = 0; i < 2; i++)
        f->ns[i] = (struct tierd_ns){.conf = &f->conf[i], .be = f->be};
    f->ds = open_over(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    datasets_close(f->ds);
    backend_free(f->be);
    tu_rmtree(f->dir);
    free(f->root);
    free(f->dir);
    free(f);
    return 0;
}

static void assert_names(char **names, size_t n, const char *const *want, size_t nwant)
{
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(names[i], want[i]);
    dataset_names_free(names, n);
}

static void commit_ok(struct fx *f, const char *path, const char *name)
{
    struct manifest m;
    assert_int_equal(dataset_commit(f->ds, path, name, &m), 0);
    manifest_fini(&m);
}

/* A commit records the tree's files; the generation moves once per commit that succeeds. */
static void test_commit(void **state)
{
    struct fx *f = *state;
    assert_int_equal(dataset_generation(f->ds), 0);
    struct manifest m;
    assert_int_equal(dataset_commit(f->ds, "/ds/a/", "v1", &m), 0);
    assert_string_equal(m.name, "v1");
    assert_string_equal(m.path, "/ds/a");
    assert_string_equal(m.ns, "/ds");
    assert_string_equal(m.backend, "warm");
    assert_string_equal(m.prefix, "data/a/");
    assert_int_equal(m.n, 2);
    assert_string_equal(m.files[0].key, "f1.txt");
    assert_int_equal(m.files[0].size, 4);
    assert_string_equal(m.files[1].key, "sub/f2.bin");
    assert_int_equal(m.files[1].size, 7);
    assert_int_equal(m.bytes, 11);
    manifest_fini(&m);
    assert_int_equal(dataset_generation(f->ds), 1);
    /* published in the namespace's backend under the reserved name, create-only */
    char key[4096];
    snprintf(key, sizeof(key), "%s/data/" DATASET_RESERVED "/a/@v1", f->root);
    struct stat st;
    assert_int_equal(stat(key, &st), 0);

    /* refused: the name taken, a bad name, a path in no namespace, nothing under the path, the
     * reserved tree; none moves the generation */
    assert_int_equal(dataset_commit(f->ds, "/ds/a", "v1", &m), -EEXIST);
    assert_int_equal(dataset_commit(f->ds, "/ds/a", "-v", &m), -EINVAL);
    assert_int_equal(dataset_commit(f->ds, "/nowhere", "v2", &m), -ENOENT);
    assert_int_equal(dataset_commit(f->ds, "/ds/none", "v2", &m), -ENOENT);
    assert_int_equal(dataset_commit(f->ds, "/ds/" DATASET_RESERVED, "v2", &m), -EINVAL);
    assert_int_equal(dataset_generation(f->ds), 1);

    /* the namespace root: every file but the manifests */
    assert_int_equal(dataset_commit(f->ds, "/ds", "all", &m), 0);
    assert_int_equal(m.n, 3);
    assert_string_equal(m.files[0].key, "a/f1.txt");
    assert_string_equal(m.files[2].key, "b/g.txt");
    manifest_fini(&m);
    assert_int_equal(dataset_generation(f->ds), 2);
}

/* list, show and delete; the view's listings of the namespaces and versions. */
static void test_list_show_delete(void **state)
{
    struct fx *f = *state;
    char **names = NULL;
    size_t n = 0;
    assert_int_equal(dataset_list(f->ds, "/ds/a", &names, &n), 0);
    assert_names(names, n, NULL, 0);
    commit_ok(f, "/ds/a", "v2");
    commit_ok(f, "/ds/a", "v1");
    commit_ok(f, "/ds/a/sub", "s1");
    assert_int_equal(dataset_generation(f->ds), 3);
    assert_int_equal(dataset_list(f->ds, "/ds/a", &names, &n), 0);
    assert_names(names, n, (const char *const[]){"v1", "v2"}, 2);
    assert_int_equal(dataset_list(f->ds, "/ds/a/sub", &names, &n), 0);
    assert_names(names, n, (const char *const[]){"s1"}, 1);
    assert_int_equal(dataset_list(f->ds, "/nowhere", &names, &n), -ENOENT);

    struct manifest m;
    assert_int_equal(dataset_show(f->ds, "/ds/a", "v1", &m), 0);
    assert_string_equal(m.name, "v1");
    assert_int_equal(m.n, 2);
    assert_string_equal(m.files[1].key, "sub/f2.bin");
    manifest_fini(&m);
    assert_int_equal(dataset_show(f->ds, "/ds/a", "v9", &m), -ENOENT);
    assert_int_equal(dataset_show(f->ds, "/ds/b", "v1", &m), -ENOENT);
    assert_int_equal(dataset_show_max(f->ds, "/ds/a", "v1", 16, &m), -E2BIG);
    assert_int_equal(dataset_show_max(f->ds, "/ds/a", "v1", 1 << 20, &m), 0);
    manifest_fini(&m);

    /* the view: the namespaces' first segments at its root; in /ds the trees with versions
     * and the versions of the trees just under it */
    bool partial = true;
    assert_int_equal(dataset_view_list(f->ds, DATASET_VIEW, &names, &n, &partial), 0);
    assert_false(partial);
    assert_names(names, n, (const char *const[]){"ds", "x"}, 2);
    assert_int_equal(dataset_view_list(f->ds, DATASET_VIEW "/ds", &names, &n, NULL), 0);
    assert_names(names, n, (const char *const[]){"a", "a@v1", "a@v2"}, 3);
    assert_int_equal(dataset_view_list(f->ds, DATASET_VIEW "/ds/a", &names, &n, NULL), 0);
    assert_names(names, n, (const char *const[]){"sub", "sub@s1"}, 2);
    assert_int_equal(dataset_view_list(f->ds, DATASET_VIEW "/x", &names, &n, NULL), 0);
    assert_names(names, n, (const char *const[]){"y"}, 1);
    assert_int_equal(dataset_view_list(f->ds, "/elsewhere", &names, &n, NULL), -EINVAL);

    /* delete: the manifest only, once */
    assert_int_equal(dataset_delete(f->ds, "/ds/a", "v1"), 0);
    assert_int_equal(dataset_generation(f->ds), 4);
    assert_int_equal(dataset_delete(f->ds, "/ds/a", "v1"), -ENOENT);
    assert_int_equal(dataset_delete(f->ds, "/ds/a", "../v1"), -EINVAL);
    assert_int_equal(dataset_generation(f->ds), 4);
    assert_int_equal(dataset_show(f->ds, "/ds/a", "v1", &m), -ENOENT);
    assert_int_equal(dataset_list(f->ds, "/ds/a", &names, &n), 0);
    assert_names(names, n, (const char *const[]){"v2"}, 1);
    char file[4096];
    snprintf(file, sizeof(file), "%s/data/a/f1.txt", f->root);
    struct stat st;
    assert_int_equal(stat(file, &st), 0); /* the data stays */
    /* the name is free again */
    commit_ok(f, "/ds/a", "v1");
    assert_int_equal(dataset_generation(f->ds), 5);
}

/* Each service counts what went through it: a second one over the same namespaces sees the
 * first one's versions in the backend, and its own generation does not move for them. */
static void test_generation_per_service(void **state)
{
    struct fx *f = *state;
    struct datasets *other = open_over(f);
    commit_ok(f, "/ds/b", "v1");
    assert_int_equal(dataset_generation(f->ds), 1);
    assert_int_equal(dataset_generation(other), 0);
    char **names = NULL;
    size_t n = 0;
    assert_int_equal(dataset_list(other, "/ds/b", &names, &n), 0);
    assert_names(names, n, (const char *const[]){"v1"}, 1);
    assert_int_equal(dataset_delete(other, "/ds/b", "v1"), 0);
    assert_int_equal(dataset_generation(other), 1);
    assert_int_equal(dataset_generation(f->ds), 1);
    datasets_close(other);
    datasets_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_show_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_generation_per_service, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
