#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/fuse_rgw.sh - cold sequential read of one object through the tierd mount from Ceph RGW vs
# one single-stream GET of the same object with curl (issue 4, goal >= 1.2x). Each cold run uses
# a fresh, empty cache. Needs a running test RGW: scripts/ceph.sh start DIR (its env file).
#
# Usage: bench/fuse_rgw.sh CEPH_DIR [WORKDIR]  (env: BUILD=build-daemonrel, RUNS=3, MB=256,
#        READAHEAD=8 blocks, BLOCK=4M)
set -euo pipefail
cd "$(dirname "$0")/.."
CEPH=${1:?usage: bench/fuse_rgw.sh CEPH_DIR [WORKDIR]}
W=${2:-/tmp/tierd-bench-fuse-rgw}
BUILD=${BUILD:-build-daemonrel}
RUNS=${RUNS:-3}
MB=${MB:-256}
READAHEAD=${READAHEAD:-8}
BLOCK=${BLOCK:-4M}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh
tierd_bins "$BUILD"
tierd_places "$W"
tierd_rgw_env "$CEPH"
s3() { tierd_s3 "$@"; }

mkdir -p "$W/mnt"
BUCKET=bench-fuse-$(date +%s)
s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null
head -c $((MB << 20)) /dev/urandom >"$W/obj.bin"
s3 -T "$W/obj.bin" "$S3_ENDPOINT/$BUCKET/obj.bin" >/dev/null

ns() { date +%s%N; }
best_get=
for _ in $(seq 1 "$RUNS"); do
  t0=$(ns); s3 -o /dev/null "$S3_ENDPOINT/$BUCKET/obj.bin"; t1=$(ns)
  t=$(((t1 - t0) / 1000))
  if [ -z "$best_get" ] || [ "$t" -lt "$best_get" ]; then best_get=$t; fi
done

trap 'tierd_reap "${TIERD_PID:-}"' EXIT
best_mnt=
for _ in $(seq 1 "$RUNS"); do
  rm -rf "$W/cache"
  {
    tierd_conf_section daemon "log_level = warn"
    tierd_conf_section cache "ram_size = 1G" "disk_dir = $W/cache" "disk_size = 2G" \
      "disk_min_free = 256M" "block_size = $BLOCK"
    tierd_conf_rgw rgw "$BUCKET"
    tierd_conf_ns /s3 rgw
    tierd_conf_mount "$MNT" "readahead_blocks = $READAHEAD"
    tierd_conf_api "$SOCK"
  } >"$CONF"
  tierd_start "$CONF" "$W/tierd.log" "$MNT" || exit 1
  stat "$W/mnt/s3/obj.bin" >/dev/null
  t0=$(ns); cat "$W/mnt/s3/obj.bin" >/dev/null; t1=$(ns)
  t=$(((t1 - t0) / 1000))
  if [ -z "$best_mnt" ] || [ "$t" -lt "$best_mnt" ]; then best_mnt=$t; fi
  tierd_stop || true
done
awk -v g="$best_get" -v m="$best_mnt" -v mb="$MB" -v ra="$READAHEAD" -v bs="$BLOCK" 'BEGIN {
  printf "| measurement (best of runs) | time | rate |\n|---|---|---|\n";
  printf "| single-stream GET, curl | %.3f s | %.0f MiB/s |\n", g / 1e6, mb / (g / 1e6);
  printf "| cold cat through the mount (block %s, readahead_blocks %d) | %.3f s | %.0f MiB/s |\n", bs, ra, m / 1e6, mb / (m / 1e6);
  printf "\nmount / GET = %.2fx\n", g / m }'
