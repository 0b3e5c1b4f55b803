#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_noopen_fuse.sh - the no-open connection ([mount] no_open, src/fuse/fuse_noopen.c) on a
# REAL mount over a POSIX backend (run by CTest, label fuse; needs /dev/fuse and root).
#
#   no_open = on   /ds (read-cache, 300 ms TTLs) is bound from the private no-open mount over
#                  the main mount: a file read three times makes one OPEN on that connection
#                  (the ENOSYS that turns OPEN off) and none after it, the warm reads no READ
#                  either, the main connection no OPEN at all (GET /v1/stats "fuse_requests");
#                  a file replaced in the backend is read as the new version after
#                  revalidation and every read is exactly one version; a write-back namespace
#                  (/wb) and /.tierd/hints still work with the binds in place (OPEN on the main
#                  connection); the private no-open mount shows neither /wb nor
#                  /.tierd/hints; SIGTERM leaves no mount behind.
#                  Two first reads of a file replaced between their revalidations both
#                  return; SIGTERM while the ready thread is held before its first bind:
#                  exit 0, no mount left (both with the test builds' pause points).
#   no_open = off  the same reads open through the main connection, the no-open one sees
#                  nothing and is not mounted.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup noopen_fuse

mkdir -p "$DATA/ds" "$DATA/wb" "$MNT"
printf 'in the write-back namespace\n' >"$DATA/wb/y.txt"
head -c 300000 /dev/urandom >"$DATA/ds/x.bin"
cp "$DATA/ds/x.bin" "$T/old.bin"
head -c 400000 /dev/urandom >"$T/new.bin"

conf() { # NO_OPEN
  {
    tierd_conf_section daemon "log_level = info"
    tierd_conf_section cache "ram_size = 64M" "block_size = 64K"
    tierd_conf_posix warm "$DATA"
    tierd_conf_ns /ds warm "prefix = ds" "attr_ttl = 300ms" "entry_ttl = 300ms"
    tierd_conf_ns /wb warm "prefix = wb" "mode = write-back"
    tierd_conf_section writeback "spool_dir = $T/spool" "upload_threads = 1"
    tierd_conf_mount "$MNT" "no_open = $1"
    tierd_conf_api "$SOCK"
  } >"$CONF"
}
count() { # CONNECTION FIELD: the requests of that kind the connection received
  api /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["fuse_requests"][sys.argv[1]][sys.argv[2]])' "$1" "$2"
}
mounts_under_t() { grep -c " $T/" /proc/mounts || true; }

conf on
start_tierd
ok "mounted (no_open = on)"
grep -qs " $MNT/ds fuse" /proc/mounts || fail "/ds is not bound over the mount: $(grep " $T/" /proc/mounts)"
grep -qs " $T/noopen.mnt fuse" /proc/mounts || fail "the no-open mount is not at $T/noopen.mnt"
! grep -qs " $MNT/wb fuse" /proc/mounts || fail "the write-back namespace /wb is bound to the no-open mount"
ok "/ds bound from $T/noopen.mnt, /wb not"

cmp -s "$MNT/ds/x.bin" "$T/old.bin" || fail "first read of /ds/x.bin"
o0=$(count no_open open) r0=$(count no_open read)
[ "$o0" -le 1 ] || fail "the no-open connection received $o0 OPENs for one file (want at most the one ENOSYS)"
[ "$r0" -ge 1 ] || fail "the first read of /ds/x.bin did not reach the no-open connection (reads $r0)"
cmp -s "$MNT/ds/x.bin" "$T/old.bin" || fail "second read of /ds/x.bin"
cmp -s "$MNT/ds/x.bin" "$T/old.bin" || fail "third read of /ds/x.bin"
o1=$(count no_open open) r1=$(count no_open read) m1=$(count main open)
[ "$o1" = "$o0" ] || fail "two warm reads made $((o1 - o0)) OPEN requests on the no-open connection (want 0)"
[ "$r1" = "$r0" ] || fail "two warm reads made $((r1 - r0)) READ requests (want 0: the page cache is kept)"
[ "$m1" = 0 ] || fail "reads of /ds made $m1 OPEN requests on the main connection (want 0)"
[ "$(count no_open release)" = 0 ] || fail "the no-open connection received RELEASE requests"
ok "a warm file read twice: 0 OPEN, 0 READ, 0 RELEASE"

