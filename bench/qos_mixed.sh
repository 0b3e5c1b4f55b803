#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/qos_mixed.sh - issue 11's performance run: three tenants on one shaped object-store link,
# each alone and then together, with [daemon] qos = on (dmClock) and qos = off (strict class
# priority, same config) side by side in the same run, and (NOSPLIT=1, the default) qos = on with
# [backend] split_reads = off as a third column, RUNS times; then three checks of the scheduler on
# the same link (a limit holds, a reservation is met, weights split the excess).
#
#   link     scripts/netlink.sh up at RATE (Ceph in a network namespace behind tbf both ways, no
#            proxy); the rate is measured with a curl GET of a 32 MiB object and printed
#   data     uploaded first over the link: a training dataset (SHARDS x 32 MiB shards, read as
#            1 MiB records) under train/, an inference model (32 x 4 MiB files) under model/
#   tierd    in the root namespace: /ds and /model read-cache namespaces over the RGW, /ck a
#            write-back namespace (prefix ckpt/) on the same RGW; RAM cache RAM (no disk tier),
#            block BLOCK, so the dataset and the model are 8x and 4x the cache: training streams
#            from the backend and most inference reads miss (the script prints how many did)
#   tenants  by uid (setpriv): serve 2101 inference, train 2102 training, ckpt 2103 checkpoint;
#            for the checks lim 2104 (limit), rsv 2105 (reservation), wa 2106 and wb 2107
#            (weights 1:3), all training
#   QoS      what a user would set for this link: [backend] link_capacity = the measured rate,
#            max_inflight = MAXIN; [class inference] reservation = 25 % of the link; [class
#            training] weight 16, [class checkpoint] weight 4 (the built-in weights, written out);
#            yield_inflight and split_reads at their defaults (YIELD, SPLIT set them)
#   phases   train alone (TRAIN_COMPUTE per 1 MiB sample, 4 readers: a demand of about half the
#            link), inference alone (open loop, INFER_RATE/s, 4K-64K O_DIRECT reads), checkpoint
#            alone (16 MiB in 2 files every 4 s: about 17 % of a 200 Mbit/s link on average), all
#            three together; DUR seconds each; the write-back backlog is drained and the kernel's
#            page cache of the files dropped (fadvise) before each phase
#   checks   QoS on, every 1 s a sample of GET /v1/qos; windows after a 2 s warm-up:
#            lim (limit 30 % of the link) alone: granted bytes per window <= 1.05 x limit x
#            window + one block; rsv (reservation 30 %, weight 1) with wa (weight 1) and wb
#            (weight 3), all saturating (CHECK_THREADS readers each; printed: how often each had
#            nothing queued): rsv's granted cost >= 95 % of its reservation, and wb/wa within 3
#            +-10 %
# Prints the table (median and range over RUNS), the checks, and the machine's load; exits 1 when
# a run failed (not when a goal is missed: that is a result). Everything it made (namespace,
# veth, qdiscs, Ceph, tierd, the mount) is removed on exit.
#
# Usage: bench/qos_mixed.sh [WORKDIR]   (root; default WORKDIR /tmp/tierd-bench-qos)
#   env: RATE=200mbit RUNS=3 DUR=12 BUILD=build RAM=32M BLOCK=256K MAXIN=4 TRAIN_COMPUTE=85ms
#        INFER_RATE=20 SHARDS=8 CKPT_FILES=2 (files per 16 MiB checkpoint) WB_THREADS=2
#        ([writeback] upload_threads) YIELD= ([backend] yield_inflight; empty: the default)
#        SPLIT= ([backend] split_reads for QoS on; empty: the default, auto) NOSPLIT=1 (0: no
#        third column) CHECK_THREADS=4 (reader threads of rsv, wa and wb each)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/tierd-bench-qos}
RATE=${RATE:-200mbit}
RUNS=${RUNS:-3}
DUR=${DUR:-12}
BUILD=${BUILD:-build}
RAM=${RAM:-32M}
BLOCK=${BLOCK:-256K}
MAXIN=${MAXIN:-4}
TRAIN_COMPUTE=${TRAIN_COMPUTE:-85ms}
INFER_RATE=${INFER_RATE:-20}
SHARDS=${SHARDS:-8}
CKPT_FILES=${CKPT_FILES:-2}
WB_THREADS=${WB_THREADS:-2}
YIELD=${YIELD:-}
SPLIT=${SPLIT:-}
NOSPLIT=${NOSPLIT:-1}
CHECK_THREADS=${CHECK_THREADS:-4}
MODES="on off"
[ "$NOSPLIT" = 0 ] || MODES="on nosplit off"
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

