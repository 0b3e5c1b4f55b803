#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cluster placement at scale: builds tier-clustersim (src/cluster/clustersim.c) Release in
# build-clusterrel and runs it over 1,000 nodes x 1,000,000 blocks with 16 membership changes
# (8 joins, 8 leaves), equal weights then weights 1/2/4, and prints one table of both.
# Usage: bench/cluster_sim.sh [NODES] [BLOCKS] [CHANGES]. Results in docs/BENCHMARKS.md,
# "Cluster placement at 1,000 nodes".
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-clusterrel}
NODES=${1:-1000}
BLOCKS=${2:-1000000}
CHANGES=${3:-16}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh
tierd_build_release "$BUILD" tier-clustersim
out=$(mktemp -d "${TMPDIR:-/tmp}/cluster_sim.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "## $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, $(git rev-parse --short HEAD)"
echo "### tier-clustersim --nodes $NODES --blocks $BLOCKS --changes $CHANGES [--mixed-weights]"
"$BUILD/src/cluster/tier-clustersim" --nodes "$NODES" --blocks "$BLOCKS" --changes "$CHANGES" \
    >"$out/equal"
"$BUILD/src/cluster/tier-clustersim" --nodes "$NODES" --blocks "$BLOCKS" --changes "$CHANGES" \
    --mixed-weights >"$out/mixed"
get() { awk -v k="$2" '$1 == k { print $2 }' "$out/$1"; }
row() {
    printf '| %s | %s | %s |\n' "$1" "$(get equal "$2")$3" "$(get mixed "$2")$3"
}
echo
echo "| measure | equal weights | weights 1, 2, 4 |"
echo "|---|---:|---:|"
row "owned max / share" owned_max_over_mean ""
row "blocks moved per change, mean" moved_per_change_mean "/N"
row "blocks moved per change, max" moved_per_change_max "/N"
row "egress (object-store reads per block)" egress ""
row "served max / share, one read per block, c = 1.25" served_max_over_mean ""
row "spilled past the owner, one read per block" spilled ""
row "served max / share, Zipf 0.9 reads, c = 1.25" zipf_served_max_over_mean ""
row "spilled past the owner, Zipf 0.9 reads" zipf_spilled ""
row "seconds: place + serve" seconds_place ""
row "seconds: changes" seconds_changes ""
