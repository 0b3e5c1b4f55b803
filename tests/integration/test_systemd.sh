#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_systemd.sh - tierd as a systemd service (docs/SYSTEMD.md; CTest label fuse), without a
# running systemd: what systemd would see.
#   - contrib/systemd/tierd.service and tierd@.service pass `systemd-analyze verify` (with the
#     binaries' paths pointed at this build);
#   - readiness: tierd started with a NOTIFY_SOCKET this test listens on sends READY=1 (with a
#     STATUS), and at the moment it arrives the mount answers statfs and the API answers; on
#     SIGTERM it sends STOPPING=1 and exits 0;
#   - under the journal (JOURNAL_STREAM naming its stderr) each log line starts with its syslog
#     priority ("<6>" info) and has no timestamp of its own;
#   - one version: tierd --version, tierctl --version and GET /v1/status say the build's;
#   - tierctl reload: a new log_level and [policy] sections apply, a changed namespace is named
#     as needing a restart, a broken config changes nothing and says FILE:LINE;
#   - tierd --unmount detaches the dead mount a SIGKILLed tierd left, and leaves a live one alone.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup systemd
SRC=${TIER_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
[ "$(id -u)" = 0 ] || fail "needs root (FUSE)"
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (scripts/deps.sh)"
mkdir -p "$DATA/ds" "$MNT" "$T/units"
echo hello >"$DATA/ds/a.txt"

for u in tierd.service tierd@.service; do
  sed "s|/usr/bin/tierd|$TIERD|g; s|/usr/bin/tierctl|$TIERCTL|g" "$SRC/contrib/systemd/$u" >"$T/units/$u"
done
cp "$T/units/tierd@.service" "$T/units/tierd@node1.service"
systemd-analyze verify --man=no "$T/units/tierd.service" "$T/units/tierd@node1.service" >"$T/verify" 2>&1 ||
  fail "systemd-analyze verify: $(cat "$T/verify")"
ok "the units pass systemd-analyze verify"

write_conf() {
  {
    tierd_conf_posix warm "$DATA"
    tierd_conf_ns "${1:-/ds}" warm "prefix = ds"
    tierd_conf_section daemon "log_level = ${2:-info}"
    tierd_conf_section cache "ram_size = 16M" "block_size = 1M"
    tierd_conf_mount "$MNT"
    tierd_conf_api "$SOCK"
    [ -z "${3:-}" ] || tierd_conf_section "policy $3" "namespace = ${1:-/ds}" "action = pin"
  } >"$CONF"
}
write_conf /ds info first # a policy: the engine runs (a reload replaces its rules)

export T MNT SOCK TIERD TIERCTL CONF
python3 - <<'PY' || fail "readiness"
import os, socket, subprocess, sys, time
T, MNT, SOCK, TIERD, TIERCTL, CONF = (os.environ[k] for k in
                                      ("T", "MNT", "SOCK", "TIERD", "TIERCTL", "CONF"))
ns = T + "/notify.sock"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(ns)
s.settimeout(60)
log = open(T + "/tierd.log", "a")
env = dict(os.environ, NOTIFY_SOCKET=ns)
p = subprocess.Popen([TIERD, "-f", "-c", CONF], env=env, stderr=log, stdout=log)
import atexit
atexit.register(lambda: p.poll() is None and (p.kill(), p.wait()))  # never left running
msgs = []
while True:
    try:
        m = s.recv(4096).decode()
    except socket.timeout:
        sys.exit("FAIL: no READY=1 within 60 s: " + repr(msgs))
    msgs.append(m)
    if "READY=1" in m.split("\n"):
        break
# the moment READY=1 arrives: the mount answers (statfs reaches the daemon) and so does the API
try:
    os.statvfs(MNT)
    if os.stat(MNT).st_ino != 1:
        sys.exit("FAIL: READY=1 before the mount was there")
except OSError as e:
    sys.exit(f"FAIL: READY=1 but the mount does not answer: {e}")
r = subprocess.run([TIERCTL, "-s", SOCK, "status"], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit("FAIL: READY=1 but the API does not answer: " + r.stdout + r.stderr)
if not any(l.startswith("STATUS=serving 1 namespace") for m in msgs for l in m.split("\n")):
    sys.exit("FAIL: no STATUS with READY: " + repr(msgs))
if open(MNT + "/ds/a.txt").read() != "hello\n":
    sys.exit("FAIL: the mount serves wrong bytes")
p.terminate()
stopping = False
while not stopping:
    try:
        stopping = "STOPPING=1" in s.recv(4096).decode().split("\n")
    except socket.timeout:
        sys.exit("FAIL: no STOPPING=1 within 60 s of SIGTERM")
if p.wait(timeout=60) != 0:
    sys.exit(f"FAIL: tierd exited {p.returncode} after SIGTERM")
print("ok: READY=1 (with STATUS) only with the mount and the API answering; STOPPING=1 and exit 0 on SIGTERM")
PY

# under the journal: priorities, no timestamps
: >"$T/journal.log"
JS=$(stat -c '%d:%i' "$T/journal.log")
JOURNAL_STREAM=$JS "$TIERD" -f -c "$CONF" 2>>"$T/journal.log" &
PID=$!
TIERD_PID=$PID
tierd_up "$MNT" "" 30 || fail "mount did not come up (journal run)"
grep -q '^<6>main.c:[0-9]*: tierd: serving 1 namespace' "$T/journal.log" ||
  fail "no '<6>' priority line under the journal: $(head -3 "$T/journal.log")"
if grep -qE '^[0-9]{2}:[0-9]{2}:[0-9]{2}' "$T/journal.log"; then fail "timestamps under the journal"; fi
ok "under the journal: syslog priorities, no timestamps"

# one version
want=$(sed -n 's/^project(tierd VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ "$("$TIERD" --version)" = "tierd $want" ] || fail "tierd --version: $("$TIERD" --version), want $want"
"$TIERCTL" --version | grep -qx "tierctl $want" || fail "tierctl --version: $("$TIERCTL" --version)"
v=$(api /v1/status | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
[ "$v" = "$want" ] || fail "GET /v1/status says version $v, want $want"
ok "one version ($want): tierd --version, tierctl --version, GET /v1/status"

# reload
write_conf /ds debug keep-all
out=$("$TIERCTL" -s "$SOCK" reload) || fail "reload: $out"
echo "$out" | grep -q "applied: \[daemon\] log_level" || fail "reload did not apply log_level: $out"
echo "$out" | grep -q "applied: \[policy\] sections" || fail "reload did not apply the policies: $out"
st=$("$TIERCTL" -s "$SOCK" policy status)
echo "$st" | grep -q "^keep-all " && ! echo "$st" | grep -q "^first " ||
  fail "the reloaded rules are not keep-all alone: $st"
write_conf /other debug keep-all
sed -i 's/^ram_size = 16M$/ram_size = 24M/' "$CONF"
out=$("$TIERCTL" -s "$SOCK" reload) || fail "reload with a new namespace: $out"
echo "$out" | grep -q "needs a restart: \[namespace /other\]" &&
  echo "$out" | grep -q "needs a restart: \[namespace /ds\]" &&
  echo "$out" | grep -q "needs a restart: \[cache\]" &&
  echo "$out" | grep -q "needs a restart: \[policy\] sections (not applied" ||
  fail "the sections that changed are not named as needing a restart: $out"
! echo "$out" | grep -q "needs a restart: \[daemon\]" || fail "a log_level change named as needing a restart: $out"
echo "[daemon]" >>"$CONF"
rc=0
out=$("$TIERCTL" -s "$SOCK" reload 2>&1) || rc=$?
[ "$rc" != 0 ] && echo "$out" | grep -q "tierd.conf:[0-9]*: duplicate section \[daemon\]" &&
  echo "$out" | grep -q "nothing was changed" || fail "a broken config on reload: exit $rc: $out"
[ "$(cat "$MNT/ds/a.txt")" = hello ] || fail "the mount changed after the refused reload"
ok "reload: log_level and [policy] applied live, a new namespace needs a restart, a broken config changes nothing (FILE:LINE)"

# --unmount: a live mount is left alone; the dead one a SIGKILL leaves is detached
write_conf /ds info first
"$TIERD" --unmount -c "$CONF" || fail "tierd --unmount with a live tierd"
mounted || fail "tierd --unmount detached a live mount"
crash_tierd
grep -qs " $MNT fuse" /proc/mounts || fail "no dead mount after SIGKILL (the test needs one)"
"$TIERD" --unmount -c "$CONF" || fail "tierd --unmount of the dead mount failed"
! grep -qs " $MNT fuse" /proc/mounts || fail "the dead mount is still there after tierd --unmount"
ok "tierd --unmount: a live mount left alone, a dead one detached"
echo PASS
