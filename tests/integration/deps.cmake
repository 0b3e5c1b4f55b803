# SPDX-License-Identifier: Apache-2.0
# scripts/deps.sh waits for another apt process's locks (tests/integration/test_deps_lock.sh):
# root, the real apt-get changing nothing, no network. RESOURCE_LOCK dpkg: it holds the dpkg
# lock for a moment, which the package test (deb) needs too.
add_test(NAME deps_lock COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_deps_lock.sh)
set_tests_properties(deps_lock PROPERTIES TIMEOUT 300 LABELS fuse RESOURCE_LOCK dpkg
  ENVIRONMENT "TIER_SRC=${PROJECT_SOURCE_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
