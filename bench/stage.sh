#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# stage.sh - issue 4 performance goal: `tierctl stage` of N x SIZE objects from Ceph RGW into the
# hot tier vs fetching the same objects one at a time (goal >= 4x). Results: docs/bench/stage.md.
#
# Usage: bench/stage.sh [BUILD_DIR]        (default: build; needs tierd and tierctl built there)
# Environment:
#   N=1000 SIZE_KIB=100   dataset shape
#   RUNS=5                alternating rounds of (baseline, stage); the median of each is reported
#   STAGE_THREADS=8       tierd [daemon] stage_threads (8 is tierd's default)
#   CEPH_DIR              an RGW started by scripts/ceph.sh (default BUILD_DIR/ceph; started and
#                         stopped here if it is not running)
#
# Baseline ("one at a time"): one curl process GETs the N objects sequentially over one
# keep-alive connection with SigV4 (no per-object process start, no new connection per object),
# discarding the bodies; i.e. the best a single-stream client does. Staged: tierd with an S3
# backend on the same bucket and an empty cache; `tierctl stage /bench` fetches every block into
# RAM + disk levels with stage_threads workers. Rounds alternate so both see the same RGW state;
# before each stage round the cache is emptied with `tierctl evict /bench`. Both sides move every
# byte: the baseline's downloaded byte count and tierd's fetch_bytes are checked against N x SIZE.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
N=${N:-1000}
SIZE_KIB=${SIZE_KIB:-100}
RUNS=${RUNS:-5}
STAGE_THREADS=${STAGE_THREADS:-8}
CEPH_DIR=${CEPH_DIR:-$BUILD/ceph}
# shellcheck source=scripts/lib/tierd.sh
. "$SRC/scripts/lib/tierd.sh"
tierd_bins "$BUILD"

die() { echo "stage.sh: $*" >&2; exit 1; }
[ -x "$TIERD" ] || die "no $TIERD; build it first (cmake --build $BUILD --target tierd)"
[ -x "$TIERCTL" ] || die "no $TIERCTL; build it first (cmake --build $BUILD --target tierctl)"
[ -c /dev/fuse ] || die "tierd needs /dev/fuse"

W=$(mktemp -d "${TMPDIR:-/tmp}/bench-stage.XXXXXX")
tierd_places "$W"
TIERD_PID=
STARTED_CEPH=0
cleanup() {
    tierd_reap "$TIERD_PID"
    tierd_unmount "$MNT"
    [ "$STARTED_CEPH" = 1 ] && "$SRC/scripts/ceph.sh" stop "$CEPH_DIR" >/dev/null 2>&1
    rm -rf "$W"
}
trap cleanup EXIT

now_ns() { date +%s%N; }

# ---- RGW -------------------------------------------------------------------------------------
rgw_up() { [ -f "$CEPH_DIR/env" ] && tierd_rgw_env "$CEPH_DIR" && curl -s -o /dev/null "$S3_ENDPOINT"; }
if ! rgw_up; then
    echo "starting RGW in $CEPH_DIR ..." >&2
    "$SRC/scripts/ceph.sh" start "$CEPH_DIR" >&2
    STARTED_CEPH=1
fi
tierd_rgw_env "$CEPH_DIR"
SIG=("${TIERD_S3_SIG[@]}")
BUCKET=bench-stage-$(date +%s)-$$
code=$(curl -s -o /dev/null -w '%{http_code}' "${SIG[@]}" -X PUT "$S3_ENDPOINT/$BUCKET")
[ "$code" = 200 ] || die "cannot create bucket $BUCKET at $S3_ENDPOINT (HTTP $code)"

# ---- dataset ---------------------------------------------------------------------------------
mkdir -p "$W/src" "$W/mnt" "$W/cache"
python3 - "$W/src" "$N" "$SIZE_KIB" <<'EOF'
import os, sys
d, n, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    with open(os.path.join(d, "obj%05d.bin" % i), "wb") as f:
        f.write(os.urandom(kib * 1024))
