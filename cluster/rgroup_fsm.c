/* rgroup_fsm.c - the partition replica's state machine.
 *
 * apply:    bring the producer table to the log's end, then
 *           rgroup_apply_entry() (rgroup_apply.c, shared with the
 *           simulation in tests/sim/): split the entry into its batches,
 *           judge each one against the producer table (producer_state.h: a
 *           duplicate or a refused batch is left out, with its own outcome
 *           for the leader to answer) and store_append() the rest with the
 *           entry's Raft index.
 *           canonical/raft 0.15 applies entries in order and sets
 *           last_applied only after apply returns, so the entry's index is
 *           raft_last_applied() + 1. An index the store already holds (a
 *           replay after a restart) is skipped.
 * snapshot: capture the store on the loop, make it durable and describe it
 *           on the thread pool (the manifest: offsets, last index,
 *           checksummed segments, and the producer table as of its end);
 *           the table is also written to <dir>/producers. See "snapshot"
 *           below for which step runs on which thread.
 * restore:  a descriptor the store already covers needs nothing. One that
 *           is ahead of the store starts a catch-up (catchup.h): the missing
 *           batches are fetched from a peer, and the entries Raft applies
 *           meanwhile are held and applied once the log has caught up, so no
 *           entry is ever applied on top of a hole. The descriptor's producer
 *           table replaces this replica's once the log reaches its end; when
 *           the log restarts at the peer's start, the peer's table does
 *           (rgroup_fsm_table_take: the producers of batches deleted below
 *           that start are in no log this replica can fetch).
 *
 * The producer table is a function of the appended batches' headers only
 * (refused and duplicate batches change nothing), so before an entry is
 * applied or a snapshot taken, the table is brought up to the log's end by
 * recording the headers of the batches it does not cover yet: after a
 * restart those after <dir>/producers, after a catch-up those fetched past
 * the snapshot (rgroup_fsm_producers_sync). An entry whose batches were all
 * refused leaves no trace in the store, so a replay after a restart judges
 * it again against the same table, with the same outcome.
 *
 * Raft keeps entries in memory until a snapshot; the snapshot threshold
 * and trailing count are retuned from the average entry size so that
 * (threshold + trailing) x average stays under the group's budget. */
#include "cluster/rgroup_fsm.h"

#include "cluster/raftfix.h"
#include "cluster/rgroup_compact.h"
#include "cluster/rgroup_mem.h"
#include "cluster/rgroup_raft.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "storage/manifest.h"
#include "storage/pgstore.h"
#include "storage/plog_sync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RGROUP_SNAPSHOT_SLOW_NS (10u * 1000 * 1000) /* 10 ms */
#define RGROUP_PRODUCERS_FILE "producers"
/* The table a LOG_START command wrote before deleting
 * (rgroup_fsm_producers_cover); an open takes whichever of the two files
 * covers more of the log. */
#define RGROUP_PRODUCERS_CMD_FILE "producers.cmd"

/* Keeps Raft's in-memory log under raft_log_budget bytes (times the
 * node's scale, rgroup_mem.h): Raft 0.15 counts entries, not bytes, so the
 * counts follow the entry sizes seen. */
static void rgroup_fsm_retune(struct rgroup *rg, size_t len)
{
  rg->entry_bytes_avg = rg->applies == 0 ? (double)len : rg->entry_bytes_avg * 0.97 + len * 0.03;
  if (rg->applies++ % 32 != 0 || rg->raft_log_budget == 0) {
    return;
  }
  size_t budget = (size_t)((double)rg->raft_log_budget * rgroup_mem_scale(rg));
  unsigned threshold =
      rgroup_fsm_snapshot_threshold(budget, rg->entry_bytes_avg, rg->group_id, rg->self_id);
  unsigned trailing = threshold / 2 < 8 ? 8 : threshold / 2;
  rgroup_compact_tune(rg, threshold, trailing);
}

unsigned rgroup_fsm_snapshot_threshold(size_t raft_log_budget, double entry_bytes,
                                       uint64_t group_id, uint64_t self_id)
{
  double per = entry_bytes > 64 ? entry_bytes : 64;
  double total = (double)raft_log_budget / per; /* threshold + trailing */
  unsigned threshold = total / 3 * 2 < 16     ? 16
                       : total / 3 * 2 > 8192 ? 8192
                                              : (unsigned)(total / 3 * 2);
  /* splitmix64's finalizer: neighbouring ids land far apart. */
  uint64_t h = group_id * 0x9E3779B97F4A7C15ULL ^ self_id * 0xBF58476D1CE4E5B9ULL;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL;
  h ^= h >> 31;
  unsigned cut = (unsigned)((uint64_t)threshold * (h & 255) / 1024); /* up to a quarter */
  return threshold - cut < 16 ? 16 : threshold - cut;
}

/* A PostgreSQL store that failed is revived rather than latched
 * (rgroup_raft_store_down). Returns whether that is the case. */
