#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/checkpoint.sh - the checkpoint burst buffer's numbers (issue 5, Performance), side by side
# in one run against a private Ceph RGW on this machine:
#   1. local disk: the checkpoint written with write + fsync + close to a directory (baseline);
#   2. direct S3: each file one multipart upload (single stream, and PARTS_PAR parts in flight);
#   3. the write-back engine without FUSE (wb_file_create/wb_write/wb_file_close, then wb_wait),
#      and the same with uploads held back (the write path alone, no competing upload);
#   4. through the tierd mount into a write-back namespace (durability = local): the writer's
#      time until its last fsync+close returns, then `tierctl wait` until it is durable in S3.
#      Skipped (with a message) when this tierd does not accept a write-back namespace.
# A checkpoint is FILES x FILE_MIB MiB (default 8 x 256 MiB = 2 GiB), the same bytes everywhere
# (tests/perf/checkpoint_bench.c). Results go to docs/bench/checkpoint.md by hand.
#
# Every phase that writes to S3 gets a fresh single-node Ceph (scripts/ceph.sh, in WORKDIR/ceph):
# the test OSD is 10 GiB and RGW frees deleted multipart data only after its GC delay (hours), so
# four 2 GiB checkpoints into one cluster fill it and RGW stalls at "nearfull".
#
# Usage: bench/checkpoint.sh [WORKDIR]   (env: BUILD=build-wbapirel (or an absolute path: another
#        tree's build, for a before/after run of the same script), FILES=8, FILE_MIB=256,
#        PARTS_PAR=4, WB_UPLOAD_THREADS=2 and WB_PARTS_PARALLEL=4 for the mount's [writeback],
#        ONLY_MOUNT=1 to run phase 4 alone, WB_HOLDOFFS="200ms 0": phase 4 once per
#        [writeback] upload_holdoff value, MOUNT_BACKEND=posix: phase 4 alone over a POSIX
#        backend directory in WORKDIR instead of the RGW, no Ceph started: the mount writer
#        beside the local writer when no Ceph may run)
# Phase 4 also prints what the daemon saw: the FUSE writes' count, mean size and the time the
# daemon spent in them (its /metrics) and its CPU time, beside the writer's write/fsync/close split.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-checkpoint}
BUILD=${BUILD:-build-wbapirel}
FILES=${FILES:-8}
FILE_MIB=${FILE_MIB:-256}
PARTS_PAR=${PARTS_PAR:-4}
WB_UPLOAD_THREADS=${WB_UPLOAD_THREADS:-2}
WB_PARTS_PARALLEL=${WB_PARTS_PARALLEL:-4}
ONLY_MOUNT=${ONLY_MOUNT:-}
WB_HOLDOFFS=${WB_HOLDOFFS:-200ms 0}
MOUNT_BACKEND=${MOUNT_BACKEND:-rgw}
[ "$MOUNT_BACKEND" = rgw ] || ONLY_MOUNT=1
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

