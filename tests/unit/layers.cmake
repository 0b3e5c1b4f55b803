# SPDX-License-Identifier: Apache-2.0
# scripts/check-layers.sh (make lint) can fail: a cycle, an upward include, a long function.
add_test(NAME check_layers COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_check_layers.sh)
set_tests_properties(check_layers PROPERTIES TIMEOUT 60 LABELS unit)
