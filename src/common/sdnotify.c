/* sdnotify.c - sd_notify(3)'s datagram protocol, without libsystemd
 * (sdnotify.h says why). */
#include "common/sdnotify.h"

#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Fills s->addr from $NOTIFY_SOCKET's value. Returns 0 or CAIRN_EINVAL. */
static int sdnotify_parse_addr(struct sdnotify *s, const char *name)
{
  size_t len = strlen(name);
  memset(&s->addr, 0, sizeof s->addr);
  s->addr.sun_family = AF_UNIX;
  if ((name[0] != '/' && name[0] != '@') || len < 2) {
    snprintf(s->errmsg, sizeof s->errmsg,
             "NOTIFY_SOCKET=%s: neither a path nor an abstract '@name'", name);
    return CAIRN_EINVAL;
  }
  if (len >= sizeof s->addr.sun_path) {
    snprintf(s->errmsg, sizeof s->errmsg, "NOTIFY_SOCKET: %zu bytes, the limit is %zu", len,
             sizeof s->addr.sun_path - 1);
    return CAIRN_EINVAL;
  }
  memcpy(s->addr.sun_path, name, len);
  if (name[0] == '@') {
    /* The abstract namespace: a leading NUL, and the length says where the
     * name ends (no terminator). */
    s->addr.sun_path[0] = '\0';
    s->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
  } else {
    s->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
  }
  return 0;
}

int sdnotify_open(struct sdnotify *s)
{
  s->fd = -1;
  s->errmsg[0] = '\0';
  const char *name = getenv("NOTIFY_SOCKET");
  if (name == NULL || name[0] == '\0') {
    return 0;
  }
  int rv = sdnotify_parse_addr(s, name);
  if (rv != 0) {
    return rv;
  }
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    rv = -errno;
    snprintf(s->errmsg, sizeof s->errmsg, "NOTIFY_SOCKET=%s: socket: %s", name, strerror(errno));
    return rv;
  }
  s->fd = fd;
  return 0;
}

int sdnotify_send(const struct sdnotify *s, const char *msg)
{
  if (s->fd < 0) {
    return 0;
  }
  ssize_t n;
  do {
    n = sendto(s->fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&s->addr,
               s->addrlen);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  }
  return 0;
}

uint64_t sdnotify_watchdog_usec(void)
{
  const char *usec = getenv("WATCHDOG_USEC");
  if (usec == NULL || usec[0] < '0' || usec[0] > '9') {
    return 0;
  }
  /* WATCHDOG_PID names the process the interval is for: a child started
   * by the service's main process must not ping for it. */
  const char *pid = getenv("WATCHDOG_PID");
  if (pid != NULL && pid[0] != '\0' && strtoll(pid, NULL, 10) != (long long)getpid()) {
    return 0;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(usec, &end, 10);
  if (errno != 0 || *end != '\0') {
    return 0;
  }
  return (uint64_t)v;
}

void sdnotify_close(struct sdnotify *s)
{
  if (s->fd >= 0) {
    close(s->fd);
    s->fd = -1;
  }
}
