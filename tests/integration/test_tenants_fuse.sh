#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_tenants_fuse.sh - per-tenant attribution of FUSE reads on a REAL mount over a POSIX backend
# (run by CTest, label fuse; needs root, /dev/fuse and a writable cgroup v2 hierarchy).
#
# Five readers, each reading its own file of a known, distinct size exactly once, whole:
#   alice      uid 1001 (setpriv), matched by [tenant alice] uid = 1001, class inference
#   bob        uid 1002 (setpriv), matched by [tenant bob] uid = 1002, class training
#   slurm-4242 root, moved into a cgroup v2 .../slurmstepd.scope/job_4242/step_0 the test creates:
#              no rule matches, so tierd creates the implicit tenant (class training)
#   job-5151   root, in .../slurmstepd.scope/job_5151/step_0, registered before the read with
#              POST /v1/tenants {"name": "job-5151", "class": "checkpoint", "slurm_job": "5151"}
#   slurm-777  root, SLURM_JOB_ID=777 in its environment and the test's own cgroup (Slurm with
#              proctrack/linuxproc): the implicit tenant from /proc/<pid>/environ
# Asserts: each reader got the backend's bytes; in GET /metrics (Unix socket)
# tierd_op_bytes_total{op="read"} summed over tiers is exactly the file size for each tenant and
# carries only the tenant's configured class, and tierd_sched_bytes_total (backend calls at the
# scheduling point: each block fetched once, by a read in the tenant's class or a prefetch in
# background) summed over classes is exactly the file size too; no other tenant (default
# included) has read or backend bytes, so nothing was attributed to the wrong tenant (with the
# read handle's binding broken to tenant 0 the test fails: checked 2026-12-01);
# `tierctl top --once --json` lists all five with ops; GET /v1/tenants shows slurm-4242 and
# slurm-777 as implicit (class training) and job-5151 as registered, class checkpoint, with its
# slurm_job rule, and no slurm-5151.
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
CG_4242=$CG_BASE/slurmstepd.scope/job_4242/step_0
CG_5151=$CG_BASE/slurmstepd.scope/job_5151/step_0
mkdir -p "$CG_4242" "$CG_5151" || fail "cannot create cgroups under $CG_ROOT"

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
)
declare -A CLASS=([alice]=inference [bob]=training [slurm-4242]=training [job-5151]=checkpoint
  [slurm-777]=training)
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
  tierd_conf_section "tenant alice" "uid = 1001" "class = inference"
  tierd_conf_section "tenant bob" "uid = 1002" "class = training"
} >"$CONF"

start_tierd
ok "mounted"

# ---- the reads ------------------------------------------------------------------------------
# job 5151's name is registered before any of its processes is seen
code=$(curl -sS -o "$T/post.json" -w '%{http_code}' --unix-socket "$SOCK" \
  -d '{"name": "job-5151", "class": "checkpoint", "slurm_job": "5151"}' http://tierd/v1/tenants)
[ "$code" = 201 ] || fail "POST /v1/tenants job-5151: HTTP $code $(cat "$T/post.json")"
ok "job 5151 registered by POST /v1/tenants"

# Each reader is the FUSE caller itself (cat); cmp reads the backend file, not the mount. The
# five run at once, so their requests interleave on tierd's FUSE threads.
as_uid() { setpriv --reuid="$1" --regid="$1" --clear-groups -- cat "$2"; }
# the shell moves itself into the cgroup, then becomes cat: the same pid and start time, and its
# first request to the mount is made from inside the job's cgroup
in_cgroup() { # CGROUP FILE
  bash -c 'echo $$ >"$1/cgroup.procs" && exec cat "$2"' in_cgroup "$1" "$2"
}
with_job_env() { env SLURM_JOB_ID=777 cat "$1"; }
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
reader slurm-777 with_job_env "$MNT/ds/slurm-777.bin" &
RPID[slurm-777]=$!
for t in "${!RPID[@]}"; do
  wait "${RPID[$t]}" || true
  [ -e "$T/ok.$t" ] || fail "the reader of tenant $t read wrong bytes (or failed)"
done
for cg in "$CG_4242" "$CG_5151"; do
  [ -z "$(cat "$cg/cgroup.procs")" ] || fail "processes left in $cg"
done
ok "five readers (uids 1001, 1002; cgroups job_4242, job_5151; SLURM_JOB_ID=777) read their files at once"

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
for name in ("slurm-4242", "slurm-777"):
    assert name in ts, f"no implicit tenant {name} in {sorted(ts)}"
    assert ts[name]["implicit"] is True and ts[name]["class"] == "training", ts[name]
    assert ts[name]["rules"] == [], ts[name]
j5 = ts.get("job-5151")
assert j5 and j5["implicit"] is False and j5["class"] == "checkpoint", j5
assert [r.get("slurm_job") for r in j5["rules"]] == ["5151"], j5
assert "slurm-5151" not in ts, "job 5151 got an implicit tenant besides its registered one"
for name, uid, cls in (("alice", 1001, "inference"), ("bob", 1002, "training")):
    assert ts[name]["class"] == cls and [r.get("uid") for r in ts[name]["rules"]] == [uid], ts[name]
EOF
ok "GET /v1/tenants: slurm-4242 and slurm-777 implicit, job-5151 registered with its rule"

stop_tierd
ok "clean shutdown"
echo "PASS"
