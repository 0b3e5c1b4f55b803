#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_fuse_rgw.sh - tierd on a REAL FUSE mount over the S3 backend against the test Ceph RGW
# (CTest labels fuse + rgw, fixture rgw: scripts/ceph.sh has written $TIER_CEPH_DIR/env).
#
# Asserts: every byte read through the mount equals the object's; S3 implicit directories list
# and walk (`ls -R` of a few hundred keys); 8 concurrent readers of one uncached object cause one
# GET per block; an object replaced in the bucket is served new after the TTL, never mixed; a
# missing key -> ENOENT; RGW stopped -> reading an uncached object fails with EIO within the
# configured bound while the mount stays alive, and it reads again after start-rgw.
# Buckets and objects are made with curl --aws-sigv4. No sleeps as synchronisation.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_rgw_setup fuse_rgw
# the test stops RGW: never leave it stopped for the tests after this one
extra_cleanup() { tierd_test_rgw_restart; }
BUCKET=fuse-rgw-$(date +%s)-$RANDOM
TIMEOUT_MS=3000
s3() { tierd_s3 "$@"; }

# ---- bucket and objects --------------------------------------------------------------------
s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null || fail "cannot create bucket $BUCKET"
mkdir -p "$T/src/many" "$MNT"
head -c $((5 * 1048576 + 12345)) /dev/urandom >"$T/src/big.bin"
head -c $((8 * 1048576)) /dev/urandom >"$T/src/eight.bin"
echo nested >"$T/src/nested.txt"
s3 -T "$T/src/big.bin" "$S3_ENDPOINT/$BUCKET/ds/big.bin" >/dev/null
s3 -T "$T/src/eight.bin" "$S3_ENDPOINT/$BUCKET/ds/eight.bin" >/dev/null
s3 -T "$T/src/nested.txt" "$S3_ENDPOINT/$BUCKET/ds/a/b/c/nested.txt" >/dev/null
names=$(seq -f "f%03g" 0 49 | paste -sd, -)
for f in $(seq -f "f%03g" 0 49); do echo "$f" >"$T/src/many/$f"; done
for d in d0 d1 d2 d3; do
  s3 -T "$T/src/many/{$names}" "$S3_ENDPOINT/$BUCKET/ds/many/$d/" >/dev/null
done # 4 implicit dirs + 200 objects

{
  tierd_conf_section daemon "backend_timeout = ${TIMEOUT_MS}ms"
  tierd_conf_section cache "ram_size = 64M" "disk_dir = $T/cache" "disk_size = 512M" \
    "disk_min_free = 64M" "block_size = 1M"
  tierd_conf_rgw rgw "$BUCKET" "max_retries = 2"
  tierd_conf_ns /s3 rgw "prefix = ds"
  tierd_conf_mount "$MNT" "attr_ttl = 1s" "entry_ttl = 1s" "readahead_blocks = 2"
  tierd_conf_api "$SOCK"
} >"$CONF"

start_tierd
ok "mounted bucket $BUCKET"

# ---- bytes, implicit directories -----------------------------------------------------------
cmp "$MNT/s3/big.bin" "$T/src/big.bin" || fail "big.bin differs"
cmp "$MNT/s3/a/b/c/nested.txt" "$T/src/nested.txt" || fail "nested.txt differs"
[ -d "$MNT/s3/a/b" ] || fail "implicit directory a/b is not a directory"
# shellcheck disable=SC2010 # the listing through the mount is what is tested
n=$(ls -R "$MNT/s3/many" | grep -vc -e '^$' -e ':$')
[ "$n" = 204 ] || fail "ls -R shows $n entries, expected 204"
for f in d2/f007 d3/f049; do
  cmp "$MNT/s3/many/$f" "$T/src/many/${f#*/}" || fail "$f differs"
done
err=$(stat "$MNT/s3/nope" 2>&1) && fail "stat of a missing key succeeded"
grep -q "No such file" <<<"$err" || fail "missing key: $err"
ok "every byte equals the object's; implicit dirs; ls -R of 204 entries; ENOENT"

