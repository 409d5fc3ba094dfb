/* batch_builder.h - encodes records into one record batch (the format in
 * batch.h). Used by the client library, the tools and the tests; the broker
 * itself never builds batches. */
#ifndef CAIRN_BATCH_BUILDER_H
#define CAIRN_BATCH_BUILDER_H

#include <stddef.h>
#include <stdint.h>

/* One record header; a NULL value with value_len 0 encodes null. */
struct batch_kv {
  const void *key;
  size_t key_len;
  const void *value;
  size_t value_len;
};

struct batch_builder {
  uint8_t *buf; /* header room + records so far */
  size_t len;
  size_t cap;
  size_t max_bytes;
  int32_t count;
  int64_t first_ts;
  int64_t max_ts;
  int64_t producer_id;
  int16_t producer_epoch;
  int32_t base_sequence;
};

/* Initializes an empty builder whose batches may grow to max_bytes (the
 * whole batch, header included). Caller allocates b. Returns 0 or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int batch_builder_init(struct batch_builder *b,
                                                           size_t max_bytes);

/* Frees what the builder holds. */
void batch_builder_close(struct batch_builder *b);

/* Sets the idempotent-producer fields (defaults -1, -1, -1). */
void batch_builder_set_producer(struct batch_builder *b, int64_t producer_id, int16_t epoch,
                                int32_t base_sequence);

/* Appends one record. key/value NULL means null. Borrows every pointer for
 * the call only (the bytes are copied). Returns 0, CAIRN_ETOOLARGE when the
 * record would push the batch past max_bytes (the builder is unchanged), or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int batch_builder_add(struct batch_builder *b,
                                                          int64_t timestamp, const void *key,
                                                          size_t key_len, const void *value,
                                                          size_t value_len,
                                                          const struct batch_kv *headers,
                                                          int32_t header_count);

/* Records added since init or the last finish. */
static inline int32_t batch_builder_count(const struct batch_builder *b) { return b->count; }

/* Bytes the batch would have if finished now. */
static inline size_t batch_builder_size(const struct batch_builder *b) { return b->len; }

/* Writes the header and CRC and hands the batch over: *out is owned by the
 * caller (free with free()), *len its size. base_offset, source_index and
 * flags are 0. The builder is empty afterwards and can be reused. Returns 0,
 * CAIRN_EINVAL if no record was added, or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int batch_builder_finish(struct batch_builder *b,
                                                             uint8_t **out, size_t *len);

#endif
