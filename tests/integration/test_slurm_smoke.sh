#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_slurm_smoke.sh - proves the CTest `slurm` fixture (scripts/slurm.sh start) gives a working
# single-node Slurm with the burst_buffer/lua plugin and the harness's placeholder Lua:
#   1. `slurm.sh status` agrees, the env file names the clients, the node is idle and the
#      plugin reports the placeholder's pool (the Lua loaded);
#   2. a plain batch job, submitted as nobody, reaches COMPLETED and its output file holds what
#      it wrote (job id, user nobody);
#   3. root is refused a burst buffer at sbatch ("User root can not allocate burst buffers");
#   4. a job with `#BB_LUA pool=tierd capacity=1M`, as nobody, reaches COMPLETED, and the
#      placeholder's hook log shows, for that job, slurm_bb_job_process, setup, data_in, pre_run,
#      post_run, data_out and job_teardown, each once and in that order.
# Every wait polls squeue/scontrol or the hook log with a deadline (no sleeps as synchronisation).
# Usage: test_slurm_smoke.sh SRC_DIR SLURM_DIR
set -euo pipefail

src=$1
dir=$2
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
ok() { echo "ok: $*"; }

# poll SECS CMD...: run CMD until it succeeds or SECS pass.
poll() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1 # polling interval
    done
}

env_file=$dir/env
[[ -r $env_file ]] || fail "$env_file missing (did the slurm_start fixture run?)"
SLURM_CONF='' SLURM_JOBDIR='' SLURM_NODE='' SLURM_BB_HOOK_LOG=''
SLURM_SBATCH='' SLURM_SQUEUE='' SLURM_SCONTROL='' SLURM_SINFO=''
while IFS='=' read -r k v; do
    case $k in
    SLURM_CONF) SLURM_CONF=$v ;;
    SLURM_JOBDIR) SLURM_JOBDIR=$v ;;
    SLURM_NODE) SLURM_NODE=$v ;;
    SLURM_BB_HOOK_LOG) SLURM_BB_HOOK_LOG=$v ;;
    SLURM_SBATCH) SLURM_SBATCH=$v ;;
    SLURM_SQUEUE) SLURM_SQUEUE=$v ;;
    SLURM_SCONTROL) SLURM_SCONTROL=$v ;;
    SLURM_SINFO) SLURM_SINFO=$v ;;
    esac
done <"$env_file"
for v in SLURM_CONF SLURM_JOBDIR SLURM_NODE SLURM_SBATCH SLURM_SQUEUE SLURM_SCONTROL SLURM_SINFO; do
    [[ -n ${!v} ]] || fail "$env_file has no $v"
done
[[ -n $SLURM_BB_HOOK_LOG ]] ||
    fail "$env_file has no SLURM_BB_HOOK_LOG: the fixture must run the placeholder Lua"
export SLURM_CONF
"$src/scripts/slurm.sh" status "$dir" >/dev/null || fail "slurm.sh status says Slurm is down"
state=$(timeout 20 "$SLURM_SINFO" -h -N -n "$SLURM_NODE" -o '%T')
[[ $state == idle || $state == mixed || $state == allocated ]] || fail "node state '$state'"
ok "cluster up, node $SLURM_NODE $state"
burst=$(timeout 20 "$SLURM_SCONTROL" show burst) || fail "scontrol show burst failed"
[[ $burst == *"PoolName[0]=tierd "* ]] ||
    fail "the placeholder's pool 'tierd' is not in scontrol show burst: $burst"
ok "burst_buffer/lua loaded the placeholder (pool tierd)"

work=$(mktemp -d "$SLURM_JOBDIR/smoke.XXXXXX")
chmod 0777 "$work"
trap 'rm -rf "$work"' EXIT

