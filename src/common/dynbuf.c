/* SPDX-License-Identifier: Apache-2.0 */
/* dynbuf.c - bounded growable buffer. See dynbuf.h. */
#include "common/dynbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dynbuf_init(struct dynbuf *b, size_t max_bytes)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max_bytes = max_bytes;
}

void dynbuf_fini(struct dynbuf *b)
{
    free(b->data);
    dynbuf_init(b, b->max_bytes);
}

void dynbuf_reset(struct dynbuf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static int reserve(struct dynbuf *b, size_t extra)
{
    if (extra > b->max_bytes || b->len > b->max_bytes - extra)
        return -E2BIG;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    if (cap > b->max_bytes + 1)
        cap = b->max_bytes + 1;
    char *p = realloc(b->data, cap);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int dynbuf_append(struct dynbuf *b, const void *data, size_t len)
{
    int rc = reserve(b, len);
    if (rc)
        return rc;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int dynbuf_printf(struct dynbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    int rc = reserve(b, (size_t)n);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

char *dynbuf_take(struct dynbuf *b, size_t *len)
{
    char *p = b->data;
    if (len)
        *len = b->len;
    dynbuf_init(b, b->max_bytes);
    return p;
}
