# SPDX-License-Identifier: Apache-2.0
# Cluster membership in RADOS (src/cluster/member.c) against the test Ceph cluster: members see
# each other, a crashed one is removed, a paused one fences itself and rejoins, joins race, keys
# with a NUL in them are ignored. Built only where librados is found (src/cluster/CMakeLists.txt).
if(TIER_HAVE_RADOS)
  tier_unit_test(cluster_member
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cluster_member.c
    LIBS tier_cluster_member TIMEOUT 600)
  set_tests_properties(cluster_member PROPERTIES FIXTURES_REQUIRED rgw LABELS rgw)
  # The OSD restarted under two members (scripts/ceph.sh stop-osd, start-osd): alone, since every
  # RADOS and RGW user waits while the OSD is down.
  add_test(NAME cluster_osd_restart COMMAND cluster_member)
  set_tests_properties(cluster_osd_restart PROPERTIES FIXTURES_REQUIRED rgw LABELS rgw
    RUN_SERIAL TRUE TIMEOUT 600
    ENVIRONMENT "TIER_TEST_FILTER=test_osd_restart;TIER_SRC=${PROJECT_SOURCE_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR}")
endif()

# The environment of the shell tests below (tests/integration/lib.sh's tierd_test_rgw_setup).
set(TIER_CLUSTER_SHELL_ENV
  "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")

# Two tierd with one [cluster] section (src/daemon/cluster.c) on real FUSE mounts: each lists both
# (GET /v1/cluster, tierctl cluster); SIGTERM and SIGKILL take one out of the other's view.
if(TIER_HAVE_RADOS AND TARGET tierd)
  add_test(NAME cluster_tierd COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cluster_tierd.sh)
  set_tests_properties(cluster_tierd PROPERTIES TIMEOUT 600 LABELS "fuse;rgw"
    FIXTURES_REQUIRED rgw
    ENVIRONMENT "${TIER_CLUSTER_SHELL_ENV}")
endif()

# Peer reads between three tierd over the RGW (src/cluster/router.c, peer.c, daemon/cluster.c):
# each block from the RGW once per cluster, a wrong secret refused, a consume-only node, a killed
# peer costs no read.
if(TIER_HAVE_RADOS AND TARGET tierd)
  add_test(NAME cluster_peer COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cluster_peer.sh)
  set_tests_properties(cluster_peer PROPERTIES TIMEOUT 900 LABELS "fuse;rgw"
    FIXTURES_REQUIRED rgw
    ENVIRONMENT "${TIER_CLUSTER_SHELL_ENV}")
endif()

# Four tierd in network namespaces of their own (scripts/clusternet.sh), TLS between them, shaped
# links: egress once per cluster, a killed node, a node joining a warm cluster, a stopped node.
if(TIER_HAVE_RADOS AND TARGET tierd)
  add_test(NAME cluster_nodes COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cluster_nodes.sh)
  set_tests_properties(cluster_nodes PROPERTIES TIMEOUT 1200 LABELS "fuse;rgw"
    FIXTURES_REQUIRED rgw RESOURCE_LOCK clusternet
    ENVIRONMENT "${TIER_CLUSTER_SHELL_ENV}")
endif()
