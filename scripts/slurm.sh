#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# slurm.sh - a private single-node Slurm (munged, slurmctld, slurmd from Debian 12's packages,
# Slurm 22.05) with the burst_buffer/lua plugin, for the tests of the Slurm burst-buffer provider
# (issue 13). Everything lives in one state directory: munge's key, seed, socket, pid and log,
# slurm.conf, burst_buffer.conf and burst_buffer.lua (the plugin reads them from slurm.conf's
# directory), slurmctld's state, slurmd's spool, pid and log files, a job directory that job
# users may write (DIR/jobs) and the `env` file that tests read. Nothing touches /etc/slurm,
# /etc/munge, /run/munge or any system service, and no systemd is involved. See docs/SLURM.md.
#
# Usage: scripts/slurm.sh start DIR [LUA] | stop DIR | status DIR
#   start  (re)creates the cluster in DIR and waits until sinfo shows the node idle. LUA is the
#          burst_buffer.lua to install; without it the harness's placeholder is generated (every
#          hook appends one line "HOOK ARGS..." to DIR/bb_hooks.log and succeeds; it offers one
#          pool, "tierd", of 1 TiB). The placeholder stands in until contrib/slurm/burst_buffer.lua
#          exists.
#   stop   stops what DIR started (idempotent, safe from a trap); keeps DIR/log.
#   status says whether slurmctld answers and the node's state; exit status 1 when it does not.
# Environment:
#   TIER_SLURM_BB_CONF        a file to install as DIR/tierd_bb.conf (the provider's settings)
#   TIER_SLURM_START_TIMEOUT  seconds `start` may take in all (default 60)
#   TIER_SLURM_STOP_GRACE     seconds between SIGTERM and SIGKILL on stop (default 10)
#
# Jobs: root cannot allocate burst buffers ("User root can not allocate burst buffers" at
# sbatch), so tests submit as an unprivileged user, e.g.
#   . DIR/env; runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" sbatch --chdir="$SLURM_JOBDIR" ...
# The munge socket's directory is world-searchable so that job users can authenticate.
#
# DESIGN: munged is started with `--key-file DIR/munge/munge.key`, slurmctld and slurmd with
# `-f DIR/slurm.conf`, each writes its pid file in DIR, so `stop` finds exactly the processes this
# directory started (pid files cross-checked against the process's command line, plus any process
# whose argv names our conf or key) and never anything else. Jobs still queued or running are
# cancelled first so that no slurmstepd outlives its slurmd. Verbs on one DIR are serialised with
# flock on DIR/.lock; daemons never inherit that descriptor.
set -euo pipefail

die() {
    echo "slurm.sh: $*" >&2
    exit 1
}
log() { echo "slurm.sh: $*" >&2; }

usage() {
    echo "usage: $0 start DIR [LUA] | stop DIR | status DIR" >&2
    exit 2
}

