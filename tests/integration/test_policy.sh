#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_policy.sh KIND - lifecycle policies (docs/POLICIES.md) on a REAL mount over a REAL backend:
# KIND posix (directories) or rgw (two buckets of the rgw fixture's Ceph RGW). CTest labels fuse
# (and rgw).
#
# A checkpoint series of 20 steps (run1/step_N/: model.bin, plus a 12 MiB optim.bin at step 2:
# a multipart copy) is written through a write-back namespace with two rules:
#   [policy ckpt-hot]     match = step_([0-9]+)/  keep_last = 3  action = demote
#   [policy ckpt-archive] match = step_([0-9]+)/  keep_last = 3  action = copy  target = archive:runs/
# and [daemon] policy_interval = 1s. Checks:
#   - after each save, within 60 s and without a forced pass, exactly min(N, 3) steps are hot on
#     the node (have a local copy in the burst buffer, `tierctl checkpoints`);
#   - at the end all 20 steps are durable in the backend and the 17 older ones are in the
#     archive, byte-identical (SHA-256 against what was written), and nothing else is there;
#   - `tierctl policy plan` plans nothing more; `tierctl policy status` counts the demotions and
#     copies and no failure; a demoted step still reads right through the mount;
#   - /metrics counts the actions (tierd_policy_actions_total);
#   - idle = 3s on a read-cache namespace: of two cached files, the one read every 0.2 s stays,
#     the other is demoted once unread for 3 s;
#   - after a restart a forced pass copies nothing again (the copy journal); the journal drops
#     the rows of a rule that is gone and of files deleted since (steps 1 and 2: 3 rows).
# Waits poll with deadlines; no sleeps.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
KIND=${1:?usage: test_policy.sh posix|rgw}
if [ "$KIND" = rgw ]; then
  tierd_test_rgw_setup "policy_$KIND"
  BUCKET=policy-$(date +%s)-$RANDOM
  ARCH=$BUCKET-arch
  for b in "$BUCKET" "$ARCH"; do
    tierd_s3 -X PUT "$S3_ENDPOINT/$b" >/dev/null || fail "cannot create bucket $b"
  done
else
  tierd_test_setup "policy_$KIND"
  mkdir -p "$DATA" "$T/archive"
fi
[ "$(id -u)" = 0 ] || fail "needs root (FUSE)"
mkdir -p "$MNT" "$T/spool"
{
  if [ "$KIND" = rgw ]; then
    tierd_conf_rgw warm "$BUCKET"
    tierd_conf_rgw archive "$ARCH"
  else
    tierd_conf_posix warm "$DATA"
    tierd_conf_posix archive "$T/archive"
  fi
  tierd_conf_ns /ck warm "prefix = ck" "mode = write-back"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_section writeback "spool_dir = $T/spool" "upload_holdoff = 0" "part_size = 5M"
  tierd_conf_section daemon "policy_interval = 1s"
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M"
  tierd_conf_mount "$MNT" "attr_ttl = 100ms" "entry_ttl = 100ms"
  tierd_conf_api "$SOCK"
  tierd_conf_section "policy ckpt-hot" "namespace = /ck" "match = step_([0-9]+)/" \
    "keep_last = 3" "action = demote"
  tierd_conf_section "policy ckpt-archive" "namespace = /ck" "match = step_([0-9]+)/" \
    "keep_last = 3" "action = copy" "target = archive:runs/"
  tierd_conf_section "policy cold-ds" "namespace = /ds" "idle = 3s" "action = demote"
} >"$CONF"
# two dataset files for the idle rule
head -c $((1 << 20)) /dev/urandom >"$T/a.bin"
head -c $((1 << 20)) /dev/urandom >"$T/b.bin"
for f in a b; do
  if [ "$KIND" = rgw ]; then
    tierd_s3 -T "$T/$f.bin" "$S3_ENDPOINT/$BUCKET/ds/$f.bin" >/dev/null || fail "PUT ds/$f.bin"
  else
    mkdir -p "$DATA/ds" && cp "$T/$f.bin" "$DATA/ds/$f.bin"
  fi
