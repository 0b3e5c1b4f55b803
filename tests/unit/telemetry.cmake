# SPDX-License-Identifier: Apache-2.0
# Telemetry core: histogram precision against exact quantiles, tenant folding, exposition
# escaping and structure, the JSON through jansson, and recording from several threads
# (labelled tsan: run it in a -DTIER_TSAN=ON build too).
tier_unit_test(test_telemetry SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_telemetry.c
  LIBS tier_telemetry PkgConfig::JANSSON m LABELS tsan)
# The data-stall store (src/telemetry/stall.c): exact counts, the decayed ratio, bounded names,
# aging, validation, folding, its series in the exports, and reports from several threads (labelled
# tsan).
tier_unit_test(test_stall SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_stall.c
  LIBS tier_telemetry PkgConfig::JANSSON m LABELS tsan)
# The Python helper's StallReport (contrib/python/tierd_hints.py) against a stand-in tierd on a
# Unix socket: what it measures and sends, a broken-off loop, no tierd, a refused report.
add_test(NAME test_stall_report
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_stall_report.py ${PROJECT_SOURCE_DIR})
set_tests_properties(test_stall_report PROPERTIES TIMEOUT 120 LABELS unit)
# The NVML sampler (src/telemetry/gpu.c) against the fake NVML (fake_nvml, tests/CMakeLists.txt;
# fake_nvml_nosym lacks nvmlDeviceGetProcessUtilization): no library, a missing symbol, tenants'
# utilisation, errors, fading, the thread (labelled tsan) and the exports.
tier_unit_test(test_gpu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_gpu.c
  LIBS tier_telemetry PkgConfig::JANSSON m ${CMAKE_DL_LIBS} LABELS tsan)
target_compile_definitions(test_gpu PRIVATE FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>"
  FAKE_NVML_NOSYM_PATH="$<TARGET_FILE:fake_nvml_nosym>")
add_dependencies(test_gpu fake_nvml fake_nvml_nosym)
