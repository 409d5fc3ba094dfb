/* segment.h - one segment of a partition log: the .log file of batches and
 * its two sparse indexes. The plog owns its segments; a read region pins a
 * segment (segment_ref) so its fd outlives a deletion until released.
 *
 * A segment knows nothing of checkpoints or other segments: plog.c decides
 * when to roll, sync and delete, plog_recover.c when to scan. */
#ifndef CAIRN_SEGMENT_H
#define CAIRN_SEGMENT_H

#include "format/batch.h"
#include "storage/index.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define SEGMENT_NAME_DIGITS 20
/* Start writeback every 1 MiB written: each Raft log fdatasync on the
 * same disk (a device cache flush) waits for the writeback in flight, so
 * the smaller the pieces, the less an acknowledgement waits behind them
 * (8 MiB had twice the ack p99 under load; docs/performance.md, "The
 * partition log's writeback and the ack tail under load"). */
#define SEGMENT_WRITEBACK_BYTES (1u << 20)
#define SEGMENT_NAME_MAX 48

struct segment {
  int64_t base_offset;
  int64_t next_offset;     /* offset after the last batch */
  uint64_t size;           /* bytes of whole, valid batches */
  uint64_t synced_size;    /* bytes known fdatasynced */
  uint64_t kicked_size;    /* bytes handed to early writeback */
  int64_t max_timestamp;   /* INT64_MIN when empty */
  int64_t created_ms;      /* wall time of the first append (age roll) */
  uint64_t last_index;     /* source index of the last batch from Raft (non-zero),
                              0 if none */
  bool index_malformed;     /* segment_open found an index file malformed (not merely unwritten) */
  uint32_t index_interval; /* bytes between offset index entries */
  uint64_t last_indexed;   /* position of the last offset index entry */
  int64_t max_ts_rel;      /* relative offset of the batch holding max_timestamp */
  /* CRC-32C of the file's bytes [0, crc_prefix_size), kept so a manifest
   * only reads what was appended since the last one (bytes below size never
   * change; truncation drops the cache). */
  uint32_t crc_prefix;
  uint64_t crc_prefix_size;
  int fd;
  struct index oix;
  struct index tix;
  int refs;     /* the owning log's reference + one per pinned region */
  bool removed; /* files unlinked; fd closes on the last unref */
  char *dir; /* owned copy of the partition directory */
};

/* Formats "<20-digit base>.<ext>" into buf (SEGMENT_NAME_MAX bytes). */
void segment_name(char *buf, int64_t base_offset, const char *ext);

/* Parses a segment file name "<20 digits>.<ext>"; returns true and the base
 * offset when name has exactly that form. */
bool segment_parse_name(const char *name, const char *ext, int64_t *base_offset);

/* Creates a new, empty segment at base_offset in dir (the .log must not
 * exist). On success *out is owned by the caller (free with
 * segment_unref()). Returns 0 or -errno / CAIRN_EEXIST. */
__attribute__((warn_unused_result)) int segment_create(const char *dir, int64_t base_offset,
                                                       uint32_t index_interval,
                                                       struct segment **out);

/* Opens an existing segment without reading its batches: size is the
 * file's size and next_offset unknown (= base) until segment_scan() or
 * segment_check_tail(). *indexes_ok is false when an index was missing
 * or malformed (it is then empty, ready for a rebuild). Returns 0 or -errno. */
__attribute__((warn_unused_result)) int segment_open(const char *dir, int64_t base_offset,
                                                     uint32_t index_interval,
                                                     struct segment **out, bool *indexes_ok);

/* Pins s (a read region holds it). */
void segment_ref(struct segment *s);

/* Drops a pin; the last one closes the files and frees s. */
void segment_unref(struct segment *s);

/* What a scan found. */
struct segment_scan {
  uint64_t end;          /* position after the last complete Raft entry */
  int64_t next_offset;   /* offset after it */
  uint64_t last_index;   /* last non-zero source index up to end (prev_index if none) */
  uint64_t valid_end;    /* position after the last valid batch */
  uint32_t incomplete;   /* valid batches after end (an entry cut short) */
  int damage;            /* 0, or why the scan stopped before the file end */
  uint64_t damage_pos;
  uint64_t file_size;
};

/* Reads batches from position pos (a batch boundary holding offset
 * expect_offset) to the file's end, checking each one (CRC, length, the
 * offset sequence, source indexes that never go back) and adding index
 * entries past the indexes' last ones. prev_index is the source index of
 * the batch before pos. Stops at the first bad batch. Does not change the
 * file. Returns 0 (findings in *out) or -errno for an I/O failure. */
__attribute__((warn_unused_result)) int segment_scan(struct segment *s, uint64_t pos,
                                                     int64_t expect_offset, uint64_t prev_index,
                                                     uint32_t max_batch_bytes,
                                                     struct segment_scan *out);

/* Cuts the segment at position pos (a batch boundary found by a scan or
 * segment_locate) with next_offset the offset there, makes the cut durable
 * (fdatasync, so cut batches cannot come back after a crash) and drops index
 * entries at or past it; re-derives last_index and the timestamp summary
 * from the batches kept (last_index 0 when none is). Returns 0 or -errno. */
__attribute__((warn_unused_result)) int segment_truncate(struct segment *s, uint64_t pos,
                                                         int64_t next_offset);

/* Checks a closed segment cheaply: scans only from its last offset index
 * entry to the file's end. Returns 0 when that tail is whole and agrees with
 * the indexes (the segment's state is then set), CAIRN_ECORRUPT when it
 * does not (the caller then does a full segment_scan), or -errno. */