# the private no-open mount serves only what is bound from it (and .tierd/datasets)
P="$T/noopen.mnt"
ls -a "$P" >"$T/side_root.txt" || fail "listing the no-open mount's root"
grep -qx ds "$T/side_root.txt" || fail "the no-open mount's root does not list ds: $(cat "$T/side_root.txt")"
! grep -qx wb "$T/side_root.txt" || fail "the no-open mount's root lists the write-back namespace wb"
! stat "$P/wb/y.txt" >/dev/null 2>&1 || fail "the no-open mount serves the write-back namespace's $P/wb/y.txt"
! stat "$P/wb" >/dev/null 2>&1 || fail "the no-open mount has the write-back namespace $P/wb"
ls -a "$P/.tierd" >"$T/side_ctl.txt" || fail "listing the no-open mount's .tierd"
! grep -qx hints "$T/side_ctl.txt" || fail "the no-open mount lists .tierd/hints: $(cat "$T/side_ctl.txt")"
! stat "$P/.tierd/hints" >/dev/null 2>&1 || fail "the no-open mount has .tierd/hints"
ok "the no-open mount shows no write-back namespace and no .tierd/hints"

# no OPEN can refuse a truncating open here: the kernel must ask (setattr, EROFS), even root
if : >"$MNT/ds/x.bin" 2>/dev/null; then fail "a truncating open of a read-cache file succeeded"; fi
cmp -s "$MNT/ds/x.bin" "$T/old.bin" || fail "/ds/x.bin changed after a refused truncating open ($(stat -c %s "$MNT/ds/x.bin") bytes)"
ok "a truncating open of a read-cache file fails (EROFS) and the file reads whole"

replace_and_read_new "$MNT/ds/x.bin" "/ds (attr_ttl 300ms)"
[ "$(count no_open open)" = "$o0" ] || fail "the replacement's reads made OPEN requests on the no-open connection"
ok "the replacement read as the new version after $READS reads, every read exactly one version"

printf 'written through the main connection\n' >"$MNT/wb/f.txt" || fail "write into /wb"
[ "$(cat "$MNT/wb/f.txt")" = "written through the main connection" ] || fail "/wb/f.txt reads back wrong"
[ "$(count main open)" -ge 1 ] || fail "the write-back file was not opened through the main connection"
printf '%s\n' "/ds/x.bin" >"$MNT/.tierd/hints/e1" || fail "writing .tierd/hints/e1"
api /v1/hints | grep -q '"e1"' || fail "the hint set e1 is not there: $(api /v1/hints)"
ok "the write-back namespace and .tierd/hints work beside the binds"

stop_tierd
[ "$(mounts_under_t)" = 0 ] || fail "mounts left after SIGTERM: $(grep " $T/" /proc/mounts)"
ok "SIGTERM: no mount left"

conf off
start_tierd
ok "mounted (no_open = off)"
! grep -qs " $T/noopen.mnt fuse" /proc/mounts || fail "no_open = off mounted the no-open connection"
cmp -s "$MNT/ds/x.bin" "$T/new.bin" || fail "read of /ds/x.bin with no_open = off"
cmp -s "$MNT/ds/x.bin" "$T/new.bin" || fail "second read of /ds/x.bin with no_open = off"
[ "$(count main open)" -ge 2 ] || fail "no_open = off: $(count main open) OPENs on the main connection for two reads (want 2)"
[ "$(count no_open open)" = 0 ] || fail "no_open = off: the no-open connection counted requests"
stop_tierd
[ "$(mounts_under_t)" = 0 ] || fail "mounts left after SIGTERM (no_open = off): $(grep " $T/" /proc/mounts)"
ok "no_open = off: every open through the main connection, as before"

