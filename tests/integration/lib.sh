# SPDX-License-Identifier: Apache-2.0
# lib.sh - helpers shared by the shell integration tests that run tierd on a real FUSE mount.
# Source it after setting T (scratch dir), MNT (mount point), CONF (tierd.conf), SOCK (API
# socket) and TIERD (the binary); it sets PID and installs the EXIT trap that kills tierd,
# detaches the mount and removes T (kept with KEEP=1). No sleeps as synchronisation: every wait
# polls a condition with a deadline (wait_for).
# shellcheck shell=bash disable=SC2034
PID=

fail() { echo "FAIL: $*" >&2; [ -f "$T/tierd.log" ] && tail -30 "$T/tierd.log" >&2; exit 1; }
ok() { echo "ok: $*"; }

tierd_test_cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill -KILL "$PID" 2>/dev/null || true; fi
  if grep -qs " $MNT fuse" /proc/mounts; then umount -l "$MNT" 2>/dev/null || true; fi
  if declare -F extra_cleanup >/dev/null; then extra_cleanup; fi
  [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap tierd_test_cleanup EXIT

# poll CMD until it succeeds or SECS pass
wait_for() {
  local secs=$1; shift
  local deadline=$((SECONDS + secs))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

# statfs always reaches the daemon; stat may be served from the kernel's attribute cache
mounted() { stat -f "$MNT" >/dev/null 2>&1 && [ "$(stat -c %i "$MNT" 2>/dev/null)" = 1 ]; }

start_tierd() {
  "$TIERD" -c "$CONF" -f 2>>"$T/tierd.log" &
  PID=$!
  wait_for 30 mounted || fail "mount did not come up"
}

# SIGTERM must unmount cleanly and exit 0 (ASan's leak check runs at that exit)
stop_tierd() {
  kill -TERM "$PID"
  local rc=0
  wait "$PID" || rc=$?
  PID=
  [ $rc -eq 0 ] || fail "tierd exited with $rc after SIGTERM"
  ! grep -qs " $MNT fuse" /proc/mounts || fail "still mounted after SIGTERM"
}

api() { curl -sSf --unix-socket "$SOCK" "http://tierd$1"; }
fetches() { api /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"]["fetches"])'; }
