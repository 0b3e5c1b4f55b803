#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""soak.py - the soak run behind `make soak` (scripts/soak.sh starts Ceph and calls this).

tierd runs on a real FUSE mount over a real Ceph RGW for SOAK_SECONDS while three loads run through
the mount, tierd is SIGKILLed and restarted every SOAK_KILL_EVERY seconds of its age and RGW is
stopped for SOAK_RGW_DOWN seconds every SOAK_RGW_EVERY seconds of the run:

  * tierbench (training + inference, `run --no-checkpoint --phases together`) over a read-cache
    namespace /ds whose dataset `tierbench gen` wrote into a write-back namespace /dsw on the same
    bucket prefix first; restarted whenever it exits;
  * a verifying reader: random whole-file and ranged reads of the dataset, compared with a local
    copy made by the same `tierbench gen` (its bytes are a pure function of seed and file number);
  * a checkpoint writer: files of a few sizes (some above part_size, so multipart runs) written,
    fsync'd and closed in a write-back namespace /ck; each one whose write+fsync+close returned 0
    is recorded with its SHA-256.

Outage windows: from each SIGKILL until the mount answers again, and from each RGW stop until
`ceph.sh start-rgw` returns, each followed by SOAK_GRACE seconds. A read error whose operation
overlaps a window is expected; any other is a failure, and a wrong byte is a failure anywhere.
At the end (RGW up, tierd running) `tierctl wait /ck`, then every acknowledged checkpoint is
fetched straight from RGW (curl --aws-sigv4) and compared. tierd's RSS, descriptors and threads
are sampled from /proc every SOAK_SAMPLE_EVERY seconds and just before each SIGKILL; of the
samples taken in the second half of a lifetime (the same ages in every lifetime) over the last 45
minutes (or the last 75 % of a shorter run), the median of the last third may exceed the median
of the first third by less than 5 % (descriptors and threads: or by at most 2, see flat_pass).
Exit 0 only if all three hold.

A short read whose bytes are right (the kernel's way of reporting an error part-way through a
read) is a read error; a byte that differs, or a whole-file read that ends early, is corruption.

