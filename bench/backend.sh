#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# backend.sh - build backend_bench (Release) and run it against a private RGW started here with
# scripts/ceph.sh; the cluster is stopped on exit. Extra arguments go to backend_bench.
#   bench/backend.sh [backend_bench args...]
# Environment: BUILD_DIR (default build-s3rel), CEPH_DIR (default ${TMPDIR:-/tmp}/tierd-bench-ceph).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-s3rel}
CEPH_DIR=${CEPH_DIR:-${TMPDIR:-/tmp}/tierd-bench-ceph}
# shellcheck source=scripts/lib/tierd.sh
. scripts/lib/tierd.sh

tierd_build_release "$BUILD_DIR" backend_bench

started=0
cleanup() {
    if ((started)); then
        scripts/ceph.sh stop "$CEPH_DIR" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
scripts/ceph.sh start "$CEPH_DIR"
started=1
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(uname -r), $(curl --version | head -1 | cut -d' ' -f1-2)"
"$BUILD_DIR/backend_bench" --env "$CEPH_DIR/env" --ceph-dir "$CEPH_DIR" "$@"
