#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/datasets.sh - issue 14's numbers for dataset versions (docs/VERSIONS.md): on a private
# Ceph RGW (scripts/ceph.sh, loopback) with FILES small objects under one prefix, a Release tierd:
#   commit   `tierctl dataset commit /ds/big v1`: the whole listing (FILES / 1,000 LIST pages) and
#            the manifest's create-only PUT; goal <= 5 s for 100,000 objects
#   commit2  the same tree again as v2 after CHANGED objects were overwritten
#   diff     `tierctl dataset diff /ds/big v1 v2`: both manifests read and decoded, one merge
#            walk; goal <= 1 s for two 100,000-entry versions
#   list     one LIST of the same prefix by curl (what the commit's listing costs at least)
# Prints one table and the machine's load; stops what it started on exit.
#
# Usage: bench/datasets.sh [WORKDIR]   (needs root; default WORKDIR /tmp/tierd-bench-datasets)
#   env: FILES=100000 CHANGED=100 RUNS=3 BUILD=build-daemonrel
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-datasets}
FILES=${FILES:-100000}
CHANGED=${CHANGED:-100}
RUNS=${RUNS:-3}
BUILD=${BUILD:-build-daemonrel}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh
[ "$(id -u)" = 0 ] || { echo "bench/datasets.sh: needs root (FUSE)" >&2; exit 2; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; $(nproc) CPUs); $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
tierd_build_release "$BUILD" tierd tierctl
tierd_bins "$BUILD"
mkdir -p "$W/mnt"
tierd_places "$W"
CEPH=$W/ceph
cleanup() {
  tierd_reap "${TIERD_PID:-}"
  tierd_unmount "$MNT"
  scripts/ceph.sh stop "$CEPH" >/dev/null 2>&1 || true
}
trap cleanup EXIT
scripts/ceph.sh start "$CEPH" >/dev/null
tierd_rgw_env "$CEPH"
BUCKET=bench-ds-$(date +%s)
tierd_s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null
printf 'x' >"$W/one"
# one curl, 32 uploads in flight (a process per object would cost more than the RGW)
upload() { # FIRST LAST CONTENT
  local i
  for ((i = $1; i <= $2; i++)); do
    printf 'upload-file = "%s"\nurl = "%s/%s/ds/big/f%07d"\n' "$3" "$S3_ENDPOINT" "$BUCKET" "$i"
  done >"$W/up.cfg"
  curl -sSf --no-progress-meter --parallel --parallel-max 32 "${TIERD_S3_SIG[@]}" -K "$W/up.cfg" >/dev/null
}
t0=$SECONDS
upload 1 "$FILES" "$W/one"
echo "uploaded $FILES objects in $((SECONDS - t0)) s"

{
  tierd_conf_section daemon "log_level = warn"
  tierd_conf_section cache "ram_size = 64M"
  tierd_conf_rgw rgw "$BUCKET"
  tierd_conf_ns /ds rgw "prefix = ds"
  tierd_conf_mount "$MNT"
  tierd_conf_api "$SOCK" "max_wait = 600s"
} >"$CONF"
tierd_start "$CONF" "$W/tierd.log" "$MNT" "$SOCK" || exit 1
tierd_bench_results "$W/results"
timed() { # ROW CMD...: the wall time of CMD
  local row=$1 a b
  shift
  a=$(now)
  "$@" >"$W/out" 2>&1 || { cat "$W/out" >&2; exit 1; }
  b=$(now)
  rec "$row" "$(secs "$a" "$b")"
}
printf 'x2' >"$W/two"
for r in $(seq 1 "$RUNS"); do
  timed commit tierd_ctl dataset commit /ds/big "v1r$r"
  grep -q "$FILES files" "$W/out" || { echo "commit v1r$r: $(cat "$W/out")" >&2; exit 1; }
  upload $((r * CHANGED)) $((r * CHANGED + CHANGED - 1)) "$W/two"
  timed commit2 tierd_ctl dataset commit /ds/big "v2r$r"
  timed diff tierd_ctl dataset diff /ds/big "v1r$r" "v2r$r"
  grep -q "$CHANGED changed" "$W/out" || { echo "diff v1r$r v2r$r: $(tail -1 "$W/out")" >&2; exit 1; }
  upload $((r * CHANGED)) $((r * CHANGED + CHANGED - 1)) "$W/one"
  pages() { # every LIST page of the prefix, as the commit makes them
    local tok="" out
    while :; do
      out=$(tierd_s3 "$S3_ENDPOINT/$BUCKET?list-type=2&prefix=ds/big/${tok:+&continuation-token=$tok}")
      tok=$(printf '%s' "$out" | grep -o '<NextContinuationToken>[^<]*' | cut -d'>' -f2 | sed 's/=/%3D/g; s/+/%2B/g; s/\//%2F/g')
      [ -n "$tok" ] || break
    done
  }
  timed list pages
done
echo
echo "Dataset versions, $(date -u +%F), $(git rev-parse --short HEAD): $FILES objects on the RGW (loopback), $RUNS runs"
printf '%-44s %9s %9s %9s\n' "" "median s" "min s" "max s"
for row in commit commit2 diff list; do
  read -r m lo hi < <(stats "$row")
  case $row in
  commit) what="commit of $FILES objects (goal <= 5 s)" ;;
  commit2) what="commit again after $CHANGED overwritten" ;;
  diff) what="diff of the two versions (goal <= 1 s)" ;;
  list) what="curl: every LIST page of the prefix" ;;
  esac
  printf '%-44s %9s %9s %9s\n' "$what" "$m" "$lo" "$hi"
done
echo "tierd's RSS after: $(ps -o rss= -p "$TIERD_PID") KiB"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