[ "$(id -u)" = 0 ] || { echo "bench/qos_mixed.sh: needs root (netlink.sh, setpriv)" >&2; exit 1; }
for tool in setpriv curl python3 ip tc dd; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (scripts/deps.sh)" >&2; exit 1; }
done
if ! [[ $RUNS =~ ^[0-9]+$ && $DUR =~ ^[0-9]+$ && $SHARDS =~ ^[0-9]+$ ]] || ((RUNS < 1 || DUR < 4)); then
  echo "bench/qos_mixed.sh: RUNS (> 0), DUR (> 3) and SHARDS must be whole numbers" >&2
  exit 2
fi
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
echo "load before: $(loadavg) (1/5/15 min; $(nproc) CPUs); $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
tierd_bins "$BUILD"
# always (incremental): a binary left from an older checkout would measure the old scheduler
tierd_build_release "$BUILD" tierd tierctl tierbench
T0=$SECONDS
rm -rf "$W/spool" "$W/out" "$W/src"
mkdir -p "$W/mnt" "$W/out" "$W/src"
chmod 0711 "$W"
chmod 0777 "$W/out"
tierd_places "$W"
LINK=$W/link
SAMPLER=

cleanup() {
  [ -z "$SAMPLER" ] || { kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null || true; }
  tierd_reap "${TIERD_PID:-}"
  tierd_unmount "$MNT"
  scripts/netlink.sh down "$LINK" >/dev/null 2>&1 || true
  rm -rf "$W/src" "$W/spool"
}
trap cleanup EXIT
scripts/netlink.sh up "$LINK" "$RATE" >/dev/null
tierd_rgw_env "$LINK"
EP=$S3_ENDPOINT_DIRECT
BUCKET=bench-qos-$(date +%s)
tierd_s3 -X PUT "$EP/$BUCKET" >/dev/null

# ---- the link's rate, and the data ------------------------------------------------------------
head -c $((32 << 20)) /dev/urandom >"$W/src/probe.bin"
tierd_s3 -T "$W/src/probe.bin" "$EP/$BUCKET/probe.bin" >/dev/null
GET_S=$(tierd_s3 -o /dev/null -w '%{time_total}' "$EP/$BUCKET/probe.bin")
LINK_BPS=$(awk -v s="$GET_S" 'BEGIN { printf "%d", (32 * 1048576) / s }')
pct() { echo $((LINK_BPS * $1 / 100)); } # pct N: N % of the measured link, bytes/s
echo "link: tbf $RATE each way; a 32 MiB GET took ${GET_S} s: $(awk -v b="$LINK_BPS" 'BEGIN { printf "%.1f MB/s", b / 1e6 }') (link_capacity below)"

"$TIERBENCH" gen "$W/src/train" --shards "$SHARDS" --shard-size 32M >/dev/null
"$TIERBENCH" gen "$W/src/model" --files 32 --size fixed:4M >/dev/null
upload() { # upload DIR PREFIX: every file under DIR as PREFIX/<relative path>, 4 at a time
  (cd "$1" && find . -type f -printf '%P\n') |
    xargs -P 4 -I{} curl -sSf "${TIERD_S3_SIG[@]}" -o /dev/null -T "$1/{}" "$EP/$BUCKET/$2/{}"
}
t=$SECONDS
upload "$W/src/train" train
upload "$W/src/model" model
echo "uploaded $SHARDS x 32 MiB of training shards and 32 x 4 MiB of model in $((SECONDS - t)) s"
rm -rf "$W/src"

