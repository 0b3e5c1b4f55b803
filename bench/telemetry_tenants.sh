#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/telemetry_tenants.sh - the "done when" demonstration of issue 10: a mixed tierbench run
# through the mount with three tenants shows three tenants in `tierctl top --once`, in /metrics
# and in a real Prometheus. Not a CI test (tests/integration/test_telemetry_ui.sh is); it prints
# the three views so that the output can be recorded in docs/BENCHMARKS.md.
#
# Three tierbench processes at once, each as its own uid (setpriv; needs root), matched by
# [tenant NAME] uid sections:
#   serve (uid 2101, class inference):  inference phase, open loop, O_DIRECT reads of /ds
#   train (uid 2102, class training):   training phase over /ds (2 readers, batch 8)
#   ckpt  (uid 2103, class checkpoint): checkpoints into the write-back namespace /ck
# /ds is a read-cache namespace over a POSIX backend (a `tierbench gen` dataset written straight
# into the backend's directory), /ck a write-back namespace on the same backend. Prometheus
# (Debian's) is started here on 127.0.0.1, scraping tierd's TCP listener every second with the
# bearer token from a credentials_file. While the three run: `tierctl top --once`; after them:
# the tenant label values of /metrics, and of Prometheus's query
#   histogram_quantile(0.99, sum by (tenant, le) (rate(tierd_op_latency_seconds_bucket[1m])))
# The script fails when any of the three views lacks one of the three tenants.
#
# Usage: bench/telemetry_tenants.sh [WORKDIR]   (env: DURATION=20s BUILD=build-rel)
set -euo pipefail
W=${1:-/tmp/tierd-bench-tele-tenants}
DURATION=${DURATION:-20s}
[ "$(id -u)" = 0 ] || { echo "needs root (setpriv to three uids)" >&2; exit 1; }
for tool in prometheus promtool setpriv curl python3; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (scripts/deps.sh)" >&2; exit 1; }
done
rm -rf "$W/spool" "$W/prom" "$W/out" "$W/data/ckpt"
mkdir -p "$W/data" "$W/out"
chmod 0711 "$W"
chmod 0777 "$W/out"
PROM_PID=
# shellcheck source=bench/telemetry_lib.sh
. "$(dirname "$0")/telemetry_lib.sh"
cleanup() {
  [ -z "$PROM_PID" ] || { kill -TERM "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null || true; }
  tele_cleanup
}
trap cleanup EXIT
chmod 0755 "$MNT"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
PPORT=$(free_port)
head -c 24 /dev/urandom | base64 >"$W/api.token"
chmod 600 "$W/api.token"
TOKEN=$(cat "$W/api.token")

[ -d "$W/data/tb/samples" ] || "$TIERBENCH" gen "$W/data/tb" --files 400 --size lognormal:128K,0.5 >/dev/null
chmod -R a+rX "$W/data"
cat >"$W/tierd.conf" <<CONF
[daemon]
log_level = warn
[cache]
ram_size = 256M
block_size = 1M
[backend local]
type = posix
root = $W/data
[namespace /ds]
backend = local
prefix = tb
[namespace /ck]
backend = local
prefix = ckpt
mode = write-back
uid = 2103
[writeback]
spool_dir = $W/spool
[mount]
path = $MNT
allow_other = true
umask = 022
[tenant serve]
uid = 2101
class = inference
[tenant train]
uid = 2102
class = training
[tenant ckpt]
uid = 2103
class = checkpoint
[api]
socket = $SOCK
tcp = 127.0.0.1:$PORT
token_file = $W/api.token
CONF
cat >"$W/prom.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tierd
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: $W/api.token
    static_configs:
      - targets: ['127.0.0.1:$PORT']
YML
promtool check config "$W/prom.yml" >/dev/null

echo "## three tenants through the mount, $(date -u +%FT%TZ), $(git rev-parse --short HEAD), load $(loadavg)"
start_tierd "$W/tierd.conf"
prometheus --config.file="$W/prom.yml" --storage.tsdb.path="$W/prom" \
  --web.listen-address="127.0.0.1:$PPORT" --log.level=warn >"$W/prom.log" 2>&1 &
PROM_PID=$!
papi() { curl -sS --max-time 5 --get "http://127.0.0.1:$PPORT$1" "${@:2}"; }
prom_up() {
  papi /api/v1/targets 2>/dev/null | python3 -c '
import json, sys
t = json.load(sys.stdin)["data"]["activeTargets"]
sys.exit(0 if t and t[0]["health"] == "up" else 1)' 2>/dev/null
}
tierd_poll 60 prom_up || die "Prometheus never scraped tierd: $(tail -3 "$W/prom.log")"
echo "Prometheus scrapes 127.0.0.1:$PORT/metrics with the token"

as() { local uid=$1; shift; setpriv --reuid="$uid" --regid="$uid" --clear-groups -- "$@"; }
TB=(run "$MNT/ds" --phases alone --duration "$DURATION" --quiet --no-progress)
as 2101 "$TIERBENCH" "${TB[@]}" --no-training --no-checkpoint --direct --rate 100 --infer-threads 4 \
  --json "$W/out/serve.json" >"$W/out/serve.log" 2>&1 &
P1=$!
as 2102 "$TIERBENCH" "${TB[@]}" --no-inference --no-checkpoint --train-threads 2 --batch 8 \
  --compute 2ms --json "$W/out/train.json" >"$W/out/train.log" 2>&1 &
P2=$!
as 2103 "$TIERBENCH" "${TB[@]}" --no-training --no-inference --ckpt-dir "$MNT/ck/run1" \
  --ckpt-size 32M --ckpt-files 2 --ckpt-interval 5s --json "$W/out/ckpt.json" >"$W/out/ckpt.log" 2>&1 &
P3=$!

# `tierctl top --once` while the three run, once every tenant has been seen
three() { [ "$(grep -oE '^(serve|train|ckpt) ' <<<"$1" | sort -u | wc -l)" = 3 ]; }
top_has_three() { TOP=$("$TIERCTL" -s "$SOCK" top --once --interval 1); three "$TOP"; }
TOP=
tierd_poll 60 top_has_three || die "tierctl top --once never showed the three tenants: $TOP"
echo
echo "### tierctl top --once (during the run)"
echo "$TOP"
rc=0
wait "$P1" || rc=$?
wait "$P2" || rc=$?
wait "$P3" || rc=$?
[ $rc = 0 ] || die "a tierbench exited $rc: $(tail -n 3 "$W"/out/*.log)"

echo
echo "### /metrics (TCP, with the token): tenants per family"
curl -sSf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/metrics" >"$W/metrics.txt"
promtool check metrics <"$W/metrics.txt" >/dev/null 2>&1 || die "promtool check metrics fails"
python3 - "$W/metrics.txt" <<'PY'
import re, sys
fam = {}
for line in open(sys.argv[1]):
    m = re.match(r'(tierd_(?:op_latency_seconds_count|op_bytes_total|sched_service_seconds_count))\{tenant="([^"]*)",class="([^"]*)"(?:,op="([^"]*)",tier="([^"]*)")?\} (\S+)', line)
    if m:
        name, tenant, cls, op, tier, v = m.groups()
        fam.setdefault(name, {}).setdefault((tenant, cls), 0.0)
        fam[name][(tenant, cls)] += float(v)
for name in sorted(fam):
    print("%s: %s" % (name, ", ".join("%s/%s=%.0f" % (t, c, v) for (t, c), v in sorted(fam[name].items()))))
PY
for t in serve train ckpt; do grep -q "tenant=\"$t\"" "$W/metrics.txt" || die "/metrics has no tenant $t"; done

echo
echo "### Prometheus: histogram_quantile(0.99, sum by (tenant, le) (rate(tierd_op_latency_seconds_bucket[1m])))"
Q='histogram_quantile(0.99, sum by (tenant, le) (rate(tierd_op_latency_seconds_bucket[1m])))'
prom_three() {
  PQ=$(papi /api/v1/query --data-urlencode "query=$Q" | python3 -c '
import json, math, sys
for r in sorted(json.load(sys.stdin)["data"]["result"], key=lambda r: r["metric"].get("tenant", "")):
    v = float(r["value"][1])
    if math.isfinite(v):
        print("%s p99 %.6f s" % (r["metric"].get("tenant", "?"), v))')
  three "$PQ"
}
PQ=
tierd_poll 30 prom_three || die "Prometheus has no p99 for the three tenants: $PQ"
echo "$PQ"
echo
echo "### the three tierbench runs"
python3 - "$W"/out/serve.json "$W"/out/train.json "$W"/out/ckpt.json <<'PY'
import json, sys
for p in sys.argv[1:]:
    j = json.load(open(p))
    for ph in j["phases"]:
        for cls in ("inference", "training", "checkpoint"):
            r = ph.get(cls)
            if not r: continue
            extra = ""
            if cls == "inference": extra = "p99 %.2f ms" % (r["latency_ns"]["p99"] / 1e6)
            if cls == "training": extra = "AU %.1f %%" % r.get("au_pct", float("nan"))
            if cls == "checkpoint": extra = "%d checkpoints, mean stall %.0f ms" % (r["checkpoints"], r["stall_ns"]["mean"] / 1e6)
            print("%-10s %-10s %6.1f MB/s  %s" % (p.rsplit("/", 1)[1], cls, r.get("mb_per_s", 0), extra))
PY
echo "load after: $(loadavg)"
