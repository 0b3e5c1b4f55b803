#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_telemetry_ui.sh - per-tenant telemetry as operators see it, on a REAL FUSE mount over a
# POSIX backend (run by CTest, label fuse): `tierctl top`, a real Prometheus, the dashboard in a
# real headless Chromium.
#
# Readers of two uids (root, and nobody through setpriv) read distinct files of known sizes
# through the mount. Two [tenant] sections name them by uid (reader-root, class training;
# reader-nobody, class inference), and EXPECT, the tenants tierd must report, is both names:
# /v1/telemetry has series of each, every one with the configured class.
# Asserts:
#  1 `tierctl top --once` (plain lines: stdout is not a tty) has a row for every tenant in EXPECT,
#    and `top --once --json` the same tenants with ops or backend calls > 0; `top --count 2` prints
#    two tables into a pipe, and on a pty (script(1)) redraws twice (ANSI home + clear) with every
#    tenant; `top` without a token over TCP and `--interval 0` are usage errors.
#  2 Prometheus (Debian's prometheus, started here on 127.0.0.1, scrape interval 1 s) scrapes
#    tierd's TCP listener with the token from a credentials_file: the target becomes "up"
#    (polled); a scrape config without the token leaves it "down" with 401 in lastError.
#    `promtool check metrics` passes on the exposition. After reads between two scrapes,
#    histogram_quantile(0.99, sum by (tenant, le) (rate(tierd_op_latency_seconds_bucket[1m])))
#    through /api/v1/query has a finite value for every tenant in EXPECT.
#  3 The dashboard, /ui#token=..., in headless Chromium: --dump-dom shows a data-tenant element
#    for every tenant in EXPECT and the page's state "live"; --screenshot writes a valid PNG of
#    nonzero size. /ui needs no token, /v1/telemetry still does (401). With [cache] curves on,
#    the page's advice section shows its table and names the round (GET /v1/advice).
# Exits 77 (CTest: skipped) after all the other checks pass when tierd exports no
# tierd_op_latency_seconds series at all (per-op recording not wired into the FUSE ops in this
# build), saying so; a series missing for a tenant that read is a failure.
# No sleeps as synchronisation: every wait polls a condition with a deadline.
set -euo pipefail

PROM_PID=
extra_cleanup() {
  if [ -n "$PROM_PID" ] && kill -0 "$PROM_PID" 2>/dev/null; then
    kill -TERM "$PROM_PID" 2>/dev/null || true
    wait "$PROM_PID" 2>/dev/null || true
  fi
}
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup telemetry_ui

for tool in prometheus promtool chromium setpriv python3 curl; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run scripts/deps.sh)"
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
PPORT=$(free_port)
NOBODY=$(id -u nobody)
EXPECT=(reader-root reader-nobody)

# ---- backend data, config -----------------------------------------------------------------
chmod 0711 "$T"
mkdir -p "$DATA/a" "$DATA/b" "$MNT"
chmod 0755 "$DATA" "$DATA/a" "$DATA/b" "$MNT"
for i in 1 2 3; do
  head -c $((i * 1048576 + 4096)) /dev/urandom >"$DATA/a/f$i.bin" # root's files
  head -c $((i * 524288 + 100)) /dev/urandom >"$DATA/b/f$i.bin"   # nobody's files
