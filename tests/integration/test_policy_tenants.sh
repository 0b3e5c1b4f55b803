#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_policy_tenants.sh - the policies' tenant filter and demote levels (docs/POLICIES.md) on a
# REAL mount over a POSIX backend, with readers that are real processes of other uids (CTest
# label fuse; needs root and setpriv).
#
# Three files of a read-cache namespace, each read once, whole, through the mount:
#   ds/a.bin  by uid 1001, tenant alice ([tenant alice] uid = 1001)
#   ds/b.bin  by uid 1002, tenant bob   ([tenant bob] uid = 1002)
#   ds/scratch/s.bin by root (tenant default)
# with RAM and a disk level (block_size 1M: 3, 4 and 2 blocks) and two rules:
#   [policy bob-to-disk]  tenant = bob  level = ram   action = demote
#   [policy scratch-off-disk] prefix = scratch/  level = disk  action = demote
# Checks: once the 9 blocks are in both levels, `tierctl policy plan` plans exactly b.bin for
# bob-to-disk and s.bin for scratch-off-disk (alice's file by no rule); a forced pass then leaves
# RAM with a's and s's blocks (5) and the disk level with a's and b's (7), and each action says
# what it did; bob reads b.bin again, right, from the disk level with no backend fetch. A rule for
# a tenant the registry does not have (carol) takes nothing. No sleeps: waits poll a condition.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup policy_tenants
[ "$(id -u)" = 0 ] || fail "needs root (readers as other uids)"
for tool in setpriv python3 curl; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done

chmod 0711 "$T"
mkdir -p "$DATA/ds/scratch" "$MNT" "$T/cache"
chmod 0755 "$DATA" "$DATA/ds" "$DATA/ds/scratch" "$MNT"
head -c $((2 * 1048576 + 123)) /dev/urandom >"$DATA/ds/a.bin"
head -c $((3 * 1048576 + 4567)) /dev/urandom >"$DATA/ds/b.bin"
head -c $((1048576 + 5)) /dev/urandom >"$DATA/ds/scratch/s.bin"
chmod 0644 "$DATA"/ds/*.bin "$DATA"/ds/scratch/s.bin
{
  tierd_conf_section daemon "policy_interval = 1h"
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M" "disk_dir = $T/cache" \
    "disk_size = 256M" "disk_min_free = 0"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022"
  tierd_conf_api "$SOCK"
  tierd_conf_section "tenant alice" "uid = 1001" "class = inference"
  tierd_conf_section "tenant bob" "uid = 1002" "class = training"
  tierd_conf_section "policy bob-to-disk" "namespace = /ds" "tenant = bob" "level = ram" \
    "action = demote"
  tierd_conf_section "policy scratch-off-disk" "namespace = /ds" "prefix = scratch/" \
    "level = disk" "action = demote"
  tierd_conf_section "policy carol-out" "namespace = /ds" "tenant = carol" "action = demote"
} >"$CONF"
start_tierd

as_uid() { setpriv --reuid="$1" --regid="$1" --clear-groups -- cat "$2"; }
as_uid 1001 "$MNT/ds/a.bin" | cmp -s "$DATA/ds/a.bin" - || fail "alice read a.bin wrong"
as_uid 1002 "$MNT/ds/b.bin" | cmp -s "$DATA/ds/b.bin" - || fail "bob read b.bin wrong"
cmp -s "$MNT/ds/scratch/s.bin" "$DATA/ds/scratch/s.bin" || fail "root read s.bin wrong"
ok "alice (uid 1001), bob (uid 1002) and root read their files through the mount"

export MNT SOCK TIERCTL DATA
python3 - <<'PY' || fail "tenant filter and levels"
import json, os, subprocess, sys, time
MNT, SOCK, TIERCTL, DATA = (os.environ[k] for k in ("MNT", "SOCK", "TIERCTL", "DATA"))
def fail(msg):
    print("FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)
def ctl_json(*args):
    r = subprocess.run([TIERCTL, "-s", SOCK, *args, "--json"], capture_output=True, text=True)
    if r.returncode:
        fail(f"tierctl {' '.join(args)}: exit {r.returncode}: {r.stdout}{r.stderr}")
    return json.loads(r.stdout)
def cache():
    return ctl_json("status")["cache"]
def poll(cond, secs, what):
    deadline = time.monotonic() + secs
    while not cond():
        if time.monotonic() > deadline:
            fail(f"after {secs} s: {what}: {cache()}")
        time.sleep(0.05)

# the write-throughs to the disk level may still be queued
poll(lambda: cache()["ram"]["blocks"] == 9 and cache()["disk"]["blocks"] == 9, 30,
     "the 9 blocks of the three files in RAM and on disk")
plan = ctl_json("policy", "plan")
got = sorted((a["policy"], a["path"]) for a in plan["actions"])
want = [("bob-to-disk", "/ds/b.bin"), ("scratch-off-disk", "/ds/scratch/s.bin")]
if got != want:
    fail(f"the plan is {got}, want {want} (alice's a.bin by no rule, carol has no files)")
print("ok: the plan takes bob's file out of RAM and the scratch file off the disk, nothing else")

fetches = cache()["fetches"]
run = ctl_json("policy", "run")
acts = {(a["policy"], a["path"]): a for a in run["actions"]}
if sorted(acts) != want or any(a["result"] != "done" for a in acts.values()):
    fail(f"the pass did {run['actions']}, want {want} done")
if "moved from RAM to disk" not in acts[want[0]].get("detail", ""):
    fail(f"bob-to-disk's action says {acts[want[0]]}")
if "dropped from disk" not in acts[want[1]].get("detail", ""):
    fail(f"scratch-off-disk's action says {acts[want[1]]}")
c = cache()
if c["ram"]["blocks"] != 5 or c["disk"]["blocks"] != 7:
    fail(f"after the pass RAM holds {c['ram']['blocks']} blocks (want 5: a 3, s 2) and the disk "
         f"{c['disk']['blocks']} (want 7: a 3, b 4)")
print("ok: RAM keeps a's and s's blocks, the disk level a's and b's")

disk_hits = c["disk"]["hits"]
with open("/proc/sys/vm/drop_caches", "w") as f:  # the kernel's page cache would answer instead
    f.write("1")
r = subprocess.run(["setpriv", "--reuid=1002", "--regid=1002", "--clear-groups", "--",
                    "cat", f"{MNT}/ds/b.bin"], capture_output=True, check=True)
if r.stdout != open(f"{DATA}/ds/b.bin", "rb").read():
    fail("bob's second read of b.bin differs from the backend")
c = cache()
if c["fetches"] != fetches or c["disk"]["hits"] < disk_hits + 4:
    fail(f"the second read fetched {c['fetches'] - fetches} blocks from the backend and hit the "
         f"disk level {c['disk']['hits'] - disk_hits} times (want 0 and >= 4)")
status = ctl_json("policy", "status")
rules = {x["name"]: x for x in status["rules"]}
if rules["bob-to-disk"].get("tenant") != "bob" or rules["bob-to-disk"].get("level") != "ram":
    fail(f"status shows bob-to-disk as {rules['bob-to-disk']}")
if rules["carol-out"]["done"] or rules["carol-out"]["failed"]:
    fail(f"carol-out acted: {rules['carol-out']}")
print("ok: bob reads b.bin again from the disk level, no backend fetch; status names tenant and level")
PY
ok "tenant filter and demote levels"
stop_tierd
echo PASS
