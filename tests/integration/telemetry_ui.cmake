# SPDX-License-Identifier: Apache-2.0
# Per-tenant telemetry as operators see it, on a real FUSE mount (needs /dev/fuse and root):
# `tierctl top`, a real Prometheus scraping the TCP listener with the token, the dashboard in
# headless Chromium (Debian's prometheus and chromium, from scripts/deps.sh). Exit 77 (skipped)
# only when this build records no per-op telemetry at all; the script says why.
if(TARGET tierd)
  add_test(NAME telemetry_ui COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_telemetry_ui.sh)
  set_tests_properties(telemetry_ui PROPERTIES TIMEOUT 300 LABELS fuse SKIP_RETURN_CODE 77
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
