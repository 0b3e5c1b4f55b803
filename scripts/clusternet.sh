#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# clusternet.sh - the network of a tierd test cluster on one machine: a bridge in the root
# namespace that carries the test Ceph's address (the CTest fixture `rgw` starts scripts/ceph.sh
# with TIER_CEPH_ADDR=10.214.0.1), and one network namespace per tierd node, joined to the bridge
# by a veth pair shaped with `tc tbf`. A node reaches the mon, the OSD and RGW at 10.214.0.1 and
# the other nodes at their 10.214.0.(10+INDEX). Traffic goes only to loopback and to the bridge
# and namespaces this script makes: no default route, no forwarding to anything else. See
# docs/CEPH.md ("The cluster bridge").
#
# Usage: scripts/clusternet.sh bridge-up | bridge-down | status
#        scripts/clusternet.sh node-up NAME INDEX RATE | node-down NAME
#   bridge-up prints the bridge's address (the one for TIER_CEPH_ADDR) on stdout; the rest of
#   what the verbs say goes to stderr.
#   NAME   the node's network namespace (e.g. tierd-cn1)
#   INDEX  1..244: the node's address is 10.214.0.(10+INDEX), its veth in the root namespace
#          tierd-cv<INDEX>; one node per INDEX on the machine
#   RATE   NUMBER{bit,kbit,mbit,gbit} (tc's units: bits per second), each way; 0 or none: unshaped
#
# DESIGN: fixed names, one bridge per machine: tierd-cbr0 with 10.214.0.1/24. `bridge-up`
# refuses when an address or route on the machine other than the bridge's own lies in
# 10.214.0.0/16, and is idempotent (a bridge left by a crashed run is taken over). The bridge
# stays up with no port: its address is local, so the mon binds it and root-namespace clients
# reach it before any node exists (verified: a bridge without ports, with carrier down, even
# administratively down, still delivers to its local address through the local routing table).
# `node-up` refuses an INDEX whose veth or address is in use in any namespace, and needs the
# bridge. `node-down` and `bridge-down` are idempotent and safe in a trap: node-down kills what
# still runs in the namespace (it is the test's), deletes the veth (both ends and both qdiscs go
# with it) and the namespace; bridge-down deletes the bridge (veths still on it stay, detached,
# until their node-down). Verbs are serialised with flock on /run/tierd-clusternet.lock.
set -euo pipefail
# shellcheck source=scripts/lib/tc.sh
. "$(cd "$(dirname "$0")" && pwd -P)/lib/tc.sh"

BR=tierd-cbr0
BR_ADDR=10.214.0.1
PREFIX=24
NET=10.214.0
NET_CHECK=10.214.0.0/16
NODE_DEV=eth0
LOCK=/run/tierd-clusternet.lock

die() {
    echo "clusternet.sh: $*" >&2
    exit 1
}
log() { echo "clusternet.sh: $*" >&2; }

usage() {
    echo "usage: $0 bridge-up | bridge-down | status | node-up NAME INDEX RATE | node-down NAME" >&2
    exit 2
}

