#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/slurm_hooks.sh - issue 13's numbers for the Slurm provider (contrib/slurm/burst_buffer.lua)
# on a private single-node Slurm (scripts/slurm.sh) next to a release-build tierd whose object
# store is the Ceph RGW behind a shaped link (scripts/netlink.sh: tbf at RATE both ways, DELAY_MS
# each way by the proxy), in one run:
#   hooks     JOBS small burst-buffer jobs (capacity=1M, stage= one 1 MiB file, stage_out= a
#             write-back directory) submitted at once, as nobody: each hook's wall time, timed
#             inside the Lua around the hook body (its timing_log), p50 / p99 / max per hook,
#             and slurmctld's own time for each submission RPC (its log's usec=, which includes
#             slurm_bb_job_process)
#   release   a job holding the whole pool, a second one queued behind it on the pool: the time
#             from the first one's end (its script's last line) and from the end of its teardown
#             (the release in tierd) to the second one's first line
#   staging   STAGE_MB of files (4 MiB each) staged into an empty hot tier, twice: `tierctl stage`
#             alone, and as a job's stage-in (the data_in hook's duration: admission, then
#             staging through tierd's stager, polled every poll_interval)
# Prints one table and the machine's load; everything it started is stopped on exit.
#
# Usage: bench/slurm_hooks.sh [WORKDIR]   (needs root; default WORKDIR /tmp/tierd-bench-slurm)
#   env: RATE=400mbit DELAY_MS=5 JOBS=40 STAGE_MB=256 BUILD=build-daemonrel
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
W=${1:-/tmp/tierd-bench-slurm}
RATE=${RATE:-400mbit}
DELAY_MS=${DELAY_MS:-5}
JOBS=${JOBS:-40}
STAGE_MB=${STAGE_MB:-256}
BUILD=${BUILD:-build-daemonrel}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh
[ "$(id -u)" = 0 ] || { echo "bench/slurm_hooks.sh: needs root (slurmd, FUSE, jobs as nobody)" >&2; exit 2; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; $(nproc) CPUs); $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
tierd_build_release "$BUILD" tierd tierctl
tierd_bins "$BUILD"
rm -rf "$W/slurm" "$W/ref" "$W/spool" "$W/cache"
mkdir -p "$W/mnt" "$W/spool"
chmod 0755 "$W"
tierd_places "$W"
LINK=$W/link
SDIR=$W/slurm
cleanup() {
  scripts/slurm.sh stop "$SDIR" >/dev/null 2>&1 || true
  tierd_reap "${TIERD_PID:-}"
  tierd_unmount "$MNT"
  scripts/netlink.sh down "$LINK" || true
}
trap cleanup EXIT
scripts/netlink.sh up "$LINK" "$RATE" "$DELAY_MS"
tierd_rgw_env "$LINK"
PROXY=$S3_ENDPOINT
DIRECT=$S3_ENDPOINT_DIRECT
BUCKET=bench-slurm-$(date +%s)
tierd_s3 -X PUT "$DIRECT/$BUCKET" >/dev/null
tierd_bench_files "$W/ref/small" "$JOBS" 1024
tierd_bench_upload "$W/ref/small" "$DIRECT/$BUCKET/ds/small"
tierd_bench_files "$W/ref/big" $((STAGE_MB / 4)) 4096
tierd_bench_upload "$W/ref/big" "$DIRECT/$BUCKET/ds/big"
tierd_bench_results "$W/results"

fresh_tierd() {
  tierd_stop 2>/dev/null || true
  tierd_unmount "$MNT"
  rm -rf "$W/cache" "$W/spool"
  mkdir -p "$W/cache" "$W/spool"
  {
    tierd_conf_section daemon "log_level = warn"
    tierd_conf_section cache "ram_size = 64M" "disk_dir = $W/cache" "disk_size = $((STAGE_MB * 2 + 512))M" \
      "block_size = 4M"
    S3_ENDPOINT=$PROXY tierd_conf_rgw rgw "$BUCKET"
    tierd_conf_ns /ds rgw "prefix = ds"
    tierd_conf_ns /ckpt rgw "prefix = ckpt" "mode = write-back"
    tierd_conf_section writeback "spool_dir = $W/spool"
    tierd_conf_mount "$MNT" "allow_other = true" "umask = 000"
    tierd_conf_api "$SOCK" "socket_group = $(id -g nobody)" "max_stage_jobs = 64"
  } >"$CONF"
  tierd_start "$CONF" "$W/tierd.log" "$MNT" "$SOCK" || exit 1
}
fresh_tierd