done
start_tierd

export KIND T MNT SOCK TIERCTL DATA BUCKET="${BUCKET:-}" ARCH="${ARCH:-}"
python3 - <<'PY' || fail "the checkpoint series"
import hashlib, json, os, re, subprocess, sys, time, urllib.parse
import xml.etree.ElementTree as ET

KIND, T, MNT, SOCK, TIERCTL = (os.environ[k] for k in ("KIND", "T", "MNT", "SOCK", "TIERCTL"))
def fail(msg):
    print("FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)
def ctl(*args):
    r = subprocess.run([TIERCTL, "-s", SOCK, *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr
def ctl_json(*args):
    rc, out = ctl(*args, "--json")
    if rc:
        fail(f"tierctl {' '.join(args)}: exit {rc}: {out}")
    return json.loads(out)
def poll(cond, secs, what):
    deadline = time.monotonic() + secs
    while not cond():
        if time.monotonic() > deadline:
            fail(f"after {secs} s: {what}")
        time.sleep(0.05)

# the backends, read directly (not through tierd)
if KIND == "rgw":
    def s3(*args):
        return subprocess.run(["bash", "-c", '. "$1"; tierd_rgw_env "$TIER_CEPH_DIR" >/dev/null; '
                               'shift; tierd_s3 "$@"', "s3",
                               os.environ["TIER_SRC"] + "/scripts/lib/tierd.sh", *args],
                              capture_output=True, check=True).stdout
    EP = subprocess.run(["bash", "-c", '. "$1"; tierd_rgw_env "$TIER_CEPH_DIR" >/dev/null; '
                         'echo "$S3_ENDPOINT"', "ep",
                         os.environ["TIER_SRC"] + "/scripts/lib/tierd.sh"],
                        capture_output=True, text=True, check=True).stdout.strip()
    def keys(bucket, prefix):
        out, token = [], None
        while True:
            q = f"{EP}/{bucket}?list-type=2&prefix={urllib.parse.quote(prefix, safe='')}"
            if token:
                q += "&continuation-token=" + urllib.parse.quote(token, safe="")
            root = ET.fromstring(s3(q))
            ns = {"s": root.tag.split("}")[0][1:]} if root.tag.startswith("{") else {"s": ""}
            p = "s:" if ns["s"] else ""
            out += [c.find(p + "Key", ns).text for c in root.findall(p + "Contents", ns)]
            t = root.find(p + "NextContinuationToken", ns)
            if t is None:
                return sorted(out)
            token = t.text
    def obj(bucket, key):
        return s3(f"{EP}/{bucket}/{key}")
    PRIMARY, ARCHIVE = os.environ["BUCKET"], os.environ["ARCH"]
else:
    def keys(root, prefix):
        out = []
        for d, _, fs in os.walk(root):
            for f in fs:
                k = os.path.relpath(os.path.join(d, f), root)
                if k.startswith(prefix):
                    out.append(k)
        return sorted(out)
    def obj(root, key):
        return open(os.path.join(root, key), "rb").read()
    PRIMARY, ARCHIVE = os.environ["DATA"], T + "/archive"

ref = {}  # relative key -> sha256 of what was written
def save(step):
    d = f"{MNT}/ck/run1/step_{step}"
    os.makedirs(d, exist_ok=True)
    files = {"model.bin": 65536 + step * 9973}
    if step == 2:
        files["optim.bin"] = 12 << 20  # a multipart copy (part size 8 MiB)
    for name, size in files.items():
        data = os.urandom(size)
        with open(f"{d}/{name}", "wb") as f:
            f.write(data)
        ref[f"run1/step_{step}/{name}"] = hashlib.sha256(data).hexdigest()

def hot_steps():
    st = ctl_json("checkpoints", "/ck")
    steps = set()
    for f in st.get("files", []):
        if f.get("state") in ("open", "sealed", "uploading", "uploaded"):
            m = re.search(r"step_(\d+)/", f.get("path", ""))
            if m:
                steps.add(int(m.group(1)))
    return steps

t0 = time.monotonic()
worst = 0.0
for step in range(1, 21):
    save(step)
    t = time.monotonic()
    want = min(step, 3)
    poll(lambda: len(hot_steps()) == want and max(hot_steps()) == step, 60,
         f"step {step}: hot steps {sorted(hot_steps())}, want the newest {want}")
    worst = max(worst, time.monotonic() - t)
print(f"ok: 20 saves, exactly min(N, 3) steps hot after each, within {worst:.2f} s at worst")

rc, out = ctl("wait", "/ck", "--timeout", "120")
if rc:
    fail("tierctl wait /ck: " + out)
want_arch = sorted("runs/" + k for k in ref if int(re.search(r"step_(\d+)/", k).group(1)) <= 17)
poll(lambda: keys(ARCHIVE, "") == want_arch, 60,
     f"the archive holds {keys(ARCHIVE, '')[:5]}..., want the {len(want_arch)} files of steps 1-17")
prim = keys(PRIMARY, "ck/")
if prim != sorted("ck/" + k for k in ref):
    fail(f"the primary backend holds {prim}, want every file of the 20 steps")
for k, h in ref.items():
    if hashlib.sha256(obj(PRIMARY, "ck/" + k)).hexdigest() != h:
        fail(f"{k} in the backend differs from what was written")
for k in want_arch:
    if hashlib.sha256(obj(ARCHIVE, k)).hexdigest() != ref[k[len("runs/"):]]:
        fail(f"the archive's {k} differs from what was written")
print(f"ok: all {len(ref)} files of 20 steps durable and identical in the backend; "
      f"{len(want_arch)} files of steps 1-17 identical in the archive, and nothing else")

plan = ctl_json("policy", "plan")
if plan["actions"]:
    fail(f"a plan after convergence still plans {plan['actions'][:3]}")
status = ctl_json("policy", "status")
rules = {r["name"]: r for r in status["rules"]}
demoted = sum(1 for k in ref if int(re.search(r"step_(\d+)/", k).group(1)) <= 17)
if rules["ckpt-hot"]["done"] < demoted or rules["ckpt-hot"]["failed"]:
    fail(f"ckpt-hot counted {rules['ckpt-hot']}, want >= {demoted} done, 0 failed")
if rules["ckpt-archive"]["done"] != len(want_arch) or rules["ckpt-archive"]["failed"]:
    fail(f"ckpt-archive counted {rules['ckpt-archive']}, want {len(want_arch)} done, 0 failed")
builtin = rules.get("writeback-retention")
if not builtin or not builtin["builtin"] or builtin["done"]:
    fail(f"the built-in retention should be there and leave the steps to ckpt-hot: {builtin}")
with open(f"{MNT}/ck/run1/step_2/optim.bin", "rb") as f:
    if hashlib.sha256(f.read()).hexdigest() != ref["run1/step_2/optim.bin"]:
        fail("the demoted step 2 reads wrong through the mount")
print("ok: plan empty after convergence; status counts; a demoted step reads right")
PY
ok "checkpoint series: keep_last = 3 hot, older steps archived, all durable"
# every action is counted in the telemetry
m=$(api /metrics) || fail "GET /metrics"
# (a here-string, not echo | grep -q: with pipefail, grep's early exit can kill echo with SIGPIPE
# on a large /metrics and fail the check although the line is there)
grep -qx 'tierd_policy_actions_total{policy="ckpt-archive",namespace="/ck",action="copy",result="done"} 18' <<<"$m" ||
  fail "/metrics lacks the 18 copies: $(echo "$m" | grep tierd_policy_ | head -8)"
grep -qx 'tierd_policy_actions_total{policy="ckpt-hot",namespace="/ck",action="demote",result="failed"} 0' <<<"$m" ||
  fail "/metrics lacks ckpt-hot's failures (0): $(echo "$m" | grep tierd_policy_ | head -8)"
ok "/metrics counts the policies' actions"

# idle = 3s: a file read all along stays hot, the other is demoted once unread for 3 s
export MNT
python3 - <<'PY' || fail "the idle rule"
import json, os, subprocess, sys, time
MNT, SOCK, TIERCTL = os.environ["MNT"], os.environ["SOCK"], os.environ["TIERCTL"]
def demoted():
    out = subprocess.run([TIERCTL, "-s", SOCK, "policy", "status", "--json"], check=True,
                         capture_output=True, text=True).stdout
    return {e["path"] for e in json.loads(out)["recent"] if e["policy"] == "cold-ds"}
for f in ("a", "b"):
    open(f"{MNT}/ds/{f}.bin", "rb").read()
t0 = time.monotonic()
while "/ds/b.bin" not in demoted():
    if time.monotonic() - t0 > 60:
        sys.exit(f"FAIL: /ds/b.bin was not demoted within 60 s: {demoted()}")
    open(f"{MNT}/ds/a.bin", "rb").read()  # a's reader goes on
    time.sleep(0.2)  # the reader's pace, not a synchronisation
took = time.monotonic() - t0
if "/ds/a.bin" in demoted():
    sys.exit("FAIL: /ds/a.bin was demoted although it was read every 0.2 s")
print(f"ok: the unread file demoted after {took:.1f} s (idle = 3s), the one being read kept")
PY

# after a restart, a forced pass copies nothing again (the copy journal) and fails nothing; a
# row of a rule that is gone (here: written by hand while tierd is down) is dropped
jrows() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1])
print(c.execute("SELECT count(*) FROM copies WHERE rule = ?", (sys.argv[2],)).fetchone()[0])' "$T/spool/policy.db" "$1"; }
stop_tierd
[ "$(jrows ckpt-archive)" = 18 ] || fail "the copy journal holds $(jrows ckpt-archive) rows of ckpt-archive, want 18"
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1])
c.execute("INSERT INTO copies VALUES (?, ?, ?, ?, ?, ?)", ("gone-rule", "x/y", "e", "archive:x/y", 1, 1)); c.commit()' "$T/spool/policy.db"
start_tierd
out=$("$TIERCTL" -s "$SOCK" policy run) || fail "policy run after the restart: $out"
echo "$out" | grep -q "run: .* 0 done, .* 0 failed" || fail "a pass after the restart did something: $out"
[ "$(jrows gone-rule)" = 0 ] || fail "the copy journal kept the row of rule gone-rule, which no longer exists"
ok "after a restart a pass copies nothing again; the row of a removed rule is dropped"
# the journal forgets files that are gone: steps 1 and 2 (3 archived files) deleted through the
# mount; once the backend no longer lists them (the deletes are uploads' work), a pass drops them
rm "$MNT/ck/run1/step_1/model.bin" "$MNT/ck/run1/step_2/model.bin" "$MNT/ck/run1/step_2/optim.bin" ||
  fail "rm of steps 1 and 2"
