#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_qos_fuse.sh - per-tenant QoS limits on a REAL mount over a POSIX backend, and a live
# change through PUT /v1/qos (run by CTest, label fuse; needs root and /dev/fuse).
#
# Two tenants, matched by uid: [tenant alice] uid 1001 limit = 4MiB/s, [tenant bob] uid 1002
# limit = 8MiB/s. Every read is of a fresh file (sparse, 4 GiB, read once, sequentially, by dd as
# the tenant's uid), so every block is a miss of the small RAM cache and a backend call at the
# scheduling point; the tenant's prefetch is charged to it too. Delivered = the bytes the warm
# lane granted the tenant (GET /v1/qos granted_bytes, summed over classes) between two answers,
# over the difference of their now_ns.
#   1. alice and bob read at once for at least WINDOW s: each tenant's bytes <= 1.05 x limit x
#      elapsed + one block + limit x 20 ms (the scheduler's documented slack), where elapsed runs
#      from before the first answer was asked to after the last came (it can only be longer than
#      the grants it holds), and each tenant's bytes grew at all (the readers went on; the window
#      is extended until they did, up to 30 s). Load only lowers the bytes and lengthens the
#      window, so neither bound can fail on a busy machine (a lower bound on a rate could).
#   2. alice idle, bob's limit lifted with PUT /v1/qos {"limit": null}: GET /v1/qos shows no
#      limit in force for bob, bob's bytes grow, and the lane's limit_waits (the times every
#      waiting call was held by its limit while slots were free) do not grow over the window:
#      no call of bob's waited for a limit any more (a limit still in force would, on a quiet
#      machine, make them grow; a rate that must beat the old limit could fail under load).
#   3. live change, with bob's reader still running: PUT limit = 4MiB/s at t_put; the bytes from
#      t_put + 1 s over at least 2 s <= 4 MiB/s x the window x 1.05 + one block + the slack, and
#      they grew at all (as in 1); GET /v1/qos shows the 4 MiB/s limit in force: the new limit
#      holds within 1 s of the PUT.
#   4. tierctl qos shows both tenants; tierctl qos set changes bob's values, on every lane and with
#      backend=warm on that lane's own; a negative limit and an unknown backend are refused.
# The sleeps of WINDOW seconds below are measurement windows of a rate test (a rate is bytes over
# a time), not synchronisation: readiness (the mount, a reader's first grant) is polled with
# deadlines.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup qos_fuse

[ "$(id -u)" = 0 ] || fail "needs root (readers as other uids)"
for tool in setpriv python3 curl dd truncate; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done

MIB=1048576
BLOCK=$MIB
WINDOW=${QOS_WINDOW:-4}

