# SPDX-License-Identifier: Apache-2.0
# /proc/<pid>/cgroup, environ and status parsers (src/tenant/): libFuzzer target + corpus
# replay in CTest.
tier_fuzz_target(fuzz_cgroup ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_cgroup.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/cgroup LIBS tier_tenant)
