#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_jobs_fuse.sh - job admission (POST/GET/DELETE /v1/jobs, tierctl jobs) on a REAL mount over
# a POSIX backend (run by CTest, label fuse; needs root and /dev/fuse).
#
# RAM cache 16 MiB of 256 KiB blocks with pin_size = 12M: jobs may reserve 12 MiB; backend warm
# has link_capacity = 100MiB/s.
#   job 1  stage /ds/a (3 MiB), 5M, 40M/s    admitted; its blocks staged and pinned (no fetch on
#                                            a read through the mount, an evict drops none)
#   job 2  stage /ds/a and /ds/b, 5M         admitted (shares /ds/a's pin with job 1)
#   job 3  5M                                409 queued, position 1 (space)
#   job 4  1M                                409 queued, position 2: it would fit, but no overtaking
#   retries are idempotent; another request under id 3 is 409 with a message; 1G is 422; 200MiB/s
#   over the link is 422; bad input is 400 and changes nothing; a dry run checks the same and
#   records nothing; uid 1001 may read but gets 403.
#   Releasing job 1 keeps /ds/a pinned (job 2 holds it) and admits jobs 3 and 4 in order;
#   releasing everything unpins; a prefix pinned by hand stays pinned after a job on it goes.
# Waits poll with deadlines; no sleeps.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup jobs_fuse

[ "$(id -u)" = 0 ] || fail "needs root (a non-administrator caller as uid 1001)"
for tool in setpriv python3 curl; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done

chmod 0711 "$T"
mkdir -p "$DATA/ds/a" "$DATA/ds/b" "$DATA/ckpt" "$MNT" "$T/u" "$T/spool"
chmod 0777 "$T/u"
for i in 0 1 2; do head -c 1048576 /dev/urandom >"$DATA/ds/a/$i.bin"; done
head -c $((2 * 1048576)) /dev/urandom >"$DATA/ds/b/big.bin"

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section tenants "max_tenants = 8"
  tierd_conf_section cache "ram_size = 16M" "block_size = 256K" "pin_size = 12M"
  tierd_conf_posix warm "$DATA" "link_capacity = 100MiB/s"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_ns /ckpt warm "prefix = ckpt" "mode = write-back"
  tierd_conf_section writeback "spool_dir = $T/spool"
  tierd_conf_mount "$MNT"
  tierd_conf_api "$SOCK" "socket_group = 1001" # uid 1001 may connect, and is no administrator
} >"$CONF"

start_tierd
ok "mounted"

# post BODY [UID]: POST /v1/jobs, the answer in $T/post.json, prints the HTTP status
post() {
  if [ -n "${2:-}" ]; then # as another uid, which cannot write into $T: through $T/u
    rm -f "$T/u/post.json"
    setpriv --reuid="$2" --regid="$2" --clear-groups -- curl -sS -o "$T/u/post.json" \
      -w '%{http_code}' --unix-socket "$SOCK" -d "$1" http://tierd/v1/jobs
    cp "$T/u/post.json" "$T/post.json"
    return
  fi
  curl -sS -o "$T/post.json" -w '%{http_code}' --unix-socket "$SOCK" -d "$1" http://tierd/v1/jobs
}
field() { python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): o=o[k]
print(o)' "$@"; }
job() { api "/v1/jobs/$1" >"$T/job.json" && field "$T/job.json" "$2"; }
cachef() { api /v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"][sys.argv[1]])' "$1"; }
njobs() { api /v1/jobs | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))'; }
expect() { # CODE WHAT: the last post answered CODE
  [ "$code" = "$1" ] || fail "$2: HTTP $code, want $1: $(cat "$T/post.json")"
}

