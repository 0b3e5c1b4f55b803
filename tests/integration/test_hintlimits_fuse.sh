#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_hintlimits_fuse.sh - what hint sets may cost, on a REAL mount over a POSIX backend (run by
# CTest, label fuse; needs root and /dev/fuse). Tenants u1001 (uid 1001) and u1003 (uid 1003)
# are callers who are no administrators; root is one.
#
#   manifests   one POST naming 50 files of 5 dataset versions in turn reads each manifest once
#               (GET /v1/hints manifest_reads grows by 5, not 50); 17 versions in one POST: 413
#   tenant caps hint_tenant_sets = 2: u1001's third set is 507 by the API and EDQUOT at the close
#               of a control file, naming the key, while u1003 still hints and u1001 may replace
#               its sets; hint_tenant_entries and hint_tenant_size: 507, the set unchanged;
#               hint_state_size binds root too (507); a replacement at the cap is whole: a set
#               asked for while the old one is being freed (FAULT.drop.NAME "hint drop pause")
#               is refused, the replacement taken
#   buffers     u1001 holding five hint files open: each stops at 4 MiB (EFBIG: the API's body
#               bound for users), the fifth at its tenant's share (EDQUOT); u1003's hint file is
#               taken meanwhile (the shared 256 MiB pool is not one tenant's to fill)
#   closer      with one FUSE worker ([mount] threads = 1) and a close held in its submission (the
#               test builds' TIERD_TEST_FAULT_FILE, here FILE.close.NAME saying "hint close
#               pause"), the mount still answers statfs and a control file's open and read, and
#               u1003's hint file is taken at its close (another closer thread); with all four
#               closers held, a close without a write returns (served on the FUSE worker); the
#               held closes then return their results
# No sleeps as synchronisation: waits poll the API or a file with a deadline.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup hintlimits_fuse

[ "$(id -u)" = 0 ] || fail "needs root (callers as other uids)"
for tool in setpriv python3 curl; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

chmod 0711 "$T"
mkdir -p "$DATA/ds/a" "$MNT" "$T/u"
chmod 0755 "$DATA" "$DATA/ds" "$DATA/ds/a" "$MNT"
chmod 0777 "$T/u"
for i in 0 1 2 3 4 5 6 7 8 9; do
  head -c 1000 /dev/urandom >"$DATA/ds/a/f$i.bin"
done
HF=$T/hintfile.py
cp "$(dirname "$0")/hintfile.py" "$HF"
chmod 0644 "$HF"
FAULT=$T/fault
: >"$FAULT"
export TIERD_TEST_FAULT_FILE=$FAULT

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 16M" "block_size = 64K" "hint_tenant_sets = 2" \
    "hint_tenant_entries = 1000" "hint_tenant_size = 64K" "hint_state_size = 256K"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  # a write-back namespace: the test builds read TIERD_TEST_FAULT_FILE with the burst buffer
  tierd_conf_ns /ckpt warm "prefix = ckpt" "mode = write-back"
  tierd_conf_section writeback "spool_dir = $T/spool"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022" "threads = 1"
  tierd_conf_api "$SOCK" "socket_group = 1001"
  tierd_conf_section "tenant u1001" "uid = 1001"
  tierd_conf_section "tenant u1003" "uid = 1003"
} >"$CONF"

start_tierd
ok "mounted"

as1001() { setpriv --reuid=1001 --regid=1001 --clear-groups -- "$@"; }
as1003() { setpriv --reuid=1003 --regid=1001 --clear-groups -- "$@"; } # the socket's group
H=$MNT/.tierd/hints
# post WHO BODY: POST /v1/hints as WHO (root, 1001, 1003); the HTTP status, the body in $T/u/post.json
post() {
  local who=$1
  rm -f "$T/u/post.json"
  printf '%s' "$2" >"$T/u/body.json"
  local run=()
  [ "$who" = root ] || run=(setpriv --reuid="$who" --regid=1001 --clear-groups --)
  "${run[@]}" curl -sS -o "$T/u/post.json" -w '%{http_code}' --unix-socket "$SOCK" \
    --data-binary @"$T/u/body.json" http://tierd/v1/hints
}
# body NAME PATH-FORMAT COUNT [MOD]: a POST body naming PATH-FORMAT % (i % MOD) for i < COUNT
body() {
  python3 -c 'import json,sys
f, n, m = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
print(json.dumps({"name": sys.argv[1], "paths": [f % (i % m) for i in range(n)]}))' "$1" "$2" "$3" "${4:-1000000000}"
}
field() { # NAME FIELD: FIELD of hint set NAME in GET /v1/hints, "none" without such a set
  api /v1/hints | python3 -c 'import json,sys
s = {x["name"]: x for x in json.load(sys.stdin)["sets"]}
print(s[sys.argv[1]][sys.argv[2]] if sys.argv[1] in s else "none")' "$1" "$2"
}
reads() { api /v1/hints | python3 -c 'import json,sys; print(json.load(sys.stdin)["manifest_reads"])'; }
drop() { tierd_api "$SOCK" "/v1/hints/$1" -X DELETE >/dev/null || fail "DELETE /v1/hints/$1"; }

