#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/cluster.sh - a cluster of four tierd nodes (issue 25), each in its own network namespace
# with its link shaped to RATE each way (tc tbf, scripts/clusternet.sh), on a Ceph of its own on
# the cluster bridge (scripts/ceph.sh with TIER_CEPH_ADDR). Side by side in one run, each over
# objects no node has read before:
#   alone     one node without [cluster] reads a set of MB MiB: its time is the link's
#   no peers  four nodes without [cluster] read one set at once: time, RGW bytes / set (4x)
#   peers     four nodes of one cluster read one set at once, each starting at another quarter of
#             it (as data-parallel jobs read their own shards first): time (aggregate throughput
#             against 4 x alone), RGW bytes / set, the busiest node's served blocks over the mean
#   lockstep  the same, every node reading the set in the same order at the same time
#   hot file  the four read one object of MB MiB at once: RGW bytes, busiest over mean
#   dead node n4 killed while n1..n3 read a set: seconds until every view has dropped it (lease
#             LEASE), reads that failed
#   join      n4 back with an empty cache reads the warm set of `peers`: its time against set /
#             link rate, and its bytes from the RGW
#   latency   tests/perf/peer_latency between two unshaped node namespaces (TLS): a 1 MiB peer
#             read of a cached block against a page-cache pread and one protocol round trip
# Prints one table; the goals of issue 25 beside each row.
#
# Usage: bench/cluster.sh [WORKDIR]   (root; no other Ceph may run; default /tmp/tierd-bench-cluster)
#   env: RATE=100mbit MB=128 LEASE=6s BUILD=build-daemonrel BLOCK=1M
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-cluster}
RATE=${RATE:-100mbit}
MB=${MB:-128}
LEASE=${LEASE:-6s}
BUILD=${BUILD:-build-daemonrel}
CN_BLOCK=${BLOCK:-1M}
CN_PEER_TIMEOUT=10s # the default (backend_timeout)
SRC=$(pwd -P)
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

[[ $(id -u) == 0 ]] || { echo "bench/cluster.sh: needs root (namespaces, tc, FUSE)" >&2; exit 2; }
! pgrep -x ceph-mon >/dev/null || {
  echo "bench/cluster.sh: a Ceph runs already (pgrep ceph-mon): stop it first" >&2
  exit 2
}
[[ $MB =~ ^[0-9]+$ ]] && ((MB >= 8 && MB % 4 == 0)) || { echo "MB: a multiple of 4, >= 8" >&2; exit 2; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; $(nproc) CPUs)"
tierd_build_release "$BUILD" tierd peer_latency
tierd_bins "$BUILD"
rm -rf "$W" && mkdir -p "$W"
T=$W
CEPH=$W/ceph
# shellcheck source=scripts/lib/clusternodes.sh
. scripts/lib/clusternodes.sh
LAT_PID=

cleanup() {
  [ -z "$LAT_PID" ] || kill "$LAT_PID" 2>/dev/null || true
  cn_cleanup
  scripts/ceph.sh stop "$CEPH" >/dev/null 2>&1 || true
  scripts/clusternet.sh bridge-down >/dev/null 2>&1 || true
}
trap cleanup EXIT
addr=$(scripts/clusternet.sh bridge-up)
TIER_CEPH_ADDR=$addr scripts/ceph.sh start "$CEPH" >"$W/ceph.log" 2>&1 || {
  tail -20 "$W/ceph.log"
  exit 1
}
tierd_rgw_env "$CEPH"
POOL=tierd-bench
timeout 120 ceph -c "$CEPH/ceph.conf" osd pool create "$POOL" >/dev/null 2>&1
cn_init tierd-bn "$POOL" "bench-$(date +%s)" "$LEASE"
BUCKET=bench-cluster-$(date +%s)
tierd_s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null
NOBJ=$((MB / 4))
SET=$((MB << 20))
for s in alone nopeer peers lockstep dead; do
  tierd_bench_files "$W/src/$s" "$NOBJ" 4096
  tierd_bench_upload "$W/src/$s" "$S3_ENDPOINT/$BUCKET/$s"
