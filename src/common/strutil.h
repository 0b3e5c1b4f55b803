/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strutil.h - bounded string helpers replacing the banned strcpy/strcat/sprintf/atoi, and
 * strict number parsing for config and CLI input. No state; thread-safe.
 */
#ifndef TIER_COMMON_STRUTIL_H
#define TIER_COMMON_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Copy src into dst (size dstsz), always NUL-terminated. Returns strlen(src); truncation happened
 * when the result is >= dstsz. */
size_t tier_strlcpy(char *dst, const char *src, size_t dstsz);

/* Parse a whole decimal unsigned integer. Returns 0 or -EINVAL (junk, empty) / -ERANGE. */
int tier_parse_u64(const char *s, uint64_t *out);

/* Parse a byte size: "4096", "64K", "8MiB", "2G", "1T" (K/M/G/T are powers of 1024, optional
 * "i"/"B" suffixes). Returns 0, -EINVAL or -ERANGE. */
int tier_parse_size(const char *s, uint64_t *out);

/* Parse a duration: "250ms", "5s", "2m", "1h", bare number = milliseconds. */
int tier_parse_duration_ms(const char *s, uint64_t *out);

/* Parse a boolean: true/false/yes/no/on/off/1/0. */
int tier_parse_bool(const char *s, int *out);

/* Format a byte count for humans ("1.5 GiB") into buf. Returns buf. */
char *tier_fmt_bytes(uint64_t bytes, char *buf, size_t bufsz);

/* s followed by '/' (a directory's key prefix: "a/b" -> "a/b/"), malloc'd; NULL when out of
 * memory. */
char *tier_dir_prefix(const char *s);
/* Are s[0..n) all ASCII digits, and n > 0? */
bool tier_all_digits(const char *s, size_t n);
/* Are s[0..n) all ASCII letters, digits, '.', '_' or '-' (the characters of a name of tierd's:
 * tenants, hint sets, stall reporters, cluster members), and n > 0? */
bool tier_name_chars(const char *s, size_t n);
/* The whole text of the file at path, NUL-terminated, malloc'd; NULL on any error. */
char *tier_read_text(const char *path);

/* Lowercase hex of len bytes into out (2*len+1 bytes). */
void tier_hex(const void *data, size_t len, char *out);
/* The value of one hex digit (either case), or -1. */
int tier_hex_digit(char c);

/* The whole of a PEM file (a regular file of at most 1 MiB), NUL-terminated, malloc'd into *out:
 * 0, or -errno with tier_err_msg() saying "WHAT PATH ..." (what: e.g. "[api] tls_key =").
 * secret: a key, refused (-EPERM) when every user may read it. */
int tier_read_pem(const char *what, const char *path, bool secret, char **out);

/* a + b, or UINT64_MAX where it would wrap (sums of rates from user input). */
static inline uint64_t tier_sum_sat(uint64_t a, uint64_t b)
{
    return UINT64_MAX - a < b ? UINT64_MAX : a + b;
}

/* Length of the valid UTF-8 sequence at s (n >= 1 bytes left), or 0 if the bytes there are not
 * one (overlongs, surrogates and code points above U+10FFFF are invalid). */
size_t tier_utf8_seq(const unsigned char *s, size_t n);

#endif
