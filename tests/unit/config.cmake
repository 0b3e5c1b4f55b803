# SPDX-License-Identifier: Apache-2.0
# tierd.conf parser (src/daemon/config.c): bad-config message table and good-config struct.
if(TARGET tierd_core)
  tier_unit_test(test_config SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_config.c
    LIBS tierd_core)
  target_compile_definitions(test_config PRIVATE
    TIER_CONFIG_DIR="${CMAKE_CURRENT_SOURCE_DIR}/unit/configs")
endif()
