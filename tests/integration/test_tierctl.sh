#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_tierctl.sh - integration test of tierctl (src/cli/), run by CTest as
#   test_tierctl.sh TIERCTL [TIERD]
#
# 1. No daemon: the documented message and exit code 3; usage errors exit 2.
# 2. Against a scripted control API server (python3 on a Unix socket, canned answers in the
#    documented format): the status table, --json, stage progress (plain and on a pty), a failing
#    stage (exit 1 + first error), API errors (exit 4 + the daemon's message), mount-path
#    translation, pin/unpin/evict requests. This pins down tierctl's side of docs/API.md.
# 3. Against the real tierd (when TIERD is given and built, and /dev/fuse is usable): a POSIX
#    backend over 1,000 small files, `tierctl stage /ns` completes, a second run reports every
#    byte already cached, `status --json` shows the bytes as cached, pin/unpin/evict round trip,
#    --tcp with the right token works and with a wrong one is refused (exit 4); `wait` and
#    `checkpoints` without a write-back namespace are refused with the documented message;
#    `cluster` without a [cluster] section says so (and --json answers enabled: false); so does
#    `advise` without curves.
# 4. The real tierd with a write-back namespace over a POSIX backend (no RGW needed): files
#    written through the mount, `tierctl wait` exits 0, the backend files are byte-identical,
#    `checkpoints --json` lists them as uploaded with an ETag; a file whose spool copy is
#    corrupted after close is FAILED: `wait` fails naming the seal checksum, `checkpoints` shows
#    the state and the error. A tierd that cannot run or write the write-back namespace fails.
#
# No sleeps as synchronisation: every wait polls a condition with a deadline. The mock server,
# tierd and the mount are cleaned up in an EXIT trap.
set -u

TIERCTL=${1:?usage: test_tierctl.sh TIERCTL [TIERD]}
TIERD=${2:-}
# shellcheck source=scripts/lib/tierd.sh
. "$(dirname "$0")/../../scripts/lib/tierd.sh"
tierd_counted_checks # fail counts a failed check and carries on; pass, run, contains, wait_for
tierd_scratch tierctl
W=$T
MOCK_PID=
TIERD_PID=
MNT=
WB_PID=
WB_MNT=
STUB_PID=

cleanup() {
    tierd_reap "$TIERD_PID"
    tierd_unmount "$MNT"
    tierd_reap "$WB_PID"
    tierd_unmount "$WB_MNT"
    if [ -n "$STUB_PID" ]; then kill "$STUB_PID" 2>/dev/null; wait "$STUB_PID" 2>/dev/null; fi
    if [ -n "$MOCK_PID" ]; then kill "$MOCK_PID" 2>/dev/null; wait "$MOCK_PID" 2>/dev/null; fi
    rm -rf "$W"
}
trap cleanup EXIT

# ---- 1. no daemon, usage errors ------------------------------------------------------------
run "no daemon: exit 3" 3 "$TIERCTL" -s "$W/none.sock" status
contains "no daemon: message" "tierctl: tierd is not running (no control socket at $W/none.sock). Start it with: tierd -c /etc/tierd/tierd.conf"
run "no daemon via \$TIERD_SOCKET" 3 env TIERD_SOCKET="$W/env.sock" "$TIERCTL" stage /x
contains "no daemon: socket from env" "no control socket at $W/env.sock"
run "no command" 2 "$TIERCTL"
run "unknown command" 2 "$TIERCTL" frobnicate
contains "unknown command message" "unknown command 'frobnicate'"
run "wait: no daemon" 3 "$TIERCTL" -s "$W/none.sock" wait /ck/x
run "checkpoints: no daemon" 3 "$TIERCTL" -s "$W/none.sock" checkpoints
run "stage without paths" 2 "$TIERCTL" -s "$W/none.sock" stage
run "pin without path" 2 "$TIERCTL" -s "$W/none.sock" pin
run "bad option" 2 "$TIERCTL" -s "$W/none.sock" status --bogus
run "tcp without token" 2 env -u TIERD_TOKEN "$TIERCTL" --tcp 127.0.0.1:9 status
run "--help" 0 "$TIERCTL" --help
contains "--help documents exit codes" "3  tierd is not reachable"

