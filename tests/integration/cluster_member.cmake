# SPDX-License-Identifier: Apache-2.0
# Cluster membership in RADOS (src/cluster/member.c) against the test Ceph cluster: members see
# each other, a crashed one is removed, a paused one fences itself and rejoins, joins race, keys
# with a NUL in them are ignored. Built only where librados is found (src/cluster/CMakeLists.txt).
if(TIER_HAVE_RADOS)
  tier_unit_test(cluster_member
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cluster_member.c
    LIBS tier_cluster_member TIMEOUT 600)
  set_tests_properties(cluster_member PROPERTIES FIXTURES_REQUIRED rgw LABELS rgw)
endif()
