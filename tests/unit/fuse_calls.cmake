# SPDX-License-Identifier: Apache-2.0
# The file-level call graph of src/fuse has no cycle (scripts/check-fuse-calls.sh: nm of the
# objects of src/fuse in tierd_core, an edge per file that uses a symbol another defines).
if(TARGET tierd_core)
  add_test(NAME fuse_calls_acyclic COMMAND ${PROJECT_SOURCE_DIR}/scripts/check-fuse-calls.sh
    "$<FILTER:$<TARGET_OBJECTS:tierd_core>,INCLUDE,/fuse/fuse_[a-z_]+\\.c\\.o$>"
    COMMAND_EXPAND_LISTS)
  set_tests_properties(fuse_calls_acyclic PROPERTIES TIMEOUT 60 LABELS unit)
endif()
