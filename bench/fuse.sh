#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/fuse.sh - read throughput through the tierd FUSE mount (issue 4), all side by side in one
# run, Release build. Results go to stdout as a Markdown table (copied into docs/bench/fuse.md).
#
#   1. warm sequential read of one 256 MiB file: `cat` from the local page cache (baseline) vs
#      `cat` through the mount, (a) kernel page cache warm (keep_cache across opens) and
#      (b) kernel page cache of the file dropped, so every byte comes from tierd's RAM level;
#   2. warm read of 1,000 x 100 KiB files through the mount (files/s), same two variants, timed
#      inside one python3 process (open, read to EOF, close per file).
# Each figure is the best of RUNS (default 5) runs.
#
# Usage: bench/fuse.sh [WORKDIR]   (env: BUILD=build-daemonrel, RUNS=5, BIG_MB=256, NFILES=1000,
#        NO_OPEN=auto: [mount] no_open, off for the one-connection figures)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-daemonrel}
RUNS=${RUNS:-5}
BIG_MB=${BIG_MB:-256}
NFILES=${NFILES:-1000}
NO_OPEN=${NO_OPEN:-auto}
W=${1:-/tmp/tierd-bench-fuse}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

tierd_bins "$BUILD"
[ -x "$TIERD" ] || tierd_build_release "$BUILD" tierd
tierd_places "$W"

mkdir -p "$W/data/small" "$W/mnt"
[ -f "$W/data/big.bin" ] && [ "$(stat -c %s "$W/data/big.bin")" = $((BIG_MB << 20)) ] ||
  head -c $((BIG_MB << 20)) /dev/urandom >"$W/data/big.bin"
if [ "$(find "$W/data/small" -type f | wc -l)" != "$NFILES" ]; then
  rm -rf "$W/data/small" && mkdir -p "$W/data/small"
  for i in $(seq -w 1 "$NFILES"); do head -c 102400 /dev/urandom >"$W/data/small/f$i"; done
fi
rm -rf "$W/cache"
{
  tierd_conf_section daemon "log_level = warn"
  tierd_conf_section cache "ram_size = 1G" "disk_dir = $W/cache" "disk_size = 2G" \
    "disk_min_free = 256M" "block_size = 4M"
  tierd_conf_posix local "$W/data"
  tierd_conf_ns /b local
  tierd_conf_mount "$MNT" "attr_ttl = 60s" "entry_ttl = 60s" "no_open = $NO_OPEN"
  tierd_conf_api "$SOCK"
} >"$CONF"

trap 'tierd_reap "${TIERD_PID:-}"' EXIT
tierd_start "$CONF" "$W/tierd.log" "$MNT" || exit 1

ns() { date +%s%N; }
# best (smallest) wall time in seconds of RUNS runs of "$@", with PRE run before each
best() {
  local pre=$1; shift
  local b=
  for _ in $(seq 1 "$RUNS"); do
    eval "$pre"
    local t0 t1
    t0=$(ns); "$@"; t1=$(ns)
    local s=$(((t1 - t0) / 1000))
    if [ -z "$b" ] || [ "$s" -lt "$b" ]; then b=$s; fi
  done
  awk -v us="$b" 'BEGIN { printf "%.4f", us / 1e6 }'
}
drop() { dd if="$1" iflag=nocache count=0 status=none 2>/dev/null || true; }
drop_small() { for f in "$W"/mnt/b/small/*; do drop "$f"; done; }
catbig() { cat "$1" >/dev/null; }
catsmall() { find "$1" -type f -print0 | xargs -0 cat >/dev/null; }
# open + read to EOF + close of every file of a directory in one process (no fork per file, so
# the figure is the file system's, not the shell's); best of RUNS; DROP=1 drops each file's page
# cache first (posix_fadvise DONTNEED) so the data comes from tierd
pyread() {
  python3 - "$1" "$RUNS" "$2" <<'PY'
import os, sys, time
d, runs, drop = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
files = sorted(os.path.join(d, f) for f in os.listdir(d))
best = None
for _ in range(runs):
    if drop:
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
    t0 = time.perf_counter()
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        while os.read(fd, 1 << 20):
            pass
        os.close(fd)
    t = time.perf_counter() - t0
    best = t if best is None or t < best else best
print("%.4f" % best)
PY
}
mibs() { awk -v s="$1" -v mb="$BIG_MB" 'BEGIN { printf "%.0f", mb / s }'; }
fps() { awk -v s="$1" -v n="$NFILES" 'BEGIN { printf "%.0f", n / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }

# fill tierd's cache and the page caches once
cat "$W/data/big.bin" >/dev/null
catbig "$W/mnt/b/big.bin"
catsmall "$W/data/small"
catsmall "$W/mnt/b/small"

t_local=$(best : catbig "$W/data/big.bin")
t_mnt_pc=$(best : catbig "$W/mnt/b/big.bin")
t_mnt_td=$(best "drop $W/mnt/b/big.bin" catbig "$W/mnt/b/big.bin")
s_local=$(pyread "$W/data/small" 0)
s_mnt_pc=$(pyread "$W/mnt/b/small" 0)
s_mnt_td=$(pyread "$W/mnt/b/small" 1)
st=$(tierd_api "$SOCK" /v1/stats)

echo "| measurement | time (best of $RUNS) | rate | vs local page cache |"
echo "|---|---|---|---|"
echo "| cat ${BIG_MB} MiB, local file, page cache warm | ${t_local} s | $(mibs "$t_local") MiB/s | 1.00x |"
echo "| cat ${BIG_MB} MiB through mount, kernel page cache warm | ${t_mnt_pc} s | $(mibs "$t_mnt_pc") MiB/s | $(ratio "$t_mnt_pc" "$t_local")x |"
echo "| cat ${BIG_MB} MiB through mount, page cache dropped (tierd RAM level) | ${t_mnt_td} s | $(mibs "$t_mnt_td") MiB/s | $(ratio "$t_mnt_td" "$t_local")x |"
echo "| ${NFILES} x 100 KiB, local dir, page cache warm | ${s_local} s | $(fps "$s_local") files/s | 1.00x |"
echo "| ${NFILES} x 100 KiB through mount, kernel page cache warm | ${s_mnt_pc} s | $(fps "$s_mnt_pc") files/s | $(ratio "$s_mnt_pc" "$s_local")x |"
echo "| ${NFILES} x 100 KiB through mount, page cache dropped (tierd RAM level) | ${s_mnt_td} s | $(fps "$s_mnt_td") files/s | $(ratio "$s_mnt_td" "$s_local")x |"
echo
echo "no_open = $NO_OPEN; FUSE requests per connection: $(echo "$st" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["fuse_requests"], sort_keys=True))')"
echo "cache after the run: $(echo "$st" | python3 -c 'import json,sys; c=json.load(sys.stdin)["cache"]; print("fetches=%d ram.hits=%d disk.hits=%d hit_ratio=%.3f" % (c["fetches"], c["ram"]["hits"], c["disk"]["hits"], c["hit_ratio"]))')"
