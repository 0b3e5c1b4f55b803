# SPDX-License-Identifier: Apache-2.0
# Write-back namespaces (issue 5) through a REAL FUSE mount (needs /dev/fuse and root), POSIX
# backend: POSIX behaviour (fuse_wb) and the SIGKILL crash test (fuse_wb_crash, 100 cycles in
# CI; `make test-long-wb` runs it with 2000), and over RGW (fuse_wb_rgw, fixture rgw).
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
  # It stops RGW for a while: RUN_SERIAL, or concurrent RGW tests would see the outage.
  set_tests_properties(fuse_wb_rgw PROPERTIES TIMEOUT 300 LABELS "fuse;rgw" FIXTURES_REQUIRED rgw
    RUN_SERIAL TRUE
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
if(TARGET tierd AND NOT TARGET test-long-wb)
  add_custom_target(test-long-wb
    COMMAND ${CMAKE_COMMAND} -E env TIER_CRASH_CYCLES=2000 TIER_BIN=${CMAKE_BINARY_DIR}
      TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp
      ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_fuse_wb_crash.sh
    DEPENDS tierd USES_TERMINAL
    COMMENT "write-back crash test through the mount, 2000 SIGKILL cycles")
endif()