cat >"$W/tierd_bb.conf" <<EOF
socket = $SOCK
mount = $MNT
poll_interval = 0.1
timing_log = $W/timing.log
EOF
: >"$W/timing.log"
TIER_SLURM_BB_CONF=$W/tierd_bb.conf scripts/slurm.sh start "$SDIR" "$SRC/contrib/slurm/burst_buffer.lua"
SLURM_CONF=$SDIR/slurm.conf
export SLURM_CONF
JD=$(mktemp -d "$SDIR/jobs/b.XXXXXX")
chmod 0777 "$JD"
submit() { (cd "$JD" && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" sbatch --parsable --oversubscribe -o "$JD/slurm-%j.out" "$1") | cut -d';' -f1; }
jstate() { scontrol -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
all_done() { local i; for i in "$@"; do [ "$(jstate "$i")" = COMPLETED ] || return 1; done; }
torn_down() { local i; for i in "$@"; do grep -q "^slurm_bb_job_teardown $i " "$W/timing.log" || return 1; done; }
wall() { date +%s.%N; }

# ---- hooks: JOBS small jobs at once ---------------------------------------------------------
ids=()
for i in $(seq -w 1 "$JOBS"); do
  printf '#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=/ds/small/s%s.bin stage_out=/ckpt/j%s\nmkdir -p $TIERD_MOUNT/ckpt/j%s\nhead -c 65536 /dev/urandom >$TIERD_MOUNT/ckpt/j%s/ck\n' \
    "$i" "$i" "$i" "$i" >"$JD/small$i.sh"
  chmod 0755 "$JD/small$i.sh"
  ids+=("$(submit "$JD/small$i.sh")")
done
tierd_poll 600 all_done "${ids[@]}" || { echo "small jobs not all COMPLETED" >&2; squeue >&2; exit 1; }
tierd_poll 60 torn_down "${ids[@]}" || { echo "small jobs not all torn down" >&2; exit 1; }
cp "$W/timing.log" "$W/timing.hooks"

# ---- release: the next job's start after a teardown -----------------------------------------
pool=$(tierd_api "$SOCK" /v1/jobs | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity"]["capacity_bytes"] // 1048576)')M
for n in x y; do
  cat >"$JD/$n.sh" <<EOF
#!/bin/bash
#BB_LUA pool=tierd capacity=$pool
date +%s.%N >$JD/$n.start
while [ ! -e $JD/$n.go ]; do sleep 0.05; done
date +%s.%N >$JD/$n.end
EOF
  chmod 0755 "$JD/$n.sh"
done
idx=$(submit "$JD/x.sh")
tierd_poll 60 test -s "$JD/x.start" || { echo "job x did not start" >&2; exit 1; }
idy=$(submit "$JD/y.sh")
bbwait() { [ "$(jstate "$idy")" = PENDING ] && scontrol -o show job "$idy" | grep -q 'Reason=BurstBuffer'; }
tierd_poll 30 bbwait || { echo "job y is not waiting on the pool: $(scontrol -o show job "$idy")" >&2; exit 1; }
touch "$JD/x.go" "$JD/y.go"
tierd_poll 120 test -s "$JD/y.start" || { echo "job y did not start" >&2; exit 1; }
td_end=$(awk -v j="$idx" '$1 == "slurm_bb_job_teardown" && $2 == j {print $5}' "$W/timing.log")
rec release_from_end "$(awk -v a="$(cat "$JD/x.end")" -v b="$(cat "$JD/y.start")" 'BEGIN {printf "%.3f", b - a}')"
rec release_from_teardown "$(awk -v a="$td_end" -v b="$(cat "$JD/y.start")" 'BEGIN {printf "%.3f", b - a}')"
tierd_poll 60 all_done "$idy" || true

# ---- staging: tierctl stage alone vs a job's stage-in --------------------------------------
fresh_tierd
t0=$(wall)
tierd_ctl stage /ds/big >/dev/null
t1=$(wall)
rec stage_tierctl "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')"
fresh_tierd
cat >"$JD/big.sh" <<EOF
#!/bin/bash
#BB_LUA pool=tierd capacity=$((STAGE_MB + 64))M stage=/ds/big
true
EOF
chmod 0755 "$JD/big.sh"
idb=$(submit "$JD/big.sh")
tierd_poll 600 all_done "$idb" || { echo "job big did not complete" >&2; exit 1; }
rec stage_data_in "$(awk -v j="$idb" '$1 == "slurm_bb_data_in" && $2 == j {printf "%.3f", $3 / 1000}' "$W/timing.log")"

# ---- the table ------------------------------------------------------------------------------
echo
echo "Slurm provider, $(date -u +%F), $(git rev-parse --short HEAD): link $RATE, +${DELAY_MS} ms each way; $JOBS jobs"
printf '%-24s %6s %9s %9s %9s\n' "hook (inside the Lua)" calls "p50 ms" "p99 ms" "max ms"
for h in slurm_bb_job_process slurm_bb_pools slurm_bb_paths slurm_bb_setup slurm_bb_data_in \
  slurm_bb_real_size slurm_bb_pre_run slurm_bb_post_run slurm_bb_data_out slurm_bb_job_teardown; do
  awk -v h="$h" '$1 == h {print $3}' "$W/timing.hooks" | sort -g | awk -v h="$h" '
    {v[NR] = $1} END {if (!NR) exit; p50 = v[int((NR + 1) / 2)]; i99 = int(NR * 0.99 + 0.999); if (i99 < 1) i99 = 1
      printf "%-24s %6d %9.1f %9.1f %9.1f\n", h, NR, p50, v[i99], v[NR]}'
done
# slurmctld's own view: its log times each submission RPC (job_process runs inside it)
for id in "${ids[@]}"; do
  grep -o "_slurm_rpc_submit_batch_job: JobId=$id .*usec=[0-9]*" "$SDIR/log/slurmctld.log" | sed 's/.*usec=//'
done | sort -g | awk '{v[NR] = $1 / 1000} END {if (!NR) exit; i99 = int(NR * 0.99 + 0.999)
  printf "%-24s %6d %9.1f %9.1f %9.1f   (slurmctld log: the whole sbatch RPC)\n", "sbatch RPC", NR, v[int((NR + 1) / 2)], v[i99], v[NR]}'
echo
read -r rfe _ _ < <(stats release_from_end)
read -r rft _ _ < <(stats release_from_teardown)
echo "release: the queued job's first line ${rfe} s after the holder's last line, ${rft} s after its teardown ended"
read -r st _ _ < <(stats stage_tierctl)
read -r sd _ _ < <(stats stage_data_in)
awk -v mb="$STAGE_MB" -v a="$st" -v b="$sd" 'BEGIN {
  printf "staging %d MiB: tierctl stage %.2f s (%.0f MiB/s); data_in %.2f s (%.0f MiB/s); data_in / tierctl %.2f\n",
    mb, a, mb / a, b, mb / b, b / a }'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
