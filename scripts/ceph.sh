#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ceph.sh - a private single-node Ceph cluster (one mon, one bluestore OSD on a sparse file, one
# RGW) that gives the tests and demos a real S3 endpoint on 127.0.0.1. Everything lives in one
# state directory: the cluster conf, keyrings, mon store, OSD, logs, pid files and the `env` file
# that tests read (S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY, and with TIER_CEPH_ADDR
# S3_ENDPOINT_CLUSTER). Nothing touches
# /etc/ceph or /var/lib/ceph and no systemd is involved. Called by the CTest fixture `rgw`
# (start/stop) and by tests/lib/testutil.c (stop-rgw/start-rgw, stop-osd/start-osd); see
# docs/CEPH.md.
#
# Usage: scripts/ceph.sh start|stop|status|start-rgw|stop-rgw|start-osd|stop-osd [DIR]
#   DIR defaults to ${TMPDIR:-/tmp}/tierd-ceph.
# Environment:
#   TIER_RGW_PORT            RGW port (default 7480; without it the next free port is used when
#                            7480 is taken by something else, e.g. another engineer's cluster)
#   TIER_RGW_ADDR            IPv4 address RGW binds and the env file names (default 127.0.0.1;
#                            scripts/netlink.sh sets its network namespace's address). `start`
#                            keeps it in DIR/rgw.addr for the later verbs.
#   TIER_CEPH_ADDR           IPv4 address of the mon and the OSD (mon host, public and cluster
#                            addr, the monmap; default 127.0.0.1). The CTest fixture sets the
#                            cluster bridge's address (scripts/clusternet.sh) so that network
#                            namespaces reach the cluster.
#                            When it is not 127.0.0.1 and not TIER_RGW_ADDR, RGW also listens on
#                            it (same port) and the env file adds S3_ENDPOINT_CLUSTER. `start`
#                            keeps it in DIR/ceph.addr for the later verbs.
#   TIER_CEPH_START_TIMEOUT  seconds `start` may take in all (default 180)
#   TIER_CEPH_STOP_GRACE     seconds between SIGTERM and SIGKILL on stop (default 20)
#
# DESIGN: every daemon is started with `-c DIR/ceph.conf` and writes DIR/$name.pid, so `stop`
# finds exactly the processes this directory started (pid files, cross-checked against the
# process's command line, plus any process whose argv names DIR/ceph.conf) and never anything else.
# Verbs on one DIR are serialised with flock on DIR/.lock; daemons never inherit that descriptor.
set -euo pipefail

OSD_SIZE_BYTES=$((10 * 1024 * 1024 * 1024))
RGW_NAME=client.rgw.tierd
S3_UID=tierd-test

die() {
    echo "ceph.sh: $*" >&2
    exit 1
}
log() { echo "ceph.sh: $*" >&2; }