# ---- 2. scripted control API -----------------------------------------------------------------
if ! command -v python3 >/dev/null; then
    fail "python3 is needed for the scripted API part"
else
    cat >"$W/mock.py" <<'PYEOF'
import json, os, socketserver, sys
from http.server import BaseHTTPRequestHandler

sock, log = sys.argv[1], sys.argv[2]
polls = {}

STATUS = {"version": "0.1.0", "uptime_s": 3725, "mount": "/mnt/fake",
          "cache": {"ram": {"used": 1048576, "budget": 8388608, "blocks": 4, "hits": 90,
                            "misses": 10, "evictions": 0},
                    "disk": {"used": 3145728, "budget": 1073741824, "blocks": 12, "hits": 5,
                             "misses": 5, "evictions": 2},
                    "pinned_bytes": 0, "pin_budget": 1048576, "hit_ratio": 0.9,
                    "fetches": 15, "fetch_bytes": 4194304, "fetch_errors": 1},
          "namespaces": [{"path": "/ds", "backend": "warm", "type": "posix", "prefix": "data/",
                          "mode": "read-cache"}],
          "writeback": {"dirty_bytes": 2097152, "open": 1, "sealed": 3, "uploading": 1,
                        "held": 2, "uploads_done": 7, "upload_retries": 0,
                        "backpressure_waits": 0, "failed": 0}}

CHECKPOINTS = {"files": [
    {"path": "/ck/run1/model.pt", "state": "uploading", "size": 268435456, "parts_done": 12,
     "parts_total": 32, "age_s": 75.2, "waiting_s": 70.0, "key": "ckpt/run1/model.pt",
     "checksum": "xxh128:" + "ab" * 16, "generation": 1, "uploaded_etag": None},
    {"path": "/ck/run1/optim.pt", "state": "uploaded", "size": 1048576, "parts_done": 0,
     "parts_total": 0, "age_s": 3725, "waiting_s": 0, "key": "ckpt/run1/optim.pt",
     "checksum": "xxh128:" + "cd" * 16, "generation": 1, "uploaded_etag": "\"0123abcd\""},
    {"path": "/ck/run1/rng.pt", "state": "sealed", "size": 4096, "parts_done": 0,
     "parts_total": 0, "age_s": 2, "waiting_s": 1, "key": "ckpt/run1/rng.pt",
     "checksum": "xxh128:" + "ef" * 16, "generation": 1, "uploaded_etag": None}]}
waits = {}

