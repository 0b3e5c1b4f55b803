#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_fuse_wb_rgw.sh - a write-back namespace over the real Ceph RGW, through a REAL FUSE mount
# (CTest labels fuse + rgw, fixture rgw).
#
# Asserts: files written + fsync'd + closed through the mount (one single-PUT, one 3-part
# multipart) read back through the mount before the upload, and after POST /v1/wait the S3
# objects (GET with curl --aws-sigv4) are byte-identical; SIGKILL of tierd while a 12 MiB upload
# is in flight, restart -> the upload resumes and the object is complete; rename over an
# existing object; unlink of a file in upload -> the object never appears; and no multipart
# upload is left over in the bucket (?uploads listing). No sleeps as synchronisation.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_rgw_setup fuse_wb_rgw
# the test stops RGW: never leave it stopped for the tests after this one
extra_cleanup() { tierd_test_rgw_restart; }
BUCKET=fuse-wb-rgw-$(date +%s)-$RANDOM

s3() { tierd_s3 "$@"; }
wb_wait() {
  curl -sSf --unix-socket "$SOCK" -X POST -H 'Content-Type: application/json' \
    -d "{\"path\": \"$1\", \"timeout_s\": 120}" http://tierd/v1/wait >/dev/null ||
    fail "POST /v1/wait $1"
}
s3_same() { s3 -o "$T/get" "$S3_ENDPOINT/$BUCKET/ckpt/$1" && cmp -s "$T/get" "$2"; }
s3_absent() { [ "$(tierd_s3_code -I "$S3_ENDPOINT/$BUCKET/ckpt/$1")" = 404 ]; }

s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null || fail "cannot create bucket $BUCKET"
mkdir -p "$MNT" "$T/ref"
{
  tierd_conf_section cache "ram_size = 64M" "block_size = 1M"
  tierd_conf_rgw rgw "$BUCKET"
  tierd_conf_ns /ck rgw "prefix = ckpt" "mode = write-back"
  tierd_conf_section writeback "spool_dir = $T/spool" "part_size = 5M" "parts_parallel = 1" \
    "retention_keep = 0"
  tierd_conf_mount "$MNT" "attr_ttl = 200ms" "entry_ttl = 200ms"
  tierd_conf_api "$SOCK"
} >"$CONF"
start_tierd

head -c 100000 /dev/urandom >"$T/ref/small"
head -c $((12 * 1048576 + 99)) /dev/urandom >"$T/ref/big"
dd if="$T/ref/small" of="$MNT/ck/small" bs=1M conv=fsync status=none || fail "write small"
mkdir "$MNT/ck/step1" || fail "mkdir step1"
dd if="$T/ref/big" of="$MNT/ck/step1/big" bs=1M conv=fsync status=none || fail "write big"
cmp "$MNT/ck/small" "$T/ref/small" || fail "read-your-writes small"
cmp "$MNT/ck/step1/big" "$T/ref/big" || fail "read-your-writes big"
wb_wait /ck
s3_same small "$T/ref/small" || fail "S3 small differs"
s3_same step1/big "$T/ref/big" || fail "S3 step1/big differs"
# uploaded and dropped locally (retention_keep = 0): read from RGW through the cache
cmp "$MNT/ck/step1/big" "$T/ref/big" || fail "read back from RGW"
ok "write + fsync + close, read-your-writes, /v1/wait, S3 objects byte-identical (multipart too)"

# ---- SIGKILL while the multipart upload is in flight, restart, resume ------------------------
head -c $((12 * 1048576 + 5)) /dev/urandom >"$T/ref/crash"
n0=$(grep -c "wb: upload start" "$T/tierd.log" || true)
dd if="$T/ref/crash" of="$MNT/ck/crash" bs=1M conv=fsync status=none || fail "write crash"
inflight() { [ "$(grep -c "wb: upload start" "$T/tierd.log" || true)" -gt "$n0" ]; }
wait_for 30 inflight || fail "upload never started"
crash_tierd
if s3_absent crash; then echo "killed with the upload in flight"; else echo "note: the upload completed before the kill"; fi
start_tierd
wb_wait /ck
s3_same crash "$T/ref/crash" || fail "after SIGKILL + restart: S3 object differs"
cmp "$MNT/ck/crash" "$T/ref/crash" || fail "after restart: mount content differs"
ok "SIGKILL during upload, restart: upload resumed, object complete"

