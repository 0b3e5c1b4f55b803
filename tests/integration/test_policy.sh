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
# posix only (the target is changed behind tierd's back with plain file writes):
#   - a format-1 journal left at format 0 by a killed first creation opens upgraded, and copies
#     journal again (those already on the target with the source's bytes as they are);
# never delete the only copy. Three namespaces of one backend, /datasets and /alias on the same
# keys, copy rules cpA (/datasets ds1/ -> be:arch/) and cpB (/ckpt ds1/) with an expire in each:
#   - cpB onto be:arch/ too is refused at start and at `tierctl reload` (FILE:LINE naming cpA),
#     and after the refused reload the old rules still run;
#   - a copy journal of format 1 opens (upgraded in place, its rows kept);
#   - copies replaced by as many other bytes (only the ETag differs) or deleted on the archive
#     make the expire skip: the sources stay, byte-identical; the skips are counted (status,
#     run, /metrics) and logged once per file; a deleted copy is made again and then its source
#     expires;
#   - the expire of /alias waits for cpA's copy of the same object and checks it;
#   - with cpA gone and cpB onto be:arch/, cpB never writes over f2's archived copy (its only
#     one): skipped, counted, logged once; bytes already on the target are journalled.
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
c.execute("INSERT INTO copies (rule, key, etag, target, size, done_ns, target_etag) VALUES (?, ?, ?, ?, ?, ?, ?)", ("gone-rule", "x/y", "e", "archive:x/y", 1, 1, "t")); c.commit()' "$T/spool/policy.db"
start_tierd
out=$("$TIERCTL" -s "$SOCK" policy run) || fail "policy run after the restart: $out"
grep -q "run: .* 0 done, .* 0 failed" <<<"$out" || fail "a pass after the restart did something: $out"
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
[ "$rc" = 1 ] && grep -q "copy journal .*policy.db has format 9, which this tierd (format 2) cannot read (a newer tierd's)" "$T/newer.log" ||
  fail "a copy journal of a newer format: exit $rc: $(tail -3 "$T/newer.log")"
ok "a copy journal of a newer format is refused at start, with the fix"
[ "$KIND" = posix ] || { echo PASS; exit 0; }

# a format-1 journal whose first creation was killed before its user_version was written: the
# old table at format 0. It opens upgraded (the column added), so copies journal again: the one
# row (no target ETag: this rule's) is copied over, the other 14 archived steps, on the target
# with no row (as after a kill between the write and the journal), hold the source's bytes and
# are journalled as they are; nothing fails
rm -f "$T/spool/policy.db" "$T/spool/policy.db-wal" "$T/spool/policy.db-shm"
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1])
c.execute("CREATE TABLE copies (rule TEXT NOT NULL, key TEXT NOT NULL, etag TEXT NOT NULL, target TEXT NOT NULL, size INTEGER NOT NULL, done_ns INTEGER NOT NULL, PRIMARY KEY (rule, key))")
c.execute("INSERT INTO copies VALUES (?, ?, ?, ?, ?, ?)", ("ckpt-archive", "ck/run1/step_3/model.bin", "e", "archive:runs/run1/step_3/model.bin", 1, 1))
c.commit()' "$T/spool/policy.db"
j0() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(*c.execute(sys.argv[2]).fetchone())' "$T/spool/policy.db" "$1"; }
s3line='policy ckpt-archive: copy /ck/run1/step_3/model.bin: to archive:runs/run1/step_3/model.bin$'
n3=$(grep -c "$s3line" "$T/tierd.log" || true)
start_tierd
# (the engine's own passes, one a second, may do it first: the journal is what counts)
journalled() {
  "$TIERCTL" -s "$SOCK" policy run ckpt-archive >/dev/null &&
    [ "$(j0 "SELECT count(*) FROM copies WHERE rule = 'ckpt-archive' AND target_etag IS NOT NULL AND etag != 'e'")" = 15 ]
}
wait_for 60 journalled ||
  fail "the format-0 journal: format $(j0 'PRAGMA user_version'), $(j0 "SELECT count(*) FROM copies WHERE target_etag IS NOT NULL") rows with a target ETag, want 15; $(grep -c 'policy ckpt-archive: copy .* failed' "$T/tierd.log") copies failed"
