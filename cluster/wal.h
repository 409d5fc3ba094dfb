/* wal.h - the node-wide write-ahead log: one log per node holding every
 * Raft group's entries and metadata (term, vote, snapshot index and term),
 * written with one write and one fdatasync per loop turn for all groups
 * that have something pending (group commit). See docs/replication.md for
 * the design and docs/format.md for the byte layout.
 *
 * Records are appended in a total order; each group's state is the replay
 * of its records in that order. A request's callback fires once its
 * record (and every record appended before it) is durable.
 *
 * Write path (all on the loop but the I/O):
 *   wal_append / wal_truncate / wal_set_meta / wal_snapshot / wal_remove
 *     encode the record into the pending buffer of the segment it lands in
 *     (rolling to a new segment when the current one is full), update the
 *     in-memory index at once (reads see it), queue the request;
 *   the prepare handle (once per loop turn) hands everything pending to
 *     one thread-pool job;
 *   the job (wal_job_run, a worker): unlinks segments no group needs any
 *     more (or renames one to a spare: "Recycling"), then per segment
 *     touched: creates it if new (or opens a spare and renames it to the
 *     segment's name, then fsyncs the directory), writes its bytes with
 *     one pwritev, fdatasyncs it (a segment is synced before the next one
 *     is written, so only the newest segment can hold a torn write),
 *     fsyncs the directory if it created or removed a file;
 *   the job's end (loop): on success fires the callbacks in order, drops
 *     segments that became unneeded, starts the next job if more is
 *     pending; on failure latches the log fatal.
 *
 * Failure modes: a failed write or fsync latches the log fatal (as SQLite's
 * pager does: the page cache may have dropped the dirty pages, so a later
 * fsync that succeeds proves nothing). The requests of the failed job and
 * every pending one call back with the error; every later call returns
 * CAIRN_EFATAL; wal_errmsg() says what failed ("wal-...log: pwritev at
 * 4096: No space left on device").
 *
 * Recovery (wal_open): replays every segment in order. Damage in the
 * newest segment that only the last, unsynced job can have left (nothing
 * valid after it that a later job wrote: every record carries the offset
 * of its job's first byte) is a torn tail: the segment ends at the last
 * good record, and the torn job's whole records after it are zeroed.
 * Any other damage (an older version 2 segment that does not end with its
 * END record included) is refused with the file and byte offset
 * (CAIRN_ECORRUPT);
 * cairnd then sets the log aside and has the replicas it held rebuilt
 * (waldamage.h).
 *
 * Segment deletion: each segment counts the live entries and current
 * metadata records in it. A segment whose count is zero, that is not the
 * newest, and whose last reference was dropped by a record that is now
 * durable, is unlinked by the next job, oldest first (deletion is always
 * of a prefix, so a replay never sees a record without the records it
 * depends on). A segment pinned only by metadata records of idle groups
 * gets those records rewritten at the head of the log.
 *
 * Recycling: an fdatasync after a write that grows a file waits for a
 * journal commit (the size and the block map change); one after a write
 * over blocks written before only flushes data, about half the time on
 * ext4 (docs/performance.md). So a segment file no group needs is not
 * always unlinked: while fewer than WAL_SPARES_MAX are kept, one at least
 * half a segment long is renamed to spare-<its sequence>.log, and the next
 * new segment is written over it (renamed to the segment's name first:
 * a spare never holds records of a segment to come). The bytes of
 * the file's previous life stay after the segment's records; two rules
 * keep a replay from taking them (format version 2): every record's
 * checksum is seeded with its segment's sequence, so an old record fails
 * it, and every segment but the newest ends with an END record. A replay
 * takes the spare files on disk (more than WAL_SPARES_MAX are removed).
 *
 * Cleaning (wal_clean.c): an oldest segment still pinned by a few live
 * entries (idle groups' last entries, which Raft keeps behind its
 * snapshots), whose references have not dropped for a while, and whose
 * cleaning pays (while the node appends: its live bytes at most 1/8 of
 * it, or the log over four times its live bytes; on a node with no append
 * for a while also: at most half live, or the log more than a segment
 * beyond its live bytes), is read a window at a time on the thread
 * pool; on the loop each entry it holds that is still live at that very
 * place is appended again, unchanged, as a MOVE record at the head, and
 * the index points at the copy. Once the copies are durable the segment
 * has no reference left and goes as above. A truncation or snapshot that
 * comes while a window is read wins: the copy is made only of an entry
 * the index still places in that segment, and any later record about it
 * follows the copy in the log. On a quiet node the head itself, when it
 * is the only segment and holds enough dead records, is sealed (the next
 * record starts a new segment) and cleaned the same way. Raft sees
 * nothing of it.
 *
 * Invariants (wal_check() asserts them in tests): for each group, its
 * entries are contiguous from first to next-1 (no hole); each segment's
 * refs equal the live entries plus current metadata records located in it,
 * and its live bytes their records' bytes; segments have consecutive
 * sequence numbers.
 *
 * Context: every function on the loop thread that opened the log, unless
 * it says otherwise. */
