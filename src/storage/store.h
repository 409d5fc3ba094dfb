/* store.h - the partition store interface: what the layers above (the
 * Raft state machine, the fetch path) see of a partition's log. Two
 * implementations: plog (segmented files, the default) and memlog (in
 * memory, for ephemeral topics and fast tests). Callers never know which.
 *
 * Offsets: a store holds the batches with offsets [start, next). Appending
 * assigns offsets from next on, gap-free. A store built from Raft entries
 * also remembers the Raft index of the last entry it applied (last_index),
 * so replaying the Raft log after a crash applies nothing twice.
 *
 * Threading: a store is not thread-safe. One owner (the loop thread) makes
 * every call; a returned region may be read from any thread until released.
 */
#ifndef CAIRN_STORE_H
#define CAIRN_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_ERRMSG_SIZE 256

struct store;

/* Bytes of whole batches, starting with the batch that holds the offset
 * asked for. Either in a file (fd >= 0: [pos, pos + len), for sendfile) or
 * in memory (fd < 0: mem[0, len)). The fd and mem stay valid, even if the
 * store deletes the segment meanwhile, until store_region_release(). */
struct store_region {
  int fd;
  int64_t pos;
  const uint8_t *mem;
  size_t len;           /* 0: no batches (the offset asked for is the log end) */
  int64_t first_offset; /* base offset of the first batch in the region */
  int64_t next_offset;  /* the offset after the last batch in the region */
  /* private */
  void (*release)(struct store_region *r);
  void *pin;
};

/* Releases what the region pins. Safe on a zeroed or released region.
 * Context: the store's owner thread. */
void store_region_release(struct store_region *r);

/* One batch handed to append. The store never writes into data: it
 * writes the broker fields (base offset, source index, entry flags) from its
 * own copy of the header, so data may be memory the caller shares, such as
 * a Raft log entry that is still being sent to peers. */
struct store_batch {
  const uint8_t *data;
  size_t len;
};

struct store_info {
  int64_t start_offset;   /* first offset readable */
  /* The start a reopen finds (<= start_offset): below start_offset while
   * a start moved by a command waits to be deleted durably (a pgstore
   * deletes its rows at its owner's next retention pass: pgstore.h). */
  int64_t saved_start_offset;
  int64_t next_offset;    /* offset the next append gets (= log end) */
  uint64_t last_index;    /* Raft index of the last entry applied, 0 none */
  int64_t durable_offset; /* every offset below this is on disk (fsynced) */
  uint64_t durable_index; /* Raft index covered by durable_offset */
  uint64_t size_bytes;    /* bytes of batches held */
  uint32_t segments;      /* segment files (memlog: 1) */
  bool fatal;             /* a write or fsync failed: read-only from now on */
};

struct store_ops {
  int (*append)(struct store *s, struct store_batch *batches, size_t n, uint64_t source_index,
                int64_t *base_offset);
  int (*read)(struct store *s, int64_t offset, size_t max_bytes, struct store_region *out);
  int (*lookup_time)(struct store *s, int64_t timestamp, int64_t *offset);
  int (*flush)(struct store *s, int64_t up_to);
  int (*truncate)(struct store *s, int64_t offset);
  int (*delete_before)(struct store *s, int64_t offset);
  /* NULL: store_reset falls back to delete_before */
  int (*reset)(struct store *s, int64_t offset, uint64_t last_index);
  int (*retention)(struct store *s, int64_t now_ms, int64_t below, uint32_t *deleted);
  int64_t (*retention_point)(struct store *s, int64_t now_ms);
  /* read for a caller that may block; NULL: read never answers CAIRN_EPENDING */
  int (*read_blocking)(struct store *s, int64_t offset, size_t max_bytes,
                       struct store_region *out);
  void (*info)(struct store *s, struct store_info *out);
  void (*close)(struct store *s);
};

/* Every implementation embeds this first. errmsg holds the last failure's
 * message, each layer wrapping the one below once. */
struct store {
  const struct store_ops *ops;
  char errmsg[STORE_ERRMSG_SIZE];
  /* The retention limits (0: no limit), here rather than in each
   * implementation so that a topic's limits change on a running store
   * (store_set_retention). */
  uint64_t retention_bytes;
  int64_t retention_ms;
  /* Set by store_close_unflushed: the close skips the flush a clean close
   * makes (a partition log's fsyncs and checkpoint). */
  bool close_unflushed;
  /* The implementation's latch: a write or fsync failed, read-only from
   * now on (store_info's fatal). In the base so that a walk over every
   * partition asks it without a call (store_fatal). Loop thread. */
  bool fatal;
};

/* Has a write or fsync of s failed (the latch store_info reports)? */
static inline bool store_fatal(const struct store *s)
{
  return s->fatal;
}

