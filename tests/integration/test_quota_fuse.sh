#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_quota_fuse.sh - per-tenant hot-tier space quotas on a REAL mount over a POSIX backend (run
# by CTest, label fuse; needs root and /dev/fuse).
#
# RAM cache 8 MiB of 256 KiB blocks, no disk level. Three tenants by uid (setpriv):
#   keep  uid 1001, no quota: reads its 2 MiB working set once
#   scan  uid 1002, [tenant scan] cache_quota = 1M: reads 16 MiB of other files (twice the cache)
#   free  uid 1003, no quota: the same scan again, as the control
# Asserts: after scan's reads, GET /v1/tenants shows keep holding all its 2 MiB and scan at most
# its 1 MiB quota with quota evictions for the rest; keep's re-read with O_DIRECT (so the kernel's
# page cache cannot answer it) makes no backend fetch and returns the backend's bytes; /metrics
# carries tierd_tenant_cache_bytes and tierd_tenant_cache_quota_bytes for them. Then the control:
# keep reads a second working set once and free's identical scan, with no quota, evicts it (so the
# first check could fail: the cache's own policy does not protect a working set read once). No
# sleeps as synchronisation. Staging for a tenant (tierctl stage --tenant scan) is charged the
# same way: its blocks count against scan's quota, and its backend bytes are scan's background
# class in /metrics.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup quota_fuse

[ "$(id -u)" = 0 ] || fail "needs root (readers as other uids)"
for tool in setpriv python3 curl dd; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done

chmod 0711 "$T"
mkdir -p "$DATA/ds/scan" "$MNT"
chmod 0755 "$DATA" "$DATA/ds" "$DATA/ds/scan" "$MNT"
head -c $((2 * 1048576)) /dev/urandom >"$DATA/ds/keep.bin"
for i in $(seq -w 0 15); do
  head -c 1048576 /dev/urandom >"$DATA/ds/scan/$i.bin"
