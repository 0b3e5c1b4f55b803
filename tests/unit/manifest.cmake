# SPDX-License-Identifier: Apache-2.0
# Lookups in a dataset version's manifest (datasets/manifest.h): files, directories, sort order;
# the memory a hint submission counts for a decoded manifest (hints_manifest_mem).
if(TARGET tierd_core)
  tier_unit_test(test_manifest SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_manifest.c
    LIBS tierd_core)
endif()
