# SPDX-License-Identifier: Apache-2.0
# S3 backend: XML parsers, errno mapping, retry policy, URI encoding, transport checks, and the
# backend against scripted and black-hole local HTTP servers (no S3 server needed).
tier_unit_test(test_s3 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_s3.c
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/blackhole.c LIBS tier_tiers)
