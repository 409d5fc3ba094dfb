/* test_reader.c - libcairn's frame reader (client/src/reader.c): frames
 * split at every byte boundary, a large frame read into a buffer of its own
 * size and followed by small ones, a frame exactly at the size limit, an
 * oversized header refused with bounded memory, and holders keeping
 * payloads by reference while the reader reads on, and a large frame's
 * envelope told before its payload (lc_reader_head) (run under ASan: a byte
 * written into a held buffer or a buffer freed under a holder fails). */
#include "internal.h"

#include "common/err.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- a stream of frames whose contents can be checked ---- */

/* Payload byte j of frame i. */
static uint8_t tr_byte(uint64_t i, size_t j) { return (uint8_t)(i * 131u + j * 7u + (j >> 9)); }

/* Appends frame i (correlation id i, payload_len pattern bytes) to
 * *stream (grown as needed); returns its size. */
static size_t tr_append(uint8_t **stream, size_t *len, uint64_t i, size_t payload_len)
{
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_FETCH;
  env.correlation_id = i;
  size_t hl = frame_header_size(&env);
  uint8_t *s = realloc(*stream, *len + hl + payload_len);
  assert_non_null(s);
  assert_int_equal(frame_encode_header(&env, payload_len, s + *len), 0);
  for (size_t j = 0; j < payload_len; j++) {
    s[*len + hl + j] = tr_byte(i, j);
  }
  *stream = s;
  *len += hl + payload_len;
  return hl + payload_len;
}

/* Checks that f is frame i with payload_len pattern bytes. */
static void tr_check_frame(const struct frame *f, uint64_t i, size_t payload_len)
{
  Cairn__Client__Envelope *env;
  assert_int_equal(frame_unpack_envelope(f, &env), 0);
  assert_int_equal(env->correlation_id, i);
  cairn__client__envelope__free_unpacked(env, NULL);
  assert_int_equal(f->payload_len, payload_len);
  for (size_t j = 0; j < payload_len; j++) {
    if (f->payload[j] != tr_byte(i, j)) {
      fail_msg("frame %llu byte %zu differs", (unsigned long long)i, j);
    }
  }
}

/* A kept payload: a reference to its buffer and what it must still say. */
struct tr_held {
  struct lc_buf *buf;
  struct frame f;
  uint64_t i;
  size_t payload_len;
};

struct tr_run {
  struct lc_reader rd;
  const size_t *sizes; /* payload size of frame i */
  size_t nframes;
  size_t next;         /* frames seen so far */
  bool hold;           /* keep a reference to every frame's buffer */
  struct tr_held *held;
  size_t max_cap;      /* the largest reader buffer seen */
};

/* Hands out every whole frame, checking each (and, for a frame above
 * LC_READ_CHUNK, that it sits alone at the start of a buffer of its size). */
static void tr_drain(struct tr_run *t)
{
  for (;;) {
    struct frame f;
    struct lc_buf *buf;
    int rv = lc_reader_next(&t->rd, &f, &buf);
    if (rv == FRAME_NEED_MORE) {
      return;
    }
    assert_int_equal(rv, FRAME_WHOLE);
    assert_true(t->next < t->nframes);
    assert_non_null(buf);
    tr_check_frame(&f, t->next, t->sizes[t->next]);
    if (f.size > LC_READ_CHUNK) {
      assert_int_equal(buf->cap, f.size);
      assert_ptr_equal(f.envelope - FRAME_HEADER_SIZE, buf->data);
    }
    if (t->hold) {
      t->held[t->next] = (struct tr_held){lc_buf_ref(buf), f, t->next, t->sizes[t->next]};
    }
    t->next++;
  }
}

