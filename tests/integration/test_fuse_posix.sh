#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_fuse_posix.sh - tierd on a REAL FUSE mount over a POSIX backend (run by CTest, label fuse).
#
# Asserts: every byte read through the mount equals the backend's (whole files, odd offsets);
# `ls -R`/find of a 10,000-entry prefix; 8 concurrent readers of one uncached file cause exactly
# one backend fetch per block (GET /v1/stats); a file replaced on the backend is served new after
# the TTL and no read ever returns a mix of old and new; missing path -> ENOENT; writes -> EROFS;
# kill -9 then restart -> the stale mount is cleared and the disk cache is reused (no fetches for
# data read before the crash); API over TCP without the token -> 401, with it -> 200; SIGTERM ->
# clean unmount and exit 0 (ASan leak check included).
# No sleeps as synchronisation: every wait polls a condition with a deadline.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup fuse_posix
# a free port from the kernel (bound and released at once)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TOKEN=tok-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n') # [api] token: at least 16 characters

# ---- backend data ------------------------------------------------------------------------
mkdir -p "$DATA/ds/sub/deeper" "$DATA/many" "$MNT"
head -c $((5 * 1048576 + 12345)) /dev/urandom >"$DATA/ds/big.bin"  # not a block multiple
head -c $((8 * 1048576)) /dev/urandom >"$DATA/ds/eight.bin"         # 8 blocks of 1 MiB
head -c 1000 /dev/urandom >"$DATA/ds/sub/small.bin"
: >"$DATA/ds/sub/empty.bin"
echo deep >"$DATA/ds/sub/deeper/d.txt"
for d in $(seq -w 0 99); do
  mkdir "$DATA/many/d$d"
  (cd "$DATA/many/d$d" && seq -f "f%03g" 0 98 | xargs touch)
done # 100 dirs + 9,900 files = 10,000 entries

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 64M" "disk_dir = $T/cache" "disk_size = 512M" \
    "disk_min_free = 64M" "block_size = 1M"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /data warm "prefix = ds"
  tierd_conf_ns /bulk/many warm "prefix = many"
  tierd_conf_mount "$MNT" "attr_ttl = 1s" "entry_ttl = 1s" "readahead_blocks = 2"
  tierd_conf_api "$SOCK" "tcp = 127.0.0.1:$PORT" "token = $TOKEN"
} >"$CONF"

start_tierd
ok "mounted"

# ---- tree ----------------------------------------------------------------------------------
[ "$(ls "$MNT" | tr '\n' ' ')" = "bulk data " ] || fail "root lists '$(ls "$MNT")'"
[ "$(ls "$MNT/bulk")" = "many" ] || fail "intermediate directory /bulk lists '$(ls "$MNT/bulk")'"
[ "$(ls "$MNT/data" | tr '\n' ' ')" = "big.bin eight.bin sub " ] || fail "/data lists '$(ls "$MNT/data")'"
[ "$(stat -c %s "$MNT/data/big.bin")" = $((5 * 1048576 + 12345)) ] || fail "size of big.bin"
ok "namespaces and intermediate directories"

# ---- every byte ----------------------------------------------------------------------------
for f in big.bin eight.bin sub/small.bin sub/empty.bin sub/deeper/d.txt; do
  cmp "$MNT/data/$f" "$DATA/ds/$f" || fail "content of $f differs"
done
for off in 0 1 4095 1048575 1048576 3000001 5242880; do
  a=$(dd if="$MNT/data/big.bin" bs=1 skip=$off count=70000 iflag=skip_bytes,count_bytes 2>/dev/null | sha256sum)
  b=$(dd if="$DATA/ds/big.bin" bs=1 skip=$off count=70000 iflag=skip_bytes,count_bytes 2>/dev/null | sha256sum)
  [ "$a" = "$b" ] || fail "range at $off differs"
done
ok "every byte equals the backend's (whole files and odd ranges)"

# ---- 10,000 entries ------------------------------------------------------------------------
# shellcheck disable=SC2010 # the listing through the mount is what is tested
n=$(ls -R "$MNT/bulk/many" | grep -vc -e '^$' -e ':$')
[ "$n" = 10000 ] || fail "ls -R shows $n entries, expected 10000"
n=$(find "$MNT/bulk/many" -type f | wc -l)
[ "$n" = 9900 ] || fail "find shows $n files, expected 9900"
ok "ls -R of a 10,000-entry prefix"

# ---- errors --------------------------------------------------------------------------------
err=$(stat "$MNT/data/nope" 2>&1) && fail "stat of a missing path succeeded"
grep -q "No such file" <<<"$err" || fail "missing path: $err"
err=$( (echo x >"$MNT/data/big.bin") 2>&1) && fail "write succeeded"
grep -q "Read-only file system" <<<"$err" || fail "write: $err"
err=$(touch "$MNT/data/new" 2>&1) && fail "create succeeded"
grep -q "Read-only file system" <<<"$err" || fail "create: $err"
err=$(mkdir "$MNT/data/newdir" 2>&1) && fail "mkdir succeeded"
grep -q "Read-only file system" <<<"$err" || fail "mkdir: $err"
err=$(rm -f "$MNT/data/big.bin" 2>&1) && fail "unlink succeeded"
grep -q "Read-only file system" <<<"$err" || fail "unlink: $err"
ok "ENOENT for a missing path, EROFS for mutations"

