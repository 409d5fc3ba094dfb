/* wire_client.c - a blocking client of the client port for tests and tools. */
#include "wire_client.h"

#include "common/err.h"
#include "net/frame.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WC_BUF_INITIAL (64u * 1024)

static int64_t wc_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int wc_connect(struct wc *w, const char *address, int timeout_ms)
{
  memset(w, 0, sizeof *w);
  w->fd = -1;
  w->max_frame_bytes = FRAME_MAX_BYTES_LIMIT;
  const char *colon = strrchr(address, ':');
  if (colon == NULL) {
    snprintf(w->errmsg, sizeof w->errmsg, "address '%s': not host:port", address);
    return CAIRN_EINVAL;
  }
  char host[128];
  size_t hlen = (size_t)(colon - address);
  const char *h = address;
  if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
    h++;
    hlen -= 2;
  }
  if (hlen >= sizeof host) {
    snprintf(w->errmsg, sizeof w->errmsg, "address '%s': host too long", address);
    return CAIRN_EINVAL;
  }
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai;
  int gr = getaddrinfo(host, colon + 1, &hints, &ai);
  if (gr != 0) {
    snprintf(w->errmsg, sizeof w->errmsg, "address '%s': %s", address, gai_strerror(gr));
    return CAIRN_EINVAL;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int rv = 0;
  if (fd < 0) {
    rv = -errno;
  } else if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      rv = -errno;
    } else {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      int pr = poll(&pfd, 1, timeout_ms);
      if (pr == 0) {
        rv = -ETIMEDOUT;
      } else if (pr < 0) {
        rv = -errno;
      } else {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        rv = -soerr;
      }
    }
  }
  freeaddrinfo(ai);
  if (rv != 0) {
    snprintf(w->errmsg, sizeof w->errmsg, "connect %s: %s", address, strerror(-rv));
    if (fd >= 0) {
      close(fd);
    }
    return rv;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  w->buf = malloc(WC_BUF_INITIAL);
  if (w->buf == NULL) {
    close(fd);
    return CAIRN_ENOMEM;
  }
  w->cap = WC_BUF_INITIAL;
  w->fd = fd;
  return 0;
}

/* Writes all of iov, waiting for room as needed (the socket is non-blocking
 * so that reads can time out). */
static int wc_writev_all(struct wc *w, struct iovec *iov, int n)
{
  while (n > 0) {
    ssize_t r = writev(w->fd, iov, n);
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        struct pollfd pfd = {.fd = w->fd, .events = POLLOUT};
        if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
          return -errno;
        }
        continue;
      }
      return -errno;
    }
    size_t done = (size_t)r;
    while (n > 0 && done >= iov[0].iov_len) {
      done -= iov[0].iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov[0].iov_base = (uint8_t *)iov[0].iov_base + done;
      iov[0].iov_len -= done;
    }
  }
  return 0;
}

int wc_send(struct wc *w, const Cairn__Client__Envelope *env, const struct iovec *payload,
            int npayload)
{
  uint8_t *hdr;
  size_t hdr_len;
  int rv = frame_encode(env, payload, npayload, &hdr, &hdr_len);
  if (rv != 0) {
    return rv;
  }
  struct iovec stack[16];
  struct iovec *iov = npayload + 1 <= 16 ? stack : malloc((size_t)(npayload + 1) * sizeof *iov);
  if (iov == NULL) {
    free(hdr);
    return CAIRN_ENOMEM;
  }
  iov[0].iov_base = hdr;
  iov[0].iov_len = hdr_len;
  for (int i = 0; i < npayload; i++) {
    iov[i + 1] = payload[i];
  }
  rv = wc_writev_all(w, iov, npayload + 1);
  if (iov != stack) {
    free(iov);
  }
  free(hdr);
  return rv;
}

int wc_send_raw(struct wc *w, const void *p, size_t len)
{
  struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
  return wc_writev_all(w, &iov, 1);
}

/* Reads what is available into the buffer, waiting until the deadline.
 * Returns 0 when bytes arrived, CAIRN_ECLOSED on EOF, -ETIMEDOUT, or a
 * negative errno. */