static bool rgroup_fsm_store_down(struct rgroup *rg)
{
  if (rg->opts.storage != STORE_KIND_POSTGRESQL) {
    return false;
  }
  struct store_info info;
  store_info(rg->store, &info);
  if (!info.fatal) {
    return false;
  }
  rgroup_raft_store_down(rg);
  return true;
}

static int rgroup_fsm_fail(struct rgroup *rg, raft_index index, int rv)
{
  if (rgroup_fsm_store_down(rg)) {
    log_warn("rgroup", "group %llu: entry %llu not applied: %s (%s)",
             (unsigned long long)rg->group_id, (unsigned long long)index, cairn_strerror(rv),
             store_errmsg(rg->store));
    return RAFT_IOERR;
  }
  rg->fatal = true;
  rgroup_note_store_failed(rg);
  log_error("rgroup", "group %llu: applying entry %llu failed: %s (%s); replica stops applying",
            (unsigned long long)rg->group_id, (unsigned long long)index, cairn_strerror(rv),
            store_errmsg(rg->store));
  return RAFT_IOERR;
}

/* ---- the producer table ---- */

/* Records the batches of the store in [from, to) into the table
 * (rgroup_apply_scan). Returns 0 or a negative code. Blocks (reads the
 * log). */
static int rgroup_fsm_producers_scan(struct rgroup *rg, int64_t from, int64_t to)
{
  return rgroup_apply_scan(rg->store, &rg->producers, from, to);
}

/* Brings the producer table up to the log's end (rgroup_fsm.c header):
 * adopts a restored snapshot's table once the log has reached it, then
 * records the batches the table does not cover yet. Returns 0 or a
 * negative code. */
static int rgroup_fsm_producers_sync(struct rgroup *rg)
{
  struct store_info info;
  store_info(rg->store, &info);
  if (rg->snap_producers_pending && info.next_offset >= rg->snap_producers_offset) {
    producer_state_close(&rg->producers);
    rg->producers = rg->snap_producers;
    producer_state_init(&rg->snap_producers);
    rg->producers_offset = rg->snap_producers_offset;
    rg->snap_producers_pending = false;
    rg->producers_gap = false;
    log_info("rgroup", "group %llu: producer table of the %s adopted (%zu producers, offset %lld)",
             (unsigned long long)rg->group_id, rg->producers_from_peer ? "peer" : "snapshot",
             rg->producers.n, (long long)rg->producers_offset);
  }
  if (rg->producers_offset == info.next_offset) {
    return 0;
  }
  if (rg->producers_offset > info.next_offset) {
    /* The log was cut below what the table covers: rebuild it all. */
    log_warn("rgroup", "group %llu: producer table covers offset %lld, the log ends at %lld: "
             "rebuilding it from the log", (unsigned long long)rg->group_id,
             (long long)rg->producers_offset, (long long)info.next_offset);
    producer_state_close(&rg->producers);
    rg->producers_offset = info.start_offset;
    rg->producers_gap = info.start_offset > 0; /* whatever lay below the start is unknown */
  }
  if (rg->producers_offset < info.start_offset) {
    log_warn("rgroup", "group %llu: batches [%lld, %lld) are gone from the log before the "
             "producer table recorded them: their producers may be unknown here",
             (unsigned long long)rg->group_id, (long long)rg->producers_offset,
             (long long)info.start_offset);
    rg->producers_offset = info.start_offset;
    rg->producers_gap = true;
  }
  uint64_t t0 = uv_hrtime();
  int rv = rgroup_fsm_producers_scan(rg, rg->producers_offset, info.next_offset);
  if (rv != 0) {
    log_error("rgroup", "group %llu: rebuilding the producer table from offset %lld: %s",
              (unsigned long long)rg->group_id, (long long)rg->producers_offset,
              cairn_strerror(rv));
    return rv;
  }
  log_write((uv_hrtime() - t0) >= RGROUP_SNAPSHOT_SLOW_NS ? LOG_INFO : LOG_DEBUG, "rgroup",
            "group %llu: producer table brought from offset %lld to %lld in %.3f ms "
            "(%zu producers)", (unsigned long long)rg->group_id, (long long)rg->producers_offset,
            (long long)info.next_offset, (double)(uv_hrtime() - t0) / 1e6, rg->producers.n);
  rg->producers_offset = info.next_offset;
  rg->producers_index = info.last_index;
  return 0;
}

/* Decodes <dir>/name into ps (init'ed, empty). Returns 0, -ENOENT, or the
 * read's or decode's error (logged); ps is unchanged on failure. */
static int rgroup_fsm_producers_read(struct rgroup *rg, const char *name, struct producer_state *ps,
                                     int64_t *offset, uint64_t *index)
{
  uint8_t *buf = NULL;
  size_t len = 0;
  int rv = fs_read_file(rg->dir, name, PRODUCER_STATE_MAX_BYTES, &buf, &len);
  if (rv == 0) {
    rv = producer_state_decode(ps, buf, len, offset, index);
  }
  free(buf);
  if (rv != 0 && rv != -ENOENT) {
    log_warn("rgroup", "group %llu: %s/%s: %s: not used", (unsigned long long)rg->group_id, rg->dir,
             name, cairn_strerror(rv));
  }
  return rv;
}

