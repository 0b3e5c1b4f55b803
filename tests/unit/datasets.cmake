# SPDX-License-Identifier: Apache-2.0
# Dataset versions (datasets/dataset.h) opened with a context built without a daemon: a POSIX
# namespace in a scratch directory; commit, list, show, delete, the view, the generation.
if(TARGET tierd_core)
  tier_unit_test(test_datasets SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_datasets.c
    LIBS tierd_core)
endif()
