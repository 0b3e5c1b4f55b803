#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ceph_fixture.sh - the CTest fixture `rgw` (ceph_start, ceph_stop in the top-level
# CMakeLists.txt): the test Ceph of scripts/ceph.sh on the cluster bridge of
# scripts/clusternet.sh, so that tests with tierd nodes in network namespaces reach its mon, OSD
# and RGW at the bridge's address, while every other test goes on using 127.0.0.1 (RGW listens on
# both; RADOS clients read the mon's address from DIR/ceph.conf).
#
# Usage: ceph_fixture.sh start|stop DIR
#   start  clusternet.sh bridge-up (idempotent: a bridge left by a crashed run is reused), then
#          TIER_CEPH_ADDR=<the bridge's address> ceph.sh start DIR. When the bridge cannot be made
#          (not root, no iproute2, 10.214.0.0/16 taken) it says why and starts Ceph on 127.0.0.1:
#          the tests that need the bridge (cluster_netns) then fail, the others do not notice.
#   stop   ceph.sh stop DIR, then clusternet.sh bridge-down (as root); the exit status is
#          ceph.sh's.
set -euo pipefail

[[ $# -eq 2 && ($1 == start || $1 == stop) ]] || {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd -P)

case $1 in
start)
    # clusternet.sh says on stderr why it cannot make the bridge.
    if ! addr=$("$HERE/clusternet.sh" bridge-up); then
        echo "ceph_fixture: no cluster bridge (above), so Ceph listens on 127.0.0.1 only and the" \
            "tests that need network namespaces will fail" >&2
        addr=127.0.0.1
    fi
    TIER_CEPH_ADDR=$addr exec "$HERE/ceph.sh" start "$2"
    ;;
stop)
    rc=0
    "$HERE/ceph.sh" stop "$2" || rc=$?
    if [[ $(id -u) == 0 ]]; then
        "$HERE/clusternet.sh" bridge-down || echo "ceph_fixture: bridge-down failed" >&2
    fi
    exit "$rc"
    ;;
esac
