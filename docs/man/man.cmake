# SPDX-License-Identifier: Apache-2.0
# The man pages (tierd(8), tierctl(1), tierbench(1), tierd.conf(5)): docs/man/*.scd turned into
# roff by scdoc at build time (build/man/), linted by the test man_lint.
find_program(SCDOC scdoc)
if(SCDOC)
  set(TIER_MAN_PAGES tierd.8 tierctl.1 tierbench.1 tierd.conf.5)
  set(TIER_MAN_OUT)
  foreach(page ${TIER_MAN_PAGES})
    add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/man/${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
      COMMAND ${PROJECT_SOURCE_DIR}/docs/man/scdoc.sh ${SCDOC}
        ${PROJECT_SOURCE_DIR}/docs/man/${page}.scd ${CMAKE_BINARY_DIR}/man/${page}
      DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/${page}.scd ${PROJECT_SOURCE_DIR}/docs/man/scdoc.sh
      VERBATIM
      COMMENT "scdoc ${page}")
    list(APPEND TIER_MAN_OUT ${CMAKE_BINARY_DIR}/man/${page})
  endforeach()
  add_custom_target(man ALL DEPENDS ${TIER_MAN_OUT})
  foreach(page ${TIER_MAN_PAGES})
    string(REGEX REPLACE ".*\\.([0-9])$" "\\1" sect ${page})
    install(FILES ${CMAKE_BINARY_DIR}/man/${page} DESTINATION share/man/man${sect})
  endforeach()
else()
  message(WARNING "scdoc not found: no man pages (scripts/deps.sh installs it)")
endif()
