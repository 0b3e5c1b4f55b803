# SPDX-License-Identifier: Apache-2.0
# wb_meta_bench: the write-back engine's metadata calls (the mount's stat of one file) at 1,000 to
# 100,000 journal rows, key index next to a walk of every row. Numbers in docs/BENCHMARKS.md.
if(TARGET tier_writeback)
  add_executable(wb_meta_bench ${CMAKE_CURRENT_LIST_DIR}/wb_meta_bench.c)
  target_link_libraries(wb_meta_bench PRIVATE tier_writeback tier_tiers tier_common
    PkgConfig::SQLITE3)
endif()
