#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_cluster_peer.sh - peer reads between three tierd of one [cluster] on the test Ceph: the
# RGW holds the dataset, RADOS the membership (CTest labels fuse + rgw, fixture rgw). The nodes
# run in this network namespace, their peer endpoints on 127.0.0.1 (the namespaced cluster is
# cluster_netns's).
#
# Asserts, each over a set of objects no node has read before:
#   - n1, n2 and n3 read set A one after the other, every byte right: the blocks fetched from the
#     RGW by the three together are at most 1.1x the set (each block once per cluster), and n2
#     and n3 got blocks from peers;
#   - (peer traffic and QoS) n3 restarted with a tenant of class inference reads set Q as it: n3's
#     lane `peers` granted it, the owners served it as tenant `peers` in class inference;
#   - n3 restarted with another secret reads set B right: its peers refuse it (401, counted on
#     both sides) and it reads the RGW (counted as auth failures);
#   - n3 restarted with share = no (consume-only) reads set C right with no block of its own from
#     the RGW (every one from a peer), publishes no address, owns no share and serves nothing;
#   - n2 killed with SIGKILL: n1 reads set D right (a read never fails because a peer did); while
#     n2 is still in n1's view the requests to it fail as `connect`, n2 is skipped, and after its
#     lease n2 leaves n1's view;
#   - (a job staged cluster-wide) job e1 submitted with "cluster": true and a stage path on the
#     three nodes: each stages it, the RGW serves set E once (1.00x), and the nodes' pins add up
#     to the set (each block pinned once, by its owner).
# No sleeps as synchronisation: every wait polls (wait_for).
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_rgw_setup cluster_peer
POOL=tierd-cluster-test # the other cluster tests' pool too
CLUSTER=peer-$$-$(date +%s)
BUCKET=tierd-peer-$$-$(date +%s)
OBJ_KIB=1536 # 1.5 blocks of 1 MiB: every object has a short last block
NOBJ=12
declare -A PIDS=()

extra_cleanup() {
  local n
  for n in "${!PIDS[@]}"; do
    kill -KILL "${PIDS[$n]}" 2>/dev/null || true
  done
  for n in 2 3; do
    if grep -qs " $T/mnt$n fuse" /proc/mounts; then umount -l "$T/mnt$n" 2>/dev/null || true; fi
  done
  radosc -p "$POOL" rm "tierd.cluster.$CLUSTER" >/dev/null 2>&1 || true
}
cephc() { timeout 120 ceph -c "$CEPH/ceph.conf" --connect-timeout 60 "$@"; }
radosc() { timeout 120 rados -c "$CEPH/ceph.conf" "$@"; }
pool_ready() { radosc -p "$POOL" ls >/dev/null 2>&1; }

# the secrets: the cluster's, and another
head -c 32 /dev/urandom | base64 >"$T/secret"
head -c 32 /dev/urandom | base64 >"$T/other-secret"
chmod 600 "$T/secret" "$T/other-secret"

# node_conf N [LINE...]: node nN (mount $T/mntN, socket $T/apiN.sock, cache $T/cacheN, peer
# endpoint 127.0.0.1:port N) over the bucket, in cluster $CLUSTER
node_conf() {
  local n=$1
  shift
  mkdir -p "$T/mnt$n"
  tierd_conf_section cache "block_size = 1M" "ram_size = 64M" "disk_dir = $T/cache$n" \
    "disk_size = 256M" "disk_min_free = 0"
  tierd_conf_rgw s3 "$BUCKET"
  tierd_conf_ns /d s3
  tierd_conf_mount "$T/mnt$n"
  tierd_conf_api "$T/api$n.sock"
  tierd_conf_section cluster "name = $CLUSTER" "ceph_conf = $CEPH/ceph.conf" "pool = $POOL" \
    "node_id = n$n" "address = 127.0.0.1:$((PORT0 + n))" "lease = 60s" \
    "secret_file = $T/secret" "peer_timeout = 30s" "$@"
}

