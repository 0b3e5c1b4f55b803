#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_datasets.sh KIND - dataset versions (tierctl dataset, /v1/datasets) on a REAL mount over a
# REAL backend: KIND posix (a directory) or rgw (the Ceph RGW of the rgw fixture). CTest labels
# fuse (and rgw).
#   - commit /ds/a as v1: every file under it (nested too) with its size, the totals right;
#     the manifest is an object in the backend under ds/.tierd-datasets/, hidden from the
#     mount's listing and lookups;
#   - a second commit of v1 is refused (409, "exists"); of two committers of one name started
#     at once exactly one wins, five times over;
#   - list, show; a truncated manifest in the backend is refused by show ("malformed"), and
#     nothing is served from it; delete removes the manifest only (the files are untouched);
#   - a commit of the namespace root does not count the manifests; a tree of N files (posix
#     10,000, rgw 2,500: three LIST pages) lists whole;
#   - diff of two versions of a tree after files are overwritten, one added, one deleted;
#   - the read-only view <mount>/.tierd/datasets/ds/a@NAME: listings and reads as the manifest
#     says; a file overwritten since the commit fails with EIO and a log line (the backend keeps
#     no older versions); stat and ls of a version cost no backend call; nothing can be created;
#     the directories above the versions list the trees and versions, kept: an ls again costs no
#     backend LIST, but a commit or delete through this tierd shows at once;
#     a version with a damaged manifest is not served; a version of a namespace with umask 077
#     has that namespace's modes (nobody cannot read it, as in the namespace itself);
#   - rgw: a bucket with versioning enabled: the commit records version ids, and the version
#     reads (and stages) the committed bytes after its files are overwritten and deleted;
#   - a version by its view path: `tierctl stage` fetches its files pinned to their ETags (then
#     reads cost no fetch), fails where files changed or went since the commit; pin, unpin and
#     evict take it (by its tree's keys);
#   - bad input: a bad name, a path in no namespace, a tree with no file; creating the reserved
#     name in a write-back namespace is refused (EPERM: create, mkdir, rename onto it); on the
#     RGW an S3 "folder" marker object under the tree is not counted as a file.
# Waits poll with deadlines; no sleeps.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
KIND=${1:?usage: test_datasets.sh posix|rgw}
if [ "$KIND" = rgw ]; then
  tierd_test_rgw_setup "datasets_$KIND"
  BUCKET=datasets-$(date +%s)-$RANDOM
  tierd_s3 -X PUT "$S3_ENDPOINT/$BUCKET" >/dev/null || fail "cannot create bucket $BUCKET"
  # '@' in a key goes percent-encoded (curl's SigV4 signs the path as written)
  put() { tierd_s3 -T "$1" "$S3_ENDPOINT/$BUCKET/${2//@/%40}" >/dev/null || fail "PUT $2"; }
  get() { tierd_s3 -o "$2" "$S3_ENDPOINT/$BUCKET/${1//@/%40}"; }
  del() { tierd_s3 -X DELETE "$S3_ENDPOINT/$BUCKET/$1" >/dev/null || fail "DELETE $1"; }
  BIG=2500 # three LIST pages
else
  tierd_test_setup "datasets_$KIND"
  mkdir -p "$DATA"
  put() { mkdir -p "$(dirname "$DATA/$2")" && cp "$1" "$DATA/$2"; }
  get() { cp "$DATA/$1" "$2"; }
  del() { rm -f "$DATA/$1"; }
  BIG=10000
fi
[ "$(id -u)" = 0 ] || fail "needs root (FUSE)"
mkdir -p "$MNT" "$T/ref" "$T/spool"

for i in 0 1 2 3 4; do
  head -c $((100000 + i)) /dev/urandom >"$T/ref/$i"
  put "$T/ref/$i" "ds/a/$i.bin"
done
head -c 777 /dev/urandom >"$T/ref/x"
put "$T/ref/x" "ds/a/sub/x.bin"
put "$T/ref/x" "ds/b/only.bin"
put "$T/ref/x" "priv/t/f.bin"
if [ "$KIND" = rgw ]; then
  # an S3 "folder" marker (AWS console, s3fs): not a file of the tree (curl -T would append the
  # file's name to a URL ending in '/')
  tierd_s3 -X PUT --data-binary "" "$S3_ENDPOINT/$BUCKET/ds/a/sub/" >/dev/null || fail "PUT ds/a/sub/"
  # a bucket that keeps older versions (S3 bucket versioning)
  VBUCKET=$BUCKET-ver
  tierd_s3 -X PUT "$S3_ENDPOINT/$VBUCKET" >/dev/null || fail "cannot create bucket $VBUCKET"
  tierd_s3 -X PUT --data-binary '<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>' \
    "$S3_ENDPOINT/$VBUCKET?versioning=" >/dev/null || fail "cannot enable versioning on $VBUCKET"
  for i in 0 1 2; do
    tierd_s3 -T "$T/ref/$i" "$S3_ENDPOINT/$VBUCKET/t/$i.bin" >/dev/null || fail "PUT $VBUCKET t/$i.bin"
  done
