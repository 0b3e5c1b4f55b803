# SPDX-License-Identifier: Apache-2.0
# Staging engine over a real POSIX backend, the real cache and the QoS scheduler. Needs the
# daemon core (tierd_resolve) and the cache; skipped at configure time until both exist.
if(TARGET tierd_core AND TARGET tier_cache)
  tier_unit_test(test_stage SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_stage.c
    LIBS tierd_core tier_qos tier_cache tier_tiers LABELS tsan)
endif()
