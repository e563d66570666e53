/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.c - the sd_notify protocol, client side: NOTIFY_SOCKET holds a path
 * ("/run/systemd/notify") or an abstract socket name ("@..."); the state is one
 * datagram of newline-separated KEY=VALUE pairs. Must not: keep a socket open,
 * unset the variable (a restarted child would need it), or log.
 */
#include "util/notify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int notify_send(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || path[0] == '\0')
        return 0;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof addr.sun_path)
        return -1;
    memcpy(addr.sun_path, path, len);
    if (path[0] == '@')
        addr.sun_path[0] = '\0'; /* abstract namespace: no terminating NUL counts */
    socklen_t addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t sent =
        sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr, addr_len);
    close(fd);
    return sent == (ssize_t)strlen(state) ? 1 : -1;
}
