# SPDX-License-Identifier: Apache-2.0
# Write-back namespaces (issue 5) through a REAL FUSE mount (needs /dev/fuse and root), POSIX
# backend: POSIX behaviour (fuse_wb) and the SIGKILL crash test (fuse_wb_crash; cycles from
# TIER_CRASH_CYCLES, default in the script; `make test-long` style runs raise it).
if(TARGET tierd)
  add_test(NAME fuse_wb COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_fuse_wb.sh)
  set_tests_properties(fuse_wb PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
if(TARGET tierd)
  add_test(NAME fuse_wb_crash COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_fuse_wb_crash.sh)
  set_tests_properties(fuse_wb_crash PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
if(TARGET tierd)
  add_test(NAME fuse_wb_rgw COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_fuse_wb_rgw.sh)
  set_tests_properties(fuse_wb_rgw PROPERTIES TIMEOUT 300 LABELS "fuse;rgw" FIXTURES_REQUIRED rgw
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
