#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail if our C sources call a banned function (STYLE.md): strcpy, strcat, sprintf, strtok, atoi,
# gets, alloca. vsprintf/stpcpy are caught too. Comments are not exempt: rephrase them. Also
# fails on backend calls that would pass the scheduling point by (below).
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='\b(strcpy|strcat|sprintf|vsprintf|strtok|atoi|atol|gets|alloca|stpcpy)[[:space:]]*\('
if hits=$(grep -rnE "$pattern" --include='*.c' --include='*.h' src include tests bench 2>/dev/null); then
  echo "banned functions used (see STYLE.md; use snprintf, tier_strlcpy, tier_parse_u64, strtok_r):"
  echo "$hits"
  exit 1
fi

# One scheduling point (docs/ARCHITECTURE.md): backend operations are called only through the
# dispatchers of src/tiers/backend.c, which carry the caller's struct tier_ioctx into the
# scheduler's wrapper (src/qos/sched_backend.c). A direct `->ops->` call anywhere else would pass
# the scheduler by; a dispatcher called with a NULL ioctx from the daemon's layers would reach it
# without a tenant and class.
if hits=$(grep -rnE --include='*.c' --include='*.h' -e '->ops->[a-z_]+[[:space:]]*\(' src |
          grep -vE '^src/tiers/|^src/qos/sched_backend\.c:'); then
  echo "backend ops called past the dispatchers (call backend_stat(), backend_read(), ... with an ioctx):"
  echo "$hits"
  exit 1
fi
ops='stat|read|list|put|mpu_create|mpu_put_part|mpu_complete|mpu_abort|del|mpu_list|read_parallel'
if hits=$(grep -rnE "\bbackend_($ops)\([^,]+,[[:space:]]*NULL\b" --include='*.c' \
          src/fuse src/daemon src/api src/jobs src/datasets src/lifecycle src/hints src/stage \
          src/writeback src/cache src/qos); then
  echo "backend calls without an ioctx (pass the request's struct tier_ioctx, see common/ioctx.h):"
  echo "$hits"
  exit 1
fi
echo "check-banned: ok"
