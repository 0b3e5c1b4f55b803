/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.h - the control API server (docs/API.md): HTTP + JSON on a Unix socket, and on TCP with a
 * bearer token when configured. Started and stopped by main(); requests run on the server's own
 * threads and call the cache, the stager and tierd_resolve(), all thread-safe.
 */
#ifndef TIER_API_API_H
#define TIER_API_API_H

struct tierd;
struct tierd_api;

/* Listen on d->cfg.api_socket (parent directory created or checked, a stale socket replaced,
 * mode 0660, group [api] socket_group) and, if set, d->cfg.api_tcp (TLS with [api] tls_cert and
 * tls_key). Returns 0 or -errno with a message in tier_err_msg(). */
int tierd_api_start(struct tierd *d, struct tierd_api **out);
/* Stop listening, wait for requests in progress, remove the socket. NULL is a no-op. */
void tierd_api_stop(struct tierd_api *a);

#endif
