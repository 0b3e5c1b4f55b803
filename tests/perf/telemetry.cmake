# SPDX-License-Identifier: Apache-2.0
# telemetry_bench: cost of tele_op_record (1 and 2 threads) and of rendering /metrics and
# /v1/telemetry with 64 tenants x 4 classes, every op and tier populated. Numbers in
# docs/BENCHMARKS.md.
add_executable(telemetry_bench ${CMAKE_CURRENT_LIST_DIR}/telemetry_bench.c)
target_link_libraries(telemetry_bench PRIVATE tier_telemetry tier_common Threads::Threads m)
# randread: closed-loop O_DIRECT random preads over files, for bench/telemetry_ramhit.sh (RAM-hit
# 4 KiB reads through the mount, telemetry on vs off).
add_executable(randread ${CMAKE_CURRENT_LIST_DIR}/randread.c)
target_link_libraries(randread PRIVATE Threads::Threads)
