# SPDX-License-Identifier: Apache-2.0
# Lifecycle policy rules (src/lifecycle/lifecycle_rules.c): keep_last grouping and ordering, filters,
# triggers, the built-in retention rule. Config errors are in test_config's table.
if(TARGET tierd_core)
  tier_unit_test(test_policy SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_policy.c
    LIBS tierd_core)
endif()
