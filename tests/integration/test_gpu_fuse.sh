#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_gpu_fuse.sh - tierd's NVML sampler ([daemon] gpu_sampling = auto, src/telemetry/gpu.c)
# with the fake NVML of the tests (tests/lib/fake_nvml.c) as libnvidia-ml.so.1 on
# LD_LIBRARY_PATH: no GPU is needed, and none of this says what a real NVML does (run by CTest,
# label fuse; needs root and /dev/fuse, as every tierd with a mount).
#
# A process of uid 1001 ([tenant u1001]) runs `sleep`; the fake reports it at 70 % SM on its one
# device (FAKE_NVML_PID). Asserts: tierd logs the library loaded; /metrics comes to show
# tierd_tenant_gpu_utilisation{tenant="u1001"} 0.7 and tierd_gpu_devices 1 (the sample's pid
# resolved through /proc/<pid>/status and tenant_lookup); GET /v1/telemetry has "gpu" with the
# tenant, and `tierctl top` its GPU% (70.0); promtool (where installed) accepts the exposition;
# once the process is gone its samples resolve to no tenant and the gauge leaves within 3
# intervals of 1 s; a tierd with gpu_sampling = off never loads the library (no tierd_gpu_*
# series, "gpu" null).
# No sleeps as synchronisation: every wait polls a condition with a deadline.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup gpu_fuse

[ "$(id -u)" = 0 ] || fail "needs root (the sampled process runs as another uid)"
command -v setpriv >/dev/null || fail "setpriv is not installed (run scripts/deps.sh)"
FAKE=$BIN/tests/libfake_nvml.so
[ -f "$FAKE" ] || fail "$FAKE is not built (target fake_nvml)"
mkdir -p "$DATA/ds" "$MNT" "$T/nvml"
head -c 4096 /dev/urandom >"$DATA/ds/a.bin"
ln -s "$FAKE" "$T/nvml/libnvidia-ml.so.1"

SLEEPER=
extra_cleanup() { [ -z "$SLEEPER" ] || kill -KILL "$SLEEPER" 2>/dev/null || true; }
setpriv --reuid=1001 --regid=1001 --clear-groups -- sleep 600 &
SLEEPER=$!

conf() {
  {
    tierd_conf_section daemon "log_level = info" "gpu_sampling = $1" "gpu_sample_interval = 1s"
    tierd_conf_section cache "ram_size = 16M" "block_size = 64K"
    tierd_conf_posix warm "$DATA"
    tierd_conf_ns /ds warm "prefix = ds"
    tierd_conf_mount "$MNT"
    tierd_conf_api "$SOCK"
    tierd_conf_section "tenant u1001" "uid = 1001"
  } >"$CONF"
}

conf auto
LD_LIBRARY_PATH=$T/nvml FAKE_NVML_PID=$SLEEPER FAKE_NVML_SM=70 start_tierd
ok "mounted"
if [ "$(readlink /proc/self/ns/pid)" != "pid:[4026531836]" ]; then
  # a machine that runs the tests in a pid namespace of its own (a container): NVML's pids would
  # be the host's, so tierd does not sample; that is what can be checked here
  grep -q "gpu: tierd runs in a pid namespace of its own" "$T/tierd.log" ||
    fail "in a pid namespace of its own tierd still sampled: $(grep gpu "$T/tierd.log" || true)"
  ! api /metrics | grep -q "^tierd_gpu_" || fail "in a pid namespace of its own: tierd_gpu_* series"
  ok "in a pid namespace of its own: no GPU sampling (the fake's figures are not checked here)"
  stop_tierd
  ok "gpu_fuse passed"
  exit 0
fi
grep -q "gpu: NVML loaded: sampling 1 device(s) every 1000 ms" "$T/tierd.log" ||
  fail "tierd did not load the fake NVML: $(grep gpu "$T/tierd.log" || true)"

gauge() { api /metrics | grep -qx "tierd_tenant_gpu_utilisation{tenant=\"u1001\"} 0.7"; }
wait_for 60 gauge || fail "no GPU utilisation for u1001: $(api /metrics | grep gpu || true)"
api /metrics >"$T/metrics.txt" || fail "GET /metrics"
grep -qx "tierd_gpu_devices 1" "$T/metrics.txt" || fail "tierd_gpu_devices: $(grep gpu "$T/metrics.txt")"
ok "/metrics: u1001 at 0.7 on 1 device"
if command -v promtool >/dev/null; then # scripts/deps.sh installs it (Debian's prometheus)
  promtool check metrics <"$T/metrics.txt" >"$T/promtool.txt" 2>&1 ||
    fail "promtool check metrics: $(cat "$T/promtool.txt")"
  ok "promtool accepts /metrics with the gpu families"
fi
api /v1/telemetry >"$T/tele.json" || fail "GET /v1/telemetry"
python3 - "$T/tele.json" <<'EOF2' || fail "/v1/telemetry gpu: $(cat "$T/tele.json")"
import json, sys
g = json.load(open(sys.argv[1]))["gpu"]
assert g["devices"] == 1 and g["passes"] >= 1 and g["errors"] == 0, g
rows = {t["tenant"]: t for t in g["tenants"]}
assert abs(rows["u1001"]["gpu_util"] - 0.7) < 1e-9, rows
EOF2
ok "/v1/telemetry: \"gpu\" has u1001 at 0.7"
tierd_ctl top --once --interval 0.1 >"$T/top.txt" || fail "tierctl top"
grep -q "^TENANT .* STALL%  *GPU%$" "$T/top.txt" || fail "tierctl top has no GPU% column: $(cat "$T/top.txt")"
grep -Eq "^u1001 .* -  *70\.0$" "$T/top.txt" || fail "tierctl top shows no GPU% for u1001: $(cat "$T/top.txt")"
tierd_ctl top --once --interval 0.1 --json |
  python3 -c 'import json, sys; r = {t["tenant"]: t for t in json.load(sys.stdin)["tenants"]}; assert abs(r["u1001"]["gpu_util"] - 0.7) < 1e-9, r' ||
  fail "tierctl top --json: no gpu_util for u1001"
ok "tierctl top: u1001's GPU% 70.0 (table and --json)"

kill -KILL "$SLEEPER"
wait "$SLEEPER" 2>/dev/null || true
SLEEPER=
gone() { ! api /metrics | grep -q "^tierd_tenant_gpu_utilisation{tenant=\"u1001\"}"; }
wait_for 60 gone || fail "u1001's GPU utilisation stayed after its process exited"
ok "the gauge left after the process exited"
stop_tierd

conf off
LD_LIBRARY_PATH=$T/nvml start_tierd
api /metrics >"$T/metrics.txt" || fail "GET /metrics"
! grep -q "^tierd_gpu_" "$T/metrics.txt" || fail "gpu_sampling = off sampled: $(grep gpu "$T/metrics.txt")"
api /v1/telemetry | python3 -c 'import json, sys; assert json.load(sys.stdin)["gpu"] is None' ||
  fail "gpu_sampling = off: \"gpu\" is not null"
ok "gpu_sampling = off: no sampler"
stop_tierd
ok "gpu_fuse passed"
