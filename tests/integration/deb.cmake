# SPDX-License-Identifier: Apache-2.0
# The Debian package (docs/PACKAGING.md): built, linted, installed on this machine, removed,
# purged. Needs root; leaves the machine as it was. RESOURCE_LOCK: one dpkg at a time.
if(TARGET tierd)
  add_test(NAME deb COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_deb.sh)
  set_tests_properties(deb PROPERTIES TIMEOUT 600 LABELS fuse RESOURCE_LOCK dpkg SKIP_RETURN_CODE 77
    ENVIRONMENT "TIER_SRC=${PROJECT_SOURCE_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
