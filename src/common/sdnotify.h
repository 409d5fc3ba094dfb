/* sdnotify.h - the service manager notification protocol of sd_notify(3):
 * one AF_UNIX datagram of "KEY=VALUE" lines sent to the socket named by
 * $NOTIFY_SOCKET (a path, or '@' for a name in the abstract namespace).
 *
 * Why not libsystemd: the protocol is a documented stable interface of a
 * few lines, and linking libsystemd would add it (and liblzma, libgcrypt,
 * libcap through it) to every cairnd, to the container image and to the
 * sandboxed unit, where containers and plain runs never set NOTIFY_SOCKET.
 *
 * Context: any thread; the object is not shared between threads. */
#ifndef CAIRN_SDNOTIFY_H
#define CAIRN_SDNOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#define SDNOTIFY_ERRMSG_SIZE 256

struct sdnotify {
  int fd; /* -1 when there is no service manager to tell */
  struct sockaddr_un addr;
  socklen_t addrlen;
  char errmsg[SDNOTIFY_ERRMSG_SIZE];
};

/* Reads $NOTIFY_SOCKET and opens a non-blocking datagram socket to it.
 * Returns 0 with s->fd >= 0, or 0 with s->fd == -1 when the variable is
 * not set (nothing to tell: sdnotify_send is then a no-op); CAIRN_EINVAL
 * (a name too long, not a path nor '@NAME') or -errno, with s->errmsg
 * filled and s->fd == -1. Ownership: s is the caller's; release with
 * sdnotify_close. */
__attribute__((warn_unused_result)) int sdnotify_open(struct sdnotify *s);

/* Sends msg ("READY=1", "WATCHDOG=1\nSTATUS=...") as one datagram. Never
 * blocks. Returns 0 (also when s->fd == -1), -EAGAIN when the manager's
 * queue is full (try again later), or -errno. Borrows msg. */
__attribute__((warn_unused_result)) int sdnotify_send(const struct sdnotify *s, const char *msg);

/* The watchdog interval the manager asked for ($WATCHDOG_USEC, for this
 * process when $WATCHDOG_PID is set), in microseconds; 0 when none. */
uint64_t sdnotify_watchdog_usec(void);

/* Closes the socket. Safe on a closed or never-opened object (fd -1). */
void sdnotify_close(struct sdnotify *s);

#endif
