/* SPDX-License-Identifier: Apache-2.0 */
/* listen.h - a listening TCP socket on HOST:PORT, for the servers that take their own socket (the
 * control API's TCP listener, the cluster's peer endpoint). */
#ifndef TIER_COMMON_LISTEN_H
#define TIER_COMMON_LISTEN_H

#include <stdint.h>

/* A socket bound to HOST:PORT (HOST an address, a name, "[v6 address]", or empty for every
 * address; PORT a number, 0: any free one) of family (AF_INET, or AF_UNSPEC for either),
 * SO_REUSEADDR, listening, close-on-exec: 0, *fd_out and (when not NULL) *port_out, the port it
 * got; or -errno with tier_err_msg() naming "WHAT HOSTPORT" (what: e.g. "[api] tcp ="). */
int tier_listen_tcp(const char *what, const char *hostport, int family, int *fd_out,
                    uint16_t *port_out);

#endif
