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
TIERD=$PWD/$BUILD/src/daemon/tierd
# shellcheck disable=SC1091
. "$CEPH/env"
s3() { curl -sSf --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"; }

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

PID=
cleanup() { [ -z "$PID" ] || { kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }; }
trap cleanup EXIT
best_mnt=
for _ in $(seq 1 "$RUNS"); do
  rm -rf "$W/cache"
  cat >"$W/tierd.conf" <<EOF
[daemon]
log_level = warn
[cache]
ram_size = 1G
disk_dir = $W/cache
disk_size = 2G
disk_min_free = 256M
block_size = $BLOCK
[backend rgw]
type = s3
endpoint = $S3_ENDPOINT
region = $S3_REGION
bucket = $BUCKET
access_key = $S3_ACCESS_KEY
secret_key = $S3_SECRET_KEY
[namespace /s3]
backend = rgw
[mount]
path = $W/mnt
readahead_blocks = $READAHEAD
[api]
socket = $W/api.sock
EOF
  "$TIERD" -c "$W/tierd.conf" -f 2>"$W/tierd.log" &
  PID=$!
  deadline=$((SECONDS + 30))
  until stat -f "$W/mnt" >/dev/null 2>&1 && [ "$(stat -c %i "$W/mnt")" = 1 ]; do
    [ $SECONDS -lt $deadline ] || { echo "mount did not come up" >&2; exit 1; }
    sleep 0.05
  done
  stat "$W/mnt/s3/obj.bin" >/dev/null
  t0=$(ns); cat "$W/mnt/s3/obj.bin" >/dev/null; t1=$(ns)
  t=$(((t1 - t0) / 1000))
  if [ -z "$best_mnt" ] || [ "$t" -lt "$best_mnt" ]; then best_mnt=$t; fi
  kill -TERM "$PID"; wait "$PID" || true; PID=
done
awk -v g="$best_get" -v m="$best_mnt" -v mb="$MB" -v ra="$READAHEAD" -v bs="$BLOCK" 'BEGIN {
  printf "| measurement (best of runs) | time | rate |\n|---|---|---|\n";
  printf "| single-stream GET, curl | %.3f s | %.0f MiB/s |\n", g / 1e6, mb / (g / 1e6);
  printf "| cold cat through the mount (block %s, readahead_blocks %d) | %.3f s | %.0f MiB/s |\n", bs, ra, m / 1e6, mb / (m / 1e6);
  printf "\nmount / GET = %.2fx\n", g / m }'
