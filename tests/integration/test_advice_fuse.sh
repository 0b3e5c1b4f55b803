#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_advice_fuse.sh - the hot-tier advice and [tenants] auto_quota on a REAL mount over a POSIX
# backend (docs/ADVICE.md; run by CTest, label fuse; needs root and /dev/fuse).
#
# RAM cache 8 MiB of 256 KiB blocks, no disk level, equal static quotas of 4 MiB each
# ([tenants] cache_quota), the advice loop every second. Two tenants by uid (setpriv), reading
# with O_DIRECT so the kernel's page cache never answers:
#   reread  uid 1001: re-reads the same 6 MiB every round (it fits in the cache, not in 4 MiB)
#   scan    uid 1002: reads 8 MiB it never reads again every round
# Part 1, auto_quota off (curves on): after several rounds of advice nothing moved (quotas still
# 4 MiB, no quota change), while GET /v1/advice already advises reread more than 4 MiB; the
# backend bytes of one steady round are measured (the control).
# Part 2, auto_quota on, same start: rounds until reread's quota passes 6 MiB (a deadline of
# minutes, polled by doing rounds: no sleeps); then in a steady round reread's backend bytes are
# at most a quarter of the control's (its hit ratio rose), scan's actual hit ratio is not below
# what its curve predicted at its new share (less 0.05), the total backend bytes of a round fell,
# every quota change is logged and counted (GET /v1/advice quota_changes, /metrics), and
# `tierctl advise` shows both tenants.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup advice_fuse

[ "$(id -u)" = 0 ] || fail "needs root (readers as other uids)"
for tool in setpriv python3 dd; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done

