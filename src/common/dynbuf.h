/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dynbuf.h - a growable byte buffer with a hard maximum size (after curl's dynbuf).
 *
 * Used for HTTP response bodies, JSON and XML documents: anything whose size an outside party
 * controls. Appending past max_bytes fails with -E2BIG instead of growing without bound. The
 * contents are always NUL-terminated so text can be handed to parsers directly. Not thread-safe;
 * the owner serialises access.
 */
#ifndef TIER_COMMON_DYNBUF_H
#define TIER_COMMON_DYNBUF_H

#include <stddef.h>

struct dynbuf {
    char *data;       /* NUL-terminated; NULL until the first append */
    size_t len;       /* bytes used, excluding the terminator */
    size_t cap;       /* bytes allocated */
    size_t max_bytes; /* hard limit on len */
};

void dynbuf_init(struct dynbuf *b, size_t max_bytes);
void dynbuf_fini(struct dynbuf *b);
void dynbuf_reset(struct dynbuf *b);                               /* len = 0, memory kept */
int dynbuf_append(struct dynbuf *b, const void *data, size_t len); /* 0, -E2BIG, -ENOMEM */
int dynbuf_printf(struct dynbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the buffer to the caller (free() it); b is left empty. Returns NULL if empty. */
char *dynbuf_take(struct dynbuf *b, size_t *len);

#endif
