/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_s3_headers.c - libFuzzer target for the S3 backend's response header parser (s3_hdr.c,
 * what s3.c's CURLOPT_HEADERFUNCTION runs on every header line a server sends): the input is
 * split into lines at '\n' (each keeps its '\n', as curl hands them over) and every line is
 * passed in its own exactly sized heap buffer, so reading one byte past a line is an ASan
 * report; then the whole input goes in as one line. Also built as a corpus-replay test
 * (fuzz_s3_headers_replay) in CTest. Checks what must hold for any input: no crash, no
 * undefined behaviour (a far-future Last-Modified once overflowed ns), the ETag stays a
 * NUL-terminated string inside its array, a time is never negative, and a status line resets
 * everything.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tiers/s3_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct s3_resp_headers *h)
{
    if (memchr(h->etag, '\0', sizeof(h->etag)) == NULL)
        abort(); /* the ETag is always terminated inside its array */
    if (h->mtime_ns < 0)
        abort();
}

static void feed(struct s3_resp_headers *h, const uint8_t *p, size_t n)
{
    char *line = malloc(n ? n : 1);
    if (!line)
        return;
    memcpy(line, p, n);
    s3_resp_header_line(h, line, n);
    check(h);
    if (n >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        if (h->etag[0] || h->mtime_ns || h->have_length || h->have_total)
            abort(); /* a new response starts with nothing of the last one */
    }
    free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct s3_resp_headers h;
    s3_resp_headers_reset(&h);
    size_t start = 0;
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\n') {
            feed(&h, data + start, i + 1 - start);
            start = i + 1;
        }
    }
    if (start < size)
        feed(&h, data + start, size - start);
    s3_resp_headers_reset(&h);
    feed(&h, data, size);
    return 0;
}
