# SPDX-License-Identifier: Apache-2.0
# tenant_resolve_bench: ns per cached tenant_resolve (the check every FUSE request pays) with
# pidfds and with the start-time check they replace, and the system calls each check costs.
# Numbers in docs/BENCHMARKS.md.
add_executable(tenant_resolve_bench ${CMAKE_CURRENT_LIST_DIR}/tenant_resolve_bench.c)
target_link_libraries(tenant_resolve_bench PRIVATE tier_tenant tier_common Threads::Threads)