def job(jid, n):
    if jid in (1, 3):
        # Job 3 runs for 45 polls (about 3 s: tierctl polls every 50 ms for 2 s, then every
        # 200 ms), long enough for the plain mode's periodic line; job 1 for 3 polls.
        last = 3 if jid == 1 else 45
        done = 3 * min(n, last) // last
        return {"job": jid, "state": "running" if n < last else "done", "listing_done": n >= 1,
                "files_total": 3, "files_done": done, "bytes_total": 3000,
                "bytes_done": done * 1000, "bytes_already_cached": 0, "errors": 0,
                "first_error": "", "elapsed_s": 0.5 * (n + 1)}
    return {"job": 2, "state": "failed", "listing_done": True, "files_total": 5,
            "files_done": 3, "bytes_total": 5000, "bytes_done": 3000,
            "bytes_already_cached": 1000, "errors": 2,
            "first_error": "/fails/a.bin: injected failure", "elapsed_s": 1.0}

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def address_string(self):
        return "unix"
    def reply(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        with open(log, "a") as f:
            f.write("GET %s\n" % self.path)
        if self.path == "/v1/status":
            return self.reply(200, STATUS)
        if self.path.startswith("/v1/checkpoints"):
            if self.path.endswith("path=/ds"):
                return self.reply(404, {"error": "/ds is in namespace /ds, which is not in "
                                        "write-back mode", "errno": "ENOENT"})
            return self.reply(200, CHECKPOINTS)
        if self.path.startswith("/v1/stage/"):
            jid = int(self.path.rsplit("/", 1)[1])
            if jid not in (1, 2, 3):
                return self.reply(404, {"error": "no staging job %d" % jid, "errno": "ENOENT"})
            polls[jid] = polls.get(jid, 0) + 1
            return self.reply(200, job(jid, polls[jid]))
        self.reply(404, {"error": "no such endpoint", "errno": "ENOENT"})
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        with open(log, "a") as f:
            f.write("POST %s %s\n" % (self.path, json.dumps(body, sort_keys=True)))
        if self.path == "/v1/stage":
            paths = body.get("paths", [])
            if any(p.startswith("/missing") for p in paths):
                return self.reply(404, {"error": "/missing: no such file or directory",
                                        "errno": "ENOENT"})
            jid = 2 if any(p.startswith("/fails") for p in paths) else 1
            if paths == ["/ds/slow"]:
                jid = 3
            polls[jid] = 0
            return self.reply(202, {"job": jid})
        if self.path in ("/v1/pin", "/v1/unpin"):
            if body.get("path") == "/big":
                return self.reply(507, {"error": "pinning /big needs 2.0 GiB but the pin "
                                        "budget has 1.0 MiB left", "errno": "ENOSPC"})
            return self.reply(200, {"ok": True})
        if self.path == "/v1/evict":
            return self.reply(200, {"evicted_blocks": 7})
        if self.path == "/v1/wait":
            p, t = body.get("path"), body.get("timeout_s")
            if not isinstance(t, (int, float)) or t < 0 or t > 20:
                return self.reply(400, {"error": "timeout_s %r" % (t,), "errno": "EINVAL"})
            if p == "/ds/x":
                return self.reply(404, {"error": "/ds/x is in namespace /ds, which is not in "
                                        "write-back mode", "errno": "ENOENT"})
            if p == "/nowb":
                return self.reply(503, {"error": "no namespace is in write-back mode",
                                        "errno": "EOPNOTSUPP"})
            if p == "/ck/never":  # blocks for the whole timeout, as tierd does
                import time
                time.sleep(t)
                return self.reply(504, {"error": "%s is not yet durable" % p,
                                        "errno": "ETIMEDOUT"})
            if p == "/ck/later":  # durable at the third request
                waits[p] = waits.get(p, 0) + 1
                if waits[p] < 3:
                    return self.reply(504, {"error": "not yet", "errno": "ETIMEDOUT"})
            return self.reply(200, {"ok": True, "waited_s": 0.1})
        self.reply(404, {"error": "no such endpoint", "errno": "ENOENT"})

class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

if os.path.exists(sock):
    os.unlink(sock)
S(sock, H).serve_forever()
PYEOF
    MSOCK="$W/mock.sock"
    MLOG="$W/mock.log"
    : >"$MLOG"
    python3 "$W/mock.py" "$MSOCK" "$MLOG" &
    MOCK_PID=$!
    if wait_for "the scripted API socket" 20 test -S "$MSOCK"; then
        T=("$TIERCTL" -s "$MSOCK")
        run "status table" 0 "${T[@]}" status
        contains "status: version and mount" "tierd 0.1.0, up 1h02m, mounted at /mnt/fake"
        contains "status: ram level" "ram        1.0 MiB"
        contains "status: hit ratio" "hit ratio  90.0%"
        contains "status: write-back line" "write-back 2.0 MiB not yet uploaded: 1 open, 3 sealed (2 held while writers write), 1 uploading, 0 failed; 7 uploaded since start"
        contains "status: namespace row" "/ds"
        contains "status: namespace prefix" "data/"
        run "status --json" 0 "${T[@]}" status --json
        if printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["cache"]["disk"]["used"] == 3145728'; then
            pass "status --json is the raw JSON"
        else
            fail "status --json did not print the API's JSON: $OUT"
        fi

        run "stage (plain output)" 0 "${T[@]}" stage /ds
        contains "stage: summary" "staged 3 of 3 files"
        case "$OUT" in
        *staging:*) fail "stage: a short job printed a periodic line: $OUT" ;;
        *) pass "stage: a short job prints only the summary" ;;
        esac
        run "stage (plain output, ~3 s job)" 0 "${T[@]}" stage /ds/slow
        contains "stage: periodic plain line" "staging: "
        contains "stage: periodic line has files" "files, "
        grep -q '^POST /v1/stage {"paths": \["/ds"\], "pin": false}$' "$MLOG" &&
            pass "stage request body" || fail "stage request body: $(grep stage "$MLOG")"

        run "stage under the mount point, --pin" 0 "${T[@]}" stage --pin /mnt/fake/ds/sub
        grep -q '"paths": \["/ds/sub"\], "pin": true' "$MLOG" &&
            pass "mount prefix stripped, pin sent" || fail "mount path: $(grep stage "$MLOG")"

        if command -v script >/dev/null; then
            OUT=$(script -qec "$TIERCTL -s $MSOCK stage /ds" /dev/null 2>&1)
            RC=$?
            [ "$RC" -eq 0 ] && pass "stage on a tty (exit 0)" || fail "stage on a tty: exit $RC"
            contains "tty: progress bar redrawn with \\r" $'\r['
            contains "tty: bar shows files and ETA" "3/3 files"
            contains "tty: ETA field" "ETA"
        fi

        run "stage with failures" 1 "${T[@]}" stage /fails
        contains "stage failure: first error" "first error: /fails/a.bin: injected failure"
        contains "stage failure: count" "2 files could not be staged"
        run "stage missing path: API error" 4 "${T[@]}" stage /missing/x
        contains "API error message from JSON" "tierctl: /missing: no such file or directory"
        run "stage --no-wait" 0 "${T[@]}" stage --no-wait /ds
        contains "no-wait prints the job" "staging job 1 started"
        run "stage --job of an unknown job" 4 "${T[@]}" stage --job 99
        contains "unknown job message" "no staging job 99"

        run "pin" 0 "${T[@]}" pin /ds/models
        contains "pin output" "pinned /ds/models"
        run "pin over budget" 4 "${T[@]}" pin /big
        contains "pin over budget message" "pin budget has 1.0 MiB left"
        run "unpin" 0 "${T[@]}" unpin /mnt/fake/ds/models
        grep -q '^POST /v1/unpin {"path": "/ds/models"}$' "$MLOG" &&
            pass "unpin strips the mount prefix" || fail "unpin body: $(grep unpin "$MLOG")"
        run "evict" 0 "${T[@]}" evict /ds
        contains "evict output" "evicted 7 blocks under /ds"

        # write-back: wait, checkpoints
        run "wait: durable" 0 "${T[@]}" wait /mnt/fake/ck/run1
        contains "wait: message" "/ck/run1 is durable in the backend"
        grep -q '^POST /v1/wait {"path": "/ck/run1", "timeout_s": 20.0}$' "$MLOG" &&
            pass "wait: mount prefix stripped, 20 s request chunks" ||
            fail "wait body: $(grep wait "$MLOG")"
        run "wait: 504 answers are retried until durable" 0 "${T[@]}" wait /ck/later
        [ "$(grep -c '"path": "/ck/later"' "$MLOG")" -eq 3 ] &&
            pass "wait: three requests for /ck/later" ||
            fail "wait /ck/later requests: $(grep later "$MLOG")"
        t0=$SECONDS
        run "wait: timeout exits 1" 1 "${T[@]}" wait /ck/never --timeout 1.5
        contains "wait: timeout message" "timed out after 2s: /ck/never is not yet durable"
        [ $((SECONDS - t0)) -le 10 ] && pass "wait: --timeout bounds the wait" ||
            fail "wait --timeout 1.5 took $((SECONDS - t0)) s"
        grep -Eq '"path": "/ck/never", "timeout_s": 1\.[0-9]+}$' "$MLOG" &&
            pass "wait: timeout passed to the API" || fail "wait never: $(grep never "$MLOG")"
        run "wait --timeout 0" 1 "${T[@]}" wait /ck/never --timeout 0
        run "wait: not a write-back namespace" 4 "${T[@]}" wait /ds/x
        contains "wait: 404 message" "not in write-back mode"
        run "wait: no write-back configured" 4 "${T[@]}" wait /nowb
        contains "wait: 503 message" "no namespace is in write-back mode"
        run "wait: bad timeout" 2 "${T[@]}" wait /ck --timeout soon
        run "wait: no path" 2 "${T[@]}" wait
        run "checkpoints table" 0 "${T[@]}" checkpoints
        contains "checkpoints: header" "STATE      SIZE        UPLOAD               AGE     PATH"
        contains "checkpoints: uploading row" "uploading  256.0 MiB   12/32 parts (38%)    1m15s   /ck/run1/model.pt"
        contains "checkpoints: uploaded row" "uploaded   1.0 MiB     done                 1h02m   /ck/run1/optim.pt"
        contains "checkpoints: sealed row" "sealed     4.0 KiB     queued"
        run "checkpoints --json under the mount" 0 "${T[@]}" checkpoints --json "/mnt/fake/ck/run 1"
        if printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["files"][1]["uploaded_etag"] == "\"0123abcd\""'; then
            pass "checkpoints --json is the raw JSON"
        else
            fail "checkpoints --json: $OUT"
        fi
        grep -q '^GET /v1/checkpoints?path=/ck/run%201$' "$MLOG" &&
            pass "checkpoints: path escaped in the query" ||
            fail "checkpoints query: $(grep checkpoints "$MLOG")"
        run "checkpoints of a read-cache namespace" 4 "${T[@]}" checkpoints /ds
        contains "checkpoints: 404 message" "not in write-back mode"
    fi
    kill "$MOCK_PID" 2>/dev/null
    wait "$MOCK_PID" 2>/dev/null
    MOCK_PID=