[ "$(j0 'PRAGMA user_version')" = 2 ] || fail "the format-0 journal is at format $(j0 'PRAGMA user_version'), want 2"
held=$(grep -c 'policy ckpt-archive: copy /ck/run1/step_[0-9]*/model.bin: to archive:runs/run1/step_[0-9]*/model.bin: the target already held these bytes, journalled as the copy$' "$T/tierd.log" || true)
[ "$held" = 14 ] && [ "$(grep -c "$s3line" "$T/tierd.log")" = $((n3 + 1)) ] ||
  fail "after the format-0 journal: $held copies found on the target (want 14), step_3 copied $(($(grep -c "$s3line" "$T/tierd.log") - n3)) times (want 1)"
st=$("$TIERCTL" -s "$SOCK" policy status --json)
python3 -c 'import json,sys; r={x["name"]: x for x in json.loads(sys.argv[1])["rules"]}
sys.exit(0 if r["ckpt-archive"]["failed"] == 0 and r["ckpt-archive"]["skipped"] == 0 else 1)' "$st" ||
  fail "copies failed or were skipped on the format-0 journal: $st"
stop_tierd
ok "a format-0 journal with the old table is upgraded; its copies journal again (14 found on the target with the source's bytes)"

# ---- never delete the only copy (posix: the archive is a directory we can change) ----
SD=$T/safe
BE=$SD/be
mkdir -p "$BE/datasets/ds1" "$BE/ckpt/ds1" "$SD/spool"
head -c 100000 /dev/urandom >"$SD/f1.orig"
head -c 50000 /dev/urandom >"$SD/f2.orig"
cp "$SD/f1.orig" "$BE/datasets/ds1/f1.bin"
cp "$SD/f2.orig" "$BE/datasets/ds1/f2.bin"
printf 'checkpoint-15b\n' >"$BE/ckpt/ds1/f1.bin"
CONF=$SD/tierd.conf
safe_conf() { # safe_conf TARGET_OF_cpB [late]: late has cpB and exB only
  tierd_conf_posix be "$BE"
  tierd_conf_ns /datasets be "prefix = datasets"
  tierd_conf_ns /ckpt be "prefix = ckpt"
  tierd_conf_ns /alias be "prefix = datasets" # the same keys as /datasets
  tierd_conf_section writeback "spool_dir = $SD/spool"
  tierd_conf_section daemon "policy_interval = 1h"
  tierd_conf_mount "$MNT" "attr_ttl = 100ms" "entry_ttl = 100ms"
  tierd_conf_api "$SOCK"
  if [ "${2:-}" != late ]; then
    tierd_conf_section "policy cpA" "namespace = /datasets" "prefix = ds1/" "action = copy" \
      "target = be:arch/"
    tierd_conf_section "policy exA" "namespace = /datasets" "prefix = ds1/" "action = expire" \
      "allow_delete = true"
  fi
  tierd_conf_section "policy cpB" "namespace = /ckpt" "prefix = ds1/" "action = copy" \
    "target = $1"
  tierd_conf_section "policy exB" "namespace = /ckpt" "prefix = ds1/" "action = expire" \
    "allow_delete = true"
  [ "${2:-}" = late ] ||
    tierd_conf_section "policy exC" "namespace = /alias" "prefix = ds1/" "action = expire" \
      "allow_delete = true"
}
# the review's case: both copy rules onto be:arch/; refused at start, at cpB's target line
safe_conf be:arch/ >"$CONF"
bad_line=$(grep -n '^target = be:arch/$' "$CONF" | sed -n '2s/:.*//p')
cpa_line=$(grep -n '^target = be:arch/$' "$CONF" | sed -n '1s/:.*//p')
rc=0
# (a bound: a tierd that accepted the rules would run on; the refusal is immediate)
timeout 60 "$TIERD" -c "$CONF" -f 2>"$SD/refused.log" || rc=$?
[ "$rc" = 2 ] && grep -qF "$CONF:$bad_line: [policy cpB] target = be:arch/ overlaps the target of [policy cpA] at line $cpa_line" "$SD/refused.log" ||
  fail "two copy rules onto be:arch/ at start: exit $rc: $(tail -3 "$SD/refused.log")"
[ -f "$BE/datasets/ds1/f1.bin" ] && [ ! -e "$BE/arch" ] || fail "the refused start touched the backend"
ok "two copy rules of two namespaces onto one target are refused at start ($CONF:$bad_line, naming cpA)"

