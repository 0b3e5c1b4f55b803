#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_slurm_bb.sh - the Slurm burst-buffer provider (contrib/slurm/burst_buffer.lua) end to end:
# a REAL single-node Slurm (scripts/slurm.sh, Debian's Slurm 22.05, burst_buffer/lua) in this
# test's own directory, a REAL tierd with its FUSE mount over the REAL Ceph RGW (fixture rgw),
# jobs submitted with sbatch as nobody (root may not allocate burst buffers). CTest labels
# slurm, rgw, fuse.
#
# Backends: `cold` is the RGW itself (datasets /ds); `slow` is the same RGW through
# scripts/delayproxy.py (datasets /slow, checkpoints /ckpt in write-back mode), so the test can
# slow it down (a per-connection rate) or stop it (kill the proxy) for this tierd alone.
# The hot tier: RAM 64 MiB of 1 MiB blocks, pin_size 48M, so Slurm's pool `tierd` is 48 MiB.
#
#   1. bad directives are refused at sbatch with the provider's message: an unknown key,
#      capacity=40X, capacity=3.5M, a stage path in no namespace, stage without capacity,
#      tenant= where user_tenants is off, class=inference where user_classes leaves it out
#      (checkpoint is listed: job e below asks for it).
#   2. stage-in: a job with `stage=/slow/a capacity=20M` (8 MiB at 256 KiB/s a connection, 4 at
#      a time: about 8 s, longer than Slurm takes to start a job) starts only once /slow/a is staged (the job
#      itself reads its tierd job at its first line: staged, all bytes); its read pass through
#      the mount ($TIERD_STAGE, from slurm_bb_paths) is >= 99 % hot-tier hits with 0 backend
#      fetches, and the bytes are attributed to its tenant slurm-JOBID (/metrics); the job is
#      released (404) after its teardown.
#   3. over capacity: three jobs of 20M each; two run, the third stays PENDING with a
#      BurstBuffer reason until the first one's teardown, then runs; the second's staged blocks
#      survive 80 MiB of other reads through the 64 MiB RAM tier (0 fetches reading them
#      afterwards); `scontrol show bbstat [JOBID]` shows tierd's capacity and the jobs.
#   4. scancel during stage-in (24 MiB over the slow backend, about 24 s): the reservation is
#      released and the staging stops.
#   5. stage-out: a job writes a 4 MiB checkpoint into /ckpt; with the backend stopped the job
#      stays in stage-out (tierd's upload fails and retries) and is not COMPLETED, also across a
#      SIGKILL and restart of tierd (data_out's cut request is retried; the spool keeps the file);
#      once the backend is back it completes and the object in the bucket is byte-identical.
#      Before it, stale tierd jobs are posted (as a lost teardown leaves them): the checkpoint
#      job's setup releases those of a COMPLETED and of an unknown Slurm job id, and keeps a held
#      (PENDING) job's and one whose id is no Slurm job id.
#   6. node_url (node-local admission in pre_run over TCP with the token, the node's NodeAddr
#      127.0.0.1 reaching this tierd): a wrong token fails pre_run and the job never runs (Slurm
#      requeues it); the right token runs the next one, whose tenant=team-x (user_tenants = yes)
#      is registered with a rule for the job.
# Every wait polls a condition with a deadline; no sleeps as synchronisation (the job scripts
# poll for files the test creates).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_rgw_setup slurm_bb
[ "$(id -u)" = 0 ] || fail "needs root (slurmd, FUSE, jobs as nobody)"
for tool in python3 curl runuser lua5.1; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done
lua5.1 -e 'require("cjson")' 2>/dev/null || fail "lua-cjson is not installed (run scripts/deps.sh)"

BUCKET=slurm-bb-$(date +%s)-$RANDOM
SDIR=$T/slurm
PROXY_PID=
extra_cleanup() {
  "$SRC/scripts/slurm.sh" stop "$SDIR" >/dev/null 2>&1 || true
  [ -z "$PROXY_PID" ] || kill "$PROXY_PID" 2>/dev/null || true
}
chmod 0711 "$T"

