#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/advice.sh - issue 27's run: two training jobs as two tenants on one shaped object-store
# link and a hot tier too small for both, with no quotas, with equal static quotas and with
# [tenants] auto_quota = on (starting from the same equal quotas) side by side in one run.
#
#   link     scripts/netlink.sh up at RATE (Ceph in a network namespace behind tbf both ways, no
#            proxy)
#   data     A_FILES and B_FILES files of KB KiB uploaded over the link under a/ and b/: job A's
#            set is about 60 % of the hot tier (by default), job B's 4 times it
#   jobs     bench/dataloader.py (Debian's python3-torch, WORKERS loader workers, batch BATCH, a
#            shuffled RandomSampler, each file's pages dropped after its read so that every
#            epoch reaches the mount) wrapped in contrib/python/tierd_hints.py's StallReport:
#            A re-reads its set A_EPOCHS times with A_COMPUTE ms of emulated compute per sample,
#            B scans its set once with B_COMPUTE ms per sample; both start together, as uids 2201
#            (tenant a) and 2202 (tenant b) by setpriv, and each prints its own totals: wait_s
#            (the loop's data stall) and wall_s. A keeps its loader workers between epochs
#            (persistent_workers), so its wait is the data's, not worker start-up. During the auto
#            run `tierctl advise` every 3 s; the last one that shows both tenants is printed
#   tierd    a fresh mount and a fresh RAM cache of RAM (no disk level, curves on) per
#            configuration: none (no quotas), static ([tenants] cache_quota = RAM / 2), auto
#            (the same, with auto_quota = on and advice_interval = INTERVAL)
# Per configuration: total stall (A's wait + B's wait), each job's wait and wall time, the bytes
# tierd fetched from the backend (GET /v1/stats), each tenant's quota at the end; then
# `tierctl advise` during the auto run. Goal (issue 27): auto's total stall >= 20 % below the better
# of none and static. Prints the table (median and range over RUNS) and the machine's load;
# exits 1 when a run failed, not when the goal is missed. Everything it made (namespace, veth,
# qdiscs, Ceph, tierd, the mount) is removed on exit.
#
# Usage: bench/advice.sh [WORKDIR]   (root, python3-torch; default WORKDIR /tmp/tierd-bench-advice)
#   env: RATE=100mbit RUNS=1 RAM=64M KB=256 A_FILES=160 B_FILES=1024 A_EPOCHS=8 A_COMPUTE=20
#        B_COMPUTE=30 WORKERS=2 BATCH=16 INTERVAL=2s BUILD=build-daemonrel CONFIGS="none static
#        auto"
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-advice}
RATE=${RATE:-100mbit}
RUNS=${RUNS:-1}
RAM=${RAM:-64M}
KB=${KB:-256}
A_FILES=${A_FILES:-160}
B_FILES=${B_FILES:-1024}
A_EPOCHS=${A_EPOCHS:-8}
A_COMPUTE=${A_COMPUTE:-20}
B_COMPUTE=${B_COMPUTE:-30}
WORKERS=${WORKERS:-2}
BATCH=${BATCH:-16}
INTERVAL=${INTERVAL:-2s}
BUILD=${BUILD:-build-daemonrel}
CONFIGS=${CONFIGS:-none static auto}
PY=/usr/bin/python3
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

