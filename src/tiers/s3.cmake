# SPDX-License-Identifier: Apache-2.0
# S3 backend (cold tier) on libcurl + expat; see s3.c for the design.
target_sources(tier_tiers PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/s3.c
  ${CMAKE_CURRENT_SOURCE_DIR}/s3_xml.c
  ${CMAKE_CURRENT_SOURCE_DIR}/s3_hdr.c
  ${CMAKE_CURRENT_SOURCE_DIR}/s3_err.c
  ${CMAKE_CURRENT_SOURCE_DIR}/retry.c)
