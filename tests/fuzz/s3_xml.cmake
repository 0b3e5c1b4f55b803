# SPDX-License-Identifier: Apache-2.0
# S3 XML parsers (listing, error, single values): libFuzzer target + corpus replay.
tier_fuzz_target(fuzz_s3_xml ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_s3_xml.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/s3_xml LIBS tier_tiers)
