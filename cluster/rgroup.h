/* rgroup.h - a partition replica: one canonical/raft group whose state
 * machine appends record batches to the partition's store. An acknowledged
 * produce is committed (in the Raft log of a majority, on disk) and applied.
 *
 * Directory of a replica:
 *   <dir>/log/    the partition log (plog, see src/storage/plog.h)
 *   <dir>/raft/   canonical/raft's libuv log and snapshots (--raft-log group)
 *   <dir>/wal-snapshots/  snapshot files over the node-wide log (raft_io_wal.h)
 *   <dir>/raft.refused    the node-wide log holding this replica's Raft state
 *                 was damaged and set aside (waldamage.h): refused until rebuilt
 *
 * Produce path (leader): rgroup_produce() validates the batch and queues
 * it; while fewer than RGROUP_MAX_INFLIGHT entries are in flight the queue
 * is proposed at once, otherwise what arrives meanwhile is coalesced into
 * the next entry (group commit, bounded by max_entry_bytes). When the entry commits, every replica's state
 * machine applies it (rgroup_fsm.c): store_append(batches, raft index), so
 * every replica assigns the same offsets. The leader then answers each
 * request with its own outcome (its base offset, or why it was refused).
 *
 * Idempotent producers: a batch with a producer id is judged at apply, on
 * every replica alike, against the partition's producer table
 * (producer_state.h): a duplicate of one of the producer's last batches is
 * not appended again and is answered with the original offset; a batch
 * whose sequence or epoch does not fit is refused (CAIRN_EOUT_OF_ORDER,
 * CAIRN_EUNKNOWN_PRODUCER, CAIRN_EPRODUCER_FENCED); the rest of the entry
 * is appended. The table travels in the snapshot next to the manifest, is
 * written to <dir>/producers at each snapshot, and is brought up to the
 * log's end from the headers of the batches after that point before the
 * next entry is applied (after a restart or a catch-up).
 *
 * Snapshots and catch-up: a snapshot is the log's manifest (small), taken
 * after the log is flushed; the flush's fsyncs run on the libuv thread pool
 * (raft's fsm version 3, rgroup_fsm.c) while the loop goes on applying. canonical/raft keeps its entries in memory until
 * a snapshot, so the snapshot threshold and trailing are retuned from the
 * entry sizes seen to keep that memory under raft_log_budget bytes. A
 * replica that restores a descriptor ahead of its log fetches the missing
 * batches from a peer (catchup.h) and serves its own log to peers that do
 * (fetch_serve.h).
 *
 * Idle groups: a leader with nothing to replicate for a while slows its
 * heartbeat, or with opts.coalesce stops Raft's heartbeats while the
 * node's coalesced beat (hbeat.h) stands in, and speeds it up again at its
 * next proposal (rgroup_pace.h).
 *
 * Leadership: a tick hands leadership away while this
 * replica is catching up, and back to the preferred replica (the first of
 * the replica set) once that one is healthy and caught up.
 * rgroup_shutdown() transfers leadership before closing.
 *
 * Lifecycle (rg->state, set only by rgroup_set_state, which logs and
 * asserts the transition):
 *
 *   from            event                                to            by
 *   OPENING         Raft started                         RUNNING       rgroup_open
 *   RUNNING         rgroup_shutdown while leading        TRANSFERRING  rgroup_shutdown
 *   RUNNING         a Raft write failed, or the          RECOVERING    rgroup_raft_fail
 *                   PostgreSQL store failed                            (rgroup_raft_store_down)
 *   RECOVERING      Raft closed; a reopen failed, or     (stays; retried after a backoff,
 *                   the store could not be revived        rgroup_raft_backoff)
 *   RECOVERING      Raft reopened and started            RUNNING       rgroup_raft_reopen
 *   TRANSFERRING    transfer done, or a write failed     CLOSING       rgroup_on_transfer_done,
 *                                                                      rgroup_raft_on_timer
 *   any but CLOSED  rgroup_close (or open failing)       CLOSING       rgroup_close
 *   CLOSING         Raft and every part closed           CLOSED        rgroup_on_part_closed
 *
 *   RECOVERING is the pager-style fatal state of one Raft instance: after a
 *   failed append (or term/vote/truncate write) nothing more is proposed,
 *   queued produces fail (CAIRN_EINDOUBT for the entry in flight, which
 *   followers may hold; CAIRN_ENOTLEADER for what never entered the log),
 *   Raft and its libuv I/O are closed and reopened from what is on disk,
 *   with a backoff while the disk stays full. The store, the catch-up and
 *   the fetch server stay open. Meanwhile rgroup_produce() answers
 *   CAIRN_ENOTLEADER, rgroup_leader() id 0 and rgroup_is_leader() false
 *   (docs/raft-0.15.md, rows 2 and 3).
 *   (rgroup_open failing leaves nothing to close, or a close under way:
 *   see rgroup_open.)
 *
 * Context: loop thread only. */
#ifndef CAIRN_RGROUP_H
#define CAIRN_RGROUP_H

#include "cluster/catchup.h"
#include "cluster/fetch_serve.h"
#include "cluster/producer_state.h"
#include "cluster/raftfix.h"
#include "cluster/raftmux.h"
#include "cluster/riow_mux.h"
#include "cluster/riow_uv.h"
#include "cluster/rgroup_apply.h"
#include "cluster/rgroup_cap.h"
#include "cluster/rgroup_ticker.h"
#include "cluster/transport.h"
#include "storage/pgstore.h"
#include "storage/plog.h"

