#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_fuse_wb_crash.sh - the burst buffer's crash test through a REAL FUSE mount (issue 5; CTest
# label fuse). POSIX backend.
#
# A writer process creates files of random sizes (0 .. 13 MiB; part_size is 5 MiB, so about half
# are multipart) in a write-back namespace, writes, fsyncs and closes each, and only then records
# its SHA-256 in a manifest (an "intent" line with the SHA-256 is written before it starts). The
# driver SIGKILLs tierd TIER_CRASH_CYCLES times (default 100, about 15 s; raise it for long runs) and restarts
# it (tierd clears the dead mount itself); most kills are aimed: they are sent the moment the
# daemon's log shows an upload start without its end, i.e. while an upload is in flight.
# At the end: POST /v1/wait on the namespace (tierctl wait), then
#   - every manifest file is byte-identical (SHA-256) in the backend and through the mount;
#   - every object in the backend has the SHA-256 of its intent (nothing half-written appears);
#   - at least one kill landed while an upload was in flight (from the killed run's log:
#     "wb: upload start file N" without "wb: uploaded file N"), else FAIL.
# No sleeps as synchronisation: waits poll a condition with a deadline.
set -euo pipefail

CYCLES=${TIER_CRASH_CYCLES:-100}
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup fuse_wb_crash
# the tierd runs of the driver below (lib.sh's trap kills only $PID)
extra_cleanup() { kill_listed "$T/pids"; }
mkdir -p "$DATA/ck" "$MNT"
# upload_holdoff = 0: uploads run while the writer writes, so that kills land mid-upload (the
# default hold-off would defer them to the writer's pauses)
{
  tierd_conf_section daemon # gpu_sampling = off (lib.sh)
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ck warm "prefix = ck" "mode = write-back"
  tierd_conf_section writeback "spool_dir = $T/spool" "part_size = 5M" "upload_threads = 2" \
    "parts_parallel = 2" "retention_keep = 1" "upload_holdoff = 0"
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M"
  tierd_conf_mount "$MNT" "attr_ttl = 100ms" "entry_ttl = 100ms"
  tierd_conf_api "$SOCK"
} >"$CONF"

# not exec: the EXIT trap (lib.sh: unmount, kill the runs in $T/pids, remove $T) runs after the
# driver, whatever its end
TIER_SRC_INTEGRATION=$(cd "$(dirname "$0")" && pwd) python3 - "$TIERD" "$T" "$CYCLES" <<'PY'
import hashlib, json, os, random, re, signal, socket, subprocess, sys, time

tierd, T, cycles = sys.argv[1], sys.argv[2], int(sys.argv[3])
MNT, DATA, SOCK = T + "/mnt", T + "/data/ck", T + "/api.sock"
CK = MNT + "/ck"
seed = int(os.environ.get("TIER_CRASH_SEED", str(int.from_bytes(os.urandom(4), "little"))))
rng = random.Random(seed)
print(f"seed {seed} (TIER_CRASH_SEED), {cycles} kill cycles", flush=True)

sys.path.insert(0, os.environ["TIER_SRC_INTEGRATION"])
from crashlib import Runs
runs = Runs(tierd, T, MNT)
fail, wait_for, mounted, start = runs.fail, runs.wait_for, runs.mounted, runs.start

# ---- the writer: a child process, so that a kill of tierd only fails its current file ----
WRITER = r'''
import errno, hashlib, os, random, sys, time
mnt, T, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
man = open(T + "/manifest", "a"); intent = open(T + "/intent", "a")
root = os.path.dirname(mnt)
parent = os.getppid()
i = 0
acked = 0
while not os.path.exists(T + "/stop") and os.getppid() == parent:
    # the driver hands out a budget of files per kill cycle (bounds the disk used)
    try:
        budget = int(open(T + "/budget").read() or "0")
    except (FileNotFoundError, ValueError):
        budget = 0
    if acked >= budget:
        time.sleep(0.002)
        continue
    i += 1
    name = "f%05d" % i
    size = rng.choice([0, 1, 4096, rng.randrange(1, 5 << 20), rng.randrange(5 << 20, 11 << 20),
                       rng.randrange(5 << 20, 11 << 20)])
    data = rng.randbytes(size)
    sha = hashlib.sha256(data).hexdigest()
    intent.write(f"{name} {sha} {size}\n"); intent.flush(); os.fsync(intent.fileno())
    try:
        fd = os.open(f"{mnt}/{name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for off in range(0, size, 1 << 20):
                chunk = data[off:off + (1 << 20)]
                if os.write(fd, chunk) != len(chunk):
                    raise OSError(errno.EIO, "short write")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        # the daemon died under us: not acknowledged, not recorded; wait for the new mount
        if e.errno not in (errno.ENOTCONN, errno.ECONNABORTED, errno.EIO, errno.ENOENT):
            print(f"writer: {name}: unexpected {e}", file=sys.stderr, flush=True)
            sys.exit(1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.statvfs(root)
                if os.stat(root).st_ino == 1:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        continue
    man.write(f"{name} {sha} {size}\n"); man.flush(); os.fsync(man.fileno())
    acked += 1
'''

