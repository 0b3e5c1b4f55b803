#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_hints_fuse.sh - epoch-order hints on a REAL mount over a POSIX backend, with the Python
# helper (contrib/python/tierd_hints.py) (run by CTest, label fuse; needs root and /dev/fuse).
#
# 200 files of 64 KiB (one cache block each), a RAM cache of 6.4 MiB: half the dataset, of which
# hints may hold three quarters (the cache's hint share; hint_cache_size = 4800K). A job
# (tests/integration/hints_job.py) reads two shuffled epochs, every file whole with O_DIRECT in
# two 32 KiB reads and 2 ms of emulated compute per sample:
#   control  without hints: the second epoch's hit ratio (bytes tierd served from RAM over all it
#            served, from /metrics) stays near what the cache's own policy gives a shuffled
#            order twice its size: well under 95 %;
#   hinted   the same job through HintedSampler (after the cache is emptied with tierctl evict):
#            the second epoch meets >= 95 % hits; GET /v1/hints shows the set with its files,
#            fetches and a held size within its budget; tierctl hint --list shows it too.
# Then bad input: a path outside every namespace, a bad name, an unknown field: 400 naming the
# problem, and no set is created; tierctl hint --drop removes the set.
# No sleeps as synchronisation: the job's reads are the clock.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup hints_fuse

[ "$(id -u)" = 0 ] || fail "needs root"
command -v python3 >/dev/null || fail "python3 is not installed (run scripts/deps.sh)"

NFILES=200
chmod 0711 "$T" # the socket's directory: uid 1001 connects below
mkdir -p "$DATA/ds/train" "$MNT"
for i in $(seq -w 1 $NFILES); do
  head -c 65536 /dev/urandom >"$DATA/ds/train/s$i.bin"
done

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 6400K" "block_size = 64K" "hint_window = 32" \
    "hint_cache_size = 4800K"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /ds warm "prefix = ds"
  tierd_conf_mount "$MNT" "readahead_blocks = 0"
  tierd_conf_api "$SOCK" "socket_group = 1001"
  tierd_conf_section "tenant u1001" "uid = 1001"
} >"$CONF"

start_tierd
ok "mounted"

JOB="$(dirname "$0")/hints_job.py"
ratio() { # FILE EPOCH: that epoch's hit ratio from the job's JSON lines
  python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2])]["hit_ratio"])' "$1" "$2"
}

python3 "$JOB" "$SOCK" "$MNT/ds/train" 2 2 11 >"$T/control.out" || fail "the control job failed: $(cat "$T/control.out")"
c1=$(ratio "$T/control.out" 1)
python3 -c "import sys; sys.exit(0 if float('$c1') < 0.95 else 1)" ||
  fail "without hints the second epoch already hit $c1: the hinted check below would prove nothing"
ok "control, no hints: second-epoch hit ratio $c1"

tierd_ctl evict "$MNT/ds/train" >/dev/null || fail "tierctl evict of the dataset"
python3 "$JOB" "$SOCK" "$MNT/ds/train" 2 2 11 --hint job7 >"$T/hinted.out" || fail "the hinted job failed: $(cat "$T/hinted.out")"
h1=$(ratio "$T/hinted.out" 1)
python3 -c "import sys; sys.exit(0 if float('$h1') >= 0.95 else 1)" ||
  fail "with hints the second epoch hit only $h1 (want >= 0.95): $(cat "$T/hinted.out"); $(api /v1/hints)"
ok "hinted: second-epoch hit ratio $h1 (control $c1)"

api /v1/hints >"$T/hints.json" || fail "GET /v1/hints"
python3 - "$T/hints.json" "$NFILES" <<'EOF' || fail "GET /v1/hints: $(cat "$T/hints.json")"
import json, sys
sets = {s["name"]: s for s in json.load(open(sys.argv[1]))["sets"]}
s = sets["job7"]
n = int(sys.argv[2])
assert s["files"] == n, s
assert s["entries"] >= 2 * n, s                 # two epochs sent before the first began
assert s["fetched_files"] >= n, s               # every file prefetched at least once
assert s["held_bytes"] <= s["budget"] + 32 * 65536, s  # within budget (plus the window)
assert s["errors"] == 0, s
assert s["skipped"] == 0, s                     # each file counted once per read of it
# the job listed the directory: sizes and etags came from that listing, not a HEAD per file --
# while tierd still holds it: a CI run under load (2026-12-01) once saw 58 listed, then 267 stats
# (the listing no longer found mid-job; why is not established: a forgotten directory node would
# do it; a stat is then the right fallback), so the listing must have served, and every file be
# accounted for one way or the other
assert s["attrs_listed"] >= 1 and s["attrs_listed"] + s["attrs_stat"] >= n, s
print("ok: job7:", {k: s[k] for k in ("entries", "files", "cursor", "fetched_files", "held_bytes", "budget", "released", "attrs_listed", "attrs_stat")})
EOF
tierd_ctl hint --list | grep -q '"name": "job7"' || fail "tierctl hint --list does not show job7"

