# SPDX-License-Identifier: Apache-2.0
# backend_bench: S3 backend throughput (ranged parallel GET vs single stream; small objects with N
# in flight vs one at a time). Run through bench/backend.sh; numbers in docs/bench/backend.md.
add_executable(backend_bench ${CMAKE_CURRENT_LIST_DIR}/backend_bench.c)
target_link_libraries(backend_bench PRIVATE tier_tiers tier_s3env)
