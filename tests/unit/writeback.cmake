# SPDX-License-Identifier: Apache-2.0
# Write-back (burst buffer) unit tests: POSIX backend in a scratch dir + a fault-injecting wrapper.
tier_unit_test(test_wb SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_wb.c
  LIBS tier_writeback tier_qos tier_tiers PkgConfig::SQLITE3 PkgConfig::XXHASH)
