# SPDX-License-Identifier: Apache-2.0
# The attributes of pinned objects that the mount shows during a backend outage (daemon/pinmeta).
if(TARGET tierd_core)
  tier_unit_test(test_pinmeta SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_pinmeta.c
    LIBS tierd_core)
endif()
