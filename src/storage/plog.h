/* plog.h - the partition log: a directory of segment files that implements
 * the store interface (store.h). See docs/format.md for the files.
 *
 *   <dir>/00000000000000000000.log        record batches, back to back
 *   <dir>/00000000000000000000.index      sparse offset index
 *   <dir>/00000000000000000000.timeindex  sparse time index
 *   <dir>/checkpoint                      durable checkpoint
 *
 * Invariants:
 *   - segments are contiguous: each one's base offset is the previous one's
 *     next offset; only the newest (active) segment is written;
 *   - a segment is fsynced, indexes included, when it is rolled, so after a
 *     crash only segments at or after the checkpoint's durable offset can
 *     hold a torn tail;
 *   - the checkpoint never claims more than was fsynced;
 *   - a batch that is not wholly valid (CRC, length, offsets in sequence,
 *     Raft entry complete) is never read back: open() truncates the log to
 *     the last valid, complete entry;
 *   - once a write or fsync fails the log is fatal: it refuses appends and
 *     flushes (CAIRN_EFATAL) because the file's state is unknown.
 *
 *   - while a sync job is out (plog_sync.h), only appends, reads and info
 *     run beside it; flush, truncate, delete_before, retention and close
 *     collect it first (wait for it, or cancel it if it has not started).
 *
 * Happy path: append -> pwritev to the active segment, index entries kept
 * in memory; flush -> fdatasync segments and indexes, then the checkpoint
 * (on the loop: store_flush; or on the thread pool: plog_sync.h).
 * Failure modes: crash before flush loses only unflushed batches (Raft
 * replays them); torn or corrupt tail -> truncated at open; missing or
 * corrupt index -> rebuilt from the segment at open; unknown files -> left
 * alone with a warning. */
#ifndef CAIRN_PLOG_H
#define CAIRN_PLOG_H

#include "storage/store.h"

#include <stdint.h>

#define PLOG_DEFAULT_SEGMENT_BYTES (128u * 1024 * 1024)
#define PLOG_DEFAULT_INDEX_INTERVAL 4096
#define PLOG_MAX_SEGMENT_BYTES (1u << 31) /* index positions are 32-bit */

struct plog_opts {
  uint64_t segment_bytes;  /* roll when a segment would pass this; 0: default */
  int64_t segment_ms;      /* roll a segment this old (by its first batch's
                              append time); 0: never */
  uint64_t retention_bytes;/* keep at most this many bytes; 0: no limit */
  int64_t retention_ms;    /* delete segments whose newest record is older;
                              0: no limit */
  uint32_t index_interval; /* bytes between index entries; 0: default */
  uint32_t max_batch_bytes;/* largest batch accepted; 0: default */
  int64_t (*now_ms)(void); /* wall clock; NULL: the real one (tests inject) */
  /* The files in dir were made durable by a syncfs(2) of their file system
   * after the last process that wrote them stopped, and nothing wrote them
   * since (partitions.h: a node's first open of each replica it found at
   * start). Recovery then trusts what it reads as durable instead of
   * fsyncing every file and rewriting the checkpoint (about 7 syncs a
   * replica, most of a 10,000-replica restart); the rebuilt indexes and the
   * checkpoint catch up at the log's next flush. false: sync as usual. */
  bool disk_synced;
};

/* Fills opts with the defaults. */
void plog_opts_default(struct plog_opts *opts);

/* Opens the log in dir (created if missing), recovering from whatever a
 * crash left: scans unflushed segments, truncates a torn or corrupt tail,
 * rebuilds missing or damaged indexes, ignores unknown files with a warning.
 * On success *out is owned by the caller (free with store_close()). On
 * failure returns a negative code and, when errmsg is not NULL, a message.
 * Blocks (file I/O). Context: the owner thread. */
__attribute__((warn_unused_result)) int plog_open(const char *dir, const struct plog_opts *opts,
                                                  struct store **out, char *errmsg,
                                                  size_t errmsg_len);

/* What open() found and repaired, for logs and tests. */
struct plog_recovery {
  uint32_t segments_scanned;
  uint32_t indexes_rebuilt;
  uint32_t segments_dropped;   /* later segments removed after damage */
  uint64_t bytes_truncated;    /* torn/corrupt tail bytes cut off */
  uint32_t batches_truncated;  /* whole batches of an incomplete entry cut */
  uint32_t files_ignored;      /* unknown files left alone */
};

/* The recovery report of the open that created s (a plog). */
void plog_recovery_info(struct store *s, struct plog_recovery *out);

/* One segment of a manifest. */
struct plog_segment_desc {
  int64_t base_offset;
  int64_t next_offset;
  uint64_t size_bytes;
  uint32_t crc32c; /* of the segment file's bytes [0, size_bytes) */
};

/* Lists the segments with a checksum of each one's contents (reads them
 * all: blocks). *out is owned by the caller (free with free()). Returns 0
 * or a negative code. */
__attribute__((warn_unused_result)) int plog_segments(struct store *s,
                                                      struct plog_segment_desc **out,
                                                      size_t *n);

#endif
