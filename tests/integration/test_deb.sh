#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_deb.sh - the Debian package (docs/PACKAGING.md), on this machine, as root (CTest label
# fuse: it needs root; it installs and purges the package, and leaves the machine as it was):
#   - scripts/deb.sh builds tierd_<version>_<arch>.deb; lintian reports no error or warning;
#   - dpkg -i installs it: /usr/bin/tierd --version and tierctl --version give the build's
#     version, the man pages are found, /etc/tierd/tierd.conf is a conffile, the units are in
#     /lib/systemd/system, /var/cache/tierd exists with mode 0750;
#   - dpkg -r removes the programs and keeps the (edited) config; a reinstall keeps the edit;
#   - dpkg -r stops tierd.service and every tierd@NAME instance systemd has loaded (no systemd
#     runs here: the removal runs where /run/systemd/system exists, in a private mount
#     namespace, with stand-ins for systemctl, which lists two instances, and deb-systemd-invoke,
#     which records what it is asked to stop);
#   - a purge with a spool holding a staging file keeps /var/cache/tierd and names it; one with
#     data in the shipped backend directory keeps that; otherwise it removes config and state;
#   - a purge while tierds still run on /var/cache/tierd (one the package's binary, started by
#     hand so the removal did not stop it; one another copy with its journal there under the
#     directory's resolved name, /var/cache/tierd being a link to another directory; no staging
#     file yet), and while a process of another name has a file open there, removes nothing
#     there and names their pids;
#   - only on a machine where the package would touch nothing of a real install (else skipped).
set -euo pipefail
SRC=${TIER_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d "${TIER_TEST_TMP:-/tmp}/deb.XXXXXX")
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i)"
# Only on a machine where tierd's package would touch nothing of someone else's: no tierd
# package, no tierd installed from source, none of the paths the package owns or purges.
# Otherwise the test is skipped (77: CTest's SKIP_RETURN_CODE), never run over a real install.
if dpkg-query -W -f='${Status}' tierd 2>/dev/null | grep -q "installed\|config-files"; then
  echo "SKIP: a tierd package is on this machine (the test would replace and purge it)"
  exit 77
fi
for p in /etc/tierd /var/lib/tierd /var/cache/tierd /usr/bin/tierd /usr/bin/tierctl \
  /usr/bin/tierbench /lib/systemd/system/tierd.service /lib/systemd/system/tierd@.service; do
  if [ -e "$p" ]; then
    echo "SKIP: $p exists (a tierd installed otherwise): the package test would replace or purge it"
    exit 77
  fi
