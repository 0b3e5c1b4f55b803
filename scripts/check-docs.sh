#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail if a state-transition table in a source comment, or a page of docs/*.md or README.md,
# names a function that is not defined.
# Tables: the comment blocks headed "TRANSITION -> FUNCTION" (cache.c, journal.c) or
# "transition   function" (posix.c), up to the next empty comment line. A name is an
# identifier written "name()" or a lower-case identifier with an underscore; it is defined when
# some line of src/*.c starts a definition of it ("... name(" from column 0, not ending in ';').
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
tables=0
while IFS= read -r file; do
  names=$(awk '
    /TRANSITION -> FUNCTION/ || /^[[:space:]]*\*[[:space:]]+transition[[:space:]]+function[[:space:]]*$/ {
      intable = 1; next }
    intable && (/^[[:space:]]*\*[[:space:]]*$/ || /\*\//) { intable = 0 }
    intable {
      line = $0
      sub(/^[[:space:]]*\*/, "", line)
      while (match(line, /[A-Za-z_][A-Za-z0-9_]*\(\)|[a-z][a-z0-9]*(_[a-z0-9]+)+/)) {
        tok = substr(line, RSTART, RLENGTH)
        sub(/\(\)$/, "", tok)
        print tok
        line = substr(line, RSTART + RLENGTH)
      }
    }' "$file" | sort -u)
  [ -n "$names" ] || continue
  tables=$((tables + 1))
  for name in $names; do
    if ! grep -rqE --include='*.c' "^([A-Za-z_].*[^A-Za-z0-9_])?${name}\(.*[^;]$|^([A-Za-z_].*[^A-Za-z0-9_])?${name}\($" src; then
      echo "$file: transition table names ${name}(), which is not defined in src/"
      status=1
    fi
  done
done < <(grep -rlE --include='*.c' 'TRANSITION -> FUNCTION|^[[:space:]]*\*[[:space:]]+transition[[:space:]]+function[[:space:]]*$' src | sort)

# The pages: every backticked `name()` is a function defined in src/ or tests/ (the test
# libraries the pages describe), or one of the system and library calls below.
external="fuse_reply_err getrandom link poll statvfs"
defined_in() { # name dirs...
  local name=$1
  shift
  grep -rqE --include='*.c' --include='*.h' "^([A-Za-z_].*[^A-Za-z0-9_])?${name}\(.*[^;]$|^([A-Za-z_].*[^A-Za-z0-9_])?${name}\($|^#define ${name}\(" "$@"
}
cited=0
while IFS= read -r page; do
  for name in $(grep -oE '`[A-Za-z_][A-Za-z0-9_]*\(\)`' "$page" | tr -d '`()' | sort -u); do
    cited=$((cited + 1))
    case " $external " in *" $name "*) continue ;; esac
    if ! defined_in "$name" src tests; then
      echo "$page: cites ${name}(), which is not defined in src/ or tests/"
      status=1
    fi
  done
done < <(ls docs/*.md README.md)
if [ "$status" -ne 0 ]; then
  echo "check-docs: fix the table, the page or the code (docs describe the code as it is)"
  exit 1
fi
echo "check-docs: ok ($tables transition tables, $cited function names cited in docs/*.md and README.md)"