static int wc_fill(struct wc *w, int64_t deadline)
{
  if (w->end == w->cap) {
    if (w->start > 0) {
      memmove(w->buf, w->buf + w->start, w->end - w->start);
      w->end -= w->start;
      w->start = 0;
    } else {
      uint8_t *p = realloc(w->buf, w->cap * 2);
      if (p == NULL) {
        return CAIRN_ENOMEM;
      }
      w->buf = p;
      w->cap *= 2;
    }
  }
  for (;;) {
    ssize_t r = read(w->fd, w->buf + w->end, w->cap - w->end);
    if (r > 0) {
      w->end += (size_t)r;
      return 0;
    }
    if (r == 0) {
      return CAIRN_ECLOSED;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno != EAGAIN) {
      return -errno;
    }
    int64_t left = deadline - wc_now_ms();
    if (left <= 0) {
      return -ETIMEDOUT;
    }
    struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
    if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR) {
      return -errno;
    }
  }
}

int wc_recv(struct wc *w, int timeout_ms, Cairn__Client__Envelope **env, uint8_t **payload,
            size_t *payload_len)
{
  int64_t deadline = wc_now_ms() + timeout_ms;
  for (;;) {
    struct frame f;
    int rv = frame_decode(w->buf + w->start, w->end - w->start, w->max_frame_bytes, &f);
    if (rv == FRAME_WHOLE) {
      rv = frame_unpack_envelope(&f, env);
      if (rv != 0) {
        return rv;
      }
      if (payload != NULL) {
        *payload = NULL;
        *payload_len = f.payload_len;
        if (f.payload_len > 0) {
          *payload = malloc(f.payload_len);
          if (*payload == NULL) {
            cairn__client__envelope__free_unpacked(*env, NULL);
            return CAIRN_ENOMEM;
          }
          memcpy(*payload, f.payload, f.payload_len);
        }
      }
      w->start += f.size;
      if (w->start == w->end) {
        w->start = w->end = 0;
      }
      return 0;
    }
    if (rv < 0) {
      return rv;
    }
    /* Room for the whole frame, so one fill per read suffices. */
    size_t want = w->end - w->start + f.need;
    if (want > w->cap - w->start) {
      memmove(w->buf, w->buf + w->start, w->end - w->start);
      w->end -= w->start;
      w->start = 0;
      if (want > w->cap) {
        uint8_t *p = realloc(w->buf, want);
        if (p == NULL) {
          return CAIRN_ENOMEM;
        }
        w->buf = p;
        w->cap = want;
      }
    }
    rv = wc_fill(w, deadline);
    if (rv != 0) {
      return rv;
    }
  }
}

int wc_wait_closed(struct wc *w, int timeout_ms)
{
  int64_t deadline = wc_now_ms() + timeout_ms;
  for (;;) {
    w->start = w->end = 0;
    int rv = wc_fill(w, deadline);
    if (rv == CAIRN_ECLOSED) {
      return 0;
    }
    if (rv != 0) {
      return rv;
    }
  }
}

int wc_call(const char *address, int connect_ms, const Cairn__Client__Envelope *env,
            const void *payload, size_t len, int timeout_ms, Cairn__Client__Envelope **resp,
            uint8_t **payload_out, size_t *payload_len_out, bool *sent)
{
  if (sent != NULL) {
    *sent = false;
  }
  struct wc w;
  int rv = wc_connect(&w, address, connect_ms);
  if (rv != 0) {
    return rv;
  }
  struct iovec iov = {.iov_base = (void *)payload, .iov_len = len};
  rv = wc_send(&w, env, &iov, len > 0 ? 1 : 0);
  if (sent != NULL) {
    *sent = true;
  }
  if (rv == 0) {
    uint8_t *p = NULL;
    size_t plen = 0;
    rv = wc_recv(&w, timeout_ms, resp, &p, &plen);
    if (rv == 0 && payload_out != NULL) {
      *payload_out = p;
      *payload_len_out = plen;
    } else {
      free(p);
    }
  }
  wc_close(&w);
  return rv;
}

void wc_close(struct wc *w)
{
  if (w->fd >= 0) {
    close(w->fd);
    w->fd = -1;
  }
  free(w->buf);
  w->buf = NULL;
}

void wc_produce_init(struct wc_produce *p, const char *topic, uint32_t partition,
                     size_t batch_len, uint32_t timeout_ms)
{
  p->batch_len = (uint32_t)batch_len;
  cairn__client__produce_partition__init(&p->part);
  p->part.topic = (char *)topic;
  p->part.partition = partition;
  p->part.n_batch_lengths = 1;
  p->part.batch_lengths = &p->batch_len;
  p->parts[0] = &p->part;
  cairn__client__produce_request__init(&p->req);
  p->req.timeout_ms = timeout_ms;
  p->req.n_partitions = 1;
  p->req.partitions = p->parts;
  cairn__client__envelope__init(&p->env);
  p->env.api = CAIRN__CLIENT__API__API_PRODUCE;
  p->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_REQ;
  p->env.produce_req = &p->req;
}