fi
want_bytes=$((5 * 100000 + 0 + 1 + 2 + 3 + 4 + 777))

{
  tierd_conf_section cache "ram_size = 32M" "block_size = 1M"
  if [ "$KIND" = rgw ]; then
    tierd_conf_rgw be "$BUCKET"
    tierd_conf_rgw vbe "$VBUCKET"
    tierd_conf_ns /vds vbe
  else
    tierd_conf_posix be "$DATA"
  fi
  tierd_conf_ns /ds be "prefix = ds"
  tierd_conf_ns /ckpt be "prefix = ckpt" "mode = write-back"
  tierd_conf_ns /priv be "prefix = priv" "umask = 077"
  tierd_conf_section writeback "spool_dir = $T/spool"
  # a lifecycle policy that keeps version d2 (committed below) pinned in the hot tier; it runs
  # only when the test forces a pass (a timed pass would stage, and call the backend, in the
  # middle of the checks that count backend calls and fetches)
  tierd_conf_section "policy keep-d2" "namespace = /ds" "dataset = /ds/a@d2" "action = pin"
  # and one whose version's files are all gone (its namespace lists nothing)
  tierd_conf_ns /e be "prefix = e"
  tierd_conf_section "policy keep-e" "namespace = /e" "dataset = /e/t@v1" "action = pin"
  tierd_conf_section daemon "policy_interval = 1h"
  # the view's listings kept an hour: "another ls within the time costs no LIST" below cannot
  # fail because a loaded machine took longer than the default 10 s between two of them
  tierd_conf_mount "$MNT" "allow_other = true" "umask = 022" "version_list_ttl = 1h"
  tierd_conf_api "$SOCK"
} >"$CONF"
chmod 0711 "$T" # other users reach the mount (the view's permissions are checked as nobody)
start_tierd

# ctl ARGS...: tierctl; its output in $T/out, its exit status printed
ctl() {
  local rc=0
  tierd_ctl "$@" >"$T/out" 2>&1 || rc=$?
  echo "$rc"
}
jfield() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$T/out" "$1"; }

# ---- commit, the manifest in the backend, hidden from the mount ------------------------------
rc=$(ctl dataset commit /ds/a v1 --json)
[ "$rc" = 0 ] || fail "commit /ds/a v1: exit $rc: $(cat "$T/out")"
[ "$(jfield count)" = 6 ] || fail "v1 counts $(jfield count) files, want 6: $(cat "$T/out")"
[ "$(jfield bytes)" = "$want_bytes" ] || fail "v1 has $(jfield bytes) bytes, want $want_bytes"
[ "$(jfield prefix)" = ds/a/ ] || fail "v1's prefix: $(cat "$T/out")"
[ "$(jfield view)" = "$MNT/.tierd/datasets/ds/a@v1" ] || fail "v1's view: $(cat "$T/out")"
rc=$(ctl dataset path /ds/a/ v1)
[ "$rc" = 0 ] && [ "$(cat "$T/out")" = "$MNT/.tierd/datasets/ds/a@v1" ] || fail "dataset path: exit $rc: $(cat "$T/out")"
get "ds/.tierd-datasets/a/@v1" "$T/manifest" || fail "no manifest object ds/.tierd-datasets/a/@v1 in the backend"
python3 - "$T/manifest" <<'EOF' || fail "the manifest's files: $(head -c 600 "$T/manifest")"
import json, sys
m = json.load(open(sys.argv[1]))
keys = [f["key"] for f in m["files"]]
assert m["format"] == "tierd-dataset/1", m["format"]
assert keys == ["0.bin", "1.bin", "2.bin", "3.bin", "4.bin", "sub/x.bin"], keys
assert all(f["etag"] for f in m["files"])
EOF
ls -a "$MNT/ds" >"$T/ls" || fail "ls $MNT/ds"
grep -qx ".tierd-datasets" "$T/ls" && fail "the mount lists .tierd-datasets: $(tr '\n' ' ' <"$T/ls")"
grep -qx a "$T/ls" || fail "ls $MNT/ds lacks a: $(tr '\n' ' ' <"$T/ls")"
stat "$MNT/ds/.tierd-datasets" >/dev/null 2>&1 && fail "the mount answers a lookup of .tierd-datasets"
ok "commit /ds/a v1: 6 files, $want_bytes bytes; manifest in the backend, hidden from the mount"