#ifndef CAIRN_WAL_H
#define CAIRN_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define WAL_FORMAT_VERSION 2
#define WAL_ERRMSG_SIZE 512
/* Indexes (an entry's, a snapshot's, a group's next) stay below this: the
 * write calls refuse one at or above it (CAIRN_EINVAL) and replay takes a
 * record naming one as damage. Raft never gets near; index + 1 must not
 * wrap. */
#define WAL_MAX_INDEX ((uint64_t)1 << 62)
#define WAL_DEFAULT_SEGMENT_BYTES ((uint64_t)16 * 1024 * 1024)
/* The largest payload of one record (a Raft entry): larger appends are
 * refused with CAIRN_ETOOLARGE, larger lengths on disk are damage. */
#define WAL_MAX_PAYLOAD ((uint32_t)64 * 1024 * 1024)
/* Larger segment files are refused rather than read into memory. */
#define WAL_MAX_FILE_BYTES ((uint64_t)1 << 31)

struct wal;
struct wal_req;

/* status: 0 (the record is durable), the error that latched the log fatal,
 * or CAIRN_ECLOSED (the log closed before the record was written). */
typedef void (*wal_cb)(struct wal_req *req, int status);
typedef void (*wal_close_cb)(void *data);

/* One request in flight; the caller allocates it and keeps it until its
 * callback. */
struct wal_req {
  void *data; /* for the caller */
  /* private */
  wal_cb cb;
  uint64_t lsn; /* durable once the log's durable_lsn reaches it */
  struct wal_req *next;
};

/* One entry to append (borrowed for the call) or one read back. */
struct wal_entry {
  uint64_t term;
  uint8_t type; /* the Raft entry type; the log does not interpret it */
  const void *buf;
  uint32_t len;
};

/* A group's state as the log holds it now (durable or pending). */
struct wal_group_info {
  uint64_t term;
  uint64_t vote;
  uint64_t snap_index; /* 0: no snapshot */
  uint64_t snap_term;
  uint64_t first; /* index of the first entry held */
  uint64_t next;  /* index the next append must have; next == first: none */
};

/* When the cleaner copies live entries forward (see "Cleaning"). */
enum wal_clean_mode {
  WAL_CLEAN_AUTO = 0, /* when it pays and the oldest segment is quiet */
  WAL_CLEAN_OFF,      /* never */
  WAL_CLEAN_EAGER,    /* whenever the oldest segment holds a live entry (tests) */
};

/* How long the oldest segment's references must not have dropped before
 * it is cleaned (under AUTO): entries of busy groups die on their own. */
#define WAL_CLEAN_QUIET_MS 1000
/* Bytes of a segment the cleaner reads at a time (a larger record is read
 * whole): what one loop turn looks through and at most what it copies. */
#define WAL_CLEAN_WINDOW ((size_t)1 << 20)
/* The same while the node appends (WAL_CLEAN_QUIET_MS): a smaller write
 * shared with acknowledgements. */
#define WAL_CLEAN_WINDOW_BUSY ((size_t)256 << 10)

struct wal_opts {
  uint64_t segment_bytes; /* roll past this size; 0: WAL_DEFAULT_SEGMENT_BYTES */
  enum wal_clean_mode clean;
};

