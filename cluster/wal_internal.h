/* wal_internal.h - what wal.c (the write path) and wal_recover.c (replay at
 * open) share: the byte layout, the in-memory index and the replay rules.
 * Not for other modules.
 *
 * Byte layout (every integer little endian; docs/format.md):
 *
 *   segment file wal-SSSSSSSSSSSSSSSS.log (S: 16 hex digits, the sequence)
 *     header, 24 bytes:
 *       0  8  magic "CAIRNWAL"
 *       8  8  u64 sequence (the file name's)
 *      16  4  u32 format version (1, or WAL_FORMAT_VERSION = 2)
 *      20  4  u32 CRC-32C of bytes 0..20
 *     then records back to back; in version 2 the file may go on past the
 *     segment's last record with bytes of the file's previous life (a
 *     recycled file: see "Recycling" in wal.h).
 *
 *   record, 40-byte header then len bytes of payload:
 *       0  4  u32 CRC-32C of bytes 4..40+len; version 2: seeded with the
 *             CRC-32C of the segment's sequence (8 bytes, little endian),
 *             so that a record of a recycled file's previous life fails it
 *       4  4  u32 len (<= WAL_MAX_PAYLOAD)
 *       8  1  u8 type (enum wal_rec_type)
 *       9  1  u8 ENTRY, MOVE: the Raft entry type; META: flags
 *             (WAL_META_RESET); others 0
 *      10  2  reserved, 0
 *      12  4  u32 job_back: bytes from the first byte the same write job
 *             wrote to this segment back to this record (recovery tells a
 *             torn tail from damage with it)
 *      16  8  u64 group id
 *      24  8  u64 ENTRY, MOVE, TRUNCATE: the Raft index; others 0
 *      32  8  u64 ENTRY, MOVE: the entry's term; others 0
 *     payload: ENTRY, MOVE: the entry's data; META: 5 x u64 term, vote,
 *     snapshot index, snapshot term, first index; TRUNCATE, REMOVE: none.
 *
 *   END (version 2 only, len 0, all fields 0) closes a segment: it is the
 *   last record of every segment but the newest (bytes after it are
 *   stale), and a newest segment that ends with one takes no more records.
 *
 *   MOVE is a live entry copied forward by the cleaner (wal_clean.c): the
 *   same entry, at a new place. Replay rule: the group holds that index
 *   from here on, at this record, whatever it held before; entries may
 *   arrive out of index order (a MOVE of an index below or past what the
 *   replay has seen), leaving holes that later MOVE records fill. A hole
 *   left at the end of the replay is damage.
 */
#ifndef CAIRN_WAL_INTERNAL_H
#define CAIRN_WAL_INTERNAL_H

#include "cluster/wal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define WAL_SEG_HEADER 24
#define WAL_REC_HEADER 40
#define WAL_META_PAYLOAD 40
#define WAL_MAGIC "CAIRNWAL"
#define WAL_META_RESET 1 /* META flags (byte 9): drop every entry, next = first */

enum wal_rec_type {
  WAL_REC_ENTRY = 1,
  WAL_REC_TRUNCATE = 2,
  WAL_REC_META = 3,
  WAL_REC_REMOVE = 4,
  WAL_REC_MOVE = 5,
  WAL_REC_END = 6,
};

/* Spare files kept for recycling (wal.h, "Recycling"). A dropped
 * segment's file becomes one only if it is at least half a segment long
 * (one the cleaner sealed small is not worth the place). */
#define WAL_SPARES_MAX 1

/* The most index slots one replayed record may leave unfilled in its
 * group (holes that MOVE records fill later, or a later META or TRUNCATE
 * drops); more is damage, refused before it is allocated. No bound on
 * the files' size limits the holes of a whole replay: one META record
 * drops any number of them. So a directory of records forged with valid
 * checksums can make a replay allocate up to WAL_MAX_HOLES slots per
 * record; damage never passes the checksums. */
#define WAL_MAX_HOLES ((uint64_t)1 << 20)

/* Where one entry's record is. */
struct wal_loc {
  uint64_t term;
  uint64_t seq; /* segment; 0: a hole (replay only: not seen yet) */
  uint64_t off; /* record start in the segment */
  uint32_t len; /* payload bytes */
  uint8_t type;
};

struct wal_group {
  uint64_t id;
  uint64_t term, vote, snap_index, snap_term;
  uint64_t first;       /* index of locs[head] */
  struct wal_loc *locs; /* live entries: locs[head .. head+n) */
  size_t head, n, cap;
  bool has_meta;
  uint64_t meta_seq; /* segment of the current META record */
};

struct wal_seg {
  uint64_t seq;
  int fd;           /* -1 until the job that creates the file ends */
  uint32_t version; /* of its header: 1 (read only) or WAL_FORMAT_VERSION */
  uint32_t seed;    /* its records' CRC seed (wal_seg_seed) */
  bool sealed;      /* ends with an END record: takes no more records */
  uint64_t size;    /* bytes assigned, pending included */
  uint64_t written; /* bytes written and fdatasynced */
  uint64_t file_bytes; /* the file's length on disk (a recycled file's may pass size) */
  uint64_t entry_refs, meta_refs;
  uint64_t live_bytes;  /* bytes of the records those references name */
  uint64_t release_lsn; /* the record that dropped the last reference */
  uint64_t dropped_ms;  /* uv_now() when a reference last went */
};

