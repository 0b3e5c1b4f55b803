#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_hintfile_fuse.sh - epoch-order hints through the mount's control files
# (<mount>/.tierd/hints/NAME, src/fuse/fuse_ctl_hints.c) on a REAL, read-only mount over a POSIX
# backend (run by CTest, label fuse; needs root and /dev/fuse).
#
# A job of tenant u1001 (uid 1001, setpriv) hints with a shell line: printf of paths into
# .tierd/hints/epoch1 (mount-prefixed and mount-relative paths, an empty line, a comment).
# Asserts: GET /v1/hints shows the set with the right entries and tenant, and the engine fetches
# every file (fetched_files, held_bytes, polled with a deadline); cat of the file shows the same;
# the directory lists the caller's tenant's sets only; >> and "#append" append, > replaces; a bad
# line makes write(2) fail with EINVAL (so a shell's printf fails), a bad last line without a
# newline close(2), and nothing changes (the log names the line); fsync takes
# the set before the close; over 4 MiB (32 MiB for root) the write fails with EFBIG and so does
# the close; a caller of tenant default (uid 1002, with [tenants] fallback = default) gets EPERM,
# root may (its set is the default tenant's); unlink drops
# the set; the namespace itself stays EROFS. No sleeps as synchronisation: waits poll the API.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup hintfile_fuse

[ "$(id -u)" = 0 ] || fail "needs root (writers as other uids)"
for tool in setpriv python3 curl; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done
# the other uids run the system's python3 (a pyenv shim under /root is not theirs to run)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

NFILES=16
chmod 0711 "$T"
mkdir -p "$DATA/ds/train" "$MNT"
chmod 0755 "$DATA" "$DATA/ds" "$DATA/ds/train" "$MNT"
for i in $(seq -w 1 $NFILES); do
  head -c 65536 /dev/urandom >"$DATA/ds/train/s$i.bin"
done
HF=$T/hintfile.py
cp "$(dirname "$0")/hintfile.py" "$HF"
chmod 0644 "$HF"

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 16M" "block_size = 64K"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022" "readahead_blocks = 0"
  tierd_conf_api "$SOCK"
  # one shared tenant for every unmatched caller (else uid 1002 would be its own uid-1002)
  tierd_conf_section tenants "fallback = default"
  tierd_conf_section "tenant u1001" "uid = 1001"
} >"$CONF"

start_tierd
ok "mounted"

as1001() { setpriv --reuid=1001 --regid=1001 --clear-groups -- "$@"; }
as1002() { setpriv --reuid=1002 --regid=1002 --clear-groups -- "$@"; }
H=$MNT/.tierd/hints
field() { # NAME FIELD: FIELD of hint set NAME in GET /v1/hints, "none" without such a set
  api /v1/hints | python3 -c 'import json,sys
s = {x["name"]: x for x in json.load(sys.stdin)["sets"]}
print(s[sys.argv[1]][sys.argv[2]] if sys.argv[1] in s else "none")' "$1" "$2"
}

# ---- the directory ----------------------------------------------------------------------------
[ "$(stat -c %a "$MNT/.tierd")" = 555 ] || fail ".tierd is mode $(stat -c %a "$MNT/.tierd"), want 555"
[ "$(stat -c %a "$H")" = 777 ] || fail ".tierd/hints is mode $(stat -c %a "$H"), want 777 (umask 022: whoever reads may hint)"
python3 -c 'import os, sys; sys.exit(0 if ".tierd" in os.listdir(sys.argv[1]) else 1)' "$MNT" ||
  fail "the root listing lacks .tierd: $(ls -a "$MNT")"
[ "$(ls -A "$H")" = "" ] || fail ".tierd/hints is not empty: $(ls -A "$H")"
ok ".tierd (555) and .tierd/hints (777) at the mount root"