static void rgroup_fsm_producers_load(struct rgroup *rg)
{
  struct store_info info;
  store_info(rg->store, &info);
  rg->producers_offset = info.start_offset; /* without a file: from the log start */
  rg->producers_index = 0;
  int64_t offset = 0;
  uint64_t index = 0;
  bool have =
      rgroup_fsm_producers_read(rg, RGROUP_PRODUCERS_FILE, &rg->producers, &offset, &index) == 0;
  struct producer_state alt;
  producer_state_init(&alt);
  int64_t alt_offset = 0;
  uint64_t alt_index = 0;
  if (rgroup_fsm_producers_read(rg, RGROUP_PRODUCERS_CMD_FILE, &alt, &alt_offset, &alt_index) ==
          0 &&
      (!have || alt_offset > offset)) {
    producer_state_close(&rg->producers);
    rg->producers = alt; /* a LOG_START's table, newer than the snapshot's */
    producer_state_init(&alt);
    offset = alt_offset;
    index = alt_index;
    have = true;
  }
  producer_state_close(&alt);
  if (!have) {
    /* Rebuilt from the log's start; what was deleted below a start past 0
     * is unknown (a damaged or removed file). */
    rg->producers_gap = info.start_offset > 0;
    return;
  }
  rg->producers_offset = offset;
  rg->producers_index = index;
  rg->producers_saved_offset = offset;
}

/* Now, while nothing else has touched the opened store (no retention can
 * have removed batches the table has not recorded). A failure is retried
 * before the first apply, which goes fatal if it fails again. */
static void rgroup_fsm_producers_sync_at_open(struct rgroup *rg)
{
  int rv = rgroup_fsm_producers_sync(rg);
  if (rv != 0) {
    log_warn("rgroup", "group %llu: producer table not rebuilt at open: %s",
             (unsigned long long)rg->group_id, cairn_strerror(rv));
  }
}

void rgroup_fsm_producers_open(struct rgroup *rg)
{
  rgroup_fsm_producers_load(rg);
  rgroup_fsm_producers_sync_at_open(rg);
}

/* Drops a checkpoint kept for the store's commit (rg->ck_enc). */
static void rgroup_fsm_checkpoint_drop(struct rgroup *rg)
{
  free(rg->ck_enc);
  rg->ck_enc = NULL;
  rg->ck_len = 0;
}

void rgroup_fsm_producers_reload(struct rgroup *rg)
{
  rgroup_fsm_checkpoint_drop(rg); /* encoded from the table dropped here */
  /* An apply that failed in the store had already recorded its batches:
   * kept, the table would judge them duplicates at the replay (answered,
   * never stored). <dir>/producers covers only what the store made
   * durable, so the table is rebuilt from it and the store. */
  producer_state_close(&rg->producers);
  rgroup_fsm_producers_open(rg);
}

/* Writes the table (covering the flushed log up to offset covers) to
 * <dir>/producers, so that a restart rebuilds only what follows, and
 * retention may delete below covers. A failure costs a longer rebuild. */
static void rgroup_fsm_producers_save(struct rgroup *rg, const uint8_t *enc, size_t len,
                                      int64_t covers)
{
  int rv = fs_replace_file(rg->dir, RGROUP_PRODUCERS_FILE, enc, len);
  if (rv == 0) {
    rg->producers_saved_offset = covers;
  } else {
    log_warn("rgroup", "group %llu: writing %s/%s: %s", (unsigned long long)rg->group_id,
             rg->dir, RGROUP_PRODUCERS_FILE, cairn_strerror(rv));
  }
}

/* Writes the kept checkpoint once the store has committed what it covers.
 * Returns 0 (written), CAIRN_EPENDING (not yet), CAIRN_EEXIST (a snapshot
 * in flight writes the file: later) or -EIO (the save failed, logged). */
static int rgroup_fsm_checkpoint_finish(struct rgroup *rg)
{
  if (rg->snap != NULL) {
    return CAIRN_EEXIST;
  }
  struct store_info info;
  store_info(rg->store, &info);
  if (info.fatal) {
    rgroup_fsm_checkpoint_drop(rg); /* its revive reloads; a new one is encoded */
    return CAIRN_EFATAL;
  }
  if (info.durable_offset < rg->ck_covers) {
    return CAIRN_EPENDING;
  }
  int64_t covers = rg->ck_covers;
  rgroup_fsm_producers_save(rg, rg->ck_enc, rg->ck_len, covers);
  rgroup_fsm_checkpoint_drop(rg);
  return rg->producers_saved_offset == covers ? 0 : -EIO; /* logged by the save */
}

void rgroup_fsm_producers_durable(struct rgroup *rg)
{
  if (rg->ck_enc != NULL) {
    (void)rgroup_fsm_checkpoint_finish(rg); /* not yet, or a failure: the next pass */
  }
}

