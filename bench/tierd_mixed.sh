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

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target tierd tierctl tierbench >/dev/null
TIERD=$PWD/$BUILD/src/daemon/tierd
TIERCTL=$PWD/$BUILD/src/cli/tierctl
TB=$PWD/$BUILD/src/bench/tierbench

MNT=$W/mnt
SOCK=$W/api.sock
PID=
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID"
    for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  fi
  mountpoint -q "$MNT" && umount -l "$MNT" || true
}
trap cleanup EXIT INT TERM

mkdir -p "$W/shared" "$W/ckpt-backend" "$W/local-ckpt" "$W/cache" "$MNT" "$W/out"
rm -rf "$W/ckpt-backend"/* "$W/cache"/* "$W/spool"
# shellcheck disable=SC2086
[ -d "$W/shared/tb" ] || "$TB" gen "$W/shared/tb" $GEN

cat >"$W/tierd.conf" <<CONF
[cache]
ram_size = 1G
disk_dir = $W/cache
disk_size = 4G
[backend shared]
type = posix
root = $W/shared
[backend ckpt]
type = posix
root = $W/ckpt-backend
[namespace /datasets]
backend = shared
[namespace /ckpt]
backend = ckpt
mode = write-back
[writeback]
spool_dir = $W/spool
[mount]
path = $MNT
[api]
socket = $SOCK
CONF

"$TIERD" -c "$W/tierd.conf" -f 2>"$W/tierd.log" &
PID=$!
for _ in $(seq 300); do mountpoint -q "$MNT" && [ -S "$SOCK" ] && break; sleep 0.1; done
mountpoint -q "$MNT" || { tail "$W/tierd.log"; echo "tierd did not mount" >&2; exit 1; }
"$TIERCTL" -s "$SOCK" stage /datasets/tb

bench/compare.sh --tierbench "$TB" --profile "$PROFILE" --out "$W/out" \
  local="$W/shared/tb,ckpt=$W/local-ckpt/run" tierd="$MNT/datasets/tb,ckpt=$MNT/ckpt/run"
"$TIERCTL" -s "$SOCK" wait /ckpt --timeout 300
"$TIERCTL" -s "$SOCK" status
echo "results: $W/out"
