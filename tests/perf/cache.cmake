# SPDX-License-Identifier: Apache-2.0
# Cache benchmarks (src/cache): cachesim replays traces through the cache's own policy code;
# cache_hit measures hit-path throughput against memcpy and pread. Run via bench/cache.sh;
# numbers in docs/bench/cache.md.
add_executable(cachesim ${CMAKE_CURRENT_LIST_DIR}/cachesim.c)
target_link_libraries(cachesim PRIVATE tier_cache tier_hintcore m)
add_executable(cache_hit ${CMAKE_CURRENT_LIST_DIR}/cache_hit.c)
target_link_libraries(cache_hit PRIVATE tier_cache)
# disk_adm_bench: what the local disk's QoS lane (qos/sched.h) costs a disk-level hit; numbers
# in docs/bench/cache.md.
add_executable(disk_adm_bench ${CMAKE_CURRENT_LIST_DIR}/disk_adm_bench.c)
target_link_libraries(disk_adm_bench PRIVATE tier_cache tier_qos)
