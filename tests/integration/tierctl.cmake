# SPDX-License-Identifier: Apache-2.0
# tierctl end to end: no daemon (message + exit 3), usage (exit 2), a scripted control API, and
# -- when the tierd target exists -- the real daemon with a FUSE mount over a POSIX backend.
if(TARGET tierd)
  set(TIER_TIERCTL_TIERD $<TARGET_FILE:tierd>)
  set(TIER_TIERCTL_DEPS tierctl tierd)
else()
  set(TIER_TIERCTL_TIERD "")
  set(TIER_TIERCTL_DEPS tierctl)
endif()
add_test(NAME test_tierctl
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_tierctl.sh $<TARGET_FILE:tierctl>
          ${TIER_TIERCTL_TIERD})
set_tests_properties(test_tierctl PROPERTIES TIMEOUT 240 LABELS fuse
  ENVIRONMENT "TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
