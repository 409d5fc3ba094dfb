/* index.h - a segment's sparse index, kept in memory and mirrored to a
 * file. Two kinds share the code:
 *   offset index (.index):     key = offset relative to the segment base,
 *                              val = byte position of that batch
 *   time index   (.timeindex): key = a timestamp (ms), val = relative offset
 *                              of the batch whose max_timestamp it is
 * Keys strictly increase, and so do vals.
 *
 * File layout (little-endian, version INDEX_VERSION = 1):
 *   0  u32 magic       "CIX1" (offset) or "CTX1" (time), as INDEX_MAGIC_*
 *   4  u16 version
 *   6  u16 entry_size  8 (offset: u32 rel, u32 pos) or 12 (time: i64 ts, u32 rel)
 *   8  i64 base_offset of the segment
 *  16  u32 crc32c of bytes [0, 16)
 *  20  entries, back to back
 * Entries carry no checksum: index_load() checks them for order and the
 * segment checks the last one against the log; an index that fails is
 * rebuilt from the log, since an index is derived data.
 *
 * Entries are appended in memory; index_persist() writes the ones not yet
 * in the file (the log calls it on flush, roll and close).
 *
 * Descriptor: the file is open only while something is owed to it (entries
 * written but not yet fdatasynced, or a sync on the thread pool holding it,
 * index_pin). Once all it holds is synced and nobody holds it, index_idle()
 * closes it, and the next write opens it again: a node with 10,000 mostly
 * idle partition replicas holds one descriptor per replica (the segment's
 * log) instead of three, under hard limits like 20,000 (docs/performance.md,
 * "10,000 partitions"). */
#ifndef CAIRN_INDEX_H
#define CAIRN_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INDEX_VERSION 1
#define INDEX_MAGIC_OFFSET 0x31584943u /* "CIX1" */
#define INDEX_MAGIC_TIME 0x31585443u   /* "CTX1" */
#define INDEX_HEADER_SIZE 20

enum index_kind { INDEX_OFFSET, INDEX_TIME };

struct index_entry {
  int64_t key;
  uint32_t val;
};

struct index {
  enum index_kind kind;
  int fd;        /* -1 while closed (idle); see "Descriptor" above */
  char *path;    /* owned */
  unsigned pins; /* syncs in flight holding fd (index_pin) */
  int64_t base_offset;
  struct index_entry *entries;
  size_t count;
  size_t cap;
  size_t persisted; /* entries [0, persisted) are in the file */
  size_t synced;    /* entries [0, synced) are fdatasynced */
  bool rewrite;     /* the next persist rewrites the file whole (index_trust_disk) */
  int64_t file_bytes; /* the file's size as this process last set or saw it; -1: unknown */
};

/* After a syncfs made the file durable as this process found it
 * (plog_opts.disk_synced): entries loaded from the file count as synced;
 * an index rebuilt since open (index_clear) is rewritten whole, from a
 * fresh header, by the next persist, so every write it owes goes through
 * the descriptor that syncs it (a writeback error is reported to the
 * descriptors open when it happens). Closes the file unless pinned. */
void index_trust_disk(struct index *ix);

/* Opens (creating if missing) the index file at path and loads it. Caller
 * allocates ix. Returns 0 with the entries loaded, or CAIRN_ECORRUPT when
 * the file exists but is malformed (bad header, partial entry, entries out of
 * order): ix is then open and empty, and the file truncated to a fresh
 * header, ready to be rebuilt. Other failures: -errno, ix closed. */
__attribute__((warn_unused_result)) int index_open(struct index *ix, enum index_kind kind,
                                                   const char *path, int64_t base_offset);

/* Closes the file and frees the entries (does not persist). Nothing may
 * hold a pin. */
void index_close(struct index *ix);

/* Opens the file again if it was closed while idle, and pins its
 * descriptor for a sync on another thread: *fd stays open until
 * index_unpin. Returns 0 or -errno (nothing pinned then). Context: the
 * index's owner. */
__attribute__((warn_unused_result)) int index_pin(struct index *ix, int *fd);

/* Drops a pin taken by index_pin, then index_idle. */
void index_unpin(struct index *ix);

/* Closes the descriptor when nothing is owed to the file (every persisted
 * entry synced, the file's header too) and no pin holds it. Returns
 * whether the file is now closed. */
bool index_idle(struct index *ix);

/* Appends an entry whose key and val exceed the last one's. Returns 0,
 * CAIRN_EINVAL (out of order) or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int index_add(struct index *ix, int64_t key, uint32_t val);

/* The last entry whose key <= key; false if there is none. */
bool index_floor(const struct index *ix, int64_t key, struct index_entry *out);

/* The last entry whose val <= val; false if there is none. */
bool index_floor_val(const struct index *ix, uint32_t val, struct index_entry *out);

/* The last entry, if any. */
bool index_last(const struct index *ix, struct index_entry *out);

/* Drops entries whose val >= val (after a log truncation), in memory and
 * in the file. Returns 0 or -errno. */
__attribute__((warn_unused_result)) int index_truncate_val(struct index *ix, uint32_t val);

/* Drops every entry (before a rebuild). Returns 0 or -errno. */
__attribute__((warn_unused_result)) int index_clear(struct index *ix);

/* Writes the entries not yet in the file; fdatasyncs it when sync is true.
 * Returns 0 or -errno. Blocks. */
__attribute__((warn_unused_result)) int index_persist(struct index *ix, bool sync);

/* Records that the file's entries [0, n) were fdatasynced by someone
 * else (a log sync on the thread pool, plog_sync.h); never lowers what is
 * recorded. Context: the index's owner. */
void index_note_synced(struct index *ix, size_t n);

#endif
