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
#include <stdint.h>
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

/* The length of the valid UTF-8 sequence of two to four bytes at s (no overlong form, no
 * surrogate, nothing above U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *s, uint32_t *cp_out)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07u;
    } else {
        return 0;
    }
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80) /* the terminating NUL stops it too */
            return 0;
        cp = cp << 6 | (s[k] & 0x3fu);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    *cp_out = cp;
    return n;
}

/* A character a terminal obeys or hides rather than shows: C1 controls (U+0080..U+009F), the
 * zero-width ones and the direction marks (U+200B..U+200F), the line and paragraph separators
 * and the direction embeddings and overrides (U+2028..U+202E), the direction isolates
 * (U+2066..U+2069) and the byte order mark (U+FEFF): a log line must read as what it holds. */
static bool invisible(uint32_t cp)
{
    return cp <= 0x9f || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

size_t tier_utf8_cut(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t lead = len;
    /* back over at most three continuation bytes to the byte that starts them */
    while (lead > 0 && len - lead < 3 && (u[lead - 1] & 0xc0) == 0x80)
        lead--;
    if (lead == 0)
        return len;
    unsigned char c = u[lead - 1];
    size_t want = c >= 0xc2 && c <= 0xdf   ? 2
                  : c >= 0xe0 && c <= 0xef ? 3
                  : c >= 0xf0 && c <= 0xf4 ? 4
                                           : 0;
    return want && len - (lead - 1) < want ? lead - 1 : len;
}

size_t tier_log_escape(const char *in, char *out, size_t outsz)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    for (size_t i = 0; s[i];) {
        unsigned char c = s[i];
        char e[16];
        size_t el = 0, used = 1;
        uint32_t cp = 0;
        size_t seq = c >= 0x80 ? utf8_seq(s + i, &cp) : 0;
        if (c == '\n' || c == '\r' || c == '\t' || c == '\\') {
            e[el++] = '\\';
            e[el++] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
        } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !seq) || (seq && invisible(cp))) {
            /* a control byte, a byte of no valid UTF-8 sequence, or a character that changes
             * how a line reads without showing (invisible()): each byte as \xNN */
            used = seq ? seq : 1;
            for (size_t k = 0; k < used; k++) {
                unsigned char b = s[i + k];
                e[el++] = '\\';
                e[el++] = 'x';
                e[el++] = hex[b >> 4];
                e[el++] = hex[b & 15];
            }
        } else {
            used = seq ? seq : 1; /* a whole character, never a part of one */
            memcpy(e, s + i, used);
            el = used;
        }
        if (o + el >= outsz)
            break;
        memcpy(out + o, e, el);
        o += el;
        i += used;
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
    int rn = vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    if (rn >= (int)sizeof(raw)) /* cut: not in the middle of a character */
        raw[tier_utf8_cut(raw, sizeof(raw) - 1)] = '\0';
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