# ---- the slow backend: a proxy in front of the RGW --------------------------------------------
UP=${S3_ENDPOINT#http://}
UP=${UP%%/*}
PPORT=0
# start_proxy RATE: (re)start the proxy on PPORT (0: any port, remembered) at RATE bytes/s a
# connection (0: no limit)
start_proxy() {
  rm -f "$T/proxy.port"
  python3 "$SRC/scripts/delayproxy.py" --listen "127.0.0.1:$PPORT" --upstream "$UP" --delay-ms 0 \
    --stream-rate "$1" --port-file "$T/proxy.port" >>"$T/proxy.log" 2>&1 &
  PROXY_PID=$!
  wait_for 10 test -s "$T/proxy.port" || fail "delayproxy did not start: $(cat "$T/proxy.log")"
  PPORT=$(cat "$T/proxy.port")
}
stop_proxy() {
  kill "$PROXY_PID" 2>/dev/null || true
  wait "$PROXY_PID" 2>/dev/null || true
  PROXY_PID=
}
start_proxy 262144

# ---- data in the bucket -----------------------------------------------------------------------
tierd_s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null || fail "cannot create bucket $BUCKET"
mkdir -p "$T/ref" "$MNT" "$T/spool"
put() { # FILE KEY
  tierd_s3 -T "$1" "$S3_ENDPOINT/$BUCKET/$2" >/dev/null || fail "PUT $2"
}
for i in 0 1 2 3 4 5 6 7; do
  head -c 1048576 /dev/urandom >"$T/ref/a$i"
  put "$T/ref/a$i" "slow/a/$i.bin"
done
for d in c1 c2 c3; do
  head -c $((2 * 1048576)) /dev/urandom >"$T/ref/$d"
  put "$T/ref/$d" "ds/$d/data.bin"
done
# more than the RAM tier (64 MiB), unpinned: reading it evicts whatever is not pinned
head -c 1048576 /dev/urandom >"$T/ref/fill"
for i in $(seq 10 89); do put "$T/ref/fill" "ds/fill/$i.bin"; done
for i in $(seq 10 33); do
  head -c 1048576 /dev/urandom >"$T/ref/d$i"
  put "$T/ref/d$i" "slow/d/$i.bin"
done

# ---- tierd ------------------------------------------------------------------------------------
TPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(umask 077 && head -c 32 /dev/urandom | base64 >"$T/api.token")
{
  # 40 s: a slow-backend call (1 MiB at 256 KiB/s, queued behind 3 more) fits in it
  tierd_conf_section daemon "log_level = info" "backend_timeout = 40s"
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M" "pin_size = 48M"
  tierd_conf_rgw cold "$BUCKET"
  S3_ENDPOINT=http://127.0.0.1:$PPORT tierd_conf_rgw slow "$BUCKET" "breaker_cooldown = 200ms" "max_inflight = 4"
  tierd_conf_ns /ds cold "prefix = ds"
  tierd_conf_ns /slow slow "prefix = slow"
  tierd_conf_ns /ckpt slow "prefix = ckpt" "mode = write-back"
  tierd_conf_section writeback "spool_dir = $T/spool"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 000"
  tierd_conf_api "$SOCK" "socket_group = $(id -g nobody)" "tcp = 127.0.0.1:$TPORT" \
    "token_file = $T/api.token"
} >"$CONF"
start_tierd
ok "tierd up (RGW bucket $BUCKET, proxy on port $PPORT)"

# ---- Slurm with the provider --------------------------------------------------------------------
cat >"$T/tierd_bb.conf" <<EOF
# test_slurm_bb.sh
socket = $SOCK
mount = $MNT
poll_interval = 0.1
wait_step = 1
timing_log = $T/bb_timing.log
user_classes = training, background, checkpoint
EOF
TIER_SLURM_BB_CONF=$T/tierd_bb.conf "$SRC/scripts/slurm.sh" start "$SDIR" \
  "$SRC/contrib/slurm/burst_buffer.lua" >"$T/slurm_start.log" 2>&1 ||
  fail "slurm.sh start: $(cat "$T/slurm_start.log")"
while IFS='=' read -r k v; do
  case $k in SLURM_CONF | SLURM_JOBDIR) printf -v "$k" '%s' "$v" ;; esac
done <"$SDIR/env"
export SLURM_CONF
W=$(mktemp -d "$SLURM_JOBDIR/w.XXXXXX")
chmod 0777 "$W"

sc() { timeout 20 scontrol "$@"; }
# Slurm reads the pool from slurm_bb_pools: it must be tierd's capacity (48 MiB).
pool_ok() { sc show burst | grep -Eq "PoolName\[0\]=tierd .*TotalSpace=48MiB "; }
wait_for 30 pool_ok || fail "Slurm's pool is not tierd's 48 MiB: $(sc show burst)"
ok "Slurm up with the provider; pool tierd = 48M from tierd's capacity"

# submit SCRIPT: sbatch as nobody; prints the job id (fails the test on an error)
submit() {
  local id
  id=$(cd "$W" && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" timeout 20 sbatch \
    --parsable --oversubscribe -o "$W/slurm-%j.out" "$1") || fail "sbatch $1 failed"
  id=${id%%;*}
  [[ $id =~ ^[0-9]+$ ]] || fail "sbatch printed '$id', not a job id"
  echo "$id"
}
# refused SCRIPT WHAT: sbatch as nobody must fail, its message containing WHAT
refused() {
  local out
  if out=$(cd "$W" && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" timeout 20 sbatch \
    --parsable "$1" 2>&1); then
    fail "sbatch accepted $(basename "$1") (job $out); want a refusal with '$2'"
  fi
  [[ $out == *"$2"* ]] || fail "sbatch refused $(basename "$1") without '$2': $out"
  echo "$out" | grep -m 1 -F "$2"
}
jstate() { sc -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
jreason() { sc -o show job "$1" 2>/dev/null | grep -o 'Reason=[^ ]*' | cut -d= -f2; }
is_state() { [ "$(jstate "$1")" = "$2" ]; }
# done_ok ID: COMPLETED; fails the test on another final state
done_ok() {
  local s
  s=$(jstate "$1")
  case $s in
  COMPLETED) return 0 ;;
  FAILED | CANCELLED | TIMEOUT | NODE_FAIL | BOOT_FAIL | DEADLINE | OUT_OF_MEMORY | PREEMPTED)
    sc show job "$1" >&2 || true
    fail "job $1 ended $s"
    ;;
  esac
  return 1
}
wait_done() { wait_for "${2:-60}" done_ok "$1" || { sc show job "$1" >&2; fail "job $1 not COMPLETED (state $(jstate "$1"))"; }; }
tjob_code() { curl -s -o "$T/tjob.json" -w '%{http_code}' --unix-socket "$SOCK" "http://tierd/v1/jobs/$1"; }
released() { [ "$(tjob_code "$1")" = 404 ]; }
field() { python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): o=o[k]
print(o)' "$@"; }
stat_of() { api /v1/stats | python3 -c 'import json,sys; s=json.load(sys.stdin)
c=s["cache"]; print(c["fetches"], c["ram"]["hits"], c["ram"]["misses"])'; }
capf() { api /v1/jobs | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity"][sys.argv[1]])' "$1"; }

# job NAME DIRECTIVE BODY: write $W/NAME.sh, a batch script with the directive line(s)
job() {
  printf '#!/bin/bash\n%s\n%s\n' "$2" "$3" >"$W/$1.sh"
  chmod 0755 "$W/$1.sh"
}
# a job body that records its tierd job at start, then waits for $W/NAME.go
hold() {
  cat <<EOF
curl -sS --unix-socket $SOCK http://tierd/v1/jobs/\$SLURM_JOB_ID >$W/$1.start.json
echo "\$TIERD_TENANT \$TIERD_MOUNT \$TIERD_STAGE \$TIERD_STAGE_OUT" >$W/$1.env
while [ ! -e $W/$1.go ]; do sleep 0.1; done
EOF
}

# ---- 1. bad directives at sbatch --------------------------------------------------------------
job bad_key "#BB_LUA tierd pool=tierd capacity=1M gpus=8" "true"
refused "$W/bad_key.sh" "unknown key 'gpus'"
job bad_size "#BB_LUA tierd pool=tierd capacity=40X" "true"
refused "$W/bad_size.sh" "40X"
job bad_path "#BB_LUA tierd pool=tierd capacity=1M stage=/nowhere/x" "true"
refused "$W/bad_path.sh" "is in no namespace"
job no_cap "#BB_LUA tierd stage=/ds/a" "true"
refused "$W/no_cap.sh" "stage= needs capacity="
job bad_tenant "#BB_LUA tierd stage_out=/ckpt/x tenant=prod-inference" "true"
refused "$W/bad_tenant.sh" "tenant= is not allowed on this cluster"
job bad_dec "#BB_LUA tierd pool=tierd capacity=3.5M" "true"
refused "$W/bad_dec.sh" "capacity=3.5M is not a size"
job bad_class "#BB_LUA tierd stage_out=/ckpt/x class=inference" "true"
refused "$W/bad_class.sh" "class=inference is not allowed on this cluster"
ok "bad directives refused at sbatch with the provider's messages"

# ---- 2. stage-in before the start; a hot first pass; the job's tenant -----------------------
job a "#BB_LUA tierd pool=tierd capacity=20M stage=/slow/a class=training" "$(hold a)
cat \$TIERD_STAGE/*.bin | md5sum | cut -d' ' -f1 >$W/a.sum
touch $W/a.done"
ida=$(submit "$W/a.sh")
wait_for 60 test -s "$W/a.start.json" || fail "job $ida did not start (state $(jstate "$ida"), reason $(jreason "$ida"))"
[ "$(field "$W/a.start.json" staging.state)" = staged ] ||
  fail "job $ida started before its staging finished: $(cat "$W/a.start.json")"
[ "$(field "$W/a.start.json" staging.bytes_done)" = $((8 * 1048576)) ] ||
  fail "job $ida started with $(field "$W/a.start.json" staging.bytes_done) bytes staged, want 8 MiB"
[ "$(cat "$W/a.env")" = "slurm-$ida $MNT $MNT/slow/a " ] || fail "job $ida's environment: '$(cat "$W/a.env")'"
read -r f0 h0 m0 < <(stat_of)
touch "$W/a.go"
wait_for 30 test -e "$W/a.done" || fail "job $ida did not finish its read pass"
read -r f1 h1 m1 < <(stat_of)
[ "$(cat "$W/a.sum")" = "$(cat "$T"/ref/a[0-7] | md5sum | cut -d' ' -f1)" ] || fail "job $ida read wrong bytes"
[ "$f1" = "$f0" ] || fail "job $ida's read pass fetched $((f1 - f0)) blocks from the backend (want 0)"
python3 -c "import sys; h,m=$h1-$h0,$m1-$m0; sys.exit(0 if h+m>0 and h/(h+m)>=0.99 else 1)" ||
  fail "job $ida's read pass: $((h1 - h0)) hits, $((m1 - m0)) misses (want >= 99 % hits)"
metric=$(api /metrics | grep -E "^tierd_op_bytes_total\{tenant=\"slurm-$ida\",.*op=\"read\"" || true)
tb=$(echo "$metric" | awk '{s += $2} END {printf "%d", s}')
[ "$tb" -ge $((8 * 1048576)) ] || fail "job $ida's reads are not its tenant's (slurm-$ida): '$metric'"
wait_done "$ida"
wait_for 30 released "$ida" || fail "job $ida still in tierd after its teardown: $(cat "$T/tjob.json")"
ok "job $ida: started after staging (8 MiB staged), read pass $((h1 - h0)) hits / $((m1 - m0)) misses, 0 fetches, $tb bytes read as tenant slurm-$ida; released"

# ---- 3. over capacity: the third job waits for the first one's teardown ----------------------
for d in c1 c2 c3; do
  job "$d" "#BB_LUA tierd pool=tierd capacity=20M stage=/ds/$d" "$(hold "$d")"
done
id1=$(submit "$W/c1.sh")
id2=$(submit "$W/c2.sh")
wait_for 60 test -s "$W/c1.start.json" || fail "job $id1 did not start"
wait_for 60 test -s "$W/c2.start.json" || fail "job $id2 did not start"
id3=$(submit "$W/c3.sh")
bb_pending() { is_state "$id3" PENDING && [[ $(jreason "$id3") == BurstBuffer* ]]; }
wait_for 30 bb_pending || fail "job $id3: state $(jstate "$id3"), reason $(jreason "$id3"); want PENDING on BurstBuffer*"
reason3=$(jreason "$id3")
[ "$(capf reserved_bytes)" = $((40 * 1048576)) ] || fail "tierd reserves $(capf reserved_bytes), want 40 MiB"
[ ! -e "$W/c3.start.json" ] || fail "job $id3 started while the pool was full"
sc show bbstat >"$T/bbstat.txt" || fail "scontrol show bbstat: $(cat "$T/bbstat.txt")"
grep -q "^tierd pool tierd: capacity 48.0 MiB, reserved 40.0 MiB" "$T/bbstat.txt" &&
  grep -Eq "^$id1 +admitted +slurm-$id1 " "$T/bbstat.txt" &&
  grep -Eq "^$id2 +admitted +slurm-$id2 " "$T/bbstat.txt" || fail "scontrol show bbstat: $(cat "$T/bbstat.txt")"
sc show bbstat "$id2" >"$T/bbstat.txt" || fail "scontrol show bbstat $id2"
grep -Eq "^$id2 +admitted" "$T/bbstat.txt" && ! grep -Eq "^$id1 " "$T/bbstat.txt" ||
  fail "scontrol show bbstat $id2 (that job only): $(cat "$T/bbstat.txt")"
touch "$W/c1.go"
wait_done "$id1"
wait_for 60 test -s "$W/c3.start.json" || fail "job $id3 did not start after job $id1's teardown (state $(jstate "$id3"), reason $(jreason "$id3"))"
released "$id1" || fail "job $id1 still in tierd: $(cat "$T/tjob.json")"
cat "$MNT"/ds/fill/*.bin >/dev/null || fail "reading /ds/fill (80 MiB, more than the RAM tier)"
ev=$(api /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"]["ram"]["evictions"])')
[ "$ev" -gt 0 ] || fail "reading 80 MiB through a 64 MiB RAM tier evicted nothing"
read -r f0 _ _ < <(stat_of)
cmp -s "$MNT/ds/c2/data.bin" "$T/ref/c2" || fail "reading job $id2's dataset"
read -r f1 _ _ < <(stat_of)
[ "$f1" = "$f0" ] || fail "job $id2's staged blocks were evicted: reading them fetched $((f1 - f0))"
touch "$W/c2.go" "$W/c3.go"
wait_done "$id2"
wait_done "$id3"
ok "over capacity: job $id3 PENDING ($reason3) while $id1 and $id2 held 40 MiB; started after $id1's teardown; $id2's blocks survived 80 MiB of other reads ($ev evictions)"

# ---- 4. scancel during stage-in ---------------------------------------------------------------
job d "#BB_LUA tierd pool=tierd capacity=30M stage=/slow/d" "true"
idd=$(submit "$W/d.sh")
staging() { [ "$(tjob_code "$idd")" = 200 ] && [ "$(field "$T/tjob.json" staging.state)" = staging ]; }
wait_for 60 staging || fail "job $idd's staging never ran (tierd: $(cat "$T/tjob.json"); Slurm: $(jstate "$idd") $(jreason "$idd"))"
[ "$(jstate "$idd")" = PENDING ] || fail "job $idd is $(jstate "$idd") during its stage-in"
sid=$(field "$T/tjob.json" staging.stage_job)
runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" timeout 20 scancel "$idd" || fail "scancel $idd"
# Slurm runs the teardown of a job cancelled in stage-in from its burst-buffer agent (and retries
# it 10 s apart): allow it the agent's 30 s interval and the retries, on a loaded machine. Slurm
# 22.05 may kill that teardown itself, when the cancel's flush of the job's scripts reaches it
# just after it started ("teardown for JobId=N terminated by slurmctld"), and then never runs
# it again (burst_buffer_lua.c, _start_teardown): tierd is never told until the next job's setup
# reconciles (docs/SLURM.md, section 5 below); seen in 1 of about 10 runs. The test releases it
# then as an operator would, to check the reservation here.
teardown_killed() { grep -q "teardown for JobId=$idd terminated by slurmctld" "$SDIR/log/slurmctld.log"; }
released_or_killed() { released "$idd" || teardown_killed; }
wait_for 150 released_or_killed || fail "job $idd still in tierd 150 s after scancel: $(cat "$T/tjob.json"); Slurm: $(sc -o show job "$idd"); hooks: $(grep " $idd " "$T/bb_timing.log" | tr '\n' ';'); log: $(grep -E "JobId=$idd\b| job $idd:" "$SDIR/log/slurmctld.log" | tail -8 | tr '\n' ';')"
if ! released "$idd"; then
  echo "warning: Slurm killed job $idd's teardown and will not run it again; releasing it as docs/SLURM.md says (tierctl jobs release)" >&2
  "$TIERCTL" -s "$SOCK" jobs release "$idd" >/dev/null || fail "tierctl jobs release $idd after Slurm lost its teardown"
  released "$idd" || fail "job $idd still in tierd after tierctl jobs release: $(cat "$T/tjob.json")"
fi
[ "$(capf reserved_bytes)" = 0 ] || fail "reserved_bytes $(capf reserved_bytes) after scancel, want 0"
stage_over() { api "/v1/stage/$sid" | grep -Eq '"state": *"(cancelled|failed|done)"'; }
wait_for 30 stage_over || fail "staging $sid still runs after scancel: $(api "/v1/stage/$sid")"
ok "scancel during stage-in ($(jstate "$idd")): job released in tierd, staging $sid stopped, 0 reserved"

# ---- 5. stage-out: not COMPLETED while the checkpoint is only on the node ----------------------
# (and the next job's setup reconciles: tierd jobs left behind by teardowns that never reached
# tierd are released when their Slurm job has ended or is unknown; others are kept)
tpost() { curl -s -o "$T/tpost.json" -w '%{http_code}' --unix-socket "$SOCK" -d "$1" http://tierd/v1/jobs; }
stale() { [ "$(tpost "{\"job\": \"$1\", \"tenant\": \"stale\", \"cache_bytes\": \"1M\"}")" = 200 ] || fail "POST job $1: $(cat "$T/tpost.json")"; }
idk=$(cd "$W" && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" timeout 20 sbatch --parsable --hold \
  -o /dev/null --wrap true) || fail "sbatch --hold"
idk=${idk%%;*}
[ "$(jstate "$ida")" = COMPLETED ] || fail "job $ida is $(jstate "$ida"), not COMPLETED (MinJobAge is 300 s)"
stale "$ida"      # COMPLETED in Slurm (section 2): released
stale 60000000    # never a Slurm job: released
stale "$idk"      # PENDING (held): kept
stale manual-keep # not a Slurm job id: kept
head -c $((4 * 1048576)) /dev/urandom >"$T/ref/ckpt"
cp "$T/ref/ckpt" "$W/ckpt.src"
chmod 0644 "$W/ckpt.src"
job e "#BB_LUA tierd stage_out=/ckpt/run-e class=checkpoint" "mkdir -p \$TIERD_MOUNT/ckpt/run-e
cp $W/ckpt.src \$TIERD_MOUNT/ckpt/run-e/model.bin"
ide=$(submit "$W/e.sh")
stage_out() { [ "$(jstate "$ide")" = STAGE_OUT ] || [[ $(sc -o show job "$ide") == *BurstBufferStageOut* ]]; }
wait_for 60 stage_out || fail "job $ide never in stage-out: $(sc -o show job "$ide")"
for j in "$ida:COMPLETED" "60000000:no longer known to slurmctld"; do
  released "${j%%:*}" || fail "job $ide's setup did not release stale job ${j%%:*}: $(cat "$T/tjob.json")"
  grep -q "job $ide: released tierd job ${j%%:*} on .*Slurm job ${j%%:*} is ${j#*:}, and no teardown released it" \
    "$SDIR/log/slurmctld.log" || fail "no log line for the release of stale job ${j%%:*} (${j#*:})"
done
for j in "$idk" manual-keep; do
  [ "$(tjob_code "$j")" = 200 ] || fail "job $ide's setup released tierd job $j (Slurm: $(jstate "$j"))"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE --unix-socket "$SOCK" "http://tierd/v1/jobs/$j")" = 200 ] ||
    fail "DELETE job $j"
done
timeout 20 scancel "$idk" || fail "scancel $idk"
ok "reconciliation at job $ide's setup: stale jobs of COMPLETED job $ida and of unknown id 60000000 released, held job $idk and manual-keep kept"
t_down=$(date +%s%N)
stop_proxy
fails() { api /v1/stats | python3 -c 'import json,sys
print([b for b in json.load(sys.stdin)["backends"] if b["name"]=="slow"][0]["failures"])'; }
n0=$(fails)
failing() { [ "$(fails)" -ge $((n0 + 3)) ]; }
wait_for 60 failing || fail "tierd's uploads to the stopped backend did not fail ($(fails) failures)"
st=$(jstate "$ide")
[ "$st" != COMPLETED ] || fail "job $ide COMPLETED while its checkpoint could not be uploaded"
stage_out || fail "job $ide left stage-out while the backend was stopped: $(sc -o show job "$ide")"
# tierd crashes and comes back while data_out waits on it: data_out's request is cut (no answer)
# and retried; the new tierd recovers the checkpoint from its spool and goes on failing to upload
w0=$(grep -c "job $ide: /ckpt/run-e not durable yet" "$SDIR/log/slurmctld.log" || true)
down0=$(date +%s.%N) # slurm_bb_pools may run while tierd is down: it fails then, rightly
crash_tierd
start_tierd
down1=$(date +%s.%N)
n0=0
failing() { [ "$(fails)" -ge 2 ]; }
wait_for 60 failing || fail "the restarted tierd did not retry the upload ($(fails) failures)"
# data_out's waits on the new tierd (wait_step = 1 s) end "not durable yet" and are repeated
windows() { [ "$(grep -c "job $ide: /ckpt/run-e not durable yet" "$SDIR/log/slurmctld.log")" -ge $((w0 + 2)) ]; }
wait_for 60 windows || fail "data_out did not repeat its wait: $(grep "job $ide" "$SDIR/log/slurmctld.log" | tail -5)"
[ "$(jstate "$ide")" != COMPLETED ] || fail "job $ide COMPLETED across tierd's restart"
stage_out || fail "job $ide left stage-out across tierd's restart: $(sc -o show job "$ide")"
t_up=$(date +%s%N)
start_proxy 0
wait_done "$ide" 120
# data_out itself held the job: it ran across the whole outage
out_ms=$(awk -v e="$ide" '$1 == "slurm_bb_data_out" && $2 == e {print $3}' "$T/bb_timing.log")
down_ms=$(((t_up - t_down) / 1000000))
[ -n "$out_ms" ] && python3 -c "import sys; sys.exit(0 if $out_ms >= $down_ms else 1)" ||
  fail "job $ide's data_out took '${out_ms}' ms, less than the ${down_ms} ms outage"
tierd_s3 -o "$T/got" "$S3_ENDPOINT/$BUCKET/ckpt/run-e/model.bin" || fail "the checkpoint is not in the bucket"
cmp -s "$T/got" "$T/ref/ckpt" || fail "the checkpoint in the bucket differs"
ok "stage-out: job $ide held in $st while the backend was down (${down_ms} ms, tierd restarted meanwhile; data_out ${out_ms} ms); COMPLETED once it was back, object byte-identical"

# ---- 6. node-local admission in pre_run, over TCP with the token ---------------------------------
# node_url makes pre_run admit and stage the job on each of its nodes' tierd (here the node's
# NodeAddr is 127.0.0.1 and its tierd is this one, over TCP). A wrong token must stop the job.
write_bb_conf() { # TOKEN_FILE: replaced whole (a hook reads it at any time)
  cat >"$SDIR/tierd_bb.conf.new" <<EOF
socket = $SOCK
mount = $MNT
poll_interval = 0.1
timing_log = $T/bb_timing.log
node_url = http://%s:$TPORT
token_file = $1
user_tenants = yes
user_classes = training, background, checkpoint
EOF
  mv "$SDIR/tierd_bb.conf.new" "$SDIR/tierd_bb.conf"
}
head -c 100 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/wrong.token"
write_bb_conf "$T/wrong.token"
job g "#BB_LUA tierd pool=tierd capacity=10M stage=/ds/c1 tenant=team-x" "touch $W/g.ran"
idg=$(submit "$W/g.sh")
pre_run_failed() { grep -q "^slurm_bb_pre_run $1 .* -1 " "$T/bb_timing.log"; }
wait_for 90 pre_run_failed "$idg" || fail "job $idg's pre_run with a wrong node token did not fail: $(jstate "$idg")"
not_running() { [ "$(jstate "$idg")" = PENDING ]; }
wait_for 30 not_running || fail "job $idg after its failed pre_run: $(sc -o show job "$idg")"
reasong=$(jreason "$idg")
[ ! -e "$W/g.ran" ] || fail "job $idg ran although its node's tierd refused it"
runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" timeout 20 scancel "$idg" || fail "scancel $idg"
wait_for 30 released "$idg" || fail "job $idg still in tierd after scancel: $(cat "$T/tjob.json")"
write_bb_conf "$T/api.token"
idh=$(submit "$W/g.sh")
wait_done "$idh"
[ -e "$W/g.ran" ] || fail "job $idh COMPLETED but did not run"
grep -q "^slurm_bb_pre_run $idh .* 0 " "$T/bb_timing.log" || fail "job $idh's pre_run did not succeed"
# the rule names the job and its owner (nobody, who submitted it: slurm_bb_setup's uid)
api /v1/tenants | python3 -c 'import json,sys
t=[t for t in json.load(sys.stdin)["tenants"] if t["name"]=="team-x"]
sys.exit(0 if t and {"slurm_job": sys.argv[1], "uid": int(sys.argv[2])} in t[0]["rules"] else 1)' \
  "$idh" "$(id -u nobody)" ||
  fail "tenant=team-x (user_tenants = yes) did not register team-x with a rule for job $idh and uid $(id -u nobody): $(api /v1/tenants)"
wait_for 30 released "$idh" || fail "job $idh still in tierd after its teardown: $(cat "$T/tjob.json")"
ok "node-local admission over TCP: a wrong token failed pre_run (job $idg requeued, $reasong, never ran); the right one ran job $idh (tenant=team-x registered with its rule)"
# ---- every hook ran and none failed but the refusals; then stop what we started ----------------
awk '{n[$1]++; if ($3 > m[$1]) m[$1] = $3} END {for (h in n) printf "  %s: %d calls, max %.1f ms\n", h, n[h], m[h]}' \
  "$T/bb_timing.log" | sort
for h in slurm_bb_job_process slurm_bb_pools slurm_bb_setup slurm_bb_data_in slurm_bb_paths \
  slurm_bb_pre_run slurm_bb_post_run slurm_bb_data_out slurm_bb_job_teardown; do
  grep -q "^$h " "$T/bb_timing.log" || fail "hook $h never ran"
done
# job idg's pre_run failed on purpose (the wrong token), and so may its teardown's release on the
# node (scancel came while tierd_bb.conf still had the wrong token; Slurm retries it); and so may
# a pools call that ended while tierd was down in section 5 (slurmctld asks it periodically and
# keeps the last pool when it fails; seen in a fresh-clone CI)
bad=$(awk -v g="$idg" -v d0="$down0" -v d1="$down1" '$4 != 0 && $1 != "slurm_bb_job_process" && $2 != g &&
  !($1 == "slurm_bb_pools" && $5 >= d0 && $5 <= d1)' "$T/bb_timing.log")
[ -z "$bad" ] || fail "hooks failed: $bad"
"$SRC/scripts/slurm.sh" stop "$SDIR" >/dev/null 2>&1 || fail "slurm.sh stop"
stop_proxy
stop_tierd
ok "every hook ran; none failed but job_process (the bad directives) and job $idg's (the wrong token)"