# ---- one name, one winner -----------------------------------------------------------------------
rc=$(ctl dataset commit /ds/a v1)
[ "$rc" = 4 ] && grep -q "exists" "$T/out" || fail "a second commit of v1: exit $rc: $(cat "$T/out")"
for r in 1 2 3 4 5; do
  tierd_ctl dataset commit /ds/a "race$r" >"$T/r1" 2>&1 &
  p1=$!
  tierd_ctl dataset commit /ds/a "race$r" >"$T/r2" 2>&1 &
  p2=$!
  rc1=0 rc2=0
  wait "$p1" || rc1=$?
  wait "$p2" || rc2=$?
  { [ "$rc1" = 0 ] && [ "$rc2" = 4 ]; } || { [ "$rc1" = 4 ] && [ "$rc2" = 0 ]; } ||
    fail "race$r: exits $rc1 and $rc2 (want one 0, one 4): $(cat "$T/r1" "$T/r2")"
  grep -q exists "$T/r1" "$T/r2" || fail "race$r: the loser's message: $(cat "$T/r1" "$T/r2")"
done
ok "a second commit of v1 refused (exists); 5 races of two committers: one winner each"

# ---- list, show, a damaged manifest, delete -------------------------------------------------------
rc=$(ctl dataset list /ds/a)
[ "$rc" = 0 ] && [ "$(tr '\n' ' ' <"$T/out")" = "race1 race2 race3 race4 race5 v1 " ] ||
  fail "list /ds/a: exit $rc: $(cat "$T/out")"
rc=$(ctl dataset list /ds/b)
[ "$rc" = 0 ] && grep -q "no versions" "$T/out" || fail "list /ds/b: exit $rc: $(cat "$T/out")"
rc=$(ctl dataset show /ds/a v1)
[ "$rc" = 0 ] && grep -q "6 files" "$T/out" || fail "show v1: exit $rc: $(cat "$T/out")"
head -c 300 "$T/manifest" >"$T/trunc"
if [ "$KIND" = rgw ]; then put "$T/trunc" "ds/.tierd-datasets/a/@race1"; else cp "$T/trunc" "$DATA/ds/.tierd-datasets/a/@race1"; fi
rc=$(ctl dataset show /ds/a race1)
[ "$rc" = 4 ] && grep -q "malformed" "$T/out" || fail "show of a truncated manifest: exit $rc: $(cat "$T/out")"
rc=$(ctl dataset delete /ds/a v1)
[ "$rc" = 0 ] || fail "delete v1: exit $rc: $(cat "$T/out")"
rc=$(ctl dataset show /ds/a v1)
[ "$rc" = 4 ] && grep -q "has no version v1" "$T/out" || fail "show after delete: exit $rc: $(cat "$T/out")"
for i in 0 1 2 3 4; do
  cmp -s "$MNT/ds/a/$i.bin" "$T/ref/$i" || fail "delete of v1 touched $i.bin"
done
ok "list, show; a truncated manifest refused (malformed); delete removes the version only"

# ---- the namespace root, a large tree ---------------------------------------------------------------
rc=$(ctl dataset commit /ds root1 --json)
[ "$rc" = 0 ] && [ "$(jfield count)" = 7 ] || fail "commit /ds: exit $rc (want 7 files, no manifests): $(cat "$T/out")"
head -c 10 /dev/urandom >"$T/ref/small"
if [ "$KIND" = rgw ]; then
  # one curl, 16 uploads in flight
  for i in $(seq 1 "$BIG"); do
    printf 'upload-file = "%s"\nurl = "%s/%s/ds/big/f%s"\n' "$T/ref/small" "$S3_ENDPOINT" "$BUCKET" "$i"
  done >"$T/up.cfg"
  curl -sSf --no-progress-meter --parallel --parallel-max 16 "${TIERD_S3_SIG[@]}" -K "$T/up.cfg" >/dev/null ||
    fail "uploading $BIG objects"
else
  mkdir -p "$DATA/ds/big"
  # one process for the whole tree (a cp per file spent 10,000 forks: most of this test's time,
  # minutes on a loaded machine)
  python3 - "$T/ref/small" "$DATA/ds/big" "$BIG" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
for i in range(1, int(sys.argv[3]) + 1):
    with open(f"{sys.argv[2]}/f{i}", "wb") as f:
        f.write(data)
EOF
fi
rc=$(ctl dataset commit /ds/big all --json)
[ "$rc" = 0 ] && [ "$(jfield count)" = "$BIG" ] || fail "commit of $BIG files: exit $rc: $(head -c 300 "$T/out")"
ok "commit of the namespace root skips the manifests (7 files); a tree of $BIG files commits whole"

