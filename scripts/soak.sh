#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# soak.sh - `make soak` (not in CI): tierd on a real FUSE mount over a private Ceph RGW for
# SOAK_SECONDS (default 1 h) under a mixed load, SIGKILLed and restarted every SOAK_KILL_EVERY s,
# RGW stopped every SOAK_RGW_EVERY s. Exit 0 only if every acknowledged checkpoint is
# byte-identical in RGW, no read error reached a reader outside the outage windows, and tierd's
# RSS, descriptors and threads stay flat. The run itself is scripts/soak.py (its header says
# exactly what is checked); this script starts and stops the Ceph cluster and, whatever happens,
# leaves nothing running (trap). All traffic is to 127.0.0.1. See docs/BENCHMARKS.md, "Soak".
#
# Environment (defaults for the 1 h run):
#   SOAK_SECONDS=3600       length of the load
#   SOAK_KILL_EVERY=240     SIGKILL tierd at this age (s)   [default SOAK_SECONDS/15]
#   SOAK_RGW_EVERY=420      stop RGW every ... s of the run [default SOAK_SECONDS*7/60]
#   SOAK_RGW_DOWN=20        how long RGW stays down (s)
#   SOAK_GRACE=15           seconds added to each outage window
#   SOAK_DIR                work directory (default a new /tmp/tierd-soak.XXXXXX; removed on
#                           success unless SOAK_KEEP=1, kept on failure)
#   SOAK_CEPH_DIR           Ceph state directory (default SOAK_DIR/ceph). An existing healthy
#                           cluster there is reused and then left running.
#   TIER_RGW_PORT           RGW's port (default the first free one from 17480, outside the range
#                           test clusters pick from, so none can take it while RGW is down)
#   BUILD=build             the build directory (tierd, tierctl, tierbench)
# Results: bench/out/soak-YYYYmmdd-HHMM.md (the summary table, windows, errors, sample series).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$SRC/$BUILD ;; esac
# shellcheck source=scripts/lib/tierd.sh
. "$SRC/scripts/lib/tierd.sh"
tierd_bins "$BUILD"
for b in "$TIERD" "$TIERCTL" "$TIERBENCH"; do
  [ -x "$b" ] || { echo "soak: $b is missing (run make build)" >&2; exit 2; }
done
command -v fusermount3 >/dev/null || { echo "soak: fusermount3 is missing (scripts/deps.sh)" >&2; exit 2; }

W=${SOAK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/tierd-soak.XXXXXX")}
mkdir -p "$W"
W=$(cd "$W" && pwd -P)
CEPH=${SOAK_CEPH_DIR:-$W/ceph}
mkdir -p "$SRC/bench/out"
STAMP=$(date -u +%Y%m%d-%H%M)
RESULTS=$SRC/bench/out/soak-$STAMP.md
PY=

# own_pid FILE PROG: the pid in FILE if that process is alive and runs PROG (never a recycled pid)
own_pid() {
  local pid
  [ -r "$1" ] || return 1
  read -r pid <"$1" || return 1
  [[ $pid =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/exe" ] || return 1
  [ "$(readlink "/proc/$pid/exe")" = "$2" ] || return 1
  echo "$pid"
}

CEPH_REUSED=
cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  if [ -n "$PY" ] && kill -0 "$PY" 2>/dev/null; then
    kill -TERM "$PY" 2>/dev/null || true
    wait "$PY" 2>/dev/null || true
  fi
  pid=$(own_pid "$W/tierbench.pid" "$TIERBENCH") && kill -KILL "$pid" 2>/dev/null
  pid=$(own_pid "$W/tierd.pid" "$TIERD") && kill -KILL "$pid" 2>/dev/null
  tierd_unmount "$W/mnt"
  if [ -z "$CEPH_REUSED" ]; then
    "$SRC/scripts/ceph.sh" stop "$CEPH" >/dev/null 2>&1 || echo "soak: ceph.sh stop $CEPH failed" >&2
  else
    "$SRC/scripts/ceph.sh" start-rgw "$CEPH" >/dev/null 2>&1 || true
  fi
  if [ "$rc" -eq 0 ] && [ -z "${SOAK_KEEP:-}" ] && [ -z "${SOAK_DIR:-}" ]; then
    rm -rf "$W"
  else
    echo "soak: work directory kept: $W (tierd log: $W/tierd.log)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -r "$CEPH/env" ] && "$SRC/scripts/ceph.sh" status "$CEPH" >/dev/null 2>&1; then
  CEPH_REUSED=1
fi
# RGW's port stays free while RGW is down; a cluster started meanwhile by a test (ceph.sh picks
# the first free port from 7480) must not take it, so the soak's RGW listens far from that range.
if [ -z "${TIER_RGW_PORT:-}" ]; then
  for ((p = 17480; p < 17580; p++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { export TIER_RGW_PORT=$p; break; }
  done
fi
"$SRC/scripts/ceph.sh" start "$CEPH"

SOAK_SRC=$SRC SOAK_WORK=$W SOAK_CEPH_DIR=$CEPH SOAK_BUILD=$BUILD SOAK_RESULTS=$RESULTS \
  SOAK_COMMIT=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown) \
  python3 "$SRC/scripts/soak.py" &
PY=$!
rc=0
wait "$PY" || rc=$?
PY=
exit "$rc"