# ---- 8 concurrent readers, one fetch per block ---------------------------------------------
head -c $((8 * 1048576)) /dev/urandom >"$DATA/ds/conc.bin"
wait_for 10 test -e "$MNT/data/conc.bin" || fail "new file never appeared"
f0=$(fetches)
pids=()
for i in $(seq 1 8); do
  cmp "$MNT/data/conc.bin" "$DATA/ds/conc.bin" >"$T/cmp.$i" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent reader saw different bytes"; done
f1=$(fetches)
[ $((f1 - f0)) = 8 ] || fail "8 readers of an 8-block file caused $((f1 - f0)) fetches, expected 8"
ok "8 concurrent readers: one backend fetch per block ($((f1 - f0)))"

# ---- replaced object: new after the TTL, never mixed ---------------------------------------
head -c $((3 * 1048576)) /dev/urandom >"$T/old.bin"
head -c $((4 * 1048576 + 777)) /dev/urandom >"$T/new.bin"
cp "$T/old.bin" "$DATA/ds/swap.tmp" && mv "$DATA/ds/swap.tmp" "$DATA/ds/swap.bin"
wait_for 10 cmp -s "$MNT/data/swap.bin" "$T/old.bin" || fail "old version never served"
cp "$T/new.bin" "$DATA/ds/swap.tmp" && mv "$DATA/ds/swap.tmp" "$DATA/ds/swap.bin"
# Until the TTL passes a read may return the old version, or fail with EIO (a handle whose
# version vanished from the backend), having returned a prefix of ONE version. It may never
# return bytes of both: each read's output must be a prefix of the old or of the new file.
deadline=$((SECONDS + 120))
reads=0
while :; do
  reads=$((reads + 1))
  if cat "$MNT/data/swap.bin" >"$T/got" 2>"$T/err"; then
    cmp -s "$T/got" "$T/new.bin" && break
    cmp -s "$T/got" "$T/old.bin" || fail "read $reads returned neither the old nor the new version ($(stat -c %s "$T/got") bytes; vs old: $(cmp "$T/got" "$T/old.bin" 2>&1 | head -1); vs new: $(cmp "$T/got" "$T/new.bin" 2>&1 | head -1))"
  else
    grep -q "Input/output error" "$T/err" || fail "read failed with: $(cat "$T/err")"
    n=$(stat -c %s "$T/got")
    cmp -s -n "$n" "$T/got" "$T/old.bin" || cmp -s -n "$n" "$T/got" "$T/new.bin" ||
      fail "a failed read returned $n bytes mixing versions"
  fi
  [ $SECONDS -lt $deadline ] || fail "the new version was not served within 120 s"
  sleep 0.05
done
ok "replaced object served new after the TTL ($reads reads), never mixed"

# ---- TCP API -------------------------------------------------------------------------------
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/status")
[ "$code" = 401 ] || fail "TCP without token gave $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong" "http://127.0.0.1:$PORT/v1/status")
[ "$code" = 401 ] || fail "TCP with a wrong token gave $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/status")
[ "$code" = 200 ] || fail "TCP with the token gave $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" -d '{"path":"/data/nope"}' http://tierd/v1/pin)
[ "$code" = 404 ] || fail "pin of a missing path gave $code"
head -c 70000 /dev/zero | tr '\0' 'x' >"$T/big.json"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" --data-binary @"$T/big.json" http://tierd/v1/stage)
[ "$code" = 413 ] || fail "a 70 KB body gave $code"
ok "API: TCP 401 without/with wrong token, 200 with it; 404; 413"

# ---- kill -9, restart: stale mount cleared, disk cache reused ------------------------------
crash_tierd
err=$(stat -f "$MNT" 2>&1) && fail "the mount survived kill -9?"
grep -q "not connected" <<<"$err" || fail "expected a dead mount, got: $err"
start_tierd
ok "restart after kill -9 cleared the stale mount"
f0=$(fetches)
cmp "$MNT/data/big.bin" "$DATA/ds/big.bin" || fail "big.bin differs after restart"
cmp "$MNT/data/conc.bin" "$DATA/ds/conc.bin" || fail "conc.bin differs after restart"
f1=$(fetches)
[ "$f1" = "$f0" ] || fail "re-reading cached files after restart fetched $((f1 - f0)) blocks"
hits=$(api /v1/stats | python3 -c 'import json,sys; c=json.load(sys.stdin)["cache"]; print(c["disk"]["hits"])')
[ "$hits" -gt 0 ] || fail "no disk hits after restart"
ok "disk cache reused after restart (0 fetches, $hits disk hits)"

stop_tierd
ok "SIGTERM: clean unmount, exit 0"
echo "PASS"