int rgroup_fsm_producers_checkpoint(struct rgroup *rg)
{
  if (rg->snap != NULL) {
    /* Its worker writes <dir>/producers (the same temp file) right now. */
    return CAIRN_EEXIST;
  }
  if (rg->ck_enc != NULL) {
    return rgroup_fsm_checkpoint_finish(rg);
  }
  int rv = rgroup_fsm_producers_sync(rg);
  if (rv != 0) {
    return rv;
  }
  struct store_info info;
  store_info(rg->store, &info);
  int flushed = store_flush(rg->store, info.next_offset);
  if (flushed != 0 && flushed != CAIRN_EPENDING) {
    return flushed;
  }
  /* The table as of the log's end now: valid for <dir>/producers once the
   * store holds that much durably (a revive replays the same entries at
   * the same offsets, so it stays valid across one). */
  uint8_t *enc = NULL;
  size_t len = 0;
  rv = producer_state_encode(&rg->producers, info.next_offset, info.last_index, &enc, &len);
  if (rv != 0) {
    return rv;
  }
  rg->ck_enc = enc;
  rg->ck_len = len;
  rg->ck_covers = info.next_offset;
  return rgroup_fsm_checkpoint_finish(rg);
}

/* Before a LOG_START command deletes below an offset: makes a table that
 * covers the log's end durable, so that a restart never rebuilds the
 * table without the batches the command deletes. Every replica's table
 * must stay the same (it judges every batch: a replica that forgot a
 * producer would refuse its next batch where the others append it).
 * Written to <dir>/producers.cmd, not <dir>/producers, which a snapshot's
 * worker may be writing now: an open takes whichever of the two covers
 * more of the log. Flushes the log first (a sync job of a snapshot in
 * flight is collected: plog.h). Blocks in fdatasync (the command is
 * rare). Returns 0 or a negative code. */
static int rgroup_fsm_producers_cover(struct rgroup *rg)
{
  struct store_info info;
  store_info(rg->store, &info);
  int rv = store_flush(rg->store, info.next_offset);
  uint8_t *enc = NULL;
  size_t len = 0;
  if (rv == 0) {
    rv = producer_state_encode(&rg->producers, info.next_offset, info.last_index, &enc, &len);
  }
  if (rv == 0) {
    rv = fs_replace_file(rg->dir, RGROUP_PRODUCERS_CMD_FILE, enc, len);
  }
  free(enc);
  return rv;
}

/* ---- the producer table between replicas ---- */

bool rgroup_fsm_table_wanted(struct rgroup *rg, int64_t log_start)
{
  if (rg->snap_producers_pending) {
    return rg->snap_producers_offset < log_start;
  }
  return rg->producers_gap || rg->producers_offset < log_start;
}

int rgroup_fsm_table_take(struct rgroup *rg, const uint8_t *buf, size_t len, int64_t *offset,
                          uint64_t *index)
{
  struct producer_state table;
  producer_state_init(&table);
  int rv = producer_state_decode(&table, buf, len, offset, index);
  if (rv != 0) {
    log_warn("rgroup", "group %llu: a peer's producer table is malformed: %s",
             (unsigned long long)rg->group_id, cairn_strerror(rv));
    return rv;
  }
  struct store_info info;
  store_info(rg->store, &info);
  if (*offset < info.start_offset) {
    producer_state_close(&table); /* the peer is behind this log's start */
    return CAIRN_EOFFSET;
  }
  producer_state_close(&rg->snap_producers);
  rg->snap_producers = table;
  rg->snap_producers_offset = *offset;
  rg->snap_producers_pending = true;
  rg->producers_from_peer = true;
  return 0;
}

int rgroup_fsm_table_share(struct rgroup *rg, uint8_t **out, size_t *len)
{
  if (rgroup_is_catching_up(rg) || rg->snap_producers_pending || rg->producers_gap ||
      rgroup_fsm_store_down(rg)) {
    return CAIRN_EREPLICA_NOT_AVAILABLE;
  }
  int rv = rgroup_fsm_producers_sync(rg);
  if (rv != 0) {
    return rv;
  }
  struct store_info info;
  store_info(rg->store, &info);
  return producer_state_encode(&rg->producers, info.next_offset, info.last_index, out, len);
}

/* Takes the start of the snapshot last restored (rg->snap_start) once
 * the log covers it, as Kafka's followers take their leader's log start: a
 * LOG_START inside the snapshot is an entry this replica never applies,
 * and without it a replica whose log already went past that start (down
 * during the delete, back through a snapshot install) kept the deleted
 * records, and served them again as leader. The same start also when the
 * replica restarts from its own snapshot while its store says less: a
 * PostgreSQL store moves its start in memory (pgstore.h) and a reopen
 * finds the partition row's. As the command does, plog first makes the
 * table cover the log (the start may be a peer's retention's); a
 * PostgreSQL store deletes its rows only below what the saved table
 * covers anyway. Returns 0 or a negative code (logged). */
