#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/listing.sh - directory listings of 100,000 files through the tierd mount (issue 12
# item 4, "metadata that costs nothing"), side by side with the same commands on the local
# directory behind it, Release build. Results go to stdout as Markdown (docs/BENCHMARKS.md,
# "Listings").
#
#   1. warm `ls -f`, `ls -l` and `find` of a directory of NFILES files (tierd's listing cached,
#      the read-cache default TTL of 60 s; the local directory's dentries and inodes cached),
#      best of RUNS each; the first (cold) `ls -f` through the mount, which lists the POSIX
#      backend, is printed too;
#   2. revalidation: a namespace with attr_ttl = entry_ttl = TTL over the same directory is
#      listed, the TTL passes, and one process stats every file by name (no readdir): the time,
#      and the backend stat and list calls it made (before revalidation by listing: one stat
#      per file).
#
# Usage: bench/listing.sh [WORKDIR]   (env: BUILD=build-rel, RUNS=5, NFILES=100000, TTL_S=10)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-rel}
RUNS=${RUNS:-5}
NFILES=${NFILES:-100000}
TTL_S=${TTL_S:-10}
W=${1:-/tmp/tierd-bench-listing}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

tierd_bins "$BUILD"
[ -x "$TIERD" ] || tierd_build_release "$BUILD" tierd
tierd_places "$W"

mkdir -p "$W/data/big" "$W/mnt"
if [ "$(find "$W/data/big" -type f | wc -l)" != "$NFILES" ]; then
  rm -rf "$W/data/big" && mkdir -p "$W/data/big"
  python3 - "$W/data/big" "$NFILES" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, "f%06d" % i), "wb") as f:
        f.write(b"x" * (i % 4096))
PY
fi
{
  tierd_conf_section daemon "log_level = warn"
  tierd_conf_section cache "ram_size = 256M" "block_size = 1M"
  tierd_conf_posix local "$W/data"
  tierd_conf_ns /b local "prefix = big"
  tierd_conf_ns /r local "prefix = big" "attr_ttl = ${TTL_S}s" "entry_ttl = ${TTL_S}s"
  tierd_conf_mount "$MNT"
  tierd_conf_api "$SOCK"
} >"$CONF"

trap 'tierd_reap "${TIERD_PID:-}"; tierd_unmount "$MNT"' EXIT
tierd_start "$CONF" "$W/tierd.log" "$MNT" "$SOCK" || exit 1

ns() { date +%s%N; }
# wall time in seconds of one run of "$@" (output discarded)
once() {
  local t0 t1
  t0=$(ns)
  "$@" >/dev/null
  t1=$(ns)
  awk -v d="$((t1 - t0))" 'BEGIN { printf "%.3f", d / 1e9 }'
}
# best (smallest) of RUNS runs
best() {
  local b='' t
  for _ in $(seq 1 "$RUNS"); do
    t=$(once "$@")
    if [ -z "$b" ] || awk -v a="$t" -v b="$b" 'BEGIN { exit !(a < b) }'; then b=$t; fi
  done
  echo "$b"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
calls() {
  tierd_api "$SOCK" /v1/stats | python3 -c 'import json,sys; print(sum(b["calls"][sys.argv[1]] for b in json.load(sys.stdin)["backends"]))' "$1"
}
count() { [ "$("$@" | wc -l)" -ge "$NFILES" ] || { echo "listing short: $*" >&2; exit 1; }; }

# ---- 1. warm listings --------------------------------------------------------------------
cold=$(once count ls -f "$MNT/b")
ls -f "$W/data/big" >/dev/null
ls -l "$W/data/big" >/dev/null # the local inodes cached too
echo "| command ($NFILES files, best of $RUNS) | local disk | tierd mount | mount / local |"
echo "|---|---|---|---|"
for c in "ls -f" "ls -l" "find"; do
  # shellcheck disable=SC2086 # $c is a command with its options
  l=$(best $c "$W/data/big")
  # shellcheck disable=SC2086
  m=$(best $c "$MNT/b")
  echo "| \`$c\` | $l s | $m s | $(ratio "$m" "$l") |"
done
echo
echo "cold \`ls -f\` through the mount (lists the POSIX backend, $((NFILES / 1000)) pages): $cold s"
echo

# ---- 2. revalidation after the TTL -------------------------------------------------------
statall() {
  python3 - "$1" "$NFILES" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.stat(os.path.join(d, "f%06d" % i))
PY
}
ls -f "$MNT/r" >/dev/null
past() { [ $(($(ns) - t_listed)) -gt $((TTL_S * 1000000000 + 200000000)) ]; }
t_listed=$(ns)
l_local=$(once statall "$W/data/big")
tierd_poll $((TTL_S + 10)) past # let the TTL pass
s0=$(calls stat) l0=$(calls list)
t_reval=$(once statall "$MNT/r")
s1=$(calls stat) l1=$(calls list)
echo "| stat of every file by name, after the TTL (${TTL_S} s) | time | backend stat calls | backend list calls |"
echo "|---|---|---|---|"
echo "| local disk | $l_local s | - | - |"
echo "| tierd mount | $t_reval s | $((s1 - s0)) | $((l1 - l0)) |"
