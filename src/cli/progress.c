/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.c - formatting of staging progress for tierctl (see progress.h). The rate is the
 * job's average (bytes done / elapsed), which is steadier than an instantaneous rate between two
 * polls; the ETA assumes that rate for the bytes left and is shown only once the listing is
 * complete, because before that the total still grows.
 */
#include "cli/progress.h"

#include <stdio.h>

#include "common/strutil.h"

#define BAR_WIDTH 24

char *ctl_fmt_duration(double seconds, char *buf, size_t bufsz)
{
    if (!(seconds >= 0) || seconds > 1e8) {
        snprintf(buf, bufsz, "--");
        return buf;
    }
    unsigned long long s = (unsigned long long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, bufsz, "%lluh%02llum", s / 3600, (s % 3600) / 60);
    else if (s >= 60)
        snprintf(buf, bufsz, "%llum%02llus", s / 60, s % 60);
    else
        snprintf(buf, bufsz, "%llus", s);
    return buf;
}

static double rate_bps(const struct ctl_progress *p)
{
    return p->elapsed_s > 0 ? (double)p->bytes_done / p->elapsed_s : 0;
}

char *ctl_progress_line(const struct ctl_progress *p, bool bar, char *buf, size_t bufsz)
{
    char done[32], total[32], rate[32], eta[32];
    double r = rate_bps(p);
    double frac = p->bytes_total ? (double)p->bytes_done / (double)p->bytes_total : 0;
    if (p->files_total > 0 && p->bytes_total == 0)
        frac = (double)p->files_done / (double)p->files_total; /* only empty files */
    if (frac > 1)
        frac = 1;
    const char *more = p->listing_done ? "" : "+"; /* totals still growing */

    tier_fmt_bytes(p->bytes_done, done, sizeof(done));
    tier_fmt_bytes(p->bytes_total, total, sizeof(total));
    tier_fmt_bytes((uint64_t)r, rate, sizeof(rate));
    if (p->listing_done && r > 0)
        ctl_fmt_duration((double)(p->bytes_total - p->bytes_done) / r, eta, sizeof(eta));
    else
        ctl_fmt_duration(-1, eta, sizeof(eta));

    char errs[48] = "";
    if (p->errors)
        snprintf(errs, sizeof(errs), "  %llu failed", (unsigned long long)p->errors);

    if (bar) {
        char b[BAR_WIDTH + 1];
        int filled = p->listing_done ? (int)(frac * BAR_WIDTH) : 0;
        for (int i = 0; i < BAR_WIDTH; i++)
            b[i] = i < filled ? '#' : '-';
        b[BAR_WIDTH] = '\0';
        if (p->listing_done)
            snprintf(buf, bufsz, "[%s] %3d%%  %s / %s  %llu/%llu files  %s/s  ETA %s%s", b,
                     (int)(frac * 100), done, total, (unsigned long long)p->files_done,
                     (unsigned long long)p->files_total, rate, eta, errs);
        else
            snprintf(buf, bufsz, "[%s] listing  %s / %s%s  %llu/%llu%s files  %s/s%s", b, done,
                     total, more, (unsigned long long)p->files_done,
                     (unsigned long long)p->files_total, more, rate, errs);
    } else {
        snprintf(buf, bufsz, "staging: %d%% %s/%s%s, %llu/%llu%s files, %s/s, ETA %s%s",
                 p->listing_done ? (int)(frac * 100) : 0, done, total, more,
                 (unsigned long long)p->files_done, (unsigned long long)p->files_total, more, rate,
                 eta, errs);
    }
    return buf;
}

char *ctl_progress_summary(const struct ctl_progress *p, char *buf, size_t bufsz)
{
    char done[32], rate[32], cached[32], el[32], peers[64] = "";
    tier_fmt_bytes(p->bytes_done, done, sizeof(done));
    tier_fmt_bytes((uint64_t)rate_bps(p), rate, sizeof(rate));
    tier_fmt_bytes(p->bytes_already_cached, cached, sizeof(cached));
    if (p->elapsed_s < 10)
        snprintf(el, sizeof(el), "%.1fs", p->elapsed_s);
    else
        ctl_fmt_duration(p->elapsed_s, el, sizeof(el));
    if (p->bytes_on_peers) {
        char b[32];
        snprintf(peers, sizeof(peers), "; %s on the cluster nodes that own it",
                 tier_fmt_bytes(p->bytes_on_peers, b, sizeof(b)));
    }
    snprintf(buf, bufsz, "staged %llu of %llu files, %s in %s (%s/s); %s of it already cached%s",
             (unsigned long long)p->files_done, (unsigned long long)p->files_total, done, el, rate,
             cached, peers);
    return buf;
}
