/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c - tierctl's control API client over libcurl (see client.h). One curl easy handle per
 * client, reused across requests (the polling loop of `tierctl stage` sends many). CURLcode and
 * the socket errno are turned into enum ctl_result here, and nowhere else.
 */
#include "cli/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"

#define MAX_ANSWER_BYTES (16u << 20)

struct ctl_client {
    CURL *curl;
    char *base_url;         /* "http://localhost" (Unix socket), "http[s]://HOST:PORT" */
    char *where;            /* socket path or HOST:PORT, for messages */
    struct curl_slist *hdr; /* Content-Type, Authorization */
    long timeout_ms;
};

int ctl_client_new(const struct ctl_client_config *cfg, struct ctl_client **out)
{
    struct ctl_client *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        goto fail;
    cl->curl = curl_easy_init();
    if (!cl->curl)
        goto fail;
    cl->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
    if (cfg->tcp) {
        bool scheme = strncmp(cfg->tcp, "https://", 8) == 0 || strncmp(cfg->tcp, "http://", 7) == 0;
        if (asprintf(&cl->base_url, "%s%s", scheme ? "" : "http://", cfg->tcp) < 0) {
            cl->base_url = NULL;
            goto fail;
        }
        cl->where = strdup(cfg->tcp);
        /* only the API's own schemes, and never a redirect elsewhere */
        curl_easy_setopt(cl->curl, CURLOPT_PROTOCOLS_STR, "http,https");
        if (cfg->cacert && curl_easy_setopt(cl->curl, CURLOPT_CAINFO, cfg->cacert) != CURLE_OK)
            goto fail;
    } else {
        cl->base_url = strdup("http://localhost");
        cl->where = strdup(cfg->socket_path);
        if (curl_easy_setopt(cl->curl, CURLOPT_UNIX_SOCKET_PATH, cfg->socket_path) != CURLE_OK)
            goto fail;
    }
    if (!cl->base_url || !cl->where)
        goto fail;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (!h)
        goto fail;
    cl->hdr = h;
    if (cfg->token) {
        char *auth = NULL;
        if (asprintf(&auth, "Authorization: Bearer %s", cfg->token) < 0)
            goto fail;
        h = curl_slist_append(cl->hdr, auth);
        free(auth);
        if (!h)
            goto fail;
        cl->hdr = h;
    }
    *out = cl;
    return 0;

fail:
    ctl_client_free(cl);
    return -ENOMEM;
}

void ctl_client_free(struct ctl_client *cl)
{
    if (!cl)
        return;
    if (cl->curl)
        curl_easy_cleanup(cl->curl);
    curl_slist_free_all(cl->hdr);
    free(cl->base_url);
    free(cl->where);
    free(cl);
    curl_global_cleanup();
}

const char *ctl_client_where(const struct ctl_client *cl)
{
    return cl->where;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct dynbuf *b = ud;
    size_t n = size * nmemb;
    return dynbuf_append(b, ptr, n) == 0 ? n : 0; /* 0 aborts the transfer */
}

enum ctl_result ctl_request(struct ctl_client *cl, const char *method, const char *path,
                            const json_t *body, long *status, json_t **answer, char **raw,
                            char *err, size_t errsz)
{
    CURL *c = cl->curl;
    struct dynbuf resp;
    char *url = NULL;
    char *payload = NULL;
    enum ctl_result res = CTL_FAILED;

    dynbuf_init(&resp, MAX_ANSWER_BYTES);
    if (asprintf(&url, "%s%s", cl->base_url, path) < 0) {
        url = NULL;
        snprintf(err, errsz, "out of memory");
        goto out;
    }
    if (body) {
        payload = json_dumps(body, JSON_COMPACT);
        if (!payload) {
            snprintf(err, errsz, "out of memory");
            goto out;
        }
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, cl->hdr);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, payload ? (long)strlen(payload) : 0L);
    if (!payload)
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, cl->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);

    CURLcode cc = curl_easy_perform(c);
    if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST) {
        long oserr = 0;
        curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &oserr);
        if (oserr == EACCES || oserr == EPERM) {
            snprintf(err, errsz, "permission denied connecting to %s", cl->where);
            res = CTL_DENIED;
        } else {
            snprintf(err, errsz, "cannot connect to %s: %s", cl->where,
                     oserr ? strerror((int)oserr) : curl_easy_strerror(cc));
            res = CTL_UNREACHABLE;
        }
        goto out;
    }
    if (cc != CURLE_OK) {
        snprintf(err, errsz, "request %s %s to %s failed: %s", method, path, cl->where,
                 curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);

    json_t *j = NULL;
    if (resp.len > 0) {
        json_error_t je;
        j = json_loadb(resp.data, resp.len, 0, &je);
        if (!j) {
            snprintf(err, errsz, "tierd answered %s %s with HTTP %ld and a body that is not JSON",
                     method, path, *status);
            goto out;
        }
    }
    *answer = j;
    if (raw) {
        size_t len = 0;
        *raw = dynbuf_take(&resp, &len);
    }
    res = CTL_OK;

out:
    free(payload);
    free(url);
    dynbuf_fini(&resp);
    return res;
}