done
export DEBIAN_FRONTEND=noninteractive
dpkg() { command dpkg --force-confdef --force-confold "$@"; }
TIERD_PIDS=
READER_PID=
cleanup() {
  for p in $TIERD_PIDS $READER_PID; do kill "$p" 2>/dev/null || true; done
  for p in $TIERD_PIDS; do wait "$p" 2>/dev/null || true; done
  for m in "$T/mnt1" "$T/mnt2" "$T/noopen.mnt"; do # noopen.mnt: [mount] no_open's mount
    if grep -qs " $m fuse" /proc/mounts; then umount -l "$m" 2>/dev/null || true; fi
  done
  dpkg --purge tierd >/dev/null 2>&1 || true
  rm -rf /var/cache/tierd /var/lib/tierd /etc/tierd # absent before the test (checked above)
  [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

deb=$("$SRC/scripts/deb.sh" "$T/deb") || fail "scripts/deb.sh failed"
[ -f "$deb" ] || fail "no package: $deb"
want=$(sed -n 's/^project(tierd VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
case "$(basename "$deb")" in tierd_"$want"_*.deb) ;; *) fail "the package is $(basename "$deb"), want version $want" ;; esac
if command -v lintian >/dev/null; then
  lintian --tag-display-limit 0 "$deb" 2>&1 | grep -v "running with root privileges" >"$T/lintian" || true
  ! grep -q "^[EW]:" "$T/lintian" || fail "lintian: $(cat "$T/lintian")"
  ok "lintian: no error or warning"
else
  fail "lintian is missing (scripts/deps.sh)"
fi

dpkg -i "$deb" >"$T/dpkg.log" 2>&1 || fail "dpkg -i: $(tail -5 "$T/dpkg.log")"
[ "$(/usr/bin/tierd --version)" = "tierd $want" ] || fail "/usr/bin/tierd --version: $(/usr/bin/tierd --version)"
/usr/bin/tierctl --version | grep -qx "tierctl $want" || fail "/usr/bin/tierctl --version"
for p in tierd.8 tierctl.1 tierbench.1 tierd.conf.5; do
  sect=${p##*.}
  [ -f "/usr/share/man/man$sect/$p.gz" ] || fail "man page $p not installed"
done
dpkg-query -W -f='${Conffiles}\n' tierd | grep -q "^ /etc/tierd/tierd.conf " || fail "/etc/tierd/tierd.conf is not a conffile"
[ -f /lib/systemd/system/tierd.service ] && [ -f /lib/systemd/system/tierd@.service ] || fail "the units are not installed"
[ "$(stat -c %a /var/cache/tierd)" = 750 ] || fail "/var/cache/tierd has mode $(stat -c %a /var/cache/tierd)"
/usr/bin/tierd --help >/dev/null || fail "tierd --help"
ok "dpkg -i: version $want, man pages, conffile, units, /var/cache/tierd 0750"

echo "; edited by the test" >>/etc/tierd/tierd.conf
mkdir -p "$T/stub"
cat >"$T/stub/systemctl" <<EOF
#!/bin/sh
echo "systemctl \$*" >>"$T/systemd.log"
case "\$*" in
*list-units*tierd@*)
  echo "tierd@a.service loaded active running tierd tiered storage, instance a"
  echo "tierd@b-c.service loaded activating auto-restart tierd tiered storage, instance b-c" ;;
esac
EOF
cat >"$T/stub/deb-systemd-invoke" <<EOF
#!/bin/sh
echo "deb-systemd-invoke \$*" >>"$T/systemd.log"
EOF
chmod 0755 "$T/stub/systemctl" "$T/stub/deb-systemd-invoke"
: >"$T/systemd.log"
# shellcheck disable=SC2016 # expanded by the inner shell
unshare --mount sh -c 'mount -t tmpfs tierd-test /run && mkdir -p /run/systemd/system && exec "$@"' \
  sh env PATH="$T/stub:$PATH" dpkg -r tierd >"$T/dpkg.log" 2>&1 || fail "dpkg -r: $(tail -5 "$T/dpkg.log")"
grep -qx "deb-systemd-invoke stop tierd@a.service tierd@b-c.service" "$T/systemd.log" ||
  fail "dpkg -r did not stop the tierd@ instances: $(cat "$T/systemd.log")"
grep -q "^deb-systemd-invoke stop .*tierd.service" "$T/systemd.log" ||
  fail "dpkg -r did not stop tierd.service: $(cat "$T/systemd.log")"
grep -q "tierd: stopping tierd@a.service tierd@b-c.service" "$T/dpkg.log" ||
  fail "dpkg -r did not say which instances it stops: $(cat "$T/dpkg.log")"
[ ! -e /usr/bin/tierd ] || fail "dpkg -r left /usr/bin/tierd"
grep -q "edited by the test" /etc/tierd/tierd.conf || fail "dpkg -r removed or replaced the edited config"
dpkg -i "$deb" >"$T/dpkg.log" 2>&1 || fail "dpkg -i again: $(tail -5 "$T/dpkg.log")"
grep -q "edited by the test" /etc/tierd/tierd.conf || fail "a reinstall replaced the edited config"
ok "dpkg -r stops tierd.service and the tierd@ instances and keeps the edited config; a reinstall keeps the edit"

mkdir -p /var/cache/tierd/spool
echo x >/var/cache/tierd/spool/7.stg
dpkg --purge tierd >"$T/purge.log" 2>&1 || fail "dpkg --purge: $(tail -5 "$T/purge.log")"
grep -q "keeping /var/cache/tierd: it holds write-back files (like /var/cache/tierd/spool/7.stg" "$T/purge.log" ||
  fail "the purge did not name the spool it kept: $(cat "$T/purge.log")"
[ -f /var/cache/tierd/spool/7.stg ] || fail "the purge removed a spool that held a staging file"
[ ! -e /etc/tierd ] || fail "the purge left /etc/tierd"
rm -rf /var/cache/tierd
dpkg -i "$deb" >"$T/dpkg.log" 2>&1 || fail "dpkg -i (3): $(tail -5 "$T/dpkg.log")"
dpkg --purge tierd >"$T/purge.log" 2>&1 || fail "dpkg --purge (2): $(tail -5 "$T/purge.log")"
[ ! -e /var/cache/tierd ] && [ ! -e /var/lib/tierd ] && [ ! -e /etc/tierd ] ||
  fail "a purge without spool files left state behind"
# the shipped config's backend directory holds data: a purge keeps it
dpkg -i "$deb" >"$T/dpkg.log" 2>&1 || fail "dpkg -i (4): $(tail -5 "$T/dpkg.log")"
echo data >/var/lib/tierd/warm/f.bin
dpkg --purge tierd >"$T/purge.log" 2>&1 || fail "dpkg --purge (3): $(tail -5 "$T/purge.log")"
[ -f /var/lib/tierd/warm/f.bin ] && grep -q "keeping /var/lib/tierd/warm: it holds files" "$T/purge.log" ||
  fail "the purge removed (or did not name) the backend directory with data: $(cat "$T/purge.log")"
rm -rf /var/lib/tierd
ok "purge: a spool with a staging file kept and named, a backend directory with data kept and named; otherwise config and state removed"

# tierds still running on /var/cache/tierd at the purge: the package's binary started by hand
# (a removal stops only what systemd runs), and a copy of it elsewhere (a tierd with its journal
# open there, configured with the directory's real path: /var/cache/tierd is a link to another
# disk here, and /proc shows the real path); and a process of another name holding a file open
# there. The spools hold no staging file yet: a purge must still leave them alone.
mkdir -p "$T/cache-disk" && ln -s "$T/cache-disk" /var/cache/tierd
dpkg -i "$deb" >"$T/dpkg.log" 2>&1 || fail "dpkg -i (5): $(tail -5 "$T/dpkg.log")"
[ -L /var/cache/tierd ] || fail "dpkg -i replaced the link /var/cache/tierd"
mkdir -p "$T/bin" && cp /usr/bin/tierd "$T/bin/tierd"
start_on_cache() { # N BINARY CACHE: a tierd with its spool in CACHE/iN
  mkdir -p "$T/warm$1/ck" "$T/mnt$1" "$3/i$1"
  cat >"$T/i$1.conf" <<EOF
[backend warm]
type = posix
root = $T/warm$1
[namespace /ck]
backend = warm
prefix = ck
mode = write-back
[writeback]
spool_dir = $3/i$1/spool
[cache]
ram_size = 16M
block_size = 1M
[mount]
path = $T/mnt$1
[api]
socket = $T/api$1.sock
EOF
  "$2" -f -c "$T/i$1.conf" >"$T/i$1.log" 2>&1 &
  TIERD_PIDS="$TIERD_PIDS $!"
}
start_on_cache 1 /usr/bin/tierd /var/cache/tierd
start_on_cache 2 "$T/bin/tierd" "$T/cache-disk"
# a reader of another name with a file open there (its working directory elsewhere)
echo x >/var/cache/tierd/notes
(cd / && exec sleep 3600 3</var/cache/tierd/notes) &
READER_PID=$!
up() { grep -qs " $T/mnt1 fuse" /proc/mounts && grep -qs " $T/mnt2 fuse" /proc/mounts; }
for _ in $(seq 600); do up && break; sleep 0.1; done
up || fail "the two tierds did not mount: $(cat "$T/i1.log" "$T/i2.log")"
[ -f /var/cache/tierd/i1/spool/journal.db ] && [ -f /var/cache/tierd/i2/spool/journal.db ] ||
  fail "no journal in /var/cache/tierd/i1 and i2: $(ls -R /var/cache/tierd)"
[ -z "$(find /var/cache/tierd -name '*.stg')" ] || fail "a staging file already (the case needs none)"
dpkg -r tierd >"$T/dpkg.log" 2>&1 || fail "dpkg -r (running tierds): $(tail -5 "$T/dpkg.log")"
dpkg --purge tierd >"$T/purge.log" 2>&1 || fail "dpkg --purge (running tierds): $(tail -5 "$T/purge.log")"
line=$(grep "keeping /var/cache/tierd and /var/lib/tierd: tierd is running or a process has files open there (pid" "$T/purge.log") ||
  fail "the purge did not say it keeps /var/cache/tierd for the running tierds: $(cat "$T/purge.log")"
[[ $line =~ \(pid\ ([0-9 ]+)\) ]] || fail "no pids in: $line"
for p in $TIERD_PIDS $READER_PID; do
  [[ " ${BASH_REMATCH[1]} " == *" $p "* ]] || fail "the purge did not name the running process $p: $line"
done
[ -L /var/cache/tierd ] && [ -f "$T/cache-disk/notes" ] || fail "the purge removed /var/cache/tierd"
[ -f /var/cache/tierd/i1/spool/journal.db ] && [ -f /var/cache/tierd/i2/spool/journal.db ] ||
  fail "the purge removed the journal of a running tierd: $(ls -R /var/cache/tierd 2>&1)"
echo data >"$T/mnt2/ck/after-purge" || fail "the running tierd's write-back namespace fails after the purge"
[ ! -e /etc/tierd ] || fail "the purge left /etc/tierd"
for p in $TIERD_PIDS; do kill "$p"; done
for p in $TIERD_PIDS; do wait "$p" || fail "a tierd exited $? on SIGTERM: $(cat "$T/i1.log" "$T/i2.log")"; done
TIERD_PIDS=
kill "$READER_PID" && { wait "$READER_PID" 2>/dev/null || true; }
READER_PID=
rm -rf /var/cache/tierd /var/lib/tierd
ok "purge while tierds run on /var/cache/tierd (a link; one under its real path) and another process reads there: nothing removed, their pids named"
echo PASS
