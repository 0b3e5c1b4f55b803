#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_tenants_fuse.sh - per-tenant attribution of FUSE reads on a REAL mount over a POSIX backend,
# and which identities tierd trusts (run by CTest, label fuse; needs root, /dev/fuse and a
# writable cgroup v2 hierarchy). The test's cgroups live under a directory it creates, named as
# the Slurm cgroup root by [tenants] slurm_cgroup_root (ROOT below).
#
# Ten readers, each reading its own file of a known, distinct size exactly once, whole:
#   alice      uid 1001 (setpriv), matched by [tenant alice] uid = 1001, class inference
#   bob        uid 1002 (setpriv), matched by [tenant bob] uid = 1002, class training
#   slurm-4242 root, moved into ROOT/job_4242/step_0: no rule matches, so tierd creates the
#              implicit tenant (class training)
#   job-5151   root, in ROOT/job_5151/step_0, registered before the read with
#              POST /v1/tenants {"name": "job-5151", "class": "checkpoint", "slurm_job": "5151"}
#   slurm-777  uid 1003 with SLURM_JOB_ID=777 in its environment and the test's own cgroup (Slurm
#              with proctrack/linuxproc), job 777 registered with its uid by POST /v1/jobs
#              {"job": 777, "uid": 1003, ...}: its environment is believed
#   uid-1004   uid 1004, no job: its own tenant (fallback = uid, the default)
#   uid-1005   uid 1005 with a forged SLURM_JOB_ID=4242 (job 4242 is not its): uid-1005, not
#              slurm-4242
#   uid-65534  nobody with a forged SLURM_JOB_ID=8888, job 8888 named by [tenant victim]
#              slurm_job = 8888 (class inference) but not registered: uid-65534, not victim
#   uid-1007   uid 1007 in ROOT/uid_1006/job_6006 (another uid's job cgroup): uid-1007
#   victim     then nobody again with SLURM_JOB_ID=8888, after POST /v1/jobs {"job": 8888, "uid":
#              65534, ...} registered the job as nobody's: victim (class inference)
# Asserts: each reader got the backend's bytes; in GET /metrics (Unix socket)
# tierd_op_bytes_total{op="read"} summed over tiers is exactly the file size for each tenant and
# carries only the tenant's configured class, and tierd_sched_bytes_total (backend calls at the
# scheduling point: each block fetched once, by a read in the tenant's class or a prefetch in
# background) summed over classes is exactly the file size too; no other tenant (default
# included) has read or backend bytes, so nothing was attributed to the wrong tenant (with the
# read handle's binding broken to tenant 0 the test fails: checked 2026-12-01); `tierctl top
# --once --json` lists all ten with ops; GET /v1/tenants shows slurm-4242 and the uid tenants
# as implicit (class training), job-5151 and slurm-777 as registered, no slurm-8888 or
# slurm-6006, and counts the ignored environments and the uid mismatch; tierd's log names each
# once.
# The kernel asks FUSE for every byte exactly once: each file is new (its inode has no pages),
# is read once, whole, and readahead stops at EOF (tierd clamps replies to the size).
# The cgroups are removed on exit (their processes moved back to the test's cgroup first).
# No sleeps as synchronisation: every wait polls a condition with a deadline.
set -euo pipefail

CG_ROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
CG_BASE=
CG_HOME=
extra_cleanup() {
  [ -n "$CG_BASE" ] && [ -d "$CG_BASE" ] || return 0
  local d p
  # leaves first; a cgroup with processes cannot be removed, so move them home first
  find "$CG_BASE" -depth -type d | while read -r d; do
    if [ -f "$d/cgroup.procs" ]; then
      while read -r p; do echo "$p" >"$CG_HOME/cgroup.procs" 2>/dev/null || true; done <"$d/cgroup.procs"
    fi
    rmdir "$d" 2>/dev/null || echo "warning: could not remove cgroup $d" >&2
  done
}
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup tenants_fuse

[ "$(id -u)" = 0 ] || fail "needs root (readers as other uids, cgroups)"
for tool in setpriv python3 curl; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done
[ -n "$CG_ROOT" ] || fail "no cgroup v2 hierarchy is mounted (mount | grep cgroup2)"
# a Slurm job the test itself may run in must not name the root readers' tenant
unset SLURM_JOB_ID

