#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/telemetry_ramhit_ab.sh - telemetry on vs off for RAM-hit 4 KiB reads through the mount,
# side by side: the variant of bench/telemetry_ramhit.sh for a machine with other load on it.
#
# Two tierd run at once on two mounts over the same POSIX data (32 x 4 MiB, read-cache, RAM
# level 256 MiB), one with [daemon] telemetry = on, one with off; both are warmed (cat), then
# `randread --ab` (tests/perf/randread.c) reads 4 KiB O_DIRECT at random aligned offsets, one thread,
# in rounds of CHUNK reads from the "on" mount and CHUNK from the "off" mount (ABBA order, the
# same offsets on both), each half timed. A round takes ~0.1 s, so load that changes more slowly
# than that hits both halves alike; the ratio of a round is reads/s on / reads/s off. One run
# is SECONDS_PER of rounds; RUNS runs, tierd restarted before each with the two configs swapped
# between the mounts and the start order changed every second run (so neither mount, nor which
# tierd starts first, favours one config). Printed per
# run: the median ratio of its rounds, its IQR, and both rates; then the median of the runs'
# medians with min..max. The script checks that no read reached the backend (/v1/stats
# cache.fetches unchanged on both).
#
# KNOB=curves: the same A/B for [cache] curves (docs/ADVICE.md) instead of telemetry (on in
# both): every read is a new access to its block, and with a 256 MiB RAM level of 1 MiB blocks
# every access is sampled (the most the curves cost a read); the script checks GET /v1/advice
# says curves are on (off) on the on (off) mount; goal >= 0.98 (issue 27: <= 2 %).
#
# Usage: bench/telemetry_ramhit_ab.sh [WORKDIR]
#   env: RUNS=10 SECONDS_PER=5 CHUNK=2000 NFILES=32 FILE_MB=4 BUILD=build-rel KNOB=telemetry
#        OFF_MODE=on: the control, the knob on on both mounts (the method's own bias; want 1.00)
set -euo pipefail
W=${1:-/tmp/tierd-bench-tele-ab}
RUNS=${RUNS:-10}
SECONDS_PER=${SECONDS_PER:-5}
CHUNK=${CHUNK:-2000}
NFILES=${NFILES:-32}
FILE_MB=${FILE_MB:-4}
OFF_MODE=${OFF_MODE:-off} # on: an A/A control run, both mounts with the knob on
KNOB=${KNOB:-telemetry}   # or curves
case "$KNOB" in telemetry) GOAL=0.99 ;; curves) GOAL=0.98 ;; *) echo "KNOB: telemetry or curves" >&2; exit 2 ;; esac
mkdir -p "$W/data" "$W/mnt-x" "$W/mnt-y"
# shellcheck source=bench/telemetry_lib.sh
. "$(dirname "$0")/telemetry_lib.sh"
declare -A TPID
stop_all() {
  local m
  for m in x y; do
    [ -z "${TPID[$m]:-}" ] || tierd_stop "${TPID[$m]}" || true
    TPID[$m]=
    tierd_unmount "$W/mnt-$m"
  done
}
trap stop_all EXIT
for i in $(seq -w 1 "$NFILES"); do
  f=$W/data/f$i.bin
  [ "$(stat -c %s "$f" 2>/dev/null)" = $((FILE_MB << 20)) ] || head -c $((FILE_MB << 20)) /dev/urandom >"$f"