# ---- job 1: admitted, staged, pinned ---------------------------------------------------------
code=$(post '{"job": 1, "tenant": "team-a", "stage": ["/ds/a"], "cache_bytes": "5M", "bandwidth": "40M", "class": "training", "stage_out": ["/ckpt/job1"]}')
expect 200 "job 1"
[ "$(field "$T/post.json" state)" = admitted ] || fail "job 1 not admitted: $(cat "$T/post.json")"
staged() { [ "$(job "$1" staging.state)" = staged ]; }
wait_for 30 staged 1 || fail "job 1 not staged within 30 s: $(cat "$T/job.json")"
[ "$(field "$T/job.json" staging.bytes_done)" = 3145728 ] || fail "job 1 staged the wrong amount: $(cat "$T/job.json")"
[ "$(cachef pinned_bytes)" = 3145728 ] || fail "after job 1, pinned_bytes $(cachef pinned_bytes), want 3145728"
api /v1/tenants | grep -q '"name":"team-a"' || fail "job 1's tenant team-a was not registered"
f0=$(cachef fetches)
cat "$MNT"/ds/a/*.bin | cmp -s - <(cat "$DATA"/ds/a/*.bin) || fail "reading /ds/a through the mount"
[ "$(cachef fetches)" = "$f0" ] || fail "reading job 1's staged files fetched $(($(cachef fetches) - f0)) blocks (want 0)"
ev=$(tierd_api "$SOCK" /v1/evict -d '{"path": "/ds/a"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["evicted_blocks"])')
[ "$ev" = 0 ] || fail "evicting job 1's staged /ds/a dropped $ev blocks (they are pinned)"
ok "job 1 admitted, /ds/a staged (3 MiB) and pinned: 0 fetches on a read, 0 blocks evicted; tenant registered"

# ---- job 2 admitted; jobs 3 and 4 queued in order ------------------------------------------
code=$(post '{"job": 2, "tenant": "team-b", "stage": ["/ds/a", "/ds/b"], "cache_bytes": 5242880}')
expect 200 "job 2"
wait_for 30 staged 2 || fail "job 2 not staged within 30 s: $(cat "$T/job.json")"
[ "$(cachef pinned_bytes)" = 5242880 ] || fail "after job 2, pinned_bytes $(cachef pinned_bytes), want 5242880"
code=$(post '{"job": "3", "tenant": "team-a", "cache_bytes": "5M"}')
expect 409 "job 3 over capacity"
[ "$(field "$T/post.json" state)" = queued ] && [ "$(field "$T/post.json" position)" = 1 ] ||
  fail "job 3 not queued at position 1: $(cat "$T/post.json")"
grep -q "hot-tier space" "$T/post.json" || fail "job 3's reason does not say space: $(cat "$T/post.json")"
code=$(post '{"job": 4, "tenant": "team-a", "cache_bytes": "1M"}')
expect 409 "job 4 behind job 3"
[ "$(field "$T/post.json" position)" = 2 ] || fail "job 4 not at position 2: $(cat "$T/post.json")"
grep -q "behind 1 queued" "$T/post.json" || fail "job 4's reason: $(cat "$T/post.json")"
ok "job 2 admitted; job 3 queued (position 1, space), job 4 queued behind it (position 2: no overtaking)"

# ---- retries, conflicts, rejections, bad input, rights --------------------------------------
code=$(post '{"job": "3", "tenant": "team-a", "cache_bytes": "5M"}')
expect 409 "retry of job 3"
[ "$(field "$T/post.json" position)" = 1 ] || fail "retry of job 3 changed it: $(cat "$T/post.json")"
code=$(post '{"job": 1, "tenant": "team-a", "stage": ["/ds/a"], "cache_bytes": "5M", "bandwidth": "40M", "class": "training", "stage_out": ["/ckpt/job1"]}')
expect 200 "retry of job 1"
code=$(post '{"job": 3, "tenant": "team-a", "cache_bytes": "6M"}')
expect 409 "another request under id 3"
grep -q "another request" "$T/post.json" || fail "the conflict does not say why: $(cat "$T/post.json")"
code=$(post '{"job": 9, "tenant": "team-a", "cache_bytes": "1G"}')
expect 422 "a job larger than the hot tier"
grep -q "more than jobs may ever reserve" "$T/post.json" || fail "the 422 does not say why: $(cat "$T/post.json")"
code=$(post '{"job": 9, "tenant": "never-made", "cache_bytes": "1G"}')
expect 422 "a job larger than the hot tier, for a new tenant"
api /v1/tenants | grep -q '"name":"never-made"' && fail "a rejected job registered its tenant never-made"
code=$(post '{"job": 9, "tenant": "team-a", "stage": ["/ds/b"], "cache_bytes": "1M", "bandwidth": "200MiB/s"}')
expect 422 "bandwidth over the link"
grep -q "link_capacity" "$T/post.json" || fail "the 422 does not name link_capacity: $(cat "$T/post.json")"
n0=$(njobs)
code=$(post '{"job": 9, "tenant": "team-a", "cache_bytes": "1M", "gpus": 8}')
expect 400 "unknown field"
grep -q "unknown field 'gpus'" "$T/post.json" || fail "the 400 does not name the field: $(cat "$T/post.json")"
code=$(post '{"job": 9, "tenant": "team-a", "cache_bytes": "40X"}')
expect 400 "bad size"
grep -q "cache_bytes" "$T/post.json" || fail "the 400 does not name cache_bytes: $(cat "$T/post.json")"
code=$(post '{"job": 9, "tenant": "team-a", "cache_bytes": "1M", "stage": ["/nowhere/x"]}')
expect 400 "a path in no namespace"
grep -q "stage\[0\]" "$T/post.json" || fail "the 400 does not name the path: $(cat "$T/post.json")"
code=$(post '{"job": "bad id!", "tenant": "team-a", "cache_bytes": "1M"}')
expect 400 "a bad id"
code=$(post '{"job": "..", "tenant": "team-a", "cache_bytes": "1M"}')
expect 400 "the id .."
code=$(post '{"job": 9, "tenant": "team-a", "stage": ["/ds/b"], "cache_bytes": 0}')
expect 400 "stage paths with cache_bytes 0"
grep -q "more than 0 with stage paths" "$T/post.json" || fail "the 400 does not say why: $(cat "$T/post.json")"
code=$(post '{"job": 9, "tenant": "team-a", "stage": ["/ds", "/ds/a"], "cache_bytes": "1M"}')
expect 400 "nested stage paths"
grep -q "same or nested" "$T/post.json" || fail "the 400 does not say nested: $(cat "$T/post.json")"
code=$(post '{"job": 9, "tenant": "team-a", "stage": ["/ds/b", "/ds/b/"], "cache_bytes": "1M"}')
expect 400 "duplicate stage paths"
code=$(post '{"job": 9, "tenant": "team-a", "cache_bytes": "1M", "stage_out": ["/ds/ckpt"]}')
expect 400 "stage_out in a read-cache namespace"
grep -q "write-back namespace" "$T/post.json" || fail "the 400 does not say write-back: $(cat "$T/post.json")"
code=$(post '{"job": 9, "tenant": "team-a", "cache_bytes": "1M", "bandwidth": "9223372036854775808"}')
expect 400 "bandwidth over INT64_MAX"
# dry_run (what the Slurm provider asks at sbatch): the same checks, nothing recorded or registered
code=$(post '{"job": 9, "tenant": "dry-tenant", "stage": ["/ds/b"], "cache_bytes": "1M", "dry_run": true}')
expect 200 "a valid dry run"
[ "$(field "$T/post.json" verdict)" = valid ] || fail "dry run verdict: $(cat "$T/post.json")"
code=$(post '{"job": 9, "tenant": "dry-tenant", "cache_bytes": "1M", "stage": ["/nowhere/x"], "dry_run": true}')
expect 400 "a dry run with a path in no namespace"
grep -q "stage\[0\]" "$T/post.json" || fail "the dry run's 400 does not name the path: $(cat "$T/post.json")"
code=$(post '{"job": 9, "tenant": "dry-tenant", "cache_bytes": "1G", "dry_run": true}')
expect 422 "a dry run larger than the hot tier"
code=$(post '{"job": 9, "tenant": "dry-tenant", "cache_bytes": "1M", "dry_run": "yes"}')
expect 400 "dry_run not a boolean"
api /v1/tenants | grep -q '"name":"dry-tenant"' && fail "a dry run registered its tenant"
[ "$(njobs)" = "$n0" ] || fail "bad requests changed the job list ($n0 -> $(njobs) jobs)"
code=$(post '{"job": 9, "tenant": "team-a", "cache_bytes": "1M"}' 1001)
expect 403 "POST by uid 1001"
setpriv --reuid=1001 --regid=1001 --clear-groups -- curl -sSf --unix-socket "$SOCK" http://tierd/v1/jobs >/dev/null ||
  fail "GET /v1/jobs by uid 1001 refused"
code=$(setpriv --reuid=1001 --regid=1001 --clear-groups -- curl -sS -o /dev/null -w '%{http_code}' \
  -X DELETE --unix-socket "$SOCK" http://tierd/v1/jobs/1)
expect 403 "DELETE by uid 1001"
ok "retries idempotent; another request 409; 1G and 200MiB/s 422; bad input 400 (ids, cache_bytes 0, nested paths, stage_out outside write-back, huge bandwidth; nothing changed); uid 1001 reads, POST/DELETE 403"

# ---- tierctl, then release job 1: the queue moves in order ----------------------------------
tierd_ctl jobs >"$T/ctl.txt" || fail "tierctl jobs: $(cat "$T/ctl.txt")"
grep -Eq '^1 +admitted +team-a +training' "$T/ctl.txt" && grep -Eq '^4 +queued .*#2' "$T/ctl.txt" ||
  fail "tierctl jobs: $(cat "$T/ctl.txt")"
grep -Fxq "reservable 2.0 MiB of 12.0 MiB (10.0 MiB reserved; 0 B pinned outside jobs)" "$T/ctl.txt" ||
  fail "tierctl jobs: wrong capacity line: $(cat "$T/ctl.txt")"
tierd_ctl jobs show 1 >"$T/ctl.txt" || fail "tierctl jobs show 1"
grep -q "^staging    staged" "$T/ctl.txt" || fail "tierctl jobs show 1: $(cat "$T/ctl.txt")"
tierd_ctl jobs release 1 >"$T/ctl.txt" || fail "tierctl jobs release 1: $(cat "$T/ctl.txt")"
grep -q "released 1" "$T/ctl.txt" || fail "tierctl jobs release 1: $(cat "$T/ctl.txt")"
[ "$(job 3 state)" = admitted ] || fail "job 3 not admitted after job 1's release: $(cat "$T/job.json")"
[ "$(job 4 state)" = admitted ] || fail "job 4 not admitted after job 1's release: $(cat "$T/job.json")"
[ "$(cachef pinned_bytes)" = 5242880 ] || fail "releasing job 1 unpinned job 2's /ds/a: pinned_bytes $(cachef pinned_bytes)"
ev=$(tierd_api "$SOCK" /v1/evict -d '{"path": "/ds/a"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["evicted_blocks"])')
[ "$ev" = 0 ] || fail "after job 1's release, /ds/a (still job 2's) lost $ev blocks to an evict"
code=$(curl -sS -o "$T/post.json" -w '%{http_code}' -X DELETE --unix-socket "$SOCK" http://tierd/v1/jobs/1)
expect 404 "releasing job 1 twice"
ok "tierctl jobs/show/release; job 1 released: jobs 3 and 4 admitted in order, /ds/a still pinned for job 2"

for id in 2 3 4; do
  tierd_api "$SOCK" "/v1/jobs/$id" -X DELETE >/dev/null || fail "DELETE /v1/jobs/$id"
done
[ "$(cachef pinned_bytes)" = 0 ] || fail "with every job released, pinned_bytes $(cachef pinned_bytes), want 0"
[ "$(njobs)" = 0 ] || fail "jobs left after releasing all"
ok "every job released: nothing pinned, no jobs"

# ---- a rule pinned by hand before a job stays pinned after the job's release ---------------
tierd_api "$SOCK" /v1/pin -d '{"path": "/ds/b"}' >/dev/null || fail "POST /v1/pin /ds/b"
code=$(post '{"job": 5, "tenant": "team-a", "stage": ["/ds/b"], "cache_bytes": "3M"}')
expect 200 "job 5"
wait_for 30 staged 5 || fail "job 5 not staged within 30 s: $(cat "$T/job.json")"
tierd_api "$SOCK" /v1/jobs/5 -X DELETE >/dev/null || fail "DELETE /v1/jobs/5"
[ "$(cachef pinned_bytes)" = 2097152 ] ||
  fail "releasing job 5 unpinned the hand pin of /ds/b: pinned_bytes $(cachef pinned_bytes), want 2097152"
ok "a hand pin of /ds/b outlives job 5, which staged the same prefix"

# ---- a dry run against an existing job: the verdict says conflict, the job is unchanged ------
code=$(post '{"job": 6, "tenant": "team-a", "cache_bytes": "1M"}')
expect 200 "job 6"
code=$(post '{"job": 6, "tenant": "team-a", "cache_bytes": "2M", "dry_run": true}')
expect 200 "a dry run under job 6's id"
[ "$(field "$T/post.json" verdict)" = conflict ] || fail "dry run under an existing id: $(cat "$T/post.json")"
[ "$(job 6 cache_bytes)" = 1048576 ] || fail "a dry run changed job 6: $(cat "$T/job.json")"
ok "a dry run under an existing id with another request: verdict conflict, job 6 unchanged"

# ---- a full tenant registry ([tenants] max_tenants = 8) folds a job's new tenant into other --
# registered: default, other, team-a, team-b; t5..t8 fill the registry, t9 is counted as other
for i in 5 6 7 8 9; do
  code=$(post "{\"job\": \"f$i\", \"tenant\": \"t$i\", \"cache_bytes\": \"64K\"}")
  expect 200 "job f$i with a new tenant t$i"
done
[ "$(field "$T/post.json" counted_as)" = other ] || fail "job f9 past a full registry: $(cat "$T/post.json")"
[ "$(field "$T/post.json" tenant)" = t9 ] || fail "job f9 lost its tenant name: $(cat "$T/post.json")"
grep -q '"counted_as"' <(api /v1/jobs/f8) && fail "job f8 (registered) is shown as folded"
grep -q "tenant registry is full.*job f9" "$T/tierd.log" || fail "no log line for the folded tenant of f9"
folded=$(api /v1/tenants | python3 -c 'import json,sys; print(json.load(sys.stdin)["folded"])')
[ "$folded" -ge 1 ] || fail "GET /v1/tenants folded $folded after job f9's tenant was folded"
code=$(post '{"job": "f9", "tenant": "t9", "cache_bytes": "64K"}')
expect 200 "a retry of f9 (its tenant folded)"
ok "a full tenant registry: job f9 admitted, its tenant t9 counted as other (logged); a retry is idempotent"

stop_tierd
