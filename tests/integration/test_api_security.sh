#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_api_security.sh - the control API against hostile or careless clients (security review
# 2026-12-01, findings 3, 4, 8, 12, 13, 18), run by CTest as
#   test_api_security.sh TIERCTL TIERD
#
# One real tierd (FUSE mount; a POSIX read-cache namespace, a POSIX write-back namespace and an S3
# stub that accepts nothing and never answers a GET), started with a soft RLIMIT_NOFILE of 1024:
#  8  names that are not UTF-8 (a write-back file and a backend file named caf\xe9, /v1/stage/%E9,
#     a 300 x "é" path) get a JSON answer, never an empty reply or a 500; path_b64 names the file.
#  3  1,100 idle TCP connections: the Unix socket still answers.
#  4  the TCP listener speaks TLS only; the token comes from a 0600 token_file; tierctl takes it
#     from --token-file / $TIERD_TOKEN and warns about --token; a non-loopback tcp without TLS and
#     a weak token are refused at start with FILE:LINE.
#  12 socket mode 0660 with [api] socket_group; another uid (nobody) may GET but not POST (403);
#     a socket directory others may write is refused.
#  13 a second staging job while max_stage_jobs run is 429; a wait is bounded by max_wait; a body
#     over 64 KiB is cut off without being read; more than 256 stage paths are refused.
#  18 a backend's permission refusal is 403, not 401.
# And from the review of 2026-12-02:
#  N5 70 idle connections of nobody do not lock root out of the Unix socket: per-uid cap (429,
#     logged once), slots kept for admins when several uids fill the users' share (503), a short
#     idle timeout for non-admins; short, abandoned and unannounced-dropped connections are all
#     given back.
#  N10 nobody sees checkpoints, dataset versions and plans only of the namespaces it may read
#     (umask 077 ones are left out or 403); its plans are rate-limited (429, Retry-After).
# No sleeps as synchronisation: every wait polls a condition with a deadline.
set -u

TIERCTL=${1:?usage: test_api_security.sh TIERCTL TIERD}
TIERD=${2:?usage: test_api_security.sh TIERCTL TIERD}
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null || ! command -v python3 >/dev/null ||
    ! command -v openssl >/dev/null || ! command -v curl >/dev/null; then
    echo "skip: needs /dev/fuse, fusermount3, python3, openssl and curl"
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v runuser >/dev/null || ! getent group nogroup >/dev/null; then
    echo "skip: needs root, runuser and the group nogroup (a caller of another uid, chgrp of the socket)"
    exit 0
fi
# shellcheck source=scripts/lib/tierd.sh
. "$(dirname "$0")/../../scripts/lib/tierd.sh"
tierd_counted_checks # fail counts a failed check and carries on; pass, run, contains, wait_for
tierd_scratch apisec
W=$T
# the socket's directory must be reachable by nobody (runuser below): one of its own under /tmp
SD=$(mktemp -d /tmp/tierd-apisec.XXXXXX)
chmod 755 "$SD"
TIERD_PID=
STUB_PID=
MNT="$W/mnt"
SOCK="$SD/api.sock"

cleanup() {
    tierd_reap "$TIERD_PID"
    tierd_unmount "$MNT"
    if [ -n "$STUB_PID" ]; then kill "$STUB_PID" 2>/dev/null; wait "$STUB_PID" 2>/dev/null; fi
    rm -rf "$W" "$SD"
}
trap cleanup EXIT

