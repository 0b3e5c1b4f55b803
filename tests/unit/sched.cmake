# SPDX-License-Identifier: Apache-2.0
# QoS scheduling point: grant order, in-flight bound and counters with real threads; per-backend
# lanes (admission deadline, circuit breaker) against a black-hole S3 endpoint and a POSIX
# backend through a real cache. Labelled tsan: it is the test to run in a -DTIER_TSAN=ON build.
tier_unit_test(test_sched SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sched.c
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/blackhole.c LIBS tier_qos tier_cache tier_tiers
  LABELS tsan)