# ---- tierd ------------------------------------------------------------------------------------
conf() { # conf on|nosplit|off (nosplit: QoS on, split_reads = off)
  local qos=on split=$SPLIT
  [ "$1" != off ] || qos=off
  [ "$1" != nosplit ] || split=off
  {
    tierd_conf_section daemon "log_level = warn" "qos = $qos"
    tierd_conf_section cache "ram_size = $RAM" "block_size = $BLOCK"
    tierd_conf_rgw rgw "$BUCKET" "link_capacity = $LINK_BPS/s" "max_inflight = $MAXIN" \
      ${YIELD:+"yield_inflight = $YIELD"} ${split:+"split_reads = $split"}
    tierd_conf_ns /ds rgw "prefix = train/"
    tierd_conf_ns /model rgw "prefix = model/"
    tierd_conf_ns /ck rgw "prefix = ckpt/" "mode = write-back" "uid = 2103"
    tierd_conf_section writeback "spool_dir = $W/spool" "upload_threads = $WB_THREADS"
    tierd_conf_mount "$MNT" "allow_other = true" "umask = 022"
    tierd_conf_section "class inference" "reservation = $(pct 25)/s"
    tierd_conf_section "class training" "weight = 16"
    tierd_conf_section "class checkpoint" "weight = 4"
    tierd_conf_section "tenant serve" "uid = 2101" "class = inference"
    tierd_conf_section "tenant train" "uid = 2102" "class = training"
    tierd_conf_section "tenant ckpt" "uid = 2103" "class = checkpoint"
    tierd_conf_section "tenant lim" "uid = 2104" "class = training" "limit = $(pct 30)/s"
    tierd_conf_section "tenant rsv" "uid = 2105" "class = training" "reservation = $(pct 30)/s" \
      "weight = 1"
    tierd_conf_section "tenant wa" "uid = 2106" "class = training" "weight = 1"
    tierd_conf_section "tenant wb" "uid = 2107" "class = training" "weight = 3"
    tierd_conf_api "$SOCK"
  } >"$CONF"
}
up() { # up on|nosplit|off
  conf "$1"
  rm -rf "$W/spool"
  tierd_start "$CONF" "$W/tierd-$1.log" "$MNT" "$SOCK" || exit 1
  local s
  s=$(tierd_api "$SOCK" /v1/qos | python3 -c 'import json, sys; print(json.load(sys.stdin)["scheduler"])')
  [ "$s" = "$( [ "$1" != off ] && echo dmclock || echo strict-priority)" ] ||
    { echo "tierd with qos = $1 reports scheduler $s" >&2; exit 1; }
}
down() { tierd_stop "$TIERD_PID" || { echo "tierd did not stop cleanly (log $W/tierd-*.log)" >&2; exit 1; }; }

# drained: nothing of the write-back namespace waits for its upload
drained() {
  tierd_api "$SOCK" /v1/status | python3 -c '
import json, sys
w = json.load(sys.stdin).get("writeback", {})
sys.exit(0 if w.get("dirty_bytes", 0) == 0 and w.get("sealed", 0) == 0 and w.get("uploading", 0) == 0 else 1)'
}
# uncache: drop the kernel's page cache of the dataset's and the model's files (their pages
# only, POSIX_FADV_DONTNEED), so a phase reads through tierd
uncache() {
  find "$MNT/ds" "$MNT/model" -type f -exec dd if={} iflag=nocache count=0 status=none \;
}
settle() {
  tierd_poll 120 drained || { echo "write-back backlog did not drain within 120 s" >&2; exit 1; }
  uncache
}

as() { local uid=$1; shift; setpriv --reuid="$uid" --regid="$uid" --clear-groups -- "$@"; }
TB=(--phases alone --duration "${DUR}s" --quiet --no-progress)
train() { # train UID JSON [COMPUTE [THREADS]]: streaming reads of /ds
  as "$1" "$TIERBENCH" run "$MNT/ds" "${TB[@]}" --no-inference --no-checkpoint --train-threads "${4:-4}" \
    --batch 8 --compute "${3:-$TRAIN_COMPUTE}" --seed "$1" --json "$2" >"$2.log" 2>&1
}
infer() { # infer JSON
  as 2101 "$TIERBENCH" run "$MNT/model" "${TB[@]}" --no-training --no-checkpoint --direct \
    --rate "$INFER_RATE" --infer-threads 8 --read-size 4K-64K --json "$1" >"$1.log" 2>&1
}
ckpt() { # ckpt JSON DIR
  as 2103 "$TIERBENCH" run "$MNT/ds" "${TB[@]}" --no-training --no-inference \
    --ckpt-dir "$MNT/ck/$2" --ckpt-size 16M --ckpt-files "$CKPT_FILES" --ckpt-interval 4s --json "$1" \
    >"$1.log" 2>&1
}
stats() { tierd_api "$SOCK" /v1/stats >"$1"; }
fails=0
ran() { "$@" || { echo "failed: $* (see its .log)" >&2; fails=$((fails + 1)); }; }

