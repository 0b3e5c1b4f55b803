# SPDX-License-Identifier: Apache-2.0
# The write-back journal as read at start-up (src/writeback: jr_load, recovery, the spool sweep):
# libFuzzer target + corpus replay.
tier_fuzz_target(fuzz_journal ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_journal.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/journal LIBS tier_writeback tier_tiers tier_common
  PkgConfig::SQLITE3)
