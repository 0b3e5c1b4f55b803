#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_listreval_fuse.sh - metadata revalidation by one LIST per directory, and listings of a
# 100,000-file directory, on a REAL mount over a POSIX backend (run by CTest, label fuse; needs
# /dev/fuse). See "revalidate" in src/fuse/fuse_int.h.
#
#   /r   attr_ttl = entry_ttl = 300ms over ds/:
#        - d/ (200 files) and m/ (2,500 files: 3 backend pages) are listed, the TTL passes, and
#          200 stats of d's files by name (no readdir) cost no backend stat: d's listing is
#          rebuilt once (one LIST page per directory: d, and / for the lookup of d), not 200
#          HEADs; every size is right;
#        - m (3 pages): rent or buy, the first 2 stats of names take a HEAD each and no LIST,
#          the 3rd rebuilds the listing (3 pages), and the next 20 cost no HEAD;
#        - a file of d replaced in the backend with another size is seen (size and bytes), and
#          a file deleted from the backend becomes ENOENT, both with no backend stat: through
#          the rebuilt listing;
#   /b   the default read-cache TTL (60 s) over big/ of 100,000 files: `ls -f`, `ls -l` and
#        `find` list exactly 100,000 entries, cold and warm ([mount] max_dir_entries is the
#        default 1,000,000). The speed is measured by bench/listing.sh, not here.
# The one sleep lets the 300 ms TTL pass (elapsed time is what is tested); every other wait
# polls with a deadline. Each bound on /r's calls is that of one revalidation per TTL the stats
# ran across (1 + their duration / 300 ms): a rebuilt listing goes stale again after 300 ms, so
# stats slowed by a loaded machine may meet another revalidation (and are allowed its calls);
# on a quiet machine they run within one TTL and the bounds are those above.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
tierd_test_setup listreval_fuse

mkdir -p "$DATA/ds/d" "$DATA/ds/m" "$DATA/big" "$DATA/stale" "$MNT"
head -c 10000 /dev/urandom >"$DATA/stale/s1.bin"
python3 - "$DATA" <<'PY'
import os, sys
data = sys.argv[1]
for i in range(200):  # d/f000..f199, f<i> holds i + 1 bytes
    with open(os.path.join(data, "ds/d", "f%03d" % i), "wb") as f:
        f.write(b"x" * (i + 1))
for i in range(2500):
    open(os.path.join(data, "ds/m", "g%04d" % i), "wb").close()
for i in range(100000):
    open(os.path.join(data, "big", "f%06d" % i), "wb").close()
PY
head -c 5000 /dev/urandom >"$T/new.bin"

{
  tierd_conf_section daemon "log_level = info"
  tierd_conf_section cache "ram_size = 64M" "block_size = 64K"
  tierd_conf_posix warm "$DATA"
  tierd_conf_ns /r warm "prefix = ds" "attr_ttl = 300ms" "entry_ttl = 300ms"
  tierd_conf_ns /b warm "prefix = big"
  tierd_conf_ns /s warm "prefix = stale"
  tierd_conf_mount "$MNT"
  tierd_conf_api "$SOCK"
} >"$CONF"

start_tierd
ok "mounted"

