# SPDX-License-Identifier: Apache-2.0
# Cluster benchmarks (src/cluster): peer_latency measures a peer read of a cached block next to a
# local disk hit and one round trip. Run via bench/cluster.sh; numbers in docs/BENCHMARKS.md.
add_executable(peer_latency ${CMAKE_CURRENT_LIST_DIR}/peer_latency.c)
target_link_libraries(peer_latency PRIVATE tier_cluster tier_common)
