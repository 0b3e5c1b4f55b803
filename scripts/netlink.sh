#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# netlink.sh - the test Ceph cluster behind a shaped link, for benchmarks where the object-store
# link, not the client's CPUs, is the bottleneck (issue 11). `up` creates a network namespace for
# the object store, joins it to the root namespace with a veth pair on a private /30, shapes
# egress on BOTH ends with `tc tbf` at RATE (a qdisc shapes egress only, so each direction needs
# its own), starts scripts/ceph.sh inside the namespace with RGW on the namespace's address, and,
# given DELAY_MS, a delaying TCP proxy (scripts/delayproxy.py) on 127.0.0.1 in the root namespace
# in front of that RGW (this kernel has no netem). tierd, its FUSE mount and the client stay in the
# root namespace. Traffic goes only to loopback and to the namespace this script made: the
# namespace has no other interface and no default route. See docs/CEPH.md ("A shaped link").
#
# Usage: scripts/netlink.sh up DIR RATE [DELAY_MS] | down DIR | status DIR | stop-rgw DIR |
#        start-rgw DIR   (the last two: ceph.sh's verbs, run inside the namespace, for outages)
#   RATE      NUMBER{bit,kbit,mbit,gbit} (tc's units: bits per second), e.g. 200mbit
#   DELAY_MS  one-way delay the proxy adds per direction (0..10000 ms; absent: no proxy)
#   env STREAM_RATE  with DELAY_MS: the proxy also paces each connection's each direction to at
#             most this many bytes/s (an object store's per-stream limit; default 0: none)
# Files in DIR: ceph/ (ceph.sh's state dir), env (S3_ENDPOINT = the proxy when there is one, else
# the RGW in the namespace; S3_ENDPOINT_DIRECT = that RGW; S3_REGION and keys; LINK_* the link),
# proxy.pid, proxy.port, proxy.log, netlink.log.
#
# DESIGN: one link per machine, with fixed names (namespace tierd-store, veth tierd-h0 in the root
# namespace / tierd-s0 in the store's, 10.213.0.1 / 10.213.0.2 on 10.213.0.0/30): `up` refuses to
# run when any of them exists, or when any address or route on the machine is in 10.213.0.0/16,
# and names the `down` to run. `down` is idempotent and safe to call from a trap: it stops the
# proxy (by its pid file, checked against the command line), the Ceph daemons (ceph.sh stop), then
# deletes the veth (its qdiscs go with it) and the namespace. Verbs on one DIR are serialised with
# flock on DIR/.netlink.lock.
set -euo pipefail

NS=tierd-store
VETH_HOST=tierd-h0
VETH_STORE=tierd-s0
NET_CHECK=10.213.0.0/16
HOST_ADDR=10.213.0.1
STORE_ADDR=10.213.0.2
PREFIX=30
HERE=$(cd "$(dirname "$0")" && pwd -P)
# shellcheck source=scripts/lib/tc.sh
. "$HERE/lib/tc.sh"

die() {
    echo "netlink.sh: $*" >&2
    exit 1
}
log() { echo "netlink.sh: $*" >&2; }

usage() {
    echo "usage: $0 up DIR RATE [DELAY_MS] | down DIR | status DIR | stop-rgw DIR | start-rgw DIR" >&2
    exit 2
}