# probe NAME WANT_STATUS METHOD URL [BODY]: one request over the Unix socket (URL sent as is);
# the answer must be a JSON object with the wanted status. Sets ST and BODY.
probe() {
    local name=$1 want=$2 method=$3 url=$4 body=${5-}
    local args=(-s --path-as-is --max-time 120 --unix-socket "$SOCK" -X "$method" -o "$W/probe.out"
        -w '%{http_code}')
    [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
    rm -f "$W/probe.out"
    ST=$(curl "${args[@]}" "http://tierd$url")
    BODY=$(cat "$W/probe.out" 2>/dev/null)
    if ! python3 -c 'import json,sys; d=json.load(open(sys.argv[1],"rb")); assert isinstance(d, dict)' \
        "$W/probe.out" 2>/dev/null; then
        fail "$name: $method $url: status $ST, body is not a JSON object: '$BODY'"
    elif [ "$ST" != "$want" ]; then
        fail "$name: $method $url: status $ST, want $want: $BODY"
    else
        pass "$name ($ST)"
    fi
}

# ---- setup ---------------------------------------------------------------------------------
mkdir -p "$W/data/ds/a" "$W/data/ds/plan" "$W/data/pv/t" "$W/wbdata" "$W/cache" "$MNT"
printf 'open\n' >"$W/data/ds/plan/keep.txt"
printf 'secret\n' >"$W/data/pv/secret.bin"
printf 'latin-1 name\n' >"$W/data/ds/caf"$'\xe9'
printf 'hello\n' >"$W/data/ds/a/f.txt"
ln -s /etc "$W/data/ds/esc"
# S3 stub: HEAD big.bin answers a 4 MiB object, a GET of it never answers (a staging job that
# stays running), listings are empty, every upload is refused with 503.
cat >"$W/s3stub.py" <<'PYEOF'
import os, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
hang = threading.Event()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def reply(self, code, body=b"", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", "application/xml")
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)) if self.command != "HEAD" or code != 200 else str(4 << 20))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def drain(self):
        n = int(self.headers.get("Content-Length", "0"))
        while n > 0:
            n -= len(self.rfile.read(min(n, 1 << 20)) or b"x" * n)
    def do_HEAD(self):
        if self.path.split("?")[0].endswith("/big.bin"):
            return self.reply(200, extra=(("ETag", '"e1"'), ("Last-Modified", "Mon, 01 Dec 2025 00:00:00 GMT")))
        self.reply(404)
    def do_GET(self):
        if "list-type" in self.path or "prefix=" in self.path or "uploads" in self.path:
            return self.reply(200, b'<?xml version="1.0"?><ListBucketResult><IsTruncated>false'
                              b'</IsTruncated></ListBucketResult>')
        if self.path.split("?")[0].endswith("/big.bin"):
            hang.wait(600)
            return
        self.reply(404, b"<Error><Code>NoSuchKey</Code></Error>")
    def do_PUT(self):
        self.drain()
        self.reply(503, b"<Error><Code>SlowDown</Code></Error>")
    do_POST = do_PUT
    do_DELETE = do_PUT
class S(ThreadingHTTPServer):
    daemon_threads = True
srv = S(("127.0.0.1", 0), H)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
PYEOF
python3 "$W/s3stub.py" "$W/s3stub.port" &
STUB_PID=$!
wait_for "the S3 stub" 180 test -s "$W/s3stub.port"
STUB_PORT=$(cat "$W/s3stub.port")
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
head -c 24 /dev/urandom | base64 >"$W/api.token"
chmod 600 "$W/api.token"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$W/key.pem" -out "$W/cert.pem" >/dev/null 2>&1 ||
    fail "openssl could not make a test certificate"
chmod 600 "$W/key.pem"

{
    tierd_conf_section cache "block_size = 64K" "ram_size = 8M" "disk_dir = $W/cache" \
        "disk_size = 64M"
    tierd_conf_section writeback "spool_dir = $W/spool" "part_size = 5M"
    tierd_conf_posix warm "$W/data"
    tierd_conf_ns /ns warm "prefix = ds/"
    tierd_conf_posix cold "$W/wbdata"
    tierd_conf_ns /ck cold "prefix = ckpt/" "mode = write-back"
    tierd_conf_section "backend dead" "type = s3" "endpoint = http://127.0.0.1:$STUB_PORT" \
        "bucket = never" "access_key = AK" "secret_key = SK" "max_retries = 0" \
        "request_timeout = 3s"
    tierd_conf_ns /slow dead "mode = write-back"
    tierd_conf_ns /hang dead "prefix = h/"
    tierd_conf_ns /priv warm "prefix = pv/" "umask = 077"
    tierd_conf_ns /ckp cold "prefix = ckp/" "mode = write-back" "umask = 077"
    tierd_conf_section "policy open-plan" "namespace = /ns" "glob = plan/*.txt" "action = demote"
    tierd_conf_section "policy priv-plan" "namespace = /priv" "glob = *.bin" "action = demote"
    tierd_conf_mount "$MNT" "allow_other = true" "umask = 022"
    tierd_conf_section daemon "stage_threads = 1" "policy_interval = 24h" # plans only, no pass
    tierd_conf_api "$SOCK" "tcp = 127.0.0.1:$PORT" "token_file = $W/api.token" \
        "tls_cert = $W/cert.pem" "tls_key = $W/key.pem" "socket_group = nogroup" \
        "max_connections = 32" "max_wait = 2s" "max_stage_jobs = 1" "user_timeout = 15s"
} >"$W/tierd.conf"
# the common default soft limit: a connection flood must not exhaust tierd's descriptors
# TIERD_TEST_FAULT_FILE (test builds): "api lose uid UID" makes the gate drop that uid's admitted
# connections as MHD does when it cannot set one up (no notification); see N5 below
: >"$W/fault"
(ulimit -Sn 1024 && TIERD_TEST_FAULT_FILE="$W/fault" exec "$TIERD" -f -c "$W/tierd.conf") \
    >"$W/tierd.log" 2>&1 &
