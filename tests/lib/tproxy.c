/* tproxy.c - see tproxy.h. */
#include "tproxy.h"

#include "client.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TP_BUF (17u << 20) /* bytes held until a frame is whole (a frame <= 16 MiB + 64 KiB) */

/* Bytes read from one side and not yet forwarded to the other. */
struct tp_dir {
  uint8_t *buf;
  size_t len;
};

struct tp_conn {
  int cfd, ufd;     /* client side, upstream side; -1 when unused */
  struct tp_dir down; /* node to client */
  struct tp_dir up;   /* client to node */
};

/* Which frames of one direction to drop: the next left whose Envelope
 * body case is body_case. */
struct tp_rule {
  atomic_int body_case;
  atomic_int left;
  atomic_int dropped;
};

struct tp {
  int lfd;
  int port;
  struct sockaddr_in up;
  int wake[2]; /* a pipe: tp_stop writes to end the thread */
  pthread_t thread;
  struct tp_rule answers;  /* node to client */
  struct tp_rule requests; /* client to node */
  struct tp_conn conns[TP_MAX_CONNS];
};

static int tp_write_all(int fd, const uint8_t *p, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void tp_conn_close(struct tp_conn *c)
{
  if (c->cfd >= 0) {
    close(c->cfd);
  }
  if (c->ufd >= 0) {
    close(c->ufd);
  }
  free(c->down.buf);
  free(c->up.buf);
  *c = (struct tp_conn){.cfd = -1, .ufd = -1};
}

/* Whether the frame (4-byte length already stripped) is one to drop. */
static bool tp_should_drop(struct tp_rule *r, const uint8_t *f, size_t len)
{
  if (atomic_load(&r->left) <= 0 || len < 4) {
    return false;
  }
  uint32_t elen = (uint32_t)f[0] << 24 | (uint32_t)f[1] << 16 | (uint32_t)f[2] << 8 | f[3];
  if (elen > len - 4) {
    return false;
  }
  Cairn__Client__Envelope *env = cairn__client__envelope__unpack(NULL, elen, f + 4);
  if (env == NULL) {
    return false;
  }
  bool drop = (int)env->body_case == atomic_load(&r->body_case);
  cairn__client__envelope__free_unpacked(env, NULL);
  if (drop) {
    atomic_fetch_sub(&r->left, 1);
    atomic_fetch_add(&r->dropped, 1);
  }
  return drop;
}

/* Forwards to fd (or drops, by rule r) every whole frame in d. Returns 0
 * or -1. */
static int tp_forward_frames(struct tp_rule *r, struct tp_dir *d, int fd)
{
  size_t off = 0;
  while (d->len - off >= 4) {
    const uint8_t *h = d->buf + off;
    size_t flen = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    if (flen > TP_BUF - 4) {
      return -1;
    }
    if (d->len - off < 4 + flen) {
      break;
    }
    if (!tp_should_drop(r, h + 4, flen) && tp_write_all(fd, h, 4 + flen) != 0) {
      return -1;
    }
    off += 4 + flen;
  }
  memmove(d->buf, d->buf + off, d->len - off);
  d->len -= off;
  return 0;
}

static void tp_accept(struct tp *p)
{
  int cfd = accept(p->lfd, NULL, NULL);
  if (cfd < 0) {
    return;
  }
  int ufd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (ufd >= 0) {
    setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (ufd < 0 || connect(ufd, (struct sockaddr *)&p->up, sizeof p->up) != 0) {
    close(cfd);
    if (ufd >= 0) {
      close(ufd);
    }
    return;
  }
  for (int i = 0; i < TP_MAX_CONNS; i++) {
    if (p->conns[i].cfd < 0) {
      p->conns[i] = (struct tp_conn){
          .cfd = cfd, .ufd = ufd, .down.buf = malloc(TP_BUF), .up.buf = malloc(TP_BUF)};
      if (p->conns[i].down.buf == NULL || p->conns[i].up.buf == NULL) {
        tp_conn_close(&p->conns[i]);
      }
      return;
    }
  }
  close(cfd);
  close(ufd);
}

/* Moves what is readable on one side of c, frame by frame; closes c when
 * either side ends. */
static void tp_relay(struct tp *p, struct tp_conn *c, bool from_client)
{
  struct tp_dir *d = from_client ? &c->up : &c->down;
  int from = from_client ? c->cfd : c->ufd;
  int to = from_client ? c->ufd : c->cfd;
  if (d->len == TP_BUF) {
    tp_conn_close(c);
    return;
  }
  ssize_t n = read(from, d->buf + d->len, TP_BUF - d->len);
  if (n <= 0) {
    tp_conn_close(c);
    return;
  }
  d->len += (size_t)n;
  if (tp_forward_frames(from_client ? &p->requests : &p->answers, d, to) != 0) {
    tp_conn_close(c);
  }
}

static void *tp_main(void *arg)
{
  struct tp *p = arg;
  for (;;) {
    struct pollfd fds[2 + 2 * TP_MAX_CONNS];
    int who[2 + 2 * TP_MAX_CONNS]; /* conn index * 2 + (1: upstream side) */
    int n = 0;
    fds[n++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
    for (int i = 0; i < TP_MAX_CONNS; i++) {
      if (p->conns[i].cfd >= 0) {
        who[n] = 2 * i;
        fds[n++] = (struct pollfd){.fd = p->conns[i].cfd, .events = POLLIN};
        who[n] = 2 * i + 1;
        fds[n++] = (struct pollfd){.fd = p->conns[i].ufd, .events = POLLIN};
      }
    }
    if (poll(fds, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (fds[0].revents != 0) {
      break;
    }
    if (fds[1].revents & POLLIN) {
      tp_accept(p);
    }
    for (int k = 2; k < n; k++) {
      struct tp_conn *c = &p->conns[who[k] / 2];
      if (fds[k].revents != 0 && c->cfd >= 0) {
        tp_relay(p, c, who[k] % 2 == 0);
      }
    }
  }
  for (int i = 0; i < TP_MAX_CONNS; i++) {
    tp_conn_close(&p->conns[i]);
  }
  return NULL;
}

struct tp *tp_start(const char *upstream)
{
  struct tp *p = calloc(1, sizeof *p);
  const char *colon = upstream != NULL ? strrchr(upstream, ':') : NULL;
  if (p == NULL || colon == NULL) {
    free(p);
    return NULL;
  }
  for (int i = 0; i < TP_MAX_CONNS; i++) {
    p->conns[i] = (struct tp_conn){.cfd = -1, .ufd = -1};
  }
  p->up.sin_family = AF_INET;
  p->up.sin_port = htons((uint16_t)atoi(colon + 1));
  inet_pton(AF_INET, "127.0.0.1", &p->up.sin_addr);
  struct sockaddr_in a = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t alen = sizeof a;
  p->lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(p->lfd, 16) != 0 || getsockname(p->lfd, (struct sockaddr *)&a, &alen) != 0 ||
      pipe(p->wake) != 0) {
    if (p->lfd >= 0) {
      close(p->lfd);
    }
    free(p);
    return NULL;
  }
  p->port = ntohs(a.sin_port);
  if (pthread_create(&p->thread, NULL, tp_main, p) != 0) {
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
    free(p);
    return NULL;
  }
  return p;
}

int tp_port(const struct tp *p) { return p->port; }

void tp_drop_next(struct tp *p, int body_case, int count)
{
  atomic_store(&p->answers.body_case, body_case);
  atomic_store(&p->answers.left, count);
}

int tp_dropped(struct tp *p) { return atomic_load(&p->answers.dropped); }

void tp_drop_next_request(struct tp *p, int body_case, int count)
{
  atomic_store(&p->requests.body_case, body_case);
  atomic_store(&p->requests.left, count);
}

int tp_requests_dropped(struct tp *p) { return atomic_load(&p->requests.dropped); }

void tp_stop(struct tp *p)
{
  if (p == NULL) {
    return;
  }
  if (write(p->wake[1], "x", 1) != 1) {
    /* the thread then ends at its next poll error; nothing else to do */
  }
  pthread_join(p->thread, NULL);
  close(p->lfd);
  close(p->wake[0]);
  close(p->wake[1]);
  free(p);
}
