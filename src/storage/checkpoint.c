/* checkpoint.c - the partition log's durable checkpoint file. */
#include "storage/checkpoint.h"

#include "common/err.h"
#include "common/fault.h"
#include "common/fsutil.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <stdlib.h>
#include <string.h>

void checkpoint_encode(const struct checkpoint *cp, uint8_t *buf)
{
  memset(buf, 0, CHECKPOINT_SIZE);
  le_put32(buf, CHECKPOINT_MAGIC);
  le_put16(buf + 4, CHECKPOINT_VERSION);
  le_put64(buf + 8, (uint64_t)cp->durable_offset);
  le_put64(buf + 16, cp->durable_index);
  le_put64(buf + 24, (uint64_t)cp->start_offset);
  le_put32(buf + 36, crc32c(buf, 36));
}

int checkpoint_decode(const uint8_t *buf, size_t len, struct checkpoint *cp)
{
  if (len != CHECKPOINT_SIZE || le_get32(buf) != CHECKPOINT_MAGIC ||
      le_get16(buf + 4) != CHECKPOINT_VERSION || le_get32(buf + 36) != crc32c(buf, 36)) {
    return CAIRN_ECORRUPT;
  }
  cp->durable_offset = (int64_t)le_get64(buf + 8);
  cp->durable_index = le_get64(buf + 16);
  cp->start_offset = (int64_t)le_get64(buf + 24);
  if (cp->durable_offset < 0 || cp->start_offset < 0) {
    return CAIRN_ECORRUPT;
  }
  return 0;
}

int checkpoint_read(const char *dir, struct checkpoint *cp)
{
  uint8_t *buf;
  size_t len;
  int rv = fs_read_file(dir, CHECKPOINT_FILE, 4096, &buf, &len);
  if (rv == CAIRN_ETOOLARGE) {
    return CAIRN_ECORRUPT;
  }
  if (rv != 0) {
    return rv;
  }
  rv = checkpoint_decode(buf, len, cp);
  free(buf);
  return rv;
}

int checkpoint_write(const char *dir, const struct checkpoint *cp)
{
  int rv = fault_check(FAULT_CHECKPOINT_WRITE);
  if (rv != 0) {
    return rv;
  }
  uint8_t buf[CHECKPOINT_SIZE];
  checkpoint_encode(cp, buf);
  return fs_replace_file(dir, CHECKPOINT_FILE, buf, sizeof buf);
}
