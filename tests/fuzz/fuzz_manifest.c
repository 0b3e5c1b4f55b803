/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_manifest.c - libFuzzer target for dataset-version manifests (datasets/manifest.h:
 * manifest_decode), which tierd reads back from the backend, where anyone with the bucket's keys
 * may have written them. Any input either decodes into a manifest whose files are in strictly
 * ascending key order and whose totals match, which encodes and decodes again to the same
 * manifest, or fails with -EINVAL and a message; nothing leaks.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    struct manifest m;
    char err[256] = "";
    int rc = manifest_decode((const char *)data, size, &m, err, sizeof(err));
    if (rc != 0) {
        if (rc != -EINVAL && rc != -ENOMEM)
            abort();
        if (rc == -EINVAL && !err[0])
            abort(); /* a refusal always says why */
        return 0;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < m.n; i++) {
        if (i > 0 && strcmp(m.files[i - 1].key, m.files[i].key) >= 0)
            abort();
        bytes += m.files[i].size;
    }
    if (bytes != m.bytes)
        abort();
    char *text = NULL;
    size_t len = 0;
    if (manifest_encode(&m, &text, &len) == 0) {
        struct manifest again;
        if (manifest_decode(text, len, &again, err, sizeof(err)) != 0 || again.n != m.n ||
            again.bytes != m.bytes || strcmp(again.commit_id, m.commit_id) != 0)
            abort();
        for (size_t i = 0; i < m.n; i++)
            if (strcmp(again.files[i].key, m.files[i].key) != 0 ||
                strcmp(again.files[i].etag, m.files[i].etag) != 0 ||
                again.files[i].size != m.files[i].size)
                abort();
        manifest_fini(&again);
        free(text);
    }
    manifest_fini(&m);
    return 0;
}
