# SPDX-License-Identifier: Apache-2.0
# dmClock tag scheduler (src/qos/dmclock.c) on a virtual clock: tags, weights, limits,
# reservations, idle clients, and a property test against the water-filling allocation.
tier_unit_test(test_dmclock SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_dmclock.c LIBS tier_qos)