# Two first reads of a file replaced between their revalidations (the test builds' pause point
# "noopen first read pause PID" holds B's first read before its revalidation while A's first read
# takes the old version): B's revalidation switches the version, and its read still returns (the
# inode's invalidation, which waits for the page B's READ holds locked, is not sent by B's worker)
head -c $((16 << 20)) /dev/urandom >"$DATA/ds/z.bin"
FAULT=$T/fault
: >"$FAULT"
conf on
TIERD_TEST_FAULT_FILE=$FAULT start_tierd
if grep -q "TIERD_TEST_FAULT_FILE=$FAULT" "$T/tierd.log"; then
  # one page at OFFSET of FILE, without readahead (no other page locked), after a line on stdin
  page='import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_RANDOM); sys.stdin.readline(); os.pread(fd,4096,int(sys.argv[2]))'
  mkfifo "$T/go"
  python3 -c "$page" "$MNT/ds/z.bin" 0 <"$T/go" &
  B=$!
  printf 'noopen first read pause %d\n' "$B" >"$FAULT"
  echo go >"$T/go"
  bheld() { [ -e "$FAULT.paused" ]; }
  wait_for 120 bheld || fail "B's first read did not pause"
  echo | python3 -c "$page" "$MNT/ds/z.bin" $((8 << 20)) || fail "A's first read of /ds/z.bin"
  head -c $((8 << 20)) /dev/urandom >"$DATA/ds/z.new"
  mv "$DATA/ds/z.new" "$DATA/ds/z.bin"
  sleep 1 # the node's attributes (attr_ttl 300ms) lapse: B's revalidation asks the backend
  : >"$FAULT"
  bdone() { ! kill -0 "$B" 2>/dev/null; }
  wait_for 120 bdone || fail "B's first read hangs after the version switch it made"
  wait "$B" || fail "B's first read failed"
  ok "two first reads, the file replaced between their revalidations: both return"
else
  echo "skip: no test hooks in this build (two first reads)"
fi
stop_tierd

# SIGTERM while the binds are being made (the test builds' TIERD_TEST_FAULT_FILE saying "noopen
# bind pause" holds the ready thread before its first bind): tierd exits 0 (ASan: no use of the
# freed bind state), leaving no mount, once the bind goes on
echo "noopen bind pause" >"$FAULT"
conf on
TIERD_TEST_FAULT_FILE=$FAULT start_tierd
if grep -q "TIERD_TEST_FAULT_FILE=$FAULT" "$T/tierd.log"; then
  held() { [ -e "$FAULT.paused" ]; }
  wait_for 120 held || fail "the ready thread did not pause before its first bind"
  kill -TERM "$PID"
  stopping() { grep -q "no-open connection: binds detached" "$T/tierd.log"; }
  wait_for 120 stopping || fail "SIGTERM did not stop the no-open connection while a bind was held"
  rm -f "$FAULT" # the bind goes on, into the stop
  gone() { ! kill -0 "$PID" 2>/dev/null; }
  wait_for 120 gone || fail "tierd did not exit after SIGTERM during the binds"
  rc=0
  wait "$PID" || rc=$?
  PID=
  [ "$rc" = 0 ] || fail "tierd exited with $rc after SIGTERM during the binds"
  [ "$(mounts_under_t)" = 0 ] || fail "mounts left after SIGTERM during the binds: $(grep " $T/" /proc/mounts)"
  ok "SIGTERM during the binds: exit 0, no mount left"
else
  stop_tierd
  echo "skip: no test hooks in this build (SIGTERM during the binds)"
fi

ok "noopen_fuse passed"
