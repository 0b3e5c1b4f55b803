# SPDX-License-Identifier: Apache-2.0
# S3 backend against the real Ceph RGW. It stops and restarts RGW in its last test, so it runs
# alone (RUN_SERIAL) to keep other RGW tests from seeing the outage.
tier_unit_test(test_s3_rgw SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_s3_rgw.c
  LIBS tier_tiers TIMEOUT 300)
set_tests_properties(test_s3_rgw PROPERTIES FIXTURES_REQUIRED rgw LABELS rgw RUN_SERIAL TRUE)
