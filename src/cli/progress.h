/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.h - how tierctl shows a staging job: the one-line progress bar for a terminal, the
 * plain periodic line for logs, and the final summary. Pure formatting, no I/O, no state.
 */
#ifndef TIER_CLI_PROGRESS_H
#define TIER_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A job's figures as GET /v1/stage/ID reports them. */
struct ctl_progress {
    bool running;
    bool listing_done; /* totals are final */
    uint64_t files_total, files_done;
    uint64_t bytes_total, bytes_done;
    uint64_t bytes_already_cached;
    uint64_t bytes_on_peers; /* a cluster stage: warmed on the nodes that own them */
    uint64_t errors;
    double elapsed_s;
};

/* "1h02m", "3m05s", "12s"; "--" for a negative or absurd value. */
char *ctl_fmt_duration(double seconds, char *buf, size_t bufsz);

/* The progress line. bar: the terminal form with a [####----] bar; otherwise a plain line. */
char *ctl_progress_line(const struct ctl_progress *p, bool bar, char *buf, size_t bufsz);

/* The closing summary, e.g. "staged 1000 of 1000 files, 97.7 MiB in 2.1s (46.5 MiB/s); 0 B of
 * it already cached". */
char *ctl_progress_summary(const struct ctl_progress *p, char *buf, size_t bufsz);

#endif
