/* fuzz_batch.c - libFuzzer target: batch_validate() (the ingress check of
 * produced bytes) over arbitrary bytes. The first input byte picks fix-ups
 * so the fuzzer gets past the cheap checks into record parsing: bit 0
 * writes the right batch_length, bit 1 the right CRC. A batch that
 * validates must then iterate cleanly over exactly record_count records. */
#include "common/err.h"
#include "format/batch.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "fuzz_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_BATCH (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint8_t mode;
  size_t len;
  uint8_t *p = fuzz_body(data, size, &mode, &len);
  if (p == NULL) {
    return 0;
  }
  if ((mode & 1) && len >= BATCH_LENGTH_FIELD_END) {
    le_put32(p + BATCH_OFF_LENGTH, (uint32_t)(len - BATCH_LENGTH_FIELD_END));
  }
  if ((mode & 2) && len >= BATCH_CRC_START) {
    le_put32(p + BATCH_OFF_CRC, crc32c_extend(0, p + BATCH_CRC_START, len - BATCH_CRC_START));
  }
  char errmsg[256];
  errmsg[0] = '\0';
  int rv = batch_validate(p, len, FUZZ_MAX_BATCH, errmsg, sizeof errmsg);
  if (rv == 0) {
    struct batch_iter it;
    int irv = batch_iter_init(&it, p, len);
    if (irv == 0) {
      struct batch_record r;
      int32_t n = 0;
      while ((irv = batch_iter_next(&it, &r)) == 1) {
        for (int32_t i = 0; i < r.header_count; i++) {
          const uint8_t *k, *v;
          size_t kl, vl;
          if (batch_record_header(&r, i, &k, &kl, &v, &vl) != 0) {
            abort(); /* validated records have well-formed headers */
          }
        }
        n++;
      }
      if (irv != 0 || n != it.h.record_count) {
        abort(); /* validation passed but iteration disagrees */
      }
    } else if (irv != CAIRN_EUNSUPPORTED) {
      abort();
    }
  } else if (rv > 0 || errmsg[0] == '\0') {
    abort(); /* every rejection is a negative code with a message */
  }
  free(p);
  return 0;
}
