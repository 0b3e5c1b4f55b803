#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_systemd.sh - tierd as a systemd service (docs/SYSTEMD.md; CTest label fuse), without a
# running systemd: what systemd would see.
#   - contrib/systemd/tierd.service and tierd@.service pass `systemd-analyze verify` (with the
#     binaries' paths pointed at this build);
#   - hardening: `systemd-analyze security --offline=yes` scores each unit at or below 5.0, with
#     every namespace type, suid/sgid files, writable-executable memory, personality changes,
#     realtime, foreign ABIs, exotic address families and the syscall groups @clock, @debug,
#     @module, @obsolete, @raw-io, @reboot, @swap, @cpu-emulation denied, and every capability
#     dropped but the five the unit keeps (the rest of the table is left as it is);
#   - the capabilities the units keep are enough: every tierd below runs with exactly their
#     CapabilityBoundingSet (setpriv) and still mounts, serves a file only its owner (nobody)
#     may read, gives the API socket its socket_group, and can read a job's environment;
#   - the system calls tierd makes (strace: start, mount, reads, API, reload, SIGTERM, and
#     tierd --unmount) are all in the units' SystemCallFilter (@system-service @mount), its
#     sockets in RestrictAddressFamilies, its devices in DeviceAllow (with the standard pseudo
#     devices), no writable-executable mapping (MemoryDenyWriteExecute), no new namespace.
#     No systemd runs here (PID 1 is not systemd), so these are what systemd would enforce,
#     checked against what tierd does; the seccomp filter itself is not applied;
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
# readable by its owner alone: tierd serves it only with CAP_DAC_OVERRIDE
echo private >"$DATA/ds/nobody.txt"
chown 65534:65534 "$DATA/ds/nobody.txt"
chmod 0600 "$DATA/ds/nobody.txt"

for u in tierd.service tierd@.service; do
  sed "s|/usr/bin/tierd|$TIERD|g; s|/usr/bin/tierctl|$TIERCTL|g" "$SRC/contrib/systemd/$u" >"$T/units/$u"
done
cp "$T/units/tierd@.service" "$T/units/tierd@node1.service"
systemd-analyze verify --man=no "$T/units/tierd.service" "$T/units/tierd@node1.service" >"$T/verify" 2>&1 ||
  fail "systemd-analyze verify: $(cat "$T/verify")"
ok "the units pass systemd-analyze verify"

