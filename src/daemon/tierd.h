/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tierd.h - what only the daemon's own files (src/daemon: main.c, config.c, resolve.c, tenants.c)
 * share beyond core/state.h, which holds the state the other layers see. No file outside
 * src/daemon includes it (scripts/check-layers.sh).
 */
#ifndef TIER_DAEMON_TIERD_H
#define TIER_DAEMON_TIERD_H

#include "core/state.h"

struct tenant_reg;

/* The tenant registry of cfg: [tenants] limits, then every [tenant NAME] in order (its rule, if
 * it has match keys). 0, or -errno with tier_err_msg() naming the section. */
int tierd_tenants_open(const struct tierd_config *cfg, struct tenant_reg **out);

#endif
