#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/version_reads.sh - issue 14's warm-read goal for dataset versions: FILES small files
# (KB KiB each) on a POSIX backend, committed as a version; then, warm (every file read once
# before), the time to read them all (one `cat` of the list) from
#   local    the backend directory itself (the page cache)
#   mount    the tierd mount's namespace path
#   version  the version's view, <mount>/.tierd/datasets/TREE@NAME
# and the backend calls tierd made during the version's warm passes (goal: none). Goal (issue 14):
# version >= 0.95 x local. Median of RUNS passes each, interleaved.
#
# Usage: bench/version_reads.sh [WORKDIR]   (needs root; default /tmp/tierd-bench-vreads)
#   env: FILES=1000 KB=100 RUNS=5 BUILD=build-daemonrel NO_OPEN=auto ([mount] no_open)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-vreads}
FILES=${FILES:-1000}
KB=${KB:-100}
RUNS=${RUNS:-5}
BUILD=${BUILD:-build-daemonrel}
NO_OPEN=${NO_OPEN:-auto}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh
[ "$(id -u)" = 0 ] || { echo "bench/version_reads.sh: needs root (FUSE)" >&2; exit 2; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; $(nproc) CPUs); $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
tierd_build_release "$BUILD" tierd tierctl
tierd_bins "$BUILD"
mkdir -p "$W/mnt"
tierd_places "$W"
trap 'tierd_reap "${TIERD_PID:-}"; tierd_unmount "$MNT"' EXIT
tierd_bench_files "$W/data/ds/set" "$FILES" "$KB"
{
  tierd_conf_section daemon "log_level = warn"
  tierd_conf_section cache "ram_size = $((FILES * KB * 2 / 1024 + 64))M"
  tierd_conf_posix be "$W/data"
  tierd_conf_ns /ds be "prefix = ds"
  tierd_conf_mount "$MNT" "no_open = $NO_OPEN"
  tierd_conf_api "$SOCK"
} >"$CONF"
tierd_start "$CONF" "$W/tierd.log" "$MNT" "$SOCK" || exit 1
tierd_ctl dataset delete /ds/set b1 >/dev/null 2>&1 || true
tierd_ctl dataset commit /ds/set b1 >/dev/null
V=$(tierd_ctl dataset path /ds/set b1)
tierd_bench_results "$W/results"
list() { find "$1" -mindepth 1 -maxdepth 1 -type f | sort >"$W/list.$2"; }
list "$W/data/ds/set" local
list "$MNT/ds/set" mount
list "$V" version
pass() { # ROW: one cat of every file
  local a b
  a=$(now)
  xargs -a "$W/list.$1" cat >/dev/null
  b=$(now)
  rec "$1" "$(secs "$a" "$b")"
}
calls() { tierd_api "$SOCK" /v1/stats | python3 -c 'import json,sys
b=[b for b in json.load(sys.stdin)["backends"] if b["name"]=="be"][0]["calls"]
print(sum(b.values()))'; }
for row in local mount version; do xargs -a "$W/list.$row" cat >/dev/null; done # warm
c0=$(calls)
for _ in $(seq 1 "$RUNS"); do
  pass local
  pass mount
  pass version
done
c1=$(calls)
echo
echo "Warm reads of $FILES x $KB KiB, $(date -u +%F), $(git rev-parse --short HEAD), median of $RUNS"
read -r lm _ _ < <(stats local)
read -r mm _ _ < <(stats mount)
read -r vm _ _ < <(stats version)
awk -v l="$lm" -v m="$mm" -v v="$vm" 'BEGIN {
  printf "local %.3f s; mount %.3f s (%.2fx local); version %.3f s (%.2fx local; goal >= 0.95)\n",
    l, m, l / m, v, l / v }'
echo "backend calls during the warm passes (all three paths): $((c1 - c0))"
echo "no_open = $NO_OPEN; FUSE requests per connection: $(tierd_api "$SOCK" /v1/stats | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["fuse_requests"], sort_keys=True))')"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
