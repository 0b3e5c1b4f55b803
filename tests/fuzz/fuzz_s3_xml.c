/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_s3_xml.c - libFuzzer target for the S3 backend's XML parsers (s3_xml.c): every input is fed
 * to the ListObjectsV2 and ListObjectVersions parsers (with and without a prefix to strip), the
 * ListMultipartUploads parser, the error document parser and
 * the single-value finder. Also built as a corpus-replay test (fuzz_s3_xml_replay) in CTest.
 * Checks what must hold for any input: no crash or leak, and a successful listing is well formed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tiers/s3_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The parsers take NUL-terminated documents, as s3.c hands them dynbuf contents. */
    char *doc = malloc(size + 1);
    if (!doc)
        return 0;
    memcpy(doc, data, size);
    doc[size] = '\0';

    static const char *strips[] = {"", "pfx/"};
    for (size_t s = 0; s < 2; s++) {
        struct backend_list_page pg;
        if (s3_xml_parse_list(doc, size, strips[s], &pg) == 0) {
            for (size_t i = 0; i < pg.n; i++) {
                if (!pg.entries[i].name || pg.entries[i].name[0] == '\0')
                    abort(); /* every entry has a non-empty name */
                if (i > 0 && strcmp(pg.entries[i - 1].name, pg.entries[i].name) > 0)
                    abort(); /* in key order */
            }
            if (pg.next_token && pg.next_token[0] == '\0')
                abort();
            backend_list_page_fini(&pg);
        } else if (pg.n != 0 || pg.entries || pg.next_token) {
            abort(); /* a failed parse leaves the page empty */
        }
        if (s3_xml_parse_versions(doc, size, strips[s], &pg) == 0) {
            for (size_t i = 0; i < pg.n; i++) {
                if (!pg.entries[i].name || pg.entries[i].name[0] == '\0' ||
                    !pg.entries[i].version_id || !pg.entries[i].version_id[0])
                    abort(); /* every version has a key and an id */
                if (i > 0 && strcmp(pg.entries[i - 1].name, pg.entries[i].name) > 0)
                    abort(); /* in key order */
            }
            backend_list_page_fini(&pg);
        } else if (pg.n != 0 || pg.entries || pg.next_token) {
            abort(); /* a failed parse leaves the page empty */
        }
        struct backend_mpu *v = NULL;
        size_t n = 0;
        char *nk = NULL, *nu = NULL;
        if (s3_xml_parse_uploads(doc, size, strips[s], "k", &v, &n, &nk, &nu) == 0) {
            for (size_t i = 0; i < n; i++)
                if (!v[i].upload_id || !v[i].upload_id[0])
                    abort(); /* every upload has an id */
            if (nk && !nk[0])
                abort(); /* a next page starts somewhere */
            backend_mpu_list_free(v, n);
            free(nk);
            free(nu);
        } else if (v || n || nk || nu) {
            abort(); /* a failed parse returns nothing */
        }
    }
    struct s3_error e;
    (void)s3_xml_parse_error(doc, size, &e);
    if (strlen(e.code) >= sizeof(e.code) || strlen(e.message) >= sizeof(e.message))
        abort();
    char out[64];
    (void)s3_xml_find_text(doc, size, "InitiateMultipartUploadResult", "UploadId", out,
                           sizeof(out));
    free(doc);
    return 0;
}
