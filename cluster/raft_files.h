/* raft_files.h - checks a canonical/raft 0.15 raft_uv directory before raft
 * opens it: repairs a torn tail of the newest open segment, refuses any
 * other damage with a message naming the file and byte offset.
 *
 * Why: raft 0.15's loader (uv_segment.c, uvSegmentLoadOpen) frees an open
 * segment's buffer when a batch after the first valid one cannot be read
 * (a short read: the file ends inside a batch, or fewer than 16 bytes
 * follow the last batch; or an entry type it does not know), while the
 * entries already taken from that buffer still point into it;
 * uvSegmentLoadAll then frees the same buffer again through those entries:
 * glibc aborts the process with "double free or corruption". And where a
 * batch fails its checksum, the loader keeps the batches before it and
 * silently drops the rest of the segment, valid batches included; with
 * auto-recovery (on by default) it even moves whole corrupt closed segments
 * aside. A replica that forgets entries it reported durable can elect a
 * leader that lacks committed entries, so none of that may happen quietly.
 *
 * On-disk format (raft 0.15, UV__DISK_FORMAT 1; every integer little
 * endian; checksums are raft's own CRC-32: polynomial 0x04c11db7, MSB
 * first, initial value 0, no final xor):
 *
 *   metadata1, metadata2   32 bytes: u64 format 1, u64 version (> 0, the
 *                          newer file has the larger one), u64 term,
 *                          u64 voted_for. No checksum. A file shorter
 *                          than 32 bytes is a torn write: raft deletes it.
 *   open-N                 the log being appended to (N: a counter);
 *   SSSSSSSSSSSSSSSS-EEEEEEEEEEEEEEEE
 *                          a closed segment holding entries S..E (16-digit
 *                          zero-padded indexes), truncated to its batches.
 *     segment:  u64 format 1, then batches back to back:
 *     batch:    u32 header crc, u32 data crc (one u64 word), then the
 *               header: u64 n (1..262144 entries), per entry u64 term,
 *               u8 type (1 command, 2 barrier, 3 change), 3 bytes unused,
 *               u32 length; the header crc covers these 8 + 16n bytes.
 *               Then the entries' data, the data crc covering sum(length)
 *               bytes (raft writes each entry padded to 8 but reads the
 *               lengths unpadded; every writer pads, see raft-0.15.md).
 *     An open segment is preallocated and zero-filled: where the next
 *     batch would start, a zero entry count (and zeros to the end) ends
 *     it. A never-written open segment is all zeros (raft deletes it).
 *   snapshot-T-I-MS.meta   u64 format 1, u64 crc (low 32 bits), u64
 *                          configuration index, u64 configuration length
 *                          L (1..1 MiB), L bytes of configuration; the crc
 *                          covers the index, the length and the L bytes.
 *   snapshot-T-I-MS        the snapshot data (no checksum in 0.15).
 *
 * What is repaired, and why that is safe: damage in an OPEN segment (a
 * batch that is cut short, fails a checksum, or has an implausible header;
 * a tail of fewer than 16 bytes; stray bytes after the end marker) when no
 * valid batch follows it in that segment and no later open segment holds
 * a batch. raft_uv appends sequentially and reports an entry durable only
 * after its write completed, and it rewrites the partial last block with
 * the same bytes for what was already there; so a write that was torn by
 * a crash damages only bytes after everything this replica ever reported
 * durable. The segment is truncated to its last valid batch (to 0 bytes if
 * it has none, which raft treats as never written). This is also what raft
 * itself would keep; the checker only makes sure raft gets there without
 * the double free. The checker cannot tell a torn write from media damage
 * that happens to hit the last batches; it assumes the former, as raft
 * does.
 *
 * What is refused (CAIRN_ERAFTFILES, nothing changed): any damage in a
 * closed segment (or an entry count that does not match its name); damage
 * in an open segment followed by a valid batch (not a torn tail: entries
 * after it were durable); metadata raft cannot use (wrong size, format or
 * a zero version, both at the same version, or none usable while the log
 * holds segments: the term and vote would be lost); a damaged newest
 * snapshot metadata file.
 *
 * Context: blocking file I/O; the loop thread before raft_init (which reads
 * the metadata) or any thread that owns the directory. */
#ifndef CAIRN_RAFT_FILES_H
#define CAIRN_RAFT_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RAFT_FILES_FORMAT 1
#define RAFT_FILES_ERRMSG_SIZE 512
/* raft's own bound on one batch's entry count (UV__MAX_SEGMENT_SIZE / 32). */
#define RAFT_FILES_MAX_BATCH_ENTRIES (8u * 1024 * 1024 / 32)
/* Larger segment files are refused rather than read into memory. */
#define RAFT_FILES_MAX_FILE_BYTES ((size_t)1 << 30)

/* What one segment's bytes hold (raft_files_scan). */
enum raft_files_verdict {
  RAFT_FILES_CLEAN,   /* raft loads it as is */
  RAFT_FILES_TORN,    /* damage with nothing valid after it: cut at good_end */
  RAFT_FILES_DAMAGED, /* damage followed by a valid batch, or in a closed segment */
};

struct raft_files_scan {
  enum raft_files_verdict verdict;
  uint64_t entries;   /* entries in the valid batches before good_end */
  unsigned batches;   /* valid batches before good_end */
  size_t good_end;    /* byte after the last valid batch (8 if none; 0 if empty) */
  size_t bad_at;      /* TORN, DAMAGED: where the damage starts */
  size_t valid_after; /* DAMAGED open segment: a valid batch starting here */
  char why[128];      /* TORN, DAMAGED: what is wrong at bad_at */
};

/* The outcome of raft_files_check. */
struct raft_files_report {
  unsigned segments;                   /* segment files parsed */
  uint64_t entries;                    /* entries in them, after any repair */
  unsigned repaired;                   /* open segments cut at a torn tail */
  char note[RAFT_FILES_ERRMSG_SIZE];   /* what was repaired, if anything */
  char errmsg[RAFT_FILES_ERRMSG_SIZE]; /* why the check failed */
};

/* Checks every raft file in dir (a raft_uv directory) and repairs a torn
 * tail of an open segment (truncate, then fsync). Returns 0 when raft 0.15
 * can load the directory without losing a valid batch (rep->repaired says
 * whether something was cut, rep->note what), CAIRN_ERAFTFILES when it
 * refuses (rep->errmsg: "<dir>/<file>: batch at byte N: ..."; nothing was
 * changed), or a negative errno when a file could not be read, truncated
 * or synced (rep->errmsg says which). A missing or empty dir is fine.
 * Ownership: borrows dir; rep is the caller's. Context: blocking, see
 * above. */
__attribute__((warn_unused_result)) int raft_files_check(const char *dir,
                                                         struct raft_files_report *rep);

/* Scans one segment's bytes (pure, no I/O). open: an open-N segment (zero
 * tail allowed, damage at the tail is TORN); otherwise closed, and
 * want_entries (0: any) is the count its name promises. Ownership: borrows
 * buf. Context: any thread. */
void raft_files_scan(const uint8_t *buf, size_t len, bool open, uint64_t want_entries,
                     struct raft_files_scan *s);

/* raft 0.15's CRC-32 of n bytes at p, continuing from crc (0 to start).
 * Context: any thread. */
uint32_t raft_files_crc32(const void *p, size_t n, uint32_t crc);

#endif
