#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/cold.sh - issue 12's cold read path, side by side in one run, on two paths to the same
# Ceph RGW (scripts/netlink.sh: Ceph in a network namespace, tbf at RATE both ways):
#   direct   the RGW in the namespace, no delay (the "plain loopback" row: a veth, no proxy)
#   delayed  through scripts/delayproxy.py: +DELAY_MS each way, and each connection paced to
#            STREAM_RATE bytes/s (an object store's per-stream limit; 0: none)
#   latency  through a second scripts/delayproxy.py the bench starts: +LAT_DELAY_MS each way and
#            no per-stream limit (a latency-bound link: one stream's rate is window / RTT)
# On each path:
#   - one 256 MiB object (MB): a single-stream GET with curl; a cold `cat` through a fresh tierd
#     mount (empty cache, defaults but for the cache sizes); the same through s3fs-fuse
#     (use_cache) and rclone mount (--vfs-cache-mode full) when they are installed
#   - FILES x KB KiB objects in one directory: `ls`, then `cat DIR/*` cold through each mount
#     (the listing is not what is timed); then warm: tierd's second `cat` (its RAM level, the
#     kernel's page cache dropped) vs the same files on local disk, page cache dropped, and both
#     with the page cache warm.
# Prints one table per path (median and range over RUNS) and the machine's load. Everything is
# taken down on exit, whatever happens.
#
# Usage: bench/cold.sh [WORKDIR]   (needs root; default WORKDIR /tmp/tierd-bench-cold)
#   env: RATE=2gbit DELAY_MS=5 STREAM_RATE=40000000 LAT_DELAY_MS=2 MB=256 FILES=1000 KB=100
#        RUNS=3 BUILD=build-daemonrel PATHS="direct delayed latency" OTHERS=1 (0: tierd only)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-cold}
RATE=${RATE:-2gbit}
DELAY_MS=${DELAY_MS:-5}
STREAM_RATE=${STREAM_RATE:-40000000}
LAT_DELAY_MS=${LAT_DELAY_MS:-2}
MB=${MB:-256}
FILES=${FILES:-1000}
KB=${KB:-100}
RUNS=${RUNS:-3}
BUILD=${BUILD:-build-daemonrel}
PATHS=${PATHS:-direct delayed latency}
OTHERS=${OTHERS:-1}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; $(nproc) CPUs); $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
tierd_build_release "$BUILD" tierd tierctl
tierd_bins "$BUILD"
mkdir -p "$W/mnt" "$W/m3" "$W/mr"
tierd_places "$W"
LINK=$W/link
HAVE_S3FS=0 HAVE_RCLONE=0
if [ "$OTHERS" = 1 ]; then
  command -v s3fs >/dev/null && HAVE_S3FS=1
  command -v rclone >/dev/null && HAVE_RCLONE=1
fi

others_down() {
  for m in "$W/m3" "$W/mr"; do
    if mountpoint -q "$m"; then fusermount3 -u "$m" 2>/dev/null || umount -l "$m" || true; fi
  done
  pkill -f "rclone mount rgw:$BUCKET" 2>/dev/null || true
}
cleanup() {
  tierd_reap "${TIERD_PID:-}"
  tierd_unmount "$MNT"
  others_down
  if [ -n "${LAT_PID:-}" ]; then kill "$LAT_PID" 2>/dev/null || true; fi
  STREAM_RATE=$STREAM_RATE scripts/netlink.sh down "$LINK" || true
  rm -rf "$W/cache" "$W/local" "$W/c3" "$W/cr" "$W/obj.bin"
}
BUCKET=bench-cold-$(date +%s)
trap cleanup EXIT
STREAM_RATE=$STREAM_RATE scripts/netlink.sh up "$LINK" "$RATE" "$DELAY_MS"
tierd_rgw_env "$LINK"
PROXY=$S3_ENDPOINT
DIRECT=$S3_ENDPOINT_DIRECT
LATENCY=
if [[ " $PATHS " == *" latency "* ]]; then # the second proxy: delay only, no per-stream pacing
  rm -f "$W/lat.port"
  python3 scripts/delayproxy.py --listen 127.0.0.1:0 --upstream "${DIRECT#http://}" \
    --delay-ms "$LAT_DELAY_MS" --port-file "$W/lat.port" </dev/null >"$W/lat.log" 2>&1 &
  LAT_PID=$!
  deadline=$((SECONDS + 20))
  until [ -s "$W/lat.port" ]; do
    [ $SECONDS -lt $deadline ] || { cat "$W/lat.log" >&2; echo "the latency proxy did not start" >&2; exit 1; }
    sleep 0.1
  done
  LATENCY=http://127.0.0.1:$(cat "$W/lat.port")
