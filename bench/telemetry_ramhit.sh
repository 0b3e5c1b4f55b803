#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/telemetry_ramhit.sh - the cost of telemetry on RAM-hit 4 KiB reads through the mount
# (issue 10: telemetry on >= 0.99x of telemetry off, median of >= 10 interleaved runs).
#
# A file set that fits tierd's RAM level (NFILES x FILE_MB MiB, read-cache namespace over a POSIX
# backend) is warmed through the mount (cat), then `randread` (tests/perf/randread.c) does 4 KiB
# preads at random aligned offsets, O_DIRECT, THREADS threads back to back, for SECONDS. O_DIRECT
# is the page-cache bypass: the kernel sends every pread to tierd as one FUSE READ (no page cache,
# no readahead), so each one is a tierd RAM hit; the script checks that no read reached the
# backend during the measurement (/v1/stats cache.fetches unchanged) and that RAM hits grew by
# at least the reads counted. RUNS pairs, strictly alternating on, off, on, off, ..., tierd
# restarted with the other config each time ([daemon] telemetry = on|off). The ratio of a pair
# is reads/s on / reads/s off (ORDER=abba: on, off, off, on, on, off, ... instead, so that a
# drift or a difference between a pair's first and second run cancels out); printed: every run, the median ratio, min..max and the IQR. Also
# per run: tierd's CPU time per read (utime + stime from /proc/PID/stat, less sensitive to the
# other load on the machine than wall time) and, telemetry on, tierd's own mean read latency
# (/v1/telemetry sum_ns / ops of op=read tier=ram): client µs/read minus it is the FUSE round trip.
#
# Usage: bench/telemetry_ramhit.sh [WORKDIR]
#   env: RUNS=10 (pairs) SECONDS_PER=5 THREADS=1 NFILES=32 FILE_MB=4 ORDER=alternate|abba
#        BUILD=build-rel
set -euo pipefail
W=${1:-/tmp/tierd-bench-tele-ramhit}
RUNS=${RUNS:-10}
SECONDS_PER=${SECONDS_PER:-5}
THREADS=${THREADS:-1}
NFILES=${NFILES:-32}
FILE_MB=${FILE_MB:-4}
ORDER=${ORDER:-alternate}
[ "$ORDER" = alternate ] || [ "$ORDER" = abba ] || { echo "ORDER is alternate or abba" >&2; exit 2; }
mkdir -p "$W/data"
# shellcheck source=bench/telemetry_lib.sh
. "$(dirname "$0")/telemetry_lib.sh"
trap tele_cleanup EXIT

for i in $(seq -w 1 "$NFILES"); do
  f=$W/data/f$i.bin
  [ "$(stat -c %s "$f" 2>/dev/null)" = $((FILE_MB << 20)) ] || head -c $((FILE_MB << 20)) /dev/urandom >"$f"
done
for mode in on off; do
  cat >"$W/$mode.conf" <<CONF
[daemon]
log_level = warn
telemetry = $mode
[cache]
ram_size = $((NFILES * FILE_MB * 2))M
block_size = 1M
[backend local]
type = posix
root = $W/data
[namespace /d]
backend = local
[mount]
path = $MNT
attr_ttl = 60s
entry_ttl = 60s
[api]
socket = $SOCK
CONF
done
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$PID/stat"; } # tierd's utime + stime
stat_of() { api /v1/stats | python3 -c 'import json,sys; c=json.load(sys.stdin)["cache"]; print(c["fetches"], c["ram"]["hits"])'; }

