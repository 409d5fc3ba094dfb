/* rgroup_cmd.c - the commands of a partition's Raft log (rgroup_cmd.h). */
#include "cluster/rgroup_cmd.h"

#include "common/err.h"
#include "format/batch.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <string.h>

_Static_assert(BATCH_OFF_MAGIC == 21, "rgroup_cmd_is reads a batch's magic at byte 21");

#define RGROUP_CMD_OFF_KIND 26
#define RGROUP_CMD_OFF_RESERVED 28
#define RGROUP_CMD_OFF_OFFSET 32

void rgroup_cmd_encode(const struct rgroup_cmd *c, uint8_t out[RGROUP_CMD_SIZE])
{
  memset(out, 0, RGROUP_CMD_SIZE);
  le_put32(out + BATCH_OFF_LENGTH, RGROUP_CMD_SIZE - BATCH_LENGTH_FIELD_END);
  out[BATCH_OFF_MAGIC] = RGROUP_CMD_MAGIC;
  le_put16(out + RGROUP_CMD_OFF_KIND, (uint16_t)c->kind);
  le_put64(out + RGROUP_CMD_OFF_OFFSET, (uint64_t)c->offset);
  le_put32(out + BATCH_OFF_CRC, crc32c(out + BATCH_CRC_START, RGROUP_CMD_SIZE - BATCH_CRC_START));
}

int rgroup_cmd_probe(const uint8_t *p, size_t len, struct rgroup_cmd *c, size_t *size)
{
  if (!rgroup_cmd_is(p, len)) {
    return 0;
  }
  if (len < RGROUP_CMD_SIZE) {
    return CAIRN_ETRUNCATED;
  }
  if (le_get32(p + BATCH_OFF_LENGTH) != RGROUP_CMD_SIZE - BATCH_LENGTH_FIELD_END) {
    return CAIRN_EBADLEN;
  }
  if (le_get32(p + BATCH_OFF_CRC) !=
      crc32c(p + BATCH_CRC_START, RGROUP_CMD_SIZE - BATCH_CRC_START)) {
    return CAIRN_EBADCRC;
  }
  if (le_get16(p + RGROUP_CMD_OFF_KIND) != RGROUP_CMD_LOG_START ||
      le_get32(p + RGROUP_CMD_OFF_RESERVED) != 0) {
    return CAIRN_EUNSUPPORTED;
  }
  int64_t offset = (int64_t)le_get64(p + RGROUP_CMD_OFF_OFFSET);
  if (offset < 0) {
    return CAIRN_EOFFSET;
  }
  c->kind = RGROUP_CMD_LOG_START;
  c->offset = offset;
  *size = RGROUP_CMD_SIZE;
  return 1;
}
