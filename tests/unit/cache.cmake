# SPDX-License-Identifier: Apache-2.0
# Cache engine tests (src/cache). Each is its own program; test_cache_membe.c is the in-memory
# test backend they share.
set(TIER_CACHE_MEMBE ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_membe.c)
tier_unit_test(test_cache_policy
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_policy.c ${TIER_CACHE_MEMBE}
  LIBS tier_cache)
tier_unit_test(test_cache_concurrency
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_concurrency.c ${TIER_CACHE_MEMBE}
  LIBS tier_cache LABELS tsan)
tier_unit_test(test_cache_property
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_property.c ${TIER_CACHE_MEMBE}
  LIBS tier_cache)
tier_unit_test(test_cache_integrity
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_integrity.c ${TIER_CACHE_MEMBE}
  LIBS tier_cache)
tier_unit_test(test_cache_diskfull
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_diskfull.c ${TIER_CACHE_MEMBE}
  LIBS tier_cache)
tier_unit_test(test_cache_disk
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_disk.c ${TIER_CACHE_MEMBE}
  LIBS tier_cache)
