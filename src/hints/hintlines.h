/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hintlines.h - the text of a hint control file (<mount>/.tierd/hints/NAME, src/fuse/
 * fuse_ctl_hints.c): one mount path a line. Untrusted input (any user of the mount may write it):
 * parsed in place, bounded, fuzzed (tests/fuzz/fuzz_hintlines.c). No other state.
 */
#ifndef TIER_HINTS_HINTLINES_H
#define TIER_HINTS_HINTLINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Line lineno, NUL-terminated after its ll bytes (no newline, no '\r'): *path is the mount path
 * it names (inside line: "/NAMESPACE/FILE", the mount point mountpoint stripped when it is in
 * front), or NULL for an empty line or a comment ('#'). -EINVAL with tier_err_msg() set for a
 * line holding a NUL byte or naming no mount path. */
int hintlines_path(const char *mountpoint, const char *line, size_t ll, uint64_t lineno,
                   const char **path);

/* Parse buf[0, len) (buf[len] must be writable and is set to NUL; newlines become NULs) into
 * the mount paths it names, pointers into buf, with their line numbers (counted on from line0),
 * at most max_paths (else -E2BIG); *lastp: the last line's number; *append: the first line of the
 * file (line0 == 0) is "#append". *pathsp / *linesp are malloc'd (free both) on 0; on -EINVAL
 * (tier_err_msg() names the line) or -ENOMEM nothing is allocated. */
int hintlines_parse(const char *mountpoint, char *buf, size_t len, uint64_t line0, size_t max_paths,
                    const char ***pathsp, uint32_t **linesp, size_t *np, uint64_t *lastp,
                    bool *append);

#endif
