# SPDX-License-Identifier: Apache-2.0
# The network of a tierd test cluster (scripts/clusternet.sh): node namespaces on the cluster
# bridge reach the rgw fixture's mon, OSD and RGW, and each other, through shaped veths. Root.
add_test(NAME cluster_netns COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cluster_netns.sh)
set_tests_properties(cluster_netns PROPERTIES TIMEOUT 600 LABELS rgw FIXTURES_REQUIRED rgw
  ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