static int rgroup_fsm_take_start(struct rgroup *rg)
{
  int64_t start = rg->snap_start;
  struct store_info info;
  store_info(rg->store, &info);
  if (start <= info.start_offset || start > info.next_offset) {
    /* Done, or above the log's end: kept for the catch-up's end. */
    rg->snap_start = start > info.next_offset ? start : 0;
    return 0;
  }
  int rv = 0;
  if (rg->opts.storage != STORE_KIND_POSTGRESQL) {
    rv = rgroup_fsm_producers_cover(rg);
  }
  if (rv == 0) {
    rv = store_delete_before(rg->store, start);
  }
  if (rv != 0) {
    log_error("rgroup", "group %llu: the snapshot's log start %lld: %s (%s)",
              (unsigned long long)rg->group_id, (long long)start, cairn_strerror(rv),
              store_errmsg(rg->store));
    return rv;
  }
  log_info("rgroup", "group %llu: log start %lld from the snapshot (the store had %lld)",
           (unsigned long long)rg->group_id, (long long)start, (long long)info.start_offset);
  rg->snap_start = 0;
  return 0;
}

void rgroup_fsm_caught_up(struct rgroup *rg)
{
  /* Adopts a pending table now (the snapshot's or a peer's), if no apply
   * has yet: until then this replica would refuse to share its own. */
  int rv = rgroup_fsm_producers_sync(rg);
  if (rv == 0 && !rg->snap_producers_pending && !rg->producers_gap) {
    (void)rgroup_fsm_take_start(rg); /* logged; a later restore takes it again */
  }
  if (!rg->producers_from_peer) {
    return;
  }
  if (rv == 0 && rg->snap_producers_pending) {
    rv = CAIRN_EOFFSET; /* the log ends below what it covers: not caught up */
  }
  if (rv == 0) {
    rv = rgroup_fsm_producers_cover(rg);
  }
  if (rv != 0) {
    log_warn("rgroup",
             "group %llu: the producer table from a peer is not saved (%s): a restart "
             "asks a peer again",
             (unsigned long long)rg->group_id, cairn_strerror(rv));
    return;
  }
  rg->producers_from_peer = false;
}

/* ---- apply ---- */

int rgroup_fsm_apply_entry(struct rgroup *rg, const uint8_t *entry, size_t len, uint64_t index)
{
  rg->applied.results = rg->ap.results;
  rg->applied.n = 0;
  rg->applied.appended = 0;
  int rv = rgroup_fsm_producers_sync(rg);
  bool command = rv == 0 && rgroup_apply_has_command(entry, len);
  if (command && rg->opts.storage != STORE_KIND_POSTGRESQL) {
    /* A PostgreSQL store moves its start in memory and deletes the rows
     * only at a retention pass, below what <dir>/producers covers
     * (rgroup_retention): the table is rebuilt from rows still there. */
    rv = rgroup_fsm_producers_cover(rg);
  }
  if (rv == 0) {
    rv = rgroup_apply_entry(&rg->ap, rg->store, &rg->producers, entry, len, index, &rg->applied);
  }
  if (rv == 0 && command) {
    rgroup_compact_snapshot_soon(rg, index);
  }
  if (rv != 0) {
    rg->applied.n = 0;
    rgroup_fsm_fail(rg, index, rv);
    return rv;
  }
  if (rg->applied.appended == 0) {
    return 0; /* replayed, or every batch refused or a duplicate: the store is unchanged */
  }
  struct store_info info;
  store_info(rg->store, &info);
  rg->producers_offset = info.next_offset;
  rg->producers_index = index;
  if (rg->on_applied != NULL) {
    rg->on_applied(rg);
  }
  return 0;
}

static int rgroup_fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
  struct rgroup *rg = fsm->data;
  raft_index index = raft_last_applied(&rg->raft) + 1;
  *result = NULL;
  rg->apply_ns = uv_hrtime(); /* the entry is committed: slow-request tracing */
  if (rg->fatal || rg->store_down) {
    return RAFT_IOERR;
  }
  rgroup_fsm_retune(rg, buf->len);
  if (rgroup_is_catching_up(rg)) {
    /* Behind the snapshot: hold the entry until the log has caught up. */
    if (catchup_defer(rg->catchup, buf->base, buf->len, index) != 0) {
      return rgroup_fsm_fail(rg, index, CAIRN_ETOOLARGE);
    }
    return 0;
  }
  if (rgroup_fsm_apply_entry(rg, buf->base, buf->len, index) != 0) {
    return RAFT_IOERR;
  }
  *result = &rg->applied;
  return 0;
}