# the test's own cgroup v2 directory (the "0::" line), where processes go back to
CG_HOME=$CG_ROOT$(sed -n 's/^0:://p' /proc/self/cgroup)
[ -f "$CG_HOME/cgroup.procs" ] || fail "the test's cgroup v2 directory $CG_HOME has no cgroup.procs"
CG_BASE=$CG_ROOT/tierd-test-tenants-$$
# the Slurm root as /proc/PID/cgroup names it (relative to the cgroup2 mount)
SLURM_ROOT=/tierd-test-tenants-$$/slurmd
CG_4242=$CG_ROOT$SLURM_ROOT/job_4242/step_0
CG_5151=$CG_ROOT$SLURM_ROOT/job_5151/step_0
CG_6006=$CG_ROOT$SLURM_ROOT/uid_1006/job_6006/step_0
mkdir -p "$CG_4242" "$CG_5151" "$CG_6006" || fail "cannot create cgroups under $CG_ROOT"

# ---- backend data, config -----------------------------------------------------------------
chmod 0711 "$T"
mkdir -p "$DATA/ds" "$MNT"
chmod 0755 "$DATA" "$DATA/ds" "$MNT"
declare -A SIZE=(
  [alice]=$((2 * 1048576 + 123))
  [bob]=$((3 * 1048576 + 4567))
  [slurm-4242]=$((1048576 + 999))
  [job-5151]=$((1572864 + 31))
  [slurm-777]=700001
  [uid-1004]=600011
  [uid-1005]=500021
  [uid-65534]=400031
  [uid-1007]=300041
  [victim]=200051
)
declare -A CLASS=([alice]=inference [bob]=training [slurm-4242]=training [job-5151]=checkpoint
  [slurm-777]=training [uid-1004]=training [uid-1005]=training [uid-65534]=training
  [uid-1007]=training [victim]=inference)
for t in "${!SIZE[@]}"; do
  head -c "${SIZE[$t]}" /dev/urandom >"$DATA/ds/$t.bin"