/* Feeds stream[0..len) in reads of at most step(i) bytes. */
static void tr_feed(struct tr_run *t, const uint8_t *stream, size_t len, uint64_t *rng,
                    size_t max_step)
{
  size_t pos = 0;
  while (pos < len) {
    uint8_t *p;
    size_t room;
    assert_int_equal(lc_reader_room(&t->rd, &p, &room), 0);
    assert_true(room > 0);
    if (t->rd.buf->cap > t->max_cap) {
      t->max_cap = t->rd.buf->cap;
    }
    size_t n = rng != NULL ? 1 + (size_t)(tu_rand(rng) % max_step) : max_step;
    if (n > room) {
      n = room;
    }
    if (n > len - pos) {
      n = len - pos;
    }
    memcpy(p, stream + pos, n);
    lc_reader_commit(&t->rd, n);
    pos += n;
    tr_drain(t);
  }
}

static void tr_check_held(struct tr_run *t)
{
  for (size_t i = 0; i < t->next; i++) {
    tr_check_frame(&t->held[i].f, t->held[i].i, t->held[i].payload_len);
  }
}

static void tr_release_held(struct tr_run *t)
{
  for (size_t i = 0; i < t->next; i++) {
    lc_buf_release(t->held[i].buf);
  }
  free(t->held);
  t->held = NULL;
}

/* A stream of frames of the given payload sizes. */
static uint8_t *tr_stream(const size_t *sizes, size_t n, size_t *len)
{
  uint8_t *s = NULL;
  *len = 0;
  for (size_t i = 0; i < n; i++) {
    tr_append(&s, len, i, sizes[i]);
  }
  return s;
}

/* ---- tests ---- */

static void test_reader_frames_split_at_every_byte_boundary(void **state)
{
  (void)state;
  /* Small frames, an empty payload, and one frame above the read chunk:
   * every pair of split points for the small ones, and one byte per read
   * over all (every byte boundary is a read boundary). */
  const size_t small[] = {0, 1, 37, 300};
  size_t slen;
  uint8_t *s = tr_stream(small, 4, &slen);
  for (size_t a = 0; a <= slen; a++) {
    for (size_t b = a; b <= slen; b++) {
      struct tr_run t = {.sizes = small, .nframes = 4};
      lc_reader_init(&t.rd, LC_READ_CHUNK);
      tr_feed(&t, s, a, NULL, SIZE_MAX);
      tr_feed(&t, s + a, b - a, NULL, SIZE_MAX);
      tr_feed(&t, s + b, slen - b, NULL, SIZE_MAX);
      assert_int_equal(t.next, 4);
      lc_reader_close(&t.rd);
    }
  }
  free(s);

  const size_t mixed[] = {10, LC_READ_CHUNK + 1000, 5, 3 * LC_READ_CHUNK, 0, 70};
  s = tr_stream(mixed, 6, &slen);
  struct tr_run t = {.sizes = mixed, .nframes = 6};
  lc_reader_init(&t.rd, 4 * LC_READ_CHUNK);
  tr_feed(&t, s, slen, NULL, 1);
  assert_int_equal(t.next, 6);
  lc_reader_close(&t.rd);
  free(s);
}

static void test_reader_reads_a_large_frame_into_its_own_buffer_then_small_ones(void **state)
{
  (void)state;
  const size_t sizes[] = {200 * 1024, 1, 2, 3, 1000, 50 * 1024, 4};
  size_t slen;
  uint8_t *s = tr_stream(sizes, 7, &slen);
  struct tr_run t = {.sizes = sizes, .nframes = 7, .hold = true};
  t.held = calloc(7, sizeof *t.held);
  lc_reader_init(&t.rd, 1024 * 1024);
  /* Reads as large as the reader allows, as from a socket with all of it. */
  tr_feed(&t, s, slen, NULL, SIZE_MAX);
  assert_int_equal(t.next, 7);
  /* The large frame alone in its buffer, untouched by the reads after it. */
  assert_int_equal(t.held[0].buf->cap, t.held[0].f.size);
  assert_true(t.held[1].buf != t.held[0].buf);
  tr_check_held(&t);
  /* The reader's own memory: one buffer, as large as the largest frame. */
  assert_true(t.max_cap <= t.held[0].f.size);
  lc_reader_close(&t.rd);
  tr_check_held(&t); /* holders keep their buffers after the reader is gone */
  tr_release_held(&t);
  free(s);
}

