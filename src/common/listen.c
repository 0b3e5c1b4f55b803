/* SPDX-License-Identifier: Apache-2.0 */
/* listen.c - a listening TCP socket on HOST:PORT. See listen.h. */
#include "common/listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/err.h"

/* The port of a bound socket's address (IPv4 or IPv6). */
static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return 0;
}

int tier_listen_tcp(const char *what, const char *hostport, int family, int *fd_out,
                    uint16_t *port_out)
{
    char host[256];
    const char *colon = hostport ? strrchr(hostport, ':') : NULL;
    if (!colon || (size_t)(colon - hostport) >= sizeof(host) || !colon[1]) {
        tier_err_set("%s %s: not HOST:PORT", what, hostport ? hostport : "(null)");
        return -EINVAL;
    }
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    char *h = host;
    size_t hl = strlen(h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [::1]:7700 */
        h[hl - 1] = '\0';
        h++;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int g = getaddrinfo(*h ? h : NULL, colon + 1, &hints, &res);
    if (g != 0) {
        tier_err_set("%s %s: %s", what, hostport, gai_strerror(g));
        return -EINVAL;
    }
    int rc = -EADDRNOTAVAIL;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) {
            *fd_out = fd;
            if (port_out)
                *port_out = bound_port(fd);
            rc = 0;
            break;
        }
        rc = -errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (rc)
        tier_err_set("cannot listen on %s %s: %s", what, hostport, strerror(-rc));
    return rc;
}
