#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_bb_lua.sh - the Slurm provider's directive parser and request encoding
# (contrib/slurm/burst_buffer.lua), run by lua5.1 outside Slurm: a stub `slurm` table stands in
# for the plugin, and `curl` in tierd_bb.conf is a stand-in that records the request it was given
# (its curl config file) and answers a dry run "valid". Slurm itself and tierd are exercised end
# to end by tests/integration/test_slurm_bb.sh; this covers the parsing rules a real job rarely
# hits: directives after the first command (ignored, as Slurm ignores them), `\` continuations,
# empty lines, Slurm's size units, tabs, duplicate keys, tenant= off and on, class= within
# user_classes (by default training and background; checked at submission only, in any case and
# with the legacy names; a bad list refuses new jobs only), large byte counts.
# Usage: test_bb_lua.sh SRC_DIR
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
cat >"$T/curl" <<EOF
#!/bin/sh
# records the config file curl -q -K FILE was given; answers a valid dry run
cat "\$3" >>"$T/requests"
printf '{"dry_run":true,"job":"5","verdict":"valid","reason":""}\n200'
EOF
chmod +x "$T/curl"
cat >"$T/drive.lua" <<'EOF'
slurm = { SUCCESS = 0, ERROR = -1, log_info = function() end, log_debug = function() end,
          log_error = function() end }
dofile(arg[1] .. "/burst_buffer.lua")
local rc, msg = slurm_bb_job_process(arg[1] .. "/job.5/script")
if rc == slurm.SUCCESS then slurm_bb_paths("5", arg[1] .. "/job.5/script", arg[1] .. "/path") end
io.write(rc, "|", tostring(msg), "|")
EOF
# the requests as JSON (the curl config escapes its quotes)
req() { tr -d '\\' <"$T/requests"; }
conf() { printf 'curl = %s\nsocket = %s/none.sock\nmount = /mnt/t\n%s\n' "$T/curl" "$T" "${1:-}" >"$T/tierd_bb.conf"; }

# run SCRIPT-TEXT: job_process then paths on a job script; prints "rc|message|paths file"
run() {
    mkdir -p "$T/job.5"
    printf '%s\n' "$1" >"$T/job.5/script"
    : >"$T/path" && : >"$T/requests"
    lua5.1 "$T/drive.lua" "$T"
    tr '\n' ';' <"$T/path"
}
expect_ok() { # NAME SCRIPT WANT-IN-PATHS
    local out
    out=$(run "$2")
    [[ $out == "0|nil|"* ]] || fail "$1: refused: $out"
    [[ $out == *"$3"* ]] || fail "$1: environment '$out' lacks '$3'"
    ok "$1"
}
expect_refused() { # NAME SCRIPT WANT-IN-MESSAGE
    local out
    out=$(run "$2")
    [[ $out == "-1|"*"$3"* ]] || fail "$1: want a refusal with '$3', got: $out"
    ok "$1"
}

conf
expect_ok "directives before the first command" $'#!/bin/bash\n#SBATCH -N 1\n#BB_LUA tierd stage_out=/ckpt/a\necho hi\n#BB_LUA stage_out=/ckpt/b' \
    "TIERD_STAGE_OUT=/mnt/t/ckpt/a;"
expect_ok "empty lines do not end the directives" $'#!/bin/bash\n\n#BB_LUA stage_out=/ckpt/a\n\n#BB_LUA stage_out=/ckpt/c\ntrue' \
    "TIERD_STAGE_OUT=/mnt/t/ckpt/a,/mnt/t/ckpt/c;"
expect_ok "a continuation" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M \\\n#BB_LUA stage=/ds/x\ntrue' \
    "TIERD_STAGE=/mnt/t/ds/x;"
expect_ok "a duplicate key after the first command is not seen" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M\ntrue\n#BB_LUA pool=tierd capacity=2M' \
    "TIERD_TENANT=slurm-5;"
