# SPDX-License-Identifier: Apache-2.0
# QoS scheduling point: grant order, in-flight bound and counters with real threads. Labelled
# tsan: it is the test to run in a -DTIER_TSAN=ON build.
tier_unit_test(test_sched SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sched.c LIBS tier_qos
  LABELS tsan)
