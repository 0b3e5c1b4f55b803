# SPDX-License-Identifier: Apache-2.0
# The Slurm provider's directive parser and request encoding (contrib/slurm/burst_buffer.lua),
# run by lua5.1 with a stub slurm table and a recording stand-in for curl; no Slurm, no tierd
# (the provider end to end: tests/integration/test_slurm_bb.sh, label slurm).
add_test(NAME test_bb_lua
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_bb_lua.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(test_bb_lua PROPERTIES TIMEOUT 60 LABELS unit)
# What slurm_bb_setup and pre_run send: the job's uid with POST /v1/jobs and POST /v1/tenants,
# and pre_run's "cluster" for a job on several nodes (cluster_stage).
add_test(NAME test_bb_lua_setup
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_bb_lua_setup.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(test_bb_lua_setup PROPERTIES TIMEOUT 60 LABELS unit)
