#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/dataloader.sh - issue 12's PyTorch DataLoader runs: bench/dataloader.py (Debian's
# python3-torch; 4 workers, batch 32, a shuffled RandomSampler, COMPUTE ms of emulated
# accelerator work per sample) over FILES x KB KiB objects, through the delayed link of
# scripts/netlink.sh (tbf RATE both ways, +DELAY_MS each way), side by side in one run:
#   local       the same files on local disk, page cache dropped (the job with nothing to fetch)
#   local_warm  the same again, page cache warm
#   parallel    every object fetched with PAR curl GETs in flight through the proxy (one curl
#               --parallel --parallel-max PAR: its connections kept alive and reused)
#   tierd       a fresh mount whose cache (RAM_SIZE, no disk level) is smaller than the dataset
#   hinted      the same with contrib/python/tierd_hints.py's HintedSampler
#   staged      a fresh mount with a cache larger than the dataset after `tierctl stage` (the
#               stage itself timed too, against the parallel fetch of the same objects)
# Goals: hinted first epoch <= 1.1 x max(local, parallel); staged utilisation >= 0.97 x local's;
# tierctl stage <= 1.0 x the parallel fetch.
# LINK=latency: the link as an object store far away with no per-stream limit, a new user's
# setup: no rate on the link (tbf at 10gbit), the proxy's +2 ms each way, PAR=16 (the defaults
# of RATE, DELAY_MS and PAR then; each may still be set). LINK=tbf (default): as above.
# Prints one table (median and range over RUNS) and the machine's load; the link is taken down
# on exit, whatever happens.
#
# Usage: bench/dataloader.sh [WORKDIR]   (needs root and python3-torch; default WORKDIR
#        /tmp/tierd-bench-dataloader)
#   env: LINK=tbf RATE=200mbit DELAY_MS=5 FILES=3000 KB=110 PAR=32 RUNS=1 COMPUTES="0.5 5"
#        RAM_SIZE=160M BUILD=build-daemonrel HINT_WINDOW (tierd's [cache] hint_window; unset: its
#        default), ROWS (a subset of "parallel local tierd hinted staged"; the table shows - for
#        the others)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-dataloader}
LINK_KIND=${LINK:-tbf}
case $LINK_KIND in
tbf) RATE=${RATE:-200mbit} DELAY_MS=${DELAY_MS:-5} PAR=${PAR:-32} ;;
latency) RATE=${RATE:-10gbit} DELAY_MS=${DELAY_MS:-2} PAR=${PAR:-16} ;;
*) echo "bench/dataloader.sh: LINK '$LINK_KIND' is not tbf or latency" >&2 && exit 2 ;;
esac
FILES=${FILES:-3000}
KB=${KB:-110}
RUNS=${RUNS:-1}
COMPUTES=${COMPUTES:-0.5 5}
RAM_SIZE=${RAM_SIZE:-160M}
BUILD=${BUILD:-build-daemonrel}
ROWS=${ROWS:-parallel local tierd hinted staged}
PY=/usr/bin/python3
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

$PY -c "import torch" 2>/dev/null || { echo "bench/dataloader.sh: needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 2; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; $(nproc) CPUs); $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
tierd_build_release "$BUILD" tierd tierctl
tierd_bins "$BUILD"
mkdir -p "$W/mnt"
tierd_places "$W"
LINK=$W/link
JOB=bench/dataloader.py
cleanup() {
  tierd_reap "${TIERD_PID:-}"
  tierd_unmount "$MNT"
  scripts/netlink.sh down "$LINK" || true
  rm -rf "$W/cache" "$W/local"
}
trap cleanup EXIT
scripts/netlink.sh up "$LINK" "$RATE" "$DELAY_MS"
tierd_rgw_env "$LINK"
PROXY=$S3_ENDPOINT
DIRECT=$S3_ENDPOINT_DIRECT

BUCKET=bench-dl-$(date +%s)
tierd_s3 -X PUT "$DIRECT/$BUCKET" >/dev/null
tierd_bench_files "$W/local/train" "$FILES" "$KB"
t0=$SECONDS
tierd_bench_upload "$W/local/train" "$DIRECT/$BUCKET/train"
echo "uploaded $FILES x $KB KiB in $((SECONDS - t0)) s"

tierd_bench_results "$W/results"

# job DIR COMPUTE ROW [ARGS]: one epoch of the loader; its wall time and utilisation recorded
job() {
  local dir=$1 c=$2 row=$3
  shift 3
  $PY "$JOB" "$dir" "$c" "$@" 2>"$W/job.err" >"$W/job.out" || { cat "$W/job.err" >&2; exit 1; }
  rec "$row" "$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["wall_s"])' "$W/job.out")"
  rec "${row}_util" "$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["util"])' "$W/job.out")"
}

parallel() { # ROW: every object GET through the proxy, PAR at once, by one curl (--parallel:
  # a process per object would make the fetcher's own CPU the limit on 2 cores)
  local t0 t1 f
  for f in "$W"/local/train/*; do
    printf 'url = "%s/%s/train/%s"\noutput = "/dev/null"\n' "$PROXY" "$BUCKET" "${f##*/}"
  done >"$W/urls.cfg"
  t0=$(now)
  curl -sSf --no-progress-meter --parallel --parallel-max "$PAR" "${TIERD_S3_SIG[@]}" -K "$W/urls.cfg" \
    -w '%{time_total}\n' >"$W/get_times"
  t1=$(now)
  rec "$1" "$(secs "$t0" "$t1")"
  echo "parallel: mean GET time $(awk '{ s += $1 } END { printf "%.1f", 1000 * s / NR }' "$W/get_times") ms"
}