# ---- 8 concurrent readers, one GET per block -----------------------------------------------
f0=$(fetches)
pids=()
for _ in $(seq 1 8); do
  cmp "$MNT/s3/eight.bin" "$T/src/eight.bin" >/dev/null 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent reader saw different bytes"; done
f1=$(fetches)
[ $((f1 - f0)) = 8 ] || fail "8 readers of an 8-block object caused $((f1 - f0)) fetches, expected 8"
ok "8 concurrent readers: one GET per block"

# ---- replaced object -----------------------------------------------------------------------
head -c $((2 * 1048576)) /dev/urandom >"$T/old.bin"
head -c $((3 * 1048576 + 5)) /dev/urandom >"$T/new.bin"
s3 -T "$T/old.bin" "$S3_ENDPOINT/$BUCKET/ds/swap.bin" >/dev/null
wait_for 10 cmp -s "$MNT/s3/swap.bin" "$T/old.bin" || fail "old version never served"
OLD=$(sha256sum <"$T/old.bin")
NEW=$(sha256sum <"$T/new.bin")
EMPTY=$(sha256sum </dev/null)
s3 -T "$T/new.bin" "$S3_ENDPOINT/$BUCKET/ds/swap.bin" >/dev/null
deadline=$((SECONDS + 120))
while :; do
  got=$(cat "$MNT/s3/swap.bin" 2>/dev/null | sha256sum) || true
  [ "$got" = "$NEW" ] && break
  [ "$got" = "$OLD" ] || [ "$got" = "$EMPTY" ] || fail "a read returned a mix of versions"
  [ $SECONDS -lt $deadline ] || fail "new version not served within 120 s"
  sleep 0.05
done
ok "replaced object served new after the TTL, never mixed"

# ---- a pinned model, staged and never opened through the mount -----------------------------
head -c $((3 * 1048576 + 77)) /dev/urandom >"$T/model.bin"
s3 -T "$T/model.bin" "$S3_ENDPOINT/$BUCKET/ds/models/model.bin" >/dev/null
tierd_ctl stage --pin /s3/models/model.bin >/dev/null || fail "stage --pin of the model"
ok "model staged and pinned"

# ---- RGW down: EIO within the bound, mount alive, recovery ---------------------------------
head -c $((2 * 1048576)) /dev/urandom >"$T/late.bin"
s3 -T "$T/late.bin" "$S3_ENDPOINT/$BUCKET/ds/late.bin" >/dev/null
ls -l "$MNT/s3/late.bin" >/dev/null || fail "late.bin not visible"
"$SRC/scripts/ceph.sh" stop-rgw "$CEPH" >/dev/null 2>&1 || fail "stop-rgw failed"
t0=$(date +%s%N)
err=$(cat "$MNT/s3/late.bin" 2>&1 >/dev/null) && fail "read with RGW down succeeded"
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
grep -q "Input/output error" <<<"$err" || fail "RGW down: expected EIO, got: $err"
# open may stat (one bounded call) before the read (another): 2 x backend_timeout + slack
[ "$ms" -le $((2 * TIMEOUT_MS + 2000)) ] || fail "EIO took $ms ms, bound is $((2 * TIMEOUT_MS + 2000))"
stat -f "$MNT" >/dev/null || fail "mount died with RGW down"
ls "$MNT" >/dev/null || fail "root listing failed with RGW down"
cmp "$MNT/s3/big.bin" "$T/src/big.bin" || fail "cached big.bin unreadable with RGW down"
# issue 9: cached and pinned data keep being served while the backend is down
cmp "$MNT/s3/models/model.bin" "$T/model.bin" || fail "pinned model unreadable with RGW down"
ok "RGW down: EIO after $ms ms, mount alive, cached and pinned data still served"
"$SRC/scripts/ceph.sh" start-rgw "$CEPH" >/dev/null 2>&1 || fail "start-rgw failed"
wait_for 60 cmp -s "$MNT/s3/late.bin" "$T/late.bin" || fail "no recovery after start-rgw"
ok "recovered after start-rgw"

stop_tierd
echo "PASS"
