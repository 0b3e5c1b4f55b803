#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_ttl_fuse.sh - per-namespace metadata TTLs on a REAL mount over a POSIX backend (run by
# CTest, label fuse; needs /dev/fuse).
#
#   /ds    a read-cache namespace with no TTL keys: the read-cache default (60 s), so once a file
#          was looked up, and 1.5 s later (past [mount]'s 1 s, which it had before), 50 stats
#          and 50 open+read of it make no backend stat at all (the scheduler's per-op calls in
#          /v1/stats)
#   /ds2   the same directory with attr_ttl = entry_ttl = 300ms: a file replaced in the backend
#          (another size, other bytes) is seen within a deadline, and every read of it returns
#          exactly the old or exactly the new bytes, never a mix.
# The one sleep lets time pass past [mount]'s TTL (the condition under test); the replacement is
# polled for with a deadline.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup ttl_fuse

mkdir -p "$DATA/ds" "$MNT"
head -c 300000 /dev/urandom >"$DATA/ds/x.bin"
cp "$DATA/ds/x.bin" "$T/old.bin"
head -c 400000 /dev/urandom >"$T/new.bin"

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 64M" "block_size = 64K"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_ns /ds2 warm "prefix = ds" "attr_ttl = 300ms" "entry_ttl = 300ms"
  tierd_conf_mount "$MNT"
  tierd_conf_api "$SOCK"
} >"$CONF"

start_tierd
ok "mounted"

stat_calls() {
  api /v1/stats | python3 -c 'import json,sys; print(sum(b["calls"]["stat"] for b in json.load(sys.stdin)["backends"]))'
}

cmp -s "$MNT/ds/x.bin" "$T/old.bin" || fail "first read of /ds/x.bin"
s0=$(stat_calls)
sleep 1.5 # not a synchronisation: the time that passes is what is tested (past [mount]'s 1 s)
for _ in $(seq 50); do
  stat -c %s "$MNT/ds/x.bin" >/dev/null
  head -c 1000 "$MNT/ds/x.bin" >/dev/null
done
s1=$(stat_calls)
[ "$s1" = "$s0" ] || fail "50 stats and opens of a read-cache file within its TTL made $((s1 - s0)) backend stats (want 0)"
ok "read-cache default TTL: 50 stats + 50 opens, 0 backend stats"

cmp -s "$MNT/ds2/x.bin" "$T/old.bin" || fail "first read of /ds2/x.bin"
replace_and_read_new "$MNT/ds2/x.bin" "/ds2 (attr_ttl 300ms)"
[ "$(stat -c %s "$MNT/ds2/x.bin")" = 400000 ] || fail "/ds2/x.bin's size after the replacement: $(stat -c %s "$MNT/ds2/x.bin")"
ok "/ds2 (300 ms TTLs): the replacement seen after $READS reads, every read exactly one version"

stop_tierd
ok "ttl_fuse passed"
