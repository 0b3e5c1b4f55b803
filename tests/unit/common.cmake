tier_unit_test(test_common SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_common.c LIBS tier_common)