fresh_tierd() { # RAM_SIZE
  tierd_stop 2>/dev/null || true
  {
    tierd_conf_section daemon "log_level = warn"
    tierd_conf_section cache "ram_size = $1" ${HINT_WINDOW:+"hint_window = $HINT_WINDOW"}
    S3_ENDPOINT=$PROXY tierd_conf_rgw rgw "$BUCKET"
    tierd_conf_ns /s3 rgw
    tierd_conf_mount "$MNT"
    tierd_conf_api "$SOCK"
  } >"$CONF"
  tierd_start "$CONF" "$W/tierd.log" "$MNT" || exit 1
  ls "$MNT/s3/train" >/dev/null # the listing is not what is measured
}
drop() {
  sync
  echo 3 >/proc/sys/vm/drop_caches
}

has() { [[ " $ROWS " == *" $1 "* ]]; }
fetched() { # what tierd's cache fetched: "fetches bytes", and its mean block fetch time
  tierd_api "$SOCK" /v1/stats | $PY -c 'import json,sys; c=json.load(sys.stdin)["cache"]; print(c["fetches"], c["fetch_bytes"], "mean fetch %.1f ms" % (c["fetch_ns_total"] / max(c["fetches"], 1) / 1e6))'
}
for _ in $(seq 1 "$RUNS"); do
  if has parallel; then parallel parallel; fi
  for c in $COMPUTES; do
    if has local; then
      drop
      job "$W/local/train" "$c" "local_$c"
      job "$W/local/train" "$c" "localwarm_$c"
    fi
    if has tierd; then
      fresh_tierd "$RAM_SIZE"
      drop
      job "$MNT/s3/train" "$c" "tierd_$c"
      echo "tierd, $c ms: fetches, bytes: $(fetched)"
    fi
    if has hinted; then
      fresh_tierd "$RAM_SIZE"
      drop
      job "$MNT/s3/train" "$c" "hinted_$c" --hint bench --socket "$SOCK"
      echo "hinted, $c ms: fetches, bytes: $(fetched)"
      tierd_ctl hint --list
    fi
    if has staged; then
      fresh_tierd 2G
      t0=$(now)
      tierd_ctl stage "$MNT/s3/train" >/dev/null
      t1=$(now)
      rec "stage_$c" "$(secs "$t0" "$t1")"
      echo "staged, $c ms: fetches, bytes: $(fetched)"
      drop
      job "$MNT/s3/train" "$c" "staged_$c"
    fi
  done
done
tierd_stop || true
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "link ($LINK_KIND): tbf $RATE each way, proxy +$DELAY_MS ms each way, no per-stream limit; $FILES files of $KB KiB; tierd's cache $RAM_SIZE (RAM, no disk level; staged: 2G); $RUNS runs"
echo
echo "| epoch wall time, s (utilisation) | compute per sample | local disk | local, page cache warm | $PAR parallel GETs | tierd | tierd, hinted | tierd, staged | hinted / max(local, parallel) | staged util / local util | tierctl stage, s | stage / parallel |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
read -r pm _ _ < <(stats parallel)
for c in $COMPUTES; do
  read -r lm _ _ < <(stats "local_$c")
  read -r lu _ _ < <(stats "local_${c}_util")
  read -r wm _ _ < <(stats "localwarm_$c")
  read -r wu _ _ < <(stats "localwarm_${c}_util")
  read -r tm _ _ < <(stats "tierd_$c")
  read -r tu _ _ < <(stats "tierd_${c}_util")
  read -r hm _ _ < <(stats "hinted_$c")
  read -r hu _ _ < <(stats "hinted_${c}_util")
  read -r sm _ _ < <(stats "staged_$c")
  read -r su _ _ < <(stats "staged_${c}_util")
  read -r gm _ _ < <(stats "stage_$c")
  awk -v c="$c" -v lm="$lm" -v lu="$lu" -v wm="$wm" -v wu="$wu" -v pm="$pm" -v tm="$tm" -v tu="$tu" \
    -v hm="$hm" -v hu="$hu" -v sm="$sm" -v su="$su" -v gm="$gm" 'BEGIN {
      b = lm > pm ? lm : pm
      printf "| | %s ms | %.2f (%.0f %%) | %.2f (%.0f %%) | %.2f | %.2f (%.0f %%) | %.2f (%.0f %%) | %.2f (%.0f %%) | %.2f | %.2f | %.2f | %.2f |\n",
        c, lm, 100 * lu, wm, 100 * wu, pm, tm, 100 * tu, hm, 100 * hu, sm, 100 * su, hm / b, su / lu, gm, gm / pm }'
done
