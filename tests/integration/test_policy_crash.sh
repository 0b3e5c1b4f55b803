#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_policy_crash.sh - lifecycle policies under SIGKILL (docs/POLICIES.md, "Crash safety"):
# TIER_POLICY_CYCLES kill cycles (default 50) of tierd in the middle of demotions and copies,
# through a REAL FUSE mount over POSIX backends. CTest label fuse.
#
# Rules: keep_last = 3 steps hot (demote) and every older step copied to an archive backend
# (copy, target = archive:runs/), a pass every second. Each cycle starts tierd, writes a new
# step (a 3-14 MiB model.bin: a multipart copy above 8 MiB, and a small meta.json) through the
# mount and, once both are closed, SIGKILLs tierd: most kills are aimed (the moment the log shows
# a copy started and not finished), the rest at a random point of the next 1.5 s. At the end a
# clean tierd converges (`tierctl wait`, `tierctl policy run` until nothing is left to do):
#   - every file written is byte-identical in the primary backend (SHA-256);
#   - the archive holds exactly the files of every step but the newest 3, byte-identical, and
#     nothing else; no multipart upload is left in it (a killed copy's upload is aborted when
#     the key is copied again; a kill inside the POSIX backend's create leaves only a temporary
#     directory, which is no upload and is swept when stale);
#   - exactly 3 steps keep a local copy;
#   - at least one kill landed with a copy in flight (from the killed runs' logs), else FAIL.
# No sleeps as synchronisation: waits poll a condition with a deadline.
set -euo pipefail

CYCLES=${TIER_POLICY_CYCLES:-50}
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup policy_crash
extra_cleanup() { kill_listed "$T/pids"; }
[ "$(id -u)" = 0 ] || fail "needs root (FUSE)"
mkdir -p "$DATA/ck" "$T/archive" "$MNT"
{
  tierd_conf_posix warm "$DATA"
  tierd_conf_posix archive "$T/archive"
  tierd_conf_ns /ck warm "prefix = ck" "mode = write-back"
  tierd_conf_section writeback "spool_dir = $T/spool" "upload_holdoff = 0" "part_size = 5M"
  tierd_conf_section daemon "policy_interval = 1s"
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M"
  tierd_conf_mount "$MNT" "attr_ttl = 100ms" "entry_ttl = 100ms"
  tierd_conf_api "$SOCK"
  tierd_conf_section "policy ckpt-hot" "namespace = /ck" "match = step_([0-9]+)/" \
    "keep_last = 3" "action = demote"
  tierd_conf_section "policy ckpt-archive" "namespace = /ck" "match = step_([0-9]+)/" \
    "keep_last = 3" "action = copy" "target = archive:runs/"
} >"$CONF"

# not exec: the EXIT trap (lib.sh: unmount, kill the runs in $T/pids, remove $T) runs after the
# driver, whatever its end
TIER_SRC_INTEGRATION=$(cd "$(dirname "$0")" && pwd) python3 - "$TIERD" "$TIERCTL" "$T" "$CYCLES" <<'PY'
import hashlib, json, os, random, re, signal, subprocess, sys, time

tierd, tierctl, T, cycles = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
MNT, DATA, ARCH, SOCK = T + "/mnt", T + "/data", T + "/archive", T + "/api.sock"
seed = int(os.environ.get("TIER_CRASH_SEED", str(int.from_bytes(os.urandom(4), "little"))))
rng = random.Random(seed)
print(f"seed {seed} (TIER_CRASH_SEED), {cycles} kill cycles", flush=True)

sys.path.insert(0, os.environ["TIER_SRC_INTEGRATION"])
from crashlib import Runs
runs = Runs(tierd, T, MNT)
fail, wait_for, start = runs.fail, runs.wait_for, runs.start

def copy_inflight(logpath):
    txt = open(logpath).read()
    started = re.findall(r"policy ckpt-archive: copy (\S+) to .* started", txt)
    done = set(re.findall(r"policy ckpt-archive: copy (\S+): to ", txt))
    return [s for s in started if s not in done]