# ---- manifests: one read per version and submission ---------------------------------------------
for v in $(seq 1 17); do
  tierd_ctl dataset commit /ds/a "v$v" >"$T/out" 2>&1 || fail "commit /ds/a v$v: $(cat "$T/out")"
done
r0=$(reads)
# 50 paths cycling over 5 versions: v1 f0, v2 f1, ..., v5 f4, v1 f5, ...
b=$(python3 -c 'import json
print(json.dumps({"name": "cyc", "paths": ["/.tierd/datasets/ds/a@v%d/f%d.bin" % (i % 5 + 1, i % 10) for i in range(50)]}))')
code=$(post root "$b")
[ "$code" = 200 ] || fail "POST of 50 paths over 5 versions: HTTP $code $(cat "$T/u/post.json")"
r1=$(reads)
[ $((r1 - r0)) = 5 ] || fail "50 paths over 5 versions read $((r1 - r0)) manifests, want 5 (one per version)"
[ "$(field cyc entries)" = 50 ] || fail "set cyc has $(field cyc entries) entries, want 50"
drop cyc
b=$(python3 -c 'import json
print(json.dumps({"name": "many", "paths": ["/.tierd/datasets/ds/a@v%d/f0.bin" % v for v in range(1, 18)]}))')
code=$(post root "$b")
[ "$code" = 413 ] && grep -q "more than 16 dataset versions in one submission" "$T/u/post.json" ||
  fail "17 versions in one POST: HTTP $code, want 413: $(cat "$T/u/post.json")"
[ "$(field many entries)" = none ] || fail "a refused POST made set many"
ok "one POST over 5 versions in turn: $((r1 - r0)) manifest reads for 50 paths; 17 versions: 413"

# ---- per-tenant caps ---------------------------------------------------------------------------
for s in s1 s2; do
  code=$(post 1001 "$(body "$s" /ds/a/f%d.bin 3 10)")
  [ "$code" = 200 ] || fail "u1001's set $s: HTTP $code $(cat "$T/u/post.json")"
done
code=$(post 1001 "$(body s3 /ds/a/f%d.bin 3 10)")
[ "$code" = 507 ] && grep -q "tenant u1001 has 2 hint sets: at most 2 per tenant (\[cache\] hint_tenant_sets)" "$T/u/post.json" ||
  fail "u1001's third set: HTTP $code, want 507 naming hint_tenant_sets: $(cat "$T/u/post.json")"
out=$(as1001 "$PY" "$HF" write "$H/s3" $'/ds/a/f0.bin\n')
grep -qx "close EDQUOT" <<<"$out" || fail "u1001's third set by a control file: want close EDQUOT, got: $out"
grep -q "hint file $MNT/.tierd/hints/s3 of tenant u1001 not taken at close: tenant u1001 has 2 hint sets" "$T/tierd.log" ||
  fail "the log does not say why u1001's s3 was not taken"
[ "$(field s3 entries)" = none ] || fail "u1001's refused third set exists"
code=$(post 1003 "$(body x1 /ds/a/f%d.bin 3 10)")
[ "$code" = 200 ] || fail "u1003's set while u1001 is at its cap: HTTP $code $(cat "$T/u/post.json")"
code=$(post 1001 "$(body s1 /ds/a/f%d.bin 5 10)")
[ "$code" = 200 ] && [ "$(field s1 entries)" = 5 ] || fail "u1001 replacing s1 at its cap: HTTP $code $(cat "$T/u/post.json")"
[ "$(field s1 bytes)" -gt 0 ] || fail "set s1's bytes: $(field s1 bytes), want its memory's estimate"
ok "hint_tenant_sets: u1001's third set 507 (API) / EDQUOT (close); u1003 unaffected; replacing is allowed"

# entries: u1001 holds 5 + 3; 1000 entries of one file in s2 would make 1005
code=$(post 1001 "$(body s2 /ds/a/f%d.bin 1000 1)")
[ "$code" = 507 ] && grep -q "would have 1005 entries: at most 1000 per tenant (\[cache\] hint_tenant_entries)" "$T/u/post.json" ||
  fail "u1001 over its entries: HTTP $code, want 507 naming hint_tenant_entries: $(cat "$T/u/post.json")"
[ "$(field s2 entries)" = 3 ] || fail "a refused replacement changed s2: $(field s2 entries) entries"
code=$(post 1003 "$(body x1 /ds/a/f%d.bin 990 1)")
[ "$code" = 200 ] || fail "u1003's 990 entries while u1001 is near its cap: HTTP $code $(cat "$T/u/post.json")"
# bytes: 400 distinct files (each a struct and its key: more than 64 KiB)
code=$(post 1001 "$(body s2 /ds/nosuch/file-%04d.bin 400)")
[ "$code" = 507 ] && grep -q "(\[cache\] hint_tenant_size)" "$T/u/post.json" ||
  fail "u1001 over its bytes: HTTP $code, want 507 naming hint_tenant_size: $(cat "$T/u/post.json")"
[ "$(field s2 entries)" = 3 ] || fail "a refused replacement changed s2: $(field s2 entries) entries"
# all hint state: root is held to hint_state_size (256 KiB) only
code=$(post root "$(body big /ds/nosuch/file-%05d.bin 2000)")
[ "$code" = 507 ] && grep -q "(\[cache\] hint_state_size)" "$T/u/post.json" ||
  fail "root over all hint state: HTTP $code, want 507 naming hint_state_size: $(cat "$T/u/post.json")"
code=$(post root "$(body rootset /ds/a/f%d.bin 3 10)")
[ "$code" = 200 ] || fail "root's small set: HTTP $code $(cat "$T/u/post.json")"
ok "hint_tenant_entries, hint_tenant_size (507, the set unchanged, u1003 unaffected), hint_state_size binds root"

# a replacement at the tenant's cap is whole: u1001 (s1, s2: at its 2 sets) replaces s1 and asks
# for s3 while the old s1 is being freed (the test builds' FAULT.drop.s1 "hint drop pause"); s3
# is refused, the replacement taken (it must never be refused with the old s1 gone)
if grep -q "TIERD_TEST_FAULT_FILE=$FAULT" "$T/tierd.log"; then
  echo "hint drop pause" >"$FAULT.drop.s1"
  body s1 /ds/a/f%d.bin 2 10 >"$T/u/a.in"
  setpriv --reuid=1001 --regid=1001 --clear-groups -- curl -sS -o "$T/u/a.json" -w '%{http_code}' \
    --unix-socket "$SOCK" --data-binary @"$T/u/a.in" http://tierd/v1/hints >"$T/a.code" &
  a=$!
  dropheld() { [ -e "$FAULT.drop.s1.paused" ]; }
  wait_for 30 dropheld || fail "u1001's replacement of s1 did not reach the old set's drop"
  code=$(post 1001 "$(body s3 /ds/a/f%d.bin 3 10)")
  dropheld || fail "the drop of the old s1 was no longer held: the check proved nothing"
  : >"$FAULT.drop.s1"
  wait "$a" || fail "the replacing POST failed"
  [ "$(cat "$T/a.code")" = 200 ] && [ "$(field s1 entries)" = 2 ] ||
    fail "u1001's replacement of s1 while s3 was asked for: HTTP $(cat "$T/a.code") $(cat "$T/u/a.json"), s1 has $(field s1 entries) entries (want 200 and 2; refused, s1 must keep its 5)"
  [ "$code" = 507 ] && [ "$(field s3 entries)" = none ] ||
    fail "u1001's third set s3 while s1 was being replaced: HTTP $code, want 507: $(cat "$T/u/post.json")"
  ok "a replacement at the tenant's cap is taken whole while another set is asked for (that one: 507)"
fi
for s in s1 s2 rootset; do drop "$s"; done

# ---- hint-file buffers: per tenant, 4 MiB a file for users --------------------------------------
coproc HOLD { as1001 "$PY" "$HF" hold "$H/big" 5; }
: >"$T/hold.out"
while read -r line <&"${HOLD[0]}"; do
  echo "$line" >>"$T/hold.out"
  [ "$line" != held ] || break
done
grep -qx held "$T/hold.out" || fail "the holder ended early: $(cat "$T/hold.out")"
for i in 0 1 2 3; do
  grep -qx "file$i write EFBIG 4194304" "$T/hold.out" ||
    fail "u1001's file $i: want EFBIG at 4 MiB (the users' bound): $(cat "$T/hold.out")"
done
grep -q "^file4 write EDQUOT" "$T/hold.out" ||
  fail "u1001's fifth file: want EDQUOT (its tenant's share is used up): $(cat "$T/hold.out")"
out=$(as1003 "$PY" "$HF" write "$H/x2" $'/ds/a/f1.bin\n/ds/a/f2.bin\n')
grep -qx "write ok 26" <<<"$out" && grep -qx "close ok" <<<"$out" ||
  fail "u1003's hint file while u1001 holds its buffers: $out"
[ "$(field x2 entries)" = 2 ] || fail "u1003's set x2: $(field x2 entries) entries, want 2"
eval "exec ${HOLD[1]}>&-"
wait "$HOLD_PID" || true
ok "u1001 holds 4 files of 4 MiB (EFBIG) and a fifth fails EDQUOT; u1003's hint file is taken meanwhile"

# ---- the close's submission runs off the FUSE worker ------------------------------------------
if grep -q "TIERD_TEST_FAULT_FILE=$FAULT" "$T/tierd.log"; then
  held() { [ -e "$FAULT.close.$1.paused" ]; } # the close of hint file $1 is held
  echo "hint close pause" >"$FAULT.close.slow"
  as1001 "$PY" "$HF" write "$H/slow" $'/ds/a/f3.bin\n' >"$T/slow.out" &
  slow=$!
  wait_for 30 held slow || fail "the close of $H/slow did not reach its submission"
  stat -f "$MNT" >/dev/null || fail "statfs while a close is held"
  as1003 cat "$H/x2" >"$T/x2.txt" || fail "reading a control file while a close is held"
  grep -qx "entries: 2" "$T/x2.txt" || fail "x2's status while a close is held: $(cat "$T/x2.txt")"
  # another tenant's hint file is taken at its close meanwhile: another closer serves it
  out=$(as1003 "$PY" "$HF" write "$H/x1" $'/ds/a/f4.bin\n') # replaces x1 (990 entries)
  grep -qx "close ok" <<<"$out" || fail "u1003's close while u1001's is held: $out"
  [ "$(field x1 entries)" = 1 ] || fail "u1003's set x1 while u1001's close is held: $(field x1 entries) entries"
  held slow || fail "the close was no longer held: the checks above proved nothing"
  ok "one FUSE worker answers statfs, a control file's read and another tenant's hint-file close while a close is held in its submission"
  # every closer busy (three more closes held, root's p1..p3, each on a free closer): a close
  # with nothing to submit is answered without them
  others=()
  for p in p1 p2 p3; do
    echo "hint close pause" >"$FAULT.close.$p"
    "$PY" "$HF" write "$H/$p" $'/ds/a/f5.bin\n' >"$T/$p.out" &
    others+=($!)
    wait_for 30 held "$p" || fail "the close of $H/$p did not reach its submission (a closer was free)"
  done
  out=$(as1003 "$PY" "$HF" reopen "$H/x2")
  grep -qx "close ok" <<<"$out" || fail "u1003's close of x2 without a write while every closer is busy: $out"
  for p in slow p1 p2 p3; do
    held "$p" || fail "the close of $p was no longer held: the close without a write proved nothing"
  done
  [ "$(field x2 entries)" = 2 ] || fail "a close without a write changed x2: $(field x2 entries) entries"
  for p in slow p1 p2 p3; do : >"$FAULT.close.$p"; done
  wait "$slow" || fail "the held writer failed"
  grep -qx "close ok" "$T/slow.out" || fail "the held close: $(cat "$T/slow.out")"
  [ "$(field slow entries)" = 1 ] || fail "the held close's set: $(field slow entries) entries"
  for i in 0 1 2; do
    wait "${others[$i]}" || fail "root's held writer p$((i + 1)) failed"
    grep -qx "close ok" "$T/p$((i + 1)).out" || fail "root's held close p$((i + 1)): $(cat "$T/p$((i + 1)).out")"
  done
  ok "with all four closers held, a hint file's close without a write returns at once; the held closes then return ok"
else
  echo "skip: no test hooks in this build (the closer check needs TIER_TEST_HOOKS)"
fi

stop_tierd
ok "hintlimits_fuse passed"