# ---- rename over an existing object; unlink during upload ------------------------------------
head -c 3000 /dev/urandom >"$T/ref/new"
cp "$T/ref/new" "$MNT/ck/new.tmp" || fail "write new.tmp"
mv "$MNT/ck/new.tmp" "$MNT/ck/small" || fail "rename over small"
cmp "$MNT/ck/small" "$T/ref/new" || fail "rename: mount content"
wb_wait /ck
s3_same small "$T/ref/new" || fail "rename: S3 content"
s3_absent new.tmp || fail "rename: old object left"
ok "rename over an existing object"

head -c $((30 * 1048576)) /dev/urandom >"$MNT/ck/doomed" || fail "write doomed"
rm "$MNT/ck/doomed" || fail "unlink doomed"
wb_wait /ck
s3_absent doomed || fail "unlinked file appeared in S3"
ok "unlink during upload: the object never appears"

# ---- rm -r of a checkpoint directory: S3 keeps no directory (only its objects' prefix), but
# one emptied through the mount stays until rmdir, as on a file system; nothing is left
mkdir -p "$MNT/ck/run/step_1/sub" || fail "mkdir -p run/step_1/sub"
for f in a b sub/c; do echo "$f" >"$MNT/ck/run/step_1/$f" || fail "write $f"; done
wb_wait /ck
s3_same run/step_1/sub/c <(echo sub/c) || fail "run/step_1/sub/c: S3 content"
rm -r "$MNT/ck/run" || fail "rm -r of a checkpoint directory"
[ ! -e "$MNT/ck/run" ] || fail "the mount still shows run after rm -r"
for f in a b sub/c; do s3_absent "run/step_1/$f" || fail "run/step_1/$f left in S3 after rm -r"; done
ok "rm -r of a checkpoint directory: succeeds, nothing left in the mount or in S3"
# a directory whose only object the burst buffer never held (written by another client) stays a
# directory when that object is removed through the mount, also once the kernel looks it up
# again (entry_ttl 200 ms: poll until tierd has answered 3 more lookups: old, old/d, old/d again)
echo o >"$T/ref/o"
s3 -T "$T/ref/o" "$S3_ENDPOINT/$BUCKET/ckpt/old/d/f" >/dev/null || fail "PUT old/d/f"
lookups() { api /metrics | awk '/^tierd_op_latency_seconds_count\{.*op="lookup"/ {s += $2} END {printf "%d", s}'; }
rm "$MNT/ck/old/d/f" || fail "rm old/d/f"
s3_absent old/d/f || fail "old/d/f still in S3 after rm"
l0=$(lookups)
relooked() {
  [ -d "$MNT/ck/old/d" ] || fail "old/d vanished when its last file was removed"
  [ "$(lookups)" -ge $((l0 + 3)) ]
}
wait_for 10 relooked || fail "the kernel did not look old/d up again within 10 s"
ls "$MNT/ck" >"$T/ls" || fail "ls ck"
grep -qx old "$T/ls" || fail "ls ck no longer lists old: $(tr '\n' ' ' <"$T/ls")"
rm -r "$MNT/ck/old" || fail "rm -r old"
[ ! -e "$MNT/ck/old" ] || fail "the mount still shows old after rm -r"
# three levels above the emptied directory: each is listed by its parent, and rm -r takes all
s3 -T "$T/ref/o" "$S3_ENDPOINT/$BUCKET/ckpt/x/y/z/f" >/dev/null || fail "PUT x/y/z/f"
rm "$MNT/ck/x/y/z/f" || fail "rm x/y/z/f"
ls "$MNT/ck" >"$T/ls" || fail "ls ck"
grep -qx x "$T/ls" || fail "ls ck no longer lists x: $(tr '\n' ' ' <"$T/ls")"
[ "$(ls "$MNT/ck/x")" = y ] && [ "$(ls "$MNT/ck/x/y")" = z ] || fail "ls of x and x/y: $(ls -R "$MNT/ck/x" 2>&1 | tr '\n' ' ')"
rm -r "$MNT/ck/x" || fail "rm -r x"
[ ! -e "$MNT/ck/x" ] || fail "the mount still shows x after rm -r"
ok "a directory emptied through the mount stays one (looked up again, listed at every level above) until rmdir"
# a directory only S3's keys imply (written by another client): rename(2) says EXDEV as for any
# directory, so mv copies it; mkdir says EEXIST
s3 -T "$T/ref/o" "$S3_ENDPOINT/$BUCKET/ckpt/mv/a" >/dev/null || fail "PUT mv/a"
python3 - "$MNT/ck/mv" <<'PY' || fail "rename or mkdir of a directory S3 only implies"
import errno, os, sys
for call, args, want in ((os.rename, (sys.argv[1], sys.argv[1] + "2"), errno.EXDEV),
                         (os.mkdir, (sys.argv[1],), errno.EEXIST)):
    try:
        call(*args)
        sys.exit(f"{call.__name__} succeeded, want {errno.errorcode[want]}")
    except OSError as e:
        if e.errno != want:
            sys.exit(f"{call.__name__}: {errno.errorcode.get(e.errno)}, want {errno.errorcode[want]}")
