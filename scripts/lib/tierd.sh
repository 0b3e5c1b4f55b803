# SPDX-License-Identifier: Apache-2.0
# scripts/lib/tierd.sh - the one shell library of the tests, benchmarks and the demo: where the
# programs are, a scratch directory, tierd.conf sections, starting tierd and waiting for its
# mount, stopping it, the cleanup pieces of an EXIT trap, the Ceph RGW credentials and signed
# curl, and tierctl against the daemon's socket. Sourcing it defines functions only (no
# variables, no trap, no `set`), so tests (tests/integration/lib.sh adds fail/ok and the EXIT
# trap on top), bench/*.sh, scripts/demo.sh and scripts/soak.sh can all use it:
#     . "$(dirname "$0")/../scripts/lib/tierd.sh"      (from bench/)
# Every function is named tierd_* so that it cannot clash with a script's own helpers.
# Variables the functions set or read are named in each comment: TIERD TIERCTL TIERBENCH (the
# programs), T (a scratch directory), MNT SOCK CONF (the usual places), TIERD_PID (the daemon
# tierd_start started), S3_ENDPOINT S3_REGION S3_ACCESS_KEY S3_SECRET_KEY and TIERD_S3_SIG (the
# RGW). No sleeps as synchronisation: every wait polls a condition with a deadline (tierd_poll).
# (SC2034: the functions set variables for their callers; SC2317: the small functions defined
# inside others are called through tierd_poll)
# shellcheck shell=bash disable=SC2034,SC2317

# ---- programs and places ---------------------------------------------------------------------