static void test_reader_takes_a_frame_exactly_at_the_limit_and_refuses_one_above(void **state)
{
  (void)state;
  const uint32_t max = 100000;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_FETCH;
  env.correlation_id = 0;
  size_t hl = frame_header_size(&env);
  /* L = max: 4 + L bytes in all. */
  size_t sizes[] = {max - (hl - FRAME_LENGTH_FIELD_SIZE)};
  size_t slen;
  uint8_t *s = tr_stream(sizes, 1, &slen);
  assert_int_equal(slen, (size_t)max + FRAME_LENGTH_FIELD_SIZE);
  struct tr_run t = {.sizes = sizes, .nframes = 1};
  lc_reader_init(&t.rd, max);
  tr_feed(&t, s, slen, NULL, 4096);
  assert_int_equal(t.next, 1);
  assert_int_equal(t.max_cap, slen);
  lc_reader_close(&t.rd);
  free(s);

  /* One byte more is refused from its first 4 bytes. */
  sizes[0]++;
  s = tr_stream(sizes, 1, &slen);
  lc_reader_init(&t.rd, max);
  uint8_t *p;
  size_t room;
  assert_int_equal(lc_reader_room(&t.rd, &p, &room), 0);
  memcpy(p, s, FRAME_LENGTH_FIELD_SIZE);
  lc_reader_commit(&t.rd, FRAME_LENGTH_FIELD_SIZE);
  struct frame f;
  struct lc_buf *buf;
  assert_int_equal(lc_reader_next(&t.rd, &f, &buf), CAIRN_ETOOLARGE);
  assert_null(buf);
  lc_reader_close(&t.rd);
  free(s);
}

static void test_reader_refuses_an_oversized_header_with_bounded_memory(void **state)
{
  (void)state;
  const uint32_t lengths[] = {0xFFFFFFFFu, 0x80000000u, 256u * 1024 * 1024 + 1};
  for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
    struct lc_reader rd;
    lc_reader_init(&rd, 256u * 1024 * 1024);
    uint8_t hdr[FRAME_HEADER_SIZE] = {(uint8_t)(lengths[k] >> 24), (uint8_t)(lengths[k] >> 16),
                                      (uint8_t)(lengths[k] >> 8), (uint8_t)lengths[k], 0, 0, 0,
                                      0};
    /* Byte by byte: nothing is decided before L is whole, and nothing
     * beyond the read chunk is ever allocated. */
    int rv = FRAME_NEED_MORE;
    for (size_t i = 0; i < sizeof hdr && rv == FRAME_NEED_MORE; i++) {
      uint8_t *p;
      size_t room;
      assert_int_equal(lc_reader_room(&rd, &p, &room), 0);
      assert_true(rd.buf->cap <= LC_READ_CHUNK);
      p[0] = hdr[i];
      lc_reader_commit(&rd, 1);
      struct frame f;
      struct lc_buf *buf;
      rv = lc_reader_next(&rd, &f, &buf);
      if (i + 1 < FRAME_LENGTH_FIELD_SIZE) {
        assert_int_equal(rv, FRAME_NEED_MORE);
      }
    }
    assert_int_equal(rv, CAIRN_ETOOLARGE);
    assert_true(rd.buf->cap <= LC_READ_CHUNK);
    lc_reader_close(&rd);
  }
}