/* Bytes bound for one segment in one job. */
#define WAL_CHUNK_MIN 4096u
#define WAL_CHUNK_HINT_MAX (4u << 20) /* a new chunk never starts larger */

struct wal_chunk {
  uint64_t seq;
  uint64_t off; /* where buf goes in the file */
  uint8_t *buf;
  size_t len, cap;
  bool create;    /* the job creates the file (buf starts with its header) */
  uint64_t spare; /* create: the spare file it recycles (its id), 0: a new file */
  int fd;         /* the file's fd; for a created file, set by the worker */
};

/* A spare file: spare-IIIIIIIIIIIIIIII.log, I the sequence of the segment
 * whose file it was. */
struct wal_spare {
  uint64_t id;
  uint64_t bytes; /* its length */
};

/* A segment file the next job drops: unlinked, or renamed to a spare. */
struct wal_drop {
  char *path;
  uint64_t spare; /* 0: unlink; else rename to that spare */
  uint64_t bytes; /* the file's length (for the spare) */
  bool kept;      /* set by the worker: the rename succeeded */
};

/* A decoded record header (payload not copied). */
struct wal_rec {
  uint32_t len;
  uint8_t type, etype;
  uint32_t job_back;
  uint64_t gid, index, term;
  const uint8_t *payload;
};

/* One write+fsync of everything pending at one loop turn. The worker
 * touches only the job and the files. */
struct wal_job {
  uv_work_t work;
  struct wal *w;
  char *dir;
  struct wal_chunk *chunks;
  size_t nchunks;
  struct wal_drop *drops;
  size_t ndrops;
  struct wal_req *req_head;
  uint64_t end_lsn;
  uint64_t queued_ns, ran_ns, io_done_ns; /* uv_hrtime(): handed over, worker start, worker end */
  int status;
  char errmsg[WAL_ERRMSG_SIZE];
  /* wal_flush_sync waits for the worker with these. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool ran;
};

struct wal {
  uv_loop_t *loop;
  char *dir;
  uint64_t segment_bytes;
  uv_prepare_t prepare;
  bool prepare_on;
  bool closing;
  bool in_done; /* wal_job_done is firing callbacks */
  wal_close_cb close_cb;
  void *close_data;
  int fatal;
  char errmsg[WAL_ERRMSG_SIZE];

  struct wal_group **groups; /* sorted by id */
  size_t ngroups, groups_cap;

  struct wal_seg *segs; /* consecutive sequences, oldest first */
  size_t nsegs, segs_cap;
  uint64_t next_seq; /* for the first segment when there is none */

  struct wal_chunk *pend; /* pending bytes, in file order */
  size_t npend, pend_cap;
  size_t chunk_hint; /* the last job's largest chunk: a new chunk's first allocation */
  struct wal_req *req_head, *req_tail; /* pending requests, in order */
  struct wal_drop *drops;              /* segment files the next job removes or recycles */
  size_t ndrops, drops_cap;
  struct wal_spare spares[WAL_SPARES_MAX]; /* ready for a new segment */
  size_t nspares;
  size_t spares_coming; /* renames to a spare in a job not yet ended */
  struct wal_job *job; /* in flight, or NULL */
  struct wal_clean *clean; /* the cleaner's state (wal_clean.c), or NULL */
  enum wal_clean_mode clean_mode;
  unsigned handles_open; /* prepare and timer, until their close callbacks */

  uint64_t lsn, durable_lsn;
  uint64_t append_ms; /* uv_now() at the last wal_append (the cleaner's pace) */
  struct wal_stats st;
};

/* ---- shared by the write path and replay (wal.c) ---- */

struct wal_group *wal_group_find(const struct wal *w, uint64_t gid);
/* Finds or creates; NULL on ENOMEM. */
struct wal_group *wal_group_get(struct wal *w, uint64_t gid, uint64_t first);
struct wal_seg *wal_seg_find(const struct wal *w, uint64_t seq);
/* Adds segment seq (the next one) as the newest, holding only its header. */
int wal_seg_push(struct wal *w, uint64_t seq);

/* Apply one record to the in-memory state, at (seq, off), dropped
 * references released at lsn. Replay and the write path call the same
 * functions, so a replay ends in the state the writer had. Return 0 or
 * CAIRN_ENOMEM / CAIRN_EINDEX (an entry that does not follow). */
int wal_apply_entry(struct wal *w, uint64_t gid, uint64_t index, uint64_t term, uint8_t type,
                    uint64_t seq, uint64_t off, uint32_t len, uint64_t lsn);
/* A MOVE record: entry index of gid now lives at (seq, off). In the
 * writer the group always holds index; in a replay it may not yet (see
 * the layout's MOVE rule). */
