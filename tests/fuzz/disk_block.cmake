# SPDX-License-Identifier: Apache-2.0
# Cache block files through the restart scan and verified reads (src/cache/disk.c): libFuzzer
# target + corpus replay. gen_disk_block_corpus writes the seed corpus with the real writer
# (run by hand when the block format changes; not a test).
tier_fuzz_target(fuzz_disk_block ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_disk_block.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/disk_block LIBS tier_cache tier_testlib)
add_executable(gen_disk_block_corpus ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/gen_disk_block_corpus.c)
target_link_libraries(gen_disk_block_corpus PRIVATE tier_cache tier_testlib)