/* A write job's time in three phases, in microseconds (a histogram each:
 * bucket k counts the jobs that took at most 2^k us, the last bucket also
 * every longer one): handed to the thread pool until a worker ran it
 * (queue), its writes and fdatasyncs (io), the worker done until its
 * callbacks ran on the loop (callback). An acknowledgement waits for all
 * three on the leader and on a follower. */
#define WAL_HIST_BUCKETS 26
enum wal_phase { WAL_PHASE_QUEUE, WAL_PHASE_IO, WAL_PHASE_CALLBACK, WAL_PHASES };

struct wal_phase_hist {
  uint64_t buckets[WAL_HIST_BUCKETS];
  uint64_t count, sum_us;
};

struct wal_stats {
  uint64_t first_seq, last_seq; /* segments on disk or being created */
  uint64_t groups;
  uint64_t jobs;        /* write+fsync jobs completed */
  uint64_t records;     /* records appended since open */
  uint64_t bytes;       /* bytes appended since open */
  uint64_t durable_lsn; /* bytes made durable since open */
  uint64_t segments_deleted;
  uint64_t segments_recycled; /* new segments written over a spare file */
  uint64_t torn_bytes_cut; /* at open */
  uint64_t clean_read_bytes;               /* segment bytes the cleaner read */
  uint64_t clean_moved;                    /* entries it copied forward */
  uint64_t clean_moved_bytes;              /* bytes of MOVE records it appended */
  uint64_t segments_cleaned;               /* segments it read to the end */
  uint64_t meta_rewrites;                  /* META records rewritten to unpin a segment */
  uint64_t total_bytes;                    /* in the segments now */
  uint64_t live_bytes;                     /* of records still needed in them */
  struct wal_phase_hist phase[WAL_PHASES]; /* write jobs that succeeded */
};

/* Opens (creating if needed) the log in dir and replays it, cutting a torn
 * tail of the newest segment. Blocking file I/O: call at node start, before
 * the log is needed. On success *out is owned by the caller (close with
 * wal_close). Returns 0, CAIRN_ECORRUPT (errmsg: "<dir>/<file>: record at
 * byte N: why"), CAIRN_ENOMEM or -errno (errmsg says which file).
 * Ownership: borrows dir and opts (NULL: defaults); errmsg (WAL_ERRMSG_SIZE
 * bytes) is the caller's. */
__attribute__((warn_unused_result)) int wal_open(uv_loop_t *loop, const char *dir,
                                                 const struct wal_opts *opts, struct wal **out,
                                                 char *errmsg);

/* Closes: waits for a job in flight (and the cleaner's read), calls back
 * every request not yet written with CAIRN_ECLOSED (nothing more is
 * written), then calls cb (may be NULL) from the loop and frees the log.
 * Always consumes w. */
void wal_close(struct wal *w, wal_close_cb cb, void *data);

/* Appends n entries (n >= 1) of group gid at index, index+1, ...; index
 * must be the group's next (a new group starts wherever its first append
 * says). Callback: cb (may be NULL, then req may be NULL) fires exactly
 * once if the call returned 0, never if it failed. Returns 0,
 * CAIRN_EFATAL, CAIRN_ECLOSED, CAIRN_EINDEX (index is not next),
 * CAIRN_ETOOLARGE, CAIRN_EINVAL (n is 0, or the group's next would reach
 * WAL_MAX_INDEX; the other calls too for an index that does) or
 * CAIRN_ENOMEM. Ownership: borrows
 * entries and their buffers (copied before return); req is the caller's
 * until its callback. */
__attribute__((warn_unused_result)) int wal_append(struct wal *w, struct wal_req *req, uint64_t gid,
                                                   uint64_t index, const struct wal_entry *entries,
                                                   unsigned n, wal_cb cb);

/* Drops group gid's entries from index on (index >= first). Same rules as
 * wal_append for req, cb and errors (CAIRN_EINDEX: below first;
 * CAIRN_ENOTFOUND: no such group). */
__attribute__((warn_unused_result)) int wal_truncate(struct wal *w, struct wal_req *req,
                                                     uint64_t gid, uint64_t index, wal_cb cb);

/* Records group gid's term and vote (creating the group). Same rules as
 * wal_append for req, cb and errors. */