/* ---- snapshot (raft 0.15's fsm version 3) ----
 *
 * snapshot (loop):   brings the producer table to the log's end, encodes it,
 *                    and captures a sync of the store (plog_sync_begin): the
 *                    segments to fdatasync and what the manifest will say.
 *                    Returns no buffers yet. Raft's snapshot index is its
 *                    last_applied now, which is what the store holds now.
 * snapshot_async     (a libuv thread-pool worker, through io->async_work):
 *                    runs the sync (fdatasyncs, checkpoint, checksums),
 *                    writes <dir>/producers, and encodes the manifest into
 *                    the snapshot's buffer, only if every fsync succeeded:
 *                    raft writes the snapshot and drops the entries it covers
 *                    only after this returned 0, so the descriptor is never
 *                    valid before the data it names is durable. Touches
 *                    rg->snap and nothing else of rg.
 * snapshot_finalize  (loop, exactly once after a successful snapshot: after
 *                    raft wrote the snapshot, or when the work or the write
 *                    failed or was canceled by raft_close): records the
 *                    sync's outcome in the store (plog_sync_end: fatal if an
 *                    fsync failed) and frees the buffers.
 * Meanwhile the loop goes on applying entries (appends beside a running
 * sync are safe: plog_sync.h). raft takes one snapshot at a time, and its
 * close waits for the worker, so rg->snap is NULL whenever Raft is closed. */

/* The snapshot in flight, from snapshot to snapshot_finalize. A pgstore
 * replica has no job: it is captured only once PostgreSQL has committed
 * everything applied (else RAFT_BUSY, and raft tries again later), so the
 * snapshot covers only what PostgreSQL holds, and the manifest names no
 * segments. */
struct rgroup_snap {
  struct plog_sync *job;      /* NULL for pgstore */
  struct pgstore_settle *settle; /* pgstore: commits what was applied, off the loop; or NULL */
  struct manifest committed; /* pgstore: offsets and index at capture */
  uint8_t *producers; /* the encoded table as of the job's next offset */
  size_t producers_len;
  char *dir;          /* the replica's directory, for <dir>/producers */
  uint64_t index;     /* Raft's last applied index at capture */
  uint64_t capture_ns;
  int64_t covers;     /* the log's end at capture, which the table covers */
  int producers_rv;   /* writing <dir>/producers (worker) */
};

static void rgroup_snap_free(struct rgroup_snap *sn)
{
  if (sn->job != NULL) {
    (void)plog_sync_end(sn->job);
  }
  if (sn->settle != NULL) {
    (void)pgstore_settle_end(sn->settle);
  }
  free(sn->producers);
  free(sn->dir);
  free(sn);
}

/* Whether the store has made durable everything applied to it. */
static bool rgroup_fsm_store_committed(struct rgroup *rg)
{
  struct store_info info;
  store_info(rg->store, &info);
  return info.durable_offset == info.next_offset && info.durable_index == info.last_index;
}

/* A pgstore is written behind, and raft asks for a snapshot right after
 * an apply, which the writer has not committed yet: a settle commits it
 * off the loop (pgstore_settle_*: begun here, run by snapshot_async
 * before the descriptor is made, ended at finalize), when no job of the
 * writer holds the store's rows. Returns 0 with *out (NULL: nothing to
 * commit) or -EBUSY (try at a later apply). */
static int rgroup_fsm_store_settle(struct rgroup *rg, struct pgstore_settle **out)
{
  *out = NULL;
  if (rgroup_fsm_store_committed(rg)) {
    return 0;
  }
  int rv = pgstore_settle_begin(rg->store, out);
  if (rv != 0 && rv != -EBUSY) {
    log_warn("rgroup", "group %llu: snapshot: committing the store: %s (%s)",
             (unsigned long long)rg->group_id, cairn_strerror(rv), store_errmsg(rg->store));
    (void)rgroup_fsm_store_down(rg);
  }
  return rv == 0 ? 0 : -EBUSY;
}

static int rgroup_fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
  struct rgroup *rg = fsm->data;
  if (rgroup_is_catching_up(rg) || rg->fatal || rg->store_down || rg->snap != NULL) {
    /* The log does not hold what Raft applied: a descriptor of it now
     * would let Raft drop entries the log still lacks. (rg->snap: raft
     * takes one at a time; never seen.) */
    return RAFT_BUSY;
  }
  if (raftfix_snapshot_refused(&rg->raft)) {
    return RAFT_BUSY; /* a configuration change in flight would go into it */
  }
  struct pgstore_settle *settle = NULL;
  if (rg->opts.storage == STORE_KIND_POSTGRESQL && rgroup_fsm_store_settle(rg, &settle) != 0) {
    /* raft 0.15 snapshots at last_applied: the descriptor is made only
     * once PostgreSQL has committed everything applied (the settle, in
     * snapshot_async), so the Raft log keeps covering what it has not
     * (the capture never waits for the writer's job in flight). */
    return RAFT_BUSY;
  }
  uint64_t t0 = uv_hrtime();
  struct rgroup_snap *sn = calloc(1, sizeof *sn);
  int rv = sn == NULL ? CAIRN_ENOMEM : 0;
  if (sn != NULL) {
    sn->settle = settle;
  } else if (settle != NULL) {
    (void)pgstore_settle_end(settle); /* never run: nothing changed */
  }
  if (rv == 0) {
    sn->index = raft_last_applied(&rg->raft);
    sn->dir = strdup(rg->dir);
    rv = sn->dir == NULL ? CAIRN_ENOMEM : rgroup_fsm_producers_sync(rg);
  }
  struct store_info info;
  store_info(rg->store, &info);
  if (rv == 0) {
    /* The table as of the log's end, which is where the sync captures it. */
    rv = producer_state_encode(&rg->producers, info.next_offset, info.last_index, &sn->producers,
                               &sn->producers_len);
    sn->covers = info.next_offset;
  }
  if (rv == 0 && rg->opts.storage == STORE_KIND_POSTGRESQL) {
    sn->committed.start_offset = info.start_offset;
    sn->committed.next_offset = info.next_offset;
    sn->committed.last_index = info.last_index;
  } else if (rv == 0) {
    rv = plog_sync_begin(rg->store, &sn->job);
  }
  if (rv != 0) {
    log_error("rgroup", "group %llu: snapshot: %s (%s)", (unsigned long long)rg->group_id,
              cairn_strerror(rv), store_errmsg(rg->store));
    if (sn != NULL) {
      rgroup_snap_free(sn);
    }
    return rv == CAIRN_ENOMEM ? RAFT_NOMEM : RAFT_IOERR;
  }
  sn->capture_ns = uv_hrtime() - t0;
  rg->snap = sn;
  *bufs = NULL; /* the descriptor comes from snapshot_async */
  *n = 0;
  return 0;
}