expect_ok "capacity=4MB (powers of 1000)" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=4MB stage=/ds/x' "TIERD_STAGE=/mnt/t/ds/x;"
req | grep -q '"cache_bytes":"4000000"' || fail "capacity=4MB sent as $(req | grep -o 'cache_bytes[^,]*')"
expect_ok "capacity=2KiB" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=2KiB stage=/ds/x' "TIERD_STAGE="
req | grep -q '"cache_bytes":"2048"' || fail "capacity=2KiB sent as $(req | grep -o 'cache_bytes[^,]*')"
expect_ok "capacity=100T as an exact byte string" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=100T stage=/ds/x' "TIERD_STAGE="
req | grep -q '"cache_bytes":"109951162777600"' || fail "capacity=100T sent as $(req | grep -o 'cache_bytes[^,]*')"
req | grep -q '"dry_run":true' || fail "job_process did not ask a dry run: $(cat "$T/requests")"
grep -qx 'noproxy = "\*"' "$T/requests" || fail "the request may go through a proxy: $(cat "$T/requests")"
expect_refused "capacity=3.5M" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=3.5M' "capacity=3.5M is not a size"
expect_refused "capacity=40X" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=40X' "capacity=40X is not a size"
expect_refused "capacity=0" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=0' "capacity=0 is not a size"
expect_refused "a tab between keys" $'#!/bin/bash\n#BB_LUA pool=tierd\tcapacity=1M' "does not take tabs"
expect_refused "a key twice" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M\n#BB_LUA capacity=2M' "line 3: capacity= given twice"
expect_refused "an unknown key" $'#!/bin/bash\n#BB_LUA gpus=8' "unknown key 'gpus'"
expect_refused "another pool" $'#!/bin/bash\n#BB_LUA pool=other capacity=1M' "pool=other: this cluster's tierd pool is tierd"
expect_refused "a relative stage path" $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=ds/x' "must be an absolute mount path"
expect_refused "a stage path with .." $'#!/bin/bash\n#BB_LUA pool=tierd capacity=1M stage=/ds/../etc' "no '.', '..' or '//'"
expect_refused "stage without capacity" $'#!/bin/bash\n#BB_LUA stage=/ds/x' "stage= needs capacity="
expect_refused "tenant= while user_tenants = no" $'#!/bin/bash\n#BB_LUA stage_out=/c tenant=prod' "tenant= is not allowed"
conf "user_tenants = yes"
expect_ok "tenant= with user_tenants = yes" $'#!/bin/bash\n#BB_LUA stage_out=/c tenant=team-a' "TIERD_TENANT=team-a;"
expect_refused "a bad tenant name" $'#!/bin/bash\n#BB_LUA stage_out=/c tenant=a/b' "tenant=a/b: 1 to 63"
# class=: the classes users may ask for are the admin's (user_classes, default training and
# background); the request carries the class asked for
conf
expect_ok "class=background by default" $'#!/bin/bash\n#BB_LUA stage_out=/c class=background' "TIERD_TENANT=slurm-5;"
req | grep -q '"class":"background"' || fail "class=background sent as $(req | grep -o '"class":"[^"]*"')"
expect_refused "class=inference by default" $'#!/bin/bash\n#BB_LUA stage_out=/c class=inference' \
    "class=inference is not allowed on this cluster (user_classes = training,background in tierd_bb.conf)"
expect_refused "class=checkpoint by default" $'#!/bin/bash\n#BB_LUA stage_out=/c class=checkpoint' "class=checkpoint is not allowed"
expect_refused "an unknown class" $'#!/bin/bash\n#BB_LUA stage_out=/c class=gold' "class=gold is not one of inference"
conf "user_classes = training, inference"
expect_ok "class=inference where user_classes lists it" $'#!/bin/bash\n#BB_LUA stage_out=/c class=inference' "TIERD_TENANT=slurm-5;"
req | grep -q '"class":"inference"' || fail "class=inference sent as $(req | grep -o '"class":"[^"]*"')"
expect_refused "class=background where user_classes leaves it out" $'#!/bin/bash\n#BB_LUA stage_out=/c class=background' \
    "class=background is not allowed on this cluster (user_classes = training, inference in"
conf "user_classes = training,gold"
expect_refused "a bad user_classes" $'#!/bin/bash\n#BB_LUA stage_out=/c' "tierd_bb.conf:4: user_classes = training,gold: 'gold' is not a class"
# the hooks after submission (paths, data_out, teardown) take any class and a bad user_classes:
# a job accepted before user_classes was narrowed, or before it existed, still runs, stages out
# and is released; a bad list is logged with its file and line and refuses new jobs only
cat >"$T/drive_later.lua" <<'LUA'
local log = io.open(arg[1] .. "/log", "a")
slurm = { SUCCESS = 0, ERROR = -1, log_info = function() end, log_debug = function() end,
          log_error = function(fmt, ...) log:write(string.format(fmt, ...), "\n") end }
dofile(arg[1] .. "/burst_buffer.lua")
local s = arg[1] .. "/job.5/script"
for _, r in ipairs({ { slurm_bb_paths("5", s, arg[1] .. "/path") },
                     { slurm_bb_data_out("5", s) }, { slurm_bb_job_teardown("5", s, false) } }) do
    io.write(r[1], "|", tostring(r[2]), ";")
end
log:close()
LUA
later() { # SCRIPT-TEXT: paths, data_out and teardown of job 5; prints "rc|msg;" for each
    printf '%s\n' "$1" >"$T/job.5/script"
    : >"$T/log" && : >"$T/requests"
    lua5.1 "$T/drive_later.lua" "$T"
}
conf
out=$(later $'#!/bin/bash\n#BB_LUA stage_out=/c class=checkpoint')
[[ $out == "0|nil;0|nil;0|nil;" ]] || fail "later hooks of a class=checkpoint job with the default user_classes: $out"
req | grep -q 'url = "http://tierd/v1/wait"' || fail "data_out did not wait for stage_out: $(cat "$T/requests")"
req | grep -q 'request = "DELETE"' || fail "teardown did not release the job: $(cat "$T/requests")"
ok "class=checkpoint outside user_classes: paths, data_out and teardown accept it"
conf "user_classes = training,gold"
out=$(later $'#!/bin/bash\n#BB_LUA stage_out=/c class=checkpoint')
[[ $out == "0|nil;0|nil;0|nil;" ]] || fail "later hooks with a bad user_classes: $out"
grep -q "tierd_bb.conf:4: user_classes = training,gold: 'gold' is not a class" "$T/log" ||
    fail "a bad user_classes is not logged with file and line: $(cat "$T/log")"
ok "a bad user_classes is logged and the later hooks go on"
conf "user_classes = Training, INTERACTIVE"
expect_ok "user_classes in any case and with the legacy names" $'#!/bin/bash\n#BB_LUA stage_out=/c class=inference' "TIERD_TENANT=slurm-5;"
expect_refused "a class the legacy list leaves out" $'#!/bin/bash\n#BB_LUA stage_out=/c class=background' "class=background is not allowed"
conf "user_classes = streaming"
expect_ok "user_classes = streaming is training" $'#!/bin/bash\n#BB_LUA stage_out=/c class=training' "TIERD_TENANT=slurm-5;"
conf "nonsense here"
expect_refused "a bad tierd_bb.conf line" $'#!/bin/bash\n#BB_LUA stage_out=/c' "tierd_bb.conf:4: 'nonsense here' is not KEY = VALUE"
conf "job_prefix = east."
expect_ok "job_prefix" $'#!/bin/bash\n#BB_LUA stage_out=/c' "TIERD_TENANT=slurm-5;"
req | grep -q '"job":"east.5"' || fail "job_prefix not applied: $(req | grep -o '"job":"[^"]*"')"
# data_out's answers: "nothing written there" is skipped, a 404 for a path outside write-back
# fails, a 503 EOPNOTSUPP (tierd without write-back) fails at once instead of being retried
cat >"$T/drive_out.lua" <<'EOF'
slurm = { SUCCESS = 0, ERROR = -1, log_info = function() end, log_debug = function() end,
          log_error = function() end }
dofile(arg[1] .. "/burst_buffer.lua")
local rc, msg = slurm_bb_data_out("5", arg[1] .. "/job.5/script")
io.write(rc, "|", tostring(msg))
EOF
data_out_with() { # STATUS BODY: data_out against a curl that always answers BODY with STATUS
  cat >"$T/curl" <<EOF
#!/bin/sh
echo x >>"$T/calls"
printf '%s\n%s' '$2' '$1'
EOF
  : >"$T/calls"
  printf '#!/bin/bash\n#BB_LUA stage_out=/ckpt/x\ntrue\n' >"$T/job.5/script"
  timeout 20 lua5.1 "$T/drive_out.lua" "$T"
}
conf
out=$(data_out_with 404 '{"error":"/ckpt/x: no such file or directory in the write-back namespace /ckpt","errno":"ENOENT"}')
[[ $out == "0|nil" ]] || fail "data_out with nothing written under stage_out: $out"
ok "data_out skips a stage_out path the job wrote nothing under"
out=$(data_out_with 404 '{"error":"/ckpt/x is in namespace /ds, which is not in write-back mode","errno":"ENOENT"}')
[[ $out == "-1|"*"not in write-back mode"* ]] || fail "data_out with a path outside write-back: $out"
ok "data_out fails on a stage_out path outside write-back"
out=$(data_out_with 503 '{"error":"no namespace is in write-back mode","errno":"EOPNOTSUPP"}')
[[ $out == "-1|"*"HTTP 503"* ]] || fail "data_out with tierd without write-back: $out"
[ "$(wc -l <"$T/calls")" = 1 ] || fail "data_out retried a final 503 ($(wc -l <"$T/calls") calls)"
ok "data_out fails at once on a 503 EOPNOTSUPP"
echo "all checks passed"