# ---- hardening: what systemd-analyze security says of the units ----------------------------------
for u in tierd.service tierd@node1.service; do
  systemd-analyze security --offline=yes "$T/units/$u" >"$T/security.txt" 2>&1 || true
  score=$(sed -n 's/^→ Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$T/security.txt")
  [ -n "$score" ] || fail "systemd-analyze security gave no score for $u: $(tail -5 "$T/security.txt")"
  systemd-analyze security --offline=yes --threshold=50 "$T/units/$u" >/dev/null 2>&1 ||
    fail "$u: exposure $score, above 5.0: $(grep '✗' "$T/security.txt")"
  systemd-analyze security --offline=yes --json=short "$T/units/$u" >"$T/security.json" 2>&1 ||
    fail "systemd-analyze security --json: $(head -c 500 "$T/security.json")"
  python3 - "$T/security.json" "$u" <<'PY' || fail "systemd-analyze security of $u"
import json, sys
rows = {r["name"]: r["set"] for r in json.load(open(sys.argv[1]))}
must = ["RestrictSUIDSGID=", "MemoryDenyWriteExecute=", "LockPersonality=", "RestrictRealtime=",
        "SystemCallArchitectures=", "ProtectClock=", "RestrictAddressFamilies=~AF_PACKET",
        "RestrictAddressFamilies=~AF_NETLINK", "RestrictAddressFamilies=~…"]
must += [n for n in rows if n.startswith("RestrictNamespaces=~")]
must += ["SystemCallFilter=~@" + g for g in ("clock", "cpu-emulation", "debug", "module",
                                              "obsolete", "raw-io", "reboot", "swap")]
kept = {"CapabilityBoundingSet=~CAP_SYS_ADMIN", "CapabilityBoundingSet=~CAP_(DAC_*|FOWNER|IPC_OWNER)",
        "CapabilityBoundingSet=~CAP_SYS_PTRACE", "CapabilityBoundingSet=~CAP_(CHOWN|FSETID|SETFCAP)"}
caps = [n for n in rows if n.startswith("CapabilityBoundingSet=~")]
must += [n for n in caps if n not in kept]
if len([n for n in rows if n.startswith("RestrictNamespaces=~")]) < 7 or len(caps) < 20:
    sys.exit(f"FAIL: the analysis has fewer rows than systemd 252's: {sorted(rows)}")
bad = [n for n in must if rows.get(n) is not True]
bad += [n for n in kept if rows.get(n) is not False]  # the four kept: nothing more dropped
if bad:
    sys.exit(f"FAIL: {sys.argv[2]}: not as the unit means them: {bad}")
PY
  echo "ok: $u: exposure $score (at most 5.0), each hardening setting on"
done

# the capabilities both units keep, as setpriv takes them
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$T/units/tierd.service")
[ -n "$caps" ] && [ "$caps" = "$(sed -n 's/^CapabilityBoundingSet=//p' "$T/units/tierd@node1.service")" ] ||
  fail "the units keep different capabilities: '$caps'"
CAPS=-all
for c in $caps; do
  c=${c#CAP_}
  CAPS="$CAPS,+${c,,}"
done
# a job's process of another user: tierd reads its environment (SLURM_JOB_ID) under those caps
env SLURM_JOB_ID=77 setpriv --reuid=65534 --regid=65534 --clear-groups sleep 600 >/dev/null 2>&1 &
JOBPID=$!
extra_cleanup() { kill "$JOBPID" 2>/dev/null || true; }
is_nobody() { [ "$(stat -c %u "/proc/$JOBPID")" = 65534 ] && [ "$(cat "/proc/$JOBPID/comm")" = sleep ]; }
wait_for 10 is_nobody || fail "the nobody process did not start"
setpriv --bounding-set "$CAPS" cat "/proc/$JOBPID/environ" 2>"$T/environ.err" | tr '\0' '\n' |
  grep -qx SLURM_JOB_ID=77 || fail "another user's /proc/PID/environ is not readable with $caps: $(cat "$T/environ.err")"
kill "$JOBPID"
wait "$JOBPID" 2>/dev/null || true
ok "with the units' capabilities ($caps) another user's job environment is readable"

write_conf() {
  {
    tierd_conf_posix warm "$DATA"
    tierd_conf_ns "${1:-/ds}" warm "prefix = ds"
    tierd_conf_section daemon "log_level = ${2:-info}"
    tierd_conf_section cache "ram_size = 16M" "block_size = 1M"
    tierd_conf_mount "$MNT"
    tierd_conf_api "$SOCK" "socket_group = nogroup"
    [ -z "${3:-}" ] || tierd_conf_section "policy $3" "namespace = ${1:-/ds}" "action = pin"
  } >"$CONF"
}
write_conf /ds info first # a policy: the engine runs (a reload replaces its rules)

export T MNT SOCK TIERD TIERCTL CONF CAPS
python3 - <<'PY' || fail "readiness"
import os, socket, subprocess, sys, time
T, MNT, SOCK, TIERD, TIERCTL, CONF, CAPS = (os.environ[k] for k in
                                            ("T", "MNT", "SOCK", "TIERD", "TIERCTL", "CONF", "CAPS"))
ns = T + "/notify.sock"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(ns)
s.settimeout(60)
log = open(T + "/tierd.log", "a")
env = dict(os.environ, NOTIFY_SOCKET=ns)
# with the units' capability bounding set (setpriv execs tierd: p is tierd)
p = subprocess.Popen(["setpriv", "--bounding-set", CAPS, TIERD, "-f", "-c", CONF], env=env,
                     stderr=log, stdout=log)
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
try:
    if open(MNT + "/ds/nobody.txt").read() != "private\n":
        sys.exit("FAIL: the mount serves wrong bytes of nobody's 0600 file")
except OSError as e:
    sys.exit(f"FAIL: with the units' capabilities tierd cannot serve nobody's 0600 file: {e}")
if os.stat(SOCK).st_gid != 65534:
    sys.exit(f"FAIL: the API socket's group is {os.stat(SOCK).st_gid}, not socket_group nogroup")
p.terminate()
stopping = False
while not stopping:
    try:
        stopping = "STOPPING=1" in s.recv(4096).decode().split("\n")
    except socket.timeout:
        sys.exit("FAIL: no STOPPING=1 within 60 s of SIGTERM")
if p.wait(timeout=60) != 0:
    sys.exit(f"FAIL: tierd exited {p.returncode} after SIGTERM")
print("ok: READY=1 (with STATUS) only with the mount and the API answering; STOPPING=1 and exit 0 on SIGTERM;"
      " under the units' capabilities: nobody's 0600 file served, the socket's group set")
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
grep -q "applied: \[daemon\] log_level" <<<"$out" || fail "reload did not apply log_level: $out"
grep -q "applied: \[policy\] sections" <<<"$out" || fail "reload did not apply the policies: $out"
st=$("$TIERCTL" -s "$SOCK" policy status)
grep -q "^keep-all " <<<"$st" && ! grep -q "^first " <<<"$st" ||
  fail "the reloaded rules are not keep-all alone: $st"
write_conf /other debug keep-all
sed -i 's/^ram_size = 16M$/ram_size = 24M/' "$CONF"
out=$("$TIERCTL" -s "$SOCK" reload) || fail "reload with a new namespace: $out"
grep -q "needs a restart: \[namespace /other\]" <<<"$out" &&
  grep -q "needs a restart: \[namespace /ds\]" <<<"$out" &&
  grep -q "needs a restart: \[cache\]" <<<"$out" &&
  grep -q "needs a restart: \[policy\] sections (not applied" <<<"$out" ||
  fail "the sections that changed are not named as needing a restart: $out"
! grep -q "needs a restart: \[daemon\]" <<<"$out" || fail "a log_level change named as needing a restart: $out"
echo "[daemon]" >>"$CONF"
rc=0
out=$("$TIERCTL" -s "$SOCK" reload 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q "tierd.conf:[0-9]*: duplicate section \[daemon\]" <<<"$out" &&
  grep -q "nothing was changed" <<<"$out" || fail "a broken config on reload: exit $rc: $out"
[ "$(cat "$MNT/ds/a.txt")" = hello ] || fail "the mount changed after the refused reload"
ok "reload: log_level and [policy] applied live, a new namespace needs a restart, a broken config changes nothing (FILE:LINE)"

# --unmount: a live mount is left alone; the dead one a SIGKILL leaves is detached
write_conf /ds info first
"$TIERD" --unmount -c "$CONF" || fail "tierd --unmount with a live tierd"
mounted || fail "tierd --unmount detached a live mount"
crash_tierd
grep -qs " $MNT fuse" /proc/mounts || fail "no dead mount after SIGKILL (the test needs one)"
# (traced: ExecStopPost runs under the units' filters too; LeakSanitizer cannot run under ptrace)
ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 strace -f -qq -o "$T/strace.unmount" "$TIERD" --unmount -c "$CONF" || fail "tierd --unmount of the dead mount failed"
! grep -qs " $MNT fuse" /proc/mounts || fail "the dead mount is still there after tierd --unmount"
ok "tierd --unmount: a live mount left alone, a dead one detached"

# ---- what tierd does, against what the units allow -------------------------------------------------
# tierd under strace with the units' capabilities: start, mount, reads (one needing
# CAP_DAC_OVERRIDE), API, reload, SIGTERM. Every system call, socket family, device and mapping
# it used must be one the units allow.
command -v strace >/dev/null || fail "strace is missing (scripts/deps.sh)"
ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 strace -f -qq -o "$T/strace.run" setpriv --bounding-set "$CAPS" "$TIERD" -f -c "$CONF" 2>>"$T/tierd.log" &
TIERD_PID=$!
tierd_up "$MNT" "$SOCK" 60 || fail "tierd under strace did not come up"
PID=$(pgrep -P "$TIERD_PID") || fail "no tierd under strace"
[ "$(cat "$MNT/ds/a.txt" "$MNT/ds/nobody.txt")" = $'hello\nprivate' ] || fail "wrong bytes under strace"
ls -l "$MNT/ds" >/dev/null
"$TIERCTL" -s "$SOCK" status >/dev/null || fail "tierctl status under strace"
"$TIERCTL" -s "$SOCK" reload >/dev/null || fail "tierctl reload under strace"
kill -TERM "$PID"
wait "$TIERD_PID" || fail "tierd under strace exited $? on SIGTERM"
PID=
export T TIERD
python3 - "$T/units/tierd.service" <<'PY' || fail "tierd did something the units forbid"
import os, re, subprocess, sys
unit = {}
for line in open(sys.argv[1]):
    k, eq, v = line.strip().partition("=")
    if eq and not k.startswith("#"):
        unit.setdefault(k, []).extend(v.split())
# the syscall groups, expanded as this systemd defines them
out = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True).stdout
groups, cur = {}, None
for line in out.splitlines():
    if line.startswith("@"):
        cur = groups.setdefault(line.strip(), [])
    elif cur is not None and line.strip() and not line.strip().startswith("#"):
        cur.append(line.strip())
def expand(n):
    return set().union(*(expand(m) for m in groups[n])) if n.startswith("@") else {n}
allowed = set().union(*(expand(n) for n in unit["SystemCallFilter"]))
families = set(unit["RestrictAddressFamilies"])
devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}  # DevicePolicy=closed
devices |= {unit["DeviceAllow"][0]}  # ProtectClock adds the clock's (read-only), which tierd does not use
bad, calls = [], set()
tierd = os.environ["TIERD"]
for log in (os.environ["T"] + "/strace.run", os.environ["T"] + "/strace.unmount"):
    started = False
    for line in open(log):
        if not started:  # setpriv's own calls before it runs tierd are systemd's
            started = f'execve("{tierd}"' in line
            continue
        m = re.match(r"\d+\s+([a-z_0-9]+)\((.*)", line)
        if not m:
            continue
        name, args = m.groups()
        calls.add(name)
        if name not in allowed:
            bad.append(f"system call outside SystemCallFilter: {line.strip()[:160]}")
        if name in ("socket", "socketpair") and args.split(",")[0] not in families:
            bad.append(f"address family outside RestrictAddressFamilies: {line.strip()[:160]}")
        if (name in ("mmap", "mmap2") and "PROT_WRITE" in args and "PROT_EXEC" in args) or \
           (name in ("mprotect", "pkey_mprotect") and "PROT_EXEC" in args):
            bad.append(f"writable-executable memory (MemoryDenyWriteExecute): {line.strip()[:160]}")
        if name in ("unshare", "setns") or (name.startswith("clone") and "CLONE_NEW" in args):
            bad.append(f"a new namespace (RestrictNamespaces): {line.strip()[:160]}")
        d = re.search(r'"(/dev/[^"]*)"', args)
        if name in ("open", "openat", "openat2") and d and not d.group(1).startswith("/dev/shm/") \
                and d.group(1) not in devices and " = -1 " not in line:
            bad.append(f"a device outside DeviceAllow: {line.strip()[:160]}")
    if not started:
        sys.exit(f"FAIL: {log} has no execve of {tierd}")
for need in ("mount", "umount2", "socket", "openat"):
    if need not in calls:
        sys.exit(f"FAIL: the trace lacks {need}: it did not see tierd work ({sorted(calls)})")
if bad:
    sys.exit("FAIL:\n" + "\n".join(sorted(set(bad))))
print(f"ok: {len(calls)} distinct system calls, all in SystemCallFilter; sockets, devices, "
      "mappings and namespaces as the units allow")
PY
echo PASS