__attribute__((warn_unused_result)) int wal_set_meta(struct wal *w, struct wal_req *req,
                                                     uint64_t gid, uint64_t term, uint64_t vote,
                                                     wal_cb cb);

/* Records a snapshot of group gid at (snap_index, snap_term) and drops its
 * entries below first; first >= next drops them all and makes next =
 * first (installing a snapshot from the leader: first = snap_index + 1).
 * Same rules as wal_append for req, cb and errors. */
__attribute__((warn_unused_result)) int wal_snapshot(struct wal *w, struct wal_req *req,
                                                     uint64_t gid, uint64_t snap_index,
                                                     uint64_t snap_term, uint64_t first, wal_cb cb);

/* Records a snapshot of group gid at (snap_index, snap_term) installed
 * from the leader: every entry is dropped, whatever its index, and the
 * next append follows the snapshot (next = snap_index + 1), in one record.
 * Same rules as wal_append for req, cb and errors. */
__attribute__((warn_unused_result)) int wal_reset(struct wal *w, struct wal_req *req, uint64_t gid,
                                                  uint64_t snap_index, uint64_t snap_term,
                                                  wal_cb cb);

/* Forgets group gid and everything it holds. Same rules as wal_append. */
__attribute__((warn_unused_result)) int wal_remove(struct wal *w, struct wal_req *req, uint64_t gid,
                                                   wal_cb cb);

/* Makes everything appended so far durable before returning: waits for
 * the job in flight, then writes and fdatasyncs what is pending on the
 * calling thread. For raft_io's set_term and set_vote, which raft 0.15
 * calls synchronously (raft_uv also writes its metadata file blocking).
 * Callbacks of the records it made durable still fire later, from the
 * loop, never from inside this call. Returns 0, CAIRN_EFATAL (also when
 * this write or fsync failed: the log is then fatal), CAIRN_ECLOSED.
 * Blocks. */
__attribute__((warn_unused_result)) int wal_flush_sync(struct wal *w);

/* Group gid's state. Returns 0 or CAIRN_ENOTFOUND. */
__attribute__((warn_unused_result)) int wal_group_info(const struct wal *w, uint64_t gid,
                                                       struct wal_group_info *info);

/* Reads entry index of group gid (first <= index < next), whether durable
 * or still pending. On success e->buf is owned by the caller (free with
 * free(); NULL when e->len is 0). Returns 0, CAIRN_ENOTFOUND, CAIRN_EOFFSET,
 * CAIRN_ECORRUPT (the bytes on disk no longer match their checksum),
 * CAIRN_ENOMEM or -errno. Blocks on a pread. */
__attribute__((warn_unused_result)) int wal_read(struct wal *w, uint64_t gid, uint64_t index,
                                                 struct wal_entry *e);

/* Up to max group ids (ascending) into ids; returns how many groups there
 * are. */
size_t wal_groups(const struct wal *w, uint64_t *ids, size_t max);

/* After the log went fatal: rebuilds it from what is on disk, as wal_open
 * does (a torn tail is cut), and clears the fatal state. What the failed
 * job wrote may or may not be there; nothing acknowledged is lost (it was
 * synced before the failure). Every group's state is then the disk's: an
 * owner must reload (Raft: reopen) every group that had a write fail. Only
 * when nothing is in flight (the failed job has ended and its requests
 * have called back, and the cleaner's read has ended). Returns 0 (also
 * when not fatal), CAIRN_EFATAL (still busy: try later), or the error of
 * the replay (errmsg says which file; the log stays fatal). Blocking file
 * I/O. */
__attribute__((warn_unused_result)) int wal_revive(struct wal *w, char *errmsg);

/* 0, or the error that latched the log fatal. */
int wal_fatal(const struct wal *w);

/* What failed, or "" (valid until the log is closed). */
const char *wal_errmsg(const struct wal *w);

void wal_get_stats(const struct wal *w, struct wal_stats *st);

/* Bytes of segment seq known written and fdatasynced (0 if unknown). For
 * tests that simulate a power loss. */
uint64_t wal_seg_durable(const struct wal *w, uint64_t seq);

/* Checks the invariants above; returns 0 or -1 with a message in errmsg.
 * For tests: walks every group and segment. */
int wal_check(const struct wal *w, char *errmsg, size_t len);

#endif
