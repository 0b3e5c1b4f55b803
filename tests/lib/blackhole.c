/* SPDX-License-Identifier: Apache-2.0 */
/*
 * blackhole.c - see blackhole.h. The server thread polls the listener and a stop pipe; held
 * connections are only closed at stop, so a hanging client waits for its own timeout.
 */
#include "blackhole.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void answer(int fd, const char *resp)
{
    char buf[8192];
    size_t got = 0;
    /* read the request head (bounded: a test request is small) */
    while (got < sizeof(buf) - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) != 1)
            break;
        ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            break;
    }
    size_t len = strlen(resp);
    while (len) {
        ssize_t n = write(fd, resp, len);
        if (n <= 0)
            break;
        resp += n;
        len -= (size_t)n;
    }
    shutdown(fd, SHUT_RDWR);
    close(fd);
}

static void *bh_main(void *arg)
{
    struct blackhole *bh = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = bh->lfd, .events = POLLIN},
                              {.fd = bh->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept(bh->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&bh->accepted, 1);
        if (atomic_load(&bh->answering))
            answer(fd, bh->response);
        else if (bh->nheld < BH_MAX_HELD)
            bh->held[bh->nheld++] = fd;
        else
            close(fd);
    }
    for (int i = 0; i < bh->nheld; i++)
        close(bh->held[i]);
    bh->nheld = 0;
    return NULL;
}

int bh_start(struct blackhole *bh)
{
    memset(bh, 0, sizeof(*bh));
    atomic_init(&bh->answering, 0);
    atomic_init(&bh->accepted, 0);
    if (pipe(bh->stop_pipe) != 0)
        return -errno;
    bh->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (bh->lfd < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (bind(bh->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(bh->lfd, 128) != 0 ||
        getsockname(bh->lfd, (struct sockaddr *)&a, &len) != 0)
        return -errno;
    bh->port = ntohs(a.sin_port);
    int rc = pthread_create(&bh->th, NULL, bh_main, bh);
    return rc ? -rc : 0;
}

void bh_answer(struct blackhole *bh, const char *response)
{
    bh->response = response;
    atomic_store(&bh->answering, 1);
}

void bh_hang(struct blackhole *bh)
{
    atomic_store(&bh->answering, 0);
}

void bh_stop(struct blackhole *bh)
{
    (void)!write(bh->stop_pipe[1], "x", 1);
    pthread_join(bh->th, NULL);
    close(bh->lfd);
    close(bh->stop_pipe[0]);
    close(bh->stop_pipe[1]);
}