# tierd_bins BUILD: TIERD, TIERCTL and TIERBENCH are the programs of the build directory BUILD
# (made absolute when relative, so that they work after a cd)
tierd_bins() {
  local b=$1
  case $b in /*) ;; *) b=$PWD/$b ;; esac
  TIERD=$b/src/daemon/tierd
  TIERCTL=$b/src/cli/tierctl
  TIERBENCH=$b/src/tierbench/tierbench
}

# tierd_build_release BUILD TARGET...: configure BUILD as a Release build and build TARGETs (-j2,
# quiet: only errors reach the terminal); the benches' first step
tierd_build_release() {
  local b=$1
  shift
  cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$b" -j2 --target "$@" >/dev/null
}

# tierd_scratch NAME: T is a new directory NAME.XXXXXX under $TIER_TEST_TMP (default /tmp); a
# TIER_TEST_TMP it makes is mode 0755 whatever the umask (FUSE tests reach it as other uids)
tierd_scratch() {
  local root=${TIER_TEST_TMP:-/tmp}
  [ -d "$root" ] || { mkdir -p "$root" && chmod 0755 "$root"; }
  T=$(mktemp -d "$root/$1.XXXXXX")
}

# tierd_places DIR: MNT, SOCK and CONF are DIR/mnt, DIR/api.sock and DIR/tierd.conf
tierd_places() {
  MNT=$1/mnt
  SOCK=$1/api.sock
  CONF=$1/tierd.conf
}

# ---- tierd.conf sections ---------------------------------------------------------------------
# Each prints one section on stdout; compose them in { ...; } >"$CONF". LINE arguments are
# "key = value" lines printed at the end of the section, in order (empty ones are skipped, so
# an optional setting can be passed as "$1"); a LINE may hold several lines.

# tierd_conf_section HEADER [LINE...]: "[HEADER]" and the lines. With TIERD_CONF_GPU set (the
# integration tests set it to off: tests/integration/lib.sh), a [daemon] section whose lines do
# not name gpu_sampling gets "gpu_sampling = $TIERD_CONF_GPU"
tierd_conf_section() {
  local h=$1 l gpu=${TIERD_CONF_GPU:-}
  printf '[%s]\n' "$h"
  shift
  for l in "$@"; do
    [ -z "$l" ] || printf '%s\n' "$l"
    case $l in *gpu_sampling*) gpu= ;; esac
  done
  if [ "$h" = daemon ] && [ -n "$gpu" ]; then printf 'gpu_sampling = %s\n' "$gpu"; fi
}

# tierd_conf_posix NAME ROOT [LINE...]: [backend NAME] of type posix over ROOT
tierd_conf_posix() {
  local name=$1 root=$2
  shift 2
  tierd_conf_section "backend $name" "type = posix" "root = $root" "$@"
}

# tierd_conf_rgw NAME BUCKET [LINE...]: [backend NAME] of type s3 on the RGW of tierd_rgw_env
# (endpoint, region and keys from S3_*)
tierd_conf_rgw() {
  local name=$1 bucket=$2
  shift 2
  tierd_conf_section "backend $name" "type = s3" "endpoint = $S3_ENDPOINT" \
    "region = $S3_REGION" "bucket = $bucket" "access_key = $S3_ACCESS_KEY" \
    "secret_key = $S3_SECRET_KEY" "$@"
}

# tierd_conf_ns PATH BACKEND [LINE...]: [namespace PATH] on BACKEND
tierd_conf_ns() {
  local path=$1 backend=$2
  shift 2
  tierd_conf_section "namespace $path" "backend = $backend" "$@"
}

# tierd_conf_mount MNT [LINE...]: [mount] at MNT
tierd_conf_mount() {
  local mnt=$1
  shift
  tierd_conf_section mount "path = $mnt" "$@"
}

# tierd_conf_api SOCK [LINE...]: [api] with the Unix socket SOCK
tierd_conf_api() {
  local sock=$1
  shift
  tierd_conf_section api "socket = $sock" "$@"
}

# ---- waiting, starting, stopping -------------------------------------------------------------

# tierd_poll SECS CMD...: run CMD every 50 ms until it succeeds (0) or SECS pass (1)
tierd_poll() {
  local secs=$1
  shift
  local deadline=$((SECONDS + secs))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05 # polling interval
  done
}

# tierd_mounted MNT: tierd answers at MNT (statfs always reaches the daemon; stat may be served
# from the kernel's attribute cache, so the root inode 1 is checked after it)
tierd_mounted() { stat -f "$1" >/dev/null 2>&1 && [ "$(stat -c %i "$1" 2>/dev/null)" = 1 ]; }

# tierd_alive: TIERD_PID is a running process
tierd_alive() { [ -n "${TIERD_PID:-}" ] && kill -0 "$TIERD_PID" 2>/dev/null; }

# tierd_spawn CONF LOG [TIERD ARG...]: start "$TIERD -c CONF -f" in the background, its output
# (tierd logs to stderr) appended to LOG; TIERD_PID is its pid
tierd_spawn() {
  local conf=$1 log=$2
  shift 2
  "$TIERD" -c "$conf" -f "$@" >>"$log" 2>&1 &
  TIERD_PID=$!
}

# tierd_up MNT [SOCK [SECS]]: wait up to SECS (default 30) until tierd answers at MNT and, when
# SOCK is given, its API socket SOCK exists (MNT "" waits for the socket alone); 1 when not (timed
# out, or TIERD_PID exited first)
tierd_up() {
  local mnt=$1 sock=${2:-} secs=${3:-30}
  __tierd_ready() { { [ -z "$mnt" ] || tierd_mounted "$mnt"; } && { [ -z "$sock" ] || [ -S "$sock" ]; }; }
  __tierd_up() { __tierd_ready || ! tierd_alive; }
  tierd_poll "$secs" __tierd_up && __tierd_ready
}

# tierd_start CONF LOG MNT [SOCK]: for benches and the demo: tierd on CONF with a fresh LOG, and
# tierd_up MNT SOCK 30; when it did not come up, says why on stderr (the log's tail when tierd
# exited) and returns 1 (tierd may still run: the caller's EXIT trap reaps TIERD_PID)
tierd_start() {
  local conf=$1 log=$2 mnt=$3 sock=${4:-}
  : >"$log"
  tierd_spawn "$conf" "$log"
  tierd_up "$mnt" "$sock" 30 && return 0
  if tierd_alive; then
    echo "tierd did not come up within 30 s (mount $mnt${sock:+, socket $sock}; log $log)" >&2
  else
    echo "tierd exited during start-up; the end of $log:" >&2
    tail -20 "$log" >&2
  fi
  return 1
}

# tierd_stop [PID]: SIGTERM to PID (default TIERD_PID) and wait for it; returns its exit status
# (0 when tierd unmounted cleanly) and clears TIERD_PID when it was that one
tierd_stop() {
  local pid=${1:-${TIERD_PID:-}} rc=0
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || rc=$?
  [ "$pid" != "${TIERD_PID:-}" ] || TIERD_PID=
  return $rc
}

# tierd_reap PID [SECS]: for EXIT traps: SIGTERM to PID if it runs, SIGKILL if it has not exited
# within SECS (default 10); its status is collected when it is a child of this shell
tierd_reap() {
  local pid=$1 secs=${2:-10}
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  __tierd_gone() { ! kill -0 "$pid" 2>/dev/null; }
  tierd_poll "$secs" __tierd_gone || kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

# tierd_unmount MNT: for EXIT traps: detach a FUSE mount left at MNT (lazily; no error if none)
tierd_unmount() {
  [ -n "$1" ] && grep -qs " $1 fuse" /proc/mounts || return 0
  fusermount3 -u -z "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true
}

# ---- the control API and tierctl -------------------------------------------------------------

# tierd_api SOCK PATH [CURL ARG...]: GET (or what the curl args say) http://tierd/PATH over the
# Unix socket SOCK; the body on stdout, non-zero on an HTTP error
tierd_api() {
  local sock=$1 path=$2
  shift 2
  curl -sSf --unix-socket "$sock" "$@" "http://tierd$path"
}

# tierd_ctl ARG...: tierctl against the daemon's socket ($TIERCTL -s $SOCK ARG...)
tierd_ctl() { "$TIERCTL" -s "$SOCK" "$@"; }

# ---- Ceph RGW --------------------------------------------------------------------------------

# tierd_rgw_env CEPH_DIR: read the env file scripts/ceph.sh wrote (S3_ENDPOINT, S3_REGION,
# S3_ACCESS_KEY, S3_SECRET_KEY) and set TIERD_S3_SIG, the curl arguments that sign a request
# for that RGW; 1 with a message when CEPH_DIR has no env file
tierd_rgw_env() {
  [ -r "$1/env" ] || { echo "no RGW env at $1/env (run scripts/ceph.sh start $1)" >&2; return 1; }
  # shellcheck disable=SC1091
  . "$1/env"
  TIERD_S3_SIG=(--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY"
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
}

# tierd_s3 CURL ARG...: a signed request to the RGW (curl -sSf: fails on an HTTP error)
tierd_s3() { curl -sSf "${TIERD_S3_SIG[@]}" "$@"; }

# tierd_s3_code CURL ARG...: a signed request; prints only the HTTP status
tierd_s3_code() { curl -s -o /dev/null -w '%{http_code}' "${TIERD_S3_SIG[@]}" "$@"; }

# ---- benchmark data and results -----------------------------------------------------------------

# tierd_compare_files SRC DST [FROM]: every file of SRC compared with DST/NAME, in name order from
# the FROM-th (default 0) round to the end and on from the first (several readers of one set
# starting at different places); 1 with the name on stderr at the first difference or failed read
tierd_compare_files() {
  local files=("$1"/*) i f
  for ((i = 0; i < ${#files[@]}; i++)); do
    f=${files[$(((i + ${3:-0}) % ${#files[@]}))]}
    cmp -s "$f" "$2/${f##*/}" || {
      echo "$2/${f##*/} differs from $f (or cannot be read)" >&2
      return 1
    }
  done
}

