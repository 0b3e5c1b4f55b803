#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_readahead_fuse.sh - the cold read path's read-ahead on a REAL mount over a POSIX backend
# (run by CTest, label fuse; needs root and /dev/fuse). Blocks of 64 KiB; counts are the cache's
# backend fetches (/v1/stats), which only tierd's own reads and read-ahead make:
#   window   a file of 64 blocks read sequentially with O_DIRECT (so the kernel's readahead
#            adds nothing), 16 blocks of it, the file kept open while the count is polled, with
#            readahead_blocks = 2 and readahead_max = 512K (8 blocks): the window is sized from
#            the reader's rate and the measured fetch time (a local backend's fetches are fast:
#            it may stay at 2), so the fetches reach at least 16 + 2 = 18 and never pass 16 + 8
#            = 24 (the bound holds at every poll), and the largest window sized (/v1/stats
#            readahead_window_peak) is within 2..8. Growth on a slow link: test_readahead_rgw.sh.
#   listing  40 files of 16 KiB (one block each), listed, then opened in listing order: after the first two, the
#            files after them are fetched without being read (a window of 4 files that doubles
#            on each open in order, at most 32 files ahead); the next four files' reads are then
#            RAM hits (read telemetry by tier).
# No sleeps: counts are polled with a deadline.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup readahead_fuse

mkdir -p "$DATA/ds/lo" "$MNT"
head -c $((64 * 65536)) /dev/urandom >"$DATA/ds/big.bin"
for i in $(seq -w 1 40); do
  head -c 16384 /dev/urandom >"$DATA/ds/lo/f$i.bin" # 32 of them fit readahead_max
done

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 64M" "block_size = 64K" "prefetch_threads = 4"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "readahead_blocks = 2" "readahead_max = 512K"
  tierd_conf_api "$SOCK"
} >"$CONF"
start_tierd
ok "mounted"

fetches() { api /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"]["fetches"])'; }
# blocks in the RAM level: a fetched block is counted in fetches before it is placed there
ram_blocks() { api /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"]["ram"]["blocks"])'; }
wait_ram() {
  local want=$1 n deadline=$((SECONDS + 120))
  until [ "$(ram_blocks)" -ge "$want" ]; do
    [ $SECONDS -lt $deadline ] || fail "RAM blocks stayed at $(ram_blocks), want $want"
    python3 -c 'import time; time.sleep(0.05)' # poll interval, not a synchronisation
  done
}
# reads served by the backend so far (the read telemetry's tier label)
backend_reads() {
  api /metrics | awk '/^tierd_op_latency_seconds_count\{/ && /op="read"/ && /tier="backend"/ { s += $2 } END { print s + 0 }'
}
# wait_fetches WANT MAX: poll until the fetch count is WANT, failing if it ever passes MAX
wait_fetches() {
  local want=$1 max=$2 n deadline=$((SECONDS + 120))
  while :; do
    n=$(fetches)
    [ "$n" -le "$max" ] || fail "fetches reached $n, over the bound $max"
    [ "$n" -ge "$want" ] && return 0
    [ $SECONDS -lt $deadline ] || fail "fetches stayed at $n, want $want"
    python3 -c 'import time; time.sleep(0.05)' # poll interval, not a synchronisation
  done
}

# ---- window ----
f0=$(fetches)
# the reader keeps its file open while the count is polled: a release takes back what its
# read-ahead still has queued (cache_prefetch_cancel)
coproc RD {
  python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 65536)
with open(sys.argv[2], "wb") as out:
    for i in range(16):
        assert os.preadv(fd, [buf], i * 65536) == 65536
        out.write(buf[:])
print("read", flush=True)
sys.stdin.readline()
os.close(fd)' "$MNT/ds/big.bin" "$T/part.bin"
}
read -r line <&"${RD[0]}" || fail "the reader of big.bin failed"
[ "$line" = read ] || fail "the reader of big.bin said '$line'"
cmp -s "$T/part.bin" <(head -c $((16 * 65536)) "$DATA/ds/big.bin") || fail "big.bin: wrong bytes"
wait_fetches $((f0 + 18)) $((f0 + 24))
win=$(api /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"]["readahead_window_peak"])')
[ "$win" -ge 2 ] && [ "$win" -le 8 ] || fail "read-ahead window peak $win, want 2..8"
echo close >&"${RD[1]}"
wait "$RD_PID" || fail "the reader of big.bin failed at close"
ok "sequential window: 16 blocks read, at least 18 fetched, window $win blocks (2..8), not past 24"

# ---- listing order ----
ls "$MNT/ds/lo" >/dev/null
f0=$(fetches) r0=$(ram_blocks)
cat "$MNT/ds/lo/f01.bin" >/dev/null
cat "$MNT/ds/lo/f02.bin" >/dev/null
wait_fetches $((f0 + 6)) $((f0 + 6))
wait_ram $((r0 + 6))
ok "two opens in listing order: the next 4 files fetched before anyone read them"
b0=$(backend_reads)
for i in 03 04 05 06; do
  cmp -s "$MNT/ds/lo/f$i.bin" "$DATA/ds/lo/f$i.bin" || fail "f$i.bin: wrong bytes"
done
b1=$(backend_reads)
[ "$b1" = "$b0" ] || fail "reads of f03..f06 went to the backend $((b1 - b0)) times (want 0: prefetched)"
# the window doubled on each of those opens: 8, 16, 32 files ahead of f06 at most
wait_fetches $((f0 + 6 + 32)) $((f0 + 6 + 32))
ok "f03..f06 were RAM hits; the window grew to 32 files ahead (38 fetches), not past it"

stop_tierd
ok "readahead_fuse passed"
