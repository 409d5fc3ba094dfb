/* checkpoint.h - a partition log's durable checkpoint: how far the log is
 * known to be on disk, and where it starts. Written atomically (temp file,
 * fsync, rename, fsync dir) after every flush.
 *
 * File "checkpoint", 40 bytes, little-endian, version CHECKPOINT_VERSION = 1:
 *   0  u32 magic "CCK1" (CHECKPOINT_MAGIC)
 *   4  u16 version
 *   6  u16 reserved, 0
 *   8  i64 durable_offset  every batch below it is fsynced
 *  16  u64 durable_index   the Raft index of the last batch below it
 *  24  i64 start_offset    the log start (may be inside the first segment)
 *  32  u32 reserved, 0
 *  36  u32 crc32c of bytes [0, 36)
 */
#ifndef CAIRN_CHECKPOINT_H
#define CAIRN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define CHECKPOINT_MAGIC 0x314b4343u /* "CCK1" */
#define CHECKPOINT_VERSION 1
#define CHECKPOINT_SIZE 40
#define CHECKPOINT_FILE "checkpoint"

struct checkpoint {
  int64_t durable_offset;
  uint64_t durable_index;
  int64_t start_offset;
};

/* Encodes cp into buf (CHECKPOINT_SIZE bytes). */
void checkpoint_encode(const struct checkpoint *cp, uint8_t *buf);

/* Decodes buf[0..len). Returns 0, or CAIRN_ECORRUPT (wrong size, magic,
 * version or CRC). */
__attribute__((warn_unused_result)) int checkpoint_decode(const uint8_t *buf, size_t len,
                                                          struct checkpoint *cp);

/* Reads dir/checkpoint. Returns 0, -ENOENT when there is none,
 * CAIRN_ECORRUPT, or -errno. Blocks. */
__attribute__((warn_unused_result)) int checkpoint_read(const char *dir, struct checkpoint *cp);

/* Atomically replaces dir/checkpoint. Returns 0 or -errno. Blocks. */
__attribute__((warn_unused_result)) int checkpoint_write(const char *dir,
                                                         const struct checkpoint *cp);

#endif
