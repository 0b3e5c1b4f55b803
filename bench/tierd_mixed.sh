#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/tierd_mixed.sh - tierbench's mixed run (training + inference + checkpoint, each alone then
# together) against the local disk and against a tierd mount of the same data, side by side
# (issue 6). On the tierd side the dataset is a read-cache namespace over a POSIX backend
# (staged into the hot tier first) and checkpoints go to a write-back namespace; on the local
# side both are plain directories on the same disk. Ends with `tierbench compare` of the two
# JSON results and PNG charts for each.
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

echo "== local disk"
"$TB" run "$W/shared/tb" --profile "$PROFILE" --ckpt-dir "$W/local-ckpt/run" \
  --json "$W/out/local.json" --plot "$W/out/local-plots"
echo "== tierd mount"
"$TB" run "$MNT/datasets/tb" --profile "$PROFILE" --ckpt-dir "$MNT/ckpt/run" \
  --json "$W/out/tierd.json" --plot "$W/out/tierd-plots"
"$TIERCTL" -s "$SOCK" wait /ckpt --timeout 300 || true
echo "== side by side (xN = tierd / local)"
"$TB" compare local="$W/out/local.json" tierd="$W/out/tierd.json"
"$TIERCTL" -s "$SOCK" status
echo "results: $W/out"