# start N: start node N on $T/tierdN.conf (log $T/tierdN.log)
start() {
  tierd_spawn "$T/tierd$1.conf" "$T/tierd$1.log"
  PIDS[$1]=$TIERD_PID
  tierd_up "$T/mnt$1" "" 120 || fail "n$1 did not come up: $(tail -5 "$T/tierd$1.log")"
}
# stop N: SIGTERM node N; it must exit 0 (ASan's leak check) and unmount
stop() {
  tierd_stop "${PIDS[$1]}" || fail "n$1 exited with $? after SIGTERM: $(tail -5 "$T/tierd$1.log")"
  unset "PIDS[$1]"
}

cluster_js() { tierd_api "$T/api$1.sock" /v1/cluster; }
# members N: the ids in node N's view
members() {
  cluster_js "$1" | python3 -c 'import json,sys; print(" ".join(m["id"] for m in json.load(sys.stdin)["members"]))'
}
members_are() { [ "$(members "$1" 2>/dev/null)" = "$2" ]; }
# q N EXPR: python EXPR over node N's GET /v1/cluster (j) and GET /v1/stats (s), printed
q() {
  python3 - "$(cluster_js "$1")" "$(tierd_api "$T/api$1.sock" /v1/stats)" "$2" <<'PY'
import json, sys
j, s = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(eval(sys.argv[3]))
PY
}
fetched() { q "$1" 's["cache"]["fetch_bytes"]'; }

# make_set NAME: NOBJ objects of random bytes in the bucket under NAME/, and local copies
make_set() {
  tierd_bench_files "$T/src/$1" "$NOBJ" "$OBJ_KIB"
  tierd_bench_upload "$T/src/$1" "$S3_ENDPOINT/$BUCKET/$1"
}
# read_set N NAME: read set NAME through node N's mount, every file compared with its source
read_set() { tierd_compare_files "$T/src/$2" "$T/mnt$1/d/$2" || fail "n$1 read set $2 wrong"; }
SET_BYTES=$((NOBJ * OBJ_KIB * 1024))

# a free block of 8 ports for the endpoints (n1..n4 at PORT0 + N)
PORT0=
for base in $(seq 17100 10 17900); do
  busy=0
  for i in 1 2 3 4; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$((base + i))") 2>/dev/null; then busy=1; fi
  done
  [ $busy = 1 ] || {
    PORT0=$base
    break
  }
done
[ -n "$PORT0" ] || fail "no free ports for the peer endpoints"

cephc osd pool create "$POOL" >/dev/null 2>&1 || cephc osd pool ls | grep -qx "$POOL" ||
  fail "cannot create pool $POOL"
wait_for 300 pool_ready || fail "pool $POOL does not answer"
tierd_s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null || fail "cannot create bucket $BUCKET"
for s in A B C D; do make_set "$s"; done

for n in 1 2 3; do node_conf "$n" >"$T/tierd$n.conf"; done
for n in 1 2 3; do start "$n"; done
for n in 1 2 3; do
  wait_for 120 members_are "$n" "n1 n2 n3" || fail "n$n sees '$(members "$n")', not n1 n2 n3"
done

# ---- set A: each block from the RGW once per cluster ------------------------------------------
for n in 1 2 3; do read_set "$n" A; done
total=$(($(fetched 1) + $(fetched 2) + $(fetched 3)))
[ "$total" -le $((SET_BYTES * 11 / 10)) ] ||
  fail "the three nodes fetched $total bytes from the RGW for a set of $SET_BYTES (more than 1.1x)"
for n in 2 3; do
  [ "$(q "$n" 'j["peers"]["blocks"] > 0 and s["cache"]["peer_bytes"] > 0')" = True ] ||
    fail "n$n got no block from a peer: $(cluster_js "$n")"
done
served=$(($(q 1 'j["peers"]["served"]["blocks"]') + $(q 2 'j["peers"]["served"]["blocks"]') +
  $(q 3 'j["peers"]["served"]["blocks"]')))
