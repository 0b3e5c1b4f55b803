#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/tierd_mixed.sh - tierbench's mixed run (training + inference + checkpoint, each alone then
# together) against the local disk and against a tierd mount of the same data, side by side
# (issue 6). On the tierd side the dataset is a read-cache namespace over a POSIX backend
# (staged into the hot tier first) and checkpoints go to a write-back namespace; on the local
# side both are plain directories on the same disk. The runs and the side-by-side table are
# bench/compare.sh's (JSON, CSV and PNG charts per target in WORKDIR/out).
#
# Usage: bench/tierd_mixed.sh [WORKDIR] [PROFILE]
#   env: BUILD=build-rel (Release), GEN="--files 2000 --size lognormal:128K,0.6"
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-mixed}
PROFILE=${2:-bench/profiles/mixed-small.ini}
BUILD=${BUILD:-build-rel}
GEN=${GEN:---files 2000 --size lognormal:128K,0.6}

# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

tierd_build_release "$BUILD" tierd tierctl tierbench
tierd_bins "$BUILD"
TB=$TIERBENCH

tierd_places "$W"
cleanup() {
  tierd_reap "${TIERD_PID:-}"
  tierd_unmount "$MNT"
}
trap cleanup EXIT INT TERM

mkdir -p "$W/shared" "$W/ckpt-backend" "$W/local-ckpt" "$W/cache" "$MNT" "$W/out"
rm -rf "$W/ckpt-backend"/* "$W/cache"/* "$W/spool"
# shellcheck disable=SC2086
[ -d "$W/shared/tb" ] || "$TB" gen "$W/shared/tb" $GEN

{
  tierd_conf_section cache "ram_size = 1G" "disk_dir = $W/cache" "disk_size = 4G"
  tierd_conf_posix shared "$W/shared"
  tierd_conf_posix ckpt "$W/ckpt-backend"
  tierd_conf_ns /datasets shared
  tierd_conf_ns /ckpt ckpt "mode = write-back"
  tierd_conf_section writeback "spool_dir = $W/spool"
  tierd_conf_mount "$MNT"
  tierd_conf_api "$SOCK"
} >"$CONF"

tierd_start "$CONF" "$W/tierd.log" "$MNT" "$SOCK" || exit 1
tierd_ctl stage /datasets/tb

bench/compare.sh --tierbench "$TB" --profile "$PROFILE" --out "$W/out" \
  local="$W/shared/tb,ckpt=$W/local-ckpt/run" tierd="$MNT/datasets/tb,ckpt=$MNT/ckpt/run"
tierd_ctl wait /ckpt --timeout 300
tierd_ctl status
echo "results: $W/out"