# the backend's calls of one kind (the scheduler's per-op counts in /v1/stats)
calls() {
  api /v1/stats | python3 -c 'import json,sys; print(sum(b["calls"][sys.argv[1]] for b in json.load(sys.stdin)["backends"]))' "$1"
}
# ttls T0: how many TTLs of /r (300 ms) the time since T0 (an $EPOCHREALTIME) touches:
# 1 + the elapsed time / 300 ms
ttls() {
  local us=$((10#${EPOCHREALTIME//[!0-9]/} - 10#${1//[!0-9]/}))
  echo $((1 + us / 300000))
}
# paths FMT FIRST LAST: the mount paths printf FMT (after "$MNT/r/") makes of FIRST..LAST
paths() { local i; for i in $(seq "$2" "$3"); do printf "%s/r/$1\n" "$MNT" "$i"; done; }

# ---- 200 files revalidated by one listing ------------------------------------------------
ls "$MNT/r" >/dev/null
[ "$(ls -l "$MNT/r/d" | tail -n +2 | wc -l)" = 200 ] || fail "ls -l of d does not list 200 files"
[ "$(ls "$MNT/r/m" | wc -l)" = 2500 ] || fail "ls of m does not list 2500 files"
s0=$(calls stat) l0=$(calls list)
sleep 0.5 # not a synchronisation: the TTL (300 ms) passing is what is tested
mapfile -t d_files < <(paths d/f%03d 0 199)
# one process stats all 200 by name: lookups, no readdir
t0=$EPOCHREALTIME
stat -c '%n %s' "${d_files[@]}" >"$T/sizes.txt"
n=$(ttls "$t0")
s1=$(calls stat) l1=$(calls list)
python3 - "$T/sizes.txt" <<'PY' || fail "stat after the TTL gave wrong sizes: $(head -3 "$T/sizes.txt")"
import sys
rows = [l.split() for l in open(sys.argv[1])]
assert len(rows) == 200, len(rows)
for name, size in rows:
    assert int(size) == int(name[-3:]) + 1, (name, size)
PY
[ $((s1 - s0)) -le $((2 * n)) ] || fail "200 stats after the TTL (over $n TTLs) made $((s1 - s0)) backend stats (want at most 2 a TTL: one listing, not a HEAD per file)"
[ $((l1 - l0)) -ge 1 ] && [ $((l1 - l0)) -le $((3 * n)) ] ||
  fail "200 stats after the TTL (over $n TTLs) made $((l1 - l0)) backend list calls (want 1 to 3 a TTL: d's and /'s listing)"
ok "200 stats after the TTL: $((s1 - s0)) backend stats, $((l1 - l0)) list calls (over $n TTLs)"

# ---- rent or buy: a 3-page listing is rebuilt at the 3rd revalidation ----------------------
s0=$(calls stat) l0=$(calls list)
t0=$EPOCHREALTIME
stat "$MNT/r/m/g0001" "$MNT/r/m/g0002" >/dev/null
n=$(ttls "$t0")
s1=$(calls stat) l1=$(calls list)
# the lookup of m itself revalidates from /'s one-page listing (at most one list call a TTL)
[ $((s1 - s0)) = 2 ] || fail "2 stats in a stale 3-page directory made $((s1 - s0)) backend stats (want 2 HEADs)"
[ $((l1 - l0)) -le "$n" ] || fail "2 stats in a stale 3-page directory (over $n TTLs) made $((l1 - l0)) list calls (want no rebuild yet)"
mapfile -t m_files < <(paths m/g%04d 3 22)
t0=$EPOCHREALTIME
stat "${m_files[@]}" >/dev/null
n=$(ttls "$t0")
s2=$(calls stat) l2=$(calls list)
# (and perhaps one more for /, whose listing the lookup of m may find stale again); a TTL more
# starts the rent or buy again: 2 HEADs, then a rebuild
[ $((l2 - l1)) -ge 3 ] && [ $((l2 - l1)) -le $((4 * n)) ] ||
  fail "the 3rd revalidation in a 3-page directory (over $n TTLs) made $((l2 - l1)) list calls (want one rebuild a TTL: 3 pages, and / 1)"
[ $((s2 - s1)) -le $((1 + 2 * (n - 1))) ] || fail "20 stats after the rebuild (over $n TTLs) made $((s2 - s1)) backend stats (want the HEAD of the 3rd only, and 2 a TTL more)"
ok "3-page directory: 2 HEADs, then one rebuild ($((l2 - l1)) pages), then $((s2 - s1)) HEADs for 20 stats (over $n TTLs)"

# ---- a replaced and a deleted file are seen through the listing ---------------------------
cat "$MNT/r/d/f007" >/dev/null
s0=$(calls stat)
cp "$T/new.bin" "$DATA/ds/d/.f007.tmp" && mv "$DATA/ds/d/.f007.tmp" "$DATA/ds/d/f007"
rm "$DATA/ds/d/f013"
replaced() { [ "$(stat -c %s "$MNT/r/d/f007" 2>/dev/null)" = 5000 ]; }
wait_for 20 replaced || fail "the replaced f007 (5000 bytes) was not seen within 20 s: $(stat -c %s "$MNT/r/d/f007")"
cmp -s "$MNT/r/d/f007" "$T/new.bin" || fail "f007 reads other bytes than the replacement"
gone() { ! stat "$MNT/r/d/f013" >/dev/null 2>"$T/gone.err" && grep -q "No such file" "$T/gone.err"; }
wait_for 20 gone || fail "the deleted f013 is still there: $(stat "$MNT/r/d/f013" 2>&1)"
s1=$(calls stat)
[ $((s1 - s0)) = 0 ] || fail "seeing the replacement and the deletion made $((s1 - s0)) backend stats (want 0: the listing answers)"
ok "replaced f007 seen (size and bytes), deleted f013 ENOENT, no backend stat"

# ---- 100,000 files ------------------------------------------------------------------------
for round in cold warm; do
  n=$(ls -f "$MNT/b" | wc -l)
  [ "$n" = 100000 ] || fail "$round ls -f of 100,000 files listed $n"
done
n=$(ls -l "$MNT/b" | tail -n +2 | wc -l)
[ "$n" = 100000 ] || fail "warm ls -l of 100,000 files listed $n"
n=$(find "$MNT/b" -type f | wc -l)
[ "$n" = 100000 ] || fail "warm find of 100,000 files found $n"
[ "$(wc -c <"$MNT/b/f099999")" = 0 ] || fail "the last of 100,000 files does not read"
ok "100,000 files: ls -f (cold, warm), ls -l and find list every entry"

# ---- a changed object found by a read, within the listing's TTL -------------------------------
# /s keeps listings 60 s: s1.bin is listed, then replaced in the backend before anyone read it.
# The first read asks the backend for the listed version and fails (ESTALE -> EIO); the next
# open must see the new version, not answer from the still-fresh listing again.
ls -l "$MNT/s" >/dev/null
head -c 7000 /dev/urandom >"$T/s1.new"
cp "$T/s1.new" "$DATA/stale/.s1.tmp" && mv "$DATA/stale/.s1.tmp" "$DATA/stale/s1.bin"
if cat "$MNT/s/s1.bin" >/dev/null 2>&1; then
  fail "the first read of the replaced s1.bin succeeded: the check below proves nothing"
fi
cmp -s "$MNT/s/s1.bin" "$T/s1.new" || fail "after the failed read, a new open of s1.bin did not read the new version"
ok "an object changed under a fresh listing: the failed read's next open reads the new version"

stop_tierd
ok "listreval_fuse passed"
