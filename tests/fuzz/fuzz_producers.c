/* fuzz_producers.c - libFuzzer target: producer_state_decode() (a
 * partition's producer table, read from a snapshot a peer sent or from
 * <replica>/producers) over arbitrary bytes. The first input byte picks
 * fix-ups so the fuzzer gets past the header into protobuf and table
 * checks: bit 0 writes a valid magic, version and length, bit 1 the right
 * CRC. A table that decodes must encode to bytes that decode to the same
 * table, and must stand the apply path: a few batches derived from the
 * input are checked and recorded against it. */
#include "cluster/producer_state.h"
#include "common/err.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "fuzz_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint8_t mode;
  size_t len;
  uint8_t *p = fuzz_body(data, size, &mode, &len);
  if (p == NULL) {
    return 0;
  }
  if ((mode & 1) && len >= PRODUCER_STATE_HEADER_BYTES) {
    le_put32(p, PRODUCER_STATE_MAGIC);
    le_put32(p + 4, PRODUCER_STATE_VERSION);
    le_put32(p + 8, (uint32_t)(len - PRODUCER_STATE_HEADER_BYTES));
  }
  if ((mode & 2) && len >= PRODUCER_STATE_HEADER_BYTES) {
    le_put32(p + 12, crc32c(p + PRODUCER_STATE_HEADER_BYTES, len - PRODUCER_STATE_HEADER_BYTES));
  }
  struct producer_state ps;
  producer_state_init(&ps);
  int64_t off = 0;
  uint64_t idx = 0;
  if (producer_state_decode(&ps, p, len, &off, &idx) == 0) {
    uint8_t *enc = NULL;
    size_t enc_len = 0;
    if (producer_state_encode(&ps, off, idx, &enc, &enc_len) != 0) {
      abort();
    }
    struct producer_state back;
    producer_state_init(&back);
    if (producer_state_decode(&back, enc, enc_len, NULL, NULL) != 0 || back.n != ps.n ||
        (ps.n > 0 && memcmp(back.entries, ps.entries, ps.n * sizeof *ps.entries) != 0)) {
      abort();
    }
    producer_state_close(&back);
    free(enc);
    /* Batches for the producers the input names, at and around their
     * windows: check never fails on a decoded table, record keeps it sorted. */
    for (size_t i = 0; i < ps.n && i < 8; i++) {
      const struct producer_entry *e = &ps.entries[i];
      struct producer_batch_info b = {e->producer_id, e->epoch,
                                      e->batches[e->nbatches - 1].last_sequence, 1 + (int)(i % 3),
                                      (int64_t)i};
      bool dup = false;
      int64_t orig = -1;
      int rv = producer_state_check(&ps, &b, &dup, &orig);
      if (rv == 0 && !dup) {
        if (producer_state_record(&ps, &b, off, idx + 1) != 0) {
          abort();
        }
      }
    }
    for (size_t i = 1; i < ps.n; i++) {
      if (ps.entries[i - 1].producer_id >= ps.entries[i].producer_id) {
        abort();
      }
    }
  }
  producer_state_close(&ps);
  free(p);
  return 0;
}