TIERD_PID=$!
up() { [ "$(stat -c %i "$MNT" 2>/dev/null)" = 1 ] && test -S "$SOCK" || ! kill -0 "$TIERD_PID" 2>/dev/null; }
wait_for "tierd's mount and socket" 180 up
if ! kill -0 "$TIERD_PID" 2>/dev/null; then
    fail "tierd exited at start; its log:"
    sed 's/^/    /' "$W/tierd.log"
    exit 1
fi
T=("$TIERCTL" -s "$SOCK")

# ---- finding 8: names that are not UTF-8 --------------------------------------------------
mkdir "$MNT/ck/run1" && printf 'x\n' >"$MNT/ck/run1/caf"$'\xe9' || fail "write of caf\\xe9 failed"
probe "F8: /v1/checkpoints lists a non-UTF-8 write-back file" 200 GET /v1/checkpoints
if printf '%s' "$BODY" | python3 -c '
import base64, json, sys
files = json.load(sys.stdin)["files"]
f = [f for f in files if f.get("path_b64")]
assert len(f) == 1, files
assert base64.b64decode(f[0]["path_b64"]) == b"/ck/run1/caf\xe9", f
assert f[0]["path"] == "/ck/run1/caf\ufffd", f
assert base64.b64decode(f[0]["key_b64"]) == b"ckpt/run1/caf\xe9", f
'; then pass "F8: path shown with U+FFFD, exact bytes in path_b64/key_b64"; else
    fail "F8: checkpoints answer: $BODY"; fi
run "F8: tierctl checkpoints with a non-UTF-8 name" 0 "${T[@]}" checkpoints
contains "F8: tierctl lists the file" "/ck/run1/caf"
probe "F8: /v1/stage/%E9" 400 GET /v1/stage/%E9
probe "F8: /v1/checkpoints?path=/ns/%E9" 404 GET "/v1/checkpoints?path=/ns/%E9"
probe "F8: /v1/checkpoints?path=/ck/%E9" 200 GET "/v1/checkpoints?path=/ck/%E9"
probe "F8: /v1/%FF" 404 GET /v1/%FF
E300=$(python3 -c 'print("é" * 300)')
probe "F8: pin of a 300 x é path" 400 POST /v1/pin "{\"path\": \"/ns/$E300\"}"
probe "F8: stage of a non-UTF-8 posix file" 202 POST /v1/stage '{"paths": ["/ns"]}'
JOB=$(printf '%s' "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"])')
stage_done() { probe "F8: stage job $JOB" 200 GET "/v1/stage/$JOB" >/dev/null; case "$BODY" in *'"running"'*) return 1 ;; esac; }
wait_for "the staging job" 180 stage_done
probe "F8: stage progress of the job" 200 GET "/v1/stage/$JOB"

# ---- finding 18: a backend's permission refusal is 403 -------------------------------------
probe "F18: pin through a symlink out of the backend" 403 POST /v1/pin '{"path": "/ns/esc/passwd"}'

# ---- finding 12: socket mode and group, readers and admins ---------------------------------
[ "$(stat -c '%a %G' "$SOCK")" = "660 nogroup" ] && pass "F12: socket mode 0660, group nogroup" ||
    fail "F12: socket is $(stat -c '%a %U:%G' "$SOCK")"