# a copy journal of format 1 (no target ETag) opens: upgraded in place, its row kept
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1])
c.execute("CREATE TABLE copies (rule TEXT NOT NULL, key TEXT NOT NULL, etag TEXT NOT NULL, target TEXT NOT NULL, size INTEGER NOT NULL, done_ns INTEGER NOT NULL, PRIMARY KEY (rule, key))")
c.execute("INSERT INTO copies VALUES (?, ?, ?, ?, ?, ?)", ("cpA", "datasets/ds1/old.bin", "e", "be:arch/ds1/old.bin", 1, 1))
c.execute("PRAGMA user_version = 1"); c.commit()' "$SD/spool/policy.db"
safe_conf be:arch-ck/ >"$CONF"
start_tierd
jq1() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(*c.execute(sys.argv[2]).fetchone())' "$SD/spool/policy.db" "$1"; }
[ "$(jq1 'PRAGMA user_version')" = 2 ] && [ "$(jq1 'SELECT count(*) FROM copies WHERE target_etag IS NULL')" = 1 ] ||
  fail "the format-1 copy journal was not upgraded in place: format $(jq1 'PRAGMA user_version')"
ok "a copy journal of format 1 opens, upgraded to format 2 in place with its rows"

# reload with cpB onto be:arch/ again: refused with FILE:LINE, the old rules keep running
safe_conf be:arch/ >"$CONF"
rc=0
out=$("$TIERCTL" -s "$SOCK" reload 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -qF "$CONF:$bad_line: [policy cpB] target = be:arch/ overlaps the target of [policy cpA]" <<<"$out" ||
  fail "reload with two copy rules onto be:arch/: exit $rc: $out"
st=$("$TIERCTL" -s "$SOCK" policy status --json)
python3 -c 'import json,sys; r={x["name"]: x for x in json.loads(sys.argv[1])["rules"]}
sys.exit(0 if r["cpB"]["target"] == "be:arch-ck/" and set(r) == {"cpA", "exA", "cpB", "exB", "exC"} else 1)' "$st" ||
  fail "after the refused reload the rules are not the old ones: $st"
safe_conf be:arch-ck/ >"$CONF"
ok "reload with two copy rules onto one target is refused (FILE:LINE); the old rules stay"

# copy the two dataset files (cpA alone), then change one copy and delete the other behind
# tierd's back: the expire must keep both sources
out=$("$TIERCTL" -s "$SOCK" policy run cpA) || fail "policy run cpA: $out"
cmp -s "$BE/arch/ds1/f1.bin" "$SD/f1.orig" && cmp -s "$BE/arch/ds1/f2.bin" "$SD/f2.orig" ||
  fail "cpA did not copy both files: $out"
# f1's copy: as many other bytes, through a new file renamed over it with another mtime (the
# POSIX ETag is inode, size and mtime): only the ETag tells it from the copy made
head -c 100000 /dev/urandom >"$SD/f1.other"
cp "$SD/f1.other" "$BE/arch/ds1/.f1.new"
touch -d '2001-02-03 04:05:06' "$BE/arch/ds1/.f1.new"
mv "$BE/arch/ds1/.f1.new" "$BE/arch/ds1/f1.bin"
rm "$BE/arch/ds1/f2.bin"
# the second pass: f1 is skipped again (logged no more); f2's copy, gone, was forgotten at the
# first, so its expire now waits for the copy to be made again (deferred)
for i in 1 2; do
  out=$("$TIERCTL" -s "$SOCK" policy run exA --json) || fail "policy run exA ($i): $out"
  python3 -c 'import json,sys; i=int(sys.argv[2]); j=json.loads(sys.argv[1])
a={x["path"]: x for x in j["actions"]}
f1, f2 = a.get("/datasets/ds1/f1.bin", {}), a.get("/datasets/ds1/f2.bin", {})
ok = j["done"] == 0 and j["failed"] == 0 and f1.get("result") == "skipped" \
  and "its copy be:arch/ds1/f1.bin (policy cpA) is not the one made: 100000 bytes" in f1["detail"] \
  and "the copy journal has 100000 bytes" in f1["detail"]
if i == 1:
    ok = ok and j["skipped"] == 2 and f2.get("result") == "skipped" and "is gone" in f2["detail"]
else:
    ok = ok and j["skipped"] == 1 and j["deferred"] == 1 and not f2
sys.exit(0 if ok else 1)' "$out" "$i" || fail "policy run exA ($i) did not keep both sources: $out"
done
cmp -s "$BE/datasets/ds1/f1.bin" "$SD/f1.orig" && cmp -s "$BE/datasets/ds1/f2.bin" "$SD/f2.orig" ||
  fail "a source whose copy was changed or deleted is gone or changed"
st=$("$TIERCTL" -s "$SOCK" policy status --json)
python3 -c 'import json,sys; r={x["name"]: x for x in json.loads(sys.argv[1])["rules"]}
sys.exit(0 if r["exA"]["skipped"] == 3 and r["exA"]["done"] == 0 and r["exA"]["failed"] == 0 else 1)' "$st" ||
  fail "policy status does not count 3 skipped deletes of exA: $st"
"$TIERCTL" -s "$SOCK" policy status | grep -Eq '^exA +/datasets +expire +0 .* 3$' ||
  fail "tierctl policy status lacks exA's 3 skips: $("$TIERCTL" -s "$SOCK" policy status)"
m=$(api /metrics) || fail "GET /metrics"
grep -qx 'tierd_policy_actions_total{policy="exA",namespace="/datasets",action="expire",result="skipped"} 3' <<<"$m" ||
  fail "/metrics lacks exA's 3 skips: $(grep 'policy="exA"' <<<"$m")"
for f in f1 f2; do
  n=$(grep -c "policy exA: expire /datasets/ds1/$f.bin skipped, the source is kept" "$T/tierd.log" || true)
  [ "$n" = 1 ] || fail "the skip of $f was logged $n times in two passes, want once"
done
ok "a copy changed or deleted behind tierd's back: the expire keeps the source, counts (status, /metrics) and logs once per file"

# a full pass: the deleted copy is made again and its source then expires; the changed one
# stays kept (someone else's bytes are never overwritten); cpB/exB, on their own target, work
out=$("$TIERCTL" -s "$SOCK" policy run) || fail "policy run: $out"
cmp -s "$BE/arch/ds1/f2.bin" "$SD/f2.orig" && [ ! -e "$BE/datasets/ds1/f2.bin" ] ||
  fail "the deleted copy of f2 was not made again before its source expired: $out"
cmp -s "$BE/datasets/ds1/f1.bin" "$SD/f1.orig" && cmp -s "$BE/arch/ds1/f1.bin" "$SD/f1.other" ||
  fail "f1 (its copy changed) was deleted or its copy overwritten: $out"
[ "$(cat "$BE/arch-ck/ds1/f1.bin")" = checkpoint-15b ] && [ ! -e "$BE/ckpt/ds1/f1.bin" ] ||
  fail "cpB and exB on their own target did not copy then expire: $out"
ok "a deleted copy is made again and only then its source expires; a changed copy keeps its source"

# /alias maps onto the keys of /datasets: its expire exC waits for cpA (of /datasets) over the
# same objects and checks cpA's copies, as exA does
head -c 30000 /dev/urandom >"$SD/f3.orig"
cp "$SD/f3.orig" "$BE/datasets/ds1/f3.bin"
out=$("$TIERCTL" -s "$SOCK" policy run exC --json) || fail "policy run exC: $out"
python3 -c 'import json,sys; j=json.loads(sys.argv[1])
a={x["path"]: x for x in j["actions"]}
f1=a.get("/alias/ds1/f1.bin", {})
sys.exit(0 if j["done"] == 0 and j["failed"] == 0 and j["deferred"] == 1 and j["skipped"] == 1 \
  and f1.get("result") == "skipped" and "its copy be:arch/ds1/f1.bin (policy cpA) is not the one made" in f1["detail"] else 1)' "$out" ||
  fail "exC (/alias) did not wait for cpA's copy of f3 and keep f1: $out"
cmp -s "$BE/datasets/ds1/f3.bin" "$SD/f3.orig" && cmp -s "$BE/datasets/ds1/f1.bin" "$SD/f1.orig" ||
  fail "exC (/alias) deleted a source a copy rule of /datasets had not copied, or whose copy changed"
out=$("$TIERCTL" -s "$SOCK" policy run cpA) || fail "policy run cpA: $out"
out=$("$TIERCTL" -s "$SOCK" policy run exC --json) || fail "policy run exC: $out"
cmp -s "$BE/arch/ds1/f3.bin" "$SD/f3.orig" && [ ! -e "$BE/datasets/ds1/f3.bin" ] &&
  cmp -s "$BE/datasets/ds1/f1.bin" "$SD/f1.orig" || fail "exC after cpA's copy of f3: $out"
ok "an expire waits for and checks the copy rules of another namespace over the same keys"

# the archive's rules are dropped and cpB (/ckpt) now copies to be:arch/, where f2's copy is the
# only one left (exA deleted its source): a new ckpt/ds1/f2.bin of as many bytes is not copied
# over it (skipped, logged once), and exB keeps that source; f4, whose bytes are on the target
# already with no row (a kill between the write and the journal), is journalled as it is
head -c 50000 /dev/urandom >"$SD/f2.new"
head -c 20000 /dev/urandom >"$SD/f4.orig"
cp "$SD/f2.new" "$BE/ckpt/ds1/f2.bin"
cp "$SD/f4.orig" "$BE/ckpt/ds1/f4.bin"
cp "$SD/f4.orig" "$BE/arch/ds1/f4.bin"
safe_conf be:arch/ late >"$CONF"
out=$("$TIERCTL" -s "$SOCK" reload 2>&1) || fail "reload without cpA, cpB onto be:arch/: $out"
for i in 1 2; do
  out=$("$TIERCTL" -s "$SOCK" policy run --json) || fail "policy run ($i): $out"
  python3 -c 'import json,sys; i=int(sys.argv[2]); j=json.loads(sys.argv[1])
a={(x["policy"], x["path"]): x for x in j["actions"]}
f2=a.get(("cpB", "/ckpt/ds1/f2.bin"), {})
ok = j["failed"] == 0 and f2.get("result") == "skipped" and not a.get(("exB", "/ckpt/ds1/f2.bin")) \
  and "the target be:arch/ds1/f2.bin exists (50000 bytes, ETag " in f2["detail"] \
  and f2["detail"].endswith(") and is not this rule\x27s copy: move it away or change the target")
if i == 1:
    f4c, f4e = a.get(("cpB", "/ckpt/ds1/f4.bin"), {}), a.get(("exB", "/ckpt/ds1/f4.bin"), {})
    ok = ok and f4c.get("result") == "done" and "the target already held these bytes" in f4c["detail"] \
      and f4e.get("result") == "done"
sys.exit(0 if ok else 1)' "$out" "$i" || fail "policy run ($i) after cpB took be:arch/: $out"
done
cmp -s "$BE/arch/ds1/f2.bin" "$SD/f2.orig" && cmp -s "$BE/ckpt/ds1/f2.bin" "$SD/f2.new" ||
  fail "cpB wrote over the only copy of f2, or exB deleted the new f2"
cmp -s "$BE/arch/ds1/f4.bin" "$SD/f4.orig" && [ ! -e "$BE/ckpt/ds1/f4.bin" ] ||
  fail "f4, its bytes on the target, was not journalled as its copy and expired"
n=$(grep -c "policy cpB: copy /ckpt/ds1/f2.bin skipped: the target be:arch/ds1/f2.bin exists" "$T/tierd.log" || true)
[ "$n" = 1 ] || fail "the skipped copy of f2 was logged $n times in two passes, want once"
st=$("$TIERCTL" -s "$SOCK" policy status --json)
python3 -c 'import json,sys; r={x["name"]: x for x in json.loads(sys.argv[1])["rules"]}
sys.exit(0 if r["cpB"]["skipped"] == 2 and r["cpB"]["failed"] == 0 else 1)' "$st" ||
  fail "policy status does not count cpB's 2 skipped copies: $st"
m=$(api /metrics) || fail "GET /metrics"
grep -qx 'tierd_policy_actions_total{policy="cpB",namespace="/ckpt",action="copy",result="skipped"} 2' <<<"$m" ||
  fail "/metrics lacks cpB's 2 skipped copies: $(grep 'policy="cpB"' <<<"$m")"
ok "a copy never writes over a target that is not its own (the only copy of f2 kept, counted, logged once); the source's bytes already there are journalled"
stop_tierd
echo PASS
