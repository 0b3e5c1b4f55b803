#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/link.sh - the object store behind a shaped link (issue 11): brings up scripts/netlink.sh
# (Ceph in its own network namespace, tbf at RATE both ways, a delaying proxy of DELAY_MS each
# way), then measures, side by side in one run:
#   - the link itself: a PUT and a GET of one MB MiB object with curl --aws-sigv4, direct to the
#     RGW in the namespace and through the proxy, and the request round trip (a HEAD's time from
#     TCP connected to first response byte, median of 11) both ways;
#   - tierd on it: a cold `cat` of that object through a tierd mount (read-cache namespace, fresh
#     cache each run) vs the direct GET, on each path.
# Prints one table (median and range over RUNS) and the machine's load before and after. The link
# is taken down on exit, whatever happens. Later QoS benches build on this: source the same
# netlink.sh env (DIR/env) and mount tierd the same way.
#
# Usage: bench/link.sh [WORKDIR]   (needs root; default WORKDIR /tmp/tierd-bench-link)
#   env: RATE=200mbit DELAY_MS=10 MB=128 RUNS=3 BUILD=build-daemonrel BLOCK=4M READAHEAD=8
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-link}
RATE=${RATE:-200mbit}
DELAY_MS=${DELAY_MS:-10}
MB=${MB:-128}
RUNS=${RUNS:-3}
BUILD=${BUILD:-build-daemonrel}
BLOCK=${BLOCK:-4M}
READAHEAD=${READAHEAD:-8}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

[[ $DELAY_MS =~ ^[0-9]+$ && $MB =~ ^[0-9]+$ && $RUNS =~ ^[0-9]+$ ]] && ((MB > 0 && RUNS > 0)) || {
  echo "bench/link.sh: DELAY_MS, MB and RUNS must be whole numbers (MB, RUNS > 0)" >&2
  exit 2
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; $(nproc) CPUs)"
tierd_build_release "$BUILD" tierd
tierd_bins "$BUILD"
mkdir -p "$W/mnt"
tierd_places "$W"
LINK=$W/link

cleanup() {
  tierd_reap "${TIERD_PID:-}"
  tierd_unmount "$MNT"
  scripts/netlink.sh down "$LINK" || true
  rm -rf "$W/obj.bin" "$W/cache"
}
trap cleanup EXIT
scripts/netlink.sh up "$LINK" "$RATE" "$DELAY_MS"
tierd_rgw_env "$LINK"
PROXY=$S3_ENDPOINT
DIRECT=$S3_ENDPOINT_DIRECT

BUCKET=bench-link-$(date +%s)
tierd_s3 -X PUT "$DIRECT/$BUCKET" >/dev/null
head -c $((MB << 20)) /dev/urandom >"$W/obj.bin"
printf 'tiny\n' >"$W/tiny"
tierd_s3 -T "$W/tiny" "$DIRECT/$BUCKET/tiny" >/dev/null
BYTES=$((MB << 20))

ns() { date +%s%N; }
# Results: lines "ROW SECONDS" in $W/results (ROW names the measurement).
: >"$W/results"
rec() { echo "$1 $2" >>"$W/results"; }

# put/get ENDPOINT ROW: one transfer of the object, its time recorded
put() { rec "$2" "$(tierd_s3 -o /dev/null -w '%{time_total}' -T "$W/obj.bin" "$1/$BUCKET/obj.bin")"; }
get() { rec "$2" "$(tierd_s3 -o /dev/null -w '%{time_total}' "$1/$BUCKET/obj.bin")"; }

# rtt ENDPOINT ROW: 11 HEADs of a tiny object (a new connection each), each one's time from TCP
# connected to the first response byte: one request round trip plus RGW's time for a HEAD and
# curl's signing (time_pretransfer is no cleaner: curl 7.88 sometimes takes it after sending)
rtt() {
  for _ in $(seq 1 11); do
    rec "$2" "$(tierd_s3 -I -o /dev/null -w '%{time_connect} %{time_starttransfer}' \
      "$1/$BUCKET/tiny" | awk '{ printf "%.6f", $2 - $1 }')"
  done
}

