# SPDX-License-Identifier: Apache-2.0
# Cache engine tests (src/cache). Each is its own program; they share the memory store of
# tests/lib/fakebe.c (in tier_testlib).
tier_unit_test(test_cache_policy
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_policy.c
  LIBS tier_cache)
tier_unit_test(test_cache_concurrency
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_concurrency.c
  LIBS tier_cache LABELS tsan)
# 23 s quiet, 58 s with two busy CPUs beside it (2 cores, ASan): 300 s is 5x its loaded time
tier_unit_test(test_cache_property
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_property.c
  LIBS tier_cache TIMEOUT 300)
tier_unit_test(test_cache_integrity
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_integrity.c
  LIBS tier_cache)
tier_unit_test(test_cache_diskfull
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_diskfull.c
  LIBS tier_cache)
tier_unit_test(test_cache_disk
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_disk.c
  LIBS tier_cache)
tier_unit_test(test_cache_fetchbound
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_fetchbound.c
  LIBS tier_cache LABELS tsan)
# The local disk's admission hook (common/diskadm.h) as the cache and the burst buffer call it:
# a fake hook counts admissions by tenant and class (disk hits, write-throughs, spool writes).
tier_unit_test(test_diskadm
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_diskadm.c
  LIBS tier_cache tier_writeback tier_qos tier_tiers PkgConfig::SQLITE3 PkgConfig::XXHASH)
# Write-through off the reader's path (cache_config.store_async): the writer thread, its bound,
# close and evict waiting for it.
tier_unit_test(test_cache_store
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_store.c
  LIBS tier_cache LABELS tsan)
# Per-tenant space quotas (cache_quota_set): a tenant over quota evicts only its own blocks.
tier_unit_test(test_cache_quota
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_cache_quota.c
  LIBS tier_cache)
# The prefetch window of epoch-order hints (src/hints/hintwin.c): invariants, next-use eviction
# against a brute-force optimum.
tier_unit_test(test_hintwin
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_hintwin.c
  LIBS tier_hintcore)
# Online miss-ratio curves (src/cache/mrc.c) against exact simulations of the same policy code on
# cachesim's three traces: mean absolute error <= 0.02 at a 1 % sample; memory fixed.
tier_unit_test(test_mrc
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_mrc.c
  LIBS tier_cache m TIMEOUT 300)
