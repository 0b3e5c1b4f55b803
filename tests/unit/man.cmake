# SPDX-License-Identifier: Apache-2.0
# The man pages lint clean (docs/man/, built by docs/man/man.cmake).
if(TARGET man)
  add_test(NAME man_lint COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/man_lint.sh ${CMAKE_BINARY_DIR}/man)
  set_tests_properties(man_lint PROPERTIES TIMEOUT 60 LABELS unit)
endif()
