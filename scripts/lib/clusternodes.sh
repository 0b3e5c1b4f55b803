# SPDX-License-Identifier: Apache-2.0
# clusternodes.sh - tierd nodes of one [cluster], each in a network namespace of its own with its
# own mount, cache, API socket and peer endpoint, joined by scripts/clusternet.sh's bridge to the
# test Ceph (RADOS and the RGW on the bridge's address) and to each other; each node's link
# shaped with `tc tbf`. For tests/integration/test_cluster_nodes.sh and bench/cluster.sh: source
# it after scripts/lib/tierd.sh with T, SRC, CEPH, TIERD and the S3_* of the Ceph's env file set
# (tests/integration/lib.sh's tierd_test_rgw_setup sets them).
#
# A node runs as `nsenter --net=/run/netns/NS tierd ...`: only its network namespace differs, so
# its FUSE mount and its Unix socket are seen from here (ip netns exec would give it a mount
# namespace of its own). The peer endpoints are off loopback, so they use TLS: one self-signed
# certificate (cn_certs) is every node's certificate and the cluster's CA.
#
# Functions: cn_init PREFIX POOL CLUSTER [LEASE] (the names, the certificate, the secret);
# cn_net_up N RATE (node N's namespace and link; RATE as tc's, `none`: unshaped); cn_conf N
# [LINE...] (node N's config on stdout; CN_PEER_TIMEOUT its peer_timeout, default 30s: a loaded
# test machine's first byte is never a reason to skip a peer; CN_CACHE_EXTRA one more line of
# its [cache], e.g. "prefetch_threads = 16"; CN_BACKEND_EXTRA one more of its [backend s3]);
# cn_start N / cn_stop N / cn_kill N; cn_api N PATH;
# cn_members N; cn_q N EXPR (python over j = GET /v1/cluster and s = GET /v1/stats);
# cn_cleanup (for the EXIT trap: kills the nodes, detaches their mounts, takes the namespaces
# down). CN_PIDS[N] is node N's pid.
# shellcheck shell=bash disable=SC2034
declare -A CN_PIDS=()
CN_NET=${SRC:?SRC must be set}/scripts/clusternet.sh
CN_BRIDGE_ADDR=10.214.0.1
CN_PORT=7070

# cn_init PREFIX POOL CLUSTER [LEASE]: namespaces PREFIX1.., the pool and cluster of the nodes,
# their lease (default 20s); makes $T/peer.pem, $T/peer.key and $T/secret
cn_init() {
  CN_PREFIX=$1 CN_POOL=$2 CN_CLUSTER=$3 CN_LEASE=${4:-20s}
  [ -n "${S3_ENDPOINT_CLUSTER:-}" ] ||
    { echo "the fixture's env has no S3_ENDPOINT_CLUSTER: Ceph is not on the cluster bridge" >&2; return 1; }
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=tierd-peer -keyout "$T/peer.key" -out "$T/peer.pem" >/dev/null 2>&1 ||
    { echo "openssl could not make the peer certificate" >&2; return 1; }
  head -c 32 /dev/urandom | base64 >"$T/secret"
  chmod 600 "$T/secret" "$T/peer.key"
}

cn_ns() { echo "$CN_PREFIX$1"; }
cn_addr() { echo "10.214.0.$((10 + $1))"; }

# cn_net_up N RATE: node N's namespace, veth on the bridge, address and shaping
cn_net_up() { "$CN_NET" node-up "$(cn_ns "$1")" "$1" "$2" >/dev/null; }

# cn_conf N [LINE...]: node N's config (cache $T/cacheN, mount $T/mntN, socket $T/apiN.sock)
# over BUCKET on the RGW's bridge address; LINEs go to its [cluster]
cn_conf() {
  local n=$1
  shift
  mkdir -p "$T/mnt$n"
  tierd_conf_section cache "block_size = ${CN_BLOCK:-1M}" "ram_size = 128M" \
    "disk_dir = $T/cache$n" "disk_size = 1G" "disk_min_free = 0" "${CN_CACHE_EXTRA:-}"
  tierd_conf_section "backend s3" "type = s3" "endpoint = $S3_ENDPOINT_CLUSTER" \
    "region = $S3_REGION" "bucket = ${BUCKET:?BUCKET must be set}" \
    "access_key = $S3_ACCESS_KEY" "secret_key = $S3_SECRET_KEY" "${CN_BACKEND_EXTRA:-}"
  tierd_conf_ns /d s3
  tierd_conf_mount "$T/mnt$n"
  tierd_conf_api "$T/api$n.sock"
  [ -n "${CN_NO_CLUSTER:-}" ] && return 0
  tierd_conf_section cluster "name = $CN_CLUSTER" "ceph_conf = $CEPH/ceph.conf" \
    "pool = $CN_POOL" "node_id = n$n" "address = $(cn_addr "$n"):$CN_PORT" \
    "lease = $CN_LEASE" "secret_file = $T/secret" "tls_cert = $T/peer.pem" \
    "tls_key = $T/peer.key" "tls_ca = $T/peer.pem" "peer_timeout = ${CN_PEER_TIMEOUT:-30s}" "$@"
}

# cn_start N: node N on $T/tierdN.conf in its namespace (log $T/tierdN.log); 1 when its mount
# does not come up
cn_start() {
  local n=$1
  nsenter --net="/run/netns/$(cn_ns "$n")" "$TIERD" -c "$T/tierd$n.conf" -f \
    >>"$T/tierd$n.log" 2>&1 &
  CN_PIDS[$n]=$!
  TIERD_PID=${CN_PIDS[$n]}
  tierd_up "$T/mnt$n" "$T/api$n.sock" 120
}
# cn_stop N: SIGTERM; its exit status (0: clean)
cn_stop() {
  local rc=0
  tierd_stop "${CN_PIDS[$1]}" || rc=$?
  unset "CN_PIDS[$1]"
  return $rc
}
# cn_kill N: SIGKILL, reaped, its dead mount detached
cn_kill() {
  kill -KILL "${CN_PIDS[$1]}" 2>/dev/null || true
  wait "${CN_PIDS[$1]}" 2>/dev/null || true
  unset "CN_PIDS[$1]"
  tierd_unmount "$T/mnt$1"
}

cn_api() { tierd_api "$T/api$1.sock" "$2"; }
cn_members() {
  cn_api "$1" /v1/cluster | python3 -c 'import json,sys; print(" ".join(m["id"] for m in json.load(sys.stdin)["members"]))'
}
cn_members_are() { [ "$(cn_members "$1" 2>/dev/null)" = "$2" ]; }
cn_q() {
  python3 - "$(cn_api "$1" /v1/cluster)" "$(cn_api "$1" /v1/stats)" "$2" <<'PY'
import json, sys
j, s = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(eval(sys.argv[3]))
PY
}
cn_fetched() { cn_q "$1" 's["cache"]["fetch_bytes"]'; }

cn_cleanup() {
  local n
  for n in "${!CN_PIDS[@]}"; do
    kill -CONT "${CN_PIDS[$n]}" 2>/dev/null || true
    kill -KILL "${CN_PIDS[$n]}" 2>/dev/null || true
  done
  for n in 1 2 3 4 5 6 7 8; do
    tierd_unmount "$T/mnt$n"
    [ -z "${CN_PREFIX:-}" ] || "$CN_NET" node-down "$(cn_ns "$n")" >/dev/null 2>&1 || true
  done
}