[[ $# -ge 1 ]] || usage
VERB=$1
case $VERB in
bridge-up | bridge-down | status) [[ $# -eq 1 ]] || usage ;;
node-up) [[ $# -eq 4 ]] || usage ;;
node-down) [[ $# -eq 2 ]] || usage ;;
*) usage ;;
esac
[[ $(id -u) == 0 ]] || die "needs root (bridge, network namespaces, veth, tc)"
command -v ip >/dev/null && command -v tc >/dev/null || die "ip/tc missing (iproute2: scripts/deps.sh)"

exec 8>"$LOCK"
flock -w 120 8 || die "$LOCK is held by another clusternet.sh"

# in_ns NS CMD...: CMD inside namespace NS (without our lock descriptor)
in_ns() { ip netns exec "$1" "${@:2}" 8>&-; }

ns_exists() { ip netns list 2>/dev/null | awk -v n="$1" '$1 == n { f = 1 } END { exit !f }'; }
link_exists() { ip link show "$1" >/dev/null 2>&1; }
is_bridge() { ip -d link show "$1" 2>/dev/null | grep -qE '^ +bridge '; }

# no_ipv6 DEV [NS]: no IPv6 on DEV (no router solicitations or link-local traffic): IPv4 only
no_ipv6() {
    if [[ -n ${2:-} ]]; then
        in_ns "$2" sysctl -qw "net.ipv6.conf.$1.disable_ipv6=1" 2>/dev/null || true
    else
        sysctl -qw "net.ipv6.conf.$1.disable_ipv6=1" 2>/dev/null || true
    fi
}

# foreign_users: the addresses and routes in 10.214.0.0/16 that are not our bridge's, one a line
foreign_users() {
    ip -4 -o addr show to "$NET_CHECK" | awk -v br="$BR" '$2 != br { print "address " $4 " on " $2 }'
    ip -4 route show table all root "$NET_CHECK" | grep -vE "(^| )dev $BR( |$)" |
        sed 's/^/route /' || true
}

bridge_up() {
    local users made=''
    users=$(foreign_users)
    [[ -z $users ]] || die "something on this machine uses $NET_CHECK; not touching it:"$'\n'"$users"
    if link_exists "$BR"; then
        is_bridge "$BR" || die "$BR exists and is not a bridge; not touching it"
    else
        trap 'log "bridge-up failed; deleting $BR"; ip link del "$BR" 2>/dev/null || true' EXIT
        made=1
        ip link add "$BR" type bridge
        no_ipv6 "$BR"
    fi
    if ! ip -4 -o addr show dev "$BR" | grep -qF " inet $BR_ADDR/$PREFIX "; then
        ip addr add "$BR_ADDR/$PREFIX" dev "$BR"
    fi
    ip link set "$BR" up
    trap - EXIT
    if [[ -n $made ]]; then
        log "bridge $BR up with $BR_ADDR/$PREFIX"
    else
        log "bridge $BR was up already; $BR_ADDR/$PREFIX on it"
    fi
    echo "$BR_ADDR"
}

bridge_down() {
    local ports
    link_exists "$BR" || return 0
    is_bridge "$BR" || die "$BR is not a bridge; not touching it"
    ports=$(ip -o link show master "$BR" | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | tr '\n' ' ')
    [[ -z $ports ]] || log "veths still on $BR (left detached; node-down removes them): $ports"
    ip link del "$BR"
    log "bridge $BR deleted"
}

# ns_with_addr ADDR: the namespaces (by name) that have ADDR on an interface
ns_with_addr() {
    local ns
    for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
        if ip -n "$ns" -4 -o addr show to "$1/32" 2>/dev/null | grep -q .; then echo "$ns"; fi
    done
}

node_up() {
    local name=$1 index=$2 rate=$3 bits addr host users shaping
    [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ ]] || die "NAME '$name' is not a namespace name ([A-Za-z0-9_.-], up to 64)"
    [[ $index =~ ^[0-9]{1,3}$ ]] && ((10#$index >= 1 && 10#$index <= 244)) || die "INDEX '$index' is not 1..244"
    index=$((10#$index))
    bits=$(tc_rate_bits "$rate") || die "RATE '$rate' is not NUMBER{bit,kbit,mbit,gbit}, 0 or none"
    ((bits == 0 || bits >= 100000)) || die "RATE '$rate' is below 100kbit"
    addr=$NET.$((10 + index))
    host=tierd-cv$index
    is_bridge "$BR" || die "no bridge $BR; run: $0 bridge-up (the CTest fixture rgw does)"
    ns_exists "$name" && die "namespace $name exists already; run: $0 node-down $name"
    link_exists "$host" && die "veth $host (INDEX $index) exists already; run node-down on its namespace ($(ip -d link show "$host" | sed -n 's/.*alias //p'))"
    users=$(ns_with_addr "$addr")
    [[ -z $users ]] || die "$addr (INDEX $index) is in use in namespace(s) $users; run node-down on them"

    trap 'log "node-up $name failed; tearing down"; node_down "$name"' EXIT
    ip netns add "$name"
    in_ns "$name" ip link set lo up
    ip link add "$host" type veth peer name "$NODE_DEV" netns "$name"
    ip link set "$host" alias "$name"
    no_ipv6 "$host"
    no_ipv6 "$NODE_DEV" "$name"
    ip link set "$host" master "$BR"
    in_ns "$name" ip addr add "$addr/$PREFIX" dev "$NODE_DEV"
    ip link set "$host" up
    in_ns "$name" ip link set "$NODE_DEV" up
    if ((bits > 0)); then
        tc_shape "$host" "$bits"
        tc_shape "$NODE_DEV" "$bits" in_ns "$name"
    fi
    trap - EXIT
    shaping=unshaped
    ((bits == 0)) || shaping="tbf $rate each way"
    log "node $name: $addr on $NODE_DEV <-> $host on $BR, $shaping"
}

node_down() {
    local name=$1 pids p i
    [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ ]] || die "NAME '$name' is not a namespace name"
    # A host end whose namespace is gone from `ip netns list` (kept alive by a process after an
    # earlier `ip netns del`) goes too, so that its INDEX can be used again.
    for p in $(host_veths "$name"); do ip link del "$p" 2>/dev/null || true; done
    ns_exists "$name" || return 0
    # What still runs in the namespace keeps it (and its veth) alive after `ip netns del`.
    mapfile -t pids < <(ip netns pids "$name" 2>/dev/null)
    if ((${#pids[@]} > 0)); then
        log "killing what still runs in $name: ${pids[*]}"
        kill -KILL "${pids[@]}" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            [[ -n $(ip netns pids "$name" 2>/dev/null) ]] || break
            sleep 0.05 # polling the exits (a zombie is not listed), bounded to 5 s
        done
    fi
    # Deleting one end of a veth deletes the pair and both qdiscs.
    if in_ns "$name" ip link show "$NODE_DEV" >/dev/null 2>&1; then in_ns "$name" ip link del "$NODE_DEV"; fi
    ip netns del "$name"
}

# host_veths NAME: our veths in the root namespace whose alias is NAME (the node's namespace)
host_veths() {
    ip -o -d link show type veth 2>/dev/null |
        awk -v n="$1" '{ d = $2; sub(/@.*/, "", d); sub(/:$/, "", d)
            for (i = 1; i < NF; i++) if ($i == "alias" && $(i + 1) == n && d ~ /^tierd-cv/) print d }'
}

status() {
    local port ns
    is_bridge "$BR" || {
        echo "no bridge $BR"
        return 1
    }
    echo "bridge $BR: $(ip -4 -o addr show dev "$BR" | awk '{ print $4 }' | tr '\n' ' ')"
    for port in $(ip -o link show master "$BR" | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
        ns=$(ip -d link show "$port" | sed -n 's/.*alias //p')
        echo "  $port -> namespace ${ns:-?}: $(ip -n "$ns" -4 -o addr show dev "$NODE_DEV" 2>/dev/null | awk '{ print $4 }')"
        tc qdisc show dev "$port" | sed 's/^/    host: /'
        [[ -z $ns ]] || in_ns "$ns" tc qdisc show dev "$NODE_DEV" 2>/dev/null | sed 's/^/    node: /'
    done
    return 0
}

case $VERB in
bridge-up) bridge_up ;;
bridge-down) bridge_down ;;
status) status ;;
node-up) node_up "$2" "$3" "$4" ;;
node-down)
    node_down "$2"
    log "node $2 down: no namespace, no veth"
    ;;
esac