fi

# ---- 3. the real tierd ---------------------------------------------------------------------
if [ -z "$TIERD" ] || [ ! -x "$TIERD" ]; then
    echo "skip: tierd is not built; the real-daemon part did not run"
elif [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
    echo "skip: no /dev/fuse or fusermount3; the real-daemon part did not run"
else
    DATA="$W/data"
    MNT="$W/mnt"
    SOCK="$W/api.sock"
    mkdir -p "$DATA/ds/a" "$DATA/ds/b/c" "$MNT" "$W/cache"
    # 1,000 small files (1..8 KiB), in three directories.
    python3 - "$DATA/ds" <<'PYEOF'
import os, random, sys
root = sys.argv[1]
r = random.Random(7)
for i in range(1000):
    d = ("", "a/", "b/c/")[i % 3]
    with open(os.path.join(root, "%sf%04d.bin" % (d, i)), "wb") as f:
        f.write(r.randbytes(r.randint(1024, 8192)))
PYEOF
    TOTAL=$(find "$DATA/ds" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    {
        tierd_conf_section cache "block_size = 64K" "ram_size = 8M" "disk_dir = $W/cache" \
            "disk_size = 256M" "pin_size = 64M"
        tierd_conf_posix warm "$DATA"
        tierd_conf_ns /ns warm "prefix = ds/" "mode = read-cache"
        tierd_conf_mount "$MNT"
        tierd_conf_api "$SOCK" "tcp = 127.0.0.1:$PORT" "token = s3cret-token-0123456789"
        tierd_conf_section daemon "stage_threads = 8"
    } >"$W/tierd.conf"
    tierd_spawn "$W/tierd.conf" "$W/tierd.log"
    sock_up() { test -S "$SOCK" || ! tierd_alive; }
    wait_for "tierd's control socket" 30 sock_up
    if ! tierd_alive; then
        fail "tierd exited at start; its log:"
        sed 's/^/    /' "$W/tierd.log"
    else
        T=("$TIERCTL" -s "$SOCK")
        run "real: stage /ns" 0 "${T[@]}" stage /ns
        contains "real: all files staged" "staged 1000 of 1000 files"
        run "real: second stage is idempotent" 0 "${T[@]}" stage /ns
        contains "real: second run finds every byte cached" "staged 1000 of 1000 files"
        cached=$(printf '%s' "$OUT" | sed -n 's/.*; \(.*\) of it already cached.*/\1/p')
        staged=$(printf '%s' "$OUT" | sed -n 's/.*files, \(.*\) in .*/\1/p')
        [ -n "$cached" ] && [ "$cached" = "$staged" ] &&
            pass "real: already cached ($cached) == staged bytes" ||
            fail "real: already cached '$cached' != staged '$staged'"
        run "real: status --json" 0 "${T[@]}" status --json
        if printf '%s' "$OUT" | python3 -c '
import json, sys
d = json.load(sys.stdin)
c = d["cache"]
used = max((c.get("ram") or {}).get("used", 0), (c.get("disk") or {}).get("used", 0))
sys.exit(0 if used >= int(sys.argv[1]) else 1)' "$TOTAL"; then
            pass "real: status shows >= $TOTAL bytes cached"
        else
            fail "real: status does not show $TOTAL bytes cached: $OUT"
        fi
        run "real: status table" 0 "${T[@]}" status
        contains "real: namespace listed" "/ns"
        run "real: status over TCP with the token" 0 "$TIERCTL" --tcp "127.0.0.1:$PORT" --token s3cret-token-0123456789 status
        contains "real: TCP status" "/ns"
        run "real: TCP with a wrong token is refused" 4 "$TIERCTL" --tcp "127.0.0.1:$PORT" --token wrong status
        run "real: pin" 0 "${T[@]}" pin /ns/a
        run "real: evict keeps pinned blocks" 0 "${T[@]}" evict /ns/a
        contains "real: nothing evicted while pinned" "evicted 0 blocks"
        run "real: unpin" 0 "${T[@]}" unpin /ns/a
        run "real: evict after unpin" 0 "${T[@]}" evict /ns/a
        case "$OUT" in
        "evicted 0 blocks"*) fail "real: evict after unpin dropped nothing: $OUT" ;;
        "evicted "*) pass "real: evict after unpin dropped blocks ($OUT)" ;;
        *) fail "real: evict output: $OUT" ;;
        esac
        run "real: stage of a missing path" 4 "${T[@]}" stage /ns/does-not-exist
        run "real: stage through the mount path" 0 "${T[@]}" stage "$MNT/ns/a"
        contains "real: re-staged the evicted files" "staged 333 of 333 files"
        run "real: wait without a write-back namespace" 4 "${T[@]}" wait /ns
        contains "real: wait says how to configure write-back" "no namespace is in write-back mode"
        run "real: checkpoints without a write-back namespace" 4 "${T[@]}" checkpoints
        contains "real: checkpoints message" "no namespace is in write-back mode"
        run "real: cluster without a [cluster] section" 0 "${T[@]}" cluster
        contains "real: cluster says there is none" "no cluster: tierd has no [cluster] section"
        run "real: cluster --json without a [cluster] section" 0 "${T[@]}" cluster --json
        contains "real: GET /v1/cluster is disabled" '{"enabled":false}'
        run "real: advise without curves" 0 "${T[@]}" advise
        contains "real: advise says how to turn the curves on" "no advice: set [cache] curves = on"
        run "real: advise --json without curves" 0 "${T[@]}" advise --json
        contains "real: GET /v1/advice is disabled" '"enabled":false'
        # Stop tierd; then the documented message again.
        kill -TERM "$TIERD_PID"
        gone() { ! kill -0 "$TIERD_PID" 2>/dev/null; }
        wait_for "tierd to stop" 30 gone
        wait "$TIERD_PID" 2>/dev/null
        TIERD_PID=
        run "real: after tierd stopped" 3 "${T[@]}" status
    fi
