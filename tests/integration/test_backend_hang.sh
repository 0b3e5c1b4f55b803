#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_backend_hang.sh - tierd on a REAL FUSE mount with an S3 backend whose endpoint accepts
# connections and never answers (a black hole), beside a POSIX backend (run by CTest, label fuse).
# Without the lanes, N new names looked up in one directory cost N x backend_timeout, one after
# another, and the other namespaces stalled meanwhile.
#
# Asserts, through the mount: six names looked up one after another in the S3 namespace fail with
# EIO, the first breaker_failures of them after about backend_timeout each and the rest at once
# (the backend's circuit breaker is open: without it the six take 6 x backend_timeout); no
# further request reaches the endpoint while the breaker is open; stat and read in the POSIX
# namespace answer at once meanwhile; once the endpoint answers again (404) and the cool-down has
# passed, the probe closes the breaker and lookups answer ENOENT promptly; SIGTERM -> clean exit.
# No sleeps as synchronisation: every wait polls a condition with a deadline.
set -euo pipefail

BH_PID=
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup backend_hang
extra_cleanup() { if [ -n "$BH_PID" ]; then kill "$BH_PID" 2>/dev/null || true; fi; }

# ---- the black hole: accept, read, never answer; answer 404 once $T/answer exists -----------
python3 - "$T" <<'PY' &
import os, socket, sys, threading
t = sys.argv[1]
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(128)
held, n = [], 0
with open(t + "/bh.port.tmp", "w") as f:
    f.write(str(ls.getsockname()[1]))
os.rename(t + "/bh.port.tmp", t + "/bh.port")
def answer(c):
    try:
        c.settimeout(5)
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                break
            buf += d
        c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except OSError:
        pass
    c.close()
while True:
    c, _ = ls.accept()
    n += 1
    with open(t + "/bh.count.tmp", "w") as f:
        f.write(str(n))
    os.rename(t + "/bh.count.tmp", t + "/bh.count")
    if os.path.exists(t + "/answer"):
        threading.Thread(target=answer, args=(c,), daemon=True).start()
    else:
        held.append(c)
PY
BH_PID=$!
wait_for 20 test -s "$T/bh.port" || fail "black-hole endpoint did not start"
PORT=$(cat "$T/bh.port")
accepted() { cat "$T/bh.count" 2>/dev/null || echo 0; }

mkdir -p "$DATA" "$MNT"
head -c 100000 /dev/urandom >"$DATA/file.bin"
{
  tierd_conf_section daemon "backend_timeout = 2s"
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M"
  tierd_conf_posix warm "$DATA"
  tierd_conf_section "backend cold" "type = s3" "endpoint = http://127.0.0.1:$PORT" "bucket = bkt" \
    "access_key = ak" "secret_key = sk" "max_retries = 0" "breaker_failures = 2" \
    "breaker_cooldown = 4s"
  tierd_conf_ns /warm warm
  tierd_conf_ns /cold cold
  tierd_conf_ns /coldw cold "prefix = w" "mode = write-back"
  tierd_conf_section writeback "spool_dir = $T/spool"
  tierd_conf_mount "$MNT"
  tierd_conf_api "$SOCK"
} >"$CONF"
start_tierd
ok "mounted"
! grep -q "plain http:// to a host that is not loopback" "$T/tierd.log" ||
  fail "a loopback http:// endpoint was warned about"

# ---- serial lookups in the hung namespace ------------------------------------------------------
# one line per name: errno and milliseconds
python3 - "$MNT/cold" >"$T/lookups" <<'PY'
import errno, os, sys, time
for i in range(6):
    t0 = time.monotonic()
    try:
        os.stat(os.path.join(sys.argv[1], "obj%d" % i))
        e = 0
    except OSError as x:
        e = x.errno
    print(e, int((time.monotonic() - t0) * 1000))
PY
cat "$T/lookups"
python3 - "$T/lookups" <<'PY' || fail "lookups in the hung namespace (see above)"
import errno, sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
assert all(e == errno.EIO for e, _ in rows), "every lookup fails with EIO"
slow, fast = rows[:2], rows[2:]
assert all(ms >= 1500 for _, ms in slow), "the first two wait for the 2 s timeout"
assert all(ms < 500 for _, ms in fast), "the breaker is open: the rest fail at once"
assert sum(ms for _, ms in rows) < 2 * 2000 + 2500, "6 x 2 s without the breaker"
PY
[ "$(accepted)" = 2 ] || fail "the endpoint saw $(accepted) connections, expected 2 (breaker open)"
grep -q "backend 'cold' is not answering: circuit breaker open" "$T/tierd.log" ||
  fail "the fast failures do not say why"
ok "6 lookups on a hung S3 endpoint: 2 timeouts, then the breaker fails the rest at once"

# ---- the POSIX namespace meanwhile -------------------------------------------------------------
python3 - "$MNT/warm/file.bin" "$DATA/file.bin" <<'PY' || fail "POSIX namespace while S3 hangs"
import os, sys, time
t0 = time.monotonic()
st = os.stat(sys.argv[1])
with open(sys.argv[1], "rb") as f:
    got = f.read()
ms = (time.monotonic() - t0) * 1000
assert st.st_size == 100000 and got == open(sys.argv[2], "rb").read()
assert ms < 1000, "POSIX stat+read took %d ms" % ms
PY
ok "POSIX namespace answers at once while the S3 one hangs"

# ---- a checkpoint directory while the backend cannot answer (found by make soak) -------------
# mkdir in a write-back namespace asked the backend whether the name exists and failed with its
# error; it is made locally, as a file create is, so a job can still checkpoint.
mkdir "$MNT/coldw/step1" || fail "mkdir in a write-back namespace while S3 hangs"
echo w >"$MNT/coldw/step1/w" || fail "a file in a directory made while S3 hangs"
[ "$(cat "$MNT/coldw/step1/w")" = w ] || fail "read-your-writes in that directory"
ok "mkdir and a file in it in a write-back namespace while S3 hangs"

# ---- the endpoint answers again: the probe after the cool-down closes the breaker ------------
: >"$T/answer"
probe() {
  python3 - "$MNT/cold/probe$RANDOM" <<'PY'
import errno, os, sys
try:
    os.stat(sys.argv[1])
except OSError as x:
    sys.exit(0 if x.errno == errno.ENOENT else 1)
sys.exit(1)
PY
}
wait_for 20 probe || fail "lookups never answered ENOENT after the endpoint came back"
python3 - "$MNT/cold" <<'PY' || fail "lookups after the breaker closed"
import errno, os, sys, time
for i in range(4):
    t0 = time.monotonic()
    try:
        os.stat(os.path.join(sys.argv[1], "back%d" % i))
        sys.exit("found a name that does not exist")
    except OSError as x:
        assert x.errno == errno.ENOENT, x
    assert time.monotonic() - t0 < 1.5
PY
ok "endpoint back: the breaker closed, lookups answer ENOENT"

stop_tierd
ok "clean stop"
echo PASS