done
chmod 0644 "$DATA"/a/* "$DATA"/b/*
head -c 24 /dev/urandom | base64 >"$T/api.token"
chmod 600 "$T/api.token"
TOKEN=$(cat "$T/api.token")

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M" "curves = on"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022" "attr_ttl = 1s" "entry_ttl = 1s"
  tierd_conf_api "$SOCK" "tcp = 127.0.0.1:$PORT" "token_file = $T/api.token"
  tierd_conf_section "tenant reader-root" "uid = 0" "class = training"
  tierd_conf_section "tenant reader-nobody" "uid = $NOBODY" "class = inference"
} >"$CONF"

start_tierd
ok "mounted"
setpriv --reuid="$NOBODY" --regid="$(id -g nobody)" --clear-groups -- test -r "$MNT/ds/b/f1.bin" ||
  fail "nobody cannot read the mount (allow_other, umask 022)"

# Read every file of a directory as a user; check the bytes against the backend's.
read_as() { # UID DIR
  local uid=$1 dir=$2 f
  for f in "$DATA/$dir"/*.bin; do
    local name
    name=$(basename "$f")
    if [ "$uid" = 0 ]; then
      cmp -s "$f" "$MNT/ds/$dir/$name" || fail "root read wrong bytes from /ds/$dir/$name"
    else
      setpriv --reuid="$uid" --regid="$(id -g nobody)" --clear-groups -- cat "$MNT/ds/$dir/$name" |
        cmp -s "$f" - || fail "uid $uid read wrong bytes from /ds/$dir/$name"
    fi
  done
}
read_as 0 a
read_as "$NOBODY" b
ok "two uids read their files through the mount"

curl_tcp() { curl -sS --max-time 10 -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT$1"; }
tele_json() { curl_tcp /v1/telemetry; }
# tenants with ops or sched series in /v1/telemetry, one per line
tele_tenants() {
  tele_json | python3 -c 'import json,sys; j=json.load(sys.stdin); print("\n".join(sorted({e["tenant"] for e in j["ops"] + j["sched"]})))'
}
TT=$(tele_tenants) || fail "GET /v1/telemetry over TCP failed"
for t in "${EXPECT[@]}"; do
  grep -qx "$t" <<<"$TT" || fail "/v1/telemetry has no series of tenant $t: ${TT//$'\n'/ }"
done
# every op series of a reader's tenant has the class of its [tenant] section
tele_json | python3 -c '
import json, sys
want = {"reader-root": "training", "reader-nobody": "inference"}
for e in json.load(sys.stdin)["ops"]:
    t = e["tenant"]
    assert t not in want or e["class"] == want[t], "tenant %s has a series of class %s, want %s" % (t, e["class"], want[t])
' || fail "/v1/telemetry: a reader's tenant has a series of another class than configured"
OPS_EXPORTED=$(tele_json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["ops"]))')

# ---- 1: tierctl top ------------------------------------------------------------------------
OUT=$("$TIERCTL" --tcp "127.0.0.1:$PORT" --token-file "$T/api.token" top --once --interval 0.5) ||
  fail "tierctl top --once exited $?"
# (no GPU% column: the tests sample no GPU, lib.sh)
grep -q "^TENANT  *CLASS  *OPS/S  *MB/S  *RAM%  *DISK%  *BACK%  *P50ms  *P99ms  *QWAITms  *STALL%$" <<<"$OUT" ||
  fail "top --once has no header line: $OUT"
for t in "${EXPECT[@]}"; do
  grep -q "^$t " <<<"$OUT" || fail "top --once has no row for tenant $t: $OUT"
done
case "$OUT" in *$'\033'*) fail "top --once wrote terminal escapes into a pipe" ;; esac
ok "tierctl top --once shows ${EXPECT[*]}"

JSON=$("$TIERCTL" -s "$SOCK" top --once --json --interval 0.3) || fail "tierctl top --once --json exited $?"
for t in "${EXPECT[@]}"; do
  echo "$JSON" | python3 -c '
import json, sys
j = json.load(sys.stdin)
t = sys.argv[1]
rows = [r for r in j["tenants"] if r["tenant"] == t]
assert rows, "no tenant %s in %s" % (t, [r["tenant"] for r in j["tenants"]])
r = rows[0]
calls = sum(c["backend_calls_total"] for c in r["classes"])
assert r["ops_total"] > 0 or calls > 0, "tenant %s has neither ops nor backend calls: %s" % (t, r)
assert 0.2 < j["interval_s"] < 5, j["interval_s"]
' "$t" || fail "top --json: tenant $t: $JSON"
done
ok "tierctl top --once --json lists ${EXPECT[*]} with their activity"

# live mode: into a pipe every table in turn; on a terminal (a pty from script(1)) redrawn in place
OUT=$("$TIERCTL" -s "$SOCK" top --count 2 --interval 0.2) || fail "top --count 2 exited $?"
[ "$(echo "$OUT" | grep -c '^TENANT ')" = 2 ] || fail "top --count 2 into a pipe: want 2 tables: $OUT"
script -qec "$TIERCTL -s $SOCK top --count 2 --interval 0.2" /dev/null >"$T/tty.out" </dev/null ||
  fail "top on a pty exited $?"
[ "$(grep -o $'\033\[H\033\[2J' "$T/tty.out" | wc -l)" = 2 ] || fail "top on a pty: want 2 redraws: $(od -c "$T/tty.out" | head)"
for t in "${EXPECT[@]}"; do
  grep -q "^$t " "$T/tty.out" || fail "top on a pty has no row for tenant $t"
done
ok "tierctl top: a table per interval into a pipe, redrawn in place on a terminal"

set +e
env -u TIERD_TOKEN "$TIERCTL" --tcp "127.0.0.1:$PORT" top --once >/dev/null 2>"$T/err"
rc=$?
set -e
[ $rc -eq 2 ] || fail "top over TCP without a token exited $rc, want 2"
grep -q "needs a token" "$T/err" || fail "no token message: $(cat "$T/err")"
set +e
"$TIERCTL" -s "$SOCK" top --interval 0 >/dev/null 2>"$T/err"
rc=$?
set -e
{ [ $rc -eq 2 ] && grep -q "interval wants seconds" "$T/err"; } || fail "top --interval 0: exit $rc, $(cat "$T/err")"
ok "tierctl top: usage errors"

# ---- 2: Prometheus -------------------------------------------------------------------------
curl_tcp /metrics >"$T/metrics.txt" || fail "GET /metrics over TCP with the token failed"
promtool check metrics <"$T/metrics.txt" >"$T/promtool.out" 2>&1 ||
  fail "promtool check metrics: $(cat "$T/promtool.out")"
ok "promtool check metrics passes ($(wc -l <"$T/metrics.txt") lines)"

printf 'not-the-token-0123456789\n' >"$T/wrong.token"
cat >"$T/prom.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tierd
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: $T/api.token
    static_configs:
      - targets: ['127.0.0.1:$PORT']
  - job_name: tierd_no_token
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: $T/wrong.token
    static_configs:
      - targets: ['127.0.0.1:$PORT']
EOF
promtool check config "$T/prom.yml" >"$T/promtool.out" 2>&1 || fail "promtool check config: $(cat "$T/promtool.out")"
prometheus --config.file="$T/prom.yml" --storage.tsdb.path="$T/prom" \
  --web.listen-address="127.0.0.1:$PPORT" --log.level=warn >"$T/prom.log" 2>&1 &
PROM_PID=$!
papi() { curl -sS --max-time 5 --get "http://127.0.0.1:$PPORT$1" "${@:2}"; }
# health of the job's target: up, down (with the last error), or nothing yet
target() { # JOB
  papi /api/v1/targets 2>/dev/null | python3 -c '
import json, sys
for t in json.load(sys.stdin)["data"]["activeTargets"]:
    if t["labels"]["job"] == sys.argv[1]:
        print(t["health"], t["lastError"])' "$1" 2>/dev/null
}
target_is() { target "$1" | grep -q "^$2"; }
wait_for 60 target_is tierd up || fail "Prometheus never scraped tierd: $(target tierd); $(tail -5 "$T/prom.log")"
wait_for 30 target_is tierd_no_token down || fail "the scrape without the token: $(target tierd_no_token)"
target tierd_no_token | grep -q "401" || fail "the refused scrape does not say 401: $(target tierd_no_token)"
ok "Prometheus scrapes tierd with the token (and is refused without it)"

# One scrape with the counters before the reads, reads, then scrapes after them: rate() sees
# the increase.
samples() { # SELECTOR -> number of samples in the last minute
  papi /api/v1/query --data-urlencode "query=count_over_time($1[1m])" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(int(r[0]["value"][1]) if r else 0)'
}
more_samples() { [ "$(samples 'up{job="tierd"}')" -gt "$1" ]; }
n0=$(samples 'up{job="tierd"}')
wait_for 30 more_samples "$n0" || fail "Prometheus holds no new sample of up{job=\"tierd\"} (had $n0)"
for i in 1 2 3; do
  head -c $((i * 262144)) /dev/urandom >"$DATA/a/g$i.bin"
  head -c $((i * 131072)) /dev/urandom >"$DATA/b/g$i.bin"
done
chmod 0644 "$DATA"/a/g* "$DATA"/b/g*
for i in 1 2 3; do
  cmp -s "$DATA/a/g$i.bin" "$MNT/ds/a/g$i.bin" || fail "root read /ds/a/g$i.bin wrong"
  setpriv --reuid="$NOBODY" --regid="$(id -g nobody)" --clear-groups -- cat "$MNT/ds/b/g$i.bin" |
    cmp -s "$DATA/b/g$i.bin" - || fail "nobody read /ds/b/g$i.bin wrong"
done
Q='histogram_quantile(0.99, sum by (tenant, le) (rate(tierd_op_latency_seconds_bucket[1m])))'
# tenant=value lines of the query's finite results
p99s() {
  papi /api/v1/query --data-urlencode "query=$Q" | python3 -c '
import json, math, sys
for r in json.load(sys.stdin)["data"]["result"]:
    v = float(r["value"][1])
    if math.isfinite(v):
        print("%s=%g" % (r["metric"].get("tenant", ""), v))'
}
all_p99() {
  local t
  for t in "${EXPECT[@]}"; do p99s | grep -q "^$t=" || return 1; done
}
if [ "$OPS_EXPORTED" -gt 0 ]; then
  wait_for 60 all_p99 || fail "PromQL p99 per tenant: want ${EXPECT[*]}, got '$(p99s | tr '\n' ' ')'"
  ok "PromQL p99 per tenant: $(p99s | tr '\n' ' ')"
else
  grep -q '^tierd_op_latency_seconds' "$T/metrics.txt" && fail "/metrics has op latency series that /v1/telemetry lacks"
  echo "note: tierd exports no per-op series yet; the PromQL p99 check is skipped"
fi

# ---- 3: the dashboard in headless Chromium ---------------------------------------------------
code=$(curl -s -o "$T/ui.html" -w '%{http_code}' "http://127.0.0.1:$PORT/ui")
[ "$code" = 200 ] || fail "GET /ui without the token: HTTP $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/telemetry")
[ "$code" = 401 ] || fail "GET /v1/telemetry without the token: HTTP $code, want 401"
code=$(curl -s -o "$T/chart.js" -w '%{http_code}' "http://127.0.0.1:$PORT/ui/chart.js")
{ [ "$code" = 200 ] && cmp -s "$T/chart.js" /usr/share/javascript/chart.js/chart.min.js; } ||
  fail "GET /ui/chart.js: HTTP $code, not Debian's chart.min.js"
URL="http://127.0.0.1:$PORT/ui#token=$TOKEN"
chrome() {
  HOME=$T timeout 90 chromium --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$T/chrome" --window-size=1280,1000 --virtual-time-budget=8000 "$@" "$URL" \
    2>>"$T/chrome.log"
}
chrome --dump-dom >"$T/dom.html" || fail "chromium --dump-dom exited $?: $(tail -5 "$T/chrome.log")"
for t in "${EXPECT[@]}"; do
  grep -q "<tr data-tenant=\"$t\"" "$T/dom.html" || fail "the dashboard's DOM has no row of tenant $t: $(grep -o '<tbody>.*</tbody>' "$T/dom.html" | head -c 2000)"
done
grep -q 'id="state" data-state="live"' "$T/dom.html" || fail "the dashboard is not live: $(grep -o '<span id="state"[^<]*' "$T/dom.html")"
grep -q 'id="nocharts" hidden' "$T/dom.html" || fail "the dashboard says charts are off: $(grep -o '<p id="nocharts".*</p>' "$T/dom.html")"
# the advice section (docs/ADVICE.md): curves are on, so its table shows (rows: the tenants that
# read in the last round, possibly none by now) and its state names the round
grep -q '<table id="advice-tenants">' "$T/dom.html" ||
  fail "the dashboard's advice table is hidden: $(grep -o '<section id="advice">.*</section>' "$T/dom.html" | head -c 2000)"
grep -q 'id="advice-state">(round [0-9]*, target utilisation 85 %, auto_quota off)' "$T/dom.html" ||
  fail "the dashboard's advice state: $(grep -o '<small id="advice-state">[^<]*' "$T/dom.html")"
ok "dashboard DOM shows ${EXPECT[*]}, live, with charts and the advice section"
chrome --screenshot="$T/ui.png" >/dev/null || fail "chromium --screenshot exited $?"
python3 - "$T/ui.png" <<'EOF' || fail "the screenshot is not a PNG of nonzero size"
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
ln, typ = struct.unpack(">I4s", d[8:16])
assert typ == b"IHDR" and ln == 13
w, h = struct.unpack(">II", d[16:24])
assert w > 0 and h > 0, (w, h)
assert zlib.crc32(d[12:29]) == struct.unpack(">I", d[29:33])[0], "IHDR CRC"
assert b"IEND" in d[-12:], "no IEND"
print("png %dx%d, %d bytes" % (w, h, len(d)))
EOF
ok "dashboard screenshot $(stat -c %s "$T/ui.png") bytes"
[ -z "${UI_SCREENSHOT_OUT:-}" ] || cp "$T/ui.png" "$UI_SCREENSHOT_OUT"

stop_tierd
ok "clean shutdown"
if [ "$OPS_EXPORTED" -eq 0 ]; then
  echo "SKIP: tierd records no per-op telemetry in this build (tele_op_record is not called by the FUSE ops): the PromQL per-tenant p99 was not checked"
  exit 77
fi
