/* acked.c - acknowledged batches and the checks over them (acked.h). */
#include "acked.h"

#include "format/batch.h"
#include "storage/plog.h"
#include "storage/store.h"
#include "testutil.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

void ak_init(struct ak_log *l, const char *topic, uint32_t nparts, int records, int value_len)
{
  memset(l, 0, sizeof *l);
  assert_true(nparts <= AK_MAX_PARTS);
  l->topic = topic;
  l->nparts = nparts;
  l->records = records;
  l->value_len = value_len;
  l->next_tag = 1;
}

void ak_produce(struct ak_log *l, struct cd_cluster *c, uint32_t p, int timeout_ms)
{
  size_t len = 0;
  uint64_t tag = l->next_tag++;
  uint8_t *b = tu_make_batch(tag, l->records, l->value_len, 1000 + (int64_t)tag, &len);
  int64_t base = -1;
  int rv = cd_produce(c, l->topic, p, b, len, timeout_ms, &base);
  free(b);
  if (rv != 0) {
    fail_msg("produce to %s-%u: wire code %d", l->topic, p, rv);
  }
  int n = l->nacked[p];
  assert_true(n < AK_MAX_ACKED);
  assert_true(n == 0 || base > l->acked[p][n - 1].offset);
  l->acked[p][n].offset = base;
  l->acked[p][n].tag = tag;
  l->nacked[p]++;
}

/* Batch a of partition p is served at its offset. */
static void ak_check_one(const struct ak_log *l, struct cd_cluster *c, uint32_t p, int a,
                         int timeout_ms)
{
  const struct ak_batch *b = &l->acked[p][a];
  uint8_t *data = NULL;
  size_t len = 0;
  int64_t hw = -1;
  int rv = cd_fetch(c, l->topic, p, b->offset, 1 << 20, timeout_ms, &data, &len, &hw);
  if (rv != 0) {
    fail_msg("fetch %s-%u@%" PRId64 ": wire code %d", l->topic, p, b->offset, rv);
  }
  size_t size = 0;
  int err = 0;
  assert_int_equal(batch_probe(data, len, len, &size, &err), BATCH_PROBE_OK);
  if (tu_check_batch(data, size, b->tag, l->records, l->value_len) != 0) {
    fail_msg("%s-%u@%" PRId64 " does not hold batch %" PRIu64, l->topic, p, b->offset, b->tag);
  }
  free(data);
}

void ak_check_served(const struct ak_log *l, struct cd_cluster *c, int timeout_ms)
{
  for (uint32_t p = 0; p < l->nparts; p++) {
    for (int a = 0; a < l->nacked[p]; a++) {
      ak_check_one(l, c, p, a, timeout_ms);
    }
  }
}

/* Decodes the batches of one read region into out[n..cap); returns the
 * new count. */
static int ak_decode_region(const uint8_t *buf, size_t len, struct ak_held *out, int n, int cap)
{
  for (size_t at = 0; at < len;) {
    struct batch_header h;
    batch_header_decode(buf + at, &h);
    assert_true(n < cap);
    out[n].offset = h.base_offset;
    out[n].tag = (uint64_t)(h.first_timestamp - 1000);
    out[n].crc = h.crc;
    n++;
    at += batch_total_size(h.batch_length);
  }
  return n;
}

int ak_read_log(const char *log_dir, struct ak_held *out, int cap)
{
  struct plog_opts o;
  plog_opts_default(&o);
  struct store *s = NULL;
  char err[256];
  if (plog_open(log_dir, &o, &s, err, sizeof err) != 0) {
    fail_msg("%s: %s", log_dir, err);
  }
  struct store_info si;
  store_info(s, &si);
  int n = 0;
  for (int64_t off = si.start_offset; off < si.next_offset;) {
    struct store_region r;
    memset(&r, 0, sizeof r);
    assert_int_equal(store_read_wait(s, off, 1 << 20, &r), 0);
    assert_true(r.len > 0);
    uint8_t *buf = malloc(r.len);
    assert_non_null(buf);
    if (r.mem != NULL) {
      memcpy(buf, r.mem, r.len);
    } else {
      assert_int_equal(pread(r.fd, buf, r.len, r.pos), (ssize_t)r.len);
    }
    n = ak_decode_region(buf, r.len, out, n, cap);
    off = r.next_offset;
    free(buf);
    store_region_release(&r);
  }
  store_close(s);
  return n;
}

void ak_check_replicas(const struct ak_log *l, uint32_t p, const char *const *dirs, int n)
{
  enum { CAP = AK_MAX_ACKED + 16, MAXN = 5 };
  static struct ak_held v[MAXN][CAP];
  assert_true(n >= 1 && n <= MAXN);
  int got[MAXN] = {0};
  for (int i = 0; i < n; i++) {
    got[i] = ak_read_log(dirs[i], v[i], CAP);
  }
  print_message("%s-%u: %d batches in the first replica\n", l->topic, p, got[0]);
  for (int i = 1; i < n; i++) {
    assert_int_equal(got[i], got[0]);
    assert_memory_equal(v[i], v[0], (size_t)got[0] * sizeof v[0][0]);
  }
  int k = 0;
  for (int a = 0; a < l->nacked[p]; a++) {
    const struct ak_batch *b = &l->acked[p][a];
    while (k < got[0] && v[0][k].offset < b->offset) {
      k++;
    }
    if (k == got[0] || v[0][k].offset != b->offset || v[0][k].tag != b->tag) {
      fail_msg("%s-%u: batch %" PRIu64 " is not at offset %" PRId64, l->topic, p, b->tag,
               b->offset);
    }
    int seen = 0;
    for (int j = 0; j < got[0]; j++) {
      seen += v[0][j].tag == b->tag;
    }
    assert_int_equal(seen, 1);
  }
}

int ak_exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
