# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# scripts/lib/daemons.sh - stopping the daemons a test script started (sourced by scripts/ceph.sh
# and scripts/slurm.sh). The sourcing script defines is_ours PID (true for a process it started:
# its command line names the script's directory) and log MSG.

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