chmod 0711 "$T"
mkdir -p "$DATA/ds" "$MNT"
chmod 0755 "$DATA" "$DATA/ds" "$MNT"
for f in alice1 bob1 bob2; do truncate -s 4G "$DATA/ds/$f.bin"; done
chmod 0644 "$DATA"/ds/*.bin

{
  tierd_conf_section daemon "log_level = info" "backend_timeout = 60s"
  tierd_conf_section cache "ram_size = 16M" "block_size = 1M"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022"
  tierd_conf_api "$SOCK"
  tierd_conf_section "tenant alice" "uid = 1001" "limit = 4MiB/s"
  tierd_conf_section "tenant bob" "uid = 1002" "limit = 8MiB/s"
} >"$CONF"

start_tierd
ok "mounted"

# qos_snap: "asked_ns answered_ns alice_bytes bob_bytes limit_waits bob_limit" from GET /v1/qos
# (the warm lane), with CLOCK_MONOTONIC (tierd's now_ns) read just before the request went and
# just after the answer came: the counters were read between the two
qos_snap() {
  python3 - "$SOCK" <<'PY'
import json, subprocess, sys, time
t0 = time.monotonic_ns()
out = subprocess.run(["curl", "-sSf", "--unix-socket", sys.argv[1], "http://tierd/v1/qos"],
                     check=True, capture_output=True).stdout
t1 = time.monotonic_ns()
b = [b for b in json.loads(out)["backends"] if b["name"] == "warm"][0]
t = {t["name"]: t for t in b["tenants"]}
g = {n: t[n]["granted_bytes"] if n in t else 0 for n in ("alice", "bob")}
print(t0, t1, g["alice"], g["bob"], b["limit_waits"], t["bob"]["limit"] if "bob" in t else None)
PY
}
granted() { # TENANT: granted bytes now
  local s
  s=$(qos_snap) || return 1
  set -- "$1" $s
  if [ "$1" = alice ]; then echo "$4"; else echo "$5"; fi
}
# check LABEL BYTES SECONDS LIMIT: 0 < BYTES <= 1.05 x LIMIT x SECONDS + block + slack; prints
# the rate
check_rate() {
  python3 - "$@" "$BLOCK" <<'PY'
import sys
label, got, secs, limit, block = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5])
hi = 1.05 * limit * secs + block + limit * 0.020
rate = got / secs / 1048576
print(f"{label}: {got} bytes in at most {secs:.2f} s = {rate:.2f} MiB/s (limit {limit / 1048576:.2f} MiB/s, "
      f"allowed 1 .. {hi:.0f})")
sys.exit(0 if 0 < got <= hi else 1)
PY
}
# window T0 A0 B0: snapshots until at least WINDOW s after T0 and until both alice's (A0) and
# bob's (B0) bytes grew (an empty A0 leaves alice out), up to 30 s; the last in S1
window() {
  local t0=$1 a0=$2 b0=$3 w1 a1 b1
  sleep_until $((t0 + WINDOW * 1000000000)) # measurement window (not synchronisation)
  while :; do
    S1=$(qos_snap)
    read -r _ w1 a1 b1 _ <<<"$S1"
    { [ "$b1" -gt "$b0" ] && { [ -z "$a0" ] || [ "$a1" -gt "$a0" ]; }; } && return 0
    [ $((w1 - t0)) -lt 30000000000 ] || return 0
    sleep 0.5 # the measurement window grows (not synchronisation)
  done
}
# tierd's now_ns is CLOCK_MONOTONIC, as Python's time.monotonic_ns()
sleep_until() { python3 -c 'import sys, time; time.sleep(max(0, (int(sys.argv[1]) - time.monotonic_ns()) / 1e9))' "$1"; }
secs_between() { python3 -c "print(($2 - $1) / 1e9)"; }
put_qos() { # BODY: PUT /v1/qos, the answer on stdout
  curl -sS -f --unix-socket "$SOCK" -X PUT -d "$1" http://tierd/v1/qos
}
reader() { # UID FILE: read FILE as UID until killed (the background subshell becomes dd)
  exec setpriv --reuid="$1" --regid="$1" --clear-groups -- dd if="$2" of=/dev/null bs=1M status=none
}
started() { [ "$(granted "$1")" -gt 0 ]; }
RPIDS=()
extra_cleanup() {
  local p
  for p in "${RPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}

# ---- 1. both tenants at their limits ----------------------------------------------------------
reader 1001 "$MNT/ds/alice1.bin" &
RPIDS+=($!)
A_PID=$!
reader 1002 "$MNT/ds/bob1.bin" &
RPIDS+=($!)
B_PID=$!
wait_for 20 started alice || fail "alice's reader got no backend grant within 20 s"
wait_for 20 started bob || fail "bob's reader got no backend grant within 20 s"
read -r t0 _ a0 b0 _ <<<"$(qos_snap)"
window "$t0" "$a0" "$b0"
read -r _ t1 a1 b1 _ <<<"$S1"
secs=$(secs_between "$t0" "$t1")
check_rate "alice (4MiB/s)" $((a1 - a0)) "$secs" $((4 * MIB)) || fail "alice's limit (or her reader stopped)"
check_rate "bob (8MiB/s)" $((b1 - b0)) "$secs" $((8 * MIB)) || fail "bob's limit (or his reader stopped)"
ok "two tenants read at once, each within its limit"
kill "$A_PID" "$B_PID" 2>/dev/null || true
wait "$A_PID" "$B_PID" 2>/dev/null || true
# alice is idle once the calls her reader and its prefetch left queued at her limit are granted
alice_idle() {
  api /v1/qos | python3 -c '
import json, sys
b = [b for b in json.load(sys.stdin)["backends"] if b["name"] == "warm"][0]
t = [t for t in b["tenants"] if t["name"] == "alice"][0]
sys.exit(0 if sum(c["queued_now"] for c in t["classes"].values()) == 0 else 1)'
}
wait_for 30 alice_idle || fail "alice's queued calls did not drain within 30 s"

# ---- 2. alice idle, bob unlimited ---------------------------------------------------------------
put_qos '{"tenant": "bob", "limit": null}' >"$T/put1.json" || fail "PUT /v1/qos bob limit null"
python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["backends"][0]["tenants"][0]
assert t["name"] == "bob" and t["limit"] is None, t' "$T/put1.json" ||
  fail "PUT answer does not show bob without a limit: $(cat "$T/put1.json")"
b_before=$(granted bob)
reader 1002 "$MNT/ds/bob2.bin" &
RPIDS+=($!)
B_PID=$!
bob_above() { [ "$(granted bob)" -gt "$1" ]; }
wait_for 20 bob_above "$b_before" || fail "bob's second reader got no grant"
read -r t0 _ a0 b0 lw0 _ <<<"$(qos_snap)"
window "$t0" "" "$b0"
read -r _ t1 a1 b1 lw1 blim <<<"$S1"
echo "bob alone, no limit: $((b1 - b0)) bytes in at most $(secs_between "$t0" "$t1") s; alice: $((a1 - a0)) bytes; limit_waits $lw0 -> $lw1; bob's limit in force: $blim"
[ "$blim" = None ] || fail "GET /v1/qos shows a limit in force for bob after it was lifted: $blim"
[ $((b1 - b0)) -gt 0 ] || fail "bob's reader got no grant in 30 s with its limit lifted"
[ "$lw1" = "$lw0" ] || fail "with bob's limit lifted and alice idle, calls still waited for a limit ($((lw1 - lw0)) times)"
[ $((a1 - a0)) = 0 ] || fail "alice, idle, was granted $((a1 - a0)) bytes"
ok "with alice idle and bob's limit lifted, bob reads and no call waits for a limit"

# ---- 3. live change: lower bob's limit while he reads -------------------------------------------
put_qos '{"tenant": "bob", "limit": "4MiB/s"}' >"$T/put2.json" || fail "PUT /v1/qos bob 4MiB/s"
t_put=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["now_ns"])' "$T/put2.json")
sleep_until $((t_put + 1000000000)) # measurement window's start (not synchronisation)
read -r t0 _ a0 b0 _ <<<"$(qos_snap)"
python3 -c "import sys; sys.exit(0 if $t0 - $t_put >= 1e9 else 1)" || fail "window started early"
WINDOW=2 window "$t0" "" "$b0"
read -r _ t1 a1 b1 _ blim <<<"$S1"
[ "$blim" = $((4 * MIB)) ] || fail "GET /v1/qos shows bob's limit in force as $blim (want 4 MiB/s)"
secs=$(secs_between "$t0" "$t1")
check_rate "bob after PUT limit=4MiB/s, from $(secs_between "$t_put" "$t0") s after it" \
  $((b1 - b0)) "$secs" $((4 * MIB)) || fail "the lowered limit did not hold within 1 s (or bob's reader stopped: see tierd.log)"
ok "a limit lowered with PUT /v1/qos holds within 1 s, without remounting"
kill "$B_PID" 2>/dev/null || true
wait "$B_PID" 2>/dev/null || true

# tierctl qos shows both tenants with their limits and a delivered column
tierd_ctl qos --interval 0.2 >"$T/ctl.txt" || fail "tierctl qos: $(cat "$T/ctl.txt")"
grep -Eq '^warm +bob +training .* 4(\.0)? ?MiB/s' "$T/ctl.txt" || fail "tierctl qos lacks bob's 4 MiB/s limit: $(cat "$T/ctl.txt")"
grep -Eq '^warm +alice +training ' "$T/ctl.txt" || fail "tierctl qos lacks alice: $(cat "$T/ctl.txt")"
tierd_ctl qos set bob limit=2MiB/s weight=7 >"$T/set.txt" || fail "tierctl qos set: $(cat "$T/set.txt")"
grep -Eq '^warm +bob +training +- +7 ' "$T/set.txt" || fail "tierctl qos set did not show weight 7: $(cat "$T/set.txt")"
if tierd_ctl qos set bob limit=-2MiB/s 2>"$T/bad.txt"; then fail "tierctl qos set accepted a negative limit"; fi
grep -q "negative" "$T/bad.txt" || fail "the refusal of a negative limit does not say so: $(cat "$T/bad.txt")"
# backend=NAME: the lane's own values (this mount has one backend; test_api covers two)
tierd_ctl qos set bob backend=warm class=training limit=3MiB/s >"$T/set2.txt" || fail "tierctl qos set backend=warm: $(cat "$T/set2.txt")"
grep -Eq '^warm +bob +training +- +7 +3(\.0)? ?MiB/s +2(\.0)? ?MiB/s ' "$T/set2.txt" || fail "tierctl qos set backend=warm did not show the class limit 3 MiB/s beside the tenant limit 2 MiB/s: $(cat "$T/set2.txt")"
if tierd_ctl qos set bob backend=nope weight=2 2>"$T/bad2.txt"; then fail "tierctl qos set accepted an unknown backend"; fi
grep -q "backend 'nope' is not configured" "$T/bad2.txt" || fail "the refusal of backend nope does not name it: $(cat "$T/bad2.txt")"
ok "tierctl qos and tierctl qos set (every lane, backend=NAME)"
