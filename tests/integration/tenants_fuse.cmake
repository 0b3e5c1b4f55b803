# SPDX-License-Identifier: Apache-2.0
# Per-tenant attribution of FUSE reads on a REAL mount (needs /dev/fuse, root and a writable cgroup
# v2 hierarchy): readers as two uids, in two Slurm-like cgroups and with SLURM_JOB_ID; /metrics
# bytes per tenant and class, tierctl top, /v1/tenants.
if(TARGET tierd)
  add_test(NAME tenants_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_tenants_fuse.sh)
  set_tests_properties(tenants_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# The local disk's QoS lane on a REAL mount (root, /dev/fuse): a tenant's disk_limit holds for its
# disk-level hits of a RAM-less cache while the default tenant's disk hits are not held back; a
# disk limit lowered with PUT /v1/qos ("resource": "disk") holds within 1 s; tierctl qos (disk).
if(TARGET tierd)
  add_test(NAME disk_qos_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_disk_qos_fuse.sh)
  set_tests_properties(disk_qos_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# Per-tenant hot-tier space quotas on a REAL mount (root, /dev/fuse): a scanning tenant over its
# [tenant] cache_quota evicts only its own blocks; another tenant's working set stays (and, as the
# control, an unquoted scan takes it).
if(TARGET tierd)
  add_test(NAME quota_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_quota_fuse.sh)
  set_tests_properties(quota_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# Epoch-order hints on a REAL mount (root, /dev/fuse) with the Python helper: two shuffled epochs
# over a dataset twice the cache; the hinted second epoch meets >= 95 % hits (an unhinted control
# run first must not); bad hints 400.
if(TARGET tierd)
  add_test(NAME hints_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_hints_fuse.sh)
  set_tests_properties(hints_fuse PROPERTIES TIMEOUT 180 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# Job admission on a REAL mount (root, /dev/fuse): jobs reserve hot-tier space and bandwidth,
# are staged and pinned, queue in order over capacity and are admitted on a release; bad input
# 400, too large 422, a non-administrator 403.
if(TARGET tierd)
  add_test(NAME jobs_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_jobs_fuse.sh)
  set_tests_properties(jobs_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# Data-stall reports on a REAL mount (root, /dev/fuse, Debian's python3-torch): a real PyTorch
# DataLoader run as uid 1001, wrapped by the Python helper's StallReport; the reports appear in
# /metrics and tierctl top for tenant u1001.
if(TARGET tierd)
  add_test(NAME stall_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_stall_fuse.sh)
  set_tests_properties(stall_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# The hot-tier advice and [tenants] auto_quota on a REAL mount (root, /dev/fuse): two tenants with
# equal static quotas, one re-reading a set larger than its quota, one scanning; without
# auto_quota nothing moves; with it the re-reader's quota grows past its set within minutes of
# rounds and its backend bytes fall (docs/ADVICE.md).
if(TARGET tierd)
  add_test(NAME advice_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_advice_fuse.sh)
  set_tests_properties(advice_fuse PROPERTIES TIMEOUT 600 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