done
chmod 0644 "$DATA/ds/keep.bin" "$DATA"/ds/scan/*.bin

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 8M" "block_size = 256K"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022"
  tierd_conf_api "$SOCK" "socket_group = 1001" # uid 1001 may connect, and is no administrator
  tierd_conf_section "tenant keep" "uid = 1001"
  tierd_conf_section "tenant scan" "uid = 1002" "cache_quota = 1M"
  tierd_conf_section "tenant free" "uid = 1003"
} >"$CONF"

start_tierd
ok "mounted"

as_uid() { # UID CMD...
  local u=$1
  shift
  setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"
}
scan_as() { # UID: read the 16 scan files
  local f
  for f in "$MNT"/ds/scan/*.bin; do
    as_uid "$1" cat "$f" | cmp -s "$DATA/ds/scan/$(basename "$f")" - || fail "uid $1 read wrong bytes of $f"
  done
}
# TENANT FIELD from GET /v1/tenants' cache object
tcache() {
  api /v1/tenants | python3 -c '
import json, sys
j = json.load(sys.stdin)
t = {x["name"]: x for x in j["tenants"]}[sys.argv[1]]
print(t["cache"][sys.argv[2]])' "$1" "$2"
}

as_uid 1001 cat "$MNT/ds/keep.bin" | cmp -s "$DATA/ds/keep.bin" - || fail "keep read wrong bytes"
[ "$(tcache keep bytes)" = 2097152 ] || fail "keep holds $(tcache keep bytes) bytes after its read, want 2097152"
ok "keep read its 2 MiB working set once"

scan_as 1002
qs=$(tcache scan quota) qb=$(tcache scan bytes) qe=$(tcache scan quota_evictions)
[ "$qs" = 1048576 ] || fail "scan's quota is $qs, want 1048576 ([tenant scan] cache_quota = 1M)"
[ "$qb" -le 1048576 ] || fail "scan holds $qb bytes, over its 1 MiB quota"
[ "$qe" -ge 60 ] || fail "scan's quota evicted $qe blocks, want at least 60 of its 64"
kb=$(tcache keep bytes)
[ "$kb" = 2097152 ] || fail "keep holds $kb bytes after scan's 16 MiB, want all 2097152 (scan's quota must evict only scan's blocks)"
ok "scan read 16 MiB within its quota (holds $qb bytes, $qe quota evictions); keep still holds 2 MiB"

f0=$(fetches)
as_uid 1001 dd if="$MNT/ds/keep.bin" bs=1M iflag=direct status=none | cmp -s "$DATA/ds/keep.bin" - ||
  fail "keep's O_DIRECT re-read failed or returned wrong bytes"
f1=$(fetches)
[ "$f1" = "$f0" ] || fail "keep's re-read made $((f1 - f0)) backend fetches, want 0 (its blocks were evicted)"
ok "keep's O_DIRECT re-read came from the cache (0 backend fetches)"

api /metrics >"$T/metrics.txt" || fail "GET /metrics"
grep -qx 'tierd_tenant_cache_bytes{tenant="keep"} 2097152' "$T/metrics.txt" ||
  fail "no tierd_tenant_cache_bytes for keep: $(grep '^tierd_tenant_cache' "$T/metrics.txt")"
grep -qx 'tierd_tenant_cache_quota_bytes{tenant="scan"} 1048576' "$T/metrics.txt" ||
  fail "no tierd_tenant_cache_quota_bytes for scan: $(grep '^tierd_tenant_cache' "$T/metrics.txt")"
grep -q '^tierd_tenant_cache_quota_evictions_total{tenant="scan"} [1-9]' "$T/metrics.txt" ||
  fail "no quota evictions for scan in /metrics"
ok "/metrics: tierd_tenant_cache_bytes, tierd_tenant_cache_quota_bytes, tierd_tenant_cache_quota_evictions_total"

# Staging for a tenant is that tenant's: its background I/O at the scheduler, its quota
e0=$(tcache scan quota_evictions)
tierd_ctl stage --tenant scan "$MNT/ds/scan" >"$T/stage.out" || fail "tierctl stage --tenant scan: $(cat "$T/stage.out")"
e1=$(tcache scan quota_evictions) qb=$(tcache scan bytes) kb=$(tcache keep bytes)
[ "$qb" -le 1048576 ] || fail "scan holds $qb bytes after staging for it, over its 1 MiB quota"
[ "$e1" -gt "$e0" ] || fail "staging for scan evicted none of scan's blocks (quota evictions $e0 -> $e1): its blocks were not charged to scan"
[ "$kb" = 2097152 ] || fail "keep holds $kb bytes after staging for scan, want 2097152"
code=$(curl -sS -o "$T/post.json" -w '%{http_code}' --unix-socket "$SOCK" \
  -d '{"paths": ["/ds/scan"], "tenant": "nobody"}' http://tierd/v1/stage)
[ "$code" = 404 ] || fail "POST /v1/stage for an unknown tenant: HTTP $code, want 404: $(cat "$T/post.json")"
code=$(curl -sS -o "$T/post.json" -w '%{http_code}' --unix-socket "$SOCK" \
  -d '{"paths": ["/ds/scan"], "tenants": "scan"}' http://tierd/v1/stage)
[ "$code" = 400 ] || fail "POST /v1/stage with an unknown field: HTTP $code, want 400: $(cat "$T/post.json")"
grep -q "unknown field 'tenants'" "$T/post.json" || fail "the 400 does not name the field: $(cat "$T/post.json")"
api /metrics >"$T/metrics.txt" || fail "GET /metrics"
grep -q '^tierd_sched_bytes_total{tenant="scan",class="background"} [1-9]' "$T/metrics.txt" ||
  fail "no background-class backend bytes for scan: $(grep '^tierd_sched_bytes_total' "$T/metrics.txt")"
ok "tierctl stage --tenant scan: within scan's quota ($qb bytes, evictions $e0 -> $e1), scan's background I/O; keep untouched; bad tenant 404, bad field 400"

# The control: keep reads a second working set once (as it read keep.bin before scan's reads),
# then free runs the same scan with no quota: that takes keep's new blocks. (keep.bin itself was
# hit by the re-read above, so the policy's main queue now protects it: not a fair control.)
head -c 1048576 /dev/urandom >"$DATA/ds/keep2.bin"
chmod 0644 "$DATA/ds/keep2.bin"
as_uid 1001 cat "$MNT/ds/keep2.bin" | cmp -s "$DATA/ds/keep2.bin" - || fail "keep read wrong bytes of keep2.bin"
kb=$(tcache keep bytes)
[ "$kb" = 3145728 ] || fail "keep holds $kb bytes after keep2.bin, want 3145728"
echo 3 >/proc/sys/vm/drop_caches # the kernel's copies of the scan files: let free's reads reach tierd
scan_as 1003
kb=$(tcache keep bytes)
[ "$kb" -le 2097152 ] || fail "control: free's unquoted scan left keep $kb bytes (keep2.bin's blocks too); the check above proves nothing"
ok "control: the same 16 MiB scan without a quota evicted keep's once-read keep2.bin (keep holds $kb of 3145728 bytes)"

# A live change: tierctl qos set TENANT cache_quota=SIZE trims before it answers. keep reads
# keep2.bin again first: the control's scan may have taken all of keep's blocks.
echo 3 >/proc/sys/vm/drop_caches
as_uid 1001 cat "$MNT/ds/keep2.bin" | cmp -s "$DATA/ds/keep2.bin" - || fail "keep read wrong bytes of keep2.bin"
kb=$(tcache keep bytes)
[ "$kb" -gt 524288 ] || fail "keep holds only $kb bytes: nothing for the live change to trim"
tierd_ctl qos set keep cache_quota=512K >"$T/qos.out" || fail "tierctl qos set keep cache_quota=512K: $(cat "$T/qos.out")"
grep -q '^keep  *512.0 KiB' "$T/qos.out" || fail "tierctl qos set did not show keep's new quota: $(cat "$T/qos.out")"
kb=$(tcache keep bytes)
[ "$kb" -le 524288 ] || fail "keep holds $kb bytes right after its quota was lowered to 512K"
[ "$(tcache keep quota)" = 524288 ] || fail "keep's quota is $(tcache keep quota), want 524288"
for bad in cache_quota=100K cache_quota=lots; do
  if tierd_ctl qos set keep "$bad" >"$T/bad.out" 2>&1; then fail "tierctl qos set keep $bad was accepted"; fi
  grep -q "cache_quota" "$T/bad.out" || fail "the error for $bad does not name cache_quota: $(cat "$T/bad.out")"
done
[ "$(tcache keep quota)" = 524288 ] || fail "a refused change altered keep's quota"
code=$(as_uid 1001 curl -sS -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" -X PUT \
  -d '{"tenant": "keep", "cache_quota": "none"}' http://tierd/v1/qos || true)
[ "$code" = 403 ] || fail "a non-admin's cache_quota change: HTTP $code, want 403"
[ "$(tcache keep quota)" = 524288 ] || fail "a refused non-admin change altered keep's quota"
tierd_ctl qos set keep cache_quota=default >"$T/qos.out" || fail "tierctl qos set keep cache_quota=default"
[ "$(tcache keep quota)" = 0 ] || fail "keep's quota after default is $(tcache keep quota), want 0 (none)"
ok "tierctl qos set keep cache_quota=512K trimmed keep to $kb bytes at once; 100K and 'lots' refused (nothing changed); default lifts it"

stop_tierd
ok "quota_fuse passed"
