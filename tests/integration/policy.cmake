# SPDX-License-Identifier: Apache-2.0
# Lifecycle policies (docs/POLICIES.md) on a REAL mount: a checkpoint series through a
# write-back namespace with keep_last = 3 demote and an archive copy rule, over a POSIX backend
# and over the RGW (fixture rgw); the SIGKILL cycles in the middle of demotions and copies; and
# the tenant filter and demote levels with readers of other uids.
if(TARGET tierd)
  set(env "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
  foreach(kind posix rgw)
    add_test(NAME policy_${kind}
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_policy.sh ${kind})
    if(kind STREQUAL rgw)
      set_tests_properties(policy_${kind} PROPERTIES TIMEOUT 300 LABELS "fuse;rgw"
        FIXTURES_REQUIRED rgw ENVIRONMENT "${env}")
    else()
      set_tests_properties(policy_${kind} PROPERTIES TIMEOUT 240 LABELS fuse
        ENVIRONMENT "${env}")
    endif()
  endforeach()
endif()
if(TARGET tierd)
  add_test(NAME policy_crash COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_policy_crash.sh)
  set_tests_properties(policy_crash PROPERTIES TIMEOUT 400 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
if(TARGET tierd)
  add_test(NAME policy_tenants
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_policy_tenants.sh)
  set_tests_properties(policy_tenants PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
