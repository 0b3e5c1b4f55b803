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

# The control API against hostile or careless clients (security review 2026-12-01): non-UTF-8
# names, a TCP connection flood, TLS and the token file, socket permissions and SO_PEERCRED,
# caps on client work, 403 for backend permission errors. Needs the real tierd and FUSE.
if(TARGET tierd)
  add_test(NAME test_api_security
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_api_security.sh $<TARGET_FILE:tierctl>
            $<TARGET_FILE:tierd>)
  set_tests_properties(test_api_security PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
