#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail if our C sources call a banned function (STYLE.md): strcpy, strcat, sprintf, strtok, atoi,
# gets, alloca. vsprintf/stpcpy are caught too. Comments are not exempt: rephrase them.
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='\b(strcpy|strcat|sprintf|vsprintf|strtok|atoi|atol|gets|alloca|stpcpy)[[:space:]]*\('
if hits=$(grep -rnE "$pattern" --include='*.c' --include='*.h' src include tests bench 2>/dev/null); then
  echo "banned functions used (see STYLE.md; use snprintf, tier_strlcpy, tier_parse_u64, strtok_r):"
  echo "$hits"
  exit 1
fi
echo "check-banned: ok"
