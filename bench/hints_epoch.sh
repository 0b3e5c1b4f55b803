#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/hints_epoch.sh - issue 12's first-epoch run: a training job's cold epoch over small files
# in the object store behind a shaped, delayed link (scripts/netlink.sh: Ceph in a network
# namespace, tbf at RATE both ways, a proxy adding DELAY_MS each way), side by side in one run:
#   local     the same files on local disk (the job's epoch with nothing to fetch)
#   parallel  the time to GET every object with PAR curl requests in flight through the proxy (a
#             hand-written parallel fetcher: what the link and the store can give)
#   tierd     the job through a fresh tierd mount (empty cache), no hints
#   hinted    the same with contrib/python/tierd_hints.py sending the epoch's order first
# The job is tests/integration/hints_job.py: one shuffled epoch, each file read whole with
# O_DIRECT, COMPUTE ms of emulated work per sample, for each COMPUTE in COMPUTES. Goal (issue 12):
# hinted <= 1.1 x max(local, parallel). Prints one table (median and range over RUNS) and the
# machine's load; the link is taken down on exit, whatever happens.
#
# Usage: bench/hints_epoch.sh [WORKDIR]   (needs root; default WORKDIR /tmp/tierd-bench-hints)
#   env: RATE=200mbit DELAY_MS=5 FILES=1000 KB=100 PAR=32 RUNS=3 COMPUTES="0.5 5"
#        BUILD=build-daemonrel BLOCK=4M
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-hints}
RATE=${RATE:-200mbit}
DELAY_MS=${DELAY_MS:-5}
FILES=${FILES:-1000}
KB=${KB:-100}
PAR=${PAR:-32}
RUNS=${RUNS:-3}
COMPUTES=${COMPUTES:-0.5 5}
BUILD=${BUILD:-build-daemonrel}
BLOCK=${BLOCK:-4M}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; $(nproc) CPUs); $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
tierd_build_release "$BUILD" tierd tierctl
tierd_bins "$BUILD"
mkdir -p "$W/mnt"
tierd_places "$W"
LINK=$W/link
JOB=tests/integration/hints_job.py

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

BUCKET=bench-hints-$(date +%s)
tierd_s3 -X PUT "$DIRECT/$BUCKET" >/dev/null
tierd_bench_files "$W/local/train" "$FILES" "$KB"
t0=$SECONDS
tierd_bench_upload "$W/local/train" "$DIRECT/$BUCKET/train"
echo "uploaded $FILES x $KB KiB in $((SECONDS - t0)) s"

tierd_bench_results "$W/results"

# job DIR COMPUTE ROW [--hint NAME]: one epoch of the job, its wall time recorded
job() {
  local dir=$1 c=$2 row=$3
  shift 3
  local sock=-
  [ "$dir" = "$W/local/train" ] || sock=$SOCK
  python3 "$JOB" "$sock" "$dir" 1 "$c" 7 "$@" >"$W/job.out"
  rec "$row" "$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["wall_s"])' "$W/job.out")"
}

parallel() { # ROW: every object GET through the proxy, PAR at once
  local t0 t1
  t0=$(now)
  (cd "$W/local/train" && ls) | xargs -P "$PAR" -I{} curl -sSf -o /dev/null "${TIERD_S3_SIG[@]}" \
    "$PROXY/$BUCKET/train/{}"
  t1=$(now)
  rec "$1" "$(secs "$t0" "$t1")"
}

fresh_tierd() {
  tierd_stop 2>/dev/null || true
  rm -rf "$W/cache"
  {
    tierd_conf_section daemon "log_level = warn"
    tierd_conf_section cache "ram_size = 1G" "disk_dir = $W/cache" "disk_size = 2G" \
      "disk_min_free = 256M" "block_size = $BLOCK"
    S3_ENDPOINT=$PROXY tierd_conf_rgw rgw "$BUCKET"
    tierd_conf_ns /s3 rgw
    tierd_conf_mount "$MNT"
    tierd_conf_api "$SOCK"
  } >"$CONF"
  tierd_start "$CONF" "$W/tierd.log" "$MNT" || exit 1
  ls "$MNT/s3/train" >/dev/null # the listing is not what is measured
}

for _ in $(seq 1 "$RUNS"); do
  parallel parallel
  for c in $COMPUTES; do
    sync
    echo 3 >/proc/sys/vm/drop_caches
    job "$W/local/train" "$c" "local_$c"
    fresh_tierd
    job "$MNT/s3/train" "$c" "tierd_$c"
    fresh_tierd
    job "$MNT/s3/train" "$c" "hinted_$c" --hint bench
  done
done
tierd_stop || true
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "link: tbf $RATE each way, proxy +$DELAY_MS ms each way; $FILES files of $KB KiB; $RUNS runs; block $BLOCK"
echo
echo "| first epoch, seconds (median, range) | compute per sample | local disk | $PAR parallel GETs | tierd | tierd, hinted | hinted / max(local, parallel) |"
echo "|---|---|---|---|---|---|---|"
read -r pm plo phi < <(stats parallel)
for c in $COMPUTES; do
  read -r lm llo lhi < <(stats "local_$c")
  read -r tm tlo thi < <(stats "tierd_$c")
  read -r hm hlo hhi < <(stats "hinted_$c")
  awk -v c="$c" -v lm="$lm" -v llo="$llo" -v lhi="$lhi" -v pm="$pm" -v plo="$plo" -v phi="$phi" \
    -v tm="$tm" -v tlo="$tlo" -v thi="$thi" -v hm="$hm" -v hlo="$hlo" -v hhi="$hhi" 'BEGIN {
      b = lm > pm ? lm : pm
      printf "| | %s ms | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.2f |\n",
        c, lm, llo, lhi, pm, plo, phi, tm, tlo, thi, hm, hlo, hhi, hm / b }'
done