No sleep is used as synchronisation: every wait polls a condition with a deadline; sleeps only
pace the loads and hold RGW down.
"""
import datetime
import hashlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

E = os.environ


def env_int(name, default):
    v = E.get(name, "")
    return int(v) if v else default


SRC = E["SOAK_SRC"]
W = E["SOAK_WORK"]
CEPH = E["SOAK_CEPH_DIR"]
BUILD = E.get("SOAK_BUILD", os.path.join(SRC, "build"))
RESULTS = E["SOAK_RESULTS"]
SECONDS = env_int("SOAK_SECONDS", 3600)
KILL_EVERY = env_int("SOAK_KILL_EVERY", max(20, SECONDS * 4 // 60))
RGW_EVERY = env_int("SOAK_RGW_EVERY", max(30, SECONDS * 7 // 60))
RGW_DOWN = env_int("SOAK_RGW_DOWN", 20)
GRACE = env_int("SOAK_GRACE", 15)
SAMPLE_EVERY = env_int("SOAK_SAMPLE_EVERY", max(2, min(15, KILL_EVERY // 6)))
TB_DURATION = env_int("SOAK_TB_DURATION", 30)
FLAT_LIMIT = 0.05
COUNT_SLACK = 2

TIERD = os.path.join(BUILD, "src/daemon/tierd")
TIERCTL = os.path.join(BUILD, "src/cli/tierctl")
TB = os.path.join(BUILD, "src/tierbench/tierbench")
CEPHSH = os.path.join(SRC, "scripts/ceph.sh")
MNT = os.path.join(W, "mnt")
SOCK = os.path.join(W, "api.sock")
CONF = os.path.join(W, "tierd.conf")
LOG = os.path.join(W, "tierd.log")
REF = os.path.join(W, "ref")  # local copy of the dataset (same tierbench gen)
GEN_ARGS = ["--files", E.get("SOAK_FILES", "600"), "--size", E.get("SOAK_SIZE", "lognormal:192K,0.5"),
            "--seed", "42"]
PART = 5 * 1048576
# checkpoint sizes (weights): single PUTs and 2- and 3-part multipart uploads
CK_SIZES = [(65536 + 3, 3), (1048576 + 17, 3), (PART + 1048576 + 5, 2), (2 * PART + 1048576 + 99, 1)]
CK_EVERY = env_int("SOAK_CK_EVERY", 10)

T0 = time.time()
stop_load = threading.Event()
lock = threading.Lock()
windows = []  # (start, end, kind, note)
read_errors = []  # dicts: t0, t1, src, what, err
write_errors = []
acks = []  # (rel path, size, sha256, t)
samples = []  # dicts: t, life, age, rss_kb, fds, threads, tag
tb_runs = []  # dicts: t0, t1, rc, errors, ops
counters = {"reads": 0, "read_bytes": 0, "ck_files_tried": 0}
read_ok_times = []  # (t0, t1) of every good verifying read
max_read_s = [0.0]
lifetimes = []  # (start time of the mount answering, pid)
state = {"proc": None, "life_t": 0.0, "tb_proc": None}


def now():
    return time.time()


def ts(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def log(msg):
    print(f"[{ts(now())} +{now() - T0:7.1f}s] {msg}", flush=True)


def wait_for(secs, cond, step=0.05):
    end = now() + secs
    while not cond():
        if now() >= end:
            return False
        time.sleep(step)
    return True


def mounted():
    try:
        os.statvfs(MNT)
        return os.stat(MNT).st_ino == 1
    except OSError:
        return False


def in_proc_mounts():
    with open("/proc/mounts") as f:
        return any(line.split()[1] == MNT for line in f if len(line.split()) > 2)


def load_s3_env():
    env = {}
    with open(os.path.join(CEPH, "env")) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            env[k] = v
    return env


S3 = load_s3_env()
BUCKET = f"soak-{int(T0)}"


def s3_curl(args, **kw):
    return subprocess.run(["curl", "-sSf", "--max-time", "120", "--aws-sigv4",
                           f"aws:amz:{S3['S3_REGION']}:s3", "--user",
                           f"{S3['S3_ACCESS_KEY']}:{S3['S3_SECRET_KEY']}",
                           "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"] + args, **kw)


def write_conf():
    with open(CONF, "w") as f:
        f.write(f"""# written by scripts/soak.py
