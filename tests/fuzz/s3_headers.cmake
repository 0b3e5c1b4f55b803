# SPDX-License-Identifier: Apache-2.0
# S3 response header parser (ETag, Last-Modified, Content-Length, Content-Range): libFuzzer target
# + corpus replay.
tier_fuzz_target(fuzz_s3_headers ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_s3_headers.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/s3_headers LIBS tier_tiers)
