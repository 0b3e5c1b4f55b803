#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_stall_fuse.sh - the Python helper's data-stall reports (contrib/python/tierd_hints.py,
# StallReport; POST /v1/progress) from a real PyTorch DataLoader on a REAL mount, attributed to
# the right tenant (run by CTest, label fuse; needs root, /dev/fuse and Debian's python3-torch,
# which scripts/deps.sh installs: without it the test fails, it is not skipped).
#
# 96 files of 64 KiB under a POSIX backend; [tenant u1001] is uid 1001's. As uid 1001, a job
# (tests/integration/stall_job.py) iterates one shuffled epoch of a DataLoader (2 workers,
# batches of 4: 24 batches) over the mount, wrapped by StallReport (a report every 0.2 s and at
# the epoch's end), with 20 ms of emulated compute per batch. Asserts: the job saw 24 batches,
# tierd took its reports (none refused: the job turns warnings into errors) and nothing was left
# unsent; /metrics has tenant u1001's tierd_tenant_data_steps_total equal to the batches, its
# wait and compute seconds > 0 and equal to what the job measured (to rounding), a stall ratio in
# [0, 1], and no stall series for tenant default (root did not report); `tierctl top --json`
# shows the same for u1001, and the `tierctl top` table has the STALL% column with u1001's
# percentage as its last (no GPU% column: the tests sample no GPU, lib.sh); promtool (where
# installed) accepts the exposition. The reports are synchronous
# (the job's last POST was answered before it exited), so nothing needs waiting for.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup stall_fuse

[ "$(id -u)" = 0 ] || fail "needs root (the job runs as another uid)"
command -v setpriv >/dev/null || fail "setpriv is not installed (run scripts/deps.sh)"
PY=/usr/bin/python3 # Debian's, which python3-torch installs into
"$PY" -c "import torch" 2>/dev/null ||
  fail "Debian's python3-torch is not installed ($PY cannot import torch; run scripts/deps.sh)"

NFILES=96
BATCH=4
chmod 0711 "$T" # the socket's and the job's directories: uid 1001 reaches them
mkdir -p "$DATA/ds/train" "$MNT" "$T/u"
for i in $(seq -w 1 $NFILES); do
  head -c 65536 /dev/urandom >"$DATA/ds/train/s$i.bin"
done
# the job and the helper where uid 1001 may read them, whatever the checkout's modes
cp "$(dirname "$0")/stall_job.py" "$(dirname "$0")/../../contrib/python/tierd_hints.py" "$T/u/"
chown -R 1001:1001 "$T/u"

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 16M" "block_size = 64K"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022"
  tierd_conf_api "$SOCK" "socket_group = 1001"
  tierd_conf_section "tenant u1001" "uid = 1001"
} >"$CONF"

start_tierd
ok "mounted"

as1001() { setpriv --reuid=1001 --regid=1001 --clear-groups -- env HOME="$T/u" TMPDIR="$T/u" "$@"; }
as1001 "$PY" "$T/u/stall_job.py" "$SOCK" "$MNT/ds/train" "$BATCH" 20 stall-test "$T/u" \
  >"$T/job.out" 2>"$T/job.err" || fail "the job failed: $(cat "$T/job.out" "$T/job.err")"
cat "$T/job.out"
python3 - "$T/job.out" $((NFILES / BATCH)) <<'EOF2' || fail "the job's own figures: $(cat "$T/job.out" "$T/job.err")"
import json, sys
j = json.loads(open(sys.argv[1]).read())
assert j["batches"] == int(sys.argv[2]) and j["steps"] == j["batches"], j
assert j["bytes"] == j["batches"] * 4 * 65536, j
assert j["reports"] >= 1 and j["unsent_steps"] == 0, j
assert j["wait_s"] > 0 and j["compute_s"] > 0, j
EOF2
ok "the job iterated $((NFILES / BATCH)) batches through the mount and tierd took its reports"

api /metrics >"$T/metrics.txt" || fail "GET /metrics"
python3 - "$T/metrics.txt" "$T/job.out" <<'EOF2' || fail "/metrics: $(grep tierd_tenant_data "$T/metrics.txt" || true)"
import json, re, sys
text = open(sys.argv[1]).read()
job = json.loads(open(sys.argv[2]).read())
def val(name, tenant):
    m = re.search(r'^%s\{tenant="%s"\} (\S+)$' % (name, tenant), text, re.M)
    return float(m.group(1)) if m else None
steps = val("tierd_tenant_data_steps_total", "u1001")
wait = val("tierd_tenant_data_wait_seconds_total", "u1001")
comp = val("tierd_tenant_compute_seconds_total", "u1001")
ratio = val("tierd_tenant_data_stall_ratio", "u1001")
assert steps == job["batches"], (steps, job)
assert wait is not None and wait > 0 and comp is not None and comp > 0, (wait, comp)
# what tierd summed is what the job measured: each report rounds to 1 us
tol = 1e-6 * job["reports"] + 1e-6
assert abs(wait - job["wait_s"]) <= tol and abs(comp - job["compute_s"]) <= tol, (wait, comp, job)
assert ratio is not None and 0 <= ratio <= 1, ratio
assert val("tierd_tenant_data_reporters", "u1001") == 1
assert val("tierd_tenant_data_steps_total", "default") is None, "root reported nothing"
print("ok: u1001 steps %d wait %.3f s compute %.3f s ratio %.3f" % (steps, wait, comp, ratio))
EOF2
ok "/metrics: tenant u1001's steps, wait and compute are the job's"
if command -v promtool >/dev/null; then # scripts/deps.sh installs it (Debian's prometheus)
  promtool check metrics <"$T/metrics.txt" >"$T/promtool.txt" 2>&1 ||
    fail "promtool check metrics: $(cat "$T/promtool.txt")"
  ok "promtool accepts /metrics with the stall families"
else
  echo "note: promtool not installed: the exposition's lint was not checked"
fi

tierd_ctl top --once --interval 0.1 --json >"$T/top.json" || fail "tierctl top --json"
python3 - "$T/top.json" $((NFILES / BATCH)) <<'EOF2' || fail "tierctl top --json: $(cat "$T/top.json")"
import json, sys
rows = {t["tenant"]: t for t in json.load(open(sys.argv[1]))["tenants"]}
st = rows["u1001"]["stall"]
assert st["steps"] == int(sys.argv[2]), st
assert st["wait_s"] > 0 and st["compute_s"] > 0, st
assert st["ratio"] is not None and 0 <= st["ratio"] <= 1, st
assert rows.get("default", {}).get("stall") is None, rows.get("default")
EOF2
tierd_ctl top --once --interval 0.1 >"$T/top.txt" || fail "tierctl top"
cat "$T/top.txt"
grep -q "^TENANT .* QWAITms  *STALL%$" "$T/top.txt" || fail "tierctl top has no STALL% column (or a GPU% one without a sampler): $(cat "$T/top.txt")"
grep -Eq "^u1001 .* [0-9]+\.[0-9]$" "$T/top.txt" || fail "tierctl top shows no STALL% for u1001: $(cat "$T/top.txt")"
ok "tierctl top (table and --json) shows tenant u1001's stall"

stop_tierd
ok "stall_fuse passed"