pruned() { "$TIERCTL" -s "$SOCK" policy run >/dev/null && [ "$(jrows ckpt-archive)" = 15 ]; }
wait_for 60 pruned || fail "the copy journal holds $(jrows ckpt-archive) rows of ckpt-archive after steps 1 and 2 went, want 15"
dropped=$(sed -n 's/.*policy ckpt-archive: copy journal: \([0-9]*\) row(s) of files no longer there dropped.*/\1/p' "$T/tierd.log" | awk '{s += $1} END {print s + 0}')
[ "$dropped" = 3 ] || fail "the log says $dropped rows of ckpt-archive dropped, want 3"
ok "the copy journal dropped the 3 rows of the deleted steps (15 left)"
stop_tierd

# the copy journal carries its format: one from a newer tierd is refused at start, clearly
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("PRAGMA user_version = 9"); c.commit()' "$T/spool/policy.db"
rc=0
"$TIERD" -c "$CONF" -f 2>"$T/newer.log" || rc=$?
[ "$rc" = 1 ] && grep -q "copy journal .*policy.db has format 9, which this tierd (format 1) cannot read (a newer tierd's)" "$T/newer.log" ||
  fail "a copy journal of a newer format: exit $rc: $(tail -3 "$T/newer.log")"
ok "a copy journal of a newer format is refused at start, with the fix"
echo PASS