done
conf() { # MOUNT(x|y) MODE(on|off)
  local tele=$2 curves=off
  [ "$KNOB" = telemetry ] || { tele=on; curves=$2; }
  cat >"$W/$1.conf" <<CONF
[daemon]
log_level = warn
telemetry = $tele
[cache]
ram_size = $((NFILES * FILE_MB * 2))M
block_size = 1M
curves = $curves
[backend local]
type = posix
root = $W/data
[namespace /d]
backend = local
[mount]
path = $W/mnt-$1
attr_ttl = 60s
entry_ttl = 60s
[api]
socket = $W/api-$1.sock
CONF
}
fetches() { tierd_api "$W/api-$1.sock" /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"]["fetches"])'; }

echo "## $KNOB on vs off side by side, RAM-hit 4 KiB O_DIRECT reads, $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
echo "$(nproc) cores, load before: $(loadavg); $NFILES x $FILE_MB MiB warm in RAM on two mounts, 1 thread, rounds of $CHUNK + $CHUNK reads, $SECONDS_PER s per run, $RUNS runs, the other mount $KNOB = $OFF_MODE"
echo
echo "| run | on mount | rounds | on reads/s | off reads/s | ratio on/off (median of rounds) | IQR of rounds | load (1 min) |"
echo "|---:|---|---:|---:|---:|---:|---|---:|"
MEDS=()
for k in $(seq 1 "$RUNS"); do
  if [ $((k % 2)) = 1 ]; then on=x off=y; else on=y off=x; fi
  conf "$on" on
  conf "$off" "$OFF_MODE"
  order="$on $off"
  [ $(((k + 1) / 2 % 2)) = 1 ] || order="$off $on" # start order: on first, on first, off first, ...
  for m in $order; do
    tierd_spawn "$W/$m.conf" "$W/tierd.log"
    TPID[$m]=$TIERD_PID
  done
  for m in x y; do
    tierd_poll 30 tierd_mounted "$W/mnt-$m" || die "mount $m did not come up ($(tail -3 "$W/tierd.log"))"
    cat "$W/mnt-$m"/d/*.bin >/dev/null
  done
  if [ "$KNOB" = telemetry ]; then
    code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$W/api-$off.sock" http://tierd/metrics)
    [ "$code" = "$([ "$OFF_MODE" = off ] && echo 404 || echo 200)" ] || die "the off mount's /metrics answered $code"
  else
    en() { tierd_api "$W/api-$1.sock" /v1/advice | python3 -c 'import json,sys; print(str(json.load(sys.stdin)["enabled"]).lower())'; }
    [ "$(en "$on")" = true ] || die "the on mount's curves are off"
    [ "$(en "$off")" = "$([ "$OFF_MODE" = off ] && echo false || echo true)" ] || die "the off mount's curves are not $OFF_MODE"
  fi
  A=("$W/mnt-$on"/d/*.bin)
  B=("$W/mnt-$off"/d/*.bin)
  "$RANDREAD" --ab 1 4096 "$CHUNK" "${A[@]}" -- "${B[@]}" >/dev/null # warm-up
  fa0=$(fetches "$on"); fb0=$(fetches "$off")
  out=$("$RANDREAD" --ab "$SECONDS_PER" 4096 "$CHUNK" "${A[@]}" -- "${B[@]}")
  if [ "$(fetches "$on")" != "$fa0" ] || [ "$(fetches "$off")" != "$fb0" ]; then
    die "run $k: reads reached the backend"
  fi
  stop_all
  v() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$out"; }
  echo "| $k | $on | $(v rounds) | $(v a_reads_per_s) | $(v b_reads_per_s) | $(v ratio_median) | $(v ratio_q1)..$(v ratio_q3) | $(cut -d' ' -f1 /proc/loadavg) |"
  MEDS+=("$(v ratio_median)")
done
echo
python3 - "$GOAL" "${MEDS[@]}" <<'PY'
import statistics, sys
r = sorted(float(x) for x in sys.argv[2:])
q = statistics.quantiles(r, n=4, method="inclusive") if len(r) > 1 else [r[0]] * 3
print("runs' median ratios on/off: " + " ".join("%.4f" % x for x in r))
g = float(sys.argv[1])
print("median %.4f, min..max %.4f..%.4f, IQR %.4f..%.4f (goal >= %.2f: %s)" % (
    statistics.median(r), r[0], r[-1], q[0], q[2], g, "met" if statistics.median(r) >= g else "missed"))
PY
echo "load after: $(loadavg)"