# one mode's four phases, results under $W/out/r$REP-$MODE-*
phases() {
  local o=$W/out/r$1-$2
  settle
  stats "$o-train.s0"
  ran train 2102 "$o-train.json"
  stats "$o-train.s1"
  settle
  stats "$o-infer.s0"
  ran infer "$o-infer.json"
  stats "$o-infer.s1"
  settle
  ran ckpt "$o-ckpt.json" "r$1-$2-a"
  settle
  stats "$o-all.s0"
  train 2102 "$o-all-train.json" &
  local p1=$!
  infer "$o-all-infer.json" &
  local p2=$!
  ckpt "$o-all-ckpt.json" "r$1-$2-t" &
  local p3=$!
  for p in $p1 $p2 $p3; do wait "$p" || { echo "failed: a together phase (r$1-$2)" >&2; fails=$((fails + 1)); }; done
  stats "$o-all.s1"
}

for rep in $(seq 1 "$RUNS"); do
  order=$MODES
  ((rep % 2)) || order=$(echo "$MODES" | tr ' ' '\n' | tac | tr '\n' ' ') # alternate the order
  for mode in $order; do
    up "$mode"
    phases "$rep" "$mode"
    down
    echo "run $rep, qos $mode: done at $((SECONDS - T0)) s, load $(loadavg)"
  done
done

# ---- the checks: a limit, a reservation, weights (QoS on) ------------------------------------
sample() { # sample FILE: GET /v1/qos once a second (the sampling cadence) until killed
  while :; do
    tierd_api "$SOCK" /v1/qos >>"$1" && echo >>"$1"
    sleep 1
  done
}
up on
settle
sample "$W/out/lim.qos" &
SAMPLER=$!
ran train 2104 "$W/out/lim.json" 0ms
kill "$SAMPLER"
wait "$SAMPLER" 2>/dev/null || true
settle
sample "$W/out/share.qos" &
SAMPLER=$!
train 2105 "$W/out/rsv.json" 0ms "$CHECK_THREADS" &
p1=$!
train 2106 "$W/out/wa.json" 0ms "$CHECK_THREADS" &
p2=$!
train 2107 "$W/out/wb.json" 0ms "$CHECK_THREADS" &
p3=$!
for p in $p1 $p2 $p3; do wait "$p" || { echo "failed: a share check reader" >&2; fails=$((fails + 1)); }; done
kill "$SAMPLER"
wait "$SAMPLER" 2>/dev/null || true
SAMPLER=
down
echo "load after: $(loadavg); the run took $((SECONDS - T0)) s after the build"
echo

python3 - "$W/out" "$RUNS" "$LINK_BPS" "$BLOCK" "$INFER_RATE" "$MODES" <<'PY'
import json, os, statistics, sys

out, runs, link, block_s, infer_rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
modes = sys.argv[6].split()
title = {"on": "QoS on (dmClock)", "nosplit": "QoS on, split_reads off", "off": "QoS off (strict priority)"}
mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
block = int(block_s[:-1]) * mult[block_s[-1]] if block_s[-1] in mult else int(block_s)

def phase(path, cls):
    try:
        with open(path) as f:
            return json.load(f)["phases"][0][cls]
    except (OSError, KeyError, IndexError, ValueError):
        return None

def sched(path):
    with open(path) as f:
        return json.load(f)["sched"]

def lane(path):
    with open(path) as f:
        return json.load(f)["backends"][0]

def vals(fn):
    r = {}
    for mode in modes:
        r[mode] = [v for v in (fn(k, mode) for k in range(1, runs + 1)) if v is not None]
    return r

def lat(k, mode, name, pct):
    p = phase(f"{out}/r{k}-{mode}-{name}.json", "inference")
    return p["latency_ns"][pct] / 1e6 if p else None

