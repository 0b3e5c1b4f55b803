#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_bb_lua_setup.sh - what the Slurm provider's slurm_bb_setup sends (contrib/slurm/
# burst_buffer.lua), run by lua5.1 outside Slurm as test_bb_lua.sh does: a stub `slurm` table, and
# `curl` a stand-in that records each request (its curl config file) and answers 200 with an
# admitted job. Checks: POST /v1/jobs carries the uid Slurm gives setup and the Slurm job id
# (`uid`, `slurm_job`: tierd then believes SLURM_JOB_ID only in that uid's processes), also with
# a job_prefix (job "east.5", slurm_job "5"); with tenant= the POST /v1/tenants rule carries the
# uid too; the dry run of job_process (which Slurm gives no uid) carries none; with node_url,
# pre_run's POST /v1/jobs to each node carries the uid Slurm 23.02 gives pre_run, or with Slurm
# 22.05's two arguments the uid `scontrol -o show job` prints (a stub scontrol); a job with stage
# paths on two nodes is submitted to both with "cluster": true (cluster_stage = auto), one on one
# node, or with cluster_stage = no (or a bad value), without it.
# Usage: test_bb_lua_setup.sh SRC_DIR
set -euo pipefail
src=$1
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
ok() { echo "ok: $*"; }
command -v lua5.1 >/dev/null || fail "lua5.1 is not installed (scripts/deps.sh)"
lua5.1 -e 'require("cjson")' 2>/dev/null || fail "lua-cjson is not installed (scripts/deps.sh)"

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cp "$src/contrib/slurm/burst_buffer.lua" "$T/burst_buffer.lua"
cat >"$T/curl" <<CURL
#!/bin/sh
# records the config file curl -q -K FILE was given (one line per request); answers an admitted job
tr '\n' ' ' <"\$3" >>"$T/requests"
echo >>"$T/requests"
printf '{"job":"5","state":"admitted","verdict":"valid","reason":"","staging":{"state":"none"}}\n200'
CURL
chmod +x "$T/curl"
cat >"$T/scontrol" <<SCONTROL
#!/bin/sh
# slurmctld's view of job 5: user bob (uid 4242) on the nodes $T/nodes lists (default n1)
nodes=n1
[ -f "$T/nodes" ] && nodes=\$(cat "$T/nodes")
case "\$*" in
"-o show job 5") echo "JobId=5 JobName=x UserId=bob(4242) GroupId=bob(4242) NodeList=\$nodes" ;;
"show hostnames "*) echo "\$3" | tr ',' ' ' ;;
"-o show node "*) echo "NodeName=\$4 NodeAddr=\$4 State=ALLOCATED" ;;
esac
SCONTROL
chmod +x "$T/scontrol"
cat >"$T/drive.lua" <<'LUA'
slurm = { SUCCESS = 0, ERROR = -1, log_info = function() end, log_debug = function() end,
          log_error = function() end }
dofile(arg[1] .. "/burst_buffer.lua")
local rc, msg
if arg[2] == "setup" then
    rc, msg = slurm_bb_setup("5", 1000, 1000, "tierd", 1048576, arg[1] .. "/job.5/script")
elseif arg[2] == "pre_run23" then -- Slurm 23.02: job id, script, uid, gid, job_info
    rc, msg = slurm_bb_pre_run("5", arg[1] .. "/job.5/script", 1000, 1000, {})
elseif arg[2] == "pre_run22" then -- Slurm 22.05: job id and script only
    rc, msg = slurm_bb_pre_run("5", arg[1] .. "/job.5/script")
else
    rc, msg = slurm_bb_job_process(arg[1] .. "/job.5/script")
end
io.write(rc, "|", tostring(msg))
LUA
conf() {
    printf 'curl = %s\nsocket = %s/none.sock\nmount = /mnt/t\nreconcile = no\n%s\n' "$T/curl" "$T" \
        "${1:-}" >"$T/tierd_bb.conf"
}
# hook SCRIPT-TEXT HOOK: run the hook (setup or process) on a job script; requests in $T/requests
hook() {
    mkdir -p "$T/job.5"
    printf '%s\n' "$1" >"$T/job.5/script"
    : >"$T/requests"
    local out
    out=$(lua5.1 "$T/drive.lua" "$T" "$2")
    [[ $out == "0|"* ]] || fail "$2 failed: $out ($(cat "$T/requests"))"
}
# the recorded request to PATH (/v1/jobs, /v1/tenants), its JSON unescaped
reqline() { grep -F "$1\"" "$T/requests" | tr -d '\\'; }

conf
hook $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=/ds/x' setup
line=$(reqline /v1/jobs)
[[ $line == *'"uid":1000'* && $line == *'"slurm_job":"5"'* ]] ||
    fail "setup's POST /v1/jobs lacks uid or slurm_job: $line"
