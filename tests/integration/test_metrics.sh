#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_metrics.sh - GET /metrics of a running tierd on a REAL FUSE mount over a POSIX backend (run
# by CTest, label fuse), after reads through the mount.
#
# Asserts: /metrics answers 200 with Content-Type text/plain; version=0.0.4 on the Unix socket
# and, with `Authorization: Bearer <token>` (what Prometheus sends), on the TCP listener, and 401
# there without the token; `promtool check metrics` (Debian's prometheus package) accepts the
# exposition; the backend reads of the uncached files appear as scheduler series whose bytes are
# at least the bytes read; where the FUSE layer records ops (tierd_op_bytes_total has read
# samples), their bytes equal the bytes read exactly; /v1/health is ready and /v1/telemetry parses
# with the same series. Exit 77 (skipped) without promtool.
# No sleeps as synchronisation: every wait polls a condition with a deadline.
set -euo pipefail

command -v promtool >/dev/null || { echo "SKIP: promtool not installed (scripts/deps.sh)"; exit 77; }
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup metrics
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TOKEN=tok-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')

mkdir -p "$DATA/ds" "$MNT"
head -c $((3 * 1048576 + 777)) /dev/urandom >"$DATA/ds/a.bin"
head -c 200000 /dev/urandom >"$DATA/ds/b.bin"
READ_BYTES=$((3 * 1048576 + 777 + 200000))

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /data warm "prefix = ds"
  tierd_conf_mount "$MNT"
  tierd_conf_api "$SOCK" "tcp = 127.0.0.1:$PORT" "token = $TOKEN"
} >"$CONF"

start_tierd
ok "mounted"

cmp "$MNT/data/a.bin" "$DATA/ds/a.bin" || fail "a.bin differs"
cmp "$MNT/data/b.bin" "$DATA/ds/b.bin" || fail "b.bin differs"
ok "read $READ_BYTES bytes through the mount"

# ---- /metrics on the socket: headers, promtool ----------------------------------------------
curl -sSf -D "$T/h.txt" -o "$T/m.txt" --unix-socket "$SOCK" http://tierd/metrics ||
  fail "GET /metrics on the socket"
grep -qi '^content-type: text/plain; version=0.0.4; charset=utf-8' "$T/h.txt" ||
  fail "content type: $(grep -i content-type "$T/h.txt")"
promtool check metrics <"$T/m.txt" >"$T/promtool.txt" 2>&1 ||
  fail "promtool check metrics: $(head -20 "$T/promtool.txt")"
ok "promtool check metrics passes ($(wc -l <"$T/m.txt") lines)"

# ---- the figures ------------------------------------------------------------------------------
python3 - "$T/m.txt" "$READ_BYTES" <<'EOF' || fail "figures in /metrics"
import re, sys
text, want = open(sys.argv[1]).read(), int(sys.argv[2])
def total(family, **labels):
    s, n = 0.0, 0
    for m in re.finditer(r'^' + family + r'\{([^}]*)\} (\S+)$', text, re.M):
        lab = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
        if all(lab.get(k) == v for k, v in labels.items()):
            s, n = s + float(m.group(2)), n + 1
    return s, n
sb, n = total('tierd_sched_bytes_total')
assert n >= 1 and sb >= want, f'scheduler bytes {sb} over {n} series, want >= {want}'
cnt, _ = total('tierd_sched_service_seconds_count')
assert cnt >= 4, f'{cnt} backend calls, want >= 4 (4 blocks at least)'
ob, n = total('tierd_op_bytes_total', op='read')
if n:  # the FUSE layer records ops: every byte of a read reply, exactly once
    assert ob == want, f'read bytes {ob}, want {want}'
    print(f'ok: tierd_op_bytes_total{{op="read"}} = {int(ob)}')
else:
    print('note: no tierd_op_* read samples (the FUSE layer does not record ops in this build)')
assert re.search(r'^tierd_health_ok 1$', text, re.M), 'tierd_health_ok is not 1'
assert re.search(r'^tierd_backend_breaker_open\{backend="warm"\} 0$', text, re.M), 'breaker gauge'
print(f'ok: scheduler bytes {int(sb)} >= {want}, {int(cnt)} backend calls')
EOF

# ---- TCP: the bearer token as Prometheus sends it ---------------------------------------------
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/metrics")
[ "$code" = 401 ] || fail "TCP /metrics without a token: $code"
curl -sSf -H "Authorization: Bearer $TOKEN" -o "$T/m2.txt" "http://127.0.0.1:$PORT/metrics" ||
  fail "TCP /metrics with the token"
promtool check metrics <"$T/m2.txt" >/dev/null 2>&1 || fail "promtool on the TCP answer"
ok "TCP: 401 without the token, 200 with Authorization: Bearer"

# ---- health and telemetry ----------------------------------------------------------------------
[ "$(api /v1/health)" = '{"status":"ready","reasons":[]}' ] || fail "health: $(api /v1/health)"
api /v1/telemetry | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["version"] == 1 and j["sched"], j.get("sched")
assert sum(s["ops"] for s in j["sched"]) >= 4
for s in j["sched"]:
    assert s["ops"] == sum(c for _, c in s["wait"]["buckets"])
' || fail "/v1/telemetry"
ok "/v1/health ready, /v1/telemetry consistent"

stop_tierd
ok "clean stop"
