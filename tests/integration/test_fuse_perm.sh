#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_fuse_perm.sh - who may read and write through a REAL FUSE mount (run by CTest, label fuse):
# the synthesised owner and modes of docs/CONFIG.md "Permissions", enforced by the kernel
# (default_permissions), checked as other uids (runuser -u nobody; setpriv for nobody with the
# configured group as a supplementary group, so no group is added to /etc/group).
#
# Asserts: allow_other without [mount] umask -> the mount is closed to other users (nobody
# cannot read a world-readable backend file; root can) and a start-up warning says so; without
# allow_other nobody gets EACCES; allow_other with uid/gid/umask -> modes and owner as
# configured; a 0600 root-only backend file in a namespace with umask 027 is refused to nobody
# and read by a member of the configured group; a per-namespace umask 022 lets nobody read that
# namespace; a write-back namespace with umask 007 lets a group member (not root) create,
# write and read back a checkpoint while nobody's create is refused; a POSIX backend directory
# that is not readable by the users the mount lets in is named in a start-up warning.
# No sleeps as synchronisation: every wait polls a condition with a deadline.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup fuse_perm

[ "$(id -u)" = 0 ] || fail "needs root (runs commands as nobody)"
NOBODY=$(id -u nobody)
GRP=4242 # a group nobody is not in; "member" below is nobody with it as a supplementary group
as_nobody() { runuser -u nobody -- "$@"; }
as_member() { setpriv --reuid="$NOBODY" --regid="$(id -g nobody)" --groups=$GRP -- "$@"; }

# the mount point must be reachable by nobody, or every check below would pass for that reason
chmod 0711 "$T"
mkdir -p "$DATA/pub" "$DATA/priv" "$DATA/ck" "$MNT"
chmod 0755 "$DATA" "$DATA/pub" "$DATA/ck"
chmod 0755 "$MNT"
as_nobody test -x "$MNT" || fail "nobody cannot reach $MNT (a parent of TIER_TEST_TMP is closed)"
echo "public words" >"$DATA/pub/readme.txt"
chmod 0644 "$DATA/pub/readme.txt"
echo "secret words" >"$DATA/priv/secret.txt"
chmod 0600 "$DATA/priv/secret.txt"
chmod 0700 "$DATA/priv"

write_conf() { # $1: extra [mount] lines, $2: extra [namespace /priv] lines, $3: /pub, $4: /ck
  {
    tierd_conf_section daemon "log_level = info"
    tierd_conf_section cache "ram_size = 32M" "block_size = 1M"
    tierd_conf_posix warm "$DATA"
    tierd_conf_ns /pub warm "prefix = pub" "$3"
    tierd_conf_ns /priv warm "prefix = priv" "$2"
    tierd_conf_ns /ck warm "prefix = ck" "mode = write-back" "$4"
    tierd_conf_section writeback "spool_dir = $T/spool"
    tierd_conf_mount "$MNT" "attr_ttl = 1s" "entry_ttl = 1s" "$1"
    tierd_conf_api "$SOCK"
  } >"$CONF"
}
denied() { # CMD...: fails with "Permission denied"
  local err
  err=$("$@" 2>&1) && return 1
  grep -q "Permission denied" <<<"$err"
}

# ---- allow_other, no owner/mode: closed to other users ------------------------------------
write_conf "allow_other = true" "" "" ""
: >"$T/tierd.log"
start_tierd
[ "$(cat "$MNT/pub/readme.txt")" = "public words" ] || fail "root cannot read through the mount"
denied as_nobody cat "$MNT/pub/readme.txt" ||
  fail "allow_other without umask: nobody read a file ($(stat -c '%A %U:%G' "$MNT/pub/readme.txt"))"
denied as_nobody cat "$MNT/priv/secret.txt" || fail "allow_other without umask: nobody read secret.txt"
[ "$(stat -c '%a' "$MNT/pub/readme.txt")" = 440 ] || fail "default file mode with allow_other: $(stat -c %a "$MNT/pub/readme.txt")"
[ "$(stat -c '%a' "$MNT/ck")" = 750 ] || fail "default write-back dir mode with allow_other: $(stat -c %a "$MNT/ck")"
grep -q "allow_other without \[mount\] umask" "$T/tierd.log" || fail "no start-up warning about allow_other without umask"
stop_tierd
ok "allow_other without umask: other users get EACCES (0440/0550), root reads, warned at start"

