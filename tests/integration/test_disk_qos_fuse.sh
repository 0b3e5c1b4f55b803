#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_disk_qos_fuse.sh - the local disk's QoS lane on a REAL mount (run by CTest, label fuse;
# needs root and /dev/fuse): a tenant's disk_limit holds for its disk-level hits while another
# tenant's disk hits go at the disk's speed.
#
# A RAM-less cache (ram_size = 0: every hit is a read of a block file) over a POSIX backend; two
# 24 MiB files staged onto the disk level first (tierctl stage, as root: the default tenant, no
# limit). Then at once: uid 1001 ([tenant slow], disk_limit = 6MiB/s) reads a.bin through the
# mount, root (the default tenant) reads b.bin. Asserts: both get the backend's bytes; no backend
# fetch happened during the reads and the disk level's hits grew (every byte came from the disk
# level, through the lane); slow's read took at least 3.5 s (24 MiB at 6 MiB/s is 4 s; dmclock.h
# allows 20 ms of slack and one request more), so its limit held; root's read ended first and
# took less than half as long, so the limit held back only its tenant. Each file is read once,
# new to the kernel's page cache (staging reads no page of the mount), so every byte is asked of
# tierd. No sleeps as synchronisation: waits poll a condition with a deadline.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup disk_qos_fuse

[ "$(id -u)" = 0 ] || fail "needs root (a reader as another uid)"
for tool in setpriv python3; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done

SIZE=$((24 * 1048576))
chmod 0711 "$T"
mkdir -p "$DATA/ds" "$MNT"
chmod 0755 "$DATA" "$DATA/ds" "$MNT"
head -c "$SIZE" /dev/urandom >"$DATA/ds/a.bin"
head -c "$SIZE" /dev/urandom >"$DATA/ds/b.bin"
chmod 0644 "$DATA"/ds/*.bin

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 0" "block_size = 1M" "disk_dir = $T/cache" \
    "disk_size = 256M" "disk_min_free = 0"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022" "readahead_blocks = 0"
  tierd_conf_api "$SOCK"
  tierd_conf_section "tenant slow" "uid = 1001" "class = training" "disk_limit = 6MiB/s"
} >"$CONF"

start_tierd
ok "mounted"

stats() { # KEY: cache.disk.hits, cache.disk.blocks or cache.fetches from /v1/stats
  api /v1/stats | python3 -c 'import json, sys
j = json.load(sys.stdin)["cache"]
for k in sys.argv[1].split("."):
    j = j[k]
print(j)' "$1"
}

tierd_ctl stage "$MNT/ds/a.bin" >/dev/null || fail "tierctl stage a.bin"
tierd_ctl stage "$MNT/ds/b.bin" >/dev/null || fail "tierctl stage b.bin"
blocks=$(stats disk.blocks)
[ "$blocks" = 48 ] || fail "after staging, $blocks blocks on the disk level (want 48)"
ok "both files staged onto the disk level (48 blocks)"
hits0=$(stats disk.hits)
fetches0=$(stats fetches)

now_ns() { date +%s%N; }
# reader NAME CMD...: run CMD (it prints the file), compare with the backend's, note the times
reader() {
  local name=$1 t0
  shift
  t0=$(now_ns)
  if "$@" | cmp -s "$DATA/ds/$name.bin" -; then : >"$T/ok.$name"; fi
  echo "$t0 $(now_ns)" >"$T/time.$name"
}
reader a setpriv --reuid=1001 --regid=1001 --clear-groups -- cat "$MNT/ds/a.bin" &
pa=$!
reader b cat "$MNT/ds/b.bin" &
pb=$!
wait "$pa" || true
wait "$pb" || true
[ -e "$T/ok.a" ] || fail "uid 1001 read wrong bytes of a.bin (or failed)"
[ -e "$T/ok.b" ] || fail "root read wrong bytes of b.bin (or failed)"
ok "both readers got the backend's bytes"

fetches1=$(stats fetches)
hits1=$(stats disk.hits)
[ "$fetches1" = "$fetches0" ] || fail "$((fetches1 - fetches0)) backend fetches during the reads (want 0: all from disk)"
[ "$hits1" -ge $((hits0 + 48)) ] || fail "disk hits grew by $((hits1 - hits0)) (want >= 48)"
ok "every byte from the disk level: $((hits1 - hits0)) disk hits, no fetch"

read -r a0 a1 <"$T/time.a"
read -r b0 b1 <"$T/time.b"
ta=$((a1 - a0))
tb=$((b1 - b0))
echo "slow (6 MiB/s disk limit): $((ta / 1000000)) ms; default tenant: $((tb / 1000000)) ms"
[ "$ta" -ge 3500000000 ] || fail "tenant slow read 24 MiB of disk hits in $((ta / 1000000)) ms: its 6 MiB/s disk limit did not hold (>= 3500 ms)"
[ "$b1" -lt "$a1" ] || fail "the default tenant's read ended after the limited one's"
[ $((2 * tb)) -lt "$ta" ] || fail "the default tenant's read took $((tb / 1000000)) ms, more than half of the limited one's $((ta / 1000000)) ms"
ok "the disk limit held for tenant slow ($((ta / 1000000)) ms) and not for the default tenant ($((tb / 1000000)) ms)"
