#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_disk_qos_fuse.sh - the local disk's QoS lane on a REAL mount (run by CTest, label fuse;
# needs root and /dev/fuse): a tenant's disk_limit holds for its disk-level hits while another
# tenant's disk hits go at the disk's speed.
#
# A RAM-less cache (ram_size = 0: every hit is a read of a block file) over a POSIX backend; two
# 24 MiB files staged onto the disk level first (tierctl stage, as root: the default tenant, no
# limit). Then at once: uid 1001 ([tenant slow], disk_limit = 6MiB/s) reads a.bin through the
# mount, root (the default tenant) reads b.bin. Asserts: both get the backend's bytes; no backend
# fetch happened during the reads and the disk level's hits grew (every byte came from the disk
# level, through the lane); slow's read took at least 3.5 s (24 MiB at 6 MiB/s is 4 s; dmclock.h
# allows 20 ms of slack and one request more), so its limit held; the disk lane (GET /v1/qos
# disk) charged slow with its own 24 MiB and no more (root's reads are not counted against
# slow's limit), and the limit in force for the default tenant, per class and as a tenant, is
# none, with no lane capacity: dmClock holds back only a client with a limit, so root's calls are
# not held back. Load only lengthens slow's read and changes no counter, so none of this can
# fail on a busy machine (a wall-clock comparison of the two readers could). Each file is read
# once, new to the kernel's page cache (staging reads no page of the mount), so every byte is
# asked of tierd. No sleeps as synchronisation: waits poll a condition with a deadline.
#
# Then a live change of the disk lane (PUT /v1/qos "resource": "disk"): while uid 1001 reads a
# third staged file (c.bin, 48 MiB) under its 6 MiB/s disk limit, the limit is lowered to 2 MiB/s;
# the bytes the disk lane granted tenant slow (GET /v1/qos disk.tenants[].granted_bytes) from
# t_put + 1 s on, over a window of at least 2 s (measured from before the first answer was asked
# to after the last one came, so the window can only be longer than the grants it holds), are
# <= 1.05 x 2 MiB/s x the window + one block + the scheduler's 20 ms of slack (load only lowers
# them), and grew at all (the reader went on under the new limit; the window is extended until
# they grew, up to 30 s); GET /v1/qos shows the 2 MiB/s limit in force. tierctl qos shows the disk
# row with the new limit; the warm backend lane's values are untouched. The sleeps there are a
# measurement window of a rate (bytes over a time), not synchronisation.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup disk_qos_fuse

[ "$(id -u)" = 0 ] || fail "needs root (a reader as another uid)"
for tool in setpriv python3; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done

