#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_fuse_dir.sh - directory listings on a REAL FUSE mount over a POSIX backend (run by CTest,
# label fuse): single-flight builds and the max_dir_entries cap (docs/CONFIG.md "Listings").
#
# Asserts: 8 concurrent `ls` of a cold 30,000-entry directory all list every entry and the
# backend is listed once (the debug line "listing PATH built", one per build); over
# [mount] max_dir_entries `ls` prints the first max_dir_entries names and fails with EFBIG
# ("File too large"), a name beyond the cap still reads while the cut listing is cached, a name
# absent from the directory is still ENOENT, and the cut is logged once per directory although
# the listing is rebuilt after entry_ttl.
# No sleeps as synchronisation: every wait polls a condition with a deadline.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup fuse_dir

N=30000
mkdir -p "$DATA/big" "$MNT"
(cd "$DATA/big" && seq -f "f%05g" 0 $((N - 1)) | xargs touch)
echo last >"$DATA/big/f$((N - 1))"

write_conf() { # $1: [mount] lines
  {
    tierd_conf_section daemon "log_level = debug"
    tierd_conf_section cache "ram_size = 32M" "block_size = 1M"
    tierd_conf_posix warm "$DATA"
    tierd_conf_ns /x warm
    tierd_conf_mount "$MNT" "$1"
    tierd_conf_api "$SOCK"
  } >"$CONF"
}
builds() { grep -c "listing /x/big built" "$T/tierd.log" || true; }

# ---- single flight ------------------------------------------------------------------------
write_conf "entry_ttl = 60s
attr_ttl = 60s"
start_tierd
stat "$MNT/x/big" >/dev/null # the lookup is not what is measured
pids=()
for i in $(seq 1 8); do
  (ls "$MNT/x/big" | wc -l >"$T/count.$i") &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent ls failed"; done
for i in $(seq 1 8); do
  [ "$(cat "$T/count.$i")" = $N ] || fail "concurrent ls $i listed $(cat "$T/count.$i") entries, expected $N"
done
[ "$(builds)" = 1 ] || fail "8 concurrent ls of one directory built its listing $(builds) times, expected 1"
ok "8 concurrent ls: every entry listed, one backend listing"
stop_tierd

# ---- max_dir_entries ----------------------------------------------------------------------
: >"$T/tierd.log"
write_conf "max_dir_entries = 1000
entry_ttl = 1s
attr_ttl = 1s"
start_tierd
ls_cut() { # ls fails with EFBIG after printing the first 1000 names
  local rc=0
  ls "$MNT/x/big" >"$T/ls.out" 2>"$T/ls.err" || rc=$?
  [ $rc -ne 0 ] || fail "ls of a directory over max_dir_entries succeeded"
  grep -q "File too large" "$T/ls.err" || fail "ls over the cap: $(cat "$T/ls.err")"
  [ "$(wc -l <"$T/ls.out")" = 1000 ] || fail "ls over the cap printed $(wc -l <"$T/ls.out") names, expected 1000"
}
ls_cut
# while that listing is fresh: a name it lacks is asked of the backend, not taken as absent
[ "$(cat "$MNT/x/big/f$((N - 1))")" = last ] || fail "a name beyond the cap does not read"
err=$(stat "$MNT/x/big/nope" 2>&1) && fail "stat of a missing name succeeded"
grep -q "No such file" <<<"$err" || fail "missing name in a cut directory: $err"
ok "over max_dir_entries: ls prints the first 1000 and fails with EFBIG; a name beyond opens, a missing one is ENOENT"
rebuilt() { ls_cut; [ "$(builds)" -ge 2 ]; }
wait_for 30 rebuilt || fail "the listing was not rebuilt after entry_ttl"
[ "$(grep -c "/x/big has more than 1000 entries" "$T/tierd.log" || true)" = 1 ] ||
  fail "the cut is not logged exactly once: $(grep -c "has more than" "$T/tierd.log" || true) times"
ok "the cut is logged once per directory ($(builds) builds)"
stop_tierd
echo "PASS"
