/* rgroup_cmd.h - commands carried in a partition's Raft log beside its
 * record batches: today one, LOG_START (DeleteRecords: every record below
 * an offset goes, on every replica, at the same point of the log).
 *
 * A command is framed like a batch (docs/format.md, "Commands in a
 * partition's Raft log"), so that an entry still splits into items by the
 * length field, and told apart by its magic, RGROUP_CMD_MAGIC, which no
 * batch has. 40 bytes, little-endian:
 *
 *   off size field
 *    0   8   base_offset   i64  0
 *    8   4   batch_length  i32  28 (bytes after this field)
 *   12   8   source_index  u64  0
 *   20   1   entry_flags   u8   0
 *   21   1   magic         u8   RGROUP_CMD_MAGIC (0xC1)
 *   22   4   crc           u32  CRC-32C of bytes [26, 40)
 *   26   2   kind          u16  1 LOG_START
 *   28   4   reserved      u32  0
 *   32   8   offset        i64  LOG_START: the new log start, >= 0
 *
 * A node built before commands existed refuses the magic (its replica
 * stops applying the partition): every node must run a release that reads
 * them before any is proposed (docs/operations.md, "Upgrades").
 *
 * Context: any thread (pure functions). */
#ifndef CAIRN_RGROUP_CMD_H
#define CAIRN_RGROUP_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RGROUP_CMD_MAGIC 0xC1
#define RGROUP_CMD_SIZE 40

enum rgroup_cmd_kind {
  RGROUP_CMD_LOG_START = 1 /* delete every record below offset */
};

struct rgroup_cmd {
  enum rgroup_cmd_kind kind;
  int64_t offset;
};

/* Whether the item at p[0..len) is framed as a command (its magic), well
 * formed or not: how an entry's walkers tell commands from batches. */
static inline bool rgroup_cmd_is(const uint8_t *p, size_t len)
{
  return len > 21 && p[21] == RGROUP_CMD_MAGIC; /* byte 21: a batch's magic */
}

/* Writes the command c into out. c->offset must be >= 0. */
void rgroup_cmd_encode(const struct rgroup_cmd *c, uint8_t out[RGROUP_CMD_SIZE]);

/* Is the item at p[0..len) (len >= 22: a batch header's first bytes) a
 * command? Returns 1 with *c and *size (RGROUP_CMD_SIZE) for a well-formed
 * one, 0 when p is not a command (a batch, for batch_probe), or a negative
 * code for a command that is malformed: CAIRN_ETRUNCATED (fewer than its
 * 40 bytes), CAIRN_EBADLEN, CAIRN_EBADCRC, CAIRN_EUNSUPPORTED (an unknown
 * kind or a reserved field set), CAIRN_EOFFSET (a negative offset). */
int rgroup_cmd_probe(const uint8_t *p, size_t len, struct rgroup_cmd *c, size_t *size);

#endif
