# SPDX-License-Identifier: Apache-2.0
# checkpoint_bench: the checkpoint burst buffer (issue 5, Performance): a checkpoint written with
# fsync to a directory (local disk, or the tierd mount), directly to S3 as multipart uploads, and
# through the write-back engine (no FUSE). Run through bench/checkpoint.sh; numbers in
# docs/bench/checkpoint.md.
if(TARGET tier_writeback)
  add_executable(checkpoint_bench ${CMAKE_CURRENT_LIST_DIR}/checkpoint_bench.c)
  target_link_libraries(checkpoint_bench PRIVATE tier_writeback tier_tiers tier_s3env tier_common
    PkgConfig::CURL Threads::Threads)
endif()
