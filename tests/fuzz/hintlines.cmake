# SPDX-License-Identifier: Apache-2.0
# The hint control file's text (hints/hintlines.h); the seed corpus replays in CTest.
tier_fuzz_target(fuzz_hintlines ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_hintlines.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/hintlines LIBS tier_hintcore)