done
mkdir -p "$W/src/hot"
head -c "$SET" /dev/urandom >"$W/src/hot/big.bin"
tierd_bench_upload "$W/src/hot" "$S3_ENDPOINT/$BUCKET/hot"
for n in 1 2 3 4; do cn_net_up "$n" "$RATE"; done

now() { date +%s%N; }
secs() { echo "scale=2; ($2 - $1) / 1000000000" | bc; }
# read_set N SET [FROM]: every file of SET through node N's mount, compared with its source,
# from file FROM on (tierd_compare_files), after listing the set's directory as a data loader
# does (so the mount's listing-order read-ahead applies to every row alike)
read_set() {
  ls "$W/mnt$1/d/$2" >/dev/null && tierd_compare_files "$W/src/$2" "$W/mnt$1/d/$2" "${3:-0}" 2>/dev/null
}
# read_all SET N...: at once on each node; prints the failed reads; with ROTATE=1 node N starts
# at file (N - 1) x files / 4
read_all() {
  local set=$1 n pids=() bad=0 nf
  shift
  nf=$(find "$W/src/$set" -type f | wc -l)
  for n in "$@"; do
    read_set "$n" "$set" "$((${ROTATE:-0} * (n - 1) * nf / 4))" &
    pids+=($!)
  done
  for n in "${pids[@]}"; do wait "$n" || bad=$((bad + 1)); done
  echo "$bad"
}
fetched_sum() {
  local n t=0
  for n in "$@"; do t=$((t + $(cn_fetched "$n"))); done
  echo "$t"
}
# served_ratio N...: the busiest node's served blocks over the mean
served_ratio() {
  local n v=()
  for n in "$@"; do v+=("$(cn_q "$n" 'j["peers"]["served"]["blocks"]')"); done
  python3 -c 'import sys; v=[int(x) for x in sys.argv[1:]]; m=sum(v)/len(v); print("%.2f" % (max(v)/m if m else 0))' "${v[@]}"
}
start_all() {
  local n
  for n in "$@"; do cn_start "$n" || { tail -5 "$W/tierd$n.log"; exit 1; }; done
}
stop_all() {
  local n
  for n in "$@"; do cn_stop "$n"; done
}
all_see() {
  local n
  for n in 1 2 3 4; do cn_members_are "$n" "n1 n2 n3 n4" || return 1; done
}
: >"$W/results"
rec() { printf '%-10s %s\n' "$1" "$2" | tee -a "$W/results"; }

# ---- alone and no peers: the nodes without [cluster] ------------------------------------------
for n in 1 2 3 4; do CN_NO_CLUSTER=1 cn_conf "$n" >"$W/tierd$n.conf"; done
start_all 1
t0=$(now)
read_set 1 alone
t_alone=$(secs "$t0" "$(now)")
stop_all 1
rm -rf "$W"/cache?
rec alone "${t_alone} s for $MB MiB ($(echo "scale=1; $MB / $t_alone" | bc) MiB/s): the link"
start_all 1 2 3 4
t0=$(now)
bad=$(read_all nopeer 1 2 3 4)
t_nopeer=$(secs "$t0" "$(now)")
eg=$(echo "scale=2; $(fetched_sum 1 2 3 4) / $SET" | bc)
stop_all 1 2 3 4
rm -rf "$W"/cache?
rec "no peers" "${t_nopeer} s; RGW bytes / set ${eg}; failed reads $bad"

