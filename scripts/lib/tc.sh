# SPDX-License-Identifier: Apache-2.0
# tc.sh - link shaping for the test networks (scripts/netlink.sh, scripts/clusternet.sh): a rate
# as tc writes it, and a tbf qdisc at that rate. Source it; it defines functions only.
# shellcheck shell=bash

# tc_rate_bits RATE: RATE in bits/s (tc's units), 0 for `0` or `none` (unshaped); 1 when RATE is
# none of these (NUMBER{bit,kbit,mbit,gbit})
tc_rate_bits() {
  local n u
  [[ ${1,,} == none || $1 == 0 ]] && {
    echo 0
    return 0
  }
  [[ ${1,,} =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || return 1
  n=${BASH_REMATCH[1]}
  u=${BASH_REMATCH[2]}
  case $u in
  bit) echo "$n" ;;
  kbit) echo $((n * 1000)) ;;
  mbit) echo $((n * 1000000)) ;;
  gbit) echo $((n * 1000000000)) ;;
  esac
}

# tc_shape DEV BITS [CMD...]: a tbf root qdisc on DEV at BITS/s, `tc` run under CMD (e.g. a
# function that enters a namespace). The bucket holds 4 ms of traffic (at least 64 KiB, so that
# one GSO segment fits); packets queue up to 50 ms, then drop (TCP backs off, which is how the
# rate holds). A qdisc shapes egress only: shape both ends of a link for both directions.
tc_shape() {
  local dev=$1 bits=$2 burst
  burst=$((bits / 8 / 250))
  ((burst >= 65536)) || burst=65536
  "${@:3}" tc qdisc replace dev "$dev" root tbf rate "${bits}bit" burst "$burst" latency 50ms
}
