/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_ui.c - the dashboard's files (GET /ui, /ui/dashboard.js, /ui/dashboard.css, /ui/chart.js;
 * docs/API.md "Dashboard"): the page, script and style sheet compiled into tierd (ui_assets.h),
 * and Chart.js read from [api] ui_chartjs at each request. Called on the HTTP server's
 * connection threads; no state.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_int.h"
#include "core/state.h"
#include "api/ui_assets.h"

/* Largest Chart.js file GET /ui/chart.js serves (Debian's chart.min.js 3.9 is 195 KiB). */
#define UI_CHARTJS_MAX (8u << 20)

static unsigned reply_static(struct api_reply *out, const unsigned char *data, size_t len,
                             const char *type)
{
    out->status = 200;
    out->body = (char *)(uintptr_t)data;
    out->len = len;
    out->is_static = true;
    out->content_type = type;
    return 200;
}

/* Chart.js, read from [api] ui_chartjs at each request: the package may be installed, upgraded
 * or removed while tierd runs, and the file is read only when someone opens the dashboard. */
static unsigned do_ui_chartjs(struct tierd *d, struct api_reply *out)
{
    const char *path = d->cfg.api_ui_chartjs;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY) : -1;
    struct stat st = {0}; /* set by fstat below; zeroed for the -O2 flow analysis */
    int rc = 0;
    if (fd < 0)
        rc = -errno;
    else if (fstat(fd, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > UI_CHARTJS_MAX)
        rc = -EINVAL;
    char *buf = NULL;
    size_t got = 0;
    if (rc == 0) {
        buf = malloc((size_t)st.st_size + 1);
        if (!buf)
            rc = -ENOMEM;
    }
    while (rc == 0 && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -EIO; /* the file shrank while we read it */
            break;
        }
        got += (size_t)n;
    }
    if (fd >= 0)
        close(fd);
    if (rc == -ENOMEM) {
        free(buf);
        return api_reply_error(out, rc, "out of memory reading %s", path);
    }
    if (rc) {
        free(buf);
        return api_reply_error_status(
            out, 404, rc,
            "the dashboard's charting library %s cannot be served (%s): install Debian's "
            "libjs-chart.js (scripts/deps.sh) or point [api] ui_chartjs at a Chart.js 3 UMD "
            "build (chart.min.js); the dashboard's table works without it",
            path ? path : "(none)",
            rc == -EINVAL ? "not a regular file of at most 8 MiB" : strerror(-rc));
    }
    out->status = 200;
    out->body = buf;
    out->len = got;
    out->is_static = false;
    out->content_type = "text/javascript; charset=utf-8";
    return 200;
}

unsigned api_ui(struct tierd *d, const struct api_request *rq, struct api_reply *out,
                const char *rest)
{
    (void)rest;
    const char *url = rq->url;
    if (strcmp(url, "/ui") == 0 || strcmp(url, "/ui/") == 0)
        return reply_static(out, tier_ui_html, tier_ui_html_len, "text/html; charset=utf-8");
    if (strcmp(url, "/ui/dashboard.js") == 0)
        return reply_static(out, tier_ui_js, tier_ui_js_len, "text/javascript; charset=utf-8");
    if (strcmp(url, "/ui/dashboard.css") == 0)
        return reply_static(out, tier_ui_css, tier_ui_css_len, "text/css; charset=utf-8");
    if (strcmp(url, "/ui/chart.js") == 0)
        return do_ui_chartjs(d, out);
    return api_reply_error(out, -ENOENT,
                           "no such dashboard file: %s (the dashboard is GET /ui; see docs/API.md)",
                           url);
}