/* Runs on a thread-pool worker: only rg->snap (set before raft queued
 * this work, cleared after it called back) and what it owns. */
static int rgroup_fsm_snapshot_async(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                                     unsigned *n)
{
  struct rgroup *rg = fsm->data;
  struct rgroup_snap *sn = rg->snap;
  int rv = 0;
  struct manifest m = sn->committed; /* pgstore: no segments, nothing owned */
  uint8_t *enc = NULL;
  size_t len = 0;
  if (sn->job != NULL) {
    rv = plog_sync_run(sn->job);
    if (rv == 0) {
      rv = plog_sync_manifest(sn->job, &m);
    }
  }
  if (sn->settle != NULL) {
    rv = pgstore_settle_run(sn->settle); /* what the manifest says is committed first */
  }
  if (rv == 0) {
    /* The table covers the log now durable: a restart rebuilds only what
     * follows. A failure costs a longer rebuild (logged at finalize). */
    sn->producers_rv = fs_replace_file(sn->dir, RGROUP_PRODUCERS_FILE, sn->producers,
                                       sn->producers_len);
    m.producers = sn->producers; /* borrowed for the encoding */
    m.producers_len = sn->producers_len;
    rv = manifest_encode(&m, &enc, &len);
    m.producers = NULL;
    m.producers_len = 0;
    manifest_free(&m);
  }
  struct raft_buffer *b = NULL;
  void *copy = NULL;
  if (rv == 0) {
    b = raft_malloc(sizeof *b);
    copy = raft_malloc(len ? len : 1);
    if (b == NULL || copy == NULL) {
      raft_free(b);
      raft_free(copy);
      rv = CAIRN_ENOMEM;
    }
  }
  if (rv != 0) {
    free(enc);
    return rv == CAIRN_ENOMEM ? RAFT_NOMEM : rv == CAIRN_ESYNC_CANCELED ? RAFT_CANCELED : RAFT_IOERR;
  }
  memcpy(copy, enc, len);
  free(enc);
  b->base = copy;
  b->len = len;
  *bufs = b;
  *n = 1;
  return 0;
}

static int rgroup_fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                                        unsigned *n)
{
  struct rgroup *rg = fsm->data;
  rgroup_compact_on_snapshot_end(rg, rg->snap != NULL ? rg->snap->index : 0);
  if (*bufs != NULL) {
    for (unsigned i = 0; i < *n; i++) {
      raft_free((*bufs)[i].base);
    }
    raft_free(*bufs);
  }
  *bufs = NULL;
  *n = 0;
  struct rgroup_snap *sn = rg->snap;
  rg->snap = NULL;
  if (sn == NULL) {
    return 0;
  }
  uint64_t run_ns = sn->job != NULL ? plog_sync_run_ns(sn->job) : 0;
  /* The outcome into the store: fatal if an fsync failed (pgstore: if the
   * settle's commit failed). */
  int rv = sn->job != NULL ? plog_sync_end(sn->job) : 0;
  sn->job = NULL;
  if (sn->settle != NULL) {
    rv = pgstore_settle_end(sn->settle);
    sn->settle = NULL;
  }
  if (rv == 0) {
    rg->snapshots++;
    rg->snapshot_capture_ns += sn->capture_ns;
    rg->snapshot_sync_ns += run_ns;
    /* At info level when it was slow; on the loop it took capture_ns. */
    log_write(run_ns >= RGROUP_SNAPSHOT_SLOW_NS ? LOG_INFO : LOG_DEBUG, "rgroup",
              "group %llu: snapshot at index %llu: capture %.3f ms on the loop, sync and "
              "manifest %.3f ms on the thread pool", (unsigned long long)rg->group_id,
              (unsigned long long)sn->index, (double)sn->capture_ns / 1e6, (double)run_ns / 1e6);
    if (sn->producers_rv != 0) {
      log_warn("rgroup", "group %llu: writing %s/%s: %s", (unsigned long long)rg->group_id,
               sn->dir, RGROUP_PRODUCERS_FILE, cairn_strerror(sn->producers_rv));
    } else {
      /* The file holds this table now (retention, the only other writer,
       * waits while a snapshot is in flight): retention may delete below. */
      rg->producers_saved_offset = sn->covers;
    }
  } else if (rv == CAIRN_ESYNC_CANCELED) {
    log_info("rgroup", "group %llu: snapshot at index %llu canceled before its sync ran",
             (unsigned long long)rg->group_id, (unsigned long long)sn->index);
  } else {
    struct store_info info;
    store_info(rg->store, &info);
    log_error("rgroup", "group %llu: snapshot at index %llu: %s (%s)",
              (unsigned long long)rg->group_id, (unsigned long long)sn->index,
              cairn_strerror(rv), store_errmsg(rg->store));
    if (info.fatal && !rg->fatal && !rgroup_fsm_store_down(rg)) {
      /* The store latched: nothing more is applied on top of it. */
      rg->fatal = true;
      rgroup_note_store_failed(rg);
      log_error("rgroup", "group %llu: the store failed; replica stops applying",
                (unsigned long long)rg->group_id);
    }
  }
  rgroup_snap_free(sn);
  return 0;
}