__attribute__((warn_unused_result)) int segment_check_tail(struct segment *s,
                                                           uint32_t max_batch_bytes);

/* Appends n batches with one pwritev at the end: iov holds two pieces per
 * batch (its stamped broker fields, then the rest); hdrs are the batches'
 * headers as stamped. Updates size, next offset, timestamps and the
 * in-memory indexes. On failure the file's tail is unknown: the caller
 * must treat the log as fatal. Returns 0 or -errno. */
__attribute__((warn_unused_result)) int segment_append(struct segment *s, const struct iovec *iov,
                                                       const struct batch_header *hdrs, size_t n,
                                                       int64_t now_ms);

/* Reads the header of the batch at pos. Returns 0, CAIRN_ETRUNCATED past
 * the end, or -errno. */
__attribute__((warn_unused_result)) int segment_read_header(const struct segment *s, uint64_t pos,
                                                            struct batch_header *h);

/* Finds the batch holding offset (base_offset <= offset < next_offset):
 * its position and header. Returns 0, CAIRN_EOFFSET, or an I/O error. */
__attribute__((warn_unused_result)) int segment_locate(const struct segment *s, int64_t offset,
                                                       uint64_t *pos, struct batch_header *h);

/* The end of the run of whole batches from pos (a batch boundary) that
 * fits in max_bytes, but at least one batch; *next_offset the offset after
 * it. Returns 0 or an I/O error. */
__attribute__((warn_unused_result)) int segment_span(const struct segment *s, uint64_t pos,
                                                     size_t max_bytes, uint64_t *end,
                                                     int64_t *next_offset);

/* The position of the first batch whose max_timestamp >= ts, with its
 * header; CAIRN_ENOTFOUND if none. */
__attribute__((warn_unused_result)) int segment_find_time(const struct segment *s, int64_t ts,
                                                          uint64_t *pos, struct batch_header *h);

/* Writes pending index entries and fdatasyncs the log and both indexes.
 * Returns 0 or -errno. Blocks. */
__attribute__((warn_unused_result)) int segment_sync(struct segment *s);

/* After a syncfs made the segment's files durable as this process found
 * them (plog_opts.disk_synced): its bytes count as synced; its indexes as
 * index_trust_disk says (loaded entries synced, rebuilt ones written and
 * synced by the next persist); their files are closed. */
void segment_trust_disk(struct segment *s);

/* A segment's share of a log sync run off the loop thread (plog_sync.h).
 * segment_sync_capture() fills it on the loop; segment_sync_run() and
 * segment_sync_crc() read only what it holds (fds, sizes, CRC state), so
 * they may run on any thread while the loop appends past size; the loop
 * then records the outcome (segment_sync_commit) and drops the pin
 * (segment_sync_release). Bytes below size never change meanwhile: only a
 * truncation would change them, and the log waits for the sync first. */
struct segment_sync {
  struct segment *s;       /* pinned from capture to release */
  int fd, oix_fd, tix_fd;  /* s's descriptors, open while s is pinned (an
                            * index's only when its sync_* is set: index_pin) */
  int64_t base_offset;
  int64_t next_offset;     /* at capture */
  uint64_t last_index;     /* at capture */
  uint64_t size;           /* bytes at capture: what the run makes durable */
  size_t oix_persisted;    /* index entries in the files at capture */
  size_t tix_persisted;
  bool sync_log, sync_oix, sync_tix; /* what holds bytes not yet fdatasynced */
  uint32_t crc;            /* CRC-32C of the log's bytes [0, crc_size) */
  uint64_t crc_size;       /* segment_sync_crc() brings it to size */
};

/* Writes s's pending index entries (no fsync: a page-cache write) and
 * captures what a sync of s needs into *ss, pinning s and the index files
 * it must sync (reopened if they were closed while idle). Context: the loop
 * (the segment's owner). Returns 0, or -errno from the index write or
 * reopen (ss is then untouched and nothing pinned: the log is fatal, as
 * after any failed write). */
__attribute__((warn_unused_result)) int segment_sync_capture(struct segment *s,
                                                             struct segment_sync *ss);

/* fdatasyncs what *ss found unsynced: both indexes, then the log. Returns
 * 0 or -errno (fault point FAULT_SEGMENT_SYNC). Blocks. Context: any
 * thread; touches only *ss and the files. */
__attribute__((warn_unused_result)) int segment_sync_run(struct segment_sync *ss);

/* Extends ss->crc over the log's bytes [crc_size, size) (reads them).
 * Returns 0 or a negative code. Blocks. Context: any thread, as above. */
__attribute__((warn_unused_result)) int segment_sync_crc(struct segment_sync *ss);

/* Records a successful run in the segment: synced sizes of the log and
 * indexes, and the CRC cache (never lowering what the loop recorded
 * meanwhile, e.g. a roll's own sync). Context: the loop. */
void segment_sync_commit(const struct segment_sync *ss);

/* Drops the pin taken by segment_sync_capture(). Context: the loop. */
void segment_sync_release(struct segment_sync *ss);

/* Extends crc (of the file's bytes [0, from)) over [from, to) of fd,
 * reading in 1 MiB chunks. Returns 0 or a negative code. Blocks. Context:
 * any thread. */
__attribute__((warn_unused_result)) int segment_crc_extend(int fd, uint32_t crc, uint64_t from,
                                                           uint64_t to, uint32_t *out);

/* Unlinks the segment's files; the fd stays usable until the last unref.
 * Returns 0 or -errno. */
__attribute__((warn_unused_result)) int segment_remove(struct segment *s, const char *dir);

#endif
