# SPDX-License-Identifier: Apache-2.0
# The write path of the mount's control files (.tierd/hints/NAME: src/fuse/fuse_ctl_hints.c), its
# FUSE operations called without a session over the control API's POSIX fixture: libFuzzer
# target + corpus replay.
if(TARGET tier_api_fixture)
  tier_fuzz_target(fuzz_ctl ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_ctl.c
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/ctl LIBS tier_api_fixture)
endif()
