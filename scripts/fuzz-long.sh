#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fuzz-long.sh - run every libFuzzer target of a fuzz build (make fuzz) for a set time each, from
# a copy of its corpus (tests/fuzz/corpus/NAME for target fuzz_NAME), and print one table row per
# target: executions, seconds, new corpus units, and whether it found anything (a crash, leak or
# timeout leaves crash-*/leak-*/timeout-* files in the run directory, which is kept then).
#
# Usage: scripts/fuzz-long.sh [BUILD_DIR] [SECONDS_PER_TARGET]   (defaults: build-fuzz 300)
# `make fuzz-long` calls it; FUZZ_SECONDS sets the time. Environment: FUZZ_TARGETS="api jobs"
# runs only those targets; FUZZ_RUNS=N stops a target after N executions (before its time is up);
# FUZZ_PARALLEL=1 runs the targets at once instead of one after the other. The fuzzers run under
# `nice -n 19` (a shared machine keeps its other work). Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-fuzz}
SECS=${2:-300}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/tierd-fuzz-long.XXXXXX")
RUNS=${FUZZ_RUNS:--1}
found=0
bins=()
for bin in "$BUILD"/tests/fuzz_*; do
  name=$(basename "$bin")
  case $name in *_replay) continue ;; esac
  [ -x "$bin" ] || continue
  if [ -n "${FUZZ_TARGETS:-}" ]; then
    case " $FUZZ_TARGETS " in *" ${name#fuzz_} "*) ;; *) continue ;; esac
  fi
  bins+=("$bin")
done

# One target from a copy of its corpus; leaves start, end and log in its run directory.
run_one() {
  local bin=$1 name run src
  name=$(basename "$bin")
  run=$OUT/$name
  mkdir -p "$run/corpus"
  src=tests/fuzz/corpus/${name#fuzz_}
  [ -d "$src" ] && cp -r "$src/." "$run/corpus/"
  find "$run/corpus" -type f | wc -l >"$run/before"
  date +%s >"$run/start"
  (cd "$run" && ASAN_OPTIONS=detect_leaks=1 timeout $((SECS + 60)) nice -n 19 "$OLDPWD/$bin" \
    -max_total_time="$SECS" -runs="$RUNS" -print_final_stats=1 -max_len=65536 corpus \
    >log 2>&1) || true
  date +%s >"$run/end"
}

if [ "${FUZZ_PARALLEL:-0}" = 1 ]; then
  for bin in "${bins[@]}"; do run_one "$bin" & done
  wait
else
  for bin in "${bins[@]}"; do run_one "$bin"; done
fi

printf '| target | seconds | executions | exec/s | new units | findings |\n|---|---:|---:|---:|---:|---|\n'
for bin in "${bins[@]}"; do
  name=$(basename "$bin")
  run=$OUT/$name
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -n 1)
  after=$(find "$run/corpus" -type f | wc -l)
  secs=$(($(cat "$run/end") - $(cat "$run/start")))
  crashes=$(find "$run" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'leak-*' -o -maxdepth 1 -name 'timeout-*' | wc -l)
  what=none
  if [ "$crashes" -gt 0 ] || [ -z "$execs" ]; then
    what="$crashes input(s) in $run (log: $run/log)"
    found=1
  fi
  rate=0
  [ -n "$execs" ] && [ "$secs" -gt 0 ] && rate=$((execs / secs))
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$secs" "${execs:-?}" "$rate" \
    $((after - $(cat "$run/before"))) "$what"
done
[ "$found" -eq 0 ] && rm -rf "$OUT"
exit "$found"