[ "$served" -gt 0 ] || fail "no node served a block"
table=$("$TIERCTL" -s "$T/api2.sock" cluster) || fail "tierctl cluster failed"
grep -q "^from peers: [1-9][0-9]* blocks" <<<"$table" || fail "tierctl cluster: $table"
ok "three nodes read set A right, $total bytes from the RGW for $SET_BYTES ($served blocks served to peers)"

# ==== peer traffic and QoS (docs/CLUSTER.md "Peer traffic and QoS") ============================
# n3 restarted with [tenant pqos] (uid 1001, class inference) reads set Q as uid 1001: n3's lane
# `peers` granted the blocks it asked of its peers to pqos/inference, the owners served them as
# tenant `peers` in class inference (their S3 lane granted it bytes, their telemetry shows its
# reads), and nothing was refused admission. Local to this block: set Q, n3's config, $T's mode.
for tool in setpriv cmp; do command -v "$tool" >/dev/null || fail "needs $tool"; done
make_set Q
T_MODE=$(stat -c %a "$T")
chmod 0711 "$T" # uid 1001 reaches n3's mount (restored after the block)
stop 3
{
  node_conf 3 | sed 's|^\[mount\]$|[mount]\nallow_other = true\numask = 022|'
  tierd_conf_section "tenant pqos" "uid = 1001" "class = inference"
} >"$T/tierd3.conf"
start 3
wait_for 120 members_are 3 "n1 n2 n3" || fail "n3 (tenant pqos) sees '$(members 3)'"
for f in "$T/src/Q"/*; do
  setpriv --reuid=1001 --regid=1001 --clear-groups -- cat "$T/mnt3/d/Q/${f##*/}" | cmp -s - "$f" ||
    fail "n3 read Q/${f##*/} wrong as uid 1001"