# tierd_bench_files DIR N KB: N files of KB KiB of random bytes in DIR (made afresh), named
# s0001.bin ... (zero-padded to N's width)
tierd_bench_files() {
  local dir=$1 n=$2 kb=$3 i
  rm -rf "$dir" && mkdir -p "$dir"
  for i in $(seq -w 1 "$n"); do
    head -c $((kb * 1024)) /dev/urandom >"$dir/s$i.bin"
  done
}

# tierd_bench_upload DIR URL: PUT every file of DIR as URL/NAME, 8 at once (tierd_rgw_env first)
tierd_bench_upload() {
  (cd "$1" && ls) | xargs -P 8 -I{} curl -sSf "${TIERD_S3_SIG[@]}" -T "$1/{}" "$2/{}" >/dev/null
}

# tierd_bench_results FILE: rec ROW VALUE appends to FILE (emptied); stats ROW prints "median min
# max" of ROW's values (or "- - -" when it has none); now and secs A B time things in ns / s
tierd_bench_results() {
  TIERD_RESULTS=$1
  : >"$TIERD_RESULTS"
  rec() { echo "$1 $2" >>"$TIERD_RESULTS"; }
  now() { date +%s%N; }
  secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", (b - a) / 1e9 }'; }
  stats() {
    awk -v r="$1" '$1 == r { print $2 }' "$TIERD_RESULTS" | sort -g |
      awk '{ v[NR] = $1 } END { if (!NR) { print "- - -"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
  }
}

# ---- checks that count failures ----------------------------------------------------------------

# tierd_counted_checks: define fail, pass, run, contains and wait_for for a test that counts
# failed checks in FAILS and carries on (test_tierctl.sh, test_api_security.sh) instead of
# stopping at the first one (tests/integration/lib.sh's fail). Call it once after sourcing; the
# script ends with tierd_counted_result.
#   fail MSG / pass MSG           one failed / passed check
#   run NAME WANT_RC CMD...       run CMD; its output in OUT, status in RC, checked against WANT_RC
#   contains NAME NEEDLE          OUT contains NEEDLE
#   wait_for DESC SECS CMD...     tierd_poll, a failed check naming DESC at the deadline (SECS at
#                                 least TIER_WAIT_MIN, default 120: load is never a reason to fail)
tierd_counted_checks() {
  FAILS=0
  fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
  pass() { echo "ok: $*"; }
  run() {
    local name=$1 want=$2
    shift 2
    OUT=$("$@" 2>&1)
    RC=$?
    if [ "$RC" -ne "$want" ]; then
      fail "$name: exit $RC, want $want; output:"
      printf '%s\n' "$OUT" | sed 's/^/    /'
    else
      pass "$name (exit $RC)"
    fi
  }
  contains() {
    case "$OUT" in
    *"$2"*) pass "$1" ;;
    *) fail "$1: output lacks '$2':"; printf '%s\n' "$OUT" | sed 's/^/    /' ;;
    esac
  }
  wait_for() {
    local desc=$1 secs=$2
    shift 2
    [ "$secs" -ge "${TIER_WAIT_MIN:-120}" ] || secs=${TIER_WAIT_MIN:-120}
    tierd_poll "$secs" "$@" || { fail "timed out after ${secs}s waiting for $desc"; return 1; }
  }
}

# tierd_counted_result: the end of a counted test: exit 1 naming the number of failed checks,
# else print "all checks passed"
tierd_counted_result() {
  if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
  fi
  echo "all checks passed"
}
