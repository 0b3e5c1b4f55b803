# SPDX-License-Identifier: Apache-2.0
# The hot-tier advice's model and split (src/advice/advice.c): curve reading, predictions, the
# size for a stall target, the split with cliffs, weights and minimums.
tier_unit_test(test_advice
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_advice.c
  LIBS tier_advice m)
