# SPDX-License-Identifier: Apache-2.0
# libFuzzer target for the tierd.conf parser; the seed corpus replays in CTest.
if(TARGET tierd_core)
  tier_fuzz_target(fuzz_config ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_config.c
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/config LIBS tierd_core)
endif()
