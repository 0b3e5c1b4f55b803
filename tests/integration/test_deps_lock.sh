#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_deps_lock.sh - scripts/deps.sh waits for another apt process's locks instead of failing
# (CTest deps_lock, label fuse: it needs root; RESOURCE_LOCK dpkg). The real apt-get, real fcntl
# locks (as apt takes them), no network, nothing installed:
#   - dpkg-query is a stand-in that reports one package missing, so deps.sh goes to apt;
#   - apt-get is the real one, run so it changes nothing: update on a private lists and cache
#     directory with no sources (its lists' lock is $T/lists/lock, held by the test instead of
#     the system's), install printing dpkg's calls instead of running them
#     (Debug::pkgDPkgPm) and upgrading nothing (--no-upgrade; every package is installed);
#   - with the lists' lock held, deps.sh's apt-get update waits (it says so) instead of
#     failing; released, update runs, and apt-get install waits for /var/lib/dpkg/lock-frontend,
#     held too ("Waiting for cache lock"); released, install fails on
#     /var/cache/apt/archives/lock (held as apt-daily's download step holds it; apt takes it with
#     no timeout), and deps.sh runs it again (it says so); released, deps.sh ends 0 with nothing
#     installed. deps.sh runs in a German locale (built under $T with localedef where the
#     system has the de_DE source and apt's catalogue): the messages it reads are apt's English.
set -euo pipefail
SRC=${TIER_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=scripts/lib/tierd.sh
. "$SRC/scripts/lib/tierd.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" = 0 ] || fail "needs root (the dpkg lock)"
T=$(mktemp -d "${TIER_TEST_TMP:-/tmp}/deps_lock.XXXXXX")
DEPS_PID=
HOLD_PIDS=
cleanup() {
  exec 7>&- 8>&- 9>&- || true
  [ -z "$DEPS_PID" ] || kill "$DEPS_PID" 2>/dev/null || true
  for p in $HOLD_PIDS; do kill "$p" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

mkdir -p "$T/stub" "$T/lists/partial" "$T/cache/archives/partial" "$T/none"
cat >"$T/stub/dpkg-query" <<'SH'
#!/bin/sh
# every package installed but xxd
case "$*" in *" xxd") echo "unknown ok not-installed" ;; *) echo "install ok installed" ;; esac
SH
cat >"$T/stub/apt-get" <<SH
#!/bin/sh
case " \$* " in
*" update "*) exec /usr/bin/apt-get -o Dir::State::Lists=$T/lists -o Dir::Cache=$T/cache \\
  -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$T/none "\$@" ;;
*" install "*) exec /usr/bin/apt-get -o Debug::pkgDPkgPm=true --no-upgrade "\$@" ;;
esac
echo "unexpected apt-get \$*" >&2
exit 99
SH
chmod 0755 "$T/stub/dpkg-query" "$T/stub/apt-get"

# hold LOCKFILE as apt does (fcntl, whole file) until the fifo FIFO is closed
hold() {
  mkfifo "$2"
  python3 -c 'import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
sys.stdin.read()' "$1" <"$2" >"$2.out" 2>&1 &
  HOLD_PIDS="$HOLD_PIDS $!"
}
hold "$T/lists/lock" "$T/lists.fifo"
hold /var/lib/dpkg/lock-frontend "$T/dpkg.fifo"
hold /var/cache/apt/archives/lock "$T/archives.fifo"
exec 7>"$T/lists.fifo" 8>"$T/dpkg.fifo" 9>"$T/archives.fifo"
held() { grep -qx held "$T/lists.fifo.out" && grep -qx held "$T/dpkg.fifo.out" && grep -qx held "$T/archives.fifo.out"; }
tierd_poll 30 held ||
  fail "could not take the locks: $(cat "$T/lists.fifo.out" "$T/dpkg.fifo.out" "$T/archives.fifo.out")"

# a German locale of our own (LOCPATH: nothing installed), in which apt speaks German
LOC=()
mkdir -p "$T/locale"
localedef -i de_DE -f UTF-8 "$T/locale/de_DE.UTF-8" >/dev/null 2>&1 || true
if [[ $(LOCPATH=$T/locale LC_ALL=de_DE.UTF-8 /usr/bin/apt-get no-such-command 2>&1) == *Ungültige* ]]; then
  LOC=(LOCPATH="$T/locale" LC_ALL=de_DE.UTF-8 LANG=de_DE.UTF-8)
else
  echo "note: no German apt messages here (localedef, apt's catalogue): deps.sh runs in the test's locale"
fi
env "${LOC[@]}" PATH="$T/stub:$PATH" "$SRC/scripts/deps.sh" >"$T/deps.log" 2>&1 7>&- 8>&- 9>&- &
DEPS_PID=$!
gone() { ! kill -0 "$DEPS_PID" 2>/dev/null; }
says() { grep -qF "$1" "$T/deps.log"; }
waits_update() { says "deps: apt-get update: another apt process holds a lock" || gone; }
tierd_poll 120 waits_update && ! gone ||
  fail "deps.sh did not wait for the lists' lock (apt-get update): $(tail -5 "$T/deps.log")"
ok "apt-get update: deps.sh waits while another process holds the package lists' lock"
exec 7>&- # the lists' lock released
waits_install() { says "Waiting for cache lock: Could not get lock /var/lib/dpkg/lock-frontend" || gone; }
tierd_poll 120 waits_install && ! gone ||
  fail "apt-get install did not wait for the dpkg lock: $(tail -5 "$T/deps.log")"
ok "apt-get install: waits while another process holds /var/lib/dpkg/lock-frontend"
exec 8>&- # the dpkg lock released
waits_archives() { says "deps: apt-get install: another apt process holds a lock" || gone; }
tierd_poll 120 waits_archives && ! gone ||
  fail "deps.sh did not retry while /var/cache/apt/archives/lock is held: $(tail -5 "$T/deps.log")"
says "Could not get lock /var/cache/apt/archives/lock" ||
  fail "apt-get install did not stop at /var/cache/apt/archives/lock: $(tail -5 "$T/deps.log")"
ok "apt-get install: deps.sh runs it again while another process holds /var/cache/apt/archives/lock"
exec 9>&- # the archives' lock released
rc=0
wait "$DEPS_PID" || rc=$?
DEPS_PID=
[ "$rc" = 0 ] || fail "deps.sh exited $rc once the locks were free: $(tail -5 "$T/deps.log")"
says "0 newly installed" || fail "deps.sh's install changed something: $(tail -5 "$T/deps.log")"
ok "once the locks are free deps.sh completes (exit 0, nothing installed)"
echo PASS
