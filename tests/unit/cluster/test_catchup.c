/* test_catchup.c - a replica's catch-up behind its snapshot (catchup.h)
 * against a peer that has already sent every answer when the first request
 * arrives: the answers are read in one read loop, so each next request is
 * written before libuv has run the previous one's write callback. Each
 * request must go out on its own write request; writing one uv_write_t
 * again while it waited for its callback corrupted libuv's write queues and
 * crashed cairnd (soaks 12 and 13, SIGSEGV in libuv's write callbacks).
 * The peer is a plain socket in a thread: it reads the preamble and the
 * requests, and checks each asks for the next offset. */
#include "cluster/catchup.h"
#include "cluster/fetch_proto.h"
#include "cluster/transport.h"
#include "common/err.h"
#include "format/batch.h"
#include "format/crc32c.h"
#include "storage/memlog.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#define ENTRIES 24 /* one batch each, offsets 0..ENTRIES-1, Raft indexes 1..ENTRIES */

struct peer {
  int lfd;
  int port;
  pthread_t th;
  int requests;     /* requests read */
  int out_of_order; /* requests not asking for the next offset */
};

static int read_full(int fd, uint8_t *buf, size_t len)
{
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, buf + got, len - got);
    if (n <= 0) {
      return -1;
    }
    got += (size_t)n;
  }
  return 0;
}

/* Every answer, back to back: the one for offset k holds batch k. */
static uint8_t *peer_answers(size_t *len)
{
  size_t cap = 0, n = 0;
  uint8_t *out = NULL;
  for (int k = 0; k < ENTRIES; k++) {
    size_t blen;
    uint8_t *b = tu_make_batch((uint64_t)k, 1, 40, 1000 + k, &blen);
    batch_stamp(b, k, (uint64_t)k + 1, BATCH_FLAG_ENTRY_END);
    if (n + FETCH_RESPONSE_SIZE + blen > cap) {
      cap = (n + FETCH_RESPONSE_SIZE + blen) * 2;
      out = realloc(out, cap);
      assert_non_null(out);
    }
    struct fetch_response r = {.log_start = 0,
                               .log_next = ENTRIES,
                               .nbytes = (uint32_t)blen,
                               .payload_crc = crc32c(b, blen)};
    fetch_response_encode(&r, out + n);
    memcpy(out + n + FETCH_RESPONSE_SIZE, b, blen);
    n += FETCH_RESPONSE_SIZE + blen;
    free(b);
  }
  *len = n;
  return out;
}

static void *peer_main(void *arg)
{
  struct peer *p = arg;
  int fd = accept(p->lfd, NULL, NULL);
  if (fd < 0) {
    return NULL;
  }
  uint8_t pre[TRANSPORT_PREAMBLE_MAX];
  size_t got = 0;
  uint16_t kind;
  uint64_t group, sender;
  char address[TRANSPORT_ADDRESS_MAX + 1];
  int rv = 0;
  while (rv == 0 && got < sizeof pre && read(fd, pre + got, 1) == 1) {
    got++;
    rv = transport_preamble_decode(pre, got, &kind, &group, &sender, address);
  }
  uint8_t q[FETCH_REQUEST_SIZE];
  size_t alen;
  uint8_t *answers = peer_answers(&alen);
  for (int k = 0; rv > 0 && read_full(fd, q, sizeof q) == 0; k++) {
    p->requests++;
    int64_t offset;
    memcpy(&offset, q + 8, sizeof offset); /* little-endian, as the host */
    if (offset != k) {
      p->out_of_order++;
    }
    if (k == 0 && write(fd, answers, alen) != (ssize_t)alen) {
      break;
    }
  }
  free(answers);
  close(fd);
  return NULL;
}

static void peer_start(struct peer *p)
{
  memset(p, 0, sizeof *p);
  p->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(p->lfd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(p->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(p->lfd, 4), 0);
  socklen_t salen = sizeof sa;
  assert_int_equal(getsockname(p->lfd, (struct sockaddr *)&sa, &salen), 0);
  p->port = ntohs(sa.sin_port);
  assert_int_equal(pthread_create(&p->th, NULL, peer_main, p), 0);
}

static int applied;
static int apply_entry(void *data, const uint8_t *entry, size_t len, uint64_t index)
{
  (void)data;
  (void)entry;
  (void)len;
  (void)index;
  applied++;
  return 0;
}

static void on_deadline(uv_timer_t *t) { uv_stop(t->loop); }
static void on_poll(uv_timer_t *t)
{
  struct catchup *cu = t->data;
  if (!catchup_active(cu)) {
    uv_stop(t->loop);
  }
}
static bool cu_closed, tr_closed;
static void on_cu_closed(struct catchup *cu)
{
  (void)cu;
  cu_closed = true;
}
static void on_tr_closed(struct transport *tr)
{
  (void)tr;
  tr_closed = true;
}
static void close_timer(uv_handle_t *h) { (void)h; }

static unsigned picks;
static const char *pick_peer(void *data, unsigned n)
{
  assert_int_equal(n, picks); /* counts up, one per dial */
  picks++;
  return data;
}

static unsigned done_calls;
static void on_done(void *data, struct catchup *cu)
{
  (void)data;
  assert_false(catchup_active(cu)); /* OFF, the held entries applied */
  done_calls++;
}

static void test_catchup_answers_already_buffered(void **state)
{
  (void)state;
  struct peer p;
  peer_start(&p);
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct transport tr;
  assert_int_equal(transport_init(&tr, &loop, "127.0.0.1:0"), 0);
  struct store *st;
  struct memlog_opts mo = {0};
  assert_int_equal(memlog_new(&mo, &st), 0);
  char peer_address[64];
  snprintf(peer_address, sizeof peer_address, "127.0.0.1:%d", p.port);
  struct catchup cu;
  const struct catchup_owner owner = {
      .pick = pick_peer, .apply = apply_entry, .done = on_done, .data = peer_address};
  catchup_init(&cu, &loop, &tr, st, 7, 1, "127.0.0.1:1", &owner);
  catchup_start(&cu, ENTRIES, ENTRIES);
  uv_timer_t deadline, poll;
  uv_timer_init(&loop, &deadline);
  uv_timer_init(&loop, &poll);
  poll.data = &cu;
  uv_timer_start(&deadline, on_deadline, 10000, 0);
  uv_timer_start(&poll, on_poll, 5, 5);
  uv_run(&loop, UV_RUN_DEFAULT);

  struct store_info info;
  store_info(st, &info);
  assert_false(catchup_active(&cu));
  assert_int_equal(info.next_offset, ENTRIES);
  assert_int_equal(info.last_index, ENTRIES);
  assert_int_equal(cu.fetched_bytes > 0, 1);
  assert_int_equal(done_calls, 1);
  assert_true(picks >= 1);

  catchup_close(&cu, on_cu_closed);
  uv_close((uv_handle_t *)&deadline, close_timer);
  uv_close((uv_handle_t *)&poll, close_timer);
  while (!cu_closed) {
    uv_run(&loop, UV_RUN_ONCE);
  }
  transport_close(&tr, on_tr_closed);
  while (!tr_closed) {
    uv_run(&loop, UV_RUN_ONCE);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  pthread_join(p.th, NULL);
  close(p.lfd);
  /* one request per entry, each for the offset after the last */
  assert_int_equal(p.requests, ENTRIES);
  assert_int_equal(p.out_of_order, 0);
  store_close(st);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_catchup_answers_already_buffered),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
