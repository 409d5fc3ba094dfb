/* probe.c - a quick look at a bootstrap address (see probe.h): a plain
 * socket with poll() deadlines, independent of libcairn. */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROBE_ADDR_MAX 300

/* Splits "HOST:PORT" or "[V6]:PORT" at its last colon into host and
 * port. Returns 0 or -1. */
static int probe_split(const char *addr, size_t len, char *host, size_t hcap, char *port,
                       size_t pcap)
{
  const char *colon = NULL;
  for (size_t i = 0; i < len; i++) {
    colon = addr[i] == ':' ? addr + i : colon;
  }
  if (colon == NULL) {
    return -1;
  }
  const char *h = addr;
  size_t hl = (size_t)(colon - addr);
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
    h++;
    hl -= 2;
  }
  size_t pl = len - (size_t)(colon + 1 - addr);
  if (hl == 0 || hl >= hcap || pl == 0 || pl >= pcap) {
    return -1;
  }
  memcpy(host, h, hl);
  host[hl] = '\0';
  memcpy(port, colon + 1, pl);
  port[pl] = '\0';
  return 0;
}

/* Connects to addr[0..len) within timeout_ms. Returns the connected
 * socket, or -1 with *err: the connect's errno (ECONNREFUSED, ETIMEDOUT)
 * or EINVAL when it does not resolve. */
static int probe_connect(const char *addr, size_t len, int timeout_ms, int *err)
{
  char host[PROBE_ADDR_MAX], port[16];
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  *err = EINVAL;
  if (probe_split(addr, len, host, sizeof host, port, sizeof port) != 0 ||
      getaddrinfo(host, port, &hints, &res) != 0) {
    return -1;
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    freeaddrinfo(res);
    return -1;
  }
  int rv = connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rv != 0 && errno == EINPROGRESS) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int so = 0;
    socklen_t sl = sizeof so;
    if (poll(&p, 1, timeout_ms) != 1) {
      so = ETIMEDOUT;
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) != 0) {
      so = errno;
    }
    rv = so == 0 ? 0 : -1;
    errno = so;
  }
  if (rv != 0) {
    *err = errno;
    close(fd);
    return -1;
  }
  return fd;
}

bool probe_is_http(const char *addr, int timeout_ms)
{
  int err = 0;
  int fd = probe_connect(addr, strlen(addr), timeout_ms, &err);
  if (fd < 0) {
    return false;
  }
  static const char req[] = "HEAD / HTTP/1.0\r\n\r\n";
  char buf[8] = "";
  bool http = false;
  if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1)) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) == 1) {
      ssize_t n = recv(fd, buf, 5, MSG_WAITALL);
      http = n == 5 && memcmp(buf, "HTTP/", 5) == 0;
    }
  }
  close(fd);
  return http;
}
