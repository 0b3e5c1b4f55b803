/* SPDX-License-Identifier: Apache-2.0 */
/* s3env.c - the test RGW's env file and bucket creation. See s3env.h. */
#include "s3env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/strutil.h"

bool tu_s3_env_load(struct tu_s3_env *env)
{
    const char *dir = getenv("TIER_CEPH_DIR");
    if (!dir)
        return false;
    char path[512];
    snprintf(path, sizeof(path), "%s/env", dir);
    return tu_s3_env_load_file(path, env);
}

bool tu_s3_env_load_file(const char *path, struct tu_s3_env *env)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    memset(env, 0, sizeof(*env));
    tier_strlcpy(env->region, "default", sizeof(env->region));
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *v = eq + 1;
        if (strcmp(line, "S3_ENDPOINT") == 0)
            tier_strlcpy(env->endpoint, v, sizeof(env->endpoint));
        else if (strcmp(line, "S3_REGION") == 0)
            tier_strlcpy(env->region, v, sizeof(env->region));
        else if (strcmp(line, "S3_ACCESS_KEY") == 0)
            tier_strlcpy(env->access_key, v, sizeof(env->access_key));
        else if (strcmp(line, "S3_SECRET_KEY") == 0)
            tier_strlcpy(env->secret_key, v, sizeof(env->secret_key));
    }
    fclose(f);
    return env->endpoint[0] && env->access_key[0] && env->secret_key[0];
}

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

int tu_s3_bucket_create(const struct tu_s3_env *env, const char *tag, char *name, size_t namesz)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(name, namesz, "%s-%d-%ld", tag, (int)getpid(), (long)(ts.tv_nsec / 1000));
    return tu_s3_bucket_create_named(env, name);
}

int tu_s3_bucket_create_named(const struct tu_s3_env *env, const char *name)
{
    char url[512], sigv4[128], userpwd[300];
    snprintf(url, sizeof(url), "%s/%s", env->endpoint, name);
    snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", env->region);
    snprintf(userpwd, sizeof(userpwd), "%s:%s", env->access_key, env->secret_key);
    CURL *c = curl_easy_init();
    if (!c)
        return -ENOMEM;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
    curl_easy_setopt(c, CURLOPT_USERPWD, userpwd);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    /* curl 7.88 does not send the payload hash with its SigV4 signature; RGW insists on it. */
    struct curl_slist *hdrs = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    CURLcode cc = curl_easy_perform(c);
    curl_slist_free_all(hdrs);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    if (cc != CURLE_OK)
        return -EIO;
    return status == 200 ? 0 : -EIO;
}