[daemon]
backend_timeout = 10s
[cache]
ram_size = 16M
block_size = 1M
disk_dir = {W}/cache
disk_size = 48M
[backend rgw]
max_connections = 8
type = s3
endpoint = {S3['S3_ENDPOINT']}
region = {S3['S3_REGION']}
bucket = {BUCKET}
access_key = {S3['S3_ACCESS_KEY']}
secret_key = {S3['S3_SECRET_KEY']}
[namespace /ds]
backend = rgw
prefix = data
mode = read-cache
[namespace /dsw]
backend = rgw
prefix = data
mode = write-back
[namespace /ck]
backend = rgw
prefix = ckpt
mode = write-back
[writeback]
spool_dir = {W}/spool
part_size = 5M
parts_parallel = 2
[mount]
path = {MNT}
attr_ttl = 1s
entry_ttl = 1s
threads = 6
[api]
socket = {SOCK}
""")


# ---- tierd lifetimes ---------------------------------------------------------------------------

def start_tierd():
    with open(LOG, "a") as lf:
        lf.write(f"==== soak: starting tierd (lifetime {len(lifetimes)}) at {ts(now())} ====\n")
        lf.flush()
        p = subprocess.Popen([TIERD, "-c", CONF, "-f"], stdin=subprocess.DEVNULL,
                             stdout=lf, stderr=lf)
    with open(os.path.join(W, "tierd.pid"), "w") as f:
        f.write(f"{p.pid}\n")
    state["proc"] = p
    ok = wait_for(60, lambda: p.poll() is None and mounted() and os.path.exists(SOCK))
    if not ok:
        raise SoakAbort(f"tierd (pid {p.pid}) did not mount within 60 s (exit {p.poll()}); see {LOG}")
    state["life_t"] = now()
    lifetimes.append((state["life_t"], p.pid))
    log(f"tierd pid {p.pid} mounted (lifetime {len(lifetimes) - 1})")


def detach_stale():
    if in_proc_mounts():
        r = subprocess.run(["fusermount3", "-u", "-z", MNT], capture_output=True, text=True)
        if r.returncode != 0:
            subprocess.run(["umount", "-l", MNT], capture_output=True)
    if not wait_for(30, lambda: not in_proc_mounts()):
        raise SoakAbort(f"the stale mount at {MNT} could not be detached")


TCP_STATES = {"01": "est", "06": "timewait", "08": "closewait", "0A": "listen", "07": "close"}


def socket_map(pid):
    """inode -> 'tcp-STATE' / 'unix' for the sockets of pid's network namespace."""
    m = {}
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                next(f)
                for line in f:
                    c = line.split()
                    m[c[9]] = "tcp-" + TCP_STATES.get(c[3], c[3])
        except OSError:
            pass
    try:
        with open(f"/proc/{pid}/net/unix") as f:
            next(f)
            for line in f:
                c = line.split()
                if len(c) > 6:
                    m[c[6]] = "unix"
    except OSError:
        pass
    return m


def fd_kind(target, socks):
    if target.startswith("socket:["):
        return socks.get(target[8:-1], "sock")
    for prefix, kind in ((os.path.join(W, "spool"), "spool"), (os.path.join(W, "cache"), "cache"),
                         ("socket:", "sock"), ("pipe:", "pipe"), ("anon_inode:", "anon"),
                         ("/dev/fuse", "fuse"), ("/dev/", "dev")):
        if target.startswith(prefix):
            return kind
    return "other"


def sample(tag):
    p = state["proc"]
    if p is None or p.poll() is not None:
        return
    try:
        st = {}
        with open(f"/proc/{p.pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                st[k] = v.strip()
        kinds = {}
        socks = socket_map(p.pid)
        for fd in os.listdir(f"/proc/{p.pid}/fd"):
            try:
                k = fd_kind(os.readlink(f"/proc/{p.pid}/fd/{fd}"), socks)
            except OSError:
                continue
            kinds[k] = kinds.get(k, 0) + 1
        fds = sum(kinds.values())
    except OSError:
        return
    samples.append({"t": now(), "life": len(lifetimes) - 1, "age": now() - state["life_t"],
                    "rss_kb": int(st["VmRSS"].split()[0]), "fds": fds,
                    "threads": int(st["Threads"]), "tag": tag,
                    "fdk": " ".join(f"{k}:{v}" for k, v in sorted(kinds.items()))})


def do_kill():
    sample("prekill")
    p = state["proc"]
    t0 = now()
    log(f"SIGKILL tierd pid {p.pid} (age {t0 - state['life_t']:.0f}s)")
    p.kill()
    p.wait()
    detach_stale()
    start_tierd()
    t1 = now()
    windows.append((t0, t1 + GRACE, "kill", f"pid {p.pid}, back after {t1 - t0:.1f}s"))


def ceph(verb):
    r = subprocess.run([CEPHSH, verb, CEPH], capture_output=True, text=True)
    if r.returncode != 0:
        raise SoakAbort(f"ceph.sh {verb} failed: {r.stderr.strip()[-500:]}")


def idle_until(t_until):
    """Tick (sampling) until t_until; sleeps pace the run, nothing waits on them."""
    while now() < t_until:
        if now() - state.get("last_sample", 0) >= SAMPLE_EVERY:
            state["last_sample"] = now()
            sample("periodic")
        time.sleep(min(0.5, max(0.0, t_until - now())))


def do_rgw():
    t0 = now()
    log(f"stopping RGW for {RGW_DOWN}s")
    state["rgw_down"] = True
    ceph("stop-rgw")
    idle_until(now() + RGW_DOWN)
    ceph("start-rgw")
    state["rgw_down"] = False
    t1 = now()
    windows.append((t0, t1 + GRACE, "rgw", f"down {t1 - t0:.1f}s"))
    log(f"RGW back after {t1 - t0:.1f}s")


# ---- loads -------------------------------------------------------------------------------------

def load_ref():
    ref = {}
    for root, _, files in os.walk(REF):
        for name in files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, REF)
            with open(path, "rb") as f:
                data = f.read()
            ref[rel] = (len(data), hashlib.sha256(data).hexdigest())
    return ref