p = start()
w = subprocess.Popen([sys.executable, "-c", WRITER, CK, T, str(seed)])
runs.pids.write(f"{w.pid}\n"); runs.pids.flush()

def manifest_lines():
    try:
        return open(T + "/manifest").read().splitlines()
    except FileNotFoundError:
        return []

def inflight(logpath):
    txt = open(logpath).read()
    started = set(re.findall(r"wb: upload start file (\d+)", txt))
    done = set(re.findall(r"wb: uploaded file (\d+)", txt))
    return started - done

t0 = time.monotonic()
kills_inflight = 0
for c in range(cycles):
    logpath = runs.log()
    base = len(manifest_lines())
    with open(T + "/budget.tmp", "w") as f:
        f.write(str(base + 3))
    os.rename(T + "/budget.tmp", T + "/budget")
    # progress since the restart: the writer got at least one file acknowledged
    wait_for(lambda: len(manifest_lines()) > base or w.poll() is not None, 60,
             "writer progress (cycle %d)" % c)
    if w.poll() is not None:
        fail("the writer died (see above)")
    if rng.random() < 0.8:
        # aim: kill the moment an upload is in flight (poll the log), up to 3 s
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not inflight(logpath):
            time.sleep(0.002)
    else:
        time.sleep(rng.random() * 0.2)  # randomisation of the kill point, not synchronisation
    p.send_signal(signal.SIGKILL)
    p.wait()
    if inflight(logpath):
        kills_inflight += 1
    p = start()
elapsed = time.monotonic() - t0

open(T + "/stop", "w").close()
if w.wait(timeout=120) != 0:
    fail("writer exited with an error")

# the barrier a training script calls: POST /v1/wait
s = socket.socket(socket.AF_UNIX)
s.settimeout(180)
s.connect(SOCK)
body = json.dumps({"path": "/ck", "timeout_s": 150}).encode()
s.sendall(b"POST /v1/wait HTTP/1.1\r\nHost: tierd\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
resp = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    resp += chunk
if b" 200 " not in resp.split(b"\r\n", 1)[0]:
    fail("POST /v1/wait: " + resp.decode(errors="replace")[:500])

def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()

man = [l.split() for l in manifest_lines()]
for name, sha, size in man:
    b = os.path.join(DATA, name)
    if not os.path.exists(b) or sha_file(b) != sha:
        fail(f"acknowledged file {name} ({size} bytes) is missing or differs in the backend")
    if sha_file(os.path.join(CK, name)) != sha:
        fail(f"acknowledged file {name} differs through the mount")
intent = {l.split()[0]: l.split()[1] for l in open(T + "/intent").read().splitlines()}
# the POSIX backend's own staging files (".tier-tmp.*" of a put cut by the kill, ".tier-mpu")
# are reserved names, never listed as objects
objs = [f for f in os.listdir(DATA) if not f.startswith(".tier-")]
for f in objs:
    if f not in intent:
        fail(f"unexpected object {f} in the backend")
    if sha_file(os.path.join(DATA, f)) != intent[f]:
        fail(f"object {f} in the backend is not the complete file (half-written upload)")
multipart = sum(1 for _, _, size in man if int(size) > (5 << 20))
print(f"ok: {cycles} SIGKILL cycles in {elapsed:.1f} s, {kills_inflight} landed with an upload "
      f"in flight; {len(man)} acknowledged files ({multipart} multipart) byte-identical in the "
      f"backend and through the mount; {len(objs)} backend objects, none partial", flush=True)
if kills_inflight == 0:
    fail("no kill landed while an upload was in flight")
p.send_signal(signal.SIGTERM)
if p.wait(timeout=60) != 0:
    fail("tierd exited with an error after SIGTERM")
print("PASS", flush=True)
PY