OUT=$(runuser -u nobody -- curl -s --max-time 60 --unix-socket "$SOCK" -w ' %{http_code}' http://tierd/v1/status 2>&1)
case "$OUT" in *'"namespaces"'*' 200') pass "F12: nobody (group nogroup) may GET /v1/status" ;;
*) fail "F12: nobody's GET: $OUT" ;; esac
OUT=$(runuser -u nobody -- curl -s --max-time 60 --unix-socket "$SOCK" -w ' %{http_code}' \
    -d '{"path": "/ns/a"}' http://tierd/v1/evict 2>&1)
case "$OUT" in *'"errno":"EPERM"'*' 403') pass "F12: nobody's POST /v1/evict is 403" ;;
*) fail "F12: nobody's POST: $OUT" ;; esac
OUT=$(runuser -u nobody -- curl -s --max-time 60 --unix-socket "$SOCK" -w ' %{http_code}' \
    -d '{"path": "/ck", "timeout_s": 0}' http://tierd/v1/wait 2>&1)
case "$OUT" in *' 403') fail "F12: nobody's POST /v1/wait (a read) refused: $OUT" ;;
*'"error"'*|*'"ok"'*) pass "F12: nobody may POST /v1/wait (it changes nothing)" ;;
*) fail "F12: nobody's wait: $OUT" ;; esac
probe "F12: root may POST /v1/evict" 200 POST /v1/evict '{"path": "/ns/a"}'

# ---- N5: one socket-group member cannot lock out root ------------------------------------------
# nobody (group nogroup, which may connect) opens 70 connections and sends nothing. tierd keeps
# max_connections_per_uid (8) of them, answers the others 429 at once, and closes the 8 after
# user_timeout (15 s); root's tierctl gets in meanwhile, and so does another uid of the group.
# Two more uids then take 8 each: the users' share (32 - admin_connections 8 = 24) is full, a
# fourth uid gets 503, and root still gets in.
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
PY3=/usr/bin/python3 # the system's: root's PATH may lead to a python only root may run
NB="$SD/nobody"      # where nobody's helpers write
mkdir -p "$NB" && chown 65534:65534 "$NB"
cat >"$SD/hold.py" <<'PYEOF'
# hold.py SOCK N DIR: open N idle connections, write DIR/ready; once DIR/count exists, wait for
# each to end and write DIR/result: "answered-429 answered-503 closed-silently still-open"
import os, select, socket, sys, time
path, n, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conns = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    conns.append(s)
t0 = time.time()
open(d + "/ready", "w").write(str(len(conns)))
deadline = time.time() + 180
while not os.path.exists(d + "/count") and time.time() < deadline:
    time.sleep(0.05)
# every connection must end: refused ones with an answer, admitted ones by user_timeout (15 s;
# an administrator's connection would stay 60 s, past this bound)
got = {s: b"" for s in conns}
open_ = set(conns)
deadline = t0 + 45
while open_ and time.time() < deadline:
    r, _, _ = select.select(list(open_), [], [], 1)
    for s in r:
        data = s.recv(4096)
        if data:
            got[s] += data
        else:
            open_.discard(s)
n429 = sum(1 for s in conns if got[s].startswith(b"HTTP/1.1 429"))
n503 = sum(1 for s in conns if got[s].startswith(b"HTTP/1.1 503"))
silent = sum(1 for s in conns if s not in open_ and not got[s])
with open(d + "/result.tmp", "w") as f:
    f.write("%d %d %d %d\n" % (n429, n503, silent, len(open_)))
os.rename(d + "/result.tmp", d + "/result")
PYEOF
hold() { # UID N DIR: hold.py as UID (group nogroup) in the background
    mkdir -p "$3" && chown "$1:65534" "$3"
    setpriv --reuid="$1" --regid=65534 --clear-groups "$PY3" "$SD/hold.py" "$SOCK" "$2" "$3" &
}
hold_result() { # NAME DIR WANT: the holder's result line must be WANT
    local got=
    wait_for "$1's connections to end" 180 test -s "$2/result" && got=$(cat "$2/result")
    [ "$got" = "$3" ] && pass "N5: $1's connections ended as expected ($got)" ||
        fail "N5: $1's connections: '$got' (want '$3': 429s, 503s, closed by user_timeout, open)"
}
hold 65534 70 "$NB/h"
HOLD_PIDS=($!)
wait_for "nobody's 70 connections" 180 test -s "$NB/h/ready"
# all 70 connect() calls have returned: root's connection queues behind them on the socket
run "N5: root's tierctl status while nobody holds 70 connections" 0 timeout 120 "${T[@]}" status
contains "N5: status answered" "/ns"
api_field() { curl -s --max-time 60 --unix-socket "$SOCK" http://tierd/v1/status |
    python3 -c 'import json,sys; a=json.load(sys.stdin)["api"]; print(a[sys.argv[1]])' "$1" 2>/dev/null; }