def reader(ref, seed):
    rng = random.Random(seed)
    names = sorted(n for n in ref if n.startswith("samples/"))
    while not stop_load.is_set():
        rel = rng.choice(names)
        size, digest = ref[rel]
        path = os.path.join(MNT, "ds/tb", rel)
        whole = rng.random() < 0.5 or size < 8192
        t0 = now()
        try:
            if whole:
                with open(path, "rb") as f:
                    data = f.read()
                good = len(data) == size and hashlib.sha256(data).hexdigest() == digest
                what = "whole" if len(data) == size else f"whole read ended at {len(data)} of {size}"
            else:
                off = rng.randrange(0, size - 1)
                ln = rng.randrange(1, min(size - off, 262144) + 1)
                fd = os.open(path, os.O_RDONLY)
                try:
                    data = os.pread(fd, ln, off)
                finally:
                    os.close(fd)
                with open(os.path.join(REF, rel), "rb") as f:
                    f.seek(off)
                    want = f.read(ln)
                good = data == want
                what = f"pread {ln}@{off}"
                if not good and len(data) < ln and want.startswith(data):
                    # a short read: the bytes that came are right, the rest failed (an error
                    # part-way through a read is reported this way by the kernel)
                    raise OSError(0, f"short read: {len(data)} of {ln} bytes")
            with lock:
                counters["reads"] += 1
                counters["read_bytes"] += len(data)
                t1 = now()
                max_read_s[0] = max(max_read_s[0], t1 - t0)
                if good:
                    read_ok_times.append((t0, t1))
                if not good:
                    read_errors.append({"t0": t0, "t1": now(), "src": "reader", "what": f"{rel} {what}",
                                        "err": "WRONG BYTES", "corrupt": True})
                    log(f"reader: WRONG BYTES in {rel} ({what})")
        except OSError as e:
            with lock:
                read_errors.append({"t0": t0, "t1": now(), "src": "reader", "what": rel,
                                    "err": os.strerror(e.errno) if e.errno else e.strerror})
        time.sleep(0.1)


def ck_writer(seed):
    rng = random.Random(seed)
    population = [s for s, w in CK_SIZES for _ in range(w)]
    step = 0
    ackf = open(os.path.join(W, "acks.jsonl"), "a")
    while not stop_load.is_set():
        step += 1
        d = f"step-{step:05d}"
        t0 = now()
        pre = f"{d}/"
        try:
            os.mkdir(os.path.join(MNT, "ck", d))
        except OSError as e:
            with lock:
                write_errors.append({"t0": t0, "t1": now(), "what": f"mkdir {d}", "err": os.strerror(e.errno)})
            pre = f"{d}-"  # still checkpoint: into the namespace's root
        for i in range(2):
            size = rng.choice(population)
            data = os.urandom(size)
            rel = f"{pre}f{i}.bin"
            path = os.path.join(MNT, "ck", rel)
            t0 = now()
            counters["ck_files_tried"] += 1
            fd = -1
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                off = 0
                while off < size:
                    off += os.write(fd, data[off:off + 1048576])
                os.fsync(fd)
                fd2, fd = fd, -1
                os.close(fd2)  # the seal: its result decides whether the checkpoint is acknowledged
                rec = {"rel": rel, "size": size, "sha256": hashlib.sha256(data).hexdigest(), "t": now()}
                with lock:
                    acks.append(rec)
                ackf.write(json.dumps(rec) + "\n")
                ackf.flush()
            except OSError as e:
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                with lock:
                    write_errors.append({"t0": t0, "t1": now(), "what": rel, "err": os.strerror(e.errno)})
        stop_load.wait(CK_EVERY)
    ackf.close()