PY
mv "$MNT/ck/mv" "$MNT/ck/mv2" || fail "mv of a directory S3 only implies"
[ "$(cat "$MNT/ck/mv2/a")" = o ] && [ ! -e "$MNT/ck/mv" ] || fail "after mv: $(ls -R "$MNT/ck/mv2" "$MNT/ck/mv" 2>&1 | tr '\n' ' ')"
wb_wait /ck
s3_same mv2/a "$T/ref/o" && s3_absent mv/a || fail "after mv, S3 does not hold mv2/a alone"
rm -r "$MNT/ck/mv2" || fail "rm -r mv2"
ok "a directory only S3's keys imply: rename EXDEV (mv copies it), mkdir EEXIST"

# ---- S3 down: checkpoints can still be created and written; they upload when it is back ------
"$SRC/scripts/ceph.sh" stop-rgw "$CEPH" >/dev/null 2>&1 || fail "stop-rgw"
head -c $((6 * 1048576)) /dev/urandom >"$T/ref/outage"
cp "$T/ref/outage" "$MNT/ck/outage" || { "$SRC/scripts/ceph.sh" start-rgw "$CEPH" >/dev/null 2>&1; fail "create while S3 is down"; }
cmp "$MNT/ck/outage" "$T/ref/outage" || fail "read-your-writes while S3 is down"
mkdir "$MNT/ck/step-out" || { "$SRC/scripts/ceph.sh" start-rgw "$CEPH" >/dev/null 2>&1; fail "mkdir while S3 is down"; }
echo w >"$MNT/ck/step-out/w" || { "$SRC/scripts/ceph.sh" start-rgw "$CEPH" >/dev/null 2>&1; fail "write in a directory made while S3 is down"; }
"$SRC/scripts/ceph.sh" start-rgw "$CEPH" >/dev/null 2>&1 || fail "start-rgw"
wb_wait /ck
s3_same outage "$T/ref/outage" || fail "file written during the outage: S3 content"
s3_same step-out/w <(echo w) || fail "file in a directory made during the outage: S3 content"
ok "S3 down: a new checkpoint is created, written, and uploaded once S3 is back"

uploads=$(s3 "$S3_ENDPOINT/$BUCKET?uploads" | grep -c "<UploadId>" || true)
[ "$uploads" = 0 ] || fail "$uploads multipart uploads left in the bucket"
ok "no multipart upload left over"
stop_tierd
echo PASS