# cold ENDPOINT ROW: a fresh tierd (empty cache) on ENDPOINT, `cat` of the object timed
cold() {
  local t0 t1
  rm -rf "$W/cache"
  {
    tierd_conf_section daemon "log_level = warn"
    tierd_conf_section cache "ram_size = 1G" "disk_dir = $W/cache" "disk_size = 2G" \
      "disk_min_free = 256M" "block_size = $BLOCK"
    S3_ENDPOINT=$1 tierd_conf_rgw rgw "$BUCKET"
    tierd_conf_ns /s3 rgw
    tierd_conf_mount "$MNT" "readahead_blocks = $READAHEAD"
    tierd_conf_api "$SOCK"
  } >"$CONF"
  tierd_start "$CONF" "$W/tierd.log" "$MNT" || exit 1
  stat "$MNT/s3/obj.bin" >/dev/null
  t0=$(ns)
  cat "$MNT/s3/obj.bin" >/dev/null
  t1=$(ns)
  rec "$2" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", (b - a) / 1e9 }')"
  tierd_stop || true
}

rtt "$DIRECT" rtt_direct
rtt "$PROXY" rtt_proxy
for _ in $(seq 1 "$RUNS"); do
  put "$DIRECT" put_direct
  get "$DIRECT" get_direct
  cold "$DIRECT" tierd_direct
  get "$PROXY" get_proxy
  cold "$PROXY" tierd_proxy
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# What the two shaping qdiscs passed (proof that the traffic took the link): "Sent N bytes ...
# (dropped D, ...".
sent() { awk '/Sent/ { gsub(",", ""); printf "%.0f MB sent, %d dropped", $2 / 1e6, $7 }'; }
echo "tbf to the store ($LINK_DEV_HOST): $(tc -s qdisc show dev "$LINK_DEV_HOST" | sent);" \
  "from the store ($LINK_DEV_STORE): $(ip netns exec "$LINK_NETNS" tc -s qdisc show dev "$LINK_DEV_STORE" | sent)"
echo

# stats ROW: "median min max" of ROW's seconds
stats() {
  awk -v r="$1" '$1 == r { print $2 }' "$W/results" | sort -g |
    awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
      print m, v[1], v[NR] }'
}
bits=$(sed -n 's/^LINK_RATE_BITS=//p' "$LINK/env")
row() { # row LABEL ROW: a throughput row (MB/s = 10^6 bytes/s; range from the slowest and fastest run)
  read -r med lo hi < <(stats "$2")
  awk -v l="$1" -v b="$BYTES" -v m="$med" -v lo="$lo" -v hi="$hi" -v bits="$bits" 'BEGIN {
    printf "| %s | %.1f MB/s | %.1f-%.1f | %.0f %% |\n", l, b / m / 1e6, b / hi / 1e6, b / lo / 1e6,
      100 * b * 8 / m / bits }'
}
echo "link: tbf $RATE each way, proxy +$DELAY_MS ms each way; object $MB MiB; $RUNS runs; block $BLOCK, readahead_blocks $READAHEAD"
echo
echo "| measurement | median | range | of link rate |"
echo "|---|---|---|---|"
row "PUT, curl, direct" put_direct
row "GET, curl, direct" get_direct
row "cold read through tierd, direct" tierd_direct
row "GET, curl, through the proxy" get_proxy
row "cold read through tierd, through the proxy" tierd_proxy
for p in direct proxy; do
  read -r med lo hi < <(stats "rtt_$p")
  awk -v p="$p" -v m="$med" -v lo="$lo" -v hi="$hi" 'BEGIN {
    printf "| request round trip (HEAD), %s | %.2f ms | %.2f-%.2f ms | |\n", p, m * 1e3, lo * 1e3, hi * 1e3 }'
done
echo
for p in direct proxy; do
  read -r g _ < <(stats "get_$p")
  read -r m _ < <(stats "tierd_$p")
  awk -v p="$p" -v g="$g" -v m="$m" 'BEGIN { printf "tierd / GET, %s: %.2fx\n", p, g / m }'
done