def tierbench_loop():
    n = 0
    os.makedirs(os.path.join(W, "tb"), exist_ok=True)
    while not stop_load.is_set():
        n += 1
        jf = os.path.join(W, "tb", f"run-{n:04d}.json")
        lf = os.path.join(W, "tb", f"run-{n:04d}.log")
        t0 = now()
        with open(lf, "w") as out:
            p = subprocess.Popen([TB, "run", os.path.join(MNT, "ds/tb"), "--no-checkpoint",
                                  "--phases", "together", "--duration", f"{TB_DURATION}s",
                                  "--train-threads", "1", "--batch", "4", "--compute", "10ms",
                                  "--rate", "20", "--infer-threads", "4", "--no-progress",
                                  "--json", jf], stdin=subprocess.DEVNULL, stdout=out, stderr=out)
            with open(os.path.join(W, "tierbench.pid"), "w") as f:
                f.write(f"{p.pid}\n")
            state["tb_proc"] = p
            rc = p.wait()
        t1 = now()
        errors, ops = None, 0
        try:
            with open(jf) as f:
                j = json.load(f)
            errors = 0
            for ph in j.get("phases", []):
                for cls in ("training", "inference"):
                    c = ph.get(cls) or {}
                    errors += int(c.get("errors", 0))
                    ops += int(c.get("samples", c.get("completed", 0)) or 0)
        except (OSError, ValueError):
            pass
        stopped = stop_load.is_set() and rc < 0
        tb_runs.append({"t0": t0, "t1": t1, "rc": rc, "errors": errors, "ops": ops, "n": n,
                        "stopped": stopped})
        if rc == 0:
            os.unlink(lf)  # keep the logs of failed runs only
        else:
            stop_load.wait(1)


class SoakAbort(Exception):
    pass


def guarded(fn, *args):
    """A load thread that dies of a bug in this script stops the soak (never a silent end)."""
    def run():
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - reported and fatal
            import traceback
            traceback.print_exc()
            state["thread_error"] = f"{fn.__name__}: {e!r}"
    return threading.Thread(target=run, name=fn.__name__, daemon=True)


def on_term(signum, frame):
    raise SoakAbort(f"signal {signum}")


# ---- analysis ----------------------------------------------------------------------------------

def overlaps(t0, t1):
    for w0, w1, kind, _ in windows:
        if t0 <= w1 and t1 >= w0:
            return kind
    return None


def flatness(t_end):
    span = min(2700, 0.75 * SECONDS)
    warm = KILL_EVERY / 2  # the second half of each lifetime: caches full, pools warm
    sel = [s for s in samples if s["t"] >= t_end - span and s["age"] >= warm]
    res = {}
    if len(sel) < 3:
        return None, sel
    k = len(sel) // 3
    first, last = sel[:k], sel[-k:]
    for m in ("rss_kb", "fds", "threads"):
        a = statistics.median(s[m] for s in first)
        b = statistics.median(s[m] for s in last)
        g = (b - a) / a if a else float("inf")
        res[m] = (a, b, g)
    return res, sel


def flat_pass(metric, first, last, growth):
    """RSS: < 5 %. Descriptors and threads are a few dozen, so one idle connection or worker
    more is 3 %: they pass below 5 % or with at most COUNT_SLACK more."""
    if growth < FLAT_LIMIT:
        return True
    return metric != "rss_kb" and last - first <= COUNT_SLACK


