#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail if clang-format (14, as Debian 12 ships) would change any of our C sources.
set -euo pipefail
cd "$(dirname "$0")/.."
CF=$(command -v clang-format-14 || command -v clang-format)
files=$(git ls-files '*.c' '*.h')
[ -n "$files" ] || exit 0
if ! out=$(echo "$files" | xargs "$CF" --dry-run --Werror 2>&1); then
  echo "$out" | grep -E '^[^ ].*(warning|error):' | cut -d: -f1 | sort -u | sed 's/^/needs clang-format: /'
  echo "run: make format"
  exit 1
fi
echo "check-format: ok"
