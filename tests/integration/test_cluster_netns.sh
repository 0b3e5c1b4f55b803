#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_cluster_netns.sh - the network of a tierd test cluster (scripts/clusternet.sh) reaches the
# test Ceph of the rgw fixture (CTest label rgw; the fixture runs Ceph on the cluster bridge:
# tests/integration/ceph_fixture.sh). Needs root.
#
# Asserts: the fixture's env file names RGW's endpoint on the bridge (S3_ENDPOINT_CLUSTER) and
# its conf the mon on the bridge's address; two node namespaces come up with tbf at $RATE on both
# ends of their veth and no default route; inside each, the root namespace's 127.0.0.1 RGW is not
# reachable (its own loopback), while `rados lspools` and a listing of .rgw.root (mon and OSD) and
# a signed S3 GET of an object and of its bucket's listing through S3_ENDPOINT_CLUSTER succeed;
# node 1 fetches a file from an HTTP server in node 2 at node 2's address; node-down removes the
# namespaces, the veths and the server. No sleeps as synchronisation: waits poll (wait_for).
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_rgw_setup cluster_netns
NET=$SRC/scripts/clusternet.sh
RATE=50mbit
# indexes 101 and 102 (addresses 10.214.0.111 and .112): apart from the 1..4 of cluster tests
N1=tierd-nt$$-1
N2=tierd-nt$$-2
I1=101
I2=102
A2=10.214.0.112
PORT=18080
BUCKET=cluster-netns-$$-$RANDOM
SRV_PID=
extra_cleanup() {
  if [ -n "$SRV_PID" ] && kill -0 "$SRV_PID" 2>/dev/null; then kill -KILL "$SRV_PID" 2>/dev/null || true; fi
  "$NET" node-down "$N1" 2>/dev/null || true
  "$NET" node-down "$N2" 2>/dev/null || true
  tierd_s3_code -X DELETE "$S3_ENDPOINT/$BUCKET/obj.bin" >/dev/null 2>&1 || true
  tierd_s3_code -X DELETE "$S3_ENDPOINT/$BUCKET" >/dev/null 2>&1 || true
}
in_node() { ip netns exec "$@"; }

[ "$(id -u)" = 0 ] || fail "needs root (network namespaces)"
[ -n "${S3_ENDPOINT_CLUSTER:-}" ] ||
  fail "no S3_ENDPOINT_CLUSTER in $CEPH/env: the fixture started Ceph without the cluster bridge (see ceph_start's output)"
grep -q '^mon host = \[v2:10\.214\.0\.1:' "$CEPH/ceph.conf" ||
  fail "the mon is not on the bridge: $(grep '^mon host' "$CEPH/ceph.conf")"
"$NET" status >"$T/status" || fail "no cluster bridge: $(cat "$T/status")"
ok "the fixture's Ceph is on the bridge ($S3_ENDPOINT_CLUSTER)"

