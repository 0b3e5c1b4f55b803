/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_hintlines.c - libFuzzer target for the hint control file's text (hints/hintlines.h:
 * hintlines_parse), which any user of the mount may write. The first input byte picks the mount
 * point ("/mnt", "/", "/mnt/"), the rest is the file. Any input either parses, with every path a
 * NUL-free string starting with '/' inside the buffer and line numbers rising, or fails with
 * -EINVAL / -E2BIG and a message naming the line; nothing leaks.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "hints/hintlines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 256 * 1024)
        return 0;
    static const char *const mounts[] = {"/mnt", "/", "/mnt/"};
    const char *mp = mounts[data[0] % 3];
    size_t len = size - 1;
    char *buf = malloc(len + 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, len);
    const char **paths = NULL;
    uint32_t *lines = NULL;
    size_t n = 0;
    uint64_t last = 0;
    bool append = false;
    tier_err_clear();
    int rc = hintlines_parse(mp, buf, len, 0, 1000, &paths, &lines, &n, &last, &append);
    if (rc == 0) {
        if (n > 1000 || last > len + 1)
            abort();
        for (size_t i = 0; i < n; i++) {
            if (paths[i] < buf || paths[i] > buf + len || paths[i][0] != '/')
                abort();
            if (paths[i] + strlen(paths[i]) > buf + len)
                abort(); /* ends inside the buffer */
            if (i > 0 && lines[i] <= lines[i - 1])
                abort();
        }
        free(paths);
        free(lines);
    } else if (rc == -EINVAL) {
        if (strncmp(tier_err_msg(), "line ", 5) != 0)
            abort(); /* every refusal names its line */
    } else if (rc != -E2BIG && rc != -ENOMEM) {
        abort();
    }
    free(buf);
    return 0;
}
