#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_cluster_tierd.sh - two tierd with the same [cluster] section join one cluster in the test
# Ceph's RADOS (CTest labels fuse + rgw, fixture rgw: scripts/ceph.sh wrote $TIER_CEPH_DIR).
#
# Asserts: a missing pool fails the start with the `ceph osd pool create` command to run; nodes n1
# and n2 (their own mounts, sockets and POSIX backends) each list both in `tierctl cluster` and
# GET /v1/cluster; n2 stopped with SIGTERM has left the object (no entry, no lock) when it exits
# and n1's view (told by the notify); n2 started again is back; n2 killed with SIGKILL leaves n1's view once its lock's lease lapses. No sleeps as
# synchronisation: every wait polls (wait_for).
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_rgw_setup cluster_tierd
POOL=tierd-cluster-test # test_cluster_member's pool too
CLUSTER=tierd-$$-$(date +%s)
PID2=
MNT2=$T/mnt2
SOCK2=$T/api2.sock
CONF2=$T/tierd2.conf
extra_cleanup() {
  if [ -n "$PID2" ] && kill -0 "$PID2" 2>/dev/null; then kill -KILL "$PID2" 2>/dev/null || true; fi
  if grep -qs " $MNT2 fuse" /proc/mounts; then umount -l "$MNT2" 2>/dev/null || true; fi
  radosc -p "$POOL" rm "tierd.cluster.$CLUSTER" >/dev/null 2>&1 || true
}
cephc() { timeout 120 ceph -c "$CEPH/ceph.conf" --connect-timeout 60 "$@"; }
radosc() { timeout 120 rados -c "$CEPH/ceph.conf" "$@"; }
pool_ready() { radosc -p "$POOL" ls >/dev/null 2>&1; }
# n2_locked: the lock node.n2 on the cluster's object has a locker (rados lock info's JSON)
n2_locked() {
  radosc -p "$POOL" lock info "tierd.cluster.$CLUSTER" node.n2 2>/dev/null |
    python3 -c 'import json, sys
try:
    j = json.load(sys.stdin)
except ValueError:
    sys.exit(1)
sys.exit(0 if j.get("lockers") else 1)'
}

# node_conf ID MNT SOCK DATA [POOL]: a tierd over a POSIX backend, in cluster $CLUSTER as ID
node_conf() {
  mkdir -p "$2" "$4"
  tierd_conf_section cache "ram_size = 64M"
  tierd_conf_posix data "$4"
  tierd_conf_ns /d data
  tierd_conf_mount "$2"
  tierd_conf_api "$3"
  tierd_conf_section cluster "name = $CLUSTER" "ceph_conf = $CEPH/ceph.conf" "pool = ${5:-$POOL}" \
    "node_id = $1" "address = 127.0.0.1:70${1#n}0" "lease = 30s" "secret_file = $T/secret"
}
head -c 32 /dev/urandom | base64 >"$T/secret"
chmod 600 "$T/secret"

# members SOCK: the ids in that tierd's GET /v1/cluster, space-separated
members() {
  tierd_api "$1" /v1/cluster | python3 -c \
    'import json,sys; print(" ".join(m["id"] for m in json.load(sys.stdin)["members"]))'
}
members_are() { [ "$(members "$1" 2>/dev/null)" = "$2" ]; }

start2() {
  tierd_spawn "$CONF2" "$T/tierd2.log"
  PID2=$TIERD_PID
  tierd_up "$MNT2" "" 120 || fail "n2 did not come up: $(tail -5 "$T/tierd2.log")"
}

# ---- a missing pool: the start fails and says how to create it -----------------------------
node_conf n1 "$MNT" "$SOCK" "$DATA" "tierd-no-such-pool-$$" >"$T/nopool.conf"
if timeout 300 "$TIERD" -c "$T/nopool.conf" -f >"$T/nopool.log" 2>&1; then
  fail "tierd started on a missing pool"
fi
grep -q "ceph osd pool create tierd-no-such-pool-$$" "$T/nopool.log" ||
  fail "missing pool: $(cat "$T/nopool.log")"
