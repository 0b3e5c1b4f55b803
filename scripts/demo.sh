#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo`: the README's main job on the embedded default. Makes a sample dataset in a local
# directory that stands in for the shared tier (a few 32 MiB shards + 2,000 small files), starts
# tierd on it (POSIX backend, disk cache, FUSE mount, API socket, all under demo-data/), stages
# the dataset with `tierctl stage`, reads everything back through the mount verifying sha256
# against the source, prints a summary (cold vs warm read rate, hit ratio) and stops tierd
# cleanly, also on Ctrl-C.
#
# Environment: BUILD (default build), DEMO_DIR (default ./demo-data), DEMO_SHARDS (4),
# DEMO_SMALL (2000), DEMO_KEEP_CACHE=1 to keep the cache of a previous run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh
tierd_bins "$BUILD"
DEMO=${DEMO_DIR:-$ROOT/demo-data}
SRC=$DEMO/shared
CACHE=$DEMO/cache
tierd_places "$DEMO"
LOG=$DEMO/tierd.log
NSHARDS=${DEMO_SHARDS:-4}
NSMALL=${DEMO_SMALL:-2000}

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
rate() { # bytes seconds -> "123.4 MiB/s"
  awk -v b="$1" -v s="$2" 'BEGIN { if (s <= 0) s = 1e-9; printf "%.1f MiB/s", b / 1048576 / s }'
}

[ -x "$TIERD" ] || die "$TIERD not found: run 'make build' first"
[ -e /dev/fuse ] || die "/dev/fuse is missing: FUSE is needed to mount the tiers"

TIERD_PID=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if tierd_alive; then
    say "stopping tierd (pid $TIERD_PID)"
    tierd_reap "$TIERD_PID"
  fi
  tierd_unmount "$MNT"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo; say "interrupted"; exit 130' INT TERM

