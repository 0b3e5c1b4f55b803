# SPDX-License-Identifier: Apache-2.0
# A hung S3 endpoint beside a POSIX backend through a REAL FUSE mount (needs /dev/fuse and root):
# the backend lanes' circuit breaker end to end: a hung backend must not take the mount with it.
if(TARGET tierd)
  add_test(NAME backend_hang COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_backend_hang.sh)
  set_tests_properties(backend_hang PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
