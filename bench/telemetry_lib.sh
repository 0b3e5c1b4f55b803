# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# bench/telemetry_lib.sh - sourced by bench/telemetry_*.sh, on top of scripts/lib/tierd.sh: the
# Release build, starting and stopping tierd on a mount, the control API, quantiles of
# /v1/telemetry histograms.
# The caller sets W (work directory) before sourcing; BUILD (default build-rel) may be set.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh
BUILD=${BUILD:-build-rel}
[ -n "${TELE_NO_BUILD:-}" ] || tierd_build_release "$BUILD" tierd tierctl tierbench randread
tierd_bins "$BUILD"
RANDREAD=$PWD/$BUILD/randread
for b in "$TIERD" "$TIERCTL" "$TIERBENCH" "$RANDREAD"; do
  [ -x "$b" ] || { echo "missing $b (build $BUILD)" >&2; exit 1; }
done
MNT=$W/mnt
SOCK=$W/api.sock
mkdir -p "$MNT"
PID=

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
mounted() { tierd_mounted "$MNT"; }
start_tierd() { # CONF
  tierd_spawn "$1" "$W/tierd.log"
  PID=$TIERD_PID
  tierd_up "$MNT" "" 30 || die "the mount did not come up ($(tail -3 "$W/tierd.log"))"
}
stop_tierd() {
  [ -n "$PID" ] || return 0
  tierd_stop "$PID" || true
  PID=
  tierd_poll 10 not_mounted || die "still mounted after tierd exited"
}
not_mounted() { ! grep -qs " $MNT fuse" /proc/mounts; }
api() { tierd_api "$SOCK" "$1"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
tele_cleanup() {
  stop_tierd
  tierd_unmount "$MNT"
}

# python3 helpers over GET /v1/telemetry answers (docs/API.md "TELEMETRY"): buckets are
# [upper_ns, own count]; a quantile is the midpoint of the bucket holding rank ceil(q n), as
# tele_quantile_diff() computes it.
export TELE_PY='
import json, math
def lower(u):
    if u <= 512: return 0
    m = (u - 1).bit_length() - 1
    return u - (1 << (m - 5))
def merge(series):
    b = {}
    for s in series:
        for u, c in s["buckets"]:
            b[u] = b.get(u, 0) + c
    return sorted(b.items())
def diff(cur, prev):
    p = dict(prev)
    return [(u, c - p.get(u, 0)) for u, c in cur if c - p.get(u, 0) > 0]
def quantile(buckets, q):
    n = sum(c for _, c in buckets)
    if n == 0: return float("nan")
    rank, acc = max(1, math.ceil(q * n)), 0
    for u, c in buckets:
        acc += c
        if acc >= rank:
            return (lower(u) + u) / 2.0
    return float("nan")
'