static void test_reader_holders_keep_payloads_while_the_reader_reads_on(void **state)
{
  (void)state;
  uint64_t seed = tu_seed(__func__);
  uint64_t rng = seed;
  for (int round = 0; round < 20; round++) {
    /* Frame sizes from empty to several read chunks, mostly small. */
    size_t n = 10 + (size_t)(tu_rand(&rng) % 40);
    size_t *sizes = calloc(n, sizeof *sizes);
    assert_non_null(sizes);
    for (size_t i = 0; i < n; i++) {
      uint64_t r = tu_rand(&rng);
      sizes[i] = r % 4 == 0 ? (size_t)(tu_rand(&rng) % (3 * LC_READ_CHUNK))
                            : (size_t)(tu_rand(&rng) % 2000);
    }
    size_t slen;
    uint8_t *s = tr_stream(sizes, n, &slen);
    struct tr_run t = {.sizes = sizes, .nframes = n, .hold = true};
    t.held = calloc(n, sizeof *t.held);
    assert_non_null(t.held);
    lc_reader_init(&t.rd, 4 * LC_READ_CHUNK);
    size_t max_step = 1 + (size_t)(tu_rand(&rng) % (2 * LC_READ_CHUNK));
    tr_feed(&t, s, slen, &rng, max_step);
    assert_int_equal(t.next, n);
    tr_check_held(&t);
    /* Let go of every other one, then check the rest once more. */
    for (size_t i = 0; i < n; i += 2) {
      lc_buf_release(t.held[i].buf);
      t.held[i].buf = NULL;
    }
    for (size_t i = 1; i < n; i += 2) {
      tr_check_frame(&t.held[i].f, t.held[i].i, t.held[i].payload_len);
    }
    lc_reader_close(&t.rd);
    tr_release_held(&t);
    free(sizes);
    free(s);
  }
}

/* A large frame's envelope is told once, as soon as its bytes are there and
 * before the payload is: not before the envelope is whole, not again, not
 * for a frame read whole at once, and the frame itself is still handed out
 * whole afterwards. */
static void test_reader_tells_a_large_frame_envelope_before_its_payload(void **state)
{
  (void)state;
  uint8_t *stream = NULL;
  size_t len = 0;
  size_t big = 3 * LC_READ_CHUNK;
  size_t first = tr_append(&stream, &len, 7, big);
  tr_append(&stream, &len, 8, 10);
  struct lc_reader rd;
  lc_reader_init(&rd, 64u << 20);
  Cairn__Client__Envelope env0 = CAIRN__CLIENT__ENVELOPE__INIT;
  env0.api = CAIRN__CLIENT__API__API_FETCH;
  env0.correlation_id = 7;
  size_t hl = frame_header_size(&env0);
  size_t pos = 0, told = 0, whole = 0;
  while (pos < len) {
    uint8_t *p;
    size_t room;
    assert_int_equal(lc_reader_room(&rd, &p, &room), 0);
    size_t n = room < 1000 ? room : 1000; /* the network's pieces */
    if (n > len - pos) {
      n = len - pos;
    }
    memcpy(p, stream + pos, n);
    lc_reader_commit(&rd, n);
    pos += n;
    struct frame f;
    if (lc_reader_head(&rd, &f)) {
      told++;
      assert_true(pos >= hl && pos < first); /* envelope there, payload not */
      Cairn__Client__Envelope *env;
      assert_int_equal(frame_unpack_envelope(&f, &env), 0);
      assert_int_equal(env->correlation_id, 7);
      cairn__client__envelope__free_unpacked(env, NULL);
    }
    struct lc_buf *buf;
    int rv;
    while ((rv = lc_reader_next(&rd, &f, &buf)) == FRAME_WHOLE) {
      Cairn__Client__Envelope *env;
      assert_int_equal(frame_unpack_envelope(&f, &env), 0);
      uint64_t id = env->correlation_id;
      cairn__client__envelope__free_unpacked(env, NULL);
      tr_check_frame(&f, id, id == 7 ? big : 10);
      assert_int_equal(id, 7 + whole++);
    }
    assert_int_equal(rv, FRAME_NEED_MORE);
  }
  assert_int_equal(whole, 2);
  assert_int_equal(told, 1); /* the large frame once; the small one came whole */
  struct frame f;
  assert_false(lc_reader_head(&rd, &f));
  lc_reader_close(&rd);
  free(stream);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reader_frames_split_at_every_byte_boundary),
      cmocka_unit_test(test_reader_reads_a_large_frame_into_its_own_buffer_then_small_ones),
      cmocka_unit_test(test_reader_takes_a_frame_exactly_at_the_limit_and_refuses_one_above),
      cmocka_unit_test(test_reader_refuses_an_oversized_header_with_bounded_memory),
      cmocka_unit_test(test_reader_holders_keep_payloads_while_the_reader_reads_on),
      cmocka_unit_test(test_reader_tells_a_large_frame_envelope_before_its_payload),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
