# SPDX-License-Identifier: Apache-2.0
# Control API request function (src/api/api_route.c and the handlers) over the POSIX fixture of
# tests/lib/api_fixture.c (defined in tests/fuzz/api.cmake, included before this file).
if(TARGET tier_api_fixture)
  tier_unit_test(test_api SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_api.c
    LIBS tier_api_fixture)
endif()
# The route table (src/api/api_route.c) against docs/API.md "Routes", and admission per row.
if(TARGET tierd_core)
  tier_unit_test(test_api_routes SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_api_routes.c
    LIBS tierd_core)
endif()