/* Appends the batches of one Raft entry (n >= 1) as one unit. Each batch is
 * validated first (length, magic, CRC, records); if any is malformed nothing
 * is written and the error names it. Offsets are assigned from next_offset;
 * *base_offset is the first batch's. source_index is the Raft index of the
 * entry (0: not from Raft, no idempotency check). If source_index <=
 * last_index the entry was applied before: nothing is written and
 * CAIRN_EEXIST is returned. Borrows batches for the call only (never
 * written). Appended data is readable at once but durable only after
 * store_flush(). Returns 0 or a negative code; CAIRN_EFATAL once a write has
 * failed. */
__attribute__((warn_unused_result)) static inline int
store_append(struct store *s, struct store_batch *batches, size_t n, uint64_t source_index,
             int64_t *base_offset)
{
  return s->ops->append(s, batches, n, source_index, base_offset);
}

/* Finds whole batches starting with the one that holds offset, at most
 * max_bytes of them except that the first batch is always returned whole.
 * Regions never span segments. offset == next_offset gives len 0. Returns
 * 0 or CAIRN_EOFFSET (below start or above next); a store whose rows live
 * elsewhere (pgstore with a loop) may answer CAIRN_EPENDING: it is
 * fetching them off the loop and wakes its owner when they are in (ask
 * again then), or a failure of that fetch (CAIRN_EDATABASE). *out must be
 * released with store_region_release() (also after a failure). */
__attribute__((warn_unused_result)) static inline int
store_read(struct store *s, int64_t offset, size_t max_bytes, struct store_region *out)
{
  return s->ops->read(s, offset, max_bytes, out);
}

/* The offset of the first record whose timestamp is >= timestamp; the log
 * end (next_offset) if there is none. Returns 0 or a negative code
 * (CAIRN_EPENDING as store_read). */
__attribute__((warn_unused_result)) static inline int
store_lookup_time(struct store *s, int64_t timestamp, int64_t *offset)
{
  return s->ops->lookup_time(s, timestamp, offset);
}

/* Makes every batch below up_to (clamped to next_offset) durable and
 * records the durable checkpoint. Blocks in fsync. Returns 0, or a negative
 * code after which the store is fatal (CAIRN_EFATAL from then on). A store
 * written behind by a loop (pgstore with a loop) never blocks: while rows
 * below up_to are not committed it answers CAIRN_EPENDING (nothing is
 * wrong: the commit is under way; info.durable_offset shows it) and tells
 * its owner when it is done (pgstore_opts.on_durable); ask again then. */
__attribute__((warn_unused_result)) static inline int store_flush(struct store *s, int64_t up_to)
{
  return s->ops->flush(s, up_to);
}

/* Removes every batch at or after offset, which must be the start of a
 * Raft entry (a batch boundary whose previous batch ends its entry) within
 * [start, next]: half an entry would be cut at the next recovery anyway.
 * last_index becomes that of the last batch kept. Known gap (plog): when
 * nothing is kept after the prefix was deleted, last_index falls to 0 rather
 * than to the deleted prefix's index. Returns 0, CAIRN_EOFFSET or
 * CAIRN_EINVAL (not an entry boundary). A store written behind by a loop
 * (pgstore with a loop) never blocks: it answers CAIRN_EPENDING while the
 * cut runs off the loop (asked again: CAIRN_EPENDING until it has ended,
 * then 0 or, once, its refusal; pgstore_opts.on_durable tells the end);
 * meanwhile it refuses appends (-EBUSY). */
__attribute__((warn_unused_result)) static inline int store_truncate(struct store *s,
                                                                     int64_t offset)
{
  return s->ops->truncate(s, offset);
}

/* Advances the log start to offset (<= next_offset), deleting the
 * segments wholly below it. If offset > next_offset the store is emptied
 * and restarts at offset (a Raft snapshot install). Returns 0 or a negative
 * code; CAIRN_EPENDING as store_truncate (asked again once done: 0, the
 * start having moved). */
__attribute__((warn_unused_result)) static inline int store_delete_before(struct store *s,
                                                                          int64_t offset)
{
  return s->ops->delete_before(s, offset);
}

/* Empties the log and restarts it at offset (above its end), with every
 * Raft entry up to last_index counted as held (store_info's last_index
 * never goes back): a catch-up whose peer's log starts past this one's end
 * and holds no batch (a LOG_START deleted them all). The entries that
 * appended the deleted batches must then not be applied here again, and
 * with no batch to carry an index, the store keeps it (plog: in its
 * checkpoint; pgstore: in the partition row's prefix_index). A store
 * without the op empties the log as store_delete_before does and keeps
 * its last index. Returns as store_delete_before; CAIRN_EINVAL when
 * offset is not past the log's end (a pgstore asked again after its job
 * ended: 0). */
