/* partitioner.c - the documented key hash: partition = CRC-32C(key) %
 * count (cairn.h states it; tests pin known values). Keyless sticky
 * choice lives in producer.c, which knows when a batch is sent. */
#include "internal.h"

#include "format/crc32c.h"

uint32_t lc_partition_hash(const void *key, size_t key_len) { return crc32c(key, key_len); }

int32_t lc_partition_for_key(const void *key, size_t key_len, int32_t count)
{
  return (int32_t)(lc_partition_hash(key, key_len) % (uint32_t)count);
}