ok "setup sends POST /v1/jobs with the job's uid and Slurm job id"
hook $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=/ds/x' process
line=$(reqline /v1/jobs)
[[ $line == *'"dry_run":true'* && $line != *'"uid"'* ]] || fail "job_process's dry run: $line"
ok "job_process's dry run sends no uid (Slurm gives it none)"
conf "job_prefix = east."
hook $'#!/bin/bash\n#BB_LUA stage_out=/c' setup
line=$(reqline /v1/jobs)
[[ $line == *'"job":"east.5"'* && $line == *'"slurm_job":"5"'* && $line == *'"uid":1000'* ]] ||
    fail "setup with job_prefix: $line"
ok "with a job_prefix, slurm_job is Slurm's own id"
conf "user_tenants = yes"
hook $'#!/bin/bash\n#BB_LUA stage_out=/c tenant=team-a' setup
line=$(reqline /v1/tenants)
[[ $line == *'"name":"team-a"'* && $line == *'"slurm_job":"5"'* && $line == *'"uid":1000'* ]] ||
    fail "setup's POST /v1/tenants for tenant=team-a: $line"
ok "tenant= registers its slurm_job rule with the job's uid"
conf "$(printf 'node_url = http://%%s:7070\nscontrol = %s' "$T/scontrol")"
hook $'#!/bin/bash\n#BB_LUA stage_out=/c' pre_run23
line=$(reqline /v1/jobs)
[[ $line == *'http://n1:7070/v1/jobs"'* && $line == *'"uid":1000'* && $line == *'"slurm_job":"5"'* ]] ||
    fail "pre_run (Slurm 23.02 arguments) to node n1: $line"
ok "pre_run sends each node's tierd the uid Slurm gives it"
hook $'#!/bin/bash\n#BB_LUA stage_out=/c' pre_run22
line=$(reqline /v1/jobs)
[[ $line == *'http://n1:7070/v1/jobs"'* && $line == *'"uid":4242'* && $line == *'"slurm_job":"5"'* ]] ||
    fail "pre_run (Slurm 22.05 arguments) to node n1: $line"
ok "pre_run without a uid argument sends the uid scontrol shows"
# cluster_stage: a job with stage paths on more than one node is staged cluster-wide on each
njobs() { grep -c "$1" <(reqline /v1/jobs) || true; }
printf 'n1,n2' >"$T/nodes"
hook $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=/ds/x' pre_run23
[ "$(njobs '"cluster":true')" = 2 ] && [ "$(njobs 'http://n1:7070/v1/jobs"')" = 1 ] &&
    [ "$(njobs 'http://n2:7070/v1/jobs"')" = 1 ] ||
    fail "a two-node job's POST /v1/jobs to n1 and n2 without cluster:true: $(reqline /v1/jobs)"
ok "a two-node job with stage paths is submitted with cluster:true to each node"
hook $'#!/bin/bash\n#BB_LUA stage_out=/c' pre_run23
[ "$(njobs 'http://n')" = 2 ] && [ "$(njobs '"cluster"')" = 0 ] ||
    fail "a two-node job without stage paths: $(reqline /v1/jobs)"
ok "a two-node job without stage paths is not (it stages nothing)"
conf "$(printf 'node_url = http://%%s:7070\nscontrol = %s\ncluster_stage = no' "$T/scontrol")"
hook $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=/ds/x' pre_run23
[ "$(njobs 'http://n')" = 2 ] && [ "$(njobs '"cluster"')" = 0 ] ||
    fail "a two-node job with cluster_stage = no: $(reqline /v1/jobs)"
ok "cluster_stage = no: each node stages the whole set itself"
conf "$(printf 'node_url = http://%%s:7070\nscontrol = %s\ncluster_stage = yes' "$T/scontrol")"
hook $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=/ds/x' pre_run23
[ "$(njobs 'http://n')" = 2 ] && [ "$(njobs '"cluster"')" = 0 ] ||
    fail "a two-node job with cluster_stage = yes (not a value): $(reqline /v1/jobs)"
ok "a bad cluster_stage is taken as no"
printf 'n1' >"$T/nodes"
conf "$(printf 'node_url = http://%%s:7070\nscontrol = %s' "$T/scontrol")"
hook $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=/ds/x' pre_run23
[ "$(njobs 'http://n1:7070/v1/jobs"')" = 1 ] && [ "$(njobs '"cluster"')" = 0 ] ||
    fail "a one-node job: $(reqline /v1/jobs)"
ok "a one-node job is staged on its node alone"
hook $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=/ds/x' setup
[ "$(njobs '"cluster"')" = 0 ] || fail "setup (this host's tierd) sent cluster: $(reqline /v1/jobs)"
ok "setup never asks a cluster-wide staging"
echo "all checks passed"