int wal_apply_move(struct wal *w, uint64_t gid, uint64_t index, uint64_t term, uint8_t type,
                   uint64_t seq, uint64_t off, uint32_t len, uint64_t lsn);
/* At the end of a replay: CAIRN_ECORRUPT (errmsg filled) if a group still
 * has a hole. */
int wal_check_holes(struct wal *w);
int wal_apply_truncate(struct wal *w, uint64_t gid, uint64_t index, uint64_t lsn);
int wal_apply_meta(struct wal *w, uint64_t gid, const uint64_t meta[5], bool reset, uint64_t seq,
                   uint64_t lsn);
void wal_apply_remove(struct wal *w, uint64_t gid, uint64_t lsn);

/* Decodes and checks the record at buf[off..len) of segment s (its format
 * version and CRC seed): structure and CRC only. Returns true, or false
 * with why filled. */
bool wal_rec_decode(const struct wal_seg *s, const uint8_t *buf, size_t len, size_t off,
                    struct wal_rec *r, char *why, size_t why_len);
/* Checks a segment header; returns its format version (1 or 2), or 0. */
uint32_t wal_seg_header_ok(const uint8_t *buf, size_t len, uint64_t seq);
/* Writes a header of format WAL_FORMAT_VERSION. */
void wal_seg_header_put(uint8_t *p, uint64_t seq);
/* The CRC seed of records in a segment of that version and sequence. */
uint32_t wal_seg_seed(uint32_t version, uint64_t seq);
void wal_seg_path(const struct wal *w, uint64_t seq, char *buf, size_t len);
void wal_seg_name(uint64_t seq, char *buf, size_t len);
void wal_spare_name(uint64_t id, char *buf, size_t len);

/* Makes room for one more element in *arrp (an array pointer of n elements
 * of elem bytes, *cap allocated), doubling. Returns 0 or CAIRN_ENOMEM. */
int wal_grow(void *arrp, size_t *cap, size_t n, size_t elem);

/* vsnprintf into buf: messages that name paths may be cut short, which is
 * fine for a message (snprintf's truncation warning is not). */
void wal_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Encodes a META record of gid with these fields and applies it. */
int wal_emit_meta(struct wal *w, bool reset, uint64_t gid, uint64_t term, uint64_t vote,
                  uint64_t snap_index, uint64_t snap_term, uint64_t first);
/* Closes segment s (the newest, of WAL_FORMAT_VERSION) with an END record:
 * the next record starts a new segment. Returns 0 or CAIRN_ENOMEM. */
int wal_seal(struct wal *w, struct wal_seg *s);
/* Encodes one record into the pending buffer; *seq, *off: where it lands.
 * Advances the log's lsn. */
int wal_emit(struct wal *w, uint8_t type, uint8_t etype, uint64_t gid, uint64_t index,
             uint64_t term, const void *payload, uint32_t len, uint64_t *seq, uint64_t *off);
/* Cancels what is pending and closes the handles, then frees, once
 * nothing is in flight (the write job, the cleaner's read). */
void wal_finish_close(struct wal *w);
/* wal_finish_close if the log is closing and nothing is in flight. */
void wal_close_if_drained(struct wal *w);

/* ---- wal_job.c ---- */

/* Makes sure pending work goes out at this loop turn's end. */
void wal_kick(struct wal *w);
/* Fires the callbacks of the list r, in order, with status. */
void wal_fire(struct wal_req *r, int status);
/* Takes the pending requests off the log. */
struct wal_req *wal_take_reqs(struct wal *w);
/* Latches the log fatal with msg (the first failure wins). */
void wal_latch(struct wal *w, int err, const char *msg);
/* Drops segments no group needs any more; starts cleaning when it pays. */
void wal_collect(struct wal *w);

/* ---- wal_clean.c: copy-forward cleaning of the oldest segment ---- */

/* Sets up the cleaner (its timer). Returns 0 or a libuv error. */
int wal_clean_init(struct wal *w);
/* Whether the cleaner has a read in flight (close and revive wait). */
bool wal_clean_busy(const struct wal *w);
/* Called by wal_collect when the oldest segment holds live entries: starts
 * or continues cleaning it when it pays (bounded: one read window at a
 * time), or arms the timer to look again. */
void wal_clean_consider(struct wal *w);
/* Whether segment seq is being read by the cleaner (not to be dropped). */
bool wal_clean_reading(const struct wal *w, uint64_t seq);
/* Forgets the cleaning in progress (revive: the segments are reloaded). */
void wal_clean_reset(struct wal *w);
/* Closes the timer (counted in handles_open) and frees the state. */
void wal_clean_close(struct wal *w, uv_close_cb cb);

/* ---- wal_recover.c ---- */

/* Replays dir into w (empty, allocated). Returns 0, CAIRN_ECORRUPT,
 * CAIRN_ENOMEM or -errno, with w->errmsg filled. Blocking. */
int wal_recover(struct wal *w);

#endif