post() { curl -sS -o "$T/post.json" -w '%{http_code}' --unix-socket "$SOCK" -d "$1" http://tierd/v1/hints; }
code=$(post '{"name": "bad1", "paths": ["/ds/train/s001.bin", "/nowhere/x"]}')
[ "$code" = 400 ] && grep -q "paths\[1\]" "$T/post.json" || fail "a path outside the namespaces: HTTP $code $(cat "$T/post.json")"
code=$(post '{"name": "no spaces", "paths": ["/ds/train/s001.bin"]}')
[ "$code" = 400 ] && grep -q "hint name" "$T/post.json" || fail "a bad name: HTTP $code $(cat "$T/post.json")"
code=$(post '{"name": "x", "paths": [], "order": []}')
[ "$code" = 400 ] && grep -q "unknown field 'order'" "$T/post.json" || fail "an unknown field: HTTP $code $(cat "$T/post.json")"
api /v1/hints | python3 -c 'import json,sys; s=[x["name"] for x in json.load(sys.stdin)["sets"]]; sys.exit(0 if s == ["job7"] else 1)' ||
  fail "a refused hint created a set: $(api /v1/hints)"
ok "bad hints refused with 400 naming the problem; nothing created"

# a caller who is no administrator hints for its own tenant, and only for it
as1001() { setpriv --reuid=1001 --regid=1001 --clear-groups -- "$@"; }
mkdir -p "$T/u" && chown 1001:1001 "$T/u"
upost() { as1001 curl -sS -o "$T/u/upost.json" -w '%{http_code}' --unix-socket "$SOCK" -X "$1" ${2:+-d "$2"} "http://tierd$3"; }
code=$(upost POST '{"name": "mine", "paths": ["/ds/train/s001.bin"]}' /v1/hints)
[ "$code" = 200 ] || fail "uid 1001's own hint: HTTP $code $(cat "$T/u/upost.json")"
api /v1/hints | python3 -c 'import json,sys; s={x["name"]: x for x in json.load(sys.stdin)["sets"]}; sys.exit(0 if s["mine"]["tenant"] == "u1001" else 1)' ||
  fail "uid 1001's hint is not tenant u1001's: $(api /v1/hints)"
code=$(upost POST '{"name": "theirs", "paths": ["/ds/train/s001.bin"], "tenant": "default"}' /v1/hints)
[ "$code" = 403 ] || fail "uid 1001 hinting for tenant default: HTTP $code, want 403: $(cat "$T/u/upost.json")"
code=$(upost DELETE "" /v1/hints/job7) # names are per tenant: u1001 has no job7
[ "$code" = 404 ] || fail "uid 1001 dropping the default tenant's set: HTTP $code, want 404: $(cat "$T/u/upost.json")"
api /v1/hints | grep -q '"name":"job7"' || fail "uid 1001's DELETE removed another tenant's set"
code=$(upost DELETE "" /v1/hints/mine)
[ "$code" = 200 ] || fail "uid 1001 dropping its own set: HTTP $code $(cat "$T/u/upost.json")"
ok "a non-administrator (uid 1001) hints and drops for its own tenant only (403 hinting for another, its DELETE never reaches another's set)"

tierd_ctl hint --drop job7 >/dev/null || fail "tierctl hint --drop job7"
api /v1/hints | python3 -c 'import json,sys; sys.exit(0 if not json.load(sys.stdin)["sets"] else 1)' || fail "job7 still listed after --drop"
ok "tierctl hint --drop job7"

stop_tierd
ok "hints_fuse passed"