static int rgroup_fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
  struct rgroup *rg = fsm->data;
  rg->restores++;
  struct manifest m;
  int rv = manifest_decode(buf->base, buf->len, &m);
  if (rv != 0) {
    log_error("rgroup", "group %llu: snapshot descriptor is malformed: %s",
              (unsigned long long)rg->group_id, cairn_strerror(rv));
    return RAFT_CORRUPT;
  }
  struct producer_state table;
  producer_state_init(&table);
  int64_t table_offset = m.next_offset;
  if (m.producers != NULL) {
    rv = producer_state_decode(&table, m.producers, m.producers_len, &table_offset, NULL);
    if (rv != 0 || table_offset != m.next_offset) {
      log_error("rgroup", "group %llu: the snapshot's producer table is malformed: %s",
                (unsigned long long)rg->group_id, cairn_strerror(rv != 0 ? rv : CAIRN_ECORRUPT));
      manifest_free(&m);
      return RAFT_CORRUPT;
    }
  }
  struct store_info info;
  store_info(rg->store, &info);
  rg->snap_start = m.start_offset;
  int64_t next_offset = m.next_offset;
  uint64_t last_index = m.last_index;
  bool has_table = m.producers != NULL;
  manifest_free(&m);
  raft_free(buf->base); /* ours on success */
  if (info.last_index >= last_index && info.next_offset >= next_offset) {
    producer_state_close(&table); /* this replica's own table covers as much */
    if (!rg->producers_gap) {
      return rgroup_fsm_take_start(rg) == 0 ? 0 : RAFT_IOERR;
    }
    /* ... but lacks producers below the log's start (a restart before a
     * peer's table was saved): a catch-up asks a peer for theirs. */
    log_info("rgroup",
             "group %llu: the producer table lacks producers below the log's start: "
             "asking a peer for its table",
             (unsigned long long)rg->group_id);
    return rgroup_catchup_start(rg, next_offset, last_index) == 0 ? 0 : RAFT_NOMEM;
  }
  if (has_table) {
    /* Adopted once the fetched log reaches the snapshot's end. */
    producer_state_close(&rg->snap_producers);
    rg->snap_producers = table;
    rg->snap_producers_offset = table_offset;
    rg->snap_producers_pending = true;
  }
  if (rgroup_catchup_start(rg, next_offset, last_index) != 0) {
    log_error("rgroup", "group %llu: no memory to catch up behind the snapshot",
              (unsigned long long)rg->group_id);
    return RAFT_NOMEM;
  }
  return 0;
}

void rgroup_fsm_init(struct rgroup *rg)
{
  memset(&rg->fsm, 0, sizeof rg->fsm);
  rg->fsm.version = 3;
  rg->fsm.data = rg;
  rg->fsm.apply = rgroup_fsm_apply;
  rg->fsm.snapshot = rgroup_fsm_snapshot;
  rg->fsm.restore = rgroup_fsm_restore;
  rg->fsm.snapshot_finalize = rgroup_fsm_snapshot_finalize;
  rg->fsm.snapshot_async = rgroup_fsm_snapshot_async;
}

void rgroup_fsm_close(struct rgroup *rg)
{
  rgroup_fsm_checkpoint_drop(rg);
  rgroup_apply_close(&rg->ap);
  producer_state_close(&rg->producers);
  producer_state_close(&rg->snap_producers);
  if (rg->snap != NULL) {
    /* Never seen: Raft's close waits for the snapshot work and finalizes. */
    rgroup_snap_free(rg->snap);
    rg->snap = NULL;
  }
}
