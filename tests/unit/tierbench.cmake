# SPDX-License-Identifier: Apache-2.0
# tierbench and its histogram (src/common/hist.c).
tier_unit_test(test_hist SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_hist.c LIBS tier_common m)
tier_unit_test(test_tierbench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_tierbench.c
  LIBS tierbench_core)

# The command-line test runs the real binary as a subprocess, so it gets the binary's path.
add_executable(test_tierbench_cli ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_tierbench_cli.c)
target_link_libraries(test_tierbench_cli PRIVATE tier_testlib PkgConfig::JANSSON)
add_dependencies(test_tierbench_cli tierbench)
add_test(NAME test_tierbench_cli COMMAND test_tierbench_cli $<TARGET_FILE:tierbench>)
set_tests_properties(test_tierbench_cli PROPERTIES TIMEOUT 120 LABELS unit
  ENVIRONMENT "TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp;TIER_SRC=${PROJECT_SOURCE_DIR};TIER_BIN=${CMAKE_BINARY_DIR}")

# bench/compare.sh end to end: two fresh targets, the smoke profile, one table of ratios. The
# script must succeed and the table must hold a ratio column.
add_test(NAME tierbench_compare_sh
  COMMAND bash -c "set -o pipefail; \"$0\" \"$@\" | tee /dev/stderr | grep -E 'training AU % [(]alone[)] +[0-9.]+ +[0-9.]+ [(]x[0-9.]+[)]' >/dev/null"
    ${PROJECT_SOURCE_DIR}/bench/compare.sh --tierbench $<TARGET_FILE:tierbench>
    --profile ${PROJECT_SOURCE_DIR}/bench/profiles/smoke.ini --regen
    --gen "--files 20 --size fixed:16K" --out ${CMAKE_BINARY_DIR}/testtmp/compare-out
    a=${CMAKE_BINARY_DIR}/testtmp/compare-a b=${CMAKE_BINARY_DIR}/testtmp/compare-b)
set_tests_properties(tierbench_compare_sh PROPERTIES TIMEOUT 120 LABELS unit)