def mbps(k, mode, name, cls):
    p = phase(f"{out}/r{k}-{mode}-{name}.json", cls)
    return p["mb_per_s"] if p else None

def ratio(a, b):
    return None if a is None or b is None or not b else a / b

def cell(v, fmt):
    if not v:
        return "-"
    m = statistics.median(v)
    return f"{fmt % m} ({fmt % min(v)}-{fmt % max(v)})"

rows = [
    ("inference p50 alone, ms", lambda k, m: lat(k, m, "infer", "p50"), "%.1f"),
    ("inference p50 together, ms", lambda k, m: lat(k, m, "all-infer", "p50"), "%.1f"),
    ("inference p99 alone, ms", lambda k, m: lat(k, m, "infer", "p99"), "%.1f"),
    ("inference p99 together, ms", lambda k, m: lat(k, m, "all-infer", "p99"), "%.1f"),
    ("inference p99 together / alone", lambda k, m: ratio(lat(k, m, "all-infer", "p99"), lat(k, m, "infer", "p99")), "%.2f"),
    ("training MB/s alone", lambda k, m: mbps(k, m, "train", "training"), "%.1f"),
    ("training MB/s together", lambda k, m: mbps(k, m, "all-train", "training"), "%.1f"),
    ("training together / alone", lambda k, m: ratio(mbps(k, m, "all-train", "training"), mbps(k, m, "train", "training")), "%.2f"),
    ("checkpoint MB/s alone (writer)", lambda k, m: mbps(k, m, "ckpt", "checkpoint"), "%.1f"),
    ("checkpoint MB/s together (writer)", lambda k, m: mbps(k, m, "all-ckpt", "checkpoint"), "%.1f"),
]
# what the inference reads cost the link: its backend calls per request, alone and together
def miss(k, mode, name, sname):
    try:
        a, b = sched(f"{out}/r{k}-{mode}-{sname}.s0"), sched(f"{out}/r{k}-{mode}-{sname}.s1")
    except (OSError, KeyError, ValueError):
        return None
    p = phase(f"{out}/r{k}-{mode}-{name}.json", "inference")
    if not p or not p["completed"]:
        return None
    return (b["inference"]["admitted"] - a["inference"]["admitted"]) / p["completed"]
rows.append(("inference backend calls / request, alone", lambda k, m: miss(k, m, "infer", "infer"), "%.2f"))
rows.append(("inference backend calls / request, together", lambda k, m: miss(k, m, "all-infer", "all"), "%.2f"))
def share(k, mode, cls):
    try:
        a, b = sched(f"{out}/r{k}-{mode}-all.s0"), sched(f"{out}/r{k}-{mode}-all.s1")
    except (OSError, KeyError, ValueError):
        return None
    p = phase(f"{out}/r{k}-{mode}-all-train.json", "training")
    if not p:
        return None
    return (b[cls]["bytes"] - a[cls]["bytes"]) / p["elapsed_s"] / 1e6
for cls in ("training", "inference"):  # checkpoint uploads also pass the default lane
    rows.append((f"together: {cls} backend MB/s", lambda k, m, c=cls: share(k, m, c), "%.1f"))
# reads in parts during the together phase: how many, and the backend reads (parts) per read
def split(k, mode, what):
    try:
        a, b = lane(f"{out}/r{k}-{mode}-all.s0"), lane(f"{out}/r{k}-{mode}-all.s1")
    except (OSError, KeyError, IndexError, ValueError):
        return None
    if what == "reads":
        return b.get("split_reads", 0) - a.get("split_reads", 0)
    return b.get("split_bytes", 0) / 1024
rows.append(("together: reads in parts (split_reads)", lambda k, m: split(k, m, "reads"), "%.0f"))
rows.append(("part size, KiB (0: no split)", lambda k, m: split(k, m, "size"), "%.0f"))

res = {}
print(f"| figure (median (range) of {runs} runs) | " + " | ".join(title[m] for m in modes) + " |")
print("|---" * (len(modes) + 1) + "|")
for name, fn, fmt in rows:
    v = vals(fn)
    res[name] = v
    print(f"| {name} | " + " | ".join(cell(v[m], fmt) for m in modes) + " |")
print()

def med(name, mode):
    v = res[name][mode]
    return statistics.median(v) if v else float("nan")