# ---- peers ------------------------------------------------------------------------------------
for n in 1 2 3 4; do cn_conf "$n" >"$W/tierd$n.conf"; done
start_all 1 2 3 4
tierd_poll 120 all_see
t0=$(now)
bad=$(ROTATE=1 read_all peers 1 2 3 4)
t_peers=$(secs "$t0" "$(now)")
eg=$(echo "scale=2; $(fetched_sum 1 2 3 4) / $SET" | bc)
agg=$(echo "scale=2; $t_alone / $t_peers" | bc) # (4 sets / t_peers) / (4 x 1 set / t_alone)
rec peers "${t_peers} s; aggregate / (4 x alone) $agg (goal >= 0.9); RGW bytes / set $eg (goal <= 1.1); busiest / mean served $(served_ratio 1 2 3 4) (goal <= 1.25); failed reads $bad"
f0=$(fetched_sum 1 2 3 4)
t0=$(now)
bad=$(read_all lockstep 1 2 3 4)
t_lock=$(secs "$t0" "$(now)")
eg=$(echo "scale=2; ($(fetched_sum 1 2 3 4) - $f0) / $SET" | bc)
rec lockstep "${t_lock} s; aggregate / (4 x alone) $(echo "scale=2; $t_alone / $t_lock" | bc); RGW bytes / set $eg; failed reads $bad"

# ---- one hot file -----------------------------------------------------------------------------
f0=$(fetched_sum 1 2 3 4)
s0=()
for n in 1 2 3 4; do s0+=("$(cn_q "$n" 'j["peers"]["served"]["blocks"]')"); done
bad=$(read_all hot 1 2 3 4)
eg=$(echo "scale=2; ($(fetched_sum 1 2 3 4) - $f0) / $SET" | bc)
v=()
for n in 1 2 3 4; do v+=($(($(cn_q "$n" 'j["peers"]["served"]["blocks"]') - s0[n - 1]))); done
ratio=$(python3 -c 'import sys; v=[int(x) for x in sys.argv[1:]]; m=sum(v)/len(v); print("%.2f" % (max(v)/m if m else 0))' "${v[@]}")
rec "hot file" "RGW bytes / file $eg; busiest / mean served $ratio (goal <= 1.25); failed reads $bad"

# ---- a dead node ------------------------------------------------------------------------------
read_all dead 1 2 3 >"$W/dead.bad" &
readers=$!
t0=$(now)
cn_kill 4
gone() { cn_members_are 1 "n1 n2 n3" && cn_members_are 2 "n1 n2 n3" && cn_members_are 3 "n1 n2 n3"; }
tierd_poll 300 gone
t_dead=$(secs "$t0" "$(now)")
wait "$readers" || true
rec "dead node" "dropped by every view after ${t_dead} s (lease $LEASE; goal <= 10 s); failed reads $(cat "$W/dead.bad")"

# ---- a node joins the warm cluster ------------------------------------------------------------
rm -rf "$W/cache4"
cn_start 4
tierd_poll 120 all_see
t0=$(now)
read_set 4 peers || rec join "READ FAILED"
t_join=$(secs "$t0" "$(now)")
link=$(echo "scale=2; $t_join / $t_alone" | bc)
pct=$(echo "scale=3; 100 * $(cn_fetched 4) / $SET" | bc)
rec join "${t_join} s, ${link} x set / link rate (goal <= 1.1); ${pct} % of its bytes from the RGW (goal < 1 %)"
stop_all 1 2 3 4

# ---- peer-read latency between two namespaces (unshaped: the protocol's cost, not the link's) --
cn_net_up 5 none
cn_net_up 6 none
head -c $((128 << 20)) /dev/urandom >"$W/lat.bin"
nsenter --net=/run/netns/tierd-bn5 "$PWD/$BUILD/peer_latency" serve "$(cn_addr 5):7171" "$W/lat.bin" \
  "$W/peer.pem" "$W/peer.key" &
LAT_PID=$!
lat_up() { nsenter --net=/run/netns/tierd-bn6 bash -c "exec 3<>/dev/tcp/$(cn_addr 5)/7171" 2>/dev/null; }
tierd_poll 60 lat_up
nsenter --net=/run/netns/tierd-bn6 "$PWD/$BUILD/peer_latency" fetch "$(cn_addr 5):7171" "$W/lat.bin" 200 \
  "$W/peer.pem" | tee "$W/latency"
rec latency "$(tail -1 "$W/latency")"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
