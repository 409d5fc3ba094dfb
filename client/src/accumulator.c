/* accumulator.c - a partition's batches: append records to the open
 * tail, decide when it is ready, seal it (producer fields, sequence,
 * compression), pop sent batches in order. */
#include "accumulator.h"

#include "common/err.h"
#include "format/codec.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <stdlib.h>
#include <string.h>

void lc_acc_init(struct lc_acc *a) { memset(a, 0, sizeof *a); }

void lc_acc_batch_free(struct lc_batch *b)
{
  if (b == NULL) {
    return;
  }
  if (b->open) {
    batch_builder_close(&b->bb);
  }
  free(b->bytes);
  free(b->msgs);
  free(b);
}

void lc_acc_close(struct lc_acc *a)
{
  struct lc_batch *b;
  while ((b = lc_acc_pop(a)) != NULL) {
    lc_acc_batch_free(b);
  }
}

static struct lc_batch *lc_acc_new_batch(size_t max_batch_bytes, uint64_t now_ms,
                                         uint64_t deadline_ms)
{
  struct lc_batch *b = calloc(1, sizeof *b);
  if (b == NULL) {
    return NULL;
  }
  if (batch_builder_init(&b->bb, max_batch_bytes) != 0) {
    free(b);
    return NULL;
  }
  b->open = true;
  b->created_ms = now_ms;
  b->deadline_ms = deadline_ms;
  b->base_seq = -1;
  return b;
}

static int lc_acc_add(struct lc_batch *b, const struct cairn_message *m, int64_t timestamp,
                      const struct lc_msg *msg)
{
  if (b->nmsgs == b->cap) {
    size_t cap = b->cap == 0 ? 4 : b->cap * 2;
    struct lc_msg *nm = realloc(b->msgs, cap * sizeof *nm);
    if (nm == NULL) {
      return CAIRN_ENOMEM;
    }
    b->msgs = nm;
    b->cap = cap;
  }
  /* struct cairn_header and struct batch_kv have the same fields in the
   * same order; convert explicitly anyway (a few headers at most). */
  struct batch_kv kv[16];
  struct batch_kv *hv = kv;
  if (m->header_count > sizeof kv / sizeof kv[0]) {
    if ((hv = calloc(m->header_count, sizeof *hv)) == NULL) {
      return CAIRN_ENOMEM;
    }
  }
  for (size_t i = 0; i < m->header_count; i++) {
    hv[i].key = m->headers[i].key;
    hv[i].key_len = m->headers[i].key_len;
    hv[i].value = m->headers[i].value;
    hv[i].value_len = m->headers[i].value_len;
  }
  int rv = batch_builder_add(&b->bb, timestamp, m->key, m->key_len, m->value, m->value_len, hv,
                             (int32_t)m->header_count);
  if (hv != kv) {
    free(hv);
  }
  if (rv != 0) {
    return rv;
  }
  b->msgs[b->nmsgs++] = *msg;
  b->mem += msg->mem;
  return 0;
}

int lc_acc_append(struct lc_acc *a, size_t batch_bytes, size_t max_batch_bytes, uint64_t now_ms,
                  uint64_t deadline_ms, const struct cairn_message *m, int64_t timestamp,
                  const struct lc_msg *msg, bool *opened)
{
  *opened = false;
  struct lc_batch *b = a->tail;
  if (b != NULL && b->open && batch_builder_size(&b->bb) < batch_bytes) {
    int rv = lc_acc_add(b, m, timestamp, msg);
    if (rv != CAIRN_ETOOLARGE) {
      return rv;
    }
  }
  /* A new batch: the record alone must fit in max_batch_bytes. */
  struct lc_batch *nb = lc_acc_new_batch(max_batch_bytes, now_ms, deadline_ms);
  if (nb == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = lc_acc_add(nb, m, timestamp, msg);
  if (rv != 0) {
    lc_acc_batch_free(nb);
    return rv;
  }
  if (a->tail != NULL) {
    a->tail->next = nb;
  } else {
    a->head = nb;
  }
  a->tail = nb;
  if (a->first_open == NULL) {
    a->first_open = nb;
  }
  a->nbatches++;
  *opened = true;
  return 0;
}

bool lc_acc_tail_ready(const struct lc_acc *a, size_t batch_bytes, uint64_t linger_ms,
                       uint64_t now_ms, bool force)
{
  const struct lc_batch *b = a->tail;
  if (b == NULL || !b->open) {
    return false;
  }
  return force || batch_builder_size(&b->bb) >= batch_bytes || now_ms - b->created_ms >= linger_ms;
}

static int32_t lc_acc_seq_after(int32_t seq, size_t n)
{
  return (int32_t)(((uint32_t)seq + (uint32_t)n) & 0x7fffffffu);
}

int lc_acc_seal(struct lc_acc *a, struct lc_batch *b, int64_t producer_id, int16_t epoch,
                enum cairn_compression codec, int level)
{
  int32_t seq = producer_id >= 0 ? a->next_seq : -1;
  batch_builder_set_producer(&b->bb, producer_id, producer_id >= 0 ? epoch : -1, seq);
  uint8_t *out;
  size_t len;
  int rv = batch_builder_finish(&b->bb, &out, &len);
  if (rv != 0) {
    return rv;
  }
  if (codec != CAIRN_COMPRESSION_NONE) {
    /* Compression only saves bytes: when it fails (out of memory), the
     * batch goes uncompressed rather than being lost. */
    if (codec_batch_compress((enum batch_codec)codec, level, &out, &len) != 0) {
      /* out and len still hold the uncompressed batch */
    }
  }
  batch_builder_close(&b->bb);
  b->open = false;
  if (a->first_open == b) {
    a->first_open = b->next;
  }
  b->bytes = out;
  b->len = len;
  b->base_seq = seq;
  if (producer_id >= 0) {
    /* A batch of n records takes sequences base .. base + n - 1; after
     * 2^31 - 1 comes 0 (docs/protocol.md, "Idempotent batches"). */
    a->next_seq = lc_acc_seq_after(a->next_seq, b->nmsgs);
  }
  return 0;
}

void lc_acc_restamp(struct lc_acc *a, int64_t producer_id, int16_t epoch)
{
  a->next_seq = 0;
  for (struct lc_batch *b = a->head; b != NULL; b = b->next) {
    if (b->open || b->done) {
      continue;
    }
    int32_t seq = producer_id >= 0 ? a->next_seq : -1;
    le_put64(b->bytes + BATCH_OFF_PRODUCER_ID, (uint64_t)producer_id);
    le_put16(b->bytes + BATCH_OFF_PRODUCER_EPOCH, (uint16_t)(producer_id >= 0 ? epoch : -1));
    le_put32(b->bytes + BATCH_OFF_BASE_SEQUENCE, (uint32_t)seq);
    le_put32(b->bytes + BATCH_OFF_CRC, crc32c(b->bytes + BATCH_CRC_START, b->len - BATCH_CRC_START));
    b->base_seq = seq;
    if (producer_id >= 0) {
      a->next_seq = lc_acc_seq_after(a->next_seq, b->nmsgs);
    }
  }
}

struct lc_batch *lc_acc_pop(struct lc_acc *a)
{
  struct lc_batch *b = a->head;
  if (b == NULL) {
    return NULL;
  }
  a->head = b->next;
  if (a->head == NULL) {
    a->tail = NULL;
  }
  if (a->first_open == b) {
    a->first_open = b->next;
  }
  b->next = NULL;
  a->nbatches--;
  return b;
}