#include <raft.h>
#include <raft/uv.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define RGROUP_ERRMSG_SIZE 640
#define RGROUP_PROBATION_REASON_SIZE 256
#define RGROUP_DEFAULT_MAX_ENTRY_BYTES (1u << 20)
/* Entries a leader has proposed and not seen applied, at most. One entry
 * at a time made a batch that arrived just after a proposal wait for that
 * whole commit (the followers' round trip and fsync, and the apply) before
 * it could even be appended; with a few in flight it waits only for the
 * node-wide log's write in progress, and the log's next job takes it.
 * What arrives while all are in flight is still coalesced into the next
 * entry (group commit). Measured in docs/performance.md ("Entries in
 * flight per partition leader"). */
#define RGROUP_MAX_INFLIGHT 4u

/* rgroup's tick rides on raft's (every heartbeat interval, fixed at
 * raft_start): it runs at the first of raft's ticks at least this long
 * after the last, less half a heartbeat of slack. One timer per group
 * instead of two (docs/performance.md, idle CPU). */
#define RGROUP_TICK_MS 250
#define RGROUP_DEFAULT_RAFT_LOG_BUDGET (64u << 20)
#define RGROUP_MAX_REPLICAS 16

#define RGROUP_STATE_TABLE(X)                                                      \
  X(RGROUP_OPENING, "opening")                                                     \
  X(RGROUP_RUNNING, "running")                                                     \
  X(RGROUP_TRANSFERRING, "transferring")                                           \
  X(RGROUP_RECOVERING, "recovering") /* a Raft write failed: closed and reopened */ \
  X(RGROUP_CLOSING, "closing")                                                     \
  X(RGROUP_CLOSED, "closed")

enum rgroup_state {
#define RGROUP_STATE_ENUM(name, text) name,
  RGROUP_STATE_TABLE(RGROUP_STATE_ENUM)
#undef RGROUP_STATE_ENUM
};

/* A prompt election when the leader's node is seen gone (rgroup_elect.c):
 * the short election timeout until a leader is known (at least this, and
 * at least twice the heartbeat), and when to stop waiting for one. */
#define RGROUP_ELECT_SHORT_MS 100
/* The same with term and vote group-committed (opts.meta_group_commit):
 * an election waits for two more write jobs (the candidate's record, the
 * voter's), so 200-400 ms ran out and restarted elections in new terms
 * under load (docs/performance.md, "Term and vote by group commit"). */
#define RGROUP_ELECT_SHORT_GROUP_MS 500
#define RGROUP_ELECT_GIVE_UP_MS 10000

#define RGROUP_RECOVER_MIN_MS 50    /* first reopen after a failed write */
#define RGROUP_RECOVER_MAX_MS 5000  /* backoff cap while the disk stays full */
#define RGROUP_PROBATION_IDLE_MS 10000 /* a revived store with nothing to write is well */

struct rgroup_replica {
  uint64_t id;
  const char *address; /* the node's cluster address, "host:port" */
};

#define RGROUP_COAL_ACKS 8 /* followers of a group: META_MAX_REPLICAS - 1, and room */

struct vouch_table;
struct rgroup_compact_gate;
struct rgroup_mem;

struct rgroup_opts {
  struct rgroup_ticker *ticker; /* drives Raft's tick, fast or slow (rgroup_ticker.h;
                                   NULL: the io's own timer per group) */
  struct vouch_table *vouch;    /* the node's sparse beats (vouch.h); NULL: every
                                   coalesced beat names every quiesced group */
  struct rgroup_compact_gate *compact_gate; /* the node's bound on quiet-log compactions
                                               (rgroup_compact.h); NULL: none */
  struct rgroup_mem *mem;      /* the node's bound on Raft's entries in memory (rgroup_mem.h);
                                  NULL: each group's budget alone */
  unsigned heartbeat_ms;       /* 0: 100 */
  unsigned election_ms;        /* 0: 1000 */
  unsigned idle_heartbeat_ms;  /* a quiesced leader's heartbeat (rgroup_pace.h);
                                  0: election_ms / 2 - heartbeat_ms, the most
                                  allowed; at most heartbeat_ms: never quiesce */
  unsigned snapshot_threshold; /* entries between snapshots; 0: 1024 */
  unsigned snapshot_trailing;  /* entries kept after one; 0: 128 */
  size_t raft_segment_size;    /* raft's open segment size; 0: 1 MiB */
  size_t max_entry_bytes;      /* group commit bound; 0: 1 MiB */
  size_t raft_log_budget;      /* bytes of entries Raft may hold in memory; 0: 64 MiB.
                                  Ignored when snapshot_threshold is set: then
                                  the counts are fixed. */
  uint64_t raft_log_node_budget; /* parts_init: the same for every replica of the
                                    node together (rgroup_mem.h); 0: no bound */
  bool no_preferred_leader;    /* do not move leadership back to replica 0 */
  bool coalesce;               /* a quiesced leader stops Raft's heartbeats; the
                                  node's coalesced beat (hbeat.h) stands in for
                                  them (rgroup_pace.h) */
  bool meta_group_commit;      /* on its own raft_io: term and vote group-committed,
                                  messages held until durable (riow_mux.h); false:
                                  durable on return (a blocking flush) */
  bool join;                   /* start with an empty Raft log instead of
                                  bootstrapping the replica set: a replica
                                  added to a running group, which its leader
                                  brings in (raft_add) and catches up */
  struct plog_opts plog;       /* the partition log's options (retention also pgstore's) */
  struct wal *wal;             /* the node-wide log for Raft (--raft-log node), borrowed;
                                  NULL: raft_uv's files in <dir>/raft */
  struct raftmux *mux;         /* with wal: Raft messages over one connection per peer
                                  node (--raft-mux on, raftmux.h), borrowed; NULL:
                                  raft_uv's connection per group per peer */
  uint32_t storage;            /* enum store_kind: plog (file) or pgstore (postgresql) */
  const char *pg_conninfo;     /* pgstore's database (libpq); NULL or "": none, and a
                                  postgresql replica refuses to open. Borrowed: must
                                  outlive the group (the node's config) */
  const char *pg_password_file; /* NULL or "": libpq's own (PGPASSFILE); borrowed */
  const char *topic;           /* pgstore: the topic's name, id and partition; borrowed */
  uint32_t topic_id;
  int32_t partition;
  struct store *pg_begun; /* pgstore: a store rgroup_pgstore_begin made on the thread pool
                             (NULL: rgroup_open connects on the loop). rgroup_open takes it
                             whatever it returns */
  struct store *plog_begun; /* partition log: one rgroup_plog_begin opened (recovered) on the
                               thread pool (NULL: rgroup_open opens it on the loop).
                               rgroup_open takes it whatever it returns */
};

