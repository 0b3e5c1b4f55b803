/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hintlines.c - the text of a hint control file (hintlines.h).
 */
#include "hints/hintlines.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

int hintlines_path(const char *mountpoint, const char *line, size_t ll, uint64_t lineno,
                   const char **path)
{
    *path = NULL;
    if (ll == 0)
        return 0;
    if (strlen(line) != ll) {
        tier_err_set("line %" PRIu64 " holds a NUL byte", lineno);
        return -EINVAL;
    }
    if (line[0] == '#')
        return 0;
    const char *mp = mountpoint ? mountpoint : "";
    size_t ml = strlen(mp);
    while (ml > 1 && mp[ml - 1] == '/')
        ml--;
    if (ml > 1 && strncmp(line, mp, ml) == 0 && line[ml] == '/')
        line += ml;
    if (line[0] != '/') {
        tier_err_set("line %" PRIu64 " '%.200s': not a path of the mount (/NAMESPACE/FILE, or "
                     "%.*s/NAMESPACE/FILE)",
                     lineno, line, (int)ml, mp);
        return -EINVAL;
    }
    *path = line;
    return 0;
}

int hintlines_parse(const char *mountpoint, char *buf, size_t len, uint64_t line0, size_t max_paths,
                    const char ***pathsp, uint32_t **linesp, size_t *np, uint64_t *lastp,
                    bool *append)
{
    char *p = buf, *end = buf ? buf + len : NULL;
    if (buf)
        buf[len] = '\0';
    /* paths are the lines that start with neither a newline nor '#' (at most) */
    size_t max = 1;
    for (const char *q = p; q && q < end; q++)
        max += (q == p || q[-1] == '\n') && *q != '\n' && *q != '#';
    if (max > max_paths + 1) {
        tier_err_set("more than %zu paths: at most %zu per hint set", max_paths, max_paths);
        return -E2BIG;
    }
    const char **paths = calloc(max, sizeof(*paths));
    uint32_t *lines = calloc(max, sizeof(*lines));
    if (!paths || !lines) {
        free(paths);
        free(lines);
        return -ENOMEM;
    }
    size_t n = 0;
    uint64_t lineno = line0;
    int rc = 0;
    while (p && p < end && rc == 0) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        *le = '\0'; /* buf[len] is a NUL already */
        lineno++;
        size_t ll = (size_t)(le - p);
        if (ll > 0 && p[ll - 1] == '\r')
            p[--ll] = '\0';
        const char *line = p, *path = NULL;
        p = le + 1;
        if (lineno == 1 && strcmp(line, "#append") == 0)
            *append = true;
        rc = hintlines_path(mountpoint, line, ll, lineno, &path);
        if (rc == 0 && path) {
            lines[n] = lineno > UINT32_MAX ? UINT32_MAX : (uint32_t)lineno;
            paths[n++] = path;
        }
    }
    if (rc) {
        free(paths);
        free(lines);
        return rc;
    }
    *pathsp = paths;
    *linesp = lines;
    *np = n;
    *lastp = lineno;
    return 0;
}