done
# qos N EXPR: python EXPR over node N's GET /v1/qos (j) and /metrics (m, the text)
qos() {
  python3 - "$(tierd_api "$T/api$1.sock" /v1/qos)" "$(tierd_api "$T/api$1.sock" /metrics)" "$2" <<'PY'
import json, re, sys
j, m = json.loads(sys.argv[1]), sys.argv[2]
def tenant(lane, name):
    return ([t for t in (lane or {}).get("tenants", []) if t["name"] == name] or [None])[0]
def cls(lane, name, c):
    t = tenant(lane, name)
    return t["classes"][c] if t else {"grants": 0, "granted_bytes": 0}
def metric(name, **labels):
    total = 0
    for line in m.splitlines():
        if line.startswith(name + "{") and all('%s="%s"' % kv in line for kv in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total
print(eval(sys.argv[3]))
PY
}
[ "$(qos 3 'j["peers"]["name"] == "peers" and j["peers"]["max_inflight"] == 32')" = True ] ||
  fail "n3's GET /v1/qos has no peers lane: $(tierd_api "$T/api3.sock" /v1/qos)"
[ "$(qos 3 'cls(j["peers"], "pqos", "inference")["grants"] > 0 and cls(j["peers"], "pqos", "inference")["granted_bytes"] > 0')" = True ] ||
  fail "n3's peers lane granted nothing to pqos/inference: $(tierd_api "$T/api3.sock" /v1/qos)"
[ "$(qos 3 '"tierd_backend_inflight_calls{backend=\"peers\"}" in m')" = True ] ||
  fail "n3's /metrics does not list the peers lane"
[ "$(q 3 'j["peers"]["to_backend"]["admission"]')" = 0 ] || fail "n3: peer requests not admitted: $(cluster_js 3)"
table=$("$TIERCTL" -s "$T/api3.sock" cluster) || fail "tierctl cluster failed"
grep -q " 0 not admitted (peers lane)" <<<"$table" || fail "tierctl cluster: $table"
table=$("$TIERCTL" -s "$T/api3.sock" qos) || fail "tierctl qos failed"
grep -Eq '^\(peers\) +pqos +inference ' <<<"$table" || fail "tierctl qos has no (peers) row: $table"
owner_bytes=$(($(qos 1 'int(cls(j["backends"][0], "peers", "inference")["granted_bytes"])') +
  $(qos 2 'int(cls(j["backends"][0], "peers", "inference")["granted_bytes"])')))
[ "$owner_bytes" -gt 0 ] || fail "no owner's S3 lane granted tenant peers/inference any bytes"
owner_reads=$(($(qos 1 'int(metric("tierd_op_bytes_total", tenant="peers", **{"class": "inference"}, op="read"))') +
  $(qos 2 'int(metric("tierd_op_bytes_total", tenant="peers", **{"class": "inference"}, op="read"))')))
[ "$owner_reads" -gt 0 ] || fail "no owner's telemetry shows reads of tenant peers/inference"
chmod "$T_MODE" "$T"
ok "peer QoS: n3's peers lane admitted pqos/inference; the owners served tenant peers in class inference ($owner_bytes bytes from S3, $owner_reads read)"
# ==== end of peer traffic and QoS ================================================================

# ---- set B: n3 with another secret ------------------------------------------------------------
stop 3
node_conf 3 "secret_file = $T/other-secret" | sed "s|^secret_file = $T/secret$||" >"$T/tierd3.conf"
start 3
wait_for 120 members_are 3 "n1 n2 n3" || fail "n3 (other secret) sees '$(members 3)'"
before=$(fetched 3)
read_set 3 B
[ "$(q 3 'j["peers"]["failures"]["auth"] > 0 and j["peers"]["blocks"] == 0')" = True ] ||
  fail "n3 with another secret: $(cluster_js 3)"
[ "$(($(fetched 3) - before))" -ge "$SET_BYTES" ] || fail "n3 did not read set B from the RGW"
[ "$(q 1 'j["peers"]["served"]["auth_failures"]')" -gt 0 ] ||
  [ "$(q 2 'j["peers"]["served"]["auth_failures"]')" -gt 0 ] ||
  fail "no endpoint counted n3's requests as auth failures"
ok "a node with another secret is refused (401, counted on both sides) and reads the RGW, right"

# ---- set C: n3 consume-only -------------------------------------------------------------------
stop 3
node_conf 3 "share = no" >"$T/tierd3.conf"
start 3
n3_consumer() { [ "$(q 1 '[m["addr"] for m in j["members"] if m["id"] == "n3"] == [""]')" = True ]; }
wait_for 120 n3_consumer || fail "n1 does not see the consume-only n3: $(cluster_js 1)"
before=$(fetched 3)
read_set 3 C
[ "$(fetched 3)" = "$before" ] || fail "n3 (share = no) fetched $(($(fetched 3) - before)) bytes from the RGW"
[ "$(q 3 'j["share"] is False and j["peers"]["to_backend"]["self"] == 0 and j["peers"]["blocks"] > 0')" = True ] ||
  fail "n3 (share = no): $(cluster_js 3)"
[ "$(q 1 '[(m["addr"], m["share"]) for m in j["members"] if m["id"] == "n3"] == [("", 0.0)]')" = True ] ||
  fail "n1's view of the consume-only n3: $(cluster_js 1)"
[ "$(q 3 'j["peers"]["served"]["blocks"]')" = 0 ] || fail "n3 (share = no) served blocks"
ok "a consume-only node reads every block from its peers, publishes no address and serves none"

# ---- set D: n2 killed, n1 reads on ------------------------------------------------------------
kill -KILL "${PIDS[2]}"
wait "${PIDS[2]}" 2>/dev/null || true
unset "PIDS[2]"
umount -l "$T/mnt2" 2>/dev/null || true
in_view_before=$(members 1)
read_set 1 D
in_view_after=$(members 1)
if [ "$in_view_before" = "n1 n2 n3" ] && [ "$in_view_after" = "n1 n2 n3" ]; then
  [ "$(q 1 'j["peers"]["failures"]["connect"] > 0 and j["peers"]["skips"] > 0')" = True ] ||
    fail "n1 asked the dead n2 and counted nothing: $(cluster_js 1)"
fi
wait_for 300 members_are 1 "n1 n3" || fail "after n2's SIGKILL n1 sees '$(members 1)'"
ok "n2 killed: n1 read set D right (failed requests counted, n2 skipped), n2 left after its lease"

stop 1
stop 3
ok "n1 and n3 stopped cleanly"

# ---- set E: a job staged cluster-wide (POST /v1/jobs "cluster": true on every node) -----------
# The Slurm provider's pre_run of a multi-node job: the job admitted on each of its nodes with
# the same stage path and "cluster": true. Each node walks the whole set, fetches the blocks it
# owns and warms the others on their owners (whose single-flight joins the nodes' warms of one
# block into one fetch): the RGW serves each byte of the set once, and each node pins only its
# own share (the job's pin rule pins a block where it is fetched).
for n in 1 2 3; do node_conf "$n" >"$T/tierd$n.conf"; done
for n in 1 2 3; do start "$n"; done
for n in 1 2 3; do
  wait_for 120 members_are "$n" "n1 n2 n3" || fail "set E: n$n sees '$(members "$n")', not n1 n2 n3"
done
make_set E
declare -A before_e=()
for n in 1 2 3; do before_e[$n]=$(fetched "$n"); done
for n in 1 2 3; do
  tierd_api "$T/api$n.sock" /v1/jobs -d '{"job": "e1", "tenant": "team-e", "stage": ["/d/E"],
    "cache_bytes": "64M", "cluster": true}' >"$T/e1-post$n.json" ||
    fail "set E: POST /v1/jobs to n$n: $(cat "$T/e1-post$n.json")"
done
# jq_e N EXPR: python EXPR over node N's GET /v1/jobs/e1 (j)
jq_e() {
  python3 - "$(tierd_api "$T/api$1.sock" /v1/jobs/e1)" "$2" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
print(eval(sys.argv[2]))
PY
}
staged_e() { [ "$(jq_e "$1" 'j["staging"]["state"]')" = staged ]; }
for n in 1 2 3; do
  wait_for 300 staged_e "$n" || fail "set E: n$n did not stage job e1: $(tierd_api "$T/api$n.sock" /v1/jobs/e1)"
done
total=0
pinned_sum=0
for n in 1 2 3; do
  [ "$(jq_e "$n" 'j["staging"]["cluster"] is True and j["staging"]["bytes_done"] == '"$SET_BYTES"' and j["staging"]["bytes_on_peers"] > 0')" = True ] ||
    fail "set E: n$n's job e1 is not a cluster-wide staging of the whole set: $(tierd_api "$T/api$n.sock" /v1/jobs/e1)"
  total=$((total + $(fetched "$n") - ${before_e[$n]}))
  pinned=$(tierd_api "$T/api$n.sock" /v1/jobs | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity"]["pinned_bytes"])')
  # its share: some of the set, not all of it (24 blocks over 3 nodes)
  [ "$pinned" -gt 0 ] && [ "$pinned" -lt "$SET_BYTES" ] ||
    fail "set E: n$n pins $pinned bytes of a set of $SET_BYTES: not a share of it"
  pinned_sum=$((pinned_sum + pinned))
done
[ "$total" = "$SET_BYTES" ] ||
  fail "set E: the RGW served $total bytes for a set of $SET_BYTES staged on three nodes (not 1.00x)"
[ "$pinned_sum" = "$SET_BYTES" ] ||
  fail "set E: the three nodes pin $pinned_sum bytes of a set of $SET_BYTES (each block should be pinned once, by its owner)"
for n in 1 2 3; do tierd_api "$T/api$n.sock" /v1/jobs/e1 -X DELETE >/dev/null || fail "set E: DELETE e1 on n$n"; done
ok "job e1 staged cluster-wide on three nodes: $total bytes from the RGW for $SET_BYTES (1.00x), $pinned_sum bytes pinned in all"
for n in 1 2 3; do stop "$n"; done