__attribute__((warn_unused_result)) static inline int store_reset(struct store *s, int64_t offset,
                                                                  uint64_t last_index)
{
  if (s->ops->reset == NULL) {
    return s->ops->delete_before(s, offset);
  }
  return s->ops->reset(s, offset, last_index);
}

/* Applies the store's retention limits (those it was opened with, or
 * store_set_retention's since; total bytes, age
 * by the segments' largest timestamp against now_ms): deletes whole, closed
 * segments, oldest first, and advances the log start; never a segment
 * holding an offset at or above below (the caller's bound: what it has
 * recorded elsewhere, e.g. a replica's producer table; INT64_MAX: none).
 * *deleted counts the segments removed. Returns 0 or a negative code. */
__attribute__((warn_unused_result)) static inline int
store_retention(struct store *s, int64_t now_ms, int64_t below, uint32_t *deleted)
{
  return s->ops->retention(s, now_ms, below, deleted);
}

/* Where the log would start if store_retention ran now without a bound
 * (the log start when nothing is due). Changes nothing. */
static inline int64_t store_retention_point(struct store *s, int64_t now_ms)
{
  return s->ops->retention_point(s, now_ms);
}

/* Replaces the retention limits (0: no limit) from the next
 * store_retention on: a topic's configuration changed while the store is
 * open. Deletes nothing itself. */
static inline void store_set_retention(struct store *s, uint64_t bytes, int64_t ms)
{
  s->retention_bytes = bytes;
  s->retention_ms = ms;
}

/* store_read for a caller that may block (recovery scans, tools): a
 * store that would answer CAIRN_EPENDING fetches the rows on the caller's
 * thread instead. Blocks for as long as the store's database takes. */
__attribute__((warn_unused_result)) static inline int
store_read_wait(struct store *s, int64_t offset, size_t max_bytes, struct store_region *out)
{
  if (s->ops->read_blocking != NULL) {
    return s->ops->read_blocking(s, offset, max_bytes, out);
  }
  return s->ops->read(s, offset, max_bytes, out);
}

static inline void store_info(struct store *s, struct store_info *out) { s->ops->info(s, out); }

/* Closes and frees the store (the object and everything it owns; files stay
 * on disk). Regions still pinned stay readable until released. */
static inline void store_close(struct store *s) { s->ops->close(s); }

/* store_close without the flush that makes a partition log's close leave
 * nothing to recover (an fdatasync of its active segment and indexes, then
 * a checkpoint: ~5 fsyncs): for a node stopping thousands of replicas,
 * whose Raft log still holds every entry the store has not made durable
 * (a Raft log is trimmed only past a snapshot, taken after a flush). The
 * next open recovers the unflushed tail as after a SIGKILL; the caller
 * syncs the file system once after the last close (parts.h). */
static inline void store_close_unflushed(struct store *s)
{
  s->close_unflushed = true;
  s->ops->close(s);
}

/* The last failure's message. Returns borrowed (valid until the next call
 * on s). */
static inline const char *store_errmsg(const struct store *s) { return s->errmsg; }

/* ---- store kinds ---- */

/* Where a topic's partitions keep their log (the metadata's topic
 * config; values are stored: never renumber). */
enum store_kind { STORE_KIND_FILE = 0, STORE_KIND_POSTGRESQL = 1 };

/* "file" or "postgresql"; "?" for a value this build does not know.
 * Returns a static string. */
const char *store_kind_name(uint32_t kind);

/* Parses a kind's name (NULL or "": file). Returns 0 or CAIRN_EINVAL. */
__attribute__((warn_unused_result)) int store_kind_parse(const char *name, uint32_t *kind);

/* ---- helpers for implementations ---- */

/* Checks the n batches of one entry before any is written (batch_verify,
 * and that offsets from next on stay below INT64_MAX). Returns 0 or a
 * negative code with msg naming the batch. Borrows everything. */
__attribute__((warn_unused_result)) int store_validate_entry(const struct store_batch *batches,
                                                             size_t n, size_t max_batch_bytes,
                                                             int64_t next, char *msg,
                                                             size_t msglen);

/* Looks in one stamped batch for the first record at or after start whose
 * timestamp is >= timestamp (a compressed batch answers its own base, or
 * start). Returns 1 with *offset set, 0 if it has none, or a negative code
 * with msg filled. Borrows data. */
__attribute__((warn_unused_result)) int store_batch_find_time(const uint8_t *data, size_t len,
                                                              int64_t start, int64_t timestamp,
                                                              int64_t *offset, char *msg,
                                                              size_t msglen);

#endif
