# SPDX-License-Identifier: Apache-2.0
# The Ceph RGW fixture itself (scripts/ceph.sh): a signed S3 round trip with curl against the
# cluster that the `rgw` fixture started, so a broken fixture fails here, not inside a C test.
add_test(NAME ceph_rgw_roundtrip
  COMMAND ${PROJECT_SOURCE_DIR}/tests/integration/ceph_rgw_roundtrip.sh
    ${PROJECT_SOURCE_DIR} ${TIER_CEPH_DIR})
set_tests_properties(ceph_rgw_roundtrip PROPERTIES
  FIXTURES_REQUIRED rgw LABELS rgw TIMEOUT 300
  ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}")
