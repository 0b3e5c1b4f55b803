# SPDX-License-Identifier: Apache-2.0
# tierd on a real FUSE mount (needs /dev/fuse and root): POSIX backend always, RGW with the rgw
# fixture. The scripts start the tierd built here.
if(TARGET tierd)
  add_test(NAME fuse_posix COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_fuse_posix.sh)
  set_tests_properties(fuse_posix PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
if(TARGET tierd)
  # Read-ahead sized from the bandwidth-delay product through a delaying proxy in front of RGW.
  add_test(NAME readahead_rgw COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_readahead_rgw.sh)
  set_tests_properties(readahead_rgw PROPERTIES TIMEOUT 300 LABELS "fuse;rgw" FIXTURES_REQUIRED rgw
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
if(TARGET tierd)
  add_test(NAME fuse_rgw COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_fuse_rgw.sh)
  # It stops RGW for a while: RUN_SERIAL, or concurrent RGW tests would see the outage.
  set_tests_properties(fuse_rgw PROPERTIES TIMEOUT 300 LABELS "fuse;rgw" FIXTURES_REQUIRED rgw
    RUN_SERIAL TRUE
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
if(TARGET tierd)
  add_test(NAME fuse_perm COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_fuse_perm.sh)
  set_tests_properties(fuse_perm PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
if(TARGET tierd)
  add_test(NAME fuse_dir COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_fuse_dir.sh)
  set_tests_properties(fuse_dir PROPERTIES TIMEOUT 180 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
if(TARGET tierd)
  # The RGW's usage log against the scheduler's count of backend calls (one scheduling point).
  add_test(NAME sched_rgw COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_sched_rgw.sh)
  set_tests_properties(sched_rgw PROPERTIES TIMEOUT 300 LABELS "fuse;rgw" FIXTURES_REQUIRED rgw
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# Per-namespace metadata TTLs on a REAL mount (/dev/fuse): the read-cache default makes repeated
# stats and opens free; a short namespace TTL sees a replaced object, each read one version.
if(TARGET tierd)
  add_test(NAME readahead_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_readahead_fuse.sh)
  set_tests_properties(readahead_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
  add_test(NAME ttl_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_ttl_fuse.sh)
  set_tests_properties(ttl_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# Epoch-order hints through the control files under the mount (<mount>/.tierd/hints/NAME) on a
# REAL, read-only mount: a shell line hints; errors come back from close(2); cat shows progress.
if(TARGET tierd)
  add_test(NAME hintfile_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_hintfile_fuse.sh)
  set_tests_properties(hintfile_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# Revalidation by one LIST per directory instead of a HEAD per file (200 stats after the TTL,
# rent or buy for a 3-page directory, a replaced and a deleted file), and 100,000-file listings.
if(TARGET tierd)
  add_test(NAME listreval_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_listreval_fuse.sh)
  set_tests_properties(listreval_fuse PROPERTIES TIMEOUT 600 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# What hint sets may cost on a REAL mount (root, /dev/fuse; other uids by setpriv): manifest reads
# once per version and submission, per-tenant caps (507 / EDQUOT) and the state budget, hint
# files' buffers per tenant (4 MiB a file for users), and closes served off the FUSE worker.
if(TARGET tierd)
  add_test(NAME hintlimits_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_hintlimits_fuse.sh)
  set_tests_properties(hintlimits_fuse PROPERTIES TIMEOUT 240 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# The no-open connection ([mount] no_open): 0 OPEN for a warm file, a replaced file read as
# one version, write-back and hint files beside the binds, no_open = off as before, no mount
# left behind.
if(TARGET tierd)
  add_test(NAME noopen_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_noopen_fuse.sh)
  set_tests_properties(noopen_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