struct rgroup;
struct rgroup_produce;
struct rgroup_snap;
struct rgroup_transfer;

/* raft_uv's methods that rgroup interposes (rgroup_raft.c). */
struct rgroup_raft_io_ops {
  int (*send)(struct raft_io *io, struct raft_io_send *req, const struct raft_message *message,
              raft_io_send_cb cb);
  int (*append)(struct raft_io *io, struct raft_io_append *req, const struct raft_entry entries[],
                unsigned n, raft_io_append_cb cb);
  int (*start)(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv);
  int (*set_term)(struct raft_io *io, raft_term term);
  int (*set_vote)(struct raft_io *io, raft_id server_id);
  int (*truncate)(struct raft_io *io, raft_index index);
  int (*random)(struct raft_io *io, int min, int max);
  int (*load)(struct raft_io *io, raft_term *term, raft_id *voted_for,
              struct raft_snapshot **snapshot, raft_index *start_index,
              struct raft_entry *entries[], size_t *n_entries);
  raft_io_recv_cb recv; /* raft's receive callback, given to start */
  raft_io_tick_cb tick; /* and its tick callback */
};

/* status 0 and the base offset of the batch (for a duplicate of an
 * idempotent producer's batch: the offset it was first written at), or a
 * negative code: CAIRN_ENOTLEADER (never entered the Raft log: retry at the
 * leader), CAIRN_EINDOUBT (in the log when leadership was lost: a later
 * leader may still commit it), CAIRN_ESHUTDOWN (closed; in doubt likewise
 * if it was proposed), CAIRN_EOUT_OF_ORDER, CAIRN_EUNKNOWN_PRODUCER,
 * CAIRN_EPRODUCER_FENCED (committed but refused by the producer table:
 * nothing was written). */
typedef void (*rgroup_produce_cb)(struct rgroup_produce *req, int status, int64_t base_offset);
typedef void (*rgroup_close_cb)(struct rgroup *rg);

/* One produce request; the caller allocates it and keeps it (and the batch
 * it names) until the callback. */
struct rgroup_produce {
  void *data; /* for the caller */
  /* private */
  struct rgroup *rg;
  const uint8_t *batch;
  size_t len;
  int32_t records;
  rgroup_produce_cb cb;
  struct rgroup_produce *next;
};

/* One proposed entry and the requests it carries. */
struct rgroup_entry {
  struct raft_apply apply;
  struct rgroup *rg;
  struct rgroup_produce *reqs; /* in entry order */
  struct rgroup_entry *next;
};

/* Called after entries were appended to the store (the high watermark
 * moved), from inside Raft's apply: it may not call back into rg. */
typedef void (*rgroup_applied_cb)(struct rgroup *rg);

/* Called when this replica has started leading a term: right after it
 * proposed the term's first entry (the barrier), from a libuv check
 * callback; it may call back into rg. Not called when the barrier could
 * not be proposed (the owner's slow sweeps cover that). */
typedef void (*rgroup_leading_cb)(struct rgroup *rg);

