# SPDX-License-Identifier: Apache-2.0
# Hint submission (hint file text -> paths -> hints_check_path / hints_submit -> a set) over the
# control API's POSIX fixture with the hint engine: libFuzzer target + corpus replay.
if(TARGET tier_api_fixture)
  tier_fuzz_target(fuzz_hints ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_hints.c
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/hints LIBS tier_api_fixture)
endif()
