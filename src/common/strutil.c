/* SPDX-License-Identifier: Apache-2.0 */
/* strutil.c - bounded string and strict number parsing helpers, hex, PEM files. See strutil.h. */
#include "common/strutil.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

size_t tier_strlcpy(char *dst, const char *src, size_t dstsz)
{
    size_t n = strlen(src);
    if (dstsz > 0) {
        size_t c = n < dstsz - 1 ? n : dstsz - 1;
        memcpy(dst, src, c);
        dst[c] = '\0';
    }
    return n;
}

int tier_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    if (*end != '\0')
        return -EINVAL;
    *out = (uint64_t)v;
    return 0;
}

/* Split "123abc" into a number and a suffix; the number may have a fraction ("1.5G"). */
static int split_number(const char *s, double *num, const char **suffix)
{
    if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE || v < 0)
        return -ERANGE;
    if (end == s)
        return -EINVAL;
    while (*end == ' ')
        end++;
    *num = v;
    *suffix = end;
    return 0;
}

int tier_parse_size(const char *s, uint64_t *out)
{
    double v;
    const char *suf;
    int rc = split_number(s, &v, &suf);
    if (rc)
        return rc;
    static const struct {
        const char *name;
        double mult;
    } units[] = {
        {"", 1.0},
        {"b", 1.0},
        {"k", 1024.0},
        {"kb", 1024.0},
        {"kib", 1024.0},
        {"m", 1048576.0},
        {"mb", 1048576.0},
        {"mib", 1048576.0},
        {"g", 1073741824.0},
        {"gb", 1073741824.0},
        {"gib", 1073741824.0},
        {"t", 1099511627776.0},
        {"tb", 1099511627776.0},
        {"tib", 1099511627776.0},
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(suf, units[i].name) == 0) {
            double bytes = v * units[i].mult;
            if (bytes >= 18446744073709551615.0)
                return -ERANGE;
            *out = (uint64_t)bytes;
            return 0;
        }
    }
    return -EINVAL;
}

int tier_parse_duration_ms(const char *s, uint64_t *out)
{
    double v;
    const char *suf;
    int rc = split_number(s, &v, &suf);
    if (rc)
        return rc;
    double mult;
    if (*suf == '\0' || strcasecmp(suf, "ms") == 0)
        mult = 1.0;
    else if (strcasecmp(suf, "s") == 0)
        mult = 1000.0;
    else if (strcasecmp(suf, "m") == 0 || strcasecmp(suf, "min") == 0)
        mult = 60000.0;
    else if (strcasecmp(suf, "h") == 0)
        mult = 3600000.0;
    else
        return -EINVAL;
    double ms = v * mult;
    if (ms >= 1e18)
        return -ERANGE;
    *out = (uint64_t)ms;
    return 0;
}

int tier_parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -EINVAL;
}

char *tier_dir_prefix(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 2);
    if (p) {
        memcpy(p, s, n);
        p[n] = '/';
        p[n + 1] = '\0';
    }
    return p;
}

char *tier_fmt_bytes(uint64_t bytes, char *buf, size_t bufsz)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, bufsz, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, bufsz, "%.1f %s", v, units[u]);
    return buf;
}

void tier_hex(const void *data, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * len] = '\0';
}

size_t tier_utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* no overlongs */
        else if (c == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F; /* at most U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

char *tier_read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t got;
    bool ok = m != NULL;
    while (ok && (got = fread(chunk, 1, sizeof(chunk), f)) > 0)
        ok = fwrite(chunk, 1, got, m) == got;
    ok = ok && !ferror(f);
    fclose(f);
    if (m && fclose(m) != 0)
        ok = false;
    if (!ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

bool tier_all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

bool tier_name_chars(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

int tier_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int tier_read_pem(const char *what, const char *path, bool secret, char **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int rc = 0;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = -errno;
        tier_err_set("%s %s cannot be read: %s", what, path, strerror(-rc));
        goto out;
    }
    if (secret && (st.st_mode & S_IRWXO)) {
        rc = -EPERM;
        tier_err_set("%s %s is readable by every user (mode %04o): chmod o-rwx %s", what, path,
                     (unsigned)(st.st_mode & 07777), path);
        goto out;
    }
    if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > (1 << 20)) {
        rc = -EINVAL;
        tier_err_set("%s %s is not a PEM file (a regular file, at most 1 MiB)", what, path);
        goto out;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0) {
            rc = n < 0 ? -errno : -EIO;
            tier_err_set("%s %s: read failed", what, path);
            free(buf);
            goto out;
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    *out = buf;
out:
    if (fd >= 0)
        close(fd);
    return rc;
}
