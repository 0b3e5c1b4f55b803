#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# man_lint.sh MANDIR - the man pages the build made (docs/man/*.scd through scdoc) exist, one per
# program and the config file, and lint clean: groff's warnings as `man --warnings` gives them
# (what lintian runs) and mandoc's errors. Each page must also name its program in NAME.
set -euo pipefail
dir=${1:?usage: man_lint.sh MANDIR}
fail() { echo "FAIL: $*" >&2; exit 1; }
for page in tierd.8 tierctl.1 tierbench.1 tierd.conf.5; do
  f=$dir/$page
  [ -s "$f" ] || fail "$f is missing or empty (is scdoc installed? scripts/deps.sh)"
  w=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$f" 2>&1 >/dev/null) ||
    fail "$page: man failed: $w"
  [ -z "$w" ] || fail "$page: groff warns: $w"
  mandoc -T lint -W error "$f" || fail "$page: mandoc finds errors"
  name=${page%.*}
  LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$f" 2>/dev/null | grep -q "^ *$name - " ||
    fail "$page: its NAME section does not start with '$name - '"
  echo "ok: $page"
done
echo PASS
