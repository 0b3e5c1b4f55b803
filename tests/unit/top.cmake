# SPDX-License-Identifier: Apache-2.0
# The model of `tierctl top` (src/cli/top.c) on recorded GET /v1/telemetry answers.
tier_unit_test(test_top SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_top.c
  ${PROJECT_SOURCE_DIR}/src/cli/top.c LIBS tier_telemetry PkgConfig::JANSSON m)
