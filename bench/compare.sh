#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# compare.sh - run one tierbench profile against several target directories in one go and print
# one table of figures and ratios (each target / the first one).
#
#   bench/compare.sh --profile bench/profiles/mixed-small.ini local=/tmp/x tierd=/mnt/tierd/datasets
#
# A target without a dataset gets one from `tierbench gen` first (--gen sets its arguments). To
# compare a cold and a warm pass over the same mount, name it twice: cold=/mnt/t warm=/mnt/t
# (add `-- --drop-caches` to drop the page cache before each phase). Everything after `--` is
# passed to `tierbench run`. A target may name its own checkpoint directory, for a mount whose
# dataset namespace is read-only: tierd=/mnt/t/datasets/tb,ckpt=/mnt/t/ckpt/run.
# Results (JSON, CSV, charts, terminal output) go to --out.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 --profile FILE [--tierbench BIN] [--out DIR] [--gen "GEN ARGS"] [--regen]
          NAME=DIR[,ckpt=CKPT_DIR] [NAME=DIR...] [-- TIERBENCH RUN FLAGS...]
  --profile FILE    tierbench profile (INI), e.g. bench/profiles/mixed-small.ini
  --tierbench BIN   the tierbench binary (default: \$TIERBENCH, else the newest build*/src/tierbench/tierbench)
  --out DIR         where results go (default: a new directory under /tmp)
  --gen "ARGS"      dataset for targets without one (default: "$GEN_DEFAULT")
  --regen           regenerate the dataset even if the target has one
USAGE
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
GEN_DEFAULT="--files 2000 --size lognormal:128K,0.6"
PROFILE="" BIN="${TIERBENCH:-}" OUT="" GEN="$GEN_DEFAULT" REGEN=0
NAMES=() DIRS=() CKPTS=() EXTRA=()

while [ $# -gt 0 ]; do
  case "$1" in
    --profile) [ $# -ge 2 ] || { echo "compare.sh: --profile needs a file" >&2; exit 2; }
               PROFILE=$2; shift 2 ;;
    --tierbench) [ $# -ge 2 ] || { echo "compare.sh: --tierbench needs a path" >&2; exit 2; }
                 BIN=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || { echo "compare.sh: --out needs a directory" >&2; exit 2; }
           OUT=$2; shift 2 ;;
    --gen) [ $# -ge 2 ] || { echo "compare.sh: --gen needs arguments" >&2; exit 2; }
           GEN=$2; shift 2 ;;
    --regen) REGEN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    -*) echo "compare.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *=*) name=${1%%=*} dir=${1#*=}
         if ! [[ $name =~ ^[A-Za-z0-9_.-]+$ ]]; then
           echo "compare.sh: target name '$name' may use only letters, digits, _ . -" >&2; exit 2
         fi
         ckpt=
         case "$dir" in *,ckpt=*) ckpt=${dir#*,ckpt=} dir=${dir%%,ckpt=*} ;; esac
         NAMES+=("$name"); DIRS+=("$dir"); CKPTS+=("$ckpt"); shift ;;
    *) echo "compare.sh: '$1' is not NAME=DIR" >&2; usage >&2; exit 2 ;;
  esac
done

[ -n "$PROFILE" ] || { echo "compare.sh: --profile is required" >&2; usage >&2; exit 2; }
[ -r "$PROFILE" ] || { echo "compare.sh: $PROFILE: cannot read the profile" >&2; exit 2; }
[ ${#NAMES[@]} -ge 1 ] || { echo "compare.sh: give at least one NAME=DIR target" >&2; exit 2; }

if [ -z "$BIN" ]; then
  # shellcheck disable=SC2012  # build directory names are ours
  BIN=$(ls -t "$ROOT"/build*/src/tierbench/tierbench 2>/dev/null | head -n1 || true)
  [ -n "$BIN" ] || BIN=$(command -v tierbench || true)
fi
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
  echo "compare.sh: tierbench not found; build it (cmake --build BUILD --target tierbench)" \
       "or pass --tierbench BIN" >&2
  exit 2
fi

[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/tierbench-compare.XXXXXX)
mkdir -p "$OUT"
echo "tierbench: $BIN"
echo "profile:   $PROFILE"
echo "results:   $OUT"

ARGS=()
for i in "${!NAMES[@]}"; do
  name=${NAMES[$i]} dir=${DIRS[$i]} ckpt=${CKPTS[$i]}
  CK=()
  [ -z "$ckpt" ] || CK=(--ckpt-dir "$ckpt")
  mkdir -p "$dir"
  if [ "$REGEN" = 1 ] || { [ ! -d "$dir/samples" ] && [ ! -d "$dir/shards" ]; }; then
    echo "== $name: generating a dataset in $dir ($GEN)"
    # shellcheck disable=SC2086  # GEN is a list of arguments
    "$BIN" gen "$dir" $GEN --no-progress
  fi
  echo "== $name: tierbench run $dir"
  "$BIN" run "$dir" --profile "$PROFILE" --no-progress --json "$OUT/$name.json" \
    --csv "$OUT/$name.csv" --plot "$OUT/$name-plots" ${CK[@]+"${CK[@]}"} ${EXTRA[@]+"${EXTRA[@]}"} \
    | tee "$OUT/$name.txt"
  ARGS+=("$name=$OUT/$name.json")
done

echo
echo "== comparison"
"$BIN" compare "${ARGS[@]}" | tee "$OUT/compare.txt"