[[ $# -ge 2 ]] || usage
VERB=$1
case $VERB in
up) [[ $# -ge 3 && $# -le 4 ]] || usage ;;
down | status | stop-rgw | start-rgw) [[ $# -eq 2 ]] || usage ;;
*) usage ;;
esac
[[ $(id -u) == 0 ]] || die "needs root (network namespaces, veth, tc)"
command -v ip >/dev/null && command -v tc >/dev/null || die "ip/tc missing (iproute2: scripts/deps.sh)"

mkdir -p "$2"
DIR=$(cd "$2" && pwd -P)
CEPH_DIR=$DIR/ceph
exec 8>"$DIR/.netlink.lock"
flock -w 300 8 || die "$DIR is locked by another netlink.sh"

# in_ns CMD...: CMD inside the store's namespace (without our lock descriptor)
in_ns() { ip netns exec "$NS" "$@" 8>&-; }

ns_exists() { ip netns list 2>/dev/null | grep -qE "^$NS( |$)"; }
veth_exists() { ip link show "$VETH_HOST" >/dev/null 2>&1; }

# proxy_pid: the running proxy's pid (from DIR/proxy.pid, only if its command line is our proxy
# for this DIR); 1 when none
proxy_pid() {
    local pid
    [[ -r $DIR/proxy.pid ]] || return 1
    read -r pid <"$DIR/proxy.pid" || return 1
    [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "delayproxy.py --listen 127.0.0.1:0 --upstream $STORE_ADDR:" &&
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "--port-file $DIR/proxy.port" || return 1
    echo "$pid"
}

stop_proxy() {
    local pid i
    pid=$(proxy_pid) || {
        rm -f "$DIR/proxy.pid" "$DIR/proxy.port"
        return 0
    }
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        [[ -d /proc/$pid ]] || break
        sleep 0.05 # polling the exit, bounded to 5 s
    done
    [[ -d /proc/$pid ]] && kill -KILL "$pid" 2>/dev/null
    rm -f "$DIR/proxy.pid" "$DIR/proxy.port"
}

down() {
    stop_proxy
    if [[ -d $CEPH_DIR ]]; then
        if ns_exists; then
            in_ns "$HERE/ceph.sh" stop "$CEPH_DIR" >>"$DIR/netlink.log" 2>&1 ||
                log "ceph.sh stop failed (see $DIR/netlink.log)"
        else
            "$HERE/ceph.sh" stop "$CEPH_DIR" >>"$DIR/netlink.log" 2>&1 ||
                log "ceph.sh stop failed (see $DIR/netlink.log)"
        fi
    fi
    # Deleting one end of a veth deletes the pair and both qdiscs.
    if veth_exists; then ip link del "$VETH_HOST"; fi
    if ns_exists; then
        if in_ns ip link show "$VETH_STORE" >/dev/null 2>&1; then in_ns ip link del "$VETH_STORE"; fi
        ip netns del "$NS"
    fi
    rm -f "$DIR/env"
}

# wait_file FILE SECS: poll until FILE exists and is not empty
wait_file() {
    local end=$((SECONDS + $2))
    until [[ -s $1 ]]; do
        ((SECONDS < end)) || return 1
        sleep 0.05 # polling interval
    done
}

up() {
    local rate=$1 delay=${2:-} bits k v endpoint direct port pid
    local S3_ENDPOINT='' S3_REGION='' S3_ACCESS_KEY='' S3_SECRET_KEY=''
    bits=$(tc_rate_bits "$rate") && ((bits > 0)) ||
        die "RATE '$rate' is not NUMBER{bit,kbit,mbit,gbit} (e.g. 200mbit)"
    ((bits >= 100000)) || die "RATE '$rate' is below 100kbit"
    if [[ -n $delay ]]; then
        [[ $delay =~ ^[0-9]+$ ]] && ((delay <= 10000)) || die "DELAY_MS '$delay' is not 0..10000"
    fi
    [[ ${STREAM_RATE:-0} =~ ^[0-9]+$ ]] || die "STREAM_RATE '$STREAM_RATE' is not a whole number of bytes/s"
    [[ ${STREAM_RATE:-0} == 0 || -n $delay ]] || die "STREAM_RATE needs DELAY_MS (the proxy paces it)"
    if ns_exists || veth_exists; then
        die "namespace $NS or veth $VETH_HOST exists already; run: $0 down DIR (with its DIR)"
    fi
    [[ -z $(ip -4 -o addr show to "$NET_CHECK") && -z $(ip -4 route show root "$NET_CHECK") ]] ||
        die "something on this machine uses $NET_CHECK (ip addr / ip route); not touching it"

    trap 'log "up failed; tearing down"; down' EXIT
    : >"$DIR/netlink.log"
    ip netns add "$NS"
    in_ns ip link set lo up
    ip link add "$VETH_HOST" type veth peer name "$VETH_STORE" netns "$NS"
    # No IPv6 on the link (no router solicitations, no link-local traffic): IPv4 only.
    sysctl -qw "net.ipv6.conf.$VETH_HOST.disable_ipv6=1" 2>/dev/null || true
    in_ns sysctl -qw "net.ipv6.conf.$VETH_STORE.disable_ipv6=1" 2>/dev/null || true
    ip addr add "$HOST_ADDR/$PREFIX" dev "$VETH_HOST"
    in_ns ip addr add "$STORE_ADDR/$PREFIX" dev "$VETH_STORE"
    ip link set "$VETH_HOST" up
    in_ns ip link set "$VETH_STORE" up
    tc_shape "$VETH_HOST" "$bits"
    tc_shape "$VETH_STORE" "$bits" in_ns
    log "link up: $HOST_ADDR ($VETH_HOST) <-> $STORE_ADDR ($VETH_STORE in netns $NS), tbf $rate each way"

    in_ns env TIER_RGW_ADDR="$STORE_ADDR" "$HERE/ceph.sh" start "$CEPH_DIR" >>"$DIR/netlink.log" 2>&1 ||
        {
            tail -n 30 "$DIR/netlink.log" >&2
            die "ceph.sh start in netns $NS failed (log: $DIR/netlink.log)"
        }
    while IFS='=' read -r k v; do
        case $k in
        S3_ENDPOINT) S3_ENDPOINT=$v ;;
        S3_REGION) S3_REGION=$v ;;
        S3_ACCESS_KEY) S3_ACCESS_KEY=$v ;;
        S3_SECRET_KEY) S3_SECRET_KEY=$v ;;
        esac
    done <"$CEPH_DIR/env"
    direct=$S3_ENDPOINT
    [[ $direct == "http://$STORE_ADDR:"* ]] || die "ceph.sh wrote S3_ENDPOINT=$direct, not on $STORE_ADDR"
    endpoint=$direct

    if [[ -n $delay ]]; then
        rm -f "$DIR/proxy.port"
        setsid python3 "$HERE/delayproxy.py" --listen 127.0.0.1:0 --upstream "$STORE_ADDR:${direct##*:}" \
            --delay-ms "$delay" --stream-rate "${STREAM_RATE:-0}" --port-file "$DIR/proxy.port" </dev/null >"$DIR/proxy.log" 2>&1 8>&- &
        pid=$!
        echo "$pid" >"$DIR/proxy.pid"
        wait_file "$DIR/proxy.port" 10 || {
            cat "$DIR/proxy.log" >&2
            die "the delay proxy did not start"
        }
        read -r port <"$DIR/proxy.port"
        endpoint=http://127.0.0.1:$port
        log "delay proxy: $endpoint -> $direct, +${delay} ms each way${STREAM_RATE:+, each connection at most $STREAM_RATE B/s}"
    fi

    {
        echo "S3_ENDPOINT=$endpoint"
        echo "S3_ENDPOINT_DIRECT=$direct"
        echo "S3_REGION=$S3_REGION"
        echo "S3_ACCESS_KEY=$S3_ACCESS_KEY"
        echo "S3_SECRET_KEY=$S3_SECRET_KEY"
        echo "LINK_NETNS=$NS"
        echo "LINK_DEV_HOST=$VETH_HOST"
        echo "LINK_DEV_STORE=$VETH_STORE"
        echo "LINK_RATE=$rate"
        echo "LINK_RATE_BITS=$bits"
        echo "LINK_DELAY_MS=${delay:-0}"
        echo "LINK_STREAM_RATE=${STREAM_RATE:-0}"
    } >"$DIR/env.tmp"
    mv "$DIR/env.tmp" "$DIR/env"
    trap - EXIT
    log "up: S3_ENDPOINT=$endpoint (env: $DIR/env)"
}

status() {
    ns_exists || {
        echo "no namespace $NS"
        return 1
    }
    echo "namespace $NS; $VETH_HOST: $(ip -4 -o addr show dev "$VETH_HOST" 2>/dev/null | awk '{print $4}')"
    tc -s qdisc show dev "$VETH_HOST"
    in_ns tc -s qdisc show dev "$VETH_STORE"
    if pid=$(proxy_pid); then echo "delay proxy pid $pid on 127.0.0.1:$(cat "$DIR/proxy.port")"; fi
    [[ -r $DIR/env ]] && grep -E '^(S3_ENDPOINT|S3_ENDPOINT_DIRECT|LINK_)' "$DIR/env"
    return 0
}

case $VERB in
up) up "$3" "${4:-}" ;;
down)
    down
    log "down: no namespace $NS, no veth $VETH_HOST (data of $CEPH_DIR removed, logs kept)"
    ;;
status) status ;;
stop-rgw | start-rgw)
    ns_exists || die "no namespace $NS; run: $0 up DIR RATE"
    in_ns "$HERE/ceph.sh" "$VERB" "$CEPH_DIR"
    ;;
esac
