# SPDX-License-Identifier: Apache-2.0
# Dataset versions (tierctl dataset, /v1/datasets) on a REAL mount: over a POSIX backend, and
# over the RGW (fixture rgw): commit, create-only publish under races, list/show/delete, a
# truncated manifest refused, the reserved name hidden and refused, a large tree.
if(TARGET tierd)
  foreach(kind posix rgw)
    add_test(NAME datasets_${kind}
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_datasets.sh ${kind})
    set(env "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
    if(kind STREQUAL rgw)
      set_tests_properties(datasets_${kind} PROPERTIES TIMEOUT 300 LABELS "fuse;rgw"
        FIXTURES_REQUIRED rgw ENVIRONMENT "${env}")
    else()
      # 60 s with two busy CPUs beside it on a 2-core machine (35 s quiet): 5x headroom
      set_tests_properties(datasets_${kind} PROPERTIES TIMEOUT 300 LABELS fuse
        ENVIRONMENT "${env}")
    endif()
  endforeach()
endif()
