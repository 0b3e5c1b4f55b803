# SPDX-License-Identifier: Apache-2.0
# libFuzzer target for dataset-version manifests read back from a backend (datasets/manifest.h);
# the seed corpus replays in CTest.
if(TARGET tierd_core)
  tier_fuzz_target(fuzz_manifest ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_manifest.c
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/manifest LIBS tierd_core)
endif()