held() { [ "$(api_field connections_user)" = "$1" ] && [ "$(api_field refused_connections)" -ge 62 ]; }
wait_for "tierd to hold 8 of nobody's connections and refuse 62" 180 held 8
OUT=$(setpriv --reuid=4321 --regid=65534 --clear-groups curl -s --max-time 60 --unix-socket "$SOCK" \
    -w ' %{http_code}' http://tierd/v1/health 2>&1)
case "$OUT" in *' 200') pass "N5: another uid of the socket group gets in too" ;;
*) fail "N5: uid 4321 while nobody holds its share: $OUT" ;; esac
OUT=$("${AS_NOBODY[@]}" curl -s --max-time 60 --unix-socket "$SOCK" -w ' %{http_code}' http://tierd/v1/health 2>&1)
case "$OUT" in *'max_connections_per_uid'*' 429') pass "N5: nobody's 71st connection is answered 429" ;;
*) fail "N5: nobody's 71st connection: $OUT" ;; esac
hold 4001 8 "$SD/h4001"
HOLD_PIDS+=($!)
hold 4002 8 "$SD/h4002"
HOLD_PIDS+=($!)
wait_for "uid 4001's connections" 180 test -s "$SD/h4001/ready"
wait_for "uid 4002's connections" 180 test -s "$SD/h4002/ready"
wait_for "tierd to hold the users' share (24)" 180 held 24
OUT=$(setpriv --reuid=4003 --regid=65534 --clear-groups curl -s --max-time 60 --unix-socket "$SOCK" \
    -w ' %{http_code}' http://tierd/v1/health 2>&1)
case "$OUT" in *'admin_connections'*' 503') pass "N5: a fourth uid gets 503 when the users' share is full" ;;
*) fail "N5: uid 4003 with the users' share full: $OUT" ;; esac
run "N5: root's tierctl status with the users' share full" 0 timeout 120 "${T[@]}" status
contains "N5: status answered" "/ns"
touch "$NB/h/count" "$SD/h4001/count" "$SD/h4002/count"
hold_result nobody "$NB/h" "62 0 8 0"
hold_result "uid 4001" "$SD/h4001" "0 0 8 0"
hold_result "uid 4002" "$SD/h4002" "0 0 8 0"
wait "${HOLD_PIDS[@]}" 2>/dev/null
wait_for "the users' connections to be given back" 180 held 0
NLOG=$(grep -c 'api: uid 65534 (pid [0-9]*) holds \[api\] max_connections_per_uid' "$W/tierd.log")
[ "$NLOG" = 1 ] && pass "N5: nobody's 63 refusals are logged once" || fail "N5: $NLOG log lines for nobody's refusals (want 1)"
# Many short and abandoned connections of nobody (requests answered, connects closed unused,
# requests cut off mid-header) leave no count behind.
cat >"$SD/churn.py" <<'PYEOF'
import socket, sys
path, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    if i % 3 == 0:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        while s.recv(4096):
            pass
    elif i % 3 == 1:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHo")
    s.close()
