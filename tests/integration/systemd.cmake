# SPDX-License-Identifier: Apache-2.0
# tierd under systemd (docs/SYSTEMD.md): the units verify, sd_notify readiness, journal
# priorities, one version string, tierctl reload, tierd --unmount.
if(TARGET tierd)
  add_test(NAME systemd COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_systemd.sh)
  set_tests_properties(systemd PROPERTIES TIMEOUT 180 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
