#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/telemetry_p99.sh - does tierd's own read latency match what the client sees? (issue 10:
# for backend-served reads of a tierbench inference phase, tierd's p99 within 10 % of the p99
# tierbench measures; the FUSE gap, client minus tierd, for all reads.)
#
# Setup: a read-cache namespace over a POSIX backend on the local ext4 disk; the dataset (NFILES
# x 1 MiB, `tierbench gen` straight into the backend's directory, not through the mount) is
# dropped from the OS page cache before each run (posix_fadvise DONTNEED per file, so the
# backend's reads go to the disk at first) and tierd's RAM level is tiny (RAM_SIZE, 64 KiB
# blocks, no disk level, readahead off), so nearly every request is a cache miss that tierd
# serves from the backend. tierbench runs one inference phase through the mount with --direct
# (O_DIRECT: each request is one FUSE READ, without the page cache or readahead that would
# otherwise turn client reads into different kernel reads), open loop at RATE requests/s.
# tierd's figures are the fine /v1/telemetry histograms (1.6 % buckets) of op=read, diffed
# around the phase: tier=backend alone, and all tiers; the client's are tierbench's histogram
# (0.4 %) of every request, latency from its intended send time. The script checks that tierd
# counted exactly as many reads as tierbench issued.
#
# Usage: bench/telemetry_p99.sh [WORKDIR]
#   env: RUNS=3 DURATION=20s RATE=200 THREADS=16 READ_SIZE=4K-256K NFILES=256 (tierbench reads the first 256) RAM_SIZE=1M
set -euo pipefail
W=${1:-/tmp/tierd-bench-tele-p99}
RUNS=${RUNS:-3}
DURATION=${DURATION:-20s}
RATE=${RATE:-200}
THREADS=${THREADS:-16}
READ_SIZE=${READ_SIZE:-4K-256K}
NFILES=${NFILES:-256}
RAM_SIZE=${RAM_SIZE:-1M}
mkdir -p "$W/data"
# shellcheck source=bench/telemetry_lib.sh
. "$(dirname "$0")/telemetry_lib.sh"
trap tele_cleanup EXIT

[ "$(find "$W/data/tb/samples" -type f 2>/dev/null | wc -l)" = "$NFILES" ] || {
  rm -rf "$W/data/tb"
  "$TIERBENCH" gen "$W/data/tb" --files "$NFILES" --size fixed:1M >/dev/null
}
cat >"$W/tierd.conf" <<CONF
[daemon]
log_level = warn
[cache]
ram_size = $RAM_SIZE
block_size = 64K
[backend local]
type = posix
root = $W/data
[namespace /d]
backend = local
[mount]
path = $MNT
attr_ttl = 60s
entry_ttl = 60s
readahead_blocks = 0
[api]
socket = $SOCK
CONF

echo "## tierd vs client read latency, tierbench inference --direct, $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
echo "$(nproc) cores, load before: $(loadavg); $NFILES x 1 MiB on ext4 (page cache dropped), RAM level $RAM_SIZE (64 KiB blocks), $RATE req/s, $THREADS threads, read_size $READ_SIZE, $DURATION"
echo
echo "| run | reads (client / tierd) | backend-served | client p50 | tierd p50 all | gap p50 | client p99 | tierd p99 all | gap p99 | tierd p99 backend | backend p99 / client p99 | load |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for k in $(seq 1 "$RUNS"); do
  for f in "$W"/data/tb/samples/*; do dd if="$f" iflag=nocache count=0 status=none; done
  start_tierd "$W/tierd.conf"
  ls "$MNT/d/tb/samples" >/dev/null
  api /v1/telemetry >"$W/tele0.json"
  "$TIERBENCH" run "$MNT/d/tb" --direct --no-training --no-checkpoint --phases alone \
    --duration "$DURATION" --rate "$RATE" --infer-threads "$THREADS" --read-size "$READ_SIZE" \
    --quiet --no-progress --json "$W/tb$k.json" >/dev/null
  api /v1/telemetry >"$W/tele1.json"
  stop_tierd
  python3 - "$W/tele0.json" "$W/tele1.json" "$W/tb$k.json" "$k" "$(cut -d' ' -f1 /proc/loadavg)" <<PY
$TELE_PY
import sys
t0, t1, tb = (json.load(open(p)) for p in sys.argv[1:4])
def reads(t, tier=None):
    return [s for s in t["ops"] if s["op"] == "read" and (tier is None or s["tier"] == tier)]
def hist(tier=None):
    return diff(merge(reads(t1, tier)), merge(reads(t0, tier)))
allb, beb = hist(), hist("backend")
n_t = sum(c for _, c in allb)
n_be = sum(c for _, c in beb)
ph = [p for p in tb["phases"] if p["name"] == "inference-alone"][0]
inf = ph["inference"]
lat = inf["latency_ns"]
n_c = inf["completed"]
us = lambda ns: ns / 1000.0
cp50, cp99 = lat["p50"], lat["p99"]
tp50, tp99, bp99 = quantile(allb, 0.5), quantile(allb, 0.99), quantile(beb, 0.99)
print("| %s | %d / %d%s | %.1f %% | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %.3f | %s |" % (
    sys.argv[4], n_c, n_t, "" if n_c == n_t else " (MISMATCH)", 100.0 * n_be / max(n_t, 1),
    us(cp50), us(tp50), us(cp50 - tp50), us(cp99), us(tp99), us(cp99 - tp99), us(bp99),
    bp99 / cp99, sys.argv[5]))
if inf.get("late") or inf.get("dropped") or inf.get("errors"):
    print("  (run %s: late %s, dropped %s, errors %s)" % (sys.argv[4], inf.get("late"), inf.get("dropped"), inf.get("errors")))
PY
done
echo
echo "load after: $(loadavg)"
