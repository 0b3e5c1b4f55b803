# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# scripts/lib/daemons.sh - stopping the daemons a test script started (sourced by scripts/ceph.sh
# and scripts/slurm.sh). The sourcing script defines is_ours PID (true for a process it started:
# its command line names the script's directory), log MSG, stop_all, LOGDIR (its daemons' logs)
# and KEEP_ON_FAILURE_VAR (the name of the variable that, set, keeps daemons of a failed start).

# kill_and_wait GRACE PID...: SIGTERM, wait up to GRACE s, then SIGKILL and wait a little more.
kill_and_wait() {
    local grace=$1 p left end
    shift
    [[ $# -gt 0 ]] || return 0
    kill -TERM "$@" 2>/dev/null || true
    end=$((SECONDS + grace))
    while :; do
        left=()
        for p in "$@"; do
            [[ -d /proc/$p ]] && is_ours "$p" && left+=("$p")
        done
        [[ ${#left[@]} -eq 0 ]] && return 0
        if ((SECONDS >= end)); then
            if ((grace > 0)); then
                log "SIGKILL ${left[*]} after ${grace}s"
                kill -KILL "${left[@]}" 2>/dev/null || true
                end=$((SECONDS + 10))
                grace=0
            else
                log "processes ${left[*]} did not exit"
                return 1
            fi
        fi
        sleep 0.1
    done
}

# show_logs: the tail of every log in LOGDIR, on stderr
show_logs() {
    local f
    for f in "$LOGDIR"/*; do
        [[ -f $f ]] || continue
        echo "---- tail of $f ----" >&2
        tail -n 25 "$f" >&2 || true
    done
}

# fail_start MSG...: a start that failed: say why, show the logs, stop what was started (unless
# the variable named by KEEP_ON_FAILURE_VAR is set) and exit 1
fail_start() {
    log "start failed: $*"
    show_logs
    if [[ -n ${!KEEP_ON_FAILURE_VAR:-} ]]; then
        log "$KEEP_ON_FAILURE_VAR set: leaving the daemons running for inspection"
    else
        stop_all >&2 || true
    fi
    exit 1
}