# as_nobody CMD...: root cannot allocate burst buffers, so jobs are submitted as nobody.
as_nobody() { runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" "$@"; }

# submit SCRIPT: sbatch as nobody from $work; prints the job id.
submit() {
    local id
    id=$(cd "$work" && as_nobody timeout 20 "$SLURM_SBATCH" --parsable -o "$work/slurm-%j.out" \
        "$1") || fail "sbatch $1 failed"
    id=${id%%;*}
    [[ $id =~ ^[0-9]+$ ]] || fail "sbatch printed '$id', not a job id"
    echo "$id"
}

job_state() { timeout 20 "$SLURM_SCONTROL" -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

# completed ID: true once the job is COMPLETED; fails the test at once on a final state that is
# not COMPLETED.
completed() {
    local s
    s=$(job_state "$1")
    case $s in
    COMPLETED) return 0 ;;
    FAILED | CANCELLED | TIMEOUT | NODE_FAIL | BOOT_FAIL | DEADLINE | OUT_OF_MEMORY | PREEMPTED)
        timeout 20 "$SLURM_SCONTROL" show job "$1" >&2 || true
        fail "job $1 ended $s"
        ;;
    esac
    return 1
}

wait_completed() {
    local t0=$SECONDS
    poll 30 completed "$1" || {
        timeout 20 "$SLURM_SCONTROL" show job "$1" >&2 || true
        timeout 20 "$SLURM_SQUEUE" >&2 || true
        fail "job $1 not COMPLETED after 30 s (state: $(job_state "$1"))"
    }
    echo "$((SECONDS - t0))"
}

# ---- 2. a plain job ----------------------------------------------------------------------------
cat >"$work/plain.sh" <<'EOF'
#!/bin/bash
echo "plain $SLURM_JOB_ID $(id -un)" >"$SLURM_SUBMIT_DIR/plain.$SLURM_JOB_ID"
EOF
chmod 0755 "$work/plain.sh"
id=$(submit "$work/plain.sh")
secs=$(wait_completed "$id")
[[ -r $work/plain.$id ]] || fail "job $id COMPLETED but wrote no $work/plain.$id"
got=$(cat "$work/plain.$id")
[[ $got == "plain $id nobody" ]] || fail "job $id wrote '$got', expected 'plain $id nobody'"
ok "plain job $id COMPLETED in ${secs}s and wrote its file as nobody"

# ---- 3. root is refused a burst buffer ------------------------------------------------------------
cat >"$work/bb.sh" <<'EOF'
#!/bin/bash
#BB_LUA pool=tierd capacity=1M
echo "bb $SLURM_JOB_ID $(id -un)" >"$SLURM_SUBMIT_DIR/bb.$SLURM_JOB_ID"
EOF
chmod 0755 "$work/bb.sh"
if out=$(cd "$work" && timeout 20 "$SLURM_SBATCH" --parsable "$work/bb.sh" 2>&1); then
    fail "root was allowed a burst buffer (job ${out})"
fi
[[ $out == *"can not allocate burst buffers"* ]] || fail "root's sbatch failed otherwise: $out"
ok "root refused a burst buffer at sbatch"

# ---- 4. a burst-buffer job through the Lua hooks -----------------------------------------------
id=$(submit "$work/bb.sh")
secs=$(wait_completed "$id")
got=$(cat "$work/bb.$id" 2>/dev/null) || fail "bb job $id COMPLETED but wrote no $work/bb.$id"
[[ $got == "bb $id nobody" ]] || fail "bb job $id wrote '$got', expected 'bb $id nobody'"

# The job's hooks, in the order the placeholder recorded them: slurm_bb_job_process names the
# job's script (.../job.ID/script), every other hook has the job id as its first argument.
hooks() {
    awk -v id="$id" '
        $1 == "slurm_bb_job_process" && $2 ~ ("/job\\." id "/") { print $1; next }
        $1 != "slurm_bb_job_process" && $2 == id { print $1 }' "$SLURM_BB_HOOK_LOG"
}
want=(slurm_bb_job_process slurm_bb_setup slurm_bb_data_in slurm_bb_pre_run slurm_bb_post_run
    slurm_bb_data_out slurm_bb_job_teardown)
# Teardown may follow COMPLETED by a moment: wait for it, then check the whole sequence.
torn_down() { hooks | grep -qx slurm_bb_job_teardown; }
poll 30 torn_down || fail "no slurm_bb_job_teardown for job $id: $(hooks | tr '\n' ' ')"
mapfile -t seen < <(hooks | grep -xF -f <(printf '%s\n' "${want[@]}"))
[[ ${seen[*]} == "${want[*]}" ]] ||
    fail "job $id hooks: '${seen[*]}', expected '${want[*]}' (all: $(hooks | tr '\n' ' '))"
ok "bb job $id COMPLETED in ${secs}s; hooks in order: ${seen[*]}"
