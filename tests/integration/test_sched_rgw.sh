#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_sched_rgw.sh - the one scheduling point, checked against the object store's own count:
# tierd on a real FUSE mount over the test Ceph RGW (labels fuse + rgw, fixture rgw) reads,
# lists and stats a read-cache namespace and writes, uploads (single PUT and multipart) and
# removes files of a write-back namespace. Every request the RGW saw for the test's bucket (its
# usage log, `radosgw-admin usage show`) must be one the scheduler's backend wrapper admitted
# (`/v1/stats` backends[].calls, less those answered 404, which the usage log leaves out),
# category by category, plus the few the test made itself with curl. A backend call that passed the wrapper by would make the RGW's count the larger.
# No sleeps as synchronisation: the usage log is polled until it matches, with a deadline.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_rgw_setup sched_rgw
BUCKET=sched-rgw-$(date +%s)-$RANDOM

s3() { tierd_s3 "$@"; }
api() { curl -sSf --unix-socket "$SOCK" "$@"; }

# ---- the test's own requests: 1 create_bucket + 3 put_obj -----------------------------------
s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null || fail "cannot create bucket $BUCKET"
mkdir -p "$T/src" "$T/ref" "$MNT"
for i in 0 1 2; do head -c $((1048576 + i * 300000)) /dev/urandom >"$T/src/f$i"; done
for i in 0 1 2; do s3 -T "$T/src/f$i" "$S3_ENDPOINT/$BUCKET/ds/f$i" >/dev/null; done
SEED_CREATE=1
SEED_PUT=3

{
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M"
  tierd_conf_rgw rgw "$BUCKET"
  tierd_conf_ns /ds rgw "prefix = ds"
  tierd_conf_ns /ck rgw "prefix = ckpt" "mode = write-back"
  tierd_conf_section writeback "spool_dir = $T/spool" "part_size = 5M" "parts_parallel = 1" \
    "retention_keep = 0"
  tierd_conf_mount "$MNT" "attr_ttl = 1s" "entry_ttl = 1s"
  tierd_conf_api "$SOCK"
} >"$CONF"
start_tierd

# ---- the workload through the mount ---------------------------------------------------------
ls -l "$MNT/ds" >/dev/null || fail "ls /ds"
for i in 0 1 2; do cmp "$MNT/ds/f$i" "$T/src/f$i" || fail "read /ds/f$i"; done
head -c 100000 /dev/urandom >"$T/ref/small"
head -c $((11 * 1048576)) /dev/urandom >"$T/ref/big" # 3 parts of 5M
cp "$T/ref/small" "$MNT/ck/small" || fail "write /ck/small"
cp "$T/ref/big" "$MNT/ck/big" || fail "write /ck/big"
api -X POST -d '{"path": "/ck", "timeout_s": 120}' http://tierd/v1/wait >/dev/null ||
  fail "POST /v1/wait /ck"
rm "$MNT/ck/small" || fail "rm /ck/small"
[ ! -e "$MNT/ck/small" ] || fail "/ck/small still there"
ok "workload: reads, listings and stats of /ds; single and multipart uploads and a delete in /ck"

# ---- the RGW's count and the wrapper's, side by side ----------------------------------------
# The delete of /ck/small reaches the backend asynchronously: wait until the wrapper has admitted
# it, so both counts describe the same finished work.
wrapper_calls() { api http://tierd/v1/stats | python3 -c '
import json, sys
b = [x for x in json.load(sys.stdin)["backends"] if x["name"] == "rgw"]
print(json.dumps({"calls": b[0]["calls"], "nf": b[0]["calls_not_found"]}) if b else "{}")'; }
deleted() { [ "$(wrapper_calls | python3 -c 'import json,sys; print(json.load(sys.stdin)["calls"]["delete"])')" -ge 1 ]; }
wait_for 60 deleted || fail "the delete of /ck/small never reached the backend"

compare() {
  wrapper_calls >"$T/calls.json"
  radosgw-admin -c "$CEPH/ceph.conf" usage show --show-log-entries=true >"$T/usage.json" 2>/dev/null || return 1
  python3 - "$T/calls.json" "$T/usage.json" "$BUCKET" "$SEED_CREATE" "$SEED_PUT" >"$T/compare.txt" <<'PY'
import json, sys
both = json.load(open(sys.argv[1]))
# The usage log leaves out requests answered 404 (NoSuchKey: a lookup of a name not yet written,
# say); the wrapper counts those apart (calls_not_found), so they are taken out of its count.
calls = {op: n - both["nf"][op] for op, n in both["calls"].items()}
usage = json.load(open(sys.argv[2]))
bucket, seed_create, seed_put = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rgw = {}
for e in usage.get("entries", []):
    for b in e.get("buckets", []):
        if b.get("bucket") != bucket:
            continue
        for c in b.get("categories", []):
            rgw[c["category"]] = rgw.get(c["category"], 0) + c["ops"]
# RGW category -> the wrapper's operations it counts. HEAD and GET are both get_obj; two calls
# are two requests each (src/tiers/s3.c): a delete is a HEAD (S3 answers 204 for a missing key,
# backend.h promises -ENOENT) then the DELETE, and a multipart complete on RGW asks for the ETag
# with a HEAD (RGW answers <ETag></ETag>).
want = {
    "create_bucket": seed_create,
    "get_obj": calls["stat"] + calls["read"] + calls["delete"] + calls["mpu_complete"],
    "list_bucket": calls["list"],
    "list_bucket_multiparts": calls["mpu_list"],
    "put_obj": seed_put + calls["put"] + calls["mpu_part"],
    "init_multipart": calls["mpu_create"],
    "complete_multipart": calls["mpu_complete"],
    "abort_multipart": calls["mpu_abort"],
    "delete_obj": calls["delete"],
}
ok = True
for cat in sorted(set(want) | set(rgw)):
    w, r = want.get(cat, 0), rgw.get(cat, 0)
    print(f"{cat:24} rgw {r:5}  tierd wrapper{'+test' if cat in ('create_bucket', 'put_obj') else ''} {w:5}")
    if w != r:
        ok = False
sys.exit(0 if ok else 1)
PY
}
if ! wait_for 60 compare; then
  cat "$T/compare.txt" >&2
  fail "the RGW saw requests the scheduler's wrapper did not admit (or fewer than it admitted)"
fi
cat "$T/compare.txt"
python3 - "$T/calls.json" <<'PY' || fail "the workload did not exercise every kind of call"
import json, sys
c = json.load(open(sys.argv[1]))["calls"]
for op in ("stat", "read", "list", "put", "mpu_create", "mpu_part", "mpu_complete", "delete"):
    assert c[op] > 0, op
PY
ok "every request the RGW saw for the bucket passed the scheduler's wrapper (usage log = /v1/stats calls)"
without=$(api http://tierd/v1/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["backend_calls_without_ioctx"])')
[ "$without" = 0 ] || fail "$without backend calls were made without a tenant and class (ioctx)"
ok "every backend call carried its caller's ioctx (backend_calls_without_ioctx = 0)"
stop_tierd
