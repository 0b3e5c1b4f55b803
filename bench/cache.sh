#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cache benchmarks: builds Release in build-cacherel (only the cache targets) and runs the trace
# simulator (S3-FIFO vs LRU vs Belady on the three standard traces) and the hit-path benchmark.
# Usage: bench/cache.sh [SCRATCH_DIR] [SECONDS]. Results are recorded in docs/bench/cache.md.
# CURVES=1: only the read-path cost of [cache] curves (`cache_hit SCRATCH SECONDS curves`: curves
# off vs on, SECONDS alternating rounds; docs/BENCHMARKS.md "Hot-tier advice").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cacherel}
SCRATCH=${1:-/tmp/tier-cache-bench}
SECONDS_PER=${2:-3}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh
tierd_build_release "$BUILD" cachesim cache_hit
mkdir -p "$SCRATCH"
echo "## $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${CURVES:-0}" = 1 ]; then
  echo "### cache_hit $SCRATCH $SECONDS_PER curves"
  "$BUILD/cache_hit" "$SCRATCH" "$SECONDS_PER" curves
  exit 0
fi
echo "### cachesim all $SCRATCH"
"$BUILD/cachesim" all "$SCRATCH"
echo "### cache_hit $SCRATCH $SECONDS_PER"
"$BUILD/cache_hit" "$SCRATCH" "$SECONDS_PER"
rm -f "$SCRATCH"/zipf.csv "$SCRATCH"/zipfscan.csv "$SCRATCH"/epoch.csv
