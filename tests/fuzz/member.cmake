# SPDX-License-Identifier: Apache-2.0
# libFuzzer target for the cluster's omap entries (cluster/member_entry.h), read by every member
# from the shared RADOS object; the seed corpus replays in CTest. Needs no librados.
tier_fuzz_target(fuzz_member ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_member.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/member LIBS tier_cluster)
