#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install every Debian 12 package tierd needs to build, test, benchmark and demo. Idempotent: when
# all are already installed it does nothing (so it needs no network then); otherwise it runs
# apt-get update and apt-get install -y. Needs root (or sudo).
# When another apt process holds a lock (unattended-upgrades, apt-daily on a fresh node), it
# waits for it up to TIER_DEPS_LOCK_WAIT seconds (default 600) instead of failing: apt-get
# install through DPkg::Lock::Timeout (apt >= 2.0), apt-get update by retrying, since apt (2.6)
# applies that timeout to the dpkg lock only, not to the package lists' lock update takes.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config git clang-14 libclang-rt-14-dev clang-format
  libcmocka-dev libcurl4-openssl-dev libexpat1-dev libssl-dev libfuse3-dev fuse3
  libinih-dev libjansson-dev libmicrohttpd-dev libsqlite3-dev libxxhash-dev liburing-dev
  ceph-mon ceph-osd radosgw ceph-common gnuplot-nox curl xxd xxhash procps psmisc python3
  util-linux prometheus shellcheck
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
# apt-get update, retried while another apt process holds the lists' lock
deadline=$((SECONDS + wait_s))
out=$(mktemp)
trap 'rm -f "$out"' EXIT
while :; do
  rc=0
  $SUDO apt-get update 2>&1 | tee "$out" || rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] || break
  if ! grep -q "^E: Could not get lock" "$out" || [ $SECONDS -ge $deadline ]; then
    echo "deps: apt-get update failed (exit $rc)" >&2
    exit "$rc"
  fi
  echo "deps: another apt process holds the package lists' lock (above); trying again in 5 s" \
    "(until $((deadline - SECONDS)) s from now)"
  sleep 5
done
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout="$wait_s" install -y "${PKGS[@]}"
