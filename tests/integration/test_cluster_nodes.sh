#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_cluster_nodes.sh - four tierd of one [cluster], each in its own network namespace with its
# own mount, cache and peer endpoint (TLS), joined to the test Ceph and to each other by
# scripts/clusternet.sh's bridge, each link shaped with tc tbf (CTest labels fuse + rgw, fixture
# rgw; scripts/lib/clusternodes.sh has the helpers).
#
# Asserts, each over objects no node has read before:
#   - the four nodes read set A at once, every byte right; the RGW gave them at most 1.1x the set;
#   - n4 killed (SIGKILL) while n1..n3 read set B: every read right (no read fails because a peer
#     did), and n4 leaves every view after its lease;
#   - n4 back with an empty cache joins the warm cluster and reads set A from its peers: less
#     than 1 % of its bytes from the RGW (the blocks it now owns come from their previous owner);
#   - n3 stopped (SIGSTOP): n1 reads set C right (a request to n3 costs one peer_timeout, then
#     the backend); n3 leaves n1's view after its lease; resumed (SIGCONT) it joins again with a
#     new incarnation.
# No sleeps as synchronisation: every wait polls (wait_for).
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_rgw_setup cluster_nodes
# shellcheck source=scripts/lib/clusternodes.sh
. "$SRC/scripts/lib/clusternodes.sh"
BUCKET=tierd-nodes-$$-$(date +%s)
NOBJ=16
OBJ_KIB=2560 # 2.5 blocks of 1 MiB
SET_BYTES=$((NOBJ * OBJ_KIB * 1024))
RATE=200mbit

extra_cleanup() {
  cn_cleanup
  timeout 120 rados -c "$CEPH/ceph.conf" -p "$CN_POOL" rm "tierd.cluster.$CN_CLUSTER" \
    >/dev/null 2>&1 || true
}
cephc() { timeout 120 ceph -c "$CEPH/ceph.conf" --connect-timeout 60 "$@"; }
pool_ready() { timeout 120 rados -c "$CEPH/ceph.conf" -p "$CN_POOL" ls >/dev/null 2>&1; }

cn_init tierd-cn "tierd-cluster-test" "nodes-$$-$(date +%s)" 20s || fail "cannot set up the nodes"
cephc osd pool create "$CN_POOL" >/dev/null 2>&1 || cephc osd pool ls | grep -qx "$CN_POOL" ||
  fail "cannot create pool $CN_POOL"
wait_for 300 pool_ready || fail "pool $CN_POOL does not answer"

make_set() {
  tierd_bench_files "$T/src/$1" "$NOBJ" "$OBJ_KIB"
  tierd_bench_upload "$T/src/$1" "$S3_ENDPOINT/$BUCKET/$1"
}
# read_set N NAME: every file of set NAME through node N's mount, compared with its source
read_set() { tierd_compare_files "$T/src/$2" "$T/mnt$1/d/$2"; }
# read_all NAME N...: read_set NAME on each node N at once; fails when any read did
read_all() {
  local set=$1 n pids=() rc=0
  shift
  for n in "$@"; do
    read_set "$n" "$set" &
    pids+=($!)
  done
  for n in "${pids[@]}"; do wait "$n" || rc=1; done
  return $rc
}

tierd_s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null || fail "cannot create bucket $BUCKET"
for s in A B C; do make_set "$s"; done
for n in 1 2 3 4; do
  cn_net_up "$n" "$RATE" || fail "cannot make node $n's namespace"
  cn_conf "$n" >"$T/tierd$n.conf"
done
for n in 1 2 3 4; do cn_start "$n" || fail "n$n did not come up: $(tail -5 "$T/tierd$n.log")"; done
for n in 1 2 3 4; do
  wait_for 120 cn_members_are "$n" "n1 n2 n3 n4" || fail "n$n sees '$(cn_members "$n")'"
done
ok "four nodes in their own namespaces see each other"

# ---- set A: four nodes at once, each block from the RGW once ----------------------------------
read_all A 1 2 3 4 || fail "a read of set A failed"
total=0
for n in 1 2 3 4; do total=$((total + $(cn_fetched "$n"))); done
[ "$total" -le $((SET_BYTES * 11 / 10)) ] ||
  fail "four nodes fetched $total bytes from the RGW for a set of $SET_BYTES (more than 1.1x)"
ok "four nodes read set A at once, right; $total bytes from the RGW for $SET_BYTES"

# ---- n4 killed while n1..n3 read set B --------------------------------------------------------
asked0=$(cn_q 1 'j["peers"]["requests"]')
read_all B 1 2 3 >"$T/readB.out" 2>&1 &
readers=$!
peer_asked() { [ "$(cn_q 1 'j["peers"]["requests"]')" -gt "$asked0" ]; }
wait_for 120 peer_asked || fail "n1 asks no peer for set B"
cn_kill 4
wait "$readers" || fail "a read failed after n4 was killed: $(cat "$T/readB.out")"
for n in 1 2 3; do
  wait_for 300 cn_members_are "$n" "n1 n2 n3" || fail "after n4's SIGKILL n$n sees '$(cn_members "$n")'"
done
ok "n4 killed during reads of set B: every read right, n4 left every view"

# ---- n4 joins the warm cluster ----------------------------------------------------------------
rm -rf "$T/cache4"
cn_start 4 || fail "n4 did not come back: $(tail -5 "$T/tierd4.log")"
for n in 1 2 3 4; do
  wait_for 120 cn_members_are "$n" "n1 n2 n3 n4" || fail "n$n sees '$(cn_members "$n")' after n4's return"
done
read_set 4 A || fail "n4 read set A wrong"
got=$(cn_fetched 4)
[ "$got" -lt $((SET_BYTES / 100)) ] ||
  fail "n4 joining a warm cluster fetched $got bytes of $SET_BYTES from the RGW (1 % or more): $(cn_api 4 /v1/cluster)"
ok "n4 joined the warm cluster and read set A with $got bytes from the RGW"

# ---- n3 stopped: a hung peer costs one deadline; it leaves, and joins again -------------------
inc3=$(cn_q 3 'j["incarnation"]')
kill -STOP "${CN_PIDS[3]}"
read_set 1 C || fail "n1 read set C wrong with n3 stopped"
wait_for 300 cn_members_are 1 "n1 n2 n4" || fail "n3 stopped: n1 sees '$(cn_members 1)'"
kill -CONT "${CN_PIDS[3]}"
rejoined() { cn_members_are 1 "n1 n2 n3 n4" && [ "$(cn_q 3 'j["incarnation"]')" != "$inc3" ]; }
wait_for 300 rejoined || fail "n3 resumed did not join again: $(cn_api 1 /v1/cluster)"
ok "n3 stopped: n1 read on, n3 left after its lease and joined again with a new incarnation"

for n in 1 2 3 4; do cn_stop "$n" || fail "n$n exited with $? after SIGTERM"; done
ok "four nodes stopped cleanly"