fi

tierd_s3 -X PUT "$DIRECT/$BUCKET" >/dev/null
head -c $((MB << 20)) /dev/urandom >"$W/obj.bin"
tierd_s3 -T "$W/obj.bin" "$DIRECT/$BUCKET/big/obj.bin" >/dev/null
tierd_bench_files "$W/local/small" "$FILES" "$KB"
tierd_bench_upload "$W/local/small" "$DIRECT/$BUCKET/small"
echo "uploaded $MB MiB + $FILES x $KB KiB"

tierd_bench_results "$W/results"
drop() {
  sync
  echo 3 >/proc/sys/vm/drop_caches
}
timed() { # ROW CMD...: run CMD, record its wall time
  local row=$1 t0 t1
  shift
  t0=$(now)
  "$@"
  t1=$(now)
  rec "$row" "$(secs "$t0" "$t1")"
}
catall() { cat "$1"/* >/dev/null; }
catone() { cat "$1" >/dev/null; }

fresh_tierd() { # ENDPOINT
  tierd_stop 2>/dev/null || true
  rm -rf "$W/cache"
  {
    tierd_conf_section daemon "log_level = warn"
    tierd_conf_section cache "ram_size = 2G" "disk_dir = $W/cache" "disk_size = 4G" \
      "disk_min_free = 256M"
    S3_ENDPOINT=$1 tierd_conf_rgw rgw "$BUCKET"
    tierd_conf_ns /s3 rgw
    tierd_conf_mount "$MNT"
    tierd_conf_api "$SOCK"
  } >"$CONF"
  tierd_start "$CONF" "$W/tierd.log" "$MNT" || exit 1
}
s3fs_up() { # ENDPOINT
  rm -rf "$W/c3" && mkdir -p "$W/c3"
  echo "$S3_ACCESS_KEY:$S3_SECRET_KEY" >"$W/s3fs.pw"
  chmod 600 "$W/s3fs.pw"
  s3fs "$BUCKET" "$W/m3" -o url="$1" -o use_path_request_style -o passwd_file="$W/s3fs.pw" \
    -o use_cache="$W/c3" -o endpoint="$S3_REGION" -o sigv4
  local deadline=$((SECONDS + 20))
  until mountpoint -q "$W/m3"; do
    [ $SECONDS -lt $deadline ] || { echo "s3fs did not mount" >&2; exit 1; }
    sleep 0.1
  done
}
rclone_up() { # ENDPOINT
  rm -rf "$W/cr" && mkdir -p "$W/cr"
  cat >"$W/rclone.conf" <<EOF
[rgw]
type = s3
provider = Ceph
access_key_id = $S3_ACCESS_KEY
secret_access_key = $S3_SECRET_KEY
endpoint = $1
region = $S3_REGION
EOF
  # the AWS SDK in rclone fails on a CA bundle set for https, which this http endpoint needs not
  env -u AWS_CA_BUNDLE rclone mount "rgw:$BUCKET" "$W/mr" --config "$W/rclone.conf" --vfs-cache-mode full \
    --cache-dir "$W/cr" --daemon
  local deadline=$((SECONDS + 20))
  until mountpoint -q "$W/mr"; do
    [ $SECONDS -lt $deadline ] || { echo "rclone did not mount" >&2; exit 1; }
    sleep 0.1
  done
}

for p in $PATHS; do
  case $p in
  direct) EP=$DIRECT ;;
  delayed) EP=$PROXY ;;
  latency) EP=$LATENCY ;;
  *) echo "bench/cold.sh: unknown path '$p' (direct, delayed, latency)" >&2 && exit 2 ;;
  esac
  for _ in $(seq 1 "$RUNS"); do
    timed "${p}_get" curl -sSf -o /dev/null "${TIERD_S3_SIG[@]}" "$EP/$BUCKET/big/obj.bin"
    fresh_tierd "$EP"
    stat "$MNT/s3/big/obj.bin" >/dev/null
    drop
    timed "${p}_tierd_big" catone "$MNT/s3/big/obj.bin"
    # the read-ahead it ran with (docs/CACHE.md "Read-ahead sizing")
    tierd_api "$SOCK" /v1/stats | python3 -c 'import json,sys; c=json.load(sys.stdin)["cache"]
print("%s: tierd fetched %d blocks, mean %.1f ms each; window peak %d blocks; GETs in flight peak %d"
      % (sys.argv[1], c["fetches"], c["fetch_ns_total"] / max(c["fetches"], 1) / 1e6,
         c["readahead_window_peak"], c["prefetch_inflight_peak"]))' "$p"
    ls "$MNT/s3/small" >/dev/null
    timed "${p}_tierd_small" catall "$MNT/s3/small"
    drop
    timed "${p}_tierd_warm" catall "$MNT/s3/small"
    timed "${p}_tierd_warm_pc" catall "$MNT/s3/small"
    drop
    timed "${p}_local_small" catall "$W/local/small"
    timed "${p}_local_small_pc" catall "$W/local/small"
    tierd_stop || true
    if [ $HAVE_S3FS = 1 ]; then
      s3fs_up "$EP"
      stat "$W/m3/big/obj.bin" >/dev/null
      timed "${p}_s3fs_big" catone "$W/m3/big/obj.bin"
      ls "$W/m3/small" >/dev/null
      timed "${p}_s3fs_small" catall "$W/m3/small"
      others_down
    fi
    if [ $HAVE_RCLONE = 1 ]; then
      rclone_up "$EP"
      stat "$W/mr/big/obj.bin" >/dev/null
      timed "${p}_rclone_big" catone "$W/mr/big/obj.bin"
      ls "$W/mr/small" >/dev/null
      timed "${p}_rclone_small" catall "$W/mr/small"
      others_down
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

row() { # LABEL ROW UNITS_PER_RUN UNIT
  read -r m lo hi < <(stats "$2")
  awk -v l="$1" -v m="$m" -v lo="$lo" -v hi="$hi" -v u="$3" -v un="$4" 'BEGIN {
    if (m == "-") { printf "| %s | - | - |\n", l; exit }
    printf "| %s | %.3f s (%.3f-%.3f) | %.0f %s |\n", l, m, lo, hi, u / m, un }'
}
ratio() { # LABEL NUM_ROW DEN_ROW: median(DEN)/median(NUM) = NUM's speed / DEN's
  read -r a _ _ < <(stats "$2")
  read -r b _ _ < <(stats "$3")
  awk -v l="$1" -v a="$a" -v b="$b" 'BEGIN { if (a == "-" || b == "-") exit
    printf "- %s: %.2fx\n", l, b / a }'
}
echo
echo "link: tbf $RATE each way; delayed = +$DELAY_MS ms each way, each connection <= $STREAM_RATE B/s; latency = +$LAT_DELAY_MS ms each way, no per-connection limit; $RUNS runs (median, range)"
for p in $PATHS; do
  echo
  echo "### $p"
  echo
  echo "| measurement | time | rate |"
  echo "|---|---|---|"
  row "one GET stream (curl), $MB MiB" "${p}_get" "$MB" MiB/s
  row "tierd, cold cat of $MB MiB" "${p}_tierd_big" "$MB" MiB/s
  row "s3fs, cold cat of $MB MiB" "${p}_s3fs_big" "$MB" MiB/s
  row "rclone, cold cat of $MB MiB" "${p}_rclone_big" "$MB" MiB/s
  row "tierd, cold cat of $FILES x $KB KiB" "${p}_tierd_small" "$FILES" files/s
  row "s3fs, cold cat of $FILES x $KB KiB" "${p}_s3fs_small" "$FILES" files/s
  row "rclone, cold cat of $FILES x $KB KiB" "${p}_rclone_small" "$FILES" files/s
  row "tierd, warm (its RAM level, page cache dropped)" "${p}_tierd_warm" "$FILES" files/s
  row "local disk, page cache dropped" "${p}_local_small" "$FILES" files/s
  row "tierd, warm, page cache warm" "${p}_tierd_warm_pc" "$FILES" files/s
  row "local disk, page cache warm" "${p}_local_small_pc" "$FILES" files/s
  echo
  ratio "cold $MB MiB, tierd / one GET (goal: direct >= 1.0, delayed >= 1.5, latency >= 1.0)" "${p}_tierd_big" "${p}_get"
  ratio "cold small files, tierd / s3fs (goal >= 3)" "${p}_tierd_small" "${p}_s3fs_small"
  ratio "cold small files, tierd / rclone" "${p}_tierd_small" "${p}_rclone_small"
  ratio "warm small files, tierd / local, page cache dropped (goal >= 0.9)" "${p}_tierd_warm" "${p}_local_small"
  ratio "warm small files, tierd / local, page cache warm" "${p}_tierd_warm_pc" "${p}_local_small_pc"
done
