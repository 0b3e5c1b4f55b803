/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.h - tierctl's HTTP client for the tierd control API (docs/API.md): one request, one JSON
 * answer, over the Unix socket (default) or TCP with a bearer token. tierctl talks to tierd only
 * through this; it links no daemon code.
 *
 * Single-threaded: a client is used by one thread at a time.
 */
#ifndef TIER_CLI_CLIENT_H
#define TIER_CLI_CLIENT_H

#include <jansson.h>
#include <stddef.h>

struct ctl_client;

struct ctl_client_config {
    const char *socket_path; /* used when tcp is NULL */
    const char *tcp;         /* "HOST:PORT", "https://HOST:PORT" or NULL */
    const char *token;       /* bearer token for TCP, or NULL */
    long timeout_ms;         /* whole request; 0 = 30 s */
    const char *cacert;      /* CA file (PEM) for https, or NULL: the system's CAs */
};

/* Outcome of a request, beyond the HTTP status. */
enum ctl_result {
    CTL_OK = 0,          /* an HTTP answer arrived (any status); *body is its JSON */
    CTL_UNREACHABLE = 1, /* no daemon there: socket missing, connection refused */
    CTL_DENIED = 2,      /* the socket exists but we may not connect (EACCES) */
    CTL_FAILED = 3,      /* transport error or an answer that is not JSON */
};

int ctl_client_new(const struct ctl_client_config *cfg, struct ctl_client **out);
void ctl_client_free(struct ctl_client *cl); /* NULL is a no-op */

/* Send METHOD path (e.g. "/v1/status") with an optional JSON body (borrowed). On CTL_OK,
 * *status is the HTTP status and *answer the parsed JSON object (caller json_decref()s; NULL for
 * an empty body), and *raw (if raw is not NULL) the body text (caller free()s). Otherwise err
 * (errsz bytes) says what went wrong. */
enum ctl_result ctl_request(struct ctl_client *cl, const char *method, const char *path,
                            const json_t *body, long *status, json_t **answer, char **raw,
                            char *err, size_t errsz);

/* Where the client connects, for messages: the socket path or "HOST:PORT". Valid as long as cl. */
const char *ctl_client_where(const struct ctl_client *cl);

#endif
