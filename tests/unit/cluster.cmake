# SPDX-License-Identifier: Apache-2.0
# Cluster placement (src/cluster/place.c): determinism, spread, minimal movement on a join or a
# leave, weights, bounded-load picks.
tier_unit_test(test_place SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_place.c LIBS tier_cluster)
