# SPDX-License-Identifier: Apache-2.0
# Key validation + POSIX containment fuzz target; replayed over its seed corpus in CTest.
tier_fuzz_target(fuzz_keys ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_keys.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/keys LIBS tier_tiers)