done
chmod 0644 "$DATA"/ds/*.bin

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022"
  tierd_conf_api "$SOCK"
  tierd_conf_section tenants "slurm_cgroup_root = $SLURM_ROOT"
  tierd_conf_section "tenant alice" "uid = 1001" "class = inference"
  tierd_conf_section "tenant bob" "uid = 1002" "class = training"
  tierd_conf_section "tenant victim" "slurm_job = 8888" "class = inference"
} >"$CONF"

start_tierd
ok "mounted"

# ---- the reads ------------------------------------------------------------------------------
# job 5151's name is registered before any of its processes is seen
code=$(curl -sS -o "$T/post.json" -w '%{http_code}' --unix-socket "$SOCK" \
  -d '{"name": "job-5151", "class": "checkpoint", "slurm_job": "5151"}' http://tierd/v1/tenants)
[ "$code" = 201 ] || fail "POST /v1/tenants job-5151: HTTP $code $(cat "$T/post.json")"
ok "job 5151 registered by POST /v1/tenants"
post_job() { # ID UID TENANT: register Slurm job ID as UID's, as the provider's setup does
  local code
  code=$(curl -sS -o "$T/job.json" -w '%{http_code}' --unix-socket "$SOCK" \
    -d "{\"job\": $1, \"uid\": $2, \"tenant\": \"$3\", \"cache_bytes\": 0}" http://tierd/v1/jobs)
  [ "$code" = 200 ] || fail "POST /v1/jobs $1 (uid $2): HTTP $code $(cat "$T/job.json")"
}
post_job 777 1003 slurm-777
ok "job 777 registered as uid 1003's by POST /v1/jobs"

# Each reader is the FUSE caller itself (cat); cmp reads the backend file, not the mount. The
# five run at once, so their requests interleave on tierd's FUSE threads.
as_uid() { setpriv --reuid="$1" --regid="$1" --clear-groups -- cat "$2"; }
# the shell moves itself into the cgroup, then becomes cat: the same pid and start time, and its
# first request to the mount is made from inside the job's cgroup
in_cgroup() { # CGROUP FILE
  bash -c 'echo $$ >"$1/cgroup.procs" && exec cat "$2"' in_cgroup "$1" "$2"
}
with_job_env() { # UID JOB FILE
  setpriv --reuid="$1" --regid="$1" --clear-groups -- env SLURM_JOB_ID="$2" cat "$3"
}
in_cgroup_as() { # CGROUP UID FILE
  bash -c 'echo $$ >"$1/cgroup.procs" && exec setpriv --reuid="$2" --regid="$2" --clear-groups -- cat "$3"' \
    in_cgroup_as "$1" "$2" "$3"
}
reader() { # TENANT CMD...: run CMD, check its output against the tenant's backend file
  local t=$1
  shift
  if "$@" | cmp -s "$DATA/ds/$t.bin" -; then : >"$T/ok.$t"; fi
}
declare -A RPID=()
reader alice as_uid 1001 "$MNT/ds/alice.bin" &
RPID[alice]=$!
reader bob as_uid 1002 "$MNT/ds/bob.bin" &
RPID[bob]=$!
reader slurm-4242 in_cgroup "$CG_4242" "$MNT/ds/slurm-4242.bin" &
RPID[slurm-4242]=$!
reader job-5151 in_cgroup "$CG_5151" "$MNT/ds/job-5151.bin" &
RPID[job-5151]=$!
reader slurm-777 with_job_env 1003 777 "$MNT/ds/slurm-777.bin" &
RPID[slurm-777]=$!
reader uid-1004 as_uid 1004 "$MNT/ds/uid-1004.bin" &
RPID[uid-1004]=$!
reader uid-1005 with_job_env 1005 4242 "$MNT/ds/uid-1005.bin" &
RPID[uid-1005]=$!
reader uid-65534 with_job_env 65534 8888 "$MNT/ds/uid-65534.bin" &
RPID[uid-65534]=$!
reader uid-1007 in_cgroup_as "$CG_6006" 1007 "$MNT/ds/uid-1007.bin" &
RPID[uid-1007]=$!
for t in "${!RPID[@]}"; do
  wait "${RPID[$t]}" || true
  [ -e "$T/ok.$t" ] || fail "the reader of tenant $t read wrong bytes (or failed)"
done
ok "nine readers (uids 1001, 1002, 1004; cgroups job_4242, job_5151, uid_1006/job_6006 as 1007; SLURM_JOB_ID 777 registered, 4242 and 8888 forged) read their files at once"
# job 8888 registered as nobody's: the same environment now names it, and its rule's tenant
post_job 8888 65534 victim
reader victim with_job_env 65534 8888 "$MNT/ds/victim.bin" || true
[ -e "$T/ok.victim" ] || fail "nobody's read as job 8888 (registered) read wrong bytes (or failed)"
for cg in "$CG_4242" "$CG_5151" "$CG_6006"; do
  [ -z "$(cat "$cg/cgroup.procs")" ] || fail "processes left in $cg"
done
ok "nobody with SLURM_JOB_ID=8888 after POST /v1/jobs {job 8888, uid 65534} read victim.bin"

# ---- /metrics: bytes and class per tenant -------------------------------------------------------
api /metrics >"$T/metrics.txt" || fail "GET /metrics on the socket"
WANT=$(for t in "${!SIZE[@]}"; do echo "$t ${SIZE[$t]} ${CLASS[$t]}"; done)
python3 - "$T/metrics.txt" "$WANT" <<'EOF' || fail "per-tenant read bytes in /metrics: $(grep '^tierd_op_bytes_total' "$T/metrics.txt")"
import re, sys
text = open(sys.argv[1]).read()
want = {}
for line in sys.argv[2].splitlines():
    name, size, cls = line.split()
    want[name] = (int(size), cls)
got, classes = {}, {}
for m in re.finditer(r'^tierd_op_bytes_total\{([^}]*)\} (\S+)$', text, re.M):
    lab = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
    if lab.get("op") != "read":
        continue
    t = lab["tenant"]
    got[t] = got.get(t, 0) + int(float(m.group(2)))
    classes.setdefault(t, set()).add(lab["class"])
bad = []
for t, (size, cls) in sorted(want.items()):
    if got.get(t) != size:
        bad.append(f"tenant {t}: {got.get(t)} read bytes, want {size}")
    if classes.get(t, set()) != {cls}:
        bad.append(f"tenant {t}: classes {sorted(classes.get(t, set()))}, want ['{cls}']")
for t in sorted(set(got) - set(want)):
    if got[t]:
        bad.append(f"tenant {t} read {got[t]} bytes, but none of its callers read")
# backend calls: each block is fetched once (the cache holds every file), charged to the tenant
# of the handle that read or prefetched it: its class, or background for prefetches
sb, scls = {}, {}
for m in re.finditer(r'^tierd_sched_bytes_total\{([^}]*)\} (\S+)$', text, re.M):
    lab = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
    t = lab["tenant"]
    sb[t] = sb.get(t, 0) + int(float(m.group(2)))
    if float(m.group(2)):
        scls.setdefault(t, set()).add(lab["class"])
for t, (size, cls) in sorted(want.items()):
    if sb.get(t) != size:
        bad.append(f"tenant {t}: {sb.get(t)} backend bytes at the scheduler, want {size}")
    if not scls.get(t, set()) <= {cls, "background"}:
        bad.append(f"tenant {t}: backend bytes in classes {sorted(scls[t])}")
for t in sorted(set(sb) - set(want)):
    if sb[t]:
        bad.append(f"tenant {t} has {sb[t]} backend bytes, but none of its callers read")
assert not bad, "; ".join(bad)
print("ok: read bytes = backend bytes: " + ", ".join(f"{t}={got[t]} ({cls})" for t, (_, cls) in sorted(want.items())))
EOF

# ---- tierctl top, /v1/tenants ---------------------------------------------------------------
tierd_ctl top --once --json --interval 0.3 >"$T/top.json" || fail "tierctl top --once --json exited $?"
python3 - "$T/top.json" "${!SIZE[@]}" <<'EOF' || fail "tierctl top --once --json: $(cat "$T/top.json")"
import json, sys
j = json.load(open(sys.argv[1]))
rows = {r["tenant"]: r for r in j["tenants"]}
for t in sys.argv[2:]:
    assert t in rows, f"no tenant {t} in {sorted(rows)}"
    assert rows[t]["ops_total"] > 0, f"tenant {t} has no ops: {rows[t]}"
EOF
ok "tierctl top --once --json lists ${!SIZE[*]}"

api /v1/tenants >"$T/tenants.json" || fail "GET /v1/tenants"
python3 - "$T/tenants.json" <<'EOF' || fail "GET /v1/tenants: $(cat "$T/tenants.json")"
import json, sys
j = json.load(open(sys.argv[1]))
ts = {t["name"]: t for t in j["tenants"]}
for name in ("slurm-4242", "uid-1004", "uid-1005", "uid-65534", "uid-1007"):
    assert name in ts, f"no implicit tenant {name} in {sorted(ts)}"
    assert ts[name]["implicit"] is True and ts[name]["class"] == "training", ts[name]
    assert ts[name]["rules"] == [], ts[name]
j5 = ts.get("job-5151")
assert j5 and j5["implicit"] is False and j5["class"] == "checkpoint", j5
assert [r.get("slurm_job") for r in j5["rules"]] == ["5151"], j5
assert ts["slurm-777"]["implicit"] is False, ts["slurm-777"]  # POST /v1/jobs registered it
for name in ("slurm-5151", "slurm-8888", "slurm-6006"):
    assert name not in ts, f"{name} exists: {sorted(ts)}"
for name, uid, cls in (("alice", 1001, "inference"), ("bob", 1002, "training")):
    assert ts[name]["class"] == cls and [r.get("uid") for r in ts[name]["rules"]] == [uid], ts[name]
tr = j["trust"]
assert tr["env_ignored"] >= 2 and tr["uid_mismatch"] >= 1 and tr["job_owners"] >= 2, tr
EOF
ok "GET /v1/tenants: slurm-4242 and uid-N implicit, job-5151 and slurm-777 registered, no forged job's tenant"
for want in "uid 65534 has SLURM_JOB_ID=8888, but job 8888 is not known to run as uid 65534" \
  "uid 1005 has SLURM_JOB_ID=4242, but job 4242 is not known" \
  "uid 1007 is in the cgroup of job 6006 under uid_1006"; do
  n=$(grep -cF "$want" "$T/tierd.log" || true)
  [ "$n" = 1 ] || fail "tierd.log has '$want' $n times, want once"
done
ok "the ignored SLURM_JOB_IDs and the uid_1006 cgroup are logged once each"

stop_tierd
ok "clean shutdown"
echo "PASS"