ref = {}
t0 = time.monotonic()
kills_mid_copy = 0
p = start()
for step in range(1, cycles + 1):
    d = f"{MNT}/ck/run1/step_{step}"
    os.makedirs(d, exist_ok=True)
    for name, size in (("model.bin", rng.randrange(3 << 20, 14 << 20)),
                       ("meta.json", rng.randrange(10, 4000))):
        data = rng.randbytes(size)
        with open(f"{d}/{name}", "wb") as f:
            f.write(data)
        ref[f"run1/step_{step}/{name}"] = hashlib.sha256(data).hexdigest()
    logpath = runs.log()
    if rng.random() < 0.8:
        # aim: kill the moment a copy is in flight (poll the log), up to 3 s
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not copy_inflight(logpath):
            time.sleep(0.001)
    else:
        time.sleep(rng.random() * 1.5)  # randomisation of the kill point, not synchronisation
    p.send_signal(signal.SIGKILL)
    p.wait()
    if copy_inflight(logpath):
        kills_mid_copy += 1
    p = start()
elapsed = time.monotonic() - t0

def ctl(*args):
    r = subprocess.run([tierctl, "-s", SOCK, *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr

rc, out = ctl("wait", "/ck", "--timeout", "150")
if rc:
    fail("tierctl wait /ck: " + out)
def converged():
    rc, out = ctl("policy", "run", "--json")
    if rc:
        return False
    j = json.loads(out)
    return j["done"] == 0 and j["deferred"] == 0 and j["failed"] == 0
wait_for(converged, 120, "a pass with nothing left to do")

def visible(root, prefix):
    out = {}
    for dp, dirs, fs in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".tier-")]
        for f in fs:
            if f.startswith(".tier-"):
                continue  # the POSIX backend's temporary files: not objects
            k = os.path.relpath(os.path.join(dp, f), root)
            if k.startswith(prefix):
                out[k] = hashlib.sha256(open(os.path.join(dp, f), "rb").read()).hexdigest()
    return out

prim = visible(DATA, "ck/")
want = {"ck/" + k: h for k, h in ref.items()}
if prim != want:
    bad = sorted(set(prim.items()) ^ set(want.items()))[:4]
    fail(f"the primary backend differs from what was written: {bad}")
def step_of(k):
    return int(re.search(r"step_(\d+)/", k).group(1))
arch = visible(ARCH, "")
want_arch = {"runs/" + k: h for k, h in ref.items() if step_of(k) <= cycles - 3}
if arch != want_arch:
    extra = sorted(set(arch) - set(want_arch))[:4]
    missing = sorted(set(want_arch) - set(arch))[:4]
    wrong = sorted(k for k in arch if k in want_arch and arch[k] != want_arch[k])[:4]
    fail(f"the archive: extra {extra}, missing {missing}, wrong content {wrong}")
mpu = os.path.join(ARCH, ".tier-mpu")
# an upload is a directory named by its 32-hex-digit id; ".tier-tmp.*" ones are a kill in the
# middle of a create (never an upload: no key; the backend sweeps them when stale)
entries = os.listdir(mpu) if os.path.isdir(mpu) else []
left = [e for e in entries if re.fullmatch(r"[0-9a-f]{32}", e)]
if left:
    fail(f"{len(left)} multipart uploads left in the archive: {left[:3]}")
temps = len(entries) - len(left)
rc, out = ctl("checkpoints", "/ck", "--json")
hot = {step_of(f["path"]) for f in json.loads(out)["files"]
       if f["state"] in ("open", "sealed", "uploading", "uploaded")}
if hot != set(range(cycles - 2, cycles + 1)):
    fail(f"steps with a local copy: {sorted(hot)}, want the newest 3")
if kills_mid_copy == 0:
    fail("no kill landed while a copy was in flight: the test proved nothing")
p.send_signal(signal.SIGTERM)
if p.wait() != 0:
    fail("tierd exited with an error after SIGTERM")
print(f"ok: {cycles} SIGKILL cycles in {elapsed:.1f} s, {kills_mid_copy} with a copy in flight; "
      f"{len(ref)} files identical in the backend, {len(want_arch)} in the archive and nothing "
      f"else there, no multipart upload left ({temps} temporary create directories), "
      f"3 steps hot", flush=True)
print("PASS")
PY