struct rgroup {
  void *owner_data; /* for the owner; set after rgroup_open */
  rgroup_applied_cb on_applied; /* for the owner; set after rgroup_open */
  rgroup_leading_cb on_leading; /* for the owner (may be NULL); set after rgroup_open */
  uv_loop_t *loop;
  struct transport *tr;
  uint64_t group_id;
  uint64_t self_id;
  uint64_t preferred_id; /* the first replica of the set */
  char *dir;
  enum rgroup_state state;
  struct store *store;
  /* The catch-up in progress (catchup.h), allocated when a restored
   * snapshot finds the log behind it and closed once caught up; NULL
   * otherwise (rgroup_is_catching_up). */
  struct catchup *catchup;
  unsigned catchups_closing; /* finished ones whose handles still close */
  uint64_t catchup_fetched;  /* bytes fetched by the finished ones */
  struct fetch_server fetch;
  uint64_t tick_ms;         /* when rgroup's tick last ran (rgroup_on_raft_tick) */
  bool transferring;
  bool stopping;                     /* its node is stopping: refuses leadership (rgroup_handoff) */
  struct rgroup_transfer *transfers; /* every raft_transfer raft may still reference */
  int last_role;            /* raft_state() at the previous tick */
  unsigned preferred_ready; /* ticks the preferred replica has been caught up */
  uint64_t last_transfer_ms;
  int closing_parts;        /* parts still closing after Raft closed */
  size_t raft_log_budget;
  double entry_bytes_avg;   /* of entries applied, for the snapshot threshold */
  uint64_t applies;
  bool no_preferred_leader;
  /* Inbound connections for this replica: with raft_uv (--raft-mux off)
   * its transport, made with each Raft instance (rgroup_raft.c), which
   * routes Raft's connections and the fetches; with the mux (Raft's
   * messages over the multiplexer) only the fetches' route (rt NULL). */
  struct raft_uv_transport *rt;
  struct transport_route fetch_route;
  /* The replica's raft_io (rgroup_wal.c): with opts.wal and opts.mux its
   * own (riow_mux.h: the node's log and multiplexer, no raft_uv);
   * otherwise raft_uv's, with opts.wal its storage methods in the node's
   * log (riow_uv.h). Both begin with the io: rg->wio.io is it. */
  union {
    struct raft_io io;
    struct riow_uv uv;
    struct riow_mux mux;
  } wio;
  struct rgroup_raft_io_ops io_ops; /* the io's methods under the wrappers (rgroup_raft.c) */
  /* the Raft instance (rgroup_raft.c) */
  struct rgroup_opts opts;  /* filled options, for reopening */
  char *self_address;
  size_t ticker_slot;       /* index in the ticker's list; SIZE_MAX: not on it */
  bool ticker_asleep;       /* on the ticker's slow list (rgroup_ticker.h) */
  unsigned raft_tick_ms;    /* the tick period raft asked for at its start */
  bool raft_open;           /* raft_init done, raft_close not called yet */
  bool raft_closing;        /* raft_close called, its callback pending */
  bool raft_failed;         /* a write of this Raft instance failed: latched */
  unsigned recover_delay_ms; /* next reopen delay; 0 after a write succeeded */
  uint64_t recoveries;      /* reopens after a failed write */
  /* Owned, allocated when first needed (most replicas never fail, and
   * only leaders propose a barrier), closed with the replica: */
  uv_timer_t *recover_timer; /* defers the close after a failure; backoff */
  uv_check_t *barrier_check; /* a barrier right after becoming leader */
  void (*handle_closed_cb)(struct rgroup *rg);
  raft_term term_appended;  /* last term in which this replica appended as leader */
  raft_index term_first_index; /* index of its first entry in that term */
  uint64_t barriers;        /* barriers appended at the start of a term */
  uint64_t results_held;    /* AppendEntries results dropped until the term's
                               first entry was durable (rgroup_raft_io_recv) */
  struct raftfix_clamp clamp;     /* answers cut back to what was verified (raftfix.h) */
  struct raftfix_conf conf_kept;  /* the committed configuration, for a rollback (raftfix.h) */
  struct raftfix_held snap_held;  /* an InstallSnapshot raft would drop now (raftfix.h) */
  uint64_t second_votes_withheld; /* RequestVotes kept from raft: rgroup_elect_second_vote */
  uint64_t below_snapshot;        /* AppendEntries rewritten: raftfix_below_snapshot */
  uint64_t snapshots_held;        /* InstallSnapshot held: raftfix_snapshot_hold */
  uint64_t log_trimmed;           /* bytes of raft's log tables freed: rgroup_raft_trim */
  uint64_t second_leaders; /* messages of a leader of its own term, dropped: ..._same_term_leader */
  struct rgroup_cap cap;    /* AppendEntries bounded in bytes (rgroup_cap.h) */
  /* a prompt election after the leader's node was seen gone (rgroup_elect.c) */
  uint64_t elect_gone;      /* that node, 0: none */
  uint64_t elect_since_ms;  /* when it was seen gone */
  unsigned elect_rank;      /* this replica's turn among the survivors */
  bool elect_fired;         /* its TimeoutNow was handed to itself */
  uint64_t elections_prompted; /* for the node's metrics */
  struct raft_fsm fsm;
  struct raft raft;
  size_t max_entry_bytes;
  /* group commit */
  struct rgroup_produce *queue_head, *queue_tail;
  size_t queue_bytes;
  unsigned inflight;             /* entries proposed, not called back: at most
                                    RGROUP_MAX_INFLIGHT */
  struct rgroup_applied applied; /* set by the state machine for the apply cb */
  struct rgroup_apply ap;         /* the state machine's scratch and counters */
  /* idempotent producers (rgroup_fsm.c) */
  struct producer_state producers; /* covers the store below producers_offset */
  int64_t producers_offset;
  uint64_t producers_index;        /* Raft index of the last entry it covers */
  int64_t producers_saved_offset;  /* what <dir>/producers covers (durable log);
                                    * retention deletes only below it */
  uint32_t retained_early;         /* rows deleted by the tick's passes (rgroup_retention) */
  bool producers_loaded;           /* <dir>/producers read (or found absent) */
  /* A checkpoint waiting for the store to commit (a pgstore's flush
   * answered CAIRN_EPENDING): the table encoded as of ck_covers, written
   * to <dir>/producers once durable_offset reaches it. NULL: none. */
  uint8_t *ck_enc;
  size_t ck_len;
  int64_t ck_covers;
  struct producer_state snap_producers; /* a restored snapshot's table, or a */
  int64_t snap_producers_offset;        /* peer's (catch-up), adopted once the */
  bool snap_producers_pending;          /* log reaches this offset */
  bool producers_from_peer; /* the table pending or adopted is a peer's: saved once caught up */
  /* A restored snapshot's log start, taken once the log covers the
   * snapshot (rgroup_fsm_take_start): a LOG_START inside the snapshot is
   * an entry this replica never applies. 0: none. */
  int64_t snap_start;
  /* The table lacks producers of batches deleted below the log's start
   * before it recorded them (a log restarted at a peer's start with an
   * older table): such a replica asks a peer for its table at its next
   * restore, and serves its own to no one. */
  bool producers_gap;
  bool fatal; /* the store failed: this replica applies nothing more */
  uint64_t store_failed_ms; /* wall clock of the store's failure (fatal or store_down), 0 none */
  /* A PostgreSQL store that failed (rgroup_raft.c, "store down"): Raft is
   * closed as after a failed write, and reopened only once the store is
   * revived on the thread pool. */
  bool store_down;               /* the store is fatal and being revived */
  /* After a revive, until the store has committed a write past what it
   * held then (a database whose disk is still full answers the revive's
   * reads but fails the next write, and the replica would otherwise cycle
   * between failed and revived with its failure seldom visible): the
   * failure stays reported (rgroup_store_failure) and the revive backoff
   * is not reset by Raft's own successful writes. */
  bool store_probation;
  int64_t probation_offset;      /* durable_offset when the store came back */
  uint64_t probation_start;      /* uv_now when it came back */
  uint64_t probation_since_ms;   /* the failure's time, kept for the report */
  char *probation_reason;        /* owned: the failure's message, kept for the report */
  bool revive_busy;              /* a revive job (its uv_work_t allocated) is queued or running */
  bool revive_counted;           /* rgroup_close_parts waits for it */
  struct pgstore_revive *revive_job;
  uint64_t store_revives;        /* revives that succeeded */
  rgroup_close_cb close_cb;
  uint64_t snapshots;            /* taken by this replica */
  uint64_t restores;             /* snapshots installed (restored) on this replica */
  uint64_t snapshots_sent;       /* InstallSnapshot messages sent to followers */
  uint64_t apply_ns;             /* uv_hrtime() when the entry being applied, or the
                                    last one, began applying (its commit time) */
  uint64_t snapshot_capture_ns;  /* loop-thread time capturing them (rgroup_fsm.c) */
  uint64_t snapshot_sync_ns;     /* thread-pool time syncing and checksumming the store */
  struct rgroup_snap *snap;      /* the snapshot in flight (rgroup_fsm.c), or NULL */
  uint64_t entries_proposed;
  uint64_t entries_pipelined; /* of those, proposed while another was in flight */
  uint64_t batches_proposed;
  /* the leader's heartbeat pace (rgroup_pace.c) */
  uint64_t pace_quiet_ms;     /* since when it has been quiet, 0: not quiet */
  raft_index pace_last_index; /* raft_last_index at the previous tick */
  raft_term pace_term;        /* the term in which the pace last dropped */
  uint64_t pace_quiesces;     /* times the pace dropped */
  uint64_t pace_wakes;        /* times it went back up */
  bool coal_quiet;            /* Raft's heartbeats stopped: the coalesced beat stands in */
  uint64_t coal_hold_ms;      /* not coalesced again before this (uv_now), after a refusal */
  uint64_t coal_refusals;     /* coalesced beats of this leader refused or unanswered */
  uint64_t coal_follow_ms;    /* when this follower last accepted a coalesced beat (uv_now) */
  /* sparse beats (vouch.h): as a leader, the followers that accepted this
   * quiet period's (term, last index) and in which of their epochs */
  struct rgroup_coal_ack {
    uint64_t node, epoch;
  } coal_acks[RGROUP_COAL_ACKS];
  bool coal_to_name; /* on the node's list of groups to name (vouch_to_name) */
  /* as a follower: what it accepted last, from which node, in which of the
   * node's generations (vouch_peer.in_gen); coal_vouch_node 0: nothing */
  uint64_t coal_vouch_node, coal_vouch_gen;
  raft_term coal_vouch_term;
  raft_index coal_vouch_index;
  uint32_t heard_prev; /* as leader: recent_recv before raft's last contact check, bit per
                          configuration index (rgroup_in_sync) */
  /* a quiet group's log compaction (rgroup_compact.c) */
  bool compact_armed;          /* snapshot threshold and trailing at 1 for one snapshot */
  bool snapshot_soon;          /* threshold at 1 until a snapshot at snapshot_soon_index */
  raft_index snapshot_soon_index; /* the LOG_START command's entry (rgroup_compact_snapshot_soon) */
  raft_index compact_small_at; /* the log end at which its log was too small to compact */
  unsigned snap_threshold;     /* the values raft has outside a compaction */
  unsigned snap_trailing;
  uint64_t compactions;        /* barriers proposed to compact, as leader */
  uint64_t raft_sent;         /* Raft messages sent by this replica (for metrics) */
  /* owned: RGROUP_ERRMSG_SIZE bytes from the first error on, NULL before
   * (a replica that never failed keeps none); rgroup_errmsg reads it */
  char *errmsg;
};