PYEOF
"${AS_NOBODY[@]}" "$PY3" "$SD/churn.py" "$SOCK" 60 || fail "N5: nobody's 60 short connections failed"
wait_for "nobody's short connections to be given back" 180 held 0
# A connection MHD drops before its STARTED notification (it only queues an added connection
# and may fail to set it up later) is given back at the next accept: 20 of nobody's connections
# lost that way (test builds: the fault file) do not leave it locked out (8 per uid), and the
# counts return to 0.
if grep -q 'TIERD_TEST_FAULT_FILE=' "$W/tierd.log"; then
    printf 'api lose uid 65534\n' >"$W/fault"
    NLOST=0
    for _ in $(seq 20); do
        OUT=$("${AS_NOBODY[@]}" curl -s --max-time 10 --unix-socket "$SOCK" -w ' %{http_code}' \
            http://tierd/v1/health 2>&1)
        [ "$OUT" = ' 000' ] && NLOST=$((NLOST + 1))
    done
    [ "$NLOST" = 20 ] && pass "N5: 20 of nobody's connections dropped unannounced" ||
        fail "N5: $NLOST of 20 connections dropped (fault file not obeyed?)"
    : >"$W/fault"
    [ "$(api_field connections_user)" = 0 ] && pass "N5: dropped connections are given back" ||
        fail "N5: connections_user is $(api_field connections_user) after the drops (want 0)"
    OUT=$("${AS_NOBODY[@]}" curl -s --max-time 60 --unix-socket "$SOCK" -w ' %{http_code}' \
        http://tierd/v1/health 2>&1)
    case "$OUT" in *' 200') pass "N5: nobody gets in after 20 dropped connections" ;;
    *) fail "N5: nobody after 20 dropped connections: $OUT" ;; esac
else
    echo "skip: the lost-connection check needs a test build (TIER_TEST_HOOKS)"
fi

# ---- N10: read routes follow the namespaces' permissions ----------------------------------------
# /priv and /ckp have umask 077 (owner root): nobody may not read them through the mount, so the
# API neither lists their files nor answers about them; /ns and /ck (umask 022) stay open.
printf 'y\n' >"$MNT/ckp/secret.ckpt" || fail "write into /ckp failed"
# cached: a demote rule plans them
cat "$MNT/priv/secret.bin" "$MNT/ns/plan/keep.txt" >/dev/null || fail "root cannot read the plan's files"
nb_req() { # METHOD URL [BODY]: one request as nobody; sets ST and BODY (headers: $NB/probe.head)
    local args=(-s --path-as-is --max-time 120 --unix-socket "$SOCK" -X "$1" -o "$NB/probe.out"
        -D "$NB/probe.head" -w '%{http_code}')
    [ -n "${3-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    rm -f "$NB/probe.out" "$NB/probe.head"
    ST=$("${AS_NOBODY[@]}" curl "${args[@]}" "http://tierd$2")
    BODY=$(cat "$NB/probe.out" 2>/dev/null)
}
nb_probe() { # NAME WANT METHOD URL
    nb_req "$3" "$4"
    [ "$ST" = "$2" ] && pass "$1 ($ST)" || fail "$1: $3 $4: status $ST, want $2: $BODY"
}
nb_probe "N10: nobody lists checkpoints" 200 GET /v1/checkpoints
case "$BODY" in *'/ck/run1/'*) pass "N10: nobody sees /ck's files" ;; *) fail "N10: /ck missing: $BODY" ;; esac
case "$BODY" in *'/ckp/'*) fail "N10: nobody sees /ckp (umask 077): $BODY" ;; *) pass "N10: /ckp left out for nobody" ;; esac
probe "N10: root lists checkpoints" 200 GET /v1/checkpoints
case "$BODY" in *'/ckp/secret.ckpt'*) pass "N10: root sees /ckp's file" ;; *) fail "N10: root's list: $BODY" ;; esac
nb_probe "N10: nobody's checkpoints of /ckp" 403 GET "/v1/checkpoints?path=/ckp"
nb_probe "N10: nobody's checkpoints of /ck" 200 GET "/v1/checkpoints?path=/ck"
nb_req POST /v1/wait '{"path": "/ckp/secret.ckpt", "timeout_s": 0}'
[ "$ST" = 403 ] && pass "N10: nobody's wait on a /ckp file is 403" || fail "N10: nobody's wait on /ckp: $ST $BODY"
nb_probe "N10: nobody's dataset versions of /priv/t" 403 GET "/v1/datasets?path=/priv/t"
nb_probe "N10: nobody's dataset version of /priv/t" 403 GET "/v1/datasets/v1?path=/priv/t"
nb_probe "N10: nobody's dataset diff of /priv/t" 403 GET "/v1/datasets/v1/diff/v2?path=/priv/t"
nb_probe "N10: nobody's dataset versions of /ns/a" 200 GET "/v1/datasets?path=/ns/a"
probe "N10: root's plan" 200 POST /v1/policy/plan
case "$BODY" in *'/priv/secret.bin'*'/ns/plan/keep.txt'*|*'/ns/plan/keep.txt'*'/priv/secret.bin'*)
    pass "N10: root's plan has /priv and /ns" ;; *) fail "N10: root's plan: $BODY" ;; esac
