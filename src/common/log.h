/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - leveled logging to stderr or syslog.
 *
 * Called from every module and thread. Each message is formatted into a stack buffer and written
 * with a single write(2) (or syslog(3)) so concurrent lines never interleave; no lock is taken.
 * Log an error once, where it is handled (STYLE.md).
 *
 * Messages carry names users choose (paths, hint-file lines, job and tenant names): every
 * formatted message passes through tier_log_escape() before it is written, so no caller can put
 * a line break, a carriage return or a terminal escape sequence into the log.
 */
#ifndef TIER_COMMON_LOG_H
#define TIER_COMMON_LOG_H

#include <stddef.h>

enum tier_log_level {
    TIER_LOG_ERR = 0,
    TIER_LOG_WARN = 1,
    TIER_LOG_INFO = 2,
    TIER_LOG_DEBUG = 3,
};

/* Set the threshold; messages above it are dropped. Default: INFO, or $TIER_LOG_LEVEL. */
void tier_log_set_level(enum tier_log_level level);
enum tier_log_level tier_log_get_level(void);

/* Parse "error", "warn", "info", "debug". Returns 0 or -EINVAL. */
int tier_log_level_parse(const char *s, enum tier_log_level *out);

/* Send messages to syslog (ident is borrowed for the process lifetime) instead of stderr. */
void tier_log_use_syslog(const char *ident);
/* stderr is the systemd journal (JOURNAL_STREAM): each line starts with its syslog priority,
 * "<3>" .. "<7>", which journald takes as the entry's priority, and carries no timestamp (the
 * journal has its own). Call before threads start. */
void tier_log_use_journal(void);

/* Copy the NUL-terminated in to out (outsz bytes, outsz >= 1, always NUL-terminated) with every
 * control byte escaped: LF, CR, TAB and the backslash as the two characters \n, \r, \t and
 * \\ (so an escape in the log cannot be forged); every other byte below 0x20, 0x7f, each byte
 * that is not part of a valid UTF-8 sequence (so no raw 0x80..0x9f, which some terminals take as
 * C1 controls) and the UTF-8 encodings of U+0080..U+009F as \xNN per byte. Printable ASCII and
 * valid UTF-8 characters are kept whole. An escape or character that does not fit whole is left out
 * with everything after it. Returns the length of out. */
size_t tier_log_escape(const char *in, char *out, size_t outsz);

/* len, or less: without the incomplete UTF-8 sequence s[0..len) ends with (a cut text's last
 * character). */
size_t tier_utf8_cut(const char *s, size_t len);

void tier_log(enum tier_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define log_err(...) tier_log(TIER_LOG_ERR, __FILE__, __LINE__, __VA_ARGS__)
#define log_warn(...) tier_log(TIER_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define log_info(...) tier_log(TIER_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (tier_log_get_level() >= TIER_LOG_DEBUG)                                                \
            tier_log(TIER_LOG_DEBUG, __FILE__, __LINE__, __VA_ARGS__);                             \
    } while (0)

#endif
