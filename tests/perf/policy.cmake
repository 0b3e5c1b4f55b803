# SPDX-License-Identifier: Apache-2.0
# policy_bench: the lifecycle policies' evaluation cost (src/lifecycle/lifecycle_rules.c): N files
# (default 100,000) against 10 rules, CPU time per pass (docs/BENCHMARKS.md, "Policies").
if(TARGET tierd_core)
  add_executable(policy_bench ${CMAKE_CURRENT_LIST_DIR}/policy_bench.c)
  target_link_libraries(policy_bench PRIVATE tierd_core)
endif()
