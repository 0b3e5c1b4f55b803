# SPDX-License-Identifier: Apache-2.0
# Control API request function (routing, handlers, JSON answers) over a POSIX fixture:
# libFuzzer target + corpus replay.
if(TARGET tierd_core)
  add_library(tier_api_fixture STATIC ${CMAKE_CURRENT_SOURCE_DIR}/lib/api_fixture.c)
  target_link_libraries(tier_api_fixture PUBLIC tierd_core)
  target_include_directories(tier_api_fixture PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/lib)
  if(TIER_FUZZ)
    target_compile_options(tier_api_fixture PRIVATE -fsanitize=fuzzer-no-link)
  endif()
  tier_fuzz_target(fuzz_api ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_api.c
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/api LIBS tier_api_fixture)
endif()
