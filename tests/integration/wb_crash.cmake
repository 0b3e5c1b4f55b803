# SPDX-License-Identifier: Apache-2.0
# Write-back crash test: SIGKILL a writer at random points, restart, check nothing acknowledged is
# lost. Default run against the POSIX backend; an RGW variant with fewer cycles.
tier_unit_test(test_wb_crash SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_wb_crash.c
  LIBS tier_writeback tier_tiers PkgConfig::SQLITE3 PkgConfig::CRYPTO TIMEOUT 300)
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/../src/tiers/s3.cmake)
  target_compile_definitions(test_wb_crash PRIVATE WB_HAVE_S3=1)
endif()
add_test(NAME test_wb_crash_rgw COMMAND test_wb_crash rgw)
set_tests_properties(test_wb_crash_rgw PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED rgw LABELS rgw
  ENVIRONMENT "TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp;TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_BIN=${CMAKE_BINARY_DIR}")
# RGW stopped in the middle of a multipart upload, burst buffer restarted, RGW restarted. It runs
# alone (RUN_SERIAL): every other RGW test would see the outage.
add_test(NAME test_wb_rgw_outage COMMAND test_wb_crash rgw-outage)
set_tests_properties(test_wb_rgw_outage PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED rgw LABELS rgw RUN_SERIAL TRUE
  ENVIRONMENT "TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp;TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_BIN=${CMAKE_BINARY_DIR}")