# ---- a shell line gives the order ---------------------------------------------------------------
LIST=()
for i in $(seq -w 1 $NFILES); do
  if [ $((10#$i % 2)) = 0 ]; then LIST+=("$MNT/ds/train/s$i.bin"); else LIST+=("/ds/train/s$i.bin"); fi
done
# shellcheck disable=SC2016
as1001 sh -c 'printf "%s\n" "# epoch 1" "" "$@" >"$0"' "$H/epoch1" "${LIST[@]}" ||
  fail "uid 1001 could not write $H/epoch1 (see the log)"
[ "$(field epoch1 entries)" = "$NFILES" ] || fail "epoch1 entries: $(field epoch1 entries), want $NFILES: $(api /v1/hints)"
[ "$(field epoch1 tenant)" = u1001 ] || fail "epoch1 tenant: $(field epoch1 tenant), want u1001"
fetched() { [ "$(field epoch1 fetched_files)" = "$NFILES" ] && [ "$(field epoch1 held_bytes)" -gt 0 ]; }
wait_for 180 fetched || fail "the hinted files were not fetched within 180 s: $(api /v1/hints)"
ok "printf > .tierd/hints/epoch1 as uid 1001: set epoch1 of tenant u1001, $NFILES entries, all fetched"

as1001 cat "$H/epoch1" >"$T/status.txt" || fail "cat $H/epoch1 as uid 1001"
for want in "tenant: u1001" "state: active" "entries: $NFILES" "fetched_files: $NFILES" "errors: 0"; do
  grep -qx "$want" "$T/status.txt" || fail "cat epoch1 lacks '$want': $(cat "$T/status.txt")"
done
[ "$(as1001 ls "$H")" = epoch1 ] || fail "uid 1001 lists '$(as1001 ls "$H")' in .tierd/hints, want epoch1"
[ "$(ls "$H")" = "" ] || fail "root (tenant default) lists u1001's set: $(ls "$H")"
[ ! -e "$H/epoch1" ] || fail "root (tenant default) sees u1001's epoch1"
ok "cat shows the set's progress; the directory lists the caller's tenant's sets only"

# ---- append, replace --------------------------------------------------------------------------
# shellcheck disable=SC2016
as1001 sh -c 'printf "%s\n" /ds/train/s01.bin >>"$0"' "$H/epoch1" || fail ">> epoch1"
[ "$(field epoch1 entries)" = $((NFILES + 1)) ] || fail ">> did not append: $(field epoch1 entries) entries"
# shellcheck disable=SC2016
as1001 sh -c 'printf "#append\n/ds/train/s02.bin\n" >"$0"' "$H/epoch1" || fail "#append > epoch1"
[ "$(field epoch1 entries)" = $((NFILES + 2)) ] || fail "#append did not append: $(field epoch1 entries) entries"
# shellcheck disable=SC2016
as1001 sh -c 'printf "/ds/train/s03.bin\n" >"$0"' "$H/epoch1" || fail "> epoch1"
[ "$(field epoch1 entries)" = 1 ] || fail "> did not replace: $(field epoch1 entries) entries"
ok ">> and a first line #append append; > replaces"

# ---- errors reach the writer ------------------------------------------------------------------
# a complete bad line fails write(2) already (a shell does not look at close(2)), and the close
# shell: printf's write error is its exit status
# shellcheck disable=SC2016
if as1001 bash -c 'printf "%s\n" /ds/train/s01.bin /nowhere/x >"$0"' "$H/epoch1" 2>"$T/sh.err"; then
  fail "printf of a path outside the namespaces into epoch1 succeeded"
fi
grep -q "Invalid argument" "$T/sh.err" || fail "the shell did not report EINVAL: $(cat "$T/sh.err")"
[ "$(field epoch1 entries)" = 1 ] || fail "a refused list changed epoch1: $(field epoch1 entries) entries"
grep -q "epoch1 of tenant u1001: line 2 '/nowhere/x': not under any namespace.*the write fails" "$T/tierd.log" ||
  fail "the log does not name the bad line"
out=$(as1001 "$PY" "$HF" write "$H/bad1" $'/ds/train/s01.bin\nds/train/s02.bin\n')
grep -qx "write EINVAL 0" <<<"$out" && grep -qx "close EINVAL" <<<"$out" ||
  fail "a relative path: want write and close EINVAL, got: $out"
[ "$(field bad1 entries)" = none ] || fail "a refused list made set bad1"
# a last line without newline is checked when the file is handed over: at close(2)
out=$(as1001 "$PY" "$HF" write "$H/epoch1" $'/ds/train/s01.bin\n/ds')
grep -qx "write ok 21" <<<"$out" && grep -qx "close EINVAL" <<<"$out" ||
  fail "a namespace root as the last line: want write ok, close EINVAL, got: $out"
[ "$(field epoch1 entries)" = 1 ] || fail "a refused list changed epoch1: $(field epoch1 entries) entries"
grep -q "epoch1 of tenant u1001 not taken at close: paths\[1\] '/ds': a namespace root.*(line 2)" "$T/tierd.log" ||
  fail "the log does not name the bad last line"
ok "a bad line: write(2) (a complete line) or close(2) (the last) fails with EINVAL, nothing changes, the log names the line"

out=$(as1001 "$PY" "$HF" fsync "$H/synced" $'/ds/train/s04.bin\n/ds/train/s05.bin\n')
grep -qx "fsync ok" <<<"$out" && grep -q "^status .*state: active entries: 2" <<<"$out" &&
  grep -qx "close ok" <<<"$out" || fail "fsync did not take the set before the close: $out"
ok "fsync takes the set (the status shows it while the writer still has the file open)"

out=$(as1001 "$PY" "$HF" big "$H/big")
grep -qx "write EFBIG 4194304" <<<"$out" || fail "uid 1001 over 4 MiB: want write EFBIG after 4194304 bytes, got: $out"
grep -qx "close EFBIG" <<<"$out" || fail "the close after EFBIG: want close EFBIG, got: $out"
[ "$(field big entries)" = none ] || fail "a list cut at 4 MiB was taken"
out=$("$PY" "$HF" big "$H/bigroot")
grep -qx "write EFBIG 33554432" <<<"$out" || fail "root over 32 MiB: want write EFBIG after 33554432 bytes, got: $out"
grep -qx "close EFBIG" <<<"$out" || fail "root's close after EFBIG: want close EFBIG, got: $out"
[ "$(field bigroot entries)" = none ] || fail "a list cut at 32 MiB was taken"
ok "over 4 MiB (uid 1001, as POST /v1/hints's body) and 32 MiB (root): write and close fail with EFBIG, nothing taken"

out=$(as1002 "$PY" "$HF" write "$H/x1002" $'/ds/train/s01.bin\n')
grep -qx "open EPERM" <<<"$out" || fail "uid 1002 (tenant default): want open EPERM, got: $out"
grep -q "is tenant default, which every unmatched caller shares" "$T/tierd.log" ||
  fail "the log does not say why uid 1002 may not hint"
printf '%s\n' "$MNT/ds/train/s06.bin" >"$H/rootset" || fail "root could not hint"
[ "$(field rootset tenant)" = default ] || fail "root's set is tenant $(field rootset tenant)'s, want default's"
[ "$(ls "$H")" = rootset ] || fail "root lists '$(ls "$H")', want rootset"
ok "tenant default: EPERM for uid 1002, root may (its set is the default tenant's)"

# ---- unlink drops, the namespace stays read-only ------------------------------------------------
as1001 rm "$H/epoch1" || fail "rm epoch1 as uid 1001"
[ "$(field epoch1 entries)" = none ] || fail "epoch1 still listed after rm: $(api /v1/hints)"
! as1001 test -e "$H/epoch1" || fail "epoch1 still exists after rm"
! as1001 rm "$H/epoch1" 2>/dev/null || fail "a second rm of epoch1 succeeded"
[ "$(as1001 ls "$H")" = synced ] || fail "uid 1001 lists '$(as1001 ls "$H")' after rm, want synced"
out=$("$PY" "$HF" write "$MNT/ds/train/new.bin" x)
grep -qx "open EROFS" <<<"$out" || fail "a file in the read-cache namespace: want open EROFS, got: $out"
ok "rm drops the set; the namespace stays EROFS"

stop_tierd
ok "hintfile_fuse passed"