# A node left by a crashed run of this test (its shell's pid gone) would hold the indexes.
for ns in $(ip netns list | awk '$1 ~ /^tierd-nt[0-9]+-[12]$/ { print $1 }'); do
  pid=${ns#tierd-nt}
  pid=${pid%-*}
  kill -0 "$pid" 2>/dev/null || "$NET" node-down "$ns" || fail "node-down $ns (left by a crashed run)"
done

# ---- two nodes, shaped, isolated ----------------------------------------------------------------
"$NET" node-up "$N1" "$I1" "$RATE" || fail "node-up $N1"
"$NET" node-up "$N2" "$I2" "$RATE" || fail "node-up $N2"
for n in "$N1:$I1" "$N2:$I2"; do
  ns=${n%:*}
  dev=tierd-cv${n#*:}
  tc qdisc show dev "$dev" | grep -q "^qdisc tbf .* rate 50Mbit " ||
    fail "no tbf at 50Mbit on $dev: $(tc qdisc show dev "$dev")"
  in_node "$ns" tc qdisc show dev eth0 | grep -q "^qdisc tbf .* rate 50Mbit " ||
    fail "no tbf at 50Mbit on eth0 in $ns: $(in_node "$ns" tc qdisc show dev eth0)"
  [ -z "$(ip -n "$ns" -4 route show default)" ] || fail "$ns has a default route"
  code=$(in_node "$ns" curl -s -o /dev/null -w '%{http_code}' --connect-timeout 5 "$S3_ENDPOINT/" || true)
  [ "$code" = 000 ] || fail "$ns reaches $S3_ENDPOINT (HTTP $code): not its own loopback"
done
ok "two nodes with tbf $RATE on both ends of each veth, no default route, their own loopback"

# ---- RADOS and S3 from inside each node -----------------------------------------------------------
head -c 1048583 /dev/urandom >"$T/obj.bin"
[ "$(tierd_s3_code -X PUT "$S3_ENDPOINT/$BUCKET")" = 200 ] || fail "create bucket $BUCKET"
[ "$(tierd_s3_code -T "$T/obj.bin" "$S3_ENDPOINT/$BUCKET/obj.bin")" = 200 ] || fail "put obj.bin"
for ns in "$N1" "$N2"; do
  pools=$(in_node "$ns" timeout 120 rados -c "$CEPH/ceph.conf" lspools) || fail "rados lspools in $ns"
  grep -qx .rgw.root <<<"$pools" || fail "rados lspools in $ns: $pools"
  objs=$(in_node "$ns" timeout 120 rados -c "$CEPH/ceph.conf" -p .rgw.root ls) ||
    fail "rados ls .rgw.root in $ns"
  [ -n "$objs" ] || fail "rados ls .rgw.root in $ns is empty"
  in_node "$ns" curl -sSf --max-time 120 "${TIERD_S3_SIG[@]}" -o "$T/got.$ns" \
    "$S3_ENDPOINT_CLUSTER/$BUCKET/obj.bin" || fail "GET obj.bin through $S3_ENDPOINT_CLUSTER in $ns"
  cmp -s "$T/obj.bin" "$T/got.$ns" || fail "obj.bin read in $ns differs"
  list=$(in_node "$ns" curl -sSf --max-time 120 "${TIERD_S3_SIG[@]}" \
    "$S3_ENDPOINT_CLUSTER/$BUCKET?list-type=2") || fail "list $BUCKET in $ns"
  grep -q '<Key>obj.bin</Key>' <<<"$list" || fail "list $BUCKET in $ns: $list"
done
ok "inside each node: rados lspools and ls (mon, OSD), S3 GET and list through $S3_ENDPOINT_CLUSTER"

# ---- node to node ---------------------------------------------------------------------------------
mkdir -p "$T/www"
echo "node 2 of $$" >"$T/www/hello"
in_node "$N2" python3 -m http.server --bind "$A2" --directory "$T/www" "$PORT" >"$T/http.log" 2>&1 &
SRV_PID=$!
fetch_hello() {
  in_node "$N1" curl -sf --connect-timeout 5 --max-time 30 -o "$T/hello.got" "http://$A2:$PORT/hello"
}
wait_for 120 fetch_hello || fail "node 1 cannot fetch from node 2's server: $(cat "$T/http.log")"
cmp -s "$T/www/hello" "$T/hello.got" || fail "node 1 got '$(cat "$T/hello.got")' from node 2"
ok "node 1 reaches a TCP listener in node 2 at $A2"

# ---- node-down ------------------------------------------------------------------------------------
"$NET" node-down "$N1" || fail "node-down $N1"
"$NET" node-down "$N2" || fail "node-down $N2"
! ip netns list | grep -qE "^($N1|$N2)( |$)" || fail "namespaces left: $(ip netns list)"
! ip link show "tierd-cv$I1" >/dev/null 2>&1 || fail "veth tierd-cv$I1 left"
! ip link show "tierd-cv$I2" >/dev/null 2>&1 || fail "veth tierd-cv$I2 left"
# killed: gone, or a zombie until this shell reaps it
srv_dead() { [ ! -e "/proc/$SRV_PID" ] || [ "$(cut -d' ' -f3 "/proc/$SRV_PID/stat" 2>/dev/null)" = Z ]; }
wait_for 120 srv_dead || fail "node 2's server still runs after node-down"
wait "$SRV_PID" 2>/dev/null || true
SRV_PID=
ok "node-down: namespaces, veths and what ran inside are gone"