usage() {
    echo "usage: $0 start|stop|status|start-rgw|stop-rgw|start-osd|stop-osd [DIR]" >&2
    exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || usage
VERB=$1
DIR=${2:-${TMPDIR:-/tmp}/tierd-ceph}
case $VERB in
start | stop | status | start-rgw | stop-rgw | start-osd | stop-osd) ;;
*) usage ;;
esac

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
CONF=$DIR/ceph.conf
LOGDIR=$DIR/log
# Admin sockets must fit in sun_path (108 bytes); deep build directories get a short run dir.
if ((${#DIR} > 70)); then
    RUNDIR=${TMPDIR:-/tmp}/tierd-ceph-run.$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)
else
    RUNDIR=$DIR/run
fi
START_TIMEOUT=${TIER_CEPH_START_TIMEOUT:-180}
STOP_GRACE=${TIER_CEPH_STOP_GRACE:-20}
# The RGW address: the environment's, else the one the running cluster was started with.
RGW_ADDR=${TIER_RGW_ADDR:-}
[[ -n $RGW_ADDR || ! -r $DIR/rgw.addr ]] || read -r RGW_ADDR <"$DIR/rgw.addr" || true
RGW_ADDR=${RGW_ADDR:-127.0.0.1}
[[ $RGW_ADDR =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || die "TIER_RGW_ADDR=$RGW_ADDR is not an IPv4 address"
# The mon's and the OSD's address, found the same way (DIR/ceph.addr).
CEPH_ADDR=${TIER_CEPH_ADDR:-}
[[ -n $CEPH_ADDR || ! -r $DIR/ceph.addr ]] || read -r CEPH_ADDR <"$DIR/ceph.addr" || true
CEPH_ADDR=${CEPH_ADDR:-127.0.0.1}
[[ $CEPH_ADDR =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || die "TIER_CEPH_ADDR=$CEPH_ADDR is not an IPv4 address"

exec 9>"$DIR/.lock"
flock -w "$((START_TIMEOUT + 30))" 9 || die "$DIR is locked by another ceph.sh"
DEADLINE=$((SECONDS + START_TIMEOUT))

# ---- helpers ---------------------------------------------------------------------------------

# The ceph CLI, bounded so a dead mon cannot hang us.
cephc() { timeout 30 ceph -c "$CONF" --connect-timeout 10 "$@" 9>&-; }
rgwadmin() { timeout 60 radosgw-admin -c "$CONF" "$@" 9>&-; }

# pid_of NAME: print the pid from DIR/NAME.pid if that process is alive and was started with our
# conf (a recycled pid belonging to someone else is ignored).
pid_of() {
    local f=$DIR/$1.pid pid
    [[ -r $f ]] || return 1
    read -r pid <"$f" || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    is_ours "$pid" || return 1
    echo "$pid"
}

# is_ours PID: the process exists and one of its arguments is exactly our conf path.
is_ours() {
    local arg
    [[ -r /proc/$1/cmdline ]] || return 1
    while IFS= read -r -d '' arg; do
        [[ $arg == "$CONF" ]] && return 0
    done 2>/dev/null <"/proc/$1/cmdline"
    return 1
}

# All processes started with our conf: pid files first, then a scan of /proc for strays (e.g. a
# daemon killed between fork and writing its pid file).
our_pids() {
    local p name
    for name in "$RGW_NAME" osd.0 mon.a; do
        pid_of "$name" || true
    done
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [[ $p == "$$" ]] && continue
        is_ours "$p" && echo "$p"
    done
    return 0
}

# kill_and_wait GRACE PID... (scripts/lib/daemons.sh)
# shellcheck source=scripts/lib/daemons.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/daemons.sh"

rgw_port() {
    local p
    [[ -r $DIR/rgw.port ]] || return 1
    read -r p <"$DIR/rgw.port"
    echo "$p"
}

# http_code URL [curl args]: the HTTP status, or 000 when nothing answers.
http_code() {
    local url=$1
    shift
    curl -s -o /dev/null -w '%{http_code}' --connect-timeout 2 --max-time 5 "$@" "$url" 2>/dev/null || true
}

# The addresses RGW listens on: RGW_ADDR, and CEPH_ADDR too when it is another one and not
# loopback (the cluster bridge's address, for clients in other network namespaces).
rgw_addrs() {
    echo "$RGW_ADDR"
    [[ $CEPH_ADDR == 127.0.0.1 || $CEPH_ADDR == "$RGW_ADDR" ]] || echo "$CEPH_ADDR"
}

# RGW answers HTTP on each of its addresses.
rgw_answers() {
    local port code a
    port=$(rgw_port) || return 1
    for a in $(rgw_addrs); do
        code=$(http_code "http://$a:$port/")
        [[ $code != 000 ]] || return 1
    done
}

# A SigV4-signed ListBuckets with the env file's credentials.
signed_ok() {
    local region=$1 ak=$2 sk=$3 port code
    port=$(rgw_port) || return 1
    # curl 7.88 does not send x-amz-content-sha256 itself; without it RGW answers
    # SignatureDoesNotMatch.
    code=$(http_code "http://$RGW_ADDR:$port/" --aws-sigv4 "aws:amz:$region:s3" --user "$ak:$sk" \
        -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD')
    [[ $code == 200 ]]
}

# ip_is_local ADDR: ADDR is 127.0.0.1 or an address of an interface of this network namespace.
ip_is_local() {
    [[ $1 == 127.0.0.1 ]] && return 0
    ip -4 -o addr show 2>/dev/null | grep -qF " inet $1/"
}

# The kernel's uuid source needs no extra package (uuidgen comes only via ceph's dependencies).
new_uuid() { cat /proc/sys/kernel/random/uuid; }

# port_busy PORT [ADDR]: something listens on ADDR:PORT (ADDR defaults to 127.0.0.1).
port_busy() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

# pick_port FIRST ADDR...: FIRST if free on every ADDR, else the next port free on all (bounded).
pick_port() {
    local p a busy
    for ((p = $1; p < $1 + 100; p++)); do
        busy=''
        for a in "${@:2}"; do
            if port_busy "$p" "$a"; then
                busy=1
                break
            fi
        done
        [[ -n $busy ]] || {
            echo "$p"
            return 0
        }
    done
    return 1
}

remaining() { echo $((DEADLINE - SECONDS)); }

# wait_for WHAT CMD...: poll CMD until it succeeds or the start deadline passes.
wait_for() {
    local what=$1
    shift
    while ! "$@"; do
        ((SECONDS < DEADLINE)) || {
            log "timed out waiting for $what"
            return 1
        }
        sleep 0.25
    done
}

# show_logs, fail_start: scripts/lib/daemons.sh
KEEP_ON_FAILURE_VAR=TIER_CEPH_KEEP_ON_FAILURE

# ---- stop ------------------------------------------------------------------------------------

stop_all() {
    local pids
    mapfile -t pids < <(our_pids | sort -u)
    if [[ ${#pids[@]} -gt 0 ]]; then
        # RGW first so clients see a clean connection refused, then the OSD, then the mon.
        local rgw osd
        rgw=$(pid_of "$RGW_NAME" || true)
        [[ -n $rgw ]] && kill_and_wait "$STOP_GRACE" "$rgw"
        osd=$(pid_of osd.0 || true)
        [[ -n $osd ]] && kill_and_wait "$STOP_GRACE" "$osd"
        mapfile -t pids < <(our_pids | sort -u)
        kill_and_wait "$STOP_GRACE" "${pids[@]}" || return 1
    fi
    # Remove the data (the sparse OSD file is the big one); keep the logs for post-mortems.
    rm -rf "$DIR/mon" "$DIR/osd" "$DIR/osd-block" "$DIR/rgw" "$DIR/crash" "$DIR/run" "$RUNDIR"
    rm -f "$DIR"/*.pid "$DIR"/*.keyring "$DIR/monmap" "$DIR/osd-secret.json" "$DIR/env" \
        "$DIR/rgw.port" "$DIR/rgw.addr" "$DIR/ceph.addr" "$DIR/s3.keys" "$CONF"
}

stop_rgw() {
    local pid
    pid=$(pid_of "$RGW_NAME" || true)
    [[ -n $pid ]] || return 0
    kill_and_wait "$STOP_GRACE" "$pid"
}

# stop_osd: the OSD's process ends (SIGTERM, then SIGKILL after the grace); its data stays, for
# start-osd (an OSD restart under the clients: their ops wait, their watches error)
stop_osd() {
    local pid
    pid=$(pid_of osd.0 || true)
    [[ -n $pid ]] || return 0
    kill_and_wait "$STOP_GRACE" "$pid"
}

# ---- start -----------------------------------------------------------------------------------

write_conf() {
    local fsid=$1 monport=$2 rgwport=$3 endpoints='' a
    for a in $(rgw_addrs); do
        endpoints+="endpoint=$a:$rgwport "
    done
    cat >"$CONF.tmp" <<EOF
# Generated by scripts/ceph.sh for $DIR; private to this directory.
[global]
fsid = $fsid
mon host = [v2:$CEPH_ADDR:$monport]
public addr = $CEPH_ADDR
# The OSD's cluster and heartbeat messengers too (without it they bind every address).
cluster addr = $CEPH_ADDR
ms bind ipv6 = false
ms bind msgr1 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $DIR/admin.keyring
run dir = $RUNDIR
crash dir = $DIR/crash
pid file = $DIR/\$name.pid
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false
# The mon shuts itself down below mon_data_avail_crit (5%) free on the host file system; a busy
# CI disk should not take the test cluster down, so only stop at 1%.
mon data avail warn = 2
mon data avail crit = 1
osd crush chooseleaf type = 0

[mon]
mon data = $DIR/mon
keyring = $DIR/mon/keyring
log file = $LOGDIR/\$name.log
mon cluster log file = $LOGDIR/cluster.log
# Commit map changes quickly: RGW creates its pools one by one on first start, and each
# waits for an osdmap commit (1 s by default).
paxos propose interval = 0.1

[osd]
osd data = $DIR/osd
keyring = $DIR/osd/keyring
log file = $LOGDIR/\$name.log
osd objectstore = bluestore
# Inside the OSD data dir the block symlink loops (ELOOP); keep the file next to it.
bluestore block path = $DIR/osd-block
bluestore block create = true
bluestore block size = $OSD_SIZE_BYTES
bluestore fsck on mkfs = false
# Keep memory modest: fixed small caches instead of the 4 GiB autotuned target.
bluestore cache autotune = false
bluestore cache size = 134217728
osd memory target = 1073741824

[$RGW_NAME]
keyring = $DIR/rgw.keyring
log file = $LOGDIR/\$name.log
rgw data = $DIR/rgw
rgw frontends = beast ${endpoints}tcp_nodelay=1
rgw thread pool size = 128
# The usage log is the RGW's own count of requests by category (test_sched_rgw.sh compares it
# with the scheduler's count of backend calls); flushed every second.
rgw enable usage log = true
rgw usage log tick interval = 1
rgw usage log flush threshold = 1
EOF
    mv "$CONF.tmp" "$CONF"
}

mon_up() { cephc mon stat >/dev/null 2>&1; }
osd_up() { cephc osd stat 2>/dev/null | grep -q ' 1 up'; }

launch() {
    # Daemons fork; their stdout/stderr go to a file so that callers (CTest) do not wait on our
    # pipes, and fd 9 (the lock) is not inherited.
    local name=$1
    shift
    "$@" -c "$CONF" </dev/null >>"$LOGDIR/$name.out" 2>&1 9>&-
}

start_rgw_daemon() {
    local pid a
    if pid=$(pid_of "$RGW_NAME"); then
        wait_for "RGW to answer" rgw_answers || return 1
        return 0
    fi
    for a in $(rgw_addrs); do
        if port_busy "$(rgw_port)" "$a"; then
            log "port $a:$(rgw_port) is taken by another process"
            return 1
        fi
    done
    launch "$RGW_NAME" radosgw -n "$RGW_NAME" || return 1
    wait_for "RGW to answer" rgw_answers
}

gen_key() { new_uuid | tr -d '-' | tr 'a-f' 'A-F'; }

ensure_user() {
    local ak sk
    if [[ -r $DIR/s3.keys ]]; then
        read -r ak sk <"$DIR/s3.keys"
    else
        ak=$(gen_key | cut -c1-20)
        sk=$(gen_key)$(gen_key | cut -c1-8)
        echo "$ak $sk" >"$DIR/s3.keys"
    fi
    if rgwadmin user info --uid="$S3_UID" >"$LOGDIR/user.json" 2>>"$LOGDIR/radosgw-admin.out"; then
        grep -q "\"$ak\"" "$LOGDIR/user.json" ||
            rgwadmin key create --uid="$S3_UID" --key-type=s3 --access-key="$ak" \
                --secret-key="$sk" >/dev/null 2>>"$LOGDIR/radosgw-admin.out" || return 1
    else
        rgwadmin user create --uid="$S3_UID" --display-name="tierd test user" \
            --access-key="$ak" --secret-key="$sk" >/dev/null 2>>"$LOGDIR/radosgw-admin.out" ||
            return 1
    fi
    S3_AK=$ak
    S3_SK=$sk
}

# RGW uses the credential scope's region for the signature; "default" is the zonegroup's api
# name (so a LocationConstraint of S3_REGION also matches), us-east-1 is what SDKs default to.
write_env() {
    local region port
    port=$(rgw_port)
    for region in default us-east-1; do
        if signed_ok "$region" "$S3_AK" "$S3_SK"; then
            {
                echo "S3_ENDPOINT=http://$RGW_ADDR:$port"
                [[ $CEPH_ADDR == 127.0.0.1 ]] || echo "S3_ENDPOINT_CLUSTER=http://$CEPH_ADDR:$port"
                echo "S3_REGION=$region"
                echo "S3_ACCESS_KEY=$S3_AK"
                echo "S3_SECRET_KEY=$S3_SK"
            } >"$DIR/env.tmp"
            mv "$DIR/env.tmp" "$DIR/env"
            return 0
        fi
    done
    return 1
}

# Healthy: all three daemons ours and alive, RGW answers a signed request with the env's keys
# (and HTTP on each of its addresses).
healthy() {
    local S3_ACCESS_KEY='' S3_SECRET_KEY='' S3_REGION='' k v
    pid_of mon.a >/dev/null && pid_of osd.0 >/dev/null && pid_of "$RGW_NAME" >/dev/null || return 1
    [[ -r $DIR/env ]] || return 1
    while IFS='=' read -r k v; do
        case $k in
        S3_REGION) S3_REGION=$v ;;
        S3_ACCESS_KEY) S3_ACCESS_KEY=$v ;;
        S3_SECRET_KEY) S3_SECRET_KEY=$v ;;
        esac
    done <"$DIR/env"
    signed_ok "$S3_REGION" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" && rgw_answers
}

start_fresh() {
    local fsid monport rgwport uuid secret id a addrs
    stop_all
    rm -rf "$LOGDIR"
    mkdir -p "$LOGDIR" "$DIR/mon" "$DIR/osd" "$DIR/rgw" "$DIR/crash" "$RUNDIR"

    RGW_ADDR=${TIER_RGW_ADDR:-127.0.0.1}
    CEPH_ADDR=${TIER_CEPH_ADDR:-127.0.0.1}
    ip_is_local "$CEPH_ADDR" || die "TIER_CEPH_ADDR=$CEPH_ADDR is not an address of this host (ip -4 addr)"
    monport=$(pick_port 3300 "$CEPH_ADDR") || die "no free port for the mon"
    echo "$RGW_ADDR" >"$DIR/rgw.addr"
    echo "$CEPH_ADDR" >"$DIR/ceph.addr"
    mapfile -t addrs < <(rgw_addrs)
    if [[ -n ${TIER_RGW_PORT:-} ]]; then
        rgwport=$TIER_RGW_PORT
        for a in "${addrs[@]}"; do
            port_busy "$rgwport" "$a" && die "TIER_RGW_PORT=$rgwport is already in use on $a"
        done
    else
        rgwport=$(pick_port 7480 "${addrs[@]}") || die "no free port for RGW"
    fi
    echo "$rgwport" >"$DIR/rgw.port"
    fsid=$(new_uuid)
    write_conf "$fsid" "$monport" "$rgwport"

    # mon: keyrings, monmap, mkfs, run.
    ceph-authtool --create-keyring "$DIR/mon.keyring" --gen-key -n mon. --cap mon 'allow *' \
        >/dev/null
    ceph-authtool --create-keyring "$DIR/admin.keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
    ceph-authtool "$DIR/mon.keyring" --import-keyring "$DIR/admin.keyring" >/dev/null
    monmaptool --create --fsid "$fsid" --addv a "[v2:$CEPH_ADDR:$monport]" "$DIR/monmap" \
        >/dev/null
    launch mon.a ceph-mon --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/mon.keyring" ||
        fail_start "ceph-mon --mkfs"
    launch mon.a ceph-mon -i a || fail_start "ceph-mon"
    wait_for "the mon" mon_up || fail_start "mon did not come up"
    log "mon up on $CEPH_ADDR:$monport (${SECONDS}s)"

    # osd: register, mkfs (creates the sparse block file), run.
    uuid=$(new_uuid)
    secret=$(ceph-authtool --gen-print-key)
    printf '{"cephx_secret": "%s"}\n' "$secret" >"$DIR/osd-secret.json"
    id=$(cephc osd new "$uuid" -i "$DIR/osd-secret.json" 2>>"$LOGDIR/ceph-cli.out") ||
        fail_start "ceph osd new"
    [[ $id == 0 ]] || fail_start "expected osd id 0, got '$id'"
    ceph-authtool --create-keyring "$DIR/osd/keyring" --name osd.0 --add-key "$secret" >/dev/null
    launch osd.0 ceph-osd -i 0 --mkfs --osd-uuid "$uuid" || fail_start "ceph-osd --mkfs"
    launch osd.0 ceph-osd -i 0 || fail_start "ceph-osd"
    wait_for "the OSD" osd_up || fail_start "OSD did not come up"
    log "OSD up (${SECONDS}s)"

    # rgw: its key, run (it creates its pools on first start), then the S3 user.
    cephc auth get-or-create "$RGW_NAME" mon 'allow rw' osd 'allow rwx' \
        -o "$DIR/rgw.keyring" 2>>"$LOGDIR/ceph-cli.out" || fail_start "rgw key"
    start_rgw_daemon || fail_start "RGW did not come up"
    log "RGW answers on $(rgw_addrs | tr '\n' ' ')port $rgwport (${SECONDS}s)"
    ensure_user || fail_start "radosgw-admin user create"
    wait_for "a signed request to succeed" write_env || fail_start "signed request failed"
}

# The env file's endpoints on one line.
endpoints() { grep '^S3_ENDPOINT' "$DIR/env" | paste -sd ' ' -; }

start() {
    local t0=$SECONDS was='' was_ceph=''
    [[ ! -r $DIR/rgw.addr ]] || read -r was <"$DIR/rgw.addr" || true
    if [[ -n $was ]]; then
        was_ceph=127.0.0.1
        [[ ! -r $DIR/ceph.addr ]] || read -r was_ceph <"$DIR/ceph.addr" || true
    fi
    if [[ -n $was && ($was != "$RGW_ADDR" || $was_ceph != "$CEPH_ADDR") ]]; then
        # The running cluster binds other addresses: neither fast path applies.
        log "addresses change from RGW $was, mon/OSD $was_ceph to RGW $RGW_ADDR, mon/OSD $CEPH_ADDR;" \
            "starting from scratch"
        start_fresh
        log "started in $((SECONDS - t0))s: $(endpoints) (env: $DIR/env)"
        return 0
    fi
    if healthy; then
        log "already running from $DIR ($(endpoints))"
        return 0
    fi
    if pid_of mon.a >/dev/null && pid_of osd.0 >/dev/null && [[ -r $DIR/s3.keys ]] &&
        mon_up && osd_up; then
        # Only RGW is missing (e.g. after stop-rgw): bring it back without losing data.
        log "mon and OSD running; starting RGW only"
        if start_rgw_daemon && ensure_user && write_env; then
            return 0
        fi
        log "RGW restart failed; starting from scratch"
    fi
    start_fresh
    log "started in $((SECONDS - t0))s: $(endpoints) (env: $DIR/env)"
}

case $VERB in
start) start ;;
stop)
    stop_all
    log "stopped; data removed from $DIR (logs kept in $LOGDIR)"
    ;;
status)
    if rgw_answers; then
        echo "RGW answers at $(rgw_addrs | sed "s|.*|http://&:$(rgw_port)|" | tr '\n' ' ')(mon/OSD on $CEPH_ADDR)"
    else
        echo "RGW not answering"
        exit 1
    fi
    ;;
stop-rgw) stop_rgw ;;
stop-osd) stop_osd ;;
start-osd)
    [[ -r $CONF ]] || die "no cluster in $DIR; run: $0 start $DIR"
    pid_of mon.a >/dev/null || die "the mon is not running from $DIR"
    DEADLINE=$((SECONDS + 120))
    if ! pid_of osd.0 >/dev/null; then
        launch osd.0 ceph-osd -i 0 || die "ceph-osd did not start (log $LOGDIR/osd.0.out)"
    fi
    wait_for "the OSD" osd_up || die "the OSD did not come up (log $LOGDIR/osd.0.out)"
    ;;
start-rgw)
    [[ -r $CONF ]] || die "no cluster in $DIR; run: $0 start $DIR"
    if ! pid_of mon.a >/dev/null || ! pid_of osd.0 >/dev/null; then
        die "mon/OSD not running from $DIR"
    fi
    DEADLINE=$((SECONDS + 60))
    start_rgw_daemon || {
        show_logs
        exit 1
    }
    ;;
esac