tierd_bins "$BUILD"
case $BUILD in /*) BENCH=$BUILD/checkpoint_bench ;; *) BENCH=$PWD/$BUILD/checkpoint_bench ;; esac
if [ ! -x "$BENCH" ] || [ ! -x "$TIERD" ] || [ ! -x "$TIERCTL" ]; then
  tierd_build_release "$BUILD" checkpoint_bench tierd tierctl
fi

CEPH_DIR=$W/ceph
tierd_places "$W"
cleanup() {
  tierd_reap "${TIERD_PID:-}"
  tierd_unmount "$MNT"
  [ "$MOUNT_BACKEND" != rgw ] || scripts/ceph.sh stop "$CEPH_DIR" >/dev/null 2>&1 || true
  rm -rf "$W/local" "$W/spool" "$W/spool-engine" "$W/backend" "$CEPH_DIR"
}
trap cleanup EXIT
fresh_ceph() {
  scripts/ceph.sh stop "$CEPH_DIR" >/dev/null 2>&1 || true
  rm -rf "$CEPH_DIR"
  scripts/ceph.sh start "$CEPH_DIR" >/dev/null
  tierd_rgw_env "$CEPH_DIR"
}

rm -rf "$W" && mkdir -p "$W/local" "$W/spool-engine" "$W/spool" "$MNT"
echo "# $(date -u +%FT%TZ) $(nproc) cores, checkpoint = $FILES x $FILE_MIB MiB, $BUILD"
echo "# $W is on: $(df -h --output=source,fstype "$W" | tail -1)"
B=("$BENCH" --env "$CEPH_DIR/env" --files "$FILES" --file-mib "$FILE_MIB")
# every phase starts with no dirty pages left by the one before (they would be flushed during it)
sync
if [ -z "$ONLY_MOUNT" ]; then
"${B[@]}" --mode posix --dir "$W/local"
rm -rf "$W/local"
fresh_ceph
sync
"${B[@]}" --mode direct --direct-threads 1
fresh_ceph
sync
"${B[@]}" --mode direct --direct-threads "$PARTS_PAR"
fresh_ceph
sync
"${B[@]}" --mode engine --dir "$W/spool-engine"
rm -rf "$W/spool-engine" && mkdir -p "$W/spool-engine"
sync
"${B[@]}" --mode engine-noupload --dir "$W/spool-engine" 2>"$W/noupload.log" # retry warnings
rm -rf "$W/spool-engine"
fi

# ---- 4. through the mount ----
s3() { tierd_s3 "$@"; }
mount_phase() {
  HOLDOFF=$1
  rm -rf "$W/spool" "$W/cache" "$W/backend" && mkdir -p "$W/spool"
  if [ "$MOUNT_BACKEND" = rgw ]; then
    fresh_ceph
    BUCKET=ckpt-mount-$(date +%s)
    s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null
  else
    mkdir -p "$W/backend/ckpt"
  fi
  {
    tierd_conf_section daemon "log_level = warn"
    tierd_conf_section cache "ram_size = 256M" "disk_dir = $W/cache" "disk_size = 1G"
    tierd_conf_section writeback "spool_dir = $W/spool" "upload_threads = $WB_UPLOAD_THREADS" \
      "upload_holdoff = $HOLDOFF" "parts_parallel = $WB_PARTS_PARALLEL"
    if [ "$MOUNT_BACKEND" = rgw ]; then
      tierd_conf_rgw be "$BUCKET" "path_style = true"
    else
      tierd_conf_posix be "$W/backend"
    fi
    tierd_conf_ns /ckpt be "prefix = ckpt/" "mode = write-back" "durability = local"
    tierd_conf_mount "$MNT"
    tierd_conf_api "$SOCK"
  } >"$CONF"
  : >"$W/tierd.log"
  tierd_spawn "$CONF" "$W/tierd.log"
  # a tierd that exits at start (no write-back namespace) is the skip below, not an error
  if ! tierd_up "$MNT" && tierd_alive; then echo "mount did not come up" >&2; exit 1; fi
  if ! tierd_alive || ! mkdir "$MNT/ckpt/run1" 2>"$W/mkdir.err"; then
    echo "mode=mount skipped: this tierd does not run a write-back namespace ($(cat "$W/mkdir.err" 2>/dev/null; tail -2 "$W/tierd.log"))"
    exit 0
  fi
  # the local disk again, in this phase's conditions (its Ceph running, right before the mount
  # writer): this machine's disk speed drifts by tens of percent between minutes
  mkdir -p "$W/local2" && sync
  "${B[@]}" --mode posix --dir "$W/local2" | sed "s/^mode=posix/mode=posix-adjacent/"
  rm -rf "$W/local2"
  sync
  cpu0=$(awk '{print $14 + $15}' "/proc/$TIERD_PID/stat") # tierd's user + system ticks
  t0=$(date +%s%N)
  "${B[@]}" --mode posix --dir "$MNT/ckpt/run1" |
    sed "s/^mode=posix/mode=mount-writer/; s/\$/ upload_threads=$WB_UPLOAD_THREADS parts_parallel=$WB_PARTS_PARALLEL upload_holdoff=$HOLDOFF/"
  t1=$(date +%s%N)
  cpu1=$(awk '{print $14 + $15}' "/proc/$TIERD_PID/stat")
  # what the daemon saw: FUSE writes (count, mean size), its time in them, its CPU time
  tierd_api "$SOCK" /metrics | awk -v cpu=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" '
    /^tierd_op_bytes_total\{.*op="write"/ { b += $2 }
    /^tierd_op_latency_seconds_count\{.*op="write"/ { n += $2 }
    /^tierd_op_latency_seconds_sum\{.*op="write"/ { s += $2 }
    END { if (n) printf "daemon: fuse_writes=%d mean_kib=%.0f in_write_op_s=%.3f cpu_s=%.2f\n", n, b / n / 1024, s, cpu / hz }'
  tierd_ctl wait /ckpt/run1 >/dev/null
  t2=$(date +%s%N)
  awk -v h="$HOLDOFF" -v a="$t0" -v b="$t1" -v c="$t2" -v mib=$((FILES * FILE_MIB)) 'BEGIN {
    printf "mode=mount-durable upload_holdoff=" h " seconds=%.3f mib_s=%.1f (writer %.3f s incl. process start + tierctl wait %.3f s)\n",
      (c - a) / 1e9, mib / ((c - a) / 1e9), (b - a) / 1e9, (c - b) / 1e9 }'
  tierd_ctl checkpoints /ckpt/run1 | tail -3
  # every object complete in the backend with the right size
  for i in $(seq 0 $((FILES - 1))); do
    f=$(printf 'file%02d.bin' "$i")
    if [ "$MOUNT_BACKEND" = rgw ]; then
      size=$(s3 -I "$S3_ENDPOINT/$BUCKET/ckpt/run1/$f" | tr -d '\r' | awk 'tolower($1) == "content-length:" {print $2}')
    else
      size=$(stat -c %s "$W/backend/ckpt/run1/$f" 2>/dev/null || true)
    fi
    [ "$size" = $((FILE_MIB << 20)) ] || { echo "check: $f has size '$size' in the backend" >&2; exit 1; }
  done
  echo "check: all $FILES objects in the $MOUNT_BACKEND backend with $FILE_MIB MiB each"
  tierd_stop || true
}
for h in $WB_HOLDOFFS; do mount_phase "$h"; done