/* The last error's message: "" if none (or none could be kept, out of
 * memory). Valid until the next error or rgroup_release. */
const char *rgroup_errmsg(const struct rgroup *rg);

/* Sets it, printf-style, cut at RGROUP_ERRMSG_SIZE; the buffer is
 * allocated with the first error. rgroup's own files only. */
void rgroup_set_errmsg(struct rgroup *rg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Bytes fetched by this replica's catch-ups, for the node's metrics. */
uint64_t rgroup_catchup_fetched(const struct rgroup *rg);

/* Starts (or retargets) a catch-up to target_next / target_index: the
 * state machine's restore (rgroup_fsm.c). Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int rgroup_catchup_start(struct rgroup *rg, int64_t target_next,
                                                             uint64_t target_index);

/* Frees the messages rg keeps for its owner (rgroup_errmsg, the
 * probation's reason). The owner calls it once before freeing rg's
 * memory: after the close callback, or after an rgroup_open that failed
 * with nothing left to close. */
void rgroup_release(struct rgroup *rg);

/* The half of a postgresql replica's open that waits on the database
 * (connect, migrate, load: pgstore_open_begin) for options o, which need
 * only the pg_* and topic fields and plog's retention and batch size set.
 * Context: any thread (the thread pool), touching no loop state. On
 * success *out goes to rgroup_open as o->pg_begun, or to
 * pgstore_open_abandon. Returns 0 or a negative code with err filled. */
__attribute__((warn_unused_result)) int rgroup_pgstore_begin(const struct rgroup_opts *o,
                                                             struct store **out, char *err,
                                                             size_t errlen);

/* The partition-log half of a replica's open: creates <dir>/raft and
 * opens (recovers, or creates) <dir>/log with o->plog, the syncs of a
 * recovery included. Context: any thread (the thread pool), touching no
 * loop state. On success *out goes to rgroup_open as o->plog_begun, or to
 * store_close. Returns 0 or a negative code with err filled. */
__attribute__((warn_unused_result)) int rgroup_plog_begin(const char *dir,
                                                          const struct rgroup_opts *o,
                                                          struct store **out, char *err,
                                                          size_t errlen);

/* Opens (or creates) the replica of group_id in dir with the given replica
 * set, which every replica must be given identically: a fresh replica
 * bootstraps that configuration, so all of them agree on it without any
 * exchange. Starts Raft. Caller allocates rg and keeps tr open until the
 * close callback. Returns 0, or a negative code with rg->errmsg set: then
 * nothing is left to close, unless the failure came once Raft was
 * initialized (a bootstrap or start whose write failed, say on a full or
 * fatal node-wide log): then rg->state is RGROUP_CLOSING, and the caller
 * sets rg->close_cb, which fires once rg is closed, and keeps rg (and tr)
 * until it has. */
__attribute__((warn_unused_result)) int rgroup_open(struct rgroup *rg, uv_loop_t *loop,
                                                    struct transport *tr, uint64_t group_id,
                                                    uint64_t self_id, const char *dir,
                                                    const struct rgroup_replica *replicas,
                                                    unsigned n, const struct rgroup_opts *opts);

/* Queues one validated batch for replication. Borrows batch until the
 * callback, which fires exactly once if this returns 0 (with
 * CAIRN_ESHUTDOWN on close). Returns 0, CAIRN_ENOTLEADER (ask
 * rgroup_leader), CAIRN_EFATAL, or the batch's validation error with
 * rg->errmsg set. */
__attribute__((warn_unused_result)) int rgroup_produce(struct rgroup *rg,
                                                       struct rgroup_produce *req,
                                                       const uint8_t *batch, size_t len,
                                                       rgroup_produce_cb cb);

/* Proposes deleting every record below offset (Kafka's DeleteRecords) on
 * every replica: a LOG_START command (rgroup_cmd.h) through the Raft log,
 * queued behind the batches already queued. offset -1 means the high
 * watermark. cmd is the command's buffer, filled here; req and cmd are
 * borrowed until the callback, which fires exactly once if this returns 0,
 * with the log start once the command is applied (an offset at or below
 * the start changes nothing and answers the start), or the codes of
 * rgroup_produce_cb. Returns 0, CAIRN_ENOTLEADER (also while this leader
 * has not applied its term's first entry: its high watermark may be
 * behind), CAIRN_ESHUTDOWN, CAIRN_EFATAL, CAIRN_EOFFSET (offset below -1,
 * or above the high watermark; rg->errmsg says which), or CAIRN_EPOLICY
 * (a PostgreSQL store: its deletes run off the loop and may not race the
 * appends that follow in the log). */
__attribute__((warn_unused_result)) int rgroup_delete_records(struct rgroup *rg,
                                                              struct rgroup_produce *req,
                                                              uint8_t *cmd, int64_t offset,
                                                              rgroup_produce_cb cb);

/* The current leader as this replica knows it: id 0 when unknown (also
 * while recovering from a failed write, or once closing). The
 * address is borrowed, valid until the next loop iteration. */
void rgroup_leader(struct rgroup *rg, uint64_t *id, const char **address);

/* Is this replica the leader? False while it recovers. */
bool rgroup_is_leader(struct rgroup *rg);

/* Is it the leader, and has it applied its term's first entry? Until then
 * entries committed in earlier terms may still be unapplied here (a new
 * leader learns they are committed only by committing an entry of its own
 * term), so its high watermark can be behind what the previous leader
 * served: reads must wait (produce may queue). */
bool rgroup_leader_caught_up(struct rgroup *rg);

/* As the leader: the in-sync replicas, itself included: the voters it
 * heard from lately (an AppendEntries result since raft's last contact
 * check, or, while the group is quiet, the follower's node answering the
 * coalesced beat: rgroup_pace.h) and at most max_lag entries behind its
 * last index. Writes at most configuration.n ids to out; returns how many
 * (0 when this replica does not lead). */
size_t rgroup_in_sync(struct rgroup *rg, raft_index max_lag, uint64_t *out);

/* The partition store, for reads. Returns borrowed (valid until close).
 * Everything in it is committed: the high watermark is its next offset. */
struct store *rgroup_store(struct rgroup *rg);

/* Why a replica stopped applying: its store failed a write (a file write or
 * fsync, or a PostgreSQL statement or connection). */
struct rgroup_store_failure {
  bool failed;
  const char *reason; /* the store's errmsg, e.g. "postgresql: BEGIN: FATAL: ...";
                         borrowed, valid until the loop runs again; "" if not failed */
  uint64_t since_ms;  /* wall clock (ms since 1970) of the failure, 0: not known */
};

/* Fills *out with the replica's store failure, if any: a PostgreSQL store
 * being revived, or a store latched fatal for good. Context: loop thread. */
void rgroup_store_failure(struct rgroup *rg, struct rgroup_store_failure *out);

/* Records that the store failed now, unless a failure is already recorded
 * (rgroup_fsm.c and rgroup_raft.c call it where they see the failure). */
void rgroup_note_store_failed(struct rgroup *rg);

/* Whether a revived PostgreSQL store has yet to commit a write past what
 * it held when it came back (see store_probation). Context: loop thread. */
bool rgroup_store_probation(struct rgroup *rg);

/* Fails queued requests (CAIRN_ESHUTDOWN), closes Raft, its I/O and the
 * store, then calls cb. Callback: fires exactly once. */
void rgroup_close(struct rgroup *rg, rgroup_close_cb cb);

/* A clean shutdown: if this replica leads, first hands leadership to a
 * caught-up follower (waiting at most an election timeout), so producers
 * see a new leader rather than a gap; then rgroup_close(). A stopping
 * replica (rgroup_handoff) only waits for a transfer already running.
 * Callback: fires exactly once. */
void rgroup_shutdown(struct rgroup *rg, rgroup_close_cb cb);

/* Its node is stopping: marks this replica stopping, then, if it leads,
 * starts handing leadership to a caught-up peer (without closing), failing
 * queued produces with CAIRN_ENOTLEADER: a node that stops hands off every
 * partition at once, then closes them.
 *
 * A stopping replica refuses leadership until it closes: it drops a
 * TimeoutNow (a peer's handoff), starts no election (no Raft tick while it
 * does not lead, no prompt election when its leader's node goes:
 * rgroup_leader_gone), and its rgroup_shutdown() hands nothing off a
 * second time and closes its store unflushed (store_close_unflushed). It
 * still votes, so replicas on nodes that keep running elect among
 * themselves. When every node stops at once, leaderships do not bounce
 * between stopping nodes (at 10,000 partitions each node handed off
 * ~20,000 times and one close waited on each bounce: over 30 s).
 * Returns 0 or a negative code (nothing to hand off is 0). */
__attribute__((warn_unused_result)) int rgroup_handoff(struct rgroup *rg);

/* The node node_id, seen gone (its cluster connection dropped and a new
 * one refused: nodewatch.h): if it is this follower's leader, starts an
 * election now rather than after the election timeout (rgroup_elect.c);
 * nothing otherwise. */
void rgroup_leader_gone(struct rgroup *rg, uint64_t node_id);

/* Moves a prompt election on (the next survivor's turn) and ends it once a
 * leader is known; called by the tick and after each received message. */
void rgroup_elect_check(struct rgroup *rg);

/* Called right after raft_start: a voter that starts knowing no leader
 * runs its first candidacy after the short election timeout, and keeps it
 * until a leader is known (rgroup_elect.c); nothing otherwise. In a group
 * just bootstrapped (its log holds only the configuration) only the
 * preferred replica does: the others keep raft's full timeout, so the
 * first leader is the preferred one and no hand-over follows a second
 * later (a new topic is ready for Produce sooner: server/topic_wait.h). */
void rgroup_elect_on_start(struct rgroup *rg);

/* Called once a replica is seen a candidate (its election timer ran out:
 * the leader is silent, or a leadership transfer): it keeps the short
 * election timeout until a leader is known, as rgroup_elect_on_start, so
 * that a candidacy that splits the vote with another (two followers whose
 * timers ran out within the same tick, one 100 ms heartbeat apart at most)
 * is retried after 200-300 ms, not after another full timeout. */
void rgroup_elect_on_candidacy(struct rgroup *rg);

/* Called before raft receives a RequestVote m: if this replica knows no
 * leader and m's candidate's log is behind its own, it takes the short
 * election timeout until a leader is known, as rgroup_elect_on_start. */
void rgroup_elect_on_vote_request(struct rgroup *rg, const struct raft_message *m);

/* The raft-level half of rgroup_elect_on_start, also used by the
 * controller and the simulation (tests/sim): if r is a candidate or a
 * follower that knows no leader, and one of at least two voters, sets its
 * election timeout to short_ms and brings its running timer's expiry down
 * to a draw from [short_ms, 2 * short_ms] after now (with r's own
 * io->random, which its owner narrows: rgroup_elect_spread_max; never
 * later than it was), and returns true; false and no
 * change otherwise. The caller restores the configured timeout once a
 * leader is known. */
bool rgroup_elect_start_timer(struct raft *r, unsigned short_ms);

/* Ends the short timeout: r's election timeout back to election_ms, and
 * the running timer's length drawn again as raft draws it (io->random
 * over [election_ms, 2 x election_ms], narrowed by its owner) (raft 0.15
 * would keep the short one while it follows). */
void rgroup_elect_restore_timer(struct raft *r, unsigned election_ms);

/* Is m a RequestVote (or pre-vote) that r, knowing no leader, refuses
 * for the candidate's log being behind its own? */
bool rgroup_elect_outlogged(struct raft *r, const struct raft_message *m);

/* raft 0.15 draws every election timer from [T, 2T] with io->random
 * (electionResetTimer, its only use of it); rgroup, the controller and
 * the simulation interpose raft_io.random so that the draw comes from
 * [T, T + T/2] instead: the followers of a frozen or cut-off leader time
 * out at most 1.5 T after its last heartbeat rather than 2 T, which is
 * what kept writes after such a fault above 2 s (docs/fault-tolerance.md).
 * Half of T still spreads the candidacies far wider than a round trip
 * and a vote's fsync, and pre-vote makes a candidacy that loses harmless.
 * Returns the upper bound to draw below in place of max (min when the
 * range is empty). */
int rgroup_elect_spread_max(int min, int max);

/* The term of the last entry of r's log (of its last snapshot when the
 * log holds no entry); raft 0.15 has no call for it. */
raft_term rgroup_elect_last_term(const struct raft *r);

/* The short election timeout: RGROUP_ELECT_SHORT_MS or twice the
 * heartbeat, whichever is longer, and never above the configured one. */
unsigned rgroup_elect_short_timeout(unsigned heartbeat_ms, unsigned election_ms);

/* raft 0.15's pre-vote can stall for good (etcd-io/etcd#8243): the voters
 * answer a pre-vote with the request's term, and a pre-candidate never
 * adopts a higher term from a refusal, so a replica holding the longest
 * log but the lowest term (back from a crash) is refused by every voter
 * for its term, and every other candidate by it for its log. The two
 * halves of the fix, as etcd's, both used by rgroup_raft.c and the
 * simulation (tests/sim):
 *
 * rgroup_elect_prevote_answer (before sending m from r): a pre-vote
 * refused carries r's term when that is higher. Returns whether m
 * changed.
 *
 * rgroup_elect_prevote_refused (before r receives m): a pre-candidate
 * refused by a voter of a higher term takes that term, as a follower: m
 * is rewritten into a RequestVote of that term from the voter that shows
 * no log (raft bumps the term, converts and votes on logs as usual).
 * Returns whether m changed. */
bool rgroup_elect_prevote_answer(const struct raft *r, struct raft_message *m);
bool rgroup_elect_prevote_refused(const struct raft *r, struct raft_message *m);

/* raft 0.15 grants the target of its own pending leadership transfer a
 * vote even when it already voted for another candidate in that term
 * (electionVote's is_transferee): a leader handing over (r->transfer set,
 * kept after it stepped down) that voted for a third replica's candidacy
 * in term T also votes for the transferee in T, and both lead term T. Seen
 * on 3 nodes stopping together over 10,000 partitions: the
 * second leader's AppendEntries then wrote the follower half of raft's
 * state union over the first's (a SEGV in tickLeader), and two leaders of
 * one term can each commit an entry at the same index. Returns whether m
 * is such a RequestVote: r must not receive it (the candidate sees a lost
 * message and tries a later term). Pre-votes are not votes: left alone. */
bool rgroup_elect_second_vote(const struct raft *r, const struct raft_message *m);

/* Is m an AppendEntries or InstallSnapshot of r's own term while r leads
 * it? Never from a correct Raft (one leader per term); raft 0.15 would
 * take it as a follower does (recvUpdateLeader, assertions compiled out)
 * and write the follower half of its state union over the leader's. */
bool rgroup_elect_same_term_leader(const struct raft *r, const struct raft_message *m);

/* Frees what a received message owns, for a message raft never sees (the
 * entries of an AppendEntries, a snapshot's data and configuration):
 * a latched instance drops its messages this way (rgroup_raft.c; also the
 * metadata group's, controller.c). Ownership: consumes what m owns, not
 * m itself. */
void rgroup_raft_discard(struct raft_message *m);

/* 0 if m names where it goes, or RAFT_NOCONNECTION: raft 0.15 may answer
 * an AppendEntries after the leader it came from is forgotten, with a NULL
 * destination address, and raft_uv then crashes on it (strlen in
 * uvClientInit; fixed upstream in 35479fc). Such a message cannot be
 * delivered anyway; every raft_io send of a group (the partitions' in
 * rgroup_raft.c, the metadata group's in controller.c) refuses it, which
 * raft treats as a failed send. */
int rgroup_raft_check_destination(const struct raft_message *m);

/* Is a leadership transfer of this replica under way? */
bool rgroup_handing_off(struct rgroup *rg);

/* The replica leadership goes back to when it is healthy and caught up
 * (the metadata's first replica; it changes when replicas are re-placed). */
void rgroup_set_preferred(struct rgroup *rg, uint64_t id);

/* Is this replica catching up (serving nothing it lacks, refusing
 * produce)? */
bool rgroup_is_catching_up(const struct rgroup *rg);

/* Applies the topic's retention limits (rgroup_opts.plog) to this
 * replica's log, as every replica does on its own (Kafka's way): deletes
 * whole segments too old or beyond the size limit, oldest first, but only
 * below what the replica's saved producer table covers, so a restart
 * rebuilds that table from the log that is left and a retried batch is
 * still known. A PostgreSQL store's rows below a start a DeleteRecords
 * moved go too (store_info's saved_start_offset; the replica's tick also
 * runs a pass for them, without waiting for the node's). Nothing while the
 * replica is opening, recovering, closing or catching up. *deleted counts
 * the segments (rows) removed. Returns 0 or a negative code (the store's;
 * logged). Context: loop thread. */
__attribute__((warn_unused_result)) int rgroup_retention(struct rgroup *rg, int64_t now_ms,
                                                         uint32_t *deleted);

/* Replaces the topic's retention limits (0: no limit) on a running
 * replica: the next rgroup_retention applies them, and a store reopened
 * later (a revive) opens with them. Deletes nothing itself. Context: loop
 * thread. */
void rgroup_set_retention(struct rgroup *rg, uint64_t bytes, int64_t ms);

/* Removes a closed replica's directory and everything in it. Returns 0 or
 * -errno. Blocks. */
__attribute__((warn_unused_result)) int rgroup_delete(const char *dir);

#endif