nb_probe "N10: nobody's plan" 200 POST /v1/policy/plan
case "$BODY" in *'/priv/'*) fail "N10: nobody's plan shows /priv: $BODY" ;;
*'/ns/plan/keep.txt'*'"filtered":true'*|*'"filtered":true'*'/ns/plan/keep.txt'*) pass "N10: nobody's plan has /ns only" ;;
*) fail "N10: nobody's plan: $BODY" ;; esac
# three plans in a row, then one per 20 s: the burst runs out within a few more
for _ in 1 2 3 4 5 6; do
    nb_req POST /v1/policy/plan
    [ "$ST" = 429 ] && break
done
if [ "$ST" = 429 ] && grep -qi '^Retry-After: [1-9]' "$NB/probe.head"; then
    pass "N10: nobody's plans are rate-limited (429 with Retry-After)"
else
    fail "N10: no 429 for nobody's plans: $ST $BODY"
fi
probe "N10: root still plans" 200 POST /v1/policy/plan

# ---- finding 13: bounded work ---------------------------------------------------------------
probe "F13: a staging job that stays running" 202 POST /v1/stage '{"paths": ["/hang/big.bin"]}'
probe "F13: a second job while max_stage_jobs = 1 run" 429 POST /v1/stage '{"paths": ["/ns/a"]}'
printf 'y\n' >"$MNT/slow/pending.bin" || fail "write into /slow failed"
t0=$SECONDS
probe "F13: a wait without timeout_s ends at max_wait" 504 POST /v1/wait '{"path": "/slow"}'
probe "F13: a wait that cannot finish ends at max_wait" 504 POST /v1/wait '{"path": "/slow", "timeout_s": 1e9}'
contains_body() { case "$BODY" in *"$1"*) pass "$2" ;; *) fail "$2: $BODY" ;; esac; }
contains_body "max_wait" "F13: the 504 names [api] max_wait"
[ $((SECONDS - t0)) -le 15 ] && pass "F13: both waits bounded ($((SECONDS - t0)) s)" ||
    fail "F13: waits took $((SECONDS - t0)) s"
P257=$(python3 -c 'import json; print(json.dumps({"paths": ["/ns/a"] * 257}))')
probe "F13: 257 stage paths" 400 POST /v1/stage "$P257"
probe "F13: a declared body over 64 KiB" 413 POST /v1/pin "$(python3 -c 'print("{\"path\": \"/ns/" + "a" * 70000 + "\"}")')"
# a chunked body of 200 MB: tierd must stop reading it near 64 KiB
OUT=$(python3 - "$SOCK" <<'PYEOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(10)
s.sendall(b"POST /v1/pin HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
chunk = b"%x\r\n%s\r\n" % (65536, b"a" * 65536)
sent = 0
try:
    while sent < 200 << 20:
        s.sendall(chunk)
        sent += 65536
except OSError:
    pass
try:
    answer = s.recv(4096)
except OSError:
    answer = b""
print(sent, answer.split(b"\r\n")[0].decode(errors="replace"))
PYEOF
)
read -r SENT LINE <<<"$OUT"
[ "${SENT:-999999999}" -lt $((32 << 20)) ] && pass "F13: chunked body cut off after $SENT bytes ($LINE)" ||
    fail "F13: tierd read $OUT of a 200 MB chunked body"

# ---- finding 4: TLS, token file, tierctl's token sources -----------------------------------
run "F4: tierctl over https with --token-file" 0 env -u TIERD_TOKEN "$TIERCTL" --tcp "https://127.0.0.1:$PORT" \
    --cacert "$W/cert.pem" --token-file "$W/api.token" status
contains "F4: status over TLS" "/ns"
run "F4: tierctl over https with \$TIERD_TOKEN" 0 env TIERD_TOKEN="$(cat "$W/api.token")" "$TIERCTL" \
    --tcp "https://127.0.0.1:$PORT" --cacert "$W/cert.pem" status
run "F4: a wrong token is refused" 4 env TIERD_TOKEN=wrong-token-0123456789 "$TIERCTL" \
    --tcp "https://127.0.0.1:$PORT" --cacert "$W/cert.pem" status
contains "F4: 401 message" "missing or wrong bearer token"
run "F4: --token on argv warns" 0 "$TIERCTL" --tcp "https://127.0.0.1:$PORT" --cacert "$W/cert.pem" \
    --token "$(cat "$W/api.token")" status
contains "F4: the warning" "other users can read it (ps)"
OUT=$(curl -s --max-time 5 -H "Authorization: Bearer $(cat "$W/api.token")" "http://127.0.0.1:$PORT/v1/status" 2>&1)
case "$OUT" in *'"namespaces"'*) fail "F4: plain HTTP answered on the TLS listener" ;;
*) pass "F4: no plain-HTTP answer on the TLS listener" ;; esac