[[ $# -ge 2 && $# -le 3 ]] || usage
VERB=$1
case $VERB in
start) ;;
stop | status) [[ $# -eq 2 ]] || usage ;;
*) usage ;;
esac
LUA_SRC=${3:-}
if [[ -n $LUA_SRC ]]; then
    [[ -r $LUA_SRC ]] || die "$LUA_SRC: cannot read the burst_buffer.lua to install"
    LUA_SRC=$(cd "$(dirname "$LUA_SRC")" && pwd -P)/$(basename "$LUA_SRC")
fi

mkdir -p "$2"
DIR=$(cd "$2" && pwd -P)
# slurm.conf values cannot hold blanks; say so instead of writing a broken conf.
[[ $DIR != *[[:space:]]* ]] || die "$DIR: the state directory's path must not contain blanks"
CONF=$DIR/slurm.conf
LOGDIR=$DIR/log
MUNGEDIR=$DIR/munge
KEY=$MUNGEDIR/munge.key
# The munge socket must fit in sun_path (108 bytes); deep directories get a short run dir.
if ((${#DIR} > 80)); then
    RUNDIR=${TMPDIR:-/tmp}/tierd-slurm-run.$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)
else
    RUNDIR=$DIR/run
fi
SOCK=$RUNDIR/munge.socket
START_TIMEOUT=${TIER_SLURM_START_TIMEOUT:-60}
STOP_GRACE=${TIER_SLURM_STOP_GRACE:-10}
NODE=$(hostname -s)
PARTITION=tierd

exec 9>"$DIR/.lock"
flock -w "$((START_TIMEOUT + 30))" 9 || die "$DIR is locked by another slurm.sh"
DEADLINE=$((SECONDS + START_TIMEOUT))

# ---- helpers ---------------------------------------------------------------------------------

# The Slurm clients on our conf, bounded so a dead slurmctld cannot hang us.
slurmc() { SLURM_CONF=$CONF timeout 20 "$@" 9>&-; }

# is_ours PID: the process exists and one of its arguments is exactly our conf or key path.
is_ours() {
    local arg
    [[ -r /proc/$1/cmdline ]] || return 1
    while IFS= read -r -d '' arg; do
        [[ $arg == "$CONF" || $arg == "$KEY" ]] && return 0
    done 2>/dev/null <"/proc/$1/cmdline"
    return 1
}

# pid_of FILE: the pid in FILE if that process is alive and was started from this directory.
pid_of() {
    local pid
    [[ -r $1 ]] || return 1
    read -r pid <"$1" || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    is_ours "$pid" || return 1
    echo "$pid"
}

# All processes started with our conf or key: pid files first, then a scan of /proc for strays
# (slurmctld's slurmscriptd child, a daemon killed before it wrote its pid file).
our_pids() {
    local p f
    for f in "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$MUNGEDIR/munged.pid"; do
        pid_of "$f" || true
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

# port_busy PORT: something listens on 127.0.0.1:PORT.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pick_port FIRST [NOT]: FIRST if free, else the next free one (bounded), never NOT.
pick_port() {
    local p
    for ((p = $1; p < $1 + 200; p++)); do
        [[ $p == "${2:-}" ]] && continue
        port_busy "$p" || {
            echo "$p"
            return 0
        }
    done
    return 1
}

# wait_for WHAT CMD...: poll CMD until it succeeds or the start deadline passes.
wait_for() {
    local what=$1
    shift
    while ! "$@"; do
        ((SECONDS < DEADLINE)) || {
            log "timed out after ${START_TIMEOUT}s waiting for $what"
            return 1
        }
        sleep 0.2
    done
}

# show_logs, fail_start: scripts/lib/daemons.sh
KEEP_ON_FAILURE_VAR=TIER_SLURM_KEEP_ON_FAILURE

node_state() { slurmc sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null; }
node_idle() { [[ $(node_state) == idle ]]; }
ctld_answers() { slurmc scontrol ping 2>/dev/null | grep -q 'is UP'; }
munge_works() { munge -n -S "$SOCK" 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1; }

# ---- stop ------------------------------------------------------------------------------------

# cancel_jobs: cancel every job of our cluster and wait (bounded) until none runs, so that no
# slurmstepd or job process outlives slurmd. Nothing to do when slurmctld is not ours or is down.
cancel_jobs() {
    local ids end
    pid_of "$DIR/slurmctld.pid" >/dev/null || return 0
    ctld_answers || return 0
    mapfile -t ids < <(slurmc squeue -h -o '%A' 2>/dev/null || true)
    [[ ${#ids[@]} -gt 0 ]] || return 0
    slurmc scancel "${ids[@]}" 2>/dev/null || true
    end=$((SECONDS + STOP_GRACE))
    while ((SECONDS < end)); do
        [[ -z $(slurmc squeue -h -t running,completing,stage_out -o '%A' 2>/dev/null || true) ]] &&
            return 0
        sleep 0.2
    done
    log "jobs still running after ${STOP_GRACE}s; stopping the daemons anyway"
}

# start_time PID: the process's start time in clock ticks (field 22 of /proc/PID/stat), empty
# when it is gone or a zombie; tells a process from a later one that reuses its pid.
start_time() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    # shellcheck disable=SC2086 # word splitting of the fields is the point
    set -- $stat
    [[ $1 != Z ]] || return 0
    echo "${20}"
}

stop_all() {
    local pid pids kids=() starts=() k i
    cancel_jobs
    # slurmd first (its node goes away cleanly), then slurmctld, then munged, then strays.
    pid=$(pid_of "$DIR/slurmd.pid" || true)
    [[ -n $pid ]] && kill_and_wait "$STOP_GRACE" "$pid"
    pid=$(pid_of "$DIR/slurmctld.pid" || true)
    if [[ -n $pid ]]; then
        # slurmctld's slurmscriptd child renames its argv (": slurmscriptd"), so only its parent
        # identifies it: remember it (and its start time) before stopping the parent.
        mapfile -t kids < <(pgrep -P "$pid" || true)
        for k in "${kids[@]}"; do
            starts+=("$(start_time "$k")")
        done
        kill_and_wait "$STOP_GRACE" "$pid"
        for i in "${!kids[@]}"; do
            [[ -n ${starts[i]} && $(start_time "${kids[i]}") == "${starts[i]}" ]] || continue
            log "slurmscriptd ${kids[i]} outlived slurmctld; SIGKILL"
            kill -KILL "${kids[i]}" 2>/dev/null || true
        done
    fi
    pid=$(pid_of "$MUNGEDIR/munged.pid" || true)
    [[ -n $pid ]] && kill_and_wait "$STOP_GRACE" "$pid"
    mapfile -t pids < <(our_pids | sort -u)
    kill_and_wait "$STOP_GRACE" "${pids[@]}" || return 1
    # Remove the state; keep the logs (and the hook log) for post-mortems.
    rm -rf "$DIR/state" "$DIR/spool" "$DIR/jobs" "$MUNGEDIR" "$DIR/run" "$RUNDIR"
    rm -f "$DIR"/*.pid "$DIR/env" "$CONF" "$DIR/burst_buffer.conf" "$DIR/burst_buffer.lua" \
        "$DIR/plugstack.conf" "$DIR/cgroup.conf" "$DIR/tierd_bb.conf"
}

# ---- start -----------------------------------------------------------------------------------

start_munge() {
    mkdir -p "$MUNGEDIR" "$RUNDIR"
    # munged refuses group- or world-writable directories on its paths; job users must reach
    # the socket, so its directory is 0755.
    chmod 0700 "$MUNGEDIR"
    chmod 0755 "$RUNDIR"
    (umask 077 && head -c 1024 /dev/urandom >"$KEY")
    munged --key-file "$KEY" --socket "$SOCK" --pid-file "$MUNGEDIR/munged.pid" \
        --log-file "$LOGDIR/munged.log" --seed-file "$MUNGEDIR/munged.seed" \
        </dev/null >>"$LOGDIR/munged.out" 2>&1 9>&- || fail_start "munged did not start"
    wait_for "munged to answer on $SOCK" munge_works || fail_start "munged does not answer"
}

# The node as slurmd sees it (CPUs, boards, sockets, cores, threads, RealMemory), so that the
# configured node matches the real one and never drains as "Low RealMemory" or "Low CPUs".
node_line() {
    local hw
    hw=$(slurmd -C 2>/dev/null | head -n 1) || return 1
    [[ $hw == NodeName=* ]] || return 1
    hw=${hw#NodeName=* }
    echo "NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE $hw State=UNKNOWN"
}

write_conf() {
    local ctldport=$1 slurmdport=$2 node
    node=$(node_line) || fail_start "slurmd -C did not describe this host"
    cat >"$CONF.tmp" <<EOF
# Generated by scripts/slurm.sh for $DIR; private to this directory (tests only).
ClusterName=tierd
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$ctldport
SlurmdPort=$slurmdport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
BurstBufferType=burst_buffer/lua
ReturnToService=2
# Completed jobs stay visible to squeue/scontrol for 5 minutes.
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=5
MailProg=/bin/true
$node
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
    # Bounded stage-in/out so a hung hook shows up in a test, not after a day (the default).
    cat >"$DIR/burst_buffer.conf" <<EOF
# Generated by scripts/slurm.sh for $DIR.
StageInTimeout=120
StageOutTimeout=120
OtherTimeout=60
EOF
    : >"$DIR/plugstack.conf"
}

# The harness's placeholder burst_buffer.lua (until contrib/slurm/burst_buffer.lua exists):
# every hook appends "HOOK ARGS..." to DIR/bb_hooks.log and succeeds; one pool, "tierd".
write_placeholder_lua() {
    cat >"$DIR/burst_buffer.lua" <<EOF
-- Generated by scripts/slurm.sh: the test harness's placeholder burst_buffer.lua, NOT the
-- tierd provider. Each hook appends one line "HOOK ARG..." to the hook log and succeeds.
local hook_log = "$DIR/bb_hooks.log"

local function record(name, ...)
    local f = io.open(hook_log, "a")
    if f then
        local parts = { name }
        for i = 1, select("#", ...) do
            parts[#parts + 1] = tostring(select(i, ...))
        end
        f:write(table.concat(parts, " "), "\n")
        f:close()
    end
    return slurm.SUCCESS
end

function slurm_bb_job_process(job_script, ...) return record("slurm_bb_job_process", job_script, ...) end
function slurm_bb_pools()
    return slurm.SUCCESS, '{"pools":[{"id":"tierd","quantity":1099511627776,"granularity":1}]}'
end
function slurm_bb_job_teardown(...) return record("slurm_bb_job_teardown", ...) end
function slurm_bb_setup(...) return record("slurm_bb_setup", ...) end
function slurm_bb_data_in(...) return record("slurm_bb_data_in", ...) end
function slurm_bb_real_size(...) return record("slurm_bb_real_size", ...) end
function slurm_bb_paths(...) return record("slurm_bb_paths", ...) end
function slurm_bb_pre_run(...) return record("slurm_bb_pre_run", ...) end
function slurm_bb_post_run(...) return record("slurm_bb_post_run", ...) end
function slurm_bb_data_out(...) return record("slurm_bb_data_out", ...) end
function slurm_bb_get_status(...)
    record("slurm_bb_get_status", ...)
    return slurm.SUCCESS, "tierd harness placeholder\n"
end
EOF
}

write_env() {
    local prog
    {
        echo "SLURM_DIR=$DIR"
        echo "SLURM_CONF=$CONF"
        echo "SLURM_JOBDIR=$DIR/jobs"
        echo "SLURM_NODE=$NODE"
        echo "SLURM_PARTITION=$PARTITION"
        echo "SLURM_MUNGE_SOCKET=$SOCK"
        echo "SLURM_BB_LUA=$DIR/burst_buffer.lua"
        [[ -n $LUA_SRC ]] || echo "SLURM_BB_HOOK_LOG=$DIR/bb_hooks.log"
        for prog in sbatch squeue scontrol scancel sinfo; do
            echo "SLURM_${prog^^}=$(command -v "$prog")"
        done
    } >"$DIR/env.tmp"
    mv "$DIR/env.tmp" "$DIR/env"
}

healthy() {
    pid_of "$MUNGEDIR/munged.pid" >/dev/null && pid_of "$DIR/slurmctld.pid" >/dev/null &&
        pid_of "$DIR/slurmd.pid" >/dev/null && [[ -r $DIR/env ]] && node_idle
}

start() {
    local t0=$SECONDS prog ctldport slurmdport
    for prog in munged munge unmunge slurmctld slurmd sinfo scontrol squeue scancel sbatch; do
        command -v "$prog" >/dev/null || die "$prog is missing (scripts/deps.sh installs Slurm)"
    done
    stop_all
    rm -rf "$LOGDIR"
    mkdir -p "$LOGDIR" "$DIR/state" "$DIR/spool"
    # Job users write their output here; sticky like /tmp.
    mkdir -p "$DIR/jobs"
    chmod 1777 "$DIR/jobs"
    # Job users read slurm.conf and reach the munge socket through DIR.
    chmod 0755 "$DIR"
    rm -f "$DIR/bb_hooks.log"

    start_munge
    ctldport=$(pick_port 6817) || die "no free port for slurmctld"
    slurmdport=$(pick_port $((ctldport + 1)) "$ctldport") || die "no free port for slurmd"
    write_conf "$ctldport" "$slurmdport"
    # Job users (nobody) read slurm.conf: every directory above DIR must be searchable.
    if [[ $(id -u) == 0 ]] && ! runuser -u nobody -- test -r "$CONF" 2>/dev/null; then
        fail_start "user nobody cannot read $CONF: make the directories above $DIR" \
            "world-searchable (chmod o+x) or use another DIR"
    fi
    if [[ -n ${TIER_SLURM_BB_CONF:-} ]]; then
        install -m 0644 "$TIER_SLURM_BB_CONF" "$DIR/tierd_bb.conf" ||
            fail_start "cannot install $TIER_SLURM_BB_CONF as $DIR/tierd_bb.conf"
    fi
    if [[ -n $LUA_SRC ]]; then
        install -m 0644 "$LUA_SRC" "$DIR/burst_buffer.lua"
    else
        write_placeholder_lua
        : >"$DIR/bb_hooks.log"
    fi

    slurmctld -f "$CONF" </dev/null >>"$LOGDIR/slurmctld.out" 2>&1 9>&- ||
        fail_start "slurmctld did not start"
    wait_for "slurmctld to answer on port $ctldport" ctld_answers ||
        fail_start "slurmctld does not answer"
    slurmd -f "$CONF" </dev/null >>"$LOGDIR/slurmd.out" 2>&1 9>&- ||
        fail_start "slurmd did not start"
    wait_for "node $NODE to be idle" node_idle ||
        fail_start "node $NODE is not idle: $(node_state || true)"
    # slurmctld keeps running when the Lua does not load (syntax error); say so now rather than
    # at the first burst-buffer job.
    local err
    if err=$(grep -m 1 -F "error: burst_buffer/lua: $DIR/burst_buffer.lua" "$LOGDIR/slurmctld.log"); then
        fail_start "burst_buffer.lua does not load: $err"
    fi
    write_env
    log "started in $((SECONDS - t0))s: slurmctld port $ctldport, slurmd port $slurmdport" \
        "(env: $DIR/env)"
}

case $VERB in
start) start ;;
stop)
    stop_all
    log "stopped; state removed from $DIR (logs kept in $LOGDIR)"
    ;;
status)
    if pid_of "$DIR/slurmctld.pid" >/dev/null && ctld_answers; then
        echo "slurmctld answers ($CONF); node $NODE: $(node_state || echo unknown)"
        healthy || exit 1
    else
        echo "slurmctld not answering ($CONF)"
        exit 1
    fi
    ;;
esac
