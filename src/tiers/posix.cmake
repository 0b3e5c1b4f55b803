# SPDX-License-Identifier: Apache-2.0
# POSIX directory backend (warm tier), see posix.c.
target_sources(tier_tiers PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/posix.c)
