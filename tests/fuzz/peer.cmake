# SPDX-License-Identifier: Apache-2.0
# libFuzzer target for what a peer read parses from the network (cluster/peer_proto.h): a
# request's query values and headers, an answer's headers; the seed corpus replays in CTest.
tier_fuzz_target(fuzz_peer ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_peer.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/peer LIBS tier_cluster)
