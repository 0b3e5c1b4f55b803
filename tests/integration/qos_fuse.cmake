# SPDX-License-Identifier: Apache-2.0
# Per-tenant QoS limits on a REAL mount (needs /dev/fuse and root): two uids read at once within
# their limits, one alone unlimited, a limit lowered live with PUT /v1/qos; tierctl qos.
if(TARGET tierd)
  add_test(NAME qos_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_qos_fuse.sh)
  set_tests_properties(qos_fuse PROPERTIES TIMEOUT 600 LABELS fuse RUN_SERIAL TRUE
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
