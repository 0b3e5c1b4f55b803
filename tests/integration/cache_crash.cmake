# SPDX-License-Identifier: Apache-2.0
# Cache crash test: kill -9 a process writing cache blocks, reopen, verify (src/cache).
tier_unit_test(cache_crash
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/integration/cache_crash.c
  LIBS tier_cache)
