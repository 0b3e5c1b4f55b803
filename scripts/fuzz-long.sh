#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fuzz-long.sh - run every libFuzzer target of a fuzz build (make fuzz) for a set time each, from
# a copy of its corpus (tests/fuzz/corpus/NAME for target fuzz_NAME), and print one table row per
# target: executions, seconds, new corpus units, and whether it found anything (a crash, leak or
# timeout leaves crash-*/leak-*/timeout-* files in the run directory, which is kept then).
#
# Usage: scripts/fuzz-long.sh [BUILD_DIR] [SECONDS_PER_TARGET]   (defaults: build-fuzz 300)
# `make fuzz-long` calls it; FUZZ_SECONDS sets the time. Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-fuzz}
SECS=${2:-300}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/tierd-fuzz-long.XXXXXX")
found=0
printf '| target | seconds | executions | exec/s | new units | findings |\n|---|---:|---:|---:|---:|---|\n'
for bin in "$BUILD"/tests/fuzz_*; do
  name=$(basename "$bin")
  case $name in *_replay) continue ;; esac
  [ -x "$bin" ] || continue
  run=$OUT/$name
  mkdir -p "$run/corpus"
  src=tests/fuzz/corpus/${name#fuzz_}
  [ -d "$src" ] && cp -r "$src/." "$run/corpus/"
  before=$(find "$run/corpus" -type f | wc -l)
  (cd "$run" && ASAN_OPTIONS=detect_leaks=1 timeout $((SECS + 60)) "$OLDPWD/$bin" \
    -max_total_time="$SECS" -print_final_stats=1 -max_len=65536 corpus >log 2>&1) || true
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -n 1)
  after=$(find "$run/corpus" -type f | wc -l)
  crashes=$(find "$run" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'leak-*' -o -maxdepth 1 -name 'timeout-*' | wc -l)
  what=none
  if [ "$crashes" -gt 0 ]; then
    what="$crashes input(s) in $run"
    found=1
  fi
  rate=0
  [ -n "$execs" ] && rate=$((execs / SECS))
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$SECS" "${execs:-?}" "$rate" $((after - before)) "$what"
done
[ "$found" -eq 0 ] && rm -rf "$OUT"
exit "$found"