def main():
    signal.signal(signal.SIGTERM, on_term)
    os.makedirs(MNT, exist_ok=True)
    ok = False
    lines = []
    try:
        r = s3_curl(["-X", "PUT", f"{S3['S3_ENDPOINT']}/{BUCKET}"], capture_output=True)
        if r.returncode != 0:
            raise SoakAbort(f"cannot create bucket {BUCKET}: {r.stderr!r}")
        write_conf()
        detach_stale()
        start_tierd()
        log("generating the dataset: locally (reference) and through /dsw")
        subprocess.run([TB, "gen", REF] + GEN_ARGS, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([TB, "gen", os.path.join(MNT, "dsw/tb")] + GEN_ARGS, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([TIERCTL, "-s", SOCK, "wait", "/dsw", "--timeout", "600"], check=True)
        ref = load_ref()
        listed = set(os.listdir(os.path.join(MNT, "ds/tb/samples")))
        want = {n[len("samples/"):] for n in ref if n.startswith("samples/")}
        if listed != want:
            raise SoakAbort(f"/ds lists {len(listed)} samples, the reference has {len(want)}")
        log(f"dataset: {len(want)} files, {sum(s for s, _ in ref.values()) / 1048576:.1f} MiB")

        global T_LOAD
        T_LOAD = now()
        threads = [guarded(reader, ref, 1), guarded(reader, ref, 2), guarded(ck_writer, 3),
                   guarded(tierbench_loop)]
        for t in threads:
            t.start()
        log(f"load started: {SECONDS}s, SIGKILL every {KILL_EVERY}s of age, RGW down {RGW_DOWN}s "
            f"every {RGW_EVERY}s, grace {GRACE}s, sample every {SAMPLE_EVERY}s")
        t_end = T_LOAD + SECONDS
        next_rgw = T_LOAD + RGW_EVERY
        state["last_sample"] = 0
        while now() < t_end:
            if state.get("thread_error"):
                raise SoakAbort(f"a load thread failed: {state['thread_error']}")
            if state["proc"].poll() is not None:
                raise SoakAbort(f"tierd exited by itself with {state['proc'].returncode}; see {LOG}")
            if now() - state["life_t"] >= KILL_EVERY and t_end - now() > 5:
                do_kill()
            elif now() >= next_rgw and t_end - now() > RGW_DOWN + 5:
                do_rgw()
                next_rgw += RGW_EVERY
            idle_until(min(t_end, now() + 0.5))
        t_load_end = now()
        sample("end")
        log("stopping the load")
        stop_load.set()
        p = state["tb_proc"]
        if p is not None and p.poll() is None:
            p.terminate()
        for t in threads:
            t.join(timeout=120)
            if t.is_alive():
                raise SoakAbort(f"a load thread ({t.name}) did not stop within 120 s (hung I/O?)")
        if state.get("thread_error"):
            raise SoakAbort(f"a load thread failed: {state['thread_error']}")

        # ---- checkpoint verification ----
        log(f"tierctl wait /ck ({len(acks)} acknowledged checkpoint files)")
        t0 = now()
        r = subprocess.run([TIERCTL, "-s", SOCK, "wait", "/ck", "--timeout", "900"],
                           capture_output=True, text=True)
        wait_s = now() - t0
        log(f"tierctl wait: exit {r.returncode}: {(r.stdout + r.stderr).strip()}")
        verified, bad = 0, []
        tmp = os.path.join(W, "get.tmp")
        for a in acks:
            g = s3_curl(["-o", tmp, f"{S3['S3_ENDPOINT']}/{BUCKET}/ckpt/{a['rel']}"],
                        capture_output=True, text=True)
            if g.returncode != 0:
                bad.append(f"{a['rel']}: GET failed: {g.stderr.strip()}")
                continue
            with open(tmp, "rb") as f:
                data = f.read()
            if len(data) == a["size"] and hashlib.sha256(data).hexdigest() == a["sha256"]:
                verified += 1
            else:
                bad.append(f"{a['rel']}: backend object differs ({len(data)} bytes, want {a['size']})")
        ck_ok = r.returncode == 0 and verified == len(acks) and len(acks) > 0

        # ---- reader errors ----
        inside, outside = [], []
        for e in read_errors:
            k = None if e.get("corrupt") else overlaps(e["t0"], e["t1"])
            (inside if k else outside).append((e, k))
        tb_fail_in, tb_fail_out = [], []
        for run in tb_runs:
            if run["stopped"] or (run["rc"] == 0 and not run["errors"]):
                continue
            k = overlaps(run["t0"], run["t1"])
            (tb_fail_in if k else tb_fail_out).append((run, k))
        rd_ok = not outside and not tb_fail_out

        # ---- flatness ----
        flat, sel = flatness(t_load_end)
        flat_ok = flat is not None and all(flat_pass(m, *v) for m, v in flat.items())

        # ---- final stop of tierd ----
        sample("final")
        p = state["proc"]
        p.send_signal(signal.SIGTERM)
        try:
            term_rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            term_rc = "hung (SIGKILLed after 60 s)"
        state["proc"] = None

        ok = ck_ok and rd_ok and flat_ok
        kills = sum(1 for w in windows if w[2] == "kill")
        rgws = sum(1 for w in windows if w[2] == "rgw")
        tb_ops = sum(r["ops"] for r in tb_runs)
        P = lambda b: "PASS" if b else "FAIL"  # noqa: E731
        lines += [f"# tierd soak run {datetime.datetime.fromtimestamp(T0, datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
                  "",
                  f"`SOAK_SECONDS={SECONDS} SOAK_KILL_EVERY={KILL_EVERY} SOAK_RGW_EVERY={RGW_EVERY} "
                  f"SOAK_RGW_DOWN={RGW_DOWN} SOAK_GRACE={GRACE} make soak`; commit "
                  f"{E.get('SOAK_COMMIT', '?')}; bucket {BUCKET}; work dir {W}",
                  "",
                  "| figure | value |", "|---|---|",
                  f"| result | **{P(ok)}** (checkpoints {P(ck_ok)}, reads {P(rd_ok)}, flat {P(flat_ok)}) |",
                  f"| runtime (load) | {t_load_end - T_LOAD:.0f} s |",
                  f"| tierd SIGKILLs / restarts | {kills} (lifetimes: {len(lifetimes)}) |",
                  f"| RGW restarts | {rgws} |",
                  f"| checkpoint files acknowledged / verified in RGW | {len(acks)} / {verified} "
                  f"(tried {counters['ck_files_tried']}; final `tierctl wait` exit {r.returncode} after {wait_s:.0f} s) |",
                  f"| checkpoint write errors (inside / outside windows) | "
                  f"{sum(1 for e in write_errors if overlaps(e['t0'], e['t1']))} / "
                  f"{sum(1 for e in write_errors if not overlaps(e['t0'], e['t1']))} |",
                  f"| verifying reads done (of them inside windows) | {counters['reads']} "
                  f"({sum(1 for a, b in read_ok_times if overlaps(a, b))}), "
                  f"{counters['read_bytes'] / 1048576:.0f} MiB, slowest {max_read_s[0]:.1f} s |",
                  f"| tierbench runs / their ops | {len(tb_runs)} / {tb_ops} |",
                  f"| reader errors inside / outside windows | {len(inside)} / {len(outside)} |",
                  f"| failed tierbench runs inside / outside windows | {len(tb_fail_in)} / {len(tb_fail_out)} |"]
        if flat:
            for m, unit in (("rss_kb", "KiB"), ("fds", ""), ("threads", "")):
                a, b, g = flat[m]
                lim = "limit +5 %" if m == "rss_kb" else f"limit +5 % or +{COUNT_SLACK}"
                lines.append(f"| {'RSS' if m == 'rss_kb' else m} first → last third "
                             f"(median of {len(sel) // 3} of {len(sel)} samples) | {a:g} → {b:g} {unit} "
                             f"({g * 100:+.1f} %, {lim}: {P(flat_pass(m, a, b, g))}) |")
        else:
            lines.append(f"| RSS/fd/threads | too few samples ({len(sel)}) |")
        lines.append(f"| tierd exit after the final SIGTERM | {term_rc} |")
        lines += ["", "## Outage windows (UTC, grace included)", ""]
        for w0, w1, kind, note in windows:
            lines.append(f"- {ts(w0)} - {ts(w1)} {kind}: {note}")
        if bad:
            lines += ["", "## Checkpoints NOT verified", ""] + [f"- {b}" for b in bad[:50]]
        lines += ["", "## Reader errors", ""]
        for e, k in inside + outside:
            lines.append(f"- {ts(e['t0'])}-{ts(e['t1'])} {e['src']} {e['what']}: {e['err']} "
                         f"[{'inside ' + k if k else 'OUTSIDE'}]")
        for run, k in tb_fail_in + tb_fail_out:
            lines.append(f"- {ts(run['t0'])}-{ts(run['t1'])} tierbench run {run['n']}: exit {run['rc']}, "
                         f"{run['errors']} I/O errors [{'inside ' + k if k else 'OUTSIDE'}] "
                         f"(log {W}/tb/run-{run['n']:04d}.log)")
        if write_errors:
            lines += ["", "## Checkpoint write errors (not acknowledged, not a failure inside a window)", ""]
            for e in write_errors:
                k = overlaps(e["t0"], e["t1"])
                lines.append(f"- {ts(e['t0'])}-{ts(e['t1'])} {e['what']}: {e['err']} "
                             f"[{'inside ' + k if k else 'OUTSIDE'}]")
        lines += ["", "## tierd samples (just before each SIGKILL, and the end)", "",
                  "| UTC | lifetime | age s | RSS KiB | fds | threads | fds by kind |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for s in samples:
            if s["tag"] != "periodic":
                lines.append(f"| {ts(s['t'])} | {s['life']} | {s['age']:.0f} | {s['rss_kb']} | "
                             f"{s['fds']} | {s['threads']} | {s['fdk']} |")
        lines += ["", f"Series used for flatness (every {SAMPLE_EVERY} s, age ≥ {KILL_EVERY / 2:.0f} s, last "
                  f"{min(2700, 0.75 * SECONDS):.0f} s of the load): t s / RSS KiB / fds / threads", "", "```"]
        for s in sel:
            lines.append(f"{s['t'] - T_LOAD:7.0f} {s['rss_kb']:8d} {s['fds']:4d} {s['threads']:4d}  "
                         f"(lifetime {s['life']}, age {s['age']:.0f}; {s['fdk']})")
        lines.append("```")
        with open(os.path.join(W, "samples.json"), "w") as f:
            json.dump(samples, f)
    except (SoakAbort, KeyboardInterrupt, subprocess.CalledProcessError) as e:
        log(f"SOAK ABORTED: {e}")
        lines += [f"# tierd soak run {datetime.datetime.fromtimestamp(T0, datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
                  "", f"**ABORTED** after {now() - T0:.0f} s: {e}", "", f"work dir {W}, tierd log {LOG}"]
        ok = False
    finally:
        stop_load.set()
        p = state["tb_proc"]
        if p is not None and p.poll() is None:
            p.kill()
        p = state["proc"]
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
        try:
            detach_stale()
        except SoakAbort as e:
            log(str(e))
    text = "\n".join(lines) + "\n"
    print("\n" + text, flush=True)
    with open(RESULTS, "w") as f:
        f.write(text)
    log(f"results: {RESULTS}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
