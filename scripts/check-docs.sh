#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail if a state-transition table in a source comment names a function that is not defined.
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
if [ "$status" -ne 0 ]; then
  echo "check-docs: fix the table or the code (docs describe the code as it is)"
  exit 1
fi
echo "check-docs: ok ($tables transition tables)"
