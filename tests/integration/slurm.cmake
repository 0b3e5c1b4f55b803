# SPDX-License-Identifier: Apache-2.0
# The Slurm fixture (scripts/slurm.sh): a private single-node Slurm with the burst_buffer/lua
# plugin and the harness's placeholder burst_buffer.lua, started once before the first test that
# requires the fixture `slurm` and stopped after the last. Label `slurm` (root, Debian's Slurm
# packages; see docs/SLURM.md). slurm_smoke proves the fixture itself: a plain job and a
# burst-buffer job, both submitted as nobody, through to COMPLETED and the Lua hooks in order.
set(TIER_SLURM_DIR ${CMAKE_BINARY_DIR}/slurm)
add_test(NAME slurm_start COMMAND ${PROJECT_SOURCE_DIR}/scripts/slurm.sh start ${TIER_SLURM_DIR})
set_tests_properties(slurm_start PROPERTIES FIXTURES_SETUP slurm LABELS slurm TIMEOUT 120)
add_test(NAME slurm_stop COMMAND ${PROJECT_SOURCE_DIR}/scripts/slurm.sh stop ${TIER_SLURM_DIR})
set_tests_properties(slurm_stop PROPERTIES FIXTURES_CLEANUP slurm LABELS slurm TIMEOUT 60)
add_test(NAME slurm_smoke
  COMMAND ${PROJECT_SOURCE_DIR}/tests/integration/test_slurm_smoke.sh
    ${PROJECT_SOURCE_DIR} ${TIER_SLURM_DIR})
set_tests_properties(slurm_smoke PROPERTIES
  FIXTURES_REQUIRED slurm LABELS slurm TIMEOUT 90)
