# SPDX-License-Identifier: Apache-2.0
# GET /metrics of a tierd on a REAL FUSE mount (needs /dev/fuse and root), checked by Debian's
# promtool (skipped, exit 77, where it is not installed).
if(TARGET tierd)
  add_test(NAME metrics_promtool COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_metrics.sh)
  set_tests_properties(metrics_promtool PROPERTIES TIMEOUT 300 LABELS fuse SKIP_RETURN_CODE 77
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()

# The NVML sampler in tierd ([daemon] gpu_sampling) with the fake NVML of the tests
# (tests/lib/fake_nvml.c) as libnvidia-ml.so.1, on a REAL mount (root, /dev/fuse): a process's
# utilisation in /metrics and /v1/telemetry under its tenant, fading after it exits, and off.
if(TARGET tierd)
  add_test(NAME gpu_fuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_gpu_fuse.sh)
  set_tests_properties(gpu_fuse PROPERTIES TIMEOUT 300 LABELS fuse
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
