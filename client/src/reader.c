/* reader.c - a connection's incoming bytes cut into frames, with as few
 * copies as the frames allow: read buffers are counted references, so a
 * payload can be kept by whoever wants it (the consumer's chunks) without a
 * copy; a frame too large for the read chunk is read straight into a
 * buffer of its own size; small frames are consumed by offset, and the
 * unread tail (at most one partial frame) moves only when the buffer's end
 * is reached. No libuv here: tests feed it byte by byte.
 *
 * Invariants (lc_reader_check in debug builds):
 *   start <= end <= buf->cap; bytes before start belong to frames handed
 *   out, and may still be referenced by their holders, so they are never
 *   written again: the reader appends at end, and moves or drops the
 *   unread bytes only while it holds the buffer's only reference.
 *   A buffer never grows beyond max(LC_READ_CHUNK, 4 + max_frame_bytes). */
#include "internal.h"

#include "common/err.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* After a frame that had its own buffer, the next read asks for this much
 * only: its successor's header, without pulling a large payload into the
 * small buffer that would then be copied out again. */
#define LC_READ_HEAD 4096

/* Below this much room at the end, the small buffer is compacted first. */
#define LC_READ_MIN_ROOM 16384

struct lc_buf *lc_buf_new(size_t cap)
{
  struct lc_buf *b = malloc(sizeof *b + cap);
  if (b == NULL) {
    return NULL;
  }
  b->refs = 1;
  b->cap = cap;
  return b;
}

struct lc_buf *lc_buf_ref(struct lc_buf *b)
{
  b->refs++;
  return b;
}

void lc_buf_release(struct lc_buf *b)
{
  if (b != NULL && --b->refs == 0) {
    free(b);
  }
}

void lc_reader_init(struct lc_reader *rd, uint32_t max_frame_bytes)
{
  memset(rd, 0, sizeof *rd);
  rd->max_frame_bytes = max_frame_bytes;
}

void lc_reader_close(struct lc_reader *rd)
{
  lc_buf_release(rd->buf);
  rd->buf = NULL;
  rd->start = rd->end = rd->want = 0;
}

static void lc_reader_check(const struct lc_reader *rd)
{
#ifndef NDEBUG
  if (rd->buf == NULL) {
    assert(rd->start == 0 && rd->end == 0);
    return;
  }
  assert(rd->buf->refs >= 1);
  assert(rd->start <= rd->end && rd->end <= rd->buf->cap);
  size_t limit = (size_t)rd->max_frame_bytes + FRAME_LENGTH_FIELD_SIZE;
  assert(rd->buf->cap <= (limit > LC_READ_CHUNK ? limit : LC_READ_CHUNK));
#else
  (void)rd;
#endif
}

/* Moves the unread bytes to the start of a buffer of cap bytes: the current
 * one when the reader holds it alone and it is large enough, else a new
 * one. Returns 0 or CAIRN_ENOMEM (rd unchanged). */
static int lc_reader_move(struct lc_reader *rd, size_t cap)
{
  size_t avail = rd->end - rd->start;
  if (rd->buf != NULL && rd->buf->refs == 1 && rd->buf->cap >= cap) {
    memmove(rd->buf->data, rd->buf->data + rd->start, avail);
  } else {
    struct lc_buf *nb = lc_buf_new(cap);
    if (nb == NULL) {
      return CAIRN_ENOMEM;
    }
    if (avail > 0) {
      memcpy(nb->data, rd->buf->data + rd->start, avail);
    }
    lc_buf_release(rd->buf);
    rd->buf = nb;
  }
  rd->start = 0;
  rd->end = avail;
  return 0;
}

int lc_reader_room(struct lc_reader *rd, uint8_t **p, size_t *len)
{
  lc_reader_check(rd);
  size_t avail = rd->end - rd->start;
  if (rd->buf != NULL && avail == 0 && rd->buf->refs == 1) {
    rd->start = rd->end = 0; /* nobody else looks at it: start over */
  }
  if (rd->want > LC_READ_CHUNK) {
    /* A large frame: in a buffer where it fits whole (its own, made to its
     * size), and read no further than its end, so that the buffer holds
     * this frame only and can be handed on as it is. */
    if (rd->buf == NULL || rd->buf->cap - rd->start < rd->want) {
      int rv = lc_reader_move(rd, rd->want);
      if (rv != 0) {
        return rv;
      }
    }
    *p = rd->buf->data + rd->end;
    *len = rd->start + rd->want - rd->end;
    return 0;
  }
  size_t need = rd->want > avail ? rd->want - avail : 0;
  size_t min_room = need > LC_READ_MIN_ROOM ? need : LC_READ_MIN_ROOM;
  if (rd->buf == NULL || rd->buf->cap - rd->end < min_room) {
    int rv = lc_reader_move(rd, LC_READ_CHUNK);
    if (rv != 0) {
      return rv;
    }
  }
  *p = rd->buf->data + rd->end;
  *len = rd->buf->cap - rd->end;
  if (rd->after_large && rd->want == 0 && *len > LC_READ_HEAD) {
    *len = LC_READ_HEAD;
  }
  return 0;
}

void lc_reader_commit(struct lc_reader *rd, size_t n)
{
  assert(rd->buf != NULL || n == 0);
  assert(n <= (rd->buf != NULL ? rd->buf->cap - rd->end : 0));
  rd->end += n;
}

int lc_reader_next(struct lc_reader *rd, struct frame *f, struct lc_buf **buf)
{
  lc_reader_check(rd);
  *buf = NULL;
  if (rd->buf == NULL) {
    memset(f, 0, sizeof *f);
    rd->want = 0;
    return FRAME_NEED_MORE;
  }
  int rv = frame_decode(rd->buf->data + rd->start, rd->end - rd->start, rd->max_frame_bytes, f);
  if (rv == FRAME_NEED_MORE) {
    /* The whole frame's size once L is known; until then only the header's. */
    rd->want = f->length != 0 ? FRAME_LENGTH_FIELD_SIZE + (size_t)f->length : 0;
    return rv;
  }
  rd->want = 0;
  if (rv != FRAME_WHOLE) {
    return rv;
  }
  rd->start += f->size;
  rd->after_large = f->size > LC_READ_CHUNK;
  rd->head_told = false;
  *buf = rd->buf;
  return rv;
}

static uint32_t lc_reader_be32(const uint8_t *p)
{
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

bool lc_reader_head(struct lc_reader *rd, struct frame *f)
{
  memset(f, 0, sizeof *f);
  if (rd->buf == NULL || rd->head_told) {
    return false;
  }
  size_t avail = rd->end - rd->start;
  if (avail < FRAME_HEADER_SIZE) {
    return false;
  }
  const uint8_t *p = rd->buf->data + rd->start;
  uint32_t length = lc_reader_be32(p);
  uint32_t elen = lc_reader_be32(p + FRAME_LENGTH_FIELD_SIZE);
  if (length < FRAME_HEADER_SIZE - FRAME_LENGTH_FIELD_SIZE || length > rd->max_frame_bytes ||
      elen > length - (FRAME_HEADER_SIZE - FRAME_LENGTH_FIELD_SIZE)) {
    return false; /* lc_reader_next reports it */
  }
  if (avail < FRAME_HEADER_SIZE + (size_t)elen ||
      avail >= FRAME_LENGTH_FIELD_SIZE + (size_t)length) {
    return false; /* the envelope is not all there, or the frame is whole */
  }
  rd->head_told = true;
  f->length = length;
  f->envelope = p + FRAME_HEADER_SIZE;
  f->envelope_len = elen;
  return true;
}