EOF
: >"$W/put.cfg"
: >"$W/get.cfg"
for f in "$W"/src/*.bin; do
    k=$(basename "$f")
    printf 'upload-file = "%s"\nurl = "%s/%s/data/%s"\noutput = "/dev/null"\n' \
        "$f" "$S3_ENDPOINT" "$BUCKET" "$k" >>"$W/put.cfg"
    printf 'url = "%s/%s/data/%s"\noutput = "/dev/null"\n' "$S3_ENDPOINT" "$BUCKET" "$k" >>"$W/get.cfg"
done
bad=$(curl -s --no-progress-meter -Z --parallel-max 16 "${SIG[@]}" -K "$W/put.cfg" -w '%{http_code}\n' | grep -vc '^200$' || true)
[ "$bad" = 0 ] || die "$bad uploads failed"
TOTAL=$((N * SIZE_KIB * 1024))
echo "uploaded $N x $SIZE_KIB KiB to $S3_ENDPOINT/$BUCKET/data/" >&2

# ---- tierd -----------------------------------------------------------------------------------
{
    tierd_conf_section cache "ram_size = 1G" "disk_dir = $W/cache" "disk_size = 4G"
    tierd_conf_rgw rgw "$BUCKET" "path_style = true"
    tierd_conf_ns /bench rgw "prefix = data/"
    tierd_conf_mount "$MNT"
    tierd_conf_api "$SOCK"
    tierd_conf_section daemon "stage_threads = $STAGE_THREADS"
} >"$CONF"
tierd_start "$CONF" "$W/tierd.log" "" "$SOCK" || die "tierd did not start"
CTL=("$TIERCTL" -s "$SOCK")

fetch_bytes() { "${CTL[@]}" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"]["fetch_bytes"])'; }

# ---- rounds ----------------------------------------------------------------------------------
# CPU seconds (user + system) a process has used so far, from /proc/PID/stat.
cpu_s() {
    awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / hz}' "/proc/$1/stat"
}
RGW_PID=$(pgrep -f "radosgw.*$CEPH_DIR/ceph.conf" | head -1 || true)
rgw_cpu() { if [ -n "$RGW_PID" ]; then cpu_s "$RGW_PID"; else echo 0; fi; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b - a}'; }

base_s=()
stage_s=()
for r in $(seq 1 "$RUNS"); do
    g0=$(rgw_cpu)
    t0=$(now_ns)
    got=$(curl -s "${SIG[@]}" -K "$W/get.cfg" -w '%{size_download}\n' | awk '{s+=$1} END {print s}')
    t1=$(now_ns)
    g1=$(rgw_cpu)
    [ "$got" = "$TOTAL" ] || die "baseline downloaded $got bytes, want $TOTAL"
    base_s+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b-a)/1e9}')")

    "${CTL[@]}" evict /bench >/dev/null
    before=$(fetch_bytes)
    c0=$(cpu_s "$TIERD_PID")
    g2=$(rgw_cpu)
    t0=$(now_ns)
    "${CTL[@]}" stage /bench >"$W/stage.out"
    t1=$(now_ns)
    g3=$(rgw_cpu)
    c1=$(cpu_s "$TIERD_PID")
    after=$(fetch_bytes)
    [ $((after - before)) = "$TOTAL" ] ||
        die "stage fetched $((after - before)) bytes, want $TOTAL: $(cat "$W/stage.out")"
    stage_s+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b-a)/1e9}')")
    echo "round $r: one-at-a-time ${base_s[-1]} s (RGW CPU $(sub "$g0" "$g1") s)," \
        "tierctl stage ${stage_s[-1]} s (RGW CPU $(sub "$g2" "$g3") s, tierd CPU $(sub "$c0" "$c1") s)" \
        "($(tail -1 "$W/stage.out"))" >&2
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); CPUs: $(nproc)" >&2

# Where a staged object's time goes: the scheduler's view of the background fetches.
"${CTL[@]}" stats | python3 -c '
import json, sys
d = json.load(sys.stdin)
b = d["sched"]["background"]
n = max(b["completed"], 1)
print("tierd background fetches: %d, mean service %.2f ms, mean queue wait %.2f ms" % (
    b["completed"], b["service_ns_total"] / n / 1e6, b["wait_ns_total"] / n / 1e6))' >&2

# Idempotent re-run: nothing fetched.
before=$(fetch_bytes)
t0=$(now_ns)
"${CTL[@]}" stage /bench >"$W/stage.out"
t1=$(now_ns)
[ "$(fetch_bytes)" = "$before" ] || die "re-stage fetched bytes"
rerun_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b-a)/1e9}')

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mb=$(median "${base_s[@]}")
ms=$(median "${stage_s[@]}")
awk -v n="$N" -v kib="$SIZE_KIB" -v b="$mb" -v s="$ms" -v re="$rerun_s" -v th="$STAGE_THREADS" \
    -v bs="${base_s[*]}" -v ss="${stage_s[*]}" 'BEGIN {
    mib = n * kib / 1024
    printf "objects: %d x %d KiB (%.1f MiB) from RGW; stage_threads = %d; %d rounds\n", n, kib, mib, th, split(bs, x, " ")
    printf "| method | median s | objects/s | MiB/s | all rounds (s) |\n|---|---|---|---|---|\n"
    printf "| one at a time (curl, 1 keep-alive connection) | %.3f | %.0f | %.1f | %s |\n", b, n / b, mib / b, bs
    printf "| tierctl stage (cold cache) | %.3f | %.0f | %.1f | %s |\n", s, n / s, mib / s, ss
    printf "| tierctl stage again (all cached) | %.3f | | | |\n", re
    printf "speedup (median / median): %.2fx (goal >= 4x)\n", b / s
    nb = split(bs, xb, " "); split(ss, xs, " ")
    printf "per-round speedup:"
    for (i = 1; i <= nb; i++) printf " %.2fx", xb[i] / xs[i]
    printf "\n"
}'
