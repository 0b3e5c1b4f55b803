#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_readahead_rgw.sh - read-ahead sized from the bandwidth-delay product on a REAL mount over
# the S3 backend, through scripts/delayproxy.py in front of the test Ceph RGW (+20 ms each way,
# no per-stream limit: a latency-bound link). CTest labels fuse + rgw, fixture rgw.
#
# A 48 MiB object (blocks of 1 MiB) is read cold with cat, readahead_blocks = 2, readahead_max =
# 16M, prefetch_threads = 8. Every block GET takes at least the proxy's round trip (40 ms), so a
# reader that waits on the link consumes its window once per fetch time and the sizing (rate x
# fetch time x 2) grows it. Asserted from /v1/stats, counted, not timed: the bytes equal the
# object's; the measured block fetch time is at least the 40 ms round trip; the window was sized
# past its first 2 blocks and never past readahead_max (16 blocks); at least 4 prefetch GETs
# were in flight at once, never more than prefetch_threads. No sleeps as synchronisation.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_rgw_setup readahead_rgw
PROXY_PID=
extra_cleanup() { if [ -n "$PROXY_PID" ]; then kill "$PROXY_PID" 2>/dev/null || true; fi; }
BUCKET=ra-rgw-$(date +%s)-$RANDOM

tierd_s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null || fail "cannot create bucket $BUCKET"
mkdir -p "$MNT"
head -c $((48 << 20)) /dev/urandom >"$T/big.bin"
tierd_s3 -T "$T/big.bin" "$S3_ENDPOINT/$BUCKET/ds/big.bin" >/dev/null

python3 "$SRC/scripts/delayproxy.py" --listen 127.0.0.1:0 --upstream "${S3_ENDPOINT#http://}" \
  --delay-ms 20 --port-file "$T/proxy.port" </dev/null >"$T/proxy.log" 2>&1 &
PROXY_PID=$!
deadline=$((SECONDS + 60))
until [ -s "$T/proxy.port" ]; do
  [ $SECONDS -lt $deadline ] || fail "the delay proxy did not start: $(cat "$T/proxy.log")"
  python3 -c 'import time; time.sleep(0.05)' # poll interval, not a synchronisation
done

{
  tierd_conf_section cache "ram_size = 128M" "block_size = 1M" "prefetch_threads = 8"
  S3_ENDPOINT=http://127.0.0.1:$(cat "$T/proxy.port") tierd_conf_rgw rgw "$BUCKET"
  tierd_conf_ns /s3 rgw "prefix = ds"
  tierd_conf_mount "$MNT" "readahead_blocks = 2" "readahead_max = 16M"
  tierd_conf_api "$SOCK"
} >"$CONF"
start_tierd
ok "mounted bucket $BUCKET through a +20 ms proxy"

cmp "$MNT/s3/big.bin" "$T/big.bin" || fail "big.bin differs"
stat_of() { api /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"][sys.argv[1]])' "$1"; }
fetch_ns=$(stat_of readahead_fetch_ns)
win=$(stat_of readahead_window_peak)
inflight=$(stat_of prefetch_inflight_peak)
echo "# block fetch time ${fetch_ns} ns; window peak $win blocks; prefetch GETs in flight, peak $inflight"
[ "$fetch_ns" -ge 40000000 ] || fail "measured block fetch time $fetch_ns ns, below the proxy's 40 ms round trip"
[ "$win" -gt 2 ] || fail "the read-ahead window was never sized past readahead_blocks (peak $win)"
[ "$win" -le 16 ] || fail "the read-ahead window reached $win blocks, over readahead_max (16)"
[ "$inflight" -ge 4 ] || fail "at most $inflight prefetch GETs in flight at once, want >= 4"
[ "$inflight" -le 8 ] || fail "$inflight prefetch GETs in flight, over prefetch_threads (8)"
ok "cold read through the proxy: window grew to $win blocks, $inflight ranged GETs in flight"

stop_tierd
ok "readahead_rgw passed"
