/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - leveled logging. See log.h. The level is a relaxed atomic so any thread may read it
 * without a lock; the sink is chosen once at start-up, before threads exist. Every message is
 * escaped here (tier_log_escape), in the one place all log lines pass, so no call site has to
 * remember to clean what a user named.
 */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static _Atomic int g_level = -1;
static bool g_syslog;
static bool g_journal;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int tier_log_level_parse(const char *s, enum tier_log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum tier_log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

void tier_log_set_level(enum tier_log_level level)
{
    atomic_store_explicit(&g_level, (int)level, memory_order_relaxed);
}

enum tier_log_level tier_log_get_level(void)
{
    int l = atomic_load_explicit(&g_level, memory_order_relaxed);
    if (l < 0) {
        enum tier_log_level parsed = TIER_LOG_INFO;
        const char *env = getenv("TIER_LOG_LEVEL");
        if (env)
            (void)tier_log_level_parse(env, &parsed);
        l = (int)parsed;
        atomic_store_explicit(&g_level, l, memory_order_relaxed);
    }
    return (enum tier_log_level)l;
}

void tier_log_use_journal(void)
{
    g_journal = true;
}

void tier_log_use_syslog(const char *ident)
{
    openlog(ident, LOG_PID, LOG_DAEMON);
    g_syslog = true;
}

size_t tier_log_escape(const char *in, char *out, size_t outsz)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    for (size_t i = 0; s[i]; i++) {
        unsigned char c = s[i];
        char e[8];
        size_t el = 0;
        /* a C1 control encoded in UTF-8 (0xc2 0x80..0x9f): both bytes escaped */
        bool c1 = c == 0xc2 && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f;
        if (c == '\n' || c == '\r' || c == '\t') {
            e[el++] = '\\';
            e[el++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20 || c == 0x7f || c1) {
            for (size_t k = 0; k < (c1 ? 2u : 1u); k++) {
                unsigned char b = s[i + k];
                e[el++] = '\\';
                e[el++] = 'x';
                e[el++] = hex[b >> 4];
                e[el++] = hex[b & 15];
            }
            i += c1;
        } else {
            e[el++] = (char)c;
        }
        if (o + el >= outsz)
            break;
        memcpy(out + o, e, el);
        o += el;
    }
    out[o] = '\0';
    return o;
}

void tier_log(enum tier_log_level level, const char *file, int line, const char *fmt, ...)
{
    if ((int)level > (int)tier_log_get_level())
        return;
    int saved = errno;
    char raw[2048], msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    tier_log_escape(raw, msg, sizeof(msg));

    if (g_syslog) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
        syslog(prio[level], "%s", msg);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        const char *base = strrchr(file, '/');
        char out[2304];
        static const int prio[] = {3, 4, 6, 7}; /* LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */
        int n = g_journal ? snprintf(out, sizeof(out), "<%d>%s:%d: %s\n", prio[level],
                                     base ? base + 1 : file, line, msg)
                          : snprintf(out, sizeof(out), "%02d:%02d:%02d.%03ld %-5s %s:%d: %s\n",
                                     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                                     level_names[level], base ? base + 1 : file, line, msg);
        if (n > (int)sizeof(out))
            n = (int)sizeof(out);
        if (n > 0 && write(STDERR_FILENO, out, (size_t)n) < 0) {
            /* Nowhere left to report a failed log write. */
        }
    }
    errno = saved;
}
