# SPDX-License-Identifier: Apache-2.0
# GET /metrics of a tierd on a REAL FUSE mount (needs /dev/fuse and root), checked by Debian's
# promtool (skipped, exit 77, where it is not installed).
if(TARGET tierd)
  add_test(NAME metrics_promtool COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_metrics.sh)
  set_tests_properties(metrics_promtool PROPERTIES TIMEOUT 300 LABELS fuse SKIP_RETURN_CODE 77
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