# ---- no allow_other: the kernel refuses every other user ----------------------------------
write_conf "" "" "" ""
start_tierd
denied as_nobody stat "$MNT/pub/readme.txt" || fail "without allow_other nobody could stat"
[ "$(stat -c '%a %u' "$MNT/pub/readme.txt")" = "444 0" ] || fail "default mode changed: $(stat -c '%a %u' "$MNT/pub/readme.txt")"
[ "$(stat -c '%a' "$MNT/ck")" = 755 ] || fail "default write-back dir mode changed: $(stat -c %a "$MNT/ck")"
stop_tierd
ok "without allow_other: nobody gets EACCES; modes as before (0444, write-back 0755)"

# ---- allow_other with uid/gid/umask, per-namespace umask ----------------------------------
: >"$T/tierd.log"
write_conf "allow_other = true
uid = 0
gid = $GRP
umask = 022" "umask = 027" "" "umask = 007"
start_tierd
[ "$(stat -c '%a %u %g' "$MNT/priv/secret.txt")" = "440 0 $GRP" ] ||
  fail "secret.txt shows $(stat -c '%a %u %g' "$MNT/priv/secret.txt"), expected 440 0 $GRP"
[ "$(stat -c '%a %u %g' "$MNT/priv")" = "550 0 $GRP" ] || fail "/priv shows $(stat -c '%a %u %g' "$MNT/priv")"
denied as_nobody cat "$MNT/priv/secret.txt" || fail "nobody read a 0600 root file through allow_other"
[ "$(as_member cat "$MNT/priv/secret.txt")" = "secret words" ] || fail "a member of gid $GRP cannot read secret.txt"
ok "[namespace /priv] umask 027 + [mount] gid: nobody refused, a member of the group reads"
[ "$(stat -c '%a %u %g' "$MNT/pub/readme.txt")" = "444 0 $GRP" ] || fail "/pub shows $(stat -c '%a %u %g' "$MNT/pub/readme.txt")"
[ "$(as_nobody cat "$MNT/pub/readme.txt")" = "public words" ] || fail "nobody cannot read /pub under [mount] umask 022"
ok "[mount] umask 022: nobody reads /pub (0444), the per-namespace umask narrows /priv only"
# write-back, umask 007: the group creates checkpoints
[ "$(stat -c '%a %g' "$MNT/ck")" = "770 $GRP" ] || fail "/ck shows $(stat -c '%a %g' "$MNT/ck")"
as_member sh -c "echo member-ckpt >'$MNT/ck/m1'" || fail "a member of gid $GRP cannot create in /ck"
[ "$(as_member cat "$MNT/ck/m1")" = member-ckpt ] || fail "the member cannot read back its checkpoint"
[ "$(stat -c '%a %g' "$MNT/ck/m1")" = "660 $GRP" ] || fail "/ck/m1 shows $(stat -c '%a %g' "$MNT/ck/m1")"
as_member mkdir "$MNT/ck/step1" || fail "a member cannot mkdir in /ck"
as_member sh -c "echo two >'$MNT/ck/step1/w'" || fail "a member cannot create in a new directory"
denied as_nobody sh -c "echo x >'$MNT/ck/n1'" || fail "nobody (not in the group) created a file in /ck"
wait_for 30 test -f "$DATA/ck/m1" || fail "the member's checkpoint never reached the backend"
ok "write-back umask 007: a group member creates, writes and reads checkpoints; nobody is refused"
grep -q "namespace /priv: the POSIX backend directory $DATA/priv is mode 0700" "$T/tierd.log" ||
  fail "no warning that /priv exposes a 0700 backend directory"
! grep -q "namespace /pub: the POSIX backend" "$T/tierd.log" || fail "a warning for the world-readable /pub"
ok "start-up warning names the 0700 backend directory the group may read"
stop_tierd
echo "PASS"