ok "a missing pool fails the start, naming the command that creates it"

# ---- two nodes see each other ----------------------------------------------------------------
cephc osd pool create "$POOL" >/dev/null 2>&1 || cephc osd pool ls | grep -qx "$POOL" ||
  fail "cannot create pool $POOL"
wait_for 300 pool_ready || fail "pool $POOL does not answer"
node_conf n1 "$MNT" "$SOCK" "$DATA" >"$CONF"
node_conf n2 "$MNT2" "$SOCK2" "$T/data2" >"$CONF2"
start_tierd
start2
wait_for 120 members_are "$SOCK" "n1 n2" || fail "n1 sees '$(members "$SOCK")', not n1 n2"
wait_for 120 members_are "$SOCK2" "n1 n2" || fail "n2 sees '$(members "$SOCK2")', not n1 n2"
js=$(tierd_api "$SOCK" /v1/cluster)
python3 - "$js" "$CLUSTER" <<'PY' || fail "GET /v1/cluster: $js"
import json, sys
j = json.loads(sys.argv[1])
assert j["enabled"] is True and j["name"] == sys.argv[2] and j["node_id"] == "n1", j
assert j["epoch"] > 0 and j["incarnation"] > 0 and isinstance(j["may_serve"], bool), j
m = {e["id"]: e for e in j["members"]}
assert m["n1"]["addr"] == "127.0.0.1:7010" and m["n2"]["addr"] == "127.0.0.1:7020", m
assert m["n1"]["incarnation"] == j["incarnation"] and m["n1"]["weight"] == 1.0, m
PY
table=$("$TIERCTL" -s "$SOCK2" cluster) || fail "tierctl cluster failed"
grep -Eq "^cluster $CLUSTER: node n2, epoch [0-9]+, 2 members( \(this node may not serve peers: fenced\))?$" \
  <<<"$table" || fail "table: $table"
grep -q "^n1 .*127.0.0.1:7010 .* 50.0%" <<<"$table" || fail "table lacks n1: $table"
grep -q "^n2 .*127.0.0.1:7020 .*(this node)" <<<"$table" || fail "table lacks n2: $table"
ok "n1 and n2 each list both (GET /v1/cluster, tierctl cluster)"

# ---- SIGTERM: n2 leaves -----------------------------------------------------------------------
# the same check that must find n2's lock gone after its exit finds it while n2 runs
n2_locked || fail "n2's lock is not seen while it runs: $(radosc -p "$POOL" lock info "tierd.cluster.$CLUSTER" node.n2 2>&1)"
tierd_stop "$PID2" || fail "n2 exited with $? after SIGTERM"
PID2=
# the leave ran before the exit: no entry and no lock of n2's is left for a lease to clear
keys=$(radosc -p "$POOL" listomapkeys "tierd.cluster.$CLUSTER") || fail "listomapkeys failed"
! grep -qx "node.n2" <<<"$keys" || fail "n2's entry is still in the object after its exit: $keys"
n2_locked && fail "n2's lock is still held after its exit: $(radosc -p "$POOL" lock info "tierd.cluster.$CLUSTER" node.n2 2>&1)"
wait_for 120 members_are "$SOCK" "n1" || fail "after n2's SIGTERM n1 sees '$(members "$SOCK")'"
ok "n2 stopped (SIGTERM) left: its entry and lock gone at exit, and n1's view"

# ---- SIGKILL: n2's entry goes once its lease lapses -------------------------------------------
start2
wait_for 120 members_are "$SOCK" "n1 n2" || fail "n2 restarted: n1 sees '$(members "$SOCK")'"
kill -KILL "$PID2"
wait "$PID2" 2>/dev/null || true
PID2=
umount -l "$MNT2" 2>/dev/null || true
wait_for 300 members_are "$SOCK" "n1" || fail "after n2's SIGKILL n1 sees '$(members "$SOCK")'"
ok "n2 killed (SIGKILL): n1 removes it after the lease"

stop_tierd
ok "n1 stopped cleanly"
