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
#   - a purge with a spool holding a staging file keeps that spool and names it; a purge without
#     one removes the config and the state.
set -euo pipefail
SRC=${TIER_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d "${TIER_TEST_TMP:-/tmp}/deb.XXXXXX")
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i)"
if dpkg-query -W -f='${Status}' tierd 2>/dev/null | grep -q "installed\|config-files"; then
  fail "a tierd package is already on this machine: the test would replace it (dpkg --purge tierd first)"
fi
had_cache=false
[ -e /var/cache/tierd ] && had_cache=true
cleanup() {
  dpkg --purge tierd >/dev/null 2>&1 || true
  $had_cache || rm -rf /var/cache/tierd
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
dpkg -r tierd >"$T/dpkg.log" 2>&1 || fail "dpkg -r: $(tail -5 "$T/dpkg.log")"
[ ! -e /usr/bin/tierd ] || fail "dpkg -r left /usr/bin/tierd"
grep -q "edited by the test" /etc/tierd/tierd.conf || fail "dpkg -r removed or replaced the edited config"
dpkg -i "$deb" >"$T/dpkg.log" 2>&1 || fail "dpkg -i again: $(tail -5 "$T/dpkg.log")"
grep -q "edited by the test" /etc/tierd/tierd.conf || fail "a reinstall replaced the edited config"
ok "dpkg -r keeps the edited config; a reinstall keeps the edit"

mkdir -p /var/cache/tierd/spool
echo x >/var/cache/tierd/spool/7.stg
dpkg --purge tierd >"$T/purge.log" 2>&1 || fail "dpkg --purge: $(tail -5 "$T/purge.log")"
grep -q "keeping /var/cache/tierd/spool: it holds write-back files" "$T/purge.log" ||
  fail "the purge did not name the spool it kept: $(cat "$T/purge.log")"
[ -f /var/cache/tierd/spool/7.stg ] || fail "the purge removed a spool that held a staging file"
[ ! -e /etc/tierd ] || fail "the purge left /etc/tierd"
rm -rf /var/cache/tierd
dpkg -i "$deb" >"$T/dpkg.log" 2>&1 || fail "dpkg -i (3): $(tail -5 "$T/dpkg.log")"
dpkg --purge tierd >"$T/purge.log" 2>&1 || fail "dpkg --purge (2): $(tail -5 "$T/purge.log")"
[ ! -e /var/cache/tierd ] && [ ! -e /var/lib/tierd ] && [ ! -e /etc/tierd ] ||
  fail "a purge without spool files left state behind"
ok "purge: a spool with a staging file kept and named; without one, config and state removed"
echo PASS
