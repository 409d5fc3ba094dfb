/* producer_state.c - a partition's idempotent-producer table
 * (producer_state.h): a sorted array of producers, each with a window of its
 * last appended batches. */
#include "cluster/producer_state.h"

#include "common/err.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "storage.pb-c.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void producer_state_init(struct producer_state *ps)
{
  memset(ps, 0, sizeof *ps);
  ps->max_timestamp = INT64_MIN;
}

void producer_state_close(struct producer_state *ps)
{
  free(ps->entries);
  producer_state_init(ps);
}

/* Index of the first entry with an id >= producer_id. */
static size_t producer_state_lower_bound(const struct producer_state *ps, int64_t producer_id)
{
  size_t lo = 0, hi = ps->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ps->entries[mid].producer_id < producer_id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

const struct producer_entry *producer_state_find(const struct producer_state *ps,
                                                 int64_t producer_id)
{
  size_t i = producer_state_lower_bound(ps, producer_id);
  return i < ps->n && ps->entries[i].producer_id == producer_id ? &ps->entries[i] : NULL;
}

/* The last sequence of a batch: one sequence number per record, as
 * Kafka's producers and libcairn (client/src/accumulator.c) count them;
 * sequences wrap from INT32_MAX to 0. */
static int32_t producer_state_last_seq(int32_t base, int32_t count)
{
  int64_t last = (int64_t)base + (count > 0 ? count : 1) - 1;
  return (int32_t)(last % ((int64_t)INT32_MAX + 1));
}

static int32_t producer_state_next_seq(int32_t last)
{
  return last == INT32_MAX ? 0 : last + 1;
}

int producer_state_check(const struct producer_state *ps, const struct producer_batch_info *b,
                         bool *duplicate, int64_t *base_offset)
{
  *duplicate = false;
  *base_offset = -1;
  if (b->producer_id < 0) {
    return 0;
  }
  if (b->base_sequence < 0 || b->epoch < 0) {
    return CAIRN_EOUT_OF_ORDER; /* stamped with an id but not with a sequence */
  }
  const struct producer_entry *e = producer_state_find(ps, b->producer_id);
  if (e == NULL) {
    return b->base_sequence == 0 ? 0 : CAIRN_EUNKNOWN_PRODUCER;
  }
  if (b->epoch < e->epoch) {
    return CAIRN_EPRODUCER_FENCED;
  }
  if (b->epoch > e->epoch) {
    return b->base_sequence == 0 ? 0 : CAIRN_EOUT_OF_ORDER;
  }
  int32_t last = producer_state_last_seq(b->base_sequence, b->record_count);
  for (uint32_t i = 0; i < e->nbatches; i++) {
    if (e->batches[i].first_sequence == b->base_sequence && e->batches[i].last_sequence == last) {
      *duplicate = true;
      *base_offset = e->batches[i].base_offset;
      return 0;
    }
  }
  int32_t next = producer_state_next_seq(e->batches[e->nbatches - 1].last_sequence);
  return b->base_sequence == next ? 0 : CAIRN_EOUT_OF_ORDER;
}

static void producer_state_remove(struct producer_state *ps, size_t i)
{
  memmove(&ps->entries[i], &ps->entries[i + 1], (ps->n - i - 1) * sizeof *ps->entries);
  ps->n--;
  ps->expired++;
}

/* The bound of producer_state.h, before a new producer is inserted: idle
 * ones first, then the least recently appended while the table is full. */
static void producer_state_expire(struct producer_state *ps)
{
  if (ps->max_timestamp != INT64_MIN && ps->max_timestamp > INT64_MIN + PRODUCER_STATE_IDLE_MS) {
    int64_t horizon = ps->max_timestamp - PRODUCER_STATE_IDLE_MS;
    size_t kept = 0;
    for (size_t i = 0; i < ps->n; i++) {
      if (ps->entries[i].last_timestamp >= horizon) {
        ps->entries[kept++] = ps->entries[i];
      } else {
        ps->expired++;
      }
    }
    ps->n = kept;
  }
  while (ps->n >= PRODUCER_STATE_MAX) {
    size_t oldest = 0;
    for (size_t i = 1; i < ps->n; i++) {
      if (ps->entries[i].last_index < ps->entries[oldest].last_index) {
        oldest = i;
      }
    }
    producer_state_remove(ps, oldest);
  }
}

static int producer_state_reserve(struct producer_state *ps, size_t n)
{
  if (n <= ps->cap) {
    return 0;
  }
  size_t cap = ps->cap ? ps->cap * 2 : 1; /* most partitions see one producer */
  while (cap < n) {
    cap *= 2;
  }
  struct producer_entry *ne = realloc(ps->entries, cap * sizeof *ne);
  if (ne == NULL) {
    return CAIRN_ENOMEM;
  }
  ps->entries = ne;
  ps->cap = cap;
  return 0;
}

int producer_state_record(struct producer_state *ps, const struct producer_batch_info *b,
                          int64_t base_offset, uint64_t index)
{
  if (b->producer_id < 0) {
    return 0;
  }
  /* Room for one more before anything changes, so ENOMEM changes nothing. */
  if (producer_state_reserve(ps, ps->n + 1) != 0) {
    return CAIRN_ENOMEM;
  }
  if (b->max_timestamp > ps->max_timestamp) {
    ps->max_timestamp = b->max_timestamp;
  }
  size_t i = producer_state_lower_bound(ps, b->producer_id);
  if (i >= ps->n || ps->entries[i].producer_id != b->producer_id) {
    producer_state_expire(ps);
    i = producer_state_lower_bound(ps, b->producer_id);
    memmove(&ps->entries[i + 1], &ps->entries[i], (ps->n - i) * sizeof *ps->entries);
    ps->n++;
    memset(&ps->entries[i], 0, sizeof ps->entries[i]);
    ps->entries[i].producer_id = b->producer_id;
    ps->entries[i].epoch = b->epoch;
  }
  struct producer_entry *e = &ps->entries[i];
  if (b->epoch != e->epoch) {
    e->epoch = b->epoch; /* a newer epoch: its window starts over */
    e->nbatches = 0;
  }
  if (e->nbatches == PRODUCER_STATE_WINDOW) {
    memmove(&e->batches[0], &e->batches[1], (PRODUCER_STATE_WINDOW - 1) * sizeof e->batches[0]);
    e->nbatches--;
  }
  struct producer_batch *pb = &e->batches[e->nbatches++];
  pb->first_sequence = b->base_sequence;
  pb->last_sequence = producer_state_last_seq(b->base_sequence, b->record_count);
  pb->base_offset = base_offset;
  e->last_index = index;
  e->last_timestamp = b->max_timestamp;
  return 0;
}

/* ---- encoding ---- */

int producer_state_encode(const struct producer_state *ps, int64_t next_offset, uint64_t last_index,
                          uint8_t **out, size_t *len)
{
  Cairn__Storage__ProducerRecord *recs = calloc(ps->n + 1, sizeof *recs);
  Cairn__Storage__ProducerRecord **rec_ptrs = calloc(ps->n + 1, sizeof *rec_ptrs);
  Cairn__Storage__ProducerBatch *bats = calloc(ps->n * PRODUCER_STATE_WINDOW + 1, sizeof *bats);
  Cairn__Storage__ProducerBatch **bat_ptrs =
      calloc(ps->n * PRODUCER_STATE_WINDOW + 1, sizeof *bat_ptrs);
  int rv = CAIRN_ENOMEM;
  if (recs == NULL || rec_ptrs == NULL || bats == NULL || bat_ptrs == NULL) {
    goto done;
  }
  Cairn__Storage__ProducerTable t = CAIRN__STORAGE__PRODUCER_TABLE__INIT;
  t.next_offset = next_offset;
  t.last_index = last_index;
  t.max_timestamp = ps->max_timestamp;
  size_t k = 0;
  for (size_t i = 0; i < ps->n; i++) {
    const struct producer_entry *e = &ps->entries[i];
    Cairn__Storage__ProducerRecord *r = &recs[i];
    cairn__storage__producer_record__init(r);
    r->producer_id = e->producer_id;
    r->epoch = e->epoch;
    r->last_index = e->last_index;
    r->last_timestamp = e->last_timestamp;
    r->batches = &bat_ptrs[k];
    r->n_batches = e->nbatches;
    for (uint32_t j = 0; j < e->nbatches; j++, k++) {
      cairn__storage__producer_batch__init(&bats[k]);
      bats[k].first_sequence = e->batches[j].first_sequence;
      bats[k].last_sequence = e->batches[j].last_sequence;
      bats[k].base_offset = e->batches[j].base_offset;
      bat_ptrs[k] = &bats[k];
    }
    rec_ptrs[i] = r;
  }
  t.producers = rec_ptrs;
  t.n_producers = ps->n;
  size_t n = cairn__storage__producer_table__get_packed_size(&t);
  uint8_t *buf = malloc(PRODUCER_STATE_HEADER_BYTES + n);
  if (buf == NULL) {
    goto done;
  }
  cairn__storage__producer_table__pack(&t, buf + PRODUCER_STATE_HEADER_BYTES);
  le_put32(buf, PRODUCER_STATE_MAGIC);
  le_put32(buf + 4, PRODUCER_STATE_VERSION);
  le_put32(buf + 8, (uint32_t)n);
  le_put32(buf + 12, crc32c(buf + PRODUCER_STATE_HEADER_BYTES, n));
  *out = buf;
  *len = PRODUCER_STATE_HEADER_BYTES + n;
  rv = 0;
done:
  free(recs);
  free(rec_ptrs);
  free(bats);
  free(bat_ptrs);
  return rv;
}

/* Fills fresh (init'ed, empty) from t; CAIRN_ECORRUPT on any broken rule. */
static int producer_state_fill(struct producer_state *fresh, const Cairn__Storage__ProducerTable *t)
{
  if (t->n_producers > PRODUCER_STATE_MAX) {
    return CAIRN_ECORRUPT;
  }
  if (producer_state_reserve(fresh, t->n_producers + 1) != 0) {
    return CAIRN_ENOMEM;
  }
  fresh->max_timestamp = t->max_timestamp;
  for (size_t i = 0; i < t->n_producers; i++) {
    const Cairn__Storage__ProducerRecord *r = t->producers[i];
    if (r->producer_id < 0 || (i > 0 && r->producer_id <= fresh->entries[i - 1].producer_id) ||
        r->epoch < 0 || r->epoch > INT16_MAX || r->n_batches == 0 ||
        r->n_batches > PRODUCER_STATE_WINDOW) {
      return CAIRN_ECORRUPT;
    }
    struct producer_entry *e = &fresh->entries[i];
    memset(e, 0, sizeof *e);
    e->producer_id = r->producer_id;
    e->epoch = (int16_t)r->epoch;
    e->last_index = r->last_index;
    e->last_timestamp = r->last_timestamp;
    e->nbatches = (uint32_t)r->n_batches;
    for (size_t j = 0; j < r->n_batches; j++) {
      const Cairn__Storage__ProducerBatch *pb = r->batches[j];
      if (pb->first_sequence < 0 || pb->last_sequence < 0) {
        return CAIRN_ECORRUPT;
      }
      e->batches[j].first_sequence = pb->first_sequence;
      e->batches[j].last_sequence = pb->last_sequence;
      e->batches[j].base_offset = pb->base_offset;
    }
    fresh->n++;
  }
  return 0;
}

int producer_state_decode(struct producer_state *ps, const uint8_t *buf, size_t len,
                          int64_t *next_offset, uint64_t *last_index)
{
  if (len > PRODUCER_STATE_MAX_BYTES) {
    return CAIRN_ETOOLARGE;
  }
  if (len < PRODUCER_STATE_HEADER_BYTES) {
    return CAIRN_ETRUNCATED;
  }
  if (le_get32(buf) != PRODUCER_STATE_MAGIC || le_get32(buf + 4) != PRODUCER_STATE_VERSION) {
    return CAIRN_EBADMAGIC;
  }
  size_t plen = le_get32(buf + 8);
  if (plen != len - PRODUCER_STATE_HEADER_BYTES) {
    return plen > len - PRODUCER_STATE_HEADER_BYTES ? CAIRN_ETRUNCATED : CAIRN_ECORRUPT;
  }
  if (crc32c(buf + PRODUCER_STATE_HEADER_BYTES, plen) != le_get32(buf + 12)) {
    return CAIRN_EBADCRC;
  }
  Cairn__Storage__ProducerTable *t =
      cairn__storage__producer_table__unpack(NULL, plen, buf + PRODUCER_STATE_HEADER_BYTES);
  if (t == NULL) {
    return CAIRN_ECORRUPT;
  }
  struct producer_state fresh;
  producer_state_init(&fresh);
  int rv = producer_state_fill(&fresh, t);
  if (rv == 0) {
    if (next_offset != NULL) {
      *next_offset = t->next_offset;
    }
    if (last_index != NULL) {
      *last_index = t->last_index;
    }
  }
  cairn__storage__producer_table__free_unpacked(t, NULL);
  if (rv != 0) {
    producer_state_close(&fresh);
    return rv;
  }
  producer_state_close(ps);
  *ps = fresh;
  return 0;
}
