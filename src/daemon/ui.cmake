# SPDX-License-Identifier: Apache-2.0
# The dashboard (GET /ui, docs/API.md): its page, script and style sheet (ui/) are compiled into
# tierd, so the page always matches the daemon that serves it. Chart.js is not: tierd reads it
# from Debian's libjs-chart.js at request time ([api] ui_chartjs).
set(TIER_UI_DIR ${CMAKE_CURRENT_SOURCE_DIR}/ui)
set(TIER_UI_GEN ${CMAKE_CURRENT_BINARY_DIR}/ui_assets.c)
set(TIER_UI_FILES
  tier_ui_html=${TIER_UI_DIR}/dashboard.html
  tier_ui_js=${TIER_UI_DIR}/dashboard.js
  tier_ui_css=${TIER_UI_DIR}/dashboard.css)
add_custom_command(OUTPUT ${TIER_UI_GEN}
  COMMAND ${CMAKE_COMMAND} "-DFILES=${TIER_UI_FILES}" -DOUT=${TIER_UI_GEN}
          -P ${TIER_UI_DIR}/embed.cmake
  DEPENDS ${TIER_UI_DIR}/embed.cmake ${TIER_UI_DIR}/dashboard.html ${TIER_UI_DIR}/dashboard.js
          ${TIER_UI_DIR}/dashboard.css
  COMMENT "Embedding the dashboard (src/daemon/ui/)" VERBATIM)
target_sources(tierd_core PRIVATE ${TIER_UI_GEN})
