# SPDX-License-Identifier: Apache-2.0
# The shared behavioural suite, one program run once per backend kind (argv[1]), plainly and
# wrapped in its scheduler lane as tierd runs it (argv[2] = sched).
add_executable(test_backend_suite ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_backend_suite.c)
target_link_libraries(test_backend_suite PRIVATE tier_testlib tier_qos tier_tiers)
set(TIER_SUITE_ENV "TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp;TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_BIN=${CMAKE_BINARY_DIR}")
add_test(NAME backend_suite_posix COMMAND test_backend_suite posix)
set_tests_properties(backend_suite_posix PROPERTIES TIMEOUT 300 ENVIRONMENT "${TIER_SUITE_ENV}" LABELS unit)
add_test(NAME backend_suite_s3 COMMAND test_backend_suite s3)
set_tests_properties(backend_suite_s3 PROPERTIES TIMEOUT 300 ENVIRONMENT "${TIER_SUITE_ENV}"
  FIXTURES_REQUIRED rgw LABELS rgw)
add_test(NAME backend_suite_posix_sched COMMAND test_backend_suite posix sched)
set_tests_properties(backend_suite_posix_sched PROPERTIES TIMEOUT 300 ENVIRONMENT "${TIER_SUITE_ENV}"
  LABELS unit)
add_test(NAME backend_suite_s3_sched COMMAND test_backend_suite s3 sched)
set_tests_properties(backend_suite_s3_sched PROPERTIES TIMEOUT 300 ENVIRONMENT "${TIER_SUITE_ENV}"
  FIXTURES_REQUIRED rgw LABELS rgw)