echo "## telemetry on vs off, RAM-hit 4 KiB O_DIRECT reads, $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
echo "$(nproc) cores, load before: $(loadavg); $NFILES x $FILE_MB MiB warm in RAM, $THREADS thread(s), $SECONDS_PER s per run, $RUNS pairs, order $ORDER"
echo
echo "| run | telemetry | reads/s | µs/read (client) | µs/read inside tierd (telemetry) | tierd CPU µs/read | backend fetches during run | RAM hits during run | load (1 min) |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
declare -a RON ROFF CON COFF
for k in $(seq 1 "$RUNS"); do
  order="on off"
  [ "$ORDER" = alternate ] || [ $((k % 2)) = 1 ] || order="off on"
  for mode in $order; do
    start_tierd "$W/$mode.conf"
    cat "$MNT"/d/*.bin >/dev/null # warm: every block into the RAM level
    files=("$MNT"/d/*.bin)
    "$RANDREAD" 1 "$THREADS" 4096 "${files[@]}" >/dev/null # warm-up: threads, dentries, CPU
    [ "$mode" = off ] || api /v1/telemetry >"$W/tele0.json"
    read -r f0 h0 < <(stat_of)
    c0=$(cpu_ticks)
    out=$("$RANDREAD" "$SECONDS_PER" "$THREADS" 4096 "${files[@]}")
    c1=$(cpu_ticks)
    read -r f1 h1 < <(stat_of)
    tmean=-
    if [ "$mode" = on ]; then
      api /v1/telemetry >"$W/tele1.json" || die "telemetry on, but /v1/telemetry failed"
      tmean=$(python3 - "$W/tele0.json" "$W/tele1.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def tot(j):
    s = [x for x in j["ops"] if x["op"] == "read" and x["tier"] == "ram"]
    return sum(x["ops"] for x in s), sum(x["sum_ns"] for x in s)
(n0, s0), (n1, s1) = tot(a), tot(b)
print("%.2f" % ((s1 - s0) / max(n1 - n0, 1) / 1000.0))
PY
)
    else
      code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://tierd/metrics)
      [ "$code" = 404 ] || die "telemetry off, but /metrics answered $code"
    fi
    stop_tierd
    rps=$(echo "$out" | sed -n 's/.*reads_per_s=\([0-9]*\).*/\1/p')
    us=$(echo "$out" | sed -n 's/.*us_per_read=\([0-9.]*\).*/\1/p')
    reads=$(echo "$out" | sed -n 's/^reads=\([0-9]*\).*/\1/p')
    [ "$f1" = "$f0" ] || die "run $k ($mode): $((f1 - f0)) reads reached the backend: not all RAM hits"
    [ $((h1 - h0)) -ge "$reads" ] || die "run $k ($mode): $reads reads but only $((h1 - h0)) RAM hits"
    cpu_us=$(awk -v t=$((c1 - c0)) -v n="$reads" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }')
    echo "| $k | $mode | $rps | $us | $tmean | $cpu_us | $((f1 - f0)) | $((h1 - h0)) | $(cut -d' ' -f1 /proc/loadavg) |"
    if [ "$mode" = on ]; then RON[k]=$rps; CON[k]=$cpu_us; else ROFF[k]=$rps; COFF[k]=$cpu_us; fi
  done
done
echo
python3 - "${RON[*]}" "${ROFF[*]}" "${CON[*]}" "${COFF[*]}" <<'PY'
import statistics, sys
on, off, con, coff = ([float(x) for x in a.split()] for a in sys.argv[1:5])
r = sorted(a / b for a, b in zip(on, off))
q = statistics.quantiles(r, n=4, method="inclusive") if len(r) > 1 else [r[0], r[0], r[0]]
print("ratio on/off per pair: " + " ".join("%.3f" % x for x in r))
print("median ratio %.3f, min..max %.3f..%.3f, IQR %.3f..%.3f (goal >= 0.99: %s)" % (
    statistics.median(r), r[0], r[-1], q[0], q[2], "met" if statistics.median(r) >= 0.99 else "missed"))
print("median reads/s: on %.0f, off %.0f" % (statistics.median(on), statistics.median(off)))
print("median tierd CPU per read: on %.2f µs, off %.2f µs" % (statistics.median(con), statistics.median(coff)))
PY
echo "load after: $(loadavg)"