chmod 0711 "$T"
mkdir -p "$DATA/ds/re" "$DATA/ds/scan" "$MNT"
chmod 0755 "$DATA" "$DATA/ds" "$DATA/ds/re" "$DATA/ds/scan" "$MNT"
for i in 0 1 2 3 4 5; do head -c 1048576 /dev/urandom >"$DATA/ds/re/$i.bin"; done
for i in $(seq -w 0 255); do head -c 1048576 /dev/urandom >"$DATA/ds/scan/$i.bin"; done
chmod 0644 "$DATA"/ds/re/*.bin "$DATA"/ds/scan/*.bin

write_conf() { # AUTO (on|off)
  {
    tierd_conf_section daemon "log_level = info"
    tierd_conf_section cache "ram_size = 8M" "block_size = 256K" "curves = on"
    tierd_conf_posix warm "$DATA"
    tierd_conf_ns /ds warm "prefix = ds"
    tierd_conf_mount "$MNT" "allow_other = true" "umask = 022"
    tierd_conf_api "$SOCK"
    tierd_conf_section tenants "cache_quota = 4M" "auto_quota = $1" "advice_interval = 1s"
    tierd_conf_section "tenant reread" "uid = 1001"
    tierd_conf_section "tenant scan" "uid = 1002"
  } >"$CONF"
}

as_uid() { # UID CMD...
  local u=$1
  shift
  setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"
}
NEXT_SCAN=0
round() { # one round: reread's 6 MiB, then 8 MiB of scan files it has not read yet
  local i f
  for i in 0 1 2 3 4 5; do
    as_uid 1001 dd if="$MNT/ds/re/$i.bin" bs=256K iflag=direct status=none |
      cmp -s "$DATA/ds/re/$i.bin" - || fail "reread read wrong bytes of re/$i.bin"
  done
  for i in 0 1 2 3 4 5 6 7; do
    f=$(printf '%03d' $(((NEXT_SCAN + i) % 256)))
    as_uid 1002 dd if="$MNT/ds/scan/$f.bin" bs=256K iflag=direct status=none |
      cmp -s "$DATA/ds/scan/$f.bin" - || fail "scan read wrong bytes of scan/$f.bin"
  done
  NEXT_SCAN=$(((NEXT_SCAN + 8) % 256))
}
# TENANT's backend bytes so far (every class), from /metrics
backend_bytes() {
  api /metrics | python3 -c '
import re, sys
t = sys.argv[1]; s = 0
for line in sys.stdin:
    m = re.match(r"tierd_sched_bytes_total\{tenant=\"([^\"]*)\",[^}]*\} (\S+)", line)
    if m and m.group(1) == t:
        s += float(m.group(2))
print(int(s))' "$1"
}
quota() { # TENANT: its quota from GET /v1/tenants
  api /v1/tenants | python3 -c '
import json, sys
t = {x["name"]: x for x in json.load(sys.stdin)["tenants"]}[sys.argv[1]]
print(t["cache"]["quota"])' "$1"
}
advice() { # PY-EXPRESSION over the answer `a` of GET /v1/advice and `t`, its tenants by name
  api /v1/advice | python3 -c '
import json, sys
a = json.load(sys.stdin); t = {x["name"]: x for x in a["tenants"]}
print(eval(sys.argv[1]))' "$1"
}
# The same, over the latest round that advised both tenants: a round lists only the tenants that
# read in its interval, so this does rounds of reads until one that lists both (or the deadline).
advice_both() {
  local deadline=$((SECONDS + 240)) out
  until out=$(api /v1/advice | python3 -c '
import json, sys
a = json.load(sys.stdin); t = {x["name"]: x for x in a["tenants"]}
if "reread" not in t or "scan" not in t:
    sys.exit(3)
print(eval(sys.argv[1]))' "$1" 2>/dev/null); do
    [ $SECONDS -lt $deadline ] || fail "no round of advice listed both tenants in 240 s: $(api /v1/advice)"
    round
  done
  echo "$out"
}
rounds_of_advice() { # wait, by doing rounds, until the advice has N more rounds than now
  local want=$(($(advice 'a["rounds"]') + $1)) deadline=$((SECONDS + 240))
  while [ "$(advice 'a["rounds"]')" -lt "$want" ]; do
    [ $SECONDS -lt $deadline ] || fail "the advice made no $1 rounds in 240 s"
    round
  done
}
steady_round() { # one round's backend bytes: "reread scan"
  local r0 s0
  r0=$(backend_bytes reread) s0=$(backend_bytes scan)
  round
  echo "$(($(backend_bytes reread) - r0)) $(($(backend_bytes scan) - s0))"
}

# ---- part 1: auto_quota off ---------------------------------------------------------------------
write_conf off
start_tierd
ok "mounted (auto_quota off)"
round
rounds_of_advice 3
[ "$(quota reread)" = 4194304 ] || fail "reread's quota moved to $(quota reread) with auto_quota off"
[ "$(quota scan)" = 4194304 ] || fail "scan's quota moved to $(quota scan) with auto_quota off"
[ "$(advice_both 't["reread"]["quota_changes"] + t["scan"]["quota_changes"]')" = 0 ] ||
  fail "quota changes counted with auto_quota off"
split=$(advice_both 't["reread"]["split_bytes"]')
[ "$split" -gt 4194304 ] || fail "the advice does not give reread more than its 4 MiB: $(api /v1/advice)"
read -r c_re c_scan <<<"$(steady_round)"
[ "$c_re" -ge $((3 * 1048576)) ] ||
  fail "control: reread fetched only $c_re bytes of its 6 MiB in a round with a 4 MiB quota (the check below could not fail)"
ok "auto_quota off: nothing moved in 3 rounds of advice; advised reread $split bytes; a round fetches reread $c_re, scan $c_scan bytes"
stop_tierd

# ---- part 2: auto_quota on ----------------------------------------------------------------------
write_conf on
start_tierd
ok "mounted (auto_quota on)"
deadline=$((SECONDS + 240))
while [ "$(quota reread)" -lt $((6 * 1048576)) ]; do
  [ $SECONDS -lt $deadline ] || fail "reread's quota is $(quota reread) after 240 s of rounds, want >= 6 MiB: $(api /v1/advice)"
  round
done
ok "auto_quota moved reread's quota to $(quota reread) bytes (scan: $(quota scan))"
round # its new quota holds its set from now on
read -r a_re a_scan <<<"$(steady_round)"
[ "$a_re" -le $((c_re / 4)) ] ||
  fail "reread fetched $a_re bytes in a round with quota $(quota reread), the control $c_re: its hit ratio did not rise"
[ $((a_re + a_scan)) -lt $((c_re + c_scan)) ] ||
  fail "a round's backend bytes did not fall: $((a_re + a_scan)) against the control's $((c_re + c_scan))"
pred=$(advice_both 't["scan"]["curve"] and [p for p in t["scan"]["curve"] if p["size_bytes"] >= t["scan"]["share_bytes"]][0]["hit_ratio"] or 0')
python3 -c 'import sys; hit = 1 - int(sys.argv[1]) / (8 * 1048576); sys.exit(0 if hit >= float(sys.argv[2]) - 0.05 else 1)' \
  "$a_scan" "$pred" || fail "scan's hit ratio fell below its curve's prediction ($pred): it fetched $a_scan of 8 MiB"
n=$(advice_both 't["reread"]["quota_changes"]')
[ "$n" -ge 1 ] || fail "GET /v1/advice counts no quota change for reread"
grep -q "advice: tenant reread's hot-tier quota 4194304 -> " "$T/tierd.log" ||
  fail "the first quota change is not logged"
api /metrics | grep -q "^tierd_advice_quota_changes_total{tenant=\"reread\"} $n\$" ||
  fail "/metrics does not count reread's $n quota changes"
deadline=$((SECONDS + 240)) # a round lists the tenants that read in it: rounds until both
until tierd_ctl advise >"$T/advise.out" && grep -q "^reread " "$T/advise.out" &&
  grep -q "^scan " "$T/advise.out"; do
  [ $SECONDS -lt $deadline ] || fail "tierctl advise did not show both tenants in 240 s: $(cat "$T/advise.out")"
  round
done
grep -q "auto_quota on" "$T/advise.out" || fail "tierctl advise does not say auto_quota is on"
ok "steady round: reread fetched $a_re bytes (control $c_re), scan $a_scan (control $c_scan, predicted hit $pred); $n quota changes logged and counted; tierctl advise shows them"
stop_tierd
