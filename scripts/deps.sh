#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install every Debian 12 package tierd needs to build, test, benchmark and demo. Idempotent: when
# all are already installed it does nothing (so it needs no network then); otherwise it runs
# apt-get update and apt-get install -y. Needs root (or sudo).
# When another apt process holds a lock (unattended-upgrades, apt-daily on a fresh node), it
# waits for it, up to TIER_DEPS_LOCK_WAIT seconds in all (default 600), instead of failing:
# DPkg::Lock::Timeout covers the dpkg locks (apt >= 2.0), and apt-get update and install are run
# again every 5 s while they fail for another lock, which apt (2.6) takes without that timeout
# (the package lists' lock of update, /var/cache/apt/archives/lock of install, held by
# apt-daily's download step). apt runs with LC_ALL=C: the retry reads its English message.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config git clang-14 libclang-rt-14-dev clang-format
  libcmocka-dev libcurl4-openssl-dev libexpat1-dev libssl-dev libfuse3-dev fuse3
  libinih-dev libjansson-dev libmicrohttpd-dev libsqlite3-dev libxxhash-dev liburing-dev
  ceph-mon ceph-osd radosgw ceph-common gnuplot-nox curl xxd xxhash procps psmisc python3
  util-linux prometheus shellcheck
  # cluster membership in Ceph RADOS (src/cluster/member.c; built only where it is found)
  librados-dev
  # network namespaces, veth and tc for the shaped object-store link (scripts/netlink.sh)
  iproute2
  # the dashboard's charting library (GET /ui/chart.js) and the tests' headless Chromium
  # (tests/integration/test_telemetry_ui.sh)
  libjs-chart.js chromium
  # a private single-node Slurm with the burst_buffer/lua plugin for the Slurm provider's tests
  # (scripts/slurm.sh; it never uses the system munge/slurm services these packages install)
  slurm-wlm slurmctld slurmd slurm-client munge
  # the provider contrib/slurm/burst_buffer.lua on the controller (JSON; clock and sleep), and
  # Lua 5.1 itself for its syntax check (make lint) and the tests
  lua-cjson lua-posix lua5.1
  # systemd readiness (sd_notify, Type=notify) and the man pages: scdoc turns docs/man/*.scd into
  # roff, mandoc lints the result (the tests), systemd-analyze verifies the units (systemd)
  libsystemd-dev scdoc mandoc man-db groff-base
  # the Debian package (make deb, tests/integration/test_deb.sh)
  dpkg-dev debhelper lintian
  # a real PyTorch DataLoader for the Python helper's stall reports
  # (tests/integration/test_stall_fuse.sh) and bench/dataloader.sh
  python3-torch
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
wait_s=${TIER_DEPS_LOCK_WAIT:-600}
[[ $wait_s =~ ^[0-9]+$ ]] || { echo "deps: TIER_DEPS_LOCK_WAIT=$wait_s is not a number of seconds" >&2; exit 2; }
echo "deps: installing ${missing[*]} (waiting up to ${wait_s} s for another apt process's lock)"
deadline=$((SECONDS + wait_s))
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# apt_get COMMAND ARGS...: apt-get COMMAND ARGS, run again every 5 s while it fails because
# another process holds a lock, until the deadline; any other failure, or a lock still held then,
# ends deps.sh
apt_get() {
  local what=$1 rc left
  while :; do
    left=$((deadline - SECONDS))
    [ "$left" -gt 0 ] || left=0
    rc=0
    $SUDO env LC_ALL=C DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$left" \
      "$@" 2>&1 | tee "$out" || rc=${PIPESTATUS[0]}
    [ "$rc" -ne 0 ] || return 0
    if ! grep -q "^E: Could not get lock" "$out" || [ $SECONDS -ge $deadline ]; then
      echo "deps: apt-get $what failed (exit $rc)" >&2
      exit "$rc"
    fi
    echo "deps: apt-get $what: another apt process holds a lock (above); trying again in 5 s" \
      "(until $((deadline - SECONDS)) s from now)"
    sleep 5
  done
}
apt_get update
apt_get install -y "${PKGS[@]}"