fi

# ---- 4. the real tierd with a write-back namespace -----------------------------------------
if [ -n "$TIERD" ] && [ -x "$TIERD" ] && [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
    WB_MNT="$W/wbmnt"
    WSOCK="$W/wbapi.sock"
    mkdir -p "$W/wbdata" "$WB_MNT" "$W/wbcache" "$W/src"
    # An S3 endpoint that knows no objects and refuses every upload (503 SlowDown): uploads to it
    # are retried forever, so files of the /slow namespace stay pending.
    cat >"$W/s3stub.py" <<'PYEOF'
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def reply(self, code, body=b""):
        self.send_response(code)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def drain(self):
        n = int(self.headers.get("Content-Length", "0"))
        while n > 0:
            n -= len(self.rfile.read(min(n, 1 << 20)) or b"x" * n)
    def do_HEAD(self):
        self.reply(404)
    def do_GET(self):
        if "list-type" in self.path or "prefix=" in self.path:
            return self.reply(200, b'<?xml version="1.0"?><ListBucketResult><IsTruncated>false'
                              b'</IsTruncated></ListBucketResult>')
        self.reply(404, b"<Error><Code>NoSuchKey</Code></Error>")
    def do_PUT(self):
        self.drain()
        self.reply(503, b"<Error><Code>SlowDown</Code></Error>")
    do_POST = do_PUT
    do_DELETE = do_PUT

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
PYEOF
    python3 "$W/s3stub.py" "$W/s3stub.port" &
    STUB_PID=$!
    wait_for "the S3 stub" 20 test -s "$W/s3stub.port"
    STUB_PORT=$(cat "$W/s3stub.port")
    {
        tierd_conf_section cache "block_size = 64K" "ram_size = 8M" "disk_dir = $W/wbcache" \
            "disk_size = 256M"
        tierd_conf_section writeback "spool_dir = $W/spool" "part_size = 5M"
        tierd_conf_posix cold "$W/wbdata"
        tierd_conf_ns /ck cold "prefix = ckpt/" "mode = write-back"
        tierd_conf_section "backend dead" "type = s3" "endpoint = http://127.0.0.1:$STUB_PORT" \
            "bucket = never" "path_style = true" "access_key = AK" "secret_key = SK"
        tierd_conf_ns /slow dead "mode = write-back"
        tierd_conf_mount "$WB_MNT"
        tierd_conf_api "$WSOCK"
    } >"$W/wb.conf"
    tierd_spawn "$W/wb.conf" "$W/wbtierd.log"
    WB_PID=$TIERD_PID
    wb_up() { test -S "$WSOCK" || ! kill -0 "$WB_PID" 2>/dev/null; }
    wait_for "tierd's control socket (write-back)" 30 wb_up
    mounted() { [ "$(stat -c %i "$WB_MNT" 2>/dev/null)" = 1 ] || ! kill -0 "$WB_PID" 2>/dev/null; }
    wait_for "the write-back mount" 30 mounted
    if ! kill -0 "$WB_PID" 2>/dev/null; then
        fail "tierd with a write-back namespace exited at start; its log:"
        sed 's/^/    /' "$W/wbtierd.log"
    elif ! mkdir "$WB_MNT/ck/run1" 2>"$W/wbmkdir.err"; then
        fail "mkdir in the write-back namespace fails: $(cat "$W/wbmkdir.err")"
    else
        T=("$TIERCTL" -s "$WSOCK")
        head -c $((12 << 20)) /dev/urandom >"$W/src/model.pt" # 3 parts of 5 MiB
        head -c 100000 /dev/urandom >"$W/src/rng.pt"
        cp "$W/src/model.pt" "$W/src/rng.pt" "$WB_MNT/ck/run1/" ||
            fail "writing into the write-back namespace failed"
        run "wb: wait for the checkpoint" 0 "${T[@]}" wait "$WB_MNT/ck/run1" --timeout 60
        contains "wb: wait message" "/ck/run1 is durable in the backend"
        for f in model.pt rng.pt; do
            cmp -s "$W/src/$f" "$W/wbdata/ckpt/run1/$f" &&
                pass "wb: backend copy of $f is byte-identical" ||
                fail "wb: backend copy of $f differs or is missing"
        done
        run "wb: checkpoints --json" 0 "${T[@]}" checkpoints --json /ck/run1
        if printf '%s' "$OUT" | python3 -c '
import json, sys
files = {f["path"]: f for f in json.load(sys.stdin)["files"]}
for name, size in (("/ck/run1/model.pt", 12 << 20), ("/ck/run1/rng.pt", 100000)):
    f = files[name]
    assert f["state"] in ("uploaded", "evictable"), f
    assert f["size"] == size and f["uploaded_etag"], f
'; then
            pass "wb: checkpoints lists both files as uploaded, with sizes and ETags"
        else
            fail "wb: checkpoints --json: $OUT"
        fi
        run "wb: checkpoints table" 0 "${T[@]}" checkpoints
        contains "wb: table row" "/ck/run1/model.pt"
        run "wb: wait on one file" 0 "${T[@]}" wait /ck/run1/rng.pt --timeout 10
        run "wb: status shows the mode" 0 "${T[@]}" status
        contains "wb: namespace mode" "write-back"
        run "wb: wait outside any namespace" 4 "${T[@]}" wait /elsewhere
        run "wb: wait on a path that does not exist (a typo is not 'durable')" 4 "${T[@]}" wait /ck/rnu1
        contains "wb: no such path message" "/ck/rnu1: no such file or directory"
        run "wb: wait on the namespace root" 0 "${T[@]}" wait /ck --timeout 10

        # A wait that cannot finish (the backend refuses uploads) times out with exit 1, and while
        # it blocks in tierd, other API requests are answered.
        head -c 1000 /dev/urandom >"$WB_MNT/slow/x.bin" || fail "write into /slow failed"
        t0=$SECONDS
        # 30 s: the connection (up to 10 s) and the status below (up to 10 s) must both come while
        # it still blocks, also on a loaded machine
        "$TIERCTL" -s "$WSOCK" wait /slow --timeout 30 >"$W/slowwait.out" 2>&1 &
        SLOW_PID=$!
        # the wait is in flight once tierctl holds a connected socket
        # shellcheck disable=SC2010 # /proc/PID/fd entries are numbers
        connected() { ls -l "/proc/$SLOW_PID/fd" 2>/dev/null | grep -q 'socket:' || ! kill -0 "$SLOW_PID" 2>/dev/null; }
        wait_for "tierctl wait's connection" 10 connected
        run "wb: status while a wait blocks" 0 timeout 10 "${T[@]}" status
        if kill -0 "$SLOW_PID" 2>/dev/null; then
            pass "wb: status answered while the wait was still blocked"
        else
            fail "wb: the wait on /slow ended before status was answered: $(cat "$W/slowwait.out")"
        fi
        run "wb: checkpoints of the pending file" 0 "${T[@]}" checkpoints --json /slow/x.bin
        if printf '%s' "$OUT" | python3 -c '
import json, sys
f = json.load(sys.stdin)["files"]
assert len(f) == 1 and f[0]["state"] in ("sealed", "uploading") and f[0]["uploaded_etag"] is None, f
'; then
            pass "wb: the pending file is listed as not uploaded"
        else
            fail "wb: checkpoints /slow/x.bin: $OUT"
        fi
        wait "$SLOW_PID"
        RC=$?
        OUT=$(cat "$W/slowwait.out")
        [ "$RC" -eq 1 ] && pass "wb: wait on a down backend exits 1 after --timeout" ||
            fail "wb: wait /slow exit $RC: $OUT"
        contains "wb: timeout message" "is not yet durable in the backend"

        # A sealed file whose spool copy no longer matches its seal checksum is FAILED (it used
        # to be uploaded as is): wait fails and says why, checkpoints shows the state and error.
        head -c 3000 /dev/urandom >"$WB_MNT/slow/bad.bin" || fail "write /slow/bad.bin failed"
        stg=$(ls -t "$W/spool"/*.stg | head -n 1)
        python3 -c 'import sys
with open(sys.argv[1], "r+b") as f:  # flip a bit: the copy differs whatever the byte was
    f.seek(100); b = f.read(1); f.seek(100); f.write(bytes([b[0] ^ 1]))' "$stg" ||
            fail "corrupting $stg failed"
        run "wb: wait on a corrupted file fails" 4 "${T[@]}" wait /slow/bad.bin --timeout 60
        contains "wb: wait names the seal checksum" "seal checksum"
        run "wb: checkpoints of the failed file" 0 "${T[@]}" checkpoints /slow/bad.bin
        contains "wb: checkpoints shows failed" "failed"
        contains "wb: checkpoints shows the error" "error: "
        # at least its 30 s timeout (less by SECONDS' whole-second rounding); the upper bound
        # only catches a wait that ignores its timeout
        [ $((SECONDS - t0)) -ge 29 ] && [ $((SECONDS - t0)) -le 120 ] &&
            pass "wb: the wait lasted at least its timeout ($((SECONDS - t0)) s)" ||
            fail "wb: the wait with --timeout 30 took $((SECONDS - t0)) s"
    fi
fi

tierd_counted_result
