/* SPDX-License-Identifier: Apache-2.0 */
/* err.c - per-thread error detail. See err.h. */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char t_msg[1024];

void tier_err_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_msg, sizeof(t_msg), fmt, ap);
    va_end(ap);
}

void tier_err_clear(void)
{
    t_msg[0] = '\0';
}

const char *tier_err_msg(void)
{
    return t_msg;
}