for mode in modes:
    r, t = med("inference p99 together / alone", mode), med("training together / alone", mode)
    ok = r <= 1.5 and t >= 0.9
    print(f"goal, {title[mode]}: inference p99 together/alone {r:.2f} (<= 1.5), training "
          f"together/alone {t:.2f} (>= 0.90): {'met' if ok else 'MISSED'}")
print()

# ---- the checks from the /v1/qos samples --------------------------------------------------
def samples(path):
    with open(path) as f:
        docs = [json.loads(l) for l in f if l.strip()]
    r = []
    for d in docs:
        ten = {t["name"]: t for t in d["backends"][0]["tenants"]}
        r.append((d["now_ns"] / 1e9, d["op_cost"], ten))
    return r

def windows(ss, name):
    """(seconds, bytes, cost) of each 1 s window after the first 2 s of the tenant's traffic"""
    start = next((s[0] for s in ss if s[2][name]["grants"] > 0), None)
    if start is None:
        return []
    w = []
    for (t0, oc, a), (t1, _, b) in zip(ss, ss[1:]):
        if t0 < start + 2 or b[name]["grants"] == a[name]["grants"]:
            continue
        db = b[name]["granted_bytes"] - a[name]["granted_bytes"]
        dg = b[name]["grants"] - a[name]["grants"]
        w.append((t1 - t0, db, db + dg * oc))
    return w[:-1]  # the last window may hold the end of the run

lim = (link * 30) // 100
ws = windows(samples(f"{out}/lim.qos"), "lim")
worst = max((db - 1.05 * lim * dt for dt, db, _ in ws), default=None)
peak = max((db / dt for dt, db, _ in ws), default=0)
ok = ws and worst <= block
print(f"limit: lim's limit {lim / 1e6:.2f} MB/s; {len(ws)} windows; the fullest {peak / 1e6:.2f} MB/s "
      f"({peak / lim:.3f} x limit); bound 1.05 x limit x window + one block ({block} B): "
      f"{'holds' if ok else 'EXCEEDED' if ws else 'NO DATA'}")

ss = samples(f"{out}/share.qos")
rsv = (link * 30) // 100
wr, wa, wb = windows(ss, "rsv"), windows(ss, "wa"), windows(ss, "wb")
n = min(len(wr), len(wa), len(wb))
if n:
    def rate(w, k):
        return sum(x[k] for x in w[:n]) / sum(x[0] for x in w[:n])
    r_cost, a_cost, b_cost = rate(wr, 2), rate(wa, 2), rate(wb, 2)
    tot_bytes = rate(wr, 1) + rate(wa, 1) + rate(wb, 1)
    print(f"saturation: the three granted {tot_bytes / 1e6:.2f} MB/s of bytes ({tot_bytes / link:.2f} x the measured link), "
          f"{(r_cost + a_cost + b_cost) / 1e6:.2f} MB/s of cost (bytes + op_cost per call)")
    print(f"reservation: rsv reserved {rsv / 1e6:.2f} MB/s of cost, got {r_cost / 1e6:.2f} "
          f"({r_cost / rsv:.2f}; bytes alone {rate(wr, 1) / 1e6:.2f} MB/s): "
          f"{'met' if r_cost >= 0.95 * rsv else 'MISSED'} (>= 0.95)")
    q = b_cost / a_cost if a_cost else float("inf")
    # the weights split only what backlogged clients ask for: how often each had nothing queued
    idle = {}
    for name in ("rsv", "wa", "wb"):
        qs = [t[name]["classes"]["training"]["queued_now"] for _, _, t in ss[1:] if name in t]
        idle[name] = f"{sum(1 for v in qs if v == 0)}/{len(qs)}"
    print(f"backlog: samples with nothing queued: rsv {idle['rsv']}, wa {idle['wa']}, wb {idle['wb']}")
    print(f"weights: wb/wa = {q:.2f} of cost (want 3 +-10 %: 2.70-3.30; wa {a_cost / 1e6:.2f}, "
          f"wb {b_cost / 1e6:.2f} MB/s): {'met' if 2.7 <= q <= 3.3 else 'MISSED'}")
else:
    print("reservation, weights: NO DATA")
PY
[ "$fails" = 0 ] || { echo "$fails run(s) failed" >&2; exit 1; }
