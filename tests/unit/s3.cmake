# SPDX-License-Identifier: Apache-2.0
# S3 backend: XML parsers, errno mapping, retry policy, URI encoding (no network needed).
tier_unit_test(test_s3 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_s3.c LIBS tier_tiers)
