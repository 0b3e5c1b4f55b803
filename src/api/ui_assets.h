/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ui_assets.h - the dashboard's files (src/api/ui/), compiled into tierd by ui.cmake. Each is
 * NUL-terminated; NAME_len excludes the NUL. Served by api_ui.c (GET /ui, /ui/...).
 */
#ifndef TIER_API_UI_ASSETS_H
#define TIER_API_UI_ASSETS_H

#include <stddef.h>

extern const unsigned char tier_ui_html[], tier_ui_js[], tier_ui_css[];
extern const size_t tier_ui_html_len, tier_ui_js_len, tier_ui_css_len;

#endif