[ "$(id -u)" = 0 ] || { echo "bench/advice.sh: needs root (netlink.sh, setpriv)" >&2; exit 1; }
$PY -c "import torch" 2>/dev/null || { echo "bench/advice.sh: needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 2; }
for tool in setpriv curl ip tc; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (scripts/deps.sh)" >&2; exit 1; }
done
if ! [[ $RUNS =~ ^[0-9]+$ ]] || ((RUNS < 1)); then
  echo "bench/advice.sh: RUNS must be a whole number > 0" >&2
  exit 2
fi
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
echo "load before: $(loadavg) (1/5/15 min; $(nproc) CPUs); $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
tierd_build_release "$BUILD" tierd tierctl
tierd_bins "$BUILD"
RAM_B=$(numfmt --from=iec "$RAM")
HALF=$((RAM_B / 2))
rm -rf "$W/py" "$W/out"
mkdir -p "$W/mnt" "$W/out" "$W/py"
chmod 0711 "$W"
chmod 0777 "$W/out"
# the jobs run as other uids: their programs in a directory they can read
cp bench/dataloader.py "$W/py/"
mkdir -p "$W/contrib/python"
cp contrib/python/tierd_hints.py "$W/contrib/python/"
chmod -R a+rX "$W/py" "$W/contrib"
tierd_places "$W"
LINK=$W/link
JOBS=()
SAMPLER=
cleanup() {
  local p
  for p in "${JOBS[@]}" $SAMPLER; do kill "$p" 2>/dev/null || true; done
  tierd_reap "${TIERD_PID:-}"
  tierd_unmount "$MNT"
  scripts/netlink.sh down "$LINK" >/dev/null 2>&1 || true
  rm -rf "$W/src"
}
trap cleanup EXIT
scripts/netlink.sh up "$LINK" "$RATE" >/dev/null
tierd_rgw_env "$LINK"
EP=$S3_ENDPOINT_DIRECT
BUCKET=bench-advice-$(date +%s)
tierd_s3 -X PUT "$EP/$BUCKET" >/dev/null
t=$SECONDS
tierd_bench_files "$W/src/a" "$A_FILES" "$KB"
tierd_bench_files "$W/src/b" "$B_FILES" "$KB"
tierd_bench_upload "$W/src/a" "$EP/$BUCKET/a"
tierd_bench_upload "$W/src/b" "$EP/$BUCKET/b"
rm -rf "$W/src"
echo "uploaded $A_FILES + $B_FILES files of $KB KiB in $((SECONDS - t)) s; hot tier $RAM: A's set $((A_FILES * KB * 100 / (RAM_B / 1024))) %, B's $((B_FILES * KB * 100 / (RAM_B / 1024))) % of it"

tierd_bench_results "$W/results"

conf() { # conf none|static|auto
  local q=() a=()
  [ "$1" = none ] || q=("cache_quota = $HALF")
  [ "$1" != auto ] || a=("auto_quota = on" "advice_interval = $INTERVAL")
  {
    tierd_conf_section daemon "log_level = info"
    tierd_conf_section cache "ram_size = $RAM" "curves = on"
    tierd_conf_rgw rgw "$BUCKET"
    tierd_conf_ns /s3 rgw
    tierd_conf_mount "$MNT" "allow_other = true" "umask = 022"
    tierd_conf_section tenants "${q[@]}" "${a[@]}"
    tierd_conf_section "tenant a" "uid = 2201"
    tierd_conf_section "tenant b" "uid = 2202"
    tierd_conf_api "$SOCK" "socket_group = 2200"
  } >"$CONF"
}

# job UID NAME DIR EPOCHS COMPUTE: one job in the background as UID (group 2200: the socket's)
job() {
  local uid=$1 name=$2 dir=$3 epochs=$4 c=$5
  setpriv --reuid "$uid" --regid "$uid" --groups 2200 --inh-caps=-all \
    $PY "$W/py/dataloader.py" "$MNT/s3/$dir" "$c" --epochs "$epochs" --workers "$WORKERS" \
    --batch "$BATCH" --seed "$uid" --drop --stall "$name" --socket "$SOCK" \
    >"$W/out/$name.json" 2>"$W/out/$name.err" &
  JOBS+=($!)
}
field() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
quotas() { # "a SHARE/SPLIT MiB, b ..." from GET /v1/advice: each tenant's share of the hot tier
  # (its quota) and the advised split
  tierd_api "$SOCK" /v1/advice | $PY -c '
import json, sys
ts = json.load(sys.stdin).get("tenants") or []
print(", ".join("%s %d/%d MiB" % (t["name"], t["share_bytes"] >> 20, t["split_bytes"] >> 20)
                for t in ts if t.get("name") in ("a", "b")))'
}

for run in $(seq 1 "$RUNS"); do
  for cfg in $CONFIGS; do
    conf "$cfg"
    tierd_start "$CONF" "$W/tierd-$cfg.log" "$MNT" "$SOCK" || exit 1
    ls "$MNT/s3/a" "$MNT/s3/b" >/dev/null # the listings are not what is measured
    sync
    echo 3 >/proc/sys/vm/drop_caches
    JOBS=()
    t0=$(now)
    job 2201 a a "$A_EPOCHS" "$A_COMPUTE"
    job 2202 b b 1 "$B_COMPUTE"
    if [ "$cfg" = auto ]; then
      # `tierctl advise` every 3 s while A runs; the last one that shows both tenants is kept
      (
        while kill -0 "${JOBS[0]}" 2>/dev/null; do
          if tierd_ctl advise >"$W/out/advise.tmp" 2>&1 && grep -q '^a ' "$W/out/advise.tmp" &&
            grep -q '^b ' "$W/out/advise.tmp"; then
            { echo "at $(secs "$t0" "$(now)") s:"; cat "$W/out/advise.tmp"; } >"$W/out/advise-$run.txt"
          fi
          sleep 3 # sampling interval
        done
      ) &
      SAMPLER=$!
    fi
    for p in "${JOBS[@]}"; do
      wait "$p" || { echo "a job failed ($cfg):" >&2; cat "$W"/out/*.err >&2; exit 1; }
    done
    JOBS=()
    t1=$(now)
    wa=$(field "$W/out/a.json" wait_s)
    wb=$(field "$W/out/b.json" wait_s)
    rec "${cfg}_total" "$(awk -v a="$wa" -v b="$wb" 'BEGIN { print a + b }')"
    rec "${cfg}_wait_a" "$wa"
    rec "${cfg}_wait_b" "$wb"
    rec "${cfg}_wall_a" "$(field "$W/out/a.json" wall_s)"
    rec "${cfg}_wall_b" "$(field "$W/out/b.json" wall_s)"
    rec "${cfg}_wall" "$(secs "$t0" "$t1")"
    fb=$(tierd_api "$SOCK" /v1/stats | $PY -c 'import json,sys; print(json.load(sys.stdin)["cache"]["fetch_bytes"])')
    rec "${cfg}_mib" "$((fb >> 20))"
    echo "run $run, $cfg: stall a ${wa} s, b ${wb} s; backend $((fb >> 20)) MiB; share/advised split at the end: $(quotas || echo '?'); load $(loadavg)"
    if [ "$cfg" = auto ]; then
      wait "$SAMPLER" || true
      SAMPLER=
      grep -i "quota" "$W/tierd-$cfg.log" | grep -iv "warn.*sum" | tail -8 >"$W/out/auto-log-$run.txt" || true
    fi
    tierd_stop || true
  done
done
echo "load after: $(loadavg)"
echo
echo "link: tbf $RATE each way; hot tier $RAM of RAM; A: $A_FILES x $KB KiB, $A_EPOCHS epochs, $A_COMPUTE ms per sample; B: $B_FILES x $KB KiB, 1 epoch, $B_COMPUTE ms per sample; $WORKERS workers, batch $BATCH; auto: advice_interval $INTERVAL; $RUNS runs (median (min-max))"
echo
echo "| configuration | total data stall, s | A's stall, s | B's stall, s | A's wall, s | B's wall, s | backend MiB |"
echo "|---|---|---|---|---|---|---|"
cell() { stats "$1" | awk -v r="$RUNS" '{ if (r > 1) printf "%.2f (%.2f-%.2f)", $1, $2, $3; else printf "%.2f", $1 }'; }
for cfg in $CONFIGS; do
  echo "| $cfg | $(cell "${cfg}_total") | $(cell "${cfg}_wait_a") | $(cell "${cfg}_wait_b") | $(cell "${cfg}_wall_a") | $(cell "${cfg}_wall_b") | $(cell "${cfg}_mib") |"
done
read -r tn _ _ < <(stats none_total)
read -r ts _ _ < <(stats static_total)
read -r ta _ _ < <(stats auto_total)
awk -v n="$tn" -v s="$ts" -v a="$ta" 'BEGIN {
  if (n == "-" || s == "-" || a == "-") exit
  b = n < s ? n : s
  printf "\nauto / better static (%s): %.2f (goal <= 0.80)\n", n < s ? "none" : "static", a / b }'
for f in "$W"/out/advise-*.txt; do
  [ -e "$f" ] || continue
  echo
  echo "tierctl advise during the auto run (${f##*/}), the last that showed both jobs:"
  cat "$f"
  echo "auto_quota's log lines (last 8):"
  cat "$W/out/auto-log-${f##*advise-}"
done