SIZE=$((24 * 1048576))
chmod 0711 "$T"
mkdir -p "$DATA/ds" "$MNT"
chmod 0755 "$DATA" "$DATA/ds" "$MNT"
head -c "$SIZE" /dev/urandom >"$DATA/ds/a.bin"
head -c "$SIZE" /dev/urandom >"$DATA/ds/b.bin"
head -c $((48 * 1048576)) /dev/urandom >"$DATA/ds/c.bin"
chmod 0644 "$DATA"/ds/*.bin

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 0" "block_size = 1M" "disk_dir = $T/cache" \
    "disk_size = 256M" "disk_min_free = 0"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022" "readahead_blocks = 0"
  tierd_conf_api "$SOCK"
  tierd_conf_section "tenant slow" "uid = 1001" "class = training" "disk_limit = 6MiB/s"
} >"$CONF"

start_tierd
ok "mounted"

stats() { # KEY: cache.disk.hits, cache.disk.blocks or cache.fetches from /v1/stats
  api /v1/stats | python3 -c 'import json, sys
j = json.load(sys.stdin)["cache"]
for k in sys.argv[1].split("."):
    j = j[k]
print(j)' "$1"
}

tierd_ctl stage "$MNT/ds/a.bin" >/dev/null || fail "tierctl stage a.bin"
tierd_ctl stage "$MNT/ds/b.bin" >/dev/null || fail "tierctl stage b.bin"
tierd_ctl stage "$MNT/ds/c.bin" >/dev/null || fail "tierctl stage c.bin"
blocks=$(stats disk.blocks)
[ "$blocks" = 96 ] || fail "after staging, $blocks blocks on the disk level (want 96)"
ok "the three files staged onto the disk level (96 blocks)"
hits0=$(stats disk.hits)
fetches0=$(stats fetches)
# disk_lane: the disk lane of GET /v1/qos as JSON
disk_lane() { api /v1/qos | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["disk"]))'; }
disk_lane >"$T/lane0.json" || fail "GET /v1/qos"

now_ns() { date +%s%N; }
# reader NAME CMD...: run CMD (it prints the file), compare with the backend's, note the times
reader() {
  local name=$1 t0
  shift
  t0=$(now_ns)
  if "$@" | cmp -s "$DATA/ds/$name.bin" -; then : >"$T/ok.$name"; fi
  echo "$t0 $(now_ns)" >"$T/time.$name"
}
reader a setpriv --reuid=1001 --regid=1001 --clear-groups -- cat "$MNT/ds/a.bin" &
pa=$!
reader b cat "$MNT/ds/b.bin" &
pb=$!
wait "$pa" || true
wait "$pb" || true
[ -e "$T/ok.a" ] || fail "uid 1001 read wrong bytes of a.bin (or failed)"
[ -e "$T/ok.b" ] || fail "root read wrong bytes of b.bin (or failed)"
ok "both readers got the backend's bytes"

fetches1=$(stats fetches)
hits1=$(stats disk.hits)
[ "$fetches1" = "$fetches0" ] || fail "$((fetches1 - fetches0)) backend fetches during the reads (want 0: all from disk)"
[ "$hits1" -ge $((hits0 + 48)) ] || fail "disk hits grew by $((hits1 - hits0)) (want >= 48)"
ok "every byte from the disk level: $((hits1 - hits0)) disk hits, no fetch"

disk_lane >"$T/lane1.json" || fail "GET /v1/qos"
read -r a0 a1 <"$T/time.a"
read -r b0 b1 <"$T/time.b"
ta=$((a1 - a0))
tb=$((b1 - b0))
echo "slow (6 MiB/s disk limit): $((ta / 1000000)) ms; default tenant: $((tb / 1000000)) ms (not compared: load alone decides it)"
[ "$ta" -ge 3500000000 ] || fail "tenant slow read 24 MiB of disk hits in $((ta / 1000000)) ms: its 6 MiB/s disk limit did not hold (>= 3500 ms)"
ok "the disk limit held for tenant slow ($((ta / 1000000)) ms for 24 MiB)"
python3 - "$T/lane0.json" "$T/lane1.json" "$SIZE" <<'PY' || fail "the disk lane's counters: see above"
import json, sys
l0, l1 = (json.load(open(f)) for f in sys.argv[1:3])
size = int(sys.argv[3])
t0 = {t["name"]: t for t in l0["tenants"]}
t1 = {t["name"]: t for t in l1["tenants"]}
slow = t1["slow"]["granted_bytes"] - t0["slow"]["granted_bytes"]
dflt = t1["default"]
print(f"disk lane: slow granted {slow} bytes during the reads; default tenant: limit {dflt['limit']}, "
      f"class limits {[c['limit'] for c in dflt['classes'].values()]}, lane capacity {l1['capacity']}")
ok = True
if not size <= slow < size + 1048576:
    print(f"slow's reads of {size} bytes were charged {slow} bytes (want its own bytes, not root's)")
    ok = False
if t1["slow"]["limit"] != 6 * 1048576:
    print(f"slow's disk limit in force: {t1['slow']['limit']} (want 6 MiB/s)")
    ok = False
if dflt["limit"] is not None or any(c["limit"] is not None for c in dflt["classes"].values()):
    print("the default tenant has a disk limit in force: its reads may be held back")
    ok = False
if l1["capacity"] is not None:
    print(f"the disk lane has a capacity: {l1['capacity']}")
    ok = False
sys.exit(0 if ok else 1)
PY
ok "the disk lane charged slow its own 24 MiB only, and holds the default tenant to no limit"

# ---- a live change of the disk lane: PUT /v1/qos {"resource": "disk"} ------------------------
# disk_snap: "asked_ns answered_ns granted_bytes limit" of tenant slow on the disk lane, with
# CLOCK_MONOTONIC (tierd's now_ns) read just before the request went and just after the answer
# came: the granted bytes were read between the two
disk_snap() {
  python3 - "$SOCK" <<'PY'
import json, subprocess, sys, time
t0 = time.monotonic_ns()
out = subprocess.run(["curl", "-sSf", "--unix-socket", sys.argv[1], "http://tierd/v1/qos"],
                     check=True, capture_output=True).stdout
t1 = time.monotonic_ns()
t = [t for t in json.loads(out)["disk"]["tenants"] if t["name"] == "slow"][0]
print(t0, t1, t["granted_bytes"], t["limit"])
PY
}
slow_granted() { local s; s=$(disk_snap) && set -- $s && echo "$3"; }
g_before=$(slow_granted)
# the reader reads c.bin again and again (ram_size = 0: every read is a disk grant), so it still
# reads when the window opens however late a loaded machine opens it (one pass of 48 MiB could end
# before that: it read at 6 MiB/s until the PUT)
setpriv --reuid=1001 --regid=1001 --clear-groups -- \
  sh -c 'while cat "$1"; do :; done' reader "$MNT/ds/c.bin" >/dev/null &
pc=$!
stop_reader() { pkill -P "$pc" 2>/dev/null || true; kill "$pc" 2>/dev/null || true; }
extra_cleanup() { stop_reader; }
slow_reads() { [ "$(slow_granted)" -gt "$g_before" ]; }
wait_for 20 slow_reads || fail "uid 1001's read of c.bin got no disk grant within 20 s"
curl -sS -f --unix-socket "$SOCK" -X PUT -d '{"tenant": "slow", "resource": "disk", "limit": "2MiB/s"}' \
  http://tierd/v1/qos >"$T/put.json" || fail "PUT /v1/qos resource disk: $(cat "$T/put.json")"
python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
t = j["disk"]["tenants"][0]
assert t["name"] == "slow" and t["limit"] == 2 * 1048576, t
w = [t for t in j["backends"][0]["tenants"] if t["name"] == "slow"][0]
assert w["limit"] is None, w' "$T/put.json" || fail "the PUT answer does not show slow's disk limit of 2 MiB/s alone: $(cat "$T/put.json")"
t_put=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["now_ns"])' "$T/put.json")
# tierd's now_ns is CLOCK_MONOTONIC, as Python's time.monotonic_ns()
sleep_until() { python3 -c 'import sys, time; time.sleep(max(0, (int(sys.argv[1]) - time.monotonic_ns()) / 1e9))' "$1"; }
sleep_until $((t_put + 1000000000)) # measurement window's start (not synchronisation)
read -r w0 _ g0 _ <<<"$(disk_snap)"
sleep_until $((w0 + 2000000000)) # measurement window
read -r _ w1 g1 lim <<<"$(disk_snap)"
# a starved reader may have been granted nothing yet: the window goes on until it was, or 30 s
while [ "$g1" -le "$g0" ] && [ $((w1 - w0)) -lt 30000000000 ]; do
  sleep 0.5 # the measurement window grows (not synchronisation)
  read -r _ w1 g1 lim <<<"$(disk_snap)"
done
python3 - $((g1 - g0)) "$w0" "$w1" "$t_put" "$lim" <<'PY' || fail "the disk limit lowered with PUT /v1/qos did not hold from 1 s after it (or slow's reader stopped: see tierd.log)"
import sys
got, w0, w1, t_put, lim = (int(a) for a in sys.argv[1:6])
secs, limit, block = (w1 - w0) / 1e9, 2 * 1048576, 1048576
hi = 1.05 * limit * secs + block + limit * 0.020
print(f"slow on the disk after PUT limit=2MiB/s, from {(w0 - t_put) / 1e9:.2f} s after it: "
      f"{got} bytes in at most {secs:.2f} s = {got / secs / 1048576:.2f} MiB/s (allowed 1 .. {hi:.0f}); "
      f"limit in force {lim}")
sys.exit(0 if w0 - t_put >= 1e9 and 0 < got <= hi and lim == limit else 1)
PY
ok "a disk limit lowered with PUT /v1/qos holds within 1 s, without remounting"
tierd_ctl qos --interval 0 >"$T/ctl.txt" || fail "tierctl qos: $(cat "$T/ctl.txt")"
grep -Eq '^\(disk\) +slow +training .* 2(\.0)? ?MiB/s' "$T/ctl.txt" || fail "tierctl qos lacks slow's disk row with 2 MiB/s: $(cat "$T/ctl.txt")"
grep -Eq '^warm +slow +training +- +16 +- +- ' "$T/ctl.txt" || fail "tierctl qos: slow's warm row changed: $(cat "$T/ctl.txt")"
tierd_ctl qos set slow resource=disk weight=3 >"$T/set.txt" || fail "tierctl qos set resource=disk: $(cat "$T/set.txt")"
grep -Eq '^\(disk\) +slow +training +[^ ]+ +3 ' "$T/set.txt" || fail "tierctl qos set resource=disk did not show weight 3: $(cat "$T/set.txt")"
if tierd_ctl qos set slow resource=disk reservation=5MiB/s 2>"$T/bad.txt"; then
  fail "tierctl qos set accepted a disk reservation above the disk limit"
fi
grep -q "above the tenant's limit" "$T/bad.txt" || fail "the refusal does not say why: $(cat "$T/bad.txt")"
ok "tierctl qos shows the disk lane; tierctl qos set resource=disk changes it"
kill "$pc" 2>/dev/null || true
pkill -P "$pc" 2>/dev/null || true
wait "$pc" 2>/dev/null || true
