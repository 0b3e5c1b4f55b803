# SPDX-License-Identifier: Apache-2.0
# Job admission (src/jobs/jobs.c) over fake ops, from POST /v1/jobs bodies and commands:
# libFuzzer target + corpus replay.
if(TARGET tierd_core AND TARGET tier_cache)
  tier_fuzz_target(fuzz_jobs ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_jobs.c
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/jobs LIBS tier_fakejobs tierd_core tier_qos tier_cache tier_tiers)
endif()
