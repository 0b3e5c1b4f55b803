# SPDX-License-Identifier: Apache-2.0
# lib.sh - helpers shared by the shell integration tests that run tierd on a real FUSE mount, on
# top of the project's shell library scripts/lib/tierd.sh (sourced here; its tierd_* functions
# are available too). Either set T (scratch dir), MNT (mount point), CONF (tierd.conf), SOCK (API
# socket) and TIERD (the binary) before sourcing it, or source it first and call
# `tierd_test_setup NAME`, which sets them (and BIN, TIERCTL, DATA). It sets PID and installs the
# EXIT trap that kills tierd, detaches the mount, runs extra_cleanup if the test defines it and
# removes T (kept with KEEP=1). fail stops the test at the first failed check, with the tail of
# $T/tierd.log. No sleeps as synchronisation: every wait polls a condition with a deadline
# (wait_for).
# shellcheck shell=bash disable=SC2034,SC2317
# shellcheck source=scripts/lib/tierd.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/tierd.sh"
PID=
# hermetic: a [daemon] section written with tierd_conf_section samples no GPU unless the test
# names gpu_sampling itself (test_gpu_fuse.sh), so a machine with an NVIDIA driver runs as any
TIERD_CONF_GPU=off

fail() { echo "FAIL: $*" >&2; [ -f "${T:-}/tierd.log" ] && tail -30 "$T/tierd.log" >&2; exit 1; }
ok() { echo "ok: $*"; }

tierd_test_cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill -KILL "$PID" 2>/dev/null || true; fi
  if [ -n "${MNT:-}" ] && grep -qs " $MNT fuse" /proc/mounts; then umount -l "$MNT" 2>/dev/null || true; fi
  # the no-open connection's private mount ([mount] no_open; its binds go with $MNT)
  if [ -n "${T:-}" ] && grep -qs " $T/noopen.mnt fuse" /proc/mounts; then umount -l "$T/noopen.mnt" 2>/dev/null || true; fi
  if declare -F extra_cleanup >/dev/null; then extra_cleanup; fi
  [ -n "${KEEP:-}" ] || [ -z "${T:-}" ] || rm -rf "$T"
}
trap tierd_test_cleanup EXIT

# tierd_test_setup NAME: the usual preamble of a test run by CTest. BIN is $TIER_BIN (the build
# directory, required), TIERD and TIERCTL its programs, T a new scratch directory NAME.XXXXXX
# under $TIER_TEST_TMP, DATA $T/data (for a POSIX backend), MNT, SOCK and CONF $T/mnt,
# $T/api.sock and $T/tierd.conf. Creates none of them but T.
tierd_test_setup() {
  BIN=${TIER_BIN:?TIER_BIN (the build directory) must be set}
  tierd_bins "$BIN"
  tierd_scratch "$1"
  DATA=$T/data
  tierd_places "$T"
}

# tierd_test_rgw_setup NAME: tierd_test_setup for a test of the rgw fixture: also CEPH (the
# fixture's directory, $TIER_CEPH_DIR), SRC (the source tree, $TIER_SRC or this checkout) and
# the RGW's S3_* settings and TIERD_S3_SIG (tierd_rgw_env)
tierd_test_rgw_setup() {
  CEPH=${TIER_CEPH_DIR:?TIER_CEPH_DIR must be set}
  SRC=${TIER_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
  tierd_rgw_env "$CEPH" || exit 1
  tierd_test_setup "$1"
}
# start RGW again (nothing if it runs): the extra_cleanup of a test that stops RGW, so that it
# never leaves it stopped for the tests after it
tierd_test_rgw_restart() { "$SRC/scripts/ceph.sh" start-rgw "$CEPH" >/dev/null 2>&1 || true; }

# wait_for SECS CMD...: poll CMD until it succeeds or SECS pass, SECS at least TIER_WAIT_MIN
# (default 120): a wait is for something that will happen, and a loaded CI machine (load 20 on 2
# cores) is slow, never a reason to fail; a wait that measures time is written out, not this
wait_for() {
  local secs=$1
  shift
  [ "$secs" -ge "${TIER_WAIT_MIN:-120}" ] || secs=${TIER_WAIT_MIN:-120}
  tierd_poll "$secs" "$@"
}

# kill_listed FILE: SIGKILL each pid listed in FILE (one a line) that is still one of this test's
# processes: its command line names $T. A pid listed long ago may belong to another test by now
# (pids are reused on a busy machine), and that one is left alone.
kill_listed() {
  local p
  [ -f "$1" ] || return 0
  while read -r p; do
    if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$T"; then
      kill -KILL "$p" 2>/dev/null || true
    fi
  done <"$1"
}

# statfs always reaches the daemon; stat may be served from the kernel's attribute cache
mounted() { tierd_mounted "$MNT"; }

# start tierd on $CONF (stderr appended to $T/tierd.log); fail unless $MNT comes up within 120 s
# (the wait ends early when tierd exits)
start_tierd() {
  tierd_spawn "$CONF" "$T/tierd.log"
  PID=$TIERD_PID
  tierd_up "$MNT" "" 120 || fail "mount did not come up"
}

# SIGTERM must unmount cleanly and exit 0 (ASan's leak check runs at that exit)
stop_tierd() {
  local rc=0
  tierd_stop "$PID" || rc=$?
  PID=
  [ $rc -eq 0 ] || fail "tierd exited with $rc after SIGTERM"
  ! grep -qs " $MNT fuse" /proc/mounts || fail "still mounted after SIGTERM"
}

# SIGKILL tierd and reap it: a crash (the mount is left dead; the next start_tierd clears it)
crash_tierd() {
  kill -KILL "$PID"
  wait "$PID" 2>/dev/null || true
  PID=
}

api() { tierd_api "$SOCK" "$1"; }

# Replace $DATA/ds/x.bin by $T/new.bin (a rename, as a store replaces an object atomically), then
# read PATH whole until it reads as $T/new.bin (at most 120 s): fails when a read returns neither
# $T/old.bin nor $T/new.bin (two versions mixed) or the new one is never seen. Sets READS, the
# reads it took. WHAT names the path in the messages.
replace_and_read_new() { # PATH WHAT
  local seen=0 deadline=$((SECONDS + 120))
  cp "$T/new.bin" "$DATA/ds/.x.tmp" && mv "$DATA/ds/.x.tmp" "$DATA/ds/x.bin"
  READS=0
  while [ $SECONDS -lt $deadline ]; do
    READS=$((READS + 1))
    if cat "$1" >"$T/got.bin" 2>/dev/null; then
      if cmp -s "$T/got.bin" "$T/new.bin"; then
        seen=1
        break
      fi
      cmp -s "$T/got.bin" "$T/old.bin" ||
        fail "a read of the replaced file $2 returned neither the old nor the new bytes ($(stat -c %s "$T/got.bin") bytes)"
    fi
  done
  [ "$seen" = 1 ] || fail "the replaced file was not seen through $2 within 120 s"
}
fetches() { api /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"]["fetches"])'; }
