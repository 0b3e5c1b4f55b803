# SPDX-License-Identifier: Apache-2.0
# Key validation and dispatcher checks (src/tiers/backend.c).
tier_unit_test(test_keys SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_keys.c LIBS tier_tiers)