# ---- diff ------------------------------------------------------------------------------------------
rc=$(ctl dataset commit /ds/a d1)
[ "$rc" = 0 ] || fail "commit d1: exit $rc: $(cat "$T/out")"
head -c 5000 /dev/urandom >"$T/ref/new0"
put "$T/ref/new0" "ds/a/0.bin"
put "$T/ref/new0" "ds/a/new.bin"
put "$T/ref/new0" "ds/a/sub/x.bin"
del "ds/a/4.bin"
rc=$(ctl dataset commit /ds/a d2)
[ "$rc" = 0 ] || fail "commit d2: exit $rc: $(cat "$T/out")"
rc=$(ctl dataset diff /ds/a d1 d2)
[ "$rc" = 0 ] || fail "diff d1 d2: exit $rc: $(cat "$T/out")"
[ "$(cat "$T/out")" = "+ new.bin
- 4.bin
~ 0.bin
~ sub/x.bin
1 added, 1 removed, 2 changed, 3 unchanged" ] || fail "diff d1 d2: $(cat "$T/out")"
rc=$(ctl dataset diff /ds/a d1 nope)
[ "$rc" = 4 ] && grep -q "has no version nope" "$T/out" || fail "diff with a missing version: exit $rc: $(cat "$T/out")"
ok "diff d1 d2: + new.bin, - 4.bin, ~ 0.bin ~ sub/x.bin (new bytes), 3 unchanged"

# ---- the read-only view: <mount>/.tierd/datasets/TREE@NAME ---------------------------------------
V=$MNT/.tierd/datasets
ls "$MNT/.tierd" >"$T/ls" || fail "ls $MNT/.tierd"
grep -qx datasets "$T/ls" || fail "$MNT/.tierd does not list datasets: $(tr '\n' ' ' <"$T/ls")"
[ "$(ls "$V/ds/a@d1" | tr '\n' ' ')" = "0.bin 1.bin 2.bin 3.bin 4.bin sub " ] ||
  fail "ls of version d1: $(ls "$V/ds/a@d1" 2>&1 | tr '\n' ' ')"
[ "$(ls "$V/ds/a@d2" | tr '\n' ' ')" = "0.bin 1.bin 2.bin 3.bin new.bin sub " ] ||
  fail "ls of version d2: $(ls "$V/ds/a@d2" 2>&1 | tr '\n' ' ')"
# the directories above the versions list the namespaces and trees under them and the versions
# of the trees just under them
[ "$(LC_ALL=C ls "$V/ds" | tr '\n' ' ')" = "a a@d1 a@d2 a@race1 a@race2 a@race3 a@race4 a@race5 big big@all " ] ||
  fail "ls of the view's /ds: $(LC_ALL=C ls "$V/ds" 2>&1 | tr '\n' ' ')"
LC_ALL=C ls "$V" >"$T/lsv" || fail "ls of the view's root"
for e in ckpt ds ds@root1 priv; do
  grep -qx "$e" "$T/lsv" || fail "the view's root does not list $e: $(tr '\n' ' ' <"$T/lsv")"
done
[ -z "$(ls "$V/ds/a")" ] || fail "the view's /ds/a lists $(ls "$V/ds/a" | tr '\n' ' ') (no tree under it has versions)"
# a tree whose name leaves no room for "@NAME" in one segment (255 bytes): listed as a tree, its
# version not (no lookup could reach it; readdirplus once copied it past a segment-sized buffer)
LONG=$(printf 'L%.0s' $(seq 250))
put "$T/ref/0" "ds/$LONG/f.bin"
rc=$(ctl dataset commit "/ds/$LONG" longname1)
[ "$rc" = 0 ] || fail "commit of a tree with a 250-byte name: exit $rc: $(cat "$T/out")"
LC_ALL=C ls "$V/ds" >"$T/lsl" || fail "ls of the view's /ds with a long tree name"
grep -qx "$LONG" "$T/lsl" && ! grep -q "@longname1" "$T/lsl" ||
  fail "the view's /ds with a long tree name lists: $(tr '\n' ' ' <"$T/lsl" | cut -c1-300)"
rc=$(ctl dataset delete "/ds/$LONG" longname1)
[ "$rc" = 0 ] || fail "delete of longname1: exit $rc: $(cat "$T/out")"
del "ds/$LONG/f.bin"
# those listings are kept for version_list_ttl, but a commit or a delete through this tierd
# shows at once; within that time another ls costs no backend listing
rc=$(ctl dataset commit /ds/a lc1)
[ "$rc" = 0 ] || fail "commit /ds/a lc1: exit $rc: $(cat "$T/out")"
LC_ALL=C ls "$V/ds" >"$T/lsl" || fail "ls of the view's /ds after the commit"
grep -qx "a@lc1" "$T/lsl" || fail "the view's /ds does not list a@lc1 just committed: $(tr '\n' ' ' <"$T/lsl")"
rc=$(ctl dataset delete /ds/a lc1)
[ "$rc" = 0 ] || fail "delete /ds/a lc1: exit $rc: $(cat "$T/out")"
LC_ALL=C ls "$V/ds" >"$T/lsl" || fail "ls of the view's /ds after the delete"
if grep -qx "a@lc1" "$T/lsl"; then fail "the view's /ds still lists a@lc1 after its delete"; fi
lists() { api /v1/stats | python3 -c 'import json,sys
print(sum(b["calls"]["list"] for b in json.load(sys.stdin)["backends"]))'; }
l0=$(lists)
for r in 1 2 3; do LC_ALL=C ls "$V/ds" >/dev/null || fail "ls of the view's /ds ($r)"; done
[ "$(lists)" = "$l0" ] || fail "3 more listings of the view's /ds cost $(($(lists) - l0)) backend LISTs (want 0)"
[ "$(stat -c %s "$V/ds/a@d1/sub/x.bin")" = 777 ] || fail "d1's sub/x.bin has size $(stat -c %s "$V/ds/a@d1/sub/x.bin")"
cmp -s "$V/ds/a@d1/1.bin" "$T/ref/1" || fail "d1's 1.bin (unchanged since) reads other bytes"
cmp -s "$V/ds/a@d2/new.bin" "$T/ref/new0" || fail "d2's new.bin reads other bytes"
cmp -s "$V/ds/a@d2/sub/x.bin" "$T/ref/new0" || fail "d2's sub/x.bin reads other bytes"
# d1's sub/x.bin was overwritten after the commit (never read before, so nothing cached): the
# backend keeps no older version, so the version's bytes are gone: EIO, logged, never new bytes
if cat "$V/ds/a@d1/sub/x.bin" >"$T/got" 2>"$T/err"; then
  fail "d1's overwritten sub/x.bin read ($(stat -c %s "$T/got") bytes) instead of failing"
fi
grep -q "Input/output error" "$T/err" || fail "d1's overwritten sub/x.bin: $(cat "$T/err")"
grep -q "a@d1/sub/x.bin: the file of this dataset version changed in the backend" "$T/tierd.log" ||
  fail "no log line naming the version's changed file"
calls() { api /v1/stats | python3 -c 'import json,sys
b=[b for b in json.load(sys.stdin)["backends"] if b["name"]=="be"][0]["calls"]
print(b["stat"] + b["list"] + b["read"])'; }
c0=$(calls)
for r in 1 2; do
  stat "$V/ds/a@d2"/*.bin "$V/ds/a@d2/sub/x.bin" >/dev/null || fail "stat of d2's files"
  ls -R "$V/ds/a@d2" >/dev/null || fail "ls -R d2"
done
[ "$(calls)" = "$c0" ] || fail "the version's metadata cost $(($(calls) - c0)) backend calls (want 0)"
if touch "$V/ds/a@d2/zz" 2>/dev/null; then fail "created a file in a version"; fi
if ls "$V/ds/a@race1" >/dev/null 2>&1; then fail "listed version race1, whose manifest is truncated"; fi
grep -q "race1 of /ds/a is refused: its manifest" "$T/tierd.log" || fail "no log line for the truncated manifest"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
as_nobody cat "$V/ds/a@d2/new.bin" >/dev/null || fail "nobody cannot read d2's new.bin (mode 0444 like /ds)"
rc=$(ctl dataset commit /priv/t p1)
[ "$rc" = 0 ] || fail "commit /priv/t p1: exit $rc: $(cat "$T/out")"
[ "$(stat -c %a "$V/priv/t@p1/f.bin")" = "$(stat -c %a "$MNT/priv/t/f.bin")" ] ||
  fail "the view's mode $(stat -c %a "$V/priv/t@p1/f.bin") differs from /priv's $(stat -c %a "$MNT/priv/t/f.bin")"
if as_nobody cat "$V/priv/t@p1/f.bin" >/dev/null 2>&1; then
  fail "nobody read a version of /priv (umask 077) through the view"
fi
[ "$(LC_ALL=C ls "$V/priv" | tr '\n' ' ')" = "t t@p1 " ] || fail "ls of the view's /priv: $(ls "$V/priv" 2>&1 | tr '\n' ' ')"
if as_nobody ls "$V/priv" >/dev/null 2>&1; then
  fail "nobody listed the versions of /priv (umask 077) in the view"
fi
cmp -s "$V/priv/t@p1/f.bin" "$T/ref/x" || fail "root cannot read p1's f.bin"
ok "the view: its directories list namespaces, trees and versions (not /priv's to others); ls and reads of d1 and d2, an overwritten file EIO (logged), metadata with 0 backend calls, read-only, a damaged manifest served as nothing; a version has its namespace's permissions"

# ---- a version staged, pinned and evicted by its path ----------------------------------------------
rc=$(ctl evict "$V/ds/a@d2")
[ "$rc" = 0 ] || fail "evict of version d2: exit $rc: $(cat "$T/out")"
rc=$(ctl stage "$V/ds/a@d2")
[ "$rc" = 0 ] || fail "stage of version d2: exit $rc: $(cat "$T/out")"
f0=$(fetches)
for f in 0.bin 1.bin 2.bin 3.bin new.bin sub/x.bin; do
  cat "$V/ds/a@d2/$f" >/dev/null || fail "read of d2's $f after staging"
done
[ "$(fetches)" = "$f0" ] || fail "reading staged version d2 cost $(($(fetches) - f0)) fetches (want 0)"
# d1's 0.bin and sub/x.bin changed since its commit: its bytes cannot be staged
rc=$(ctl stage "$V/ds/a@d1")
[ "$rc" != 0 ] && grep -q "in the backend since its dataset version was committed" "$T/out" ||
  fail "stage of version d1 (files changed since): exit $rc: $(cat "$T/out")"
rc=$(ctl stage "$V/ds/a@d1/1.bin")
[ "$rc" = 0 ] || fail "stage of d1's unchanged 1.bin: exit $rc: $(cat "$T/out")"
rc=$(ctl pin "$V/ds/a@d2/sub")
[ "$rc" = 0 ] || fail "pin of d2's sub: exit $rc: $(cat "$T/out")"
rc=$(ctl unpin "$V/ds/a@d2/sub")
[ "$rc" = 0 ] || fail "unpin of d2's sub: exit $rc: $(cat "$T/out")"
rc=$(ctl pin "$V/ds/a@d2/nope")
[ "$rc" != 0 ] && grep -q "no such file or directory in version d2" "$T/out" ||
  fail "pin of a path not in d2: exit $rc: $(cat "$T/out")"
rc=$(ctl stage "$V/ds")
[ "$rc" != 0 ] && grep -q "not a version" "$T/out" || fail "stage of the view's directory: exit $rc: $(cat "$T/out")"
ok "a version by its path: staged (then read with 0 fetches), refused where its files changed, pinned, unpinned, evicted"

# ---- a version's files as epoch-order hints ----------------------------------------------------
# hinted by their view paths: fetched pinned to the manifest (its sizes and ETags: no stat), then
# read through the view with no fetch; a file changed since its commit fails, named; a version's
# root, a directory of it and a missing version are refused with what is wrong
rc=$(ctl evict "$V/ds/a@d2")
[ "$rc" = 0 ] || fail "evict of version d2 before hinting it: exit $rc: $(cat "$T/out")"
hpost() { curl -sS -o "$T/hpost.json" -w '%{http_code}' --unix-socket "$SOCK" -d "$1" http://tierd/v1/hints; }
VP=/.tierd/datasets/ds/a@d2
code=$(hpost "{\"name\": \"v2\", \"paths\": [\"$VP/3.bin\", \"$VP/0.bin\", \"$VP/sub/x.bin\", \"$VP/new.bin\", \"$VP/1.bin\", \"$VP/2.bin\"]}")
[ "$code" = 200 ] || [ "$code" = 201 ] || fail "POST /v1/hints with d2's view paths: HTTP $code $(cat "$T/hpost.json")"
hset() { # NAME FIELD: a field of hint set NAME in GET /v1/hints
  api /v1/hints | python3 -c 'import json,sys
s=[x for x in json.load(sys.stdin)["sets"] if x["name"]==sys.argv[1]]
print(s[0][sys.argv[2]] if s else "none")' "$1" "$2"
}
deadline=$((SECONDS + 180))
until [ "$(hset v2 fetched_files)" = 6 ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the hint set of d2's 6 files fetched $(hset v2 fetched_files) in 180 s: $(api /v1/hints)"
  [ "$(hset v2 errors)" = 0 ] || fail "the hint set of d2 has errors: $(api /v1/hints)"
  sleep 0.1 # polling the set's progress, not a synchronisation
done
[ "$(hset v2 attrs_stat)" = 0 ] && [ "$(hset v2 attrs_listed)" = 0 ] ||
  fail "hinting a version's files asked for sizes ($(hset v2 attrs_stat) stats, $(hset v2 attrs_listed) listed): its manifest has them"
f0=$(fetches)
# the view's files were read before: the kernel's page cache would answer without tierd seeing
# the reads that consume the entries
sync && echo 1 >/proc/sys/vm/drop_caches
for f in 3.bin 0.bin sub/x.bin new.bin 1.bin 2.bin; do
  cat "$V/ds/a@d2/$f" >/dev/null || fail "read of d2's hinted $f"
done
[ "$(fetches)" = "$f0" ] || fail "reading hinted version d2 cost $(($(fetches) - f0)) fetches (want 0)"
[ "$(hset v2 cursor)" = 6 ] || fail "reads through d2's view consumed $(hset v2 cursor) of the 6 hinted entries"
code=$(hpost "{\"name\": \"v1bad\", \"paths\": [\"/.tierd/datasets/ds/a@d1/sub/x.bin\"]}")
[ "$code" = 200 ] || [ "$code" = 201 ] || fail "POST /v1/hints with d1's sub/x.bin: HTTP $code $(cat "$T/hpost.json")"
deadline=$((SECONDS + 180))
until [ "$(hset v1bad errors)" = 1 ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "hinting d1's changed sub/x.bin did not fail: $(api /v1/hints)"
  sleep 0.1 # polling the set's progress, not a synchronisation
done
hset v1bad first_error | grep -q "changed in the backend since its dataset version was committed" ||
  fail "the hint of d1's changed file says: $(hset v1bad first_error)"
for bad in "$VP|a version's root" "$VP/sub|a directory in version d2" \
  "/.tierd/datasets/ds/a@nope/0.bin|has no version nope" "/.tierd/datasets/ds|not a file of a version"; do
  code=$(hpost "{\"name\": \"bad\", \"paths\": [\"${bad%%|*}\"]}")
  [ "$code" = 400 ] && grep -q "${bad#*|}" "$T/hpost.json" ||
    fail "hinting ${bad%%|*}: HTTP $code $(cat "$T/hpost.json"), want 400 naming '${bad#*|}'"
done
for n in v2 v1bad; do
  tierd_api "$SOCK" "/v1/hints/$n" -X DELETE >/dev/null || fail "DELETE /v1/hints/$n"
done
ok "a version's files hinted by their view paths: fetched pinned to the manifest (no stat), read with 0 fetches, consumed by the view's reads; a changed file fails, named; bad view paths refused"

# ---- a job that stages a version (POST /v1/jobs with a view path) ------------------------------
rc=$(ctl evict "$V/ds/a@d2")
[ "$rc" = 0 ] || fail "evict of version d2 before the job: exit $rc: $(cat "$T/out")"
jpost() { curl -sS -o "$T/jpost.json" -w '%{http_code}' --unix-socket "$SOCK" -d "$1" http://tierd/v1/jobs; }
jget() { api "/v1/jobs/$1" | python3 -c 'import json,sys
o=json.load(sys.stdin)
for k in sys.argv[1].split("."): o=o[k]
print(o)' "$2"; }
code=$(jpost "{\"job\": 77, \"tenant\": \"team-v\", \"stage\": [\"$VP\"], \"cache_bytes\": \"2M\", \"dry_run\": true}")
[ "$code" = 200 ] || fail "a dry run of a job staging d2: HTTP $code $(cat "$T/jpost.json")"
code=$(jpost "{\"job\": 77, \"tenant\": \"team-v\", \"stage\": [\"$VP\"], \"cache_bytes\": \"2M\"}")
[ "$code" = 200 ] || fail "a job staging d2: HTTP $code $(cat "$T/jpost.json")"
deadline=$((SECONDS + 180))
until [ "$(jget 77 staging.state)" = staged ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "job 77 did not stage d2 in 180 s: $(api /v1/jobs/77)"
  sleep 0.1 # polling the job's progress, not a synchronisation
done
[ "$(jget 77 staging.bytes_done)" = 315006 ] || fail "job 77 staged $(jget 77 staging.bytes_done) bytes of d2, want 315006"
f0=$(fetches)
for f in 0.bin 1.bin 2.bin 3.bin new.bin sub/x.bin; do
  cat "$V/ds/a@d2/$f" >/dev/null || fail "read of d2's $f after the job staged it"
done
[ "$(fetches)" = "$f0" ] || fail "reading d2 after job 77 staged it cost $(($(fetches) - f0)) fetches (want 0)"
code=$(jpost "{\"job\": 78, \"tenant\": \"team-v\", \"stage\": [\"/.tierd/datasets/ds/a@nope\"], \"cache_bytes\": \"2M\"}")
[ "$code" = 400 ] || fail "a job staging a missing version: HTTP $code $(cat "$T/jpost.json"), want 400"
code=$(jpost "{\"job\": 79, \"tenant\": \"team-v\", \"stage\": [\"/ds/a\", \"$VP\"], \"cache_bytes\": \"2M\"}")
[ "$code" = 400 ] && grep -q "take the same keys" "$T/jpost.json" ||
  fail "a job staging a version and its tree: HTTP $code $(cat "$T/jpost.json"), want 400 (the same keys)"
tierd_api "$SOCK" /v1/jobs/77 -X DELETE >/dev/null || fail "DELETE /v1/jobs/77"
ok "a job stages a version by its view path (dry run too): staged whole, then read with 0 fetches; a missing version, or a version with its tree, refused"

# the policy keep-d2 (dataset = /ds/a@d2, action = pin): a pass pins every file of d2 that the
# backend holds as committed, and nothing else; keep-e, whose version's only file was deleted
# since, finds an empty namespace and pins nothing (a pass over an empty listing once searched
# a NULL array: UBSan aborted tierd)
put "$T/ref/x" "e/t/f.bin"
rc=$(ctl dataset commit /e/t v1)
[ "$rc" = 0 ] || fail "commit /e/t v1: exit $rc: $(cat "$T/out")"
del "e/t/f.bin"
rc=$(ctl policy run --json)
[ "$rc" = 0 ] || fail "policy run: exit $rc: $(cat "$T/out")"
python3 - "$T/out" <<'PY' || fail "the dataset policy: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
pins = sorted(a["path"] for a in j["actions"] if a["policy"] == "keep-d2" and a["result"] == "done")
want = ["/ds/a/0.bin", "/ds/a/1.bin", "/ds/a/2.bin", "/ds/a/3.bin", "/ds/a/new.bin", "/ds/a/sub/x.bin"]
if pins != want:
    sys.exit(f"keep-d2 pinned {pins}, want {want}")
if [a for a in j["actions"] if a["policy"] == "keep-e"]:
    sys.exit(f"keep-e acted on an empty namespace: {j['actions']}")
PY
rc=$(ctl policy run --json)
[ "$rc" = 0 ] && [ "$(jfield "done")" = 0 ] || fail "a second pass pinned again: $(cat "$T/out")"
ok "a policy with dataset = /ds/a@d2 pins exactly d2's files, once"

# ---- a versioned bucket: the version reads its bytes after an overwrite and a delete -------------
if [ "$KIND" = rgw ]; then
  rc=$(ctl dataset commit /vds/t v1 --json)
  [ "$rc" = 0 ] || fail "commit /vds/t v1: exit $rc: $(cat "$T/out")"
  [ "$(jfield versioned)" = 3 ] || fail "v1 of the versioned bucket recorded $(jfield versioned) version ids, want 3: $(cat "$T/out")"
  head -c 3333 /dev/urandom >"$T/ref/vnew"
  tierd_s3 -T "$T/ref/vnew" "$S3_ENDPOINT/$VBUCKET/t/0.bin" >/dev/null || fail "overwrite t/0.bin"
  tierd_s3 -X DELETE "$S3_ENDPOINT/$VBUCKET/t/1.bin" >/dev/null || fail "delete t/1.bin"
  for i in 0 1 2; do
    cmp -s "$V/vds/t@v1/$i.bin" "$T/ref/$i" || fail "version v1's $i.bin (versioned bucket) reads other bytes after the overwrite/delete"
  done
  cmp -s "$MNT/vds/t/0.bin" "$T/ref/vnew" || fail "the namespace's t/0.bin is not the new object"
  rc=$(ctl evict "$V/vds/t@v1")
  [ "$rc" = 0 ] || fail "evict v1 of the versioned tree: exit $rc: $(cat "$T/out")"
  rc=$(ctl stage "$V/vds/t@v1")
  [ "$rc" = 0 ] || fail "stage of v1 of the versioned tree (files overwritten and deleted since): exit $rc: $(cat "$T/out")"
  ok "a versioned bucket: the commit recorded version ids; v1 reads (and stages) its bytes after an overwrite and a delete"
fi

# ---- bad input -----------------------------------------------------------------------------------
rc=$(ctl dataset commit /ds/a "bad/name")
[ "$rc" = 4 ] && grep -q "is not allowed" "$T/out" || fail "a bad name: exit $rc: $(cat "$T/out")"
rc=$(ctl dataset commit /nowhere v1)
[ "$rc" = 4 ] || fail "a path in no namespace: exit $rc: $(cat "$T/out")"
rc=$(ctl dataset commit /ds/empty v1)
[ "$rc" = 4 ] && grep -q "names no file" "$T/out" || fail "a tree with no file: exit $rc: $(cat "$T/out")"
if touch "$MNT/ckpt/.tierd-datasets" 2>"$T/err"; then fail "created the reserved name in /ckpt"; fi
grep -q "not permitted" "$T/err" || fail "creating the reserved name: $(cat "$T/err")"
if mkdir "$MNT/ckpt/.tierd-datasets" 2>/dev/null; then fail "made the reserved name a directory in /ckpt"; fi
echo x >"$MNT/ckpt/f" || fail "write /ckpt/f"
if mv "$MNT/ckpt/f" "$MNT/ckpt/.tierd-datasets" 2>/dev/null; then fail "renamed a file onto the reserved name"; fi
ok "bad name, path in no namespace, empty tree refused; the reserved name cannot be created"

stop_tierd