# ---- finding 3: a TCP connection flood leaves the Unix socket usable ------------------------
python3 - "$PORT" "$W/flood.ready" "$W/flood.stop" <<'PYEOF' &
import os, socket, sys, time
port, ready, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
conns = []
for _ in range(1100):
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        conns.append(c)
    except OSError:
        pass
t0 = time.time()
open(ready, "w").write(str(len(conns)))
deadline = time.time() + 120
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
PYEOF
FLOOD_PID=$!
wait_for "1,100 TCP connections" 180 test -s "$W/flood.ready"
echo "    flood: $(cat "$W/flood.ready" 2>/dev/null) connections open"
run "F3: status over the Unix socket during the flood" 0 timeout 120 "${T[@]}" status
contains "F3: status answered" "/ns"
probe "F3: a request with a body during the flood" 200 POST /v1/evict '{"path": "/ns/a"}'
touch "$W/flood.stop"
wait "$FLOOD_PID" 2>/dev/null

kill -TERM "$TIERD_PID"
gone() { ! kill -0 "$TIERD_PID" 2>/dev/null; }
wait_for "tierd to stop" 180 gone
wait "$TIERD_PID"
RC=$?
TIERD_PID=
[ "$RC" -eq 0 ] && pass "tierd stopped cleanly" || { fail "tierd exit $RC; log:"; tail -20 "$W/tierd.log"; }

# ---- start-up refusals (findings 4, 12) -------------------------------------------------------
mkdir -p "$W/m2" "$W/c2"
base_conf() { # 12 lines: the FILE:LINE checks below count on it
    tierd_conf_section cache "ram_size = 8M"
    tierd_conf_posix warm "$W/data"
    tierd_conf_ns /ns warm "prefix = ds/"
    tierd_conf_mount "$W/m2"
    tierd_conf_api "$1"
}
{ base_conf "$SD/b.sock"; printf 'tcp = 0.0.0.0:%s\ntoken_file = %s\n' "$PORT" "$W/api.token"; } >"$W/nonloop.conf"
run "F4: non-loopback tcp without TLS is a config error" 2 timeout 120 "$TIERD" -f -c "$W/nonloop.conf"
contains "F4: FILE:LINE of tcp" "$W/nonloop.conf:13: [api] tcp = '0.0.0.0:$PORT' is not a loopback address"
{ base_conf "$SD/b.sock"; printf 'tcp = 127.0.0.1:%s\ntoken = change-me\n' "$PORT"; } >"$W/weak.conf"
run "F4: the example token is refused" 2 timeout 120 "$TIERD" -f -c "$W/weak.conf"
contains "F4: FILE:LINE of token" "$W/weak.conf:14: [api] token is too weak"
chmod 644 "$W/api.token"
{ base_conf "$SD/b.sock"; printf 'tcp = 127.0.0.1:%s\ntoken_file = %s\n' "$PORT" "$W/api.token"; } >"$W/tokmode.conf"
run "F4: a token file others may read is refused" 2 timeout 120 "$TIERD" -f -c "$W/tokmode.conf"
contains "F4: token_file message" "$W/tokmode.conf:14: [api] token_file"
mkdir -p "$W/open"
chmod 777 "$W/open"
base_conf "$W/open/api.sock" >"$W/opendir.conf"
run "F12: a socket directory others may write is refused" 1 timeout 120 "$TIERD" -f -c "$W/opendir.conf"
contains "F12: parent directory message" "another user could replace the socket"
[ ! -e "$W/open/api.sock" ] && pass "F12: no socket left there" || fail "F12: a socket was created in $W/open"

tierd_counted_result