# ---- 1. the dataset ------------------------------------------------------------------------
DATA=$SRC/imagenet-mini
if [ ! -f "$DEMO/manifest.sha256" ] || [ ! -d "$DATA" ]; then
  say "making a sample dataset in $DATA ($NSHARDS x 32 MiB shards + $NSMALL small files)"
  rm -rf "$SRC" "$DEMO/manifest.sha256"
  mkdir -p "$DATA/shards" "$DATA/train"
  if [ -x "$TIERBENCH" ]; then
    "$TIERBENCH" gen "$DATA/shards" --shards "$NSHARDS" --shard-size 32M --no-progress >/dev/null
    "$TIERBENCH" gen "$DATA/train" --files "$NSMALL" --size uniform:4K-64K --no-progress >/dev/null
  else
    for i in $(seq -w 1 "$NSHARDS"); do
      head -c 32M /dev/urandom >"$DATA/shards/shard-$i.tar"
    done
    for i in $(seq 1 "$NSMALL"); do
      d=$DATA/train/class-$((i % 20))
      [ -d "$d" ] || mkdir -p "$d"
      head -c $(((RANDOM % 61 + 4) * 1024)) /dev/urandom >"$d/img-$i.jpg"
    done
  fi
  (cd "$SRC" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$DEMO/manifest.sha256"
fi
NFILES=$(wc -l <"$DEMO/manifest.sha256")
NBYTES=$(du -sb "$SRC" | cut -f1)
echo "dataset: $NFILES files, $((NBYTES / 1048576)) MiB in $SRC"

# ---- 2. tierd ------------------------------------------------------------------------------
[ "${DEMO_KEEP_CACHE:-0}" = 1 ] || rm -rf "$CACHE"
mkdir -p "$CACHE" "$MNT"
{
  echo "; written by scripts/demo.sh: the embedded default, everything in $DEMO"
  tierd_conf_section cache "ram_size = 256M" "disk_dir = $CACHE" "disk_size = 2G" \
    "disk_min_free = 512M" "block_size = 4M"
  tierd_conf_posix shared "$SRC"
  tierd_conf_ns /datasets shared
  tierd_conf_mount "$MNT" "attr_ttl = 5s" "entry_ttl = 5s"
  tierd_conf_api "$SOCK"
} >"$CONF"

# a stale mount of a crashed run is cleared by tierd itself
say "starting tierd (config $CONF, log $LOG)"
tierd_start "$CONF" "$LOG" "$MNT" || die "tierd did not start (see $LOG)"
echo "mounted: $MNT/datasets -> $SRC"

api() { tierd_api "$SOCK" "$1"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# ---- 3. stage (cold: shared tier -> hot tier) ----------------------------------------------
COLD_S=
if [ -x "$TIERCTL" ]; then
  say "staging /datasets into the hot tier (tierctl stage)"
  t0=$(now)
  tierd_ctl stage /datasets
  t1=$(now)
  COLD_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
else
  echo "tierctl not built yet ($TIERCTL): skipping the staging step; the first read is cold"
fi

# ---- 4. read back through the mount, verifying every byte ----------------------------------
read_verify() {
  (cd "$MNT" && sed 's#  \./#  datasets/#' "$DEMO/manifest.sha256" | sha256sum -c --quiet -) ||
    die "checksum mismatch reading through the mount"
}
if [ -z "$COLD_S" ]; then
  say "cold read of every file through the mount (verifying sha256)"
  t0=$(now); read_verify; t1=$(now)
  COLD_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
fi
say "warm read of every file through the mount (verifying sha256)"
counts() { api /v1/status | json "'%d %d %d' % (d['cache']['ram']['hits'] + d['cache']['disk']['hits'], d['cache']['ram']['misses'], d['cache']['fetches'])"; }
read -r H0 M0 F0 < <(counts) || die "the control API did not answer on $SOCK"
t0=$(now); read_verify; t1=$(now)
read -r H1 M1 F1 < <(counts) || die "the control API did not answer on $SOCK"
WARM_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
echo "all $NFILES files match their sha256"

# ---- 5. summary ----------------------------------------------------------------------------
ST=$(api /v1/status) || die "the control API did not answer on $SOCK"
HIT=$(echo "$ST" | json "'%.1f%%' % (100 * d['cache']['hit_ratio'])")
FETCH=$(echo "$ST" | json "'%d blocks, %.1f MiB' % (d['cache']['fetches'], d['cache']['fetch_bytes'] / 1048576)")
DISK=$(echo "$ST" | json "'%.1f MiB' % (d['cache']['disk']['used'] / 1048576)")
say "summary"
printf '  dataset            %d files, %d MiB\n' "$NFILES" "$((NBYTES / 1048576))"
printf '  cold (shared->hot) %s  (%.2f s%s)\n' "$(rate "$NBYTES" "$COLD_S")" "$COLD_S" \
  "$([ -x "$TIERCTL" ] && echo ', tierctl stage' || echo ', first read')"
printf '  warm read (mount)  %s  (%.2f s, incl. sha256)\n' "$(rate "$NBYTES" "$WARM_S")" "$WARM_S"
printf '  warm-read hits     %s  (%d block hits, %d misses, %d backend fetches during the warm read)\n' \
  "$(awk -v h=$((H1 - H0)) -v m=$((M1 - M0)) 'BEGIN { printf "%.1f%%", h + m ? 100 * h / (h + m) : 0 }')" \
  $((H1 - H0)) $((M1 - M0)) $((F1 - F0))
printf '  hit ratio (total)  %s  (staging counts as misses)\n' "$HIT"
printf '  backend fetches    %s\n' "$FETCH"
printf '  disk cache used    %s in %s\n' "$DISK" "$CACHE"
if [ -x "$TIERCTL" ]; then
  echo
  tierd_ctl status || true
fi
echo
echo "Point PyTorch at $MNT/datasets; to use an S3 bucket instead, see contrib/tierd.conf.example."
