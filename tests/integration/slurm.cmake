# SPDX-License-Identifier: Apache-2.0
# The Slurm fixture (scripts/slurm.sh): a private single-node Slurm with the burst_buffer/lua
# plugin and the harness's placeholder burst_buffer.lua, started once before the first test that
# requires the fixture `slurm` and stopped after the last. Label `slurm` (root, Debian's Slurm
# packages; see docs/SLURM.md). slurm_smoke proves the fixture itself: a plain job and a
# burst-buffer job, both submitted as nobody, through to COMPLETED and the Lua hooks in order.
set(TIER_SLURM_DIR ${CMAKE_BINARY_DIR}/slurm)
add_test(NAME slurm_start COMMAND ${PROJECT_SOURCE_DIR}/scripts/slurm.sh start ${TIER_SLURM_DIR})
# slurm_start and slurm_bb each start a cluster; slurm.sh picks free ports by probing, so two
# starts at once could pick the same: they never run together (RESOURCE_LOCK).
set_tests_properties(slurm_start PROPERTIES FIXTURES_SETUP slurm LABELS slurm TIMEOUT 300
  RESOURCE_LOCK slurm_ports)
add_test(NAME slurm_stop COMMAND ${PROJECT_SOURCE_DIR}/scripts/slurm.sh stop ${TIER_SLURM_DIR})
set_tests_properties(slurm_stop PROPERTIES FIXTURES_CLEANUP slurm LABELS slurm TIMEOUT 300)
add_test(NAME slurm_smoke
  COMMAND ${PROJECT_SOURCE_DIR}/tests/integration/test_slurm_smoke.sh
    ${PROJECT_SOURCE_DIR} ${TIER_SLURM_DIR})
set_tests_properties(slurm_smoke PROPERTIES
  FIXTURES_REQUIRED slurm LABELS slurm TIMEOUT 300)

# The provider itself (contrib/slurm/burst_buffer.lua), end to end: its own Slurm cluster in the
# test's directory (scripts/slurm.sh with the provider installed, next to the fixture's), a tierd
# with a FUSE mount over the RGW and a proxy it can stop; bad directives refused at sbatch,
# stage-in before the start (hot first pass, the job's tenant), queueing over capacity, scancel
# during stage-in, stage-out held while the backend is down (tests/integration/test_slurm_bb.sh).
if(TARGET tierd)
  add_test(NAME slurm_bb COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_slurm_bb.sh)
  set_tests_properties(slurm_bb PROPERTIES TIMEOUT 300 LABELS "slurm;rgw;fuse"
    FIXTURES_REQUIRED rgw RESOURCE_LOCK slurm_ports
    ENVIRONMENT "TIER_BIN=${CMAKE_BINARY_DIR};TIER_SRC=${PROJECT_SOURCE_DIR};TIER_CEPH_DIR=${TIER_CEPH_DIR};TIER_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
