/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_s3_uri.c - libFuzzer target for the S3 backend's URI encoding (s3_err.c): s3_uri_encode,
 * which builds every request path and query value from keys, and s3_uri_decode, which decodes
 * keys of EncodingType=url listings sent by the server. Also built as a corpus-replay test
 * (fuzz_s3_uri_replay) in CTest. Properties, for any input string x (bytes up to the first NUL):
 *   - encode(x) holds only unreserved characters (A-Z a-z 0-9 - _ . ~), '/' when keep_slash, and
 *     '%' followed by two upper-case hex digits;
 *   - decode(encode(x)) == x, in both modes;
 *   - decode of arbitrary (server) text never crashes, and never grows the string.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tiers/s3_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool unreserved(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

static bool upper_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

static void round_trip(const char *x, size_t xlen, bool keep_slash)
{
    struct dynbuf b;
    dynbuf_init(&b, xlen * 3 + 16);
    if (s3_uri_encode(&b, x, keep_slash) != 0) {
        dynbuf_fini(&b); /* only ENOMEM: the bound above fits any input */
        return;
    }
    const char *e = b.data ? b.data : "";
    for (size_t i = 0; i < b.len; i++) {
        if (e[i] == '%') {
            if (i + 2 >= b.len)
                abort(); /* a cut escape */
            if (!upper_hex(e[i + 1]) || !upper_hex(e[i + 2]))
                abort();
            i += 2;
        } else if (!(unreserved(e[i]) || (keep_slash && e[i] == '/'))) {
            abort();
        }
    }
    char *d = strdup(e);
    if (d) {
        if (s3_uri_decode(d) != 0 || strcmp(d, x) != 0)
            abort(); /* decode(encode(x)) == x */
        free(d);
    }
    dynbuf_fini(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *x = malloc(size + 1);
    if (!x)
        return 0;
    memcpy(x, data, size);
    x[size] = '\0';
    size_t xlen = strlen(x);
    round_trip(x, xlen, true);
    round_trip(x, xlen, false);
    /* Server text: decode in place, bounded by its own terminator. */
    if (s3_uri_decode(x) == 0 && strlen(x) > xlen)
        abort();
    free(x);
    return 0;
}
