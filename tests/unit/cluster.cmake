# SPDX-License-Identifier: Apache-2.0
# Cluster placement (src/cluster/place.c): determinism, spread, minimal movement on a join or a
# leave, weights, bounded-load picks.
tier_unit_test(test_place SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_place.c LIBS tier_cluster)
# tier-clustersim with --verify: after each of 20 joins and leaves over 200 nodes, the incremental
# owners equal the ones computed from scratch (it exits 1 on a mismatch).
add_test(NAME cluster_sim COMMAND tier-clustersim --nodes 200 --blocks 20000 --changes 20 --verify)
set_tests_properties(cluster_sim PROPERTIES TIMEOUT 300 LABELS unit)
# The JSON of a member's omap entry (src/cluster/member_entry.c): strict parsing, round trip.
tier_unit_test(test_member_entry SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_member_entry.c
  LIBS tier_cluster)
# The peer protocol's pure parts (src/cluster/peer_proto.c): block names, HMACs against openssl's,
# hex, strict parsing of requests and answers.
tier_unit_test(test_peer_proto SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_peer_proto.c
  LIBS tier_cluster)
# Peer reads (src/cluster/peer.c): an in-process endpoint (plain and TLS, with a certificate made
# by the openssl command), every failure of the serve callback, bad servers on raw sockets, and
# threads sharing a client (so also under ThreadSanitizer).
tier_unit_test(test_peer SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_peer.c LIBS tier_cluster
  LABELS tsan)
# The router (src/cluster/router.c) over two in-process endpoints and a view of the test's own:
# placement, skips of a dead peer, handovers, fencing, consume-only nodes.
tier_unit_test(test_router SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_router.c LIBS tier_cluster)
