# SPDX-License-Identifier: Apache-2.0
# TIER_TEST_HOOKS: the fault injection hook (TIERD_TEST_FAULT_FILE) is in tierd
# exactly when the option is on. With it off (Release/RelWithDebInfo) the binary must not even
# contain the variable's name; with it on (the builds the tests use) it must, or test_fuse_wb's
# disk fault section would skip silently.
if(TARGET tierd)
  if(TIER_TEST_HOOKS)
    add_test(NAME tierd_test_hooks COMMAND grep -qa TIERD_TEST_FAULT_FILE $<TARGET_FILE:tierd>)
  else()
    add_test(NAME tierd_test_hooks COMMAND sh -c "! grep -qa TIERD_TEST_FAULT_FILE \"$1\"" sh
      $<TARGET_FILE:tierd>)
  endif()
  set_tests_properties(tierd_test_hooks PROPERTIES TIMEOUT 30 LABELS unit)
endif()
