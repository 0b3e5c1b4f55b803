#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail if shellcheck finds a warning or an error in any of our shell scripts (tests, benches,
# scripts/ and the shell library scripts/lib/tierd.sh, which -x follows from every script that
# sources it). Style and info notes are not checked; a deliberate exception is a
# `# shellcheck disable=SCnnnn` with its reason on the line before.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v shellcheck >/dev/null || { echo "check-shell: shellcheck is missing (scripts/deps.sh)"; exit 1; }
mapfile -t files < <(git ls-files '*.sh')
[ ${#files[@]} -gt 0 ] || exit 0
# one shellcheck per script, as many at once as there are cores (-x re-reads the sourced library
# for each, which one process for all would share, but the scripts are checked side by side)
printf '%s\0' "${files[@]}" | xargs -0 -n 1 -P "$(nproc)" shellcheck -x -S warning
echo "check-shell: ok (${#files[@]} scripts)"
