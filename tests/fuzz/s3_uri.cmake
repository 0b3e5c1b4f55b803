# SPDX-License-Identifier: Apache-2.0
# S3 URI encoding: encode's alphabet and the decode(encode(x)) == x round trip; libFuzzer target
# + corpus replay.
tier_fuzz_target(fuzz_s3_uri ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_s3_uri.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/s3_uri LIBS tier_tiers)
